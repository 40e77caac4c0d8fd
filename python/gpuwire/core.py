"""core.py - Context, Memory, Listener, Endpoint, RemoteKey and Request.

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
import ctypes

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

    def __init__(self, transports=None, log_level=None):
        L = _lib.load()
        self._L = L
        cfg = _lib.Config(ctypes.sizeof(_lib.Config),
                          transports.encode() if transports else None,
                          -1 if log_level is None else int(log_level))
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
        self._aio = None

    # -- lifetime -------------------------------------------------------------------
    def close(self):
        """Closes endpoints, listeners and regions made by it, then the context."""
        if self._h is None:
            return
        kids = list(self._children)
        for k in kids:                      # endpoints first: they free their keys
            if isinstance(k, Endpoint):
                k.close()
        for k in kids:
            if not isinstance(k, Endpoint):
                k.close()
        if self._aio is not None:
            self._aio.stop()
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

    # -- endpoints --------------------------------------------------------------------------
    def listen(self, addr="127.0.0.1:0"):
        return Listener(self, addr)

    def connect(self, addr):
        h = _c_void_p()
        st = self._L.gw_connect(self._handle(), addr.encode(), _byref(h))
        if st != 0:
            self._check(st, "connect to %s" % addr)
        return Endpoint(self, h.value)


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

    def close(self):
        """Deregisters; every key packed from the region is revoked."""
        if self._h is None:
            return
        if self.ctx._h is not None:
            st = self.ctx._L.gw_mem_dereg(self._h)
            if st != 0:
                self.ctx._check(st, "deregister")
        self._h = None
        self.ctx._children.discard(self)
        if self._r.release:
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
    def __init__(self, ctx, addr):
        h = _c_void_p()
        st = ctx._L.gw_listen(ctx._handle(), addr.encode(), _byref(h))
        if st != 0:
            ctx._check(st, "listen on %s" % addr)
        self.ctx = ctx
        self._h = h.value
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
        ctx._children.add(self)

    def _handle(self):
        if self._h is None:
            raise _bad("the endpoint is closed")
        return self._h

    def close(self, timeout=5.0):
        """Finishes outstanding operations (up to timeout), then closes."""
        if self._h is None:
            return
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

    # -- helpers over tagged messages ---------------------------------------------------------
    def send_bytes(self, data, tag=0, timeout=30.0):
        self.send(bytes(data), tag).wait(timeout)

    def recv_bytes(self, tag=0, maxlen=65536, timeout=30.0):
        buf = bytearray(maxlen)
        r = self.recv(buf, tag)
        n = r.wait(timeout)
        return bytes(buf[:n])


class Request:
    """One operation: wait(timeout) or `await req`; .status, .nbytes, .tag when done."""

    __slots__ = ("ctx", "_h", "_keep", "status", "nbytes", "tag")

    def __init__(self, ctx, h, keep, nbytes=None):
        self.ctx = ctx
        self._h = h
        self._keep = keep
        self.status = _INPROGRESS
        self.nbytes = nbytes    # None: taken from the completion (recv, flush)
        self.tag = 0

    def _finish(self, st):
        L = self.ctx._L
        if self.nbytes is None:       # recv, flush: length and tag from the completion
            ri = _lib.RequestInfo()
            ri.size = ctypes.sizeof(ri)
            L.gw_request_info(self._h, _byref(ri))
            self.nbytes, self.tag = ri.length, ri.tag
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
        _raise(self.status, "%s; context: %s" % (d, self.ctx._L.gw_last_error(self.ctx._h)
                                                 .decode(errors="replace"))
               if self.ctx._h else d)

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
                if st == _INPROGRESS:
                    _raise(_TIMEOUT, "request not complete after %s s" % timeout)
                self._h = None
                self.status = st
                k = self._keep
                if k is not None:
                    self._keep = None
                    if k.release:
                        k.release()
                if st != 0:
                    self._raise_failed()
                return self.nbytes
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
        self.fd = ctx.fileno()
        self.reading = False
        self.timer = None

    def wait(self, req):
        fut = self.loop.create_future()
        self.waiting[req] = fut
        if not self.reading:
            self.loop.add_reader(self.fd, self.drive)
            self.reading = True
        self.loop.call_soon(self.drive)
        return fut

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
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.waiting:
            # timers (peer liveness) and transports that poll run on progress calls
            self.timer = self.loop.call_later(0.002, self.drive)
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


def _aio_driver(ctx):
    loop = asyncio.get_running_loop()
    d = ctx._aio
    if d is None or d.loop is not loop:
        if d is not None:
            d.stop()
        d = ctx._aio = _AioDriver(ctx, loop)
    return d
