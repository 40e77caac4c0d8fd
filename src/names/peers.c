/* SPDX-License-Identifier: Apache-2.0 */
/* peers.c - peers by name: endpoints, keys, epochs and restarts.
 *
 * Where an agent listens comes from the backends (dir.h): the addresses
 * given first, then the directory.  gw_peer_ep() connects on first use and
 * reuses the endpoint; the handshake's names extension says which agent
 * answered (table.c).  Epochs: an agent's epoch is the etcd revision of
 * its registration (with a directory) or its start time in ns (without);
 * a restarted agent also has a new context uuid, and that uuid is what
 * proves a restart.  Endpoints to an agent that restarted are retired:
 * kept until the context goes (a pointer the caller holds stays valid),
 * failed, and their keys declared void (gw_ep_void_keys), so that an old
 * key fails with GW_ERR_INVALID_KEY on the old endpoint and, as a key of
 * another endpoint, on the new one - both refusals the api makes anyway;
 * the names layer only explains them (gw_names_explain_key).  Nothing of
 * this runs on the put path. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "names/names_int.h"

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
    gw_status_t st = gw_names_get(ctx, &n);
    if (st != GW_OK)
        return st;
    return gw_dir_p2p_add(n->p2p, name, addr);
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

/* Agent `name` restarted (a new context answers): the retired endpoints of
 * its earlier lives are failed and their keys void. */
static void void_old(names_t *n, const char *name, uint64_t uuid_now, uint64_t epoch_now)
{
    for (size_t i = 0; i < n->nretired; i++) {
        gw_ep_t *r = n->retired[i];
        names_ep_t *ne = gw_names_ep(r);
        if (!ne || strcmp(ne->name, name) != 0 || ne->uuid == uuid_now)
            continue;
        ne->newer_epoch = epoch_now;
        char why[200];
        snprintf(why, sizeof(why), "agent \"%s\" restarted (epoch %llu -> %llu): this endpoint reached its earlier "
                 "context", name, (unsigned long long)ne->epoch, (unsigned long long)epoch_now);
        gw_ep_void_keys(r, why);
    }
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
    gw_status_t st = gw_names_get(ctx, &n);
    if (st != GW_OK)
        return st;
    peer_t *p = find_peer(n, name);
    if (p && p->ep && ep_healthy(p->ep)) {
        int moved = 0, gone = 0;
        gw_dir_agent_t c;
        if (p->via && p->via == n->dir && n->dir->ops->peek(n->dir, name, &c) == 1) {
            /* the watch may have seen the agent leave or restart */
            moved = c.listed && c.uuid && c.uuid != p->ep->peer_uuid;
            gone = !c.listed;
        }
        if (gone) /* its lease ran out: let a failure of the connection land before trusting it */
            for (int i = 0; i <= (int)GW_CORE_COLD_EVERY && ep_healthy(p->ep); i++)
                gw_progress(ctx);
        if (!moved && ep_healthy(p->ep)) {
            *out = p->ep;
            return GW_OK;
        }
    }
    /* the backends in order: addresses given, then the directory */
    gw_dir_agent_t d;
    gw_dir_t *via = n->p2p;
    st = via->ops->lookup(via, name, &d, what);
    if (st == GW_ERR_NOT_FOUND && n->dir) {
        via = n->dir;
        st = via->ops->lookup(via, name, &d, what);
    } else if (st == GW_ERR_NOT_FOUND) {
        return gw_err(core, GW_ERR_NOT_FOUND,
                      "%s: no agent \"%s\" is known: no directory is set (GPUWIRE_DIRECTORY) and neither gw_peer_add() "
                      "nor GPUWIRE_PEERS names it",
                      what, name);
    }
    if (st != GW_OK)
        return st;
    if (!p && !(p = new_peer(n, name)))
        return gw_err(core, GW_ERR_NOMEM, "%s: out of memory", what);
    gw_ep_t *old = p->ep;
    if (old) {
        p->ep = NULL;
        if ((st = retire(n, old)) != GW_OK)
            return st;
    }
    gw_ep_t *ep;
    const char *from = via->ops->where(via);
    if ((st = gw_connect(ctx, d.addr, &ep)) != GW_OK) {
        char keep[sizeof(core->errbuf)];
        snprintf(keep, sizeof(keep), "%s", core->errbuf);
        return gw_err(core, st, "%s: agent at %s (from %s): %s", what, d.addr, from, keep);
    }
    names_ep_t *ne = gw_names_ep(ep);
    if (!ne || !ne->table || strcmp(ne->name, name) != 0) {
        char other[80];
        snprintf(other, sizeof(other), "%s", ne && ne->table ? ne->name : "");
        gw_ep_close(ep, 0);
        return gw_err(core, GW_ERR_NOT_FOUND, "%s: the peer at %s (from %s) %s%s%s, not \"%s\"", what, d.addr, from,
                      other[0] ? "is agent \"" : "is no agent (it sent no names table)", other, other[0] ? "\"" : "",
                      name);
    }
    ne->owned = 1;
    if (p->uuid && p->uuid != ep->peer_uuid) {
        p->restarts++;
        gw_log(GW_LOG_INFO, "agent \"%s\" restarted: epoch %llu -> %llu", name, (unsigned long long)p->epoch,
               (unsigned long long)ne->epoch);
        void_old(n, name, ep->peer_uuid, ne->epoch);
    }
    p->uuid = ep->peer_uuid;
    p->epoch = ne->epoch;
    p->ep = ep;
    p->via = via;
    *out = ep;
    return GW_OK;
}

static int table_find(const names_ep_t *ne, const char *name, gw_nt_entry_t *e)
{
    /* (a kept table was checked when it came: gw_nt_decode) */
    return ne && ne->table ? gw_nt_find(ne->table, ne->table_len, name, e) : -1;
}

static void table_names(const names_ep_t *ne, char *out, size_t cap)
{
    size_t o = 0, off = 0, count = 0;
    gw_nt_entry_t e;
    out[0] = '\0';
    while (ne && ne->table && gw_nt_next(ne->table, ne->table_len, &off, &e)) {
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
    names_t *n = ctx->ext;
    for (int attempt = 0; attempt < 2; attempt++) {
        names_ep_t *ne = gw_names_ep(ep);
        size_t missing = cnt;
        gw_nt_entry_t e;
        for (size_t i = 0; i < cnt; i++)
            if (table_find(ne, names[i], &e) != 0) {
                missing = i;
                break;
            }
        if (missing == cnt)
            break;
        if (attempt == 1) {
            char have[256];
            table_names(ne, have, sizeof(have));
            return gw_err(core, GW_ERR_NOT_FOUND,
                          "gw_peer_regions(%s): agent \"%s\" (epoch %llu at %s) publishes no region \"%s\" (it "
                          "publishes: %s)",
                          peer, peer, (unsigned long long)ne->epoch, ep->base.peer, names[missing],
                          have[0] ? have : "nothing");
        }
        /* a miss: the agent may have published it since we connected */
        uint8_t *t = NULL;
        size_t tl = 0;
        gw_nt_header_t h;
        char why[256];
        st = gw_names_fetch_table(n, ep->base.peer, &t, &tl, &h, why, sizeof(why));
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
        free(ne->table);
        ne->table = t;
        ne->table_len = tl;
        ne->epoch = h.epoch;
    }
    names_ep_t *ne = gw_names_ep(ep);
    for (size_t i = 0; i < cnt; i++) {
        gw_nt_entry_t e;
        table_find(ne, names[i], &e);
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

/* The api refused rkey on ep (a key of another endpoint, or ep's keys are
 * void): when an agent's restart is the reason, say so. */
int gw_names_explain_key(void *ext, const gw_ep_t *ep, const gw_rkey_t *rkey, char *buf, size_t cap)
{
    (void)ext;
    const gw_ep_t *kep = rkey ? rkey->ep : ep;
    names_ep_t *kn = kep ? gw_names_ep(kep) : NULL, *en = gw_names_ep(ep);
    if (!kn || !kn->name[0])
        return 0;
    uint64_t now_epoch = kn->newer_epoch;
    if (!now_epoch && en && kep != ep && !strcmp(kn->name, en->name) && kn->uuid != en->uuid)
        now_epoch = en->epoch;
    if (!now_epoch)
        return 0;
    snprintf(buf, cap,
             "the key is from agent \"%s\" at epoch %llu, which restarted (now epoch %llu): keys of the old epoch are "
             "void; gw_peer_regions() returns the new ones",
             kn->name, (unsigned long long)kn->epoch, (unsigned long long)now_epoch);
    return 1;
}

gw_status_t gw_peer_query(gw_context_t *ctx, const char *name, gw_peer_info_t *info)
{
    GW_API_LOCK(ctx);
    if (!ctx || !name || !GW_API_SIZE_OK(info))
        return !ctx || name ? gw_api_bad_struct(ctx ? &ctx->core : NULL, "gw_peer_query", "info", info ? &info->size : NULL)
                            : gw_api_invalid(&ctx->core, "gw_peer_query", "name is NULL");
    names_t *n = ctx->ext;
    peer_t *p = n ? find_peer(n, name) : NULL;
    gw_peer_info_t o;
    memset(&o, 0, sizeof(o));
    o.size = info->size;
    o.listed = -1;
    int known = p != NULL;
    gw_dir_agent_t a;
    if (p) {
        if (p->ep)
            snprintf(o.addr, sizeof(o.addr), "%s", p->ep->base.peer);
        o.epoch = p->epoch;
        o.connected = p->ep && ep_healthy(p->ep);
        o.restarts = p->restarts;
    }
    if (n && n->p2p->ops->peek(n->p2p, name, &a) == 1) {
        known = 1;
        if (!o.addr[0])
            snprintf(o.addr, sizeof(o.addr), "%s", a.addr);
    }
    int r = n && n->dir ? n->dir->ops->peek(n->dir, name, &a) : 0;
    if (r == 1) {
        known = 1;
        o.listed = a.listed;
        o.changes = a.changes;
        if (!o.addr[0])
            snprintf(o.addr, sizeof(o.addr), "%s", a.addr);
        if (!o.epoch)
            o.epoch = (uint64_t)a.epoch;
    } else if (r == 2) {
        o.listed = 0;
    }
    if (!known)
        return gw_err(&ctx->core, GW_ERR_NOT_FOUND, "gw_peer_query: this context knows no agent \"%s\"", name);
    memcpy(info, &o, GW_MIN(info->size, sizeof(o)));
    return GW_OK;
}

void gw_names_ep_gone(names_t *n, gw_ep_t *ep)
{
    if (!n->closing) {
        for (peer_t *p = n->peers; p; p = p->next)
            if (p->ep == ep)
                p->ep = NULL;
        for (size_t i = 0; i < n->nretired; i++)
            if (n->retired[i] == ep) {
                n->retired[i] = n->retired[--n->nretired];
                break;
            }
    }
    names_ep_t *ne = ep->ext;
    if (ne) {
        free(ne->table);
        free(ne);
        ep->ext = NULL;
    }
}

gw_status_t gw_names_peers_fini(names_t *n)
{
    gw_context_t *ctx = n->ctx;
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
    if (ctx->n_eps > owned || ctx->n_listeners || ctx->n_mems) /* the caller's own objects: nothing changes */
        return gw_err(&ctx->core, GW_ERR_BUSY,
                      "gw_context_destroy: %zu endpoint(s), %zu listener(s) and %zu memory region(s) are still alive; "
                      "close, destroy and deregister them first",
                      ctx->n_eps - owned, ctx->n_listeners, ctx->n_mems);
    n->closing = 1;
    for (size_t i = 0; i < n->nretired; i++)
        gw_ep_close(n->retired[i], 0);
    for (peer_t *p = n->peers; p; p = p->next)
        if (p->ep)
            gw_ep_close(p->ep, 0);
    while (n->peers) {
        peer_t *p = n->peers;
        n->peers = p->next;
        free(p);
    }
    free(n->retired);
    n->retired = NULL;
    n->nretired = 0;
    return GW_OK;
}
