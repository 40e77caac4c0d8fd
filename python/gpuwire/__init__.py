# SPDX-License-Identifier: Apache-2.0
"""gpuwire - move PyTorch tensors, NumPy arrays and any buffer between
processes and machines (one-sided put/get, put with a notification, tagged
send/recv, batched and paged transfers, names) over libgpuwire.

    import gpuwire
    with gpuwire.Context() as ctx:
        mem = ctx.register(tensor)          # keeps tensor alive while registered
        key = mem.pack()                    # bytes: give them to the peer
        ...

The package is split by object: context (Context and the library-wide
queries), memory (Memory, RemoteKey), endpoint (Listener, Endpoint), batch
(DescList and the batched and paged transfers), names (agents, peers, the
directory, PeerEvent), request (Request, wait_any, test_many); every public
name is importable from `gpuwire` itself.
"""
from typing import Any, Optional, Tuple

from ._lib import load as _load
from ._common import ACCESS_LOCAL, ACCESS_REMOTE, ACCESS_REMOTE_READ, ACCESS_REMOTE_WRITE
from .batch import DescList
from .context import Context, build_features, settings, status_name, version
from .endpoint import Endpoint, Listener
from .memory import Memory, RemoteKey
from .names import PeerEvent
from .request import Request, test_many, wait_any
from .segments import Segments
from . import core, store  # noqa: F401  (gpuwire.core: the classes under their earlier module)
from ._nccl import nccl_plugin_path
from .errors import EndpointError, GwError, IntegrityError, InvalidArgument, InvalidKey, Timeout

__version__ = "0.1.0"


def load_library(path: Optional[str] = None) -> Any:
    """Loads libgpuwire from `path` (else the default search, see _lib)."""
    return _load(path)


__all__ = ["ACCESS_LOCAL", "ACCESS_REMOTE", "ACCESS_REMOTE_READ", "ACCESS_REMOTE_WRITE", "Context",
           "DescList", "Endpoint", "Listener", "Memory", "PeerEvent", "RemoteKey", "Request", "Segments", "test_many",
           "wait_any", "GwError", "InvalidArgument",
           "InvalidKey", "IntegrityError", "Timeout", "EndpointError", "build_features", "settings", "status_name",
           "version", "load_library", "store", "nccl_plugin_path", "accelerated"]


def accelerated() -> Tuple[bool, Optional[str]]:
    """(True, None) when the C accelerator takes the hot path, else (False,
    why); loads the library if it is not loaded yet."""
    from . import _lib
    _load()
    return (_lib.fast is not None, _lib.fast_missing)
