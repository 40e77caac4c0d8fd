/* SPDX-License-Identifier: Apache-2.0 */
/* it_tcp_streams.c - an endpoint of several tcp streams (GPUWIRE_TCP_STREAMS,
 * set by ctest), two processes over loopback, one case per run (argv[1]):
 *   listener_gone  the server destroys its listener right after gw_accept
 *                  (as NCCL closes its listen comms): both sides report every
 *                  stream, and messages of 1 and 6 MiB (striped over the
 *                  streams) go both ways, each checked; the endpoint stays
 *                  healthy.  An endpoint must not need its listener.
 *   last_message   the peer moves a striped 1 MiB message (so its extra
 *                  streams carried data), then sends a small message and,
 *                  once that send completed, goes (alternately: closes its
 *                  endpoint and context, or exits without closing).  Only
 *                  then does the receiver look: gw_probe finds the small
 *                  message and gw_recv delivers it, in every round of 24.
 *   stream_broken  a hand-written peer (raw_peer.h) with two streams closes
 *                  stream 1 and keeps stream 0 open: the endpoint does not
 *                  wait for stream 0 forever, it fails within bounded time
 *                  (GPUWIRE_PEER_TIMEOUT_MS=1000) with both streams' story.
 *   join_missing   a hand-written peer offers two streams and never opens
 *                  the second: gw_accept still hands the endpoint out once
 *                  GPUWIRE_CONNECT_TIMEOUT_MS (1000) passed, with 1 stream,
 *                  and a message goes through it.
 * The last two ignore GPUWIRE_TCP_STREAMS (the raw peer offers 2).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "it.h"
#include "raw_peer.h"
#include "transport/tcp/tcp.h"

static gwt_chan_t g_pc, g_cc;

static int want_streams(void)
{
    const char *s = getenv("GPUWIRE_TCP_STREAMS");
    return s && strcmp(s, "auto") ? atoi(s) : 0;
}

/* The path of ep must say it has `want` streams (0: any). */
static void check_streams(gw_context_t *ctx, gw_ep_t *ep, const char *who)
{
    gw_ep_info_t info = {.size = sizeof(info)};
    IT_OK(ctx, gw_ep_query(ep, &info));
    int n = -1;
    const char *p = strstr(info.path, "tcp: ");
    if (p)
        sscanf(p + 5, "%d stream(s)", &n);
    fprintf(stderr, "  %s: %s\n", who, info.path);
    if (want_streams()) {
        if (n != want_streams())
            fprintf(stderr, "  %s reports %d stream(s), GPUWIRE_TCP_STREAMS=%d\n", who, n, want_streams());
        CHECK(n == want_streams());
    }
}

static gw_status_t wait_req(gw_context_t *ctx, gw_status_t posted, gw_request_t *r, const char *what)
{
    gw_status_t st = posted == GW_OK ? it_wait_free(r, 30000) : posted;
    if (st != GW_OK)
        fprintf(stderr, "  %s: %s (%s)\n", what, gw_status_name(st), gw_last_error(ctx));
    return st;
}

/* ---- listener_gone ---------------------------------------------------------------- */
static const size_t sizes[] = {1u << 20, 6u << 20};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* Sends each size (tag 1 + i), then receives each back from the peer (tag 100 + i). */
static void exchange(gw_context_t *ctx, gw_ep_t *ep, uint64_t seed_out, uint64_t seed_in, const char *who)
{
    uint8_t *out[NSIZES], *in[NSIZES];
    gw_request_t *rs[NSIZES], *rr[NSIZES];
    gw_status_t ps[NSIZES], pr[NSIZES];
    for (size_t i = 0; i < NSIZES; i++) {
        out[i] = it_alloc(sizes[i]);
        in[i] = it_alloc(sizes[i]);
        gwt_fill(out[i], sizes[i], seed_out + i);
        pr[i] = gw_recv(ep, in[i], sizes[i], NULL, 100 + i, ~0ull, &rr[i]);
        ps[i] = gw_send(ep, out[i], sizes[i], NULL, 1 + i, &rs[i]);
    }
    for (size_t i = 0; i < NSIZES; i++) {
        char what[64];
        snprintf(what, sizeof(what), "%s: send of %zu bytes", who, sizes[i]);
        CHECK_ST(wait_req(ctx, ps[i], rs[i], what), GW_OK);
        snprintf(what, sizeof(what), "%s: receive of %zu bytes", who, sizes[i]);
        CHECK_ST(wait_req(ctx, pr[i], rr[i], what), GW_OK);
        long long bad = gwt_verify(in[i], sizes[i], seed_in + i);
        if (bad >= 0)
            fprintf(stderr, "  %s: the %zu-byte message differs at byte %lld\n", who, sizes[i], bad);
        CHECK(bad < 0);
        free(out[i]);
        free(in[i]);
    }
    gw_ep_info_t info = {.size = sizeof(info)};
    IT_OK(ctx, gw_ep_query(ep, &info));
    if (info.error != GW_OK)
        fprintf(stderr, "  %s: endpoint failed: %s (%s)\n", who, gw_status_name(info.error), info.error_detail);
    CHECK_ST(info.error, GW_OK);
}

/* The client: connects, then the same exchange in the other direction. */
static int gone_client(void *arg)
{
    (void)arg;
    gw_context_t *ctx = NULL;
    gw_ep_t *ep = gwt_connect_chan(&g_cc, "tcp", &ctx);
    check_streams(ctx, ep, "client");
    /* echo the server's order: its tags 1.. are our 100.. */
    uint8_t *in[NSIZES];
    gw_request_t *rr[NSIZES], *rs[NSIZES];
    for (size_t i = 0; i < NSIZES; i++) {
        in[i] = it_alloc(sizes[i]);
        IT_OK(ctx, gw_recv(ep, in[i], sizes[i], NULL, 1 + i, ~0ull, &rr[i]));
    }
    for (size_t i = 0; i < NSIZES; i++) {
        CHECK_ST(wait_req(ctx, GW_OK, rr[i], "client: receive"), GW_OK);
        CHECK(gwt_verify(in[i], sizes[i], 10 + i) < 0);
        gwt_fill(in[i], sizes[i], 20 + i);
        IT_OK(ctx, gw_send(ep, in[i], sizes[i], NULL, 100 + i, &rs[i]));
    }
    for (size_t i = 0; i < NSIZES; i++) {
        CHECK_ST(wait_req(ctx, GW_OK, rs[i], "client: send"), GW_OK);
        free(in[i]);
    }
    gw_ep_info_t info = {.size = sizeof(info)};
    IT_OK(ctx, gw_ep_query(ep, &info));
    if (info.error != GW_OK)
        fprintf(stderr, "  client: endpoint failed: %s (%s)\n", gw_status_name(info.error), info.error_detail);
    CHECK_ST(info.error, GW_OK);
    gwt_chan_send(&g_cc, "done", 4);
    gwt_chan_expect(&g_cc, ctx, "bye");
    CHECK_ST(gw_ep_close(ep, 5000), GW_OK);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    return gwt_failures ? 1 : 0;
}

static void case_listener_gone(void)
{
    REQUIRE(gwt_chan_pair(&g_pc, &g_cc) == 0);
    int pid = gwt_spawn(gone_client, NULL);
    gw_context_t *ctx = it_ctx();
    gw_listener_t *l = NULL;
    gw_ep_t *ep = gwt_listen_accept(ctx, &g_pc, &l);
    gw_listener_destroy(l); /* at once, as NCCL does */
    check_streams(ctx, ep, "server");
    exchange(ctx, ep, 10, 20, "server");
    gwt_chan_expect(&g_pc, ctx, "done");
    gwt_chan_send(&g_pc, "bye", 3);
    int rc = gwt_wait(pid, 60);
    CHECK(rc == 0);
    CHECK_ST(gw_ep_close(ep, 5000), GW_OK);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
}

/* ---- last_message ----------------------------------------------------------------- */
#define BIG (1u << 20)
#define SMALL 4096
#define ROUNDS 24

static int last_sender(void *arg)
{
    int do_close = (int)(intptr_t)arg;
    gw_context_t *ctx = NULL;
    gw_ep_t *ep = gwt_connect_chan(&g_cc, "tcp", &ctx);
    uint8_t *big = it_alloc(BIG), *small = it_alloc(SMALL);
    gwt_fill(big, BIG, 7);
    gwt_fill(small, SMALL, 8);
    gw_request_t *r;
    IT_OK(ctx, gw_send(ep, big, BIG, NULL, 1, &r));
    IT_OK(ctx, it_wait_free(r, 30000));
    gwt_chan_send(&g_cc, "big", 3); /* the receiver stops progressing now */
    IT_OK(ctx, gw_send(ep, small, SMALL, NULL, 2, &r));
    IT_OK(ctx, it_wait_free(r, 30000)); /* complete: the peer must get it */
    if (do_close) {
        gw_ep_close(ep, 0);
        gw_context_destroy(ctx);
    }
    _exit(0);
}

static void case_last_message(void)
{
    int lost = 0;
    for (int round = 0; round < ROUNDS; round++) {
        REQUIRE(gwt_chan_pair(&g_pc, &g_cc) == 0);
        int pid = gwt_spawn(last_sender, (void *)(intptr_t)(round & 1));
        gw_context_t *ctx = it_ctx();
        gw_listener_t *l = NULL;
        gw_ep_t *ep = gwt_listen_accept(ctx, &g_pc, &l);
        uint8_t *big = it_alloc(BIG), *small = it_alloc(SMALL);
        gw_request_t *r;
        IT_OK(ctx, gw_recv(ep, big, BIG, NULL, 1, ~0ull, &r));
        IT_OK(ctx, it_wait_free(r, 30000));
        CHECK(gwt_verify(big, BIG, 7) < 0);
        gwt_chan_expect(&g_pc, ctx, "big"); /* the sender's send completed (our acknowledgement left) */
        /* no progress until the sender is gone: everything it sent, and
         * every stream's end, is here before this side looks */
        CHECK(gwt_wait(pid, 60) == 0);
        gw_probe_info_t pi = {.size = sizeof(pi)};
        gw_status_t pst;
        double t0 = it_now();
        while ((pst = gw_probe(ep, 2, ~0ull, &pi)) == GW_INPROGRESS && it_now() - t0 < 30)
            gw_context_wait(ctx, 10);
        gw_status_t rst = gwt_outcome(gw_recv(ep, small, SMALL, NULL, 2, ~0ull, &r), &r, 30000);
        if (pst != GW_OK || rst != GW_OK || gwt_verify(small, SMALL, 8) >= 0) {
            lost++;
            fprintf(stderr, "  round %d (sender %s): probe %s, receive %s: %s\n", round,
                    round & 1 ? "closed" : "exited", gw_status_name(pst), gw_status_name(rst), gw_last_error(ctx));
        }
        close(g_pc.rfd);
        close(g_pc.wfd);
        close(g_cc.rfd);
        close(g_cc.wfd);
        free(big);
        free(small);
        gw_ep_close(ep, 0);
        gw_listener_destroy(l);
        CHECK_ST(gw_context_destroy(ctx), GW_OK);
    }
    fprintf(stderr, "  %d of %d completed last messages lost\n", lost, ROUNDS);
    CHECK(lost == 0);
}

/* ---- stream_broken, join_missing: a hand-written peer of two streams ------------------ */
static int g_join; /* the raw peer opens stream 1 (and then closes it) */

static int raw_connect(const char *addr_in)
{
    char addr[80];
    snprintf(addr, sizeof(addr), "%s", addr_in);
    char *colon = strrchr(addr, ':');
    REQUIRE(colon);
    *colon = '\0';
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
    inet_pton(AF_INET, addr, &sa.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct timeval tv = {.tv_sec = 20};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    REQUIRE(fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
    return fd;
}

static int raw_two_streams(void *arg)
{
    (void)arg;
    char addr[80];
    REQUIRE(gwt_chan_recv(&g_cc, addr, sizeof(addr), 20000) > 0);
    int fd0 = raw_connect(addr);
    uint64_t token = 0;
    REQUIRE(gwt_raw_tcp_handshake_n(fd0, 2, &token) == 0);
    if (g_join) {
        int fd1 = raw_connect(addr);
        REQUIRE(gwt_raw_tcp_join(fd1, token, 1) == 0);
        gwt_chan_expect(&g_cc, NULL, "accepted");
        close(fd1); /* stream 1 ends; stream 0 stays */
    } else {
        /* one small message on stream 0 for the server to receive */
        uint8_t hdr[GW_TCP_HDR], msg[64];
        memset(msg, 0x5a, sizeof(msg));
        gw_tcp_hdr_t h = {.type = GW_TCP_EAGER, .len = sizeof(msg), .val = 9};
        gw_tcp_hdr_encode(hdr, &h);
        REQUIRE(send(fd0, hdr, sizeof(hdr), MSG_NOSIGNAL) == (ssize_t)sizeof(hdr));
        REQUIRE(send(fd0, msg, sizeof(msg), MSG_NOSIGNAL) == (ssize_t)sizeof(msg));
    }
    gwt_chan_expect(&g_cc, NULL, "bye"); /* stream 0 open until then */
    close(fd0);
    return 0;
}

static void case_raw_streams(int join)
{
    g_join = join;
    setenv("GPUWIRE_PEER_TIMEOUT_MS", "1000", 1);
    setenv("GPUWIRE_CONNECT_TIMEOUT_MS", "1000", 1);
    unsetenv("GPUWIRE_TCP_STREAMS");
    REQUIRE(gwt_chan_pair(&g_pc, &g_cc) == 0);
    int pid = gwt_spawn(raw_two_streams, NULL);
    gw_context_t *ctx = it_ctx();
    gw_listener_t *l = NULL;
    REQUIRE_OK(gw_listen(ctx, "127.0.0.1:0", &l));
    char addr[80];
    REQUIRE_OK(gw_listener_addr(l, addr, sizeof(addr)));
    REQUIRE(gwt_chan_send(&g_pc, addr, (uint32_t)strlen(addr) + 1) == 0);
    gw_ep_t *ep = NULL;
    IT_OK(ctx, gw_accept(l, 30000, &ep)); /* join_missing: handed out after the connect timeout */
    gw_listener_destroy(l);
    gw_ep_info_t info = {.size = sizeof(info)};
    IT_OK(ctx, gw_ep_query(ep, &info));
    fprintf(stderr, "  accepted: %s\n", info.path);
    CHECK(strstr(info.path, join ? "tcp: 2 stream(s)" : "tcp: 1 stream(s)") != NULL);
    if (join) {
        REQUIRE(gwt_chan_send(&g_pc, "accepted", 8) == 0);
        /* a receive waits on the peer: the endpoint must fail, not wait for ever */
        uint8_t buf[64];
        gw_request_t *r = NULL;
        IT_OK(ctx, gw_recv(ep, buf, sizeof(buf), NULL, 1, ~0ull, &r));
        gw_status_t st = gw_request_wait(r, 30000);
        gw_request_free(r);
        IT_OK(ctx, gw_ep_query(ep, &info));
        fprintf(stderr, "  receive: %s; endpoint: %s (%s)\n", gw_status_name(st), gw_status_name(info.error),
                info.error_detail);
        CHECK(GW_IS_ENDPOINT_ERROR(st));
        CHECK_ST(info.error, GW_ERR_CONN_RESET);
        CHECK(strstr(info.error_detail, "tcp stream 1") != NULL);
        CHECK(strstr(info.error_detail, "stream 0 stayed open") != NULL);
    } else {
        uint8_t buf[64];
        gw_request_t *r = NULL;
        CHECK_ST(gwt_outcome(gw_recv(ep, buf, sizeof(buf), NULL, 9, ~0ull, &r), &r, 30000), GW_OK);
        CHECK(buf[0] == 0x5a && buf[63] == 0x5a);
        IT_OK(ctx, gw_ep_query(ep, &info));
        CHECK_ST(info.error, GW_OK);
    }
    REQUIRE(gwt_chan_send(&g_pc, "bye", 3) == 0);
    CHECK(gwt_wait(pid, 30) == 0);
    gw_ep_close(ep, 0);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
}

static void case_stream_broken(void)
{
    case_raw_streams(1);
}

static void case_join_missing(void)
{
    case_raw_streams(0);
}

static const gwt_case_t cases[] = {GWT_CASE(listener_gone), GWT_CASE(last_message), GWT_CASE(stream_broken),
                                   GWT_CASE(join_missing)};

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    fprintf(stderr, "GPUWIRE_TCP_STREAMS=%s\n", getenv("GPUWIRE_TCP_STREAMS") ? getenv("GPUWIRE_TCP_STREAMS") : "auto");
    return GWT_MAIN(argc, argv, cases);
}
