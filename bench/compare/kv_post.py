# SPDX-License-Identifier: Apache-2.0
"""kv_post.py - the host's side of one paged GPU -> peer GPU transfer from
Python, the call kv_shapes.py's one-region shapes make (ep.put_pages with
NumPy uint32 index arrays and a counted notification, then Request.wait),
between two processes over intra, against the fake CUDA driver (no GPU:
the fake runs the page kernel on the CPU at launch; run with
FAKECUDA_KERNEL_NOCOPY=1 so that it moves nothing and what is timed is the
host's work alone).  Per shape it prints the medians (and bests) in us of

  post        ep.put_pages(...) returning its Request
  post+wait   the same through r.wait()
  post64      the same with the index arrays as NumPy int64 (NumPy's and
              torch's default integer: what an engine's block ids usually
              are), narrowed and checked by the package each call, and
              post64+wait
  plan        plan.post() of ep.prepare_put_pages(...) made once with the
              same arrays (a prepared page list where the library has them)
  plan+wait   the same through r.wait()
  dev         ep.put_pages(...) with the index arrays in GPU memory (two
              slices of one DevIdx: uint32 copied once with cuMemcpyHtoD; the
              library checks them on the GPU, no host pass or copy), and
              dev+wait (one-region shapes).  GW_TEST_PAGE_CHECK_FORM=reset
              (a test hook) times the form that resets the bounds word,
              launches the check and the page kernel and copies the word
              back per transfer; =split the check and the page kernel in
              two launches; unset, the check and the copy in one
              cooperative launch where the GPU takes one
  c.post      ep.put_notify of one page (the contiguous reference: one
              copy-engine copy and a notification, the fixed cost every
              transfer pays), and c.post+wait
  (tabRxBxSIZE shapes: ep.put_batch over descriptor tables of R regions
  a side instead of put_pages, plan through ep.prepare_put_batch where the
  package has it; 70B-4K of kv_shapes.py at 8,192 tokens is tab160x512x4K)
  all+wait    ep.put_notify of all the pages' bytes as one contiguous
              range, through r.wait() (the like-for-like reference of
              post+wait: same bytes, one copy-engine copy)

Each round runs every form once, in an order rotated from round to round,
so that no form always follows the longest wait (against the fake driver
all+wait copies the bytes on the CPU and leaves the caches cold for what
follows it: compare best figures there).

  GPUWIRE_CUDA_LIB=build/tests/fakecuda/libgwfakecuda.so FAKECUDA_DEVICES=2 \\
  FAKECUDA_KERNEL_NOCOPY=1 GPUWIRE_TRANSPORTS=intra \\
      /usr/bin/python3 bench/compare/kv_post.py [--build build] [--rounds 300]
      [--shapes 16384x2K,4096x16K,tab160x512x4K] [--forms post,plan]

--forms runs only the named forms (post, post64, plan, dev, c, all), the
others printed as -, so that a profiler's samples come from one form.
NumPy's BLAS threads are held to one (OPENBLAS_NUM_THREADS and the like,
unless set): they spin after any BLAS call and fill a profile.

The same with a real driver (GPUWIRE_CUDA_LIB unset) on a GPU machine
times the real calls, copies included.  Needs NumPy, not torch: device
memory comes from the driver (cuMemAlloc through ctypes) and reaches
gpuwire as an object with __cuda_array_interface__."""
import argparse
import ctypes
import multiprocessing as mp
import os
import statistics
import sys
import time

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
KI = 1024


class DevBuf:
    """n bytes of device memory from the driver's cuMemAlloc."""

    def __init__(self, n, dev=0):
        lib = ctypes.CDLL(os.environ.get("GPUWIRE_CUDA_LIB") or "libcuda.so.1")
        gpa = lib.cuGetProcAddress_v2
        gpa.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ctypes.c_ulonglong,
                        ctypes.c_void_p]

        def fn(name, *argtypes):
            f = ctypes.c_void_p()
            assert gpa(name.encode(), ctypes.byref(f), 12000, 0, None) == 0 and f.value, name
            return ctypes.CFUNCTYPE(ctypes.c_int, *argtypes)(f.value)
        P = ctypes.c_void_p
        assert fn("cuInit", ctypes.c_uint)(0) == 0
        nd = ctypes.c_int()
        assert fn("cuDeviceGetCount", P)(ctypes.addressof(nd)) == 0 and nd.value > 0
        dev = min(dev, nd.value - 1)            # the target's memory on GPU 1 where there is one
        d, ctx = ctypes.c_int(), ctypes.c_void_p()
        assert fn("cuDeviceGet", P, ctypes.c_int)(ctypes.addressof(d), dev) == 0
        assert fn("cuDevicePrimaryCtxRetain", P, ctypes.c_int)(ctypes.addressof(ctx), d.value) == 0
        assert fn("cuCtxSetCurrent", P)(ctx) == 0
        p = ctypes.c_ulonglong()
        rc = fn("cuMemAlloc", P, ctypes.c_size_t)(ctypes.addressof(p), n)
        assert rc == 0, "cuMemAlloc(%d) failed: %d" % (n, rc)
        self.ptr, self.n = p.value, n
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": "|u1", "data": (p.value, False), "version": 3}
        self._htod = fn("cuMemcpyHtoD", ctypes.c_ulonglong, P, ctypes.c_size_t)


def machine():
    """What ran it: CPUs and GPU 0's name from the driver (the host name is
    the same on every lease)."""
    gpu = "GPU name unknown"
    try:
        lib = ctypes.CDLL(os.environ.get("GPUWIRE_CUDA_LIB") or "libcuda.so.1")
        gpa = lib.cuGetProcAddress_v2
        gpa.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ctypes.c_ulonglong,
                        ctypes.c_void_p]
        f = {}
        for n in ("cuInit", "cuDeviceGet", "cuDeviceGetName"):
            p = ctypes.c_void_p()
            if gpa(n.encode(), ctypes.byref(p), 12000, 0, None) != 0 or not p.value:
                raise OSError(n)
            f[n] = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_int)(p.value)
        name, dev = ctypes.create_string_buffer(128), ctypes.c_int()
        f["cuInit"](None, 0, 0)
        if f["cuDeviceGet"](ctypes.addressof(dev), 0, 0) == 0 and \
                f["cuDeviceGetName"](ctypes.addressof(name), 128, dev.value) == 0:
            gpu = name.value.decode(errors="replace")
    except (OSError, AttributeError):
        pass
    return "%d CPUs, %s" % (os.cpu_count() or 0, gpu)


class DevIdx:
    """A uint32 index array copied once into device memory (cuMemcpyHtoD), as
    a block table kept on the GPU: an object with __cuda_array_interface__
    (typestr <u4) that put_pages reads on the GPU."""

    def __init__(self, a, dev=0):
        raw = a.tobytes()
        self.buf = DevBuf(len(raw), dev)
        assert self.buf._htod(self.buf.ptr, raw, len(raw)) == 0
        self.__cuda_array_interface__ = {"shape": (len(a),), "typestr": "<u4", "data": (self.buf.ptr, False),
                                         "version": 3}


class DevSlice:
    """Entries [off, off + n) of a DevIdx: two slices of one allocation, as
    an engine passes two columns of one block-table tensor."""

    def __init__(self, d, off, n):
        self.d = d
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": "<u4", "data": (d.buf.ptr + 4 * off, False),
                                         "version": 3}


class Part:
    """Bytes [off, off + n) of a DevBuf, as an object gpuwire registers."""

    def __init__(self, buf, off, n):
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": "|u1", "data": (buf.ptr + off, False),
                                         "version": 3}


def parse(shape):
    """(regions, pages moved, page size): NxSIZE is N pages of one region
    (put_pages); tabRxBxSIZE is R regions, B blocks moved from each on
    average, over descriptor tables (put_batch): 70B-4K is tab160x512x4K."""
    parts = shape.split("x")
    size = parts[-1]
    page = int(size[:-1]) * {"k": KI, "m": KI * KI}[size[-1].lower()] if size[-1] in "kKmM" else int(size)
    if parts[0].startswith("tab"):
        nreg, per = int(parts[0][3:]), int(parts[1])
        return nreg, nreg * per, page
    return 1, int(parts[0]), page


def target(conn, build, shapes):
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import gpuwire
    gpuwire.load_library(os.path.join(os.path.abspath(build), "libgpuwire.so.0"))
    ctx = gpuwire.Context(transports="intra", progress_thread=True)
    lis = ctx.listen("127.0.0.1:0")
    conn.send(lis.address)
    ep = lis.accept(30)
    mems, packs = [], []
    for s in shapes:
        nreg, n, page = parse(s)
        big, one = DevBuf(2 * n * page, 1), DevBuf(page, 1)
        m = [ctx.register(big), ctx.register(one)]
        if nreg > 1:                    # the table's regions: slices of the allocation
            per = 2 * n // nreg * page
            m += [ctx.register(Part(big, r * per, per)) for r in range(nreg)]
        mems += m
        packs.append([x.pack() for x in m])
    conn.send(packs)
    conn.recv()                        # done
    ep.close()
    ctx.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--shapes", default="16384x2K,4096x16K")
    ap.add_argument("--forms", default="post,post64,plan,dev,c,all",
                    help="forms to run (post, post64, plan, dev, c, all); the others print as -")
    args = ap.parse_args()
    forms = set(args.forms.split(","))
    bad = forms - {"post", "post64", "plan", "dev", "c", "all"}
    if bad:
        ap.error("--forms: unknown %s (post, post64, plan, dev, c, all)" % ",".join(sorted(bad)))
    shapes = args.shapes.split(",")
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import numpy as np
    import gpuwire
    gpuwire.load_library(os.path.join(os.path.abspath(args.build), "libgpuwire.so.0"))
    mpc = mp.get_context("spawn")
    conn, child = mpc.Pipe()
    tp = mpc.Process(target=target, args=(child, args.build, shapes), daemon=True)
    tp.start()
    ctx = gpuwire.Context(transports="intra", progress_thread=True)
    ep = ctx.connect(conn.recv())
    keys = [[ep.unpack(k) for k in ks] for ks in conn.recv()]
    print("# kv_post: %s, %s, load %s, nocopy=%s, %d rounds, medians (best) in us"
          % (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), machine(),
             open("/proc/loadavg").read().split(" ", 3)[:3], os.environ.get("FAKECUDA_KERNEL_NOCOPY", "-"),
             args.rounds))
    print("%-10s %14s %14s %14s %14s %14s %14s %14s %14s %14s %14s %14s" % (
        "shape", "post", "post+wait", "post64", "post64+wait", "plan", "plan+wait", "dev", "dev+wait", "c.post",
        "c.post+wait", "all+wait"))
    rng = np.random.default_rng(1)
    pc = time.perf_counter
    for i, s in enumerate(shapes):
        nreg, n, page = parse(s)
        src, one = DevBuf(2 * n * page, 0), DevBuf(page, 0)
        sm = ctx.register(src, access=gpuwire.ACCESS_LOCAL)
        om = ctx.register(one, access=gpuwire.ACCESS_LOCAL)
        rk, ok = keys[i][0], keys[i][1]
        lidx = rng.choice(2 * n, n, replace=False).astype(np.uint32)
        ridx = rng.choice(2 * n, n, replace=False).astype(np.uint32)
        lidx64, ridx64 = lidx.astype(np.int64), ridx.astype(np.int64)
        t = {"post": [], "wait": [], "post64": [], "wait64": [], "ppost": [], "pwait": [], "dpost": [], "dwait": [], "cpost": [], "cwait": [],
             "await": []}
        tabs = []
        dpost = None
        if nreg == 1:
            plan = ep.prepare_put_pages(sm, rk, page, lidx, ridx, counted=7)
            both = DevIdx(np.concatenate([lidx, ridx]))    # (one allocation: one pointer query a call)
            dl, dr = DevSlice(both, 0, n), DevSlice(both, n, n)

            def dpost():
                return ep.put_pages(sm, rk, page, dl, dr, counted=7)

            def post():
                return ep.put_pages(sm, rk, page, lidx, ridx, counted=7)

            def post64():
                return ep.put_pages(sm, rk, page, lidx64, ridx64, counted=7)
        else:                           # descriptor tables over nreg regions a side (computed)
            per = 2 * n // nreg
            tabs = [ctx.register(Part(src, r * per * page, per * page), access=gpuwire.ACCESS_LOCAL)
                    for r in range(nreg)]
            L = ctx.dlist_local_table(tabs, count=nreg * per, length=page, per_region=per)
            R = ep.dlist_remote_table(keys[i][2:], count=nreg * per, length=page, per_region=per)
            tabs += [L, R]
            prep = getattr(ep, "prepare_put_batch", None)   # (prepared selections, where the package has them)
            plan = prep(L, R, lidx, ridx, counted=7) if prep else None

            def post():
                return ep.put_batch(L, R, lidx, ridx, counted=7)

            def post64():
                return ep.put_batch(L, R, lidx64, ridx64, counted=7)
        def timed(fn, kpost, kwait):
            def run(keep):
                t0 = pc()
                r = fn()
                t1 = pc()
                r.wait(60)
                t2 = pc()
                del r
                if keep:
                    t[kpost].append(t1 - t0)
                    t[kwait].append(t2 - t0)
            return run

        def contiguous(keep):
            a0 = pc()
            ep.put_notify(sm, rk, 7, length=n * page).wait(60)
            a1 = pc()
            if keep:
                t["await"].append(a1 - a0)
        runs = []
        if "post" in forms:
            runs.append(timed(post, "post", "wait"))
        if "post64" in forms:
            runs.append(timed(post64, "post64", "wait64"))
        if plan is not None and "plan" in forms:
            runs.append(timed(plan.post, "ppost", "pwait"))
        if dpost is not None and "dev" in forms:
            runs.append(timed(dpost, "dpost", "dwait"))
        if "c" in forms:
            runs.append(timed(lambda: ep.put_notify(om, ok, 7), "cpost", "cwait"))
        if "all" in forms:
            runs.append(contiguous)
        # every round runs each form once, in an order rotated round by round,
        # so that none is always the one after the longest wait
        for rnd in range(args.rounds + 1):
            for j in range(len(runs)):
                runs[(rnd + j) % len(runs)](rnd > 0)
        print("%-10s %s" % (s, " ".join("%6.1f (%5.1f)" % (statistics.median(v) * 1e6, min(v) * 1e6)
                                         if v else "%14s" % "-"
                                         for k, v in t.items())), flush=True)
        if plan is not None:
            plan.close()
        for x in reversed(tabs):         # the lists before their regions
            x.close()
        sm.close()
        om.close()
    conn.send("done")
    ep.close()
    ctx.close()
    tp.join(30)


if __name__ == "__main__":
    main()
