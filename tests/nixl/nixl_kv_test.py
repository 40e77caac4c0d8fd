# SPDX-License-Identifier: Apache-2.0
"""Two processes, two NIXL agents, the GPUWIRE backend only (NIXL_PLUGIN_DIR).

A prefill agent writes KV blocks into a decode agent by descriptor index
(prep_xfer_dlist + make_prepped_xfer, as vLLM's NixlConnector does), with
a notification; the decode agent checks, the moment the notification shows
up, that every block is already in place.  Then the prefill agent READs
blocks back by index with a notification to the decode agent, sends a
standalone notification, and drops and reloads the decode agent's metadata
(a transfer between the two is refused, one after works).

Usage: nixl_kv_test.py  (GPUWIRE_TRANSPORTS picks the transport; the
backend is the only plugin NIXL sees when NIXL_PLUGIN_DIR holds only it).
Exit 0 when every check passed, 1 otherwise.
"""
import multiprocessing as mp
import os
import sys
import time

import numpy as np

NBLK = 128
BLK = 16384
NSEND = 96
SEED = 1234
DEADLINE_S = 60
PREFILL = "prefill agent/0"
DECODE = "decode agent/1"


def make_agent(name):
    from nixl._api import nixl_agent, nixl_agent_config

    agent = nixl_agent(name, nixl_agent_config(backends=[]))
    agent.create_backend("GPUWIRE")
    return agent


def layout():
    """prefill block i -> decode block perm[i] (block ids of a KV cache)."""
    rng = np.random.default_rng(SEED)
    src = rng.integers(0, 256, NBLK * BLK, dtype=np.uint8)
    perm = rng.permutation(NBLK)[:NSEND].astype(np.int64)
    return src, perm


def wait_notif(agent, peer, tag):
    end = time.monotonic() + DEADLINE_S
    while time.monotonic() < end:
        if agent.check_remote_xfer_done(peer, tag, tag_is_prefix=False):
            return True
        time.sleep(0.0005)
    return False


def decode_main(conn):
    agent = make_agent(DECODE)
    kv = np.zeros(NBLK * BLK, dtype=np.uint8)
    agent.register_memory([(kv.ctypes.data, kv.nbytes, 0, "")], "DRAM")
    conn.send({"meta": agent.get_agent_metadata(), "addr": kv.ctypes.data})
    agent.add_remote_agent(conn.recv()["meta"])
    src, perm = layout()
    want = np.zeros_like(kv)
    for i, b in enumerate(perm):
        want[b * BLK:(b + 1) * BLK] = src[i * BLK:(i + 1) * BLK]
    res = {}
    # WRITE: the notification comes after the data
    got = wait_notif(agent, PREFILL, b"kv-done:req-1")
    res["write_notif"] = got
    res["write_data_at_notif"] = bool(got and np.array_equal(kv, want))
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
    failures = []

    def check(cond, what):
        print(("ok   " if cond else "FAIL ") + what, flush=True)
        if not cond:
            failures.append(what)

    ctx = mp.get_context("spawn")
    mine, theirs = ctx.Pipe()
    p = ctx.Process(target=decode_main, args=(theirs,))
    p.start()
    try:
        agent = make_agent(PREFILL)
        src, perm = layout()
        back = np.zeros_like(src)
        agent.register_memory([(src.ctypes.data, src.nbytes, 0, ""),
                               (back.ctypes.data, back.nbytes, 0, "")], "DRAM")
        if not mine.poll(DEADLINE_S):
            raise RuntimeError("decode agent did not start")
        peer = mine.recv()
        name = agent.add_remote_agent(peer["meta"])
        check(name in (DECODE, DECODE.encode()), "decode agent's metadata loaded under its name")
        mine.send({"meta": agent.get_agent_metadata()})

        local = agent.prep_xfer_dlist(
            "NIXL_INIT_AGENT", [(src.ctypes.data + i * BLK, BLK, 0) for i in range(NBLK)], "DRAM")
        backl = agent.prep_xfer_dlist(
            "NIXL_INIT_AGENT", [(back.ctypes.data + i * BLK, BLK, 0) for i in range(NBLK)], "DRAM")
        remote_descs = [(peer["addr"] + i * BLK, BLK, 0) for i in range(NBLK)]
        remote = agent.prep_xfer_dlist(DECODE, remote_descs, "DRAM")

        h = agent.make_prepped_xfer("WRITE", local, list(range(NSEND)), remote, perm.tolist(),
                                    b"kv-done:req-1")
        check(agent.transfer(h) in ("PROC", "DONE"), "WRITE by descriptor index posted")
        check(wait_xfer(agent, h) == "DONE", "WRITE completed")
        agent.release_xfer_handle(h)
        r = mine.recv() if mine.poll(DEADLINE_S + 5) else {}
        check(r.get("write_notif", False), "decode agent got the WRITE's notification")
        check(r.get("write_data_at_notif", False), "every block was in place when the notification came")

        # READ blocks back by index (decode block perm[i] -> back block i)
        h = agent.make_prepped_xfer("READ", backl, list(range(NSEND)), remote, perm.tolist(),
                                    b"read-done:req-1")
        check(agent.transfer(h) in ("PROC", "DONE"), "READ posted")
        check(wait_xfer(agent, h) == "DONE", "READ completed")
        check(np.array_equal(back[:NSEND * BLK], src[:NSEND * BLK]), "READ brought the blocks back")
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
            agent.prep_xfer_dlist(DECODE, remote_descs, "DRAM")
        except Exception:
            refused = True
        check(refused, "no transfer to an agent whose metadata was removed")
        agent.add_remote_agent(peer["meta"])
        remote = agent.prep_xfer_dlist(DECODE, remote_descs, "DRAM")
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
    print("transport: GPUWIRE_TRANSPORTS=%s" % os.environ.get("GPUWIRE_TRANSPORTS", "(default)"))
    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
