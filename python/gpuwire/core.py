# SPDX-License-Identifier: Apache-2.0
"""core.py - the package's classes under their earlier module name, for code
that imports them from here (`from gpuwire.core import Context`).  They live
in context.py, memory.py, endpoint.py, batch.py, names.py and request.py."""
from ._common import ACCESS_LOCAL, ACCESS_REMOTE, ACCESS_REMOTE_READ, ACCESS_REMOTE_WRITE
from .batch import DescList, _PagesPlan
from .context import Context, build_features, settings, status_name, version
from .endpoint import Endpoint, Listener
from .memory import Memory, RemoteKey
from .names import PeerEvent
from .request import Request, test_many, wait_any

__all__ = ["ACCESS_LOCAL", "ACCESS_REMOTE", "ACCESS_REMOTE_READ", "ACCESS_REMOTE_WRITE", "Context",
           "DescList", "Endpoint", "Listener", "Memory", "PeerEvent", "RemoteKey", "Request",
           "build_features", "settings", "status_name", "test_many", "version", "wait_any",
           "_PagesPlan"]
