/* SPDX-License-Identifier: Apache-2.0 */
/* gpu_bench_util.h - sizes, timing and result lines shared by the GPU
 * benchmarks.  Every benchmark prints lines
 *     RESULT <bench> <bytes> lat_us=<x> bw_GBps=<y>
 * lat_us: one operation posted and waited for, mean over many;
 * bw_GBps: a window of operations posted back to back, then waited for
 * (10^9 bytes per second).  bench/device/gpu_bench.sh joins them into one table. */
#ifndef GW_BENCH_GPU_UTIL_H
#define GW_BENCH_GPU_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const size_t gwb_sizes[] = {8,        64,        512,       4096,      32768,
                                   262144,   1u << 20,  4u << 20,  16u << 20, 64u << 20,
                                   256u << 20, 1u << 30};
#define GWB_NSIZES (sizeof(gwb_sizes) / sizeof(gwb_sizes[0]))

static inline double gwb_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Iterations for a size: about 2 GiB moved per measurement, 5..1000. */
static inline int gwb_iters(size_t size)
{
    size_t it = (2ull << 30) / size;
    if (it > 1000)
        it = 1000;
    if (it < 5)
        it = 5;
    return (int)it;
}

/* Largest size to run: GWB_MAX_SIZE in the environment (bytes), default 1 GiB. */
static inline size_t gwb_max_size(void)
{
    const char *s = getenv("GWB_MAX_SIZE");
    return s ? (size_t)strtoull(s, NULL, 0) : (1u << 30);
}

static inline void gwb_result(const char *bench, size_t size, double lat_us, double bw)
{
    printf("RESULT %s %zu lat_us=%.2f bw_GBps=%.3f\n", bench, size, lat_us, bw);
    fflush(stdout);
}

#endif
