/* SPDX-License-Identifier: Apache-2.0 */
/* test_gpu_reg_ladder - the GPU registration ladder's decisions (dma-buf,
 * then peer memory, then staging), with the NIC calls replaced by fakes and
 * a recorded sysfs tree.  Runs without a GPU or NIC: the real refusals
 * (no CUDA here; rxe's EOPNOTSUPP for dma-buf) are what the fakes return. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "cuda/cuda_wrap.h"
#include "mem/gpu_reg.h"

static int dmabuf_ok, peermem_ok, dmabuf_calls, peermem_calls, fake_export;
static uint64_t seen_off, seen_iova;

static gw_status_t fake_reg_dmabuf(void *arg, gw_mem_t *m, int fd, uint64_t off, uint64_t iova, char *why,
                                   size_t whylen)
{
    (void)arg; (void)m;
    dmabuf_calls++;
    CHECK(fd >= 0);
    seen_off = off;
    seen_iova = iova;
    if (dmabuf_ok)
        return GW_OK;
    snprintf(why, whylen, "ibv_reg_dmabuf_mr(dev=rxe0, fd=%d) failed: %s (errno %d)", fd, strerror(EOPNOTSUPP),
             EOPNOTSUPP);
    return GW_ERR_UNSUPPORTED;
}

static gw_status_t fake_reg_peermem(void *arg, gw_mem_t *m, char *why, size_t whylen)
{
    (void)arg; (void)m;
    peermem_calls++;
    if (peermem_ok)
        return GW_OK;
    snprintf(why, whylen, "ibv_reg_mr(device pointer) failed: Bad address (errno 14)");
    return GW_ERR_VERBS;
}

static gw_status_t fake_export_fn(const void *ptr, size_t len, int *fd, uint64_t *off, char *why, size_t whylen)
{
    (void)len;
    if (!fake_export)
        return gw_cuda_dmabuf_fd(ptr, len, fd, off, why, whylen);
    *fd = open("/dev/null", O_RDONLY);
    *off = (uint64_t)(uintptr_t)ptr & 4095;
    return GW_OK;
}

static gw_status_t run(const char *mode, const char *sysfs, gw_gpu_reg_result_t *res, char *detail, size_t dlen)
{
    setenv("GPUWIRE_GPU_REG", mode, 1);
    setenv("GPUWIRE_SYSFS_ROOT", sysfs, 1);
    gw_core_t core;
    char err[256];
    gw_status_t ist = gw_core_init(&core, err, sizeof(err));
    if (ist == GW_ERR_CONFIG) { /* a mode that does not parse fails the context (settings_check.c) */
        printf("[%s] %s -> %s: %s\n", mode, sysfs, gw_status_name(ist), err);
        return ist;
    }
    REQUIRE_OK(ist);
    static char region[8192];
    gw_mem_t m = {.core = &core, .addr = region + 100, .len = 5000, .type = GW_MEM_CUDA, .cuda_device = 0};
    gw_gpu_reg_ops_t ops = {.reg_dmabuf = fake_reg_dmabuf, .reg_peermem = fake_reg_peermem,
                            .export_dmabuf = fake_export_fn};
    dmabuf_calls = peermem_calls = 0;
    gw_status_t st = gw_gpu_reg_ladder(&core, &m, "verbs", &ops, res);
    snprintf(detail, dlen, "%s", core.errbuf);
    gw_core_fini(&core);
    printf("[%s] %s -> %s: %s%s%s\n", mode, sysfs, gw_status_name(st), res->path, st ? " / " : "",
           st ? detail : "");
    return st;
}

int main(void)
{
    char dir[] = "/tmp/gw-ladder-XXXXXX";
    REQUIRE(mkdtemp(dir));
    char with[600], without[600], p[700];
    snprintf(with, sizeof(with), "%s/with", dir);
    snprintf(without, sizeof(without), "%s/without", dir);
    snprintf(p, sizeof(p), "%s/module/nvidia_peermem", with);
    char cmd[1600];
    snprintf(cmd, sizeof(cmd), "mkdir -p %s %s/module", p, without);
    REQUIRE(system(cmd) == 0);
    gw_gpu_reg_result_t res;
    char detail[1100];

    /* 1. no CUDA export here (or a real one), NIC refuses dma-buf, no peermem: staging with both reasons */
    fake_export = 1;
    dmabuf_ok = 0;
    peermem_ok = 1;
    CHECK_ST(run("auto", without, &res, detail, sizeof(detail)), GW_OK);
    CHECK(res.rung == GW_GPU_RUNG_STAGING && dmabuf_calls == 1 && peermem_calls == 0);
    CHECK(strstr(res.path, "staging") && strstr(res.path, "errno 95") && strstr(res.path, "nvidia-peermem not loaded"));
    CHECK(seen_off < 4096 && seen_iova != 0);

    /* 2. dma-buf refused, peermem loaded and working: peermem, dma-buf reason kept */
    CHECK_ST(run("auto", with, &res, detail, sizeof(detail)), GW_OK);
    CHECK(res.rung == GW_GPU_RUNG_PEERMEM && dmabuf_calls == 1 && peermem_calls == 1);
    CHECK(strstr(res.path, "peermem") && strstr(res.path, "errno 95"));

    /* 3. dma-buf works: taken, peermem never tried */
    dmabuf_ok = 1;
    CHECK_ST(run("auto", with, &res, detail, sizeof(detail)), GW_OK);
    CHECK(res.rung == GW_GPU_RUNG_DMABUF && peermem_calls == 0);

    /* 4. the real exporter on this machine (no CUDA: refuses, says why) */
    fake_export = 0;
    CHECK_ST(run("auto", without, &res, detail, sizeof(detail)), GW_OK);
    CHECK(res.rung != GW_GPU_RUNG_NONE && res.path[0]);

    /* 5. forced rungs: refusal is an error naming the rung and the cause */
    fake_export = 1;
    dmabuf_ok = 0;
    CHECK_ST(run("dmabuf", with, &res, detail, sizeof(detail)), GW_ERR_UNSUPPORTED);
    CHECK(strstr(detail, "GPUWIRE_GPU_REG=dmabuf") && strstr(detail, "errno 95"));
    CHECK_ST(run("peermem", without, &res, detail, sizeof(detail)), GW_ERR_UNSUPPORTED);
    CHECK(strstr(detail, "nvidia-peermem not loaded") && dmabuf_calls == 0);
    peermem_ok = 0;
    CHECK_ST(run("peermem", with, &res, detail, sizeof(detail)), GW_ERR_UNSUPPORTED);
    CHECK(strstr(detail, "Bad address"));
    CHECK_ST(run("staging", with, &res, detail, sizeof(detail)), GW_OK);
    CHECK(res.rung == GW_GPU_RUNG_STAGING && dmabuf_calls == 0 && peermem_calls == 0 && strstr(res.path, "skipped"));
    CHECK_ST(run("fastest", with, &res, detail, sizeof(detail)), GW_ERR_CONFIG);

    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    return gwt_done("test_gpu_reg_ladder");
}
