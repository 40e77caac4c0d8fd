/* SPDX-License-Identifier: Apache-2.0 */
/* core.h - the per-context core: settings, detail message, event loop,
 * request pool, region table.  Every layer above gets a gw_core_t *. */
#ifndef GW_CORE_CORE_H
#define GW_CORE_CORE_H

#include <stdint.h>
#include <sys/epoll.h>

#include "gpuwire.h"
#include "hmap.h"
#include "list.h"
#include "log.h"
#include "settings.h"
#include "util.h"

typedef struct gw_core gw_core_t;

/* An fd watched by the context's epoll set.  events: EPOLLIN/EPOLLOUT. */
typedef void (*gw_io_cb_t)(void *arg, uint32_t events);
typedef struct gw_io {
    int fd;
    uint32_t events;
    gw_io_cb_t cb;
    void *arg;
    uint8_t hot; /* counted in gw_core.nhot */
} gw_io_t;

/* A hook run on every gw_progress() (transports that poll, e.g. CQs). */
typedef int (*gw_poll_cb_t)(void *arg);
typedef void (*gw_sleep_cb_t)(void *arg, int asleep);

/* Handler ids of active messages (transport/base/ep_base.h, GW_AM_IDS). */
#define GW_CORE_AM_IDS 8

/* Size classes of the per-operation state pool (gw_op_state_get). */
#define GW_OP_STATE_CLASSES 3

struct gw_core {
    gw_settings_t settings;
    char errbuf[1024];
    gw_status_t err_status; /* status of the message in errbuf */
    uint64_t err_count;     /* messages written to errbuf so far */
    uint64_t n_completed;   /* requests completed so far (wait-any rescans only after a change) */
    uint32_t n_canceling;   /* requests marked GW_REQF_CANCEL and not yet complete */
    int epfd;       /* the fd gw_context_fd() hands out */
    int evfd;       /* eventfd: "software work pending" */
    int ev_armed;
    unsigned keep_ready; /* leave the eventfd armed (the context fd readable) across passes: the set of
                          * holders (GW_KEEP_*) whose completions wake no fd, keeping callers polling
                          * without a write and a read of the eventfd per pass (gw_core_keep_ready) */
    gw_list_t req_free;
    gw_list_t req_slabs;
    gw_hmap_t regions; /* region id -> gw_mem_t * (for targets of remote access) */
    uint64_t uuid;     /* random id of this context, sent in handshakes */
    uint64_t host_id;
    gw_poll_cb_t pollers[8];
    void *poller_args[8];
    int npollers;
    gw_sleep_cb_t sleepers[4]; /* told around a blocking epoll_wait (gw_core_add_sleeper) */
    void *sleeper_args[4];
    int nsleepers;
    int nhot;           /* fds added by gw_io_add (not _cold) and not yet deleted */
    unsigned cold_pass; /* gw_core_dispatch(.., 0) calls that skipped epoll_wait */
    uint64_t cold_at;   /* stamp (core.c cold_stamp) at the last read of the cold set */
    int fds_read;       /* the current (or last) pass read the epoll set: a timer pass, on
                         * which pollers look at the clock (their timers need not run more
                         * often than the cold set is read: at least every millisecond of
                         * a spinning caller, on every pass of one that sleeps) */
    long peer_timeout_ms;
    long op_timeout_ms; /* GPUWIRE_OP_TIMEOUT_MS */
    /* active-message handlers by id (transport/base/ep_base.h gw_am_set) */
    void (*am_fn[GW_CORE_AM_IDS])(void);
    void *am_arg[GW_CORE_AM_IDS];
    /* per-operation state (gw_op_state_get): free blocks by size class */
    void *op_free[GW_OP_STATE_CLASSES];
    unsigned op_nfree[GW_OP_STATE_CLASSES];
};

gw_status_t gw_core_init(gw_core_t *c, char *err, size_t errlen);
void gw_core_fini(gw_core_t *c);

/* Per-operation state that a layer keeps beside a request (the protocol
 * layer's batch and staging records; a transport's per-operation records:
 * tcp's transmit items, one per frame in flight), from one pool of the core
 * for every layer rather than a malloc per operation or a free list per
 * transport: blocks of up to 256 B, 2 KiB and 16 KiB are kept on the
 * core's lists when put back (at most GW_OP_STATE_KEEP_SMALL of the 256 B
 * class, about 1 MiB: a window of small operations keeps its frames'
 * records; GW_OP_STATE_KEEP of each larger one) and handed out again;
 * larger ones come from malloc and go back to free.  Zeroed; NULL when out of memory.  Not
 * thread-safe (the context's thread, as for requests). */
#define GW_OP_STATE_KEEP 256
#define GW_OP_STATE_KEEP_SMALL 4096
void *gw_op_state_get(gw_core_t *c, size_t size);
/* Puts back what gw_op_state_get gave (NULL: no-op). */
void gw_op_state_put(gw_core_t *c, void *p);

/* Records the detail of a failure (what, on which object, why, input) in the
 * context's message, logs it at debug level, and returns st. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
gw_status_t gw_err(gw_core_t *c, gw_status_t st, const char *fmt, ...);

/* A "hot" fd carries the data path (tcp streams, intra sockets): every
 * progress call polls the epoll set while one exists.  A cold fd (a verbs
 * completion channel, async events, listeners, bootstrap sockets) only
 * matters to sleepers and slow paths: with no hot fd, a non-blocking progress
 * call polls the set on every GW_CORE_COLD_EVERY-th call, and on the first
 * call after a gap of at most a millisecond (the time-stamp counter where
 * there is one, else a tick of the coarse clock: no system call either
 * way), so busy-polling a verbs endpoint makes almost no system call while
 * a caller progressing now and then (a coarse tick, 1-4 ms, or more apart)
 * still has its cold fds served on every call (a sleeping wait always
 * polls). */
#define GW_CORE_COLD_EVERY 128u
gw_status_t gw_io_add(gw_core_t *c, gw_io_t *io, int fd, uint32_t events, gw_io_cb_t cb, void *arg);
gw_status_t gw_io_add_cold(gw_core_t *c, gw_io_t *io, int fd, uint32_t events, gw_io_cb_t cb, void *arg);
gw_status_t gw_io_mod(gw_core_t *c, gw_io_t *io, uint32_t events);
void gw_io_del(gw_core_t *c, gw_io_t *io);
gw_status_t gw_core_add_poller(gw_core_t *c, gw_poll_cb_t cb, void *arg);
void gw_core_del_poller(gw_core_t *c, gw_poll_cb_t cb, void *arg);
/* A sleeper is called with asleep = 1 just before this context blocks on
 * its fd (gw_context_wait, and the waits built on it; gw_core_dispatch with
 * a timeout) and with 0 once it wakes: a transport whose peers can see it
 * (intra's shared ring) says there that this context is not polling now.
 * A caller that sleeps on the context fd in its own poll() is not seen. */
gw_status_t gw_core_add_sleeper(gw_core_t *c, gw_sleep_cb_t cb, void *arg);
void gw_core_del_sleeper(gw_core_t *c, gw_sleep_cb_t cb, void *arg);
/* Tells the sleepers (1: about to block on the context fd; 0: awake). */
void gw_core_sleeping(gw_core_t *c, int asleep);

/* Makes the context fd readable until the next progress call (software
 * events such as completions that need no fd). */
void gw_core_signal(gw_core_t *c);
/* Holders of gw_core_keep_ready: each transport that needs it has its bit,
 * so that one letting go does not end another's hold. */
enum { GW_KEEP_OFI = 1u << 0, GW_KEEP_INTRA = 1u << 1 };
/* on: the context fd stays readable while any holder keeps it so (armed
 * once, not drained by gw_core_dispatch meanwhile); who: a GW_KEEP_* bit.
 * A call that changes nothing costs a test. */
static inline void gw_core_keep_ready(gw_core_t *c, unsigned who, int on)
{
    if (!!(c->keep_ready & who) == !!on)
        return;
    c->keep_ready = on ? c->keep_ready | who : c->keep_ready & ~who;
    if (on)
        gw_core_signal(c);
}
/* The same from another thread (a transport's helper threads): only writes
 * the eventfd, never touches state the progress thread owns. */
void gw_core_wake(gw_core_t *c);

/* Waits up to timeout_ms for events and dispatches them; returns the count. */
int gw_core_dispatch(gw_core_t *c, int timeout_ms);
/* Run the pollers once (no epoll); the count of what they completed. */
int gw_core_poll(gw_core_t *c);

#endif
