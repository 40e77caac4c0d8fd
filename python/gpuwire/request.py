# SPDX-License-Identifier: Apache-2.0
"""request.py - Request (one operation), waiting on many (wait_any,
test_many), and the asyncio driver that progresses a context from an event
loop through its fd."""
from __future__ import annotations

import asyncio
import collections
import ctypes
from typing import TYPE_CHECKING, Any, Deque, Dict, Generator, Iterable, List, Optional, Tuple, Union

from . import _lib
from ._buffers import Resolved
from ._common import _INPROGRESS, _TIMEOUT, _bad, _byref, _c_void_p, _ms, _opt, _raise, _what

if TYPE_CHECKING:
    from .context import Context
    from .names import PeerEvent


class Request:
    """One operation: wait(timeout) or `await req`; .status, .nbytes, .tag when done."""

    __slots__ = ("ctx", "_h", "_keep", "status", "nbytes", "tag", "detail")

    ctx: Context
    _h: Optional[int]
    _keep: Optional[Union[Resolved, Tuple[Any, ...]]]   # (a tuple: index arrays in GPU memory, held)
    status: int
    nbytes: Optional[int]
    tag: int
    detail: str

    def __init__(self, ctx: Context, h: Optional[int], keep: Optional[Union[Resolved, Tuple[Any, ...]]],
                 nbytes: Optional[int] = None) -> None:
        self.ctx = ctx
        self._h = h
        self._keep = keep
        self.status = _INPROGRESS
        self.nbytes = nbytes    # None: taken from the completion (recv, flush, batch)
        self.tag = 0
        self.detail = ""        # why it failed (gw_request_info's error_detail)

    def _finish(self, st: int) -> None:
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
            if not isinstance(k, tuple) and k.release:
                k.release()

    def _raise_failed(self) -> None:
        d = "request failed"
        if self.detail:
            d = "%s: %s" % (d, self.detail)
        elif self.ctx._h:
            d = "%s; context: %s" % (d, self.ctx._L.gw_last_error(self.ctx._h).decode(errors="replace"))
        _raise(self.status, d)

    def cancel(self) -> bool:
        """Cancels any operation: what of it has not reached the wire is
        withdrawn (a receive nothing matched yet, a waiting flush, a put's,
        get's or send's pieces still queued in the transport, a batch's
        entries not yet handed over).  True when the request is complete on
        return (then .status says GW_ERR_CANCELED, or its own status when it
        had completed); False when part of it is on the wire: it completes
        on its own, once nothing touches its buffer any more (GW_OK, or
        GW_ERR_CANCELED when the rest was dropped), within
        GPUWIRE_OP_TIMEOUT_MS (gw_request_cancel in gpuwire.h)."""
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

    def done(self) -> bool:
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

    def wait(self, timeout: Optional[float] = None) -> Optional[int]:
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
                        if not isinstance(k, tuple) and k.release:
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

    def __await__(self) -> Generator[Any, None, Optional[int]]:
        if self._h is not None and not self.done():
            yield from _aio_driver(self.ctx).wait(self).__await__()
        if self.status != 0:
            self._raise_failed()
        return self.nbytes

    def __del__(self) -> None:
        h = self._h
        if h is not None and self.ctx._h is not None:
            self.ctx._L.gw_request_free(h)   # the operation goes on; completion discarded


class _AioDriver:
    """Drives a context from an asyncio loop: progress when its fd is readable."""

    def __init__(self, ctx: Context, loop: asyncio.AbstractEventLoop) -> None:
        self.ctx, self.loop = ctx, loop
        self.waiting: Dict[Request, "asyncio.Future[None]"] = {}
        # Futures of peer_event_async, oldest first
        self.peer_waiting: Deque["asyncio.Future[Optional[PeerEvent]]"] = collections.deque()
        self.fd = ctx.fileno()
        self.reading = False
        self.timer: Optional[asyncio.TimerHandle] = None

    def wait(self, req: Request) -> "asyncio.Future[None]":
        fut: "asyncio.Future[None]" = self.loop.create_future()
        self.waiting[req] = fut
        self._arm()
        return fut

    def peer_wait(self) -> "asyncio.Future[Optional[PeerEvent]]":
        fut: "asyncio.Future[Optional[PeerEvent]]" = self.loop.create_future()
        self.peer_waiting.append(fut)
        self._arm()
        return fut

    def _arm(self) -> None:
        if not self.reading:
            self.loop.add_reader(self.fd, self.drive)
            self.reading = True
        self.loop.call_soon(self.drive)

    def drive(self) -> None:
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

    def stop(self) -> None:
        if self.reading:
            self.loop.remove_reader(self.fd)
            self.reading = False
        if self.timer is not None:
            self.timer.cancel()
        for fut in self.waiting.values():
            if not fut.done():
                fut.set_exception(_bad("the context was closed while awaiting a request"))
        self.waiting.clear()
        for pfut in self.peer_waiting:
            if not pfut.done():
                pfut.set_exception(_bad("the context was closed while awaiting a peer event"))
        self.peer_waiting.clear()


def _aio_driver(ctx: Context) -> _AioDriver:
    loop = asyncio.get_running_loop()
    d = ctx._aio
    if d is None or d.loop is not loop:
        if d is not None:
            d.stop()
        d = ctx._aio = _AioDriver(ctx, loop)
    return d


def _handles(reqs: Iterable[Optional[Request]]) -> Tuple[List[Optional[Request]], Optional[Context]]:
    reqs = list(reqs)
    ctx: Optional[Context] = None
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


def test_many(reqs: Iterable[Optional[Request]]) -> List[int]:
    """Indices of the complete requests among reqs (None entries skipped),
    without progressing (gw_request_test_many)."""
    reqs, ctx = _handles(reqs)
    n = len(reqs)
    arr = (_c_void_p * max(1, n))(*[(r._h or 0) if r is not None else 0 for r in reqs])
    live = [i for i, r in enumerate(reqs) if r is not None and r._h is not None]
    done = set(i for i, r in enumerate(reqs) if r is not None and r._h is None)
    if live and ctx is not None:
        if ctx._h is None:
            raise _bad("the context of these requests is closed")
        idx = (ctypes.c_size_t * max(1, n))()
        nd = ctypes.c_size_t()
        st = _opt("gw_request_test_many")(arr, n, idx, _byref(nd))
        if st != 0:
            ctx._check(st, "test_many")
        for k in range(nd.value):
            i = idx[k]
            r = reqs[i]
            if r is not None and r._h is not None:
                r.done()                 # records its status, frees the C request
                done.add(i)
    return sorted(done)


def wait_any(reqs: Iterable[Optional[Request]], timeout: Optional[float] = None) -> int:
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
    r = reqs[idx.value]
    if r is not None:
        r.done()
    return idx.value
