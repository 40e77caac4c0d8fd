# SPDX-License-Identifier: Apache-2.0
"""Shared fixtures: an endpoint pair between two contexts of this process, one
per transport usable here, each context driven by its own thread."""
import os
import sys
import threading

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import gpuwire  # noqa: E402


def usable_transports():
    with gpuwire.Context() as c:
        return [n for n, ok, _ in c.transports() if ok and n != "verbs"] + \
               (["verbs"] if any(n == "verbs" and ok for n, ok, _ in c.transports()) else [])


class Pair:
    """Context a (target, accepts) and context b (initiator, connects)."""

    def __init__(self, transport):
        self.a = gpuwire.Context(transports=transport)
        self.b = gpuwire.Context(transports=transport)
        lis = self.a.listen()
        got = {}
        t = threading.Thread(target=lambda: got.setdefault("ep", lis.accept(10)))
        t.start()
        self.eb = self.b.connect(lis.address)
        t.join()
        self.ea = got["ep"]
        self.lis = lis
        assert self.ea.transport == transport, self.ea.info()

    def in_a(self, fn):
        """Runs fn() in a thread (context a's thread) and returns a joiner."""
        out = {}

        def run():
            try:
                out["v"] = fn()
            except BaseException as e:  # handed to the joiner
                out["e"] = e

        t = threading.Thread(target=run)
        t.start()

        def join(timeout=30):
            t.join(timeout)
            assert not t.is_alive(), "context a's thread did not finish"
            if "e" in out:
                raise out["e"]
            return out.get("v")
        return join

    def serve_a(self):
        """Progresses context a in a thread until the returned stop() is called
        (what a target process's event loop does while the initiator works)."""
        stop = threading.Event()

        def loop():
            while not stop.is_set():
                self.a.progress()
                self.a.wait(0.01)
        j = self.in_a(loop)

        def done():
            stop.set()
            j()
        return done

    def expect_notify(self, n=1, timeout=20):
        """Context a's thread takes n notifications, then keeps progressing (as a
        target's event loop does: a put completes at the initiator only after
        the target's acknowledgement) until the returned finish() -> values."""
        stop = threading.Event()

        def target():
            vals = [self.ea.wait_notify(timeout) for _ in range(n)]
            while not stop.is_set():
                self.a.progress()
                self.a.wait(0.01)
            return vals
        j = self.in_a(target)

        def finish():
            stop.set()
            v = j()
            return v[0] if n == 1 else v
        return finish

    def key_to_b(self, mem):
        """Sends mem's key from a to b (tagged message) and unpacks it on b."""
        j = self.in_a(lambda: self.ea.send_bytes(mem.pack(), tag=0xC0FFEE))
        k = self.eb.recv_bytes(tag=0xC0FFEE)
        j()
        return self.eb.unpack(k)

    def close(self):
        self.b.close()
        self.a.close()


@pytest.fixture(params=usable_transports())
def pair(request):
    p = Pair(request.param)
    yield p
    p.close()
