/* SPDX-License-Identifier: Apache-2.0 */
/* it_many.c - several endpoints between the same two processes, each with
 * hundreds of puts, gets and sends outstanding at once (sizes 1 B .. 128 KiB,
 * the pieces tiling one region), completed in any order; every byte checked. */
#include <stdlib.h>
#include <string.h>

#include "it.h"

#define NEPS 4
#define PUTS_PER_EP 300
#define GETS_PER_EP 100
#define SENDS_PER_EP 24
#define REGION (48u << 20)

static uint64_t rng = 0x1234567;
static size_t rnd_len(void)
{
    gwt_xorshift(&rng);
    static const size_t choice[] = {1, 8, 100, 4096, 8191, 32768, 131072};
    return choice[rng % 7] + (rng >> 40) % 3;
}

int main(void)
{
    it_target_cfg_t cfg = {.n_eps = NEPS, .n_regions = 2,
                           .region = {{REGION, GW_ACCESS_REMOTE_WRITE, 0},
                                      {REGION, GW_ACCESS_REMOTE_READ, 0xFEED}}};
    it_target_t T;
    char addr[128];
    it_target_start(&T, &cfg, addr, sizeof(addr));
    gw_context_t *ctx = it_ctx();
    gw_ep_t *ep[NEPS];
    for (int e = 0; e < NEPS; e++)
        ep[e] = it_connect(ctx, addr);
    uint8_t keys[2][IT_KEY_MAX];
    size_t klen[2];
    REQUIRE(it_target_keys(&T, keys, klen) == 0);
    gw_rkey_t *rk[NEPS][2];
    uint64_t raddr[2];
    size_t rlen;
    for (int e = 0; e < NEPS; e++)
        for (int k = 0; k < 2; k++)
            IT_OK(ctx, gw_rkey_unpack(ep[e], keys[k], klen[k], &rk[e][k]));
    IT_OK(ctx, gw_rkey_range(rk[0][0], &raddr[0], &rlen));
    IT_OK(ctx, gw_rkey_range(rk[0][1], &raddr[1], &rlen));

    uint8_t *src = it_alloc(REGION), *dst = it_alloc(REGION), *ref = it_alloc(REGION);
    gwt_fill(src, REGION, 0xC0FFEE);
    gwt_fill(ref, REGION, 0xFEED);
    enum { TOTAL = NEPS * (PUTS_PER_EP + GETS_PER_EP + SENDS_PER_EP) };
    static gw_request_t *req[TOTAL];
    static size_t roff[TOTAL], rlens[TOTAL];
    int n = 0;
    size_t put_off = 0, get_off = 0;
    /* interleave the endpoints and operations while posting */
    for (int i = 0; i < PUTS_PER_EP; i++) {
        for (int e = 0; e < NEPS; e++) {
            size_t len = rnd_len();
            IT_OK(ctx, gw_put(ep[e], src + put_off, len, NULL, raddr[0] + put_off, rk[e][0], &req[n]));
            roff[n] = put_off;
            rlens[n++] = len;
            put_off += len;
            if (i < GETS_PER_EP) {
                len = rnd_len();
                IT_OK(ctx, gw_get(ep[e], dst + get_off, len, NULL, raddr[1] + get_off, rk[e][1],
                                  &req[n]));
                roff[n] = get_off;
                rlens[n++] = len;
                get_off += len;
            }
            if (i < SENDS_PER_EP) {
                IT_OK(ctx, gw_send(ep[e], src + (size_t)i * 5000, 5000, NULL,
                                   ((uint64_t)e << 32) | (uint64_t)i, &req[n]));
                roff[n] = (size_t)i * 5000;
                rlens[n++] = 5000;
            }
        }
    }
    REQUIRE(put_off < REGION && get_off < REGION);
    fprintf(stderr, "%d operations outstanding on %d endpoints (%zu bytes put, %zu got)\n", n, NEPS,
            put_off, get_off);
    /* the sends complete only when received: receive them (this progresses us too) */
    for (int e = 0; e < NEPS; e++) {
        for (int i = SENDS_PER_EP - 1; i >= 0; i--) {
            it_cmd_t c = {.type = IT_CMD_RECV, .ep = (uint32_t)e, .region = 1, .off = 0, .len = 5000,
                          .tag = ((uint64_t)e << 32) | (uint64_t)i, .mask = ~0ull};
            /* region 1 is the get source: receive into its tail, past what gets read */
            c.off = REGION - 8192;
            it_reply_t r = it_target_cmd(&T, &c, ctx);
            CHECK(r.a == GW_OK && r.b == 5000);
        }
    }
    int bad = 0;
    for (int i = 0; i < n; i++) {
        gw_status_t st = it_wait_free(req[i], 60000);
        if (st != GW_OK && bad++ < 5)
            fprintf(stderr, "operation %d (%zu bytes at %zu): %s\n", i, rlens[i], roff[i],
                    gw_status_name(st));
    }
    CHECK(bad == 0);
    it_cmd_t v = {.type = IT_CMD_VERIFY, .region = 0, .off = 0, .len = put_off, .seed = 0xC0FFEE};
    it_reply_t r = it_target_cmd(&T, &v, ctx);
    if (r.a != -1)
        fprintf(stderr, "puts: byte %lld differs at the target\n", (long long)r.a);
    CHECK(r.a == -1);
    CHECK(memcmp(dst, ref, get_off) == 0);

    for (int e = 0; e < NEPS; e++) {
        gw_rkey_destroy(rk[e][0]);
        gw_rkey_destroy(rk[e][1]);
        IT_OK(ctx, gw_ep_close(ep[e], 5000));
    }
    CHECK(it_target_stop(&T, ctx) == 0);
    IT_OK(ctx, gw_context_destroy(ctx));
    free(src);
    free(dst);
    free(ref);
    return gwt_done("it_many");
}
