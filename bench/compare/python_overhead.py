# SPDX-License-Identifier: Apache-2.0
"""python_overhead.py ADDR TRANSPORT N C_RESULTS [EXT_DIR] - the Python side of
bench/compare/python_overhead.sh: times the same operations as py_overhead.c through
the gpuwire package (and, when EXT_DIR holds the comparison extension, the
untracked put through raw ctypes and through a C extension), then prints each
against the C figure."""
import sys
import time

import gpuwire
from gpuwire import _lib

addr, tl, n, cres = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
ext = None
if len(sys.argv) > 5:
    sys.path.insert(0, sys.argv[5])
    import _gw_overhead_ext as ext
c = dict((k, float(v)) for k, v in (line.split() for line in open(cres)))

b = gpuwire.Context(transports=tl)
ep = b.connect(addr)          # the C target process (py_overhead target)
src = bytearray(1 << 16)
sm = b.register(src, access=gpuwire.ACCESS_LOCAL)
rk = ep.unpack(ep.recv_bytes(tag=1))
assert ep.transport == tl, ep.info()


def best(batch, count, body):
    """The fastest batch of `batch` operations, in ns per operation (the
    minimum estimates the uncontended cost on a shared machine, as in C)."""
    low = float("inf")
    for _ in range(max(1, count // batch)):
        t = body()
        if t < low:
            low = t
    return low / batch


def bench():
    out = {}
    put, flush, pc = ep.put, ep.flush, time.perf_counter_ns
    offs = [(i & 1023) * 8 for i in range(256)]

    def untracked():
        t0 = pc()
        for o in offs:
            put(sm, rk, o, 8, o, False)
        t = pc() - t0
        flush().wait(10)
        return t

    def tracked():
        t0 = pc()
        for o in offs[:64]:
            put(sm, rk, o, 8, o).wait(10)
        return pc() - t0

    r2 = put(sm, rk, 0, 8)
    L, h = _lib.lib, r2._h
    L.gw_request_wait(h, 10000)
    test = L.gw_request_test

    def tests():
        t0 = pc()
        for _ in offs:
            test(h)
        return pc() - t0
    out["put"] = best(256, n, untracked)
    out["put_wait"] = best(64, n // 4, tracked)
    out["test"] = best(256, n, tests)
    r2.wait(10)
    # the untracked put through bare ctypes and through a C extension: what the
    # binding's own Python code costs on top of the call mechanism
    gp, eh, mh, rh, base, ra = L.gw_put, ep._h, sm._h, rk._h, sm.addr, rk.addr

    def raw():
        t0 = pc()
        for o in offs:
            gp(eh, base + o, 8, mh, ra + o, rh, None)
        t = pc() - t0
        flush().wait(10)
        return t
    out["put_raw_ctypes"] = best(256, n, raw)
    if ext is not None:
        xp = ext.put

        def xput():
            t0 = pc()
            for o in offs:
                xp(eh, base + o, 8, mh, ra + o, rh)
            t = pc() - t0
            flush().wait(10)
            return t
        out["put_c_extension"] = best(256, n, xput)
    return out


for path in ("accelerator", "ctypes"):
    if path == "ctypes":
        _lib.find_fast(False)
    elif _lib.fast is None:
        print("(the _gwfast accelerator is not built: its rows are left out)")
        continue
    bench()            # warm-up
    res = bench()
    print("-- package path: %s" % path)
    print("%-16s %10s %10s %10s %7s" % ("op", "C ns", "Python ns", "over ns", "ratio"))
    for k, v in res.items():
        base = c["put" if k.startswith("put_") and k != "put_wait" else k]
        print("%-16s %10.1f %10.1f %10.1f %7.2f" % (k, base, v, v - base, v / base))
    worst = max(res["put"] - c["put"], res["put_wait"] - c["put_wait"])
    print("binding overhead per operation (%s; worst of put, put_wait): %.2f us (goal <= 2 us): %s"
          % (path, worst / 1000, "met" if worst <= 2000 else "NOT met"))
ep.close()
b.close()
