/* SPDX-License-Identifier: Apache-2.0 */
/* it_tcp_threads.c - the tcp transport's helper threads (GPUWIRE_TCP_THREADS)
 * with small thresholds, so that nearly every frame's payload is moved by a
 * worker and two streams share one: striped put_notify (notifications in
 * order and after their data), gets, both directions loaded at once (a
 * worker must not block on one socket while the other needs reading),
 * revocation of a region while a worker reads or writes it, and closing an
 * endpoint with transfers in flight.  Run with 1 and with 2 threads (argv[1]). */
#include <stdlib.h>
#include <string.h>

#include "it.h"

#define REGION (48u << 20)
#define NPUT 24
#define PUT_LEN 300001u
#define MSG_LEN (24u << 20)

enum { R_RW = 0, R_GET = 1, R_REVOKE_GET = 2, R_REVOKE_PUT = 3 };

static void set_env(const char *threads)
{
    setenv("GPUWIRE_TRANSPORTS", "tcp", 1); /* on one host intra would be chosen */
    setenv("GPUWIRE_TCP_THREADS", threads, 1);
    setenv("GPUWIRE_TCP_STREAMS", "3", 1);
    setenv("GPUWIRE_TCP_THREAD_MIN", "8K", 1);
    setenv("GPUWIRE_TCP_STRIPE_MIN", "64K", 1);
    setenv("GPUWIRE_TCP_CHUNK", "128K", 1);
}

int main(int argc, char **argv)
{
    const char *threads = argc > 1 ? argv[1] : "2";
    set_env(threads); /* inherited by the target */
    it_target_cfg_t cfg = {
        .n_eps = 2,
        .n_regions = 4,
        .region = {{REGION, GW_ACCESS_REMOTE_WRITE | GW_ACCESS_REMOTE_READ, 0},
                   {REGION, GW_ACCESS_REMOTE_READ, 0x6E7},
                   {REGION, GW_ACCESS_REMOTE_READ, 0x5EED},
                   {REGION, GW_ACCESS_REMOTE_WRITE, 0}},
    };
    it_target_t T;
    char addr[128];
    it_target_start(&T, &cfg, addr, sizeof(addr));
    gw_context_t *ctx = it_ctx();
    gw_ep_t *ep = it_connect(ctx, addr);
    gw_ep_t *ep2 = it_connect(ctx, addr);
    uint8_t keys[4][IT_KEY_MAX];
    size_t klen[4];
    REQUIRE(it_target_keys(&T, keys, klen) == 0);
    gw_rkey_t *rk[4];
    uint64_t ra[4];
    for (int i = 0; i < 4; i++) {
        IT_OK(ctx, gw_rkey_unpack(ep, keys[i], klen[i], &rk[i]));
        IT_OK(ctx, gw_rkey_range(rk[i], &ra[i], NULL));
    }
    gw_ep_info_t info = {.size = sizeof(info)};
    IT_OK(ctx, gw_ep_query(ep, &info));
    fprintf(stderr, "GPUWIRE_TCP_THREADS=%s: %s (%s)\n", threads, info.transport, info.path);
    CHECK(!strcmp(info.transport, "tcp"));

    uint8_t *src = it_alloc(REGION), *dst = it_alloc(REGION);
    gw_mem_t *msrc = NULL, *mdst = NULL;
    IT_OK(ctx, gw_mem_reg(ctx, src, REGION, GW_ACCESS_LOCAL, &msrc));
    IT_OK(ctx, gw_mem_reg(ctx, dst, REGION, GW_ACCESS_LOCAL, &mdst));

    /* 1. striped puts with notifications: in order, each after its data */
    gw_request_t *r[NPUT];
    for (uint64_t i = 0; i < NPUT; i++) {
        gwt_fill(src + i * PUT_LEN, PUT_LEN, 0x100 + i);
        IT_OK(ctx, gw_put_notify(ep, src + i * PUT_LEN, PUT_LEN, msrc, ra[R_RW] + i * PUT_LEN, rk[R_RW], i, &r[i]));
    }
    it_cmd_t c = {.type = IT_CMD_NOTIFY, .ep = 0, .region = R_RW, .off = 0, .len = PUT_LEN, .seed = 0x100,
                  .count = NPUT};
    it_reply_t rep = it_target_cmd(&T, &c, ctx);
    CHECK(rep.a == 0 && rep.b == 0);
    for (int i = 0; i < NPUT; i++)
        CHECK_ST(it_wait_free(r[i], 30000), GW_OK);

    /* 2. gets of odd sizes, all outstanding at once */
    static const size_t gsz[] = {1, 8191, 8192, 65537, 300001, (3u << 20) + 7, 9u << 20};
    size_t goff[7], o = 0;
    for (int i = 0; i < 7; i++) {
        goff[i] = o;
        o += gsz[i] + 13;
        IT_OK(ctx, gw_get(ep, dst + goff[i], gsz[i], mdst, ra[R_GET] + goff[i], rk[R_GET], &r[i]));
    }
    for (int i = 0; i < 7; i++) {
        CHECK_ST(it_wait_free(r[i], 30000), GW_OK);
        uint8_t *ref = it_alloc(goff[i] + gsz[i]);
        gwt_fill(ref, goff[i] + gsz[i], 0x6E7);
        CHECK(memcmp(ref + goff[i], dst + goff[i], gsz[i]) == 0);
        free(ref);
    }

    /* 3. both directions at once: the target sends a large message to us
     * while our puts stream to it */
    gw_request_t *rr = NULL;
    IT_OK(ctx, gw_recv(ep, dst, MSG_LEN, mdst, 77, ~0ull, &rr));
    gwt_fill(src, 4 * (8u << 20), 0xD1);
    for (int i = 0; i < 4; i++)
        IT_OK(ctx, gw_put(ep, src + i * (8u << 20), 8u << 20, msrc, ra[R_RW] + i * (8u << 20), rk[R_RW], &r[i]));
    c = (it_cmd_t){.type = IT_CMD_SEND, .ep = 0, .region = R_RW, .off = 40u << 20, .len = 0, .tag = 77};
    /* the target sends from the end of its region, a part our puts do not touch */
    c.len = MSG_LEN > (REGION - (40u << 20)) ? REGION - (40u << 20) : MSG_LEN;
    c.seed = 0xAB;
    rep = it_target_cmd(&T, &c, ctx);
    CHECK_ST((gw_status_t)rep.a, GW_OK);
    CHECK_ST(it_wait_free(rr, 30000), GW_OK);
    CHECK(gwt_verify(dst, c.len, 0xAB) == -1);
    for (int i = 0; i < 4; i++)
        CHECK_ST(it_wait_free(r[i], 30000), GW_OK);
    c = (it_cmd_t){.type = IT_CMD_VERIFY, .region = R_RW, .off = 0, .len = 4 * (8u << 20), .seed = 0xD1};
    CHECK(it_target_cmd(&T, &c, ctx).a == -1);

    /* 4. revocation while workers read and write the regions: each transfer
     * either finishes (its bytes correct) or fails with GW_ERR_INVALID_KEY,
     * and the endpoint stays usable (the streams stay in step) */
    memset(dst, 0, REGION);
    gwt_fill(src, REGION, 0x77);
    IT_OK(ctx, gw_get(ep, dst, REGION, mdst, ra[R_REVOKE_GET], rk[R_REVOKE_GET], &r[0]));
    IT_OK(ctx, gw_put(ep, src, REGION, msrc, ra[R_REVOKE_PUT], rk[R_REVOKE_PUT], &r[1]));
    gw_progress(ctx);
    c = (it_cmd_t){.type = IT_CMD_DEREG, .region = R_REVOKE_GET};
    CHECK_ST((gw_status_t)it_target_cmd(&T, &c, ctx).a, GW_OK);
    c.region = R_REVOKE_PUT;
    CHECK_ST((gw_status_t)it_target_cmd(&T, &c, ctx).a, GW_OK);
    gw_status_t sg = it_wait_free(r[0], 30000), sp = it_wait_free(r[1], 30000);
    fprintf(stderr, "get racing revocation: %s; put racing revocation: %s\n", gw_status_name(sg), gw_status_name(sp));
    CHECK(sg == GW_OK || sg == GW_ERR_INVALID_KEY);
    CHECK(sp == GW_OK || sp == GW_ERR_INVALID_KEY);
    if (sg == GW_OK)
        CHECK(gwt_verify(dst, REGION, 0x5EED) == -1);
    gwt_fill(src, 1u << 20, 0x99);
    IT_OK(ctx, gw_put(ep, src, 1u << 20, msrc, ra[R_RW], rk[R_RW], &r[0]));
    CHECK_ST(it_wait_free(r[0], 30000), GW_OK);
    c = (it_cmd_t){.type = IT_CMD_VERIFY, .region = R_RW, .off = 0, .len = 1u << 20, .seed = 0x99};
    CHECK(it_target_cmd(&T, &c, ctx).a == -1);

    /* 5. closing an endpoint with large puts in flight: each finishes or is
     * cancelled; nothing hangs or crashes, on either side */
    gw_rkey_t *rk2 = NULL;
    IT_OK(ctx, gw_rkey_unpack(ep2, keys[R_RW], klen[R_RW], &rk2));
    for (int i = 0; i < 4; i++) /* to [16 MiB, 48 MiB): nothing else writes there meanwhile */
        IT_OK(ctx, gw_put(ep2, src, 8u << 20, msrc, ra[R_RW] + (16u << 20) + i * (8u << 20), rk2, &r[i]));
    gw_progress(ctx);
    gw_rkey_destroy(rk2);
    IT_OK(ctx, gw_ep_close(ep2, 0));
    for (int i = 0; i < 4; i++) {
        gw_status_t st = it_wait_free(r[i], 10000);
        CHECK(st == GW_OK || st == GW_ERR_CANCELED || st == GW_ERR_CONN_RESET);
    }
    /* the other endpoint is untouched */
    IT_OK(ctx, gw_put(ep, src, 1u << 20, msrc, ra[R_RW], rk[R_RW], &r[0]));
    CHECK_ST(it_wait_free(r[0], 30000), GW_OK);

    for (int i = 0; i < 4; i++)
        gw_rkey_destroy(rk[i]);
    IT_OK(ctx, gw_ep_close(ep, 5000));
    CHECK(it_target_stop(&T, ctx) == 0);
    IT_OK(ctx, gw_mem_dereg(msrc));
    IT_OK(ctx, gw_mem_dereg(mdst));
    IT_OK(ctx, gw_context_destroy(ctx));
    free(src);
    free(dst);
    return gwt_done("it_tcp_threads");
}
