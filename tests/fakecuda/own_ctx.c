/* SPDX-License-Identifier: Apache-2.0 */
/* own_ctx.c - intra GPU copies and the CUDA context they run in
 * (GPUWIRE_CUDA_COPY_CONTEXT), two processes, against the fake CUDA driver
 * with two devices.  The server has a VMM region (cuMemCreate + cuMemMap,
 * on device 1) and a cudaMalloc region; the client moves bytes between its
 * own VMM and cudaMalloc buffers (device 0) and those: put, get,
 * put_notify and a batch.  The fake driver logs the context current at
 * every asynchronous copy (FAKECUDA_CTXLOG) and checks that each stream is
 * used in its own context.
 *   OWN_CTX_EXPECT=own: VMM <-> VMM copies run in gpuwire's own context,
 *   every copy touching cudaMalloc memory in the primary one; then, while
 *   an application's blocking copy is taken to hold the primary context
 *   (FAKECUDA_HELD), the VMM <-> VMM put, get, put_notify and batch still
 *   complete with their bytes, and a put from cudaMalloc memory fails
 *   with GW_ERR_CUDA (on a GPU: waits) instead of being wrongly taken; an
 *   eager message from host memory lands in the server's VMM region (the
 *   synchronous copy in the own context).
 *   OWN_CTX_EXPECT=primary (the default setting): every copy in the
 *   primary context, and under FAKECUDA_HELD the VMM put fails too - the
 *   deadlock the own context avoids. */
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include "cuda/cuda_wrap.h"
#include "harness.h"
#include "fc_dev.h"

#define LEN (1u << 20)
static gwt_chan_t pch, cch;

/* A VMM range of len bytes on device dev (one cuMemCreate allocation). */
static void *vmm_alloc(const gw_cuda_t *cu, int dev, size_t len)
{
    if (!cu->cuMemCreate)
        SKIP("driver lacks VMM (cuMemCreate)");
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    size_t gran = 0;
    REQUIRE(cu->cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == 0);
    size_t sz = (len + gran - 1) / gran * gran;
    CUdeviceptr va;
    CUmemGenericAllocationHandle h;
    REQUIRE(cu->cuMemAddressReserve(&va, sz, 0, 0, 0) == 0);
    REQUIRE(cu->cuMemCreate(&h, sz, &prop, 0) == 0);
    REQUIRE(cu->cuMemMap(va, sz, 0, h, 0) == 0);
    REQUIRE(cu->cuMemRelease(h) == 0); /* the mapping keeps it */
    CUmemAccessDesc acc = {{CU_MEM_LOCATION_TYPE_DEVICE, dev}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    REQUIRE(cu->cuMemSetAccess(va, sz, &acc, 1) == 0);
    return (void *)(uintptr_t)va;
}

/* Progresses ctx until one byte comes over chan (30 s at most). */
static char wait_chan(gwt_chan_t *chan, gw_context_t *ctx)
{
    char c = 0;
    for (int i = 0; i < 30000; i++) {
        struct pollfd p = {.fd = chan->rfd, .events = POLLIN};
        if (poll(&p, 1, 1) > 0) {
            REQUIRE(gwt_chan_recv(chan, &c, 1, 5000) == 1);
            return c;
        }
        gw_progress(ctx);
    }
    REQUIRE(!"the other process did not answer within 30 s");
    return c;
}

/* Copies the fake driver logged so far in each context since *seen lines. */
static void ctx_counts(unsigned *seen, unsigned *own, unsigned *primary)
{
    const char *path = getenv("FAKECUDA_CTXLOG");
    FILE *f = path ? fopen(path, "r") : NULL;
    char fn[64], kind[16];
    size_t n;
    unsigned line = 0;
    *own = *primary = 0;
    while (f && fscanf(f, "%63s %15s %zu\n", fn, kind, &n) == 3)
        if (line++ >= *seen) {
            *own += !strcmp(kind, "own");
            *primary += !strcmp(kind, "primary");
        }
    if (f)
        fclose(f);
    *seen = line;
}

static int server(void *arg)
{
    (void)arg;
    const gw_cuda_t *cu = fc_cuda(1);
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    gw_listener_t *l;
    gw_ep_t *ep = gwt_listen_accept(ctx, &cch, &l);
    char why[256];
    REQUIRE(gw_cuda_ctx_for_device(1, why, sizeof(why)));
    void *vmm = vmm_alloc(cu, 1, 2 * LEN), *legacy = fc_dev_alloc(cu, LEN);
    REQUIRE(gw_cuda_ctx_for_device(0, why, sizeof(why)));
    fc_dev_fill(cu, vmm, 2 * LEN, 5);
    fc_dev_fill(cu, legacy, LEN, 6);
    gw_mem_t *mv, *ml;
    REQUIRE_OK(gw_mem_reg(ctx, vmm, 2 * LEN, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, &mv));
    REQUIRE_OK(gw_mem_reg(ctx, legacy, LEN, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, &ml));
    gwt_send_rkey(ep, mv, 1);
    gwt_send_rkey(ep, ml, 2);
    /* two put_notify rounds (before and while held): the notification
     * follows the bytes */
    for (uint64_t want = 1; want <= 2; want++) {
        uint64_t v = 0;
        CHECK_ST(gw_notify_wait(ep, 20000, &v), GW_OK);
        CHECK(v == want);
        CHECK(fc_dev_verify(cu, (char *)vmm + LEN, 4096, 20 + want) == -1);
        REQUIRE(gwt_chan_send(&cch, "n", 1) == 0);
    }
    if (wait_chan(&cch, ctx) == 'e') {
        /* a 16-byte message from host memory, eager, into the VMM region:
         * the synchronous copy from the message into GPU memory, while the
         * primary context is held */
        gw_request_t *r;
        void *at = (char *)vmm + LEN + (512u << 10);
        CHECK_ST(gwt_outcome(gw_recv(ep, at, 16, mv, 9, ~0ull, &r), &r, 20000), GW_OK);
        CHECK(fc_dev_verify(cu, at, 16, 99) == -1);
        REQUIRE(gwt_chan_send(&cch, "v", 1) == 0);
        wait_chan(&cch, ctx); /* the client is done */
    }
    CHECK_ST(gw_ep_close(ep, 2000), GW_OK);
    CHECK_ST(gw_mem_dereg(mv), GW_OK);
    CHECK_ST(gw_mem_dereg(ml), GW_OK);
    gw_listener_destroy(l);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    return gwt_done("own_ctx server");
}

/* put, get, put_notify (value), a 3-entry batch put: VMM <-> VMM, each
 * checked; GW_OK or the first failure */
static gw_status_t vmm_round(gw_context_t *ctx, gw_ep_t *ep, const gw_cuda_t *cu, void *src, void *dst,
                             gw_mem_t *ms, gw_mem_t *md, gw_rkey_t *rk, uint64_t base, uint64_t value)
{
    gw_request_t *r;
    fc_dev_fill(cu, src, LEN, 10 + value);
    gw_status_t st = gwt_outcome(gw_put(ep, src, LEN, ms, base, rk, &r), &r, 20000);
    if (st != GW_OK)
        return st;
    st = gwt_outcome(gw_get(ep, dst, LEN, md, base, rk, &r), &r, 20000);
    if (st != GW_OK)
        return st;
    CHECK(fc_dev_verify(cu, dst, LEN, 10 + value) == -1);
    fc_dev_fill(cu, src, 4096, 20 + value);
    st = gwt_outcome(gw_put_notify(ep, src, 4096, ms, base + LEN, rk, value, &r), &r, 20000);
    if (st != GW_OK)
        return st;
    CHECK(wait_chan(&pch, ctx) == 'n'); /* the server saw the notification after the bytes */
    /* a batch: three 64 KiB entries from src to the region's second half */
    fc_dev_fill(cu, src, LEN, 30 + value);
    gw_local_desc_t ld[3];
    gw_remote_desc_t rd[3];
    for (uint32_t i = 0; i < 3; i++) {
        ld[i] = (gw_local_desc_t){ms, (size_t)i * 65536, 65536};
        rd[i] = (gw_remote_desc_t){rk, LEN + 8192 + (uint64_t)(2 - i) * 65536, 65536}; /* offsets in the region */
    }
    gw_dlist_t *L, *R;
    REQUIRE_OK(gw_dlist_local(ctx, ld, 3, &L));
    REQUIRE_OK(gw_dlist_remote(ep, rd, 3, GW_ACCESS_REMOTE_WRITE, &R));
    st = gwt_outcome(gw_xfer_batch(ep, GW_XFER_PUT, L, NULL, R, NULL, 3, NULL, &r), &r, 20000);
    CHECK_ST(gw_dlist_destroy(L), GW_OK);
    CHECK_ST(gw_dlist_destroy(R), GW_OK);
    if (st != GW_OK)
        return st;
    /* read the three entries back whole and compare with the source pattern */
    st = gwt_outcome(gw_get(ep, dst, 3 * 65536, md, base + LEN + 8192, rk, &r), &r, 20000);
    if (st != GW_OK)
        return st;
    uint8_t *want = malloc(LEN), *got = malloc(3 * 65536);
    gwt_fill(want, LEN, 30 + value);
    REQUIRE(cu->cuMemcpyDtoH(got, (CUdeviceptr)(uintptr_t)dst, 3 * 65536) == CUDA_SUCCESS);
    for (uint32_t i = 0; i < 3; i++)
        CHECK(memcmp(got + (size_t)(2 - i) * 65536, want + (size_t)i * 65536, 65536) == 0);
    free(want);
    free(got);
    return GW_OK;
}

int main(void)
{
    const char *expect = getenv("OWN_CTX_EXPECT"), *held = getenv("FAKECUDA_HELD");
    int own = expect && !strcmp(expect, "own");
    REQUIRE(held && held[0] && getenv("FAKECUDA_CTXLOG"));
    unlink(held);
    unlink(getenv("FAKECUDA_CTXLOG"));
    gwt_chan_pair(&pch, &cch);
    int pid = gwt_spawn(server, NULL);
    const gw_cuda_t *cu = fc_cuda(1);
    if (cu->device_count < 2)
        SKIP("needs FAKECUDA_DEVICES=2");
    char addr[128];
    REQUIRE(gwt_chan_recv(&pch, addr, sizeof(addr), 10000) > 0);
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    gw_ep_t *ep;
    REQUIRE_OK(gw_connect(ctx, addr, &ep));
    uint64_t vbase, lbase;
    gw_rkey_t *rkv = gwt_recv_rkey(ep, 1, &vbase), *rkl = gwt_recv_rkey(ep, 2, &lbase);
    void *src = vmm_alloc(cu, 0, LEN), *dst = vmm_alloc(cu, 0, LEN), *lsrc = fc_dev_alloc_filled(cu, LEN, 7);
    gw_mem_t *ms, *md, *ml;
    REQUIRE_OK(gw_mem_reg(ctx, src, LEN, GW_ACCESS_LOCAL, &ms));
    REQUIRE_OK(gw_mem_reg(ctx, dst, LEN, GW_ACCESS_LOCAL, &md));
    REQUIRE_OK(gw_mem_reg(ctx, lsrc, LEN, GW_ACCESS_LOCAL, &ml));
    unsigned seen = 0, no, np;

    /* 1. VMM <-> VMM: in the own context when asked for */
    CHECK_ST(vmm_round(ctx, ep, cu, src, dst, ms, md, rkv, vbase, 1), GW_OK);
    ctx_counts(&seen, &no, &np);
    fprintf(stderr, "VMM <-> VMM copies: %u in the own context, %u in the primary one\n", no, np);
    /* own: the batch's three entries by the copy engine too (the copy
     * kernel's module is the primary context's); primary: by the kernel */
    CHECK(own ? no >= 7 && np == 0 : no == 0 && np >= 4);
    gw_ep_info_t info = {.size = sizeof(info)};
    gw_ep_query(ep, &info);
    fprintf(stderr, "path: %s\n", info.path);
    CHECK((strstr(info.path, "in own ctx") != NULL) == own);

    /* 2. cudaMalloc memory on either side: the primary context */
    gw_request_t *r;
    CHECK_ST(gwt_outcome(gw_put(ep, lsrc, 65536, ml, vbase, rkv, &r), &r, 20000), GW_OK);
    CHECK_ST(gwt_outcome(gw_put(ep, src, 65536, ms, lbase, rkl, &r), &r, 20000), GW_OK);
    CHECK_ST(gwt_outcome(gw_get(ep, dst, 65536, md, lbase, rkl, &r), &r, 20000), GW_OK);
    CHECK(fc_dev_verify(cu, dst, 65536, 30 + 1) == -1); /* src's batch pattern went to lbase */
    ctx_counts(&seen, &no, &np);
    fprintf(stderr, "copies touching cudaMalloc memory: %u in the own context, %u in the primary one\n", no, np);
    CHECK(no == 0 && np == 3);

    /* 3. an application thread sits in a blocking copy in the primary
     * context: VMM <-> VMM still moves in the own context */
    int fd = open(held, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    REQUIRE(fd >= 0);
    close(fd);
    gw_status_t st = vmm_round(ctx, ep, cu, src, dst, ms, md, rkv, vbase, 2);
    if (own) {
        CHECK_ST(st, GW_OK);
        /* cudaMalloc memory is held in any context: refused by the fake
         * driver, as a GPU would hold it */
        CHECK_ST(gwt_outcome(gw_put(ep, lsrc, 65536, ml, vbase, rkv, &r), &r, 20000), GW_ERR_CUDA);
        /* an eager message from host memory into the server's VMM region */
        uint8_t msg[16];
        gwt_fill(msg, sizeof(msg), 99);
        REQUIRE(gwt_chan_send(&pch, "e", 1) == 0);
        CHECK_ST(gwt_outcome(gw_send(ep, msg, sizeof(msg), NULL, 9, &r), &r, 20000), GW_OK);
        CHECK(wait_chan(&pch, ctx) == 'v');
    } else {
        CHECK_ST(st, GW_ERR_CUDA);
    }
    unlink(held);
    if (!own) { /* the rest of the round, so the server's second notification comes */
        gw_request_t *q;
        fc_dev_fill(cu, src, 4096, 22);
        CHECK_ST(gwt_outcome(gw_put_notify(ep, src, 4096, ms, vbase + LEN, rkv, 2, &q), &q, 20000), GW_OK);
        CHECK(wait_chan(&pch, ctx) == 'n');
    }
    REQUIRE(gwt_chan_send(&pch, "d", 1) == 0);
    gw_rkey_destroy(rkv);
    gw_rkey_destroy(rkl);
    CHECK_ST(gw_ep_close(ep, 2000), GW_OK);
    CHECK_ST(gw_mem_dereg(ms), GW_OK);
    CHECK_ST(gw_mem_dereg(md), GW_OK);
    CHECK_ST(gw_mem_dereg(ml), GW_OK);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    CHECK(gwt_wait(pid, 30) == 0);
    return gwt_done(own ? "own_ctx (own)" : "own_ctx (primary)");
}
