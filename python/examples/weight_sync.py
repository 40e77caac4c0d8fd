#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Weight sync from one trainer process to several inference processes.

Each inference process registers every parameter tensor of its model copy
and publishes the keys.  After each training step the trainer writes every
tensor into every inference process with one-sided puts (no receive posted
on the other side, no copy through a staging buffer of ours) and ends each
sync with one notification carrying the weight version; an inference process
that sees version v knows all tensors of v are in place (notifications arrive
after every put posted before them on the endpoint).  Each inference process
checks every tensor against the trainer's values.

    python3 weight_sync.py [--device cpu|cuda] [--inference 3] [--steps 3]
or, under torchrun (rank 0 trains, the others serve):
    torchrun --nproc-per-node 4 weight_sync.py
"""
import argparse
import datetime
import multiprocessing as mp
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import gpuwire  # noqa: E402
from gpuwire.store import Directory  # noqa: E402

SHAPES = [(1024, 1024), (1024,), (1024, 2048), (2048,), (512, 512), (3, 7), (1,)] * 4


def model(device, dtype):
    import torch
    return {"layer%d.w%d" % (i // 2, i): torch.zeros(s, dtype=dtype, device=device)
            for i, s in enumerate(SHAPES)}


def train_step(params, step):
    """Stand-in for an optimiser step: deterministic values per (tensor, step)."""
    for j, t in enumerate(params.values()):
        t.copy_(expected(t, j, step))


def expected(t, j, step):
    import torch
    n = t.numel()
    v = (torch.arange(n, device=t.device, dtype=torch.float64) * (j + 1) + step * 7) % 251
    return v.to(t.dtype).reshape(t.shape)


def inference(rank, args, store):
    import torch
    torch.set_num_threads(1)          # several processes share this host's CPUs
    dev = torch.device(args.device if args.device == "cpu" else "cuda:%d" % (
        (rank) % max(1, torch.cuda.device_count())))
    params = model(dev, torch.bfloat16)
    with gpuwire.Context() as ctx:
        d = Directory(store, ctx, timeout=args.timeout)
        mems = {name: ctx.register(t, access=gpuwire.ACCESS_REMOTE_WRITE)
                for name, t in params.items()}
        for name, m in mems.items():
            d.publish("infer%d/%s" % (rank, name), m)
        d.serve("infer%d" % rank, addr=args.bind)
        ep = d.accept("infer%d" % rank)
        for step in range(1, args.steps + 1):
            v = ep.wait_notify(timeout=args.timeout)
            assert v == step, "version %d, wanted %d" % (v, step)
            for j, (name, t) in enumerate(params.items()):
                ctx.progress()        # keep answering the trainer while checking (its
                                      # liveness check fails a peer silent for 10 s)
                if not torch.equal(t, expected(t, j, step)):
                    raise SystemExit("inference %d: %s differs after version %d" % (rank, name, step))
            ep.send_bytes(b"ack%d" % step, tag=step)
        print("inference %d: %d versions of %d tensors (%.1f MB) checked, over %s"
              % (rank, args.steps, len(params), sum(t.numel() * 2 for t in params.values()) / 1e6,
                 ep.transport))


def trainer(args, store, ninfer):
    import torch
    torch.set_num_threads(1)
    dev = torch.device(args.device)
    params = model(dev, torch.bfloat16)
    with gpuwire.Context() as ctx:
        d = Directory(store, ctx, timeout=args.timeout)
        mems = {name: ctx.register(t, access=gpuwire.ACCESS_LOCAL) for name, t in params.items()}
        peers = []
        for r in range(1, ninfer + 1):
            ep = d.connect("infer%d" % r)
            keys = {name: d.remote_key(ep, "infer%d/%s" % (r, name)) for name in params}
            peers.append((ep, keys))
        nbytes = sum(m.nbytes for m in mems.values())
        for step in range(1, args.steps + 1):
            train_step(params, step)
            if dev.type == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            for ep, keys in peers:
                for name, m in mems.items():
                    ep.put(m, keys[name], track=False)
                ep.put_notify(b"", keys[next(iter(params))], step, length=0, track=False)
            reqs = [ep.flush() for ep, _ in peers]
            for r in reqs:
                r.wait(60)
            dt = time.perf_counter() - t0
            for ep, _ in peers:          # the next step overwrites only after every ack
                assert ep.recv_bytes(tag=step, timeout=args.timeout) == b"ack%d" % step
            print("trainer: version %d, %d tensors, %.1f MB to %d processes in %.3f s"
                  % (step, len(mems), nbytes / 1e6, len(peers), dt))


def run_rank(rank, world, args, host, port):
    import torch.distributed as dist
    store = dist.TCPStore(host, port, None, False, timeout=datetime.timedelta(seconds=60),
                          wait_for_workers=False)
    if rank == 0:
        trainer(args, store, world - 1)
    else:
        inference(rank, args, store)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--inference", type=int, default=3, help="inference processes")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--bind", default="127.0.0.1:0")
    p.add_argument("--timeout", type=float, default=180.0,
                   help="seconds any one wait may take (a peer checks every tensor between syncs)")
    args = p.parse_args()
    if "RANK" in os.environ and "MASTER_ADDR" in os.environ:     # under torchrun
        import torch.distributed as dist
        store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]) + 1,
                              None, int(os.environ["RANK"]) == 0,
                              timeout=datetime.timedelta(seconds=60), wait_for_workers=False)
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        if args.bind.startswith("127.0.0.1") and os.environ["MASTER_ADDR"] not in (
                "127.0.0.1", "localhost"):
            args.bind = "0.0.0.0:0"
        return trainer(args, store, world - 1) if rank == 0 else inference(rank, args, store)
    import torch.distributed as dist
    master = dist.TCPStore("127.0.0.1", 0, None, True, wait_for_workers=False)
    spawn = mp.get_context("spawn")
    world = args.inference + 1
    procs = [spawn.Process(target=run_rank, args=(r, world, args, "127.0.0.1", master.port))
             for r in range(world)]
    for pr in procs:
        pr.start()
    for pr in procs:
        pr.join(240)
    bad = [(pr.name, pr.exitcode) for pr in procs if pr.exitcode != 0]
    if bad:
        sys.exit("failed: %s" % bad)
    print("weight_sync: OK")


if __name__ == "__main__":
    main()
