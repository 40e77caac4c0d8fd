/* SPDX-License-Identifier: Apache-2.0 */
/* verbs_cq.c - verbs completions and the receive side: polling the CQ,
 * retiring send WRs, incoming messages (eager, rendezvous control,
 * notifications), the progress pass and arming the CQ when idle.
 */
#include "cuda/cuda_wrap.h"
#include "mem/mem_copy.h"
#include "transport/verbs/verbs.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Before telling anyone that the NIC's writes into GPU memory are there
 * (a notification, a received message), make them visible to the GPU:
 * cuFlushGPUDirectRDMAWrites where the driver has it (mem/gpu_reg.h). */
static void gpu_fence(gw_verbs_ep_t *ep)
{
    if (!ep->vif->gpu_mrs)
        return;
    int flushed = 0;
    if (gw_cuda_flush_rdma_writes(&flushed) != GW_OK)
        gw_log(GW_LOG_WARN, "verbs: cuFlushGPUDirectRDMAWrites failed: %s", ep_core(ep)->errbuf);
}

void gw_verbs_req_maybe_done_slow(gw_verbs_ep_t *ep, gw_request_t *req)
{
    if (req == ep->lazy_group)
        ep->lazy_group = NULL; /* every untracked put of the group retired: the next opens another */
    gw_ep_base_t *base = ep->super.base;
    if (req->op == GW_OP_RECV) {
        /* rendezvous data is in place: release the sender, finish the receive */
        uint64_t opid = verbs_rq(req)->rdv.opid;
        size_t mlen = (size_t)verbs_rq(req)->rdv.mlen;
        gw_verbs_req_release(ep, req);
        gw_verbs_rdv_recv_forget(ep, req);
        gw_verbs_ctrl_queue(ep, CT_FIN, 0, opid, 0);
        if (req->lmem && req->lmem->type != GW_MEM_HOST)
            gpu_fence(ep);
        gw_ep_recv_done(base, req, mlen, req->rtag, GW_OK);
        return;
    }
    if (req->op == GW_OP_SEND && (req->tl_flags & TLF_WAIT_FIN))
        return; /* completes when the receiver's FIN arrives */
    if (req->tl_flags & TLF_ICANCEL) { /* a list cut short by cancel (verbs_iov.c): what its WRs moved */
        req->length = req->done;
        gw_ep_op_done(base, req, GW_ERR_CANCELED);
        return;
    }
    gw_status_t st = GW_OK;
    if (req->op == GW_OP_GET && verbs_rq(req)->slot) /* (GPU memory: one synchronous copy, gw_staging_copy_sync) */
        st = gw_mem_copy_to(req->core, req->lmem, req->buf, slot_ptr(ep, (int)verbs_rq(req)->slot - 1), req->len);
    req->length = req->len;
    gw_verbs_req_release(ep, req);
    gw_ep_op_done(base, req, st);
}

/* ---- receive side --------------------------------------------------------------------- */
/* Consumed receive buffers are handed back in one ibv_post_recv() per poll. */
static void repost_recv(gw_verbs_ep_t *ep, unsigned idx)
{
    ep->repost[ep->nrepost++] = (uint16_t)idx;
}

int gw_verbs_post_imm_recvs(gw_verbs_ep_t *ep, int *failed_qi)
{
    for (int qi = 1; qi < ep->nqps; qi++) {
        gw_verbs_qp_t *q = &ep->qps[qi];
        while (q->imm_repost) {
            struct ibv_recv_wr w[32], *bad;
            unsigned n = GW_MIN(q->imm_repost, 32u);
            for (unsigned i = 0; i < n; i++) {
                memset(&w[i], 0, sizeof(w[i]));
                w[i].wr_id = RECV_WRID | GW_VERBS_IMMQ_WRID | (uint64_t)qi;
                w[i].next = i + 1 < n ? &w[i + 1] : NULL;
            }
            int rc = ibv_post_recv(q->qp, w, &bad);
            if (rc) {
                *failed_qi = qi;
                return rc;
            }
            q->imm_repost -= n;
        }
    }
    return 0;
}

static void repost_flush(gw_verbs_ep_t *ep)
{
    unsigned n = ep->nrepost;
    if (vep_failed(ep))
        return;
    int qi = 0, rc = 0;
    if (ep->imm_due) { /* (else no QP owes any: no walk over them per poll) */
        ep->imm_due = 0;
        rc = gw_verbs_post_imm_recvs(ep, &qi);
    }
    if (rc) {
        gw_verbs_ep_die(ep, GW_ERR_VERBS, "ibv_post_recv(qp=0x%x, zero-length receives) failed: %s",
               ep->qps[qi].qp->qp_num, strerror(rc));
        return;
    }
    if (!n)
        return;
    struct ibv_sge sge[32];
    struct ibv_recv_wr w[32], *bad;
    for (unsigned i = 0; i < n; i++) {
        unsigned idx = ep->repost[i];
        sge[i].addr = (uint64_t)(uintptr_t)(ep->rbuf + (size_t)idx * GW_VERBS_SLOT);
        sge[i].length = GW_VERBS_SLOT;
        sge[i].lkey = ep->rmr->lkey;
        w[i].wr_id = RECV_WRID | idx;
        w[i].sg_list = &sge[i];
        w[i].num_sge = 1;
        w[i].next = i + 1 < n ? &w[i + 1] : NULL;
    }
    ep->nrepost = 0;
    rc = ibv_post_recv(ep->qps[0].qp, w, &bad);
    if (rc)
        gw_verbs_ep_die(ep, GW_ERR_VERBS, "ibv_post_recv(qp=0x%x, %u buffers) failed: %s",
               ep->qps[0].qp->qp_num, n, strerror(rc));
}

static void start_rdv_recv(gw_verbs_ep_t *ep, gw_request_t *req, uint64_t tag, uint64_t len,
                           uint64_t addr, uint32_t rkey, uint64_t opid)
{
    req->rtag = tag;
    verbs_rq(req)->rdv.raddr = addr;
    verbs_rq(req)->rdv.rkey = rkey;
    verbs_rq(req)->rdv.opid = (uint32_t)opid;
    verbs_rq(req)->rdv.mlen = len;
    req->posted = 0;
    req->pending = 0;
    req->tl_flags = TLF_RDV;
    verbs_rq(req)->rc = NULL;
    verbs_rq(req)->stg = NULL;
    verbs_rq(req)->slot = verbs_rq(req)->stripe = 0;
    gw_list_push_back(&ep->rdv_recvs, &req->tl_link);
}

/* The sender's WRITEs for receive r (in ep->rdv) are in place. */
static void rdv_written(gw_verbs_ep_t *ep, gw_request_t *r)
{
    gw_op_table_free(&ep->rdv, r);
    size_t mlen = (size_t)verbs_rq(r)->rdv.mlen;
    gw_verbs_req_release(ep, r);
    gw_verbs_rdv_recv_forget(ep, r);
    if (r->lmem && r->lmem->type != GW_MEM_HOST)
        gpu_fence(ep);
    gw_ep_recv_done(ep->super.base, r, mlen, r->rtag, GW_OK);
}

/* A WRITE_WITH_IMM closing one queue pair's share of a striped rendezvous
 * (imm = RDV_IMM(queue pairs used, our id)), seen on queue pair qi. */
static void rdv_imm(gw_verbs_ep_t *ep, uint32_t imm, int qi)
{
    unsigned nq = (imm >> 24) & 0x7f;
    gw_request_t *r = gw_verbs_rdv_lookup(ep, imm & 0xffffffu);
    if (!r || r->op != GW_OP_RECV || (r->tl_flags & (TLF_WFIN | TLF_WIMM)) != (TLF_WFIN | TLF_WIMM) ||
        nq == 0 || (int)nq > ep->nqps || qi >= (int)nq || verbs_rq(r)->stripe >= nq) {
        gw_verbs_ep_die(ep, GW_ERR_PROTOCOL, "verbs: end of rendezvous write 0x%08x from %s on QP %d matches no "
               "receive of ours waiting for one", imm, ep->peer.dev, qi);
        return;
    }
    if (++verbs_rq(r)->stripe == nq)
        rdv_written(ep, r);
}

/* An eager message's payload arrived: into the matching posted receive,
 * else kept as unexpected. */
static void eager_in(gw_verbs_ep_t *ep, const uint8_t *payload, uint64_t tag, size_t len)
{
    gw_ep_base_t *base = ep->super.base;
    gw_request_t *r = gw_ep_match_posted(base, tag);
    if (r) {
        gw_status_t cst = gw_mem_copy_to(r->core, r->lmem, r->buf, payload, GW_MIN(len, r->len));
        gw_ep_recv_done(base, r, len, tag, cst);
        return;
    }
    gw_unexp_t *u = gw_ep_unexp_eager(base, tag, len); /* the base's record (ep_base.h) */
    if (!u) {
        gw_verbs_ep_die(ep, GW_ERR_NOMEM, "unexpected message (%zu bytes): out of memory", len);
        return;
    }
    memcpy(u->data, payload, len);
    gw_ep_unexp_filled(base, u);
}

static void on_recv(gw_verbs_ep_t *ep, const struct ibv_wc *wc)
{
    gw_ep_base_t *base = ep->super.base;
    unsigned idx = (unsigned)(wc->wr_id & 0xffff);
    if (wc->wr_id & GW_VERBS_IMMQ_WRID) { /* a zero-length receive on QP 1.. */
        int qi = (int)(wc->wr_id & 0xff);
        if (qi >= 1 && qi < ep->nqps) {
            ep->qps[qi].imm_repost++;
            ep->imm_due++;
        }
        if (wc->opcode != IBV_WC_RECV_RDMA_WITH_IMM || (ntohl(wc->imm_data) & 0x80000000u)) {
            gw_verbs_ep_die(ep, GW_ERR_PROTOCOL, "verbs: %s from %s on QP %d, which carries only the ends of "
                   "rendezvous writes", wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM ? "a notification" : "a message",
                   ep->peer.dev, qi);
            return;
        }
        rdv_imm(ep, ntohl(wc->imm_data), qi);
        return;
    }
    if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
        uint32_t imm = ntohl(wc->imm_data);
        if (!(imm & 0x80000000u)) { /* the end of a rendezvous write on QP 0 */
            rdv_imm(ep, imm, 0);
            if (!vep_failed(ep))
                repost_recv(ep, idx);
            return;
        }
        gpu_fence(ep);
        if (gw_ep_notify_push(base, imm & 0x7fffffffu) != 0)
            gw_verbs_ep_die(ep, GW_ERR_NOMEM, "notification queue: out of memory");
        repost_recv(ep, idx);
        return;
    }
    const uint8_t *p = ep->rbuf + (size_t)idx * GW_VERBS_SLOT;
    if (wc->wc_flags & IBV_WC_WITH_IMM) { /* an eager message without a header: the tag in the immediate */
        if (!(ep->local.features & GW_VERBS_FEAT_SEND_IMM)) {
            gw_verbs_ep_die(ep, GW_ERR_PROTOCOL, "verbs: a %u-byte message from %s without a header (tag "
                   "0x%x in the immediate), which this side did not announce", wc->byte_len, ep->peer.dev,
                   ntohl(wc->imm_data));
            return;
        }
        eager_in(ep, p, ntohl(wc->imm_data), wc->byte_len);
        if (!vep_failed(ep))
            repost_recv(ep, idx);
        return;
    }
    if (wc->byte_len < GW_VERBS_HDR) {
        gw_verbs_ep_die(ep, GW_ERR_PROTOCOL, "verbs: %u-byte message from %s is shorter than a header",
               wc->byte_len, ep->peer.dev);
        return;
    }
    uint8_t type = p[0];
    uint32_t rkey = gw_get_u32(p + 4);
    uint64_t tag = gw_get_u64(p + 8), len = gw_get_u64(p + 16), addr = gw_get_u64(p + 24);
    uint64_t opid = gw_get_u32(p + 32);
    switch (type) {
    case CT_EAGER: {
        if (len > wc->byte_len - GW_VERBS_HDR) {
            gw_verbs_ep_die(ep, GW_ERR_PROTOCOL, "verbs: eager message claims %llu bytes, carries %u",
                   (unsigned long long)len, wc->byte_len - GW_VERBS_HDR);
            return;
        }
        eager_in(ep, p + GW_VERBS_HDR, tag, (size_t)len);
        break;
    }
    case CT_RTS: {
        gw_request_t *r = gw_ep_match_posted(base, tag);
        if (r) {
            start_rdv_recv(ep, r, tag, len, addr, rkey, opid);
        } else {
            if (gw_ep_unexp_rndv(base, tag, (size_t)len, ((uint64_t)rkey << 32) | opid, addr) != GW_OK) {
                gw_verbs_ep_die(ep, GW_ERR_NOMEM, "unexpected rendezvous: out of memory");
                return;
            }
        }
        break;
    }
    case CT_FIN: {
        gw_request_t *r = gw_verbs_rdv_lookup(ep, opid);
        if (r) {
            gw_op_table_free(&ep->rdv, r);
            r->tl_flags &= (uint16_t)~TLF_WAIT_FIN;
            r->length = r->len;
            gw_verbs_req_release(ep, r);
            gw_ep_op_done(base, r, GW_OK);
        } else {
            gw_log(GW_LOG_DEBUG, "verbs: FIN for unknown rendezvous %llu (ignored)",
                   (unsigned long long)opid);
        }
        break;
    }
    case CT_CTS: { /* the receiver wants our rendezvous data written to it */
        gw_request_t *r = gw_verbs_rdv_lookup(ep, opid);
        uint32_t cst = gw_get_u32(p + 36);
        if (!r || r->op != GW_OP_SEND || !(r->tl_flags & TLF_WAIT_FIN) || (r->tl_flags & TLF_CTS) ||
            gw_verbs_mem_staged(r->lmem) || len > r->len || (cst & ~CTS_WIMM) ||
            ((cst & CTS_WIMM) && !(ep->local.features & GW_VERBS_FEAT_WRITE_IMM)) || tag > 0xffffffu) {
            gw_verbs_ep_die(ep, GW_ERR_PROTOCOL, "verbs: CTS from %s for rendezvous %llu (%llu bytes, flags 0x%x) "
                   "matches no send of ours waiting for its receiver", ep->peer.dev,
                   (unsigned long long)opid, (unsigned long long)len, cst);
            return;
        }
        gw_op_table_free(&ep->rdv, r);
        r->tl_flags = (uint16_t)((r->tl_flags & ~(TLF_WAIT_FIN | TLF_ALLPOSTED)) | TLF_CTS |
                                 ((cst & CTS_WIMM) ? TLF_WIMM : 0));
        r->posted = 0;
        verbs_rq(r)->stripe = 0;
        verbs_rq(r)->rdv.raddr = addr;
        verbs_rq(r)->rdv.rkey = rkey;
        verbs_rq(r)->rdv.opid = (uint32_t)tag;
        verbs_rq(r)->rdv.mlen = len;
        gw_list_push_back(&ep->pending, &r->tl_link);
        break;
    }
    case CT_WFIN: { /* the sender's WRITEs for our receive are in place */
        gw_request_t *r = gw_verbs_rdv_lookup(ep, opid);
        if (!r || r->op != GW_OP_RECV || (r->tl_flags & (TLF_WFIN | TLF_WIMM)) != TLF_WFIN) {
            gw_verbs_ep_die(ep, GW_ERR_PROTOCOL, "verbs: WFIN from %s for receive %llu, which is not waiting "
                   "for one", ep->peer.dev, (unsigned long long)opid);
            return;
        }
        rdv_written(ep, r);
        break;
    }
    case CT_SREQ:
        gw_verbs_stg_on_sreq(ep, p, wc->byte_len);
        break;
    case CT_SACK:
        gw_verbs_stg_on_sack(ep, (uint32_t)opid, (gw_status_t)(int32_t)gw_get_u32(p + 36), tag, p + GW_VERBS_HDR,
                    wc->byte_len - GW_VERBS_HDR);
        break;
    case CT_AM: /* an active message (verbs_am.c) */
        gw_verbs_am_in(ep, p, wc->byte_len);
        if (vep_failed(ep))
            return;
        break;
    case CT_NOTIFY: /* status 1: a counted notification of id tag (a batch's) */
        gpu_fence(ep);
        if (gw_get_u32(p + 36) == 1 ? gw_ep_ncount_add(base, tag) != 0 : gw_ep_notify_push(base, tag) != 0)
            gw_verbs_ep_die(ep, GW_ERR_NOMEM, "notification queue: out of memory");
        break;
    default:
        gw_verbs_ep_die(ep, GW_ERR_PROTOCOL, "verbs: unknown message type %u from %s", type, ep->peer.dev);
        return;
    }
    if (!vep_failed(ep))
        repost_recv(ep, idx);
}

/* ---- completions ------------------------------------------------------------------------ */
static void retire(gw_verbs_ep_t *ep, int qi, uint64_t upto)
{
    gw_verbs_qp_t *q = &ep->qps[qi];
    while (q->tail != q->head && !vep_failed(ep)) {
        uint64_t s = q->tail;
        gw_verbs_wr_t *r = gw_verbs_ring_at(q, s);
        gw_request_t *req = r->req;
        r->req = NULL;
        if (r->slot != NO_SLOT)
            slot_put(ep, r->slot);
        r->slot = NO_SLOT;
        if (!(r->flags & WRF_LAZY))
            q->prompt--;
        q->tail++;
        q->used--;
        if (r->kind == WR_SPUT || r->kind == WR_SGET)
            gw_verbs_stg_chunk_wr_done(ep, r->aux);
        else if (r->kind == WR_SREAD || r->kind == WR_SWRITE)
            gw_verbs_stg_job_wr_done(ep, r->aux);
        if (req) {
            req->pending--;
            if (req->tl_flags & TLF_IOV) /* (a list's bytes moved, for a failure or a cancel) */
                req->done += r->len;
            gw_verbs_req_maybe_done(ep, req);
        }
        if ((s & 0xffffffffffffull) == upto)
            break;
    }
}

static int poll_cq(gw_verbs_ep_t *ep)
{
    struct ibv_wc wc[32];
    int total = 0, n;
    do {
        n = ibv_poll_cq(ep->cq, 32, wc);
        ep->cq_polls++;
        if (n < 0) {
            gw_verbs_ep_die(ep, GW_ERR_VERBS, "ibv_poll_cq(%s) failed: %d", ep->vif->port.dev, n);
            return total;
        }
        for (int i = 0; i < n; i++) {
            if (vep_failed(ep)) { /* consequences of the first error: not causes */
                if (wc[i].wr_id & DRAIN_WRID)
                    gw_verbs_ep_drained_one(ep);
                continue;
            }
            if (wc[i].status != IBV_WC_SUCCESS) {
                gw_verbs_wr_t *r = NULL;
                if (!(wc[i].wr_id & RECV_WRID)) {
                    int qi = (int)(wc[i].wr_id >> 48);
                    if (qi < ep->nqps)
                        r = gw_verbs_ring_at(&ep->qps[qi], wc[i].wr_id & 0xffffffffffffull);
                }
                gw_verbs_wc_fail(ep, &wc[i], r);
                continue;
            }
            if (wc[i].wr_id & RECV_WRID)
                on_recv(ep, &wc[i]);
            else
                retire(ep, (int)(wc[i].wr_id >> 48), wc[i].wr_id & 0xffffffffffffull);
        }
        if (n)
            repost_flush(ep); /* (reposts come only from completions) */
        total += n;
        ep->cq_wcs += (uint64_t)n;
    } while (n == 32);
    return total;
}

int gw_verbs_ep_progress(gw_verbs_ep_t *ep)
{
    if (!ep->connected)
        return 0;
    /* posted work counts as progress: a caller that progresses until 0
     * before sleeping on the context fd has handed everything to the device */
    /* (an idle pass is the CQ poll alone: under emulation each call is
     * costly, and a waiter notices a peer's write only after the pass it
     * is in, so the pass's length is part of the latency) */
    int n = vep_queued(ep) ? gw_verbs_post_pending(ep) : 0;
    int c = poll_cq(ep);
    if (c && vep_queued(ep))
        n += gw_verbs_post_pending(ep);
    /* an unsignalled tail that nothing will complete (verbs_post.c,
     * "Signalling"): looked at after posts and completions, while a flush
     * waits, and while the CQ is armed (idle: untracked puts' tails too) */
    if ((n || c || ep->cq_armed || !gw_list_empty(&ep->super.base->flushes)) && !vep_failed(ep) &&
        vep_unsig_tail(ep))
        n += gw_verbs_cover(ep, ep->cq_armed);
    n += c;
    if (!n && ep->stg_live && !vep_failed(ep) && gw_verbs_stg_busy(ep))
        n = 1; /* staged copies in flight: CUDA events wake no fd, keep the caller polling */
    if (n) {
        /* no clock read here: the busy path stays free of system calls
         * (where the clock has no vDSO mode, as in an emulated guest, each
         * read is one); the idle path below stamps the activity */
        ep->active_ns = 0;
        ep->idle_polls = 0;
    }
    /* (no last_rx_ns stamp: base->unjudged, RC retries judge the peer) */
    if (n == 0 && !ep->cq_armed) {
        /* Arming costs a system call and makes every completion a channel
         * event (another one).  While completions keep coming (less than
         * GW_VERBS_ARM_IDLE_NS since the last), report activity instead, so a
         * caller progressing until 0 keeps polling for that long; after it,
         * arm so the context fd wakes a sleeper.  The clock is read on every
         * GW_VERBS_IDLE_CLOCK-th idle pass only: the window is that much
         * longer at most. */
        if (++ep->idle_polls % GW_VERBS_IDLE_CLOCK)
            return 1;
        uint64_t now = gw_now_ns();
        if (!ep->active_ns)
            ep->active_ns = now;
        if (now - ep->active_ns < GW_VERBS_ARM_IDLE_NS)
            return 1;
        /* going idle: untracked puts' unsignalled tails complete now (what
         * a close waits for), then arm the CQ so the context fd wakes a
         * sleeping caller (on the cover's completion among others) */
        if (gw_verbs_cover(ep, 1))
            return 1;
        if (ibv_req_notify_cq(ep->cq, 0) == 0)
            ep->cq_armed = 1;
        n = poll_cq(ep);
        if (n)
            gw_verbs_post_pending(ep);
    }
    return n;
}

/* A work request the device alone must end: an RDMA WRITE or READ, whose
 * completion needs nothing of the peer process.  A SEND or a WRITE with
 * immediate data consumes a receive the peer's progress posts: behind a
 * peer busy elsewhere it waits (RNR retries, without limit) as long as the
 * peer does, and the peer's liveness, not this watchdog, judges that. */
static int device_owed(int kind)
{
    return kind == WR_PUT || kind == WR_GET || kind == WR_RDV_READ || kind == WR_COVER || kind == WR_SPUT ||
           kind == WR_SGET || kind == WR_SREAD || kind == WR_SWRITE;
}

int gw_verbs_awaits_cqe(const gw_verbs_ep_t *ep)
{
    for (int i = 0; i < ep->nqps; i++) {
        const gw_verbs_qp_t *q = &ep->qps[i];
        /* the oldest WR not retired, and the last signalled one (whose
         * completion retires everything up to it), both the device's */
        if (q->sig_end > q->tail && device_owed(gw_verbs_ring_at(q, q->tail)->kind) &&
            device_owed(gw_verbs_ring_at(q, q->sig_end - 1)->kind))
            return 1;
    }
    return 0;
}

int gw_verbs_watchdog(gw_verbs_ep_t *ep, uint64_t now)
{
    if (!ep->connected || vep_failed(ep))
        return 0;
    if (!gw_verbs_awaits_cqe(ep) || ep->cq_wcs != ep->wd_wcs || ep->wr_posted != ep->wd_posted || !ep->wd_ns) {
        ep->wd_wcs = ep->cq_wcs;
        ep->wd_posted = ep->wr_posted;
        ep->wd_ns = now;
        return 0;
    }
    uint64_t limit = (uint64_t)ep_core(ep)->op_timeout_ms * 1000000ull;
    if (now - ep->wd_ns < limit)
        return 0;
    unsigned used = 0;
    for (int i = 0; i < ep->nqps; i++)
        used += ep->qps[i].used;
    gw_verbs_ep_die(ep, GW_ERR_PEER_TIMEOUT,
                    "verbs %s: no completion for %llu ms with %u work requests posted on %d queue pairs "
                    "(GPUWIRE_OP_TIMEOUT_MS=%ld): the device or its driver lost them; the endpoint fails so that "
                    "they end", ep->vif->port.dev, (unsigned long long)((now - ep->wd_ns) / 1000000), used, ep->nqps,
                    ep_core(ep)->op_timeout_ms);
    return 1;
}

gw_status_t gw_verbs_recv_matched(gw_tl_ep_t *e, gw_request_t *req, gw_unexp_t *msg)
{
    /* a rendezvous only (tl.h): the base delivers eager messages (on_recv
     * takes their records from gw_ep_unexp_eager) and frees msg after this
     * call. */
    gw_verbs_ep_t *ep = to_vep(e);
    if (vep_failed(ep)) {
        gw_ep_recv_done(ep->super.base, req, msg->len, msg->tag, ep->super.base->error);
    } else {
        start_rdv_recv(ep, req, msg->tag, msg->len, msg->handle2, (uint32_t)(msg->handle >> 32),
                       msg->handle & 0xffffffffu);
        gw_core_signal(ep_core(ep));
    }
    return GW_OK;
}
