/* verbs_batch.c - batched put/get over verbs (GW_OP_BATCH requests of the `submit` op).
 *
 * It posts through verbs_post.c's work-request batches (gw_verbs_wr_add;
 * gw_verbs_post_pending flushes them) and completes through the request
 * accounting of verbs_cq.c (req->pending, TLF_ALLPOSTED,
 * gw_verbs_req_maybe_done).
 *
 * A batch is one request on the endpoint's pending list.  Each progress pass
 * turns as many of its entries as the batch and the send queues take into
 * RDMA WRITE (put) or READ (get) work requests: an entry of at least
 * GPUWIRE_IB_SPLIT_MIN is striped over the queue pairs (4 KiB-aligned
 * pieces), smaller entries go round-robin over them; pieces respect MR
 * chunk boundaries on both sides and the port's largest message.  The WRs of
 * a pass go out with one ibv_post_send per queue pair (one doorbell), only
 * the last of each post signalled (and every depth/4th, as everywhere), and
 * the request completes when the completions of all its WRs are in.  The
 * api layer has already merged adjacent entries.
 *
 * Notification: once every data WR is posted and every other queue pair has
 * drained (as a put_notify), a CT_NOTIFY message on QP 0; status 1 marks a
 * counted one.
 *
 * Both sides' regions must be registered with the NIC (host memory, or GPU
 * memory through dma-buf/peermem): a batch touching staged GPU memory is
 * refused with GW_ERR_UNSUPPORTED.  A revoked key makes the target's NIC
 * refuse the access: the queue pair, and so the endpoint, fails, as for a
 * single put.
 */
#include "transport/base/batch.h"
#include "transport/verbs/verbs.h"

#include <string.h>


/* rkey of the remote piece holding raddr in key k, and the bytes left in it; -1 bad key */
static int vb_remote_piece(const gw_rkey_t *k, uint64_t raddr, uint32_t *rkey, uint64_t *left)
{
    return gw_verbs_key_piece(gw_verbs_rkey_of(k), raddr, rkey, left);
}

/* The batch's regions can all be reached by the NIC: GW_OK, else why not. */
static gw_status_t vb_check(gw_verbs_ep_t *ep, const gw_batch_t *b)
{
    for (uint32_t i = 0; i < b->nlmem; i++) {
        const gw_mem_t *m = b->lmem[i];
        if (!m->tl_reg[GW_TL_VERBS])
            return gw_err(ep_core(ep), GW_ERR_UNSUPPORTED,
                          "verbs gw_xfer_batch: the local region [%p, +%zu) is not registered with the NIC (%s); "
                          "batches move registered memory only", m->addr, m->len,
                          gw_verbs_mem_staged(m) ? "GPU memory on the staging rung" : "no verbs registration");
    }
    for (uint32_t i = 0; i < b->nrkey; i++) {
        const gw_rkey_t *k = &b->rkey[i];
        if (gw_verbs_rkey_staged(k))
            return gw_err(ep_core(ep), GW_ERR_UNSUPPORTED,
                          "verbs gw_xfer_batch: the remote region 0x%llx is GPU memory its owner stages "
                          "(no NIC registration); batches move registered memory only",
                          (unsigned long long)k->addr);
        uint32_t rk;
        uint64_t left;
        if (k->len && vb_remote_piece(k, k->addr, &rk, &left) != 0)
            return gw_err(ep_core(ep), GW_ERR_INVALID_KEY,
                          "verbs gw_xfer_batch: the remote key of 0x%llx carries no usable verbs part",
                          (unsigned long long)k->addr);
    }
    return GW_OK;
}

/* Posts what fits of a batch.  1: done with it here (all posted, or it
 * failed and was completed); 0: blocked (stays pending). */
int gw_verbs_batch_post(gw_verbs_ep_t *ep, batch_t *b, gw_request_t *req)
{
    const gw_batch_t *bt = req->batch;
    if (!(req->tl_flags & TLF_PREP)) {
        gw_status_t st = vb_check(ep, bt);
        if (st != GW_OK) {
            gw_ep_op_done(ep->super.base, req, st);
            return 1;
        }
        req->tl_flags |= TLF_PREP;
    }
    int kind = bt->get ? WR_GET : WR_PUT;
    uint64_t maxmsg = ep->peer.max_msg ? GW_MIN(ep->peer.max_msg, ep->local.max_msg) : UINT64_MAX;
    while (!(req->tl_flags & TLF_DATA) && req->verbs.batch.ent < bt->n) {
        const gw_batch_ent_t *e = &bt->ent[req->verbs.batch.ent];
        uint64_t off = req->verbs.batch.off;
        int nq = e->len >= ep->vif->split_min ? ep->nqps : 1;
        uint64_t stripe = e->len;
        if (nq > 1) {
            stripe = (e->len + (uint64_t)nq - 1) / (uint64_t)nq;
            stripe = (stripe + 4095) & ~(uint64_t)4095;
        }
        int qi = (int)(req->verbs.stripe % (uint64_t)ep->nqps);
        if (!qp_room(ep, b, qi))
            return 0;
        uint32_t rkey = 0, lkey = 0;
        uint64_t rleft = 0, lleft = 0;
        if (vb_remote_piece(&bt->rkey[e->rreg], e->raddr + off, &rkey, &rleft) != 0 ||
            gw_verbs_reg_piece(bt->lmem[e->lreg]->tl_reg[GW_TL_VERBS], e->laddr + off, &lkey, NULL, &lleft) != 0) {
            if (req->pending) { /* (cannot happen: vb_check looked at every key) */
                req->tl_flags |= TLF_ALLPOSTED;
                return 1;
            }
            gw_ep_op_done(ep->super.base, req,
                          gw_err(ep_core(ep), GW_ERR_INVALID_KEY, "verbs gw_xfer_batch: no key for entry at "
                                 "0x%llx", (unsigned long long)(e->raddr + off)));
            return 1;
        }
        uint64_t piece = GW_MIN(GW_MIN(e->len - off, stripe), GW_MIN(GW_MIN(rleft, lleft), maxmsg));
        struct ibv_send_wr *w = gw_verbs_wr_add(ep, b, qi, req, kind, -1, (uint32_t)piece);
        w->opcode = bt->get ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE;
        w->wr.rdma.remote_addr = e->raddr + off;
        w->wr.rdma.rkey = rkey;
        w->num_sge = 1;
        w->sg_list->addr = e->laddr + off;
        w->sg_list->length = (uint32_t)piece;
        w->sg_list->lkey = lkey;
        req->posted += (size_t)piece;
        req->verbs.stripe++;
        if (off + piece < e->len) {
            req->verbs.batch.off = off + piece;
        } else {
            req->verbs.batch.off = 0;
            req->verbs.batch.ent++;
        }
    }
    req->tl_flags |= TLF_DATA;
    if (bt->notify != GW_NOTIFY_NONE) {
        if (!gw_list_empty(&ep->stg_reqs))
            return 0; /* and every older staged operation */
        if (!gw_verbs_others_drained(ep, b)) /* every earlier write on the other QPs must have landed */
            return 0;
        int s = msg_slot(ep, b);
        if (s < 0)
            return 0;
        gw_verbs_hdr_fill(slot_ptr(ep, s), CT_NOTIFY, bt->notify == GW_NOTIFY_COUNTED ? 1 : 0, bt->value, 0, 0, 0, 0);
        gw_verbs_post_sendmsg(ep, b, req, s, GW_VERBS_HDR);
    }
    req->tl_flags |= TLF_ALLPOSTED;
    if (!req->pending) { /* an empty batch */
        req->length = 0;
        gw_ep_op_done(ep->super.base, req, GW_OK);
    }
    return 1;
}

