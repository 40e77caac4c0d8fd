# SPDX-License-Identifier: Apache-2.0
"""Names (docs/NAMES.md) from Python: an agent publishes regions, a peer
reaches it by name and fetches keys by name; gpuwire-allocated shared memory
(Context.alloc) seen as NumPy arrays, memoryviews and tensors without copies."""
import threading
import warnings

import pytest

import gpuwire

np = pytest.importorskip("numpy", reason="python3-numpy not installed")


def serve(ctx):
    """Progresses ctx in a thread until the returned stop() (an agent's loop)."""
    stop = threading.Event()

    def loop():
        while not stop.is_set():
            ctx.progress()
            ctx.wait(0.01)
    t = threading.Thread(target=loop)
    t.start()

    def done():
        stop.set()
        t.join(20)
        assert not t.is_alive()
    return done


@pytest.mark.parametrize("transport", ["tcp", "intra"])
def test_agent_publish_peer_regions(transport):
    with gpuwire.Context(transports=transport) as a, gpuwire.Context(transports=transport) as b:
        lis = a.agent_listen("kv0", "127.0.0.1:0")
        assert a.name == "kv0" and lis.address.startswith("127.0.0.1:")
        cache = a.alloc(1 << 16)                       # gpuwire's shared host memory
        view = cache.numpy(np.uint32)
        cache.publish("cache")
        other = np.zeros(64, dtype=np.uint8)
        om = a.register(other)
        om.publish("other")
        b.peer_add("kv0", lis.address)
        stop = serve(a)
        try:
            rk, ro = b.peer_regions("kv0", ["cache", "other"])
            assert rk.nbytes == 1 << 16 and ro.nbytes == 64
            ep = b.peer_ep("kv0")
            assert b.peer_ep("kv0") is ep and ep.transport == transport
            src = np.arange(1 << 14, dtype=np.uint32)
            ep.put(b.register(src), rk).wait(20)
            ep.put(b"hello", ro, offset=3).wait(20)
            ep.flush().wait(20)
            q = b.peer_query("kv0")
            assert q["connected"] and q["addr"] == lis.address and q["epoch"] > 0
            with pytest.raises(gpuwire.GwError) as e:
                b.peer_regions("kv0", "missing")
            assert e.value.name == "GW_ERR_NOT_FOUND" and "missing" in str(e.value)
            with pytest.raises(gpuwire.GwError, match="GW_ERR_NOT_FOUND"):
                b.peer_query("nobody")
            a.unpublish("other")
            with pytest.raises(gpuwire.GwError, match="GW_ERR_NOT_FOUND"):
                a.unpublish("other")
        finally:
            stop()
        assert (view == src).all()                     # seen through the array, no copy
        assert other[3:8].tobytes() == b"hello"
        with pytest.raises(gpuwire.InvalidArgument, match=r"name \"bad name!\" is not 1..63"):
            b.agent_listen("bad name!")
        with pytest.raises(gpuwire.GwError, match="GW_ERR_UNAVAILABLE"):
            b.ls()                                     # no directory configured
        assert isinstance(b.directory(), str)
        del view


def test_alloc_views_and_lifetime():
    torch = pytest.importorskip("torch", reason="python3-torch not installed")
    with gpuwire.Context() as ctx:
        m = ctx.alloc(4096)
        assert m.info()["len"] == 4096 and m.nbytes == 4096
        a = m.numpy(np.float32, (4, 256))
        t = m.tensor(torch.int32)
        mv = m.memoryview()
        a[1, 0] = 1.5
        assert t[256].item() == np.float32(1.5).view(np.int32) and mv[1024:1028] == \
            np.float32(1.5).tobytes()
        assert a.ctypes.data == m.addr == t.data_ptr()
        with pytest.raises(gpuwire.GwError, match="3 view"):
            m.close()                                  # views alive: refused, nothing freed
        del a, t
        mv.release()
        del mv
        m.close()
        with pytest.raises(gpuwire.InvalidArgument, match="closed"):
            m.numpy()
        with pytest.raises(gpuwire.InvalidArgument, match="size in bytes"):
            ctx.alloc(0)
        r = ctx.register(torch.zeros(4))
        with pytest.raises(gpuwire.InvalidArgument, match="no memoryview"):
            r.memoryview()
    # a context closed while a view lives keeps that memory (a warning says so)
    ctx = gpuwire.Context()
    keep = ctx.alloc(64).numpy()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        ctx.close()
    assert ctx.closed and any("live views" in str(x.message) for x in w)
    keep[:] = 7                                        # still mapped
    assert keep.sum() == 7 * 64
