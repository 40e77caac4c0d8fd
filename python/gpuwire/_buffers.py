# SPDX-License-Identifier: Apache-2.0
"""_buffers.py - turns a Python object into (address, length, device, keeper).

Accepted, in this order: a torch.Tensor (CPU or CUDA), a NumPy ndarray, an
object with __cuda_array_interface__, an object with __dlpack__, and any
object with the buffer protocol.  Each must be contiguous in memory (C or
Fortran order: gpuwire moves bytes).  The keeper is what must stay referenced
for the memory to stay valid (the object itself, a held buffer export or an
unconsumed DLPack capsule).  Neither torch nor numpy is imported here: an
object is recognised through sys.modules, so importing gpuwire stays cheap
and works where neither is installed.
"""
import ctypes
import sys
from typing import Any, Callable, Optional, Sequence, Tuple

from .errors import InvalidArgument


class Resolved:
    __slots__ = ("addr", "nbytes", "device", "keeper", "readonly", "release")

    addr: int
    nbytes: int
    device: str
    keeper: Any
    readonly: bool
    release: Optional[Callable[[], None]]

    def __init__(self, addr: int, nbytes: int, device: str, keeper: Any, readonly: bool = False,
                 release: Optional[Callable[[], None]] = None) -> None:
        self.addr = addr          # int
        self.nbytes = nbytes      # int
        self.device = device      # "cpu", "cuda:N" or another framework's device string
        self.keeper = keeper      # object to keep referenced while the memory is used
        self.readonly = readonly
        self.release = release    # callable that ends a buffer export, or None


def _bad(msg: str) -> InvalidArgument:
    return InvalidArgument(-1, "GW_ERR_INVALID", "invalid argument", msg)


def _describe(obj: object) -> str:
    t = type(obj)
    return "%s.%s" % (t.__module__, t.__qualname__)


# ---- torch ---------------------------------------------------------------------
def _torch_tensor(t: Any) -> Resolved:
    if t.layout is not sys.modules["torch"].strided:
        raise _bad("a %s tensor has no single memory range; use a strided (dense) tensor"
                   % t.layout)
    if not t.is_contiguous():
        raise _bad("tensor of shape %s with strides %s is not contiguous; call .contiguous() "
                   "(a copy) and register that" % (tuple(t.shape), t.stride()))
    dev = t.device
    if dev.type not in ("cpu", "cuda"):
        raise _bad("tensor on device %s: gpuwire moves CPU and CUDA memory only" % dev)
    nbytes = t.numel() * t.element_size()
    addr = t.data_ptr()
    if addr == 0 and nbytes:
        raise _bad("tensor on %s has no storage (data_ptr() is 0)" % dev)
    return Resolved(addr, nbytes, "cpu" if dev.type == "cpu" else "cuda:%d" % dev.index, t)


# ---- numpy ---------------------------------------------------------------------
def _ndarray(a: Any) -> Resolved:
    if not (a.flags.c_contiguous or a.flags.f_contiguous):
        raise _bad("ndarray of shape %s with strides %s is not contiguous; use "
                   "numpy.ascontiguousarray() (a copy)" % (a.shape, a.strides))
    return Resolved(a.ctypes.data, a.nbytes, "cpu", a, readonly=not a.flags.writeable)


# ---- __cuda_array_interface__ ----------------------------------------------------
def _contiguous_strides(shape: Sequence[int], itemsize: int) -> Tuple[int, ...]:
    out, step = [], itemsize
    for n in reversed(shape):
        out.append(step)
        step *= n
    return tuple(reversed(out))


def _strides_ok(shape: Sequence[int], strides: Optional[Sequence[int]], itemsize: int) -> bool:
    if strides is None:
        return True
    want = _contiguous_strides(shape, itemsize)
    return all(s == w or n == 1 for s, w, n in zip(strides, want, shape))


def _cai(obj: Any) -> Resolved:
    cai = obj.__cuda_array_interface__
    shape = tuple(cai["shape"])
    typestr = cai["typestr"]
    itemsize = int(typestr[2:])
    if not _strides_ok(shape, cai.get("strides"), itemsize):
        raise _bad("__cuda_array_interface__ of shape %s with strides %s is not contiguous"
                   % (shape, cai.get("strides")))
    if cai.get("mask") is not None:
        raise _bad("__cuda_array_interface__ with a mask is not supported")
    n = 1
    for d in shape:
        n *= d
    ptr, readonly = cai["data"]
    return Resolved(ptr or 0, n * itemsize, "cuda", obj, readonly=bool(readonly))


# ---- DLPack ----------------------------------------------------------------------
class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_capsule_ptr = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_ptr.restype = ctypes.c_void_p
_capsule_ptr.argtypes = [ctypes.py_object, ctypes.c_char_p]
_DL_NAMES = {1: "cpu", 2: "cuda", 3: "cuda_host", 13: "cuda_managed"}


def _dlpack(obj: Any) -> Resolved:
    cap = obj.__dlpack__()
    # The capsule stays unconsumed (its name stays "dltensor"), so dropping it
    # later calls the producer's deleter: holding it keeps the memory alive.
    p = _capsule_ptr(cap, b"dltensor")
    t = _DLTensor.from_address(p)     # DLManagedTensor starts with its DLTensor
    kind = _DL_NAMES.get(t.device.device_type)
    if kind is None:
        raise _bad("DLPack tensor on device type %d: gpuwire moves CPU and CUDA memory only"
                   % t.device.device_type)
    shape = tuple(t.shape[i] for i in range(t.ndim))
    itemsize = (t.dtype.bits * t.dtype.lanes + 7) // 8
    strides = None
    if t.strides:
        strides = tuple(t.strides[i] * itemsize for i in range(t.ndim))
    if not _strides_ok(shape, strides, itemsize):
        raise _bad("DLPack tensor of shape %s with strides %s (bytes) is not contiguous"
                   % (shape, strides))
    n = 1
    for d in shape:
        n *= d
    dev = "cuda:%d" % t.device.device_id if kind == "cuda" else "cpu"
    return Resolved((t.data or 0) + t.byte_offset, n * itemsize, dev, (obj, cap))


# ---- buffer protocol -----------------------------------------------------------------
class _PyBuffer(ctypes.Structure):
    _fields_ = [("buf", ctypes.c_void_p), ("obj", ctypes.c_void_p), ("len", ctypes.c_ssize_t),
                ("itemsize", ctypes.c_ssize_t), ("readonly", ctypes.c_int), ("ndim", ctypes.c_int),
                ("format", ctypes.c_char_p), ("shape", ctypes.c_void_p),
                ("strides", ctypes.c_void_p), ("suboffsets", ctypes.c_void_p),
                ("internal", ctypes.c_void_p)]


_get_buffer = ctypes.pythonapi.PyObject_GetBuffer
_get_buffer.restype = ctypes.c_int
_get_buffer.argtypes = [ctypes.py_object, ctypes.POINTER(_PyBuffer), ctypes.c_int]
_release_buffer = ctypes.pythonapi.PyBuffer_Release
_release_buffer.restype = None
_release_buffer.argtypes = [ctypes.POINTER(_PyBuffer)]
_PyBUF_WRITABLE = 0x0001
_PyBUF_ANY_CONTIGUOUS = 0x0080 | 0x0010 | 0x0008


def _buffer(obj: Any, writable: bool) -> Resolved:
    view = _PyBuffer()
    flags = _PyBUF_ANY_CONTIGUOUS | (_PyBUF_WRITABLE if writable else 0)
    try:
        _get_buffer(obj, ctypes.byref(view), flags)
    except BufferError as e:
        try:
            mv = memoryview(obj)
        except TypeError:
            mv = None
        if mv is not None and not mv.contiguous:
            raise _bad("%s is not contiguous (shape %s, strides %s)"
                       % (_describe(obj), mv.shape, mv.strides)) from None
        if mv is not None and writable and mv.readonly:
            raise _bad("%s is read-only but the operation or the access flags write into it"
                       % _describe(obj)) from None
        raise _bad("%s: %s" % (_describe(obj), e)) from None
    # The export holds obj (a bytearray cannot be resized meanwhile); released
    # by release() when the region is deregistered or the operation ends.
    released = [False]

    def release() -> None:
        if not released[0]:
            released[0] = True
            _release_buffer(ctypes.byref(view))

    return Resolved(view.buf or 0, view.len, "cpu", (obj, view), readonly=bool(view.readonly),
                    release=release)


def resolve(obj: Any, writable: bool = False) -> Resolved:
    """Address, length and device of obj's memory (see the module docstring)."""
    mods = sys.modules
    torch = mods.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        r = _torch_tensor(obj)
    else:
        np = mods.get("numpy")
        if np is not None and isinstance(obj, np.ndarray):
            r = _ndarray(obj)
        elif hasattr(obj, "__cuda_array_interface__"):
            r = _cai(obj)
        elif hasattr(obj, "__dlpack__") and not isinstance(obj, (bytes, bytearray, memoryview)):
            r = _dlpack(obj)
        else:
            try:
                return _buffer(obj, writable)
            except TypeError:
                raise _bad("cannot find the memory of a %s: give a torch tensor, a NumPy "
                           "array, an object with __cuda_array_interface__ or __dlpack__, or "
                           "one with the buffer protocol" % _describe(obj)) from None
    if writable and r.readonly:
        raise _bad("%s is read-only but the operation or the access flags write into it"
                   % _describe(obj))
    return r
