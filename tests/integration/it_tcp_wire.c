/* SPDX-License-Identifier: Apache-2.0 */
/* it_tcp_wire.c - tcp cases that need exact control of when each byte
 * arrives: a raw socket in a child process completes the handshake itself
 * (one stream) and writes frames (transport/tcp/tcp.h) in pieces, while the
 * parent receives through the public API.  Run by name (argv[1], gwt_main):
 *   eager_split  an eager message (tag 5, 8192 bytes) arrives half; a
 *                receive for tag 5 is posted; the rest arrives, then a
 *                16-byte message of the same tag.  The first receive must
 *                get the first message and the second receive the second
 *                (matching goes by the headers' order, not by which payload
 *                was complete first: the NCCL plugin's tag-0 flake).  The
 *                half-arrived message is not yet visible to gw_probe.
 *   eager_cancel as eager_split, but the receive posted during the half
 *                message is canceled before the rest arrives: the message
 *                stays queued, whole, for the next receive, and the 16-byte
 *                one after it for the receive after that.
 *   eager_cut    the same half message, then the peer closes: the receive
 *                posted meanwhile fails with an endpoint error in bounded
 *                time (it does not wait forever for a record that will never
 *                fill), and nothing leaks (the sanitizer builds check). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "it.h"
#include "raw_peer.h"
#include "transport/tcp/tcp.h"

#define BIG 8192
#define HALF 1000
#define SMALL 16
#define TAG 5

static gwt_chan_t g_pc, g_cc; /* parent's end, child's end */
static int g_cut, g_cancel;

static void fill(uint8_t *p, size_t n, uint8_t seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(seed + i * 7);
}

static int send_all(int fd, const void *p, size_t n)
{
    return send(fd, p, n, MSG_NOSIGNAL) == (ssize_t)n ? 0 : -1;
}

/* The raw peer: a one-stream tcp client from another "host". */
static int raw_peer(void *arg)
{
    (void)arg;
    char addr[80];
    if (gwt_chan_recv(&g_cc, addr, sizeof(addr), 20000) <= 0)
        return 2;
    char *colon = strrchr(addr, ':');
    *colon = '\0';
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
    inet_pton(AF_INET, addr, &sa.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
        return 3;
    if (gwt_raw_tcp_handshake(fd) != 0)
        return 4;

    static uint8_t big[BIG], small[SMALL], hdr[GW_TCP_HDR];
    fill(big, BIG, 1);
    fill(small, SMALL, 100);
    gw_tcp_hdr_t h = {.type = GW_TCP_EAGER, .len = BIG, .val = TAG};
    gw_tcp_hdr_encode(hdr, &h);
    if (send_all(fd, hdr, sizeof(hdr)) != 0 || send_all(fd, big, HALF) != 0)
        return 6;
    if (gwt_chan_send(&g_cc, "half", 5) != 0)
        return 7;
    char tok[16];
    if (gwt_chan_recv(&g_cc, tok, sizeof(tok), 30000) <= 0 || strcmp(tok, "posted") != 0)
        return 8;
    if (g_cut) {
        close(fd);
        return 0;
    }
    h = (gw_tcp_hdr_t){.type = GW_TCP_EAGER, .len = SMALL, .val = TAG};
    if (send_all(fd, big + HALF, BIG - HALF) != 0)
        return 9;
    gw_tcp_hdr_encode(hdr, &h);
    if (send_all(fd, hdr, sizeof(hdr)) != 0 || send_all(fd, small, SMALL) != 0)
        return 10;
    /* stay connected until the parent has both messages */
    if (gwt_chan_recv(&g_cc, tok, sizeof(tok), 30000) <= 0)
        return 11;
    close(fd);
    return 0;
}

static void progress_for(gw_context_t *ctx, double s)
{
    double end = it_now() + s;
    while (it_now() < end)
        if (gw_progress(ctx) == 0)
            gw_context_wait(ctx, 1);
}

/* the three cases differ only in what happens after the half message
 * (g_cut, g_cancel) */
static void run_eager(void)
{
    REQUIRE(gwt_chan_pair(&g_pc, &g_cc) == 0);
    int pid = gwt_spawn(raw_peer, NULL);
    gw_context_t *ctx = it_ctx();
    gw_listener_t *l = NULL;
    gw_ep_t *ep = gwt_listen_accept(ctx, &g_pc, &l);
    gwt_chan_expect(&g_pc, ctx, "half");
    /* the header and the first HALF bytes are read; the rest is not sent */
    progress_for(ctx, 0.2);
    gw_probe_info_t pi = {.size = sizeof(pi)};
    CHECK_ST(gw_probe(ep, TAG, ~0ull, &pi), GW_INPROGRESS); /* not all here: not receivable yet */

    static uint8_t r1buf[BIG + 64], r2buf[SMALL + 64], want[BIG];
    gw_request_t *r1 = NULL, *r2 = NULL;
    REQUIRE_OK(gw_recv(ep, r1buf, sizeof(r1buf), NULL, TAG, ~0ull, &r1));
    CHECK_ST(gw_request_test(r1), GW_INPROGRESS);
    if (g_cancel) { /* withdrawn before its message is whole: the message is not lost */
        CHECK_ST(gw_request_cancel(r1), GW_OK);
        CHECK_ST(gw_request_test(r1), GW_ERR_CANCELED);
        gw_request_free(r1);
        REQUIRE(gwt_chan_send(&g_pc, "posted", 7) == 0);
        double end = it_now() + 20 * it_time_scale();
        gw_status_t pst;
        while ((pst = gw_probe(ep, TAG, ~0ull, &pi)) == GW_INPROGRESS && it_now() < end)
            gw_context_wait(ctx, 1);
        CHECK_ST(pst, GW_OK);
        CHECK(pi.length == BIG); /* the older message first */
        REQUIRE_OK(gw_recv(ep, r1buf, sizeof(r1buf), NULL, TAG, ~0ull, &r1));
    } else {
        REQUIRE(gwt_chan_send(&g_pc, "posted", 7) == 0);
    }
    if (g_cut) {
        gw_status_t st = gw_request_wait(r1, (int)(20000 * it_time_scale()));
        gw_request_info_t i1 = {.size = sizeof(i1)};
        REQUIRE_OK(gw_request_info(r1, &i1));
        fprintf(stderr, "it_tcp_wire: the receive posted during the cut message: %s (%s)\n",
                gw_status_name(st), i1.error_detail);
        CHECK(st == GW_ERR_CONN_RESET || st == GW_ERR_ENDPOINT_FAILED);
        gw_request_free(r1);
    } else {
        REQUIRE_OK(gw_recv(ep, r2buf, sizeof(r2buf), NULL, TAG, ~0ull, &r2));
        CHECK_ST(gw_request_wait(r1, (int)(20000 * it_time_scale())), GW_OK);
        CHECK_ST(gw_request_wait(r2, (int)(20000 * it_time_scale())), GW_OK);
        gw_request_info_t i1 = {.size = sizeof(i1)}, i2 = {.size = sizeof(i2)};
        REQUIRE_OK(gw_request_info(r1, &i1));
        REQUIRE_OK(gw_request_info(r2, &i2));
        fprintf(stderr, "it_tcp_wire: first receive got %zu bytes, second %zu\n", i1.length, i2.length);
        CHECK(i1.length == BIG && i2.length == SMALL);
        fill(want, BIG, 1);
        CHECK(!memcmp(r1buf, want, BIG));
        fill(want, SMALL, 100);
        CHECK(!memcmp(r2buf, want, SMALL));
        gw_request_free(r1);
        gw_request_free(r2);
        REQUIRE(gwt_chan_send(&g_pc, "done", 5) == 0);
    }
    CHECK(gwt_wait(pid, 30) == 0);
    gw_ep_close(ep, 1000);
    gw_listener_destroy(l);
    gw_context_destroy(ctx);
}

static void case_eager_split(void)
{
    run_eager();
}

static void case_eager_cancel(void)
{
    g_cancel = 1;
    run_eager();
}

static void case_eager_cut(void)
{
    g_cut = 1;
    run_eager();
}

static const gwt_case_t cases[] = {GWT_CASE(eager_split), GWT_CASE(eager_cancel), GWT_CASE(eager_cut)};

int main(int argc, char **argv)
{
    return GWT_MAIN(argc, argv, cases);
}
