/* SPDX-License-Identifier: Apache-2.0 */
/* core.c - event loop, detail message, request pool. */
#include "core/core.h"
#include "core/fault.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core/request.h"

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h> /* __rdtsc (cold_due) */
#endif

gw_status_t gw_core_init(gw_core_t *c, char *err, size_t errlen)
{
    memset(c, 0, sizeof(*c));
    c->epfd = c->evfd = -1;
    gw_list_init(&c->req_free);
    gw_list_init(&c->req_slabs);
    gw_hmap_init(&c->regions);
    gw_status_t st = gw_settings_load(&c->settings, err, errlen);
    if (st != GW_OK)
        return st;
    if ((st = gw_settings_check(&c->settings, err, errlen)) != GW_OK)
        goto err_settings;
    if ((st = gw_fault_configure(gw_settings_str(&c->settings, GW_SET_FAULT), err, errlen)) != GW_OK)
        goto err_settings;
    int lvl = gw_log_parse_level(gw_settings_str(&c->settings, GW_SET_LOG_LEVEL));
    if (lvl < 0) {
        snprintf(err, errlen, "GPUWIRE_LOG_LEVEL=\"%s\": expected error, warn, info, debug or trace",
                 gw_settings_str(&c->settings, GW_SET_LOG_LEVEL));
        st = GW_ERR_CONFIG;
        goto err_settings;
    }
    if (c->settings.from_env[GW_SET_LOG_LEVEL])
        gw_log_set_level(lvl);
    if (gw_log_configure(gw_settings_str(&c->settings, GW_SET_LOG_FILE),
                         gw_settings_str(&c->settings, GW_SET_LOG_SUBSYS), err, errlen) != 0) {
        st = GW_ERR_CONFIG;
        goto err_settings;
    }
    st = gw_settings_int(&c->settings, GW_SET_PEER_TIMEOUT_MS, &c->peer_timeout_ms,
                         err, errlen);
    if (st == GW_OK)
        st = gw_settings_int(&c->settings, GW_SET_OP_TIMEOUT_MS, &c->op_timeout_ms, err, errlen);
    if (st != GW_OK)
        goto err_settings;
    c->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (c->epfd < 0) {
        snprintf(err, errlen, "epoll_create1() failed: %s", strerror(errno));
        st = GW_ERR_SYSTEM;
        goto err_settings;
    }
    c->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (c->evfd < 0) {
        snprintf(err, errlen, "eventfd() failed: %s", strerror(errno));
        st = GW_ERR_SYSTEM;
        goto err_epoll;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    if (epoll_ctl(c->epfd, EPOLL_CTL_ADD, c->evfd, &ev) != 0) {
        snprintf(err, errlen, "epoll_ctl(ADD eventfd) failed: %s", strerror(errno));
        st = GW_ERR_SYSTEM;
        goto err_evfd;
    }
    do {
        gw_random_bytes(&c->uuid, sizeof(c->uuid));
    } while (c->uuid == 0);
    c->host_id = gw_host_id();
    return GW_OK;

err_evfd:
    close(c->evfd);
err_epoll:
    close(c->epfd);
err_settings:
    gw_settings_free(&c->settings);
    return st;
}

/* ---- per-operation state ------------------------------------------------------- */
/* A block is a header then the state; a free block's first word links the
 * class's free list. */
typedef struct op_hdr {
    uint32_t cls; /* size class, GW_OP_STATE_CLASSES for a malloc'd one */
    uint32_t magic;
    uint64_t size; /* bytes after the header */
} op_hdr_t;
#define OP_MAGIC 0x4f505354u /* "OPST" */
static const size_t op_class_size[GW_OP_STATE_CLASSES] = {256, 2048, 16384};

void *gw_op_state_get(gw_core_t *c, size_t size)
{
    unsigned cls = 0;
    while (cls < GW_OP_STATE_CLASSES && size > op_class_size[cls])
        cls++;
    op_hdr_t *h;
    if (cls < GW_OP_STATE_CLASSES && c->op_free[cls]) {
        h = c->op_free[cls];
        c->op_free[cls] = *(void **)(h + 1);
        c->op_nfree[cls]--;
        memset(h + 1, 0, size); /* (what the caller asked for: the rest is never read) */
        return h + 1;
    }
    size_t n = cls < GW_OP_STATE_CLASSES ? op_class_size[cls] : size;
    h = calloc(1, sizeof(*h) + n);
    if (!h)
        return NULL;
    h->cls = cls;
    h->magic = OP_MAGIC;
    h->size = n;
    return h + 1;
}

void gw_op_state_put(gw_core_t *c, void *p)
{
    if (!p)
        return;
    op_hdr_t *h = (op_hdr_t *)p - 1;
    if (h->magic != OP_MAGIC) { /* (a block of another allocator: a bug, never freed blindly) */
        gw_log(GW_LOG_ERROR, "gw_op_state_put(%p): not a block of the per-operation state pool", p);
        return;
    }
    unsigned cls = h->cls;
    if (cls >= GW_OP_STATE_CLASSES || c->op_nfree[cls] >= (cls ? GW_OP_STATE_KEEP : GW_OP_STATE_KEEP_SMALL)) {
        h->magic = 0;
        free(h);
        return;
    }
    *(void **)p = c->op_free[cls];
    c->op_free[cls] = h;
    c->op_nfree[cls]++;
}

void gw_core_fini(gw_core_t *c)
{
    gw_list_t *p, *t;
    gw_list_for_each_safe(p, t, &c->req_slabs) {
        gw_list_del(p);
        free(p);
    }
    for (unsigned k = 0; k < GW_OP_STATE_CLASSES; k++) {
        while (c->op_free[k]) {
            op_hdr_t *h = c->op_free[k];
            c->op_free[k] = *(void **)(h + 1);
            free(h);
        }
        c->op_nfree[k] = 0;
    }
    gw_hmap_fini(&c->regions);
    if (c->evfd >= 0)
        close(c->evfd);
    if (c->epfd >= 0)
        close(c->epfd);
    gw_settings_free(&c->settings);
}

gw_status_t gw_err(gw_core_t *c, gw_status_t st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->errbuf, sizeof(c->errbuf), fmt, ap);
    va_end(ap);
    c->err_status = st;
    c->err_count++;
    gw_log(GW_LOG_DEBUG, "%s: %s", gw_status_name(st), c->errbuf);
    return st;
}

static gw_status_t io_add(gw_core_t *c, gw_io_t *io, int fd, uint32_t events, gw_io_cb_t cb, void *arg,
                          int hot)
{
    io->fd = fd;
    io->events = events;
    io->cb = cb;
    io->arg = arg;
    io->hot = 0;
    struct epoll_event ev = {.events = events, .data.ptr = io};
    if (epoll_ctl(c->epfd, EPOLL_CTL_ADD, fd, &ev) != 0)
        return gw_err(c, GW_ERR_SYSTEM, "epoll_ctl(ADD fd=%d) failed: %s", fd, strerror(errno));
    if (hot) {
        io->hot = 1;
        c->nhot++;
    }
    return GW_OK;
}

gw_status_t gw_io_add(gw_core_t *c, gw_io_t *io, int fd, uint32_t events, gw_io_cb_t cb, void *arg)
{
    return io_add(c, io, fd, events, cb, arg, 1);
}

gw_status_t gw_io_add_cold(gw_core_t *c, gw_io_t *io, int fd, uint32_t events, gw_io_cb_t cb, void *arg)
{
    return io_add(c, io, fd, events, cb, arg, 0);
}

gw_status_t gw_io_mod(gw_core_t *c, gw_io_t *io, uint32_t events)
{
    if (io->events == events)
        return GW_OK;
    struct epoll_event ev = {.events = events, .data.ptr = io};
    if (epoll_ctl(c->epfd, EPOLL_CTL_MOD, io->fd, &ev) != 0)
        return gw_err(c, GW_ERR_SYSTEM, "epoll_ctl(MOD fd=%d) failed: %s", io->fd, strerror(errno));
    io->events = events;
    return GW_OK;
}

void gw_io_del(gw_core_t *c, gw_io_t *io)
{
    if (io->fd >= 0)
        epoll_ctl(c->epfd, EPOLL_CTL_DEL, io->fd, NULL);
    io->cb = NULL;
    if (io->hot) {
        io->hot = 0;
        c->nhot--;
    }
}

gw_status_t gw_core_add_poller(gw_core_t *c, gw_poll_cb_t cb, void *arg)
{
    if (c->npollers == (int)GW_ARRAY_SIZE(c->pollers))
        return gw_err(c, GW_ERR_NO_RESOURCE, "too many pollers (%d)", c->npollers);
    c->pollers[c->npollers] = cb;
    c->poller_args[c->npollers] = arg;
    c->npollers++;
    return GW_OK;
}

void gw_core_del_poller(gw_core_t *c, gw_poll_cb_t cb, void *arg)
{
    for (int i = 0; i < c->npollers; i++) {
        if (c->pollers[i] == cb && c->poller_args[i] == arg) {
            c->pollers[i] = c->pollers[c->npollers - 1];
            c->poller_args[i] = c->poller_args[c->npollers - 1];
            c->npollers--;
            return;
        }
    }
}

gw_status_t gw_core_add_sleeper(gw_core_t *c, gw_sleep_cb_t cb, void *arg)
{
    if (c->nsleepers == (int)GW_ARRAY_SIZE(c->sleepers))
        return gw_err(c, GW_ERR_NO_RESOURCE, "too many sleepers (%d)", c->nsleepers);
    c->sleepers[c->nsleepers] = cb;
    c->sleeper_args[c->nsleepers] = arg;
    c->nsleepers++;
    return GW_OK;
}

void gw_core_del_sleeper(gw_core_t *c, gw_sleep_cb_t cb, void *arg)
{
    for (int i = 0; i < c->nsleepers; i++) {
        if (c->sleepers[i] == cb && c->sleeper_args[i] == arg) {
            c->sleepers[i] = c->sleepers[c->nsleepers - 1];
            c->sleeper_args[i] = c->sleeper_args[c->nsleepers - 1];
            c->nsleepers--;
            return;
        }
    }
}

void gw_core_sleeping(gw_core_t *c, int asleep)
{
    for (int i = 0; i < c->nsleepers; i++)
        c->sleepers[i](c->sleeper_args[i], asleep);
}

void gw_core_signal(gw_core_t *c)
{
    if (c->ev_armed)
        return;
    uint64_t one = 1;
    ssize_t n = write(c->evfd, &one, sizeof(one));
    (void)n;
    c->ev_armed = 1;
}

void gw_core_wake(gw_core_t *c)
{
    uint64_t one = 1;
    ssize_t n = write(c->evfd, &one, sizeof(one));
    (void)n;
}

/* The stamp cold_due compares: the time-stamp counter where there is one
 * (one instruction; the coarse clock is a vDSO call with a sequence-lock
 * loop, ~13% of an idle verbs pass in the emulated guest), else the coarse
 * clock.  GW_CORE_COLD_GAP: the stamps' difference that counts as "a
 * while" - 2^20 cycles, at most a millisecond for any counter of 1 GHz or
 * more, so a caller that slept a coarse tick (1-4 ms) is always past it. */
#if defined(__x86_64__) || defined(__i386__)
static inline uint64_t cold_stamp(void) { return __rdtsc(); }
#define GW_CORE_COLD_GAP (1ull << 20)
#else
static inline uint64_t cold_stamp(void) { return gw_now_coarse_ns(); }
#define GW_CORE_COLD_GAP 1ull /* a tick of the coarse clock */
#endif

/* A non-blocking pass with no hot fd: is the cold set due (core.h)?  (A
 * stamp that went backwards - another CPU's counter - reads as due.) */
static int cold_due(gw_core_t *c)
{
    uint64_t t = cold_stamp();
    if (++c->cold_pass % GW_CORE_COLD_EVERY != 0 && t - c->cold_at < GW_CORE_COLD_GAP)
        return 0;
    c->cold_at = t;
    return 1;
}

/* A pass that reads the epoll set (out of line: the spinning caller's pass
 * without it, below, then saves no registers and sets up no event array). */
__attribute__((noinline)) static int dispatch_fds(gw_core_t *c, int timeout_ms)
{
    struct epoll_event evs[64];
    if (timeout_ms != 0)
        gw_core_sleeping(c, 1);
    int n = epoll_wait(c->epfd, evs, 64, timeout_ms);
    if (timeout_ms != 0) {
        int e = errno;
        gw_core_sleeping(c, 0);
        errno = e;
    }
    if (n < 0)
        return errno == EINTR ? 0 : -1;
    int count = 0;
    for (int i = 0; i < n; i++) {
        gw_io_t *io = evs[i].data.ptr;
        if (!io) { /* the eventfd */
            if (c->keep_ready && c->ev_armed)
                continue; /* stays readable: no read now, no write at the next signal */
            uint64_t v;
            ssize_t r = read(c->evfd, &v, sizeof(v));
            (void)r;
            c->ev_armed = 0;
            continue;
        }
        if (io->cb) {
            io->cb(io->arg, evs[i].events);
            count++;
        }
    }
    return count + gw_core_poll(c);
}

int gw_core_dispatch(gw_core_t *c, int timeout_ms)
{
    c->fds_read = timeout_ms != 0 || c->nhot > 0 || cold_due(c);
    if (c->fds_read)
        return dispatch_fds(c, timeout_ms);
    if (GW_LIKELY(c->npollers == 1)) /* (one transport: a tail call, no loop) */
        return c->pollers[0](c->poller_args[0]);
    return gw_core_poll(c);
}

/* (Out of line: gw_core_dispatch's one-poller pass saves no registers for its loop.) */
__attribute__((noinline)) int gw_core_poll(gw_core_t *c)
{
    int count = 0;
    for (int i = 0; i < c->npollers; i++)
        count += c->pollers[i](c->poller_args[i]);
    return count;
}

/* ---- request pool --------------------------------------------------------------- */
#define REQ_SLAB 64

/* A new slab into the pool: 0, or -1 out of memory.  (Out of line: the
 * pooled path of gw_req_alloc then saves no registers for a call.) */
__attribute__((noinline)) static int req_slab(gw_core_t *c)
{
    /* slab: a list head followed by REQ_SLAB requests */
    size_t hdr = (sizeof(gw_list_t) + 63) & ~(size_t)63;
    char *slab = calloc(1, hdr + REQ_SLAB * sizeof(gw_request_t));
    if (!slab)
        return -1;
    gw_list_push_back(&c->req_slabs, (gw_list_t *)slab);
    gw_request_t *rs = (gw_request_t *)(slab + hdr);
    for (int i = 0; i < REQ_SLAB; i++)
        gw_list_push_back(&c->req_free, &rs[i].link);
    return 0;
}

gw_request_t *gw_req_alloc(gw_core_t *c)
{
    if (gw_list_empty(&c->req_free) && req_slab(c) != 0)
        return NULL;
    gw_list_t *l = gw_list_first(&c->req_free);
    gw_list_del(l);
    gw_request_t *r = gw_container_of(l, gw_request_t, link);
    /* zeroed 64 bytes at a time: one memset of the whole request compiles
     * to `rep stos`, whose start-up cost was ~13% of a 1 KiB intra put
     * (perf, AMD EPYC VM); fixed 64-byte pieces stay plain vector stores */
    char *z = (char *)r;
    size_t i = 0;
    _Pragma("GCC unroll 8") /* (a fixed count: straight stores, no loop counter per piece) */
    for (; i + 64 <= sizeof(*r); i += 64)
        memset(z + i, 0, 64);
    memset(z + i, 0, sizeof(*r) - i);
    gw_list_init(&r->link);
    gw_list_init(&r->tl_link);
    r->core = c;
    r->status = GW_INPROGRESS;
    r->first_err = GW_OK;
    r->err_mark = c->err_count;
    return r;
}

static void req_recycle(gw_request_t *r)
{
    if (r->detail) { /* (rare: a failed request's text; free(NULL) is a call per request) */
        free(r->detail);
        r->detail = NULL;
    }
    r->status = GW_ERR_CANCELED;
    r->flags = 0;
    gw_list_push_front(&r->core->req_free, &r->link);
}

/* The per-request failure detail: the operation and its input, then the
 * context's message when one with this status was written since the
 * request was posted (the endpoint's failure, a refused key...), else the
 * status text (e.g. a refusal the target reported). */
static void req_detail(gw_request_t *r, gw_status_t st)
{
    static const char *const names[] = {"?",       "gw_put",  "gw_get",   "gw_put_notify",
                                        "gw_send", "gw_recv", "gw_flush", "gw_xfer_batch"};
    const char *op = r->op <= GW_OP_BATCH ? names[r->op] : "?";
    char what[128];
    if (r->op == GW_OP_PUT || r->op == GW_OP_GET || r->op == GW_OP_PUT_NOTIFY)
        snprintf(what, sizeof(what), "%s(len=%zu, raddr=0x%llx)", op, r->len, (unsigned long long)r->raddr);
    else if (r->op == GW_OP_BATCH)
        snprintf(what, sizeof(what), "%s(%zu bytes)", op, r->len);
    else if (r->op == GW_OP_SEND || r->op == GW_OP_RECV)
        snprintf(what, sizeof(what), "%s(len=%zu, tag=0x%llx)", op, r->len, (unsigned long long)r->value);
    else
        snprintf(what, sizeof(what), "%s", op);
    int fresh = r->core->err_count != r->err_mark && r->core->err_status == st;
    const char *why = fresh ? r->core->errbuf : gw_status_str(st);
    const char *who = !fresh && st <= -20 && st > -40 ? " (refused by the target; its memory is untouched)" : "";
    size_t n = strlen(what) + strlen(why) + strlen(who) + 4;
    r->detail = malloc(n);
    if (r->detail)
        snprintf(r->detail, n, "%s: %s%s", what, why, who);
}

/* gw_req_complete past its common case (below). */
__attribute__((noinline)) static void req_complete(gw_request_t *r, gw_status_t status)
{
    r->status = status;
    r->core->n_completed++;
    if (r->flags & GW_REQF_CANCEL) { /* no longer watched (api_ext.c) */
        r->flags &= (uint8_t)~GW_REQF_CANCEL;
        r->core->n_canceling--;
    }
    if (status < 0 && (r->flags & GW_REQF_USER) && !(r->flags & GW_REQF_FREED) && !r->detail)
        req_detail(r, status);
    if (r->fini) { /* set by the layer that attached something to the request */
        void (*fini)(gw_request_t *) = r->fini;
        r->fini = NULL;
        fini(r);
    }
    if (r->use_count) { /* the local region's count of operations using it */
        (*r->use_count)--;
        r->use_count = NULL;
    }
    if (!(r->flags & GW_REQF_USER) || (r->flags & GW_REQF_FREED))
        req_recycle(r);
}

void gw_req_complete(gw_request_t *r, gw_status_t status)
{
    if (r->status != GW_INPROGRESS)
        return;
    /* the common case with nothing to call, so no registers to save: a
     * success of a request the caller holds, with no hook (a tracked put's,
     * a receive's into a registered buffer: its region's count drops);
     * anything else out of line */
    if (GW_LIKELY(status == GW_OK && !r->fini &&
                  (r->flags & (GW_REQF_USER | GW_REQF_FREED | GW_REQF_CANCEL)) == GW_REQF_USER)) {
        r->status = GW_OK;
        r->core->n_completed++;
        if (r->use_count) {
            (*r->use_count)--;
            r->use_count = NULL;
        }
        return;
    }
    req_complete(r, status);
}

void gw_req_release(gw_request_t *r)
{
    if (!r)
        return;
    if (r->status == GW_INPROGRESS)
        r->flags |= GW_REQF_FREED;
    else
        req_recycle(r);
}
