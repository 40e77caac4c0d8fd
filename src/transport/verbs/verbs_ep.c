/* verbs_ep.c - verbs endpoints: RC queue pairs and every operation.
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
 * progress engine in batches, one ibv_post_send() per QP per pass, with
 * only the last WR of a batch (and every depth/4-th) signalled.  A signalled
 * completion retires every older WR of its QP (RC completes in order).
 *
 * Failure: the first error completion fails the endpoint with the verbs
 * status, the operation and a hint; the flush errors after it are ignored.
 * A QP in error is never reused: the endpoint stays failed.
 */
#include "cuda/cuda_wrap.h"
#include "transport/verbs/verbs.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { WR_PUT = 1, WR_GET, WR_IMM, WR_SENDMSG, WR_RDV_READ };
enum { CT_EAGER = 1, CT_RTS, CT_FIN, CT_NOTIFY };
enum {
    TLF_PREP = 1u << 0,      /* local buffer keys resolved */
    TLF_ALLPOSTED = 1u << 1, /* every WR of the request is posted */
    TLF_DATA = 1u << 2,      /* put_notify: data WRs posted, notification next */
    TLF_WAIT_FIN = 1u << 3,  /* rendezvous send: RTS out, waiting for FIN */
    TLF_INLINE = 1u << 4,    /* put from the user buffer, inline */
    TLF_RDV = 1u << 5        /* recv: rendezvous read */
};
#define RECV_WRID (1ull << 63)
#define NO_SLOT 0xffff
#define BATCH 32

/* req->tl[] use */
#define T_RC 0     /* gw_verbs_rc_entry_t * held for the local buffer */
#define T_SLOT 1   /* bounce slot + 1 held by the request, 0 none */
#define T_STRIPE 2 /* next QP of a striped transfer */
#define T_RADDR 3  /* recv rendezvous: sender address */
#define T_RKEY 4   /* recv rendezvous: rkey | opid << 32 */
#define T_MLEN 5   /* recv rendezvous: message length */

static gw_verbs_ep_t *to_vep(gw_tl_ep_t *e) { return (gw_verbs_ep_t *)e; }
static gw_core_t *ep_core(gw_verbs_ep_t *ep) { return ep->vif->super.core; }

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

static const char *op_name(int kind)
{
    switch (kind) {
    case WR_PUT: return "RDMA WRITE (put)";
    case WR_GET: return "RDMA READ (get)";
    case WR_IMM: return "RDMA WRITE_WITH_IMM (put notification)";
    case WR_SENDMSG: return "SEND (message)";
    case WR_RDV_READ: return "RDMA READ (rendezvous receive)";
    default: return "work request";
    }
}

/* ---- bounce slots ------------------------------------------------------------------ */
static int slot_get(gw_verbs_ep_t *ep)
{
    return ep->nsfree ? ep->sfree[--ep->nsfree] : -1;
}
static void slot_put(gw_verbs_ep_t *ep, int s)
{
    if (s >= 0 && s < GW_VERBS_NSLOTS)
        ep->sfree[ep->nsfree++] = (uint16_t)s;
}
static uint8_t *slot_ptr(gw_verbs_ep_t *ep, int s) { return ep->sbuf + (size_t)s * GW_VERBS_SLOT; }

/* ---- batches ----------------------------------------------------------------------- */
typedef struct batch {
    struct ibv_send_wr wr[GW_VERBS_MAX_QPS][BATCH];
    struct ibv_sge sge[GW_VERBS_MAX_QPS][BATCH];
    int n[GW_VERBS_MAX_QPS];
} batch_t;

static int qp_room(gw_verbs_ep_t *ep, batch_t *b, int qi)
{
    return b->n[qi] < BATCH && ep->qps[qi].used < ep->qps[qi].depth;
}

/* Claims the next WR of QP qi in the batch and its ring record. */
static struct ibv_send_wr *wr_add(gw_verbs_ep_t *ep, batch_t *b, int qi, gw_request_t *req, int kind,
                                  int slot, uint32_t len)
{
    gw_verbs_qp_t *q = &ep->qps[qi];
    int k = b->n[qi]++;
    struct ibv_send_wr *w = &b->wr[qi][k];
    memset(w, 0, sizeof(*w));
    w->sg_list = &b->sge[qi][k];
    uint64_t seq = q->head++;
    gw_verbs_wr_t *r = &q->ring[seq % q->depth];
    r->req = req;
    r->kind = (uint16_t)kind;
    r->slot = (uint16_t)(slot < 0 ? NO_SLOT : slot);
    r->len = len;
    q->used++;
    w->wr_id = ((uint64_t)qi << 48) | (seq & 0xffffffffffffull);
    if (req)
        req->pending++;
    return w;
}

static void ep_die(gw_verbs_ep_t *ep, gw_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void batch_flush(gw_verbs_ep_t *ep, batch_t *b)
{
    for (int qi = 0; qi < ep->nqps; qi++) {
        int n = b->n[qi];
        if (!n)
            continue;
        gw_verbs_qp_t *q = &ep->qps[qi];
        for (int k = 0; k < n; k++) {
            b->wr[qi][k].next = k + 1 < n ? &b->wr[qi][k + 1] : NULL;
            if (++q->unsig >= q->depth / 4 || k == n - 1) {
                b->wr[qi][k].send_flags |= IBV_SEND_SIGNALED;
                q->unsig = 0;
                ep->wr_signalled++;
            }
        }
        b->n[qi] = 0;
        ep->wr_posted += (uint64_t)n;
        ep->post_calls++;
        struct ibv_send_wr *bad = NULL;
        int rc = ibv_post_send(q->qp, &b->wr[qi][0], &bad);
        if (rc) {
            ep_die(ep, GW_ERR_VERBS, "ibv_post_send(qp=0x%x, %d WRs, first %s) failed: %s "
                   "(errno %d)", q->qp->qp_num, n,
                   op_name(q->ring[(bad ? bad->wr_id : b->wr[qi][0].wr_id) % q->depth].kind),
                   strerror(rc), rc);
            return;
        }
    }
}

/* ---- request completion ------------------------------------------------------------- */
static void req_release(gw_verbs_ep_t *ep, gw_request_t *req)
{
    if (req->tl[T_RC]) {
        gw_verbs_rcache_put(ep->vif, (gw_verbs_rc_entry_t *)(uintptr_t)req->tl[T_RC]);
        req->tl[T_RC] = 0;
    }
    if (req->tl[T_SLOT]) {
        slot_put(ep, (int)req->tl[T_SLOT] - 1);
        req->tl[T_SLOT] = 0;
    }
}

static void ctrl_queue(gw_verbs_ep_t *ep, uint8_t type, uint32_t status, uint64_t a, uint64_t b)
{
    if (ep->ctrl_count == GW_ARRAY_SIZE(ep->ctrlq)) {
        ep_die(ep, GW_ERR_NO_RESOURCE, "control queue full (%u messages waiting)", ep->ctrl_count);
        return;
    }
    gw_verbs_ctrl_t *c = &ep->ctrlq[(ep->ctrl_head + ep->ctrl_count) % GW_ARRAY_SIZE(ep->ctrlq)];
    c->type = type;
    c->status = status;
    c->a = a;
    c->b = b;
    ep->ctrl_count++;
}

static void rdv_recv_forget(gw_verbs_ep_t *ep, gw_request_t *req);

static void req_maybe_done(gw_verbs_ep_t *ep, gw_request_t *req)
{
    if (req->pending || !(req->tl_flags & TLF_ALLPOSTED))
        return;
    gw_ep_base_t *base = ep->super.base;
    if (req->op == GW_OP_RECV) {
        /* rendezvous data is in place: release the sender, finish the receive */
        uint64_t opid = req->tl[T_RKEY] >> 32;
        size_t mlen = (size_t)req->tl[T_MLEN];
        req_release(ep, req);
        rdv_recv_forget(ep, req);
        ctrl_queue(ep, CT_FIN, 0, opid, 0);
        if (req->lmem && req->lmem->type != GW_MEM_HOST)
            gpu_fence(ep);
        gw_ep_recv_done(base, req, mlen, req->rtag, GW_OK);
        return;
    }
    if (req->op == GW_OP_SEND && (req->tl_flags & TLF_WAIT_FIN))
        return; /* completes when the receiver's FIN arrives */
    if (req->op == GW_OP_GET && req->tl[T_SLOT])
        memcpy(req->buf, slot_ptr(ep, (int)req->tl[T_SLOT] - 1), req->len);
    req->length = req->len;
    req_release(ep, req);
    gw_ep_op_done(base, req, GW_OK);
}

/* ---- local keys ---------------------------------------------------------------------- */
/* Resolves how the local buffer is reached.  Returns 1 ready, 0 blocked
 * (no bounce slot now), -1 failed (request completed with the error). */
static int req_prep(gw_verbs_ep_t *ep, gw_request_t *req, int is_read_target, size_t len)
{
    if (req->tl_flags & TLF_PREP)
        return 1;
    if (req->op == GW_OP_PUT || req->op == GW_OP_PUT_NOTIFY) {
        if (len <= ep->max_inline) {
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
        req->tl[T_SLOT] = (uint64_t)s + 1;
        if (!is_read_target)
            memcpy(slot_ptr(ep, s), req->buf, len);
        req->tl_flags |= TLF_PREP;
        return 1;
    }
    gw_verbs_rc_entry_t *e;
    gw_status_t st = gw_verbs_rcache_get(ep->vif, req->buf, len, IBV_ACCESS_LOCAL_WRITE, &e);
    if (st != GW_OK) {
        if (req->op == GW_OP_RECV) {
            rdv_recv_forget(ep, req);
            gw_ep_recv_done(ep->super.base, req, (size_t)req->tl[T_MLEN], req->rtag, st);
        } else {
            gw_ep_op_done(ep->super.base, req, st);
        }
        return -1;
    }
    req->tl[T_RC] = (uint64_t)(uintptr_t)e;
    req->tl_flags |= TLF_PREP;
    return 1;
}

/* lkey of the local piece holding buf+off and the bytes left in it */
static void local_piece(gw_verbs_ep_t *ep, gw_request_t *req, size_t off, uint64_t *addr,
                        uint32_t *lkey, uint64_t *left)
{
    if (req->tl[T_SLOT]) {
        *addr = (uint64_t)(uintptr_t)slot_ptr(ep, (int)req->tl[T_SLOT] - 1) + off;
        *lkey = ep->smr->lkey;
        *left = UINT64_MAX;
        return;
    }
    *addr = (uint64_t)(uintptr_t)req->buf + off;
    const gw_verbs_reg_t *reg = req->tl[T_RC]
                                    ? ((gw_verbs_rc_entry_t *)(uintptr_t)req->tl[T_RC])->reg
                                    : req->lmem->tl_reg[GW_TL_VERBS];
    if (gw_verbs_reg_piece(reg, *addr, lkey, NULL, left) != 0) {
        *lkey = 0;
        *left = 0;
    }
}

/* rkey of the remote piece holding raddr and the bytes left in it; -1 bad key */
static int remote_piece(gw_request_t *req, uint64_t raddr, uint32_t *rkey, uint64_t *left)
{
    if (req->op == GW_OP_RECV) {
        *rkey = (uint32_t)req->tl[T_RKEY];
        *left = UINT64_MAX;
        return 0;
    }
    const gw_rkey_t *k = req->rkey;
    if (!k || k->tl_blob_len < 20 || k->tl_blob[0] != 1)
        return -1;
    int n = k->tl_blob[1];
    uint64_t base = gw_get_u64(k->tl_blob + 4), chunk = gw_get_u64(k->tl_blob + 12);
    if (n == 0) { /* a zero-length region: only zero-length operations reach it */
        *rkey = 0;
        *left = UINT64_MAX;
        return 0;
    }
    if (n < 1 || n > GW_VERBS_MAX_MRS || k->tl_blob_len < 20 + 4 * (size_t)n || chunk == 0 ||
        raddr < base)
        return -1;
    uint64_t i = (raddr - base) / chunk;
    if (i >= (uint64_t)n)
        i = (uint64_t)n - 1;
    *rkey = gw_get_u32(k->tl_blob + 20 + 4 * i);
    *left = (i + 1) * chunk - (raddr - base);
    return 0;
}

/* ---- posting a request -------------------------------------------------------------- */
/* Posts RDMA WRITE/READ pieces of req.  1: all posted, 0: blocked, -1: the
 * request was completed with an error (do not touch it again). */
static int post_rdma(gw_verbs_ep_t *ep, batch_t *b, gw_request_t *req, int kind, size_t total,
                     uint64_t raddr)
{
    size_t stripe = total;
    int nq = 1;
    if (total >= ep->vif->split_min && ep->nqps > 1) {
        nq = ep->nqps;
        stripe = (total + (size_t)nq - 1) / (size_t)nq;
        stripe = (stripe + 4095) & ~(size_t)4095;
    }
    int first = 1;
    while (req->posted < total || (total == 0 && first)) {
        first = 0;
        int qi = nq > 1 ? (int)(req->tl[T_STRIPE] % (uint64_t)nq) : 0;
        if (!qp_room(ep, b, qi))
            return 0;
        size_t off = req->posted;
        uint64_t piece = GW_MIN((uint64_t)(total - off), (uint64_t)stripe);
        if (ep->peer.max_msg)
            piece = GW_MIN(piece, (uint64_t)GW_MIN(ep->peer.max_msg, ep->local.max_msg));
        uint32_t rkey;
        uint64_t rleft, laddr = 0, lleft = UINT64_MAX;
        uint32_t lkey = 0;
        if (remote_piece(req, raddr + off, &rkey, &rleft) != 0) {
            if (req->pending)
                return 0; /* cannot happen past the first piece: same key */
            req_release(ep, req);
            gw_ep_op_done(ep->super.base, req,
                          gw_err(ep_core(ep), GW_ERR_INVALID_KEY,
                                 "verbs %s(raddr=0x%llx): the remote key carries no usable verbs "
                                 "part", op_name(kind), (unsigned long long)raddr));
            return -1;
        }
        piece = GW_MIN(piece, rleft);
        if (req->tl_flags & TLF_INLINE) {
            laddr = (uint64_t)(uintptr_t)req->buf + off;
        } else {
            local_piece(ep, req, off, &laddr, &lkey, &lleft);
            piece = GW_MIN(piece, lleft);
        }
        struct ibv_send_wr *w = wr_add(ep, b, qi, req, kind, -1, (uint32_t)piece);
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
        req->tl[T_STRIPE]++;
    }
    return 1;
}

/* Fills a control/eager header at p. */
static void hdr_fill(uint8_t *p, uint8_t type, uint32_t status, uint64_t tag, uint64_t len,
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
static void post_sendmsg(gw_verbs_ep_t *ep, batch_t *b, gw_request_t *req, int s, uint32_t bytes)
{
    struct ibv_send_wr *w = wr_add(ep, b, 0, req, WR_SENDMSG, s, bytes);
    w->opcode = IBV_WR_SEND;
    w->num_sge = 1;
    w->sg_list->addr = (uint64_t)(uintptr_t)slot_ptr(ep, s);
    w->sg_list->length = bytes;
    w->sg_list->lkey = ep->smr->lkey;
    if (bytes <= ep->max_inline)
        w->send_flags |= IBV_SEND_INLINE;
}

static int rdv_alloc(gw_verbs_ep_t *ep, gw_request_t *req)
{
    for (int i = 0; i < (int)GW_ARRAY_SIZE(ep->rdv); i++) {
        if (!ep->rdv[i]) {
            ep->rdv[i] = req;
            ep->rdv_gen[i]++;
            return i;
        }
    }
    return -1;
}

/* Rendezvous receives in flight are owned here (they are on no api list):
 * they sit on ep->rdv_recvs from the RTS until the data is in place. */
static void rdv_recv_forget(gw_verbs_ep_t *ep, gw_request_t *req)
{
    (void)ep;
    if (req->tl_flags & TLF_RDV) {
        req->tl_flags &= (uint16_t)~TLF_RDV;
        gw_list_del(&req->tl_link);
    }
}

/* 1 fully posted, 0 blocked (keep at the head of the queue). */
static int post_req(gw_verbs_ep_t *ep, batch_t *b, gw_request_t *req)
{
    int r;
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
        /* every earlier put on the other QPs must have landed */
        for (int qi = 1; qi < ep->nqps; qi++)
            if (ep->qps[qi].used || b->n[qi])
                return 0;
        if (!qp_room(ep, b, 0))
            return 0;
        if (req->value < (1ull << 31)) {
            uint32_t rkey = 0;
            uint64_t left;
            if (remote_piece(req, req->raddr, &rkey, &left) != 0)
                rkey = 0;
            struct ibv_send_wr *w = wr_add(ep, b, 0, req, WR_IMM, -1, 0);
            w->opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
            w->imm_data = htonl((uint32_t)req->value | 0x80000000u);
            w->wr.rdma.remote_addr = req->raddr;
            w->wr.rdma.rkey = rkey;
        } else {
            int s = slot_get(ep);
            if (s < 0)
                return 0;
            hdr_fill(slot_ptr(ep, s), CT_NOTIFY, 0, req->value, 0, 0, 0, 0);
            post_sendmsg(ep, b, req, s, GW_VERBS_HDR);
        }
        req->tl_flags |= TLF_ALLPOSTED;
        return 1;
    }
    case GW_OP_SEND: {
        if (!qp_room(ep, b, 0))
            return 0;
        int s = slot_get(ep);
        if (s < 0)
            return 0;
        uint8_t *p = slot_ptr(ep, s);
        if (req->len <= GW_VERBS_EAGER_MAX) {
            hdr_fill(p, CT_EAGER, 0, req->value, req->len, 0, 0, 0);
            if (req->len)
                memcpy(p + GW_VERBS_HDR, req->buf, req->len);
            post_sendmsg(ep, b, req, s, (uint32_t)(GW_VERBS_HDR + req->len));
            req->tl_flags |= TLF_ALLPOSTED;
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
            req->tl[T_RC] = (uint64_t)(uintptr_t)e;
            reg = e->reg;
        }
        gw_verbs_reg_piece(reg, (uint64_t)(uintptr_t)req->buf, NULL, &rkey, &left);
        if (left < req->len) {
            slot_put(ep, s);
            req_release(ep, req);
            gw_ep_op_done(ep->super.base, req,
                          gw_err(ep_core(ep), GW_ERR_UNSUPPORTED,
                                 "send(len=%zu) over verbs: the buffer spans several memory "
                                 "regions (largest MR %llu bytes); rendezvous needs one",
                                 req->len, (unsigned long long)ep->vif->max_mr));
            return 1;
        }
        int id = rdv_alloc(ep, req);
        if (id < 0) {
            slot_put(ep, s);
            return 0;
        }
        uint64_t opid = ((uint64_t)ep->rdv_gen[id] << 8) | (uint64_t)id;
        hdr_fill(p, CT_RTS, 0, req->value, req->len, (uint64_t)(uintptr_t)req->buf, rkey, opid);
        req->tl_flags |= TLF_WAIT_FIN | TLF_ALLPOSTED;
        post_sendmsg(ep, b, req, s, GW_VERBS_HDR);
        return 1;
    }
    case GW_OP_RECV: { /* rendezvous read into the receive buffer */
        size_t n = GW_MIN(req->len, (size_t)req->tl[T_MLEN]);
        if ((r = req_prep(ep, req, 1, n)) <= 0)
            return r < 0 ? 1 : 0;
        if (n == 0) {
            req->tl_flags |= TLF_ALLPOSTED;
            req_maybe_done(ep, req);
            return 1;
        }
        r = post_rdma(ep, b, req, WR_RDV_READ, n, req->tl[T_RADDR]);
        if (r == 0)
            return 0;
        req->tl_flags |= TLF_ALLPOSTED;
        return 1;
    }
    default:
        gw_ep_op_done(ep->super.base, req, GW_ERR_UNSUPPORTED);
        return 1;
    }
}

/* Posts what is queued; returns the number of WRs handed to the device. */
static int post_pending(gw_verbs_ep_t *ep)
{
    if (ep->dead || !ep->connected)
        return 0;
    uint64_t before = ep->wr_posted;
    batch_t b;
    memset(b.n, 0, sizeof(b.n));
    /* control messages first (FIN unblocks the peer) */
    while (ep->ctrl_count && qp_room(ep, &b, 0)) {
        int s = slot_get(ep);
        if (s < 0)
            break;
        gw_verbs_ctrl_t *c = &ep->ctrlq[ep->ctrl_head];
        hdr_fill(slot_ptr(ep, s), c->type, c->status, c->b, 0, 0, 0, c->a);
        post_sendmsg(ep, &b, NULL, s, GW_VERBS_HDR);
        ep->ctrl_head = (ep->ctrl_head + 1) % (unsigned)GW_ARRAY_SIZE(ep->ctrlq);
        ep->ctrl_count--;
    }
    gw_list_t *p, *t;
    gw_list_for_each_safe(p, t, &ep->pending) {
        gw_request_t *req = gw_container_of(p, gw_request_t, tl_link);
        gw_list_del(p);
        if (!post_req(ep, &b, req)) {
            gw_list_push_front(&ep->pending, &req->tl_link);
            break;
        }
        if (ep->dead)
            return 1;
    }
    gw_list_for_each_safe(p, t, &ep->rdv_recvs) {
        gw_request_t *req = gw_container_of(p, gw_request_t, tl_link);
        if ((req->tl_flags & TLF_ALLPOSTED) || !post_req(ep, &b, req))
            continue;
        if (ep->dead)
            return 1;
    }
    batch_flush(ep, &b);
    return (int)(ep->wr_posted - before);
}

/* ---- failure ------------------------------------------------------------------------ */
/* Drops every reference this endpoint holds to requests.  When `own` is set
 * the requests are still valid (we fail them ourselves right after) and their
 * resources are released; otherwise the api layer already failed and
 * recycled them, and they must not be touched. */
static void ep_forget_all(gw_verbs_ep_t *ep, int own, gw_status_t st)
{
    for (int qi = 0; qi < ep->nqps; qi++) {
        gw_verbs_qp_t *q = &ep->qps[qi];
        for (uint64_t s = q->tail; s != q->head; s++) {
            gw_verbs_wr_t *r = &q->ring[s % q->depth];
            if (own && r->req)
                req_release(ep, r->req);
            r->req = NULL;
        }
    }
    gw_list_t *p, *t;
    if (own) {
        gw_list_for_each_safe(p, t, &ep->pending) {
            gw_request_t *req = gw_container_of(p, gw_request_t, tl_link);
            req_release(ep, req);
        }
    }
    /* (when not own, the nodes may already be recycled: never walk them) */
    gw_list_init(&ep->pending);
    /* rendezvous receives belong to nobody else: fail them here */
    gw_list_for_each_safe(p, t, &ep->rdv_recvs) {
        gw_request_t *req = gw_container_of(p, gw_request_t, tl_link);
        req_release(ep, req);
        rdv_recv_forget(ep, req);
        gw_ep_recv_done(ep->super.base, req, (size_t)req->tl[T_MLEN], req->rtag, st);
    }
    memset(ep->rdv, 0, sizeof(ep->rdv));
}

static void ep_die(gw_verbs_ep_t *ep, gw_status_t st, const char *fmt, ...)
{
    if (ep->dead)
        return;
    ep->dead = 1;
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    ep_forget_all(ep, 1, st);
    gw_err(ep_core(ep), st, "%s", msg);
    gw_ep_fail(ep->super.base, st, "%s", msg);
}

void gw_verbs_ep_fail_qp(gw_verbs_ep_t *ep, struct ibv_qp *qp, const char *why)
{
    ep_die(ep, GW_ERR_CONN_RESET, "verbs qp 0x%x on %s:%d: %s (the queue pair went to the error "
           "state)", qp->qp_num, ep->vif->port.dev, ep->vif->port.port, why);
}

static void wc_fail(gw_verbs_ep_t *ep, const struct ibv_wc *wc, const gw_verbs_wr_t *r)
{
    gw_status_t st = GW_ERR_VERBS;
    const char *hint = "";
    switch (wc->status) {
    case IBV_WC_REM_ACCESS_ERR:
        st = GW_ERR_INVALID_KEY;
        hint = "the target refused the access: its region was deregistered (key revoked), the "
               "range lies outside it, or it lacks the access flag; the target memory was not "
               "touched";
        break;
    case IBV_WC_RETRY_EXC_ERR:
        st = GW_ERR_PEER_TIMEOUT;
        hint = "no acknowledgement after GPUWIRE_IB_RETRY_CNT retries: the peer is gone or the "
               "path is broken (cable, switch, GID/route)";
        break;
    case IBV_WC_RNR_RETRY_EXC_ERR:
        st = GW_ERR_PEER_TIMEOUT;
        hint = "the peer posted no receive buffer in time (peer stalled or gone)";
        break;
    case IBV_WC_LOC_PROT_ERR:
        hint = "local protection error: the local buffer is not covered by its registration "
               "(freed or unregistered memory?)";
        break;
    case IBV_WC_LOC_LEN_ERR:
        hint = "local length error: message larger than the receive buffer";
        st = GW_ERR_PROTOCOL;
        break;
    case IBV_WC_REM_INV_REQ_ERR:
        hint = "the target rejected the request as invalid (length beyond its limit or "
               "operation not enabled)";
        break;
    case IBV_WC_REM_OP_ERR:
        hint = "the target could not complete the operation";
        break;
    case IBV_WC_WR_FLUSH_ERR:
        st = GW_ERR_CONN_RESET;
        hint = "the queue pair was already in error";
        break;
    default:
        break;
    }
    const char *what = r ? op_name(r->kind) : (wc->wr_id & RECV_WRID) ? "RECV" : "work request";
    ep_die(ep, st, "verbs %s of %u bytes on qp 0x%x (%s:%d -> %s) failed: %s (status %d, vendor "
           "error 0x%x): %s", what, r ? r->len : wc->byte_len, wc->qp_num, ep->vif->port.dev,
           ep->vif->port.port, ep->peer.dev, ep->vif->ibv->wc_status_str(wc->status),
           (int)wc->status, wc->vendor_err, hint);
}

/* ---- receive side --------------------------------------------------------------------- */
/* Consumed receive buffers are handed back in one ibv_post_recv() per poll. */
static void repost_recv(gw_verbs_ep_t *ep, unsigned idx)
{
    ep->repost[ep->nrepost++] = (uint16_t)idx;
}

static void repost_flush(gw_verbs_ep_t *ep)
{
    unsigned n = ep->nrepost;
    if (!n || ep->dead)
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
    int rc = ibv_post_recv(ep->qps[0].qp, w, &bad);
    if (rc)
        ep_die(ep, GW_ERR_VERBS, "ibv_post_recv(qp=0x%x, %u buffers) failed: %s",
               ep->qps[0].qp->qp_num, n, strerror(rc));
}

static void start_rdv_recv(gw_verbs_ep_t *ep, gw_request_t *req, uint64_t tag, uint64_t len,
                           uint64_t addr, uint32_t rkey, uint64_t opid)
{
    req->rtag = tag;
    req->tl[T_RADDR] = addr;
    req->tl[T_RKEY] = (uint64_t)rkey | (opid << 32);
    req->tl[T_MLEN] = len;
    req->posted = 0;
    req->pending = 0;
    req->tl_flags = TLF_RDV;
    memset(&req->tl[T_RC], 0, sizeof(req->tl[0]) * 3);
    gw_list_push_back(&ep->rdv_recvs, &req->tl_link);
}

static void on_recv(gw_verbs_ep_t *ep, const struct ibv_wc *wc)
{
    gw_ep_base_t *base = ep->super.base;
    unsigned idx = (unsigned)(wc->wr_id & 0xffff);
    base->last_rx_ns = gw_now_coarse_ns();
    if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
        uint32_t imm = ntohl(wc->imm_data);
        gpu_fence(ep);
        if (gw_ep_notify_push(base, imm & 0x7fffffffu) != 0)
            ep_die(ep, GW_ERR_NOMEM, "notification queue: out of memory");
        repost_recv(ep, idx);
        return;
    }
    const uint8_t *p = ep->rbuf + (size_t)idx * GW_VERBS_SLOT;
    if (wc->byte_len < GW_VERBS_HDR) {
        ep_die(ep, GW_ERR_PROTOCOL, "verbs: %u-byte message from %s is shorter than a header",
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
            ep_die(ep, GW_ERR_PROTOCOL, "verbs: eager message claims %llu bytes, carries %u",
                   (unsigned long long)len, wc->byte_len - GW_VERBS_HDR);
            return;
        }
        gw_request_t *r = gw_ep_match_posted(base, tag);
        if (r) {
            memcpy(r->buf, p + GW_VERBS_HDR, GW_MIN((size_t)len, r->len));
            gw_ep_recv_done(base, r, (size_t)len, tag, GW_OK);
        } else {
            gw_unexp_t *u = calloc(1, sizeof(*u));
            void *d = malloc(len ? len : 1);
            if (!u || !d) {
                free(u);
                free(d);
                ep_die(ep, GW_ERR_NOMEM, "unexpected message (%llu bytes): out of memory",
                       (unsigned long long)len);
                return;
            }
            memcpy(d, p + GW_VERBS_HDR, len);
            u->tag = tag;
            u->len = (size_t)len;
            u->data = d;
            gw_list_push_back(&base->unexpected, &u->link);
        }
        break;
    }
    case CT_RTS: {
        gw_request_t *r = gw_ep_match_posted(base, tag);
        if (r) {
            start_rdv_recv(ep, r, tag, len, addr, rkey, opid);
        } else {
            gw_unexp_t *u = calloc(1, sizeof(*u));
            if (!u) {
                ep_die(ep, GW_ERR_NOMEM, "unexpected rendezvous: out of memory");
                return;
            }
            u->tag = tag;
            u->len = (size_t)len;
            u->handle = ((uint64_t)rkey << 32) | opid;
            u->handle2 = addr;
            gw_list_push_back(&base->unexpected, &u->link);
        }
        break;
    }
    case CT_FIN: {
        unsigned id = (unsigned)(opid & 0xff);
        if (id < GW_ARRAY_SIZE(ep->rdv) && ep->rdv[id] &&
            ((opid >> 8) & 0xffff) == ep->rdv_gen[id]) {
            gw_request_t *r = ep->rdv[id];
            ep->rdv[id] = NULL;
            r->tl_flags &= (uint16_t)~TLF_WAIT_FIN;
            r->length = r->len;
            req_release(ep, r);
            gw_ep_op_done(base, r, GW_OK);
        } else {
            gw_log(GW_LOG_DEBUG, "verbs: FIN for unknown rendezvous %llu (ignored)",
                   (unsigned long long)opid);
        }
        break;
    }
    case CT_NOTIFY:
        gpu_fence(ep);
        if (gw_ep_notify_push(base, tag) != 0)
            ep_die(ep, GW_ERR_NOMEM, "notification queue: out of memory");
        break;
    default:
        ep_die(ep, GW_ERR_PROTOCOL, "verbs: unknown message type %u from %s", type, ep->peer.dev);
        return;
    }
    if (!ep->dead)
        repost_recv(ep, idx);
}

/* ---- completions ------------------------------------------------------------------------ */
static void retire(gw_verbs_ep_t *ep, int qi, uint64_t upto)
{
    gw_verbs_qp_t *q = &ep->qps[qi];
    while (q->tail != q->head && !ep->dead) {
        uint64_t s = q->tail;
        gw_verbs_wr_t *r = &q->ring[s % q->depth];
        gw_request_t *req = r->req;
        r->req = NULL;
        if (r->slot != NO_SLOT)
            slot_put(ep, r->slot);
        r->slot = NO_SLOT;
        q->tail++;
        q->used--;
        if (req) {
            req->pending--;
            req_maybe_done(ep, req);
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
        if (n < 0) {
            ep_die(ep, GW_ERR_VERBS, "ibv_poll_cq(%s) failed: %d", ep->vif->port.dev, n);
            return total;
        }
        for (int i = 0; i < n; i++) {
            if (ep->dead)
                continue; /* consequences of the first error: not causes */
            if (wc[i].status != IBV_WC_SUCCESS) {
                gw_verbs_wr_t *r = NULL;
                if (!(wc[i].wr_id & RECV_WRID)) {
                    int qi = (int)(wc[i].wr_id >> 48);
                    if (qi < ep->nqps)
                        r = &ep->qps[qi].ring[(wc[i].wr_id & 0xffffffffffffull) %
                                              ep->qps[qi].depth];
                }
                wc_fail(ep, &wc[i], r);
                continue;
            }
            if (wc[i].wr_id & RECV_WRID)
                on_recv(ep, &wc[i]);
            else
                retire(ep, (int)(wc[i].wr_id >> 48), wc[i].wr_id & 0xffffffffffffull);
        }
        repost_flush(ep);
        total += n;
    } while (n == 32);
    return total;
}

int gw_verbs_ep_progress(gw_verbs_ep_t *ep)
{
    if (!ep->connected)
        return 0;
    if (!ep->dead && ep->super.base->error != GW_OK) {
        /* failed from above (peer gone on the bootstrap socket, close, timeout) */
        ep->dead = 1;
        ep_forget_all(ep, 0, ep->super.base->error);
    }
    /* posted work counts as progress: a caller that progresses until 0
     * before sleeping on the context fd has handed everything to the device */
    int n = post_pending(ep);
    int c = poll_cq(ep);
    if (c)
        n += post_pending(ep);
    n += c;
    if (n) {
        /* no clock read here: the busy path stays free of system calls
         * (where the clock has no vDSO mode, as in an emulated guest, each
         * read is one); the idle path below stamps the activity */
        ep->active_ns = 0;
        ep->idle_polls = 0;
    }
    if (c)
        ep->super.base->last_rx_ns = gw_now_coarse_ns(); /* completions are the peer's acks */
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
        /* going idle: arm the CQ so the context fd wakes a sleeping caller */
        if (ibv_req_notify_cq(ep->cq, 0) == 0)
            ep->cq_armed = 1;
        n = poll_cq(ep);
        if (n)
            post_pending(ep);
    }
    return n;
}

/* ---- operations (api entry points) ------------------------------------------------------ */
static gw_status_t enqueue(gw_tl_ep_t *e, gw_request_t *req)
{
    gw_verbs_ep_t *ep = to_vep(e);
    if (ep->dead || !ep->connected)
        return gw_err(ep_core(ep), GW_ERR_ENDPOINT_FAILED, "verbs endpoint to %s is %s",
                      ep->super.base->peer, ep->dead ? "failed" : "not connected");
    req->posted = 0;
    req->pending = 0;
    req->tl_flags = 0;
    memset(req->tl, 0, sizeof(req->tl));
    /* posted by the next progress call, batched with whatever else is queued
     * by then (callers progress before they sleep, so no wake-up is needed);
     * on an idle endpoint there is nothing to batch with: post at once
     * (latency) */
    int idle = gw_list_empty(&ep->pending);
    for (int qi = 0; idle && qi < ep->nqps; qi++)
        idle = ep->qps[qi].used < 4; /* (a few unreaped completions: still idle) */
    gw_list_push_back(&ep->pending, &req->tl_link);
    if (idle) {
        post_pending(ep);
        ep->active_ns = 0; /* activity: stamped by the next idle progress pass */
        ep->idle_polls = 0;
    }
    return GW_OK;
}

gw_status_t gw_verbs_put(gw_tl_ep_t *e, gw_request_t *req) { return enqueue(e, req); }
gw_status_t gw_verbs_get(gw_tl_ep_t *e, gw_request_t *req) { return enqueue(e, req); }
gw_status_t gw_verbs_put_notify(gw_tl_ep_t *e, gw_request_t *req) { return enqueue(e, req); }
gw_status_t gw_verbs_send(gw_tl_ep_t *e, gw_request_t *req) { return enqueue(e, req); }

gw_status_t gw_verbs_recv_matched(gw_tl_ep_t *e, gw_request_t *req, gw_unexp_t *msg)
{
    gw_verbs_ep_t *ep = to_vep(e);
    if (req->flags & GW_REQF_QUEUED) { /* still on the posted list: take it off */
        gw_list_del(&req->link);
        req->flags &= (uint8_t)~GW_REQF_QUEUED;
    }
    if (msg->data) { /* eager: the payload is here */
        memcpy(req->buf, msg->data, GW_MIN(msg->len, req->len));
        gw_ep_recv_done(ep->super.base, req, msg->len, msg->tag, GW_OK);
    } else if (ep->dead) {
        gw_ep_recv_done(ep->super.base, req, msg->len, msg->tag, ep->super.base->error);
    } else {
        start_rdv_recv(ep, req, msg->tag, msg->len, msg->handle2, (uint32_t)(msg->handle >> 32),
                       msg->handle & 0xffffffffu);
        gw_core_signal(ep_core(ep));
    }
    free(msg->data);
    free(msg);
    return GW_OK;
}
