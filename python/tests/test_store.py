# SPDX-License-Identifier: Apache-2.0
"""Bootstrap through torch.distributed stores: addresses and keys exchanged
through a TCPStore, a HashStore and a FileStore, then a put checked."""
import threading

import pytest

import gpuwire
from gpuwire.store import Directory

torch = pytest.importorskip("torch", reason="python3-torch not installed")
dist = pytest.importorskip("torch.distributed", reason="torch built without distributed")


def make_store(kind, tmp_path):
    if kind == "hash":
        return dist.HashStore()
    if kind == "file":
        return dist.FileStore(str(tmp_path / "store"), 2)
    return dist.TCPStore("127.0.0.1", 0, 2, True, wait_for_workers=False)


@pytest.mark.parametrize("kind", ["tcp", "hash", "file"])
def test_directory_exchange(kind, tmp_path):
    store = make_store(kind, tmp_path)
    a, b = gpuwire.Context(), gpuwire.Context()
    try:
        da, db = Directory(store, a, timeout=20), Directory(store, b, timeout=20)
        dst = torch.zeros(4096, dtype=torch.int32)
        mem = a.register(dst)
        da.serve("target", addr="127.0.0.1:0")
        da.publish("target/w", mem)
        da.set("meta", b"shape=4096")
        out = {}
        t = threading.Thread(target=lambda: out.setdefault("v", (da.accept("target"),
                                                               da.listeners["target"])))
        t.start()
        ep = db.connect("target")
        t.join(30)
        ep_a = out["v"][0]
        rk = db.remote_key(ep, "target/w")
        assert rk.nbytes == 4 * 4096 and db.get("meta") == b"shape=4096"
        src = torch.arange(4096, dtype=torch.int32)
        note, stop = {}, threading.Event()

        def target():                   # the target's loop: notification, then progress
            note["v"] = ep_a.wait_notify(20)
            while not stop.is_set():
                a.progress()
                a.wait(0.01)
        t = threading.Thread(target=target)
        t.start()
        ep.put_notify(src, rk, 99).wait(20)
        stop.set()
        t.join(30)
        assert note["v"] == 99 and torch.equal(dst, src)
        with pytest.raises(gpuwire.Timeout, match="not set within"):
            db.remote_key(ep, "absent", timeout=0.2)
    finally:
        b.close()
        a.close()


def test_not_a_store():
    with gpuwire.Context() as c:
        with pytest.raises(gpuwire.InvalidArgument, match="not a torch.distributed Store"):
            Directory(object(), c)
