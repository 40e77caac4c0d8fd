/* SPDX-License-Identifier: Apache-2.0 */
/* region.h - the target side's check of an incoming operation against a
 * region (transport base).
 *
 * A target never trusts the initiator's key (DESIGN.md): every operation
 * that reads or writes a local region is checked against what the owner
 * registered.  tcp checks each frame against the context's region table
 * (gw_region_check); intra's initiator checks the owner's shared table slot
 * (gw_region_allows on the slot's fields).  verbs's NIC checks RDMA itself
 * (the MR's rkey, bounds and access flags); a chunk request on the staging
 * rung (verbs_stage.c, job_check) is checked with gw_region_check.
 */
#ifndef GW_TRANSPORT_REGION_H
#define GW_TRANSPORT_REGION_H

#include <stdint.h>

#include "core/core.h"
#include "mem/mem.h"

/* May [addr, addr + len) of a region [base, base + size) registered with
 * `access` be used for `need` (GW_ACCESS_REMOTE_READ/WRITE)?  GW_OK,
 * GW_ERR_ACCESS (checked first), GW_ERR_OUT_OF_BOUNDS. */
gw_status_t gw_region_allows(uint64_t base, uint64_t size, unsigned access, uint64_t addr, uint64_t len,
                             unsigned need);
/* Looks region `id` up in core's table and checks the range and access:
 * GW_ERR_INVALID_KEY when there is none (never registered, or revoked),
 * else as gw_region_allows.  *out is the region on GW_OK, else NULL. */
gw_status_t gw_region_check(gw_core_t *core, uint64_t id, uint64_t addr, uint64_t len, unsigned need,
                            gw_mem_t **out);

#endif
