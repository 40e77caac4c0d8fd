/* SPDX-License-Identifier: Apache-2.0 */
/* ofi_hmem.c - GPU memory moved by a libfabric provider (FI_HMEM) over the
 * ofi transport, two processes, GPU memory on both sides, on a real GPU:
 * get (GPU -> GPU and GPU -> host), put, put_notify (GPU -> GPU and
 * host -> GPU), a paged put with a counted notification and a list put
 * with an ordered one, a paged get and a list get, and messages into and
 * out of GPU memory both ways (eager and rendezvous); every byte checked
 * by copying the device memory back.  The endpoint's path and the regions'
 * paths must name FI_HMEM: the provider moves the GPU memory, nothing is
 * staged.
 *
 * Run through tests/integration/ofi_run.sh PROVIDER (GPUWIRE_TRANSPORTS=ofi,
 * GPUWIRE_OFI_PROVIDER).  Skips (77) with the reason when there is no CUDA
 * driver or GPU, no libfabric, or the provider answers without FI_HMEM
 * (a libfabric built without CUDA, as Debian's): then the endpoint says
 * "host memory only".  Not runnable against tests/fakecuda: libfabric
 * itself touches the memory (CUDA IPC, cudaMemcpy through the CUDA runtime),
 * which the fake driver cannot serve.
 *
 * usage: ofi_hmem [SERVER_GPU]   (default 0: both processes on GPU 0; 1:
 *        the server's memory on GPU 1, skipped with fewer than 2 GPUs) */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuda/cuda_wrap.h"
#include "harness.h"
#include "fc_dev.h"
#include "gpu_util.h"

#define MiB (1u << 20)
#define REGION (16u * MiB)
#define PAGE 4096u
#define NPG 256u          /* pages of the paged put: remote [13 MiB, 14 MiB) */
#define NL 50u            /* entries of the list put: remote [14 MiB, 15 MiB) */
#define PUT_AT (12u * MiB) /* plain put, read back by a get */
#define PUT_LEN (MiB - 3)
#define PN_LEN (9u * MiB + 3)
#define HOST_AT (10u * MiB)
#define PG_AT (13u * MiB)
#define LS_AT (14u * MiB)

static gwt_chan_t pch, cch;
static int server_gpu;

static size_t ls_len(uint32_t i) { return 1000 + i; }               /* list entry i: its length, */
static size_t ls_src(uint32_t i) { return (size_t)i * 100003; }     /* its offset in the source, */
static size_t ls_dst(uint32_t i) { return LS_AT + (size_t)i * 16384; } /* and in the target region */

/* The pages of the paged put: local page lp[i] of the source to remote page
 * PG_AT / PAGE + rp[i] (rp a permutation: distinct). */
static void pg_pick(uint32_t *lp, uint32_t *rp)
{
    fc_pick(lp, NPG, REGION / PAGE, 0x51);
    fc_pick(rp, NPG, NPG, 0x52);
}

/* The source image of the client (seed 31), and what the server's region
 * holds once every put has landed. */
static uint8_t *image(void)
{
    uint8_t *img = malloc(REGION), *s = malloc(REGION), *t = malloc(PN_LEN);
    REQUIRE(img && s && t);
    gwt_fill(img, REGION, 11);
    gwt_fill(s, REGION, 31);
    gwt_fill(t, PN_LEN, 25);
    memcpy(img + PUT_AT, t, PUT_LEN);
    gwt_fill(t, PN_LEN, 21);
    memcpy(img, t, PN_LEN);
    gwt_fill(img + HOST_AT, 4097, 22);
    uint32_t lp[NPG], rp[NPG];
    pg_pick(lp, rp);
    for (uint32_t i = 0; i < NPG; i++)
        memcpy(img + PG_AT + (size_t)rp[i] * PAGE, s + (size_t)lp[i] * PAGE, PAGE);
    for (uint32_t i = 0; i < NL; i++)
        memcpy(img + ls_dst(i), s + ls_src(i), ls_len(i));
    free(s);
    free(t);
    return img;
}

static uint8_t *dev_read(const gw_cuda_t *cu, const void *dev, size_t n)
{
    uint8_t *h = malloc(n);
    REQUIRE(h && cu->cuMemcpyDtoH(h, (CUdeviceptr)(uintptr_t)dev, n) == CUDA_SUCCESS);
    return h;
}

/* The driver with a current context on dev, else skipped. */
static const gw_cuda_t *cuda_on(int dev)
{
    char why[256];
    const gw_cuda_t *cu = gw_cuda_get(why, sizeof(why));
    if (!cu)
        SKIP("no usable CUDA driver: %s", why);
    if (cu->device_count <= dev)
        SKIP("GPU %d asked for, %d found", dev, cu->device_count);
    if (!gw_cuda_ctx_for_device(dev, why, sizeof(why)))
        SKIP("no CUDA context for GPU %d: %s", dev, why);
    return cu;
}

/* The endpoint's path names FI_HMEM, else the reason (the provider's). */
static const char *no_hmem(gw_ep_t *ep, gw_ep_info_t *info)
{
    *info = (gw_ep_info_t){.size = sizeof(*info)};
    REQUIRE_OK(gw_ep_query(ep, info));
    if (strcmp(info->transport, "ofi"))
        return "the endpoint is not ofi (GPUWIRE_TRANSPORTS=ofi: run through ofi_run.sh)";
    if (!strstr(info->path, "by FI_HMEM"))
        return "the provider answers without FI_HMEM (a libfabric built without CUDA?)";
    return NULL;
}

/* A received message of want bytes with tag, into dev, checked against seed. */
static void recv_check(const gw_cuda_t *cu, gw_ep_t *ep, void *dev, gw_mem_t *m, uint64_t tag, size_t want,
                       uint64_t seed)
{
    gw_request_t *r;
    REQUIRE_OK(gw_recv(ep, dev, 4 * MiB, m, tag, ~0ull, &r));
    CHECK_ST(gw_request_wait(r, 30000), GW_OK);
    gw_request_info_t ri = {.size = sizeof(ri)};
    gw_request_info(r, &ri);
    CHECK(ri.length == want);
    long long bad = fc_dev_verify(cu, dev, want, seed);
    if (bad != -1)
        fprintf(stderr, "message %llu: first wrong byte at %lld of %zu\n", (unsigned long long)tag, bad, want);
    CHECK(bad == -1);
    gw_request_free(r);
}

static void send_wait(gw_ep_t *ep, const void *buf, size_t len, gw_mem_t *m, uint64_t tag)
{
    gw_request_t *r;
    REQUIRE_OK(gw_send(ep, buf, len, m, tag, &r));
    CHECK_ST(gw_request_wait(r, 30000), GW_OK);
    gw_request_free(r);
}

static int server(void *arg)
{
    (void)arg;
    const gw_cuda_t *cu = cuda_on(server_gpu);
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    gw_listener_t *l;
    gw_ep_t *ep = gwt_listen_accept(ctx, &cch, &l);
    gw_ep_info_t info;
    const char *why = no_hmem(ep, &info);
    if (why)
        SKIP("%s; path: %s", why, info.path);
    void *region = fc_dev_alloc_filled(cu, REGION, 11);
    gw_mem_t *mem;
    REQUIRE_OK(gw_mem_reg(ctx, region, REGION, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, &mem));
    gw_mem_info_t mi = {.size = sizeof(mi)};
    gw_mem_query(mem, &mi);
    fprintf(stderr, "server region on GPU %d: %s\n", server_gpu, mi.path);
    CHECK(mi.type == GW_MEM_CUDA && mi.cuda_device == server_gpu);
    CHECK(strstr(mi.path, "FI_HMEM_CUDA") != NULL);
    gwt_send_rkey(ep, mem, 1);

    uint64_t v = 0;
    CHECK_ST(gw_notify_wait(ep, 30000, &v), GW_OK); /* the GPU -> GPU put_notify */
    CHECK(v == 1);
    CHECK(fc_dev_verify(cu, region, PN_LEN, 21) == -1);
    CHECK_ST(gw_notify_wait(ep, 30000, &v), GW_OK); /* host -> GPU */
    CHECK(v == 2);
    CHECK(fc_dev_verify(cu, (uint8_t *)region + HOST_AT, 4097, 22) == -1);
    CHECK_ST(gw_notify_count_wait(ep, 5, 1, 30000), GW_OK); /* the paged put */
    CHECK_ST(gw_notify_wait(ep, 30000, &v), GW_OK);         /* the list put */
    CHECK(v == 6);
    uint8_t *got = dev_read(cu, region, REGION), *want = image();
    size_t first = 0;
    while (first < REGION && got[first] == want[first])
        first++;
    if (first < REGION)
        fprintf(stderr, "server region: first wrong byte at %zu\n", first);
    CHECK(first == REGION);
    free(got);
    free(want);

    /* messages into GPU memory: from the client's GPU memory (3 MiB and
     * 1000 B: rendezvous, the provider reads it) and from its host memory
     * (1000 B: eager, copied in) */
    void *rbuf = fc_dev_alloc(cu, 4 * MiB);
    gw_mem_t *rmem;
    REQUIRE_OK(gw_mem_reg(ctx, rbuf, 4 * MiB, GW_ACCESS_LOCAL, &rmem));
    recv_check(cu, ep, rbuf, rmem, 3, 3 * MiB, 23);
    recv_check(cu, ep, rbuf, rmem, 4, 1000, 24);
    recv_check(cu, ep, rbuf, rmem, 7, 1000, 26);
    /* ... and out of it */
    fc_dev_fill(cu, rbuf, 2 * MiB + 1, 27);
    send_wait(ep, rbuf, 2 * MiB + 1, rmem, 8);
    fc_dev_fill(cu, rbuf, 900, 28);
    send_wait(ep, rbuf, 900, rmem, 9);

    char done[8];
    gw_request_t *r;
    REQUIRE_OK(gw_recv(ep, done, sizeof(done), NULL, 99, ~0ull, &r));
    CHECK_ST(gw_request_wait(r, 30000), GW_OK);
    gw_request_free(r);
    gw_ep_close(ep, 2000);
    gw_listener_destroy(l);
    CHECK_ST(gw_mem_dereg(rmem), GW_OK);
    CHECK_ST(gw_mem_dereg(mem), GW_OK);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    cu->cuMemFree((CUdeviceptr)(uintptr_t)rbuf);
    cu->cuMemFree((CUdeviceptr)(uintptr_t)region);
    return gwt_done("ofi_hmem server");
}

/* A posted request waited for and freed (rp: read after the post). */
static void wait_req(gw_status_t posted, gw_request_t **rp)
{
    REQUIRE_OK(posted);
    CHECK_ST(gw_request_wait(*rp, 30000), GW_OK);
    gw_request_free(*rp);
}

int main(int argc, char **argv)
{
    server_gpu = argc > 1 ? atoi(argv[1]) : 0;
    gpu_require_before_fork(server_gpu + 1); /* CUDA only after the fork */
    gwt_chan_pair(&pch, &cch);
    int pid = gwt_spawn(server, NULL);
    const gw_cuda_t *cu = fc_cuda(1); /* the client's memory on GPU 0 */
    gw_context_t *ctx;
    char addr[128];
    REQUIRE(gwt_chan_recv(&pch, addr, sizeof(addr), 20000) > 0);
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    gw_ep_t *ep;
    REQUIRE_OK(gw_connect(ctx, addr, &ep));
    gw_ep_info_t info;
    const char *why = no_hmem(ep, &info);
    fprintf(stderr, "connected over %s (%s)\n", info.transport, info.path);
    if (why) {
        int rc = gwt_wait(pid, 30); /* the server sees the same and skips */
        if (rc != GW_TEST_SKIP) {
            fprintf(stderr, "the server ended with %d\n", rc);
            CHECK(rc == GW_TEST_SKIP);
        }
        SKIP("%s; path: %s", why, info.path);
    }
    CHECK(strstr(info.path, "GPU memory by FI_HMEM") != NULL);
    uint64_t base;
    gw_rkey_t *rk = gwt_recv_rkey(ep, 1, &base);
    gw_request_t *r;

    void *src = fc_dev_alloc(cu, REGION), *dst = fc_dev_alloc(cu, REGION);
    gw_mem_t *smem, *dmem;
    REQUIRE_OK(gw_mem_reg(ctx, src, REGION, GW_ACCESS_LOCAL, &smem));
    REQUIRE_OK(gw_mem_reg(ctx, dst, REGION, GW_ACCESS_LOCAL, &dmem));
    gw_mem_info_t mi = {.size = sizeof(mi)};
    gw_mem_query(smem, &mi);
    fprintf(stderr, "client buffer on GPU 0: %s\n", mi.path);
    CHECK(strstr(mi.path, "FI_HMEM_CUDA") != NULL);

    /* get: the server's GPU region -> local GPU memory, several sizes; and into host memory */
    size_t gsz[] = {1, 8, 65539, 5 * MiB + 7};
    for (size_t i = 0; i < sizeof(gsz) / sizeof(gsz[0]); i++) {
        wait_req(gw_get(ep, dst, gsz[i], dmem, base, rk, &r), &r);
        long long bad = fc_dev_verify(cu, dst, gsz[i], 11);
        if (bad != -1)
            fprintf(stderr, "get of %zu bytes: first wrong byte at %lld\n", gsz[i], bad);
        CHECK(bad == -1);
    }
    uint8_t *host = malloc(2 * MiB);
    REQUIRE(host);
    wait_req(gw_get(ep, host, 2 * MiB, NULL, base, rk, &r), &r);
    CHECK(gwt_verify(host, 2 * MiB, 11) == -1);

    /* put GPU -> GPU, read back by a get (a completed put has landed) */
    fc_dev_fill(cu, src, PUT_LEN, 25);
    wait_req(gw_put(ep, src, PUT_LEN, smem, base + PUT_AT, rk, &r), &r);
    wait_req(gw_get(ep, dst, PUT_LEN, dmem, base + PUT_AT, rk, &r), &r);
    CHECK(fc_dev_verify(cu, dst, PUT_LEN, 25) == -1);

    /* put_notify GPU -> GPU, then host -> GPU: the server checks at each value */
    fc_dev_fill(cu, src, PN_LEN, 21);
    wait_req(gw_put_notify(ep, src, PN_LEN, smem, base, rk, 1, &r), &r);
    gwt_fill(host, 4097, 22);
    wait_req(gw_put_notify(ep, host, 4097, NULL, base + HOST_AT, rk, 2, &r), &r);

    /* a paged put with a counted notification, a list put with an ordered one */
    fc_dev_fill(cu, src, REGION, 31);
    uint32_t lp[NPG], rp[NPG];
    pg_pick(lp, rp);
    gw_xfer_opts_t o = {.size = sizeof(o), .notify = GW_NOTIFY_COUNTED, .value = 5};
    wait_req(gw_xfer_pages(ep, GW_XFER_PUT, smem, src, lp, rk, base + PG_AT, rp, NPG, PAGE, &o, &r), &r);
    gw_local_desc_t ld[NL], dd[NL];
    gw_remote_desc_t rd[NL];
    for (uint32_t i = 0; i < NL; i++) {
        ld[i] = (gw_local_desc_t){smem, ls_src(i), ls_len(i)};
        rd[i] = (gw_remote_desc_t){rk, ls_dst(i), ls_len(i)};
        dd[i] = (gw_local_desc_t){dmem, ls_dst(i), ls_len(i)};
    }
    gw_dlist_t *L, *R, *D;
    REQUIRE_OK(gw_dlist_local(ctx, ld, NL, &L));
    REQUIRE_OK(gw_dlist_remote(ep, rd, NL, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, &R));
    REQUIRE_OK(gw_dlist_local(ctx, dd, NL, &D));
    o = (gw_xfer_opts_t){.size = sizeof(o), .notify = GW_NOTIFY_ORDERED, .value = 6};
    wait_req(gw_xfer_batch(ep, GW_XFER_PUT, L, NULL, R, NULL, NL, &o, &r), &r);

    /* read both back: a paged get of the pages (local page i <- remote page
     * rp[i]) and a list get into the same offsets of dst */
    CHECK(cu->cuMemsetD8((CUdeviceptr)(uintptr_t)dst, 0, REGION) == CUDA_SUCCESS);
    wait_req(gw_xfer_pages(ep, GW_XFER_GET, dmem, dst, NULL, rk, base + PG_AT, rp, NPG, PAGE, NULL, &r), &r);
    wait_req(gw_xfer_batch(ep, GW_XFER_GET, D, NULL, R, NULL, NL, NULL, &r), &r);
    uint8_t *got = dev_read(cu, dst, REGION), *s = malloc(REGION);
    REQUIRE(s);
    gwt_fill(s, REGION, 31);
    int bad = 0;
    for (uint32_t i = 0; i < NPG; i++)
        bad += memcmp(got + (size_t)i * PAGE, s + (size_t)lp[i] * PAGE, PAGE) != 0;
    if (bad)
        fprintf(stderr, "paged get: %d of %u pages wrong\n", bad, NPG);
    CHECK(bad == 0);
    bad = 0;
    for (uint32_t i = 0; i < NL; i++)
        bad += memcmp(got + ls_dst(i), s + ls_src(i), ls_len(i)) != 0;
    if (bad)
        fprintf(stderr, "list get: %d of %u entries wrong\n", bad, NL);
    CHECK(bad == 0);
    free(got);
    free(s);
    CHECK_ST(gw_dlist_destroy(L), GW_OK);
    CHECK_ST(gw_dlist_destroy(R), GW_OK);
    CHECK_ST(gw_dlist_destroy(D), GW_OK);

    /* messages out of GPU memory (3 MiB, 1000 B) and from host memory into
     * the server's GPU memory; then the server's from its GPU memory */
    fc_dev_fill(cu, src, 3 * MiB, 23);
    send_wait(ep, src, 3 * MiB, smem, 3);
    fc_dev_fill(cu, src, 1000, 24);
    send_wait(ep, src, 1000, smem, 4);
    gwt_fill(host, 1000, 26);
    send_wait(ep, host, 1000, NULL, 7);
    recv_check(cu, ep, dst, dmem, 8, 2 * MiB + 1, 27);
    recv_check(cu, ep, dst, dmem, 9, 900, 28);
    send_wait(ep, "done", 5, NULL, 99);

    gw_ep_query(ep, &info);
    fprintf(stderr, "at the end: %s\n", info.path);
    gw_rkey_destroy(rk);
    CHECK_ST(gw_ep_close(ep, 2000), GW_OK);
    CHECK_ST(gw_mem_dereg(smem), GW_OK);
    CHECK_ST(gw_mem_dereg(dmem), GW_OK);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    cu->cuMemFree((CUdeviceptr)(uintptr_t)src);
    cu->cuMemFree((CUdeviceptr)(uintptr_t)dst);
    free(host);
    int rc = gwt_wait(pid, 120);
    if (rc != 0)
        fprintf(stderr, "the server ended with %d\n", rc);
    CHECK(rc == 0);
    return gwt_done("ofi_hmem");
}
