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

/* Transport-private scratch of a request: GW_REQ_TL_BYTES bytes, 8-aligned,
 * that the transport holding the request reads as a struct of its own,
 * declared in its private header with GW_REQ_TL_SCRATCH (core names no
 * transport's struct).  It is the transport's alone while it holds the
 * request; a request starts zeroed. */
#define GW_REQ_TL_BYTES 48

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
    GW_REQF_NHELD = 1u << 4,  /* ... and its own data is in place */
    GW_REQF_CANCEL = 1u << 5  /* gw_request_cancel() asked for it while it moved
                               * (counted in core->n_canceling until it completes) */
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
    union {
        uint64_t mask;  /* GW_OP_RECV: the tag mask */
        void *owner;    /* a put, get or batch the protocol layer split into requests
                         * (proto/proto.h): its state, in the batch and in each piece */
    };
    /* transport progress */
    size_t posted;      /* bytes handed to the wire */
    size_t done;        /* bytes confirmed */
    uint32_t pending;   /* frames/work requests in flight */
    gw_status_t first_err;
    _Alignas(8) unsigned char tl_scratch[GW_REQ_TL_BYTES]; /* transport scratch (GW_REQ_TL_SCRATCH) */
    /* batched transfers (transport/base/batch.h): the entries, and the hook
     * that releases them, run once when the request completes */
    struct gw_batch *batch;
    void (*fini)(struct gw_request *r);
    /* why it failed, for gw_request_info (malloc'd at completion with an
     * error, user requests only; freed on recycle) */
    char *detail;
    uint64_t err_mark;  /* core->err_count when posted */
    uint64_t cancel_ns; /* GW_REQF_CANCEL: when it must have ended (gw_now_ns), else its
                         * endpoint fails (api/api_ext.c, the cancel watch) */
};

/* Declares fn, the typed view of a request's transport scratch as struct
 * type T (a transport's private header does this once), and holds T to the
 * scratch's size and alignment at compile time:
 *     struct gw_req_tcp { ... };
 *     GW_REQ_TL_SCRATCH(tcp_rq, struct gw_req_tcp)
 *     tcp_rq(req)->sender = id;
 * (A request is malloc'd and its scratch is only ever read and written as
 * the one transport's T while it holds it, besides the zeroing memset.) */
#define GW_REQ_TL_SCRATCH(fn, T)                                                                 \
    _Static_assert(sizeof(T) <= GW_REQ_TL_BYTES, #T " is larger than a request's transport scratch"); \
    _Static_assert(_Alignof(T) <= 8, #T " needs more alignment than a request's transport scratch"); \
    static inline T *fn(const struct gw_request *r)                                              \
    {                                                                                            \
        return (T *)(void *)(uintptr_t)r->tl_scratch;                                            \
    }

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
