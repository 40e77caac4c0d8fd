/* SPDX-License-Identifier: Apache-2.0 */
/* dir_p2p.c - the peer-to-peer backend: agent addresses given by
 * gw_peer_add() and GPUWIRE_PEERS.  No registry: each process maps names
 * to addresses itself, and the handshake checks that the agent at an
 * address has the name asked for. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "names/names_int.h"

typedef struct p2p_entry {
    char name[GW_NAME_MAX + 1];
    char addr[80];
} p2p_entry_t;

typedef struct p2p {
    gw_dir_t base;
    p2p_entry_t *e;
    size_t n, cap;
} p2p_t;

static p2p_entry_t *find(p2p_t *p, const char *name)
{
    for (size_t i = 0; i < p->n; i++)
        if (!strcmp(p->e[i].name, name))
            return &p->e[i];
    return NULL;
}

static int p2p_peek(gw_dir_t *d, const char *name, gw_dir_agent_t *out)
{
    p2p_entry_t *x = find((p2p_t *)d, name);
    if (!x)
        return 0;
    memset(out, 0, sizeof(*out));
    snprintf(out->name, sizeof(out->name), "%s", x->name);
    snprintf(out->addr, sizeof(out->addr), "%s", x->addr);
    out->listed = -1;
    return 1;
}

static gw_status_t p2p_lookup(gw_dir_t *d, const char *name, gw_dir_agent_t *out, const char *what)
{
    (void)what;
    return p2p_peek(d, name, out) ? GW_OK : GW_ERR_NOT_FOUND;
}

static gw_status_t p2p_watch(gw_dir_t *d)
{
    return gw_err(&d->n->ctx->core, GW_ERR_UNAVAILABLE,
                  "gw_peer_watch: no directory is set (GPUWIRE_DIRECTORY): peers given by address have no watch; "
                  "an endpoint's failure is what tells of them");
}

static gw_status_t p2p_list(gw_dir_t *d, int (*cb)(void *, const gw_dir_entry_t *), void *arg)
{
    (void)cb;
    (void)arg;
    return gw_err(&d->n->ctx->core, GW_ERR_UNAVAILABLE, "gw_directory_list: no directory is set (GPUWIRE_DIRECTORY)");
}

static void p2p_describe(gw_dir_t *d, char *buf, size_t len)
{
    snprintf(buf, len, "none (peer-to-peer: %zu agent address(es) from gw_peer_add/GPUWIRE_PEERS)", ((p2p_t *)d)->n);
}

static const char *p2p_where(gw_dir_t *d)
{
    (void)d;
    return "gw_peer_add/GPUWIRE_PEERS";
}

static void p2p_close(gw_dir_t *d)
{
    p2p_t *p = (p2p_t *)d;
    free(p->e);
    free(p);
}

static const gw_dir_ops_t p2p_ops = {
    .kind = "peer-to-peer",
    .lookup = p2p_lookup,
    .peek = p2p_peek,
    .watch = p2p_watch,
    .list = p2p_list,
    .describe = p2p_describe,
    .where = p2p_where,
    .close = p2p_close,
};

gw_status_t gw_dir_p2p_open(struct gw_names *n, gw_dir_t **out)
{
    p2p_t *p = calloc(1, sizeof(*p));
    if (!p)
        return gw_err(&n->ctx->core, GW_ERR_NOMEM, "names: out of memory");
    p->base.ops = &p2p_ops;
    p->base.n = n;
    *out = &p->base;
    return GW_OK;
}

gw_status_t gw_dir_p2p_add(gw_dir_t *d, const char *name, const char *addr)
{
    p2p_t *p = (p2p_t *)d;
    gw_core_t *core = &d->n->ctx->core;
    if (!gw_name_valid(name))
        return gw_err(core, GW_ERR_INVALID, "agent name \"%s\" is not 1..%d of [A-Za-z0-9._:@+-]", name, GW_NAME_MAX);
    if (!addr || !addr[0] || strlen(addr) >= sizeof(p->e[0].addr))
        return gw_err(core, GW_ERR_INVALID, "agent \"%s\": bad address \"%s\"", name, addr ? addr : "(null)");
    p2p_entry_t *x = find(p, name);
    if (!x) {
        if (p->n == p->cap) {
            size_t c = p->cap ? p->cap * 2 : 8;
            p2p_entry_t *e = realloc(p->e, c * sizeof(*e));
            if (!e)
                return gw_err(core, GW_ERR_NOMEM, "names: out of memory");
            p->e = e;
            p->cap = c;
        }
        x = &p->e[p->n++];
        snprintf(x->name, sizeof(x->name), "%s", name);
    }
    snprintf(x->addr, sizeof(x->addr), "%s", addr);
    return GW_OK;
}
