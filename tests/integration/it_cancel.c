/* SPDX-License-Identifier: Apache-2.0 */
/* it_cancel.c - bounded operations: cancel of every operation kind, a
 * frozen, a killed and a revoking target, and a put stream racing a
 * deregistration.  Each case runs by name (argv[1]) over the transport
 * GPUWIRE_TRANSPORTS names (ctest: tcp, intra, ofi over tcp and shm):
 *   ops        puts, gets, put_notifys, sends, paged puts and gets, a flush
 *              and a receive, each canceled right after posting while the
 *              target serves: every request ends within the bound with
 *              GW_OK or GW_ERR_CANCELED; a cancel that returned GW_OK left
 *              the request complete; what completed GW_OK moved every byte;
 *              once all ended, the target's memory no longer changes, and
 *              it got one notification per completed put_notify and none
 *              of a canceled one.  How many were withdrawn is printed.
 *   frozen     the target is stopped (SIGSTOP; GPUWIRE_PEER_TIMEOUT_MS
 *              60 s) while a large put and a get move; both are canceled
 *              and must end within GPUWIRE_OP_TIMEOUT_MS (1 s) plus slack.
 *              Once the target runs again and its endpoint reports the
 *              failure, nothing lands in its memory any more.
 *   killed     every kind outstanding (put, get, put_notify, a rendezvous
 *              send, a paged put, a receive, a flush) when the target is
 *              killed: each ends within the bound, the send, receive
 *              and flush with an error, and the paged put too save over
 *              intra (CMA may finish it before the death is seen).
 *   revoked    puts, gets and a paged put into a region the target has
 *              deregistered end with GW_ERR_INVALID_KEY (or are refused at
 *              posting) within the bound; the target lives on.
 *   dereg_race puts stream into a region while the target deregisters
 *              it: once gw_mem_dereg returned, the region's bytes never
 *              change again, while the puts keep coming (and fail).
 *   batch      batches the transport carries itself (tcp's run frames,
 *              intra's ring slots and piecewise CMA; over ofi the protocol
 *              layer's expansion), each with an ordered notification,
 *              canceled last first, one progress pass before each, while
 *              the target serves: each
 *              ends GW_OK or GW_ERR_CANCELED within the bound, never both
 *              (a cancel that returned GW_OK left it complete); one that
 *              completed GW_OK left every byte of it at the target, one
 *              withdrawn at the cancel left none, one cut short left at
 *              most the bytes its gw_request_info length says and only
 *              its own bytes; the target got the notification of each
 *              completed batch and of no other, and its memory no longer
 *              changes once all ended.  Over tcp and intra some must be
 *              withdrawn or cut short (tcp: the target is stopped while
 *              they are posted and canceled).
 *   ring       intra: a batch of small pages offered through the shared
 *              ring to a target stopped after it took earlier offers,
 *              canceled: its slots are taken back, it ends
 *              GW_ERR_CANCELED at the cancel with length 0, none of it
 *              lands once the target runs again, and the next batch
 *              through the ring lands whole.
 *   rndv       a rendezvous send queued behind eager sends that a stopped
 *              target does not read, canceled (and the last eager sends
 *              with it): over tcp and intra it is withdrawn at the cancel
 *              (GW_ERR_CANCELED at once); once the target runs, it
 *              receives exactly the messages of the sends that completed
 *              GW_OK, in order, and never the canceled ones. */
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "it.h"

#define RW (GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE)

static const char *transport(void)
{
    const char *t = getenv("GPUWIRE_TRANSPORTS");
    return t ? t : "";
}

static int keys_unenforced(void)
{
    const char *p = getenv("GPUWIRE_OFI_PROVIDER");
    return !strcmp(transport(), "ofi") && p && !strcmp(p, "shm");
}

/* Does an endpoint outlive an access its target refused? */
static int lives_on(void)
{
    return !strcmp(transport(), "tcp") || !strcmp(transport(), "intra");
}

/* bound on the end of anything canceled or failed (ms) */
static int bound_ms(void)
{
    return (int)(10000 * it_time_scale());
}

static void start(it_target_t *T, gw_context_t *ctx, size_t len, int nreg, const char *env, gw_ep_t **ep,
                  gw_rkey_t **rk, uint64_t *ra)
{
    it_target_cfg_t cfg = {.n_eps = 1, .n_regions = nreg, .env = {env}, .recv_window = 0};
    for (int i = 0; i < nreg; i++)
        cfg.region[i] = (it_region_spec_t){len, RW, 0x5eedu + (uint64_t)i};
    char addr[128];
    it_target_start(T, &cfg, addr, sizeof(addr));
    *ep = it_connect(ctx, addr);
    it_target_rkeys(T, ctx, *ep, rk, ra, NULL);
}

/* Waits for r (bounded), returns its status and frees it; the time it took
 * after `since` goes to *ms. */
static gw_status_t end_of(gw_request_t *r, double since, double *ms)
{
    gw_status_t st = gw_request_wait(r, bound_ms());
    if (st == GW_OK || st == GW_ERR_TIMEOUT) {
        gw_request_info_t ri = {.size = sizeof(ri)};
        gw_request_info(r, &ri);
        st = st == GW_ERR_TIMEOUT ? GW_ERR_TIMEOUT : ri.status;
    }
    if (ms)
        *ms = (it_now() - since) * 1000.0;
    if (st != GW_ERR_TIMEOUT)
        gw_request_free(r);
    return st;
}

/* A cancel's answer: GW_OK leaves the request complete. */
static void cancel_checked(gw_request_t *r, int *withdrawn)
{
    gw_status_t c = gw_request_cancel(r);
    if (c != GW_OK && c != GW_INPROGRESS) {
        fprintf(stderr, "  gw_request_cancel returned %s\n", gw_status_name(c));
        gwt_failures++;
        return;
    }
    gw_request_info_t ri = {.size = sizeof(ri)};
    gw_request_info(r, &ri);
    if (c == GW_OK && ri.status == GW_INPROGRESS) {
        fprintf(stderr, "  gw_request_cancel returned GW_OK for a request still in progress\n");
        gwt_failures++;
    }
    if (c == GW_OK && ri.status == GW_ERR_CANCELED && withdrawn)
        (*withdrawn)++;
}

static uint64_t target_hash(it_target_t *T, gw_context_t *ctx, uint32_t region, size_t len)
{
    it_cmd_t c = {.type = IT_CMD_HASH, .region = region, .off = 0, .len = len};
    return (uint64_t)it_target_cmd(T, &c, ctx).a;
}

/* ---- ops ------------------------------------------------------------------------ */
enum { N = 32, SLOT = 1u << 20 };

static void tally(const char *what, gw_status_t *st, int n, int withdrawn)
{
    int ok = 0, canceled = 0;
    for (int i = 0; i < n; i++) {
        ok += st[i] == GW_OK;
        canceled += st[i] == GW_ERR_CANCELED;
        if (st[i] != GW_OK && st[i] != GW_ERR_CANCELED) {
            fprintf(stderr, "  %s #%d ended %s\n", what, i, gw_status_name(st[i]));
            gwt_failures++;
        }
    }
    fprintf(stderr, "  %-10s %2d posted: %2d ok, %2d canceled (%d withdrawn at the cancel)\n", what, n, ok, canceled,
            withdrawn);
}

static void case_ops(void)
{
    gw_context_t *ctx = it_ctx();
    it_target_t T;
    gw_ep_t *ep;
    gw_rkey_t *rk[1];
    uint64_t ra[1];
    size_t rlen = (size_t)N * SLOT;
    start(&T, ctx, rlen, 1, NULL, &ep, rk, ra);
    uint8_t *buf = it_alloc(rlen);
    gw_mem_t *lmem;
    IT_OK(ctx, gw_mem_reg(ctx, buf, rlen, GW_ACCESS_LOCAL, &lmem));
    gw_request_t *r[N];
    gw_status_t st[N];
    double t0;
    int wd;

    /* puts: slot i gets seed 100 + i */
    for (int i = 0; i < N; i++)
        gwt_fill(buf + (size_t)i * SLOT, SLOT, 100 + (uint64_t)i);
    wd = 0;
    for (int i = 0; i < N; i++)
        IT_OK(ctx, gw_put(ep, buf + (size_t)i * SLOT, SLOT, lmem, ra[0] + (uint64_t)i * SLOT, rk[0], &r[i]));
    for (int i = 0; i < N; i++)
        cancel_checked(r[i], &wd);
    t0 = it_now();
    for (int i = 0; i < N; i++)
        st[i] = end_of(r[i], t0, NULL);
    tally("put", st, N, wd);
    for (int i = 0; i < N; i++)
        if (st[i] == GW_OK) {
            it_cmd_t c = {.type = IT_CMD_VERIFY, .off = (uint64_t)i * SLOT, .len = SLOT, .seed = 100 + (uint64_t)i};
            CHECK(it_target_cmd(&T, &c, ctx).a == -1);
        }
    uint64_t h1 = target_hash(&T, ctx, 0, rlen);
    usleep(300000);
    uint64_t h2 = target_hash(&T, ctx, 0, rlen);
    if (h1 != h2) {
        fprintf(stderr, "  the target's memory changed after every put had ended\n");
        gwt_failures++;
    }

    /* gets: read every slot back (the target's bytes as they now stand) */
    memset(buf, 0, rlen);
    wd = 0;
    for (int i = 0; i < N; i++)
        IT_OK(ctx, gw_get(ep, buf + (size_t)i * SLOT, SLOT, lmem, ra[0] + (uint64_t)i * SLOT, rk[0], &r[i]));
    for (int i = 0; i < N; i++)
        cancel_checked(r[i], &wd);
    t0 = it_now();
    for (int i = 0; i < N; i++)
        st[i] = end_of(r[i], t0, NULL);
    tally("get", st, N, wd);
    for (int i = 0; i < N; i++)
        if (st[i] == GW_OK && it_hash(buf + (size_t)i * SLOT, SLOT) != ({
                it_cmd_t c = {.type = IT_CMD_HASH, .off = (uint64_t)i * SLOT, .len = SLOT};
                (uint64_t)it_target_cmd(&T, &c, ctx).a;
            })) {
            fprintf(stderr, "  get #%d completed GW_OK without the target's bytes\n", i);
            gwt_failures++;
        }

    /* put_notify: value i; the target sees exactly the completed ones */
    wd = 0;
    for (int i = 0; i < N; i++)
        IT_OK(ctx, gw_put_notify(ep, buf + (size_t)i * SLOT, SLOT, lmem, ra[0] + (uint64_t)i * SLOT, rk[0],
                                 (uint64_t)i, &r[i]));
    for (int i = 0; i < N; i++)
        cancel_checked(r[i], &wd);
    t0 = it_now();
    for (int i = 0; i < N; i++)
        st[i] = end_of(r[i], t0, NULL);
    tally("put_notify", st, N, wd);
    int seen[N] = {0}, extra = 0;
    for (;;) {
        it_cmd_t c = {.type = IT_CMD_NOTIFY_ANY, .off = 500};
        it_reply_t rep = it_target_cmd(&T, &c, ctx);
        if (rep.a != GW_OK)
            break;
        if (rep.b >= 0 && rep.b < N)
            seen[rep.b]++;
        else
            extra++;
    }
    for (int i = 0; i < N; i++)
        if (seen[i] != (st[i] == GW_OK)) {
            fprintf(stderr, "  put_notify #%d ended %s and the target saw its notification %d times\n", i,
                    gw_status_name(st[i]), seen[i]);
            gwt_failures++;
        }
    CHECK(extra == 0);

    /* sends (eager) */
    wd = 0;
    for (int i = 0; i < N; i++)
        IT_OK(ctx, gw_send(ep, buf + (size_t)i * 1024, 1024, lmem, (uint64_t)i, &r[i]));
    for (int i = 0; i < N; i++)
        cancel_checked(r[i], &wd);
    t0 = it_now();
    for (int i = 0; i < N; i++)
        st[i] = end_of(r[i], t0, NULL);
    tally("send", st, N, wd);

    /* paged put and get: 4 batches of 64 pages of 64 KiB */
    enum { NB = 4, PG = 64, PSZ = 64 * 1024 };
    for (int op = 0; op < 2; op++) {
        wd = 0;
        for (int i = 0; i < NB; i++)
            IT_OK(ctx, gw_xfer_pages(ep, op ? GW_XFER_GET : GW_XFER_PUT, lmem, buf + (size_t)i * PG * PSZ, NULL,
                                     rk[0], ra[0] + (uint64_t)i * PG * PSZ, NULL, PG, PSZ, NULL, &r[i]));
        for (int i = 0; i < NB; i++)
            cancel_checked(r[i], &wd);
        t0 = it_now();
        for (int i = 0; i < NB; i++)
            st[i] = end_of(r[i], t0, NULL);
        tally(op ? "pages get" : "pages put", st, NB, wd);
    }
    h1 = target_hash(&T, ctx, 0, rlen);
    usleep(300000);
    h2 = target_hash(&T, ctx, 0, rlen);
    if (h1 != h2) {
        fprintf(stderr, "  the target's memory changed after every batch had ended\n");
        gwt_failures++;
    }

    /* a flush behind a put, and a receive no message matches */
    gw_request_t *p, *f, *rv;
    IT_OK(ctx, gw_put(ep, buf, SLOT, lmem, ra[0], rk[0], &p));
    IT_OK(ctx, gw_flush(ep, &f));
    cancel_checked(f, NULL);
    IT_OK(ctx, gw_recv(ep, buf + SLOT, 64, lmem, 0xdeadull, ~0ull, &rv));
    CHECK_ST(gw_request_cancel(rv), GW_OK);
    t0 = it_now();
    gw_status_t sp = end_of(p, t0, NULL), sf = end_of(f, t0, NULL), sr = end_of(rv, t0, NULL);
    fprintf(stderr, "  flush behind a put: put %s, flush %s; receive %s\n", gw_status_name(sp), gw_status_name(sf),
            gw_status_name(sr));
    CHECK(sp == GW_OK || sp == GW_ERR_CANCELED);
    CHECK(sf == GW_OK || sf == GW_ERR_CANCELED);
    CHECK_ST(sr, GW_ERR_CANCELED);
    CHECK_ST(gw_request_cancel(NULL), GW_ERR_INVALID);

    /* the endpoint is healthy after all that */
    gw_request_t *last;
    gwt_fill(buf, 4096, 7);
    IT_OK(ctx, gw_put(ep, buf, 4096, lmem, ra[0], rk[0], &last));
    CHECK_ST(end_of(last, it_now(), NULL), GW_OK);
    it_cmd_t v = {.type = IT_CMD_VERIFY, .off = 0, .len = 4096, .seed = 7};
    CHECK(it_target_cmd(&T, &v, ctx).a == -1);
    CHECK(it_target_stop(&T, ctx) == 0);
    gw_rkey_destroy(rk[0]);
    CHECK_ST(gw_ep_close(ep, 5000), GW_OK);
    CHECK_ST(gw_mem_dereg(lmem), GW_OK);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    free(buf);
}

/* ---- frozen ---------------------------------------------------------------------- */
static void case_frozen(void)
{
    const size_t BIG = 32u << 20, SMALL = 1u << 20;
    setenv("GPUWIRE_PEER_TIMEOUT_MS", "60000", 1);
    setenv("GPUWIRE_OP_TIMEOUT_MS", "1000", 1);
    gw_context_t *ctx = it_ctx();
    it_target_t T;
    gw_ep_t *ep;
    gw_rkey_t *rk[1];
    uint64_t ra[1];
    start(&T, ctx, BIG + SMALL, 1, "GPUWIRE_PEER_TIMEOUT_MS=60000", &ep, rk, ra);
    uint8_t *buf = it_alloc(BIG + SMALL);
    gwt_fill(buf, BIG, 42);
    REQUIRE(kill(T.pid, SIGSTOP) == 0);
    gw_request_t *p, *g;
    double t0 = it_now();
    IT_OK(ctx, gw_put(ep, buf, BIG, NULL, ra[0], rk[0], &p));
    IT_OK(ctx, gw_get(ep, buf + BIG, SMALL, NULL, ra[0] + BIG, rk[0], &g));
    for (double e = it_now() + 0.1; it_now() < e;)
        gw_progress(ctx);
    cancel_checked(p, NULL);
    cancel_checked(g, NULL);
    double mp, mg;
    gw_status_t sp = end_of(p, t0, &mp), sg = end_of(g, t0, &mg);
    fprintf(stderr, "  frozen target: put of %zu MiB %s after %.0f ms, get %s after %.0f ms (%s)\n", BIG >> 20,
            gw_status_name(sp), mp, gw_status_name(sg), mg, gw_last_error(ctx));
    double lim = 1000 + 5000 * it_time_scale();
    CHECK(sp != GW_ERR_TIMEOUT && sg != GW_ERR_TIMEOUT);
    CHECK(mp < lim && mg < lim);
    REQUIRE(kill(T.pid, SIGCONT) == 0);
    if (sp != GW_OK) {
        /* the target learns of the failure; from then on nothing lands */
        double end = it_now() + bound_ms() / 1000.0;
        it_reply_t rep;
        do {
            it_cmd_t c = {.type = IT_CMD_EP_STATUS};
            rep = it_target_cmd(&T, &c, ctx);
        } while (rep.b == GW_OK && it_now() < end && usleep(20000) == 0);
        fprintf(stderr, "  the target's endpoint reports %s\n", gw_status_name((gw_status_t)rep.b));
        CHECK(rep.b != GW_OK);
        uint64_t h1 = target_hash(&T, ctx, 0, BIG);
        usleep(500000);
        uint64_t h2 = target_hash(&T, ctx, 0, BIG);
        if (h1 != h2) {
            fprintf(stderr, "  bytes landed in the target after its endpoint reported the failure\n");
            gwt_failures++;
        }
    }
    CHECK(it_target_stop(&T, ctx) == 0);
    gw_rkey_destroy(rk[0]);
    gw_ep_close(ep, 2000);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    free(buf);
}

/* ---- killed ---------------------------------------------------------------------- */
static void case_killed(void)
{
    const size_t LEN = 8u << 20;
    gw_context_t *ctx = it_ctx();
    it_target_t T;
    gw_ep_t *ep;
    gw_rkey_t *rk[1];
    uint64_t ra[1];
    start(&T, ctx, LEN, 1, NULL, &ep, rk, ra);
    uint8_t *buf = it_alloc(2 * LEN);
    gw_mem_t *lmem;
    IT_OK(ctx, gw_mem_reg(ctx, buf, 2 * LEN, GW_ACCESS_LOCAL, &lmem));
    REQUIRE(kill(T.pid, SIGSTOP) == 0); /* nothing completes before the kill */
    enum { K = 7 };
    gw_request_t *r[K];
    const char *what[K] = {"put", "get", "put_notify", "send", "pages put", "recv", "flush"};
    IT_OK(ctx, gw_put(ep, buf, LEN, lmem, ra[0], rk[0], &r[0]));
    IT_OK(ctx, gw_get(ep, buf + LEN, LEN, lmem, ra[0], rk[0], &r[1]));
    IT_OK(ctx, gw_put_notify(ep, buf, LEN / 2, lmem, ra[0], rk[0], 1, &r[2]));
    IT_OK(ctx, gw_send(ep, buf, LEN, lmem, 5, &r[3]));
    IT_OK(ctx, gw_xfer_pages(ep, GW_XFER_PUT, lmem, buf, NULL, rk[0], ra[0], NULL, 64, 64 * 1024, NULL, &r[4]));
    IT_OK(ctx, gw_recv(ep, buf + LEN, 4096, lmem, 9, ~0ull, &r[5]));
    IT_OK(ctx, gw_flush(ep, &r[6]));
    REQUIRE(kill(T.pid, SIGKILL) == 0);
    kill(T.pid, SIGCONT);
    double t0 = it_now();
    gw_status_t got[K];
    int intra = !strcmp(transport(), "intra");
    for (int i = 0; i < K; i++) {
        double ms;
        gw_status_t st = got[i] = end_of(r[i], t0, &ms);
        fprintf(stderr, "  %-10s %s after %.0f ms\n", what[i], gw_status_name(st), ms);
        /* over intra a put, get or paged put may finish before the death
         * is seen: CMA needs only the target's memory, which a killed
         * process keeps until it runs its exit, later on a busy machine;
         * and then the flush behind them, which waits for the puts alone,
         * may too.  Everything else ends with an error, and nothing hangs */
        CHECK(st != GW_ERR_TIMEOUT && st != GW_INPROGRESS);
        int may_land = intra && (i == 4 || (i == 6 && got[0] == GW_OK && got[2] == GW_OK && got[4] == GW_OK));
        if (i >= 3 && !may_land)
            CHECK(st != GW_OK);
    }
    gwt_wait(T.pid, 5);
    close(T.to_child.wfd);
    close(T.to_parent.rfd);
    gw_rkey_destroy(rk[0]);
    gw_ep_close(ep, 1000);
    CHECK_ST(gw_mem_dereg(lmem), GW_OK);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    free(buf);
}

/* ---- revoked --------------------------------------------------------------------- */
static void case_revoked(void)
{
    if (keys_unenforced())
        SKIP("the ofi shm provider checks no key at the target (docs/OFI.md)");
    const size_t LEN = 1u << 20;
    gw_context_t *ctx = it_ctx();
    it_target_t T;
    gw_ep_t *ep;
    gw_rkey_t *rk[2];
    uint64_t ra[2];
    start(&T, ctx, LEN, 2, NULL, &ep, rk, ra);
    uint8_t *buf = it_alloc(LEN);
    gw_mem_t *lmem;
    IT_OK(ctx, gw_mem_reg(ctx, buf, LEN, GW_ACCESS_LOCAL, &lmem));
    it_cmd_t d = {.type = IT_CMD_DEREG, .region = 1};
    CHECK_ST((gw_status_t)it_target_cmd(&T, &d, ctx).a, GW_OK);
    const char *what[3] = {"put", "get", "pages put"};
    for (int i = 0; i < 3; i++) {
        gw_request_t *r = NULL;
        gw_status_t ps = i == 0   ? gw_put(ep, buf, LEN, lmem, ra[1], rk[1], &r)
                         : i == 1 ? gw_get(ep, buf, LEN, lmem, ra[1], rk[1], &r)
                                  : gw_xfer_pages(ep, GW_XFER_PUT, lmem, buf, NULL, rk[1], ra[1], NULL, 16, 4096,
                                                  NULL, &r);
        double ms = 0;
        gw_status_t st = ps != GW_OK ? ps : end_of(r, it_now(), &ms);
        fprintf(stderr, "  %-9s into the deregistered region: %s after %.0f ms (%s)\n", what[i], gw_status_name(st),
                ms, ps != GW_OK ? "refused at posting" : "completed");
        /* verbs and ofi over tcp: the refused access fails the endpoint (the
         * queue pair, the provider's connection), so what follows is refused
         * as an endpoint error */
        CHECK(st == GW_ERR_INVALID_KEY || (!lives_on() && GW_IS_ENDPOINT_ERROR(st)));
    }
    if (lives_on()) { /* the endpoint lives on: region 0 still takes puts */
        gw_request_t *r;
        gwt_fill(buf, 4096, 3);
        IT_OK(ctx, gw_put(ep, buf, 4096, lmem, ra[0], rk[0], &r));
        CHECK_ST(end_of(r, it_now(), NULL), GW_OK);
        it_cmd_t v = {.type = IT_CMD_VERIFY, .off = 0, .len = 4096, .seed = 3};
        CHECK(it_target_cmd(&T, &v, ctx).a == -1);
    }
    CHECK(it_target_stop(&T, ctx) == 0);
    gw_rkey_destroy(rk[0]);
    gw_rkey_destroy(rk[1]);
    gw_ep_close(ep, 2000);
    CHECK_ST(gw_mem_dereg(lmem), GW_OK);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    free(buf);
}

/* ---- dereg_race ------------------------------------------------------------------ */
static void case_dereg_race(void)
{
    if (keys_unenforced())
        SKIP("the ofi shm provider checks no key at the target (docs/OFI.md)");
    if (getenv("IT_ALLOC"))
        SKIP("gw_mem_dereg frees a region from gw_mem_alloc: nothing left to look at");
    enum { LEN = 4u << 20, PUT = 64 * 1024, DEPTH = 8 };
    gw_context_t *ctx = it_ctx();
    it_target_t T;
    gw_ep_t *ep;
    gw_rkey_t *rk[2];
    uint64_t ra[2];
    start(&T, ctx, LEN, 2, NULL, &ep, rk, ra);
    uint8_t *buf = it_alloc(PUT);
    gwt_fill(buf, PUT, 77);
    gw_request_t *r[DEPTH] = {0};
    unsigned long posted = 0, ok = 0, failed = 0, refused = 0;
    it_cmd_t d = {.type = IT_CMD_DEREG, .region = 1};
    int asked = 0, answered = 0;
    it_reply_t rep = {0};
    double t0 = it_now(), stop = 0;
    /* the stream runs 0.3 s, then the deregistration is asked for while it
     * goes on, and it goes on 1 s after the answer */
    while (!answered || it_now() < stop) {
        for (int k = 0; k < DEPTH; k++) {
            if (r[k]) {
                gw_request_info_t ri = {.size = sizeof(ri)};
                if (gw_request_test(r[k]) == GW_INPROGRESS)
                    continue;
                gw_request_info(r[k], &ri);
                ri.status == GW_OK ? ok++ : failed++;
                if (ri.status != GW_OK && ri.status != GW_ERR_INVALID_KEY && !GW_IS_ENDPOINT_ERROR(ri.status)) {
                    fprintf(stderr, "  a put ended %s\n", gw_status_name(ri.status));
                    gwt_failures++;
                }
                gw_request_free(r[k]);
                r[k] = NULL;
            }
            uint64_t off = (posted * PUT) % LEN;
            if (gw_put(ep, buf, PUT, NULL, ra[1] + off, rk[1], &r[k]) != GW_OK) {
                r[k] = NULL;
                refused++;
            }
            posted++;
        }
        gw_progress(ctx);
        if (!asked && it_now() - t0 > 0.3) {
            REQUIRE(gwt_chan_send(&T.to_child, &d, sizeof(d)) == 0);
            asked = 1;
        }
        if (asked && !answered) {
            struct pollfd pf = {.fd = T.to_parent.rfd, .events = POLLIN};
            if (poll(&pf, 1, 0) == 1) {
                REQUIRE(gwt_chan_recv(&T.to_parent, &rep, sizeof(rep), 5000) == (int)sizeof(rep));
                answered = 1;
                stop = it_now() + 1.0;
            }
        }
        if (it_now() - t0 > 60) {
            fprintf(stderr, "  the deregistration did not answer within 60 s\n");
            gwt_failures++;
            break;
        }
    }
    CHECK_ST((gw_status_t)rep.a, GW_OK);
    uint64_t h1 = (uint64_t)rep.b; /* hashed by the target right after gw_mem_dereg returned */
    /* more puts after the first look */
    for (int k = 0; k < DEPTH; k++) {
        if (r[k])
            end_of(r[k], it_now(), NULL);
        r[k] = NULL;
        if (gw_put(ep, buf, PUT, NULL, ra[1], rk[1], &r[k]) != GW_OK)
            r[k] = NULL;
    }
    for (int k = 0; k < DEPTH; k++)
        if (r[k])
            CHECK(end_of(r[k], it_now(), NULL) != GW_OK);
    usleep(300000);
    uint64_t h2 = target_hash(&T, ctx, 1, LEN);
    fprintf(stderr, "  %lu puts posted around the deregistration: %lu ok, %lu failed, %lu refused at posting\n",
            posted, ok, failed, refused);
    if (h1 != h2) {
        fprintf(stderr, "  bytes landed in the region after gw_mem_dereg returned\n");
        gwt_failures++;
    }
    CHECK(ok > 0);
    CHECK(failed + refused > 0);
    CHECK(it_target_stop(&T, ctx) == 0);
    gw_rkey_destroy(rk[0]);
    gw_rkey_destroy(rk[1]);
    gw_ep_close(ep, 2000);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    free(buf);
}

/* A spinning target with one region of len bytes, and a registered local
 * buffer of as many (buf) beside two unregistered ones for the target's
 * bytes before and after (old, now): the batch and ring cases. */
typedef struct spin {
    gw_context_t *ctx;
    it_target_t T;
    gw_ep_t *ep;
    gw_rkey_t *rk[1];
    uint64_t ra[1];
    uint8_t *buf, *old, *now;
    gw_mem_t *lmem;
} spin_t;

static void spin_start(spin_t *S, size_t len)
{
    S->ctx = it_ctx();
    start(&S->T, S->ctx, len, 1, "IT_TARGET_SPIN=1", &S->ep, S->rk, S->ra);
    S->buf = it_alloc(len);
    S->old = it_alloc(len);
    S->now = it_alloc(len);
    IT_OK(S->ctx, gw_mem_reg(S->ctx, S->buf, len, GW_ACCESS_LOCAL, &S->lmem));
}

static void spin_end(spin_t *S)
{
    CHECK(it_target_stop(&S->T, S->ctx) == 0);
    gw_rkey_destroy(S->rk[0]);
    CHECK_ST(gw_ep_close(S->ep, 5000), GW_OK);
    CHECK_ST(gw_mem_dereg(S->lmem), GW_OK);
    CHECK_ST(gw_context_destroy(S->ctx), GW_OK);
    free(S->buf);
    free(S->old);
    free(S->now);
}

/* ---- batch ---------------------------------------------------------------------- */
/* Does the transport withdraw what it queued (verbs: nothing once posted)? */
static int withdraws(void)
{
    return !strcmp(transport(), "tcp") || !strcmp(transport(), "intra");
}

static void case_batch(void)
{
    /* 6 batches of 8 MiB: 4 KiB pages (intra: the ring, while the target
     * polls) and 64 KiB pages (intra: piecewise CMA) in turn, each page
     * into the mirror slot of its batch's 8 MiB (no two merge) */
    enum { NB = 6, BSZ = 8u << 20 };
    const size_t rlen = (size_t)NB * BSZ;
    /* (what was posted before a cancel still ends: over ofi shm, on a
     * machine with more runnable processes than cores, the provider's
     * cross-process spin locks make 4 KiB pieces crawl, so the cancel
     * watch and the waits below get a minute, not the default 10 s) */
    char opt[32];
    snprintf(opt, sizeof(opt), "%d", 6 * bound_ms());
    setenv("GPUWIRE_OP_TIMEOUT_MS", opt, 1);
    spin_t S;
    spin_start(&S, rlen);
    gw_request_t *g;
    /* two batches of small pages first, waited for: over intra the first
     * makes the ring and the second finds the target polling it, so that
     * the batches below go through its slots */
    for (int w = 0; w < 2; w++) {
        IT_OK(S.ctx, gw_xfer_pages(S.ep, GW_XFER_PUT, S.lmem, S.buf, NULL, S.rk[0], S.ra[0], NULL, 64, 4096, NULL, &g));
        CHECK_ST(end_of(g, it_now(), NULL), GW_OK);
        for (double end = it_now() + 0.02; it_now() < end;) /* (a probe that failed waits 1 ms) */
            gw_progress(S.ctx);
    }
    /* the target's bytes before */
    IT_OK(S.ctx, gw_get(S.ep, S.old, rlen, NULL, S.ra[0], S.rk[0], &g));
    CHECK_ST(end_of(g, it_now(), NULL), GW_OK);
    /* the page order: page k of batch i lands on page npg-1-k of its slot */
    static uint32_t rp[BSZ / 4096];
    for (int i = 0; i < NB; i++)
        gwt_fill(S.buf + (size_t)i * BSZ, BSZ, 900 + (uint64_t)i);
    gw_request_t *r[NB];
    gw_status_t st[NB];
    int withdrawn[NB] = {0}, wd = 0;
    /* tcp: the target, stopped, reads nothing, so that whatever the socket
     * buffers do not hold is still queued here at the cancel (a quick
     * machine otherwise moves all 48 MiB within the posting calls) */
    const int stop = !strcmp(transport(), "tcp");
    if (stop)
        REQUIRE(kill(S.T.pid, SIGSTOP) == 0);
    for (int i = 0; i < NB; i++) {
        size_t psz = i % 2 ? 64 * 1024 : 4096, npg = BSZ / psz;
        for (size_t k = 0; k < npg; k++)
            rp[k] = (uint32_t)(npg - 1 - k);
        gw_xfer_opts_t xo = {.size = sizeof(xo), .notify = GW_NOTIFY_ORDERED, .value = 1 + (uint64_t)i};
        IT_OK(S.ctx, gw_xfer_pages(S.ep, GW_XFER_PUT, S.lmem, S.buf + (size_t)i * BSZ, NULL, S.rk[0],
                                 S.ra[0] + (uint64_t)i * BSZ, rp, npg, psz, &xo, &r[i]));
    }
    /* the last posted first, a progress pass before each: the later ones
     * are withdrawn whole, the earlier ones cut short or complete */
    for (int i = NB - 1; i >= 0; i--) {
        int w = 0;
        gw_progress(S.ctx);
        cancel_checked(r[i], &w);
        withdrawn[i] = w;
        wd += w;
    }
    if (stop)
        REQUIRE(kill(S.T.pid, SIGCONT) == 0);
    double t0 = it_now();
    size_t len[NB];
    for (int i = 0; i < NB; i++) {
        gw_request_info_t ri = {.size = sizeof(ri)};
        gw_status_t w = gw_request_wait(r[i], 6 * bound_ms());
        gw_request_info(r[i], &ri);
        st[i] = w == GW_ERR_TIMEOUT ? GW_ERR_TIMEOUT : ri.status;
        len[i] = ri.length;
        if (st[i] != GW_ERR_TIMEOUT)
            gw_request_free(r[i]);
    }
    fprintf(stderr, "  batches ended %.0f ms after the cancels\n", (it_now() - t0) * 1000.0);
    gw_ep_info_t ei = {.size = sizeof(ei)};
    if (gw_ep_query(S.ep, &ei) == GW_OK) /* (intra: how many ring slots went, and were taken back) */
        fprintf(stderr, "  path: %s\n", ei.path);
    tally("batch", st, NB, wd);
    /* the target's bytes after, twice: nothing lands once all ended */
    uint64_t h1 = target_hash(&S.T, S.ctx, 0, rlen);
    usleep(300000);
    IT_OK(S.ctx, gw_get(S.ep, S.now, rlen, NULL, S.ra[0], S.rk[0], &g));
    CHECK_ST(end_of(g, it_now(), NULL), GW_OK);
    if (it_hash(S.now, rlen) != h1) {
        fprintf(stderr, "  the target's memory changed after every batch had ended\n");
        gwt_failures++;
    }
    int cut = 0;
    for (int i = 0; i < NB; i++) {
        size_t psz = i % 2 ? 64 * 1024 : 4096, npg = BSZ / psz;
        const uint8_t *o = S.old + (size_t)i * BSZ, *n = S.now + (size_t)i * BSZ;
        size_t differ = 0, foreign = 0;
        for (size_t k = 0; k < npg; k++) { /* page k of the batch sits at page npg-1-k of the slot */
            const uint8_t *src = S.buf + (size_t)i * BSZ + k * psz;
            size_t at = (npg - 1 - k) * psz;
            for (size_t b = 0; b < psz; b++) {
                differ += n[at + b] != o[at + b];
                foreign += n[at + b] != o[at + b] && n[at + b] != src[b];
            }
        }
        fprintf(stderr, "  batch %d (%zu x %zu KiB): %s%s, length %zu, %zu bytes changed at the target\n", i, npg,
                psz >> 10, gw_status_name(st[i]), withdrawn[i] ? " at the cancel" : "", len[i], differ);
        if (foreign) {
            fprintf(stderr, "  batch %d: %zu bytes at the target are neither the S.old ones nor the batch's\n", i,
                    foreign);
            gwt_failures++;
        }
        if (st[i] == GW_OK) {
            for (size_t k = 0; k < npg; k++)
                if (memcmp(n + (npg - 1 - k) * psz, S.buf + (size_t)i * BSZ + k * psz, psz) != 0) {
                    fprintf(stderr, "  batch %d completed GW_OK without page %zu in place\n", i, k);
                    gwt_failures++;
                    break;
                }
        } else if (withdrawn[i] && differ) {
            fprintf(stderr, "  batch %d was withdrawn at the cancel, yet %zu bytes of it landed\n", i, differ);
            gwt_failures++;
        } else if (st[i] == GW_ERR_CANCELED && differ > len[i]) {
            fprintf(stderr, "  batch %d was cut short after %zu bytes (its length), yet %zu bytes changed\n", i,
                    len[i], differ);
            gwt_failures++;
        }
        cut += st[i] == GW_ERR_CANCELED;
    }
    if (withdraws() && cut == 0) {
        fprintf(stderr, "  no batch was withdrawn or cut short: the cancel reached none of them\n");
        gwt_failures++;
    }
    /* notifications: exactly those of the completed batches */
    int seen[NB] = {0}, extra = 0;
    for (;;) {
        it_cmd_t c = {.type = IT_CMD_NOTIFY_ANY, .off = 500};
        it_reply_t rep = it_target_cmd(&S.T, &c, S.ctx);
        if (rep.a != GW_OK)
            break;
        if (rep.b >= 1 && rep.b <= NB)
            seen[rep.b - 1]++;
        else
            extra++;
    }
    for (int i = 0; i < NB; i++)
        if (seen[i] != (st[i] == GW_OK)) {
            fprintf(stderr, "  batch %d ended %s and the target saw its notification %d times\n", i,
                    gw_status_name(st[i]), seen[i]);
            gwt_failures++;
        }
    CHECK(extra == 0);
    spin_end(&S);
}

/* ---- ring ----------------------------------------------------------------------- */
/* How many ring slots the endpoint offered so far (its path says "ring
 * slots N out (M taken back), K in" once it used the ring) */
static unsigned long ring_copies(gw_ep_t *ep)
{
    gw_ep_info_t ei = {.size = sizeof(ei)};
    if (gw_ep_query(ep, &ei) != GW_OK)
        return 0;
    const char *p = strstr(ei.path, "ring slots ");
    return p ? strtoul(p + strlen("ring slots "), NULL, 10) : 0;
}

/* Stops pid and waits (bounded) until the kernel shows it stopped: a
 * SIGSTOP takes effect asynchronously, and a target still running on the
 * other core for a moment could claim the slots posted next. */
static void stop_target(pid_t pid)
{
    REQUIRE(kill(pid, SIGSTOP) == 0);
    char path[64], buf[256];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    for (double end = it_now() + 5.0; it_now() < end; usleep(200)) {
        FILE *f = fopen(path, "r");
        size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
        if (f)
            fclose(f);
        buf[n] = 0;
        const char *p = strrchr(buf, ')'); /* "pid (comm) S ..." */
        if (p && p[1] == ' ' && p[2] == 'T')
            return;
    }
    fprintf(stderr, "  the target (pid %d) did not show as stopped within 5 s\n", (int)pid);
    gwt_failures++;
}

static void case_ring(void)
{
    /* intra only: a batch of small pages offered through the shared ring
     * to a target that stopped after it took the ring's earlier offers.
     * The slots it never claimed are taken back at the cancel (POSTED ->
     * FREE), so the batch ends GW_ERR_CANCELED at once and none of it
     * lands, even after the target runs again. */
    if (strcmp(transport(), "intra") != 0)
        SKIP("the shared ring is intra's (GPUWIRE_TRANSPORTS=%s)", transport());
    enum { NPG = 256, PSZ = 4096, RLEN = 2 * NPG * PSZ };
    /* (an offer not taken within the wait is moved by CMA instead: a
     * second, so that the cancel below finds the slots still offered) */
    setenv("GPUWIRE_INTRA_RING_WAIT_US", "1000000", 1);
    spin_t S;
    spin_start(&S, RLEN);
    gw_request_t *g;
    /* page k lands on page NPG-1-k of its half: no two pages merge into
     * one copy */
    static uint32_t rp[NPG];
    for (uint32_t k = 0; k < NPG; k++)
        rp[k] = NPG - 1 - k;
    /* warm-up batches into the first half until one went through the ring:
     * the initiator offers only to a target whose heartbeat it saw move
     * within a few microseconds, which a busy machine may deny for a while */
    double until = it_now() + 20.0 * it_time_scale();
    while (ring_copies(S.ep) == 0 && it_now() < until) {
        IT_OK(S.ctx, gw_xfer_pages(S.ep, GW_XFER_PUT, S.lmem, S.buf, NULL, S.rk[0], S.ra[0], rp + NPG - 16, 16, PSZ,
                                   NULL, &g));
        CHECK_ST(end_of(g, it_now(), NULL), GW_OK);
        for (double end = it_now() + 0.002; it_now() < end;)
            gw_progress(S.ctx);
    }
    unsigned long before = ring_copies(S.ep);
    if (before == 0) {
        it_target_stop(&S.T, S.ctx);
        SKIP("no batch went through the shared ring in 20 s: the target never answered the "
             "initiator's heartbeat probe on this machine (too busy)");
    }
    IT_OK(S.ctx, gw_get(S.ep, S.old, RLEN, NULL, S.ra[0], S.rk[0], &g));
    CHECK_ST(end_of(g, it_now(), NULL), GW_OK);
    /* the batch: 256 x 4 KiB into the second half, the target stopped */
    gwt_fill(S.buf + RLEN / 2, RLEN / 2, 4242);
    stop_target(S.T.pid);
    gw_request_t *r;
    IT_OK(S.ctx, gw_xfer_pages(S.ep, GW_XFER_PUT, S.lmem, S.buf + RLEN / 2, NULL, S.rk[0], S.ra[0] + RLEN / 2, rp,
                               NPG, PSZ, NULL, &r));
    int w = 0;
    cancel_checked(r, &w);
    gw_request_info_t ri = {.size = sizeof(ri)};
    gw_status_t st = gw_request_wait(r, bound_ms());
    gw_request_info(r, &ri);
    REQUIRE(kill(S.T.pid, SIGCONT) == 0);
    gw_ep_info_t ei = {.size = sizeof(ei)};
    gw_ep_query(S.ep, &ei);
    fprintf(stderr, "  path: %s\n", ei.path);
    fprintf(stderr, "  %lu ring slots offered before; the batch of %d x %d KiB ended %s%s, length %zu\n",
            before, NPG, PSZ >> 10, gw_status_name(ri.status), w ? " at the cancel" : "",
            (size_t)ri.length);
    CHECK_ST(st, GW_ERR_CANCELED);
    CHECK_ST(ri.status, GW_ERR_CANCELED);
    CHECK(w == 1);
    CHECK(ri.length == 0);
    const char *back = strstr(ei.path, " taken back)");
    while (back && back > ei.path && back[-1] >= '0' && back[-1] <= '9')
        back--;
    if (!back || strtoul(back, NULL, 10) == 0) {
        fprintf(stderr, "  the endpoint counts no ring slot taken back at the cancel\n");
        gwt_failures++;
    }
    if (st != GW_ERR_TIMEOUT)
        gw_request_free(r);
    /* the target runs again, polls its ring and finds nothing there: its
     * memory is what it was */
    for (double end = it_now() + 0.3; it_now() < end;)
        gw_progress(S.ctx);
    IT_OK(S.ctx, gw_get(S.ep, S.now, RLEN, NULL, S.ra[0], S.rk[0], &g));
    CHECK_ST(end_of(g, it_now(), NULL), GW_OK);
    size_t differ = 0;
    for (size_t i = RLEN / 2; i < RLEN; i++)
        differ += S.now[i] != S.old[i];
    if (differ) {
        fprintf(stderr, "  %zu bytes of the canceled batch landed at the target\n", differ);
        gwt_failures++;
    }
    /* and the ring still works: a batch after the cancel lands whole */
    IT_OK(S.ctx, gw_xfer_pages(S.ep, GW_XFER_PUT, S.lmem, S.buf + RLEN / 2, NULL, S.rk[0], S.ra[0] + RLEN / 2, rp,
                               NPG, PSZ, NULL, &g));
    CHECK_ST(end_of(g, it_now(), NULL), GW_OK);
    IT_OK(S.ctx, gw_get(S.ep, S.now, RLEN, NULL, S.ra[0], S.rk[0], &g));
    CHECK_ST(end_of(g, it_now(), NULL), GW_OK);
    for (uint32_t k = 0; k < NPG; k++)
        CHECK(memcmp(S.now + RLEN / 2 + (size_t)(NPG - 1 - k) * PSZ, S.buf + RLEN / 2 + (size_t)k * PSZ, PSZ) == 0);
    spin_end(&S);
}

/* ---- rndv ----------------------------------------------------------------------- */
static void case_rndv(void)
{
    /* eager sends of 4 KiB (under every transport's eager limit) fill the
     * stopped target's socket buffers; the rendezvous send of 1 MiB queues
     * behind them */
    enum { NE = 4096, ESZ = 4096, RSZ = 1u << 20, NCANCEL = 16 };
    const uint64_t RTAG = 0x7777, MARK = 0x9999;
    /* (a send not withdrawn waits for the receive at the end: the cancel
     * watch must not fail the endpoint meanwhile) */
    setenv("GPUWIRE_OP_TIMEOUT_MS", "120000", 1);
    gw_context_t *ctx = it_ctx();
    it_target_t T;
    gw_ep_t *ep;
    gw_rkey_t *rk[1];
    uint64_t ra[1];
    start(&T, ctx, RSZ, 1, "GPUWIRE_PEER_TIMEOUT_MS=60000", &ep, rk, ra);
    uint8_t *ebuf = it_alloc(ESZ), *rbuf = it_alloc(RSZ);
    gwt_fill(ebuf, ESZ, 11);
    gwt_fill(rbuf, RSZ, 12);
    gw_mem_t *emem, *rmem;
    IT_OK(ctx, gw_mem_reg(ctx, ebuf, ESZ, GW_ACCESS_LOCAL, &emem));
    IT_OK(ctx, gw_mem_reg(ctx, rbuf, RSZ, GW_ACCESS_LOCAL | GW_ACCESS_REMOTE_READ, &rmem));
    REQUIRE(kill(T.pid, SIGSTOP) == 0);
    static gw_request_t *e[NE];
    static gw_status_t est[NE];
    for (int i = 0; i < NE; i++)
        IT_OK(ctx, gw_send(ep, ebuf, ESZ, emem, 1 + (uint64_t)i, &e[i]));
    gw_request_t *rv;
    IT_OK(ctx, gw_send(ep, rbuf, RSZ, rmem, RTAG, &rv));
    for (double end = it_now() + 0.05; it_now() < end;)
        gw_progress(ctx);
    int rw = 0, ew = 0;
    cancel_checked(rv, &rw);
    for (int i = NE - NCANCEL; i < NE; i++)
        cancel_checked(e[i], &ew);
    fprintf(stderr, "  rendezvous send %s at the cancel; %d of the last %d eager sends withdrawn\n",
            rw ? "withdrawn" : "not withdrawn", ew, NCANCEL);
    if (withdraws() && !rw) {
        fprintf(stderr, "  the rendezvous send queued behind %d unread messages was not withdrawn\n", NE);
        gwt_failures++;
    }
    REQUIRE(kill(T.pid, SIGCONT) == 0);
    double t0 = it_now();
    int eok = 0;
    for (int i = 0; i < NE; i++) {
        est[i] = end_of(e[i], t0, NULL);
        eok += est[i] == GW_OK;
    }
    for (int i = 0; i < NE; i++)
        if (est[i] != GW_OK && est[i] != GW_ERR_CANCELED) {
            fprintf(stderr, "  eager send #%d ended %s\n", i, gw_status_name(est[i]));
            gwt_failures++;
        }
    /* a marker behind everything; the rendezvous send, if it was not
     * withdrawn, completes once the target's receive below pulls it */
    gw_request_t *m;
    IT_OK(ctx, gw_send(ep, ebuf, 64, emem, MARK, &m));
    /* the target takes every message up to the marker, in arrival order */
    int got = 0, next = 0, rgot = 0, bad = 0;
    for (;;) {
        it_cmd_t c = {.type = IT_CMD_RECV, .len = RSZ, .tag = 0, .mask = 0, .seed = 11};
        it_reply_t rep = it_target_cmd(&T, &c, ctx);
        if (rep.a != GW_OK) {
            fprintf(stderr, "  the target's receive ended %s before the marker\n", gw_status_name((gw_status_t)rep.a));
            gwt_failures++;
            break;
        }
        uint64_t tag = (uint64_t)rep.c;
        if (tag == MARK)
            break;
        if (tag == RTAG) {
            rgot++;
            continue;
        }
        got++;
        /* the next eager send that completed GW_OK */
        while (next < NE && est[next] != GW_OK)
            next++;
        if (next >= NE || tag != 1 + (uint64_t)next || rep.b != ESZ || rep.d != -1)
            bad++;
        next++;
    }
    if (!rgot && gw_request_test(rv) == GW_INPROGRESS) {
        /* not withdrawn, and its announcement is not ordered with the
         * eager messages (verbs): a receive of its own takes it */
        it_cmd_t c = {.type = IT_CMD_RECV, .len = RSZ, .tag = RTAG, .mask = ~0ull, .seed = 12};
        it_reply_t rep = it_target_cmd(&T, &c, ctx);
        if (rep.a == GW_OK) {
            rgot++;
            CHECK(rep.b == RSZ && rep.d == -1);
        }
    }
    gw_status_t rst = end_of(rv, t0, NULL);
    CHECK_ST(end_of(m, it_now(), NULL), GW_OK);
    fprintf(stderr, "  rendezvous send %s; %d of %d eager sends ok\n", gw_status_name(rst), eok, NE);
    CHECK(rst == GW_OK || rst == GW_ERR_CANCELED);
    fprintf(stderr, "  the target received %d eager messages and %d rendezvous ones before the marker\n", got, rgot);
    CHECK(got == eok);
    CHECK(bad == 0);
    CHECK(rgot == (rst == GW_OK));
    CHECK(it_target_stop(&T, ctx) == 0);
    gw_rkey_destroy(rk[0]);
    CHECK_ST(gw_ep_close(ep, 5000), GW_OK);
    CHECK_ST(gw_mem_dereg(emem), GW_OK);
    CHECK_ST(gw_mem_dereg(rmem), GW_OK);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    free(ebuf);
    free(rbuf);
}

static const gwt_case_t cases[] = {GWT_CASE(ops), GWT_CASE(frozen), GWT_CASE(killed), GWT_CASE(revoked),
                                   GWT_CASE(dereg_race), GWT_CASE(batch), GWT_CASE(rndv),
                                   GWT_CASE(ring)};

int main(int argc, char **argv)
{
    return GWT_MAIN(argc, argv, cases);
}
