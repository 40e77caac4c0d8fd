/* SPDX-License-Identifier: Apache-2.0 */
/* op_table.c - generation-counted operation ids (op_table.h). */
#include "transport/base/op_table.h"

#include <stdlib.h>
#include <string.h>

void gw_op_table_init(gw_op_table_t *t)
{
    memset(t, 0, sizeof(*t));
}

void gw_op_table_fini(gw_op_table_t *t)
{
    free(t->reqs);
    free(t->gens);
    free(t->freelist);
    gw_op_table_init(t);
}

int gw_op_table_alloc(gw_op_table_t *t, gw_request_t *req, uint64_t *id)
{
    if (!t->nfree) {
        uint32_t n = t->n ? t->n * 2 : 256;
        gw_request_t **r = realloc(t->reqs, n * sizeof(*r));
        if (!r)
            return -1;
        t->reqs = r;
        uint32_t *g = realloc(t->gens, n * sizeof(*g));
        if (!g)
            return -1;
        t->gens = g;
        uint32_t *f = realloc(t->freelist, n * sizeof(*f));
        if (!f)
            return -1;
        t->freelist = f;
        for (uint32_t i = n; i-- > t->n;) {
            t->reqs[i] = NULL;
            t->gens[i] = 1;
            t->freelist[t->nfree++] = i;
        }
        t->n = n;
    }
    uint32_t i = t->freelist[--t->nfree];
    t->reqs[i] = req;
    req->slot = i;
    t->used++;
    *id = ((uint64_t)t->gens[i] << 32) | i;
    return 0;
}

void gw_op_table_free(gw_op_table_t *t, gw_request_t *req)
{
    uint32_t i = req->slot;
    if (i < t->n && t->reqs[i] == req) {
        t->reqs[i] = NULL;
        t->gens[i]++;
        t->freelist[t->nfree++] = i;
        t->used--;
    }
}

void gw_op_table_clear(gw_op_table_t *t)
{
    for (uint32_t i = 0; i < t->n; i++) {
        if (t->reqs[i]) {
            t->reqs[i] = NULL;
            t->gens[i]++;
            t->freelist[t->nfree++] = i;
        }
    }
    t->used = 0;
}
