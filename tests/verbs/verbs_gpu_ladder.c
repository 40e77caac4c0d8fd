/* SPDX-License-Identifier: Apache-2.0 */
/* verbs_gpu_ladder.c DEV - the GPU registration ladder on a real verbs device
 * (Soft-RoCE in the guest) with the fake CUDA driver: rung 1 exports a
 * "dma-buf" and the NIC refuses it for real (rxe: EOPNOTSUPP), rung 2 finds no
 * nvidia-peermem, rung 3 (staging) is taken; each reason is in the region's
 * path.  Forcing a refused rung fails gw_mem_reg with that reason. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda/cuda_wrap.h"
#include "harness.h"

static gw_status_t reg_with(const char *mode, int dmabuf, void *dev, gw_mem_t **m, gw_context_t **ctx,
                            char *detail, size_t dlen)
{
    setenv("GPUWIRE_GPU_REG", mode, 1);
    if (dmabuf)
        setenv("FAKECUDA_DMABUF", "1", 1);
    else
        unsetenv("FAKECUDA_DMABUF");
    REQUIRE_OK(gw_context_create(NULL, ctx));
    gw_status_t st = gw_mem_reg(*ctx, dev, 1u << 20, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, m);
    snprintf(detail, dlen, "%s", gw_last_error(*ctx));
    return st;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        SKIP("usage: verbs_gpu_ladder DEV (run in the rxe guest)");
    if (!getenv("GPUWIRE_CUDA_LIB"))
        SKIP("GPUWIRE_CUDA_LIB (the fake CUDA driver) not set");
    char dev_port[64];
    snprintf(dev_port, sizeof(dev_port), "%s:1", argv[1]);
    setenv("GPUWIRE_IB_DEVICE", dev_port, 1);
    setenv("GPUWIRE_TRANSPORTS", "verbs", 1);
    char why[256];
    const gw_cuda_t *cu = gw_cuda_get(why, sizeof(why));
    if (!cu)
        SKIP("CUDA driver not loaded: %s", why);
    CUdeviceptr p;
    REQUIRE(cu->cuMemAlloc(&p, 1u << 20) == CUDA_SUCCESS);
    void *dev = (void *)(uintptr_t)p;
    gw_context_t *ctx;
    gw_mem_t *m;
    char detail[1024];
    gw_mem_info_t mi = {.size = sizeof(mi)};

    /* auto: every rung tried, staging taken, each refusal explained */
    CHECK_ST(reg_with("auto", 1, dev, &m, &ctx, detail, sizeof(detail)), GW_OK);
    gw_mem_query(m, &mi);
    fprintf(stderr, "auto: %s\n", mi.path);
    CHECK(mi.type == GW_MEM_CUDA);
    CHECK(strstr(mi.path, "verbs: staging") != NULL);
    CHECK(strstr(mi.path, "ibv_reg_dmabuf_mr") != NULL && strstr(mi.path, "errno 95") != NULL);
    CHECK(strstr(mi.path, "peermem") != NULL);
    CHECK_ST(gw_mem_dereg(m), GW_OK);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);

    /* a GPU without dma-buf support: refused before the NIC is asked */
    CHECK_ST(reg_with("auto", 0, dev, &m, &ctx, detail, sizeof(detail)), GW_OK);
    gw_mem_query(m, &mi);
    fprintf(stderr, "auto, no dma-buf on the GPU: %s\n", mi.path);
    CHECK(strstr(mi.path, "DMA_BUF_SUPPORTED=0") != NULL);
    gw_mem_dereg(m);
    gw_context_destroy(ctx);

    /* forced rungs that cannot be had fail the registration, naming why */
    CHECK_ST(reg_with("dmabuf", 1, dev, &m, &ctx, detail, sizeof(detail)), GW_ERR_UNAVAILABLE);
    fprintf(stderr, "dmabuf forced: %s\n", detail);
    CHECK(strstr(detail, "errno 95") != NULL);
    gw_context_destroy(ctx);
    CHECK_ST(reg_with("peermem", 1, dev, &m, &ctx, detail, sizeof(detail)), GW_ERR_UNAVAILABLE);
    fprintf(stderr, "peermem forced: %s\n", detail);
    CHECK(strstr(detail, "peermem") != NULL);
    gw_context_destroy(ctx);
    return gwt_done("verbs_gpu_ladder");
}
