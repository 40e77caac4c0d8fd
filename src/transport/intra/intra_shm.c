/* SPDX-License-Identifier: Apache-2.0 */
/* intra_shm.c - peers' shared memory (gw_mem_alloc regions) mapped into this
 * process, per endpoint: slot + region id -> local mapping.  A put or get
 * into such a region is a memcpy through the mapping (intra_copy.c:
 * intra_shm_fast for small ones, copy_start for the rest); the owner's slot
 * table still decides every access (id, bounds, access), as for CMA.  Small
 * copies skip the slot's inflight count: why that is safe is told at
 * intra_shm_fast. */
#include "transport/intra/intra.h"

#include <stdlib.h>

#include "mem/mem.h"

static void shm_drop(gw_intra_shm_t *m)
{
    gw_list_del(&m->link);
    gw_shm_unmap(m->base, m->len);
    free(m);
}

gw_intra_shm_t *gw_intra_shm_find(gw_list_t *maps, uint32_t slot, uint64_t id)
{
    gw_list_t *p, *t;
    gw_list_for_each_safe(p, t, maps) {
        gw_intra_shm_t *m = gw_container_of(p, gw_intra_shm_t, link);
        if (m->slot != slot)
            continue;
        if (m->id != id) { /* the owner reused the slot: the old region is gone */
            shm_drop(m);
            continue;
        }
        if (p != maps->next) { /* most recently used first */
            gw_list_del(p);
            gw_list_push_front(maps, p);
        }
        return m;
    }
    return NULL;
}

gw_status_t gw_intra_shm_add(gw_core_t *c, gw_list_t *maps, uint32_t slot, uint64_t id, int fd, uint64_t addr,
                             uint64_t len, gw_intra_shm_t **out)
{
    gw_intra_shm_t *m = calloc(1, sizeof(*m));
    if (!m)
        return gw_err(c, GW_ERR_NOMEM, "intra: out of memory");
    void *base = NULL;
    gw_status_t st = gw_shm_map(c, fd, (size_t)len, &base);
    if (st != GW_OK) {
        free(m);
        return st;
    }
    m->slot = slot;
    m->id = id;
    m->addr = addr;
    m->len = (size_t)len;
    m->base = base;
    gw_list_push_front(maps, &m->link);
    *out = m;
    return GW_OK;
}

void gw_intra_shm_drop_all(gw_list_t *maps)
{
    gw_list_t *p, *t;
    gw_list_for_each_safe(p, t, maps) shm_drop(gw_container_of(p, gw_intra_shm_t, link));
}
