/* SPDX-License-Identifier: Apache-2.0 */
/*
 * py_overhead.c - the C side of bench/compare/python_overhead.sh: the same operations
 * the Python script times through the binding, timed here as plain C calls,
 * against a target process (also this program) that serves the endpoint.
 *
 *   py_overhead target TRANSPORT   listens, prints its address, registers 64 KiB
 *                                  for remote writes, sends the key (tag 1) to
 *                                  each initiator and serves until they close
 *   py_overhead ADDR TRANSPORT N   the initiator; prints "op ns_per_op" lines:
 *     put      untracked 8-byte put from a registered buffer (flush every 256)
 *     put_wait tracked 8-byte put, request_wait, request_free
 *     test     gw_request_test on a completed request
 */
#include <string.h>

#include "py_bench.h"

int main(int argc, char **argv)
{
    if (argc > 2 && strcmp(argv[1], "target") == 0)
    {
        static char dst[1 << 16];
        return py_bench_target(argv[2], dst, sizeof(dst), GW_ACCESS_REMOTE_WRITE);
    }
    if (argc < 4) {
        fprintf(stderr, "usage: py_overhead target TRANSPORT | py_overhead ADDR TRANSPORT N\n");
        return 2;
    }
    const char *tl = argv[2];
    long n = atol(argv[3]);
    gw_context_t *b;
    gw_ep_t *ep;
    gw_rkey_t *rk;
    uint64_t raddr;
    py_bench_connect(argv[1], tl, &b, &ep, &rk, &raddr);
    static char src[1 << 16];
    gw_mem_t *sm;
    CHECK(gw_mem_reg(b, src, sizeof(src), GW_ACCESS_LOCAL, &sm));
    gw_request_t *r;
    /* Each figure is the fastest batch of 256 operations (of n in all): on a
     * shared machine the minimum estimates the uncontended cost, which is
     * what the Python side is compared with. */
    double best_put = 1e30, best_wait = 1e30, best_test = 1e30;
    for (long done = 0; done < n; done += 256) {
        double t0 = now_ns();
        for (int i = 0; i < 256; i++) {
            size_t o = (size_t)(i & 1023) * 8;
            CHECK(gw_put(ep, src + o, 8, sm, raddr + o, rk, NULL));
        }
        double t1 = now_ns();
        CHECK(gw_flush(ep, &r));
        CHECK(gw_request_wait(r, 10000));
        gw_request_free(r);
        if (t1 - t0 < best_put)
            best_put = t1 - t0;
    }
    for (long done = 0; done < n / 4; done += 64) {
        double t0 = now_ns();
        for (int i = 0; i < 64; i++) {
            size_t o = (size_t)(i & 1023) * 8;
            CHECK(gw_put(ep, src + o, 8, sm, raddr + o, rk, &r));
            CHECK(gw_request_wait(r, 10000));
            gw_request_free(r);
        }
        double t1 = now_ns();
        if (t1 - t0 < best_wait)
            best_wait = t1 - t0;
    }
    CHECK(gw_put(ep, src, 8, sm, raddr, rk, &r));
    CHECK(gw_request_wait(r, 10000));
    for (long done = 0; done < n; done += 256) {
        volatile int s = 0;
        double t0 = now_ns();
        for (int i = 0; i < 256; i++)
            s += gw_request_test(r);
        double t1 = now_ns();
        if (t1 - t0 < best_test)
            best_test = t1 - t0;
    }
    gw_request_free(r);
    printf("put %.1f\nput_wait %.1f\ntest %.1f\n", best_put / 256, best_wait / 64, best_test / 256);
    gw_rkey_destroy(rk);
    CHECK(gw_ep_close(ep, 1000));
    CHECK(gw_mem_dereg(sm));
    CHECK(gw_context_destroy(b));
    return 0;
}
