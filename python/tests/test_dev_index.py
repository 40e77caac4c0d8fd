# SPDX-License-Identifier: Apache-2.0
"""put_pages / get_pages with index arrays in GPU memory (opts.index_mem
GW_INDEX_DEVICE), on both call paths (the C accelerator and ctypes).

Runs against the fake CUDA driver of tests/fakecuda (ctest sets
GPUWIRE_CUDA_LIB; skipped without it): GPU memory is the fake's, and the
index arrays are a stand-in for a CUDA tensor, an object with
__cuda_array_interface__ over fake device memory (the form the package
takes besides torch tensors, which need a real GPU: test_gpu.py).  Pages
move byte-exact over intra between two contexts, a bad index fails the
request naming the entry with nothing moved, and the wrong element type,
arrays split between host and GPU and a host region give clear errors."""
import ctypes
import os
import threading

import pytest

import gpuwire
from gpuwire import _lib

N, POOL, PAGE = 64, 160, 1040
LIB = os.environ.get("GPUWIRE_CUDA_LIB", "")
if "fakecuda" not in LIB:
    pytest.skip("needs the fake CUDA driver (GPUWIRE_CUDA_LIB=libgwfakecuda.so; ctest sets it)",
                allow_module_level=True)


class Drv:
    """The few driver calls the test makes itself, through the fake."""

    def __init__(self):
        lib = ctypes.CDLL(LIB)
        gpa = lib.cuGetProcAddress_v2
        gpa.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ctypes.c_ulonglong,
                        ctypes.c_void_p]

        def fn(name, *argtypes):
            f = ctypes.c_void_p()
            assert gpa(name.encode(), ctypes.byref(f), 12000, 0, None) == 0 and f.value, name
            return ctypes.CFUNCTYPE(ctypes.c_int, *argtypes)(f.value)
        P = ctypes.c_void_p
        assert fn("cuInit", ctypes.c_uint)(0) == 0
        self.alloc = fn("cuMemAlloc", P, ctypes.c_size_t)
        self.htod = fn("cuMemcpyHtoD", ctypes.c_ulonglong, P, ctypes.c_size_t)
        self.dtoh = fn("cuMemcpyDtoH", P, ctypes.c_ulonglong, ctypes.c_size_t)

    def buf(self, n):
        p = ctypes.c_ulonglong()
        assert self.alloc(ctypes.addressof(p), n) == 0
        return p.value

    def put(self, ptr, data):
        b = (ctypes.c_char * len(data)).from_buffer_copy(bytes(data))
        assert self.htod(ptr, b, len(data)) == 0

    def get(self, ptr, n):
        b = (ctypes.c_char * n)()
        assert self.dtoh(b, ptr, n) == 0
        return bytes(b)


class Dev:
    """Device memory seen through __cuda_array_interface__ (a CUDA tensor's stand-in)."""

    def __init__(self, ptr, n, typestr="|u1"):
        self.ptr = ptr
        size = int(typestr[2:])
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": (n // size,), "typestr": typestr,
                                         "version": 3}


def pattern(n, seed):
    return bytes((i * 7 + seed) & 0xff for i in range(n))


def picks(seed):
    import random
    r = random.Random(seed)
    return r.sample(range(POOL), N)


@pytest.fixture(scope="module")
def env():
    d = Drv()
    a = gpuwire.Context(transports="intra")
    b = gpuwire.Context(transports="intra")
    lis = a.listen()
    got = {}
    t = threading.Thread(target=lambda: got.setdefault("ep", lis.accept(10)))
    t.start()
    ep = b.connect(lis.address)
    t.join()
    if ep.transport != "intra":
        pytest.skip("the endpoint is %s, not intra" % ep.transport)
    stop = threading.Event()
    serve = threading.Thread(target=lambda: [a.progress() for _ in iter(stop.is_set, True)])
    serve.start()
    size = POOL * PAGE
    tp, sp = d.buf(size), d.buf(size)
    d.put(tp, pattern(size, 1))
    d.put(sp, pattern(size, 2))
    mt = a.register(Dev(tp, size))
    ms = b.register(Dev(sp, size))
    rk = ep.unpack(mt.pack())
    yield d, ep, ms, rk, tp, sp
    stop.set()
    serve.join()
    b.close()
    a.close()


def idx(d, vals, typestr="<u4"):
    import array
    raw = array.array("I", vals).tobytes() if typestr[1:] in ("u4", "i4") else \
        array.array("Q", vals).tobytes()
    p = d.buf(len(raw))
    d.put(p, raw)
    return Dev(p, len(raw), typestr)


@pytest.fixture(params=["fast", "ctypes"])
def path(request):
    have = _lib.fast is not None
    if request.param == "fast" and not have:
        pytest.skip("the C accelerator is not built")
    _lib.find_fast(request.param == "fast")
    yield request.param
    _lib.find_fast(have)


def test_put_get_pages_device_indices(env, path):
    d, ep, ms, rk, tp, sp = env
    size = POOL * PAGE
    want = bytearray(d.get(tp, size))
    src = d.get(sp, size)
    li, ri = picks(1), picks(2)
    ep.put_pages(ms, rk, PAGE, idx(d, li), idx(d, ri), counted=5).wait(10)
    for x, y in zip(li, ri):
        want[y * PAGE:(y + 1) * PAGE] = src[x * PAGE:(x + 1) * PAGE]
    ri2 = picks(3)                                  # the local side None: pages 0..N-1
    ep.put_pages(ms, rk, PAGE, None, idx(d, ri2, "<i4")).wait(10)
    for x, y in enumerate(ri2):
        want[y * PAGE:(y + 1) * PAGE] = src[x * PAGE:(x + 1) * PAGE]
    assert d.get(tp, size) == bytes(want)
    # a get from device arrays: remote pages into local ones
    gl, gr = picks(4), picks(5)
    mine = bytearray(d.get(sp, size))
    ep.get_pages(ms, rk, PAGE, idx(d, gl), idx(d, gr)).wait(10)
    for x, y in zip(gl, gr):
        mine[x * PAGE:(x + 1) * PAGE] = want[y * PAGE:(y + 1) * PAGE]
    assert d.get(sp, size) == bytes(mine)
    d.put(sp, src)                                  # (the next test's source as it was)


def test_bad_index_moves_nothing(env, path):
    d, ep, ms, rk, tp, sp = env
    size = POOL * PAGE
    before = d.get(tp, size)
    bad = picks(6)
    bad[N // 2] = POOL + 1
    req = ep.put_pages(ms, rk, PAGE, idx(d, picks(7)), idx(d, bad))
    with pytest.raises(gpuwire.GwError) as e:
        req.wait(10)
    assert "entry %d" % (N // 2) in str(e.value) and "on the GPU" in str(e.value), str(e.value)
    assert d.get(tp, size) == before


def test_device_index_errors(env, path):
    d, ep, ms, rk, tp, sp = env
    with pytest.raises(gpuwire.InvalidArgument, match="int32 or uint32"):
        ep.put_pages(ms, rk, PAGE, idx(d, picks(8), "<u8"), idx(d, picks(9)))
    with pytest.raises(gpuwire.InvalidArgument, match="host memory and rpages in GPU memory"):
        ep.put_pages(ms, rk, PAGE, picks(8), idx(d, picks(9)))
    with pytest.raises(gpuwire.InvalidArgument, match="pair entry by entry"):
        ep.put_pages(ms, rk, PAGE, idx(d, picks(8)[:3]), idx(d, picks(9)))
    host = bytearray(POOL * PAGE)
    mh = ep.ctx.register(host)
    with pytest.raises(gpuwire.GwError, match="host memory"):
        ep.put_pages(mh, rk, PAGE, idx(d, picks(8)), idx(d, picks(9)))
    mh.close()


def test_host_int64_indices_between_gpus(env, path):
    """Host index arrays of 8 bytes (NumPy int64 / uint64, what engines
    usually hold block ids in) or int32 between GPU regions: the
    accelerator hands them to the library as they are (opts.index_type),
    which narrows and checks them in the pinned copy it makes; ctypes
    converts them first.  Paged puts and
    a table batch move the right pages, an int64 and an int32 array mix,
    and an item outside 0 .. 2^32-1 is refused naming the array and the
    position with nothing moved."""
    np = pytest.importorskip("numpy", reason="python3-numpy not installed")
    d, ep, ms, rk, tp, sp = env
    size = POOL * PAGE
    want = bytearray(d.get(tp, size))
    src = d.get(sp, size)

    def moved(li, ri):
        for x, y in zip(li, ri):
            want[y * PAGE:(y + 1) * PAGE] = src[x * PAGE:(x + 1) * PAGE]
    for k, (tl, tr) in enumerate([(np.int64, np.int64), (np.uint64, np.uint64), (np.int64, np.int32),
                                  (np.uint32, np.int64), (np.int32, np.int32), (np.int32, None)]):
        li, ri = picks(20 + 2 * k), picks(21 + 2 * k)
        if tr is None:                              # (the remote side None: pages 0..N-1)
            ri = list(range(N))
        ep.put_pages(ms, rk, PAGE, np.array(li, dtype=tl), None if tr is None else np.array(ri, dtype=tr),
                     counted=5).wait(10)
        moved(li, ri)
    assert d.get(tp, size) == bytes(want)
    ri = picks(40)                                  # one array, the other None (pages 0..N-1)
    ep.put_pages(ms, rk, PAGE, None, np.array(ri, dtype=np.int64)).wait(10)
    moved(range(N), ri)
    # a table over the same regions (one region a side, POOL entries of PAGE bytes)
    L = ep.ctx.dlist_local_table([ms], count=POOL, length=PAGE, per_region=POOL)
    R = ep.dlist_remote_table([rk], count=POOL, length=PAGE, per_region=POOL)
    li, ri = picks(41), picks(42)
    ep.put_batch(L, R, np.array(li, dtype=np.int64), np.array(ri, dtype=np.int64), counted=5).wait(10)
    moved(li, ri)
    assert d.get(tp, size) == bytes(want)
    for at in (0, 17, N - 1):
        for side in (0, 1):
            for v, dt, msg in [(-1, np.int64, "-1 is negative"),
                               (1 << 32, np.int64, "4294967296 is above 4294967295"),
                               (1 << 63, np.uint64, "9223372036854775808 is above 4294967295"),
                               (-(1 << 31), np.int32, "-2147483648 is negative")]:
                a = [np.array(picks(43), dtype=dt), np.array(picks(44), dtype=dt)]
                a[side][at] = v
                name = ("lpages", "rpages")[side]
                with pytest.raises(gpuwire.InvalidArgument, match=r"%s\[%d\] = %s" % (name, at, msg)):
                    ep.put_pages(ms, rk, PAGE, a[0], a[1])
                name = ("lidx", "ridx")[side]
                with pytest.raises(gpuwire.InvalidArgument, match=r"%s\[%d\] = %s" % (name, at, msg)):
                    ep.put_batch(L, R, a[0], a[1])
    # in 0 .. 2^32-1 but past the region: the library's page check names the entry
    bad = np.array(picks(45), dtype=np.int64)
    bad[5] = POOL
    with pytest.raises(gpuwire.GwError, match="entry 5"):
        ep.put_pages(ms, rk, PAGE, np.array(picks(46), dtype=np.int64), bad)
    with pytest.raises(gpuwire.GwError, match="entry 5"):
        ep.put_batch(L, R, np.array(picks(46), dtype=np.int64), bad)
    assert d.get(tp, size) == bytes(want)           # nothing moved by any refused call
    R.close()
    L.close()
