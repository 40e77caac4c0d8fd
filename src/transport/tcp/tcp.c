/* tcp.c - the tcp transport: striped non-blocking streams on the context's
 * epoll loop, zero extra copies (writev from and recv into user memory).
 * Frame format and stream roles: tcp.h. */
#include "transport/tcp/tcp.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/sock.h"
#include "mem/staging.h"
#include "transport/tcp/tcp_pool.h"

#define RBUF_CAP (256 * 1024)
#define DIRECT_MIN (32 * 1024) /* payload left at least this: recv() straight into place */
#define MAX_EAGER_RECV (64ull << 20) /* largest eager message we accept from a peer */
#define IOV_MAX_BATCH 256 /* iovecs per sendmsg: 128 small frames */
#define CORK_PAYLOAD_MAX (16 * 1024) /* frames this small may wait for the next progress call */
#define CORK_FRAMES 128  /* a corked stream writes once this many frames wait */
#define IOV_MAX_RUN 1024 /* UIO_MAXIOV: a batch run (tcp_batch.c) is one frame of many iovecs */
#define TX_SLOTS 4       /* staging slots one GPU-sourced frame keeps in flight */
#define RX_INFLIGHT 2    /* host-to-device copies one stream keeps in flight */
#define MAX_DEV 16

typedef struct tx_item {
    struct tx_item *next;
    uint8_t hdr[GW_TCP_HDR];
    const uint8_t *payload;
    size_t paylen;
    const struct iovec *iov; /* payload as iovecs (batch runs, tcp_batch.c), else NULL */
    uint32_t niov;
    size_t off;          /* bytes of header + payload already written */
    gw_request_t *req;   /* completed when fully written (eager sends) */
    uint64_t region_id;  /* GET_RESP streaming from a region */
    void *owned;         /* payload copy made when the region was revoked */
    /* GPU-sourced payload: staged through pinned slots, copied ahead of the socket */
    int gpu_dev;         /* CUDA ordinal, -1 for host memory */
    size_t staged;       /* payload bytes whose device-to-host copy was started */
    size_t sl_used;      /* bytes of the head slot already written */
    gw_stage_slot_t *sl[TX_SLOTS];
    size_t sl_len[TX_SLOTS];
    int sl_head, sl_n;
} tx_item_t;

typedef struct tcp_ep tcp_ep_t;

typedef struct conn {
    tcp_ep_t *ep;
    int idx;
    int fd;
    gw_io_t io;
    int want_out;
    int tx_full;         /* a send met EAGAIN and our queue has not run dry since (see tx_taken) */
    uint64_t tx_unproven; /* bytes the kernel took since the last one that proved the peer alive */
    int in_flush;        /* conn_flush is on the stack: completions it runs must not re-enter it */
    int lazy;            /* holds acknowledgements not yet written (see send_lazy) */
    uint64_t lazy_gen;
    gw_list_t lazy_link;
    /* small frames posted back to back go out together (see conn_kick) */
    int corked;          /* on tif->cork: written by the next progress call */
    unsigned ncorked;    /* frames queued since it was corked */
    uint64_t wrote_gen;  /* tif->gen of the last write a post started */
    gw_list_t cork_link;
    tx_item_t *txh, *txt;
    size_t tx_bytes;     /* queued, for choosing the least-loaded stream */
    uint8_t *rbuf;
    size_t rpos, rlen;
    /* payload being received */
    int in_payload;
    gw_tcp_hdr_t cur;
    uint8_t *dst;
    size_t keep, consumed, remaining;
    gw_mem_t *dst_region;  /* region written into (revocation switches to discard) */
    gw_status_t cur_status;
    gw_request_t *rx_req;  /* receive or get being filled */
    gw_unexp_t *rx_unexp;  /* unexpected eager message being filled */
    /* payload going to GPU memory: through pinned slots, copied to the device behind the socket */
    int rx_dev;            /* CUDA ordinal, -1 for host memory */
    gw_stage_slot_t *rx_slot;
    size_t rx_fill, rx_slot_off;
    gw_stage_slot_t *rx_in[RX_INFLIGHT];
    int rx_nin;
    int stg_wait;          /* a GPU-sourced frame waits for a copy: poll it */
    gw_list_t stg_link;
    /* large payloads moved by a helper thread (tcp_pool.h): while tx_busy the
     * head frame and the socket's sending side are the worker's, while
     * rx_busy the payload being received and the socket's receiving side */
    int tx_busy, rx_busy;
    int hdr_only;          /* next read: just the next header (a worker may take its payload) */
    int worker;
    gw_tcp_job_t txj, rxj;
    struct tcpb_rx *brx;   /* batch frame being received (tcp_batch.c) */
} conn_t;

typedef struct tcp_iface {
    gw_tl_iface_t super;
    gw_list_t eps;
    gw_list_t lazy;      /* streams holding acknowledgements, oldest first */
    gw_list_t cork;      /* streams holding small frames for the next progress call */
    uint64_t gen;        /* progress calls seen */
    long streams;
    uint64_t stripe_min, chunk, eager_max, sockbuf;
    uint8_t *scratch; /* discard target */
    uint64_t last_timer_ns;
    gw_staging_t *stg_tx[MAX_DEV], *stg_rx[MAX_DEV]; /* per device, made on first use */
    gw_list_t stg_wait;  /* streams whose head frame waits for a device-to-host copy */
    gw_tcp_pool_t *pool; /* helper threads, NULL when GPUWIRE_TCP_THREADS=0 */
    long threads;
    uint64_t thread_min;
    unsigned next_worker;
} tcp_iface_t;

typedef struct dnotify {
    uint64_t seq, val;
    uint8_t flags;       /* GW_TCP_F_COUNTED, DN_DROPPED */
} dnotify_t;
#define DN_DROPPED 0x80  /* its batch failed: not sent (tcp_batch.c) */

struct tcp_ep {
    gw_tl_ep_t super;
    tcp_iface_t *tif;
    gw_list_t link;
    conn_t conns[GW_TCP_MAX_STREAMS];
    int nconns;          /* negotiated */
    int local_streams;
    /* request slots: id = gen << 32 | index */
    gw_request_t **slots;
    uint32_t *gens;
    uint32_t *freelist;
    uint32_t nslots, nfree, used_slots;
    tx_item_t *txfree;
    dnotify_t *dn;       /* deferred notifications, FIFO ring */
    size_t dn_head, dn_count, dn_cap;
    uint32_t striped_puts;
    int failed, peer_closed, closing;
    uint64_t last_ping_ns;
};

enum { TLF_STRIPED = 1 };

static inline tcp_ep_t *to_ep(gw_tl_ep_t *e) { return gw_container_of(e, tcp_ep_t, super); }
static inline tcp_iface_t *to_if(gw_tl_iface_t *i) { return gw_container_of(i, tcp_iface_t, super); }
static inline gw_ep_base_t *B(tcp_ep_t *ep) { return ep->super.base; }
static inline gw_core_t *CORE(tcp_ep_t *ep) { return ep->tif->super.core; }

/* ---- GPU staging ------------------------------------------------------------------- */
static gw_staging_t *stg_get(tcp_iface_t *tif, int dev, int rx)
{
    if (dev < 0 || dev >= MAX_DEV) {
        gw_err(tif->super.core, GW_ERR_INVALID, "tcp staging: CUDA device %d out of range", dev);
        return NULL;
    }
    gw_staging_t **p = rx ? &tif->stg_rx[dev] : &tif->stg_tx[dev];
    if (!*p && gw_staging_create(tif->super.core, dev, 0, 0, p) != GW_OK)
        *p = NULL;
    return *p;
}

/* Waits (bounded) for a slot's copy, then returns it to its ring. */
static gw_status_t slot_finish(tcp_iface_t *tif, gw_staging_t *st, gw_stage_slot_t *sl)
{
    uint64_t deadline = gw_now_ns() + 10000000000ull;
    int r;
    while ((r = gw_staging_test(st, sl)) == 0 && gw_now_ns() < deadline)
        ;
    gw_staging_release(st, sl);
    if (r == 1)
        return GW_OK;
    return r < 0 ? GW_ERR_CUDA
                 : gw_err(tif->super.core, GW_ERR_CUDA, "tcp staging: a copy did not finish within 10 s");
}

static inline int mem_dev(const gw_mem_t *m)
{
    return m && m->type == GW_MEM_CUDA ? m->cuda_device : -1;
}

/* ---- frame header ------------------------------------------------------------------ */
void gw_tcp_hdr_encode(uint8_t *b, const gw_tcp_hdr_t *h)
{
    b[0] = GW_TCP_MAGIC;
    b[1] = GW_TCP_VERSION;
    b[2] = h->type;
    b[3] = h->flags;
    gw_put_u32(b + 4, (uint32_t)h->aux);
    gw_put_u64(b + 8, h->id);
    gw_put_u64(b + 16, h->key);
    gw_put_u64(b + 24, h->addr);
    gw_put_u64(b + 32, h->len);
    gw_put_u64(b + 40, h->val);
}

gw_status_t gw_tcp_hdr_decode(const uint8_t *b, gw_tcp_hdr_t *h, char *why, size_t whylen)
{
    if (b[0] != GW_TCP_MAGIC || b[1] != GW_TCP_VERSION) {
        snprintf(why, whylen, "bad tcp frame magic/version 0x%02x/%u (expected 0x%02x/%u)", b[0], b[1],
                 GW_TCP_MAGIC, GW_TCP_VERSION);
        return GW_ERR_PROTOCOL;
    }
    h->type = b[2];
    h->flags = b[3];
    h->aux = (int32_t)gw_get_u32(b + 4);
    h->id = gw_get_u64(b + 8);
    h->key = gw_get_u64(b + 16);
    h->addr = gw_get_u64(b + 24);
    h->len = gw_get_u64(b + 32);
    h->val = gw_get_u64(b + 40);
    if (h->type < GW_TCP_PUT || h->type > GW_TCP_FRAME_MAX) {
        snprintf(why, whylen, "unknown tcp frame type %u", h->type);
        return GW_ERR_PROTOCOL;
    }
    if (h->aux > 0) {
        snprintf(why, whylen, "tcp frame type %u carries a positive status %d", h->type, h->aux);
        return GW_ERR_PROTOCOL;
    }
    return GW_OK;
}

/* ---- slots ------------------------------------------------------------------------- */
static int slot_alloc(tcp_ep_t *ep, gw_request_t *req, uint64_t *id)
{
    if (!ep->nfree) {
        uint32_t n = ep->nslots ? ep->nslots * 2 : 256;
        gw_request_t **s = realloc(ep->slots, n * sizeof(*s));
        if (!s)
            return -1;
        ep->slots = s;
        uint32_t *g = realloc(ep->gens, n * sizeof(*g));
        if (!g)
            return -1;
        ep->gens = g;
        uint32_t *f = realloc(ep->freelist, n * sizeof(*f));
        if (!f)
            return -1;
        ep->freelist = f;
        for (uint32_t i = n; i-- > ep->nslots;) {
            ep->slots[i] = NULL;
            ep->gens[i] = 1;
            ep->freelist[ep->nfree++] = i;
        }
        ep->nslots = n;
    }
    uint32_t i = ep->freelist[--ep->nfree];
    ep->slots[i] = req;
    req->slot = i;
    ep->used_slots++;
    *id = ((uint64_t)ep->gens[i] << 32) | i;
    return 0;
}

static void slot_free(tcp_ep_t *ep, gw_request_t *req)
{
    uint32_t i = req->slot;
    if (i < ep->nslots && ep->slots[i] == req) {
        ep->slots[i] = NULL;
        ep->gens[i]++;
        ep->freelist[ep->nfree++] = i;
        ep->used_slots--;
    }
}

static gw_request_t *slot_get(tcp_ep_t *ep, uint64_t id, unsigned opmask)
{
    uint32_t i = (uint32_t)id, gen = (uint32_t)(id >> 32);
    if (i >= ep->nslots || ep->gens[i] != gen || !ep->slots[i])
        return NULL;
    gw_request_t *r = ep->slots[i];
    return (opmask & (1u << r->op)) ? r : NULL;
}

/* ---- failure ----------------------------------------------------------------------- */
static void conn_close(conn_t *c);

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static void tcp_fail(tcp_ep_t *ep, gw_status_t st, const char *fmt, ...)
{
    if (ep->failed)
        return;
    ep->failed = 1;
    char msg[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    /* receives in rendezvous are held only by their slot */
    for (uint32_t i = 0; i < ep->nslots; i++) {
        gw_request_t *r = ep->slots[i];
        if (!r)
            continue;
        slot_free(ep, r);
        if (r->op == GW_OP_RECV)
            gw_ep_recv_done(B(ep), r, r->length, r->rtag, st);
    }
    for (int i = 0; i < ep->nconns; i++)
        conn_close(&ep->conns[i]);
    ep->dn_count = 0;
    if (ep->striped_puts)
        ep->striped_puts = 0;
    gw_ep_fail(B(ep), st, "%s", msg);
}

/* A failed send/recv.  ETIMEDOUT is the kernel enforcing GPUWIRE_PEER_TIMEOUT_MS
 * (TCP_USER_TIMEOUT, core/sock.c) on unacknowledged data: the same verdict as
 * our own timer, whichever notices first. */
static int timed_out_quietly(tcp_ep_t *ep);

static void sock_fail(tcp_ep_t *ep, int e, const char *op, int idx)
{
    if (e != ETIMEDOUT && timed_out_quietly(ep))
        e = ETIMEDOUT;
    if (e == ETIMEDOUT)
        tcp_fail(ep, GW_ERR_PEER_TIMEOUT,
                 "%s on tcp stream %d with %s failed: %s (unacknowledged data for GPUWIRE_PEER_TIMEOUT_MS=%ld)", op,
                 idx, B(ep)->peer, strerror(e), CORE(ep)->peer_timeout_ms);
    else
        tcp_fail(ep, GW_ERR_CONN_RESET, "%s on tcp stream %d with %s failed: %s", op, idx, B(ep)->peer, strerror(e));
}

/* End of stream on c (seen by the progress thread or a helper thread): an
 * orderly close when the peer said BYE or we are closing, a peer timeout when
 * the kernel gave up on our data, else the peer vanished `how`. */
static void stream_ended(conn_t *c, const char *how)
{
    tcp_ep_t *ep = c->ep;
    if (ep->peer_closed || ep->closing) {
        conn_close(c);
        return;
    }
    if (timed_out_quietly(ep))
        sock_fail(ep, ETIMEDOUT, "recv", c->idx);
    else
        tcp_fail(ep, GW_ERR_CONN_RESET, "peer %s closed tcp stream %d %s (process exited or crashed?)", B(ep)->peer,
                 c->idx, how);
}

/* ---- transmit ---------------------------------------------------------------------- */
static tx_item_t *tx_alloc(tcp_ep_t *ep)
{
    tx_item_t *t = ep->txfree;
    if (t)
        ep->txfree = t->next;
    else if (!(t = malloc(sizeof(*t))))
        return NULL;
    t->next = NULL;
    t->payload = NULL;
    t->paylen = 0;
    t->iov = NULL;
    t->niov = 0;
    t->off = 0;
    t->req = NULL;
    t->region_id = 0;
    t->owned = NULL;
    t->gpu_dev = -1;
    t->staged = t->sl_used = 0;
    t->sl_head = t->sl_n = 0;
    return t;
}

static void tx_drop_slots(tcp_ep_t *ep, tx_item_t *t)
{
    if (!t->sl_n)
        return;
    gw_staging_t *st = stg_get(ep->tif, t->gpu_dev, 0);
    while (t->sl_n) {
        if (st)
            slot_finish(ep->tif, st, t->sl[t->sl_head]);
        t->sl_head = (t->sl_head + 1) % TX_SLOTS;
        t->sl_n--;
    }
}

static void tx_release(tcp_ep_t *ep, tx_item_t *t)
{
    tx_drop_slots(ep, t);
    free(t->owned);
    t->owned = NULL;
    t->next = ep->txfree;
    ep->txfree = t;
}

static void check_deferred(tcp_ep_t *ep);
/* batched transfers (tcp_batch.c, included at the end) */
struct tcpb_rx;
static int tcpb_iov_fill(tx_item_t *t, struct iovec *iov, int *n, int cap);
static int tcpb_rx_header(conn_t *c, const gw_tcp_hdr_t *h);
static int tcpb_rx_next(conn_t *c);
static void tcpb_rx_drop(conn_t *c);
static gw_status_t tcpb_batch(gw_tl_ep_t *tep, gw_request_t *req);

/* The progress thread watches for reading unless a worker reads the stream. */
static void conn_update_io(conn_t *c)
{
    if (c->fd >= 0)
        gw_io_mod(CORE(c->ep), &c->io, (c->rx_busy ? 0 : EPOLLIN) | (c->want_out ? EPOLLOUT : 0));
}

/* The kernel took n bytes of ours on stream c.  Small frames prove
 * nothing: a frozen process's kernel takes our PINGs, acknowledgements and
 * get requests for ever.  Data does, up to a point: while the buffers are
 * known full (a send met EAGAIN and our queue has not run dry since) bytes
 * taken mean the process read; before that, every TX_PROOF bytes count as
 * life - a frozen peer takes at most its buffers' worth, then our sends stop
 * and its silence shows within GPUWIRE_PEER_TIMEOUT_MS. */
#define TX_PROOF (64u << 10)
static void tx_taken(conn_t *c, size_t n)
{
    c->tx_unproven += n;
    if (c->tx_full || c->tx_unproven >= TX_PROOF) {
        c->ep->super.base->last_rx_ns = gw_now_ns();
        c->tx_unproven = 0;
    }
}

static void conn_set_out(conn_t *c, int on)
{
    if (c->want_out == on || c->fd < 0)
        return;
    c->want_out = on;
    conn_update_io(c);
}

static void stg_wait_add(conn_t *c)
{
    if (!c->stg_wait) {
        c->stg_wait = 1;
        gw_list_push_back(&c->ep->tif->stg_wait, &c->stg_link);
    }
    gw_core_signal(CORE(c->ep));
}

static void tx_done(conn_t *c, tx_item_t *t);

/* Writes the head frame whose payload is in GPU memory: device-to-host
 * copies run up to TX_SLOTS slots ahead of the socket.  1: frame written;
 * 0: waiting for the socket or a copy; -1: the endpoint failed. */
static int flush_gpu_head(conn_t *c)
{
    tcp_ep_t *ep = c->ep;
    tx_item_t *t = c->txh;
    gw_staging_t *st = stg_get(ep->tif, t->gpu_dev, 0);
    if (!st) {
        tcp_fail(ep, GW_ERR_CUDA, "tcp: cannot stage GPU memory of device %d: %s", t->gpu_dev, CORE(ep)->errbuf);
        return -1;
    }
    size_t chunk = gw_staging_chunk(st);
    for (;;) {
        while (t->staged < t->paylen && t->sl_n < TX_SLOTS) {
            gw_stage_slot_t *sl = gw_staging_acquire(st);
            if (!sl)
                break;
            size_t n = GW_MIN(chunk, t->paylen - t->staged);
            if (gw_staging_d2h(st, sl, t->payload + t->staged, n) != GW_OK) {
                gw_staging_release(st, sl);
                tcp_fail(ep, GW_ERR_CUDA, "tcp: device-to-host staging copy failed: %s", CORE(ep)->errbuf);
                return -1;
            }
            int i = (t->sl_head + t->sl_n) % TX_SLOTS;
            t->sl[i] = sl;
            t->sl_len[i] = n;
            t->sl_n++;
            t->staged += n;
        }
        const void *src;
        size_t left;
        if (t->off < GW_TCP_HDR) {
            src = t->hdr + t->off;
            left = GW_TCP_HDR - t->off;
        } else if (t->off - GW_TCP_HDR == t->paylen) {
            tx_done(c, t);
            return 1;
        } else {
            if (!t->sl_n) { /* every slot is taken by other transfers */
                stg_wait_add(c);
                return 0;
            }
            gw_stage_slot_t *sl = t->sl[t->sl_head];
            int r = gw_staging_test(st, sl);
            if (r < 0) {
                tcp_fail(ep, GW_ERR_CUDA, "tcp: device-to-host staging copy failed: %s", CORE(ep)->errbuf);
                return -1;
            }
            if (r == 0) {
                stg_wait_add(c);
                return 0;
            }
            src = (const uint8_t *)sl->host + t->sl_used;
            left = t->sl_len[t->sl_head] - t->sl_used;
        }
        ssize_t w = send(c->fd, src, left, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                c->tx_full = 1;
                conn_set_out(c, 1);
                return 0;
            }
            sock_fail(ep, errno, "send", c->idx);
            return -1;
        }
        int in_payload = t->off >= GW_TCP_HDR;
        tx_taken(c, (size_t)w);
        t->off += (size_t)w;
        c->tx_bytes -= GW_MIN(c->tx_bytes, (size_t)w);
        if (in_payload) {
            t->sl_used += (size_t)w;
            if (t->sl_used == t->sl_len[t->sl_head]) {
                gw_staging_release(st, t->sl[t->sl_head]);
                t->sl_head = (t->sl_head + 1) % TX_SLOTS;
                t->sl_n--;
                t->sl_used = 0;
            }
        }
    }
}

/* Pops a fully written head frame and completes what waited for it. */
static void tx_done(conn_t *c, tx_item_t *t)
{
    tcp_ep_t *ep = c->ep;
    c->txh = t->next;
    if (!c->txh)
        c->txt = NULL;
    gw_request_t *r = t->req;
    tx_release(ep, t);
    if (r) { /* eager send: the message is on its way */
        r->length = r->len;
        gw_ep_op_done(B(ep), r, GW_OK);
        check_deferred(ep);
    }
}

/* A frame whose payload a helper thread moves (GPUWIRE_TCP_THREAD_MIN). */
static inline int offloadable(const tcp_iface_t *tif, size_t paylen)
{
    return tif->pool && paylen >= tif->thread_min;
}

static void pool_trouble(tcp_iface_t *tif, gw_status_t st)
{
    gw_log(GW_LOG_WARN, "tcp: helper threads unavailable (%s: %s); moving every byte on the progress thread",
           gw_status_name(st), tif->super.core->errbuf);
    tif->thread_min = UINT64_MAX;
}

/* Hands the head frame to the stream's helper thread.  1: handed over. */
static int offload_tx(conn_t *c)
{
    tcp_iface_t *tif = c->ep->tif;
    tx_item_t *t = c->txh;
    if (!offloadable(tif, t->paylen) || t->sl_n || t->iov)
        return 0;
    gw_tcp_job_t *j = &c->txj;
    j->rx = 0;
    j->fd = c->fd;
    j->dev = t->gpu_dev;
    j->owner = c;
    memcpy(j->hdr, t->hdr, GW_TCP_HDR);
    j->src = t->payload;
    j->dst = NULL;
    j->len = GW_TCP_HDR + t->paylen;
    j->keep = 0;
    j->off = t->off;
    j->nnext = 0; /* large frames queued behind it go along: one hand-over for several */
    for (tx_item_t *n = t->next; n && j->nnext < GW_TCP_JOB_FRAMES - 1 && offloadable(tif, n->paylen) && !n->iov;
         n = n->next) {
        gw_tcp_next_frame_t *f = &j->next[j->nnext++];
        memcpy(f->hdr, n->hdr, GW_TCP_HDR);
        f->src = n->payload;
        f->len = GW_TCP_HDR + n->paylen;
        f->dev = n->gpu_dev;
    }
    gw_status_t st = gw_tcp_pool_submit(tif->pool, c->worker, j);
    if (st != GW_OK) {
        pool_trouble(tif, st);
        return 0;
    }
    c->tx_busy = 1;
    conn_set_out(c, 0); /* the worker watches the socket now */
    return 1;
}

/* Writes as much of the queue as the socket takes.  Returns -1 if the
 * endpoint failed. */
static int conn_flush_(conn_t *c);

static void conn_uncork(conn_t *c)
{
    if (c->corked) {
        c->corked = 0;
        gw_list_del(&c->cork_link);
    }
}

static int conn_flush(conn_t *c)
{
    if (c->in_flush) /* the running flush picks up what was queued */
        return 0;
    c->in_flush = 1;
    int r = conn_flush_(c);
    c->in_flush = 0;
    return r;
}

static int conn_flush_(conn_t *c)
{
    tcp_ep_t *ep = c->ep;
    while (c->txh && c->fd >= 0) {
        if (c->tx_busy || offload_tx(c))
            return 0;
        if (c->txh->gpu_dev >= 0) {
            int r = flush_gpu_head(c);
            if (r <= 0)
                return r;
            continue;
        }
        struct iovec iov[IOV_MAX_RUN];
        int n = 0;
        for (tx_item_t *t = c->txh; t && t->gpu_dev < 0 && n < IOV_MAX_BATCH - 1; t = t->next) {
            if (n && offloadable(ep->tif, t->paylen) && !t->iov)
                break; /* goes to a helper thread once it is the head */
            if (t->iov) { /* a batch run: header and payload from its iovecs */
                if (tcpb_iov_fill(t, iov, &n, IOV_MAX_RUN))
                    break; /* the array is full */
                continue;
            }
            if (t->off < GW_TCP_HDR) {
                iov[n].iov_base = t->hdr + t->off;
                iov[n].iov_len = GW_TCP_HDR - t->off;
                n++;
                if (t->paylen) {
                    iov[n].iov_base = (void *)t->payload;
                    iov[n].iov_len = t->paylen;
                    n++;
                }
            } else {
                iov[n].iov_base = (void *)(t->payload + (t->off - GW_TCP_HDR));
                iov[n].iov_len = t->paylen - (t->off - GW_TCP_HDR);
                n++;
            }
        }
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t w = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                c->tx_full = 1;
                conn_set_out(c, 1);
                return 0;
            }
            sock_fail(ep, errno, "send", c->idx);
            return -1;
        }
        size_t left = (size_t)w;
        /* a long transfer in one direction (our PINGs queue behind it) is
         * not silence, but bytes a frozen peer's kernel takes are no life
         * (see tx_taken) */
        if (w > 0)
            tx_taken(c, (size_t)w);
        c->tx_bytes -= GW_MIN(c->tx_bytes, left);
        while (left && c->txh) {
            tx_item_t *t = c->txh;
            size_t rem = GW_TCP_HDR + t->paylen - t->off;
            if (left < rem) {
                t->off += left;
                left = 0;
                break;
            }
            left -= rem;
            tx_done(c, t);
        }
        /* a partial item stays at the head; loop to try again */
    }
    c->tx_full = 0; /* our queue ran dry: the buffers are no longer known full */
    conn_set_out(c, 0);
    if (c->lazy) {
        c->lazy = 0;
        gw_list_del(&c->lazy_link);
    }
    conn_uncork(c);
    return 0;
}

static void tx_push(conn_t *c, tx_item_t *t)
{
    t->next = NULL;
    if (c->txt)
        c->txt->next = t;
    else
        c->txh = t;
    c->txt = t;
    c->tx_bytes += GW_TCP_HDR + t->paylen;
}

/* After a frame was queued by a post: write now, unless the stream is backed
 * up (the socket or a staging copy will call back) or the frame is corked.
 * The first small frame posted after a progress call goes out at once (a
 * lone operation's latency is untouched); more posted before the next
 * progress call wait for it, or for CORK_FRAMES of them, and leave in one
 * sendmsg: a window of small puts costs one system call per 128, not one
 * each.  The context fd is signalled, so a caller that sleeps on it wakes
 * to write them. */
static int conn_kick(conn_t *c, size_t paylen, int gpu_dev)
{
    tcp_iface_t *tif = c->ep->tif;
    if (c->want_out || c->stg_wait)
        return 0;
    if (paylen <= CORK_PAYLOAD_MAX && gpu_dev < 0) {
        if (c->corked) {
            if (++c->ncorked < CORK_FRAMES)
                return 0;
        } else if (c->wrote_gen == tif->gen) {
            c->corked = 1;
            c->ncorked = 1;
            gw_list_push_back(&tif->cork, &c->cork_link);
            gw_core_signal(tif->super.core);
            return 0;
        }
    }
    c->wrote_gen = tif->gen;
    return conn_flush(c);
}

/* Queues a frame and writes it now when the stream is not backed up. */
static int send_frame_dev(conn_t *c, const gw_tcp_hdr_t *h, const void *payload, size_t paylen,
                          gw_request_t *req, int gpu_dev)
{
    tcp_ep_t *ep = c->ep;
    if (c->fd < 0)
        return -1;
    tx_item_t *t = tx_alloc(ep);
    if (!t) {
        tcp_fail(ep, GW_ERR_NOMEM, "out of memory queueing a frame to %s", B(ep)->peer);
        return -1;
    }
    gw_tcp_hdr_encode(t->hdr, h);
    t->payload = payload;
    t->paylen = paylen;
    t->req = req;
    t->gpu_dev = paylen ? gpu_dev : -1;
    tx_push(c, t);
    return conn_kick(c, paylen, t->gpu_dev);
}

static int send_frame(conn_t *c, const gw_tcp_hdr_t *h, const void *payload, size_t paylen,
                      gw_request_t *req)
{
    return send_frame_dev(c, h, payload, paylen, req, -1);
}

static int send_ctl(tcp_ep_t *ep, conn_t *c, uint8_t type, int32_t aux, uint64_t id, uint64_t key,
                    uint64_t addr, uint64_t len, uint64_t val)
{
    gw_tcp_hdr_t h = {.type = type, .aux = aux, .id = id, .key = key, .addr = addr, .len = len, .val = val};
    (void)ep;
    return send_frame(c, &h, NULL, 0, NULL);
}

/* Acknowledgements wait for the next frame on the stream to carry them (one
 * write instead of two in request/response patterns), or for the next
 * progress call, which the context fd is woken for. */
static int send_lazy(conn_t *c, uint8_t type, int32_t aux, uint64_t id, uint64_t len)
{
    tcp_ep_t *ep = c->ep;
    if (c->fd < 0)
        return -1;
    tx_item_t *t = tx_alloc(ep);
    if (!t) {
        tcp_fail(ep, GW_ERR_NOMEM, "out of memory queueing a frame to %s", B(ep)->peer);
        return -1;
    }
    gw_tcp_hdr_t h = {.type = type, .aux = aux, .id = id, .len = len};
    gw_tcp_hdr_encode(t->hdr, &h);
    tx_push(c, t);
    if (!c->lazy && !c->want_out) {
        c->lazy = 1;
        c->lazy_gen = ep->tif->gen;
        gw_list_push_back(&ep->tif->lazy, &c->lazy_link);
        gw_core_signal(CORE(ep));
    }
    return 0;
}

static conn_t *least_loaded(tcp_ep_t *ep)
{
    conn_t *best = &ep->conns[0];
    for (int i = 1; i < ep->nconns; i++) {
        conn_t *c = &ep->conns[i];
        if (c->fd >= 0 && (best->fd < 0 || c->tx_bytes < best->tx_bytes))
            best = c;
    }
    return best;
}

static int open_streams(tcp_ep_t *ep)
{
    int n = 0;
    for (int i = 0; i < ep->nconns; i++)
        n += ep->conns[i].fd >= 0;
    return n;
}

static size_t piece_size(tcp_ep_t *ep, size_t len)
{
    int n = open_streams(ep);
    size_t per = (len + (size_t)n - 1) / (size_t)(n ? n : 1);
    size_t chunk = (size_t)ep->tif->chunk;
    /* with helper threads, pieces too small for one would stay on the
     * progress thread: fewer, larger pieces (fewer streams) move faster */
    if (ep->tif->pool && ep->tif->thread_min != UINT64_MAX && per < ep->tif->thread_min)
        per = (size_t)GW_MIN((uint64_t)len, ep->tif->thread_min);
    return per < chunk ? per : chunk;
}

/* ---- deferred notifications ------------------------------------------------------- */
static int dn_push(tcp_ep_t *ep, uint64_t seq, uint64_t val, uint8_t flags)
{
    if (ep->dn_count == ep->dn_cap) {
        size_t ncap = ep->dn_cap ? ep->dn_cap * 2 : 32;
        dnotify_t *q = malloc(ncap * sizeof(*q));
        if (!q)
            return -1;
        for (size_t i = 0; i < ep->dn_count; i++)
            q[i] = ep->dn[(ep->dn_head + i) % ep->dn_cap];
        free(ep->dn);
        ep->dn = q;
        ep->dn_cap = ncap;
        ep->dn_head = 0;
    }
    ep->dn[(ep->dn_head + ep->dn_count) % ep->dn_cap] = (dnotify_t){seq, val, flags};
    ep->dn_count++;
    return 0;
}

/* A notification goes out once every put posted up to it has landed. */
static void check_deferred(tcp_ep_t *ep)
{
    while (ep->dn_count && !ep->failed) {
        dnotify_t *d = &ep->dn[ep->dn_head];
        if (gw_ep_oldest_seq(B(ep)) <= d->seq)
            return;
        gw_tcp_hdr_t h = {.type = GW_TCP_NOTIFY, .flags = d->flags & ~DN_DROPPED, .val = d->val};
        int dropped = d->flags & DN_DROPPED;
        ep->dn_head = (ep->dn_head + 1) % ep->dn_cap;
        ep->dn_count--;
        if (!dropped && send_frame(&ep->conns[0], &h, NULL, 0, NULL) < 0)
            return;
    }
}

static void op_finish(tcp_ep_t *ep, gw_request_t *r, gw_status_t st)
{
    slot_free(ep, r);
    if (r->tl_flags & TLF_STRIPED) {
        r->tl_flags &= (uint16_t)~TLF_STRIPED;
        ep->striped_puts--;
    }
    r->length = st == GW_OK ? r->len : r->done;
    gw_ep_op_done(B(ep), r, st);
    check_deferred(ep);
}

/* ---- receive ----------------------------------------------------------------------- */
static void begin_payload_dev(conn_t *c, uint8_t *dst, size_t keep, size_t total, int dev)
{
    c->in_payload = 1;
    c->dst = dst;
    c->keep = keep;
    c->consumed = 0;
    c->remaining = total;
    c->rx_dev = keep ? dev : -1;
    c->rx_slot = NULL;
    c->rx_fill = c->rx_slot_off = 0;
}

static void begin_payload(conn_t *c, uint8_t *dst, size_t keep, size_t total)
{
    begin_payload_dev(c, dst, keep, total, -1);
}

/* Starts the host-to-device copy of the filled slot. */
static int rx_submit(conn_t *c, gw_staging_t *st)
{
    if (gw_staging_h2d(st, c->rx_slot, c->dst + c->rx_slot_off, c->rx_fill) != GW_OK) {
        gw_staging_release(st, c->rx_slot);
        c->rx_slot = NULL;
        tcp_fail(c->ep, GW_ERR_CUDA, "tcp: host-to-device staging copy failed: %s", CORE(c->ep)->errbuf);
        return -1;
    }
    c->rx_in[c->rx_nin++] = c->rx_slot;
    c->rx_slot_off += c->rx_fill;
    c->rx_slot = NULL;
    c->rx_fill = 0;
    return 0;
}

/* A slot to receive GPU-bound bytes into: the current one, a free one, or
 * the oldest in-flight one once its copy is done.  NULL with *st set when
 * every slot is held elsewhere (the caller copies synchronously). */
static gw_stage_slot_t *rx_slot(conn_t *c, gw_staging_t **stp)
{
    tcp_iface_t *tif = c->ep->tif;
    gw_staging_t *st = stg_get(tif, c->rx_dev, 1);
    *stp = st;
    if (!st)
        return NULL;
    if (c->rx_slot)
        return c->rx_slot;
    if (c->rx_nin < RX_INFLIGHT)
        c->rx_slot = gw_staging_acquire(st);
    if (!c->rx_slot && c->rx_nin) {
        if (slot_finish(tif, st, c->rx_in[0]) != GW_OK) {
            memmove(c->rx_in, c->rx_in + 1, (size_t)(--c->rx_nin) * sizeof(c->rx_in[0]));
            tcp_fail(c->ep, GW_ERR_CUDA, "tcp: host-to-device staging copy failed: %s", CORE(c->ep)->errbuf);
            return NULL;
        }
        memmove(c->rx_in, c->rx_in + 1, (size_t)(--c->rx_nin) * sizeof(c->rx_in[0]));
        c->rx_slot = gw_staging_acquire(st);
    }
    c->rx_fill = 0;
    return c->rx_slot;
}

/* Stores len received bytes bound for GPU memory at payload offset c->consumed. */
static int gpu_store(conn_t *c, const uint8_t *src, size_t len)
{
    while (len) {
        gw_staging_t *st;
        gw_stage_slot_t *sl = rx_slot(c, &st);
        if (c->fd < 0)
            return -1;
        if (!sl) {
            if (!st) {
                tcp_fail(c->ep, GW_ERR_CUDA, "tcp: cannot stage into GPU memory of device %d: %s", c->rx_dev,
                         CORE(c->ep)->errbuf);
                return -1;
            }
            /* every slot is busy elsewhere: one synchronous copy */
            if (gw_staging_copy_sync(CORE(c->ep), c->rx_dev, c->dst + c->rx_slot_off, src, len) != GW_OK) {
                tcp_fail(c->ep, GW_ERR_CUDA, "tcp: host-to-device copy failed: %s", CORE(c->ep)->errbuf);
                return -1;
            }
            c->rx_slot_off += len;
            return 0;
        }
        size_t n = GW_MIN(len, gw_staging_chunk(st) - c->rx_fill);
        memcpy((uint8_t *)sl->host + c->rx_fill, src, n);
        c->rx_fill += n;
        src += n;
        len -= n;
        if (c->rx_fill == gw_staging_chunk(st) && rx_submit(c, st) < 0)
            return -1;
    }
    return 0;
}

/* The payload is complete: its bytes are in GPU memory once every copy is done. */
static int gpu_finish(conn_t *c)
{
    tcp_iface_t *tif = c->ep->tif;
    gw_staging_t *st = stg_get(tif, c->rx_dev, 1);
    int failed = 0;
    if (st && c->rx_slot && c->rx_fill && rx_submit(c, st) < 0)
        return -1;
    if (st && c->rx_slot) {
        gw_staging_release(st, c->rx_slot);
        c->rx_slot = NULL;
    }
    for (int i = 0; i < c->rx_nin; i++)
        failed |= st && slot_finish(tif, st, c->rx_in[i]) != GW_OK;
    c->rx_nin = 0;
    c->rx_dev = -1;
    if (failed) {
        tcp_fail(c->ep, GW_ERR_CUDA, "tcp: host-to-device staging copy failed: %s", CORE(c->ep)->errbuf);
        return -1;
    }
    return 0;
}

static int finish_payload(conn_t *c);

static int protocol_error(conn_t *c, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static int protocol_error(conn_t *c, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    gw_log(GW_LOG_WARN, "tcp stream %d from %s: protocol error: %s", c->idx, B(c->ep)->peer, msg);
    tcp_fail(c->ep, GW_ERR_PROTOCOL, "protocol error on tcp stream %d: %s", c->idx, msg);
    return -1;
}

/* Checks a remote access against the region table. */
static gw_status_t check_region(tcp_ep_t *ep, const gw_tcp_hdr_t *h, unsigned need, gw_mem_t **out)
{
    gw_mem_t *m = gw_hmap_get(&CORE(ep)->regions, h->key);
    *out = NULL;
    if (!m)
        return GW_ERR_INVALID_KEY;
    if (!(m->access & need))
        return GW_ERR_ACCESS;
    if (!gw_range_inside((uint64_t)(uintptr_t)m->addr, m->len, h->addr, h->len))
        return GW_ERR_OUT_OF_BOUNDS;
    *out = m;
    return GW_OK;
}

static void start_rndv_recv(tcp_ep_t *ep, gw_request_t *r, uint64_t sender_id, uint64_t msg_len,
                            uint64_t tag)
{
    uint64_t id;
    r->rtag = tag;
    r->length = msg_len;
    size_t accept = msg_len < r->len ? msg_len : r->len;
    if (accept == 0) {
        send_ctl(ep, &ep->conns[0], GW_TCP_CTS, 0, sender_id, 0, 0, 0, 0);
        gw_ep_recv_done(B(ep), r, msg_len, tag, GW_OK);
        return;
    }
    if (slot_alloc(ep, r, &id) != 0) {
        tcp_fail(ep, GW_ERR_NOMEM, "out of memory for a receive slot");
        return;
    }
    r->tl[0] = sender_id;
    r->tl[2] = accept;
    r->done = 0;
    send_ctl(ep, &ep->conns[0], GW_TCP_CTS, 0, sender_id, id, 0, accept, 0);
}

static int handle_header(conn_t *c, const gw_tcp_hdr_t *h)
{
    tcp_ep_t *ep = c->ep;
    gw_request_t *r;
    gw_mem_t *m;
    c->cur = *h;
    c->dst_region = NULL;
    c->rx_req = NULL;
    c->rx_unexp = NULL;
    c->cur_status = GW_OK;
    switch (h->type) {
    case GW_TCP_PUT:
        c->cur_status = check_region(ep, h, GW_ACCESS_REMOTE_WRITE, &m);
        c->dst_region = m;
        if (m)
            m->incoming++;
        begin_payload_dev(c, m ? (uint8_t *)(uintptr_t)h->addr : NULL, m ? h->len : 0, h->len, mem_dev(m));
        break;
    case GW_TCP_PUT_ACK:
        r = slot_get(ep, h->id, 1u << GW_OP_PUT | 1u << GW_OP_PUT_NOTIFY | 1u << GW_OP_BATCH);
        if (!r)
            return protocol_error(c, "put acknowledgement for unknown operation 0x%llx",
                                  (unsigned long long)h->id);
        if (h->aux < 0 && r->first_err == GW_OK)
            r->first_err = (gw_status_t)h->aux;
        r->done += h->len;
        if (--r->pending == 0)
            op_finish(ep, r, r->first_err);
        return 0;
    case GW_TCP_GET_REQ: {
        gw_status_t st = check_region(ep, h, GW_ACCESS_REMOTE_READ, &m);
        gw_tcp_hdr_t resp = {.type = GW_TCP_GET_RESP, .aux = st, .id = h->id,
                             .len = st == GW_OK ? h->len : 0, .val = h->val};
        tx_item_t *t = tx_alloc(ep);
        if (!t) {
            tcp_fail(ep, GW_ERR_NOMEM, "out of memory answering a get");
            return -1;
        }
        gw_tcp_hdr_encode(t->hdr, &resp);
        if (st == GW_OK) {
            t->payload = (const uint8_t *)(uintptr_t)h->addr;
            t->paylen = h->len;
            t->region_id = m->id;
            t->gpu_dev = h->len ? mem_dev(m) : -1;
        }
        tx_push(c, t);
        return c->want_out || c->stg_wait ? 0 : conn_flush(c);
    }
    case GW_TCP_GET_RESP:
        r = slot_get(ep, h->id, 1u << GW_OP_GET);
        if (!r)
            return protocol_error(c, "get response for unknown operation 0x%llx", (unsigned long long)h->id);
        if (h->aux < 0) {
            if (h->len)
                return protocol_error(c, "failed get response carries %llu bytes", (unsigned long long)h->len);
            if (r->first_err == GW_OK)
                r->first_err = (gw_status_t)h->aux;
            if (--r->pending == 0)
                op_finish(ep, r, r->first_err);
            return 0;
        }
        if (h->val > r->len || h->len > r->len - h->val)
            return protocol_error(c, "get response [%llu, +%llu) outside the %zu-byte buffer",
                                  (unsigned long long)h->val, (unsigned long long)h->len, r->len);
        c->rx_req = r;
        begin_payload_dev(c, (uint8_t *)r->buf + h->val, h->len, h->len, mem_dev(r->lmem));
        break;
    case GW_TCP_NOTIFY:
        if ((h->flags & GW_TCP_F_COUNTED) ? gw_ep_ncount_add(B(ep), h->val) != 0
                                           : gw_ep_notify_push(B(ep), h->val) != 0) {
            tcp_fail(ep, GW_ERR_NOMEM, "out of memory queueing a notification");
            return -1;
        }
        gw_core_signal(CORE(ep));
        return 0;
    case GW_TCP_EAGER:
        if (h->len > MAX_EAGER_RECV)
            return protocol_error(c, "eager message of %llu bytes exceeds %llu",
                                  (unsigned long long)h->len, MAX_EAGER_RECV);
        r = gw_ep_match_posted(B(ep), h->val);
        if (r) {
            c->rx_req = r;
            begin_payload_dev(c, r->buf, h->len < r->len ? h->len : r->len, h->len, mem_dev(r->lmem));
        } else {
            gw_unexp_t *u = gw_ep_unexp_new(B(ep), h->len);
            if (!u) {
                tcp_fail(ep, GW_ERR_NOMEM, "out of memory keeping an unexpected %llu-byte message",
                         (unsigned long long)h->len);
                return -1;
            }
            u->tag = h->val;
            c->rx_unexp = u;
            begin_payload(c, u->data, h->len, h->len);
        }
        break;
    case GW_TCP_RTS:
        r = gw_ep_match_posted(B(ep), h->val);
        if (r) {
            start_rndv_recv(ep, r, h->id, h->len, h->val);
        } else {
            gw_unexp_t *u = calloc(1, sizeof(*u));
            if (!u) {
                tcp_fail(ep, GW_ERR_NOMEM, "out of memory keeping an unexpected message");
                return -1;
            }
            u->tag = h->val;
            u->len = h->len;
            u->handle = h->id;
            gw_list_push_back(&B(ep)->unexpected, &u->link);
        }
        return 0;
    case GW_TCP_CTS: {
        r = slot_get(ep, h->id, 1u << GW_OP_SEND);
        if (!r)
            return protocol_error(c, "clear-to-send for unknown send 0x%llx", (unsigned long long)h->id);
        if (h->len > r->len)
            return protocol_error(c, "receiver accepted %llu bytes of a %zu-byte message",
                                  (unsigned long long)h->len, r->len);
        if (h->len == 0) {
            op_finish(ep, r, GW_OK);
            return 0;
        }
        size_t total = h->len, piece = total >= ep->tif->stripe_min ? piece_size(ep, total) : total;
        for (size_t off = 0; off < total; off += piece) {
            size_t n = GW_MIN(piece, total - off);
            gw_tcp_hdr_t d = {.type = GW_TCP_RDATA, .key = h->key, .addr = off, .len = n};
            conn_t *dc = total >= ep->tif->stripe_min ? least_loaded(ep) : &ep->conns[0];
            if (send_frame_dev(dc, &d, (const uint8_t *)r->buf + off, n, NULL, mem_dev(r->lmem)) < 0)
                return -1;
        }
        return 0;
    }
    case GW_TCP_RDATA:
        r = slot_get(ep, h->key, 1u << GW_OP_RECV);
        if (!r)
            return protocol_error(c, "message data for unknown receive 0x%llx", (unsigned long long)h->key);
        if (h->addr > r->tl[2] || h->len > r->tl[2] - h->addr)
            return protocol_error(c, "message data [%llu, +%llu) outside the %llu accepted bytes",
                                  (unsigned long long)h->addr, (unsigned long long)h->len,
                                  (unsigned long long)r->tl[2]);
        c->rx_req = r;
        begin_payload_dev(c, (uint8_t *)r->buf + h->addr, h->len, h->len, mem_dev(r->lmem));
        break;
    case GW_TCP_MSG_ACK:
        r = slot_get(ep, h->id, 1u << GW_OP_SEND);
        if (!r)
            return protocol_error(c, "message acknowledgement for unknown send 0x%llx",
                                  (unsigned long long)h->id);
        op_finish(ep, r, (gw_status_t)h->aux);
        return 0;
    case GW_TCP_PING:
        return send_lazy(c, GW_TCP_PONG, 0, 0, 0);
    case GW_TCP_PONG:
        return 0;
    case GW_TCP_BPUT:
    case GW_TCP_BGET_REQ:
    case GW_TCP_BGET_RESP:
        return tcpb_rx_header(c, h);
    case GW_TCP_CLOSE:
        ep->peer_closed = 1;
        tcp_fail(ep, GW_ERR_CONN_RESET, "peer %s closed the endpoint", B(ep)->peer);
        return -1;
    default:
        return protocol_error(c, "unexpected frame type %u", h->type);
    }
    if (c->remaining == 0)
        return finish_payload(c);
    return 0;
}

static int finish_payload(conn_t *c)
{
    tcp_ep_t *ep = c->ep;
    const gw_tcp_hdr_t *h = &c->cur;
    gw_request_t *r = c->rx_req;
    c->in_payload = 0;
    if (c->rx_dev >= 0 && gpu_finish(c) < 0)
        return -1;
    switch (h->type) {
    case GW_TCP_PUT: {
        if (c->dst_region)
            c->dst_region->incoming--;
        c->dst_region = NULL;
        gw_status_t st = c->cur_status;
        if (st == GW_OK && (h->flags & GW_TCP_F_NOTIFY)) {
            if (gw_ep_notify_push(B(ep), h->val) != 0) {
                tcp_fail(ep, GW_ERR_NOMEM, "out of memory queueing a notification");
                return -1;
            }
            gw_core_signal(CORE(ep));
        }
        return send_lazy(c, GW_TCP_PUT_ACK, st, h->id, st == GW_OK ? h->len : 0);
    }
    case GW_TCP_GET_RESP:
        r->done += h->len;
        if (--r->pending == 0)
            op_finish(ep, r, r->first_err);
        return 0;
    case GW_TCP_EAGER:
        if (r) {
            gw_ep_recv_done(B(ep), r, h->len, h->val, GW_OK);
        } else if (c->rx_unexp) {
            gw_list_push_back(&B(ep)->unexpected, &c->rx_unexp->link);
            c->rx_unexp = NULL;
        }
        gw_core_signal(CORE(ep));
        return 0;
    case GW_TCP_RDATA:
        r->done += h->len;
        if (r->done == r->tl[2]) {
            uint64_t sender = r->tl[0];
            slot_free(ep, r);
            gw_ep_recv_done(B(ep), r, r->length, r->rtag, GW_OK);
            gw_core_signal(CORE(ep));
            return send_lazy(&ep->conns[0], GW_TCP_MSG_ACK, 0, sender, 0);
        }
        return 0;
    case GW_TCP_BPUT:
    case GW_TCP_BGET_REQ:
    case GW_TCP_BGET_RESP:
        return tcpb_rx_next(c);
    default:
        return 0;
    }
}

/* Consumes what rbuf holds.  -1 when the endpoint failed. */
static int process_rbuf(conn_t *c)
{
    char why[256];
    for (;;) {
        size_t avail = c->rlen - c->rpos;
        if (c->in_payload) {
            if (!avail)
                return 0;
            size_t take = GW_MIN(avail, c->remaining);
            if (c->consumed < c->keep) {
                size_t k = GW_MIN(take, c->keep - c->consumed);
                if (c->rx_dev < 0)
                    memcpy(c->dst + c->consumed, c->rbuf + c->rpos, k);
                else if (gpu_store(c, c->rbuf + c->rpos, k) < 0)
                    return -1;
            }
            c->consumed += take;
            c->remaining -= take;
            c->rpos += take;
            if (!c->remaining && finish_payload(c) < 0)
                return -1;
            if (c->fd < 0)
                return -1;
            continue;
        }
        if (avail < GW_TCP_HDR)
            return 0;
        gw_tcp_hdr_t h;
        if (gw_tcp_hdr_decode(c->rbuf + c->rpos, &h, why, sizeof(why)) != GW_OK)
            return protocol_error(c, "%s", why);
        c->rpos += GW_TCP_HDR;
        if (handle_header(c, &h) < 0 || c->fd < 0)
            return -1;
    }
}

/* Hands the rest of the payload being received to the stream's helper
 * thread.  1: handed over (or the endpoint failed). */
static int offload_rx(conn_t *c)
{
    tcp_iface_t *tif = c->ep->tif;
    if (!offloadable(tif, c->remaining))
        return 0;
    int dev = c->rx_dev;
    if (dev >= 0 && gpu_finish(c) < 0) /* what the progress thread staged lands first */
        return 1;
    gw_tcp_job_t *j = &c->rxj;
    j->rx = 1;
    j->fd = c->fd;
    j->dev = c->consumed < c->keep ? dev : -1;
    j->owner = c;
    j->src = NULL;
    j->dst = c->dst;
    j->len = c->consumed + c->remaining;
    j->keep = c->keep;
    j->off = c->consumed;
    gw_status_t st = gw_tcp_pool_submit(tif->pool, c->worker, j);
    if (st != GW_OK) {
        pool_trouble(tif, st);
        c->rx_dev = dev; /* gpu_finish left nothing staged: carry on here */
        return 0;
    }
    c->rx_busy = 1;
    conn_update_io(c);
    return 1;
}

static void conn_readable(conn_t *c)
{
    tcp_ep_t *ep = c->ep;
    if (c->rx_busy)
        return;
    for (int iter = 0; iter < 16 && c->fd >= 0; iter++) {
        ssize_t n;
        if (c->in_payload && c->rpos == c->rlen && offload_rx(c))
            return;
        if (c->in_payload && c->rpos == c->rlen && c->remaining >= DIRECT_MIN) {
            /* straight into place (or into scratch when discarding) */
            uint8_t *dst;
            size_t want;
            gw_staging_t *st = NULL;
            gw_stage_slot_t *sl = NULL;
            if (c->consumed < c->keep && c->rx_dev >= 0) {
                sl = rx_slot(c, &st);
                if (c->fd < 0)
                    return;
                if (!sl)
                    goto via_rbuf;
                dst = (uint8_t *)sl->host + c->rx_fill;
                want = GW_MIN(GW_MIN(c->remaining, c->keep - c->consumed), gw_staging_chunk(st) - c->rx_fill);
            } else if (c->consumed < c->keep) {
                dst = c->dst + c->consumed;
                want = GW_MIN(c->remaining, c->keep - c->consumed);
            } else {
                dst = ep->tif->scratch;
                want = GW_MIN(c->remaining, (size_t)RBUF_CAP);
            }
            n = recv(c->fd, dst, want, MSG_DONTWAIT);
            if (n > 0) {
                B(ep)->last_rx_ns = gw_now_ns();
                c->consumed += (size_t)n;
                c->remaining -= (size_t)n;
                if (sl) {
                    c->rx_fill += (size_t)n;
                    if ((c->rx_fill == gw_staging_chunk(st) || c->consumed == c->keep) && rx_submit(c, st) < 0)
                        return;
                }
                if (!c->remaining && finish_payload(c) < 0)
                    return;
                continue;
            }
        } else {
        via_rbuf:
            if (c->rpos == c->rlen)
                c->rpos = c->rlen = 0;
            else if (c->rlen == RBUF_CAP || c->rpos > RBUF_CAP / 2) {
                memmove(c->rbuf, c->rbuf + c->rpos, c->rlen - c->rpos);
                c->rlen -= c->rpos;
                c->rpos = 0;
            }
            size_t room = RBUF_CAP - c->rlen;
            if (c->hdr_only) /* after a worker's payload: the next header alone, its payload may be a worker's too */
                room = GW_MIN(room, GW_TCP_HDR - GW_MIN(GW_TCP_HDR, c->rlen - c->rpos));
            if (!room) {
                c->hdr_only = 0;
                room = RBUF_CAP - c->rlen;
            }
            n = recv(c->fd, c->rbuf + c->rlen, room, MSG_DONTWAIT);
            if (n > 0) {
                B(ep)->last_rx_ns = gw_now_ns();
                c->rlen += (size_t)n;
                if (c->rlen - c->rpos >= GW_TCP_HDR)
                    c->hdr_only = 0;
                if (process_rbuf(c) < 0)
                    return;
                if ((size_t)n < (RBUF_CAP - c->rlen) / 2 && !c->in_payload)
                    return; /* drained */
                continue;
            }
        }
        if (n == 0) {
            stream_ended(c, "without closing the endpoint");
            return;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return;
        sock_fail(ep, errno, "recv", c->idx);
        return;
    }
}

static void conn_event(void *arg, uint32_t events)
{
    conn_t *c = arg;
    if ((events & (EPOLLIN | EPOLLERR | EPOLLHUP)) && !c->rx_busy)
        conn_readable(c);
    if (c->fd >= 0 && (events & EPOLLOUT))
        conn_flush(c);
}

static gw_status_t conn_open(tcp_ep_t *ep, int idx, int fd)
{
    conn_t *c = &ep->conns[idx];
    gw_core_t *core = CORE(ep);
    if (!c->rbuf && !(c->rbuf = malloc(RBUF_CAP)))
        return gw_err(core, GW_ERR_NOMEM, "out of memory for a tcp receive buffer");
    gw_sock_nonblock(fd, 1);
    gw_sock_tune(fd, (int)ep->tif->sockbuf, core->peer_timeout_ms);
    c->ep = ep;
    c->idx = idx;
    c->fd = fd;
    c->want_out = 0;
    c->rpos = c->rlen = 0;
    c->in_payload = 0;
    c->rx_dev = -1;
    c->tx_busy = c->rx_busy = c->hdr_only = 0;
    c->worker = (int)(ep->tif->next_worker++);
    gw_list_init(&c->stg_link);
    c->corked = 0;
    c->wrote_gen = UINT64_MAX;
    gw_list_init(&c->cork_link);
    gw_status_t st = gw_io_add(core, &c->io, fd, EPOLLIN, conn_event, c);
    if (st != GW_OK) {
        c->fd = -1;
        return st;
    }
    return GW_OK;
}

static void conn_close(conn_t *c)
{
    if (c->fd < 0)
        return;
    tcp_ep_t *ep = c->ep;
    /* a worker moving bytes on this socket lets go of it first */
    gw_tcp_pool_cancel(ep->tif->pool, &c->txj);
    gw_tcp_pool_cancel(ep->tif->pool, &c->rxj);
    c->tx_busy = c->rx_busy = 0;
    gw_io_del(CORE(ep), &c->io);
    close(c->fd);
    c->fd = -1;
    if (c->lazy) {
        c->lazy = 0;
        gw_list_del(&c->lazy_link);
    }
    conn_uncork(c);
    if (c->stg_wait) {
        c->stg_wait = 0;
        gw_list_del(&c->stg_link);
    }
    if (c->rx_dev >= 0) {
        gw_staging_t *st = stg_get(ep->tif, c->rx_dev, 1);
        if (st && c->rx_slot)
            gw_staging_release(st, c->rx_slot);
        for (int i = 0; st && i < c->rx_nin; i++)
            slot_finish(ep->tif, st, c->rx_in[i]);
        c->rx_slot = NULL;
        c->rx_nin = 0;
        c->rx_dev = -1;
    }
    if (c->dst_region) {
        c->dst_region->incoming--;
        c->dst_region = NULL;
    }
    gw_ep_unexp_free(B(ep), c->rx_unexp);
    c->rx_unexp = NULL;
    tcpb_rx_drop(c);
    c->in_payload = 0;
    while (c->txh) {
        tx_item_t *t = c->txh;
        c->txh = t->next;
        tx_release(ep, t);
    }
    c->txt = NULL;
    c->tx_bytes = 0;
}

/* ---- operations -------------------------------------------------------------------- */
static gw_status_t post_pieces(tcp_ep_t *ep, gw_request_t *req, uint8_t type, uint8_t flags)
{
    uint64_t id;
    if (slot_alloc(ep, req, &id) != 0)
        return gw_err(CORE(ep), GW_ERR_NOMEM, "out of memory for an operation slot");
    req->first_err = GW_OK;
    size_t len = req->len;
    int striped = len >= ep->tif->stripe_min && open_streams(ep) > 1;
    size_t piece = striped ? piece_size(ep, len) : (len ? len : 1);
    size_t npieces = len ? (len + piece - 1) / piece : 1;
    req->pending = (uint32_t)npieces;
    if (striped && type == GW_TCP_PUT) {
        req->tl_flags |= TLF_STRIPED;
        ep->striped_puts++;
    }
    for (size_t i = 0; i < npieces; i++) {
        size_t off = i * piece, n = GW_MIN(piece, len - off);
        gw_tcp_hdr_t h = {.type = type, .flags = flags, .id = id, .key = req->rkey->id,
                          .addr = req->raddr + off, .len = n,
                          .val = type == GW_TCP_PUT && flags ? req->value : off};
        conn_t *c = striped ? least_loaded(ep) : &ep->conns[0];
        if (type == GW_TCP_PUT) {
            if (send_frame_dev(c, &h, (const uint8_t *)req->buf + off, n, NULL, mem_dev(req->lmem)) < 0)
                return GW_OK; /* the endpoint failed and completed the request */
        } else if (send_frame(c, &h, NULL, 0, NULL) < 0) {
            return GW_OK;
        }
    }
    return GW_OK;
}

static gw_status_t tcp_put(gw_tl_ep_t *tep, gw_request_t *req)
{
    return post_pieces(to_ep(tep), req, GW_TCP_PUT, 0);
}

static gw_status_t tcp_put_notify(gw_tl_ep_t *tep, gw_request_t *req)
{
    tcp_ep_t *ep = to_ep(tep);
    int single = req->len < ep->tif->stripe_min || open_streams(ep) <= 1;
    if (single && ep->striped_puts == 0 && ep->dn_count == 0)
        return post_pieces(ep, req, GW_TCP_PUT, GW_TCP_F_NOTIFY); /* in order on stream 0 */
    if (dn_push(ep, req->seq, req->value, 0) != 0)
        return gw_err(CORE(ep), GW_ERR_NOMEM, "out of memory deferring a notification");
    return post_pieces(ep, req, GW_TCP_PUT, 0);
}

static gw_status_t tcp_get(gw_tl_ep_t *tep, gw_request_t *req)
{
    return post_pieces(to_ep(tep), req, GW_TCP_GET_REQ, 0);
}

static gw_status_t tcp_send(gw_tl_ep_t *tep, gw_request_t *req)
{
    tcp_ep_t *ep = to_ep(tep);
    if (req->len <= ep->tif->eager_max) {
        gw_tcp_hdr_t h = {.type = GW_TCP_EAGER, .len = req->len, .val = req->value};
        send_frame_dev(&ep->conns[0], &h, req->buf, req->len, req, mem_dev(req->lmem));
        return GW_OK;
    }
    uint64_t id;
    if (slot_alloc(ep, req, &id) != 0)
        return gw_err(CORE(ep), GW_ERR_NOMEM, "out of memory for a send slot");
    send_ctl(ep, &ep->conns[0], GW_TCP_RTS, 0, id, 0, 0, req->len, req->value);
    return GW_OK;
}

static gw_status_t tcp_recv_matched(gw_tl_ep_t *tep, gw_request_t *req, gw_unexp_t *u)
{
    tcp_ep_t *ep = to_ep(tep);
    start_rndv_recv(ep, req, u->handle, u->len, u->tag);
    free(u);
    return GW_OK;
}

/* ---- timers: peer liveness ------------------------------------------------------- */
static int ep_busy(tcp_ep_t *ep)
{
    if (gw_ep_has_work(B(ep)) || ep->used_slots)
        return 1;
    for (int i = 0; i < ep->nconns; i++)
        if (ep->conns[i].in_payload || ep->conns[i].txh)
            return 1;
    return 0;
}

/* ---- helper threads' finished jobs ------------------------------------------------ */
static void tx_job_done(conn_t *c, gw_tcp_job_t *j)
{
    tcp_ep_t *ep = c->ep;
    if (j->cuda) {
        c->tx_busy = 0;
        tcp_fail(ep, GW_ERR_CUDA, "tcp: device-to-host staging copy for stream %d failed: %s", c->idx, j->why);
        return;
    }
    if (j->err) {
        c->tx_busy = 0;
        sock_fail(ep, j->err, "send", c->idx);
        return;
    }
    B(ep)->last_rx_ns = gw_now_ns(); /* the peer's kernel took the bytes */
    /* tx_busy stays set until every frame of the job is popped: what their
     * completions queue must not be flushed (or handed over) past them */
    for (int i = 0; i < j->frames_done && c->txh && c->fd >= 0; i++) {
        tx_item_t *t = c->txh;
        c->tx_bytes -= GW_MIN(c->tx_bytes, GW_TCP_HDR + t->paylen - t->off);
        t->off = GW_TCP_HDR + t->paylen;
        tx_done(c, t);
    }
    c->tx_busy = 0;
    if (!ep->failed && c->fd >= 0)
        conn_flush(c);
}

static void rx_job_done(conn_t *c, gw_tcp_job_t *j)
{
    tcp_ep_t *ep = c->ep;
    c->rx_busy = 0;
    if (j->cuda) {
        tcp_fail(ep, GW_ERR_CUDA, "tcp: host-to-device staging copy for stream %d failed: %s", c->idx, j->why);
        return;
    }
    if (j->err) {
        sock_fail(ep, j->err, "recv", c->idx);
        return;
    }
    if (j->eof) {
        char what[64];
        snprintf(what, sizeof(what), "in the middle of a %llu-byte payload", (unsigned long long)j->len);
        stream_ended(c, what);
        return;
    }
    B(ep)->last_rx_ns = gw_now_ns();
    c->consumed = j->off;
    c->remaining = 0;
    c->hdr_only = 1;
    conn_update_io(c);
    if (finish_payload(c) < 0 || c->fd < 0)
        return;
    conn_readable(c); /* what follows may be waiting already */
}

static void job_done(gw_tcp_job_t *j, void *arg)
{
    conn_t *c = j->owner;
    (void)arg;
    if (j == &c->txj)
        tx_job_done(c, j);
    else
        rx_job_done(c, j);
}

/* The last time the peer showed life, counting bytes a helper thread moved. */
static uint64_t ep_last_ns(tcp_ep_t *ep)
{
    uint64_t last = B(ep)->last_rx_ns;
    for (int i = 0; i < ep->nconns; i++) {
        conn_t *c = &ep->conns[i];
        if (c->tx_busy)
            last = GW_MAX(last, gw_tcp_job_last_ns(&c->txj));
        if (c->rx_busy)
            last = GW_MAX(last, gw_tcp_job_last_ns(&c->rxj));
    }
    return last;
}

/* A stream ended or failed after about GPUWIRE_PEER_TIMEOUT_MS without a
 * sign of life while work was outstanding: the kernel's TCP_USER_TIMEOUT
 * (the same limit) tore it down, and the error it reported may have gone to
 * another reader of the socket (a helper thread) leaving an end-of-stream
 * here.  Either way the peer timed out. */
static int timed_out_quietly(tcp_ep_t *ep)
{
    uint64_t limit = (uint64_t)CORE(ep)->peer_timeout_ms * 1000000ull;
    if (!ep_busy(ep))
        return 0;
    uint64_t last = ep_last_ns(ep);
    return gw_elapsed_ns(gw_now_ns(), last) >= limit - limit / 10;
}

static int tcp_poll(void *arg)
{
    tcp_iface_t *tif = arg;
    gw_list_t *lp;
    tif->gen++;
    int n = gw_tcp_pool_reap(tif->pool, job_done, tif);
    while ((lp = gw_list_first(&tif->cork)) != NULL) { /* small frames posted since the last call */
        conn_t *c = gw_container_of(lp, conn_t, cork_link);
        conn_uncork(c);
        if (c->fd >= 0 && !c->want_out && !c->stg_wait)
            conn_flush(c);
        n++;
    }
    while ((lp = gw_list_first(&tif->lazy)) != NULL) {
        conn_t *c = gw_container_of(lp, conn_t, lazy_link);
        if (c->lazy_gen + 2 > tif->gen) { /* queued during this call: one more chance to ride along */
            gw_core_signal(tif->super.core);
            break;
        }
        conn_flush(c); /* takes it off the list */
        if (c->lazy) { /* failed: make sure it is off */
            c->lazy = 0;
            gw_list_del(&c->lazy_link);
        }
        n++;
    }
    if (!gw_list_empty(&tif->stg_wait)) { /* frames waiting for device-to-host copies */
        gw_list_t waiting;
        gw_list_init(&waiting);
        while ((lp = gw_list_first(&tif->stg_wait)) != NULL) {
            gw_list_del(lp);
            gw_list_push_back(&waiting, lp);
        }
        while ((lp = gw_list_first(&waiting)) != NULL) {
            conn_t *c = gw_container_of(lp, conn_t, stg_link);
            gw_list_del(lp);
            c->stg_wait = 0;
            if (c->fd >= 0 && !c->want_out)
                conn_flush(c);
            n++;
        }
    }
    uint64_t now = gw_now_ns();
    if (now - tif->last_timer_ns < 20000000ull)
        return n;
    tif->last_timer_ns = now;
    uint64_t limit = (uint64_t)tif->super.core->peer_timeout_ms * 1000000ull;
    gw_list_t *p, *t;
    gw_list_for_each_safe(p, t, &tif->eps) {
        tcp_ep_t *ep = gw_container_of(p, tcp_ep_t, link);
        if (ep->failed)
            continue;
        if (!ep_busy(ep)) { /* silence without work outstanding is no sign of death */
            B(ep)->last_rx_ns = now;
            continue;
        }
        B(ep)->last_rx_ns = ep_last_ns(ep);
        uint64_t idle = gw_elapsed_ns(now, B(ep)->last_rx_ns); /* helper threads stamp too */
        if (idle > limit) {
            tcp_fail(ep, GW_ERR_PEER_TIMEOUT,
                     "no data from peer %s for %llu ms with work outstanding (GPUWIRE_PEER_TIMEOUT_MS=%ld)",
                     B(ep)->peer, (unsigned long long)(idle / 1000000), tif->super.core->peer_timeout_ms);
        } else if (idle > limit / 3 && now - ep->last_ping_ns > limit / 3) {
            ep->last_ping_ns = now;
            send_ctl(ep, &ep->conns[0], GW_TCP_PING, 0, 0, 0, 0, 0, 0);
        }
    }
    return 0;
}

/* ---- iface ------------------------------------------------------------------------- */
static gw_status_t tcp_iface_open(gw_core_t *core, gw_tl_iface_t **out, char *why, size_t whylen)
{
    tcp_iface_t *tif = calloc(1, sizeof(*tif));
    if (!tif) {
        snprintf(why, whylen, "out of memory");
        return GW_ERR_NOMEM;
    }
    gw_status_t st;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (!strcmp(gw_settings_str(&core->settings, GW_SET_TCP_STREAMS), "auto"))
        tif->streams = cpus >= 8 ? 4 : 2;
    else if ((st = gw_settings_int(&core->settings, GW_SET_TCP_STREAMS, 1, GW_TCP_MAX_STREAMS, &tif->streams, why,
                                   whylen)) != GW_OK)
        goto err;
    if ((st = gw_settings_size(&core->settings, GW_SET_TCP_STRIPE_MIN, 1, UINT64_MAX, &tif->stripe_min, why, whylen)) ||
        (st = gw_settings_size(&core->settings, GW_SET_TCP_CHUNK, 4096, 1ull << 30, &tif->chunk, why, whylen)) ||
        (st = gw_settings_size(&core->settings, GW_SET_TCP_EAGER_MAX, 0, MAX_EAGER_RECV, &tif->eager_max, why, whylen)) ||
        (st = gw_settings_size(&core->settings, GW_SET_TCP_SOCKBUF, 0, 1ull << 30, &tif->sockbuf, why, whylen)) ||
        (st = gw_settings_size(&core->settings, GW_SET_TCP_THREAD_MIN, 1, UINT64_MAX, &tif->thread_min, why, whylen)))
        goto err;
    if (!strcmp(gw_settings_str(&core->settings, GW_SET_TCP_THREADS), "auto"))
        tif->threads = cpus >= 4 ? GW_MIN(tif->streams, 4) : 0;
    else if ((st = gw_settings_int(&core->settings, GW_SET_TCP_THREADS, 0, GW_TCP_MAX_STREAMS, &tif->threads, why,
                                     whylen)) != GW_OK) {
        goto err;
    }
    if (tif->threads > 0) {
        uint64_t chunk;
        long nbufs;
        if ((st = gw_settings_size(&core->settings, GW_SET_STAGING_CHUNK, 4096, 1ull << 30, &chunk, why, whylen)) ||
            (st = gw_settings_int(&core->settings, GW_SET_STAGING_BUFFERS, 1, 64, &nbufs, why, whylen)))
            goto err;
        if ((st = gw_tcp_pool_create(core, (int)tif->threads, (size_t)chunk, (unsigned)GW_MAX(nbufs, 2), &tif->pool))) {
            snprintf(why, whylen, "%s", core->errbuf);
            goto err;
        }
    }
    tif->scratch = malloc(RBUF_CAP);
    if (!tif->scratch) {
        snprintf(why, whylen, "out of memory");
        st = GW_ERR_NOMEM;
        goto err;
    }
    tif->super.ops = &gw_tl_tcp_ops;
    tif->super.core = core;
    tif->super.id = GW_TL_TCP;
    gw_list_init(&tif->eps);
    gw_list_init(&tif->lazy);
    gw_list_init(&tif->cork);
    gw_list_init(&tif->stg_wait);
    st = gw_core_add_poller(core, tcp_poll, tif);
    if (st != GW_OK) {
        snprintf(why, whylen, "%s", core->errbuf);
        goto err;
    }
    *out = &tif->super;
    return GW_OK;
err:
    gw_tcp_pool_destroy(tif->pool);
    free(tif->scratch);
    free(tif);
    return st;
}

static void tcp_iface_close(gw_tl_iface_t *iface)
{
    tcp_iface_t *tif = to_if(iface);
    gw_core_del_poller(iface->core, tcp_poll, tif);
    gw_tcp_pool_destroy(tif->pool);
    for (int i = 0; i < MAX_DEV; i++) {
        gw_staging_destroy(tif->stg_tx[i]);
        gw_staging_destroy(tif->stg_rx[i]);
    }
    free(tif->scratch);
    free(tif);
}

static gw_status_t tcp_iface_describe(gw_tl_iface_t *iface, char *buf, size_t len)
{
    tcp_iface_t *tif = to_if(iface);
    int n = snprintf(buf, len, "%ld stream(s) per endpoint, striping from %llu bytes in pieces of up to %llu",
                     tif->streams, (unsigned long long)tif->stripe_min, (unsigned long long)tif->chunk);
    if (n >= 0 && (size_t)n < len) {
        if (tif->pool)
            snprintf(buf + n, len - (size_t)n, "; %d helper thread(s) move payloads of %llu bytes or more",
                     gw_tcp_pool_size(tif->pool), (unsigned long long)tif->thread_min);
        else
            snprintf(buf + n, len - (size_t)n, "; no helper threads (GPUWIRE_TCP_THREADS=%s%s)",
                     gw_settings_str(&iface->core->settings, GW_SET_TCP_THREADS),
                     strcmp(gw_settings_str(&iface->core->settings, GW_SET_TCP_THREADS), "auto") ? ""
                                                                                           : ": fewer than 4 CPUs online");
    }
    return GW_OK;
}

static gw_status_t tcp_mem_reg(gw_tl_iface_t *iface, gw_mem_t *mem)
{
    size_t n = strlen(mem->path);
    if (mem->type == GW_MEM_HOST) {
        snprintf(mem->path + n, sizeof(mem->path) - n, "%stcp: direct (host memory)", n ? "; " : "");
        return GW_OK;
    }
    snprintf(mem->path + n, sizeof(mem->path) - n,
             "%stcp: staged through pinned host buffers (%s x %s, copies overlapped with the socket)", n ? "; " : "",
             gw_settings_str(&iface->core->settings, GW_SET_STAGING_BUFFERS),
             gw_settings_str(&iface->core->settings, GW_SET_STAGING_CHUNK));
    return GW_OK;
}

/* Revocation: stop writing into the region, and detach queued reads from it. */
static gw_status_t tcp_mem_dereg(gw_tl_iface_t *iface, gw_mem_t *mem)
{
    tcp_iface_t *tif = to_if(iface);
    gw_list_t *p;
    for (p = tif->eps.next; p != &tif->eps; p = p->next) {
        tcp_ep_t *ep = gw_container_of(p, tcp_ep_t, link);
        for (int i = 0; i < ep->nconns; i++) {
            conn_t *c = &ep->conns[i];
            if (c->in_payload && c->dst_region == mem) {
                if (c->rx_busy) { /* the worker stores nothing more (waits for its copies into mem) */
                    gw_tcp_job_lock(&c->rxj);
                    c->keep = gw_tcp_job_rx_stop(&c->rxj);
                    gw_tcp_job_unlock(&c->rxj);
                } else {
                    c->keep = c->consumed; /* discard the rest */
                }
                c->cur_status = GW_ERR_INVALID_KEY;
                c->dst_region = NULL;
                mem->incoming--;
            }
            for (tx_item_t *t = c->txh; t; t = t->next) {
                if (t->region_id != mem->id || t->owned)
                    continue;
                void *copy = malloc(t->paylen ? t->paylen : 1);
                if (!copy)
                    return gw_err(iface->core, GW_ERR_NOMEM, "out of memory detaching a get from a deregistered region");
                int idx = 0; /* a worker is sending it: hold it still */
                for (tx_item_t *u = c->txh; u != t; u = u->next)
                    idx++;
                int busy = c->tx_busy && idx <= c->txj.nnext;
                if (busy)
                    gw_tcp_job_lock(&c->txj);
                if (t->gpu_dev >= 0) {
                    tx_drop_slots(ep, t); /* the rest now comes from the host copy */
                    t->sl_used = 0;
                    if (gw_staging_copy_sync(iface->core, t->gpu_dev, copy, t->payload, t->paylen) != GW_OK) {
                        if (busy)
                            gw_tcp_job_unlock(&c->txj);
                        free(copy);
                        return GW_ERR_CUDA;
                    }
                    t->gpu_dev = -1;
                } else {
                    memcpy(copy, t->payload, t->paylen);
                }
                if (busy) {
                    gw_tcp_job_tx_detach(&c->txj, idx, copy);
                    gw_tcp_job_unlock(&c->txj);
                }
                t->owned = copy;
                t->payload = copy;
                t->region_id = 0;
            }
        }
    }
    return GW_OK;
}

/* ---- endpoints --------------------------------------------------------------------- */
static gw_status_t tcp_ep_prepare(gw_tl_iface_t *iface, gw_ep_base_t *base, gw_tl_ep_t **out,
                                  uint8_t *addr, size_t *addrlen)
{
    tcp_iface_t *tif = to_if(iface);
    if (*addrlen < 4)
        return gw_err(iface->core, GW_ERR_INVALID, "tcp address buffer too small");
    tcp_ep_t *ep = calloc(1, sizeof(*ep));
    if (!ep)
        return gw_err(iface->core, GW_ERR_NOMEM, "out of memory for a tcp endpoint");
    ep->super.iface = iface;
    ep->super.base = base;
    ep->tif = tif;
    ep->local_streams = (int)tif->streams;
    for (int i = 0; i < GW_TCP_MAX_STREAMS; i++)
        ep->conns[i].fd = -1;
    gw_list_init(&ep->link);
    gw_put_u16(addr, GW_TCP_VERSION);
    gw_put_u16(addr + 2, (uint16_t)tif->streams);
    *addrlen = 4;
    *out = &ep->super;
    return GW_OK;
}

static gw_status_t tcp_ep_reachable(gw_tl_iface_t *iface, const gw_tl_peer_t *peer,
                                    const uint8_t *a, size_t len, char *why, size_t whylen)
{
    (void)iface;
    (void)peer;
    if (len < 4 || gw_get_u16(a) != GW_TCP_VERSION) {
        snprintf(why, whylen, "peer's tcp protocol version %u differs from ours (%u)",
                 len >= 2 ? gw_get_u16(a) : 0, GW_TCP_VERSION);
        return GW_ERR_VERSION;
    }
    return GW_OK;
}

static gw_status_t tcp_ep_connect(gw_tl_ep_t *tep, gw_tl_peer_t *peer, const uint8_t *a, size_t len)
{
    tcp_ep_t *ep = to_ep(tep);
    gw_core_t *core = CORE(ep);
    char why[128];
    gw_status_t st = tcp_ep_reachable(tep->iface, peer, a, len, why, sizeof(why));
    if (st != GW_OK)
        return gw_err(core, st, "%s", why);
    int peer_streams = gw_get_u16(a + 2);
    ep->nconns = GW_MAX(1, GW_MIN(ep->local_streams, GW_MIN(peer_streams, GW_TCP_MAX_STREAMS)));
    st = conn_open(ep, 0, peer->bootstrap_fd);
    if (st != GW_OK)
        return st;
    peer->bootstrap_fd = -1;
    gw_list_push_back(&ep->tif->eps, &ep->link);
    B(ep)->last_rx_ns = gw_now_ns();
    if (!peer->is_server) {
        for (int i = 1; i < ep->nconns; i++) {
            int fd = peer->open_stream(peer->open_stream_arg, (unsigned)i);
            if (fd < 0) {
                gw_log(GW_LOG_WARN, "tcp stream %d to %s could not be opened (%s); using %d stream(s)",
                       i, peer->peer_addr, core->errbuf, i);
                break;
            }
            if ((st = conn_open(ep, i, fd)) != GW_OK) {
                close(fd);
                break;
            }
        }
    }
    return GW_OK;
}

static gw_status_t tcp_ep_join(gw_tl_ep_t *tep, int fd, unsigned idx)
{
    tcp_ep_t *ep = to_ep(tep);
    if (idx == 0 || (int)idx >= ep->nconns || ep->conns[idx].fd >= 0 || ep->failed) {
        close(fd);
        return gw_err(CORE(ep), GW_ERR_PROTOCOL, "tcp stream %u for endpoint of %s is not expected (%d negotiated)",
                      idx, B(ep)->peer, ep->nconns);
    }
    gw_status_t st = conn_open(ep, (int)idx, fd);
    if (st != GW_OK)
        close(fd);
    return st;
}

static gw_status_t tcp_ep_close(gw_tl_ep_t *tep)
{
    tcp_ep_t *ep = to_ep(tep);
    if (ep->failed || ep->closing)
        return GW_OK;
    ep->closing = 1;
    conn_t *c = &ep->conns[0];
    if (c->fd < 0)
        return GW_OK;
    send_ctl(ep, c, GW_TCP_CLOSE, 0, 0, 0, 0, 0, 0);
    /* give the close frame (and what precedes it) a bounded chance to leave */
    uint64_t deadline = gw_now_ns() + 200000000ull;
    while (c->fd >= 0 && c->txh && gw_now_ns() < deadline) {
        gw_tcp_pool_reap(ep->tif->pool, job_done, ep->tif);
        if (c->fd < 0 || conn_flush(c) < 0)
            break;
        if (c->txh)
            usleep(1000);
    }
    return GW_OK;
}

static void tcp_ep_destroy(gw_tl_ep_t *tep)
{
    if (!tep)
        return;
    tcp_ep_t *ep = to_ep(tep);
    /* whatever is still in flight (e.g. receives mid-rendezvous) ends now */
    if (!ep->failed && ep->nconns)
        tcp_fail(ep, GW_ERR_CANCELED, "endpoint to %s closed with work outstanding", B(ep)->peer);
    for (int i = 0; i < GW_TCP_MAX_STREAMS; i++) {
        if (ep->conns[i].fd >= 0) {
            ep->conns[i].ep = ep;
            conn_close(&ep->conns[i]);
        }
        free(ep->conns[i].rbuf);
    }
    gw_list_del(&ep->link);
    while (ep->txfree) {
        tx_item_t *t = ep->txfree;
        ep->txfree = t->next;
        free(t);
    }
    free(ep->slots);
    free(ep->gens);
    free(ep->freelist);
    free(ep->dn);
    free(ep);
}

static gw_status_t tcp_ep_describe(gw_tl_ep_t *tep, char *buf, size_t len)
{
    tcp_ep_t *ep = to_ep(tep);
    tcp_iface_t *tif = ep->tif;
    if (tif->pool && tif->thread_min != UINT64_MAX)
        snprintf(buf, len, "tcp: %d stream(s), striping from %llu bytes, %d helper thread(s) moving payloads from %llu bytes",
                 open_streams(ep), (unsigned long long)tif->stripe_min, gw_tcp_pool_size(tif->pool),
                 (unsigned long long)tif->thread_min);
    else
        snprintf(buf, len, "tcp: %d stream(s), striping from %llu bytes, no helper threads", open_streams(ep),
                 (unsigned long long)tif->stripe_min);
    return GW_OK;
}

/* batched transfers: part of this translation unit (it uses the objects
 * above); a file of its own once the tcp transport has a private header */
#define GW_TCP_INTERNAL 1
#include "transport/tcp/tcp_batch.c"

/* the one operation entry (tl.h): one function per operation behind it */
static gw_status_t tcp_submit(gw_tl_ep_t *tep, gw_request_t *req)
{
    switch (req->op) {
    case GW_OP_PUT: return tcp_put(tep, req);
    case GW_OP_GET: return tcp_get(tep, req);
    case GW_OP_PUT_NOTIFY: return tcp_put_notify(tep, req);
    case GW_OP_SEND: return tcp_send(tep, req);
    case GW_OP_BATCH: return tcpb_batch(tep, req);
    default: return GW_ERR_UNSUPPORTED;
    }
}

static void tcp_caps(gw_tl_iface_t *iface, gw_tl_caps_t *out)
{
    out->eager_max = ((tcp_iface_t *)iface)->eager_max; /* GPUWIRE_TCP_EAGER_MAX */
    out->max_msg = UINT64_MAX;
    out->mem_kinds = GW_TL_MEM_HOST | GW_TL_MEM_CUDA;
    out->gpu_paths = GW_TL_GPU_STAGED; /* the socket reads and writes host bounce buffers */
    out->batch = GW_TL_BATCH_NATIVE | GW_TL_BATCH_GPU | GW_TL_BATCH_COUNTED;
}

const gw_tl_ops_t gw_tl_tcp_ops = {
    .size = sizeof(gw_tl_ops_t),
    .name = "tcp",
    .iface_open = tcp_iface_open,
    .iface_close = tcp_iface_close,
    .iface_describe = tcp_iface_describe,
    .mem_reg = tcp_mem_reg,
    .mem_dereg = tcp_mem_dereg,
    .rkey_pack = gw_tl_unsupported_rkey_pack,
    .rkey_unpack = gw_tl_no_rkey_unpack, /* tcp keys carry no tcp part: the target checks the region id */
    .rkey_release = gw_tl_noop_rkey_release,
    .caps = tcp_caps,
    .ep_prepare = tcp_ep_prepare,
    .ep_reachable = tcp_ep_reachable,
    .ep_connect = tcp_ep_connect,
    .ep_join = tcp_ep_join,
    .ep_close = tcp_ep_close,
    .ep_destroy = tcp_ep_destroy,
    .ep_describe = tcp_ep_describe,
    .submit = tcp_submit,
    .recv_matched = tcp_recv_matched,
};
