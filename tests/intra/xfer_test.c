/* SPDX-License-Identifier: Apache-2.0 */
/* xfer_test - two processes, every operation (put, put_notify, get,
 * send/recv both ways, flush of untracked puts) at sizes from 1 byte up to
 * --max, payload verified on the side that received it.
 *
 *   xfer_test --transport intra|tcp --client host|gpuN --server host|gpuN|vmmN [--max BYTES]
 *
 * gpuN is cuMemAlloc'ed memory on CUDA device N, vmmN a VMM range (two
 * cuMemCreate allocations mapped back to back, POSIX-fd exportable) on
 * device N.  Without CUDA (or with too few GPUs) a GPU configuration exits
 * 77 with the reason.  The client is the parent; neither process touches
 * CUDA before the fork. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/util.h"
#include "cuda/cuda_wrap.h"
#include "harness.h"
#include "../gpu/gpu_util.h"

static const char *g_transport = "intra", *g_client = "host", *g_server = "host";
static size_t g_max = 8u << 20;
static gwt_chan_t pch, cch;

enum { TAG_KEY = 1, TAG_READY = 2, TAG_C2S = 3, TAG_S2C = 4, TAG_RESULT = 5, TAG_BYE = 6 };

/* ---- memory of a kind ---- */
typedef struct xmem {
    char kind[16];
    int dev; /* -1 host */
    int vmm;
    void *p;
    size_t len;
    CUmemGenericAllocationHandle h[2];
    size_t vmm_total;
} xmem_t;

static const gw_cuda_t *need_cuda(int dev)
{
    char why[256];
    const gw_cuda_t *cu = gw_cuda_get(why, sizeof(why));
    if (!cu)
        SKIP("%s memory needs CUDA: %s", dev >= 0 ? "GPU" : "?", why);
    if (dev >= cu->device_count)
        SKIP("needs CUDA device %d, found %d device(s)", dev, cu->device_count);
    if (!gw_cuda_ctx_for_device(dev, why, sizeof(why))) {
        fprintf(stderr, "%s\n", why);
        exit(1);
    }
    return cu;
}

static void xalloc(xmem_t *m, const char *kind, size_t len)
{
    memset(m, 0, sizeof(*m));
    snprintf(m->kind, sizeof(m->kind), "%s", kind);
    m->len = len;
    m->dev = -1;
    if (!strcmp(kind, "host")) {
        m->p = malloc(len);
        REQUIRE(m->p);
        return;
    }
    m->vmm = !strncmp(kind, "vmm", 3);
    m->dev = atoi(kind + 3);
    const gw_cuda_t *cu = need_cuda(m->dev);
    if (!m->vmm) {
        CUdeviceptr d;
        REQUIRE(cu->cuMemAlloc(&d, len) == CUDA_SUCCESS);
        m->p = (void *)(uintptr_t)d;
        return;
    }
    if (!cu->cuMemCreate)
        SKIP("driver lacks VMM (cuMemCreate)");
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = m->dev;
    size_t gran = 0;
    REQUIRE(cu->cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == 0);
    size_t each = ((len + 1) / 2 + gran - 1) / gran * gran;
    CUdeviceptr va;
    REQUIRE(cu->cuMemAddressReserve(&va, 2 * each, 0, 0, 0) == 0);
    for (int i = 0; i < 2; i++) {
        REQUIRE(cu->cuMemCreate(&m->h[i], each, &prop, 0) == 0);
        REQUIRE(cu->cuMemMap(va + each * (size_t)i, each, 0, m->h[i], 0) == 0);
    }
    CUmemAccessDesc acc = {{CU_MEM_LOCATION_TYPE_DEVICE, m->dev}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    REQUIRE(cu->cuMemSetAccess(va, 2 * each, &acc, 1) == 0);
    m->vmm_total = 2 * each;
    m->p = (void *)(uintptr_t)va;
}

static void xfree(xmem_t *m)
{
    if (m->dev < 0) {
        free(m->p);
        return;
    }
    const gw_cuda_t *cu = gw_cuda_get(NULL, 0);
    if (!m->vmm) {
        cu->cuMemFree((CUdeviceptr)(uintptr_t)m->p);
        return;
    }
    cu->cuMemUnmap((CUdeviceptr)(uintptr_t)m->p, m->vmm_total);
    cu->cuMemRelease(m->h[0]);
    cu->cuMemRelease(m->h[1]);
    cu->cuMemAddressFree((CUdeviceptr)(uintptr_t)m->p, m->vmm_total);
}

static uint8_t *g_tmp; /* host scratch of g_max bytes */

static void xfill(xmem_t *m, size_t off, size_t n, uint64_t seed)
{
    if (m->dev < 0) {
        gwt_fill((char *)m->p + off, n, seed);
        return;
    }
    gwt_fill(g_tmp, n, seed);
    const gw_cuda_t *cu = gw_cuda_get(NULL, 0);
    REQUIRE(cu->cuMemcpyHtoD((CUdeviceptr)(uintptr_t)m->p + off, g_tmp, n) == 0);
    /* from pageable memory cuMemcpyHtoD may return before the DMA lands:
     * the peer reads this memory next, so wait for it */
    REQUIRE(cu->cuCtxSynchronize() == 0);
}

static long long xverify(xmem_t *m, size_t off, size_t n, uint64_t seed)
{
    if (m->dev < 0)
        return gwt_verify((char *)m->p + off, n, seed);
    REQUIRE(gw_cuda_get(NULL, 0)->cuMemcpyDtoH(g_tmp, (CUdeviceptr)(uintptr_t)m->p + off, n) == 0);
    return gwt_verify(g_tmp, n, seed);
}

/* ---- small helpers over the API ---- */
static void send_u64(gw_ep_t *ep, uint64_t tag, uint64_t v)
{
    gw_request_t *r;
    REQUIRE_OK(gw_send(ep, &v, sizeof(v), NULL, tag, &r));
    REQUIRE_OK(gw_request_wait(r, 60000));
    gw_request_free(r);
}

static uint64_t recv_u64(gw_ep_t *ep, uint64_t tag)
{
    uint64_t v = 0;
    gw_request_t *r;
    REQUIRE_OK(gw_recv(ep, &v, sizeof(v), NULL, tag, ~0ull, &r));
    REQUIRE_OK(gw_request_wait(r, 120000));
    gw_request_free(r);
    return v;
}

static size_t g_sizes[32];
static int g_nsizes;

static void make_sizes(void)
{
    size_t s[] = {1, 8, 4095, 65536, (1u << 20) + 3, 8u << 20, 64u << 20, 256u << 20, 1u << 30};
    for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++)
        if (s[i] <= g_max)
            g_sizes[g_nsizes++] = s[i];
}

/* ---- server: owns the target region ---- */
static int server(void *arg)
{
    (void)arg;
    g_tmp = malloc(g_max);
    xmem_t region;
    xalloc(&region, g_server, g_max);
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    gw_listener_t *l;
    REQUIRE_OK(gw_listen(ctx, "127.0.0.1:0", &l));
    char addr[80];
    REQUIRE_OK(gw_listener_addr(l, addr, sizeof(addr)));
    gwt_chan_send(&cch, addr, (uint32_t)strlen(addr) + 1);
    gw_ep_t *ep;
    REQUIRE_OK(gw_accept(l, 20000, &ep));
    gw_mem_t *mem;
    REQUIRE_OK(gw_mem_reg(ctx, region.p, g_max, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, &mem));
    gw_mem_info_t mi = {.size = sizeof(mi)};
    gw_mem_query(mem, &mi);
    fprintf(stderr, "server region: %s, device %d %s, path: %s\n", g_server, mi.cuda_device, mi.pci_bus_id,
            mi.path);
    CHECK(mi.type == (region.dev >= 0 ? GW_MEM_CUDA : GW_MEM_HOST));
    gwt_send_rkey(ep, mem, TAG_KEY);
    gw_request_t *r;
    for (int i = 0; i < g_nsizes; i++) {
        size_t n = g_sizes[i];
        uint64_t v = 0;
        /* put_notify landed before its notification */
        REQUIRE_OK(gw_notify_wait(ep, 120000, &v));
        CHECK(v == n);
        long long bad = xverify(&region, 0, n, 1000 + n);
        if (bad >= 0)
            fprintf(stderr, "put %zu bytes: mismatch at %lld\n", n, bad);
        send_u64(ep, TAG_RESULT, bad < 0);
        /* get: the client reads what we fill now */
        xfill(&region, 0, n, 2000 + n);
        send_u64(ep, TAG_READY, n);
        /* client -> server message into the region */
        REQUIRE_OK(gw_recv(ep, region.p, n, mem, TAG_C2S, ~0ull, &r));
        CHECK_ST(gw_request_wait(r, 120000), GW_OK);
        gw_request_info_t ri = {.size = sizeof(ri)};
        gw_request_info(r, &ri);
        CHECK(ri.length == n && ri.tag == TAG_C2S);
        gw_request_free(r);
        bad = xverify(&region, 0, n, 3000 + n);
        if (bad >= 0)
            fprintf(stderr, "send c->s %zu bytes: mismatch at %lld\n", n, bad);
        send_u64(ep, TAG_RESULT, bad < 0);
        /* server -> client message from the region */
        xfill(&region, 0, n, 4000 + n);
        REQUIRE_OK(gw_send(ep, region.p, n, mem, TAG_S2C, &r));
        CHECK_ST(gw_request_wait(r, 120000), GW_OK);
        gw_request_free(r);
        /* untracked puts + flush: the client tells us when they are flushed */
        CHECK(recv_u64(ep, TAG_READY) == n);
        bad = xverify(&region, 0, n, 5000 + n);
        if (bad >= 0)
            fprintf(stderr, "flushed puts %zu bytes: mismatch at %lld\n", n, bad);
        send_u64(ep, TAG_RESULT, bad < 0);
    }
    send_u64(ep, TAG_BYE, 1);
    char tok[4];
    gwt_chan_recv(&cch, tok, sizeof(tok), 60000); /* the client closed its side */
    gw_ep_close(ep, 1000);
    CHECK_ST(gw_mem_dereg(mem), GW_OK);
    gw_listener_destroy(l);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    xfree(&region);
    free(g_tmp);
    return gwt_done("xfer_test server");
}

int main(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--transport"))
            g_transport = argv[i + 1];
        else if (!strcmp(argv[i], "--client"))
            g_client = argv[i + 1];
        else if (!strcmp(argv[i], "--server"))
            g_server = argv[i + 1];
        else if (!strcmp(argv[i], "--max"))
            g_max = (size_t)strtoull(argv[i + 1], NULL, 0);
    }
    setenv("GPUWIRE_TRANSPORTS", g_transport, 1);
    make_sizes();
    /* decide about skipping before the fork, without creating a context:
     * gw_cuda_get() only loads the driver and runs cuInit */
    if (strcmp(g_client, "host") || strcmp(g_server, "host")) {
        int need = 0;
        if (strcmp(g_client, "host"))
            need = GW_MAX(need, atoi(g_client + 3) + 1);
        if (strcmp(g_server, "host"))
            need = GW_MAX(need, atoi(g_server + 3) + 1);
        gpu_require_before_fork(need);
    }
    fprintf(stderr, "xfer_test: transport %s, client %s, server %s, sizes 1 .. %zu\n", g_transport, g_client,
            g_server, g_sizes[g_nsizes - 1]);
    gwt_chan_pair(&pch, &cch);
    int pid = gwt_spawn(server, NULL);
    char addr[80];
    REQUIRE(gwt_chan_recv(&pch, addr, sizeof(addr), 20000) > 0);
    g_tmp = malloc(g_max);
    xmem_t src, dst;
    xalloc(&src, g_client, g_max);
    xalloc(&dst, g_client, g_max);
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    gw_ep_t *ep;
    REQUIRE_OK(gw_connect(ctx, addr, &ep));
    gw_ep_info_t info = {.size = sizeof(info)};
    REQUIRE_OK(gw_ep_query(ep, &info));
    fprintf(stderr, "endpoint: %s; %s; downgrades: %s\n", info.transport, info.path, info.downgrades);
    CHECK(!strcmp(info.transport, g_transport));
    gw_mem_t *msrc, *mdst;
    REQUIRE_OK(gw_mem_reg(ctx, src.p, g_max, GW_ACCESS_LOCAL, &msrc));
    REQUIRE_OK(gw_mem_reg(ctx, dst.p, g_max, GW_ACCESS_LOCAL, &mdst));
    gw_mem_info_t mi = {.size = sizeof(mi)};
    gw_mem_query(msrc, &mi);
    fprintf(stderr, "client buffers: %s, path: %s\n", g_client, mi.path);
    uint64_t base;
    gw_rkey_t *rk = gwt_recv_rkey(ep, TAG_KEY, &base);
    gw_request_t *r;
    gw_request_info_t ri = {.size = sizeof(ri)};
    int ok_ops = 0;
    for (int i = 0; i < g_nsizes; i++) {
        size_t n = g_sizes[i];
        double t0 = (double)gw_now_ns();
        /* put_notify */
        xfill(&src, 0, n, 1000 + n);
        REQUIRE_OK(gw_put_notify(ep, src.p, n, msrc, base, rk, n, &r));
        CHECK_ST(gw_request_wait(r, 120000), GW_OK);
        gw_request_free(r);
        CHECK(recv_u64(ep, TAG_RESULT) == 1);
        /* get */
        CHECK(recv_u64(ep, TAG_READY) == n);
        REQUIRE_OK(gw_get(ep, dst.p, n, mdst, base, rk, &r));
        CHECK_ST(gw_request_wait(r, 120000), GW_OK);
        gw_request_free(r);
        long long bad = xverify(&dst, 0, n, 2000 + n);
        if (bad >= 0)
            fprintf(stderr, "get %zu bytes: mismatch at %lld\n", n, bad);
        CHECK(bad < 0);
        /* send c -> s */
        xfill(&src, 0, n, 3000 + n);
        REQUIRE_OK(gw_send(ep, src.p, n, msrc, TAG_C2S, &r));
        CHECK_ST(gw_request_wait(r, 120000), GW_OK);
        gw_request_free(r);
        CHECK(recv_u64(ep, TAG_RESULT) == 1);
        /* recv s -> c */
        REQUIRE_OK(gw_recv(ep, dst.p, n, mdst, TAG_S2C, ~0ull, &r));
        CHECK_ST(gw_request_wait(r, 120000), GW_OK);
        gw_request_info(r, &ri);
        CHECK(ri.length == n);
        gw_request_free(r);
        bad = xverify(&dst, 0, n, 4000 + n);
        if (bad >= 0)
            fprintf(stderr, "recv s->c %zu bytes: mismatch at %lld\n", n, bad);
        CHECK(bad < 0);
        /* untracked puts in two halves, then flush */
        xfill(&src, 0, n, 5000 + n);
        size_t h = n / 2;
        REQUIRE_OK(gw_put(ep, src.p, h, msrc, base, rk, NULL));
        REQUIRE_OK(gw_put(ep, (char *)src.p + h, n - h, msrc, base + h, rk, NULL));
        REQUIRE_OK(gw_flush(ep, &r));
        CHECK_ST(gw_request_wait(r, 120000), GW_OK);
        gw_request_free(r);
        send_u64(ep, TAG_READY, n);
        CHECK(recv_u64(ep, TAG_RESULT) == 1);
        ok_ops += 5;
        fprintf(stderr, "  %10zu bytes: put_notify, get, send, recv, put+flush verified (%.1f ms)\n", n,
                ((double)gw_now_ns() - t0) / 1e6);
    }
    CHECK(recv_u64(ep, TAG_BYE) == 1);
    gw_rkey_destroy(rk);
    CHECK_ST(gw_ep_close(ep, 2000), GW_OK);
    gwt_chan_send(&pch, "ok", 3);
    CHECK_ST(gw_mem_dereg(msrc), GW_OK);
    CHECK_ST(gw_mem_dereg(mdst), GW_OK);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    xfree(&src);
    xfree(&dst);
    free(g_tmp);
    CHECK(gwt_wait(pid, 600) == 0);
    printf("xfer_test %s %s->%s: %d operations verified\n", g_transport, g_client, g_server, ok_ops);
    return gwt_done("xfer_test");
}
