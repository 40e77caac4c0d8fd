/* SPDX-License-Identifier: Apache-2.0 */
/* batch.c - batched and paged transfers over descriptor lists (dlist.c),
 * prepared page lists, counted notifications (api layer).
 *
 * Lists are checked entry by entry when prepared; a transfer then only
 * checks its indices and lengths and builds the flat entry array the
 * transport's `batch` op reads (transport/base/batch.h): zero-length entries
 * dropped, an entry that continues the previous one on both sides merged
 * into it.  A transfer of all entries of two lists with no index arrays
 * reuses the array the last such transfer of the pair built (pair_entries).
 *
 * The list form over a transport that takes it unexpanded (intra: GPU
 * memory on both sides, one region and one key) builds no entries: each
 * list keeps a copy of its entries in pinned host memory and one in the
 * local GPU's memory (made on the first such transfer and kept until the
 * list is destroyed) that a GPU kernel reads by the index arrays.  A post then checks only the indices (their
 * lowest and highest, when every entry of both lists has one length) or,
 * for lists of mixed lengths, one pass over the pairs; selecting all
 * entries of two lists already checked against each other costs nothing
 * per entry. */
#include <stddef.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/dlist.h"
#include "core/idx.h"
#include "cuda/cuda_wrap.h"
#include "proto/proto.h"
#include "proto/proto_integrity.h"
#include "transport/base/batch.h"

/* ---- transfers ------------------------------------------------------------------------ */
/* A prepared page list or selection (gw_pages_create): index arrays
 * copied once, with their spans; gw_xfer_pages_prepared reads them as
 * pages, gw_xfer_batch_prepared as entries of two descriptor lists. */
struct gw_pages {
    gw_context_t *ctx;
    size_t n;
    uint32_t *lp, *rp;      /* copies of the caller's arrays (NULL: i) */
    uint32_t lmin, lmax, rmin, rmax;
    uint32_t busy;          /* transfers in progress using it */
    int doomed;             /* gw_pages_destroy() came while busy: freed by the last transfer's end */
    /* for a GPU kernel (made on the first paged GPU transfer): lp then rp
     * (those not NULL) in pinned host memory, and a copy in the memory of
     * device pin_dev (0: none, the kernel reads the pinned ones) */
    uint32_t *pin;
    int pin_dev;            /* -1: none yet */
    int pin_failed;         /* no CUDA or no pinned memory: the caller's copies (entries) */
    uint64_t dpin;
};

/* One allocation: the batch, a region pointer and key copy for the paged
 * form, the entries. */
typedef struct batch_mem {
    gw_batch_t b;
    gw_context_t *ctx;
    gw_pages_t *pages; /* the prepared page list or selection it came from: its use counted by post(), released
                        * at the end (and freed there if destroyed meanwhile) */
    size_t cap; /* entries ent[] holds */
    gw_mem_t *lm1;
    gw_rkey_t rk1;
    gw_batch_ent_t ent[];
} batch_mem_t;

/* The entry array of a batch: the last finished batch's when it is large
 * enough (ctx->batch_spare), else a new one.  A fresh 4096-entry array is
 * 160 KiB, which malloc maps and unmaps anew each time: its page faults
 * cost as much as building the entries. */
static batch_mem_t *batch_alloc(gw_context_t *ctx, size_t n)
{
    batch_mem_t *m = atomic_exchange(&ctx->batch_spare, NULL);
    if (m && m->cap < n) {
        free(m);
        m = NULL;
    }
    if (!m) {
        size_t cap = n < 64 ? 64 : n;
        m = malloc(sizeof(*m) + cap * sizeof(gw_batch_ent_t));
        if (!m)
            return NULL;
        m->cap = cap;
    }
    memset(&m->b, 0, sizeof(m->b));
    m->pages = NULL;
    m->b.ent = m->ent;
    m->b.rlo = UINT64_MAX;
    m->ctx = ctx;
    return m;
}

/* Keeps m for the next batch (the larger of it and the spare there). */
static void batch_release(batch_mem_t *m)
{
    free(m->b.iown); /* (narrowed index copies gw_batch_icheck made) */
    m->b.iown = NULL;
    batch_mem_t *old = atomic_exchange(&m->ctx->batch_spare, m);
    if (old && old->cap > m->cap) /* keep the larger: put it back, free what it displaces */
        old = atomic_exchange(&m->ctx->batch_spare, old);
    free(old);
}

static void pages_free(gw_pages_t *p);
static int pages_doomed(const gw_pages_t *p);
static int pages_pin(gw_pages_t *p, int dev, const uint32_t **hl, const uint32_t **hr, uint64_t *dl, uint64_t *dr);

static void batch_fini(gw_request_t *r)
{
    gw_batch_t *b = r->batch;
    r->batch = NULL;
    if (!b)
        return;
    for (int i = 0; i < 2; i++)
        if (b->busy[i])
            (*b->busy[i])--;
    gw_pages_t *pl = ((batch_mem_t *)b)->pages;
    if (pl) {
        pl->busy--;
        if (pages_doomed(pl))
            pages_free(pl); /* destroyed while this transfer ran, the last one */
    }
    batch_release((batch_mem_t *)b); /* b is the first member of its batch_mem_t */
}

static gw_status_t check_opts(gw_core_t *core, const char *fn, int op, const gw_xfer_opts_t *o, int *notify,
                              uint64_t *value, int *integ)
{
    *notify = GW_NOTIFY_NONE;
    *value = 0;
    *integ = GW_INTEGRITY_DEFAULT;
    if (op != GW_XFER_PUT && op != GW_XFER_GET)
        return gw_err(core, GW_ERR_INVALID, "%s: op %d (GW_XFER_PUT or GW_XFER_GET)", fn, op);
    if (!o)
        return GW_OK;
    if (o->size < offsetof(gw_xfer_opts_t, value) + sizeof(o->value))
        return gw_err(core, GW_ERR_INVALID, "%s: opts->size %zu is smaller than version 1 (%zu)", fn, o->size,
                      offsetof(gw_xfer_opts_t, value) + sizeof(o->value));
    if (o->notify < GW_NOTIFY_NONE || o->notify > GW_NOTIFY_COUNTED)
        return gw_err(core, GW_ERR_INVALID, "%s: opts->notify %d is not a GW_NOTIFY_* value", fn, o->notify);
    if (o->notify != GW_NOTIFY_NONE && op == GW_XFER_GET)
        return gw_err(core, GW_ERR_INVALID, "%s: a notification goes with a put batch, not a get", fn);
    *notify = o->notify;
    *value = o->value;
    if (o->size >= offsetof(gw_xfer_opts_t, integrity) + sizeof(o->integrity)) {
        *integ = o->integrity;
        if (*integ != GW_INTEGRITY_DEFAULT && *integ != GW_INTEGRITY_ON && *integ != GW_INTEGRITY_OFF)
            return gw_err(core, GW_ERR_INVALID, "%s: opts->integrity %d is not a GW_INTEGRITY_* value", fn, *integ);
        if (*integ == GW_INTEGRITY_ON && o->notify == GW_NOTIFY_NONE)
            return gw_err(core, GW_ERR_INVALID,
                          "%s: opts->integrity GW_INTEGRITY_ON without a notification (the target checks a put "
                          "before it delivers its notification)", fn);
    }
    return GW_OK;
}

size_t gw_xfer_opts_size(void)
{
    return sizeof(gw_xfer_opts_t);
}

/* Where the call's index arrays live (gw_xfer_opts_t version 3): *dev 1
 * for GW_INDEX_DEVICE, *stream the CUstream they are ready on; their item
 * type (version 4) in *type, GW_INDEX_U32 where not given. */
static gw_status_t index_opts(gw_core_t *core, const char *fn, const gw_xfer_opts_t *o, int *dev, void **stream,
                              unsigned *type)
{
    *dev = 0;
    *stream = NULL;
    *type = GW_INDEX_U32;
    if (!o || o->size < offsetof(gw_xfer_opts_t, index_mem) + sizeof(o->index_mem))
        return GW_OK;
    if (o->index_mem != GW_INDEX_HOST && o->index_mem != GW_INDEX_DEVICE)
        return gw_err(core, GW_ERR_INVALID, "%s: opts->index_mem %u is not a GW_INDEX_* value", fn, o->index_mem);
    *dev = o->index_mem == GW_INDEX_DEVICE;
    if (o->size >= offsetof(gw_xfer_opts_t, index_stream) + sizeof(o->index_stream))
        *stream = o->index_stream;
    if (o->size >= offsetof(gw_xfer_opts_t, index_type) + sizeof(o->index_type)) {
        *type = o->index_type;
        if (*type != GW_INDEX_U32 && *type != GW_INDEX_I64 && *type != GW_INDEX_U64 && *type != GW_INDEX_I32)
            return gw_err(core, GW_ERR_INVALID, "%s: opts->index_type %u is not GW_INDEX_U32, GW_INDEX_I32, "
                          "GW_INDEX_I64 or GW_INDEX_U64", fn, *type);
        if ((*type == GW_INDEX_I64 || *type == GW_INDEX_U64) && *dev)
            return gw_err(core, GW_ERR_INVALID, "%s: opts->index_type %s with GW_INDEX_DEVICE: arrays in GPU memory "
                          "are uint32 or int32", fn, *type == GW_INDEX_I64 ? "GW_INDEX_I64" : "GW_INDEX_U64");
        if (*dev)
            *type = GW_INDEX_U32; /* (int32 on the GPU: a negative item reads as a page past the region there) */
    }
    return GW_OK;
}

/* Index arrays of another item type than uint32 (opts->index_type) where
 * the transport will not take them in its copy: 8-byte ones narrowed into
 * one new array (*own, freed by the caller after posting), *l / *r
 * pointed at it; int32 ones checked for negatives where they are.  The
 * error names the first item outside 0 .. 2^32-1 (or negative). */
static gw_status_t narrow_arrays(gw_core_t *core, const char *fn, unsigned type, const uint32_t **l,
                                 const uint32_t **r, size_t n, const char *ln, const char *rn, uint32_t **own)
{
    *own = NULL;
    if (!*l && !*r)
        return GW_OK;
    if (type == GW_INDEX_I32) {
        for (int side = 0; side < 2; side++) {
            const int32_t *a = (const int32_t *)(const void *)(side ? *r : *l);
            uint32_t lo, hi;
            gw_idx_span(side ? *r : *l, a ? n : 0, &lo, &hi);
            if (!a || hi <= INT32_MAX)
                continue;
            char what[64];
            size_t i = gw_batch_item_find(a, n, type, what, sizeof(what));
            return gw_batch_item_bad(core, fn, i, side ? rn : ln, what, type);
        }
        return GW_OK;
    }
    uint32_t *c = malloc((n ? n : 1) * 2 * sizeof(uint32_t)), lo, hi;
    if (!c)
        return gw_err(core, GW_ERR_NOMEM, "%s: out of memory narrowing %zu indices", fn, n);
    for (int side = 0; side < 2; side++) {
        const uint32_t **a = side ? r : l;
        if (!*a)
            continue;
        const uint64_t *w = (const uint64_t *)(const void *)*a;
        if (gw_idx_narrow_span(c + (size_t)side * n, w, n, &lo, &hi)) {
            char what[64];
            size_t i = gw_batch_item_find(w, n, type, what, sizeof(what));
            free(c);
            return gw_batch_item_bad(core, fn, i, side ? rn : ln, what, type);
        }
        *a = c + (size_t)side * n;
    }
    *own = c;
    return GW_OK;
}

/* What both forms check first: the endpoint is usable, the options valid. */
static gw_status_t xfer_begin(gw_ep_t *ep, const char *fn, int op, const gw_xfer_opts_t *opts, gw_request_t **req,
                              int *notify, uint64_t *value, int *integ)
{
    if (!ep)
        return GW_ERR_INVALID;
    if (req)
        *req = NULL;
    gw_status_t st = gw_api_ep_usable(ep, GW_OP_BATCH);
    if (st == GW_OK)
        st = check_opts(&ep->ctx->core, fn, op, opts, notify, value, integ);
    if (st != GW_OK || *notify == GW_NOTIFY_NONE)
        return st;
    /* the integrity check (proto/proto_integrity.h) */
    if (*integ == GW_INTEGRITY_ON && !ep->base.integ)
        return gw_err(&ep->ctx->core, GW_ERR_UNSUPPORTED,
                      "%s: opts->integrity GW_INTEGRITY_ON, but the endpoint to %s does not check (set "
                      "GPUWIRE_INTEGRITY=on or gw_config_t.integrity on either side%s)", fn, ep->base.peer,
                      ep->integ_refused ? "; the peer's version has no check" : "");
    if (ep->integ_refused && *integ != GW_INTEGRITY_OFF)
        return gw_err(&ep->ctx->core, GW_ERR_UNSUPPORTED,
                      "%s: this side asks for the integrity check (GPUWIRE_INTEGRITY=on) and the peer %s runs a "
                      "version of gpuwire without it; refused rather than sent unchecked (opts->integrity "
                      "GW_INTEGRITY_OFF sends it unchecked)", fn, ep->base.peer);
    return GW_OK;
}

/* The integrity check's entries of a notifying put on a checking endpoint
 * (NULL when there is none to make; *st GW_ERR_NOMEM when out of memory). */
/* 1 when a transfer carries the end-to-end integrity check's entries (a
 * set from integ_set, checked or not): the host reads its pages' list. */
static int integ_wanted(const gw_ep_t *ep, int op, int notify)
{
    return ep->base.integ && notify != GW_NOTIFY_NONE && op == GW_XFER_PUT;
}

static gw_integ_set_t *integ_set(gw_ep_t *ep, int op, int notify, int integ, size_t count, int kind, gw_status_t *st)
{
    *st = GW_OK;
    if (!integ_wanted(ep, op, notify))
        return NULL;
    gw_integ_set_t *s = gw_proto_integ_set_new((uint32_t)count, kind, integ != GW_INTEGRITY_OFF);
    if (!s)
        *st = gw_err(&ep->ctx->core, GW_ERR_NOMEM, "integrity: out of memory for the entries of %zu", count);
    return s;
}

/* submit() of the staged route: the context's staging state goes along. */
static gw_status_t stage_batch_submit(gw_tl_ep_t *tl, gw_request_t *r)
{
    return gw_proto_stage_batch_submit(&r->ep->ctx->pstage, tl, r);
}

/* Fills what both forms share and hands the batch to the transport, or to
 * the protocol layer to expand (proto/proto.h decides). */
static gw_status_t post(gw_ep_t *ep, const char *what, batch_mem_t *m, gw_mem_t *lmem, size_t count, int op,
                        int notify, uint64_t value, gw_integ_set_t *is, gw_request_t **req)
{
    m->b.n_user = (uint32_t)count;
    m->b.get = op == GW_XFER_GET;
    m->b.notify = (uint8_t)notify;
    m->b.value = value;
    gw_tl_caps_t caps;
    ep->ops->caps(ep->ctx->tl[ep->tl_id], &caps);
    gw_proto_route_t route = GW_PROTO_NATIVE;
    const char *lack;
    int staged = 0;
    if ((m->b.lgpu && gw_proto_batch_stage_route(&caps, &m->b, ep->ctx->gpu_stage_force, ep->base.notify_out != NULL,
                                                 &staged, &lack) != GW_OK) ||
        (!staged &&
         gw_proto_batch_route(&caps, &m->b, ep->ctx->batch_expand, ep->base.notify_out != NULL, &route, &lack) != GW_OK)) {
        batch_release(m);
        gw_proto_integ_set_free(is);
        return gw_err(&ep->ctx->core, GW_ERR_UNSUPPORTED, "%s: the %s transport to %s has no %s", what, ep->ops->name,
                      ep->base.peer, lack);
    }
    gw_status_t st;
    if (m->b.ichk && (staged || route != GW_PROTO_NATIVE) &&
        (st = gw_batch_icheck(&ep->ctx->core, &m->b, NULL, NULL)) != GW_OK) { /* (entries built here: checked first) */
        batch_release(m);
        gw_proto_integ_set_free(is);
        return st;
    }
    if (m->b.pdev && (staged || route != GW_PROTO_NATIVE)) {
        batch_release(m);
        return gw_err(&ep->ctx->core, GW_ERR_UNSUPPORTED,
                      "%s: opts->index_mem GW_INDEX_DEVICE, but the batch to %s goes by the %s route "
                      "(entries built on the host, which would read the index arrays there)", what, ep->base.peer,
                      staged ? "staged" : "protocol layer's");
    }
    gw_request_t *r = gw_api_new_req(ep, GW_OP_BATCH, req);
    if (!r) {
        batch_release(m);
        gw_proto_integ_set_free(is);
        return gw_err(&ep->ctx->core, GW_ERR_NOMEM, "%s: out of memory for a request", what);
    }
    r->batch = &m->b;
    r->fini = batch_fini;
    r->len = (size_t)m->b.total;
    r->lmem = lmem; /* the paged form's region: in use until completion */
    r->value = m->b.value;
    for (int i = 0; i < 2; i++)
        if (m->b.busy[i])
            (*m->b.busy[i])++;
    if (m->pages)
        m->pages->busy++;
    gw_status_t (*fn)(gw_tl_ep_t *, gw_request_t *) = staged                    ? stage_batch_submit
                                                      : route == GW_PROTO_NATIVE ? ep->ops->submit
                                                      : route == GW_PROTO_IOV    ? gw_proto_batch_submit_iov
                                                                                 : gw_proto_batch_submit;
    if (is) { /* checked: the check posts it through fn (proto/proto_integrity.h) */
        gw_proto_integ_set_route(is, fn);
        r->owner = is;
        fn = gw_proto_integ_submit;
    }
    st = gw_api_submit(ep, r, req, fn);
    if (st != GW_OK && r->fini) { /* refused at posting: the request was dropped as it was */
        void (*fini)(gw_request_t *) = r->fini;
        r->fini = NULL;
        fini(r);
    }
    return st;
}

/* 1 when every index of p[0 .. n-1] (NULL: 0 .. n-1, n <= lim checked
 * already) is below lim.  First the OR of all of them, an upper bound of
 * the highest that needs no compares (four vectors at a time, no chain
 * between them): when it is below lim, so is every index; only when not
 * the exact highest (idx_span, whose compare chain costs ~2 us per 4096
 * indices on the H100 machine's host). */
static int idx_below(const uint32_t *p, size_t n, size_t lim)
{
    if (!p || !n)
        return 1;
    /* one pass for the highest index (AVX2 where the CPU has it); an OR of
     * the indices first decided only limits that are powers of two, and
     * others (160 regions x 1,024 blocks) paid for both passes */
    uint32_t lo, hi;
    gw_idx_span(p, n, &lo, &hi);
    return hi < lim;
}

/* Entries of pairs lidx[i] <-> ridx[i] (NULL: i), i < count: 1 when every
 * index is inside its list and the paired lengths are equal, with their
 * bytes in *total; 0 otherwise (the caller's entry pass then names the
 * first bad pair).  Lists whose entries all have one length need only an
 * upper bound of each array's indices; pairs 0 .. count-1 of two lists checked
 * against each other before, nothing. */
static int list_pairs_ok(gw_dlist_t *local, const uint32_t *lidx, gw_dlist_t *remote, const uint32_t *ridx,
                         size_t count, uint64_t *total)
{
    if (local->ulen != UINT64_MAX && local->ulen == remote->ulen) {
        *total = (uint64_t)count * local->ulen;
        return idx_below(lidx, count, local->n) && idx_below(ridx, count, remote->n);
    }
    if (!lidx && !ridx && local->pair_serial == remote->serial && count == local->pair_n) {
        *total = local->pair_total;
        return 1;
    }
    uint64_t sum = 0;
    for (size_t i = 0; i < count; i++) {
        size_t li = lidx ? lidx[i] : i, ri = ridx ? ridx[i] : i;
        if (li >= local->n || ri >= remote->n || dl_len(local, li) != dl_len(remote, ri))
            return 0;
        sum += dl_len(local, li);
    }
    if (!lidx && !ridx) { /* the next transfer of all these entries checks nothing */
        local->pair_serial = remote->serial;
        local->pair_n = count;
        local->pair_total = sum;
    }
    *total = sum;
    return 1;
}

/* Makes b the list form, unexpanded (batch.h), where the transport takes it
 * and the lists allow: GPU memory in one region and one key, pinned tables
 * to be had, a pair check that passes (its failure is named by the caller's
 * pass) and some bytes to move.  0: build entries as usual. */
/* A side of several regions goes unexpanded only when computed (no table
 * per entry: bases and blocks per region) and all of it GPU memory, the
 * local regions of one GPU. */
static int multi_side_ok(const gw_dlist_t *l, int dev)
{
    if (l->nreg == 1 && !l->cper)
        return 1; /* a table of one region, as the one-region form */
    if (!l->cper || !l->clen)
        return 0;
    for (uint32_t r = 0; r < l->nreg; r++)
        if (l->remote ? l->rkeys[r].type != GW_MEM_CUDA
                      : l->mems[r]->type != GW_MEM_CUDA || l->mems[r]->cuda_device != dev)
            return 0;
    return 1;
}

/* list_pairs_ok for the pairs of a prepared selection: its spans against
 * the lists' sizes (no pass over the indices), and only for lists of mixed
 * lengths the pass over the pairs. */
static int sel_pairs_ok(gw_dlist_t *local, gw_dlist_t *remote, const gw_pages_t *sel, uint64_t *total)
{
    if (sel->n && (sel->lmax >= local->n || sel->rmax >= remote->n))
        return 0; /* (the caller's entry pass names the first bad pair) */
    if (local->ulen != UINT64_MAX && local->ulen == remote->ulen) {
        *total = (uint64_t)sel->n * local->ulen;
        return 1;
    }
    return list_pairs_ok(local, sel->lp, remote, sel->rp, sel->n, total);
}

/* sel: the prepared selection lidx/ridx come from (NULL: the caller's
 * arrays), whose pinned and GPU copies the kernel then reads (batch.h,
 * ikept).  hostread: the host reads the pairs after this (the integrity
 * check's entries), so they are checked here, not by the transport. */
static int list_form(gw_ep_t *ep, gw_dlist_t *local, const uint32_t *lidx, gw_dlist_t *remote, const uint32_t *ridx,
                     size_t count, gw_batch_t *b, gw_pages_t *sel, int hostread, unsigned wide)
{
    if (!count || !local->lgpu || !remote->rgpu)
        return 0;
    int multi = local->nreg != 1 || remote->nreg != 1;
    gw_tl_caps_t caps;
    ep->ops->caps(ep->ctx->tl[ep->tl_id], &caps);
    int dev = local->mems[0]->cuda_device;
    if (multi && (!(caps.batch & GW_TL_BATCH_CLISTS) || !multi_side_ok(local, dev) || !multi_side_ok(remote, dev) ||
                  (local->cper && remote->cper && local->clen != remote->clen)))
        return 0;
    uint64_t total = 0;
    /* lists of one entry length whose indices the transport checks while
     * it copies them (batch.h ichk): no pass here */
    int ichk = !sel && !hostread && (lidx || ridx) && (caps.batch & GW_TL_BATCH_ICHECK) && local->n && remote->n &&
               local->ulen != UINT64_MAX && local->ulen == remote->ulen && local->n <= UINT32_MAX + 1ull &&
               remote->n <= UINT32_MAX + 1ull;
    if (wide && !ichk)
        return 0; /* (8-byte arrays: narrowed by the caller, then by entries) */
    if (ichk)
        total = (uint64_t)count * local->ulen;
    int pairs_ok = ichk || (sel ? sel_pairs_ok(local, remote, sel, &total)
                                : list_pairs_ok(local, lidx, remote, ridx, count, &total));
    if (!(caps.batch & GW_TL_BATCH_LISTS) || !pairs_ok || !total)
        return 0;
    uint64_t ld = 0, rd = 0;
    const gw_batch_lent_t *lt = NULL, *rt = NULL;
    if (multi) { /* computed sides: their bases, no table; a side of one region's table: its table */
        if (local->cper) {
            b->lcbase = local->cbase;
            b->lcper = local->cper;
            b->clen = local->clen;
        } else if (!(lt = gw_dl_table(local, dev, &ld))) {
            return 0;
        }
        if (remote->cper) {
            b->rcbase = remote->cbase;
            b->rcper = remote->cper;
            b->rcn = (uint32_t)remote->n;
            b->clen = remote->clen;
        } else if (!(rt = gw_dl_table(remote, dev, &rd))) {
            b->lcbase = NULL;
            return 0;
        }
    } else {
        lt = gw_dl_table(local, dev, &ld);
        rt = lt ? gw_dl_table(remote, dev, &rd) : NULL;
        if (!rt)
            return 0;
    }
    b->ltab_dev = ld;
    b->rtab_dev = rd;
    if (ichk) {
        b->ichk = 1;
        b->itype = (uint8_t)wide;
        b->plim[0] = b->plim[2] = 0;
        b->plim[1] = (uint32_t)(local->n - 1);
        b->plim[3] = (uint32_t)(remote->n - 1);
    }
    b->nlist = (uint32_t)count;
    b->lidx = lidx;
    b->ridx = ridx;
    if (sel && pages_pin(sel, dev, &b->lidx, &b->ridx, &b->lidx_dev, &b->ridx_dev))
        b->ikept = 1; /* the selection's pinned copies, and its copies in this GPU's memory */
    b->ltab = lt;
    b->rtab = rt;
    b->lmaxlen = local->maxlen < remote->maxlen ? local->maxlen : remote->maxlen;
    b->total = total;
    b->rlo = remote->lo;
    b->rhi = remote->hi;
    return 1;
}

/* A transfer of entries 0 .. count-1 of both lists with no index arrays
 * (the pattern of a weight sync: the same tensors every step) builds the
 * same entries every time.  The local list keeps the last such transfer's
 * (pent, pair_keep), and the next one over the same remote list points its
 * batch at them (pair_use): no pass over the entries at all.  1: the
 * transfer can. */
static int pair_entries(const gw_dlist_t *local, const gw_dlist_t *remote, const uint32_t *lidx,
                        const uint32_t *ridx, size_t count)
{
    return !lidx && !ridx && local->pent && local->pent_serial == remote->serial && local->pent_count == count;
}

static void pair_use(const gw_dlist_t *local, gw_batch_t *b)
{
    b->ent = local->pent; /* read-only for the transport (batch.h), kept while local->busy */
    b->n = local->pent_n;
    b->total = local->pent_total;
    b->rlo = local->pent_rlo;
    b->rhi = local->pent_rhi;
}

/* Keeps b's entries as the local list's pair entries (pair_entries), where
 * no transfer in progress may still read the ones kept before. */
static void pair_keep(gw_dlist_t *local, const gw_dlist_t *remote, size_t count, const gw_batch_t *b)
{
    if (local->busy)
        return;
    gw_batch_ent_t *e = local->pent_n >= b->n && local->pent ? local->pent : malloc((b->n ? b->n : 1) * sizeof(*e));
    if (!e)
        return; /* the next transfer builds its entries again */
    if (e != local->pent)
        free(local->pent);
    memcpy(e, b->ent, b->n * sizeof(*e));
    local->pent = e;
    local->pent_n = b->n;
    local->pent_serial = remote->serial;
    local->pent_count = count;
    local->pent_total = b->total;
    local->pent_rlo = b->rlo;
    local->pent_rhi = b->rhi;
}

/* How many entries ahead gw_xfer_batch's pass fetches the entries it will
 * read (a memory latency's worth of entries at a few ns each). */
#define XB_AHEAD 16
/* The check's entries of a list transfer whose pairs were checked: pair i
 * named by i. */
static void integ_add_pairs(gw_integ_set_t *is, const gw_dlist_t *local, const uint32_t *lidx,
                            const gw_dlist_t *remote, const uint32_t *ridx, size_t count)
{
    for (size_t i = 0; is && i < count; i++) {
        dl_ent_t le, re;
        dl_at(local, lidx ? lidx[i] : i, &le.addr, &le.len, &le.reg);
        dl_at(remote, ridx ? ridx[i] : i, &re.addr, &re.len, &re.reg);
        gw_proto_integ_set_add(is, (uint32_t)i, (const void *)(uintptr_t)le.addr, local->mems[le.reg],
                               remote->rkeys[re.reg].id, re.addr, le.len);
    }
}

/* gw_xfer_batch and gw_xfer_batch_prepared (sel: the prepared selection
 * whose arrays and count these are). */
static gw_status_t xfer_batch(gw_ep_t *ep, const char *fn, int op, gw_dlist_t *local, const uint32_t *lidx,
                              gw_dlist_t *remote, const uint32_t *ridx, size_t count, const gw_xfer_opts_t *opts,
                              gw_request_t **req, gw_pages_t *sel)
{
    int notify, integ;
    uint64_t value;
    gw_status_t st = xfer_begin(ep, fn, op, opts, req, &notify, &value, &integ);
    if (st != GW_OK)
        return st;
    gw_core_t *core = &ep->ctx->core;
    int idev;
    void *istream;
    unsigned itype;
    if ((st = index_opts(core, fn, opts, &idev, &istream, &itype)) != GW_OK)
        return st;
    if (idev)
        return gw_err(core, GW_ERR_UNSUPPORTED,
                      "%s: opts->index_mem GW_INDEX_DEVICE: index arrays in GPU memory go with gw_xfer_pages only", fn);
    if (itype != GW_INDEX_U32 && sel)
        return gw_err(core, GW_ERR_INVALID, "%s: opts->index_type %u: a prepared selection's arrays are its own "
                      "uint32 copies (GW_INDEX_U32)", fn, itype);
    unsigned wide = itype != GW_INDEX_U32 && (lidx || ridx) ? itype : 0;
    if (!local || !remote)
        return gw_err(core, GW_ERR_INVALID, "%s: NULL %s list", fn, local ? "remote" : "local");
    if (local->remote || !remote->remote)
        return gw_err(core, GW_ERR_INVALID, "%s: the %s list is a %s list", fn, local->remote ? "local" : "remote",
                      local->remote ? "remote" : "local");
    if (local->ctx != ep->ctx)
        return gw_err(core, GW_ERR_INVALID, "%s: the local list belongs to another context", fn);
    if (remote->ep != ep)
        return gw_err(core, GW_ERR_INVALID, "%s: the remote list was prepared for the endpoint to %s, not %s", fn,
                      remote->ep->base.peer, ep->base.peer);
    unsigned need = op == GW_XFER_GET ? GW_ACCESS_REMOTE_READ : GW_ACCESS_REMOTE_WRITE;
    if (!(remote->access & need))
        return gw_err(core, GW_ERR_ACCESS, "%s: the remote list was prepared for %s, not %s", fn,
                      gw_dl_access_str(remote->access), gw_dl_access_str(need));
    if ((!lidx && count > local->n) || (!ridx && count > remote->n))
        return gw_err(core, GW_ERR_INVALID, "%s: %zu entries without an index array, but the %s list has %zu", fn,
                      count, !lidx && count > local->n ? "local" : "remote", !lidx && count > local->n ? local->n : remote->n);
    if (count > UINT32_MAX)
        return gw_err(core, GW_ERR_INVALID, "%s: %zu entries (at most %u)", fn, count, UINT32_MAX);
    int kept = pair_entries(local, remote, lidx, ridx, count);
    gw_integ_set_t *is = integ_set(ep, op, notify, integ, count, GW_INTEG_KIND_ENTRY, &st);
    if (st != GW_OK)
        return st;
    batch_mem_t *m = batch_alloc(ep->ctx, count); /* (the list form may expand into it; the spare's room) */
    if (!m) {
        gw_proto_integ_set_free(is);
        return gw_err(core, GW_ERR_NOMEM, "%s: out of memory for %zu entries", fn, count);
    }
    gw_batch_t *b = &m->b;
    if (list_form(ep, local, lidx, remote, ridx, count, b, sel, is != NULL, wide)) {
        b->lgpu = b->rgpu = 1;
        b->lmem = local->mems;
        b->nlmem = local->nreg;
        b->rkey = remote->rkeys;
        b->nrkey = remote->nreg;
        b->busy[0] = &local->busy; /* the tables too stay until the request completes */
        b->busy[1] = &remote->busy;
        m->pages = sel;
        integ_add_pairs(is, local, lidx, remote, ridx, count);
        return post(ep, fn, m, NULL, count, op, notify, value, is, req);
    }
    uint32_t *own = NULL; /* 8-byte arrays the transport does not narrow: narrowed here for the entries */
    if (wide && (st = narrow_arrays(core, fn, wide, &lidx, &ridx, count, "lidx", "ridx", &own)) != GW_OK) {
        batch_release(m);
        gw_proto_integ_set_free(is);
        return st;
    }
    if (kept)
        pair_use(local, b);
    else
        for (size_t i = 0; i < count; i++) {
            size_t li = lidx ? lidx[i] : i, ri = ridx ? ridx[i] : i;
            if (i + XB_AHEAD < count && (local->e || remote->e)) { /* random indices into large lists: a cache miss per entry
                                          unless the entries are fetched ahead */
                size_t lf = lidx ? lidx[i + XB_AHEAD] : i + XB_AHEAD, rf = ridx ? ridx[i + XB_AHEAD] : i + XB_AHEAD;
                if (local->e)
                    __builtin_prefetch(&local->e[lf < local->n ? lf : 0]);
                if (remote->e)
                    __builtin_prefetch(&remote->e[rf < remote->n ? rf : 0]);
            }
            if (li >= local->n || ri >= remote->n) {
                batch_release(m);
                gw_proto_integ_set_free(is);
                free(own);
                return gw_batch_index_outside(core, fn, i, li >= local->n ? 0 : 1, li >= local->n ? li : ri,
                                              li >= local->n ? local->n : remote->n);
            }
            dl_ent_t le, re;
            dl_at(local, li, &le.addr, &le.len, &le.reg);
            dl_at(remote, ri, &re.addr, &re.len, &re.reg);
            if (le.len != re.len) {
                batch_release(m);
                gw_proto_integ_set_free(is);
                free(own);
                return gw_err(core, GW_ERR_INVALID,
                              "%s: entry %zu: local entry %zu is %llu bytes, remote entry %zu %llu", fn, i, li,
                              (unsigned long long)le.len, ri, (unsigned long long)re.len);
            }
            gw_batch_add(b, le.addr, re.addr, le.len, le.reg, re.reg);
        }
    b->lgpu = (uint8_t)local->lgpu;
    b->rgpu = (uint8_t)remote->rgpu;
    b->lmem = local->mems;
    b->nlmem = local->nreg;
    b->rkey = remote->rkeys;
    b->nrkey = remote->nreg;
    b->busy[0] = &local->busy;
    b->busy[1] = &remote->busy;
    m->pages = sel;
    if (!lidx && !ridx && !kept)
        pair_keep(local, remote, count, b);
    integ_add_pairs(is, local, lidx, remote, ridx, count);
    st = post(ep, fn, m, NULL, count, op, notify, value, is, req);
    free(own); /* (the entries hold the addresses; nothing reads the arrays after posting) */
    return st;
}

gw_status_t gw_xfer_batch(gw_ep_t *ep, int op, gw_dlist_t *local, const uint32_t *lidx, gw_dlist_t *remote,
                          const uint32_t *ridx, size_t count, const gw_xfer_opts_t *opts, gw_request_t **req)
{
    GW_API_LOCK(GW_CTX_OF_EP(ep));
    return xfer_batch(ep, "gw_xfer_batch", op, local, lidx, remote, ridx, count, opts, req, NULL);
}

gw_status_t gw_xfer_batch_prepared(gw_ep_t *ep, int op, gw_dlist_t *local, gw_dlist_t *remote, gw_pages_t *sel,
                                   const gw_xfer_opts_t *opts, gw_request_t **req)
{
    GW_API_LOCK(GW_CTX_OF_EP(ep));
    if (ep && (!sel || sel->doomed)) {
        if (req)
            *req = NULL;
        return gw_err(&ep->ctx->core, GW_ERR_INVALID, "gw_xfer_batch_prepared: %s selection",
                      sel ? "a destroyed" : "NULL");
    }
    if (ep && sel->ctx != ep->ctx) {
        if (req)
            *req = NULL;
        return gw_err(&ep->ctx->core, GW_ERR_INVALID,
                      "gw_xfer_batch_prepared: the selection belongs to another context");
    }
    return xfer_batch(ep, "gw_xfer_batch_prepared", op, local, sel ? sel->lp : NULL, remote, sel ? sel->rp : NULL,
                      sel ? sel->n : 0, opts, req, sel);
}

/* Pages lo .. hi of ps bytes from base lie in [rb, +rl): 1, with the span
 * [*from, *to); 0 when not (or when the addresses overflow). */
static int page_span_ok(uint64_t base, uint64_t lo, uint64_t hi, uint64_t ps, uint64_t rb, uint64_t rl, uint64_t *from,
                        uint64_t *to)
{
    uint64_t a, z;
    if (__builtin_mul_overflow(lo, ps, &a) || __builtin_add_overflow(base, a, &a) ||
        __builtin_mul_overflow(hi, ps, &z) || __builtin_add_overflow(base, z, &z) ||
        __builtin_add_overflow(z, ps, &z))
        return 0;
    *from = a;
    *to = z;
    return gw_range_inside(rb, rl, a, z - a);
}

/* ---- prepared page lists ---------------------------------------------------------------- */

gw_status_t gw_pages_create(gw_context_t *ctx, const uint32_t *lpages, const uint32_t *rpages, size_t count,
                            gw_pages_t **out)
{
    GW_API_LOCK(ctx);
    if (!ctx || !out)
        return gw_api_invalid(ctx ? &ctx->core : NULL, "gw_pages_create", "%s is NULL", out ? "ctx" : "out");
    *out = NULL;
    if (count > UINT32_MAX)
        return gw_err(&ctx->core, GW_ERR_INVALID, "gw_pages_create: %zu pages (at most %u)", count, UINT32_MAX);
    gw_pages_t *p = calloc(1, sizeof(*p));
    size_t bytes = (count ? count : 1) * sizeof(uint32_t);
    if (p && lpages && !(p->lp = malloc(bytes)))
        p = (free(p), NULL);
    if (p && rpages && !(p->rp = malloc(bytes))) {
        free(p->lp);
        p = (free(p), NULL);
    }
    if (!p)
        return gw_err(&ctx->core, GW_ERR_NOMEM, "gw_pages_create: out of memory for %zu pages", count);
    p->ctx = ctx;
    p->n = count;
    p->pin_dev = -1;
    if (lpages)
        memcpy(p->lp, lpages, count * sizeof(uint32_t));
    if (rpages)
        memcpy(p->rp, rpages, count * sizeof(uint32_t));
    gw_idx_span(p->lp, count, &p->lmin, &p->lmax);
    gw_idx_span(p->rp, count, &p->rmin, &p->rmax);
    *out = p;
    return GW_OK;
}

static int pages_doomed(const gw_pages_t *p)
{
    return p->doomed && !p->busy;
}

gw_status_t gw_pages_destroy(gw_pages_t *p)
{
    GW_API_LOCK(p ? p->ctx : NULL);
    if (!p || p->doomed)
        return GW_OK;
    if (p->busy) { /* its arrays stay until the last transfer using them ends */
        p->doomed = 1;
        return GW_OK;
    }
    pages_free(p);
    return GW_OK;
}

static void pages_free(gw_pages_t *p)
{
    if (p->pin) {
        char why[160];
        const gw_cuda_t *cu = gw_cuda_get(why, sizeof(why));
        if (cu && gw_cuda_ctx_for_device(p->pin_dev, why, sizeof(why))) {
            cu->cuMemFreeHost(p->pin);
            if (p->dpin)
                cu->cuMemFree((CUdeviceptr)p->dpin);
        }
    }
    free(p->lp);
    free(p->rp);
    free(p);
}

/* The list's arrays for a GPU kernel on device dev: pinned copies made on
 * first use with dev's context, and a copy in dev's memory (*dl, *dr: 0
 * when none, or made for another device); 0 where CUDA or pinned memory is
 * not to be had (the transfer then reads the list's own copies, as
 * gw_xfer_pages reads the caller's).  As gw_dl_table: the kernel reading its
 * indices from GPU memory saves it a PCIe round trip per round of pages. */
static int pages_pin(gw_pages_t *p, int dev, const uint32_t **hl, const uint32_t **hr, uint64_t *dl, uint64_t *dr)
{
    size_t n = p->n, arrays = (p->lp != NULL) + (p->rp != NULL);
    *dl = *dr = 0;
    if (!p->pin && !p->pin_failed && arrays) {
        char why[160];
        const gw_cuda_t *cu = gw_cuda_get(why, sizeof(why));
        void *h = NULL;
        size_t sz = arrays * (n ? n : 1) * sizeof(uint32_t);
        if (!cu || dev < 0 || !gw_cuda_ctx_for_device(dev, why, sizeof(why)) ||
            cu->cuMemHostAlloc(&h, sz, CU_MEMHOSTALLOC_PORTABLE) != CUDA_SUCCESS) {
            p->pin_failed = 1;
        } else {
            uint32_t *x = h;
            if (p->lp)
                memcpy(x, p->lp, n * sizeof(uint32_t));
            if (p->rp)
                memcpy(x + (p->lp ? n : 0), p->rp, n * sizeof(uint32_t));
            CUdeviceptr d = 0;
            if (cu->cuMemAlloc(&d, sz) != CUDA_SUCCESS)
                d = 0;
            else if (cu->cuMemcpyHtoD(d, h, sz) != CUDA_SUCCESS) {
                cu->cuMemFree(d);
                d = 0;
            }
            p->pin = x;
            p->pin_dev = dev;
            p->dpin = d;
        }
    }
    if (!p->pin)
        return 0;
    *hl = p->lp ? p->pin : NULL;
    *hr = p->rp ? p->pin + (p->lp ? n : 0) : NULL;
    if (p->dpin && p->pin_dev == dev) {
        *dl = p->lp ? p->dpin : 0;
        *dr = p->rp ? p->dpin + (p->lp ? n : 0) * sizeof(uint32_t) : 0;
    }
    return 1;
}

/* The pages of ps bytes from base that lie wholly in [rb, +rl): indices
 * *lo .. *hi (within uint32); 0 when there is none. */
static int page_valid(uint64_t base, uint64_t ps, uint64_t rb, uint64_t rl, uint32_t *lo, uint32_t *hi)
{
    uint64_t end = rb + rl, first = 0, last;
    if (!ps || end < rb || base > end || end - base < ps)
        return 0;
    if (base < rb)
        first = (rb - base + ps - 1) / ps;
    last = (end - base) / ps - 1;
    if (first > last || first > UINT32_MAX)
        return 0;
    *lo = (uint32_t)first;
    *hi = last > UINT32_MAX ? UINT32_MAX : (uint32_t)last;
    return 1;
}

/* An index array given as GPU memory (GW_INDEX_DEVICE): the driver says it
 * is device memory of the local region's GPU holding count entries (a
 * pointer query, nothing read), so that the kernel never faults on it.
 * span: [start, end) of the allocation an earlier array's query found in
 * this call (end 0: none); an array inside it holding count entries needs
 * no query of its own (engines pass two slices of one tensor), else the
 * query's allocation replaces it.  Nothing is kept across calls: an
 * allocation freed and made again at the same address must be asked for. */
static gw_status_t dev_index_ok(gw_core_t *core, const char *fn, const char *name, const uint32_t *p, size_t count,
                                int dev, uint64_t span[2])
{
    if (!p)
        return GW_OK;
    uint64_t a = (uint64_t)(uintptr_t)p;
    if (span[1] && a >= span[0] && a <= span[1] && (span[1] - a) / sizeof(uint32_t) >= count)
        return GW_OK;
    char why[160];
    const gw_cuda_t *cu = gw_cuda_get(why, sizeof(why));
    if (!cu)
        return gw_err(core, GW_ERR_UNSUPPORTED, "%s: opts->index_mem GW_INDEX_DEVICE, but CUDA is unavailable in this "
                      "process (%s)", fn, why);
    unsigned type = 0;
    int ord = -1;
    CUdeviceptr start = 0;
    size_t size = 0;
    int attrs[4] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                    CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE};
    void *data[4] = {&type, &ord, &start, &size};
    CUresult r = cu->cuPointerGetAttributes(4, attrs, data, (CUdeviceptr)(uintptr_t)p);
    if (r != CUDA_SUCCESS || type != CU_MEMORYTYPE_DEVICE)
        return gw_err(core, GW_ERR_INVALID, "%s: %s %p is not GPU memory (opts->index_mem GW_INDEX_DEVICE)", fn, name,
                      (const void *)p);
    if (ord != dev)
        return gw_err(core, GW_ERR_INVALID, "%s: %s %p is memory of GPU %d, the local region of GPU %d (the arrays "
                      "must be on the local region's GPU)", fn, name, (const void *)p, ord, dev);
    uint64_t end = (uint64_t)start + size;
    if (a < (uint64_t)start || a > end || (end - a) / sizeof(uint32_t) < count)
        return gw_err(core, GW_ERR_INVALID, "%s: %s %p holds fewer than the %zu entries (its allocation ends at "
                      "0x%llx)", fn, name, (const void *)p, count, (unsigned long long)end);
    span[0] = (uint64_t)start;
    span[1] = end;
    return GW_OK;
}

/* The paged form's fields: count pages of ps bytes, page i from la +
 * lpages[i] * ps to raddr + rpages[i] * ps (a NULL array reads as i). */
static void pages_form(gw_batch_t *b, size_t count, const uint32_t *lpages, const uint32_t *rpages, uint64_t la,
                       uint64_t raddr, uint64_t ps)
{
    b->npages = (uint32_t)count;
    b->lpage = lpages;
    b->rpage = rpages;
    b->plbase = la;
    b->prbase = raddr;
    b->psize = ps;
}

/* The paged forms' one region a side: the batch names lmem and a copy of
 * the key (kept in m, the caller's may go before the transfer ends). */
static void one_region(batch_mem_t *m, gw_mem_t *lmem, const gw_rkey_t *rkey)
{
    m->lm1 = lmem;
    m->rk1 = *rkey;
    m->b.lmem = &m->lm1;
    m->b.nlmem = 1;
    m->b.rkey = &m->rk1;
    m->b.nrkey = 1;
}

/* gw_xfer_pages with its index arrays in the local GPU's memory
 * (GW_INDEX_DEVICE): never read here.  The host finds each side's valid
 * pages; the transport's kernel checks every entry against them on the GPU
 * before the page kernel moves anything (batch.h pdev). */
static gw_status_t xfer_pages_dev(gw_ep_t *ep, const char *fn, int op, gw_mem_t *lmem, void *lbase,
                                  const uint32_t *lpages, gw_rkey_t *rkey, uint64_t raddr, const uint32_t *rpages,
                                  size_t count, size_t page_size, int notify, uint64_t value, int integ,
                                  void *istream, gw_pages_t *pl, gw_request_t **req)
{
    gw_core_t *core = &ep->ctx->core;
    if (pl)
        return gw_err(core, GW_ERR_INVALID,
                      "%s: opts->index_mem GW_INDEX_DEVICE, but a prepared page list's arrays are its own host "
                      "copies", fn);
    if (lmem->type != GW_MEM_CUDA || rkey->type != GW_MEM_CUDA)
        return gw_err(core, GW_ERR_UNSUPPORTED,
                      "%s: opts->index_mem GW_INDEX_DEVICE needs GPU memory on both sides (the page kernel reads "
                      "the arrays), but the %s region is host memory", fn, lmem->type != GW_MEM_CUDA ? "local" : "remote");
    gw_tl_caps_t caps;
    ep->ops->caps(ep->ctx->tl[ep->tl_id], &caps);
    if (!(caps.batch & GW_TL_BATCH_PAGES))
        return gw_err(core, GW_ERR_UNSUPPORTED,
                      "%s: opts->index_mem GW_INDEX_DEVICE: the %s transport to %s moves pages as entries built on "
                      "the host, which would read the index arrays there", fn, ep->ops->name, ep->base.peer);
    if (ep->base.integ && notify != GW_NOTIFY_NONE && op == GW_XFER_PUT && integ != GW_INTEGRITY_OFF)
        return gw_err(core, GW_ERR_UNSUPPORTED,
                      "%s: opts->index_mem GW_INDEX_DEVICE with the end-to-end integrity check: the check hashes "
                      "each page on the host's list (opts->integrity GW_INTEGRITY_OFF sends it unchecked)", fn);
    gw_status_t st;
    uint64_t span[2] = {0, 0}; /* (one query for both arrays where they share an allocation) */
    if ((st = dev_index_ok(core, fn, "lpages", lpages, count, lmem->cuda_device, span)) != GW_OK ||
        (st = dev_index_ok(core, fn, "rpages", rpages, count, lmem->cuda_device, span)) != GW_OK)
        return st;
    uint64_t la = (uint64_t)(uintptr_t)lbase, ps = page_size, total, x = 0, y = 0;
    if (__builtin_mul_overflow((uint64_t)count, ps, &total))
        return gw_err(core, GW_ERR_INVALID, "%s: %zu pages of %zu bytes overflow 64 bits", fn, count, page_size);
    /* each side's valid pages: a NULL array's 0 .. count-1 checked here */
    uint32_t lim[4] = {0, 0, 0, 0};
    if (count && !page_valid(la, ps, (uint64_t)(uintptr_t)lmem->addr, lmem->len, &lim[0], &lim[1]))
        return gw_err(core, GW_ERR_INVALID,
                      "%s: entry 0: no page of %zu bytes from %p lies inside the local region [%p, +%zu)", fn,
                      page_size, lbase, lmem->addr, lmem->len);
    if (count && !page_valid(raddr, ps, rkey->addr, rkey->len, &lim[2], &lim[3]))
        return gw_err(core, GW_ERR_OUT_OF_BOUNDS,
                      "%s: entry 0: no page of %zu bytes from 0x%llx lies inside the region [0x%llx, +%llu) the "
                      "key covers", fn, page_size, (unsigned long long)raddr, (unsigned long long)rkey->addr,
                      (unsigned long long)rkey->len);
    if (count && !lpages && (lim[0] > 0 || (uint64_t)lim[1] < count - 1))
        return gw_err(core, GW_ERR_INVALID, "%s: pages 0 .. %zu (no local array) do not all lie inside the local "
                      "region [%p, +%zu) from %p", fn, count - 1, lmem->addr, lmem->len, lbase);
    if (count && !rpages && (lim[2] > 0 || (uint64_t)lim[3] < count - 1))
        return gw_err(core, GW_ERR_OUT_OF_BOUNDS, "%s: pages 0 .. %zu (no remote array) do not all lie inside the "
                      "region [0x%llx, +%llu) the key covers", fn, count - 1, (unsigned long long)rkey->addr,
                      (unsigned long long)rkey->len);
    batch_mem_t *m = batch_alloc(ep->ctx, 0);
    if (!m)
        return gw_err(core, GW_ERR_NOMEM, "%s: out of memory for a batch", fn);
    gw_batch_t *b = &m->b;
    b->lgpu = b->rgpu = 1;
    b->total = total;
    if (count) {
        uint64_t rlo = rpages ? lim[2] : 0, rhi = rpages ? lim[3] : count - 1;
        page_span_ok(raddr, rlo, rhi, ps, rkey->addr, rkey->len, &x, &y); /* (inside: page_valid said so) */
        b->rlo = x;
        b->rhi = y;
        pages_form(b, count, lpages, rpages, la, raddr, ps);
        b->pdev = 1;
        memcpy(b->plim, lim, sizeof(lim));
        b->pstream = istream;
    }
    one_region(m, lmem, rkey);
    return post(ep, fn, m, lmem, count, op, notify, value, NULL, req);
}

/* gw_xfer_pages and gw_xfer_pages_prepared (pl: the prepared list whose
 * arrays and spans these are). */
static gw_status_t xfer_pages(gw_ep_t *ep, const char *fn, int op, gw_mem_t *lmem, void *lbase,
                              const uint32_t *lpages, gw_rkey_t *rkey, uint64_t raddr, const uint32_t *rpages,
                              size_t count, size_t page_size, const gw_xfer_opts_t *opts, gw_request_t **req,
                              gw_pages_t *pl)
{
    int notify, integ;
    uint64_t value;
    gw_status_t st = xfer_begin(ep, fn, op, opts, req, &notify, &value, &integ);
    if (st != GW_OK)
        return st;
    gw_core_t *core = &ep->ctx->core;
    if (!lmem)
        return gw_err(core, GW_ERR_INVALID, "%s: NULL local region (the paged form needs one)", fn);
    if (lmem->core != core)
        return gw_err(core, GW_ERR_INVALID, "%s: the local region belongs to another context", fn);
    if (!rkey)
        return gw_err(core, GW_ERR_INVALID, "%s: NULL remote key", fn);
    if (rkey->ep != ep)
        return gw_err(core, GW_ERR_INVALID_KEY, "%s: the remote key was unpacked on another endpoint (%s), not %s",
                      fn, rkey->ep->base.peer, ep->base.peer);
    unsigned need = op == GW_XFER_GET ? GW_ACCESS_REMOTE_READ : GW_ACCESS_REMOTE_WRITE;
    if (!(rkey->access & need))
        return gw_err(core, GW_ERR_ACCESS, "%s: the remote region at 0x%llx grants %s, not %s", fn,
                      (unsigned long long)rkey->addr, gw_dl_access_str(rkey->access), gw_dl_access_str(need));
    if (count > UINT32_MAX)
        return gw_err(core, GW_ERR_INVALID, "%s: %zu pages (at most %u)", fn, count, UINT32_MAX);
    int idev;
    void *istream;
    unsigned itype;
    if ((st = index_opts(core, fn, opts, &idev, &istream, &itype)) != GW_OK)
        return st;
    if (itype != GW_INDEX_U32 && pl)
        return gw_err(core, GW_ERR_INVALID, "%s: opts->index_type %u: a prepared page list's arrays are its own "
                      "uint32 copies (GW_INDEX_U32)", fn, itype);
    unsigned wide = itype != GW_INDEX_U32 && (lpages || rpages) ? itype : 0;
    if (idev && (lpages || rpages))
        return xfer_pages_dev(ep, fn, op, lmem, lbase, lpages, rkey, raddr, rpages, count, page_size, notify, value,
                              integ, istream, pl, req);
    uint64_t lb = (uint64_t)(uintptr_t)lmem->addr, ll = lmem->len, la = (uint64_t)(uintptr_t)lbase;
    uint64_t ps = page_size;
    batch_mem_t *m = batch_alloc(ep->ctx, count);
    if (!m)
        return gw_err(core, GW_ERR_NOMEM, "%s: out of memory for %zu pages", fn, count);
    gw_batch_t *b = &m->b;
    uint64_t lo, lend, ro, rend, total;
    if (__builtin_mul_overflow((uint64_t)count, ps, &total)) {
        batch_release(m);
        return gw_err(core, GW_ERR_INVALID, "%s: %zu pages of %zu bytes overflow 64 bits", fn, count, page_size);
    }
    b->lgpu = lmem->type == GW_MEM_CUDA;
    b->rgpu = rkey->type == GW_MEM_CUDA;
    gw_tl_caps_t caps;
    ep->ops->caps(ep->ctx->tl[ep->tl_id], &caps);
    /* left to the transport as pages (a GPU kernel computes the addresses) */
    int paged = b->lgpu && b->rgpu && (caps.batch & GW_TL_BATCH_PAGES);
    /* bounds: the lowest and highest page of each side checked once (one
     * pass over the indices, or none for a prepared list); only when that
     * fails, a pass naming the first page outside.  A transport that copies
     * the arrays anyway checks them in that copy (batch.h ichk): here only
     * each side's valid pages, and the pages of a NULL array. */
    uint32_t lmin, lmax, rmin, rmax, lim[4];
    int ichk = paged && !pl && (caps.batch & GW_TL_BATCH_ICHECK) && (lpages || rpages) && count && ps &&
               !integ_wanted(ep, op, notify) && page_valid(la, ps, lb, ll, &lim[0], &lim[1]) &&
               page_valid(raddr, ps, rkey->addr, rkey->len, &lim[2], &lim[3]) &&
               (lpages || (lim[0] == 0 && (uint64_t)lim[1] >= count - 1)) &&
               (rpages || (lim[2] == 0 && (uint64_t)lim[3] >= count - 1));
    uint32_t *own = NULL; /* 8-byte arrays the transport will not narrow in its copy: narrowed here */
    if (wide && !ichk && (st = narrow_arrays(core, fn, wide, &lpages, &rpages, count, "lpages", "rpages", &own)) != GW_OK) {
        batch_release(m);
        return st;
    }
    if (ichk) { /* (the spans of every valid page: the transport narrows the remote one to the pages') */
        lmin = lpages ? lim[0] : 0;
        lmax = lpages ? lim[1] : (uint32_t)(count - 1);
        rmin = rpages ? lim[2] : 0;
        rmax = rpages ? lim[3] : (uint32_t)(count - 1);
    } else if (pl) {
        lmin = pl->lmin;
        lmax = pl->lmax;
        rmin = pl->rmin;
        rmax = pl->rmax;
    } else {
        gw_idx_span(lpages, count, &lmin, &lmax);
        gw_idx_span(rpages, count, &rmin, &rmax);
    }
    int ok = count && ps && page_span_ok(la, lmin, lmax, ps, lb, ll, &lo, &lend) &&
             page_span_ok(raddr, rmin, rmax, ps, rkey->addr, rkey->len, &ro, &rend);
    for (size_t i = 0; !ok && i < count; i++) {
        uint64_t lp = lpages ? lpages[i] : i, rp = rpages ? rpages[i] : i, x, y;
        int bad_l = !page_span_ok(la, lp, lp, ps, lb, ll, &x, &y);
        int bad_r = !page_span_ok(raddr, rp, rp, ps, rkey->addr, rkey->len, &x, &y);
        if (bad_l || bad_r) {
            batch_release(m);
            free(own);
            return gw_batch_page_outside(core, fn, i, !bad_l, bad_l ? lp : rp, page_size,
                                         bad_l ? (uint64_t)(uintptr_t)lbase : raddr,
                                         bad_l ? (uint64_t)(uintptr_t)lmem->addr : rkey->addr,
                                         bad_l ? lmem->len : rkey->len);
        }
    }
    if (ok) {
        b->total = total;
        b->rlo = ro;
        b->rhi = rend;
        if (paged) {
            /* the transport copies the caller's index arrays while it takes
             * the batch (checking them there with ichk), or, from a prepared
             * list, uses its pinned and device copies, which outlive the
             * transfer (batch.h) */
            pages_form(b, count, lpages, rpages, la, raddr, ps);
            if (ichk) {
                b->ichk = 1;
                b->itype = (uint8_t)wide;
                memcpy(b->plim, lim, sizeof(lim));
            }
            if (pl && pages_pin(pl, lmem->cuda_device, &b->lpage, &b->rpage, &b->lpage_dev, &b->rpage_dev))
                b->pkept = 1;
        } else {
            for (size_t i = 0; i < count; i++)
                gw_batch_add(b, la + (uint64_t)(lpages ? lpages[i] : i) * ps,
                             raddr + (uint64_t)(rpages ? rpages[i] : i) * ps, ps, 0, 0);
            b->total = total; /* (gw_batch_add counted them again) */
        }
    }
    m->pages = pl; /* (its use counted by post(), released at the end) */
    one_region(m, lmem, rkey);
    gw_integ_set_t *is = integ_set(ep, op, notify, integ, count, GW_INTEG_KIND_PAGE, &st);
    if (st != GW_OK) {
        batch_release(m);
        free(own);
        return st;
    }
    for (size_t i = 0; is && i < count; i++)
        gw_proto_integ_set_add(is, (uint32_t)i, (const void *)(uintptr_t)(la + (uint64_t)(lpages ? lpages[i] : i) * ps),
                               lmem, rkey->id, raddr + (uint64_t)(rpages ? rpages[i] : i) * ps, ps);
    st = post(ep, fn, m, lmem, count, op, notify, value, is, req);
    free(own); /* (the transport copied the arrays while it took the batch) */
    return st;
}

gw_status_t gw_xfer_pages(gw_ep_t *ep, int op, gw_mem_t *lmem, void *lbase, const uint32_t *lpages, gw_rkey_t *rkey,
                          uint64_t raddr, const uint32_t *rpages, size_t count, size_t page_size,
                          const gw_xfer_opts_t *opts, gw_request_t **req)
{
    GW_API_LOCK(GW_CTX_OF_EP(ep));
    return xfer_pages(ep, "gw_xfer_pages", op, lmem, lbase, lpages, rkey, raddr, rpages, count, page_size, opts, req,
                      NULL);
}

gw_status_t gw_xfer_pages_prepared(gw_ep_t *ep, int op, gw_mem_t *lmem, void *lbase, gw_rkey_t *rkey, uint64_t raddr,
                                   gw_pages_t *pages, size_t page_size, const gw_xfer_opts_t *opts,
                                   gw_request_t **req)
{
    GW_API_LOCK(GW_CTX_OF_EP(ep));
    if (ep && (!pages || pages->doomed))
        return gw_err(&ep->ctx->core, GW_ERR_INVALID, "gw_xfer_pages_prepared: %s page list",
                      pages ? "a destroyed" : "NULL");
    if (ep && pages->ctx != ep->ctx)
        return gw_err(&ep->ctx->core, GW_ERR_INVALID,
                      "gw_xfer_pages_prepared: the page list belongs to another context");
    return xfer_pages(ep, "gw_xfer_pages_prepared", op, lmem, lbase, pages ? pages->lp : NULL, rkey, raddr,
                      pages ? pages->rp : NULL, pages ? pages->n : 0, page_size, opts, req, pages);
}

/* ---- counted notifications --------------------------------------------------------------- */
typedef struct cwait {
    gw_ep_t *ep;
    uint64_t id, count;
} cwait_t;

static int count_ready(void *arg)
{
    cwait_t *w = arg;
    return gw_ep_ncount_get(&w->ep->base, w->id) >= w->count || gw_ep_ncount_bad(&w->ep->base, w->id) ||
           w->ep->base.error != GW_OK;
}

/* A counted notification of id that failed the integrity check: taken,
 * and reported in its place. */
static gw_status_t count_bad(gw_ep_t *ep, uint64_t id)
{
    char *detail = NULL;
    if (gw_ep_ncount_take_bad(&ep->base, id, &detail) != 0)
        return GW_OK;
    gw_status_t st = gw_err(&ep->ctx->core, GW_ERR_INTEGRITY,
                            "gw_notify_count_wait: a counted notification of id %llu from %s: %s",
                            (unsigned long long)id, ep->base.peer, detail ? detail : "failed the integrity check");
    free(detail);
    return st;
}

gw_status_t gw_notify_count(gw_ep_t *ep, uint64_t id, uint64_t *count)
{
    GW_API_LOCK(GW_CTX_OF_EP(ep));
    if (!ep || !count)
        return gw_api_invalid(ep ? &ep->ctx->core : NULL, "gw_notify_count", "count is NULL");
    *count = gw_ep_ncount_get(&ep->base, id);
    return GW_OK;
}

gw_status_t gw_notify_count_wait(gw_ep_t *ep, uint64_t id, uint64_t count, int timeout_ms)
{
    GW_API_LOCK(GW_CTX_OF_EP(ep));
    if (!ep)
        return GW_ERR_INVALID;
    cwait_t w = {ep, id, count};
    gw_status_t st;
    if (GW_UNLIKELY(ep->base.nbad != NULL) && (st = count_bad(ep, id)) != GW_OK)
        return st;
    if (count_ready(&w) && gw_ep_ncount_take(&ep->base, id, count) == 0)
        return GW_OK;
    if (ep->base.error != GW_OK)
        return gw_api_ep_usable(ep, GW_OP_PUT_NOTIFY);
    if (timeout_ms == 0)
        gw_progress(ep->ctx);
    else
        gw_ctx_progress_until(ep->ctx, count_ready, &w, timeout_ms);
    if (GW_UNLIKELY(ep->base.nbad != NULL) && (st = count_bad(ep, id)) != GW_OK)
        return st;
    if (gw_ep_ncount_take(&ep->base, id, count) == 0)
        return GW_OK;
    if (ep->base.error != GW_OK)
        return gw_api_ep_usable(ep, GW_OP_PUT_NOTIFY);
    if (timeout_ms == 0)
        return GW_INPROGRESS;
    return gw_err(&ep->ctx->core, GW_ERR_TIMEOUT,
                  "gw_notify_count_wait: %llu of %llu counted notification(s) of id %llu from %s within %d ms",
                  (unsigned long long)gw_ep_ncount_get(&ep->base, id), (unsigned long long)count,
                  (unsigned long long)id, ep->base.peer, timeout_ms);
}
