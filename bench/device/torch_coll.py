# SPDX-License-Identifier: Apache-2.0
"""torch_coll.py - PyTorch all_reduce and all_gather over NCCL, every result checked.

Run under torchrun, one process per GPU, with NCCL's environment choosing the
path (bench/torch_coll.sh or scripts/gpu-nccl-run.sh set it):

    torchrun --standalone --nproc-per-node 2 bench/device/torch_coll.py --label gw --csv out.csv

Sizes double from --min-bytes to --max-bytes (default 1 MiB .. 256 MiB) of float32
per rank (all_gather: the gathered output).  Rank r's input element i is
(r + 1) * 16 + i % 61, so the sum is exact; after timing, each rank copies
the output to the host and compares it with the value computed on the host.
all_reduce's timed operation includes a device copy of the input into the
output (the reduction is in place); that copy runs at device-memory speed.
Bus bandwidth as nccl-tests defines it: all_reduce algbw * 2(N-1)/N,
all_gather algbw * (N-1)/N; time is the slowest rank's mean.
Rank 0 prints a table and appends CSV rows
(label,coll,nranks,bytes,iters,time_us,algbw_GBps,busbw_GBps,wrong).
Exit status 1 on any wrong element, 2 without CUDA.

--overlap N first runs N rounds of the pattern that deadlocked GPU buffers
over gpuwire's intra transport (docs/NCCL.md, Known problem): three
all_reduce calls queued back to back (16 B, 64 KiB, 4 MiB per rank), then
blocking copies to the host (.item(), .cpu()) on the default stream while
they are in flight, each result checked.  A deadlock shows as a run that
never ends: run it under `timeout`.  Rank 0 prints one line per 50 rounds
and "overlap: N rounds, every result correct" at the end.
"""
import argparse
import os
import sys
import time

for var, val in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ.setdefault(var, val)  # NVLink multicast stays off

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402


def overlap(rounds, rank, n, dev):
    """all_reduce calls in flight while the main thread sits in blocking copies; returns wrong results."""
    wrong = 0
    t0 = time.perf_counter()
    for i in range(rounds):
        ts = [torch.full((e,), float(rank + 1 + i % 7), device=dev) for e in (4, 16 << 10, 1 << 20)]
        for t in ts:
            dist.all_reduce(t)  # queued on the default stream, in flight while the copies below wait
        want = float(sum(r + 1 + i % 7 for r in range(n)))
        got_small = ts[0][0].item()  # blocking copy to pageable host memory on the default stream
        got_mid = ts[1].cpu()
        got_big = ts[2][-1].item()
        wrong += int(got_small != want) + int((got_mid != want).sum()) + int(got_big != want)
        if rank == 0 and (i + 1) % 50 == 0:
            print("# overlap: %d rounds, %.1f ms per round" % (i + 1, (time.perf_counter() - t0) * 1e3 / (i + 1)),
                  flush=True)
    return wrong


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--label", default="torch")
    ap.add_argument("--csv")
    ap.add_argument("--min-bytes", dest="min", type=int, default=1 << 20)
    ap.add_argument("--max-bytes", dest="max", type=int, default=256 << 20)
    ap.add_argument("--iters", type=int, default=0, help="0: about 256 MiB moved per size, 3 to 50")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--side-stream", action="store_true",
                    help="issue every collective from a stream of its own instead of the default stream")
    ap.add_argument("--overlap", type=int, default=0,
                    help="rounds of all_reduce followed at once by blocking copies to the host (.item(), .cpu())")
    a = ap.parse_args()

    if not torch.cuda.is_available():
        print("torch_coll: CUDA is not available to PyTorch: needs one GPU per rank", file=sys.stderr)
        return 2
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if local >= torch.cuda.device_count():
        print("torch_coll: LOCAL_RANK %d but %d GPU(s)" % (local, torch.cuda.device_count()), file=sys.stderr)
        return 2
    torch.cuda.set_device(local)
    if a.side_stream:
        torch.cuda.set_stream(torch.cuda.Stream())
    dev = torch.device("cuda", local)
    try:
        dist.init_process_group("nccl", device_id=dev)
    except TypeError:  # PyTorch before 2.3 has no device_id
        dist.init_process_group("nccl")
    rank, n = dist.get_rank(), dist.get_world_size()
    if rank == 0:
        v = torch.cuda.nccl.version()
        print("# torch_coll %s: %d ranks, torch %s, NCCL %s" % (a.label, n, torch.__version__,
                                                              ".".join(map(str, v)) if isinstance(v, tuple) else v))
        print("# %-10s %-11s %12s %6s %11s %10s %10s %6s" % ("label", "coll", "bytes", "iters", "time_us", "algbw",
                                                            "busbw", "wrong"))
    out = None
    if rank == 0 and a.csv:
        fresh = not os.path.exists(a.csv) or os.path.getsize(a.csv) == 0
        out = open(a.csv, "a")
        if fresh:
            out.write("label,coll,nranks,bytes,iters,time_us,algbw_GBps,busbw_GBps,wrong\n")

    total_wrong = overlap(a.overlap, rank, n, dev) if a.overlap else 0
    if a.overlap and rank == 0:
        print("# overlap: %d rounds, %s" % (a.overlap, "%d WRONG" % total_wrong if total_wrong else
                                             "every result correct"), flush=True)

    sizes = []
    s = a.min
    while s <= a.max:
        sizes.append((s + 4 * n - 1) // (4 * n) * (4 * n))
        s *= 2
    for coll in ("all_reduce", "all_gather"):
        for size in sizes:
            elems = size // 4
            per = elems // n if coll == "all_gather" else elems
            base = torch.arange(per, dtype=torch.int64) % 61
            host_in = ((rank + 1) * 16 + base).to(torch.float32)
            x = host_in.to(dev)
            if coll == "all_reduce":
                expect = sum(((r + 1) * 16 + base) for r in range(n)).to(torch.float32)
                y = torch.empty_like(x)

                def op():
                    y.copy_(x)
                    dist.all_reduce(y)
            else:
                expect = torch.cat([((r + 1) * 16 + base).to(torch.float32) for r in range(n)])
                y = torch.empty(elems, dtype=torch.float32, device=dev)

                def op():
                    dist.all_gather_into_tensor(y, x)
            iters = a.iters or max(3, min(50, (256 << 20) // size))
            for _ in range(a.warmup):
                op()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(iters):
                op()
            torch.cuda.synchronize()
            t = torch.tensor([(time.perf_counter() - t0) / iters], device=dev, dtype=torch.float64)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            got = y.cpu()
            wrong = torch.tensor([int((got != expect).sum())], device=dev, dtype=torch.int64)
            dist.all_reduce(wrong)
            w = int(wrong.item())
            total_wrong += w
            secs = float(t.item())
            algbw = size / secs / 1e9
            busbw = algbw * (2.0 * (n - 1) / n if coll == "all_reduce" else (n - 1) / n)
            if rank == 0:
                print("  %-10s %-11s %12d %6d %11.1f %10.3f %10.3f %6d" % (a.label, coll, size, iters, secs * 1e6,
                                                                        algbw, busbw, w), flush=True)
                if out:
                    out.write("%s,%s,%d,%d,%d,%.2f,%.4f,%.4f,%d\n" % (a.label, coll, n, size, iters, secs * 1e6,
                                                                     algbw, busbw, w))
                    out.flush()
    if rank == 0:
        print("# torch_coll %s: %s (%d wrong elements)" % (a.label, "WRONG RESULTS" if total_wrong else
                                                           "every result correct", total_wrong))
    dist.destroy_process_group()
    return 1 if total_wrong else 0


if __name__ == "__main__":
    sys.exit(main())
