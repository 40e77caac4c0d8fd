/* SPDX-License-Identifier: Apache-2.0 */
/* it_peer_fail.c - a peer that dies, freezes or disconnects mid-transfer
 * fails every outstanding request on that endpoint within a bounded time
 * (GPUWIRE_PEER_TIMEOUT_MS for a silent peer), never a hang, never a crash;
 * the failed endpoint refuses new work, reports its first error, closes
 * cleanly, and the context can be destroyed.
 *   A. the target is killed (SIGKILL) while 1 GiB of puts and gets is in flight
 *   B. the target is frozen (SIGSTOP): outstanding gets/puts fail with
 *      GW_ERR_PEER_TIMEOUT after GPUWIRE_PEER_TIMEOUT_MS
 *   C. the target closes its endpoint while our receive and gets wait
 *   D. we are the listener side and the connecting peer is killed while our
 *      rendezvous send and receive wait
 * and the converse, a healthy peer is never declared dead:
 *   E. an endpoint left idle for longer than GPUWIRE_PEER_TIMEOUT_MS, then used,
 *      once while progressing and once while not calling gpuwire at all (an
 *      application computing for a while)
 *   F. one put that takes longer than GPUWIRE_PEER_TIMEOUT_MS (the target
 *      has nothing to say until it is complete) */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "it.h"

#define CHUNK (4u << 20)
#define NPUT 256
#define NGET 32
#define TREGION (64u << 20)

typedef struct wait_result {
    int ok, failed, other;
    gw_status_t first;
    double last_s; /* seconds from t0 until the last request completed */
} wait_result_t;

/* Waits for every request (freeing them); classifies their outcomes. */
/* each request's outcome in the last wait_all, by index */
static gw_status_t g_st[NPUT + NGET + 2];

static wait_result_t wait_all(gw_request_t **r, int n, double t0, int limit_ms)
{
    wait_result_t w = {0, 0, 0, GW_OK, 0};
    for (int i = 0; i < n; i++) {
        gw_status_t st = gw_request_wait(r[i], limit_ms);
        if (i < (int)(sizeof(g_st) / sizeof(g_st[0])))
            g_st[i] = st;
        if (st == GW_ERR_TIMEOUT) {
            fprintf(stderr, "request %d still in progress after %d ms: a hang\n", i, limit_ms);
            gwt_failures++;
        }
        gw_request_free(r[i]);
        if (st == GW_OK)
            w.ok++;
        else if (GW_IS_ENDPOINT_ERROR(st) || st == GW_ERR_CANCELED) {
            w.failed++;
            if (w.first == GW_OK)
                w.first = st;
        } else {
            w.other++;
            fprintf(stderr, "request %d failed with %s, not an endpoint error\n", i, gw_status_name(st));
        }
    }
    w.last_s = it_now() - t0;
    return w;
}

static void check_failed_ep(gw_context_t *ctx, gw_ep_t *ep, gw_rkey_t *rk, uint64_t raddr,
                            gw_status_t want_first)
{
    gw_ep_info_t info = {.size = sizeof(info)};
    IT_OK(ctx, gw_ep_query(ep, &info));
    fprintf(stderr, "  endpoint error: %s; last error: %s\n", gw_status_name(info.error),
            gw_last_error(ctx));
    if (want_first != GW_OK)
        CHECK_ST(info.error, want_first);
    CHECK(GW_IS_ENDPOINT_ERROR(info.error));
    /* new work is refused at once */
    uint8_t b[8] = {0};
    gw_request_t *r = NULL;
    gw_status_t st = rk ? gw_put(ep, b, 8, NULL, raddr, rk, &r) : gw_send(ep, b, 8, NULL, 1, &r);
    if (st == GW_OK) {
        st = gw_request_wait(r, 2000);
        gw_request_free(r);
    }
    CHECK(GW_IS_ENDPOINT_ERROR(st));
    st = gw_flush(ep, &r);
    if (st == GW_OK) {
        st = gw_request_wait(r, 2000);
        gw_request_free(r);
    }
    CHECK(GW_IS_ENDPOINT_ERROR(st));
}

static gw_context_t *ctx_timeout(const char *ms)
{
    setenv("GPUWIRE_PEER_TIMEOUT_MS", ms, 1);
    gw_context_t *ctx = it_ctx();
    unsetenv("GPUWIRE_PEER_TIMEOUT_MS");
    return ctx;
}

static const char *g_target_env; /* e.g. "GPUWIRE_PEER_TIMEOUT_MS=1000" for the target too */

static void connect_target(it_target_t *T, gw_context_t *ctx, gw_ep_t **ep, gw_rkey_t **rk,
                           uint64_t *raddr, size_t len)
{
    it_target_cfg_t cfg = {.n_eps = 1, .n_regions = 1,
                           .region = {{len, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, 0}},
                           .env = {g_target_env}};
    char addr[128];
    it_target_start(T, &cfg, addr, sizeof(addr));
    *ep = it_connect(ctx, addr);
    uint8_t keys[1][IT_KEY_MAX];
    size_t klen[1];
    REQUIRE(it_target_keys(T, keys, klen) == 0);
    IT_OK(ctx, gw_rkey_unpack(*ep, keys[0], klen[0], rk));
    size_t l;
    IT_OK(ctx, gw_rkey_range(*rk, raddr, &l));
}

static void finish(gw_context_t *ctx, gw_ep_t *ep, gw_rkey_t *rk)
{
    gw_rkey_destroy(rk);
    double t0 = it_now();
    CHECK_ST(gw_ep_close(ep, 2000), GW_OK);
    CHECK(it_now() - t0 < 3);
    IT_OK(ctx, gw_context_destroy(ctx));
}

static void case_killed(uint8_t *src, uint8_t *dst)
{
    fprintf(stderr, "A. target killed mid-transfer\n");
    gw_context_t *ctx = ctx_timeout("10000"); /* the reset, not the timeout, must end it */
    it_target_t T;
    gw_ep_t *ep;
    gw_rkey_t *rk;
    uint64_t ra;
    connect_target(&T, ctx, &ep, &rk, &ra, TREGION);
    static gw_request_t *r[NPUT + NGET + 2];
    int n = 0;
    for (int i = 0; i < NPUT; i++) {
        IT_OK(ctx, gw_put(ep, src, CHUNK, NULL, ra + (uint64_t)(i % 16) * CHUNK, rk, &r[n++]));
        if (i < NGET)
            IT_OK(ctx, gw_get(ep, dst + (size_t)i * CHUNK / 4, CHUNK / 4, NULL, ra, rk, &r[n++]));
    }
    int ri = n, fi = n + 1;
    IT_OK(ctx, gw_recv(ep, dst, 64, NULL, 42, ~0ull, &r[n++])); /* never sent */
    IT_OK(ctx, gw_flush(ep, &r[n++]));
    double t0 = it_now();
    while (it_now() - t0 < 0.05)
        gw_progress(ctx);
    kill(T.pid, SIGKILL);
    t0 = it_now();
    wait_result_t w = wait_all(r, n, t0, 15000);
    fprintf(stderr, "  %d completed before the kill, %d failed (first %s), last after %.2f s\n", w.ok,
            w.failed, gw_status_name(w.first), w.last_s);
    CHECK(GW_IS_ENDPOINT_ERROR(g_st[ri])); /* the receive: nothing was sent */
    /* the flush covers the puts and gets before it (not the receive): it
     * fails unless every one of them completed before the kill */
    int all_rma_ok = 1;
    for (int i = 0; i < ri; i++)
        all_rma_ok &= g_st[i] == GW_OK;
    CHECK(GW_IS_ENDPOINT_ERROR(g_st[fi]) || (all_rma_ok && g_st[fi] == GW_OK));
    CHECK(w.other == 0);
    CHECK(w.last_s < 3.0);
    check_failed_ep(ctx, ep, rk, ra, GW_OK);
    CHECK(gwt_wait(T.pid, 5) == 128 + SIGKILL);
    close(T.to_child.wfd);
    close(T.to_parent.rfd);
    finish(ctx, ep, rk);
}

static void case_frozen(uint8_t *src, uint8_t *dst)
{
    fprintf(stderr, "B. target frozen (SIGSTOP), GPUWIRE_PEER_TIMEOUT_MS=1500\n");
    gw_context_t *ctx = ctx_timeout("1500");
    it_target_t T;
    gw_ep_t *ep;
    gw_rkey_t *rk;
    uint64_t ra;
    connect_target(&T, ctx, &ep, &rk, &ra, TREGION);
    double t_stop = it_now(); /* the peer's last word came before this */
    kill(T.pid, SIGSTOP);
    gw_request_t *r[64];
    int n = 0;
    for (int i = 0; i < 16; i++) {
        IT_OK(ctx, gw_get(ep, dst + (size_t)i * (1u << 20), 1u << 20, NULL, ra, rk, &r[n++]));
        IT_OK(ctx, gw_put(ep, src, CHUNK, NULL, ra + (uint64_t)i * CHUNK, rk, &r[n++]));
    }
    IT_OK(ctx, gw_flush(ep, &r[n++]));
    wait_result_t w = wait_all(r, n, t_stop, 15000);
    fprintf(stderr, "  %d completed, %d failed (first %s) %.2f s after the peer froze\n", w.ok,
            w.failed, gw_status_name(w.first), w.last_s);
    CHECK(w.failed == n && w.ok == 0);
    CHECK_ST(w.first, GW_ERR_PEER_TIMEOUT);
    /* the clock runs from the peer's last message (before the freeze): at most
     * the timeout after the freeze, plus slack for a loaded machine */
    CHECK(w.last_s < 1.5 + 2.5);
    check_failed_ep(ctx, ep, rk, ra, GW_ERR_PEER_TIMEOUT);
    kill(T.pid, SIGKILL);
    kill(T.pid, SIGCONT);
    gwt_wait(T.pid, 5);
    close(T.to_child.wfd);
    close(T.to_parent.rfd);
    finish(ctx, ep, rk);
}

static void case_closed(uint8_t *dst)
{
    fprintf(stderr, "C. target closes its endpoint while we wait\n");
    gw_context_t *ctx = ctx_timeout("10000");
    it_target_t T;
    gw_ep_t *ep;
    gw_rkey_t *rk;
    uint64_t ra;
    connect_target(&T, ctx, &ep, &rk, &ra, 1u << 20);
    gw_request_t *r[4];
    IT_OK(ctx, gw_recv(ep, dst, 64, NULL, 42, ~0ull, &r[0]));
    IT_OK(ctx, gw_send(ep, dst, 8u << 20, NULL, 43, &r[1])); /* rendezvous: never received */
    it_cmd_t c = {.type = IT_CMD_CLOSE_EP, .ep = 0};
    double t0 = it_now();
    it_reply_t rep = it_target_cmd(&T, &c, ctx);
    CHECK_ST((gw_status_t)rep.a, GW_OK);
    wait_result_t w = wait_all(r, 2, t0, 15000);
    fprintf(stderr, "  %d failed (first %s) after %.2f s\n", w.failed, gw_status_name(w.first), w.last_s);
    CHECK(w.failed == 2);
    CHECK(w.last_s < 3.0);
    check_failed_ep(ctx, ep, rk, ra, GW_OK);
    CHECK(it_target_stop(&T, ctx) == 0);
    finish(ctx, ep, rk);
}

/* The target's last message completes at its side, then the target dies
 * before we progress at all: when we do, the message and the closed
 * connection are both waiting.  The receive gets the message; only then
 * does the endpoint fail. */
static void case_last_words(uint8_t *dst)
{
    fprintf(stderr, "C2. target sends, then dies before we progress\n");
    gw_context_t *ctx = ctx_timeout("10000");
    it_target_t T;
    gw_ep_t *ep;
    gw_rkey_t *rk;
    uint64_t ra;
    connect_target(&T, ctx, &ep, &rk, &ra, 1u << 20);
    gw_request_t *r;
    memset(dst, 0, 256);
    IT_OK(ctx, gw_recv(ep, dst, 256, NULL, 44, ~0ull, &r));
    it_cmd_t c = {.type = IT_CMD_SEND, .ep = 0, .region = 0, .len = 200, .tag = 44, .seed = 17};
    it_reply_t rep = it_target_cmd(&T, &c, NULL); /* no progress here while it sends */
    CHECK_ST((gw_status_t)rep.a, GW_OK);
    kill(T.pid, SIGKILL);
    CHECK(gwt_wait(T.pid, 5) == 128 + SIGKILL);
    usleep(200 * 1000); /* the close reaches us too */
    double t0 = it_now();
    gw_status_t st = GW_ERR_TIMEOUT;
    while (it_now() - t0 < 10 && (st = gw_request_test(r)) == GW_INPROGRESS)
        gw_progress(ctx);
    fprintf(stderr, "  the last message: %s (%s)\n", gw_status_name(st), st == GW_OK ? "" : gw_last_error(ctx));
    CHECK_ST(st, GW_OK);
    gw_request_info_t ri = {.size = sizeof(ri)};
    gw_request_info(r, &ri);
    CHECK(ri.length == 200);
    CHECK(gwt_verify(dst, 200, 17) == -1);
    gw_request_free(r);
    gw_ep_info_t info = {.size = sizeof(info)};
    t0 = it_now();
    do {
        gw_progress(ctx);
        gw_ep_query(ep, &info);
    } while (info.error == GW_OK && it_now() - t0 < 5);
    fprintf(stderr, "  then the endpoint: %s after %.2f s\n", gw_status_name(info.error), it_now() - t0);
    CHECK(info.error != GW_OK);
    close(T.to_child.wfd);
    close(T.to_parent.rfd);
    finish(ctx, ep, rk);
}

static gwt_chan_t g_pc, g_cc;
static int idle_initiator(void *arg)
{
    (void)arg;
    char addr[128];
    REQUIRE(gwt_chan_recv(&g_cc, addr, sizeof(addr), 10000) > 0);
    gw_context_t *ctx = it_ctx();
    gw_ep_t *ep = it_connect(ctx, addr);
    (void)ep;
    gwt_chan_send(&g_cc, "r", 1);
    for (;;) { /* progresses (acks, keepalives) but never receives */
        gw_progress(ctx);
        gw_context_wait(ctx, 10);
    }
    return 0;
}

static void case_listener_side(uint8_t *dst)
{
    fprintf(stderr, "D. the connecting peer is killed while our send and receive wait\n");
    gw_context_t *ctx = ctx_timeout("10000");
    gw_listener_t *l = NULL;
    IT_OK(ctx, gw_listen(ctx, "127.0.0.1:0", &l));
    char addr[128];
    IT_OK(ctx, gw_listener_addr(l, addr, sizeof(addr)));
    REQUIRE(gwt_chan_pair(&g_pc, &g_cc) == 0);
    int pid = gwt_spawn(idle_initiator, NULL);
    gwt_chan_send(&g_pc, addr, (uint32_t)strlen(addr) + 1);
    gw_ep_t *ep = NULL;
    IT_OK(ctx, gw_accept(l, 10000, &ep));
    char c;
    REQUIRE(gwt_chan_recv(&g_pc, &c, 1, 10000) == 1);
    gw_request_t *r[2];
    IT_OK(ctx, gw_recv(ep, dst, 64, NULL, 1, ~0ull, &r[0]));
    IT_OK(ctx, gw_send(ep, dst, 8u << 20, NULL, 2, &r[1]));
    double t0 = it_now();
    while (it_now() - t0 < 0.05)
        gw_progress(ctx);
    kill(pid, SIGKILL);
    t0 = it_now();
    wait_result_t w = wait_all(r, 2, t0, 15000);
    fprintf(stderr, "  %d failed (first %s) after %.2f s\n", w.failed, gw_status_name(w.first), w.last_s);
    CHECK(w.failed == 2);
    CHECK(w.last_s < 3.0);
    check_failed_ep(ctx, ep, NULL, 0, GW_OK);
    gwt_wait(pid, 5);
    CHECK_ST(gw_ep_close(ep, 2000), GW_OK);
    gw_listener_destroy(l);
    IT_OK(ctx, gw_context_destroy(ctx));
}

static void case_idle_then_busy(int progress)
{
    fprintf(stderr, "E. idle for 1.5 s %s, GPUWIRE_PEER_TIMEOUT_MS=1000 on both sides, then used\n",
            progress ? "progressing" : "without calling gpuwire");
    g_target_env = "GPUWIRE_PEER_TIMEOUT_MS=1000";
    gw_context_t *ctx = ctx_timeout("1000");
    it_target_t T;
    gw_ep_t *ep;
    gw_rkey_t *rk;
    uint64_t ra;
    connect_target(&T, ctx, &ep, &rk, &ra, 16u << 20);
    double t0 = it_now();
    while (it_now() - t0 < 1.5) { /* nothing outstanding */
        if (progress) {
            gw_progress(ctx);
            gw_context_wait(ctx, 10);
        } else {
            usleep(10000);
        }
    }
    uint8_t *b = it_alloc(16u << 20);
    gwt_fill(b, 16u << 20, 77);
    gw_request_t *r[2];
    IT_OK(ctx, gw_put(ep, b, 16u << 20, NULL, ra, rk, &r[0]));
    IT_OK(ctx, gw_get(ep, b, 4096, NULL, ra, rk, &r[1]));
    gw_status_t s0 = it_wait_free(r[0], 10000), s1 = it_wait_free(r[1], 10000);
    fprintf(stderr, "  put %s, get %s (%s)\n", gw_status_name(s0), gw_status_name(s1), gw_last_error(ctx));
    CHECK_ST(s0, GW_OK);
    CHECK_ST(s1, GW_OK);
    CHECK(it_target_stop(&T, ctx) == 0);
    g_target_env = NULL;
    free(b);
    finish(ctx, ep, rk);
}

static void case_long_put(void)
{
    enum { LEN = 512u << 20 };
    /* 1500 ms (as case B): a process starved of CPU for longer than the timeout is
     * rightly declared dead (docs/DESIGN.md, Peer liveness), and a loaded
     * 2-core machine showed gaps of 500-660 ms without a byte moving, which
     * a side that counted its own PINGs as signs of life would hide */
    fprintf(stderr, "F. one put of 512 MiB with GPUWIRE_PEER_TIMEOUT_MS=1500 on both sides\n");
    g_target_env = "GPUWIRE_PEER_TIMEOUT_MS=1500";
    gw_context_t *ctx = ctx_timeout("1500");
    it_target_t T;
    gw_ep_t *ep;
    gw_rkey_t *rk;
    uint64_t ra;
    connect_target(&T, ctx, &ep, &rk, &ra, LEN);
    uint8_t *b = it_alloc(LEN);
    gw_request_t *r;
    double t0 = it_now();
    IT_OK(ctx, gw_put(ep, b, LEN, NULL, ra, rk, &r));
    gw_status_t st = it_wait_free(r, 20000);
    double took = it_now() - t0;
    fprintf(stderr, "  put %s after %.2f s (%s)%s\n", gw_status_name(st), took, gw_last_error(ctx),
            took < 1.5 ? "; faster than the timeout: the case proved nothing" : "");
    CHECK_ST(st, GW_OK);
    CHECK(it_target_stop(&T, ctx) == 0);
    g_target_env = NULL;
    free(b);
    finish(ctx, ep, rk);
}

/* With arguments, only the cases named (the verbs guest suite runs
 * "last_words" alone: the others are long and tcp-timed). */
static int g_argc;
static char **g_argv;
static int want(const char *name)
{
    if (g_argc < 2)
        return 1;
    for (int i = 1; i < g_argc; i++)
        if (strcmp(g_argv[i], name) == 0)
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    g_argc = argc;
    g_argv = argv;
    signal(SIGPIPE, SIG_IGN);
    uint8_t *src = it_alloc(CHUNK), *dst = it_alloc(NGET * CHUNK);
    gwt_fill(src, CHUNK, 3);
    double t0 = it_now();
    if (want("killed"))
        case_killed(src, dst);
    if (want("frozen"))
        case_frozen(src, dst);
    if (want("closed"))
        case_closed(dst);
    if (want("last_words"))
        case_last_words(dst);
    if (want("listener_side"))
        case_listener_side(dst);
    if (want("idle_then_busy")) {
        case_idle_then_busy(1);
        case_idle_then_busy(0);
    }
    if (want("long_put"))
        case_long_put();
    fprintf(stderr, "all cases in %.1f s\n", it_now() - t0);
    free(src);
    free(dst);
    return gwt_done("it_peer_fail");
}
