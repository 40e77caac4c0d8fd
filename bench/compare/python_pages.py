# SPDX-License-Identifier: Apache-2.0
"""python_pages.py ADDR TRANSPORT PAGES PAGE_SIZE ROUNDS BURST EXT_DIR C_RESULTS -
the Python side of bench/compare/python_pages.sh: posts the same paged puts (counted
notification, tracked; BURST posted back to back, each timed alone, then
waited for) as py_pages.c through `import gpuwire`: ep.put_pages() with the
index arrays given as NumPy uint32 arrays (the same two arrays each post,
and "fresh": new copies made before each post, outside the timing, as a
block table computed per step), int64 NumPy arrays, int32 tensors and
lists, and a plan prepared once (ep.prepare_put_pages) posted with
plan.post(), in rounds
that alternate with the same posts from a C loop in this process (EXT_DIR's
pages_loop), and prints each against the C figures."""
import statistics
import sys
import time

import numpy as np

import gpuwire
from gpuwire import _lib

addr, tl = sys.argv[1], sys.argv[2]
pages, page = int(sys.argv[3]), int(sys.argv[4])
rounds, burst = int(sys.argv[5]), int(sys.argv[6])
sys.path.insert(0, sys.argv[7])
import _gw_overhead_ext as ext  # noqa: E402
cprog = dict((k, float(v)) for k, v in (line.split() for line in open(sys.argv[8])))

ctx = gpuwire.Context(transports=tl)
ep = ctx.connect(addr)
src = (np.arange(pages * page, dtype=np.uint64) * 131).astype(np.uint8)
sm = ctx.register(src, access=gpuwire.ACCESS_LOCAL)
rk = ep.unpack(ep.recv_bytes(tag=1))
assert ep.transport == tl, ep.info()
i = np.arange(pages, dtype=np.uint64)
lp = ((i * 7919) % pages).astype(np.uint32)       # the arrays py_pages.c builds
rp = ((i * 40503 + 17) % pages).astype(np.uint32)
kinds = {"numpy": (lp, rp), "fresh": "fresh", "int64": (lp.astype(np.int64), rp.astype(np.int64))}
try:
    import torch
    kinds["tensor"] = (torch.from_numpy(lp.astype(np.int32)), torch.from_numpy(rp.astype(np.int32)))
except ImportError:
    pass
kinds["list"] = (lp.tolist(), rp.tolist())
kinds["prepared"] = None        # ep.prepare_put_pages(...) once, then plan.post()


def py_round(a, b=None):
    post = []
    pc, put_pages, fresh = time.perf_counter_ns, ep.put_pages, isinstance(a, str)
    for _ in range(rounds):
        reqs = []
        for _ in range(burst):
            if fresh:
                a, b = lp.copy(), rp.copy()
            t0 = pc()
            r = put_pages(sm, rk, page, a, b, counted=1)
            t1 = pc()
            reqs.append(r)
            post.append(t1 - t0)
        for r in reqs:
            r.wait(30)
    return post


def plan_round():
    plan = ep.prepare_put_pages(sm, rk, page, lp, rp, counted=1)
    post = []
    pc, p = time.perf_counter_ns, plan.post
    for _ in range(rounds):
        reqs = []
        for _ in range(burst):
            t0 = pc()
            r = p()
            t1 = pc()
            reqs.append(r)
            post.append(t1 - t0)
        for r in reqs:
            r.wait(30)
    plan.close()
    return post


def c_round():
    return ext.pages_loop(ep._h, sm._h, sm.addr, lp.ctypes.data, rk._h, rk.addr, rp.ctypes.data,
                          pages, page, rounds, burst)


def summary(xs):
    return min(xs), statistics.median(xs)


for path in ("accelerator", "ctypes"):
    if path == "ctypes":
        _lib.find_fast(False)
    elif _lib.fast is None or not _lib.fast.batch_ok:
        print("(the _gwfast accelerator is not built: its rows are left out)")
        continue
    alt = 3 if path == "accelerator" else 1
    c_all, py_all = [], dict((k, []) for k in kinds)
    c_round(), py_round(lp, rp)                          # warm-up
    for _ in range(alt):                                 # alternating: load hits both alike
        c_all += c_round()
        for k, ab in kinds.items():
            py_all[k] += plan_round() if ab is None else py_round(ab) if isinstance(ab, str) else py_round(*ab)
    cb, cm = summary(c_all)
    print("-- package path: %s (%d x %d x %d posts each)" % (path, alt, rounds, burst))
    print("%-10s %10s %10s %12s %12s %9s %9s" % ("indices", "best ns", "median ns", "C-loop best",
                                                  "C-loop med", "ratio", "ratio med"))
    for k, xs in py_all.items():
        b, m = summary(xs)
        print("%-10s %10.0f %10.0f %12.0f %12.0f %9.3f %9.3f" % (k, b, m, cb, cm, b / cb, m / cm))
    if path == "accelerator":
        print("separate C program (before): post best %.0f ns, median %.0f ns"
              % (cprog["post"], cprog["post_med"]))
        for k, what in (("numpy", "put_pages(), NumPy indices"),
                        ("fresh", "put_pages(), new NumPy indices per post"),
                        ("prepared", "prepare_put_pages() once, post()")):
            b, m = summary(py_all[k])
            print("%d-entry paged post from Python (%s) / from C in-process: best %.3f, "
                  "median %.3f (goal <= 1.2): %s" % (pages, what, b / cb, m / cm,
                                                     "met" if max(b / cb, m / cm) <= 1.2
                                                     else "NOT met"))
ep.close()
ctx.close()
