/* SPDX-License-Identifier: Apache-2.0 */
/* gpu_reg.h - the GPU memory registration ladder for NIC transports (mem
 * layer).  The decisions live here; the NIC calls live in the transport,
 * which passes them in as callbacks (so this layer includes nothing above it).
 *
 * Rungs, best first (GPUWIRE_GPU_REG=auto tries them in order; dmabuf,
 * peermem or staging forces one and fails loudly when it is refused):
 *   1. dma-buf:  gw_cuda_dmabuf_fd() exports the range (page-aligned, see
 *                cuda_wrap.h), then ops->reg_dmabuf(fd, offset, len, iova)
 *                registers it (ibv_reg_dmabuf_mr(pd, offset, len, iova=addr,
 *                fd, access)); the fd is closed right after.
 *   2. peermem:  needs the nvidia-peermem (or legacy nv_peer_mem) kernel
 *                module, checked in <sysfs>/module/; then ops->reg_peermem()
 *                registers the device pointer like host memory (ibv_reg_mr).
 *   3. staging:  always possible: the transport moves the data through
 *                pinned host bounce buffers (mem/staging.h).
 * Each refused rung leaves its reason; the result's `path` text reads e.g.
 *   "verbs: staging (dma-buf: ibv_reg_dmabuf_mr(...) failed: Operation not
 *    supported (errno 95); peermem: nvidia-peermem not loaded (...))"
 * which the transport appends to the region's path (gw_mem_query) and
 * whose rung it reports in gw_ep_query/perf.
 *
 * A verbs mem_reg for GPU memory then reads:
 *     gw_gpu_reg_ops_t ops = {.reg_dmabuf = my_dmabuf, .reg_peermem = my_peermem, .arg = vif};
 *     gw_gpu_reg_result_t res;
 *     st = gw_gpu_reg_ladder(core, mem, "verbs", &ops, &res);
 *     if (st != GW_OK) return st;            // forced rung refused: detail set
 *     append res.path to mem->path; remember res.rung (staging: no MR of
 *     the device range; use gw_staging_* when moving it).
 */
#ifndef GW_MEM_GPU_REG_H
#define GW_MEM_GPU_REG_H

#include <stddef.h>
#include <stdint.h>

#include "mem/mem.h"

typedef enum gw_gpu_rung {
    GW_GPU_RUNG_NONE = 0,
    GW_GPU_RUNG_DMABUF = 1,
    GW_GPU_RUNG_PEERMEM = 2,
    GW_GPU_RUNG_STAGING = 3
} gw_gpu_rung_t;

typedef struct gw_gpu_reg_ops {
    /* Register the dma-buf: offset = where addr lies in the fd's range, iova
     * = addr.  GW_OK, or an error with `why` filled (errno text). */
    gw_status_t (*reg_dmabuf)(void *arg, gw_mem_t *m, int fd, uint64_t offset, uint64_t iova,
                              char *why, size_t whylen);
    /* Register the device pointer through peer memory (ibv_reg_mr). */
    gw_status_t (*reg_peermem)(void *arg, gw_mem_t *m, char *why, size_t whylen);
    void *arg;
    /* Tests may replace the exporter; NULL means gw_cuda_dmabuf_fd(). */
    gw_status_t (*export_dmabuf)(const void *ptr, size_t len, int *fd, uint64_t *off, char *why,
                                 size_t whylen);
} gw_gpu_reg_ops_t;

typedef struct gw_gpu_reg_result {
    gw_gpu_rung_t rung;
    char dmabuf_why[256];  /* "" when not tried or taken */
    char peermem_why[256];
    char path[512];        /* "<tl>: <rung> (<why higher rungs failed>)" */
} gw_gpu_reg_result_t;

const char *gw_gpu_rung_name(gw_gpu_rung_t r);

/* 1 when a peer-memory kernel module is loaded (nvidia_peermem or
 * nv_peer_mem under <sysfs_root>/module), else 0 with the reason.  sysfs_root:
 * gw_settings_sysfs_root()'s answer. */
int gw_gpu_peermem_loaded(const char *sysfs_root, char *why, size_t whylen);

/* Runs the ladder for GPU region m as GPUWIRE_GPU_REG says.  GW_OK with
 * res->rung set (staging included); with a forced rung that is refused:
 * GW_ERR_UNSUPPORTED and the detail names the rung and why. */
gw_status_t gw_gpu_reg_ladder(gw_core_t *c, gw_mem_t *m, const char *tl, const gw_gpu_reg_ops_t *ops,
                              gw_gpu_reg_result_t *res);

#endif
