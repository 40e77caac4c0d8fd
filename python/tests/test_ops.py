# SPDX-License-Identifier: Apache-2.0
"""put, get, put_notify, send/recv, flush and await on every transport usable
here, with bytearrays, NumPy arrays and CPU tensors; payloads checked where
they land."""
import asyncio

import pytest

import gpuwire

np = pytest.importorskip("numpy", reason="python3-numpy not installed")
try:        # imported here, not inside a test: a slow import (seconds on a loaded
    import torch  # machine) after the pair fixture connected would leave its endpoints
except ImportError:  # idle for that long (harmless since receives restart the
    torch = None     # peer-silence clock, but the tests stay quick)


def pattern(n, seed):
    return (np.arange(n, dtype=np.uint64) * 2654435761 + seed).astype(np.uint8)


def test_put_notify_get(pair):
    n = 1 << 20
    dst = np.zeros(n + 64, dtype=np.uint8)
    mem = pair.a.register(dst)
    rk = pair.key_to_b(mem)
    assert rk.nbytes == n + 64 and rk.addr == dst.ctypes.data
    src = pattern(n, 7)
    smem = pair.b.register(src)
    note = pair.expect_notify()
    r = pair.eb.put_notify(smem, rk, 0xABCD, offset=32)
    assert r.wait(20) == n and r.status == 0
    assert note() == 0xABCD
    assert (dst[32:32 + n] == src).all() and not dst[:32].any() and not dst[32 + n:].any()
    # get it back into an unregistered buffer, part of the region
    back = bytearray(1000)
    serve = pair.serve_a()
    g = pair.eb.get(back, rk, offset=32 + 5)
    g.wait(20)
    serve()
    assert bytes(back) == src[5:1005].tobytes()


def test_put_untracked_then_flush(pair):
    dst = np.zeros(4096, dtype=np.uint32)
    rk = pair.key_to_b(pair.a.register(dst))
    src = np.arange(4096, dtype=np.uint32)
    sm = pair.b.register(src)
    for i in range(4):
        assert pair.eb.put(sm, rk, offset=i * 4096, length=4096, local_offset=i * 4096,
                           track=False) is None
    done = pair.expect_notify()
    pair.eb.flush().wait(20)
    pair.eb.put_notify(sm, rk, 1, length=0).wait(20)
    done()
    assert (dst == src).all()


def test_send_recv_tags_truncation(pair):
    out = bytearray(16)
    r1 = pair.eb.recv(out, tag=0x500, mask=0xF00)
    j = pair.in_a(lambda: [pair.ea.send(b"abcdefgh", tag=0x5AA).wait(20),
                           pair.ea.send(b"x" * 40, tag=9).wait(20)])
    assert r1.wait(20) == 8 and r1.tag == 0x5AA and out[:8] == b"abcdefgh"
    small = bytearray(4)
    r2 = pair.eb.recv(small, tag=9)
    with pytest.raises(gpuwire.GwError) as e:
        r2.wait(20)
    j()
    assert e.value.name == "GW_ERR_TRUNCATED" and r2.nbytes == 40 and small == b"xxxx"


@pytest.mark.skipif(torch is None, reason="python3-torch not installed")
def test_torch_cpu_tensors(pair):
    dst = torch.zeros(3, 1000, dtype=torch.float32)
    mem = pair.a.register(dst)
    rk = pair.key_to_b(mem)
    src = torch.randn(1000)
    note = pair.expect_notify()
    pair.eb.put_notify(pair.b.register(src), rk, 1, offset=1000 * 4).wait(20)
    note()
    assert torch.equal(dst[1], src) and not dst[0].any() and not dst[2].any()


def test_asyncio_await(pair):
    dst = np.zeros(1 << 16, dtype=np.uint8)
    rk = pair.key_to_b(pair.a.register(dst))
    src = pattern(1 << 16, 3)
    sm = pair.b.register(src)
    note = pair.expect_notify()

    async def main():
        reqs = [pair.eb.put(sm, rk, offset=i * 4096, length=4096, local_offset=i * 4096)
                for i in range(16)]
        got = await asyncio.gather(*reqs)
        assert got == [4096] * 16
        await pair.eb.put_notify(sm, rk, 5, length=0)
        return await asyncio.wait_for(pair.eb.flush(), 20)
    asyncio.run(main())
    assert note() == 5
    assert (dst == src).all()


def test_asyncio_error_raised(pair):
    dst = bytearray(64)
    rk = pair.key_to_b(pair.a.register(dst))
    small = bytearray(2)

    async def main():
        r = pair.eb.recv(small, tag=1)
        await r
    j = pair.in_a(lambda: pair.ea.send(b"toolong", tag=1).wait(20))
    with pytest.raises(gpuwire.GwError, match="GW_ERR_TRUNCATED"):
        asyncio.run(main())
    j()


@pytest.fixture(params=["accelerator", "ctypes"])
def path(request):
    from gpuwire import _lib
    if request.param == "accelerator" and _lib.fast is None:
        pytest.skip("the _gwfast accelerator is not built (no Python headers)")
    if request.param == "ctypes":
        _lib.find_fast(False)
    yield request.param
    _lib.find_fast(True)


def test_both_call_paths(pair, path):
    """put / get / put_notify, tracked and not, and a timed-out wait, through
    the C accelerator and through ctypes alone."""
    dst = np.zeros(8192, dtype=np.uint8)
    rk = pair.key_to_b(pair.a.register(dst))
    src = pattern(8192, 11)
    sm = pair.b.register(src)
    note = pair.expect_notify()
    assert pair.eb.put(sm, rk, length=4096, track=False) is None
    assert pair.eb.put_notify(sm, rk, 77, offset=4096, length=4096, local_offset=4096).wait(20) \
        == 4096
    assert note() == 77 and (dst == src).all()
    back = np.zeros(8192, dtype=np.uint8)
    serve = pair.serve_a()
    assert pair.eb.get(pair.b.register(back), rk).wait(20) == 8192
    serve()
    assert (back == src).all()
    r = pair.eb.recv(bytearray(8), tag=4242)
    with pytest.raises(gpuwire.Timeout):
        r.wait(0.05)
    assert not r.done()
    with pytest.raises(gpuwire.GwError, match="OUT_OF_BOUNDS"):
        pair.eb.put(sm, rk, offset=1)
