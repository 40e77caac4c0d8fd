/* SPDX-License-Identifier: Apache-2.0 */
/* tcp_rx.c - the tcp receive side: reading streams, the frame dispatcher
 * (handle_header), payloads into place, rendezvous receives.
 * Private objects: tcp_int.h. */
#include "transport/tcp/tcp_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

static int finish_payload(conn_t *c);

void tcp_begin_payload_dev(conn_t *c, uint8_t *dst, size_t keep, size_t total, int dev)
{
    c->in_payload = 1;
    c->dst = dst;
    c->keep = keep;
    c->consumed = 0;
    c->remaining = total;
    c->rx_dev = keep ? dev : -1;
    c->rx_slot = NULL;
    c->rx_fill = c->rx_slot_off = 0;
}

void tcp_begin_payload(conn_t *c, uint8_t *dst, size_t keep, size_t total)
{
    tcp_begin_payload_dev(c, dst, keep, total, -1);
}

int tcp_protocol_error(conn_t *c, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    gw_log(GW_LOG_WARN, "tcp stream %d from %s: protocol error: %s", c->idx, B(c->ep)->peer, msg);
    tcp_fail(c->ep, GW_ERR_PROTOCOL, "protocol error on tcp stream %d: %s", c->idx, msg);
    return -1;
}

/* Checks a remote access against the region table. */
static void start_rndv_recv(tcp_ep_t *ep, gw_request_t *r, uint64_t sender_id, uint64_t msg_len,
                            uint64_t tag)
{
    uint64_t id;
    r->rtag = tag;
    r->length = msg_len;
    size_t accept = msg_len < r->len ? msg_len : r->len;
    if (accept == 0) {
        tcp_send_ctl(ep, &ep->conns[0], GW_TCP_CTS, 0, sender_id, 0, 0, 0, 0);
        gw_ep_recv_done(B(ep), r, msg_len, tag, GW_OK);
        return;
    }
    if (gw_op_table_alloc(&ep->optab, r, &id) != 0) {
        tcp_fail(ep, GW_ERR_NOMEM, "out of memory for a receive slot");
        return;
    }
    tcp_rq(r)->sender = sender_id;
    tcp_rq(r)->accept = accept;
    r->done = 0;
    tcp_send_ctl(ep, &ep->conns[0], GW_TCP_CTS, 0, sender_id, id, 0, accept, 0);
}

static int handle_header(conn_t *c, const gw_tcp_hdr_t *h)
{
    tcp_ep_t *ep = c->ep;
    gw_request_t *r;
    gw_mem_t *m;
    c->cur = *h;
    c->dst_region = NULL;
    c->rx_req = NULL;
    c->rx_unexp = NULL;
    c->cur_status = GW_OK;
    switch (h->type) {
    case GW_TCP_PUT:
        c->cur_status = gw_region_check(CORE(ep), h->key, h->addr, h->len, GW_ACCESS_REMOTE_WRITE, &m);
        c->dst_region = m;
        if (m)
            m->incoming++;
        tcp_begin_payload_dev(c, m ? (uint8_t *)(uintptr_t)h->addr : NULL, m ? h->len : 0, h->len, mem_dev(m));
        break;
    case GW_TCP_PUT_ACK:
        r = tcp_slot_get(ep, h->id, 1u << GW_OP_PUT | 1u << GW_OP_PUT_NOTIFY | 1u << GW_OP_BATCH);
        if (!r)
            return tcp_protocol_error(c, "put acknowledgement for unknown operation 0x%llx",
                                  (unsigned long long)h->id);
        if (h->aux < 0 && r->first_err == GW_OK)
            r->first_err = (gw_status_t)h->aux;
        r->done += h->len;
        if (--r->pending == 0)
            tcp_op_finish(ep, r, r->first_err);
        return 0;
    case GW_TCP_GET_REQ: {
        gw_status_t st = gw_region_check(CORE(ep), h->key, h->addr, h->len, GW_ACCESS_REMOTE_READ, &m);
        gw_tcp_hdr_t resp = {.type = GW_TCP_GET_RESP, .aux = st, .id = h->id,
                             .len = st == GW_OK ? h->len : 0, .val = h->val};
        tx_item_t *t = tcp_tx_alloc(ep);
        if (!t) {
            tcp_fail(ep, GW_ERR_NOMEM, "out of memory answering a get");
            return -1;
        }
        gw_tcp_hdr_encode(t->hdr, &resp);
        if (st == GW_OK) {
            t->payload = (const uint8_t *)(uintptr_t)h->addr;
            t->paylen = h->len;
            t->region_id = m->id;
            t->gpu_dev = h->len ? mem_dev(m) : -1;
        }
        tcp_tx_push(c, t);
        return c->want_out || c->stg_wait ? 0 : tcp_conn_flush(c);
    }
    case GW_TCP_GET_RESP:
        r = tcp_slot_get(ep, h->id, 1u << GW_OP_GET);
        if (!r)
            return tcp_protocol_error(c, "get response for unknown operation 0x%llx", (unsigned long long)h->id);
        if (h->aux < 0) {
            if (h->len)
                return tcp_protocol_error(c, "failed get response carries %llu bytes", (unsigned long long)h->len);
            if (r->first_err == GW_OK)
                r->first_err = (gw_status_t)h->aux;
            if (--r->pending == 0)
                tcp_op_finish(ep, r, r->first_err);
            return 0;
        }
        if (h->val > r->len || h->len > r->len - h->val)
            return tcp_protocol_error(c, "get response [%llu, +%llu) outside the %zu-byte buffer",
                                  (unsigned long long)h->val, (unsigned long long)h->len, r->len);
        c->rx_req = r;
        tcp_begin_payload_dev(c, (uint8_t *)r->buf + h->val, h->len, h->len, mem_dev(r->lmem));
        break;
    case GW_TCP_NOTIFY:
        if ((h->flags & GW_TCP_F_COUNTED) ? gw_ep_ncount_add(B(ep), h->val) != 0
                                           : gw_ep_notify_push(B(ep), h->val) != 0) {
            tcp_fail(ep, GW_ERR_NOMEM, "out of memory queueing a notification");
            return -1;
        }
        gw_core_signal(CORE(ep));
        return 0;
    case GW_TCP_EAGER:
        if (h->len > MAX_EAGER_RECV)
            return tcp_protocol_error(c, "eager message of %llu bytes exceeds %llu",
                                  (unsigned long long)h->len, MAX_EAGER_RECV);
        r = gw_ep_match_posted(B(ep), h->val);
        if (r) {
            c->rx_req = r;
            tcp_begin_payload_dev(c, r->buf, h->len < r->len ? h->len : r->len, h->len, mem_dev(r->lmem));
        } else {
            gw_unexp_t *u = gw_ep_unexp_eager(B(ep), h->val, h->len);
            if (!u) {
                tcp_fail(ep, GW_ERR_NOMEM, "out of memory keeping an unexpected %llu-byte message",
                         (unsigned long long)h->len);
                return -1;
            }
            c->rx_unexp = u;
            c->rx_unexp_n++;
            tcp_begin_payload(c, u->data, h->len, h->len);
        }
        break;
    case GW_TCP_RTS:
        r = gw_ep_match_posted(B(ep), h->val);
        if (r) {
            start_rndv_recv(ep, r, h->id, h->len, h->val);
        } else {
            if (gw_ep_unexp_rndv(B(ep), h->val, h->len, h->id, 0) != GW_OK) {
                tcp_fail(ep, GW_ERR_NOMEM, "out of memory keeping an unexpected message");
                return -1;
            }
        }
        return 0;
    case GW_TCP_CTS: {
        r = tcp_slot_get(ep, h->id, 1u << GW_OP_SEND);
        if (!r)
            return tcp_protocol_error(c, "clear-to-send for unknown send 0x%llx", (unsigned long long)h->id);
        if (h->len > r->len)
            return tcp_protocol_error(c, "receiver accepted %llu bytes of a %zu-byte message",
                                  (unsigned long long)h->len, r->len);
        if (h->len == 0) {
            tcp_op_finish(ep, r, GW_OK);
            return 0;
        }
        size_t total = h->len, piece = total >= ep->tif->stripe_min ? tcp_piece_size(ep, total) : total;
        for (size_t off = 0; off < total; off += piece) {
            size_t n = GW_MIN(piece, total - off);
            gw_tcp_hdr_t d = {.type = GW_TCP_RDATA, .key = h->key, .addr = off, .len = n};
            conn_t *dc = total >= ep->tif->stripe_min ? tcp_least_loaded(ep) : &ep->conns[0];
            if (tcp_send_frame_dev(dc, &d, (const uint8_t *)r->buf + off, n, NULL, mem_dev(r->lmem)) < 0)
                return -1;
        }
        return 0;
    }
    case GW_TCP_RDATA:
        r = tcp_slot_get(ep, h->key, 1u << GW_OP_RECV);
        if (!r)
            return tcp_protocol_error(c, "message data for unknown receive 0x%llx", (unsigned long long)h->key);
        if (h->addr > tcp_rq(r)->accept || h->len > tcp_rq(r)->accept - h->addr)
            return tcp_protocol_error(c, "message data [%llu, +%llu) outside the %llu accepted bytes",
                                  (unsigned long long)h->addr, (unsigned long long)h->len,
                                  (unsigned long long)tcp_rq(r)->accept);
        c->rx_req = r;
        tcp_begin_payload_dev(c, (uint8_t *)r->buf + h->addr, h->len, h->len, mem_dev(r->lmem));
        break;
    case GW_TCP_MSG_ACK:
        r = tcp_slot_get(ep, h->id, 1u << GW_OP_SEND);
        if (!r)
            return tcp_protocol_error(c, "message acknowledgement for unknown send 0x%llx",
                                  (unsigned long long)h->id);
        tcp_op_finish(ep, r, (gw_status_t)h->aux);
        return 0;
    case GW_TCP_AM:
        if (h->len > GW_AM_MAX || h->val >= GW_AM_IDS)
            return tcp_protocol_error(c, "active message for handler %llu of %llu bytes (ids below %d, at most %d "
                                      "bytes)", (unsigned long long)h->val, (unsigned long long)h->len, GW_AM_IDS,
                                      GW_AM_MAX);
        tcp_begin_payload(c, c->am_buf, h->len, h->len);
        break;
    case GW_TCP_PING:
        return tcp_send_lazy(c, GW_TCP_PONG, 0, 0, 0);
    case GW_TCP_PONG:
        return 0;
    case GW_TCP_BPUT:
    case GW_TCP_BGET_REQ:
    case GW_TCP_BGET_RESP:
        return tcpb_rx_header(c, h);
    case GW_TCP_CLOSE:
        ep->peer_closed = 1;
        tcp_fail(ep, GW_ERR_CONN_RESET, "peer %s closed the endpoint", B(ep)->peer);
        return -1;
    default:
        return tcp_protocol_error(c, "unexpected frame type %u", h->type);
    }
    if (c->remaining == 0)
        return finish_payload(c);
    return 0;
}

static int finish_payload(conn_t *c)
{
    tcp_ep_t *ep = c->ep;
    const gw_tcp_hdr_t *h = &c->cur;
    gw_request_t *r = c->rx_req;
    c->in_payload = 0;
    if (c->rx_dev >= 0 && tcp_gpu_finish(c) < 0)
        return -1;
    switch (h->type) {
    case GW_TCP_PUT: {
        if (c->dst_region)
            c->dst_region->incoming--;
        c->dst_region = NULL;
        gw_status_t st = c->cur_status;
        if (st == GW_OK && (h->flags & GW_TCP_F_NOTIFY)) {
            if (gw_ep_notify_push(B(ep), h->val) != 0) {
                tcp_fail(ep, GW_ERR_NOMEM, "out of memory queueing a notification");
                return -1;
            }
            gw_core_signal(CORE(ep));
        }
        return tcp_send_lazy(c, GW_TCP_PUT_ACK, st, h->id, st == GW_OK ? h->len : 0);
    }
    case GW_TCP_GET_RESP:
        r->done += h->len;
        if (--r->pending == 0)
            tcp_op_finish(ep, r, r->first_err);
        return 0;
    case GW_TCP_EAGER:
        if (r) {
            gw_ep_recv_done(B(ep), r, h->len, h->val, GW_OK);
        } else if (c->rx_unexp) {
            gw_ep_unexp_filled(B(ep), c->rx_unexp);
            c->rx_unexp = NULL;
        }
        gw_core_signal(CORE(ep));
        return 0;
    case GW_TCP_RDATA:
        r->done += h->len;
        if (r->done == tcp_rq(r)->accept) {
            uint64_t sender = tcp_rq(r)->sender;
            gw_op_table_free(&ep->optab, r);
            gw_ep_recv_done(B(ep), r, r->length, r->rtag, GW_OK);
            gw_core_signal(CORE(ep));
            return tcp_send_lazy(&ep->conns[0], GW_TCP_MSG_ACK, 0, sender, 0);
        }
        return 0;
    case GW_TCP_BPUT:
    case GW_TCP_BGET_REQ:
    case GW_TCP_BGET_RESP:
        return tcpb_rx_next(c);
    case GW_TCP_AM:
        if (gw_ep_am_deliver(B(ep), (unsigned)h->val, c->am_buf, (size_t)h->len) != GW_OK) {
            char why[256];
            snprintf(why, sizeof(why), "%.*s", (int)sizeof(why) - 1, CORE(ep)->errbuf);
            return tcp_protocol_error(c, "%s", why);
        }
        return 0;
    default:
        return 0;
    }
}

/* Consumes what rbuf holds.  -1 when the endpoint failed. */
static int process_rbuf(conn_t *c)
{
    char why[256];
    for (;;) {
        size_t avail = c->rlen - c->rpos;
        if (c->in_payload) {
            if (!avail)
                return 0;
            size_t take = GW_MIN(avail, c->remaining);
            if (c->consumed < c->keep) {
                size_t k = GW_MIN(take, c->keep - c->consumed);
                if (c->bscat)
                    tcpb_scat_store(c, c->rbuf + c->rpos, k);
                else if (c->rx_dev < 0)
                    memcpy(c->dst + c->consumed, c->rbuf + c->rpos, k);
                else if (tcp_gpu_store(c, c->rbuf + c->rpos, k) < 0)
                    return -1;
            }
            c->consumed += take;
            c->remaining -= take;
            c->rpos += take;
            if (!c->remaining && finish_payload(c) < 0)
                return -1;
            if (c->fd < 0)
                return -1;
            continue;
        }
        if (avail < GW_TCP_HDR)
            return 0;
        gw_tcp_hdr_t h;
        if (gw_tcp_hdr_decode(c->rbuf + c->rpos, &h, why, sizeof(why)) != GW_OK)
            return tcp_protocol_error(c, "%s", why);
        c->rpos += GW_TCP_HDR;
        if (handle_header(c, &h) < 0 || c->fd < 0)
            return -1;
    }
}

/* Hands the rest of the payload being received to the stream's helper
 * thread.  1: handed over (or the endpoint failed). */
static int offload_rx(conn_t *c)
{
    tcp_iface_t *tif = c->ep->tif;
    if (!offloadable(tif, c->remaining) || c->bscat)
        return 0;
    int dev = c->rx_dev;
    if (dev >= 0 && tcp_gpu_finish(c) < 0) /* what the progress thread staged lands first */
        return 1;
    gw_tcp_job_t *j = &c->rxj;
    j->rx = 1;
    j->fd = c->fd;
    j->dev = c->consumed < c->keep ? dev : -1;
    j->owner = c;
    j->src = NULL;
    j->dst = c->dst;
    j->len = c->consumed + c->remaining;
    j->keep = c->keep;
    j->off = c->consumed;
    gw_status_t st = gw_tcp_pool_submit(tif->pool, c->worker, j);
    if (st != GW_OK) {
        tcp_pool_trouble(tif, st);
        c->rx_dev = dev; /* tcp_gpu_finish left nothing staged: carry on here */
        return 0;
    }
    c->rx_busy = 1;
    tcp_conn_update_io(c);
    return 1;
}

static void conn_readable(conn_t *c)
{
    tcp_ep_t *ep = c->ep;
    if (c->rx_busy)
        return;
    for (int iter = 0; iter < 16 && c->fd >= 0; iter++) {
        ssize_t n;
        if (c->in_payload && c->rpos == c->rlen && offload_rx(c))
            return;
        if (c->in_payload && c->rpos == c->rlen && c->remaining >= DIRECT_MIN) {
            /* straight into place (or into scratch when discarding) */
            uint8_t *dst;
            size_t want;
            gw_staging_t *st = NULL;
            gw_stage_slot_t *sl = NULL;
            if (c->consumed < c->keep && c->rx_dev >= 0) {
                sl = tcp_rx_slot(c, &st);
                if (c->fd < 0)
                    return;
                if (!sl)
                    goto via_rbuf;
                dst = (uint8_t *)sl->host + c->rx_fill;
                want = GW_MIN(GW_MIN(c->remaining, c->keep - c->consumed), gw_staging_chunk(st) - c->rx_fill);
            } else if (c->bscat) { /* a batch frame: straight into its entries (one recvmsg, many iovecs) */
                dst = NULL;
                want = c->remaining;
            } else if (c->consumed < c->keep) {
                dst = c->dst + c->consumed;
                want = GW_MIN(c->remaining, c->keep - c->consumed);
            } else {
                dst = ep->tif->scratch;
                want = GW_MIN(c->remaining, (size_t)RBUF_CAP);
            }
            n = dst ? gw_sock_recv(c->fd, dst, want, MSG_DONTWAIT) : tcpb_scat_recv(c, want);
            if (n > 0) {
                B(ep)->last_rx_ns = gw_now_ns();
                c->consumed += (size_t)n;
                c->remaining -= (size_t)n;
                if (sl) {
                    c->rx_fill += (size_t)n;
                    if ((c->rx_fill == gw_staging_chunk(st) || c->consumed == c->keep) && tcp_rx_submit(c, st) < 0)
                        return;
                }
                if (!c->remaining) {
                    if (finish_payload(c) < 0)
                        return;
                    /* a large payload is mostly followed by another (the
                     * pieces of a striped put, a batch's runs): read the
                     * next header alone, so that the payload behind it
                     * lands in place too, not its first 256 KiB in rbuf
                     * and then a copy (a quarter of every 1 MiB frame) */
                    if (!c->in_payload)
                        c->hdr_only = 1;
                }
                continue;
            }
        } else {
        via_rbuf:
            if (c->rpos == c->rlen)
                c->rpos = c->rlen = 0;
            else if (c->rlen == RBUF_CAP || c->rpos > RBUF_CAP / 2) {
                memmove(c->rbuf, c->rbuf + c->rpos, c->rlen - c->rpos);
                c->rlen -= c->rpos;
                c->rpos = 0;
            }
            size_t room = RBUF_CAP - c->rlen;
            if (c->hdr_only) /* after a worker's payload or one received in place: the next header alone (its payload may be large too) */
                room = GW_MIN(room, GW_TCP_HDR - GW_MIN(GW_TCP_HDR, c->rlen - c->rpos));
            else if (c->in_payload && tcpb_rx_in_block(c))
                /* a batch frame's descriptor block alone: the entries' bytes
                 * behind it go straight into place (by a helper thread for a
                 * frame of GPU entries), not through this buffer and a copy
                 * on the progress thread (up to 256 KiB of each frame were) */
                room = GW_MIN(room, c->remaining - GW_MIN(c->remaining, c->rlen - c->rpos));
            if (!room) {
                c->hdr_only = 0;
                room = RBUF_CAP - c->rlen;
            }
            n = gw_sock_recv(c->fd, c->rbuf + c->rlen, room, MSG_DONTWAIT);
            if (n > 0) {
                B(ep)->last_rx_ns = gw_now_ns();
                c->rlen += (size_t)n;
                if (c->rlen - c->rpos >= GW_TCP_HDR)
                    c->hdr_only = 0;
                c->rx_unexp_n = 0;
                if (process_rbuf(c) < 0)
                    return;
                if ((size_t)n < (RBUF_CAP - c->rlen) / 2 && !c->in_payload)
                    return; /* drained */
                /* messages outran the posted receives: read no more now, so
                 * that the application may post receives before the rest is
                 * taken (a stream of small sends otherwise made thousands of
                 * them unexpected per call, each an allocation and a copy:
                 * malloc and its page faults were 2/3 of the receiver's time);
                 * what stays in the socket is read on the next progress call
                 * (level-triggered), and the sender's socket fills meanwhile */
                if (c->rx_unexp_n)
                    return;
                continue;
            }
        }
        if (n == 0) {
            tcp_stream_ended(c, "without closing the endpoint");
            return;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return;
        tcp_recv_fail(c, errno);
        return;
    }
}

void tcp_conn_event(void *arg, uint32_t events)
{
    conn_t *c = arg;
    if ((events & (EPOLLIN | EPOLLERR | EPOLLHUP)) && !c->rx_busy)
        conn_readable(c);
    if (c->fd >= 0 && (events & EPOLLOUT))
        tcp_conn_flush(c);
}

gw_status_t tcp_recv_matched(gw_tl_ep_t *tep, gw_request_t *req, gw_unexp_t *u)
{
    tcp_ep_t *ep = to_ep(tep);
    start_rndv_recv(ep, req, u->handle, u->len, u->tag);
    return GW_OK;
}

void tcp_rx_job_done(conn_t *c, gw_tcp_job_t *j)
{
    tcp_ep_t *ep = c->ep;
    c->rx_busy = 0;
    if (j->cuda) {
        tcp_fail(ep, GW_ERR_CUDA, "tcp: host-to-device staging copy for stream %d failed: %s", c->idx, j->why);
        return;
    }
    if (j->err) {
        tcp_recv_fail(c, j->err);
        return;
    }
    if (j->eof) {
        char what[64];
        snprintf(what, sizeof(what), "in the middle of a %llu-byte payload", (unsigned long long)j->len);
        tcp_stream_ended(c, what);
        return;
    }
    B(ep)->last_rx_ns = gw_now_ns();
    c->consumed = j->off;
    c->remaining = 0;
    c->hdr_only = 1;
    tcp_conn_update_io(c);
    if (finish_payload(c) < 0 || c->fd < 0)
        return;
    conn_readable(c); /* what follows may be waiting already */
}
