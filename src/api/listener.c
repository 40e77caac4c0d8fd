/* SPDX-License-Identifier: Apache-2.0 */
/* listener.c - gw_listen, gw_accept and the listener's teardown (api layer).
 *
 * A listener accepts tcp connections and hands each to the handshake
 * (handshake.c); endpoints whose handshake completed wait on its joining
 * list until their further connections (tcp streams) have joined, then on
 * its ready list until gw_accept takes them.  An accepted endpoint owns all
 * its connections: destroying the listener right after gw_accept (as NCCL
 * does) leaves it whole.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api/api.h"
#include "api/handshake.h"
#include "core/sock.h"

/* ---- listener ----------------------------------------------------------------------- */
static void listener_event(void *arg, uint32_t events)
{
    gw_listener_t *l = arg;
    (void)events;
    for (int i = 0; i < 64; i++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        int fd = accept4(l->fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
                gw_log(GW_LOG_WARN, "accept on %s failed: %s", l->addr, strerror(errno));
            return;
        }
        char peer[64];
        gw_sock_addr_str((struct sockaddr *)&ss, peer, sizeof(peer));
        if (gw_hs_server_start(l, fd, peer) != GW_OK) {
            gw_log(GW_LOG_WARN, "dropping connection from %s: out of resources", peer);
            close(fd);
            continue;
        }
    }
}

gw_status_t gw_listen(gw_context_t *ctx, const char *addr, gw_listener_t **out)
{
    GW_API_LOCK(ctx);
    if (!ctx || !out)
        return gw_api_invalid(ctx ? &ctx->core : NULL, "gw_listen", "out is NULL");
    *out = NULL;
    gw_core_t *core = &ctx->core;
    if (!addr)
        return gw_err(core, GW_ERR_INVALID, "gw_listen: addr is NULL (\":0\" picks a port)");
    int usable = 0;
    for (int i = 0; i < GW_TL_COUNT; i++)
        usable += ctx->tl[i] != NULL;
    if (!usable)
        return gw_err(core, GW_ERR_NO_TRANSPORT, "gw_listen(%s): no transport is usable in this context", addr);
    struct sockaddr_storage ss;
    socklen_t sl;
    char why[256];
    gw_status_t st = gw_sock_resolve(addr, 1, &ss, &sl, why, sizeof(why));
    if (st != GW_OK)
        return gw_err(core, st, "gw_listen: %s", why);
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return gw_err(core, GW_ERR_SYSTEM, "gw_listen(%s): socket() failed: %s", addr, strerror(errno));
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    uint64_t sockbuf = 0;
    gw_settings_size(&core->settings, GW_SET_TCP_SOCKBUF, &sockbuf, why, sizeof(why));
    gw_sock_tune(fd, (int)sockbuf, 0); /* accepted sockets inherit the buffer sizes */
    if (bind(fd, (struct sockaddr *)&ss, sl) != 0) {
        st = gw_err(core, GW_ERR_ADDRESS, "gw_listen(%s): bind failed: %s", addr, strerror(errno));
        goto err_close;
    }
    if (listen(fd, 256) != 0) {
        st = gw_err(core, GW_ERR_SYSTEM, "gw_listen(%s): listen failed: %s", addr, strerror(errno));
        goto err_close;
    }
    gw_listener_t *l = calloc(1, sizeof(*l));
    if (!l) {
        st = gw_err(core, GW_ERR_NOMEM, "gw_listen: out of memory");
        goto err_close;
    }
    l->ctx = ctx;
    l->fd = fd;
    gw_list_init(&l->ready);
    gw_list_init(&l->joining);
    gw_list_init(&l->pending);
    struct sockaddr_storage bound;
    socklen_t bl = sizeof(bound);
    getsockname(fd, (struct sockaddr *)&bound, &bl);
    gw_sock_addr_str((struct sockaddr *)&bound, l->addr, sizeof(l->addr));
    if ((st = gw_io_add_cold(core, &l->io, fd, EPOLLIN, listener_event, l)) != GW_OK) {
        free(l);
        goto err_close;
    }
    if (!ctx->hs_poller && gw_core_add_poller(core, gw_hs_timeouts, ctx) == GW_OK)
        ctx->hs_poller = 1;
    gw_list_push_back(&ctx->listeners, &l->link);
    ctx->n_listeners++;
    *out = l;
    return GW_OK;
err_close:
    close(fd);
    return st;
}

gw_status_t gw_listener_addr(const gw_listener_t *l, char *buf, size_t len)
{
    GW_API_LOCK(l ? l->ctx : NULL);
    if (!l || !buf || !len)
        return gw_api_invalid(l ? &l->ctx->core : NULL, "gw_listener_addr", "%s", !buf ? "buf is NULL" : "len is 0");
    if ((size_t)snprintf(buf, len, "%s", l->addr) >= len)
        return gw_api_invalid(&l->ctx->core, "gw_listener_addr", "buf of %zu bytes is too small for \"%s\"", len,
                              l->addr);
    return GW_OK;
}

static int ready_nonempty(void *arg)
{
    return !gw_list_empty(&((gw_listener_t *)arg)->ready);
}

gw_status_t gw_accept(gw_listener_t *l, int timeout_ms, gw_ep_t **out)
{
    GW_API_LOCK(l ? l->ctx : NULL);
    if (!l || !out)
        return gw_api_invalid(l ? &l->ctx->core : NULL, "gw_accept", "out is NULL");
    *out = NULL;
    gw_context_t *ctx = l->ctx;
    if (gw_list_empty(&l->ready)) {
        if (timeout_ms == 0) {
            gw_progress(ctx);
            if (gw_list_empty(&l->ready))
                return GW_INPROGRESS;
        } else if (gw_ctx_progress_until(ctx, ready_nonempty, l, timeout_ms) != GW_OK) {
            return gw_err(&ctx->core, GW_ERR_TIMEOUT, "gw_accept on %s: no endpoint within %d ms (%lu handshake(s) failed)",
                          l->addr, timeout_ms, l->failed_handshakes);
        }
    }
    gw_list_t *f = gw_list_first(&l->ready);
    gw_list_del(f);
    gw_ep_t *ep = gw_container_of(f, gw_ep_t, link);
    ep->listener = NULL;
    l->accepted++;
    gw_list_push_back(&ctx->eps, &ep->link);
    ctx->n_eps++;
    *out = ep;
    return GW_OK;
}

void gw_listener_destroy(gw_listener_t *l)
{
    GW_API_LOCK(l ? l->ctx : NULL);
    if (!l)
        return;
    gw_context_t *ctx = l->ctx;
    gw_ctx_notify(ctx, GW_OBJ_LISTENER_GONE, l); /* e.g. an agent's listener: the agent ends */
    gw_hs_drop_pending(l);
    gw_list_t *p, *t;
    gw_list_t *queues[] = {&l->ready, &l->joining};
    for (size_t q = 0; q < GW_ARRAY_SIZE(queues); q++) {
        gw_list_for_each_safe(p, t, queues[q]) {
            gw_ep_t *ep = gw_container_of(p, gw_ep_t, link);
            gw_list_del(p);
            if (ep->tl)
                ep->ops->ep_close(ep->tl);
            gw_api_ep_free(ep);
        }
    }
    gw_io_del(&ctx->core, &l->io);
    close(l->fd);
    gw_list_del(&l->link);
    ctx->n_listeners--;
    if (!ctx->n_listeners && ctx->hs_poller) {
        gw_core_del_poller(&ctx->core, gw_hs_timeouts, ctx);
        ctx->hs_poller = 0;
    }
    free(l);
}
