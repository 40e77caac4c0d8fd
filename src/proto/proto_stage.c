/* SPDX-License-Identifier: Apache-2.0 */
/* proto_stage.c - local GPU buffers of puts and gets moved through pinned
 * host slots over the transport's host primitives (protocol layer; proto.h
 * says when).
 *
 * One state record per staged operation ("op") keeps a ring of chunks in
 * posting order, each one slot of the context's staging engine for the
 * buffer's device (mem/staging.h):
 *   put   FREE -> D2H (copy into the slot running) -> WIRE (the transport's
 *         host put from the slot posted) -> FREE
 *   get   FREE -> WIRE (the transport's host get into the slot) -> H2D
 *         (copy out of the slot running) -> FREE
 * The request the api layer queued ("parent") stays outstanding until every
 * chunk is FREE again, so flushes and later notifications wait for the whole
 * operation; the chunks' requests ("children") are outstanding on the
 * endpoint as well while they move.  Puts are posted in offset order (a
 * put_notify's last chunk then carries the notification on transports
 * without a deferred-notification sender).  Copies are polled by a poller of
 * the core; a child's completion hook moves its chunk on.  A failed
 * endpoint fails the parent and the children; the op then only waits for
 * its copies in flight (never touching the endpoint again) and frees its
 * slots. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "mem/staging.h"
#include "proto/proto.h"

#define STG_MAX_DEV 16
#define STG_MAX_CHUNKS 16 /* chunks one operation keeps in flight at most */

enum { CH_FREE, CH_D2H, CH_COPIED, CH_WIRE, CH_H2D };

typedef struct stg_chunk {
    gw_stage_slot_t *slot;
    gw_request_t *child; /* CH_WIRE: the transport's host put or get */
    uint64_t off;
    size_t len;
    uint8_t state;
} stg_chunk_t;

typedef struct stg_op {
    gw_list_t link; /* pst->ops */
    gw_proto_stage_t *pst;
    gw_request_t *parent; /* NULL once it completed */
    gw_tl_ep_t *tl;
    gw_ep_base_t *base;
    gw_staging_t *eng;
    int dev;
    uint8_t *buf; /* the local GPU buffer */
    uint64_t raddr;
    gw_rkey_t *rkey;
    uint64_t value;
    size_t total, next;    /* bytes; next: the first not yet given a chunk */
    unsigned head, n, cap; /* ring of chunks in posting order: first, count, most */
    uint8_t op, get, last_notifies, finished, driving, again;
    gw_status_t err;
    uint64_t err_off;
    size_t err_len;
    char why[256];
    stg_chunk_t ch[STG_MAX_CHUNKS];
} stg_op_t;

struct gw_proto_stage {
    gw_core_t *core;
    gw_staging_t *eng[STG_MAX_DEV];
    gw_list_t ops;
    uint64_t chunks;
};

static const char *op_name(int op)
{
    return op == GW_OP_GET ? "gw_get" : op == GW_OP_PUT_NOTIFY ? "gw_put_notify" : "gw_put";
}

uint64_t gw_proto_stage_chunks(const gw_proto_stage_t *pst)
{
    return pst ? pst->chunks : 0;
}

static void op_drive(stg_op_t *op);

/* The core's poller: moves every op whose copies run (or that waits for a
 * slot) on, and keeps a waiter from sleeping while one does (a copy's end
 * wakes no fd). */
static int pst_poll(void *arg)
{
    gw_proto_stage_t *pst = arg;
    if (gw_list_empty(&pst->ops))
        return 0;
    uint64_t before = pst->chunks;
    int busy = 0;
    gw_list_t *l = pst->ops.next;
    while (l != &pst->ops) {
        stg_op_t *op = gw_container_of(l, stg_op_t, link);
        l = l->next; /* (op may be freed by its drive) */
        op_drive(op);
    }
    for (l = pst->ops.next; l != &pst->ops && !busy; l = l->next) {
        stg_op_t *op = gw_container_of(l, stg_op_t, link);
        for (unsigned k = 0; k < op->n && !busy; k++) {
            uint8_t s = op->ch[(op->head + k) % STG_MAX_CHUNKS].state;
            busy = s == CH_D2H || s == CH_H2D;
        }
        busy |= op->parent && op->next < op->total && op->n < op->cap; /* waits for a slot */
    }
    if (busy)
        gw_core_signal(pst->core);
    return (int)(pst->chunks - before);
}

static gw_status_t pst_get(gw_proto_stage_t **pp, gw_core_t *core, gw_proto_stage_t **out)
{
    if (!*pp) {
        gw_proto_stage_t *pst = calloc(1, sizeof(*pst));
        if (!pst)
            return gw_err(core, GW_ERR_NOMEM, "GPU staging: out of memory for its state");
        pst->core = core;
        gw_list_init(&pst->ops);
        gw_status_t st = gw_core_add_poller(core, pst_poll, pst);
        if (st != GW_OK) {
            free(pst);
            return st;
        }
        *pp = pst;
    }
    *out = *pp;
    return GW_OK;
}

void gw_proto_stage_destroy(gw_proto_stage_t *pst)
{
    if (!pst)
        return;
    gw_core_del_poller(pst->core, pst_poll, pst);
    /* (engines wait for their copies in flight; every endpoint is gone, so
     * what is left holds no request) */
    for (int d = 0; d < STG_MAX_DEV; d++)
        gw_staging_destroy(pst->eng[d]);
    while (!gw_list_empty(&pst->ops)) {
        stg_op_t *op = gw_container_of(pst->ops.next, stg_op_t, link);
        gw_list_del(&op->link);
        free(op);
    }
    free(pst);
}

static void op_free(stg_op_t *op)
{
    gw_list_del(&op->link);
    free(op);
}

/* Keeps the first error, with the chunk it struck and why. */
static void op_fail(stg_op_t *op, const stg_chunk_t *ch, gw_status_t st, const char *why)
{
    if (op->err != GW_OK)
        return;
    op->err = st;
    op->err_off = ch->off;
    op->err_len = ch->len;
    snprintf(op->why, sizeof(op->why), "%.*s", (int)sizeof(op->why) - 1, why && *why ? why : gw_status_str(st));
}

/* The core's message when it is about status st, else the status text. */
static const char *fresh_why(gw_core_t *core, gw_status_t st)
{
    return core->err_status == st && core->errbuf[0] ? core->errbuf : gw_status_str(st);
}

static void chunk_free(stg_op_t *op, stg_chunk_t *ch)
{
    if (ch->slot)
        gw_staging_release(op->eng, ch->slot);
    ch->slot = NULL;
    ch->child = NULL;
    ch->state = CH_FREE;
}

/* A child's completion hook. */
static void child_fini(gw_request_t *r)
{
    stg_op_t *op = r->owner;
    r->owner = NULL;
    stg_chunk_t *ch = NULL;
    for (unsigned k = 0; k < op->n && !ch; k++) {
        stg_chunk_t *c = &op->ch[(op->head + k) % STG_MAX_CHUNKS];
        if (c->child == r)
            ch = c;
    }
    if (!ch) /* (cannot be: every child is its chunk's until this hook) */
        return;
    ch->child = NULL;
    if (r->status != GW_OK) {
        op_fail(op, ch, r->status, fresh_why(op->pst->core, r->status));
        chunk_free(op, ch);
    } else if (op->get && ch->len && op->parent && op->err == GW_OK) {
        if (gw_staging_h2d(op->eng, ch->slot, op->buf + ch->off, ch->len) != GW_OK) {
            op_fail(op, ch, GW_ERR_CUDA, op->pst->core->errbuf);
            chunk_free(op, ch);
        } else {
            ch->state = CH_H2D;
        }
    } else {
        if (!op->get)
            op->pst->chunks++;
        chunk_free(op, ch);
    }
    op_drive(op);
}

/* Posts the transport's host put or get of chunk ch (op: GW_OP_PUT,
 * GW_OP_GET or GW_OP_PUT_NOTIFY).  GW_OK, or its refusal (the chunk is
 * then the caller's again). */
static gw_status_t post_child(stg_op_t *op, stg_chunk_t *ch, int opc)
{
    gw_core_t *core = op->pst->core;
    gw_request_t *r = gw_req_alloc(core);
    if (!r)
        return gw_err(core, GW_ERR_NOMEM, "GPU staging: out of memory for the request of a chunk");
    r->op = (uint8_t)opc;
    r->ep = op->parent->ep;
    r->buf = ch->slot ? ch->slot->host : NULL;
    r->len = ch->len;
    r->lmem = NULL; /* (the slot is pinned host memory the transport takes as unregistered) */
    r->rkey = op->rkey;
    r->raddr = op->raddr + ch->off;
    r->value = opc == GW_OP_PUT_NOTIFY ? op->value : 0;
    r->owner = op;
    r->fini = child_fini;
    r->flags |= GW_REQF_USER; /* held while posting: a completion inside submit() must not recycle it */
    ch->child = r;
    ch->state = CH_WIRE;
    gw_ep_op_start(op->base, r);
    gw_status_t st = op->tl->iface->ops->submit(op->tl, r);
    if (st != GW_OK) {
        gw_ep_op_unstart(op->base, r);
        r->fini = NULL;
        r->owner = NULL;
        r->status = st;
        r->flags = 0;
        gw_req_release(r);
        ch->child = NULL;
        return st;
    }
    r->flags &= (uint8_t)~GW_REQF_USER;
    if (r->status != GW_INPROGRESS)
        gw_req_release(r); /* it completed inside submit() (its hook ran) */
    return GW_OK;
}

/* Every chunk is free and nothing more will start: completes the parent
 * (when the endpoint has not failed it already) and lets go of the op. */
static void op_finish(stg_op_t *op)
{
    op->finished = 1;
    if (op->parent) {
        gw_request_t *req = op->parent;
        gw_status_t st = op->err;
        if (st == GW_OK && gw_ep_failed(op->base))
            st = op->base->error;
        if (op->err != GW_OK)
            gw_err(op->pst->core, st, "%s staged through pinned host memory (%zu bytes of CUDA device %d memory at "
                   "%p): the chunk at offset %llu (%zu bytes) failed: %s", op_name(op->op), op->total, op->dev,
                   (void *)op->buf, (unsigned long long)op->err_off, op->err_len, op->why);
        req->length = st == GW_OK ? op->total : 0;
        /* (a deferred put_notify is held by the base until its turn, then
         * its notification goes out; its hook, parent_fini, frees op) */
        gw_ep_op_done(op->base, req, st);
    }
}

/* The parent's hook: it completed (by op_finish, or failed by the
 * endpoint while chunks still move). */
static void parent_fini(gw_request_t *r)
{
    stg_op_t *op = r->owner;
    r->owner = NULL;
    op->parent = NULL;
    if (op->finished && !op->driving)
        op_free(op);
}

/* Moves op on: tests running copies, posts copied chunks in order, starts
 * new chunks while slots are free, and finishes it once all is done.
 * Re-entered from a child's hook inside a submit(): the outer call goes
 * round again. */
static int op_live(const stg_op_t *op)
{
    return op->parent && op->err == GW_OK && !gw_ep_failed(op->base);
}

static void op_drive(stg_op_t *op)
{
    if (op->driving) {
        op->again = 1;
        return;
    }
    op->driving = 1;
    gw_core_t *core = op->pst->core;
    do {
        op->again = 0;
        int live = op_live(op);
        int inorder = 1; /* puts: every earlier chunk is posted */
        for (unsigned k = 0; k < op->n; k++) {
            stg_chunk_t *ch = &op->ch[(op->head + k) % STG_MAX_CHUNKS];
            if (ch->state == CH_D2H || ch->state == CH_H2D) {
                int t = gw_staging_test(op->eng, ch->slot);
                if (t == 0) {
                    inorder = 0;
                    continue;
                }
                if (t < 0) {
                    op_fail(op, ch, GW_ERR_CUDA, core->errbuf);
                    chunk_free(op, ch);
                    live = 0;
                    continue;
                }
                if (ch->state == CH_H2D) {
                    op->pst->chunks++;
                    chunk_free(op, ch);
                    continue;
                }
                ch->state = CH_COPIED;
            }
            if (ch->state == CH_COPIED) {
                if (!live) {
                    chunk_free(op, ch);
                    continue;
                }
                if (!inorder)
                    continue;
                int last = ch->off + ch->len == op->total;
                gw_status_t st = post_child(op, ch, last && op->last_notifies ? GW_OP_PUT_NOTIFY : GW_OP_PUT);
                if (st != GW_OK) {
                    op_fail(op, ch, st, fresh_why(core, st));
                    chunk_free(op, ch);
                    live = 0;
                }
                live = live && op_live(op);
            }
        }
        while (op->n && op->ch[op->head].state == CH_FREE) {
            op->head = (op->head + 1) % STG_MAX_CHUNKS;
            op->n--;
        }
        /* new chunks while slots are free */
        size_t csize = gw_staging_chunk(op->eng);
        int started = 0;
        while (live && op->next < op->total && op->n < op->cap) {
            gw_stage_slot_t *slot = gw_staging_acquire(op->eng);
            if (!slot)
                break;
            stg_chunk_t *ch = &op->ch[(op->head + op->n) % STG_MAX_CHUNKS];
            memset(ch, 0, sizeof(*ch));
            ch->slot = slot;
            ch->off = op->next;
            ch->len = GW_MIN(csize, op->total - op->next);
            op->n++;
            op->next += ch->len;
            gw_status_t st;
            if (op->get) {
                st = post_child(op, ch, GW_OP_GET);
            } else {
                st = gw_staging_d2h(op->eng, slot, op->buf + ch->off, ch->len);
                ch->state = CH_D2H;
                started = 1;
            }
            if (st != GW_OK) {
                op_fail(op, ch, st, fresh_why(core, st));
                chunk_free(op, ch);
                live = 0;
            }
            live = live && op_live(op);
        }
        if (started)
            op->again = 1; /* a short copy may be done already: post it now */
        while (op->n && op->ch[op->head].state == CH_FREE) {
            op->head = (op->head + 1) % STG_MAX_CHUNKS;
            op->n--;
        }
        if (!op->n && (!live || op->next >= op->total)) {
            op_finish(op);
            op->driving = 0;
            if (!op->parent)
                op_free(op);
            return;
        }
    } while (op->again);
    op->driving = 0;
}

gw_status_t gw_proto_stage_submit(gw_proto_stage_t **pp, gw_tl_ep_t *tl, gw_request_t *req)
{
    gw_core_t *core = tl->iface->core;
    gw_ep_base_t *base = tl->base;
    const gw_mem_t *lmem = req->lmem;
    if (req->len == 0) { /* no bytes to stage: the transport's own, as host memory */
        req->lmem = NULL;
        return tl->iface->ops->submit(tl, req);
    }
    int dev = lmem->cuda_device;
    if (dev < 0 || dev >= STG_MAX_DEV)
        return gw_err(core, GW_ERR_INVALID, "%s(len=%zu): CUDA device %d of the local region is beyond the %d "
                      "the staging pipeline serves", op_name(req->op), req->len, dev, STG_MAX_DEV);
    gw_proto_stage_t *pst = NULL;
    gw_status_t st = pst_get(pp, core, &pst);
    if (st != GW_OK)
        return st;
    if (!pst->eng[dev] && (st = gw_staging_create(core, dev, 0, 0, &pst->eng[dev])) != GW_OK) {
        pst->eng[dev] = NULL;
        return gw_err(core, st, "%s(len=%zu) of CUDA device %d memory over %s: no staging pipeline: %s",
                      op_name(req->op), req->len, dev, tl->iface->ops->name, core->errbuf);
    }
    stg_op_t *op = calloc(1, sizeof(*op));
    if (!op)
        return gw_err(core, GW_ERR_NOMEM, "%s(len=%zu): out of memory for its staging state", op_name(req->op),
                      req->len);
    op->pst = pst;
    op->parent = req;
    op->tl = tl;
    op->base = base;
    op->eng = pst->eng[dev];
    op->dev = dev;
    op->buf = req->buf;
    op->raddr = req->raddr;
    op->rkey = req->rkey;
    op->value = req->value;
    op->total = req->len;
    op->op = req->op;
    op->get = req->op == GW_OP_GET;
    op->cap = GW_MIN(gw_staging_nbufs(op->eng), (unsigned)STG_MAX_CHUNKS);
    if (req->op == GW_OP_PUT_NOTIFY) {
        if (base->notify_out) {
            if ((st = gw_ep_notify_defer(base, req)) != GW_OK) {
                free(op);
                return st;
            }
        } else {
            op->last_notifies = 1; /* the last chunk as a put_notify: queue order keeps it last */
        }
    }
    gw_log(GW_LOG_TRACE, "%s of %zu bytes of CUDA device %d memory staged over %s in chunks of %zu", op_name(req->op),
           req->len, dev, tl->iface->ops->name, gw_staging_chunk(op->eng));
    gw_list_push_back(&pst->ops, &op->link);
    req->owner = op;
    req->fini = parent_fini;
    /* (the first chunk's refusal fails the request through its hook:
     * nothing of it is on the wire then, but its completion is the
     * request's answer, as a transport's later error would be) */
    op_drive(op);
    return GW_OK;
}
