/* SPDX-License-Identifier: Apache-2.0 */
/* crc_kernel.h - CRC32C of blocks of GPU memory (cuda layer): the kernel of
 * crc_kernel.cu, for the end-to-end integrity check
 * (proto/proto_integrity.h).  The values equal core/crc32c.h's
 * gw_crc32c(0, block, len). */
#ifndef GW_CUDA_CRC_KERNEL_H
#define GW_CUDA_CRC_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#include "gpuwire.h"

/* CRC32C of n blocks (addr[i], len[i]) in memory device dev's GPU reaches
 * (its own memory, pinned host memory) into crc[i]: one launch on a stream
 * of this library's, waited for.  GW_OK; GW_ERR_UNAVAILABLE (no driver, or
 * the driver refused the kernel), GW_ERR_CUDA, GW_ERR_NOMEM with why. */
gw_status_t gw_cuda_crc32c(int dev, const uint64_t *addr, const uint64_t *len, uint32_t *crc, uint32_t n, char *why,
                           size_t whylen);

#endif
