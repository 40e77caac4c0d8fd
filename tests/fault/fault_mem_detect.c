/* SPDX-License-Identifier: Apache-2.0 */
/* fault_mem_detect.c - what gw_mem_reg makes of a driver that cannot answer
 * cuPointerGetAttributes (GPUWIRE_FAULT cuda.cuPointerGetAttributes), with
 * the fake driver (tests/fakecuda):
 *   uninit  CUDA_ERROR_NOT_INITIALIZED, as in a child forked after its
 *           parent initialised CUDA (seen on a GPU host: every host
 *           registration of such a child failed): CUDA holds no device
 *           memory in this process, so host memory registers as host
 *   broken  CUDA_ERROR_ILLEGAL_ADDRESS: the driver failing; registering
 *           fails with GW_ERR_CUDA naming the call rather than guessing
 * Each case checks that its rule fired. */
#include <stdlib.h>
#include <string.h>

#include "core/fault.h"
#include "cuda/cuda_wrap.h"
#include "harness.h"

static void run(const char *err, gw_status_t want)
{
    char why[256];
    if (!gw_cuda_get(why, sizeof(why)))
        SKIP("fake CUDA driver not loaded: %s", why);
    char rule[128];
    snprintf(rule, sizeof(rule), "cuda.cuPointerGetAttributes:fail=%s*all", err);
    setenv("GPUWIRE_FAULT", rule, 1);
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    size_t len = 1 << 16;
    void *buf = malloc(len);
    REQUIRE(buf);
    memset(buf, 7, len);
    gw_mem_t *mem = NULL;
    gw_status_t st = gw_mem_reg(ctx, buf, len, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, &mem);
    fprintf(stderr, "%s: gw_mem_reg -> %s: %s\n", err, gw_status_name(st), st == GW_OK ? "" : gw_last_error(ctx));
    REQUIRE(st == want);
    REQUIRE(gw_fault_fired(0) > 0);
    if (st == GW_OK) {
        gw_mem_info_t info = {.size = sizeof(info)};
        REQUIRE_OK(gw_mem_query(mem, &info));
        REQUIRE(info.type == GW_MEM_HOST && info.cuda_device == -1);
        REQUIRE_OK(gw_mem_dereg(mem));
    } else {
        REQUIRE(strstr(gw_last_error(ctx), "cuPointerGetAttributes") != NULL);
        REQUIRE(mem == NULL);
    }
    REQUIRE_OK(gw_context_destroy(ctx));
    free(buf);
}

static void case_uninit(void) { run("CUDA_ERROR_NOT_INITIALIZED", GW_OK); }
static void case_broken(void) { run("CUDA_ERROR_ILLEGAL_ADDRESS", GW_ERR_CUDA); }

static const gwt_case_t cases[] = {GWT_CASE(uninit), GWT_CASE(broken)};

int main(int argc, char **argv) { return GWT_MAIN(argc, argv, cases); }
