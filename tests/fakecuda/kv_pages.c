/* SPDX-License-Identifier: Apache-2.0 */
/* kv_pages.c - paged GPU -> peer GPU transfers (gw_xfer_pages, the form
 * bench/compare/kv_shapes.py's one-region shapes use) between two processes
 * over intra against the fake CUDA driver, with a counted notification the
 * target waits for.
 *
 * The test: ROUNDS puts of randomly chosen distinct pages (a different
 * choice each round, index arrays rewritten by the caller right after each
 * post, as a serving engine reuses its block-table buffer; in the last
 * burst every other one from a prepared page list, gw_xfer_pages_prepared,
 * one of them destroyed right after its post, while it runs; in the first
 * two bursts one in three from int64 and one from uint64 arrays,
 * opts.index_type GW_INDEX_I64 / GW_INDEX_U64, narrowed in the pinned copy
 * the transport makes, and the first of the last from int32 ones), in
 * bursts of
 * three posted back to back before any is waited for, then a get; the target checks
 * every byte of its region after the puts (each selected page where it
 * belongs, the rest untouched), the initiator every byte it got.  With
 * FAKECUDA_LAUNCHES set, each transfer must have gone in one launch of the
 * page kernel, and the pinned memory the index arrays went through must
 * have been allocated at most once per transfer in flight together
 * (kept by the transport and reused after that), plus once per prepared
 * list.
 *
 * KV_PAGES_BENCH=1 instead times the host's side of one transfer of
 * KV_PAGES_N pages of KV_PAGES_SIZE bytes (default 16384 x 2 KiB), repeated
 * KV_PAGES_ROUNDS times (default 200): the post alone (gw_xfer_pages), and
 * post to completion (gw_request_wait); and, as the reference, one
 * contiguous put of one page with a counted notification (a copy engine
 * copy: the fixed cost every transfer pays); and the paged post with the
 * same index arrays in GPU memory (GW_INDEX_DEVICE) and as int64 arrays
 * (GW_INDEX_I64).  Run it with
 * FAKECUDA_KERNEL_NOCOPY=1 so that the fake driver's CPU copies are not
 * counted; nothing is checked then.  Prints medians and bests in us. */
#include <poll.h>
#include <time.h>
#include <unistd.h>

#include "cuda/cuda_wrap.h"
#include "harness.h"
#include "fc_dev.h"

#define BURST 3 /* the test's puts in flight together */

static gwt_chan_t pch, cch;
static int bench;
static uint32_t npages, pool, rounds;
static size_t page;

static void shape(void)
{
    bench = getenv("KV_PAGES_BENCH") && atoi(getenv("KV_PAGES_BENCH")) > 0;
    npages = bench ? 16384 : 300;
    page = bench ? 2048 : 1024 + 16; /* (the test: 16-byte aligned, not a power of two) */
    rounds = bench ? 200 : 3 * BURST;
    if (getenv("KV_PAGES_N"))
        npages = (uint32_t)strtoul(getenv("KV_PAGES_N"), NULL, 10);
    if (getenv("KV_PAGES_SIZE"))
        page = (size_t)strtoull(getenv("KV_PAGES_SIZE"), NULL, 10);
    if (getenv("KV_PAGES_ROUNDS"))
        rounds = (uint32_t)strtoul(getenv("KV_PAGES_ROUNDS"), NULL, 10);
    pool = 2 * npages; /* pages picked from a pool twice as large, as kv_shapes.py */
}

static int server(void *arg)
{
    (void)arg;
    shape();
    const gw_cuda_t *cu = fc_cuda(1);
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    gw_listener_t *l;
    gw_ep_t *ep = gwt_listen_accept(ctx, &cch, &l);
    size_t rsz = (size_t)pool * page;
    void *reg = bench ? fc_dev_alloc(cu, rsz) : fc_dev_alloc_filled(cu, rsz, 1000);
    void *one = fc_dev_alloc(cu, page);
    gw_mem_t *mem, *mone;
    REQUIRE_OK(gw_mem_reg(ctx, reg, rsz, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, &mem));
    REQUIRE_OK(gw_mem_reg(ctx, one, page, GW_ACCESS_REMOTE_WRITE, &mone));
    gwt_send_rkey(ep, mem, 100);
    gwt_send_rkey(ep, mone, 101);
    if (!bench) {
        CHECK_ST(gw_notify_count_wait(ep, 9, rounds, 30000), GW_OK);
        /* every byte: the pages of every round where they belong (a later
         * round overwrites an earlier one's), the rest as filled */
        uint8_t *want = malloc(rsz), *src = malloc(rsz), *got = malloc(rsz);
        uint32_t *li = malloc(npages * sizeof(*li)), *ri = malloc(npages * sizeof(*ri));
        REQUIRE(want && src && got && li && ri);
        gwt_fill(want, rsz, 1000);
        gwt_fill(src, rsz, 2000);
        for (uint32_t k = 0; k < rounds; k++) {
            fc_pick(li, npages, pool, 7 + 2 * k);
            fc_pick(ri, npages, pool, 8 + 2 * k);
            for (uint32_t i = 0; i < npages; i++)
                memcpy(want + (size_t)ri[i] * page, src + (size_t)li[i] * page, page);
        }
        REQUIRE(cu->cuMemcpyDtoH(got, (CUdeviceptr)(uintptr_t)reg, rsz) == CUDA_SUCCESS);
        size_t off = 0;
        while (off < rsz && got[off] == want[off])
            off++;
        if (off < rsz)
            fprintf(stderr, "target: first wrong byte at %zu (page %zu)\n", off, off / page);
        CHECK(off == rsz);
        free(want);
        free(src);
        free(got);
        free(li);
        free(ri);
    }
    REQUIRE(gwt_chan_send(&cch, "v", 1) == 0);
    fc_wait_chan(&cch, ctx); /* serve until the initiator is done */
    CHECK_ST(gw_ep_close(ep, 2000), GW_OK);
    CHECK_ST(gw_mem_dereg(mem), GW_OK);
    CHECK_ST(gw_mem_dereg(mone), GW_OK);
    gw_listener_destroy(l);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    return gwt_done("kv_pages server");
}

/* a uint32 index array as int64 items */
static void widen(int64_t *w, const uint32_t *a, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        w[i] = a[i];
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

/* The rest of a timed transfer posted at t0 and back from its post at t1:
 * waits for it, frees it and, past the first round (k 0, which imports the
 * peer's allocations), records its post and completion times. */
static void lap(uint32_t k, double t0, double t1, gw_request_t *q, double *post, double *done)
{
    CHECK_ST(gw_request_wait(q, 60000), GW_OK);
    double t2 = now_us();
    gw_request_free(q);
    if (k) {
        post[k - 1] = t1 - t0;
        done[k - 1] = t2 - t0;
    }
}

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, uint32_t n)
{
    qsort(v, n, sizeof(*v), cmpd);
    return n ? v[n / 2] : 0;
}

int main(void)
{
    shape();
    gwt_chan_pair(&pch, &cch);
    int pid = gwt_spawn(server, NULL); /* before CUDA is initialised here */
    const gw_cuda_t *cu = fc_cuda(1);
    gw_context_t *ctx;
    gw_ep_t *ep = fc_client(&pch, &ctx, "intra");
    uint64_t rb, ob;
    gw_rkey_t *rk = gwt_recv_rkey(ep, 100, &rb), *rone = gwt_recv_rkey(ep, 101, &ob);
    size_t rsz = (size_t)pool * page;
    uint8_t *src = bench ? fc_dev_alloc(cu, rsz) : fc_dev_alloc_filled(cu, rsz, 2000);
    uint8_t *dst = bench ? fc_dev_alloc(cu, rsz) : fc_dev_alloc_filled(cu, rsz, 3000);
    gw_mem_t *ms, *md;
    REQUIRE_OK(gw_mem_reg(ctx, src, rsz, GW_ACCESS_LOCAL, &ms));
    REQUIRE_OK(gw_mem_reg(ctx, dst, rsz, GW_ACCESS_LOCAL, &md));
    uint32_t *li = malloc(npages * sizeof(*li)), *ri = malloc(npages * sizeof(*ri));
    int64_t *wl = malloc(npages * sizeof(*wl)), *wr = malloc(npages * sizeof(*wr));
    REQUIRE(li && ri && wl && wr);
    gw_xfer_opts_t o = {.size = sizeof(o), .notify = GW_NOTIFY_COUNTED, .value = 9};
    gw_xfer_opts_t ow = o; /* (int64 arrays) */
    ow.index_type = GW_INDEX_I64;
    gw_request_t *q;
    if (bench) {
        fc_pick(li, npages, pool, 7);
        fc_pick(ri, npages, pool, 8);
        double *post = calloc(rounds, sizeof(double)), *done = calloc(rounds, sizeof(double));
        double *cpost = calloc(rounds, sizeof(double)), *cdone = calloc(rounds, sizeof(double));
        double *ppost = calloc(rounds, sizeof(double)), *pdone = calloc(rounds, sizeof(double));
        double *dpost = calloc(rounds, sizeof(double)), *ddone = calloc(rounds, sizeof(double));
        double *wpost = calloc(rounds, sizeof(double)), *wdone = calloc(rounds, sizeof(double));
        REQUIRE(post && done && cpost && cdone && ppost && pdone && dpost && ddone && wpost && wdone);
        widen(wl, li, npages);
        widen(wr, ri, npages);
        /* the same arrays in GPU memory, copied there once (a block table kept on the GPU) */
        uint32_t *dli = fc_dev_alloc(cu, npages * sizeof(uint32_t)), *dri = fc_dev_alloc(cu, npages * sizeof(uint32_t));
        REQUIRE(cu->cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dli, li, npages * sizeof(uint32_t)) == CUDA_SUCCESS);
        REQUIRE(cu->cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dri, ri, npages * sizeof(uint32_t)) == CUDA_SUCCESS);
        gw_xfer_opts_t od = o;
        od.index_mem = GW_INDEX_DEVICE;
        gw_pages_t *pl;
        REQUIRE_OK(gw_pages_create(ctx, li, ri, npages, &pl));
        for (uint32_t k = 0; k <= rounds; k++) {
            /* the same pages from the prepared list */
            double p0 = now_us();
            REQUIRE_OK(gw_xfer_pages_prepared(ep, GW_XFER_PUT, ms, src, rk, rb, pl, page, &o, &q));
            lap(k, p0, now_us(), q, ppost, pdone);
            double d0 = now_us();
            REQUIRE_OK(gw_xfer_pages(ep, GW_XFER_PUT, ms, src, dli, rk, rb, dri, npages, page, &od, &q));
            lap(k, d0, now_us(), q, dpost, ddone);
            double w0 = now_us();
            REQUIRE_OK(gw_xfer_pages(ep, GW_XFER_PUT, ms, src, (const uint32_t *)(const void *)wl, rk, rb,
                                     (const uint32_t *)(const void *)wr, npages, page, &ow, &q));
            lap(k, w0, now_us(), q, wpost, wdone);
            double t0 = now_us();
            REQUIRE_OK(gw_xfer_pages(ep, GW_XFER_PUT, ms, src, li, rk, rb, ri, npages, page, &o, &q));
            double t1 = now_us();
            CHECK_ST(gw_request_wait(q, 60000), GW_OK);
            double t2 = now_us();
            gw_request_free(q);
            /* the reference: one page by one contiguous put_notify */
            double t3 = now_us();
            REQUIRE_OK(gw_put_notify(ep, dst, page, md, ob, rone, 7, &q));
            double t4 = now_us();
            CHECK_ST(gw_request_wait(q, 60000), GW_OK);
            double t5 = now_us();
            gw_request_free(q);
            if (!k)
                continue; /* the first imports the peer's allocations */
            post[k - 1] = t1 - t0;
            done[k - 1] = t2 - t0;
            cpost[k - 1] = t4 - t3;
            cdone[k - 1] = t5 - t3;
        }
        double bp = post[0], bd = done[0];
        for (uint32_t k = 1; k < rounds; k++) {
            bp = post[k] < bp ? post[k] : bp;
            bd = done[k] < bd ? done[k] : bd;
        }
        printf("kv_pages bench: %u pages of %zu bytes, %u rounds: paged post median %.1f us (best %.1f), post to "
               "completion median %.1f us (best %.1f); one-page contiguous put+notify post %.1f us, to completion "
               "%.1f us (medians)\n",
               npages, page, rounds, median(post, rounds), bp, median(done, rounds), bd, median(cpost, rounds),
               median(cdone, rounds));
        printf("kv_pages bench: the same from a prepared page list (gw_xfer_pages_prepared): post median %.1f us, "
               "post to completion median %.1f us\n", median(ppost, rounds), median(pdone, rounds));
        printf("kv_pages bench: the same with the index arrays in GPU memory (GW_INDEX_DEVICE, checked on the GPU): "
               "post median %.1f us, post to completion median %.1f us\n", median(dpost, rounds), median(ddone, rounds));
        printf("kv_pages bench: the same from int64 index arrays (GW_INDEX_I64, narrowed in the pinned copy): post "
               "median %.1f us, post to completion median %.1f us\n", median(wpost, rounds), median(wdone, rounds));
        CHECK_ST(gw_pages_destroy(pl), GW_OK);
        free(wpost);
        free(wdone);
        free(dpost);
        free(ddone);
        free(ppost);
        free(pdone);
        free(post);
        free(done);
        free(cpost);
        free(cdone);
    } else {
        /* the puts: BURST back to back, then waited for, the index arrays
         * rewritten right after each post (the library copied them) */
        gw_request_t *qs[BURST];
        gw_pages_t *pls[BURST] = {NULL};
        unsigned nprep = 0;
        for (uint32_t k = 0; k < rounds; k++) {
            fc_pick(li, npages, pool, 7 + 2 * k);
            fc_pick(ri, npages, pool, 8 + 2 * k);
            if (k >= 2 * BURST && k % 2) { /* the last burst's odd ones from prepared page lists (their own copies) */
                nprep++;
                REQUIRE_OK(gw_pages_create(ctx, li, ri, npages, &pls[k % BURST]));
                REQUIRE_OK(gw_xfer_pages_prepared(ep, GW_XFER_PUT, ms, src, rk, rb, pls[k % BURST], page, &o,
                                                  &qs[k % BURST]));
                if (k % 4 == 3) { /* destroyed while its transfer runs: freed when it ends */
                    CHECK_ST(gw_pages_destroy(pls[k % BURST]), GW_OK);
                    pls[k % BURST] = NULL;
                }
            } else if (k < 2 * BURST && k % 3) { /* int64 (GW_INDEX_I64) or uint64 (GW_INDEX_U64) arrays */
                widen(wl, li, npages);
                widen(wr, ri, npages);
                gw_xfer_opts_t o8 = ow;
                o8.index_type = k % 3 == 1 ? GW_INDEX_I64 : GW_INDEX_U64;
                REQUIRE_OK(gw_xfer_pages(ep, GW_XFER_PUT, ms, src, (const uint32_t *)(const void *)wl, rk, rb,
                                         (const uint32_t *)(const void *)wr, npages, page, &o8, &qs[k % BURST]));
            } else if (k == 2 * BURST) { /* int32 arrays (GW_INDEX_I32): the same bits, checked for negatives */
                gw_xfer_opts_t o4 = o;
                o4.index_type = GW_INDEX_I32;
                REQUIRE_OK(gw_xfer_pages(ep, GW_XFER_PUT, ms, src, li, rk, rb, ri, npages, page, &o4, &qs[k % BURST]));
            } else {
                REQUIRE_OK(gw_xfer_pages(ep, GW_XFER_PUT, ms, src, li, rk, rb, ri, npages, page, &o, &qs[k % BURST]));
            }
            memset(li, 0xff, npages * sizeof(*li));
            memset(ri, 0xff, npages * sizeof(*ri));
            memset(wl, 0xff, npages * sizeof(*wl));
            memset(wr, 0xff, npages * sizeof(*wr));
            if (k % BURST == BURST - 1 || k + 1 == rounds)
                for (uint32_t j = k - k % BURST; j <= k; j++) {
                    CHECK_ST(gw_request_wait(qs[j % BURST], 30000), GW_OK);
                    gw_request_free(qs[j % BURST]);
                    CHECK_ST(gw_pages_destroy(pls[j % BURST]), GW_OK);
                    pls[j % BURST] = NULL;
                }
        }
        /* a prepared list with a remote page past the key: refused at
         * posting, naming the entry, nothing moved */
        fc_pick(li, npages, pool, 99);
        fc_pick(ri, npages, pool, 98);
        ri[npages - 1] = pool;
        gw_pages_t *bad;
        REQUIRE_OK(gw_pages_create(ctx, li, ri, npages, &bad));
        CHECK_ST(gw_xfer_pages_prepared(ep, GW_XFER_PUT, ms, src, rk, rb, bad, page, &o, &q), GW_ERR_OUT_OF_BOUNDS);
        CHECK(strstr(gw_last_error(ctx), "gw_xfer_pages_prepared: entry") != NULL);
        CHECK_ST(gw_xfer_pages_prepared(ep, GW_XFER_PUT, ms, src, rk, rb, NULL, page, &o, &q), GW_ERR_INVALID);
        CHECK_ST(gw_xfer_pages_prepared(ep, GW_XFER_PUT, ms, src, rk, rb, bad, page, &ow, &q), GW_ERR_INVALID);
        CHECK(strstr(gw_last_error(ctx), "index_type") != NULL);
        CHECK_ST(gw_pages_destroy(bad), GW_OK);
        /* 8-byte items outside 0 .. 2^32-1, anywhere (in the narrowing's
         * vector rounds and after them), on either side: refused naming the
         * array, the position and the value, nothing moved (the target's
         * bytes were checked above and are checked by the get below) */
        uint32_t at[] = {0, 15, 16, 17, npages / 2, npages - 1};
        for (unsigned j = 0; j < sizeof(at) / sizeof(at[0]); j++)
            for (int side = 0; side < 2; side++)
                for (int kind = 0; kind < 4; kind++) {
                    fc_pick(li, npages, pool, 99);
                    fc_pick(ri, npages, pool, 98);
                    widen(wl, li, npages);
                    widen(wr, ri, npages);
                    int64_t v = kind == 0 ? -1 : kind == 1 ? (int64_t)1 << 32 : kind == 2 ? INT64_MIN : -7;
                    (side ? wr : wl)[at[j]] = v;
                    (side ? ri : li)[at[j]] = (uint32_t)(int32_t)v; /* (kind 3: int32 arrays) */
                    gw_xfer_opts_t o8 = ow;
                    o8.index_type = kind == 1 ? GW_INDEX_U64 : kind == 3 ? GW_INDEX_I32 : GW_INDEX_I64;
                    const void *pl8 = kind == 3 ? (const void *)li : (const void *)wl;
                    const void *pr8 = kind == 3 ? (const void *)ri : (const void *)wr;
                    CHECK_ST(gw_xfer_pages(ep, GW_XFER_PUT, ms, src, pl8, rk, rb, pr8, npages, page, &o8, &q),
                             GW_ERR_INVALID);
                    char want[96];
                    snprintf(want, sizeof(want), "gw_xfer_pages: %s[%u] = %lld is negative",
                             side ? "rpages" : "lpages", at[j], (long long)v);
                    if (kind == 1)
                        snprintf(want, sizeof(want), "gw_xfer_pages: %s[%u] = 4294967296 is above 4294967295",
                                 side ? "rpages" : "lpages", at[j]);
                    if (!strstr(gw_last_error(ctx), want))
                        fprintf(stderr, "want \"%s\" in: %s\n", want, gw_last_error(ctx));
                    CHECK(strstr(gw_last_error(ctx), want) != NULL);
                }
        /* in 0 .. 2^32-1 but past the key: the page check's own error */
        fc_pick(li, npages, pool, 99);
        widen(wl, li, npages);
        widen(wr, li, npages);
        wr[3] = pool;
        CHECK_ST(gw_xfer_pages(ep, GW_XFER_PUT, ms, src, (const uint32_t *)(const void *)wl, rk, rb,
                               (const uint32_t *)(const void *)wr, npages, page, &ow, &q), GW_ERR_OUT_OF_BOUNDS);
        CHECK(strstr(gw_last_error(ctx), "entry 3: remote page") != NULL);
        /* index_type with arrays in GPU memory, and a value that is no type */
        gw_xfer_opts_t ox = ow;
        ox.index_mem = GW_INDEX_DEVICE;
        CHECK_ST(gw_xfer_pages(ep, GW_XFER_PUT, ms, src, li, rk, rb, NULL, npages, page, &ox, &q), GW_ERR_INVALID);
        CHECK(strstr(gw_last_error(ctx), "GW_INDEX_DEVICE") != NULL);
        ox = o;
        ox.index_type = 9;
        CHECK_ST(gw_xfer_pages(ep, GW_XFER_PUT, ms, src, li, rk, rb, NULL, npages, page, &ox, &q), GW_ERR_INVALID);
        CHECK(strstr(gw_last_error(ctx), "opts->index_type 9") != NULL);
        CHECK(gw_xfer_opts_size() == sizeof(gw_xfer_opts_t));
        fc_wait_chan(&pch, ctx); /* the target checked every byte */
        /* a get of other target pages into dst */
        fc_pick(li, npages, pool, 17);
        fc_pick(ri, npages, pool, 18);
        REQUIRE_OK(gw_xfer_pages(ep, GW_XFER_GET, md, dst, li, rk, rb, ri, npages, page, NULL, &q));
        CHECK_ST(gw_request_wait(q, 30000), GW_OK);
        gw_request_free(q);
        uint8_t *tgt = malloc(rsz), *s = malloc(rsz), *want = malloc(rsz), *got = malloc(rsz);
        uint32_t *pl = malloc(npages * sizeof(*pl)), *pr = malloc(npages * sizeof(*pr));
        REQUIRE(tgt && s && want && got && pl && pr);
        gwt_fill(tgt, rsz, 1000);
        gwt_fill(s, rsz, 2000);
        for (uint32_t k = 0; k < rounds; k++) {
            fc_pick(pl, npages, pool, 7 + 2 * k);
            fc_pick(pr, npages, pool, 8 + 2 * k);
            for (uint32_t i = 0; i < npages; i++)
                memcpy(tgt + (size_t)pr[i] * page, s + (size_t)pl[i] * page, page);
        }
        gwt_fill(want, rsz, 3000);
        for (uint32_t i = 0; i < npages; i++)
            memcpy(want + (size_t)li[i] * page, tgt + (size_t)ri[i] * page, page);
        REQUIRE(cu->cuMemcpyDtoH(got, (CUdeviceptr)(uintptr_t)dst, rsz) == CUDA_SUCCESS);
        size_t off = 0;
        while (off < rsz && got[off] == want[off])
            off++;
        if (off < rsz)
            fprintf(stderr, "get: first wrong byte at %zu (page %zu)\n", off, off / page);
        CHECK(off == rsz);
        free(tgt);
        free(s);
        free(want);
        free(got);
        free(pl);
        free(pr);
        if (getenv("FAKECUDA_LAUNCHES")) { /* one page-kernel launch per transfer, nothing else */
            unsigned items, items_b, np = fc_launches("gw_page_copy", &items, 0, NULL);
            unsigned nb = fc_launches("gw_batch_copy", &items_b, 0, NULL);
            fprintf(stderr, "launches: gw_page_copy %u (%u pages), gw_batch_copy %u\n", np, items, nb);
            CHECK(np == rounds + 1);
            CHECK(items == (rounds + 1) * npages);
            CHECK(nb == 0);
            /* the pinned buffers the index arrays went through: one per
             * transfer in flight together, then reused */
            unsigned na = fc_launches("cuMemHostAlloc", NULL, 0, NULL);
            fprintf(stderr, "pinned allocations: %u for %u transfers, %u in flight at most, and %u prepared lists\n",
                    na, rounds + 1, BURST, nprep);
            CHECK(na <= BURST + nprep);
            /* the events that tell the copies' ends: one per transfer in
             * flight together, then reused (not one per transfer) */
            unsigned ne = fc_launches("cuEventCreate", NULL, 0, NULL);
            fprintf(stderr, "events created: %u for %u transfers\n", ne, rounds + 1);
            CHECK(ne <= BURST + 1);
        }
    }
    if (bench)
        fc_wait_chan(&pch, ctx);
    REQUIRE(gwt_chan_send(&pch, "d", 1) == 0);
    gw_rkey_destroy(rk);
    gw_rkey_destroy(rone);
    free(li);
    free(ri);
    free(wl);
    free(wr);
    CHECK_ST(gw_mem_dereg(ms), GW_OK);
    CHECK_ST(gw_mem_dereg(md), GW_OK);
    CHECK_ST(gw_ep_close(ep, 2000), GW_OK);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    CHECK(gwt_wait(pid, 60) == 0);
    return gwt_done("kv_pages");
}
