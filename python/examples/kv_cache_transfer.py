#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""KV-cache pages from a prefill process to a decode process.

The decode process owns a paged KV cache (layers x pages x page elements),
registers it once and publishes its key.  For each request it picks free
pages and tells the prefill process which ones; the prefill process writes
each layer's pages into those slots with one paged put (ep.put_pages: its
page i goes to slot slots[i], scattered anywhere in decode's cache) that
carries a counted notification with the layer's id, so decode can start on
layer 0 while later layers are still on the wire.  Decode waits for each
layer's count (ep.wait_count) and checks every page of it.

--mode notify sends each page by its own put instead (untracked), the
layer's last one a put_notify carrying the layer's id, which decode takes
with wait_notify: the form without the batched API.

--chunks N splits each layer's pages into N paged puts (as N tensor-parallel
ranks or streams would send them); each carries one counted notification of
the layer's id and decode waits for N of them: counts do not care in which
order the puts finish.

Run it (both roles spawned here, bootstrap through a torch TCPStore):
    python3 kv_cache_transfer.py [--device cpu|cuda] [--layers 8] [--pages 64]
Or one role per host:  --role decode|prefill --store HOST:PORT
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


def page_value(req, layer, token_page):
    """What prefill computes for (request, layer, page of its tokens): a
    deterministic stand-in for real keys/values, so decode can check it
    (below 2048: exact in float16 for any number of requests)."""
    return float((req * 131 + layer * 17 + token_page) % 2039)


def layer_id(req, layer):
    return (req << 16) | layer


def decode(args, store):
    import torch
    torch.set_num_threads(1)
    dev = torch.device(args.device)
    cache = torch.zeros(args.layers, args.pages, args.page_elems, dtype=torch.float16, device=dev)
    with gpuwire.Context() as ctx:
        d = Directory(store, ctx, timeout=60)
        mem = ctx.register(cache)
        d.serve("decode", addr=args.bind)
        d.publish("decode/kv", mem)
        ep = d.accept("decode")
        free = list(range(args.pages))
        for req in range(args.requests):
            n = args.pages_per_request
            slots, free = free[:n], free[n:] + free[:n]
            ep.send_bytes(",".join(map(str, slots)).encode(), tag=req)   # the page table
            for layer in range(args.layers):
                if args.mode == "paged":
                    # every chunk of this layer is in place once its count is reached
                    ep.wait_count(layer_id(req, layer), args.chunks, timeout=60)
                else:
                    got = ep.wait_notify(timeout=60)
                    if got != layer_id(req, layer):
                        raise SystemExit("decode: notification %#x, wanted %#x"
                                         % (got, layer_id(req, layer)))
                want = torch.tensor([page_value(req, layer, i) for i in range(n)],
                                    dtype=torch.float16, device=dev)
                got = cache[layer, slots]                    # (n, page_elems), gathered
                bad = (got != want[:, None]).any(dim=1).nonzero().flatten().tolist()
                if bad:
                    i = bad[0]
                    raise SystemExit("decode: request %d layer %d page %d (slot %d) holds %s, "
                                     "wanted %s" % (req, layer, i, slots[i],
                                                    got[i, :4].tolist(), want[i].item()))
        ep.send_bytes(b"done", tag=0xFFFF)
        print("decode: %d requests x %d layers x %d pages of %d B arrived intact over %s "
              "(%s)" % (args.requests, args.layers, args.pages_per_request, 2 * args.page_elems,
                        ep.transport, "%d paged put(s) and counted notifications per layer"
                        % args.chunks if args.mode == "paged" else "a put per page, a "
                        "put_notify per layer"))


def prefill(args, store):
    import numpy as np
    import torch
    torch.set_num_threads(1)
    dev = torch.device(args.device)
    n = args.pages_per_request
    kv = torch.empty(args.layers, n, args.page_elems, dtype=torch.float16, device=dev)
    page_bytes = 2 * args.page_elems
    with gpuwire.Context() as ctx:
        d = Directory(store, ctx, timeout=60)
        mem = ctx.register(kv, access=gpuwire.ACCESS_LOCAL)
        ep = d.connect("decode")
        rk = d.remote_key(ep, "decode/kv")
        local = np.arange(n, dtype=np.uint32)              # this request's pages, in order
        chunks = np.array_split(np.arange(n), args.chunks)
        t0 = time.perf_counter()
        for req in range(args.requests):
            slots = np.array(ep.recv_bytes(tag=req).split(b","), dtype=np.uint32)
            for layer in range(args.layers):
                for i in range(n):                 # "compute" this layer's KV
                    kv[layer, i].fill_(page_value(req, layer, i))
                if dev.type == "cuda":
                    torch.cuda.current_stream().synchronize()
                if args.mode == "notify":
                    base = layer * n * page_bytes
                    for i, s in enumerate(slots.tolist()):
                        off = (layer * args.pages + s) * page_bytes
                        if i < n - 1:
                            ep.put(mem, rk, offset=off, length=page_bytes,
                                   local_offset=base + i * page_bytes, track=False)
                        else:                      # the layer's last page carries the notification
                            ep.put_notify(mem, rk, layer_id(req, layer), offset=off,
                                          length=page_bytes, local_offset=base + i * page_bytes,
                                          track=False)
                    continue
                # page i of the layer (local) -> slot slots[i] of the same layer (remote)
                for c in chunks:
                    ep.put_pages(mem, rk, page_bytes, local[c], slots[c],
                                 local_offset=layer * n * page_bytes,
                                 offset=layer * args.pages * page_bytes,
                                 counted=layer_id(req, layer), track=False)
            ep.flush().wait(60)                    # the errors of untracked puts, if any
        dt = time.perf_counter() - t0
        assert ep.recv_bytes(tag=0xFFFF, timeout=60) == b"done"
        total = args.requests * args.layers * n * page_bytes
        print("prefill: %d pages, %.1f MB in %.3f s" % (args.requests * args.layers * n,
                                                        total / 1e6, dt))


def run_role(role, args, host, port, master):
    import torch.distributed as dist
    store = dist.TCPStore(host, port, None, master, timeout=datetime.timedelta(seconds=60),
                          wait_for_workers=False)
    (decode if role == "decode" else prefill)(args, store)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--role", choices=["both", "decode", "prefill"], default="both")
    p.add_argument("--store", default="127.0.0.1:29511",
                   help="TCPStore HOST:PORT (decode hosts it; with --role both a free port is used)")
    p.add_argument("--bind", default="127.0.0.1:0", help="decode's listen address")
    p.add_argument("--device", default="cpu")
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--pages", type=int, default=64, help="pages in decode's cache per layer")
    p.add_argument("--pages-per-request", type=int, default=12)
    p.add_argument("--page-elems", type=int, default=2048, help="fp16 elements per page")
    p.add_argument("--requests", type=int, default=3)
    p.add_argument("--mode", choices=["paged", "notify"], default="paged",
                   help="paged: a paged put + counted notification per layer; notify: a put "
                        "per page, the last a put_notify")
    p.add_argument("--chunks", type=int, default=1,
                   help="paged puts (and counted notifications) per layer")
    args = p.parse_args()
    host, port = args.store.rsplit(":", 1)
    if args.role != "both":
        return run_role(args.role, args, host, int(port), args.role == "decode")
    import torch.distributed as dist
    master = dist.TCPStore("127.0.0.1", 0, None, True, wait_for_workers=False)
    spawn = mp.get_context("spawn")
    procs = [spawn.Process(target=run_role, args=(r, args, "127.0.0.1", master.port, False))
             for r in ("decode", "prefill")]
    for pr in procs:
        pr.start()
    for pr in procs:
        pr.join(180)
    bad = [(pr.name, pr.exitcode) for pr in procs if pr.exitcode != 0]
    if bad:
        sys.exit("failed: %s" % bad)
    print("kv_cache_transfer: OK")


if __name__ == "__main__":
    main()
