/* SPDX-License-Identifier: Apache-2.0 */
/* names.c - agents, published regions, peers by name, the etcd directory.
 *
 * A context becomes an agent with gw_agent_listen(); gw_mem_publish() puts a
 * region's packed key into the agent's table (bootstrap/names_wire.h).  The
 * table travels to every peer in the handshake's READY (handshake.c calls
 * gw_names_fill_ready / gw_names_take_table), with an HMAC over it when
 * authentication is on, and again in a table-only handshake when a peer
 * misses a name (fetch_table below).  Keys therefore only ever come from the
 * agent itself, through an authenticated exchange: the directory holds
 * addresses and descriptions, never keys.
 *
 * Peers are found through gw_peer_add()/GPUWIRE_PEERS (no server at all) or
 * the directory (GPUWIRE_DIRECTORY=etcd://...).  With a directory, one
 * thread per context keeps the agent's lease alive (every TTL/3) and follows
 * a watch of PREFIX/agents/ into a cache, so lookups cost no round trip and
 * a peer that leaves or comes back is noticed.  The thread touches only the
 * cache (under mu) and its own sockets; everything else runs on the caller's
 * thread like the rest of the context.
 *
 * Epochs: an agent's epoch is the etcd revision of its registration (with a
 * directory) or its start time in ns (without); a restarted agent also has a
 * new context uuid, and that uuid is what proves a restart.  Endpoints to an
 * agent that restarted are retired (kept until the context goes, so that a
 * pointer the caller still holds stays valid) and carry newer_epoch, which
 * makes operations with their keys fail with GW_ERR_INVALID_KEY.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "api/auth.h"
#include "bootstrap/names_wire.h"
#include "core/sock.h"
#include "directory/etcd.h"
#include "directory/json.h"

typedef struct pub {
    char name[GW_NAME_MAX + 1];
    gw_mem_t *mem;
    uint8_t *key; /* packed when published */
    size_t key_len;
} pub_t;

/* Bytes an entry takes in the table. */
#define PUB_BYTES(p) (3 + strlen((p)->name) + (p)->key_len)

typedef struct dir_agent { /* directory cache entry: the watch thread writes, under mu */
    char name[GW_NAME_MAX + 1];
    char addr[80];
    uint64_t uuid;
    int64_t epoch;
    int listed;
    unsigned changes;
    int used; /* looked up by this context: its changes make events */
} dir_agent_t;

#define EVQ_CAP 1024 /* queued peer events; past that the oldest go */

typedef struct peer {
    char name[GW_NAME_MAX + 1];
    char addr[80]; /* static address, "" when the directory says */
    gw_ep_t *ep;
    uint64_t uuid, epoch;
    unsigned restarts;
    struct peer *next;
} peer_t;

typedef struct kv_reg { /* what this agent registered: re-put after a lost lease */
    char key[GW_ETCD_KEY_MAX];
    char val[512];
} kv_reg_t;

struct gw_names {
    gw_context_t *ctx;
    char name[GW_NAME_MAX + 1]; /* agent name, "" when not an agent */
    gw_listener_t *listener;
    char addr[80];              /* advertised listen address */
    uint64_t epoch;
    pub_t *pubs;
    size_t npubs, pubcap;
    size_t pub_bytes;       /* sum of the entries' sizes: the limit check is O(1) */
    uint8_t *table;         /* built once per change (sorted by name) */
    size_t table_len, table_cap;
    uint64_t table_serial;  /* grows with each build: pieces of two builds never mix */
    int table_dirty;
    peer_t *peers;
    gw_ep_t **retired;
    size_t nretired, retcap;
    int closing;
    /* directory */
    int have_dir;
    gw_etcd_t etcd;
    char prefix[128];
    long ttl_s;
    pthread_t thr;
    int thr_on;
    pthread_mutex_t mu; /* guards everything below */
    pthread_cond_t cv;
    int stop;
    int64_t lease;
    int name_lost;      /* our lease ran out and another agent registered the name meanwhile */
    kv_reg_t *kvs;
    size_t nkvs, kvcap;
    dir_agent_t *agents;
    size_t nagents, agcap;
    int synced; /* 1 after the first listing, -1 while the directory does not answer */
    int watch_fd;
    char dir_err[256];
    int synced_once;       /* the first listing is in: later new agents are news */
    /* peer events (gw_peer_watch): the thread queues them under mu and
     * writes ev_fd; the caller's thread delivers them from progress */
    int ev_on;             /* under mu */
    unsigned ev_flags;     /* under mu */
    gw_peer_event_t *evq;  /* EVQ_CAP, a ring: under mu */
    size_t ev_head, ev_count;
    unsigned ev_dropped;
    int ev_fd;             /* eventfd in the context's epoll set; written under mu */
    gw_io_t ev_io;
    void (*ev_cb)(void *, const gw_peer_event_t *);
    void *ev_arg;
    int ev_delivering;
};
typedef struct gw_names names_t;

/* ---- set-up ------------------------------------------------------------------------ */
static gw_status_t add_static_peer(names_t *n, const char *name, const char *addr);

static gw_status_t names_get(gw_context_t *ctx, names_t **out)
{
    if (ctx->names) {
        *out = ctx->names;
        return GW_OK;
    }
    gw_core_t *core = &ctx->core;
    names_t *n = calloc(1, sizeof(*n));
    if (!n)
        return gw_err(core, GW_ERR_NOMEM, "names: out of memory");
    n->ctx = ctx;
    n->watch_fd = -1;
    n->ev_fd = -1;
    n->table_dirty = 1;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    n->epoch = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    pthread_mutex_init(&n->mu, NULL);
    pthread_cond_init(&n->cv, NULL);
    const char *dir = gw_settings_str(&core->settings, GW_SET_DIRECTORY);
    char why[256];
    gw_status_t st = GW_OK;
    if (dir[0]) {
        long to = ctx->connect_timeout_ms < 5000 ? ctx->connect_timeout_ms : 5000;
        if ((st = gw_etcd_init(&n->etcd, dir, (int)to, why, sizeof(why))) != GW_OK) {
            st = gw_err(core, GW_ERR_CONFIG, "GPUWIRE_DIRECTORY=%s: %s", dir, why);
            goto fail;
        }
        n->have_dir = 1;
        snprintf(n->prefix, sizeof(n->prefix), "%s", gw_settings_str(&core->settings, GW_SET_DIRECTORY_PREFIX));
        if (!n->prefix[0] || strlen(n->prefix) > 100) {
            st = gw_err(core, GW_ERR_CONFIG, "GPUWIRE_DIRECTORY_PREFIX=\"%s\": 1..100 characters expected", n->prefix);
            goto fail;
        }
        if ((st = gw_settings_int(&core->settings, GW_SET_DIRECTORY_TTL, &n->ttl_s, why, sizeof(why))) !=
            GW_OK) {
            st = gw_err(core, GW_ERR_CONFIG, "%s", why);
            goto fail;
        }
    }
    /* GPUWIRE_PEERS=a=host:port,b=host:port */
    const char *peers = gw_settings_str(&core->settings, GW_SET_PEERS);
    char buf[1024];
    snprintf(buf, sizeof(buf), "%s", peers);
    for (char *save = NULL, *tok = strtok_r(buf, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq || !eq[1]) {
            st = gw_err(core, GW_ERR_CONFIG, "GPUWIRE_PEERS=\"%s\": \"%s\" is not NAME=HOST:PORT", peers, tok);
            goto fail;
        }
        *eq = '\0';
        if ((st = add_static_peer(n, tok, eq + 1)) != GW_OK) {
            st = gw_err(core, GW_ERR_CONFIG, "GPUWIRE_PEERS=\"%s\": %s", peers, core->errbuf);
            goto fail;
        }
    }
    ctx->names = n;
    *out = n;
    return GW_OK;
fail:
    while (n->peers) {
        peer_t *p = n->peers;
        n->peers = p->next;
        free(p);
    }
    pthread_mutex_destroy(&n->mu);
    pthread_cond_destroy(&n->cv);
    free(n);
    return st;
}

static const char *dir_name(const names_t *n)
{
    return n->have_dir ? n->etcd.url : "none";
}

static peer_t *find_peer(names_t *n, const char *name)
{
    for (peer_t *p = n->peers; p; p = p->next)
        if (!strcmp(p->name, name))
            return p;
    return NULL;
}

static peer_t *new_peer(names_t *n, const char *name)
{
    peer_t *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    snprintf(p->name, sizeof(p->name), "%s", name);
    p->next = n->peers;
    n->peers = p;
    return p;
}

static gw_status_t add_static_peer(names_t *n, const char *name, const char *addr)
{
    gw_core_t *core = &n->ctx->core;
    if (!gw_name_valid(name))
        return gw_err(core, GW_ERR_INVALID, "agent name \"%s\" is not 1..%d of [A-Za-z0-9._:@+-]", name, GW_NAME_MAX);
    if (!addr || !addr[0] || strlen(addr) >= sizeof(((peer_t *)0)->addr))
        return gw_err(core, GW_ERR_INVALID, "agent \"%s\": bad address \"%s\"", name, addr ? addr : "(null)");
    peer_t *p = find_peer(n, name);
    if (!p && !(p = new_peer(n, name)))
        return gw_err(core, GW_ERR_NOMEM, "names: out of memory");
    snprintf(p->addr, sizeof(p->addr), "%s", addr);
    return GW_OK;
}

/* ---- the table ------------------------------------------------------------------------ */
static int pub_cmp(const void *a, const void *b)
{
    return strcmp((*(const pub_t *const *)a)->name, (*(const pub_t *const *)b)->name);
}

static gw_status_t build_table(names_t *n)
{
    if (!n->table_dirty)
        return GW_OK;
    size_t need = GW_NT_FIXED_LEN + strlen(n->name) + n->pub_bytes;
    if (need > GW_NT_MAX_LEN)
        return GW_ERR_NO_RESOURCE;
    if (need > n->table_cap) {
        uint8_t *t = realloc(n->table, need);
        if (!t)
            return GW_ERR_NOMEM;
        n->table = t;
        n->table_cap = need;
    }
    pub_t **idx = n->npubs ? malloc(n->npubs * sizeof(*idx)) : NULL;
    if (n->npubs && !idx)
        return GW_ERR_NOMEM;
    for (size_t i = 0; i < n->npubs; i++)
        idx[i] = &n->pubs[i];
    if (n->npubs)
        qsort(idx, n->npubs, sizeof(*idx), pub_cmp); /* the format wants names in order */
    gw_nt_enc_t e;
    gw_nt_begin(&e, n->table, n->table_cap, n->ctx->core.uuid, n->epoch, n->name);
    for (size_t i = 0; i < n->npubs; i++)
        gw_nt_add(&e, idx[i]->name, idx[i]->key, idx[i]->key_len);
    free(idx);
    size_t len = gw_nt_finish(&e);
    if (!len)
        return GW_ERR_NO_RESOURCE;
    n->table_len = len;
    n->table_serial++;
    n->table_dirty = 0;
    return GW_OK;
}

void gw_names_fill_ready(gw_context_t *ctx, gw_hs_msg_t *m, uint8_t *buf, size_t cap, long piece_off,
                         const uint8_t *nonce_c, const uint8_t *nonce_s, uint64_t uuid_c)
{
    names_t *n = ctx->names;
    if (!n || (!n->name[0] && !n->npubs) || build_table(n) != GW_OK)
        return;
    size_t len;
    if (piece_off >= 0) { /* a table-only handshake asked for the bytes from piece_off */
        len = gw_np_encode(buf, cap, n->table, n->table_len, (size_t)piece_off, ctx->core.uuid, n->table_serial);
    } else if (n->table_len <= GW_NT_INLINE_MAX && n->table_len <= cap) {
        memcpy(buf, n->table, n->table_len);
        len = n->table_len;
    } else { /* too big for a READY: who we are, and that the entries come in pieces */
        len = gw_nt_stub(n->table, n->table_len, buf, cap);
    }
    if (!len || len > 0xffff)
        return;
    m->table = buf;
    m->table_len = (uint16_t)len;
    if (ctx->auth_enabled &&
        gw_auth_mac_data(ctx->auth_secret, ctx->auth_secret_len, "gpuwire-table", nonce_c, nonce_s, uuid_c,
                         ctx->core.uuid, buf, len, m->table_mac) == 0)
        m->has_table_mac = 1;
}

/* Checks the HMAC over what READY carried (a table or a piece) when
 * authentication is on. */
static gw_status_t check_table_mac(gw_context_t *ctx, const gw_hs_msg_t *m, const uint8_t *nonce_c,
                                   const uint8_t *nonce_s, uint64_t uuid_s, char *why, size_t whylen)
{
    if (ctx->auth_enabled) {
        uint8_t want[GW_AUTH_MAC_LEN];
        if (!m->has_table_mac ||
            gw_auth_mac_data(ctx->auth_secret, ctx->auth_secret_len, "gpuwire-table", nonce_c, nonce_s,
                             ctx->core.uuid, uuid_s, m->table, m->table_len, want) != 0 ||
            !gw_auth_equal(want, m->table_mac, GW_AUTH_MAC_LEN)) {
            snprintf(why, whylen, "the peer's names table fails authentication (its HMAC does not match the shared secret)");
            return GW_ERR_AUTH;
        }
    }
    return GW_OK;
}

/* Checks a received table (its HMAC with auth, its format, its owner). */
static gw_status_t check_table(gw_context_t *ctx, const gw_hs_msg_t *m, const uint8_t *nonce_c,
                               const uint8_t *nonce_s, uint64_t uuid_s, gw_nt_header_t *h, char *why, size_t whylen)
{
    gw_status_t st = check_table_mac(ctx, m, nonce_c, nonce_s, uuid_s, why, whylen);
    if (st != GW_OK)
        return st;
    char w[200];
    st = gw_nt_decode(m->table, m->table_len, h, w, sizeof(w));
    if (st != GW_OK) {
        snprintf(why, whylen, "bad names table from the peer: %s", w);
        return GW_ERR_PROTOCOL;
    }
    if (h->uuid != uuid_s) {
        snprintf(why, whylen, "the peer's names table belongs to context %016llx, not the peer (%016llx)",
                 (unsigned long long)h->uuid, (unsigned long long)uuid_s);
        return GW_ERR_PROTOCOL;
    }
    return GW_OK;
}

gw_status_t gw_names_take_table(gw_context_t *ctx, gw_ep_t *ep, const gw_hs_msg_t *m, const uint8_t *nonce_c,
                                const uint8_t *nonce_s, char *why, size_t whylen)
{
    if (!m->table_len)
        return GW_OK;
    gw_nt_header_t h;
    gw_status_t st = check_table(ctx, m, nonce_c, nonce_s, ep->peer_uuid, &h, why, whylen);
    if (st != GW_OK)
        return st;
    uint8_t *t = malloc(m->table_len);
    if (!t) {
        snprintf(why, whylen, "out of memory for the peer's names table");
        return GW_ERR_NOMEM;
    }
    memcpy(t, m->table, m->table_len);
    free(ep->peer_table);
    ep->peer_table = t;
    ep->peer_table_len = m->table_len;
    snprintf(ep->peer_name, sizeof(ep->peer_name), "%s", h.name);
    ep->peer_epoch = h.epoch;
    return GW_OK;
}

/* A table-only handshake with the agent at addr (blocking, bounded by the
 * connect timeout): the same proofs as a connection, no endpoint. */
static gw_status_t read_msg(int fd, uint8_t *buf, size_t cap, int to, gw_hs_msg_t *m, char *why, size_t whylen)
{
    uint16_t ver, type;
    uint32_t body;
    if (gw_sock_read_full(fd, buf, GW_HS_HDR_LEN, to) != 0) {
        snprintf(why, whylen, "no answer: %s", errno ? strerror(errno) : "connection closed");
        return errno == ETIMEDOUT ? GW_ERR_TIMEOUT : GW_ERR_CONN_RESET;
    }
    gw_status_t st = gw_hs_decode_header(buf, GW_HS_HDR_LEN, &ver, &type, &body, why, whylen);
    if (st != GW_OK)
        return st;
    if (GW_HS_HDR_LEN + body > cap || (body && gw_sock_read_full(fd, buf + GW_HS_HDR_LEN, body, to) != 0)) {
        snprintf(why, whylen, "truncated answer");
        return GW_ERR_CONN_RESET;
    }
    if ((st = gw_hs_decode(buf, GW_HS_HDR_LEN + body, m, why, whylen)) != GW_OK)
        return st;
    if (m->type == GW_HS_ERROR) {
        snprintf(why, whylen, "the agent refused: %.200s", m->text);
        return GW_IS_ENDPOINT_ERROR(m->status) ? (gw_status_t)m->status : GW_ERR_PROTOCOL;
    }
    return GW_OK;
}

/* One table-only handshake asking for the piece from `off`: returns a copy
 * of what READY carried (HMAC checked with auth) and who answered. */
static gw_status_t fetch_one(names_t *n, const char *addr, size_t off, uint8_t **out, size_t *len, uint64_t *uuid,
                             char *why, size_t whylen)
{
    gw_context_t *ctx = n->ctx;
    int to = (int)ctx->connect_timeout_ms;
    struct sockaddr_storage ss;
    socklen_t sl;
    gw_status_t st = gw_sock_resolve(addr, 0, &ss, &sl, why, whylen);
    if (st != GW_OK)
        return st;
    int fd = gw_sock_connect(&ss, sl, 0, to);
    if (fd < 0) {
        snprintf(why, whylen, "connect to %s failed: %s", addr, strerror(errno));
        return errno == ECONNREFUSED ? GW_ERR_CONN_REFUSED : GW_ERR_CONN_RESET;
    }
    static __thread uint8_t buf[GW_HS_HDR_LEN + GW_HS_MAX_BODY];
    gw_hs_msg_t m, a, r;
    uint8_t nonce_c[GW_HS_NONCE_LEN];
    memset(&m, 0, sizeof(m));
    m.type = GW_HS_HELLO;
    m.uuid = ctx->core.uuid;
    m.host_id = ctx->core.host_id;
    m.flags = GW_HS_FLAG_TABLE | (ctx->auth_enabled ? GW_HS_FLAG_AUTH : 0);
    gw_random_bytes(nonce_c, sizeof(nonce_c));
    memcpy(m.nonce, nonce_c, sizeof(nonce_c));
    m.has_nonce = 1;
    m.pref[0] = GW_TL_TCP; /* the format wants a list; unused in a table-only exchange */
    m.npref = 1;
    m.has_table_off = 1;
    m.table_off = (uint32_t)off;
    size_t k = gw_hs_encode(&m, buf, sizeof(buf));
    if (!k || gw_sock_write_full(fd, buf, k, to) != 0) {
        snprintf(why, whylen, "sending to %s failed: %s", addr, strerror(errno));
        st = GW_ERR_CONN_RESET;
        goto out;
    }
    if ((st = read_msg(fd, buf, sizeof(buf), to, &a, why, whylen)) != GW_OK)
        goto out;
    if (a.type != GW_HS_ACCEPT || a.chosen != GW_HS_NO_TL || !(a.flags & GW_HS_FLAG_TABLE)) {
        snprintf(why, whylen, "the peer at %s does not serve names tables (an older gpuwire?)", addr);
        st = GW_ERR_PROTOCOL;
        goto out;
    }
    uint8_t nonce_s[GW_HS_NONCE_LEN];
    uint64_t uuid_s = a.uuid;
    memcpy(nonce_s, a.nonce, sizeof(nonce_s));
    memset(&m, 0, sizeof(m));
    m.type = GW_HS_CONFIRM;
    if (ctx->auth_enabled) {
        uint8_t want[GW_AUTH_MAC_LEN];
        if (!a.has_mac ||
            gw_auth_mac(ctx->auth_secret, ctx->auth_secret_len, "gpuwire-server", nonce_c, nonce_s, ctx->core.uuid,
                        uuid_s, want) != 0 ||
            !gw_auth_equal(want, a.mac, GW_AUTH_MAC_LEN)) {
            snprintf(why, whylen, "the agent at %s failed authentication: its proof does not match the shared secret",
                     addr);
            st = GW_ERR_AUTH;
            goto out;
        }
        gw_auth_mac(ctx->auth_secret, ctx->auth_secret_len, "gpuwire-client", nonce_s, nonce_c, ctx->core.uuid, uuid_s,
                    m.mac);
        m.has_mac = 1;
    }
    k = gw_hs_encode(&m, buf, sizeof(buf));
    if (!k || gw_sock_write_full(fd, buf, k, to) != 0) {
        snprintf(why, whylen, "sending to %s failed: %s", addr, strerror(errno));
        st = GW_ERR_CONN_RESET;
        goto out;
    }
    if ((st = read_msg(fd, buf, sizeof(buf), to, &r, why, whylen)) != GW_OK)
        goto out;
    if (r.type != GW_HS_READY || !r.table_len) {
        snprintf(why, whylen, "the peer at %s sent no names table (not an agent)", addr);
        st = GW_ERR_NOT_FOUND;
        goto out;
    }
    if ((st = check_table_mac(ctx, &r, nonce_c, nonce_s, uuid_s, why, whylen)) != GW_OK)
        goto out;
    if (!(*out = malloc(r.table_len))) {
        snprintf(why, whylen, "out of memory");
        st = GW_ERR_NOMEM;
        goto out;
    }
    memcpy(*out, r.table, r.table_len);
    *len = r.table_len;
    *uuid = uuid_s;
out:
    close(fd);
    return st;
}

/* The agent's whole table, piece by piece (one table-only handshake each,
 * so the agent never blocks on a slow reader: each answer is one message).
 * Pieces of another build of the table (the agent published meanwhile) or
 * of another context (it restarted) start the fetch over, three times at
 * most. */
static gw_status_t fetch_table(names_t *n, const char *addr, uint8_t **table, size_t *len, gw_nt_header_t *h,
                               char *why, size_t whylen)
{
    uint8_t *full = NULL, *p = NULL;
    size_t have = 0, flen = 0, pl = 0;
    uint64_t serial = 0, owner = 0, us = 0;
    int again = 0;
    gw_status_t st;
    char w[200];
    for (;;) {
        if ((st = fetch_one(n, addr, have, &p, &pl, &us, why, whylen)) != GW_OK)
            goto fail;
        if (pl >= 4 && gw_get_u32(p) == GW_NT_MAGIC && !have) { /* an agent that answers with the whole table */
            full = p;
            flen = pl;
            owner = us;
            p = NULL;
            break;
        }
        gw_np_header_t ph;
        if ((st = gw_np_decode(p, pl, &ph, w, sizeof(w))) != GW_OK || ph.uuid != us) {
            snprintf(why, whylen, "bad names table piece from %.60s: %.150s", addr,
                     st != GW_OK ? w : "it belongs to another context");
            st = GW_ERR_PROTOCOL;
            goto fail;
        }
        if (have && (ph.serial != serial || ph.uuid != owner || ph.full_len != flen)) {
            free(full); /* the table changed between pieces: start over */
            full = NULL;
            have = 0;
            if (++again > 3) {
                snprintf(why, whylen, "the agent's table at %s kept changing while it was fetched (%d tries)", addr,
                         again);
                st = GW_ERR_BUSY;
                goto fail;
            }
            free(p);
            p = NULL;
            continue;
        }
        if (!have) {
            flen = ph.full_len;
            serial = ph.serial;
            owner = ph.uuid;
            if (!(full = malloc(flen))) {
                snprintf(why, whylen, "out of memory for a names table of %zu bytes", flen);
                st = GW_ERR_NOMEM;
                goto fail;
            }
        }
        if (ph.off != have) {
            snprintf(why, whylen, "names table piece from %s starts at byte %u, %zu asked", addr, ph.off, have);
            st = GW_ERR_PROTOCOL;
            goto fail;
        }
        memcpy(full + have, ph.data, ph.data_len);
        have += ph.data_len;
        free(p);
        p = NULL;
        if (have == flen)
            break;
    }
    if ((st = gw_nt_decode(full, flen, h, w, sizeof(w))) != GW_OK || h->stub || h->uuid != owner) {
        const char *what = st != GW_OK ? w
                           : h->stub   ? "a stub where the whole table was asked"
                                       : "it belongs to another context";
        snprintf(why, whylen, "bad names table from %.60s: %.150s", addr, what);
        st = GW_ERR_PROTOCOL;
        goto fail;
    }
    *table = full;
    *len = flen;
    return GW_OK;
fail:
    free(p);
    free(full);
    return st;
}

/* ---- directory: registration, the thread, the cache ------------------------------------ */
static void agent_key(const names_t *n, const char *name, char *out, size_t cap)
{
    snprintf(out, cap, "%.100sagents/%s", n->prefix, name);
}

static void region_key(const names_t *n, const char *region, char *out, size_t cap)
{
    snprintf(out, cap, "%.100sregions/%s/%s", n->prefix, n->name, region);
}

/* Remembers key=val for a re-registration (replacing an earlier value of
 * the key); returns the lease held now, or -1 when out of memory.  Takes
 * n->mu. */
static int64_t kv_remember(names_t *n, const char *key, const char *val, char *why, size_t whylen)
{
    pthread_mutex_lock(&n->mu);
    int64_t lease = n->lease;
    size_t i;
    for (i = 0; i < n->nkvs && strcmp(n->kvs[i].key, key); i++)
        ;
    if (i == n->nkvs) {
        if (n->nkvs == n->kvcap) {
            size_t c = n->kvcap ? n->kvcap * 2 : 8;
            kv_reg_t *k = realloc(n->kvs, c * sizeof(*k));
            if (!k) {
                pthread_mutex_unlock(&n->mu);
                snprintf(why, whylen, "out of memory");
                return -1;
            }
            n->kvs = k;
            n->kvcap = c;
        }
        n->nkvs++;
    }
    snprintf(n->kvs[i].key, sizeof(n->kvs[i].key), "%s", key);
    snprintf(n->kvs[i].val, sizeof(n->kvs[i].val), "%s", val);
    pthread_mutex_unlock(&n->mu);
    return lease;
}

/* Puts key=val under the lease and remembers it for a re-registration. */
static gw_status_t reg_put(names_t *n, const char *key, const char *val, int64_t *rev, char *why, size_t whylen)
{
    int64_t lease = kv_remember(n, key, val, why, whylen);
    if (lease < 0)
        return GW_ERR_NOMEM;
    if (!lease) /* not registered now (the name is held by another agent): put when registered again */
        return GW_OK;
    return gw_etcd_put(&n->etcd, key, val, strlen(val), lease, rev, why, whylen);
}

/* Describes who holds an agent key (the kv etcd returned): address, pid,
 * host, context, and how long its lease has left. */
static void holder_text(names_t *n, const gw_etcd_kv_t *kv, char *out, size_t cap)
{
    gw_json_t root, v;
    size_t used;
    char addr[80] = "?", host[128] = "?", uu[32] = "?";
    int64_t pid = 0, ttl = -1;
    if (kv->value_len && gw_json_value(kv->value, kv->value_len, &root, &used) == 1) {
        if (gw_json_get(root, "addr", &v))
            gw_json_string(v, addr, sizeof(addr));
        if (gw_json_get(root, "host", &v))
            gw_json_string(v, host, sizeof(host));
        if (gw_json_get(root, "uuid", &v))
            gw_json_string(v, uu, sizeof(uu));
        if (gw_json_get(root, "pid", &v))
            gw_json_i64(v, &pid);
    }
    char why[256], lease[96];
    if (kv->lease && gw_etcd_lease_ttl(&n->etcd, kv->lease, &ttl, why, sizeof(why)) == GW_OK && ttl >= 0)
        snprintf(lease, sizeof(lease), "its lease %llx has %lld s left", (unsigned long long)kv->lease,
                 (long long)ttl);
    else if (kv->lease)
        snprintf(lease, sizeof(lease), "under lease %llx", (unsigned long long)kv->lease);
    else
        snprintf(lease, sizeof(lease), "with no lease (put by hand: it stays until deleted)");
    snprintf(out, cap, "agent at %s (pid %lld on host %s, context %s, registered at revision %lld), %s", addr,
             (long long)pid, host, uu, (long long)kv->create_rev, lease);
}

/* Registers the agent key: only where no live agent holds the name (see
 * gw_etcd_create); remembered for a re-registration when it went in. */
static gw_status_t reg_agent(names_t *n, int64_t lease, const char *key, const char *val, int64_t *rev,
                             gw_etcd_kv_t *holder, char *why, size_t whylen)
{
    gw_status_t st = gw_etcd_create(&n->etcd, key, val, strlen(val), lease, rev, holder, why, whylen);
    if (st != GW_OK)
        return st;
    return kv_remember(n, key, val, why, whylen) < 0 ? GW_ERR_NOMEM : GW_OK;
}

static void reg_del(names_t *n, const char *key)
{
    char why[256];
    pthread_mutex_lock(&n->mu);
    for (size_t i = 0; i < n->nkvs; i++)
        if (!strcmp(n->kvs[i].key, key)) {
            n->kvs[i] = n->kvs[--n->nkvs];
            break;
        }
    int64_t lease = n->lease;
    pthread_mutex_unlock(&n->mu);
    if (!lease) /* not registered now: the key, if any, is another agent's under our name */
        return;
    /* only our own entry: after a lost lease another agent may hold the name */
    if (gw_etcd_delete_leased(&n->etcd, key, lease, why, sizeof(why)) != GW_OK)
        gw_log(GW_LOG_WARN, "names: withdrawing %s from the directory failed: %s", key, why);
}

static void region_value(const pub_t *p, char *out, size_t cap)
{
    snprintf(out, cap, "{\"addr\":\"0x%llx\",\"len\":\"%zu\",\"type\":\"%s\",\"access\":%u}",
             (unsigned long long)(uintptr_t)p->mem->addr, p->mem->len, p->mem->type == GW_MEM_CUDA ? "cuda" : "host",
             p->mem->access);
}

/* Parses an agent entry's JSON value. */
static int parse_agent(const gw_etcd_kv_t *kv, size_t plen, dir_agent_t *a)
{
    gw_json_t root, v;
    size_t used;
    memset(a, 0, sizeof(*a));
    const char *name = kv->key + plen;
    if (!gw_name_valid(name) || gw_json_value(kv->value, kv->value_len, &root, &used) != 1)
        return -1;
    snprintf(a->name, sizeof(a->name), "%s", name);
    char uu[32] = "";
    if (!gw_json_get(root, "addr", &v) || gw_json_string(v, a->addr, sizeof(a->addr)) != 0 ||
        !gw_json_get(root, "uuid", &v) || gw_json_string(v, uu, sizeof(uu)) != 0)
        return -1;
    a->uuid = strtoull(uu, NULL, 16);
    a->epoch = kv->mod_rev;
    a->listed = 1;
    return 0;
}

/* Queues a peer event about cache entry c (mu held) when events are on
 * and c is of interest, and wakes the context. */
static void ev_push(names_t *n, int type, const dir_agent_t *c, int restarted)
{
    if (!n->ev_on || !n->evq || !(c->used || (n->ev_flags & GW_PEER_WATCH_ALL)))
        return;
    if (n->ev_count == EVQ_CAP) {
        n->ev_head = (n->ev_head + 1) % EVQ_CAP;
        n->ev_count--;
        n->ev_dropped++;
    }
    gw_peer_event_t *e = &n->evq[(n->ev_head + n->ev_count++) % EVQ_CAP];
    memset(e, 0, sizeof(*e));
    e->size = sizeof(*e);
    e->type = type;
    snprintf(e->name, sizeof(e->name), "%s", c->name);
    snprintf(e->addr, sizeof(e->addr), "%s", c->addr);
    e->epoch = (uint64_t)c->epoch;
    e->restarted = restarted;
    if (n->ev_fd >= 0) {
        uint64_t one = 1;
        ssize_t w = write(n->ev_fd, &one, sizeof(one));
        (void)w;
    }
}

/* Cache update, mu held. */
static void cache_put(names_t *n, const dir_agent_t *a)
{
    for (size_t i = 0; i < n->nagents; i++) {
        dir_agent_t *c = &n->agents[i];
        if (strcmp(c->name, a->name))
            continue;
        int back = !c->listed || c->uuid != a->uuid, restarted = c->uuid && c->uuid != a->uuid;
        if (back)
            c->changes++;
        unsigned ch = c->changes;
        int used = c->used;
        *c = *a;
        c->changes = ch;
        c->used = used;
        if (back)
            ev_push(n, GW_PEER_BACK, c, restarted);
        return;
    }
    if (n->nagents == n->agcap) {
        size_t cap = n->agcap ? n->agcap * 2 : 16;
        dir_agent_t *p = realloc(n->agents, cap * sizeof(*p));
        if (!p)
            return;
        n->agents = p;
        n->agcap = cap;
    }
    n->agents[n->nagents++] = *a;
    if (n->synced_once) /* a new agent (not one of the first listing) */
        ev_push(n, GW_PEER_BACK, &n->agents[n->nagents - 1], 0);
}

static dir_agent_t *cache_find(names_t *n, const char *name)
{
    for (size_t i = 0; i < n->nagents; i++)
        if (!strcmp(n->agents[i].name, name))
            return &n->agents[i];
    return NULL;
}

static void on_watch_event(void *arg, int is_delete, const gw_etcd_kv_t *kv)
{
    names_t *n = arg;
    char pfx[160];
    agent_key(n, "", pfx, sizeof(pfx));
    size_t pl = strlen(pfx);
    if (strncmp(kv->key, pfx, pl) != 0)
        return;
    pthread_mutex_lock(&n->mu);
    if (is_delete) {
        dir_agent_t *c = cache_find(n, kv->key + pl);
        if (c && c->listed) {
            c->listed = 0;
            c->changes++;
            ev_push(n, GW_PEER_LEFT, c, 0);
        }
    } else {
        dir_agent_t a;
        if (parse_agent(kv, pl, &a) == 0)
            cache_put(n, &a);
    }
    pthread_mutex_unlock(&n->mu);
}

typedef struct sync_arg {
    size_t pl;
    dir_agent_t *got;
    size_t n, cap;
} sync_arg_t;

static int on_sync_kv(void *arg, const gw_etcd_kv_t *kv)
{
    sync_arg_t *s = arg;
    if (s->n == s->cap) {
        size_t c = s->cap ? s->cap * 2 : 16;
        dir_agent_t *p = realloc(s->got, c * sizeof(*p));
        if (!p)
            return 1;
        s->got = p;
        s->cap = c;
    }
    if (parse_agent(kv, s->pl, &s->got[s->n]) == 0)
        s->n++;
    return 0;
}

/* Lists the agents into the cache (entries no longer listed are marked
 * gone) and returns the revision to watch from. */
static gw_status_t cache_sync(names_t *n, int64_t *rev, char *why, size_t whylen)
{
    char pfx[160];
    agent_key(n, "", pfx, sizeof(pfx));
    sync_arg_t s = {strlen(pfx), NULL, 0, 0};
    gw_status_t st = gw_etcd_range(&n->etcd, pfx, 1, on_sync_kv, &s, rev, why, whylen);
    if (st == GW_OK) {
        pthread_mutex_lock(&n->mu);
        for (size_t i = 0; i < n->nagents; i++) {
            int found = 0;
            for (size_t j = 0; j < s.n && !found; j++)
                found = !strcmp(n->agents[i].name, s.got[j].name);
            if (!found && n->agents[i].listed) {
                n->agents[i].listed = 0;
                n->agents[i].changes++;
                ev_push(n, GW_PEER_LEFT, &n->agents[i], 0);
            }
        }
        for (size_t j = 0; j < s.n; j++)
            cache_put(n, &s.got[j]);
        pthread_mutex_unlock(&n->mu);
    }
    free(s.got);
    return st;
}

/* Grants a lease and puts every remembered key under it (after the old lease
 * ran out, e.g. the process was stopped longer than the TTL). */
static gw_status_t reregister(names_t *n, char *why, size_t whylen)
{
    int64_t lease;
    gw_status_t st = gw_etcd_grant(&n->etcd, n->ttl_s, &lease, why, whylen);
    if (st != GW_OK)
        return st;
    char akey[GW_ETCD_KEY_MAX];
    agent_key(n, n->name, akey, sizeof(akey));
    pthread_mutex_lock(&n->mu);
    size_t cnt = n->nkvs;
    kv_reg_t *copy = cnt ? malloc(cnt * sizeof(*copy)) : NULL;
    if (copy)
        memcpy(copy, n->kvs, cnt * sizeof(*copy));
    int was_lost = n->name_lost;
    pthread_mutex_unlock(&n->mu);
    if (cnt && !copy) {
        snprintf(why, whylen, "out of memory");
        return GW_ERR_NOMEM;
    }
    /* the agent key first, and only where nobody took the name meanwhile:
     * the regions follow it, never the other way round */
    gw_etcd_kv_t *holder = malloc(sizeof(*holder));
    for (size_t i = 0; holder && i < cnt && st == GW_OK; i++)
        if (!strcmp(copy[i].key, akey))
            st = gw_etcd_create(&n->etcd, akey, copy[i].val, strlen(copy[i].val), lease, NULL, holder, why, whylen);
    if (!holder)
        st = GW_ERR_NOMEM;
    if (st == GW_ERR_BUSY) {
        char who[400];
        holder_text(n, holder, who, sizeof(who));
        if (!was_lost)
            gw_log(GW_LOG_ERROR, "names: agent \"%s\" lost its name in directory %s: its lease ran out and another "
                   "agent registered \"%s\" meanwhile (%s); this agent stays unlisted until that agent leaves, "
                   "then registers again", n->name, n->etcd.url, n->name, who);
        char w2[64];
        gw_etcd_revoke(&n->etcd, lease, w2, sizeof(w2));
        pthread_mutex_lock(&n->mu);
        n->lease = 0;
        n->name_lost = 1;
        pthread_mutex_unlock(&n->mu);
        free(holder);
        free(copy);
        return GW_OK; /* not an error of the directory: tried again every third of the TTL */
    }
    free(holder);
    pthread_mutex_lock(&n->mu);
    n->lease = lease;
    n->name_lost = 0;
    pthread_mutex_unlock(&n->mu);
    if (st == GW_OK && was_lost)
        gw_log(GW_LOG_WARN, "names: agent \"%s\" is registered again in directory %s (the name was free again)",
               n->name, n->etcd.url);
    for (size_t i = 0; copy && i < cnt && st == GW_OK; i++)
        if (strcmp(copy[i].key, akey) != 0)
            st = gw_etcd_put(&n->etcd, copy[i].key, copy[i].val, strlen(copy[i].val), lease, NULL, why, whylen);
    free(copy);
    return st;
}

static int stopping(names_t *n)
{
    pthread_mutex_lock(&n->mu);
    int s = n->stop;
    pthread_mutex_unlock(&n->mu);
    return s;
}

static void set_synced(names_t *n, int v, const char *why)
{
    pthread_mutex_lock(&n->mu);
    n->synced = v;
    if (v == 1)
        n->synced_once = 1;
    if (why)
        snprintf(n->dir_err, sizeof(n->dir_err), "%s", why);
    pthread_cond_broadcast(&n->cv);
    pthread_mutex_unlock(&n->mu);
}

/* The directory thread: keeps the lease alive and the cache current. */
static void *dir_thread(void *arg)
{
    names_t *n = arg;
    gw_etcd_watch_t w;
    int watching = 0;
    uint64_t next_ka = gw_now_ns() + (uint64_t)n->ttl_s * 1000000000ull / 3;
    char why[256];
    while (!stopping(n)) {
        uint64_t now = gw_now_ns();
        pthread_mutex_lock(&n->mu);
        int64_t lease = n->lease;
        int lost = n->name_lost;
        pthread_mutex_unlock(&n->mu);
        if ((lease || lost) && now >= next_ka) {
            int64_t ttl;
            gw_status_t st = lost ? GW_ERR_NOT_FOUND : gw_etcd_keepalive(&n->etcd, lease, &ttl, why, sizeof(why));
            if (lost) {
                st = reregister(n, why, sizeof(why));
            } else if (st == GW_ERR_NOT_FOUND) {
                gw_log(GW_LOG_WARN, "names: %s; registering agent \"%s\" again", why, n->name);
                st = reregister(n, why, sizeof(why));
            }
            if (st != GW_OK)
                gw_log(GW_LOG_WARN, "names: keeping the directory lease alive failed: %s", why);
            next_ka = now + (uint64_t)n->ttl_s * 1000000000ull / (st == GW_OK ? 3 : 10);
        }
        if (!watching) {
            int64_t rev = 0;
            gw_status_t st = cache_sync(n, &rev, why, sizeof(why));
            if (st == GW_OK)
                st = gw_etcd_watch_open(&n->etcd, n->prefix, rev + 1, &w, why, sizeof(why));
            if (st != GW_OK) {
                set_synced(n, -1, why);
                for (int i = 0; i < 5 && !stopping(n); i++)
                    usleep(100000);
                continue;
            }
            watching = 1;
            pthread_mutex_lock(&n->mu);
            n->watch_fd = w.fd;
            pthread_mutex_unlock(&n->mu);
            set_synced(n, 1, NULL);
        }
        now = gw_now_ns();
        int to = 1000;
        if (lease)
            to = next_ka > now ? (int)GW_MIN((next_ka - now) / 1000000 + 1, 1000ull) : 0;
        gw_status_t st = gw_etcd_watch_poll(&w, to, on_watch_event, n, why, sizeof(why));
        if (st != GW_OK) {
            if (!stopping(n))
                gw_log(GW_LOG_INFO, "names: directory watch on %s: %s; reopening", n->etcd.url, why);
            pthread_mutex_lock(&n->mu);
            n->watch_fd = -1;
            pthread_mutex_unlock(&n->mu);
            gw_etcd_watch_close(&w);
            watching = 0;
        }
    }
    if (watching)
        gw_etcd_watch_close(&w);
    return NULL;
}

static gw_status_t start_thread(names_t *n)
{
    if (n->thr_on)
        return GW_OK;
    if (pthread_create(&n->thr, NULL, dir_thread, n) != 0)
        return gw_err(&n->ctx->core, GW_ERR_SYSTEM, "names: cannot start the directory thread: %s", strerror(errno));
    n->thr_on = 1;
    return GW_OK;
}

static void stop_thread(names_t *n)
{
    if (!n->thr_on)
        return;
    pthread_mutex_lock(&n->mu);
    n->stop = 1;
    if (n->watch_fd >= 0)
        shutdown(n->watch_fd, SHUT_RDWR); /* wakes the thread's poll */
    pthread_mutex_unlock(&n->mu);
    pthread_join(n->thr, NULL);
    n->thr_on = 0;
}

/* Where agent `name` listens according to the directory: the cache, else one
 * direct read (an agent that registered a moment ago).  Fails fast. */
static gw_status_t dir_lookup(names_t *n, const char *name, dir_agent_t *out, const char *what)
{
    gw_core_t *core = &n->ctx->core;
    gw_status_t st = start_thread(n);
    if (st != GW_OK)
        return st;
    uint64_t deadline = gw_now_ns() + (uint64_t)n->etcd.timeout_ms * 1000000ull;
    pthread_mutex_lock(&n->mu);
    while (!n->synced && gw_now_ns() < deadline) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 20000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&n->cv, &n->mu, &ts);
    }
    dir_agent_t *c = cache_find(n, name);
    int hit = c && c->listed && n->synced == 1;
    if (hit) {
        c->used = 1;
        *out = *c;
    }
    pthread_mutex_unlock(&n->mu);
    if (hit)
        return GW_OK;
    char key[GW_ETCD_KEY_MAX], why[256];
    agent_key(n, name, key, sizeof(key));
    sync_arg_t s = {strlen(key) - strlen(name), NULL, 0, 0};
    st = gw_etcd_range(&n->etcd, key, 0, on_sync_kv, &s, NULL, why, sizeof(why));
    if (st == GW_OK && s.n) {
        *out = s.got[0];
        pthread_mutex_lock(&n->mu);
        cache_put(n, &s.got[0]);
        if ((c = cache_find(n, name)) != NULL)
            c->used = 1;
        pthread_mutex_unlock(&n->mu);
    }
    free(s.got);
    if (st != GW_OK)
        return gw_err(core, GW_ERR_UNAVAILABLE, "%s: the directory does not answer: %s", what, why);
    if (!s.n)
        return gw_err(core, GW_ERR_NOT_FOUND, "%s: no agent \"%s\" in directory %s (key %s)", what, name, n->etcd.url,
                      key);
    return GW_OK;
}

/* ---- public: agent ---------------------------------------------------------------------- */
static void advertised(const char *bound, char *out, size_t cap)
{
    /* a wildcard bind is advertised under the host name, which peers resolve */
    if (!strncmp(bound, "0.0.0.0:", 8) || !strncmp(bound, "[::]:", 5)) {
        char host[256] = "localhost";
        gethostname(host, sizeof(host) - 1);
        snprintf(out, cap, "%s:%s", host, strrchr(bound, ':') + 1);
    } else {
        snprintf(out, cap, "%s", bound);
    }
}

static gw_status_t dir_register(names_t *n)
{
    gw_core_t *core = &n->ctx->core;
    char why[256], key[GW_ETCD_KEY_MAX], val[512], host[128] = "";
    gethostname(host, sizeof(host) - 1);
    int64_t lease, rev = 0;
    gw_status_t st = gw_etcd_grant(&n->etcd, n->ttl_s, &lease, why, sizeof(why));
    if (st != GW_OK)
        return gw_err(core, st == GW_ERR_PROTOCOL ? st : GW_ERR_UNAVAILABLE, "gw_agent_listen(%s): %s", n->name, why);
    pthread_mutex_lock(&n->mu);
    n->lease = lease;
    pthread_mutex_unlock(&n->mu);
    size_t vl = 0;
    val[vl++] = '{';
    int bad = 0;
    bad |= vl + 8 >= sizeof(val);
    memcpy(val + vl, "\"addr\":", 7);
    vl += 7;
    bad |= gw_json_put_str(val, sizeof(val), &vl, n->addr);
    vl += (size_t)snprintf(val + vl, sizeof(val) - vl, ",\"uuid\":\"%016llx\",\"pid\":%d,\"version\":\"%s\",\"host\":",
                           (unsigned long long)core->uuid, (int)getpid(), GW_VERSION_STRING);
    bad |= vl >= sizeof(val) || gw_json_put_str(val, sizeof(val), &vl, host);
    bad |= vl + 2 >= sizeof(val);
    if (!bad) {
        val[vl++] = '}';
        val[vl] = '\0';
    }
    agent_key(n, n->name, key, sizeof(key));
    gw_etcd_kv_t *holder = malloc(sizeof(*holder));
    st = bad ? GW_ERR_INVALID : !holder ? GW_ERR_NOMEM : reg_agent(n, lease, key, val, &rev, holder, why, sizeof(why));
    if (st == GW_ERR_BUSY) { /* a live agent holds the name: refused, the holder named */
        char who[400];
        holder_text(n, holder, who, sizeof(who));
        free(holder);
        gw_etcd_revoke(&n->etcd, lease, why, sizeof(why));
        pthread_mutex_lock(&n->mu);
        n->lease = 0;
        n->nkvs = 0;
        pthread_mutex_unlock(&n->mu);
        return gw_err(core, GW_ERR_BUSY,
                      "gw_agent_listen(%s): the name is held by a live agent in directory %s (key %s): %s; the name "
                      "is free again when that agent ends (its listener destroyed) or its lease runs out "
                      "(GPUWIRE_DIRECTORY_TTL)",
                      n->name, n->etcd.url, key, who);
    }
    free(holder);
    for (size_t i = 0; st == GW_OK && i < n->npubs; i++) {
        char rk[GW_ETCD_KEY_MAX], rv[256];
        region_key(n, n->pubs[i].name, rk, sizeof(rk));
        region_value(&n->pubs[i], rv, sizeof(rv));
        st = reg_put(n, rk, rv, NULL, why, sizeof(why));
    }
    if (st != GW_OK) {
        gw_etcd_revoke(&n->etcd, lease, why, sizeof(why));
        pthread_mutex_lock(&n->mu);
        n->lease = 0;
        n->nkvs = 0;
        pthread_mutex_unlock(&n->mu);
        return gw_err(core, GW_ERR_UNAVAILABLE, "gw_agent_listen(%s): registering in the directory failed: %s", n->name,
                      why);
    }
    n->epoch = (uint64_t)rev;
    n->table_dirty = 1;
    return start_thread(n);
}

gw_status_t gw_agent_listen(gw_context_t *ctx, const char *name, const char *addr, gw_listener_t **out)
{
    GW_API_LOCK(ctx);
    if (!ctx || !out)
        return gw_api_invalid(ctx ? &ctx->core : NULL, "gw_agent_listen", "out is NULL");
    *out = NULL;
    gw_core_t *core = &ctx->core;
    if (!gw_name_valid(name))
        return gw_err(core, GW_ERR_INVALID, "gw_agent_listen: name \"%s\" is not 1..%d of [A-Za-z0-9._:@+-]",
                      name ? name : "(null)", GW_NAME_MAX);
    names_t *n;
    gw_status_t st = names_get(ctx, &n);
    if (st != GW_OK)
        return st;
    if (n->name[0])
        return gw_err(core, GW_ERR_BUSY, "gw_agent_listen(%s): this context already is agent \"%s\"", name, n->name);
    gw_listener_t *l;
    if ((st = gw_listen(ctx, addr ? addr : ":0", &l)) != GW_OK)
        return st;
    snprintf(n->name, sizeof(n->name), "%s", name);
    advertised(l->addr, n->addr, sizeof(n->addr));
    n->listener = l;
    n->table_dirty = 1;
    if (n->have_dir && (st = dir_register(n)) != GW_OK) {
        char keep[sizeof(core->errbuf)];
        snprintf(keep, sizeof(keep), "%s", core->errbuf);
        gw_listener_destroy(l); /* ends the agent */
        snprintf(core->errbuf, sizeof(core->errbuf), "%s", keep);
        return st;
    }
    gw_log(GW_LOG_INFO, "agent \"%s\" listens on %s (directory %s, epoch %llu)", name, n->addr, dir_name(n),
           (unsigned long long)n->epoch);
    *out = l;
    return GW_OK;
}

void gw_names_listener_gone(gw_listener_t *l)
{
    names_t *n = l->ctx->names;
    if (!n || n->listener != l)
        return;
    if (n->have_dir) {
        char why[256];
        pthread_mutex_lock(&n->mu);
        int64_t lease = n->lease;
        n->lease = 0;
        n->nkvs = 0;
        n->name_lost = 0;
        pthread_mutex_unlock(&n->mu);
        if (lease && gw_etcd_revoke(&n->etcd, lease, why, sizeof(why)) != GW_OK)
            gw_log(GW_LOG_WARN, "names: withdrawing agent \"%s\" from directory %s failed: %s (its lease runs out in "
                   "%ld s)", n->name, n->etcd.url, why, n->ttl_s);
    }
    n->listener = NULL;
    n->name[0] = '\0';
    n->addr[0] = '\0';
    n->table_dirty = 1;
}

/* ---- public: publishing ----------------------------------------------------------------- */
gw_status_t gw_mem_publish(gw_mem_t *mem, const char *name)
{
    GW_API_LOCK(mem ? GW_CTX_OF_CORE(mem->core) : NULL);
    if (!mem)
        return GW_ERR_INVALID;
    gw_context_t *ctx = (gw_context_t *)mem->core; /* the core is the context's first member */
    gw_core_t *core = &ctx->core;
    if (!gw_name_valid(name))
        return gw_err(core, GW_ERR_INVALID, "gw_mem_publish: name \"%s\" is not 1..%d of [A-Za-z0-9._:@+-]",
                      name ? name : "(null)", GW_NAME_MAX);
    if (!(mem->access & (GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE)))
        return gw_err(core, GW_ERR_INVALID, "gw_mem_publish(%s): the region at %p was registered for local access only",
                      name, mem->addr);
    names_t *n;
    gw_status_t st = names_get(ctx, &n);
    if (st != GW_OK)
        return st;
    uint8_t key[GW_RKEY_MAX_LEN];
    size_t kl = sizeof(key);
    if ((st = gw_mem_pack_rkey(mem, key, &kl)) != GW_OK)
        return st;
    size_t i;
    for (i = 0; i < n->npubs && strcmp(n->pubs[i].name, name); i++)
        ;
    size_t old_bytes = i < n->npubs ? PUB_BYTES(&n->pubs[i]) : 0, new_bytes = 3 + strlen(name) + kl;
    /* the agent's name may come later: count the longest one */
    if (GW_NT_FIXED_LEN + GW_NAME_MAX + n->pub_bytes - old_bytes + new_bytes > GW_NT_MAX_LEN)
        return gw_err(core, GW_ERR_NO_RESOURCE,
                      "gw_mem_publish(%s): the names table would pass its %u-byte limit (%zu regions, %zu bytes; this "
                      "one takes %zu)", name, GW_NT_MAX_LEN, n->npubs, n->pub_bytes, new_bytes);
    uint8_t *kcopy = malloc(kl);
    if (!kcopy)
        return gw_err(core, GW_ERR_NOMEM, "gw_mem_publish(%s): out of memory", name);
    memcpy(kcopy, key, kl);
    if (i == n->npubs) {
        if (n->npubs == n->pubcap) {
            size_t c = n->pubcap ? n->pubcap * 2 : 8;
            pub_t *p = realloc(n->pubs, c * sizeof(*p));
            if (!p) {
                free(kcopy);
                return gw_err(core, GW_ERR_NOMEM, "gw_mem_publish(%s): out of memory", name);
            }
            n->pubs = p;
            n->pubcap = c;
        }
        memset(&n->pubs[i], 0, sizeof(n->pubs[i]));
        snprintf(n->pubs[i].name, sizeof(n->pubs[i].name), "%s", name);
        n->npubs++;
    }
    free(n->pubs[i].key);
    n->pubs[i].mem = mem;
    n->pubs[i].key = kcopy;
    n->pubs[i].key_len = kl;
    n->pub_bytes = n->pub_bytes - old_bytes + new_bytes;
    n->table_dirty = 1; /* built when a handshake next needs it */
    if (n->have_dir && n->name[0]) {
        char rk[GW_ETCD_KEY_MAX], rv[256], why[256];
        region_key(n, name, rk, sizeof(rk));
        region_value(&n->pubs[i], rv, sizeof(rv));
        if (reg_put(n, rk, rv, NULL, why, sizeof(why)) != GW_OK)
            gw_log(GW_LOG_WARN, "names: listing region \"%s\" in directory %s failed: %s (peers still get its key "
                   "from this agent)", name, n->etcd.url, why);
    }
    return GW_OK;
}

static void unpublish_at(names_t *n, size_t i)
{
    if (n->have_dir && n->name[0]) {
        char rk[GW_ETCD_KEY_MAX];
        region_key(n, n->pubs[i].name, rk, sizeof(rk));
        reg_del(n, rk);
    }
    n->pub_bytes -= PUB_BYTES(&n->pubs[i]);
    free(n->pubs[i].key);
    n->pubs[i] = n->pubs[--n->npubs];
    n->table_dirty = 1;
}

gw_status_t gw_mem_unpublish(gw_context_t *ctx, const char *name)
{
    GW_API_LOCK(ctx);
    if (!ctx || !name)
        return gw_api_invalid(ctx ? &ctx->core : NULL, "gw_mem_unpublish", "name is NULL");
    names_t *n = ctx->names;
    for (size_t i = 0; n && i < n->npubs; i++)
        if (!strcmp(n->pubs[i].name, name)) {
            unpublish_at(n, i);
            return GW_OK;
        }
    return gw_err(&ctx->core, GW_ERR_NOT_FOUND, "gw_mem_unpublish: no region is published as \"%s\"", name);
}

void gw_names_mem_gone(gw_mem_t *mem)
{
    names_t *n = ((gw_context_t *)mem->core)->names;
    for (size_t i = 0; i < n->npubs;) {
        if (n->pubs[i].mem == mem)
            unpublish_at(n, i);
        else
            i++;
    }
}

/* ---- public: peers ------------------------------------------------------------------------ */
gw_status_t gw_peer_add(gw_context_t *ctx, const char *name, const char *addr)
{
    GW_API_LOCK(ctx);
    if (!ctx)
        return GW_ERR_INVALID;
    if (!gw_name_valid(name))
        return gw_api_invalid(&ctx->core, "gw_peer_add", "name \"%s\" is not 1..%d of [A-Za-z0-9._:@+-]",
                              name ? name : "(null)", GW_NAME_MAX);
    if (!addr || !addr[0])
        return gw_api_invalid(&ctx->core, "gw_peer_add", "addr of agent \"%s\" is %s", name, addr ? "empty" : "NULL");
    names_t *n;
    gw_status_t st = names_get(ctx, &n);
    if (st != GW_OK)
        return st;
    return add_static_peer(n, name, addr);
}

static int ep_healthy(const gw_ep_t *ep)
{
    return ep->state == GW_EP_READY && ep->base.error == GW_OK;
}

static gw_status_t retire(names_t *n, gw_ep_t *ep)
{
    if (n->nretired == n->retcap) {
        size_t c = n->retcap ? n->retcap * 2 : 8;
        gw_ep_t **r = realloc(n->retired, c * sizeof(*r));
        if (!r)
            return gw_err(&n->ctx->core, GW_ERR_NOMEM, "names: out of memory");
        n->retired = r;
        n->retcap = c;
    }
    n->retired[n->nretired++] = ep;
    return GW_OK;
}

gw_status_t gw_peer_ep(gw_context_t *ctx, const char *name, gw_ep_t **out)
{
    GW_API_LOCK(ctx);
    if (!ctx || !out)
        return gw_api_invalid(ctx ? &ctx->core : NULL, "gw_peer_ep", "out is NULL");
    *out = NULL;
    gw_core_t *core = &ctx->core;
    char what[128];
    snprintf(what, sizeof(what), "gw_peer_ep(%s)", name ? name : "(null)");
    if (!gw_name_valid(name))
        return gw_err(core, GW_ERR_INVALID, "%s: not a valid agent name (1..%d of [A-Za-z0-9._:@+-])", what,
                      GW_NAME_MAX);
    names_t *n;
    gw_status_t st = names_get(ctx, &n);
    if (st != GW_OK)
        return st;
    peer_t *p = find_peer(n, name);
    dir_agent_t d;
    memset(&d, 0, sizeof(d));
    if (p && p->ep && ep_healthy(p->ep)) {
        int moved = 0, gone = 0;
        if (!p->addr[0] && n->have_dir) { /* the watch may have seen the agent leave or restart */
            pthread_mutex_lock(&n->mu);
            dir_agent_t *c = cache_find(n, name);
            moved = c && c->listed && c->uuid && c->uuid != p->ep->peer_uuid;
            gone = c && !c->listed;
            pthread_mutex_unlock(&n->mu);
        }
        if (gone) /* its lease ran out: let a failure of the connection land before trusting it */
            for (int i = 0; i <= (int)GW_CORE_COLD_EVERY && ep_healthy(p->ep); i++)
                gw_progress(ctx);
        if (!moved && ep_healthy(p->ep)) {
            *out = p->ep;
            return GW_OK;
        }
    }
    const char *addr;
    if (p && p->addr[0]) {
        addr = p->addr;
    } else if (n->have_dir) {
        if ((st = dir_lookup(n, name, &d, what)) != GW_OK)
            return st;
        addr = d.addr;
    } else {
        return gw_err(core, GW_ERR_NOT_FOUND,
                      "%s: no agent \"%s\" is known: no directory is set (GPUWIRE_DIRECTORY) and neither gw_peer_add() "
                      "nor GPUWIRE_PEERS names it",
                      what, name);
    }
    if (!p && !(p = new_peer(n, name)))
        return gw_err(core, GW_ERR_NOMEM, "%s: out of memory", what);
    gw_ep_t *old = p->ep;
    if (old) {
        p->ep = NULL;
        if ((st = retire(n, old)) != GW_OK)
            return st;
    }
    gw_ep_t *ep;
    if ((st = gw_connect(ctx, addr, &ep)) != GW_OK) {
        char keep[sizeof(core->errbuf)];
        snprintf(keep, sizeof(keep), "%s", core->errbuf);
        return gw_err(core, st, "%s: agent at %s (from %s): %s", what, addr, p->addr[0] ? "gw_peer_add/GPUWIRE_PEERS"
                      : n->etcd.url, keep);
    }
    if (!ep->peer_table || strcmp(ep->peer_name, name) != 0) {
        char other[80];
        snprintf(other, sizeof(other), "%s", ep->peer_table ? ep->peer_name : "");
        gw_ep_close(ep, 0);
        return gw_err(core, GW_ERR_NOT_FOUND, "%s: the peer at %s (from %s) %s%s%s, not \"%s\"", what, addr,
                      p->addr[0] ? "gw_peer_add/GPUWIRE_PEERS" : n->etcd.url,
                      other[0] ? "is agent \"" : "is no agent (it sent no names table)", other, other[0] ? "\"" : "",
                      name);
    }
    ep->names_owned = 1;
    if (p->uuid && p->uuid != ep->peer_uuid) {
        p->restarts++;
        gw_log(GW_LOG_INFO, "agent \"%s\" restarted: epoch %llu -> %llu", name, (unsigned long long)p->epoch,
               (unsigned long long)ep->peer_epoch);
        for (size_t i = 0; i < n->nretired; i++)
            if (!strcmp(n->retired[i]->peer_name, name) && n->retired[i]->peer_uuid != ep->peer_uuid)
                n->retired[i]->newer_epoch = ep->peer_epoch;
    }
    p->uuid = ep->peer_uuid;
    p->epoch = ep->peer_epoch;
    p->ep = ep;
    *out = ep;
    return GW_OK;
}

/* Tables kept on an endpoint were checked when they came (gw_nt_decode). */
static int table_find(const uint8_t *t, size_t len, const char *name, gw_nt_entry_t *e)
{
    return t ? gw_nt_find(t, len, name, e) : -1;
}

static void table_names(const uint8_t *t, size_t len, char *out, size_t cap)
{
    size_t o = 0, off = 0, count = 0;
    gw_nt_entry_t e;
    out[0] = '\0';
    while (t && gw_nt_next(t, len, &off, &e)) {
        if (o < cap)
            o += (size_t)snprintf(out + o, cap - o, "%s%s", o ? ", " : "", e.name);
        count++;
    }
    if (o >= cap && cap > 32)
        snprintf(out + cap - 32, 32, "... (%zu in all)", count);
}

gw_status_t gw_peer_regions(gw_context_t *ctx, const char *peer, const char *const *names, size_t cnt,
                            gw_rkey_t **out)
{
    GW_API_LOCK(ctx);
    if (!ctx || !out || (cnt && !names))
        return gw_api_invalid(ctx ? &ctx->core : NULL, "gw_peer_regions", "%s is NULL", !out ? "out" : "names");
    gw_core_t *core = &ctx->core;
    for (size_t i = 0; i < cnt; i++)
        out[i] = NULL;
    if (!gw_name_valid(peer))
        return gw_api_invalid(core, "gw_peer_regions", "peer \"%s\" is not 1..%d of [A-Za-z0-9._:@+-]",
                              peer ? peer : "(null)", GW_NAME_MAX);
    for (size_t i = 0; i < cnt; i++)
        if (!names[i])
            return gw_api_invalid(core, "gw_peer_regions", "names[%zu] is NULL", i);
    gw_ep_t *ep;
    gw_status_t st = gw_peer_ep(ctx, peer, &ep);
    if (st != GW_OK)
        return st;
    names_t *n = ctx->names;
    for (int attempt = 0; attempt < 2; attempt++) {
        size_t missing = cnt;
        gw_nt_entry_t e;
        for (size_t i = 0; i < cnt; i++)
            if (!names[i] || table_find(ep->peer_table, ep->peer_table_len, names[i], &e) != 0) {
                missing = i;
                break;
            }
        if (missing == cnt)
            break;
        if (attempt == 1 || !names[missing]) {
            char have[256];
            table_names(ep->peer_table, ep->peer_table_len, have, sizeof(have));
            return gw_err(core, GW_ERR_NOT_FOUND,
                          "gw_peer_regions(%s): agent \"%s\" (epoch %llu at %s) publishes no region \"%s\" (it "
                          "publishes: %s)",
                          peer, peer, (unsigned long long)ep->peer_epoch, ep->base.peer,
                          names[missing] ? names[missing] : "(null)", have[0] ? have : "nothing");
        }
        /* a miss: the agent may have published it since we connected */
        uint8_t *t = NULL;
        size_t tl = 0;
        gw_nt_header_t h;
        char why[256];
        st = fetch_table(n, ep->base.peer, &t, &tl, &h, why, sizeof(why));
        if (st != GW_OK)
            return gw_err(core, st, "gw_peer_regions(%s): refreshing the agent's table from %s: %s", peer,
                          ep->base.peer, why);
        if (h.uuid != ep->peer_uuid) { /* restarted since: the endpoint is stale */
            free(t);
            gw_ep_fail(&ep->base, GW_ERR_CONN_RESET, "agent \"%s\" restarted (a new context answers at %s)", peer,
                       ep->base.peer);
            if ((st = gw_peer_ep(ctx, peer, &ep)) != GW_OK)
                return st;
            continue;
        }
        free(ep->peer_table);
        ep->peer_table = t;
        ep->peer_table_len = tl;
        ep->peer_epoch = h.epoch;
    }
    for (size_t i = 0; i < cnt; i++) {
        gw_nt_entry_t e;
        table_find(ep->peer_table, ep->peer_table_len, names[i], &e);
        if ((st = gw_rkey_unpack(ep, e.key, e.key_len, &out[i])) != GW_OK) {
            for (size_t j = 0; j < i; j++) {
                gw_rkey_destroy(out[j]);
                out[j] = NULL;
            }
            return st;
        }
    }
    return GW_OK;
}

gw_status_t gw_names_key_check_slow(gw_ep_t *ep, const gw_rkey_t *rkey, const char *op)
{
    if (!rkey || !ep)
        return GW_OK;
    const gw_ep_t *kep = rkey->ep;
    uint64_t now_epoch = kep->newer_epoch;
    if (!now_epoch && kep != ep && kep->peer_name[0] && !strcmp(kep->peer_name, ep->peer_name) &&
        kep->peer_uuid != ep->peer_uuid)
        now_epoch = ep->peer_epoch;
    if (!now_epoch)
        return GW_OK;
    return gw_err(&ep->ctx->core, GW_ERR_INVALID_KEY,
                  "%s: the key is from agent \"%s\" at epoch %llu, which restarted (now epoch %llu): keys of the old "
                  "epoch are void; gw_peer_regions() returns the new ones",
                  op, kep->peer_name, (unsigned long long)kep->peer_epoch, (unsigned long long)now_epoch);
}

gw_status_t gw_peer_query(gw_context_t *ctx, const char *name, gw_peer_info_t *info)
{
    GW_API_LOCK(ctx);
    if (!ctx || !name || !GW_API_SIZE_OK(info))
        return !ctx || name ? gw_api_bad_struct(ctx ? &ctx->core : NULL, "gw_peer_query", "info", info ? &info->size : NULL)
                            : gw_api_invalid(&ctx->core, "gw_peer_query", "name is NULL");
    names_t *n = ctx->names;
    peer_t *p = n ? find_peer(n, name) : NULL;
    gw_peer_info_t o;
    memset(&o, 0, sizeof(o));
    o.size = info->size;
    o.listed = -1;
    int known = p != NULL;
    if (p) {
        snprintf(o.addr, sizeof(o.addr), "%s", p->ep ? p->ep->base.peer : p->addr);
        o.epoch = p->epoch;
        o.connected = p->ep && ep_healthy(p->ep);
        o.restarts = p->restarts;
    }
    if (n && n->have_dir) {
        pthread_mutex_lock(&n->mu);
        dir_agent_t *c = cache_find(n, name);
        if (c) {
            known = 1;
            o.listed = c->listed;
            o.changes = c->changes;
            if (!o.addr[0])
                snprintf(o.addr, sizeof(o.addr), "%s", c->addr);
            if (!o.epoch)
                o.epoch = (uint64_t)c->epoch;
        } else if (n->synced == 1) {
            o.listed = 0;
        }
        pthread_mutex_unlock(&n->mu);
    }
    if (!known)
        return gw_err(&ctx->core, GW_ERR_NOT_FOUND, "gw_peer_query: this context knows no agent \"%s\"", name);
    memcpy(info, &o, GW_MIN(info->size, sizeof(o)));
    return GW_OK;
}

/* ---- public: peer events ------------------------------------------------------------------- */
static int ev_pop(names_t *n, gw_peer_event_t *e) /* mu held */
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
 * queued events to the callback, without holding mu while it runs. */
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
        pthread_mutex_lock(&n->mu);
        int got = ev_pop(n, &e);
        pthread_mutex_unlock(&n->mu);
        if (!got)
            break;
        n->ev_cb(n->ev_arg, &e);
    }
    n->ev_delivering = 0;
    pthread_mutex_lock(&n->mu);
    if (n->ev_count && n->ev_cb && n->ev_fd >= 0) { /* more came: the next progress call */
        uint64_t one = 1;
        ssize_t w = write(n->ev_fd, &one, sizeof(one));
        (void)w;
    }
    pthread_mutex_unlock(&n->mu);
}

static void ev_off(names_t *n)
{
    pthread_mutex_lock(&n->mu);
    n->ev_on = 0;
    n->ev_count = n->ev_head = 0;
    n->ev_dropped = 0;
    int fd = n->ev_fd;
    n->ev_fd = -1;
    pthread_mutex_unlock(&n->mu);
    n->ev_cb = NULL;
    n->ev_arg = NULL;
    if (fd >= 0) {
        gw_io_del(&n->ctx->core, &n->ev_io);
        close(fd);
    }
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
    gw_status_t st = names_get(ctx, &n);
    if (st != GW_OK)
        return st;
    if (flags & GW_PEER_WATCH_OFF) {
        ev_off(n);
        return GW_OK;
    }
    if (!n->have_dir)
        return gw_err(core, GW_ERR_UNAVAILABLE,
                      "gw_peer_watch: no directory is set (GPUWIRE_DIRECTORY): peers given by address have no watch; "
                      "an endpoint's failure is what tells of them");
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
        pthread_mutex_lock(&n->mu);
        n->ev_fd = fd;
        pthread_mutex_unlock(&n->mu);
    }
    n->ev_cb = cb;
    n->ev_arg = arg;
    pthread_mutex_lock(&n->mu);
    n->ev_flags = flags;
    n->ev_on = 1;
    if (n->ev_count) { /* queued before a callback was given: hand them over */
        uint64_t one = 1;
        ssize_t w = write(n->ev_fd, &one, sizeof(one));
        (void)w;
    }
    pthread_mutex_unlock(&n->mu);
    return start_thread(n);
}

gw_status_t gw_peer_event_next(gw_context_t *ctx, gw_peer_event_t *ev)
{
    GW_API_LOCK(ctx);
    if (!ctx || !ev)
        return gw_api_invalid(ctx ? &ctx->core : NULL, "gw_peer_event_next", "ev is NULL");
    if (ev->size < sizeof(*ev))
        return gw_err(&ctx->core, GW_ERR_INVALID, "gw_peer_event_next: ev->size is %zu, %zu expected", ev->size,
                      sizeof(*ev));
    names_t *n = ctx->names;
    int got = 0, on = 0;
    if (n) {
        pthread_mutex_lock(&n->mu);
        on = n->ev_on;
        got = ev_pop(n, ev);
        pthread_mutex_unlock(&n->mu);
    }
    if (!got)
        return gw_err(&ctx->core, GW_ERR_NOT_FOUND, "gw_peer_event_next: no event queued%s",
                      on ? "" : " (events are off: gw_peer_watch() starts them)");
    ev->size = sizeof(*ev);
    return GW_OK;
}

/* ---- public: directory listing ------------------------------------------------------------- */
typedef struct list_arg {
    names_t *n;
    size_t pl;
    int regions;
    int (*cb)(void *, const gw_dir_entry_t *);
    void *arg;
    int stopped;
} list_arg_t;

static int on_list_kv(void *arg, const gw_etcd_kv_t *kv)
{
    list_arg_t *a = arg;
    gw_dir_entry_t e;
    memset(&e, 0, sizeof(e));
    gw_json_t root, v;
    size_t used;
    if (!a->regions) {
        dir_agent_t d;
        if (parse_agent(kv, a->pl, &d) != 0)
            return 0;
        e.agent = d.name;
        e.addr = d.addr;
        e.epoch = (uint64_t)d.epoch;
        return a->stopped = a->cb(a->arg, &e);
    }
    char agent[GW_NAME_MAX + 1], type[16] = "", num[32];
    const char *rest = kv->key + a->pl, *slash = strchr(rest, '/');
    if (!slash || (size_t)(slash - rest) > GW_NAME_MAX || gw_json_value(kv->value, kv->value_len, &root, &used) != 1)
        return 0;
    memcpy(agent, rest, (size_t)(slash - rest));
    agent[slash - rest] = '\0';
    e.agent = agent;
    e.region = slash + 1;
    if (gw_json_get(root, "addr", &v) && gw_json_string(v, num, sizeof(num)) == 0)
        e.raddr = strtoull(num, NULL, 0);
    int64_t x;
    if (gw_json_get(root, "len", &v) && gw_json_i64(v, &x) == 0)
        e.rlen = (uint64_t)x;
    if (gw_json_get(root, "access", &v) && gw_json_i64(v, &x) == 0)
        e.access = (unsigned)x;
    if (gw_json_get(root, "type", &v))
        gw_json_string(v, type, sizeof(type));
    e.type = type;
    return a->stopped = a->cb(a->arg, &e);
}

gw_status_t gw_directory_list(gw_context_t *ctx, int (*cb)(void *arg, const gw_dir_entry_t *e), void *arg)
{
    GW_API_LOCK(ctx);
    if (!ctx || !cb)
        return gw_api_invalid(ctx ? &ctx->core : NULL, "gw_directory_list", "cb is NULL");
    names_t *n;
    gw_status_t st = names_get(ctx, &n);
    if (st != GW_OK)
        return st;
    if (!n->have_dir)
        return gw_err(&ctx->core, GW_ERR_UNAVAILABLE, "gw_directory_list: no directory is set (GPUWIRE_DIRECTORY)");
    char pfx[160], why[256];
    list_arg_t a = {n, 0, 0, cb, arg, 0};
    for (a.regions = 0; a.regions < 2 && !a.stopped; a.regions++) {
        snprintf(pfx, sizeof(pfx), "%s%s", n->prefix, a.regions ? "regions/" : "agents/");
        a.pl = strlen(pfx);
        if ((st = gw_etcd_range(&n->etcd, pfx, 1, on_list_kv, &a, NULL, why, sizeof(why))) != GW_OK)
            return gw_err(&ctx->core, GW_ERR_UNAVAILABLE, "gw_directory_list: directory %s: %s", n->etcd.url, why);
    }
    return GW_OK;
}

static int count_kv(void *arg, const gw_etcd_kv_t *kv)
{
    (void)kv;
    (*(size_t *)arg)++;
    return 0;
}

gw_status_t gw_directory_describe(gw_context_t *ctx, char *buf, size_t len)
{
    GW_API_LOCK(ctx);
    if (!ctx || !buf || !len)
        return gw_api_invalid(ctx ? &ctx->core : NULL, "gw_directory_describe", "%s", !buf ? "buf is NULL" : "len is 0");
    names_t *n;
    gw_status_t st = names_get(ctx, &n);
    if (st != GW_OK)
        return st;
    if (!n->have_dir) {
        size_t k = 0;
        for (peer_t *p = n->peers; p; p = p->next)
            k += p->addr[0] != 0;
        snprintf(buf, len, "none (peer-to-peer: %zu agent address(es) from gw_peer_add/GPUWIRE_PEERS)", k);
        return GW_OK;
    }
    char pfx[160], why[256];
    size_t agents = 0;
    int64_t rev = 0;
    snprintf(pfx, sizeof(pfx), "%sagents/", n->prefix);
    st = gw_etcd_range(&n->etcd, pfx, 1, count_kv, &agents, &rev, why, sizeof(why));
    if (st != GW_OK)
        snprintf(buf, len, "%s prefix %s: not answering: %s", n->etcd.url, n->prefix, why);
    else
        snprintf(buf, len, "%s prefix %s: reachable, revision %lld, %zu agent(s), lease TTL %ld s", n->etcd.url,
                 n->prefix, (long long)rev, agents, n->ttl_s);
    return GW_OK;
}

/* ---- teardown -------------------------------------------------------------------------------- */
void gw_names_ep_gone(gw_ep_t *ep)
{
    names_t *n = ep->ctx->names;
    if (!n || n->closing)
        return;
    for (peer_t *p = n->peers; p; p = p->next)
        if (p->ep == ep)
            p->ep = NULL;
    for (size_t i = 0; i < n->nretired; i++)
        if (n->retired[i] == ep) {
            n->retired[i] = n->retired[--n->nretired];
            break;
        }
}

gw_status_t gw_names_setup(gw_context_t *ctx)
{
    const gw_settings_t *s = &ctx->core.settings;
    if (!gw_settings_str(s, GW_SET_PEERS)[0] && !gw_settings_str(s, GW_SET_DIRECTORY)[0])
        return GW_OK;
    names_t *n;
    return names_get(ctx, &n);
}

gw_status_t gw_names_fini(gw_context_t *ctx)
{
    names_t *n = ctx->names;
    if (!n)
        return GW_OK;
    size_t owned = n->nretired, keys = 0;
    for (size_t i = 0; i < n->nretired; i++)
        keys += n->retired[i]->n_rkeys;
    for (peer_t *p = n->peers; p; p = p->next)
        if (p->ep) {
            owned++;
            keys += p->ep->n_rkeys;
        }
    if (keys)
        return gw_err(&ctx->core, GW_ERR_BUSY,
                      "gw_context_destroy: %zu remote key(s) from gw_peer_regions() are alive; gw_rkey_destroy() them "
                      "first", keys);
    if (ctx->n_eps > owned || ctx->n_listeners || ctx->n_mems)
        return GW_OK; /* the caller's own objects: gw_context_destroy says so, and nothing changed */
    n->closing = 1;
    for (size_t i = 0; i < n->nretired; i++)
        gw_ep_close(n->retired[i], 0);
    for (peer_t *p = n->peers; p; p = p->next)
        if (p->ep)
            gw_ep_close(p->ep, 0);
    stop_thread(n);
    ev_off(n);
    free(n->evq);
    if (n->lease) {
        char why[256];
        gw_etcd_revoke(&n->etcd, n->lease, why, sizeof(why));
    }
    while (n->peers) {
        peer_t *p = n->peers;
        n->peers = p->next;
        free(p);
    }
    free(n->retired);
    for (size_t i = 0; i < n->npubs; i++)
        free(n->pubs[i].key);
    free(n->pubs);
    free(n->table);
    free(n->kvs);
    free(n->agents);
    pthread_mutex_destroy(&n->mu);
    pthread_cond_destroy(&n->cv);
    free(n);
    ctx->names = NULL;
    return GW_OK;
}
