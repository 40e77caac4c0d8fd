/* SPDX-License-Identifier: Apache-2.0 */
/* it_rma.c - put, get, put_notify and flush between two processes over
 * loopback for sizes from 0 bytes to several MiB at unaligned offsets, all
 * outstanding at once; payloads verified on the side that receives them;
 * notifications arrive in order and only after their data. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "it.h"

#define REGION (40u << 20)
#define GET_SEED 0x1111

static const size_t g_sizes[] = {0,     1,      7,      8,        63,         4095,
                                  4096,  4097,   65535,  65536,    65537,      (512u << 10) - 1,
                                  512u << 10, (1u << 20) + 3, 2u << 20, (8u << 20) + 5};
#define NSIZES (sizeof(g_sizes) / sizeof(g_sizes[0]))

int main(void)
{
    it_target_cfg_t cfg = {
        .n_eps = 1,
        .n_regions = 2,
        .region = {{REGION, GW_ACCESS_REMOTE_WRITE | GW_ACCESS_REMOTE_READ, 0},
                   {REGION, GW_ACCESS_REMOTE_READ, GET_SEED}},
    };
    it_target_t T;
    char addr[128];
    it_target_start(&T, &cfg, addr, sizeof(addr));
    gw_context_t *ctx = it_ctx();
    gw_ep_t *ep = it_connect(ctx, addr);
    gw_rkey_t *rk[2];
    uint64_t raddr[2];
    size_t rlen[2] = {0};
    it_target_rkeys(&T, ctx, ep, rk, raddr, rlen);
    for (int i = 0; i < 2; i++)
        CHECK(rlen[i] == REGION);
    gw_ep_info_t info = {.size = sizeof(info)};
    IT_OK(ctx, gw_ep_query(ep, &info));
    fprintf(stderr, "connected over %s (%s) to %s\n", info.transport, info.path, info.peer);
    CHECK(info.error == GW_OK);

    uint8_t *src = it_alloc(REGION), *dst = it_alloc(REGION), *ref = it_alloc(REGION);
    gwt_fill(ref, REGION, GET_SEED);
    gw_mem_t *msrc = NULL;
    IT_OK(ctx, gw_mem_reg(ctx, src, REGION, GW_ACCESS_LOCAL, &msrc));

    /* 1. puts of every size, all outstanding at once, at unaligned offsets */
    size_t off[NSIZES], o = 0;
    gw_request_t *req[NSIZES];
    for (size_t i = 0; i < NSIZES; i++) {
        off[i] = o;
        gwt_fill(src + o, g_sizes[i], 100 + i);
        o += g_sizes[i] + 3;
    }
    REQUIRE(o < REGION);
    for (size_t i = 0; i < NSIZES; i++)
        IT_OK(ctx, gw_put(ep, src + off[i], g_sizes[i], (i & 1) ? msrc : NULL, raddr[0] + off[i],
                          rk[0], &req[i]));
    for (size_t i = 0; i < NSIZES; i++) {
        gw_request_info_t ri = {.size = sizeof(ri)};
        gw_status_t st = gw_request_wait(req[i], 30000);
        gw_request_info(req[i], &ri);
        if (st != GW_OK)
            fprintf(stderr, "put of %zu bytes: %s (%s)\n", g_sizes[i], gw_status_name(st),
                    gw_last_error(ctx));
        CHECK_ST(st, GW_OK);
        CHECK(ri.length == g_sizes[i]);
        gw_request_free(req[i]);
    }
    for (size_t i = 0; i < NSIZES; i++) {
        it_cmd_t c = {.type = IT_CMD_VERIFY, .region = 0, .off = off[i], .len = g_sizes[i],
                      .seed = 100 + i};
        it_reply_t r = it_target_cmd(&T, &c, ctx);
        if (r.a != -1)
            fprintf(stderr, "put of %zu bytes: byte %lld differs at the target\n", g_sizes[i],
                    (long long)r.a);
        CHECK(r.a == -1);
    }

    /* 2. gets of every size from unaligned offsets, all outstanding */
    for (size_t i = 0; i < NSIZES; i++)
        IT_OK(ctx, gw_get(ep, dst + off[i], g_sizes[i], NULL, raddr[1] + off[i] + 1, rk[1], &req[i]));
    for (size_t i = 0; i < NSIZES; i++) {
        gw_status_t st = it_wait_free(req[i], 30000);
        CHECK_ST(st, GW_OK);
        if (st == GW_OK && memcmp(dst + off[i], ref + off[i] + 1, g_sizes[i]) != 0) {
            fprintf(stderr, "get of %zu bytes: data differs\n", g_sizes[i]);
            gwt_failures++;
        }
    }

    /* 3. put_notify: notifications in posting order, each after its data */
    enum { NN = 64, NLEN = 65536 + 13 };
    size_t nbase = 24u << 20;
    for (uint64_t i = 0; i < NN; i++) {
        gwt_fill(src + nbase + i * NLEN, NLEN, 5000 + i);
        gw_request_t **rp = (i % 2) ? NULL : &req[0]; /* half untracked */
        IT_OK(ctx, gw_put_notify(ep, src + nbase + i * NLEN, NLEN, msrc, raddr[0] + nbase + i * NLEN,
                                 rk[0], i, rp));
        if (rp)
            CHECK_ST(it_wait_free(req[0], 30000), GW_OK);
    }
    it_cmd_t nc = {.type = IT_CMD_NOTIFY, .region = 0, .off = nbase, .len = NLEN, .seed = 5000,
                   .count = NN};
    it_reply_t nr = it_target_cmd(&T, &nc, ctx);
    CHECK(nr.a == 0); /* data visible at each notification */
    CHECK(nr.b == 0); /* in order */
    gw_request_t *f = NULL;
    IT_OK(ctx, gw_flush(ep, &f));
    CHECK_ST(it_wait_free(f, 30000), GW_OK);

    /* 4. untracked puts then a flush: the flush completes after all are visible */
    size_t ubase = 30u << 20;
    for (int i = 0; i < 32; i++) {
        gwt_fill(src + ubase + (size_t)i * 100000, 100000, 9000 + (uint64_t)i);
        IT_OK(ctx, gw_put(ep, src + ubase + (size_t)i * 100000, 100000, NULL,
                          raddr[0] + ubase + (size_t)i * 100000, rk[0], NULL));
    }
    IT_OK(ctx, gw_flush(ep, &f));
    CHECK_ST(it_wait_free(f, 30000), GW_OK);
    for (int i = 0; i < 32; i++) {
        it_cmd_t c = {.type = IT_CMD_VERIFY, .region = 0, .off = ubase + (size_t)i * 100000,
                      .len = 100000, .seed = 9000 + (uint64_t)i};
        CHECK(it_target_cmd(&T, &c, ctx).a == -1);
    }
    /* a flush with nothing outstanding completes */
    IT_OK(ctx, gw_flush(ep, &f));
    CHECK_ST(it_wait_free(f, 30000), GW_OK);

    /* 5. a put_notify completes once every earlier put has landed (as its
     * notification does): an untracked 16 MiB put (striped over the tcp
     * streams), a small put_notify waited for, then a flush is complete at
     * once and a get reads the put's bytes.  (tcp completed the put_notify
     * on its own acknowledgement while the striped put still arrived on
     * other streams: a GPU get then read zeros, python_gpu's slices case.) */
    {
        const size_t big = 16u << 20, noff = 36u << 20, nlen = 4096;
        gwt_fill(src, big, 7777);
        gwt_fill(src + noff, nlen, 8888);
        IT_OK(ctx, gw_put(ep, src, big, msrc, raddr[0], rk[0], NULL));
        IT_OK(ctx, gw_put_notify(ep, src + noff, nlen, msrc, raddr[0] + noff, rk[0], 0, &req[0]));
        CHECK_ST(it_wait_free(req[0], 30000), GW_OK);
        IT_OK(ctx, gw_flush(ep, &f));
        CHECK_ST(gw_request_test(f), GW_OK); /* nothing before it is outstanding */
        CHECK_ST(it_wait_free(f, 30000), GW_OK);
        memset(dst, 0, big);
        IT_OK(ctx, gw_get(ep, dst, big, NULL, raddr[0], rk[0], &req[0]));
        CHECK_ST(it_wait_free(req[0], 30000), GW_OK);
        CHECK(memcmp(dst, src, big) == 0);
        it_cmd_t c = {.type = IT_CMD_NOTIFY, .region = 0, .off = noff, .len = nlen, .seed = 8888, .count = 1};
        it_reply_t r = it_target_cmd(&T, &c, ctx);
        CHECK(r.a == 0 && r.b == 0);
    }

    /* the target's regions from gw_mem_alloc (IT_ALLOC=1) over intra: the
     * bytes went by plain copies through the shared mapping, not by CMA */
    /* without IT_ALLOC, the small puts and gets posted back to back went in
     * batched CMA system calls */
    const char *alloc = getenv("IT_ALLOC");
    if (strcmp(info.transport, "intra") == 0) {
        IT_OK(ctx, gw_ep_query(ep, &info));
        const char *p = strstr(info.path, " CMA, ");
        const char *b = strstr(info.path, " CMA copies batched");
        unsigned long cma = ~0ul, shm = 0, batched = 0;
        CHECK(p != NULL && b != NULL);
        if (p && b) {
            while (p > info.path && p[-1] >= '0' && p[-1] <= '9')
                p--;
            while (b > info.path && b[-1] >= '0' && b[-1] <= '9')
                b--;
            CHECK(sscanf(p, "%lu CMA, %lu shared memory", &cma, &shm) == 2);
            CHECK(sscanf(b, "%lu", &batched) == 1);
        }
        fprintf(stderr, "intra copies: %lu CMA (%lu batched), %lu shared memory\n", cma, batched, shm);
        if (alloc && alloc[0] == '1') {
            CHECK(cma == 0);
            CHECK(shm >= 2 * NSIZES);
        } else {
            CHECK(batched > 0);
        }
    }

    gw_rkey_destroy(rk[0]);
    gw_rkey_destroy(rk[1]);
    IT_OK(ctx, gw_ep_close(ep, 5000));
    CHECK(it_target_stop(&T, ctx) == 0);
    IT_OK(ctx, gw_mem_dereg(msrc));
    IT_OK(ctx, gw_context_destroy(ctx));
    free(src);
    free(dst);
    free(ref);
    return gwt_done("it_rma");
}
