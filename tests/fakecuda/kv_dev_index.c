/* SPDX-License-Identifier: Apache-2.0 */
/* kv_dev_index.c - paged GPU -> peer GPU transfers whose index arrays live
 * in GPU memory (gw_xfer_pages with opts.index_mem GW_INDEX_DEVICE), between
 * two processes against the fake CUDA driver, which runs the bounds-check
 * kernel and the page kernel's gate as the GPU would.
 *
 * Over intra: a put from device index arrays with a counted notification,
 * a put with the local array NULL (0..n-1) and the remote one written on a
 * stream of the caller's (opts.index_stream), then a get from device arrays;
 * every byte is checked (the target's region after the puts, the
 * initiator's after the get).  Then a put with a bad remote index in the
 * middle and a get with a bad local index in the middle: each fails at
 * completion with GW_ERR_INVALID naming the entry and the GPU check, leaves
 * every destination byte as it was, and the put's counted notification
 * never arrives.  A local host region is refused at posting with
 * GW_ERR_UNSUPPORTED.  Over tcp (KV_DEV_TCP=1): the device put is refused
 * with GW_ERR_UNSUPPORTED naming the transport, and nothing else runs.
 * Then runs of consecutive transfers (each its own generation of the GPU's
 * bounds word, which is never reset between them): puts and gets, good
 * and bad ones interleaved (good, bad, good; bad entries first, in the
 * middle, last; local and remote), every good get's bytes checked, every
 * bad one leaving the destination as it was and its counted notification
 * never arriving; the target counts exactly the good puts' notifications.
 * GW_TEST_PAGE_GEN_WRAP (a test hook) makes the generations run out every
 * few transfers, so that the word's reset is exercised among them.
 * The fake driver's device addresses are not mapped for the host (a read
 * there faults), so the test also shows the host never reads the arrays.
 * Against the fake it also counts the driver calls of one transfer
 * (fakecuda_calls): with both arrays in one allocation one pointer query,
 * one launch (cooperative: the check and the copy fused), no reset of the
 * word and no copy of it back; KV_DEV_FORM names the form expected:
 * "fused" (default), "split" (GW_TEST_PAGE_CHECK_FORM=split, or a driver
 * that refuses or lacks cooperative launches: check kernel + gated page
 * kernel), "reset" (GW_TEST_PAGE_CHECK_FORM=reset: the word reset and
 * copied back per transfer), "rcheck" (few entries: one plain launch of
 * gw_page_rcheck, every block checking every entry; the other forms run
 * with GW_TEST_PAGE_RCHECK_MAX=0 so that these 200 entries reach them).
 * tests/gpu runs the same program on a real driver (gpu_kv_dev_index_*). */
#include <dlfcn.h>
#include <poll.h>
#include <unistd.h>

#include "cuda/cuda_wrap.h"
#include "harness.h"
#include "fc_dev.h"

#define N 200
#define POOL 400
#define PAGE 1040 /* (16-byte aligned, not a power of two) */
#define BAD (N / 2 + 3)
#define RUN 9 /* transfers in each run of consecutive ones */
/* the puts of the run: 1 good, 0 bad */
static const int put_good[RUN] = {1, 0, 1, 1, 0, 0, 1, 0, 1};

static gwt_chan_t pch, cch;
static int tcp;

/* The target's region after the two good puts. */
static void target_want(uint8_t *want)
{
    size_t rsz = (size_t)POOL * PAGE;
    uint8_t *src = malloc(rsz);
    uint32_t li[N], ri[N];
    REQUIRE(src);
    gwt_fill(want, rsz, 1000);
    gwt_fill(src, rsz, 2000);
    fc_pick(li, N, POOL, 7);
    fc_pick(ri, N, POOL, 8);
    for (uint32_t i = 0; i < N; i++)
        memcpy(want + (size_t)ri[i] * PAGE, src + (size_t)li[i] * PAGE, PAGE);
    fc_pick(ri, N, POOL, 9);
    for (uint32_t i = 0; i < N; i++) /* (the local array NULL: page i) */
        memcpy(want + (size_t)ri[i] * PAGE, src + (size_t)i * PAGE, PAGE);
    free(src);
}

static int server(void *arg)
{
    (void)arg;
    const gw_cuda_t *cu = fc_cuda(1);
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    gw_listener_t *l;
    gw_ep_t *ep = gwt_listen_accept(ctx, &cch, &l);
    size_t rsz = (size_t)POOL * PAGE;
    void *reg = fc_dev_alloc_filled(cu, rsz, 1000);
    gw_mem_t *mem;
    REQUIRE_OK(gw_mem_reg(ctx, reg, rsz, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, &mem));
    gwt_send_rkey(ep, mem, 100);
    if (!tcp) {
        CHECK_ST(gw_notify_count_wait(ep, 9, 2, 30000), GW_OK);
        int ngood = 0;
        for (int k = 0; k < RUN; k++)
            ngood += put_good[k];
        CHECK_ST(gw_notify_count_wait(ep, 12, (uint64_t)ngood, 30000), GW_OK);
        fc_wait_chan(&cch, ctx); /* the bad puts have completed (failed) */
        /* their counted notifications never come */
        CHECK_ST(gw_notify_count_wait(ep, 10, 1, 500), GW_ERR_TIMEOUT);
        CHECK_ST(gw_notify_count_wait(ep, 12, 1, 300), GW_ERR_TIMEOUT);
        uint8_t *want = malloc(rsz), *got = malloc(rsz);
        REQUIRE(want && got);
        target_want(want);
        REQUIRE(cu->cuMemcpyDtoH(got, (CUdeviceptr)(uintptr_t)reg, rsz) == CUDA_SUCCESS);
        size_t off = 0;
        while (off < rsz && got[off] == want[off])
            off++;
        if (off < rsz)
            fprintf(stderr, "target: first wrong byte at %zu (page %zu)\n", off, off / PAGE);
        CHECK(off == rsz);
        free(want);
        free(got);
        REQUIRE(gwt_chan_send(&cch, "v", 1) == 0);
    }
    fc_wait_chan(&cch, ctx); /* serve until the initiator is done */
    CHECK_ST(gw_ep_close(ep, 2000), GW_OK);
    CHECK_ST(gw_mem_dereg(mem), GW_OK);
    gw_listener_destroy(l);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    return gwt_done("kv_dev_index server");
}

/* The fake driver's call counter (NULL on a real driver). */
typedef unsigned long (*calls_fn)(const char *);
static calls_fn fake_calls(void)
{
    const char *lib = getenv("GPUWIRE_CUDA_LIB");
    void *h = lib ? dlopen(lib, RTLD_NOW | RTLD_NOLOAD) : NULL;
    return h ? (calls_fn)(uintptr_t)dlsym(h, "fakecuda_calls") : NULL;
}

/* The driver calls of one transfer, counted around it. */
static const char *const cnames[] = {"cuPointerGetAttributes", "cuMemsetD32Async", "cuMemcpyDtoHAsync",
                                     "cuLaunchKernel", "cuLaunchCooperativeKernel", "cuStreamWaitEvent"};
#define NC (sizeof(cnames) / sizeof(cnames[0]))
typedef struct {
    unsigned long c[NC], all;
} calls_t;
static void calls_now(calls_fn f, calls_t *c)
{
    for (size_t i = 0; f && i < NC; i++)
        c->c[i] = f(cnames[i]);
    c->all = f ? f(NULL) : 0;
}

/* n indices into a new device array. */
static uint32_t *dev_idx(const gw_cuda_t *cu, const uint32_t *h, uint32_t n)
{
    uint32_t *d = fc_dev_alloc(cu, n * sizeof(uint32_t));
    REQUIRE(cu->cuMemcpyHtoD((CUdeviceptr)(uintptr_t)d, h, n * sizeof(uint32_t)) == CUDA_SUCCESS);
    return d;
}

/* Two index arrays in one device allocation (two slices of one tensor):
 * a at d, b at d + n. */
static uint32_t *dev_idx2(const gw_cuda_t *cu, const uint32_t *a, const uint32_t *b, uint32_t n)
{
    uint32_t *d = fc_dev_alloc(cu, 2 * n * sizeof(uint32_t));
    REQUIRE(cu->cuMemcpyHtoD((CUdeviceptr)(uintptr_t)d, a, n * sizeof(uint32_t)) == CUDA_SUCCESS);
    REQUIRE(cu->cuMemcpyHtoD((CUdeviceptr)(uintptr_t)(d + n), b, n * sizeof(uint32_t)) == CUDA_SUCCESS);
    return d;
}

/* Where a bad run transfer puts its bad entry: first, middle, last. */
static uint32_t bad_at(int k)
{
    return k % 3 == 0 ? 0 : k % 3 == 1 ? BAD : N - 1;
}

/* One failed transfer's error names entry e, the side and the GPU check. */
static void check_bad(gw_context_t *ctx, uint32_t e, const char *side)
{
    char want[32];
    snprintf(want, sizeof(want), "entry %u:", e);
    const char *m = gw_last_error(ctx);
    if (!strstr(m, want) || !strstr(m, side) || !strstr(m, "on the GPU"))
        fprintf(stderr, "bad transfer (entry %u, %s): %s\n", e, side, m);
    CHECK(strstr(m, want) != NULL && strstr(m, side) != NULL && strstr(m, "on the GPU") != NULL);
}

static size_t first_diff(const uint8_t *a, const uint8_t *b, size_t n)
{
    size_t off = 0;
    while (off < n && a[off] == b[off])
        off++;
    return off;
}

int main(void)
{
    tcp = getenv("KV_DEV_TCP") && atoi(getenv("KV_DEV_TCP")) > 0;
    gwt_chan_pair(&pch, &cch);
    int pid = gwt_spawn(server, NULL); /* before CUDA is initialised here */
    const gw_cuda_t *cu = fc_cuda(1);
    gw_context_t *ctx;
    gw_ep_t *ep = fc_client(&pch, &ctx, tcp ? "tcp" : "intra");
    uint64_t rb;
    gw_rkey_t *rk = gwt_recv_rkey(ep, 100, &rb);
    size_t rsz = (size_t)POOL * PAGE;
    uint8_t *src = fc_dev_alloc_filled(cu, rsz, 2000);
    uint8_t *dst = fc_dev_alloc_filled(cu, rsz, 3000);
    gw_mem_t *ms, *md;
    REQUIRE_OK(gw_mem_reg(ctx, src, rsz, GW_ACCESS_LOCAL, &ms));
    REQUIRE_OK(gw_mem_reg(ctx, dst, rsz, GW_ACCESS_LOCAL, &md));
    uint32_t li[N], ri[N];
    fc_pick(li, N, POOL, 7);
    fc_pick(ri, N, POOL, 8);
    uint32_t *dli = dev_idx(cu, li, N), *dri = dev_idx(cu, ri, N);
    gw_xfer_opts_t o = {.size = sizeof(o), .notify = GW_NOTIFY_COUNTED, .value = 9, .index_mem = GW_INDEX_DEVICE};
    gw_request_t *q;
    if (tcp) {
        CHECK_ST(gw_xfer_pages(ep, GW_XFER_PUT, ms, src, dli, rk, rb, dri, N, PAGE, &o, &q), GW_ERR_UNSUPPORTED);
        fprintf(stderr, "tcp: %s\n", gw_last_error(ctx));
        CHECK(strstr(gw_last_error(ctx), "tcp transport") != NULL);
        goto out;
    }
    /* a put from device arrays, then one with no local array */
    REQUIRE_OK(gw_xfer_pages(ep, GW_XFER_PUT, ms, src, dli, rk, rb, dri, N, PAGE, &o, &q));
    CHECK_ST(gw_request_wait(q, 30000), GW_OK);
    gw_request_free(q);
    uint32_t ri2[N];
    fc_pick(ri2, N, POOL, 9);
    /* (written on a stream of the caller's, which the transfer waits for) */
    uint32_t *dri2 = fc_dev_alloc(cu, N * sizeof(uint32_t));
    CUstream us;
    REQUIRE(cu->cuStreamCreate(&us, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    REQUIRE(cu->cuMemcpyHtoDAsync((CUdeviceptr)(uintptr_t)dri2, ri2, sizeof(ri2), us) == CUDA_SUCCESS);
    gw_xfer_opts_t os = o;
    os.index_stream = us;
    REQUIRE_OK(gw_xfer_pages(ep, GW_XFER_PUT, ms, src, NULL, rk, rb, dri2, N, PAGE, &os, &q));
    CHECK_ST(gw_request_wait(q, 30000), GW_OK);
    gw_request_free(q);
    /* a put with a remote index past the key in the middle: fails at
     * completion naming the entry, nothing moved, no notification */
    uint32_t bad[N];
    fc_pick(li, N, POOL, 11);
    fc_pick(bad, N, POOL, 12);
    bad[BAD] = POOL;
    uint32_t *dbl = dev_idx(cu, li, N), *dbr = dev_idx(cu, bad, N);
    gw_xfer_opts_t ob = o;
    ob.value = 10;
    REQUIRE_OK(gw_xfer_pages(ep, GW_XFER_PUT, ms, src, dbl, rk, rb, dbr, N, PAGE, &ob, &q));
    CHECK_ST(gw_request_wait(q, 30000), GW_ERR_INVALID);
    gw_request_free(q);
    fprintf(stderr, "bad put: %s\n", gw_last_error(ctx));
    char want_entry[32];
    snprintf(want_entry, sizeof(want_entry), "entry %d:", BAD);
    CHECK(strstr(gw_last_error(ctx), want_entry) != NULL);
    CHECK(strstr(gw_last_error(ctx), "remote page") != NULL);
    CHECK(strstr(gw_last_error(ctx), "on the GPU") != NULL);
    /* a run of puts, good and bad: a good one writes what the target holds
     * already (pages i -> ri2[i], the last good put's), a bad one pages that
     * would change it; the arrays are two slices of one allocation */
    calls_fn calls = fake_calls();
    const char *form = getenv("KV_DEV_FORM") ? getenv("KV_DEV_FORM") : "fused";
    int wrap = getenv("GW_TEST_PAGE_GEN_WRAP") != NULL;
    uint32_t iota[N];
    for (uint32_t i = 0; i < N; i++)
        iota[i] = i;
    uint32_t *dgood = dev_idx2(cu, iota, ri2, N);
    unsigned long resets = 0;
    gw_xfer_opts_t orun = o;
    orun.value = 12;
    for (int k = 0; k < RUN; k++) {
        uint32_t *arr = dgood;
        uint32_t e = bad_at(k);
        int remote = k % 2; /* (bad runs alternate the side) */
        if (!put_good[k]) {
            uint32_t l[N], r[N];
            fc_pick(l, N, POOL, 30 + k);
            fc_pick(r, N, POOL, 40 + k);
            if (remote)
                r[e] = POOL + (uint32_t)k;
            else
                l[e] = POOL + 1000u * (uint32_t)k;
            arr = dev_idx2(cu, l, r, N);
        }
        calls_t c0, c1;
        calls_now(calls, &c0);
        REQUIRE_OK(gw_xfer_pages(ep, GW_XFER_PUT, ms, src, arr, rk, rb, arr + N, N, PAGE, &orun, &q));
        calls_now(calls, &c1);
        CHECK_ST(gw_request_wait(q, 30000), put_good[k] ? GW_OK : GW_ERR_INVALID);
        gw_request_free(q);
        if (!put_good[k])
            check_bad(ctx, e, remote ? "remote page" : "local page");
        if (!calls)
            continue;
        unsigned long d[NC];
        for (size_t i = 0; i < NC; i++)
            d[i] = c1.c[i] - c0.c[i];
        if (k == 0 || (k == RUN - 1))
            fprintf(stderr, "put %d: driver calls at posting: %lu (pointer queries %lu, memsets %lu, copies back %lu, "
                    "launches %lu, cooperative %lu, stream waits %lu)\n", k, c1.all - c0.all, d[0], d[1], d[2], d[3],
                    d[4], d[5]);
        CHECK(d[0] == 1); /* both arrays in one allocation: one query */
        CHECK(d[5] == 0);
        if (!strcmp(form, "reset")) {
            CHECK(d[1] == 1 && d[2] == 1 && d[3] == 2 && d[4] == 0);
            continue;
        }
        resets += d[1];
        CHECK(d[2] == 0 && d[1] <= 1);
        if (!strcmp(form, "split"))
            CHECK(d[3] == 2 && d[4] == 0);
        else if (!strcmp(form, "rcheck")) /* (one plain launch: every block checks every entry) */
            CHECK(d[3] == 1 && d[4] == 0);
        else if (!strcmp(form, "refuse")) /* (one cooperative try, then the two launches) */
            CHECK(d[3] == 2);
        else
            CHECK(d[3] == 0 && d[4] == 1);
    }
    {
        /* which form the library takes on this GPU (a real one: for the log) */
        CUdevice cd = 0;
        char why[200] = "";
        REQUIRE(cu->cuCtxGetDevice(&cd) == CUDA_SUCCESS);
        int fused = gw_cuda_page_fused_ok((int)cd, why, sizeof(why));
        fprintf(stderr, "GPU %d: the check %s%s\n", (int)cd,
                fused ? "and the copy in one cooperative launch" : "in a launch of its own: ", fused ? "" : why);
        if (calls && !strcmp(form, "fused"))
            CHECK(fused);
        if (calls && !strcmp(form, "refuse"))
            CHECK(!fused && strstr(why, "cuLaunchCooperativeKernel") != NULL);
    }
    if (calls && strcmp(form, "reset")) {
        /* the word is reset only when its generations run out */
        fprintf(stderr, "puts: %lu resets of the bounds word in %d transfers\n", resets, RUN);
        CHECK(wrap ? resets >= 2 : resets == 0);
    }
    REQUIRE(gwt_chan_send(&pch, "b", 1) == 0);
    fc_wait_chan(&pch, ctx); /* the target checked every byte */
    /* a get from device arrays into dst, every byte checked */
    fc_pick(li, N, POOL, 17);
    fc_pick(ri, N, POOL, 18);
    uint32_t *dgl = dev_idx(cu, li, N), *dgr = dev_idx(cu, ri, N);
    gw_xfer_opts_t og = {.size = sizeof(og), .index_mem = GW_INDEX_DEVICE};
    REQUIRE_OK(gw_xfer_pages(ep, GW_XFER_GET, md, dst, dgl, rk, rb, dgr, N, PAGE, &og, &q));
    CHECK_ST(gw_request_wait(q, 30000), GW_OK);
    gw_request_free(q);
    uint8_t *tgt = malloc(rsz), *want = malloc(rsz), *got = malloc(rsz);
    REQUIRE(tgt && want && got);
    target_want(tgt);
    gwt_fill(want, rsz, 3000);
    for (uint32_t i = 0; i < N; i++)
        memcpy(want + (size_t)li[i] * PAGE, tgt + (size_t)ri[i] * PAGE, PAGE);
    REQUIRE(cu->cuMemcpyDtoH(got, (CUdeviceptr)(uintptr_t)dst, rsz) == CUDA_SUCCESS);
    size_t off = 0;
    while (off < rsz && got[off] == want[off])
        off++;
    if (off < rsz)
        fprintf(stderr, "get: first wrong byte at %zu (page %zu)\n", off, off / PAGE);
    CHECK(off == rsz);
    /* a get with a local index past the region in the middle: nothing lands */
    uint32_t badl[N];
    fc_pick(badl, N, POOL, 21);
    badl[BAD] = POOL + 5;
    uint32_t *dgb = dev_idx(cu, badl, N);
    REQUIRE_OK(gw_xfer_pages(ep, GW_XFER_GET, md, dst, dgb, rk, rb, dgr, N, PAGE, &og, &q));
    CHECK_ST(gw_request_wait(q, 30000), GW_ERR_INVALID);
    gw_request_free(q);
    fprintf(stderr, "bad get: %s\n", gw_last_error(ctx));
    CHECK(strstr(gw_last_error(ctx), want_entry) != NULL);
    CHECK(strstr(gw_last_error(ctx), "local page") != NULL);
    REQUIRE(cu->cuMemcpyDtoH(got, (CUdeviceptr)(uintptr_t)dst, rsz) == CUDA_SUCCESS);
    off = 0;
    while (off < rsz && got[off] == want[off])
        off++;
    CHECK(off == rsz);
    /* a run of gets, good and bad (bad, good, good, bad, good, ...), each
     * checked: a good one lands its pages, a bad one leaves dst as it was */
    for (int k = 0; k < RUN; k++) {
        int good = !put_good[k];
        uint32_t l[N], r[N], e = bad_at(k + 1);
        int remote = k % 2;
        fc_pick(l, N, POOL, 50 + k);
        fc_pick(r, N, POOL, 60 + k);
        if (!good) {
            if (remote)
                r[e] = POOL + 7;
            else
                l[e] = UINT32_MAX;
        }
        uint32_t *arr = dev_idx2(cu, l, r, N);
        REQUIRE_OK(gw_xfer_pages(ep, GW_XFER_GET, md, dst, arr, rk, rb, arr + N, N, PAGE, &og, &q));
        CHECK_ST(gw_request_wait(q, 30000), good ? GW_OK : GW_ERR_INVALID);
        gw_request_free(q);
        if (good)
            for (uint32_t i = 0; i < N; i++)
                memcpy(want + (size_t)l[i] * PAGE, tgt + (size_t)r[i] * PAGE, PAGE);
        else
            check_bad(ctx, e, remote ? "remote page" : "local page");
        REQUIRE(cu->cuMemcpyDtoH(got, (CUdeviceptr)(uintptr_t)dst, rsz) == CUDA_SUCCESS);
        off = first_diff(got, want, rsz);
        if (off < rsz)
            fprintf(stderr, "get %d (%s): first wrong byte at %zu (page %zu)\n", k, good ? "good" : "bad", off,
                    off / PAGE);
        CHECK(off == rsz);
    }
    /* a local host region: refused at posting */
    uint8_t *hb = malloc(rsz);
    gw_mem_t *mh;
    REQUIRE(hb);
    REQUIRE_OK(gw_mem_reg(ctx, hb, rsz, GW_ACCESS_LOCAL, &mh));
    CHECK_ST(gw_xfer_pages(ep, GW_XFER_PUT, mh, hb, dli, rk, rb, dri, N, PAGE, &o, &q), GW_ERR_UNSUPPORTED);
    fprintf(stderr, "host region: %s\n", gw_last_error(ctx));
    CHECK(strstr(gw_last_error(ctx), "host memory") != NULL);
    /* an array in host memory, or too short: refused at posting */
    CHECK_ST(gw_xfer_pages(ep, GW_XFER_PUT, ms, src, li, rk, rb, dri, N, PAGE, &o, &q), GW_ERR_INVALID);
    CHECK(strstr(gw_last_error(ctx), "lpages") && strstr(gw_last_error(ctx), "is not GPU memory"));
    uint32_t *shrt = fc_dev_alloc(cu, 4096);
    CHECK_ST(gw_xfer_pages(ep, GW_XFER_PUT, ms, src, NULL, rk, rb, shrt, 4096 / 4 + 1, 1, &o, &q), GW_ERR_INVALID);
    fprintf(stderr, "short array: %s\n", gw_last_error(ctx));
    CHECK(strstr(gw_last_error(ctx), "holds fewer than") != NULL);
    /* the list form and prepared page lists take no device arrays; an
     * index_mem that is no GW_INDEX_* value is refused */
    CHECK_ST(gw_xfer_batch(ep, GW_XFER_PUT, NULL, NULL, NULL, NULL, 0, &o, &q), GW_ERR_UNSUPPORTED);
    gw_pages_t *pl;
    REQUIRE_OK(gw_pages_create(ctx, li, ri, N, &pl));
    CHECK_ST(gw_xfer_pages_prepared(ep, GW_XFER_PUT, ms, src, rk, rb, pl, PAGE, &o, &q), GW_ERR_INVALID);
    CHECK(strstr(gw_last_error(ctx), "prepared page list") != NULL);
    CHECK_ST(gw_pages_destroy(pl), GW_OK);
    gw_xfer_opts_t ox = o;
    ox.index_mem = 7;
    CHECK_ST(gw_xfer_pages(ep, GW_XFER_PUT, ms, src, dli, rk, rb, dri, N, PAGE, &ox, &q), GW_ERR_INVALID);
    CHECK(strstr(gw_last_error(ctx), "index_mem 7") != NULL);
    CHECK_ST(gw_mem_dereg(mh), GW_OK);
    REQUIRE(cu->cuStreamSynchronize(us) == CUDA_SUCCESS);
    REQUIRE(cu->cuStreamDestroy(us) == CUDA_SUCCESS);
    free(hb);
    free(tgt);
    free(want);
    free(got);
    if (getenv("FAKECUDA_LAUNCHES")) {
        /* each transfer that reached the GPU: the fused kernel, or a check
         * kernel before a gated page kernel */
        unsigned want_n = 5 + 2 * RUN, items, fitems;
        unsigned np = fc_launches("gw_page_copy", NULL, 0, NULL), nc = fc_launches("gw_page_check", &items, 0, NULL);
        unsigned nf = fc_launches("gw_page_fused", &fitems, 0, NULL), rit = 0;
        unsigned nr = fc_launches("gw_page_rcheck", &rit, 0, NULL);
        fprintf(stderr, "launches: gw_page_fused %u, gw_page_rcheck %u, gw_page_copy %u, gw_page_check %u (%u entries)\n",
                nf, nr, np, nc, items);
        if (!strcmp(form, "rcheck"))
            CHECK(nr == want_n && rit == want_n * N && nf == 0 && np == 0 && nc == 0);
        else if (!strcmp(form, "fused"))
            CHECK(nr == 0 && nf == want_n && fitems == want_n * N && np == 0 && nc == 0);
        else
            CHECK(nr == 0 && nf == 0 && np == want_n && nc == want_n && items == want_n * N);
        CHECK(fc_launches("gw_batch_copy", NULL, 0, NULL) == 0);
    }
out:
    REQUIRE(gwt_chan_send(&pch, "d", 1) == 0);
    gw_rkey_destroy(rk);
    CHECK_ST(gw_mem_dereg(ms), GW_OK);
    CHECK_ST(gw_mem_dereg(md), GW_OK);
    CHECK_ST(gw_ep_close(ep, 2000), GW_OK);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    CHECK(gwt_wait(pid, 60) == 0);
    return gwt_done("kv_dev_index");
}
