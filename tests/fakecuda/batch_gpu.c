/* batch_gpu.c - batched and paged transfers with GPU memory on both sides,
 * two processes, against the fake CUDA driver (tests/fakecuda), over the
 * transport GPUWIRE_TRANSPORTS names (tcp: staging; intra: CUDA IPC):
 * a paged put GPU -> GPU with a counted notification, a list put host ->
 * GPU with an ordered one, a paged get GPU -> GPU; payloads verified by
 * copying the "device" memory back. */
#include <poll.h>
#include <unistd.h>

#include "cuda/cuda_wrap.h"
#include "harness.h"

#define REGION (12u << 20)
#define PAGE 4096u
#define NPAGES (REGION / PAGE)
#define NSEL 700u

static gwt_chan_t pch, cch;

static const gw_cuda_t *cuda(void)
{
    char why[256];
    const gw_cuda_t *cu = gw_cuda_get(why, sizeof(why));
    if (!cu)
        SKIP("fake CUDA driver not loaded: %s", why);
    if (!gw_cuda_ctx_for_device(0, why, sizeof(why))) /* (a real driver needs a current context) */
        SKIP("no CUDA context for device 0: %s", why);
    return cu;
}

static void *dev_alloc(const gw_cuda_t *cu, size_t n, uint64_t seed)
{
    CUdeviceptr p;
    REQUIRE(cu->cuMemAlloc(&p, n) == CUDA_SUCCESS);
    uint8_t *h = malloc(n);
    gwt_fill(h, n, seed);
    REQUIRE(cu->cuMemcpyHtoD(p, h, n) == CUDA_SUCCESS);
    free(h);
    return (void *)(uintptr_t)p;
}

static uint8_t *dev_read(const gw_cuda_t *cu, const void *dev, size_t n)
{
    uint8_t *h = malloc(n);
    REQUIRE(cu->cuMemcpyDtoH(h, (CUdeviceptr)(uintptr_t)dev, n) == CUDA_SUCCESS);
    return h;
}

/* Progresses ctx until one byte comes over chan; fails after 30 s (the
 * other process may have died: EOF reads as -1 too). */
static void wait_chan(gwt_chan_t *chan, gw_context_t *ctx)
{
    char c;
    for (int i = 0; i < 30000; i++) {
        /* a 1 ms receive could stop inside a message and lose the channel's framing: poll first */
        struct pollfd p = {.fd = chan->rfd, .events = POLLIN};
        if (poll(&p, 1, 1) > 0) {
            REQUIRE(gwt_chan_recv(chan, &c, 1, 5000) == 1);
            return;
        }
        gw_progress(ctx);
    }
    REQUIRE(!"the other process did not answer within 30 s");
}

/* page i of the selection: distinct (7919 is prime to NPAGES) */
static uint32_t page(uint32_t i)
{
    return (uint32_t)(((uint64_t)i * 7919u + 5) % NPAGES);
}

/* What the server's region holds after the puts: seed 11, the selected
 * pages from the client's seed-31 buffer, the list entries from seed 41. */
static uint8_t *expected(int with_list)
{
    uint8_t *img = malloc(REGION), *a = malloc(REGION), *b = malloc(REGION);
    gwt_fill(img, REGION, 11);
    gwt_fill(a, REGION, 31);
    gwt_fill(b, REGION, 41);
    for (uint32_t i = 0; i < NSEL; i++)
        memcpy(img + (size_t)page(NSEL - 1 - i) * PAGE, a + (size_t)page(i) * PAGE, PAGE);
    if (with_list)
        for (uint32_t i = 0; i < 50; i++) /* entry i: 1000 + i bytes from 100003 * i to 5 MiB + 65536 * i */
            memcpy(img + (5u << 20) + (size_t)i * 65536, b + (size_t)i * 100003, 1000 + i);
    free(a);
    free(b);
    return img;
}

static int server(void *arg)
{
    (void)arg;
    const gw_cuda_t *cu = cuda();
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    gw_listener_t *l;
    gw_ep_t *ep = gwt_listen_accept(ctx, &cch, &l);
    void *region = dev_alloc(cu, REGION, 11);
    gw_mem_t *mem;
    REQUIRE_OK(gw_mem_reg(ctx, region, REGION, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, &mem));
    gwt_send_rkey(ep, mem, 1);
    CHECK_ST(gw_notify_count_wait(ep, 5, 1, 20000), GW_OK);
    uint64_t v = 0;
    CHECK_ST(gw_notify_wait(ep, 20000, &v), GW_OK);
    CHECK(v == 6);
    uint8_t *got = dev_read(cu, region, REGION), *want = expected(1);
    CHECK(memcmp(got, want, REGION) == 0);
    free(got);
    free(want);
    REQUIRE(gwt_chan_send(&cch, "v", 1) == 0);
    /* serve the client's gets until it is done */
    wait_chan(&cch, ctx);
    CHECK_ST(gw_ep_close(ep, 2000), GW_OK);
    CHECK_ST(gw_mem_dereg(mem), GW_OK);
    gw_listener_destroy(l);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    return gwt_done("batch_gpu server");
}

int main(void)
{
    gwt_chan_pair(&pch, &cch);
    int pid = gwt_spawn(server, NULL); /* before CUDA is initialised here: a real driver does not survive fork */
    const gw_cuda_t *cu = cuda();
    char addr[128];
    REQUIRE(gwt_chan_recv(&pch, addr, sizeof(addr), 10000) > 0);
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    gw_ep_t *ep;
    REQUIRE_OK(gw_connect(ctx, addr, &ep));
    uint64_t base;
    gw_rkey_t *rk = gwt_recv_rkey(ep, 1, &base);
    gw_ep_info_t info = {.size = sizeof(info)};
    gw_ep_query(ep, &info);
    fprintf(stderr, "connected over %s (%s)\n", info.transport, info.path);

    void *src = dev_alloc(cu, REGION, 31), *dst = dev_alloc(cu, REGION, 0);
    uint8_t *hsrc = malloc(REGION);
    gwt_fill(hsrc, REGION, 41);
    gw_mem_t *msrc, *mdst, *mh;
    REQUIRE_OK(gw_mem_reg(ctx, src, REGION, GW_ACCESS_LOCAL, &msrc));
    REQUIRE_OK(gw_mem_reg(ctx, dst, REGION, GW_ACCESS_LOCAL, &mdst));
    REQUIRE_OK(gw_mem_reg(ctx, hsrc, REGION, GW_ACCESS_LOCAL, &mh));

    /* 1. paged put GPU -> GPU, pages in a scattered order, a counted notification */
    uint32_t lp[NSEL], rp[NSEL];
    for (uint32_t i = 0; i < NSEL; i++) {
        lp[i] = page(i);
        rp[i] = page(NSEL - 1 - i);
    }
    gw_xfer_opts_t o = {.size = sizeof(o), .notify = GW_NOTIFY_COUNTED, .value = 5};
    gw_request_t *r;
    REQUIRE_OK(gw_xfer_pages(ep, GW_XFER_PUT, msrc, src, lp, rk, base, rp, NSEL, PAGE, &o, &r));
    CHECK_ST(gw_request_wait(r, 20000), GW_OK);
    gw_request_free(r);
    /* intra: the 700 scattered pages (no two adjacent on both sides) went to
     * the kernel in one launch, every page once; tcp: gathered on this side
     * and scattered on the other, each in a few launches (one per run or
     * group of runs): BATCH_GPU_LAUNCH_DESC descriptors in at most
     * BATCH_GPU_LAUNCH_MAX launches */
    const char *launches = getenv("FAKECUDA_LAUNCHES");
    const char *want_desc = getenv("BATCH_GPU_LAUNCH_DESC"), *max_launch = getenv("BATCH_GPU_LAUNCH_MAX");
    if (launches) {
        FILE *lf = fopen(launches, "r");
        unsigned n, nl = 0, sum = 0, big = 0;
        while (lf && fscanf(lf, "gw_batch_copy %u\n", &n) == 1) {
            nl++;
            sum += n;
            big += n > 8192;
        }
        if (lf)
            fclose(lf);
        fprintf(stderr, "kernel launches of the paged put: %u, %u descriptors\n", nl, sum);
        CHECK(max_launch ? nl >= 1 && nl <= (unsigned)atoi(max_launch) : nl == 1);
        CHECK(sum == (want_desc ? (unsigned)atoi(want_desc) : NSEL));
        CHECK(big == 0);
    }
    /* 2. a list put host -> GPU, an ordered notification */
    gw_local_desc_t ld[50];
    gw_remote_desc_t rd[50];
    for (uint32_t i = 0; i < 50; i++) {
        ld[i] = (gw_local_desc_t){mh, (size_t)i * 100003, 1000 + i};
        rd[i] = (gw_remote_desc_t){rk, (5u << 20) + (uint64_t)i * 65536, 1000 + i};
    }
    gw_dlist_t *L, *R;
    REQUIRE_OK(gw_dlist_local(ctx, ld, 50, &L));
    REQUIRE_OK(gw_dlist_remote(ep, rd, 50, GW_ACCESS_REMOTE_WRITE | GW_ACCESS_REMOTE_READ, &R));
    o.notify = GW_NOTIFY_ORDERED;
    o.value = 6;
    REQUIRE_OK(gw_xfer_batch(ep, GW_XFER_PUT, L, NULL, R, NULL, 50, &o, &r));
    CHECK_ST(gw_request_wait(r, 20000), GW_OK);
    gw_request_free(r);
    wait_chan(&pch, ctx); /* the server checked its region */
    /* 3. paged get GPU -> GPU: the pages back into dst, in yet another order */
    REQUIRE_OK(gw_xfer_pages(ep, GW_XFER_GET, mdst, dst, rp, rk, base, lp, NSEL, PAGE, NULL, &r));
    CHECK_ST(gw_request_wait(r, 20000), GW_OK);
    gw_request_free(r);
    uint8_t *got = dev_read(cu, dst, REGION), *want = expected(1), *zero = calloc(1, PAGE);
    int bad = 0;
    for (uint32_t i = 0; i < NSEL; i++) /* dst page rp[i] <- server page lp[i] */
        bad += memcmp(got + (size_t)rp[i] * PAGE, want + (size_t)lp[i] * PAGE, PAGE) != 0;
    CHECK(bad == 0);
    free(got);
    free(want);
    free(zero);
    REQUIRE(gwt_chan_send(&pch, "q", 1) == 0);
    /* intra: how the GPU entries moved (the copy kernel, or copy-engine copies with the reason) */
    const char *want_path = getenv("BATCH_GPU_EXPECT");
    gw_ep_query(ep, &info);
    fprintf(stderr, "path after the batches: %s\n", info.path);
    if (want_path)
        CHECK(strstr(info.path, want_path) != NULL);
    CHECK_ST(gw_dlist_destroy(L), GW_OK);
    CHECK_ST(gw_dlist_destroy(R), GW_OK);
    gw_rkey_destroy(rk);
    CHECK_ST(gw_ep_close(ep, 2000), GW_OK);
    CHECK_ST(gw_mem_dereg(msrc), GW_OK);
    CHECK_ST(gw_mem_dereg(mdst), GW_OK);
    CHECK_ST(gw_mem_dereg(mh), GW_OK);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    free(hsrc);
    CHECK(gwt_wait(pid, 90) == 0);
    return gwt_done("batch_gpu");
}
