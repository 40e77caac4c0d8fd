/* SPDX-License-Identifier: Apache-2.0 */
/* names.c - the names layer's set-up, its context-extension hooks and
 * teardown; agents (gw_agent_listen) and the directory calls.
 *
 * A context becomes an agent with gw_agent_listen(); gw_mem_publish()
 * puts a region's packed key into the agent's table (table.c).  Peers are
 * found through the backends of dir.h.  The api knows this layer only as
 * its context extension (api/api.h): it is told of teardown through the
 * one observer hook, carries the table in the handshake's names extension
 * and asks it to explain keys it voided.  See names_int.h for the files. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "names/names_int.h"

static void names_gone(void *ext, gw_obj_event_t ev, void *obj);
static gw_status_t names_fini(void *ext);

static const gw_ctx_ext_ops_t names_ext = {
    .name = "names",
    .hs_type = GW_HS_EXT_NAMES,
    .hs_version = 1,
    .hs_fill = gw_names_hs_fill,
    .hs_take = gw_names_hs_take,
    .gone = names_gone,
    .explain_key = gw_names_explain_key,
    .fini = names_fini,
};

static void names_free(names_t *n)
{
    if (n->dir)
        n->dir->ops->close(n->dir);
    if (n->p2p)
        n->p2p->ops->close(n->p2p);
    gw_names_events_fini(n);
    gw_names_tables_free(n);
    pthread_mutex_destroy(&n->ev_mu);
    free(n);
}

gw_status_t gw_names_get(gw_context_t *ctx, names_t **out)
{
    if (ctx->ext_ops == &names_ext) {
        *out = ctx->ext;
        return GW_OK;
    }
    gw_core_t *core = &ctx->core;
    if (ctx->ext_ops)
        return gw_err(core, GW_ERR_BUSY, "names: the context carries another extension (%s)", ctx->ext_ops->name);
    names_t *n = calloc(1, sizeof(*n));
    if (!n)
        return gw_err(core, GW_ERR_NOMEM, "names: out of memory");
    n->ctx = ctx;
    n->ev_fd = -1;
    n->table_dirty = 1;
    pthread_mutex_init(&n->ev_mu, NULL);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    n->epoch = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    gw_status_t st = gw_dir_p2p_open(n, &n->p2p);
    if (st != GW_OK)
        goto fail;
    const char *dir = gw_settings_str(&core->settings, GW_SET_DIRECTORY);
    if (dir[0] && (st = gw_dir_etcd_open(n, dir, &n->dir)) != GW_OK)
        goto fail;
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
        if ((st = gw_dir_p2p_add(n->p2p, tok, eq + 1)) != GW_OK) {
            st = gw_err(core, GW_ERR_CONFIG, "GPUWIRE_PEERS=\"%s\": %s", peers, core->errbuf);
            goto fail;
        }
    }
    gw_ctx_ext_attach(ctx, &names_ext, n);
    *out = n;
    return GW_OK;
fail:
    names_free(n);
    return st;
}

gw_status_t gw_ctx_ext_setup(gw_context_t *ctx)
{
    const gw_settings_t *s = &ctx->core.settings;
    if (!gw_settings_str(s, GW_SET_PEERS)[0] && !gw_settings_str(s, GW_SET_DIRECTORY)[0])
        return GW_OK;
    names_t *n;
    return gw_names_get(ctx, &n);
}

/* ---- agents -------------------------------------------------------------------------- */
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
    gw_status_t st = gw_names_get(ctx, &n);
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
    if (n->dir && n->dir->ops->agent_up && (st = n->dir->ops->agent_up(n->dir)) != GW_OK) {
        char keep[sizeof(core->errbuf)];
        snprintf(keep, sizeof(keep), "%s", core->errbuf);
        gw_listener_destroy(l); /* ends the agent */
        snprintf(core->errbuf, sizeof(core->errbuf), "%s", keep);
        return st;
    }
    gw_log(GW_LOG_INFO, "agent \"%s\" listens on %s (directory %s, epoch %llu)", name, n->addr,
           n->dir ? n->dir->ops->where(n->dir) : "none", (unsigned long long)n->epoch);
    *out = l;
    return GW_OK;
}

static void listener_gone(names_t *n, gw_listener_t *l)
{
    if (n->listener != l)
        return;
    if (n->dir && n->dir->ops->agent_down)
        n->dir->ops->agent_down(n->dir);
    n->listener = NULL;
    n->name[0] = '\0';
    n->addr[0] = '\0';
    n->table_dirty = 1;
}

/* ---- the observer and teardown ---------------------------------------------------------- */
static void names_gone(void *ext, gw_obj_event_t ev, void *obj)
{
    names_t *n = ext;
    switch (ev) {
    case GW_OBJ_EP_GONE: gw_names_ep_gone(n, obj); break;
    case GW_OBJ_MEM_GONE: gw_names_mem_gone(n, obj); break; /* its published names are withdrawn */
    case GW_OBJ_LISTENER_GONE: listener_gone(n, obj); break; /* an agent's listener: the agent ends */
    }
}

static gw_status_t names_fini(void *ext)
{
    names_t *n = ext;
    gw_status_t st = gw_names_peers_fini(n); /* BUSY (nothing done) while keys or the caller's objects live */
    if (st != GW_OK)
        return st;
    names_free(n); /* the backends first: the directory thread stops, the lease is revoked */
    return GW_OK;
}

/* ---- the directory calls ---------------------------------------------------------------- */
gw_status_t gw_directory_list(gw_context_t *ctx, int (*cb)(void *arg, const gw_dir_entry_t *e), void *arg)
{
    GW_API_LOCK(ctx);
    if (!ctx || !cb)
        return gw_api_invalid(ctx ? &ctx->core : NULL, "gw_directory_list", "cb is NULL");
    names_t *n;
    gw_status_t st = gw_names_get(ctx, &n);
    if (st != GW_OK)
        return st;
    gw_dir_t *d = n->dir ? n->dir : n->p2p;
    return d->ops->list(d, cb, arg);
}

gw_status_t gw_directory_describe(gw_context_t *ctx, char *buf, size_t len)
{
    GW_API_LOCK(ctx);
    if (!ctx || !buf || !len)
        return gw_api_invalid(ctx ? &ctx->core : NULL, "gw_directory_describe", "%s", !buf ? "buf is NULL" : "len is 0");
    names_t *n;
    gw_status_t st = gw_names_get(ctx, &n);
    if (st != GW_OK)
        return st;
    gw_dir_t *d = n->dir ? n->dir : n->p2p;
    d->ops->describe(d, buf, len);
    return GW_OK;
}
