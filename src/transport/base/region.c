/* SPDX-License-Identifier: Apache-2.0 */
/* region.c - target-side region checks (region.h). */
#include "transport/base/region.h"

gw_status_t gw_region_allows(uint64_t base, uint64_t size, unsigned access, uint64_t addr, uint64_t len,
                             unsigned need)
{
    if (!(access & need))
        return GW_ERR_ACCESS;
    if (!gw_range_inside(base, size, addr, len))
        return GW_ERR_OUT_OF_BOUNDS;
    return GW_OK;
}

gw_status_t gw_region_check(gw_core_t *core, uint64_t id, uint64_t addr, uint64_t len, unsigned need,
                            gw_mem_t **out)
{
    gw_mem_t *m = gw_hmap_get(&core->regions, id);
    *out = NULL;
    if (!m)
        return GW_ERR_INVALID_KEY;
    gw_status_t st = gw_region_allows((uint64_t)(uintptr_t)m->addr, m->len, m->access, addr, len, need);
    if (st == GW_OK)
        *out = m;
    return st;
}
