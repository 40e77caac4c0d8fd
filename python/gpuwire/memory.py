# SPDX-License-Identifier: Apache-2.0
"""memory.py - Memory (a registered or gpuwire-allocated region, its packed
key and its views) and RemoteKey (a peer's region unpacked on an endpoint)."""
from __future__ import annotations

import ctypes
import sys
import importlib
from typing import TYPE_CHECKING, Any, Dict, Optional, Type, TypeVar

from . import _lib
from ._buffers import Resolved, resolve
from ._common import (ACCESS_REMOTE, ACCESS_REMOTE_WRITE, _BUSY, _bad, _byref, _c_void_p,
                      _close_plans, _opt, _raise)

if TYPE_CHECKING:
    from .context import Context
    from .endpoint import Endpoint

_M = TypeVar("_M", bound="Memory")


class Memory:
    """A registered region; keeps the registered object alive until close()."""

    ctx: Context
    obj: Any
    _r: Optional[Resolved]
    _own: bool
    addr: int
    nbytes: int
    access: int
    _h: Optional[int]

    def __init__(self, ctx: Context, obj: Any, access: int = ACCESS_REMOTE) -> None:
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
    def _alloc(cls: Type[_M], ctx: Context, nbytes: int, access: int) -> _M:
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
        self.obj = (ctypes.c_uint8 * nbytes).from_address(a.value or 0)
        self._r = None
        self._own = True
        self.addr = a.value or 0
        self.nbytes = nbytes
        self.access = access
        self._h = h.value
        ctx._children.add(self)
        return self

    def _views(self) -> int:
        """How many views (memoryviews, arrays, tensors) of an allocated region live."""
        if not getattr(self, "_own", False) or self.obj is None:
            return 0
        return sys.getrefcount(self.obj) - 2      # self.obj and getrefcount's argument

    def memoryview(self) -> memoryview:
        """A writable memoryview of the region's bytes (host memory), no copy."""
        if self._h is None:
            raise _bad("the memory region is closed (deregistered)")
        try:
            return memoryview(self.obj).cast("B")
        except TypeError:
            raise _bad("a region registered from a %s has no memoryview: use the object "
                       "itself" % type(self.obj).__name__) from None

    def numpy(self, dtype: Any = "uint8", shape: Any = None) -> Any:
        """The region as a NumPy array (host memory), no copy."""
        np: Any = importlib.import_module("numpy")
        a = np.frombuffer(self.memoryview(), dtype=dtype)
        return a if shape is None else a.reshape(shape)

    def tensor(self, dtype: Any = None, shape: Any = None) -> Any:
        """The region as a CPU torch tensor, no copy (dtype default uint8)."""
        torch: Any = importlib.import_module("torch")
        if self._h is None:
            raise _bad("the memory region is closed (deregistered)")
        t = torch.frombuffer(self.obj if getattr(self, "_own", False) else self.memoryview(),
                             dtype=dtype or torch.uint8)
        return t if shape is None else t.view(shape)

    def publish(self, name: str) -> None:
        """Publishes the region under `name` in the context's agent table."""
        st = _opt("gw_mem_publish")(self._handle(), name.encode())
        if st != 0:
            self.ctx._check(st, "publish(%r)" % name)

    def close(self) -> None:
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

    def __enter__(self: _M) -> _M:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        return self.nbytes

    def _handle(self) -> int:
        if self._h is None:
            raise _bad("the memory region is closed (deregistered)")
        return self._h

    def info(self) -> Dict[str, Any]:
        mi = _lib.MemInfo()
        mi.size = ctypes.sizeof(mi)
        st = self.ctx._L.gw_mem_query(self._handle(), _byref(mi))
        if st != 0:
            self.ctx._check(st)
        return {"addr": mi.addr or 0, "len": mi.len, "access": mi.access,
                "type": "cuda" if mi.type == 1 else "host", "cuda_device": mi.cuda_device,
                "pci_bus_id": mi.pci_bus_id.decode(), "path": mi.path.decode(errors="replace")}

    def pack(self) -> bytes:
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


class RemoteKey:
    """A peer's region, unpacked on one endpoint: .addr and .nbytes of the range."""

    def __init__(self, ep: Endpoint, h: Optional[int]) -> None:
        self.ep = ep
        self._h: Optional[int]
        self._h = h
        a, n = ctypes.c_uint64(), ctypes.c_size_t()
        ep.ctx._L.gw_rkey_range(h, _byref(a), _byref(n))
        self.addr = a.value
        self.nbytes = n.value

    def close(self) -> None:
        if self._h is not None:
            _close_plans(self.ep.ctx, self._h)
        if self._h is not None and self.ep._h is not None:
            self.ep.ctx._L.gw_rkey_destroy(self._h)
        self._h = None
        self.ep._keys.discard(self)

    def __len__(self) -> int:
        return self.nbytes
