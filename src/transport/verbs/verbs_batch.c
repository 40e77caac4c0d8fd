/* SPDX-License-Identifier: Apache-2.0 */
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
 * chunk boundaries on both sides and the port's largest message.  A pass
 * fills the send queues, each queue pair's WRs one chain as deep as its
 * send queue (struct batch, verbs.h), and the pass's closing flush posts
 * each chain with one ibv_post_send (one doorbell per queue pair per pass,
 * signalled every depth/4th WR and at the chain's end); the request
 * completes when the completions of all its WRs are in.  The api layer
 * has already merged adjacent entries.
 *
 * Notification: once every data WR is posted and every other queue pair has
 * drained (as a put_notify), a CT_NOTIFY message on QP 0; status 1 marks a
 * counted one.
 *
 * A batch touching GPU memory on the staging rung (no NIC registration) on
 * either side goes through bounce buffers instead (gw_verbs_stg_batch_start,
 * verbs_stage.c "staged batches"): chunks gathered and scattered by the
 * copy kernel, one launch per chunk, RDMA from the bounce buffers, and a
 * staged owner serving chunk requests with piece lists.  Its limits: the
 * local GPU regions of one batch on one device, and the remote keys all
 * staged or all registered (else GW_ERR_UNSUPPORTED, saying which).
 * A revoked key makes the target's NIC refuse the access: the queue pair,
 * and so the endpoint, fails, as for a single put (a staged owner refuses
 * the chunk instead, naming the entry; the endpoint stays up).
 */
#include "transport/base/batch.h"
#include "transport/verbs/verbs.h"

#include <string.h>


/* rkey of the remote piece holding raddr in key k, and the bytes left in it; -1 bad key */
static int vb_remote_piece(const gw_rkey_t *k, uint64_t raddr, uint32_t *rkey, uint64_t *left)
{
    return gw_verbs_key_piece(gw_verbs_rkey_of(k), raddr, rkey, left);
}

/* The batch's regions can all be reached: GW_OK, else why not; *staged
 * set when some side is GPU memory on the staging rung. */
static gw_status_t vb_check(gw_verbs_ep_t *ep, const gw_batch_t *b, int *staged)
{
    int lst = 0, dev = -1, devs = 0;
    uint32_t rst = 0;
    for (uint32_t i = 0; i < b->nlmem; i++) {
        const gw_mem_t *m = b->lmem[i];
        lst |= gw_verbs_mem_staged(m);
        if (m->type == GW_MEM_CUDA && m->cuda_device != dev)
            dev = m->cuda_device, devs++;
        if (!m->tl_reg[GW_TL_VERBS] && !gw_verbs_mem_staged(m))
            return gw_err(ep_core(ep), GW_ERR_UNSUPPORTED,
                          "verbs gw_xfer_batch: the local region [%p, +%zu) has no verbs registration", m->addr,
                          m->len);
    }
    for (uint32_t i = 0; i < b->nrkey; i++)
        rst += gw_verbs_rkey_staged(&b->rkey[i]) ? 1u : 0u;
    *staged = b->n && (lst || rst);
    if (!*staged)
        goto keys;
    if (lst && devs > 1)
        return gw_err(ep_core(ep), GW_ERR_UNSUPPORTED,
                      "verbs gw_xfer_batch: the local GPU regions are on several devices and some are on the "
                      "staging rung; a staged batch gathers on one device (split the batch by device)");
    if (rst && rst != b->nrkey)
        return gw_err(ep_core(ep), GW_ERR_UNSUPPORTED,
                      "verbs gw_xfer_batch: %u of the %u remote regions are GPU memory their owner stages, the "
                      "others NIC-registered; a batch moves one kind (split the batch)", rst, b->nrkey);
    if (rst && !(ep->local.features & ep->peer.features & GW_VERBS_FEAT_SBATCH))
        return gw_err(ep_core(ep), GW_ERR_UNSUPPORTED,
                      "verbs gw_xfer_batch: the peer %s stages the remote GPU memory but does not serve "
                      "batched chunk requests (an older gpuwire)", ep->peer.dev);
    return GW_OK;
keys:
    for (uint32_t i = 0; i < b->nrkey; i++) {
        const gw_rkey_t *k = &b->rkey[i];
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
        int staged = 0;
        gw_status_t st = vb_check(ep, bt, &staged);
        if (st != GW_OK) {
            gw_ep_op_done(ep->super.base, req, st);
            return 1;
        }
        if (staged)
            return gw_verbs_stg_batch_start(ep, b, req);
        req->tl_flags |= TLF_PREP;
    }
    int kind = bt->get ? WR_GET : WR_PUT;
    uint64_t maxmsg = ep->peer.max_msg ? GW_MIN(ep->peer.max_msg, ep->local.max_msg) : UINT64_MAX;
    while (!(req->tl_flags & TLF_DATA) && verbs_rq(req)->batch.ent < bt->n) {
        const gw_batch_ent_t *e = &bt->ent[verbs_rq(req)->batch.ent];
        uint64_t off = verbs_rq(req)->batch.off;
        int nq = e->len >= ep->vif->split_min ? ep->nqps : 1;
        uint64_t stripe = e->len;
        if (nq > 1) {
            stripe = (e->len + (uint64_t)nq - 1) / (uint64_t)nq;
            stripe = (stripe + 4095) & ~(uint64_t)4095;
        }
        int qi = (int)(verbs_rq(req)->stripe % (uint64_t)ep->nqps);
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
        gw_verbs_wr_rdma(w, bt->get, e->raddr + off, rkey, e->laddr + off, (uint32_t)piece, lkey);
        req->posted += (size_t)piece;
        verbs_rq(req)->stripe++;
        if (off + piece < e->len) {
            verbs_rq(req)->batch.off = off + piece;
        } else {
            verbs_rq(req)->batch.off = 0;
            verbs_rq(req)->batch.ent++;
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

