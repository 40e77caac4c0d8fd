/* SPDX-License-Identifier: Apache-2.0 */
/* it_batch.c - batched and paged transfers between two processes (over tcp,
 * and over intra as it_batch_intra): random page sets of several page sizes,
 * descriptor lists with duplicate, overlapping, zero-length and region-edge
 * entries, whole lists moved again (kept entries), gets, the errors that name an entry's index, runs of large and
 * many small entries back to back with other frames, a key revoked in
 * mid-list, zero-length batches, counted notifications arriving interleaved,
 * gathers and scatters with holes on one side, prepared selections
 * (gw_xfer_batch_prepared), and a target killed in
 * mid-batch, puts and gets (bounded failure).  The parent keeps the
 * image the target's region must hold and compares hashes of the whole
 * region. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "it.h"

#define MIN_(a, b) ((a) < (b) ? (a) : (b))

#define REGION (8u << 20)
#define SMALL (1u << 20)
#define GET_SEED 0x2222

static it_target_t T;
static gw_context_t *ctx;
static gw_ep_t *ep;
static gw_rkey_t *rk[3];
static uint64_t raddr[3];
static uint8_t *src, *dst, *img0, *ref1;
static gw_mem_t *msrc, *mdst;
static uint64_t rng = 0x9e3779b97f4a7c15ull;
static int is_verbs; /* verbs or ofi: a revoked key fails the queue pair (the provider's connection), so the endpoint */

static uint64_t rnd(void)
{
    return gwt_xorshift(&rng);
}

static void check_region0(const char *what)
{
    it_cmd_t c = {.type = IT_CMD_HASH, .region = 0, .off = 0, .len = REGION};
    it_reply_t r = it_target_cmd(&T, &c, ctx);
    if ((uint64_t)r.a != it_hash(img0, REGION))
        fprintf(stderr, "%s: the target's region differs from the expected image\n", what);
    CHECK((uint64_t)r.a == it_hash(img0, REGION));
}

static gw_status_t ncount(uint64_t id, uint64_t n, int ms)
{
    it_cmd_t c = {.type = IT_CMD_NCOUNT, .ep = 0, .tag = id, .count = n, .off = (uint64_t)ms};
    return (gw_status_t)it_target_cmd(&T, &c, ctx).a;
}

static it_reply_t notify_any(int ms)
{
    it_cmd_t c = {.type = IT_CMD_NOTIFY_ANY, .ep = 0, .off = (uint64_t)ms};
    return it_target_cmd(&T, &c, ctx);
}

static int msg_has(const char *s)
{
    if (strstr(gw_last_error(ctx), s))
        return 1;
    fprintf(stderr, "expected \"%s\" in: %s\n", s, gw_last_error(ctx));
    return 0;
}

/* Distinct random pages: n of the npages. */
static void pick(uint32_t *out, uint32_t n, uint32_t npages)
{
    uint8_t *used = calloc(npages, 1);
    for (uint32_t i = 0; i < n;) {
        uint32_t p = (uint32_t)(rnd() % npages);
        if (used[p])
            continue;
        used[p] = 1;
        out[i++] = p;
    }
    free(used);
}

/* A. paged puts of random page sets, each batch ending with a counted
 * notification; the pages back by a get from a prepared page list */
static void case_pages(void)
{
    static const size_t psz[] = {1, 1000, 4096, 16384, 65536 + 3};
    fprintf(stderr, "A. paged puts\n");
    for (size_t k = 0; k < sizeof(psz) / sizeof(psz[0]); k++) {
        uint32_t np = (uint32_t)MIN_(REGION / psz[k], 4096u);
        uint32_t n = np / 3 + 1;
        uint32_t *lp = malloc(n * sizeof(*lp)), *rp = malloc(n * sizeof(*rp));
        pick(lp, n, np);
        pick(rp, n, np);
        gwt_fill(src, REGION, 500 + k);
        gw_xfer_opts_t o = {.size = sizeof(o), .notify = GW_NOTIFY_COUNTED, .value = 7};
        gw_request_t *r = NULL;
        IT_OK(ctx, gw_xfer_pages(ep, GW_XFER_PUT, msrc, src, lp, rk[0], raddr[0], rp, n, psz[k], &o, &r));
        gw_request_info_t ri = {.size = sizeof(ri)};
        CHECK_ST(gw_request_wait(r, 30000), GW_OK);
        gw_request_info(r, &ri);
        CHECK(ri.length == (size_t)n * psz[k]);
        gw_request_free(r);
        for (uint32_t i = 0; i < n; i++)
            memcpy(img0 + (size_t)rp[i] * psz[k], src + (size_t)lp[i] * psz[k], psz[k]);
        CHECK_ST(ncount(7, 1, 30000), GW_OK);
        check_region0("paged put");
        /* and the same pages back by a paged get (indices swapped), from
         * a prepared page list */
        memset(dst, 0, REGION);
        gw_pages_t *pl = NULL;
        IT_OK(ctx, gw_pages_create(ctx, lp, rp, n, &pl));
        IT_OK(ctx, gw_xfer_pages_prepared(ep, GW_XFER_GET, mdst, dst, rk[0], raddr[0], pl, psz[k], NULL, &r));
        if (k % 2) /* destroyed while the get may still run: freed when it ends */
            CHECK_ST(gw_pages_destroy(pl), GW_OK);
        CHECK_ST(gw_request_wait(r, 30000), GW_OK);
        gw_request_free(r);
        if (k % 2 == 0)
            CHECK_ST(gw_pages_destroy(pl), GW_OK);
        int bad = 0;
        for (uint32_t i = 0; i < n; i++)
            bad += memcmp(dst + (size_t)lp[i] * psz[k], img0 + (size_t)rp[i] * psz[k], psz[k]) != 0;
        CHECK(bad == 0);
        free(lp);
        free(rp);
    }
}

/* B. lists: region edges, zero-length, duplicate and overlapping entries */
static void case_lists(void)
{
    fprintf(stderr, "B. descriptor lists\n");
    enum { N = 12 };
    gwt_fill(src, REGION, 900);
    gw_local_desc_t ld[N];
    gw_remote_desc_t rd[N];
    /* 0: the region's first bytes; 1: its last; 2: zero length; 3/4 overlap on both sides with the same
     * delta (the overlapping bytes agree); 5: large; 6..11 scattered small */
    size_t lo[N] = {0, REGION - 19, 100, 4096, 4096 + 50, 1u << 20}, ro[N] = {0, REGION - 19, 5, 300000, 300050,
                                                                         3u << 20};
    size_t ln[N] = {17, 19, 0, 100, 100, 3u << 20};
    for (int i = 6; i < N; i++) {
        ln[i] = 1 + rnd() % 3000;
        lo[i] = rnd() % (REGION - ln[i]);
        ro[i] = (size_t)(rnd() % (1u << 20)) + (7u << 20) - 1; /* keep clear of entry 1 */
        ro[i] = MIN_(ro[i], REGION - 20 - ln[i]);
    }
    for (int i = 0; i < N; i++) {
        ld[i] = (gw_local_desc_t){msrc, lo[i], ln[i]};
        rd[i] = (gw_remote_desc_t){rk[0], ro[i], ln[i]};
    }
    gw_dlist_t *L = NULL, *R = NULL;
    IT_OK(ctx, gw_dlist_local(ctx, ld, N, &L));
    IT_OK(ctx, gw_dlist_remote(ep, rd, N, GW_ACCESS_REMOTE_WRITE | GW_ACCESS_REMOTE_READ, &R));
    CHECK(gw_dlist_count(L) == N && gw_dlist_count(R) == N);
    /* every entry, then a second batch naming entry 7 three times and 0 and 1 by index */
    gw_xfer_opts_t o = {.size = sizeof(o), .notify = GW_NOTIFY_ORDERED, .value = 99};
    gw_request_t *r = NULL;
    IT_OK(ctx, gw_xfer_batch(ep, GW_XFER_PUT, L, NULL, R, NULL, N, &o, &r));
    CHECK_ST(gw_request_wait(r, 30000), GW_OK);
    gw_request_free(r);
    for (int i = 0; i < N; i++)
        memcpy(img0 + ro[i], src + lo[i], ln[i]);
    it_reply_t n = notify_any(30000);
    CHECK(n.a == GW_OK && n.b == 99);
    check_region0("list put");
    uint32_t idx[5] = {7, 7, 0, 7, 1};
    o.value = 100;
    IT_OK(ctx, gw_xfer_batch(ep, GW_XFER_PUT, L, idx, R, idx, 5, &o, &r));
    CHECK_ST(gw_request_wait(r, 30000), GW_OK);
    gw_request_free(r);
    n = notify_any(30000);
    CHECK(n.a == GW_OK && n.b == 100);
    check_region0("duplicate entries");
    /* the list read back, crossed: remote entry i into local entry i of a list over dst */
    for (int i = 0; i < N; i++)
        ld[i].mem = mdst;
    gw_dlist_t *L2 = NULL;
    IT_OK(ctx, gw_dlist_local(ctx, ld, N, &L2));
    memset(dst, 0, REGION);
    uint32_t all[N];
    for (int i = 0; i < N; i++)
        all[i] = (uint32_t)i;
    IT_OK(ctx, gw_xfer_batch(ep, GW_XFER_GET, L2, all, R, all, N, NULL, &r));
    CHECK_ST(gw_request_wait(r, 30000), GW_OK);
    gw_request_free(r);
    for (int i = 0; i < N; i++) /* 3 and 4 overlap on both sides with the same delta: they agree */
        CHECK(memcmp(dst + lo[i], img0 + ro[i], ln[i]) == 0);
    /* a local list keeps its region, a busy list stays */
    CHECK_ST(gw_mem_dereg(mdst), GW_ERR_BUSY);
    CHECK(msg_has("descriptor list"));
    IT_OK(ctx, gw_xfer_batch(ep, GW_XFER_GET, L2, NULL, R, NULL, N, NULL, &r));
    gw_status_t busy = gw_dlist_destroy(L2);
    CHECK_ST(gw_request_wait(r, 30000), GW_OK);
    gw_request_free(r);
    if (busy == GW_OK) /* the transfer finished while posting (intra: synchronous CMA) */
        L2 = NULL;
    else
        CHECK_ST(busy, GW_ERR_BUSY);
    CHECK_ST(gw_dlist_destroy(L2), GW_OK);
    CHECK_ST(gw_dlist_destroy(L), GW_OK);
    CHECK_ST(gw_dlist_destroy(R), GW_OK);
}

/* B2. the same whole lists again and again (a local list keeps the
 * entries of its last transfer of all entries with one remote list, and the
 * next such transfer reuses them): the source changes between transfers,
 * another remote list of the same lengths at other offsets, fewer entries,
 * and a second pair posted while the first is in flight */
static void put_all(gw_dlist_t *L, gw_dlist_t *R, size_t n, const size_t *lo, const size_t *ro, const size_t *ln,
                    uint64_t seed, gw_request_t **pending)
{
    gwt_fill(src, REGION, seed);
    gw_request_t *r = NULL;
    IT_OK(ctx, gw_xfer_batch(ep, GW_XFER_PUT, L, NULL, R, NULL, n, NULL, &r));
    for (size_t i = 0; i < n; i++)
        memcpy(img0 + ro[i], src + lo[i], ln[i]);
    if (pending) { /* left in flight: the caller must not touch src before waiting */
        *pending = r;
        return;
    }
    CHECK_ST(gw_request_wait(r, 30000), GW_OK);
    gw_request_free(r);
}

static void case_kept(void)
{
    fprintf(stderr, "B2. whole lists again: the entries kept between transfers\n");
    enum { N = 40 };
    gw_local_desc_t ld[N];
    gw_remote_desc_t rd[N], rd2[N];
    size_t lo[N], ro[N], ro2[N], ln[N];
    for (int i = 0; i < N; i++) { /* pairs 2k, 2k+1 adjacent on both sides (merged into one entry) */
        ln[i] = 64 + rnd() % 2000;
        lo[i] = i % 2 ? lo[i - 1] + ln[i - 1] : (size_t)i * 8192;
        ro[i] = i % 2 ? ro[i - 1] + ln[i - 1] : (size_t)(1u << 20) + (size_t)i * 8192;
        ro2[i] = (size_t)(3u << 20) + (size_t)(N - 1 - i) * 8192 + 7; /* reversed, never adjacent */
        ld[i] = (gw_local_desc_t){msrc, lo[i], ln[i]};
        rd[i] = (gw_remote_desc_t){rk[0], ro[i], ln[i]};
        rd2[i] = (gw_remote_desc_t){rk[0], ro2[i], ln[i]};
    }
    gw_dlist_t *L = NULL, *R = NULL, *R2 = NULL;
    IT_OK(ctx, gw_dlist_local(ctx, ld, N, &L));
    IT_OK(ctx, gw_dlist_remote(ep, rd, N, GW_ACCESS_REMOTE_WRITE, &R));
    IT_OK(ctx, gw_dlist_remote(ep, rd2, N, GW_ACCESS_REMOTE_WRITE, &R2));
    put_all(L, R, N, lo, ro, ln, 31, NULL); /* builds and keeps */
    check_region0("whole lists, first");
    put_all(L, R, N, lo, ro, ln, 32, NULL); /* reuses, new bytes */
    check_region0("whole lists, again");
    put_all(L, R2, N, lo, ro2, ln, 33, NULL); /* another remote list: its own entries */
    check_region0("whole lists, another remote list");
    put_all(L, R, N - 3, lo, ro, ln, 34, NULL); /* fewer entries: not the kept ones */
    check_region0("whole lists, fewer entries");
    put_all(L, R, N, lo, ro, ln, 35, NULL);
    check_region0("whole lists, back to the first pair");
    /* a second pair while a transfer of the first is in flight (nothing may
     * replace what that one reads), then the second pair again */
    gw_request_t *r1 = NULL;
    put_all(L, R, N, lo, ro, ln, 36, &r1);
    gw_request_t *r2 = NULL;
    IT_OK(ctx, gw_xfer_batch(ep, GW_XFER_PUT, L, NULL, R2, NULL, N, NULL, &r2));
    for (int i = 0; i < N; i++)
        memcpy(img0 + ro2[i], src + lo[i], ln[i]);
    CHECK_ST(gw_request_wait(r1, 30000), GW_OK);
    CHECK_ST(gw_request_wait(r2, 30000), GW_OK);
    gw_request_free(r1);
    gw_request_free(r2);
    check_region0("whole lists, two pairs in flight");
    put_all(L, R2, N, lo, ro2, ln, 37, NULL);
    put_all(L, R, N, lo, ro, ln, 38, NULL);
    check_region0("whole lists, after the two pairs");
    CHECK_ST(gw_dlist_destroy(R2), GW_OK);
    CHECK_ST(gw_dlist_destroy(R), GW_OK);
    /* a new remote list (a new serial, maybe the old one's memory): entries of its own */
    for (int i = 0; i < N; i++)
        rd[i].offset = ro2[i];
    IT_OK(ctx, gw_dlist_remote(ep, rd, N, GW_ACCESS_REMOTE_WRITE, &R));
    put_all(L, R, N, lo, ro2, ln, 39, NULL);
    check_region0("whole lists, a new remote list");
    CHECK_ST(gw_dlist_destroy(R), GW_OK);
    CHECK_ST(gw_dlist_destroy(L), GW_OK);
}

/* C. gets of random scattered entries of the read-only region */
static void case_get(void)
{
    fprintf(stderr, "C. list gets from a read-only region\n");
    enum { N = 300 };
    gw_local_desc_t ld[N];
    gw_remote_desc_t rd[N];
    for (int i = 0; i < N; i++) {
        size_t len = (i % 10 == 0) ? 20000 + rnd() % 1000 : rnd() % 5000; /* some zero-length */
        ld[i] = (gw_local_desc_t){mdst, (size_t)i * (REGION / N), len};
        rd[i] = (gw_remote_desc_t){rk[1], rnd() % (REGION - len), len};
    }
    gw_dlist_t *L = NULL, *R = NULL;
    IT_OK(ctx, gw_dlist_local(ctx, ld, N, &L));
    IT_OK(ctx, gw_dlist_remote(ep, rd, N, GW_ACCESS_REMOTE_READ, &R));
    memset(dst, 0, REGION);
    gw_request_t *r = NULL;
    IT_OK(ctx, gw_xfer_batch(ep, GW_XFER_GET, L, NULL, R, NULL, N, NULL, &r));
    CHECK_ST(gw_request_wait(r, 30000), GW_OK);
    gw_request_free(r);
    int bad = 0;
    for (int i = 0; i < N; i++)
        bad += memcmp(dst + ld[i].offset, ref1 + rd[i].offset, ld[i].len) != 0;
    CHECK(bad == 0);
    /* a list for reading cannot be written through */
    CHECK_ST(gw_xfer_batch(ep, GW_XFER_PUT, L, NULL, R, NULL, N, NULL, &r), GW_ERR_ACCESS);
    CHECK_ST(gw_dlist_destroy(L), GW_OK);
    CHECK_ST(gw_dlist_destroy(R), GW_OK);
}

/* C2. gathers and scatters: one side contiguous, the other with holes
 * (intra CMA merges each side on its own and reads through small remote
 * holes on gets: the bytes around the entries must stay as they were) */
static void gs_run(int op, gw_local_desc_t *ld, gw_remote_desc_t *rd, size_t n)
{
    gw_dlist_t *L = NULL, *R = NULL;
    IT_OK(ctx, gw_dlist_local(ctx, ld, n, &L));
    IT_OK(ctx, gw_dlist_remote(ep, rd, n, op == GW_XFER_GET ? GW_ACCESS_REMOTE_READ : GW_ACCESS_REMOTE_WRITE, &R));
    gw_request_t *r = NULL;
    IT_OK(ctx, gw_xfer_batch(ep, op, L, NULL, R, NULL, n, NULL, &r));
    CHECK_ST(gw_request_wait(r, 30000), GW_OK);
    gw_request_free(r);
    CHECK_ST(gw_dlist_destroy(L), GW_OK);
    CHECK_ST(gw_dlist_destroy(R), GW_OK);
}

/* dst must equal `want` (a copy of dst before the get with the entries applied) */
static void gs_check_dst(const uint8_t *want, const char *what)
{
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < REGION; i++)
        if (dst[i] != want[i] && !bad++)
            first = i;
    if (bad)
        fprintf(stderr, "%s: %zu local bytes differ, the first at %zu\n", what, bad, first);
    CHECK(bad == 0);
}

static void case_gather(void)
{
    fprintf(stderr, "C2. gathers and scatters with holes on one side\n");
    enum { N = 3000 };
    gw_local_desc_t *ld = calloc(N, sizeof(*ld));
    gw_remote_desc_t *rd = calloc(N, sizeof(*rd));
    uint8_t *want = it_alloc(REGION);
    REQUIRE(ld && rd && want);
    /* 1. put: scattered local entries into one remote range */
    gwt_fill(src, REGION, 1300);
    size_t ro = 4096 * 3 + 7;
    for (int i = 0; i < N; i++) {
        size_t len = 1 + rnd() % 700;
        ld[i] = (gw_local_desc_t){msrc, (size_t)(rnd() % (REGION - len)), len};
        rd[i] = (gw_remote_desc_t){rk[0], ro, len};
        memcpy(img0 + ro, src + ld[i].offset, len);
        ro += len;
    }
    gs_run(GW_XFER_PUT, ld, rd, N);
    check_region0("gather put");
    /* 2. put: one local range scattered over the remote region, holes of 1 .. 2000 bytes */
    size_t lo = 0;
    ro = 100;
    for (int i = 0; i < N; i++) {
        size_t len = 1 + rnd() % 1500;
        ld[i] = (gw_local_desc_t){msrc, lo, len};
        rd[i] = (gw_remote_desc_t){rk[0], ro, len};
        memcpy(img0 + ro, src + lo, len);
        lo += len;
        ro += len + 1 + rnd() % 2000;
        REQUIRE(ro < REGION - 1600);
    }
    gs_run(GW_XFER_PUT, ld, rd, N);
    check_region0("scatter put");
    /* 3. get: remote entries with holes around the read-through limit (1024 and 1025), some
     * overlapping or going backwards, into scattered local entries; the local bytes around
     * them keep their pattern */
    static const size_t hole[] = {0, 1, 100, 1023, 1024, 1025, 4096, 20000};
    gwt_fill(dst, REGION, 1301);
    memcpy(want, dst, REGION);
    ro = 0;
    lo = 0;
    for (int i = 0; i < N; i++) {
        size_t len = 1 + rnd() % 2000;
        size_t h = hole[rnd() % (sizeof(hole) / sizeof(hole[0]))];
        if (i % 97 == 5 && ro > 3000)
            ro -= 3000; /* backwards: overlaps the last entries */
        else
            ro += h;
        if (ro + len > REGION)
            ro = rnd() % 1000;
        lo += 1 + rnd() % 3;
        if (lo + len > REGION)
            lo = 0;
        ld[i] = (gw_local_desc_t){mdst, lo, len};
        rd[i] = (gw_remote_desc_t){rk[1], ro, len};
        memcpy(want + lo, ref1 + ro, len);
        lo += len;
        ro += len;
    }
    gs_run(GW_XFER_GET, ld, rd, N);
    gs_check_dst(want, "get with holes");
    /* 4. get: 1500 entries of 4000 bytes with 96-byte holes (6 MB, over one progress call's
     * 4 MiB budget: cut inside an entry), the last one ending at the region's last byte */
    gwt_fill(dst, REGION, 1302);
    memcpy(want, dst, REGION);
    enum { M = 1500 };
    for (int i = 0; i < M; i++) {
        size_t r0 = REGION - (size_t)(M - i) * 4096 + 96, l0 = (size_t)i * 4100 + 13;
        ld[i] = (gw_local_desc_t){mdst, l0, 4000};
        rd[i] = (gw_remote_desc_t){rk[1], r0, 4000};
        memcpy(want + l0, ref1 + r0, 4000);
    }
    gs_run(GW_XFER_GET, ld, rd, M);
    gs_check_dst(want, "large get with holes");
    gw_ep_info_t info = {.size = sizeof(info)};
    IT_OK(ctx, gw_ep_query(ep, &info));
    fprintf(stderr, "  path: %s\n", info.path);
    const char *alloc = getenv("IT_ALLOC"), *bpath = getenv("GPUWIRE_BATCH_PATH");
    int expanded = bpath && strcmp(bpath, "expand") == 0; /* single gets, no native batch path */
    if (strcmp(info.transport, "intra") == 0 && !(alloc && alloc[0] == '1') && !expanded)
        CHECK(strstr(info.path, "read holes") != NULL); /* CMA gets read through the small holes */
    if (strcmp(info.transport, "verbs") == 0 && bpath && strcmp(bpath, "iov") == 0) {
        /* lists through rma_iov: the gather put's entries, one remote range,
         * went several to a work request (its SGEs) */
        unsigned long long lists = 0, ents = 0, wrs = 0;
        const char *l = strstr(info.path, "lists (rma_iov)");
        CHECK(l != NULL);
        while (l && l > info.path && l[-1] != ';')
            l--;
        CHECK(l && sscanf(l, " %llu lists (rma_iov): %llu entries in %llu WRs", &lists, &ents, &wrs) == 3);
        CHECK(lists >= 4 && wrs > 0 && wrs < ents);
    }
    free(ld);
    free(rd);
    free(want);
}

/* D. errors name the entry's index */
static void case_errors(void)
{
    fprintf(stderr, "D. errors with the entry index\n");
    gw_remote_desc_t rd[8];
    gw_local_desc_t ld[8];
    for (int i = 0; i < 8; i++) {
        rd[i] = (gw_remote_desc_t){rk[0], (uint64_t)i * 4096, 4096};
        ld[i] = (gw_local_desc_t){msrc, (size_t)i * 4096, 4096};
    }
    gw_dlist_t *L = NULL, *R = NULL;
    rd[5].offset = REGION - 100; /* 4096 bytes from there cross the end */
    CHECK_ST(gw_dlist_remote(ep, rd, 8, GW_ACCESS_REMOTE_WRITE, &R), GW_ERR_OUT_OF_BOUNDS);
    CHECK(msg_has("entry 5") && R == NULL);
    rd[5].offset = 0;
    rd[2].rkey = rk[1]; /* read-only region */
    CHECK_ST(gw_dlist_remote(ep, rd, 8, GW_ACCESS_REMOTE_WRITE, &R), GW_ERR_ACCESS);
    CHECK(msg_has("entry 2"));
    rd[2].rkey = NULL;
    CHECK_ST(gw_dlist_remote(ep, rd, 8, GW_ACCESS_REMOTE_WRITE, &R), GW_ERR_INVALID);
    CHECK(msg_has("entry 2"));
    rd[2].rkey = rk[0];
    ld[3].offset = REGION - 1;
    CHECK_ST(gw_dlist_local(ctx, ld, 8, &L), GW_ERR_INVALID);
    CHECK(msg_has("entry 3") && L == NULL);
    ld[3].offset = 0;
    ld[6].len = 4095;
    IT_OK(ctx, gw_dlist_local(ctx, ld, 8, &L));
    IT_OK(ctx, gw_dlist_remote(ep, rd, 8, GW_ACCESS_REMOTE_WRITE, &R));
    gw_request_t *r = NULL;
    uint32_t bad_idx[6] = {0, 1, 2, 3, 8, 5};
    CHECK_ST(gw_xfer_batch(ep, GW_XFER_PUT, L, bad_idx, R, NULL, 6, NULL, &r), GW_ERR_INVALID);
    CHECK(msg_has("entry 4") && r == NULL);
    CHECK_ST(gw_xfer_batch(ep, GW_XFER_PUT, L, NULL, R, NULL, 8, NULL, &r), GW_ERR_INVALID);
    CHECK(msg_has("entry 6"));
    CHECK_ST(gw_xfer_batch(ep, GW_XFER_PUT, L, NULL, R, NULL, 9, NULL, &r), GW_ERR_INVALID);
    CHECK_ST(gw_xfer_batch(ep, GW_XFER_GET, L, NULL, R, NULL, 6, NULL, &r), GW_ERR_ACCESS);
    gw_xfer_opts_t o = {.size = sizeof(o), .notify = GW_NOTIFY_ORDERED};
    CHECK_ST(gw_xfer_batch(ep, GW_XFER_GET, L, NULL, R, NULL, 0, &o, &r), GW_ERR_INVALID);
    CHECK_ST(gw_xfer_batch(ep, GW_XFER_PUT, R, NULL, L, NULL, 1, NULL, &r), GW_ERR_INVALID);
    uint32_t pages[8] = {0, 1, 2, 3, 4, 5, REGION / 4096, 7};
    CHECK_ST(gw_xfer_pages(ep, GW_XFER_PUT, msrc, src, NULL, rk[0], raddr[0], pages, 8, 4096, NULL, &r),
             GW_ERR_OUT_OF_BOUNDS);
    CHECK(msg_has("entry 6"));
    CHECK_ST(gw_xfer_pages(ep, GW_XFER_PUT, msrc, src, pages, rk[0], raddr[0], NULL, 8, 4096, NULL, &r),
             GW_ERR_INVALID);
    CHECK(msg_has("entry 6"));
    CHECK_ST(gw_xfer_pages(ep, GW_XFER_PUT, msrc, src, NULL, rk[1], raddr[1], NULL, 8, 4096, NULL, &r),
             GW_ERR_ACCESS);
    /* the endpoint cannot close while a remote list of it lives */
    CHECK_ST(gw_ep_close(ep, 0), GW_ERR_BUSY);
    CHECK(msg_has("descriptor list"));
    CHECK_ST(gw_dlist_destroy(L), GW_OK);
    CHECK_ST(gw_dlist_destroy(R), GW_OK);
}

/* E. a key revoked at the target: the batch fails, no notification, the endpoint stays usable */
static void case_revoked(void)
{
    fprintf(stderr, "E. key revoked in mid-list\n");
    enum { N = 40 };
    gw_local_desc_t ld[N];
    gw_remote_desc_t rd[N];
    for (int i = 0; i < N; i++) {
        ld[i] = (gw_local_desc_t){msrc, (size_t)i * 8192, 8192};
        rd[i] = (gw_remote_desc_t){(i % 3 == 2) ? rk[2] : rk[0], (uint64_t)i * 8192, 8192};
    }
    gw_dlist_t *L = NULL, *R = NULL;
    IT_OK(ctx, gw_dlist_local(ctx, ld, N, &L));
    IT_OK(ctx, gw_dlist_remote(ep, rd, N, GW_ACCESS_REMOTE_WRITE, &R));
    it_cmd_t c = {.type = IT_CMD_DEREG, .region = 2};
    CHECK(it_target_cmd(&T, &c, ctx).a == GW_OK);
    gw_xfer_opts_t o = {.size = sizeof(o), .notify = GW_NOTIFY_COUNTED, .value = 55};
    gw_request_t *r = NULL;
    IT_OK(ctx, gw_xfer_batch(ep, GW_XFER_PUT, L, NULL, R, NULL, N, &o, &r));
    gw_status_t st = gw_request_wait(r, 30000);
    if (is_verbs) /* the target's NIC refuses the access: the endpoint fails */
        CHECK(st != GW_OK && st != GW_INPROGRESS);
    else
        CHECK_ST(st, GW_ERR_INVALID_KEY);
    gw_request_free(r);
    if (is_verbs) /* (the target's side of the queue pair may or may not have failed yet) */
        CHECK(ncount(55, 1, 300) != GW_OK);
    else
        CHECK_ST(ncount(55, 1, 300), GW_ERR_TIMEOUT);
    /* what the target may hold: each region-0 entry old or new bytes; nothing outside the entries */
    it_cmd_t h = {.type = IT_CMD_HASH, .region = 0, .off = N * 8192, .len = REGION - N * 8192};
    CHECK((uint64_t)it_target_cmd(&T, &h, ctx).a == it_hash(img0 + N * 8192, REGION - N * 8192));
    if (is_verbs) {
        fprintf(stderr, "  (verbs: the endpoint failed with %s, as a single put to a revoked key does)\n",
                gw_status_name(st));
        gw_request_t *q = NULL;
        CHECK_ST(gw_xfer_batch(ep, GW_XFER_PUT, L, NULL, R, NULL, 1, NULL, &q), GW_ERR_ENDPOINT_FAILED);
        CHECK_ST(gw_dlist_destroy(L), GW_OK);
        CHECK_ST(gw_dlist_destroy(R), GW_OK);
        return;
    }
    /* re-sync the image of the entries (they may or may not have been written) and go on */
    gw_request_t *g = NULL;
    IT_OK(ctx, gw_get(ep, img0, N * 8192, NULL, raddr[0], rk[0], &g));
    CHECK_ST(gw_request_wait(g, 30000), GW_OK);
    gw_request_free(g);
    uint32_t ok_idx[N];
    uint32_t k = 0;
    for (uint32_t i = 0; i < N; i++)
        if (i % 3 != 2)
            ok_idx[k++] = i;
    o.value = 56;
    IT_OK(ctx, gw_xfer_batch(ep, GW_XFER_PUT, L, ok_idx, R, ok_idx, k, &o, &r));
    CHECK_ST(gw_request_wait(r, 30000), GW_OK);
    gw_request_free(r);
    for (uint32_t i = 0; i < k; i++)
        memcpy(img0 + (size_t)ok_idx[i] * 8192, src + (size_t)ok_idx[i] * 8192, 8192);
    CHECK_ST(ncount(56, 1, 30000), GW_OK);
    check_region0("after a revoked key");
    CHECK_ST(gw_dlist_destroy(L), GW_OK);
    CHECK_ST(gw_dlist_destroy(R), GW_OK);
}

/* F. zero-length batches; G. counted notifications of two ids interleaved */
static void case_zero_and_counted(void)
{
    fprintf(stderr, "F. zero-length batches\n");
    gw_request_t *r = NULL;
    gw_xfer_opts_t o = {.size = sizeof(o), .notify = GW_NOTIFY_ORDERED, .value = 1234};
    IT_OK(ctx, gw_xfer_pages(ep, GW_XFER_PUT, msrc, src, NULL, rk[0], raddr[0], NULL, 0, 4096, &o, &r));
    CHECK_ST(gw_request_wait(r, 30000), GW_OK);
    gw_request_free(r);
    it_reply_t n = notify_any(30000);
    CHECK(n.a == GW_OK && n.b == 1234);
    o.notify = GW_NOTIFY_COUNTED;
    o.value = 9;
    IT_OK(ctx, gw_xfer_pages(ep, GW_XFER_PUT, msrc, src, NULL, rk[0], raddr[0], NULL, 16, 0, &o, &r));
    CHECK_ST(gw_request_wait(r, 30000), GW_OK);
    gw_request_free(r);
    CHECK_ST(ncount(9, 1, 30000), GW_OK);
    CHECK_ST(ncount(9, 0, 0), GW_OK);

    fprintf(stderr, "G. counted notifications, interleaved\n");
    enum { NB = 12 };
    gw_request_t *rs[NB];
    gwt_fill(src, REGION, 4242);
    for (int b = 0; b < NB; b++) {
        uint32_t pages[64];
        for (uint32_t i = 0; i < 64; i++)
            pages[i] = (uint32_t)b * 64 + i;
        /* large and small batches (which finish in any order) on disjoint ranges */
        size_t psz = (b % 4 == 0) ? 8192 : 1024, base = psz == 8192 ? 0 : (6u << 20);
        o.value = 30 + (uint64_t)(b % 3);
        IT_OK(ctx, gw_xfer_pages(ep, GW_XFER_PUT, msrc, src + base, pages, rk[0], raddr[0] + base, pages, 64, psz,
                                 &o, &rs[b]));
        for (uint32_t i = 0; i < 64; i++)
            memcpy(img0 + base + (size_t)pages[i] * psz, src + base + (size_t)pages[i] * psz, psz);
    }
    CHECK_ST(ncount(32, 4, 30000), GW_OK);
    CHECK_ST(ncount(30, 4, 30000), GW_OK);
    CHECK_ST(ncount(31, 2, 30000), GW_OK);
    CHECK_ST(ncount(31, 3, 200), GW_ERR_TIMEOUT); /* two of id 31 are left, nothing is taken */
    CHECK_ST(ncount(31, 2, 30000), GW_OK);
    for (int b = 0; b < NB; b++) {
        CHECK_ST(gw_request_wait(rs[b], 30000), GW_OK);
        gw_request_free(rs[b]);
    }
    check_region0("counted batches");
}

/* J. prepared selections (gw_xfer_batch_prepared): random blocks of two
 * computed tables put three times from one selection with a counted
 * notification each (the source changing in between), got back crossed;
 * lists of mixed lengths (the per-pair length check); selections outside
 * a list or pairing different lengths refused naming the entry; a
 * selection destroyed while its transfer runs */
static void case_prepared(void)
{
    fprintf(stderr, "J. prepared selections\n");
    enum { BLK = 4096, NBLK = 512, NSEL = 200 };
    gw_dlist_table_t t = {.size = sizeof(t), .n = NBLK, .len_all = BLK};
    gw_dlist_t *L = NULL, *LD = NULL, *R = NULL;
    IT_OK(ctx, gw_dlist_local_table(ctx, &msrc, 1, &t, &L));
    IT_OK(ctx, gw_dlist_local_table(ctx, &mdst, 1, &t, &LD));
    IT_OK(ctx, gw_dlist_remote_table(ep, &rk[0], 1, &t, GW_ACCESS_REMOTE_WRITE | GW_ACCESS_REMOTE_READ, &R));
    uint32_t li[NSEL], ri[NSEL];
    pick(li, NSEL, NBLK);
    pick(ri, NSEL, NBLK);
    gw_pages_t *sel = NULL;
    IT_OK(ctx, gw_pages_create(ctx, li, ri, NSEL, &sel));
    gw_xfer_opts_t o = {.size = sizeof(o), .notify = GW_NOTIFY_COUNTED, .value = 41};
    gw_request_t *r = NULL;
    for (int k = 0; k < 3; k++) {
        gwt_fill(src, REGION, 7100 + (uint64_t)k);
        IT_OK(ctx, gw_xfer_batch_prepared(ep, GW_XFER_PUT, L, R, sel, &o, &r));
        gw_request_info_t inf = {.size = sizeof(inf)};
        CHECK_ST(gw_request_wait(r, 30000), GW_OK);
        gw_request_info(r, &inf);
        CHECK(inf.length == (size_t)NSEL * BLK);
        gw_request_free(r);
        for (uint32_t i = 0; i < NSEL; i++)
            memcpy(img0 + (size_t)ri[i] * BLK, src + (size_t)li[i] * BLK, BLK);
        CHECK_ST(ncount(41, 1, 30000), GW_OK);
        check_region0("prepared put");
    }
    /* the same selection as a get into the other list: local li[i] <- remote ri[i] */
    memset(dst, 0, REGION);
    IT_OK(ctx, gw_xfer_batch_prepared(ep, GW_XFER_GET, LD, R, sel, NULL, &r));
    CHECK_ST(gw_request_wait(r, 30000), GW_OK);
    gw_request_free(r);
    int bad = 0;
    for (uint32_t i = 0; i < NSEL; i++)
        bad += memcmp(dst + (size_t)li[i] * BLK, img0 + (size_t)ri[i] * BLK, BLK) != 0;
    CHECK(bad == 0);
    /* a get with a notification is refused as gw_xfer_batch refuses it */
    CHECK_ST(gw_xfer_batch_prepared(ep, GW_XFER_GET, LD, R, sel, &o, &r), GW_ERR_INVALID);
    CHECK(msg_has("gw_xfer_batch_prepared: a notification goes with a put"));
    /* destroyed while the put may still run: freed when it ends */
    gwt_fill(src, REGION, 7200);
    IT_OK(ctx, gw_xfer_batch_prepared(ep, GW_XFER_PUT, L, R, sel, NULL, &r));
    CHECK_ST(gw_pages_destroy(sel), GW_OK);
    CHECK_ST(gw_request_wait(r, 30000), GW_OK);
    gw_request_free(r);
    for (uint32_t i = 0; i < NSEL; i++)
        memcpy(img0 + (size_t)ri[i] * BLK, src + (size_t)li[i] * BLK, BLK);
    check_region0("prepared put, selection destroyed in flight");
    /* bad selections: an index past a list, named with its entry */
    uint32_t bl[4] = {0, 1, 2, 3}, br[4] = {4, 5, NBLK, 7};
    IT_OK(ctx, gw_pages_create(ctx, bl, br, 4, &sel));
    r = (gw_request_t *)(uintptr_t)1;
    CHECK_ST(gw_xfer_batch_prepared(ep, GW_XFER_PUT, L, R, sel, NULL, &r), GW_ERR_INVALID);
    CHECK(r == NULL && msg_has("gw_xfer_batch_prepared: entry 2: remote index 512 is outside the list"));
    CHECK_ST(gw_pages_destroy(sel), GW_OK);
    IT_OK(ctx, gw_pages_create(ctx, br, NULL, 4, &sel));
    CHECK_ST(gw_xfer_batch_prepared(ep, GW_XFER_PUT, L, R, sel, NULL, &r), GW_ERR_INVALID);
    CHECK(msg_has("entry 2: local index 512"));
    CHECK_ST(gw_pages_destroy(sel), GW_OK);
    /* no index arrays: more entries than a list has */
    IT_OK(ctx, gw_pages_create(ctx, NULL, NULL, NBLK + 1, &sel));
    CHECK_ST(gw_xfer_batch_prepared(ep, GW_XFER_PUT, L, R, sel, NULL, &r), GW_ERR_INVALID);
    CHECK(msg_has("513 entries without an index array"));
    CHECK_ST(gw_pages_destroy(sel), GW_OK);
    CHECK_ST(gw_xfer_batch_prepared(ep, GW_XFER_PUT, L, R, NULL, NULL, &r), GW_ERR_INVALID);
    CHECK(msg_has("NULL selection"));
    gw_context_t *c2 = NULL;
    IT_OK(ctx, gw_context_create(NULL, &c2));
    IT_OK(c2, gw_pages_create(c2, bl, bl, 4, &sel));
    CHECK_ST(gw_xfer_batch_prepared(ep, GW_XFER_PUT, L, R, sel, NULL, &r), GW_ERR_INVALID);
    CHECK(msg_has("another context"));
    CHECK_ST(gw_pages_destroy(sel), GW_OK);
    CHECK_ST(gw_context_destroy(c2), GW_OK);
    CHECK_ST(gw_dlist_destroy(L), GW_OK);
    CHECK_ST(gw_dlist_destroy(LD), GW_OK);
    CHECK_ST(gw_dlist_destroy(R), GW_OK);

    /* lists of mixed lengths: the lengths of the selected pairs checked */
    enum { M = 16 };
    gw_local_desc_t ld[M];
    gw_remote_desc_t rd[M];
    for (int i = 0; i < M; i++) {
        size_t len = 100 + (size_t)(i % 4) * 1000;
        ld[i] = (gw_local_desc_t){msrc, (size_t)i * 8192 + 17, len};
        rd[i] = (gw_remote_desc_t){rk[0], (uint64_t)(M - 1 - i) * 8192 + 3, len};
    }
    IT_OK(ctx, gw_dlist_local(ctx, ld, M, &L));
    IT_OK(ctx, gw_dlist_remote(ep, rd, M, GW_ACCESS_REMOTE_WRITE, &R));
    uint32_t ml[5] = {1, 5, 9, 2, 14}, mr[5] = {13, 1, 5, 6, 2}; /* equal lengths: i % 4 matches */
    IT_OK(ctx, gw_pages_create(ctx, ml, mr, 5, &sel));
    gwt_fill(src, REGION, 7300);
    o.value = 42;
    IT_OK(ctx, gw_xfer_batch_prepared(ep, GW_XFER_PUT, L, R, sel, &o, &r));
    CHECK_ST(gw_request_wait(r, 30000), GW_OK);
    gw_request_free(r);
    for (int i = 0; i < 5; i++)
        memcpy(img0 + rd[mr[i]].offset, src + ld[ml[i]].offset, ld[ml[i]].len);
    CHECK_ST(ncount(42, 1, 30000), GW_OK);
    check_region0("prepared put, mixed lengths");
    CHECK_ST(gw_pages_destroy(sel), GW_OK);
    mr[3] = 7; /* 2 (1100 bytes) with 7 (3100 bytes) */
    IT_OK(ctx, gw_pages_create(ctx, ml, mr, 5, &sel));
    CHECK_ST(gw_xfer_batch_prepared(ep, GW_XFER_PUT, L, R, sel, NULL, &r), GW_ERR_INVALID);
    CHECK(msg_has("entry 3: local entry 2 is 2100 bytes, remote entry 7 3100"));
    CHECK_ST(gw_pages_destroy(sel), GW_OK);
    CHECK_ST(gw_dlist_destroy(L), GW_OK);
    CHECK_ST(gw_dlist_destroy(R), GW_OK);
}

/* I. one batch whose runs mix large entries (received in place) with
 * tiny, zero-length and many small ones (past one run's entry limit and
 * one sendmsg's 1024 iovecs), posted back to back with a striped put and
 * a small paged batch, so that frames of every kind follow large payloads
 * on the same streams; every byte is checked */
static void case_mixed(void)
{
    fprintf(stderr, "I. mixed runs back to back\n");
    enum { NT = 2500, NE = NT + 5 };
    const size_t big = 300000;
    gw_local_desc_t *ld = calloc(NE, sizeof(*ld));
    gw_remote_desc_t *rd = calloc(NE, sizeof(*rd));
    REQUIRE(ld && rd);
    gwt_fill(src, REGION, 7777);
    size_t n = 0;
    /* remote layout: [0, big) large; big + 3 one byte; [400000, +big) large; a zero-length entry;
     * [1 MiB, +NT*64) small entries 64 bytes apart; [1.5 MiB, +big) large */
    ld[n] = (gw_local_desc_t){msrc, 0, big}, rd[n++] = (gw_remote_desc_t){rk[0], 0, big};
    ld[n] = (gw_local_desc_t){msrc, big + 7, 1}, rd[n++] = (gw_remote_desc_t){rk[0], big + 3, 1};
    ld[n] = (gw_local_desc_t){msrc, 2u << 20, big}, rd[n++] = (gw_remote_desc_t){rk[0], 400000, big};
    ld[n] = (gw_local_desc_t){msrc, 5, 0}, rd[n++] = (gw_remote_desc_t){rk[0], 9, 0};
    for (size_t i = 0; i < NT; i++) {
        size_t len = i % 500 == 499 ? 0 : 1 + i % 61;
        ld[n] = (gw_local_desc_t){msrc, (3u << 20) + i * 100, len};
        rd[n++] = (gw_remote_desc_t){rk[0], (1u << 20) + i * 64, len};
    }
    ld[n] = (gw_local_desc_t){msrc, 4u << 20, big}, rd[n++] = (gw_remote_desc_t){rk[0], 3u << 19, big};
    REQUIRE(n == NE);
    gw_dlist_t *L = NULL, *R = NULL;
    IT_OK(ctx, gw_dlist_local(ctx, ld, n, &L));
    IT_OK(ctx, gw_dlist_remote(ep, rd, n, GW_ACCESS_REMOTE_WRITE, &R));
    gw_request_t *r[3] = {NULL, NULL, NULL};
    IT_OK(ctx, gw_xfer_batch(ep, GW_XFER_PUT, L, NULL, R, NULL, n, NULL, &r[0]));
    const size_t poff = 5u << 20, plen = 2u << 20; /* a striped put right behind it */
    IT_OK(ctx, gw_put(ep, src + poff, plen, msrc, raddr[0] + poff, rk[0], &r[1]));
    uint32_t pages[64];
    for (uint32_t i = 0; i < 64; i++)
        pages[i] = 63 - i;
    const size_t qoff = 7u << 20, psz = 1000; /* and a paged batch of small pages */
    IT_OK(ctx, gw_xfer_pages(ep, GW_XFER_PUT, msrc, src + qoff, pages, rk[0], raddr[0] + qoff, pages, 64, psz,
                             NULL, &r[2]));
    for (int k = 0; k < 3; k++) {
        CHECK_ST(gw_request_wait(r[k], 30000), GW_OK);
        gw_request_free(r[k]);
    }
    for (size_t i = 0; i < n; i++)
        memcpy(img0 + rd[i].offset, src + ld[i].offset, ld[i].len);
    memcpy(img0 + poff, src + poff, plen);
    memcpy(img0 + qoff, src + qoff, 64 * psz);
    check_region0("mixed runs");
    CHECK_ST(gw_dlist_destroy(L), GW_OK);
    CHECK_ST(gw_dlist_destroy(R), GW_OK);
    free(ld);
    free(rd);
}

/* H. the target dies in mid-batch: the requests fail, bounded; those
 * posted once it is gone fail or are refused */
static void case_killed(int get)
{
    fprintf(stderr, "H. target killed in mid-batch (%s)\n", get ? "gets" : "puts");
    it_target_cfg_t cfg = {.n_eps = 1, .n_regions = 1,
                           .region = {{64u << 20, GW_ACCESS_REMOTE_WRITE | GW_ACCESS_REMOTE_READ, 0}}};
    it_target_t K;
    char addr[128];
    it_target_start(&K, &cfg, addr, sizeof(addr));
    gw_ep_t *e = it_connect(ctx, addr);
    uint64_t ra;
    size_t rl;
    gw_rkey_t *k = it_single_key(&K, ctx, e, &ra, &rl);
    uint8_t *big = it_alloc(64u << 20);
    gw_mem_t *mb = NULL;
    IT_OK(ctx, gw_mem_reg(ctx, big, 64u << 20, GW_ACCESS_LOCAL, &mb));
    enum { NB = 8 };
    gw_request_t *r[NB];
    int n = 0, refused = 0, died = -1;
    /* half the batches posted (the last of them most likely still moving),
     * then the target is killed and reaped, then the other half posted:
     * those can only fail, whatever the machine's load (over intra a
     * killed process's memory takes CMA copies until it has exited, so
     * only a reaped target makes a failure certain; a killer timed by a
     * sleep found, on a busy machine, all 8 batches done before the
     * death) */
    for (int i = 0; i < NB; i++) {
        if (i == NB / 2) {
            kill(K.pid, SIGKILL);
            died = gwt_wait(K.pid, 30);
        }
        uint32_t pages[2048];
        for (uint32_t j = 0; j < 2048; j++) /* puts: every other 16 KiB block, backwards; gets: every
                                             * other 4 KiB page, forwards (intra reads the holes) */
            pages[j] = get ? j * 2 : (2048 - 1 - j) * 2;
        gw_status_t pst = gw_xfer_pages(e, get ? GW_XFER_GET : GW_XFER_PUT, mb, big, pages, k, ra, pages, 2048,
                                        get ? 4096 : 16384, NULL, &r[n]);
        if (pst != GW_OK) { /* the endpoint already saw the death: refused at posting */
            CHECK(GW_IS_ENDPOINT_ERROR(pst));
            CHECK(i >= NB / 2);
            refused = 1;
            break;
        }
        n++;
    }
    double t0;
    t0 = it_now();
    int failed = 0, other = 0;
    for (int i = 0; i < n; i++) {
        gw_status_t st = gw_request_wait(r[i], 15000);
        gw_request_info_t ri = {.size = sizeof(ri)};
        gw_request_info(r[i], &ri);
        if (st != GW_OK && ri.length > (size_t)2048 * (get ? 4096 : 16384)) { /* (what moved, at most all) */
            fprintf(stderr, "  batch %d failed reporting %zu bytes moved, more than it holds\n", i, ri.length);
            gwt_failures++;
        }
        if (i >= NB / 2 && st == GW_OK) { /* posted after the target was reaped */
            fprintf(stderr, "  batch %d, posted to a dead target, completed\n", i);
            gwt_failures++;
        }
        if (st != GW_OK) {
            failed++;
            /* verbs: the dead target's registrations go with it, so its NIC (rxe: the same
             * kernel) may answer a WRITE with a remote access error before the queue pair fails */
            other += !GW_IS_ENDPOINT_ERROR(st) && !(is_verbs && st == GW_ERR_INVALID_KEY);
            if (!GW_IS_ENDPOINT_ERROR(st))
                fprintf(stderr, "  batch %d: %s (%s)\n", i, gw_status_name(st), gw_last_error(ctx));
        }
        gw_request_free(r[i]);
    }
    double took = it_now() - t0;
    fprintf(stderr, "  %d of %d batches posted failed%s, after %.2f s\n", failed, n,
            refused ? " (the next one was refused at posting)" : "", took);
    CHECK(failed + refused >= 1);
    CHECK(other == 0);
    CHECK(took < 10.0 * it_time_scale());
    CHECK(died == 128 + SIGKILL);
    close(K.to_child.wfd);
    close(K.to_parent.rfd);
    gw_rkey_destroy(k);
    CHECK_ST(gw_ep_close(e, 1000), GW_OK);
    CHECK_ST(gw_mem_dereg(mb), GW_OK);
    free(big);
}

int main(void)
{
    it_target_cfg_t cfg = {
        .n_eps = 1,
        .n_regions = 3,
        .region = {{REGION, GW_ACCESS_REMOTE_WRITE | GW_ACCESS_REMOTE_READ, 0},
                   {REGION, GW_ACCESS_REMOTE_READ, GET_SEED},
                   {SMALL, GW_ACCESS_REMOTE_WRITE, 0}},
    };
    char addr[128];
    it_target_start(&T, &cfg, addr, sizeof(addr));
    ctx = it_ctx();
    ep = it_connect(ctx, addr);
    it_target_rkeys(&T, ctx, ep, rk, raddr, NULL);
    gw_ep_info_t info = {.size = sizeof(info)};
    IT_OK(ctx, gw_ep_query(ep, &info));
    fprintf(stderr, "connected over %s (%s)\n", info.transport, info.path);
    src = it_alloc(REGION);
    dst = it_alloc(REGION);
    img0 = it_alloc(REGION);
    ref1 = it_alloc(REGION);
    gwt_fill(ref1, REGION, GET_SEED);
    IT_OK(ctx, gw_mem_reg(ctx, src, REGION, GW_ACCESS_LOCAL, &msrc));
    IT_OK(ctx, gw_mem_reg(ctx, dst, REGION, GW_ACCESS_LOCAL, &mdst));

    case_pages();
    case_lists();
    case_kept();
    case_get();
    case_gather();
    case_errors();
    case_zero_and_counted();
    case_mixed();
    case_prepared();
    is_verbs = !strcmp(info.transport, "verbs") || !strcmp(info.transport, "ofi"); /* (ofi fails the endpoint alike) */
    if (getenv("IT_KEYS_UNENFORCED") && *getenv("IT_KEYS_UNENFORCED")) /* (a transport whose keys nothing checks at the target: ofi over shm) */
        fprintf(stderr, "E. key revoked in mid-list: skipped, IT_KEYS_UNENFORCED=%s\n", getenv("IT_KEYS_UNENFORCED"));
    else
        case_revoked();
    if (!is_verbs)
        check_region0("the end");

    for (int i = 0; i < 3; i++)
        gw_rkey_destroy(rk[i]);
    CHECK_ST(gw_ep_close(ep, 5000), GW_OK);
    CHECK(it_target_stop(&T, ctx) == 0);
    const char *hangs = getenv("IT_PEER_DEATH_HANGS");
    if (hangs && *hangs) { /* (a provider whose calls can spin forever on a lock a killed peer held: ofi over shm) */
        fprintf(stderr, "H. target killed in mid-batch: skipped, IT_PEER_DEATH_HANGS=%s\n", hangs);
    } else {
        case_killed(0);
        case_killed(1);
    }
    CHECK_ST(gw_mem_dereg(msrc), GW_OK);
    CHECK_ST(gw_mem_dereg(mdst), GW_OK);
    IT_OK(ctx, gw_context_destroy(ctx));
    free(src);
    free(dst);
    free(img0);
    free(ref1);
    return gwt_done("it_batch");
}
