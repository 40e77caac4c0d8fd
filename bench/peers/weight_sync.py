#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Weight sync: one sender process, N receivers, the same bf16 tensors, several engines.

The tensors are a Llama-shaped layer list (embedding, per layer q/k/v/o,
gate/up/down and two norms, final norm, lm_head), bf16, filled with
pseudo-random bits from one seed per tensor.  Each column moves all of them
from rank 0 to ranks 1..N, several times, and every receiver checks every
tensor against the sender (a checksum per tensor: the sum and the
position-weighted sum of its 16-bit words, each in int64, compared with the
sender's; receivers zero their copy before every round, so a round that
left a tensor behind fails).

Columns (each reported as measured or "skipped: <reason>"):
  gpuwire         the Python package: every tensor registered on both sides,
                  one put per tensor and a notification per round on each
                  receiver's endpoint (--gpuwire-mode batch: one put_batch
                  over descriptor lists); done when every receiver has
                  acknowledged the notification.  One row per transport
                  (--transports; on a GPU machine gpuwire's default choice).
  ce-nccl         checkpoint-engine's broadcast path: a ParameterServer per
                  rank (one per GPU), rank 0 registers the tensors
                  (register_checkpoint copies them into pinned host memory,
                  where checkpoint-engine keeps a checkpoint), gather_metas,
                  then ParameterServer.update(): H2D into a bucket, NCCL
                  broadcast, and on every rank an inference-side worker
                  process (checkpoint_engine.worker.update_weights_from_ipc,
                  the function vLLM's worker extension calls) that copies
                  each tensor out of the CUDA IPC bucket into its own model.
                  Timed on rank 0 around update(), which returns after every
                  rank's worker has loaded its tensors.
  ce-p2p          the same with update(ranks=[1..N]): receivers read rank 0's
                  pinned buckets through Mooncake's TransferEngine, then
                  broadcast among themselves.  Needs mooncake-transfer-engine
                  and an RDMA device (checkpoint-engine runs Mooncake with its
                  rdma or efa protocol on CUDA).
  torch           torch.distributed broadcast of each tensor from rank 0
                  (NCCL on GPUs, gloo on a CPU-only machine): the floor.

Placement: rank 0 on GPU 0, receiver r on GPU 1 + (r-1) % (GPUs-1) (all on
GPU 0 with one GPU).  Default N: GPUs - 1 (1 on a one-GPU or CPU machine).
NCCL and checkpoint-engine need one rank per GPU, so with more receivers
than GPUs - 1 their columns are skipped and gpuwire's rows run alone.

Without CUDA the tensors live in host memory, gpuwire runs over tcp and
intra, torch over gloo, and the checkpoint-engine columns are skipped.

    python3 bench/peers/weight_sync.py [--out DIR] [--layers 8] [--iters 3]
    python3 bench/peers/weight_sync.py --preset tiny --transports tcp,intra   # CPU
"""
import argparse
import datetime
import json
import multiprocessing as mp
import os
import platform
import socket
import statistics
import sys
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))

PRESETS = {  # hidden, intermediate, kv width, vocab, layers
    "8b": (4096, 14336, 1024, 32000, 8),     # Llama-3-8B shapes, Llama-2 vocab: ~4.0 GB at 8 layers
    "tiny": (256, 768, 64, 1000, 4),         # ~6.5 MB, for CPU runs and tests
}


def layer_list(hidden, inter, kv, vocab, layers):
    """[(name, shape)] of a Llama-shaped model, in load order."""
    out = [("model.embed_tokens.weight", (vocab, hidden))]
    for i in range(layers):
        p = "model.layers.%d." % i
        out += [(p + "input_layernorm.weight", (hidden,)),
                (p + "self_attn.q_proj.weight", (hidden, hidden)),
                (p + "self_attn.k_proj.weight", (kv, hidden)),
                (p + "self_attn.v_proj.weight", (kv, hidden)),
                (p + "self_attn.o_proj.weight", (hidden, hidden)),
                (p + "post_attention_layernorm.weight", (hidden,)),
                (p + "mlp.gate_proj.weight", (inter, hidden)),
                (p + "mlp.up_proj.weight", (inter, hidden)),
                (p + "mlp.down_proj.weight", (hidden, inter))]
    out += [("model.norm.weight", (hidden,)), ("lm_head.weight", (vocab, hidden))]
    return out


def numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


# -- helpers shared by every column --------------------------------------------------------

def device_for(rank, ngpu):
    if ngpu == 0:
        return "cpu"
    if ngpu == 1 or rank == 0:
        return "cuda:0"
    return "cuda:%d" % (1 + (rank - 1) % (ngpu - 1))


def fill(torch, shapes, dev):
    """The sender's tensors: pseudo-random 16-bit patterns, one seed per tensor."""
    out = []
    for i, (_, shape) in enumerate(shapes):
        g = torch.Generator(device=dev)
        g.manual_seed(1000 + i)
        t = torch.randint(-32768, 32768, shape, dtype=torch.int16, device=dev, generator=g)
        out.append(t.view(torch.bfloat16))
    return out


def zeros(torch, shapes, dev):
    return [torch.zeros(shape, dtype=torch.bfloat16, device=dev) for _, shape in shapes]


def checksums(torch, tensors, chunk=1 << 24):
    """Per tensor [sum, position-weighted sum] of its 16-bit words, int64 (wrapping,
    so independent of the reduction order): any changed, missing or moved word
    changes one of the two."""
    out = []
    for t in tensors:
        w = t.reshape(-1).view(torch.int16)
        s1 = s2 = 0
        for a in range(0, w.numel(), chunk):
            c = w[a:a + chunk].to(torch.int64)
            idx = torch.arange(a + 1, a + 1 + c.numel(), dtype=torch.int64, device=c.device)
            s1 += int(c.sum())
            s2 += int((c * idx).sum())
        out.append([s1 & 0xFFFFFFFFFFFFFFFF, s2 & 0xFFFFFFFFFFFFFFFF])
    return out


def maybe_corrupt(torch, args, tensors, it):
    """--selftest-corrupt: a receiver flips one bit of one tensor in the first
    round, after receiving it, so the run must report a mismatch."""
    if args.selftest_corrupt and it == 1:
        w = tensors[min(1, len(tensors) - 1)].reshape(-1).view(torch.int16)
        w[:1] ^= 1


def sync(torch, dev):
    if str(dev).startswith("cuda"):
        torch.cuda.synchronize(dev)


def client_store(port, timeout):
    import torch.distributed as dist
    return dist.TCPStore("127.0.0.1", port, None, False,
                         timeout=datetime.timedelta(seconds=timeout), wait_for_workers=False)


def barrier(store, name, rank, world):
    store.set("%s/%d" % (name, rank), b"1")
    store.wait(["%s/%d" % (name, r) for r in range(world)])


def report(store, col, rank, **kv):
    store.set("%s/result/%d" % (col, rank), json.dumps(kv).encode())


def rank_main(kind, col, rank, world, args, port, *extra):
    """A column's rank (a spawned process): runs its function; an exception is
    stored as that rank's error and the process exits 1."""
    fn = {"gpuwire": gw_rank, "torch": torch_rank, "ce": ce_rank}[kind]
    store = None
    try:
        store = client_store(port, args.timeout)
        fn(col, rank, world, args, store, *extra)
    except BaseException as e:  # noqa: BLE001 - reported, then the process fails
        sys.stderr.write("[%s rank %d] %s" % (col, rank, traceback.format_exc()))
        if store is not None:
            try:
                report(store, col, rank, error="%s: %s" % (type(e).__name__, str(e)[:400]))
            except Exception:  # noqa: BLE001
                pass
        sys.stderr.flush()
        os._exit(1)
    sys.stderr.flush()
    sys.stdout.flush()
    os._exit(0)   # a library may crash at interpreter exit after its rank reported


# -- gpuwire ----------------------------------------------------------------------------------

def gw_rank(col, rank, world, args, store, transport, mode):
    import torch
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import gpuwire
    from gpuwire.store import Directory
    torch.set_num_threads(1)
    dev = torch.device(device_for(rank, args.ngpu))
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    shapes = args.shapes
    rounds = args.warmup + args.iters
    with gpuwire.Context() as ctx:
        d = Directory(store, ctx, prefix=col + "/gw/", timeout=args.timeout)
        if rank == 0:
            src = fill(torch, shapes, dev)
            sync(torch, dev)
            sums = checksums(torch, src)
            report(store, col, 0, sums=sums)
            mems = [ctx.register(t, access=gpuwire.ACCESS_LOCAL) for t in src]
            peers = []
            for r in range(1, world):
                ep = d.connect("recv%d" % r)
                keys = [d.remote_key(ep, "recv%d/%d" % (r, i)) for i in range(len(shapes))]
                L = R = None
                if mode == "batch":
                    L = ctx.dlist_local([(m, 0, m.nbytes) for m in mems])
                    R = ep.dlist_remote([(k, 0, m.nbytes) for k, m in zip(keys, mems)],
                                        gpuwire.ACCESS_REMOTE_WRITE)
                peers.append((ep, keys, L, R))
            times, posted = [], []
            for it in range(1, rounds + 1):
                barrier(store, "%s/ready%d" % (col, it), rank, world)
                t0 = time.perf_counter()
                for ep, keys, L, R in peers:
                    if L is not None:
                        ep.put_batch(L, R, track=False)
                    else:
                        for m, k in zip(mems, keys):
                            ep.put(m, k, track=False)
                    ep.put_notify(b"", keys[0], it, length=0, track=False)
                t1 = time.perf_counter()
                for req in [ep.flush() for ep, _, _, _ in peers]:
                    req.wait(args.timeout)
                for ep, _, _, _ in peers:
                    ack = ep.recv_bytes(tag=it, timeout=args.timeout)
                    if ack != b"ack%d" % it:
                        raise RuntimeError("receiver sent %r for round %d" % (ack, it))
                t2 = time.perf_counter()
                if it > args.warmup:
                    times.append(t2 - t0)
                    posted.append(t1 - t0)
            transport_used = peers[0][0].transport if peers else "?"
            report(store, col, 0, sums=sums, times=times, post_s=posted, transport=transport_used)
        else:
            dst = zeros(torch, shapes, dev)
            mems = [ctx.register(t, access=gpuwire.ACCESS_REMOTE_WRITE) for t in dst]
            for i, m in enumerate(mems):
                d.publish("recv%d/%d" % (rank, i), m)
            d.serve("recv%d" % rank, addr="127.0.0.1:0")
            ep = d.accept("recv%d" % rank)
            got = []
            for it in range(1, rounds + 1):
                for t in dst:
                    t.zero_()
                sync(torch, dev)
                barrier(store, "%s/ready%d" % (col, it), rank, world)
                v = ep.wait_notify(timeout=args.timeout)
                if v != it:
                    raise RuntimeError("notification %d, wanted round %d" % (v, it))
                ep.send_bytes(b"ack%d" % it, tag=it)
                maybe_corrupt(torch, args, dst, it)
                got.append(checksums(torch, dst))
            # stay until the sender has read every ack (its endpoint closes with ours)
            barrier(store, "%s/done" % col, rank, world)
            report(store, col, rank, sums=got, transport=ep.transport)
            return
        barrier(store, "%s/done" % col, rank, world)


# -- torch.distributed broadcast --------------------------------------------------------------

def torch_rank(col, rank, world, args, store):
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    dev = torch.device(device_for(rank, args.ngpu))
    backend = "nccl" if dev.type == "cuda" else "gloo"
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    dist.init_process_group(backend, store=dist.PrefixStore(col + "/pg", store),
                            rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=args.timeout))
    shapes = args.shapes
    one = torch.ones(1, device=dev)

    def all_done():
        dist.all_reduce(one)
        sync(torch, dev)

    if rank == 0:
        ts = fill(torch, shapes, dev)
        sums = checksums(torch, ts)
        report(store, col, 0, sums=sums)
    else:
        ts = zeros(torch, shapes, dev)
    all_done()
    times, got = [], []
    for it in range(1, args.warmup + args.iters + 1):
        if rank:
            for t in ts:
                t.zero_()
        all_done()
        t0 = time.perf_counter()
        for t in ts:
            dist.broadcast(t, src=0)
        all_done()
        t1 = time.perf_counter()
        if rank == 0 and it > args.warmup:
            times.append(t1 - t0)
        if rank:
            maybe_corrupt(torch, args, ts, it)
            got.append(checksums(torch, ts))
    if rank == 0:
        report(store, col, 0, sums=sums, times=times, transport=backend)
    else:
        report(store, col, rank, sums=got, transport=backend)
    all_done()
    dist.destroy_process_group()


# -- checkpoint-engine ------------------------------------------------------------------------

def ce_worker(rank, gpu, uuid, shapes, copy, qin, qout):
    """The inference side of one rank: a model of its own on the rank's GPU,
    loaded by checkpoint_engine.worker.update_weights_from_ipc (the call vLLM's
    VllmColocateWorkerExtension makes), checked and zeroed after each update."""
    import torch
    import zmq
    from checkpoint_engine.worker import update_weights_from_ipc
    parent = os.getppid()

    def watchdog():   # a rank killed on a timeout leaves no worker behind holding its GPU
        while True:
            time.sleep(2)
            if os.getppid() != parent:
                os._exit(3)

    threading.Thread(target=watchdog, daemon=True).start()
    try:
        torch.cuda.set_device(gpu)
        dev = torch.device("cuda", gpu)
        model = dict(zip([n for n, _ in shapes], zeros(torch, shapes, dev))) if copy else {}
        zctx = zmq.Context()
        seen = set()

        def load(weights):
            for name, t in weights:
                if copy:
                    model[name].copy_(t)
                seen.add(name)

        qout.put("ready")
        while True:
            paths = qin.get()
            if paths is None:
                break
            seen.clear()
            update_weights_from_ipc(zctx, dict(paths)[uuid], device_id=gpu, run=load)
            torch.cuda.synchronize(dev)
            if copy:
                missing = [n for n, _ in shapes if n not in seen]
                sums = checksums(torch, [model[n] for n, _ in shapes])
                for t in model.values():
                    t.zero_()
                torch.cuda.synchronize(dev)
                qout.put({"sums": sums, "missing": missing[:5]})
            else:
                qout.put({"loaded": len(seen)})
    except BaseException as e:  # noqa: BLE001
        traceback.print_exc()
        qout.put({"error": "worker: %s: %s" % (type(e).__name__, str(e)[:300])})
        qout.close()
        qout.join_thread()   # the message is out before the process ends
        os._exit(1)
    qout.close()
    qout.join_thread()
    os._exit(0)


def _block_mooncake():
    """The broadcast path never uses checkpoint-engine's P2P store; with the
    mooncake module hidden its ParameterServer skips creating one (it catches
    the ImportError) rather than failing without an RDMA device."""
    sys.modules["mooncake"] = None
    sys.modules["mooncake.engine"] = None


def ce_rank(col, rank, world, args, store, ps_port, p2p, bucket_gb):
    import torch
    if not p2p:
        _block_mooncake()
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(ps_port - 1))
    if bucket_gb:
        os.environ["PS_MAX_BUCKET_SIZE_GB"] = "%g" % bucket_gb
    import checkpoint_engine.ps as ceps
    from checkpoint_engine.ps import ParameterServer, _get_physical_gpu_id
    try:
        ceps.get_ip()
    except Exception as e:  # noqa: BLE001 - no route and no resolvable host name
        sys.stderr.write("[%s rank %d] checkpoint_engine get_ip() failed (%s); using 127.0.0.1\n"
                         % (col, rank, e))
        ceps.get_ip = lambda: "127.0.0.1"
    gpu = rank
    torch.cuda.set_device(gpu)
    shapes = args.shapes
    ps = ParameterServer(rank=rank, world_size=world, auto_pg=args.ce_auto_pg,
                         master_addr="127.0.0.1", master_port=ps_port)
    uuid = _get_physical_gpu_id(ps.device_manager, gpu)
    sctx = mp.get_context("spawn")
    qin, qout = sctx.Queue(), sctx.Queue()
    w = sctx.Process(target=ce_worker, args=(rank, gpu, uuid, shapes, rank != 0, qin, qout))
    w.start()
    stop = threading.Event()

    def monitor():
        """A worker that dies leaves its ParameterServer waiting on ZMQ for ever:
        report the worker's own error instead and end this rank."""
        while not stop.wait(1.0):
            if not w.is_alive():
                why = "inference-side worker exited with %s" % w.exitcode
                try:
                    m = qout.get(timeout=2)
                    why += ": %s" % (m.get("error", m) if isinstance(m, dict) else m)
                except Exception:  # noqa: BLE001 - no message left
                    pass
                sys.stderr.write("[%s rank %d] %s\n" % (col, rank, why))
                report(store, col, rank, error=why)
                os._exit(1)

    threading.Thread(target=monitor, daemon=True).start()
    try:
        msg = qout.get(timeout=args.timeout)
        if msg != "ready":
            raise RuntimeError("worker did not start: %r" % (msg,))
        name = "weights"
        sums = None
        if rank == 0:
            dev = torch.device("cuda", 0)
            src = fill(torch, shapes, dev)
            sums = checksums(torch, src)
            named = {n: t.cpu() for (n, _), t in zip(shapes, src)}
            del src
            torch.cuda.empty_cache()
            report(store, col, 0, sums=sums)
            ps.register_checkpoint(name, named_tensors=named)
            del named
        if not args.ce_auto_pg:
            ps.init_process_group()
        ps.gather_metas(name)
        ranks = list(range(1, world)) if p2p else None
        gets_update = not (p2p and rank == 0)
        times, got = [], []
        for it in range(1, args.warmup + args.iters + 1):
            barrier(store, "%s/ready%d" % (col, it), rank, world)
            t0 = time.perf_counter()
            ps.update(name, qin.put, ranks=ranks)
            t1 = time.perf_counter()
            if gets_update:
                res = qout.get(timeout=args.timeout)
                if "error" in res:
                    raise RuntimeError(res["error"])
                if rank:
                    if res["missing"]:
                        raise RuntimeError("worker got no tensor named %s" % res["missing"])
                    got.append(res["sums"])
            if rank == 0 and it > args.warmup:
                times.append(t1 - t0)
        bucket = os.environ.get("PS_MAX_BUCKET_SIZE_GB", "8 (default)")
        if rank == 0:
            report(store, col, 0, sums=sums, times=times,
                   transport="%s, bucket limit %s GiB, auto_pg=%s" % (
                       "mooncake P2P + NCCL" if p2p else "NCCL broadcast", bucket, args.ce_auto_pg))
        else:
            report(store, col, rank, sums=got, transport="checkpoint-engine")
        barrier(store, "%s/done" % col, rank, world)
    finally:
        stop.set()
        qin.put(None)
        w.join(30)
        if w.is_alive():
            w.kill()


# -- driver -------------------------------------------------------------------------------------

def free_port():
    """A free port for checkpoint-engine's own TCPStore (given to ParameterServer as
    master_port; without it, it would take MASTER_PORT + 1)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ce_unavailable(args, p2p):
    try:
        import checkpoint_engine
        ver = getattr(checkpoint_engine, "__version__", "?")
    except Exception as e:  # noqa: BLE001
        return "checkpoint-engine not importable (%s: %s)" % (type(e).__name__, str(e)[:200]), None
    if args.ngpu == 0:
        return ("no CUDA device: checkpoint-engine's ParameterServer needs CUDA or an NPU "
                "(DeviceManager raises 'The current device type is not supported')"), ver
    if args.ngpu < args.receivers + 1:
        return ("checkpoint-engine runs one ParameterServer per GPU (rank %% GPU count, a ZMQ "
                "socket per GPU UUID) and NCCL one rank per GPU: %d receivers need %d GPUs, "
                "%d here" % (args.receivers, args.receivers + 1, args.ngpu)), ver
    if p2p:
        why = []
        try:
            from checkpoint_engine.device_utils import _get_rdma_devices
            devs, listed = _get_rdma_devices(), "libibverbs lists none"
        except Exception as e:  # noqa: BLE001 - no libibverbs, or its list failed
            devs, listed = [], "%s: %s" % (type(e).__name__, str(e)[:120])
        if not devs:
            why.append("no RDMA device (%s): checkpoint-engine's P2P store runs Mooncake with its "
                       "'rdma' (or 'efa') protocol on CUDA, which needs an RDMA NIC" % listed)
        try:
            import mooncake.engine  # noqa: F401
        except Exception as e:  # noqa: BLE001
            why.append("mooncake-transfer-engine not importable (%s: %s), which moves its P2P "
                       "buckets" % (type(e).__name__, str(e)[:120]))
        if why:
            return "; ".join(why), ver
    return None, ver


def run_column(col, kind, world, args, extra=(), env=None):
    """Spawns the ranks of one column, waits, collects their reports."""
    import torch.distributed as dist
    store = dist.TCPStore("127.0.0.1", 0, None, True, wait_for_workers=False,
                          timeout=datetime.timedelta(seconds=args.timeout))
    saved = dict(os.environ)
    os.environ.update(env or {})
    sctx = mp.get_context("spawn")
    procs = [sctx.Process(target=rank_main, args=(kind, col, r, world, args, store.port) + tuple(extra),
                          name="%s-%d" % (col, r)) for r in range(world)]
    t0 = time.time()
    try:
        for p in procs:
            p.start()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    deadline = t0 + args.column_timeout
    for p in procs:
        p.join(max(1, deadline - time.time()))
    hung = [p for p in procs if p.is_alive()]
    for p in hung:
        p.kill()
        p.join(5)
    results, errors = {}, []
    for r in range(world):
        key = "%s/result/%d" % (col, r)
        if store.check([key]):
            v = json.loads(bytes(store.get(key)))
            if "error" in v:
                errors.append("rank %d: %s" % (r, v["error"]))
            results[r] = v
    if hung:
        errors.append("timed out after %d s (ranks %s)" % (
            args.column_timeout, ",".join(p.name.rsplit("-", 1)[1] for p in hung)))
    for p in procs:
        if p.exitcode not in (0, None) and not hung and not errors:
            errors.append("%s exited with %s" % (p.name, p.exitcode))
    return results, errors, time.time() - t0


def evaluate(col, results, errors, world, args):
    """-> row dict: time, GB/s, check."""
    row = {"column": col}
    if errors:
        row["skipped"] = "failed: " + "; ".join(errors)[:600]
        return row
    s0 = results.get(0, {})
    times, want = s0.get("times"), s0.get("sums")
    if not times or want is None:
        row["skipped"] = "failed: rank 0 reported no times"
        return row
    bad = []
    rounds = args.warmup + args.iters
    for r in range(1, world):
        got = results.get(r, {}).get("sums")
        if got is None or len(got) != rounds:
            bad.append("receiver %d reported %s rounds" % (r, None if got is None else len(got)))
            continue
        for it, sums in enumerate(got, 1):
            diff = [args.shapes[i][0] for i, (a, b) in enumerate(zip(sums, want)) if a != b]
            if len(sums) != len(want):
                diff.append("(%d tensors, wanted %d)" % (len(sums), len(want)))
            if diff:
                bad.append("receiver %d round %d: %d tensors differ (%s)" % (
                    r, it, len(diff), ", ".join(diff[:3])))
    row.update(transport=s0.get("transport", ""), times=times,
               best_s=min(times), median_s=statistics.median(times),
               check="ok: %d tensors x %d receivers x %d rounds bit-exact" % (
                   len(want), world - 1, rounds) if not bad else "MISMATCH: " + "; ".join(bad[:4]))
    row["gbps"] = args.nbytes / row["median_s"] / 1e9
    row["gbps_best"] = args.nbytes / row["best_s"] / 1e9
    if s0.get("post_s"):
        row["post_median_s"] = statistics.median(s0["post_s"])
    if bad:
        row["mismatch"] = True
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", choices=sorted(PRESETS), help="default: 8b with CUDA, tiny without")
    ap.add_argument("--layers", type=int, help="override the preset's layer count")
    ap.add_argument("--receivers", type=int, help="default: GPUs - 1 (1 with one GPU or none)")
    ap.add_argument("--iters", type=int, default=3, help="timed rounds per column")
    ap.add_argument("--warmup", type=int, default=1, help="untimed rounds first (checked too)")
    ap.add_argument("--peers", default="gpuwire,torch,ce-nccl,ce-p2p",
                    help="columns to run, comma-separated")
    ap.add_argument("--transports", help="gpuwire rows, e.g. tcp,intra (default: gpuwire's own "
                    "choice with CUDA; tcp,intra without)")
    ap.add_argument("--gpuwire-mode", default="puts",
                    help="puts (one put per tensor), batch (one put_batch over descriptor "
                    "lists), or both comma-separated: a row each")
    ap.add_argument("--ce-bucket-gb", default="0",
                    help="PS_MAX_BUCKET_SIZE_GB for checkpoint-engine, one row per value, "
                    "comma-separated (0: its default, 8 GiB)")
    ap.add_argument("--ce-auto-pg", action="store_true",
                    help="ParameterServer(auto_pg=True): a new process group per update")
    ap.add_argument("--cpu", action="store_true", help="host memory even where CUDA exists")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="libgpuwire's folder")
    ap.add_argument("--timeout", type=float, default=120, help="seconds any one wait may take")
    ap.add_argument("--column-timeout", type=float, default=240, help="seconds for one column")
    ap.add_argument("--out", help="folder for weight_sync.json and weight_sync.txt")
    ap.add_argument("--machine", default=platform.node())
    ap.add_argument("--selftest-corrupt", action="store_true",
                    help="receivers flip one bit after the first round (the check must fail)")
    args = ap.parse_args()

    import torch
    args.ngpu = 0 if args.cpu or not torch.cuda.is_available() else torch.cuda.device_count()
    preset = args.preset or ("8b" if args.ngpu else "tiny")
    h, i, kv, v, layers = PRESETS[preset]
    args.shapes = layer_list(h, i, kv, v, args.layers if args.layers is not None else layers)
    args.nbytes = sum(numel(s) * 2 for _, s in args.shapes)
    if args.receivers is None:
        args.receivers = max(1, args.ngpu - 1)
    world = args.receivers + 1
    if args.transports is None:
        args.transports = "auto" if args.ngpu else "tcp,intra"
    os.environ["LD_LIBRARY_PATH"] = args.build + (
        ":" + os.environ["LD_LIBRARY_PATH"] if os.environ.get("LD_LIBRARY_PATH") else "")
    sizes = sorted(numel(s) * 2 for _, s in args.shapes)
    head = ("weight sync: %d bf16 tensors, %.3f GB (%s .. %s each), rank 0 -> %d receiver(s), %s; "
            "%d warm-up + %d timed rounds; torch %s; %s" % (
                len(args.shapes), args.nbytes / 1e9, fmt_bytes(sizes[0]), fmt_bytes(sizes[-1]),
                args.receivers, ("%d GPU(s): %s" % (args.ngpu, torch.cuda.get_device_name(0)))
                if args.ngpu else "host memory (no CUDA)", args.warmup, args.iters,
                torch.__version__, args.machine))
    print(head, flush=True)
    print("placement: " + ", ".join("rank %d %s" % (r, device_for(r, args.ngpu))
                                    for r in range(world)), flush=True)
    wanted = [p.strip() for p in args.peers.split(",") if p.strip()]
    rows = []
    for col in wanted:
        if col == "gpuwire":
            for tr in args.transports.split(","):
                for mode in args.gpuwire_mode.split(","):
                    if mode not in ("puts", "batch"):
                        sys.exit("--gpuwire-mode: %r is neither puts nor batch" % mode)
                    name = "gpuwire" if tr == "auto" else "gpuwire/%s" % tr
                    name += "" if mode == "puts" else "[batch]"
                    env = {} if tr == "auto" else {"GPUWIRE_TRANSPORTS": tr}
                    print("== %s" % name, flush=True)
                    res, err, _ = run_column(name, "gpuwire", world, args, extra=(tr, mode),
                                             env=env)
                    rows.append(evaluate(name, res, err, world, args))
                    show(rows[-1])
                    save(rows, args, head)
        elif col in ("ce-nccl", "ce-p2p"):
            p2p = col == "ce-p2p"
            why, ver = ce_unavailable(args, p2p)
            if why:
                rows.append({"column": col, "skipped": why})
                show(rows[-1])
                continue
            for b in [float(x) for x in args.ce_bucket_gb.split(",")]:
                name = col if not b else "%s/%gGiB" % (col, b)
                print("== %s (checkpoint-engine %s)" % (name, ver), flush=True)
                res, err, _ = run_column(name, "ce", world, args, extra=(free_port(), p2p, b))
                rows.append(evaluate(name, res, err, world, args))
                rows[-1]["version"] = ver
                show(rows[-1])
                save(rows, args, head)
        elif col == "torch":
            name = "torch"
            if args.ngpu and args.ngpu < world:
                rows.append({"column": name, "skipped": "NCCL needs one rank per GPU: %d ranks, "
                             "%d GPUs" % (world, args.ngpu)})
                show(rows[-1])
                continue
            print("== torch", flush=True)
            res, err, _ = run_column(name, "torch", world, args)
            rows.append(evaluate(name, res, err, world, args))
            show(rows[-1])
            save(rows, args, head)
        else:
            sys.exit("unknown column %r (gpuwire, ce-nccl, ce-p2p, torch)" % col)
    print(save(rows, args, head), flush=True)
    measured = [r for r in rows if "skipped" not in r]
    if any(r.get("mismatch") for r in measured):
        sys.exit("weight_sync: a receiver's tensors differ from the sender's")
    if not any(r["column"].startswith("gpuwire") for r in measured):
        sys.exit("weight_sync: no gpuwire row was measured")


def save(rows, args, head):
    """The table so far; written to --out after every column, so a run cut short keeps
    what it measured."""
    table = render(rows, args, head)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "weight_sync.txt"), "w") as f:
            f.write(table + "\n")
        with open(os.path.join(args.out, "weight_sync.json"), "w") as f:
            json.dump({"header": head, "machine": args.machine, "bytes": args.nbytes,
                       "tensors": len(args.shapes), "receivers": args.receivers,
                       "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                       "rows": rows}, f, indent=1)
    return table


def fmt_bytes(n):
    for unit, div in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= div:
            return "%.1f %s" % (n / div, unit)
    return "%d B" % n


def show(row):
    if "skipped" in row:
        print("%s: skipped: %s" % (row["column"], row["skipped"]), flush=True)
    else:
        print("%s: median %.4f s, %.2f GB/s per receiver; %s" % (
            row["column"], row["median_s"], row["gbps"], row["check"]), flush=True)


def render(rows, args, head):
    gw = [r for r in rows if r["column"].startswith("gpuwire") and "skipped" not in r]
    ref = max(gw, key=lambda r: r["gbps"]) if gw else None
    lines = [head, "",
             "| column | path | median s | best s | GB/s per receiver (median) | GB/s all receivers "
             "| %s | check |" % ("%s / column" % ref["column"] if ref else "ratio"),
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in rows:
        if "skipped" in r:
            lines.append("| %s | skipped: %s | | | | | | |" % (r["column"], r["skipped"]))
            continue
        ratio = "%.2fx" % (ref["gbps"] / r["gbps"]) if ref else "-"
        lines.append("| %s | %s | %.4f | %.4f | %.2f | %.2f | %s | %s |" % (
            r["column"], r.get("transport", ""), r["median_s"], r["best_s"], r["gbps"],
            r["gbps"] * args.receivers, ratio, r["check"]))
    lines.append("")
    lines.append("GB/s per receiver: the tensors' bytes (%d) over the round's time; a round ends when "
                 "every receiver holds every tensor (gpuwire: all acknowledged; checkpoint-engine: "
                 "update() returned on rank 0; torch: an all_reduce after the broadcasts). Ratio "
                 "above 1: gpuwire is faster." % args.nbytes)
    return "\n".join(lines)


if __name__ == "__main__":
    main()
