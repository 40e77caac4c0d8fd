/* SPDX-License-Identifier: Apache-2.0 */
/* ofi.h - the ofi (libfabric) transport's private objects (transport layer).
 *
 *   gw_ofi_iface_t  one per context: the provider chosen by fi_getinfo, its
 *                   fabric and domain; embeds gw_tl_iface_t first.
 *   gw_ofi_ep_t     one per endpoint: an RDM endpoint with its own completion
 *                   queue (wait fd in the context's epoll set) and address
 *                   vector holding the one peer, registered receive and
 *                   send slots; embeds gw_tl_ep_t first.
 *   gw_ofi_reg_t    a region's registration (one fid_mr).
 *
 * The data path is the primitives a transport owes the protocol layer:
 * put/get as fi_writemsg/fi_readmsg (cut at the provider's largest
 * message), a small message (fi_send of a header and its payload from a
 * registered slot), a rendezvous for larger messages (the receiver
 * fi_readmsg's the sender's buffer, then answers FIN), notifications as
 * messages sent once the data before them is delivered (the base's
 * deferral, ep_base.h; batches arrive expanded by the protocol layer),
 * completions read from the endpoint's queue by the
 * context's poller.  Writes ask for FI_DELIVERY_COMPLETE where the provider
 * offers it, so a completed put has landed, as a flush promises.
 *
 * Files: ofi_loader.c (dlopen), ofi_wire.c (wire formats), ofi_iface.c
 * (provider choice, regions, keys, ops table), ofi_ep.c (endpoint life,
 * failure), ofi_post.c (operations and completions).
 */
#ifndef GW_OFI_OFI_H
#define GW_OFI_OFI_H

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <stddef.h>
#include <stdint.h>

#include "transport/base/liveness.h"
#include "transport/base/op_table.h"
#include "transport/base/tl.h"
#include "transport/ofi/ofi_syms.h"
#include "transport/ofi/ofi_wire.h"

/* A request's ofi scratch (core/request.h GW_REQ_TL_SCRATCH): ofi_rq(req). */
struct gw_req_ofi {
    struct fid_mr *mr;            /* registration of the local buffer made for this request alone */
    uint64_t opid;                /* rendezvous send: its op-table id; receive: the sender's */
    uint64_t off;                 /* rma_iov: bytes of entry `ent` posted; rendezvous receive: message length */
    union {
        uint64_t raddr;           /* rendezvous receive: the sender's buffer as the provider addresses it */
        struct gw_ofi_ctx *tctx;  /* tagged send or receive: its context while the provider holds it */
    };
    uint64_t rkey;                /* ... and its key */
    uint32_t ent;                 /* rma_iov: next entry to post */
    uint16_t bounce;              /* tx slot + 1 used as a bounce buffer, 0 none */
};
GW_REQ_TL_SCRATCH(ofi_rq, struct gw_req_ofi)

#define GW_OFI_SLOT 16384                               /* a receive or send slot */
#define GW_OFI_EAGER_MAX (GW_OFI_SLOT - GW_OFI_HDR_LEN) /* largest message sent in one piece */
#define GW_OFI_NRX GW_OFI_CREDIT_SLOTS                   /* receive slots posted per endpoint (the credits' pool) */
#define GW_OFI_CREDIT_BACK (GW_OFI_NRX / 4) /* credits owed that a CREDIT message returns when nothing else goes */
#define GW_OFI_RX_LAZY 16 /* receive slots whose repost may wait for a pass that found nothing */
#define GW_OFI_NTX 64                                   /* send slots per endpoint */
#define GW_OFI_MAX_RMA 256                              /* RMA pieces in flight per endpoint */
#define GW_OFI_INJECT_MAX 256                           /* largest message sent by fi_inject (header included) */
#define GW_OFI_TINJECT_MAX 4096                         /* largest tagged message sent by fi_tinject */
#define GW_OFI_TEAGER_MAX GW_OFI_SLOT                   /* tagged path: largest message sent whole (else an RTS) */
#define GW_OFI_TSTAGE GW_OFI_TEAGER_MAX                 /* tagged path: receives shorter than this land in a stage */
#define GW_OFI_NTSTAGE 64                               /* ... of which an endpoint has this many */
#define GW_OFI_GRACE_NS 3000000000ull /* a closed endpoint's provider objects live on this long (defer_close) */

typedef struct gw_ofi_iface {
    gw_tl_iface_t super;
    const gw_fi_t *fi;
    struct fi_info *info; /* the chosen provider and domain */
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    gw_list_t eps;
    gw_list_t graves;     /* closed endpoints whose fi_close waits (defer_close), by close time */
    uint64_t wflags;      /* flags of every write: FI_COMPLETION | FI_DELIVERY_COMPLETE where offered */
    int delivery;         /* FI_DELIVERY_COMPLETE is offered */
    int mr_local;         /* FI_MR_LOCAL: every local buffer needs a descriptor */
    int virt_addr;        /* FI_MR_VIRT_ADDR: RMA addresses are virtual, else offsets */
    int prov_key;         /* FI_MR_PROV_KEY: the provider picks keys, else we do */
    int hmem;             /* FI_HMEM: CUDA memory registers with FI_HMEM_CUDA */
    int wait_fd;          /* completion queues give a wait fd (else the context never sleeps on them) */
    int no_wakeup;        /* a peer's message wakes no fd here (shm: the peer writes shared memory and
                           * signals nothing): the context fd is kept readable while endpoints exist */
    int shm_names;        /* shm: endpoints get gpuwire's own region names (ofi_shm.c) */
    int defer_close;      /* libfabric 2.x tcp: an endpoint's fi_close waits GW_OFI_GRACE_NS (ofi_ep.c) */
    int cancel_vague;     /* FI_ECANCELED says nothing of why (libfabric 2.x tcp): a probe decides (ofi_post.c) */
    int tagged;           /* application messages may take the provider's tagged operations (FI_TAGGED,
                           * FI_ORDER_SAS, 64 tag bits, GPUWIRE_OFI_TAGGED=auto); the peer must agree */
    char tagged_why[160]; /* why not, when not */
    int credits;          /* header messages under credits where the peer agrees (GPUWIRE_OFI_CREDITS) */
    char credits_why[64]; /* why not, when not */
    uint64_t next_key;    /* requested keys, when the provider does not pick them */
    uint64_t max_piece;   /* largest single RMA (the endpoint's max_msg_size, capped) */
    size_t tinject;       /* tagged path: messages up to this size go by fi_tinject (0 none) */
    uint64_t max_msg;     /* tagged path: the provider's largest message */
    size_t inject;        /* messages up to this size (header included) go by fi_inject: no send
                           * completion to read; 0 none (the provider's inject_size, capped) */
    uint64_t gpu_regs;
    uint64_t fence_seq;   /* the last deregistration fence's number (ofi_dereg_fence) */
    gw_liveness_t live;
    char prov[GW_OFI_PROV_MAX];
    char dom[GW_OFI_DOM_MAX];
    char how[480];        /* the choice, and why others were passed over */
} gw_ofi_iface_t;

typedef struct gw_ofi_reg {
    struct fid_mr *mr;
    void *desc;
    uint64_t key;
} gw_ofi_reg_t;

enum { GW_OFI_CTX_RX = 1, GW_OFI_CTX_TX, GW_OFI_CTX_RMA, GW_OFI_CTX_TSEND, GW_OFI_CTX_TRECV, GW_OFI_CTX_TPEEK };

/* One operation posted to the provider: its context (fi_context2 first,
 * which FI_CONTEXT/FI_CONTEXT2 providers use as their scratch). */
typedef struct gw_ofi_ctx {
    struct fi_context2 fc;
    struct gw_ofi_ep *ep;
    gw_request_t *req; /* the request it serves (NULL: none, or forgotten at failure) */
    gw_list_t link;    /* RMA: free or in flight */
    uint32_t len;
    uint16_t slot;     /* receive or send slot index; TRECV: stage index + 1, 0 none */
    uint8_t kind;      /* GW_OFI_CTX_* */
    uint8_t canceled;  /* TRECV: fi_cancel asked for it (its FI_ECANCELED is ours) */
    uint8_t cost;      /* RX: the message it held cost its sender a credit (owed back once posted again) */
} gw_ofi_ctx_t;

/* A rendezvous message that arrived before its receive: the sender's buffer. */
typedef struct gw_ofi_rts {
    gw_list_t link;
    uint64_t raddr, key;
} gw_ofi_rts_t;

/* A control message waiting for a send slot or for the provider's room. */
typedef struct gw_ofi_ctl {
    gw_list_t link;
    gw_ofi_hdr_t h;
    uint32_t plen;    /* payload bytes (an active message's) */
    uint8_t pay[];
} gw_ofi_ctl_t;

typedef struct gw_ofi_ep {
    gw_tl_ep_t super;
    gw_ofi_iface_t *oif;
    gw_list_t link; /* in oif->eps */
    struct fid_ep *ep;
    struct fid_av *av;
    struct fid_cq *cq;
    gw_io_t cq_io;
    fi_addr_t peer;
    int connected;
    int closing;
    int tx_seen;            /* a send completed: the provider's connection to the peer is up */
    uint8_t *rxbuf, *txbuf;
    struct fid_mr *rxmr, *txmr;
    void *rxdesc, *txdesc;
    gw_ofi_ctx_t rxctx[GW_OFI_NRX];
    gw_ofi_ctx_t txctx[GW_OFI_NTX];
    uint16_t txfree[GW_OFI_NTX];
    unsigned ntxfree;
    uint16_t rx_lazy[GW_OFI_RX_LAZY]; /* receive slots consumed, not posted again yet */
    unsigned nrx_lazy;
    /* credits (GW_OFI_AF_CREDITS, ofi_wire.h): what this side may still send
     * (a bound no sender reaches where the peer does not agree), and what it
     * owes the peer for slots posted again; cr_on: both sides agreed (set
     * at prepare where this side offers, settled at connect) */
    uint64_t tx_credits;
    unsigned cr_owed;
    int cr_on;
    gw_ofi_ctx_t *rma;      /* GW_OFI_MAX_RMA contexts */
    gw_list_t rma_free, rma_busy;
    gw_list_t pending;      /* requests not fully posted yet, in posting order (tl_link) */
    gw_list_t ctlq;         /* control messages not sent yet (gw_ofi_ctl_t) */
    gw_list_t rdv_recvs;    /* receives reading a rendezvous message (tl_link) */
    gw_list_t rts;          /* unexpected rendezvous records (gw_ofi_rts_t) */
    gw_op_table_t sends;    /* rendezvous sends waiting for their FIN */
    gw_ofi_addr_t local, remote;
    int tagged;             /* both sides agreed: application messages go by fi_tsend/fi_trecv */
    gw_list_t tctx_free;    /* contexts of tagged sends and receives: free ... */
    gw_list_t tctx_busy;    /* ... and posted to the provider (receives first matter: failure, cancel) */
    uint8_t *tstage;        /* GW_OFI_NTSTAGE stages of GW_OFI_TSTAGE bytes (registered where FI_MR_LOCAL) */
    struct fid_mr *tstage_mr;
    void *tstage_desc;
    uint16_t tstage_free[GW_OFI_NTSTAGE];
    unsigned ntstage_free;
    uint64_t last_ping_ns;
    uint64_t fence_want;    /* the deregistration fence this endpoint's peer is to answer, 0 none */
    uint64_t fence_seen;    /* the highest fence number a PONG of the peer echoed */
    uint64_t probe_seq;     /* cancel_vague: the fence number of the probe asking whether the peer lives, 0 none */
    uint64_t probe_until;   /* ... and when its answer is given up on */
    int probe_rma;          /* ... an RMA was among the operations the provider cancelled */
    int peek_state;         /* tagged probe (FI_PEEK): 0 waiting, 1 found (peek_len, peek_tag), 2 none, 3 failed */
    uint64_t peek_len, peek_tag;
    unsigned probe_slot;    /* ... the send slot + 1 its PING went from, 0 not sent yet */
    char probe_what[200];   /* ... the first of them, for the verdict's message */
    uint64_t grave_ns;      /* defer_close: when it was closed */
    int used;               /* a message came from the peer, or an RMA or a rendezvous send was posted:
                             * closed, the endpoint is not deferred (defer_close) */
    /* counters for ep_describe */
    uint64_t n_rma, n_eager, n_inject, n_rdv, n_bounce, n_onfly, n_eagain, n_cqe, n_trecv;
    uint64_t n_cstall;      /* messages that waited for a credit */
    uint64_t n_credit;      /* CREDIT messages sent */
} gw_ofi_ep_t;

static inline gw_ofi_ep_t *to_oep(gw_tl_ep_t *e) { return (gw_ofi_ep_t *)e; }
static inline gw_core_t *oep_core(gw_ofi_ep_t *ep) { return ep->oif->super.core; }

/* ofi_iface.c */
extern const gw_tl_ops_t gw_tl_ofi_ops;
/* fi_getinfo for what the transport needs (RDM, messages and RMA; FI_HMEM
 * when hmem; FI_DELIVERY_COMPLETE when delivery), of provider prov and
 * domain dom when given; NULL when nothing matches (the reason in why).
 * Also the doctor's question for a NIC (diag/hooks.c). */
struct fi_info *gw_ofi_getinfo(const gw_fi_t *fi, const char *prov, const char *dom, int hmem, int delivery,
                               char *why, size_t whylen);
const char *gw_ofi_strerror(const gw_ofi_iface_t *oif, int err);
/* Registers [buf, +len) for this request alone (FI_MR_LOCAL providers, and
 * a rendezvous send from memory without a key a peer may read by; access
 * FI_* flags; cuda_dev: the GPU of device memory, -1 host memory); NULL
 * with the detail set on failure. */
struct fid_mr *gw_ofi_reg_local(gw_ofi_iface_t *oif, const void *buf, size_t len, uint64_t access, int cuda_dev,
                                gw_status_t *st);
void gw_ofi_close_mr(gw_ofi_iface_t *oif, struct fid_mr *mr);

/* The context fd's keep-ready state (core.h) as the endpoints need it: set
 * while endpoints exist where no fd wakes a sleeper (shm, or queues without
 * wait fds); run when an endpoint joins or leaves the list. */
void gw_ofi_keep_update(gw_ofi_iface_t *oif);

/* ofi_ep.c */
gw_status_t gw_ofi_ep_prepare(gw_tl_iface_t *iface, gw_ep_base_t *base, gw_tl_ep_t **out, uint8_t *addr,
                              size_t *addrlen);
gw_status_t gw_ofi_ep_reachable(gw_tl_iface_t *iface, const gw_tl_peer_t *peer, const uint8_t *peer_addr,
                                size_t len, char *why, size_t whylen);
gw_status_t gw_ofi_ep_connect(gw_tl_ep_t *ep, gw_tl_peer_t *peer, const uint8_t *peer_addr, size_t len);
gw_status_t gw_ofi_ep_close(gw_tl_ep_t *ep);
void gw_ofi_ep_destroy(gw_tl_ep_t *ep);
gw_status_t gw_ofi_ep_describe(gw_tl_ep_t *ep, char *buf, size_t len);
/* Fails the endpoint (first error wins) with a message. */
void gw_ofi_ep_die(gw_ofi_ep_t *ep, gw_status_t st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* What a libfabric error number means for gpuwire. */
gw_status_t gw_ofi_status_of(int fi_err);

/* ofi_post.c */
gw_status_t gw_ofi_submit(gw_tl_ep_t *ep, gw_request_t *req);
/* A small host message by fi_inject before any request exists (tl.h send_now). */
gw_status_t gw_ofi_send_now(gw_tl_ep_t *ep, const void *buf, size_t len, uint64_t tag);
/* The scatter/gather primitive (tl.h rma_iov): fi_writemsg/fi_readmsg per entry. */
gw_status_t gw_ofi_rma_iov(gw_tl_ep_t *ep, gw_request_t *req);
gw_status_t gw_ofi_recv_matched(gw_tl_ep_t *ep, gw_request_t *req, gw_unexp_t *msg);
gw_status_t gw_ofi_cancel(gw_tl_ep_t *ep, gw_request_t *req);
/* The tagged path's receive (ep_base.h tl_recv): fi_trecv into the
 * receive's buffer, the provider matching it. */
gw_status_t gw_ofi_trecv(gw_tl_ep_t *ep, gw_request_t *req);
/* The tagged path's probe (ep_base.h tl_probe): FI_PEEK. */
gw_status_t gw_ofi_tprobe(gw_tl_ep_t *ep, uint64_t tag, uint64_t mask, size_t *len, uint64_t *rtag);
int gw_ofi_ep_progress(gw_ofi_ep_t *ep);
/* Posts the receive slot i (again). */
int gw_ofi_post_rx(gw_ofi_ep_t *ep, unsigned i);
/* Sends a control message (queued when no slot or room is free now). */
gw_status_t gw_ofi_send_ctl(gw_ofi_ep_t *ep, const gw_ofi_hdr_t *h);
/* The small-message primitive (tl.h am_send): a control message with a payload. */
gw_status_t gw_ofi_am_send(gw_tl_ep_t *ep, unsigned id, const void *data, size_t len);
/* The base's sender of deferred notifications (ep_base.h notify_out). */
gw_status_t gw_ofi_notify_out(void *arg, gw_request_t *req);
/* Drops every reference to requests (failure): run from on_fail. */
void gw_ofi_forget_all(gw_ofi_ep_t *ep, gw_status_t st);
/* cancel_vague: the probe's verdict when its PONG is in, or (late) when it
 * is given up on. */
void gw_ofi_probe_verdict(gw_ofi_ep_t *ep, int answered);
/* defer_close: reads (and drops) what the closed endpoints' queues hold and
 * closes those closed GW_OFI_GRACE_NS ago; with all, closes every one at
 * once, progressing nothing. */
void gw_ofi_graves_sweep(gw_ofi_iface_t *oif, int all);

/* shm region names (ofi_shm.c): a name no other process, live or dead,
 * has used (0, or -1 when len is too small), and a once-per-process
 * removal of the region files of dead processes. */
int gw_ofi_shm_name(char *buf, size_t len);
void gw_ofi_shm_sweep(void);

#endif
