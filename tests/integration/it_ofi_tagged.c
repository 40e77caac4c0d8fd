/* SPDX-License-Identifier: Apache-2.0 */
/* it_ofi_tagged.c - application messages over the ofi transport's tagged
 * path (the provider's fi_tsend/fi_trecv matching them: docs/OFI.md), run
 * over ofi's tcp and shm providers with GPUWIRE_OFI_TAGGED=on.  Each case first checks that the
 * endpoint took the tagged path (its description says so) and skips, with
 * the provider's reason, where the provider does not offer it.
 *
 *   order_mixed  the peer sends, on one tag, messages of 8, 5,000, 16,384
 *                (the largest sent whole), 16,385 and 100,000 bytes (by
 *                RTS and a read) in turn while this side does not
 *                progress, then sends more after this side posted its
 *                receives: every message arrives whole, in sending order.
 *   truncated    messages longer than the receive: 1,000 bytes into 100,
 *                20,000 into 16,384 and 100,000 (an RTS) into 8: each
 *                ends GW_ERR_TRUNCATED with the message's full length and
 *                the bytes that fit; the sender's requests end GW_OK.
 *   cancel       a posted receive canceled ends GW_ERR_CANCELED at once;
 *                the message later sent with its tag goes to the next
 *                receive, not to the withdrawn one; a receive freed
 *                unmatched is withdrawn likewise.
 *   wildcard     unexpected messages of tags 0xAB00..0xAB02 taken by an
 *                exact tag, a mask and a full wildcard, oldest match
 *                first, each with its own tag; gw_probe sees the oldest
 *                unexpected one (length and tag) without taking it.
 *   fail_posted  receives posted when the peer is killed end with the
 *                endpoint's error (no hang); a receive that matched a
 *                message before the peer died keeps it.
 *   refused      the peer runs with GPUWIRE_OFI_TAGGED=off: both sides
 *                keep gpuwire's header path (the handshake agrees on it),
 *                and small and large messages still arrive.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gpuwire.h"
#include "harness.h"

#define TAG 21

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
#define TAG_BACK 22

static int tagged_path(gw_ep_t *ep, char *why, size_t len)
{
    gw_ep_info_t info = {.size = sizeof(info)};
    if (gw_ep_query(ep, &info) != GW_OK)
        return 0;
    snprintf(why, len, "%s", info.path);
    return strstr(info.path, "tagged messages") != NULL;
}

/* The parent's side: a listener, the peer spawned, the endpoint accepted;
 * skips when the tagged path is not taken (unless want_header). */
static gw_ep_t *setup(int (*peer)(void *), gwt_chan_t *mine, gwt_chan_t *theirs, gw_context_t **ctx,
                      gw_listener_t **l, int *pid, int want_header)
{
    REQUIRE(gwt_chan_pair(mine, theirs) == 0);
    *pid = gwt_spawn(peer, theirs);
    REQUIRE(*pid > 0);
    REQUIRE_OK(gw_context_create(NULL, ctx));
    gw_ep_t *ep = gwt_listen_accept(*ctx, mine, l);
    char why[300];
    if (!want_header && !tagged_path(ep, why, sizeof(why))) {
        kill(*pid, SIGKILL);
        gwt_wait(*pid, 10);
        SKIP("the endpoint keeps gpuwire's header path: %s", why);
    }
    return ep;
}

static void teardown(gwt_chan_t *mine, gw_context_t *ctx, gw_ep_t *ep, gw_listener_t *l, int pid)
{
    REQUIRE(gwt_chan_send(mine, "done", 4) == 0);
    REQUIRE(gwt_wait(pid, 60) == 0);
    gw_ep_close(ep, 5000);
    gw_listener_destroy(l);
    gw_context_destroy(ctx);
}

static void peer_end(gwt_chan_t *chan, gw_context_t *ctx, gw_ep_t *ep)
{
    gwt_chan_expect(chan, ctx, "done");
    gw_ep_close(ep, 5000);
    gw_context_destroy(ctx);
}

static gw_status_t wait_info(gw_request_t *r, gw_request_info_t *info)
{
    gw_status_t st = gw_request_wait(r, 30000);
    *info = (gw_request_info_t){.size = sizeof(*info)};
    gw_request_info(r, info);
    return st;
}

/* ---- order_mixed ---- */
static const size_t mix[] = {8, 5000, 16384, 16385, 100000};
#define NMIX (sizeof(mix) / sizeof(mix[0]))
#define NROUND 12
static uint8_t g_big[NMIX * NROUND][100000];

static int peer_order(void *arg)
{
    gwt_chan_t *chan = arg;
    gw_context_t *ctx;
    gw_ep_t *ep = gwt_connect_chan(chan, "ofi", &ctx);
    gw_request_t *reqs[NMIX * NROUND] = {0};
    for (size_t i = 0; i < NMIX * NROUND; i++) {
        if (i == NMIX * NROUND / 2) { /* the first half unexpected; then the other side posts */
            REQUIRE(gwt_chan_send(chan, "half", 4) == 0);
            gwt_chan_expect(chan, ctx, "post");
        }
        gwt_fill(g_big[i], mix[i % NMIX], i + 1);
        REQUIRE_OK(gw_send(ep, g_big[i], mix[i % NMIX], NULL, TAG, &reqs[i]));
    }
    for (size_t i = 0; i < NMIX * NROUND; i++) {
        CHECK_ST(gw_request_wait(reqs[i], 30000), GW_OK);
        gw_request_free(reqs[i]);
    }
    peer_end(chan, ctx, ep);
    return gwt_failures ? 1 : 0;
}

static void case_order_mixed(void)
{
    gwt_chan_t mine, theirs;
    gw_context_t *ctx;
    gw_listener_t *l;
    int pid;
    gw_ep_t *ep = setup(peer_order, &mine, &theirs, &ctx, &l, &pid, 0);
    char tok[8];
    REQUIRE(gwt_chan_recv(&mine, tok, sizeof(tok), 30000) == 4 && memcmp(tok, "half", 4) == 0);
    usleep(200000); /* (no progress: what was sent waits unexpected at the provider) */
    static uint8_t rbuf[NMIX * NROUND][100000];
    gw_request_t *r[NMIX * NROUND];
    for (size_t i = 0; i < NMIX * NROUND; i++)
        REQUIRE_OK(gw_recv(ep, rbuf[i], sizeof(rbuf[i]), NULL, TAG, ~0ull, &r[i]));
    REQUIRE(gwt_chan_send(&mine, "post", 4) == 0);
    for (size_t i = 0; i < NMIX * NROUND; i++) {
        gw_request_info_t info;
        CHECK_ST(wait_info(r[i], &info), GW_OK);
        if (info.length != mix[i % NMIX] || gwt_verify(rbuf[i], mix[i % NMIX], i + 1) >= 0) {
            fprintf(stderr, "message %zu: %zu bytes (sent %zu), or other bytes: out of order\n", i, info.length,
                    mix[i % NMIX]);
            CHECK(0);
        }
        gw_request_free(r[i]);
    }
    teardown(&mine, ctx, ep, l, pid);
}

/* ---- truncated ---- */
static const size_t tr_len[] = {1000, 20000, 100000};
static const size_t tr_buf[] = {100, 16384, 8};

static int peer_trunc(void *arg)
{
    gwt_chan_t *chan = arg;
    gw_context_t *ctx;
    gw_ep_t *ep = gwt_connect_chan(chan, "ofi", &ctx);
    static uint8_t b[100000];
    for (int i = 0; i < 3; i++) {
        gwt_fill(b, tr_len[i], 50 + (uint64_t)i);
        gw_request_t *s = NULL;
        REQUIRE_OK(gw_send(ep, b, tr_len[i], NULL, TAG + (uint64_t)i, &s));
        gw_status_t st = gw_request_wait(s, 30000);
        CHECK(st == GW_OK);
        gw_request_free(s);
    }
    peer_end(chan, ctx, ep);
    return gwt_failures ? 1 : 0;
}

static void case_truncated(void)
{
    gwt_chan_t mine, theirs;
    gw_context_t *ctx;
    gw_listener_t *l;
    int pid;
    gw_ep_t *ep = setup(peer_trunc, &mine, &theirs, &ctx, &l, &pid, 0);
    static uint8_t rb[16384 + 64];
    for (int i = 0; i < 3; i++) {
        memset(rb, 0, sizeof(rb));
        gw_request_t *r = NULL;
        REQUIRE_OK(gw_recv(ep, rb, tr_buf[i], NULL, TAG + (uint64_t)i, ~0ull, &r));
        gw_request_info_t info;
        CHECK_ST(wait_info(r, &info), GW_ERR_TRUNCATED);
        CHECK(info.length == tr_len[i]);
        CHECK(gwt_verify(rb, tr_buf[i], 50 + (uint64_t)i) < 0); /* the part that fits is right */
        CHECK(rb[tr_buf[i]] == 0);                            /* and nothing past the buffer */
        if (i == 0)
            CHECK(strstr(gw_last_error(ctx), "longer than") != NULL || strstr(gw_last_error(ctx), "trunc") != NULL);
        gw_request_free(r);
    }
    teardown(&mine, ctx, ep, l, pid);
}

/* ---- cancel ---- */
static int peer_cancel(void *arg)
{
    gwt_chan_t *chan = arg;
    gw_context_t *ctx;
    gw_ep_t *ep = gwt_connect_chan(chan, "ofi", &ctx);
    gwt_chan_expect(chan, ctx, "send");
    uint64_t v = 0x1234, w = 0x5678;
    REQUIRE_OK(gw_send(ep, &v, sizeof(v), NULL, TAG, NULL));
    REQUIRE_OK(gw_send(ep, &w, sizeof(w), NULL, TAG_BACK, NULL));
    gw_request_t *f = NULL;
    REQUIRE(gwt_outcome(gw_flush(ep, &f), &f, 30000) == GW_OK);
    peer_end(chan, ctx, ep);
    return gwt_failures ? 1 : 0;
}

static void case_cancel(void)
{
    gwt_chan_t mine, theirs;
    gw_context_t *ctx;
    gw_listener_t *l;
    int pid;
    gw_ep_t *ep = setup(peer_cancel, &mine, &theirs, &ctx, &l, &pid, 0);
    uint64_t a = 0, b = 0, c = 0, d = 0;
    gw_request_t *ra = NULL, *rb = NULL, *rc = NULL, *rd = NULL;
    REQUIRE_OK(gw_recv(ep, &a, sizeof(a), NULL, TAG, ~0ull, &ra));
    REQUIRE_OK(gw_recv(ep, &c, sizeof(c), NULL, TAG_BACK, ~0ull, &rc));
    CHECK_ST(gw_request_cancel(ra), GW_OK);
    gw_request_info_t info = {.size = sizeof(info)};
    gw_request_info(ra, &info);
    CHECK_ST(info.status, GW_ERR_CANCELED);
    gw_request_free(ra);
    gw_request_free(rc); /* freed unmatched: withdrawn too */
    REQUIRE_OK(gw_recv(ep, &b, sizeof(b), NULL, TAG, ~0ull, &rb));
    REQUIRE_OK(gw_recv(ep, &d, sizeof(d), NULL, TAG_BACK, ~0ull, &rd));
    REQUIRE(gwt_chan_send(&mine, "send", 4) == 0);
    CHECK_ST(wait_info(rb, &info), GW_OK);
    CHECK(b == 0x1234 && a == 0);
    CHECK_ST(wait_info(rd, &info), GW_OK);
    CHECK(d == 0x5678 && c == 0);
    gw_request_free(rb);
    gw_request_free(rd);
    teardown(&mine, ctx, ep, l, pid);
}

/* ---- wildcard ---- */
static int peer_wild(void *arg)
{
    gwt_chan_t *chan = arg;
    gw_context_t *ctx;
    gw_ep_t *ep = gwt_connect_chan(chan, "ofi", &ctx);
    static uint8_t b[3][50000];
    gw_request_t *s[3];
    for (int i = 0; i < 3; i++) {
        size_t n = i == 1 ? 50000 : 1000;
        gwt_fill(b[i], n, 40 + (uint64_t)i);
        REQUIRE_OK(gw_send(ep, b[i], n, NULL, 0xAB00 + (uint64_t)i, &s[i]));
    }
    REQUIRE(gwt_chan_send(chan, "sent", 4) == 0);
    for (int i = 0; i < 3; i++) {
        CHECK_ST(gw_request_wait(s[i], 30000), GW_OK);
        gw_request_free(s[i]);
    }
    peer_end(chan, ctx, ep);
    return gwt_failures ? 1 : 0;
}

static void case_wildcard(void)
{
    gwt_chan_t mine, theirs;
    gw_context_t *ctx;
    gw_listener_t *l;
    int pid;
    gw_ep_t *ep = setup(peer_wild, &mine, &theirs, &ctx, &l, &pid, 0);
    char tok[8];
    REQUIRE(gwt_chan_recv(&mine, tok, sizeof(tok), 30000) == 4);
    gw_probe_info_t pi = {.size = sizeof(pi)};
    gw_status_t st = GW_INPROGRESS;
    for (double t0 = now_s(); st == GW_INPROGRESS && now_s() - t0 < 10;)
        st = gw_probe(ep, 0xAB00, 0xFF00, &pi);
    CHECK_ST(st, GW_OK);
    CHECK(pi.length == 1000 && pi.tag == 0xAB00);
    CHECK_ST(gw_probe(ep, 0xCD00, ~0ull, &pi), GW_INPROGRESS); /* nothing of that tag */
    static uint8_t rb[60000];
    struct { uint64_t tag, mask, want; size_t len; uint64_t seed; } w[3] = {
        {0xAB02, ~0ull, 0xAB02, 1000, 42}, {0xAB00, 0xFF00, 0xAB00, 1000, 40}, {0, 0, 0xAB01, 50000, 41}};
    for (int i = 0; i < 3; i++) {
        gw_request_t *r = NULL;
        REQUIRE_OK(gw_recv(ep, rb, sizeof(rb), NULL, w[i].tag, w[i].mask, &r));
        gw_request_info_t info;
        CHECK_ST(wait_info(r, &info), GW_OK);
        CHECK(info.tag == w[i].want && info.length == w[i].len);
        CHECK(gwt_verify(rb, w[i].len, w[i].seed) < 0);
        gw_request_free(r);
    }
    teardown(&mine, ctx, ep, l, pid);
}

/* ---- fail_posted ---- */
static int peer_dies(void *arg)
{
    gwt_chan_t *chan = arg;
    gw_context_t *ctx;
    gw_ep_t *ep = gwt_connect_chan(chan, "ofi", &ctx);
    gwt_chan_expect(chan, ctx, "send");
    uint64_t v = 77;
    gw_request_t *s = NULL;
    REQUIRE_OK(gw_send(ep, &v, sizeof(v), NULL, TAG, &s));
    gw_status_t st = gw_request_wait(s, 30000);
    if (st != GW_OK)
        fprintf(stderr, "peer: the send: %s (%s)\n", gw_status_name(st), gw_last_error(ctx));
    REQUIRE(st == GW_OK);
    REQUIRE(gwt_chan_send(chan, "sent", 4) == 0);
    for (;;) /* killed here */
        gw_context_wait(ctx, 100);
    return 0;
}

static void case_fail_posted(void)
{
    gwt_chan_t mine, theirs;
    gw_context_t *ctx;
    gw_listener_t *l;
    int pid;
    gw_ep_t *ep = setup(peer_dies, &mine, &theirs, &ctx, &l, &pid, 0);
    uint64_t a = 0, b = 0, c = 0;
    gw_request_t *ra = NULL, *rb = NULL, *rc = NULL;
    REQUIRE_OK(gw_recv(ep, &a, sizeof(a), NULL, TAG, ~0ull, &ra));
    REQUIRE_OK(gw_recv(ep, &b, sizeof(b), NULL, TAG, ~0ull, &rb));
    REQUIRE_OK(gw_recv(ep, &c, 4096 < sizeof(c) ? 4096 : sizeof(c), NULL, TAG_BACK, ~0ull, &rc));
    REQUIRE(gwt_chan_send(&mine, "send", 4) == 0);
    gwt_chan_expect(&mine, ctx, "sent"); /* (progressing: the provider may need it to take the message) */
    gw_request_info_t info;
    CHECK_ST(wait_info(ra, &info), GW_OK); /* it matched before the peer died */
    CHECK(a == 77);
    kill(pid, SIGKILL);
    CHECK(gwt_wait(pid, 10) == 128 + SIGKILL);
    double t0 = now_s();
    gw_status_t sb = wait_info(rb, &info);
    gw_status_t sc = wait_info(rc, &info);
    fprintf(stderr, "  posted receives after the peer died: %s, %s after %.2f s (%s)\n", gw_status_name(sb),
            gw_status_name(sc), now_s() - t0, gw_last_error(ctx));
    CHECK(sb != GW_OK && sb != GW_INPROGRESS && sb != GW_ERR_TIMEOUT);
    CHECK(sc != GW_OK && sc != GW_INPROGRESS && sc != GW_ERR_TIMEOUT);
    gw_request_free(ra);
    gw_request_free(rb);
    gw_request_free(rc);
    gw_ep_close(ep, 1000);
    gw_listener_destroy(l);
    gw_context_destroy(ctx);
}

/* ---- refused ---- */
static int peer_refuses(void *arg)
{
    gwt_chan_t *chan = arg;
    setenv("GPUWIRE_OFI_TAGGED", "off", 1);
    gw_context_t *ctx;
    gw_ep_t *ep = gwt_connect_chan(chan, "ofi", &ctx);
    char why[300];
    CHECK(!tagged_path(ep, why, sizeof(why)));
    static uint8_t b[100000];
    for (int i = 0; i < 2; i++) {
        size_t n = i ? 100000 : 8;
        gwt_fill(b, n, 60 + (uint64_t)i);
        gw_request_t *s = NULL;
        REQUIRE_OK(gw_send(ep, b, n, NULL, TAG, &s));
        CHECK_ST(gw_request_wait(s, 30000), GW_OK);
        gw_request_free(s);
    }
    peer_end(chan, ctx, ep);
    return gwt_failures ? 1 : 0;
}

static void case_refused(void)
{
    gwt_chan_t mine, theirs;
    gw_context_t *ctx;
    gw_listener_t *l;
    int pid;
    gw_ep_t *ep = setup(peer_refuses, &mine, &theirs, &ctx, &l, &pid, 1);
    char why[300];
    CHECK(!tagged_path(ep, why, sizeof(why)));
    fprintf(stderr, "  path: %s\n", why);
    static uint8_t rb[100000];
    for (int i = 0; i < 2; i++) {
        size_t n = i ? 100000 : 8;
        gw_request_t *r = NULL;
        REQUIRE_OK(gw_recv(ep, rb, sizeof(rb), NULL, TAG, ~0ull, &r));
        gw_request_info_t info;
        CHECK_ST(wait_info(r, &info), GW_OK);
        CHECK(info.length == n && gwt_verify(rb, n, 60 + (uint64_t)i) < 0);
        gw_request_free(r);
    }
    teardown(&mine, ctx, ep, l, pid);
}

static const gwt_case_t cases[] = {GWT_CASE(order_mixed), GWT_CASE(truncated),   GWT_CASE(cancel),
                                   GWT_CASE(wildcard),    GWT_CASE(fail_posted), GWT_CASE(refused)};
int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    return GWT_MAIN(argc, argv, cases);
}
