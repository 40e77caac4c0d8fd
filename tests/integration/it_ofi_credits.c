/* SPDX-License-Identifier: Apache-2.0 */
/* it_ofi_credits.c - flow control of the ofi transport's header-path
 * messages (credits, ofi_wire.h), run over ofi's tcp and shm providers
 * with the header path (GPUWIRE_OFI_TAGGED off).  Each case checks that
 * both endpoints say what they agreed (gw_ep_query's path counts credit
 * waits and CREDIT messages where credits are on).
 *
 *   stream_late  the peer sends 12,000 messages of 8 to 4,000 bytes on one
 *                tag, most without a request, while this side progresses
 *                but posts no receive (each lands in gpuwire's store of
 *                unexpected messages); then this side receives them all:
 *                each whole and in sending order.  The sender waited for
 *                credits (it outran the 56 it starts with) and this side,
 *                which sends nothing back, returned them by CREDIT messages.
 *   one_way      6,000 messages of 256 bytes one way into receives posted
 *                ahead, 64 at a time, nothing sent back: it completes (the
 *                credits come back without a header to carry them).
 *   both_ways    both sides submit 5,000 sends to each other before either
 *                posts a receive, then receive them all: no deadlock, every
 *                message whole and in order on each side.
 *   mixed        the peer sends 1,000 messages of 8, 200, 16,336 (the
 *                largest sent whole), 16,337 and 50,000 bytes (rendezvous)
 *                in turn, an active message and a put with a notification
 *                after every fifth, while this side progresses late; then
 *                every message arrives whole and in order, every active
 *                message once and in order, every notification in order.
 *   no_credits   the peer runs with GPUWIRE_OFI_CREDITS=off (as a peer
 *                without credits would): neither side counts credits (no
 *                credit counters in either path), and streams of 3,000
 *                messages each way still arrive whole and in order.
 *   lie          this side's first header returns 64 credits, never spent
 *                (test hook GW_TEST_OFI_CREDIT_LIE): the peer fails the
 *                endpoint with GW_ERR_PROTOCOL, saying how many came back
 *                and how many it held.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"
#include "core/util.h"
#include "gpuwire.h"
#include "harness.h"
#include "transport/base/ep_base.h"
#include "transport/base/tl.h"

#define TAG 21
#define TAG_BACK 22
#define TAG_KEY 23
#define AM_ID 1
#define EAGER_MAX (16384 - 48) /* the largest message the header path sends whole (ofi.h GW_OFI_EAGER_MAX) */

static gwt_chan_t g_pc, g_cc; /* parent's end, child's end */

/* ---- common ---- */
/* The number before `what` in ep's path ("12 credit waits"), -1 if absent. */
static long long path_count(gw_ep_t *ep, const char *what, char *path, size_t cap)
{
    gw_ep_info_t info = {.size = sizeof(info)};
    if (gw_ep_query(ep, &info) != GW_OK)
        return -1;
    snprintf(path, cap, "%s", info.path);
    const char *p = strstr(info.path, what);
    if (!p || p == info.path)
        return -1;
    while (p > info.path && p[-1] == ' ')
        p--;
    while (p > info.path && p[-1] >= '0' && p[-1] <= '9')
        p--;
    return strtoll(p, NULL, 10);
}

static long long credit_waits(gw_ep_t *ep)
{
    char path[300];
    long long n = path_count(ep, " credit waits", path, sizeof(path));
    fprintf(stderr, "  [%d] path: %s\n", (int)getpid(), path);
    return n;
}

static long long credits_sent(gw_ep_t *ep)
{
    char path[300];
    return path_count(ep, " CREDITs", path, sizeof(path));
}

static size_t stream_len(int i, int kind)
{
    static const size_t small[] = {8, 64, 200, 1000, 4000};
    static const size_t mixed[] = {8, 200, EAGER_MAX, EAGER_MAX + 1, 50000};
    if (kind == 0)
        return small[(size_t)i % 5];
    if (kind == 1)
        return 256;
    return mixed[(size_t)i % 5];
}

/* n messages of stream kind `kind` from one buffer (each at its own
 * offset, filled from seed + i); every `every`-th with a request, the rest
 * untracked; the requests go to *reqs (n entries). */
static uint8_t *send_stream(gw_ep_t *ep, int n, int kind, uint64_t seed, int every, gw_request_t **reqs, size_t *offs)
{
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        offs[i] = total;
        total += stream_len(i, kind);
    }
    uint8_t *buf = malloc(total);
    REQUIRE(buf != NULL);
    for (int i = 0; i < n; i++) {
        size_t len = stream_len(i, kind);
        gwt_fill(buf + offs[i], len, seed + (uint64_t)i);
        int tracked = every <= 1 || i % every == 0 || len > 16000;
        reqs[i] = NULL;
        REQUIRE_OK(gw_send(ep, buf + offs[i], len, NULL, TAG, tracked ? &reqs[i] : NULL));
    }
    return buf;
}

static void wait_all(gw_request_t **reqs, int n, int kind)
{
    for (int i = 0; i < n; i++) {
        if (!reqs[i])
            continue;
        REQUIRE(gw_request_wait(reqs[i], 60000) == GW_OK);
        gw_request_info_t info = {.size = sizeof(info)};
        REQUIRE_OK(gw_request_info(reqs[i], &info));
        CHECK(info.length == stream_len(i, kind));
        gw_request_free(reqs[i]);
        reqs[i] = NULL;
    }
}

/* Receives n messages of stream kind `kind` one by one, in order: each
 * whole; 0 all right, else the first wrong one's index + 1. */
static int recv_stream(gw_ep_t *ep, int n, int kind, uint64_t seed)
{
    static uint8_t buf[65536];
    for (int i = 0; i < n; i++) {
        size_t len = stream_len(i, kind);
        gw_request_t *r = NULL;
        REQUIRE_OK(gw_recv(ep, buf, sizeof(buf), NULL, TAG, ~0ull, &r));
        REQUIRE(gw_request_wait(r, 60000) == GW_OK);
        gw_request_info_t info = {.size = sizeof(info)};
        REQUIRE_OK(gw_request_info(r, &info));
        gw_request_free(r);
        long long bad = info.length == len ? gwt_verify(buf, len, seed + (uint64_t)i) : 0;
        if (bad >= 0) {
            fprintf(stderr, "message %d: %zu bytes (sent %zu), first wrong byte at %lld: out of order?\n", i,
                    info.length, len, bad);
            return i + 1;
        }
    }
    return 0;
}

/* Receives n into receives posted ahead, `depth` at a time. */
static int recv_ahead(gw_ep_t *ep, int n, int kind, uint64_t seed, int depth)
{
    static uint8_t bufs[64][4096];
    gw_request_t *r[64] = {0};
    int posted = 0, done = 0, bad = 0;
    while (done < n) {
        while (posted < n && posted - done < depth) {
            REQUIRE_OK(gw_recv(ep, bufs[posted % 64], sizeof(bufs[0]), NULL, TAG, ~0ull, &r[posted % 64]));
            posted++;
        }
        gw_request_t *q = r[done % 64];
        REQUIRE(gw_request_wait(q, 60000) == GW_OK);
        gw_request_info_t info = {.size = sizeof(info)};
        REQUIRE_OK(gw_request_info(q, &info));
        gw_request_free(q);
        size_t len = stream_len(done, kind);
        if (!bad && (info.length != len || gwt_verify(bufs[done % 64], len, seed + (uint64_t)done) >= 0)) {
            fprintf(stderr, "message %d: %zu bytes (sent %zu) or its bytes wrong\n", done, info.length, len);
            bad = done + 1;
        }
        done++;
    }
    return bad;
}

static gw_ep_t *start(int (*child)(void *), gw_context_t **ctx, gw_listener_t **l, int *pid)
{
    REQUIRE(gwt_chan_pair(&g_pc, &g_cc) == 0);
    *pid = gwt_spawn(child, NULL);
    REQUIRE(*pid > 0);
    REQUIRE_OK(gw_context_create(NULL, ctx));
    return gwt_listen_accept(*ctx, &g_pc, l);
}

/* (each side progresses until the other is through: what it still has to
 * send - a notification, credits - may wait for credits or room) */
static void finish(gw_context_t *ctx, gw_ep_t *ep, gw_listener_t *l, int pid)
{
    gwt_chan_expect(&g_pc, ctx, "fin");
    REQUIRE(gwt_chan_send(&g_pc, "done", 4) == 0);
    CHECK(gwt_wait(pid, 120) == 0);
    gw_ep_close(ep, 5000);
    gw_listener_destroy(l);
    gw_context_destroy(ctx);
}

static int child_end(gw_context_t *ctx, gw_ep_t *ep)
{
    REQUIRE(gwt_chan_send(&g_cc, "fin", 3) == 0);
    gwt_chan_expect(&g_cc, ctx, "done");
    gw_ep_close(ep, 5000);
    gw_context_destroy(ctx);
    return gwt_failures ? 1 : 0;
}

/* ---- stream_late ---- */
#define NLATE 12000

static int child_late(void *arg)
{
    (void)arg;
    gw_context_t *ctx;
    gw_ep_t *ep = gwt_connect_chan(&g_cc, "ofi", &ctx);
    static gw_request_t *reqs[NLATE];
    static size_t offs[NLATE];
    uint8_t *buf = send_stream(ep, NLATE, 0, 1000, 10, reqs, offs);
    wait_all(reqs, NLATE, 0);
    gw_request_t *f = NULL;
    REQUIRE(gwt_outcome(gw_flush(ep, &f), &f, 60000) == GW_OK); /* every message out (the untracked too) */
    REQUIRE(gwt_chan_send(&g_cc, "sent", 4) == 0);
    CHECK(credit_waits(ep) > 0); /* it outran its credits */
    int rc = child_end(ctx, ep);
    free(buf);
    return rc;
}

static void case_stream_late(void)
{
    gw_context_t *ctx;
    gw_listener_t *l;
    int pid;
    gw_ep_t *ep = start(child_late, &ctx, &l, &pid);
    gwt_chan_expect(&g_pc, ctx, "sent"); /* progressing, no receive posted: they arrive unexpected */
    CHECK(recv_stream(ep, NLATE, 0, 1000) == 0);
    CHECK(credit_waits(ep) == 0);
    long long back = credits_sent(ep);
    fprintf(stderr, "  credits returned by %lld CREDIT messages\n", back);
    CHECK(back > 0); /* nothing else went back to carry them */
    finish(ctx, ep, l, pid);
}

/* ---- one_way ---- */
#define NONE 6000

static int child_one_way(void *arg)
{
    (void)arg;
    gw_context_t *ctx;
    gw_ep_t *ep = gwt_connect_chan(&g_cc, "ofi", &ctx);
    static gw_request_t *reqs[NONE];
    static size_t offs[NONE];
    uint8_t *buf = send_stream(ep, NONE, 1, 5000, 1, reqs, offs);
    wait_all(reqs, NONE, 1);
    credit_waits(ep);
    int rc = child_end(ctx, ep);
    free(buf);
    return rc;
}

static void case_one_way(void)
{
    gw_context_t *ctx;
    gw_listener_t *l;
    int pid;
    gw_ep_t *ep = start(child_one_way, &ctx, &l, &pid);
    CHECK(recv_ahead(ep, NONE, 1, 5000, 64) == 0);
    CHECK(credit_waits(ep) == 0);
    /* returns went back alone: a CREDIT carries at most the 56 a sender holds */
    CHECK(credits_sent(ep) >= (NONE - 56) / 56);
    finish(ctx, ep, l, pid);
}

/* ---- both_ways ---- */
#define NBOTH 5000

static void both_side(gw_context_t *ctx, gw_ep_t *ep, uint64_t seed_out, uint64_t seed_in)
{
    (void)ctx;
    static gw_request_t *reqs[NBOTH];
    static size_t offs[NBOTH];
    uint8_t *buf = send_stream(ep, NBOTH, 0, seed_out, 4, reqs, offs);
    CHECK(recv_stream(ep, NBOTH, 0, seed_in) == 0);
    wait_all(reqs, NBOTH, 0);
    gw_request_t *f = NULL;
    CHECK(gwt_outcome(gw_flush(ep, &f), &f, 60000) == GW_OK);
    CHECK(credit_waits(ep) >= 0); /* (credits agreed; how many waited depends on who started first) */
    free(buf);
}

static int child_both(void *arg)
{
    (void)arg;
    gw_context_t *ctx;
    gw_ep_t *ep = gwt_connect_chan(&g_cc, "ofi", &ctx);
    both_side(ctx, ep, 7000, 9000);
    return child_end(ctx, ep);
}

static void case_both_ways(void)
{
    gw_context_t *ctx;
    gw_listener_t *l;
    int pid;
    gw_ep_t *ep = start(child_both, &ctx, &l, &pid);
    both_side(ctx, ep, 9000, 7000);
    finish(ctx, ep, l, pid);
}

/* ---- mixed ---- */
#define NMIX 1000
#define NEXTRA (NMIX / 5)

typedef struct am_box {
    unsigned n, bad;
} am_box_t;

static void on_am(void *arg, gw_ep_base_t *ep, const void *data, size_t len)
{
    am_box_t *b = arg;
    (void)ep;
    uint32_t v = 0;
    if (len != 64)
        b->bad++;
    else
        memcpy(&v, data, sizeof(v));
    if (v != b->n)
        b->bad++;
    b->n++;
}

static int child_mixed(void *arg)
{
    (void)arg;
    gw_context_t *ctx;
    gw_ep_t *ep = gwt_connect_chan(&g_cc, "ofi", &ctx);
    uint64_t rbase = 0;
    gw_rkey_t *rk = gwt_recv_rkey(ep, TAG_KEY, &rbase);
    static uint8_t nbuf[NEXTRA][64];
    gw_mem_t *nmem = NULL;
    REQUIRE_OK(gw_mem_reg(ctx, nbuf, sizeof(nbuf), GW_ACCESS_LOCAL, &nmem));
    static gw_request_t *reqs[NMIX];
    static size_t offs[NMIX];
    static gw_request_t *nreq[NEXTRA];
    size_t total = 0;
    for (int i = 0; i < NMIX; i++) {
        offs[i] = total;
        total += stream_len(i, 2);
    }
    uint8_t *buf = malloc(total);
    REQUIRE(buf != NULL);
    for (int i = 0; i < NMIX; i++) {
        size_t len = stream_len(i, 2);
        gwt_fill(buf + offs[i], len, 3000 + (uint64_t)i);
        int tracked = i % 7 == 0 || len > 16000;
        reqs[i] = NULL;
        REQUIRE_OK(gw_send(ep, buf + offs[i], len, NULL, TAG, tracked ? &reqs[i] : NULL));
        if (i % 5 == 4) {
            int k = i / 5;
            uint8_t am[64] = {0};
            uint32_t v = (uint32_t)k;
            memcpy(am, &v, sizeof(v));
            REQUIRE_OK(ep->ops->am_send(ep->tl, AM_ID, am, sizeof(am)));
            memset(nbuf[k], k & 0xff, 64);
            REQUIRE_OK(gw_put_notify(ep, nbuf[k], 64, nmem, rbase + (uint64_t)k * 64, rk, 500000 + (uint64_t)k,
                                     &nreq[k]));
        }
    }
    REQUIRE(gwt_chan_send(&g_cc, "sent", 4) == 0); /* (the rendezvous ones wait for the receives) */
    wait_all(reqs, NMIX, 2);
    for (int k = 0; k < NEXTRA; k++) {
        CHECK(gw_request_wait(nreq[k], 60000) == GW_OK);
        gw_request_free(nreq[k]);
    }
    credit_waits(ep);
    int rc = child_end(ctx, ep);
    gw_rkey_destroy(rk);
    gw_mem_dereg(nmem);
    free(buf);
    return rc;
}

static void case_mixed(void)
{
    static am_box_t box;
    gw_context_t *ctx;
    gw_listener_t *l;
    int pid;
    REQUIRE(gwt_chan_pair(&g_pc, &g_cc) == 0);
    pid = gwt_spawn(child_mixed, NULL);
    REQUIRE(pid > 0);
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    REQUIRE_OK(gw_am_set(&ctx->core, AM_ID, on_am, &box));
    gw_ep_t *ep = gwt_listen_accept(ctx, &g_pc, &l);
    static uint8_t region[NEXTRA * 64];
    gw_mem_t *mem = NULL;
    REQUIRE_OK(gw_mem_reg(ctx, region, sizeof(region), GW_ACCESS_LOCAL | GW_ACCESS_REMOTE_WRITE, &mem));
    gwt_send_rkey(ep, mem, TAG_KEY);
    gwt_chan_expect(&g_pc, ctx, "sent"); /* progressing late: the small ones arrive unexpected */
    uint64_t until = gw_now_ns() + 300000000ull;
    while (gw_now_ns() < until)
        gw_progress(ctx);
    CHECK(recv_stream(ep, NMIX, 2, 3000) == 0);
    for (int k = 0; k < NEXTRA; k++) {
        uint64_t v = 0;
        gw_status_t st = gw_notify_wait(ep, 60000, &v);
        CHECK(st == GW_OK);
        if (st != GW_OK || v != 500000 + (uint64_t)k) {
            fprintf(stderr, "notification %d: %s, value %llu\n", k, gw_status_name(st), (unsigned long long)v);
            CHECK(v == 500000 + (uint64_t)k);
            break;
        }
        CHECK(region[k * 64] == (uint8_t)(k & 0xff) && region[k * 64 + 63] == (uint8_t)(k & 0xff));
    }
    until = gw_now_ns() + 30000000000ull;
    while (box.n < NEXTRA && gw_now_ns() < until)
        gw_progress(ctx);
    fprintf(stderr, "  %u active messages, %u wrong\n", box.n, box.bad);
    CHECK(box.n == NEXTRA && box.bad == 0);
    credit_waits(ep);
    finish(ctx, ep, l, pid);
    gw_mem_dereg(mem);
}

/* ---- no_credits ---- */
#define NOFF 3000

static int child_off(void *arg)
{
    (void)arg;
    setenv("GPUWIRE_OFI_CREDITS", "off", 1);
    gw_context_t *ctx;
    gw_ep_t *ep = gwt_connect_chan(&g_cc, "ofi", &ctx);
    CHECK(credit_waits(ep) == -1 && credits_sent(ep) == -1);
    static gw_request_t *reqs[NOFF];
    static size_t offs[NOFF];
    uint8_t *buf = send_stream(ep, NOFF, 0, 11000, 3, reqs, offs);
    CHECK(recv_stream(ep, NOFF, 0, 13000) == 0);
    wait_all(reqs, NOFF, 0);
    gw_request_t *f = NULL;
    CHECK(gwt_outcome(gw_flush(ep, &f), &f, 60000) == GW_OK);
    CHECK(credit_waits(ep) == -1);
    free(buf);
    return child_end(ctx, ep);
}

static void case_no_credits(void)
{
    gw_context_t *ctx;
    gw_listener_t *l;
    int pid;
    gw_ep_t *ep = start(child_off, &ctx, &l, &pid);
    CHECK(credit_waits(ep) == -1 && credits_sent(ep) == -1); /* the peer said nothing of credits */
    static gw_request_t *reqs[NOFF];
    static size_t offs[NOFF];
    uint8_t *buf = send_stream(ep, NOFF, 0, 13000, 3, reqs, offs);
    CHECK(recv_stream(ep, NOFF, 0, 11000) == 0);
    wait_all(reqs, NOFF, 0);
    gw_request_t *f = NULL;
    CHECK(gwt_outcome(gw_flush(ep, &f), &f, 60000) == GW_OK);
    CHECK(credit_waits(ep) == -1);
    free(buf);
    finish(ctx, ep, l, pid);
}

/* ---- lie ---- */
static int child_lied_to(void *arg)
{
    (void)arg;
    /* (the lie may come on the PONG that answers connect's first message,
     * failing gw_connect, or on the message sent after) */
    char addr[80], msg[600];
    REQUIRE(gwt_chan_recv(&g_cc, addr, sizeof(addr), GWT_PEER_WAIT_MS) > 0);
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    gw_ep_t *ep = NULL;
    gw_status_t st = gw_connect(ctx, addr, &ep);
    if (st != GW_OK) {
        snprintf(msg, sizeof(msg), "gw_connect: %s: %s", gw_status_name(st), gw_last_error(ctx));
    } else {
        uint64_t v = 0;
        gw_request_t *r = NULL;
        /* (the endpoint may have failed already: the receive is then refused) */
        st = gw_recv(ep, &v, sizeof(v), NULL, TAG, ~0ull, &r);
        if (st == GW_OK) {
            st = gw_request_wait(r, 30000);
            gw_request_free(r);
        }
        snprintf(msg, sizeof(msg), "gw_recv: %s; endpoint: %s: %s", gw_status_name(st),
                 gw_status_name(ep->base.error), ep->base.error_detail);
    }
    REQUIRE(gwt_chan_send(&g_cc, msg, (uint32_t)strlen(msg) + 1) == 0);
    gwt_chan_expect(&g_cc, NULL, "done");
    if (ep)
        gw_ep_close(ep, 1000);
    gw_context_destroy(ctx);
    return gwt_failures ? 1 : 0;
}

static void case_lie(void)
{
    gw_context_t *ctx;
    gw_listener_t *l;
    REQUIRE(gwt_chan_pair(&g_pc, &g_cc) == 0);
    int pid = gwt_spawn(child_lied_to, NULL);
    REQUIRE(pid > 0);
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    setenv("GW_TEST_OFI_CREDIT_LIE", "64", 1); /* this side's first header returns 64 credits: more than spent */
    gw_ep_t *ep = gwt_listen_accept(ctx, &g_pc, &l);
    unsetenv("GW_TEST_OFI_CREDIT_LIE");
    uint64_t v = 77;
    gw_request_t *s = NULL;
    REQUIRE_OK(gw_send(ep, &v, sizeof(v), NULL, TAG, &s));
    gw_request_wait(s, 30000);
    gw_request_free(s);
    char msg[600];
    int n = gwt_chan_recv(&g_pc, msg, sizeof(msg) - 1, 120000); /* (a failed connect may take its bound) */
    REQUIRE(n > 0);
    msg[n] = 0;
    fprintf(stderr, "  the peer: %s\n", msg);
    CHECK(strstr(msg, "GW_ERR_PROTOCOL") != NULL);
    CHECK(strstr(msg, "returning 64 credits while") != NULL && strstr(msg, "more than the 56") != NULL);
    REQUIRE(gwt_chan_send(&g_pc, "done", 4) == 0);
    CHECK(gwt_wait(pid, 60) == 0);
    gw_ep_close(ep, 1000);
    gw_listener_destroy(l);
    gw_context_destroy(ctx);
}

/* ---- auto ---- */
#define NAUTO 500

static int child_auto(void *arg)
{
    (void)arg;
    gw_context_t *ctx;
    gw_ep_t *ep = gwt_connect_chan(&g_cc, "ofi", &ctx);
    CHECK(recv_stream(ep, NAUTO, 1, 17000) == 0);
    return child_end(ctx, ep);
}

/* GPUWIRE_OFI_CREDITS=auto on both sides: credits over shm and 1.x's
 * tcp;ofi_rxm, none over 2.x's own tcp provider (named "tcp"); the stream
 * arrives whole either way */
static void case_auto(void)
{
    setenv("GPUWIRE_OFI_CREDITS", "auto", 1);
    gw_context_t *ctx;
    gw_listener_t *l;
    int pid;
    gw_ep_t *ep = start(child_auto, &ctx, &l, &pid);
    static gw_request_t *reqs[NAUTO];
    static size_t offs[NAUTO];
    uint8_t *buf = send_stream(ep, NAUTO, 1, 17000, 3, reqs, offs);
    wait_all(reqs, NAUTO, 1);
    long long waits = credit_waits(ep);
    gw_ep_info_t info = {.size = sizeof(info)};
    REQUIRE_OK(gw_ep_query(ep, &info));
    int tcp2 = !strncmp(info.path, "ofi tcp/", 8); /* (1.x's reads "ofi tcp;ofi_rxm/...") */
    fprintf(stderr, "  %s: credits %s\n", tcp2 ? "libfabric 2.x's tcp" : "provider", waits == -1 ? "off" : "on");
    CHECK(tcp2 ? waits == -1 : waits >= 0);
    free(buf);
    finish(ctx, ep, l, pid);
}

static const gwt_case_t cases[] = {GWT_CASE(stream_late), GWT_CASE(one_way), GWT_CASE(both_ways), GWT_CASE(mixed),
                                   GWT_CASE(no_credits),  GWT_CASE(lie),     GWT_CASE(auto)};
int main(int argc, char **argv)
{
    return GWT_MAIN(argc, argv, cases);
}
