/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gwnx_core.c - the NIXL backend's context: one gpuwire context and its
 * listener behind a mutex, a progress thread on the context fd, peers by
 * NIXL agent name, registrations, transfers and notifications (gwnx.h).
 */
#include "gwnx.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define CONN_PREFIX "gwnx1 "
#define MAX_CANDIDATES 4
/* how long a release or a destroy waits for a transfer still moving */
#define DRAIN_MS 10000
/* while a caller polled a transfer this recently, it progresses the context
 * itself and the progress thread stays out of its way (a completion taken
 * by the thread would reach the poller only through the lock) */
#define YIELD_NS 200000ull
/* a caller that polls transfers for long also takes notifications and new
 * connections (the thread's work) every this many polls */
#define FULL_PASS_EVERY 64u

typedef struct inbound {
    gw_ep_t *ep;
    gwnx_pairing_t pair;
} inbound_t;

typedef struct outmsg {
    gw_request_t *req;
    void *buf;
    struct outmsg *next;
} outmsg_t;

struct gwnx_core {
    pthread_mutex_t lock;
    gw_context_t *ctx;
    gw_listener_t *lis;
    char *agent;
    char conn[512];
    gwnx_agent_map_t agents;
    inbound_t *in;
    size_t nin, capin;
    gwnx_pending_t *ready_head, *ready_tail;
    outmsg_t *out;
    pthread_t thr;
    int have_thr;
    atomic_int stop;
    atomic_uint_fast64_t polled_ns; /* when a caller last polled a transfer */
    unsigned checks;                /* transfer polls, for the full pass every FULL_PASS_EVERY */
    int wakefd;
    int xfer_log;                   /* GPUWIRE_NIXL_XFER_LOG=on */
    gwnx_stats_t stats;             /* under the lock */
};

struct gwnx_region {
    gwnx_core_t *core;
    gw_mem_t *mem;
    uint64_t base;
    size_t size;
    unsigned char *rkey;
    size_t rkey_len;
};

struct gwnx_rregion {
    gwnx_core_t *core;
    gwnx_agent_t *agent;
    gw_rkey_t *rkey;
    uint64_t base;
    size_t size;
};

struct gwnx_xfer {
    gwnx_core_t *core;
    gwnx_agent_t *agent;
    int op;
    size_t n;
    gw_dlist_t *ldl, *rdl;
    gw_request_t *req;
    int notif_pending;      /* READ: notification to send once the data is here */
    void *notif;
    size_t notif_len;
    int posted;
    int counted;            /* this post's completion is in the stats */
    uint64_t posted_ns;     /* when it was posted */
    uint64_t bytes;         /* sum of the descriptors' lengths */
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- errors ---------------------------------------------------------------- */
static __thread char tls_err[768];

static void log_err(void)
{
    fprintf(stderr, "gpuwire NIXL backend: %s\n", tls_err);
}

static int fail(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tls_err, sizeof(tls_err), fmt, ap);
    va_end(ap);
    log_err();
    return status;
}

/* a failed gpuwire call: the NIXL status, and gpuwire's detail logged */
static int fail_gw(gwnx_core_t *c, gw_status_t st, const char *what)
{
    const char *d = c && c->ctx ? gw_last_error(c->ctx) : "";
    return fail(gwnx_status_from_gw(st), "%s: %s (%s)%s%s", what, gw_status_name(st),
                gw_status_str(st), d && *d ? ": " : "", d ? d : "");
}

const char *gwnx_core_error(const gwnx_core_t *c)
{
    (void)c;
    return tls_err;
}

/* ---- progress ---------------------------------------------------------------- */
static void ready_push(gwnx_core_t *c, gwnx_pending_t *e)
{
    if (c->ready_tail)
        c->ready_tail->next = e;
    else
        c->ready_head = e;
    c->ready_tail = e;
}

static void add_inbound(gwnx_core_t *c, gw_ep_t *ep)
{
    if (c->nin == c->capin) {
        size_t cap = c->capin ? c->capin * 2 : 8;
        inbound_t *v = realloc(c->in, cap * sizeof(*v));
        if (!v) {
            fail(GWNX_ERR_BACKEND, "out of memory taking an incoming endpoint");
            gw_ep_close(ep, 0);
            return;
        }
        c->in = v;
        c->capin = cap;
    }
    memset(&c->in[c->nin], 0, sizeof(c->in[0]));
    c->in[c->nin++].ep = ep;
}

/* takes the frames and ordered notifications queued on one incoming
 * endpoint; returns 1 when the endpoint failed and nothing is queued */
static int drain_inbound(gwnx_core_t *c, inbound_t *ib)
{
    uint64_t v;
    while (gw_notify_wait(ib->ep, 0, &v) == GW_OK)
        gwnx_pairing_landed(&ib->pair, v);
    for (;;) {
        gw_probe_info_t pi = {.size = sizeof(pi)};
        gw_status_t st = gw_probe(ib->ep, GWNX_FRAME_TAG, ~0ull, &pi);
        if (st == GW_ERR_ENDPOINT_FAILED)
            return 1;
        if (st != GW_OK)
            break;
        void *buf = malloc(pi.length ? pi.length : 1);
        gw_request_t *req = NULL;
        if (!buf)
            break;
        st = gw_recv(ib->ep, buf, pi.length, NULL, GWNX_FRAME_TAG, ~0ull, &req);
        if (st == GW_OK)
            st = gw_request_wait(req, DRAIN_MS);
        gw_request_free(req);
        gwnx_frame_view_t f;
        if (st != GW_OK) {
            fail_gw(c, st, "receiving a notification");
        } else if (gwnx_frame_decode(buf, pi.length, &f) != 0) {
            fail(GWNX_ERR_BACKEND, "dropped a malformed notification frame (%zu bytes)", pi.length);
        } else if (gwnx_pairing_add_frame(&ib->pair, &f) != 0) {
            fail(GWNX_ERR_BACKEND, "out of memory queueing a notification");
        }
        free(buf);
        if (st != GW_OK)
            break;
    }
    /* notifications may have come while the frames were read */
    while (gw_notify_wait(ib->ep, 0, &v) == GW_OK)
        gwnx_pairing_landed(&ib->pair, v);
    gwnx_pending_t *e;
    while ((e = gwnx_pairing_take(&ib->pair)))
        ready_push(c, e);
    return 0;
}

static void reap_out(gwnx_core_t *c)
{
    outmsg_t **pp = &c->out;
    while (*pp) {
        outmsg_t *m = *pp;
        gw_status_t st = gw_request_test(m->req);
        if (st == GW_INPROGRESS) {
            pp = &m->next;
            continue;
        }
        if (st != GW_OK) {
            gw_request_info_t ri = {.size = sizeof(ri)};
            gw_request_info(m->req, &ri);
            fail(gwnx_status_from_gw(st), "a notification was not delivered: %s: %s",
                 gw_status_name(st), ri.error_detail);
        }
        *pp = m->next;
        gw_request_free(m->req);
        free(m->buf);
        free(m);
    }
}

/* one pass; the lock is held.  Returns the events processed. */
static int pass(gwnx_core_t *c)
{
    int total = 0;
    for (int k = 0; k < 64; k++) {
        int r = gw_progress(c->ctx);
        if (r <= 0)
            break;
        total += r;
    }
    gw_ep_t *ep;
    while (c->lis && gw_accept(c->lis, 0, &ep) == GW_OK)
        add_inbound(c, ep);
    for (size_t i = 0; i < c->nin;) {
        if (drain_inbound(c, &c->in[i])) {
            /* the sender went: what it sent before is handed out above */
            gw_ep_close(c->in[i].ep, 0);
            gwnx_pairing_clear(&c->in[i].pair);
            c->in[i] = c->in[--c->nin];
            continue;
        }
        i++;
    }
    reap_out(c);
    return total;
}

static void *progress_main(void *arg)
{
    gwnx_core_t *c = arg;
    int fd = -1;
    gw_context_fd(c->ctx, &fd);
    int busy = 0;
    while (!atomic_load(&c->stop)) {
        struct pollfd p[2] = {{.fd = fd, .events = POLLIN}, {.fd = c->wakefd, .events = POLLIN}};
        /* the timeout also drains what arrives between passes without an fd event */
        poll(p, 2, busy ? 0 : 20);
        if (p[1].revents & POLLIN) {
            uint64_t v;
            if (read(c->wakefd, &v, sizeof(v)) < 0) {
                /* nothing to do: the eventfd is only a wake-up */
            }
        }
        if (now_ns() - atomic_load(&c->polled_ns) < YIELD_NS) {
            /* a caller is polling: let it progress (it takes notifications too) */
            poll(&p[1], 1, 1);
            busy = 0;
            continue;
        }
        pthread_mutex_lock(&c->lock);
        busy = pass(c) > 0;
        pthread_mutex_unlock(&c->lock);
    }
    return NULL;
}

void gwnx_core_progress(gwnx_core_t *c)
{
    pthread_mutex_lock(&c->lock);
    pass(c);
    pthread_mutex_unlock(&c->lock);
}

/* ---- create / destroy ------------------------------------------------------- */
static void build_conn_info(gwnx_core_t *c, const char *advertise)
{
    char addr[128] = "";
    gw_listener_addr(c->lis, addr, sizeof(addr));
    const char *colon = strrchr(addr, ':');
    const char *port = colon ? colon + 1 : "0";
    char host[128];
    snprintf(host, sizeof(host), "%.*s", colon ? (int)(colon - addr) : 0, addr);
    size_t off = (size_t)snprintf(c->conn, sizeof(c->conn), "%s", CONN_PREFIX);
    int wildcard = strcmp(host, "0.0.0.0") == 0 || strcmp(host, "[::]") == 0 || strcmp(host, "::") == 0 ||
                   host[0] == 0;
    if (!wildcard) {
        snprintf(c->conn + off, sizeof(c->conn) - off, "%s", addr);
        return;
    }
    int n = 0;
    if (advertise && *advertise) {
        off += (size_t)snprintf(c->conn + off, sizeof(c->conn) - off, "%s:%s", advertise, port);
        n++;
    }
    struct ifaddrs *ifa = NULL;
    if (getifaddrs(&ifa) == 0) {
        for (struct ifaddrs *i = ifa; i && n < MAX_CANDIDATES - 1; i = i->ifa_next) {
            if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || (i->ifa_flags & IFF_LOOPBACK) ||
                !(i->ifa_flags & IFF_UP))
                continue;
            char ip[INET_ADDRSTRLEN];
            inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, ip, sizeof(ip));
            off += (size_t)snprintf(c->conn + off, sizeof(c->conn) - off, "%s%s:%s", n ? "," : "", ip,
                                    port);
            n++;
        }
        freeifaddrs(ifa);
    }
    snprintf(c->conn + off, sizeof(c->conn) - off, "%s127.0.0.1:%s", n ? "," : "", port);
}

int gwnx_core_create(const gwnx_core_opts_t *o, gwnx_core_t **out, char *err, size_t errlen)
{
    int rc;
    if (!o || !out || !o->agent)
        return fail(GWNX_ERR_INVALID_PARAM, "gwnx_core_create: missing options or agent name");
    gwnx_core_t *c = calloc(1, sizeof(*c));
    if (!c)
        return fail(GWNX_ERR_BACKEND, "out of memory");
    pthread_mutex_init(&c->lock, NULL);
    c->wakefd = -1;
    c->agent = strdup(o->agent);
    gw_status_t st = gw_context_create(NULL, &c->ctx);
    if (st != GW_OK) {
        rc = fail_gw(NULL, st, "gw_context_create (see the message above for the setting)");
        goto bad;
    }
    st = gw_listen(c->ctx, o->listen_addr ? o->listen_addr : ":0", &c->lis);
    if (st != GW_OK) {
        rc = fail_gw(c, st, "gw_listen");
        goto bad;
    }
    build_conn_info(c, o->advertise);
    const char *xl = gw_setting_value(c->ctx, "GPUWIRE_NIXL_XFER_LOG");
    c->xfer_log = xl && strcmp(xl, "on") == 0;
    c->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (o->progress_thread) {
        if (pthread_create(&c->thr, NULL, progress_main, c) != 0) {
            rc = fail(GWNX_ERR_BACKEND, "cannot start the progress thread: %s", strerror(errno));
            goto bad;
        }
        c->have_thr = 1;
    }
    *out = c;
    return GWNX_SUCCESS;
bad:
    if (err)
        snprintf(err, errlen, "%s", tls_err);
    gw_listener_destroy(c->lis);
    gw_context_destroy(c->ctx);
    if (c->wakefd >= 0)
        close(c->wakefd);
    free(c->agent);
    free(c);
    return rc;
}

static void close_agent_ep(gwnx_core_t *c, gwnx_agent_t *a)
{
    if (!a->ep)
        return;
    gw_dlist_destroy(a->empty_local);
    gw_dlist_destroy(a->empty_remote);
    a->empty_local = a->empty_remote = NULL;
    gw_status_t st = gw_ep_close(a->ep, 1000);
    if (st != GW_OK)
        fail_gw(c, st, "closing the endpoint to a peer");
    a->ep = NULL;
    a->closing = 0;
}

void gwnx_core_destroy(gwnx_core_t *c)
{
    if (!c)
        return;
    if (c->have_thr) {
        atomic_store(&c->stop, 1);
        uint64_t one = 1;
        if (write(c->wakefd, &one, sizeof(one)) < 0) {
            /* the thread also wakes on its poll timeout */
        }
        pthread_join(c->thr, NULL);
    }
    pthread_mutex_lock(&c->lock);
    /* let notifications still going out finish (bounded) */
    for (int i = 0; c->out && i < 200; i++) {
        gw_context_wait(c->ctx, 5);
        pass(c);
    }
    for (size_t i = 0; i < c->agents.n; i++)
        close_agent_ep(c, c->agents.v[i]);
    gwnx_agent_map_clear(&c->agents);
    for (size_t i = 0; i < c->nin; i++) {
        gw_ep_close(c->in[i].ep, 0);
        gwnx_pairing_clear(&c->in[i].pair);
    }
    free(c->in);
    gwnx_pending_t *e = c->ready_head;
    while (e) {
        gwnx_pending_t *n = e->next;
        gwnx_pending_free(e);
        e = n;
    }
    while (c->out) {
        outmsg_t *m = c->out;
        c->out = m->next;
        gw_request_free(m->req);
        free(m->buf);
        free(m);
    }
    gw_listener_destroy(c->lis);
    gw_status_t st = gw_context_destroy(c->ctx);
    if (st != GW_OK)
        fail_gw(NULL, st, "gw_context_destroy (a registration or transfer was not released)");
    pthread_mutex_unlock(&c->lock);
    pthread_mutex_destroy(&c->lock);
    if (c->wakefd >= 0)
        close(c->wakefd);
    free(c->agent);
    free(c);
}

int gwnx_conn_info(gwnx_core_t *c, char *buf, size_t len)
{
    if ((size_t)snprintf(buf, len, "%s", c->conn) >= len)
        return fail(GWNX_ERR_INVALID_PARAM, "connection info buffer too small");
    return GWNX_SUCCESS;
}

/* ---- peers --------------------------------------------------------------------- */
int gwnx_peer_set(gwnx_core_t *c, const char *agent, const char *conn_info)
{
    if (strncmp(conn_info, CONN_PREFIX, strlen(CONN_PREFIX)) != 0)
        return fail(GWNX_ERR_MISMATCH, "connection info of agent '%s' is not a GPUWIRE backend's: '%.64s'",
                    agent, conn_info);
    pthread_mutex_lock(&c->lock);
    int rc = GWNX_SUCCESS;
    gwnx_agent_t *a = gwnx_agent_get(&c->agents, agent);
    char *ci = strdup(conn_info + strlen(CONN_PREFIX));
    if (!a || !ci) {
        free(ci);
        rc = fail(GWNX_ERR_BACKEND, "out of memory");
    } else {
        free(a->conn_info);
        a->conn_info = ci;
    }
    pthread_mutex_unlock(&c->lock);
    return rc;
}

/* the lock is held */
static int connect_locked(gwnx_core_t *c, gwnx_agent_t *a)
{
    if (a->ep) {
        gw_ep_info_t ei = {.size = sizeof(ei)};
        gw_ep_query(a->ep, &ei);
        a->closing = 0;
        if (ei.error == GW_OK)
            return GWNX_SUCCESS;
        if (a->refs)
            return fail(GWNX_ERR_REMOTE_DISCONNECT,
                        "endpoint to agent '%s' failed (%s: %s); unload its metadata to reconnect",
                        a->name, gw_status_name(ei.error), ei.error_detail);
        close_agent_ep(c, a);
    }
    if (!a->conn_info)
        return fail(GWNX_ERR_NOT_FOUND, "no connection info loaded for agent '%s'", a->name);
    char cands[512];
    snprintf(cands, sizeof(cands), "%s", a->conn_info);
    gw_status_t st = GW_ERR_ADDRESS;
    char why[768] = "";
    char *save = NULL;
    for (char *t = strtok_r(cands, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        st = gw_connect(c->ctx, t, &a->ep);
        if (st == GW_OK) {
            a->next_seq = 0;
            return GWNX_SUCCESS;
        }
        size_t l = strlen(why);
        snprintf(why + l, sizeof(why) - l, "%s%s: %s", l ? "; " : "", t, gw_last_error(c->ctx));
    }
    return fail(gwnx_status_from_gw(st), "cannot connect to agent '%s': %s", a->name, why);
}

int gwnx_peer_connect(gwnx_core_t *c, const char *agent)
{
    pthread_mutex_lock(&c->lock);
    gwnx_agent_t *a = gwnx_agent_find(&c->agents, agent);
    int rc = a ? connect_locked(c, a) : fail(GWNX_ERR_NOT_FOUND, "unknown agent '%s'", agent);
    pthread_mutex_unlock(&c->lock);
    return rc;
}

static void maybe_close(gwnx_core_t *c, gwnx_agent_t *a)
{
    if (a->closing && a->refs == 0)
        close_agent_ep(c, a);
}

int gwnx_peer_disconnect(gwnx_core_t *c, const char *agent)
{
    pthread_mutex_lock(&c->lock);
    gwnx_agent_t *a = gwnx_agent_find(&c->agents, agent);
    if (a && a->ep) {
        a->closing = 1;
        maybe_close(c, a);
    }
    pthread_mutex_unlock(&c->lock);
    return GWNX_SUCCESS;
}

int gwnx_peer_transport(gwnx_core_t *c, const char *agent, char *buf, size_t len)
{
    pthread_mutex_lock(&c->lock);
    gwnx_agent_t *a = gwnx_agent_find(&c->agents, agent);
    int rc = GWNX_ERR_NOT_FOUND;
    if (a && a->ep) {
        gw_ep_info_t ei = {.size = sizeof(ei)};
        gw_ep_query(a->ep, &ei);
        snprintf(buf, len, "%s", ei.transport);
        rc = GWNX_SUCCESS;
    }
    pthread_mutex_unlock(&c->lock);
    return rc;
}

/* ---- registrations ------------------------------------------------------------ */
int gwnx_mem_reg(gwnx_core_t *c, void *addr, size_t len, gwnx_region_t **out)
{
    gwnx_region_t *r = calloc(1, sizeof(*r));
    if (!r)
        return fail(GWNX_ERR_BACKEND, "out of memory");
    r->core = c;
    r->base = (uint64_t)(uintptr_t)addr;
    r->size = len;
    pthread_mutex_lock(&c->lock);
    int rc = GWNX_SUCCESS;
    gw_status_t st = gw_mem_reg(c->ctx, addr, len, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, &r->mem);
    if (st != GW_OK) {
        rc = fail_gw(c, st, "gw_mem_reg");
    } else if ((st = gw_mem_pack_rkey(r->mem, NULL, &r->rkey_len)) != GW_OK && st != GW_ERR_INVALID) {
        rc = fail_gw(c, st, "gw_mem_pack_rkey");
    } else if (!(r->rkey = malloc(r->rkey_len))) {
        rc = fail(GWNX_ERR_BACKEND, "out of memory");
    } else if ((st = gw_mem_pack_rkey(r->mem, r->rkey, &r->rkey_len)) != GW_OK) {
        rc = fail_gw(c, st, "gw_mem_pack_rkey");
    }
    if (rc != GWNX_SUCCESS) {
        gw_mem_dereg(r->mem);
        free(r->rkey);
        free(r);
    } else {
        *out = r;
    }
    pthread_mutex_unlock(&c->lock);
    return rc;
}

int gwnx_mem_dereg(gwnx_region_t *r)
{
    if (!r)
        return GWNX_SUCCESS;
    gwnx_core_t *c = r->core;
    pthread_mutex_lock(&c->lock);
    gw_status_t st = gw_mem_dereg(r->mem);
    int rc = st == GW_OK ? GWNX_SUCCESS : fail_gw(c, st, "gw_mem_dereg (a prepared transfer still uses it)");
    pthread_mutex_unlock(&c->lock);
    if (rc == GWNX_SUCCESS) {
        free(r->rkey);
        free(r);
    }
    return rc;
}

int gwnx_mem_public(gwnx_region_t *r, void *buf, size_t *len)
{
    if (!buf || *len < r->rkey_len) {
        *len = r->rkey_len;
        return GWNX_ERR_INVALID_PARAM;
    }
    memcpy(buf, r->rkey, r->rkey_len);
    *len = r->rkey_len;
    return GWNX_SUCCESS;
}

void gwnx_mem_range(const gwnx_region_t *r, uint64_t *base, size_t *size)
{
    *base = r->base;
    *size = r->size;
}

int gwnx_remote_load(gwnx_core_t *c, const char *agent, const void *blob, size_t len,
                     gwnx_rregion_t **out)
{
    gwnx_rregion_t *r = calloc(1, sizeof(*r));
    if (!r)
        return fail(GWNX_ERR_BACKEND, "out of memory");
    pthread_mutex_lock(&c->lock);
    int rc;
    gwnx_agent_t *a = gwnx_agent_find(&c->agents, agent);
    if (!a) {
        rc = fail(GWNX_ERR_NOT_FOUND, "metadata of agent '%s' loaded before its connection info", agent);
    } else if ((rc = connect_locked(c, a)) == GWNX_SUCCESS) {
        gw_status_t st = gw_rkey_unpack(a->ep, blob, len, &r->rkey);
        if (st != GW_OK) {
            rc = fail_gw(c, st, "gw_rkey_unpack (metadata from another backend or a stale agent?)");
        } else {
            gw_rkey_range(r->rkey, &r->base, &r->size);
            r->core = c;
            r->agent = a;
            a->refs++;
        }
    }
    pthread_mutex_unlock(&c->lock);
    if (rc == GWNX_SUCCESS)
        *out = r;
    else
        free(r);
    return rc;
}

void gwnx_remote_range(const gwnx_rregion_t *r, uint64_t *base, size_t *size)
{
    *base = r->base;
    *size = r->size;
}

int gwnx_remote_unload(gwnx_rregion_t *r)
{
    if (!r)
        return GWNX_SUCCESS;
    gwnx_core_t *c = r->core;
    pthread_mutex_lock(&c->lock);
    gw_rkey_destroy(r->rkey);
    r->agent->refs--;
    maybe_close(c, r->agent);
    pthread_mutex_unlock(&c->lock);
    free(r);
    return GWNX_SUCCESS;
}

/* ---- transfers ------------------------------------------------------------------ */
int gwnx_xfer_prep(gwnx_core_t *c, const char *agent, int op, const gwnx_desc_t *local,
                   const gwnx_desc_t *remote, size_t n, gwnx_xfer_t **out)
{
    if (op != GWNX_WRITE && op != GWNX_READ)
        return fail(GWNX_ERR_INVALID_PARAM, "unknown transfer operation %d", op);
    gwnx_xfer_t *x = calloc(1, sizeof(*x));
    gwnx_span_t *ls = calloc(n ? n : 1, sizeof(*ls)), *rs = calloc(n ? n : 1, sizeof(*rs));
    uint64_t *lo = calloc(n ? n : 1, sizeof(*lo)), *ro = calloc(n ? n : 1, sizeof(*ro));
    gw_local_desc_t *ld = calloc(n ? n : 1, sizeof(*ld));
    gw_remote_desc_t *rd = calloc(n ? n : 1, sizeof(*rd));
    int rc = GWNX_SUCCESS;
    pthread_mutex_lock(&c->lock);
    gwnx_agent_t *a = gwnx_agent_find(&c->agents, agent);
    if (!x || !ls || !rs || !lo || !ro || !ld || !rd) {
        rc = fail(GWNX_ERR_BACKEND, "out of memory");
        goto out;
    }
    if (!a) {
        rc = fail(GWNX_ERR_NOT_FOUND, "transfer to agent '%s', whose connection info is not loaded", agent);
        goto out;
    }
    if ((rc = connect_locked(c, a)) != GWNX_SUCCESS)
        goto out;
    for (size_t i = 0; i < n; i++) {
        const gwnx_region_t *lr = local[i].md;
        const gwnx_rregion_t *rr = remote[i].md;
        if (!lr || !rr) {
            rc = fail(GWNX_ERR_INVALID_PARAM, "descriptor %zu has no %s metadata", i, lr ? "remote" : "local");
            goto out;
        }
        if (rr->agent != a) {
            rc = fail(GWNX_ERR_INVALID_PARAM, "descriptor %zu: remote metadata of agent '%s', transfer to '%s'",
                      i, rr->agent->name, agent);
            goto out;
        }
        ls[i] = (gwnx_span_t){local[i].addr, local[i].len, lr->base, lr->size};
        rs[i] = (gwnx_span_t){remote[i].addr, remote[i].len, rr->base, rr->size};
    }
    if (gwnx_translate(ls, rs, n, lo, ro, tls_err, sizeof(tls_err)) != 0) {
        log_err();
        rc = GWNX_ERR_INVALID_PARAM;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        ld[i] = (gw_local_desc_t){((const gwnx_region_t *)local[i].md)->mem, (size_t)lo[i], local[i].len};
        rd[i] = (gw_remote_desc_t){((const gwnx_rregion_t *)remote[i].md)->rkey, ro[i], remote[i].len};
    }
    gw_status_t st = gw_dlist_local(c->ctx, ld, n, &x->ldl);
    if (st == GW_OK)
        st = gw_dlist_remote(a->ep, rd, n, op == GWNX_WRITE ? GW_ACCESS_REMOTE_WRITE : GW_ACCESS_REMOTE_READ,
                             &x->rdl);
    if (st != GW_OK) {
        rc = fail_gw(c, st, "preparing the descriptor lists");
        gw_dlist_destroy(x->ldl);
        goto out;
    }
    x->core = c;
    x->agent = a;
    x->op = op;
    x->n = n;
    for (size_t i = 0; i < n; i++)
        x->bytes += local[i].len;
    a->refs++;
out:
    pthread_mutex_unlock(&c->lock);
    free(ls);
    free(rs);
    free(lo);
    free(ro);
    free(ld);
    free(rd);
    if (rc == GWNX_SUCCESS)
        *out = x;
    else
        free(x);
    return rc;
}

/* sends a notification frame on a's endpoint with seq; the lock is held */
static int send_frame(gwnx_core_t *c, gwnx_agent_t *a, uint64_t seq, const void *msg, size_t len)
{
    size_t nl = strlen(c->agent);
    size_t sz = gwnx_frame_size(nl, len);
    outmsg_t *m = calloc(1, sizeof(*m));
    void *buf = malloc(sz);
    if (!m || !buf || gwnx_frame_encode(buf, sz, seq, c->agent, nl, msg, len) != sz) {
        free(m);
        free(buf);
        return fail(GWNX_ERR_INVALID_PARAM, "cannot frame a notification of %zu bytes (limit %u)", len,
                    GWNX_MAX_MSG);
    }
    gw_status_t st = gw_send(a->ep, buf, sz, NULL, GWNX_FRAME_TAG, &m->req);
    if (st != GW_OK) {
        free(m);
        free(buf);
        return fail_gw(c, st, "sending a notification");
    }
    m->buf = buf;
    m->next = c->out;
    c->out = m;
    return GWNX_SUCCESS;
}

/* a notification without data, after every put posted to a; the lock is held */
static int notify_locked(gwnx_core_t *c, gwnx_agent_t *a, const void *msg, size_t len)
{
    gw_status_t st = GW_OK;
    if (!a->empty_local)
        st = gw_dlist_local(c->ctx, NULL, 0, &a->empty_local);
    if (st == GW_OK && !a->empty_remote)
        st = gw_dlist_remote(a->ep, NULL, 0, GW_ACCESS_REMOTE_WRITE, &a->empty_remote);
    if (st != GW_OK)
        return fail_gw(c, st, "preparing a notification");
    uint64_t seq = a->next_seq + 1;
    gw_xfer_opts_t o = {.size = sizeof(o), .notify = GW_NOTIFY_ORDERED, .value = seq};
    /* tracked, like the frame: reaped by the progress pass, failures logged */
    outmsg_t *m = calloc(1, sizeof(*m));
    if (!m)
        return fail(GWNX_ERR_BACKEND, "out of memory");
    st = gw_xfer_batch(a->ep, GW_XFER_PUT, a->empty_local, NULL, a->empty_remote, NULL, 0, &o, &m->req);
    if (st != GW_OK) {
        free(m);
        return fail_gw(c, st, "posting a notification");
    }
    m->next = c->out;
    c->out = m;
    a->next_seq = seq;
    return send_frame(c, a, seq, msg, len);
}

int gwnx_xfer_post(gwnx_xfer_t *x, int has_notif, const void *msg, size_t msg_len)
{
    gwnx_core_t *c = x->core;
    gwnx_agent_t *a = x->agent;
    int rc = GWNX_IN_PROG;
    pthread_mutex_lock(&c->lock);
    if (x->req && gw_request_test(x->req) == GW_INPROGRESS) {
        rc = fail(GWNX_ERR_REPOST_ACTIVE, "transfer posted again while in progress");
        goto out;
    }
    if (!a->ep) {
        rc = fail(GWNX_ERR_REMOTE_DISCONNECT, "agent '%s' was disconnected", a->name);
        goto out;
    }
    gw_request_free(x->req);
    x->req = NULL;
    free(x->notif);
    x->notif = NULL;
    x->notif_pending = 0;
    gw_status_t st;
    if (x->op == GWNX_WRITE) {
        gw_xfer_opts_t o = {.size = sizeof(o), .notify = GW_NOTIFY_NONE};
        uint64_t seq = a->next_seq + 1;
        if (has_notif) {
            o.notify = GW_NOTIFY_ORDERED;
            o.value = seq;
        }
        st = gw_xfer_batch(a->ep, GW_XFER_PUT, x->ldl, NULL, x->rdl, NULL, x->n, &o, &x->req);
        if (st != GW_OK) {
            rc = fail_gw(c, st, "posting a WRITE");
            goto out;
        }
        if (has_notif) {
            a->next_seq = seq;
            int r2 = send_frame(c, a, seq, msg, msg_len);
            if (r2 != GWNX_SUCCESS)
                rc = r2;
        }
    } else {
        st = gw_xfer_batch(a->ep, GW_XFER_GET, x->ldl, NULL, x->rdl, NULL, x->n, NULL, &x->req);
        if (st != GW_OK) {
            rc = fail_gw(c, st, "posting a READ");
            goto out;
        }
        if (has_notif) {
            x->notif = malloc(msg_len ? msg_len : 1);
            if (!x->notif) {
                rc = fail(GWNX_ERR_BACKEND, "out of memory");
                goto out;
            }
            memcpy(x->notif, msg, msg_len);
            x->notif_len = msg_len;
            x->notif_pending = 1;
        }
    }
    x->posted = 1;
    x->counted = 0;
    x->posted_ns = now_ns();
    gw_progress(c->ctx);
out:
    pthread_mutex_unlock(&c->lock);
    return rc;
}

/* a completed post into the stats, once; logged with GPUWIRE_NIXL_XFER_LOG=on.
 * The lock is held. */
static void count_done(gwnx_core_t *c, gwnx_xfer_t *x)
{
    x->counted = 1;
    int w = x->op == GWNX_WRITE;
    if (w) {
        c->stats.writes++;
        c->stats.write_bytes += x->bytes;
    } else {
        c->stats.reads++;
        c->stats.read_bytes += x->bytes;
    }
    if (!c->xfer_log)
        return;
    gw_ep_info_t ei = {.size = sizeof(ei)};
    if (!x->agent->ep || gw_ep_query(x->agent->ep, &ei) != GW_OK)
        snprintf(ei.transport, sizeof(ei.transport), "?");
    fprintf(stderr,
            "gpuwire NIXL backend: agent '%s': %s %s '%s' done: %zu descriptors, %llu bytes over %s, "
            "%.1f us from post to seen complete (totals: %llu READs, %llu bytes; %llu WRITEs, %llu bytes)\n",
            c->agent, w ? "WRITE" : "READ", w ? "to" : "from", x->agent->name, x->n,
            (unsigned long long)x->bytes, ei.transport, (double)(now_ns() - x->posted_ns) / 1e3,
            (unsigned long long)c->stats.reads,
            (unsigned long long)c->stats.read_bytes, (unsigned long long)c->stats.writes,
            (unsigned long long)c->stats.write_bytes);
}

void gwnx_core_stats(gwnx_core_t *c, gwnx_stats_t *out)
{
    pthread_mutex_lock(&c->lock);
    *out = c->stats;
    pthread_mutex_unlock(&c->lock);
}

int gwnx_xfer_check(gwnx_xfer_t *x)
{
    gwnx_core_t *c = x->core;
    if (!x->posted)
        return fail(GWNX_ERR_NOT_POSTED, "transfer checked before it was posted");
    atomic_store(&c->polled_ns, now_ns());
    pthread_mutex_lock(&c->lock);
    gw_status_t st = gw_request_test(x->req);
    if (st == GW_INPROGRESS) {
        if (++c->checks % FULL_PASS_EVERY == 0)
            pass(c);
        else
            gw_progress(c->ctx);
        st = gw_request_test(x->req);
    }
    int rc;
    if (st == GW_INPROGRESS) {
        rc = GWNX_IN_PROG;
    } else if (st == GW_OK) {
        rc = GWNX_SUCCESS;
        if (!x->counted)
            count_done(c, x);
        if (x->notif_pending) {
            x->notif_pending = 0;
            rc = x->agent->ep ? notify_locked(c, x->agent, x->notif, x->notif_len)
                              : fail(GWNX_ERR_REMOTE_DISCONNECT, "agent '%s' was disconnected", x->agent->name);
        }
    } else {
        gw_request_info_t ri = {.size = sizeof(ri)};
        gw_request_info(x->req, &ri);
        x->notif_pending = 0;
        rc = fail(gwnx_status_from_gw(st), "%s to agent '%s' failed: %s: %s",
                  x->op == GWNX_WRITE ? "WRITE" : "READ", x->agent->name, gw_status_name(st), ri.error_detail);
    }
    pthread_mutex_unlock(&c->lock);
    return rc;
}

int gwnx_xfer_release(gwnx_xfer_t *x)
{
    if (!x)
        return GWNX_SUCCESS;
    gwnx_core_t *c = x->core;
    pthread_mutex_lock(&c->lock);
    if (x->req && gw_request_test(x->req) == GW_INPROGRESS &&
        gw_request_wait(x->req, DRAIN_MS) == GW_ERR_TIMEOUT)
        fail(GWNX_ERR_BACKEND, "a released transfer to '%s' is still moving after %d ms", x->agent->name,
             DRAIN_MS);
    gw_request_free(x->req);
    gw_status_t s1 = gw_dlist_destroy(x->ldl), s2 = gw_dlist_destroy(x->rdl);
    if (s1 != GW_OK || s2 != GW_OK)
        fail_gw(c, s1 != GW_OK ? s1 : s2, "releasing the descriptor lists");
    x->agent->refs--;
    maybe_close(c, x->agent);
    pthread_mutex_unlock(&c->lock);
    free(x->notif);
    free(x);
    return GWNX_SUCCESS;
}

/* ---- notifications ---------------------------------------------------------------- */
int gwnx_notif_gen(gwnx_core_t *c, const char *agent, const void *msg, size_t len)
{
    pthread_mutex_lock(&c->lock);
    gwnx_agent_t *a = gwnx_agent_find(&c->agents, agent);
    int rc;
    if (!a)
        rc = fail(GWNX_ERR_NOT_FOUND, "notification to agent '%s', whose connection info is not loaded", agent);
    else if ((rc = connect_locked(c, a)) == GWNX_SUCCESS)
        rc = notify_locked(c, a, msg, len);
    if (rc == GWNX_SUCCESS)
        gw_progress(c->ctx);
    pthread_mutex_unlock(&c->lock);
    return rc;
}

size_t gwnx_notifs_take(gwnx_core_t *c, gwnx_notif_cb cb, void *arg)
{
    pthread_mutex_lock(&c->lock);
    /* also with a progress thread: it stands aside while transfers are polled */
    pass(c);
    gwnx_pending_t *e = c->ready_head;
    c->ready_head = c->ready_tail = NULL;
    pthread_mutex_unlock(&c->lock);
    size_t n = 0;
    while (e) {
        gwnx_pending_t *next = e->next;
        cb(arg, e->name, e->name_len, e->msg, e->msg_len);
        gwnx_pending_free(e);
        e = next;
        n++;
    }
    return n;
}
