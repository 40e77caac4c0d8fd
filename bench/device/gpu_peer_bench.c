/* SPDX-License-Identifier: Apache-2.0 */
/* gpu_peer_bench - the copy-engine baseline: cuMemcpyPeerAsync GPU0 -> GPU1
 * in one process with peer access enabled.  Driver API only (libcuda loaded
 * through gpuwire's loader). */
#include "../tests/gpu/gpu_util.h"
#include "gpu_bench_util.h"

int main(void)
{
    const gw_cuda_t *cu = gpu_require(2);
    char why[256];
    CUcontext c0 = gw_cuda_ctx_for_device(0, why, sizeof(why));
    CUcontext c1 = gw_cuda_ctx_for_device(1, why, sizeof(why));
    REQUIRE(c0 && c1);
    size_t maxs = gwb_max_size();
    CUdeviceptr b1 = 0, b0 = 0;
    CU_CHECK(cu->cuCtxSetCurrent(c1));
    CU_CHECK(cu->cuMemAlloc(&b1, maxs));
    CUresult r = cu->cuCtxEnablePeerAccess(c0, 0);
    REQUIRE(r == CUDA_SUCCESS || r == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
    CU_CHECK(cu->cuCtxSetCurrent(c0));
    CU_CHECK(cu->cuMemAlloc(&b0, maxs));
    r = cu->cuCtxEnablePeerAccess(c1, 0);
    REQUIRE(r == CUDA_SUCCESS || r == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
    CU_CHECK(cu->cuMemsetD8(b0, 0x5a, maxs));
    CUstream s;
    CU_CHECK(cu->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    for (size_t i = 0; i < GWB_NSIZES && gwb_sizes[i] <= maxs; i++) {
        size_t n = gwb_sizes[i];
        int it = gwb_iters(n);
        for (int w = 0; w < 3; w++)
            CU_CHECK(cu->cuMemcpyPeerAsync(b1, c1, b0, c0, n, s));
        CU_CHECK(cu->cuStreamSynchronize(s));
        int lit = n <= (1u << 20) ? (it > 200 ? 200 : it) : 2;
        double t0 = gwb_now();
        for (int k = 0; k < lit; k++) {
            CU_CHECK(cu->cuMemcpyPeerAsync(b1, c1, b0, c0, n, s));
            CU_CHECK(cu->cuStreamSynchronize(s));
        }
        double lat = (gwb_now() - t0) / lit * 1e6;
        t0 = gwb_now();
        for (int k = 0; k < it; k++)
            CU_CHECK(cu->cuMemcpyPeerAsync(b1, c1, b0, c0, n, s));
        CU_CHECK(cu->cuStreamSynchronize(s));
        double bw = (double)n * it / (gwb_now() - t0) / 1e9;
        gwb_result("memcpy_peer", n, lat, bw);
    }
    /* check the last copy landed */
    unsigned char probe[64];
    CU_CHECK(cu->cuMemcpyDtoH(probe, b1, sizeof(probe)));
    for (size_t i = 0; i < sizeof(probe); i++)
        REQUIRE(probe[i] == 0x5a);
    return 0;
}
