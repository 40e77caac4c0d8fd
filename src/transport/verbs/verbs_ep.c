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
 *
 * GPU memory on the staging rung (no MR: see the "staged GPU memory" section
 * at the end): moved in chunks through registered pinned bounce buffers of a
 * staging engine, D2H/H2D overlapped with the RDMA; a staged remote region is
 * served by its owner on request (CT_SREQ -> RDMA READ/WRITE on its side ->
 * CT_SACK with a status), which checks key, access and bounds itself.
 */
#include "cuda/cuda_wrap.h"
#include "transport/verbs/verbs.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

enum { WR_PUT = 1, WR_GET, WR_IMM, WR_SENDMSG, WR_RDV_READ, WR_RDV_IMM };
enum { CT_EAGER = 1, CT_RTS, CT_FIN, CT_NOTIFY };
enum {
    TLF_PREP = 1u << 0,      /* local buffer keys resolved */
    TLF_ALLPOSTED = 1u << 1, /* every WR of the request is posted */
    TLF_DATA = 1u << 2,      /* put_notify: data WRs posted, notification next */
    TLF_WAIT_FIN = 1u << 3,  /* rendezvous send: RTS out, waiting for FIN */
    TLF_INLINE = 1u << 4,    /* put from the user buffer, inline */
    TLF_RDV = 1u << 5,       /* recv: rendezvous read */
    TLF_CTS = 1u << 7,       /* send: the receiver asked for the data by RDMA WRITE */
    TLF_WFIN = 1u << 8,      /* recv: CTS sent, the sender WRITEs and then says WFIN */
    TLF_WIMM = 1u << 9       /* send/recv with TLF_CTS/TLF_WFIN: the WRITEs are striped and each
                              * queue pair used is closed by a WRITE_WITH_IMM instead of a WFIN */
};
/* Rendezvous by RDMA WRITE (receive buffer in a region the user opened to
 * remote writes, within one MR): the receiver answers the RTS with CT_CTS
 * (its address, rkey and id), and the sender WRITEs the data.
 * - With a peer announcing GW_VERBS_FEAT_WRITE_IMM the CTS carries
 *   CTS_WIMM: the sender stripes the WRITEs over the queue pairs as a put
 *   (from GPUWIRE_IB_SPLIT_MIN) and closes each queue pair it used with a
 *   zero-length WRITE_WITH_IMM whose immediate is RDV_IMM(number of queue
 *   pairs used, the receiver's id).  RC orders each queue pair, so the
 *   receiver has the whole message once it has seen that many immediates;
 *   nobody waits for a queue pair to drain and no FIN is sent.
 * - Otherwise (an older peer) the data goes on QP 0 only, followed there
 *   by a CT_WFIN message; messages from GPUWIRE_IB_SPLIT_MIN are READ. */
#define CTS_WIMM 1u
#define RDV_IMM(nq, opid) ((uint32_t)(nq) << 24 | (uint32_t)(opid)) /* bit 31 clear: not a notification */
enum { CT_CTS = 7, CT_WFIN };
#define RECV_WRID GW_VERBS_RECV_WRID
#define DRAIN_WRID (1ull << 61) /* the drain markers of a dead endpoint (send and receive) */
#define NO_SLOT 0xffff
#define BATCH 32

/* req->tl[] use */
#define T_RC 0     /* gw_verbs_rc_entry_t * held for the local buffer */
#define T_SLOT 1   /* bounce slot + 1 held by the request, 0 none */
#define T_STRIPE 2 /* next QP of a striped transfer */
#define T_RADDR 3  /* recv rendezvous: sender address */
#define T_RKEY 4   /* recv rendezvous: rkey | opid << 32 */
#define T_MLEN 5   /* recv rendezvous: message length */

/* staged GPU memory (the section at the end of this file) */
enum { WR_SPUT = 16, WR_SGET, WR_SREAD, WR_SWRITE }; /* chunk WRs (initiator: S*, owner: SREAD/SWRITE) */
enum { CT_SREQ = 5, CT_SACK };                       /* chunk request / its acknowledgement */
enum { C_FREE = 0, C_D2H, C_READY, C_XFER, C_H2D };  /* initiator chunk states */
enum { J_FREE = 0, J_SLOT, J_READ, J_H2D, J_D2H, J_WRITE, J_EAGER }; /* owner job states */
#define TLF_STAGED (1u << 6)      /* the request moves through bounce buffers */
#define T_STG 2                   /* staged: gw_verbs_sreq_t * (never striped) */
#define RTS_STAGED (1u << 31)     /* in an RTS opid: the sender's buffer is staged */
#define GW_MAX_STG_HOST_CHUNK (1u << 20) /* chunk of a host buffer for a staged peer */
typedef struct gw_verbs_sreq gw_verbs_sreq_t;
typedef struct batch batch_t;
static int mem_staged(const gw_mem_t *m);
static int stg_applies(gw_verbs_ep_t *ep, gw_request_t *req);
static int stg_start(gw_verbs_ep_t *ep, batch_t *b, gw_request_t *req);
static int stg_progress(gw_verbs_ep_t *ep, batch_t *b);
static int stg_busy(const gw_verbs_ep_t *ep);
static void stg_free(gw_verbs_ep_t *ep, gw_verbs_sreq_t *sr, int touch_req);
static void stg_forget_all(gw_verbs_ep_t *ep, int own);
static void stg_chunk_wr_done(gw_verbs_ep_t *ep, uint32_t aux);
static void stg_job_wr_done(gw_verbs_ep_t *ep, uint32_t aux);
static void stg_on_sreq(gw_verbs_ep_t *ep, const uint8_t *p, uint32_t bytes);
static void stg_on_sack(gw_verbs_ep_t *ep, uint32_t cookie, gw_status_t st, const uint8_t *data, uint32_t n);
static gw_status_t copy_from_user(gw_request_t *req, void *dst, const void *src, size_t n);
static gw_status_t copy_to_user(gw_request_t *req, void *dst, const void *src, size_t n);

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
    case WR_RDV_IMM: return "RDMA WRITE_WITH_IMM (end of a rendezvous send)";
    case WR_SPUT: return "RDMA WRITE (staged put chunk)";
    case WR_SGET: return "RDMA READ (staged get chunk)";
    case WR_SREAD: return "RDMA READ (staged chunk for the peer)";
    case WR_SWRITE: return "RDMA WRITE (staged chunk for the peer)";
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
struct batch {
    struct ibv_send_wr wr[GW_VERBS_MAX_QPS][BATCH];
    struct ibv_sge sge[GW_VERBS_MAX_QPS][BATCH][2]; /* (a second one: eager sends, see post_req) */
    int n[GW_VERBS_MAX_QPS];
};

static int qp_room(gw_verbs_ep_t *ep, batch_t *b, int qi)
{
    return b->n[qi] < BATCH && ep->qps[qi].used < ep->qps[qi].depth;
}

/* A bounce slot for a message on QP 0 when QP 0 and the batch have room:
 * its index, else -1 (blocked: try again on a later pass). */
static int msg_slot(gw_verbs_ep_t *ep, batch_t *b)
{
    return qp_room(ep, b, 0) ? slot_get(ep) : -1;
}

/* Claims the next WR of QP qi in the batch and its ring record. */
static struct ibv_send_wr *wr_add(gw_verbs_ep_t *ep, batch_t *b, int qi, gw_request_t *req, int kind,
                                  int slot, uint32_t len)
{
    gw_verbs_qp_t *q = &ep->qps[qi];
    int k = b->n[qi]++;
    struct ibv_send_wr *w = &b->wr[qi][k];
    memset(w, 0, sizeof(*w));
    w->sg_list = b->sge[qi][k];
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
    if ((req->tl_flags & TLF_STAGED) && req->tl[T_STG])
        stg_free(ep, (gw_verbs_sreq_t *)(uintptr_t)req->tl[T_STG], 1);
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
    gw_status_t st = GW_OK;
    if (req->op == GW_OP_GET && req->tl[T_SLOT]) /* (GPU memory: one synchronous cuMemcpy) */
        st = copy_to_user(req, req->buf, slot_ptr(ep, (int)req->tl[T_SLOT] - 1), req->len);
    req->length = req->len;
    req_release(ep, req);
    gw_ep_op_done(base, req, st);
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
        req->tl[T_SLOT] = (uint64_t)s + 1;
        gw_status_t cst = is_read_target ? GW_OK : copy_from_user(req, slot_ptr(ep, s), req->buf, len);
        if (cst != GW_OK) {
            req_release(ep, req);
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
    if (req->op == GW_OP_RECV || (req->tl_flags & TLF_CTS)) {
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
static struct ibv_send_wr *post_sendmsg(gw_verbs_ep_t *ep, batch_t *b, gw_request_t *req, int s,
                                         uint32_t bytes)
{
    struct ibv_send_wr *w = wr_add(ep, b, 0, req, WR_SENDMSG, s, bytes);
    w->opcode = IBV_WR_SEND;
    w->num_sge = 1;
    w->sg_list->addr = (uint64_t)(uintptr_t)slot_ptr(ep, s);
    w->sg_list->length = bytes;
    w->sg_list->lkey = ep->smr->lkey;
    if (bytes <= ep->max_inline)
        w->send_flags |= IBV_SEND_INLINE;
    return w;
}

/* A rendezvous id on the wire: generation << 8 | table index. */
static uint64_t rdv_opid(const gw_verbs_ep_t *ep, int id)
{
    return ((uint64_t)ep->rdv_gen[id] << 8) | (uint64_t)id;
}

/* The request an id names, or NULL when it names none (stale or forged);
 * *idp gets the table index. */
static gw_request_t *rdv_lookup(gw_verbs_ep_t *ep, uint64_t opid, unsigned *idp)
{
    unsigned id = (unsigned)(opid & 0xff);
    *idp = id;
    if (id >= GW_ARRAY_SIZE(ep->rdv) || ((opid >> 8) & 0xffff) != ep->rdv_gen[id])
        return NULL;
    return ep->rdv[id];
}

/* Every WR on the QPs other than 0 has completed (RC orders QP 0 only):
 * what a notification after striped data waits for. */
static int others_drained(const gw_verbs_ep_t *ep, const batch_t *b)
{
    for (int qi = 1; qi < ep->nqps; qi++)
        if (ep->qps[qi].used || b->n[qi])
            return 0;
    return 1;
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
    int id = rdv_alloc(ep, req);
    if (id < 0)
        return 0;
    int s = slot_get(ep);
    uint64_t sender = (req->tl[T_RKEY] >> 32) & 0xffffffffu;
    uint64_t myid = rdv_opid(ep, id);
    hdr_fill(slot_ptr(ep, s), CT_CTS, imm ? CTS_WIMM : 0, myid, n, (uint64_t)(uintptr_t)req->buf, rkey,
             sender);
    post_sendmsg(ep, b, NULL, s, GW_VERBS_HDR);
    req->tl_flags |= TLF_WFIN | TLF_ALLPOSTED | (imm ? TLF_WIMM : 0); /* (T_STRIPE, zeroed by
                                                                        * start_rdv_recv, counts the end marks) */
    ep->rdv_by_write++;
    return 1;
}

static int vb_post(gw_verbs_ep_t *ep, batch_t *b, gw_request_t *req); /* verbs_batch.c */

static int post_req(gw_verbs_ep_t *ep, batch_t *b, gw_request_t *req)
{
    int r;
    if (req->op == GW_OP_BATCH)
        return vb_post(ep, b, req);
    if (!(req->tl_flags & TLF_STAGED) && stg_applies(ep, req))
        return stg_start(ep, b, req);
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
        if (!others_drained(ep, b)) /* every earlier put on the other QPs must have landed */
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
        if (req->tl_flags & TLF_CTS) { /* the data by RDMA WRITE, then the end marks */
            size_t total = (size_t)req->tl[T_MLEN];
            r = post_rdma(ep, b, req, WR_PUT, total, req->tl[T_RADDR]);
            if (r <= 0)
                return r < 0 ? 1 : 0;
            if (req->tl_flags & TLF_WIMM) {
                /* one zero-length WRITE_WITH_IMM on each queue pair used (pieces
                 * go round-robin from QP 0), all in one batch or none */
                int used = (int)GW_MIN(req->tl[T_STRIPE], (uint64_t)stripe_qps(ep, req, total));
                for (int qi = 0; qi < used; qi++)
                    if (!qp_room(ep, b, qi))
                        return 0;
                uint32_t rid = (uint32_t)(req->tl[T_RKEY] >> 32);
                for (int qi = 0; qi < used; qi++) {
                    struct ibv_send_wr *w = wr_add(ep, b, qi, req, WR_RDV_IMM, -1, 0);
                    w->opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
                    w->imm_data = htonl(RDV_IMM(used, rid));
                    w->wr.rdma.remote_addr = req->tl[T_RADDR];
                    w->wr.rdma.rkey = (uint32_t)req->tl[T_RKEY];
                }
                req->tl_flags |= TLF_ALLPOSTED; /* done when every WR has completed */
                return 1;
            }
            int s = msg_slot(ep, b);
            if (s < 0)
                return 0;
            hdr_fill(slot_ptr(ep, s), CT_WFIN, 0, 0, 0, 0, 0, req->tl[T_RKEY] >> 32);
            post_sendmsg(ep, b, req, s, GW_VERBS_HDR);
            req->tl_flags |= TLF_ALLPOSTED; /* done when the WFIN's SEND completes */
            return 1;
        }
        int s = msg_slot(ep, b);
        if (s < 0)
            return 0;
        uint8_t *p = slot_ptr(ep, s);
        if (req->len <= GW_VERBS_EAGER_MAX) {
            hdr_fill(p, CT_EAGER, 0, req->value, req->len, 0, 0, 0);
            uint32_t lkey;
            uint64_t left;
            if (req->len > ep->max_inline && ep->max_send_sge >= 2 && req->lmem &&
                req->lmem->type == GW_MEM_HOST && req->lmem->tl_reg[GW_TL_VERBS] &&
                gw_verbs_reg_piece(req->lmem->tl_reg[GW_TL_VERBS], (uint64_t)(uintptr_t)req->buf, &lkey, NULL,
                                   &left) == 0 &&
                left >= req->len) {
                /* from a registered buffer: the header from the slot, the payload
                 * straight from the user's memory (a second SGE, no copy) */
                struct ibv_send_wr *w = post_sendmsg(ep, b, req, s, GW_VERBS_HDR);
                w->send_flags &= ~(unsigned)IBV_SEND_INLINE;
                w->sg_list[1].addr = (uint64_t)(uintptr_t)req->buf;
                w->sg_list[1].length = (uint32_t)req->len;
                w->sg_list[1].lkey = lkey;
                w->num_sge = 2;
                ep->eager_gathered++;
                req->tl_flags |= TLF_ALLPOSTED;
                return 1;
            }
            gw_status_t cst = copy_from_user(req, p + GW_VERBS_HDR, req->buf, req->len);
            if (cst != GW_OK) {
                slot_put(ep, s);
                gw_ep_op_done(ep->super.base, req, cst);
                return 1;
            }
            post_sendmsg(ep, b, req, s, (uint32_t)(GW_VERBS_HDR + req->len));
            req->tl_flags |= TLF_ALLPOSTED;
            return 1;
        }
        if (mem_staged(req->lmem)) { /* the receiver asks us for chunks (staged section) */
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
            int id = rdv_alloc(ep, req);
            if (id < 0) {
                slot_put(ep, s);
                return 0;
            }
            uint64_t opid = rdv_opid(ep, id) | RTS_STAGED;
            hdr_fill(p, CT_RTS, 0, req->value, req->len, (uint64_t)(uintptr_t)req->buf, 0, opid);
            req->tl_flags |= TLF_WAIT_FIN | TLF_ALLPOSTED;
            post_sendmsg(ep, b, req, s, GW_VERBS_HDR);
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
        uint64_t opid = rdv_opid(ep, id);
        hdr_fill(p, CT_RTS, 0, req->value, req->len, (uint64_t)(uintptr_t)req->buf, rkey, opid);
        req->tl_flags |= TLF_WAIT_FIN | TLF_ALLPOSTED;
        post_sendmsg(ep, b, req, s, GW_VERBS_HDR);
        return 1;
    }
    case GW_OP_RECV: { /* rendezvous read into the receive buffer */
        size_t n = GW_MIN(req->len, (size_t)req->tl[T_MLEN]);
        if ((r = rdv_cts(ep, b, req, n)) != 0)
            return r > 0;
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
        ep->rdv_by_read++;
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
    if (!ep->ctrl_count && gw_list_empty(&ep->pending) && gw_list_empty(&ep->rdv_recvs) && !ep->stg_live)
        return 0; /* nothing queued (the common case of a progress call) */
    uint64_t before = ep->wr_posted;
    batch_t b;
    memset(b.n, 0, sizeof(b.n));
    /* control messages first (FIN unblocks the peer) */
    while (ep->ctrl_count) {
        int s = msg_slot(ep, &b);
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
    if (stg_progress(ep, &b) && ep->dead)
        return 1;
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
    stg_forget_all(ep, own);
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

/* A dead endpoint's QPs go to the error state and get one marker WR on their
 * send queues; every earlier WR (the READs into and WRITEs from bounce
 * slots) is flushed before its marker completes, and a QP in the error state
 * executes no incoming request, so once all markers are back the NIC touches
 * none of our slots any more and those parked at the failure
 * (stg_slot_drop_or_park) return to their engine, without waiting for the
 * application to close the endpoint: a failed endpoint left open held the
 * slots every other staged transfer of the context needs, and those waited
 * for ever (verbs_gpu_staged reproduced it).  No marker goes on the receive
 * queues: rxe in Linux 6.1 does not flush them, so it would never return.
 * Where a step fails, the slots stay parked until the QPs are destroyed. */
static void stg_slot_drop(gw_verbs_stgeng_t *e, gw_stage_slot_t *s);
static void ep_drain(gw_verbs_ep_t *ep)
{
    if (!ep->stg_nzombie)
        return; /* nothing waits for it */
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_ERR;
    int posted = 0;
    for (int qi = 0; qi < ep->nqps; qi++) {
        struct ibv_qp *qp = ep->qps[qi].qp;
        if (ep->vif->ibv->modify_qp(qp, &a, IBV_QP_STATE) != 0)
            continue;
        struct ibv_send_wr sw, *sbad;
        memset(&sw, 0, sizeof(sw));
        sw.wr_id = DRAIN_WRID | (uint64_t)qi;
        sw.opcode = IBV_WR_SEND;
        sw.send_flags = IBV_SEND_SIGNALED;
        posted += ibv_post_send(qp, &sw, &sbad) == 0;
    }
    ep->draining = posted == ep->nqps ? posted : 0;
    if (!ep->draining)
        gw_log(GW_LOG_DEBUG, "verbs %s: could not drain the failed endpoint's queue pairs; %u bounce "
               "slots stay parked until it is closed", ep->vif->port.dev, ep->stg_nzombie);
}

/* A drain marker came back (poll_cq of a dead endpoint). */
static void ep_drained_one(gw_verbs_ep_t *ep)
{
    if (!ep->draining || --ep->draining)
        return;
    for (unsigned i = 0; i < ep->stg_nzombie; i++)
        stg_slot_drop(ep->stg_zombie[i].eng, ep->stg_zombie[i].slot);
    gw_log(GW_LOG_DEBUG, "verbs %s: failed endpoint drained, %u bounce slots returned", ep->vif->port.dev,
           ep->stg_nzombie);
    ep->stg_returned += ep->stg_nzombie;
    ep->stg_nzombie = 0;
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
    ep_drain(ep);
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
    if (ep->dead)
        return;
    int qi = 0, rc = gw_verbs_post_imm_recvs(ep, &qi);
    if (rc) {
        ep_die(ep, GW_ERR_VERBS, "ibv_post_recv(qp=0x%x, zero-length receives) failed: %s",
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

/* The sender's WRITEs for receive r (rendezvous id `id`) are in place. */
static void rdv_written(gw_verbs_ep_t *ep, gw_request_t *r, unsigned id)
{
    ep->rdv[id] = NULL;
    size_t mlen = (size_t)r->tl[T_MLEN];
    req_release(ep, r);
    rdv_recv_forget(ep, r);
    if (r->lmem && r->lmem->type != GW_MEM_HOST)
        gpu_fence(ep);
    gw_ep_recv_done(ep->super.base, r, mlen, r->rtag, GW_OK);
}

/* A WRITE_WITH_IMM closing one queue pair's share of a striped rendezvous
 * (imm = RDV_IMM(queue pairs used, our id)), seen on queue pair qi. */
static void rdv_imm(gw_verbs_ep_t *ep, uint32_t imm, int qi)
{
    unsigned id, nq = (imm >> 24) & 0x7f;
    gw_request_t *r = rdv_lookup(ep, imm & 0xffffffu, &id);
    if (!r || r->op != GW_OP_RECV || (r->tl_flags & (TLF_WFIN | TLF_WIMM)) != (TLF_WFIN | TLF_WIMM) ||
        nq == 0 || (int)nq > ep->nqps || qi >= (int)nq || r->tl[T_STRIPE] >= nq) {
        ep_die(ep, GW_ERR_PROTOCOL, "verbs: end of rendezvous write 0x%08x from %s on QP %d matches no "
               "receive of ours waiting for one", imm, ep->peer.dev, qi);
        return;
    }
    if (++r->tl[T_STRIPE] == nq)
        rdv_written(ep, r, id);
}

static void on_recv(gw_verbs_ep_t *ep, const struct ibv_wc *wc)
{
    gw_ep_base_t *base = ep->super.base;
    unsigned idx = (unsigned)(wc->wr_id & 0xffff);
    base->last_rx_ns = gw_now_coarse_ns();
    if (wc->wr_id & GW_VERBS_IMMQ_WRID) { /* a zero-length receive on QP 1.. */
        int qi = (int)(wc->wr_id & 0xff);
        if (qi >= 1 && qi < ep->nqps)
            ep->qps[qi].imm_repost++;
        if (wc->opcode != IBV_WC_RECV_RDMA_WITH_IMM || (ntohl(wc->imm_data) & 0x80000000u)) {
            ep_die(ep, GW_ERR_PROTOCOL, "verbs: %s from %s on QP %d, which carries only the ends of "
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
            if (!ep->dead)
                repost_recv(ep, idx);
            return;
        }
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
            gw_status_t cst = copy_to_user(r, r->buf, p + GW_VERBS_HDR, GW_MIN((size_t)len, r->len));
            gw_ep_recv_done(base, r, (size_t)len, tag, cst);
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
        unsigned id;
        gw_request_t *r = rdv_lookup(ep, opid, &id);
        if (r) {
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
    case CT_CTS: { /* the receiver wants our rendezvous data written to it */
        unsigned id;
        gw_request_t *r = rdv_lookup(ep, opid, &id);
        uint32_t cst = gw_get_u32(p + 36);
        if (!r || r->op != GW_OP_SEND || !(r->tl_flags & TLF_WAIT_FIN) || (r->tl_flags & TLF_CTS) ||
            mem_staged(r->lmem) || len > r->len || (cst & ~CTS_WIMM) ||
            ((cst & CTS_WIMM) && !(ep->local.features & GW_VERBS_FEAT_WRITE_IMM)) || tag > 0xffffffu) {
            ep_die(ep, GW_ERR_PROTOCOL, "verbs: CTS from %s for rendezvous %llu (%llu bytes, flags 0x%x) "
                   "matches no send of ours waiting for its receiver", ep->peer.dev,
                   (unsigned long long)opid, (unsigned long long)len, cst);
            return;
        }
        ep->rdv[id] = NULL;
        r->tl_flags = (uint16_t)((r->tl_flags & ~(TLF_WAIT_FIN | TLF_ALLPOSTED)) | TLF_CTS |
                                 ((cst & CTS_WIMM) ? TLF_WIMM : 0));
        r->posted = 0;
        r->tl[T_STRIPE] = 0;
        r->tl[T_RADDR] = addr;
        r->tl[T_RKEY] = (uint64_t)rkey | ((tag & 0xffffffffu) << 32);
        r->tl[T_MLEN] = len;
        gw_list_push_back(&ep->pending, &r->tl_link);
        break;
    }
    case CT_WFIN: { /* the sender's WRITEs for our receive are in place */
        unsigned id;
        gw_request_t *r = rdv_lookup(ep, opid, &id);
        if (!r || r->op != GW_OP_RECV || (r->tl_flags & (TLF_WFIN | TLF_WIMM)) != TLF_WFIN) {
            ep_die(ep, GW_ERR_PROTOCOL, "verbs: WFIN from %s for receive %llu, which is not waiting "
                   "for one", ep->peer.dev, (unsigned long long)opid);
            return;
        }
        rdv_written(ep, r, id);
        break;
    }
    case CT_SREQ:
        stg_on_sreq(ep, p, wc->byte_len);
        break;
    case CT_SACK:
        stg_on_sack(ep, (uint32_t)opid, (gw_status_t)(int32_t)gw_get_u32(p + 36), p + GW_VERBS_HDR,
                    wc->byte_len - GW_VERBS_HDR);
        break;
    case CT_NOTIFY: /* status 1: a counted notification of id tag (a batch's) */
        gpu_fence(ep);
        if (gw_get_u32(p + 36) == 1 ? gw_ep_ncount_add(base, tag) != 0 : gw_ep_notify_push(base, tag) != 0)
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
        if (r->kind == WR_SPUT || r->kind == WR_SGET)
            stg_chunk_wr_done(ep, r->aux);
        else if (r->kind == WR_SREAD || r->kind == WR_SWRITE)
            stg_job_wr_done(ep, r->aux);
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
            if (ep->dead) { /* consequences of the first error: not causes */
                if (wc[i].wr_id & DRAIN_WRID)
                    ep_drained_one(ep);
                continue;
            }
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
        if (n)
            repost_flush(ep); /* (reposts come only from completions) */
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
        ep_drain(ep);
    }
    /* posted work counts as progress: a caller that progresses until 0
     * before sleeping on the context fd has handed everything to the device */
    int n = post_pending(ep);
    int c = poll_cq(ep);
    if (c)
        n += post_pending(ep);
    n += c;
    if (!n && !ep->dead && stg_busy(ep))
        n = 1; /* staged copies in flight: CUDA events wake no fd, keep the caller polling */
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
    /* a rendezvous only (tl.h): the base delivers eager messages and frees
     * msg after this call.  TODO(t10c): the eager records of on_recv could
     * come from gw_ep_unexp_eager() and copy_to_user() become
     * gw_mem_copy_to() (mem/mem_copy.h). */
    gw_verbs_ep_t *ep = to_vep(e);
    if (ep->dead) {
        gw_ep_recv_done(ep->super.base, req, msg->len, msg->tag, ep->super.base->error);
    } else {
        start_rdv_recv(ep, req, msg->tag, msg->len, msg->handle2, (uint32_t)(msg->handle >> 32),
                       msg->handle & 0xffffffffu);
        gw_core_signal(ep_core(ep));
    }
    return GW_OK;
}

/* ==== staged GPU memory (the staging rung) ===================================================
 *
 * A GPU region that the NIC cannot register (no dma-buf, no peermem: the
 * ladder of mem/gpu_reg.h took rung 3) has no MR.  Its bytes move through
 * pinned host bounce buffers of a staging engine (mem/staging.h: D2H and H2D
 * on their own CUDA streams), whose slots are registered as MRs once.  Every
 * operation is cut into chunks of at most one slot (GPUWIRE_STAGING_CHUNK),
 * several in flight, so copies overlap the wire.
 *
 * Initiator side ("sreq", one per staged operation; chunks in ep->schunk):
 *   local staged, remote MR:   put  D2H into a slot, then RDMA WRITE from it
 *                              get  RDMA READ into a slot, then H2D
 *   remote staged (its rkey is version 2, or a rendezvous sender's RTS has
 *   RTS_STAGED): the owner moves the bytes.  A chunk request CT_SREQ names the
 *   region (id) or the rendezvous (opid), the owner's address, and the
 *   initiator's buffer (a slot of ours when local is staged too, else the user
 *   buffer registered for the peer's access):
 *                              put  the owner RDMA READs it into its slot, H2D
 *                              get  the owner D2Hs into its slot, RDMA WRITEs it
 *   and answers CT_SACK with a status once the chunk is in place (put: in GPU
 *   memory).  The owner checks the region (known, on the staging rung, access
 *   flag, bounds) itself: forged or stale keys get GW_ERR_INVALID_KEY /
 *   GW_ERR_ACCESS / GW_ERR_OUT_OF_BOUNDS back and memory is not touched.
 *   GW_VERBS_STG_CREDITS chunk requests per endpoint are in flight at most
 *   (the owner has as many job records, "sjob").
 * Ordering: a put_notify's notification (CT_NOTIFY on QP 0) is posted only
 * when its own chunks are acknowledged and no older staged operation is
 * still running; a plain put_notify waits for older staged operations too.
 * Tagged messages: eager ones are copied synchronously (gw_staging_copy_sync);
 * a rendezvous receive into staged memory reads into slots and H2Ds; a
 * rendezvous send from staged memory announces RTS_STAGED and serves the
 * receiver's chunk requests, then waits for FIN as usual.
 * Engines: per GPU two, one for operations started here and one for serving
 * the peer (a loopback endpoint must not wait for slots it holds itself).
 */
typedef struct gw_verbs_sreq {
    gw_list_t link;           /* ep->stg_reqs, posting order */
    gw_request_t *req;
    uint8_t dir;              /* 0: data leaves (put, put_notify); 1: data arrives (get, recv) */
    uint8_t lstaged, rstaged, is_recv, by_rdv;
    gw_verbs_stgeng_t *eng;   /* lstaged: our engine */
    gw_verbs_rc_entry_t *rc;  /* !lstaged && rstaged: user buffer registered for the peer */
    const gw_verbs_reg_t *lreg;
    uint64_t raddr;           /* remote address of byte 0 */
    uint64_t ident;           /* rstaged: region id or rendezvous opid */
    size_t total, next, acked;
    unsigned inflight;
    gw_status_t err;
    size_t err_off;
    char why[200];
} gw_verbs_sreq_t;

#define SREQ_BYTES 64
#define SREQ_EAGER 1u                             /* p[3]: the payload follows the request */
#define STG_EAGER_MAX (GW_VERBS_SLOT - SREQ_BYTES) /* puts this small to a staged owner carry their data */

static int mem_staged(const gw_mem_t *m)
{
    return m && m->type != GW_MEM_HOST && !m->tl_reg[GW_TL_VERBS];
}

static int rkey_staged(const gw_rkey_t *k)
{
    gw_verbs_rkey_info_t ki;
    char why[128];
    /* byte 0 is the version: only a staged key is parsed whole (this runs on every put) */
    return k && k->tl_blob_len > 0 && k->tl_blob[0] == GW_VERBS_RKEY_STAGED &&
           gw_verbs_rkey_parse(k->tl_blob, k->tl_blob_len, &ki, why, sizeof(why)) == GW_OK &&
           ki.version == GW_VERBS_RKEY_STAGED;
}

static gw_status_t stg_engine(gw_verbs_iface_t *vif, int device, int role, gw_verbs_stgeng_t **out)
{
    gw_core_t *c = vif->super.core;
    if (device < 0 || device >= GW_VERBS_STG_DEVS)
        return gw_err(c, GW_ERR_UNSUPPORTED, "verbs staging: CUDA device %d (at most %d staged devices)",
                      device, GW_VERBS_STG_DEVS);
    if (vif->stg_eng[device][role]) {
        *out = vif->stg_eng[device][role];
        return GW_OK;
    }
    gw_verbs_stgeng_t *e = calloc(1, sizeof(*e));
    if (!e)
        return gw_err(c, GW_ERR_NOMEM, "verbs staging engine(device %d): out of memory", device);
    gw_status_t st = gw_staging_create(c, device, 0, 0, &e->st);
    if (st != GW_OK) {
        free(e);
        return st;
    }
    e->nslots = gw_staging_nbufs(e->st);
    e->device = device;
    e->mr = calloc(e->nslots, sizeof(*e->mr));
    if (!e->mr) {
        gw_staging_destroy(e->st);
        free(e);
        return gw_err(c, GW_ERR_NOMEM, "verbs staging engine(device %d): out of memory", device);
    }
    vif->stg_eng[device][role] = e;
    *out = e;
    return GW_OK;
}

/* The slot's MR (registered on first use: LOCAL_WRITE, REMOTE_READ, REMOTE_WRITE). */
static struct ibv_mr *stg_slot_mr(gw_verbs_iface_t *vif, gw_verbs_stgeng_t *e, gw_stage_slot_t *s)
{
    if (s->index >= e->nslots)
        return NULL;
    if (!e->mr[s->index]) {
        size_t n = gw_staging_chunk(e->st);
        errno = 0;
        e->mr[s->index] = vif->ibv->reg_mr(vif->pd, s->host, n, IBV_ACCESS_LOCAL_WRITE |
                                           IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);
        if (!e->mr[s->index]) {
            int err = errno ? errno : ENOMEM;
            gw_err(vif->super.core, err == ENOMEM || err == EPERM ? GW_ERR_MEMLOCK : GW_ERR_VERBS,
                   "ibv_reg_mr(dev=%s, staging bounce buffer %u of device %d, %zu bytes) failed: %s "
                   "(errno %d; bounce buffers are pinned: check ulimit -l)", vif->port.dev, s->index,
                   e->device, n, strerror(err), err);
        }
    }
    return e->mr[s->index];
}

/* Waits for a slot's copy (teardown only) and gives it back. */
static void stg_slot_drop(gw_verbs_stgeng_t *e, gw_stage_slot_t *s)
{
    if (!e || !s)
        return;
    for (int spin = 0; gw_staging_test(e->st, s) == 0; spin++)
        if (spin > 1000)
            sched_yield();
    gw_staging_release(e->st, s);
}

void gw_verbs_stage_fini(gw_verbs_iface_t *vif)
{
    for (int d = 0; d < GW_VERBS_STG_DEVS; d++) {
        for (int r = 0; r < 2; r++) {
            gw_verbs_stgeng_t *e = vif->stg_eng[d][r];
            if (!e)
                continue;
            for (unsigned i = 0; i < e->nslots; i++)
                if (e->mr[i])
                    vif->ibv->dereg_mr(e->mr[i]);
            gw_staging_destroy(e->st);
            free(e->mr);
            free(e);
            vif->stg_eng[d][r] = NULL;
        }
    }
}

/* ---- initiator ---------------------------------------------------------------------------- */
static int stg_applies(gw_verbs_ep_t *ep, gw_request_t *req)
{
    (void)ep;
    switch (req->op) {
    case GW_OP_PUT:
    case GW_OP_GET:
    case GW_OP_PUT_NOTIFY:
        if (rkey_staged(req->rkey))
            return 1;
        /* small ones to an MR: a bounce slot and one synchronous copy (req_prep) */
        return mem_staged(req->lmem) && req->len > GW_VERBS_EAGER_MAX;
    case GW_OP_RECV:
        return mem_staged(req->lmem) || ((req->tl[T_RKEY] >> 32) & RTS_STAGED);
    default:
        return 0;
    }
}

/* Gives a slot back, or parks it when the NIC may still use it (a WR on a
 * queue pair that was not destroyed yet). */
static void stg_slot_drop_or_park(gw_verbs_ep_t *ep, gw_verbs_stgeng_t *e, gw_stage_slot_t *s, int nic_busy)
{
    if (!s)
        return;
    if (nic_busy && ep->stg_nzombie < GW_ARRAY_SIZE(ep->stg_zombie)) {
        ep->stg_zombie[ep->stg_nzombie].eng = e;
        ep->stg_zombie[ep->stg_nzombie].slot = s;
        ep->stg_nzombie++;
        return;
    }
    stg_slot_drop(e, s);
}

static void stg_free(gw_verbs_ep_t *ep, gw_verbs_sreq_t *sr, int touch_req)
{
    for (unsigned i = 0; i < GW_VERBS_STG_CHUNKS; i++) {
        gw_verbs_schunk_t *ch = &ep->schunk[i];
        if (ch->sr != sr)
            continue;
        if (ch->remote && ch->state == C_XFER && ep->stg_credits)
            ep->stg_credits--;
        /* (a chunk in C_XFER has a WR or a peer's access outstanding on its slot) */
        stg_slot_drop_or_park(ep, sr->eng, ch->slot, ch->state == C_XFER);
        ch->sr = NULL;
        ch->slot = NULL;
        ch->state = C_FREE;
        ch->gen++;
    }
    if (sr->rc)
        gw_verbs_rcache_put(ep->vif, sr->rc);
    gw_list_del(&sr->link);
    if (touch_req)
        sr->req->tl[T_STG] = 0;
    free(sr);
}

/* The operation's data is in place (or failed): complete it, or for a
 * put_notify with no error go on to its notification. */
static void stg_finish(gw_verbs_ep_t *ep, gw_verbs_sreq_t *sr)
{
    gw_request_t *req = sr->req;
    gw_ep_base_t *base = ep->super.base;
    gw_status_t st = sr->err;
    if (st != GW_OK)
        gw_err(ep_core(ep), st, "verbs staged %s(len=%zu, remote 0x%llx) failed at +%zu: %s",
               req->op == GW_OP_PUT ? "put" : req->op == GW_OP_GET ? "get"
               : req->op == GW_OP_PUT_NOTIFY ? "put_notify" : "rendezvous receive",
               sr->total, (unsigned long long)sr->raddr, sr->err_off, sr->why);
    if (req->op == GW_OP_PUT_NOTIFY && st == GW_OK) {
        req->tl_flags |= TLF_DATA; /* stg_progress posts the notification */
        return;
    }
    ep->stg_ops++;
    ep->stg_bytes += sr->acked;
    stg_free(ep, sr, 1);
    if (req->op == GW_OP_RECV) {
        uint64_t opid = (req->tl[T_RKEY] >> 32) & ~(uint64_t)RTS_STAGED;
        size_t mlen = (size_t)req->tl[T_MLEN];
        req_release(ep, req);
        rdv_recv_forget(ep, req);
        ctrl_queue(ep, CT_FIN, 0, opid, 0); /* the sender may go on either way */
        gw_ep_recv_done(base, req, mlen, req->rtag, st);
        return;
    }
    req->length = st == GW_OK ? req->len : 0;
    req_release(ep, req);
    gw_ep_op_done(base, req, st);
}

static void stg_fail(gw_verbs_sreq_t *sr, size_t off, gw_status_t st, const char *why)
{
    if (sr->err != GW_OK)
        return;
    sr->err = st;
    sr->err_off = off;
    snprintf(sr->why, sizeof(sr->why), "%.*s", (int)sizeof(sr->why) - 1, why);
}

static void stg_maybe_finish(gw_verbs_ep_t *ep, gw_verbs_sreq_t *sr)
{
    if (sr->inflight == 0 && (sr->err != GW_OK || sr->next >= sr->total) && !(sr->req->tl_flags & TLF_DATA))
        stg_finish(ep, sr);
}

static void stg_chunk_done(gw_verbs_ep_t *ep, gw_verbs_schunk_t *ch)
{
    gw_verbs_sreq_t *sr = ch->sr;
    if (ch->slot)
        gw_staging_release(sr->eng->st, ch->slot);
    sr->acked += ch->len;
    sr->inflight--;
    ch->sr = NULL;
    ch->slot = NULL;
    ch->state = C_FREE;
    ch->gen++;
    stg_maybe_finish(ep, sr);
}

/* Data of a get chunk arrived in our buffer: H2D when it is a slot. */
static void stg_chunk_arrived(gw_verbs_ep_t *ep, gw_verbs_schunk_t *ch)
{
    gw_verbs_sreq_t *sr = ch->sr;
    if (sr->dir == 1 && sr->lstaged && sr->err == GW_OK) {
        gw_status_t st = gw_staging_h2d(sr->eng->st, ch->slot, (uint8_t *)sr->req->buf + ch->off, ch->len);
        if (st == GW_OK) {
            ch->state = C_H2D;
            return;
        }
        stg_fail(sr, ch->off, st, ep_core(ep)->errbuf);
    }
    stg_chunk_done(ep, ch);
}

/* Local address and keys of a chunk's buffer. */
static int stg_local(gw_verbs_ep_t *ep, gw_verbs_sreq_t *sr, gw_verbs_schunk_t *ch, uint64_t *addr,
                     uint32_t *lkey, uint32_t *rkey, uint64_t *left)
{
    if (ch && ch->slot) {
        struct ibv_mr *mr = stg_slot_mr(ep->vif, sr->eng, ch->slot);
        if (!mr)
            return -1;
        *addr = (uint64_t)(uintptr_t)ch->slot->host;
        *lkey = mr->lkey;
        *rkey = mr->rkey;
        *left = UINT64_MAX;
        return 0;
    }
    *addr = (uint64_t)(uintptr_t)sr->req->buf + (ch ? ch->off : sr->next);
    const gw_verbs_reg_t *reg = sr->rc ? sr->rc->reg : sr->lreg;
    if (!reg || gw_verbs_reg_piece(reg, *addr, lkey, rkey, left) != 0)
        return -1;
    return 0;
}

/* Posts the transfer of a chunk whose local data is ready: 1 posted, 0 no room now. */
static int stg_chunk_xfer(gw_verbs_ep_t *ep, batch_t *b, unsigned ci)
{
    gw_verbs_schunk_t *ch = &ep->schunk[ci];
    gw_verbs_sreq_t *sr = ch->sr;
    uint64_t laddr, left;
    uint32_t lkey = 0, lrkey = 0;
    if (!qp_room(ep, b, 0))
        return 0;
    if (stg_local(ep, sr, ch, &laddr, &lkey, &lrkey, &left) != 0) {
        stg_fail(sr, ch->off, GW_ERR_VERBS, ep_core(ep)->errbuf);
        stg_chunk_done(ep, ch);
        return 1;
    }
    if (!sr->rstaged) {
        uint32_t rkey;
        uint64_t rleft;
        if (remote_piece(sr->req, sr->raddr + ch->off, &rkey, &rleft) != 0) {
            stg_fail(sr, ch->off, GW_ERR_INVALID_KEY, "the remote key carries no usable verbs part");
            stg_chunk_done(ep, ch);
            return 1;
        }
        int kind = sr->dir ? WR_SGET : WR_SPUT;
        struct ibv_send_wr *w = wr_add(ep, b, 0, NULL, kind, -1, ch->len);
        ep->qps[0].ring[(ep->qps[0].head - 1) % ep->qps[0].depth].aux = ci + 1;
        w->opcode = sr->dir ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE;
        w->wr.rdma.remote_addr = sr->raddr + ch->off;
        w->wr.rdma.rkey = rkey;
        if (ch->len) {
            w->num_sge = 1;
            w->sg_list->addr = laddr;
            w->sg_list->length = ch->len;
            w->sg_list->lkey = lkey;
        }
        ch->state = C_XFER;
        return 1;
    }
    int s = slot_get(ep);
    if (s < 0)
        return 0;
    uint8_t *p = slot_ptr(ep, s);
    memset(p, 0, SREQ_BYTES);
    p[0] = CT_SREQ;
    p[1] = sr->dir;
    p[2] = sr->by_rdv;
    gw_put_u32(p + 4, (uint32_t)ci | ((uint32_t)ch->gen << 8));
    gw_put_u64(p + 8, sr->ident);
    gw_put_u64(p + 16, sr->raddr + ch->off);
    gw_put_u64(p + 24, laddr);
    gw_put_u32(p + 32, lrkey);
    gw_put_u32(p + 36, ch->len);
    post_sendmsg(ep, b, NULL, s, SREQ_BYTES);
    ch->remote = 1;
    ch->state = C_XFER;
    ep->stg_credits++;
    return 1;
}

/* A small put or get to a staged owner: the data rides in the chunk request
 * (put) or in its acknowledgement (get); the owner copies it with one
 * synchronous cuMemcpy (no bounce slot, no READ/WRITE round). */
static void stg_eager(gw_verbs_ep_t *ep, batch_t *b, gw_verbs_sreq_t *sr)
{
    if (ep->stg_credits >= GW_VERBS_STG_CREDITS || !qp_room(ep, b, 0) || !ep->nsfree)
        return;
    unsigned ci;
    for (ci = 0; ci < GW_VERBS_STG_CHUNKS && ep->schunk[ci].sr; ci++)
        ;
    if (ci == GW_VERBS_STG_CHUNKS)
        return;
    int s = slot_get(ep);
    uint8_t *p = slot_ptr(ep, s);
    gw_status_t st = sr->dir ? GW_OK : copy_from_user(sr->req, p + SREQ_BYTES, sr->req->buf, sr->total);
    if (st != GW_OK) {
        slot_put(ep, s);
        stg_fail(sr, 0, st, ep_core(ep)->errbuf);
        return;
    }
    gw_verbs_schunk_t *ch = &ep->schunk[ci];
    ch->sr = sr;
    ep->stg_live = 1;
    ch->slot = NULL;
    ch->off = 0;
    ch->len = (uint32_t)sr->total;
    ch->remote = 2; /* (eager: no slot, the payload travels in the messages) */
    ch->state = C_XFER;
    memset(p, 0, SREQ_BYTES);
    p[0] = CT_SREQ;
    p[1] = sr->dir;
    p[2] = sr->by_rdv;
    p[3] = SREQ_EAGER;
    gw_put_u32(p + 4, (uint32_t)ci | ((uint32_t)ch->gen << 8));
    gw_put_u64(p + 8, sr->ident);
    gw_put_u64(p + 16, sr->raddr);
    gw_put_u32(p + 36, ch->len);
    post_sendmsg(ep, b, NULL, s, (uint32_t)(SREQ_BYTES + (sr->dir ? 0 : sr->total)));
    ep->stg_credits++;
    sr->next = sr->total;
    sr->inflight++;
}

/* Starts new chunks of sr while slots, credits and queue room allow. */
static void stg_drive(gw_verbs_ep_t *ep, batch_t *b, gw_verbs_sreq_t *sr)
{
    if (sr->rstaged && sr->next == 0 && sr->total && sr->total <= STG_EAGER_MAX) {
        if (sr->err == GW_OK)
            stg_eager(ep, b, sr);
        return;
    }
    while (sr->err == GW_OK && sr->next < sr->total) {
        size_t n = sr->total - sr->next;
        n = GW_MIN(n, sr->lstaged ? gw_staging_chunk(sr->eng->st) : (size_t)GW_MAX_STG_HOST_CHUNK);
        if (!sr->rstaged) {
            uint32_t rkey;
            uint64_t rleft;
            if (remote_piece(sr->req, sr->raddr + sr->next, &rkey, &rleft) == 0)
                n = (size_t)GW_MIN((uint64_t)n, rleft);
            if (ep->peer.max_msg)
                n = GW_MIN(n, (size_t)GW_MIN(ep->peer.max_msg, ep->local.max_msg));
        } else if (ep->stg_credits >= GW_VERBS_STG_CREDITS) {
            return;
        }
        if (!sr->lstaged) {
            uint64_t a, left;
            uint32_t lk, rk;
            if (stg_local(ep, sr, NULL, &a, &lk, &rk, &left) == 0)
                n = (size_t)GW_MIN((uint64_t)n, left);
        }
        if (n == 0) { /* (cannot happen inside the bounds the api checked) */
            stg_fail(sr, sr->next, GW_ERR_INVALID, "no bytes left in the registration piece");
            return;
        }
        if (!qp_room(ep, b, 0) || (sr->rstaged && !ep->nsfree))
            return;
        unsigned ci;
        for (ci = 0; ci < GW_VERBS_STG_CHUNKS && ep->schunk[ci].sr; ci++)
            ;
        if (ci == GW_VERBS_STG_CHUNKS)
            return;
        gw_stage_slot_t *slot = NULL;
        if (sr->lstaged) {
            slot = gw_staging_acquire(sr->eng->st);
            if (!slot)
                return;
            if (!stg_slot_mr(ep->vif, sr->eng, slot)) {
                gw_staging_release(sr->eng->st, slot);
                stg_fail(sr, sr->next, GW_ERR_VERBS, ep_core(ep)->errbuf);
                return;
            }
        }
        gw_verbs_schunk_t *ch = &ep->schunk[ci];
        ch->sr = sr;
        ep->stg_live = 1;
        ch->slot = slot;
        ch->off = sr->next;
        ch->len = (uint32_t)n;
        ch->remote = 0;
        sr->next += n;
        sr->inflight++;
        if (sr->dir == 0 && sr->lstaged) {
            gw_status_t st = gw_staging_d2h(sr->eng->st, slot, (const uint8_t *)sr->req->buf + ch->off, n);
            if (st != GW_OK) {
                stg_fail(sr, ch->off, st, ep_core(ep)->errbuf);
                stg_chunk_done(ep, ch);
                return;
            }
            ch->state = C_D2H;
            continue;
        }
        ch->state = C_READY;
        if (!stg_chunk_xfer(ep, b, ci))
            return; /* stays C_READY: posted on a later pass */
    }
}

/* post_req's staged branch: sets the operation up; 1 = off the pending queue. */
static int stg_start(gw_verbs_ep_t *ep, batch_t *b, gw_request_t *req)
{
    gw_verbs_sreq_t *sr = calloc(1, sizeof(*sr));
    gw_status_t st = GW_OK;
    if (!sr) {
        st = gw_err(ep_core(ep), GW_ERR_NOMEM, "verbs staged operation: out of memory");
        goto fail;
    }
    sr->req = req;
    sr->is_recv = req->op == GW_OP_RECV;
    sr->dir = req->op == GW_OP_GET || sr->is_recv;
    sr->lstaged = (uint8_t)mem_staged(req->lmem);
    if (sr->is_recv) {
        sr->total = GW_MIN(req->len, (size_t)req->tl[T_MLEN]);
        sr->raddr = req->tl[T_RADDR];
        sr->rstaged = ((req->tl[T_RKEY] >> 32) & RTS_STAGED) != 0;
        sr->ident = (req->tl[T_RKEY] >> 32) & ~(uint64_t)RTS_STAGED;
        sr->by_rdv = 1;
    } else {
        sr->total = req->len;
        sr->raddr = req->raddr;
        sr->rstaged = (uint8_t)rkey_staged(req->rkey);
        sr->ident = req->rkey->id;
    }
    if (sr->lstaged && (st = stg_engine(ep->vif, req->lmem->cuda_device, 0, &sr->eng)) != GW_OK)
        goto fail;
    if (!sr->lstaged && sr->total) {
        /* the peer reads (put) or writes (get) our buffer directly */
        int need = sr->dir ? IBV_ACCESS_REMOTE_WRITE : IBV_ACCESS_REMOTE_READ;
        unsigned gneed = sr->dir ? GW_ACCESS_REMOTE_WRITE : GW_ACCESS_REMOTE_READ;
        if (req->lmem && req->lmem->tl_reg[GW_TL_VERBS] && (req->lmem->access & gneed)) {
            sr->lreg = req->lmem->tl_reg[GW_TL_VERBS];
        } else if ((st = gw_verbs_rcache_get(ep->vif, req->buf, sr->total, IBV_ACCESS_LOCAL_WRITE | need,
                                             &sr->rc)) != GW_OK) {
            goto fail;
        }
    }
    req->tl[T_STG] = (uint64_t)(uintptr_t)sr;
    req->tl_flags |= TLF_PREP | TLF_STAGED;
    if (sr->is_recv)
        req->tl_flags |= TLF_ALLPOSTED; /* (keeps the rendezvous loop from posting it again) */
    gw_list_push_back(&ep->stg_reqs, &sr->link);
    ep->stg_live = 1;
    stg_drive(ep, b, sr);
    stg_maybe_finish(ep, sr);
    return 1;

fail:
    free(sr);
    if (req->op == GW_OP_RECV) {
        rdv_recv_forget(ep, req);
        ctrl_queue(ep, CT_FIN, 0, (req->tl[T_RKEY] >> 32) & ~(uint64_t)RTS_STAGED, 0);
        gw_ep_recv_done(ep->super.base, req, (size_t)req->tl[T_MLEN], req->rtag, st);
    } else {
        gw_ep_op_done(ep->super.base, req, st);
    }
    return 1;
}

/* A staged put_notify whose data is in place: the notification on QP 0 once
 * no older staged operation runs and the other QPs are drained. */
static void stg_notify(gw_verbs_ep_t *ep, batch_t *b, gw_verbs_sreq_t *sr)
{
    if (ep->stg_reqs.next != &sr->link)
        return;
    if (!others_drained(ep, b))
        return;
    int s = msg_slot(ep, b);
    if (s < 0)
        return;
    gw_request_t *req = sr->req;
    ep->stg_ops++;
    ep->stg_bytes += sr->acked;
    stg_free(ep, sr, 1);
    hdr_fill(slot_ptr(ep, s), CT_NOTIFY, 0, req->value, 0, 0, 0, 0);
    req->tl_flags |= TLF_ALLPOSTED;
    post_sendmsg(ep, b, req, s, GW_VERBS_HDR); /* completes in req_maybe_done */
}

/* A WR of a staged chunk completed (retire). */
static void stg_chunk_wr_done(gw_verbs_ep_t *ep, uint32_t aux)
{
    if (aux == 0 || aux > GW_VERBS_STG_CHUNKS)
        return;
    gw_verbs_schunk_t *ch = &ep->schunk[aux - 1];
    if (!ch->sr || ch->state != C_XFER || ch->remote)
        return;
    stg_chunk_arrived(ep, ch);
}

/* CT_SACK: the owner moved one chunk (or refused it). */
static void stg_on_sack(gw_verbs_ep_t *ep, uint32_t cookie, gw_status_t st, const uint8_t *data, uint32_t n)
{
    unsigned ci = cookie & 0xff;
    if (ci >= GW_VERBS_STG_CHUNKS || !ep->schunk[ci].sr || !ep->schunk[ci].remote ||
        ep->schunk[ci].state != C_XFER || ep->schunk[ci].gen != (uint16_t)(cookie >> 8)) {
        gw_log(GW_LOG_DEBUG, "verbs: acknowledgement for unknown staged chunk 0x%x (ignored)", cookie);
        return;
    }
    gw_verbs_schunk_t *ch = &ep->schunk[ci];
    int eager = ch->remote == 2;
    ep->stg_credits--;
    ch->remote = 0;
    if (st != GW_OK) {
        char why[160];
        snprintf(why, sizeof(why), "the owner of the staged GPU memory refused the chunk: %s (%s)",
                 gw_status_name(st), gw_status_str(st));
        stg_fail(ch->sr, ch->off, st, why);
    } else if (eager && ch->sr->dir) { /* a small get: the data is in the acknowledgement */
        if (n != ch->len) {
            ep_die(ep, GW_ERR_PROTOCOL, "verbs: staged get acknowledgement from %s carries %u of %u bytes",
                   ep->peer.dev, n, ch->len);
            return;
        }
        gw_verbs_sreq_t *sr = ch->sr;
        st = copy_to_user(sr->req, (uint8_t *)sr->req->buf + ch->off, data, n);
        if (st != GW_OK)
            stg_fail(sr, ch->off, st, ep_core(ep)->errbuf);
    }
    if (eager)
        stg_chunk_done(ep, ch);
    else
        stg_chunk_arrived(ep, ch);
}

/* ---- owner (target) side ------------------------------------------------------------------ */
static void job_finish(gw_verbs_ep_t *ep, gw_verbs_sjob_t *j)
{
    if (j->slot) {
        gw_staging_release(j->eng->st, j->slot);
        j->slot = NULL;
    }
    if (j->mem)
        j->mem->incoming -= j->dir == 0;
    ctrl_queue(ep, CT_SACK, (uint32_t)j->status, j->cookie, 0);
    ep->stg_served++;
    memset(j, 0, sizeof(*j));
}

/* Checks a chunk request against what we own; GW_OK or the refusal. */
static gw_status_t job_check(gw_verbs_ep_t *ep, gw_verbs_sjob_t *j)
{
    gw_core_t *c = ep_core(ep);
    if (j->by_rdv) {
        unsigned id;
        gw_request_t *r = rdv_lookup(ep, j->ident, &id);
        if (!r || j->dir != 1 || !mem_staged(r->lmem))
            return GW_ERR_INVALID_KEY;
        if (!gw_range_inside((uint64_t)(uintptr_t)r->buf, r->len, j->taddr, j->len))
            return GW_ERR_OUT_OF_BOUNDS;
        j->device = r->lmem->cuda_device;
        return GW_OK;
    }
    gw_mem_t *m = gw_hmap_get(&c->regions, j->ident);
    if (!m || !mem_staged(m))
        return GW_ERR_INVALID_KEY;
    if (!(m->access & (j->dir ? GW_ACCESS_REMOTE_READ : GW_ACCESS_REMOTE_WRITE)))
        return GW_ERR_ACCESS;
    if (!gw_range_inside((uint64_t)(uintptr_t)m->addr, m->len, j->taddr, j->len))
        return GW_ERR_OUT_OF_BOUNDS;
    j->mem = m;
    j->device = m->cuda_device;
    m->incoming += j->dir == 0;
    return GW_OK;
}

static void stg_on_sreq(gw_verbs_ep_t *ep, const uint8_t *p, uint32_t bytes)
{
    if (bytes < SREQ_BYTES) {
        ep_die(ep, GW_ERR_PROTOCOL, "verbs: %u-byte staged chunk request from %s (expected %d)", bytes,
               ep->peer.dev, SREQ_BYTES);
        return;
    }
    unsigned i;
    for (i = 0; i < GW_VERBS_STG_CREDITS && ep->sjob[i].state; i++)
        ;
    if (i == GW_VERBS_STG_CREDITS) {
        ep_die(ep, GW_ERR_PROTOCOL, "verbs: %s sent more than %d staged chunk requests at once", ep->peer.dev,
               GW_VERBS_STG_CREDITS);
        return;
    }
    gw_verbs_sjob_t *j = &ep->sjob[i];
    memset(j, 0, sizeof(*j));
    j->dir = p[1] ? 1 : 0;
    j->by_rdv = p[2] ? 1 : 0;
    j->cookie = gw_get_u32(p + 4);
    j->ident = gw_get_u64(p + 8);
    j->taddr = gw_get_u64(p + 16);
    j->iaddr = gw_get_u64(p + 24);
    j->irkey = gw_get_u32(p + 32);
    j->len = gw_get_u32(p + 36);
    j->state = J_SLOT;
    ep->stg_live = 1;
    if ((p[3] & SREQ_EAGER) && j->dir) { /* a small get: answered with the data (stg_job_step) */
        if (j->len > STG_EAGER_MAX) {
            ep_die(ep, GW_ERR_PROTOCOL, "verbs: eager staged get of %u bytes from %s (at most %u)", j->len,
                   ep->peer.dev, (unsigned)STG_EAGER_MAX);
            return;
        }
        j->status = job_check(ep, j);
        if (j->status != GW_OK)
            job_finish(ep, j);
        else
            j->state = J_EAGER;
        return;
    }
    if (p[3] & SREQ_EAGER) { /* a small put carrying its data: copy it in now */
        if (j->len > bytes - SREQ_BYTES) {
            ep_die(ep, GW_ERR_PROTOCOL, "verbs: staged chunk request from %s carries %u of %u bytes",
                   ep->peer.dev, bytes - SREQ_BYTES, j->len);
            return;
        }
        j->status = job_check(ep, j);
        if (j->status == GW_OK)
            j->status = gw_staging_copy_sync(ep_core(ep), j->device, (void *)(uintptr_t)j->taddr, p + SREQ_BYTES,
                                             j->len);
        job_finish(ep, j);
        return;
    }
    j->status = job_check(ep, j);
    if (j->status == GW_OK && j->len)
        j->status = stg_engine(ep->vif, j->device, 1, &j->eng);
    if (j->status != GW_OK || j->len == 0)
        job_finish(ep, j);
}

/* A WR of a job completed (retire): READ landed in the slot, or WRITE left it. */
static void stg_job_wr_done(gw_verbs_ep_t *ep, uint32_t aux)
{
    if (aux == 0 || aux > GW_VERBS_STG_CREDITS)
        return;
    gw_verbs_sjob_t *j = &ep->sjob[aux - 1];
    if (j->state == J_READ) {
        if (j->status == GW_OK && j->mem) {
            gw_status_t st = gw_staging_h2d(j->eng->st, j->slot, (void *)(uintptr_t)(j->taddr + j->done), j->piece);
            if (st == GW_OK) {
                j->state = J_H2D;
                return;
            }
            j->status = st;
        }
        job_finish(ep, j);
    } else if (j->state == J_WRITE) {
        gw_staging_release(j->eng->st, j->slot);
        j->slot = NULL;
        j->done += j->piece;
        j->state = J_SLOT;
        if (j->done >= j->len || j->status != GW_OK)
            job_finish(ep, j);
    }
}

static void stg_job_step(gw_verbs_ep_t *ep, batch_t *b, unsigned ji)
{
    gw_verbs_sjob_t *j = &ep->sjob[ji];
    for (;;) {
        switch (j->state) {
        case J_SLOT: {
            if (j->status != GW_OK || (!j->by_rdv && !j->mem)) {
                if (j->status == GW_OK)
                    j->status = GW_ERR_INVALID_KEY;
                job_finish(ep, j);
                return;
            }
            if (j->dir == 0 && !qp_room(ep, b, 0))
                return;
            gw_stage_slot_t *s = gw_staging_acquire(j->eng->st);
            if (!s)
                return;
            j->slot = s;
            struct ibv_mr *mr = stg_slot_mr(ep->vif, j->eng, s);
            if (!mr) {
                j->status = GW_ERR_VERBS;
                job_finish(ep, j);
                return;
            }
            j->piece = (uint32_t)GW_MIN((size_t)(j->len - j->done), gw_staging_chunk(j->eng->st));
            if (j->dir == 0) {
                struct ibv_send_wr *w = wr_add(ep, b, 0, NULL, WR_SREAD, -1, j->piece);
                ep->qps[0].ring[(ep->qps[0].head - 1) % ep->qps[0].depth].aux = ji + 1;
                w->opcode = IBV_WR_RDMA_READ;
                w->wr.rdma.remote_addr = j->iaddr + j->done;
                w->wr.rdma.rkey = j->irkey;
                w->num_sge = 1;
                w->sg_list->addr = (uint64_t)(uintptr_t)s->host;
                w->sg_list->length = j->piece;
                w->sg_list->lkey = mr->lkey;
                j->state = J_READ;
                return;
            }
            gw_status_t st = gw_staging_d2h(j->eng->st, s, (const void *)(uintptr_t)(j->taddr + j->done), j->piece);
            if (st != GW_OK) {
                j->status = st;
                job_finish(ep, j);
                return;
            }
            j->state = J_D2H;
            break;
        }
        case J_H2D:
        case J_D2H: {
            int t = gw_staging_test(j->eng->st, j->slot);
            if (t == 0)
                return;
            if (t < 0 && j->status == GW_OK)
                j->status = (gw_status_t)t;
            if (j->status != GW_OK) {
                job_finish(ep, j);
                return;
            }
            if (j->state == J_H2D) {
                gw_staging_release(j->eng->st, j->slot);
                j->slot = NULL;
                j->done += j->piece;
                j->state = J_SLOT;
                if (j->done >= j->len) {
                    job_finish(ep, j);
                    return;
                }
                break;
            }
            if (!qp_room(ep, b, 0))
                return; /* (test again next pass: returns 1 at once) */
            struct ibv_send_wr *w = wr_add(ep, b, 0, NULL, WR_SWRITE, -1, j->piece);
            ep->qps[0].ring[(ep->qps[0].head - 1) % ep->qps[0].depth].aux = ji + 1;
            w->opcode = IBV_WR_RDMA_WRITE;
            w->wr.rdma.remote_addr = j->iaddr + j->done;
            w->wr.rdma.rkey = j->irkey;
            w->num_sge = 1;
            w->sg_list->addr = (uint64_t)(uintptr_t)j->slot->host;
            w->sg_list->length = j->piece;
            w->sg_list->lkey = j->eng->mr[j->slot->index]->lkey;
            j->state = J_WRITE;
            return;
        }
        case J_EAGER: {
            if (!j->by_rdv && !j->mem) { /* revoked meanwhile */
                j->status = GW_ERR_INVALID_KEY;
                job_finish(ep, j);
                return;
            }
            int s = msg_slot(ep, b);
            if (s < 0)
                return;
            uint8_t *p = slot_ptr(ep, s);
            gw_status_t st = gw_staging_copy_sync(ep_core(ep), j->device, p + GW_VERBS_HDR,
                                                  (const void *)(uintptr_t)j->taddr, j->len);
            if (st != GW_OK) {
                slot_put(ep, s);
                j->status = st;
                job_finish(ep, j);
                return;
            }
            hdr_fill(p, CT_SACK, 0, 0, j->len, 0, 0, j->cookie);
            post_sendmsg(ep, b, NULL, s, GW_VERBS_HDR + j->len);
            ep->stg_served++;
            memset(j, 0, sizeof(*j));
            return;
        }
        default:
            return; /* J_READ, J_WRITE: waiting for the NIC */
        }
    }
}

/* Called from post_pending: copies that finished, chunks to post, jobs to
 * advance, notifications due.  Returns nonzero while staged work runs. */
static int stg_progress(gw_verbs_ep_t *ep, batch_t *b)
{
    if (!ep->stg_live)
        return 0; /* no staged work: skip the scans (every progress call comes here) */
    int busy = 0;
    for (unsigned ci = 0; ci < GW_VERBS_STG_CHUNKS; ci++) {
        gw_verbs_schunk_t *ch = &ep->schunk[ci];
        if (!ch->sr)
            continue;
        busy = 1;
        if (ch->state == C_D2H || ch->state == C_H2D) {
            int t = gw_staging_test(ch->sr->eng->st, ch->slot);
            if (t == 0)
                continue;
            if (t < 0)
                stg_fail(ch->sr, ch->off, (gw_status_t)t, ep_core(ep)->errbuf);
            if (ch->state == C_H2D || t < 0) {
                stg_chunk_done(ep, ch);
                continue;
            }
            ch->state = C_READY;
        }
        if (ch->state == C_READY)
            stg_chunk_xfer(ep, b, ci);
    }
    gw_list_t *p, *t;
    gw_list_for_each_safe(p, t, &ep->stg_reqs) {
        gw_verbs_sreq_t *sr = gw_container_of(p, gw_verbs_sreq_t, link);
        busy = 1;
        if (sr->req->tl_flags & TLF_DATA) {
            stg_notify(ep, b, sr);
            continue;
        }
        stg_drive(ep, b, sr);
        stg_maybe_finish(ep, sr);
        if (ep->dead)
            return busy;
    }
    for (unsigned ji = 0; ji < GW_VERBS_STG_CREDITS; ji++) {
        if (!ep->sjob[ji].state)
            continue;
        busy = 1;
        stg_job_step(ep, b, ji);
    }
    if (!busy)
        ep->stg_live = 0;
    return busy;
}

/* 1 while staged work waits for something no fd announces: a CUDA copy in
 * flight, or a step that a copy's end unblocks.  Waits for the network
 * (completions, the peer's answers) are woken by the CQ like any other. */
static int stg_busy(const gw_verbs_ep_t *ep)
{
    if (!ep->stg_live)
        return 0;
    for (unsigned ci = 0; ci < GW_VERBS_STG_CHUNKS; ci++) {
        uint8_t st = ep->schunk[ci].state;
        if (ep->schunk[ci].sr && (st == C_D2H || st == C_H2D || st == C_READY))
            return 1;
    }
    for (unsigned ji = 0; ji < GW_VERBS_STG_CREDITS; ji++) {
        uint8_t st = ep->sjob[ji].state;
        if (st == J_SLOT || st == J_H2D || st == J_D2H || st == J_EAGER)
            return 1;
    }
    return 0;
}

/* Drops all staged work (endpoint failed or going away).  Requests are
 * touched only when still ours (own, or rendezvous receives). */
static void stg_forget_all(gw_verbs_ep_t *ep, int own)
{
    gw_list_t *p, *t;
    gw_list_for_each_safe(p, t, &ep->stg_reqs) {
        gw_verbs_sreq_t *sr = gw_container_of(p, gw_verbs_sreq_t, link);
        stg_free(ep, sr, own || sr->is_recv);
    }
    for (unsigned ji = 0; ji < GW_VERBS_STG_CREDITS; ji++) {
        gw_verbs_sjob_t *j = &ep->sjob[ji];
        if (!j->state)
            continue;
        stg_slot_drop_or_park(ep, j->eng, j->slot, j->state == J_READ || j->state == J_WRITE);
        if (j->mem)
            j->mem->incoming -= j->dir == 0;
        memset(j, 0, sizeof(*j));
    }
    ep->stg_credits = 0;
}

void gw_verbs_stage_ep_fini(gw_verbs_ep_t *ep)
{
    if (ep->stg_reqs.next) /* (NULL when prepare failed before the lists were set up) */
        stg_forget_all(ep, 0);
    /* the queue pairs are gone: no NIC access to parked slots is left */
    for (unsigned i = 0; i < ep->stg_nzombie; i++)
        stg_slot_drop(ep->stg_zombie[i].eng, ep->stg_zombie[i].slot);
    ep->stg_nzombie = 0;
}

void gw_verbs_stage_revoke(gw_verbs_iface_t *vif, gw_mem_t *m)
{
    gw_list_t *p, *t;
    gw_list_for_each_safe(p, t, &vif->eps) {
        gw_verbs_ep_t *ep = gw_container_of(p, gw_verbs_ep_t, link);
        for (unsigned ji = 0; ji < GW_VERBS_STG_CREDITS; ji++) {
            gw_verbs_sjob_t *j = &ep->sjob[ji];
            if (!j->state || j->mem != m)
                continue;
            if (j->slot && (j->state == J_H2D || j->state == J_D2H)) /* a copy into or out of m: let it end */
                while (gw_staging_test(j->eng->st, j->slot) == 0)
                    sched_yield();
            j->mem->incoming -= j->dir == 0;
            j->mem = NULL;
            if (j->status == GW_OK)
                j->status = GW_ERR_INVALID_KEY;
        }
    }
}

/* Eager payloads to and from GPU memory: one synchronous copy (small). */
static gw_status_t copy_from_user(gw_request_t *req, void *dst, const void *src, size_t n)
{
    if (req->lmem && req->lmem->type != GW_MEM_HOST)
        return gw_staging_copy_sync(req->core, req->lmem->cuda_device, dst, src, n);
    if (n)
        memcpy(dst, src, n);
    return GW_OK;
}

static gw_status_t copy_to_user(gw_request_t *req, void *dst, const void *src, size_t n)
{
    return copy_from_user(req, dst, src, n);
}

/* batched transfers: part of this translation unit (they post through the
 * batches above); a file of its own once these helpers are shared */
#define GW_VERBS_INTERNAL 1
#include "transport/verbs/verbs_batch.c"
