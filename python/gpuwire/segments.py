# SPDX-License-Identifier: Apache-2.0
"""segments.py - Segments: registers the segments of a caching allocator
(PyTorch's by default) whole, so that tensors carved out of them need no
registration of their own: registering such a tensor afterwards is found in
the context's registration cache (GPUWIRE_REG_CACHE) and costs a lookup, and
a descriptor table can name the segment's Memory with the tensor's offset.

    segs = gpuwire.Segments(ctx)          # torch.cuda's segments, all devices
    segs.refresh()                        # after the model and KV cache are allocated
    m, off = segs.locate(kv_tensor)       # the segment's Memory, the tensor's offset in it
    t = ctx.register(kv_tensor)           # or a registration of its own, from the cache

refresh() registers segments that appeared since the last call and closes
the registrations of segments that went (torch.cuda.empty_cache() returns
them to the driver; memory allocated there later is another allocation,
which the cache tells apart by the driver's buffer id, so nothing stale is
reused).  Call it after allocating, and after empty_cache()."""
from __future__ import annotations

import ctypes
import importlib
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Tuple

from ._common import ACCESS_REMOTE, _bad
from .memory import Memory

if TYPE_CHECKING:
    from .context import Context

# (address, size, device): device -1 for host memory
Segment = Tuple[int, int, int]


class _Range:
    """A raw range as the buffer resolver takes it: device memory through
    __cuda_array_interface__, host memory through a ctypes array."""

    def __init__(self, addr: int, size: int) -> None:
        self.__cuda_array_interface__ = {"data": (addr, False), "shape": (size,), "typestr": "|u1",
                                         "version": 3}


def torch_segments(device: Optional[int] = None) -> List[Segment]:
    """The PyTorch caching allocator's segments (torch.cuda.memory_snapshot):
    (address, total_size, device) of each, of one device or all."""
    try:
        torch: Any = importlib.import_module("torch")
    except ImportError:
        raise _bad("Segments: PyTorch is not installed (give snapshot= for another allocator)") from None
    if not torch.cuda.is_available():
        raise _bad("Segments: torch.cuda is not available (no GPU, or a CPU-only PyTorch)")
    out = []
    for s in torch.cuda.memory_snapshot():
        dev = int(s.get("device", 0))
        if device is None or dev == device:
            out.append((int(s["address"]), int(s["total_size"]), dev))
    return out


class Segments:
    """The registrations of an allocator's segments (see the module text).

    snapshot: a callable returning the current segments as (address, size,
    device) tuples (device -1: host memory); default: PyTorch's CUDA caching
    allocator (torch_segments(device))."""

    def __init__(self, ctx: Context, device: Optional[int] = None, access: int = ACCESS_REMOTE,
                 snapshot: Optional[Callable[[], Iterable[Segment]]] = None) -> None:
        self.ctx = ctx
        self.access = access
        self._snap = snapshot if snapshot is not None else (lambda: torch_segments(device))
        self._regs: Dict[Segment, Memory] = {}
        self._sorted: List[Tuple[int, int, Memory]] = []

    def refresh(self) -> Tuple[int, int]:
        """Registers the segments new since the last call, closes those gone;
        returns (registered, closed)."""
        now = {(int(a), int(n), int(d)) for a, n, d in self._snap() if n > 0}
        gone = [k for k in self._regs if k not in now]
        for k in gone:
            self._regs.pop(k).close()
        new = 0
        for k in sorted(now):
            if k in self._regs:
                continue
            a, n, d = k
            obj: Any = (ctypes.c_uint8 * n).from_address(a) if d < 0 else _Range(a, n)
            self._regs[k] = Memory(self.ctx, obj, self.access)
            new += 1
        self._sorted = sorted((a, n, m) for (a, n, _), m in self._regs.items())
        return new, len(gone)

    def locate(self, obj: Any) -> Tuple[Memory, int]:
        """The registered segment holding obj (a tensor, array or (address,
        length) tuple) and obj's offset in it.  ValueError when no segment
        registered at the last refresh() holds it whole."""
        if isinstance(obj, tuple):
            addr, nbytes = int(obj[0]), int(obj[1])
        else:
            from ._buffers import resolve
            r = resolve(obj, writable=False)
            addr, nbytes = r.addr, r.nbytes
            if r.release:
                r.release()
        lo, hi = 0, len(self._sorted)
        while lo < hi:
            mid = (lo + hi) // 2
            if self._sorted[mid][0] <= addr:
                lo = mid + 1
            else:
                hi = mid
        if lo:
            a, n, m = self._sorted[lo - 1]
            if addr + nbytes <= a + n:
                return m, addr - a
        raise _bad("no registered segment holds [0x%x, +%d): allocated after the last refresh()?"
                   % (addr, nbytes))

    @property
    def memories(self) -> List[Memory]:
        """The segments' registrations, by address."""
        return [m for _, _, m in self._sorted]

    def close(self) -> None:
        for m in self._regs.values():
            m.close()
        self._regs.clear()
        self._sorted = []

    def __enter__(self) -> Segments:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
