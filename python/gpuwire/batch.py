# SPDX-License-Identifier: Apache-2.0
"""batch.py - batched and paged transfers (docs/BATCH.md): DescList (a
prepared descriptor list), the index arrays' checks, prepared paged
transfers and list batches, and the batch methods of Endpoint (put_batch,
get_batch, put_pages, get_pages, prepare_put_pages, prepare_get_pages,
prepare_put_batch, prepare_get_batch, wait_count, notify_count).  The accelerator (_gwfast.c) takes the same arguments with the
same checks and messages; these are its definition and its fallback."""
from __future__ import annotations

import ctypes
import functools
import importlib
import sys
from typing import (TYPE_CHECKING, Any, Callable, Iterable, List, NoReturn, Optional, Set, Tuple, Type,
                    TypeVar, Union, cast)

from . import _lib
from ._common import (ACCESS_REMOTE, ACCESS_REMOTE_WRITE, _INPROGRESS, _IDX_FORMATS, _NOTIFY_COUNTED,
                      _NOTIFY_NONE, _NOTIFY_ORDERED, _TIMEOUT, _U32, _bad, _byref, _c_void_p, _close_plans, _ms,
                      _opt, _raise, _what)
from .memory import Memory, RemoteKey
from .request import Request

if TYPE_CHECKING:
    from .context import Context
    from .endpoint import Endpoint

# an index array: a list or tuple of ints, a 1-D NumPy array, CPU tensor or
# array('I') of int32, uint32, int64 or uint64 (read through the buffer protocol)
IndexArray = Any
# a prepared paged transfer: _PagesPlan, or the accelerator's Pages (same interface)
PagesPlan = Any
# a prepared list batch: _BatchPlan, or the accelerator's Batch (same interface)
BatchPlan = Any
_D = TypeVar("_D", bound="DescList")


def _index_source(x: Optional[IndexArray], name: str) -> Optional[IndexArray]:
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
            raise _bad("%s: an index tensor on %s: a prepared transfer copies its index arrays on the "
                       "host: give it in host memory (.cpu()); put_pages/get_pages take int32/uint32 "
                       "arrays on the GPU" % (name, x.device)) from None
        if x.layout is not sys.modules["torch"].strided:
            raise _bad("%s: a %s tensor: give a dense 1-D tensor" % (name, x.layout)) from None
        raise _bad("%s: dtype %s: indices are int32, uint32, int64 or uint64 (%s)"
                   % (name, x.dtype, e)) from None


# the element types an index array in GPU memory may have (its __cuda_array_interface__ typestr)
_DEV_TYPESTR = ("<i4", "<u4", "|i4", "|u4", "=i4", "=u4")
_INDEX_DEVICE = 1


def _device_index(x: Any, name: str) -> Optional[Tuple[int, int, int, Optional[int]]]:
    """(address, entries, GPU ordinal or -1 when the object does not say,
    stream or None) of an index array in GPU memory: a CUDA tensor of int32 or
    uint32 (its stream: torch.cuda.current_stream(its device)) or another
    object with __cuda_array_interface__ (its "stream" where it gives one).
    None for anything else (host memory: read on the host, as a list or buffer)."""
    t = type(x)
    if x is None or t is list or t is tuple or t.__module__ == "numpy":
        return None                     # (host memory; a NumPy array's failed attribute lookup costs ~1 us)
    if t.__module__ == "torch" and t.__name__ in ("Tensor", "Parameter"):
        dev = x.device
        if dev.type != "cuda":
            return None
        torch: Any = sys.modules["torch"]
        if x.dtype not in (torch.int32, getattr(torch, "uint32", torch.int32)):
            raise _bad("%s: a tensor of %s on %s: index arrays in GPU memory are int32 or uint32 "
                       "(.to(torch.int32))" % (name, x.dtype, dev))
        if x.dim() != 1 or not x.is_contiguous():
            raise _bad("%s: a %d-dimensional%s tensor on %s: give a 1-D contiguous one" % (
                name, x.dim(), "" if x.is_contiguous() else " non-contiguous", dev))
        return x.data_ptr(), x.numel(), dev.index, torch.cuda.current_stream(dev).cuda_stream
    try:
        cai = x.__cuda_array_interface__
    except AttributeError:
        return None
    try:
        memoryview(x)
        return None                     # (host memory through the buffer protocol)
    except TypeError:
        pass
    shape = tuple(cai.get("shape", ()))
    typestr = cai.get("typestr")
    if typestr not in _DEV_TYPESTR:
        raise _bad("%s: __cuda_array_interface__ typestr %r: index arrays in GPU memory are int32 or uint32"
                   % (name, typestr))
    strides = cai.get("strides")
    if len(shape) != 1 or (strides is not None and tuple(strides) != (4,) and shape[0] > 1):
        raise _bad("%s: __cuda_array_interface__ of shape %s with strides %s: give a 1-D contiguous array"
                   % (name, shape, strides))
    stream = cai.get("stream")
    return int(cai["data"][0] or 0), int(shape[0]), -1, int(stream) if isinstance(stream, int) and stream else None


def _index_array(x: Optional[IndexArray], name: str) -> Tuple[Any, int]:
    """(ctypes uint32 array or None, length) for the ctypes path: the checks
    and messages of the accelerator's idx_get (python/gpuwire/_gwfast.c)."""
    if x is None:
        return None, -1
    if type(x) is list or type(x) is tuple:
        vals = x
        for i, v in enumerate(vals):
            if not isinstance(v, int):
                raise _bad("%s[%d] is a %s, not an int" % (name, i, type(v).__name__))
            if v < 0 or v > _U32:
                _item_bad(name, i, v)
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
                       % (name, (mv.strides or (0,))[0], mv.itemsize))
        np: Any = sys.modules.get("numpy")
        a: Any = None
        if np is not None and mv.shape and mv.shape[0] > 24:    # (fewer: the loop below is cheaper)
            try:
                a = np.asarray(mv)
            except (TypeError, ValueError):     # (formats NumPy does not read: 'n', 'N')
                pass
        if a is not None:
            # vectorised: the lowest (signed) and highest (8-byte) item, a search for the bad item
            # only when one is out of range, then one conversion (a copy: a prepared plan keeps its own)
            signed, wide = a.dtype.kind == "i", a.itemsize == 8
            if (signed and a.min() < 0) or (wide and a.max() > _U32):
                i = int(np.flatnonzero((a < 0) | (a > _U32) if wide else a < 0)[0])
                _item_bad(name, i, int(a[i]))
            u = a.astype(np.uint32)
            return (ctypes.c_uint32 * len(u)).from_buffer(u), len(u)
        vals = mv.tolist()
        for i, v in enumerate(vals):
            if v < 0 or v > _U32:
                _item_bad(name, i, v)
    return (ctypes.c_uint32 * len(vals))(*vals), len(vals)


def _item_bad(name: str, i: int, v: int) -> NoReturn:
    """An index outside 0 .. 2^32-1, in the library's words for the same
    refusal (gw_xfer_pages: rpages[517] = 4294967296 is above 4294967295)."""
    raise _bad("%s[%d] = %d is %s" % (name, i, v, "negative" if v < 0 else "above 4294967295"))


def _column(x: Any, name: str, wide: bool, keep: List[Any]) -> Tuple[int, int]:
    """(address, length) of a table column: 64-bit unsigned (wide) or 32-bit
    unsigned items.  A contiguous 1-D NumPy array or CPU tensor of that size
    (signed or not: a negative value reads as a huge one, which the table's
    bounds check refuses naming the entry) is read in place; other integer
    arrays are converted once by NumPy (checked for negative and, for
    32-bit columns, too large values first); lists through array.array."""
    x = _index_source(x, name)
    code = "Q" if wide else "I"
    if type(x) is list or type(x) is tuple:
        import array
        try:
            arr = array.array(code, x)
        except (OverflowError, TypeError) as e:
            raise _bad("%s: %s (items are ints from 0 to %s)" % (name, e, "2**64-1" if wide else "2**32-1"))
        keep.append(arr)
        return arr.buffer_info()[0], len(arr)
    try:
        mv = memoryview(x)
    except TypeError:
        raise _bad("%s: a %s is not a column: give a 1-D NumPy array, CPU tensor or list of ints"
                   % (name, type(x).__name__)) from None
    fmt = mv.format.lstrip("@=<>!")
    size = 8 if wide else 4
    if mv.ndim != 1:
        raise _bad("%s: %d-dimensional: give a 1-D array" % (name, mv.ndim))
    if fmt in _IDX_FORMATS and mv.itemsize == size and mv.c_contiguous and mv.format[:1] not in (">", "!"):
        npm: Any = sys.modules.get("numpy")
        if npm is not None and isinstance(x, npm.ndarray):
            keep.append(x)
            return x.ctypes.data, len(x)
        c = ctypes.c_char.from_buffer(mv) if not mv.readonly else None
        if c is not None:
            keep.append((mv, c))
            return ctypes.addressof(c), mv.shape[0] if mv.shape else 0
    try:
        np: Any = importlib.import_module("numpy")
    except ImportError:
        raise _bad("%s: format '%s' (%d bytes per item): without NumPy give %s items"
                   % (name, mv.format, mv.itemsize, "uint64" if wide else "uint32")) from None
    a: Any = np.asarray(x)
    if a.dtype.kind not in "iu":
        raise _bad("%s: dtype %s: give integers" % (name, a.dtype))
    if a.size and (a.min() < 0 or (not wide and a.max() > 0xFFFFFFFF)):
        bad = int(np.flatnonzero((a < 0) | (a > (2**64 - 1 if wide else 0xFFFFFFFF)))[0])
        raise _bad("%s: item %d is %d: items are 0 .. %s" % (name, bad, int(a[bad]),
                                                            "2**64-1" if wide else "2**32-1"))
    a = np.ascontiguousarray(a, dtype=np.uint64 if wide else np.uint32)
    keep.append(a)
    return a.ctypes.data, len(a)


def _index_count(l: Tuple[Any, int], r: Tuple[Any, int], ln: str, rn: str,
                 count: Optional[int]) -> int:
    """The accelerator's idx_count: the number of entries of a batch."""
    if count is not None and count < 0:
        raise _bad("count: %d is negative" % count)
    if l[0] is not None and r[0] is not None and l[1] != r[1]:
        raise _bad("%s has %d entries but %s has %d: they pair entry by entry" % (ln, l[1], rn, r[1]))
    have = l[1] if l[0] is not None else r[1] if r[0] is not None else -1
    if have >= 0 and count is not None and count != have:
        raise _bad("count %d differs from the %d entries of %s"
                   % (count, have, ln if l[0] is not None else rn))
    if have >= 0:
        return have
    if count is None:
        raise _bad("count: give it when neither %s nor %s is given" % (ln, rn))
    return count


def _notify_opts(notify: Optional[int], counted: Optional[int], op: int) -> Tuple[int, int]:
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



class _Plan:
    """What the ctypes plans share: count, the converted index arrays, the
    notification options, the context (None once closed) and the handles
    whose closing closes the plan (_uses)."""

    def __init__(self, ep: Endpoint, li: Tuple[Any, int], ri: Tuple[Any, int], names: Tuple[str, str],
                 count: Optional[int], nk: int, val: int, handles: Tuple[Optional[int], ...],
                 fail: Callable[[int], None]) -> None:
        self.count = _index_count(li, ri, names[0], names[1], count)
        self._li, self._ri = li[0], ri[0]
        self._o = _lib.XferOpts(ctypes.sizeof(_lib.XferOpts), nk, val)
        self._handles = handles
        self._ctx: Optional[Context] = ep.ctx
        self._fail = fail

    @property
    def closed(self) -> bool:
        return self._ctx is None

    def _uses(self, h: int) -> bool:
        return self._ctx is not None and h in self._handles

    def close(self) -> None:
        self._ctx = None


class _PagesPlan(_Plan):
    """A prepared paged transfer through ctypes (the accelerator's Pages when
    it is not built): the same interface, post(track=True) / close() / count /
    nbytes / closed."""

    def __init__(self, ep: Endpoint, op: int, mh: int, lbase: int, lpages: Optional[IndexArray], kh: int,
                 raddr: int, rpages: Optional[IndexArray], count: Optional[int], page: int, nk: int,
                 val: int, fail: Callable[[int], None]) -> None:
        super().__init__(ep, _index_array(lpages, "lpages"), _index_array(rpages, "rpages"),
                         ("lpages", "rpages"), count, nk, val, (ep._h, mh, kh), fail)
        self.nbytes = self.count * page
        self._args = (ep._h, op, mh, lbase, kh, raddr, page, nk)

    def post(self, track: bool = True) -> Optional[Request]:
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


class _BatchPlan(_Plan):
    """A prepared list batch through ctypes (the accelerator's Batch when it
    is not built): post(track=True) / close() / count / nbytes (None) /
    closed.  The index arrays become a prepared selection (gw_pages_create)
    posted by gw_xfer_batch_prepared where the library has them, else each
    post calls gw_xfer_batch with the converted arrays."""

    def __init__(self, ep: Endpoint, op: int, lh: int, lidx: Optional[IndexArray], rh: int,
                 ridx: Optional[IndexArray], count: Optional[int], nk: int, val: int,
                 fail: Callable[[int], None]) -> None:
        super().__init__(ep, _index_array(lidx, "lidx"), _index_array(ridx, "ridx"), ("lidx", "ridx"),
                         count, nk, val, (ep._h, lh, rh), fail)
        self.nbytes = None
        self._args = (ep._h, op, lh, rh, nk)
        self._sel: Optional[int] = None
        L = _lib.lib
        if hasattr(L, "gw_pages_create") and hasattr(L, "gw_xfer_batch_prepared"):
            h = _c_void_p()
            if _opt("gw_pages_create")(ep.ctx._h, self._li, self._ri, self.count, _byref(h)) == 0:
                self._sel = h.value

    def close(self) -> None:
        if self._sel is not None and self._ctx is not None and self._ctx._h is not None:
            _opt("gw_pages_destroy")(self._sel)  # (freed when a transfer still using it ends)
        self._sel = None
        self._ctx = None

    def post(self, track: bool = True) -> Optional[Request]:
        if self._ctx is None:
            raise ValueError("the prepared batch is closed (or its endpoint or a list is)")
        eh, op, lh, rh, nk = self._args
        req = _c_void_p()
        o, rq = _byref(self._o) if nk else None, _byref(req) if track else None
        if self._sel is not None:
            st = _opt("gw_xfer_batch_prepared")(eh, op, lh, rh, self._sel, o, rq)
        else:
            st = _opt("gw_xfer_batch")(eh, op, lh, self._li, rh, self._ri, self.count, o, rq)
        if st != 0:
            self._fail(st)
        return Request(self._ctx, req.value, None, None) if track else None


class DescList:
    """A prepared descriptor list (gw_dlist_t): local (ctx.dlist_local) or
    remote (ep.dlist_remote).  Every entry is checked when it is made (the
    error names the entry).  Lives until close() or its context's (a local
    list keeps its regions from closing; a remote one its endpoint)."""

    def __init__(self, owner: Union[Context, Endpoint], h: Optional[int], remote: bool,
                 refs: Optional[List[Any]], n: int) -> None:
        self.owner = owner          # Context (local list) or Endpoint (remote list)
        self.ctx: Context = owner.ctx if remote else owner  # type: ignore[union-attr,assignment]
        self._h: Optional[int] = h
        self.remote = remote
        self._refs = refs           # the Memory / RemoteKey objects named
        self.n = n
        self.ctx._children.add(self)
        if remote:
            owner._lists.add(self)  # type: ignore[union-attr]

    @staticmethod
    def _descs(entries: List[Any], struct: Any, want: type) -> Any:
        """A ctypes array of struct from (want-object, offset, length) entries."""
        arr = (struct * max(1, len(entries)))()
        for i, e in enumerate(entries):
            try:
                obj, off, ln = e
            except (TypeError, ValueError):
                raise _bad("entry %d: give (%s, offset, length), not %r"
                           % (i, want.__name__, e)) from None
            h = getattr(obj, "_h", None)
            if type(obj) is not want or h is None:
                raise _bad("entry %d: %s, not an open %s" % (i, _what(obj), want.__name__))
            if off < 0 or ln < 0:
                raise _bad("entry %d: offset %d / length %d is negative" % (i, off, ln))
            arr[i] = struct(h, off, ln)
        return arr

    @classmethod
    def _local(cls: Type[_D], ctx: Context, entries: Iterable[Tuple[Memory, int, int]]) -> _D:
        entries = list(entries)
        arr = cls._descs(entries, _lib.LocalDesc, Memory)
        h = _c_void_p()
        st = _opt("gw_dlist_local")(ctx._handle(), arr, len(entries), _byref(h))
        if st != 0:
            ctx._check(st, "dlist_local")
        return cls(ctx, h.value, False, [e[0] for e in entries], len(entries))

    @classmethod
    def _remote(cls: Type[_D], ep: Endpoint, entries: Iterable[Tuple[RemoteKey, int, int]],
                access: int) -> _D:
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

    @classmethod
    def _table(cls: Type[_D], owner: Union[Context, Endpoint], remote: bool, objs: Any, count: Optional[int],
               length: int, offsets: Any, lengths: Any, region_index: Any, per_region: int,
               access: int) -> _D:
        """gw_dlist_local_table / gw_dlist_remote_table: the columns are read
        where they lie (NumPy arrays and CPU tensors of the right dtype) or
        converted once, as whole arrays; no Python loop per entry."""
        want = RemoteKey if remote else Memory
        if isinstance(objs, want):
            objs = [objs]
        objs = list(objs)
        if not objs:
            raise _bad("give at least one %s" % want.__name__)
        hs = (ctypes.c_void_p * len(objs))()
        for i, o in enumerate(objs):
            h = getattr(o, "_h", None)
            if type(o) is not want or h is None:
                raise _bad("%s %d: %s, not an open %s" % ("keys" if remote else "regions", i, _what(o),
                                                          want.__name__))
            hs[i] = h
        if length < 0 or per_region < 0:
            raise _bad("length %d / per_region %d is negative" % (length, per_region))
        keep: List[Any] = []
        n = -1
        ptrs: List[Optional[int]] = []
        for name, col, wide in (("offsets", offsets, True), ("lengths", lengths, True),
                                ("region_index", region_index, False)):
            if col is None:
                ptrs.append(None)
                continue
            p, m = _column(col, name, wide, keep)
            if n >= 0 and m != n:
                raise _bad("%s has %d entries, the columns before it %d" % (name, m, n))
            n = m
            ptrs.append(p)
        if n < 0:
            if count is None:
                raise _bad("count: give it when no column (offsets, lengths, region_index) is given")
            n = count
        elif count is not None and count != n:
            raise _bad("count %d differs from the columns' %d entries" % (count, n))
        if lengths is None and not length:
            raise _bad("length: the length of every entry (or a lengths column)")
        t = _lib.DlistTable(ctypes.sizeof(_lib.DlistTable), n, ptrs[2], ptrs[0], ptrs[1], length, per_region)
        h = _c_void_p()
        if remote:
            if access & ~ACCESS_REMOTE or not access:
                raise _bad("access 0x%x: ACCESS_REMOTE_WRITE (puts), ACCESS_REMOTE_READ (gets) or "
                           "both" % access)
            st = _opt("gw_dlist_remote_table")(owner._handle(), hs, len(objs), _byref(t), access, _byref(h))
            if st != 0:
                cast("Endpoint", owner).ctx._check(st, "dlist_remote_table")
            return cls(owner, h.value, True, [], n)
        st = _opt("gw_dlist_local_table")(owner._handle(), hs, len(objs), _byref(t), _byref(h))
        if st != 0:
            owner._check(st, "dlist_local_table")  # type: ignore[union-attr]
        return cls(owner, h.value, False, objs, n)

    def __len__(self) -> int:
        return self.n

    def _handle(self) -> int:
        if self._h is None:
            raise _bad("the descriptor list is closed")
        return self._h

    def close(self) -> None:
        """Destroys the list (GW_ERR_BUSY while a transfer uses it); the
        prepared batches naming it are closed."""
        if self._h is None:
            return
        _close_plans(self.ctx, self._h)
        if self.ctx._h is not None:
            st = _opt("gw_dlist_destroy")(self._h)
            if st != 0:
                self.ctx._check(st, "close a descriptor list")
        self._h = None
        self._refs = None
        self.ctx._children.discard(self)
        if self.remote:
            self.owner._lists.discard(self)  # type: ignore[union-attr]

    def __enter__(self: _D) -> _D:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _BatchOps:
    """The batched and paged transfers of an Endpoint (mixed into it)."""
    ctx: Context
    _h: Optional[int]
    _L: Any
    _lists: Set[DescList]

    def _handle(self) -> int:
        raise NotImplementedError

    # -- batched and paged transfers (docs/BATCH.md) --------------------------------------------
    def dlist_remote(self, entries: Iterable[Tuple[RemoteKey, int, int]],
                     access: int = ACCESS_REMOTE_WRITE) -> DescList:
        """A prepared remote descriptor list (gw_dlist_remote) of (RemoteKey,
        offset, length) entries on this endpoint; access: what the transfers
        will do (ACCESS_REMOTE_WRITE for puts, ACCESS_REMOTE_READ for gets)."""
        return DescList._remote(cast("Endpoint", self), entries, access)

    def dlist_remote_table(self, keys: Any, count: Optional[int] = None, length: int = 0,
                           offsets: Any = None, lengths: Any = None, region_index: Any = None,
                           per_region: int = 0, access: int = ACCESS_REMOTE_WRITE) -> DescList:
        """A prepared remote list from columns (gw_dlist_remote_table): entry i
        lies in keys[region_index[i]] at offsets[i], lengths[i] bytes long.
        Columns: 1-D NumPy arrays, CPU tensors or lists (read without a Python
        loop per entry); any may be None (region_index: all in keys[0];
        offsets: i * length; lengths: every entry `length` bytes).  With no
        columns at all the list is computed: entry i is block i % per_region
        of keys[i // per_region] (per_region 0: all in keys[0]), count
        entries, no memory per entry."""
        return DescList._table(cast("Endpoint", self), True, keys, count, length, offsets, lengths,
                               region_index, per_region, access)

    def _batch_args(self, op: int, local: DescList, remote: DescList, lidx: Optional[IndexArray],
                    ridx: Optional[IndexArray], count: Optional[int], notify: Optional[int],
                    counted: Optional[int]) -> Tuple[int, int, int, int, int, Any, Any, Optional[int]]:
        """The checks of a list batch's arguments: (nk, value, endpoint, local
        and remote list handles, lidx, ridx, count)."""
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
        return nk, val, eh, lh, rh, _index_source(lidx, "lidx"), _index_source(ridx, "ridx"), count

    def _batch(self, op: int, local: DescList, remote: DescList, lidx: Optional[IndexArray],
               ridx: Optional[IndexArray], count: Optional[int], notify: Optional[int],
               counted: Optional[int], track: bool) -> Optional[Request]:
        nk, val, eh, lh, rh, lidx, ridx, count = self._batch_args(op, local, remote, lidx, ridx, count,
                                                                   notify, counted)
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
        self._batch_failed(r, op)

    def _batch_failed(self, st: int, op: int = 0) -> NoReturn:
        """Raises for a refused list batch with the library's message (naming
        the entry, or the item of an index array, at fault)."""
        self.ctx._check(st, "%s_batch" % ("put", "get")[op])

    def put_batch(self, local: DescList, remote: DescList, lidx: Optional[IndexArray] = None,
                  ridx: Optional[IndexArray] = None, count: Optional[int] = None,
                  notify: Optional[int] = None, counted: Optional[int] = None,
                  track: bool = True) -> Optional[Request]:
        """Writes local entry lidx[i] into remote entry ridx[i] for every i, as
        one request (lidx/ridx: list, NumPy array or tensor of indices; None:
        0..count-1).  notify=value: an ordered notification after the batch
        (read by wait_notify); counted=id: one counted notification of id
        (wait_count).  With the accelerator built, the common case runs as a C
        method (endpoint._install_pages); this is the general path and its
        fallback."""
        return self._batch(0, local, remote, lidx, ridx, count, notify, counted, track)

    def get_batch(self, local: DescList, remote: DescList, lidx: Optional[IndexArray] = None,
                  ridx: Optional[IndexArray] = None, count: Optional[int] = None,
                  track: bool = True) -> Optional[Request]:
        """Reads remote entry ridx[i] into local entry lidx[i] for every i."""
        return self._batch(1, local, remote, lidx, ridx, count, None, None, track)

    def _pages_handles(self, local: Memory, rkey: RemoteKey, page_size: int, local_offset: int,
                       offset: int) -> Tuple[int, int, int]:
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

    def _pages(self, op: int, local: Memory, rkey: RemoteKey, page_size: int, lpages: Optional[IndexArray],
               rpages: Optional[IndexArray], count: Optional[int], local_offset: int, offset: int,
               notify: Optional[int], counted: Optional[int], track: bool) -> Optional[Request]:
        mh, kh, eh = self._pages_handles(local, rkey, page_size, local_offset, offset)
        nk, val = (0, 0) if notify is None and counted is None else \
            _notify_opts(notify, counted, op)
        dl, dr = _device_index(lpages, "lpages"), _device_index(rpages, "rpages")
        if dl is not None or dr is not None:
            return self._pages_dev(op, local, rkey, page_size, lpages, rpages, dl, dr, count, local_offset,
                                   offset, nk, val, track)
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
                count = len(cast(Any, lpages if lpages is not None else rpages))
            return Request(self.ctx, r, None, count * page_size)
        if r == 0:
            return None
        self._pages_failed(r, op)

    def _pages_dev(self, op: int, local: Memory, rkey: RemoteKey, page_size: int, lpages: Any, rpages: Any,
                   dl: Optional[Tuple[int, int, int, Optional[int]]],
                   dr: Optional[Tuple[int, int, int, Optional[int]]], count: Optional[int], local_offset: int,
                   offset: int, nk: int, val: int, track: bool) -> Optional[Request]:
        """put_pages/get_pages with index arrays in GPU memory (gw_xfer_pages
        with GW_INDEX_DEVICE): checked here, never read on the host."""
        for d, x, nm, other in ((dl, lpages, "lpages", "rpages"), (dr, rpages, "rpages", "lpages")):
            if d is None and x is not None:
                raise _bad("%s is in host memory and %s in GPU memory: give both on the GPU (or None for "
                           "0..count-1)" % (nm, other))
        gpus = sorted({d[2] for d in (dl, dr) if d is not None and d[2] >= 0})
        if len(gpus) > 1:
            raise _bad("lpages is on cuda:%d and rpages on cuda:%d: both go on the local region's GPU"
                       % (cast(Any, dl)[2], cast(Any, dr)[2]))
        where = str(getattr(getattr(local, "_r", None), "device", ""))
        if gpus and where.startswith("cuda:") and int(where[5:]) != gpus[0]:
            raise _bad("the index arrays are on cuda:%d, the local region on %s: give them on the local "
                       "region's GPU" % (gpus[0], where))
        li = (dl[0], dl[1]) if dl is not None else (None, -1)
        ri = (dr[0], dr[1]) if dr is not None else (None, -1)
        n = _index_count(li, ri, "lpages", "rpages", count)
        stream = (dl or dr or (0, 0, 0, None))[3]
        la, ra = local.addr + local_offset, rkey.addr + offset
        F = _lib.fast
        try:
            if F is not None and F.batch_ok and hasattr(F, "pages_dev"):
                r = F.pages_dev(self._h, op, local._h, la, li[0] or 0, rkey._h, ra, ri[0] or 0, n, page_size,
                                nk, val, stream or 0, track)
            else:
                o = _lib.XferOpts3(ctypes.sizeof(_lib.XferOpts3), nk, val, 0, _INDEX_DEVICE, stream)
                req = _c_void_p()
                r = _opt("gw_xfer_pages")(self._h, op, local._h, la, li[0], rkey._h, ra, ri[0], n, page_size,
                                          ctypes.cast(ctypes.pointer(o), ctypes.POINTER(_lib.XferOpts)),
                                          _byref(req) if track else None)
                if r == 0:
                    r = req.value or 0
        except OverflowError as e:
            raise _bad("an argument is out of range: %s" % e) from None
        if r > 0:
            # (the arrays stay referenced until the transfer completes: the GPU reads them)
            return Request(self.ctx, r, (lpages, rpages), n * page_size)
        if r == 0:
            return None
        self._pages_failed(r, op)

    def _pages_failed(self, st: int, op: int = 0) -> NoReturn:
        """Raises for a refused paged post, naming the index array at fault."""
        import re
        detail = self._L.gw_last_error(self.ctx._h).decode(errors="replace")
        m = re.search(r"entry (\d+): (local|remote) page (\d+)", detail)
        if m:
            detail = "%s[%s] = %s is out of range: %s" % (
                "lpages" if m.group(2) == "local" else "rpages", m.group(1), m.group(3), detail)
        _raise(st, "%s_pages: %s" % (("put", "get")[op], detail))

    def put_pages(self, local: Memory, rkey: RemoteKey, page_size: int, lpages: Optional[IndexArray] = None,
                  rpages: Optional[IndexArray] = None, count: Optional[int] = None, local_offset: int = 0,
                  offset: int = 0, notify: Optional[int] = None, counted: Optional[int] = None,
                  track: bool = True) -> Optional[Request]:
        """The paged put (KV caches): page i is the page_size bytes at
        local.addr + local_offset + lpages[i] * page_size, written to
        rkey.addr + offset + rpages[i] * page_size (lpages/rpages: list, NumPy
        array or tensor; None: 0..count-1).  notify / counted as put_batch.
        With the accelerator built, the common case runs as a C method
        (_install_pages below); this is the general path and its fallback."""
        return self._pages(0, local, rkey, page_size, lpages, rpages, count, local_offset, offset,
                           notify, counted, track)

    def get_pages(self, local: Memory, rkey: RemoteKey, page_size: int, lpages: Optional[IndexArray] = None,
                  rpages: Optional[IndexArray] = None, count: Optional[int] = None, local_offset: int = 0,
                  offset: int = 0, track: bool = True) -> Optional[Request]:
        """The paged get: remote page rpages[i] into local page lpages[i]."""
        return self._pages(1, local, rkey, page_size, lpages, rpages, count, local_offset, offset,
                           None, None, track)

    def _prepare_pages(self, op: int, local: Memory, rkey: RemoteKey, page_size: int,
                       lpages: Optional[IndexArray], rpages: Optional[IndexArray], count: Optional[int],
                       local_offset: int, offset: int, notify: Optional[int],
                       counted: Optional[int]) -> PagesPlan:
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
                plan = _PagesPlan(cast("Endpoint", self), op, mh, local.addr + local_offset, lpages, kh,
                                  rkey.addr + offset, rpages, count, page_size, nk, val, fail)
        except OverflowError as e:
            raise _bad("an argument is out of range: %s" % e) from None
        return self.ctx._keep_plan(plan)

    def prepare_put_pages(self, local: Memory, rkey: RemoteKey, page_size: int,
                          lpages: Optional[IndexArray] = None, rpages: Optional[IndexArray] = None,
                          count: Optional[int] = None, local_offset: int = 0, offset: int = 0,
                          notify: Optional[int] = None, counted: Optional[int] = None) -> PagesPlan:
        """put_pages() prepared once, posted many times: checks the arguments
        and copies the index arrays now (later changes to them do not reach
        the plan), and returns a plan whose post(track=True) makes the same
        gw_xfer_pages call with nothing left to convert (the Request, or None
        untracked).  With the accelerator the arrays are a prepared page
        list (gw_pages_create) and each post is gw_xfer_pages_prepared: no
        index read or copied per post, and over intra between GPUs the page
        kernel reads them from the local GPU's memory.  For a transfer
        repeated with the same pages (each layer of a KV cache into the same
        slots).  close() the plan when done (a transfer still running ends
        normally); it is closed with its endpoint, region, key or context."""
        return self._prepare_pages(0, local, rkey, page_size, lpages, rpages, count,
                                   local_offset, offset, notify, counted)

    def prepare_get_pages(self, local: Memory, rkey: RemoteKey, page_size: int,
                          lpages: Optional[IndexArray] = None, rpages: Optional[IndexArray] = None,
                          count: Optional[int] = None, local_offset: int = 0,
                          offset: int = 0) -> PagesPlan:
        """get_pages() prepared once (see prepare_put_pages)."""
        return self._prepare_pages(1, local, rkey, page_size, lpages, rpages, count,
                                   local_offset, offset, None, None)

    def _prepare_batch(self, op: int, local: DescList, remote: DescList, lidx: Optional[IndexArray],
                       ridx: Optional[IndexArray], count: Optional[int], notify: Optional[int],
                       counted: Optional[int]) -> BatchPlan:
        nk, val, eh, lh, rh, lidx, ridx, count = self._batch_args(op, local, remote, lidx, ridx, count,
                                                                   notify, counted)

        def fail(st: int) -> NoReturn:
            self.ctx._check(st, "%s_batch" % ("put", "get")[op])
        F = _lib.fast
        try:
            if F is not None and F.batch_ok and hasattr(F, "Batch"):
                try:
                    plan = F.Batch(eh, op, lh, lidx, rh, ridx, count, nk, val, Request, self.ctx, fail)
                except ValueError as e:
                    raise _bad(str(e)) from None
            else:
                plan = _BatchPlan(cast("Endpoint", self), op, lh, lidx, rh, ridx, count, nk, val, fail)
        except OverflowError as e:
            raise _bad("an argument is out of range: %s" % e) from None
        return self.ctx._keep_plan(plan)

    def prepare_put_batch(self, local: DescList, remote: DescList, lidx: Optional[IndexArray] = None,
                          ridx: Optional[IndexArray] = None, count: Optional[int] = None,
                          notify: Optional[int] = None, counted: Optional[int] = None) -> BatchPlan:
        """put_batch() prepared once, posted many times: checks the arguments
        and copies the index arrays now (later changes to them do not reach
        the plan), and returns a plan whose post(track=True) makes the batch
        (the Request, or None untracked).  The arrays are a prepared
        selection (gw_pages_create) and each post is gw_xfer_batch_prepared:
        the indices are checked from their lowest and highest, none is read
        or copied per post, and over intra between GPUs the table kernel
        reads them from the local GPU's memory.  For a batch repeated with
        the same entries (each layer of a KV cache into the same blocks).
        What the library refuses (an index outside a list) raises at the
        post, naming the entry.  close() the plan when done (a transfer still
        running ends normally); it is closed with its endpoint, either list
        or its context."""
        return self._prepare_batch(0, local, remote, lidx, ridx, count, notify, counted)

    def prepare_get_batch(self, local: DescList, remote: DescList, lidx: Optional[IndexArray] = None,
                          ridx: Optional[IndexArray] = None, count: Optional[int] = None) -> BatchPlan:
        """get_batch() prepared once (see prepare_put_batch)."""
        return self._prepare_batch(1, local, remote, lidx, ridx, count, None, None)

    def wait_count(self, id: int, count: int = 1, timeout: Optional[float] = None) -> None:
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

    def notify_count(self, id: int) -> int:
        """How many counted notifications of `id` arrived and were not taken."""
        v = ctypes.c_uint64()
        st = _opt("gw_notify_count")(self._handle(), id, _byref(v))
        if st != 0:
            self.ctx._check(st, "notify_count(%d)" % id)
        return v.value
