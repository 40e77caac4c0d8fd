/* SPDX-License-Identifier: Apache-2.0 */
/* op_table.h - ids for operations the peer answers, with generation counts
 * (transport base).
 *
 * An id is gen << 32 | index.  Freeing an entry bumps its generation, so a
 * late or forged answer naming an old id finds nothing instead of another
 * request that reuses the index.  The table grows by doubling (amortised: no
 * allocation per operation in steady state); free indices are reused most
 * recent first.
 *
 * tcp keeps its request slots here (the id travels in every frame's `id`).
 * intra does not: its op ids are echoed in 32 bits of a rendezvous handle,
 * so adopting it there changes the control wire format.  verbs keeps its
 * rendezvous sends and receives here, capped (->used checked before
 * alloc) so that every index fits the narrow id its wire carries: 8 bits
 * of index under 16 of generation (gw_op_table_short_id / _get_short).
 */
#ifndef GW_TRANSPORT_OP_TABLE_H
#define GW_TRANSPORT_OP_TABLE_H

#include <stdint.h>

#include "core/request.h"

typedef struct gw_op_table {
    gw_request_t **reqs; /* by index; NULL when free */
    uint32_t *gens;      /* generation of each index */
    uint32_t *freelist;
    uint32_t n, nfree, used;
} gw_op_table_t;

void gw_op_table_init(gw_op_table_t *t);
void gw_op_table_fini(gw_op_table_t *t);
/* Enters req (req->slot = its index), *id = its id; -1 when out of memory. */
int gw_op_table_alloc(gw_op_table_t *t, gw_request_t *req, uint64_t *id);
/* Takes req out, if it is in; its id goes stale. */
void gw_op_table_free(gw_op_table_t *t, gw_request_t *req);
/* Takes every entry out (ids go stale) without reading the requests, which
 * may be recycled already (a failed endpoint's). */
void gw_op_table_clear(gw_op_table_t *t);

/* The request id names, or NULL when the id is stale or unknown. */
static inline gw_request_t *gw_op_table_get(const gw_op_table_t *t, uint64_t id)
{
    uint32_t i = (uint32_t)id, gen = (uint32_t)(id >> 32);
    if (i >= t->n || t->gens[i] != gen)
        return NULL;
    return t->reqs[i];
}

/* A narrow id for a wire field smaller than 64 bits: the index in the low
 * ibits, the low gbits of the generation above it.  Only for a table whose
 * indices fit ibits (cap ->used below 1 << ibits: indices come from the
 * first allocation, 256 of them, before any growth).  A stale narrow id is
 * caught unless the generation wrapped 2^gbits times in between. */
static inline uint64_t gw_op_table_short_id(const gw_op_table_t *t, const gw_request_t *req, unsigned ibits,
                                            unsigned gbits)
{
    uint64_t gen = t->gens[req->slot] & ((1ull << gbits) - 1);
    return gen << ibits | req->slot;
}
static inline gw_request_t *gw_op_table_get_short(const gw_op_table_t *t, uint64_t sid, unsigned ibits,
                                                  unsigned gbits)
{
    uint32_t i = (uint32_t)(sid & ((1ull << ibits) - 1));
    uint64_t gen = (sid >> ibits) & ((1ull << gbits) - 1);
    if (i >= t->n || (t->gens[i] & ((1ull << gbits) - 1)) != gen)
        return NULL;
    return t->reqs[i];
}

#endif
