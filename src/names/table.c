/* SPDX-License-Identifier: Apache-2.0 */
/* table.c - published regions and the agent's table.
 *
 * gw_mem_publish() puts a region's packed key into the agent's table
 * (table_wire.h), built once per change.  The table travels to every peer
 * as the handshake's names extension (GW_HS_EXT_NAMES in READY), with an
 * HMAC over it when authentication is on, and again through an
 * extension-only handshake when a peer misses a name (fetch_table): keys
 * only ever come from the agent itself, through an authenticated
 * exchange; the directory holds addresses and descriptions, never keys. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api/auth.h"
#include "core/sock.h"
#include "names/names_int.h"

/* The names extension's version: what its payload is (a table_wire.h
 * table, stub or piece, chosen by the request's argument). */
#define NAMES_EXT_VERSION 1

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

/* ---- the handshake extension --------------------------------------------------------- */
/* req < 0: READY of a connection (the table, or its stub when it passes
 * GW_NT_INLINE_MAX); else an extension-only handshake that asked for the
 * piece from offset req. */
void gw_names_hs_fill(void *ext, gw_hs_msg_t *m, uint8_t *buf, size_t cap, long req, const gw_hs_bind_t *b)
{
    names_t *n = ext;
    gw_context_t *ctx = n->ctx;
    if ((!n->name[0] && !n->npubs) || build_table(n) != GW_OK)
        return;
    size_t len;
    if (req >= 0)
        len = gw_np_encode(buf, cap, n->table, n->table_len, (size_t)req, ctx->core.uuid, n->table_serial);
    else if (n->table_len <= GW_NT_INLINE_MAX && n->table_len <= cap) {
        memcpy(buf, n->table, n->table_len);
        len = n->table_len;
    } else { /* too big for a READY: who we are, and that the entries come in pieces */
        len = gw_nt_stub(n->table, n->table_len, buf, cap);
    }
    if (!len || len > 0xffff - 4 || gw_hs_ext_add(m, GW_HS_EXT_NAMES, NAMES_EXT_VERSION, buf, (uint16_t)len) != 0)
        return;
    gw_hs_ext_t *x = &m->ext[m->next - 1];
    if (ctx->auth_enabled && gw_auth_mac_data(ctx->auth_secret, ctx->auth_secret_len, "gpuwire-table", b->nonce_c,
                                              b->nonce_s, b->uuid_c, b->uuid_s, buf, len, x->mac) == 0)
        x->has_mac = 1;
}

/* The names extension of a READY, its version and (with authentication)
 * its HMAC checked.  GW_OK with *x (NULL: none carried). */
static gw_status_t ext_checked(gw_context_t *ctx, const gw_hs_msg_t *m, const gw_hs_bind_t *b,
                               const gw_hs_ext_t **out, char *why, size_t whylen)
{
    const gw_hs_ext_t *x = gw_hs_ext_find(m, GW_HS_EXT_NAMES);
    *out = NULL;
    if (!x || !x->len)
        return GW_OK;
    if (x->version != NAMES_EXT_VERSION) {
        snprintf(why, whylen, "the peer's names extension is version %u, this build speaks %u", (unsigned)x->version,
                 NAMES_EXT_VERSION);
        return GW_ERR_VERSION;
    }
    if (ctx->auth_enabled) {
        uint8_t want[GW_AUTH_MAC_LEN];
        if (!x->has_mac ||
            gw_auth_mac_data(ctx->auth_secret, ctx->auth_secret_len, "gpuwire-table", b->nonce_c, b->nonce_s,
                             b->uuid_c, b->uuid_s, x->data, x->len, want) != 0 ||
            !gw_auth_equal(want, x->mac, GW_AUTH_MAC_LEN)) {
            snprintf(why, whylen, "the peer's names table fails authentication (its HMAC does not match the shared secret)");
            return GW_ERR_AUTH;
        }
    }
    *out = x;
    return GW_OK;
}

gw_status_t gw_names_hs_take(void *ext, gw_ep_t *ep, const gw_hs_msg_t *m, const gw_hs_bind_t *b, char *why,
                             size_t whylen)
{
    names_t *n = ext;
    const gw_hs_ext_t *x;
    gw_status_t st = ext_checked(n->ctx, m, b, &x, why, whylen);
    if (st != GW_OK || !x)
        return st;
    gw_nt_header_t h;
    char w[200];
    if (gw_nt_decode(x->data, x->len, &h, w, sizeof(w)) != GW_OK) {
        snprintf(why, whylen, "bad names table from the peer: %s", w);
        return GW_ERR_PROTOCOL;
    }
    if (h.uuid != ep->peer_uuid) {
        snprintf(why, whylen, "the peer's names table belongs to context %016llx, not the peer (%016llx)",
                 (unsigned long long)h.uuid, (unsigned long long)ep->peer_uuid);
        return GW_ERR_PROTOCOL;
    }
    names_ep_t *ne = ep->ext ? ep->ext : calloc(1, sizeof(*ne));
    uint8_t *t = malloc(x->len);
    if (!ne || !t) {
        if (ne != ep->ext)
            free(ne);
        free(t);
        snprintf(why, whylen, "out of memory for the peer's names table");
        return GW_ERR_NOMEM;
    }
    memcpy(t, x->data, x->len);
    free(ne->table);
    ne->table = t;
    ne->table_len = x->len;
    snprintf(ne->name, sizeof(ne->name), "%s", h.name);
    ne->uuid = h.uuid;
    ne->epoch = h.epoch;
    ep->ext = ne;
    return GW_OK;
}

/* ---- fetching the table: extension-only handshakes ------------------------------------ */
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

/* One extension-only handshake asking for the piece from `off` (blocking,
 * bounded by the connect timeout; the same proofs as a connection, no
 * endpoint): a copy of what READY carried (HMAC checked with auth) and
 * who answered. */
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
    m.flags = GW_HS_FLAG_EXT_ONLY | (ctx->auth_enabled ? GW_HS_FLAG_AUTH : 0);
    gw_random_bytes(nonce_c, sizeof(nonce_c));
    memcpy(m.nonce, nonce_c, sizeof(nonce_c));
    m.has_nonce = 1;
    m.pref[0] = GW_TL_TCP; /* the format wants a list; unused in an extension-only exchange */
    m.npref = 1;
    m.has_ext_req = 1;
    m.ext_req_type = GW_HS_EXT_NAMES;
    m.ext_req_version = NAMES_EXT_VERSION;
    m.ext_req_arg = (uint32_t)off;
    size_t k = gw_hs_encode(&m, buf, sizeof(buf));
    if (!k || gw_sock_write_full(fd, buf, k, to) != 0) {
        snprintf(why, whylen, "sending to %s failed: %s", addr, strerror(errno));
        st = GW_ERR_CONN_RESET;
        goto out;
    }
    if ((st = read_msg(fd, buf, sizeof(buf), to, &a, why, whylen)) != GW_OK)
        goto out;
    if (a.type != GW_HS_ACCEPT || a.chosen != GW_HS_NO_TL || !(a.flags & GW_HS_FLAG_EXT_ONLY)) {
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
    gw_hs_bind_t bind = {.nonce_c = nonce_c, .nonce_s = nonce_s, .uuid_c = ctx->core.uuid, .uuid_s = uuid_s};
    const gw_hs_ext_t *x = NULL;
    if (r.type == GW_HS_READY && (st = ext_checked(ctx, &r, &bind, &x, why, whylen)) != GW_OK)
        goto out;
    if (r.type != GW_HS_READY || !x) {
        snprintf(why, whylen, "the peer at %s sent no names table (not an agent)", addr);
        st = GW_ERR_NOT_FOUND;
        goto out;
    }
    if (!(*out = malloc(x->len))) {
        snprintf(why, whylen, "out of memory");
        st = GW_ERR_NOMEM;
        goto out;
    }
    memcpy(*out, x->data, x->len);
    *len = x->len;
    *uuid = uuid_s;
out:
    close(fd);
    return st;
}

/* The agent's whole table, piece by piece (one extension-only handshake
 * each, so the agent never blocks on a slow reader: each answer is one
 * message).  Pieces of another build of the table (the agent published
 * meanwhile) or of another context (it restarted) start the fetch over,
 * three times at most. */
gw_status_t gw_names_fetch_table(names_t *n, const char *addr, uint8_t **table, size_t *len, gw_nt_header_t *h,
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

/* ---- publishing ------------------------------------------------------------------------- */
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
    gw_status_t st = gw_names_get(ctx, &n);
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
    if (n->dir && n->name[0] && n->dir->ops->region_up)
        n->dir->ops->region_up(n->dir, name, mem);
    return GW_OK;
}

static void unpublish_at(names_t *n, size_t i)
{
    if (n->dir && n->name[0] && n->dir->ops->region_down)
        n->dir->ops->region_down(n->dir, n->pubs[i].name);
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
    names_t *n = ctx->ext;
    for (size_t i = 0; n && i < n->npubs; i++)
        if (!strcmp(n->pubs[i].name, name)) {
            unpublish_at(n, i);
            return GW_OK;
        }
    return gw_err(&ctx->core, GW_ERR_NOT_FOUND, "gw_mem_unpublish: no region is published as \"%s\"", name);
}

void gw_names_mem_gone(names_t *n, gw_mem_t *mem)
{
    for (size_t i = 0; i < n->npubs;) {
        if (n->pubs[i].mem == mem)
            unpublish_at(n, i);
        else
            i++;
    }
}

void gw_names_tables_free(names_t *n)
{
    for (size_t i = 0; i < n->npubs; i++)
        free(n->pubs[i].key);
    free(n->pubs);
    free(n->table);
    n->pubs = NULL;
    n->table = NULL;
    n->npubs = 0;
}
