/* SPDX-License-Identifier: Apache-2.0 */
/* batch.c - the check of an unexpanded batch's host index arrays, fused
 * with the copy the transport makes of them (batch.h gw_batch_icheck). */
#include "transport/base/batch.h"

#include "core/core.h"
#include "core/idx.h"

#include <stdio.h>
#include <stdlib.h>

/* The first entry whose index lies outside its side's valid ones: the
 * error naming it (the api layer's words for the same refusal). */
static gw_status_t icheck_fail(gw_core_t *core, const gw_batch_t *b, const uint32_t *l, const uint32_t *r, size_t n)
{
    size_t i = 0;
    int remote = 0;
    uint32_t v = 0;
    for (; i < n; i++) {
        if (l && (l[i] < b->plim[0] || l[i] > b->plim[1])) {
            v = l[i];
            break;
        }
        if (r && (r[i] < b->plim[2] || r[i] > b->plim[3])) {
            v = r[i];
            remote = 1;
            break;
        }
    }
    if (i == n) /* (the span said otherwise: cannot happen) */
        return gw_err(core, GW_ERR_INVALID, "batch: an index lies outside its side's %s", b->nlist ? "list" : "region");
    if (b->nlist)
        return gw_batch_index_outside(core, "gw_xfer_batch", i, remote, v, (uint64_t)(remote ? b->plim[3] : b->plim[1]) + 1);
    if (!remote)
        return gw_batch_page_outside(core, "gw_xfer_pages", i, 0, v, b->psize, b->plbase,
                                     (uint64_t)(uintptr_t)b->lmem[0]->addr, b->lmem[0]->len);
    return gw_batch_page_outside(core, "gw_xfer_pages", i, 1, v, b->psize, b->prbase, b->rkey[0].addr, b->rkey[0].len);
}

gw_status_t gw_batch_index_outside(gw_core_t *core, const char *fn, size_t i, int remote, uint64_t idx, uint64_t n)
{
    return gw_err(core, GW_ERR_INVALID, "%s: entry %zu: %s index %llu is outside the list (%llu entries)", fn, i,
                  remote ? "remote" : "local", (unsigned long long)idx, (unsigned long long)n);
}

gw_status_t gw_batch_page_outside(gw_core_t *core, const char *fn, size_t i, int remote, uint64_t page,
                                  uint64_t psize, uint64_t from, uint64_t base, uint64_t len)
{
    if (!remote)
        return gw_err(core, GW_ERR_INVALID,
                      "%s: entry %zu: local page %llu (%llu bytes from %p) is outside the region [%p, +%llu)", fn, i,
                      (unsigned long long)page, (unsigned long long)psize, (void *)(uintptr_t)from,
                      (void *)(uintptr_t)base, (unsigned long long)len);
    return gw_err(core, GW_ERR_OUT_OF_BOUNDS,
                  "%s: entry %zu: remote page %llu (%llu bytes from 0x%llx) is outside the region [0x%llx, +%llu) "
                  "the key covers",
                  fn, i, (unsigned long long)page, (unsigned long long)psize, (unsigned long long)from,
                  (unsigned long long)base, (unsigned long long)len);
}

gw_status_t gw_batch_item_bad(gw_core_t *core, const char *fn, size_t i, const char *array, const char *what,
                              unsigned type)
{
    const char *tn = type == GW_INDEX_I64 ? "GW_INDEX_I64" : type == GW_INDEX_U64 ? "GW_INDEX_U64" : "GW_INDEX_I32";
    return gw_err(core, GW_ERR_INVALID, "%s: %s[%zu] = %s (opts->index_type %s: items 0 .. %s)", fn, array, i, what,
                  tn, type == GW_INDEX_I32 ? "2147483647" : "4294967295");
}

size_t gw_batch_item_find(const void *p, size_t n, unsigned type, char *what, size_t len)
{
    if (type != GW_INDEX_I32)
        return gw_idx_wide_bad(p, n, type == GW_INDEX_I64, what, len);
    const int32_t *s = p;
    size_t i = 0;
    while (i < n && s[i] >= 0)
        i++;
    snprintf(what, len, "%d is negative", i < n ? (int)s[i] : 0);
    return i;
}

/* An item outside 0 .. 2^32-1 (itype: 8-byte items) or negative
 * (GW_INDEX_I32): the error naming it */
static gw_status_t icheck_type_fail(gw_core_t *core, const gw_batch_t *b, const void *p, size_t n, int remote)
{
    char what[64];
    size_t i = gw_batch_item_find(p, n, b->itype, what, sizeof(what));
    int pages = b->npages != 0;
    return gw_batch_item_bad(core, pages ? "gw_xfer_pages" : "gw_xfer_batch", i,
                             pages ? (remote ? "rpages" : "lpages") : (remote ? "ridx" : "lidx"), what, b->itype);
}

gw_status_t gw_batch_icheck(gw_core_t *core, gw_batch_t *b, uint32_t *ldst, uint32_t *rdst)
{
    if (!b->ichk)
        return GW_OK;
    int pages = b->npages != 0;
    size_t n = pages ? b->npages : b->nlist;
    const uint32_t **la = pages ? &b->lpage : &b->lidx, **ra = pages ? &b->rpage : &b->ridx;
    uint32_t llo = 0, lhi = 0, rlo = b->plim[2], rhi = b->plim[3];
    if (b->itype == GW_INDEX_I64 || b->itype == GW_INDEX_U64) { /* narrowed into the copies as the span is taken */
        if ((*la && !ldst) || (*ra && !rdst)) {
            uint32_t *own = malloc((n ? n : 1) * 2 * sizeof(uint32_t));
            if (!own)
                return gw_err(core, GW_ERR_NOMEM, "%s: out of memory narrowing %zu indices", pages ? "gw_xfer_pages" :
                              "gw_xfer_batch", n);
            free(b->iown);
            b->iown = own;
            ldst = ldst ? ldst : own;
            rdst = rdst ? rdst : own + n;
        }
        if (*la && gw_idx_narrow_span(ldst, (const uint64_t *)(const void *)*la, n, &llo, &lhi))
            return icheck_type_fail(core, b, *la, n, 0);
        if (*ra && gw_idx_narrow_span(rdst, (const uint64_t *)(const void *)*ra, n, &rlo, &rhi))
            return icheck_type_fail(core, b, *ra, n, 1);
        if (*la)
            *la = ldst; /* (read as uint32 from here on, also by icheck_fail) */
        if (*ra)
            *ra = rdst;
    } else {
        if (*la)
            gw_idx_copy_span(ldst, *la, n, &llo, &lhi);
        if (*ra)
            gw_idx_copy_span(rdst, *ra, n, &rlo, &rhi);
        /* int32: a negative item has the top bit, the highest index tells */
        if (b->itype == GW_INDEX_I32 && *la && lhi > INT32_MAX)
            return icheck_type_fail(core, b, *la, n, 0);
        if (b->itype == GW_INDEX_I32 && *ra && rhi > INT32_MAX)
            return icheck_type_fail(core, b, *ra, n, 1);
    }
    b->itype = 0;
    if ((*la && (llo < b->plim[0] || lhi > b->plim[1])) || (*ra && (rlo < b->plim[2] || rhi > b->plim[3])))
        return icheck_fail(core, b, *la, *ra, n);
    if (*la && ldst)
        *la = ldst;
    if (*ra && rdst)
        *ra = rdst;
    if (pages) { /* the pages' own span (the api layer gave that of every valid remote page) */
        uint64_t first = *ra ? rlo : 0, last = *ra ? rhi : n - 1;
        b->rlo = b->prbase + first * b->psize;
        b->rhi = b->prbase + (last + 1) * b->psize;
    }
    b->ichk = 0;
    return GW_OK;
}
