/* SPDX-License-Identifier: Apache-2.0 */
/* it_large.c - one put and one get of 1 GiB + 4 KiB between two processes,
 * payload verified at the receiving side (label `large`; ~2 GiB of memory, one copy per process). */
#include <stdlib.h>
#include <string.h>

#include "it.h"

#define BIG ((size_t)(1u << 30) + 4096)

int main(void)
{
    it_target_cfg_t cfg = {.n_eps = 1, .n_regions = 1,
                           .region = {{BIG, GW_ACCESS_REMOTE_WRITE | GW_ACCESS_REMOTE_READ, 0}}};
    it_target_t T;
    char addr[128];
    it_target_start(&T, &cfg, addr, sizeof(addr));
    gw_context_t *ctx = it_ctx();
    gw_ep_t *ep = it_connect(ctx, addr);
    uint64_t raddr;
    size_t rlen;
    gw_rkey_t *rk = it_single_key(&T, ctx, ep, &raddr, &rlen);
    CHECK(rlen == BIG);

    uint8_t *buf = it_alloc(BIG);
    gw_mem_t *m = NULL;
    IT_OK(ctx, gw_mem_reg(ctx, buf, BIG, GW_ACCESS_LOCAL, &m));
    gwt_fill(buf, BIG, 0xB16);

    double t0 = it_now();
    gw_request_t *r = NULL;
    IT_OK(ctx, gw_put(ep, buf, BIG, m, raddr, rk, &r));
    gw_request_info_t ri = {.size = sizeof(ri)};
    gw_status_t st = gw_request_wait(r, 60000);
    gw_request_info(r, &ri);
    gw_request_free(r);
    CHECK_ST(st, GW_OK);
    CHECK(ri.length == BIG);
    double t1 = it_now();
    fprintf(stderr, "put of %zu bytes: %.2f s (%.2f GB/s)\n", BIG, t1 - t0, BIG / (t1 - t0) / 1e9);
    it_cmd_t c = {.type = IT_CMD_VERIFY, .region = 0, .off = 0, .len = BIG, .seed = 0xB16};
    it_reply_t rep = it_target_cmd(&T, &c, ctx);
    if (rep.a != -1)
        fprintf(stderr, "put: byte %lld differs at the target\n", (long long)rep.a);
    CHECK(rep.a == -1);

    /* the target writes a new pattern; get it back over a zeroed buffer */
    c.type = IT_CMD_FILL;
    c.seed = 0x6E7;
    it_target_cmd(&T, &c, ctx);
    memset(buf, 0, BIG);
    t0 = it_now();
    IT_OK(ctx, gw_get(ep, buf, BIG, m, raddr, rk, &r));
    st = gw_request_wait(r, 60000);
    gw_request_free(r);
    CHECK_ST(st, GW_OK);
    t1 = it_now();
    fprintf(stderr, "get of %zu bytes: %.2f s (%.2f GB/s)\n", BIG, t1 - t0, BIG / (t1 - t0) / 1e9);
    long long bad = gwt_verify(buf, BIG, 0x6E7);
    if (bad != -1)
        fprintf(stderr, "get: byte %lld differs\n", bad);
    CHECK(bad == -1);

    gw_rkey_destroy(rk);
    IT_OK(ctx, gw_ep_close(ep, 5000));
    CHECK(it_target_stop(&T, ctx) == 0);
    IT_OK(ctx, gw_mem_dereg(m));
    IT_OK(ctx, gw_context_destroy(ctx));
    free(buf);
    return gwt_done("it_large");
}
