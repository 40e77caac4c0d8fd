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
import datetime
import socket

from .errors import InvalidArgument, Timeout


def _key(prefix, kind, name):
    return "%s%s/%s" % (prefix, kind, name)


class Directory:
    """Names -> addresses and keys, kept in a torch.distributed Store."""

    def __init__(self, store, ctx, prefix="gpuwire/", timeout=60.0):
        for m in ("set", "get", "wait"):
            if not callable(getattr(store, m, None)):
                raise InvalidArgument(-1, "GW_ERR_INVALID", "invalid argument",
                                      "%s is not a torch.distributed Store (no %s())"
                                      % (type(store).__name__, m))
        self.store, self.ctx, self.prefix, self.timeout = store, ctx, prefix, timeout
        self.listeners = {}

    def _wait(self, key, timeout):
        t = self.timeout if timeout is None else timeout
        try:
            self.store.wait([key], datetime.timedelta(seconds=t))
        except Exception as e:   # each Store raises its own type on a timeout
            raise Timeout(-7, "GW_ERR_TIMEOUT", "timed out",
                          "store key %r not set within %s s (%s: %s)"
                          % (key, t, type(e).__name__, e)) from None
        return self.store.get(key)

    # -- raw values ------------------------------------------------------------------
    def set(self, name, value):
        self.store.set(_key(self.prefix, "v", name), bytes(value))

    def get(self, name, timeout=None):
        return bytes(self._wait(_key(self.prefix, "v", name), timeout))

    # -- endpoints ---------------------------------------------------------------------
    def serve(self, name, addr="0.0.0.0:0", host=None):
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

    def address(self, name, timeout=None):
        return self._wait(_key(self.prefix, "addr", name), timeout).decode()

    def connect(self, name, timeout=None):
        """Connects to the peer published under `name` (waits for it to appear)."""
        return self.ctx.connect(self.address(name, timeout))

    def accept(self, name, timeout=None):
        """The next endpoint on the listener of serve(name)."""
        return self.listeners[name].accept(self.timeout if timeout is None else timeout)

    # -- regions ---------------------------------------------------------------------------
    def publish(self, name, mem):
        """Publishes mem's packed key under `name`."""
        self.store.set(_key(self.prefix, "key", name), mem.pack())

    def remote_key(self, ep, name, timeout=None):
        """Fetches the key published under `name` and unpacks it on ep."""
        return ep.unpack(bytes(self._wait(_key(self.prefix, "key", name), timeout)))
