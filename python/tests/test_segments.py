# SPDX-License-Identifier: Apache-2.0
"""Segments: an allocator's segments registered whole, tensors inside them
located without a registration and registered through the registration
cache; segments that go are closed, so memory allocated there later is
registered anew.  Host-memory segments (an allocator given as snapshot=)
run everywhere; PyTorch's CUDA segments where torch sees a GPU."""
import pytest

import gpuwire

np = pytest.importorskip("numpy", reason="python3-numpy not installed")
try:
    import torch
except ImportError:
    torch = None


def test_host_segments(pair):
    segs = {"a": np.zeros(1 << 20, dtype=np.uint8), "b": np.zeros(1 << 18, dtype=np.uint8)}
    live = ["a", "b"]

    def snap():
        return [(segs[k].ctypes.data, segs[k].nbytes, -1) for k in live]

    with gpuwire.Segments(pair.a, snapshot=snap) as S:
        assert S.refresh() == (2, 0)
        assert S.refresh() == (0, 0)
        a = segs["a"]
        m, off = S.locate(a[4096:8192])
        assert off == 4096 and m.addr == a.ctypes.data and m.nbytes == a.nbytes
        # a tensor inside a registered segment: found in the registration cache
        t = pair.a.register(a[4096:8192])
        assert t.info()["path"].startswith("registration cache:"), t.info()["path"]
        # and it is a registration of its own: a put through its key lands
        k = pair.key_to_b(t)
        serve = pair.serve_a()
        src = np.arange(4096, dtype=np.uint32).astype(np.uint8)
        pair.eb.put(src, k).wait(20)
        serve()
        assert (a[4096:8192] == src).all()
        # the segment goes (empty_cache): its registration is closed; the
        # tensor's own stays until it is closed
        live.remove("a")
        assert S.refresh() == (0, 1)
        assert m._h is None
        with pytest.raises(ValueError, match="no registered segment holds"):
            S.locate(a[4096:8192])
        t.close()
        m2, off2 = S.locate((segs["b"].ctypes.data + 100, 10))
        assert off2 == 100 and m2.nbytes == 1 << 18


@pytest.mark.skipif(torch is None, reason="python3-torch not installed")
def test_torch_segments(pair):
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="torch.cuda is not available"):
            gpuwire.Segments(pair.a).refresh()
        pytest.skip("torch.cuda is not available here: the CUDA segments part did not run")
    x = torch.empty(1 << 20, dtype=torch.uint8, device="cuda")
    with gpuwire.Segments(pair.a) as S:
        assert S.refresh()[0] >= 1
        m, off = S.locate(x[4096:])
        assert m.info()["type"] == "cuda" and off >= 4096
        t = pair.a.register(x[4096:8192])
        assert t.info()["path"].startswith("registration cache:")
        t.close()
