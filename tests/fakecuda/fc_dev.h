/* SPDX-License-Identifier: Apache-2.0 */
/* fc_dev.h - helpers for the tests that run GPU paths against a CUDA
 * driver (tests/fakecuda's stand-in, or a real one): the loaded driver
 * (the test skips without one), device allocations filled and checked
 * with the harness's patterns, and the client side of a two-process test.
 * Header-only: each test is one program. */
#ifndef GW_TEST_FC_DEV_H
#define GW_TEST_FC_DEV_H

#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda/cuda_wrap.h"
#include "harness.h"

/* The driver; with need_ctx, also a current context on device 0 (a real
 * driver needs one before the test's own calls). */
static inline const gw_cuda_t *fc_cuda(int need_ctx)
{
    char why[256];
    const gw_cuda_t *cu = gw_cuda_get(why, sizeof(why));
    if (!cu)
        SKIP("fake CUDA driver not loaded: %s", why);
    if (need_ctx && !gw_cuda_ctx_for_device(0, why, sizeof(why)))
        SKIP("no CUDA context for device 0: %s", why);
    return cu;
}

static inline void *fc_dev_alloc(const gw_cuda_t *cu, size_t n)
{
    CUdeviceptr p;
    REQUIRE(cu->cuMemAlloc(&p, n) == CUDA_SUCCESS);
    return (void *)(uintptr_t)p;
}

static inline void fc_dev_fill(const gw_cuda_t *cu, void *dev, size_t n, uint64_t seed)
{
    uint8_t *h = malloc(n ? n : 1);
    gwt_fill(h, n, seed);
    REQUIRE(cu->cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dev, h, n) == CUDA_SUCCESS);
    free(h);
}

/* An allocation of n bytes filled with the pattern of seed. */
static inline void *fc_dev_alloc_filled(const gw_cuda_t *cu, size_t n, uint64_t seed)
{
    void *p = fc_dev_alloc(cu, n);
    fc_dev_fill(cu, p, n, seed);
    return p;
}

/* gwt_verify over the device bytes: the first mismatching offset, or -1. */
static inline long long fc_dev_verify(const gw_cuda_t *cu, const void *dev, size_t n, uint64_t seed)
{
    uint8_t *h = malloc(n ? n : 1);
    REQUIRE(cu->cuMemcpyDtoH(h, (CUdeviceptr)(uintptr_t)dev, n) == CUDA_SUCCESS);
    long long r = gwt_verify(h, n, seed);
    free(h);
    return r;
}

/* Launches of `name` (a kernel, or a logged call) in the fake driver's
 * launch log (FAKECUDA_LAUNCHES: one "name items" line each; 0 without the
 * log).  *items (if given): their items summed; *big (if given): those of
 * more than big_min items. */
static inline unsigned fc_launches(const char *name, unsigned *items, unsigned big_min, unsigned *big)
{
    const char *path = getenv("FAKECUDA_LAUNCHES");
    FILE *lf = path ? fopen(path, "r") : NULL;
    char k[64];
    unsigned n, nl = 0, sum = 0, nbig = 0;
    while (lf && fscanf(lf, "%63s %u\n", k, &n) == 2)
        if (!strcmp(k, name)) {
            nl++;
            sum += n;
            nbig += n > big_min;
        }
    if (lf)
        fclose(lf);
    if (items)
        *items = sum;
    if (big)
        *big = nbig;
    return nl;
}

/* The client side of a two-process test: the server's address from its
 * channel, a context and an endpoint to it, what it connected over
 * printed; with need, skipped unless that is the endpoint's transport. */
static inline gw_ep_t *fc_client(gwt_chan_t *ch, gw_context_t **ctx, const char *need)
{
    char addr[128];
    REQUIRE(gwt_chan_recv(ch, addr, sizeof(addr), 10000) > 0);
    REQUIRE_OK(gw_context_create(NULL, ctx));
    gw_ep_t *ep;
    REQUIRE_OK(gw_connect(*ctx, addr, &ep));
    gw_ep_info_t info = {.size = sizeof(info)};
    gw_ep_query(ep, &info);
    fprintf(stderr, "connected over %s (%s)\n", info.transport, info.path);
    if (need && strcmp(info.transport, need))
        SKIP("the endpoint is %s, not %s", info.transport, need);
    return ep;
}

/* Progresses ctx until one byte comes over chan; fails after 60 s. */
static inline void fc_wait_chan(gwt_chan_t *chan, gw_context_t *ctx)
{
    char c;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        struct pollfd p = {.fd = chan->rfd, .events = POLLIN};
        if (poll(&p, 1, 1) > 0) {
            REQUIRE(gwt_chan_recv(chan, &c, 1, 5000) == 1);
            return;
        }
        gw_progress(ctx);
        clock_gettime(CLOCK_MONOTONIC, &t);
        REQUIRE(t.tv_sec - t0.tv_sec < 60);
    }
}

/* n distinct indices below lim into out, reproducible from seed (the
 * head of a shuffle). */
static inline void fc_pick(uint32_t *out, uint32_t n, uint32_t lim, uint64_t seed)
{
    uint32_t *all = malloc((size_t)lim * sizeof(*all));
    REQUIRE(all);
    for (uint32_t i = 0; i < lim; i++)
        all[i] = i;
    uint64_t s = seed;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t j = i + (uint32_t)(gwt_xorshift(&s) % (lim - i)), t = all[i];
        all[i] = all[j];
        all[j] = t;
    }
    memcpy(out, all, (size_t)n * sizeof(*out));
    free(all);
}

#endif
