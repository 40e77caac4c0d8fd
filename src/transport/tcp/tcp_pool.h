/* SPDX-License-Identifier: Apache-2.0 */
/* tcp_pool.h - helper threads that move the payload bytes of large tcp
 * frames (GPUWIRE_TCP_THREADS), so that several cores copy at once.
 *
 * The progress thread stays the only owner of protocol state.  When a
 * stream's next step is "write this frame (header and payload)" or "read the
 * N payload bytes of the frame just parsed into dst", and N is at least
 * GPUWIRE_TCP_THREAD_MIN, it fills the stream's job and submits it to the
 * stream's worker; it then leaves that direction of the socket alone until
 * the job is reported done.  A worker runs its jobs with non-blocking
 * syscalls and poll(), never blocking on one job while another could move
 * (two processes sending to each other cannot deadlock on full buffers).
 * GPU memory is staged through the worker's own pinned slots
 * (mem/staging.h), device copies issued from the worker with the context
 * current; a receive job reports done only once its last host-to-device
 * copy completed, so the progress thread acknowledges and notifies after
 * the data landed, as on the single-thread path.
 *
 * Finished jobs go on the pool's done list and the context's eventfd is
 * written (gw_core_wake); the tcp poller reaps them (gw_tcp_pool_reap).
 *
 * Locking: a worker holds its mutex while it touches its jobs (syscalls are
 * non-blocking, so for a bounded time) and drops it only to poll().  The
 * progress thread takes it for what must not race a running job: cancelling
 * (gw_tcp_pool_cancel) and revocation (gw_tcp_job_lock + the two helpers).
 * Submission uses a separate short lock, so handing over a job never waits
 * for a worker's syscall.
 */
#ifndef GW_TRANSPORT_TCP_POOL_H
#define GW_TRANSPORT_TCP_POOL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "core/core.h"
#include "mem/staging.h"
#include "transport/tcp/tcp.h"

#define GW_TCP_JOB_SLOTS 2  /* staging slots one GPU job keeps in flight */
#define GW_TCP_JOB_FRAMES 8 /* frames one send job may carry (fewer hand-overs) */

typedef struct gw_tcp_pool gw_tcp_pool_t;
typedef struct gw_tcp_worker gw_tcp_worker_t;

/* A further frame of a send job, sent after the job's own. */
typedef struct gw_tcp_next_frame {
    uint8_t hdr[GW_TCP_HDR];
    const uint8_t *src;
    size_t len;           /* header + payload bytes */
    int dev;
} gw_tcp_next_frame_t;

typedef struct gw_tcp_job {
    /* set by the progress thread before gw_tcp_pool_submit() */
    int rx;               /* 1: receive payload bytes; 0: send header + payload */
    int fd;
    int dev;              /* CUDA ordinal of the memory, -1 for host memory */
    void *owner;          /* the stream, for the reaper */
    uint8_t hdr[GW_TCP_HDR]; /* tx: the frame header */
    const uint8_t *src;   /* tx: payload */
    uint8_t *dst;         /* rx: where payload byte 0 goes */
    size_t len;           /* tx: header + payload bytes; rx: payload bytes */
    size_t keep;          /* rx: bytes past keep are read and dropped */
    size_t off;           /* bytes done (tx counts the header) */
    gw_tcp_next_frame_t next[GW_TCP_JOB_FRAMES - 1]; /* tx: frames that follow, in order */
    int nnext;
    /* result, valid once reaped */
    int frames_done;      /* tx: frames completely sent */
    int err;              /* errno of a failed send/recv, 0 */
    int eof;              /* rx: the peer closed the stream mid-payload */
    gw_status_t cuda;     /* a staging copy failed (why says how) */
    char why[256];
    /* pool-private */
    gw_list_t link;
    gw_tcp_worker_t *wk;
    int active;           /* submitted and not yet reaped or cancelled (progress thread's) */
    uint64_t last_ns;     /* bytes last moved (atomic; peer liveness) */
    gw_staging_t *st;
    gw_stage_slot_t *sl[GW_TCP_JOB_SLOTS];
    size_t sl_len[GW_TCP_JOB_SLOTS];
    size_t sl_at[GW_TCP_JOB_SLOTS]; /* rx: payload offset the slot's bytes go to */
    int sl_head, sl_n;
    int next_i;           /* tx: next[] entry the job moves to after its current frame */
    size_t staged;        /* tx: payload bytes whose device-to-host copy started */
    size_t sl_used;       /* tx: bytes of the head slot sent */
    gw_stage_slot_t *fill;/* rx: slot being received into */
    size_t fill_len, fill_at;
} gw_tcp_job_t;

/* Makes a pool of nthreads workers (threads start on the first submit).
 * chunk/nbufs: staging slot size and count of each worker's per-device engines. */
gw_status_t gw_tcp_pool_create(gw_core_t *core, int nthreads, size_t chunk, unsigned nbufs,
                               gw_tcp_pool_t **out);
/* Stops and joins the workers; every job must have been reaped or cancelled. */
void gw_tcp_pool_destroy(gw_tcp_pool_t *p);
int gw_tcp_pool_size(const gw_tcp_pool_t *p);

/* Hands job to worker `w` (modulo the pool size).  GW_ERR_SYSTEM when the
 * worker's thread could not be started (detail set in the core). */
gw_status_t gw_tcp_pool_submit(gw_tcp_pool_t *p, int w, gw_tcp_job_t *job);
/* Takes the job back wherever it is (queued, running, done and not yet
 * reaped): afterwards no worker touches it, its fd or its memory.  Waits
 * for the job's device copies.  No-op for an idle job. */
void gw_tcp_pool_cancel(gw_tcp_pool_t *p, gw_tcp_job_t *job);
/* Calls done(job, arg) for every finished job, oldest first; returns the count. */
int gw_tcp_pool_reap(gw_tcp_pool_t *p, void (*done)(gw_tcp_job_t *job, void *arg), void *arg);
/* Last time (gw_now_ns) the job moved bytes. */
uint64_t gw_tcp_job_last_ns(const gw_tcp_job_t *job);

/* Revocation of the memory a running job reads or writes: between lock and
 * unlock the job does not move, and the helpers change what it does next. */
void gw_tcp_job_lock(gw_tcp_job_t *job);
void gw_tcp_job_unlock(gw_tcp_job_t *job);
/* tx: frame `index` (0: the job's first) sends the rest of its payload from
 * host_copy (the whole payload, already copied by the caller) instead of the
 * original memory; waits for and drops the slots staged from it. */
void gw_tcp_job_tx_detach(gw_tcp_job_t *job, int index, const void *host_copy);
/* rx: store nothing more; read and drop the rest.  Waits for the job's
 * device copies into the old destination.  Returns the bytes stored. */
size_t gw_tcp_job_rx_stop(gw_tcp_job_t *job);

#endif
