/* SPDX-License-Identifier: Apache-2.0 */
/* ofi_post.c - ofi operations and completions.
 *
 * Puts and gets are fi_writemsg/fi_readmsg, cut at the provider's largest
 * message, one context per piece; a request completes when its last piece
 * does.  Its local buffer is described by its region's registration, else
 * (FI_MR_LOCAL providers) copied through a registered send slot when it
 * fits one, else registered for the operation alone.  Batches reach it
 * expanded into puts and gets by the protocol layer (proto/proto.h), their
 * notification through notify_out.  Messages up to GW_OFI_EAGER_MAX go whole from a send
 * slot; larger ones send an RTS naming the (registered) buffer, the
 * receiver reads it and answers FIN.  Whatever the provider has no room
 * for now (-FI_EAGAIN) waits on the endpoint's pending list, in posting
 * order, and is posted again from the poller.
 *
 * Credits (where both sides agreed, ofi_wire.h): a header message that
 * costs one goes only while the endpoint holds one (ep->tx_credits; else
 * it waits on the pending list or the control queue, in order, like one
 * the provider had no room for); every header sent carries what this side
 * owes for receive slots it has posted again (ep->cr_owed), and a pass that
 * ends owing GW_OFI_CREDIT_BACK or more sends them in a CREDIT message, which
 * costs none and waits for nothing but room, so returns always go.
 */
#include "mem/mem_copy.h"
#include "transport/base/batch.h"
#include "transport/ofi/ofi.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TLF_POSTED = 1u << 0, TLF_PENDING = 1u << 1, TLF_RDV = 1u << 2, TLF_TSEND = 1u << 3, TLF_TRECV = 1u << 4 };

static inline gw_ep_base_t *B(gw_ofi_ep_t *ep) { return ep->super.base; }
static inline uint8_t *rx_at(gw_ofi_ep_t *ep, unsigned i) { return ep->rxbuf + (size_t)i * GW_OFI_SLOT; }
static inline uint8_t *tx_at(gw_ofi_ep_t *ep, unsigned i) { return ep->txbuf + (size_t)i * GW_OFI_SLOT; }

int gw_ofi_post_rx(gw_ofi_ep_t *ep, unsigned i)
{
    /* (the receive queue holds every slot: no room is the provider's
     * transient state, given a second of progress before it counts as an
     * error) */
    uint64_t until = 0;
    for (;;) {
        ssize_t rc = fi_recv(ep->ep, rx_at(ep, i), GW_OFI_SLOT, ep->rxdesc, FI_ADDR_UNSPEC, &ep->rxctx[i].fc);
        if (rc != -FI_EAGAIN || ep->closing)
            return (int)rc;
        uint64_t now = gw_now_ns();
        if (!until)
            until = now + 1000000000ull;
        else if (now > until)
            return (int)rc;
        fi_cq_read(ep->cq, NULL, 0); /* progress only: takes no completion */
    }
}

/* A message from send slot s: inject complete (the slot is free once the
 * provider has taken its bytes), whatever the provider's default op_flags
 * say.  Not transmit complete: the tcp provider of libfabric 2.x serves
 * that as delivery complete, an acknowledgement the receiver's provider
 * sends only from the receiver's progress calls, so a message sent to a
 * peer that is not progressing (busy, or about to exit) would not complete
 * until it did; the message has left this process either way. */
static ssize_t send_slot(gw_ofi_ep_t *ep, unsigned s, size_t len)
{
    struct iovec iov = {.iov_base = ep->txbuf + (size_t)s * GW_OFI_SLOT, .iov_len = len};
    void *desc = ep->txdesc;
    struct fi_msg m = {.msg_iov = &iov, .desc = &desc, .iov_count = 1, .addr = ep->peer, .context = &ep->txctx[s].fc};
    return fi_sendmsg(ep->ep, &m, FI_COMPLETION | FI_INJECT_COMPLETE);
}

static int tx_get(gw_ofi_ep_t *ep)
{
    return ep->ntxfree ? ep->txfree[--ep->ntxfree] : -1;
}

static void tx_put(gw_ofi_ep_t *ep, unsigned slot)
{
    ep->txctx[slot].req = NULL;
    ep->txfree[ep->ntxfree++] = (uint16_t)slot;
}

/* A message of n bytes (header included) by fi_inject: the provider copies
 * it before returning and reports no completion, so a small message costs
 * no send slot and no completion to read.  Only once the provider's
 * connection to the peer is up (a send completed): connect waits for its
 * first message's completion.  0 sent, 1 not taken (too large, or no room
 * now: -FI_EAGAIN), < 0 the provider's error. */
static int inject_msg(gw_ofi_ep_t *ep, const void *msg, size_t n)
{
    if (n > ep->oif->inject || !ep->tx_seen)
        return 1;
    ssize_t rc = fi_inject(ep->ep, msg, n, ep->peer);
    if (rc == -FI_EAGAIN) {
        ep->n_eagain++;
        return 1;
    }
    if (rc == 0)
        ep->n_inject++;
    return (int)rc;
}

/* ---- control messages ---------------------------------------------------------- */
/* A header and plen payload bytes (at most GW_OFI_AM_MAX): 0 sent, 1 no
 * room now, < 0 the provider's error */
static int ctl_now(gw_ofi_ep_t *ep, const gw_ofi_hdr_t *h0, const void *pay, size_t plen)
{
    unsigned cost = (unsigned)gw_ofi_type_costs(h0->type);
    if (cost && !ep->tx_credits)
        return 1;
    gw_ofi_hdr_t h = *h0; /* (with the credits this side owes) */
    h.flags |= (uint32_t)ep->cr_owed << GW_OFI_F_CREDIT_SHIFT;
    if (GW_OFI_HDR_LEN + plen <= ep->oif->inject && ep->tx_seen) {
        uint8_t m[GW_OFI_HDR_LEN + GW_OFI_AM_MAX];
        gw_ofi_hdr_write(&h, m);
        if (plen)
            memcpy(m + GW_OFI_HDR_LEN, pay, plen);
        int r = inject_msg(ep, m, GW_OFI_HDR_LEN + plen);
        if (r == 0) {
            ep->tx_credits -= cost;
            ep->cr_owed = 0;
        }
        if (r != 1)
            return r;
    }
    int s = tx_get(ep);
    if (s < 0)
        return 1;
    gw_ofi_hdr_write(&h, tx_at(ep, (unsigned)s));
    if (plen)
        memcpy(tx_at(ep, (unsigned)s) + GW_OFI_HDR_LEN, pay, plen);
    ssize_t rc = send_slot(ep, (unsigned)s, GW_OFI_HDR_LEN + plen);
    if (rc) {
        tx_put(ep, (unsigned)s);
        if (rc == -FI_EAGAIN)
            ep->n_eagain++;
        return rc == -FI_EAGAIN ? 1 : (int)rc;
    }
    ep->tx_credits -= cost;
    ep->cr_owed = 0;
    if (h.type == GW_OFI_PING && ep->probe_seq && h.f[0] == ep->probe_seq)
        ep->probe_slot = (unsigned)s + 1u; /* its completion (or failure) is the probe's */
    return 0;
}

static const char *type_name(unsigned t)
{
    static const char *const n[] = {"?", "EAGER", "RTS", "FIN", "NOTIFY", "PING", "PONG", "AM", "CREDIT"};
    return t <= GW_OFI_TYPE_MAX ? n[t] : "?";
}

static gw_status_t send_msg(gw_ofi_ep_t *ep, const gw_ofi_hdr_t *h, const void *pay, size_t plen)
{
    if (gw_ep_failed(B(ep)))
        return B(ep)->error;
    int rc = gw_list_empty(&ep->ctlq) ? ctl_now(ep, h, pay, plen) : 1;
    if (rc == 0)
        return GW_OK;
    if (rc < 0) {
        gw_ofi_ep_die(ep, gw_ofi_status_of(rc), "ofi %s: sending a %s message to %s failed: %s", ep->oif->prov,
                      type_name(h->type), B(ep)->peer, gw_ofi_strerror(ep->oif, rc));
        return B(ep)->error;
    }
    if (!ep->tx_credits && gw_ofi_type_costs(h->type))
        ep->n_cstall++;
    gw_ofi_ctl_t *q = gw_op_state_get(oep_core(ep), sizeof(*q) + plen);
    if (!q) {
        gw_ofi_ep_die(ep, GW_ERR_NOMEM, "ofi: out of memory queueing a %s message", type_name(h->type));
        return GW_ERR_NOMEM;
    }
    q->h = *h;
    q->plen = (uint32_t)plen;
    if (plen)
        memcpy(q->pay, pay, plen);
    gw_list_push_back(&ep->ctlq, &q->link);
    return GW_OK;
}

static void ctl_drain(gw_ofi_ep_t *ep)
{
    while (!gw_list_empty(&ep->ctlq) && !gw_ep_failed(B(ep))) {
        gw_ofi_ctl_t *q = gw_container_of(ep->ctlq.next, gw_ofi_ctl_t, link);
        int rc = ctl_now(ep, &q->h, q->pay, q->plen);
        if (rc == 1)
            return;
        if (rc < 0) {
            gw_ofi_ep_die(ep, gw_ofi_status_of(rc), "ofi %s: sending a %s message to %s failed: %s", ep->oif->prov,
                          type_name(q->h.type), B(ep)->peer, gw_ofi_strerror(ep->oif, rc));
            return;
        }
        gw_list_del(&q->link);
        gw_op_state_put(oep_core(ep), q);
    }
}

gw_status_t gw_ofi_send_ctl(gw_ofi_ep_t *ep, const gw_ofi_hdr_t *h)
{
    return send_msg(ep, h, NULL, 0);
}

_Static_assert(GW_OFI_AM_MAX == GW_AM_MAX, "the ofi wire's active-message bound is the base's");

/* An active message: a control message whose payload rides behind its
 * header (fi_inject where it fits, else a send slot; queued in order with
 * the other control messages when there is no room). */
gw_status_t gw_ofi_am_send(gw_tl_ep_t *e, unsigned id, const void *data, size_t len)
{
    gw_ofi_ep_t *ep = to_oep(e);
    gw_status_t st = gw_ep_am_check(B(ep), "ofi", id, len);
    if (st != GW_OK)
        return st;
    gw_ofi_hdr_t h = {.type = GW_OFI_AM, .f = {id, len}};
    return send_msg(ep, &h, data, len);
}

gw_status_t gw_ofi_notify_out(void *arg, gw_request_t *req)
{
    gw_ofi_ep_t *ep = arg;
    gw_ofi_hdr_t h = {.type = GW_OFI_NOTIFY, .flags = gw_req_notify_counted(req) ? GW_OFI_F_COUNTED : 0};
    h.f[0] = req->op == GW_OP_BATCH ? req->batch->value : req->value;
    return gw_ofi_send_ctl(ep, &h);
}

/* ---- local buffers -------------------------------------------------------------- */
static void req_release(gw_ofi_ep_t *ep, gw_request_t *req, int slot_free)
{
    if (ofi_rq(req)->mr) {
        gw_ofi_close_mr(ep->oif, ofi_rq(req)->mr);
        ofi_rq(req)->mr = NULL;
    }
    if (ofi_rq(req)->bounce) {
        if (slot_free) /* (else the provider may still use it: it stays out until the endpoint goes) */
            tx_put(ep, ofi_rq(req)->bounce - 1u);
        ofi_rq(req)->bounce = 0;
    }
}

/* The local side of a put, get, rendezvous send or receive: the region's
 * registration, else a send slot (puts and gets that fit one), else a
 * registration for this request.  Nothing on providers without FI_MR_LOCAL,
 * but a rendezvous send's key (access FI_REMOTE_READ) where the region has
 * none a peer may read by. */
static gw_status_t local_prep(gw_ofi_ep_t *ep, gw_request_t *req, size_t len, uint64_t access, int may_bounce)
{
    const gw_mem_t *m = req->lmem;
    const gw_ofi_reg_t *r = m ? m->tl_reg[GW_TL_OFI] : NULL;
    /* A region registered for local access only has no key a peer may read
     * by (libfabric 2.x gives it none, FI_KEY_NOTAVAIL; 1.17 gave one it
     * honoured): a rendezvous send from it registers its bytes for this
     * message alone, closed at the FIN, rather than opening the region. */
    int need_key = (access & FI_REMOTE_READ) && r && !(m->access & GW_ACCESS_REMOTE_READ);
    if ((r && !need_key) || (!r && !ep->oif->mr_local && !(access & FI_REMOTE_READ)))
        return GW_OK;
    int dev = m && m->type != GW_MEM_HOST ? m->cuda_device : -1;
    if (may_bounce && dev < 0 && len <= GW_OFI_SLOT && ep->ntxfree > GW_OFI_NTX / 4) {
        int s = tx_get(ep);
        ofi_rq(req)->bounce = (uint16_t)(s + 1);
        if (req->op != GW_OP_GET)
            memcpy(tx_at(ep, (unsigned)s), req->buf, len);
        ep->n_bounce++;
        return GW_OK;
    }
    gw_status_t st;
    ofi_rq(req)->mr = gw_ofi_reg_local(ep->oif, req->buf, len, access, dev, &st);
    if (!ofi_rq(req)->mr)
        return st;
    ep->n_onfly++;
    return GW_OK;
}

static void local_of(gw_ofi_ep_t *ep, gw_request_t *req, uint8_t **buf, void **desc)
{
    const gw_ofi_reg_t *r = req->lmem ? req->lmem->tl_reg[GW_TL_OFI] : NULL;
    if (ofi_rq(req)->bounce) {
        *buf = tx_at(ep, ofi_rq(req)->bounce - 1u);
        *desc = ep->txdesc;
        return;
    }
    *buf = req->buf;
    *desc = ofi_rq(req)->mr ? fi_mr_desc(ofi_rq(req)->mr) : r ? r->desc : NULL;
}

/* ---- RMA --------------------------------------------------------------------- */
static gw_ofi_ctx_t *rma_get(gw_ofi_ep_t *ep)
{
    if (gw_list_empty(&ep->rma_free))
        return NULL;
    gw_list_t *l = ep->rma_free.next;
    gw_list_del(l);
    gw_list_push_back(&ep->rma_busy, l);
    return gw_container_of(l, gw_ofi_ctx_t, link);
}

static void rma_put(gw_ofi_ep_t *ep, gw_ofi_ctx_t *x)
{
    x->req = NULL;
    gw_list_del(&x->link);
    gw_list_push_back(&ep->rma_free, &x->link);
}

/* One piece; 0 posted, 1 no room now, -1 the endpoint failed. */
static int post_piece(gw_ofi_ep_t *ep, gw_request_t *req, int get, void *lbuf, void *desc, uint64_t raddr,
                      uint64_t key, size_t n)
{
    gw_ofi_ctx_t *x = rma_get(ep);
    if (!x)
        return 1;
    struct iovec iov = {.iov_base = lbuf, .iov_len = n};
    struct fi_rma_iov riov = {.addr = raddr, .len = n, .key = key};
    struct fi_msg_rma m = {.msg_iov = &iov, .desc = &desc, .iov_count = 1, .addr = ep->peer, .rma_iov = &riov,
                           .rma_iov_count = 1, .context = &x->fc};
    ssize_t rc = get ? fi_readmsg(ep->ep, &m, FI_COMPLETION) : fi_writemsg(ep->ep, &m, ep->oif->wflags);
    if (rc) {
        rma_put(ep, x);
        if (rc == -FI_EAGAIN) {
            ep->n_eagain++;
            return 1;
        }
        gw_ofi_ep_die(ep, gw_ofi_status_of((int)rc), "ofi %s: %s of %zu bytes at 0x%llx (key 0x%llx) on %s failed "
                      "to post: %s", ep->oif->prov, get ? "fi_readmsg" : "fi_writemsg", n, (unsigned long long)raddr,
                      (unsigned long long)key, B(ep)->peer, gw_ofi_strerror(ep->oif, (int)rc));
        return -1;
    }
    x->req = req;
    x->len = (uint32_t)n;
    req->pending++;
    ep->n_rma++;
    ep->used = 1;
    return 0;
}

/* A put, get or rendezvous read from req->posted on. */
static int post_rma(gw_ofi_ep_t *ep, gw_request_t *req)
{
    int get = req->op == GW_OP_GET || req->op == GW_OP_RECV;
    uint64_t raddr, key;
    size_t total;
    if (req->op == GW_OP_RECV) {
        raddr = ofi_rq(req)->raddr;
        key = ofi_rq(req)->rkey;
        total = GW_MIN(req->len, (size_t)ofi_rq(req)->off);
    } else {
        const gw_ofi_rkey_t *k = (const gw_ofi_rkey_t *)req->rkey->tl_key;
        raddr = k->virt ? req->raddr : req->raddr - k->base;
        key = k->key;
        total = req->len;
    }
    uint8_t *lbuf;
    void *desc;
    local_of(ep, req, &lbuf, &desc);
    while (req->posted < total) {
        size_t n = GW_MIN(total - req->posted, (size_t)ep->oif->max_piece);
        int r = post_piece(ep, req, get, lbuf + req->posted, desc, raddr + req->posted, key, n);
        if (r)
            return r;
        req->posted += n;
    }
    return 0;
}

/* A scatter/gather put or get (rma_iov, a list of host entries) from entry
 * ofi_rq(req)->ent, byte ofi_rq(req)->off on: one piece per entry (cut at
 * the provider's largest message), each with its region's descriptor and
 * its key's address. */
static int post_list(gw_ofi_ep_t *ep, gw_request_t *req)
{
    const gw_batch_t *b = req->batch;
    while (ofi_rq(req)->ent < b->n) {
        const gw_batch_ent_t *e = &b->ent[ofi_rq(req)->ent];
        const gw_ofi_rkey_t *k = (const gw_ofi_rkey_t *)b->rkey[e->rreg].tl_key;
        const gw_mem_t *lm = b->lmem[e->lreg];
        const gw_ofi_reg_t *reg = lm ? lm->tl_reg[GW_TL_OFI] : NULL;
        uint64_t off = ofi_rq(req)->off;
        size_t n = (size_t)GW_MIN(e->len - off, ep->oif->max_piece);
        uint64_t raddr = (k->virt ? e->raddr : e->raddr - k->base) + off;
        int r = post_piece(ep, req, b->get, (uint8_t *)(uintptr_t)e->laddr + off, reg ? reg->desc : NULL, raddr,
                           k->key, n);
        if (r)
            return r;
        off += n;
        if (off == e->len) {
            ofi_rq(req)->ent++;
            off = 0;
        }
        ofi_rq(req)->off = off;
    }
    return 0;
}

/* ---- the tagged path ------------------------------------------------------------- */
/* Where both sides agreed (ep->tagged, the integrity check off), an
 * application message is one tagged message of the provider: fi_tinject or
 * fi_tsendmsg from the caller's buffer with the caller's tag, received by an
 * fi_trecv posted straight into the receive's buffer with its tag and mask
 * (ignore = ~mask).  The provider matches, keeps what arrives before its
 * receive, moves large messages by its own rendezvous and reports a
 * message longer than the buffer as FI_ETRUNC; its send-after-send order
 * (asked for at the choice, ofi_iface.c) and its matching in posting order
 * keep gpuwire's promise per tag.  Each operation has a context of its own
 * (tctx_*), found again from the completion's op_context. */
static inline int use_tagged(gw_ofi_ep_t *ep)
{
    return ep->tagged && !B(ep)->integ;
}

static gw_ofi_ctx_t *tctx_get(gw_ofi_ep_t *ep, uint8_t kind, gw_request_t *req)
{
    gw_ofi_ctx_t *x;
    if (!gw_list_empty(&ep->tctx_free)) {
        gw_list_t *l = ep->tctx_free.next;
        gw_list_del(l);
        x = gw_container_of(l, gw_ofi_ctx_t, link);
    } else if (!(x = calloc(1, sizeof(*x)))) {
        return NULL;
    }
    x->ep = ep;
    x->kind = kind;
    x->req = req;
    x->canceled = 0;
    gw_list_push_back(&ep->tctx_busy, &x->link);
    return x;
}

static void tctx_put(gw_ofi_ep_t *ep, gw_ofi_ctx_t *x)
{
    x->req = NULL;
    gw_list_del(&x->link);
    gw_list_push_front(&ep->tctx_free, &x->link);
}

static void local_of(gw_ofi_ep_t *ep, gw_request_t *req, uint8_t **buf, void **desc);

/* A rendezvous send's id in the op table (once per request: a send
 * waiting for room keeps it) and the buffer as the peer's read addresses
 * it: its address (or offset) and key.  Ids never carry GW_OFI_TD_RTS,
 * which marks a tagged RTS in the CQ data.  0, or -1 with the endpoint
 * failed. */
static int rdv_prepare(gw_ofi_ep_t *ep, gw_request_t *req, uint64_t *addr, uint64_t *key)
{
    if (!(req->tl_flags & TLF_RDV)) {
        uint64_t id = 0;
        int full = gw_op_table_alloc(&ep->sends, req, &id) != 0;
        if (full || (id & GW_OFI_TD_RTS)) {
            if (!full)
                gw_op_table_free(&ep->sends, req);
            gw_ofi_ep_die(ep, GW_ERR_NOMEM, "ofi: no rendezvous id for a %zu-byte message to %s", req->len,
                          B(ep)->peer);
            return -1;
        }
        ofi_rq(req)->opid = id;
        req->tl_flags |= TLF_RDV;
    }
    const gw_ofi_reg_t *r = req->lmem ? req->lmem->tl_reg[GW_TL_OFI] : NULL;
    *key = ofi_rq(req)->mr ? fi_mr_key(ofi_rq(req)->mr) : r ? r->key : 0;
    *addr = (uint64_t)(uintptr_t)req->buf;
    if (!ep->oif->virt_addr)
        *addr = ofi_rq(req)->mr ? 0 : *addr - (uint64_t)(uintptr_t)req->lmem->addr;
    return 0;
}

/* The RTS of a tagged message larger than GW_OFI_TEAGER_MAX: a tagged
 * message with the application's tag naming the (registered) buffer, which
 * the receiver reads before it answers FIN (the header path's rendezvous,
 * its RTS matched by the provider).  fi_tinjectdata where it fits, else from
 * a send slot.  0 sent, 1 no room now, -1 the endpoint failed. */
static int post_trts(gw_ofi_ep_t *ep, gw_request_t *req)
{
    uint64_t addr, key;
    if (rdv_prepare(ep, req, &addr, &key) != 0)
        return -1;
    uint8_t m[GW_OFI_TRTS_LEN];
    gw_put_u64(m, req->len);
    gw_put_u64(m + 8, addr);
    gw_put_u64(m + 16, key);
    uint64_t data = GW_OFI_TD_RTS | ofi_rq(req)->opid;
    ep->used = 1; /* (the peer may read the buffer) */
    ssize_t rc;
    if (ep->oif->tinject >= GW_OFI_TRTS_LEN && ep->tx_seen) {
        rc = fi_tinjectdata(ep->ep, m, sizeof(m), data, ep->peer, req->value);
        if (rc == 0) {
            ep->n_rdv++;
            return 0;
        }
        if (rc != -FI_EAGAIN)
            goto fail;
        ep->n_eagain++;
    }
    int s = tx_get(ep);
    if (s < 0)
        return 1;
    memcpy(tx_at(ep, (unsigned)s), m, sizeof(m));
    struct iovec iov = {.iov_base = tx_at(ep, (unsigned)s), .iov_len = sizeof(m)};
    void *desc = ep->txdesc;
    struct fi_msg_tagged tm = {.msg_iov = &iov, .desc = &desc, .iov_count = 1, .addr = ep->peer, .tag = req->value,
                               .context = &ep->txctx[s].fc, .data = data};
    rc = fi_tsendmsg(ep->ep, &tm, FI_REMOTE_CQ_DATA | FI_COMPLETION | FI_INJECT_COMPLETE);
    if (rc == 0) {
        ep->n_rdv++;
        return 0;
    }
    tx_put(ep, (unsigned)s);
    if (rc == -FI_EAGAIN) {
        ep->n_eagain++;
        return 1;
    }
fail:
    gw_ofi_ep_die(ep, gw_ofi_status_of((int)rc), "ofi %s: sending the RTS of a %zu-byte message (tag 0x%llx) to %s "
                  "failed: %s", ep->oif->prov, req->len, (unsigned long long)req->value, B(ep)->peer,
                  gw_ofi_strerror(ep->oif, (int)rc));
    return -1;
}

/* A tagged message from the caller's buffer (its length as the CQ data),
 * or the RTS of a larger one: 0 posted (or injected and complete), 1 no
 * room now, -1 the endpoint failed. */
static int post_tsend(gw_ofi_ep_t *ep, gw_request_t *req)
{
    if (req->len > GW_OFI_TEAGER_MAX)
        return post_trts(ep, req);
    int host = !req->lmem || req->lmem->type == GW_MEM_HOST;
    if (host && req->len <= ep->oif->tinject && ep->tx_seen) {
        ssize_t rc = fi_tinjectdata(ep->ep, req->buf, req->len, req->len, ep->peer, req->value);
        if (rc == 0) {
            ep->n_inject++;
            ep->n_eager++;
            req->length = req->len;
            gw_ep_op_done(B(ep), req, GW_OK);
            return 0;
        }
        if (rc != -FI_EAGAIN) {
            gw_ofi_ep_die(ep, gw_ofi_status_of((int)rc), "ofi %s: fi_tinjectdata of a %zu-byte message (tag 0x%llx) "
                          "to %s failed: %s", ep->oif->prov, req->len, (unsigned long long)req->value, B(ep)->peer,
                          gw_ofi_strerror(ep->oif, (int)rc));
            return -1;
        }
        ep->n_eagain++; /* no room to copy it now: posted as a send, whose completion says when it went */
    }
    gw_ofi_ctx_t *x = tctx_get(ep, GW_OFI_CTX_TSEND, req);
    if (!x) {
        gw_ofi_ep_die(ep, GW_ERR_NOMEM, "ofi: out of memory for a send's context");
        return -1;
    }
    uint8_t *buf;
    void *desc;
    local_of(ep, req, &buf, &desc);
    struct iovec iov = {.iov_base = buf, .iov_len = req->len};
    struct fi_msg_tagged m = {.msg_iov = &iov, .desc = &desc, .iov_count = req->len ? 1 : 0, .addr = ep->peer,
                              .tag = req->value, .context = &x->fc, .data = req->len};
    /* inject complete, as send_slot says why: the buffer is the caller's
     * again once the provider has taken its bytes */
    ssize_t rc = fi_tsendmsg(ep->ep, &m, FI_REMOTE_CQ_DATA | FI_COMPLETION | FI_INJECT_COMPLETE);
    if (rc) {
        tctx_put(ep, x);
        if (rc == -FI_EAGAIN) {
            ep->n_eagain++;
            return 1;
        }
        gw_ofi_ep_die(ep, gw_ofi_status_of((int)rc), "ofi %s: fi_tsendmsg of a %zu-byte message (tag 0x%llx) to %s "
                      "failed: %s", ep->oif->prov, req->len, (unsigned long long)req->value, B(ep)->peer,
                      gw_ofi_strerror(ep->oif, (int)rc));
        return -1;
    }
    ofi_rq(req)->tctx = x;
    ep->n_eager++;
    ep->used = 1;
    return 0;
}

/* A receive into the caller's buffer, the provider matching it: 0 posted,
 * 1 no room now, -1 the endpoint failed. */
static int post_trecv(gw_ofi_ep_t *ep, gw_request_t *req)
{
    gw_ofi_ctx_t *x = tctx_get(ep, GW_OFI_CTX_TRECV, req);
    if (!x) {
        gw_ofi_ep_die(ep, GW_ERR_NOMEM, "ofi: out of memory for a receive's context");
        return -1;
    }
    uint8_t *buf;
    void *desc;
    size_t len = req->len;
    x->slot = 0;
    if (len < GW_OFI_TSTAGE) {
        /* into a stage that holds any message sent whole, copied out at the
         * completion: the provider never truncates (providers disagree on
         * what a truncated tagged receive reports: libfabric 1.17's shm
         * gives neither the length nor the CQ data, 2.x's never completes
         * it), and an RTS always fits */
        if (!ep->ntstage_free) {
            tctx_put(ep, x);
            return 1;
        }
        unsigned i = ep->tstage_free[--ep->ntstage_free];
        x->slot = (uint16_t)(i + 1);
        buf = ep->tstage + (size_t)i * GW_OFI_TSTAGE;
        desc = ep->tstage_desc;
        len = GW_OFI_TSTAGE;
    } else {
        local_of(ep, req, &buf, &desc);
    }
    ssize_t rc = fi_trecv(ep->ep, buf, len, desc, FI_ADDR_UNSPEC, req->value, ~req->mask, &x->fc);
    if (rc) {
        if (x->slot)
            ep->tstage_free[ep->ntstage_free++] = (uint16_t)(x->slot - 1u);
        tctx_put(ep, x);
        if (rc == -FI_EAGAIN) {
            ep->n_eagain++;
            return 1;
        }
        gw_ofi_ep_die(ep, gw_ofi_status_of((int)rc), "ofi %s: fi_trecv of %zu bytes (tag 0x%llx, mask 0x%llx) from %s "
                      "failed: %s", ep->oif->prov, req->len, (unsigned long long)req->value,
                      (unsigned long long)req->mask, B(ep)->peer, gw_ofi_strerror(ep->oif, (int)rc));
        return -1;
    }
    ofi_rq(req)->tctx = x;
    ep->n_trecv++;
    return 0;
}

/* A tagged receive's end: what landed (got bytes, data its CQ data: the
 * message's length, or an RTS), or its failure (st); NULL request:
 * forgotten at failure. */
static void trecv_end(gw_ofi_ep_t *ep, gw_ofi_ctx_t *x, size_t got, uint64_t tag, uint64_t data, gw_status_t st);

/* ---- messages ------------------------------------------------------------------ */
static int post_send(gw_ofi_ep_t *ep, gw_request_t *req)
{
    if (!ep->tx_credits) /* (an EAGER or an RTS: one credit either way) */
        return 1;
    int host = !req->lmem || req->lmem->type == GW_MEM_HOST;
    uint32_t fl = (uint32_t)ep->cr_owed << GW_OFI_F_CREDIT_SHIFT;
    if (host && GW_OFI_HDR_LEN + req->len <= ep->oif->inject && ep->tx_seen) {
        uint8_t m[GW_OFI_INJECT_MAX];
        gw_ofi_hdr_t h = {.type = GW_OFI_EAGER, .flags = fl, .f = {req->value, req->len}};
        gw_ofi_hdr_write(&h, m);
        if (req->len)
            memcpy(m + GW_OFI_HDR_LEN, req->buf, req->len);
        int r = inject_msg(ep, m, GW_OFI_HDR_LEN + req->len);
        if (r < 0) {
            gw_ofi_ep_die(ep, gw_ofi_status_of(r), "ofi %s: fi_inject of a %zu-byte message to %s failed: %s",
                          ep->oif->prov, req->len, B(ep)->peer, gw_ofi_strerror(ep->oif, r));
            return -1;
        }
        if (r == 0) { /* the provider holds a copy: the send is complete */
            ep->tx_credits--;
            ep->cr_owed = 0;
            ep->n_eager++;
            req->length = req->len;
            gw_ep_op_done(B(ep), req, GW_OK);
            return 0;
        }
        /* no room now: from a slot, whose completion frees it */
    }
    if (req->len <= GW_OFI_EAGER_MAX && host) {
        int s = tx_get(ep);
        if (s < 0)
            return 1;
        uint8_t *p = tx_at(ep, (unsigned)s);
        gw_ofi_hdr_t h = {.type = GW_OFI_EAGER, .flags = fl, .f = {req->value, req->len}};
        gw_ofi_hdr_write(&h, p);
        if (req->len)
            memcpy(p + GW_OFI_HDR_LEN, req->buf, req->len);
        ssize_t rc = send_slot(ep, (unsigned)s, GW_OFI_HDR_LEN + req->len);
        if (rc) {
            tx_put(ep, (unsigned)s);
            if (rc == -FI_EAGAIN) {
                ep->n_eagain++;
                return 1;
            }
            gw_ofi_ep_die(ep, gw_ofi_status_of((int)rc), "ofi %s: fi_send of a %zu-byte message to %s failed: %s",
                          ep->oif->prov, req->len, B(ep)->peer, gw_ofi_strerror(ep->oif, (int)rc));
            return -1;
        }
        ep->txctx[s].req = req;
        ep->tx_credits--;
        ep->cr_owed = 0;
        ep->n_eager++;
        return 0;
    }
    /* rendezvous: the receiver reads the buffer, then answers FIN */
    uint64_t addr, key;
    if (rdv_prepare(ep, req, &addr, &key) != 0)
        return -1;
    gw_ofi_hdr_t h = {.type = GW_OFI_RTS, .f = {req->value, req->len, ofi_rq(req)->opid, addr, key}};
    ep->used = 1; /* (the peer may read the buffer) */
    int rc = ctl_now(ep, &h, NULL, 0);
    if (rc < 0) {
        gw_ofi_ep_die(ep, gw_ofi_status_of(rc), "ofi %s: sending the RTS of a %zu-byte message to %s failed: %s",
                      ep->oif->prov, req->len, B(ep)->peer, gw_ofi_strerror(ep->oif, rc));
        return -1;
    }
    if (rc == 0)
        ep->n_rdv++;
    return rc;
}

static void finish(gw_ofi_ep_t *ep, gw_request_t *req);

/* send_now's outcome of an inject: counted, or (no room, an error) left to
 * post_send's path, which waits or reports. */
static inline gw_status_t injected(gw_ofi_ep_t *ep, ssize_t rc)
{
    if (GW_UNLIKELY(rc != 0)) {
        if (rc == -FI_EAGAIN)
            ep->n_eagain++;
        return GW_ERR_UNSUPPORTED;
    }
    ep->n_inject++;
    ep->n_eager++;
    return GW_OK;
}

/* The send_now op (tl.h): an eager message whose header and payload fit
 * fi_inject, on an endpoint with nothing on its pending list (which would
 * go first), sent before the api layer builds a request: the provider
 * copies it and reports no completion, so nothing of it is left to track.
 * What is not taken here (too large, the provider's connection not up yet,
 * no room now, an error) takes post_send's path, which reports errors. */
gw_status_t gw_ofi_send_now(gw_tl_ep_t *e, const void *buf, size_t len, uint64_t tag)
{
    gw_ofi_ep_t *ep = to_oep(e);
    if (use_tagged(ep)) {
        if (len > ep->oif->tinject || !ep->tx_seen || !gw_list_empty(&ep->pending) || gw_ep_failed(B(ep)))
            return GW_ERR_UNSUPPORTED;
        return injected(ep, fi_tinjectdata(ep->ep, buf, len, len, ep->peer, tag)); /* (data: its length) */
    }
    if (GW_OFI_HDR_LEN + len > ep->oif->inject || !ep->tx_seen || !gw_list_empty(&ep->pending) ||
        !ep->tx_credits || gw_ep_failed(B(ep)))
        return GW_ERR_UNSUPPORTED;
    uint8_t m[GW_OFI_INJECT_MAX];
    gw_ofi_hdr_t h = {.type = GW_OFI_EAGER, .flags = (uint32_t)ep->cr_owed << GW_OFI_F_CREDIT_SHIFT, .f = {tag, len}};
    gw_ofi_hdr_write(&h, m);
    if (len)
        memcpy(m + GW_OFI_HDR_LEN, buf, len);
    gw_status_t st = injected(ep, fi_inject(ep->ep, m, GW_OFI_HDR_LEN + len, ep->peer));
    if (GW_LIKELY(st == GW_OK)) {
        ep->tx_credits--;
        ep->cr_owed = 0;
    }
    return st;
}

/* Posts what req still has to post: 0 all of it, 1 no room now, -1 the endpoint failed. */
static int post_req(gw_ofi_ep_t *ep, gw_request_t *req)
{
    int r;
    switch (req->op) {
    case GW_OP_SEND:
        return (req->tl_flags & TLF_TSEND) ? post_tsend(ep, req) : post_send(ep, req);
    case GW_OP_RECV:
        if (req->tl_flags & TLF_TRECV)
            return post_trecv(ep, req);
        r = post_rma(ep, req); /* a rendezvous read that waited for room */
        break;
    case GW_OP_BATCH:
        r = post_list(ep, req);
        break;
    default:
        r = post_rma(ep, req);
        break;
    }
    if (r == 0) {
        req->tl_flags |= TLF_POSTED;
        if (req->pending == 0)
            finish(ep, req); /* (nothing to move) */
    }
    return r;
}

static void pending_drain(gw_ofi_ep_t *ep)
{
    while (!gw_list_empty(&ep->pending) && !gw_ep_failed(B(ep))) {
        gw_request_t *req = gw_container_of(ep->pending.next, gw_request_t, tl_link);
        gw_list_del(&req->tl_link);
        req->tl_flags &= (uint16_t)~TLF_PENDING;
        int r = post_req(ep, req);
        if (r == 1) {
            gw_list_push_front(&ep->pending, &req->tl_link);
            req->tl_flags |= TLF_PENDING;
            return;
        }
        if (r < 0)
            return;
    }
}

/* Into the pending list (behind what waits there already), or posted now. */
static void post_or_queue(gw_ofi_ep_t *ep, gw_request_t *req)
{
    if (gw_list_empty(&ep->pending) && post_req(ep, req) != 1)
        return;
    if (gw_ep_failed(B(ep)))
        return;
    /* (not where every local buffer needs a registration, FI_MR_LOCAL: a
     * send there may already hold one of the caller's buffer) */
    if (gw_ep_send_needs_own(req, GW_OFI_EAGER_MAX) && !ep->oif->mr_local && gw_ep_own_payload(req) != GW_OK) {
        gw_ofi_ep_die(ep, GW_ERR_NOMEM, "ofi: out of memory keeping a %zu-byte message that waits to be sent", req->len);
        gw_ep_op_done(B(ep), req, GW_ERR_NOMEM);
        return;
    }
    if (!ep->tx_credits && req->op == GW_OP_SEND && !(req->tl_flags & TLF_TSEND))
        ep->n_cstall++;
    req->tl_flags |= TLF_PENDING;
    gw_list_push_back(&ep->pending, &req->tl_link);
}

/* A rendezvous receive: read the sender's buffer (what fits), then FIN. */
static void rdv_start(gw_ofi_ep_t *ep, gw_request_t *req, uint64_t opid, uint64_t raddr, uint64_t key, uint64_t mlen,
                      uint64_t tag)
{
    ofi_rq(req)->opid = opid;
    ofi_rq(req)->raddr = raddr;
    ofi_rq(req)->rkey = key;
    ofi_rq(req)->off = mlen;
    req->rtag = tag;
    req->posted = 0;
    req->pending = 0;
    req->first_err = GW_OK;
    gw_list_push_back(&ep->rdv_recvs, &req->tl_link);
    size_t n = GW_MIN(req->len, (size_t)mlen);
    gw_status_t st = n ? local_prep(ep, req, n, FI_READ | FI_RECV, 0) : GW_OK;
    if (st != GW_OK) {
        req->first_err = st;
        finish(ep, req);
        return;
    }
    ep->n_rdv++;
    int r = post_rma(ep, req);
    if (r == 0) {
        req->tl_flags |= TLF_POSTED;
        if (!req->pending)
            finish(ep, req);
    } else if (r == 1) {
        gw_list_del(&req->tl_link); /* it waits on pending instead, then returns here */
        req->tl_flags |= TLF_PENDING;
        gw_list_push_back(&ep->pending, &req->tl_link);
    }
}

gw_status_t gw_ofi_recv_matched(gw_tl_ep_t *e, gw_request_t *req, gw_unexp_t *msg)
{
    gw_ofi_ep_t *ep = to_oep(e);
    gw_ofi_rts_t *r = (gw_ofi_rts_t *)(uintptr_t)msg->handle2;
    uint64_t raddr = r->raddr, key = r->key;
    gw_list_del(&r->link);
    gw_op_state_put(oep_core(ep), r);
    if (gw_ep_failed(B(ep)))
        return B(ep)->error;
    rdv_start(ep, req, msg->handle, raddr, key, msg->len, msg->tag);
    return GW_OK;
}

/* Every piece of req is done (or none was needed). */
static void finish(gw_ofi_ep_t *ep, gw_request_t *req)
{
    gw_status_t st = req->first_err;
    if (req->op == GW_OP_RECV) { /* rendezvous read */
        gw_list_del(&req->tl_link);
        req_release(ep, req, 1);
        gw_ofi_hdr_t h = {.type = GW_OFI_FIN, .f = {(uint64_t)(int64_t)st, 0, ofi_rq(req)->opid}};
        gw_ofi_send_ctl(ep, &h);
        gw_ep_recv_done(B(ep), req, (size_t)ofi_rq(req)->off, req->rtag, st);
        return;
    }
    if (ofi_rq(req)->bounce && req->op == GW_OP_GET && st == GW_OK)
        memcpy(req->buf, tx_at(ep, ofi_rq(req)->bounce - 1u), req->len);
    req_release(ep, req, 1);
    if (st == GW_OK)
        req->length = req->len;
    gw_ep_op_done(B(ep), req, st);
}

gw_status_t gw_ofi_submit(gw_tl_ep_t *e, gw_request_t *req)
{
    gw_ofi_ep_t *ep = to_oep(e);
    gw_core_t *c = oep_core(ep);
    gw_status_t st;
    if (gw_ep_failed(B(ep)))
        return gw_err(c, GW_ERR_ENDPOINT_FAILED, "ofi endpoint to %s failed earlier: %s", B(ep)->peer,
                      B(ep)->error_detail);
    switch (req->op) {
    case GW_OP_PUT:
    case GW_OP_GET:
    case GW_OP_PUT_NOTIFY:
        if (req->len && (st = local_prep(ep, req, req->len, req->op == GW_OP_GET ? FI_READ : FI_WRITE, 1)) != GW_OK)
            return st;
        if (req->op == GW_OP_PUT_NOTIFY && (st = gw_ep_notify_defer(B(ep), req)) != GW_OK) {
            req_release(ep, req, 1);
            return st;
        }
        break;
    case GW_OP_SEND:
        if (use_tagged(ep)) {
            int host = !req->lmem || req->lmem->type == GW_MEM_HOST;
            if (req->len > GW_OFI_TEAGER_MAX) { /* an RTS: the peer reads the buffer by its key */
                if ((st = local_prep(ep, req, req->len, FI_SEND | FI_REMOTE_READ | FI_READ, 0)) != GW_OK)
                    return st;
                if (!ep->oif->virt_addr && !ofi_rq(req)->mr && !req->lmem)
                    return gw_err(c, GW_ERR_UNSUPPORTED, "ofi %s: a %zu-byte message from unregistered memory",
                                  ep->oif->prov, req->len);
            } else if (req->len && (!host || ep->oif->mr_local) &&
                       (st = local_prep(ep, req, req->len, FI_SEND, 0)) != GW_OK) {
                return st;
            }
            req->tl_flags |= TLF_TSEND;
            break;
        }
        if (req->len > GW_OFI_EAGER_MAX || (req->lmem && req->lmem->type != GW_MEM_HOST)) {
            if ((st = local_prep(ep, req, req->len, FI_SEND | FI_REMOTE_READ | FI_READ, 0)) != GW_OK)
                return st;
            if (!ep->oif->virt_addr && !ofi_rq(req)->mr && !req->lmem) /* (offsets need a registration to count from) */
                return gw_err(c, GW_ERR_UNSUPPORTED, "ofi %s: a %zu-byte message from unregistered memory",
                              ep->oif->prov, req->len);
        }
        break;
    default:
        return gw_err(c, GW_ERR_UNSUPPORTED, "ofi: operation %d", req->op);
    }
    post_or_queue(ep, req);
    return GW_OK;
}

gw_status_t gw_ofi_rma_iov(gw_tl_ep_t *e, gw_request_t *req)
{
    gw_ofi_ep_t *ep = to_oep(e);
    const gw_batch_t *b = req->batch;
    if (gw_ep_failed(B(ep)))
        return gw_err(oep_core(ep), GW_ERR_ENDPOINT_FAILED, "ofi endpoint to %s failed earlier: %s", B(ep)->peer,
                      B(ep)->error_detail);
    if (ep->oif->mr_local) /* every piece needs its region's descriptor: else one put or get per entry */
        for (uint32_t i = 0; i < b->nlmem; i++)
            if (!b->lmem[i] || !b->lmem[i]->tl_reg[GW_TL_OFI])
                return GW_ERR_UNSUPPORTED;
    ofi_rq(req)->ent = 0;
    ofi_rq(req)->off = 0;
    post_or_queue(ep, req);
    return GW_OK;
}

gw_status_t gw_ofi_trecv(gw_tl_ep_t *e, gw_request_t *req)
{
    gw_ofi_ep_t *ep = to_oep(e);
    gw_core_t *c = oep_core(ep);
    if (gw_ep_failed(B(ep)))
        return gw_err(c, GW_ERR_ENDPOINT_FAILED, "ofi endpoint to %s failed earlier: %s", B(ep)->peer,
                      B(ep)->error_detail);
    int host = !req->lmem || req->lmem->type == GW_MEM_HOST;
    gw_status_t st;
    if (req->len && (!host || ep->oif->mr_local) && (st = local_prep(ep, req, req->len, FI_RECV, 0)) != GW_OK)
        return st;
    gw_ep_work_begins(B(ep));
    B(ep)->tl_posted++;
    req->tl_flags |= TLF_TRECV;
    post_or_queue(ep, req);
    return GW_OK;
}

static void rdv_start(gw_ofi_ep_t *ep, gw_request_t *req, uint64_t opid, uint64_t raddr, uint64_t key, uint64_t mlen,
                      uint64_t tag);

static void trecv_end(gw_ofi_ep_t *ep, gw_ofi_ctx_t *x, size_t got, uint64_t tag, uint64_t data, gw_status_t st)
{
    gw_request_t *req = x->req;
    const uint8_t *stage = x->slot ? ep->tstage + (size_t)(x->slot - 1u) * GW_OFI_TSTAGE : NULL;
    if (x->slot)
        ep->tstage_free[ep->ntstage_free++] = (uint16_t)(x->slot - 1u);
    x->slot = 0;
    tctx_put(ep, x);
    if (!req)
        return;
    gw_ep_base_t *b = B(ep);
    ofi_rq(req)->tctx = NULL;
    req->tl_flags &= (uint16_t)~TLF_TRECV;
    b->tl_posted--;
    req_release(ep, req, 1);
    if (st != GW_OK && st != GW_ERR_TRUNCATED) {
        gw_ep_recv_done(b, req, 0, tag, st);
        return;
    }
    if (st == GW_OK && (data & GW_OFI_TD_RTS)) { /* an RTS: read the sender's buffer, then FIN */
        uint8_t m[GW_OFI_TRTS_LEN];
        gw_status_t cs = GW_OK;
        if (got != GW_OFI_TRTS_LEN)
            cs = GW_ERR_PROTOCOL;
        else if (stage)
            memcpy(m, stage, sizeof(m));
        else if (!req->lmem || req->lmem->type == GW_MEM_HOST)
            memcpy(m, req->buf, sizeof(m));
        else
            cs = gw_mem_copy_from(oep_core(ep), req->lmem, m, req->buf, sizeof(m));
        if (cs != GW_OK) {
            gw_ep_recv_done(b, req, 0, tag, cs);
            gw_ofi_ep_die(ep, GW_ERR_PROTOCOL, "ofi %s: from %s: an RTS of %zu bytes (%zu expected)%s", ep->oif->prov,
                          b->peer, got, (size_t)GW_OFI_TRTS_LEN, cs == GW_ERR_PROTOCOL ? "" : ", unreadable");
            return;
        }
        rdv_start(ep, req, data & ~GW_OFI_TD_RTS, gw_get_u64(m + 8), gw_get_u64(m + 16), gw_get_u64(m), tag);
        return;
    }
    /* the message itself, data its full length (what did not fit the
     * buffer the provider dropped: FI_ETRUNC, st GW_ERR_TRUNCATED) */
    if (GW_UNLIKELY(data > req->len))
        gw_err(oep_core(ep), GW_ERR_TRUNCATED, "gw_recv: a message of %llu bytes (tag 0x%llx) from %s is longer than "
               "the %zu-byte buffer: its first %zu bytes are there, the rest was dropped", (unsigned long long)data,
               (unsigned long long)tag, b->peer, req->len, req->len);
    if (stage)
        gw_ep_recv_eager(b, req, stage, (size_t)data, tag);
    else
        gw_ep_recv_done(b, req, (size_t)data, tag, GW_OK);
}

/* A tagged send's completion (the provider has taken its bytes). */
static void tsend_end(gw_ofi_ep_t *ep, gw_ofi_ctx_t *x)
{
    gw_request_t *req = x->req;
    tctx_put(ep, x);
    if (!req)
        return;
    ofi_rq(req)->tctx = NULL;
    req_release(ep, req, 1);
    req->length = req->len;
    gw_ep_op_done(B(ep), req, GW_OK);
}

static gw_status_t cqe_status(const struct fi_cq_err_entry *ee, int closing);

/* A tagged receive's failed completion: a message longer than the buffer
 * (FI_ETRUNC: what fit is there, the rest dropped by the provider), our
 * own cancel (FI_ECANCELED after fi_cancel), or the provider's failure. */
static void trecv_error(gw_ofi_ep_t *ep, gw_ofi_ctx_t *x, const struct fi_cq_err_entry *ee, const char *ps)
{
    gw_ofi_iface_t *oif = ep->oif;
    gw_core_t *c = oep_core(ep);
    gw_request_t *req = x->req;
    if (ee->err == FI_ETRUNC && (ee->flags & FI_REMOTE_CQ_DATA) && !(ee->data & GW_OFI_TD_RTS)) {
        /* the message's length is its CQ data (providers disagree on len
         * and olen: tcp 2.x gives neither) */
        if (req)
            gw_err(c, GW_ERR_TRUNCATED, "gw_recv: a message of %llu bytes (tag 0x%llx) from %s is longer than the "
                   "%zu-byte buffer: its first %zu bytes are there, the rest was dropped",
                   (unsigned long long)ee->data, (unsigned long long)ee->tag, B(ep)->peer, req->len, req->len);
        trecv_end(ep, x, req ? req->len : 0, ee->tag, ee->data, GW_ERR_TRUNCATED);
        return;
    }
    if (ee->err == FI_ECANCELED && x->canceled) {
        if (req)
            gw_err(c, GW_ERR_CANCELED, "gw_recv(len=%zu, tag 0x%llx, mask 0x%llx): canceled by gw_request_cancel() "
                   "or gw_request_free() before a message matched (withdrawn from the %s provider)", req->len,
                   (unsigned long long)req->value, (unsigned long long)req->mask, oif->prov);
        trecv_end(ep, x, 0, req ? req->value : 0, 0, GW_ERR_CANCELED);
        return;
    }
    gw_status_t st = cqe_status(ee, ep->closing);
    if (req)
        gw_err(c, st, "ofi %s: a receive of %zu bytes (tag 0x%llx) from %s failed: %s (provider: %s)", oif->prov,
               req->len, (unsigned long long)req->value, B(ep)->peer, gw_ofi_strerror(oif, ee->err), ps ? ps : "");
    trecv_end(ep, x, 0, req ? req->value : 0, 0, st);
    if (!ep->closing)
        gw_ofi_ep_die(ep, st, "ofi %s: a receive from %s failed: %s (provider: %s)", oif->prov, B(ep)->peer,
                      gw_ofi_strerror(oif, ee->err), ps ? ps : "");
}

/* ---- completions --------------------------------------------------------------- */
/* Credits the peer returned (n > 0) on a message of type t: 0, or -1 with
 * the endpoint failed (credits not agreed, or more than were spent). */
__attribute__((noinline)) static int credit_take(gw_ofi_ep_t *ep, unsigned n, unsigned t)
{
    if (!ep->cr_on) {
        gw_ofi_ep_die(ep, GW_ERR_PROTOCOL, "ofi %s: from %s: a %s message returning %u credits, but credits were "
                      "not agreed in the handshake", ep->oif->prov, B(ep)->peer, type_name(t), n);
        return -1;
    }
    if (ep->tx_credits + n > GW_OFI_CREDIT_SLOTS - GW_OFI_CREDIT_RESERVE) {
        gw_ofi_ep_die(ep, GW_ERR_PROTOCOL, "ofi %s: from %s: a %s message returning %u credits while %llu are held: "
                      "more than the %d a sender starts with (more than were spent)", ep->oif->prov, B(ep)->peer,
                      type_name(t), n, (unsigned long long)ep->tx_credits,
                      GW_OFI_CREDIT_SLOTS - GW_OFI_CREDIT_RESERVE);
        return -1;
    }
    ep->tx_credits += n;
    return 0;
}

static void rx_message(gw_ofi_ep_t *ep, unsigned slot, size_t len)
{
    gw_ep_base_t *b = B(ep);
    const uint8_t *p = rx_at(ep, slot);
    gw_ofi_hdr_t h;
    char why[200];
    uint64_t tag;
    unsigned cred;
    if (gw_ofi_hdr_eager(p, len, GW_OFI_EAGER_MAX, &tag, &cred)) { /* an eager message (the full parse's verdict) */
        h.type = GW_OFI_EAGER;
        h.f[0] = tag;
        h.f[1] = len - GW_OFI_HDR_LEN;
    } else if (gw_ofi_hdr_parse(&h, p, len, GW_OFI_EAGER_MAX, why, sizeof(why)) != GW_OK) {
        gw_ofi_ep_die(ep, GW_ERR_PROTOCOL, "ofi %s: from %s: %s", ep->oif->prov, b->peer, why);
        return;
    } else {
        cred = h.flags >> GW_OFI_F_CREDIT_SHIFT;
    }
    ep->rxctx[slot].cost = (uint8_t)gw_ofi_type_costs(h.type); /* (owed back once the slot is posted again) */
    if (GW_UNLIKELY(cred) && credit_take(ep, cred, h.type) != 0)
        return;
    gw_request_t *req;
    switch (h.type) {
    case GW_OFI_EAGER:
        req = gw_ep_match_posted(b, h.f[0]);
        if (req) {
            gw_ep_recv_eager(b, req, p + GW_OFI_HDR_LEN, (size_t)h.f[1], h.f[0]);
        } else {
            gw_unexp_t *u = gw_ep_unexp_eager(b, h.f[0], (size_t)h.f[1]);
            if (!u) {
                gw_ofi_ep_die(ep, GW_ERR_NOMEM, "ofi: out of memory keeping an unexpected %llu-byte message",
                              (unsigned long long)h.f[1]);
                return;
            }
            if (h.f[1])
                memcpy(u->data, p + GW_OFI_HDR_LEN, (size_t)h.f[1]);
            gw_ep_unexp_filled(b, u);
        }
        /* (no gw_core_signal: the pass that read this completion counts it,
         * and a caller sleeps only after a pass that found nothing; writing
         * the context's eventfd here was a write and a read per message) */
        break;
    case GW_OFI_RTS:
        req = gw_ep_match_posted(b, h.f[0]);
        if (req) {
            rdv_start(ep, req, h.f[2], h.f[3], h.f[4], h.f[1], h.f[0]);
        } else {
            gw_ofi_rts_t *r = gw_op_state_get(oep_core(ep), sizeof(*r));
            if (!r || gw_ep_unexp_rndv(b, h.f[0], (size_t)h.f[1], h.f[2], (uint64_t)(uintptr_t)r) != GW_OK) {
                gw_op_state_put(oep_core(ep), r);
                gw_ofi_ep_die(ep, GW_ERR_NOMEM, "ofi: out of memory keeping an unexpected message");
                return;
            }
            r->raddr = h.f[3];
            r->key = h.f[4];
            gw_list_push_back(&ep->rts, &r->link);
        }
        break;
    case GW_OFI_FIN:
        req = gw_op_table_get(&ep->sends, h.f[2]);
        if (!req || req->op != GW_OP_SEND) {
            gw_ofi_ep_die(ep, GW_ERR_PROTOCOL, "ofi %s: FIN from %s for unknown message 0x%llx", ep->oif->prov,
                          b->peer, (unsigned long long)h.f[2]);
            return;
        }
        gw_op_table_free(&ep->sends, req);
        req_release(ep, req, 1);
        req->length = req->len;
        gw_ep_op_done(b, req, (gw_status_t)(int64_t)h.f[0]);
        break;
    case GW_OFI_AM:
        if (gw_ep_am_deliver(b, h.f[0] < GW_AM_IDS ? (unsigned)h.f[0] : GW_AM_IDS, p + GW_OFI_HDR_LEN,
                             (size_t)h.f[1]) != GW_OK) {
            snprintf(why, sizeof(why), "%.*s", (int)sizeof(why) - 1, oep_core(ep)->errbuf);
            gw_ofi_ep_die(ep, GW_ERR_PROTOCOL, "ofi %s: %s", ep->oif->prov, why);
        }
        break;
    case GW_OFI_NOTIFY:
        if ((h.flags & GW_OFI_F_COUNTED) ? gw_ep_ncount_add(b, h.f[0]) != 0 : gw_ep_notify_push(b, h.f[0]) != 0) {
            gw_ofi_ep_die(ep, GW_ERR_NOMEM, "ofi: out of memory queueing a notification");
            return;
        }
        break; /* (counted by the pass, as a message) */
    case GW_OFI_PING: {
        gw_ofi_hdr_t pong = {.type = GW_OFI_PONG, .f = {h.f[0]}};
        gw_ofi_send_ctl(ep, &pong);
        break;
    }
    case GW_OFI_CREDIT: /* (its credits were taken above) */
        break;
    default: /* PONG: its arrival was the point (liveness), and which fence it answers */
        if (h.f[0] > ep->fence_seen)
            ep->fence_seen = h.f[0];
        if (ep->probe_seq && h.f[0] >= ep->probe_seq)
            gw_ofi_probe_verdict(ep, 1);
        break;
    }
}

static void rma_done(gw_ofi_ep_t *ep, gw_ofi_ctx_t *x, gw_status_t st)
{
    gw_request_t *req = x->req;
    rma_put(ep, x);
    if (!req)
        return; /* forgotten at failure */
    if (st != GW_OK && req->first_err == GW_OK)
        req->first_err = st;
    if (--req->pending == 0 && (req->tl_flags & TLF_POSTED))
        finish(ep, req);
}

/* What a failed completion means.  We cancel nothing while the endpoint is
 * open, so FI_ECANCELED then is the provider giving up the operation: the
 * tcp provider does that when the target refused the key (provider errno
 * ENOENT, EINVAL, EACCES or EPERM: no such key, or one that does not cover
 * the range or grant the access) and when the connection went (ENOTCONN,
 * ECONNRESET, EPIPE). */
static gw_status_t cqe_status(const struct fi_cq_err_entry *ee, int closing)
{
    if (ee->err == FI_ECANCELED && !closing) {
        switch (ee->prov_errno < 0 ? -ee->prov_errno : ee->prov_errno) {
        case ENOENT:
        case EINVAL:
        case EACCES:
        case EPERM:
            return GW_ERR_INVALID_KEY;
        default:
            return GW_ERR_CONN_RESET;
        }
    }
    return gw_ofi_status_of(ee->err);
}

/* cancel_vague (libfabric 2.x's tcp provider): the provider cancels every
 * operation in flight to a peer when their connection goes, and the target's
 * provider drops the connection when it refuses an RMA's key (no such key,
 * a range it does not cover, an access it does not grant); the cancelled
 * operations' completions carry FI_ECANCELED and, as the provider's errno,
 * whatever errno its thread had last: nothing tells a refused key from a
 * lost connection.  So the first cancel asks the peer whether it lives: a
 * PING, from a send slot (the provider opens a new connection for it), with
 * a fence number the PONG echoes.  An answer means the peer is alive and
 * its provider dropped the connection on purpose: where an RMA was among the
 * cancelled operations, a refused key (GW_ERR_INVALID_KEY), as a verbs NIC
 * reports it; no answer within the bound, or the PING failing too, means
 * the connection was lost (GW_ERR_CONN_RESET).  The endpoint fails either
 * way; its requests wait for the verdict. */
static void probe_cancel(gw_ofi_ep_t *ep, gw_ofi_ctx_t *x)
{
    gw_ofi_iface_t *oif = ep->oif;
    char what[200];
    switch (x->kind) {
    case GW_OFI_CTX_RX:
        snprintf(what, sizeof(what), "a receive from %s", B(ep)->peer);
        break;
    case GW_OFI_CTX_TSEND:
        tctx_put(ep, x); /* (its request waits for the verdict) */
        snprintf(what, sizeof(what), "a message to %s", B(ep)->peer);
        break;
    case GW_OFI_CTX_TRECV: /* (its request waits for the verdict: forget_all ends it) */
        snprintf(what, sizeof(what), "a receive from %s", B(ep)->peer);
        break;
    case GW_OFI_CTX_TX:
        if (ep->probe_seq && ep->probe_slot == x->slot + 1u) { /* the probe itself: nobody answers */
            tx_put(ep, x->slot);
            ep->probe_slot = 0;
            gw_ofi_probe_verdict(ep, 0);
            return;
        }
        tx_put(ep, x->slot);
        snprintf(what, sizeof(what), "a message to %s", B(ep)->peer);
        break;
    default: {
        gw_request_t *req = x->req;
        int rd = req && (req->op == GW_OP_GET || req->op == GW_OP_RECV);
        snprintf(what, sizeof(what), "an RMA %s of %u bytes on %s", rd ? "read" : "write", x->len, B(ep)->peer);
        rma_put(ep, x); /* (its request waits for the verdict: the endpoint's failure ends it) */
        if (!ep->probe_rma)
            snprintf(ep->probe_what, sizeof(ep->probe_what), "%s", what);
        ep->probe_rma = 1;
        break;
    }
    }
    if (!ep->probe_what[0])
        snprintf(ep->probe_what, sizeof(ep->probe_what), "%s", what);
    if (ep->probe_seq || gw_ep_failed(B(ep)))
        return;
    ep->probe_seq = ++oif->fence_seq;
    ep->probe_slot = 0;
    long ms = oep_core(ep)->peer_timeout_ms;
    ep->probe_until = gw_now_coarse_ns() + (uint64_t)(ms > 0 && ms < 5000 ? ms : 5000) * 1000000ull;
    ep->tx_seen = 0; /* the provider's connection went: the PING goes from a slot, and no inject until a
                      * send completes on the new one */
    gw_ofi_hdr_t h = {.type = GW_OFI_PING, .f = {ep->probe_seq}};
    gw_ofi_send_ctl(ep, &h); /* (an error fails the endpoint at once) */
}

void gw_ofi_probe_verdict(gw_ofi_ep_t *ep, int answered)
{
    gw_ofi_iface_t *oif = ep->oif;
    long ms = oep_core(ep)->peer_timeout_ms;
    ep->probe_seq = 0;
    if (answered && ep->probe_rma)
        gw_ofi_ep_die(ep, GW_ERR_INVALID_KEY, "ofi %s: %s failed: the target refused the access (its provider "
                      "cancelled it, dropping the connection, and the peer answers on a new one): the key was "
                      "revoked, does not cover the range or lacks the access, and the target memory was not "
                      "touched", oif->prov, ep->probe_what);
    else if (answered)
        gw_ofi_ep_die(ep, GW_ERR_CONN_RESET, "ofi %s: %s was cancelled: the provider dropped its connection to "
                      "%s (the peer answers on a new one)", oif->prov, ep->probe_what, B(ep)->peer);
    else
        gw_ofi_ep_die(ep, GW_ERR_CONN_RESET, "ofi %s: %s was cancelled: the connection to %s was lost (the peer "
                      "did not answer on a new one within %ld ms)", oif->prov, ep->probe_what, B(ep)->peer,
                      ms > 0 && ms < 5000 ? ms : 5000);
}

static void cq_error(gw_ofi_ep_t *ep)
{
    gw_ofi_iface_t *oif = ep->oif;
    struct fi_cq_err_entry ee;
    memset(&ee, 0, sizeof(ee));
    ssize_t r = fi_cq_readerr(ep->cq, &ee, 0);
    if (r < 0)
        return;
    char pbuf[256];
    const char *ps = fi_cq_strerror(ep->cq, ee.prov_errno, ee.err_data, pbuf, sizeof(pbuf));
    gw_ofi_ctx_t *x = ee.op_context;
    if (x && x->kind == GW_OFI_CTX_TPEEK) { /* a probe's answer: no such message (FI_ENOMSG), or its failure */
        ep->peek_state = ee.err == FI_ENOMSG ? 2 : 3;
        tctx_put(ep, x);
        return;
    }
    if (x && x->kind == GW_OFI_CTX_TRECV && (ee.err == FI_ETRUNC || x->canceled || !oif->cancel_vague ||
                                             ee.err != FI_ECANCELED || ep->closing)) {
        trecv_error(ep, x, &ee, ps);
        return;
    }
    if (oif->cancel_vague && ee.err == FI_ECANCELED && !ep->closing && x) {
        probe_cancel(ep, x);
        return;
    }
    gw_status_t st = cqe_status(&ee, ep->closing);
    if (!x) {
        gw_ofi_ep_die(ep, st, "ofi %s: a completion error without a context: %s (%s)", oif->prov,
                      gw_ofi_strerror(oif, ee.err), ps ? ps : "");
        return;
    }
    switch (x->kind) {
    case GW_OFI_CTX_RX:
        if (!ep->closing && !gw_ep_failed(B(ep)))
            gw_ofi_ep_die(ep, st, "ofi %s: a receive from %s failed: %s (provider: %s)", oif->prov, B(ep)->peer,
                          gw_ofi_strerror(oif, ee.err), ps ? ps : "");
        break;
    case GW_OFI_CTX_TX:
        tx_put(ep, x->slot);
        gw_ofi_ep_die(ep, st, "ofi %s: a message to %s failed: %s (provider: %s)", oif->prov, B(ep)->peer,
                      gw_ofi_strerror(oif, ee.err), ps ? ps : "");
        break;
    case GW_OFI_CTX_TSEND: {
        gw_request_t *req = x->req;
        size_t n = req ? req->len : 0;
        uint64_t tag = req ? req->value : 0;
        tctx_put(ep, x); /* (its request is outstanding: the endpoint's failure ends it) */
        gw_ofi_ep_die(ep, st, "ofi %s: a %zu-byte message (tag 0x%llx) to %s failed: %s (provider: %s)", oif->prov,
                      n, (unsigned long long)tag, B(ep)->peer, gw_ofi_strerror(oif, ee.err), ps ? ps : "");
        break;
    }
    default: {
        gw_request_t *req = x->req;
        const char *what = req && (req->op == GW_OP_GET || req->op == GW_OP_RECV) ? "read" : "write";
        if (st == GW_ERR_INVALID_KEY) {
            /* the tcp provider drops its connection on a refused key: the
             * endpoint fails, as over verbs, whatever the provider */
            rma_put(ep, x);
            gw_ofi_ep_die(ep, st, "ofi %s: an RMA %s of %u bytes on %s failed: the target refused the access: "
                          "%s (provider: %s); the key was revoked, does not cover the range or lacks the access, "
                          "and the target memory was not touched", oif->prov, what, x->len, B(ep)->peer,
                          gw_ofi_strerror(oif, ee.err), ps ? ps : "");
            return;
        }
        rma_put(ep, x);
        gw_ofi_ep_die(ep, st, "ofi %s: an RMA %s of %u bytes on %s failed: %s (provider: %s)", oif->prov, what,
                      x->len, B(ep)->peer, gw_ofi_strerror(oif, ee.err), ps ? ps : "");
        break;
    }
    }
}

/* Posts again the receive slots whose repost waited (a pass found nothing,
 * or GW_OFI_RX_LAZY of them wait). */
static void rx_repost(gw_ofi_ep_t *ep)
{
    while (ep->nrx_lazy && !ep->closing && !gw_ep_failed(B(ep))) {
        unsigned slot = ep->rx_lazy[--ep->nrx_lazy];
        int rc = gw_ofi_post_rx(ep, slot);
        if (rc) {
            gw_ofi_ep_die(ep, GW_ERR_SYSTEM, "ofi %s: reposting receive slot %u failed: %s", ep->oif->prov, slot,
                          gw_ofi_strerror(ep->oif, rc));
            return;
        }
        /* posted again: a credit owed back where its message cost one
         * (bounded by the slots, whatever a peer sends) */
        if (ep->cr_on && ep->rxctx[slot].cost && ep->cr_owed < GW_OFI_CREDIT_SLOTS)
            ep->cr_owed++;
        ep->rxctx[slot].cost = 0;
    }
}

/* Credits owed back when a pass sent nothing that carried them: a CREDIT
 * message (no credit needed; no room now: a later pass tries again). */
static void credit_send(gw_ofi_ep_t *ep)
{
    gw_ofi_hdr_t h = {.type = GW_OFI_CREDIT};
    int rc = ctl_now(ep, &h, NULL, 0);
    if (rc == 0)
        ep->n_credit++;
    else if (rc < 0)
        gw_ofi_ep_die(ep, gw_ofi_status_of(rc), "ofi %s: sending a CREDIT message to %s failed: %s", ep->oif->prov,
                      B(ep)->peer, gw_ofi_strerror(ep->oif, rc));
}

/* gw_ofi_ep_progress past its first read: the completions in ce (r of them,
 * or the read's error), more reads while the queue had a full batch, the
 * lazy reposts, the control messages and posts that wait. */
__attribute__((noinline)) static int ep_progress_more(gw_ofi_ep_t *ep, struct fi_cq_tagged_entry *ce, ssize_t r)
{
    int n = 0;
    for (int round = 0; round < 8; round++) {
        if (round > 0)
            r = fi_cq_read(ep->cq, ce, 16);
        if (r == -FI_EAGAIN) {
            if (ep->nrx_lazy && n == 0) /* a pass that found nothing: the slots go back now */
                rx_repost(ep);
            break;
        }
        if (r == -FI_EAVAIL) {
            cq_error(ep);
            n++;
            continue;
        }
        if (r < 0) {
            gw_ofi_ep_die(ep, GW_ERR_SYSTEM, "ofi %s: fi_cq_read failed: %s", ep->oif->prov,
                          gw_ofi_strerror(ep->oif, (int)r));
            break;
        }
        ep->n_cqe += (uint64_t)r;
        gw_ep_base_t *b = B(ep);
        for (ssize_t i = 0; i < r; i++) {
            gw_ofi_ctx_t *x = ce[i].op_context;
            if (x->kind != GW_OFI_CTX_TX && x->kind != GW_OFI_CTX_TSEND) /* the peer sent, or acknowledged our
                                                                          * RMA (stamped by the judge) */
                b->live_mark = 1;
            switch (x->kind) {
            case GW_OFI_CTX_TRECV:
                ep->used = 1;
                trecv_end(ep, x, ce[i].len, ce[i].tag, ce[i].data, GW_OK);
                break;
            case GW_OFI_CTX_TSEND:
                ep->tx_seen = 1;
                tsend_end(ep, x);
                break;
            case GW_OFI_CTX_TPEEK:
                ep->peek_len = ce[i].len;
                ep->peek_tag = ce[i].tag;
                ep->peek_state = 1;
                tctx_put(ep, x);
                break;
            case GW_OFI_CTX_RX:
                ep->used = 1;
                if (!gw_ep_failed(b))
                    rx_message(ep, x->slot, ce[i].len);
                /* its repost waits for a pass that finds nothing (rx_repost),
                 * off the path from this message to the caller's next one;
                 * at most GW_OFI_RX_LAZY slots wait so */
                if (!ep->closing) {
                    if (ep->nrx_lazy == GW_OFI_RX_LAZY)
                        rx_repost(ep);
                    ep->rx_lazy[ep->nrx_lazy++] = (uint16_t)x->slot;
                }
                break;
            case GW_OFI_CTX_TX: {
                gw_request_t *req = x->req;
                ep->tx_seen = 1;
                if (GW_UNLIKELY(ep->probe_slot == x->slot + 1u))
                    ep->probe_slot = 0; /* the probe's PING went: its PONG is the answer */
                tx_put(ep, x->slot);
                if (req) { /* an eager message went */
                    req->length = req->len;
                    gw_ep_op_done(b, req, GW_OK);
                }
                break;
            }
            default:
                rma_done(ep, x, GW_OK);
                break;
            }
        }
        n += (int)r;
        if (r < 16)
            break;
    }
    if (!gw_ep_failed(B(ep))) {
        ctl_drain(ep);
        pending_drain(ep);
        if (ep->cr_owed >= GW_OFI_CREDIT_BACK && !gw_ep_failed(B(ep)))
            credit_send(ep);
    }
    return n;
}

/* One read of the queue; the common answer of a spinning caller's pass (an
 * empty queue, no receive slot to repost, nothing waiting to go out) with
 * no more than the read. */
int gw_ofi_ep_progress(gw_ofi_ep_t *ep)
{
    struct fi_cq_tagged_entry ce[16];
    ssize_t r = fi_cq_read(ep->cq, ce, 16);
    if (r == -FI_EAGAIN && !ep->nrx_lazy && gw_list_empty(&ep->ctlq) && gw_list_empty(&ep->pending) &&
        ep->cr_owed < GW_OFI_CREDIT_BACK)
        return 0;
    return ep_progress_more(ep, ce, r);
}

/* ---- failure ------------------------------------------------------------------- */
void gw_ofi_forget_all(gw_ofi_ep_t *ep, gw_status_t st)
{
    gw_list_t *p, *t;
    /* pieces in flight: their completions (if any come) find no request; a
     * bounce slot stays out, the provider may still use it */
    for (p = ep->rma_busy.next; p != &ep->rma_busy; p = p->next) {
        gw_ofi_ctx_t *x = gw_container_of(p, gw_ofi_ctx_t, link);
        if (x->req)
            req_release(ep, x->req, 0);
        x->req = NULL;
    }
    for (unsigned i = 0; i < GW_OFI_NTX; i++)
        ep->txctx[i].req = NULL;
    /* tagged operations: a send's request is outstanding (the base fails
     * it); a receive's is withdrawn from the provider (so that it writes
     * no more into the buffer, as far as it still can stop) and failed
     * here.  Their contexts stay out until the endpoint goes. */
    for (p = ep->tctx_busy.next; p != &ep->tctx_busy; p = p->next) {
        gw_ofi_ctx_t *x = gw_container_of(p, gw_ofi_ctx_t, link);
        gw_request_t *req = x->req;
        x->req = NULL;
        if (!req || x->kind != GW_OFI_CTX_TRECV)
            continue;
        if (!ep->closing)
            fi_cancel(&ep->ep->fid, &x->fc);
        ofi_rq(req)->tctx = NULL;
        req->tl_flags &= (uint16_t)~TLF_TRECV;
        req_release(ep, req, 0);
        gw_ep_recv_done(B(ep), req, 0, req->value, st);
    }
    gw_list_for_each_safe(p, t, &ep->pending) {
        gw_request_t *req = gw_container_of(p, gw_request_t, tl_link);
        gw_list_del(p);
        req_release(ep, req, 0);
        if (req->op == GW_OP_RECV && (req->tl_flags & TLF_TRECV)) /* a tagged receive not posted yet */
            gw_ep_recv_done(B(ep), req, 0, req->value, st);
        else if (req->op == GW_OP_RECV) /* a rendezvous receive belongs to nobody else */
            gw_ep_recv_done(B(ep), req, (size_t)ofi_rq(req)->off, req->rtag, st);
    }
    for (uint32_t i = 0; i < ep->sends.n; i++)
        if (ep->sends.reqs[i])
            req_release(ep, ep->sends.reqs[i], 0);
    gw_op_table_clear(&ep->sends);
    gw_list_for_each_safe(p, t, &ep->rdv_recvs) {
        gw_request_t *req = gw_container_of(p, gw_request_t, tl_link);
        gw_list_del(p);
        req_release(ep, req, 0);
        gw_ep_recv_done(B(ep), req, (size_t)ofi_rq(req)->off, req->rtag, st);
    }
    gw_list_for_each_safe(p, t, &ep->ctlq) {
        gw_list_del(p);
        gw_op_state_put(oep_core(ep), gw_container_of(p, gw_ofi_ctl_t, link));
    }
    B(ep)->tl_posted = 0;
}

/* ---- cancel -------------------------------------------------------------------- */
/* gw_request_cancel(): what waits on the pending list (the provider had no
 * room for it) leaves it: a put's or get's pieces not yet posted, a
 * rendezvous send whose RTS was not sent.  Pieces already posted are the
 * provider's until their completions (libfabric cancels no RMA): the
 * request then ends with the last of them, GW_ERR_CANCELED. */
/* A tagged receive: one still on the pending list leaves it; one the
 * provider holds is withdrawn by fi_cancel, whose FI_ECANCELED completion
 * (or the message's, when one matched first) ends it; the provider reports
 * it at once (shm, rxm), so the queue is read here until it does (1 s at
 * most; past that it ends with a later pass). */
static gw_status_t trecv_cancel(gw_ofi_ep_t *ep, gw_request_t *req)
{
    if (req->tl_flags & TLF_PENDING) {
        gw_list_del(&req->tl_link);
        req->tl_flags &= (uint16_t)~(TLF_PENDING | TLF_TRECV);
        B(ep)->tl_posted--;
        req_release(ep, req, 1);
        gw_err(oep_core(ep), GW_ERR_CANCELED, "gw_recv(len=%zu, tag 0x%llx): canceled by gw_request_cancel() or "
               "gw_request_free() before a message matched",
               req->len, (unsigned long long)req->value);
        gw_ep_recv_done(B(ep), req, 0, req->value, GW_ERR_CANCELED);
        return GW_INPROGRESS;
    }
    gw_ofi_ctx_t *x = ofi_rq(req)->tctx;
    if (!x || x->canceled || gw_ep_failed(B(ep)))
        return GW_INPROGRESS;
    x->canceled = 1;
    int rc = (int)fi_cancel(&ep->ep->fid, &x->fc);
    if (rc != 0) /* (not found: its completion is on its way) */
        return GW_INPROGRESS;
    uint64_t until = gw_now_ns() + 1000000000ull;
    while (req->status == GW_INPROGRESS && !gw_ep_failed(B(ep)) && gw_now_ns() < until)
        gw_ofi_ep_progress(ep);
    return GW_INPROGRESS;
}

gw_status_t gw_ofi_tprobe(gw_tl_ep_t *e, uint64_t tag, uint64_t mask, size_t *len, uint64_t *rtag)
{
    gw_ofi_ep_t *ep = to_oep(e);
    if (gw_ep_failed(B(ep)))
        return GW_INPROGRESS; /* (the caller reports the failure) */
    gw_ofi_ctx_t *x = tctx_get(ep, GW_OFI_CTX_TPEEK, NULL);
    if (!x)
        return gw_err(oep_core(ep), GW_ERR_NOMEM, "gw_probe: out of memory for the provider's probe");
    struct fi_msg_tagged m = {.addr = FI_ADDR_UNSPEC, .tag = tag, .ignore = ~mask, .context = &x->fc};
    ep->peek_state = 0;
    int rc = (int)fi_trecvmsg(ep->ep, &m, FI_PEEK | FI_COMPLETION);
    if (rc != 0) {
        tctx_put(ep, x);
        return gw_err(oep_core(ep), GW_ERR_UNSUPPORTED, "gw_probe: the %s provider refused FI_PEEK: %s",
                      ep->oif->prov, gw_ofi_strerror(ep->oif, rc));
    }
    uint64_t until = gw_now_ns() + 1000000000ull;
    while (!ep->peek_state && !gw_ep_failed(B(ep)) && gw_now_ns() < until)
        gw_ofi_ep_progress(ep);
    if (ep->peek_state == 1) {
        *len = (size_t)ep->peek_len;
        *rtag = ep->peek_tag;
        return GW_OK;
    }
    if (ep->peek_state == 3)
        return gw_err(oep_core(ep), GW_ERR_SYSTEM, "gw_probe: the %s provider's FI_PEEK failed", ep->oif->prov);
    return GW_INPROGRESS; /* none (or no answer within the bound: its context comes back with it) */
}

gw_status_t gw_ofi_cancel(gw_tl_ep_t *e, gw_request_t *req)
{
    gw_ofi_ep_t *ep = to_oep(e);
    if (req->op == GW_OP_RECV && (req->tl_flags & TLF_TRECV))
        return trecv_cancel(ep, req);
    if (gw_ep_failed(B(ep)) || !(req->tl_flags & TLF_PENDING) || (req->tl_flags & TLF_POSTED) ||
        req->op == GW_OP_RECV || (req->op == GW_OP_BATCH && (ofi_rq(req)->ent || ofi_rq(req)->off)))
        /* (a list batch under way finishes: its cursor is past entries the
         * protocol layer counts as moved) */
        return GW_INPROGRESS;
    gw_list_del(&req->tl_link);
    req->tl_flags &= (uint16_t)~TLF_PENDING;
    if (req->pending) { /* pieces posted: the last completion ends it, cut short */
        if (req->first_err == GW_OK)
            req->first_err = GW_ERR_CANCELED;
        req->tl_flags |= TLF_POSTED;
        return GW_INPROGRESS;
    }
    if (req->tl_flags & TLF_RDV) { /* its RTS never went: the peer knows nothing of it */
        gw_op_table_free(&ep->sends, req);
        req->tl_flags &= (uint16_t)~TLF_RDV;
    }
    req->done = req->posted; /* pieces posted and completed before (none, mostly) */
    req_release(ep, req, 1); /* (nothing of it is posted: a bounce slot is free again) */
    return GW_OK;
}
