# SPDX-License-Identifier: Apache-2.0
"""core.py - Context, Memory, Listener, Endpoint, RemoteKey, DescList and Request.

Each class wraps one C object of include/gpuwire.h and keeps its rules:
parents outlive children (a child holds a reference to its parent, and
closing a parent first closes the children it made), a context is used by
one thread at a time, every failure raises GwError with the status and the
context's detail message.

Lifetimes: a Memory, Listener, Endpoint or RemoteKey lives until its close()
(or `with`), or until its context closes -- not until the Python object goes
out of scope, since a peer may still rely on it.  A Memory keeps the
registered object referenced, so a tensor cannot be freed under a peer's
put; after close() every key packed from it is revoked.  A Request that is
dropped before completion is freed (the operation goes on, its completion
is discarded), as gw_request_free() does.
"""
import asyncio
import collections
import ctypes
import os
import functools
import sys
import time
import warnings

from . import _lib
from ._buffers import resolve
from .errors import error_class, InvalidArgument

ACCESS_LOCAL = 0
ACCESS_REMOTE_READ = 1
ACCESS_REMOTE_WRITE = 2
ACCESS_REMOTE = 3

_c_void_p = ctypes.c_void_p
_byref = ctypes.byref
_INPROGRESS = 1
_TIMEOUT = -7
_BUSY = -6
_NOTIFY_NONE, _NOTIFY_ORDERED, _NOTIFY_COUNTED = 0, 1, 2
_NOT_FOUND = -13
_ALL = 0xFFFFFFFFFFFFFFFF
_U32 = 0xFFFFFFFF
_IDX_FORMATS = frozenset("iIlLqQnN")
_kept = []      # (context handle, regions) left alive because views of them were (Context.close)


def _ms(timeout):
    """Seconds (None: no limit) -> the C API's milliseconds (-1: no limit)."""
    if timeout is None:
        return -1
    if timeout < 0:
        raise InvalidArgument(-1, "GW_ERR_INVALID", "invalid argument",
                              "timeout %r: give seconds >= 0 or None for no limit" % (timeout,))
    return int(timeout * 1000 + 0.999)


def _raise(st, detail=""):
    L = _lib.lib
    raise error_class(st)(st, L.gw_status_name(st).decode(), L.gw_status_str(st).decode(), detail)


def _bad(detail):
    return InvalidArgument(-1, "GW_ERR_INVALID", "invalid argument", detail)


def _opt(name):
    """An optional entry point of the C API (see _lib._OPTIONAL)."""
    return _lib.need(name)


def _index_source(x, name):
    """A torch tensor given as an index array becomes its NumPy view (no copy);
    everything else is checked where it is read (the accelerator or
    _index_array)."""
    t = type(x)
    if t is list or t is tuple or x is None or t.__module__ != "torch":
        return x
    try:        # a CPU tensor's NumPy view; the checks only when that fails
        return (x.detach() if x.requires_grad else x).numpy()
    except (TypeError, RuntimeError) as e:
        if x.device.type != "cpu":
            raise _bad("%s: an index tensor on %s: give it in host memory (.cpu())"
                       % (name, x.device)) from None
        if x.layout is not sys.modules["torch"].strided:
            raise _bad("%s: a %s tensor: give a dense 1-D tensor" % (name, x.layout)) from None
        raise _bad("%s: dtype %s: indices are int32, uint32, int64 or uint64 (%s)"
                   % (name, x.dtype, e)) from None


def _index_array(x, name):
    """(ctypes uint32 array or None, length) for the ctypes path: the checks
    and messages of the accelerator's idx_get (python/gpuwire/_gwfast.c)."""
    if x is None:
        return None, -1
    if type(x) is list or type(x) is tuple:
        vals = x
        for i, v in enumerate(vals):
            if not isinstance(v, int):
                raise _bad("%s: item %d is a %s, not an int" % (name, i, type(v).__name__))
            if v < 0 or v > _U32:
                raise _bad("%s: item %d is %s: an index is 0 .. 4294967295"
                           % (name, i, "negative" if v < 0 else "too large"))
    else:
        try:
            mv = memoryview(x)
        except TypeError:
            raise _bad("%s: a %s is not an index array: give a list of ints, a 1-D NumPy array or "
                       "tensor of int32/uint32/int64/uint64, or an array('I')"
                       % (name, type(x).__name__)) from None
        if mv.format[:1] in ("<", ">", "!") and (mv.format[0] == "<") != (sys.byteorder == "little"):
            raise _bad("%s: byte order '%s' is not this machine's: give the array in native byte "
                       "order (.astype(its dtype.newbyteorder('=')))" % (name, mv.format[0]))
        fmt = mv.format.lstrip("@=<>!")
        if len(fmt) != 1 or fmt not in _IDX_FORMATS or mv.itemsize not in (4, 8):
            raise _bad("%s: dtype with format '%s' (%d bytes per item): indices are int32, uint32, "
                       "int64 or uint64" % (name, mv.format, mv.itemsize))
        if mv.ndim != 1:
            raise _bad("%s: %d-dimensional: give a 1-D array" % (name, mv.ndim))
        if not mv.c_contiguous:
            raise _bad("%s: not contiguous (stride %d bytes, item %d bytes): use a contiguous copy"
                       % (name, mv.strides[0], mv.itemsize))
        vals = mv.tolist()
        for i, v in enumerate(vals):
            if v < 0:
                raise _bad("%s: item %d is negative (%d)" % (name, i, v))
            if v > _U32:
                raise _bad("%s: item %d is %d: an index is at most 4294967295" % (name, i, v))
    return (ctypes.c_uint32 * len(vals))(*vals), len(vals)


def _index_count(l, r, ln, rn, count):
    """The accelerator's idx_count: the number of entries of a batch."""
    if count is not None and count < 0:
        raise _bad("count: %d is negative" % count)
    if l[0] is not None and r[0] is not None and l[1] != r[1]:
        raise _bad("%s has %d entries but %s has %d: they pair entry by entry" % (ln, l[1], rn, r[1]))
    have = l[1] if l[0] is not None else r[1] if r[0] is not None else -1
    if have >= 0 and count is not None and count != have:
        raise _bad("count %d differs from the %d entries of %s"
                   % (count, have, ln if l[0] is not None else rn))
    if have < 0 and count is None:
        raise _bad("count: give it when neither %s nor %s is given" % (ln, rn))
    return have if have >= 0 else count


def _notify_opts(notify, counted, op):
    if notify is not None and counted is not None:
        raise _bad("notify=%r and counted=%r: a batch carries one notification, ordered or "
                   "counted" % (notify, counted))
    if op == 1 and (notify is not None or counted is not None):
        raise _bad("a notification goes with a put batch, not a get")
    if counted is not None:
        return _NOTIFY_COUNTED, int(counted)
    if notify is not None:
        return _NOTIFY_ORDERED, int(notify)
    return _NOTIFY_NONE, 0


def _close_plans(ctx, h):
    """Closes the prepared paged transfers naming handle h (every one: None),
    before that endpoint, region or key goes: a plan holds raw handles."""
    if _pages_forget is not None:
        _pages_forget()             # the C put_pages/get_pages keep handles of live objects
    plans = ctx._plans
    if not plans:
        return
    for p in list(plans):
        if h is None or p.closed or p._uses(h):
            p.close()
            plans.discard(p)


class PeerEvent:
    """An agent left the directory or came back (gw_peer_event_t): .type
    ("left" or "back"), .name, .addr, .epoch, .restarted (back as another
    context: its old keys are void), .dropped (events lost to a full queue
    before this one)."""

    __slots__ = ("type", "name", "addr", "epoch", "restarted", "dropped")

    def __init__(self, ev):
        self.type = {1: "left", 2: "back"}.get(ev.type, "unknown(%d)" % ev.type)
        self.name = ev.name.decode(errors="replace")
        self.addr = ev.addr.decode(errors="replace")
        self.epoch = ev.epoch
        self.restarted = bool(ev.restarted)
        self.dropped = ev.dropped

    def __repr__(self):
        return "PeerEvent(%s %r addr=%s epoch=%d%s%s)" % (
            self.type, self.name, self.addr, self.epoch, " restarted" if self.restarted else "",
            " dropped=%d" % self.dropped if self.dropped else "")


class _PagesPlan:
    """A prepared paged transfer through ctypes (the accelerator's Pages when
    it is not built): the same interface, post(track=True) / close() / count /
    nbytes / closed."""

    def __init__(self, ep, op, mh, lbase, lpages, kh, raddr, rpages, count, page, nk, val, fail):
        li, ri = _index_array(lpages, "lpages"), _index_array(rpages, "rpages")
        self.count = _index_count(li, ri, "lpages", "rpages", count)
        self.nbytes = self.count * page
        self._li, self._ri = li[0], ri[0]
        self._o = _lib.XferOpts(ctypes.sizeof(_lib.XferOpts), nk, val)
        self._args = (ep._h, op, mh, lbase, kh, raddr, page, nk)
        self._ctx = ep.ctx
        self._fail = fail

    @property
    def closed(self):
        return self._ctx is None

    def _uses(self, h):
        a = self._args
        return self._ctx is not None and h in (a[0], a[2], a[4])

    def close(self):
        self._ctx = None

    def post(self, track=True):
        if self._ctx is None:
            raise ValueError("the prepared paged transfer is closed (or its endpoint, region or "
                             "key is)")
        eh, op, mh, lbase, kh, raddr, page, nk = self._args
        req = _c_void_p()
        st = _opt("gw_xfer_pages")(eh, op, mh, lbase, self._li, kh, raddr, self._ri, self.count,
                                   page, _byref(self._o) if nk else None,
                                   _byref(req) if track else None)
        if st != 0:
            self._fail(st)
        return Request(self._ctx, req.value, None, self.nbytes) if track else None


def status_name(status):
    return _lib.load().gw_status_name(status).decode()


def version():
    return _lib.load().gw_version().decode()


def build_features():
    return _lib.load().gw_build_features().decode().split()


def settings():
    """Every GPUWIRE_* setting: list of (name, default, help)."""
    L = _lib.load()
    out, i = [], 0
    while True:
        d = L.gw_setting_at(i)
        if not d:
            return out
        d = d.contents
        out.append((d.name.decode(), (d.default_value or b"").decode(), (d.help or b"").decode()))
        i += 1


class Context:
    """A gpuwire context: with Context() as ctx: ... (closes everything it made)."""

    def __init__(self, transports=None, log_level=None, progress_thread=None):
        L = _lib.load()
        self._L = L
        # progress_thread: None turns the context's progress thread on
        # unless GPUWIRE_PROGRESS_THREAD says otherwise (docs/PROGRESS.md:
        # a Python program rarely keeps calling progress, and the thread
        # costs little next to a Python call); True / False force it.
        if progress_thread is None:
            pt = 0 if os.environ.get("GPUWIRE_PROGRESS_THREAD") else 1
        else:
            pt = 1 if progress_thread else -1
        cfg = _lib.Config(ctypes.sizeof(_lib.Config),
                          transports.encode() if transports else None,
                          -1 if log_level is None else int(log_level), None, pt)
        h = _c_void_p()
        st = L.gw_context_create(_byref(cfg), _byref(h))
        if st != 0:
            _raise(st, "gw_context_create failed (transports=%r); the settings error, if any, "
                       "is on stderr" % (transports,))
        self._h = h.value
        # endpoints, listeners and regions live until closed, or until the
        # context closes: a registration a peer relies on does not vanish
        # because the Python object went out of scope
        self._children = set()
        self._plans = set()     # prepared paged transfers (Endpoint.prepare_put_pages)
        self._aio = None
        self._watch_cb = None   # the ctypes callback gw_peer_watch holds (kept referenced)
        self._watch_err = None  # an exception the peer-event callback raised, raised by progress()
        self.name = None        # the agent name, once agent_listen() made it one

    # -- lifetime -------------------------------------------------------------------
    def close(self):
        """Closes endpoints, listeners and regions made by it, then the context."""
        if self._h is None:
            return
        _close_plans(self, None)
        kids = list(self._children)
        pinned = [k for k in kids if isinstance(k, Memory) and k._views() > 0]
        for k in kids:                      # lists first: they hold regions and endpoints
            if isinstance(k, DescList):
                k.close()
        for k in kids:                      # then endpoints: they free their keys
            if isinstance(k, Endpoint):
                k.close()
        for k in kids:
            if not isinstance(k, (Endpoint, DescList)) and k not in pinned:
                k.close()
        if self._aio is not None:
            self._aio.stop()
        if pinned:
            # memory from ctx.alloc() still viewed by NumPy arrays, memoryviews or
            # tensors: freeing it would leave them pointing at unmapped memory, so
            # the region and the context stay (until the process exits)
            warnings.warn("gpuwire: %d region(s) from Context.alloc() still have live views "
                          "(%d bytes); the context is closed but that memory is kept until "
                          "the process exits" % (len(pinned), sum(m.nbytes for m in pinned)),
                          ResourceWarning, stacklevel=2)
            _kept.append((self._h, pinned))
            for m in pinned:
                m._h = None
            self._children.clear()
            self._h = None
            return
        st = self._L.gw_context_destroy(self._h)
        if st != 0:
            self._check(st)
        self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    @property
    def closed(self):
        return self._h is None

    def _handle(self):
        h = self._h
        if h is None:
            raise _bad("the context is closed")
        return h

    def _check(self, st, what=""):
        """Raises for a negative status with the context's detail message."""
        detail = self._L.gw_last_error(self._h).decode(errors="replace") if self._h else ""
        if what and what not in detail:
            detail = "%s: %s" % (what, detail) if detail else what
        _raise(st, detail)

    # -- information ------------------------------------------------------------------
    def last_error(self):
        return self._L.gw_last_error(self._handle()).decode(errors="replace")

    def setting(self, name):
        v = self._L.gw_setting_value(self._handle(), name.encode())
        return None if v is None else v.decode()

    def transports(self):
        """[(name, usable, detail)] for each transport compiled in."""
        out, i = [], 0
        while True:
            ti = _lib.TransportInfo()
            ti.size = ctypes.sizeof(ti)
            if self._L.gw_transport_at(self._handle(), i, _byref(ti)) != 0:
                return out
            out.append((ti.name.decode(), bool(ti.usable), ti.detail.decode(errors="replace")))
            i += 1

    # -- progress -----------------------------------------------------------------------
    def progress(self):
        n = self._L.gw_progress(self._handle())
        if self._watch_err is not None:
            e, self._watch_err = self._watch_err, None
            raise e
        if n < 0:
            self._check(n, "gw_progress")
        return n

    def fileno(self):
        fd = ctypes.c_int()
        st = self._L.gw_context_fd(self._handle(), _byref(fd))
        if st != 0:
            self._check(st)
        return fd.value

    def wait(self, timeout=None):
        st = self._L.gw_context_wait(self._handle(), _ms(timeout))
        if st < 0 and st != _TIMEOUT:
            self._check(st, "gw_context_wait")

    # -- memory ---------------------------------------------------------------------------
    def register(self, obj, access=ACCESS_REMOTE):
        """Registers obj's memory (tensor, ndarray, buffer, CUDA array, DLPack)."""
        return Memory(self, obj, access)

    def alloc(self, nbytes, access=ACCESS_REMOTE):
        """nbytes of zeroed host memory that gpuwire allocates and registers
        (gw_mem_alloc): shared with peers on this host, so intra-host puts and
        gets into it are plain copies.  See it without copies through
        mem.numpy(), mem.tensor(), mem.memoryview()."""
        return Memory._alloc(self, nbytes, access)

    def dlist_local(self, entries):
        """A prepared local descriptor list (gw_dlist_local) of (Memory, offset,
        length) entries, for Endpoint.put_batch / get_batch."""
        return DescList._local(self, entries)

    # -- endpoints --------------------------------------------------------------------------
    def listen(self, addr="127.0.0.1:0"):
        return Listener(self, addr)

    def connect(self, addr):
        h = _c_void_p()
        st = self._L.gw_connect(self._handle(), addr.encode(), _byref(h))
        if st != 0:
            self._check(st, "connect to %s" % addr)
        return Endpoint(self, h.value)

    # -- names (docs/NAMES.md) ------------------------------------------------------------------
    def agent_listen(self, name, addr=None):
        """Makes the context the agent `name`: a Listener on addr (None: every
        address, a free port), registered in the directory when one is set."""
        h = _c_void_p()
        st = _opt("gw_agent_listen")(self._handle(), name.encode(),
                                     None if addr is None else addr.encode(), _byref(h))
        if st != 0:
            self._check(st, "agent_listen(%r)" % name)
        self.name = name
        return Listener(self, None, h.value)

    def unpublish(self, name):
        st = _opt("gw_mem_unpublish")(self._handle(), name.encode())
        if st != 0:
            self._check(st, "unpublish(%r)" % name)

    def peer_add(self, name, addr):
        """Agent `name` listens at addr ("host:port"): the peer-to-peer form."""
        st = _opt("gw_peer_add")(self._handle(), name.encode(), addr.encode())
        if st != 0:
            self._check(st, "peer_add(%r, %r)" % (name, addr))

    def peer_ep(self, name):
        """The Endpoint to agent `name` (connected on first use, reused after)."""
        h = _c_void_p()
        st = _opt("gw_peer_ep")(self._handle(), name.encode(), _byref(h))
        if st != 0:
            self._check(st, "peer_ep(%r)" % name)
        for k in self._children:
            if isinstance(k, Endpoint) and k._h == h.value:
                return k
        return Endpoint(self, h.value)

    def peer_regions(self, peer, names):
        """RemoteKeys of regions agent `peer` published, one per name, unpacked
        on peer_ep(peer) (all or nothing).  A str gives one RemoteKey."""
        one = isinstance(names, str)
        names = [names] if one else list(names)
        ep = self.peer_ep(peer)
        arr = (ctypes.c_char_p * max(1, len(names)))(*[n.encode() for n in names])
        out = (_c_void_p * max(1, len(names)))()
        st = _opt("gw_peer_regions")(self._handle(), peer.encode(), arr, len(names), out)
        if st != 0:
            self._check(st, "peer_regions(%r, %r)" % (peer, names))
        keys = []
        for i in range(len(names)):
            rk = RemoteKey(ep, out[i])
            ep._keys.add(rk)
            keys.append(rk)
        return keys[0] if one else keys

    def peer_watch(self, callback=None, all=False):
        """Starts being told when an agent leaves the directory or comes back
        (gw_peer_watch; the directory form only: GW_ERR_UNAVAILABLE without
        GPUWIRE_DIRECTORY).  all=False: the agents this context looked up
        (peer_ep, peer_regions), all=True: every agent.  With a callback,
        callback(PeerEvent) runs from progress() and the calls that progress
        (waits), on that thread; an exception it raises comes out of the next
        progress().  Without one, events queue for peer_event() /
        peer_events().  Calling it again replaces callback and scope."""
        if callback is not None and not callable(callback):
            raise _bad("callback: %s is not callable" % _what(callback))
        fn = _opt("gw_peer_watch")
        cb = None
        if callback is not None:
            def on_event(_arg, ev, callback=callback, ctx=self):
                try:
                    callback(PeerEvent(ev.contents))
                except BaseException as e:  # handed to progress(): a C frame is between
                    if ctx._watch_err is None:
                        ctx._watch_err = e
            cb = _lib.PEER_CB(on_event)
        st = fn(self._handle(), 1 if all else 0, cb or _lib.PEER_CB(), None)
        if st != 0:
            self._check(st, "peer_watch")
        self._watch_cb = cb

    def peer_unwatch(self):
        """Stops the events (queued ones are discarded)."""
        st = _opt("gw_peer_watch")(self._handle(), 2, _lib.PEER_CB(), None)
        if st != 0:
            self._check(st, "peer_unwatch")
        self._watch_cb = None

    def _peer_next(self):
        """One queued PeerEvent taken without waiting, or None."""
        ev = _lib.PeerEvent()
        ev.size = ctypes.sizeof(ev)
        st = _opt("gw_peer_event_next")(self._handle(), _byref(ev))
        if st == 0:
            return PeerEvent(ev)
        if st != _NOT_FOUND:
            self._check(st, "peer_event")
        return None

    def peer_event(self, timeout=0):
        """The oldest queued PeerEvent (peer_watch without a callback), waiting
        up to timeout seconds (None: no limit) on the context; None when none
        came."""
        h = self._handle()
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            ev = self._peer_next()
            if ev is not None:
                return ev
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                return None
            self._L.gw_context_wait(h, 100 if left is None else max(1, min(100, int(left * 1000))))

    def peer_events(self, timeout=None):
        """Iterates over peer events as they come (peer_event with that timeout
        for each), until one does not come in time."""
        while True:
            ev = self.peer_event(timeout)
            if ev is None:
                return
            yield ev

    async def peer_event_async(self, timeout=None):
        """peer_event() for asyncio: awaits the oldest queued PeerEvent while
        the loop runs other work (the context is progressed from the loop:
        its fd through loop.add_reader, as for an awaited Request), up to
        timeout seconds (None: no limit); None when none came."""
        if self._watch_cb is not None:
            raise _bad("peer_event_async: peer_watch was given a callback, so events go to it, "
                       "not to the queue (call peer_watch() without one)")
        self._handle()
        fut = _aio_driver(self).peer_wait()
        try:
            return await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            return None         # (the cancelled wait takes no event: the next one gets it)

    async def peer_events_async(self, timeout=None):
        """`async for ev in ctx.peer_events_async():` peer events as they come
        (peer_event_async with that timeout for each), until one does not
        come in time."""
        while True:
            ev = await self.peer_event_async(timeout)
            if ev is None:
                return
            yield ev

    def peer_query(self, name):
        """What this context knows of agent `name` (no traffic): a dict."""
        pi = _lib.PeerInfo()
        pi.size = ctypes.sizeof(pi)
        st = _opt("gw_peer_query")(self._handle(), name.encode(), _byref(pi))
        if st != 0:
            self._check(st, "peer_query(%r)" % name)
        return {"addr": pi.addr.decode(errors="replace"), "epoch": pi.epoch,
                "listed": None if pi.listed < 0 else bool(pi.listed), "changes": pi.changes,
                "connected": bool(pi.connected), "restarts": pi.restarts}

    def ls(self):
        """Every agent and region the directory holds (`gpuwire ls`): dicts,
        agents first; GW_ERR_UNAVAILABLE without a directory."""
        out = []

        def each(_arg, e):
            e = e.contents
            d = {"agent": e.agent.decode(errors="replace")}
            if e.region is None:
                d.update(addr=(e.addr or b"").decode(errors="replace"), epoch=e.epoch)
            else:
                d.update(region=e.region.decode(errors="replace"), addr=e.raddr, len=e.rlen,
                         type=(e.type or b"").decode(), access=e.access)
            out.append(d)
            return 0
        cb = _lib.DIR_CB(each)
        st = _opt("gw_directory_list")(self._handle(), cb, None)
        if st != 0:
            self._check(st, "ls")
        return out

    def directory(self):
        """One line: which directory the context uses and whether it answers."""
        buf = ctypes.create_string_buffer(512)
        st = _opt("gw_directory_describe")(self._handle(), buf, 512)
        if st != 0:
            self._check(st, "directory")
        return buf.value.decode(errors="replace")


class Memory:
    """A registered region; keeps the registered object alive until close()."""

    def __init__(self, ctx, obj, access=ACCESS_REMOTE):
        if access & ~ACCESS_REMOTE:
            raise _bad("access flags 0x%x: use ACCESS_LOCAL, ACCESS_REMOTE_READ, "
                       "ACCESS_REMOTE_WRITE or both" % access)
        r = resolve(obj, writable=bool(access & ACCESS_REMOTE_WRITE))
        self.ctx = ctx
        self.obj = obj
        self._r = r
        self._own = False
        self.addr = r.addr
        self.nbytes = r.nbytes
        self.access = access
        h = _c_void_p()
        st = ctx._L.gw_mem_reg(ctx._handle(), r.addr, r.nbytes, access, _byref(h))
        if st != 0:
            if r.release:
                r.release()
            ctx._check(st, "register %s on %s" % (type(obj).__name__, r.device))
        self._h = h.value
        if r.device.startswith("cuda"):
            info = self.info()
            want = r.device.split(":")[1] if ":" in r.device else None
            if info["type"] != "cuda" or (want is not None and info["cuda_device"] != int(want)):
                got = info["type"] if info["type"] != "cuda" else "cuda:%d" % info["cuda_device"]
                self.close()
                raise _bad("memory on %s cannot be reached by this context: gpuwire sees it "
                           "as %s (is libcuda.so.1 loadable? `gpuwire info` says)"
                           % (r.device, got))
        ctx._children.add(self)

    @classmethod
    def _alloc(cls, ctx, nbytes, access):
        if access & ~ACCESS_REMOTE:
            raise _bad("access flags 0x%x: use ACCESS_LOCAL, ACCESS_REMOTE_READ, "
                       "ACCESS_REMOTE_WRITE or both" % access)
        if not isinstance(nbytes, int) or nbytes <= 0:
            raise _bad("alloc(%r): give a size in bytes > 0" % (nbytes,))
        a, h = _c_void_p(), _c_void_p()
        st = _opt("gw_mem_alloc")(ctx._handle(), nbytes, access, _byref(a), _byref(h))
        if st != 0:
            ctx._check(st, "alloc(%d)" % nbytes)
        self = cls.__new__(cls)
        self.ctx = ctx
        # the ctypes array is the buffer every view is made from: its
        # reference count tells whether views are alive (see _views)
        self.obj = (ctypes.c_uint8 * nbytes).from_address(a.value)
        self._r = None
        self._own = True
        self.addr = a.value
        self.nbytes = nbytes
        self.access = access
        self._h = h.value
        ctx._children.add(self)
        return self

    def _views(self):
        """How many views (memoryviews, arrays, tensors) of an allocated region live."""
        if not getattr(self, "_own", False) or self.obj is None:
            return 0
        return sys.getrefcount(self.obj) - 2      # self.obj and getrefcount's argument

    def memoryview(self):
        """A writable memoryview of the region's bytes (host memory), no copy."""
        if self._h is None:
            raise _bad("the memory region is closed (deregistered)")
        try:
            return memoryview(self.obj).cast("B")
        except TypeError:
            raise _bad("a region registered from a %s has no memoryview: use the object "
                       "itself" % type(self.obj).__name__) from None

    def numpy(self, dtype="uint8", shape=None):
        """The region as a NumPy array (host memory), no copy."""
        import numpy as np
        a = np.frombuffer(self.memoryview(), dtype=dtype)
        return a if shape is None else a.reshape(shape)

    def tensor(self, dtype=None, shape=None):
        """The region as a CPU torch tensor, no copy (dtype default uint8)."""
        import torch
        if self._h is None:
            raise _bad("the memory region is closed (deregistered)")
        t = torch.frombuffer(self.obj if getattr(self, "_own", False) else self.memoryview(),
                             dtype=dtype or torch.uint8)
        return t if shape is None else t.view(shape)

    def publish(self, name):
        """Publishes the region under `name` in the context's agent table."""
        st = _opt("gw_mem_publish")(self._handle(), name.encode())
        if st != 0:
            self.ctx._check(st, "publish(%r)" % name)

    def close(self):
        """Deregisters; every key packed from the region is revoked (memory from
        Context.alloc() is freed: refused while views of it are alive)."""
        if self._h is None:
            return
        n = self._views()
        if n > 0:
            _raise(_BUSY, "close a %d-byte region from Context.alloc(): %d view(s) of it (NumPy "
                          "arrays, memoryviews, tensors) are alive; drop them first"
                   % (self.nbytes, n))
        _close_plans(self.ctx, self._h)
        if self.ctx._h is not None:
            st = self.ctx._L.gw_mem_dereg(self._h)
            if st != 0:
                self.ctx._check(st, "deregister")
        self._h = None
        self.ctx._children.discard(self)
        if self._r is not None and self._r.release:
            self._r.release()
        self.obj = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __len__(self):
        return self.nbytes

    def _handle(self):
        if self._h is None:
            raise _bad("the memory region is closed (deregistered)")
        return self._h

    def info(self):
        mi = _lib.MemInfo()
        mi.size = ctypes.sizeof(mi)
        st = self.ctx._L.gw_mem_query(self._handle(), _byref(mi))
        if st != 0:
            self.ctx._check(st)
        return {"addr": mi.addr or 0, "len": mi.len, "access": mi.access,
                "type": "cuda" if mi.type == 1 else "host", "cuda_device": mi.cuda_device,
                "pci_bus_id": mi.pci_bus_id.decode(), "path": mi.path.decode(errors="replace")}

    def pack(self):
        """The packed remote key as bytes (send it to the peer any way you like)."""
        h = self._handle()
        n = ctypes.c_size_t(0)
        L = self.ctx._L
        st = L.gw_mem_pack_rkey(h, None, _byref(n))
        if st != 0:
            self.ctx._check(st, "pack the remote key")
        buf = ctypes.create_string_buffer(n.value)
        st = L.gw_mem_pack_rkey(h, buf, _byref(n))
        if st != 0:
            self.ctx._check(st, "pack the remote key")
        return buf.raw[:n.value]


class Listener:
    def __init__(self, ctx, addr, handle=None):
        if handle is None:
            h = _c_void_p()
            st = ctx._L.gw_listen(ctx._handle(), addr.encode(), _byref(h))
            if st != 0:
                ctx._check(st, "listen on %s" % addr)
            handle = h.value
        self.ctx = ctx
        self._h = handle
        ctx._children.add(self)

    @property
    def address(self):
        buf = ctypes.create_string_buffer(128)
        st = self.ctx._L.gw_listener_addr(self._handle(), buf, 128)
        if st != 0:
            self.ctx._check(st)
        return buf.value.decode()

    def _handle(self):
        if self._h is None:
            raise _bad("the listener is closed")
        return self._h

    def accept(self, timeout=None):
        """The next endpoint whose handshake completed (Timeout when none came)."""
        h = _c_void_p()
        st = self.ctx._L.gw_accept(self._handle(), _ms(timeout), _byref(h))
        if st == _INPROGRESS:
            _raise(_TIMEOUT, "accept on %s: no endpoint ready" % self.address)
        if st != 0:
            self.ctx._check(st, "accept on %s" % self.address)
        return Endpoint(self.ctx, h.value)

    def close(self):
        if self._h is not None and self.ctx._h is not None:
            self.ctx._L.gw_listener_destroy(self._h)
        self._h = None
        self.ctx._children.discard(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class RemoteKey:
    """A peer's region, unpacked on one endpoint: .addr and .nbytes of the range."""

    def __init__(self, ep, h):
        self.ep = ep
        self._h = h
        a, n = ctypes.c_uint64(), ctypes.c_size_t()
        ep.ctx._L.gw_rkey_range(h, _byref(a), _byref(n))
        self.addr = a.value
        self.nbytes = n.value

    def close(self):
        if self._h is not None:
            _close_plans(self.ep.ctx, self._h)
        if self._h is not None and self.ep._h is not None:
            self.ep.ctx._L.gw_rkey_destroy(self._h)
        self._h = None
        self.ep._keys.discard(self)

    def __len__(self):
        return self.nbytes


class Endpoint:
    """A connection to one peer.  Operations return a Request (or None with track=False)."""

    def __init__(self, ctx, h):
        self.ctx = ctx
        self._h = h
        self._L = ctx._L
        self._keys = set()
        self._lists = set()
        ctx._children.add(self)

    def _handle(self):
        if self._h is None:
            raise _bad("the endpoint is closed")
        return self._h

    def close(self, timeout=5.0):
        """Finishes outstanding operations (up to timeout), then closes."""
        if self._h is None:
            return
        _close_plans(self.ctx, self._h)
        for k in list(self._lists):
            k.close()
        for k in list(self._keys):
            k.close()
        if self.ctx._h is not None:
            st = self._L.gw_ep_close(self._h, _ms(timeout))
            if st != 0:
                self._h = None
                self.ctx._children.discard(self)
                self.ctx._check(st, "close the endpoint")
        self._h = None
        self.ctx._children.discard(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def info(self):
        ei = _lib.EpInfo()
        ei.size = ctypes.sizeof(ei)
        st = self._L.gw_ep_query(self._handle(), _byref(ei))
        if st != 0:
            self.ctx._check(st)
        return {"transport": ei.transport.decode(), "peer": ei.peer.decode(),
                "path": ei.path.decode(errors="replace"),
                "downgrades": ei.downgrades.decode(errors="replace"),
                "error": ei.error, "error_detail": ei.error_detail.decode(errors="replace")}

    @property
    def transport(self):
        return self.info()["transport"]

    def unpack(self, key):
        """A RemoteKey from bytes packed by the peer's Memory.pack()."""
        if not isinstance(key, (bytes, bytearray)):
            raise _bad("a packed key is bytes, not %s" % type(key).__name__)
        h = _c_void_p()
        st = self._L.gw_rkey_unpack(self._handle(), bytes(key), len(key), _byref(h))
        if st != 0:
            self.ctx._check(st, "unpack a %d-byte key" % len(key))
        rk = RemoteKey(self, h.value)
        self._keys.add(rk)
        return rk

    # -- the operations --------------------------------------------------------------------
    def _local(self, local, offset, length, writable):
        """(addr, len, mem handle, keeper) of the local side of an operation."""
        if type(local) is Memory:
            h = local._h
            if h is None:
                raise _bad("the local memory region is closed (deregistered)")
            n = local.nbytes - offset if length is None else length
            if offset < 0 or n < 0 or offset + n > local.nbytes:
                raise _bad("local range [+%d, %d bytes) is outside the %d-byte region"
                           % (offset, n, local.nbytes))
            return local.addr + offset, n, h, None
        r = resolve(local, writable)
        if not r.device.startswith("cpu"):
            raise _bad("memory on %s must be registered first (ctx.register)" % r.device)
        n = r.nbytes - offset if length is None else length
        if offset < 0 or n < 0 or offset + n > r.nbytes:
            if r.release:
                r.release()
            raise _bad("local range [+%d, %d bytes) is outside the %d-byte buffer"
                       % (offset, n, r.nbytes))
        return r.addr + offset, n, None, r

    def _remote(self, rkey, offset, n):
        if type(rkey) is not RemoteKey:
            raise _bad("remote side must be a RemoteKey (ep.unpack), not %s" % type(rkey).__name__)
        if rkey._h is None:
            raise _bad("the remote key is closed")
        return rkey.addr + offset

    def _post(self, st, req, keep, what, n=None):
        if st != 0:
            if keep is not None and keep.release:
                keep.release()
            self.ctx._check(st, what)
        if req is None:
            if keep is not None and keep.release:
                keep.release()      # untracked: the caller keeps the buffer (see flush)
            return None
        return Request(self.ctx, req.value, keep, n)

    def _rma(self, op, local, rkey, offset, length, local_offset, track, writable, value=None):
        """put (op 0) / get (1) / put_notify (2).  The common case (a Memory and
        a RemoteKey) is checked inline and posted through the C accelerator
        when it is built: this is the path the per-operation overhead is
        measured on (bench/python_overhead.sh)."""
        if type(local) is Memory and type(rkey) is RemoteKey:
            mh, kh, eh = local._h, rkey._h, self._h
            n = local.nbytes - local_offset if length is None else length
            if (mh is not None and kh is not None and eh is not None and local_offset >= 0
                    and n >= 0 and local_offset + n <= local.nbytes and offset >= 0):
                a, keep = local.addr + local_offset, None
                raddr = rkey.addr + offset
            else:
                a, n, mh, keep = self._local(local, local_offset, length, writable)
                raddr = self._remote(rkey, offset, n)
                eh = self._handle()
        else:
            a, n, mh, keep = self._local(local, local_offset, length, writable)
            raddr = self._remote(rkey, offset, n)
            eh, kh = self._handle(), rkey._h
        F = _lib.fast
        if F is not None:
            r = F.rma(op, eh, a, n, mh or 0, raddr, kh, value or 0, track)
            if r > 0:
                return Request(self.ctx, r, keep, n)
            if r == 0 and keep is None:
                return None
            st, req = r, None
        else:
            L = self._L
            if track:
                req = _c_void_p()
                if op == 0:
                    st = L.gw_put(eh, a, n, mh, raddr, kh, _byref(req))
                elif op == 1:
                    st = L.gw_get(eh, a, n, mh, raddr, kh, _byref(req))
                else:
                    st = L.gw_put_notify(eh, a, n, mh, raddr, kh, value, _byref(req))
                if st == 0:
                    return Request(self.ctx, req.value, keep, n)
            else:
                req = None
                if op == 0:
                    st = L.gw_put(eh, a, n, mh, raddr, kh, None)
                elif op == 1:
                    st = L.gw_get(eh, a, n, mh, raddr, kh, None)
                else:
                    st = L.gw_put_notify(eh, a, n, mh, raddr, kh, value, None)
                if st == 0 and keep is None:
                    return None
        return self._post(st, None if st else req, keep, ("put", "get", "put_notify")[op], n)

    def put(self, local, rkey, offset=0, length=None, local_offset=0, track=True):
        """Writes local bytes (length, from local_offset) into the peer's region
        at rkey.addr + offset.  track=False: no Request (errors surface in the
        next flush); the local buffer must then stay unchanged until a flush."""
        F = _lib.fast
        if F is not None and type(local) is Memory and type(rkey) is RemoteKey:
            # the hottest call, inlined (each Python call level costs ~0.1 us)
            mh, kh, eh = local._h, rkey._h, self._h
            n = local.nbytes - local_offset if length is None else length
            if (mh is not None and kh is not None and eh is not None and local_offset >= 0
                    and n >= 0 and local_offset + n <= local.nbytes and offset >= 0):
                r = F.rma(0, eh, local.addr + local_offset, n, mh, rkey.addr + offset, kh, 0,
                          track)
                if r > 0:
                    return Request(self.ctx, r, None, n)
                if r == 0:
                    return None
                self.ctx._check(r, "put")
        return self._rma(0, local, rkey, offset, length, local_offset, track, False)

    def put_notify(self, local, rkey, value, offset=0, length=None, local_offset=0, track=True):
        """put, then `value` reaches the peer's notification queue after the
        data of this put and of every put posted before it on the endpoint."""
        return self._rma(2, local, rkey, offset, length, local_offset, track, False, value)

    def get(self, local, rkey, offset=0, length=None, local_offset=0, track=True):
        """Reads the peer's bytes at rkey.addr + offset into local."""
        return self._rma(1, local, rkey, offset, length, local_offset, track, True)

    def send(self, local, tag=0, length=None, local_offset=0):
        a, n, m, keep = self._local(local, local_offset, length, False)
        req = _c_void_p()
        st = self._L.gw_send(self._handle(), a, n, m, tag, _byref(req))
        return self._post(st, req, keep, "send", n)

    def recv(self, local, tag=0, mask=0xFFFFFFFFFFFFFFFF, length=None, local_offset=0):
        """Receives the oldest message with (msg_tag & mask) == (tag & mask)."""
        a, n, m, keep = self._local(local, local_offset, length, True)
        req = _c_void_p()
        st = self._L.gw_recv(self._handle(), a, n, m, tag, mask, _byref(req))
        return self._post(st, req, keep, "recv")

    def flush(self):
        """A Request that completes when every earlier put/get has (its error, if any)."""
        req = _c_void_p()
        st = self._L.gw_flush(self._handle(), _byref(req))
        return self._post(st, req, None, "flush")

    def wait_notify(self, timeout=None):
        """The oldest notification value received (Timeout when none came)."""
        v = ctypes.c_uint64()
        st = self._L.gw_notify_wait(self._handle(), _ms(timeout), _byref(v))
        if st == _INPROGRESS:
            _raise(_TIMEOUT, "no notification ready")
        if st != 0:
            self.ctx._check(st, "wait for a notification")
        return v.value

    def probe(self, tag=0, mask=_ALL):
        """(length, tag) of the queued message recv(tag, mask) would take, or
        None when none arrived yet (one progress pass first)."""
        pi = _lib.ProbeInfo()
        pi.size = ctypes.sizeof(pi)
        st = _opt("gw_probe")(self._handle(), tag, mask, _byref(pi))
        if st == _INPROGRESS:
            return None
        if st != 0:
            self.ctx._check(st, "probe(tag=%#x, mask=%#x)" % (tag, mask))
        return pi.length, pi.tag

    # -- batched and paged transfers (docs/BATCH.md) --------------------------------------------
    def dlist_remote(self, entries, access=ACCESS_REMOTE_WRITE):
        """A prepared remote descriptor list (gw_dlist_remote) of (RemoteKey,
        offset, length) entries on this endpoint; access: what the transfers
        will do (ACCESS_REMOTE_WRITE for puts, ACCESS_REMOTE_READ for gets)."""
        return DescList._remote(self, entries, access)

    def _batch(self, op, local, remote, lidx, ridx, count, notify, counted, track):
        if type(local) is not DescList or local.remote:
            raise _bad("local: a local DescList (ctx.dlist_local), not %s" % _what(local))
        if type(remote) is not DescList or not remote.remote:
            raise _bad("remote: a remote DescList (ep.dlist_remote), not %s" % _what(remote))
        nk, val = _notify_opts(notify, counted, op)
        eh, lh, rh = self._handle(), local._handle(), remote._handle()
        if lidx is None and ridx is None and count is None:
            if local.n != remote.n:
                raise _bad("count: give it (or lidx/ridx): the local list has %d entries, the "
                           "remote one %d" % (local.n, remote.n))
            count = local.n
        lidx = _index_source(lidx, "lidx")
        ridx = _index_source(ridx, "ridx")
        F = _lib.fast
        if F is not None and F.batch_ok:
            try:
                r = F.batch(eh, op, lh, lidx, rh, ridx, count, nk, val, track)
            except ValueError as e:
                raise _bad(str(e)) from None
        else:
            li, ri = _index_array(lidx, "lidx"), _index_array(ridx, "ridx")
            n = _index_count(li, ri, "lidx", "ridx", count)
            o = _lib.XferOpts(ctypes.sizeof(_lib.XferOpts), nk, val)
            req = _c_void_p()
            r = _opt("gw_xfer_batch")(eh, op, lh, li[0], rh, ri[0], n, _byref(o) if nk else None,
                                      _byref(req) if track else None)
            if r == 0:
                r = req.value or 0
        if r > 0:
            return Request(self.ctx, r, None, None)
        if r == 0:
            return None
        self.ctx._check(r, "%s_batch" % ("put", "get")[op])

    def put_batch(self, local, remote, lidx=None, ridx=None, count=None, notify=None,
                  counted=None, track=True):
        """Writes local entry lidx[i] into remote entry ridx[i] for every i, as
        one request (lidx/ridx: list, NumPy array or tensor of indices; None:
        0..count-1).  notify=value: an ordered notification after the batch
        (read by wait_notify); counted=id: one counted notification of id
        (wait_count)."""
        return self._batch(0, local, remote, lidx, ridx, count, notify, counted, track)

    def get_batch(self, local, remote, lidx=None, ridx=None, count=None, track=True):
        """Reads remote entry ridx[i] into local entry lidx[i] for every i."""
        return self._batch(1, local, remote, lidx, ridx, count, None, None, track)

    def _pages_handles(self, local, rkey, page_size, local_offset, offset):
        """The checks of the paged forms' arguments; the handles of local,
        rkey and this endpoint."""
        if type(local) is not Memory:
            raise _bad("local: the paged form needs a registered Memory, not %s" % _what(local))
        if type(rkey) is not RemoteKey:
            raise _bad("rkey: a RemoteKey (ep.unpack), not %s" % _what(rkey))
        mh, kh, eh = local._h, rkey._h, self._h
        if mh is None or kh is None or eh is None:
            raise _bad("the %s is closed" % ("local memory region" if mh is None else
                                              "remote key" if kh is None else "endpoint"))
        if type(page_size) is not int or page_size <= 0:
            raise _bad("page_size %r: give the page size in bytes (> 0)" % (page_size,))
        if local_offset < 0 or offset < 0:
            raise _bad("%s %d is negative" % (("local_offset", local_offset) if local_offset < 0
                                              else ("offset", offset)))
        return mh, kh, eh

    def _pages(self, op, local, rkey, page_size, lpages, rpages, count, local_offset, offset,
               notify, counted, track):
        mh, kh, eh = self._pages_handles(local, rkey, page_size, local_offset, offset)
        nk, val = (0, 0) if notify is None and counted is None else \
            _notify_opts(notify, counted, op)
        lpages = _index_source(lpages, "lpages")
        rpages = _index_source(rpages, "rpages")
        F = _lib.fast
        try:
            if F is not None and F.batch_ok:
                try:
                    r = F.pages(eh, op, mh, local.addr + local_offset, lpages, kh,
                                rkey.addr + offset, rpages, count, page_size, nk, val, track)
                except ValueError as e:
                    raise _bad(str(e)) from None
            else:
                li, ri = _index_array(lpages, "lpages"), _index_array(rpages, "rpages")
                n = _index_count(li, ri, "lpages", "rpages", count)
                o = _lib.XferOpts(ctypes.sizeof(_lib.XferOpts), nk, val)
                req = _c_void_p()
                r = _opt("gw_xfer_pages")(eh, op, mh, local.addr + local_offset, li[0], kh,
                                          rkey.addr + offset, ri[0], n, page_size,
                                          _byref(o) if nk else None, _byref(req) if track else None)
                if r == 0:
                    r = req.value or 0
        except OverflowError as e:
            raise _bad("an argument is out of range: %s" % e) from None
        if r > 0:
            if count is None:
                count = len(lpages if lpages is not None else rpages)
            return Request(self.ctx, r, None, count * page_size)
        if r == 0:
            return None
        self._pages_failed(r, op)

    def _pages_failed(self, st, op=0):
        """Raises for a refused paged post, naming the index array at fault."""
        import re
        detail = self._L.gw_last_error(self.ctx._h).decode(errors="replace")
        m = re.search(r"entry (\d+): (local|remote) page (\d+)", detail)
        if m:
            detail = "%s[%s] = %s is out of range: %s" % (
                "lpages" if m.group(2) == "local" else "rpages", m.group(1), m.group(3), detail)
        _raise(st, "%s_pages: %s" % (("put", "get")[op], detail))

    def put_pages(self, local, rkey, page_size, lpages=None, rpages=None, count=None,
                  local_offset=0, offset=0, notify=None, counted=None, track=True):
        """The paged put (KV caches): page i is the page_size bytes at
        local.addr + local_offset + lpages[i] * page_size, written to
        rkey.addr + offset + rpages[i] * page_size (lpages/rpages: list, NumPy
        array or tensor; None: 0..count-1).  notify / counted as put_batch.
        With the accelerator built, the common case runs as a C method
        (_install_pages below); this is the general path and its fallback."""
        return self._pages(0, local, rkey, page_size, lpages, rpages, count, local_offset, offset,
                           notify, counted, track)

    def get_pages(self, local, rkey, page_size, lpages=None, rpages=None, count=None,
                  local_offset=0, offset=0, track=True):
        """The paged get: remote page rpages[i] into local page lpages[i]."""
        return self._pages(1, local, rkey, page_size, lpages, rpages, count, local_offset, offset,
                           None, None, track)

    def _prepare_pages(self, op, local, rkey, page_size, lpages, rpages, count, local_offset,
                       offset, notify, counted):
        mh, kh, eh = self._pages_handles(local, rkey, page_size, local_offset, offset)
        nk, val = _notify_opts(notify, counted, op)
        lpages = _index_source(lpages, "lpages")
        rpages = _index_source(rpages, "rpages")
        fail = functools.partial(self._pages_failed, op=op)
        F = _lib.fast
        try:
            if F is not None and F.batch_ok and hasattr(F, "Pages"):
                try:
                    plan = F.Pages(eh, op, mh, local.addr + local_offset, lpages, kh,
                                   rkey.addr + offset, rpages, count, page_size, nk, val, Request,
                                   self.ctx, fail)
                except ValueError as e:
                    raise _bad(str(e)) from None
            else:
                plan = _PagesPlan(self, op, mh, local.addr + local_offset, lpages, kh,
                                  rkey.addr + offset, rpages, count, page_size, nk, val, fail)
        except OverflowError as e:
            raise _bad("an argument is out of range: %s" % e) from None
        plans = self.ctx._plans
        if len(plans) > 64:                 # forget plans the user closed
            for p in [p for p in plans if p.closed]:
                plans.discard(p)
        plans.add(plan)
        return plan

    def prepare_put_pages(self, local, rkey, page_size, lpages=None, rpages=None, count=None,
                          local_offset=0, offset=0, notify=None, counted=None):
        """put_pages() prepared once, posted many times: checks the arguments
        and copies the index arrays now (later changes to them do not reach
        the plan), and returns a plan whose post(track=True) makes the same
        gw_xfer_pages call with nothing left to convert (the Request, or None
        untracked).  For a transfer repeated with the same pages (each layer
        of a KV cache into the same slots).  close() the plan when done; it
        is closed with its endpoint, region, key or context."""
        return self._prepare_pages(0, local, rkey, page_size, lpages, rpages, count,
                                   local_offset, offset, notify, counted)

    def prepare_get_pages(self, local, rkey, page_size, lpages=None, rpages=None, count=None,
                          local_offset=0, offset=0):
        """get_pages() prepared once (see prepare_put_pages)."""
        return self._prepare_pages(1, local, rkey, page_size, lpages, rpages, count,
                                   local_offset, offset, None, None)

    def wait_count(self, id, count=1, timeout=None):
        """Waits until `count` counted notifications of `id` arrived on this
        endpoint (from batches finishing in any order) and takes them.
        Timeout (nothing taken) when fewer came in time."""
        if count < 0:
            raise _bad("count %d is negative" % count)
        st = _opt("gw_notify_count_wait")(self._handle(), id, count, _ms(timeout))
        if st == _INPROGRESS or st == _TIMEOUT:
            have = self.notify_count(id)
            _raise(_TIMEOUT, "wait_count(id=%d, count=%d): %d arrived within %s s"
                   % (id, count, have, timeout))
        if st != 0:
            self.ctx._check(st, "wait_count(id=%d, count=%d)" % (id, count))

    def notify_count(self, id):
        """How many counted notifications of `id` arrived and were not taken."""
        v = ctypes.c_uint64()
        st = _opt("gw_notify_count")(self._handle(), id, _byref(v))
        if st != 0:
            self.ctx._check(st, "notify_count(%d)" % id)
        return v.value

    # -- helpers over tagged messages ---------------------------------------------------------
    def send_bytes(self, data, tag=0, timeout=30.0):
        self.send(bytes(data), tag).wait(timeout)

    def recv_bytes(self, tag=0, maxlen=65536, timeout=30.0):
        buf = bytearray(maxlen)
        r = self.recv(buf, tag)
        n = r.wait(timeout)
        return bytes(buf[:n])


def _what(x):
    return "a %s" % type(x).__name__


class DescList:
    """A prepared descriptor list (gw_dlist_t): local (ctx.dlist_local) or
    remote (ep.dlist_remote).  Every entry is checked when it is made (the
    error names the entry).  Lives until close() or its context's (a local
    list keeps its regions from closing; a remote one its endpoint)."""

    def __init__(self, owner, h, remote, refs, n):
        self.owner = owner          # Context (local list) or Endpoint (remote list)
        self.ctx = owner.ctx if remote else owner
        self._h = h
        self.remote = remote
        self._refs = refs           # the Memory / RemoteKey objects named
        self.n = n
        self.ctx._children.add(self)
        if remote:
            owner._lists.add(self)

    @staticmethod
    def _descs(entries, struct, want):
        """A ctypes array of struct from (want-object, offset, length) entries."""
        arr = (struct * max(1, len(entries)))()
        for i, e in enumerate(entries):
            try:
                obj, off, ln = e
            except (TypeError, ValueError):
                raise _bad("entry %d: give (%s, offset, length), not %r"
                           % (i, want.__name__, e)) from None
            if type(obj) is not want or obj._h is None:
                raise _bad("entry %d: %s, not an open %s" % (i, _what(obj), want.__name__))
            if off < 0 or ln < 0:
                raise _bad("entry %d: offset %d / length %d is negative" % (i, off, ln))
            arr[i] = struct(obj._h, off, ln)
        return arr

    @classmethod
    def _local(cls, ctx, entries):
        entries = list(entries)
        arr = cls._descs(entries, _lib.LocalDesc, Memory)
        h = _c_void_p()
        st = _opt("gw_dlist_local")(ctx._handle(), arr, len(entries), _byref(h))
        if st != 0:
            ctx._check(st, "dlist_local")
        return cls(ctx, h.value, False, [e[0] for e in entries], len(entries))

    @classmethod
    def _remote(cls, ep, entries, access):
        entries = list(entries)
        arr = cls._descs(entries, _lib.RemoteDesc, RemoteKey)
        if access & ~ACCESS_REMOTE or not access:
            raise _bad("access 0x%x: ACCESS_REMOTE_WRITE (puts), ACCESS_REMOTE_READ (gets) or "
                       "both" % access)
        h = _c_void_p()
        st = _opt("gw_dlist_remote")(ep._handle(), arr, len(entries), access, _byref(h))
        if st != 0:
            ep.ctx._check(st, "dlist_remote")
        return cls(ep, h.value, True, [], len(entries))

    def __len__(self):
        return self.n

    def _handle(self):
        if self._h is None:
            raise _bad("the descriptor list is closed")
        return self._h

    def close(self):
        """Destroys the list (GW_ERR_BUSY while a transfer uses it)."""
        if self._h is None:
            return
        if self.ctx._h is not None:
            st = _opt("gw_dlist_destroy")(self._h)
            if st != 0:
                self.ctx._check(st, "close a descriptor list")
        self._h = None
        self._refs = None
        self.ctx._children.discard(self)
        if self.remote:
            self.owner._lists.discard(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Request:
    """One operation: wait(timeout) or `await req`; .status, .nbytes, .tag when done."""

    __slots__ = ("ctx", "_h", "_keep", "status", "nbytes", "tag", "detail")

    def __init__(self, ctx, h, keep, nbytes=None):
        self.ctx = ctx
        self._h = h
        self._keep = keep
        self.status = _INPROGRESS
        self.nbytes = nbytes    # None: taken from the completion (recv, flush, batch)
        self.tag = 0
        self.detail = ""        # why it failed (gw_request_info's error_detail)

    def _finish(self, st):
        L = self.ctx._L
        if self.nbytes is None or st < 0:   # length and tag from the completion; why it failed
            ri = _lib.RequestInfo()
            ri.size = ctypes.sizeof(ri)
            L.gw_request_info(self._h, _byref(ri))
            if self.nbytes is None:
                self.nbytes, self.tag = ri.length, ri.tag
            if st < 0:
                self.detail = ri.error_detail.decode(errors="replace")
        L.gw_request_free(self._h)
        self._h = None
        self.status = st
        k = self._keep
        if k is not None:
            self._keep = None
            if k.release:
                k.release()

    def _raise_failed(self):
        d = "request failed"
        if self.detail:
            d = "%s: %s" % (d, self.detail)
        elif self.ctx._h:
            d = "%s; context: %s" % (d, self.ctx._L.gw_last_error(self.ctx._h).decode(errors="replace"))
        _raise(self.status, d)

    def cancel(self):
        """Withdraws the operation if it has not started to move data (a
        receive nothing matched yet, a waiting flush).  True when the request
        is complete on return (then .status says GW_ERR_CANCELED, or its own
        status when it had completed); False when it is past withdrawal and
        completes on its own."""
        if self._h is None:
            return True
        if self.ctx._h is None:
            raise _bad("the context of this request is closed")
        st = _opt("gw_request_cancel")(self._h)
        if st == _INPROGRESS:
            return False
        if st != 0:
            self.ctx._check(st, "cancel")
        self._finish(self.ctx._L.gw_request_test(self._h))
        return True

    def done(self):
        """True once complete (does not progress; see Context.progress)."""
        if self._h is None:
            return True
        if self.ctx._h is None:
            raise _bad("the context of this request is closed")
        st = self.ctx._L.gw_request_test(self._h)
        if st == _INPROGRESS:
            return False
        self._finish(st)
        return True

    def wait(self, timeout=None):
        """Progresses until complete; returns the bytes moved (for recv: the message length)."""
        if self._h is not None:
            if self.ctx._h is None:
                raise _bad("the context of this request is closed")
            F = _lib.fast
            if F is not None and self.nbytes is not None:     # put/get/send: no info needed
                st = F.wait_free(self._h, -1 if timeout is None else _ms(timeout))
                if st == 0:
                    self._h = None
                    self.status = 0
                    k = self._keep
                    if k is not None:
                        self._keep = None
                        if k.release:
                            k.release()
                    return self.nbytes
                if st == _INPROGRESS:
                    _raise(_TIMEOUT, "request not complete after %s s" % timeout)
                self._finish(st)            # failed: not freed yet, its detail is read first
                self._raise_failed()
            st = self.ctx._L.gw_request_wait(self._h, -1 if timeout is None else _ms(timeout))
            if st == _TIMEOUT and self.ctx._L.gw_request_test(self._h) == _INPROGRESS:
                _raise(_TIMEOUT, "request not complete after %s s" % timeout)
            self._finish(st)
        if self.status != 0:
            self._raise_failed()
        return self.nbytes

    def __await__(self):
        if self._h is not None and not self.done():
            yield from _aio_driver(self.ctx).wait(self).__await__()
        if self.status != 0:
            self._raise_failed()
        return self.nbytes

    def __del__(self):
        h = self._h
        if h is not None and self.ctx._h is not None:
            self.ctx._L.gw_request_free(h)   # the operation goes on; completion discarded


class _AioDriver:
    """Drives a context from an asyncio loop: progress when its fd is readable."""

    def __init__(self, ctx, loop):
        self.ctx, self.loop = ctx, loop
        self.waiting = {}            # Request -> Future
        self.peer_waiting = collections.deque()     # Futures of peer_event_async, oldest first
        self.fd = ctx.fileno()
        self.reading = False
        self.timer = None

    def wait(self, req):
        fut = self.loop.create_future()
        self.waiting[req] = fut
        self._arm()
        return fut

    def peer_wait(self):
        fut = self.loop.create_future()
        self.peer_waiting.append(fut)
        self._arm()
        return fut

    def _arm(self):
        if not self.reading:
            self.loop.add_reader(self.fd, self.drive)
            self.reading = True
        self.loop.call_soon(self.drive)

    def drive(self):
        ctx = self.ctx
        if ctx._h is None:
            self.stop()
            return
        for _ in range(64):
            if ctx._L.gw_progress(ctx._h) <= 0:
                break
        for req, fut in list(self.waiting.items()):
            if req.done():
                del self.waiting[req]
                if not fut.done():
                    fut.set_result(None)
        pw = self.peer_waiting
        while pw:
            if pw[0].done():            # cancelled (its timeout): takes no event
                pw.popleft()
                continue
            try:
                ev = ctx._peer_next()
            except Exception as e:      # (the watch stopped, the context failed)
                pw.popleft().set_exception(e)
                continue
            if ev is None:
                break
            pw.popleft().set_result(ev)
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.waiting or self.peer_waiting:
            # timers (peer liveness, directory leases) and transports that poll
            # run on progress calls; peer events alone come seconds apart
            self.timer = self.loop.call_later(0.002 if self.waiting else 0.02, self.drive)
        elif self.reading:
            self.loop.remove_reader(self.fd)
            self.reading = False

    def stop(self):
        if self.reading:
            self.loop.remove_reader(self.fd)
            self.reading = False
        if self.timer is not None:
            self.timer.cancel()
        for fut in self.waiting.values():
            if not fut.done():
                fut.set_exception(_bad("the context was closed while awaiting a request"))
        self.waiting.clear()
        for fut in self.peer_waiting:
            if not fut.done():
                fut.set_exception(_bad("the context was closed while awaiting a peer event"))
        self.peer_waiting.clear()


def _aio_driver(ctx):
    loop = asyncio.get_running_loop()
    d = ctx._aio
    if d is None or d.loop is not loop:
        if d is not None:
            d.stop()
        d = ctx._aio = _AioDriver(ctx, loop)
    return d


def _handles(reqs):
    reqs = list(reqs)
    ctx = None
    for i, r in enumerate(reqs):
        if r is None:
            continue
        if type(r) is not Request:
            raise _bad("requests[%d]: %s, not a Request (or None)" % (i, _what(r)))
        if ctx is None:
            ctx = r.ctx
        elif r.ctx is not ctx and r._h is not None:
            raise _bad("requests[%d] belongs to another context than requests before it" % i)
    return reqs, ctx


def test_many(reqs):
    """Indices of the complete requests among reqs (None entries skipped),
    without progressing (gw_request_test_many)."""
    reqs, ctx = _handles(reqs)
    n = len(reqs)
    arr = (_c_void_p * max(1, n))(*[(r._h or 0) if r is not None else 0 for r in reqs])
    live = [i for i, r in enumerate(reqs) if r is not None and r._h is not None]
    done = set(i for i, r in enumerate(reqs) if r is not None and r._h is None)
    if live:
        if ctx._h is None:
            raise _bad("the context of these requests is closed")
        idx = (ctypes.c_size_t * max(1, n))()
        nd = ctypes.c_size_t()
        st = _opt("gw_request_test_many")(arr, n, idx, _byref(nd))
        if st != 0:
            ctx._check(st, "test_many")
        for k in range(nd.value):
            i = idx[k]
            if reqs[i] is not None and reqs[i]._h is not None:
                reqs[i].done()           # records its status, frees the C request
                done.add(i)
    return sorted(done)


def wait_any(reqs, timeout=None):
    """Progresses until one of reqs (one context; None entries skipped) is
    complete and returns its index (the lowest complete one).  Its status is
    in .status; wait() on it returns or raises as usual.  Timeout when none
    completed in time."""
    reqs, ctx = _handles(reqs)
    for i, r in enumerate(reqs):
        if r is not None and r._h is None:
            return i
    if ctx is None:
        raise _bad("wait_any: no request given (every entry is None)")
    if ctx._h is None:
        raise _bad("the context of these requests is closed")
    n = len(reqs)
    arr = (_c_void_p * n)(*[(r._h or 0) if r is not None else 0 for r in reqs])
    idx = ctypes.c_size_t()
    st = _opt("gw_request_wait_any")(arr, n, _ms(timeout), _byref(idx))
    if st == _TIMEOUT or st == _INPROGRESS:
        _raise(_TIMEOUT, "wait_any: none of %d requests complete after %s s" % (n, timeout))
    if st != 0:
        ctx._check(st, "wait_any")
    reqs[idx.value].done()
    return idx.value


_PAGES_PY = (Endpoint.put_pages, Endpoint.get_pages)
_pages_forget = None


def _install_pages(F):
    """Endpoint.put_pages / get_pages as the accelerator's C methods (the
    whole call in C, no bytecode between the caller and
    gw_xfer_pages; anything out of the common case goes to the Python
    methods), else the Python methods; on every change of _lib.fast."""
    global _pages_forget
    if F is not None and F.batch_ok and hasattr(F, "method"):
        F.bind_pages(Memory, RemoteKey, Request, *_PAGES_PY)
        Endpoint.put_pages, Endpoint.get_pages = F.method(Endpoint, 0), F.method(Endpoint, 1)
        _pages_forget = F.forget
    else:
        Endpoint.put_pages, Endpoint.get_pages = _PAGES_PY
        _pages_forget = None


_install_pages(_lib.fast)
_lib.fast_hooks.append(_install_pages)
