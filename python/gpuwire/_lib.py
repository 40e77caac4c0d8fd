# SPDX-License-Identifier: Apache-2.0
"""_lib.py - finds libgpuwire and declares the C API to ctypes.

Why ctypes for the bulk of the binding: it runs with any CPython the user
has (Debian's 3.11, the GPU machines' 3.12 venv), needs no build step beyond
the C library and no Python headers, and most calls (registration,
connection, queries) are far from any hot loop.

Measured, ctypes costs about 1.3 us per put call on an H100 host, a C
extension about 0.13 us; so the hot path (put, get, put_notify, waiting on
their requests) goes through an optional C accelerator, _gwfast.abi3.so,
built by CMake (python/CMakeLists.txt) when Python's headers exist, and
found beside this file (a wheel, make install) or next to the library
(BUILD/python/).  Without it every call uses ctypes and works the same, only
slower; loading the package then warns once (RuntimeWarning) saying why.

The library is looked for, in order: the path given to gpuwire.load_library(),
the copy inside this package (a wheel from pip install .), the installed
library directory (make install writes its path to _where.py), libgpuwire.so.0
through the dynamic loader (LD_LIBRARY_PATH, ldconfig), then a build tree
next to this package (../../build*/libgpuwire.so.0).
"""
import ctypes
import glob
import importlib
import os
import warnings
from types import ModuleType
from typing import Any, Callable, Iterator, List, Optional

c_void_p = ctypes.c_void_p
c_size_t = ctypes.c_size_t
c_uint64 = ctypes.c_uint64
c_int = ctypes.c_int
c_uint = ctypes.c_uint
c_char_p = ctypes.c_char_p
POINTER = ctypes.POINTER


class Config(ctypes.Structure):
    _fields_ = [("size", c_size_t), ("transports", c_char_p), ("log_level", c_int), ("ib_device", c_char_p),
                ("progress_thread", c_int), ("integrity", c_int)]


class MemInfo(ctypes.Structure):
    _fields_ = [("size", c_size_t), ("addr", c_void_p), ("len", c_size_t), ("access", c_uint),
                ("type", c_int), ("cuda_device", c_int), ("pci_bus_id", ctypes.c_char * 16),
                ("path", ctypes.c_char * 512)]


class EpInfo(ctypes.Structure):
    _fields_ = [("size", c_size_t), ("transport", ctypes.c_char * 16), ("peer", ctypes.c_char * 64),
                ("path", ctypes.c_char * 256), ("downgrades", ctypes.c_char * 512), ("error", c_int),
                ("error_detail", ctypes.c_char * 384)]


class RequestInfo(ctypes.Structure):
    _fields_ = [("size", c_size_t), ("status", c_int), ("length", c_size_t), ("tag", c_uint64),
                ("error_detail", ctypes.c_char * 256)]


class LocalDesc(ctypes.Structure):
    _fields_ = [("mem", c_void_p), ("offset", c_size_t), ("len", c_size_t)]


class RemoteDesc(ctypes.Structure):
    _fields_ = [("rkey", c_void_p), ("offset", c_uint64), ("len", c_size_t)]


class DlistTable(ctypes.Structure):
    _fields_ = [("size", c_size_t), ("n", c_size_t), ("region", c_void_p), ("offset", c_void_p),
                ("len", c_void_p), ("len_all", c_uint64), ("per_region", c_uint64)]


class XferOpts(ctypes.Structure):
    _fields_ = [("size", c_size_t), ("notify", c_int), ("value", c_uint64)]


class XferOpts3(ctypes.Structure):
    """gw_xfer_opts_t to version 3: the index arrays' memory and stream."""
    _fields_ = [("size", c_size_t), ("notify", c_int), ("value", c_uint64), ("integrity", c_int),
                ("index_mem", c_uint), ("index_stream", c_void_p)]


class ProbeInfo(ctypes.Structure):
    _fields_ = [("size", c_size_t), ("length", c_size_t), ("tag", c_uint64)]


class PeerInfo(ctypes.Structure):
    _fields_ = [("size", c_size_t), ("addr", ctypes.c_char * 80), ("epoch", c_uint64),
                ("listed", c_int), ("changes", c_uint), ("connected", c_int), ("restarts", c_uint)]


class DirEntry(ctypes.Structure):
    _fields_ = [("agent", c_char_p), ("region", c_char_p), ("addr", c_char_p), ("epoch", c_uint64),
                ("raddr", c_uint64), ("rlen", c_uint64), ("type", c_char_p), ("access", c_uint)]


DIR_CB: Any = ctypes.CFUNCTYPE(c_int, c_void_p, POINTER(DirEntry))


class PeerEvent(ctypes.Structure):
    _fields_ = [("size", c_size_t), ("type", c_int), ("name", ctypes.c_char * 64),
                ("addr", ctypes.c_char * 80), ("epoch", c_uint64), ("restarted", c_int),
                ("dropped", c_uint)]


PEER_CB: Any = ctypes.CFUNCTYPE(None, c_void_p, POINTER(PeerEvent))


class SettingDesc(ctypes.Structure):
    _fields_ = [("name", c_char_p), ("default_value", c_char_p), ("help", c_char_p)]


class TransportInfo(ctypes.Structure):
    _fields_ = [("size", c_size_t), ("name", ctypes.c_char * 16), ("usable", c_int),
                ("detail", ctypes.c_char * 256)]


PP = POINTER(c_void_p)

# name: (restype, argtypes)
_PROTOS = {
    "gw_status_str": (c_char_p, [c_int]),
    "gw_status_name": (c_char_p, [c_int]),
    "gw_version": (c_char_p, []),
    "gw_build_features": (c_char_p, []),
    "gw_context_create": (c_int, [POINTER(Config), PP]),
    "gw_context_destroy": (c_int, [c_void_p]),
    "gw_last_error": (c_char_p, [c_void_p]),
    "gw_progress": (c_int, [c_void_p]),
    "gw_context_fd": (c_int, [c_void_p, POINTER(c_int)]),
    "gw_context_wait": (c_int, [c_void_p, c_int]),
    "gw_mem_reg": (c_int, [c_void_p, c_void_p, c_size_t, c_uint, PP]),
    "gw_mem_dereg": (c_int, [c_void_p]),
    "gw_mem_query": (c_int, [c_void_p, POINTER(MemInfo)]),
    "gw_mem_pack_rkey": (c_int, [c_void_p, c_void_p, POINTER(c_size_t)]),
    "gw_rkey_unpack": (c_int, [c_void_p, c_char_p, c_size_t, PP]),
    "gw_rkey_destroy": (None, [c_void_p]),
    "gw_rkey_range": (c_int, [c_void_p, POINTER(c_uint64), POINTER(c_size_t)]),
    "gw_listen": (c_int, [c_void_p, c_char_p, PP]),
    "gw_listener_addr": (c_int, [c_void_p, c_char_p, c_size_t]),
    "gw_accept": (c_int, [c_void_p, c_int, PP]),
    "gw_listener_destroy": (None, [c_void_p]),
    "gw_connect": (c_int, [c_void_p, c_char_p, PP]),
    "gw_ep_close": (c_int, [c_void_p, c_int]),
    "gw_ep_query": (c_int, [c_void_p, POINTER(EpInfo)]),
    "gw_put": (c_int, [c_void_p, c_void_p, c_size_t, c_void_p, c_uint64, c_void_p, PP]),
    "gw_get": (c_int, [c_void_p, c_void_p, c_size_t, c_void_p, c_uint64, c_void_p, PP]),
    "gw_put_notify": (c_int, [c_void_p, c_void_p, c_size_t, c_void_p, c_uint64, c_void_p, c_uint64,
                              PP]),
    "gw_notify_wait": (c_int, [c_void_p, c_int, POINTER(c_uint64)]),
    "gw_send": (c_int, [c_void_p, c_void_p, c_size_t, c_void_p, c_uint64, PP]),
    "gw_recv": (c_int, [c_void_p, c_void_p, c_size_t, c_void_p, c_uint64, c_uint64, PP]),
    "gw_flush": (c_int, [c_void_p, PP]),
    "gw_request_test": (c_int, [c_void_p]),
    "gw_request_wait": (c_int, [c_void_p, c_int]),
    "gw_request_info": (c_int, [c_void_p, POINTER(RequestInfo)]),
    "gw_request_free": (None, [c_void_p]),
    "gw_setting_at": (POINTER(SettingDesc), [c_size_t]),
    "gw_setting_value": (c_char_p, [c_void_p, c_char_p]),
    "gw_transport_at": (c_int, [c_void_p, c_size_t, POINTER(TransportInfo)]),
}

# Entry points of later API additions (batched/paged transfers, names,
# gw_mem_alloc, cancel/probe/many): bound when the loaded library has them, so
# one package works with older builds (a call then says what is missing).
PU32 = POINTER(ctypes.c_uint32)
PSZ = POINTER(c_size_t)
_OPTIONAL = {
    "gw_mem_alloc": (c_int, [c_void_p, c_size_t, c_uint, PP, PP]),
    "gw_dlist_local": (c_int, [c_void_p, POINTER(LocalDesc), c_size_t, PP]),
    "gw_dlist_remote": (c_int, [c_void_p, POINTER(RemoteDesc), c_size_t, c_uint, PP]),
    "gw_dlist_local_table": (c_int, [c_void_p, POINTER(c_void_p), c_size_t, POINTER(DlistTable), PP]),
    "gw_dlist_remote_table": (c_int, [c_void_p, POINTER(c_void_p), c_size_t, POINTER(DlistTable), c_uint,
                                      PP]),
    "gw_dlist_count": (c_size_t, [c_void_p]),
    "gw_dlist_destroy": (c_int, [c_void_p]),
    "gw_xfer_batch": (c_int, [c_void_p, c_int, c_void_p, c_void_p, c_void_p, c_void_p, c_size_t,
                              POINTER(XferOpts), PP]),
    "gw_xfer_pages": (c_int, [c_void_p, c_int, c_void_p, c_void_p, c_void_p, c_void_p, c_uint64,
                              c_void_p, c_size_t, c_size_t, POINTER(XferOpts), PP]),
    "gw_xfer_opts_size": (c_size_t, []),
    "gw_pages_create": (c_int, [c_void_p, c_void_p, c_void_p, c_size_t, PP]),
    "gw_pages_destroy": (c_int, [c_void_p]),
    "gw_xfer_batch_prepared": (c_int, [c_void_p, c_int, c_void_p, c_void_p, c_void_p, POINTER(XferOpts), PP]),
    "gw_notify_count_wait": (c_int, [c_void_p, c_uint64, c_uint64, c_int]),
    "gw_notify_count": (c_int, [c_void_p, c_uint64, POINTER(c_uint64)]),
    "gw_request_cancel": (c_int, [c_void_p]),
    "gw_request_test_many": (c_int, [POINTER(c_void_p), c_size_t, PSZ, PSZ]),
    "gw_request_wait_any": (c_int, [POINTER(c_void_p), c_size_t, c_int, PSZ]),
    "gw_probe": (c_int, [c_void_p, c_uint64, c_uint64, POINTER(ProbeInfo)]),
    "gw_agent_listen": (c_int, [c_void_p, c_char_p, c_char_p, PP]),
    "gw_mem_publish": (c_int, [c_void_p, c_char_p]),
    "gw_mem_unpublish": (c_int, [c_void_p, c_char_p]),
    "gw_peer_add": (c_int, [c_void_p, c_char_p, c_char_p]),
    "gw_peer_ep": (c_int, [c_void_p, c_char_p, PP]),
    "gw_peer_regions": (c_int, [c_void_p, c_char_p, POINTER(c_char_p), c_size_t, PP]),
    "gw_peer_query": (c_int, [c_void_p, c_char_p, POINTER(PeerInfo)]),
    "gw_directory_list": (c_int, [c_void_p, DIR_CB, c_void_p]),
    "gw_directory_describe": (c_int, [c_void_p, c_char_p, c_size_t]),
    "gw_peer_watch": (c_int, [c_void_p, c_uint, PEER_CB, c_void_p]),
    "gw_peer_event_next": (c_int, [c_void_p, POINTER(PeerEvent)]),
}


def need(name: str) -> Any:
    """The optional entry point `name`, or ImportError saying the library lacks it."""
    f = getattr(lib, name, None)
    if f is None or name not in _OPTIONAL:
        raise ImportError("gpuwire: the loaded libgpuwire (%s) has no %s: rebuild it from this "
                          "checkout" % (path, name))
    return f

# the loaded library: a ctypes.CDLL whose functions _PROTOS and _OPTIONAL declare
# (typed Any: the C API's signatures are declared to ctypes, not to the checker)
lib: Any = None
path: Optional[str] = None
fast: Any = None      # the _gwfast accelerator module when found (see find_fast)
# called with the accelerator (or None) whenever find_fast changes it
fast_hooks: List[Callable[[Any], None]] = []


def _candidates(explicit: Optional[str]) -> Iterator[str]:
    if explicit:
        yield explicit
        return
    here = os.path.dirname(os.path.abspath(__file__))
    bundled = os.path.join(here, "libgpuwire.so.0")
    if os.path.exists(bundled):
        yield bundled
    try:
        LIBDIR = importlib.import_module("._where", __package__).LIBDIR
        installed = os.path.normpath(os.path.join(here, LIBDIR, "libgpuwire.so.0"))
        if os.path.exists(installed):
            yield installed
    except ImportError:
        pass
    yield "libgpuwire.so.0"
    root = os.path.dirname(os.path.dirname(here))
    for p in sorted(glob.glob(os.path.join(root, "build*", "libgpuwire.so.0"))):
        yield p


def load(explicit: Optional[str] = None) -> Any:
    """Loads libgpuwire (once) and returns the ctypes library."""
    global lib, path
    if lib is not None and explicit is None:
        return lib
    tried = []
    for cand in _candidates(explicit):
        try:
            handle = ctypes.CDLL(cand)
        except OSError as e:
            tried.append("%s (%s)" % (cand, e))
            continue
        for name, (res, args) in _PROTOS.items():
            f = getattr(handle, name)
            f.restype = res
            f.argtypes = args
        for name, (res, args) in _OPTIONAL.items():
            f = getattr(handle, name, None)
            if f is not None:
                f.restype = res
                f.argtypes = args
        lib, path = handle, cand
        find_fast()
        return lib
    raise ImportError("gpuwire: cannot load libgpuwire; tried: " + "; ".join(tried) +
                      ". Build it (cmake --build build) or call gpuwire.load_library(path) "
                      "or put its directory on LD_LIBRARY_PATH")


def _fast_dirs() -> Iterator[str]:
    here = os.path.dirname(os.path.abspath(__file__))
    yield here                                          # installed beside the package
    if path and os.sep in path:
        yield os.path.join(os.path.dirname(os.path.abspath(path)), "python")
    for d in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep):
        if d:
            yield os.path.join(d, "python")


fast_missing: Optional[str] = None  # why the accelerator is not in use (None: in use, or disabled on purpose)
_warned = False


def find_fast(enable: bool = True) -> Any:
    """Loads the optional C accelerator (_gwfast.abi3.so) and binds it to the
    loaded library; enable=False goes back to ctypes for every call.  When it
    is wanted but cannot be used, the reason is kept in fast_missing and
    warned about (RuntimeWarning) the first time."""
    global fast, fast_missing, _warned
    fast = None
    fast_missing = None
    if enable and lib is not None:
        why: List[str] = []
        fast = _find_fast(why)
        if fast is None:
            fast_missing = "; ".join(why) or ("no _gwfast.abi3.so beside the package or the library "
                                              "(%s)" % path)
            if not _warned:
                _warned = True
                warnings.warn("gpuwire: the C accelerator is not in use, every call goes through "
                              "ctypes (about 10x slower per call): %s. Build it with Python's "
                              "headers (apt-get install python3-dev) or install the wheel "
                              "(pip install .)" % fast_missing, RuntimeWarning, stacklevel=2)
    for hook in fast_hooks:
        hook(fast)
    return fast


def _find_fast(why: List[str]) -> Optional[ModuleType]:
    import importlib.util
    for d in _fast_dirs():
        f = os.path.join(d, "_gwfast.abi3.so")
        if not os.path.exists(f):
            continue
        try:
            spec = importlib.util.spec_from_file_location("gpuwire._gwfast", f)
            if spec is None or spec.loader is None:
                why.append("%s: not loadable as a module" % f)
                continue
            mod: Any = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
        except ImportError as e:
            why.append("%s: %s" % (f, e))
            continue
        def addr(fn: str) -> Optional[int]:
            return ctypes.cast(getattr(lib, fn), ctypes.c_void_p).value

        def opt(fn: str) -> Optional[int]:
            return addr(fn) if hasattr(lib, fn) else 0
        try:
            base = (addr("gw_put"), addr("gw_get"), addr("gw_put_notify"), addr("gw_request_wait"),
                    addr("gw_request_test"), addr("gw_request_free"), opt("gw_xfer_batch"), opt("gw_xfer_pages"))
            prep = (opt("gw_pages_create"), opt("gw_pages_destroy"), opt("gw_xfer_pages_prepared"))
            # the newest form the accelerator takes: with 8-byte index arrays handed to the
            # library as they are; with prepared selections (prepare_put_batch); with prepared
            # page lists (prepare_put_pages); the batched API alone
            forms = [(*base, *prep, opt("gw_xfer_batch_prepared"), opt("gw_xfer_opts_size")),
                     (*base, *prep, opt("gw_xfer_batch_prepared")), (*base, *prep), base]
            for k, args in enumerate(forms):
                try:
                    mod.init(*args)
                    break
                except TypeError:
                    if k == len(forms) - 1:
                        raise
        except TypeError:       # an accelerator built before the batched API
            why.append("%s: built for an older libgpuwire (rebuild it)" % f)
            continue
        mod.batch_ok = hasattr(lib, "gw_xfer_batch") and hasattr(lib, "gw_xfer_pages")
        return mod  # type: ignore[no-any-return]
    return None
