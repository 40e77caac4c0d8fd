/* SPDX-License-Identifier: Apache-2.0 */
/* it_lifetime.c - object lifetimes and argument checks: destroying a context
 * or closing an endpoint with live children is refused (GW_ERR_BUSY) and
 * leaves everything usable; deregistering a region a local operation still
 * uses is refused; closing an endpoint with outstanding operations completes
 * or cancels each of them (their status stays readable); waits time out
 * without invalidating the request; destroy/close/free accept NULL; bad
 * arguments give GW_ERR_INVALID.  Its time bounds scale by IT_TIME_SCALE
 * (it.h: an emulated guest is slower, not different). */
#include <stdlib.h>
#include <string.h>

#include "it.h"

#define BIG (64u << 20)

int main(void)
{
    it_target_cfg_t cfg = {.n_eps = 1, .n_regions = 1,
                           .region = {{BIG, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, 0}}};
    it_target_t T;
    char addr[128];
    it_target_start(&T, &cfg, addr, sizeof(addr));
    gw_context_t *ctx = it_ctx();
    gw_ep_t *ep = it_connect(ctx, addr);
    uint64_t ra;
    size_t rl;
    gw_rkey_t *rk = it_single_key(&T, ctx, ep, &ra, &rl);
    uint8_t *buf = it_alloc(BIG);
    gwt_fill(buf, BIG, 12);
    gw_mem_t *m = NULL;
    IT_OK(ctx, gw_mem_reg(ctx, buf, BIG, GW_ACCESS_LOCAL, &m));
    gw_listener_t *l = NULL;
    IT_OK(ctx, gw_listen(ctx, "127.0.0.1:0", &l));
    gw_request_t *r = NULL;

    /* parents refuse to die before their children, and change nothing */
    CHECK_ST(gw_context_destroy(ctx), GW_ERR_BUSY);
    fprintf(stderr, "context with children: %s\n", gw_last_error(ctx));
    CHECK_ST(gw_ep_close(ep, 1000), GW_ERR_BUSY);
    fprintf(stderr, "endpoint with an rkey: %s\n", gw_last_error(ctx));
    IT_OK(ctx, gw_put(ep, buf, 4096, m, ra, rk, &r)); /* all still works */
    CHECK_ST(it_wait_free(r, 10000), GW_OK);
    gw_listener_destroy(l);
    CHECK_ST(gw_context_destroy(ctx), GW_ERR_BUSY); /* still an endpoint and a region */

    /* a region a local operation still reads cannot be deregistered */
    IT_OK(ctx, gw_put(ep, buf, BIG, m, ra, rk, &r));
    gw_status_t st = gw_mem_dereg(m);
    if (gw_request_test(r) == GW_INPROGRESS || st == GW_ERR_BUSY) {
        CHECK_ST(st, GW_ERR_BUSY);
        fprintf(stderr, "region in use: %s\n", gw_last_error(ctx));
        CHECK_ST(it_wait_free(r, 20000), GW_OK);
        it_cmd_t v = {.type = IT_CMD_VERIFY, .len = BIG, .seed = 12};
        CHECK(it_target_cmd(&T, &v, ctx).a == -1); /* the refused dereg did not disturb it */
    } else {
        fprintf(stderr, "the 64 MiB put finished before gw_mem_dereg: BUSY case not exercised\n");
        gw_request_free(r);
        IT_OK(ctx, gw_mem_reg(ctx, buf, BIG, GW_ACCESS_LOCAL, &m));
    }

    /* timeouts leave requests valid */
    uint8_t small[64];
    gw_request_t *never = NULL;
    IT_OK(ctx, gw_recv(ep, small, sizeof(small), NULL, 0xDEAD, ~0ull, &never));
    /* (the bounds below say "returns, does not hang", generous for a loaded
     * 2-core machine; each is printed before it is checked) */
    double t0 = it_now();
    CHECK_ST(gw_request_wait(never, 100), GW_ERR_TIMEOUT);
    double dt = it_now() - t0;
    fprintf(stderr, "a 100 ms wait for a receive nothing matches returned after %.3f s (bound %.0f s)\n", dt,
            10 * it_time_scale());
    CHECK(dt < 10 * it_time_scale());
    CHECK_ST(gw_request_test(never), GW_INPROGRESS);
    uint64_t v;
    CHECK_ST(gw_notify_wait(ep, 0, &v), GW_INPROGRESS);
    CHECK_ST(gw_notify_wait(ep, 50, &v), GW_ERR_TIMEOUT);

    /* closing with outstanding work: puts complete, the unmatched receive is canceled */
    gw_request_t *puts[16];
    for (int i = 0; i < 16; i++)
        IT_OK(ctx, gw_put(ep, buf + (size_t)i * (1u << 20), 1u << 20, m, ra + (uint64_t)i * (1u << 20),
                          rk, &puts[i]));
    gw_rkey_destroy(rk);
    t0 = it_now();
    CHECK_ST(gw_ep_close(ep, 5000), GW_OK);
    fprintf(stderr, "close with 16 puts and a receive outstanding took %.3f s\n", it_now() - t0);
    for (int i = 0; i < 16; i++) {
        st = gw_request_test(puts[i]); /* readable after the endpoint is gone */
        CHECK(st == GW_OK || st == GW_ERR_CANCELED);
        if (st != GW_OK)
            fprintf(stderr, "put %d: %s\n", i, gw_status_name(st));
        gw_request_free(puts[i]);
    }
    CHECK_ST(gw_request_test(never), GW_ERR_CANCELED);
    gw_request_free(never);
    IT_OK(ctx, gw_mem_dereg(m));
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    CHECK(it_target_stop(&T, NULL) == 0);

    /* a second endpoint closed at once (timeout 0) with work outstanding: no hang */
    it_target_start(&T, &cfg, addr, sizeof(addr));
    ctx = it_ctx();
    ep = it_connect(ctx, addr);
    rk = it_single_key(&T, ctx, ep, &ra, &rl);
    gw_request_t *gets[8];
    for (int i = 0; i < 8; i++)
        IT_OK(ctx, gw_get(ep, buf + (size_t)i * (8u << 20), 8u << 20, NULL, ra, rk, &gets[i]));
    gw_rkey_destroy(rk);
    t0 = it_now();
    CHECK_ST(gw_ep_close(ep, 0), GW_OK);
    dt = it_now() - t0;
    fprintf(stderr, "close(timeout 0) with 8 gets of 8 MiB outstanding took %.3f s (bound %.0f s)\n", dt,
            10 * it_time_scale());
    CHECK(dt < 10 * it_time_scale());
    int canceled = 0;
    for (int i = 0; i < 8; i++) {
        st = gw_request_test(gets[i]);
        CHECK(st == GW_OK || st == GW_ERR_CANCELED);
        canceled += st == GW_ERR_CANCELED;
        gw_request_free(gets[i]);
    }
    fprintf(stderr, "close(timeout 0): %d of 8 gets canceled\n", canceled);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    CHECK(it_target_stop(&T, NULL) == 0);

    /* NULL is harmless everywhere a thing is destroyed */
    gw_context_destroy(NULL);
    gw_listener_destroy(NULL);
    gw_ep_close(NULL, 0);
    gw_rkey_destroy(NULL);
    gw_request_free(NULL);
    gw_mem_dereg(NULL);

    /* invalid arguments */
    CHECK_ST(gw_context_create(NULL, NULL), GW_ERR_INVALID);
    gw_config_t bad = {.size = 3};
    gw_context_t *c2 = NULL;
    CHECK_ST(gw_context_create(&bad, &c2), GW_ERR_INVALID);
    gw_config_t good = {.size = sizeof(good), .transports = "tcp", .log_level = -1};
    IT_OK(c2, gw_context_create(&good, &c2));
    gw_mem_t *mm = NULL;
    CHECK_ST(gw_mem_reg(c2, NULL, 10, GW_ACCESS_LOCAL, &mm), GW_ERR_INVALID);
    CHECK_ST(gw_mem_reg(c2, buf, 10, 1u << 7, &mm), GW_ERR_INVALID);
    fprintf(stderr, "unknown access flags: %s\n", gw_last_error(c2));
    IT_OK(c2, gw_mem_reg(c2, buf, 0, GW_ACCESS_REMOTE_READ, &mm)); /* len 0 is fine */
    gw_mem_info_t mi = {.size = sizeof(mi)};
    IT_OK(c2, gw_mem_query(mm, &mi));
    CHECK(mi.type == GW_MEM_HOST && mi.cuda_device == -1 && mi.len == 0);
    IT_OK(c2, gw_mem_dereg(mm));
    CHECK_ST(gw_put(NULL, buf, 1, NULL, 0, NULL, &r), GW_ERR_INVALID);
    CHECK_ST(gw_flush(NULL, &r), GW_ERR_INVALID);
    gw_listener_t *l2 = NULL;
    gw_ep_t *e2 = NULL;
    IT_OK(c2, gw_listen(c2, "127.0.0.1:0", &l2));
    CHECK_ST(gw_accept(l2, 0, &e2), GW_INPROGRESS);
    CHECK_ST(gw_accept(l2, 50, &e2), GW_ERR_TIMEOUT);
    gw_listener_destroy(l2);
    gw_transport_info_t ti = {.size = sizeof(ti)};
    CHECK_ST(gw_transport_at(c2, 1000, &ti), GW_ERR_NOT_FOUND);
    CHECK(gw_setting_value(c2, "GPUWIRE_NO_SUCH_THING") == NULL);
    CHECK(gw_setting_value(c2, "GPUWIRE_TRANSPORTS") != NULL);
    IT_OK(c2, gw_context_destroy(c2));
    free(buf);
    return gwt_done("it_lifetime");
}
