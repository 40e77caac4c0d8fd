/* SPDX-License-Identifier: Apache-2.0 */
/* ep_base.h - endpoint state every transport shares with the api layer
 * (transport layer): first error, outstanding operations in posting order,
 * flushes, received notifications, tag matching queues. */
#ifndef GW_TRANSPORT_EP_BASE_H
#define GW_TRANSPORT_EP_BASE_H

#include <stddef.h>
#include <stdint.h>

#include "core/core.h"
#include "core/request.h"

/* A message that arrived before its receive was posted. */
typedef struct gw_unexp {
    gw_list_t link;
    uint64_t tag;
    size_t len;       /* full message length */
    void *data;       /* eager payload (len bytes), NULL for rendezvous */
    uint64_t handle;  /* transport's id of a rendezvous (e.g. sender op id) */
    uint64_t handle2;
    int pool_class;   /* pooled block's size class + 1; 0: record and data malloc'd apart */
    int filling;      /* eager payload still arriving: queued, but no receive takes it yet */
} gw_unexp_t;

struct gw_tl_ep;

/* Unexpected-message records pooled per endpoint (unexp.c). */
#define GW_UNEXP_CLASSES 3
#define GW_UNEXP_CLASS_MAX 4096 /* larger payloads are allocated apart */
#define GW_UNEXP_KEEP_BYTES (2u << 20) /* payload room of free records kept per size class */

typedef struct gw_ep_base {
    gw_core_t *core;
    gw_status_t error;        /* the failure latch: first error, GW_OK while healthy (gw_ep_fail) */
    char error_detail[384];
    gw_status_t implicit_err; /* first error of an untracked op since the last flush */
    gw_list_t outstanding;    /* requests in posting order (put/get/put_notify/send) */
    gw_list_t flushes;        /* flush requests waiting, in posting order */
    uint64_t next_seq;
    /* notifications received, FIFO ring */
    uint64_t *notify_q;
    size_t notify_head, notify_count, notify_cap;
    gw_list_t posted;         /* posted receives, in posting order */
    gw_list_t unexpected;     /* gw_unexp_t, in arrival order */
    gw_list_t unexp_free[GW_UNEXP_CLASSES]; /* pooled records (unexp.c) */
    unsigned unexp_nfree[GW_UNEXP_CLASSES];
    char peer[64];
    uint64_t last_rx_ns;      /* last time anything came from the peer */
    uint8_t unjudged;         /* the transport runs no liveness timer (verbs: RC retries
                               * find a dead peer): last_rx_ns is left alone, no clock read */
    uint8_t live_mark;        /* the peer showed life, or work began on an idle endpoint,
                               * since the last judge: it stamps last_rx_ns with its own
                               * clock read (gw_liveness_judge), so that a message costs
                               * none; a reader of last_rx_ns between judges takes now */
    /* the peer process when it runs on this host and its pid is known here
     * (gw_liveness_set_peer_pid), 0 otherwise: a silent peer is then judged
     * by its process state, not by its silence alone (liveness.h) */
    int32_t peer_pid;
    uint64_t peer_start;      /* its start time (/proc/PID/stat field 22): a reused pid is not it */
    /* counted notifications: arrived and not yet taken, per id (bad: ones
     * that failed the integrity check, each with a record in nbad) */
    struct gw_ncount { uint64_t id, count, bad; } *ncount;
    size_t n_ncount, cap_ncount;
    /* the connected transport's teardown: run once, by the gw_ep_fail() that
     * latches the error (whoever calls it: the transport, or the api layer),
     * before the base fails the requests it holds.  Set at ep_connect,
     * cleared at ep_destroy. */
    void (*on_fail)(void *arg, gw_status_t status);
    void *on_fail_arg;
    /* a socket to the peer that gw_ep_fail() shuts down, so that the peer
     * learns at once that this side failed the endpoint (the api layer's
     * control connection); -1: none */
    int fail_fd;
    /* deferred notifications (gw_ep_notify_defer): how many are not sent yet,
     * and the transport's sender, set at ep_connect like on_fail */
    uint32_t ndeferred;
    uint8_t in_notes;         /* gw_ep_notes_check is running (no nesting) */
    gw_status_t (*notify_out)(void *arg, gw_request_t *req);
    void *notify_arg;
    /* the notification gate (the protocol layer's integrity check,
     * proto/proto_integrity.h): when set, a notification the transport
     * hands over (gw_ep_notify_push, gw_ep_ncount_add) goes to it instead
     * of the queues; it delivers it later with gw_ep_notify_deliver.
     * Returns 0, or -1 when out of memory (as the push would). */
    int (*notify_gate)(void *arg, uint64_t value, int counted);
    void *notify_gate_arg;
    /* a transport whose provider matches tags itself (ofi's tagged path),
     * set at ep_connect: gw_recv hands it every receive instead of queueing
     * it on posted (tl_recv: GW_OK, it holds the receive and completes it
     * with gw_ep_recv_done; counts it in tl_posted while the provider holds
     * it), gw_request_cancel asks its cancel() for a receive not yet
     * matched, and gw_probe asks tl_probe (GW_OK with the oldest matching
     * message's length and tag, GW_INPROGRESS none).  Not used while the
     * integrity check runs (its own messages take the base's queues). */
    gw_status_t (*tl_recv)(struct gw_tl_ep *tl, gw_request_t *req);
    gw_status_t (*tl_probe)(struct gw_tl_ep *tl, uint64_t tag, uint64_t mask, size_t *len, uint64_t *rtag);
    uint32_t tl_posted;
    struct gw_integ *integ;   /* the check's state of this endpoint (NULL: no check) */
    uint32_t integ_waiting;   /* operations whose verdict the peer still owes (work that waits on it) */
    /* notifications that failed the check, oldest first: an ordered one
     * at its place in the queue (pos: its number among all pushed), a
     * counted one under its id */
    struct gw_nbad *nbad;
    uint64_t notify_pushed, notify_popped;
} gw_ep_base_t;

/* The tag of the integrity check's own messages (proto/proto_integrity.h):
 * reserved on an endpoint that checks (b->integ set), where the
 * application's receives never match it and gw_send refuses it. */
#define GW_INTEG_TAG 0x6777696e74656772ull /* "gwintegr" */

typedef struct gw_nbad {
    struct gw_nbad *next;
    uint64_t pos;   /* ordered: its number among the pushed notifications */
    uint64_t id;    /* counted: its id */
    int counted;
    char detail[];  /* why it failed the check */
} gw_nbad_t;

/* Active messages: the small-message primitive every transport carries
 * (tl.h am_send).  A layer above the transports (the protocol layer, a
 * test) sets a handler per id for the context; a transport that receives
 * one hands it to gw_ep_am_deliver(), which runs the handler on the
 * context's thread inside the progress call that read it, with the
 * payload valid for the call only.  A handler must not block, nor post on
 * or progress the endpoint it came from (it may queue work for later). */
#define GW_AM_IDS GW_CORE_AM_IDS
#define GW_AM_MAX 256 /* payload bytes of one active message, on every transport */
typedef void (*gw_am_handler_t)(void *arg, gw_ep_base_t *ep, const void *data, size_t len);
/* Sets (fn NULL: clears) the handler of id (< GW_AM_IDS) for every
 * endpoint of the context core; GW_ERR_INVALID for an id out of range. */
gw_status_t gw_am_set(gw_core_t *core, unsigned id, gw_am_handler_t fn, void *arg);
/* A transport received an active message: runs its handler.  GW_OK, or
 * GW_ERR_PROTOCOL with the detail set (an id out of range or without a
 * handler, a payload over GW_AM_MAX): the transport fails the endpoint
 * with it, as for any malformed frame. */
gw_status_t gw_ep_am_deliver(gw_ep_base_t *b, unsigned id, const void *data, size_t len);
/* What an am_send() checks before it sends: GW_OK, or GW_ERR_INVALID /
 * the endpoint's error with the detail set (transport: its name). */
gw_status_t gw_ep_am_check(gw_ep_base_t *b, const char *transport, unsigned id, size_t len);

/* Has the endpoint failed?  The one truth; transports keep no flag of their own. */
static inline int gw_ep_failed(const gw_ep_base_t *b)
{
    return b->error != GW_OK;
}

void gw_ep_base_init(gw_ep_base_t *b, gw_core_t *core);
/* Frees queued notifications and unexpected messages. */
void gw_ep_base_fini(gw_ep_base_t *b);

/* The unexpected-message store.  The base owns every record, from the
 * transport taking it to the receive it is matched to (libfabric's peer
 * SRX split: the owner allocates, the provider fills):
 *  - eager: gw_ep_unexp_eager() gives a record with room for len bytes at
 *    u->data and queues it at once, in arrival order, marked filling; the
 *    transport fills it (at once or as the bytes arrive), then calls
 *    gw_ep_unexp_filled(); one whose payload never completes goes back with
 *    gw_ep_unexp_free();
 *  - rendezvous: gw_ep_unexp_rndv() queues a record (data NULL) carrying the
 *    transport's handles for its recv_matched;
 *  - a receive that matches one calls gw_ep_recv_unexp(), which delivers it
 *    and frees the record; gw_ep_base_fini() frees what was never received.
 * Matching order is arrival order of the headers, not of the last payload
 * byte: a receive posted while the oldest message it matches is still
 * filling is queued as posted, and gw_ep_unexp_filled() hands that message
 * to the oldest posted receive that matches it.  (Queueing a record only
 * when full let a receive posted in between skip it and take the next
 * message of the same tag: the NCCL plugin saw a 65537-byte message land
 * in the receive meant for a 4096-byte one.)
 * NULL / GW_ERR_NOMEM when out of memory. */
gw_unexp_t *gw_ep_unexp_eager(gw_ep_base_t *b, uint64_t tag, size_t len);
void gw_ep_unexp_filled(gw_ep_base_t *b, gw_unexp_t *u);
gw_status_t gw_ep_unexp_rndv(gw_ep_base_t *b, uint64_t tag, size_t len, uint64_t handle, uint64_t handle2);
void gw_ep_unexp_free(gw_ep_base_t *b, gw_unexp_t *u);
void gw_ep_unexp_pool_init(gw_ep_base_t *b);
void gw_ep_unexp_pool_fini(gw_ep_base_t *b);

/* Work that waits on the peer: an outstanding operation, a flush or a posted
 * receive.  While there is some, a peer silent for GPUWIRE_PEER_TIMEOUT_MS
 * (it answers no ping: frozen, or not calling progress) is declared dead;
 * without any, silence is no sign of death. */
static inline int gw_ep_has_work(const gw_ep_base_t *b)
{
    return !gw_list_empty(&b->outstanding) || !gw_list_empty(&b->flushes) || !gw_list_empty(&b->posted) ||
           b->integ_waiting || b->tl_posted;
}
/* Work is about to be queued on b (an operation, a flush, a posted
 * receive): if it had none, the peer's silence is counted from now (the
 * next judge's clock read: live_mark), not from the last message of a
 * spell without progress calls.  (Nothing for an unjudged endpoint.) */
static inline void gw_ep_work_begins(gw_ep_base_t *b)
{
    if (!b->unjudged && !gw_ep_has_work(b)) /* an idle endpoint: the peer's silence counts from now */
        b->live_mark = 1;
}
/* Queues req (sets seq) as outstanding.  (Inline, as gw_ep_op_done's
 * common case: both run once per small operation.) */
static inline void gw_ep_op_start(gw_ep_base_t *b, gw_request_t *req)
{
    gw_ep_work_begins(b);
    req->seq = ++b->next_seq;
    req->flags |= GW_REQF_QUEUED;
    gw_list_push_back(&b->outstanding, &req->link);
}
/* Completes an outstanding request and any flush it was holding back; a
 * deferred one (below) whose data is in place is held instead. */
void gw_ep_op_done_slow(gw_ep_base_t *b, gw_request_t *req, gw_status_t status);

/* An untracked send whose message would be read after the call returns
 * (it waits in a queue, or the device reads it later): its caller holds no
 * request to learn when the buffer is free again and may reuse it at once,
 * so the payload is copied into memory of the request's own (freed when it
 * completes) and req->buf points there; req->lmem becomes NULL (host
 * memory no registration names).  GW_OK, or GW_ERR_NOMEM (nothing
 * changed). */
gw_status_t gw_ep_own_payload(gw_request_t *req);
/* Is req an untracked send of host memory whose payload gw_ep_own_payload
 * should copy (at most max bytes, more than none)? */
int gw_ep_send_needs_own(const gw_request_t *req, size_t max);
static inline void gw_ep_op_done(gw_ep_base_t *b, gw_request_t *req, gw_status_t status)
{
    /* the common case: a queued operation succeeded, and no flush and no
     * deferred notification waits on the endpoint (nothing to look at after) */
    if (status == GW_OK && (req->flags & (GW_REQF_QUEUED | GW_REQF_NDEFER)) == GW_REQF_QUEUED &&
        !b->ndeferred && gw_list_empty(&b->flushes)) {
        gw_list_del(&req->link);
        req->flags &= (uint8_t)~GW_REQF_QUEUED;
        gw_req_complete(req, GW_OK);
        return;
    }
    gw_ep_op_done_slow(b, req, status);
}
/* Takes back a request queued by gw_ep_op_start whose posting failed: it
 * leaves the outstanding list, and a deferral (below) is undone, so no
 * notification of a refused operation can go out later. */
void gw_ep_op_unstart(gw_ep_base_t *b, gw_request_t *req);

/* Deferred notifications, for transports on which a notification could
 * overtake the data of earlier puts (tcp's striped streams, intra's copies
 * on several engines).  One rule for them all: a deferred notification goes
 * out once its own operation's data is in place and every operation posted
 * before it has completed, sends excepted (a send completes when the peer
 * takes the message, which may wait for the peer's receive, and the
 * peer may be waiting for the notification first); that operation
 * completes only then, so a completed put_notify (or notifying batch)
 * means every earlier put has landed, as on verbs, where the QP's order
 * gives it.
 *  - at posting, the transport calls gw_ep_notify_defer(b, req) (req
 *    outstanding: gw_ep_op_start ran; b->notify_out set; GW_ERR_INVALID
 *    with a message otherwise, which the transport returns);
 *  - when req's data is in place it calls gw_ep_op_done(b, req, GW_OK) as
 *    for any operation: the base holds req until its turn, then calls
 *    b->notify_out(b->notify_arg, req) to send the notification (req is off
 *    the outstanding list by then) and completes req with what that
 *    returned;
 *  - a deferred operation that fails (its own error, the endpoint's) sends
 *    no notification; gw_ep_notify_pending(b) counts the ones not sent
 *    yet (a transport that sends a notification in line with its data must
 *    see 0, or it would pass them). */
gw_status_t gw_ep_notify_defer(gw_ep_base_t *b, gw_request_t *req);
static inline uint32_t gw_ep_notify_pending(const gw_ep_base_t *b)
{
    return b->ndeferred;
}
/* Adds a flush; completes it at once when nothing older is outstanding
 * (sends aside: a flush waits for puts and gets, never for a message the
 * peer has yet to take). */
void gw_ep_flush_start(gw_ep_base_t *b, gw_request_t *req);
/* Seq of the oldest outstanding op, UINT64_MAX when none. */
uint64_t gw_ep_oldest_seq(const gw_ep_base_t *b);
/* The oldest outstanding operation (NULL: none). */
gw_request_t *gw_ep_oldest_op(const gw_ep_base_t *b);

/* Fails the endpoint: keeps the first error and its message (later ones are
 * consequences), runs the transport's on_fail teardown once, then fails
 * every outstanding request, flush and posted receive with the error. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
void gw_ep_fail(gw_ep_base_t *b, gw_status_t status, const char *fmt, ...);

/* A notification arrived (the transports): through the gate when one is
 * set, else into the queue.  0, or -1 when out of memory. */
int gw_ep_notify_push(gw_ep_base_t *b, uint64_t value);
/* Past the gate: queues an ordered (counted 0) or counted notification;
 * bad non-NULL: it failed the integrity check, which bad says (copied):
 * the waiter gets GW_ERR_INTEGRITY and bad instead of it.  0 or -1. */
int gw_ep_notify_deliver(gw_ep_base_t *b, uint64_t value, int counted, const char *bad);
/* The counted twin of a failure: how many of id failed the check and are
 * not taken; takes the oldest (its detail, malloc'd, to *detail; 0) or -1. */
uint64_t gw_ep_ncount_bad(const gw_ep_base_t *b, uint64_t id);
int gw_ep_ncount_take_bad(gw_ep_base_t *b, uint64_t id, char **detail);
/* Counted notifications: one more of id arrived (-1: out of memory); how
 * many of id are waiting; take count of them (-1 when fewer are there). */
int gw_ep_ncount_add(gw_ep_base_t *b, uint64_t id);
uint64_t gw_ep_ncount_get(const gw_ep_base_t *b, uint64_t id);
int gw_ep_ncount_take(gw_ep_base_t *b, uint64_t id, uint64_t count);
/* Takes the oldest ordered notification: 0, -1 when none, 1 when it failed
 * the integrity check (*value is its value; *detail, malloc'd, says why,
 * when detail is not NULL). */
int gw_ep_notify_pop(gw_ep_base_t *b, uint64_t *value, char **detail);

/* Tag matching.  match_posted removes and returns the oldest posted receive
 * that matches tag; match_unexp the oldest unexpected message for a receive,
 * NULL while that message is still filling (the receive must then be
 * posted: gw_ep_unexp_filled completes it). */
gw_request_t *gw_ep_match_posted(gw_ep_base_t *b, uint64_t tag);
/* The message match_unexp would take, left in the queue (NULL if none). */
gw_unexp_t *gw_ep_peek_unexp(gw_ep_base_t *b, uint64_t tag, uint64_t mask);
/* (Inline: a receive posted before its message, the common case, finds
 * the queue empty with no call.) */
static inline gw_unexp_t *gw_ep_match_unexp(gw_ep_base_t *b, uint64_t tag, uint64_t mask)
{
    gw_unexp_t *u = gw_list_empty(&b->unexpected) ? NULL : gw_ep_peek_unexp(b, tag, mask);
    if (u)
        gw_list_del(&u->link);
    return u;
}
/* Completes a receive: length = full message length; truncated when
 * msg_len > req->len. */
void gw_ep_recv_done(gw_ep_base_t *b, gw_request_t *req, size_t msg_len, uint64_t tag,
                     gw_status_t status);

/* Eager delivery: copies the first min(len, req->len) bytes of data (host
 * memory) into req's buffer, host or GPU (mem/mem_copy.h), and completes
 * req with the full length len (GW_ERR_TRUNCATED when it did not fit, the
 * copy's error if it failed). */
void gw_ep_recv_eager(gw_ep_base_t *b, gw_request_t *req, const void *data, size_t len, uint64_t tag);
/* A receive req matched unexpected message u (taken off the queue): an eager
 * one is delivered at once (gw_ep_recv_eager), a rendezvous is handed to
 * start (the transport's recv_matched, with its tl endpoint), which starts
 * fetching it and completes req later.  Frees u either way; returns start's
 * status (GW_OK for an eager one). */
struct gw_tl_ep;
gw_status_t gw_ep_recv_unexp(gw_ep_base_t *b, gw_request_t *req, gw_unexp_t *u,
                             gw_status_t (*start)(struct gw_tl_ep *tl, gw_request_t *req, gw_unexp_t *u),
                             struct gw_tl_ep *tl);

#endif
