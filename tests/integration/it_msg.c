/* SPDX-License-Identifier: Apache-2.0 */
/* it_msg.c - tagged send/recv between two processes: sizes 0 .. 8 MiB (eager
 * and rendezvous), messages that arrive before their receive, tag masks and
 * oldest-first matching, truncation (status, full length, buffer filled),
 * both directions, many outstanding sends, the context fd waking a poll()
 * when a message arrives, a put_notify's notification (and a flush)
 * not held behind an earlier send the target has not received, and
 * untracked sends whose buffer is overwritten as soon as gw_send returns. */
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "it.h"

#define REGION (20u << 20)

static const size_t g_sizes[] = {0, 1, 100, 4096, 65535, 65536, 65537, 300000, 1u << 20,
                                  (8u << 20) + 1};
#define NSIZES (sizeof(g_sizes) / sizeof(g_sizes[0]))

static it_reply_t child_recv(it_target_t *T, gw_context_t *ctx, size_t len, uint64_t tag,
                             uint64_t mask, uint64_t seed)
{
    it_cmd_t c = {.type = IT_CMD_RECV, .region = 0, .off = 0, .len = len, .tag = tag, .mask = mask,
                  .seed = seed};
    return it_target_cmd(T, &c, ctx);
}

int main(void)
{
    it_target_cfg_t cfg = {.n_eps = 1, .n_regions = 1,
                           .region = {{REGION, GW_ACCESS_REMOTE_WRITE | GW_ACCESS_REMOTE_READ, 0}}};
    it_target_t T;
    char addr[128];
    it_target_start(&T, &cfg, addr, sizeof(addr));
    gw_context_t *ctx = it_ctx();
    gw_ep_t *ep = it_connect(ctx, addr);
    uint8_t keys[1][IT_KEY_MAX];
    size_t klen[1];
    REQUIRE(it_target_keys(&T, keys, klen) == 0);
    uint8_t *buf = it_alloc(REGION), *rbuf = it_alloc(REGION);
    gw_mem_t *mbuf = NULL;
    IT_OK(ctx, gw_mem_reg(ctx, buf, REGION, GW_ACCESS_LOCAL, &mbuf));

    /* 1. every size, receive posted after the send was */
    for (size_t i = 0; i < NSIZES; i++) {
        gw_request_t *s = NULL;
        gwt_fill(buf, g_sizes[i], 700 + i);
        IT_OK(ctx, gw_send(ep, buf, g_sizes[i], (i & 1) ? mbuf : NULL, 0x100 + i, &s));
        it_reply_t r = child_recv(&T, ctx, g_sizes[i], 0x100 + i, ~0ull, 700 + i);
        CHECK_ST((gw_status_t)r.a, GW_OK);
        CHECK((size_t)r.b == g_sizes[i]);
        CHECK((uint64_t)r.c == 0x100 + i);
        if (r.d != -1)
            fprintf(stderr, "send of %zu bytes: byte %lld differs\n", g_sizes[i], (long long)r.d);
        CHECK(r.d == -1);
        CHECK_ST(it_wait_free(s, 30000), GW_OK);
    }

    /* 2. unexpected messages; masks; oldest match first */
    gw_request_t *s[3];
    for (int i = 0; i < 3; i++) {
        gwt_fill(buf + (size_t)i * 200000, 200000, 40 + (uint64_t)i);
        IT_OK(ctx, gw_send(ep, buf + (size_t)i * 200000, (size_t)(i == 1 ? 200000 : 1000), NULL,
                           0xAB00 + (uint64_t)i, &s[i]));
    }
    it_cmd_t nap = {.type = IT_CMD_SLEEP_MS, .off = 200};
    it_target_cmd(&T, &nap, ctx); /* they all reach the child before its receives */
    it_reply_t r = child_recv(&T, ctx, 4096, 0xAB02, ~0ull, 42); /* exact tag */
    CHECK_ST((gw_status_t)r.a, GW_OK);
    CHECK(r.c == 0xAB02 && r.b == 1000 && r.d == -1);
    r = child_recv(&T, ctx, 300000, 0xAB00, 0xFF00, 40); /* mask: oldest of 0xABxx */
    CHECK_ST((gw_status_t)r.a, GW_OK);
    CHECK(r.c == 0xAB00 && r.b == 1000 && r.d == -1);
    r = child_recv(&T, ctx, 300000, 0, 0, 41); /* wildcard */
    CHECK_ST((gw_status_t)r.a, GW_OK);
    CHECK(r.c == 0xAB01 && r.b == 200000 && r.d == -1);
    for (int i = 0; i < 3; i++)
        CHECK_ST(it_wait_free(s[i], 30000), GW_OK);

    /* 3. truncation: status, the full length, the buffer holds the first bytes */
    size_t tl[2] = {1000, 1u << 20};
    for (int i = 0; i < 2; i++) {
        gw_request_t *sr = NULL;
        gwt_fill(buf, tl[i], 77);
        IT_OK(ctx, gw_send(ep, buf, tl[i], NULL, 0x77, &sr));
        r = child_recv(&T, ctx, 100 + (size_t)i * 4000, 0x77, ~0ull, 77);
        CHECK_ST((gw_status_t)r.a, GW_ERR_TRUNCATED);
        CHECK((size_t)r.b == tl[i]);
        CHECK(r.d == -1); /* the part that fits is right */
        gw_status_t st = it_wait_free(sr, 30000);
        CHECK(st == GW_OK || st == GW_ERR_TRUNCATED);
    }

    /* 4. the other direction, and the context fd wakes poll() */
    int fd = -1;
    IT_OK(ctx, gw_context_fd(ctx, &fd));
    for (size_t i = 0; i < NSIZES; i++) {
        gw_request_t *rr = NULL;
        memset(rbuf, 0, g_sizes[i] + 1);
        IT_OK(ctx, gw_recv(ep, rbuf, g_sizes[i] + 1, NULL, 0x5000 + i, ~0ull, &rr));
        it_cmd_t c = {.type = IT_CMD_SEND, .region = 0, .len = g_sizes[i], .tag = 0x5000 + i,
                      .seed = 900 + i};
        if (i == 0) {
            /* drain, then sleep on the fd: it must wake when the message comes */
            while (gw_progress(ctx) > 0)
                ;
            REQUIRE(gwt_chan_send(&T.to_child, &c, sizeof(c)) == 0);
            double t0 = it_now();
            int woke = 0, polls = 0;
            while (gw_request_test(rr) == GW_INPROGRESS && it_now() - t0 < 10) {
                struct pollfd p = {.fd = fd, .events = POLLIN};
                polls++;
                if (poll(&p, 1, 10000) > 0)
                    woke = 1;
                while (gw_progress(ctx) > 0)
                    ;
            }
            /* (a progress thread may complete the receive before the first poll) */
            CHECK(woke || (polls == 0 && !strcmp(gw_setting_value(ctx, "GPUWIRE_PROGRESS_THREAD"), "on")));
            it_reply_t sr;
            REQUIRE(gwt_chan_recv(&T.to_parent, &sr, sizeof(sr), 30000) == (int)sizeof(sr));
            CHECK_ST((gw_status_t)sr.a, GW_OK);
        } else {
            it_reply_t sr = it_target_cmd(&T, &c, ctx);
            CHECK_ST((gw_status_t)sr.a, GW_OK);
        }
        gw_request_info_t ri = {.size = sizeof(ri)};
        CHECK_ST(gw_request_wait(rr, 30000), GW_OK);
        gw_request_info(rr, &ri);
        CHECK(ri.length == g_sizes[i] && ri.tag == 0x5000 + i);
        CHECK(gwt_verify(rbuf, g_sizes[i], 900 + i) == -1);
        gw_request_free(rr);
    }

    /* 5. many outstanding sends */
    enum { MANY = 200, MLEN = 3000 };
    gw_request_t *ms[MANY];
    for (int i = 0; i < MANY; i++) {
        gwt_fill(buf + (size_t)i * MLEN, MLEN, 3000 + (uint64_t)i);
        IT_OK(ctx, gw_send(ep, buf + (size_t)i * MLEN, MLEN, mbuf, 0x9000 + (uint64_t)i, &ms[i]));
    }
    for (int i = MANY - 1; i >= 0; i -= 7) { /* receive out of order by tag */
        r = child_recv(&T, ctx, MLEN, 0x9000 + (uint64_t)i, ~0ull, 3000 + (uint64_t)i);
        CHECK(r.a == GW_OK && r.b == MLEN && r.d == -1);
    }
    for (int i = 0; i < MANY; i++) {
        if ((MANY - 1 - i) % 7 == 0)
            continue;
        r = child_recv(&T, ctx, MLEN, 0x9000 + (uint64_t)i, ~0ull, 3000 + (uint64_t)i);
        CHECK(r.a == GW_OK && r.b == MLEN && r.d == -1);
    }
    for (int i = 0; i < MANY; i++)
        CHECK_ST(it_wait_free(ms[i], 30000), GW_OK);

    /* 6. a put_notify after a large send the target has not received: its
     * notification is ordered after earlier puts only, so a target that
     * waits for it before receiving gets it (a small put_notify, and one
     * large enough to be striped over tcp's streams); a flush posted after
     * them completes before the target receives too */
    gw_rkey_t *rk = NULL;
    IT_OK(ctx, gw_rkey_unpack(ep, keys[0], klen[0], &rk));
    uint64_t raddr = 0;
    IT_OK(ctx, gw_rkey_range(rk, &raddr, NULL));
    const size_t nlen[2] = {4096, 4u << 20};
    for (int i = 0; i < 2; i++) {
        const size_t big = 8u << 20;
        gw_request_t *sr = NULL, *nr = NULL;
        gwt_fill(buf, big, 1200 + (uint64_t)i);
        IT_OK(ctx, gw_send(ep, buf, big, mbuf, 0x6000 + (uint64_t)i, &sr));
        gwt_fill(buf + big, nlen[i], 1300 + (uint64_t)i);
        IT_OK(ctx, gw_put_notify(ep, buf + big, nlen[i], mbuf, raddr + big, rk, 6100 + (uint64_t)i, &nr));
        gw_request_t *fr = NULL;
        IT_OK(ctx, gw_flush(ep, &fr)); /* waits for the puts, not for the send */
        it_cmd_t w = {.type = IT_CMD_NOTIFY_ANY, .ep = 0, .off = 10000};
        r = it_target_cmd(&T, &w, ctx);
        if (r.a != GW_OK)
            fprintf(stderr, "put_notify of %zu bytes after an unreceived send of %zu: the target's wait ended %s\n",
                    nlen[i], big, gw_status_name((gw_status_t)r.a));
        CHECK_ST((gw_status_t)r.a, GW_OK);
        CHECK(r.b == 6100 + i);
        it_cmd_t v = {.type = IT_CMD_VERIFY, .region = 0, .off = big, .len = nlen[i], .seed = 1300 + (uint64_t)i};
        r = it_target_cmd(&T, &v, ctx);
        CHECK(r.a == -1); /* its data was there with it */
        CHECK_ST(it_wait_free(nr, 30000), GW_OK);
        CHECK_ST(it_wait_free(fr, 10000), GW_OK); /* before the target receives */
        r = child_recv(&T, ctx, big, 0x6000 + (uint64_t)i, ~0ull, 1200 + (uint64_t)i); /* now the message */
        CHECK(r.a == GW_OK && (size_t)r.b == big && r.d == -1);
        CHECK_ST(it_wait_free(sr, 30000), GW_OK);
    }
    gw_rkey_destroy(rk);

    /* 7. untracked small sends from one buffer the caller overwrites as
     * soon as gw_send returns (it holds no request to wait on): each
     * message arrives as it was at the call */
    {
        enum { NU = 50 };
        uint8_t tmp[200];
        for (int i = 0; i < NU; i++) {
            size_t len = 8 + (size_t)i * 3;
            gwt_fill(tmp, len, 5000 + (uint64_t)i);
            IT_OK(ctx, gw_send(ep, tmp, len, NULL, 0x7700 + (uint64_t)i, NULL));
            memset(tmp, 0xEE, sizeof(tmp));
        }
        int bad = 0;
        for (int i = 0; i < NU; i++) {
            it_reply_t ur = child_recv(&T, ctx, 8 + (size_t)i * 3, 0x7700 + (uint64_t)i, ~0ull, 5000 + (uint64_t)i);
            if (ur.a != GW_OK || ur.d != -1)
                bad++;
        }
        if (bad)
            fprintf(stderr, "untracked sends: %d of %d arrived wrong (the buffer was read after gw_send)\n", bad, NU);
        CHECK(bad == 0);
    }

    IT_OK(ctx, gw_ep_close(ep, 5000));
    CHECK(it_target_stop(&T, ctx) == 0);
    IT_OK(ctx, gw_mem_dereg(mbuf));
    IT_OK(ctx, gw_context_destroy(ctx));
    free(buf);
    free(rbuf);
    return gwt_done("it_msg");
}
