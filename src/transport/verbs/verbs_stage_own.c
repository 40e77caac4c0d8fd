/* SPDX-License-Identifier: Apache-2.0 */
/* verbs_stage_own.c - the owner's half of the staging rung over verbs
 * (verbs_stage.c has the initiator's and the design): the peer's chunk
 * requests on staged GPU memory of this side, each a job that checks the
 * region (known, staged, access, bounds; a piece list piece by piece),
 * moves the bytes between its slot and the peer's buffer by RDMA and
 * between the slot and GPU memory by the staging engine, and answers with
 * CT_SACK and a status. */
#include "transport/base/batch.h"
#include "transport/base/region.h"
#include "mem/mem_copy.h"
#include "transport/verbs/verbs_stage.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- owner (target) side ------------------------------------------------------------------ */
static void job_finish(gw_verbs_ep_t *ep, gw_verbs_sjob_t *j)
{
    if (j->slot) {
        gw_staging_release(j->eng->st, j->slot);
        j->slot = NULL;
    }
    if (j->mem)
        j->mem->incoming -= j->dir == 0;
    gw_verbs_ctrl_queue(ep, CT_SACK, (uint32_t)j->status, j->cookie, j->bad);
    ep->stg_served++;
    free(j->list);
    memset(j, 0, sizeof(*j));
}

/* The copy engine's step on the job's slot: 1 when it finished well (the
 * job goes on), 0 when it is still running or the job failed (then the job
 * is finished here and answered with its status). */
static int job_slot_done(gw_verbs_ep_t *ep, gw_verbs_sjob_t *j)
{
    int t = gw_staging_test(j->eng->st, j->slot);
    if (t == 0)
        return 0;
    if (t < 0 && j->status == GW_OK)
        j->status = (gw_status_t)t;
    if (j->status != GW_OK) {
        job_finish(ep, j);
        return 0;
    }
    return 1;
}

/* The job's piece is through: its slot goes back and the job moves on to
 * the next piece (1), or it is finished here, all moved or failed (0). */
static int job_piece_done(gw_verbs_ep_t *ep, gw_verbs_sjob_t *j)
{
    gw_staging_release(j->eng->st, j->slot);
    j->slot = NULL;
    j->done += j->piece;
    if (j->done >= j->len || j->status != GW_OK) {
        job_finish(ep, j);
        return 0;
    }
    j->state = J_SLOT;
    return 1;
}

/* ---- owner side of a chunk request with a piece list (a staged batch's) ---- */
gw_status_t gw_verbs_sblist_check(const uint8_t *p, uint32_t bytes, uint32_t *n, char *why, size_t whylen)
{
    if (bytes < SREQ_BYTES) {
        snprintf(why, whylen, "%u-byte chunk request (at least %d)", bytes, SREQ_BYTES);
        return GW_ERR_PROTOCOL;
    }
    if (gw_get_u32(p + 40) != SBLIST_MAGIC) {
        snprintf(why, whylen, "piece list magic 0x%08x, not 0x%08x", gw_get_u32(p + 40), SBLIST_MAGIC);
        return GW_ERR_PROTOCOL;
    }
    if (gw_get_u16(p + 44) != SBLIST_VERSION) {
        snprintf(why, whylen, "piece list version %u (this side speaks %d)", gw_get_u16(p + 44), SBLIST_VERSION);
        return GW_ERR_PROTOCOL;
    }
    uint32_t cnt = gw_get_u16(p + 46);
    if (cnt == 0 || cnt > SBLIST_MAX) {
        snprintf(why, whylen, "piece list of %u pieces (1 to %d)", cnt, SBLIST_MAX);
        return GW_ERR_PROTOCOL;
    }
    if ((uint64_t)bytes < SREQ_BYTES + (uint64_t)cnt * SBLIST_PIECE) {
        snprintf(why, whylen, "piece list of %u pieces in a %u-byte request (%u needed)", cnt, bytes,
                 (unsigned)(SREQ_BYTES + cnt * SBLIST_PIECE));
        return GW_ERR_PROTOCOL;
    }
    uint64_t sum = 0;
    for (uint32_t k = 0; k < cnt; k++) {
        const uint8_t *q = p + SREQ_BYTES + (size_t)k * SBLIST_PIECE;
        uint32_t len = gw_get_u32(q + 16);
        if (len == 0 || gw_get_u64(q) + len < gw_get_u64(q) || gw_get_u64(q + 8) + len < gw_get_u64(q + 8)) {
            snprintf(why, whylen, "piece %u of the list: %u bytes at 0x%llx / 0x%llx (empty or wrapping)", k, len,
                     (unsigned long long)gw_get_u64(q), (unsigned long long)gw_get_u64(q + 8));
            return GW_ERR_PROTOCOL;
        }
        sum += len;
    }
    if (sum != gw_get_u32(p + 36)) {
        snprintf(why, whylen, "piece list of %llu bytes in a request of %u", (unsigned long long)sum,
                 gw_get_u32(p + 36));
        return GW_ERR_PROTOCOL;
    }
    *n = cnt;
    return GW_OK;
}

/* Checks every piece of a list job against the region (one region: the
 * request's ident); on a refusal j->bad names the piece. */
static gw_status_t lj_check(gw_verbs_ep_t *ep, gw_verbs_sjob_t *j)
{
    gw_mem_t *m = NULL;
    for (uint32_t k = 0; k < j->nlist; k++) {
        gw_status_t st = gw_region_check(ep_core(ep), j->ident, j->list[k].taddr, j->list[k].len,
                                         j->dir ? GW_ACCESS_REMOTE_READ : GW_ACCESS_REMOTE_WRITE, &m);
        if (st == GW_OK && !gw_verbs_mem_staged(m))
            st = GW_ERR_INVALID_KEY;
        if (st != GW_OK) {
            j->bad = k + 1;
            return st;
        }
    }
    j->mem = m;
    j->device = m->cuda_device;
    m->incoming += j->dir == 0;
    return GW_OK;
}

/* The next piece of a list job from cursor (*pi, *po), at most max bytes. */
static uint32_t lj_take(const gw_verbs_sjob_t *j, uint32_t *pi, uint32_t *po, uint32_t max, uint64_t *taddr,
                        uint64_t *iaddr, uint32_t *irkey)
{
    const gw_verbs_lpiece_t *e = &j->list[*pi];
    uint32_t n = GW_MIN(e->len - *po, max);
    *taddr = e->taddr + *po;
    *iaddr = e->iaddr + *po;
    *irkey = e->irkey;
    *po += n;
    if (*po == e->len) {
        (*pi)++;
        *po = 0;
    }
    return n;
}

/* Scatters the pass out of the slot into our GPU memory (1), or gathers it in (0). */
static gw_status_t lj_copy(gw_verbs_sjob_t *j, int scatter)
{
    gw_stage_blk_t blk[SBLIST_MAX];
    unsigned nb = 0;
    uint32_t pi = j->pi0, po = j->po0, s = 0, rk;
    uint64_t t, ia;
    while (s < j->piece && pi < j->nlist && nb < SBLIST_MAX) {
        uint32_t n = lj_take(j, &pi, &po, j->piece - s, &t, &ia, &rk);
        blk[nb++] = (gw_stage_blk_t){t, s, n};
        s += n;
    }
    return scatter ? gw_staging_scatter(j->eng->st, j->slot, blk, nb) : gw_staging_gather(j->eng->st, j->slot, blk, nb);
}

/* Posts what the queue takes of the pass's READs into the slot (the peer
 * puts) or WRITEs out of it (the peer gets); pieces adjacent on the
 * initiator's side go as one. */
static void lj_post(gw_verbs_ep_t *ep, batch_t *b, unsigned ji)
{
    gw_verbs_sjob_t *j = &ep->sjob[ji];
    struct ibv_mr *mr = j->eng->mr[j->slot->index];
    while (j->pposted < j->piece && j->pi < j->nlist) {
        if (!qp_room(ep, b, 0))
            return;
        uint64_t t, ia, t2, ia2;
        uint32_t rk, rk2;
        uint32_t n = lj_take(j, &j->pi, &j->po, j->piece - j->pposted, &t, &ia, &rk);
        while (j->pposted + n < j->piece && j->pi < j->nlist && j->list[j->pi].irkey == rk &&
               j->list[j->pi].iaddr + j->po == ia + n)
            n += lj_take(j, &j->pi, &j->po, j->piece - j->pposted - n, &t2, &ia2, &rk2);
        struct ibv_send_wr *w = gw_verbs_wr_add(ep, b, 0, NULL, j->dir ? WR_SWRITE : WR_SREAD, -1, n);
        gw_verbs_ring_newest(&ep->qps[0])->aux = ji + 1;
        w->opcode = j->dir ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
        w->wr.rdma.remote_addr = ia;
        w->wr.rdma.rkey = rk;
        w->num_sge = 1;
        w->sg_list->addr = (uint64_t)(uintptr_t)j->slot->host + j->pposted;
        w->sg_list->length = n;
        w->sg_list->lkey = mr->lkey;
        j->wrs++;
        j->pposted += n;
    }
}

/* Passes of a list job: J_SLOT (a slot; the pass is the next slot's worth
 * of pieces) -> put: J_READ (READs) -> J_H2D (scatter); get: J_D2H
 * (gather) -> J_WRITE (WRITEs); then the next pass or the acknowledgement. */
static void lj_step(gw_verbs_ep_t *ep, batch_t *b, unsigned ji)
{
    gw_verbs_sjob_t *j = &ep->sjob[ji];
    for (;;) {
        switch (j->state) {
        case J_SLOT: {
            if (j->status != GW_OK || !j->mem) {
                if (j->status == GW_OK)
                    j->status = GW_ERR_INVALID_KEY;
                job_finish(ep, j);
                return;
            }
            gw_stage_slot_t *s = gw_staging_acquire(j->eng->st);
            if (!s)
                return;
            j->slot = s;
            if (!gw_verbs_stg_slot_mr(ep->vif, j->eng, s)) {
                j->status = GW_ERR_VERBS;
                job_finish(ep, j);
                return;
            }
            j->piece = (uint32_t)GW_MIN((size_t)(j->len - j->done), gw_staging_chunk(j->eng->st));
            j->pi0 = j->pi;
            j->po0 = j->po;
            j->pposted = j->wrs = 0;
            if (j->dir == 0) {
                j->state = J_READ;
                break;
            }
            gw_status_t st = lj_copy(j, 0);
            if (st != GW_OK) {
                j->status = st;
                job_finish(ep, j);
                return;
            }
            j->state = J_D2H;
            break;
        }
        case J_READ:
        case J_WRITE:
            lj_post(ep, b, ji); /* (gw_verbs_stg_job_wr_done goes on once all are in) */
            return;
        case J_D2H:
        case J_H2D: {
            if (!job_slot_done(ep, j))
                return;
            if (j->state == J_D2H) {
                j->state = J_WRITE;
                break;
            }
            if (!job_piece_done(ep, j))
                return;
            break;
        }
        default:
            return;
        }
    }
}

/* A WR of a list job completed: once the pass's are all in, scatter (put) or the next pass (get). */
static void lj_wr_done(gw_verbs_ep_t *ep, gw_verbs_sjob_t *j)
{
    if (j->wrs)
        j->wrs--;
    if (j->wrs || j->pposted < j->piece)
        return;
    if (j->state == J_READ) {
        if (j->status == GW_OK && !j->mem)
            j->status = GW_ERR_INVALID_KEY;
        if (j->status == GW_OK) {
            gw_status_t st = lj_copy(j, 1);
            if (st == GW_OK) {
                j->state = J_H2D;
                return;
            }
            j->status = st;
        }
        job_finish(ep, j);
    } else if (j->state == J_WRITE) {
        job_piece_done(ep, j);
    }
}

/* Checks a chunk request against what we own; GW_OK or the refusal. */
static gw_status_t job_check(gw_verbs_ep_t *ep, gw_verbs_sjob_t *j)
{
    gw_core_t *c = ep_core(ep);
    if (j->by_rdv) {
        gw_request_t *r = gw_verbs_rdv_lookup(ep, j->ident);
        if (!r || j->dir != 1 || !gw_verbs_mem_staged(r->lmem))
            return GW_ERR_INVALID_KEY;
        if (!gw_range_inside((uint64_t)(uintptr_t)r->buf, r->len, j->taddr, j->len))
            return GW_ERR_OUT_OF_BOUNDS;
        j->device = r->lmem->cuda_device;
        return GW_OK;
    }
    /* a region: the base's check (unknown or revoked, access, bounds), and
     * it must be one on the staging rung (any other is reached by RDMA, so
     * a chunk request naming one is forged: no such key here) */
    gw_mem_t *m;
    gw_status_t st = gw_region_check(c, j->ident, j->taddr, j->len,
                                     j->dir ? GW_ACCESS_REMOTE_READ : GW_ACCESS_REMOTE_WRITE, &m);
    if (st != GW_OK)
        return st;
    if (!gw_verbs_mem_staged(m))
        return GW_ERR_INVALID_KEY;
    j->mem = m;
    j->device = m->cuda_device;
    m->incoming += j->dir == 0;
    return GW_OK;
}

void gw_verbs_stg_on_sreq(gw_verbs_ep_t *ep, const uint8_t *p, uint32_t bytes)
{
    if (bytes < SREQ_BYTES) {
        gw_verbs_ep_die(ep, GW_ERR_PROTOCOL, "verbs: %u-byte staged chunk request from %s (expected %d)", bytes,
               ep->peer.dev, SREQ_BYTES);
        return;
    }
    unsigned i;
    for (i = 0; i < GW_VERBS_STG_CREDITS && ep->sjob[i].state; i++)
        ;
    if (i == GW_VERBS_STG_CREDITS) {
        gw_verbs_ep_die(ep, GW_ERR_PROTOCOL, "verbs: %s sent more than %d staged chunk requests at once", ep->peer.dev,
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
    if (p[3] & SREQ_LIST) { /* a batch's chunk: a piece list follows */
        char why[200];
        uint32_t n = 0;
        if (j->by_rdv || (p[3] & SREQ_EAGER) || gw_verbs_sblist_check(p, bytes, &n, why, sizeof(why)) != GW_OK) {
            if (j->by_rdv || (p[3] & SREQ_EAGER))
                snprintf(why, sizeof(why), "flags 0x%x", p[3] | (p[2] << 8));
            memset(j, 0, sizeof(*j));
            gw_verbs_ep_die(ep, GW_ERR_PROTOCOL, "verbs: chunk request with a piece list from %s: %s", ep->peer.dev,
                            why);
            return;
        }
        j->list = malloc((size_t)n * sizeof(*j->list));
        if (!j->list) {
            j->status = GW_ERR_NOMEM;
            job_finish(ep, j);
            return;
        }
        for (uint32_t k = 0; k < n; k++) {
            const uint8_t *q = p + SREQ_BYTES + (size_t)k * SBLIST_PIECE;
            j->list[k] = (gw_verbs_lpiece_t){gw_get_u64(q), gw_get_u64(q + 8), gw_get_u32(q + 16), gw_get_u32(q + 20)};
        }
        j->nlist = n;
        j->status = lj_check(ep, j);
        if (j->status == GW_OK)
            j->status = gw_verbs_stg_engine(ep->vif, j->device, 1, &j->eng);
        if (j->status != GW_OK)
            job_finish(ep, j);
        return;
    }
    if ((p[3] & SREQ_EAGER) && j->dir) { /* a small get: answered with the data (stg_job_step) */
        if (j->len > STG_EAGER_MAX) {
            gw_verbs_ep_die(ep, GW_ERR_PROTOCOL, "verbs: eager staged get of %u bytes from %s (at most %u)", j->len,
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
            gw_verbs_ep_die(ep, GW_ERR_PROTOCOL, "verbs: staged chunk request from %s carries %u of %u bytes",
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
        j->status = gw_verbs_stg_engine(ep->vif, j->device, 1, &j->eng);
    if (j->status != GW_OK || j->len == 0)
        job_finish(ep, j);
}

/* A WR of a job completed (retire): READ landed in the slot, or WRITE left it. */
void gw_verbs_stg_job_wr_done(gw_verbs_ep_t *ep, uint32_t aux)
{
    if (aux == 0 || aux > GW_VERBS_STG_CREDITS)
        return;
    gw_verbs_sjob_t *j = &ep->sjob[aux - 1];
    if (j->list) {
        lj_wr_done(ep, j);
        return;
    }
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
        job_piece_done(ep, j);
    }
}

void gw_verbs_stg_job_step(gw_verbs_ep_t *ep, batch_t *b, unsigned ji)
{
    gw_verbs_sjob_t *j = &ep->sjob[ji];
    if (j->list) {
        lj_step(ep, b, ji);
        return;
    }
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
            struct ibv_mr *mr = gw_verbs_stg_slot_mr(ep->vif, j->eng, s);
            if (!mr) {
                j->status = GW_ERR_VERBS;
                job_finish(ep, j);
                return;
            }
            j->piece = (uint32_t)GW_MIN((size_t)(j->len - j->done), gw_staging_chunk(j->eng->st));
            if (j->dir == 0) {
                struct ibv_send_wr *w = gw_verbs_wr_add(ep, b, 0, NULL, WR_SREAD, -1, j->piece);
                gw_verbs_ring_newest(&ep->qps[0])->aux = ji + 1;
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
            if (!job_slot_done(ep, j))
                return;
            if (j->state == J_H2D) {
                if (!job_piece_done(ep, j))
                    return;
                break;
            }
            if (!qp_room(ep, b, 0))
                return; /* (test again next pass: returns 1 at once) */
            struct ibv_send_wr *w = gw_verbs_wr_add(ep, b, 0, NULL, WR_SWRITE, -1, j->piece);
            gw_verbs_ring_newest(&ep->qps[0])->aux = ji + 1;
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
            gw_verbs_hdr_fill(p, CT_SACK, 0, 0, j->len, 0, 0, j->cookie);
            gw_verbs_post_sendmsg(ep, b, NULL, s, GW_VERBS_HDR + j->len);
            ep->stg_served++;
            memset(j, 0, sizeof(*j));
            return;
        }
        default:
            return; /* J_READ, J_WRITE: waiting for the NIC */
        }
    }
}

