# SPDX-License-Identifier: Apache-2.0
"""Descriptor tables at serving scale from Python: 1,000,000-entry local and
remote tables built from NumPy columns and tensors (no Python loop per
entry) and computed ones (no columns), random index subsets moved and
checked where they land, on every transport usable here; the column
checks and the refusals that name the bad entry."""
import time

import pytest

import gpuwire

np = pytest.importorskip("numpy", reason="python3-numpy not installed")
try:
    import torch
except ImportError:
    torch = None

N = 1_000_000
ESZ = 16
SEL = 327_680


def test_million_entry_tables(pair):
    dst = np.zeros(N * ESZ, dtype=np.uint8)
    dm = pair.a.register(dst)
    rk = pair.key_to_b(dm)
    rng = np.random.default_rng(7)
    src = rng.integers(0, 256, N * ESZ, dtype=np.uint8)
    sm = pair.b.register(src)
    t0 = time.perf_counter()
    # local: a NumPy offset column, shuffled; remote: computed (no columns)
    lperm = rng.permutation(N).astype(np.uint64)
    L = pair.b.dlist_local_table(sm, length=ESZ, offsets=lperm * ESZ)
    R = pair.eb.dlist_remote_table(rk, count=N, length=ESZ)
    built = time.perf_counter() - t0
    assert len(L) == N and len(R) == N
    print("two 1M-entry tables built in %.1f ms" % (built * 1e3))
    li = rng.choice(N, SEL, replace=False).astype(np.uint32)
    ri = rng.choice(N, SEL, replace=False).astype(np.uint32)
    note = pair.expect_notify()
    assert pair.eb.put_batch(L, R, li, ri, notify=5).wait(60) == SEL * ESZ
    assert note() == 5
    want = np.zeros(N * ESZ, dtype=np.uint8).reshape(N, ESZ)
    want[ri] = src.reshape(N, ESZ)[lperm[li].astype(np.int64)]
    assert (dst.reshape(N, ESZ) == want).all()
    L.close()
    R.close()


def test_tables_regions_and_tensors(pair):
    nreg, per = 4, 1000
    dst = np.zeros(nreg * per * ESZ, dtype=np.uint8)
    rk = pair.key_to_b(pair.a.register(dst))
    srcs = [np.full(per * ESZ, r + 1, dtype=np.uint8) for r in range(nreg)]
    for s in srcs:
        s[::ESZ] = np.arange(per, dtype=np.uint64).astype(np.uint8)
    mems = [pair.b.register(s) for s in srcs]
    # computed blocks per region: entry i is block i % per of region i // per
    L = pair.b.dlist_local_table(mems, count=nreg * per, length=ESZ, per_region=per)
    # the remote table from columns given as tensors where torch is present
    offs = np.arange(nreg * per, dtype=np.int64)[::-1] * ESZ
    col = torch.from_numpy(offs.copy()) if torch is not None else offs
    R = pair.eb.dlist_remote_table([rk], offsets=col, lengths=[ESZ] * (nreg * per))
    idx = np.arange(0, nreg * per, 3, dtype=np.int64)
    serve = pair.serve_a()
    assert pair.eb.put_batch(L, R, idx, idx).wait(30) == len(idx) * ESZ
    serve()
    got = dst.reshape(nreg * per, ESZ)
    for i in idx[:50].tolist() + idx[-50:].tolist():
        r, b = divmod(i, per)
        assert (got[nreg * per - 1 - i] == srcs[r].reshape(per, ESZ)[b]).all(), i


def test_table_refusals(pair):
    dst = np.zeros(1024, dtype=np.uint8)
    rk = pair.key_to_b(pair.a.register(dst))
    sm = pair.b.register(np.zeros(1024, dtype=np.uint8))
    with pytest.raises(gpuwire.GwError, match=r"entry 2: \[offset 1020, \+16\) is outside region 0"):
        pair.b.dlist_local_table(sm, length=16, offsets=np.array([0, 16, 1020], dtype=np.uint64))
    with pytest.raises(gpuwire.GwError, match="entry 1: region index 3, but 1 regions were given"):
        pair.b.dlist_local_table([sm], length=16, region_index=np.array([0, 3], dtype=np.uint32))
    with pytest.raises(gpuwire.GwError, match="entry 64: .* is outside key 0"):
        pair.eb.dlist_remote_table(rk, count=65, length=16)
    with pytest.raises(ValueError, match="region_index: item 1 is -1"):
        pair.b.dlist_local_table([sm], length=16, region_index=np.array([0, -1], dtype=np.int64))
    with pytest.raises(ValueError, match="lengths has 3 entries, the columns before it 2"):
        pair.b.dlist_local_table(sm, offsets=[0, 16], lengths=[1, 2, 3])
    with pytest.raises(ValueError, match="count: give it"):
        pair.b.dlist_local_table(sm, length=16)
    with pytest.raises(ValueError, match="not an open Memory"):
        pair.b.dlist_local_table([rk], count=1, length=16)
    L = pair.b.dlist_local_table(sm, count=64, length=16)
    R = pair.eb.dlist_remote_table(rk, count=64, length=16)
    with pytest.raises(gpuwire.GwError, match="entry 1: local index 64 is outside the list"):
        pair.eb.put_batch(L, R, np.array([0, 64], dtype=np.uint32), [0, 1])
