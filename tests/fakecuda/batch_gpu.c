/* SPDX-License-Identifier: Apache-2.0 */
/* batch_gpu.c - batched and paged transfers with GPU memory on both sides,
 * two processes, against the fake CUDA driver (tests/fakecuda), over the
 * transport GPUWIRE_TRANSPORTS names (tcp: staging; intra: CUDA IPC):
 * a paged put GPU -> GPU with a counted notification, a list put host ->
 * GPU with an ordered one, a paged get GPU -> GPU; payloads verified by
 * copying the "device" memory back.  Then the paged form's corners, each
 * read back by a paged get: index arrays left NULL (pages 0..n-1), pages of
 * an odd size larger than one kernel piece (64 KiB), the same page in
 * several entries on either side, zero pages and zero-byte pages, and pages
 * outside either region (refused before anything moves or launches, the
 * message naming the entry).  Over intra with the kernel (FAKECUDA_LAUNCHES
 * set) the paged batches go to the page kernel, which the fake driver runs
 * by the index arrays, as the GPU would. */
#include <poll.h>
#include <unistd.h>

#include "cuda/cuda_wrap.h"
#include "harness.h"
#include "fc_dev.h"

#define REGION (12u << 20)
#define PAGE 4096u
#define NPAGES (REGION / PAGE)
#define NSEL 700u

static gwt_chan_t pch, cch;

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

/* Launches logged so far by the fake driver (FAKECUDA_LAUNCHES): how many of
 * kernel `name`, and the pages or descriptors they covered; 0 when no log. */
static unsigned launches(const char *name, unsigned *sum, unsigned *big)
{
    return fc_launches(name, sum, 8192, big);
}

/* One paged transfer, waited for. */
static gw_status_t pages(gw_ep_t *ep, int op, gw_mem_t *m, void *base, const uint32_t *lp, gw_rkey_t *rk,
                         uint64_t raddr, const uint32_t *rp, size_t n, size_t ps)
{
    gw_request_t *r;
    gw_status_t st = gw_xfer_pages(ep, op, m, base, lp, rk, raddr, rp, n, ps, NULL, &r);
    if (st != GW_OK)
        return st;
    st = gw_request_wait(r, 20000);
    gw_request_free(r);
    return st;
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
    const gw_cuda_t *cu = fc_cuda(1);
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    gw_listener_t *l;
    gw_ep_t *ep = gwt_listen_accept(ctx, &cch, &l);
    void *region = fc_dev_alloc_filled(cu, REGION, 11);
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

/* 9. prepared lists over GPU memory on both sides (over intra the list
 * kernel reads the lists' pinned tables by the index arrays, one launch per
 * batch; the fake driver runs it by them).  hs: the source region's bytes.
 * Remote pages 1000.. and 8 MiB.., dst pages 1500.. and 6 MiB.. are free to
 * use. */
#define NL9 300u
#define NM9 200u
static uint64_t len9(uint32_t j) { return 500 + (j % 10) * 333; } /* mixed lengths, ten classes */

static void list_form(gw_context_t *ctx, gw_ep_t *ep, gw_rkey_t *rk, gw_mem_t *msrc, gw_mem_t *mdst, void *dst,
                      const uint8_t *hs, int logged)
{
    const gw_cuda_t *cu = fc_cuda(1);
    unsigned sum, big, kl = logged ? launches("gw_list_copy", &sum, &big) : 0, ksum = logged ? sum : 0;
    /* 9a. lists of one length: local pages page(j), remote pages 1000 + j,
     * dst pages 1500 + j; a put of 200 random pairs (local indices repeat,
     * remote ones are distinct), read back by a get of every entry (no
     * index arrays) */
    static gw_local_desc_t ls[NL9], ds[NL9];
    static gw_remote_desc_t rs[NL9];
    for (uint32_t j = 0; j < NL9; j++) {
        ls[j] = (gw_local_desc_t){msrc, (size_t)page(j) * PAGE, PAGE};
        rs[j] = (gw_remote_desc_t){rk, (uint64_t)(1000 + j) * PAGE, PAGE};
        ds[j] = (gw_local_desc_t){mdst, (size_t)(1500 + j) * PAGE, PAGE};
    }
    gw_dlist_t *L, *R, *D;
    REQUIRE_OK(gw_dlist_local(ctx, ls, NL9, &L));
    REQUIRE_OK(gw_dlist_remote(ep, rs, NL9, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, &R));
    REQUIRE_OK(gw_dlist_local(ctx, ds, NL9, &D));
    uint32_t li[NL9], ri[NL9];
    uint64_t rnd = 0x9e3779b97f4a7c15ull;
    for (uint32_t j = 0; j < NL9; j++)
        ri[j] = j;
    for (uint32_t j = NL9 - 1; j > 0; j--) { /* a random permutation: distinct remote entries */
        rnd = rnd * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t k = (uint32_t)((rnd >> 33) % (j + 1)), t = ri[j];
        ri[j] = ri[k];
        ri[k] = t;
    }
    for (uint32_t i = 0; i < NM9; i++) {
        rnd = rnd * 6364136223846793005ull + 1442695040888963407ull;
        li[i] = (uint32_t)((rnd >> 33) % 60); /* 200 picks of 60 entries: repeats */
    }
    gw_request_t *r;
    REQUIRE_OK(gw_xfer_batch(ep, GW_XFER_PUT, L, li, R, ri, NM9, NULL, &r));
    /* the lists are in use until the transfer completes: refused, not freed
     * under the kernel (a request that completed already lets it go) */
    gw_status_t dst0 = gw_dlist_destroy(L);
    fprintf(stderr, "destroying a list in use: %s\n", gw_status_str(dst0));
    if (dst0 == GW_OK) {
        CHECK(gw_request_test(r) == GW_OK);
        REQUIRE_OK(gw_dlist_local(ctx, ls, NL9, &L));
    } else {
        CHECK_ST(dst0, GW_ERR_BUSY);
        CHECK(strstr(gw_last_error(ctx), "in progress") != NULL);
    }
    CHECK_ST(gw_request_wait(r, 20000), GW_OK);
    gw_request_free(r);
    REQUIRE_OK(gw_xfer_batch(ep, GW_XFER_GET, D, NULL, R, NULL, NL9, NULL, &r));
    CHECK_ST(gw_request_wait(r, 20000), GW_OK);
    gw_request_free(r);
    uint8_t *got = dev_read(cu, dst, REGION);
    int bad = 0;
    for (uint32_t i = 0; i < NM9; i++) /* dst page 1500 + ri[i] <- remote 1000 + ri[i] <- src page(li[i]) */
        bad += memcmp(got + (size_t)(1500 + ri[i]) * PAGE, hs + (size_t)page(li[i]) * PAGE, PAGE) != 0;
    CHECK(bad == 0);
    free(got);
    if (logged) { /* one launch each, no descriptors */
        unsigned n = launches("gw_list_copy", &sum, &big);
        fprintf(stderr, "list kernel launches of 9a: %u, %u entries\n", n - kl, sum - ksum);
        CHECK(n == kl + 2 && sum == ksum + NM9 + NL9);
        kl = n;
        ksum = sum;
    }

    /* 9b. lists of mixed lengths at odd addresses (the kernel's byte path):
     * entry j is len9(j) bytes at src + 1 + 6007 j, remote 8 MiB + 5 + 8192 j,
     * dst 6 MiB + 9 + 8192 j; a put of pairs of equal length (remote entries
     * distinct), twice all entries with no index arrays (the second one
     * checks nothing: the pairs were checked by the first), a get of all */
    static gw_local_desc_t lm[NM9], dm[NM9];
    static gw_remote_desc_t rm[NM9];
    for (uint32_t j = 0; j < NM9; j++) {
        lm[j] = (gw_local_desc_t){msrc, 1 + (size_t)j * 6007, len9(j)};
        rm[j] = (gw_remote_desc_t){rk, (8u << 20) + 5 + (uint64_t)j * 8192, len9(j)};
        dm[j] = (gw_local_desc_t){mdst, (6u << 20) + 9 + (size_t)j * 8192, len9(j)};
    }
    gw_dlist_t *LM, *RM, *DM;
    REQUIRE_OK(gw_dlist_local(ctx, lm, NM9, &LM));
    REQUIRE_OK(gw_dlist_remote(ep, rm, NM9, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, &RM));
    REQUIRE_OK(gw_dlist_local(ctx, dm, NM9, &DM));
    for (int pass = 0; pass < 2; pass++) {
        REQUIRE_OK(gw_xfer_batch(ep, GW_XFER_PUT, LM, NULL, RM, NULL, NM9, NULL, &r));
        CHECK_ST(gw_request_wait(r, 20000), GW_OK);
        gw_request_free(r);
    }
    /* remote entries: the permutation's values under NM9, each once; local
     * ones random of the same length class */
    uint32_t lmi[NM9], rmi[NM9], nsel = 0;
    for (uint32_t i = 0; i < NL9; i++)
        if (ri[i] < NM9) {
            rnd = rnd * 6364136223846793005ull + 1442695040888963407ull;
            rmi[nsel] = ri[i];
            lmi[nsel++] = (uint32_t)((rnd >> 33) % 20) * 10 + ri[i] % 10;
        }
    CHECK(nsel == NM9);
    REQUIRE_OK(gw_xfer_batch(ep, GW_XFER_PUT, LM, lmi, RM, rmi, nsel, NULL, &r));
    CHECK_ST(gw_request_wait(r, 20000), GW_OK);
    gw_request_free(r);
    REQUIRE_OK(gw_xfer_batch(ep, GW_XFER_GET, DM, NULL, RM, NULL, NM9, NULL, &r));
    CHECK_ST(gw_request_wait(r, 20000), GW_OK);
    gw_request_free(r);
    got = dev_read(cu, dst, REGION);
    bad = 0;
    for (uint32_t j = 0; j < NM9; j++) { /* remote entry j: from src entry j, or from lmi[i] where rmi[i] == j */
        uint32_t from = j;
        for (uint32_t i = 0; i < nsel; i++)
            if (rmi[i] == j)
                from = lmi[i];
        bad += memcmp(got + (6u << 20) + 9 + (size_t)j * 8192, hs + 1 + (size_t)from * 6007, len9(j)) != 0;
    }
    CHECK(bad == 0);
    free(got);
    if (logged) {
        unsigned n = launches("gw_list_copy", &sum, &big);
        CHECK(n == kl + 4 && sum == ksum + 3 * NM9 + nsel);
        kl = n;
        ksum = sum;
    }

    /* 9c. refused at posting with the entry's position, nothing launched:
     * an index past the list, a remote one too, a length mismatch */
    uint32_t bl[NM9], br[NM9];
    for (uint32_t i = 0; i < NM9; i++)
        bl[i] = br[i] = i;
    bl[57] = NL9;
    CHECK_ST(gw_xfer_batch(ep, GW_XFER_PUT, L, bl, R, br, NM9, NULL, &r), GW_ERR_INVALID);
    CHECK(strstr(gw_last_error(ctx), "entry 57: local index 300 is outside the list (300 entries)") != NULL);
    bl[57] = 57;
    br[199] = UINT32_MAX;
    CHECK_ST(gw_xfer_batch(ep, GW_XFER_GET, D, bl, R, br, NM9, NULL, &r), GW_ERR_INVALID);
    CHECK(strstr(gw_last_error(ctx), "entry 199: remote index 4294967295") != NULL);
    br[199] = 199;
    br[3] = 4; /* mixed lengths: entry 3 pairs local 3 (833 bytes) with remote 4 (1832) */
    CHECK_ST(gw_xfer_batch(ep, GW_XFER_PUT, LM, bl, RM, br, NM9, NULL, &r), GW_ERR_INVALID);
    CHECK(strstr(gw_last_error(ctx), "entry 3: local entry 3 is 1499 bytes, remote entry 4 1832") != NULL);
    br[3] = 3;
    bl[150] = NM9; /* in the mixed lists too */
    CHECK_ST(gw_xfer_batch(ep, GW_XFER_PUT, LM, bl, RM, br, NM9, NULL, &r), GW_ERR_INVALID);
    CHECK(strstr(gw_last_error(ctx), "entry 150: local index 200 is outside") != NULL);

    /* 9e. from prepared selections (gw_xfer_batch_prepared): a put of other
     * local entries into the same remote ones, read back by a get of those
     * remote entries into the same dst entries; over intra one list-kernel
     * launch each, reading both index arrays from GPU memory (the
     * selections' copies: nothing copied at posting) */
    unsigned kd0 = 0, kd1 = 0;
    if (logged)
        fc_launches("kidx_dev", &kd0, 0, NULL);
    uint32_t l2[NM9];
    for (uint32_t i = 0; i < NM9; i++)
        l2[i] = (li[i] + 7) % 60;
    gw_pages_t *sp, *sg;
    REQUIRE_OK(gw_pages_create(ctx, l2, ri, NM9, &sp));
    REQUIRE_OK(gw_pages_create(ctx, ri, ri, NM9, &sg));
    REQUIRE_OK(gw_xfer_batch_prepared(ep, GW_XFER_PUT, L, R, sp, NULL, &r));
    CHECK_ST(gw_pages_destroy(sp), GW_OK); /* (freed when the put ends) */
    CHECK_ST(gw_request_wait(r, 20000), GW_OK);
    gw_request_free(r);
    REQUIRE_OK(gw_xfer_batch_prepared(ep, GW_XFER_GET, D, R, sg, NULL, &r));
    CHECK_ST(gw_request_wait(r, 20000), GW_OK);
    gw_request_free(r);
    CHECK_ST(gw_pages_destroy(sg), GW_OK);
    got = dev_read(cu, dst, REGION);
    bad = 0;
    for (uint32_t i = 0; i < NM9; i++) /* dst page 1500 + ri[i] <- remote 1000 + ri[i] <- src page(l2[i]) */
        bad += memcmp(got + (size_t)(1500 + ri[i]) * PAGE, hs + (size_t)page(l2[i]) * PAGE, PAGE) != 0;
    CHECK(bad == 0);
    free(got);
    if (logged) {
        unsigned n = launches("gw_list_copy", &sum, &big);
        fc_launches("kidx_dev", &kd1, 0, NULL);
        fprintf(stderr, "list kernel launches of 9e: %u, %u entries, %u index arrays in GPU memory\n", n - kl,
                sum - ksum, kd1 - kd0);
        CHECK(n == kl + 2 && sum == ksum + 2 * NM9);
        CHECK(kd1 - kd0 == 4);
        kl = n;
        ksum = sum;
    }

    /* 9d. zero entries, and entries of zero bytes: valid, nothing launched */
    REQUIRE_OK(gw_xfer_batch(ep, GW_XFER_PUT, L, li, R, ri, 0, NULL, &r));
    CHECK_ST(gw_request_wait(r, 20000), GW_OK);
    gw_request_free(r);
    static gw_local_desc_t lz[8];
    static gw_remote_desc_t rz[8];
    for (uint32_t j = 0; j < 8; j++) {
        lz[j] = (gw_local_desc_t){msrc, (size_t)j * 77, 0};
        rz[j] = (gw_remote_desc_t){rk, (uint64_t)j * 99, 0};
    }
    gw_dlist_t *LZ, *RZ;
    REQUIRE_OK(gw_dlist_local(ctx, lz, 8, &LZ));
    REQUIRE_OK(gw_dlist_remote(ep, rz, 8, GW_ACCESS_REMOTE_WRITE, &RZ));
    uint32_t zi[3] = {7, 0, 7};
    REQUIRE_OK(gw_xfer_batch(ep, GW_XFER_PUT, LZ, zi, RZ, NULL, 3, NULL, &r));
    CHECK_ST(gw_request_wait(r, 20000), GW_OK);
    gw_request_free(r);
    if (logged)
        CHECK(launches("gw_list_copy", &sum, &big) == kl);
    gw_dlist_t *all[] = {L, R, D, LM, RM, DM, LZ, RZ};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        CHECK_ST(gw_dlist_destroy(all[i]), GW_OK);
}

int main(void)
{
    gwt_chan_pair(&pch, &cch);
    int pid = gwt_spawn(server, NULL); /* before CUDA is initialised here: a real driver does not survive fork */
    const gw_cuda_t *cu = fc_cuda(1);
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

    void *src = fc_dev_alloc_filled(cu, REGION, 31), *dst = fc_dev_alloc_filled(cu, REGION, 0);
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
    /* intra: the 700 scattered pages went to the page kernel as pages, in
     * one launch, no descriptors built.  tcp: gathered on this side and
     * scattered on the other by the descriptor kernel, each in a few launches
     * (one per run or group of runs): BATCH_GPU_LAUNCH_DESC descriptors in at
     * most BATCH_GPU_LAUNCH_MAX launches; "N+": N, plus one per run frame
     * (GPUWIRE_TCP_BATCH_GPU=scratch: the sender's kernel copies each run's
     * descriptor block into the scratch too; a run holds at least one page) */
    const char *want_desc = getenv("BATCH_GPU_LAUNCH_DESC"), *max_launch = getenv("BATCH_GPU_LAUNCH_MAX");
    /* logged: the page kernel's launches are counted (intra); with
     * BATCH_GPU_LAUNCH_DESC the descriptor kernel's (tcp) */
    const int logged = getenv("FAKECUDA_LAUNCHES") != NULL && !want_desc;
    unsigned sum, big;
    if (getenv("FAKECUDA_LAUNCHES") && want_desc) {
        unsigned nl = launches("gw_batch_copy", &sum, &big);
        fprintf(stderr, "kernel launches of the paged put: %u, %u descriptors\n", nl, sum);
        CHECK(nl >= 1 && nl <= (unsigned)atoi(max_launch ? max_launch : "1"));
        if (want_desc[strlen(want_desc) - 1] == '+')
            CHECK(sum > (unsigned)atoi(want_desc) && sum <= (unsigned)atoi(want_desc) + NSEL);
        else
            CHECK(sum == (unsigned)atoi(want_desc));
        CHECK(big == 0);
    } else if (logged) {
        unsigned nl = launches("gw_page_copy", &sum, &big);
        fprintf(stderr, "page kernel launches of the paged put: %u, %u pages\n", nl, sum);
        CHECK(nl == 1);
        CHECK(sum == NSEL);
        CHECK(launches("gw_batch_copy", &sum, &big) == 0);
    }
    /* 1b. (BATCH_GPU_HOSTALLOC_MAX) the same put 10 times more: over tcp with
     * small frames each frame's scatter holds a pinned buffer while it runs;
     * the target must bound those and reuse its kept buffers, not allocate
     * one per frame (a cuMemHostAlloc per frame made batches 4x
     * slower on a real GPU) */
    const char *max_alloc = getenv("BATCH_GPU_HOSTALLOC_MAX");
    if (max_alloc) {
        for (int i = 0; i < 10; i++) {
            REQUIRE_OK(gw_xfer_pages(ep, GW_XFER_PUT, msrc, src, lp, rk, base, rp, NSEL, PAGE, NULL, &r));
            CHECK_ST(gw_request_wait(r, 20000), GW_OK);
            gw_request_free(r);
        }
        unsigned na = launches("cuMemHostAlloc", &sum, &big);
        fprintf(stderr, "pinned buffers allocated by both sides after 11 paged puts: %u (at most %s)\n", na, max_alloc);
        CHECK(na >= 1 && na <= (unsigned)atoi(max_alloc));
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
    unsigned kl0 = logged ? launches("gw_page_copy", &sum, &big) : 0;
    CHECK(!logged || kl0 == 2);

    /* 4. index arrays left NULL: src pages p4[i] -> remote pages 0..63, read
     * back into dst pages 0..63 with both arrays NULL (one contiguous span) */
    uint8_t *hs = dev_read(cu, src, REGION);
    uint32_t p4[64];
    for (uint32_t i = 0; i < 64; i++)
        p4[i] = page(i * 3 + 1);
    CHECK_ST(pages(ep, GW_XFER_PUT, msrc, src, p4, rk, base, NULL, 64, PAGE), GW_OK);
    CHECK_ST(pages(ep, GW_XFER_GET, mdst, dst, NULL, rk, base, NULL, 64, PAGE), GW_OK);
    got = dev_read(cu, dst, REGION);
    bad = 0;
    for (uint32_t i = 0; i < 64; i++)
        bad += memcmp(got + (size_t)i * PAGE, hs + (size_t)p4[i] * PAGE, PAGE) != 0;
    CHECK(bad == 0);
    free(got);

    /* 5. pages of odd sizes from odd bases, none 16-byte aligned, scattered
     * both ways: 40003 bytes (the page kernel's byte path), then 131075
     * (over 64 KiB: the page kernel cuts each page in pieces) */
    unsigned kb0 = logged ? launches("gw_batch_copy", &sum, &big) : 0;
    static const size_t odd_ps[2] = {40003, 2 * 65536 + 3};
    for (int z = 0; z < 2; z++) {
        const size_t ps5 = odd_ps[z];
        uint32_t b5l[5] = {40, 3, 71, 0, 22}, b5r[5] = {9, 60, 1, 33, 50};
        char *lb5 = (char *)src + 5, *rb5 = (char *)(uintptr_t)base + 7;
        CHECK_ST(pages(ep, GW_XFER_PUT, msrc, lb5, b5l, rk, (uint64_t)(uintptr_t)rb5, b5r, 5, ps5), GW_OK);
        CHECK_ST(pages(ep, GW_XFER_GET, mdst, (char *)dst + 1, b5l, rk, (uint64_t)(uintptr_t)rb5, b5r, 5, ps5), GW_OK);
        got = dev_read(cu, dst, REGION);
        bad = 0;
        for (uint32_t i = 0; i < 5; i++)
            bad += memcmp(got + 1 + b5l[i] * ps5, hs + 5 + b5l[i] * ps5, ps5) != 0;
        CHECK(bad == 0);
        free(got);
    }

    /* 6. the same page in several entries: local page 7 to remote pages
     * 100..115 (a source read many times), then local pages 1 and 2 both to
     * remote page 200 (its bytes come from one or the other) */
    uint32_t d6l[16], d6r[16], w6l[2] = {1, 2}, w6r[2] = {200, 200};
    for (uint32_t i = 0; i < 16; i++) {
        d6l[i] = 7;
        d6r[i] = 100 + i;
    }
    CHECK_ST(pages(ep, GW_XFER_PUT, msrc, src, d6l, rk, base, d6r, 16, PAGE), GW_OK);
    CHECK_ST(pages(ep, GW_XFER_PUT, msrc, src, w6l, rk, base, w6r, 2, PAGE), GW_OK);
    /* ... read back with the local side duplicated too: remote page 200 into
     * dst pages 300 and 301, remote pages 100..115 into dst 400..415 */
    uint32_t g6l[18], g6r[18];
    for (uint32_t i = 0; i < 16; i++) {
        g6l[i] = 400 + i;
        g6r[i] = 100 + i;
    }
    g6l[16] = 300;
    g6l[17] = 301;
    g6r[16] = g6r[17] = 200;
    CHECK_ST(pages(ep, GW_XFER_GET, mdst, dst, g6l, rk, base, g6r, 18, PAGE), GW_OK);
    got = dev_read(cu, dst, REGION);
    bad = 0;
    for (uint32_t i = 0; i < 16; i++)
        bad += memcmp(got + (size_t)(400 + i) * PAGE, hs + 7 * PAGE, PAGE) != 0;
    CHECK(bad == 0);
    /* the two writers of remote page 200 run at once on a GPU: each 16-byte
     * piece comes from one of them (the H100 mixed them) */
    int mixed_ok = 1;
    for (size_t off = 0; off < PAGE; off += 16)
        mixed_ok &= memcmp(got + 300 * PAGE + off, hs + 1 * PAGE + off, 16) == 0 ||
                    memcmp(got + 300 * PAGE + off, hs + 2 * PAGE + off, 16) == 0;
    CHECK(mixed_ok);
    CHECK(memcmp(got + 300 * PAGE, got + 301 * PAGE, PAGE) == 0);
    free(got);
    unsigned kl1 = logged ? launches("gw_page_copy", &sum, &big) : 0;
    CHECK(!logged || kl1 == kl0 + 9); /* 4: two, 5: four (40003 and 131075), 6: three */
    CHECK(!logged || launches("gw_batch_copy", &sum, &big) == kb0); /* no page went by entries */

    /* 7. zero pages, and pages of zero bytes: valid, nothing moves or launches */
    CHECK_ST(pages(ep, GW_XFER_PUT, msrc, src, p4, rk, base, p4, 0, PAGE), GW_OK);
    CHECK_ST(pages(ep, GW_XFER_PUT, msrc, src, p4, rk, base, p4, 64, 0), GW_OK);
    CHECK_ST(pages(ep, GW_XFER_GET, mdst, dst, NULL, rk, base, NULL, 0, 0), GW_OK);

    /* 8. a page outside either region: refused at posting, naming the entry */
    uint32_t e8l[40], e8r[40];
    for (uint32_t i = 0; i < 40; i++)
        e8l[i] = e8r[i] = i * 10;
    e8r[23] = NPAGES; /* the first page past the remote region */
    CHECK_ST(pages(ep, GW_XFER_PUT, msrc, src, e8l, rk, base, e8r, 40, PAGE), GW_ERR_OUT_OF_BOUNDS);
    CHECK(strstr(gw_last_error(ctx), "entry 23: remote page 3072") != NULL);
    e8r[23] = 230;
    e8l[31] = UINT32_MAX; /* far past it (the address would overflow 32 bits of pages times 4 KiB) */
    CHECK_ST(pages(ep, GW_XFER_GET, mdst, dst, e8l, rk, base, e8r, 40, PAGE), GW_ERR_INVALID);
    CHECK(strstr(gw_last_error(ctx), "entry 31: local page 4294967295") != NULL);
    e8l[31] = 310;
    CHECK_ST(pages(ep, GW_XFER_PUT, msrc, (char *)src + 1, e8l, rk, base, e8r, 40, PAGE), GW_OK);
    e8l[39] = NPAGES - 1; /* the last page, from a base one byte in: its last byte is outside */
    CHECK_ST(pages(ep, GW_XFER_PUT, msrc, (char *)src + 1, e8l, rk, base, e8r, 40, PAGE), GW_ERR_INVALID);
    CHECK(strstr(gw_last_error(ctx), "entry 39: local page 3071") != NULL);
    unsigned kl2 = logged ? launches("gw_page_copy", &sum, &big) : 0;
    CHECK(!logged || kl2 == kl1 + 1); /* only the good one of section 8 launched */
    /* 9. the list form, GPU on both sides (intra: the list kernel) */
    list_form(ctx, ep, rk, msrc, mdst, dst, hs, logged);
    free(hs);
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
