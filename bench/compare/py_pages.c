/* SPDX-License-Identifier: Apache-2.0 */
/*
 * py_pages.c - the C side of bench/compare/python_pages.sh: a 4096-entry paged
 * transfer (gw_xfer_pages) posted from C, against a target process (also
 * this program), timed the way bench/compare/python_pages.py times the same post
 * through `import gpuwire`.
 *
 *   py_pages target TRANSPORT BYTES   listens, prints its address, registers
 *                                     BYTES for remote reads and writes, sends
 *                                     the key (tag 1) to each initiator, serves
 *   py_pages ADDR TRANSPORT PAGES PAGE_SIZE ROUNDS [BURST]
 *                                     the initiator: ROUNDS times, BURST paged
 *                                     puts (counted notification, tracked)
 *                                     posted back to back, each timed alone,
 *                                     then waited for; prints "name ns" lines:
 *     post     the fastest gw_xfer_pages call
 *     post_med the median one
 *   Page i goes from local page (i * 7919) % PAGES to remote page
 *   (i * 40503 + 17) % PAGES (PAGES a power of two: both are permutations);
 *   python_pages.py builds the same arrays.
 */
#include <stdint.h>
#include <string.h>

#include "py_bench.h"

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc > 3 && strcmp(argv[1], "target") == 0)
        return py_bench_target(argv[2], calloc(1, (size_t)atoll(argv[3])), (size_t)atoll(argv[3]),
                               GW_ACCESS_REMOTE_WRITE | GW_ACCESS_REMOTE_READ);
    if (argc < 6 || (argc > 6 && (atoi(argv[6]) < 1))) {
        fprintf(stderr, "usage: py_pages target TRANSPORT BYTES | py_pages ADDR TRANSPORT PAGES PAGE_SIZE ROUNDS [BURST]\n");
        return 2;
    }
    const char *tl = argv[2];
    size_t pages = (size_t)atoll(argv[3]), page = (size_t)atoll(argv[4]);
    int rounds = atoi(argv[5]), burst = argc > 6 ? atoi(argv[6]) : 1;
    gw_context_t *b;
    gw_ep_t *ep;
    gw_rkey_t *rk;
    uint64_t raddr;
    py_bench_connect(argv[1], tl, &b, &ep, &rk, &raddr);
    char *src = malloc(pages * page);
    for (size_t i = 0; i < pages * page; i++)
        src[i] = (char)(i * 131);
    gw_mem_t *sm;
    CHECK(gw_mem_reg(b, src, pages * page, GW_ACCESS_LOCAL, &sm));
    uint32_t *lp = malloc(pages * sizeof(*lp)), *rp = malloc(pages * sizeof(*rp));
    for (size_t i = 0; i < pages; i++) {
        lp[i] = (uint32_t)((i * 7919) % pages);
        rp[i] = (uint32_t)((i * 40503 + 17) % pages);
    }
    gw_xfer_opts_t o = {.size = sizeof(o), .notify = GW_NOTIFY_COUNTED, .value = 1};
    size_t total = (size_t)rounds * (size_t)burst, at = 0;
    double *post = malloc(total * sizeof(double));
    gw_request_t **rq = malloc((size_t)burst * sizeof(*rq));
    for (int k = 0; k < rounds + 1; k++) { /* round 0 warms up */
        for (int j = 0; j < burst; j++) {
            double t0 = now_ns();
            CHECK(gw_xfer_pages(ep, GW_XFER_PUT, sm, src, lp, rk, raddr, rp, pages, page, &o, &rq[j]));
            double t1 = now_ns();
            if (k)
                post[at++] = t1 - t0;
        }
        for (int j = 0; j < burst; j++) {
            CHECK(gw_request_wait(rq[j], 30000));
            gw_request_free(rq[j]);
        }
    }
    qsort(post, total, sizeof(double), cmp);
    printf("post %.1f\npost_med %.1f\n", post[0], post[total / 2]);
    gw_rkey_destroy(rk);
    CHECK(gw_ep_close(ep, 1000));
    CHECK(gw_mem_dereg(sm));
    CHECK(gw_context_destroy(b));
    return 0;
}
