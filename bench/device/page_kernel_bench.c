/* SPDX-License-Identifier: Apache-2.0 */
/* page_kernel_bench - the page kernel alone (gw_cuda_page_copy_launch, what
 * an intra paged GPU transfer launches), timed by CUDA events on its stream,
 * beside one contiguous copy-engine copy of the same bytes
 * (cuMemcpyPeerAsync), GPU 0 -> GPU 1 with peer access (or within GPU 0
 * where there is one GPU).  Pages are picked at random, distinct, from a
 * pool twice the transfer on each side (as bench/compare/kv_shapes.py).
 * Index arrays in pinned host memory (what the library passes), and in GPU
 * memory (what it would cost without the PCIe reads).  Every page of the
 * last kernel copy is checked.  No transport, no notification, no Python:
 * the difference between this and kv_shapes.py's paged/contiguous ratio is
 * the library's and the pipeline's, not the kernel's.
 *   page_kernel_bench [TOTAL_MIB (default 32)] [REPS (default 20)] */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../tests/gpu/gpu_util.h"
#include "cuda/cuda_wrap.h"

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)g_rng;
}

/* n distinct indices from 0..pool-1 */
static void pick(uint32_t *idx, uint32_t n, uint32_t pool)
{
    uint32_t *all = malloc(pool * sizeof(uint32_t));
    for (uint32_t i = 0; i < pool; i++)
        all[i] = i;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t j = i + rnd() % (pool - i), t = all[i];
        all[i] = all[j];
        all[j] = t;
        idx[i] = all[i];
    }
    free(all);
}

int main(int argc, char **argv)
{
    size_t total = (argc > 1 ? strtoul(argv[1], NULL, 10) : 32) << 20;
    int reps = argc > 2 ? atoi(argv[2]) : 20;
    if (reps < 3 || reps > 1000)
        reps = 20;
    const gw_cuda_t *cu = gpu_require(1);
    char why[256];
    int ndev = 0;
    CU_CHECK(cu->cuDeviceGetCount(&ndev));
    int peer = ndev > 1;
    CUcontext c0 = gw_cuda_ctx_for_device(0, why, sizeof(why)), c1 = peer ? gw_cuda_ctx_for_device(1, why, sizeof(why)) : c0;
    REQUIRE(c0 && c1);
    CUdeviceptr src = 0, dst = 0;
    size_t span = 2 * total;
    CU_CHECK(cu->cuCtxSetCurrent(c1));
    CU_CHECK(cu->cuMemAlloc(&dst, span));
    if (peer) {
        CUresult r = cu->cuCtxEnablePeerAccess(c0, 0);
        REQUIRE(r == CUDA_SUCCESS || r == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
    }
    CU_CHECK(cu->cuCtxSetCurrent(c0));
    CU_CHECK(cu->cuMemAlloc(&src, span));
    if (peer) {
        CUresult r = cu->cuCtxEnablePeerAccess(c1, 0);
        REQUIRE(r == CUDA_SUCCESS || r == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
    }
    /* source: each 16-byte word holds its own offset */
    uint64_t *h = malloc(span);
    REQUIRE(h);
    for (size_t i = 0; i < span / 8; i++)
        h[i] = i * 8;
    CU_CHECK(cu->cuMemcpyHtoD(src, h, span));
    CUstream s;
    CU_CHECK(cu->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUevent e0, e1;
    CU_CHECK(cu->cuEventCreate(&e0, 0));
    CU_CHECK(cu->cuEventCreate(&e1, 0));
    printf("# page_kernel_bench: %zu MiB per transfer, GPU 0 -> GPU %d%s, median of %d, CUDA events on the stream\n",
           total >> 20, peer, peer ? " (peer access)" : " (one GPU)", reps);
    printf("%8s %7s %10s %12s %12s %10s %10s %s\n", "page", "pages", "contig", "kern pinned", "kern device",
           "pin/contig", "dev/contig", "checked");
    static const size_t psz[] = {2048, 4096, 16384, 65536, 131072};
    for (size_t k = 0; k < sizeof(psz) / sizeof(psz[0]); k++) {
        size_t ps = psz[k];
        uint32_t n = (uint32_t)(total / ps);
        uint32_t *si = NULL, *di = NULL;
        CU_CHECK(cu->cuMemHostAlloc((void **)&si, n * 4, 0));
        CU_CHECK(cu->cuMemHostAlloc((void **)&di, n * 4, 0));
        pick(si, n, 2 * n);
        pick(di, n, 2 * n);
        CUdeviceptr dsi = 0, ddi = 0;
        CU_CHECK(cu->cuMemAlloc(&dsi, n * 4));
        CU_CHECK(cu->cuMemAlloc(&ddi, n * 4));
        CU_CHECK(cu->cuMemcpyHtoD(dsi, si, n * 4));
        CU_CHECK(cu->cuMemcpyHtoD(ddi, di, n * 4));
        double t[3][1000];
        for (int r = 0; r < reps + 2; r++) {
            for (int m = 0; m < 3; m++) {
                CU_CHECK(cu->cuEventRecord(e0, s));
                if (m == 0)
                    CU_CHECK(cu->cuMemcpyPeerAsync(dst, c1, src, c0, total, s));
                else {
                    const uint32_t *a = m == 1 ? si : (const uint32_t *)(uintptr_t)dsi;
                    const uint32_t *b = m == 1 ? di : (const uint32_t *)(uintptr_t)ddi;
                    REQUIRE(gw_cuda_page_copy_launch(0, s, a, b, n, src, dst, ps, NULL, why, sizeof(why)) == GW_OK);
                }
                CU_CHECK(cu->cuEventRecord(e1, s));
                CU_CHECK(cu->cuEventSynchronize(e1));
                float ms = 0;
                CU_CHECK(cu->cuEventElapsedTime(&ms, e0, e1));
                if (r >= 2)
                    t[m][r - 2] = ms;
            }
        }
        double gb[3];
        for (int m = 0; m < 3; m++) {
            qsort(t[m], reps, sizeof(double), cmpd);
            gb[m] = total / (t[m][reps / 2] * 1e-3) / 1e9;
        }
        /* the last copy was the kernel with device indices: check every page */
        uint64_t *got = malloc(span);
        CU_CHECK(cu->cuMemcpyDtoH(got, dst, span));
        uint32_t bad = 0;
        for (uint32_t p = 0; p < n; p++) {
            const uint64_t *g = got + (size_t)di[p] * ps / 8;
            uint64_t want = (uint64_t)si[p] * ps;
            if (g[0] != want || g[ps / 8 - 1] != want + ps - 8)
                bad++;
        }
        free(got);
        printf("%7zuK %7u %10.1f %12.1f %12.1f %10.2f %10.2f %s\n", ps >> 10, n, gb[0], gb[1], gb[2], gb[1] / gb[0],
               gb[2] / gb[0], bad ? "WRONG PAGES" : "every page");
        if (bad)
            printf("  %u of %u pages wrong\n", bad, n);
        cu->cuMemFreeHost(si);
        cu->cuMemFreeHost(di);
        cu->cuMemFree(dsi);
        cu->cuMemFree(ddi);
        if (bad)
            return 1;
    }
    free(h);
    return 0;
}
