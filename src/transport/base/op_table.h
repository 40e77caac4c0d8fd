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
 * so adopting it there changes the control wire format.  verbs (t10c): the
 * fixed rdv[64] + rdv_gen[64] arrays (verbs.h) are this table with a cap;
 * rdv_alloc becomes gw_op_table_alloc and the CTS/FIN lookups
 * gw_op_table_get, with a check of ->used against the cap.
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

/* The request id names, or NULL when the id is stale or unknown. */
static inline gw_request_t *gw_op_table_get(const gw_op_table_t *t, uint64_t id)
{
    uint32_t i = (uint32_t)id, gen = (uint32_t)(id >> 32);
    if (i >= t->n || t->gens[i] != gen)
        return NULL;
    return t->reqs[i];
}

#endif
