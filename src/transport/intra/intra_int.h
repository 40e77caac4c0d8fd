/* SPDX-License-Identifier: Apache-2.0 */
/* intra_int.h - the intra-host transport's private objects, shared by its
 * files (not included outside src/transport/intra).
 *
 *   intra_iface.c  iface open/close/describe, the progress hook, memory
 *                  registration and export, the ops table
 *   intra_ep.c     endpoint lifecycle, failure, issuing operations,
 *                  completions, tagged messages
 *   intra_ctl.c    the control socket: frame codec, output byte queue, fd
 *                  passing, incoming control messages
 *   intra_copy.c   the copy engine: CMA, CUDA IPC/VMM imports, bounce
 *                  buffers, the peer's region table slots
 *   intra_batch.c  batched put/get
 *   intra_cma.c    several CMA copies per system call
 *   intra_shm.c    copies into shared (memfd) regions
 *   intra_ring.c   small batched entries the target copies (a shared ring)
 * The transport: CMA for host memory, CUDA IPC and copy engines for GPU
 * memory, a Unix socket for control.  Design and shared region table:
 * intra.h. */
#ifndef GW_TRANSPORT_INTRA_INT_H
#define GW_TRANSPORT_INTRA_INT_H

#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/un.h>

#include "core/hmap.h"
#include "mem/staging.h"
#include "transport/base/batch.h"
#include "transport/base/liveness.h"
#include "transport/base/region.h"
#include "transport/intra/intra.h"

/* A request's intra scratch (core/request.h GW_REQ_TL_SCRATCH): intra_rq(req). */
struct gw_intra_slot;
struct intrab_op;
struct gw_req_intra {
    struct gw_intra_slot *slot; /* the peer table slot entered (its inflight counted) */
    uint64_t opid;          /* send/rendezvous: the operation id FIN answers */
    uint64_t src;           /* put/get: RK_VALID | table slot; rendezvous receive: slot + 1 << 32 */
    uint64_t src2;          /* put/get: the region id; rendezvous receive: message length */
    struct intrab_op *batch; /* batched transfer: its state (intra_batch.c) */
    uint64_t out_at;        /* send: 1 + where its message starts in the control stream (intra_ctl.c
                             * intra_out_withdraw), 0 once withdrawn or not tracked */
};
GW_REQ_TL_SCRATCH(intra_rq, struct gw_req_intra)


#define INTRA_HDR 48
#define INTRA_MAX_DEV 16
#define INTRA_EV_KEEP 32 /* idle CUDA events an endpoint keeps for its next copies (intra_ev_get) */
#define INTRA_MAX_RXFD 64
#define INTRA_BOUNCE (4u << 20)
#define INTRA_BDESC_KEEP 8         /* free pinned batch buffers an interface keeps (intra_batch.c) ... */
#define INTRA_BDESC_KEEP_BYTES (64u << 20) /* ... up to this many bytes in all (one larger is kept alone) */
#define INTRA_DEREG_WAIT_MS 10000
#define INTRA_CMA_SYNC_MAX (256u << 10) /* larger CMA copies run piecewise in progress */
/* Puts and gets into gw_mem_alloc memory (plain copies, no system call) up to
 * this size are copied inside the call: 1 MiB is about 20-50 us of memcpy,
 * and piecewise copying from progress cost 12% of memcpy bandwidth at 1 MiB
 * (docs/PERFORMANCE.md, section 4).  Larger ones run piecewise in progress. */
#define INTRA_SHM_SYNC_MAX (1u << 20)
#define INTRA_CMA_BUDGET (4u << 20)     /* CMA bytes one progress call moves per endpoint */
#define INTRA_BLOB_LEN 64
#define INTRA_BLOB_FEAT 62         /* the address blob's features byte (INTRA_FEAT_*) */
#define INTRA_FEAT_RING 0x01       /* takes GW_INTRA_M_RING (intra_ring.c) */
/* The ring: puts whose entries average at most this many bytes are offered
 * (on the 2-core VM the ring's two copies on two cores beat CMA's one at
 * every size up to 16 KiB: docs/PERFORMANCE.md, section 5) */
#define INTRA_RING_AVG_MAX 16384u
#define INTRA_RING_PROBE_NS 3000u     /* a probe waits this long for the peer's hb to move */
#define INTRA_RING_PASSIVE_NS 1000000u /* after a probe or an offer failed: no offer for this long */
#define INTRA_CMA_BATCH 64              /* small CMA copies queued for one system call */
#define INTRA_CMA_BATCH_MAX (64u << 10) /* largest copy that is queued */

typedef struct intra_iface {
    gw_tl_iface_t super;
    pid_t pid;
    int table_fd;
    gw_intra_slot_t *table;
    gw_mem_t *slot_mem[GW_INTRA_SLOTS];
    uint32_t free_slots[GW_INTRA_SLOTS];
    uint32_t nfree;
    volatile uint64_t probe;
    int force;
    gw_list_t eps;
    int poller_on;
    const gw_cuda_t *cu; /* NULL: host memory only */
    char cuda_why[256];
    void *bounce;        /* pinned, INTRA_BOUNCE bytes, for GPU <-> peer host */
    uint64_t gen;        /* progress calls seen */
    gw_liveness_t live;  /* the peer-liveness timer */
    /* free pinned buffers of GPU batches (descriptors, index arrays;
     * intra_batch.c): kept, so that batches in flight together allocate
     * no pinned memory once as many were used */
    void *bdesc[INTRA_BDESC_KEEP];
    size_t bdesc_cap[INTRA_BDESC_KEEP];
    char bkernel[200];   /* how GPU batch entries move (intra_batch.c) */
    uint64_t ring_wait_ns; /* GPUWIRE_INTRA_RING_WAIT_US; 0: no ring */
    int ring_sleeper;    /* the core tells ring_sleep (intra_ring.c) */
} intra_iface_t;

/* One side of an endpoint's ring (intra.h, intra_ring.c).  Ours (out): we
 * post, the peer copies; the peer's (in): mapped here, we copy. */
typedef struct intra_ring {
    uint8_t *base;       /* gw_intra_ring_len() bytes, the header first */
    /* out */
    int state;           /* INTRA_RING_* below */
    uint64_t until;      /* INTRA_RING_PASSIVE: no offer before this (ns) */
    uint32_t head;       /* next slot to post */
    gw_request_t *owner[GW_INTRA_RING_SLOTS];
    uint32_t first[GW_INTRA_RING_SLOTS], count[GW_INTRA_RING_SLOTS]; /* the batch's entries in the slot */
    uint64_t t[GW_INTRA_RING_SLOTS]; /* when the slot was posted (ns) */
    /* in */
    uint64_t seen;       /* hdr->posted when the slots were last scanned */
    gw_intra_ring_desc_t *scratch; /* a slot's descriptors, copied before they are checked */
} intra_ring_t;
enum { INTRA_RING_PROBE = 0, INTRA_RING_ACTIVE = 1, INTRA_RING_PASSIVE = 2 };

typedef struct intra_import {
    gw_list_t link;
    uint32_t slot;
    uint64_t id;
    uint32_t seg;
    int dev;        /* our device whose context opened it */
    int kind;
    CUdeviceptr ptr;
    size_t size;
    CUmemGenericAllocationHandle h;
} intra_import_t;

typedef struct intra_fdset { /* VMM fds received for a peer slot */
    gw_list_t link;
    uint32_t slot;
    uint64_t id;
    int n;
    int fd[GW_INTRA_SEGS];
    int requested; /* FDREQ sent, no reply yet */
    gw_status_t status;
} intra_fdset_t;

typedef struct intra_cp { /* one copy in flight (kept off the request: see ep_abort) */
    CUevent ev;             /* CUDA copy; NULL for a CMA copy done piecewise in progress */
    int evk;                /* the event's context (intra_ev_get's key) */
    gw_request_t *req;
    gw_intra_slot_t *slot;
    int op;
    int to_remote;          /* CMA: direction, buffer, remote address, progress */
    char *lbuf;
    uint64_t raddr;
    uint8_t *rptr;          /* the peer's shared region mapped here: memcpy instead of CMA */
    size_t len, done;
    int ring;               /* a batch through the ring (intra_ring.c): */
    uint32_t rpend;         /*   its slots posted and not reaped */
    uint32_t rnext;         /*   its next entry to post */
    int rback;              /*   a slot was taken back: the rest by CMA */
    gw_status_t rerr;       /*   the first error */
} intra_cp_t;

typedef struct intra_ep {
    gw_tl_ep_t super;
    intra_iface_t *ifc;
    gw_list_t link;
    int lfd, fd;
    int bootfd;  /* the handshake socket, adopted and held (liveness is the Unix socket's job) */
    gw_io_t lio, io;
    int lio_on, io_on;
    char lname[40];
    pid_t peer_pid;
    uint64_t peer_probe;
    char peer_name[80];
    uint8_t peer_feat;   /* INTRA_FEAT_* of the peer's address blob */
    gw_intra_slot_t *peer_table;
    int ready;   /* socket connected and peer table mapped */
    int failed;
    int bye;     /* the peer closed: fail on the next progress call */
    int connected; /* ep_connect succeeded */
    uint64_t bye_gen;
    uint64_t last_ping_ns;
    uint8_t *out;
    size_t out_len, out_off, out_cap;
    uint64_t out_sent;   /* bytes of the queue written to the socket so far (positions of queued messages) */
    uint8_t *in;
    size_t in_len, in_cap;
    int rxfd[INTRA_MAX_RXFD];
    int nrxfd;
    gw_list_t waiting;   /* put/get/put_notify waiting for the connection or VMM fds */
    gw_list_t waiting_recv; /* receives whose pull waits likewise */
    intra_cp_t *cps;     /* CUDA copies in flight */
    size_t ncp, capcp;
    gw_list_t sends;     /* rendezvous sends waiting for FIN */
    gw_list_t imports;
    gw_hmap_t import_map; /* the imports by (slot, segment, device): intra_import_find */
    gw_list_t fdsets;
    gw_list_t shm_maps;  /* the peer's gw_mem_alloc regions mapped here (intra_shm.c) */
    /* small CMA puts (or gets) posted back to back: one system call (intra_cma_flush) */
    gw_request_t *cmaq[INTRA_CMA_BATCH];
    unsigned ncmaq;
    int cmaq_get;        /* the queue holds gets (process_vm_readv), else puts */
    uint64_t cma_gen;    /* ifc->gen when the last CMA copy went at once */
    uint32_t next_op;
    CUstream stream[INTRA_MAX_DEV];  /* copy streams in the device's primary context */
    CUstream ostream[INTRA_MAX_DEV]; /* copy streams in gpuwire's own context (GPUWIRE_CUDA_COPY_CONTEXT=own) */
    CUdeviceptr gword[INTRA_MAX_DEV]; /* per device: the bounds check's outcome word of paged batches with index
                                       * arrays in GPU memory, then the fused launch's barrier counter (8 bytes
                                       * each; one per stream: its batches take turns) */
    uint32_t ggen[INTRA_MAX_DEV];    /* per device: the word's last generation (0: the word not reset yet) */
    uint64_t garrived[INTRA_MAX_DEV]; /* per device: blocks launched on the barrier counter (modulo 2^64) */
    int own_ctx;                     /* GPUWIRE_CUDA_COPY_CONTEXT=own when the endpoint was made */
    CUevent evfree[INTRA_EV_KEEP];   /* events whose copies completed, for the next ones */
    int evfree_k[INTRA_EV_KEEP];     /* each one's context (intra_ev_get's key) */
    unsigned nevfree;
    unsigned long n_own;             /* GPU copies queued in the own context */
    unsigned long n_cma, n_cuda, n_staged, n_shm, n_cma_batched;
    unsigned long n_kernel; /* batched copy kernel launches (intra_batch.c) */
    unsigned long n_cma_calls; /* gw_intra_cma_batch calls for the n_cma_batched copies */
    unsigned long n_holes;  /* batched CMA gets: remote holes read through into a sink (intra_batch.c) */
    intra_ring_t *rout;     /* our ring toward the peer, once a batch could use it */
    intra_ring_t *rin;      /* the peer's ring, mapped here */
    int rout_off;           /* making or offering ours failed: none on this endpoint */
    unsigned long n_ring, n_ring_back, n_ring_served; /* slots posted, taken back (unclaimed past the wait, or at a cancel), copied for the peer */
} intra_ep_t;


/* the copy engine: one request's bytes between a local buffer and a peer   */
typedef struct rdesc {
    int gpu;                   /* peer memory is GPU memory (slot) */
    uint32_t slot;             /* peer slot index (gpu, or host with a key) */
    const gw_intra_slot_t *s;  /* mapped peer slot, NULL for keyless host (send) */
    uint64_t id;
    uint64_t addr;
} rdesc_t;

#define to_ifc(i) ((intra_iface_t *)(i))
#define to_ep(e) ((intra_ep_t *)(e))

/* intra_ep.c */
void intra_ep_fail(intra_ep_t *e, gw_status_t st, const char *fmt, const char *detail);
int intra_ep_dead(intra_ep_t *e);
gw_status_t intra_notify_out(void *arg, gw_request_t *req);
void intra_rma_done(intra_ep_t *e, gw_request_t *req, gw_status_t st);
int intra_poll_inflight(intra_ep_t *e);
void intra_retry_waiting(intra_ep_t *e);
gw_status_t intra_put(gw_tl_ep_t *tep, gw_request_t *req);
gw_status_t intra_cancel(gw_tl_ep_t *tep, gw_request_t *req);
void intra_ep_send_fin(intra_ep_t *e, uint64_t op, gw_status_t st);
gw_status_t intra_send(gw_tl_ep_t *tep, gw_request_t *req);
gw_status_t intra_am_send(gw_tl_ep_t *tep, unsigned id, const void *data, size_t len);
void intra_recv_pull(intra_ep_t *e, gw_request_t *req, uint64_t tag, uint64_t len, uint64_t addr, uint64_t op,
    uint64_t slot1);
gw_status_t intra_recv_matched(gw_tl_ep_t *tep, gw_request_t *req, gw_unexp_t *u);
gw_status_t intra_ep_prepare(gw_tl_iface_t *iface, gw_ep_base_t *base, gw_tl_ep_t **out, uint8_t *addr,
    size_t *addrlen);
gw_status_t intra_ep_reachable(gw_tl_iface_t *iface, const gw_tl_peer_t *peer, const uint8_t *blob,
    size_t len, char *why, size_t whylen);
gw_status_t intra_ep_connect(gw_tl_ep_t *tep, gw_tl_peer_t *peer, const uint8_t *blob, size_t len);
gw_status_t intra_ep_close(gw_tl_ep_t *tep);
void intra_ep_destroy(gw_tl_ep_t *tep);
gw_status_t intra_ep_describe(gw_tl_ep_t *tep, char *buf, size_t len);

/* intra_ctl.c */
socklen_t intra_abstract_addr(struct sockaddr_un *sa, const char *name);
void intra_out_flush(intra_ep_t *e);
gw_status_t intra_out_msg(intra_ep_t *e, const gw_intra_hdr_t *h, const void *payload);
/* Where the next message queued would start in the control stream (for
 * intra_out_withdraw). */
static inline uint64_t intra_out_next(const intra_ep_t *e)
{
    return e->out_sent + (e->out_len - e->out_off);
}
/* Takes the send req's message out of the control queue if none of its
 * bytes were written yet: 1 withdrawn (the peer never sees it), 0 not. */
int intra_out_withdraw(intra_ep_t *e, gw_request_t *req);
gw_status_t intra_ep_attach(intra_ep_t *e, int fd);
void intra_listen_event(void *arg, uint32_t events);

/* intra_copy.c */
int intra_cma_probe(pid_t pid, uint64_t addr, char *why, size_t whylen);
gw_status_t intra_cma_copy(gw_core_t *c, pid_t pid, int to_remote, void *lbuf, uint64_t raddr,
    size_t len);
gw_status_t intra_cu_err(gw_core_t *c, const char *what, CUresult r);
int intra_dev_by_pci(const char *pci);
gw_status_t intra_ep_stream(intra_ep_t *e, int dev, int own, CUstream *out);
/* 1 when a GPU copy between local memory lmem (NULL: host) and peer slot s
 * runs in gpuwire's own context: the endpoint has GPUWIRE_CUDA_COPY_CONTEXT=own
 * and both sides are VMM mappings; otherwise 0 (the log says once why an
 * own-context endpoint's copy stays in the primary context). */
int intra_own_copy(const intra_ep_t *e, const gw_mem_t *lmem, const gw_intra_slot_t *s);
void intra_import_close(intra_ep_t *e, intra_import_t *im);
/* The endpoint's import of segment sg of peer slot si in device dev's
 * context (whatever region id it was made for), or NULL: one hash lookup,
 * not a walk of every import (a batch over 160 peer regions looked each up
 * several times). */
intra_import_t *intra_import_find(const intra_ep_t *e, uint32_t si, uint32_t sg, int dev);
intra_fdset_t *intra_fdset_find(intra_ep_t *e, uint32_t slot, uint64_t id);
gw_status_t intra_import_seg(intra_ep_t *e, uint32_t si, const gw_intra_slot_t *s, uint64_t id,
    uint32_t sg, int dev, CUdeviceptr *out);
gw_status_t intra_cp_push(intra_ep_t *e, const intra_cp_t *cp);
/* Events for the copies of GPU `dev`'s stream in the primary context (own
 * 0) or gpuwire's own (own 1): an idle one of the endpoint's made in that
 * context, else a new one made in the current context (the caller's, that
 * one).  A cuEventCreate and cuEventDestroy per copy cost 0.6 us together
 * on an H200 host, paid by every GPU operation (docs/PERFORMANCE.md,
 * section 11). */
static inline int intra_ev_key(int dev, int own)
{
    return dev * 2 + (own != 0);
}
CUresult intra_ev_get(intra_ep_t *e, int key, CUevent *ev);
/* Back to the endpoint's idle ones once its copies completed (a query said
 * CUDA_SUCCESS or it was synchronized), or destroyed when it keeps enough. */
void intra_ev_put(intra_ep_t *e, CUevent ev, int key);
gw_status_t intra_staged_host(intra_ep_t *e, int to_remote, void *lbuf, int ldev, uint64_t raddr, size_t len);
gw_status_t intra_copy_start(intra_ep_t *e, gw_request_t *req, int to_remote, void *lbuf, const rdesc_t *r,
    size_t len, int *again);
gw_status_t intra_rkey_capture(intra_ep_t *e, gw_request_t *req);
gw_status_t intra_slot_enter(intra_ep_t *e, const gw_request_t *req, rdesc_t *r);
void intra_slot_leave(intra_ep_t *e, gw_request_t *req);
void intra_cma_flush(intra_ep_t *e);
int intra_cma_queue(intra_ep_t *e, gw_request_t *req);
int intra_shm_fast(intra_ep_t *e, gw_request_t *req);
gw_status_t intra_rma_now(gw_tl_ep_t *tep, int op, void *buf, size_t len, const gw_mem_t *lmem, uint64_t raddr,
    const gw_rkey_t *rkey);

/* intra_ctl.c */
gw_status_t intra_out_msg_fds(intra_ep_t *e, const gw_intra_hdr_t *h, const int *fds, int nfd);

/* intra_ring.c */
int intra_ring_post(intra_ep_t *e, gw_request_t *req);
int intra_ring_reap(intra_ep_t *e, intra_cp_t *cp, size_t *budget, gw_status_t *st);
/* gw_request_cancel() of the ring batch of cp: takes back its slots the
 * target has not claimed (compare-and-swap, as an offer not taken in time)
 * and drops its entries not yet posted; 1 when any was, and the batch then
 * ends GW_ERR_CANCELED once its claimed slots are reaped (intra_ring_reap). */
int intra_ring_cancel(intra_ep_t *e, intra_cp_t *cp);
int intra_ring_serve(intra_ep_t *e);
gw_status_t intra_ring_on_offer(intra_ep_t *e, int fd, uint64_t len);
void intra_ring_abort(intra_ep_t *e);
void intra_ring_destroy(intra_ep_t *e);
void intra_ring_sleep(void *arg, int asleep);

/* intra_batch.c */
int intrab_cancel(intra_ep_t *e, gw_request_t *req);
/* n more bytes of batch req moved (the ring's slots the target copied). */
void intrab_moved(gw_request_t *req, uint64_t n);
/* What a batch that failed or was cut short moved, at most (its GPU part counted whole). */
size_t intrab_length(const gw_request_t *req);
gw_status_t intra_shm_delta(intra_ep_t *e, const rdesc_t *r, intptr_t *delta);
size_t intrab_cma_step(intra_ep_t *e, gw_request_t *req, size_t budget, gw_status_t *st, int *fin);
int intrab_part_done(gw_request_t *req, gw_status_t *st);
void intrab_issue(intra_ep_t *e, gw_request_t *req);
gw_status_t intrab_batch(gw_tl_ep_t *tep, gw_request_t *req);

#endif
