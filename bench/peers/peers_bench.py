#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""gpuwire and the peer transfer libraries on the same transfers, side by side.

Every engine runs as two processes, a target that registers a buffer and an
initiator that WRITEs into it, as in a real deployment; the initiator knows
each transfer is complete before it times the next one.  Shapes:

  lat8      one 8-byte put (latency)
  b1_4k     one 4 KiB descriptor as a batch of 1
  b256_1k   256 x 1 KiB descriptors in one batch
  b4096_16k 4,096 x 16 KiB descriptors in one batch (64 MiB)
  one_64m   one 64 MiB put

Batched descriptors lie at a stride of twice their size on both sides, so no
library can merge neighbours into one larger copy.  Each shape is timed
transfer by transfer over several rounds; a row reports the median round's
GB/s and ops/s (transfers or batches per second) and the median latency of
all timed transfers.

Pairs compared (host memory; --gpu: device memory through torch):
  mooncake/tcp    Mooncake TransferEngine, TCP transport   vs gpuwire tcp
  nixl/ucx-tcp    NIXL agent, UCX backend, UCX_TLS=tcp     vs gpuwire tcp
  nixl/ucx-sm     NIXL agent, UCX backend, UCX_TLS=sm,self,tcp (UCX picks
                  shared memory / CMA on one host; NIXL's UCX backend needs a
                  transport with a peer failure handler, hence tcp)
                                                           vs gpuwire intra
  uccl/p2p        UCCL P2P engine                          (load probe only)
A peer whose module is missing or fails to load is reported as
"skipped: <reason>"; gpuwire's own rows run regardless.

  python3 bench/peers/peers_bench.py --out DIR [--quick] [--gpu] [--rounds N]
The gpuwire side uses python/gpuwire and libgpuwire from --build (default
./build); the peers are imported by the same interpreter, so run it with the
venv's python (bench/peers/README.md).
"""
import argparse
import csv
import datetime
import json
import mmap
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
import traceback
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))

SHAPES = [  # name, descriptors (0: a single put, not a batch), bytes each
    ("lat8", 0, 8),
    ("b1_4k", 1, 4096),
    ("b256_1k", 256, 1024),
    ("b4096_16k", 4096, 16384),
    ("one_64m", 0, 64 << 20),
]
BUF = 128 << 20          # 4096 x 16 KiB at a 32 KiB stride
# transfers per round: full run, --quick
ITERS = {"lat8": (2000, 20), "b1_4k": (1000, 20), "b256_1k": (200, 5),
         "b4096_16k": (5, 1), "one_64m": (8, 1)}

UCX_BASE = {"UCX_NET_DEVICES": "lo"}
GPU_UCX_TLS = "cuda_ipc,cuda_copy,sm,self,tcp"


def offsets(count, size):
    n = max(count, 1)
    stride = 2 * size if count > 1 else size
    return [i * stride for i in range(n)]


def pattern(n):
    unit = bytes((i * 7 + 3) & 0xFF for i in range(251))
    return (unit * (n // len(unit) + 1))[:n]


# ---------------------------------------------------------------------------
# buffers


class HostBuf:
    def __init__(self, n, fill):
        import ctypes
        self.mm = mmap.mmap(-1, n)
        self.n = n
        self.addr = ctypes.addressof(ctypes.c_char.from_buffer(self.mm))
        self.dev = 0
        if fill:
            self.mm[:] = pattern(n)

    def obj(self):          # what gpuwire registers
        return self.mm

    def view(self, n):
        return memoryview(self.mm)[:n]


class GpuBuf:
    def __init__(self, n, fill, dev):
        import torch
        self.t = torch.zeros(n, dtype=torch.uint8, device="cuda:%d" % dev)
        if fill:
            self.t.copy_(torch.frombuffer(bytearray(pattern(n)), dtype=torch.uint8))
        torch.cuda.synchronize(dev)
        self.n, self.addr, self.dev = n, self.t.data_ptr(), dev

    def obj(self):
        return self.t

    def view(self, n):
        return memoryview(self.t[:n].cpu().numpy())


def selected(args):
    return [sh for sh in SHAPES if not args.shapes or sh[0] in args.shapes.split(",")]


def written_crc(buf, args):
    """CRC-32 over every region the selected shapes write, shape by shape:
    the same on both sides once everything landed."""
    ext = max((o + size for _, count, size in selected(args) for o in offsets(count, size)),
              default=0)
    v, crc = buf.view(ext), 0
    for _, count, size in selected(args):
        for o in offsets(count, size):
            crc = zlib.crc32(v[o:o + size], crc)
    return crc


def make_buf(args, fill, role):
    if args.gpu:
        import torch
        ngpu = torch.cuda.device_count()
        dev = 1 if (role == "target" and ngpu > 1) else 0
        return GpuBuf(BUF, fill, dev)
    return HostBuf(BUF, fill)


# ---------------------------------------------------------------------------
# engines: target_setup(buf) -> info; serve(stop); connect(info, buf);
# op(shape) -> a callable doing one complete transfer; describe() -> str


class GpuwireEngine:
    def __init__(self, transport, args):
        import gpuwire
        self.gw = gpuwire
        self.transport = transport
        self.ctx = gpuwire.Context(transports=transport)

    def target_setup(self, buf):
        self.lis = self.ctx.listen("127.0.0.1:0")
        self.mem = self.ctx.register(buf.obj())
        return {"addr": self.lis.address, "key": self.mem.pack().hex()}

    def serve(self, stop):
        ep = self.lis.accept(120)
        while not stop.is_set():
            self.ctx.progress()
            self.ctx.wait(0.02)
        self.ep = ep

    def connect(self, info, buf):
        self.mem = self.ctx.register(buf.obj())
        self.ep = self.ctx.connect(info["addr"])
        self.rkey = self.ep.unpack(bytes.fromhex(info["key"]))
        self.actual = "%s, %s" % (self.ep.transport, "C accelerator" if self.gw._lib.fast
                                   else "ctypes (no accelerator built)")

    def op(self, count, size):
        ep, mem, rkey = self.ep, self.mem, self.rkey
        if count == 0:
            return lambda: ep.put(mem, rkey, 0, size, 0).wait(60)
        offs = offsets(count, size)
        L = self.ctx.dlist_local([(mem, o, size) for o in offs])
        R = ep.dlist_remote([(rkey, o, size) for o in offs])
        return lambda: ep.put_batch(L, R).wait(60)

    def split_op(self, count, size):
        """(post, complete) for --split: post returns what complete waits on."""
        ep, mem, rkey = self.ep, self.mem, self.rkey
        if count == 0:
            return (lambda: ep.put(mem, rkey, 0, size, 0)), (lambda r: r.wait(60))
        offs = offsets(count, size)
        L = self.ctx.dlist_local([(mem, o, size) for o in offs])
        R = ep.dlist_remote([(rkey, o, size) for o in offs])
        self._keep = (L, R)
        return (lambda: ep.put_batch(L, R)), (lambda r: r.wait(60))

    def describe(self):
        return "gpuwire %s (Python package; put / put_batch on prepared lists)" % self.transport

    def close(self):
        self.ctx.close()


class MooncakeEngine:
    def __init__(self, protocol, args):
        from mooncake.engine import TransferEngine
        self.te = TransferEngine()
        self.protocol = protocol
        rc = self.te.initialize("127.0.0.1", "P2PHANDSHAKE", protocol, "")
        if rc != 0:
            raise RuntimeError("TransferEngine.initialize(127.0.0.1, P2PHANDSHAKE, %s) = %d"
                               % (protocol, rc))

    def _reg(self, buf):
        loc = ("cuda:%d" % buf.dev) if isinstance(buf, GpuBuf) else "cpu:0"
        rc = self.te.register_memory(buf.addr, buf.n, loc)
        if rc != 0:
            raise RuntimeError("register_memory = %d" % rc)
        self.buf = buf

    def target_setup(self, buf):
        self._reg(buf)
        return {"host": "127.0.0.1:%d" % self.te.get_rpc_port(), "addr": buf.addr}

    def serve(self, stop):
        stop.wait()

    def connect(self, info, buf):
        self._reg(buf)
        self.host, self.raddr = info["host"], info["addr"]
        self.actual = self.protocol

    def op(self, count, size):
        te, host, la, ra = self.te, self.host, self.buf.addr, self.raddr
        if count == 0:
            def one():
                rc = te.transfer_sync_write(host, la, ra, size)
                if rc != 0:
                    raise RuntimeError("transfer_sync_write = %d" % rc)
            return one
        offs = offsets(count, size)
        lo, ro, ln = [la + o for o in offs], [ra + o for o in offs], [size] * len(offs)

        def batch():
            rc = te.batch_transfer_sync_write(host, lo, ro, ln)
            if rc != 0:
                raise RuntimeError("batch_transfer_sync_write = %d" % rc)
        return batch

    def describe(self):
        return "Mooncake TransferEngine %s (transfer_sync_write / batch_transfer_sync_write)" \
            % self.protocol

    def close(self):
        pass


def import_nixl():
    errs = []
    for mod in ("nixl", "nixl_cu12", "nixl_cu13"):
        try:
            m = __import__(mod + "._api", fromlist=["nixl_agent"])
            return m
        except Exception as e:  # noqa: BLE001 - the reason is reported
            errs.append("%s: %s" % (mod, str(e).splitlines()[0] if str(e) else type(e).__name__))
    raise ImportError("; ".join(errs))


class NixlEngine:
    def __init__(self, tls, args):
        api = import_nixl()
        self.api = api
        self.role = args.worker
        self.tls = tls
        # the target's progress thread answers UCX's active messages; the
        # initiator polls its own requests (measured faster here than with a
        # second progress thread competing for the cores)
        conf = api.nixl_agent_config(enable_prog_thread=(self.role == "target"),
                                     backends=["UCX"])
        self.agent = api.nixl_agent("gw-peers-" + self.role, conf)
        self.mt = "VRAM" if args.gpu else "DRAM"

    def _reg(self, buf):
        self.reg = self.agent.register_memory([(buf.addr, buf.n, buf.dev, "")], self.mt)
        self.buf = buf

    def target_setup(self, buf):
        self._reg(buf)
        return {"md": self.agent.get_agent_metadata().hex(), "addr": buf.addr,
                "dev": buf.dev}

    def serve(self, stop):
        stop.wait()

    def connect(self, info, buf):
        self._reg(buf)
        self.peer = self.agent.add_remote_agent(bytes.fromhex(info["md"]))
        self.raddr, self.rdev = info["addr"], info["dev"]
        self.actual = "UCX_TLS=" + os.environ.get("UCX_TLS", "")

    def op(self, count, size):
        ag = self.agent
        offs = offsets(count, size)
        L = ag.prep_xfer_dlist("NIXL_INIT_AGENT",
                               [(self.buf.addr + o, size, self.buf.dev) for o in offs], self.mt)
        R = ag.prep_xfer_dlist(self.peer, [(self.raddr + o, size, self.rdev) for o in offs],
                               self.mt)
        idx = list(range(len(offs)))
        h = ag.make_prepped_xfer("WRITE", L, idx, R, idx)
        self._keep = getattr(self, "_keep", []) + [(L, R, h)]
        self._last = h

        def xfer():
            s = ag.transfer(h)
            while s == "PROC":
                s = ag.check_xfer_state(h)
            if s != "DONE":
                raise RuntimeError("NIXL transfer state %s" % s)
        return xfer

    def split_op(self, count, size):
        self.op(count, size)
        ag, h = self.agent, self._last

        def complete(s):
            while s == "PROC":
                s = ag.check_xfer_state(h)
            if s != "DONE":
                raise RuntimeError("NIXL transfer state %s" % s)
        return (lambda: ag.transfer(h)), complete

    def describe(self):
        return "NIXL agent, UCX backend (%s), prepped WRITE, polled" % self.tls

    def close(self):
        pass


def uccl_probe():
    from uccl import p2p  # noqa: F401
    raise RuntimeError("uccl.p2p loads, but this driver has no UCCL transfer path yet "
                       "(its API was not available to test on a loading wheel)")


# ---------------------------------------------------------------------------
# configurations


def configs(args):
    """(peer, peer_transport, make_peer, gpuwire_transport, env)"""
    out = []
    mc = args.mooncake_protocol
    # the TCP transport's default per-peer queue rejects a 4,096-descriptor
    # batch ("queue-full"); its own knob raises it
    out.append(("mooncake", mc, lambda: MooncakeEngine(mc, args), "tcp",
                {"MC_TCP_MAX_QUEUED_TRANSFERS_PER_PEER": "16384",
                 "MC_TCP_BIND_ADDRESS": "127.0.0.1"}))
    if args.gpu:
        tls = os.environ.get("GW_PEERS_UCX_TLS", GPU_UCX_TLS)
        out.append(("nixl", "ucx[%s]" % tls, lambda: NixlEngine(tls, args), "intra",
                    dict(UCX_BASE, UCX_TLS=tls)))
        out.append(("nixl", "ucx[tcp]", lambda: NixlEngine("tcp", args), "tcp",
                    dict(UCX_BASE, UCX_TLS="tcp")))
    else:
        out.append(("nixl", "ucx[tcp]", lambda: NixlEngine("tcp", args), "tcp",
                    dict(UCX_BASE, UCX_TLS="tcp")))
        out.append(("nixl", "ucx[sm,self,tcp]", lambda: NixlEngine("sm,self,tcp", args),
                    "intra", dict(UCX_BASE, UCX_TLS="sm,self,tcp")))
    out.append(("uccl", "p2p", uccl_probe, "intra", {}))
    return out


def make_engine(args):
    kind, spec = args.engine.split(":", 1)
    if kind == "gpuwire":
        return GpuwireEngine(spec, args)
    for peer, ptr, mk, _, _ in configs(args):
        if "%s:%s" % (peer, ptr) == args.engine:
            return mk()
    raise SystemExit("unknown engine %s" % args.engine)


# ---------------------------------------------------------------------------
# worker processes


def emit(tag, obj):
    sys.stdout.write("%s %s\n" % (tag, json.dumps(obj)))
    sys.stdout.flush()


def worker_target(args):
    buf = make_buf(args, False, "target")
    eng = make_engine(args)
    info = eng.target_setup(buf)
    emit("READY", info)
    stop = threading.Event()

    def watch_stdin():
        sys.stdin.readline()          # the driver writes a line (or closes) when done
        stop.set()
    threading.Thread(target=watch_stdin, daemon=True).start()
    eng.serve(stop)
    emit("CRC", {"crc": written_crc(buf, args)})
    finish(eng)


def measure(fn, n, rounds, warm):
    for _ in range(warm):
        fn()
    per_round, lats = [], []
    pc = time.perf_counter
    for _ in range(rounds):
        t_round = 0.0
        for _ in range(n):
            t0 = pc()
            fn()
            dt = pc() - t0
            lats.append(dt)
            t_round += dt
        per_round.append(t_round)
    return per_round, lats


def worker_initiator(args):
    info = json.loads(args.info)
    buf = make_buf(args, True, "initiator")
    eng = make_engine(args)
    eng.connect(info, buf)
    res = {"engine": eng.describe(), "actual": getattr(eng, "actual", ""), "rows": {}}
    for name, count, size in selected(args):
        fn = eng.op(count, size)
        n = ITERS[name][1 if args.quick else 0]
        per_round, lats = measure(fn, n, args.rounds, 1 if args.quick else max(2, n // 10))
        nbytes = max(count, 1) * size
        gbs = [n * nbytes / t / 1e9 for t in per_round]
        ops = [n / t for t in per_round]
        res["rows"][name] = {"GB/s": statistics.median(gbs), "ops/s": statistics.median(ops),
                             "us_p50": statistics.median(lats) * 1e6,
                             "us_p99": sorted(lats)[int(0.99 * (len(lats) - 1))] * 1e6,
                             "us_mean": statistics.fmean(lats) * 1e6,
                             "rounds_GB/s": gbs, "n": n}
    if args.split and hasattr(eng, "split_op"):
        # where the time of a small transfer goes: the post call, then the
        # wait for its completion, each timed on its own
        pc = time.perf_counter
        for name, count, size in selected(args):
            if name not in ("lat8", "b1_4k"):
                continue
            post, complete = eng.split_op(count, size)
            tp, tw = [], []
            for i in range(args.split):
                t0 = pc()
                r = post()
                t1 = pc()
                complete(r)
                t2 = pc()
                if i >= args.split // 10:
                    tp.append(t1 - t0)
                    tw.append(t2 - t1)
            res["rows"][name]["post_us_p50"] = statistics.median(tp) * 1e6
            res["rows"][name]["complete_us_p50"] = statistics.median(tw) * 1e6
    res["crc"] = written_crc(buf, args)
    emit("RESULT", res)
    finish(eng)


def finish(eng):
    """gpuwire closes its context; a peer's process ends without tearing its
    library down (NIXL 1.5.1's initiator crashes in its exit-time teardown
    after reporting, which would otherwise read as a failed run)."""
    if isinstance(eng, GpuwireEngine):
        eng.close()
    else:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


# ---------------------------------------------------------------------------
# the driver


def loadavg():
    try:
        return "%.2f" % os.getloadavg()[0]
    except OSError:
        return ""


def run_pair(args, engine, env_extra, log):
    """Runs target + initiator for one engine; returns the result or raises."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(ROOT, "python") + (
        ":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["LD_LIBRARY_PATH"] = args.build + (
        ":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    env.update(env_extra)
    common = [sys.executable, os.path.abspath(__file__), "--engine", engine,
              "--rounds", str(args.rounds), "--mooncake-protocol", args.mooncake_protocol]
    if args.quick:
        common.append("--quick")
    if args.gpu:
        common.append("--gpu")
    if args.shapes:
        common += ["--shapes", args.shapes]
    if args.split:
        common += ["--split", str(args.split)]
    log.write("\n==== %s  env: %s  load %s\n" % (engine, " ".join(
        "%s=%s" % kv for kv in sorted(env_extra.items())), loadavg()))
    log.flush()
    tgt = subprocess.Popen(common + ["--worker", "target"], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, stderr=log, env=env, text=True)
    try:
        info = None
        # READY may follow lines the peer's library prints on stdout; a stuck
        # start is ended after two minutes
        killer = threading.Timer(120, tgt.kill)
        killer.start()
        try:
            for line in tgt.stdout:
                if line.startswith("READY "):
                    info = line[6:]
                    break
                log.write("target: " + line)
        finally:
            killer.cancel()
        if info is None:
            try:
                rc = tgt.wait(timeout=10)
            except subprocess.TimeoutExpired:
                rc = "none: still running, killed"
            raise RuntimeError("target did not start (exit %s; see the log)" % rc)
        ini = subprocess.run(common + ["--worker", "initiator", "--info", info.strip()],
                             stdout=subprocess.PIPE, stderr=log, env=env, text=True,
                             timeout=args.timeout)
        result = None
        for line in ini.stdout.splitlines():
            if line.startswith("RESULT "):
                result = json.loads(line[7:])
            else:
                log.write("initiator: " + line + "\n")
        if ini.returncode != 0 or result is None:
            raise RuntimeError("initiator exited %d (see the log)" % ini.returncode)
        tgt.stdin.write("done\n")
        tgt.stdin.flush()
        out, _ = tgt.communicate(timeout=120)
        crc = None
        for line in out.splitlines():
            if line.startswith("CRC "):
                crc = json.loads(line[4:])["crc"]
        for name, row in result["rows"].items():
            log.write("%s %-10s p50 %.3f us  p99 %.3f us  mean %.3f us  GB/s by round %s\n" % (
                engine, name, row["us_p50"], row["us_p99"], row["us_mean"],
                " ".join("%.4g" % g for g in row["rounds_GB/s"])))
        result["verified"] = crc is not None and crc == result["crc"]
        if not result["verified"]:
            raise RuntimeError("the target's bytes differ from what was written "
                               "(crc %s vs %s)" % (crc, result["crc"]))
        return result
    finally:
        if tgt.poll() is None:
            tgt.kill()
            tgt.wait()
        log.flush()


def merge(results):
    """One result from several repetitions: each figure the median of theirs;
    load: the median 1-minute load average after each."""
    out = dict(results[0])
    out["rows"] = {}
    for name, row in results[0]["rows"].items():
        out["rows"][name] = {k: statistics.median(r["rows"][name][k] for r in results)
                             for k, v in row.items() if isinstance(v, float)}
    out["load"] = "%.2f" % statistics.median(float(r["load"] or 0) for r in results)
    return out


def probe(peer):
    """None when the peer's module loads, else the reason."""
    try:
        if peer == "mooncake":
            from mooncake.engine import TransferEngine  # noqa: F401
        elif peer == "nixl":
            import_nixl()
        elif peer == "uccl":
            uccl_probe()
        return None
    except BaseException as e:  # noqa: BLE001 - any failure to load is a skip reason
        msg = str(e).strip().splitlines()
        why = "%s: %s" % (type(e).__name__, msg[-1] if msg else "")
        dists = {"mooncake": ("mooncake-transfer-engine", "mooncake-transfer-engine-non-cuda",
                              "mooncake-transfer-engine-cuda13"),
                 "nixl": ("nixl", "nixl-cu12", "nixl-cu13"), "uccl": ("uccl",)}[peer]
        try:
            from importlib import metadata
            have = []
            for d in dists:
                try:
                    have.append("%s %s" % (d, metadata.version(d)))
                except metadata.PackageNotFoundError:
                    pass
            if have:
                why = "%s installed, import failed: %s" % (", ".join(have), why)
            else:
                why = "not installed (%s)" % why
        except ImportError:
            pass
        return why


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="folder for peers.csv, peers.txt, peers.log")
    ap.add_argument("--quick", action="store_true", help="few transfers, for the smoke test")
    ap.add_argument("--gpu", action="store_true", help="device memory through torch")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=1,
                    help="runs of each pair (peer and gpuwire back to back, alternating "
                         "which goes first); the rows report medians over them")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--peers", default="mooncake,nixl,uccl")
    ap.add_argument("--shapes", default="")
    ap.add_argument("--mooncake-protocol", default="tcp")
    ap.add_argument("--machine", default=platform.node())
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--split", type=int, default=0, metavar="N",
                    help="also time post and completion apart for lat8 and b1_4k, N transfers "
                         "each (printed under 'split')")
    ap.add_argument("--worker", choices=["target", "initiator"], help=argparse.SUPPRESS)
    ap.add_argument("--engine", help=argparse.SUPPRESS)
    ap.add_argument("--info", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rounds is None:
        args.rounds = 2 if args.quick else 5
    if args.worker:
        try:
            (worker_target if args.worker == "target" else worker_initiator)(args)
        except BaseException:
            traceback.print_exc()
            sys.stderr.flush()
            os._exit(1)     # no library teardown (see finish)
        return
    if not args.out:
        ap.error("--out DIR is required")
    if args.gpu:
        try:
            import torch
            ok = torch.cuda.is_available()
        except ImportError:
            ok = False
        if not ok:
            ap.error("--gpu needs torch with a visible CUDA device")
    os.makedirs(args.out, exist_ok=True)
    args.build = os.path.abspath(args.build)
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    wanted = [p for p in args.peers.split(",") if p]
    log = open(os.path.join(args.out, "peers.log"), "a")
    log.write("\n######## %s  machine %s  python %s  cpus %s  gpu %s  load %s\n" % (
        date, args.machine, sys.version.split()[0], os.cpu_count(), args.gpu, loadavg()))

    gw_runs, gw_err, rows, status, peer_split = {}, {}, [], [], []

    def one(engine, env):
        r = run_pair(args, engine, env, log)
        r["load"] = loadavg()
        return r

    def gw_run(tr):
        try:
            r = one("gpuwire:" + tr, {})
            gw_runs.setdefault(tr, []).append(r)
            return r
        except Exception as e:  # noqa: BLE001 - reported in the status lines
            gw_err[tr] = str(e)
            return None

    for peer, ptr, _, gtr, env in configs(args):
        if peer not in wanted:
            continue
        why = probe(peer)
        pruns, gruns = [], []
        # each repetition runs the peer and gpuwire back to back, alternating
        # which goes first, so that a change in the machine's load hits both
        for rep in range(args.repeat if why is None else 0):
            for who in (("peer", "gw") if rep % 2 == 0 else ("gw", "peer")):
                if who == "gw":
                    g = gw_run(gtr)
                    if g:
                        gruns.append(g)
                    continue
                try:
                    pruns.append(one("%s:%s" % (peer, ptr), env))
                except Exception as e:  # noqa: BLE001 - reported as the skip reason
                    why = "failed to run: %s" % e
            if why is not None:
                break
        if why is not None:
            status.append("%-8s %-18s skipped: %s" % (peer, ptr, why))
            print("%s %s: skipped: %s" % (peer, ptr, why), flush=True)
            continue
        pres, gres = merge(pruns), merge(gruns) if gruns else None
        status.append("%-8s %-18s measured (%s; vs gpuwire %s; %d repetition(s))"
                      % (peer, ptr, pres["actual"], gtr, len(pruns)))
        print("%s %s: measured" % (peer, ptr), flush=True)
        peer_split.append(("%s %s" % (peer, ptr), pres))
        for name, _, _ in SHAPES:
            if name not in pres["rows"]:
                continue
            for unit in ("GB/s", "ops/s", "us_p50"):
                pv = pres["rows"][name][unit]
                gv = gres["rows"][name][unit] if gres else None
                rows.append({"shape": name, "peer": peer, "peer_transport": ptr,
                             "gpuwire_transport": gtr,
                             "gpuwire_value": "" if gv is None else "%.6g" % gv,
                             "peer_value": "%.6g" % pv, "unit": unit,
                             "ratio": "" if gv is None or pv == 0 else "%.3f" % (gv / pv),
                             "machine": args.machine, "date": date,
                             "load": "%s/%s" % (gres["load"] if gres else "", pres["load"])})
    # gpuwire's own rows always run (a CI without any peer still measures them)
    gw_results = {}
    for tr in ("tcp", "intra"):
        while len(gw_runs.get(tr, [])) < args.repeat and tr not in gw_err:
            gw_run(tr)
        gres = merge(gw_runs[tr]) if gw_runs.get(tr) else None
        if gres:
            gw_results[tr] = gres
            for name, _, _ in SHAPES:
                if name in gres["rows"]:
                    for unit in ("GB/s", "ops/s", "us_p50"):
                        rows.append({"shape": name, "peer": "gpuwire", "peer_transport": "",
                                     "gpuwire_transport": tr,
                                     "gpuwire_value": "%.6g" % gres["rows"][name][unit],
                                     "peer_value": "", "unit": unit, "ratio": "",
                                     "machine": args.machine, "date": date,
                                     "load": gres["load"]})
            status.append("gpuwire  %-18s measured (%s)" % (tr, gres["actual"]))
        else:
            status.append("gpuwire  %-18s FAILED: %s" % (tr, gw_err.get(tr)))
    cols = ["shape", "peer", "peer_transport", "gpuwire_transport", "gpuwire_value",
            "peer_value", "unit", "ratio", "machine", "date", "load"]
    with open(os.path.join(args.out, "peers.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)
    lines = ["gpuwire vs peers  %s  machine %s  %s  load(1 min) now %s" % (
        date, args.machine, "GPU" if args.gpu else "host memory", loadavg()),
        "ratio = gpuwire/peer; GB/s and ops/s: > 1 is gpuwire ahead; us_p50: < 1 is gpuwire ahead",
        ""]
    lines += status + [""]
    fmt = "%-10s %-8s %-18s %-6s %-7s %12s %12s %8s  %s"
    lines.append(fmt % ("shape", "peer", "peer_transport", "gw_tr", "unit", "gpuwire",
                        "peer", "ratio", "load gw/peer"))
    for r in rows:
        if r["peer"] == "gpuwire":
            continue
        lines.append(fmt % (r["shape"], r["peer"], r["peer_transport"], r["gpuwire_transport"],
                            r["unit"], r["gpuwire_value"], r["peer_value"], r["ratio"],
                            r["load"]))
    splits = []
    for label, res in [("gpuwire " + t, r) for t, r in sorted(gw_results.items())] + peer_split:
        for name, row in res["rows"].items():
            if "post_us_p50" in row:
                splits.append("%-30s %-8s post %8.3f us  complete %8.3f us  (p50 each)" % (
                    label, name, row["post_us_p50"], row["complete_us_p50"]))
    if splits:
        lines += ["", "split (--split):"] + splits
    lines.append("")
    lines.append("gpuwire alone:")
    for r in rows:
        if r["peer"] == "gpuwire":
            lines.append(fmt % (r["shape"], "gpuwire", "", r["gpuwire_transport"], r["unit"],
                                r["gpuwire_value"], "", "", r["load"]))
    text = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "peers.txt"), "w") as f:
        f.write(text)
    log.close()
    print(text)
    sys.exit(0 if not gw_err else 1)


if __name__ == "__main__":
    main()
