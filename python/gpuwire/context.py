# SPDX-License-Identifier: Apache-2.0
"""context.py - Context (a gpuwire context: progress, regions, listeners,
endpoints, and the names methods of names._NamesOps) and the library-wide
queries (status_name, version, build_features, settings).

Each class of the package wraps one C object of include/gpuwire.h and keeps
its rules: parents outlive children (a child holds a reference to its
parent, and closing a parent first closes the children it made), a context
is used by one thread at a time, every failure raises GwError with the
status and the context's detail message.

Lifetimes: a Memory, Listener, Endpoint or RemoteKey lives until its close()
(or `with`), or until its context closes -- not until the Python object goes
out of scope, since a peer may still rely on it.  A Memory keeps the
registered object referenced, so a tensor cannot be freed under a peer's
put; after close() every key packed from it is revoked.  A Request that is
dropped before completion is freed (the operation goes on, its completion
is discarded), as gw_request_free() does.
"""
from __future__ import annotations

import ctypes
import os
import warnings
from typing import TYPE_CHECKING, Any, Iterable, List, NoReturn, Optional, Set, Tuple

from . import _lib
from ._common import (ACCESS_REMOTE, _TIMEOUT, _bad, _byref, _c_void_p, _close_plans, _kept, _ms,
                      _raise)
from .batch import DescList
from .endpoint import Endpoint, Listener
from .memory import Memory
from .names import _NamesOps

if TYPE_CHECKING:
    from .request import _AioDriver


def status_name(status: int) -> str:
    return str(_lib.load().gw_status_name(status).decode())


def version() -> str:
    return str(_lib.load().gw_version().decode())


def build_features() -> List[str]:
    return [str(f) for f in _lib.load().gw_build_features().decode().split()]


def settings() -> List[Tuple[str, str, str]]:
    """Every GPUWIRE_* setting: list of (name, default, help)."""
    L = _lib.load()
    out: List[Tuple[str, str, str]] = []
    i = 0
    while True:
        d = L.gw_setting_at(i)
        if not d:
            return out
        d = d.contents
        out.append((d.name.decode(), (d.default_value or b"").decode(), (d.help or b"").decode()))
        i += 1


class Context(_NamesOps):
    """A gpuwire context: with Context() as ctx: ... (closes everything it made)."""

    def __init__(self, transports: Optional[str] = None, log_level: Optional[int] = None,
                 progress_thread: Optional[bool] = None, integrity: Optional[bool] = None) -> None:
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
        # integrity: True checks every notifying put of this context's
        # endpoints end to end (CRC32C at the source, checked at the target
        # before the notification is delivered: IntegrityError on a
        # mismatch, on both sides); False: this side does not ask (the peer
        # still may); None: GPUWIRE_INTEGRITY decides (default off)
        ig = 0 if integrity is None else (1 if integrity else -1)
        cfg = _lib.Config(ctypes.sizeof(_lib.Config),
                          transports.encode() if transports else None,
                          -1 if log_level is None else int(log_level), None, pt, ig)
        h = _c_void_p()
        st = L.gw_context_create(_byref(cfg), _byref(h))
        if st != 0:
            _raise(st, "gw_context_create failed (transports=%r); the settings error, if any, "
                       "is on stderr" % (transports,))
        self._h: Optional[int] = h.value
        # endpoints, listeners and regions live until closed, or until the
        # context closes: a registration a peer relies on does not vanish
        # because the Python object went out of scope
        self._children: Set[Any] = set()
        self._plans: Set[Any] = set()     # prepared transfers (Endpoint.prepare_put_pages, prepare_put_batch)
        self._aio: Optional[_AioDriver] = None
        self._watch_cb: Any = None   # the ctypes callback gw_peer_watch holds (kept referenced)
        # an exception the peer-event callback raised, raised by progress()
        self._watch_err: Optional[BaseException] = None
        self.name: Optional[str] = None        # the agent name, once agent_listen() made it one

    # -- lifetime -------------------------------------------------------------------
    def _keep_plan(self, plan: Any) -> Any:
        """Records a prepared transfer (closed with its context or what it
        names), forgetting those the user closed once there are many."""
        plans = self._plans
        if len(plans) > 64:
            for p in [p for p in plans if p.closed]:
                plans.discard(p)
        plans.add(plan)
        return plan

    def close(self) -> None:
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

    def __enter__(self) -> Context:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    @property
    def closed(self) -> bool:
        return self._h is None

    def _handle(self) -> int:
        h = self._h
        if h is None:
            raise _bad("the context is closed")
        return h

    def _check(self, st: int, what: str = "") -> NoReturn:
        """Raises for a negative status with the context's detail message."""
        detail = self._L.gw_last_error(self._h).decode(errors="replace") if self._h else ""
        if what and what not in detail:
            detail = "%s: %s" % (what, detail) if detail else what
        _raise(st, detail)

    # -- information ------------------------------------------------------------------
    def last_error(self) -> str:
        return str(self._L.gw_last_error(self._handle()).decode(errors="replace"))

    def setting(self, name: str) -> Optional[str]:
        v = self._L.gw_setting_value(self._handle(), name.encode())
        return None if v is None else str(v.decode())

    def transports(self) -> List[Tuple[str, bool, str]]:
        """[(name, usable, detail)] for each transport compiled in."""
        out: List[Tuple[str, bool, str]] = []
        i = 0
        while True:
            ti = _lib.TransportInfo()
            ti.size = ctypes.sizeof(ti)
            if self._L.gw_transport_at(self._handle(), i, _byref(ti)) != 0:
                return out
            out.append((ti.name.decode(), bool(ti.usable), ti.detail.decode(errors="replace")))
            i += 1

    # -- progress -----------------------------------------------------------------------
    def progress(self) -> int:
        n = self._L.gw_progress(self._handle())
        if self._watch_err is not None:
            e, self._watch_err = self._watch_err, None
            raise e
        if n < 0:
            self._check(n, "gw_progress")
        return int(n)

    def fileno(self) -> int:
        fd = ctypes.c_int()
        st = self._L.gw_context_fd(self._handle(), _byref(fd))
        if st != 0:
            self._check(st)
        return fd.value

    def wait(self, timeout: Optional[float] = None) -> None:
        st = self._L.gw_context_wait(self._handle(), _ms(timeout))
        if st < 0 and st != _TIMEOUT:
            self._check(st, "gw_context_wait")

    # -- memory ---------------------------------------------------------------------------
    def register(self, obj: Any, access: int = ACCESS_REMOTE) -> Memory:
        """Registers obj's memory (tensor, ndarray, buffer, CUDA array, DLPack)."""
        return Memory(self, obj, access)

    def alloc(self, nbytes: int, access: int = ACCESS_REMOTE) -> Memory:
        """nbytes of zeroed host memory that gpuwire allocates and registers
        (gw_mem_alloc): shared with peers on this host, so intra-host puts and
        gets into it are plain copies.  See it without copies through
        mem.numpy(), mem.tensor(), mem.memoryview()."""
        return Memory._alloc(self, nbytes, access)

    def dlist_local(self, entries: Iterable[Tuple[Memory, int, int]]) -> DescList:
        """A prepared local descriptor list (gw_dlist_local) of (Memory, offset,
        length) entries, for Endpoint.put_batch / get_batch."""
        return DescList._local(self, entries)

    def dlist_local_table(self, regions: Any, count: Optional[int] = None, length: int = 0,
                          offsets: Any = None, lengths: Any = None, region_index: Any = None,
                          per_region: int = 0) -> DescList:
        """A prepared local list from columns (gw_dlist_local_table): entry i
        lies in regions[region_index[i]] at offsets[i], lengths[i] bytes long;
        see Endpoint.dlist_remote_table for the columns and the computed form
        (no columns: block i % per_region of regions[i // per_region]).  A
        table of 1,000,000 entries from NumPy columns builds in tens of
        milliseconds; a computed one at once."""
        return DescList._table(self, False, regions, count, length, offsets, lengths, region_index,
                               per_region, 0)

    # -- endpoints --------------------------------------------------------------------------
    def listen(self, addr: str = "127.0.0.1:0") -> Listener:
        return Listener(self, addr)

    def connect(self, addr: str) -> Endpoint:
        h = _c_void_p()
        st = self._L.gw_connect(self._handle(), addr.encode(), _byref(h))
        if st != 0:
            self._check(st, "connect to %s" % addr)
        return Endpoint(self, h.value)

