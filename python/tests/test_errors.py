# SPDX-License-Identifier: Apache-2.0
"""Bad input gets a clear exception naming the problem; nothing crashes."""
import gc

import pytest

import gpuwire

np = pytest.importorskip("numpy", reason="python3-numpy not installed")


def test_non_contiguous_refused():
    with gpuwire.Context() as ctx:
        a = np.zeros((8, 8), dtype=np.float32)
        with pytest.raises(gpuwire.InvalidArgument, match="not contiguous") as e:
            ctx.register(a[:, 1])
        assert e.value.name == "GW_ERR_INVALID" and e.value.status == -1
        with pytest.raises(ValueError, match="not contiguous"):
            ctx.register(memoryview(bytearray(64))[::2])


def test_non_contiguous_tensor_and_other_devices():
    torch = pytest.importorskip("torch", reason="python3-torch not installed")
    with gpuwire.Context() as ctx:
        t = torch.zeros(16, 16)
        with pytest.raises(gpuwire.InvalidArgument, match=r"not contiguous; call \.contiguous"):
            ctx.register(t.t())
        with pytest.raises(gpuwire.InvalidArgument, match="device meta"):
            ctx.register(torch.empty(16, device="meta"))
        with pytest.raises(gpuwire.InvalidArgument, match="sparse"):
            ctx.register(torch.zeros(4, 4).to_sparse())


def test_read_only_and_unknown_objects():
    with gpuwire.Context() as ctx:
        with pytest.raises(gpuwire.InvalidArgument, match="read-only"):
            ctx.register(b"abc")                       # default access includes remote write
        ro = np.zeros(4)
        ro.flags.writeable = False
        with pytest.raises(gpuwire.InvalidArgument, match="read-only"):
            ctx.register(ro, access=gpuwire.ACCESS_REMOTE_WRITE)
        with pytest.raises(gpuwire.InvalidArgument, match="cannot find the memory of a builtins.int"):
            ctx.register(5)
        with pytest.raises(gpuwire.InvalidArgument, match="access flags 0x10"):
            ctx.register(bytearray(4), access=0x10)


def test_key_errors_and_freed_region(pair):
    dst = np.zeros(256, dtype=np.uint8)
    mem = pair.a.register(dst)
    rk = pair.key_to_b(mem)
    with pytest.raises(gpuwire.InvalidKey) as e:
        pair.eb.unpack(b"\x00" * 40)
    assert e.value.name == "GW_ERR_INVALID_KEY" and e.value.detail
    with pytest.raises(gpuwire.InvalidArgument, match="bytes"):
        pair.eb.unpack("text")
    with pytest.raises(gpuwire.GwError) as e:
        pair.eb.put(bytearray(16), rk, offset=250)     # beyond the region: refused at posting
    assert e.value.name == "GW_ERR_OUT_OF_BOUNDS" and "outside" in e.value.detail
    # the target frees the tensor's region: the key is revoked, a put fails
    mem.close()
    del dst
    gc.collect()
    j = pair.serve_a()
    r = pair.eb.put(bytearray(16), rk)
    with pytest.raises(gpuwire.InvalidKey) as e:
        r.wait(20)
    j()
    assert e.value.status == -22
    with pytest.raises(gpuwire.InvalidArgument, match="closed"):
        mem.pack()
    with pytest.raises(gpuwire.InvalidArgument, match="closed"):
        pair.eb.put(mem, rk)


def test_timeouts_and_refused_connect():
    with gpuwire.Context(transports="tcp") as a:
        lis = a.listen()
        with pytest.raises(gpuwire.Timeout) as e:
            lis.accept(0.05)
        assert isinstance(e.value, TimeoutError) and e.value.name == "GW_ERR_TIMEOUT"
        port = lis.address.rsplit(":", 1)[1]
        lis.close()
        with pytest.raises(gpuwire.GwError) as e:
            a.connect("127.0.0.1:%s" % port)
        assert e.value.name in ("GW_ERR_CONN_REFUSED", "GW_ERR_ADDRESS") and port in str(e.value)
        with pytest.raises(gpuwire.InvalidArgument, match="timeout"):
            a.wait(-1)


def test_local_range_checked(pair):
    rk = pair.key_to_b(pair.a.register(bytearray(64)))
    m = pair.b.register(bytearray(32))
    with pytest.raises(gpuwire.InvalidArgument, match="outside the 32-byte region"):
        pair.eb.put(m, rk, length=40)
    with pytest.raises(gpuwire.InvalidArgument, match="RemoteKey"):
        pair.eb.put(m, b"key")


def test_notify_timeout(pair):
    with pytest.raises(gpuwire.Timeout):
        pair.eb.wait_notify(0.05)
    with pytest.raises(gpuwire.Timeout):
        pair.eb.wait_notify(0)
