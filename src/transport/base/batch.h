/* SPDX-License-Identifier: Apache-2.0 */
/* batch.h - a batched transfer as the api layer hands it to a transport's
 * `batch` op (transport layer).
 *
 * The api layer builds it from two prepared descriptor lists and index
 * arrays, or from a page list (gw_xfer_batch / gw_xfer_pages): every entry
 * has been checked against its local region and remote key (bounds, access,
 * the key's endpoint), zero-length entries are dropped, and an entry that
 * continues the previous one on both sides (same region, same key, local and
 * remote addresses both adjacent) is merged into it.  The transport reads it
 * and never changes it; it is freed once the request completes.
 *
 * The remote side of each entry names one of `nrkey` key copies (a region of
 * the peer); the local side one of `nlmem` registered regions.  A transport
 * that moves an entry through a peer region must still let the target (or its
 * region table) have the last word on bounds, access and revocation, exactly
 * as for a single put/get.
 *
 * The paged form may come unexpanded: a transport that says
 * GW_TL_BATCH_PAGES gets a gw_xfer_pages batch with GPU memory on both sides
 * as the page arrays (`npages` > 0, `n` 0), every page checked against the
 * local region and the key (the span [rlo, rhi) too).  `lpage` and `rpage`
 * are then the caller's arrays, valid only during the `submit` call: the
 * transport copies them there (and points the batch at its copies) or
 * expands the batch there.  From a prepared page list (gw_xfer_pages_prepared,
 * `pkept` 1) they are instead the list's pinned copies, valid until the
 * request completes, and `lpage_dev` / `rpage_dev` copies of them in the
 * memory of the local region's GPU where the list has them (0: none): a
 * kernel reads those, and nothing is copied.  It either moves the pages as
 * they are (a kernel that computes the addresses) or calls gw_batch_expand()
 * once, which writes the entries into `ent` (room for `npages` is there):
 * the changes a transport may make to a batch.  With `pdev` 1 (index arrays
 * in the local GPU's memory, GW_INDEX_DEVICE) they are device pointers,
 * valid until the request completes: only a transport that says
 * GW_TL_BATCH_PAGES gets such a batch, and it must move it by a kernel
 * after checking every entry on the GPU against `plim` (the valid pages of
 * each side; [rlo, rhi) spans every valid remote page), or fail it: it is
 * never expanded (gw_batch_expand leaves it as it is).
 *
 * A transport that says GW_TL_BATCH_ICHECK may get unexpanded paged and
 * list batches whose host index arrays are not checked yet (`ichk` 1): the
 * api layer checked the arrays' count and left the bounds to the copy the
 * transport makes anyway (one pass over the arrays, not two).  Before
 * reading them otherwise, moving or expanding anything, it calls
 * gw_batch_icheck(), which copies and checks them in one pass, or fails
 * the transfer naming the first index outside (nothing moved).
 *
 * The list form may come unexpanded likewise: a transport that says
 * GW_TL_BATCH_LISTS gets a gw_xfer_batch batch over two lists of one GPU
 * region and one GPU key each as the lists' entry tables and the index
 * arrays (`nlist` > 0, `n` 0).  The tables are the lists' own copies in
 * pinned host memory (a GPU kernel may read them), valid until the request
 * completes; every selected pair was checked (indices inside the lists,
 * equal lengths) and [rlo, rhi) is the span of the whole remote list.  The
 * index arrays are the caller's, valid only during `submit`, as for pages;
 * from a prepared selection (gw_xfer_batch_prepared, `ikept` 1) they are
 * its pinned copies, valid until the request completes, with `lidx_dev` /
 * `ridx_dev` its copies in the local GPU's memory (0: none), as `pkept`
 * for pages.  gw_batch_expand() turns the batch into entries.
 *
 * A transport that also says GW_TL_BATCH_CLISTS gets list batches whose
 * lists span several GPU regions or keys unexpanded too, where each side is
 * either one region's table as above or a computed list (gw_dlist_table_t
 * with no columns: uniform blocks, per_region to a region): such a side has
 * no table (ltab or rtab NULL) but its regions' base addresses (lcbase, one
 * per lmem[], or rcbase, one per rkey[]) and its blocks per region; its entry
 * j is block j % per of region j / per, at base + block * clen.  lmem[] and
 * rkey[] are then the lists' regions and keys (nlmem, nrkey of them), and
 * [rlo, rhi) spans every key's entries, not one key's.
 */
#ifndef GW_TRANSPORT_BATCH_H
#define GW_TRANSPORT_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "core/request.h"
#include "mem/mem.h"

typedef struct gw_batch_ent {
    uint64_t laddr;  /* local address */
    uint64_t raddr;  /* remote address */
    uint64_t len;    /* > 0 */
    uint32_t lreg;   /* index in lmem[] */
    uint32_t rreg;   /* index in rkey[] */
} gw_batch_ent_t;

/* An entry of a prepared list as its pinned table holds it (the list form,
 * unexpanded; a GPU kernel reads it: 16 bytes, no padding). */
typedef struct gw_batch_lent {
    uint64_t addr;
    uint64_t len;
} gw_batch_lent_t;

typedef struct gw_batch {
    uint32_t n;               /* entries (after merging; may be 0) */
    uint32_t n_user;          /* entries the caller named */
    uint8_t get;              /* 1: remote -> local; 0: local -> remote */
    uint8_t notify;           /* GW_NOTIFY_NONE / ORDERED / COUNTED */
    uint8_t lgpu;             /* some local region is GPU memory */
    uint8_t rgpu;             /* some remote region is GPU memory */
    uint64_t value;           /* ORDERED: the value; COUNTED: the id */
    uint64_t total;           /* bytes */
    uint64_t rlo, rhi;        /* lowest remote address and end of the entries (any key): with one
                               * key, a transport checks its bounds once instead of per entry */
    gw_batch_ent_t *ent;
    gw_mem_t *const *lmem;
    uint32_t nlmem;
    const gw_rkey_t *rkey;
    uint32_t nrkey;
    uint32_t *busy[2];        /* use counts of the lists it came from, released at the end */
    /* the paged form, unexpanded (GW_TL_BATCH_PAGES): page i moves psize bytes
     * between plbase + lpage[i] * psize and prbase + rpage[i] * psize (a NULL
     * array reads as i); lreg and rreg 0 */
    uint32_t npages;
    const uint32_t *lpage, *rpage;
    uint64_t plbase, prbase, psize;
    uint8_t pkept;            /* lpage/rpage are a prepared list's pinned copies (valid to completion) */
    uint64_t lpage_dev, rpage_dev; /* pkept: their copies in the local GPU's memory (CUdeviceptr; 0: none) */
    uint8_t pdev;             /* lpage/rpage are the caller's arrays in the local GPU's memory (GW_INDEX_DEVICE),
                               * valid to completion: never read on the host, never expanded; the transport
                               * checks every entry on the GPU against plim before anything moves */
    uint32_t plim[4];         /* pdev, ichk: the valid indices, local [plim[0], plim[1]], remote
                               * [plim[2], plim[3]] (pages; with ichk the list form's entries too) */
    void *pstream;            /* pdev: the CUstream the arrays are ready on (NULL: ready now) */
    uint8_t ichk;             /* the caller's host index arrays (lpage/rpage or lidx/ridx) are not checked
                               * yet: the transport checks them against plim while it copies them, with
                               * gw_batch_icheck(), before anything moves or is expanded */
    uint8_t itype;            /* ichk: the arrays' item type (gw_xfer_opts_t.index_type; 0 uint32): 8-byte
                               * items (GW_INDEX_I64 / GW_INDEX_U64, cast to uint32_t *) are narrowed into
                               * gw_batch_icheck's copies, int32 ones (GW_INDEX_I32) refused when negative */
    uint32_t *iown;           /* narrowed copies gw_batch_icheck made itself (no ldst/rdst given): freed with
                               * the batch */
    /* the list form, unexpanded (GW_TL_BATCH_LISTS): entry i moves
     * ltab[lidx[i]].len bytes between ltab[lidx[i]].addr and
     * rtab[ridx[i]].addr (a NULL array reads as i); lreg and rreg 0 */
    uint32_t nlist;
    const uint32_t *lidx, *ridx;
    const gw_batch_lent_t *ltab, *rtab;
    uint64_t ltab_dev, rtab_dev; /* copies of the tables in the memory of the local region's GPU
                                  * (CUdeviceptr; 0: none, a kernel reads ltab/rtab) */
    uint64_t lmaxlen;         /* the longest entry of the two lists */
    uint8_t ikept;            /* lidx/ridx are a prepared selection's pinned copies (valid to completion) */
    uint64_t lidx_dev, ridx_dev; /* ikept: their copies in the local GPU's memory (CUdeviceptr; 0: none) */
    /* computed sides of the list form (GW_TL_BATCH_CLISTS): ltab/rtab NULL,
     * entry j of the side at cbase[j / cper] + (j % cper) * clen */
    const uint64_t *lcbase, *rcbase;
    uint32_t lcper, rcper;
    uint32_t rcn;             /* entries of the computed remote list (its last region may hold fewer blocks) */
    uint64_t clen;
} gw_batch_t;

/* Entry j of one side of an unexpanded list batch: its address, length and
 * region (key) index. */
static inline void gw_batch_list_at(const gw_batch_lent_t *tab, const uint64_t *cbase, uint32_t cper, uint64_t clen,
                                    uint32_t j, uint64_t *addr, uint64_t *len, uint32_t *reg)
{
    if (tab) {
        *addr = tab[j].addr;
        *len = tab[j].len;
        *reg = 0;
        return;
    }
    uint32_t r = j / cper;
    *addr = cbase[r] + (uint64_t)(j - r * cper) * clen;
    *len = clen;
    *reg = r;
}

/* Appends an entry, merging it into the previous one when it continues it on
 * both sides; a zero-length entry is dropped.  ent[] has room. */
static inline void gw_batch_add(gw_batch_t *b, uint64_t la, uint64_t ra, uint64_t len, uint32_t lreg, uint32_t rreg)
{
    if (!len)
        return;
    b->total += len;
    b->rlo = ra < b->rlo ? ra : b->rlo;
    b->rhi = ra + len > b->rhi ? ra + len : b->rhi;
    if (b->n) {
        gw_batch_ent_t *p = &b->ent[b->n - 1];
        if (p->lreg == lreg && p->rreg == rreg && p->laddr + p->len == la && p->raddr + p->len == ra) {
            p->len += len;
            return;
        }
    }
    b->ent[b->n++] = (gw_batch_ent_t){la, ra, len, lreg, rreg};
}

/* 1 when the batch is still in a form with no entries (pages or lists). */
static inline int gw_batch_unexpanded(const gw_batch_t *b)
{
    return b->npages || b->nlist;
}

/* Makes an unexpanded paged or list batch an entry batch (no-op for
 * others): the entries the api layer would have built, merged where they
 * continue each other on both sides.  total, rlo and rhi are unchanged. */
static inline void gw_batch_expand(gw_batch_t *b)
{
    if (!gw_batch_unexpanded(b) || b->pdev || b->ichk) /* (device index arrays: never read here; unchecked ones:
                                                         * gw_batch_icheck first) */
        return;
    uint64_t total = b->total, rlo = b->rlo, rhi = b->rhi, ps = b->psize;
    for (uint32_t i = 0; i < b->npages; i++)
        gw_batch_add(b, b->plbase + (uint64_t)(b->lpage ? b->lpage[i] : i) * ps,
                     b->prbase + (uint64_t)(b->rpage ? b->rpage[i] : i) * ps, ps, 0, 0);
    for (uint32_t i = 0; i < b->nlist; i++) {
        uint64_t la, ra, ll, rl;
        uint32_t lr, rr;
        gw_batch_list_at(b->ltab, b->lcbase, b->lcper, b->clen, b->lidx ? b->lidx[i] : i, &la, &ll, &lr);
        gw_batch_list_at(b->rtab, b->rcbase, b->rcper, b->clen, b->ridx ? b->ridx[i] : i, &ra, &rl, &rr);
        gw_batch_add(b, la, ra, ll, lr, rr);
    }
    b->total = total;
    b->rlo = rlo;
    b->rhi = rhi;
    b->npages = 0;
    b->nlist = 0;
    b->lcbase = b->rcbase = NULL;
}

/* An unexpanded batch with unchecked index arrays (ichk): each array
 * copied to ldst or rdst (NULL: not copied, the arrays stay the caller's,
 * as they are while `submit` runs; 8-byte ones, itype, are then narrowed
 * into iown) while every index is checked against plim.  GW_OK: the batch points at the copies, its span [rlo, rhi) is the
 * pages' own and ichk is 0.  Otherwise the error (GW_ERR_INVALID, or
 * GW_ERR_OUT_OF_BOUNDS for a remote page) naming the first entry outside;
 * the batch must then fail as refused at posting. */
gw_status_t gw_batch_icheck(gw_core_t *core, gw_batch_t *b, uint32_t *ldst, uint32_t *rdst);

/* The refusals of an index outside its side, in the words every path uses
 * (the api layer's checks and gw_batch_icheck): fn the caller's call, i
 * the entry.  A list index outside a list of n entries (GW_ERR_INVALID); a
 * page of psize bytes from `from` outside the region [base, +len)
 * (GW_ERR_INVALID for a local page, GW_ERR_OUT_OF_BOUNDS for a remote one,
 * whose region is the key's). */
gw_status_t gw_batch_index_outside(gw_core_t *core, const char *fn, size_t i, int remote, uint64_t idx, uint64_t n);
gw_status_t gw_batch_page_outside(gw_core_t *core, const char *fn, size_t i, int remote, uint64_t page,
                                  uint64_t psize, uint64_t from, uint64_t base, uint64_t len);

/* The refusal of an index array's item its type does not allow
 * (gw_xfer_opts_t.index_type: an 8-byte item outside 0 .. 2^32-1, a
 * negative int32), in the words every path uses, the Python package's
 * too ("gw_xfer_pages: rpages[517] = 4294967296 is above 4294967295 (...)"):
 * fn the caller's call, i the entry, array its name ("lpages"), what the
 * value's text (GW_ERR_INVALID).  gw_batch_item_find finds the first such item of
 * p[0 .. n-1] (n: none) and writes its text. */
gw_status_t gw_batch_item_bad(gw_core_t *core, const char *fn, size_t i, const char *array, const char *what,
                              unsigned type);
size_t gw_batch_item_find(const void *p, size_t n, unsigned type, char *what, size_t len);

/* CUDA ordinal of entry e's local region, -1 for host memory. */
static inline int gw_batch_ldev(const gw_batch_t *b, const gw_batch_ent_t *e)
{
    const gw_mem_t *m = b->lmem[e->lreg];
    return m && m->type == GW_MEM_CUDA ? m->cuda_device : -1;
}

/* Does req deliver a notification: a put_notify, or a batch with one? */
static inline int gw_req_notifies(const gw_request_t *req)
{
    return req->op == GW_OP_PUT_NOTIFY || (req->op == GW_OP_BATCH && req->batch->notify != GW_NOTIFY_NONE);
}

/* Is req's notification a counted one (a batch's with GW_NOTIFY_COUNTED)?
 * What a transport's deferred-notification sender (ep_base.h notify_out)
 * puts on its wire. */
static inline int gw_req_notify_counted(const gw_request_t *req)
{
    return req->op == GW_OP_BATCH && req->batch->notify == GW_NOTIFY_COUNTED;
}

#endif
