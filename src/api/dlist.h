/* SPDX-License-Identifier: Apache-2.0 */
/* dlist.h - descriptor lists inside the api layer: their layout, shared by
 * the lists' preparation (dlist.c) and the transfers that read them
 * (batch.c). */
#ifndef GW_API_DLIST_H
#define GW_API_DLIST_H

#include <stdatomic.h>
#include <stdint.h>

#include "api/api.h"
#include "transport/base/batch.h"

typedef struct dl_ent {
    uint64_t addr; /* local or remote address */
    uint64_t len;
    uint32_t reg;  /* index in mems[] / rkeys[] */
} dl_ent_t;

struct gw_dlist {
    int remote;
    gw_context_t *ctx;
    gw_ep_t *ep;          /* remote lists */
    unsigned access;      /* remote lists: what they were prepared for */
    size_t n;
    dl_ent_t *e;          /* the entries; NULL for a computed list */
    /* a computed list (a table of uniform blocks, gw_dlist_table_t with no
     * columns): entry i is block i % cper of region i / cper, cbase[region]
     * + block * clen; no memory per entry */
    uint64_t *cbase;
    uint32_t cper;        /* blocks per region (the list's n when all are in region 0); 0: not computed */
    uint64_t clen;
    gw_mem_t **mems;      /* local lists: the distinct regions */
    gw_rkey_t *rkeys;     /* remote lists: copies of the distinct keys */
    uint32_t nreg;
    int lgpu, rgpu;       /* a region of the list is GPU memory */
    uint32_t busy;        /* transfers in progress using it */
    /* for the list form unexpanded (batch.h) */
    uint64_t serial;      /* unique per list of the process */
    uint64_t ulen;        /* the length of every entry, or UINT64_MAX when they differ */
    uint64_t maxlen;      /* the longest entry */
    uint64_t lo, hi;      /* span of the entries' addresses (lo > hi: none but empty ones) */
    _Atomic(gw_batch_lent_t *) tab; /* the entries in pinned host memory, made on first use */
    int tab_dev;          /* the CUDA device whose context made it (-1: none yet) */
    uint64_t dtab;        /* a copy in that device's memory (CUdeviceptr), 0 if none */
    int tab_failed;       /* no CUDA or no pinned memory: not tried again */
    /* local lists: a remote list whose entries 0 .. pair_n-1 have the same
     * lengths as these (checked once for transfers with no index arrays) */
    uint64_t pair_serial;
    size_t pair_n;
    uint64_t pair_total;  /* their bytes */
    /* local lists: the entries (merged) of the last transfer of entries
     * 0 .. ent_count-1 with those of the remote list ent_serial and no
     * index arrays, kept for the next such transfer (pair_entries) */
    gw_batch_ent_t *pent;
    uint32_t pent_n;
    uint64_t pent_serial;
    size_t pent_count;
    uint64_t pent_total, pent_rlo, pent_rhi;
};

/* "remote read and write", "remote read", ... for an access mask */
const char *gw_dl_access_str(unsigned a);

/* Entry i of list l: its address, length and region index. */
static inline void dl_at(const gw_dlist_t *l, size_t i, uint64_t *addr, uint64_t *len, uint32_t *reg)
{
    if (__builtin_expect(l->cper != 0, 0)) {
        uint32_t r = (uint32_t)i / l->cper, b = (uint32_t)i - r * l->cper;
        *addr = l->cbase[r] + (uint64_t)b * l->clen;
        *len = l->clen;
        *reg = r;
        return;
    }
    *addr = l->e[i].addr;
    *len = l->e[i].len;
    *reg = l->e[i].reg;
}

static inline uint64_t dl_len(const gw_dlist_t *l, size_t i)
{
    return l->cper ? l->clen : l->e[i].len;
}

/* The list's pinned table, made on first use (dlist.c) */
const gw_batch_lent_t *gw_dl_table(gw_dlist_t *l, int dev, uint64_t *dtab);

#endif
