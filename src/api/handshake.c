/* SPDX-License-Identifier: Apache-2.0 */
/* handshake.c - the endpoint handshake of both sides (api layer).
 *
 * ep.c (gw_connect) and listener.c (accepted sockets, deadlines) start it;
 * it ends with a connected endpoint or a failure with the reason.
 *
 * Handshake (wire format in bootstrap/wire.h), over the first tcp
 * connection, each step bounded by GPUWIRE_CONNECT_TIMEOUT_MS:
 *   client HELLO   uuid, host, nonce_c, allowed transports in preference
 *                  order, an address blob for each usable one, AUTH flag
 *   server ACCEPT  uuid, host, nonce_s, the chosen transport and its blob,
 *                  why better ones were not taken, HMAC proof when auth is on
 *   client CONFIRM HMAC proof when auth is on
 *   server READY   endpoint token (names the endpoint in tcp stream joins)
 * Either side answers a bad message with ERROR (status + reason) and closes.
 * The server decides the transport, so both sides always agree.  No memory
 * is reachable before READY: remote keys travel only afterwards.
 */
#include <errno.h>
#include <stdarg.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api.h"
#include "api/handshake.h"
#include "api/auth.h"
#include "bootstrap/wire.h"
#include "core/sock.h"
#include "proto/proto_integrity.h"
#include "transport/base/liveness.h"


#define BLOB_MAX 1024

_Static_assert(GW_TL_COUNT <= GW_HS_MAX_TL, "a HELLO offers every transport: raise GW_HS_MAX_TL");
_Static_assert(GW_TL_COUNT < GW_HS_NO_TL, "transport ids are one byte on the wire, 0xff reserved");

typedef enum { HS_FIRST, HS_WAIT_ACCEPT, HS_WAIT_CONFIRM, HS_WAIT_READY, HS_DONE, HS_FAILED } hs_state_t;

struct gw_hs {
    gw_context_t *ctx;
    gw_listener_t *l; /* server side */
    gw_ep_t *ep;
    int fd;
    gw_io_t io;
    int io_on;
    int is_server;
    hs_state_t state;
    uint8_t in[GW_HS_HDR_LEN + GW_HS_MAX_BODY];
    size_t in_len, in_need;
    uint8_t nonce_local[GW_HS_NONCE_LEN], nonce_peer[GW_HS_NONCE_LEN];
    uint64_t peer_host;
    uint32_t peer_pid;   /* the peer's pid when it is on this host in our pid namespace, else 0 */
    uint32_t peer_flags; /* the flags of the peer's HELLO (server) or ACCEPT (client) */
    uint64_t deadline_ns;
    gw_tl_ep_t *tl_eps[GW_TL_COUNT];
    uint8_t peer_blob[BLOB_MAX];
    size_t peer_blob_len;
    int chosen;
    int ext_only;        /* server: a HELLO that asked for the context extension's payload only */
    uint64_t peer_uuid;  /* server, extension only (no endpoint holds it) */
    long ext_req;        /* server, extension only: the argument asked with it, -1 none */
    gw_status_t result;
    char peer[64];
    struct sockaddr_storage ss; /* client: where further streams connect */
    socklen_t sslen;
    gw_list_t link;
};
typedef struct gw_hs gw_hs_t;

static void hs_event(void *arg, uint32_t events);

/* ---- helpers ---------------------------------------------------------------------- */
static int tl_allowed(const gw_context_t *ctx, int id)
{
    for (int i = 0; i < ctx->tl_norder; i++)
        if (ctx->tl_order[i] == id)
            return 1;
    return 0;
}

static void hs_destroy_tl_eps(gw_hs_t *hs, int keep)
{
    for (int i = 0; i < GW_TL_COUNT; i++) {
        if (hs->tl_eps[i] && i != keep) {
            hs->ctx->tl[i]->ops->ep_destroy(hs->tl_eps[i]);
            hs->tl_eps[i] = NULL;
        }
    }
}

static gw_status_t hs_send(gw_hs_t *hs, const gw_hs_msg_t *m)
{
    uint8_t buf[GW_HS_HDR_LEN + GW_HS_MAX_BODY]; /* not static: other threads' contexts handshake too */
    size_t n = gw_hs_encode(m, buf, sizeof(buf));
    if (!n)
        return gw_err(&hs->ctx->core, GW_ERR_INVALID, "handshake message type %u does not fit %d bytes", m->type,
                      GW_HS_MAX_BODY);
    if (gw_sock_write_full(hs->fd, buf, n, 2000) != 0)
        return gw_err(&hs->ctx->core, GW_ERR_CONN_RESET, "sending handshake message to %s failed: %s", hs->peer,
                      strerror(errno));
    return GW_OK;
}

static void hs_io_off(gw_hs_t *hs)
{
    if (hs->io_on) {
        gw_io_del(&hs->ctx->core, &hs->io);
        hs->io_on = 0;
    }
}

static void hs_free(gw_hs_t *hs)
{
    hs_io_off(hs);
    if (hs->fd >= 0)
        close(hs->fd);
    hs_destroy_tl_eps(hs, -1);
    if (hs->l)
        gw_list_del(&hs->link);
    if (hs->ep)
        hs->ep->hs = NULL;
    free(hs);
}

/* A server handshake ends without an endpoint: frees the one it made too. */
static void hs_free_with_ep(gw_hs_t *hs)
{
    hs_destroy_tl_eps(hs, -1); /* they point into the endpoint: before it goes */
    if (hs->ep) {
        hs->ep->hs = NULL;
        gw_api_ep_free(hs->ep);
        hs->ep = NULL;
    }
    hs_free(hs);
}

/* Fails a handshake: tells the peer why (unless it told us), records the
 * reason, and frees what the handshake made. */
static void hs_fail(gw_hs_t *hs, gw_status_t st, int tell_peer, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static void hs_fail(gw_hs_t *hs, gw_status_t st, int tell_peer, const char *fmt, ...)
{
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    if (tell_peer && hs->fd >= 0) {
        gw_hs_msg_t m;
        memset(&m, 0, sizeof(m));
        m.type = GW_HS_ERROR;
        m.status = st;
        snprintf(m.text, sizeof(m.text), "%s", why);
        gw_sock_nonblock(hs->fd, 1);
        uint8_t buf[GW_HS_HDR_LEN + 1024];
        size_t n = gw_hs_encode(&m, buf, sizeof(buf));
        if (n) {
            ssize_t w = send(hs->fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT);
            (void)w;
        }
    }
    hs->state = HS_FAILED;
    hs->result = st;
    if (hs->is_server) {
        hs->l->failed_handshakes++;
        hs->l->last_failure = st;
        snprintf(hs->l->last_failure_detail, sizeof(hs->l->last_failure_detail), "from %s: %.300s", hs->peer, why);
        gw_log(GW_LOG_WARN, "handshake from %s on %s refused: %s (%s)", hs->peer, hs->l->addr, why,
               gw_status_name(st));
        hs_free_with_ep(hs);
    } else {
        gw_err(&hs->ctx->core, st, "connect to %s: %s", hs->peer, why);
        hs->ep->state = GW_EP_FAILED;
        hs_io_off(hs);
        hs_destroy_tl_eps(hs, -1);
    }
}

/* Reads at most the rest of the current message.  1: a whole message is in
 * hs->in; 0: need more; -1: failed (hs may be freed). */
static int hs_read(gw_hs_t *hs)
{
    for (;;) {
        ssize_t n = recv(hs->fd, hs->in + hs->in_len, hs->in_need - hs->in_len, MSG_DONTWAIT);
        if (n == 0) {
            hs_fail(hs, GW_ERR_CONN_RESET, 0, "peer closed the connection during the handshake%s",
                    hs->in_len ? " (in the middle of a message: truncated)" : "");
            return -1;
        }
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            hs_fail(hs, GW_ERR_CONN_RESET, 0, "recv failed during the handshake: %s", strerror(errno));
            return -1;
        }
        hs->in_len += (size_t)n;
        if (hs->in_len < hs->in_need)
            continue;
        if (hs->in_need == GW_HS_HDR_LEN) {
            uint16_t ver, type;
            uint32_t body;
            char why[256];
            gw_status_t st = gw_hs_decode_header(hs->in, hs->in_len, &ver, &type, &body, why, sizeof(why));
            if (st != GW_OK) {
                hs_fail(hs, st, 1, "%s", why);
                return -1;
            }
            hs->in_need = GW_HS_HDR_LEN + body;
            if (body)
                continue;
        }
        return 1;
    }
}

static int open_stream_cb(void *arg, unsigned idx);

/* ---- server side -------------------------------------------------------------------- */
/* An accepted endpoint goes to its listener's ready list for gw_accept:
 * from the joining list once its further connections all joined (or failed,
 * or ran past the deadline), at once when it has none. */
static void server_ep_ready(gw_ep_t *ep)
{
    gw_listener_t *l = ep->listener;
    gw_list_del(&ep->link);
    ep->joins_left = 0;
    gw_api_ep_describe(ep, ep->path, sizeof(ep->path));
    gw_list_push_back(&l->ready, &ep->link);
    gw_log(GW_LOG_INFO, "endpoint from %s accepted on %s: %s", ep->base.peer, l->addr, ep->path);
    gw_core_signal(&ep->ctx->core);
}

/* One further connection of ep arrived (or will not: ep failed). */
static void server_ep_joined(gw_ep_t *ep)
{
    if (!ep || !ep->listener || !ep->joins_left)
        return; /* handed out already (a late connection past the deadline) */
    if (--ep->joins_left == 0 || ep->state != GW_EP_READY || ep->base.error != GW_OK)
        server_ep_ready(ep);
}

/* ---- server side: handshake steps -------------------------------------------------------------------- */
static void server_on_join(gw_hs_t *hs, const gw_hs_msg_t *m)
{
    gw_context_t *ctx = hs->ctx;
    gw_ep_t *ep = gw_hmap_get(&ctx->tokens, m->token);
    int gone = ep && (ep->state != GW_EP_READY || !ep->tl || ep->base.error != GW_OK);
    for (size_t i = 0; !ep && m->token && i < GW_ARRAY_SIZE(ctx->closed_tokens); i++)
        gone |= ctx->closed_tokens[i] == m->token;
    if (gone) {
        /* the endpoint was closed (or failed) before the client's further
         * streams arrived, e.g. closed right after gw_accept: its client
         * learns that from stream 0; nothing here is wrong */
        gw_log(GW_LOG_DEBUG, "stream %u from %s joins an endpoint closed already (token %016llx): dropped",
               m->stream, hs->peer, (unsigned long long)m->token);
        hs_free(hs);
        server_ep_joined(ep); /* a failed endpoint not yet accepted: gw_accept hands it out failed */
        return;
    }
    if (!ep) {
        hs_fail(hs, GW_ERR_PROTOCOL, 1, "stream join names no live endpoint (token %016llx)",
                (unsigned long long)m->token);
        return;
    }
    hs_io_off(hs);
    int fd = hs->fd;
    hs->fd = -1;
    gw_status_t st = ep->ops->ep_join(ep->tl, fd, m->stream);
    if (st != GW_OK) /* expected when the endpoint failed or is closing; a bug otherwise */
        gw_log(ep->base.error != GW_OK ? GW_LOG_DEBUG : GW_LOG_WARN, "stream %u from %s refused: %s", m->stream,
               hs->peer, ctx->core.errbuf);
    hs_free(hs);
    server_ep_joined(ep);
}

/* This process's pid namespace (the inode of /proc/self/ns/pid), 0 unknown. */
static uint64_t pid_ns(void)
{
    struct stat sb;
    return stat("/proc/self/ns/pid", &sb) == 0 ? ((uint64_t)sb.st_dev << 40) ^ (uint64_t)sb.st_ino : 0;
}

/* Takes the peer's pid from its HELLO or ACCEPT where it means the same
 * process here: the same host and the same pid namespace. */
static void note_peer_pid(gw_hs_t *hs, const gw_hs_msg_t *m)
{
    uint64_t ns = pid_ns();
    hs->peer_pid = m->pid && ns && m->pid_ns == ns && m->host_id == hs->ctx->core.host_id ? m->pid : 0;
}

static void put_pid(gw_hs_msg_t *m)
{
    m->pid = (uint32_t)getpid();
    m->pid_ns = pid_ns();
    if (!m->pid_ns)
        m->pid = 0;
}

static gw_status_t hs_send_accept(gw_hs_t *hs, gw_hs_msg_t *a, uint64_t peer_uuid)
{
    gw_context_t *ctx = hs->ctx;
    a->type = GW_HS_ACCEPT;
    a->uuid = ctx->core.uuid;
    a->host_id = ctx->core.host_id;
    put_pid(a);
    gw_random_bytes(hs->nonce_local, GW_HS_NONCE_LEN);
    memcpy(a->nonce, hs->nonce_local, GW_HS_NONCE_LEN);
    a->has_nonce = 1;
    a->has_chosen = 1;
    a->flags |= GW_HS_FLAG_INTEG_CAP | (ctx->integrity ? GW_HS_FLAG_INTEG_ON : 0);
    if (ctx->auth_enabled) {
        a->flags |= GW_HS_FLAG_AUTH;
        if (gw_auth_mac(ctx->auth_secret, ctx->auth_secret_len, "gpuwire-server", hs->nonce_peer, hs->nonce_local,
                        peer_uuid, ctx->core.uuid, a->mac) != 0)
            return gw_err(&ctx->core, GW_ERR_AUTH, "server could not compute its HMAC");
        a->has_mac = 1;
    }
    return hs_send(hs, a);
}

/* A HELLO that wants the context extension's payload only (names: the
 * agent's table, or a piece of it): prove ourselves as usual, make no
 * endpoint; the payload goes out after the client's proof (CONFIRM). */
static void server_ext_hello(gw_hs_t *hs, const gw_hs_msg_t *m)
{
    const gw_ctx_ext_ops_t *x = hs->ctx->ext_ops;
    if (!m->has_ext_req || !x || m->ext_req_type != x->hs_type || m->ext_req_version != x->hs_version) {
        hs_fail(hs, GW_ERR_UNSUPPORTED, 1, "extension-only handshake for extension %u version %u: this server %s%s",
                m->has_ext_req ? (unsigned)m->ext_req_type : 0u, m->has_ext_req ? (unsigned)m->ext_req_version : 0u,
                x ? "carries " : "carries no extension", x ? x->name : "");
        return;
    }
    memcpy(hs->nonce_peer, m->nonce, GW_HS_NONCE_LEN);
    hs->peer_uuid = m->uuid;
    hs->ext_only = 1;
    hs->ext_req = (long)m->ext_req_arg;
    gw_hs_msg_t a;
    memset(&a, 0, sizeof(a));
    a.chosen = GW_HS_NO_TL;
    a.flags = GW_HS_FLAG_EXT_ONLY;
    gw_status_t st = hs_send_accept(hs, &a, m->uuid);
    if (st != GW_OK) {
        hs_fail(hs, st, st == GW_ERR_AUTH, "%s", hs->ctx->core.errbuf);
        return;
    }
    hs->state = HS_WAIT_CONFIRM;
}

static void server_on_hello(gw_hs_t *hs, const gw_hs_msg_t *m)
{
    gw_context_t *ctx = hs->ctx;
    if ((m->flags & GW_HS_FLAG_AUTH) && !ctx->auth_enabled) {
        hs_fail(hs, GW_ERR_AUTH, 1,
                "the client requires authentication but this server has no shared secret "
                "(set GPUWIRE_AUTH_SECRET or GPUWIRE_AUTH_SECRET_FILE on both sides)");
        return;
    }
    if (!(m->flags & GW_HS_FLAG_AUTH) && ctx->auth_enabled) {
        hs_fail(hs, GW_ERR_AUTH, 1,
                "this server requires authentication and the client has no shared secret "
                "(set GPUWIRE_AUTH_SECRET or GPUWIRE_AUTH_SECRET_FILE on both sides)");
        return;
    }
    if (m->flags & GW_HS_FLAG_EXT_ONLY) {
        server_ext_hello(hs, m);
        return;
    }
    memcpy(hs->nonce_peer, m->nonce, GW_HS_NONCE_LEN);
    hs->peer_host = m->host_id;
    hs->peer_flags = m->flags;
    note_peer_pid(hs, m);
    /* choose: the client's order, among what both can use */
    char reasons[512] = "";
    size_t rl = 0;
    int chosen = -1;
    const gw_hs_blob_t *cblob = NULL;
    gw_tl_peer_t peer = {.uuid = m->uuid, .host_id = m->host_id, .is_server = 1, .bootstrap_fd = hs->fd,
                         .peer_addr = hs->peer};
    for (int i = 0; i < m->npref && chosen < 0; i++) {
        int id = m->pref[i];
        char why[256] = "";
        const gw_hs_blob_t *b = NULL;
        for (int j = 0; j < m->nblob; j++)
            if (m->blob[j].tl == id)
                b = &m->blob[j];
        if (id >= GW_TL_COUNT)
            continue;
        if (!tl_allowed(ctx, id))
            snprintf(why, sizeof(why), "not allowed by the server's GPUWIRE_TRANSPORTS");
        else if (!ctx->tl[id])
            snprintf(why, sizeof(why), "unavailable on the server: %s", ctx->tl_why[id]);
        else if (!b)
            snprintf(why, sizeof(why), "unavailable on the client (its log or `gpuwire info` says why)");
        else if (ctx->tl[id]->ops->ep_reachable(ctx->tl[id], &peer, b->data, b->len, why, sizeof(why)) != GW_OK)
            ; /* why filled */
        else {
            chosen = id;
            cblob = b;
            break;
        }
        rl += (size_t)snprintf(reasons + rl, rl < sizeof(reasons) ? sizeof(reasons) - rl : 0, "%s%s: %s",
                               rl ? "; " : "", gw_tl_names[id], why);
        if (rl >= sizeof(reasons))
            rl = sizeof(reasons) - 1;
    }
    if (chosen < 0) {
        hs_fail(hs, GW_ERR_NO_TRANSPORT, 1, "no transport usable by both sides (%s)",
                reasons[0] ? reasons : "the client offered none");
        return;
    }
    if (cblob->len > BLOB_MAX) {
        hs_fail(hs, GW_ERR_PROTOCOL, 1, "the client's %s address is %u bytes (limit %d)", gw_tl_names[chosen],
                cblob->len, BLOB_MAX);
        return;
    }
    memcpy(hs->peer_blob, cblob->data, cblob->len);
    hs->peer_blob_len = cblob->len;
    hs->chosen = chosen;
    gw_ep_t *ep = gw_api_ep_new(ctx, hs->peer);
    if (!ep) {
        hs_fail(hs, GW_ERR_NOMEM, 1, "server out of memory");
        return;
    }
    hs->ep = ep;
    ep->hs = hs;
    ep->peer_uuid = m->uuid;
    ep->tl_id = chosen;
    ep->ops = ctx->tl[chosen]->ops;
    snprintf(ep->downgrades, sizeof(ep->downgrades), "%s", reasons);
    uint8_t blob[BLOB_MAX];
    size_t blen = sizeof(blob);
    gw_status_t st = ep->ops->ep_prepare(ctx->tl[chosen], &ep->base, &hs->tl_eps[chosen], blob, &blen);
    if (st != GW_OK) {
        hs_fail(hs, st, 1, "server could not prepare its %s endpoint: %s", gw_tl_names[chosen], ctx->core.errbuf);
        return;
    }
    gw_hs_msg_t a;
    memset(&a, 0, sizeof(a));
    a.chosen = (uint8_t)chosen;
    a.blob[0] = (gw_hs_blob_t){.tl = (uint8_t)chosen, .len = (uint16_t)blen, .data = blob};
    a.nblob = 1;
    snprintf(a.text, sizeof(a.text), "%s", reasons);
    if ((st = hs_send_accept(hs, &a, m->uuid)) != GW_OK) {
        hs_fail(hs, st, st == GW_ERR_AUTH, "%s", ctx->core.errbuf);
        return;
    }
    hs->state = HS_WAIT_CONFIRM;
}

/* The transport is connected: keep the handshake socket for liveness if it
 * did not take it. */
static gw_status_t finish_ep(gw_hs_t *hs, gw_tl_peer_t *peer)
{
    gw_ep_t *ep = hs->ep;
    gw_status_t st = ep->ops->ep_connect(hs->tl_eps[hs->chosen], peer, hs->peer_blob, hs->peer_blob_len);
    if (st != GW_OK)
        return st;
    ep->tl = hs->tl_eps[hs->chosen];
    hs->tl_eps[hs->chosen] = NULL;
    if (peer->bootstrap_fd >= 0)
        gw_api_ep_keep_ctl(ep, peer->bootstrap_fd);
    hs->fd = -1; /* owned by the transport or the endpoint now */
    ep->state = GW_EP_READY;
    ep->base.last_rx_ns = gw_now_ns();
    /* a peer process of this host is judged by its process state when
     * silent, so its local work never makes it look dead (the transport
     * may have set it already: intra knows the pid from its own probe) */
    if (!ep->base.peer_pid && hs->peer_pid)
        gw_liveness_set_peer_pid(&ep->base, (int)hs->peer_pid);
    ep->ops->ep_describe(ep->tl, ep->path, sizeof(ep->path));
    /* end-to-end integrity: both sides know the check, and either asks for it */
    if ((hs->peer_flags & GW_HS_FLAG_INTEG_CAP) &&
        (hs->ctx->integrity || (hs->peer_flags & GW_HS_FLAG_INTEG_ON))) {
        if ((st = gw_proto_integ_attach(&ep->base, ep->tl)) != GW_OK || (st = gw_api_ep_integ_on(ep)) != GW_OK)
            return st;
        gw_api_ep_describe(ep, ep->path, sizeof(ep->path));
    } else if (hs->ctx->integrity) {
        ep->integ_refused = 1; /* the peer's version has no check: notifying puts are refused */
    }
    return GW_OK;
}

static void server_on_confirm(gw_hs_t *hs, const gw_hs_msg_t *m)
{
    gw_context_t *ctx = hs->ctx;
    gw_ep_t *ep = hs->ep;
    uint64_t peer_uuid = hs->ext_only ? hs->peer_uuid : ep->peer_uuid;
    uint8_t ext[GW_HS_MAX_BODY];
    gw_hs_bind_t bind = {.nonce_c = hs->nonce_peer, .nonce_s = hs->nonce_local, .uuid_c = peer_uuid,
                         .uuid_s = ctx->core.uuid};
    if (ctx->auth_enabled) {
        uint8_t want[GW_AUTH_MAC_LEN];
        if (!m->has_mac ||
            gw_auth_mac(ctx->auth_secret, ctx->auth_secret_len, "gpuwire-client", hs->nonce_local, hs->nonce_peer,
                        peer_uuid, ctx->core.uuid, want) != 0 ||
            !gw_auth_equal(want, m->mac, GW_AUTH_MAC_LEN)) {
            hs_fail(hs, GW_ERR_AUTH, 1, "client failed authentication: its proof does not match the shared secret");
            return;
        }
    }
    if (hs->ext_only) { /* the client proved itself: hand it the payload, make nothing */
        gw_hs_msg_t r;
        memset(&r, 0, sizeof(r));
        r.type = GW_HS_READY;
        r.token = GW_HS_EXT_TOKEN;
        if (ctx->ext_ops && ctx->ext_ops->hs_fill)
            ctx->ext_ops->hs_fill(ctx->ext, &r, ext, sizeof(ext), hs->ext_req, &bind);
        hs_io_off(hs);
        if (hs_send(hs, &r) != GW_OK)
            gw_log(GW_LOG_DEBUG, "extension payload to %s not sent: %s", hs->peer, ctx->core.errbuf);
        hs_free(hs);
        return;
    }
    do {
        gw_random_bytes(&ep->token, sizeof(ep->token));
    } while (ep->token == 0 || ep->token == UINT64_MAX || gw_hmap_get(&ctx->tokens, ep->token));
    if (gw_hmap_put(&ctx->tokens, ep->token, ep) != 0) {
        ep->token = 0;
        hs_fail(hs, GW_ERR_NOMEM, 1, "server out of memory");
        return;
    }
    hs_io_off(hs);
    gw_hs_msg_t r;
    memset(&r, 0, sizeof(r));
    r.type = GW_HS_READY;
    r.token = ep->token;
    if (ctx->ext_ops && ctx->ext_ops->hs_fill)
        ctx->ext_ops->hs_fill(ctx->ext, &r, ext, sizeof(ext), -1, &bind);
    gw_status_t st = hs_send(hs, &r);
    gw_tl_peer_t peer = {.uuid = ep->peer_uuid, .host_id = hs->peer_host, .is_server = 1, .bootstrap_fd = hs->fd,
                         .peer_addr = hs->peer, .ep_token = ep->token};
    if (st == GW_OK)
        st = finish_ep(hs, &peer);
    if (st != GW_OK) {
        hs_fail(hs, st, 0, "%s", ctx->core.errbuf);
        return;
    }
    gw_listener_t *l = hs->l;
    ep->hs = NULL;
    hs->ep = NULL;
    ep->listener = l;
    hs_free(hs);
    if (!peer.joins) {
        server_ep_ready(ep);
        return;
    }
    /* the client opens its further connections now (it has READY): they
     * come through this listener, so the endpoint waits for them here and
     * gw_accept hands it out complete, whatever the listener's fate then */
    ep->joins_left = peer.joins;
    ep->joins_deadline_ns = gw_now_ns() + (uint64_t)ctx->connect_timeout_ms * 1000000ull;
    gw_list_push_back(&l->joining, &ep->link);
}

/* ---- client side -------------------------------------------------------------------- */
static void client_on_accept(gw_hs_t *hs, const gw_hs_msg_t *m)
{
    gw_context_t *ctx = hs->ctx;
    gw_ep_t *ep = hs->ep;
    if (m->chosen >= GW_TL_COUNT || !hs->tl_eps[m->chosen]) {
        hs_fail(hs, GW_ERR_PROTOCOL, 1, "server chose transport %u, which this side did not offer", m->chosen);
        return;
    }
    const gw_hs_blob_t *b = NULL;
    for (int j = 0; j < m->nblob; j++)
        if (m->blob[j].tl == m->chosen)
            b = &m->blob[j];
    if (!b || b->len > BLOB_MAX) {
        hs_fail(hs, GW_ERR_PROTOCOL, 1, "server sent no usable %s address", gw_tl_names[m->chosen]);
        return;
    }
    memcpy(hs->nonce_peer, m->nonce, GW_HS_NONCE_LEN);
    ep->peer_uuid = m->uuid;
    hs->peer_host = m->host_id;
    hs->peer_flags = m->flags;
    note_peer_pid(hs, m);
    gw_hs_msg_t c;
    memset(&c, 0, sizeof(c));
    c.type = GW_HS_CONFIRM;
    if (ctx->auth_enabled) {
        uint8_t want[GW_AUTH_MAC_LEN];
        if (!(m->flags & GW_HS_FLAG_AUTH) || !m->has_mac) {
            hs_fail(hs, GW_ERR_AUTH, 1, "the server did not prove it knows the shared secret");
            return;
        }
        if (gw_auth_mac(ctx->auth_secret, ctx->auth_secret_len, "gpuwire-server", hs->nonce_local, hs->nonce_peer,
                        ctx->core.uuid, m->uuid, want) != 0 ||
            !gw_auth_equal(want, m->mac, GW_AUTH_MAC_LEN)) {
            hs_fail(hs, GW_ERR_AUTH, 1, "server failed authentication: its proof does not match the shared secret");
            return;
        }
        gw_auth_mac(ctx->auth_secret, ctx->auth_secret_len, "gpuwire-client", hs->nonce_peer, hs->nonce_local,
                    ctx->core.uuid, m->uuid, c.mac);
        c.has_mac = 1;
    }
    hs->chosen = m->chosen;
    memcpy(hs->peer_blob, b->data, b->len);
    hs->peer_blob_len = b->len;
    hs_destroy_tl_eps(hs, hs->chosen);
    ep->tl_id = hs->chosen;
    ep->ops = ctx->tl[hs->chosen]->ops;
    snprintf(ep->downgrades, sizeof(ep->downgrades), "%s", m->text);
    gw_status_t st = hs_send(hs, &c);
    if (st != GW_OK) {
        hs_fail(hs, st, 0, "%s", ctx->core.errbuf);
        return;
    }
    hs->state = HS_WAIT_READY;
}

static void client_on_ready(gw_hs_t *hs, const gw_hs_msg_t *m)
{
    gw_ep_t *ep = hs->ep;
    char why[256];
    gw_context_t *ctx = hs->ctx;
    gw_hs_bind_t bind = {.nonce_c = hs->nonce_local, .nonce_s = hs->nonce_peer, .uuid_c = ctx->core.uuid,
                         .uuid_s = ep->peer_uuid};
    gw_status_t tst = ctx->ext_ops && ctx->ext_ops->hs_take ? ctx->ext_ops->hs_take(ctx->ext, ep, m, &bind, why,
                                                                                     sizeof(why))
                                                            : GW_OK;
    if (tst != GW_OK) { /* the server sent READY and moved on: closing tells it */
        hs_fail(hs, tst, 0, "%s", why);
        return;
    }
    ep->token = m->token;
    hs_io_off(hs);
    gw_tl_peer_t peer = {.uuid = ep->peer_uuid, .host_id = hs->peer_host, .is_server = 0, .bootstrap_fd = hs->fd,
                         .peer_addr = hs->peer, .ep_token = m->token, .open_stream = open_stream_cb,
                         .open_stream_arg = hs};
    gw_status_t st = finish_ep(hs, &peer);
    if (st != GW_OK) {
        if (peer.bootstrap_fd < 0)
            hs->fd = -1;
        hs_fail(hs, st, 0, "%s", hs->ctx->core.errbuf);
        return;
    }
    hs->state = HS_DONE;
}

/* Opens tcp stream idx: a new connection that joins the endpoint. */
static int open_stream_cb(void *arg, unsigned idx)
{
    gw_hs_t *hs = arg;
    gw_context_t *ctx = hs->ctx;
    uint64_t sockbuf = 0;
    char why[128];
    gw_settings_size(&ctx->core.settings, GW_SET_TCP_SOCKBUF, &sockbuf, why, sizeof(why));
    int fd = gw_sock_connect(&hs->ss, hs->sslen, (int)sockbuf, (int)ctx->connect_timeout_ms);
    if (fd < 0) {
        gw_err(&ctx->core, GW_ERR_CONN_REFUSED, "connect(%s) for stream %u failed: %s", hs->peer, idx, strerror(errno));
        return -1;
    }
    gw_hs_msg_t j;
    memset(&j, 0, sizeof(j));
    j.type = GW_HS_JOIN;
    j.token = hs->ep->token;
    j.stream = (uint16_t)idx;
    uint8_t buf[128];
    size_t n = gw_hs_encode(&j, buf, sizeof(buf));
    if (!n || gw_sock_write_full(fd, buf, n, (int)ctx->connect_timeout_ms) != 0) {
        gw_err(&ctx->core, GW_ERR_CONN_RESET, "joining stream %u to %s failed: %s", idx, hs->peer, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* ---- dispatch ----------------------------------------------------------------------- */
static void hs_event(void *arg, uint32_t events)
{
    gw_hs_t *hs = arg;
    (void)events;
    int r = hs_read(hs);
    if (r <= 0)
        return;
    gw_hs_msg_t m;
    char why[256];
    gw_status_t st = gw_hs_decode(hs->in, hs->in_len, &m, why, sizeof(why));
    hs->in_len = 0;
    hs->in_need = GW_HS_HDR_LEN;
    if (st != GW_OK) {
        hs_fail(hs, st, 1, "%s", why);
        return;
    }
    if (m.type == GW_HS_ERROR) {
        gw_status_t peer_st = (gw_status_t)m.status;
        if (!GW_IS_ENDPOINT_ERROR(peer_st) && peer_st != GW_ERR_NOMEM && peer_st != GW_ERR_INVALID)
            peer_st = GW_ERR_PROTOCOL;
        hs_fail(hs, peer_st, 0, "peer refused: %s", m.text[0] ? m.text : gw_status_str(peer_st));
        return;
    }
    /* what each state expects next; the server's first message may also be a JOIN */
    static const struct {
        hs_state_t state;
        uint16_t type;
        void (*fn)(gw_hs_t *, const gw_hs_msg_t *);
        const char *expect;
    } steps[] = {
        {HS_FIRST, GW_HS_HELLO, server_on_hello, "HELLO or JOIN"},
        {HS_FIRST, GW_HS_JOIN, server_on_join, "HELLO or JOIN"},
        {HS_WAIT_CONFIRM, GW_HS_CONFIRM, server_on_confirm, "CONFIRM"},
        {HS_WAIT_ACCEPT, GW_HS_ACCEPT, client_on_accept, "ACCEPT"},
        {HS_WAIT_READY, GW_HS_READY, client_on_ready, "READY"},
    };
    const char *expect = NULL;
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        if (steps[i].state != hs->state)
            continue;
        if (steps[i].type == m.type) {
            steps[i].fn(hs, &m);
            return;
        }
        expect = steps[i].expect;
    }
    if (expect)
        hs_fail(hs, GW_ERR_PROTOCOL, 1, "expected %s, got message type %u", expect, m.type);
}

static gw_hs_t *hs_new(gw_context_t *ctx, int fd, int is_server, const char *peer)
{
    gw_hs_t *hs = calloc(1, sizeof(*hs));
    if (!hs)
        return NULL;
    hs->ctx = ctx;
    hs->fd = fd;
    hs->is_server = is_server;
    hs->in_need = GW_HS_HDR_LEN;
    hs->chosen = -1;
    hs->deadline_ns = gw_now_ns() + (uint64_t)ctx->connect_timeout_ms * 1000000ull;
    snprintf(hs->peer, sizeof(hs->peer), "%s", peer);
    gw_list_init(&hs->link);
    gw_sock_nonblock(fd, 1);
    if (gw_io_add_cold(&ctx->core, &hs->io, fd, EPOLLIN, hs_event, hs) != GW_OK) {
        free(hs);
        return NULL;
    }
    hs->io_on = 1;
    return hs;
}

/* gw_hs_timeouts once some listener has a handshake or a joining endpoint. */
__attribute__((noinline)) static int hs_timeouts_due(gw_context_t *ctx)
{
    uint64_t now = 0; /* read only when a handshake is pending: progress stays free of system calls */
    gw_list_t *lp, *p, *t;
    for (lp = ctx->listeners.next; lp != &ctx->listeners; lp = lp->next) {
        gw_listener_t *l = gw_container_of(lp, gw_listener_t, link);
        if (!now && (!gw_list_empty(&l->pending) || !gw_list_empty(&l->joining)))
            now = gw_now_ns();
        gw_list_for_each_safe(p, t, &l->joining) {
            gw_ep_t *ep = gw_container_of(p, gw_ep_t, link);
            if (ep->base.error != GW_OK) {
                server_ep_ready(ep);
            } else if (now > ep->joins_deadline_ns) {
                gw_log(GW_LOG_WARN, "endpoint from %s on %s: %u further connection(s) did not join within %ld ms "
                       "(GPUWIRE_CONNECT_TIMEOUT_MS); it goes on without them", ep->base.peer, l->addr,
                       ep->joins_left, ctx->connect_timeout_ms);
                server_ep_ready(ep);
            }
        }
        gw_list_for_each_safe(p, t, &l->pending) {
            gw_hs_t *hs = gw_container_of(p, gw_hs_t, link);
            if (now > hs->deadline_ns)
                hs_fail(hs, GW_ERR_TIMEOUT, 1, "handshake not completed within %ld ms (GPUWIRE_CONNECT_TIMEOUT_MS)",
                        ctx->connect_timeout_ms);
        }
    }
    return 0;
}

/* Fails server handshakes that ran past their deadline; hands out endpoints
 * whose further connections did not all join in time (or that failed).  A
 * poller: every pass of a listening context runs it, and the common pass,
 * with nothing pending on any listener, is the lists' tests alone. */
int gw_hs_timeouts(void *arg)
{
    gw_context_t *ctx = arg;
    for (gw_list_t *lp = ctx->listeners.next; lp != &ctx->listeners; lp = lp->next) {
        gw_listener_t *l = gw_container_of(lp, gw_listener_t, link);
        if (!gw_list_empty(&l->pending) || !gw_list_empty(&l->joining))
            return hs_timeouts_due(ctx);
    }
    return 0;
}

/* ---- entry points (handshake.h) ----------------------------------------------------- */
gw_status_t gw_hs_server_start(gw_listener_t *l, int fd, const char *peer)
{
    gw_hs_t *hs = hs_new(l->ctx, fd, 1, peer);
    if (!hs)
        return GW_ERR_NOMEM;
    hs->l = l;
    gw_list_push_back(&l->pending, &hs->link);
    return GW_OK;
}

void gw_hs_drop_pending(gw_listener_t *l)
{
    gw_list_t *p, *t;
    gw_list_for_each_safe(p, t, &l->pending) {
        gw_hs_t *hs = gw_container_of(p, gw_hs_t, link);
        hs_free_with_ep(hs);
    }
}

static int hs_finished(void *arg)
{
    gw_hs_t *hs = arg;
    return hs->state == HS_DONE || hs->state == HS_FAILED;
}

gw_status_t gw_hs_connect(gw_ep_t *ep, int fd, const struct sockaddr_storage *ss, socklen_t sl, const char *addr)
{
    gw_context_t *ctx = ep->ctx;
    gw_core_t *core = &ctx->core;
    gw_status_t st;
    gw_hs_t *hs = hs_new(ctx, fd, 0, ep->base.peer);
    if (!hs) {
        close(fd);
        return gw_err(core, GW_ERR_NOMEM, "gw_connect(%s): out of memory", addr);
    }
    hs->ep = ep;
    ep->hs = hs;
    memcpy(&hs->ss, ss, sl);
    hs->sslen = sl;

    gw_hs_msg_t h;
    memset(&h, 0, sizeof(h));
    h.type = GW_HS_HELLO;
    h.uuid = core->uuid;
    h.host_id = core->host_id;
    put_pid(&h);
    h.flags = (ctx->auth_enabled ? GW_HS_FLAG_AUTH : 0) | GW_HS_FLAG_INTEG_CAP |
              (ctx->integrity ? GW_HS_FLAG_INTEG_ON : 0);
    gw_random_bytes(hs->nonce_local, GW_HS_NONCE_LEN);
    memcpy(h.nonce, hs->nonce_local, GW_HS_NONCE_LEN);
    h.has_nonce = 1;
    uint8_t blobs[GW_TL_COUNT][BLOB_MAX];
    char reasons[512] = "";
    size_t rl = 0;
    for (int i = 0; i < ctx->tl_norder; i++) {
        int id = ctx->tl_order[i];
        h.pref[h.npref++] = (uint8_t)id;
        if (!ctx->tl[id]) {
            rl += (size_t)snprintf(reasons + rl, rl < sizeof(reasons) ? sizeof(reasons) - rl : 0, "%s%s: %s",
                                   rl ? "; " : "", gw_tl_names[id], ctx->tl_why[id]);
            if (rl >= sizeof(reasons))
                rl = sizeof(reasons) - 1;
            continue;
        }
        size_t blen = BLOB_MAX;
        st = ctx->tl[id]->ops->ep_prepare(ctx->tl[id], &ep->base, &hs->tl_eps[id], blobs[id], &blen);
        if (st != GW_OK) {
            gw_log(GW_LOG_WARN, "transport %s could not prepare an endpoint: %s", gw_tl_names[id], core->errbuf);
            hs->tl_eps[id] = NULL;
            /* kept for the refusal below when no transport is left */
            rl += (size_t)snprintf(reasons + rl, rl < sizeof(reasons) ? sizeof(reasons) - rl : 0,
                                   "%s%s: could not prepare an endpoint: %s (%s)", rl ? "; " : "", gw_tl_names[id],
                                   core->errbuf, gw_status_name(st));
            if (rl >= sizeof(reasons))
                rl = sizeof(reasons) - 1;
            continue;
        }
        h.blob[h.nblob++] = (gw_hs_blob_t){.tl = (uint8_t)id, .len = (uint16_t)blen, .data = blobs[id]};
    }
    if (!h.nblob) {
        hs_free(hs);
        return gw_err(core, GW_ERR_NO_TRANSPORT, "gw_connect(%s): no transport usable here (%s)", addr, reasons);
    }
    hs->state = HS_WAIT_ACCEPT;
    if ((st = hs_send(hs, &h)) != GW_OK) {
        hs_free(hs);
        return st;
    }
    st = gw_ctx_progress_until(ctx, hs_finished, hs, (int)ctx->connect_timeout_ms);
    if (st == GW_ERR_TIMEOUT && !hs_finished(hs))
        hs_fail(hs, GW_ERR_TIMEOUT, 1, "handshake not completed within %ld ms (GPUWIRE_CONNECT_TIMEOUT_MS)",
                ctx->connect_timeout_ms);
    if (hs->state != HS_DONE) {
        st = hs->result;
        hs_free(hs);
        return st;
    }
    if (reasons[0] && !ep->downgrades[0]) /* the server's reasons cover ours otherwise */
        snprintf(ep->downgrades, sizeof(ep->downgrades), "%s", reasons);
    hs_free(hs);
    return GW_OK;
}
