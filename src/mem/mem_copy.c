/* SPDX-License-Identifier: Apache-2.0 */
/* mem_copy.c - host-or-GPU small copies (mem_copy.h). */
#include "mem/mem_copy.h"

#include <string.h>

#include "cuda/cuda_wrap.h"
#include "mem/staging.h"

static gw_status_t copy(gw_core_t *core, const gw_mem_t *m, void *dst, const void *src, size_t n)
{
    if (!n)
        return GW_OK;
    if (m && m->type == GW_MEM_CUDA)
        return m->cuda_vmm && gw_cuda_copy_ctx_mode() == GW_CUDA_COPY_OWN
                   ? gw_staging_copy_sync_own(core, m->cuda_device, dst, src, n)
                   : gw_staging_copy_sync(core, m->cuda_device, dst, src, n);
    memcpy(dst, src, n);
    return GW_OK;
}

gw_status_t gw_mem_copy_to(gw_core_t *core, const gw_mem_t *m, void *dst, const void *src, size_t n)
{
    return copy(core, m, dst, src, n);
}

gw_status_t gw_mem_copy_from(gw_core_t *core, const gw_mem_t *m, void *dst, const void *src, size_t n)
{
    return copy(core, m, dst, src, n);
}
