/* SPDX-License-Identifier: Apache-2.0 */
/* ops.c - put, get, put_notify, send, recv, flush, notifications:
 * argument, bounds and access checks, then the endpoint's transport. */
#include <stdio.h>
#include <stdlib.h>

#include "api/api.h"
#include "proto/proto.h"
#include "proto/proto_integrity.h"

static const char *op_name(int op)
{
    static const char *const n[] = {"?",       "gw_put",  "gw_get",   "gw_put_notify",
                                    "gw_send", "gw_recv", "gw_flush", "gw_xfer_batch"};
    return op >= 0 && op <= GW_OP_BATCH ? n[op] : "?";
}

/* The extension's sentence on why a key cannot serve ep ("" when it has
 * none): asked only on a refusal, never on a usable endpoint. */
static const char *explain_key(gw_ep_t *ep, const gw_rkey_t *rkey, char *buf, size_t cap)
{
    gw_context_t *ctx = ep->ctx;
    buf[0] = '\0';
    if (ctx->ext_ops && ctx->ext_ops->explain_key && ctx->ext_ops->explain_key(ctx->ext, ep, rkey, buf, cap))
        return buf;
    return "";
}

static int is_remote_op(int op)
{
    return op == GW_OP_PUT || op == GW_OP_GET || op == GW_OP_PUT_NOTIFY || op == GW_OP_BATCH;
}

/* An endpoint that is not both healthy and ready: out of line, so that a
 * usable endpoint costs two tests and no call. */
__attribute__((noinline)) static gw_status_t ep_unusable(gw_ep_t *ep, int op)
{
    if (ep->keys_void && is_remote_op(op)) { /* its peer is gone for good: its keys with it */
        char why[320];
        return gw_err(&ep->ctx->core, GW_ERR_INVALID_KEY, "%s: %s", op_name(op),
                      explain_key(ep, NULL, why, sizeof(why))[0] ? why : "the keys of this endpoint's peer are void");
    }
    if (ep->base.error != GW_OK)
        return gw_err(&ep->ctx->core, GW_ERR_ENDPOINT_FAILED, "%s: endpoint to %s failed earlier: %s (%s)",
                      op_name(op), ep->base.peer, ep->base.error_detail, gw_status_name(ep->base.error));
    if (ep->state != GW_EP_READY)
        return gw_err(&ep->ctx->core, GW_ERR_INVALID, "%s: endpoint to %s is %s", op_name(op), ep->base.peer,
                      ep->state == GW_EP_CLOSING ? "closing" : "not connected");
    return GW_OK;
}

static inline gw_status_t ep_usable(gw_ep_t *ep, int op)
{
    if (GW_LIKELY(ep->base.error == GW_OK && ep->state == GW_EP_READY))
        return GW_OK;
    return ep_unusable(ep, op);
}

/* The local and remote checks: their common answers (a host buffer
 * without a region, or inside a host region of this context; a key of this
 * endpoint covering the range) inline, the messages out of line (no
 * registers saved for them on every small put: under the Soft-RoCE guest's
 * emulation each instruction of a put is on its round trip).
 *
 * local_fault is the local checks, in the order they are reported: 0 when
 * the buffer passes them all, else which one failed first (LF_KIND: a
 * region of another kind than host memory, which check_local_slow asks
 * the transport about). */
enum { LF_OK, LF_NULL, LF_RANGE, LF_CTX, LF_KIND };

static inline int local_fault(const gw_ep_t *ep, const void *buf, size_t len, const gw_mem_t *lmem)
{
    if (!buf && len)
        return LF_NULL;
    if (!lmem)
        return LF_OK;
    if (!gw_range_inside((uint64_t)(uintptr_t)lmem->addr, lmem->len, (uint64_t)(uintptr_t)buf, len))
        return LF_RANGE;
    if (lmem->core != &ep->ctx->core)
        return LF_CTX;
    return lmem->type == GW_MEM_HOST ? LF_OK : LF_KIND;
}

__attribute__((noinline)) static gw_status_t check_local_slow(gw_ep_t *ep, int op, const void *buf, size_t len,
                                                              gw_mem_t *lmem, int fault)
{
    switch (fault) {
    case LF_NULL:
        return gw_err(&ep->ctx->core, GW_ERR_INVALID, "%s: NULL buffer with length %zu", op_name(op), len);
    case LF_RANGE:
        return gw_err(&ep->ctx->core, GW_ERR_INVALID,
                      "%s: local buffer [%p, +%zu) is not inside its registered region [%p, +%zu)", op_name(op),
                      buf, len, lmem->addr, lmem->len);
    case LF_CTX:
        return gw_err(&ep->ctx->core, GW_ERR_INVALID, "%s: local region belongs to another context", op_name(op));
    default:
        break;
    }
    /* GPU memory the transport does not move itself: a put's or get's is
     * staged by the protocol layer (proto_stage.c), a message's is refused
     * (asked here only: host memory is the hot path) */
    if (lmem->type == GW_MEM_CUDA && ep->ops && ep->tl_id >= 0 && !is_remote_op(op)) {
        gw_tl_caps_t caps;
        ep->ops->caps(ep->ctx->tl[ep->tl_id], &caps);
        if (!(caps.mem_kinds & GW_TL_MEM_CUDA))
            return gw_err(&ep->ctx->core, GW_ERR_UNSUPPORTED, "%s: the %s transport to %s does not move GPU memory "
                          "(puts and gets of it are staged through host memory; messages are not)",
                          op_name(op), ep->ops->name, ep->base.peer);
    }
    return GW_OK;
}

static inline gw_status_t check_local(gw_ep_t *ep, int op, const void *buf, size_t len, gw_mem_t *lmem)
{
    int fault = local_fault(ep, buf, len, lmem);
    if (GW_LIKELY(fault == LF_OK))
        return GW_OK;
    return check_local_slow(ep, op, buf, len, lmem, fault);
}

__attribute__((noinline)) static gw_status_t check_remote_slow(gw_ep_t *ep, int op, size_t len, uint64_t raddr,
                                                               gw_rkey_t *rkey, unsigned need)
{
    gw_core_t *core = &ep->ctx->core;
    if (!rkey)
        return gw_err(core, GW_ERR_INVALID, "%s: NULL remote key", op_name(op));
    if (rkey->ep != ep) {
        char why[320];
        if (explain_key(ep, rkey, why, sizeof(why))[0]) /* e.g. a key of an agent's earlier life */
            return gw_err(core, GW_ERR_INVALID_KEY, "%s: %s", op_name(op), why);
        return gw_err(core, GW_ERR_INVALID_KEY, "%s: the remote key was unpacked on another endpoint (%s), not %s",
                      op_name(op), rkey->ep->base.peer, ep->base.peer);
    }
    if (!gw_range_inside(rkey->addr, rkey->len, raddr, len))
        return gw_err(core, GW_ERR_OUT_OF_BOUNDS,
                      "%s: remote range [0x%llx, +%zu) is outside the region [0x%llx, +%llu) the key covers",
                      op_name(op), (unsigned long long)raddr, len, (unsigned long long)rkey->addr,
                      (unsigned long long)rkey->len);
    if (!(rkey->access & need))
        return gw_err(core, GW_ERR_ACCESS, "%s: the remote region at 0x%llx grants %s, not %s", op_name(op),
                      (unsigned long long)rkey->addr,
                      rkey->access == GW_ACCESS_REMOTE_READ    ? "remote read only"
                      : rkey->access == GW_ACCESS_REMOTE_WRITE ? "remote write only"
                                                               : "no remote access",
                      need == GW_ACCESS_REMOTE_READ ? "remote read" : "remote write");
    return GW_OK;
}

static inline gw_status_t check_remote(gw_ep_t *ep, int op, size_t len, uint64_t raddr, gw_rkey_t *rkey,
                                       unsigned need)
{
    if (GW_LIKELY(rkey && rkey->ep == ep && gw_range_inside(rkey->addr, rkey->len, raddr, len) &&
                  (rkey->access & need)))
        return GW_OK;
    return check_remote_slow(ep, op, len, raddr, rkey, need);
}

static gw_request_t *new_req(gw_ep_t *ep, int op, gw_request_t **user)
{
    gw_request_t *r = gw_req_alloc(&ep->ctx->core);
    if (!r)
        return NULL;
    r->op = (uint8_t)op;
    r->ep = ep;
    if (user)
        r->flags |= GW_REQF_USER;
    else
        r->err_sink = &ep->base.implicit_err;
    return r;
}

/* A request about to be handed over: it holds its local region (inflight)
 * and, when tracked, takes its place among the endpoint's outstanding ops. */
static void req_start(gw_ep_t *ep, gw_request_t *r, int tracked)
{
    if (r->lmem) {
        r->lmem->inflight++;
        r->use_count = &r->lmem->inflight;
    }
    if (tracked)
        gw_ep_op_start(&ep->base, r);
}

/* A put's or get's arguments into its request. */
static void rma_args(gw_request_t *r, void *buf, size_t len, gw_mem_t *lmem, uint64_t raddr, gw_rkey_t *rkey,
                     uint64_t value)
{
    r->buf = buf;
    r->len = len;
    r->lmem = lmem;
    r->rkey = rkey;
    r->raddr = raddr;
    r->value = value;
}

/* submit() when the transport refused the request: nothing is left behind. */
__attribute__((noinline)) static gw_status_t submit_failed(gw_ep_t *ep, gw_request_t *r, gw_status_t st)
{
    gw_ep_op_unstart(&ep->base, r); /* (and any deferred notification: none goes out) */
    if (r->use_count) {
        (*r->use_count)--;
        r->use_count = NULL;
    }
    r->status = st;
    r->flags = 0;
    gw_req_release(r);
    return st;
}

/* Hands the request to the transport.  Inline, so that a caller whose fn
 * is known (gw_recv's recv_post) runs it in the same straight line: a
 * receive with nothing to match costs its request and a list insertion. */
__attribute__((always_inline)) static inline gw_status_t submit(gw_ep_t *ep, gw_request_t *r, gw_request_t **user,
                                                                gw_status_t (*fn)(gw_tl_ep_t *, gw_request_t *),
                                                                int tracked)
{
    req_start(ep, r, tracked);
    /* hold the request while posting: a synchronous completion must not recycle it */
    r->flags |= GW_REQF_USER;
    gw_status_t st = fn(ep->tl, r);
    if (GW_UNLIKELY(st != GW_OK))
        return submit_failed(ep, r, st);
    if (user) {
        *user = r;
    } else {
        r->flags &= (uint8_t)~GW_REQF_USER;
        if (r->status != GW_INPROGRESS)
            gw_req_release(r); /* untracked and already complete */
    }
    return GW_OK;
}

/* put_direct's maker (tl.h): the tracked put's request, built after the
 * transport rang the doorbell, as submit() would have queued it. */
typedef struct rma_make {
    gw_ep_t *ep;
    void *buf;
    size_t len;
    gw_mem_t *lmem;
    uint64_t raddr;
    gw_rkey_t *rkey;
    gw_request_t **user;
} rma_make_t;

static gw_request_t *rma_make(void *arg)
{
    rma_make_t *a = arg;
    gw_request_t *r = new_req(a->ep, GW_OP_PUT, a->user); /* (a spare one: checked before the post) */
    rma_args(r, a->buf, a->len, a->lmem, a->raddr, a->rkey, 0);
    req_start(a->ep, r, 1);
    *a->user = r;
    return r;
}

__attribute__((noinline)) static gw_status_t put_notify_checked(gw_ep_t *ep, void *buf, size_t len, gw_mem_t *lmem,
                                                                uint64_t raddr, gw_rkey_t *rkey, uint64_t value,
                                                                gw_request_t **req, gw_request_t *r,
                                                                gw_status_t (*route)(gw_tl_ep_t *, gw_request_t *));

/* submit() of the staged route: the context's staging state goes along. */
static gw_status_t stage_submit(gw_tl_ep_t *tl, gw_request_t *r)
{
    return gw_proto_stage_submit(&r->ep->ctx->pstage, tl, r);
}

/* A put, get or put_notify of a local GPU buffer that the protocol layer
 * stages through pinned host memory over the transport's host operations. */
__attribute__((noinline)) static gw_status_t rma_staged(gw_ep_t *ep, int op, void *buf, size_t len, gw_mem_t *lmem,
                                                        uint64_t raddr, gw_rkey_t *rkey, uint64_t value,
                                                        gw_request_t **req)
{
    if (op == GW_OP_PUT_NOTIFY && (ep->base.integ != NULL || ep->integ_refused)) /* checked, then staged */
        return put_notify_checked(ep, buf, len, lmem, raddr, rkey, value, req, NULL, stage_submit);
    gw_request_t *r = new_req(ep, op, req);
    if (!r)
        return gw_err(&ep->ctx->core, GW_ERR_NOMEM, "%s: out of memory for a request", op_name(op));
    rma_args(r, buf, len, lmem, raddr, rkey, value);
    return submit(ep, r, req, stage_submit, 1);
}

/* A put_notify on an endpoint that checks integrity (proto/proto_integrity.h):
 * its one entry's CRC goes with it. */
__attribute__((noinline)) static gw_status_t put_notify_checked(gw_ep_t *ep, void *buf, size_t len, gw_mem_t *lmem,
                                                                uint64_t raddr, gw_rkey_t *rkey, uint64_t value,
                                                                gw_request_t **req, gw_request_t *r,
                                                                gw_status_t (*route)(gw_tl_ep_t *, gw_request_t *))
{
    if (ep->integ_refused) {
        if (r)
            gw_req_release(r);
        return gw_err(&ep->ctx->core, GW_ERR_UNSUPPORTED,
                      "gw_put_notify: this side asks for the integrity check (GPUWIRE_INTEGRITY=on) and the peer %s "
                      "runs a version of gpuwire without it; refused rather than sent unchecked", ep->base.peer);
    }
    gw_integ_set_t *s = gw_proto_integ_set_new(1, GW_INTEG_KIND_PUT, 1);
    if (!r)
        r = new_req(ep, GW_OP_PUT_NOTIFY, req);
    if (!s || !r) {
        gw_proto_integ_set_free(s);
        if (r)
            gw_req_release(r);
        return gw_err(&ep->ctx->core, GW_ERR_NOMEM, "gw_put_notify: out of memory for a request");
    }
    gw_proto_integ_set_add(s, 0, buf, lmem, rkey->id, raddr, len);
    gw_proto_integ_set_route(s, route);
    rma_args(r, buf, len, lmem, raddr, rkey, value);
    r->owner = s;
    gw_status_t st = submit(ep, r, req, gw_proto_integ_submit, 1);
    return st;
}

/* Inlined into each of gw_put, gw_get and gw_put_notify: each is then one
 * straight line for its own op (a small tracked put: the checks, then the
 * transport's put_direct, with no call of nine arguments and no tests of
 * op in between; under the Soft-RoCE guest's emulation every instruction
 * of it is on the 8-byte round trip). */
__attribute__((always_inline)) static inline gw_status_t rma(gw_ep_t *ep, int op, void *buf, size_t len,
                                                             gw_mem_t *lmem, uint64_t raddr, gw_rkey_t *rkey,
                                                             uint64_t value, gw_request_t **req)
{
    if (!ep)
        return GW_ERR_INVALID;
    if (req)
        *req = NULL;
    gw_status_t st;
    unsigned need = op == GW_OP_GET ? GW_ACCESS_REMOTE_READ : GW_ACCESS_REMOTE_WRITE;
    if ((st = ep_usable(ep, op)) ||
        (st = check_local(ep, op, buf, len, lmem)) || (st = check_remote(ep, op, len, raddr, rkey, need)))
        return st;
    /* a local GPU buffer the protocol layer stages (proto.h) */
    if (GW_UNLIKELY(lmem != NULL) && lmem->type == GW_MEM_CUDA && ep->ctx->gpu_staged[ep->tl_id])
        return rma_staged(ep, op, buf, len, lmem, raddr, rkey, value, req);
    /* a small put the transport posts before our request exists (tl.h
     * put_direct): the doorbell first, the bookkeeping after it */
    if (op == GW_OP_PUT && ep->ops->put_direct != gw_tl_unsupported_put_direct) {
        if (!req) {
            if (ep->ops->put_direct(ep->tl, buf, len, lmem, raddr, rkey, NULL, NULL) == GW_OK)
                return GW_OK; /* posted with no request of ours */
        } else if (gw_req_spare(&ep->ctx->core)) { /* (make() cannot fail after the post) */
            rma_make_t a = {.ep = ep, .buf = buf, .len = len, .lmem = lmem, .raddr = raddr, .rkey = rkey,
                            .user = req};
            st = ep->ops->put_direct(ep->tl, buf, len, lmem, raddr, rkey, rma_make, &a);
            if (st != GW_ERR_UNSUPPORTED)
                return st;
        }
    }
    /* the transport's shortcut (tl.h rma_now) first: the caller's request,
     * if it wants one, is taken before, so that a copy done is never
     * followed by an out-of-memory error */
    gw_request_t *r = req ? new_req(ep, op, req) : NULL;
    if (req && !r)
        return gw_err(&ep->ctx->core, GW_ERR_NOMEM, "%s: out of memory for a request", op_name(op));
    if (op != GW_OP_PUT_NOTIFY && ep->ops->rma_now != gw_tl_unsupported_rma_now && /* (no call where there is none) */
        ep->ops->rma_now(ep->tl, op, buf, len, lmem, raddr, rkey) == GW_OK) {
        if (r) {
            r->len = r->length = len;
            r->raddr = raddr;
            gw_req_complete(r, GW_OK);
            *req = r;
        }
        return GW_OK;
    }
    if (op == GW_OP_PUT_NOTIFY && GW_UNLIKELY(ep->base.integ != NULL || ep->integ_refused))
        return put_notify_checked(ep, buf, len, lmem, raddr, rkey, value, req, r, ep->ops->submit);
    if (!r && !(r = new_req(ep, op, req)))
        return gw_err(&ep->ctx->core, GW_ERR_NOMEM, "%s: out of memory for a request", op_name(op));
    rma_args(r, buf, len, lmem, raddr, rkey, value);
    return submit(ep, r, req, ep->ops->submit, 1);
}

gw_status_t gw_put(gw_ep_t *ep, const void *buf, size_t len, gw_mem_t *lmem, uint64_t raddr, gw_rkey_t *rkey,
                   gw_request_t **req)
{
    GW_API_LOCK(GW_CTX_OF_EP(ep));
    return rma(ep, GW_OP_PUT, (void *)buf, len, lmem, raddr, rkey, 0, req);
}

gw_status_t gw_get(gw_ep_t *ep, void *buf, size_t len, gw_mem_t *lmem, uint64_t raddr, gw_rkey_t *rkey,
                   gw_request_t **req)
{
    GW_API_LOCK(GW_CTX_OF_EP(ep));
    return rma(ep, GW_OP_GET, buf, len, lmem, raddr, rkey, 0, req);
}

gw_status_t gw_put_notify(gw_ep_t *ep, const void *buf, size_t len, gw_mem_t *lmem, uint64_t raddr,
                          gw_rkey_t *rkey, uint64_t value, gw_request_t **req)
{
    GW_API_LOCK(GW_CTX_OF_EP(ep));
    return rma(ep, GW_OP_PUT_NOTIFY, (void *)buf, len, lmem, raddr, rkey, value, req);
}

gw_status_t gw_send(gw_ep_t *ep, const void *buf, size_t len, gw_mem_t *lmem, uint64_t tag, gw_request_t **req)
{
    GW_API_LOCK(GW_CTX_OF_EP(ep));
    if (!ep)
        return GW_ERR_INVALID;
    if (req)
        *req = NULL;
    gw_status_t st;
    if ((st = ep_usable(ep, GW_OP_SEND)) || (st = check_local(ep, GW_OP_SEND, buf, len, lmem)))
        return st;
    if (GW_UNLIKELY(tag == GW_INTEG_TAG) && ep->base.integ)
        return gw_err(&ep->ctx->core, GW_ERR_INVALID,
                      "gw_send: tag 0x%llx is reserved for the integrity check's messages on this endpoint",
                      (unsigned long long)tag);
    /* a small host message the transport sends at once (tl.h send_now):
     * no request is built for it, and a caller that wants one gets it
     * complete (taken from the pool first, so that a message sent is never
     * followed by an out-of-memory error) */
    if ((!lmem || lmem->type == GW_MEM_HOST) && ep->ops->send_now != gw_tl_unsupported_send_now &&
        (!req || gw_req_spare(&ep->ctx->core)) &&
        ep->ops->send_now(ep->tl, buf, len, tag) == GW_OK) {
        if (req) {
            gw_request_t *d = new_req(ep, GW_OP_SEND, req);
            d->buf = (void *)buf;
            d->len = d->length = len;
            d->lmem = lmem;
            d->value = tag;
            gw_req_complete(d, GW_OK);
            *req = d;
        }
        return GW_OK;
    }
    gw_request_t *r = new_req(ep, GW_OP_SEND, req);
    if (!r)
        return gw_err(&ep->ctx->core, GW_ERR_NOMEM, "gw_send: out of memory for a request");
    r->buf = (void *)buf;
    r->len = len;
    r->lmem = lmem;
    r->value = tag;
    return submit(ep, r, req, ep->ops->submit, 1);
}

/* A receive: an unexpected message it matches is taken now, else it waits
 * on the posted list (inline into gw_recv through submit). */
__attribute__((always_inline)) static inline gw_status_t recv_post(gw_tl_ep_t *tl, gw_request_t *r)
{
    gw_ep_t *ep = r->ep;
    gw_unexp_t *u = gw_ep_match_unexp(&ep->base, r->value, r->mask);
    if (GW_LIKELY(!u)) {
        gw_ep_work_begins(&ep->base);
        r->flags |= GW_REQF_QUEUED;
        gw_list_push_back(&ep->base.posted, &r->link);
        return GW_OK;
    }
    /* an eager payload is copied now, a rendezvous started by the transport */
    return gw_ep_recv_unexp(&ep->base, r, u, ep->ops->recv_matched, tl);
}

gw_status_t gw_recv(gw_ep_t *ep, void *buf, size_t len, gw_mem_t *lmem, uint64_t tag, uint64_t mask,
                    gw_request_t **req)
{
    GW_API_LOCK(GW_CTX_OF_EP(ep));
    if (!ep)
        return GW_ERR_INVALID;
    if (req)
        *req = NULL;
    gw_status_t st;
    if ((st = check_local(ep, GW_OP_RECV, buf, len, lmem)))
        return st;
    if ((st = ep_usable(ep, GW_OP_RECV))) {
        /* a whole message that arrived before the endpoint failed or the peer
         * closed it can still be received */
        gw_unexp_t *u = gw_ep_peek_unexp(&ep->base, tag, mask);
        if (!u || !u->data)
            return st;
    }
    gw_request_t *r = new_req(ep, GW_OP_RECV, req);
    if (!r)
        return gw_err(&ep->ctx->core, GW_ERR_NOMEM, "gw_recv: out of memory for a request");
    r->buf = buf;
    r->len = len;
    r->lmem = lmem;
    r->value = tag;
    r->mask = mask;
    /* a transport whose provider matches tags (ep_base.h tl_recv) takes it
     * whole, unless the integrity check's messages share the queues */
    if (ep->base.tl_recv && !ep->base.integ && ep->base.error == GW_OK)
        return submit(ep, r, req, ep->base.tl_recv, 0);
    return submit(ep, r, req, recv_post, 0);
}

gw_status_t gw_flush(gw_ep_t *ep, gw_request_t **req)
{
    GW_API_LOCK(GW_CTX_OF_EP(ep));
    if (!ep)
        return GW_ERR_INVALID;
    if (req)
        *req = NULL;
    gw_status_t st = ep_usable(ep, GW_OP_FLUSH);
    if (st != GW_OK)
        return st;
    gw_request_t *r = new_req(ep, GW_OP_FLUSH, req);
    if (!r)
        return gw_err(&ep->ctx->core, GW_ERR_NOMEM, "gw_flush: out of memory for a request");
    r->err_sink = NULL;
    r->flags |= GW_REQF_USER;
    gw_ep_flush_start(&ep->base, r);
    if (!req)
        r->flags &= (uint8_t)~GW_REQF_USER;
    if (req)
        *req = r;
    else if (r->status != GW_INPROGRESS)
        gw_req_release(r);
    return GW_OK;
}

static int notify_ready(void *arg)
{
    gw_ep_t *ep = arg;
    return ep->base.notify_count > 0 || ep->base.error != GW_OK;
}

/* Takes the oldest notification: GW_OK, GW_ERR_INTEGRITY (it failed the
 * check: *value is its value, the detail the context's last error), or
 * GW_INPROGRESS when none is queued. */
static gw_status_t notify_take(gw_ep_t *ep, uint64_t *value)
{
    char *detail = NULL;
    int r = gw_ep_notify_pop(&ep->base, value, &detail);
    if (r < 0)
        return GW_INPROGRESS;
    if (r == 0)
        return GW_OK;
    gw_status_t st = gw_err(&ep->ctx->core, GW_ERR_INTEGRITY, "gw_notify_wait: the notification %llu from %s: %s",
                            (unsigned long long)*value, ep->base.peer, detail ? detail : "failed the integrity check");
    free(detail);
    return st;
}

gw_status_t gw_notify_wait(gw_ep_t *ep, int timeout_ms, uint64_t *value)
{
    GW_API_LOCK(GW_CTX_OF_EP(ep));
    if (!ep || !value)
        return gw_api_invalid(ep ? &ep->ctx->core : NULL, "gw_notify_wait", "value is NULL");
    gw_status_t st = notify_take(ep, value);
    if (st != GW_INPROGRESS)
        return st;
    if (ep->base.error != GW_OK)
        return ep_usable(ep, GW_OP_PUT_NOTIFY);
    if (timeout_ms == 0) {
        gw_progress(ep->ctx);
        return notify_take(ep, value);
    }
    gw_ctx_progress_until(ep->ctx, notify_ready, ep, timeout_ms);
    if ((st = notify_take(ep, value)) != GW_INPROGRESS)
        return st;
    if (ep->base.error != GW_OK)
        return ep_usable(ep, GW_OP_PUT_NOTIFY);
    return gw_err(&ep->ctx->core, GW_ERR_TIMEOUT, "gw_notify_wait: no notification from %s within %d ms",
                  ep->base.peer, timeout_ms);
}

/* ---- for the batched transfers (api/batch.c) ---------------------------------------- */
gw_status_t gw_api_ep_usable(gw_ep_t *ep, int op)
{
    return ep_usable(ep, op);
}

gw_request_t *gw_api_new_req(gw_ep_t *ep, int op, gw_request_t **user)
{
    return new_req(ep, op, user);
}

gw_status_t gw_api_submit(gw_ep_t *ep, gw_request_t *r, gw_request_t **user,
                          gw_status_t (*fn)(gw_tl_ep_t *, gw_request_t *))
{
    return submit(ep, r, user, fn, 1);
}
