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
 * The fake driver's device addresses are not mapped for the host (a read
 * there faults), so the test also shows the host never reads the arrays.
 * tests/gpu runs the same program on a real driver (gpu_kv_dev_index_*). */
#include <poll.h>
#include <unistd.h>

#include "cuda/cuda_wrap.h"
#include "harness.h"
#include "fc_dev.h"

#define N 200
#define POOL 400
#define PAGE 1040 /* (16-byte aligned, not a power of two) */
#define BAD (N / 2 + 3)

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
        fc_wait_chan(&cch, ctx); /* the bad put has completed (failed) */
        /* its counted notification never comes */
        CHECK_ST(gw_notify_count_wait(ep, 10, 1, 500), GW_ERR_TIMEOUT);
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

/* n indices into a new device array. */
static uint32_t *dev_idx(const gw_cuda_t *cu, const uint32_t *h, uint32_t n)
{
    uint32_t *d = fc_dev_alloc(cu, n * sizeof(uint32_t));
    REQUIRE(cu->cuMemcpyHtoD((CUdeviceptr)(uintptr_t)d, h, n * sizeof(uint32_t)) == CUDA_SUCCESS);
    return d;
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
    if (getenv("FAKECUDA_LAUNCHES")) { /* a check kernel before each gated page kernel */
        unsigned items, np = fc_launches("gw_page_copy", NULL, 0, NULL), nc = fc_launches("gw_page_check", &items, 0, NULL);
        fprintf(stderr, "launches: gw_page_copy %u, gw_page_check %u (%u entries)\n", np, nc, items);
        CHECK(np == 5 && nc == 5 && items == 5 * N);
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
