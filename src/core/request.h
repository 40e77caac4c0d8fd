/* SPDX-License-Identifier: Apache-2.0 */
/* request.h - one posted operation (core layer).  The same object is the
 * user's gw_request_t handle and the transport's work item. */
#ifndef GW_CORE_REQUEST_H
#define GW_CORE_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "core.h"
#include "list.h"

struct gw_ep;
struct gw_mem;
struct gw_rkey;
struct gw_batch;
struct gw_intra_slot;
struct intrab_op;
struct tcpb_op;
struct gw_verbs_rc_entry;
struct gw_verbs_sreq;
struct fid_mr;

/* Transport-private scratch of a request, typed per transport (the union
 * below).  Each member is the transport's alone while it holds the request;
 * a request starts zeroed. */
struct gw_req_tcp {
    uint64_t sender;        /* rendezvous receive: the sender's slot id (for MSG_ACK) */
    uint64_t accept;        /* rendezvous receive: bytes accepted (CTS), checked against RDATA */
    struct tcpb_op *bop;    /* batched get: its state until it completes (tcp_batch.c) */
};
struct gw_req_intra {
    struct gw_intra_slot *slot; /* the peer table slot entered (its inflight counted) */
    uint64_t opid;          /* send/rendezvous: the operation id FIN answers */
    uint64_t src;           /* put/get: RK_VALID | table slot; rendezvous receive: slot + 1 << 32 */
    uint64_t src2;          /* put/get: the region id; rendezvous receive: message length */
    struct intrab_op *batch; /* batched transfer: its state (intra_batch.c) */
};

struct gw_req_verbs {
    struct gw_verbs_rc_entry *rc; /* registration-cache entry held for the local buffer */
    struct gw_verbs_sreq *stg;    /* staged (TLF_STAGED): its state (verbs_stage.c) */
    uint32_t slot;                /* bounce slot + 1 held by the request, 0 none */
    uint32_t stripe;              /* next QP of a striped transfer; a receive by WRITE_WITH_IMM:
                                   * the ends seen */
    union {
        struct {                  /* rendezvous: a receive's sender, a send's CTS from its receiver */
            uint64_t raddr;       /* the peer's buffer */
            uint32_t rkey;        /* ... its rkey */
            uint32_t opid;        /* the peer's rendezvous id (RTS_STAGED: the sender is staged) */
            uint64_t mlen;        /* message length */
        } rdv;
        struct {                  /* batched transfer (verbs_batch.c) */
            uint64_t ent;         /* next entry */
            uint64_t off;         /* bytes of it posted */
        } batch;
    };
};

struct gw_req_ofi {
    struct fid_mr *mr;            /* registration of the local buffer made for this request alone */
    uint64_t opid;                /* rendezvous send: its op-table id; receive: the sender's */
    uint64_t off;                 /* batch: bytes of entry `ent` posted; rendezvous receive: message length */
    uint64_t raddr;               /* rendezvous receive: the sender's buffer as the provider addresses it */
    uint64_t rkey;                /* ... and its key */
    uint32_t ent;                 /* batch: next entry to post */
    uint16_t bounce;              /* tx slot + 1 used as a bounce buffer, 0 none */
};

/* The transport scratch is one union of these; none may grow the request
 * past the 48 bytes it has. */
#define GW_REQ_TL_BYTES 48
_Static_assert(sizeof(struct gw_req_tcp) <= GW_REQ_TL_BYTES, "tcp request scratch over budget");
_Static_assert(sizeof(struct gw_req_intra) <= GW_REQ_TL_BYTES, "intra request scratch over budget");
_Static_assert(sizeof(struct gw_req_verbs) <= GW_REQ_TL_BYTES, "verbs request scratch over budget");
_Static_assert(sizeof(struct gw_req_ofi) <= GW_REQ_TL_BYTES, "ofi request scratch over budget");

typedef enum gw_op_type {
    GW_OP_PUT = 1,
    GW_OP_GET,
    GW_OP_PUT_NOTIFY,
    GW_OP_SEND,
    GW_OP_RECV,
    GW_OP_FLUSH,
    GW_OP_BATCH     /* batched put/get: the entries are in req->batch */
} gw_op_type_t;

enum {
    GW_REQF_USER = 1u << 0,  /* the caller holds the handle */
    GW_REQF_FREED = 1u << 1, /* the caller freed it while in progress */
    GW_REQF_QUEUED = 1u << 2, /* on the endpoint's outstanding list */
    GW_REQF_NDEFER = 1u << 3, /* its notification waits its turn (gw_ep_notify_defer) */
    GW_REQF_NHELD = 1u << 4   /* ... and its own data is in place */
};

struct gw_request {
    gw_status_t status; /* GW_INPROGRESS until complete */
    uint8_t op;
    uint8_t flags;
    uint16_t tl_flags;   /* transport-private */
    uint32_t slot;       /* transport-private id */
    size_t length;       /* result: bytes moved / message length */
    uint64_t rtag;       /* result: matched tag */
    gw_core_t *core;
    struct gw_ep *ep;
    gw_status_t *err_sink; /* untracked requests report errors here */
    uint32_t *use_count;   /* decremented on completion (local region in use) */
    gw_list_t link;        /* pool, or the endpoint's outstanding list */
    gw_list_t tl_link;     /* transport-private list membership */
    uint64_t seq;          /* posting order on the endpoint */
    /* the operation */
    void *buf;
    size_t len;
    struct gw_mem *lmem;
    struct gw_rkey *rkey;
    uint64_t raddr;
    uint64_t value; /* notification value / tag */
    uint64_t mask;
    /* transport progress */
    size_t posted;      /* bytes handed to the wire */
    size_t done;        /* bytes confirmed */
    uint32_t pending;   /* frames/work requests in flight */
    gw_status_t first_err;
    union {                     /* transport scratch, typed per transport (GW_REQ_TL_BYTES) */
        struct gw_req_tcp tcp;
        struct gw_req_intra intra;
        struct gw_req_verbs verbs;
        struct gw_req_ofi ofi;
    };
    /* batched transfers (transport/base/batch.h): the entries, and the hook
     * that releases them, run once when the request completes */
    struct gw_batch *batch;
    void (*fini)(struct gw_request *r);
    /* why it failed, for gw_request_info (malloc'd at completion with an
     * error, user requests only; freed on recycle) */
    char *detail;
    uint64_t err_mark;  /* core->err_count when posted */
};

/* Takes a request from the core's pool (zeroed, status GW_INPROGRESS). */
struct gw_request *gw_req_alloc(gw_core_t *c);
/* Will the next gw_req_alloc() succeed without allocating (a pooled one waits)? */
static inline int gw_req_spare(const gw_core_t *c)
{
    return c->req_free.next != &c->req_free;
}
/* Marks complete; recycles it if the caller freed it or never held it. */
void gw_req_complete(struct gw_request *r, gw_status_t status);
/* Caller's free: recycle now if complete, else when it completes. */
void gw_req_release(struct gw_request *r);

#endif
