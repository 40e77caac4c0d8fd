/* SPDX-License-Identifier: Apache-2.0 */
/* proto.h - the protocol layer: what every transport would otherwise write
 * again, built once over the transport interface (transport/base/tl.h).
 *
 * It sits between the api layer and the transports, as UCX's protocols sit
 * on its transport layer: the api layer asks it how an operation moves, and
 * it either hands the operation to the transport as it is (the transport
 * said in caps() that it moves it natively) or carries it out itself
 * through the primitives every transport has (submit() of single puts and
 * gets, the base's deferred-notification sender).
 *
 * Batches (proto_batch.c): a transport that says GW_TL_BATCH_NATIVE moves
 * gw_xfer_batch / gw_xfer_pages itself; for any other, and for every
 * transport when GPUWIRE_BATCH_PATH=expand or iov (save batches that only
 * the transport can carry: a counted notification where it has no
 * notify_out), the batch is expanded here into its merged entries, posted
 * at once: as one list through the transport's scatter/gather primitive
 * (rma_iov) where it has one and the entries are host memory (not under
 * GPUWIRE_BATCH_PATH=expand), else one put or get per entry; its
 * notification follows the data:
 *   ORDERED  through the base's deferred notification (notify_out), after
 *            the last entry's data and every earlier operation; where the
 *            transport has no notify_out (its queue order keeps puts in
 *            order, as verbs' QP does), the last entry is posted as a
 *            put_notify, whose contract gives the same order;
 *   COUNTED  through notify_out only (the counted form has no put_notify
 *            twin); a transport without it refuses with GW_ERR_UNSUPPORTED.
 * Entries in GPU memory go as the transport's single puts and gets of GPU
 * memory go (its caps().mem_kinds must include GW_TL_MEM_CUDA); a batch
 * whose local side is GPU memory over a transport without it is staged
 * instead (gw_proto_batch_stage_route, below). */
#ifndef GW_PROTO_PROTO_H
#define GW_PROTO_PROTO_H

#include "core/core.h"
#include "core/request.h"
#include "transport/base/batch.h"
#include "transport/base/tl.h"

/* How a batch moves. */
typedef enum gw_proto_route {
    GW_PROTO_NATIVE = 0, /* the transport's submit() takes the GW_OP_BATCH request */
    GW_PROTO_EXPAND = 1, /* gw_proto_batch_submit() expands it into puts and gets */
    GW_PROTO_IOV = 2     /* gw_proto_batch_submit_iov(): as one list through rma_iov where it can */
} gw_proto_route_t;

/* Chooses the route of batch b over a transport with caps (expand: the
 * GPUWIRE_BATCH_PATH setting, GW_PROTO_NATIVE for native, GW_PROTO_EXPAND
 * for expand, GW_PROTO_IOV for iov; a batch the transport does not move
 * natively takes GW_PROTO_IOV but under expand); notify_out: the endpoint's base has a
 * deferred-notification sender).  GW_OK with *route set, or
 * GW_ERR_UNSUPPORTED with *lack naming what the transport lacks ("counted
 * notifications", "GPU memory"), for the caller's message. */
gw_status_t gw_proto_batch_route(const gw_tl_caps_t *caps, const gw_batch_t *b, int expand, int notify_out,
                                 gw_proto_route_t *route, const char **lack);

/* submit() of the expanded route (the signature of gw_tl_ops_t.submit, so
 * that the api layer posts both routes alike): req is a GW_OP_BATCH request
 * the api layer queued as outstanding.  Expands an unexpanded batch, posts
 * one request per entry through the transport's submit(), and completes
 * req once every one has completed: with GW_OK and the batch's bytes, or
 * with the first error, whose message names the entry (its index among the
 * merged entries, addresses and length).  An error returned here: nothing
 * was posted. */
gw_status_t gw_proto_batch_submit(gw_tl_ep_t *tl, gw_request_t *req);
/* The same, but the entries of a batch of host memory on both sides go as
 * one request through the transport's scatter/gather primitive (tl.h
 * rma_iov; the last entry apart where it carries the notification as a
 * put_notify); one request per entry where the transport has none or does
 * not take this list.  A failed list names its first entry and its
 * bytes. */
gw_status_t gw_proto_batch_submit_iov(gw_tl_ep_t *tl, gw_request_t *req);

/* Is req a batch request that gw_proto_batch_submit() expanded and whose
 * entries still move? */
int gw_proto_batch_expanded(const gw_request_t *req);

/* gw_request_cancel() of such a batch, where its cancel is decided once
 * for every transport: each entry request still moving is offered to the
 * transport's cancel(); those withdrawn end with GW_ERR_CANCELED (the
 * batch then ends with it too, naming the first such entry), the others
 * end on their own.  GW_OK: the batch request is complete on return;
 * GW_INPROGRESS: entries are still on the wire (the batch completes when
 * the last of them does). */
gw_status_t gw_proto_batch_cancel(gw_tl_ep_t *tl, gw_request_t *req);

/* ---- GPU staging (proto_stage.c) ----------------------------------------
 * A put, get or put_notify whose local buffer is GPU memory, over a
 * transport that does not move GPU memory itself (caps().mem_kinds lacks
 * GW_TL_MEM_CUDA: ofi without FI_HMEM), or over any transport when
 * GPUWIRE_GPU_STAGE=proto, is moved here through the transport's host
 * primitives: the buffer is cut into chunks of one pinned slot of the
 * context's staging engine for its device (mem/staging.h,
 * GPUWIRE_STAGING_CHUNK bytes, GPUWIRE_STAGING_BUFFERS slots), and
 *   put   each chunk is copied device-to-host into its slot on the engine's
 *         D2H stream, then sent by a host put of the transport from the
 *         slot; chunks are posted in order, several in flight, so the next
 *         copy overlaps the wire;
 *   get   each chunk is read by a host get of the transport into its slot,
 *         then copied host-to-device on the H2D stream.
 * A put_notify's notification follows its last byte: through the base's
 * deferred notification (notify_out) where the transport has one, else as
 * the last chunk's put_notify (its queue order keeps it behind the earlier
 * chunks).  The remote side is the transport's: a remote region in GPU
 * memory must be one the transport reaches.  The request completes once
 * every chunk has (a get: its bytes are in GPU memory), with the first error
 * naming the chunk (offset, length) and why. */
typedef struct gw_proto_stage gw_proto_stage_t;

/* Does a put/get/put_notify with local region lmem go through the protocol
 * layer's staging over a transport with caps (force: GPUWIRE_GPU_STAGE=proto)? */
static inline int gw_proto_stage_wanted(const gw_tl_caps_t *caps, const gw_mem_t *lmem, int force)
{
    return lmem && lmem->type == GW_MEM_CUDA && (force || !(caps->mem_kinds & GW_TL_MEM_CUDA));
}

/* submit() of the staged route (the signature of gw_tl_ops_t.submit but
 * for the context's staging state *pst, made on first use): req is a
 * GW_OP_PUT, GW_OP_GET or GW_OP_PUT_NOTIFY request with a GPU lmem that the
 * api layer validated and queued as outstanding.  GW_OK: proto owns it
 * until it completes it; an error: nothing was posted. */
gw_status_t gw_proto_stage_submit(gw_proto_stage_t **pst, gw_tl_ep_t *tl, gw_request_t *req);
/* Batches: a batch whose local regions are all GPU memory of one device
 * goes the same way where the transport moves no GPU memory (or
 * force), each slot carrying several entries (up to 64, an entry longer
 * than the slot's rest split), moved between GPU memory and the slot by one
 * gather or scatter of the copy kernel (cuda/copy_kernel.c; per-block
 * copy-engine copies where no kernel loads) and between the slot and the
 * peer by one host put or get per entry piece; the notification as for a
 * put_notify (a counted one needs notify_out).  *staged 1: take this route
 * (gw_proto_stage_batch_submit); 0: route as before (gw_proto_batch_route);
 * GW_ERR_UNSUPPORTED with *lack: the transport cannot carry it even so. */
gw_status_t gw_proto_batch_stage_route(const gw_tl_caps_t *caps, const gw_batch_t *b, int force, int notify_out,
                                       int *staged, const char **lack);
gw_status_t gw_proto_stage_batch_submit(gw_proto_stage_t **pst, gw_tl_ep_t *tl, gw_request_t *req);
/* At context destroy: waits for copies in flight, frees the engines and
 * what is left.  NULL is a no-op. */
void gw_proto_stage_destroy(gw_proto_stage_t *pst);
/* Chunks moved through the staging pipeline since the state was made (for
 * tests and `gpuwire perf`'s path line); 0 for NULL. */
uint64_t gw_proto_stage_chunks(const gw_proto_stage_t *pst);

#endif
