/* SPDX-License-Identifier: Apache-2.0 */
/* tcp_int.h - the tcp transport's private objects, shared by its files
 * (not installed, not included outside src/transport/tcp).
 *
 *   tcp_iface.c  iface open/close/describe, memory registration, the poller
 *                and the ops table; the frame header codec
 *   tcp_ep.c     endpoint lifecycle, streams open/close, request slots,
 *                failure, liveness
 *   tcp_tx.c     transmit items, stream flushing and corking, put/get/send
 *   tcp_rx.c     receiving: frame dispatch, payloads, rendezvous receives
 *   tcp_gpu.c    GPU staging: device-to-host before the socket, host-to-
 *                device behind it
 *   tcp_batch.c  batched put/get
 *   tcp_pool.c   helper threads for large payloads (tcp_pool.h)
 * Frame format and stream roles: tcp.h. */
#ifndef GW_TRANSPORT_TCP_INT_H
#define GW_TRANSPORT_TCP_INT_H

#include <stdint.h>
#include <sys/uio.h>

#include "core/sock.h"
#include "cuda/cuda_wrap.h"
#include "mem/staging.h"
#include "transport/base/liveness.h"
#include "transport/base/op_table.h"
#include "transport/base/region.h"
#include "transport/tcp/tcp.h"
#include "transport/tcp/tcp_pool.h"

/* A request's tcp scratch (core/request.h GW_REQ_TL_SCRATCH): tcp_rq(req). */
struct tcpb_op;
struct gw_req_tcp {
    uint64_t sender;        /* rendezvous receive: the sender's slot id (for MSG_ACK) */
    uint64_t accept;        /* rendezvous receive: bytes accepted (CTS), checked against RDATA */
    struct tcpb_op *bop;    /* batched get: its state until it completes (tcp_batch.c) */
};
GW_REQ_TL_SCRATCH(tcp_rq, struct gw_req_tcp)

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

/* CUDA streams per device that the copy kernel's launches go on: the
 * scatters of frames received on different tcp streams run side by side
 * (each frame's kernel is small: a few dozen blocks) */
#define TCP_KLANES 4

/* A pinned host buffer of one device that batch runs are gathered into by
 * the copy kernel (send) or received into before the kernel scatters them
 * (receive); shared by the frames of a batch, reference-counted, kept by the
 * iface for the next batch (tcp_gpu.c). */
typedef struct tcp_gbuf {
    struct tcp_gbuf *next;
    int dev, refs;
    uint8_t *host;
    size_t cap;
    CUdeviceptr dscr;    /* GPUWIRE_TCP_BATCH_GPU=scratch: GPU scratch of cap bytes, mirroring host */
    CUevent *ev;         /* one per launch into this buffer, made once, reused */
    uint32_t nev, evcap; /* recorded in the current use, made */
} tcp_gbuf_t;

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
    /* a batch run gathered by the copy kernel: payload in gb, written once event gev is done */
    tcp_gbuf_t *gb;
    int gev;             /* event of gb to wait for, -1 when none (or seen done) */
} tx_item_t;

typedef struct tcp_ep tcp_ep_t;

typedef struct conn {
    tcp_ep_t *ep;
    int idx;
    int fd;
    gw_io_t io;
    int want_out;
    int tx_full;         /* a send met EAGAIN and our queue has not run dry since (see tcp_tx_taken) */
    uint64_t tx_unproven; /* bytes the kernel took since the last one that proved the peer alive */
    int in_flush;        /* tcp_conn_flush is on the stack: completions it runs must not re-enter it */
    int lazy;            /* holds acknowledgements not yet written (see tcp_send_lazy) */
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
    int bscat;             /* its payload is scattered over host entries (tcpb_scat_*) */
    unsigned rx_unexp_n;   /* eager messages taken as unexpected since the last read (see conn_readable) */
    uint8_t am_buf[GW_AM_MAX]; /* an active message's payload being received */
} conn_t;

typedef struct tcp_iface {
    gw_tl_iface_t super;
    gw_list_t eps;
    gw_list_t lazy;      /* streams holding acknowledgements, oldest first */
    gw_list_t cork;      /* streams holding small frames for the next progress call */
    uint64_t gen;        /* progress calls seen */
    long streams;
    uint64_t stripe_min, chunk, eager_max, sockbuf;
    const char *cc;      /* GPUWIRE_TCP_CONGESTION: "auto", "system" or an algorithm */
    uint8_t *scratch; /* discard target */
    gw_liveness_t live;  /* the peer-liveness timer */
    gw_staging_t *stg_tx[MAX_DEV], *stg_rx[MAX_DEV]; /* per device, made on first use */
    gw_list_t stg_wait;  /* streams whose head frame waits for a device-to-host copy */
    gw_tcp_pool_t *pool; /* helper threads, NULL when GPUWIRE_TCP_THREADS=0 */
    long threads;
    uint64_t thread_min;
    unsigned next_worker;
    /* GPU batch runs: the copy kernel (src/cuda/copy_kernel.c) per device */
    int kstate[MAX_DEV];     /* 0 not tried, 1 usable, -1 not (bkernel says why) */
    CUstream kstream[MAX_DEV][TCP_KLANES]; /* lane 0: gathers; a received frame's scatter: its stream's lane */
    tcp_gbuf_t *gfree;       /* pinned buffers kept for the next batch */
    gw_list_t kdone;         /* received batch frames whose scatter launch runs (tcp_batch.c) */
    unsigned nkdone;         /* how many (at most kinflight once a frame starts) */
    unsigned kinflight;      /* GPUWIRE_TCP_BATCH_INFLIGHT */
    int bscratch;            /* GPUWIRE_TCP_BATCH_GPU=scratch: through GPU scratch and copy-engine copies */
    char bkernel[200];       /* path text: how GPU entries of batches move */
} tcp_iface_t;

struct tcp_ep {
    gw_tl_ep_t super;
    tcp_iface_t *tif;
    gw_list_t link;
    conn_t conns[GW_TCP_MAX_STREAMS];
    int nconns;          /* negotiated */
    int local_streams;
    gw_op_table_t optab; /* requests the peer answers, by the id in their frames */
    uint32_t striped_puts;
    int peer_closed, closing; /* failure: gw_ep_failed(base) */
    uint64_t last_ping_ns;
    /* a further stream whose receiving side ended while stream 0 was open
     * (see tcp_stream_lost): when, with what status and why */
    uint64_t lost_ns;
    gw_status_t lost_st;
    char lost_why[200];
};

/* TLF_STRIPED: a put whose pieces go over several streams (counted in
 * ep->striped_puts: a notification sent in line on stream 0 could pass it). */
enum { TLF_STRIPED = 1 };

static inline tcp_ep_t *to_ep(gw_tl_ep_t *e) { return gw_container_of(e, tcp_ep_t, super); }
static inline tcp_iface_t *to_if(gw_tl_iface_t *i) { return gw_container_of(i, tcp_iface_t, super); }
static inline gw_ep_base_t *B(tcp_ep_t *ep) { return ep->super.base; }
static inline gw_core_t *CORE(tcp_ep_t *ep) { return ep->tif->super.core; }

static inline int mem_dev(const gw_mem_t *m)
{
    return m && m->type == GW_MEM_CUDA ? m->cuda_device : -1;
}

/* A frame whose payload a helper thread moves (GPUWIRE_TCP_THREAD_MIN). */
static inline int offloadable(const tcp_iface_t *tif, size_t paylen)
{
    return tif->pool && paylen >= tif->thread_min;
}

struct tcpb_rx;

/* tcp_ep.c */
gw_request_t *tcp_slot_get(tcp_ep_t *ep, uint64_t id, unsigned opmask);
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
void tcp_fail(tcp_ep_t *ep, gw_status_t st, const char *fmt, ...);
void tcp_sock_fail(tcp_ep_t *ep, int e, const char *op, int idx);
void tcp_stream_ended(conn_t *c, const char *how);
void tcp_recv_fail(conn_t *c, int e);
void tcp_lost_check(tcp_ep_t *ep, uint64_t now);
void tcp_lost_fail(tcp_ep_t *ep, uint64_t now);
void tcp_conn_update_io(conn_t *c);
int tcp_ep_busy(tcp_ep_t *ep);
uint64_t tcp_ep_last_ns(tcp_ep_t *ep);
gw_status_t tcp_ep_prepare(gw_tl_iface_t *iface, gw_ep_base_t *base, gw_tl_ep_t **out,
    uint8_t *addr, size_t *addrlen);
gw_status_t tcp_ep_reachable(gw_tl_iface_t *iface, const gw_tl_peer_t *peer,
    const uint8_t *a, size_t len, char *why, size_t whylen);
gw_status_t tcp_ep_connect(gw_tl_ep_t *tep, gw_tl_peer_t *peer, const uint8_t *a, size_t len);
gw_status_t tcp_ep_join(gw_tl_ep_t *tep, int fd, unsigned idx);
gw_status_t tcp_ep_close(gw_tl_ep_t *tep);
void tcp_ep_destroy(gw_tl_ep_t *tep);
gw_status_t tcp_ep_describe(gw_tl_ep_t *tep, char *buf, size_t len);

/* tcp_tx.c */
tx_item_t *tcp_tx_alloc(tcp_ep_t *ep);
void tcp_tx_release(tcp_ep_t *ep, tx_item_t *t);
void tcp_tx_taken(conn_t *c, size_t n);
void tcp_conn_set_out(conn_t *c, int on);
void tcp_tx_done(conn_t *c, tx_item_t *t);
void tcp_pool_trouble(tcp_iface_t *tif, gw_status_t st);
void tcp_conn_uncork(conn_t *c);
int tcp_conn_flush(conn_t *c);
void tcp_tx_push(conn_t *c, tx_item_t *t);
tx_item_t *tcp_tx_frame(conn_t *c, const gw_tcp_hdr_t *h, const void *payload, size_t paylen);
int tcp_send_frame_dev(conn_t *c, const gw_tcp_hdr_t *h, const void *payload, size_t paylen,
    gw_request_t *req, int gpu_dev);
int tcp_send_ctl(tcp_ep_t *ep, conn_t *c, uint8_t type, int32_t aux, uint64_t id, uint64_t key,
    uint64_t addr, uint64_t len, uint64_t val);
int tcp_send_lazy(conn_t *c, uint8_t type, int32_t aux, uint64_t id, uint64_t len);
conn_t *tcp_least_loaded(tcp_ep_t *ep);
int tcp_open_streams(tcp_ep_t *ep);
size_t tcp_piece_size(tcp_ep_t *ep, size_t len);
/* The base's sender of a deferred notification (ep_base.h): a NOTIFY frame
 * on stream 0, carrying the put_notify's or the batch's value. */
gw_status_t tcp_notify_out(void *arg, gw_request_t *req);
void tcp_op_finish(tcp_ep_t *ep, gw_request_t *r, gw_status_t st);
gw_status_t tcp_put(gw_tl_ep_t *tep, gw_request_t *req);
gw_status_t tcp_put_notify(gw_tl_ep_t *tep, gw_request_t *req);
gw_status_t tcp_get(gw_tl_ep_t *tep, gw_request_t *req);
gw_status_t tcp_send(gw_tl_ep_t *tep, gw_request_t *req);
gw_status_t tcp_am_send(gw_tl_ep_t *tep, unsigned id, const void *data, size_t len);
gw_status_t tcp_cancel(gw_tl_ep_t *tep, gw_request_t *req);
void tcp_tx_job_done(conn_t *c, gw_tcp_job_t *j);

/* tcp_rx.c */
void tcp_begin_payload_dev(conn_t *c, uint8_t *dst, size_t keep, size_t total, int dev);
void tcp_begin_payload(conn_t *c, uint8_t *dst, size_t keep, size_t total);
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
int tcp_protocol_error(conn_t *c, const char *fmt, ...);
void tcp_conn_event(void *arg, uint32_t events);
gw_status_t tcp_recv_matched(gw_tl_ep_t *tep, gw_request_t *req, gw_unexp_t *u);
void tcp_rx_job_done(conn_t *c, gw_tcp_job_t *j);

/* tcp_gpu.c */
gw_staging_t *tcp_stg_get(tcp_iface_t *tif, int dev, int rx);
gw_status_t tcp_slot_finish(tcp_iface_t *tif, gw_staging_t *st, gw_stage_slot_t *sl);
void tcp_tx_drop_slots(tcp_ep_t *ep, tx_item_t *t);
int tcp_flush_gpu_head(conn_t *c);
int tcp_rx_submit(conn_t *c, gw_staging_t *st);
gw_stage_slot_t *tcp_rx_slot(conn_t *c, gw_staging_t **stp);
int tcp_gpu_store(conn_t *c, const uint8_t *src, size_t len);
int tcp_gpu_finish(conn_t *c);
int tcp_kern_ready(tcp_iface_t *tif, int dev);
/* Pinned buffers kept per iface for later batch runs: at least this many,
 * and kinflight (received batch frames whose scatter launch may run at
 * once, each holding one buffer) plus 8 (the streams' frames being
 * received hold one each besides). */
#define TCP_GBUF_KEEP 16
tcp_gbuf_t *tcp_gbuf_get(tcp_iface_t *tif, int dev, size_t size);
void tcp_gbuf_put(tcp_iface_t *tif, tcp_gbuf_t *gb);
void tcp_gbuf_free_all(tcp_iface_t *tif);
/* tcp_kern_launch's copy-engine copy between gb's pinned buffer and its
 * GPU scratch (GPUWIRE_TCP_BATCH_GPU=scratch) */
enum { TCP_KCOPY_NONE, TCP_KCOPY_H2D_FIRST, TCP_KCOPY_D2H_AFTER };
int tcp_kern_launch(tcp_iface_t *tif, tcp_gbuf_t *gb, unsigned lane, const gw_copy_desc_t *d, uint32_t n, int copy,
                    size_t off, size_t len);
int tcp_gbuf_scratch(tcp_iface_t *tif, tcp_gbuf_t *gb);
int tcp_kern_test(tcp_iface_t *tif, tcp_gbuf_t *gb, int ev);
gw_status_t tcp_kern_wait(tcp_iface_t *tif, tcp_gbuf_t *gb, int ev);
int tcp_tx_kern_pending(conn_t *c, tx_item_t *t);
void tcp_stg_wait_retry(tcp_ep_t *ep);

/* tcp_iface.c */
void tcp_job_done(gw_tcp_job_t *j, void *arg);

/* tcp_batch.c */
int tcpb_iov_fill(tx_item_t *t, struct iovec *iov, int *n, int cap);
gw_status_t tcpb_batch(gw_tl_ep_t *tep, gw_request_t *req);
void tcpb_rx_drop(conn_t *c);
int tcpb_rx_in_block(const conn_t *c); /* the frame's descriptor block is being read */
int tcpb_kdone_poll(tcp_iface_t *tif, int keep);
void tcpb_scat_store(conn_t *c, const uint8_t *src, size_t len);
ssize_t tcpb_scat_recv(conn_t *c, size_t want);
void tcpb_rx_revoke(conn_t *c, const gw_mem_t *mem);
void tcpb_kdone_drop_ep(tcp_ep_t *ep);
int tcpb_rx_header(conn_t *c, const gw_tcp_hdr_t *h);
int tcpb_rx_next(conn_t *c);

#endif
