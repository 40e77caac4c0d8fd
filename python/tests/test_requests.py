# SPDX-License-Identifier: Apache-2.0
"""Requests: cancel, probe, wait_any, test_many, and the per-request error
detail a failed request's exception carries."""
import gc

import pytest

import gpuwire

np = pytest.importorskip("numpy", reason="python3-numpy not installed")


def test_cancel_recv_and_past_withdrawal(pair):
    buf = bytearray(16)
    r = pair.eb.recv(buf, tag=0x99)
    assert r.cancel() is True
    assert r.status == -8 and gpuwire.status_name(r.status) == "GW_ERR_CANCELED"
    with pytest.raises(gpuwire.GwError, match="GW_ERR_CANCELED"):
        r.wait(1)
    assert r.cancel() is True                 # complete already: nothing changes
    # a message sent now is not taken by the withdrawn receive
    j = pair.in_a(lambda: pair.ea.send(b"later", tag=0x99).wait(20))
    assert pair.eb.recv_bytes(tag=0x99) == b"later"
    j()
    # a put: withdrawn while still queued (complete on return, canceled),
    # else it ends on its own, with all its bytes or canceled
    rk = pair.key_to_b(pair.a.register(bytearray(64)))
    serve = pair.serve_a()
    p = pair.eb.put(b"x" * 64, rk)
    c = p.cancel()
    if c and p.status == -8:
        with pytest.raises(gpuwire.GwError, match="GW_ERR_CANCELED"):
            p.wait(1)
    else:
        try:
            assert p.wait(20) == 64 and p.status == 0
        except gpuwire.GwError as e:
            assert "GW_ERR_CANCELED" in str(e)
    serve()
    assert c in (True, False)


def test_probe(pair):
    assert pair.eb.probe(tag=5) is None
    j = pair.in_a(lambda: pair.ea.send(b"0123456789", tag=0x51).wait(20))
    got = None
    for _ in range(2000):
        got = pair.eb.probe(tag=0x50, mask=0xF0)
        if got:
            break
        pair.b.wait(0.01)
    assert got == (10, 0x51)
    assert pair.eb.probe(tag=0x51) == (10, 0x51)        # still queued
    assert pair.eb.recv_bytes(tag=0x51) == b"0123456789"
    j()
    assert pair.eb.probe(tag=0x51) is None


def test_wait_any_test_many(pair):
    bufs = [bytearray(8) for _ in range(3)]
    reqs = [pair.eb.recv(b, tag=100 + i) for i, b in enumerate(bufs)]
    assert gpuwire.test_many(reqs) == []
    with pytest.raises(gpuwire.Timeout, match="none of 3"):
        gpuwire.wait_any(reqs, 0.05)
    j = pair.in_a(lambda: pair.ea.send(b"two", tag=102).wait(20))
    i = gpuwire.wait_any([None] + reqs, 20)
    j()
    assert i == 3 and reqs[2].status == 0 and bufs[2][:3] == b"two"
    assert gpuwire.test_many(reqs) == [2]
    j = pair.in_a(lambda: [pair.ea.send(b"zero", tag=100).wait(20),
                           pair.ea.send(b"one", tag=101).wait(20)])
    assert reqs[0].wait(20) == 4 and reqs[1].wait(20) == 3
    j()
    assert gpuwire.test_many(reqs) == [0, 1, 2]
    assert gpuwire.wait_any(reqs) == 0
    with pytest.raises(gpuwire.InvalidArgument, match=r"requests\[1\]: a str"):
        gpuwire.test_many([reqs[0], "x"])
    with pytest.raises(gpuwire.InvalidArgument, match="no request"):
        gpuwire.wait_any([None])


def test_failed_request_carries_its_detail(pair):
    dst = np.zeros(256, dtype=np.uint8)
    mem = pair.a.register(dst)
    rk = pair.key_to_b(mem)
    mem.close()
    del dst
    gc.collect()
    j = pair.serve_a()
    with pytest.raises(gpuwire.InvalidKey) as e:
        pair.eb.put(pair.b.register(bytearray(16)), rk).wait(20)   # the accelerator's wait
    with pytest.raises(gpuwire.InvalidKey) as e2:
        pair.eb.put(bytearray(16), rk).wait(20)                       # a buffer: ctypes wait
    j()
    for x in (e.value, e2.value):
        # the request's own detail (gw_request_info): the operation, its input, the cause
        assert x.status == -22 and "request failed: gw_put(len=16, raddr=" in x.detail, x.detail
        assert "deregistered" in x.detail or "revoked" in x.detail, x.detail
