# SPDX-License-Identifier: Apache-2.0
"""Batched and paged transfers, counted notifications, index arrays given as
lists, NumPy arrays and tensors, through the C accelerator and through ctypes
alone, on every transport usable here; payloads checked where they land."""
import array
import threading

import pytest

import gpuwire

np = pytest.importorskip("numpy", reason="python3-numpy not installed")
try:        # here, not in a test: see test_ops.py (a slow import leaves the pair idle)
    import torch
except ImportError:
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="python3-torch not installed")

PAGE = 512


@pytest.fixture(params=["accelerator", "ctypes"])
def path(request):
    from gpuwire import _lib
    _lib.load()
    if request.param == "accelerator" and (_lib.fast is None or not _lib.fast.batch_ok):
        pytest.skip("the _gwfast accelerator is not built (no Python headers)")
    if request.param == "ctypes":
        _lib.find_fast(False)
    yield request.param
    _lib.find_fast(True)


def target_counts(pair, want, timeout=20):
    """Context a's thread waits for counted notifications {id: n}, then keeps
    progressing (the initiator's puts complete on the target's acknowledgement
    over tcp) until the returned finish() -> {id: notify_count after}."""
    stop = threading.Event()

    def run():
        for i, n in want.items():
            pair.ea.wait_count(i, n, timeout)
        while not stop.is_set():
            pair.a.progress()
            pair.a.wait(0.01)
        return {i: pair.ea.notify_count(i) for i in want}
    j = pair.in_a(run)

    def finish():
        stop.set()
        return j()
    return finish


def paged_setup(pair, npages):
    dst = np.zeros(npages * PAGE, dtype=np.uint8)
    rk = pair.key_to_b(pair.a.register(dst))
    src = (np.arange(npages * PAGE, dtype=np.uint64) * 2654435761 >> 7).astype(np.uint8)
    return dst, rk, src, pair.b.register(src)


def expect_pages(dst, src, lpages, rpages):
    want = np.zeros_like(dst)
    for lp, rp in zip(lpages, rpages):
        want[rp * PAGE:(rp + 1) * PAGE] = src[lp * PAGE:(lp + 1) * PAGE]
    assert (dst == want).all()


@needs_torch
def test_put_pages_counted_index_kinds(pair, path):
    n = 64
    dst, rk, src, sm = paged_setup(pair, n)
    rng = np.random.default_rng(5)
    perm = rng.permutation(n)
    lp, rp = perm[:48], rng.permutation(n)[:48]
    # four batches, one per kind of index array, each one counted notification of id 7
    kinds = [(list(map(int, lp[0:12])), list(map(int, rp[0:12]))),
             (lp[12:24].astype(np.uint32), rp[12:24].astype(np.uint32)),
             (lp[24:36].astype(np.int64), rp[24:36].astype(np.int32)),
             (torch.tensor(lp[36:48], dtype=torch.int32),
              torch.tensor(rp[36:48], dtype=torch.int64))]
    finish = target_counts(pair, {7: 4})
    reqs = [pair.eb.put_pages(sm, rk, PAGE, a, b, counted=7) for a, b in kinds]
    assert [r.wait(20) for r in reqs] == [12 * PAGE] * 4
    assert finish() == {7: 0}               # all four taken
    expect_pages(dst, src, lp, rp)
    # read pages back by a paged get into a fresh region, identity on the local side
    back = np.zeros(48 * PAGE, dtype=np.uint8)
    serve = pair.serve_a()
    g = pair.eb.get_pages(pair.b.register(back), rk, PAGE, None, array.array("I", rp), count=48)
    assert g.wait(20) == 48 * PAGE
    serve()
    for i, r in enumerate(rp):
        assert (back[i * PAGE:(i + 1) * PAGE] == dst[r * PAGE:(r + 1) * PAGE]).all()


def test_pages_offsets_identity_ordered_untracked(pair, path):
    n = 16
    dst, rk, src, sm = paged_setup(pair, n)
    note = pair.expect_notify()
    # identity pages (no arrays), the count given; untracked then an ordered notification
    assert pair.eb.put_pages(sm, rk, PAGE, count=4, local_offset=8 * PAGE, offset=2 * PAGE,
                             track=False) is None
    pair.eb.put_pages(sm, rk, PAGE, [0], [15], notify=0x77).wait(20)
    assert note() == 0x77
    assert (dst[2 * PAGE:6 * PAGE] == src[8 * PAGE:12 * PAGE]).all()
    assert (dst[15 * PAGE:] == src[:PAGE]).all()
    assert not dst[:2 * PAGE].any() and not dst[6 * PAGE:15 * PAGE].any()


def test_batch_lists(pair, path):
    dst = np.zeros(8192, dtype=np.uint8)
    dm = pair.a.register(dst)
    rk = pair.key_to_b(dm)
    src = (np.arange(8192) % 251).astype(np.uint8)
    sm = pair.b.register(src)
    # local entries of several sizes, remote entries matching them somewhere else
    lens = [100, 1, 4000, 37, 0, 512]
    loffs = [0, 200, 300, 5000, 6000, 7000]
    roffs = [4096, 0, 10, 7000, 8000, 6000]
    L = pair.b.dlist_local([(sm, o, n) for o, n in zip(loffs, lens)])
    R = pair.eb.dlist_remote([(rk, o, n) for o, n in zip(roffs, lens)])
    assert len(L) == 6 and len(R) == 6
    note = pair.expect_notify()
    r = pair.eb.put_batch(L, R, notify=9)          # no index arrays: entry i to entry i
    assert r.wait(20) == sum(lens)
    assert note() == 9
    for o, ro, n in zip(loffs, roffs, lens):
        assert (dst[ro:ro + n] == src[o:o + n]).all()
    # a get batch with index arrays: remote entries 2 and 0 into local entries 2 and 0
    back = np.zeros(8192, dtype=np.uint8)
    bm = pair.b.register(back)
    BL = pair.b.dlist_local([(bm, o, n) for o, n in zip(loffs, lens)])
    RR = pair.eb.dlist_remote([(rk, o, n) for o, n in zip(roffs, lens)],
                              access=gpuwire.ACCESS_REMOTE_READ)
    serve = pair.serve_a()
    assert pair.eb.get_batch(BL, RR, np.array([2, 0], dtype=np.uint32), [2, 0]).wait(20) == 4100
    serve()
    assert (back[300:4300] == src[300:4300]).all() and (back[:100] == src[:100]).all()
    assert not back[200:300].any()
    # a list in use keeps its region from closing; a list of the wrong kind is refused
    with pytest.raises(gpuwire.GwError, match="BUSY"):
        bm.close()
    with pytest.raises(gpuwire.InvalidArgument, match="remote: a remote DescList"):
        pair.eb.put_batch(L, L)
    with pytest.raises(gpuwire.GwError, match="entry 1"):
        pair.eb.dlist_remote([(rk, 0, 10), (rk, 8190, 10)])
    for x in (BL, RR, L, R):
        x.close()
    bm.close()


@pytest.mark.parametrize("bad, msg", [
    ([0.0, 1.0], r"lpages\[0\] is a float, not an int"),
    ([0, -1], r"lpages\[1\] = -1 is negative"),
    ([0, 1 << 33], r"lpages\[1\] = 8589934592 is above 4294967295"),
    ("np.float32", "lpages: dtype with format 'f'"),
    ("np.int8", "lpages: dtype with format 'b'"),
    ("np.uint16", "lpages: dtype with format 'H'"),
    ("2d", "lpages: 2-dimensional"),
    ("strided", "lpages: not contiguous"),
    ("negative32", r"lpages\[2\] = -3 is negative"),
    ("negative64", r"lpages\[1\] = -1 is negative"),
    ("huge64", r"lpages\[0\] = 4294967296 is above 4294967295"),
    ("text", "lpages: a str is not an index array"),
    ("oob", r"lpages\[3\] = 64 is out of range"),
])
def test_bad_page_arrays(pair, path, bad, msg):
    dst, rk, src, sm = paged_setup(pair, 8)
    src8 = pair.b.register(np.zeros(64 * PAGE, dtype=np.uint8))
    arr = {"np.float32": np.zeros(2, dtype=np.float32), "np.int8": np.zeros(2, dtype=np.int8),
           "np.uint16": np.zeros(2, dtype=np.uint16), "2d": np.zeros((2, 2), dtype=np.uint32),
           "strided": np.arange(8, dtype=np.uint32)[::2],
           "negative32": np.array([0, 1, -3], dtype=np.int32),
           "negative64": np.array([0, -1], dtype=np.int64),
           "huge64": np.array([1 << 32], dtype=np.uint64), "text": "0,1",
           "oob": [0, 1, 2, 64]}.get(bad, bad) if not isinstance(bad, list) else bad
    local = src8 if bad != "oob" else sm
    with pytest.raises(gpuwire.InvalidArgument, match=msg) as e:
        pair.eb.put_pages(local, rk, PAGE, arr, [0, 1, 2, 3][:len(arr) if bad != "2d" else 2])
    assert e.value.status == -1 and e.value.name == "GW_ERR_INVALID"


@pytest.mark.parametrize("dtype, value, msg", [
    (np.int64, -1, "-1 is negative"),
    (np.int64, -(1 << 40), "-1099511627776 is negative"),
    (np.int64, 1 << 32, "4294967296 is above 4294967295"),
    (np.int64, (1 << 62) + 5, "4611686018427387909 is above 4294967295"),
    (np.uint64, 1 << 63, "9223372036854775808 is above 4294967295"),
    (np.int32, -1, "-1 is negative"),
    (np.int32, -(1 << 31), "-2147483648 is negative"),
])
def test_bad_index_in_long_arrays(pair, path, dtype, value, msg):
    """A bad item anywhere in a long 8-byte or signed array (at the start, in
    the middle or end of the checks' vector rounds, or in the tail after
    them) is named by array and position, on either side, and nothing
    moves; the next good post after it moves its pages."""
    n = 1003                                     # (not a multiple of the vector rounds: a scalar tail)
    dst, rk, src, sm = paged_setup(pair, n)
    rng = np.random.default_rng(11)
    lp, rp = rng.permutation(n).astype(dtype), rng.permutation(n).astype(dtype)
    for side, at in [("lpages", 0), ("rpages", 7), ("lpages", 8), ("rpages", 15), ("lpages", 16),
                     ("rpages", 517), ("lpages", 999), ("rpages", 1000), ("lpages", 1002)]:
        bad_l, bad_r = lp.copy(), rp.copy()
        (bad_l if side == "lpages" else bad_r)[at] = value
        with pytest.raises(gpuwire.InvalidArgument, match=r"%s\[%d\] = %s" % (side, at, msg)):
            pair.eb.put_pages(sm, rk, PAGE, bad_l, bad_r)
        assert not dst.any()                     # nothing moved
    finish = target_counts(pair, {3: 1})
    assert pair.eb.put_pages(sm, rk, PAGE, lp, rp, counted=3).wait(20) == n * PAGE
    assert finish() == {3: 0}
    expect_pages(dst, src, lp.astype(np.int64), rp.astype(np.int64))


def test_mixed_index_dtypes(pair, path):
    """The two arrays of one call may differ in type (int64 and int32,
    uint32 and uint64, a list and int64): each is read as it is; the
    narrowed copies of 8-byte arrays serve one call at a time, so calls
    with different lengths in a row and from two threads at once each move
    their own pages."""
    n = 640
    dst, rk, src, sm = paged_setup(pair, 2 * n)
    rng = np.random.default_rng(12)
    lp, rp = rng.permutation(2 * n)[:n], rng.permutation(2 * n)[:n]
    cuts = [(0, 5), (5, 100), (100, 101), (101, 300), (300, 340)]
    forms = [(np.int64, np.int32), (np.uint32, np.uint64), (None, np.int64), (np.int32, np.uint64),
             (np.uint64, np.int64)]
    finish = target_counts(pair, {4: len(cuts) + 2})
    for (a, b), (ta, tb) in zip(cuts, forms):
        la = list(map(int, lp[a:b])) if ta is None else lp[a:b].astype(ta)
        assert pair.eb.put_pages(sm, rk, PAGE, la, rp[a:b].astype(tb), counted=4).wait(20) == (b - a) * PAGE
    # two threads posting int64 arrays at once (one may find both kept buffers lent)
    errs = []

    def post(a, b):
        try:
            for _ in range(1):
                assert pair.eb.put_pages(sm, rk, PAGE, lp[a:b].astype(np.int64), rp[a:b].astype(np.int64),
                                         counted=4).wait(20) == (b - a) * PAGE
        except BaseException as e:               # (reported below)
            errs.append(e)
    ts = [threading.Thread(target=post, args=c) for c in [(340, 500), (500, 640)]]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    assert not errs, errs
    assert finish() == {4: 0}
    expect_pages(dst, src, lp, rp)


@needs_torch
def test_bad_page_arguments(pair, path):
    dst, rk, src, sm = paged_setup(pair, 8)
    eb = pair.eb
    with pytest.raises(gpuwire.GwError, match=r"rpages\[1\] = 8 is out of range.*remote page") as e:
        eb.put_pages(sm, rk, PAGE, [0, 1], [0, 8])
    assert e.value.name == "GW_ERR_OUT_OF_BOUNDS"       # checked against the key, nothing sent
    with pytest.raises(gpuwire.InvalidArgument, match="lpages has 2 entries but rpages has 3"):
        eb.put_pages(sm, rk, PAGE, [0, 1], [0, 1, 2])
    with pytest.raises(gpuwire.InvalidArgument, match="count: give it"):
        eb.put_pages(sm, rk, PAGE)
    with pytest.raises(gpuwire.InvalidArgument, match="count 3 differs"):
        eb.put_pages(sm, rk, PAGE, [0, 1], count=3)
    with pytest.raises(gpuwire.InvalidArgument, match="page_size"):
        eb.put_pages(sm, rk, 0, [0])
    with pytest.raises(gpuwire.InvalidArgument, match="one notification"):
        eb.put_pages(sm, rk, PAGE, [0], notify=1, counted=2)
    with pytest.raises(gpuwire.InvalidArgument, match="not a get"):
        eb._pages(1, sm, rk, PAGE, [0], None, None, 0, 0, 5, None, True)
    with pytest.raises(gpuwire.InvalidArgument, match="needs a registered Memory"):
        eb.put_pages(bytearray(PAGE), rk, PAGE, [0])
    with pytest.raises(gpuwire.InvalidArgument, match=r"lpages: dtype torch.float32|format 'f'"):
        eb.put_pages(sm, rk, PAGE, torch.zeros(2), [0, 1])
    with pytest.raises(gpuwire.InvalidArgument, match="lpages: dtype with format 'b'"):
        eb.put_pages(sm, rk, PAGE, torch.zeros(2, dtype=torch.int8), [0, 1])
    with pytest.raises(gpuwire.InvalidArgument, match="rpages: dtype torch.bfloat16"):
        eb.put_pages(sm, rk, PAGE, [0], torch.zeros(1, dtype=torch.bfloat16))
    with pytest.raises(gpuwire.InvalidArgument, match="rpages: a torch.sparse_coo tensor"):
        eb.put_pages(sm, rk, PAGE, [0], torch.zeros(1, dtype=torch.int32).to_sparse())
    with pytest.raises(gpuwire.InvalidArgument, match="lpages: not contiguous"):
        eb.put_pages(sm, rk, PAGE, torch.arange(8, dtype=torch.int32)[::2], [0, 1, 2, 3])
    with pytest.raises(gpuwire.InvalidArgument, match=r"lpages\[1\] = -2 is negative"):
        eb.put_pages(sm, rk, PAGE, torch.tensor([1, -2], dtype=torch.int64, requires_grad=False),
                     [0, 1])
    with pytest.raises(gpuwire.InvalidArgument, match=r"ridx\[0\] = -1 is negative"):
        L = pair.b.dlist_local([(sm, 0, 16)])
        eb.put_batch(L, eb.dlist_remote([(rk, 0, 16)]), [0], [-1])
    with pytest.raises(gpuwire.InvalidArgument, match="lidx: dtype with format 'd'"):
        eb.put_batch(L, eb.dlist_remote([(rk, 0, 16)]), np.zeros(1), [0])
    with pytest.raises(gpuwire.InvalidArgument, match="entry 0: local index 3 is outside"):
        eb.put_batch(L, eb.dlist_remote([(rk, 0, 16)]), [3], [0])


def test_wait_count_timeout_takes_nothing(pair):
    dst, rk, src, sm = paged_setup(pair, 4)
    finish = target_counts(pair, {3: 2})
    for _ in range(2):
        pair.eb.put_pages(sm, rk, PAGE, [0], [1], counted=3).wait(20)
    pair.eb.put_pages(sm, rk, PAGE, [2], [2], counted=4).wait(20)
    assert finish() == {3: 0}
    j = pair.in_a(lambda: pair.ea.wait_count(4, 2, 0.2))
    with pytest.raises(gpuwire.Timeout, match=r"wait_count\(id=4, count=2\): 1 arrived"):
        j()
    assert pair.ea.notify_count(4) == 1          # nothing taken by the timed-out wait
    pair.ea.wait_count(4, 1, 5)
    assert pair.ea.notify_count(4) == 0
    pair.ea.wait_count(4, 0, 0)                  # count 0: at once


def test_prepared_pages(pair, path):
    """A prepared paged put posted three times (the arrays copied when it was
    prepared, so changing them after does nothing), a prepared paged get, a
    refused post naming the page, and plans closed with what they name."""
    n = 16
    dst, rk, src, sm = paged_setup(pair, n)
    lp = np.array([3, 1, 4, 9], dtype=np.int32)
    rp = [0, 5, 10, 15]
    plan = pair.eb.prepare_put_pages(sm, rk, PAGE, lp, rp, counted=11)
    assert plan.count == 4 and plan.nbytes == 4 * PAGE and not plan.closed
    lp[:] = 0                                      # after preparing: not seen by the plan
    finish = target_counts(pair, {11: 3})
    reqs = [plan.post() for _ in range(2)] + [plan.post(True)]
    assert [r.wait(20) for r in reqs] == [4 * PAGE] * 3
    assert finish() == {11: 0}
    expect_pages(dst, src, [3, 1, 4, 9], rp)
    assert plan.post(False) is None                # untracked: completes with the next flush
    serve = pair.serve_a()
    pair.eb.flush().wait(20)
    back = np.zeros(2 * PAGE, dtype=np.uint8)
    bm = pair.b.register(back)
    g = pair.eb.prepare_get_pages(bm, rk, PAGE, None, np.array([15, 5], dtype=np.uint64))
    assert g.post().wait(20) == 2 * PAGE
    serve()
    assert (back[:PAGE] == src[9 * PAGE:10 * PAGE]).all()
    assert (back[PAGE:] == src[PAGE:2 * PAGE]).all()
    # checked when prepared, not at the post: the same messages as put_pages
    with pytest.raises(gpuwire.InvalidArgument, match=r"lpages\[1\] = -1 is negative"):
        pair.eb.prepare_put_pages(sm, rk, PAGE, [0, -1], [0, 1])
    with pytest.raises(gpuwire.InvalidArgument, match="count: give it"):
        pair.eb.prepare_get_pages(bm, rk, PAGE)
    with pytest.raises(gpuwire.InvalidArgument, match="one notification"):
        pair.eb.prepare_put_pages(sm, rk, PAGE, [0], notify=1, counted=2)
    # what the C call refuses raises at the post, naming the page
    bad = pair.eb.prepare_put_pages(sm, rk, PAGE, [0, 1], [0, n])
    with pytest.raises(gpuwire.GwError, match=r"rpages\[1\] = 16 is out of range") as e:
        bad.post()
    assert e.value.name == "GW_ERR_OUT_OF_BOUNDS"
    # a plan goes with the region, key or endpoint it names (it holds their handles)
    bm.close()
    assert g.closed and not plan.closed
    with pytest.raises(ValueError, match="closed"):
        g.post()
    plan.close()
    plan.close()
    assert plan.closed
    with pytest.raises(ValueError, match="closed"):
        plan.post()
    again = pair.eb.prepare_put_pages(sm, rk, PAGE, [0], [0])
    rk.close()
    assert again.closed and bad.closed


def test_prepared_pages_closed_in_flight(pair, path):
    """A plan closed right after its post, the transfer still running: the
    transfer completes with every page (the plan's prepared page list is
    freed when it ends), and a new plan over the same arrays works."""
    n = 64
    dst, rk, src, sm = paged_setup(pair, n)
    lp = list(range(n))[::-1]
    rp = list(range(n))
    finish = target_counts(pair, {12: 2})
    plan = pair.eb.prepare_put_pages(sm, rk, PAGE, lp, rp, counted=12)
    r = plan.post()
    plan.close()
    assert r.wait(20) == n * PAGE
    again = pair.eb.prepare_put_pages(sm, rk, PAGE, lp, rp, counted=12)
    assert again.post().wait(20) == n * PAGE
    again.close()
    assert finish() == {12: 0}
    expect_pages(dst, src, lp, rp)


def test_prepared_batch(pair, path):
    """A prepared list batch over two tables posted three times (the index
    arrays copied when it was prepared), a prepared get, a selection outside
    a list refused at the post naming the entry, a plan closed while its
    transfer runs, and plans closed with the lists they name."""
    n = 16
    dst, rk, src, sm = paged_setup(pair, n)
    L = pair.b.dlist_local_table(sm, count=n, length=PAGE)
    R = pair.eb.dlist_remote_table(rk, count=n, length=PAGE,
                                   access=gpuwire.ACCESS_REMOTE_WRITE | gpuwire.ACCESS_REMOTE_READ)
    li = np.array([3, 1, 4, 9], dtype=np.int32)
    ri = [0, 5, 10, 15]
    plan = pair.eb.prepare_put_batch(L, R, li, ri, counted=13)
    assert plan.count == 4 and not plan.closed
    li[:] = 0                                      # after preparing: not seen by the plan
    finish = target_counts(pair, {13: 3})
    reqs = [plan.post() for _ in range(2)] + [plan.post(True)]
    assert [r.wait(20) for r in reqs] == [4 * PAGE] * 3
    assert finish() == {13: 0}
    expect_pages(dst, src, [3, 1, 4, 9], ri)
    assert plan.post(False) is None                # untracked: completes with the next flush
    serve = pair.serve_a()
    pair.eb.flush().wait(20)
    back = np.zeros(2 * PAGE, dtype=np.uint8)
    bm = pair.b.register(back)
    BL = pair.b.dlist_local_table(bm, count=2, length=PAGE)
    g = pair.eb.prepare_get_batch(BL, R, None, np.array([15, 5], dtype=np.uint64))
    assert g.post().wait(20) == 2 * PAGE
    serve()
    assert (back[:PAGE] == src[9 * PAGE:10 * PAGE]).all()
    assert (back[PAGE:] == src[PAGE:2 * PAGE]).all()
    # checked when prepared: the same messages as put_batch
    with pytest.raises(gpuwire.InvalidArgument, match=r"lidx\[1\] = -1 is negative"):
        pair.eb.prepare_put_batch(L, R, [0, -1], [0, 1])
    with pytest.raises(gpuwire.InvalidArgument, match="count: give it"):
        pair.eb.prepare_get_batch(BL, R)
    with pytest.raises(gpuwire.InvalidArgument, match="one notification"):
        pair.eb.prepare_put_batch(L, R, [0], [0], notify=1, counted=2)
    with pytest.raises(gpuwire.InvalidArgument, match="remote: a remote DescList"):
        pair.eb.prepare_put_batch(L, L, [0], [0])
    # what the library refuses raises at the post, naming the entry
    bad = pair.eb.prepare_put_batch(L, R, [0, 1], [0, n])
    with pytest.raises(gpuwire.GwError, match="put_batch.*entry 1: remote index 16 is outside the list") as e:
        bad.post()
    assert e.value.name == "GW_ERR_INVALID"
    # closed right after its post: the transfer completes
    finish = target_counts(pair, {14: 1})
    last = pair.eb.prepare_put_batch(L, R, list(range(n))[::-1], list(range(n)), counted=14)
    r = last.post()
    last.close()
    assert r.wait(20) == n * PAGE
    assert finish() == {14: 0}
    expect_pages(dst, src, list(range(n))[::-1], list(range(n)))
    # a plan goes with the lists and endpoint it names (it holds their handles)
    BL.close()
    assert g.closed and not plan.closed
    with pytest.raises(ValueError, match="closed"):
        g.post()
    plan.close()
    plan.close()
    assert plan.closed
    with pytest.raises(ValueError, match="closed"):
        plan.post()
    again = pair.eb.prepare_put_batch(L, R, [0], [0])
    R.close()
    assert again.closed and bad.closed
    L.close()


def test_put_pages_c_method(pair, path):
    """put_pages/get_pages as the accelerator's C methods: arguments by
    keyword in any order, alternating regions and keys (the handles it
    keeps), int64 and big-endian NumPy arrays, and regions and keys closed
    after a post raising (not crashing) at the next one."""
    from gpuwire import core
    kind = type(core.Endpoint.__dict__["put_pages"]).__name__
    assert kind == ("method_descriptor" if path == "accelerator" else "function")
    n = 8
    dst, rk, src, sm = paged_setup(pair, n)
    dst2 = np.zeros(n * PAGE, dtype=np.uint8)
    rk2 = pair.key_to_b(pair.a.register(dst2))
    src2 = (np.arange(n * PAGE, dtype=np.uint64) * 40503 >> 3).astype(np.uint8)
    sm2 = pair.b.register(src2)
    eb = pair.eb
    serve = pair.serve_a()          # the target progresses (tcp completes puts on its answer)
    lp, rp = np.array([7, 0, 5], dtype=np.int64), np.array([1, 2, 3], dtype=np.uint32)
    reqs = [eb.put_pages(sm, rk, PAGE, lp, rp),
            eb.put_pages(rpages=rp[::-1].copy(), lpages=lp, page_size=PAGE, rkey=rk2, local=sm2),
            eb.put_pages(sm2, rk, PAGE, [4], [6], None, 0, 0, None, None, True),
            eb.put_pages(sm, rk2, PAGE, lpages=[1], rpages=np.array([0], dtype=np.int32), track=True)]
    assert [r.wait(20) for r in reqs] == [3 * PAGE, 3 * PAGE, PAGE, PAGE]
    for (d, s, lps, rps) in ((dst, src, [7, 0, 5], [1, 2, 3]), (dst2, src2, [7, 0, 5], [3, 2, 1])):
        for a, b in zip(lps, rps):
            assert (d[b * PAGE:(b + 1) * PAGE] == s[a * PAGE:(a + 1) * PAGE]).all()
    assert (dst[6 * PAGE:7 * PAGE] == src2[4 * PAGE:5 * PAGE]).all()
    assert (dst2[:PAGE] == src[PAGE:2 * PAGE]).all()
    with pytest.raises(TypeError):
        eb.put_pages(sm, rk, PAGE, [0], [0], bogus=1)
    with pytest.raises(gpuwire.InvalidArgument, match="lpages: byte order '>' is not this machine's"):
        eb.put_pages(sm, rk, PAGE, np.array([0, 1], dtype=">u4"), [0, 1])
    # a paged get, track by position
    back = np.zeros(PAGE, dtype=np.uint8)
    assert eb.get_pages(pair.b.register(back), rk, PAGE, [0], [6], None, 0, 0, True).wait(20) == PAGE
    assert (back == dst[6 * PAGE:7 * PAGE]).all()
    # closed after a post: the next one says which, nothing crashes
    sm2.close()
    with pytest.raises(gpuwire.InvalidArgument, match="local memory region is closed"):
        eb.put_pages(sm2, rk2, PAGE, [0], [0])
    rk2.close()
    with pytest.raises(gpuwire.InvalidArgument, match="remote key is closed"):
        eb.put_pages(sm, rk2, PAGE, [0], [0])
    eb.put_pages(sm, rk, PAGE, [2], [0]).wait(20)
    serve()
    assert (dst[:PAGE] == src[2 * PAGE:3 * PAGE]).all()


def test_put_batch_c_method(pair, path):
    """put_batch/get_batch as the accelerator's C methods: arguments by
    keyword in any order, alternating lists (the handles it keeps), int64,
    int32 and list index arrays, notify, counted and untracked posts, a bad
    item of an 8-byte array refused in the same words by either path, and a
    list closed after a post raising (not crashing) at the next one."""
    from gpuwire import core
    kind = type(core.Endpoint.__dict__["put_batch"]).__name__
    assert kind == ("method_descriptor" if path == "accelerator" else "function")
    n = 8
    dst, rk, src, sm = paged_setup(pair, n)
    eb = pair.eb
    L = pair.b.dlist_local_table(sm, count=n, length=PAGE)
    R = eb.dlist_remote_table(rk, count=n, length=PAGE)
    L2 = pair.b.dlist_local_table(sm, count=n // 2, length=2 * PAGE)      # 2-page entries
    R2 = eb.dlist_remote_table(rk, count=n // 2, length=2 * PAGE)
    finish = target_counts(pair, {6: 3})
    reqs = [eb.put_batch(L, R, np.array([7, 0], dtype=np.int64), np.array([1, 2], dtype=np.int32), counted=6),
            eb.put_batch(ridx=[3], lidx=np.array([1], dtype=np.uint64), remote=R2, local=L2, counted=6),
            eb.put_batch(L, R, None, None, 1, None, 6, True)]                # count by position: entry 0 to 0
    assert [r.wait(20) for r in reqs] == [2 * PAGE, 2 * PAGE, PAGE]
    assert eb.put_batch(L, R, [5], [3], track=False) is None
    eb.flush().wait(20)
    assert finish() == {6: 0}
    for a, b in ((7, 1), (0, 2), (2, 6), (3, 7), (0, 0), (5, 3)):
        assert (dst[b * PAGE:(b + 1) * PAGE] == src[a * PAGE:(a + 1) * PAGE]).all(), (a, b)
    with pytest.raises(TypeError):
        eb.put_batch(L, R, [0], [0], bogus=1)
    with pytest.raises(gpuwire.InvalidArgument, match="one notification"):
        eb.put_batch(L, R, [0], [0], notify=1, counted=2)
    with pytest.raises(gpuwire.InvalidArgument, match="remote: a remote DescList"):
        eb.put_batch(L, L, [0], [0])
    with pytest.raises(gpuwire.InvalidArgument, match="count: give it"):
        eb.put_batch(L, R2)
    # a bad item of an 8-byte array: the library's words (accelerator) are the package's (ctypes)
    bad = np.array([0, 1, 2], dtype=np.int64)
    bad[2] = 1 << 32
    with pytest.raises(gpuwire.InvalidArgument, match=r"ridx\[2\] = 4294967296 is above 4294967295"):
        eb.put_batch(L, R, np.array([0, 1, 2], dtype=np.int64), bad)
    bad[2] = -5
    with pytest.raises(gpuwire.InvalidArgument, match=r"lidx\[2\] = -5 is negative"):
        eb.put_batch(L, R, bad, [0, 1, 2])
    # the library's own refusal (an index outside the list) names the entry
    with pytest.raises(gpuwire.InvalidArgument, match="entry 1: remote index 8 is outside the list"):
        eb.put_batch(L, R, [0, 1], [0, 8])
    # a get, track by position
    back = np.zeros(2 * PAGE, dtype=np.uint8)
    BL = pair.b.dlist_local_table(pair.b.register(back), count=2, length=PAGE)
    RR = eb.dlist_remote_table(rk, count=n, length=PAGE, access=gpuwire.ACCESS_REMOTE_READ)
    serve = pair.serve_a()
    assert eb.get_batch(BL, RR, [1, 0], np.array([1, 6], dtype=np.int64), None, True).wait(20) == 2 * PAGE
    assert (back[PAGE:] == dst[PAGE:2 * PAGE]).all() and (back[:PAGE] == dst[6 * PAGE:7 * PAGE]).all()
    # closed after a post: the next one says so, nothing crashes
    L2.close()
    with pytest.raises(gpuwire.InvalidArgument, match="descriptor list is closed"):
        eb.put_batch(L2, R2, [0], [0])
    eb.put_batch(L, R, [4], [4]).wait(20)
    serve()
    assert (dst[4 * PAGE:5 * PAGE] == src[4 * PAGE:5 * PAGE]).all()
    for x in (BL, RR, R2, L, R):
        x.close()
