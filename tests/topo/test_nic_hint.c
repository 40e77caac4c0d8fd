/* test_nic_hint.c - the verbs transport's default device is the NIC the
 * topology puts nearest to the process's GPU, once the process has the CUDA
 * driver loaded (fake driver + the fakegpu recorded tree: GPUs 0000:90:00.0
 * and 0000:91:00.0 share a switch with mlx5_0). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "cuda/cuda_wrap.h"
#include "fixture.h"
#include "harness.h"

int main(void)
{
    const char *lib = getenv("GPUWIRE_CUDA_LIB");
    if (!lib)
        SKIP("GPUWIRE_CUDA_LIB not set (run through ctest)");
    fx_t fx;
    fx_build(&fx, "fakegpu");
    setenv("GPUWIRE_SYSFS_ROOT", fx.sys, 1);

    /* a process without the CUDA driver loaded: no hint, CUDA not initialised for it */
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    CHECK(ctx->core.nic_hint[0] == '\0');
    gw_context_destroy(ctx);

    /* a GPU application: the driver is loaded and device 1 is current */
    void *h = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
    REQUIRE(h);
    char why[256];
    const gw_cuda_t *cu = gw_cuda_get(why, sizeof(why));
    REQUIRE(cu);
    REQUIRE(gw_cuda_ctx_for_device(1, why, sizeof(why)) != NULL);
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    fprintf(stderr, "hint: %s (%s)\n", ctx->core.nic_hint, ctx->core.nic_hint_why);
    CHECK(!strcmp(ctx->core.nic_hint, "mlx5_0"));
    CHECK(strstr(ctx->core.nic_hint_why, "GPU 1 at 0000:91:00.0") != NULL);
    gw_context_destroy(ctx);

    /* an explicit device wins */
    setenv("GPUWIRE_IB_DEVICE", "mlx5_7:1", 1);
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    CHECK(ctx->core.nic_hint[0] == '\0');
    gw_context_destroy(ctx);
    fx_remove(&fx);
    return gwt_done("topo_nic_hint");
}
