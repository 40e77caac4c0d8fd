/* SPDX-License-Identifier: Apache-2.0 */
/* tcp_ep.c - tcp endpoints: lifecycle (prepare, connect, join, close,
 * destroy), opening and closing streams, request slots, failure and peer
 * liveness.
 * Private objects: tcp_int.h. */
#include "transport/tcp/tcp_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

static void conn_close(conn_t *c);
static int timed_out_quietly(tcp_ep_t *ep);

gw_request_t *tcp_slot_get(tcp_ep_t *ep, uint64_t id, unsigned opmask)
{
    gw_request_t *r = gw_op_table_get(&ep->optab, id);
    return r && (opmask & (1u << r->op)) ? r : NULL;
}

/* The endpoint's teardown (base on_fail): receives in rendezvous are held
 * only by their slot, the streams close (deferred notifications: the base
 * fails their requests, none is sent). */
static void tcp_on_fail(void *arg, gw_status_t st)
{
    tcp_ep_t *ep = arg;
    for (uint32_t i = 0; i < ep->optab.n; i++) {
        gw_request_t *r = ep->optab.reqs[i];
        if (!r)
            continue;
        gw_op_table_free(&ep->optab, r);
        if (r->op == GW_OP_RECV)
            gw_ep_recv_done(B(ep), r, r->length, r->rtag, st);
    }
    for (int i = 0; i < ep->nconns; i++)
        conn_close(&ep->conns[i]);
    ep->striped_puts = 0;
}

void tcp_fail(tcp_ep_t *ep, gw_status_t st, const char *fmt, ...)
{
    if (gw_ep_failed(B(ep)))
        return;
    char msg[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    gw_ep_fail(B(ep), st, "%s", msg);
}

void tcp_sock_fail(tcp_ep_t *ep, int e, const char *op, int idx)
{
    if (e != ETIMEDOUT && timed_out_quietly(ep))
        e = ETIMEDOUT;
    if (e == ETIMEDOUT)
        tcp_fail(ep, GW_ERR_PEER_TIMEOUT,
                 "%s on tcp stream %d with %s failed: %s (unacknowledged data for GPUWIRE_PEER_TIMEOUT_MS=%ld)", op,
                 idx, B(ep)->peer, strerror(e), CORE(ep)->peer_timeout_ms);
    else
        tcp_fail(ep, GW_ERR_CONN_RESET, "%s on tcp stream %d with %s failed: %s", op, idx, B(ep)->peer, strerror(e));
}

/* The receiving side of further stream c (not stream 0) ended before the
 * peer closed the endpoint: the peer went (its streams end in no set
 * order), or this one connection broke.  Stream 0 carries everything whose
 * completion the peer saw without an answer from us (eager messages, the
 * CLOSE frame, notifications), so what it still holds is delivered first:
 * the stream closes here, the endpoint fails when stream 0 ends (at once
 * after its last frame), or GPUWIRE_PEER_TIMEOUT_MS later if stream 0 stays
 * open (tcp_lost_check).  Only what was in flight on c is lost, and no
 * operation the peer saw complete travels there.  0: not deferred (stream 0
 * itself, or it is gone): the caller fails the endpoint. */
static int tcp_stream_lost(conn_t *c, gw_status_t st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static int tcp_stream_lost(conn_t *c, gw_status_t st, const char *fmt, ...)
{
    tcp_ep_t *ep = c->ep;
    if (c->idx == 0 || ep->conns[0].fd < 0 || gw_ep_failed(B(ep)))
        return 0;
    if (!ep->lost_ns) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ep->lost_why, sizeof(ep->lost_why), fmt, ap);
        va_end(ap);
        ep->lost_st = st;
        ep->lost_ns = gw_now_ns();
        if (!ep->lost_ns)
            ep->lost_ns = 1;
    }
    gw_log(GW_LOG_DEBUG, "tcp stream %d with %s ended before stream 0 (%s): stream 0 is read to its end first",
           c->idx, B(ep)->peer, ep->lost_why);
    conn_close(c);
    return 1;
}

/* Fails the endpoint with the further stream's end as the reason: the
 * connection broke, the peer did not go. */
void tcp_lost_fail(tcp_ep_t *ep, uint64_t now)
{
    tcp_fail(ep, ep->lost_st, "%s, and tcp stream 0 stayed open for %llu ms after (GPUWIRE_PEER_TIMEOUT_MS=%ld)",
             ep->lost_why, (unsigned long long)(gw_elapsed_ns(now, ep->lost_ns) / 1000000ull),
             CORE(ep)->peer_timeout_ms);
}

/* A further stream ended while stream 0 stayed open for the peer timeout:
 * what waits on it never comes. */
void tcp_lost_check(tcp_ep_t *ep, uint64_t now)
{
    uint64_t limit = (uint64_t)CORE(ep)->peer_timeout_ms * 1000000ull;
    if (ep->lost_ns && !gw_ep_failed(B(ep)) && gw_elapsed_ns(now, ep->lost_ns) >= limit)
        tcp_lost_fail(ep, now);
}

/* what a stream closed by the peer without a goodbye can mean */
#define PEER_WENT "it exited, crashed, or failed the endpoint on its side"

/* End of stream on c (seen by the progress thread or a helper thread): an
 * orderly close when the peer said BYE or we are closing, a peer timeout when
 * the kernel gave up on our data, a further stream that waits for stream 0
 * (tcp_stream_lost), else the peer vanished `how`. */
void tcp_stream_ended(conn_t *c, const char *how)
{
    tcp_ep_t *ep = c->ep;
    if (ep->peer_closed || ep->closing) {
        conn_close(c);
        return;
    }
    if (timed_out_quietly(ep))
        tcp_sock_fail(ep, ETIMEDOUT, "recv", c->idx);
    else if (!tcp_stream_lost(c, GW_ERR_CONN_RESET, "peer %s closed tcp stream %d %s (" PEER_WENT ")", B(ep)->peer,
                              c->idx, how))
        tcp_fail(ep, GW_ERR_CONN_RESET, "peer %s closed tcp stream %d %s (" PEER_WENT ")", B(ep)->peer, c->idx, how);
}

/* A receive on c failed with errno e: as tcp_sock_fail, except that a
 * further stream reset by a peer that went waits for stream 0
 * (tcp_stream_lost).  A peer that exits with bytes of ours unread resets
 * the connection instead of closing it; what it sent before is read first. */
void tcp_recv_fail(conn_t *c, int e)
{
    tcp_ep_t *ep = c->ep;
    if ((e == ECONNRESET || e == EPIPE) && !timed_out_quietly(ep) &&
        tcp_stream_lost(c, GW_ERR_CONN_RESET, "recv on tcp stream %d with %s failed: %s", c->idx, B(ep)->peer,
                        strerror(e)))
        return;
    tcp_sock_fail(ep, e, "recv", c->idx);
}

/* The progress thread watches for reading unless a worker reads the stream. */
void tcp_conn_update_io(conn_t *c)
{
    if (c->fd >= 0)
        gw_io_mod(CORE(c->ep), &c->io, (c->rx_busy ? 0 : EPOLLIN) | (c->want_out ? EPOLLOUT : 0));
}

/* 1 when both ends of connected socket fd are addresses of this host. */
static int conn_local(int fd)
{
    struct sockaddr_storage a, b;
    socklen_t al = sizeof(a), bl = sizeof(b);
    if (getsockname(fd, (struct sockaddr *)&a, &al) != 0 || getpeername(fd, (struct sockaddr *)&b, &bl) != 0 ||
        a.ss_family != b.ss_family)
        return 0;
    if (a.ss_family == AF_INET)
        return ((struct sockaddr_in *)&a)->sin_addr.s_addr == ((struct sockaddr_in *)&b)->sin_addr.s_addr ||
               (ntohl(((struct sockaddr_in *)&b)->sin_addr.s_addr) >> 24) == 127;
    if (a.ss_family == AF_INET6)
        return !memcmp(&((struct sockaddr_in6 *)&a)->sin6_addr, &((struct sockaddr_in6 *)&b)->sin6_addr,
                       sizeof(struct in6_addr)) ||
               IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)&b)->sin6_addr);
    return 0;
}

/* GPUWIRE_TCP_CONGESTION on data stream idx (fd, connected).  auto: a
 * connection within this host whose algorithm paces (bbr) gets cubic, else
 * reno: on loopback nothing is gained by pacing, and without the fq qdisc
 * the kernel paces by an hrtimer per burst (tcp_pace_kick), which made
 * 256 x 1 KiB batches run at half speed in about half of the runs
 * (docs/PERFORMANCE.md, section 1). */
static void conn_congestion(tcp_ep_t *ep, int idx, int fd)
{
    const char *want = ep->tif->cc;
    char cur[32] = "";
    socklen_t cl = sizeof(cur) - 1;
    if (!strcmp(want, "system"))
        return;
    if (!strcmp(want, "auto")) {
        if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cur, &cl) != 0 || strcmp(cur, "bbr") || !conn_local(fd))
            return;
        static const char *const unpaced[] = {"cubic", "reno"};
        want = NULL;
        for (size_t k = 0; !want && k < sizeof(unpaced) / sizeof(unpaced[0]); k++)
            if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, unpaced[k], (socklen_t)strlen(unpaced[k])) == 0)
                want = unpaced[k];
        if (want)
            gw_log(GW_LOG_INFO, "tcp stream %d to %s: congestion control %s instead of the system's bbr (a local "
                        "connection: no pacing timer)", idx, B(ep)->peer, want);
        else
            gw_log(GW_LOG_DEBUG, "tcp stream %d to %s: bbr kept (cubic and reno refused: %s)", idx, B(ep)->peer,
                         strerror(errno));
        return;
    }
    if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, want, (socklen_t)strlen(want)) != 0 && idx == 0)
        gw_log(GW_LOG_WARN, "GPUWIRE_TCP_CONGESTION=%s: the kernel refused it on the connection to %s (%s); the "
                    "system's algorithm is kept (see net.ipv4.tcp_allowed_congestion_control)", want,
                    B(ep)->peer, strerror(errno));
}

static gw_status_t conn_open(tcp_ep_t *ep, int idx, int fd)
{
    conn_t *c = &ep->conns[idx];
    gw_core_t *core = CORE(ep);
    if (!c->rbuf && !(c->rbuf = malloc(RBUF_CAP)))
        return gw_err(core, GW_ERR_NOMEM, "out of memory for a tcp receive buffer");
    gw_sock_nonblock(fd, 1);
    gw_sock_tune(fd, (int)ep->tif->sockbuf, core->peer_timeout_ms);
    conn_congestion(ep, idx, fd);
    c->ep = ep;
    c->idx = idx;
    c->fd = fd;
    c->want_out = 0;
    c->rpos = c->rlen = 0;
    c->in_payload = 0;
    c->rx_dev = -1;
    c->tx_busy = c->rx_busy = c->hdr_only = 0;
    c->worker = (int)(ep->tif->next_worker++);
    gw_list_init(&c->stg_link);
    c->corked = 0;
    c->wrote_gen = UINT64_MAX;
    gw_list_init(&c->cork_link);
    gw_status_t st = gw_io_add(core, &c->io, fd, EPOLLIN, tcp_conn_event, c);
    if (st != GW_OK) {
        c->fd = -1;
        return st;
    }
    return GW_OK;
}

static void conn_close(conn_t *c)
{
    if (c->fd < 0)
        return;
    tcp_ep_t *ep = c->ep;
    /* a worker moving bytes on this socket lets go of it first */
    gw_tcp_pool_cancel(ep->tif->pool, &c->txj);
    gw_tcp_pool_cancel(ep->tif->pool, &c->rxj);
    c->tx_busy = c->rx_busy = 0;
    gw_io_del(CORE(ep), &c->io);
    close(c->fd);
    c->fd = -1;
    if (c->lazy) {
        c->lazy = 0;
        gw_list_del(&c->lazy_link);
    }
    tcp_conn_uncork(c);
    if (c->stg_wait) {
        c->stg_wait = 0;
        gw_list_del(&c->stg_link);
    }
    if (c->rx_dev >= 0) {
        gw_staging_t *st = tcp_stg_get(ep->tif, c->rx_dev, 1);
        if (st && c->rx_slot)
            gw_staging_release(st, c->rx_slot);
        for (int i = 0; st && i < c->rx_nin; i++)
            tcp_slot_finish(ep->tif, st, c->rx_in[i]);
        c->rx_slot = NULL;
        c->rx_nin = 0;
        c->rx_dev = -1;
    }
    if (c->dst_region) {
        c->dst_region->incoming--;
        c->dst_region = NULL;
    }
    gw_ep_unexp_free(B(ep), c->rx_unexp);
    c->rx_unexp = NULL;
    tcpb_rx_drop(c);
    c->in_payload = 0;
    while (c->txh) {
        tx_item_t *t = c->txh;
        c->txh = t->next;
        tcp_tx_release(ep, t);
    }
    c->txt = NULL;
    c->tx_bytes = 0;
}

int tcp_ep_busy(tcp_ep_t *ep)
{
    if (gw_ep_has_work(B(ep)) || ep->optab.used)
        return 1;
    for (int i = 0; i < ep->nconns; i++)
        if (ep->conns[i].in_payload || ep->conns[i].txh)
            return 1;
    return 0;
}

/* The last time the peer showed life, counting bytes a helper thread moved. */
uint64_t tcp_ep_last_ns(tcp_ep_t *ep)
{
    uint64_t last = B(ep)->live_mark ? gw_now_ns() : B(ep)->last_rx_ns; /* (ep_base.h) */
    for (int i = 0; i < ep->nconns; i++) {
        conn_t *c = &ep->conns[i];
        if (c->tx_busy)
            last = GW_MAX(last, gw_tcp_job_last_ns(&c->txj));
        if (c->rx_busy)
            last = GW_MAX(last, gw_tcp_job_last_ns(&c->rxj));
    }
    return last;
}

/* A stream ended or failed after about GPUWIRE_PEER_TIMEOUT_MS without a
 * sign of life while work was outstanding: the kernel's TCP_USER_TIMEOUT
 * (the same limit) tore it down, and the error it reported may have gone to
 * another reader of the socket (a helper thread) leaving an end-of-stream
 * here.  Either way the peer timed out. */
static int timed_out_quietly(tcp_ep_t *ep)
{
    uint64_t limit = (uint64_t)CORE(ep)->peer_timeout_ms * 1000000ull;
    if (!tcp_ep_busy(ep))
        return 0;
    uint64_t last = tcp_ep_last_ns(ep);
    return gw_elapsed_ns(gw_now_ns(), last) >= limit - limit / 10;
}

gw_status_t tcp_ep_prepare(gw_tl_iface_t *iface, gw_ep_base_t *base, gw_tl_ep_t **out,
                                  uint8_t *addr, size_t *addrlen)
{
    tcp_iface_t *tif = to_if(iface);
    if (*addrlen < 4)
        return gw_err(iface->core, GW_ERR_INVALID, "tcp address buffer too small");
    tcp_ep_t *ep = calloc(1, sizeof(*ep));
    if (!ep)
        return gw_err(iface->core, GW_ERR_NOMEM, "out of memory for a tcp endpoint");
    ep->super.iface = iface;
    ep->super.base = base;
    ep->tif = tif;
    ep->local_streams = (int)tif->streams;
    for (int i = 0; i < GW_TCP_MAX_STREAMS; i++)
        ep->conns[i].fd = -1;
    gw_list_init(&ep->link);
    gw_put_u16(addr, GW_TCP_VERSION);
    gw_put_u16(addr + 2, (uint16_t)tif->streams);
    *addrlen = 4;
    *out = &ep->super;
    return GW_OK;
}

gw_status_t tcp_ep_reachable(gw_tl_iface_t *iface, const gw_tl_peer_t *peer,
                                    const uint8_t *a, size_t len, char *why, size_t whylen)
{
    (void)iface;
    (void)peer;
    if (len < 4 || gw_get_u16(a) != GW_TCP_VERSION) {
        snprintf(why, whylen, "peer's tcp protocol version %u differs from ours (%u)",
                 len >= 2 ? gw_get_u16(a) : 0, GW_TCP_VERSION);
        return GW_ERR_VERSION;
    }
    return GW_OK;
}

gw_status_t tcp_ep_connect(gw_tl_ep_t *tep, gw_tl_peer_t *peer, const uint8_t *a, size_t len)
{
    tcp_ep_t *ep = to_ep(tep);
    gw_core_t *core = CORE(ep);
    char why[128];
    gw_status_t st = tcp_ep_reachable(tep->iface, peer, a, len, why, sizeof(why));
    if (st != GW_OK)
        return gw_err(core, st, "%s", why);
    int peer_streams = gw_get_u16(a + 2);
    ep->nconns = GW_MAX(1, GW_MIN(ep->local_streams, GW_MIN(peer_streams, GW_TCP_MAX_STREAMS)));
    st = conn_open(ep, 0, peer->bootstrap_fd);
    if (st != GW_OK)
        return st;
    peer->bootstrap_fd = -1;
    B(ep)->on_fail = tcp_on_fail;
    B(ep)->on_fail_arg = ep;
    B(ep)->notify_out = tcp_notify_out;
    B(ep)->notify_arg = ep;
    gw_list_push_back(&ep->tif->eps, &ep->link);
    B(ep)->last_rx_ns = gw_now_ns();
    if (peer->is_server)
        peer->joins = (unsigned)(ep->nconns - 1); /* the client opens them */
    else {
        for (int i = 1; i < ep->nconns; i++) {
            int fd = peer->open_stream(peer->open_stream_arg, (unsigned)i);
            if (fd < 0) {
                gw_log(GW_LOG_WARN, "tcp stream %d to %s could not be opened (%s); using %d stream(s)",
                       i, peer->peer_addr, core->errbuf, i);
                break;
            }
            if ((st = conn_open(ep, i, fd)) != GW_OK) {
                close(fd);
                break;
            }
        }
    }
    return GW_OK;
}

gw_status_t tcp_ep_join(gw_tl_ep_t *tep, int fd, unsigned idx)
{
    tcp_ep_t *ep = to_ep(tep);
    if (idx == 0 || (int)idx >= ep->nconns || ep->conns[idx].fd >= 0 || gw_ep_failed(B(ep))) {
        close(fd);
        return gw_err(CORE(ep), GW_ERR_PROTOCOL, "tcp stream %u for endpoint of %s is not expected (%d negotiated)",
                      idx, B(ep)->peer, ep->nconns);
    }
    gw_status_t st = conn_open(ep, (int)idx, fd);
    if (st != GW_OK)
        close(fd);
    return st;
}

gw_status_t tcp_ep_close(gw_tl_ep_t *tep)
{
    tcp_ep_t *ep = to_ep(tep);
    if (gw_ep_failed(B(ep)) || ep->closing)
        return GW_OK;
    ep->closing = 1;
    conn_t *c = &ep->conns[0];
    if (c->fd < 0)
        return GW_OK;
    tcp_send_ctl(ep, c, GW_TCP_CLOSE, 0, 0, 0, 0, 0, 0);
    /* give the close frame (and what precedes it) a bounded chance to leave */
    uint64_t deadline = gw_now_ns() + 200000000ull;
    while (c->fd >= 0 && c->txh && gw_now_ns() < deadline) {
        gw_tcp_pool_reap(ep->tif->pool, tcp_job_done, ep->tif);
        if (c->fd < 0 || tcp_conn_flush(c) < 0)
            break;
        if (c->txh)
            usleep(1000);
    }
    return GW_OK;
}

void tcp_ep_destroy(gw_tl_ep_t *tep)
{
    if (!tep)
        return;
    tcp_ep_t *ep = to_ep(tep);
    /* whatever is still in flight (e.g. receives mid-rendezvous) ends now */
    if (ep->nconns) { /* connected: the generic endpoint is still there (not before) */
        if (!gw_ep_failed(B(ep)))
            tcp_fail(ep, GW_ERR_CANCELED, "endpoint to %s closed with work outstanding", B(ep)->peer);
        if (B(ep)->on_fail_arg == ep)
            B(ep)->on_fail = NULL;
        if (B(ep)->notify_arg == ep)
            B(ep)->notify_out = NULL;
    }
    for (int i = 0; i < GW_TCP_MAX_STREAMS; i++) {
        if (ep->conns[i].fd >= 0) {
            ep->conns[i].ep = ep;
            conn_close(&ep->conns[i]);
        }
        free(ep->conns[i].rbuf);
    }
    tcpb_kdone_drop_ep(ep);
    gw_list_del(&ep->link);
    gw_op_table_fini(&ep->optab);
    free(ep);
}

gw_status_t tcp_ep_describe(gw_tl_ep_t *tep, char *buf, size_t len)
{
    tcp_ep_t *ep = to_ep(tep);
    tcp_iface_t *tif = ep->tif;
    if (tif->pool && tif->thread_min != UINT64_MAX)
        snprintf(buf, len, "tcp: %d stream(s), striping from %llu bytes, %d helper thread(s) moving payloads from %llu bytes",
                 tcp_open_streams(ep), (unsigned long long)tif->stripe_min, gw_tcp_pool_size(tif->pool),
                 (unsigned long long)tif->thread_min);
    else
        snprintf(buf, len, "tcp: %d stream(s), striping from %llu bytes, no helper threads", tcp_open_streams(ep),
                 (unsigned long long)tif->stripe_min);
    size_t n = strlen(buf);
    if (tif->bkernel[0] && n < len)
        snprintf(buf + n, len - n, "; GPU batches: %s", tif->bkernel);
    return GW_OK;
}
