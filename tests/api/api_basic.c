/* SPDX-License-Identifier: Apache-2.0 */
/* api_basic.c - two processes over tcp loopback: every operation once at a
 * few sizes, payload verified, plus notification order and flush. */
#include <unistd.h>

#include "harness.h"

#define REGION (8u << 20)

static gwt_chan_t pch, cch;

static int server(void *arg)
{
    (void)arg;
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    gw_listener_t *l;
    gw_ep_t *ep = gwt_listen_accept(ctx, &cch, &l);
    uint8_t *region = malloc(REGION);
    gwt_fill(region, REGION, 7);
    gw_mem_t *mem;
    REQUIRE_OK(gw_mem_reg(ctx, region, REGION, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, &mem));
    gwt_send_rkey(ep, mem, 1);
    gw_request_t *r;
    /* notifications: values 1..3 in order */
    for (uint64_t want = 1; want <= 3; want++) {
        uint64_t v = 0;
        REQUIRE_OK(gw_notify_wait(ep, 10000, &v));
        CHECK(v == want);
    }
    /* the client put 1 MiB of seed 99 at offset 0 before notification 3 */
    CHECK(gwt_verify(region, 1 << 20, 99) == -1);
    /* tagged messages: large one, then small one */
    uint8_t *big = malloc(3u << 20);
    REQUIRE_OK(gw_recv(ep, big, 3u << 20, NULL, 5, ~0ull, &r));
    REQUIRE_OK(gw_request_wait(r, 10000));
    gw_request_info_t ri = {.size = sizeof(ri)};
    gw_request_info(r, &ri);
    CHECK(ri.length == (3u << 20) && ri.tag == 5);
    CHECK(gwt_verify(big, 3u << 20, 5) == -1);
    gw_request_free(r);
    char small[16];
    REQUIRE_OK(gw_recv(ep, small, sizeof(small), NULL, 6, ~0ull, &r));
    CHECK_ST(gw_request_wait(r, 10000), GW_ERR_TRUNCATED);
    gw_request_free(r);
    /* wait for "done" */
    char done[8];
    REQUIRE_OK(gw_recv(ep, done, sizeof(done), NULL, 99, ~0ull, &r));
    REQUIRE_OK(gw_request_wait(r, 20000));
    gw_request_free(r);
    CHECK_ST(gw_mem_dereg(mem), GW_OK);
    CHECK_ST(gw_context_destroy(ctx), GW_ERR_BUSY);
    gw_ep_close(ep, 1000);
    gw_listener_destroy(l);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    free(region);
    free(big);
    return gwt_done("api_basic server");
}

int main(void)
{
    gwt_chan_pair(&pch, &cch);
    int pid = gwt_spawn(server, NULL);
    char addr[80];
    REQUIRE(gwt_chan_recv(&pch, addr, sizeof(addr), 10000) > 0);
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    gw_ep_t *ep;
    REQUIRE_OK(gw_connect(ctx, addr, &ep));
    gw_ep_info_t info = {.size = sizeof(info)};
    REQUIRE_OK(gw_ep_query(ep, &info));
    CHECK(!strcmp(info.transport, "tcp"));
    fprintf(stderr, "endpoint: %s, %s, downgrades: %s\n", info.transport, info.path, info.downgrades);
    gw_request_t *r;
    uint64_t base;
    size_t rlen;
    gw_rkey_t *rk = gwt_recv_rkey(ep, 1, &base);
    gw_rkey_range(rk, NULL, &rlen);
    CHECK(rlen == REGION);
    /* get sizes 0, 1, 4095, 1 MiB, 8 MiB */
    size_t sizes[] = {0, 1, 4095, 1 << 20, REGION};
    uint8_t *buf = malloc(REGION);
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        memset(buf, 0, REGION);
        REQUIRE_OK(gw_get(ep, buf, sizes[i], NULL, base, rk, &r));
        CHECK_ST(gw_request_wait(r, 10000), GW_OK);
        gw_request_free(r);
        /* the server filled its region with seed 7 */
        uint8_t *ref = malloc(REGION);
        gwt_fill(ref, REGION, 7);
        CHECK(memcmp(buf, ref, sizes[i]) == 0);
        free(ref);
    }
    /* out of bounds and wrong key owner */
    CHECK_ST(gw_put(ep, buf, 16, NULL, base + REGION - 8, rk, &r), GW_ERR_OUT_OF_BOUNDS);
    fprintf(stderr, "detail: %s\n", gw_last_error(ctx));
    /* notifications after puts: 1 (small), 2 (striped 4 MiB), 3 after a 1 MiB put */
    REQUIRE_OK(gw_put_notify(ep, buf, 8, NULL, base + (6u << 20), rk, 1, NULL));
    REQUIRE_OK(gw_put_notify(ep, buf, 4u << 20, NULL, base + (2u << 20), rk, 2, NULL));
    gwt_fill(buf, 1 << 20, 99);
    REQUIRE_OK(gw_put(ep, buf, 1 << 20, NULL, base, rk, NULL));
    REQUIRE_OK(gw_put_notify(ep, buf, 0, NULL, base, rk, 3, NULL));
    REQUIRE_OK(gw_flush(ep, &r));
    CHECK_ST(gw_request_wait(r, 10000), GW_OK);
    gw_request_free(r);
    /* messages */
    uint8_t *big = malloc(3u << 20);
    gwt_fill(big, 3u << 20, 5);
    REQUIRE_OK(gw_send(ep, big, 3u << 20, NULL, 5, &r));
    CHECK_ST(gw_request_wait(r, 10000), GW_OK);
    gw_request_free(r);
    REQUIRE_OK(gw_send(ep, big, 100, NULL, 6, &r));
    CHECK_ST(gw_request_wait(r, 10000), GW_OK);
    gw_request_free(r);
    REQUIRE_OK(gw_send(ep, "done", 5, NULL, 99, &r));
    CHECK_ST(gw_request_wait(r, 10000), GW_OK);
    gw_request_free(r);
    CHECK_ST(gw_ep_close(ep, 1000), GW_ERR_BUSY);
    gw_rkey_destroy(rk);
    CHECK_ST(gw_ep_close(ep, 1000), GW_OK);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    free(buf);
    free(big);
    CHECK(gwt_wait(pid, 60) == 0);
    return gwt_done("api_basic");
}
