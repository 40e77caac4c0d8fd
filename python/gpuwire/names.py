# SPDX-License-Identifier: Apache-2.0
"""names.py - names (docs/NAMES.md): agents, published regions, peers by
name, the directory and its peer events.  PeerEvent, and the names methods
of Context (mixed into it): agent_listen, unpublish, peer_add, peer_ep,
peer_regions, peer_watch, peer_unwatch, peer_event(s)[_async], peer_query,
ls, directory.  Memory.publish is in memory.py."""
from __future__ import annotations

import asyncio
import ctypes
import time
from typing import (Any, AsyncIterator, Callable, Dict, Iterable, Iterator, List, NoReturn,
                    Optional, Set, Tuple, Union, overload)

from . import _lib
from ._common import _NOT_FOUND, _bad, _byref, _c_void_p, _opt, _what
from .endpoint import Endpoint, Listener
from .memory import RemoteKey
from .request import _aio_driver


class PeerEvent:
    """An agent left the directory or came back (gw_peer_event_t): .type
    ("left" or "back"), .name, .addr, .epoch, .restarted (back as another
    context: its old keys are void), .dropped (events lost to a full queue
    before this one)."""

    __slots__ = ("type", "name", "addr", "epoch", "restarted", "dropped")

    type: str
    name: str
    addr: str
    epoch: int
    restarted: bool
    dropped: int

    def __init__(self, ev: Any) -> None:
        self.type = {1: "left", 2: "back"}.get(ev.type, "unknown(%d)" % ev.type)
        self.name = ev.name.decode(errors="replace")
        self.addr = ev.addr.decode(errors="replace")
        self.epoch = ev.epoch
        self.restarted = bool(ev.restarted)
        self.dropped = ev.dropped

    def __repr__(self) -> str:
        return "PeerEvent(%s %r addr=%s epoch=%d%s%s)" % (
            self.type, self.name, self.addr, self.epoch, " restarted" if self.restarted else "",
            " dropped=%d" % self.dropped if self.dropped else "")



class _NamesOps:
    """The names methods of a Context (mixed into it)."""
    name: Optional[str]
    _L: Any
    _h: Optional[int]
    _children: Set[Any]
    _watch_cb: Any
    _watch_err: Optional[BaseException]

    def _handle(self) -> int:
        raise NotImplementedError

    def _check(self, st: int, what: str = "") -> NoReturn:
        raise NotImplementedError

    def agent_listen(self, name: str, addr: Optional[str] = None) -> Listener:
        """Makes the context the agent `name`: a Listener on addr (None: every
        address, a free port), registered in the directory when one is set."""
        h = _c_void_p()
        st = _opt("gw_agent_listen")(self._handle(), name.encode(),
                                     None if addr is None else addr.encode(), _byref(h))
        if st != 0:
            self._check(st, "agent_listen(%r)" % name)
        self.name = name
        return Listener(self, None, h.value)  # type: ignore[arg-type]

    def unpublish(self, name: str) -> None:
        st = _opt("gw_mem_unpublish")(self._handle(), name.encode())
        if st != 0:
            self._check(st, "unpublish(%r)" % name)

    def peer_add(self, name: str, addr: str) -> None:
        """Agent `name` listens at addr ("host:port"): the peer-to-peer form."""
        st = _opt("gw_peer_add")(self._handle(), name.encode(), addr.encode())
        if st != 0:
            self._check(st, "peer_add(%r, %r)" % (name, addr))

    def peer_ep(self, name: str) -> Endpoint:
        """The Endpoint to agent `name` (connected on first use, reused after)."""
        h = _c_void_p()
        st = _opt("gw_peer_ep")(self._handle(), name.encode(), _byref(h))
        if st != 0:
            self._check(st, "peer_ep(%r)" % name)
        for k in self._children:
            if isinstance(k, Endpoint) and k._h == h.value:
                return k
        return Endpoint(self, h.value)  # type: ignore[arg-type]

    @overload
    def peer_regions(self, peer: str, names: str) -> RemoteKey: ...

    @overload
    def peer_regions(self, peer: str, names: Union[List[str], Tuple[str, ...]]) -> List[RemoteKey]: ...

    def peer_regions(self, peer: str, names: Union[str, Iterable[str]]) -> Union[RemoteKey, List[RemoteKey]]:
        """RemoteKeys of regions agent `peer` published, one per name, unpacked
        on peer_ep(peer) (all or nothing).  A str gives one RemoteKey."""
        one = isinstance(names, str)
        names = [names] if isinstance(names, str) else list(names)
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

    def peer_watch(self, callback: Optional[Callable[[PeerEvent], Any]] = None, all: bool = False) -> None:
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
            user_cb: Callable[[PeerEvent], Any] = callback

            def on_event(_arg: Any, ev: Any, user_cb: Callable[[PeerEvent], Any] = user_cb,
                         ctx: _NamesOps = self) -> None:
                try:
                    user_cb(PeerEvent(ev.contents))
                except BaseException as e:  # handed to progress(): a C frame is between
                    if ctx._watch_err is None:
                        ctx._watch_err = e
            cb = _lib.PEER_CB(on_event)
        st = fn(self._handle(), 1 if all else 0, cb or _lib.PEER_CB(), None)
        if st != 0:
            self._check(st, "peer_watch")
        self._watch_cb = cb

    def peer_unwatch(self) -> None:
        """Stops the events (queued ones are discarded)."""
        st = _opt("gw_peer_watch")(self._handle(), 2, _lib.PEER_CB(), None)
        if st != 0:
            self._check(st, "peer_unwatch")
        self._watch_cb = None

    def _peer_next(self) -> Optional[PeerEvent]:
        """One queued PeerEvent taken without waiting, or None."""
        ev = _lib.PeerEvent()
        ev.size = ctypes.sizeof(ev)
        st = _opt("gw_peer_event_next")(self._handle(), _byref(ev))
        if st == 0:
            return PeerEvent(ev)
        if st != _NOT_FOUND:
            self._check(st, "peer_event")
        return None

    def peer_event(self, timeout: Optional[float] = 0) -> Optional[PeerEvent]:
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

    def peer_events(self, timeout: Optional[float] = None) -> Iterator[PeerEvent]:
        """Iterates over peer events as they come (peer_event with that timeout
        for each), until one does not come in time."""
        while True:
            ev = self.peer_event(timeout)
            if ev is None:
                return
            yield ev

    async def peer_event_async(self, timeout: Optional[float] = None) -> Optional[PeerEvent]:
        """peer_event() for asyncio: awaits the oldest queued PeerEvent while
        the loop runs other work (the context is progressed from the loop:
        its fd through loop.add_reader, as for an awaited Request), up to
        timeout seconds (None: no limit); None when none came."""
        if self._watch_cb is not None:
            raise _bad("peer_event_async: peer_watch was given a callback, so events go to it, "
                       "not to the queue (call peer_watch() without one)")
        self._handle()
        fut = _aio_driver(self).peer_wait()  # type: ignore[arg-type]
        try:
            return await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            return None         # (the cancelled wait takes no event: the next one gets it)

    async def peer_events_async(self, timeout: Optional[float] = None) -> AsyncIterator[PeerEvent]:
        """`async for ev in ctx.peer_events_async():` peer events as they come
        (peer_event_async with that timeout for each), until one does not
        come in time."""
        while True:
            ev = await self.peer_event_async(timeout)
            if ev is None:
                return
            yield ev

    def peer_query(self, name: str) -> Dict[str, Any]:
        """What this context knows of agent `name` (no traffic): a dict."""
        pi = _lib.PeerInfo()
        pi.size = ctypes.sizeof(pi)
        st = _opt("gw_peer_query")(self._handle(), name.encode(), _byref(pi))
        if st != 0:
            self._check(st, "peer_query(%r)" % name)
        return {"addr": pi.addr.decode(errors="replace"), "epoch": pi.epoch,
                "listed": None if pi.listed < 0 else bool(pi.listed), "changes": pi.changes,
                "connected": bool(pi.connected), "restarts": pi.restarts}

    def ls(self) -> List[Dict[str, Any]]:
        """Every agent and region the directory holds (`gpuwire ls`): dicts,
        agents first; GW_ERR_UNAVAILABLE without a directory."""
        out: List[Dict[str, Any]] = []

        def each(_arg: Any, e: Any) -> int:
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

    def directory(self) -> str:
        """One line: which directory the context uses and whether it answers."""
        buf = ctypes.create_string_buffer(512)
        st = _opt("gw_directory_describe")(self._handle(), buf, 512)
        if st != 0:
            self._check(st, "directory")
        return buf.value.decode(errors="replace")
