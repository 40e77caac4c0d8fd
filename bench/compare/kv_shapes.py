# SPDX-License-Identifier: Apache-2.0
"""kv_shapes.py - KV-cache transfers of serving shapes between two processes:
gpuwire's paged transfer against one contiguous put of the same bytes and
against posting one put per descriptor, with ratios.

Shapes (pages x page size; all pages picked at random, distinct, from a pool
twice as large on each side, so no two neighbours merge):
  4096x16K   4,096 x 16 KiB                         (one region a side)
  16384x2K   16,384 x 2 KiB
  512x128K   512 x 128 KiB
  70B-4K     Llama-3-70B at TP 8, bf16, 16-token blocks: 4 KiB per layer per
             K or V block; TOKENS tokens / 16 blocks x 80 layers x 2 regions
             (32,768 tokens: 327,680 descriptors; default 2,048 tokens on the
             CPU: 20,480 descriptors, 80 MiB)
  MLA-72K    an MLA layer block of 72 KiB (one latent cache per layer, 61
             layers); TOKENS / 16 blocks x 61 regions
The multi-region shapes use descriptor tables (ctx.dlist_local_table /
ep.dlist_remote_table, computed: region x blocks per region + block), moved
by put_batch with index arrays; the one-region shapes put_pages, both with a
counted notification the target waits for.

Columns:
  paged        gpuwire's one batched request (GB/s of the pages' bytes)
  contiguous   one put of the same bytes, one contiguous range a side
  contig+ntf   the same put with a notification after it (put_notify), as
               the paged transfer delivers one: the like-for-like reference
  plan         the paged transfer prepared once and posted each round, as
               a serving engine moving each layer into the same slots: the
               one-region shapes by ep.prepare_put_pages, the multi-region
               ones by ep.prepare_put_batch over the same tables (the index
               arrays checked and copied once, a prepared selection kept
               in GPU memory over intra; no index read or copied per post)
  per-desc     one put per descriptor, posted back to back in C
               (GPUWIRE_BATCH_PATH=expand: the protocol layer posts a put per
               entry, as NIXL's UCX backend posts one ucp_put per descriptor)
  nccl         --gpu with torch.distributed: gather the pages into one
               buffer, send/recv, scatter (the route without gpuwire)
and paged/contiguous, paged/per-desc (and gpuwire/nccl); then, per
transfer in us, post_us (the paged call alone returning its Request: the
host's work before anything moves; plan_post_us the same for the plan's
post), paged_us and c+ntf_us (the paged
transfer and contig+notify to completion, from their medians): paged_us -
post_us against c+ntf_us says how much of the gap is the host's posting
and how much the GPU's copy and the completion.  Each round times
every column once, in turn; a column's figure is its median round.  With
--burst K a column runs K transfers back to back in each round (each
waited for before the next) and the round's figure is their median: a
GPU that idled between rounds (the check messages, the other columns)
starts its first transfer at low clocks, which a lone transfer of 32 MiB
feels and a stream of them does not.  With --warm MS each column first
runs its transfer untimed for MS milliseconds, so that the timed burst
starts with the GPU's clocks up, as in a serving engine whose GPU is
computing (the SMs' copy feels low clocks more than the copy engine's:
report cold and warm figures side by side).  After
the timed rounds the target checks every page it received (each page's bytes
against the pattern of the page that was sent).

  python3 bench/compare/kv_shapes.py [--build build] [--transport tcp|intra]
      [--shapes 4096x16K,...] [--rounds 5] [--tokens 2048] [--json OUT]
      [--gpu [--nccl]] [--burst K] [--warm MS]
--gpu: both sides' regions are CUDA tensors (target on cuda:1 when there are
two GPUs, else cuda:0), over intra (CUDA IPC) by default; --nccl adds the
torch.distributed NCCL column (two GPUs).
"""
import argparse
import json
import os
import statistics
import sys
import time
import multiprocessing as mp

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))

KI = 1024
# name: (descriptors or None for per-token shapes, page size, regions)
SHAPES = {
    "4096x16K": (4096, 16 * KI, 1),
    "16384x2K": (16384, 2 * KI, 1),
    "512x128K": (512, 128 * KI, 1),
    "70B-4K": (None, 4 * KI, 160),
    "MLA-72K": (None, 72 * KI, 61),
}
COUNTED = 7


def shape_dims(name, tokens):
    n, page, nreg = SHAPES[name]
    if n is None:
        blocks = max(1, tokens // 16)
        n = blocks * nreg
    per = 2 * n // nreg           # pool: twice the pages a transfer moves, per region
    return n, page, nreg, per


def alloc(np, nbytes, gpu):
    if gpu is None:
        return np.zeros(nbytes, dtype=np.uint8)
    import torch
    return torch.zeros(nbytes, dtype=torch.uint8, device="cuda:%d" % gpu)


def nccl_init(rank, port, gpu):
    import torch
    import torch.distributed as dist
    torch.cuda.set_device(gpu)
    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:%d" % port, world_size=2, rank=rank)
    return dist


def target_main(conn, args, gpu):
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import numpy as np
    import gpuwire
    gpuwire.load_library(os.path.join(os.path.abspath(args.build), "libgpuwire.so.0"))
    dist = nccl_init(1, args.nccl_port, gpu) if args.nccl else None
    ctx = gpuwire.Context(transports=args.transport, progress_thread=True)
    lis = ctx.listen("127.0.0.1:0")
    conn.send(lis.address)
    eps = [lis.accept(30), lis.accept(30)]      # the initiator's default and per-descriptor contexts
    while True:
        msg = conn.recv()
        if msg[0] == "quit":
            break
        if msg[0] == "shape":
            _, n, page, nreg, per = msg
            big = alloc(np, nreg * per * page, gpu)     # the regions: slices of one allocation
            regs = [big[r * per * page:(r + 1) * per * page] for r in range(nreg)]
            cont = alloc(np, n * page, gpu)
            mems = [ctx.register(r) for r in regs] + [ctx.register(cont)]
            conn.send([m.pack() for m in mems])
        elif msg[0] == "count":
            for e, k in zip(eps, msg[1]):  # each context's endpoint: its counted notifications of a round
                e.wait_count(COUNTED, k, timeout=120)
                while True:               # contig+notify's values, drained
                    try:
                        e.wait_notify(0)
                    except gpuwire.Timeout:
                        break
            conn.send("ok")
        elif msg[0] == "nccl":          # one round of the NCCL route: receive, scatter, acknowledge
            import torch
            ridx_t = torch.from_numpy(msg[1].astype(np.int64)).to(big.device)
            buf = torch.empty(len(msg[1]) * page, dtype=torch.uint8, device=big.device)
            for _ in range(msg[2]):
                dist.recv(buf, src=0)
                big.view(-1, page).index_copy_(0, ridx_t, buf.view(-1, page))
                torch.cuda.synchronize()
                dist.send(torch.ones(1, device=big.device), dst=0)
            conn.send("ok")
        elif msg[0] == "check":
            _, lidx, ridx, page, per, seed = msg
            bad = 0
            # destination entry j is block j % per of region j // per; the
            # source entry i was block i % per of source region i // per
            rr, rb = ridx // per, ridx % per
            for r in np.unique(rr).tolist():
                sel = rr == r
                got = regs[r] if gpu is None else regs[r].cpu().numpy()
                got = got.reshape(per, page)[rb[sel]]
                want = pattern_pages(np, lidx[sel], page, seed)    # source entry i holds pattern page i
                bad += int((got != want).any(axis=1).sum())
            conn.send(bad)
            for m in mems:
                m.close()
    ctx.close()


def pattern_pages(np, pages, page, seed):
    base = np.arange(page, dtype=np.uint32)
    p = pages.astype(np.uint32)[:, None]
    return ((base[None, :] * 2654435761 + p * 40503 + seed) >> 7).astype(np.uint8)


def run_shape(args, name, conn, ctxs, eps, np, gpu_local, nccl):
    import gpuwire
    n, page, nreg, per = shape_dims(name, args.tokens)
    conn.send(("shape", n, page, nreg, per))
    keys = conn.recv()
    rk = [[ep.unpack(k) for k in keys] for ep in eps]
    rng = np.random.default_rng(1)
    # source: nreg regions of per blocks each, block b of region r holds
    # pattern page r * per + b
    seed = 99
    big = pattern_pages(np, np.arange(nreg * per), page, seed).reshape(-1)
    if gpu_local is not None:
        import torch
        big = torch.from_numpy(big).to("cuda:%d" % gpu_local)
    srcs = [big[r * per * page:(r + 1) * per * page] for r in range(nreg)]
    csrc = alloc(np, n * page, gpu_local)
    smems = [[c.register(s, access=gpuwire.ACCESS_LOCAL) for s in srcs] for c in ctxs]
    cmem = ctxs[0].register(csrc, access=gpuwire.ACCESS_LOCAL)
    # the pages moved: n distinct entries of each side's table (regions x per)
    lidx = rng.choice(nreg * per, n, replace=False).astype(np.uint32)
    ridx = rng.choice(nreg * per, n, replace=False).astype(np.uint32)
    tables = []
    for c, ep, sm, k in zip(ctxs, eps, smems, rk):
        L = c.dlist_local_table(sm, count=nreg * per, length=page, per_region=per)
        R = ep.dlist_remote_table(k[:nreg], count=nreg * per, length=page, per_region=per)
        tables.append((L, R))
    cols = {"paged": [], "contiguous": [], "contig+notify": [], "per-desc": []}
    if nreg == 1:
        plan = eps[0].prepare_put_pages(smems[0][0], rk[0][0], page, lidx, ridx, counted=COUNTED)
    else:
        plan = eps[0].prepare_put_batch(tables[0][0], tables[0][1], lidx, ridx, counted=COUNTED)
    cols["plan"] = []
    if nccl is not None:
        cols["nccl"] = []
    nbytes = n * page

    posts = []                      # the paged post alone (the call returning its Request), s
    plan_posts = []                 # the plan's post alone, s

    def planned():
        t0 = time.perf_counter()
        r = plan.post()
        plan_posts.append(time.perf_counter() - t0)
        r.wait(300)

    def paged(i):
        ep = eps[i]
        t0 = time.perf_counter()
        if nreg == 1:
            r = ep.put_pages(smems[i][0], rk[i][0], page, lidx, ridx, counted=COUNTED)
        else:
            r = ep.put_batch(tables[i][0], tables[i][1], lidx, ridx, counted=COUNTED)
        if i == 0:
            posts.append(time.perf_counter() - t0)
        r.wait(300)

    def contiguous():
        eps[0].put(cmem, rk[0][nreg], track=True).wait(300)

    burst = max(1, args.burst)

    def one(col):
        if col == "paged":
            paged(0)
        elif col == "per-desc":
            paged(1)
        elif col == "plan":
            planned()
        elif col == "contiguous":
            contiguous()
        elif col == "contig+notify":  # the same put with a notification after it, as paged has
            eps[0].put_notify(cmem, rk[0][nreg], 7).wait(300)
        else:
            nccl(big, lidx, ridx, page, conn)

    for rnd in range(args.rounds + 1):          # round 0 warms up, untimed
        counted = [0, 0]                        # counted notifications sent per endpoint this round
        for col in cols:
            ts = []
            if args.warm > 0 and col not in ("per-desc", "nccl"):
                # the same transfer, untimed, until the GPU has run for
                # --warm ms: its clocks are up when the timed burst starts
                tw = time.perf_counter() + args.warm / 1e3
                while time.perf_counter() < tw:
                    one(col)
                    counted[0] += col in ("paged", "plan")
            for _ in range(1 if col == "per-desc" else burst):  # (per-desc is slow: once a round)
                t0 = time.perf_counter()
                one(col)
                ts.append(time.perf_counter() - t0)
            counted[0] += burst if col in ("paged", "plan") else 0
            counted[1] += 1 if col == "per-desc" else 0
            if rnd:
                cols[col].append(nbytes / statistics.median(ts) / 1e9)
        conn.send(("count", counted))  # the counted notifications each endpoint got
        conn.recv()
    plan.close()
    # the check: every transfer into the target's tables moved the same
    # pages (paged, per-desc, plan, nccl): every page received is compared
    conn.send(("check", lidx, ridx, page, per, seed))
    bad = conn.recv()
    for L, R in tables:
        L.close()
        R.close()
    for ms in smems:
        for m in ms:
            m.close()
    cmem.close()
    for ks in rk:
        for k in ks:
            k.close()
    med = {c: statistics.median(v) for c, v in cols.items()}
    row = {"shape": name, "descriptors": n, "page": page, "regions": nreg, "bytes": nbytes,
           "transport": args.transport, "gpu": args.gpu, "rounds": args.rounds, "bad_pages": bad}
    row.update({c + "_GBps": round(v, 3) for c, v in med.items()})
    # per transfer, us: the paged post alone (host work before anything
    # moves), the paged transfer and contig+notify to completion (medians)
    row["paged_post_us"] = round(statistics.median(posts[1:]) * 1e6, 1)
    row["paged_us"] = round(nbytes / med["paged"] / 1e3, 1)
    row["contig_notify_us"] = round(nbytes / med["contig+notify"] / 1e3, 1)
    row["paged_over_contiguous"] = round(med["paged"] / med["contiguous"], 3)
    row["paged_over_per_desc"] = round(med["paged"] / med["per-desc"], 3)
    row["burst"] = burst
    row["warm_ms"] = args.warm
    if "plan" in med:
        row["plan_post_us"] = round(statistics.median(plan_posts[1:]) * 1e6, 1)
        row["plan_us"] = round(nbytes / med["plan"] / 1e3, 1)
        row["plan_over_contig_notify"] = round(med["plan"] / med["contig+notify"], 3)
    row["paged_over_contig_notify"] = round(med["paged"] / med["contig+notify"], 3)
    if "nccl" in med:
        row["paged_over_nccl"] = round(med["paged"] / med["nccl"], 3)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--transport", default="tcp")
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--json", default=None)
    ap.add_argument("--gpu", action="store_true")
    ap.add_argument("--nccl", action="store_true")
    ap.add_argument("--burst", type=int, default=1,
                    help="transfers back to back per column and round; the round's figure is their median")
    ap.add_argument("--warm", type=float, default=0,
                    help="ms of untimed transfers of a column before its timed burst (GPU clocks up)")
    args = ap.parse_args()
    args.nccl_port = 0
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import numpy as np
    import gpuwire
    gpuwire.load_library(os.path.join(os.path.abspath(args.build), "libgpuwire.so.0"))
    gpu_local = gpu_target = None
    if args.gpu:
        import torch
        ng = torch.cuda.device_count()
        if ng == 0:
            sys.exit("kv_shapes: --gpu: torch sees no GPU")
        gpu_local, gpu_target = 0, (1 if ng > 1 else 0)
    nccl = None
    if args.nccl:
        if not args.gpu:
            sys.exit("kv_shapes: --nccl goes with --gpu")
        import socket
        with socket.socket() as so:
            so.bind(("127.0.0.1", 0))
            args.nccl_port = so.getsockname()[1]
    mpc = mp.get_context("spawn")
    conn, child = mpc.Pipe()
    tp = mpc.Process(target=target_main, args=(child, args, gpu_target), daemon=True)
    tp.start()
    if args.nccl:
        dist = nccl_init(0, args.nccl_port, gpu_local)

        def nccl(big, lidx, ridx, page, conn):
            """The route without gpuwire: gather the pages into one buffer,
            send it, the target scatters it and acknowledges."""
            import torch
            conn.send(("nccl", ridx, 1))
            lt = torch.from_numpy(lidx.astype(np.int64)).to(big.device)
            buf = big.view(-1, page).index_select(0, lt)
            dist.send(buf.view(-1), dst=1)
            ack = torch.empty(1, device=big.device)
            dist.recv(ack, src=1)
            conn.recv()
    addr = conn.recv()
    ctx = gpuwire.Context(transports=args.transport, progress_thread=True)
    os.environ["GPUWIRE_BATCH_PATH"] = "expand"
    ctx_pd = gpuwire.Context(transports=args.transport, progress_thread=True)
    del os.environ["GPUWIRE_BATCH_PATH"]
    eps = [ctx.connect(addr), ctx_pd.connect(addr)]
    host = os.uname().nodename
    print("# kv_shapes: %s, %s memory, over %s (%s); %d timed rounds, median; burst %d; warm %g ms; %s; %s"
          % (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "GPU" if args.gpu else "host",
             args.transport, eps[0].info().get("path", ""), args.rounds, max(1, args.burst), args.warm, host,
             "tokens %d" % args.tokens))
    print("# load average at the start: %s" % open("/proc/loadavg").read().split(" ", 3)[:3])
    print("%-10s %8s %7s %8s %9s %9s %11s %9s %8s %12s %12s %12s %10s %9s %12s %9s %9s %9s %s" % (
        "shape", "descs", "page", "paged", "contig", "contig+ntf", "per-desc", "nccl", "plan", "paged/contig",
        "paged/c+ntf", "paged/perdesc", "plan/c+ntf", "post_us", "plan_post_us", "paged_us", "plan_us", "c+ntf_us",
        "checked"))
    rows = []
    for name in args.shapes.split(","):
        row = run_shape(args, name, conn, [ctx, ctx_pd], eps, np, gpu_local, nccl)
        rows.append(row)
        print("%-10s %8d %6dK %8.2f %9.2f %9.2f %11.2f %9s %8s %12.2f %12.2f %12.2f %10s %9.1f %12s %9.1f %9s %9.1f %s" % (
            name, row["descriptors"], row["page"] // KI, row["paged_GBps"], row["contiguous_GBps"],
            row["contig+notify_GBps"], row["per-desc_GBps"],
            "%.2f" % row["nccl_GBps"] if "nccl_GBps" in row else "-",
            "%.2f" % row["plan_GBps"] if "plan_GBps" in row else "-",
            row["paged_over_contiguous"], row["paged_over_contig_notify"], row["paged_over_per_desc"],
            "%.2f" % row["plan_over_contig_notify"] if "plan_over_contig_notify" in row else "-",
            row["paged_post_us"], "%.1f" % row["plan_post_us"] if "plan_post_us" in row else "-", row["paged_us"],
            "%.1f" % row["plan_us"] if "plan_us" in row else "-",
            row["contig_notify_us"],
            "every page" if row["bad_pages"] == 0 else "%d BAD PAGES" % row["bad_pages"]), flush=True)
    print("# load average at the end: %s" % open("/proc/loadavg").read().split(" ", 3)[:3])
    conn.send(("quit",))
    for ep in eps:
        ep.close()
    ctx_pd.close()
    ctx.close()
    tp.join(30)
    if args.json:
        with open(args.json, "a") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    sys.exit(1 if any(r["bad_pages"] for r in rows) else 0)


if __name__ == "__main__":
    main()
