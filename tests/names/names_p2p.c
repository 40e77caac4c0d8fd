/* SPDX-License-Identifier: Apache-2.0 */
/* names_p2p.c - peers and regions by name with no server at all: the agent's
 * address is all a peer needs (gw_peer_add); its handshake hands over the
 * table of published keys.  Covers connection reuse, a region published
 * after the connection, unknown names and regions (GW_ERR_NOT_FOUND with
 * the reason), an address that answers with another agent, a restart under
 * the same name (old keys fail with GW_ERR_INVALID_KEY saying so, the next
 * lookup returns the new ones), and authentication of the exchange. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "names_util.h"

static int ep_failed(void *arg)
{
    gw_ep_info_t info = {.size = sizeof(info)};
    gw_ep_query(arg, &info);
    return info.error != GW_OK;
}

int main(void)
{
    gwt_agent_t b;
    gwt_agent_start(&b, "b", "127.0.0.1:0");
    gw_context_t *a;
    REQUIRE_OK(gw_context_create(NULL, &a));
    REQUIRE_OK(gw_peer_add(a, "b", b.addr));

    /* keys by name; the connection is made once and reused */
    const char *one[] = {"buf"};
    gw_rkey_t *rk = NULL;
    REQUIRE_OK(gw_peer_regions(a, "b", one, 1, &rk));
    gw_ep_t *ep, *ep2;
    REQUIRE_OK(gw_peer_ep(a, "b", &ep));
    REQUIRE_OK(gw_peer_ep(a, "b", &ep2));
    CHECK(ep == ep2);
    uint64_t raddr;
    size_t rlen;
    REQUIRE_OK(gw_rkey_range(rk, &raddr, &rlen));
    CHECK(rlen == 1 << 20 && raddr == (uint64_t)(uintptr_t)b.buf);
    CHECK_ST(gwt_put_wait(ep, "hello, b", 9, raddr + 100, rk), GW_OK);
    CHECK(memcmp(b.buf + 100, "hello, b", 9) == 0);
    gw_peer_info_t pi = {.size = sizeof(pi)};
    REQUIRE_OK(gw_peer_query(a, "b", &pi));
    CHECK(pi.connected == 1 && pi.epoch != 0 && pi.listed == -1 && pi.restarts == 0);

    /* a region that is not published: NOT_FOUND naming it and what there is */
    const char *nope[] = {"buf", "nope"};
    gw_rkey_t *two[2] = {(gw_rkey_t *)1, (gw_rkey_t *)1};
    CHECK_ST(gw_peer_regions(a, "b", nope, 2, two), GW_ERR_NOT_FOUND);
    CHECK(two[0] == NULL && two[1] == NULL); /* all or nothing */
    CHECK(strstr(gw_last_error(a), "no region \"nope\"") && strstr(gw_last_error(a), "publishes: buf"));

    /* published after we connected: the miss refreshes the table from the agent */
    gwt_agent_cmd(&b, 1);
    const char *late[] = {"late", "buf"};
    gw_rkey_t *lk[2];
    REQUIRE_OK(gw_peer_regions(a, "b", late, 2, lk));
    CHECK_ST(gwt_put_wait(ep, "late!", 6, (uint64_t)(uintptr_t)b.late_buf, lk[0]), GW_OK);
    CHECK(memcmp(b.late_buf, "late!", 6) == 0);
    gw_rkey_destroy(lk[0]);
    gw_rkey_destroy(lk[1]);

    /* an address that answers with another agent; a name nobody gave */
    REQUIRE_OK(gw_peer_add(a, "c", b.addr));
    gw_ep_t *cep;
    CHECK_ST(gw_peer_ep(a, "c", &cep), GW_ERR_NOT_FOUND);
    CHECK(strstr(gw_last_error(a), "is agent \"b\"") != NULL);
    double t0 = gwt_now_s();
    CHECK_ST(gw_peer_ep(a, "nobody", &cep), GW_ERR_NOT_FOUND);
    CHECK(gwt_now_s() - t0 < 0.5);
    CHECK(strstr(gw_last_error(a), "GPUWIRE_DIRECTORY") != NULL);
    CHECK_ST(gw_peer_ep(a, "bad name!", &cep), GW_ERR_INVALID);
    CHECK_ST(gw_peer_watch(a, 0, NULL, NULL), GW_ERR_UNAVAILABLE); /* no directory, no watch */
    CHECK(strstr(gw_last_error(a), "GPUWIRE_DIRECTORY") != NULL);

    /* restart under the same name and address: a new epoch */
    uint64_t epoch1 = pi.epoch;
    gwt_agent_cmd(&b, 2);
    CHECK(gwt_progress_until(a, ep_failed, ep, 10000));
    gw_ep_t *ep3;
    REQUIRE_OK(gw_peer_ep(a, "b", &ep3));
    CHECK(ep3 != ep);
    REQUIRE_OK(gw_peer_query(a, "b", &pi));
    CHECK(pi.restarts == 1 && pi.epoch > epoch1 && pi.connected == 1);
    CHECK_ST(gwt_put_wait(ep3, "x", 1, raddr, rk), GW_ERR_INVALID_KEY); /* an old key on the new endpoint */
    CHECK(strstr(gw_last_error(a), "restarted") != NULL);
    fprintf(stderr, "old key, new endpoint: %s\n", gw_last_error(a));
    CHECK_ST(gwt_put_wait(ep, "x", 1, raddr, rk), GW_ERR_INVALID_KEY); /* and on the old one */
    CHECK(strstr(gw_last_error(a), "restarted") != NULL);
    gw_rkey_t *rk2;
    REQUIRE_OK(gw_peer_regions(a, "b", one, 1, &rk2));
    CHECK_ST(gwt_put_wait(ep3, "again", 6, raddr + 8, rk2), GW_OK);
    CHECK(memcmp(b.buf + 8, "again", 6) == 0);

    CHECK_ST(gw_context_destroy(a), GW_ERR_BUSY); /* keys from gw_peer_regions() alive */
    CHECK(strstr(gw_last_error(a), "gw_peer_regions") != NULL);
    gw_rkey_destroy(rk);
    gw_rkey_destroy(rk2);
    CHECK_ST(gw_context_destroy(a), GW_OK); /* closes the endpoints it made */
    gwt_agent_stop(&b);

    /* a directory that does not answer: lookups and registration say so, fast,
     * and leave nothing behind */
    setenv("GPUWIRE_DIRECTORY", "etcd://127.0.0.1:1", 1);
    gw_context_t *d;
    REQUIRE_OK(gw_context_create(NULL, &d));
    t0 = gwt_now_s();
    CHECK_ST(gw_peer_ep(d, "x", &cep), GW_ERR_UNAVAILABLE);
    CHECK(strstr(gw_last_error(d), "etcd://127.0.0.1:1") != NULL);
    gw_listener_t *dl;
    CHECK_ST(gw_agent_listen(d, "x", "127.0.0.1:0", &dl), GW_ERR_UNAVAILABLE);
    CHECK(gwt_now_s() - t0 < 5.0);
    fprintf(stderr, "directory down: %s\n", gw_last_error(d));
    CHECK_ST(gw_context_destroy(d), GW_OK); /* no listener was left behind */
    setenv("GPUWIRE_DIRECTORY", "", 1);

    /* authentication covers the exchange: same secret works, another fails */
    setenv("GPUWIRE_AUTH_SECRET", "s3cret-one", 1);
    gwt_agent_t s;
    gwt_agent_start(&s, "s", "127.0.0.1:0");
    gw_context_t *good, *bad;
    REQUIRE_OK(gw_context_create(NULL, &good));
    setenv("GPUWIRE_AUTH_SECRET", "s3cret-two", 1);
    REQUIRE_OK(gw_context_create(NULL, &bad));
    unsetenv("GPUWIRE_AUTH_SECRET");
    REQUIRE_OK(gw_peer_add(good, "s", s.addr));
    REQUIRE_OK(gw_peer_add(bad, "s", s.addr));
    gw_rkey_t *sk;
    gw_status_t st = gw_peer_regions(good, "s", one, 1, &sk);
    if (st == GW_ERR_NOT_BUILT || st == GW_ERR_AUTH) {
        if (!strstr(gw_build_features(), "auth"))
            fprintf(stderr, "(no auth in this build: the auth half is not run)\n");
        else
            CHECK_ST(st, GW_OK);
    } else {
        CHECK_ST(st, GW_OK);
        gwt_agent_cmd(&s, 1); /* a refresh is an extension-only handshake: authenticated too */
        const char *sl[] = {"late"};
        gw_rkey_t *lk2;
        CHECK_ST(gw_peer_regions(good, "s", sl, 1, &lk2), GW_OK);
        if (lk2)
            gw_rkey_destroy(lk2);
        gw_rkey_destroy(sk);
        CHECK_ST(gw_peer_regions(bad, "s", one, 1, &sk), GW_ERR_AUTH);
        fprintf(stderr, "wrong secret: %s\n", gw_last_error(bad));
    }
    CHECK_ST(gw_context_destroy(good), GW_OK);
    CHECK_ST(gw_context_destroy(bad), GW_OK);
    gwt_agent_stop(&s);
    return gwt_done("names_p2p");
}
