# SPDX-License-Identifier: Apache-2.0
"""endpoint.py - Listener and Endpoint: one-sided put/get/put_notify,
tagged send/recv, flush, notifications and probes (the batched and paged
transfers come from batch._BatchOps).  Operations return a Request, or None
with track=False."""
from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any, Dict, Optional, Set, Tuple, Union, cast

from . import _lib
from ._buffers import Resolved, resolve
from ._common import (_ALL, _INPROGRESS, _TIMEOUT, _Forget, _bad, _byref, _c_void_p, _close_plans, _ms,
                      _opt, _raise)
from .batch import DescList, _BatchOps
from .memory import Memory, RemoteKey
from .request import Request

if TYPE_CHECKING:
    from .context import Context

# what put/get/send/recv accept as the local side: a registered Memory, or
# any host object with the buffer protocol (a tensor, an ndarray, bytes ...)
Local = Union[Memory, Any]


class Listener:
    """Accepts endpoints (ctx.listen, ctx.agent_listen): .address, accept(timeout)."""

    def __init__(self, ctx: Context, addr: Optional[str], handle: Optional[int] = None) -> None:
        if handle is None:
            h = _c_void_p()
            st = ctx._L.gw_listen(ctx._handle(), (addr or "").encode(), _byref(h))
            if st != 0:
                ctx._check(st, "listen on %s" % addr)
            handle = h.value
        self.ctx = ctx
        self._h: Optional[int] = handle
        ctx._children.add(self)

    @property
    def address(self) -> str:
        buf = ctypes.create_string_buffer(128)
        st = self.ctx._L.gw_listener_addr(self._handle(), buf, 128)
        if st != 0:
            self.ctx._check(st)
        return buf.value.decode()

    def _handle(self) -> int:
        if self._h is None:
            raise _bad("the listener is closed")
        return self._h

    def accept(self, timeout: Optional[float] = None) -> Endpoint:
        """The next endpoint whose handshake completed (Timeout when none came)."""
        h = _c_void_p()
        st = self.ctx._L.gw_accept(self._handle(), _ms(timeout), _byref(h))
        if st == _INPROGRESS:
            _raise(_TIMEOUT, "accept on %s: no endpoint ready" % self.address)
        if st != 0:
            self.ctx._check(st, "accept on %s" % self.address)
        return Endpoint(self.ctx, h.value)

    def close(self) -> None:
        if self._h is not None and self.ctx._h is not None:
            self.ctx._L.gw_listener_destroy(self._h)
        self._h = None
        self.ctx._children.discard(self)

    def __enter__(self) -> Listener:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Endpoint(_BatchOps):
    """A connection to one peer.  Operations return a Request (or None with track=False)."""

    def __init__(self, ctx: Context, h: Optional[int]) -> None:
        self.ctx = ctx
        self._h = h
        self._L = ctx._L
        self._keys: Set[RemoteKey] = set()
        self._lists: Set[DescList] = set()
        ctx._children.add(self)

    def _handle(self) -> int:
        if self._h is None:
            raise _bad("the endpoint is closed")
        return self._h

    def close(self, timeout: Optional[float] = 5.0) -> None:
        """Finishes outstanding operations (up to timeout), then closes."""
        if self._h is None:
            return
        _close_plans(self.ctx, self._h)
        for dl in list(self._lists):
            dl.close()
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

    def __enter__(self) -> Endpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def info(self) -> Dict[str, Any]:
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
    def transport(self) -> str:
        return str(self.info()["transport"])

    def unpack(self, key: Union[bytes, bytearray]) -> RemoteKey:
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
    def _local(self, local: Local, offset: int, length: Optional[int],
               writable: bool) -> Tuple[int, int, Optional[int], Optional[Resolved]]:
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

    def _remote(self, rkey: RemoteKey, offset: int, n: int) -> int:
        if type(rkey) is not RemoteKey:
            raise _bad("remote side must be a RemoteKey (ep.unpack), not %s" % type(rkey).__name__)
        if rkey._h is None:
            raise _bad("the remote key is closed")
        return rkey.addr + offset

    def _post(self, st: int, req: Optional[ctypes.c_void_p], keep: Optional[Resolved], what: str,
              n: Optional[int] = None) -> Optional[Request]:
        if st != 0:
            if keep is not None and keep.release:
                keep.release()
            self.ctx._check(st, what)
        if req is None:
            if keep is not None and keep.release:
                keep.release()      # untracked: the caller keeps the buffer (see flush)
            return None
        return Request(self.ctx, req.value, keep, n)

    def _rma(self, op: int, local: Local, rkey: RemoteKey, offset: int, length: Optional[int],
             local_offset: int, track: bool, writable: bool,
             value: Optional[int] = None) -> Optional[Request]:
        """put (op 0) / get (1) / put_notify (2).  The common case (a Memory and
        a RemoteKey) is checked inline and posted through the C accelerator
        when it is built: this is the path the per-operation overhead is
        measured on (bench/compare/python_overhead.sh)."""
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

    def put(self, local: Local, rkey: RemoteKey, offset: int = 0, length: Optional[int] = None,
            local_offset: int = 0, track: bool = True) -> Optional[Request]:
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

    def put_notify(self, local: Local, rkey: RemoteKey, value: int, offset: int = 0,
                   length: Optional[int] = None, local_offset: int = 0,
                   track: bool = True) -> Optional[Request]:
        """put, then `value` reaches the peer's notification queue after the
        data of this put and of every put posted before it on the endpoint."""
        return self._rma(2, local, rkey, offset, length, local_offset, track, False, value)

    def get(self, local: Local, rkey: RemoteKey, offset: int = 0, length: Optional[int] = None,
            local_offset: int = 0, track: bool = True) -> Optional[Request]:
        """Reads the peer's bytes at rkey.addr + offset into local."""
        return self._rma(1, local, rkey, offset, length, local_offset, track, True)

    def send(self, local: Local, tag: int = 0, length: Optional[int] = None,
             local_offset: int = 0) -> Request:
        a, n, m, keep = self._local(local, local_offset, length, False)
        req = _c_void_p()
        st = self._L.gw_send(self._handle(), a, n, m, tag, _byref(req))
        return cast(Request, self._post(st, req, keep, "send", n))

    def recv(self, local: Local, tag: int = 0, mask: int = 0xFFFFFFFFFFFFFFFF,
             length: Optional[int] = None, local_offset: int = 0) -> Request:
        """Receives the oldest message with (msg_tag & mask) == (tag & mask)."""
        a, n, m, keep = self._local(local, local_offset, length, True)
        req = _c_void_p()
        st = self._L.gw_recv(self._handle(), a, n, m, tag, mask, _byref(req))
        return cast(Request, self._post(st, req, keep, "recv"))

    def flush(self) -> Request:
        """A Request that completes when every earlier put/get has (its error, if any)."""
        req = _c_void_p()
        st = self._L.gw_flush(self._handle(), _byref(req))
        return cast(Request, self._post(st, req, None, "flush"))

    def wait_notify(self, timeout: Optional[float] = None) -> int:
        """The oldest notification value received (Timeout when none came)."""
        v = ctypes.c_uint64()
        st = self._L.gw_notify_wait(self._handle(), _ms(timeout), _byref(v))
        if st == _INPROGRESS:
            _raise(_TIMEOUT, "no notification ready")
        if st != 0:
            self.ctx._check(st, "wait for a notification")
        return v.value

    def probe(self, tag: int = 0, mask: int = _ALL) -> Optional[Tuple[int, int]]:
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

    # -- helpers over tagged messages ---------------------------------------------------------
    def send_bytes(self, data: Union[bytes, bytearray, memoryview], tag: int = 0,
                   timeout: Optional[float] = 30.0) -> None:
        self.send(bytes(data), tag).wait(timeout)

    def recv_bytes(self, tag: int = 0, maxlen: int = 65536, timeout: Optional[float] = 30.0) -> bytes:
        buf = bytearray(maxlen)
        r = self.recv(buf, tag)
        n = r.wait(timeout)
        return bytes(buf[:n])



_PAGES_PY = (_BatchOps.put_pages, _BatchOps.get_pages)
_BATCH_PY = (_BatchOps.put_batch, _BatchOps.get_batch)


def _install_pages(F: Any) -> None:
    """Endpoint.put_pages / get_pages and put_batch / get_batch as the
    accelerator's C methods (the whole call in C, no bytecode between the
    caller and gw_xfer_pages or gw_xfer_batch; anything out of the common
    case goes to the Python methods), else the Python methods; on every
    change of _lib.fast."""
    fast = F is not None and F.batch_ok and hasattr(F, "method")
    if fast:
        F.bind_pages(Memory, RemoteKey, Request, *_PAGES_PY)
        setattr(Endpoint, "put_pages", F.method(Endpoint, 0))
        setattr(Endpoint, "get_pages", F.method(Endpoint, 1))
        _Forget.fn = F.forget
    else:
        setattr(Endpoint, "put_pages", _PAGES_PY[0])
        setattr(Endpoint, "get_pages", _PAGES_PY[1])
        _Forget.fn = None
    if fast and hasattr(F, "bind_batch"):
        F.bind_batch(DescList, *_BATCH_PY)
        setattr(Endpoint, "put_batch", F.method(Endpoint, 2))
        setattr(Endpoint, "get_batch", F.method(Endpoint, 3))
    else:
        setattr(Endpoint, "put_batch", _BATCH_PY[0])
        setattr(Endpoint, "get_batch", _BATCH_PY[1])


_install_pages(_lib.fast)
_lib.fast_hooks.append(_install_pages)
