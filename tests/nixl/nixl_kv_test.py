# SPDX-License-Identifier: Apache-2.0
"""Two processes, two NIXL agents, the GPUWIRE backend only (NIXL_PLUGIN_DIR).

A prefill agent writes KV blocks into a decode agent by descriptor index
(prep_xfer_dlist + make_prepped_xfer, as vLLM's NixlConnector does), with
a notification; the decode agent checks, the moment the notification shows
up, that every block is already in place.  The decode agent then READs the
same blocks from the prefill agent by index with a notification to it (the
direction vLLM's decode instance pulls in).  Then the prefill agent READs
blocks back by index with a notification to the decode agent, sends a
standalone notification, and drops and reloads the decode agent's metadata
(a transfer between the two is refused, one after works).

Usage: nixl_kv_test.py [--vram]  (GPUWIRE_TRANSPORTS picks the transport;
the backend is the only plugin NIXL sees when NIXL_PLUGIN_DIR holds only it).
--vram: every buffer is a torch CUDA tensor registered as VRAM, the prefill
agent's on GPU 0 and the decode agent's on GPU 1 when there are two GPUs
(else GPU 0 too); without CUDA in torch it prints SKIP with the reason and
exits 77.  Exit 0 when every check passed, 1 otherwise.
"""
import multiprocessing as mp
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nixl_api  # noqa: E402

NBLK = 128
BLK = 16384
NSEND = 96
SEED = 1234
DEADLINE_S = 60
PREFILL = "prefill agent/0"
DECODE = "decode agent/1"
SKIP = 77


def make_agent(name):
    api = nixl_api.load()
    agent = api.nixl_agent(name, api.nixl_agent_config(backends=[]))
    agent.create_backend("GPUWIRE")
    return agent


class Buf:
    """nbytes of host memory (NumPy) or, with gpu set, of that GPU's memory
    (a torch CUDA tensor); `init` (a uint8 array) fills it."""

    def __init__(self, nbytes, gpu=None, init=None):
        self.gpu = gpu
        if gpu is None:
            self.a = np.zeros(nbytes, dtype=np.uint8) if init is None else init.copy()
            self.addr, self.kind, self.dev = self.a.ctypes.data, "DRAM", 0
        else:
            import torch

            dev = torch.device("cuda", gpu)
            if init is None:
                self.a = torch.zeros(nbytes, dtype=torch.uint8, device=dev)
            else:
                self.a = torch.from_numpy(init).to(dev)
            torch.cuda.synchronize(dev)  # in place before a peer touches it
            self.addr, self.kind, self.dev = self.a.data_ptr(), "VRAM", gpu
        self.nbytes = nbytes

    def reg(self):
        return (self.addr, self.nbytes, self.dev, "")

    def blocks(self, n=NBLK):
        return [(self.addr + i * BLK, BLK, self.dev) for i in range(n)]

    def host(self):
        return self.a if self.gpu is None else self.a.cpu().numpy()


def gpus(vram):
    """(prefill GPU, decode GPU), (None, None) for host memory; raises
    RuntimeError with the reason when VRAM was asked for and CUDA is absent."""
    if not vram:
        return None, None
    try:
        import torch
    except ImportError as e:
        raise RuntimeError("torch not importable: %s" % e) from e
    if not torch.cuda.is_available():
        raise RuntimeError("torch %s has no usable CUDA device (torch.version.cuda %s)"
                           % (torch.__version__, torch.version.cuda))
    n = torch.cuda.device_count()
    return 0, (1 if n >= 2 else 0)


def layout():
    """prefill block i -> decode block perm[i] (block ids of a KV cache)."""
    rng = np.random.default_rng(SEED)
    src = rng.integers(0, 256, NBLK * BLK, dtype=np.uint8)
    perm = rng.permutation(NBLK)[:NSEND].astype(np.int64)
    return src, perm


def wanted(src, perm):
    """The decode side's blocks once prefill blocks 0..NSEND-1 landed at perm."""
    want = np.zeros_like(src)
    for i, b in enumerate(perm):
        want[b * BLK:(b + 1) * BLK] = src[i * BLK:(i + 1) * BLK]
    return want


def wait_notif(agent, peer, tag):
    end = time.monotonic() + DEADLINE_S
    while time.monotonic() < end:
        if agent.check_remote_xfer_done(peer, tag, tag_is_prefix=False):
            return True
        time.sleep(0.0005)
    return False


def decode_main(conn, gpu):
    agent = make_agent(DECODE)
    kv = Buf(NBLK * BLK, gpu)
    pulled = Buf(NBLK * BLK, gpu)
    agent.register_memory([kv.reg(), pulled.reg()], kv.kind)
    conn.send({"meta": agent.get_agent_metadata(), "addr": kv.addr, "dev": kv.dev})
    peer = conn.recv()
    agent.add_remote_agent(peer["meta"])
    src, perm = layout()
    want = wanted(src, perm)
    res = {}
    # WRITE: the notification comes after the data
    got = wait_notif(agent, PREFILL, b"kv-done:req-1")
    res["write_notif"] = got
    res["write_data_at_notif"] = bool(got and np.array_equal(kv.host(), want))
    conn.send(res)
    # this side pulls the same blocks by index (prefill block i -> perm[i])
    res = {}
    try:
        local = agent.prep_xfer_dlist("NIXL_INIT_AGENT", pulled.blocks(), pulled.kind)
        remote = agent.prep_xfer_dlist(
            PREFILL, [(peer["addr"] + i * BLK, BLK, peer["dev"]) for i in range(NBLK)], pulled.kind)
        h = agent.make_prepped_xfer("READ", local, perm.tolist(), remote, list(range(NSEND)),
                                    b"pulled:req-1")
        res["pull_posted"] = agent.transfer(h) in ("PROC", "DONE")
        res["pull_done"] = wait_xfer(agent, h) == "DONE"
        res["pull_data"] = bool(res["pull_done"] and np.array_equal(pulled.host(), want))
        agent.release_xfer_handle(h)
        agent.release_dlist_handle(remote)
        agent.release_dlist_handle(local)
    except Exception as e:  # reported as failed checks on the prefill side
        res["pull_error"] = "%s: %s" % (type(e).__name__, e)
    conn.send(res)
    # READ with a notification to this side, then a standalone one
    res = {"read_notif": wait_notif(agent, PREFILL, b"read-done:req-1"),
           "gen_notif": wait_notif(agent, PREFILL, b"bye")}
    conn.send(res)
    # after the prefill side reloaded this agent's metadata
    res = {"reload_notif": wait_notif(agent, PREFILL, b"after-reload")}
    conn.send(res)
    conn.recv()  # "exit"


def wait_xfer(agent, h):
    end = time.monotonic() + DEADLINE_S
    state = "PROC"
    while time.monotonic() < end:
        state = agent.check_xfer_state(h)
        if state != "PROC":
            break
    return state


def main():
    vram = "--vram" in sys.argv[1:]
    bad = [a for a in sys.argv[1:] if a != "--vram"]
    if bad:
        sys.exit("usage: nixl_kv_test.py [--vram] (unknown %s)" % " ".join(bad))
    try:
        pgpu, dgpu = gpus(vram)
    except RuntimeError as e:
        print("SKIP: VRAM through NIXL needs a CUDA GPU: %s" % e)
        return SKIP
    failures = []

    def check(cond, what):
        print(("ok   " if cond else "FAIL ") + what, flush=True)
        if not cond:
            failures.append(what)

    if vram:
        import torch

        print("memory: VRAM, prefill on cuda:%d (%s), decode on cuda:%d (%s)"
              % (pgpu, torch.cuda.get_device_name(pgpu), dgpu, torch.cuda.get_device_name(dgpu)))
    else:
        print("memory: DRAM")
    print("NIXL Python API: %s" % nixl_api.load().__name__, flush=True)
    ctx = mp.get_context("spawn")
    mine, theirs = ctx.Pipe()
    p = ctx.Process(target=decode_main, args=(theirs, dgpu))
    p.start()
    try:
        agent = make_agent(PREFILL)
        src_np, perm = layout()
        src = Buf(NBLK * BLK, pgpu, init=src_np)
        back = Buf(NBLK * BLK, pgpu)
        kind = src.kind
        agent.register_memory([src.reg(), back.reg()], kind)
        if not mine.poll(DEADLINE_S):
            raise RuntimeError("decode agent did not start")
        peer = mine.recv()
        name = agent.add_remote_agent(peer["meta"])
        check(name in (DECODE, DECODE.encode()), "decode agent's metadata loaded under its name")
        mine.send({"meta": agent.get_agent_metadata(), "addr": src.addr, "dev": src.dev})

        local = agent.prep_xfer_dlist("NIXL_INIT_AGENT", src.blocks(), kind)
        backl = agent.prep_xfer_dlist("NIXL_INIT_AGENT", back.blocks(), kind)
        remote_descs = [(peer["addr"] + i * BLK, BLK, peer["dev"]) for i in range(NBLK)]
        remote = agent.prep_xfer_dlist(DECODE, remote_descs, kind)

        h = agent.make_prepped_xfer("WRITE", local, list(range(NSEND)), remote, perm.tolist(),
                                    b"kv-done:req-1")
        check(agent.transfer(h) in ("PROC", "DONE"), "WRITE by descriptor index posted")
        check(wait_xfer(agent, h) == "DONE", "WRITE completed")
        agent.release_xfer_handle(h)
        r = mine.recv() if mine.poll(DEADLINE_S + 5) else {}
        check(r.get("write_notif", False), "decode agent got the WRITE's notification")
        check(r.get("write_data_at_notif", False), "every block was in place when the notification came")

        # the decode agent READs the blocks from this one, notifying it
        got = wait_notif(agent, DECODE, b"pulled:req-1")
        r = mine.recv() if mine.poll(DEADLINE_S + 5) else {}
        if "pull_error" in r:
            print("decode agent's READ: %s" % r["pull_error"])
        check(r.get("pull_posted", False), "decode agent's READ by descriptor index posted")
        check(r.get("pull_done", False), "decode agent's READ completed")
        check(r.get("pull_data", False), "decode agent's READ brought every block")
        check(got, "this agent got the decode agent's READ notification")

        # READ blocks back by index (decode block perm[i] -> back block i)
        h = agent.make_prepped_xfer("READ", backl, list(range(NSEND)), remote, perm.tolist(),
                                    b"read-done:req-1")
        check(agent.transfer(h) in ("PROC", "DONE"), "READ posted")
        check(wait_xfer(agent, h) == "DONE", "READ completed")
        check(np.array_equal(back.host()[:NSEND * BLK], src_np[:NSEND * BLK]), "READ brought the blocks back")
        agent.release_xfer_handle(h)
        agent.send_notif(DECODE, b"bye")
        r = mine.recv() if mine.poll(DEADLINE_S + 5) else {}
        check(r.get("read_notif", False), "decode agent got the READ's notification")
        check(r.get("gen_notif", False), "decode agent got the standalone notification")

        # metadata invalidation: the prepared remote side goes with it
        agent.release_dlist_handle(remote)
        agent.remove_remote_agent(DECODE)
        refused = False
        try:
            agent.prep_xfer_dlist(DECODE, remote_descs, kind)
        except Exception:
            refused = True
        check(refused, "no transfer to an agent whose metadata was removed")
        agent.add_remote_agent(peer["meta"])
        remote = agent.prep_xfer_dlist(DECODE, remote_descs, kind)
        h = agent.make_prepped_xfer("WRITE", local, [0], remote, [int(perm[0])], b"after-reload")
        agent.transfer(h)
        check(wait_xfer(agent, h) == "DONE", "WRITE after reloading the metadata completed")
        agent.release_xfer_handle(h)
        r = mine.recv() if mine.poll(DEADLINE_S + 5) else {}
        check(r.get("reload_notif", False), "its notification arrived")
        agent.release_dlist_handle(remote)
        agent.release_dlist_handle(local)
        agent.release_dlist_handle(backl)
        mine.send("exit")
    finally:
        p.join(DEADLINE_S)
        if p.is_alive():
            p.kill()
            failures.append("decode process did not exit")
    check(p.exitcode == 0, "decode process exited cleanly")
    print("transport: GPUWIRE_TRANSPORTS=%s; memory %s" % (os.environ.get("GPUWIRE_TRANSPORTS", "(default)"), kind))
    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
