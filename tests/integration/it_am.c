/* SPDX-License-Identifier: Apache-2.0 */
/* it_am.c - the transports' small-message primitive (transport/base/tl.h
 * am_send, ep_base.h gw_am_set) between two processes, over the transport
 * GPUWIRE_TRANSPORTS names.  Run by name (argv[1], gwt_main):
 *   echo       the parent sends active messages of 0, 1, 100 and
 *              GW_AM_MAX bytes (and 200 more of 64) for handler 1; the
 *              child's handler copies each, its main loop sends it back for
 *              the parent's handler 2.  Every one comes back once, whole,
 *              in the order sent.
 *   refused    the sending side refuses a handler id out of range and a
 *              payload over GW_AM_MAX (GW_ERR_INVALID, nothing sent), and an
 *              active message for a handler the peer never set fails the
 *              peer's endpoint with GW_ERR_PROTOCOL naming the handler. */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "core/util.h"
#include "harness.h"
#include "transport/base/ep_base.h"
#include "transport/base/tl.h"

#define NMSG 204

static gwt_chan_t g_pc, g_cc; /* parent's end, child's end */

typedef struct am_box {
    unsigned n;
    size_t len[NMSG + 4];
    uint8_t data[NMSG + 4][GW_AM_MAX];
} am_box_t;

static void on_am(void *arg, gw_ep_base_t *ep, const void *data, size_t len)
{
    am_box_t *b = arg;
    (void)ep;
    if (b->n >= NMSG + 4)
        return;
    b->len[b->n] = len;
    memcpy(b->data[b->n], data, len);
    b->n++;
}

static size_t msg_len(unsigned i)
{
    static const size_t first[] = {0, 1, 100, GW_AM_MAX};
    return i < 4 ? first[i] : 64;
}

static void msg_fill(uint8_t *p, unsigned i)
{
    for (size_t k = 0; k < msg_len(i); k++)
        p[k] = (uint8_t)(i * 31 + k);
}

static gw_status_t am_send(gw_ep_t *ep, unsigned id, const void *data, size_t len)
{
    return ep->ops->am_send(ep->tl, id, data, len);
}

/* The child: handler 1 collects, the loop echoes each for handler 2. */
static int child(void *arg)
{
    (void)arg;
    static am_box_t box;
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    REQUIRE_OK(gw_am_set(&ctx->core, 1, on_am, &box));
    gw_listener_t *l;
    gw_ep_t *ep = gwt_listen_accept(ctx, &g_cc, &l);
    unsigned sent = 0;
    uint64_t until = gw_now_ns() + 60ull * 1000000000ull;
    while (gw_now_ns() < until) {
        gw_progress(ctx);
        while (sent < box.n)
            if (am_send(ep, 2, box.data[sent], box.len[sent]) == GW_OK)
                sent++;
            else
                break;
        if (gw_ep_failed(&ep->base)) { /* refused: report what failed it */
            char msg[600];
            snprintf(msg, sizeof(msg), "%d %s", (int)ep->base.error, ep->base.error_detail);
            gwt_chan_send(&g_cc, msg, (uint32_t)strlen(msg) + 1);
            break;
        }
        char tok[8];
        if (gwt_chan_recv(&g_cc, tok, sizeof(tok), 0) > 0 && !strcmp(tok, "quit"))
            break;
    }
    gw_ep_close(ep, 1000);
    gw_listener_destroy(l);
    gw_context_destroy(ctx);
    return gwt_failures ? 1 : 0;
}

static gw_ep_t *start(gw_context_t **ctx, int *pid)
{
    gwt_chan_pair(&g_pc, &g_cc);
    *pid = gwt_spawn(child, NULL);
    return gwt_connect_chan(&g_pc, NULL, ctx);
}

static void case_echo(void)
{
    static am_box_t back;
    int pid;
    gw_context_t *ctx;
    gw_ep_t *ep = start(&ctx, &pid);
    REQUIRE_OK(gw_am_set(&ctx->core, 2, on_am, &back));
    uint8_t m[GW_AM_MAX];
    for (unsigned i = 0; i < NMSG; i++) {
        msg_fill(m, i);
        REQUIRE_OK(am_send(ep, 1, m, msg_len(i)));
        if (i % 16 == 0)
            gw_progress(ctx);
    }
    uint64_t until = gw_now_ns() + 30ull * 1000000000ull;
    while (back.n < NMSG && gw_now_ns() < until)
        gw_progress(ctx);
    CHECK(back.n == NMSG);
    for (unsigned i = 0; i < back.n && i < NMSG; i++) {
        msg_fill(m, i);
        CHECK(back.len[i] == msg_len(i));
        CHECK(memcmp(back.data[i], m, msg_len(i)) == 0);
    }
    gwt_chan_send(&g_pc, "quit", 5);
    gw_ep_close(ep, 1000);
    gw_context_destroy(ctx);
    CHECK(gwt_wait(pid, 20) == 0);
}

static void case_refused(void)
{
    int pid;
    gw_context_t *ctx;
    gw_ep_t *ep = start(&ctx, &pid);
    uint8_t m[GW_AM_MAX + 1] = {0};
    CHECK(am_send(ep, GW_AM_IDS, m, 1) == GW_ERR_INVALID);
    CHECK(strstr(gw_last_error(ctx), "handler id") != NULL);
    CHECK(am_send(ep, 1, m, GW_AM_MAX + 1) == GW_ERR_INVALID);
    /* handler 5: the child never set it */
    REQUIRE_OK(am_send(ep, 5, m, 8));
    char msg[600] = "";
    uint64_t until = gw_now_ns() + 30ull * 1000000000ull;
    int got = -1;
    while (got <= 0 && gw_now_ns() < until) {
        gw_progress(ctx);
        got = gwt_chan_recv(&g_pc, msg, sizeof(msg), 10);
    }
    REQUIRE(got > 0);
    fprintf(stderr, "child's endpoint: %s\n", msg);
    CHECK(atoi(msg) == GW_ERR_PROTOCOL);
    CHECK(strstr(msg, "handler 5") != NULL);
    gw_ep_close(ep, 1000);
    gw_context_destroy(ctx);
    CHECK(gwt_wait(pid, 20) == 0);
}

static const gwt_case_t cases[] = {GWT_CASE(echo), GWT_CASE(refused)};

int main(int argc, char **argv)
{
    return GWT_MAIN(argc, argv, cases);
}
