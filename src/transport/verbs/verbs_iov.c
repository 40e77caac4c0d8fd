/* SPDX-License-Identifier: Apache-2.0 */
/* verbs_iov.c - the scatter/gather primitive over verbs (tl.h rma_iov) and
 * the transport's cancel.
 *
 * A list (a GW_OP_BATCH request of host entries, no notification, every
 * local region registered) is one request on the endpoint's pending list,
 * posted by the progress engine as the native batches are (verbs_batch.c):
 * each pass turns what the send queues have room for into RDMA WRITEs (a
 * put) or READs (a get), each queue pair's WRs one chain posted with one
 * ibv_post_send at the pass's end.  What differs:
 *  - gathering: consecutive entries that continue each other on the remote
 *    side (the next one starts where the last ended, under the same MR
 *    key) go as one WR of several SGEs, one per entry, up to the device's
 *    max_sge (GW_VERBS_IOV_SGE at most; a READ up to max_sge_rd) and the
 *    path's largest message.  The api layer merged entries adjacent on both
 *    sides already, so this is a gather put from scattered local pieces
 *    into one remote range (or a READ scattering one range into them);
 *  - signalling: a chain holding a list's WRs is signalled once, at its
 *    end (its completion retires every WR before it: RC completes in
 *    order), rather than every depth/4-th WR;
 *  - accounting: retiring WRs add their bytes to req->done, so a list that
 *    fails (the endpoint fails: a completion error, ibv_post_send refusing
 *    a chain) reports the bytes its retired WRs moved, as the entries of
 *    the per-entry path that completed would.
 * An entry of GPUWIRE_IB_SPLIT_MIN or more is striped over the queue pairs
 * as in a batch; smaller ones go round-robin over them, one WR each or one
 * gathered WR.  A list with a remote key on the staging rung, a key
 * without a verbs part or a local region without a verbs registration is
 * not taken (GW_ERR_UNSUPPORTED: the protocol layer posts its entries one
 * by one, each going where a single put or get goes, staged GPU memory
 * included).
 *
 * Cancel: verbs withdraws nothing it has handed to the device.  A list
 * still being posted (the send queues were full, or it waits behind other
 * work) is cut where it stands: nothing more of it is posted, and it ends
 * with GW_ERR_CANCELED once its posted WRs have retired, its length the
 * bytes they moved (GW_OK at once when none is in flight).  A put, get or
 * put_notify of which nothing is posted yet (not staged) is withdrawn
 * whole; so the put_notify carrying an expanded batch's notification
 * behind its list is, and a canceled batch sends no notification.  Every
 * other request completes on its own (GW_INPROGRESS).
 */
#include "transport/base/batch.h"
#include "transport/verbs/verbs.h"

#include <stdlib.h>
#include <string.h>

/* Can the list go as verbs WRs from registered memory to MR keys? */
static int iov_takes(const gw_batch_t *bt)
{
    for (uint32_t i = 0; i < bt->nlmem; i++) {
        const gw_mem_t *m = bt->lmem[i];
        if (!m || !m->tl_reg[GW_TL_VERBS] || gw_verbs_mem_staged(m))
            return 0;
    }
    for (uint32_t i = 0; i < bt->nrkey; i++) {
        const gw_rkey_t *k = &bt->rkey[i];
        uint32_t rk;
        uint64_t left;
        if (gw_verbs_rkey_of(k)->version != GW_VERBS_RKEY_MR ||
            (k->len && gw_verbs_key_piece(gw_verbs_rkey_of(k), k->addr, &rk, &left) != 0))
            return 0;
    }
    return 1;
}

gw_status_t gw_verbs_rma_iov(gw_tl_ep_t *e, gw_request_t *req)
{
    gw_verbs_ep_t *ep = to_vep(e);
    const gw_batch_t *bt = req->batch;
    if (!bt || bt->notify != GW_NOTIFY_NONE || bt->lgpu || bt->rgpu || !iov_takes(bt))
        return GW_ERR_UNSUPPORTED;
    if (!ep->iov_pool && ep->iov_sge > 2) {
        ep->iov_pool = calloc(GW_VERBS_IOV_POOL, sizeof(*ep->iov_pool));
        if (!ep->iov_pool)
            ep->iov_sge = ep->iov_sge_rd = 2; /* (two SGEs fit each WR's own array) */
    }
    gw_status_t st = gw_verbs_submit_flags(ep, req, TLF_IOV);
    if (st == GW_OK)
        ep->iov_lists++;
    return st;
}

/* Takes n SGEs of the pass's pool (NULL when it has not that many left). */
static struct ibv_sge *pool_take(gw_verbs_ep_t *ep, batch_t *b, unsigned n)
{
    if (!ep->iov_pool || b->iov_used + n > GW_VERBS_IOV_POOL)
        return NULL;
    struct ibv_sge *s = ep->iov_pool + b->iov_used;
    b->iov_used += n;
    return s;
}

/* Adds the entries after the cursor that continue WR w on the remote side
 * (w's one SGE holds a whole entry) as further SGEs of it, while the limits
 * allow; returns the WR's length. */
static uint64_t gather(gw_verbs_ep_t *ep, batch_t *b, gw_request_t *req, struct ibv_send_wr *w, uint64_t maxmsg)
{
    const gw_batch_t *bt = req->batch;
    struct gw_req_verbs *v = verbs_rq(req);
    unsigned cap = (unsigned)(bt->get ? ep->iov_sge_rd : ep->iov_sge), nsge = 1, taken = 0;
    uint64_t wlen = w->sg_list[0].length;
    struct ibv_sge *sg = w->sg_list;
    while (nsge < cap && v->batch.ent < bt->n) {
        const gw_batch_ent_t *f = &bt->ent[v->batch.ent];
        uint32_t rk, lk;
        uint64_t rleft, lleft;
        if (f->len >= ep->vif->split_min || f->raddr != w->wr.rdma.remote_addr + wlen ||
            wlen + f->len > maxmsg || wlen + f->len > UINT32_MAX ||
            gw_verbs_key_piece(gw_verbs_rkey_of(&bt->rkey[f->rreg]), f->raddr, &rk, &rleft) != 0 ||
            rk != w->wr.rdma.rkey || rleft < f->len ||
            gw_verbs_reg_piece(bt->lmem[f->lreg]->tl_reg[GW_TL_VERBS], f->laddr, &lk, NULL, &lleft) != 0 ||
            lleft < f->len)
            break;
        if (nsge == 2 && !taken) { /* past the WR's own two: into the pool */
            struct ibv_sge *p = pool_take(ep, b, cap);
            if (!p)
                break;
            memcpy(p, sg, 2 * sizeof(*p));
            sg = w->sg_list = p;
            taken = cap;
        }
        sg[nsge].addr = f->laddr;
        sg[nsge].length = (uint32_t)f->len;
        sg[nsge].lkey = lk;
        nsge++;
        wlen += f->len;
        req->posted += (size_t)f->len;
        v->batch.ent++;
    }
    if (taken)
        b->iov_used -= taken - nsge; /* (the pool's tail is this WR's: give back what it left) */
    w->num_sge = (int)nsge;
    ep->iov_entries += nsge;
    return wlen;
}

/* Posts what fits of a list.  1: done with it here (all posted); 0:
 * blocked (stays pending). */
int gw_verbs_iov_post(gw_verbs_ep_t *ep, batch_t *b, gw_request_t *req)
{
    const gw_batch_t *bt = req->batch;
    struct gw_req_verbs *v = verbs_rq(req);
    int kind = bt->get ? WR_GET : WR_PUT;
    uint64_t maxmsg = ep->peer.max_msg ? GW_MIN(ep->peer.max_msg, ep->local.max_msg) : UINT64_MAX;
    while (v->batch.ent < bt->n) {
        const gw_batch_ent_t *e = &bt->ent[v->batch.ent];
        uint64_t off = v->batch.off;
        int nq = e->len >= ep->vif->split_min ? ep->nqps : 1;
        uint64_t stripe = e->len;
        if (nq > 1) {
            stripe = (e->len + (uint64_t)nq - 1) / (uint64_t)nq;
            stripe = (stripe + 4095) & ~(uint64_t)4095;
        }
        int qi = (int)(v->stripe % (uint64_t)ep->nqps);
        if (!qp_room(ep, b, qi))
            return 0;
        uint32_t rkey = 0, lkey = 0;
        uint64_t rleft = 0, lleft = 0;
        if (gw_verbs_key_piece(gw_verbs_rkey_of(&bt->rkey[e->rreg]), e->raddr + off, &rkey, &rleft) != 0 ||
            gw_verbs_reg_piece(bt->lmem[e->lreg]->tl_reg[GW_TL_VERBS], e->laddr + off, &lkey, NULL, &lleft) != 0) {
            /* (cannot happen: gw_verbs_rma_iov looked at every key and region) */
            gw_verbs_ep_die(ep, GW_ERR_INVALID_KEY, "verbs rma_iov: no key for entry %llu at remote 0x%llx",
                            (unsigned long long)v->batch.ent, (unsigned long long)(e->raddr + off));
            return 1;
        }
        uint64_t piece = GW_MIN(GW_MIN(e->len - off, stripe), GW_MIN(GW_MIN(rleft, lleft), maxmsg));
        struct ibv_send_wr *w = gw_verbs_wr_add(ep, b, qi, req, kind, -1, (uint32_t)piece);
        b->one_sig[qi] = 1;
        gw_verbs_wr_rdma(w, bt->get, e->raddr + off, rkey, e->laddr + off, (uint32_t)piece, lkey);
        req->posted += (size_t)piece;
        v->stripe++;
        ep->iov_wrs++;
        if (off + piece < e->len) {
            v->batch.off = off + piece;
            continue;
        }
        v->batch.off = 0;
        v->batch.ent++;
        if (off == 0 && nq == 1 && ep->iov_sge > 1) { /* a whole small entry: gather what continues it */
            uint64_t wlen = gather(ep, b, req, w, maxmsg);
            gw_verbs_ring_newest(&ep->qps[qi])->len = (uint32_t)wlen;
        } else {
            ep->iov_entries++;
        }
    }
    req->tl_flags |= TLF_ALLPOSTED;
    if (!req->pending) { /* an empty list */
        req->length = 0;
        gw_ep_op_done(ep->super.base, req, GW_OK);
    }
    return 1;
}

gw_status_t gw_verbs_cancel(gw_tl_ep_t *e, gw_request_t *req)
{
    gw_verbs_ep_t *ep = to_vep(e);
    if (vep_failed(ep) || (req->tl_flags & (TLF_ALLPOSTED | TLF_STAGED)))
        return GW_INPROGRESS; /* on the wire, or completing on its own */
    /* not fully posted: it waits on ep->pending (a pass never leaves it off the list) */
    if (req->op == GW_OP_BATCH && (req->tl_flags & TLF_IOV)) {
        gw_list_del(&req->tl_link);
        req->tl_flags |= TLF_ALLPOSTED | TLF_ICANCEL;
        if (req->pending)
            return GW_INPROGRESS; /* ends with GW_ERR_CANCELED when its last posted WR retires */
        req->done = req->posted;  /* (every posted WR has retired) */
        return GW_OK;
    }
    if ((req->op == GW_OP_PUT || req->op == GW_OP_GET || req->op == GW_OP_PUT_NOTIFY) && !req->pending &&
        !req->posted && !(req->tl_flags & TLF_DATA) && !gw_verbs_stg_applies(ep, req)) {
        /* nothing of it posted (the queues were full, or it waits behind
         * others): withdrawn whole, what it held given back */
        gw_list_del(&req->tl_link);
        gw_verbs_req_release(ep, req);
        req->done = 0;
        return GW_OK;
    }
    return GW_INPROGRESS;
}
