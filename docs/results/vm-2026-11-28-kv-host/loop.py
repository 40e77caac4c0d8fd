# SPDX-License-Identifier: Apache-2.0
# scratch: tight per-call post loops, in-process target as kv_post.py
import os, sys, time, statistics, multiprocessing as mp
ROOT = os.environ.get("ROOT", "/work/wt-kvhost")
sys.path.insert(0, os.path.join(ROOT, "bench/compare")); sys.path.insert(0, os.path.join(ROOT, "python"))
import kv_post as K
import numpy as np
def main():
    build = os.path.join(ROOT, os.environ.get("BUILD", "build"))
    shapes = os.environ.get("SHAPES", "16384x2K").split(",")
    forms = os.environ.get("FORMS", "u32,i64,i32,plan,dev").split(",")
    rounds = int(os.environ.get("ROUNDS", "2000"))
    import gpuwire
    gpuwire.load_library(os.path.join(build, "libgpuwire.so.0"))
    mpc = mp.get_context("spawn"); conn, child = mpc.Pipe()
    tp = mpc.Process(target=K.target, args=(child, build, shapes), daemon=True); tp.start()
    ctx = gpuwire.Context(transports="intra", progress_thread=True)
    ep = ctx.connect(conn.recv()); keys = [[ep.unpack(k) for k in ks] for ks in conn.recv()]
    rng = np.random.default_rng(1); pc = time.perf_counter_ns
    out = []
    for i, s in enumerate(shapes):
        nreg, n, page = K.parse(s)
        src = K.DevBuf(2 * n * page, 0); sm = ctx.register(src, access=gpuwire.ACCESS_LOCAL); rk = keys[i][0]
        l64 = rng.choice(2 * n, n, replace=False); r64 = rng.choice(2 * n, n, replace=False)
        arr = {"u32": (l64.astype(np.uint32), r64.astype(np.uint32)), "i64": (l64, r64),
               "i32": (l64.astype(np.int32), r64.astype(np.int32))}
        fns = {}
        if nreg == 1:
            for k, (a, b) in arr.items():
                fns[k] = (lambda a=a, b=b: ep.put_pages(sm, rk, page, a, b, counted=7))
            plan = ep.prepare_put_pages(sm, rk, page, arr["u32"][0], arr["u32"][1], counted=7)
            fns["plan"] = plan.post
            both = K.DevIdx(np.concatenate(arr["u32"])); dl, dr = K.DevSlice(both, 0, n), K.DevSlice(both, n, n)
            fns["dev"] = lambda: ep.put_pages(sm, rk, page, dl, dr, counted=7)
        else:
            per = 2 * n // nreg
            tabs = [ctx.register(K.Part(src, r * per * page, per * page), access=gpuwire.ACCESS_LOCAL) for r in range(nreg)]
            L = ctx.dlist_local_table(tabs, count=nreg * per, length=page, per_region=per)
            R = ep.dlist_remote_table(keys[i][2:], count=nreg * per, length=page, per_region=per)
            for k, (a, b) in arr.items():
                fns[k] = (lambda a=a, b=b: ep.put_batch(L, R, a, b, counted=7))
            plan = ep.prepare_put_batch(L, R, arr["u32"][0], arr["u32"][1], counted=7); fns["plan"] = plan.post
        fl = [f for f in forms if f in fns]
        t = {f: [] for f in fl}
        for rnd in range(rounds):
            for j in range(len(fl)):
                f = fl[(rnd + j) % len(fl)]
                t0 = pc(); r = fns[f](); t1 = pc(); r.wait(60); del r
                t[f].append(t1 - t0)
        out.append("%-14s " % s + " ".join("%s %6.2f (%5.2f)" % (f, statistics.median(v) / 1e3, min(v) / 1e3) for f, v in t.items()))
        print(out[-1], flush=True)
    conn.send("done"); os._exit(0)
if __name__ == "__main__":
    main()
