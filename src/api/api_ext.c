/* SPDX-License-Identifier: Apache-2.0 */
/* api_ext.c - cancel, many requests at once, probe of unexpected messages,
 * listener statistics. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "proto/proto.h"

/* ---- cancel ------------------------------------------------------------------------ */
/* A receive no message matched yet sits on its endpoint's posted list, a
 * waiting flush on the flush list (GW_REQF_QUEUED, see ep_base.h); both can
 * go without the peer noticing.  Anything else has started to move data. */
static int withdrawable(const gw_request_t *r)
{
    return (r->flags & GW_REQF_QUEUED) && (r->op == GW_OP_RECV || r->op == GW_OP_FLUSH);
}

static void withdraw(gw_request_t *r, const char *how)
{
    gw_list_del(&r->link);
    r->flags &= (uint8_t)~GW_REQF_QUEUED;
    char d[160];
    snprintf(d, sizeof(d), "%s(len=%zu%s): %s", r->op == GW_OP_RECV ? "gw_recv" : "gw_flush", r->len,
             r->op == GW_OP_RECV ? ", a receive no message matched" : "", how);
    r->detail = strdup(d);
    gw_req_complete(r, GW_ERR_CANCELED);
}

/* The bytes an operation moves, for the messages below. */
static size_t op_bytes(const gw_request_t *r)
{
    return r->op == GW_OP_BATCH && r->batch ? (size_t)r->batch->total : r->len;
}

/* The request is past withdrawal: it is watched from now on (the cancel
 * watch below) and must end within GPUWIRE_OP_TIMEOUT_MS. */
static void watch(gw_request_t *r)
{
    if (r->flags & GW_REQF_CANCEL)
        return;
    r->flags |= GW_REQF_CANCEL;
    r->core->n_canceling++;
    r->cancel_ns = gw_now_ns() + (uint64_t)r->core->op_timeout_ms * 1000000ull;
}

gw_status_t gw_request_cancel(gw_request_t *req)
{
    GW_API_LOCK(req ? GW_CTX_OF_CORE(req->core) : NULL);
    if (!req)
        return GW_ERR_INVALID;
    if (req->status != GW_INPROGRESS)
        return GW_OK;
    if (withdrawable(req)) {
        withdraw(req, "canceled by gw_request_cancel()");
        return GW_OK;
    }
    gw_ep_t *ep = req->ep;
    if (req->op == GW_OP_RECV && ep && ep->tl && ep->base.tl_recv) {
        /* a receive the transport posted to its provider (ep_base.h
         * tl_recv): it withdraws it there and completes it, GW_ERR_CANCELED,
         * or the message that matched it first */
        ep->ops->cancel(ep->tl, req);
        return req->status != GW_INPROGRESS ? GW_OK : GW_INPROGRESS;
    }
    /* (a put or get the protocol layer staged, req->owner set, is its own:
     * the transport never saw it, and its chunks are let finish) */
    int expanded = gw_proto_batch_expanded(req);
    if (ep && ep->tl && ep->ops && !gw_ep_failed(&ep->base) && (req->flags & GW_REQF_QUEUED) &&
        req->op != GW_OP_RECV && req->op != GW_OP_FLUSH && (expanded || !req->owner)) {
        /* an operation on the outstanding list: the transport (or, for a
         * batch it expanded, the protocol layer) withdraws what is not on
         * the wire yet */
        gw_status_t st = expanded ? gw_proto_batch_cancel(ep->tl, req) : ep->ops->cancel(ep->tl, req);
        if (st == GW_OK && req->status == GW_INPROGRESS) { /* nothing of it on the wire any more */
            if (!req->detail) {
                const char *what = req->op == GW_OP_PUT ? "gw_put" : req->op == GW_OP_GET ? "gw_get"
                                   : req->op == GW_OP_PUT_NOTIFY ? "gw_put_notify" : req->op == GW_OP_SEND ? "gw_send"
                                   : "gw_xfer_batch";
                char d[240];
                if (req->done) /* pieces the peer had answered before the rest was withdrawn */
                    snprintf(d, sizeof(d),
                             "%s(len=%zu): canceled by gw_request_cancel(): the parts still queued were withdrawn, "
                             "after %zu bytes had moved", what, op_bytes(req), req->done);
                else
                    snprintf(d, sizeof(d), "%s(len=%zu): canceled by gw_request_cancel() before any of it reached the wire",
                             what, op_bytes(req));
                req->detail = strdup(d);
            }
            req->length = req->done;
            gw_ep_op_done(&ep->base, req, GW_ERR_CANCELED);
        }
        if (req->status != GW_INPROGRESS)
            return GW_OK;
    }
    watch(req);
    return GW_INPROGRESS;
}

void gw_api_cancel_watch(gw_context_t *ctx)
{
    uint64_t now = gw_now_coarse_ns();
    if (now - ctx->cancel_watch_ns < 10000000ull) /* every 10 ms at most */
        return;
    ctx->cancel_watch_ns = now;
    gw_list_t *e;
    for (e = ctx->eps.next; e != &ctx->eps; e = e->next) {
        gw_ep_t *ep = gw_container_of(e, gw_ep_t, link);
        if (gw_ep_failed(&ep->base))
            continue;
        for (gw_list_t *p = ep->base.outstanding.next; p != &ep->base.outstanding; p = p->next) {
            gw_request_t *r = gw_container_of(p, gw_request_t, link);
            if (!(r->flags & GW_REQF_CANCEL) || now < r->cancel_ns)
                continue;
            long ms = ctx->core.op_timeout_ms;
            gw_ep_fail(&ep->base, GW_ERR_PEER_TIMEOUT,
                       "%s of %zu bytes, canceled, was still on the wire %ld ms later "
                       "(GPUWIRE_OP_TIMEOUT_MS=%ld): the endpoint fails so that nothing of it moves any more",
                       r->op == GW_OP_PUT ? "a put" : r->op == GW_OP_GET ? "a get"
                       : r->op == GW_OP_PUT_NOTIFY ? "a put_notify" : r->op == GW_OP_SEND ? "a send"
                       : r->op == GW_OP_BATCH ? "a batch" : "an operation",
                       op_bytes(r), ms, ms);
            break;
        }
    }
}

/* gw_request_free() of a receive nobody matched: withdraw it, or it would
 * take (and drop) a later message meant for another receive. */
void gw_api_withdraw_freed_slow(gw_request_t *req)
{
    if (req->op == GW_OP_RECV && withdrawable(req))
        withdraw(req, "freed by gw_request_free() before a message matched");
    else if (req->op == GW_OP_RECV && req->status == GW_INPROGRESS && req->ep && req->ep->tl &&
             req->ep->base.tl_recv) /* posted to the transport's provider: withdrawn there */
        req->ep->ops->cancel(req->ep->tl, req);
}

/* ---- many requests ----------------------------------------------------------------- */
/* The context of the first request among reqs (where a refusal is told). */
static gw_core_t *first_core(gw_request_t *const *reqs, size_t n)
{
    for (size_t i = 0; reqs && i < n; i++)
        if (reqs[i])
            return reqs[i]->core;
    return NULL;
}

gw_status_t gw_request_test_many(gw_request_t *const *reqs, size_t n, size_t *done_idx, size_t *ndone)
{
    GW_API_LOCK(GW_CTX_OF_CORE(first_core(reqs, n)));
    if (!reqs || !done_idx || !ndone)
        return gw_api_invalid(first_core(reqs, n), "gw_request_test_many", "%s is NULL",
                              !reqs ? "reqs" : !done_idx ? "done_idx" : "ndone");
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (reqs[i] && reqs[i]->status != GW_INPROGRESS)
            done_idx[k++] = i;
    *ndone = k;
    return GW_OK;
}

typedef struct any_state {
    gw_request_t *const *reqs;
    size_t n;
    gw_core_t *core;
    uint64_t seen;  /* core->n_completed at the last scan */
    size_t found;
} any_state_t;

static int any_done(void *arg)
{
    any_state_t *a = arg;
    if (a->core->n_completed == a->seen)
        return 0; /* nothing completed since the last scan */
    a->seen = a->core->n_completed;
    for (size_t i = 0; i < a->n; i++) {
        if (a->reqs[i] && a->reqs[i]->status != GW_INPROGRESS) {
            a->found = i;
            return 1;
        }
    }
    return 0;
}

gw_status_t gw_request_wait_any(gw_request_t *const *reqs, size_t n, int timeout_ms, size_t *index)
{
    if (!reqs || !index)
        return gw_api_invalid(first_core(reqs, n), "gw_request_wait_any", "%s is NULL", !reqs ? "reqs" : "index");
    gw_core_t *core = NULL;
    for (size_t i = 0; i < n; i++) {
        if (!reqs[i])
            continue;
        if (core && reqs[i]->core != core)
            return gw_err(core, GW_ERR_INVALID, "gw_request_wait_any: requests %zu and earlier ones belong to "
                          "different contexts", i);
        core = reqs[i]->core;
    }
    if (!core)
        return GW_ERR_INVALID;
    GW_API_LOCK(GW_CTX_OF_CORE(core));
    /* seen != n_completed forces the first scan */
    any_state_t a = {.reqs = reqs, .n = n, .core = core, .seen = core->n_completed - 1, .found = 0};
    gw_context_t *ctx = gw_container_of(core, gw_context_t, core);
    gw_status_t st = gw_ctx_progress_until(ctx, any_done, &a, timeout_ms);
    if (st == GW_ERR_TIMEOUT)
        return gw_err(core, GW_ERR_TIMEOUT, "gw_request_wait_any: none of %zu request(s) completed within %d ms",
                      n, timeout_ms);
    *index = a.found;
    return GW_OK;
}

/* ---- probe ------------------------------------------------------------------------- */
gw_status_t gw_probe(gw_ep_t *ep, uint64_t tag, uint64_t mask, gw_probe_info_t *info)
{
    GW_API_LOCK(GW_CTX_OF_EP(ep));
    if (!ep || !GW_API_SIZE_OK(info))
        return gw_api_bad_struct(ep ? &ep->ctx->core : NULL, "gw_probe", "info", info ? &info->size : NULL);
    gw_progress(ep->ctx);
    if (ep->base.tl_probe && !ep->base.integ && ep->tl) { /* the provider keeps unexpected messages */
        size_t len = 0;
        uint64_t rtag = 0;
        gw_status_t st = ep->base.tl_probe(ep->tl, tag, mask, &len, &rtag);
        if (st == GW_OK) {
            gw_probe_info_t o = {.size = info->size, .length = len, .tag = rtag};
            memcpy(info, &o, GW_MIN(info->size, sizeof(o)));
            return GW_OK;
        }
        if (st != GW_INPROGRESS)
            return st;
    }
    gw_unexp_t *u = gw_ep_peek_unexp(&ep->base, tag, mask);
    if (!u) {
        if (ep->base.error != GW_OK)
            return gw_err(&ep->ctx->core, GW_ERR_ENDPOINT_FAILED,
                          "gw_probe: endpoint to %s failed earlier: %s (%s); no message is queued", ep->base.peer,
                          ep->base.error_detail, gw_status_name(ep->base.error));
        return GW_INPROGRESS;
    }
    gw_probe_info_t o = {.size = info->size, .length = u->len, .tag = u->tag};
    memcpy(info, &o, GW_MIN(info->size, sizeof(o)));
    return GW_OK;
}

/* ---- listener statistics ----------------------------------------------------------- */
gw_status_t gw_listener_query(const gw_listener_t *l, gw_listener_info_t *info)
{
    GW_API_LOCK(l ? l->ctx : NULL);
    if (!l || !GW_API_SIZE_OK(info))
        return gw_api_bad_struct(l ? &l->ctx->core : NULL, "gw_listener_query", "info", info ? &info->size : NULL);
    gw_listener_info_t o;
    memset(&o, 0, sizeof(o));
    o.size = info->size;
    snprintf(o.addr, sizeof(o.addr), "%s", l->addr);
    o.accepted = l->accepted;
    o.ready = (unsigned long)gw_list_len(&l->ready);
    o.pending = (unsigned long)(gw_list_len(&l->pending) + gw_list_len(&l->joining));
    o.failed_handshakes = l->failed_handshakes;
    o.last_failure = l->last_failure;
    snprintf(o.last_failure_detail, sizeof(o.last_failure_detail), "%s", l->last_failure_detail);
    memcpy(info, &o, GW_MIN(info->size, sizeof(o)));
    return GW_OK;
}
