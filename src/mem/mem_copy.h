/* SPDX-License-Identifier: Apache-2.0 */
/* mem_copy.h - small synchronous copies between host memory and a buffer
 * that may lie in GPU memory (mem layer).
 *
 * One helper for every place that delivers bytes the transport holds in
 * host memory (an eager payload, a bounce buffer) into a user buffer, or
 * reads a user buffer into host memory: a memcpy for host memory, one
 * synchronous copy-engine copy (gw_staging_copy_sync) for GPU memory.
 * Large streamed transfers use the staging rings instead (staging.h). */
#ifndef GW_MEM_MEM_COPY_H
#define GW_MEM_MEM_COPY_H

#include <stddef.h>

#include "core/core.h"
#include "mem/mem.h"

/* Copies n bytes of host memory src to dst, a buffer inside region m (NULL
 * or host memory: memcpy; GPU memory: a copy on m's device). */
gw_status_t gw_mem_copy_to(gw_core_t *core, const gw_mem_t *m, void *dst, const void *src, size_t n);
/* Copies n bytes of src, a buffer inside region m, to host memory dst. */
gw_status_t gw_mem_copy_from(gw_core_t *core, const gw_mem_t *m, void *dst, const void *src, size_t n);

#endif
