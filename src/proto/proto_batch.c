/* SPDX-License-Identifier: Apache-2.0 */
/* proto_batch.c - batches expanded into the transport's single puts and
 * gets (protocol layer; proto.h says when).
 *
 * One state record per expanded batch ("bop") counts the entry requests
 * still moving.  The batch request itself stays outstanding on the endpoint
 * (so flushes and later notifications wait for it) and completes when the
 * last entry request has: each entry request's completion hook (its fini)
 * counts down.  A failed endpoint fails the batch request and its entries
 * in posting order; the batch's memory (its entries, key copies and list
 * counts) is then released only once the last entry request let go of it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "proto/proto.h"

typedef struct proto_bop {
    gw_request_t *parent;          /* the batch request; NULL once it completed */
    gw_ep_base_t *base;
    gw_core_t *core;
    gw_batch_t *batch;             /* kept until the last entry request completes */
    void (*fini)(gw_request_t *r); /* the api layer's hook of the batch request, run last */
    uint32_t live;                 /* entry requests posted and not yet completed */
    uint8_t posting;               /* gw_proto_batch_submit is still posting */
    uint8_t deferred;              /* the notification goes through the base's notify_out */
    gw_status_t err;               /* first error of an entry */
    uint64_t moved;                /* bytes the completed entries moved (a failed one: what it says it moved) */
    uint64_t err_laddr, err_raddr, err_len;
    uint32_t err_n;                /* entries of the failed request (more than 1: a list) */
    gw_batch_t list;               /* the entries posted as one list through rma_iov (no notification) */
    char why[256];
} proto_bop_t;

gw_status_t gw_proto_batch_route(const gw_tl_caps_t *caps, const gw_batch_t *b, int expand, int notify_out,
                                 gw_proto_route_t *route, const char **lack)
{
    gw_proto_route_t split = expand == GW_PROTO_EXPAND ? GW_PROTO_EXPAND : GW_PROTO_IOV;
    int gpu = b->lgpu || b->rgpu;
    int native = (caps->batch & GW_TL_BATCH_NATIVE) && (!gpu || (caps->batch & GW_TL_BATCH_GPU)) &&
                 (b->notify != GW_NOTIFY_COUNTED || (caps->batch & GW_TL_BATCH_COUNTED));
    *lack = NULL;
    if (native && !expand) {
        *route = GW_PROTO_NATIVE;
        return GW_OK;
    }
    /* expanded: the transport's single operations must take every entry */
    if (gpu && !(caps->mem_kinds & GW_TL_MEM_CUDA))
        *lack = "GPU memory";
    else if (b->notify == GW_NOTIFY_COUNTED && !notify_out)
        *lack = "counted notifications";
    else if (b->notify == GW_NOTIFY_ORDERED && !notify_out && !gw_batch_unexpanded(b) && b->n == 0)
        *lack = "notifications without data";
    if (*lack && native) { /* asked to expand what only the transport can carry: it does */
        *lack = NULL;
        *route = GW_PROTO_NATIVE;
        return GW_OK;
    }
    if (*lack)
        return GW_ERR_UNSUPPORTED;
    *route = split;
    return GW_OK;
}

/* The batch request's memory goes back to the api layer (its hook reads
 * only r->batch). */
static void bop_release_batch(proto_bop_t *bop)
{
    if (bop->fini) {
        gw_request_t tmp;
        memset(&tmp, 0, sizeof(tmp));
        tmp.batch = bop->batch;
        bop->fini(&tmp);
        bop->fini = NULL;
    }
}

/* Every entry request completed (and posting ended): complete the batch
 * request, or, when it completed already, let go of the batch. */
static void bop_finish(proto_bop_t *bop)
{
    gw_request_t *req = bop->parent;
    if (!req) {
        bop_release_batch(bop);
        gw_op_state_put(bop->core, bop);
        return;
    }
    gw_status_t st = bop->err;
    if (st == GW_OK && gw_ep_failed(bop->base))
        st = bop->base->error;
    if (bop->err != GW_OK && bop->err_n > 1)
        gw_err(bop->core, st, "batch %s (%u entries, %llu bytes): the list of its first %u entries (from local "
               "0x%llx, remote 0x%llx; %llu bytes) failed: %s", bop->batch->get ? "get" : "put", bop->batch->n,
               (unsigned long long)bop->batch->total, bop->err_n, (unsigned long long)bop->err_laddr,
               (unsigned long long)bop->err_raddr, (unsigned long long)bop->err_len, bop->why);
    else if (bop->err != GW_OK)
        gw_err(bop->core, st, "batch %s (%u entries, %llu bytes): the entry at local 0x%llx, remote 0x%llx, "
               "%llu bytes failed: %s", bop->batch->get ? "get" : "put", bop->batch->n,
               (unsigned long long)bop->batch->total, (unsigned long long)bop->err_laddr,
               (unsigned long long)bop->err_raddr, (unsigned long long)bop->err_len, bop->why);
    req->length = st == GW_OK ? (size_t)bop->batch->total : (size_t)bop->moved;
    /* (a deferred one that succeeded is held by the base until its turn,
     * then its notification goes out; its hook, below, frees bop) */
    gw_ep_op_done(bop->base, req, st);
}

/* The batch request's hook: it completed (normally, or failed by the
 * endpoint while entries still move). */
static void bop_parent_fini(gw_request_t *r)
{
    proto_bop_t *bop = r->owner;
    r->owner = NULL;
    r->batch = NULL;
    bop->parent = NULL;
    if (!bop->live && !bop->posting) {
        bop_release_batch(bop);
        gw_op_state_put(bop->core, bop);
    }
}

/* An entry request's hook. */
static void bop_child_fini(gw_request_t *r)
{
    proto_bop_t *bop = r->owner;
    r->owner = NULL;
    bop->moved += r->status == GW_OK ? r->len : r->length;
    if (r->status != GW_OK && bop->err == GW_OK) {
        bop->err = r->status;
        bop->err_laddr = (uint64_t)(uintptr_t)r->buf;
        bop->err_raddr = r->raddr;
        bop->err_len = r->len;
        bop->err_n = r->op == GW_OP_BATCH ? bop->list.n : 1;
        int fresh = bop->core->err_status == r->status && bop->core->errbuf[0];
        snprintf(bop->why, sizeof(bop->why), "%.*s", (int)sizeof(bop->why) - 1,
                 fresh ? bop->core->errbuf : gw_status_str(r->status));
    }
    if (--bop->live == 0 && !bop->posting)
        bop_finish(bop);
}

/* Hands a child request of the batch (an entry's or a list's) to the
 * transport through `post` (submit or rma_iov); GW_OK or the transport's
 * refusal, the request then released and nothing posted. */
static gw_status_t post_child(gw_tl_ep_t *tl, proto_bop_t *bop, gw_request_t *r,
                              gw_status_t (*post)(gw_tl_ep_t *, gw_request_t *))
{
    r->owner = bop;
    r->fini = bop_child_fini;
    r->flags |= GW_REQF_USER; /* held while posting: a completion inside post() must not recycle it */
    gw_ep_op_start(bop->base, r);
    bop->live++;
    gw_status_t st = post(tl, r);
    if (st != GW_OK) {
        bop->live--;
        gw_ep_op_unstart(bop->base, r);
        r->fini = NULL;
        r->owner = NULL;
        r->batch = NULL;
        r->status = st;
        r->flags = 0;
        gw_req_release(r);
        return st;
    }
    r->flags &= (uint8_t)~GW_REQF_USER;
    if (r->status != GW_INPROGRESS)
        gw_req_release(r); /* it completed inside post() */
    return GW_OK;
}

/* Posts one entry request; GW_OK or the transport's refusal (nothing posted). */
static gw_status_t post_entry(gw_tl_ep_t *tl, proto_bop_t *bop, const gw_batch_t *b, const gw_batch_ent_t *e,
                              int op, uint64_t value)
{
    gw_request_t *r = gw_req_alloc(bop->core);
    if (!r)
        return gw_err(bop->core, GW_ERR_NOMEM, "batch: out of memory for the request of an entry");
    r->op = (uint8_t)op;
    r->ep = bop->parent->ep;
    r->buf = (void *)(uintptr_t)e->laddr;
    r->len = (size_t)e->len;
    r->lmem = b->lmem[e->lreg]; /* (held by the batch: no use count of its own) */
    r->rkey = (gw_rkey_t *)&b->rkey[e->rreg];
    r->raddr = e->raddr;
    r->value = value;
    return post_child(tl, bop, r, tl->iface->ops->submit);
}

/* Posts the first n entries of b (host memory, n > 1) as one request
 * through the transport's rma_iov; GW_OK, GW_ERR_UNSUPPORTED (not taken:
 * post them one by one) or the transport's refusal (nothing posted). */
static gw_status_t post_list(gw_tl_ep_t *tl, proto_bop_t *bop, const gw_batch_t *b, uint32_t n)
{
    gw_status_t (*fn)(gw_tl_ep_t *, gw_request_t *) = tl->iface->ops->rma_iov;
    if (!fn || fn == gw_tl_unsupported_op)
        return GW_ERR_UNSUPPORTED;
    gw_batch_t *l = &bop->list;
    *l = *b;
    l->n = l->n_user = n;
    l->notify = GW_NOTIFY_NONE;
    l->value = 0;
    l->busy[0] = l->busy[1] = NULL;
    l->total = 0;
    for (uint32_t i = 0; i < n; i++)
        l->total += b->ent[i].len;
    gw_request_t *r = gw_req_alloc(bop->core);
    if (!r)
        return gw_err(bop->core, GW_ERR_NOMEM, "batch: out of memory for the request of its list");
    r->op = GW_OP_BATCH;
    r->ep = bop->parent->ep;
    r->batch = l;
    r->buf = (void *)(uintptr_t)b->ent[0].laddr;
    r->len = (size_t)l->total;
    r->rkey = (gw_rkey_t *)&b->rkey[b->ent[0].rreg];
    r->raddr = b->ent[0].raddr;
    return post_child(tl, bop, r, fn);
}

static gw_status_t batch_submit(gw_tl_ep_t *tl, gw_request_t *req, int lists);

gw_status_t gw_proto_batch_submit(gw_tl_ep_t *tl, gw_request_t *req)
{
    return batch_submit(tl, req, 0);
}

gw_status_t gw_proto_batch_submit_iov(gw_tl_ep_t *tl, gw_request_t *req)
{
    return batch_submit(tl, req, 1);
}

static gw_status_t batch_submit(gw_tl_ep_t *tl, gw_request_t *req, int lists)
{
    gw_ep_base_t *base = tl->base;
    gw_core_t *core = tl->iface->core;
    gw_batch_t *b = req->batch;
    gw_batch_expand(b);
    gw_log(GW_LOG_TRACE, "batch %s of %u entries (%llu bytes) expanded into single operations", b->get ? "get" : "put",
           b->n, (unsigned long long)b->total);
    proto_bop_t *bop = gw_op_state_get(core, sizeof(*bop));
    if (!bop)
        return gw_err(core, GW_ERR_NOMEM, "batch: out of memory for its state");
    bop->parent = req;
    bop->base = base;
    bop->core = core;
    bop->batch = b;
    bop->posting = 1;
    int last_notifies = 0;
    if (b->notify != GW_NOTIFY_NONE) {
        if (base->notify_out) {
            gw_status_t st = gw_ep_notify_defer(base, req);
            if (st != GW_OK) {
                gw_op_state_put(bop->core, bop);
                return st;
            }
            bop->deferred = 1;
        } else {
            last_notifies = 1; /* ORDERED (route checked): the last entry as a put_notify */
        }
    }
    int op = b->get ? GW_OP_GET : GW_OP_PUT;
    uint32_t posted = 0;
    gw_status_t st = GW_OK;
    uint32_t nlist = b->n - (uint32_t)(last_notifies && b->n);
    if (lists && nlist > 1 && !b->lgpu && !b->rgpu) { /* one list for all (but a notifying last entry) */
        st = post_list(tl, bop, b, nlist);
        if (st == GW_OK) {
            posted = nlist;
            gw_log(GW_LOG_TRACE, "batch: %u entries posted as one list through %s's rma_iov", nlist,
                   tl->iface->ops->name);
        }
        else if (st == GW_ERR_UNSUPPORTED)
            st = GW_OK; /* entry by entry, below */
        else
            posted = 1; /* (for the error below: the list's first entry) */
    }
    for (; posted < b->n && st == GW_OK && !gw_ep_failed(base); posted++) {
        int last = posted + 1 == b->n;
        st = post_entry(tl, bop, b, &b->ent[posted], last && last_notifies ? GW_OP_PUT_NOTIFY : op,
                        last && last_notifies ? b->value : 0);
    }
    if (st != GW_OK && posted <= 1 && bop->live == 0) {
        /* nothing left moving: the caller drops the request (and undoes the deferral) */
        gw_op_state_put(bop->core, bop);
        return st;
    }
    bop->fini = req->fini;
    req->fini = bop_parent_fini;
    req->owner = bop;
    if (st != GW_OK && bop->err == GW_OK) {
        bop->err = st;
        const gw_batch_ent_t *e = &b->ent[posted - 1];
        bop->err_laddr = e->laddr;
        bop->err_raddr = e->raddr;
        bop->err_len = e->len;
        snprintf(bop->why, sizeof(bop->why), "%.*s", (int)sizeof(bop->why) - 1, core->errbuf);
    }
    bop->posting = 0;
    if (!bop->live)
        bop_finish(bop);
    return GW_OK;
}

int gw_proto_batch_expanded(const gw_request_t *req)
{
    return req->op == GW_OP_BATCH && req->fini == bop_parent_fini && req->owner;
}

gw_status_t gw_proto_batch_cancel(gw_tl_ep_t *tl, gw_request_t *req)
{
    proto_bop_t *bop = req->owner;
    gw_ep_base_t *b = bop->base;
    /* the entry requests are on the endpoint's outstanding list behind the
     * batch request (posted after it), each with bop as its owner */
    bop->posting = 1; /* (no finish while the walk below runs) */
    gw_list_t *p = req->link.next, *t;
    for (; p != &b->outstanding && req->status == GW_INPROGRESS; p = t) {
        t = p->next;
        gw_request_t *r = gw_container_of(p, gw_request_t, link);
        if (r->fini != bop_child_fini || r->owner != bop || r->status != GW_INPROGRESS)
            continue;
        if (tl->iface->ops->cancel(tl, r) != GW_OK)
            continue;
        /* (its completion takes it off the list; t was read before) */
        r->length = r->done; /* what of it had moved before the rest was withdrawn */
        gw_ep_op_done(b, r, GW_ERR_CANCELED);
        if (t != &b->outstanding && gw_container_of(t, gw_request_t, link)->status != GW_INPROGRESS)
            t = req->link.next; /* a completion recycled what followed: walk again (withdrawn ones are gone) */
    }
    bop->posting = 0;
    if (!bop->live) {
        if (bop->err == GW_ERR_CANCELED)
            snprintf(bop->why, sizeof(bop->why), "canceled by gw_request_cancel() before it (or its rest) reached the wire");
        bop_finish(bop);
    }
    return req->status == GW_INPROGRESS ? GW_INPROGRESS : GW_OK;
}
