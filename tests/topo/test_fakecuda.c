/* SPDX-License-Identifier: Apache-2.0 */
/* test_fakecuda.c - gw_doctor_env_default()'s CUDA hook through the real
 * loader, against tests/fakecuda's driver (2 devices at 0000:90:00.0 and
 * 0000:91:00.0, both answering 0 for GPUDirect RDMA and dma-buf). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "harness.h"
#include "diag/doctor.h"

int main(void)
{
    if (!getenv("GPUWIRE_CUDA_LIB"))
        SKIP("GPUWIRE_CUDA_LIB not set (run through ctest)");
    fx_t fx;
    fx_build(&fx, "fakegpu");
    gw_doctor_env_t e;
    gw_doctor_env_default(&e);
    CHECK(e.cuda_query != NULL);
    e.sysfs_root = fx.sys;
    e.proc_root = fx.proc;
    e.boot_dir = fx.boot;
    gw_doctor_report_t r = {0};
    REQUIRE_OK(gw_doctor_run(&e, &r));
    gw_doctor_print(&r, stderr, 1);
    const gw_check_t *c = gw_doctor_find(&r, "cuda.driver", NULL);
    CHECK(c && c->verdict == GW_VERDICT_PASS && strstr(c->evidence, "12.4, 2 device(s) visible, 2 GPU(s)"));
    const char *gpus[] = {"GPU0 0000:90:00.0", "GPU1 0000:91:00.0"};
    for (int g = 0; g < 2; g++) {
        c = gw_doctor_find(&r, "gpu.rdma", gpus[g]);
        CHECK(c && c->verdict == GW_VERDICT_FAIL && strstr(c->evidence, "gpuwire fake GPU"));
        c = gw_doctor_find(&r, "gpu.dmabuf", gpus[g]);
        CHECK(c && c->verdict == GW_VERDICT_WARN);
        c = gw_doctor_find(&r, "pcie.path", gpus[g]);
        CHECK(c && c->verdict == GW_VERDICT_PASS && strstr(c->evidence, "mlx5_0"));
    }
    /* the live test is the tool's: without one, skip with the reason */
    c = gw_doctor_find(&r, "live.gdr", "mlx5_0");
    CHECK(c && c->verdict == GW_VERDICT_SKIP);
    CHECK(gw_doctor_exit_code(&r) == 2);
    gw_doctor_report_free(&r);
    fx_remove(&fx);
    return gwt_done("topo_fakecuda");
}
