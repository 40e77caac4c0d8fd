/* SPDX-License-Identifier: Apache-2.0 */
/* events.c - peer events (gw_peer_watch, gw_peer_event_next).
 *
 * A directory backend's thread queues an event when an agent leaves or
 * comes back (gw_names_event) and writes an eventfd that sits in the
 * context's epoll set; the callback then runs inside gw_progress() on the
 * caller's thread, one event at a time, never on the backend's thread.
 * Without a callback the queue is read with gw_peer_event_next(). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "names/names_int.h"

static void wake(names_t *n) /* ev_mu held */
{
    if (n->ev_fd >= 0) {
        uint64_t one = 1;
        ssize_t w = write(n->ev_fd, &one, sizeof(one));
        (void)w;
    }
}

void gw_names_event(names_t *n, int type, const gw_dir_agent_t *a, int restarted)
{
    pthread_mutex_lock(&n->ev_mu);
    if (!n->ev_on || !n->evq || !(a->used || (n->ev_flags & GW_PEER_WATCH_ALL))) {
        pthread_mutex_unlock(&n->ev_mu);
        return;
    }
    if (n->ev_count == EVQ_CAP) {
        n->ev_head = (n->ev_head + 1) % EVQ_CAP;
        n->ev_count--;
        n->ev_dropped++;
    }
    gw_peer_event_t *e = &n->evq[(n->ev_head + n->ev_count++) % EVQ_CAP];
    memset(e, 0, sizeof(*e));
    e->size = sizeof(*e);
    e->type = type;
    snprintf(e->name, sizeof(e->name), "%s", a->name);
    snprintf(e->addr, sizeof(e->addr), "%s", a->addr);
    e->epoch = (uint64_t)a->epoch;
    e->restarted = restarted;
    wake(n);
    pthread_mutex_unlock(&n->ev_mu);
}

static int ev_pop(names_t *n, gw_peer_event_t *e) /* ev_mu held */
{
    if (!n->ev_count)
        return 0;
    *e = n->evq[n->ev_head];
    e->dropped = n->ev_dropped;
    n->ev_dropped = 0;
    n->ev_head = (n->ev_head + 1) % EVQ_CAP;
    n->ev_count--;
    return 1;
}

/* The eventfd turned readable (progress, the caller's thread): hands the
 * queued events to the callback, without holding ev_mu while it runs. */
static void ev_ready(void *arg, uint32_t events)
{
    names_t *n = arg;
    (void)events;
    uint64_t x;
    ssize_t r = read(n->ev_fd, &x, sizeof(x));
    (void)r;
    if (gw_ctx_on_progress_thread(n->ctx)) {
        /* never on the progress thread: an application thread's next
         * progress delivers them (the callback may wait for what that
         * thread holds, e.g. Python's interpreter lock) */
        gw_ctx_defer(n->ctx, ev_ready, n);
        return;
    }
    if (n->ev_delivering)
        return;
    n->ev_delivering = 1;
    for (int i = 0; i < EVQ_CAP && n->ev_cb; i++) { /* bounded: the thread may keep adding */
        gw_peer_event_t e;
        pthread_mutex_lock(&n->ev_mu);
        int got = ev_pop(n, &e);
        pthread_mutex_unlock(&n->ev_mu);
        if (!got)
            break;
        n->ev_cb(n->ev_arg, &e);
    }
    n->ev_delivering = 0;
    pthread_mutex_lock(&n->ev_mu);
    if (n->ev_count && n->ev_cb) /* more came: the next progress call */
        wake(n);
    pthread_mutex_unlock(&n->ev_mu);
}

static void ev_off(names_t *n)
{
    pthread_mutex_lock(&n->ev_mu);
    n->ev_on = 0;
    n->ev_count = n->ev_head = 0;
    n->ev_dropped = 0;
    int fd = n->ev_fd;
    n->ev_fd = -1;
    pthread_mutex_unlock(&n->ev_mu);
    n->ev_cb = NULL;
    n->ev_arg = NULL;
    if (fd >= 0) {
        gw_io_del(&n->ctx->core, &n->ev_io);
        close(fd);
    }
}

void gw_names_events_fini(names_t *n)
{
    ev_off(n);
    free(n->evq);
    n->evq = NULL;
}

gw_status_t gw_peer_watch(gw_context_t *ctx, unsigned flags, void (*cb)(void *arg, const gw_peer_event_t *ev),
                          void *arg)
{
    GW_API_LOCK(ctx);
    if (!ctx)
        return GW_ERR_INVALID;
    gw_core_t *core = &ctx->core;
    if (flags & ~(unsigned)(GW_PEER_WATCH_ALL | GW_PEER_WATCH_OFF))
        return gw_err(core, GW_ERR_INVALID, "gw_peer_watch: unknown flags 0x%x", flags);
    names_t *n;
    gw_status_t st = gw_names_get(ctx, &n);
    if (st != GW_OK)
        return st;
    if (flags & GW_PEER_WATCH_OFF) {
        ev_off(n);
        return GW_OK;
    }
    gw_dir_t *d = n->dir ? n->dir : n->p2p;
    if (!n->dir)
        return d->ops->watch(d); /* (says why there is no watch) */
    if (!n->evq && !(n->evq = calloc(EVQ_CAP, sizeof(*n->evq))))
        return gw_err(core, GW_ERR_NOMEM, "gw_peer_watch: out of memory");
    if (n->ev_fd < 0) {
        int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (fd < 0)
            return gw_err(core, GW_ERR_SYSTEM, "gw_peer_watch: eventfd() failed: %s", strerror(errno));
        if ((st = gw_io_add_cold(core, &n->ev_io, fd, EPOLLIN, ev_ready, n)) != GW_OK) {
            close(fd);
            return st;
        }
        pthread_mutex_lock(&n->ev_mu);
        n->ev_fd = fd;
        pthread_mutex_unlock(&n->ev_mu);
    }
    n->ev_cb = cb;
    n->ev_arg = arg;
    pthread_mutex_lock(&n->ev_mu);
    n->ev_flags = flags;
    n->ev_on = 1;
    if (n->ev_count) /* queued before a callback was given: hand them over */
        wake(n);
    pthread_mutex_unlock(&n->ev_mu);
    return d->ops->watch(d);
}

gw_status_t gw_peer_event_next(gw_context_t *ctx, gw_peer_event_t *ev)
{
    GW_API_LOCK(ctx);
    if (!ctx || !ev)
        return gw_api_invalid(ctx ? &ctx->core : NULL, "gw_peer_event_next", "ev is NULL");
    if (ev->size < sizeof(*ev))
        return gw_err(&ctx->core, GW_ERR_INVALID, "gw_peer_event_next: ev->size is %zu, %zu expected", ev->size,
                      sizeof(*ev));
    names_t *n = ctx->ext;
    int got = 0, on = 0;
    if (n) {
        pthread_mutex_lock(&n->ev_mu);
        on = n->ev_on;
        got = ev_pop(n, ev);
        pthread_mutex_unlock(&n->ev_mu);
    }
    if (!got)
        return gw_err(&ctx->core, GW_ERR_NOT_FOUND, "gw_peer_event_next: no event queued%s",
                      on ? "" : " (events are off: gw_peer_watch() starts them)");
    ev->size = sizeof(*ev);
    return GW_OK;
}
