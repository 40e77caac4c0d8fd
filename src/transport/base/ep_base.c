/* SPDX-License-Identifier: Apache-2.0 */
/* ep_base.c - shared endpoint state: ordering, flush, notifications, matching. */
#include "transport/base/ep_base.h"

#include "mem/mem.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

void gw_ep_base_init(gw_ep_base_t *b, gw_core_t *core)
{
    memset(b, 0, sizeof(*b));
    b->core = core;
    b->error = GW_OK;
    b->implicit_err = GW_OK;
    b->fail_fd = -1;
    gw_list_init(&b->outstanding);
    gw_list_init(&b->flushes);
    gw_list_init(&b->posted);
    gw_list_init(&b->unexpected);
    gw_ep_unexp_pool_init(b);
    b->last_rx_ns = gw_now_ns();
}

void gw_ep_base_fini(gw_ep_base_t *b)
{
    gw_list_t *p, *t;
    gw_list_for_each_safe(p, t, &b->unexpected) {
        gw_unexp_t *u = gw_container_of(p, gw_unexp_t, link);
        gw_list_del(p);
        gw_ep_unexp_free(b, u);
    }
    gw_ep_unexp_pool_fini(b);
    free(b->notify_q);
    b->notify_q = NULL;
    free(b->ncount);
    b->ncount = NULL;
    while (b->nbad) {
        gw_nbad_t *n = b->nbad;
        b->nbad = n->next;
        free(n);
    }
    b->n_ncount = b->cap_ncount = 0;
}

gw_request_t *gw_ep_oldest_op(const gw_ep_base_t *b)
{
    gw_list_t *f = gw_list_first(&b->outstanding);
    return f ? gw_container_of(f, gw_request_t, link) : NULL;
}

uint64_t gw_ep_oldest_seq(const gw_ep_base_t *b)
{
    const gw_request_t *o = gw_ep_oldest_op(b);
    return o ? o->seq : UINT64_MAX;
}

/* The oldest outstanding operation a notification or a flush waits for:
 * any but a send.  Both are ordered after the puts (and gets) posted before
 * them, never after a message: a send completes only when the peer takes
 * it (a rendezvous waits for its receive), and a peer that waits for the
 * notification (or for what the flush makes visible) before it receives
 * would wait forever. */
static gw_request_t *oldest_ordered(gw_ep_base_t *b)
{
    for (gw_list_t *f = b->outstanding.next; f != &b->outstanding; f = f->next) {
        gw_request_t *o = gw_container_of(f, gw_request_t, link);
        if (o->op != GW_OP_SEND)
            return o;
    }
    return NULL;
}

static void check_flushes(gw_ep_base_t *b)
{
    if (gw_list_empty(&b->flushes)) /* (the common case: no walk, no oldest to find) */
        return;
    const gw_request_t *o = oldest_ordered(b);
    uint64_t oldest = o ? o->seq : UINT64_MAX;
    gw_list_t *p;
    while ((p = gw_list_first(&b->flushes)) != NULL) {
        gw_request_t *f = gw_container_of(p, gw_request_t, link);
        if (f->seq >= oldest)
            break;
        gw_list_del(p);
        f->flags &= (uint8_t)~GW_REQF_QUEUED;
        gw_status_t st = b->error != GW_OK ? b->error : b->implicit_err;
        b->implicit_err = GW_OK;
        gw_req_complete(f, st);
    }
}

/* req leaves the endpoint's books: no longer deferred, no longer outstanding. */
static void op_unlist(gw_ep_base_t *b, gw_request_t *req)
{
    if (req->flags & GW_REQF_NDEFER) {
        req->flags &= (uint8_t)~(GW_REQF_NDEFER | GW_REQF_NHELD);
        b->ndeferred--;
    }
    if (req->flags & GW_REQF_QUEUED) {
        gw_list_del(&req->link);
        req->flags &= (uint8_t)~GW_REQF_QUEUED;
    }
}

static void op_complete(gw_request_t *req, gw_status_t status)
{
    if (status != GW_OK && req->err_sink && *req->err_sink == GW_OK)
        *req->err_sink = status;
    gw_req_complete(req, status);
}

/* Sends the notification of each held request that no older operation it
 * waits for (oldest_ordered) precedes, and completes it. */
static void notes_check(gw_ep_base_t *b)
{
    if (b->in_notes) /* a completion inside notify_out: the loop below goes on */
        return;
    b->in_notes = 1;
    gw_request_t *o;
    while (b->ndeferred && !gw_ep_failed(b) && (o = oldest_ordered(b)) != NULL) {
        if (!(o->flags & GW_REQF_NHELD))
            break; /* the oldest operation is still moving */
        op_unlist(b, o);
        /* off the list first: if sending fails the endpoint, gw_ep_fail
         * completes the others, and this one is completed here */
        gw_status_t st = b->notify_out(b->notify_arg, o);
        if (st == GW_OK && gw_ep_failed(b))
            st = b->error;
        op_complete(o, st);
    }
    b->in_notes = 0;
}

gw_status_t gw_ep_notify_defer(gw_ep_base_t *b, gw_request_t *req)
{
    if (!b->notify_out || !(req->flags & GW_REQF_QUEUED) || (req->flags & GW_REQF_NDEFER))
        return gw_err(b->core, GW_ERR_INVALID, /* a transport bug: nothing would ever send it */
                      "endpoint to %s: a notification cannot be deferred (%s)", b->peer,
                      !b->notify_out                     ? "the transport set no sender"
                      : !(req->flags & GW_REQF_QUEUED) ? "its operation is not outstanding"
                                                         : "it is deferred already");
    req->flags |= GW_REQF_NDEFER;
    b->ndeferred++;
    return GW_OK;
}

void gw_ep_op_done_slow(gw_ep_base_t *b, gw_request_t *req, gw_status_t status)
{
    if ((req->flags & GW_REQF_NDEFER) && status == GW_OK && (req->flags & GW_REQF_QUEUED) && !gw_ep_failed(b)) {
        req->flags |= GW_REQF_NHELD; /* its notification waits its turn */
        notes_check(b);
        check_flushes(b);
        return;
    }
    op_unlist(b, req); /* (a deferred one that failed: no notification) */
    op_complete(req, status);
    if (b->ndeferred) /* a held one may be at the head now */
        notes_check(b);
    check_flushes(b);
}

void gw_ep_op_unstart(gw_ep_base_t *b, gw_request_t *req)
{
    op_unlist(b, req);
    if (b->ndeferred)
        notes_check(b);
    check_flushes(b);
}

void gw_ep_flush_start(gw_ep_base_t *b, gw_request_t *req)
{
    gw_ep_work_begins(b);
    req->seq = b->next_seq; /* covers everything posted so far */
    req->flags |= GW_REQF_QUEUED;
    gw_list_push_back(&b->flushes, &req->link);
    check_flushes(b);
}

void gw_ep_fail(gw_ep_base_t *b, gw_status_t status, const char *fmt, ...)
{
    if (b->error == GW_OK) {
        b->error = status;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(b->error_detail, sizeof(b->error_detail), fmt, ap);
        va_end(ap);
        if (b->on_fail) /* the transport's own requests and streams first */
            b->on_fail(b->on_fail_arg, status);
        if (b->fail_fd >= 0) /* the peer's endpoint fails too, now, not at our close */
            shutdown(b->fail_fd, SHUT_RDWR);
        gw_log(GW_LOG_INFO, "endpoint to %s failed: %s (%s)", b->peer, b->error_detail,
               gw_status_str(status));
        /* the context's last error says why, also when only a request's status shows it */
        gw_err(b->core, status, "endpoint to %s failed: %s", b->peer, b->error_detail);
    }
    gw_list_t *p, *t;
    gw_list_for_each_safe(p, t, &b->outstanding) {
        gw_request_t *r = gw_container_of(p, gw_request_t, link);
        gw_ep_op_done(b, r, b->error);
    }
    gw_list_for_each_safe(p, t, &b->posted) {
        gw_request_t *r = gw_container_of(p, gw_request_t, link);
        gw_list_del(p);
        r->flags &= (uint8_t)~GW_REQF_QUEUED;
        gw_req_complete(r, b->error);
    }
    check_flushes(b);
    gw_core_signal(b->core);
}

static int nbad_add(gw_ep_base_t *b, int counted, uint64_t pos, uint64_t id, const char *detail)
{
    size_t dl = strlen(detail);
    gw_nbad_t *n = malloc(sizeof(*n) + dl + 1);
    if (!n)
        return -1;
    n->next = NULL;
    n->pos = pos;
    n->id = id;
    n->counted = counted;
    memcpy(n->detail, detail, dl + 1);
    gw_nbad_t **t = &b->nbad;
    while (*t)
        t = &(*t)->next;
    *t = n;
    return 0;
}

/* The oldest record of a failed ordered notification at pos, or of id. */
static gw_nbad_t *nbad_take(gw_ep_base_t *b, int counted, uint64_t key)
{
    for (gw_nbad_t **t = &b->nbad; *t; t = &(*t)->next)
        if ((*t)->counted == counted && (counted ? (*t)->id : (*t)->pos) == key) {
            gw_nbad_t *n = *t;
            *t = n->next;
            return n;
        }
    return NULL;
}

static int notify_queue(gw_ep_base_t *b, uint64_t value);
static int ncount_add(gw_ep_base_t *b, uint64_t id, int bad);

int gw_ep_notify_push(gw_ep_base_t *b, uint64_t value)
{
    if (b->notify_gate)
        return b->notify_gate(b->notify_gate_arg, value, 0);
    return notify_queue(b, value);
}

int gw_ep_notify_deliver(gw_ep_base_t *b, uint64_t value, int counted, const char *bad)
{
    if (bad && nbad_add(b, counted, b->notify_pushed, value, bad) != 0)
        return -1;
    return counted ? ncount_add(b, value, bad != NULL) : notify_queue(b, value);
}

static int notify_queue(gw_ep_base_t *b, uint64_t value)
{
    if (b->notify_count == b->notify_cap) {
        size_t ncap = b->notify_cap ? b->notify_cap * 2 : 64;
        uint64_t *q = malloc(ncap * sizeof(*q));
        if (!q)
            return -1;
        for (size_t i = 0; i < b->notify_count; i++)
            q[i] = b->notify_q[(b->notify_head + i) % b->notify_cap];
        free(b->notify_q);
        b->notify_q = q;
        b->notify_cap = ncap;
        b->notify_head = 0;
    }
    b->notify_q[(b->notify_head + b->notify_count) % b->notify_cap] = value;
    b->notify_count++;
    b->notify_pushed++;
    return 0;
}

/* Counted notifications: a short array (a transfer names a handful of ids,
 * e.g. one per layer in flight); an id whose count drops to 0 is removed. */
static struct gw_ncount *ncount_find(const gw_ep_base_t *b, uint64_t id)
{
    for (size_t i = 0; i < b->n_ncount; i++)
        if (b->ncount[i].id == id)
            return &b->ncount[i];
    return NULL;
}

int gw_ep_ncount_add(gw_ep_base_t *b, uint64_t id)
{
    if (b->notify_gate)
        return b->notify_gate(b->notify_gate_arg, id, 1);
    return ncount_add(b, id, 0);
}

static int ncount_add(gw_ep_base_t *b, uint64_t id, int bad)
{
    struct gw_ncount *n = ncount_find(b, id);
    if (!n) {
        if (b->n_ncount == b->cap_ncount) {
            size_t cap = b->cap_ncount ? b->cap_ncount * 2 : 16;
            struct gw_ncount *a = realloc(b->ncount, cap * sizeof(*a));
            if (!a)
                return -1;
            b->ncount = a;
            b->cap_ncount = cap;
        }
        n = &b->ncount[b->n_ncount++];
        n->id = id;
        n->count = 0;
        n->bad = 0;
    }
    if (bad)
        n->bad++;
    else
        n->count++;
    return 0;
}

uint64_t gw_ep_ncount_get(const gw_ep_base_t *b, uint64_t id)
{
    const struct gw_ncount *n = ncount_find(b, id);
    return n ? n->count : 0;
}

int gw_ep_ncount_take(gw_ep_base_t *b, uint64_t id, uint64_t count)
{
    if (!count)
        return 0;
    struct gw_ncount *n = ncount_find(b, id);
    if (!n || n->count < count)
        return -1;
    n->count -= count;
    if (!n->count && !n->bad)
        *n = b->ncount[--b->n_ncount];
    return 0;
}

uint64_t gw_ep_ncount_bad(const gw_ep_base_t *b, uint64_t id)
{
    const struct gw_ncount *n = ncount_find(b, id);
    return n ? n->bad : 0;
}

int gw_ep_ncount_take_bad(gw_ep_base_t *b, uint64_t id, char **detail)
{
    struct gw_ncount *n = ncount_find(b, id);
    if (!n || !n->bad)
        return -1;
    n->bad--;
    if (!n->count && !n->bad)
        *n = b->ncount[--b->n_ncount];
    gw_nbad_t *r = nbad_take(b, 1, id);
    *detail = r ? strdup(r->detail) : NULL;
    free(r);
    return 0;
}

int gw_ep_notify_pop(gw_ep_base_t *b, uint64_t *value, char **detail)
{
    if (!b->notify_count)
        return -1;
    *value = b->notify_q[b->notify_head];
    b->notify_head = (b->notify_head + 1) % b->notify_cap;
    b->notify_count--;
    uint64_t pos = b->notify_popped++;
    gw_nbad_t *r = b->nbad ? nbad_take(b, 0, pos) : NULL;
    if (r) {
        if (detail)
            *detail = r ? strdup(r->detail) : NULL;
        free(r);
        return 1;
    }
    return 0;
}

gw_request_t *gw_ep_match_posted(gw_ep_base_t *b, uint64_t tag)
{
    if (GW_UNLIKELY(tag == GW_INTEG_TAG) && b->integ)
        return NULL; /* the integrity check's own message: never the application's receive */
    gw_list_t *p, *t;
    gw_list_for_each_safe(p, t, &b->posted) {
        gw_request_t *r = gw_container_of(p, gw_request_t, link);
        if ((r->value & r->mask) == (tag & r->mask)) {
            gw_list_del(p);
            r->flags &= (uint8_t)~GW_REQF_QUEUED;
            return r;
        }
    }
    return NULL;
}

gw_unexp_t *gw_ep_peek_unexp(gw_ep_base_t *b, uint64_t tag, uint64_t mask)
{
    for (gw_list_t *p = b->unexpected.next; p != &b->unexpected; p = p->next) {
        gw_unexp_t *u = gw_container_of(p, gw_unexp_t, link);
        if (GW_UNLIKELY(u->tag == GW_INTEG_TAG) && b->integ)
            continue; /* the integrity check's own message (proto/proto_integrity.c takes it) */
        if ((u->tag & mask) == (tag & mask))
            return u->filling ? NULL : u; /* never a younger one past it */
    }
    return NULL;
}

void gw_ep_recv_done(gw_ep_base_t *b, gw_request_t *req, size_t msg_len, uint64_t tag,
                     gw_status_t status)
{
    (void)b;
    req->length = msg_len;
    req->rtag = tag;
    if (status == GW_OK && msg_len > req->len)
        status = GW_ERR_TRUNCATED;
    if (status != GW_OK && req->err_sink && *req->err_sink == GW_OK)
        *req->err_sink = status;
    gw_req_complete(req, status);
}

/* ---- active messages ------------------------------------------------------------ */
gw_status_t gw_am_set(gw_core_t *core, unsigned id, gw_am_handler_t fn, void *arg)
{
    if (id >= GW_AM_IDS)
        return gw_err(core, GW_ERR_INVALID, "active message handler id %u: ids are 0..%d", id, GW_AM_IDS - 1);
    core->am_fn[id] = (void (*)(void))fn;
    core->am_arg[id] = arg;
    return GW_OK;
}

gw_status_t gw_ep_am_deliver(gw_ep_base_t *b, unsigned id, const void *data, size_t len)
{
    if (id >= GW_AM_IDS || !b->core->am_fn[id])
        return gw_err(b->core, GW_ERR_PROTOCOL, "active message from %s for handler %u, which %s", b->peer, id,
                      id >= GW_AM_IDS ? "is out of range" : "this context has not set");
    if (len > GW_AM_MAX)
        return gw_err(b->core, GW_ERR_PROTOCOL, "active message from %s of %zu bytes (at most %d)", b->peer, len,
                      GW_AM_MAX);
    ((gw_am_handler_t)b->core->am_fn[id])(b->core->am_arg[id], b, data, len);
    return GW_OK;
}

gw_status_t gw_ep_am_check(gw_ep_base_t *b, const char *transport, unsigned id, size_t len)
{
    if (id >= GW_AM_IDS || len > GW_AM_MAX)
        return gw_err(b->core, GW_ERR_INVALID, "%s active message to %s: handler id %u (0..%d), %zu bytes (at most %d)",
                      transport, b->peer, id, GW_AM_IDS - 1, len, GW_AM_MAX);
    if (gw_ep_failed(b))
        return gw_err(b->core, b->error, "%s active message to %s: the endpoint failed earlier: %s", transport, b->peer,
                      b->error_detail);
    return GW_OK;
}

/* ---- untracked sends' own payloads ---------------------------------------------------- */
typedef struct own_head {
    void (*fini)(gw_request_t *); /* the hook own_fini displaced */
    uint64_t pad;
} own_head_t;

static void own_fini(gw_request_t *req)
{
    own_head_t *h = (own_head_t *)(void *)((uint8_t *)req->buf - sizeof(own_head_t));
    void (*next)(gw_request_t *) = h->fini;
    req->buf = NULL;
    gw_op_state_put(req->core, h);
    if (next)
        next(req);
}

int gw_ep_send_needs_own(const gw_request_t *req, size_t max)
{
    return req->op == GW_OP_SEND && req->err_sink && req->len && req->len <= max &&
           (!req->lmem || req->lmem->type == GW_MEM_HOST);
}

gw_status_t gw_ep_own_payload(gw_request_t *req)
{
    own_head_t *h = gw_op_state_get(req->core, sizeof(*h) + req->len);
    if (!h)
        return gw_err(req->core, GW_ERR_NOMEM, "out of memory keeping a copy of a %zu-byte untracked message",
                      req->len);
    memcpy(h + 1, req->buf, req->len);
    h->fini = req->fini;
    req->fini = own_fini;
    req->buf = h + 1;
    req->lmem = NULL;
    return GW_OK;
}
