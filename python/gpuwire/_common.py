# SPDX-License-Identifier: Apache-2.0
"""_common.py - what every module of the package shares: the access flags,
the status numbers the binding tests for, timeouts, raising with the
library's status names, and the registry of prepared paged transfers that
closing an endpoint, region or key must reach."""
from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any, Callable, List, NoReturn, Optional, Set, Tuple

from . import _lib
from .errors import InvalidArgument, error_class

if TYPE_CHECKING:
    from .context import Context

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
# (context handle, regions) left alive because views of them were (Context.close)
_kept: List[Tuple[int, List[Any]]] = []


class _Forget:
    """What the accelerator's C put_pages/get_pages keep of live endpoints,
    regions and keys is dropped by `fn` (set by endpoint._install_pages)."""
    fn: Optional[Callable[[], None]] = None


def _ms(timeout: Optional[float]) -> int:
    """Seconds (None: no limit) -> the C API's milliseconds (-1: no limit)."""
    if timeout is None:
        return -1
    if timeout < 0:
        raise InvalidArgument(-1, "GW_ERR_INVALID", "invalid argument",
                              "timeout %r: give seconds >= 0 or None for no limit" % (timeout,))
    return int(timeout * 1000 + 0.999)


def _raise(st: int, detail: str = "") -> NoReturn:
    L = _lib.load()
    raise error_class(st)(st, L.gw_status_name(st).decode(), L.gw_status_str(st).decode(), detail)


def _bad(detail: str) -> InvalidArgument:
    return InvalidArgument(-1, "GW_ERR_INVALID", "invalid argument", detail)


def _opt(name: str) -> Any:
    """An optional entry point of the C API (see _lib._OPTIONAL)."""
    return _lib.need(name)


def _what(x: object) -> str:
    return "a %s" % type(x).__name__


def _close_plans(ctx: "Context", h: Optional[int]) -> None:
    """Closes the prepared paged transfers naming handle h (every one: None),
    before that endpoint, region or key goes: a plan holds raw handles."""
    if _Forget.fn is not None:
        _Forget.fn()             # the C put_pages/get_pages keep handles of live objects
    plans: Set[Any] = ctx._plans
    if not plans:
        return
    for p in list(plans):
        if h is None or p.closed or p._uses(h):
            p.close()
            plans.discard(p)
