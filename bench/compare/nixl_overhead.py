#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The cost of NIXL's layer over gpuwire: the same descriptor WRITEs, in one
run, through NIXL's agent with the GPUWIRE backend and through gpuwire's own
Python API (prepared descriptor lists, put_batch, polled with progress as NIXL's
check_xfer_state polls), between two processes.

    GW_NIXL_PYTHON=/path/to/venv/bin/python  # a Python that imports nixl
    NIXL_PLUGIN_DIR=<folder holding libplugin_GPUWIRE.so> \\
    PYTHONPATH=python LD_LIBRARY_PATH=build \\
    GPUWIRE_TRANSPORTS=tcp $GW_NIXL_PYTHON bench/compare/nixl_overhead.py [--sizes 4096,65536,1048576]
        [--batches 1,16,256,4096] [--max-bytes 64M] [--seconds 0.3] [--rounds 2]
        [--backends GPUWIRE[,UCX]] [--vram]

--backends GPUWIRE,UCX adds NIXL with its own UCX backend as a column (the
plugin folder must then hold NIXL's plugins too), for NIXL's own overhead
over another transport library on the same machine.

For each descriptor size and batch size (up to --max-bytes per batch) both
paths post the batch and wait for it, repeatedly, for --seconds, alternating
NIXL and gpuwire --rounds times (the best round of each is kept: the machine
may be shared).  Prints entries/s and GB/s of both and their ratio, and the
median latency of a batch of 1.  Host memory (NumPy) on both sides, or with
--vram GPU memory (torch CUDA tensors, registered as NIXL's VRAM: the
initiator's on GPU 0, the target's on GPU 1 when there are two GPUs, else on
GPU 0 too); both paths register the same buffers.
"""
import argparse
import multiprocessing as mp
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "nixl"))
import nixl_api  # noqa: E402  (nixl._api, or the nixl_cu13 / nixl_cu12 wheel's own)


def parse_size(s):
    s = s.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(s[-1:], 1)
    return int(s[:-1] if s[-1:] in "KMG" else s) * mult


def make_agent(name, backend):
    api = nixl_api.load()
    agent = api.nixl_agent("%s %s" % (name, backend), api.nixl_agent_config(backends=[]))
    agent.create_backend(backend)
    return agent


def alloc(nbytes, gpu, fill_seed=None):
    """(buffer, address, NIXL memory type, device id): a NumPy array, or with
    gpu set a torch uint8 tensor on that GPU; random bytes with fill_seed."""
    a = (np.zeros(nbytes, dtype=np.uint8) if fill_seed is None
         else np.random.default_rng(fill_seed).integers(0, 256, nbytes, dtype=np.uint8))
    if gpu is None:
        return a, a.ctypes.data, "DRAM", 0
    import torch

    t = torch.from_numpy(a).to(torch.device("cuda", gpu))
    torch.cuda.synchronize(gpu)
    return t, t.data_ptr(), "VRAM", gpu


def bench_gpus(vram):
    """(initiator GPU, target GPU), or (None, None) for host memory."""
    if not vram:
        return None, None
    import torch

    if not torch.cuda.is_available():
        sys.exit("--vram: torch %s has no usable CUDA device" % torch.__version__)
    return 0, (1 if torch.cuda.device_count() >= 2 else 0)


def target_main(conn, nbytes, backends, gpu):
    import gpuwire

    buf, addr, kind, dev = alloc(nbytes, gpu)
    agents = [make_agent("bench target", b) for b in backends]
    for agent in agents:
        agent.register_memory([(addr, nbytes, dev, "")], kind)
    ctx = gpuwire.Context()
    mem = ctx.register(buf)
    lis = ctx.listen("127.0.0.1:0")
    conn.send({"meta": [agent.get_agent_metadata() for agent in agents], "addr": addr, "dev": dev,
               "gw_addr": lis.address, "rkey": mem.pack()})
    eps = []
    # serve gpuwire's endpoint as the backend's progress thread serves NIXL's:
    # progress until idle, then sleep on the context fd (NIXL's backend
    # progresses itself)
    while not conn.poll(0):
        ctx.wait(0.01)
        while ctx.progress() > 0:
            pass
        if not eps:
            try:
                eps.append(lis.accept(timeout=0))
            except gpuwire.Timeout:
                pass
    conn.recv()
    for ep in eps:
        ep.close()
    lis.close()
    mem.close()
    ctx.close()


def timed(post_wait, seconds):
    """Runs post_wait repeatedly for about `seconds`; returns per-call times."""
    for _ in range(3):
        post_wait()
    times = []
    end = time.perf_counter() + seconds
    while True:
        t0 = time.perf_counter()
        post_wait()
        t1 = time.perf_counter()
        times.append(t1 - t0)
        if t1 >= end and len(times) >= 5:
            return times


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="4096,65536,1048576")
    ap.add_argument("--batches", default="1,16,256,4096")
    ap.add_argument("--max-bytes", default="64M")
    ap.add_argument("--seconds", type=float, default=0.3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--backends", default="GPUWIRE",
                    help="NIXL backends to run, each a column (e.g. GPUWIRE,UCX: UCX needs NIXL's own "
                         "plugins in the plugin folder)")
    ap.add_argument("--vram", action="store_true",
                    help="GPU memory on both sides (torch CUDA tensors; GPU 0 -> GPU 1 when there are two)")
    a = ap.parse_args()
    sizes = [parse_size(s) for s in a.sizes.split(",")]
    batches = [int(b) for b in a.batches.split(",")]
    nbytes = parse_size(a.max_bytes)
    backends = a.backends.split(",")

    import gpuwire

    igpu, tgpu = bench_gpus(a.vram)
    ctx_mp = mp.get_context("spawn")
    mine, theirs = ctx_mp.Pipe()
    p = ctx_mp.Process(target=target_main, args=(theirs, nbytes, backends, tgpu))
    p.start()
    try:
        if not mine.poll(120):
            sys.exit("target did not start")
        t = mine.recv()
        src, saddr, kind, sdev = alloc(nbytes, igpu, fill_seed=1)
        tdev = t["dev"]
        agents, peers = [], []
        for b, meta in zip(backends, t["meta"]):
            agent = make_agent("bench initiator", b)
            agent.register_memory([(saddr, nbytes, sdev, "")], kind)
            peer = agent.add_remote_agent(meta)
            agents.append(agent)
            peers.append(peer.decode() if isinstance(peer, bytes) else peer)

        ctx = gpuwire.Context()
        mem = ctx.register(src)
        ep = ctx.connect(t["gw_addr"])
        rkey = ep.unpack(t["rkey"])
        from importlib.metadata import version
        nixl_version = "?"
        for dist in ("nixl", "nixl-cu13", "nixl-cu12"):
            try:
                nixl_version = "%s %s" % (dist, version(dist))
                break
            except Exception:
                pass
        where = "host memory" if igpu is None else "VRAM, cuda:%d -> cuda:%d" % (igpu, tgpu)
        print("transport: gpuwire endpoint %s; GPUWIRE_TRANSPORTS=%s; %s (%s); %s; gpuwire %s"
              % (ep.transport, os.environ.get("GPUWIRE_TRANSPORTS", "(default)"), where,
                 nixl_api.load().__name__, nixl_version, gpuwire.version()))
        cols = ["NIXL+%s" % b for b in backends] + ["gpuwire"]
        print("%8s %6s | " % ("desc", "batch") + " | ".join("%13s ent/s %6s" % (c, "GB/s") for c in cols)
              + " | " + " ".join("%8s" % ("gw/" + b)[:8] for b in backends))
        lat = {}
        for s in sizes:
            for b in batches:
                if s * b > nbytes:
                    continue
                ldesc = [(saddr + i * s, s, sdev) for i in range(b)]
                rdesc = [(t["addr"] + i * s, s, tdev) for i in range(b)]
                fns, cleanup = [], []
                for agent, peer in zip(agents, peers):
                    lh = agent.prep_xfer_dlist("NIXL_INIT_AGENT", ldesc, kind)
                    rh = agent.prep_xfer_dlist(peer, rdesc, kind)
                    h = agent.make_prepped_xfer("WRITE", lh, list(range(b)), rh, list(range(b)))

                    def via_nixl(agent=agent, h=h):
                        if agent.transfer(h) == "ERR":
                            raise RuntimeError("NIXL transfer failed")
                        while True:
                            st = agent.check_xfer_state(h)
                            if st == "DONE":
                                return
                            if st == "ERR":
                                raise RuntimeError("NIXL transfer failed")

                    fns.append(via_nixl)
                    cleanup.append((agent, h, lh, rh))

                ld = ctx.dlist_local([(mem, i * s, s) for i in range(b)])
                rd = ep.dlist_remote([(rkey, i * s, s) for i in range(b)])

                def via_gpuwire():
                    # polled as NIXL's users poll check_xfer_state (which
                    # progresses the backend's context once per call)
                    r = ep.put_batch(ld, rd)
                    while not r.done():
                        ctx.progress()

                fns.append(via_gpuwire)
                best = [None] * len(fns)
                for _ in range(a.rounds):
                    for i, fn in enumerate(fns):
                        med = statistics.median(timed(fn, a.seconds))
                        if best[i] is None or med < best[i]:
                            best[i] = med
                for agent, h, lh, rh in cleanup:
                    agent.release_xfer_handle(h)
                    agent.release_dlist_handle(lh)
                    agent.release_dlist_handle(rh)
                ld.close()
                rd.close()
                g = best[-1]
                print("%8d %6d | " % (s, b) + " | ".join("%19.0f %6.3f" % (b / x, s * b / x / 1e9) for x in best)
                      + " | " + " ".join("%8.2f" % (g / x) for x in best[:-1]), flush=True)
                if b == 1:
                    lat[s] = best
        for s, ts in sorted(lat.items()):
            print("latency, batch of 1 x %d B: " % s
                  + ", ".join("%s %.1f us" % (c, x * 1e6) for c, x in zip(cols, ts)))
        print("ratio: gpuwire's own time / the NIXL backend's time for the same batch "
              "(1.00: NIXL's layer adds nothing)")
        rkey.close()
        ep.close()
        mem.close()
        ctx.close()
        mine.send("stop")
    finally:
        p.join(60)
        if p.is_alive():
            p.kill()


if __name__ == "__main__":
    main()
