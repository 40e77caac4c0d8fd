/* SPDX-License-Identifier: Apache-2.0 */
/* test_nic_hint.c - the verbs transport's default device is the NIC the
 * topology puts nearest to the process's GPU (gw_topo_process_nic, asked by
 * the verbs transport itself), once the process has the CUDA driver loaded
 * (fake driver + the fakegpu recorded tree: GPUs 0000:90:00.0 and
 * 0000:91:00.0 share a switch with mlx5_0); an explicit GPUWIRE_IB_DEVICE
 * wins over it. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "cuda/cuda_wrap.h"
#include "topo/topo.h"
#include "fixture.h"
#include "harness.h"

/* What the process's settings give gw_topo_process_nic now. */
static gw_status_t process_nic(char *nic, size_t niclen, char *why, size_t whylen)
{
    gw_settings_t s;
    char err[256];
    REQUIRE_OK(gw_settings_load(&s, err, sizeof(err)));
    gw_status_t st = gw_topo_process_nic(&s, nic, niclen, why, whylen);
    gw_settings_free(&s);
    return st;
}

/* Where the verbs transport's choice shows: its line in `gpuwire info`
 * (usable) or why it is not usable. */
static void verbs_line(gw_context_t *ctx, char *buf, size_t len)
{
    gw_transport_info_t ti = {.size = sizeof(ti)};
    REQUIRE_OK(gw_transport_at(ctx, GW_TL_VERBS, &ti));
    snprintf(buf, len, "%s", ti.detail);
}

int main(void)
{
    const char *lib = getenv("GPUWIRE_CUDA_LIB");
    if (!lib)
        SKIP("GPUWIRE_CUDA_LIB not set (run through ctest)");
    fx_t fx;
    fx_build(&fx, "fakegpu");
    setenv("GPUWIRE_SYSFS_ROOT", fx.sys, 1);
    char nic[64], why[256], line[512];

    /* a process without the CUDA driver loaded: no hint, CUDA not initialised for it */
    strcpy(nic, "x");
    CHECK_ST(process_nic(nic, sizeof(nic), why, sizeof(why)), GW_ERR_NOT_FOUND);
    fprintf(stderr, "no driver: %s\n", why);
    CHECK(nic[0] == '\0');
    CHECK(strstr(why, "not loaded the CUDA driver") != NULL);
    CHECK(dlopen(lib, RTLD_NOW | RTLD_NOLOAD) == NULL);
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    verbs_line(ctx, line, sizeof(line));
    fprintf(stderr, "verbs without a hint: %s\n", line);
    CHECK(!strstr(line, "nearest to GPU"));
    gw_context_destroy(ctx);

    /* a GPU application: the driver is loaded and device 1 is current */
    void *h = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
    REQUIRE(h);
    const gw_cuda_t *cu = gw_cuda_get(why, sizeof(why));
    REQUIRE(cu);
    REQUIRE(gw_cuda_ctx_for_device(1, why, sizeof(why)) != NULL);
    REQUIRE_OK(process_nic(nic, sizeof(nic), why, sizeof(why)));
    fprintf(stderr, "hint: %s (%s)\n", nic, why);
    CHECK(!strcmp(nic, "mlx5_0"));
    CHECK(strstr(why, "GPU 1 at 0000:91:00.0") != NULL);

    /* an explicit device wins: verbs does not ask the topology, so it looks
     * for mlx5_7 (absent from the tree: it says so) and falls back to no
     * other device (where libibverbs loads and reads the tree) */
    setenv("GPUWIRE_IB_DEVICE", "mlx5_7:1", 1);
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    verbs_line(ctx, line, sizeof(line));
    fprintf(stderr, "verbs with GPUWIRE_IB_DEVICE: %s\n", line);
    CHECK(!strstr(line, "nearest to GPU"));
    if (GW_HAVE_VERBS && !strstr(line, "libibverbs"))
        CHECK(strstr(line, "mlx5_7") != NULL && !strstr(line, "mlx5_0"));
    gw_context_destroy(ctx);
    fx_remove(&fx);
    return gwt_done("topo_nic_hint");
}
