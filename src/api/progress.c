/* SPDX-License-Identifier: Apache-2.0 */
/* progress.c - the optional progress thread of a context and the lock that
 * the public calls take while it runs (gpuwire.h, Threading).
 *
 * The thread loops: one progress pass under the lock; while passes find
 * work it goes on (letting an application thread that asked for the lock
 * have it between two passes); when a pass finds none - the transports'
 * convention: progress until 0, then sleep - it tells the core's sleepers
 * (intra's ring then sends its peers' offers by CMA), lets go of the lock
 * and blocks in poll() on the context's epoll fd and its stop eventfd, for
 * GW_MT_TICK_MS at most: the timers that live in pollers (peer liveness,
 * copies whose completion wakes no fd) get a pass at least that often.
 * New work posted by another thread wakes it through the epoll set itself
 * (a socket armed for EPOLLOUT, the core's eventfd for software events).
 *
 * An application thread that waits (gw_request_wait and the other waiting
 * calls, gw_ctx_progress_until) progresses the context itself while it
 * spins, as without the thread, and sleeps without the lock on the epoll
 * fd and on user_fd, which the thread makes readable after a pass that did
 * something: a completion the thread reaped wakes the waiter at once.
 * user_fd is also what gw_context_fd() hands out with the thread on.
 *
 * The lock: a mutex plus its owner and depth, so that a call made from
 * inside progress (a peer-watch callback calling gw_peer_ep) re-enters it,
 * and so that a waiting call can let go of every level it holds while it
 * sleeps.  `want` counts threads blocked on the mutex: a thread holding it
 * across many passes (the progress thread, a spinning waiter) hands it over
 * between two passes when it is non-zero.
 *
 * Standing aside: while an application thread progresses the context
 * itself (gw_progress in a loop, a waiting call spinning), the thread
 * taking passes too would only fight it for the lock and for the CPU (two
 * wake-ups per event, measured in bench/ab/progress_thread.c).  Such passes
 * count in ctx->app_passes; when the count moved since the thread last
 * looked, it naps GW_MT_NAP_MS on its stop fd alone and looks again, and
 * serves once the count stands still (the application went elsewhere). */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "api/api.h"

#define GW_MT_TICK_MS 10 /* the longest the idle thread sleeps: timers run at least this often */
#define GW_MT_NAP_MS 2   /* how often the thread looks whether an application thread still progresses */

struct gw_ctx_mt {
    pthread_mutex_t mu;
    atomic_ulong owner;  /* pthread_self() of the holder, 0: none */
    unsigned depth;      /* levels the holder took */
    atomic_int want;     /* threads blocked on mu */
    pthread_t thread;
    atomic_ulong tid;    /* pthread_self() of the thread, set by itself first thing */
    int started;
    int stop_fd;         /* eventfd: the thread is to end */
    int user_fd;         /* eventfd: the thread made progress (gw_context_fd) */
    atomic_int user_armed;
    atomic_int stop;
};

void gw_ctx_lock(gw_context_t *ctx)
{
    struct gw_ctx_mt *m = ctx->mt;
    unsigned long self = (unsigned long)pthread_self();
    if (atomic_load_explicit(&m->owner, memory_order_relaxed) == self) {
        m->depth++;
        return;
    }
    if (pthread_mutex_trylock(&m->mu) != 0) {
        atomic_fetch_add(&m->want, 1);
        pthread_mutex_lock(&m->mu);
        atomic_fetch_sub(&m->want, 1);
    }
    atomic_store_explicit(&m->owner, self, memory_order_relaxed);
    m->depth = 1;
}

void gw_ctx_unlock(gw_context_t *ctx)
{
    struct gw_ctx_mt *m = ctx->mt;
    if (--m->depth)
        return;
    atomic_store_explicit(&m->owner, 0, memory_order_relaxed);
    pthread_mutex_unlock(&m->mu);
}

unsigned gw_ctx_unlock_all(gw_context_t *ctx)
{
    struct gw_ctx_mt *m = ctx->mt;
    if (!m || atomic_load_explicit(&m->owner, memory_order_relaxed) != (unsigned long)pthread_self())
        return 0;
    unsigned depth = m->depth;
    m->depth = 1;
    gw_ctx_unlock(ctx);
    return depth;
}

void gw_ctx_relock(gw_context_t *ctx, unsigned depth)
{
    if (!depth)
        return;
    gw_ctx_lock(ctx);
    ctx->mt->depth = depth;
}

void gw_ctx_yield(gw_context_t *ctx)
{
    struct gw_ctx_mt *m = ctx->mt;
    int want;
    if (!m || !(want = atomic_load_explicit(&m->want, memory_order_relaxed)))
        return;
    unsigned depth = gw_ctx_unlock_all(ctx);
    /* until one of the threads that asked has it (it counts itself out
     * once it holds the mutex), within a bound: the mutex is not fair, and
     * relocking at once would most often take it back */
    for (int i = 0; i < 64 && atomic_load_explicit(&m->want, memory_order_relaxed) >= want; i++)
        sched_yield();
    gw_ctx_relock(ctx, depth);
}

static void drain(int fd)
{
    uint64_t v;
    ssize_t r = read(fd, &v, sizeof(v));
    (void)r;
}

void gw_ctx_mt_clear(gw_context_t *ctx)
{
    struct gw_ctx_mt *m = ctx->mt;
    if (m && atomic_load_explicit(&m->user_armed, memory_order_relaxed) &&
        atomic_exchange(&m->user_armed, 0))
        drain(m->user_fd);
}

int gw_ctx_mt_user_fd(gw_context_t *ctx)
{
    return ctx->mt->user_fd;
}

static void signal_user(struct gw_ctx_mt *m)
{
    if (atomic_load_explicit(&m->user_armed, memory_order_relaxed) || atomic_exchange(&m->user_armed, 1))
        return;
    uint64_t one = 1;
    ssize_t r = write(m->user_fd, &one, sizeof(one));
    (void)r;
}

gw_status_t gw_ctx_sleep(gw_context_t *ctx, int timeout_ms)
{
    struct gw_ctx_mt *m = ctx->mt;
    struct pollfd p[2] = {{.fd = ctx->core.epfd, .events = POLLIN}, {.fd = m ? m->user_fd : -1, .events = POLLIN}};
    int r, e;
    if (!m) { /* without the thread the caller is the one progressing: the sleepers are told */
        if (timeout_ms != 0)
            gw_core_sleeping(&ctx->core, 1);
        r = poll(p, 1, timeout_ms);
        e = errno;
        if (timeout_ms != 0)
            gw_core_sleeping(&ctx->core, 0);
    } else {
        /* the thread stands for the context's polling (it tells the
         * sleepers); a waiter sleeps without the lock, so that other threads
         * (the progress thread among them) may go on */
        unsigned depth = gw_ctx_unlock_all(ctx);
        r = poll(p, 2, timeout_ms);
        e = errno;
        gw_ctx_relock(ctx, depth);
        if (r > 0 && p[1].revents)
            gw_ctx_mt_clear(ctx);
    }
    if (r < 0 && e != EINTR)
        return gw_err(&ctx->core, GW_ERR_SYSTEM, "poll(context fd %d) failed: %s", ctx->core.epfd, strerror(e));
    return r > 0 ? GW_OK : GW_ERR_TIMEOUT;
}

static void *mt_main(void *arg)
{
    gw_context_t *ctx = arg;
    struct gw_ctx_mt *m = ctx->mt;
    atomic_store(&m->tid, (unsigned long)pthread_self());
    /* signals go to the application's threads (Python's handlers among them) */
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    gw_ctx_lock(ctx);
    unsigned long seen = ctx->app_passes;
    while (!atomic_load_explicit(&m->stop, memory_order_relaxed)) {
        if (ctx->app_passes != seen) { /* an application thread progresses: stand aside */
            seen = ctx->app_passes;
            unsigned depth = gw_ctx_unlock_all(ctx);
            struct pollfd p = {.fd = m->stop_fd, .events = POLLIN};
            poll(&p, 1, GW_MT_NAP_MS);
            gw_ctx_relock(ctx, depth);
            continue;
        }
        uint64_t done = ctx->core.n_completed;
        int n = gw_progress_pass(ctx);
        seen = ctx->app_passes; /* (its own pass counted too) */
        if (n > 0 || ctx->core.n_completed != done)
            signal_user(m);
        if (n > 0) {
            gw_ctx_yield(ctx);
            continue;
        }
        gw_core_sleeping(&ctx->core, 1);
        unsigned depth = gw_ctx_unlock_all(ctx);
        struct pollfd p[2] = {{.fd = ctx->core.epfd, .events = POLLIN}, {.fd = m->stop_fd, .events = POLLIN}};
        int r = poll(p, 2, GW_MT_TICK_MS);
        if (r < 0 && errno != EINTR) {
            gw_log(GW_LOG_ERROR, "progress thread: poll(context fd %d) failed: %s; retrying in %d ms",
                   ctx->core.epfd, strerror(errno), GW_MT_TICK_MS);
            usleep(GW_MT_TICK_MS * 1000);
        }
        gw_ctx_relock(ctx, depth);
        gw_core_sleeping(&ctx->core, 0);
        ctx->core.cold_pass = GW_CORE_COLD_EVERY - 1; /* the next pass reads the set that woke us */
        seen = ctx->app_passes; /* (passes of a waiter woken by the same event do not count) */
    }
    gw_ctx_unlock(ctx);
    return NULL;
}

static void mt_free(struct gw_ctx_mt *m)
{
    if (m->stop_fd >= 0)
        close(m->stop_fd);
    if (m->user_fd >= 0)
        close(m->user_fd);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

gw_status_t gw_ctx_mt_start(gw_context_t *ctx, char *err, size_t errlen)
{
    struct gw_ctx_mt *m = calloc(1, sizeof(*m));
    if (!m) {
        snprintf(err, errlen, "progress thread: out of memory");
        return GW_ERR_NOMEM;
    }
    pthread_mutex_init(&m->mu, NULL);
    m->stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    m->user_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (m->stop_fd < 0 || m->user_fd < 0) {
        snprintf(err, errlen, "progress thread: eventfd() failed: %s", strerror(errno));
        mt_free(m);
        return GW_ERR_SYSTEM;
    }
    ctx->mt = m;
    int rc = pthread_create(&m->thread, NULL, mt_main, ctx);
    if (rc != 0) {
        snprintf(err, errlen, "progress thread: pthread_create() failed: %s", strerror(rc));
        ctx->mt = NULL;
        mt_free(m);
        return GW_ERR_SYSTEM;
    }
    m->started = 1;
    return GW_OK;
}

void gw_ctx_mt_stop(gw_context_t *ctx)
{
    struct gw_ctx_mt *m = ctx->mt;
    if (!m)
        return;
    atomic_store(&m->stop, 1);
    uint64_t one = 1;
    ssize_t r = write(m->stop_fd, &one, sizeof(one));
    (void)r;
    if (m->started)
        pthread_join(m->thread, NULL);
    ctx->mt = NULL;
    mt_free(m);
}

int gw_ctx_on_progress_thread(const gw_context_t *ctx)
{
    return ctx->mt && atomic_load_explicit(&ctx->mt->tid, memory_order_relaxed) == (unsigned long)pthread_self();
}

void gw_ctx_defer(gw_context_t *ctx, void (*fn)(void *, uint32_t), void *arg)
{
    ctx->deferred = fn;
    ctx->deferred_arg = arg;
    signal_user(ctx->mt);
}

const char *gw_ctx_mt_last_error(const gw_context_t *ctx)
{
    /* a copy taken under the lock, in a buffer of the calling thread: the
     * context's message may be rewritten by another thread meanwhile */
    static __thread char copy[sizeof(ctx->core.errbuf)];
    gw_context_t *c = (gw_context_t *)ctx;
    gw_ctx_lock(c);
    memcpy(copy, ctx->core.errbuf, sizeof(copy));
    gw_ctx_unlock(c);
    return copy;
}
