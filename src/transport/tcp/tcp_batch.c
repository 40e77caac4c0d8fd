/* SPDX-License-Identifier: Apache-2.0 */
/* tcp_batch.c - batched put/get over the tcp transport (the `batch` op).
 *
 * Uses the transport's private objects (tcp_int.h: streams, transmit items,
 * slots).
 *
 * A batch is cut into runs: up to GW_TCP_BDESC_MAX_ENT entries and about
 * one stripe piece of bytes each (an entry longer than that is split).  A
 * run is one frame:
 *   put: BPUT, payload = descriptor block (tcp.h) + the entries' bytes.  The
 *        sender writes it with one sendmsg() over an iovec per entry (no
 *        copy; entries averaging under TCPB_GATHER_BELOW bytes are gathered
 *        into one buffer first); the receiver checks every entry against its region table and
 *        reads each entry's bytes straight into place (or through the receive
 *        buffer for small ones), a bad or revoked one into scratch; PUT_ACK
 *        answers the run with the first error.
 *   get: BGET_REQ carries the block; the target checks it whole and answers
 *        BGET_RESP with the entries' bytes gathered into one buffer (a copy:
 *        the response then no longer depends on the regions, which may be
 *        deregistered meanwhile), or with the error and no payload; the
 *        initiator scatters the payload into its entries.
 * Runs are spread over the least-loaded streams once the batch reaches
 * GPUWIRE_TCP_STRIPE_MIN, else they go on stream 0.  The batch's
 * notification is deferred like a striped put_notify's (sent on stream 0 once
 * every operation up to the batch is acknowledged); a counted one sets
 * GW_TCP_F_COUNTED on the NOTIFY frame.
 *
 * GPU memory: runs with GPU entries are gathered (sender) and scattered
 * (receiver) by the copy kernel through pinned buffers (below); where no
 * kernel loads, by copy-engine copies, one per entry.
 */
#include "transport/tcp/tcp_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/base/batch.h"

/* ---- descriptor block (wire format; fuzzed) ------------------------------------------ */
gw_status_t gw_tcp_bdesc_check(const uint8_t *p, size_t len, uint32_t *n, char *why, size_t whylen)
{
    *n = 0;
    if (len < GW_TCP_BDESC_HDR) {
        snprintf(why, whylen, "batch descriptor block of %zu bytes is shorter than its %d-byte header", len,
                 GW_TCP_BDESC_HDR);
        return GW_ERR_PROTOCOL;
    }
    uint32_t magic = gw_get_u32(p), ver = gw_get_u32(p + 4), cnt = gw_get_u32(p + 8);
    if (magic != GW_TCP_BDESC_MAGIC) {
        snprintf(why, whylen, "batch descriptor block has magic 0x%08x, not 0x%08x", magic, GW_TCP_BDESC_MAGIC);
        return GW_ERR_PROTOCOL;
    }
    if ((ver & 0xffffu) != GW_TCP_BDESC_VERSION) {
        snprintf(why, whylen, "batch descriptor block version %u (this side speaks %d)", ver & 0xffffu,
                 GW_TCP_BDESC_VERSION);
        return GW_ERR_VERSION;
    }
    if (cnt > GW_TCP_BDESC_MAX_ENT) {
        snprintf(why, whylen, "batch descriptor block of %u entries (at most %d)", cnt, GW_TCP_BDESC_MAX_ENT);
        return GW_ERR_PROTOCOL;
    }
    if (len != GW_TCP_BDESC_HDR + (size_t)cnt * GW_TCP_BDESC_ENT) {
        snprintf(why, whylen, "batch descriptor block of %zu bytes for %u entries (%zu expected)", len, cnt,
                 GW_TCP_BDESC_HDR + (size_t)cnt * GW_TCP_BDESC_ENT);
        return GW_ERR_PROTOCOL;
    }
    *n = cnt;
    return GW_OK;
}

void gw_tcp_bdesc_entry(const uint8_t *p, uint32_t i, uint64_t *region, uint64_t *addr, uint64_t *len)
{
    const uint8_t *e = p + GW_TCP_BDESC_HDR + (size_t)i * GW_TCP_BDESC_ENT;
    *region = gw_get_u64(e);
    *addr = gw_get_u64(e + 8);
    *len = gw_get_u64(e + 16);
}

void gw_tcp_bdesc_init(uint8_t *p, uint32_t n)
{
    gw_put_u32(p, GW_TCP_BDESC_MAGIC);
    gw_put_u32(p + 4, GW_TCP_BDESC_VERSION);
    gw_put_u32(p + 8, n);
    gw_put_u32(p + 12, 0);
}

void gw_tcp_bdesc_set(uint8_t *p, uint32_t i, uint64_t region, uint64_t addr, uint64_t len)
{
    uint8_t *e = p + GW_TCP_BDESC_HDR + (size_t)i * GW_TCP_BDESC_ENT;
    gw_put_u64(e, region);
    gw_put_u64(e + 8, addr);
    gw_put_u64(e + 16, len);
}

/* A put run whose entries average less than this many bytes is gathered
 * into one buffer at posting and sent as one piece, instead of an iovec per
 * entry: the kernel's cost per iovec segment (~290 ns on the 2-core VM)
 * is what a scattered batch of small entries paid, where a gather of
 * 64-byte entries in user space costs ~15 ns each (`gpuwire perf --table`:
 * 327,680 random 64-byte entries posted in 107 ms that way). */
#define TCPB_GATHER_BELOW 1024

/* ---- cutting a batch into runs --------------------------------------------------------- */
typedef struct tcpb_piece {
    uint64_t laddr, raddr, len, region;
    int ldev; /* CUDA ordinal of the local bytes, -1 for host memory */
} tcpb_piece_t;

/* A get's state, kept until it completes (tcp_rq(req)->bop); a put keeps none. */
typedef struct tcpb_op {
    void (*fini)(gw_request_t *r); /* the api layer's hook, run after ours */
    uint32_t nruns;
    uint32_t *first;               /* run k: pieces first[k] .. first[k+1]-1 */
    uint64_t *bytes;               /* bytes of run k */
    tcpb_piece_t *pc;
} tcpb_op_t;

typedef struct tcpb_cut {
    tcpb_piece_t *pc;
    uint32_t npc, cap;
    uint32_t *first;
    uint32_t nruns, rcap;
} tcpb_cut_t;

static int cut_push_run(tcpb_cut_t *k)
{
    if (k->nruns + 1 >= k->rcap) {
        uint32_t cap = k->rcap ? k->rcap * 2 : 16;
        uint32_t *a = realloc(k->first, cap * sizeof(*a));
        if (!a)
            return -1;
        k->first = a;
        k->rcap = cap;
    }
    k->first[k->nruns++] = k->npc;
    return 0;
}

/* Pieces of at most maxrun bytes per run, GW_TCP_BDESC_MAX_ENT per run. */
static int cut_batch(const gw_batch_t *b, uint64_t maxrun, tcpb_cut_t *k)
{
    memset(k, 0, sizeof(*k));
    uint64_t inrun = 0;
    uint32_t nin = 0;
    for (uint32_t i = 0; i < b->n; i++) {
        const gw_batch_ent_t *e = &b->ent[i];
        uint64_t off = 0;
        while (off < e->len) {
            if (!k->nruns || inrun >= maxrun || nin >= GW_TCP_BDESC_MAX_ENT) {
                if (cut_push_run(k) < 0)
                    return -1;
                inrun = 0;
                nin = 0;
            }
            uint64_t n = GW_MIN(e->len - off, maxrun - inrun);
            if (k->npc == k->cap) {
                uint32_t cap = k->cap ? k->cap * 2 : 64;
                tcpb_piece_t *a = realloc(k->pc, cap * sizeof(*a));
                if (!a)
                    return -1;
                k->pc = a;
                k->cap = cap;
            }
            k->pc[k->npc++] = (tcpb_piece_t){e->laddr + off, e->raddr + off, n, b->rkey[e->rreg].id,
                                             gw_batch_ldev(b, e)};
            off += n;
            inrun += n;
            nin++;
        }
    }
    if (cut_push_run(k) < 0) /* the end marker */
        return -1;
    k->nruns--;
    return 0;
}

/* Appends the rest of batch run t (header, block, entries) to iov.  Returns
 * 1 when the array filled before the run's end. */
int tcpb_iov_fill(tx_item_t *t, struct iovec *iov, int *n, int cap)
{
    size_t skip = t->off;
    if (skip < GW_TCP_HDR) {
        iov[*n].iov_base = t->hdr + skip;
        iov[(*n)++].iov_len = GW_TCP_HDR - skip;
        skip = 0;
    } else {
        skip -= GW_TCP_HDR;
    }
    for (uint32_t i = 0; i < t->niov; i++) {
        if (skip >= t->iov[i].iov_len) {
            skip -= t->iov[i].iov_len;
            continue;
        }
        if (*n == cap)
            return 1;
        iov[*n].iov_base = (uint8_t *)t->iov[i].iov_base + skip;
        iov[(*n)++].iov_len = t->iov[i].iov_len - skip;
        skip = 0;
    }
    return 0;
}

/* Queues a run frame whose payload is `niov` iovecs in `owned` (a block of
 * the core's per-operation pool, put back with the frame). */
static int send_run(conn_t *c, const gw_tcp_hdr_t *h, void *owned, const struct iovec *iov, uint32_t niov,
                    size_t paylen)
{
    tcp_ep_t *ep = c->ep;
    if (c->fd < 0) {
        gw_op_state_put(CORE(ep), owned);
        return -1;
    }
    tx_item_t *t = tcp_tx_alloc(ep);
    if (!t) {
        gw_op_state_put(CORE(ep), owned);
        tcp_fail(ep, GW_ERR_NOMEM, "out of memory queueing a frame to %s", B(ep)->peer);
        return -1;
    }
    gw_tcp_hdr_encode(t->hdr, h);
    t->owned = owned;
    t->iov = iov;
    t->niov = niov;
    t->paylen = paylen;
    tcp_tx_push(c, t);
    if (!c->want_out && !c->stg_wait)
        return tcp_conn_flush(c);
    return 0;
}

static void tcpb_op_fini(gw_request_t *r)
{
    tcpb_op_t *op = tcp_rq(r)->bop;
    tcp_rq(r)->bop = NULL;
    void (*next)(gw_request_t *) = op ? op->fini : NULL;
    if (op) {
        free(op->first);
        free(op->pc);
        gw_op_state_put(r->core, op);
    }
    if (next)
        next(r);
}

/* ---- GPU entries of a put: gathered by the copy kernel ------------------------------------
 * Every run holding GPU entries (all of one device) is laid out in one
 * pinned buffer as its frame's payload: descriptor block, then the entries'
 * bytes, so that the frame is written like any contiguous payload (by a
 * helper thread too).  The kernel copies the GPU entries in, one launch per
 * group of runs; host entries of such a run are copied in by the CPU.  A
 * frame waits for its launch's event
 * before it is written (tcp_tx_kern_pending).  Launch groups grow from
 * KGROUP_FIRST bytes, doubling up to KGROUP_MAX: the first frames go out
 * after a small gather, and the gather (tens of GB/s) stays ahead of the
 * wire with few launches; each launch and event record took the posting
 * thread ~20 us on an H100 (32 launches of 2 MiB: post_us 800 for 4096 x
 * 16 KiB, docs/PERFORMANCE.md). */
#define KGROUP_FIRST (1u << 20)
#define KGROUP_MAX (16u << 20)

typedef struct tcpb_gather {
    tcp_gbuf_t *gb;
    uint64_t *roff; /* run r's payload offset in gb, UINT64_MAX: a run without GPU entries */
    int *rev;       /* run r's launch event */
} tcpb_gather_t;

static size_t run_dlen(uint32_t n)
{
    return GW_TCP_BDESC_HDR + (size_t)n * GW_TCP_BDESC_ENT;
}

static void gather_free(tcp_ep_t *ep, tcpb_gather_t *g)
{
    tcp_gbuf_put(ep->tif, g->gb);
    free(g->roff);
    free(g->rev);
    memset(g, 0, sizeof(*g));
}

/* Queues gathered run r (payload in g's buffer). */
static int send_gathered(conn_t *c, const gw_tcp_hdr_t *h, const tcpb_gather_t *g, uint32_t r)
{
    tx_item_t *t = tcp_tx_frame(c, h, g->gb->host + g->roff[r], h->len);
    if (!t)
        return -1;
    t->gb = g->gb;
    t->gb->refs++;
    t->gev = g->rev[r];
    tcp_tx_push(c, t);
    if (!c->want_out && !c->stg_wait)
        return tcp_conn_flush(c);
    return 0;
}

/* Lays out and gathers the runs with GPU entries, queueing each group's
 * frames right after its launch, so that the first frames leave while
 * later groups are still being built (they wait for their launch on the
 * stream, tcp_tx_kern_pending; the streams of earlier groups are retried
 * at each launch).  With GPUWIRE_TCP_BATCH_GPU=scratch the kernel gathers
 * into gb's GPU scratch (the runs' descriptor blocks and host entries,
 * written into the pinned buffer by the CPU, copied along by the kernel)
 * and one copy-engine copy per group brings the group's bytes to the
 * pinned buffer.  0: done (g->gb holds one reference for the caller);
 * -1: failed, error set; -2: the endpoint failed while queueing (the
 * request is completed). */
static int gather_put(tcp_ep_t *ep, const tcpb_cut_t *k, int dev, uint64_t id, int striped, tcpb_gather_t *g)
{
    tcp_iface_t *tif = ep->tif;
    memset(g, 0, sizeof(*g));
    g->roff = malloc(k->nruns * sizeof(*g->roff));
    g->rev = malloc(k->nruns * sizeof(*g->rev));
    if (!g->roff || !g->rev) {
        gw_err(CORE(ep), GW_ERR_NOMEM, "tcp: out of memory gathering a GPU batch");
        return -1;
    }
    const int scr = tif->bscratch;
    size_t off = 0, nd = 0;
    for (uint32_t r = 0; r < k->nruns; r++) {
        uint32_t f = k->first[r], n = k->first[r + 1] - f;
        size_t data = 0, rd = 0, hd = 0;
        for (uint32_t i = f; i < f + n; i++) {
            data += k->pc[i].len;
            if (k->pc[i].ldev >= 0)
                rd += (k->pc[i].len + GW_COPY_DESC_MAX_LEN - 1) / GW_COPY_DESC_MAX_LEN;
            else
                hd += (k->pc[i].len + GW_COPY_DESC_MAX_LEN - 1) / GW_COPY_DESC_MAX_LEN;
        }
        g->rev[r] = -1;
        if (!rd) {
            g->roff[r] = UINT64_MAX;
            continue;
        }
        size_t dlen = run_dlen(n);
        off = ((off + dlen + 15) & ~(size_t)15) - dlen; /* the entries' bytes 16-byte aligned (the kernel's wide path) */
        g->roff[r] = off;
        off += dlen + data;
        nd += rd + (scr ? 1 + hd : 0); /* scratch: the block and the host entries go through the kernel too */
    }
    size_t doff = (off + 63) & ~(size_t)63;
    g->gb = tcp_gbuf_get(tif, dev, doff + nd * sizeof(gw_copy_desc_t));
    if (!g->gb || (scr && tcp_gbuf_scratch(tif, g->gb) < 0))
        return -1;
    uint8_t *host = g->gb->host;
    /* where the kernel writes the byte at offset o of the buffer: base + o */
    const uint64_t base = scr ? (uint64_t)g->gb->dscr : (uint64_t)(uintptr_t)host;
    gw_copy_desc_t *d = (gw_copy_desc_t *)(host + doff);
    size_t kd = 0, launched = 0, grp = 0, kgroup = KGROUP_FIRST;
    uint32_t grp_first = 0;
    for (uint32_t r = 0; r < k->nruns; r++) {
        if (g->roff[r] == UINT64_MAX)
            continue;
        if (grp == 0)
            grp_first = r;
        uint32_t f = k->first[r], n = k->first[r + 1] - f;
        size_t woff = g->roff[r] + run_dlen(n);
        uint8_t *blk = host + g->roff[r];
        gw_tcp_bdesc_init(blk, n);
        if (scr)
            d[kd++] = (gw_copy_desc_t){(uint64_t)(uintptr_t)blk, base + g->roff[r], run_dlen(n)};
        for (uint32_t i = 0; i < n; i++) {
            const tcpb_piece_t *p = &k->pc[f + i];
            gw_tcp_bdesc_set(blk, i, p->region, p->raddr, p->len);
            uint64_t src = p->laddr;
            if (p->ldev < 0) {
                memcpy(host + woff, (const void *)(uintptr_t)p->laddr, p->len);
                src = (uint64_t)(uintptr_t)(host + woff);
            }
            if (p->ldev >= 0 || scr)
                for (uint64_t o = 0; o < p->len; o += GW_COPY_DESC_MAX_LEN)
                    d[kd++] = (gw_copy_desc_t){src + o, base + woff + o,
                                               GW_MIN(p->len - o, (uint64_t)GW_COPY_DESC_MAX_LEN)};
            woff += p->len;
            grp += p->len;
        }
        uint32_t nx = r + 1; /* the next run with GPU entries, if any */
        while (nx < k->nruns && g->roff[nx] == UINT64_MAX)
            nx++;
        if (grp < kgroup && nx != k->nruns)
            continue;
        size_t gstart = g->roff[grp_first];
        int ev = tcp_kern_launch(tif, g->gb, 0, d + launched, (uint32_t)(kd - launched),
                                 scr ? TCP_KCOPY_D2H_AFTER : TCP_KCOPY_NONE, gstart, woff - gstart);
        if (ev < 0)
            return -1;
        tcp_stg_wait_retry(ep); /* earlier groups' frames whose launch is done */
        for (uint32_t q = grp_first; q <= r; q++) {
            if (g->roff[q] == UINT64_MAX)
                continue;
            g->rev[q] = ev;
            uint32_t qn = k->first[q + 1] - k->first[q];
            uint64_t data = 0;
            for (uint32_t i = k->first[q]; i < k->first[q + 1]; i++)
                data += k->pc[i].len;
            gw_tcp_hdr_t h = {.type = GW_TCP_BPUT, .id = id, .addr = run_dlen(qn), .len = run_dlen(qn) + data};
            if (send_gathered(striped ? tcp_least_loaded(ep) : &ep->conns[0], &h, g, q) < 0)
                return -2;
        }
        launched = kd;
        grp = 0;
        kgroup = GW_MIN(kgroup * 2, (size_t)KGROUP_MAX);
    }
    return 0;
}

gw_status_t tcpb_batch(gw_tl_ep_t *tep, gw_request_t *req)
{
    tcp_ep_t *ep = to_ep(tep);
    const gw_batch_t *b = req->batch;
    gw_core_t *core = CORE(ep);
    /* the notification goes out after the batch's runs and every older
     * operation (the base holds the request: ep_base.h); a posting error
     * below takes it back (gw_ep_op_unstart) */
    gw_status_t dst = b->notify != GW_NOTIFY_NONE ? gw_ep_notify_defer(B(ep), req) : GW_OK;
    if (dst != GW_OK)
        return dst;
    if (b->n == 0) { /* nothing to move: done now, the notification follows older operations */
        req->length = 0;
        gw_ep_op_done(B(ep), req, GW_OK);
        return GW_OK;
    }
    int striped = b->total >= ep->tif->stripe_min && tcp_open_streams(ep) > 1;
    uint64_t maxrun = striped ? tcp_piece_size(ep, (size_t)b->total) : ep->tif->chunk;
    if (maxrun < 4096)
        maxrun = 4096;
    tcpb_cut_t k;
    if (cut_batch(b, maxrun, &k) != 0) {
        free(k.pc);
        free(k.first);
        return gw_err(core, GW_ERR_NOMEM, "tcp: out of memory cutting a batch of %u entries", b->n);
    }
    uint64_t id;
    if (gw_op_table_alloc(&ep->optab, req, &id) != 0) {
        free(k.pc);
        free(k.first);
        return gw_err(core, GW_ERR_NOMEM, "tcp: out of memory for an operation slot");
    }
    req->first_err = GW_OK;
    req->done = 0;
    req->pending = k.nruns;
    if (striped && !b->get) { /* a later put_notify must not overtake these runs on stream 0 */
        req->tl_flags |= TLF_STRIPED;
        ep->striped_puts++;
    }
    tcpb_op_t *op = NULL;
    if (b->get) {
        op = gw_op_state_get(core, sizeof(*op) + k.nruns * sizeof(uint64_t)); /* (bytes behind it) */
        if (!op) {
            free(k.pc);
            free(k.first);
            gw_op_table_free(&ep->optab, req);
            return gw_err(core, GW_ERR_NOMEM, "tcp: out of memory for a batch");
        }
        op->bytes = (uint64_t *)(op + 1);
        op->fini = req->fini;
        req->fini = tcpb_op_fini;
        tcp_rq(req)->bop = op;
    }
    /* a put's GPU entries, all of one device, where its kernel loads: gathered by launches */
    tcpb_gather_t g = {0};
    if (!b->get) {
        int kdev = -1, mixed = 0;
        for (uint32_t i = 0; i < k.npc && !mixed; i++) {
            int d = k.pc[i].ldev;
            if (d >= 0 && kdev >= 0 && d != kdev)
                mixed = 1;
            else if (d >= 0)
                kdev = d;
        }
        int gr = kdev >= 0 && !mixed && tcp_kern_ready(ep->tif, kdev) ? gather_put(ep, &k, kdev, id, striped, &g) : 0;
        if (gr != 0) {
            gather_free(ep, &g);
            free(k.pc);
            free(k.first);
            if (gr == -1)
                tcp_fail(ep, GW_ERR_CUDA, "tcp: gathering GPU entries of a batch failed: %s", core->errbuf);
            return GW_OK; /* the endpoint failed and completed the request */
        }
    }
    if (b->get) {
        uint64_t *bytes = op->bytes;
        op->nruns = k.nruns;
        op->first = k.first;
        op->pc = k.pc;
        for (uint32_t r = 0; r < k.nruns; r++)
            for (uint32_t i = k.first[r]; i < k.first[r + 1]; i++)
                bytes[r] += k.pc[i].len;
    }
    /* the frames: a run's descriptor block (and its iovecs or gathered bytes) in one allocation */
    for (uint32_t r = 0; r < k.nruns; r++) {
        uint32_t f = k.first[r], n = k.first[r + 1] - f;
        if (g.gb && g.roff[r] != UINT64_MAX) /* queued by gather_put */
            continue;
        size_t dlen = GW_TCP_BDESC_HDR + (size_t)n * GW_TCP_BDESC_ENT, data = 0;
        int gpu = 0;
        for (uint32_t i = f; i < f + n; i++) {
            data += k.pc[i].len;
            gpu |= k.pc[i].ldev >= 0;
        }
        size_t iov_bytes = (size_t)(n + 1) * sizeof(struct iovec);
        /* small host entries: gathered here too (see TCPB_GATHER_BELOW) */
        int small = !b->get && !gpu && n > 1 && data < (size_t)n * TCPB_GATHER_BELOW;
        size_t extra = b->get ? 0 : gpu || small ? data : 0; /* GPU entries: gathered into host memory here */
        uint8_t *mem = gw_op_state_get(core, iov_bytes + dlen + extra);
        if (!mem) {
            tcp_fail(ep, GW_ERR_NOMEM, "out of memory building batch frames to %s", B(ep)->peer);
            break; /* the endpoint failed and completed the request */
        }
        struct iovec *iov = (struct iovec *)mem;
        uint8_t *blk = mem + iov_bytes;
        gw_tcp_bdesc_init(blk, n);
        for (uint32_t i = 0; i < n; i++) {
            const tcpb_piece_t *p = &k.pc[f + i];
            gw_tcp_bdesc_set(blk, i, p->region, p->raddr, p->len);
        }
        iov[0].iov_base = blk;
        iov[0].iov_len = dlen;
        uint32_t niov = 1;
        gw_tcp_hdr_t h = {.id = id};
        conn_t *c = striped ? tcp_least_loaded(ep) : &ep->conns[0];
        if (b->get) {
            h.type = GW_TCP_BGET_REQ;
            h.len = dlen;
            h.val = r;
            if (send_run(c, &h, mem, iov, niov, dlen) < 0)
                break;
            continue;
        }
        if (gpu) { /* one host buffer for the run (copy-engine copies, one per GPU entry) */
            uint8_t *host = blk + dlen, *w = host;
            for (uint32_t i = f; i < f + n; i++) {
                const tcpb_piece_t *p = &k.pc[i];
                gw_status_t st = p->ldev >= 0
                                     ? gw_staging_copy_sync(core, p->ldev, w, (const void *)(uintptr_t)p->laddr, p->len)
                                     : (memcpy(w, (const void *)(uintptr_t)p->laddr, p->len), GW_OK);
                if (st != GW_OK) {
                    gw_op_state_put(core, mem);
                    tcp_fail(ep, GW_ERR_CUDA, "tcp: gathering GPU entries of a batch failed: %s", core->errbuf);
                    goto out;
                }
                w += p->len;
            }
            iov[niov].iov_base = host;
            iov[niov++].iov_len = data;
        } else if (small) { /* one copy of the run's bytes, the next entries' fetched ahead */
            uint8_t *w = blk + dlen;
            for (uint32_t i = f; i < f + n; i++) {
                if (i + 8 < f + n)
                    __builtin_prefetch((const void *)(uintptr_t)k.pc[i + 8].laddr);
                memcpy(w, (const void *)(uintptr_t)k.pc[i].laddr, k.pc[i].len);
                w += k.pc[i].len;
            }
            iov[niov].iov_base = blk + dlen;
            iov[niov++].iov_len = data;
        } else {
            for (uint32_t i = f; i < f + n; i++) {
                iov[niov].iov_base = (void *)(uintptr_t)k.pc[i].laddr;
                iov[niov++].iov_len = k.pc[i].len;
            }
        }
        h.type = GW_TCP_BPUT;
        h.addr = dlen;
        h.len = dlen + data;
        if (send_run(c, &h, mem, iov, niov, dlen + data) < 0)
            break;
    }
out:
    gather_free(ep, &g);
    if (!b->get) {
        free(k.pc);
        free(k.first);
    }
    return GW_OK;
}

/* ---- receiving batch frames ------------------------------------------------------------ */
typedef struct tcpb_seg {
    uint64_t addr, len, region; /* region 0: local memory of the request (get responses) */
    int dev;
} tcpb_seg_t;

struct tcpb_rx {
    int data;            /* 0: reading the descriptor block; 1: the entries' bytes */
    int started;         /* segment i is being read */
    uint32_t n, i;       /* segments, the one being read */
    gw_status_t st;      /* first error */
    gw_request_t *req;   /* get response: the batch get */
    const tcpb_piece_t *pcs; /* get response: the run's pieces */
    tcpb_seg_t *seg;
    uint64_t total;
    uint8_t *desc;
    size_t dlen;
    int whole;           /* the entries' bytes go into gb as one payload, the kernel scatters them */
    int scat;            /* the entries' bytes are one payload scattered over host entries */
    uint32_t ci;         /* scat: the entry the next byte goes to, and the offset in it */
    uint64_t co;
    tcp_gbuf_t *gb;
    tcpb_seg_t segs[];   /* the block's entries (put; a get response uses its op's pieces) */
};

int tcpb_rx_in_block(const conn_t *c)
{
    return c->brx && !c->brx->data && c->brx->dlen;
}

void tcpb_rx_drop(conn_t *c)
{
    c->bscat = 0;
    if (c->brx && c->brx->gb)
        tcp_gbuf_put(c->ep->tif, c->brx->gb);
    gw_op_state_put(CORE(c->ep), c->brx);
    c->brx = NULL;
}

static int rx_alloc(conn_t *c, uint32_t nseg, size_t dlen)
{
    tcpb_rx_drop(c);
    struct tcpb_rx *s = gw_op_state_get(CORE(c->ep), sizeof(*s) + nseg * sizeof(tcpb_seg_t) + dlen);
    if (!s) {
        tcp_fail(c->ep, GW_ERR_NOMEM, "out of memory receiving a batch frame");
        return -1;
    }
    s->desc = (uint8_t *)&s->segs[nseg];
    s->dlen = dlen;
    s->seg = s->segs;
    s->st = GW_OK;
    c->brx = s;
    return 0;
}

static gw_mem_t *seg_region(tcp_ep_t *ep, const tcpb_seg_t *g, unsigned need, gw_status_t *st);

/* Entry i of the frame being received: its local address, length and
 * device (-1: host memory; -2: not to be written, a bad put entry). */
static void rx_ent(tcp_ep_t *ep, const struct tcpb_rx *s, uint32_t i, uint64_t *addr, uint64_t *len, int *dev,
                   gw_status_t *st)
{
    *st = GW_OK;
    if (s->pcs) { /* get response: the run's pieces */
        *addr = s->pcs[i].laddr;
        *len = s->pcs[i].len;
        *dev = s->pcs[i].ldev;
        return;
    }
    const tcpb_seg_t *g = &s->seg[i];
    gw_mem_t *m = seg_region(ep, g, GW_ACCESS_REMOTE_WRITE, st);
    *addr = g->addr;
    *len = g->len;
    *dev = *st == GW_OK ? mem_dev(m) : -2;
}

/* Where a frame's entries touch GPU memory of one device whose kernel
 * loads, its bytes are received as one payload into a pinned buffer and
 * scattered by one launch when complete (rx_whole_finish).  1: started;
 * 0: not such a frame (entry by entry); -1: the endpoint failed. */
static int rx_whole(conn_t *c, struct tcpb_rx *s)
{
    tcp_ep_t *ep = c->ep;
    int dev = -1;
    size_t nd = 0;
    for (uint32_t i = 0; i < s->n; i++) {
        uint64_t a, len;
        int d;
        gw_status_t st;
        rx_ent(ep, s, i, &a, &len, &d, &st);
        if (d < 0 || !len)
            continue;
        if (dev >= 0 && d != dev)
            return 0;
        dev = d;
        nd += (len + GW_COPY_DESC_MAX_LEN - 1) / GW_COPY_DESC_MAX_LEN;
    }
    if (dev < 0 || !tcp_kern_ready(ep->tif, dev))
        return 0;
    /* Frames whose scatter runs each hold a pinned buffer: past kinflight
     * (GPUWIRE_TCP_BATCH_INFLIGHT) of them the oldest are waited for
     * (microseconds each), so that the buffers kept cover every frame in flight.
     * Unbounded, a 64 MiB batch had 30-60 frames in flight on the target,
     * and every one past the kept buffers cost a cuMemHostAlloc and a
     * cuMemFreeHost (milliseconds each, serialising the GPU's other work):
     * 4096 x 16 KiB fell from 5.5-6.0 GB/s to 1.5. */
    if (ep->tif->nkdone >= ep->tif->kinflight) {
        tcpb_kdone_poll(ep->tif, (int)ep->tif->kinflight - 1);
        if (gw_ep_failed(B(ep)))
            return -1;
    }
    size_t doff = ((size_t)s->total + 63) & ~(size_t)63;
    s->gb = tcp_gbuf_get(ep->tif, dev, doff + nd * sizeof(gw_copy_desc_t));
    if (!s->gb || (ep->tif->bscratch && tcp_gbuf_scratch(ep->tif, s->gb) < 0)) {
        tcp_fail(ep, GW_ERR_CUDA, "tcp: receiving GPU entries of a batch: %s", CORE(ep)->errbuf);
        return -1;
    }
    s->whole = 1;
    c->cur_status = GW_OK;
    tcp_begin_payload(c, s->gb->host, (size_t)s->total, (size_t)s->total);
    return 1;
}

/* A received frame whose scatter launch runs: the frame counts as done
 * (PUT_ACK, or the get's run) once the launch's event is (tcp_poll polls;
 * the stream meanwhile receives the next frame into another buffer). */
typedef struct tcpb_kdone {
    gw_list_t link;
    tcp_ep_t *ep;
    int conn;
    tcp_gbuf_t *gb;
    int ev;
    uint8_t type;
    uint64_t id, total;
    gw_status_t st;
    gw_request_t *req; /* get response: the batch get */
} tcpb_kdone_t;

static void kdone_complete(tcpb_kdone_t *k)
{
    tcp_ep_t *ep = k->ep;
    if (gw_ep_failed(B(ep)))
        return;
    if (k->type == GW_TCP_BGET_RESP) {
        k->req->done += k->total;
        if (--k->req->pending == 0)
            tcp_op_finish(ep, k->req, k->req->first_err);
        return;
    }
    tcp_send_lazy(&ep->conns[k->conn], GW_TCP_PUT_ACK, k->st, k->id, k->st == GW_OK ? k->total : 0);
}

/* Completes the frames whose launch is done, waiting (bounded) for the
 * oldest ones until at most `keep` remain (keep < 0: none waited for).
 * Returns how many completed. */
int tcpb_kdone_poll(tcp_iface_t *tif, int keep)
{
    int n = 0;
    gw_list_t *p, *t;
    gw_list_for_each_safe(p, t, &tif->kdone) {
        tcpb_kdone_t *k = gw_container_of(p, tcpb_kdone_t, link);
        int wait = keep >= 0 && tif->nkdone > (unsigned)keep;
        int r = wait ? (tcp_kern_wait(tif, k->gb, k->ev) == GW_OK ? 1 : -1) : tcp_kern_test(tif, k->gb, k->ev);
        if (r == 0)
            continue;
        gw_list_del(&k->link);
        tif->nkdone--;
        if (r < 0)
            tcp_fail(k->ep, GW_ERR_CUDA, "tcp: scattering GPU entries of a batch failed: %s", tif->super.core->errbuf);
        else
            kdone_complete(k);
        tcp_gbuf_put(tif, k->gb);
        gw_op_state_put(tif->super.core, k);
        n++;
    }
    if (!gw_list_empty(&tif->kdone))
        gw_core_signal(tif->super.core);
    return n;
}

/* The endpoint goes away: its frames' launches land, nothing completes. */
void tcpb_kdone_drop_ep(tcp_ep_t *ep)
{
    gw_list_t *p, *t;
    gw_list_for_each_safe(p, t, &ep->tif->kdone) {
        tcpb_kdone_t *k = gw_container_of(p, tcpb_kdone_t, link);
        if (k->ep != ep)
            continue;
        gw_list_del(&k->link);
        ep->tif->nkdone--;
        tcp_gbuf_put(ep->tif, k->gb); /* (waits for the launch) */
        gw_op_state_put(CORE(ep), k);
    }
}

/* The whole frame is in the pinned buffer: host entries by memcpy, GPU
 * entries by one launch (GPUWIRE_TCP_BATCH_GPU=scratch: from the GPU
 * scratch, after one copy-engine copy of the frame's bytes into it, on the
 * same stream); the frame is done when the launch is (1: left to
 * tcpb_kdone_poll; 0: done now, nothing launched; -1: the endpoint failed).
 * Put entries are checked again (a region deregistered meanwhile fails its
 * entries, as in mid-entry; tcp_mem_dereg lets launches in flight land). */
static int rx_whole_finish(conn_t *c, struct tcpb_rx *s)
{
    tcp_ep_t *ep = c->ep;
    tcp_gbuf_t *gb = s->gb;
    const uint8_t *src = gb->host;
    /* where the kernel reads the byte at offset o of the frame's bytes: kbase + o */
    const uint64_t kbase = ep->tif->bscratch ? (uint64_t)gb->dscr : (uint64_t)(uintptr_t)gb->host;
    gw_copy_desc_t *d = (gw_copy_desc_t *)(gb->host + (((size_t)s->total + 63) & ~(size_t)63));
    uint32_t kd = 0;
    for (uint32_t i = 0; i < s->n; i++) {
        uint64_t a, len;
        int dev;
        gw_status_t st;
        rx_ent(ep, s, i, &a, &len, &dev, &st);
        if (st != GW_OK && s->st == GW_OK)
            s->st = st;
        if (dev == -1) {
            memcpy((void *)(uintptr_t)a, src, len);
        } else if (dev >= 0) {
            if (dev != gb->dev) /* (a region re-registered on another device meanwhile) */
                return tcp_protocol_error(c, "batch entry %u moved to CUDA device %d during its frame", i, dev);
            for (uint64_t o = 0; o < len; o += GW_COPY_DESC_MAX_LEN)
                d[kd++] = (gw_copy_desc_t){kbase + (uint64_t)(src - gb->host) + o, a + o,
                                           GW_MIN(len - o, (uint64_t)GW_COPY_DESC_MAX_LEN)};
        }
        src += len;
    }
    s->whole = 0;
    s->i = s->n;
    if (!kd) {
        tcp_gbuf_put(ep->tif, gb);
        s->gb = NULL;
        return 0;
    }
    int ev = tcp_kern_launch(ep->tif, gb, (unsigned)c->idx, d, kd, ep->tif->bscratch ? TCP_KCOPY_H2D_FIRST : TCP_KCOPY_NONE, 0,
                             (size_t)s->total);
    tcpb_kdone_t *k = ev >= 0 ? gw_op_state_get(CORE(ep), sizeof(*k)) : NULL;
    if (!k) {
        if (ev >= 0)
            gw_err(CORE(ep), GW_ERR_NOMEM, "out of memory");
        tcp_fail(ep, GW_ERR_CUDA, "tcp: scattering GPU entries of a batch failed: %s", CORE(ep)->errbuf);
        return -1;
    }
    *k = (tcpb_kdone_t){.ep = ep, .conn = c->idx, .gb = gb, .ev = ev, .type = c->cur.type, .id = c->cur.id,
                        .total = s->total, .st = s->st, .req = s->req};
    s->gb = NULL; /* the record's now */
    gw_list_push_back(&ep->tif->kdone, &k->link);
    ep->tif->nkdone++;
    gw_core_signal(CORE(ep));
    return 1;
}

/* ---- host entries: the frame's bytes scattered straight into place --------------------------
 * A frame whose entries are all host memory and small on average (below
 * DIRECT_MIN, where entry by entry each would pass through the receive
 * buffer: one more copy per byte) is received as one payload: what the
 * receive buffer holds is copied to the entries, the rest is read by
 * recvmsg() over iovecs pointing at the entries (bad or revoked entries:
 * the scratch buffer). */
#define SCAT_IOV 256

/* Entry i's destination (NULL: discard) and length. */
static uint8_t *scat_ent(const struct tcpb_rx *s, uint32_t i, uint64_t *len)
{
    if (s->pcs) {
        *len = s->pcs[i].len;
        return (uint8_t *)(uintptr_t)s->pcs[i].laddr;
    }
    *len = s->seg[i].len;
    return s->seg[i].dev == -1 ? (uint8_t *)(uintptr_t)s->seg[i].addr : NULL;
}

static void scat_advance(struct tcpb_rx *s, size_t n)
{
    while (n && s->ci < s->n) {
        uint64_t len;
        scat_ent(s, s->ci, &len);
        uint64_t k = GW_MIN((uint64_t)n, len - s->co);
        s->co += k;
        n -= (size_t)k;
        if (s->co == len) {
            s->ci++;
            s->co = 0;
        }
    }
    while (s->ci < s->n) { /* skip empty entries */
        uint64_t len;
        scat_ent(s, s->ci, &len);
        if (len)
            break;
        s->ci++;
    }
}

void tcpb_scat_store(conn_t *c, const uint8_t *src, size_t len)
{
    struct tcpb_rx *s = c->brx;
    while (len && s->ci < s->n) {
        uint64_t el;
        uint8_t *d = scat_ent(s, s->ci, &el);
        size_t k = (size_t)GW_MIN((uint64_t)len, el - s->co);
        if (d)
            memcpy(d + s->co, src, k);
        src += k;
        len -= k;
        scat_advance(s, k);
    }
}

/* recvmsg() of up to want payload bytes into the entries from the cursor on. */
ssize_t tcpb_scat_recv(conn_t *c, size_t want)
{
    struct tcpb_rx *s = c->brx;
    struct iovec iov[SCAT_IOV];
    int n = 0;
    uint32_t i = s->ci;
    uint64_t off = s->co;
    size_t tot = 0;
    while (n < SCAT_IOV && i < s->n && tot < want) {
        uint64_t el;
        uint8_t *d = scat_ent(s, i, &el);
        size_t k = (size_t)GW_MIN(el - off, (uint64_t)(want - tot));
        if (!d) /* discarded: into scratch, a piece at a time */
            k = GW_MIN(k, (size_t)RBUF_CAP);
        if (k) {
            iov[n].iov_base = d ? d + off : c->ep->tif->scratch;
            iov[n++].iov_len = k;
            tot += k;
        }
        off += k;
        if (off == el) {
            i++;
            off = 0;
        }
    }
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
    ssize_t r = gw_sock_recvmsg(c->fd, &mh, MSG_DONTWAIT);
    if (r > 0)
        scat_advance(s, (size_t)r);
    return r;
}

/* mem is being deregistered: the frame's entries into it from the cursor
 * on are discarded, and the frame fails. */
void tcpb_rx_revoke(conn_t *c, const gw_mem_t *mem)
{
    struct tcpb_rx *s = c->brx;
    if (!s || !s->scat || s->pcs)
        return;
    for (uint32_t i = s->ci; i < s->n; i++)
        if (s->seg[i].region == mem->id && s->seg[i].dev == -1) {
            s->seg[i].dev = -2;
            if (s->st == GW_OK)
                s->st = GW_ERR_INVALID_KEY;
        }
}

/* 1: the frame's payload is scattered (started); 0: entry by entry. */
static int rx_scat(conn_t *c, struct tcpb_rx *s)
{
    tcp_ep_t *ep = c->ep;
    if (s->n < 2 || !s->total || s->total / s->n >= DIRECT_MIN)
        return 0;
    for (uint32_t i = 0; i < s->n; i++) {
        if (s->pcs) {
            if (s->pcs[i].ldev >= 0)
                return 0;
            continue;
        }
        gw_status_t st;
        gw_mem_t *m = seg_region(ep, &s->seg[i], GW_ACCESS_REMOTE_WRITE, &st);
        if (st == GW_OK && mem_dev(m) >= 0)
            return 0;
        s->seg[i].dev = st == GW_OK ? -1 : -2;
        if (st != GW_OK && s->st == GW_OK)
            s->st = st;
    }
    s->scat = 1;
    s->ci = 0;
    s->co = 0;
    scat_advance(s, 0);
    c->cur_status = GW_OK;
    tcp_begin_payload(c, NULL, (size_t)s->total, (size_t)s->total);
    c->bscat = 1;
    return 1;
}

int tcpb_rx_header(conn_t *c, const gw_tcp_hdr_t *h)
{
    tcp_ep_t *ep = c->ep;
    if (h->type == GW_TCP_BGET_RESP) {
        gw_request_t *r = tcp_slot_get(ep, h->id, 1u << GW_OP_BATCH);
        tcpb_op_t *op = r ? tcp_rq(r)->bop : NULL;
        if (!op)
            return tcp_protocol_error(c, "batch get response for unknown operation 0x%llx", (unsigned long long)h->id);
        if (h->val >= op->nruns)
            return tcp_protocol_error(c, "batch get response for run %llu of %u", (unsigned long long)h->val, op->nruns);
        if (h->aux < 0 || h->len == 0) {
            if (h->len)
                return tcp_protocol_error(c, "failed batch get response carries %llu bytes", (unsigned long long)h->len);
            if (h->aux < 0 && r->first_err == GW_OK)
                r->first_err = (gw_status_t)h->aux;
            if (--r->pending == 0)
                tcp_op_finish(ep, r, r->first_err);
            return 0;
        }
        if (h->len != op->bytes[h->val])
            return tcp_protocol_error(c, "batch get response of %llu bytes for a run of %llu", (unsigned long long)h->len,
                                  (unsigned long long)op->bytes[h->val]);
        if (rx_alloc(c, 0, 0) < 0)
            return -1;
        struct tcpb_rx *s = c->brx;
        uint32_t f = op->first[h->val];
        s->req = r;
        s->pcs = &op->pc[f]; /* the run's pieces are the segments (local addresses) */
        s->n = op->first[h->val + 1] - f;
        s->data = 1;
        s->total = h->len;
        s->i = 0;
        if (rx_scat(c, s))
            return 0;
        int w = rx_whole(c, s);
        if (w)
            return w < 0 ? -1 : 0;
        return tcpb_rx_next(c);
    }
    /* BPUT / BGET_REQ: the descriptor block first */
    uint64_t dlen = h->type == GW_TCP_BPUT ? h->addr : h->len;
    if (dlen < GW_TCP_BDESC_HDR || dlen > GW_TCP_BDESC_HDR + (uint64_t)GW_TCP_BDESC_MAX_ENT * GW_TCP_BDESC_ENT ||
        dlen > h->len)
        return tcp_protocol_error(c, "batch frame with a %llu-byte descriptor block in a %llu-byte payload",
                              (unsigned long long)dlen, (unsigned long long)h->len);
    uint32_t nseg = (uint32_t)((dlen - GW_TCP_BDESC_HDR) / GW_TCP_BDESC_ENT);
    if (rx_alloc(c, nseg, (size_t)dlen) < 0)
        return -1;
    tcp_begin_payload(c, c->brx->desc, (size_t)dlen, (size_t)dlen);
    return 0;
}

/* Looks the region of a put entry up (again at each entry: a region
 * deregistered in mid-batch fails the entries after it). */
static gw_mem_t *seg_region(tcp_ep_t *ep, const tcpb_seg_t *g, unsigned need, gw_status_t *st)
{
    gw_mem_t *m;
    *st = gw_region_check(CORE(ep), g->region, g->addr, g->len, need, &m);
    return m;
}

/* The descriptor block of a BGET_REQ is in: answer it. */
static int answer_get(conn_t *c, struct tcpb_rx *s)
{
    tcp_ep_t *ep = c->ep;
    const gw_tcp_hdr_t *h = &c->cur;
    gw_status_t st = GW_OK;
    uint64_t total = 0;
    for (uint32_t i = 0; i < s->n && st == GW_OK; i++) {
        seg_region(ep, &s->seg[i], GW_ACCESS_REMOTE_READ, &st);
        total += s->seg[i].len;
    }
    uint8_t *buf = NULL;
    tcp_gbuf_t *gb = NULL;
    if (st == GW_OK && total) { /* GPU entries of one device: gathered by one launch */
        int dev = -1;
        size_t nd = 0;
        for (uint32_t i = 0; i < s->n && dev != -2; i++) {
            int d = mem_dev(seg_region(ep, &s->seg[i], GW_ACCESS_REMOTE_READ, &st));
            if (d >= 0 && s->seg[i].len) {
                dev = dev >= 0 && d != dev ? -2 : d;
                nd += (s->seg[i].len + GW_COPY_DESC_MAX_LEN - 1) / GW_COPY_DESC_MAX_LEN;
            }
        }
        size_t doff = ((size_t)total + 63) & ~(size_t)63;
        if (dev >= 0 && tcp_kern_ready(ep->tif, dev) &&
            (gb = tcp_gbuf_get(ep->tif, dev, doff + nd * sizeof(gw_copy_desc_t))) != NULL) {
            gw_copy_desc_t *d = (gw_copy_desc_t *)(gb->host + doff);
            uint32_t kd = 0;
            uint8_t *w = gb->host;
            for (uint32_t i = 0; i < s->n; i++) {
                const tcpb_seg_t *g = &s->seg[i];
                if (mem_dev(seg_region(ep, g, GW_ACCESS_REMOTE_READ, &st)) < 0)
                    memcpy(w, (const void *)(uintptr_t)g->addr, g->len);
                else
                    for (uint64_t o = 0; o < g->len; o += GW_COPY_DESC_MAX_LEN)
                        d[kd++] = (gw_copy_desc_t){g->addr + o, (uint64_t)(uintptr_t)(w + o),
                                                   GW_MIN(g->len - o, (uint64_t)GW_COPY_DESC_MAX_LEN)};
                w += g->len;
            }
            int ev = tcp_kern_launch(ep->tif, gb, 0, d, kd, TCP_KCOPY_NONE, 0, 0);
            if (ev < 0 || tcp_kern_wait(ep->tif, gb, ev) != GW_OK) {
                tcp_gbuf_put(ep->tif, gb);
                tcp_fail(ep, GW_ERR_CUDA, "tcp: gathering GPU entries of a batch get failed: %s", CORE(ep)->errbuf);
                return -1;
            }
            buf = gb->host;
        }
    }
    if (st == GW_OK && total && !gb) {
        buf = gw_op_state_get(CORE(ep), total);
        if (!buf) {
            tcp_fail(ep, GW_ERR_NOMEM, "out of memory answering a batch get of %llu bytes", (unsigned long long)total);
            return -1;
        }
        uint8_t *w = buf;
        for (uint32_t i = 0; i < s->n && st == GW_OK; i++) {
            gw_mem_t *m = seg_region(ep, &s->seg[i], GW_ACCESS_REMOTE_READ, &st);
            const void *src = (const void *)(uintptr_t)s->seg[i].addr;
            if (mem_dev(m) >= 0)
                st = gw_staging_copy_sync(CORE(ep), mem_dev(m), w, src, s->seg[i].len);
            else
                memcpy(w, src, s->seg[i].len);
            w += s->seg[i].len;
        }
        if (st != GW_OK) {
            gw_op_state_put(CORE(ep), buf);
            buf = NULL;
        }
    }
    gw_tcp_hdr_t resp = {.type = GW_TCP_BGET_RESP, .aux = st, .id = h->id, .len = st == GW_OK ? total : 0,
                         .val = h->val};
    tcpb_rx_drop(c);
    tx_item_t *t = tcp_tx_alloc(ep);
    if (!t) {
        if (gb)
            tcp_gbuf_put(ep->tif, gb);
        else
            gw_op_state_put(CORE(ep), buf);
        tcp_fail(ep, GW_ERR_NOMEM, "out of memory answering a batch get");
        return -1;
    }
    gw_tcp_hdr_encode(t->hdr, &resp);
    if (gb)
        t->gb = gb; /* our reference goes to the frame */
    else
        t->owned = buf;
    t->payload = buf;
    t->paylen = st == GW_OK ? total : 0;
    tcp_tx_push(c, t);
    return c->want_out || c->stg_wait ? 0 : tcp_conn_flush(c);
}

/* A payload part of a batch frame ended (the block, or one entry's bytes):
 * start the next entry, or finish the frame. */
int tcpb_rx_next(conn_t *c)
{
    tcp_ep_t *ep = c->ep;
    struct tcpb_rx *s = c->brx;
    const gw_tcp_hdr_t *h = &c->cur;
    if (!s)
        return tcp_protocol_error(c, "batch payload without its state");
    if (!s->data) { /* the descriptor block is in */
        char why[200];
        uint32_t n;
        gw_status_t st = gw_tcp_bdesc_check(s->desc, s->dlen, &n, why, sizeof(why));
        if (st != GW_OK)
            return tcp_protocol_error(c, "%s", why);
        uint64_t sum = 0;
        for (uint32_t i = 0; i < n; i++) {
            tcpb_seg_t *g = &s->seg[i];
            gw_tcp_bdesc_entry(s->desc, i, &g->region, &g->addr, &g->len);
            if (__builtin_add_overflow(sum, g->len, &sum))
                return tcp_protocol_error(c, "batch entry lengths overflow");
        }
        s->n = n;
        s->data = 1;
        s->i = 0;
        if (h->type == GW_TCP_BGET_REQ)
            return answer_get(c, s);
        if (sum != h->len - s->dlen)
            return tcp_protocol_error(c, "batch frame of %llu data bytes for entries of %llu",
                                  (unsigned long long)(h->len - s->dlen), (unsigned long long)sum);
        s->total = sum;
        if (rx_scat(c, s))
            return 0;
        int w = rx_whole(c, s);
        if (w)
            return w < 0 ? -1 : 0;
    } else if (s->scat) { /* the frame's bytes are in their entries */
        c->bscat = 0;
        s->i = s->n;
    } else if (s->whole) { /* the frame's bytes are in the pinned buffer */
        int w = rx_whole_finish(c, s);
        if (w < 0)
            return -1;
        if (w) { /* done when the scatter launch is (tcpb_kdone_poll) */
            c->in_payload = 0;
            tcpb_rx_drop(c);
            if (c->cur.type == GW_TCP_BGET_RESP)
                c->rx_req = NULL;
            return 0;
        }
    } else if (s->started) { /* an entry ended */
        if (c->dst_region) {
            c->dst_region->incoming--;
            c->dst_region = NULL;
        }
        if (c->cur_status != GW_OK && s->st == GW_OK)
            s->st = c->cur_status;
        s->i++;
    }
    s->started = 1;
    for (; s->i < s->n; s->i++) {
        if (h->type == GW_TCP_BGET_RESP) {
            const tcpb_piece_t *p = &s->pcs[s->i];
            c->cur_status = GW_OK;
            tcp_begin_payload_dev(c, (uint8_t *)(uintptr_t)p->laddr, p->len, p->len, p->ldev);
            if (p->len)
                return 0;
            continue;
        }
        tcpb_seg_t *g = &s->seg[s->i];
        gw_status_t st;
        gw_mem_t *m = seg_region(ep, g, GW_ACCESS_REMOTE_WRITE, &st);
        if (st != GW_OK && s->st == GW_OK)
            s->st = st;
        c->cur_status = GW_OK;
        c->dst_region = m;
        if (m)
            m->incoming++;
        tcp_begin_payload_dev(c, m ? (uint8_t *)(uintptr_t)g->addr : NULL, m ? g->len : 0, g->len, mem_dev(m));
        if (g->len)
            return 0;
        if (m) {
            m->incoming--;
            c->dst_region = NULL;
        }
    }
    /* the frame is complete */
    c->in_payload = 0;
    gw_status_t st = s->st;
    uint64_t total = s->total;
    gw_request_t *r = s->req;
    tcpb_rx_drop(c);
    if (h->type == GW_TCP_BGET_RESP) {
        c->rx_req = NULL;
        r->done += total;
        if (--r->pending == 0)
            tcp_op_finish(ep, r, r->first_err);
        return 0;
    }
    return tcp_send_lazy(c, GW_TCP_PUT_ACK, st, h->id, st == GW_OK ? total : 0);
}
