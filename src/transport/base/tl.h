/* SPDX-License-Identifier: Apache-2.0 */
/* tl.h - the interface every transport implements (transport layer).
 *
 * A transport is a `const gw_tl_ops_t` filled with designated initializers.
 * No slot is ever NULL: operations a transport lacks point at the
 * gw_tl_unsupported_* defaults in tl_default.c, which return
 * GW_ERR_UNSUPPORTED.  The table starts with its size: the context refuses
 * a table whose size differs from this header's sizeof(gw_tl_ops_t) (built
 * against another version of this interface) or that has a NULL slot
 * (gw_tl_check_ops).
 *
 * What a transport writes (docs/DESIGN.md, "Adding a transport"); the base
 * (ep_base.h) and the protocol layer (proto/proto.h) do the rest:
 *   1. connection set-up: iface_*, ep_prepare/reachable/connect/close/
 *      destroy/describe, with on_fail (and notify_out, where a notification
 *      could overtake data) set on the base at ep_connect;
 *   2. registration: mem_reg/mem_dereg, rkey_pack/unpack/release;
 *   3. the data primitives: submit() of GW_OP_PUT, GW_OP_GET and
 *      GW_OP_PUT_NOTIFY, and rma_iov(), a put or get over a list of pieces
 *      (batches arrive as these, split by proto/, unless caps() says
 *      GW_TL_BATCH_NATIVE; without rma_iov, as one put or get per entry);
 *   4. the small-message send: am_send() (an active message run by a
 *      handler on the peer), submit() of GW_OP_SEND, recv_matched for a
 *      rendezvous, and notify_out;
 *   5. its completion poller, completing requests with gw_ep_op_done().
 * Everything else is optional and declared in caps(): GPU reach (mem_kinds,
 * gpu_paths; a transport without GW_TL_MEM_CUDA gets a put's, get's and
 * batch's local GPU buffer staged by the protocol layer through pinned host
 * slots over its host operations, proto/proto.h), native batches, and the
 * fast lanes rma_now, send_now, put_direct and ep_progress, slots any
 * transport may fill.
 *
 * Life of an endpoint:
 *   1. ep_prepare(): make local resources, return the local address blob the
 *      handshake carries to the peer.
 *   2. the handshake (api/handshake.c) exchanges blobs and agrees on one
 *      transport; the others' tl endpoints get ep_destroy().
 *   3. ep_connect(): finish with the peer's blob.  The transport may adopt the
 *      bootstrap socket (tcp does: it becomes stream 0).
 *   4. operations through submit(); completions through gw_ep_op_done()
 *      (ep_base.h).
 *   5. ep_close() (graceful: tell the peer) then ep_destroy().
 *
 * Remote keys: gw_rkey_unpack() (api/mem.c) decodes the key's envelope and
 * hands the part written by the endpoint's transport to rkey_unpack(), once;
 * a malformed part is refused there with GW_ERR_INVALID_KEY and a message
 * naming the transport and the fault.  The transport keeps what it parsed in
 * rk->tl_key (GW_RKEY_TL_KEY_MAX bytes, plain data: keys are copied by value)
 * and its operations read that, never the raw blob again.  rkey_release()
 * runs at gw_rkey_destroy().
 *
 * Request scratch: a transport keeps its per-request state in the
 * request's transport scratch (core/request.h, GW_REQ_TL_BYTES bytes), read
 * as a typed struct of its own that its private header declares with
 * GW_REQ_TL_SCRATCH(accessor, struct) (tcp_rq, intra_rq, verbs_rq), never as
 * untyped words with aliased indices; the macro holds the struct to the
 * scratch's size at compile time, so no transport can grow every request,
 * and core names no transport's struct.  A request reaches submit() and
 * recv_matched() with the scratch zeroed (a transport that reuses a request
 * clears it itself).
 *
 * The GW_TL_* ids below are written into packed rkeys and into the handshake
 * (the transport list and each blob's owner): they are a wire format.  Never
 * renumber one; a new transport takes the next free number.
 */
#ifndef GW_TRANSPORT_TL_H
#define GW_TRANSPORT_TL_H

#include <stddef.h>
#include <stdint.h>

#include "core/core.h"
#include "core/request.h"
#include "core/transports.h"
#include "mem/mem.h"
#include "transport/base/ep_base.h"

/* The transport ids GW_TL_VERBS.. and GW_TL_COUNT come from the one list,
 * core/transports.def: a wire format, never renumbered. */

typedef struct gw_tl_iface gw_tl_iface_t;
typedef struct gw_tl_ep gw_tl_ep_t;
typedef struct gw_tl_ops gw_tl_ops_t;
/* put_direct's maker of the api's request, called after the doorbell */
typedef gw_request_t *(*gw_tl_req_make_fn)(void *arg);

/* Transport-private iface structs embed this first (container_of style). */
struct gw_tl_iface {
    const gw_tl_ops_t *ops;
    gw_core_t *core;
    int id; /* GW_TL_* */
};

/* Transport-private endpoint structs embed this first. */
struct gw_tl_ep {
    gw_tl_iface_t *iface;
    gw_ep_base_t *base; /* the generic endpoint this serves */
};

/* What the handshake needs to know of the peer. */
typedef struct gw_tl_peer {
    uint64_t uuid;      /* peer context */
    uint64_t host_id;   /* equal to ours: same host */
    int is_server;      /* we are the accepting side */
    int bootstrap_fd;   /* connected socket of the handshake; -1 once adopted */
    const char *peer_addr; /* "host:port" of the peer */
    uint64_t ep_token;  /* server-assigned endpoint token (for extra connections) */
    /* Client side: opens further connection number idx of this endpoint to
     * the peer (connect + JOIN, done by the api layer); returns a connected
     * fd or -1 with the reason in the context's detail message. */
    int (*open_stream)(void *arg, unsigned idx);
    void *open_stream_arg;
    /* Server side, set by ep_connect: how many further connections the
     * client opens for this endpoint (each arrives at the listener and is
     * handed over by ep_join).  The api layer hands the endpoint to
     * gw_accept only once they all joined, so that an accepted endpoint
     * never needs its listener again. */
    unsigned joins;
} gw_tl_peer_t;

/* What a transport can do, for the api layer to ask instead of knowing
 * per-transport constants (caps op).  Sizes in bytes; 0 where none. */
enum {
    GW_TL_MEM_HOST = 1u << 0,       /* host memory, registered or not */
    GW_TL_MEM_CUDA = 1u << 1,       /* CUDA device memory (lmem given) */
};
enum {
    GW_TL_GPU_DIRECT = 1u << 0,     /* the device reads/writes GPU memory itself (GPUDirect RDMA) */
    GW_TL_GPU_STAGED = 1u << 1,     /* through pinned host bounce buffers (D2H/H2D) */
    GW_TL_GPU_IPC = 1u << 2,        /* a local peer maps the GPU memory (CUDA IPC) */
};
/* Without GW_TL_BATCH_NATIVE (or without the GPU/COUNTED flag a batch
 * needs) the protocol layer expands batches into single operations. */
enum {
    GW_TL_BATCH_NATIVE = 1u << 0,   /* submit() takes GW_OP_BATCH requests (batch.h) */
    GW_TL_BATCH_GPU = 1u << 1,      /* ... whose regions may be GPU memory */
    GW_TL_BATCH_COUNTED = 1u << 2,  /* ... with a counted notification (GW_NOTIFY_COUNTED) */
    GW_TL_BATCH_PAGES = 1u << 3,    /* ... paged batches of GPU memory on both sides unexpanded (batch.h) */
    GW_TL_BATCH_LISTS = 1u << 4,    /* ... list batches of one GPU region and key unexpanded (batch.h) */
    GW_TL_BATCH_CLISTS = 1u << 5,   /* ... and those over computed lists of several GPU regions or keys (batch.h) */
    GW_TL_BATCH_ICHECK = 1u << 6,   /* ... unexpanded with host index arrays it checks as it copies them (batch.h) */
};
typedef struct gw_tl_caps {
    size_t eager_max;   /* largest message sent in one piece, without a rendezvous */
    uint64_t max_msg;   /* largest single operation or message; UINT64_MAX: no limit */
    unsigned mem_kinds; /* GW_TL_MEM_* the operations accept */
    unsigned gpu_paths; /* GW_TL_GPU_* ways GPU memory may move (the region's path says which) */
    unsigned batch;     /* GW_TL_BATCH_* */
} gw_tl_caps_t;

struct gw_tl_ops {
    size_t size; /* sizeof(gw_tl_ops_t) the transport was built against */
    const char *name;

    /* context level.  iface_open returns GW_ERR_UNAVAILABLE / GW_ERR_NOT_BUILT
     * with `why` filled when the transport cannot run here (absent: logged at
     * info by the caller; any other error is "broken" and logged at warn). */
    gw_status_t (*iface_open)(gw_core_t *core, gw_tl_iface_t **out, char *why, size_t whylen);
    void (*iface_close)(gw_tl_iface_t *iface);
    /* One line about the usable devices, for `gpuwire info`. */
    gw_status_t (*iface_describe)(gw_tl_iface_t *iface, char *buf, size_t len);

    /* memory: make the region reachable through this transport; write how
     * (and why not better) into the region's path text. */
    gw_status_t (*mem_reg)(gw_tl_iface_t *iface, gw_mem_t *mem);
    gw_status_t (*mem_dereg)(gw_tl_iface_t *iface, gw_mem_t *mem);
    /* transport part of a packed rkey (e.g. verbs rkey + addr); *len in/out */
    gw_status_t (*rkey_pack)(gw_tl_iface_t *iface, const gw_mem_t *mem, uint8_t *buf, size_t *len);
    /* The peer's part of a key, parsed once at gw_rkey_unpack(): rk's
     * envelope fields (owner, id, addr, len, access, type) and tl_blob are
     * set; blob/len is the part (len 0: the key carries none, which the
     * transport may accept and refuse at the operation).  Writes its parsed
     * form into rk->tl_key.  A malformed part: GW_ERR_INVALID_KEY with why
     * ("<transport> key part: <what is wrong>"). */
    gw_status_t (*rkey_unpack)(gw_tl_iface_t *iface, const uint8_t *blob, size_t len, gw_rkey_t *rk,
                               char *why, size_t whylen);
    /* gw_rkey_destroy(): release what rkey_unpack took (nothing, for a key
     * parsed into rk->tl_key alone). */
    void (*rkey_release)(gw_tl_iface_t *iface, gw_rkey_t *rk);
    /* What this transport can do (see gw_tl_caps_t); never fails. */
    void (*caps)(gw_tl_iface_t *iface, gw_tl_caps_t *out);

    /* endpoints */
    gw_status_t (*ep_prepare)(gw_tl_iface_t *iface, gw_ep_base_t *base, gw_tl_ep_t **out,
                              uint8_t *addr, size_t *addrlen);
    /* Can this transport reach the peer described by its blob? (before choosing) */
    gw_status_t (*ep_reachable)(gw_tl_iface_t *iface, const gw_tl_peer_t *peer,
                                const uint8_t *peer_addr, size_t len, char *why, size_t whylen);
    gw_status_t (*ep_connect)(gw_tl_ep_t *ep, gw_tl_peer_t *peer, const uint8_t *peer_addr,
                              size_t len);
    /* A further connection for this endpoint arrived at the listener (tcp
     * stripes; before gw_accept hands the endpoint out, see
     * gw_tl_peer_t.joins).  The transport takes ownership of fd. */
    gw_status_t (*ep_join)(gw_tl_ep_t *ep, int fd, unsigned stream_index);
    gw_status_t (*ep_close)(gw_tl_ep_t *ep); /* graceful: start telling the peer */
    void (*ep_destroy)(gw_tl_ep_t *ep);
    /* One line for gw_ep_query()'s path. */
    gw_status_t (*ep_describe)(gw_tl_ep_t *ep, char *buf, size_t len);

    /* operations: ONE entry for every operation a request carries (chosen
     * over per-op slots: each transport queues requests and dispatches on
     * the operation in its progress engine anyway, and one entry keeps the
     * api layer's posting path a single call).  The api layer validated
     * arguments, bounds and access (rkey against the region it covers,
     * local buffer against lmem), queued the request on base->outstanding
     * and set req->seq.  req->op says which operation; its arguments are:
     *   GW_OP_PUT, GW_OP_GET   buf, len, lmem (NULL: unregistered host
     *                          memory), raddr, rkey (its tl_key parsed)
     *   GW_OP_PUT_NOTIFY       the same, and value: delivered to the peer's
     *                          notification queue after the data and after
     *                          every earlier put of this endpoint
     *   GW_OP_SEND             buf, len, lmem, value (the tag)
     *   GW_OP_BATCH            req->batch (batch.h): the whole batch in one
     *                          call, entries the api layer validated (bounds
     *                          and access against each key, zero-length
     *                          entries dropped, adjacent ones coalesced),
     *                          moved natively, its notification (if any)
     *                          after its last byte (ORDERED: also after
     *                          every earlier put, like put_notify); only
     *                          when caps() says GW_TL_BATCH_NATIVE
     * GW_OK: the transport owns the request until it completes it once with
     * gw_ep_op_done().  An error: nothing of it was sent and the api layer
     * drops it (the transport keeps no reference). */
    gw_status_t (*submit)(gw_tl_ep_t *ep, gw_request_t *req);
    /* The scatter/gather primitive: one put or get of many pieces.  req->op
     * is GW_OP_BATCH and req->batch (batch.h) a plain list: n entries, no
     * page or list form, no notification (GW_NOTIFY_NONE), host memory on
     * both sides (lgpu and rgpu 0), every local region registered; entry i
     * moves len bytes between laddr (in lmem[lreg]) and raddr (of
     * rkey[rreg]), checked by the api layer as for submit.  The list stays
     * valid until req completes.  The transport moves the pieces in any
     * order (one system call, frame or work request per piece, or an
     * iovec or SGE list where its wire takes one) and completes req once,
     * with gw_ep_op_done(): when the last piece landed (length: the
     * total), or with the first error.  GW_ERR_UNSUPPORTED: not taken,
     * nothing happened and no message was set (a local region it cannot
     * describe, say); the protocol layer then posts one put or get per
     * entry through submit(), as it does for a transport whose slot is
     * gw_tl_unsupported_op.  Any other error: nothing was posted, the
     * detail is set.  Its cancel() may answer GW_INPROGRESS for such a
     * request.  A transport whose submit() takes batches natively may point
     * this at its batch engine. */
    gw_status_t (*rma_iov)(gw_tl_ep_t *ep, gw_request_t *req);
    /* The small-message primitive: an active message of len bytes (at most
     * GW_AM_MAX) for handler id (< GW_AM_IDS) on the peer, whose transport
     * hands it to gw_ep_am_deliver() (ep_base.h).  The bytes are copied
     * before the call returns; there is no request and no completion.  It
     * arrives once and whole, after this endpoint's earlier active messages
     * (no order against puts, gets or tagged messages is promised).  Check
     * with gw_ep_am_check() first.  GW_OK: sent or queued; an error: not
     * sent, the detail set. */
    gw_status_t (*am_send)(gw_tl_ep_t *ep, unsigned id, const void *data, size_t len);
    /* A put or get (op GW_OP_PUT or GW_OP_GET, never one with a
     * notification) the transport can finish inside this call, with no
     * request: e.g. a small host copy into a peer region already mapped
     * here.  The api layer validated it as for submit but queued nothing.
     * GW_OK: the bytes are where they belong, nothing is left to complete,
     * as if submitted and completed at once (so later put_notify and flush
     * find it done).  GW_ERR_UNSUPPORTED: not taken and nothing happened;
     * the caller submits it as a request, whose path reports any error
     * precisely (this call never reports one). */
    gw_status_t (*rma_now)(gw_tl_ep_t *ep, int op, void *buf, size_t len, const gw_mem_t *lmem, uint64_t raddr,
                           const gw_rkey_t *rkey);
    /* A small tagged message from host memory the transport sends inside
     * this call, with no request: e.g. one fi_inject of header and payload
     * on an endpoint with nothing waiting to be posted before it.  The api
     * layer validated it as for submit (a usable endpoint, a host buffer,
     * a tag the application may use) and queued nothing.  GW_OK: the
     * message went (in order after this endpoint's earlier messages) and
     * the buffer is free again, as if submitted and completed at once.
     * GW_ERR_UNSUPPORTED: not taken and nothing happened; the caller
     * submits it as a request, whose path reports any error precisely
     * (this call never reports one). */
    gw_status_t (*send_now)(gw_tl_ep_t *ep, const void *buf, size_t len, uint64_t tag);
    /* A small put the transport posts at once, before the api layer has
     * built a request for it: e.g. one inline RDMA WRITE on an idle
     * endpoint, whose doorbell should not wait for the bookkeeping (under
     * the Soft-RoCE guest's emulation every instruction before it is on the
     * measured round trip).  The api layer validated it as for submit.
     *  - make NULL: an untracked put (the caller asked for no request; its
     *    errors reach the next flush), UCX's put_nbi.  GW_OK: posted, and
     *    the transport keeps what a later flush, put_notify and close must
     *    wait for (a request of its own in base->outstanding, errors into
     *    base->implicit_err).  Never an error but GW_ERR_UNSUPPORTED.
     *  - make set: a tracked put.  After posting, the transport calls
     *    make(arg) once; it returns the api's request for the put, filled
     *    and already outstanding (gw_ep_op_start), never NULL; the
     *    transport completes it as a submitted one.  GW_OK: posted and
     *    made.  Any other error (the endpoint failed posting it): make was
     *    not called; the caller returns the error, the detail is set.
     * GW_ERR_UNSUPPORTED: not taken, nothing happened (make not called);
     * the caller submits it as a request.  Either way the local buffer is
     * free on return. */
    gw_status_t (*put_direct)(gw_tl_ep_t *ep, const void *buf, size_t len, const gw_mem_t *lmem, uint64_t raddr,
                              const gw_rkey_t *rkey, gw_tl_req_make_fn make, void *arg);
    /* Progress this endpoint alone, never blocking: reap the completions
     * waiting in its own queue, post what it queued.  Returns the events
     * (> 0) or 0; GW_ERR_UNSUPPORTED where the transport has no such
     * shortcut (its progress is the iface's pollers and fds only).
     * gw_request_wait() calls it for the request's endpoint, up to
     * GW_WAIT_EP_SPINS times, before a whole context pass (a completion
     * that is there or about to be - a Soft-RoCE put's - then costs no pass
     * over every poller, fd and timer); the context's full passes keep
     * running at least every GW_QUICK_WAITS such waits (api/request.c). */
    int (*ep_progress)(gw_tl_ep_t *ep);
    /* recv of an unexpected rendezvous message: the api layer matched req
     * to msg, a record of base->unexpected the transport queued with
     * gw_ep_unexp_rndv() (eager ones never come here: the base delivers
     * them, gw_ep_recv_unexp in ep_base.h).  req is on no list; msg is the
     * base's and valid for this call only (freed after it returns).  The
     * transport starts fetching the message (e.g. sends its clear-to-send)
     * and completes req later with gw_ep_recv_done(). */
    gw_status_t (*recv_matched)(gw_tl_ep_t *ep, gw_request_t *req, gw_unexp_t *msg);
    /* gw_request_cancel() of a request submit() or batch() took (never a
     * batch the protocol layer expanded: it asks for each entry's request).  The
     * transport withdraws what of it has not reached the wire:
     *  - GW_OK: nothing of it is on the wire any more (none of it had
     *    reached it, or what had is acknowledged: req->done counts those
     *    bytes, 0 when none); the transport dropped every reference to it
     *    (its slots, its queued frames or work) and nothing of it will
     *    ever be read or written; the caller completes it with
     *    GW_ERR_CANCELED (and no notification);
     *  - GW_INPROGRESS: some of it is on the wire (or the transport cannot
     *    withdraw it at all: gw_tl_no_cancel).  It completes on its own,
     *    once nothing of it moves any more: GW_OK when all of it moved,
     *    GW_ERR_CANCELED when the transport dropped the rest.
     * Never blocks; must not complete req itself. */
    gw_status_t (*cancel)(gw_tl_ep_t *ep, gw_request_t *req);
};


/* Defaults for absent operations: they return GW_ERR_UNSUPPORTED. */
gw_status_t gw_tl_unsupported_mem_reg(gw_tl_iface_t *iface, gw_mem_t *mem);
gw_status_t gw_tl_unsupported_mem_dereg(gw_tl_iface_t *iface, gw_mem_t *mem);
gw_status_t gw_tl_unsupported_rkey_pack(gw_tl_iface_t *iface, const gw_mem_t *mem, uint8_t *buf,
                                        size_t *len);
gw_status_t gw_tl_unsupported_ep_join(gw_tl_ep_t *ep, int fd, unsigned stream_index);
gw_status_t gw_tl_unsupported_op(gw_tl_ep_t *ep, gw_request_t *req);
gw_status_t gw_tl_unsupported_rma_now(gw_tl_ep_t *ep, int op, void *buf, size_t len, const gw_mem_t *lmem,
                                      uint64_t raddr, const gw_rkey_t *rkey);
gw_status_t gw_tl_unsupported_send_now(gw_tl_ep_t *ep, const void *buf, size_t len, uint64_t tag);
gw_status_t gw_tl_unsupported_put_direct(gw_tl_ep_t *ep, const void *buf, size_t len, const gw_mem_t *lmem,
                                         uint64_t raddr, const gw_rkey_t *rkey, gw_tl_req_make_fn make, void *arg);
int gw_tl_unsupported_ep_progress(gw_tl_ep_t *ep);
gw_status_t gw_tl_unsupported_am_send(gw_tl_ep_t *ep, unsigned id, const void *data, size_t len);
/* rkey_unpack of a transport whose keys carry no part: accepts none, refuses any */
gw_status_t gw_tl_no_rkey_unpack(gw_tl_iface_t *iface, const uint8_t *blob, size_t len, gw_rkey_t *rk,
                                 char *why, size_t whylen);
void gw_tl_noop_rkey_release(gw_tl_iface_t *iface, gw_rkey_t *rk);
gw_status_t gw_tl_unsupported_recv_matched(gw_tl_ep_t *ep, gw_request_t *req, gw_unexp_t *msg);
/* cancel of a transport that withdraws nothing once submitted: GW_INPROGRESS */
gw_status_t gw_tl_no_cancel(gw_tl_ep_t *ep, gw_request_t *req);
gw_status_t gw_tl_unsupported_reachable(gw_tl_iface_t *iface, const gw_tl_peer_t *peer,
                                        const uint8_t *peer_addr, size_t len, char *why,
                                        size_t whylen);

/* The transports compiled in, in GW_TL_* order (NULL for ones not built),
 * and every known transport's name; both made from core/transports.def by
 * tl_table.c. */
extern const gw_tl_ops_t *const gw_tl_table[GW_TL_COUNT];
extern const char *const gw_tl_names[GW_TL_COUNT];

/* Checks a transport's table before the context uses it: its size is this
 * build's sizeof(gw_tl_ops_t), its name is gw_tl_names[id], no slot is
 * NULL.  GW_OK, or GW_ERR_INVALID with what is wrong in why. */
gw_status_t gw_tl_check_ops(const gw_tl_ops_t *ops, int id, char *why, size_t whylen);

#endif
