# SPDX-License-Identifier: Apache-2.0
"""store.py - bootstrap through a torch.distributed Store.

A job started by torchrun already has a TCPStore (MASTER_ADDR:MASTER_PORT);
this module exchanges listener addresses and packed keys through it, so no
other service is needed.  Any Store works (TCPStore, HashStore, FileStore,
PrefixStore): only set(), get() and wait() are used, and torch is never
imported here (the store object brings its own).

    d = gpuwire.store.Directory(store, ctx)
    d.serve("decode0")                       # listener, address published
    d.publish("decode0/kv", mem)             # packed key published
    ...
    ep = d.connect("decode0")                # other process: address looked up
    rk = d.remote_key(ep, "decode0/kv")      # key fetched and unpacked on ep
"""
from __future__ import annotations

import datetime
import socket
from typing import TYPE_CHECKING, Any, Dict, Optional, Union

from .errors import InvalidArgument, Timeout

if TYPE_CHECKING:
    from .context import Context
    from .endpoint import Endpoint, Listener
    from .memory import Memory, RemoteKey


def _key(prefix: str, kind: str, name: str) -> str:
    return "%s%s/%s" % (prefix, kind, name)


class Directory:
    """Names -> addresses and keys, kept in a torch.distributed Store."""

    def __init__(self, store: Any, ctx: Context, prefix: str = "gpuwire/", timeout: float = 60.0) -> None:
        for m in ("set", "get", "wait"):
            if not callable(getattr(store, m, None)):
                raise InvalidArgument(-1, "GW_ERR_INVALID", "invalid argument",
                                      "%s is not a torch.distributed Store (no %s())"
                                      % (type(store).__name__, m))
        self.store, self.ctx, self.prefix, self.timeout = store, ctx, prefix, timeout
        self.listeners: Dict[str, Listener] = {}

    def _wait(self, key: str, timeout: Optional[float]) -> bytes:
        t = self.timeout if timeout is None else timeout
        try:
            self.store.wait([key], datetime.timedelta(seconds=t))
        except Exception as e:   # each Store raises its own type on a timeout
            raise Timeout(-7, "GW_ERR_TIMEOUT", "timed out",
                          "store key %r not set within %s s (%s: %s)"
                          % (key, t, type(e).__name__, e)) from None
        return bytes(self.store.get(key))

    # -- raw values ------------------------------------------------------------------
    def set(self, name: str, value: Union[bytes, bytearray, memoryview]) -> None:
        self.store.set(_key(self.prefix, "v", name), bytes(value))

    def get(self, name: str, timeout: Optional[float] = None) -> bytes:
        return bytes(self._wait(_key(self.prefix, "v", name), timeout))

    # -- endpoints ---------------------------------------------------------------------
    def serve(self, name: str, addr: str = "0.0.0.0:0", host: Optional[str] = None) -> Listener:
        """Listens on addr and publishes the address under `name`.

        A wildcard bind is published with `host` (default: this host's name
        as socket.getfqdn() gives it), so peers on other hosts can reach it."""
        lis = self.ctx.listen(addr)
        bound = lis.address
        h, _, port = bound.rpartition(":")
        if host is None:
            host = socket.getfqdn() if h in ("0.0.0.0", "[::]", "::") else h
        self.store.set(_key(self.prefix, "addr", name), ("%s:%s" % (host, port)).encode())
        self.listeners[name] = lis
        return lis

    def address(self, name: str, timeout: Optional[float] = None) -> str:
        return self._wait(_key(self.prefix, "addr", name), timeout).decode()

    def connect(self, name: str, timeout: Optional[float] = None) -> Endpoint:
        """Connects to the peer published under `name` (waits for it to appear)."""
        return self.ctx.connect(self.address(name, timeout))

    def accept(self, name: str, timeout: Optional[float] = None) -> Endpoint:
        """The next endpoint on the listener of serve(name)."""
        return self.listeners[name].accept(self.timeout if timeout is None else timeout)

    # -- regions ---------------------------------------------------------------------------
    def publish(self, name: str, mem: Memory) -> None:
        """Publishes mem's packed key under `name`."""
        self.store.set(_key(self.prefix, "key", name), mem.pack())

    def remote_key(self, ep: Endpoint, name: str, timeout: Optional[float] = None) -> RemoteKey:
        """Fetches the key published under `name` and unpacks it on ep."""
        return ep.unpack(bytes(self._wait(_key(self.prefix, "key", name), timeout)))
