/* SPDX-License-Identifier: Apache-2.0 */
/* verbs_gpu_batch.c SERVER_DEV CLIENT_DEV - batched transfers (gw_xfer_batch,
 * gw_xfer_pages) over verbs with GPU memory on the staging rung, between two
 * processes (Soft-RoCE in the guest, the fake CUDA driver: rxe refuses to
 * register its device memory, so the regions land on the staging rung).
 *
 * The server (owner) registers a staged GPU region G, a host region H and a
 * staged region D it deregisters on request; it loads no copy kernel
 * (FAKECUDA_NO_MODULE), so its side scatters and gathers by copy-engine
 * copies and says so in its path, while the client's side uses the kernel.
 * The client keeps a model of G and H and, after every batch, reads the
 * whole region back with one plain get and compares:
 *   put and get, staged->staged, host->staged, staged->host: random page
 *   sets (a permutation on the remote side, repeats on the local side of a
 *   put), entries of odd sizes, entries at both edges of the regions, a
 *   batch larger than several bounce buffers, a paged put with a counted
 *   notification;
 *   errors: an entry outside the key (refused at preparation with its
 *   index), a forged key whose entry only the owner can refuse (the message
 *   names the entry), a key revoked in mid-list (GW_ERR_INVALID_KEY naming
 *   the entry; nothing written outside the entries before it), the owner
 *   dying mid-batch (bounded failure).
 * The fake driver's launch log (FAKECUDA_LAUNCHES) shows the client's
 * gathers and scatters as one kernel launch per chunk.
 * Skips (77) without GPUWIRE_CUDA_LIB or an RDMA device. */
#include <poll.h>
#include <stdlib.h>
#include <unistd.h>

#include "cuda/cuda_wrap.h"
#include "harness.h"
#include "mem/mem.h"

#define KB 1024u
#define MB (1u << 20)
#define RSIZE (3u * MB)
#define DSIZE (1u * MB)
#define PAGE 4096u

enum { T_KEYS = 10 };
enum { RG = 0, RH, RD, NREG };
enum { CMD_DEREG_D = 1, CMD_DIE, CMD_PATH };

static gwt_chan_t pch, cch;
static const char *sdev = "", *cdev = "";
static const gw_cuda_t *cu;

static void *dev_alloc(size_t n)
{
    CUdeviceptr p;
    REQUIRE(cu->cuMemAlloc(&p, n) == CUDA_SUCCESS);
    return (void *)(uintptr_t)p;
}

static void to_dev(void *dst, const void *src, size_t n)
{
    REQUIRE(cu->cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dst, src, n) == CUDA_SUCCESS);
}

static void from_dev(void *dst, const void *src, size_t n)
{
    REQUIRE(cu->cuMemcpyDtoH(dst, (CUdeviceptr)(uintptr_t)src, n) == CUDA_SUCCESS);
}

static uint64_t rng = 88172645463325252ull;
static uint32_t rnd(uint32_t n)
{
    return (uint32_t)(gwt_xorshift(&rng) % n);
}

static double t_start;
static double elapsed(void) { return (double)gw_now_ns() / 1e9 - t_start; }

/* ---- server ----------------------------------------------------------------------------- */
static int server(void *arg)
{
    (void)arg;
    setenv("GPUWIRE_IB_DEVICE", sdev, 1);
    setenv("FAKECUDA_NO_MODULE", "1", 1); /* this side: copy-engine copies */
    unsetenv("FAKECUDA_LAUNCHES");
    char why[256];
    cu = gw_cuda_get(why, sizeof(why));
    REQUIRE(cu != NULL);
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    gw_listener_t *l;
    gw_ep_t *ep = gwt_listen_accept(ctx, &cch, &l);
    void *addr[NREG] = {dev_alloc(RSIZE), malloc(RSIZE), dev_alloc(DSIZE)};
    size_t len[NREG] = {RSIZE, RSIZE, DSIZE};
    uint8_t *h = malloc(RSIZE);
    gw_mem_t *m[NREG];
    for (int i = 0; i < NREG; i++) {
        gwt_fill(h, len[i], 500 + (uint64_t)i);
        if (i == RH)
            memcpy(addr[i], h, len[i]);
        else
            to_dev(addr[i], h, len[i]);
        REQUIRE_OK(gw_mem_reg(ctx, addr[i], len[i], GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, &m[i]));
        gwt_send_rkey(ep, m[i], T_KEYS + (uint64_t)i);
    }
    gw_mem_info_t mi = {.size = sizeof(mi)};
    gw_mem_query(m[RG], &mi);
    CHECK(strstr(mi.path, "verbs: staging") != NULL);
    for (;;) {
        struct pollfd p = {.fd = cch.rfd, .events = POLLIN};
        if (poll(&p, 1, 0) <= 0) {
            gw_progress(ctx);
            continue;
        }
        char c = 0;
        if (gwt_chan_recv(&cch, &c, 1, 5000) != 1)
            _exit(3); /* the client is gone */
        if (c == CMD_DIE)
            _exit(0); /* mid-batch, without a word */
        if (c == CMD_DEREG_D)
            CHECK_ST(gw_mem_dereg(m[RD]), GW_OK);
        if (c == CMD_PATH) { /* this side's gathers and scatters: copy-engine copies, said in the path */
            gw_ep_info_t ei = {.size = sizeof(ei)};
            gw_ep_query(ep, &ei);
            fprintf(stderr, "server endpoint: %s\n", ei.path);
            c = strstr(ei.path, "staged batches: copy engine per block") != NULL;
            /* and the client's paged put delivered its counted notification */
            gw_status_t nst = gw_notify_count_wait(ep, 7, 1, 5000);
            fprintf(stderr, "server: counted notification 7: %s\n", gw_status_name(nst));
            c = c && nst == GW_OK;
        }
        gwt_chan_send(&cch, &c, 1);
    }
    return 0; /* (the test ends here for this process; regions go with it) */
}

/* ---- client ----------------------------------------------------------------------------- */
static gw_context_t *ctx;
static gw_ep_t *ep;
static gw_rkey_t *rk[NREG];
static uint64_t base[NREG];
static uint8_t *model[2]; /* G, H as the client expects them */
static uint8_t *rdbuf;    /* read-back */
static gw_mem_t *mrd;

static char cmd(char c)
{
    REQUIRE(gwt_chan_send(&pch, &c, 1) == 0);
    for (int i = 0; i < 30000; i++) {
        struct pollfd p = {.fd = pch.rfd, .events = POLLIN};
        if (poll(&p, 1, 1) > 0) {
            char a;
            REQUIRE(gwt_chan_recv(&pch, &a, 1, 5000) == 1);
            return a;
        }
        gw_progress(ctx);
    }
    REQUIRE(!"the server did not answer within 30 s");
    return 0;
}

static gw_status_t wait_st(gw_request_t *r, int ms)
{
    gw_status_t st = gw_request_wait(r, ms);
    gw_request_free(r);
    return st;
}

/* Reads remote region g (RG or RH) back and compares it with the model. */
static int remote_matches(int g, const char *what)
{
    gw_request_t *r;
    REQUIRE_OK(gw_get(ep, rdbuf, RSIZE, mrd, base[g], rk[g], &r));
    gw_status_t st = wait_st(r, 60000);
    if (st != GW_OK) {
        fprintf(stderr, "FAIL %s: read-back get: %s: %s\n", what, gw_status_name(st), gw_last_error(ctx));
        return 0;
    }
    for (size_t i = 0; i < RSIZE; i++) {
        if (rdbuf[i] != model[g][i]) {
            fprintf(stderr, "FAIL %s: remote %s byte %zu is 0x%02x, 0x%02x expected\n", what, g == RG ? "G" : "H", i,
                    rdbuf[i], model[g][i]);
            return 0;
        }
    }
    return 1;
}

typedef struct ent {
    size_t loff, roff, len;
} ent_t;

/* Runs one batch (put or get) of n entries between local buffer lb (GPU or
 * host, region lm) and remote region g, and checks the outcome against the
 * models. */
static void batch_case(const char *name, int get, void *lb, int lgpu, gw_mem_t *lm, int g, const ent_t *e, size_t n)
{
    uint8_t *lh = malloc(RSIZE), *want = malloc(RSIZE);
    gwt_fill(lh, RSIZE, rng);
    rnd(2);
    if (lgpu)
        to_dev(lb, lh, RSIZE);
    else
        memcpy(lb, lh, RSIZE);
    memcpy(want, lh, RSIZE);
    gw_local_desc_t *ld = calloc(n, sizeof(*ld));
    gw_remote_desc_t *rd = calloc(n, sizeof(*rd));
    for (size_t i = 0; i < n; i++) {
        ld[i] = (gw_local_desc_t){lm, e[i].loff, e[i].len};
        rd[i] = (gw_remote_desc_t){rk[g], e[i].roff, e[i].len};
        if (get)
            memcpy(want + e[i].loff, model[g] + e[i].roff, e[i].len);
        else
            memcpy(model[g] + e[i].roff, lh + e[i].loff, e[i].len);
    }
    gw_dlist_t *dl, *dr;
    REQUIRE_OK(gw_dlist_local(ctx, ld, n, &dl));
    REQUIRE_OK(gw_dlist_remote(ep, rd, n, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, &dr));
    gw_request_t *r;
    REQUIRE_OK(gw_xfer_batch(ep, get ? GW_XFER_GET : GW_XFER_PUT, dl, NULL, dr, NULL, n, NULL, &r));
    gw_status_t st = gw_request_wait(r, 120000);
    gw_request_info_t ri = {.size = sizeof(ri)};
    gw_request_info(r, &ri);
    gw_request_free(r);
    if (st != GW_OK) {
        fprintf(stderr, "FAIL %s: %s: %s\n", name, gw_status_name(st), gw_last_error(ctx));
        gwt_failures++;
    } else if (get) {
        uint8_t *got = lh;
        if (lgpu)
            from_dev(got, lb, RSIZE);
        else
            memcpy(got, lb, RSIZE);
        for (size_t i = 0; i < RSIZE; i++) {
            if (got[i] != want[i]) {
                fprintf(stderr, "FAIL %s: local byte %zu is 0x%02x, 0x%02x expected\n", name, i, got[i], want[i]);
                gwt_failures++;
                break;
            }
        }
    } else if (!remote_matches(g, name)) {
        gwt_failures++;
    }
    CHECK_ST(gw_dlist_destroy(dl), GW_OK);
    CHECK_ST(gw_dlist_destroy(dr), GW_OK);
    fprintf(stderr, "[%.1fs] %s: %zu entries, %s\n", elapsed(), name, n, gw_status_name(st));
    free(ld);
    free(rd);
    free(lh);
    free(want);
}

/* Random page sets: n pages of ps bytes, remote pages distinct (a put's
 * winner is otherwise undefined), local pages repeating for a put. */
static size_t page_set(ent_t *e, size_t n, size_t ps, int get)
{
    size_t np = RSIZE / ps;
    uint32_t *perm = malloc(np * sizeof(*perm));
    for (size_t i = 0; i < np; i++)
        perm[i] = (uint32_t)i;
    for (size_t i = np - 1; i > 0; i--) {
        size_t j = rnd((uint32_t)i + 1);
        uint32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (size_t i = 0; i < n; i++) {
        e[i].roff = (size_t)perm[get ? rnd((uint32_t)np) : i] * ps; /* a get may read a page twice */
        e[i].loff = get ? (size_t)perm[i] * ps : (size_t)rnd((uint32_t)np) * ps;
        e[i].len = ps;
    }
    free(perm);
    return n;
}

/* Odd sizes, and entries at both edges of both regions. */
static size_t odd_set(ent_t *e)
{
    size_t n = 0;
    e[n++] = (ent_t){0, RSIZE - 1000, 1000};           /* local start, remote end */
    e[n++] = (ent_t){RSIZE - 777, 0, 777};             /* local end, remote start */
    e[n++] = (ent_t){5000, 2 * MB + 768 * KB + 1, 1};  /* one byte */
    e[n++] = (ent_t){9 * KB + 3, 64 * KB + 17, 200 * KB + 5}; /* > a kernel piece, unaligned */
    e[n++] = (ent_t){1 * MB + 11, 1 * MB + 512 * KB, 1 * MB + 300}; /* > one bounce buffer */
    for (size_t i = 0; i < 40; i++)
        e[n++] = (ent_t){2 * MB + 512 * KB + i * 8192 + rnd(64), 300 * KB + i * 9000 + rnd(64), 1 + rnd(4000)};
    return n;
}

static size_t launches_logged(void)
{
    const char *log = getenv("FAKECUDA_LAUNCHES");
    FILE *f = log ? fopen(log, "r") : NULL;
    size_t n = 0;
    char line[128];
    while (f && fgets(line, sizeof(line), f))
        n += strncmp(line, "gw_batch_copy", 13) == 0;
    if (f)
        fclose(f);
    return n;
}

int main(int argc, char **argv)
{
    sdev = argc > 1 ? argv[1] : "rxe0";
    cdev = argc > 2 ? argv[2] : sdev;
    gwt_require_rdma_device();
    if (!getenv("GPUWIRE_CUDA_LIB"))
        SKIP("GPUWIRE_CUDA_LIB is not set (the fake CUDA driver: tests/fakecuda)");
    setenv("GPUWIRE_TRANSPORTS", "verbs", 1);
    if (!getenv("GPUWIRE_IB_TIMEOUT"))
        setenv("GPUWIRE_IB_TIMEOUT", "16", 1);
    t_start = (double)gw_now_ns() / 1e9;
    gwt_chan_pair(&pch, &cch);
    int pid = gwt_spawn(server, NULL);
    setenv("GPUWIRE_IB_DEVICE", cdev, 1);
    char why[256];
    cu = gw_cuda_get(why, sizeof(why));
    if (!cu)
        SKIP("CUDA driver: %s", why);
    char a[80];
    REQUIRE(gwt_chan_recv(&pch, a, sizeof(a), 20000) > 0);
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    REQUIRE_OK(gw_connect(ctx, a, &ep));
    for (int i = 0; i < NREG; i++)
        rk[i] = gwt_recv_rkey(ep, T_KEYS + (uint64_t)i, &base[i]);
    fprintf(stderr, "[%.1fs] connected, keys in\n", elapsed());
    for (int g = 0; g < 2; g++) {
        model[g] = malloc(RSIZE);
        gwt_fill(model[g], RSIZE, 500 + (uint64_t)g);
    }
    void *lg = dev_alloc(RSIZE);
    uint8_t *lh = malloc(RSIZE);
    rdbuf = malloc(RSIZE);
    gw_mem_t *mlg, *mlh;
    REQUIRE_OK(gw_mem_reg(ctx, lg, RSIZE, GW_ACCESS_LOCAL, &mlg));
    REQUIRE_OK(gw_mem_reg(ctx, lh, RSIZE, GW_ACCESS_LOCAL, &mlh));
    REQUIRE_OK(gw_mem_reg(ctx, rdbuf, RSIZE, GW_ACCESS_LOCAL, &mrd));
    gw_mem_info_t mi = {.size = sizeof(mi)};
    gw_mem_query(mlg, &mi);
    fprintf(stderr, "client GPU region: %s\n", mi.path);
    CHECK(strstr(mi.path, "verbs: staging") != NULL);

    ent_t *e = malloc(2048 * sizeof(*e));
    static const struct {
        const char *name;
        int lgpu, g;
    } combos[] = {{"staged->staged", 1, RG}, {"host->staged", 0, RG}, {"staged->host", 1, RH}};
    size_t l0 = launches_logged();
    for (size_t k = 0; k < sizeof(combos) / sizeof(combos[0]); k++) {
        void *lb = combos[k].lgpu ? lg : (void *)lh;
        gw_mem_t *lm = combos[k].lgpu ? mlg : mlh;
        char nm[96];
        for (int get = 0; get < 2; get++) {
            snprintf(nm, sizeof(nm), "%s %s, 600 random 4 KiB pages", combos[k].name, get ? "get" : "put");
            batch_case(nm, get, lb, combos[k].lgpu, lm, combos[k].g, e, page_set(e, 600, PAGE, get));
            snprintf(nm, sizeof(nm), "%s %s, 300 random 1 KiB pages", combos[k].name, get ? "get" : "put");
            batch_case(nm, get, lb, combos[k].lgpu, lm, combos[k].g, e, page_set(e, 300, 1024, get));
            snprintf(nm, sizeof(nm), "%s %s, odd sizes and edges", combos[k].name, get ? "get" : "put");
            batch_case(nm, get, lb, combos[k].lgpu, lm, combos[k].g, e, odd_set(e));
        }
    }
    size_t nl = launches_logged() - l0;
    fprintf(stderr, "client copy kernel launches: %zu\n", nl);
    if (getenv("FAKECUDA_LAUNCHES")) {
        /* the staged-local cases (4 of the 6 per kind) gather or scatter in one launch per
         * chunk (at most 256 pieces or a 1 MiB slot): 600 pages are 3 launches, not 600 */
        CHECK(nl >= 8 && nl < 200);
    }

    /* a paged put staged->staged with a counted notification */
    {
        uint32_t lp[256], rp[256];
        for (uint32_t i = 0; i < 256; i++) {
            lp[i] = rnd(RSIZE / PAGE);
            rp[i] = i * 2 + 1;
        }
        uint8_t *h = malloc(RSIZE);
        gwt_fill(h, RSIZE, 4242);
        to_dev(lg, h, RSIZE);
        for (uint32_t i = 0; i < 256; i++)
            memcpy(model[RG] + (size_t)rp[i] * PAGE, h + (size_t)lp[i] * PAGE, PAGE);
        gw_xfer_opts_t o = {.size = sizeof(o), .notify = GW_NOTIFY_COUNTED, .value = 7};
        gw_request_t *r;
        REQUIRE_OK(gw_xfer_pages(ep, GW_XFER_PUT, mlg, lg, lp, rk[RG], base[RG], rp, 256, PAGE, &o, &r));
        gw_status_t st = wait_st(r, 60000);
        CHECK_ST(st, GW_OK);
        if (st != GW_OK)
            fprintf(stderr, "paged put: %s\n", gw_last_error(ctx));
        CHECK(remote_matches(RG, "paged put"));
        free(h);
        fprintf(stderr, "[%.1fs] paged put with a counted notification: done\n", elapsed());
    }

    gw_ep_info_t ei = {.size = sizeof(ei)};
    gw_ep_query(ep, &ei);
    fprintf(stderr, "client endpoint: %s\n", ei.path);
    CHECK(strstr(ei.path, "staged batches: copy kernel") != NULL);
    CHECK(cmd(CMD_PATH) == 1);

    /* errors: an entry outside the key, refused at preparation with its index */
    {
        gw_remote_desc_t rd[3] = {{rk[RG], 0, 100}, {rk[RG], 4096, 100}, {rk[RG], RSIZE - 50, 100}};
        gw_dlist_t *dr = NULL;
        CHECK_ST(gw_dlist_remote(ep, rd, 3, GW_ACCESS_REMOTE_WRITE, &dr), GW_ERR_OUT_OF_BOUNDS);
        fprintf(stderr, "out of bounds: %s\n", gw_last_error(ctx));
        CHECK(strstr(gw_last_error(ctx), "entry 2") != NULL);
    }
    /* a forged key: only the owner can refuse the entry */
    {
        rk[RG]->len += MB;
        gw_local_desc_t ld[4];
        gw_remote_desc_t rd[4];
        for (int i = 0; i < 4; i++) {
            ld[i] = (gw_local_desc_t){mlg, (size_t)i * 8192, 1000};
            rd[i] = (gw_remote_desc_t){rk[RG], (uint64_t)i * 10000, 1000};
        }
        rd[2].offset = RSIZE + 4096; /* beyond the real region */
        gw_dlist_t *dl, *dr;
        REQUIRE_OK(gw_dlist_local(ctx, ld, 4, &dl));
        REQUIRE_OK(gw_dlist_remote(ep, rd, 4, GW_ACCESS_REMOTE_WRITE, &dr));
        rk[RG]->len -= MB;
        gw_request_t *r;
        REQUIRE_OK(gw_xfer_batch(ep, GW_XFER_PUT, dl, NULL, dr, NULL, 4, NULL, &r));
        CHECK_ST(wait_st(r, 30000), GW_ERR_OUT_OF_BOUNDS);
        fprintf(stderr, "forged entry: %s\n", gw_last_error(ctx));
        CHECK(strstr(gw_last_error(ctx), "entry 2") != NULL);
        CHECK_ST(gw_dlist_destroy(dl), GW_OK);
        CHECK_ST(gw_dlist_destroy(dr), GW_OK);
        /* the owner checked the whole chunk first: nothing of it was written */
        CHECK(remote_matches(RG, "after the forged entry"));
    }
    /* a key revoked in mid-list: entries on G, then D (deregistered), then G */
    {
        cmd(CMD_DEREG_D);
        uint8_t *h = malloc(RSIZE);
        gwt_fill(h, RSIZE, 777);
        to_dev(lg, h, RSIZE);
        size_t n = 600;
        gw_local_desc_t *ld = calloc(n, sizeof(*ld));
        gw_remote_desc_t *rd = calloc(n, sizeof(*rd));
        for (size_t i = 0; i < n; i++) {
            ld[i] = (gw_local_desc_t){mlg, i * PAGE, 2048};
            rd[i] = (gw_remote_desc_t){rk[RG], i * PAGE, 2048};
        }
        rd[300] = (gw_remote_desc_t){rk[RD], 8192, 2048};
        /* the entries before the revoked one, in the chunks before its own, may land (the
         * documented outcome): the model takes the first 256 (one chunk request's worth) */
        for (size_t i = 0; i < 256; i++)
            memcpy(model[RG] + i * PAGE, h + i * PAGE, 2048);
        gw_dlist_t *dl, *dr;
        REQUIRE_OK(gw_dlist_local(ctx, ld, n, &dl));
        REQUIRE_OK(gw_dlist_remote(ep, rd, n, GW_ACCESS_REMOTE_WRITE, &dr));
        gw_request_t *r;
        REQUIRE_OK(gw_xfer_batch(ep, GW_XFER_PUT, dl, NULL, dr, NULL, n, NULL, &r));
        CHECK_ST(wait_st(r, 30000), GW_ERR_INVALID_KEY);
        fprintf(stderr, "revoked mid-list: %s\n", gw_last_error(ctx));
        CHECK(strstr(gw_last_error(ctx), "entry 300") != NULL);
        CHECK_ST(gw_dlist_destroy(dl), GW_OK);
        CHECK_ST(gw_dlist_destroy(dr), GW_OK);
        /* the endpoint is healthy; entries 256.. of G hold old or new bytes (entries
         * after the failure may have moved): compare only what lies outside them */
        gw_request_t *g;
        REQUIRE_OK(gw_get(ep, rdbuf, RSIZE, mrd, base[RG], rk[RG], &g));
        CHECK_ST(wait_st(g, 60000), GW_OK);
        size_t bad = 0;
        for (size_t i = 0; i < RSIZE; i++) {
            size_t pg = i / PAGE;
            if (pg >= 256 && pg < n && i % PAGE < 2048)
                continue;
            bad += rdbuf[i] != model[RG][i];
        }
        CHECK(bad == 0);
        free(ld);
        free(rd);
        free(h);
    }
    /* the owner dies mid-batch: the request fails in bounded time */
    {
        size_t n = 700;
        gw_local_desc_t *ld = calloc(n, sizeof(*ld));
        gw_remote_desc_t *rd = calloc(n, sizeof(*rd));
        for (size_t i = 0; i < n; i++) {
            ld[i] = (gw_local_desc_t){mlg, i * PAGE, PAGE};
            rd[i] = (gw_remote_desc_t){rk[RG], (n - 1 - i) * PAGE, PAGE};
        }
        gw_dlist_t *dl, *dr;
        REQUIRE_OK(gw_dlist_local(ctx, ld, n, &dl));
        REQUIRE_OK(gw_dlist_remote(ep, rd, n, GW_ACCESS_REMOTE_READ, &dr));
        char c = CMD_DIE;
        gwt_chan_send(&pch, &c, 1);
        gw_request_t *r;
        REQUIRE_OK(gw_xfer_batch(ep, GW_XFER_GET, dl, NULL, dr, NULL, n, NULL, &r));
        uint64_t t0 = gw_now_ns();
        gw_status_t st = wait_st(r, 60000);
        double s = (double)(gw_now_ns() - t0) / 1e9;
        fprintf(stderr, "owner died: %s after %.1f s: %s\n", gw_status_name(st), s, gw_last_error(ctx));
        CHECK(st != GW_OK && st != GW_ERR_TIMEOUT);
        gw_dlist_destroy(dl);
        gw_dlist_destroy(dr);
        free(ld);
        free(rd);
    }
    for (int i = 0; i < NREG; i++)
        gw_rkey_destroy(rk[i]);
    gw_ep_close(ep, 1000);
    CHECK_ST(gw_mem_dereg(mlg), GW_OK);
    CHECK_ST(gw_mem_dereg(mlh), GW_OK);
    CHECK_ST(gw_mem_dereg(mrd), GW_OK);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    CHECK(gwt_wait(pid, 30) == 0);
    free(e);
    return gwt_done("verbs_gpu_batch");
}
