"""python_overhead.py ADDR TRANSPORT N C_RESULTS [EXT_DIR] - the Python side of
bench/python_overhead.sh: times the same operations as py_overhead.c through
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


def bench():
    out = {}
    put = ep.put
    flush = ep.flush
    t0 = time.perf_counter_ns()
    for i in range(n):
        o = (i & 1023) * 8
        put(sm, rk, o, 8, o, False)
        if (i & 255) == 255:
            flush().wait(10)
    t1 = time.perf_counter_ns()
    for i in range(n // 4):
        o = (i & 1023) * 8
        put(sm, rk, o, 8, o).wait(10)
    t2 = time.perf_counter_ns()
    r = put(sm, rk, 0, 8)
    r.wait(10)
    r2 = put(sm, rk, 0, 8)
    L, h = _lib.lib, r2._h
    L.gw_request_wait(h, 10000)
    for i in range(n):
        r2.done() if False else L.gw_request_test(h)
    t3 = time.perf_counter_ns()
    out["put"] = (t1 - t0) / n
    out["put_wait"] = (t2 - t1) / (n // 4)
    out["test"] = (t3 - t2) / n
    # the untracked put through bare ctypes and through a C extension: what the
    # binding's own Python code costs on top of the call mechanism
    gp, eh, mh, rh, base, ra = L.gw_put, ep._h, sm._h, rk._h, sm.addr, rk.addr
    t0 = time.perf_counter_ns()
    for i in range(n):
        o = (i & 1023) * 8
        gp(eh, base + o, 8, mh, ra + o, rh, None)
        if (i & 255) == 255:
            flush().wait(10)
    out["put_raw_ctypes"] = (time.perf_counter_ns() - t0) / n
    if ext is not None:
        ep_ = ext.put
        t0 = time.perf_counter_ns()
        for i in range(n):
            o = (i & 1023) * 8
            ep_(eh, base + o, 8, mh, ra + o, rh)
            if (i & 255) == 255:
                flush().wait(10)
        out["put_c_extension"] = (time.perf_counter_ns() - t0) / n
    return out


bench()            # warm-up
res = bench()
print("%-16s %10s %10s %10s %7s" % ("op", "C ns", "Python ns", "over ns", "ratio"))
for k, v in res.items():
    base = c["put" if k.startswith("put_") and k != "put_wait" else k]
    print("%-16s %10.1f %10.1f %10.1f %7.2f" % (k, base, v, v - base, v / base))
worst = max(res["put"] - c["put"], res["put_wait"] - c["put_wait"])
print("binding overhead per operation (worst of put, put_wait): %.2f us (goal <= 2 us): %s"
      % (worst / 1000, "met" if worst <= 2000 else "NOT met"))
ep.close()
b.close()
