# SPDX-License-Identifier: Apache-2.0
"""The end-to-end integrity check (Context(integrity=True), GPUWIRE_INTEGRITY):
matching data passes and the endpoint says it checks; a source byte flipped
after its CRC was taken (the fault point integ.source) fails the initiator's
request and the target's wait_notify with IntegrityError naming the entry;
on every transport usable here."""
import os
import threading

import pytest

import gpuwire
from conftest import usable_transports

np = pytest.importorskip("numpy", reason="python3-numpy not installed")


class CheckedPair:
    """Target context a (does not ask), initiator b (asks for the check)."""

    def __init__(self, transport, fault=None):
        self.a = gpuwire.Context(transports=transport)
        if fault:
            os.environ["GPUWIRE_FAULT"] = fault
        try:
            self.b = gpuwire.Context(transports=transport, integrity=True)
        finally:
            os.environ.pop("GPUWIRE_FAULT", None)
        lis = self.a.listen()
        got = {}
        t = threading.Thread(target=lambda: got.setdefault("ep", lis.accept(10)))
        t.start()
        self.eb = self.b.connect(lis.address)
        t.join()
        self.ea = got["ep"]
        self.dst = np.zeros(1 << 16, dtype=np.uint8)
        mem = self.a.register(self.dst)
        out = {}
        t = threading.Thread(target=lambda: out.setdefault("k", self.ea.send_bytes(mem.pack(), tag=7)))
        t.start()
        self.rk = self.eb.unpack(self.eb.recv_bytes(tag=7))
        t.join()
        self.src = (np.arange(1 << 16, dtype=np.uint32) * 2654435761 >> 9).astype(np.uint8)
        self.lm = self.b.register(self.src)

    def target(self, n):
        """Context a's thread takes n notifications: [(value or exception)]."""
        res = []
        stop = threading.Event()

        def run():
            for _ in range(n):
                try:
                    res.append(self.ea.wait_notify(20))
                except gpuwire.GwError as e:
                    res.append(e)
            while not stop.is_set():
                self.a.progress()
                self.a.wait(0.01)
        t = threading.Thread(target=run)
        t.start()

        def finish():
            stop.set()
            t.join(30)
            return res
        return finish

    def close(self):
        self.b.close()
        self.a.close()


@pytest.fixture(params=usable_transports())
def transport(request):
    return request.param


def test_match(transport):
    p = CheckedPair(transport)
    try:
        assert "integrity: crc32c" in p.eb.info()["path"]
        fin = p.target(2)
        p.eb.put_notify(p.lm, p.rk, 5, length=4096).wait(20)
        p.eb.put_pages(p.lm, p.rk, 1024, count=8, offset=8192, local_offset=8192, notify=6).wait(20)
        assert fin() == [5, 6]
        assert (p.dst[:4096] == p.src[:4096]).all() and (p.dst[8192:16384] == p.src[8192:16384]).all()
    finally:
        p.close()


def test_mismatch(transport):
    p = CheckedPair(transport, fault="integ.source:flip=3@1")
    try:
        fin = p.target(2)
        with pytest.raises(gpuwire.IntegrityError) as ei:
            p.eb.put_notify(p.lm, p.rk, 8, length=4096).wait(20)
        assert "put 0 (remote 0x" in str(ei.value) and "expected CRC32C" in str(ei.value)
        p.eb.put_notify(p.lm, p.rk, 9, length=4096, offset=4096, local_offset=4096).wait(20)
        got = fin()
        assert isinstance(got[0], gpuwire.IntegrityError) and "put 0 (remote 0x" in str(got[0])
        assert got[1] == 9
    finally:
        p.close()
