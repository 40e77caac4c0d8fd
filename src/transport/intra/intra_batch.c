/* SPDX-License-Identifier: Apache-2.0 */
/* intra_batch.c - batched put/get over the intra-host transport (the
 * `batch` op).
 *
 * Uses the transport's private objects (intra_int.h: peer region table,
 * imports, copies in flight).
 *
 * The initiator moves every byte itself, as for a single put/get:
 *  - it enters the peer's table slot of every region the batch names
 *    (counting itself in `inflight`, so a deregistration waits for it) and
 *    checks every entry against the owner's slot (bounds, access): a region
 *    revoked before the batch fails it whole, with nothing moved;
 *  - host <-> peer host entries: process_vm_writev/readv over iovec arrays,
 *    up to 1024 entries per call, at posting; where every region the batch
 *    names is one its owner allocated (gw_mem_alloc: shared memory mapped
 *    here too), memcpy per entry instead, as a single put does (CMA pins
 *    each remote piece: about 0.4 us per 1 KiB entry);
 *  - local GPU <-> peer GPU entries: the gather/scatter copy kernel
 *    (src/cuda/copy_kernel.cu) over the peer's imported allocations, launched
 *    in chunks as the descriptors are built (one copy-engine copy per entry
 *    where the kernel cannot load); a paged batch (gw_xfer_pages, GPU on
 *    both sides, its span in one peer allocation) goes to the page kernel as
 *    it came: its index arrays copied into pinned memory (their bounds
 *    checked in that copy: gw_batch_icheck), one launch, no other
 *    per-page work on the host (pages of any size: the kernel cuts
 *    those over 64 KiB in pieces; 128 KiB pages ran 1-2% faster that way
 *    than as entries on two H200s); a list batch (one GPU region, one
 *    peer GPU key) likewise to the list kernel, which reads the lists'
 *    tables by the index arrays; local host <-> peer GPU: one cuMemcpyAsync
 *    per entry; local GPU <-> peer host: the pinned bounce buffer.  One
 *    stream and one event for the batch.
 *  - one classifying pass (with the bounds check) counts each kind, and the
 *    later passes run only over kinds the batch holds.
 * Notification: as put_notify's (queued once the batch and every older
 * operation landed); a counted one carries b = 1 in the NOTIFY message.
 */
#include "transport/intra/intra_int.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/base/batch.h"

#define INTRAB_IOV 1024 /* UIO_MAXIOV */
/* A batched get reads through remote holes up to this size between two
 * entries of one region (intrab_cma_build).  A pin round costs about 90 ns
 * on the 2-core VM, about what copying 1.5-2 KiB costs: with 1 KiB entries
 * bench/floor/cma_holes.c measured holes up to 1 KiB read through 1.1-2.3x faster
 * than one iovec per entry in every run, 1.5-2 KiB 0.8-1.7x (either side
 * of 1 by run), 4 KiB 0.6x. */
#define INTRAB_HOLE 1024

typedef struct intrab_op {
    void (*fini)(gw_request_t *r); /* the api layer's hook, run after ours */
    uint32_t nslot;
    int entered;
    uint32_t cur;                  /* host entries: the CMA cursor (entry, offset) */
    uint64_t off;
    int parts;                     /* parts in flight (piecewise CMA, GPU copies) */
    gw_status_t err;               /* their first error */
    uint8_t *used;                 /* per key: an entry of this batch uses it */
    int32_t *ldev;                 /* per local region: its GPU ordinal, -1 for host memory */
    intra_iface_t *ifc;
    gw_copy_desc_t *desc;          /* pinned descriptors of a kernel launch in flight, or NULL */
    uint64_t *ghost;               /* device index arrays (b->pdev): the bounds check's word as copied back
                                    * (pinned, in desc), all ones unless an entry is outside */
    size_t desc_cap;
    uint32_t nhost;                /* entries host <-> peer host (CMA) */
    uint32_t npeer;                /* entries local GPU <-> peer GPU (the kernel, else copy engine) */
    uint32_t nstage;               /* entries local GPU <-> peer host (bounce buffer) */
    uint32_t nhgpu;                /* entries local host <-> peer GPU (copy engine) */
    size_t host_bytes;             /* bytes of the nhost entries */
    size_t nkdesc;                 /* kernel descriptors the npeer entries make (GW_COPY_DESC_MAX_LEN each) */
    int shm;                       /* host entries by memcpy: every key's region is mapped here (shm_delta) */
    int nobridge;                  /* CMA gets: read no holes (one was not readable) */
    uint64_t moved;                /* bytes moved by the host parts (CMA, memcpy, ring), for a batch that failed */
    uint64_t gpu_bytes;            /* bytes of the entries the GPU copies move (never withdrawn) */
    intptr_t *shm_delta;           /* per key: local address - peer address of its mapping */
    int tabl;                      /* a list batch over region tables, all GPU: the table kernel */
    int split;                     /* ... but some key's entries cross allocations of its region */
    uint64_t *kdelta;              /* per key (tabl): its allocation as mapped here - its peer address */
    uint64_t *kbase;               /* pinned (tabl): the local regions' bases, then the keys' as mapped here */
    uint64_t *klo, *khi, *kmap;    /* per key: the last allocation resolved, [lo, hi) -> mapped base */
    rdesc_t rd[];                  /* per key of the batch: the peer slot entered */
} intrab_op_t;

/* 1 when b is a list batch over several regions or keys, unexpanded (batch.h). */
static inline int tabl_form(const gw_batch_t *b)
{
    return b->nlist && (b->nrkey != 1 || b->nlmem != 1);
}

/* Marks the keys the batch's entries use (an unexpanded batch: all). */
static void intrab_used(const gw_batch_t *b, intrab_op_t *op)
{
    if (b->nrkey == 1) {
        op->used[0] = b->n > 0 || gw_batch_unexpanded(b);
        return;
    }
    memset(op->used, gw_batch_unexpanded(b) ? 1 : 0, b->nrkey);
    for (uint32_t i = 0; i < b->n; i++)
        op->used[b->ent[i].rreg] = 1;
}

static void intrab_leave(intrab_op_t *op)
{
    if (!op->entered)
        return;
    for (uint32_t i = 0; i < op->nslot; i++)
        if (op->rd[i].s)
            atomic_fetch_sub(&((gw_intra_slot_t *)op->rd[i].s)->inflight, 1);
    op->entered = 0;
}

/* The GPU of an entry's local memory (-1: host), from the per-region table. */
static inline int ent_ldev(const intrab_op_t *op, const gw_batch_ent_t *en)
{
    return op->ldev[en->lreg];
}

/* Gives the op's pinned buffer back to the interface's free ones: kept
 * while fewer than INTRA_BDESC_KEEP are, and INTRA_BDESC_KEEP_BYTES in
 * all allow it (the smallest kept ones make room for a larger one); else
 * freed.  The largest buffer is always kept, as a lone spare. */
static void intrab_unpin(intrab_op_t *op)
{
    if (!op->desc)
        return;
    intra_iface_t *ifc = op->ifc;
    size_t cap = op->desc_cap;
    for (;;) {
        int nkept = 0, small = -1, empty = -1;
        size_t total = 0, largest = 0;
        for (int i = 0; i < INTRA_BDESC_KEEP; i++) {
            if (!ifc->bdesc[i]) {
                empty = empty < 0 ? i : empty;
                continue;
            }
            nkept++;
            total += ifc->bdesc_cap[i];
            largest = ifc->bdesc_cap[i] > largest ? ifc->bdesc_cap[i] : largest;
            if (small < 0 || ifc->bdesc_cap[i] < ifc->bdesc_cap[small])
                small = i;
        }
        if (empty >= 0 && (total + cap <= INTRA_BDESC_KEEP_BYTES || !nkept)) {
            ifc->bdesc[empty] = op->desc;
            ifc->bdesc_cap[empty] = cap;
            break;
        }
        if (small < 0 || ifc->bdesc_cap[small] >= cap || (cap <= largest && total + cap > INTRA_BDESC_KEEP_BYTES &&
                                                          empty >= 0)) {
            ifc->cu->cuMemFreeHost(op->desc); /* no room, and none kept is smaller */
            break;
        }
        ifc->cu->cuMemFreeHost(ifc->bdesc[small]); /* a smaller one makes room */
        ifc->bdesc[small] = NULL;
        ifc->bdesc_cap[small] = 0;
    }
    op->desc = NULL;
    op->desc_cap = 0;
}

static void intrab_fini(gw_request_t *r)
{
    intrab_op_t *op = intra_rq(r)->batch;
    intra_rq(r)->batch = NULL;
    void (*next)(gw_request_t *) = op ? op->fini : NULL;
    if (op) {
        intrab_leave(op);
        intrab_unpin(op); /* the launch is complete */
        gw_op_state_put(r->core, op);
    }
    if (next)
        next(r);
}

/* Counts n entries of one kind (peer memory GPU or not, local device or
 * -1) and their bytes; ndesc: the kernel descriptors they make. */
static inline void count_kind(intrab_op_t *op, int rgpu, int ldev, uint32_t n, uint64_t bytes, size_t ndesc)
{
    if (rgpu && ldev < 0) {
        op->nhgpu += n;
    } else if (rgpu) {
        op->npeer += n;
        op->nkdesc += ndesc;
    } else if (ldev >= 0) {
        op->nstage += n;
    } else {
        op->nhost += n;
        op->host_bytes += (size_t)bytes;
    }
}

/* Enters the slot of every key and checks every entry against it. */
static gw_status_t intrab_enter(intra_ep_t *e, const gw_batch_t *b, intrab_op_t *op)
{
    gw_core_t *c = e->super.iface->core;
    unsigned need = b->get ? GW_ACCESS_REMOTE_READ : GW_ACCESS_REMOTE_WRITE;
    op->tabl = 0;
    if (tabl_form(b)) {
        /* every key of the lists is entered (the kernel may map any): where
         * one is not reachable or was deregistered, entries instead, so that
         * only a key a selected entry names can fail the batch */
        int ok = 1;
        for (uint32_t k = 0; k < b->nrkey && ok; k++) {
            const gw_intra_rkey_t *ik = gw_intra_rkey_of(&b->rkey[k]);
            ok = ik->present && atomic_load(&e->peer_table[ik->slot].id) == ik->id;
        }
        if (!ok) {
            gw_batch_expand((gw_batch_t *)b);
            intrab_used(b, op);
        }
    }
    for (uint32_t k = 0; k < b->nrkey; k++) {
        const gw_rkey_t *rk = &b->rkey[k];
        if (!op->used[k]) /* a list's key none of the selected entries names */
            continue;
        const gw_intra_rkey_t *ik = gw_intra_rkey_of(rk); /* checked at gw_rkey_unpack (intra_rkey.c) */
        if (!ik->present) {
            intrab_leave(op);
            return gw_err(c, GW_ERR_UNSUPPORTED,
                          "intra: the remote region 0x%" PRIx64 " of the batch is not reachable through the "
                          "intra-host transport (its owner could not export it)", rk->addr);
        }
        uint32_t si = ik->slot;
        uint64_t id = ik->id;
        gw_intra_slot_t *s = &e->peer_table[si];
        if (!gw_intra_slot_hold(s, id)) {
            intrab_leave(op);
            return gw_err(c, GW_ERR_INVALID_KEY,
                          "gw_xfer_batch: the remote region 0x%" PRIx64 " (+%" PRIu64 ") was deregistered by its owner",
                          rk->addr, rk->len);
        }
        op->rd[k] = (rdesc_t){.gpu = s->kind != GW_INTRA_SLOT_HOST && s->kind != GW_INTRA_SLOT_SHM, .slot = si, .s = s, .id = id};
        op->entered = 1;
        if (!(s->access & need)) {
            intrab_leave(op);
            return gw_err(c, GW_ERR_ACCESS, "intra: the owner registered region 0x%" PRIx64 " without remote %s access",
                          s->addr, need == GW_ACCESS_REMOTE_READ ? "read" : "write");
        }
    }
    /* one pass: the owner's table has the last word on bounds, not the keys;
     * and each entry is counted by the way it moves, so that the later
     * passes run only over the kinds a batch holds (a pass over 4096
     * entries costs microseconds of the batch's time) */
    op->nhost = op->npeer = op->nstage = op->nhgpu = 0;
    op->host_bytes = 0;
    op->nkdesc = 0;
    if (tabl_form(b)) {
        /* lists over several regions: the keys' spans checked once each
         * (a computed list's key r holds blocks r * rcper ..), every entry
         * GPU to GPU; else by entry, which the pass below checks */
        int ok = op->ldev[0] >= 0;
        for (uint32_t k = 1; k < b->nlmem && ok; k++)
            ok = op->ldev[k] == op->ldev[0];
        for (uint32_t k = 0; k < b->nrkey && ok; k++) {
            const rdesc_t *r = &op->rd[k];
            uint64_t lo = b->rlo, len = b->rhi - b->rlo;
            if (b->rcbase) {
                uint64_t first = (uint64_t)k * b->rcper;
                uint64_t nb = first >= b->rcn ? 0 : GW_MIN((uint64_t)b->rcper, b->rcn - first);
                lo = b->rcbase[k];
                len = nb * b->clen;
            }
            ok = r->gpu && (!len || gw_range_inside(r->s->addr, r->s->len, lo, len));
        }
        if (ok) {
            op->tabl = 1;
            count_kind(op, 1, op->ldev[0], b->nlist, b->total,
                       (size_t)b->nlist + (size_t)(b->total / GW_COPY_DESC_MAX_LEN));
            return GW_OK;
        }
        gw_batch_expand((gw_batch_t *)b); /* host memory somewhere, or an entry outside: named below */
    }
    if (b->nrkey == 1 && b->nlmem == 1 && (b->n || gw_batch_unexpanded(b))) {
        /* one region each side (the paged form, most lists): the span of
         * the entries is checked once, and every entry is of one kind */
        const rdesc_t *r = &op->rd[0];
        if (gw_range_inside(r->s->addr, r->s->len, b->rlo, b->rhi - b->rlo)) {
            if (b->pdev && !(r->gpu && op->ldev[0] >= 0)) {
                intrab_leave(op);
                return gw_err(c, GW_ERR_UNSUPPORTED,
                              "gw_xfer_pages: index arrays in GPU memory, but the owner registered region 0x%" PRIx64
                              " as host memory (pages by entries would read the arrays on the host)", r->s->addr);
            }
            if (gw_batch_unexpanded(b) && !(r->gpu && op->ldev[0] >= 0))
                gw_batch_expand((gw_batch_t *)b); /* the owner's slot says host memory: CMA or staging, by entry */
            if (b->nlist) /* should the kernel take entries after all: as for entries */
                count_kind(op, 1, op->ldev[0], b->nlist, b->total,
                           (size_t)b->nlist + (size_t)(b->total / GW_COPY_DESC_MAX_LEN));
            else if (b->npages) /* a descriptor per page piece, should the kernel take entries after all */
                count_kind(op, 1, op->ldev[0], b->npages, b->total,
                           (size_t)b->npages * (size_t)((b->psize + GW_COPY_DESC_MAX_LEN - 1) / GW_COPY_DESC_MAX_LEN));
            else /* at most one descriptor more per entry than the bytes need */
                count_kind(op, r->gpu, op->ldev[0], b->n, b->total,
                           (size_t)b->n + (size_t)(b->total / GW_COPY_DESC_MAX_LEN));
            return GW_OK;
        }
        if (b->pdev) { /* (the arrays are not read here: the span of the pages that could be valid) */
            intrab_leave(op);
            return gw_err(c, GW_ERR_OUT_OF_BOUNDS,
                          "gw_xfer_pages: the pages the key covers [0x%" PRIx64 ", 0x%" PRIx64 ") reach outside the "
                          "region [0x%" PRIx64 ", +%" PRIu64 ") its owner registered", b->rlo, b->rhi, r->s->addr,
                          r->s->len);
        }
        /* some entry is outside: the pass below names it */
        gw_batch_expand((gw_batch_t *)b);
    }
    for (uint32_t i = 0; i < b->n; i++) {
        const gw_batch_ent_t *en = &b->ent[i];
        const rdesc_t *r = &op->rd[en->rreg];
        const gw_intra_slot_t *s = r->s;
        if (!gw_range_inside(s->addr, s->len, en->raddr, en->len)) {
            intrab_leave(op);
            return gw_err(c, GW_ERR_OUT_OF_BOUNDS,
                          "intra: batch entry %" PRIu32 " [0x%" PRIx64 ", +%" PRIu64 ") is outside the region [0x%" PRIx64
                          ", +%" PRIu64 ") its owner registered", i, en->raddr, en->len, s->addr, s->len);
        }
        count_kind(op, r->gpu, ent_ldev(op, en), 1, en->len,
                   (size_t)((en->len + GW_COPY_DESC_MAX_LEN - 1) / GW_COPY_DESC_MAX_LEN));
    }
    return GW_OK;
}

static inline int host_ent(const gw_batch_t *b, const intrab_op_t *op, const gw_batch_ent_t *en)
{
    return !op->rd[en->rreg].gpu && ent_ldev(op, en) < 0;
}

/* Host <-> peer host entries by memcpy through the peer's shared regions
 * mapped here (op->shm), from the op's cursor, until the end or `budget`
 * bytes moved; as intrab_cma.  Where every entry is a host one (the usual
 * case) the loop reads each descriptor once and calls memcpy, nothing else
 * per entry: at 256 x 1 KiB the per-entry checks of the general loop were
 * 7% of the initiator's samples against 43% in memcpy itself. */
static size_t intrab_shm(intra_ep_t *e, const gw_batch_t *b, intrab_op_t *op, size_t budget, int *fin)
{
    size_t moved = 0;
    const gw_batch_ent_t *ent = b->ent;
    uint32_t n = b->n, i = op->cur;
    if (op->nhost == n && i < n) {
        const intptr_t *dl = op->shm_delta;
        int get = b->get;
        for (; i < n && moved < budget; i++) {
            const gw_batch_ent_t *en = &ent[i];
            uint64_t skip = op->off; /* the rest of an entry cut by the last budget */
            size_t len = (size_t)GW_MIN(en->len - skip, (uint64_t)(budget - moved));
            uint8_t *l = (uint8_t *)(uintptr_t)(en->laddr + skip);
            uint8_t *r = (uint8_t *)(uintptr_t)(en->raddr + skip + (uint64_t)dl[en->rreg]);
            memcpy(get ? l : r, get ? r : l, len);
            moved += len;
            if (skip + len < en->len) { /* the budget ends inside this entry */
                op->off = skip + len;
                break;
            }
            op->off = 0;
        }
        op->cur = i;
        goto out;
    }
    for (; op->cur < b->n && moved < budget; op->cur++, op->off = 0) {
        const gw_batch_ent_t *en = &b->ent[op->cur];
        if (!host_ent(b, op, en))
            continue;
        size_t len = (size_t)GW_MIN(en->len - op->off, (uint64_t)(budget - moved));
        uint8_t *l = (uint8_t *)(uintptr_t)(en->laddr + op->off);
        uint8_t *r = (uint8_t *)(uintptr_t)(en->raddr + op->off + (uint64_t)op->shm_delta[en->rreg]);
        if (b->get)
            memcpy(l, r, len);
        else
            memcpy(r, l, len);
        moved += len;
        if (op->off + len < en->len) {
            op->off += len;
            break;
        }
    }
out:
    *fin = op->cur >= b->n;
    if (moved)
        e->n_shm++;
    return moved;
}

/* Where the bytes of a hole between two remote entries of a batched get go
 * (intrab_cma): nobody reads them, so every hole of every call may share it. */
static uint8_t intrab_sink[INTRAB_HOLE];

/* One system call's iovec arrays (intrab_cma_build). */
typedef struct intrab_iov {
    struct iovec l[INTRAB_IOV], r[INTRAB_IOV];
    int nl, nr;
    size_t want;    /* bytes the call moves, holes included */
    size_t holes;   /* of which hole bytes */
    uint32_t end;   /* the cursor after the call, should it move everything */
    uint64_t endoff;
} intrab_iov_t;

/* Builds the iovec arrays of one CMA call from the op's cursor, at most
 * `budget` bytes of entries.  The two sides are merged separately: the
 * kernel pins the pages of each remote iovec in a round of its own (mmap
 * lock, VMA lookup, page walk, unpin: about 0.1-0.4 us each, the larger
 * part of a 1 KiB entry's cost), while local iovecs cost next to nothing,
 * so an entry that continues the previous one's remote range joins its
 * remote iovec even where the local side jumps (a gather into one remote
 * range), and likewise locally.  A get also reads through a hole of at
 * most INTRAB_HOLE bytes between two entries of one remote region into
 * the sink (the owner granted read access to the whole region, the entries
 * being inside it; the hole's bytes are thrown away): one pin round for
 * both, for a copy of at most INTRAB_HOLE bytes more. */
static void intrab_cma_build(const gw_batch_t *b, const intrab_op_t *op, size_t budget, intrab_iov_t *v)
{
    int allh = op->nhost == b->n, bridge = b->get && !op->nobridge;
    uint64_t rend = 0, lend = 0;
    uint32_t rreg = UINT32_MAX, j = op->cur;
    uint64_t skip = op->off;
    v->nl = v->nr = 0;
    v->want = v->holes = 0;
    size_t ent_bytes = 0;
    for (; j < b->n && v->nr < INTRAB_IOV && v->nl + 2 <= INTRAB_IOV && ent_bytes < budget; j++, skip = 0) {
        const gw_batch_ent_t *en = &b->ent[j];
        if (!allh && !host_ent(b, op, en))
            continue;
        uint64_t len = en->len - skip;
        if (len > budget - ent_bytes)
            len = budget - ent_bytes;
        uint64_t la = en->laddr + skip, ra = en->raddr + skip;
        int hole = 0;
        if (v->nr && ra == rend) {
            v->r[v->nr - 1].iov_len += (size_t)len;
        } else if (bridge && v->nr && en->rreg == rreg && ra > rend && ra - rend <= INTRAB_HOLE) {
            size_t h = (size_t)(ra - rend);
            v->r[v->nr - 1].iov_len += h + (size_t)len;
            v->l[v->nl++] = (struct iovec){intrab_sink, h};
            v->holes += h;
            hole = 1;
        } else {
            v->r[v->nr++] = (struct iovec){(void *)(uintptr_t)ra, (size_t)len};
        }
        if (v->nl && !hole && la == lend)
            v->l[v->nl - 1].iov_len += (size_t)len;
        else
            v->l[v->nl++] = (struct iovec){(void *)(uintptr_t)la, (size_t)len};
        rend = ra + len;
        lend = la + len;
        rreg = en->rreg;
        ent_bytes += (size_t)len;
        if (skip + len < en->len) { /* the budget ends inside this entry */
            v->end = j;
            v->endoff = skip + len;
            v->want = ent_bytes + v->holes;
            return;
        }
    }
    v->end = j;
    v->endoff = 0;
    v->want = ent_bytes + v->holes;
}

/* Host <-> peer host entries by CMA from the op's cursor, up to INTRAB_IOV
 * iovecs a side per call, until the end or `budget` bytes moved.  Returns
 * the bytes moved; *fin when the cursor reached the end. */
static size_t intrab_cma(intra_ep_t *e, const gw_batch_t *b, intrab_op_t *op, size_t budget, gw_status_t *st,
                         int *fin)
{
    gw_core_t *c = e->super.iface->core;
    intrab_iov_t v;
    size_t moved = 0;
    *st = GW_OK;
    *fin = 0;
    if (op->shm)
        return intrab_shm(e, b, op, budget, fin);
    while (moved < budget) {
        intrab_cma_build(b, op, budget - moved, &v);
        if (!v.nr) {
            *fin = 1;
            return moved;
        }
        ssize_t got = b->get ? process_vm_readv(e->peer_pid, v.l, (unsigned long)v.nl, v.r, (unsigned long)v.nr, 0)
                             : process_vm_writev(e->peer_pid, v.l, (unsigned long)v.nl, v.r, (unsigned long)v.nr, 0);
        if (got <= 0) {
            if (got < 0 && errno == EINTR)
                continue;
            int err = got < 0 ? errno : 0;
            if (v.holes && err == EFAULT) { /* a hole not mapped in the peer: again without reading holes */
                op->nobridge = 1;
                continue;
            }
            /* the peer process is gone: what the endpoint will report too */
            *st = gw_err(c, err == ESRCH ? GW_ERR_CONN_RESET : GW_ERR_SYSTEM,
                         "intra: %s(pid=%d, %d+%d iovecs, %zu bytes) of a batch failed: %s",
                         b->get ? "process_vm_readv" : "process_vm_writev", (int)e->peer_pid, v.nl, v.nr, v.want,
                         err ? strerror(err) : "no progress");
            return moved;
        }
        e->n_cma++;
        if ((size_t)got == v.want) {
            moved += v.want - v.holes;
            if (v.holes)
                e->n_holes++;
            op->cur = v.end;
            op->off = v.endoff;
            continue;
        }
        if (v.holes) { /* stopped early (a hole not mapped?): the same range again without holes (a get: reading it twice is harmless) */
            op->nobridge = 1;
            continue;
        }
        moved += (size_t)got;
        /* advance the cursor by what moved (a partial transfer may stop inside an entry) */
        size_t left = (size_t)got;
        while (left && op->cur < b->n) {
            const gw_batch_ent_t *en = &b->ent[op->cur];
            if (!host_ent(b, op, en)) {
                op->cur++;
                continue;
            }
            uint64_t rest = en->len - op->off;
            if (left < rest) {
                op->off += left;
                break;
            }
            left -= (size_t)rest;
            op->cur++;
            op->off = 0;
        }
    }
    return moved;
}

/* The host part of a batch, piecewise from the progress engine (one
 * endpoint moves at most INTRA_CMA_BUDGET bytes per progress call). */
size_t intrab_cma_step(intra_ep_t *e, gw_request_t *req, size_t budget, gw_status_t *st, int *fin)
{
    intrab_op_t *op = intra_rq(req)->batch;
    size_t n = intrab_cma(e, req->batch, op, budget, st, fin);
    op->moved += n;
    return n;
}

void intrab_moved(gw_request_t *req, uint64_t n)
{
    intrab_op_t *op = intra_rq(req)->batch;
    if (op)
        op->moved += n;
}

size_t intrab_length(const gw_request_t *req)
{
    const intrab_op_t *op = intra_rq(req)->batch;
    return op ? (size_t)(op->moved + op->gpu_bytes) : 0;
}

/* gw_request_cancel() of a batch past its posting: its ring slots not
 * claimed and entries not posted (intra_ring_cancel); the host entries its
 * piecewise copy has not reached (the cursor jumps to the end: the next
 * step finds nothing and ends the part).  A GPU copy on its stream and a
 * slot the target claimed are let finish.  0: nothing withdrawn; 1: some,
 * and the batch ends GW_ERR_CANCELED with its last part; 2: all of it,
 * none had moved (the caller completes it). */
int intrab_cancel(intra_ep_t *e, gw_request_t *req)
{
    intrab_op_t *op = intra_rq(req)->batch;
    const gw_batch_t *b = req->batch;
    int withdrawn = 0;
    for (size_t i = 0; i < e->ncp; i++) {
        intra_cp_t *cp = &e->cps[i];
        if (cp->req != req)
            continue;
        if (cp->ring) {
            withdrawn |= intra_ring_cancel(e, cp);
        } else if (!cp->ev && cp->op == GW_OP_BATCH && op) {
            int rest = 0;
            for (uint32_t j = op->cur; j < b->n && !rest; j++)
                rest = host_ent(b, op, &b->ent[j]) && (j > op->cur || op->off < b->ent[j].len);
            op->cur = b->n;
            op->off = 0;
            if (rest) {
                if (op->err == GW_OK)
                    op->err = GW_ERR_CANCELED;
                withdrawn = 1;
            }
        }
    }
    if (!withdrawn || !op || op->moved || op->gpu_bytes)
        return withdrawn;
    /* nothing of it moved and nothing is in flight (no GPU part, no slot
     * the target claimed): its records go, and it is withdrawn whole */
    for (size_t i = 0; i < e->ncp; i++)
        if (e->cps[i].req == req && (e->cps[i].ev || (e->cps[i].ring && e->cps[i].rpend)))
            return 1;
    for (size_t i = 0; i < e->ncp;)
        if (e->cps[i].req == req)
            e->cps[i] = e->cps[--e->ncp];
        else
            i++;
    return 2;
}

/* A part of a batch (its host copies, its GPU copies) finished: 1 when it
 * was the last, with *st the first error. */
int intrab_part_done(gw_request_t *req, gw_status_t *st)
{
    intrab_op_t *op = intra_rq(req)->batch;
    if (!op)
        return 1;
    if (*st != GW_OK && op->err == GW_OK)
        op->err = *st;
    if (op->parts && --op->parts)
        return 0;
    const gw_batch_t *b = req->batch;
    if (op->err == GW_OK && op->ghost && *(volatile uint64_t *)op->ghost != UINT64_MAX) {
        /* the GPU's bounds check found an entry outside: the page kernel moved nothing */
        uint64_t w = *(volatile uint64_t *)op->ghost, i = w >> 1;
        int side = (int)(w & 1);
        op->err = gw_err(req->core, GW_ERR_INVALID,
                         "gw_xfer_pages: entry %" PRIu64 ": its %s page index (in GPU memory) is outside the %s "
                         "(valid pages %" PRIu32 " .. %" PRIu32 "); found by the bounds check on the GPU, nothing "
                         "moved", i, side ? "remote" : "local", side ? "region the key covers" : "local region",
                         b ? b->plim[2 * side] : 0, b ? b->plim[2 * side + 1] : 0);
        op->gpu_bytes = 0;
    }
    *st = op->err;
    return 1;
}

/* The segment of slot s holding remote address ra, or s->nseg. */
static inline uint32_t seg_index(const gw_intra_slot_t *s, uint64_t ra)
{
    uint32_t sg = 0;
    while (sg < s->nseg && !(ra >= s->seg[sg].base && ra < s->seg[sg].base + s->seg[sg].size))
        sg++;
    return sg;
}

/* 1 when every allocation of every peer GPU region the batch names is
 * imported for dev already (the steady state of a reused region): then the
 * import pass over the entries is not needed. */
static int intrab_imported(intra_ep_t *e, const gw_batch_t *b, const intrab_op_t *op, int dev)
{
    for (uint32_t k = 0; k < b->nrkey; k++) {
        const rdesc_t *r = &op->rd[k];
        if (!op->used[k] || !r->gpu)
            continue;
        for (uint32_t sg = 0; sg < r->s->nseg; sg++) {
            const intra_import_t *im = intra_import_find(e, r->slot, sg, dev);
            if (!im || im->id != r->id)
                return 0;
        }
    }
    return 1;
}

/* Imports every peer GPU allocation the batch touches.  GW_INPROGRESS: a
 * VMM fd was requested; try again once it comes. */
static gw_status_t intrab_import(intra_ep_t *e, const gw_batch_t *b, const intrab_op_t *op, int dev)
{
    gw_core_t *c = e->super.iface->core;
    uint32_t lreg = UINT32_MAX; /* the last segment imported: entries of a batch mostly share one */
    uint64_t lo = 0, hi = 0;
    if (gw_batch_unexpanded(b)) { /* unexpanded pages or lists: the allocations under their span */
        const rdesc_t *r = &op->rd[0];
        for (uint64_t ra = b->rlo; ra < b->rhi;) {
            uint32_t sg = seg_index(r->s, ra);
            CUdeviceptr base = 0;
            gw_status_t st = sg < r->s->nseg ? intra_import_seg(e, r->slot, r->s, r->id, sg, dev, &base)
                                             : gw_err(c, GW_ERR_OUT_OF_BOUNDS, "intra: remote address 0x%" PRIx64
                                                      " is in no allocation of the peer's region", ra);
            if (st != GW_OK)
                return st;
            ra = r->s->seg[sg].base + r->s->seg[sg].size;
        }
        return GW_OK;
    }
    for (uint32_t i = 0; i < b->n; i++) {
        const gw_batch_ent_t *en = &b->ent[i];
        const rdesc_t *r = &op->rd[en->rreg];
        if (!r->gpu)
            continue;
        if (en->rreg == lreg && en->raddr >= lo && en->raddr + en->len <= hi)
            continue;
        const gw_intra_slot_t *s = r->s;
        uint64_t ra = en->raddr, end = en->raddr + en->len;
        while (ra < end) {
            uint32_t sg = seg_index(s, ra);
            if (sg == s->nseg)
                return gw_err(c, GW_ERR_OUT_OF_BOUNDS,
                              "intra: remote address 0x%" PRIx64 " is in no allocation of the peer's region", ra);
            CUdeviceptr base = 0;
            gw_status_t st = intra_import_seg(e, r->slot, s, r->id, sg, dev, &base);
            if (st != GW_OK)
                return st;
            lreg = en->rreg;
            lo = s->seg[sg].base;
            hi = lo + s->seg[sg].size;
            ra = hi;
        }
    }
    return GW_OK;
}

/* A list batch over region tables (op->tabl): each key's allocation under
 * its entries imported, and what its peer addresses add to be mapped here
 * (op->kdelta); where a key's entries cross allocations of its region
 * (op->split: the batch goes by entries), all of them imported.
 * GW_INPROGRESS: a VMM fd was requested. */
static gw_status_t intrab_import_keys(intra_ep_t *e, const gw_batch_t *b, intrab_op_t *op, int dev)
{
    for (uint32_t k = 0; k < b->nrkey; k++) {
        const rdesc_t *r = &op->rd[k];
        const gw_intra_slot_t *s = r->s;
        uint64_t lo = b->rlo, hi = b->rhi;
        if (b->rcbase) {
            uint64_t first = (uint64_t)k * b->rcper;
            uint64_t nb = first >= b->rcn ? 0 : GW_MIN((uint64_t)b->rcper, b->rcn - first);
            lo = b->rcbase[k];
            hi = lo + nb * b->clen;
        }
        op->kdelta[k] = 0;
        if (hi <= lo)
            continue; /* no block of the list in this key */
        uint32_t sg = seg_index(s, lo);
        CUdeviceptr base = 0;
        gw_status_t st;
        if (sg < s->nseg && hi <= s->seg[sg].base + s->seg[sg].size) {
            st = intra_import_seg(e, r->slot, s, r->id, sg, dev, &base);
            if (st != GW_OK)
                return st;
            op->kdelta[k] = (uint64_t)base - s->seg[sg].base;
            continue;
        }
        op->split = 1;
        for (sg = 0; sg < s->nseg; sg++)
            if ((st = intra_import_seg(e, r->slot, s, r->id, sg, dev, &base)) != GW_OK)
                return st;
    }
    return GW_OK;
}

/* A list batch over region tables by the table kernel, one launch: the
 * local regions' bases and the keys' (as mapped here) into the pinned room
 * made for them (intrab_batch), a one-region side's table as the list
 * kernel reads it. */
static gw_status_t intrab_tables(intra_ep_t *e, const gw_batch_t *b, const intrab_op_t *op, int dev,
                                 CUstream stream)
{
    /* the index arrays: pinned copies (intrab_batch), or a prepared
     * selection's, in this GPU's memory where it has them there */
    gw_cuda_table_side_t ls = {.idx = b->lidx_dev ? (const uint32_t *)(uintptr_t)b->lidx_dev : b->lidx},
                         rs = {.idx = b->ridx_dev ? (const uint32_t *)(uintptr_t)b->ridx_dev : b->ridx};
    uint64_t *lb = op->kbase, *rb = op->kbase + b->nlmem;
    if (b->lcbase) {
        memcpy(lb, b->lcbase, b->nlmem * sizeof(*lb));
        ls.base = lb;
        ls.per = b->lcper;
    } else {
        ls.tab = b->ltab_dev ? (const void *)(uintptr_t)b->ltab_dev : (const void *)b->ltab;
    }
    if (b->rcbase) {
        for (uint32_t k = 0; k < b->nrkey; k++)
            rb[k] = b->rcbase[k] + op->kdelta[k];
        rs.base = rb;
        rs.per = b->rcper;
    } else {
        rs.tab = b->rtab_dev ? (const void *)(uintptr_t)b->rtab_dev : (const void *)b->rtab;
        rs.delta = op->kdelta[0];
    }
    char why[200];
    gw_status_t st = b->get ? gw_cuda_table_copy_launch(dev, stream, &rs, &ls, b->nlist, b->clen, b->lmaxlen, why,
                                                        sizeof(why))
                            : gw_cuda_table_copy_launch(dev, stream, &ls, &rs, b->nlist, b->clen, b->lmaxlen, why,
                                                        sizeof(why));
    return st == GW_OK ? GW_OK : gw_err(e->super.iface->core, st == GW_ERR_UNSUPPORTED ? GW_ERR_CUDA : st, "intra: %s", why);
}

/* Entries touching GPU memory: local GPU <-> peer GPU by the copy kernel
 * where it loads (else one copy-engine copy each), local host <-> peer GPU
 * by copy-engine copies, local GPU <-> peer host through the bounce buffer;
 * all on one stream.  One launch per INTRAB_KCHUNK descriptors: on an H100
 * each cuLaunchKernel cost the posting thread microseconds, and launching
 * every 512 descriptors, to overlap the build with the copy, made a
 * 4096-entry batch slower, not faster (measured on an H100).  *queued: copies were queued on *stream. */
#define INTRAB_KCHUNK 8192
/* The largest page the page kernel takes; larger pages of a paged batch
 * go by entries (descriptors of at most GW_COPY_DESC_MAX_LEN).  A build
 * may lower it (-DINTRAB_PAGE_KERNEL_MAX=65535: pages of 64 KiB and more
 * by entries) to compare the two paths. */
#ifndef INTRAB_PAGE_KERNEL_MAX
#define INTRAB_PAGE_KERNEL_MAX UINT64_MAX
#endif

/* A pinned buffer of at least cap bytes for the op's launch (the smallest
 * large enough of the interface's free ones, else a new one of cap rounded
 * up to a power of two, at least 64 KiB, so that it serves later batches
 * of other sizes), kept in op->desc until the launch completes.  A new
 * one is a cuMemHostAlloc (and its end a cuMemFreeHost), which batches in
 * flight together pay only until the interface keeps as many. */
static gw_status_t intrab_pinned(intra_ep_t *e, intrab_op_t *op, size_t cap, void **out)
{
    void *d = NULL;
    intrab_unpin(op); /* (a paged batch's index arrays, once it was expanded) */
    intra_iface_t *ifc = e->ifc;
    int best = -1;
    for (int i = 0; i < INTRA_BDESC_KEEP; i++)
        if (ifc->bdesc[i] && ifc->bdesc_cap[i] >= cap && (best < 0 || ifc->bdesc_cap[i] < ifc->bdesc_cap[best]))
            best = i;
    if (best >= 0) {
        d = ifc->bdesc[best];
        cap = ifc->bdesc_cap[best];
        ifc->bdesc[best] = NULL;
        ifc->bdesc_cap[best] = 0;
    } else {
        size_t want = (size_t)64 << 10;
        while (want < cap && want <= SIZE_MAX / 2)
            want *= 2;
        cap = want >= cap ? want : cap;
        CUresult cr = ifc->cu->cuMemHostAlloc(&d, cap, CU_MEMHOSTALLOC_PORTABLE);
        if (cr != CUDA_SUCCESS)
            return intra_cu_err(e->super.iface->core, "cuMemHostAlloc(batch copy descriptors)", cr);
    }
    op->desc = d;
    op->desc_cap = cap;
    *out = d;
    return GW_OK;
}

/* An unexpanded paged batch (GPU on both sides) by the page kernel, one
 * launch (its index arrays are in pinned memory already: op->desc, from
 * intrab_batch).  GW_ERR_UNSUPPORTED when the pages' span crosses
 * allocations of the peer's region (the caller expands the batch and goes
 * by entry). */
/* What a peer address of the batch's span [rlo, rhi) adds to be its
 * mapping here (*delta), when the span lies in one imported allocation of
 * the peer's region; GW_ERR_UNSUPPORTED when it crosses allocations. */
static gw_status_t intrab_span_delta(intra_ep_t *e, const gw_batch_t *b, const intrab_op_t *op, int dev,
                                     uint64_t *delta)
{
    const rdesc_t *r = &op->rd[0];
    const gw_intra_slot_t *s = r->s;
    uint32_t sg = seg_index(s, b->rlo);
    if (sg == s->nseg || b->rhi > s->seg[sg].base + s->seg[sg].size)
        return GW_ERR_UNSUPPORTED;
    CUdeviceptr base = 0;
    gw_status_t st = intra_import_seg(e, r->slot, s, r->id, sg, dev, &base);
    if (st != GW_OK)
        return st == GW_INPROGRESS ? gw_err(e->super.iface->core, GW_ERR_UNSUPPORTED,
                                            "intra: region mixes allocation kinds")
                                   : st;
    *delta = (uint64_t)base - s->seg[sg].base;
    return GW_OK;
}

/* The check of index arrays in GPU memory, by test hook (GW_TEST_PAGE_CHECK_FORM,
 * read once per process): "fused" (the default: one cooperative launch where
 * the device takes one, else "split"), "split" (the check kernel, then the
 * gated page kernel), "reset" (as split, with the word reset before and
 * copied back after each transfer: the form to compare against). */
enum { PCHECK_FUSED, PCHECK_SPLIT, PCHECK_RESET };
static int pcheck_form(void)
{
    static int form = -1;
    if (form < 0) {
        const char *h = gw_settings_test_hook("GW_TEST_PAGE_CHECK_FORM");
        form = h && !strcmp(h, "split") ? PCHECK_SPLIT : h && !strcmp(h, "reset") ? PCHECK_RESET : PCHECK_FUSED;
    }
    return form;
}

/* The generations of a bounds word before it is reset (copy_kernel.cu: 31
 * bits, counted down from all ones); GW_TEST_PAGE_GEN_WRAP lowers it so that
 * a test sees the reset. */
#define PCHECK_GENS 0x7ffffffeu
static uint32_t pcheck_gens(void)
{
    static uint32_t gens;
    if (!gens) {
        const char *h = gw_settings_test_hook("GW_TEST_PAGE_GEN_WRAP");
        unsigned long v = h ? strtoul(h, NULL, 10) : 0;
        gens = v >= 1 && v <= PCHECK_GENS ? (uint32_t)v : PCHECK_GENS;
    }
    return gens;
}

/* Transfers of at most this many entries check them in every block of one
 * plain launch (gw_page_rcheck) instead of behind the fused form's grid
 * barrier: on two H200s the barrier costs ~3 us per transfer, every block
 * reading 256 entries a side nothing measurable, 2,048 about as much as
 * the barrier (bench/device/check_forms.cu).  GW_TEST_PAGE_RCHECK_MAX moves it (0: never),
 * so that tests with few entries reach the fused form too. */
#define PCHECK_RCHECK_MAX 1024u
static uint32_t pcheck_rcheck_max(void)
{
    static long max = -1;
    if (max < 0) {
        const char *h = gw_settings_test_hook("GW_TEST_PAGE_RCHECK_MAX");
        max = h ? (long)strtoul(h, NULL, 10) : (long)PCHECK_RCHECK_MAX;
    }
    return (uint32_t)max;
}

/* Index arrays in GPU memory (b->pdev): the gate of the page launch.  The
 * stream's word (and barrier counter) in this GPU's memory, made and reset
 * to all ones on first use; each transfer takes the next generation, and
 * the word is reset again only when they run out, so that a transfer costs
 * no reset; the GPU writes the outcome into op->ghost (pinned), read at
 * completion (intrab_part_done).  With the "reset" form the word is reset
 * and copied back per transfer instead. */
static gw_status_t intrab_pages_check(intra_ep_t *e, const gw_batch_t *b, intrab_op_t *op, int dev, CUstream stream,
                                      gw_cuda_page_gate_t *gate)
{
    gw_core_t *c = e->super.iface->core;
    const gw_cuda_t *cu = e->ifc->cu;
    int form = pcheck_form();
    if (!cu->cuMemsetD32Async)
        return gw_err(c, GW_ERR_UNSUPPORTED, "gw_xfer_pages: index arrays in GPU memory need cuMemsetD32Async, "
                      "which the CUDA driver lacks");
    CUresult cr;
    if (!e->gword[dev]) {
        if ((cr = cu->cuMemAlloc(&e->gword[dev], 2 * sizeof(uint64_t))) != CUDA_SUCCESS) {
            e->gword[dev] = 0;
            return intra_cu_err(c, "cuMemAlloc(the page bounds check's word)", cr);
        }
        e->ggen[dev] = 0;
    }
    gw_status_t st = intrab_pinned(e, op, sizeof(uint64_t), (void **)&op->ghost);
    if (st != GW_OK)
        return st;
    *op->ghost = UINT64_MAX; /* (clear until the GPU writes the outcome) */
    uint32_t gen = e->ggen[dev] + 1;
    size_t reset = 0; /* 32-bit words to reset: the word, and the barrier counter the first time */
    if (e->ggen[dev] == 0)
        reset = 4;
    else if (gen > pcheck_gens() || form == PCHECK_RESET)
        reset = 2;
    if (reset) {
        if ((cr = cu->cuMemsetD32Async(e->gword[dev], 0xffffffffu, reset, stream)) != CUDA_SUCCESS)
            return intra_cu_err(c, "cuMemsetD32Async(the page bounds check's word)", cr);
        if (reset == 4)
            e->garrived[dev] = UINT64_MAX;
        gen = 1;
    }
    e->ggen[dev] = gen;
    memset(gate, 0, sizeof(*gate));
    gate->form = form == PCHECK_FUSED ? GW_CUDA_PAGE_GATE_FUSED : GW_CUDA_PAGE_GATE_SPLIT;
    gate->rcheck_max = pcheck_rcheck_max();
    gate->get = b->get;
    gate->lidx = b->lpage;
    gate->ridx = b->rpage;
    memcpy(gate->lim, b->plim, sizeof(gate->lim));
    gate->word = (uint64_t *)(uintptr_t)e->gword[dev];
    gate->bar = gate->word + 1;
    gate->arrived = &e->garrived[dev];
    /* the reset form copies the raw word back: generation 0's values are the outcome itself */
    gate->gbase = form == PCHECK_RESET ? 0 : (uint64_t)(0x7fffffffu - gen) << 33;
    gate->out = form == PCHECK_RESET ? NULL : op->ghost;
    return GW_OK;
}

static gw_status_t intrab_pages(intra_ep_t *e, const gw_batch_t *b, const intrab_op_t *op, int dev,
                                CUstream stream)
{
    uint64_t delta = 0;
    gw_status_t st = intrab_span_delta(e, b, op, dev, &delta);
    if (st != GW_OK)
        return st;
    uint32_t n = b->npages;
    /* pinned copies (intrab_batch), or a prepared list's: its copies in
     * this GPU's memory where it has them */
    const uint32_t *lp = b->lpage_dev ? (const uint32_t *)(uintptr_t)b->lpage_dev : b->lpage;
    const uint32_t *rp = b->rpage_dev ? (const uint32_t *)(uintptr_t)b->rpage_dev : b->rpage;
    /* the peer's page p at prbase + p * psize, as mapped here (the base may
     * lie below the allocation: only the pages' addresses need be inside) */
    uint64_t rbase = delta + b->prbase;
    char why[200];
    gw_cuda_page_gate_t gt, *gate = NULL;
    if (b->pdev) {
        if ((st = intrab_pages_check(e, b, (intrab_op_t *)op, dev, stream, &gt)) != GW_OK)
            return st;
        gate = &gt;
    }
    st = b->get ? gw_cuda_page_copy_launch(dev, stream, rp, lp, n, rbase, b->plbase, b->psize, gate, why, sizeof(why))
                : gw_cuda_page_copy_launch(dev, stream, lp, rp, n, b->plbase, rbase, b->psize, gate, why, sizeof(why));
    if (st == GW_OK && gate && !gate->out) { /* (the reset form) the word back to the host */
        CUresult cr = e->ifc->cu->cuMemcpyDtoHAsync(op->ghost, (CUdeviceptr)(uintptr_t)gate->word, sizeof(uint64_t),
                                                    stream);
        if (cr != CUDA_SUCCESS)
            return intra_cu_err(e->super.iface->core, "cuMemcpyDtoHAsync(the page bounds check's word)", cr);
    }
    return st == GW_OK ? GW_OK : gw_err(e->super.iface->core, st == GW_ERR_UNSUPPORTED ? GW_ERR_CUDA : st, "intra: %s", why);
}

/* An unexpanded list batch (one GPU region, one peer GPU key) by the list
 * kernel, one launch over the lists' pinned tables and the index arrays
 * (pinned copies: intrab_batch); GW_ERR_UNSUPPORTED when the remote list's
 * span crosses allocations of the peer's region. */
static gw_status_t intrab_lists(intra_ep_t *e, const gw_batch_t *b, const intrab_op_t *op, int dev, CUstream stream)
{
    uint64_t delta = 0;
    gw_status_t st = intrab_span_delta(e, b, op, dev, &delta);
    if (st != GW_OK)
        return st;
    char why[200];
    /* the tables in this GPU's memory where the lists have copies there */
    const void *lt = b->ltab_dev ? (const void *)(uintptr_t)b->ltab_dev : (const void *)b->ltab;
    const void *rt = b->rtab_dev ? (const void *)(uintptr_t)b->rtab_dev : (const void *)b->rtab;
    /* a prepared selection's indices likewise */
    const uint32_t *li = b->lidx_dev ? (const uint32_t *)(uintptr_t)b->lidx_dev : b->lidx;
    const uint32_t *ri = b->ridx_dev ? (const uint32_t *)(uintptr_t)b->ridx_dev : b->ridx;
    st = b->get ? gw_cuda_list_copy_launch(dev, stream, ri, li, rt, lt, b->nlist, delta, 0, b->lmaxlen, why,
                                           sizeof(why))
                : gw_cuda_list_copy_launch(dev, stream, li, ri, lt, rt, b->nlist, 0, delta, b->lmaxlen, why,
                                           sizeof(why));
    return st == GW_OK ? GW_OK : gw_err(e->super.iface->core, st == GW_ERR_UNSUPPORTED ? GW_ERR_CUDA : st, "intra: %s", why);
}

static gw_status_t intrab_gpu(intra_ep_t *e, const gw_batch_t *b, intrab_op_t *op, int dev, CUstream stream,
                              int own, int *queued)
{
    gw_core_t *c = e->super.iface->core;
    const gw_cuda_t *cu = e->ifc->cu;
    *queued = 0;
    char why[200] = "";
    size_t nk = op->nkdesc;
    /* the kernel's module is loaded in the primary context: a batch in
     * gpuwire's own one goes by the copy engine */
    /* a batch of one peer GPU entry goes by one copy-engine copy: on two
     * H200s a 4 KiB copy completed 8 us after its cuMemcpyAsync, 10.5-11.7
     * us after a one-descriptor kernel launch (bench/device/one_copy.cu) */
    int want = nk && (op->npeer > 1 || b->pdev); /* (device index arrays: the page kernel, whatever the count) */
    int kernel = !own && want && nk <= UINT32_MAX && gw_cuda_copy_kernel_ready(dev, why, sizeof(why)) == GW_OK;
    if (want && !kernel && !own && !e->ifc->bkernel[0]) {
        snprintf(e->ifc->bkernel, sizeof(e->ifc->bkernel), "copy engine per entry (no kernel: %.140s)", why);
        gw_log(GW_LOG_WARN, "intra: GPU entries of batches move by one copy-engine copy each: %s", why);
    }
    if (gw_batch_unexpanded(b)) {
        /* list entries of 64 KiB and more go by entries and the descriptor
         * kernel (the list kernel does not cut entries); pages of any size
         * (up to INTRAB_PAGE_KERNEL_MAX) go to the page kernel, which cuts
         * them in 64 KiB pieces itself */
        uint64_t most = b->npages ? b->psize : b->lmaxlen;
        /* (over region tables any length: the kernel cuts entries itself,
         * and entries would cost the host a descriptor per piece) */
        gw_status_t st = !kernel || (op->tabl && (op->split || !op->kbase)) ? GW_ERR_UNSUPPORTED
                         : op->tabl                                         ? intrab_tables(e, b, op, dev, stream)
                         : b->npages && most > INTRAB_PAGE_KERNEL_MAX       ? GW_ERR_UNSUPPORTED
                         : b->npages                                        ? intrab_pages(e, b, op, dev, stream)
                         : most >= GW_COPY_DESC_MAX_LEN                     ? GW_ERR_UNSUPPORTED
                                                                            : intrab_lists(e, b, op, dev, stream);
        if (st == GW_OK) {
            snprintf(e->ifc->bkernel, sizeof(e->ifc->bkernel), "copy kernel");
            e->n_kernel++;
            *queued = 1;
            return GW_OK;
        }
        if (st != GW_ERR_UNSUPPORTED)
            return st;
        if (b->pdev) /* entries would read the arrays on the host */
            return gw_err(c, GW_ERR_UNSUPPORTED, "gw_xfer_pages: index arrays in GPU memory need the page kernel, "
                          "but %s", !kernel ? (own ? "the copy runs in gpuwire's own context" : why)
                          : b->psize > INTRAB_PAGE_KERNEL_MAX ? "the pages are larger than it takes"
                          : "the pages the key covers span several of the peer's allocations");
        gw_batch_expand((gw_batch_t *)b); /* no kernel, large pages, or a span over several allocations */
    }
    if (kernel) {
        gw_copy_desc_t *d = NULL;
        gw_status_t pst = intrab_pinned(e, op, nk * sizeof(*d), (void **)&d);
        if (pst != GW_OK)
            return pst;
        size_t k = 0, launched = 0;
        /* per key, the last allocation resolved (klo, khi -> kmap): entries
         * hopping between keys look each up once, not per entry (a lookup
         * walks the imports: with 160 keys that was most of the host's work) */
        memset(op->khi, 0, b->nrkey * sizeof(*op->khi));
        for (uint32_t i = 0; i < b->n; i++) {
            const gw_batch_ent_t *en = &b->ent[i];
            const rdesc_t *r = &op->rd[en->rreg];
            if (!r->gpu || ent_ldev(op, en) < 0)
                continue;
            uint64_t ra = en->raddr, left = en->len, la = en->laddr;
            uint32_t kk = en->rreg;
            while (left) {
                if (!(ra >= op->klo[kk] && ra < op->khi[kk])) {
                    const gw_intra_slot_t *s = r->s;
                    uint32_t sg = seg_index(s, ra);
                    CUdeviceptr mb = 0;
                    gw_status_t st = sg < s->nseg ? intra_import_seg(e, r->slot, s, r->id, sg, dev, &mb)
                                                  : GW_ERR_OUT_OF_BOUNDS;
                    if (st != GW_OK) {
                        if (launched)
                            *queued = 1; /* the launched chunks still run: the caller waits for them */
                        return st == GW_INPROGRESS ? gw_err(c, GW_ERR_UNSUPPORTED, "intra: region mixes allocation kinds")
                                                   : st;
                    }
                    op->klo[kk] = s->seg[sg].base;
                    op->khi[kk] = op->klo[kk] + s->seg[sg].size;
                    op->kmap[kk] = (uint64_t)mb;
                }
                uint64_t clo = op->klo[kk], chi = op->khi[kk];
                uint64_t n = GW_MIN(GW_MIN(left, chi - ra), GW_COPY_DESC_MAX_LEN);
                uint64_t rp = op->kmap[kk] + (ra - clo);
                d[k++] = (gw_copy_desc_t){b->get ? rp : la, b->get ? la : rp, n};
                ra += n;
                la += n;
                left -= n;
                if (k - launched == INTRAB_KCHUNK) {
                    gw_status_t st = gw_cuda_copy_kernel_launch(dev, stream, d + launched, INTRAB_KCHUNK, why, sizeof(why));
                    if (st != GW_OK) {
                        *queued = launched > 0;
                        return gw_err(c, st, "intra: %s", why);
                    }
                    launched = k;
                }
            }
        }
        if (k > launched) {
            gw_status_t st = gw_cuda_copy_kernel_launch(dev, stream, d + launched, (uint32_t)(k - launched), why,
                                                        sizeof(why));
            if (st != GW_OK) {
                *queued = launched > 0;
                return gw_err(c, st, "intra: %s", why);
            }
        }
        snprintf(e->ifc->bkernel, sizeof(e->ifc->bkernel), "copy kernel");
        e->n_kernel++;
        *queued = 1;
    }
    if (!op->nstage && !op->nhgpu && (kernel || !op->npeer))
        return GW_OK; /* every GPU entry is in the launches */
    for (uint32_t i = 0; i < b->n; i++) {
        const gw_batch_ent_t *en = &b->ent[i];
        const rdesc_t *r = &op->rd[en->rreg];
        int ldev = ent_ldev(op, en);
        if (kernel && r->gpu && ldev >= 0)
            continue; /* in the launch */
        if (!r->gpu) {
            if (ldev >= 0) {
                gw_status_t st = intra_staged_host(e, !b->get, (void *)(uintptr_t)en->laddr, ldev, en->raddr, en->len);
                if (st != GW_OK)
                    return st;
            }
            continue;
        }
        const gw_intra_slot_t *s = r->s;
        uint64_t ra = en->raddr, left = en->len;
        CUdeviceptr lp = (CUdeviceptr)en->laddr;
        while (left) {
            uint32_t sg = seg_index(s, ra);
            CUdeviceptr base = 0;
            gw_status_t st = sg < s->nseg ? intra_import_seg(e, r->slot, s, r->id, sg, dev, &base) : GW_ERR_OUT_OF_BOUNDS;
            if (st != GW_OK)
                return st == GW_INPROGRESS ? gw_err(c, GW_ERR_UNSUPPORTED, "intra: region mixes allocation kinds") : st;
            uint64_t n = GW_MIN(left, s->seg[sg].base + s->seg[sg].size - ra);
            CUdeviceptr rp = base + (ra - s->seg[sg].base);
            CUresult cr = cu->cuMemcpyAsync(b->get ? lp : rp, b->get ? rp : lp, (size_t)n, stream);
            if (cr != CUDA_SUCCESS)
                return intra_cu_err(c, "cuMemcpyAsync(batch entry to/from peer GPU memory)", cr);
            *queued = 1;
            ra += n;
            lp += n;
            left -= n;
        }
    }
    return GW_OK;
}

void intrab_issue(intra_ep_t *e, gw_request_t *req)
{
    gw_core_t *c = e->super.iface->core;
    const gw_batch_t *b = req->batch;
    intrab_op_t *op = intra_rq(req)->batch;
    gw_status_t st = intrab_enter(e, b, op);
    if (st != GW_OK) {
        intra_rma_done(e, req, st);
        return;
    }
    op->gpu_bytes = b->total - op->host_bytes;
    /* host entries into regions their owner allocated (shared memory): by
     * memcpy when every key's region is one and mapped here */
    op->shm = 0;
    if (op->nhost) {
        int all = 1;
        for (uint32_t k = 0; k < b->nrkey && all; k++)
            all = !op->used[k] || (!op->rd[k].gpu && op->rd[k].s->kind == GW_INTRA_SLOT_SHM);
        for (uint32_t k = 0; k < b->nrkey && all; k++) {
            if (!op->used[k])
                continue;
            /* not mapped yet (its fd was asked for: GW_INPROGRESS) or not
             * mappable: this batch goes by CMA, which reaches any host region */
            all = intra_shm_delta(e, &op->rd[k], &op->shm_delta[k]) == GW_OK;
            if (e->failed) /* asking for the fd failed the endpoint, and with it this request */
                return;
        }
        op->shm = all;
        st = GW_OK;
    }
    int gpu = 0, dev = -1, own = 0;
    for (uint32_t k = 0; k < b->nlmem; k++)
        if (b->lmem[k]->type == GW_MEM_CUDA) {
            gpu = 1;
            if (b->lmem[k]->cuda_device >= 0)
                dev = b->lmem[k]->cuda_device; /* the local GPU's stream, as intra_copy_start picks it */
        }
    /* else the peer's GPU by its bus id (looked up only then) */
    for (uint32_t k = 0; k < b->nrkey; k++)
        if (op->used[k] && op->rd[k].gpu) {
            gpu = 1;
            if (dev >= 0)
                break;
            dev = intra_dev_by_pci(op->rd[k].s->pci_bus_id);
        }
    if (dev < 0)
        dev = 0;
    CUstream stream = NULL;
    if (gpu) {
        if (!e->ifc->cu) {
            intrab_leave(op);
            intra_rma_done(e, req, gw_err(c, GW_ERR_UNSUPPORTED,
                                    "intra: the batch touches GPU memory but CUDA is unavailable in this process (%s)",
                                    e->ifc->cuda_why));
            return;
        }
        /* gpuwire's own context when every GPU entry is local VMM memory
         * <-> peer VMM memory (GPUWIRE_CUDA_COPY_CONTEXT=own) */
        const gw_mem_t *lg = NULL; /* a local GPU region, one not VMM-mapped if any is */
        for (uint32_t k = 0; k < b->nlmem; k++)
            if (b->lmem[k]->type == GW_MEM_CUDA && (!lg || (lg->cuda_vmm && !b->lmem[k]->cuda_vmm)))
                lg = b->lmem[k];
        own = e->own_ctx && !op->nstage && !op->nhgpu && lg;
        for (uint32_t k = 0; k < b->nrkey && own; k++)
            if (op->used[k] && op->rd[k].gpu)
                own = intra_own_copy(e, lg, op->rd[k].s);
        st = intra_ep_stream(e, dev, own, &stream);
        if (st == GW_OK && op->tabl)
            st = intrab_import_keys(e, b, op, dev);
        else if (st == GW_OK && !intrab_imported(e, b, op, dev))
            st = intrab_import(e, b, op, dev);
        if (st == GW_INPROGRESS) { /* a VMM fd is on its way: nothing moved yet */
            intrab_leave(op);
            gw_list_push_back(&e->waiting, &req->tl_link);
            return;
        }
        if (st != GW_OK) {
            intra_rma_done(e, req, st);
            return;
        }
    }
    /* small host entries into registered memory of a polling target: its
     * progress engine copies them out of the ring (intra_ring.c), which
     * then owns the whole batch; else they go on below by CMA */
    if (op->nhost == b->n && !op->shm && !gpu && !b->get && intra_ring_post(e, req)) {
        /* the target checks every entry itself when it copies: the slots
         * are not held meanwhile (its gw_mem_dereg must not wait on its own
         * progress); the ring's CMA fallbacks enter them again */
        intrab_leave(op);
        op->parts++;
        op->nhost = 0;
    }
    /* host entries: at once when small, else piecewise from progress (posting never blocks for long) */
    int fin = 1;
    if (!op->nhost)
        st = GW_OK; /* nothing for CMA */
    else if (op->host_bytes <= (op->shm ? INTRA_SHM_SYNC_MAX : INTRA_CMA_SYNC_MAX)) /* as a single put's */
        op->moved += intrab_cma(e, b, op, SIZE_MAX, &st, &fin);
    else
        fin = 0;
    int queued = 0;
    CUcontext saved = NULL;
    int entered = 0;
    if (st == GW_OK && gpu && own) {
        char why[256];
        if (!gw_cuda_own_ctx_enter(dev, &saved, why, sizeof(why)))
            st = gw_err(c, GW_ERR_CUDA, "intra: %s", why);
        else
            entered = 1;
    }
    if (st == GW_OK && gpu)
        st = intrab_gpu(e, b, op, dev, stream, own, &queued);
    if (st == GW_OK && !fin) {
        intra_cp_t rec = {.ev = NULL, .req = req, .slot = NULL, .op = GW_OP_BATCH};
        st = intra_cp_push(e, &rec);
        if (st == GW_OK) {
            op->parts++;
            gw_core_signal(c);
        }
    }
    if (queued) { /* one event for the batch's copies (also after an error: they may still run) */
        const gw_cuda_t *cu = e->ifc->cu;
        CUevent ev = NULL;
        int evk = intra_ev_key(dev, own);
        CUresult cr = intra_ev_get(e, evk, &ev);
        if (cr == CUDA_SUCCESS)
            cr = cu->cuEventRecord(ev, stream);
        if (entered) {
            gw_cuda_ctx_leave(saved);
            e->n_own++;
        }
        intra_cp_t rec = {.ev = ev, .evk = evk, .req = req, .slot = NULL, .op = GW_OP_BATCH};
        if (cr != CUDA_SUCCESS || st != GW_OK || intra_cp_push(e, &rec) != GW_OK) {
            cu->cuStreamSynchronize(stream);
            if (ev && cr == CUDA_SUCCESS)
                intra_ev_put(e, ev, evk);
            else if (ev)
                cu->cuEventDestroy(ev);
            if (st == GW_OK)
                st = cr != CUDA_SUCCESS ? intra_cu_err(c, "cuEventCreate/cuEventRecord", cr) : GW_ERR_NOMEM;
            intra_rma_done(e, req, st);
            return;
        }
        op->parts++;
        e->n_cuda++;
        return;
    }
    if (entered)
        gw_cuda_ctx_leave(saved);
    if (op->parts) { /* the piecewise CMA part finishes it */
        if (st != GW_OK && op->err == GW_OK)
            op->err = st;
        return;
    }
    intra_rma_done(e, req, st); /* the api hook releases the slots */
}

/* A paged batch whose index arrays are in the local GPU's memory (b->pdev)
 * at posting: nothing to copy; where the caller named the stream the arrays
 * are ready on, the transport's stream waits for what is queued there now
 * (an event recorded on it).  Refused without CUDA. */
static gw_status_t intrab_dev_index(intra_ep_t *e, gw_request_t *req)
{
    const gw_batch_t *b = req->batch;
    gw_core_t *c = e->super.iface->core;
    if (!e->ifc->cu)
        return gw_err(c, GW_ERR_UNSUPPORTED, "gw_xfer_pages: index arrays in GPU memory, but CUDA is unavailable in "
                      "this process (%s)", e->ifc->cuda_why);
    if (e->own_ctx)
        return gw_err(c, GW_ERR_UNSUPPORTED, "gw_xfer_pages: index arrays in GPU memory need the page kernel, which "
                      "does not run in gpuwire's own context (GPUWIRE_CUDA_COPY_CONTEXT=own)");
    if (!b->pstream)
        return GW_OK;
    int dev = b->lmem[0]->cuda_device;
    CUstream stream = NULL;
    gw_status_t st = intra_ep_stream(e, dev, 0, &stream);
    if (st != GW_OK)
        return st;
    const gw_cuda_t *cu = e->ifc->cu;
    int evk = intra_ev_key(dev, 0);
    CUevent ev = NULL;
    CUresult cr = intra_ev_get(e, evk, &ev);
    if (cr == CUDA_SUCCESS)
        cr = cu->cuEventRecord(ev, (CUstream)b->pstream);
    if (cr == CUDA_SUCCESS)
        cr = cu->cuStreamWaitEvent(stream, ev, 0);
    if (ev) /* (the wait holds the record it saw: the event may serve again at once) */
        intra_ev_put(e, ev, evk);
    if (cr != CUDA_SUCCESS)
        return intra_cu_err(c, "cuEventRecord/cuStreamWaitEvent(the stream the index arrays are ready on)", cr);
    return GW_OK;
}

gw_status_t intrab_batch(gw_tl_ep_t *tep, gw_request_t *req)
{
    intra_ep_t *e = to_ep(tep);
    const gw_batch_t *b = req->batch;
    size_t nk = b->nrkey ? b->nrkey : 1, nl = b->nlmem ? b->nlmem : 1;
    intrab_op_t *op = gw_op_state_get(e->super.iface->core,
                                      sizeof(*op) + nk * (sizeof(rdesc_t) + sizeof(intptr_t) + 4 * sizeof(uint64_t)) +
                                          nl * sizeof(int32_t) + nk);
    if (!op)
        return gw_err(e->super.iface->core, GW_ERR_NOMEM, "intra: out of memory for a batch");
    op->nslot = b->nrkey;
    op->ifc = e->ifc;
    op->shm_delta = (intptr_t *)&op->rd[nk];
    op->kdelta = (uint64_t *)&op->shm_delta[nk];
    op->klo = op->kdelta + nk;
    op->khi = op->klo + nk;
    op->kmap = op->khi + nk;
    op->ldev = (int32_t *)&op->kmap[nk];
    for (uint32_t k = 0; k < b->nlmem; k++)
        op->ldev[k] = b->lmem[k] && b->lmem[k]->type == GW_MEM_CUDA ? b->lmem[k]->cuda_device : -1;
    op->used = (uint8_t *)&op->ldev[nl];
    intrab_used(b, op);
    op->fini = req->fini;
    req->fini = intrab_fini;
    intra_rq(req)->batch = op;
    if (b->pdev) {
        gw_status_t st = intrab_dev_index(e, req);
        if (st != GW_OK)
            return st; /* (refused: the api layer runs intrab_fini) */
    } else if (gw_batch_unexpanded(b) && !(b->npages && b->pkept)) {
        /* the caller's index arrays are ours only during this call: into
         * pinned memory (a prepared page list's or selection's are pinned
         * already: ikept) */
        gw_batch_t *pb = req->batch;
        const uint32_t **la = b->npages ? &pb->lpage : &pb->lidx, **ra = b->npages ? &pb->rpage : &pb->ridx;
        uint32_t n = b->npages ? b->npages : b->nlist;
        size_t arrays = b->ikept ? 0 : (size_t)(*la != NULL) + (*ra != NULL);
        /* over region tables: room for the regions' bases first (the kernel reads them there) */
        size_t nbase = tabl_form(b) ? (size_t)b->nlmem + b->nrkey : 0;
        uint32_t *ix = NULL;
        if (!arrays && !nbase) {
            /* both NULL: nothing to copy */
        } else if (!e->ifc->cu ||
                   intrab_pinned(e, op, nbase * sizeof(uint64_t) + arrays * n * sizeof(uint32_t), (void **)&ix) != GW_OK) {
            /* (no CUDA, no pinned memory: by entry, which fails or copes later) */
            gw_status_t st = gw_batch_icheck(e->super.iface->core, pb, NULL, NULL);
            if (st != GW_OK)
                return st; /* (refused: the api layer runs intrab_fini) */
            gw_batch_expand(pb);
            intrab_used(pb, op);
        } else {
            op->kbase = nbase ? (uint64_t *)ix : NULL;
            ix = (uint32_t *)((uint64_t *)ix + nbase);
            uint32_t *lc = *la && arrays ? ix : NULL, *rc = *ra && arrays ? ix + (lc ? n : 0) : NULL;
            if (b->ichk) { /* checked in the copy (batch.h) */
                gw_status_t st = gw_batch_icheck(e->super.iface->core, pb, lc, rc);
                if (st != GW_OK)
                    return st;
            } else {
                if (lc) {
                    memcpy(lc, *la, n * sizeof(uint32_t));
                    *la = lc;
                }
                if (rc) {
                    memcpy(rc, *ra, n * sizeof(uint32_t));
                    *ra = rc;
                }
            }
        }
    }
    intra_rq(req)->slot = NULL;
    if (!e->ready) {
        gw_list_push_back(&e->waiting, &req->tl_link);
        return GW_OK;
    }
    intrab_issue(e, req);
    return GW_OK;
}
