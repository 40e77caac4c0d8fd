# SPDX-License-Identifier: Apache-2.0
"""py_post.py - the Python package's per-call post cost of the batched and
paged forms over host memory (no GPU), between two contexts of this process
over intra, through the C accelerator and through ctypes alone.  Per form
and entry count it prints the median (and best) in us of the post alone
(the call returning its Request; the wait is not timed), over --posts
posts, each waited before the next:

  batch32    ep.put_batch over descriptor tables (one region a side, n
             entries), NumPy uint32 index arrays, counted notification
  batch64    the same with NumPy int64 arrays (what engines' block ids are)
  batchlist  the same with lists of ints
  pages32    ep.put_pages, NumPy uint32 page arrays, counted notification
  pages64    the same with NumPy int64 arrays
  bad64      a put_batch the package or library refuses: one int64 item
             above 2^32-1 (the error path: raise and catch); badpages64
             the same of put_pages

  /usr/bin/python3 bench/compare/py_post.py --build build [--pkg python]
      [--posts 2000] [--sizes 16,256,4096] [--paths accel,ctypes]

--pkg names the directory holding the gpuwire package to time (another
checkout's python/ to compare builds in one run).  --index-only times the
ctypes path's index array conversion alone (batch._index_array: checks and
uint32 copy) per length and dtype, best of 7 repeats, in us."""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--pkg", default=os.path.join(ROOT, "python"))
    ap.add_argument("--posts", type=int, default=2000)
    ap.add_argument("--sizes", default="16,256,4096")
    ap.add_argument("--paths", default="accel,ctypes")
    ap.add_argument("--forms", default="batch32,batch64,batchlist,pages32,pages64,bad64,badpages64")
    ap.add_argument("--label", default="")
    ap.add_argument("--index-only", action="store_true")
    args = ap.parse_args()
    sys.path.insert(0, os.path.abspath(args.pkg))
    import numpy as np
    import gpuwire
    from gpuwire import _lib
    gpuwire.load_library(os.path.join(os.path.abspath(args.build), "libgpuwire.so.0"))
    if args.index_only:
        import timeit
        from gpuwire.batch import _index_array
        print("# py_post --index-only %s: %s, load %s, pkg %s; best of 7, us"
              % (args.label, time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                 open("/proc/loadavg").read().split(" ", 3)[:3], os.path.abspath(args.pkg)))
        print("%6s %9s %9s %9s" % ("n", "uint32", "int32", "int64"))
        for n in (4, 16, 64, 256, 1024, 4096, 81920):
            row = []
            for dt in (np.uint32, np.int32, np.int64):
                a = np.arange(n, dtype=dt)
                num = max(1, 20000 // max(n // 16, 1)) if n < 81920 else 20
                ts = timeit.repeat(lambda: _index_array(a, "lidx"), number=num, repeat=7)
                row.append(min(ts) / num * 1e6)
            print("%6d %s" % (n, " ".join("%9.2f" % v for v in row)), flush=True)
        return
    a = gpuwire.Context(transports="intra", progress_thread=True)
    b = gpuwire.Context(transports="intra", progress_thread=os.environ.get("PYPOST_PT_B", "1") == "1")
    lis = a.listen()
    import threading
    got = {}
    t = threading.Thread(target=lambda: got.setdefault("ep", lis.accept(10)))
    t.start()
    eb = b.connect(lis.address)
    t.join()
    ea = got["ep"]
    page = 64
    nmax = max(int(s) for s in args.sizes.split(","))
    dst = np.zeros(2 * nmax * page, dtype=np.uint8)
    src = np.ones(2 * nmax * page, dtype=np.uint8)
    dm = a.register(dst)
    j = threading.Thread(target=lambda: ea.send_bytes(dm.pack(), tag=7))
    j.start()
    rk = eb.unpack(eb.recv_bytes(tag=7))
    j.join()
    sm = b.register(src)
    L = b.dlist_local_table(sm, count=2 * nmax, length=page)
    R = eb.dlist_remote_table(rk, count=2 * nmax, length=page)
    rng = np.random.default_rng(1)
    pc = time.perf_counter
    print("# py_post %s: %s, %s, load %s, pkg %s, %d posts, medians (best) in us"
          % (args.label, time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), os.uname().nodename,
             open("/proc/loadavg").read().split(" ", 3)[:3], os.path.abspath(args.pkg), args.posts))
    forms = args.forms.split(",")
    print("%-7s %6s %s" % ("path", "n", " ".join("%16s" % f for f in forms)))
    for path in args.paths.split(","):
        _lib.find_fast(path == "accel")
        if path == "accel" and _lib.fast is None:
            print("%-7s (no accelerator)" % path)
            continue
        for n in (int(s) for s in args.sizes.split(",")):
            li = rng.choice(2 * nmax, n, replace=False).astype(np.uint32)
            ri = rng.choice(2 * nmax, n, replace=False).astype(np.uint32)
            li64, ri64 = li.astype(np.int64), ri.astype(np.int64)
            bad = ri64.copy()
            if n:
                bad[n // 2] = 1 << 32
            lil, ril = li.tolist(), ri.tolist()
            calls = {
                "batch32": lambda: eb.put_batch(L, R, li, ri, counted=7),
                "batch64": lambda: eb.put_batch(L, R, li64, ri64, counted=7),
                "batchlist": lambda: eb.put_batch(L, R, lil, ril, counted=7),
                "pages32": lambda: eb.put_pages(sm, rk, page, li, ri, counted=7),
                "pages64": lambda: eb.put_pages(sm, rk, page, li64, ri64, counted=7),
            }

            def refused(fn):
                def call():
                    try:
                        fn()
                    except gpuwire.InvalidArgument:
                        return None
                    raise AssertionError("a bad item was not refused")
                return call if n else (lambda: None)        # (n 0: no item to refuse)
            calls["bad64"] = refused(lambda: eb.put_batch(L, R, li64, bad, counted=7))
            calls["badpages64"] = refused(lambda: eb.put_pages(sm, rk, page, li64, bad, counted=7))
            t = {f: [] for f in forms}
            # every round runs each form once, in an order rotated round by round
            for rnd in range(args.posts + 20):
                for k in range(len(forms)):
                    f = forms[(rnd + k) % len(forms)]
                    t0 = pc()
                    r = calls[f]()
                    t1 = pc()
                    if r is not None:
                        r.wait(60)
                    if rnd >= 20:
                        t[f].append(t1 - t0)
            print("%-7s %6d %s" % (path, n, " ".join(
                "%7.2f (%6.2f)" % (statistics.median(v) * 1e6, min(v) * 1e6) if n or not f.startswith("bad")
                else "%16s" % "-"
                for f, v in t.items())), flush=True)
    _lib.find_fast(True)
    for x in (L, R):
        x.close()
    eb.close()
    b.close()
    a.close()


if __name__ == "__main__":
    main()
