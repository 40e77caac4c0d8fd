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
#define STG_BATCH_PIECES 64 /* pieces (entries or parts of one) a batch's chunk carries at most */

enum { CH_FREE, CH_FILLED, CH_D2H, CH_COPIED, CH_WIRE, CH_H2D };

struct stg_op;

/* One transfer of a chunk: len bytes between GPU address laddr and the
 * slot at soff, and the remote address raddr of key rkey; the transport's
 * request that moves it while the chunk is CH_WIRE. */
typedef struct stg_piece {
    struct stg_op *op;
    uint64_t laddr, raddr;
    const gw_rkey_t *rkey;
    uint64_t soff;
    uint64_t len;
    gw_request_t *child;
    unsigned chunk; /* its chunk's index in op->ch */
} stg_piece_t;

typedef struct stg_chunk {
    gw_stage_slot_t *slot;
    stg_piece_t *pc; /* its pieces (op->pieces + index * op->pmax) */
    unsigned npc;
    unsigned wire;   /* CH_WIRE: children not yet completed */
    uint64_t off;    /* the operation's byte offset of its first piece */
    uint64_t len;    /* bytes */
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
    /* what moves: entries (a batch's, or the one of a put or get) */
    const gw_batch_ent_t *ent;
    uint32_t nent;
    gw_batch_ent_t one;       /* a put's or get's entry */
    const gw_rkey_t *rkey0;   /* its key (a batch: b->rkey, by rreg) */
    gw_batch_t *batch;        /* a batch: kept until the op is freed */
    void (*bfini)(gw_request_t *r); /* the api layer's hook of the batch request, run last */
    uint32_t cur_ent;         /* the next piece starts at entry cur_ent, */
    uint64_t cur_off;         /* byte cur_off of it */
    uint64_t value;
    uint64_t total, next;     /* bytes; next: the first not yet given a chunk */
    unsigned head, n, cap;    /* ring of chunks in posting order: first, count, most */
    unsigned pmax;            /* pieces per chunk */
    uint8_t op, get, last_notifies, finished, driving, again;
    uint8_t dead;             /* let go of while pinned: freed at the unpin */
    unsigned pins;            /* the poller's walk holds it */
    gw_status_t err;
    uint64_t err_off, err_len, err_raddr;
    char why[256];
    stg_chunk_t ch[STG_MAX_CHUNKS];
    stg_piece_t *pieces;      /* cap * pmax */
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
static void op_free(stg_op_t *op);

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
        /* (a drive may complete requests whose hooks let go of this op or
         * of others, a held notification's among them: the op walked is
         * pinned, so its link stays valid until the walk moves on) */
        stg_op_t *op = gw_container_of(l, stg_op_t, link);
        op->pins++;
        op_drive(op);
        l = l->next;
        if (--op->pins == 0 && op->dead)
            op_free(op);
    }
    for (l = pst->ops.next; l != &pst->ops && !busy; l = l->next) {
        stg_op_t *op = gw_container_of(l, stg_op_t, link);
        for (unsigned k = 0; k < op->n && !busy; k++) {
            uint8_t s = op->ch[(op->head + k) % op->cap].state;
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

/* Lets go of op: the batch's memory goes back to the api layer (its hook
 * reads only r->batch). */
static void op_free(stg_op_t *op)
{
    if (op->pins) { /* the poller's walk stands on it: freed when it moves on */
        op->dead = 1;
        return;
    }
    gw_list_del(&op->link);
    if (op->bfini) {
        gw_request_t tmp;
        memset(&tmp, 0, sizeof(tmp));
        tmp.batch = op->batch;
        op->bfini(&tmp);
    }
    gw_core_t *core = op->pst->core;
    gw_op_state_put(core, op->pieces);
    gw_op_state_put(core, op);
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
    while (!gw_list_empty(&pst->ops))
        op_free(gw_container_of(pst->ops.next, stg_op_t, link));
    free(pst);
}

/* Keeps the first error, with the piece (or chunk) it struck and why. */
static void op_fail(stg_op_t *op, const stg_chunk_t *ch, const stg_piece_t *pc, gw_status_t st, const char *why)
{
    if (op->err != GW_OK)
        return;
    op->err = st;
    op->err_off = ch->off;
    op->err_len = pc ? pc->len : ch->len;
    op->err_raddr = pc ? pc->raddr : ch->npc ? ch->pc[0].raddr : 0;
    if (pc)
        for (const stg_piece_t *p = ch->pc; p < pc; p++)
            op->err_off += p->len;
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
    ch->state = CH_FREE;
}

/* Starts the copy between chunk ch's slot and GPU memory: one plain copy
 * for one piece, else a gather or scatter (the copy kernel). */
static gw_status_t chunk_copy(stg_op_t *op, stg_chunk_t *ch, int to_host)
{
    if (ch->npc == 1)
        return to_host ? gw_staging_d2h(op->eng, ch->slot, (const void *)(uintptr_t)ch->pc[0].laddr, ch->len)
                       : gw_staging_h2d(op->eng, ch->slot, (void *)(uintptr_t)ch->pc[0].laddr, ch->len);
    gw_stage_blk_t blk[STG_BATCH_PIECES];
    for (unsigned i = 0; i < ch->npc; i++)
        blk[i] = (gw_stage_blk_t){ch->pc[i].laddr, ch->pc[i].soff, ch->pc[i].len};
    return to_host ? gw_staging_gather(op->eng, ch->slot, blk, ch->npc)
                   : gw_staging_scatter(op->eng, ch->slot, blk, ch->npc);
}

/* A child's completion hook. */
static void child_fini(gw_request_t *r)
{
    stg_piece_t *pc = r->owner;
    stg_op_t *op = pc->op;
    stg_chunk_t *ch = &op->ch[pc->chunk];
    r->owner = NULL;
    pc->child = NULL;
    if (r->status != GW_OK)
        op_fail(op, ch, pc, r->status, fresh_why(op->pst->core, r->status));
    if (--ch->wire == 0) {
        if (op->get && op->parent && op->err == GW_OK) {
            if (chunk_copy(op, ch, 0) != GW_OK) {
                op_fail(op, ch, NULL, GW_ERR_CUDA, op->pst->core->errbuf);
                chunk_free(op, ch);
            } else {
                ch->state = CH_H2D;
            }
        } else {
            if (!op->get && op->err == GW_OK)
                op->pst->chunks++;
            chunk_free(op, ch);
        }
    }
    op_drive(op);
}

/* Posts the transport's host put or get of piece pc of chunk ch (opc:
 * GW_OP_PUT, GW_OP_GET or GW_OP_PUT_NOTIFY).  GW_OK, or its refusal. */
static gw_status_t post_child(stg_op_t *op, stg_chunk_t *ch, stg_piece_t *pc, int opc)
{
    gw_core_t *core = op->pst->core;
    gw_request_t *r = gw_req_alloc(core);
    if (!r)
        return gw_err(core, GW_ERR_NOMEM, "GPU staging: out of memory for the request of a chunk");
    r->op = (uint8_t)opc;
    r->ep = op->parent->ep;
    r->buf = (uint8_t *)ch->slot->host + pc->soff;
    r->len = (size_t)pc->len;
    r->lmem = NULL; /* (the slot is pinned host memory the transport takes as unregistered) */
    r->rkey = (gw_rkey_t *)pc->rkey;
    r->raddr = pc->raddr;
    r->value = opc == GW_OP_PUT_NOTIFY ? op->value : 0;
    r->owner = pc;
    r->fini = child_fini;
    r->flags |= GW_REQF_USER; /* held while posting: a completion inside submit() must not recycle it */
    pc->child = r;
    ch->wire++;
    gw_ep_op_start(op->base, r);
    gw_status_t st = op->tl->iface->ops->submit(op->tl, r);
    if (st != GW_OK) {
        gw_ep_op_unstart(op->base, r);
        r->fini = NULL;
        r->owner = NULL;
        r->status = st;
        r->flags = 0;
        gw_req_release(r);
        pc->child = NULL;
        ch->wire--;
        return st;
    }
    r->flags &= (uint8_t)~GW_REQF_USER;
    if (r->status != GW_INPROGRESS)
        gw_req_release(r); /* it completed inside submit() (its hook ran) */
    return GW_OK;
}

/* Posts every piece of chunk ch (CH_WIRE); the last piece of the operation
 * carries the notification where op->last_notifies.  A refusal ends the
 * posting: the pieces posted move on, the op fails. */
static void chunk_post(stg_op_t *op, stg_chunk_t *ch)
{
    gw_core_t *core = op->pst->core;
    ch->state = CH_WIRE;
    ch->wire++; /* (held while posting: a child completing inside submit() must not move the chunk on) */
    for (unsigned i = 0; i < ch->npc; i++) {
        stg_piece_t *pc = &ch->pc[i];
        int last = op->last_notifies && ch->off + ch->len == op->total && i + 1 == ch->npc;
        gw_status_t st = post_child(op, ch, pc, last ? GW_OP_PUT_NOTIFY : op->get ? GW_OP_GET : GW_OP_PUT);
        if (st != GW_OK) {
            op_fail(op, ch, pc, st, fresh_why(core, st));
            break;
        }
        if (op->err != GW_OK || gw_ep_failed(op->base))
            break;
    }
    if (--ch->wire == 0) { /* nothing of it moves (any more) */
        if (op->get && op->err == GW_OK && op->parent) {
            if (chunk_copy(op, ch, 0) != GW_OK) {
                op_fail(op, ch, NULL, GW_ERR_CUDA, core->errbuf);
                chunk_free(op, ch);
            } else {
                ch->state = CH_H2D;
            }
        } else {
            if (!op->get && op->err == GW_OK)
                op->pst->chunks++;
            chunk_free(op, ch);
        }
    }
}

/* Fills chunk ch (its slot acquired) with the next pieces: up to a slot's
 * bytes and op->pmax pieces, an entry longer than what is left of the slot
 * split at its end. */
static void chunk_fill(stg_op_t *op, stg_chunk_t *ch, size_t csize)
{
    ch->npc = 0;
    ch->len = 0;
    ch->wire = 0;
    ch->off = op->next;
    while (op->cur_ent < op->nent && ch->npc < op->pmax && ch->len < csize) {
        const gw_batch_ent_t *e = &op->ent[op->cur_ent];
        uint64_t n = GW_MIN(e->len - op->cur_off, (uint64_t)csize - ch->len);
        stg_piece_t *pc = &ch->pc[ch->npc++];
        pc->op = op;
        pc->chunk = (unsigned)(ch - op->ch);
        pc->laddr = e->laddr + op->cur_off;
        pc->raddr = e->raddr + op->cur_off;
        pc->rkey = op->batch ? &op->rkey0[e->rreg] : op->rkey0;
        pc->soff = ch->len;
        pc->len = n;
        pc->child = NULL;
        ch->len += n;
        op->cur_off += n;
        if (op->cur_off == e->len) {
            op->cur_ent++;
            op->cur_off = 0;
        }
    }
    op->next += ch->len;
    ch->state = CH_FILLED;
}

/* Every chunk is free and nothing more will start: completes the parent
 * (when the endpoint has not failed it already). */
static void op_finish(stg_op_t *op)
{
    op->finished = 1;
    if (!op->parent)
        return;
    gw_request_t *req = op->parent;
    gw_status_t st = op->err;
    if (st == GW_OK && gw_ep_failed(op->base))
        st = op->base->error;
    if (op->err != GW_OK) {
        if (op->batch)
            gw_err(op->pst->core, st, "batch %s staged through pinned host memory (%u entries, %llu bytes of CUDA "
                   "device %d memory): the piece at byte %llu (remote 0x%llx, %llu bytes) failed: %s",
                   op->get ? "get" : "put", op->nent, (unsigned long long)op->total, op->dev,
                   (unsigned long long)op->err_off, (unsigned long long)op->err_raddr,
                   (unsigned long long)op->err_len, op->why);
        else
            gw_err(op->pst->core, st, "%s staged through pinned host memory (%llu bytes of CUDA device %d memory "
                   "at 0x%llx): the chunk at offset %llu (%llu bytes) failed: %s", op_name(op->op),
                   (unsigned long long)op->total, op->dev, (unsigned long long)op->one.laddr,
                   (unsigned long long)op->err_off, (unsigned long long)op->err_len, op->why);
    }
    req->length = st == GW_OK ? (size_t)op->total : 0;
    /* (a deferred notification is held by the base until its turn, then it
     * goes out; the hook, parent_fini, lets go of op) */
    gw_ep_op_done(op->base, req, st);
}

/* The parent's hook: it completed (by op_finish, or failed by the
 * endpoint while chunks still move). */
static void parent_fini(gw_request_t *r)
{
    stg_op_t *op = r->owner;
    r->owner = NULL;
    r->batch = NULL; /* (kept by op until its last child let go) */
    op->parent = NULL;
    if (!op->finished) {
        /* failed by the endpoint while chunks move: the caller may free its
         * GPU buffer once the request completes, so no copy of it may still
         * run (each is a slot's worth at most); the chunks' slots go back
         * later, as their requests end */
        uint64_t deadline = gw_now_ns() + 10000000000ull;
        for (unsigned k = 0; k < op->n; k++) {
            stg_chunk_t *ch = &op->ch[(op->head + k) % op->cap];
            if (ch->state != CH_D2H && ch->state != CH_H2D)
                continue;
            while (gw_staging_test(op->eng, ch->slot) == 0 && gw_now_ns() < deadline)
                ;
        }
    }
    if (op->finished && !op->driving)
        op_free(op);
}

static int op_live(const stg_op_t *op)
{
    return op->parent && op->err == GW_OK && !gw_ep_failed(op->base);
}

static void ring_trim(stg_op_t *op)
{
    while (op->n && op->ch[op->head].state == CH_FREE) {
        op->head = (op->head + 1) % op->cap;
        op->n--;
    }
}

/* Moves op on: tests running copies, posts copied chunks in order, starts
 * new chunks while slots are free, and finishes it once all is done.
 * Re-entered from a child's hook inside a submit(): the outer call goes
 * round again. */
static void op_drive(stg_op_t *op)
{
    if (op->finished) /* (its parent may still be held for its notification's turn) */
        return;
    if (op->driving) {
        op->again = 1;
        return;
    }
    op->driving = 1;
    gw_core_t *core = op->pst->core;
    do {
        op->again = 0;
        int inorder = 1; /* puts: every earlier chunk is posted */
        for (unsigned k = 0; k < op->n; k++) {
            stg_chunk_t *ch = &op->ch[(op->head + k) % op->cap];
            if (ch->state == CH_D2H || ch->state == CH_H2D) {
                int t = gw_staging_test(op->eng, ch->slot);
                if (t == 0) {
                    inorder = 0;
                    continue;
                }
                if (t < 0) {
                    op_fail(op, ch, NULL, GW_ERR_CUDA, core->errbuf);
                    chunk_free(op, ch);
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
                if (!op_live(op))
                    chunk_free(op, ch);
                else if (inorder)
                    chunk_post(op, ch);
            }
        }
        ring_trim(op);
        /* new chunks while slots are free */
        size_t csize = gw_staging_chunk(op->eng);
        while (op_live(op) && op->next < op->total && op->n < op->cap) {
            gw_stage_slot_t *slot = gw_staging_acquire(op->eng);
            if (!slot)
                break;
            stg_chunk_t *ch = &op->ch[(op->head + op->n) % op->cap];
            op->n++;
            ch->slot = slot;
            chunk_fill(op, ch, csize);
            if (op->get) {
                chunk_post(op, ch);
            } else if (chunk_copy(op, ch, 1) != GW_OK) {
                op_fail(op, ch, NULL, GW_ERR_CUDA, core->errbuf);
                chunk_free(op, ch);
            } else {
                ch->state = CH_D2H;
                op->again = 1; /* a short copy may be done already: post it now */
            }
        }
        ring_trim(op);
        if (!op->n && (!op_live(op) || op->next >= op->total)) {
            op_finish(op);
            op->driving = 0;
            if (!op->parent)
                op_free(op);
            return;
        }
    } while (op->again);
    op->driving = 0;
}

/* The parts both submits share: the engine of device dev, the op with room
 * for pmax pieces per chunk, the deferred notification.  NULL with the
 * error set (nothing taken). */
static stg_op_t *op_new(gw_proto_stage_t **pp, gw_tl_ep_t *tl, gw_request_t *req, int dev, unsigned pmax,
                        int notifies, const char *what)
{
    gw_core_t *core = tl->iface->core;
    gw_ep_base_t *base = tl->base;
    if (dev < 0 || dev >= STG_MAX_DEV) {
        gw_err(core, GW_ERR_INVALID, "%s: CUDA device %d of the local region is beyond the %d the staging pipeline "
               "serves", what, dev, STG_MAX_DEV);
        return NULL;
    }
    gw_proto_stage_t *pst = NULL;
    if (pst_get(pp, core, &pst) != GW_OK)
        return NULL;
    gw_status_t st;
    if (!pst->eng[dev] && (st = gw_staging_create(core, dev, 0, 0, &pst->eng[dev])) != GW_OK) {
        pst->eng[dev] = NULL;
        gw_err(core, st, "%s of CUDA device %d memory over %s: no staging pipeline: %s", what, dev,
               tl->iface->ops->name, core->errbuf);
        return NULL;
    }
    stg_op_t *op = gw_op_state_get(core, sizeof(*op));
    unsigned cap = GW_MIN(gw_staging_nbufs(pst->eng[dev]), (unsigned)STG_MAX_CHUNKS);
    stg_piece_t *pieces = op ? gw_op_state_get(core, (size_t)cap * pmax * sizeof(*pieces)) : NULL;
    if (!pieces) {
        gw_op_state_put(core, op);
        gw_err(core, GW_ERR_NOMEM, "%s: out of memory for its staging state", what);
        return NULL;
    }
    op->pst = pst;
    op->parent = req;
    op->tl = tl;
    op->base = base;
    op->eng = pst->eng[dev];
    op->dev = dev;
    op->cap = cap;
    op->pmax = pmax;
    op->pieces = pieces;
    for (unsigned k = 0; k < STG_MAX_CHUNKS; k++)
        op->ch[k].pc = k < cap ? pieces + (size_t)k * pmax : NULL;
    op->value = req->value;
    if (notifies) {
        if (base->notify_out) {
            if (gw_ep_notify_defer(base, req) != GW_OK) {
                gw_op_state_put(core, pieces);
                gw_op_state_put(core, op);
                return NULL;
            }
        } else {
            op->last_notifies = 1; /* the last piece as a put_notify: queue order keeps it last */
        }
    }
    return op;
}

/* Starts op, now that req is its parent. */
static void op_start(stg_op_t *op, gw_request_t *req)
{
    gw_list_push_back(&op->pst->ops, &op->link);
    op->bfini = req->fini;
    req->owner = op;
    req->fini = parent_fini;
    /* (a refusal of the first chunk fails the request through its hook:
     * nothing of it is on the wire then, but its completion is the
     * request's answer, as a transport's later error would be) */
    op_drive(op);
}

gw_status_t gw_proto_stage_submit(gw_proto_stage_t **pp, gw_tl_ep_t *tl, gw_request_t *req)
{
    if (req->len == 0) { /* no bytes to stage: the transport's own, as host memory */
        req->lmem = NULL;
        return tl->iface->ops->submit(tl, req);
    }
    char what[96];
    snprintf(what, sizeof(what), "%s(len=%zu)", op_name(req->op), req->len);
    stg_op_t *op = op_new(pp, tl, req, req->lmem->cuda_device, 1, req->op == GW_OP_PUT_NOTIFY, what);
    if (!op)
        return tl->iface->core->err_status;
    op->op = req->op;
    op->get = req->op == GW_OP_GET;
    op->one = (gw_batch_ent_t){(uint64_t)(uintptr_t)req->buf, req->raddr, req->len, 0, 0};
    op->ent = &op->one;
    op->nent = 1;
    op->rkey0 = req->rkey;
    op->total = req->len;
    gw_log(GW_LOG_TRACE, "%s of CUDA device %d memory staged over %s in chunks of %zu", what, op->dev,
           tl->iface->ops->name, gw_staging_chunk(op->eng));
    op_start(op, req);
    return GW_OK;
}

gw_status_t gw_proto_batch_stage_route(const gw_tl_caps_t *caps, const gw_batch_t *b, int force, int notify_out,
                                       int *staged, const char **lack)
{
    *staged = 0;
    *lack = NULL;
    if (!b->lgpu || (!force && (caps->mem_kinds & GW_TL_MEM_CUDA)) || !b->nlmem)
        return GW_OK;
    for (uint32_t i = 0; i < b->nlmem; i++) /* one GPU for the whole local side, or not here */
        if (!b->lmem[i] || b->lmem[i]->type != GW_MEM_CUDA || b->lmem[i]->cuda_device != b->lmem[0]->cuda_device)
            return GW_OK;
    if (b->rgpu && !(caps->mem_kinds & GW_TL_MEM_CUDA))
        *lack = "GPU memory on the remote side";
    else if (b->notify == GW_NOTIFY_COUNTED && !notify_out)
        *lack = "counted notifications";
    else if (b->notify == GW_NOTIFY_ORDERED && !notify_out && !gw_batch_unexpanded(b) && b->n == 0)
        *lack = "notifications without data";
    if (*lack)
        return GW_ERR_UNSUPPORTED;
    *staged = 1;
    return GW_OK;
}

gw_status_t gw_proto_stage_batch_submit(gw_proto_stage_t **pp, gw_tl_ep_t *tl, gw_request_t *req)
{
    gw_batch_t *b = req->batch;
    gw_batch_expand(b);
    char what[96];
    snprintf(what, sizeof(what), "batch %s (%u entries, %llu bytes)", b->get ? "get" : "put", b->n,
             (unsigned long long)b->total);
    stg_op_t *op = op_new(pp, tl, req, b->lmem[0]->cuda_device, STG_BATCH_PIECES, b->notify != GW_NOTIFY_NONE,
                          what);
    if (!op)
        return tl->iface->core->err_status;
    op->op = GW_OP_BATCH;
    op->get = b->get;
    op->batch = b;
    op->ent = b->ent;
    op->nent = b->n;
    op->rkey0 = b->rkey;
    op->total = b->total;
    gw_log(GW_LOG_TRACE, "%s of CUDA device %d memory staged over %s in chunks of %zu", what, op->dev,
           tl->iface->ops->name, gw_staging_chunk(op->eng));
    op_start(op, req);
    return GW_OK;
}
