/* SPDX-License-Identifier: Apache-2.0 */
/* gpu_reg.c - the GPU registration ladder: dma-buf, peer memory, staging
 * (see gpu_reg.h). */
#include "mem/gpu_reg.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cuda/cuda_wrap.h"

const char *gw_gpu_rung_name(gw_gpu_rung_t r)
{
    switch (r) {
    case GW_GPU_RUNG_DMABUF: return "dma-buf";
    case GW_GPU_RUNG_PEERMEM: return "peermem";
    case GW_GPU_RUNG_STAGING: return "staging";
    default: return "none";
    }
}

int gw_gpu_peermem_loaded(const char *sysfs_root, char *why, size_t whylen)
{
    static const char *const mods[] = {"nvidia_peermem", "nv_peer_mem"};
    char p[512];
    struct stat sb;
    for (size_t i = 0; i < sizeof(mods) / sizeof(mods[0]); i++) {
        snprintf(p, sizeof(p), "%s/module/%s", sysfs_root, mods[i]);
        if (stat(p, &sb) == 0)
            return 1;
    }
    snprintf(why, whylen, "nvidia-peermem not loaded (no %s/module/nvidia_peermem; `modprobe nvidia-peermem`)",
             sysfs_root);
    return 0;
}

static gw_status_t try_dmabuf(gw_mem_t *m, const gw_gpu_reg_ops_t *ops, char *why, size_t whylen)
{
    int fd = -1;
    uint64_t off = 0;
    gw_status_t st = ops->export_dmabuf ? ops->export_dmabuf(m->addr, m->len, &fd, &off, why, whylen)
                                        : gw_cuda_dmabuf_fd(m->addr, m->len, &fd, &off, why, whylen);
    if (st != GW_OK)
        return st;
    st = ops->reg_dmabuf(ops->arg, m, fd, off, (uint64_t)(uintptr_t)m->addr, why, whylen);
    close(fd); /* the MR holds its own reference to the dma-buf */
    return st;
}

gw_status_t gw_gpu_reg_ladder(gw_core_t *c, gw_mem_t *m, const char *tl, const gw_gpu_reg_ops_t *ops,
                              gw_gpu_reg_result_t *res)
{
    memset(res, 0, sizeof(*res));
    const char *mode = gw_settings_str(&c->settings, GW_SET_GPU_REG);
    int want_dmabuf = 1, want_peermem = 1, forced = 0;
    if (!strcmp(mode, "dmabuf")) {
        want_peermem = 0;
        forced = GW_GPU_RUNG_DMABUF;
    } else if (!strcmp(mode, "peermem")) {
        want_dmabuf = 0;
        forced = GW_GPU_RUNG_PEERMEM;
    } else if (!strcmp(mode, "staging")) {
        want_dmabuf = want_peermem = 0;
        forced = GW_GPU_RUNG_STAGING;
    } else if (strcmp(mode, "auto") != 0) {
        return gw_err(c, GW_ERR_CONFIG, "GPUWIRE_GPU_REG=\"%s\": expected auto, dmabuf, peermem or staging", mode);
    }
    if (want_dmabuf) {
        if (try_dmabuf(m, ops, res->dmabuf_why, sizeof(res->dmabuf_why)) == GW_OK) {
            res->rung = GW_GPU_RUNG_DMABUF;
            res->dmabuf_why[0] = '\0';
            snprintf(res->path, sizeof(res->path), "%s: dma-buf (GPUDirect RDMA)", tl);
            return GW_OK;
        }
        if (forced)
            return gw_err(c, GW_ERR_UNSUPPORTED,
                          "%s: registering GPU memory %p (+%zu) by dma-buf (GPUWIRE_GPU_REG=dmabuf) failed: %s", tl,
                          m->addr, m->len, res->dmabuf_why);
    } else {
        snprintf(res->dmabuf_why, sizeof(res->dmabuf_why), "skipped (GPUWIRE_GPU_REG=%s)", mode);
    }
    if (want_peermem) {
        const char *sysfs = gw_settings_sysfs_root(&c->settings);
        if (gw_gpu_peermem_loaded(sysfs, res->peermem_why, sizeof(res->peermem_why)) &&
            ops->reg_peermem(ops->arg, m, res->peermem_why, sizeof(res->peermem_why)) == GW_OK) {
            res->rung = GW_GPU_RUNG_PEERMEM;
            res->peermem_why[0] = '\0';
            snprintf(res->path, sizeof(res->path), "%s: peermem (GPUDirect RDMA; dma-buf: %.200s)", tl,
                     res->dmabuf_why);
            return GW_OK;
        }
        if (forced)
            return gw_err(c, GW_ERR_UNSUPPORTED,
                          "%s: registering GPU memory %p (+%zu) through peer memory (GPUWIRE_GPU_REG=peermem) "
                          "failed: %s", tl, m->addr, m->len, res->peermem_why);
    } else {
        snprintf(res->peermem_why, sizeof(res->peermem_why), "skipped (GPUWIRE_GPU_REG=%s)", mode);
    }
    res->rung = GW_GPU_RUNG_STAGING;
    snprintf(res->path, sizeof(res->path), "%s: staging through pinned host buffers (dma-buf: %.200s; peermem: %.200s)",
             tl, res->dmabuf_why, res->peermem_why);
    return GW_OK;
}
