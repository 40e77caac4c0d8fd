/* SPDX-License-Identifier: Apache-2.0 */
/* it_ofi_small.c - small messages over the ofi transport's short paths (run
 * over ofi's tcp and shm providers): a small host message sent by
 * fi_inject before any request exists (tl.h send_now), a receive posted
 * straight onto the posted list, and receive slots whose repost waits for
 * a pass that finds nothing.
 *
 *   order_mixed  the peer sends, on one tag, messages of 8, 150, 1,000 and
 *                20,000 bytes in turn (injected, injected where the
 *                provider's inject room allows - shm's, not tcp's 64
 *                bytes - from a send slot, by rendezvous), some without a
 *                request, while this side
 *                does not progress; then this side receives them all: each
 *                arrives in sending order, whole, with its length (a short
 *                send never overtakes a message queued before it, and more
 *                messages than the posted receive slots wait meanwhile).
 *   ping_pong    3,000 round trips of 8-byte messages, each carrying its
 *                sequence number, both sides spinning on their requests;
 *                every send's request ends GW_OK with length 8 (complete
 *                at return, or soon after), and every receive gets the
 *                number it expects.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpuwire.h"
#include "harness.h"

#define NMIXED 400
#define NPING 3000
#define TAG_DATA 11
#define TAG_BACK 12

static const size_t mix_sizes[] = {8, 150, 1000, 20000};
#define NMIX (sizeof(mix_sizes) / sizeof(mix_sizes[0]))

static size_t mixed_len(int i)
{
    return mix_sizes[(size_t)i % NMIX];
}

static int peer_mixed(void *arg)
{
    gwt_chan_t *chan = arg;
    gw_context_t *ctx;
    gw_ep_t *ep = gwt_connect_chan(chan, "ofi", &ctx);
    static uint8_t bufs[NMIXED][20000];
    gw_request_t *reqs[NMIXED] = {0};
    for (int i = 0; i < NMIXED; i++) {
        size_t len = mixed_len(i);
        gwt_fill(bufs[i], len, (uint64_t)i + 1);
        /* every third small one without a request: its errors would reach the endpoint */
        int untracked = len <= 150 && i % 3 == 0;
        REQUIRE_OK(gw_send(ep, bufs[i], len, NULL, TAG_DATA, untracked ? NULL : &reqs[i]));
    }
    REQUIRE(gwt_chan_send(chan, "sent", 4) == 0);
    for (int i = 0; i < NMIXED; i++) {
        if (!reqs[i])
            continue;
        REQUIRE(gw_request_wait(reqs[i], 30000) == GW_OK);
        gw_request_info_t info = {.size = sizeof(info)};
        REQUIRE_OK(gw_request_info(reqs[i], &info));
        CHECK(info.length == mixed_len(i));
        gw_request_free(reqs[i]);
    }
    gw_request_t *f = NULL;
    REQUIRE(gwt_outcome(gw_flush(ep, &f), &f, 30000) == GW_OK);
    gwt_chan_expect(chan, ctx, "done");
    gw_ep_close(ep, 5000);
    gw_context_destroy(ctx);
    return gwt_failures ? 1 : 0;
}

static void case_order_mixed(void)
{
    gwt_chan_t mine, theirs;
    REQUIRE(gwt_chan_pair(&mine, &theirs) == 0);
    int pid = gwt_spawn(peer_mixed, &theirs);
    REQUIRE(pid > 0);
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    gw_listener_t *l;
    gw_ep_t *ep = gwt_listen_accept(ctx, &mine, &l);
    /* no progress here until every message is posted at the peer */
    char tok[8];
    REQUIRE(gwt_chan_recv(&mine, tok, sizeof(tok), 30000) == 4 && memcmp(tok, "sent", 4) == 0);
    static uint8_t buf[20000];
    for (int i = 0; i < NMIXED; i++) {
        size_t len = mixed_len(i);
        memset(buf, 0, len);
        gw_request_t *r = NULL;
        REQUIRE_OK(gw_recv(ep, buf, sizeof(buf), NULL, TAG_DATA, ~0ull, &r));
        REQUIRE(gw_request_wait(r, 30000) == GW_OK);
        gw_request_info_t info = {.size = sizeof(info)};
        REQUIRE_OK(gw_request_info(r, &info));
        gw_request_free(r);
        if (info.length != len) {
            fprintf(stderr, "message %d: %zu bytes, sent %zu (out of order?)\n", i, info.length, len);
            CHECK(info.length == len);
            break;
        }
        long long bad = gwt_verify(buf, len, (uint64_t)i + 1);
        if (bad >= 0)
            fprintf(stderr, "message %d (%zu bytes): wrong byte at %lld\n", i, len, bad);
        CHECK(bad < 0);
    }
    REQUIRE(gwt_chan_send(&mine, "done", 4) == 0);
    REQUIRE(gwt_wait(pid, 60) == 0);
    gw_ep_close(ep, 5000);
    gw_listener_destroy(l);
    gw_context_destroy(ctx);
}

/* Spins on r (progressing the context) until it completes, 30 s at most. */
static gw_status_t spin(gw_context_t *ctx, gw_request_t *r)
{
    gw_status_t st;
    for (long k = 0; (st = gw_request_test(r)) == GW_INPROGRESS; k++) {
        if ((k & 1023) == 1023) /* now and then a waiting call: its deadline */
            return gw_request_wait(r, 30000);
        gw_progress(ctx);
    }
    return st;
}

static int peer_pong(void *arg)
{
    gwt_chan_t *chan = arg;
    gw_context_t *ctx;
    gw_ep_t *ep = gwt_connect_chan(chan, "ofi", &ctx);
    for (uint64_t i = 0; i < NPING; i++) {
        uint64_t v = 0, w;
        gw_request_t *r = NULL, *s = NULL;
        REQUIRE_OK(gw_recv(ep, &v, sizeof(v), NULL, TAG_DATA, ~0ull, &r));
        REQUIRE(spin(ctx, r) == GW_OK);
        gw_request_free(r);
        CHECK(v == i);
        w = v + 1000000;
        REQUIRE_OK(gw_send(ep, &w, sizeof(w), NULL, TAG_BACK, &s));
        REQUIRE(spin(ctx, s) == GW_OK);
        gw_request_free(s);
    }
    gwt_chan_expect(chan, ctx, "done");
    gw_ep_close(ep, 5000);
    gw_context_destroy(ctx);
    return gwt_failures ? 1 : 0;
}

static void case_ping_pong(void)
{
    gwt_chan_t mine, theirs;
    REQUIRE(gwt_chan_pair(&mine, &theirs) == 0);
    int pid = gwt_spawn(peer_pong, &theirs);
    REQUIRE(pid > 0);
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    gw_listener_t *l;
    gw_ep_t *ep = gwt_listen_accept(ctx, &mine, &l);
    int wrong = 0;
    for (uint64_t i = 0; i < NPING && !wrong; i++) {
        uint64_t back = 0, v = i;
        gw_request_t *r = NULL, *s = NULL;
        REQUIRE_OK(gw_recv(ep, &back, sizeof(back), NULL, TAG_BACK, ~0ull, &r));
        REQUIRE_OK(gw_send(ep, &v, sizeof(v), NULL, TAG_DATA, &s));
        REQUIRE(spin(ctx, s) == GW_OK);
        gw_request_info_t info = {.size = sizeof(info)};
        REQUIRE_OK(gw_request_info(s, &info));
        CHECK(info.status == GW_OK && info.length == sizeof(v));
        gw_request_free(s);
        REQUIRE(spin(ctx, r) == GW_OK);
        info = (gw_request_info_t){.size = sizeof(info)};
        REQUIRE_OK(gw_request_info(r, &info));
        CHECK(info.length == sizeof(back) && info.tag == TAG_BACK);
        gw_request_free(r);
        if (back != i + 1000000) {
            fprintf(stderr, "round trip %llu: %llu came back\n", (unsigned long long)i, (unsigned long long)back);
            wrong = 1;
        }
    }
    CHECK(!wrong);
    REQUIRE(gwt_chan_send(&mine, "done", 4) == 0);
    REQUIRE(gwt_wait(pid, 60) == 0);
    gw_ep_close(ep, 5000);
    gw_listener_destroy(l);
    gw_context_destroy(ctx);
}

static const gwt_case_t cases[] = {GWT_CASE(order_mixed), GWT_CASE(ping_pong)};
int main(int argc, char **argv)
{
    return GWT_MAIN(argc, argv, cases);
}
