# SPDX-License-Identifier: Apache-2.0
"""Both call paths take the same arguments and give the same outcomes.

The package runs its hot calls through the C accelerator (_gwfast) when it
is built and through ctypes otherwise (_lib.find_fast(False) switches to
ctypes, find_fast(True) back).  Every public method, property and function
of the package is in CALLS below, called with every parameter it has,
passed by keyword (the way python/README.md shows them), and run once on
each path; the two outcomes (the kind of result, the exception class) must
be the same.  test_calls_cover_the_package fails when a public name has no
entry, so a new method cannot skip the comparison."""
import asyncio
import inspect
import threading
import queue

import pytest

import gpuwire
from gpuwire import _lib, core
from conftest import usable_transports

N = 65536
PAGE = 4096


class Env:
    """Context a (target, served by its own thread) and b (initiator); the
    table's calls run on b.  a.run(fn) runs fn on a's thread."""

    def __init__(self, transport):
        self.transport = transport
        self.a = gpuwire.Context(transports=transport)
        self.b = gpuwire.Context(transports=transport)
        self.lis = self.a.listen()
        got = {}
        t = threading.Thread(target=lambda: got.setdefault("ep", self.lis.accept(10)))
        t.start()
        self.eb = self.b.connect(self.lis.address)
        t.join()
        self.ea = got["ep"]
        self.dst = bytearray(N)
        self.ma = self.a.register(self.dst)
        self.key = self.ma.pack()
        self.rk = self.eb.unpack(self.key)
        self.src = bytearray(i & 0xff for i in range(N))
        self.sm = self.b.register(self.src)
        self.jobs = queue.Queue()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve)
        self.thread.start()

    def _serve(self):
        while not self.stop.is_set():
            try:
                fn, box = self.jobs.get_nowait()
                try:
                    box["v"] = fn()
                except BaseException as e:
                    box["e"] = e
                box["done"].set()
            except queue.Empty:
                pass
            self.a.progress()
            self.a.wait(0.002)

    def run(self, fn):
        box = {"done": threading.Event()}
        self.jobs.put((fn, box))
        assert box["done"].wait(30), "context a's thread did not run the job"
        if "e" in box:
            raise box["e"]
        return box.get("v")

    def close(self):
        self.stop.set()
        self.thread.join(30)
        self.b.close()
        self.a.close()

    def fresh_ctx(self):
        return gpuwire.Context(transports=self.transport)

    def dlists(self, access=gpuwire.ACCESS_REMOTE_WRITE):
        return (self.b.dlist_local([(self.sm, 0, 64), (self.sm, 64, 64)]),
                self.eb.dlist_remote([(self.rk, 0, 64), (self.rk, 128, 64)], access=access))

    def plan(self):
        return self.eb.prepare_put_pages(local=self.sm, rkey=self.rk, page_size=PAGE, lpages=[0, 1],
                                         rpages=[1, 0], count=2, local_offset=0, offset=0, notify=None,
                                         counted=None)

    def request(self):
        return self.eb.put(local=self.sm, rkey=self.rk, offset=0, length=64, local_offset=0, track=True)


def _pending_recv(e):
    return e.eb.recv(local=bytearray(8), tag=0xBAD, mask=(1 << 64) - 1, length=8, local_offset=0)


def _cancel_then(e, what):
    r = _pending_recv(e)
    try:
        return what(r)
    finally:
        r.cancel()


def _fresh_ep(e, what):
    c = e.b.connect(e.lis.address)
    return what(c)


def _with_ctx(e, what):
    c = e.fresh_ctx()
    try:
        return what(c)
    finally:
        c.close()


def _async(coro):
    return asyncio.run(coro)


async def _first_async_event(ctx):
    async for ev in ctx.peer_events_async(timeout=0.01):
        return ev
    return None


# "Class.name" -> fn(env); the function calls that name with all its
# parameters by keyword.  Properties and attributes are read.
CALLS = {
    # Context
    "Context.close": lambda e: _with_ctx(e, lambda c: c.close()),
    "Context.closed": lambda e: e.b.closed,
    "Context.last_error": lambda e: e.b.last_error(),
    "Context.setting": lambda e: e.b.setting(name="GPUWIRE_TRANSPORTS"),
    "Context.transports": lambda e: e.b.transports(),
    "Context.progress": lambda e: e.b.progress(),
    "Context.fileno": lambda e: e.b.fileno(),
    "Context.wait": lambda e: e.b.wait(timeout=0),
    "Context.register": lambda e: e.b.register(obj=bytearray(64), access=gpuwire.ACCESS_REMOTE).close(),
    "Context.alloc": lambda e: e.b.alloc(nbytes=4096, access=gpuwire.ACCESS_REMOTE).close(),
    "Context.dlist_local": lambda e: e.b.dlist_local(entries=[(e.sm, 0, 64)]).close(),
    "Context.dlist_local_table": lambda e: e.b.dlist_local_table(regions=[e.sm], count=4, length=16, offsets=None,
                                                                 lengths=None, region_index=None,
                                                                 per_region=0).close(),
    "Context.listen": lambda e: e.b.listen(addr="127.0.0.1:0").close(),
    "Context.connect": lambda e: e.b.connect(addr="127.0.0.1:1"),
    "Context.agent_listen": lambda e: _with_ctx(e, lambda c: c.agent_listen(name="paths-a", addr="127.0.0.1:0")
                                                .close()),
    "Context.unpublish": lambda e: e.b.unpublish(name="no-such-region"),
    "Context.peer_add": lambda e: _with_ctx(e, lambda c: c.peer_add(name="paths-p", addr="127.0.0.1:1")),
    "Context.peer_ep": lambda e: e.b.peer_ep(name="no-such-agent"),
    "Context.peer_regions": lambda e: e.b.peer_regions(peer="no-such-agent", names=["r"]),
    "Context.peer_watch": lambda e: e.b.peer_watch(callback=None, all=False),
    "Context.peer_unwatch": lambda e: e.b.peer_unwatch(),
    "Context.peer_event": lambda e: e.b.peer_event(timeout=0),
    "Context.peer_events": lambda e: list(e.b.peer_events(timeout=0)),
    "Context.peer_event_async": lambda e: _async(e.b.peer_event_async(timeout=0.01)),
    "Context.peer_events_async": lambda e: _async(_first_async_event(e.b)),
    "Context.peer_query": lambda e: e.b.peer_query(name="no-such-agent"),
    "Context.ls": lambda e: e.b.ls(),
    "Context.directory": lambda e: e.b.directory(),
    # Endpoint
    "Endpoint.close": lambda e: _fresh_ep(e, lambda c: c.close(timeout=5.0)),
    "Endpoint.info": lambda e: e.eb.info(),
    "Endpoint.transport": lambda e: e.eb.transport,
    "Endpoint.unpack": lambda e: e.eb.unpack(key=e.key).close(),
    "Endpoint.put": lambda e: e.eb.put(local=e.sm, rkey=e.rk, offset=0, length=64, local_offset=0, track=False),
    "Endpoint.put/tracked": lambda e: e.eb.put(local=e.sm, rkey=e.rk, offset=64, length=64, local_offset=64,
                                               track=True),
    "Endpoint.put/refused": lambda e: e.eb.put(local=e.sm, rkey=e.rk, offset=N, length=64, local_offset=0,
                                               track=False),
    "Endpoint.put_notify": lambda e: e.eb.put_notify(local=e.sm, rkey=e.rk, value=5, offset=0, length=64,
                                                     local_offset=0, track=False),
    "Endpoint.put_notify/tracked": lambda e: e.eb.put_notify(local=e.sm, rkey=e.rk, value=6, offset=0, length=64,
                                                             local_offset=0, track=True),
    "Endpoint.get": lambda e: e.eb.get(local=e.sm, rkey=e.rk, offset=0, length=64, local_offset=128, track=False),
    "Endpoint.get/tracked": lambda e: e.eb.get(local=e.sm, rkey=e.rk, offset=0, length=64, local_offset=128,
                                               track=True),
    "Endpoint.send": lambda e: e.eb.send(local=e.sm, tag=0x5E, length=8, local_offset=0),
    "Endpoint.recv": lambda e: _cancel_then(e, lambda r: r.done()),
    "Endpoint.flush": lambda e: e.eb.flush(),
    "Endpoint.wait_notify": lambda e: e.eb.wait_notify(timeout=0.01),
    "Endpoint.probe": lambda e: e.eb.probe(tag=0xF00, mask=(1 << 64) - 1),
    "Endpoint.dlist_remote": lambda e: e.eb.dlist_remote(entries=[(e.rk, 0, 64)], access=2).close(),
    "Endpoint.dlist_remote_table": lambda e: e.eb.dlist_remote_table(keys=[e.rk], count=None, length=16,
                                                                     offsets=[0, 16], lengths=None,
                                                                     region_index=[0, 0], per_region=0,
                                                                     access=2).close(),
    "Endpoint.put_batch": lambda e: e.eb.put_batch(*e.dlists(), lidx=[0, 1], ridx=[1, 0], count=2, notify=None,
                                                   counted=None, track=False),
    "Endpoint.put_batch/tracked": lambda e: e.eb.put_batch(*e.dlists(), lidx=[0, 1], ridx=[1, 0], count=2,
                                                           notify=None, counted=None, track=True),
    "Endpoint.get_batch": lambda e: e.eb.get_batch(*e.dlists(gpuwire.ACCESS_REMOTE_READ), lidx=[0], ridx=[0], count=1, track=True),
    "Endpoint.put_pages": lambda e: e.eb.put_pages(local=e.sm, rkey=e.rk, page_size=PAGE, lpages=[0, 1],
                                                   rpages=[1, 0], count=2, local_offset=0, offset=0, notify=None,
                                                   counted=None, track=False),
    "Endpoint.put_pages/tracked": lambda e: e.eb.put_pages(local=e.sm, rkey=e.rk, page_size=PAGE, lpages=[0, 1],
                                                           rpages=[1, 0], count=2, local_offset=0, offset=0,
                                                           notify=None, counted=None, track=True),
    "Endpoint.get_pages": lambda e: e.eb.get_pages(local=e.sm, rkey=e.rk, page_size=PAGE, lpages=[2], rpages=[0],
                                                   count=1, local_offset=0, offset=0, track=True),
    "Endpoint.prepare_put_pages": lambda e: e.plan(),
    "Endpoint.prepare_get_pages": lambda e: e.eb.prepare_get_pages(local=e.sm, rkey=e.rk, page_size=PAGE,
                                                                   lpages=[2], rpages=[0], count=1, local_offset=0,
                                                                   offset=0).post(track=True),
    "Endpoint.prepare_put_batch": lambda e: e.eb.prepare_put_batch(*e.dlists(), lidx=[0, 1], ridx=[1, 0], count=2,
                                                                   notify=None, counted=None).post(track=True),
    "Endpoint.prepare_get_batch": lambda e: e.eb.prepare_get_batch(*e.dlists(gpuwire.ACCESS_REMOTE_READ), lidx=[0],
                                                                   ridx=[0], count=1).post(track=True),
    "Endpoint.prepare_put_batch/refused": lambda e: e.eb.prepare_put_batch(*e.dlists(), lidx=[0, 2], ridx=None,
                                                                                count=None).post(track=True),
    "Endpoint.prepare_put_batch/closed": lambda e: (lambda p: (p.close(), p.post(track=True)))(
        e.eb.prepare_put_batch(*e.dlists(), count=2)),
    "Endpoint.wait_count": lambda e: e.eb.wait_count(id=3, count=1, timeout=0.01),
    "Endpoint.notify_count": lambda e: e.eb.notify_count(id=3),
    "Endpoint.send_bytes": lambda e: e.eb.send_bytes(data=b"hello", tag=0x5F, timeout=30.0),
    "Endpoint.recv_bytes": lambda e: e.eb.recv_bytes(tag=0xBAD0, maxlen=64, timeout=0.01),
    # a prepared paged transfer (the accelerator's Pages or _PagesPlan)
    "Plan.post": lambda e: e.plan().post(track=False),
    "Plan.post/tracked": lambda e: e.plan().post(track=True),
    "Plan.post/positional": lambda e: e.plan().post(False),
    "Plan.post/default": lambda e: e.plan().post(),
    "Plan.post/unknown-keyword": lambda e: e.plan().post(tracked=False),
    "Plan.post/closed": lambda e: (lambda p: (p.close(), p.post(track=True)))(e.plan()),
    "Plan.close": lambda e: e.plan().close(),
    "Plan.closed": lambda e: e.plan().closed,
    "Plan.count": lambda e: e.plan().count,
    "Plan.nbytes": lambda e: e.plan().nbytes,
    # Listener
    "Listener.address": lambda e: e.lis.address,
    "Listener.accept": lambda e: (lambda l: (l.accept(timeout=0), l.close()))(e.b.listen()),
    "Listener.close": lambda e: e.b.listen().close(),
    # Memory
    "Memory.memoryview": lambda e: e.sm.memoryview(),
    "Memory.numpy": lambda e: e.sm.numpy(dtype="uint8", shape=None),
    "Memory.tensor": lambda e: e.sm.tensor(dtype=None, shape=None),
    "Memory.publish": lambda e: e.sm.publish(name="paths-region"),
    "Memory.close": lambda e: e.b.register(bytearray(64)).close(),
    "Memory.info": lambda e: e.sm.info(),
    "Memory.pack": lambda e: e.b.register(bytearray(64), access=gpuwire.ACCESS_REMOTE).pack(),
    # RemoteKey, DescList
    "RemoteKey.close": lambda e: e.eb.unpack(e.key).close(),
    "DescList.close": lambda e: e.b.dlist_local([(e.sm, 0, 64)]).close(),
    # Request
    "Request.cancel": lambda e: _pending_recv(e).cancel(),
    # done() after the request completed: right after posting, whether a
    # put is already done is timing, not the binding
    "Request.done": lambda e: (lambda r: (r.wait(timeout=20), r.done())[1])(e.request()),
    "Request.wait": lambda e: e.request().wait(timeout=20),
    "Request.wait/timeout": lambda e: _cancel_then(e, lambda r: r.wait(timeout=0.01)),
    "Request.ctx": lambda e: e.request().ctx,
    "Request.detail": lambda e: e.request().detail,
    "Request.nbytes": lambda e: e.request().nbytes,
    "Request.status": lambda e: e.request().status,
    "Request.tag": lambda e: e.request().tag,
    # PeerEvent: built by the context from a gw_peer_event_t
    "PeerEvent.type": lambda e: core.PeerEvent(_lib.PeerEvent()).type,
    "PeerEvent.name": lambda e: core.PeerEvent(_lib.PeerEvent()).name,
    "PeerEvent.addr": lambda e: core.PeerEvent(_lib.PeerEvent()).addr,
    "PeerEvent.epoch": lambda e: core.PeerEvent(_lib.PeerEvent()).epoch,
    "PeerEvent.restarted": lambda e: core.PeerEvent(_lib.PeerEvent()).restarted,
    "PeerEvent.dropped": lambda e: core.PeerEvent(_lib.PeerEvent()).dropped,
    # functions
    "test_many": lambda e: gpuwire.test_many(reqs=[e.request(), None]),
    "wait_any": lambda e: gpuwire.wait_any(reqs=[None, e.request()], timeout=20),
    "settings": lambda e: gpuwire.settings(),
    "build_features": lambda e: gpuwire.build_features(),
    "status_name": lambda e: gpuwire.status_name(status=-1),
    "version": lambda e: gpuwire.version(),
    "load_library": lambda e: gpuwire.load_library(path=None),
    "nccl_plugin_path": lambda e: gpuwire.nccl_plugin_path(),
}

# Calls that must succeed (the others may refuse, on both paths alike).
MUST_WORK = {k for k in CALLS if k.startswith(("Endpoint.put", "Endpoint.get", "Endpoint.prepare", "Plan."))
             and not k.endswith(("/refused", "/unknown-keyword", "/closed"))}

# Public names not in CALLS, and why: none of them has a second path.
NOT_CALLED = {
    "store": "pure Python over an etcd's HTTP API (tests/test_store.py); it never reaches libgpuwire",
    "accelerated": "says which of the two paths is in use, so its answer differs between them by design",
}


def _outcome(fn, env):
    """What a call gave, as both paths must give it: the kind of result
    (a Request waited for: its byte count), or the exception class."""
    try:
        v = fn(env)
        if isinstance(v, gpuwire.Request):
            return ("Request", v.wait(20))
        if isinstance(v, tuple):
            return tuple(type(x).__name__ for x in v)
        if isinstance(v, (bool, type(None))):
            return v
        if isinstance(v, core._PagesPlan) or (_lib.fast is not None and isinstance(v, getattr(_lib.fast, "Pages", ()))):
            return "plan"
        return type(v).__name__
    except Exception as ex:  # noqa: BLE001 - the class is what is compared
        return ("raises", type(ex).__name__)


def _public(cls):
    """The public names of cls, its own and those of the classes it is made
    of (Context takes the names methods from names._NamesOps, Endpoint the
    batch ones from batch._BatchOps)."""
    out = set()
    for klass in cls.__mro__[:-1]:
        for name in vars(klass):
            if not name.startswith("_"):
                out.add(name)
    return out


def test_calls_cover_the_package():
    want = set()
    for cname in ("Context", "Endpoint", "Listener", "Memory", "RemoteKey", "DescList", "Request", "PeerEvent"):
        want |= {"%s.%s" % (cname, m) for m in _public(getattr(gpuwire, cname))}
    want |= {"Plan.%s" % m for m in _public(core._PagesPlan)}
    F = _lib.fast
    if F is not None and hasattr(F, "Pages"):
        want |= {"Plan.%s" % m for m in dir(F.Pages) if not m.startswith("_")}
    for name in gpuwire.__all__:
        v = getattr(gpuwire, name)
        if inspect.isfunction(v) or inspect.ismodule(v):
            want.add(name)
    have = {k.split("/")[0] for k in CALLS} | set(NOT_CALLED)
    assert not want - have, "public names with no entry in CALLS: %s" % sorted(want - have)
    assert not have - want, "entries in CALLS for names the package does not have: %s" % sorted(have - want)


@pytest.fixture(scope="module")
def envs():
    if _lib.fast is None and _lib.load() is not None and _lib.find_fast() is None:
        pytest.skip("the _gwfast accelerator is not built (no Python headers)")
    t = "intra" if "intra" in usable_transports() else usable_transports()[0]
    fast, slow = Env(t), Env(t)
    yield fast, slow
    _lib.find_fast(True)
    fast.close()
    slow.close()


@pytest.mark.parametrize("name", sorted(CALLS))
def test_same_outcome_on_both_paths(envs, name):
    fast, slow = envs
    _lib.find_fast(True)
    assert _lib.fast is not None
    got_fast = _outcome(CALLS[name], fast)
    _lib.find_fast(False)
    try:
        got_slow = _outcome(CALLS[name], slow)
    finally:
        _lib.find_fast(True)
    assert got_fast == got_slow, "%s: accelerator gave %r, ctypes %r" % (name, got_fast, got_slow)
    if name in MUST_WORK:
        assert not (isinstance(got_fast, tuple) and got_fast[:1] == ("raises",)), \
            "%s raised on both paths: %r" % (name, got_fast)
