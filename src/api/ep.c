/* SPDX-License-Identifier: Apache-2.0 */
/* ep.c - the endpoint: make and free it, gw_connect, close, query (api layer).
 *
 * gw_connect resolves the peer, opens the first tcp connection and runs the
 * client side of the handshake (handshake.c) over it; the server side comes
 * from a listener (listener.c).  A connected endpoint keeps the handshake
 * socket as its control connection when the transport did not adopt it:
 * that socket closing means the peer is gone.
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
#include "proto/proto_integrity.h"

/* ---- make, free ------------------------------------------------------------------- */
gw_ep_t *gw_api_ep_new(gw_context_t *ctx, const char *peer)
{
    gw_ep_t *ep = calloc(1, sizeof(*ep));
    if (!ep)
        return NULL;
    gw_ep_base_init(&ep->base, &ctx->core);
    snprintf(ep->base.peer, sizeof(ep->base.peer), "%s", peer);
    ep->ctx = ctx;
    ep->tl_id = -1;
    ep->ctl_fd = -1;
    gw_list_init(&ep->link);
    gw_list_init(&ep->gone_link);
    gw_list_init(&ep->integ_link);
    return ep;
}

/* The context's poller of the endpoints that check integrity. */
static int integ_poll(void *arg)
{
    gw_context_t *ctx = arg;
    int ev = 0;
    gw_list_t *p, *t;
    gw_list_for_each_safe(p, t, &ctx->integ_eps)
        ev += gw_proto_integ_poll(&gw_container_of(p, gw_ep_t, integ_link)->base);
    return ev;
}

void gw_api_ep_describe(const gw_ep_t *ep, char *path, size_t cap)
{
    ep->ops->ep_describe(ep->tl, path, cap);
    if (ep->base.integ) {
        size_t pl = strlen(path);
        snprintf(path + pl, cap - pl, "; integrity: crc32c (%s)", gw_crc32c_impl());
    }
}

gw_status_t gw_api_ep_integ_on(gw_ep_t *ep)
{
    gw_context_t *ctx = ep->ctx;
    if (gw_list_empty(&ctx->integ_eps)) {
        gw_status_t st = gw_core_add_poller(&ctx->core, integ_poll, ctx);
        if (st != GW_OK)
            return st;
    }
    gw_list_push_back(&ctx->integ_eps, &ep->integ_link);
    return GW_OK;
}

void gw_api_ep_free(gw_ep_t *ep)
{
    if (ep->tl)
        ep->ops->ep_destroy(ep->tl);
    ep->tl = NULL;
    gw_ep_fail(&ep->base, GW_ERR_CANCELED, "endpoint closed");
    gw_list_del(&ep->gone_link);
    if (ep->base.integ) {
        gw_proto_integ_detach(&ep->base);
        gw_list_del(&ep->integ_link);
        if (gw_list_empty(&ep->ctx->integ_eps))
            gw_core_del_poller(&ep->ctx->core, integ_poll, ep->ctx);
    }
    if (ep->ctl_fd >= 0) {
        gw_io_del(&ep->ctx->core, &ep->ctl_io);
        close(ep->ctl_fd);
        ep->base.fail_fd = -1;
    }
    if (ep->token) {
        gw_context_t *ctx = ep->ctx;
        gw_hmap_del(&ctx->tokens, ep->token);
        ctx->closed_tokens[ctx->closed_next++ % GW_ARRAY_SIZE(ctx->closed_tokens)] = ep->token;
    }
    gw_ctx_notify(ep->ctx, GW_OBJ_EP_GONE, ep); /* the extension's state of it goes too */
    gw_ep_base_fini(&ep->base);
    free(ep);
}

void gw_ep_void_keys(gw_ep_t *ep, const char *why)
{
    ep->keys_void = 1;
    if (ep->base.error == GW_OK) /* its peer is gone for good: so is the endpoint */
        gw_ep_fail(&ep->base, GW_ERR_CONN_RESET, "%s", why);
}

static void ctl_event(void *arg, uint32_t events)
{
    gw_ep_t *ep = arg;
    char buf[256];
    ssize_t n = recv(ep->ctl_fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR)))
        return;
    (void)events;
    gw_io_del(&ep->ctx->core, &ep->ctl_io);
    close(ep->ctl_fd);
    ep->ctl_fd = -1;
    ep->base.fail_fd = -1;
    /* The peer may have closed right after its last message completed: that
     * message's completion can sit in our CQ while this event runs first (fd
     * callbacks run before the pollers).  Failing now would flush the receive
     * it completes, so the failure waits for the end of the pass. */
    if (ep->state == GW_EP_READY && gw_list_empty(&ep->gone_link))
        gw_list_push_back(&ep->ctx->ctl_gone, &ep->gone_link);
}

void gw_api_ep_ctl_reap(gw_context_t *ctx)
{
    /* the pollers ran once in this pass; run them until idle (bounded, so an
     * endpoint streaming without pause cannot postpone the failure) */
    for (int i = 0; i < 64 && gw_core_poll(&ctx->core) > 0; i++)
        ;
    gw_list_t *l;
    while ((l = gw_list_first(&ctx->ctl_gone)) != NULL) {
        gw_list_del(l);
        gw_ep_t *ep = gw_container_of(l, gw_ep_t, gone_link);
        if (ep->state == GW_EP_READY)
            gw_ep_fail(&ep->base, GW_ERR_CONN_RESET,
                       "control connection to %s closed (the peer exited, or failed or closed its endpoint)",
                       ep->base.peer);
    }
}

void gw_api_ep_keep_ctl(gw_ep_t *ep, int fd)
{
    ep->ctl_fd = fd;
    ep->base.fail_fd = fd;
    gw_sock_nonblock(fd, 1);
    gw_io_add_cold(&ep->ctx->core, &ep->ctl_io, fd, EPOLLIN, ctl_event, ep);
}

/* ---- connect ------------------------------------------------------------------------ */
gw_status_t gw_connect(gw_context_t *ctx, const char *addr, gw_ep_t **out)
{
    GW_API_LOCK(ctx);
    if (!ctx || !out || !addr)
        return gw_api_invalid(ctx ? &ctx->core : NULL, "gw_connect", "%s is NULL", !out ? "out" : "addr");
    *out = NULL;
    gw_core_t *core = &ctx->core;
    struct sockaddr_storage ss;
    socklen_t sl;
    char why[256];
    gw_status_t st = gw_sock_resolve(addr, 0, &ss, &sl, why, sizeof(why));
    if (st != GW_OK)
        return gw_err(core, st, "gw_connect: %s", why);
    char peer[64];
    gw_sock_addr_str((struct sockaddr *)&ss, peer, sizeof(peer));
    int usable = 0;
    char none[512] = "";
    size_t nl = 0;
    for (int i = 0; i < ctx->tl_norder; i++) {
        int id = ctx->tl_order[i];
        usable += ctx->tl[id] != NULL;
        if (!ctx->tl[id] && nl < sizeof(none))
            nl += (size_t)snprintf(none + nl, sizeof(none) - nl, "%s%s: %s", nl ? "; " : "", gw_tl_names[id],
                                   ctx->tl_why[id]);
    }
    if (!usable) /* say so before bothering the peer */
        return gw_err(core, GW_ERR_NO_TRANSPORT, "gw_connect(%s): no transport usable here (%s)", addr, none);
    uint64_t sockbuf = 0;
    gw_settings_size(&core->settings, GW_SET_TCP_SOCKBUF, &sockbuf, why, sizeof(why));
    int fd = gw_sock_connect(&ss, sl, (int)sockbuf, (int)ctx->connect_timeout_ms);
    if (fd < 0) {
        int e = errno;
        return gw_err(core, e == ETIMEDOUT ? GW_ERR_TIMEOUT : e == ECONNREFUSED ? GW_ERR_CONN_REFUSED : GW_ERR_CONN_RESET,
                      "gw_connect(%s): connect failed: %s", addr, strerror(e));
    }
    gw_ep_t *ep = gw_api_ep_new(ctx, peer);
    if (!ep) {
        close(fd);
        return gw_err(core, GW_ERR_NOMEM, "gw_connect(%s): out of memory", addr);
    }
    st = gw_hs_connect(ep, fd, &ss, sl, addr); /* owns fd from here */
    if (st != GW_OK) {
        char keep[sizeof(core->errbuf)]; /* the handshake's reason, not the endpoint's teardown */
        snprintf(keep, sizeof(keep), "%s", core->errbuf);
        gw_api_ep_free(ep);
        snprintf(core->errbuf, sizeof(core->errbuf), "%s", keep);
        return st;
    }
    gw_list_push_back(&ctx->eps, &ep->link);
    ctx->n_eps++;
    gw_log(GW_LOG_INFO, "connected to %s: %s", ep->base.peer, ep->path);
    *out = ep;
    return GW_OK;
}

/* ---- close, query ------------------------------------------------------------------- */
static int idle(void *arg)
{
    gw_ep_t *ep = arg;
    return (gw_list_empty(&ep->base.outstanding) && !gw_proto_integ_busy(&ep->base)) || ep->base.error != GW_OK;
}

gw_status_t gw_ep_close(gw_ep_t *ep, int timeout_ms)
{
    GW_API_LOCK(GW_CTX_OF_EP(ep));
    if (!ep)
        return GW_OK;
    gw_context_t *ctx = ep->ctx;
    if (ep->n_rkeys)
        return gw_err(&ctx->core, GW_ERR_BUSY, "gw_ep_close(%s): %zu remote key(s) unpacked on it or remote "
                      "descriptor list(s) prepared for it are alive; destroy them first", ep->base.peer, ep->n_rkeys);
    if (ep->state == GW_EP_READY && !idle(ep))
        gw_ctx_progress_until(ctx, idle, ep, timeout_ms);
    if (ep->tl && ep->base.error == GW_OK)
        ep->ops->ep_close(ep->tl);
    ep->state = GW_EP_CLOSING;
    gw_list_del(&ep->link);
    ctx->n_eps--;
    gw_api_ep_free(ep);
    return GW_OK;
}

gw_status_t gw_ep_query(const gw_ep_t *ep, gw_ep_info_t *info)
{
    GW_API_LOCK(GW_CTX_OF_EP(ep));
    if (!ep || !GW_API_SIZE_OK(info))
        return gw_api_bad_struct(ep ? &ep->ctx->core : NULL, "gw_ep_query", "info", info ? &info->size : NULL);
    gw_ep_info_t o;
    memset(&o, 0, sizeof(o));
    o.size = info->size;
    snprintf(o.transport, sizeof(o.transport), "%s", ep->tl_id >= 0 ? gw_tl_names[ep->tl_id] : "none");
    snprintf(o.peer, sizeof(o.peer), "%s", ep->base.peer);
    if (ep->tl)
        gw_api_ep_describe(ep, o.path, sizeof(o.path));
    else
        snprintf(o.path, sizeof(o.path), "%s", ep->path);
    snprintf(o.downgrades, sizeof(o.downgrades), "%s", ep->downgrades);
    o.error = ep->base.error;
    snprintf(o.error_detail, sizeof(o.error_detail), "%s", ep->base.error_detail);
    memcpy(info, &o, GW_MIN(info->size, sizeof(o)));
    return GW_OK;
}
