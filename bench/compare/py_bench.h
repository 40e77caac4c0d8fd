/* SPDX-License-Identifier: Apache-2.0 */
/*
 * py_bench.h - what the C sides of the Python benches share
 * (bench/compare/py_overhead.c, bench/compare/py_pages.c): a clock, a status check, the
 * target process that serves one registered buffer, and the initiator's
 * connection that receives the target's key.
 */
#ifndef GW_PY_BENCH_H
#define GW_PY_BENCH_H

#include <gpuwire.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

#define CHECK(x)                                                                             \
    do {                                                                                     \
        gw_status_t s_ = (x);                                                                \
        if (s_ != GW_OK) {                                                                   \
            fprintf(stderr, "%s:%d %s -> %s\n", __FILE__, __LINE__, #x, gw_status_name(s_)); \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

/* Listens, prints its address, registers buf for `access`, sends the packed
 * key (tag 1) to each initiator and serves it until it closes; one initiator
 * at a time, until none comes for 60 s.  Counted notifications of id 1 are
 * taken as they come (a paged bench posts one per transfer). */
static inline int py_bench_target(const char *tl, void *buf, size_t len, unsigned access)
{
    gw_config_t cfg = {.size = sizeof(cfg), .transports = tl, .log_level = -1};
    gw_context_t *a;
    CHECK(gw_context_create(&cfg, &a));
    gw_listener_t *l;
    CHECK(gw_listen(a, "127.0.0.1:0", &l));
    char addr[80];
    CHECK(gw_listener_addr(l, addr, sizeof(addr)));
    printf("%s\n", addr);
    fflush(stdout);
    gw_mem_t *dm;
    CHECK(gw_mem_reg(a, buf, len, access, &dm));
    uint8_t key[512];
    size_t klen = sizeof(key);
    CHECK(gw_mem_pack_rkey(dm, key, &klen));
    for (;;) {
        gw_ep_t *ep;
        if (gw_accept(l, 60000, &ep) != GW_OK)
            return 0;
        gw_request_t *r;
        CHECK(gw_send(ep, key, klen, NULL, 1, &r));
        gw_request_free(r);
        for (;;) {
            gw_context_wait(a, 50);
            gw_progress(a);
            uint64_t c = 0;
            if (gw_notify_count(ep, 1, &c) == GW_OK && c)
                gw_notify_count_wait(ep, 1, c, 0);
            gw_ep_info_t ei = {.size = sizeof(ei)};
            if (gw_ep_query(ep, &ei) != GW_OK || ei.error != GW_OK)
                break;
        }
        gw_ep_close(ep, 0);
    }
}

/* The initiator's side: a context on tl, an endpoint to addr, the target's
 * key (tag 1) unpacked on it and the address its range starts at. */
static inline void py_bench_connect(const char *addr, const char *tl, gw_context_t **ctx, gw_ep_t **ep,
                                    gw_rkey_t **rk, uint64_t *raddr)
{
    gw_config_t cfg = {.size = sizeof(cfg), .transports = tl, .log_level = -1};
    CHECK(gw_context_create(&cfg, ctx));
    CHECK(gw_connect(*ctx, addr, ep));
    uint8_t key[512];
    gw_request_t *r;
    CHECK(gw_recv(*ep, key, sizeof(key), NULL, 1, ~0ull, &r));
    CHECK(gw_request_wait(r, 10000));
    gw_request_info_t ri = {.size = sizeof(ri)};
    gw_request_info(r, &ri);
    gw_request_free(r);
    CHECK(gw_rkey_unpack(*ep, key, ri.length, rk));
    CHECK(gw_rkey_range(*rk, raddr, NULL));
}

#endif
