/* SPDX-License-Identifier: Apache-2.0 */
/* verbs_stage.c - GPU memory on the staging rung over verbs: moved in
 * chunks through registered pinned bounce buffers of a staging engine,
 * D2H/H2D overlapped with the RDMA; a staged remote region is served by its
 * owner on request (CT_SREQ -> RDMA READ/WRITE on its side -> CT_SACK with a
 * status), which checks key, access and bounds itself.
 */
#include "transport/base/batch.h"
#include "transport/base/region.h"
#include "mem/mem_copy.h"
#include "transport/verbs/verbs_stage.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    /* a batch (GW_OP_BATCH, "staged batches" below) */
    const gw_batch_t *bt;
    uint32_t bent;            /* next entry to cut into chunks, */
    uint64_t boff;            /* and the offset in it */
    gw_verbs_rc_entry_t **brc; /* local side not staged: per local region, a registration the peer
                                * may use (NULL where the region's own serves) */
} gw_verbs_sreq_t;

int gw_verbs_mem_staged(const gw_mem_t *m)
{
    return m && m->type != GW_MEM_HOST && !m->tl_reg[GW_TL_VERBS];
}

int gw_verbs_rkey_staged(const gw_rkey_t *k)
{
    return k && gw_verbs_rkey_of(k)->version == GW_VERBS_RKEY_STAGED; /* (parsed at gw_rkey_unpack) */
}

gw_status_t gw_verbs_stg_engine(gw_verbs_iface_t *vif, int device, int role, gw_verbs_stgeng_t **out)
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
struct ibv_mr *gw_verbs_stg_slot_mr(gw_verbs_iface_t *vif, gw_verbs_stgeng_t *e, gw_stage_slot_t *s)
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
void gw_verbs_stg_slot_drop(gw_verbs_stgeng_t *e, gw_stage_slot_t *s)
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
int gw_verbs_stg_applies(gw_verbs_ep_t *ep, gw_request_t *req)
{
    (void)ep;
    switch (req->op) {
    case GW_OP_PUT:
    case GW_OP_GET:
    case GW_OP_PUT_NOTIFY:
        if (gw_verbs_rkey_staged(req->rkey))
            return 1;
        /* small ones to an MR: a bounce slot and one synchronous copy (req_prep) */
        return gw_verbs_mem_staged(req->lmem) && req->len > GW_VERBS_EAGER_MAX;
    case GW_OP_RECV:
        return gw_verbs_mem_staged(req->lmem) || (verbs_rq(req)->rdv.opid & RTS_STAGED);
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
    gw_verbs_stg_slot_drop(e, s);
}

void gw_verbs_stg_free(gw_verbs_ep_t *ep, gw_verbs_sreq_t *sr, int touch_req)
{
    for (unsigned i = 0; i < GW_VERBS_STG_CHUNKS; i++) {
        gw_verbs_schunk_t *ch = &ep->schunk[i];
        if (ch->sr != sr)
            continue;
        if (ch->remote && ch->state == C_XFER && ep->stg_credits)
            ep->stg_credits--;
        /* (a chunk in C_XFER has a WR or a peer's access outstanding on its slot; so
         * has a batch chunk still posting its WRs) */
        stg_slot_drop_or_park(ep, sr->eng, ch->slot, ch->state == C_XFER || ch->wrs);
        ch->wrs = 0;
        ch->sr = NULL;
        ch->slot = NULL;
        ch->state = C_FREE;
        ch->gen++;
    }
    if (sr->rc)
        gw_verbs_rcache_put(ep->vif, sr->rc);
    if (sr->brc) {
        for (uint32_t i = 0; i < sr->bt->nlmem; i++)
            if (sr->brc[i])
                gw_verbs_rcache_put(ep->vif, sr->brc[i]);
        free(sr->brc);
    }
    gw_list_del(&sr->link);
    if (touch_req)
        verbs_rq(sr->req)->stg = NULL;
    free(sr);
}

/* The operation's data is in place (or failed): complete it, or for a
 * put_notify with no error go on to its notification. */
static void stg_finish(gw_verbs_ep_t *ep, gw_verbs_sreq_t *sr)
{
    gw_request_t *req = sr->req;
    gw_ep_base_t *base = ep->super.base;
    gw_status_t st = sr->err;
    if (st != GW_OK && sr->bt)
        gw_err(ep_core(ep), st, "verbs staged gw_xfer_batch %s(%u entries, %zu bytes) failed at byte %zu of the "
               "batch: %s", sr->dir ? "get" : "put", sr->bt->n, sr->total, sr->err_off, sr->why);
    else if (st != GW_OK)
        gw_err(ep_core(ep), st, "verbs staged %s(len=%zu, remote 0x%llx) failed at +%zu: %s",
               req->op == GW_OP_PUT ? "put" : req->op == GW_OP_GET ? "get"
               : req->op == GW_OP_PUT_NOTIFY ? "put_notify" : "rendezvous receive",
               sr->total, (unsigned long long)sr->raddr, sr->err_off, sr->why);
    if ((req->op == GW_OP_PUT_NOTIFY || (sr->bt && sr->bt->notify != GW_NOTIFY_NONE)) && st == GW_OK) {
        req->tl_flags |= TLF_DATA; /* gw_verbs_stg_progress posts the notification */
        return;
    }
    ep->stg_ops++;
    ep->stg_bytes += sr->acked;
    gw_verbs_stg_free(ep, sr, 1);
    if (req->op == GW_OP_RECV) {
        uint64_t opid = (verbs_rq(req)->rdv.opid & ~RTS_STAGED);
        size_t mlen = (size_t)verbs_rq(req)->rdv.mlen;
        gw_verbs_req_release(ep, req);
        gw_verbs_rdv_recv_forget(ep, req);
        gw_verbs_ctrl_queue(ep, CT_FIN, 0, opid, 0); /* the sender may go on either way */
        gw_ep_recv_done(base, req, mlen, req->rtag, st);
        return;
    }
    req->length = st != GW_OK ? 0 : req->op == GW_OP_BATCH ? (size_t)req->batch->total : req->len;
    gw_verbs_req_release(ep, req);
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

/* ---- staged batches: the pieces of a chunk ----------------------------------------------
 * A batch touching staged GPU memory (GW_OP_BATCH; gw_verbs_stg_batch_start)
 * is an sreq whose bytes are its entries one after the other: chunks are
 * cut from an entry cursor (sr->bent, sr->boff), at most a slot (or
 * GW_MAX_STG_HOST_CHUNK) and SBLIST_MAX pieces each, and with a staged
 * remote side one remote region each.
 *   local staged: every chunk has a slot; a put gathers the chunk's GPU
 *     pieces into it with one launch of the copy kernel (host pieces by
 *     memcpy), a get scatters them out of it the same way once the data is
 *     in (gw_staging_gather/scatter: copy-engine copies, one per piece,
 *     where no kernel module loads).
 *   remote registered: one RDMA WRITE (put) or READ (get) per piece between
 *     the slot and the peer's region, posted on QP 0 as the queue takes
 *     them (the chunk's posting cursor), done when all have completed.
 *   remote staged: one chunk request with the piece list (SREQ_LIST); the
 *     owner checks every piece (gw_region_check), moves the bytes between
 *     our buffer (the slot, or our registered memory when the local side is
 *     not staged) and its own slot by RDMA, and scatters (put) or gathers
 *     (get) its GPU side by the kernel, then acknowledges with a status and
 *     the refused piece. */
typedef struct vbs_piece {
    uint32_t i;            /* entry */
    uint64_t laddr, raddr, len;
    uint32_t lkey, lrkey;  /* local side not staged: its keys */
} vbs_piece_t;

/* The local registration of entry region lreg that the peer may use (local side not staged). */
static const gw_verbs_reg_t *vbs_lreg(const gw_verbs_sreq_t *sr, uint32_t lreg)
{
    return sr->brc && sr->brc[lreg] ? sr->brc[lreg]->reg : sr->bt->lmem[lreg]->tl_reg[GW_TL_VERBS];
}

/* The next piece from cursor (*ei, *eo), at most max bytes, and for a local
 * side not staged within one MR piece; advances the cursor.  Its length (0:
 * no local key). */
static uint64_t vbs_piece(const gw_verbs_sreq_t *sr, uint32_t *ei, uint64_t *eo, uint64_t max, vbs_piece_t *pc)
{
    const gw_batch_ent_t *e = &sr->bt->ent[*ei];
    uint64_t n = GW_MIN(e->len - *eo, max);
    pc->i = *ei;
    pc->laddr = e->laddr + *eo;
    pc->raddr = e->raddr + *eo;
    pc->lkey = pc->lrkey = 0;
    if (!sr->lstaged) {
        uint64_t left = 0;
        const gw_verbs_reg_t *reg = vbs_lreg(sr, e->lreg);
        if (!reg || gw_verbs_reg_piece(reg, pc->laddr, &pc->lkey, &pc->lrkey, &left) != 0 || !left)
            return 0;
        n = GW_MIN(n, left);
    }
    pc->len = n;
    *eo += n;
    if (*eo == e->len) {
        (*ei)++;
        *eo = 0;
    }
    return n;
}

/* Gathers a put chunk's local pieces into its slot (scatter 0), or scatters
 * a get chunk's out of it (1): GPU pieces by one kernel launch, host pieces
 * by memcpy. */
static gw_status_t vbs_slot_copy(gw_verbs_sreq_t *sr, gw_verbs_schunk_t *ch, int scatter)
{
    gw_stage_blk_t blk[SBLIST_MAX];
    unsigned nb = 0;
    uint32_t i = ch->e0;
    uint64_t o = ch->eoff0, s = 0;
    uint8_t *host = ch->slot->host;
    while (s < ch->len) {
        vbs_piece_t pc;
        if (!vbs_piece(sr, &i, &o, ch->len - s, &pc) || nb == SBLIST_MAX)
            return gw_err(sr->req->core, GW_ERR_INVALID, "verbs staged batch: chunk of %u bytes cut apart", ch->len);
        const gw_mem_t *m = sr->bt->lmem[sr->bt->ent[pc.i].lreg];
        if (m->type == GW_MEM_CUDA)
            blk[nb++] = (gw_stage_blk_t){pc.laddr, s, pc.len};
        else if (scatter)
            memcpy((void *)(uintptr_t)pc.laddr, host + s, pc.len);
        else
            memcpy(host + s, (const void *)(uintptr_t)pc.laddr, pc.len);
        s += pc.len;
    }
    return scatter ? gw_staging_scatter(sr->eng->st, ch->slot, blk, nb) : gw_staging_gather(sr->eng->st, ch->slot, blk, nb);
}

/* Which entry of a chunk holds piece k (as the chunk request listed them),
 * for messages; *raddr its remote address. */
static uint32_t vbs_piece_entry(const gw_verbs_sreq_t *sr, const gw_verbs_schunk_t *ch, uint64_t k, uint64_t *raddr)
{
    uint32_t i = ch->e0;
    uint64_t o = ch->eoff0, s = 0;
    vbs_piece_t pc = {ch->e0, 0, 0, 0, 0, 0};
    for (uint64_t n = 0; n <= k && s < ch->len; n++) {
        if (!vbs_piece(sr, &i, &o, ch->len - s, &pc))
            break;
        s += pc.len;
    }
    *raddr = pc.raddr;
    return pc.i;
}

/* Posts what the queue takes of a batch chunk's WRITEs or READs to a
 * registered peer region: 1 when all are posted (C_XFER), 0 not yet. */
static int vbs_chunk_wrs(gw_verbs_ep_t *ep, batch_t *b, unsigned ci)
{
    gw_verbs_schunk_t *ch = &ep->schunk[ci];
    gw_verbs_sreq_t *sr = ch->sr;
    const gw_batch_t *bt = sr->bt;
    struct ibv_mr *mr = gw_verbs_stg_slot_mr(ep->vif, sr->eng, ch->slot);
    uint64_t maxmsg = ep->peer.max_msg ? GW_MIN(ep->peer.max_msg, ep->local.max_msg) : UINT64_MAX;
    while (ch->pdone < ch->len) {
        if (!qp_room(ep, b, 0))
            return 0;
        const gw_batch_ent_t *e = &bt->ent[ch->pe];
        uint64_t n = GW_MIN(e->len - ch->poff, (uint64_t)(ch->len - ch->pdone));
        uint64_t raddr = e->raddr + ch->poff, rleft = 0;
        uint32_t rkey = 0;
        if (!mr || gw_verbs_key_piece(gw_verbs_rkey_of(&bt->rkey[e->rreg]), raddr, &rkey, &rleft) != 0) {
            char why[160];
            snprintf(why, sizeof(why), "entry %u (remote 0x%llx): %s", ch->pe, (unsigned long long)raddr,
                     mr ? "the remote key carries no usable verbs part" : "no MR for the bounce buffer");
            stg_fail(sr, ch->off + ch->pdone, mr ? GW_ERR_INVALID_KEY : GW_ERR_VERBS, why);
            ch->state = C_XFER;
            if (!ch->wrs)
                stg_chunk_done(ep, ch);
            return 1;
        }
        n = GW_MIN(GW_MIN(n, rleft), maxmsg);
        struct ibv_send_wr *w = gw_verbs_wr_add(ep, b, 0, NULL, sr->dir ? WR_SGET : WR_SPUT, -1, (uint32_t)n);
        gw_verbs_ring_newest(&ep->qps[0])->aux = ci + 1;
        w->opcode = sr->dir ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE;
        w->wr.rdma.remote_addr = raddr;
        w->wr.rdma.rkey = rkey;
        w->num_sge = 1;
        w->sg_list->addr = (uint64_t)(uintptr_t)ch->slot->host + ch->pdone;
        w->sg_list->length = (uint32_t)n;
        w->sg_list->lkey = mr->lkey;
        ch->wrs++;
        ch->pdone += (uint32_t)n;
        ch->poff += n;
        if (ch->poff == e->len) {
            ch->pe++;
            ch->poff = 0;
        }
    }
    ch->state = C_XFER;
    return 1;
}

/* The chunk request of a batch chunk to a staged owner, with its piece
 * list: 1 posted, 0 no room now. */
static int vbs_chunk_sreq(gw_verbs_ep_t *ep, batch_t *b, unsigned ci)
{
    gw_verbs_schunk_t *ch = &ep->schunk[ci];
    gw_verbs_sreq_t *sr = ch->sr;
    const gw_batch_t *bt = sr->bt;
    if (!qp_room(ep, b, 0) || ep->stg_credits >= GW_VERBS_STG_CREDITS)
        return 0;
    struct ibv_mr *mr = ch->slot ? gw_verbs_stg_slot_mr(ep->vif, sr->eng, ch->slot) : NULL;
    if (ch->slot && !mr) {
        stg_fail(sr, ch->off, GW_ERR_VERBS, ep_core(ep)->errbuf);
        stg_chunk_done(ep, ch);
        return 1;
    }
    int s = slot_get(ep);
    if (s < 0)
        return 0;
    uint8_t *p = slot_ptr(ep, s);
    memset(p, 0, SREQ_BYTES);
    uint32_t i = ch->e0, np = 0;
    uint64_t o = ch->eoff0, done = 0;
    while (done < ch->len && np < SBLIST_MAX) {
        vbs_piece_t pc;
        if (!vbs_piece(sr, &i, &o, ch->len - done, &pc))
            break;
        uint8_t *q = p + SREQ_BYTES + (size_t)np * SBLIST_PIECE;
        gw_put_u64(q, pc.raddr);
        gw_put_u64(q + 8, ch->slot ? (uint64_t)(uintptr_t)ch->slot->host + done : pc.laddr);
        gw_put_u32(q + 16, (uint32_t)pc.len);
        gw_put_u32(q + 20, ch->slot ? mr->rkey : pc.lrkey);
        done += pc.len;
        np++;
    }
    if (done != ch->len) { /* (the chunk was cut from the same pieces) */
        slot_put(ep, s);
        stg_fail(sr, ch->off, GW_ERR_INVALID, "a staged batch chunk no longer matches its pieces");
        stg_chunk_done(ep, ch);
        return 1;
    }
    p[0] = CT_SREQ;
    p[1] = sr->dir;
    p[3] = SREQ_LIST;
    gw_put_u32(p + 4, (uint32_t)ci | ((uint32_t)ch->gen << 8));
    gw_put_u64(p + 8, bt->rkey[bt->ent[ch->e0].rreg].id);
    gw_put_u64(p + 16, gw_get_u64(p + SREQ_BYTES));
    gw_put_u32(p + 36, ch->len);
    gw_put_u32(p + 40, SBLIST_MAGIC);
    gw_put_u16(p + 44, SBLIST_VERSION);
    gw_put_u16(p + 46, (uint16_t)np);
    gw_verbs_post_sendmsg(ep, b, NULL, s, SREQ_BYTES + np * SBLIST_PIECE);
    ch->remote = 1;
    ch->state = C_XFER;
    ep->stg_credits++;
    return 1;
}

/* Data of a get chunk arrived in our buffer: H2D when it is a slot. */
static void stg_chunk_arrived(gw_verbs_ep_t *ep, gw_verbs_schunk_t *ch)
{
    gw_verbs_sreq_t *sr = ch->sr;
    if (sr->dir == 1 && sr->lstaged && sr->err == GW_OK) {
        gw_status_t st = sr->bt ? vbs_slot_copy(sr, ch, 1)
                                : gw_staging_h2d(sr->eng->st, ch->slot, (uint8_t *)sr->req->buf + ch->off, ch->len);
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
        struct ibv_mr *mr = gw_verbs_stg_slot_mr(ep->vif, sr->eng, ch->slot);
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
    if (sr->bt)
        return sr->rstaged ? vbs_chunk_sreq(ep, b, ci) : vbs_chunk_wrs(ep, b, ci);
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
        if (gw_verbs_remote_piece(sr->req, sr->raddr + ch->off, &rkey, &rleft) != 0) {
            stg_fail(sr, ch->off, GW_ERR_INVALID_KEY, "the remote key carries no usable verbs part");
            stg_chunk_done(ep, ch);
            return 1;
        }
        int kind = sr->dir ? WR_SGET : WR_SPUT;
        struct ibv_send_wr *w = gw_verbs_wr_add(ep, b, 0, NULL, kind, -1, ch->len);
        gw_verbs_ring_newest(&ep->qps[0])->aux = ci + 1;
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
    gw_verbs_post_sendmsg(ep, b, NULL, s, SREQ_BYTES);
    ch->remote = 1;
    ch->state = C_XFER;
    ep->stg_credits++;
    return 1;
}

/* A small put or get to a staged owner: the data rides in the chunk request
 * (put) or in its acknowledgement (get); the owner copies it with one
 * synchronous copy, gw_staging_copy_sync (no bounce slot, no READ/WRITE round). */
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
    gw_status_t st = sr->dir ? GW_OK
                             : gw_mem_copy_from(sr->req->core, sr->req->lmem, p + SREQ_BYTES, sr->req->buf, sr->total);
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
    gw_verbs_post_sendmsg(ep, b, NULL, s, (uint32_t)(SREQ_BYTES + (sr->dir ? 0 : sr->total)));
    ep->stg_credits++;
    sr->next = sr->total;
    sr->inflight++;
}

/* Starts new chunks of sr while slots, credits and queue room allow. */
/* A free chunk record and, with a staged local side, a bounce slot with its
 * MR for sr's next chunk: 1, or 0 (none free now, or sr failed). */
static int stg_chunk_claim(gw_verbs_ep_t *ep, gw_verbs_sreq_t *sr, unsigned *ci, gw_stage_slot_t **slot)
{
    for (*ci = 0; *ci < GW_VERBS_STG_CHUNKS && ep->schunk[*ci].sr; (*ci)++)
        ;
    if (*ci == GW_VERBS_STG_CHUNKS)
        return 0;
    *slot = NULL;
    if (sr->lstaged) {
        *slot = gw_staging_acquire(sr->eng->st);
        if (!*slot)
            return 0;
        if (!gw_verbs_stg_slot_mr(ep->vif, sr->eng, *slot)) {
            gw_staging_release(sr->eng->st, *slot);
            *slot = NULL;
            stg_fail(sr, sr->next, GW_ERR_VERBS, ep_core(ep)->errbuf);
            return 0;
        }
    }
    return 1;
}

/* Takes chunk ci for the next n bytes of sr. */
static gw_verbs_schunk_t *stg_chunk_take(gw_verbs_ep_t *ep, gw_verbs_sreq_t *sr, unsigned ci, gw_stage_slot_t *slot,
                                         uint64_t n)
{
    gw_verbs_schunk_t *ch = &ep->schunk[ci];
    ch->sr = sr;
    ep->stg_live = 1;
    ch->slot = slot;
    ch->off = sr->next;
    ch->len = (uint32_t)n;
    ch->remote = 0;
    sr->next += n;
    sr->inflight++;
    return ch;
}

/* Cuts and starts new chunks of a staged batch while slots, credits and queue room allow. */
static void vbs_drive(gw_verbs_ep_t *ep, batch_t *b, gw_verbs_sreq_t *sr)
{
    const gw_batch_t *bt = sr->bt;
    while (sr->err == GW_OK && sr->bent < bt->n) {
        if (!qp_room(ep, b, 0) || (sr->rstaged && (ep->stg_credits >= GW_VERBS_STG_CREDITS || !ep->nsfree)))
            return;
        unsigned ci;
        gw_stage_slot_t *slot = NULL;
        if (!stg_chunk_claim(ep, sr, &ci, &slot))
            return;
        uint64_t cap = sr->lstaged ? gw_staging_chunk(sr->eng->st) : GW_MAX_STG_HOST_CHUNK;
        uint32_t i = sr->bent, rreg0 = bt->ent[sr->bent].rreg;
        uint64_t o = sr->boff, n = 0;
        unsigned np = 0;
        while (i < bt->n && n < cap && np < SBLIST_MAX && (!sr->rstaged || bt->ent[i].rreg == rreg0)) {
            vbs_piece_t pc;
            uint64_t got = vbs_piece(sr, &i, &o, cap - n, &pc);
            if (!got)
                break;
            n += got;
            np++;
        }
        if (n == 0) {
            char why[160];
            snprintf(why, sizeof(why), "entry %u (local %p): no local registration covers it", sr->bent,
                     (void *)(uintptr_t)(bt->ent[sr->bent].laddr + sr->boff));
            if (slot)
                gw_staging_release(sr->eng->st, slot);
            stg_fail(sr, sr->next, GW_ERR_INVALID_KEY, why);
            return;
        }
        gw_verbs_schunk_t *ch = stg_chunk_take(ep, sr, ci, slot, n);
        ch->e0 = ch->pe = sr->bent;
        ch->eoff0 = ch->poff = sr->boff;
        ch->pdone = ch->wrs = 0;
        sr->bent = i;
        sr->boff = o;
        if (sr->dir == 0 && sr->lstaged) {
            gw_status_t st = vbs_slot_copy(sr, ch, 0);
            if (st != GW_OK) {
                stg_fail(sr, ch->off, st, ep_core(ep)->errbuf);
                stg_chunk_done(ep, ch);
                return;
            }
            ch->state = C_D2H;
            continue;
        }
        ch->state = C_READY;
        if (!stg_chunk_xfer(ep, b, ci) || ch->state == C_READY)
            return; /* stays C_READY: posted on a later pass */
    }
}

static void stg_drive(gw_verbs_ep_t *ep, batch_t *b, gw_verbs_sreq_t *sr)
{
    if (sr->bt) {
        vbs_drive(ep, b, sr);
        return;
    }
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
            if (gw_verbs_remote_piece(sr->req, sr->raddr + sr->next, &rkey, &rleft) == 0)
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
        gw_stage_slot_t *slot = NULL;
        if (!stg_chunk_claim(ep, sr, &ci, &slot))
            return;
        gw_verbs_schunk_t *ch = stg_chunk_take(ep, sr, ci, slot, n);
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
int gw_verbs_stg_start(gw_verbs_ep_t *ep, batch_t *b, gw_request_t *req)
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
    sr->lstaged = (uint8_t)gw_verbs_mem_staged(req->lmem);
    if (sr->is_recv) {
        sr->total = GW_MIN(req->len, (size_t)verbs_rq(req)->rdv.mlen);
        sr->raddr = verbs_rq(req)->rdv.raddr;
        sr->rstaged = (verbs_rq(req)->rdv.opid & RTS_STAGED) != 0;
        sr->ident = (verbs_rq(req)->rdv.opid & ~RTS_STAGED);
        sr->by_rdv = 1;
    } else {
        sr->total = req->len;
        sr->raddr = req->raddr;
        sr->rstaged = (uint8_t)gw_verbs_rkey_staged(req->rkey);
        sr->ident = req->rkey->id;
    }
    if (sr->lstaged && (st = gw_verbs_stg_engine(ep->vif, req->lmem->cuda_device, 0, &sr->eng)) != GW_OK)
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
    verbs_rq(req)->stg = sr;
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
        gw_verbs_rdv_recv_forget(ep, req);
        gw_verbs_ctrl_queue(ep, CT_FIN, 0, (verbs_rq(req)->rdv.opid & ~RTS_STAGED), 0);
        gw_ep_recv_done(ep->super.base, req, (size_t)verbs_rq(req)->rdv.mlen, req->rtag, st);
    } else {
        gw_ep_op_done(ep->super.base, req, st);
    }
    return 1;
}

/* gw_verbs_batch_post's staged branch: a batch with staged GPU memory on
 * either side; the caller checked that every local GPU region is on one
 * device (the engine's) and that the remote keys are all staged or none.
 * 1 = off the pending queue. */
int gw_verbs_stg_batch_start(gw_verbs_ep_t *ep, batch_t *b, gw_request_t *req)
{
    const gw_batch_t *bt = req->batch;
    gw_verbs_sreq_t *sr = calloc(1, sizeof(*sr));
    gw_status_t st = GW_OK;
    if (!sr) {
        st = gw_err(ep_core(ep), GW_ERR_NOMEM, "verbs staged batch: out of memory");
        goto fail;
    }
    sr->req = req;
    sr->bt = bt;
    sr->dir = bt->get ? 1 : 0;
    sr->total = (size_t)bt->total;
    sr->raddr = bt->n ? bt->ent[0].raddr : 0;
    for (uint32_t i = 0; i < bt->nlmem; i++)
        sr->lstaged |= (uint8_t)gw_verbs_mem_staged(bt->lmem[i]);
    sr->rstaged = bt->nrkey && gw_verbs_rkey_staged(&bt->rkey[0]);
    if (sr->lstaged) {
        int dev = -1;
        for (uint32_t i = 0; i < bt->nlmem && dev < 0; i++)
            if (bt->lmem[i]->type == GW_MEM_CUDA)
                dev = bt->lmem[i]->cuda_device;
        if ((st = gw_verbs_stg_engine(ep->vif, dev, 0, &sr->eng)) != GW_OK)
            goto fail;
    } else {
        /* the owner reads (put) or writes (get) our memory: a registration
         * with that access for each local region whose own lacks it */
        int need = sr->dir ? IBV_ACCESS_REMOTE_WRITE : IBV_ACCESS_REMOTE_READ;
        unsigned gneed = sr->dir ? GW_ACCESS_REMOTE_WRITE : GW_ACCESS_REMOTE_READ;
        sr->brc = calloc(bt->nlmem ? bt->nlmem : 1, sizeof(*sr->brc));
        if (!sr->brc) {
            st = gw_err(ep_core(ep), GW_ERR_NOMEM, "verbs staged batch: out of memory");
            goto fail;
        }
        for (uint32_t i = 0; i < bt->nlmem; i++) {
            const gw_mem_t *m = bt->lmem[i];
            if (m->tl_reg[GW_TL_VERBS] && (m->access & gneed))
                continue;
            if ((st = gw_verbs_rcache_get(ep->vif, m->addr, m->len, IBV_ACCESS_LOCAL_WRITE | need, &sr->brc[i])) !=
                GW_OK) {
                sr->brc[i] = NULL;
                goto fail;
            }
        }
    }
    verbs_rq(req)->stg = sr;
    req->tl_flags |= TLF_PREP | TLF_STAGED;
    gw_list_push_back(&ep->stg_reqs, &sr->link);
    ep->stg_live = 1;
    stg_drive(ep, b, sr);
    stg_maybe_finish(ep, sr);
    return 1;

fail:
    if (sr && sr->brc) {
        for (uint32_t i = 0; i < bt->nlmem; i++)
            if (sr->brc[i])
                gw_verbs_rcache_put(ep->vif, sr->brc[i]);
        free(sr->brc);
    }
    free(sr);
    gw_ep_op_done(ep->super.base, req, st);
    return 1;
}

/* A staged put_notify whose data is in place: the notification on QP 0 once
 * no older staged operation runs and the other QPs are drained. */
static void stg_notify(gw_verbs_ep_t *ep, batch_t *b, gw_verbs_sreq_t *sr)
{
    if (ep->stg_reqs.next != &sr->link)
        return;
    if (!gw_verbs_others_drained(ep, b))
        return;
    int s = msg_slot(ep, b);
    if (s < 0)
        return;
    gw_request_t *req = sr->req;
    ep->stg_ops++;
    ep->stg_bytes += sr->acked;
    gw_verbs_stg_free(ep, sr, 1);
    if (req->op == GW_OP_BATCH)
        gw_verbs_hdr_fill(slot_ptr(ep, s), CT_NOTIFY, req->batch->notify == GW_NOTIFY_COUNTED ? 1 : 0,
                          req->batch->value, 0, 0, 0, 0);
    else
        gw_verbs_hdr_fill(slot_ptr(ep, s), CT_NOTIFY, 0, req->value, 0, 0, 0, 0);
    req->tl_flags |= TLF_ALLPOSTED;
    gw_verbs_post_sendmsg(ep, b, req, s, GW_VERBS_HDR); /* completes in gw_verbs_req_maybe_done */
}

/* A WR of a staged chunk completed (retire). */
void gw_verbs_stg_chunk_wr_done(gw_verbs_ep_t *ep, uint32_t aux)
{
    if (aux == 0 || aux > GW_VERBS_STG_CHUNKS)
        return;
    gw_verbs_schunk_t *ch = &ep->schunk[aux - 1];
    if (ch->sr && ch->sr->bt && !ch->remote) { /* one of a batch chunk's WRs */
        if (ch->wrs)
            ch->wrs--;
        if (ch->state == C_XFER && !ch->wrs) {
            if (ch->sr->err != GW_OK)
                stg_chunk_done(ep, ch);
            else
                stg_chunk_arrived(ep, ch);
        }
        return;
    }
    if (!ch->sr || ch->state != C_XFER || ch->remote)
        return;
    stg_chunk_arrived(ep, ch);
}

/* CT_SACK: the owner moved one chunk (or refused it). */
void gw_verbs_stg_on_sack(gw_verbs_ep_t *ep, uint32_t cookie, gw_status_t st, uint64_t bad, const uint8_t *data,
                         uint32_t n)
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
    if (st != GW_OK && ch->sr->bt) {
        char why[200];
        uint64_t raddr = 0;
        if (bad) {
            uint32_t ei = vbs_piece_entry(ch->sr, ch, bad - 1, &raddr);
            snprintf(why, sizeof(why), "the owner of the staged GPU memory refused entry %u (remote 0x%llx): %s (%s)",
                     ei, (unsigned long long)raddr, gw_status_name(st), gw_status_str(st));
        } else {
            snprintf(why, sizeof(why), "the owner of the staged GPU memory refused the chunk from entry %u: %s (%s)",
                     ch->e0, gw_status_name(st), gw_status_str(st));
        }
        stg_fail(ch->sr, ch->off, st, why);
    } else if (st != GW_OK) {
        char why[160];
        snprintf(why, sizeof(why), "the owner of the staged GPU memory refused the chunk: %s (%s)",
                 gw_status_name(st), gw_status_str(st));
        stg_fail(ch->sr, ch->off, st, why);
    } else if (eager && ch->sr->dir) { /* a small get: the data is in the acknowledgement */
        if (n != ch->len) {
            gw_verbs_ep_die(ep, GW_ERR_PROTOCOL, "verbs: staged get acknowledgement from %s carries %u of %u bytes",
                   ep->peer.dev, n, ch->len);
            return;
        }
        gw_verbs_sreq_t *sr = ch->sr;
        st = gw_mem_copy_to(sr->req->core, sr->req->lmem, (uint8_t *)sr->req->buf + ch->off, data, n);
        if (st != GW_OK)
            stg_fail(sr, ch->off, st, ep_core(ep)->errbuf);
    }
    if (eager)
        stg_chunk_done(ep, ch);
    else
        stg_chunk_arrived(ep, ch);
}

/* Called from gw_verbs_post_pending: copies that finished, chunks to post, jobs to
 * advance, notifications due.  Returns nonzero while staged work runs. */
int gw_verbs_stg_progress(gw_verbs_ep_t *ep, batch_t *b)
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
        if (vep_failed(ep))
            return busy;
    }
    for (unsigned ji = 0; ji < GW_VERBS_STG_CREDITS; ji++) {
        if (!ep->sjob[ji].state)
            continue;
        busy = 1;
        gw_verbs_stg_job_step(ep, b, ji);
    }
    if (!busy)
        ep->stg_live = 0;
    return busy;
}

/* 1 while staged work waits for something no fd announces: a CUDA copy in
 * flight, or a step that a copy's end unblocks.  Waits for the network
 * (completions, the peer's answers) are woken by the CQ like any other. */
int gw_verbs_stg_busy(const gw_verbs_ep_t *ep)
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
void gw_verbs_stg_forget_all(gw_verbs_ep_t *ep, int own)
{
    gw_list_t *p, *t;
    gw_list_for_each_safe(p, t, &ep->stg_reqs) {
        gw_verbs_sreq_t *sr = gw_container_of(p, gw_verbs_sreq_t, link);
        gw_verbs_stg_free(ep, sr, own || sr->is_recv);
    }
    for (unsigned ji = 0; ji < GW_VERBS_STG_CREDITS; ji++) {
        gw_verbs_sjob_t *j = &ep->sjob[ji];
        if (!j->state)
            continue;
        stg_slot_drop_or_park(ep, j->eng, j->slot, j->state == J_READ || j->state == J_WRITE);
        if (j->mem)
            j->mem->incoming -= j->dir == 0;
        free(j->list);
        memset(j, 0, sizeof(*j));
    }
    ep->stg_credits = 0;
}

void gw_verbs_stage_ep_fini(gw_verbs_ep_t *ep)
{
    if (ep->stg_reqs.next) /* (NULL when prepare failed before the lists were set up) */
        gw_verbs_stg_forget_all(ep, 0);
    /* the queue pairs are gone: no NIC access to parked slots is left */
    for (unsigned i = 0; i < ep->stg_nzombie; i++)
        gw_verbs_stg_slot_drop(ep->stg_zombie[i].eng, ep->stg_zombie[i].slot);
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
