/* SPDX-License-Identifier: Apache-2.0 */
/* dlist.c - descriptor lists (api layer): prepared from descriptors or
 * from tables of columns (or computed from a block geometry, with no
 * memory per entry), each entry checked once here against its region or
 * key, so that a transfer (batch.c) only checks its indices. */
#include <stddef.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "api/dlist.h"
#include "cuda/cuda_wrap.h"

const char *gw_dl_access_str(unsigned a)
{
    return a == (GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE) ? "remote read and write"
           : a == GW_ACCESS_REMOTE_READ                          ? "remote read"
           : a == GW_ACCESS_REMOTE_WRITE                         ? "remote write"
                                                                 : "no remote access";
}

/* A list of n entries; computed (no entry array) when `computed`. */
static gw_dlist_t *dl_new2(gw_context_t *ctx, size_t n, int computed)
{
    static _Atomic uint64_t serial;
    gw_dlist_t *l = calloc(1, sizeof(*l));
    if (!l)
        return NULL;
    l->ctx = ctx;
    l->n = n;
    l->serial = atomic_fetch_add(&serial, 1) + 1;
    l->tab_dev = -1;
    if (computed)
        return l;
    l->e = malloc((n ? n : 1) * sizeof(*l->e));
    if (!l->e) {
        free(l);
        return NULL;
    }
    return l;
}

static gw_dlist_t *dl_new(gw_context_t *ctx, size_t n)
{
    return dl_new2(ctx, n, 0);
}

static void dl_free(gw_dlist_t *l)
{
    gw_batch_lent_t *t = atomic_load(&l->tab);
    if (t) {
        char why[160];
        const gw_cuda_t *cu = gw_cuda_get(why, sizeof(why));
        if (cu && gw_cuda_ctx_for_device(l->tab_dev, why, sizeof(why))) {
            cu->cuMemFreeHost(t);
            if (l->dtab)
                cu->cuMemFree((CUdeviceptr)l->dtab);
        }
    }
    free(l->e);
    free(l->cbase);
    free(l->pent);
    free(l->mems);
    free(l->rkeys);
    free(l);
}

/* What a post of the list form reads instead of the entries: the common
 * length, the longest entry and the span of the addresses. */
static void dl_summary(gw_dlist_t *l)
{
    l->lo = UINT64_MAX;
    l->hi = 0;
    if (l->cper) { /* per region: its first block and its last */
        l->ulen = l->maxlen = l->clen;
        for (size_t first = 0; first < l->n && l->clen; first += l->cper) {
            size_t last = first + l->cper - 1 < l->n - 1 ? first + l->cper - 1 : l->n - 1;
            uint64_t a, z, ln;
            uint32_t r;
            dl_at(l, first, &a, &ln, &r);
            dl_at(l, last, &z, &ln, &r);
            l->lo = a < l->lo ? a : l->lo;
            l->hi = z + ln > l->hi ? z + ln : l->hi;
        }
        return;
    }
    l->ulen = l->n ? l->e[0].len : 0;
    for (size_t i = 0; i < l->n; i++) {
        const dl_ent_t *e = &l->e[i];
        if (e->len != l->ulen)
            l->ulen = UINT64_MAX;
        l->maxlen = e->len > l->maxlen ? e->len : l->maxlen;
        if (e->len) {
            l->lo = e->addr < l->lo ? e->addr : l->lo;
            l->hi = e->addr + e->len > l->hi ? e->addr + e->len : l->hi;
        }
    }
}

/* The list's pinned table (gw_batch_lent_t per entry), made on first use
 * with device dev's context, and a copy in dev's memory (*dtab; 0 when none
 * or the table was made for another device); NULL where CUDA or pinned
 * memory is not to be had (then the transfer builds entries).  The kernel
 * reads the device copy: entries from pinned memory cost it a PCIe round
 * trip per round of entries (docs/PERFORMANCE.md, section 5). */
const gw_batch_lent_t *gw_dl_table(gw_dlist_t *l, int dev, uint64_t *dtab)
{
    gw_batch_lent_t *t = atomic_load(&l->tab);
    *dtab = t && l->tab_dev == dev ? l->dtab : 0;
    if (t || l->tab_failed)
        return t;
    char why[160];
    const gw_cuda_t *cu = gw_cuda_get(why, sizeof(why));
    void *p = NULL;
    if (!cu || !gw_cuda_ctx_for_device(dev, why, sizeof(why)) ||
        cu->cuMemHostAlloc(&p, (l->n ? l->n : 1) * sizeof(*t), CU_MEMHOSTALLOC_PORTABLE) != CUDA_SUCCESS) {
        l->tab_failed = 1;
        return NULL;
    }
    t = p;
    for (size_t i = 0; i < l->n; i++) {
        uint64_t a, ln;
        uint32_t r;
        dl_at(l, i, &a, &ln, &r);
        t[i] = (gw_batch_lent_t){a, ln};
    }
    size_t sz = (l->n ? l->n : 1) * sizeof(*t);
    CUdeviceptr d = 0;
    if (cu->cuMemAlloc(&d, sz) != CUDA_SUCCESS)
        d = 0;
    else if (cu->cuMemcpyHtoD(d, t, sz) != CUDA_SUCCESS) {
        cu->cuMemFree(d);
        d = 0;
    }
    gw_batch_lent_t *none = NULL;
    if (!atomic_compare_exchange_strong(&l->tab, &none, t)) { /* another thread made one first */
        cu->cuMemFreeHost(t);
        if (d)
            cu->cuMemFree(d);
        return none;
    }
    l->dtab = d;
    l->tab_dev = dev;
    *dtab = d;
    return t;
}

gw_status_t gw_dlist_local(gw_context_t *ctx, const gw_local_desc_t *d, size_t n, gw_dlist_t **out)
{
    GW_API_LOCK(ctx);
    if (!ctx || !out || (n && !d))
        return gw_api_invalid(ctx ? &ctx->core : NULL, "gw_dlist_local", "%s is NULL", out ? "d" : "out");
    *out = NULL;
    if (n > UINT32_MAX)
        return gw_err(&ctx->core, GW_ERR_INVALID, "gw_dlist_local: %zu entries (at most %u)", n, UINT32_MAX);
    gw_dlist_t *l = dl_new(ctx, n);
    if (!l)
        return gw_err(&ctx->core, GW_ERR_NOMEM, "gw_dlist_local: out of memory for %zu entries", n);
    uint32_t cap = 0;
    for (size_t i = 0; i < n; i++) {
        gw_mem_t *m = d[i].mem;
        gw_status_t st = GW_OK;
        if (!m)
            st = gw_err(&ctx->core, GW_ERR_INVALID, "gw_dlist_local: entry %zu: NULL region", i);
        else if (m->core != &ctx->core)
            st = gw_err(&ctx->core, GW_ERR_INVALID, "gw_dlist_local: entry %zu: the region belongs to another context",
                        i);
        else if (d[i].offset > m->len || d[i].len > m->len - d[i].offset)
            st = gw_err(&ctx->core, GW_ERR_INVALID,
                        "gw_dlist_local: entry %zu: [offset %zu, +%zu) is outside its region [%p, +%zu)", i,
                        d[i].offset, d[i].len, m->addr, m->len);
        if (st != GW_OK) {
            dl_free(l);
            return st;
        }
        uint32_t r = 0;
        if (l->nreg && l->mems[l->nreg - 1] == m)
            r = l->nreg - 1;
        else {
            while (r < l->nreg && l->mems[r] != m)
                r++;
            if (r == l->nreg) {
                if (l->nreg == cap) {
                    cap = cap ? cap * 2 : 4;
                    gw_mem_t **a = realloc(l->mems, cap * sizeof(*a));
                    if (!a) {
                        dl_free(l);
                        return gw_err(&ctx->core, GW_ERR_NOMEM, "gw_dlist_local: out of memory");
                    }
                    l->mems = a;
                }
                l->mems[l->nreg++] = m;
                l->lgpu |= m->type == GW_MEM_CUDA;
            }
        }
        l->e[i] = (dl_ent_t){(uint64_t)(uintptr_t)m->addr + d[i].offset, d[i].len, r};
    }
    for (uint32_t r = 0; r < l->nreg; r++)
        l->mems[r]->lists++;
    dl_summary(l);
    *out = l;
    return GW_OK;
}

gw_status_t gw_dlist_remote(gw_ep_t *ep, const gw_remote_desc_t *d, size_t n, unsigned access, gw_dlist_t **out)
{
    GW_API_LOCK(GW_CTX_OF_EP(ep));
    if (!ep || !out)
        return gw_api_invalid(ep ? &ep->ctx->core : NULL, "gw_dlist_remote", "out is NULL");
    gw_core_t *core = &ep->ctx->core;
    *out = NULL;
    if (n && !d)
        return gw_err(core, GW_ERR_INVALID, "gw_dlist_remote: NULL descriptors");
    if (!access || (access & ~(unsigned)(GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE)))
        return gw_err(core, GW_ERR_INVALID, "gw_dlist_remote: access 0x%x (GW_ACCESS_REMOTE_READ and/or _WRITE)",
                      access);
    if (n > UINT32_MAX)
        return gw_err(core, GW_ERR_INVALID, "gw_dlist_remote: %zu entries (at most %u)", n, UINT32_MAX);
    gw_dlist_t *l = dl_new(ep->ctx, n);
    if (!l)
        return gw_err(core, GW_ERR_NOMEM, "gw_dlist_remote: out of memory for %zu entries", n);
    l->remote = 1;
    l->ep = ep;
    l->access = access;
    gw_rkey_t **seen = NULL; /* the caller's key objects, parallel to l->rkeys */
    uint32_t cap = 0;
    gw_status_t st = GW_OK;
    for (size_t i = 0; i < n && st == GW_OK; i++) {
        gw_rkey_t *k = d[i].rkey;
        if (!k) {
            st = gw_err(core, GW_ERR_INVALID, "gw_dlist_remote: entry %zu: NULL remote key", i);
            break;
        }
        if (k->ep != ep) {
            st = gw_err(core, GW_ERR_INVALID_KEY,
                        "gw_dlist_remote: entry %zu: the key was unpacked on another endpoint (%s), not %s", i,
                        k->ep->base.peer, ep->base.peer);
            break;
        }
        if (d[i].offset > k->len || d[i].len > k->len - d[i].offset) {
            st = gw_err(core, GW_ERR_OUT_OF_BOUNDS,
                        "gw_dlist_remote: entry %zu: [offset %llu, +%zu) is outside the region [0x%llx, +%llu) "
                        "the key covers",
                        i, (unsigned long long)d[i].offset, d[i].len, (unsigned long long)k->addr,
                        (unsigned long long)k->len);
            break;
        }
        if ((k->access & access) != access) {
            st = gw_err(core, GW_ERR_ACCESS, "gw_dlist_remote: entry %zu: the region at 0x%llx grants %s, not %s", i,
                        (unsigned long long)k->addr, gw_dl_access_str(k->access), gw_dl_access_str(access));
            break;
        }
        uint32_t r = 0;
        if (l->nreg && seen[l->nreg - 1] == k)
            r = l->nreg - 1;
        else {
            while (r < l->nreg && seen[r] != k)
                r++;
            if (r == l->nreg) {
                if (l->nreg == cap) {
                    cap = cap ? cap * 2 : 4;
                    gw_rkey_t *a = realloc(l->rkeys, cap * sizeof(*a));
                    gw_rkey_t **s = a ? realloc(seen, cap * sizeof(*s)) : NULL;
                    if (a)
                        l->rkeys = a;
                    if (!s) {
                        st = gw_err(core, GW_ERR_NOMEM, "gw_dlist_remote: out of memory");
                        break;
                    }
                    seen = s;
                }
                seen[l->nreg] = k;
                l->rkeys[l->nreg++] = *k;
                l->rgpu |= k->type == GW_MEM_CUDA;
            }
        }
        l->e[i] = (dl_ent_t){k->addr + d[i].offset, d[i].len, r};
    }
    free(seen);
    if (st != GW_OK) {
        dl_free(l);
        return st;
    }
    ep->n_rkeys++; /* the endpoint outlives the list (gw_ep_close: BUSY) */
    dl_summary(l);
    *out = l;
    return GW_OK;
}

/* ---- tables: entries given as columns (gw_dlist_table_t) ---------------------------------- */
/* Entry i of table t: its region index, offset and length.  With neither a
 * region nor an offset column and per_region > 0, entry i is block
 * i % per_region of region i / per_region (the counters *r and *b walk that
 * without a division per entry). */
static inline void tab_entry(const gw_dlist_table_t *t, size_t i, uint64_t *r, uint64_t *b, uint32_t *reg, uint64_t *off,
                             uint64_t *len)
{
    *len = t->len ? t->len[i] : t->len_all;
    if (t->region || t->offset || !t->per_region) {
        *reg = t->region ? t->region[i] : 0;
        *off = t->offset ? t->offset[i] : (uint64_t)i * t->len_all;
        return;
    }
    *reg = (uint32_t)*r;
    *off = *b * t->len_all;
    if (++*b == t->per_region) {
        *b = 0;
        ++*r;
    }
}

/* The table's own checks (size, NULL columns, counts); GW_OK or the error. */
static gw_status_t tab_check(gw_core_t *core, const char *fn, const void *regs, size_t nreg, const gw_dlist_table_t *t,
                             const void *out)
{
    if (!out)
        return gw_err(core, GW_ERR_INVALID, "%s: out is NULL", fn);
    if (!t)
        return gw_err(core, GW_ERR_INVALID, "%s: the table is NULL", fn);
    if (t->size < offsetof(gw_dlist_table_t, per_region) + sizeof(t->per_region))
        return gw_err(core, GW_ERR_INVALID, "%s: table->size %zu is smaller than version 1 (%zu)", fn, t->size,
                      offsetof(gw_dlist_table_t, per_region) + sizeof(t->per_region));
    if (!regs || !nreg)
        return gw_err(core, GW_ERR_INVALID, "%s: no %s given (%zu)", fn,
                      strstr(fn, "remote") ? "remote keys" : "regions", nreg);
    if (nreg > UINT32_MAX || t->n > UINT32_MAX)
        return gw_err(core, GW_ERR_INVALID, "%s: %zu entries in %zu %s (at most %u of each)", fn, t->n, nreg,
                      strstr(fn, "remote") ? "keys" : "regions", UINT32_MAX);
    if (!t->offset && !t->region && t->per_region && t->n > (uint64_t)nreg * t->per_region)
        return gw_err(core, GW_ERR_INVALID, "%s: %zu entries of %llu per region need %llu regions, %zu given", fn, t->n,
                      (unsigned long long)t->per_region,
                      (unsigned long long)((t->n + t->per_region - 1) / t->per_region), nreg);
    return GW_OK;
}

/* A table with no columns is computed: no entry array; each region is
 * checked once (its last block inside it).  1 when t is of that form. */
static int tab_computed(const gw_dlist_table_t *t)
{
    return !t->region && !t->offset && !t->len && t->n;
}

static gw_status_t tab_compute(gw_core_t *core, const char *fn, gw_dlist_t *l, const gw_dlist_table_t *t,
                               const uint64_t *base, const uint64_t *rlen, uint32_t nreg, gw_status_t oob)
{
    l->cper = (uint32_t)(t->per_region ? t->per_region : t->n);
    if (!l->cper || t->per_region > UINT32_MAX) /* (n is at most UINT32_MAX: tab_check) */
        return gw_err(core, GW_ERR_INVALID, "%s: %llu blocks per region (at most %u)", fn,
                      (unsigned long long)t->per_region, UINT32_MAX);
    l->clen = t->len_all;
    if (!(l->cbase = malloc(nreg * sizeof(*l->cbase))))
        return gw_err(core, GW_ERR_NOMEM, "%s: out of memory", fn);
    memcpy(l->cbase, base, nreg * sizeof(*base));
    for (size_t first = 0; first < t->n; first += l->cper) {
        uint32_t r = (uint32_t)(first / l->cper);
        uint64_t blocks = t->n - first < l->cper ? t->n - first : l->cper, need;
        if (r >= nreg) /* (tab_check refuses it first) */
            return gw_err(core, GW_ERR_INVALID, "%s: entry %zu: region index %u, but %u given", fn, first, r, nreg);
        if (__builtin_mul_overflow(blocks, t->len_all, &need) || need > rlen[r]) {
            size_t bad = first + (size_t)(rlen[r] / (t->len_all ? t->len_all : 1)); /* the first block outside */
            return gw_err(core, oob, "%s: entry %zu: [offset %llu, +%llu) is outside %s %u [0x%llx, +%llu)", fn, bad,
                          (unsigned long long)((bad - first) * t->len_all), (unsigned long long)t->len_all,
                          l->remote ? "key" : "region", r, (unsigned long long)base[r], (unsigned long long)rlen[r]);
        }
    }
    return GW_OK;
}

/* Fills l->e[] from t over regions whose bases and lengths are base[],
 * rlen[]; a bad entry is refused naming its index (oob: the status for an
 * entry outside its region). */
static gw_status_t tab_fill(gw_core_t *core, const char *fn, gw_dlist_t *l, const gw_dlist_table_t *t,
                            const uint64_t *base, const uint64_t *rlen, uint32_t nreg, gw_status_t oob)
{
    uint64_t r = 0, b = 0;
    for (size_t i = 0; i < t->n; i++) {
        uint32_t reg;
        uint64_t off, len;
        tab_entry(t, i, &r, &b, &reg, &off, &len);
        if (__builtin_expect(reg >= nreg, 0))
            return gw_err(core, GW_ERR_INVALID, "%s: entry %zu: region index %u, but %u %s given", fn, i, reg, nreg,
                          l->remote ? "keys were" : "regions were");
        if (__builtin_expect(off > rlen[reg] || len > rlen[reg] - off, 0))
            return gw_err(core, oob, "%s: entry %zu: [offset %llu, +%llu) is outside %s %u [0x%llx, +%llu)", fn, i,
                          (unsigned long long)off, (unsigned long long)len, l->remote ? "key" : "region", reg,
                          (unsigned long long)base[reg], (unsigned long long)rlen[reg]);
        l->e[i] = (dl_ent_t){base[reg] + off, len, reg};
    }
    return GW_OK;
}

gw_status_t gw_dlist_local_table(gw_context_t *ctx, gw_mem_t *const *mems, size_t nmems, const gw_dlist_table_t *t,
                                 gw_dlist_t **out)
{
    static const char fn[] = "gw_dlist_local_table";
    GW_API_LOCK(ctx);
    if (!ctx)
        return GW_ERR_INVALID;
    gw_core_t *core = &ctx->core;
    if (out)
        *out = NULL;
    gw_status_t st = tab_check(core, fn, mems, nmems, t, out);
    if (st != GW_OK)
        return st;
    for (size_t r = 0; r < nmems; r++) {
        if (!mems[r])
            return gw_err(core, GW_ERR_INVALID, "%s: region %zu is NULL", fn, r);
        if (mems[r]->core != core)
            return gw_err(core, GW_ERR_INVALID, "%s: region %zu belongs to another context", fn, r);
    }
    gw_dlist_t *l = dl_new2(ctx, t->n, tab_computed(t));
    uint64_t *base = malloc(2 * nmems * sizeof(*base));
    if (!l || !base || !(l->mems = malloc(nmems * sizeof(*l->mems)))) {
        if (l)
            dl_free(l);
        free(base);
        return gw_err(core, GW_ERR_NOMEM, "%s: out of memory for %zu entries", fn, t->n);
    }
    uint64_t *rlen = base + nmems;
    for (size_t r = 0; r < nmems; r++) {
        base[r] = (uint64_t)(uintptr_t)mems[r]->addr;
        rlen[r] = mems[r]->len;
        l->mems[r] = mems[r];
        l->lgpu |= mems[r]->type == GW_MEM_CUDA;
    }
    l->nreg = (uint32_t)nmems;
    st = (tab_computed(t) ? tab_compute : tab_fill)(core, fn, l, t, base, rlen, l->nreg, GW_ERR_INVALID);
    free(base);
    if (st != GW_OK) {
        dl_free(l);
        return st;
    }
    for (uint32_t r = 0; r < l->nreg; r++)
        l->mems[r]->lists++;
    dl_summary(l);
    *out = l;
    return GW_OK;
}

gw_status_t gw_dlist_remote_table(gw_ep_t *ep, gw_rkey_t *const *rkeys, size_t nkeys, const gw_dlist_table_t *t,
                                  unsigned access, gw_dlist_t **out)
{
    static const char fn[] = "gw_dlist_remote_table";
    GW_API_LOCK(GW_CTX_OF_EP(ep));
    if (!ep)
        return GW_ERR_INVALID;
    gw_core_t *core = &ep->ctx->core;
    if (out)
        *out = NULL;
    gw_status_t st = tab_check(core, fn, rkeys, nkeys, t, out);
    if (st != GW_OK)
        return st;
    if (!access || (access & ~(unsigned)(GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE)))
        return gw_err(core, GW_ERR_INVALID, "%s: access 0x%x (GW_ACCESS_REMOTE_READ and/or _WRITE)", fn, access);
    for (size_t r = 0; r < nkeys; r++) {
        const gw_rkey_t *k = rkeys[r];
        if (!k)
            return gw_err(core, GW_ERR_INVALID, "%s: key %zu is NULL", fn, r);
        if (k->ep != ep)
            return gw_err(core, GW_ERR_INVALID_KEY, "%s: key %zu was unpacked on another endpoint (%s), not %s", fn, r,
                          k->ep->base.peer, ep->base.peer);
        if ((k->access & access) != access)
            return gw_err(core, GW_ERR_ACCESS, "%s: key %zu: the region at 0x%llx grants %s, not %s", fn, r,
                          (unsigned long long)k->addr, gw_dl_access_str(k->access), gw_dl_access_str(access));
    }
    gw_dlist_t *l = dl_new2(ep->ctx, t->n, tab_computed(t));
    uint64_t *base = malloc(2 * nkeys * sizeof(*base));
    if (!l || !base || !(l->rkeys = malloc(nkeys * sizeof(*l->rkeys)))) {
        if (l)
            dl_free(l);
        free(base);
        return gw_err(core, GW_ERR_NOMEM, "%s: out of memory for %zu entries", fn, t->n);
    }
    uint64_t *rlen = base + nkeys;
    l->remote = 1;
    l->ep = ep;
    l->access = access;
    for (size_t r = 0; r < nkeys; r++) {
        base[r] = rkeys[r]->addr;
        rlen[r] = rkeys[r]->len;
        l->rkeys[r] = *rkeys[r];
        l->rgpu |= rkeys[r]->type == GW_MEM_CUDA;
    }
    l->nreg = (uint32_t)nkeys;
    st = (tab_computed(t) ? tab_compute : tab_fill)(core, fn, l, t, base, rlen, l->nreg, GW_ERR_OUT_OF_BOUNDS);
    free(base);
    if (st != GW_OK) {
        dl_free(l);
        return st;
    }
    ep->n_rkeys++;
    dl_summary(l);
    *out = l;
    return GW_OK;
}

size_t gw_dlist_count(const gw_dlist_t *l)
{
    return l ? l->n : 0;
}

gw_status_t gw_dlist_destroy(gw_dlist_t *l)
{
    GW_API_LOCK(l ? l->ctx : NULL);
    if (!l)
        return GW_OK;
    if (l->busy)
        return gw_err(&l->ctx->core, GW_ERR_BUSY, "gw_dlist_destroy: %u transfer(s) using the %s list are in progress",
                      l->busy, l->remote ? "remote" : "local");
    if (l->remote)
        l->ep->n_rkeys--;
    else
        for (uint32_t r = 0; r < l->nreg; r++)
            l->mems[r]->lists--;
    dl_free(l);
    return GW_OK;
}

