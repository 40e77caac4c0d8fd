/* SPDX-License-Identifier: Apache-2.0 */
/* verbs_post.c - verbs operations, posting side.
 *
 *
 *   put          RDMA WRITE (inline when small; striped over the QPs when large)
 *   get          RDMA READ
 *   put_notify   the data as RDMA WRITEs, then - once every earlier put on
 *                the other QPs has completed - a notification on QP 0:
 *                WRITE_WITH_IMM (0 bytes) carrying the value when it fits in
 *                31 bits, else a SEND carrying all 64 bits.  RC ordering on
 *                QP 0 places it after the data.
 *   send/recv    eager SEND of header + payload up to GW_VERBS_EAGER_MAX from a
 *                registered bounce slot into pre-posted receive buffers; larger
 *                messages send an RTS (address + rkey), the receiver RDMA
 *                READs straight into the receive buffer and answers FIN.
 *
 * Posting: operations are queued (ep->pending, FIFO) and posted from the
 * progress engine in batches, one ibv_post_send() per QP per pass.  A
 * signalled completion retires every older WR of its QP (RC completes in
 * order) (verbs_cq.c).  On an idle endpoint a request is posted at once
 * (gw_verbs_submit); a small put from host memory then takes the shortest
 * path, one inline WRITE without the batch (put_inline_now).
 *
 * Signalling (completion moderation; each completion is work for the device,
 * the CQ poll and the bookkeeping, and under emulation that is the rate):
 *  - every depth/4-th WR of a queue pair is signalled, so that a full send
 *    queue always holds one that frees it;
 *  - WRs before the last one of a pass are not (that one's completion
 *    retires them);
 *  - the pass's last WR of tracked work (anything but WRF_LAZY) is
 *    signalled while the queue pair is shallow (fewer than
 *    GW_VERBS_SIG_DEEP such WRs in flight before it: a caller with a few
 *    operations out sees no added latency), when no signalled WR is in
 *    flight, and once half the tracked WRs in flight have gone unsignalled
 *    since the last signalled one; otherwise it is not, and its request
 *    completes with a later signalled WR (perftest signals one in 100);
 *  - an untracked put (WRF_LAZY: UCX's put_nbi shape) is never signalled
 *    for itself.
 * An unsignalled tail with nothing to complete it gets a signalled
 * zero-length RDMA WRITE (gw_verbs_cover): at once for tracked work with
 * no signalled WR left in flight and whenever a flush waits; for untracked
 * puts only at a flush, when queued work waits, or when the endpoint goes
 * idle (before the CQ is armed; gw_ep_close's wait ends that way).  A
 * zero-length WRITE carries no address or key (IB spec C9-88: the
 * responder checks neither at length 0); rxe accepts one with both 0.
 */
#include "mem/mem_copy.h"
#include "transport/verbs/verbs.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *gw_verbs_op_name(int kind)
{
    switch (kind) {
    case WR_PUT: return "RDMA WRITE (put)";
    case WR_GET: return "RDMA READ (get)";
    case WR_IMM: return "RDMA WRITE_WITH_IMM (put notification)";
    case WR_SENDMSG: return "SEND (message)";
    case WR_RDV_READ: return "RDMA READ (rendezvous receive)";
    case WR_RDV_IMM: return "RDMA WRITE_WITH_IMM (end of a rendezvous send)";
    case WR_SPUT: return "RDMA WRITE (staged put chunk)";
    case WR_SGET: return "RDMA READ (staged get chunk)";
    case WR_SREAD: return "RDMA READ (staged chunk for the peer)";
    case WR_SWRITE: return "RDMA WRITE (staged chunk for the peer)";
    case WR_COVER: return "zero-length RDMA WRITE (completing unsignalled WRs)";
    default: return "work request";
    }
}

/* May a WR of req go unsignalled until a flush, a close or a full queue
 * needs it?  An untracked put's (err_sink: no caller request; its errors
 * reach the next flush) that holds no bounce slot or cached registration
 * (those are given back at completion) and is not a staged one. */
static int wr_lazy(const gw_request_t *req, int kind, int slot)
{
    return req && kind == WR_PUT && slot < 0 && req->op == GW_OP_PUT && req->err_sink && !verbs_rq(req)->slot &&
           !verbs_rq(req)->rc && !(req->tl_flags & TLF_STAGED);
}

/* Claims the next ring record of QP qi for a WR of req; returns the WR's id. */
static inline uint64_t ring_claim(gw_verbs_ep_t *ep, int qi, gw_request_t *req, int kind, int slot, uint32_t len)
{
    gw_verbs_qp_t *q = &ep->qps[qi];
    uint64_t seq = q->head++;
    gw_verbs_wr_t *r = gw_verbs_ring_at(q, seq);
    r->req = req;
    r->kind = (uint16_t)kind;
    r->slot = (uint16_t)(slot < 0 ? NO_SLOT : slot);
    r->len = len;
    r->flags = wr_lazy(req, kind, slot) ? WRF_LAZY : 0;
    if (!r->flags)
        q->prompt++;
    q->used++;
    if (req)
        req->pending++;
    return ((uint64_t)qi << 48) | (seq & 0xffffffffffffull);
}

static gw_verbs_wr_t *wr_rec(gw_verbs_qp_t *q, uint64_t wr_id)
{
    return gw_verbs_ring_at(q, wr_id & 0xffffffffffffull);
}

/* The pass's last tracked WR of QP q (q->prompt counts it): signalled? */
static int last_signalled(const gw_verbs_qp_t *q)
{
    uint32_t ahead = q->prompt - 1, deep = GW_MIN((uint32_t)GW_VERBS_SIG_DEEP, q->depth / 4);
    return ahead < deep || q->sig_end <= q->tail || q->unsig >= GW_MAX(deep, ahead / 2);
}

/* Claims the next WR of QP qi in the batch and its ring record. */
struct ibv_send_wr *gw_verbs_wr_add(gw_verbs_ep_t *ep, batch_t *b, int qi, gw_request_t *req, int kind,
                                  int slot, uint32_t len)
{
    int k = b->n[qi]++;
    struct ibv_send_wr *w = &b->wr[qi][k];
    memset(w, 0, sizeof(*w));
    w->sg_list = b->sge[qi][k];
    w->wr_id = ring_claim(ep, qi, req, kind, slot, len);
    return w;
}

/* ibv_post_send() of n WRs starting with first on QP q refused them (rc). */
static void post_failed(gw_verbs_ep_t *ep, gw_verbs_qp_t *q, int n, const struct ibv_send_wr *first,
                        const struct ibv_send_wr *bad, int rc)
{
    gw_verbs_ep_die(ep, GW_ERR_VERBS, "ibv_post_send(qp=0x%x, %d WRs, first %s) failed: %s (errno %d)",
                    q->qp->qp_num, n, gw_verbs_op_name(wr_rec(q, bad ? bad->wr_id : first->wr_id)->kind),
                    strerror(rc), rc);
}

/* Posts the n WRs of QP qi's chain with one ibv_post_send at the end of a
 * pass, signalled as the header says ("Signalling"): every depth/4-th, and
 * its last tracked WR by last_signalled(). */
static void chain_post(gw_verbs_ep_t *ep, batch_t *b, int qi, int n)
{
    gw_verbs_qp_t *q = &ep->qps[qi];
    int last = -1, one = b->one_sig[qi]; /* (a list's chain: its last WR alone, verbs_iov.c) */
    for (int k = n - 1; k >= 0 && last < 0; k--)
        if (!(wr_rec(q, b->wr[qi][k].wr_id)->flags & WRF_LAZY))
            last = k;
    for (int k = 0; k < n; k++) {
        b->wr[qi][k].next = k + 1 < n ? &b->wr[qi][k + 1] : NULL;
        ++q->unsig;
        if (one ? k == n - 1 : (q->unsig >= q->depth / 4 || (k == last && last_signalled(q)))) {
            b->wr[qi][k].send_flags |= IBV_SEND_SIGNALED;
            q->unsig = 0;
            q->sig_end = (b->wr[qi][k].wr_id & 0xffffffffffffull) + 1;
            ep->wr_signalled++;
        }
    }
    ep->wr_posted += (uint64_t)n;
    ep->post_calls++;
    struct ibv_send_wr *bad = NULL;
    int rc = ibv_post_send(q->qp, &b->wr[qi][0], &bad);
    if (rc)
        post_failed(ep, q, n, &b->wr[qi][0], bad, rc);
}

/* Posts w, the newest WR claimed on QP q, alone (no batch), with the
 * signalling bookkeeping of its IBV_SEND_SIGNALED flag. */
static inline void post_single(gw_verbs_ep_t *ep, gw_verbs_qp_t *q, struct ibv_send_wr *w)
{
    if (w->send_flags & IBV_SEND_SIGNALED) {
        q->unsig = 0;
        q->sig_end = q->head;
        ep->wr_signalled++;
    }
    ep->wr_posted++;
    ep->post_calls++;
    struct ibv_send_wr *bad = NULL;
    int rc = ibv_post_send(q->qp, w, &bad);
    if (rc)
        post_failed(ep, q, 1, w, bad, rc);
}

static void batch_flush(gw_verbs_ep_t *ep, batch_t *b)
{
    for (int qi = 0; qi < ep->nqps && !vep_failed(ep); qi++) {
        int n = b->n[qi];
        b->n[qi] = 0;
        if (n)
            chain_post(ep, b, qi, n);
    }
}

void gw_verbs_batch_flush(gw_verbs_ep_t *ep, batch_t *b)
{
    batch_flush(ep, b);
}

/* ---- request completion ------------------------------------------------------------- */
void gw_verbs_req_release(gw_verbs_ep_t *ep, gw_request_t *req)
{
    if (verbs_rq(req)->rc) {
        gw_verbs_rcache_put(ep->vif, verbs_rq(req)->rc);
        verbs_rq(req)->rc = NULL;
    }
    if (verbs_rq(req)->slot) {
        slot_put(ep, (int)verbs_rq(req)->slot - 1);
        verbs_rq(req)->slot = 0;
    }
    if ((req->tl_flags & TLF_STAGED) && verbs_rq(req)->stg)
        gw_verbs_stg_free(ep, verbs_rq(req)->stg, 1);
}

void gw_verbs_ctrl_queue(gw_verbs_ep_t *ep, uint8_t type, uint32_t status, uint64_t a, uint64_t b)
{
    if (ep->ctrl_count == GW_ARRAY_SIZE(ep->ctrlq)) {
        gw_verbs_ep_die(ep, GW_ERR_NO_RESOURCE, "control queue full (%u messages waiting)", ep->ctrl_count);
        return;
    }
    gw_verbs_ctrl_t *c = &ep->ctrlq[(ep->ctrl_head + ep->ctrl_count) % GW_ARRAY_SIZE(ep->ctrlq)];
    c->type = type;
    c->status = status;
    c->a = a;
    c->b = b;
    ep->ctrl_count++;
}

/* ---- local keys ---------------------------------------------------------------------- */
/* Resolves how the local buffer is reached.  Returns 1 ready, 0 blocked
 * (no bounce slot now), -1 failed (request completed with the error). */
static int req_prep(gw_verbs_ep_t *ep, gw_request_t *req, int is_read_target, size_t len)
{
    if (req->tl_flags & TLF_PREP)
        return 1;
    if (req->op == GW_OP_PUT || req->op == GW_OP_PUT_NOTIFY) {
        if (len <= ep->max_inline && !(req->lmem && req->lmem->type != GW_MEM_HOST)) {
            req->tl_flags |= TLF_PREP | TLF_INLINE;
            return 1;
        }
    }
    if (req->lmem && req->lmem->tl_reg[GW_TL_VERBS]) {
        req->tl_flags |= TLF_PREP;
        return 1;
    }
    if (len <= GW_VERBS_EAGER_MAX && req->op != GW_OP_RECV) {
        int s = slot_get(ep);
        if (s < 0)
            return 0;
        verbs_rq(req)->slot = (uint32_t)s + 1;
        gw_status_t cst =
            is_read_target ? GW_OK : gw_mem_copy_from(req->core, req->lmem, slot_ptr(ep, s), req->buf, len);
        if (cst != GW_OK) {
            gw_verbs_req_release(ep, req);
            gw_ep_op_done(ep->super.base, req, cst);
            return -1;
        }
        req->tl_flags |= TLF_PREP;
        return 1;
    }
    gw_verbs_rc_entry_t *e;
    gw_status_t st = gw_verbs_rcache_get(ep->vif, req->buf, len, IBV_ACCESS_LOCAL_WRITE, &e);
    if (st != GW_OK) {
        if (req->op == GW_OP_RECV) {
            gw_verbs_rdv_recv_forget(ep, req);
            gw_ep_recv_done(ep->super.base, req, (size_t)verbs_rq(req)->rdv.mlen, req->rtag, st);
        } else {
            gw_ep_op_done(ep->super.base, req, st);
        }
        return -1;
    }
    verbs_rq(req)->rc = e;
    req->tl_flags |= TLF_PREP;
    return 1;
}

/* lkey of the local piece holding buf+off and the bytes left in it */
static void local_piece(gw_verbs_ep_t *ep, gw_request_t *req, size_t off, uint64_t *addr,
                        uint32_t *lkey, uint64_t *left)
{
    if (verbs_rq(req)->slot) {
        *addr = (uint64_t)(uintptr_t)slot_ptr(ep, (int)verbs_rq(req)->slot - 1) + off;
        *lkey = ep->smr->lkey;
        *left = UINT64_MAX;
        return;
    }
    *addr = (uint64_t)(uintptr_t)req->buf + off;
    const gw_verbs_reg_t *reg = verbs_rq(req)->rc
                                    ? verbs_rq(req)->rc->reg
                                    : req->lmem->tl_reg[GW_TL_VERBS];
    if (gw_verbs_reg_piece(reg, *addr, lkey, NULL, left) != 0) {
        *lkey = 0;
        *left = 0;
    }
}

/* rkey of the remote piece holding raddr and the bytes left in it; -1 bad key */
int gw_verbs_remote_piece(gw_request_t *req, uint64_t raddr, uint32_t *rkey, uint64_t *left)
{
    if (req->op == GW_OP_RECV || (req->tl_flags & TLF_CTS)) {
        *rkey = verbs_rq(req)->rdv.rkey;
        *left = UINT64_MAX;
        return 0;
    }
    return req->rkey ? gw_verbs_key_piece(gw_verbs_rkey_of(req->rkey), raddr, rkey, left) : -1;
}

/* ---- posting a request -------------------------------------------------------------- */
/* Queue pairs a transfer of `total` bytes is striped over. */
static int stripe_qps(const gw_verbs_ep_t *ep, const gw_request_t *req, size_t total)
{
    if (total < ep->vif->split_min || ep->nqps < 2)
        return 1;
    if ((req->tl_flags & TLF_CTS) && !(req->tl_flags & TLF_WIMM))
        return 1; /* closed by a WFIN on QP 0: QP 0 only */
    return ep->nqps;
}

/* Posts RDMA WRITE/READ pieces of req.  1: all posted, 0: blocked, -1: the
 * request was completed with an error (do not touch it again). */
static int post_rdma(gw_verbs_ep_t *ep, batch_t *b, gw_request_t *req, int kind, size_t total,
                     uint64_t raddr)
{
    size_t stripe = total;
    int nq = stripe_qps(ep, req, total);
    if (nq > 1) {
        stripe = (total + (size_t)nq - 1) / (size_t)nq;
        stripe = (stripe + 4095) & ~(size_t)4095;
    }
    int first = 1;
    while (req->posted < total || (total == 0 && first)) {
        first = 0;
        int qi = nq > 1 ? (int)(verbs_rq(req)->stripe % (uint64_t)nq) : 0;
        if (!qp_room(ep, b, qi))
            return 0;
        size_t off = req->posted;
        uint64_t piece = GW_MIN((uint64_t)(total - off), (uint64_t)stripe);
        if (ep->peer.max_msg)
            piece = GW_MIN(piece, (uint64_t)GW_MIN(ep->peer.max_msg, ep->local.max_msg));
        uint32_t rkey;
        uint64_t rleft, laddr = 0, lleft = UINT64_MAX;
        uint32_t lkey = 0;
        if (gw_verbs_remote_piece(req, raddr + off, &rkey, &rleft) != 0) {
            if (req->pending)
                return 0; /* cannot happen past the first piece: same key */
            gw_verbs_req_release(ep, req);
            gw_ep_op_done(ep->super.base, req,
                          gw_err(ep_core(ep), GW_ERR_INVALID_KEY,
                                 "verbs %s(raddr=0x%llx): the remote key carries no usable verbs "
                                 "part", gw_verbs_op_name(kind), (unsigned long long)raddr));
            return -1;
        }
        piece = GW_MIN(piece, rleft);
        if (req->tl_flags & TLF_INLINE) {
            laddr = (uint64_t)(uintptr_t)req->buf + off;
        } else {
            local_piece(ep, req, off, &laddr, &lkey, &lleft);
            piece = GW_MIN(piece, lleft);
        }
        struct ibv_send_wr *w = gw_verbs_wr_add(ep, b, qi, req, kind, -1, (uint32_t)piece);
        w->opcode = kind == WR_GET || kind == WR_RDV_READ ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE;
        w->wr.rdma.remote_addr = raddr + off;
        w->wr.rdma.rkey = rkey;
        if (piece) {
            w->num_sge = 1;
            w->sg_list->addr = laddr;
            w->sg_list->length = (uint32_t)piece;
            w->sg_list->lkey = lkey;
            if (req->tl_flags & TLF_INLINE)
                w->send_flags |= IBV_SEND_INLINE;
        }
        req->posted += (size_t)piece;
        verbs_rq(req)->stripe++;
    }
    return 1;
}

/* Fills a control/eager header at p. */
void gw_verbs_hdr_fill(uint8_t *p, uint8_t type, uint32_t status, uint64_t tag, uint64_t len,
                     uint64_t addr, uint32_t rkey, uint64_t opid)
{
    memset(p, 0, GW_VERBS_HDR);
    p[0] = type;
    gw_put_u32(p + 4, rkey);
    gw_put_u64(p + 8, tag);
    gw_put_u64(p + 16, len);
    gw_put_u64(p + 24, addr);
    gw_put_u32(p + 32, (uint32_t)opid);
    gw_put_u32(p + 36, status);
}

/* A SEND of `bytes` from bounce slot s on QP 0. */
struct ibv_send_wr *gw_verbs_post_sendmsg(gw_verbs_ep_t *ep, batch_t *b, gw_request_t *req, int s,
                                         uint32_t bytes)
{
    struct ibv_send_wr *w = gw_verbs_wr_add(ep, b, 0, req, WR_SENDMSG, s, bytes);
    w->opcode = IBV_WR_SEND;
    w->num_sge = 1;
    w->sg_list->addr = (uint64_t)(uintptr_t)slot_ptr(ep, s);
    w->sg_list->length = bytes;
    w->sg_list->lkey = ep->smr->lkey;
    if (bytes <= ep->max_inline)
        w->send_flags |= IBV_SEND_INLINE;
    return w;
}

/* A rendezvous id on the wire (verbs.h, RDV_IDX_BITS) of a request in ep->rdv. */
static uint64_t rdv_opid(const gw_verbs_ep_t *ep, const gw_request_t *req)
{
    return gw_op_table_short_id(&ep->rdv, req, RDV_IDX_BITS, RDV_GEN_BITS);
}

/* The request an id names, or NULL when it names none (stale or forged). */
gw_request_t *gw_verbs_rdv_lookup(gw_verbs_ep_t *ep, uint64_t opid)
{
    return gw_op_table_get_short(&ep->rdv, opid, RDV_IDX_BITS, RDV_GEN_BITS);
}

/* Every WR on the QPs other than 0 has completed (RC orders QP 0 only):
 * what a notification after striped data waits for. */
int gw_verbs_others_drained(const gw_verbs_ep_t *ep, const batch_t *b)
{
    for (int qi = 1; qi < ep->nqps; qi++)
        if (ep->qps[qi].used || b->n[qi])
            return 0;
    return 1;
}

/* Enters req in the rendezvous table: 0, or -1 when GW_VERBS_RDV_MAX are in
 * flight or out of memory (blocked: try again on a later pass). */
static int rdv_alloc(gw_verbs_ep_t *ep, gw_request_t *req)
{
    uint64_t id;
    if (ep->rdv.used >= GW_VERBS_RDV_MAX || gw_op_table_alloc(&ep->rdv, req, &id) != 0)
        return -1;
    return 0;
}

/* Rendezvous receives in flight are owned here (they are on no api list):
 * they sit on ep->rdv_recvs from the RTS until the data is in place. */
void gw_verbs_rdv_recv_forget(gw_verbs_ep_t *ep, gw_request_t *req)
{
    (void)ep;
    if (req->tl_flags & TLF_RDV) {
        req->tl_flags &= (uint16_t)~TLF_RDV;
        gw_list_del(&req->tl_link);
    }
}

/* 1 fully posted, 0 blocked (keep at the head of the queue). */
/* Rendezvous receive: asks the sender to WRITE the data (CT_CTS) when the
 * buffer lies in a region the user registered for remote writes (the peer
 * gets no access the user did not grant) within one MR.  1: CTS posted,
 * -1: blocked (no room now), 0: take the RDMA READ path instead. */
static int rdv_cts(gw_verbs_ep_t *ep, batch_t *b, gw_request_t *req, size_t n)
{
    const gw_mem_t *m = req->lmem;
    uint32_t both = ep->local.features & ep->peer.features;
    int imm = (both & GW_VERBS_FEAT_WRITE_IMM) != 0;
    if (n == 0 || ep->vif->rdv_read || !m || !m->tl_reg[GW_TL_VERBS] ||
        !(m->access & GW_ACCESS_REMOTE_WRITE) || !(both & GW_VERBS_FEAT_WRITE_RDV) ||
        (!imm && n >= ep->vif->split_min && ep->nqps > 1))
        return 0;
    uint32_t rkey = 0;
    uint64_t left = 0;
    if (gw_verbs_reg_piece(m->tl_reg[GW_TL_VERBS], (uint64_t)(uintptr_t)req->buf, NULL, &rkey, &left) != 0 ||
        left < n)
        return 0;
    if (!qp_room(ep, b, 0) || !ep->nsfree)
        return -1;
    if (rdv_alloc(ep, req) < 0)
        return 0;
    int s = slot_get(ep);
    uint64_t sender = verbs_rq(req)->rdv.opid;
    uint64_t myid = rdv_opid(ep, req);
    gw_verbs_hdr_fill(slot_ptr(ep, s), CT_CTS, imm ? CTS_WIMM : 0, myid, n, (uint64_t)(uintptr_t)req->buf, rkey,
             sender);
    gw_verbs_post_sendmsg(ep, b, NULL, s, GW_VERBS_HDR);
    req->tl_flags |= TLF_WFIN | TLF_ALLPOSTED | (imm ? TLF_WIMM : 0); /* (verbs.stripe, zeroed by
                                                                        * start_rdv_recv, counts the end marks) */
    ep->rdv_by_write++;
    return 1;
}


/* The lkey under an eager payload that can go straight from the user's
 * registered host buffer (one MR holds all of it): 1, else 0. */
static int payload_lkey(const gw_request_t *req, uint32_t *lkey)
{
    uint64_t left;
    return req->lmem && req->lmem->type == GW_MEM_HOST && req->lmem->tl_reg[GW_TL_VERBS] &&
           gw_verbs_reg_piece(req->lmem->tl_reg[GW_TL_VERBS], (uint64_t)(uintptr_t)req->buf, lkey, NULL, &left) == 0 &&
           left >= req->len;
}

/* An eager message without a header (the peer announced
 * GW_VERBS_FEAT_SEND_IMM; the tag fits in 32 bits): SEND_WITH_IMM with the
 * tag in the immediate, the receiver takes the length from its completion.
 * Where packets are processed in software (Soft-RoCE) the 40-byte header
 * costs a packet: a 4 KiB payload with it takes five of 1 KiB, as many as
 * ib_send_bw's four without.  The payload goes from the registered buffer,
 * else from bounce slot s.  1: posted, or completed with the copy's error. */
static int post_eager_imm(gw_verbs_ep_t *ep, batch_t *b, gw_request_t *req, int s)
{
    uint32_t lkey = 0;
    int direct = req->len > ep->max_inline && payload_lkey(req, &lkey);
    if (!direct) {
        gw_status_t cst = gw_mem_copy_from(req->core, req->lmem, slot_ptr(ep, s), req->buf, req->len);
        if (cst != GW_OK) {
            slot_put(ep, s);
            gw_ep_op_done(ep->super.base, req, cst);
            return 1;
        }
    }
    struct ibv_send_wr *w = gw_verbs_post_sendmsg(ep, b, req, s, (uint32_t)req->len);
    w->opcode = IBV_WR_SEND_WITH_IMM;
    w->imm_data = htonl((uint32_t)req->value);
    if (!req->len)
        w->num_sge = 0;
    if (direct) {
        w->sg_list[0].addr = (uint64_t)(uintptr_t)req->buf;
        w->sg_list[0].lkey = lkey;
        ep->eager_gathered++;
    }
    ep->eager_imm++;
    req->tl_flags |= TLF_ALLPOSTED;
    return 1;
}

static int post_req(gw_verbs_ep_t *ep, batch_t *b, gw_request_t *req)
{
    int r;
    if (req->op == GW_OP_BATCH)
        return (req->tl_flags & TLF_IOV) ? gw_verbs_iov_post(ep, b, req) : gw_verbs_batch_post(ep, b, req);
    if (!(req->tl_flags & TLF_STAGED) && gw_verbs_stg_applies(ep, req))
        return gw_verbs_stg_start(ep, b, req);
    switch (req->op) {
    case GW_OP_PUT:
    case GW_OP_GET: {
        int get = req->op == GW_OP_GET;
        if ((r = req_prep(ep, req, get, req->len)) <= 0)
            return r < 0 ? 1 : 0;
        r = post_rdma(ep, b, req, get ? WR_GET : WR_PUT, req->len, req->raddr);
        if (r == 0)
            return 0;
        if (r > 0)
            req->tl_flags |= TLF_ALLPOSTED;
        return 1;
    }
    case GW_OP_PUT_NOTIFY: {
        if (!(req->tl_flags & TLF_DATA)) {
            if ((r = req_prep(ep, req, 0, req->len)) <= 0)
                return r < 0 ? 1 : 0;
            if (req->len) {
                r = post_rdma(ep, b, req, WR_PUT, req->len, req->raddr);
                if (r <= 0)
                    return r < 0 ? 1 : 0;
            }
            req->tl_flags |= TLF_DATA;
        }
        if (!gw_list_empty(&ep->stg_reqs))
            return 0; /* and every older staged operation */
        if (!gw_verbs_others_drained(ep, b)) /* every earlier put on the other QPs must have landed */
            return 0;
        if (!qp_room(ep, b, 0))
            return 0;
        if (req->value < (1ull << 31)) {
            uint32_t rkey = 0;
            uint64_t left;
            if (gw_verbs_remote_piece(req, req->raddr, &rkey, &left) != 0)
                rkey = 0;
            struct ibv_send_wr *w = gw_verbs_wr_add(ep, b, 0, req, WR_IMM, -1, 0);
            w->opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
            w->imm_data = htonl((uint32_t)req->value | 0x80000000u);
            w->wr.rdma.remote_addr = req->raddr;
            w->wr.rdma.rkey = rkey;
        } else {
            int s = slot_get(ep);
            if (s < 0)
                return 0;
            gw_verbs_hdr_fill(slot_ptr(ep, s), CT_NOTIFY, 0, req->value, 0, 0, 0, 0);
            gw_verbs_post_sendmsg(ep, b, req, s, GW_VERBS_HDR);
        }
        req->tl_flags |= TLF_ALLPOSTED;
        return 1;
    }
    case GW_OP_SEND: {
        if (req->tl_flags & TLF_CTS) { /* the data by RDMA WRITE, then the end marks */
            size_t total = (size_t)verbs_rq(req)->rdv.mlen;
            r = post_rdma(ep, b, req, WR_PUT, total, verbs_rq(req)->rdv.raddr);
            if (r <= 0)
                return r < 0 ? 1 : 0;
            if (req->tl_flags & TLF_WIMM) {
                /* one zero-length WRITE_WITH_IMM on each queue pair used (pieces
                 * go round-robin from QP 0), all in one batch or none */
                int used = (int)GW_MIN(verbs_rq(req)->stripe, (uint64_t)stripe_qps(ep, req, total));
                for (int qi = 0; qi < used; qi++)
                    if (!qp_room(ep, b, qi))
                        return 0;
                uint32_t rid = verbs_rq(req)->rdv.opid;
                for (int qi = 0; qi < used; qi++) {
                    struct ibv_send_wr *w = gw_verbs_wr_add(ep, b, qi, req, WR_RDV_IMM, -1, 0);
                    w->opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
                    w->imm_data = htonl(RDV_IMM(used, rid));
                    w->wr.rdma.remote_addr = verbs_rq(req)->rdv.raddr;
                    w->wr.rdma.rkey = verbs_rq(req)->rdv.rkey;
                }
                req->tl_flags |= TLF_ALLPOSTED; /* done when every WR has completed */
                return 1;
            }
            int s = msg_slot(ep, b);
            if (s < 0)
                return 0;
            gw_verbs_hdr_fill(slot_ptr(ep, s), CT_WFIN, 0, 0, 0, 0, 0, verbs_rq(req)->rdv.opid);
            gw_verbs_post_sendmsg(ep, b, req, s, GW_VERBS_HDR);
            req->tl_flags |= TLF_ALLPOSTED; /* done when the WFIN's SEND completes */
            return 1;
        }
        int s = msg_slot(ep, b);
        if (s < 0)
            return 0;
        uint8_t *p = slot_ptr(ep, s);
        if (req->len <= GW_VERBS_EAGER_MAX) {
            uint32_t lkey;
            if (req->value <= 0xffffffffull && (ep->local.features & ep->peer.features & GW_VERBS_FEAT_SEND_IMM))
                return post_eager_imm(ep, b, req, s);
            gw_verbs_hdr_fill(p, CT_EAGER, 0, req->value, req->len, 0, 0, 0);
            if (req->len > ep->max_inline && ep->max_send_sge >= 2 && payload_lkey(req, &lkey)) {
                /* from a registered buffer: the header from the slot, the payload
                 * straight from the user's memory (a second SGE, no copy) */
                struct ibv_send_wr *w = gw_verbs_post_sendmsg(ep, b, req, s, GW_VERBS_HDR);
                w->send_flags &= ~(unsigned)IBV_SEND_INLINE;
                w->sg_list[1].addr = (uint64_t)(uintptr_t)req->buf;
                w->sg_list[1].length = (uint32_t)req->len;
                w->sg_list[1].lkey = lkey;
                w->num_sge = 2;
                ep->eager_gathered++;
                req->tl_flags |= TLF_ALLPOSTED;
                return 1;
            }
            gw_status_t cst = gw_mem_copy_from(req->core, req->lmem, p + GW_VERBS_HDR, req->buf, req->len);
            if (cst != GW_OK) {
                slot_put(ep, s);
                gw_ep_op_done(ep->super.base, req, cst);
                return 1;
            }
            gw_verbs_post_sendmsg(ep, b, req, s, (uint32_t)(GW_VERBS_HDR + req->len));
            req->tl_flags |= TLF_ALLPOSTED;
            return 1;
        }
        if (gw_verbs_mem_staged(req->lmem)) { /* the receiver asks us for chunks (verbs_stage.c) */
            if (!(ep->local.features & ep->peer.features & GW_VERBS_FEAT_STAGED)) {
                slot_put(ep, s);
                gw_ep_op_done(ep->super.base, req,
                              gw_err(ep_core(ep), GW_ERR_UNSUPPORTED,
                                     "send(len=%zu) from GPU memory on the staging rung over verbs: the "
                                     "peer on %s does not announce staged transfers (a gpuwire build "
                                     "before them) and could not fetch it; send from host memory, or "
                                     "upgrade the peer", req->len, ep->peer.dev));
                return 1;
            }
            if (rdv_alloc(ep, req) < 0) {
                slot_put(ep, s);
                return 0;
            }
            uint64_t opid = rdv_opid(ep, req) | RTS_STAGED;
            gw_verbs_hdr_fill(p, CT_RTS, 0, req->value, req->len, (uint64_t)(uintptr_t)req->buf, 0, opid);
            req->tl_flags |= TLF_WAIT_FIN | TLF_ALLPOSTED;
            gw_verbs_post_sendmsg(ep, b, req, s, GW_VERBS_HDR);
            return 1;
        }
        /* rendezvous: expose the buffer for the receiver's READ */
        uint32_t rkey = 0;
        uint64_t left = 0;
        const gw_verbs_reg_t *reg = NULL;
        if (req->lmem && req->lmem->tl_reg[GW_TL_VERBS] &&
            (req->lmem->access & GW_ACCESS_REMOTE_READ)) {
            reg = req->lmem->tl_reg[GW_TL_VERBS];
        } else {
            gw_verbs_rc_entry_t *e;
            gw_status_t st = gw_verbs_rcache_get(ep->vif, req->buf, req->len,
                                                 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ, &e);
            if (st != GW_OK) {
                slot_put(ep, s);
                gw_ep_op_done(ep->super.base, req, st);
                return 1;
            }
            verbs_rq(req)->rc = e;
            reg = e->reg;
        }
        gw_verbs_reg_piece(reg, (uint64_t)(uintptr_t)req->buf, NULL, &rkey, &left);
        if (left < req->len) {
            slot_put(ep, s);
            gw_verbs_req_release(ep, req);
            gw_ep_op_done(ep->super.base, req,
                          gw_err(ep_core(ep), GW_ERR_UNSUPPORTED,
                                 "send(len=%zu) over verbs: the buffer spans several memory "
                                 "regions (largest MR %llu bytes); rendezvous needs one",
                                 req->len, (unsigned long long)ep->vif->max_mr));
            return 1;
        }
        if (rdv_alloc(ep, req) < 0) {
            slot_put(ep, s);
            return 0;
        }
        uint64_t opid = rdv_opid(ep, req);
        gw_verbs_hdr_fill(p, CT_RTS, 0, req->value, req->len, (uint64_t)(uintptr_t)req->buf, rkey, opid);
        req->tl_flags |= TLF_WAIT_FIN | TLF_ALLPOSTED;
        gw_verbs_post_sendmsg(ep, b, req, s, GW_VERBS_HDR);
        return 1;
    }
    case GW_OP_RECV: { /* rendezvous read into the receive buffer */
        size_t n = GW_MIN(req->len, (size_t)verbs_rq(req)->rdv.mlen);
        if ((r = rdv_cts(ep, b, req, n)) != 0)
            return r > 0;
        if ((r = req_prep(ep, req, 1, n)) <= 0)
            return r < 0 ? 1 : 0;
        if (n == 0) {
            req->tl_flags |= TLF_ALLPOSTED;
            gw_verbs_req_maybe_done(ep, req);
            return 1;
        }
        r = post_rdma(ep, b, req, WR_RDV_READ, n, verbs_rq(req)->rdv.raddr);
        if (r == 0)
            return 0;
        req->tl_flags |= TLF_ALLPOSTED;
        ep->rdv_by_read++;
        return 1;
    }
    default:
        gw_ep_op_done(ep->super.base, req, GW_ERR_UNSUPPORTED);
        return 1;
    }
}

/* Posts what is queued; returns the number of WRs handed to the device. */
int gw_verbs_post_pending(gw_verbs_ep_t *ep)
{
    if (vep_failed(ep) || !ep->connected)
        return 0;
    if (!vep_queued(ep))
        return 0; /* nothing queued (the common case of a progress call) */
    uint64_t before = ep->wr_posted;
    batch_t b;
    batch_begin(ep, &b);
    /* control messages first (FIN unblocks the peer) */
    while (ep->ctrl_count) {
        int s = msg_slot(ep, &b);
        if (s < 0)
            break;
        gw_verbs_ctrl_t *c = &ep->ctrlq[ep->ctrl_head];
        gw_verbs_hdr_fill(slot_ptr(ep, s), c->type, c->status, c->b, 0, 0, 0, c->a);
        gw_verbs_post_sendmsg(ep, &b, NULL, s, GW_VERBS_HDR);
        ep->ctrl_head = (ep->ctrl_head + 1) % (unsigned)GW_ARRAY_SIZE(ep->ctrlq);
        ep->ctrl_count--;
    }
    if (!gw_list_empty(&ep->am_q))
        gw_verbs_am_post_queued(ep, &b);
    gw_list_t *p, *t;
    gw_list_for_each_safe(p, t, &ep->pending) {
        gw_request_t *req = gw_container_of(p, gw_request_t, tl_link);
        gw_list_del(p);
        if (!post_req(ep, &b, req)) {
            gw_list_push_front(&ep->pending, &req->tl_link);
            break;
        }
        if (vep_failed(ep))
            return 1;
    }
    gw_list_for_each_safe(p, t, &ep->rdv_recvs) {
        gw_request_t *req = gw_container_of(p, gw_request_t, tl_link);
        if ((req->tl_flags & TLF_ALLPOSTED) || !post_req(ep, &b, req))
            continue;
        if (vep_failed(ep))
            return 1;
    }
    if (gw_verbs_stg_progress(ep, &b) && vep_failed(ep))
        return 1;
    batch_flush(ep, &b);
    return (int)(ep->wr_posted - before);
}

/* 1 with *rk set when len bytes from host memory (lmem NULL or host) can go
 * to raddr as one inline RDMA WRITE on QP 0 now: 1..max_inline bytes, room
 * in the send queue, within the path's largest message and one MR piece of
 * the key; else 0. */
static int inline_put_fits(const gw_verbs_ep_t *ep, size_t len, const gw_mem_t *lmem, uint64_t raddr,
                           const gw_rkey_t *rkey, uint32_t *rk)
{
    const gw_verbs_qp_t *q = &ep->qps[0];
    uint64_t left;
    return len && len <= ep->max_inline && (!lmem || lmem->type == GW_MEM_HOST) && q->used < q->depth && rkey &&
           !(ep->peer.max_msg && len > GW_MIN(ep->peer.max_msg, ep->local.max_msg)) &&
           gw_verbs_key_piece(gw_verbs_rkey_of(rkey), raddr, rk, &left) == 0 && left >= len;
}

/* The endpoint's inline WRITE (its fixed fields set once: verbs_ep.c)
 * aimed at buf -> raddr. */
static inline struct ibv_send_wr *put_wr_fill(gw_verbs_ep_t *ep, const void *buf, size_t len, uint64_t raddr,
                                              uint32_t rk)
{
    struct ibv_send_wr *w = &ep->put_wr;
    ep->put_sge.addr = (uint64_t)(uintptr_t)buf;
    ep->put_sge.length = (uint32_t)len;
    w->wr.rdma.remote_addr = raddr;
    w->wr.rdma.rkey = rk;
    return w;
}

/* Posts one inline RDMA WRITE of req's on QP 0, alone: signalled when it
 * is tracked work, an untracked put's (WRF_LAZY) by the depth/4 rule only.
 * Returns its WR id. */
static uint64_t inline_put_post(gw_verbs_ep_t *ep, gw_request_t *req, const void *buf, size_t len, uint64_t raddr,
                                uint32_t rk)
{
    gw_verbs_qp_t *q = &ep->qps[0];
    struct ibv_send_wr *w = put_wr_fill(ep, buf, len, raddr, rk);
    w->wr_id = ring_claim(ep, 0, req, WR_PUT, -1, (uint32_t)len);
    w->send_flags = IBV_SEND_INLINE;
    if (++q->unsig >= q->depth / 4 || !(wr_rec(q, w->wr_id)->flags & WRF_LAZY))
        w->send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
    post_single(ep, q, w);
    return w->wr_id;
}

/* put_direct's tracked put: a signalled inline WRITE whose ring record has
 * no request yet (its request comes after the doorbell; the endpoint is
 * idle, so shallow).  ring_claim and post_single inline here, with their
 * constant arguments folded (no lazy test, no request to count).  Returns
 * the record; the caller sets its req. */
static gw_verbs_wr_t *direct_put_post(gw_verbs_ep_t *ep, const void *buf, size_t len, uint64_t raddr, uint32_t rk)
{
    gw_verbs_qp_t *q = &ep->qps[0];
    struct ibv_send_wr *w = put_wr_fill(ep, buf, len, raddr, rk);
    w->wr_id = ring_claim(ep, 0, NULL, WR_PUT, -1, (uint32_t)len);
    w->send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
    post_single(ep, q, w);
    return wr_rec(q, w->wr_id);
}

/* An inline put's request state once its one WR is posted. */
static void inline_put_posted(gw_request_t *req, size_t len)
{
    req->posted = len;
    req->tl_flags |= TLF_PREP | TLF_INLINE | TLF_ALLPOSTED;
}

/* Is the endpoint idle, so that work may be posted at once rather than
 * queued for the next progress call's batch?  Nothing queued (no request,
 * control message, rendezvous receive or staged work), and on every QP only
 * a few tracked WRs in flight (a few unreaped completions, any untracked
 * puts: still idle). */
static int vep_idle(const gw_verbs_ep_t *ep)
{
    if (vep_queued(ep))
        return 0;
    for (int qi = 0; qi < ep->nqps; qi++)
        if (ep->qps[qi].prompt >= 4)
            return 0;
    return 1;
}

/* The shortest path, for a small put on an idle endpoint (8-byte latency):
 * one inline RDMA WRITE on QP 0, built and posted here without the batch,
 * from host memory into a region reached by an MR key.  What post_req would
 * do for it, less the general case's steps (staging, bounce slots,
 * registration, striping, the batch's loops).  1: posted (or the endpoint
 * died posting it), 0: not such a put. */
static int put_inline_now(gw_verbs_ep_t *ep, gw_request_t *req)
{
    uint32_t rk;
    if (req->op != GW_OP_PUT || !inline_put_fits(ep, req->len, req->lmem, req->raddr, req->rkey, &rk))
        return 0;
    inline_put_posted(req, req->len);
    inline_put_post(ep, req, req->buf, req->len, req->raddr, rk);
    return 1;
}

/* The ops table's put_direct (tl.h): a put of 1..max_inline bytes from host
 * memory on an idle endpoint, posted as one inline WRITE before any api
 * request exists (under emulation, the Soft-RoCE guest, each instruction
 * before the doorbell is on the measured round trip: the api's request
 * allocation and queueing, ~150 of them, now come after it).
 *  - tracked (make set): the WR is signalled and its ring record claimed
 *    with no request; make() then builds the api's request, which takes the
 *    record.  Nothing polls the CQ in between, so its completion finds it.
 *  - untracked (make NULL): unsignalled but for the depth/4 rule
 *    (WRF_LAZY).  What a flush, put_notify or close waits for is one
 *    request of ours, the open group: allocated with the first such put,
 *    standing in base->outstanding with that put's sequence, counting every
 *    WR that joins it (req->pending), and complete (recycled: nobody holds
 *    it) once they have all retired (gw_verbs_req_maybe_done closes it).
 *    Errors of its WRs fail the endpoint, and the next flush reports them
 *    (err_sink).  Not taken while a flush waits: a put posted after the
 *    flush must not hold it back by joining the group it waits for.
 * Neither is taken while anything is queued (posting order) or for anything
 * put_inline_now would not post. */
gw_status_t gw_verbs_put_direct(gw_tl_ep_t *e, const void *buf, size_t len, const gw_mem_t *lmem, uint64_t raddr,
                                const gw_rkey_t *rkey, gw_tl_req_make_fn make, void *arg)
{
    gw_verbs_ep_t *ep = to_vep(e);
    uint32_t rk;
    if (!ep->connected || vep_failed(ep) || !inline_put_fits(ep, len, lmem, raddr, rkey, &rk))
        return GW_ERR_UNSUPPORTED;
    if (make) {
        if (!vep_idle(ep))
            return GW_ERR_UNSUPPORTED;
        gw_verbs_wr_t *r = direct_put_post(ep, buf, len, raddr, rk);
        if (vep_failed(ep)) /* (the record, with no request, is drained as a cover's would be) */
            return gw_err(ep_core(ep), GW_ERR_ENDPOINT_FAILED, "verbs endpoint to %s failed posting the put: %s",
                          ep->super.base->peer, ep->super.base->error_detail);
        gw_request_t *req = make(arg);
        r->req = req;
        req->pending = 1;
        inline_put_posted(req, len);
        req->tl_flags |= TLF_DIRECT; /* (retiring its one WR completes it: gw_verbs_req_maybe_done) */
        ep->wr_direct++;
    } else {
        if (vep_queued(ep) || !gw_list_empty(&ep->super.base->flushes))
            return GW_ERR_UNSUPPORTED;
        gw_request_t *g = ep->lazy_group;
        if (!g) {
            if (!(g = gw_req_alloc(ep_core(ep))))
                return GW_ERR_UNSUPPORTED; /* (the request path then reports the lack of memory) */
            g->op = GW_OP_PUT;
            g->err_sink = &ep->super.base->implicit_err;
            inline_put_posted(g, 0);
            gw_ep_op_start(ep->super.base, g);
            ep->lazy_group = g;
        }
        ep->wr_untracked++;
        inline_put_post(ep, g, buf, len, raddr, rk); /* (WRF_LAZY: g is an untracked put) */
    }
    ep->active_ns = 0; /* activity: stamped by the next idle progress pass */
    ep->idle_polls = 0;
    return GW_OK;
}

/* ---- covering an unsignalled tail ------------------------------------------------------ */
/* One signalled zero-length RDMA WRITE on QP qi: its completion retires
 * every WR before it (RC completes in order).  No SGE, no address, no key:
 * nothing is read or written at either end (IB spec C9-88). */
static int cover_post(gw_verbs_ep_t *ep, int qi)
{
    gw_verbs_qp_t *q = &ep->qps[qi];
    if (q->used >= q->depth)
        return 0; /* (full: a signalled WR is in flight, the depth/4 rule) */
    struct ibv_send_wr w = {.opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED};
    w.wr_id = ring_claim(ep, qi, NULL, WR_COVER, -1, 0);
    ep->wr_covers++;
    post_single(ep, q, &w);
    return 1;
}

int gw_verbs_cover(gw_verbs_ep_t *ep, int idle)
{
    int n = 0, flush = !gw_list_empty(&ep->super.base->flushes);
    for (int qi = 0; qi < ep->nqps && !vep_failed(ep); qi++) {
        gw_verbs_qp_t *q = &ep->qps[qi];
        if (!qp_unsig_tail(q))
            continue;
        int in_flight = q->sig_end > q->tail; /* a signalled WR will retire some of it */
        if (flush || (!in_flight && (q->prompt || idle || vep_queued(ep))))
            n += cover_post(ep, qi);
    }
    return n;
}

/* ---- operations (api entry points) ------------------------------------------------------ */
gw_status_t gw_verbs_submit(gw_tl_ep_t *e, gw_request_t *req)
{
    return gw_verbs_submit_flags(to_vep(e), req, 0);
}

gw_status_t gw_verbs_submit_flags(gw_verbs_ep_t *ep, gw_request_t *req, uint16_t flags)
{
    if (vep_failed(ep) || !ep->connected)
        return gw_err(ep_core(ep), GW_ERR_ENDPOINT_FAILED, "verbs endpoint to %s is %s",
                      ep->super.base->peer, vep_failed(ep) ? "failed" : "not connected");
    req->posted = 0;
    req->done = 0;
    req->pending = 0;
    req->tl_flags = flags;
    memset(verbs_rq(req), 0, sizeof(struct gw_req_verbs));
    /* posted by the next progress call, batched with whatever else is queued
     * by then (callers progress before they sleep, so no wake-up is needed);
     * on an idle endpoint (nothing queued: no request, control message,
     * rendezvous receive or staged work) there is nothing to batch with and
     * nothing it must follow: post it at once, without the queue (latency) */
    /* an untracked send read after this call (queued, or its payload read by
     * the device from a registered buffer): from a copy of its own
     * (ep_base.h); unregistered on an idle endpoint it is copied into a slot
     * at once, unless blocked */
    int own = gw_ep_send_needs_own(req, GW_VERBS_EAGER_MAX);
    if (own && (req->lmem || !vep_idle(ep))) {
        gw_status_t st = gw_ep_own_payload(req);
        if (st != GW_OK)
            return st;
        own = 0;
    }
    if (!vep_idle(ep)) {
        gw_list_push_back(&ep->pending, &req->tl_link);
        return GW_OK;
    }
    if (!put_inline_now(ep, req)) {
        batch_t b;
        batch_begin(ep, &b);
        if (!post_req(ep, &b, req)) { /* blocked (no slot, no room): it waits at the queue's head */
            if (own && gw_ep_own_payload(req) != GW_OK) {
                gw_verbs_ep_die(ep, GW_ERR_NOMEM, "verbs: out of memory keeping a %zu-byte message that waits "
                                 "to be sent", req->len);
                gw_ep_op_done(ep->super.base, req, GW_ERR_NOMEM);
            } else {
                gw_list_push_back(&ep->pending, &req->tl_link);
            }
        }
        if (!vep_failed(ep) && ep->stg_live) /* it started staged work: its first chunks go in this batch too */
            gw_verbs_stg_progress(ep, &b);
        if (!vep_failed(ep))
            batch_flush(ep, &b);
    }
    ep->active_ns = 0; /* activity: stamped by the next idle progress pass */
    ep->idle_polls = 0;
    return GW_OK;
}
