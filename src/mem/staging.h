/* SPDX-License-Identifier: Apache-2.0 */
/* staging.h - pipelined host staging of GPU memory (mem layer).
 *
 * A transport that can only move host memory (tcp, or verbs when the NIC
 * cannot reach the GPU) moves GPU data through a small ring of pinned host
 * bounce buffers ("slots").  Device<->host copies run on their own CUDA
 * streams (one per direction, non-blocking), so chunk i+1 is copied while
 * chunk i is on the wire.  The engine never blocks: every call returns at
 * once and gw_staging_test() polls a slot's CUDA event.
 *
 * One engine serves one GPU and may be shared by all endpoints of a
 * transport (make it per device, lazily, on the first GPU transfer).
 * Slots are handed out FIFO; a transfer should hold at most a few so that
 * others are not starved (GPUWIRE_STAGING_BUFFERS, GPUWIRE_STAGING_CHUNK).
 *
 * Sending GPU data (e.g. tcp writer of a put whose source is on the GPU):
 *
 *     while (off < len && (slot = gw_staging_acquire(st)) != NULL) {
 *         n = MIN(gw_staging_chunk(st), len - off);
 *         gw_staging_d2h(st, slot, src + off, n);   // async D2H on the D2H stream
 *         queue slot (with off, n) on the request, in order
 *         off += n;
 *     }
 *     ... on progress, for the oldest queued slot:
 *     if (gw_staging_test(st, slot) == 1)            // copy landed in slot->host
 *         write slot->host[0..n) to the socket;       // may take several writes
 *     once fully written: gw_staging_release(st, slot) and acquire the next.
 *
 * Receiving into GPU memory (tcp reader of a put whose target is on the GPU):
 *
 *     slot = gw_staging_acquire(st);                 // NULL: wait, try on next progress
 *     read up to gw_staging_chunk(st) payload bytes into slot->host;
 *     gw_staging_h2d(st, slot, dst + off, n);        // async H2D on the H2D stream
 *     ... later: gw_staging_test(st, slot) == 1  ->  gw_staging_release(st, slot);
 *     the operation is complete (data visible in GPU memory) when every slot
 *     it used has tested done.
 *
 * Small transfers (one chunk or less) may use gw_staging_copy_sync() on a
 * caller's own buffer instead: one copy waited for, lower latency.  It runs
 * on a non-blocking stream of its own per device, never on the legacy
 * default stream, so it never waits for the application's kernels.
 */
#ifndef GW_MEM_STAGING_H
#define GW_MEM_STAGING_H

#include <stddef.h>
#include <stdint.h>

#include "core/core.h"

typedef struct gw_staging gw_staging_t;

typedef struct gw_stage_slot {
    void *host;        /* pinned bounce buffer, gw_staging_chunk() bytes */
    size_t len;        /* bytes of the copy in flight or done */
    unsigned index;    /* position in the ring */
    int busy;          /* acquired and not yet released */
    int copying;       /* a copy was started and not yet seen complete */
    void *event;       /* CUevent of the last copy */
    void *desc;        /* pinned copy-kernel descriptors of the last gather/scatter */
    size_t desc_cap;   /* (bytes) */
} gw_stage_slot_t;

/* One block of a gathered or scattered copy: `len` bytes at device (or
 * host) address `addr`, at byte `off` of the slot. */
typedef struct gw_stage_blk {
    uint64_t addr;
    uint64_t off;
    uint64_t len;
} gw_stage_blk_t;

/* Creates an engine for CUDA device `device` with nbufs bounce buffers of
 * chunk bytes each (0: GPUWIRE_STAGING_BUFFERS / GPUWIRE_STAGING_CHUNK).
 * Errors: GW_ERR_UNAVAILABLE (no CUDA driver), GW_ERR_CUDA, GW_ERR_NOMEM. */
gw_status_t gw_staging_create(gw_core_t *c, int device, size_t chunk, unsigned nbufs,
                              gw_staging_t **out);
/* Waits for copies in flight, frees everything.  NULL is a no-op. */
void gw_staging_destroy(gw_staging_t *st);

size_t gw_staging_chunk(const gw_staging_t *st);
unsigned gw_staging_nbufs(const gw_staging_t *st);
int gw_staging_device(const gw_staging_t *st);

/* The next free slot, or NULL when all are in use (try again later). */
gw_stage_slot_t *gw_staging_acquire(gw_staging_t *st);
/* Starts copying len (<= chunk) bytes from device memory into slot->host. */
gw_status_t gw_staging_d2h(gw_staging_t *st, gw_stage_slot_t *slot, const void *dev_src, size_t len);
/* Starts copying slot->host[0..len) into device memory. */
gw_status_t gw_staging_h2d(gw_staging_t *st, gw_stage_slot_t *slot, void *dev_dst, size_t len);
/* 1 when the slot's copy is complete (or none was started), 0 while in
 * flight, GW_ERR_CUDA on a copy failure (detail set in the core). */
int gw_staging_test(gw_staging_t *st, gw_stage_slot_t *slot);
/* Returns the slot to the ring.  Its copy must have tested complete. */
void gw_staging_release(gw_staging_t *st, gw_stage_slot_t *slot);

/* Gathered copies: n blocks from device memory into slot->host + blk.off
 * (gather, on the D2H stream), or from slot->host + blk.off into device
 * memory (scatter, on the H2D stream), each with one launch of the copy
 * kernel (cuda/copy_kernel.c); where no kernel module loads, one
 * copy-engine copy per block.  The slot's event follows the whole copy
 * (gw_staging_test).  Every block lies inside the slot. */
gw_status_t gw_staging_gather(gw_staging_t *st, gw_stage_slot_t *slot, const gw_stage_blk_t *blk, unsigned n);
gw_status_t gw_staging_scatter(gw_staging_t *st, gw_stage_slot_t *slot, const gw_stage_blk_t *blk, unsigned n);
/* How gathers and scatters move: "copy kernel", or "copy engine per block
 * (no kernel: why)".  Decided on the first gather or scatter ("" before). */
const char *gw_staging_gather_path(const gw_staging_t *st);

/* Synchronous copy for small transfers: dst/src may each be host or device
 * memory (unified addressing).  Sets the device's context current first;
 * copies on the device's own non-blocking stream and waits for that stream
 * alone (safe while the application's kernels wait on the caller). */
gw_status_t gw_staging_copy_sync(gw_core_t *c, int device, void *dst, const void *src, size_t len);
/* The same in gpuwire's own context of the device (GPUWIRE_CUDA_COPY_CONTEXT
 * =own), for device memory that is a VMM mapping: not held behind an
 * application's blocking copy in the primary context. */
gw_status_t gw_staging_copy_sync_own(gw_core_t *c, int device, void *dst, const void *src, size_t len);

#endif
