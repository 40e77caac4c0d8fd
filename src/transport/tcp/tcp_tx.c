/* SPDX-License-Identifier: Apache-2.0 */
/* tcp_tx.c - the tcp transmit side: transmit items, flushing and
 * corking streams, helper-thread hand-over of large frames, deferred
 * notifications, and the put/get/send operations.
 * Private objects: tcp_int.h. */
#include "transport/tcp/tcp_int.h"
#include "transport/base/batch.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int conn_flush_(conn_t *c);

/* Transmit items come from the core's per-operation pool (core.h
 * gw_op_state_get), zeroed. */
tx_item_t *tcp_tx_alloc(tcp_ep_t *ep)
{
    tx_item_t *t = gw_op_state_get(CORE(ep), sizeof(*t));
    if (!t)
        return NULL;
    t->gpu_dev = -1;
    t->gev = -1;
    return t;
}

void tcp_tx_release(tcp_ep_t *ep, tx_item_t *t)
{
    tcp_tx_drop_slots(ep, t);
    gw_op_state_put(CORE(ep), t->owned); /* (a block of the per-operation pool) */
    t->owned = NULL;
    if (t->gb) {
        tcp_gbuf_put(ep->tif, t->gb);
        t->gb = NULL;
    }
    gw_op_state_put(CORE(ep), t);
}

/* The kernel took n bytes of ours on stream c.  Small frames prove
 * nothing: a frozen process's kernel takes our PINGs, acknowledgements and
 * get requests for ever.  Data does, up to a point: while the buffers are
 * known full (a send met EAGAIN and our queue has not run dry since) bytes
 * taken mean the process read; before that, every TX_PROOF bytes count as
 * life - a frozen peer takes at most its buffers' worth, then our sends stop
 * and its silence shows within GPUWIRE_PEER_TIMEOUT_MS. */
#define TX_PROOF (64u << 10)
void tcp_tx_taken(conn_t *c, size_t n)
{
    c->tx_unproven += n;
    if (c->tx_full || c->tx_unproven >= TX_PROOF) {
        c->ep->super.base->last_rx_ns = gw_now_ns();
        c->tx_unproven = 0;
    }
}

void tcp_conn_set_out(conn_t *c, int on)
{
    if (c->want_out == on || c->fd < 0)
        return;
    c->want_out = on;
    tcp_conn_update_io(c);
}

/* Pops a fully written head frame and completes what waited for it. */
void tcp_tx_done(conn_t *c, tx_item_t *t)
{
    tcp_ep_t *ep = c->ep;
    c->txh = t->next;
    if (!c->txh)
        c->txt = NULL;
    gw_request_t *r = t->req;
    tcp_tx_release(ep, t);
    if (r) { /* eager send: the message is on its way */
        r->length = r->len;
        gw_ep_op_done(B(ep), r, GW_OK);
    }
}

void tcp_pool_trouble(tcp_iface_t *tif, gw_status_t st)
{
    gw_log(GW_LOG_WARN, "tcp: helper threads unavailable (%s: %s); moving every byte on the progress thread",
           gw_status_name(st), tif->super.core->errbuf);
    tif->thread_min = UINT64_MAX;
}

/* Hands the head frame to the stream's helper thread.  1: handed over. */
static int offload_tx(conn_t *c)
{
    tcp_iface_t *tif = c->ep->tif;
    tx_item_t *t = c->txh;
    if (!offloadable(tif, t->paylen) || t->sl_n || t->iov)
        return 0;
    gw_tcp_job_t *j = &c->txj;
    j->rx = 0;
    j->fd = c->fd;
    j->dev = t->gpu_dev;
    j->owner = c;
    memcpy(j->hdr, t->hdr, GW_TCP_HDR);
    j->src = t->payload;
    j->dst = NULL;
    j->len = GW_TCP_HDR + t->paylen;
    j->keep = 0;
    j->off = t->off;
    j->nnext = 0; /* large frames queued behind it go along: one hand-over for several */
    for (tx_item_t *n = t->next; n && j->nnext < GW_TCP_JOB_FRAMES - 1 && offloadable(tif, n->paylen) && !n->iov;
         n = n->next) {
        if (n->gb && n->gev >= 0) { /* a gathered batch run goes along once its launch is done */
            if (tcp_kern_test(tif, n->gb, n->gev) != 1)
                break;
            n->gev = -1;
        }
        gw_tcp_next_frame_t *f = &j->next[j->nnext++];
        memcpy(f->hdr, n->hdr, GW_TCP_HDR);
        f->src = n->payload;
        f->len = GW_TCP_HDR + n->paylen;
        f->dev = n->gpu_dev;
    }
    gw_status_t st = gw_tcp_pool_submit(tif->pool, c->worker, j);
    if (st != GW_OK) {
        tcp_pool_trouble(tif, st);
        return 0;
    }
    c->tx_busy = 1;
    tcp_conn_set_out(c, 0); /* the worker watches the socket now */
    return 1;
}

void tcp_conn_uncork(conn_t *c)
{
    if (c->corked) {
        c->corked = 0;
        gw_list_del(&c->cork_link);
    }
}

int tcp_conn_flush(conn_t *c)
{
    if (c->in_flush) /* the running flush picks up what was queued */
        return 0;
    c->in_flush = 1;
    int r = conn_flush_(c);
    c->in_flush = 0;
    return r;
}

static int conn_flush_(conn_t *c)
{
    tcp_ep_t *ep = c->ep;
    while (c->txh && c->fd >= 0) {
        if (c->tx_busy)
            return 0;
        int kp = tcp_tx_kern_pending(c, c->txh); /* a gathered batch run: its launch first */
        if (kp)
            return kp < 0 ? -1 : 0;
        if (offload_tx(c))
            return 0;
        if (c->txh->gpu_dev >= 0) {
            int r = tcp_flush_gpu_head(c);
            if (r <= 0)
                return r;
            continue;
        }
        struct iovec iov[IOV_MAX_RUN];
        int n = 0;
        for (tx_item_t *t = c->txh; t && t->gpu_dev < 0 && n < IOV_MAX_BATCH - 1; t = t->next) {
            if (n && offloadable(ep->tif, t->paylen) && !t->iov)
                break; /* goes to a helper thread once it is the head */
            if (n && t->gb && t->gev >= 0)
                break; /* its gather launch is checked once it is the head */
            if (t->iov) { /* a batch run: header and payload from its iovecs */
                if (tcpb_iov_fill(t, iov, &n, IOV_MAX_RUN))
                    break; /* the array is full */
                continue;
            }
            if (t->off < GW_TCP_HDR) {
                iov[n].iov_base = t->hdr + t->off;
                iov[n].iov_len = GW_TCP_HDR - t->off;
                n++;
                if (t->paylen) {
                    iov[n].iov_base = (void *)t->payload;
                    iov[n].iov_len = t->paylen;
                    n++;
                }
            } else {
                iov[n].iov_base = (void *)(t->payload + (t->off - GW_TCP_HDR));
                iov[n].iov_len = t->paylen - (t->off - GW_TCP_HDR);
                n++;
            }
        }
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t w = gw_sock_sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                c->tx_full = 1;
                tcp_conn_set_out(c, 1);
                return 0;
            }
            tcp_sock_fail(ep, errno, "send", c->idx);
            return -1;
        }
        size_t left = (size_t)w;
        /* a long transfer in one direction (our PINGs queue behind it) is
         * not silence, but bytes a frozen peer's kernel takes are no life
         * (see tcp_tx_taken) */
        if (w > 0)
            tcp_tx_taken(c, (size_t)w);
        c->tx_bytes -= GW_MIN(c->tx_bytes, left);
        while (left && c->txh) {
            tx_item_t *t = c->txh;
            size_t rem = GW_TCP_HDR + t->paylen - t->off;
            if (left < rem) {
                t->off += left;
                left = 0;
                break;
            }
            left -= rem;
            tcp_tx_done(c, t);
        }
        /* a partial item stays at the head; loop to try again */
    }
    c->tx_full = 0; /* our queue ran dry: the buffers are no longer known full */
    tcp_conn_set_out(c, 0);
    if (c->lazy) {
        c->lazy = 0;
        gw_list_del(&c->lazy_link);
    }
    tcp_conn_uncork(c);
    return 0;
}

void tcp_tx_push(conn_t *c, tx_item_t *t)
{
    t->next = NULL;
    if (c->txt)
        c->txt->next = t;
    else
        c->txh = t;
    c->txt = t;
    c->tx_bytes += GW_TCP_HDR + t->paylen;
}

/* After a frame was queued by a post: write now, unless the stream is backed
 * up (the socket or a staging copy will call back) or the frame is corked.
 * The first small frame posted after a progress call goes out at once (a
 * lone operation's latency is untouched); more posted before the next
 * progress call wait for it, or for CORK_FRAMES of them, and leave in one
 * sendmsg: a window of small puts costs one system call per 128, not one
 * each.  The context fd is signalled, so a caller that sleeps on it wakes
 * to write them. */
static int conn_kick(conn_t *c, size_t paylen, int gpu_dev)
{
    tcp_iface_t *tif = c->ep->tif;
    if (c->want_out || c->stg_wait)
        return 0;
    if (paylen <= CORK_PAYLOAD_MAX && gpu_dev < 0) {
        if (c->corked) {
            if (++c->ncorked < CORK_FRAMES)
                return 0;
        } else if (c->wrote_gen == tif->gen) {
            c->corked = 1;
            c->ncorked = 1;
            gw_list_push_back(&tif->cork, &c->cork_link);
            gw_core_signal(tif->super.core);
            return 0;
        }
    }
    c->wrote_gen = tif->gen;
    return tcp_conn_flush(c);
}

/* A transmit item holding frame h and its payload, not yet queued; NULL
 * when the stream is closed or (the endpoint failed) out of memory. */
tx_item_t *tcp_tx_frame(conn_t *c, const gw_tcp_hdr_t *h, const void *payload, size_t paylen)
{
    tcp_ep_t *ep = c->ep;
    if (c->fd < 0)
        return NULL;
    tx_item_t *t = tcp_tx_alloc(ep);
    if (!t) {
        tcp_fail(ep, GW_ERR_NOMEM, "out of memory queueing a frame to %s", B(ep)->peer);
        return NULL;
    }
    gw_tcp_hdr_encode(t->hdr, h);
    t->payload = payload;
    t->paylen = paylen;
    return t;
}

/* Queues a frame and writes it now when the stream is not backed up. */
int tcp_send_frame_dev(conn_t *c, const gw_tcp_hdr_t *h, const void *payload, size_t paylen,
                          gw_request_t *req, int gpu_dev)
{
    tx_item_t *t = tcp_tx_frame(c, h, payload, paylen);
    if (!t)
        return -1;
    t->req = req;
    t->gpu_dev = paylen ? gpu_dev : -1;
    tcp_tx_push(c, t);
    return conn_kick(c, paylen, t->gpu_dev);
}

static int send_frame(conn_t *c, const gw_tcp_hdr_t *h, const void *payload, size_t paylen,
                      gw_request_t *req)
{
    return tcp_send_frame_dev(c, h, payload, paylen, req, -1);
}

int tcp_send_ctl(tcp_ep_t *ep, conn_t *c, uint8_t type, int32_t aux, uint64_t id, uint64_t key,
                    uint64_t addr, uint64_t len, uint64_t val)
{
    gw_tcp_hdr_t h = {.type = type, .aux = aux, .id = id, .key = key, .addr = addr, .len = len, .val = val};
    (void)ep;
    return send_frame(c, &h, NULL, 0, NULL);
}

/* Acknowledgements wait for the next frame on the stream to carry them (one
 * write instead of two in request/response patterns), or for the next
 * progress call, which the context fd is woken for. */
int tcp_send_lazy(conn_t *c, uint8_t type, int32_t aux, uint64_t id, uint64_t len)
{
    tcp_ep_t *ep = c->ep;
    if (c->fd < 0)
        return -1;
    tx_item_t *t = tcp_tx_alloc(ep);
    if (!t) {
        tcp_fail(ep, GW_ERR_NOMEM, "out of memory queueing a frame to %s", B(ep)->peer);
        return -1;
    }
    gw_tcp_hdr_t h = {.type = type, .aux = aux, .id = id, .len = len};
    gw_tcp_hdr_encode(t->hdr, &h);
    tcp_tx_push(c, t);
    if (!c->lazy && !c->want_out) {
        c->lazy = 1;
        c->lazy_gen = ep->tif->gen;
        gw_list_push_back(&ep->tif->lazy, &c->lazy_link);
        gw_core_signal(CORE(ep));
    }
    return 0;
}

conn_t *tcp_least_loaded(tcp_ep_t *ep)
{
    conn_t *best = &ep->conns[0];
    for (int i = 1; i < ep->nconns; i++) {
        conn_t *c = &ep->conns[i];
        if (c->fd >= 0 && (best->fd < 0 || c->tx_bytes < best->tx_bytes))
            best = c;
    }
    return best;
}

int tcp_open_streams(tcp_ep_t *ep)
{
    int n = 0;
    for (int i = 0; i < ep->nconns; i++)
        n += ep->conns[i].fd >= 0;
    return n;
}

size_t tcp_piece_size(tcp_ep_t *ep, size_t len)
{
    int n = tcp_open_streams(ep);
    size_t per = (len + (size_t)n - 1) / (size_t)(n ? n : 1);
    size_t chunk = (size_t)ep->tif->chunk;
    /* with helper threads, pieces too small for one would stay on the
     * progress thread: fewer, larger pieces (fewer streams) move faster */
    if (ep->tif->pool && ep->tif->thread_min != UINT64_MAX && per < ep->tif->thread_min)
        per = (size_t)GW_MIN((uint64_t)len, ep->tif->thread_min);
    return per < chunk ? per : chunk;
}

gw_status_t tcp_notify_out(void *arg, gw_request_t *req)
{
    tcp_ep_t *ep = arg;
    gw_tcp_hdr_t h = {.type = GW_TCP_NOTIFY,
                      .flags = gw_req_notify_counted(req) ? GW_TCP_F_COUNTED : 0,
                      .val = req->value}; /* (a batch's value too: gw_xfer_batch sets it) */
    if (send_frame(&ep->conns[0], &h, NULL, 0, NULL) < 0)
        return gw_ep_failed(B(ep)) ? B(ep)->error : GW_ERR_CONN_RESET; /* stream 0 is gone */
    return GW_OK;
}

void tcp_op_finish(tcp_ep_t *ep, gw_request_t *r, gw_status_t st)
{
    gw_op_table_free(&ep->optab, r);
    if (r->tl_flags & TLF_STRIPED) {
        r->tl_flags &= (uint16_t)~TLF_STRIPED;
        ep->striped_puts--;
    }
    r->length = st == GW_OK ? r->len : r->done;
    gw_ep_op_done(B(ep), r, st); /* (a deferred notification's request is held: ep_base.h) */
}

static gw_status_t post_pieces(tcp_ep_t *ep, gw_request_t *req, uint8_t type, uint8_t flags)
{
    uint64_t id;
    if (gw_op_table_alloc(&ep->optab, req, &id) != 0)
        return gw_err(CORE(ep), GW_ERR_NOMEM, "out of memory for an operation slot");
    req->first_err = GW_OK;
    size_t len = req->len;
    int striped = len >= ep->tif->stripe_min && tcp_open_streams(ep) > 1;
    size_t piece = striped ? tcp_piece_size(ep, len) : (len ? len : 1);
    size_t npieces = len ? (len + piece - 1) / piece : 1;
    req->pending = (uint32_t)npieces;
    if (striped && type == GW_TCP_PUT) {
        req->tl_flags |= TLF_STRIPED;
        ep->striped_puts++;
    }
    for (size_t i = 0; i < npieces; i++) {
        size_t off = i * piece, n = GW_MIN(piece, len - off);
        gw_tcp_hdr_t h = {.type = type, .flags = flags, .id = id, .key = req->rkey->id,
                          .addr = req->raddr + off, .len = n,
                          .val = type == GW_TCP_PUT && flags ? req->value : off};
        conn_t *c = striped ? tcp_least_loaded(ep) : &ep->conns[0];
        if (type == GW_TCP_PUT) {
            if (tcp_send_frame_dev(c, &h, (const uint8_t *)req->buf + off, n, NULL, mem_dev(req->lmem)) < 0)
                return GW_OK; /* the endpoint failed and completed the request */
        } else if (send_frame(c, &h, NULL, 0, NULL) < 0) {
            return GW_OK;
        }
    }
    return GW_OK;
}

gw_status_t tcp_put(gw_tl_ep_t *tep, gw_request_t *req)
{
    return post_pieces(to_ep(tep), req, GW_TCP_PUT, 0);
}

gw_status_t tcp_put_notify(gw_tl_ep_t *tep, gw_request_t *req)
{
    tcp_ep_t *ep = to_ep(tep);
    int single = req->len < ep->tif->stripe_min || tcp_open_streams(ep) <= 1;
    if (single && ep->striped_puts == 0 && !gw_ep_notify_pending(B(ep)))
        return post_pieces(ep, req, GW_TCP_PUT, GW_TCP_F_NOTIFY); /* in order on stream 0 */
    /* its notification could pass a striped put: the base sends it once
     * every earlier operation and this put's data are in place (and if the
     * posting below fails, gw_ep_op_unstart takes the deferral back) */
    gw_status_t st = gw_ep_notify_defer(B(ep), req);
    if (st != GW_OK)
        return st;
    return post_pieces(ep, req, GW_TCP_PUT, 0);
}

gw_status_t tcp_get(gw_tl_ep_t *tep, gw_request_t *req)
{
    return post_pieces(to_ep(tep), req, GW_TCP_GET_REQ, 0);
}

gw_status_t tcp_send(gw_tl_ep_t *tep, gw_request_t *req)
{
    tcp_ep_t *ep = to_ep(tep);
    if (req->len <= ep->tif->eager_max) {
        gw_tcp_hdr_t h = {.type = GW_TCP_EAGER, .len = req->len, .val = req->value};
        /* untracked: its caller holds no request to learn when the buffer
         * is read and may reuse it at once, while a small frame waits for the
         * next progress call (corked) or behind others: from a copy of its
         * own (ep_base.h) */
        if (gw_ep_send_needs_own(req, ep->tif->eager_max)) {
            gw_status_t st = gw_ep_own_payload(req);
            if (st != GW_OK)
                return st;
        }
        int dev = mem_dev(req->lmem);
        tcp_send_frame_dev(&ep->conns[0], &h, req->buf, req->len, req, dev);
        return GW_OK;
    }
    uint64_t id;
    if (gw_op_table_alloc(&ep->optab, req, &id) != 0)
        return gw_err(CORE(ep), GW_ERR_NOMEM, "out of memory for a send slot");
    tcp_send_ctl(ep, &ep->conns[0], GW_TCP_RTS, 0, id, 0, 0, req->len, req->value);
    return GW_OK;
}

/* An active message: one frame on stream 0, its payload copied into a
 * block of the per-operation pool that goes with the frame. */
gw_status_t tcp_am_send(gw_tl_ep_t *tep, unsigned id, const void *data, size_t len)
{
    tcp_ep_t *ep = to_ep(tep);
    gw_status_t st = gw_ep_am_check(B(ep), "tcp", id, len);
    if (st != GW_OK)
        return st;
    void *copy = gw_op_state_get(CORE(ep), len ? len : 1);
    if (!copy)
        return gw_err(CORE(ep), GW_ERR_NOMEM, "tcp: out of memory for an active message to %s", B(ep)->peer);
    memcpy(copy, data, len);
    gw_tcp_hdr_t h = {.type = GW_TCP_AM, .len = len, .val = id};
    conn_t *c = &ep->conns[0];
    tx_item_t *t = tcp_tx_frame(c, &h, copy, len);
    if (!t) {
        gw_op_state_put(CORE(ep), copy);
        return gw_ep_failed(B(ep)) ? B(ep)->error
                                   : gw_err(CORE(ep), GW_ERR_CONN_RESET, "tcp: stream 0 to %s is closed", B(ep)->peer);
    }
    t->owned = copy;
    tcp_tx_push(c, t);
    if (conn_kick(c, len, -1) < 0)
        return B(ep)->error;
    return GW_OK;
}

void tcp_tx_job_done(conn_t *c, gw_tcp_job_t *j)
{
    tcp_ep_t *ep = c->ep;
    if (j->cuda) {
        c->tx_busy = 0;
        tcp_fail(ep, GW_ERR_CUDA, "tcp: device-to-host staging copy for stream %d failed: %s", c->idx, j->why);
        return;
    }
    if (j->err) {
        c->tx_busy = 0;
        tcp_sock_fail(ep, j->err, "send", c->idx);
        return;
    }
    B(ep)->last_rx_ns = gw_now_ns(); /* the peer's kernel took the bytes */
    /* tx_busy stays set until every frame of the job is popped: what their
     * completions queue must not be flushed (or handed over) past them */
    for (int i = 0; i < j->frames_done && c->txh && c->fd >= 0; i++) {
        tx_item_t *t = c->txh;
        c->tx_bytes -= GW_MIN(c->tx_bytes, GW_TCP_HDR + t->paylen - t->off);
        t->off = GW_TCP_HDR + t->paylen;
        tcp_tx_done(c, t);
    }
    c->tx_busy = 0;
    if (!gw_ep_failed(B(ep)) && c->fd >= 0)
        tcp_conn_flush(c);
}

/* ---- cancel ------------------------------------------------------------------------ */
/* Is t a frame of req that no byte of has been written, nor handed to a
 * helper thread or a GPU gather: a put's or get's piece, an eager send's
 * frame, a rendezvous send's RTS, a batch's run (its descriptor block and
 * iovecs, or its bytes copied off the GPU, are the frame's own)? */
static int tx_withdrawable(tcp_ep_t *ep, const conn_t *c, const tx_item_t *t, const gw_request_t *req)
{
    if (t->off || t->gb || t->gpu_dev >= 0 || (t == c->txh && c->tx_busy))
        return 0; /* (GPU-sourced frames are left to their staging: a stream may wait on its head) */
    if (t->req) /* an eager send's frame carries its request */
        return t->req == req;
    gw_tcp_hdr_t h;
    char why[8];
    if (gw_tcp_hdr_decode(t->hdr, &h, why, sizeof(why)) != GW_OK)
        return 0;
    if (h.type == GW_TCP_BPUT || h.type == GW_TCP_BGET_REQ)
        return req->op == GW_OP_BATCH && gw_op_table_get(&ep->optab, h.id) == req;
    if (t->iov || t->owned)
        return 0;
    if (h.type == GW_TCP_RTS)
        return req->op == GW_OP_SEND && gw_op_table_get(&ep->optab, h.id) == req;
    return (h.type == GW_TCP_PUT || h.type == GW_TCP_GET_REQ) && gw_op_table_get(&ep->optab, h.id) == req;
}

/* Drops the frames of req still waiting whole in the streams' queues: a
 * put's or get's pieces, a batch's runs, an eager send's frame, a
 * rendezvous send's RTS (the peer never heard of the message; once the RTS
 * left, the receiver may match it and pull, so the send is let finish).
 * Pieces and runs already written are acknowledged (puts) or answered
 * (gets) by the peer as usual; the request ends with the last of those,
 * GW_ERR_CANCELED, and a deferred notification (a batch's, a striped
 * put_notify's) is then never sent.  (A stream whose head a helper thread
 * is writing keeps every frame: the job may span several.) */
gw_status_t tcp_cancel(gw_tl_ep_t *tep, gw_request_t *req)
{
    tcp_ep_t *ep = to_ep(tep);
    if (gw_ep_failed(B(ep)) || req->op == GW_OP_RECV)
        return GW_INPROGRESS;
    int rndv = req->op == GW_OP_SEND && req->len > ep->tif->eager_max;
    uint32_t dropped = 0;
    for (int i = 0; i < ep->nconns; i++) {
        conn_t *c = &ep->conns[i];
        if (c->fd < 0 || c->tx_busy)
            continue;
        tx_item_t *prev = NULL, *t = c->txh;
        while (t) {
            tx_item_t *next = t->next;
            if (!tx_withdrawable(ep, c, t, req)) {
                prev = t;
                t = next;
                continue;
            }
            if (prev)
                prev->next = next;
            else
                c->txh = next;
            if (c->txt == t)
                c->txt = prev;
            c->tx_bytes -= GW_MIN(c->tx_bytes, GW_TCP_HDR + t->paylen);
            t->req = NULL;
            tcp_tx_release(ep, t);
            dropped++;
            t = next;
        }
    }
    if (req->op == GW_OP_SEND && !rndv)
        return dropped ? GW_OK : GW_INPROGRESS;
    if (!dropped)
        return GW_INPROGRESS;
    if (rndv) { /* its RTS never left: the peer knows nothing of it */
        gw_op_table_free(&ep->optab, req);
        return GW_OK;
    }
    req->pending -= GW_MIN(req->pending, dropped);
    if (req->pending) { /* pieces on the wire: their answers end it */
        req->first_err = GW_ERR_CANCELED;
        return GW_INPROGRESS;
    }
    /* nothing of it on the wire any more (req->done: bytes of pieces the
     * peer had already answered) */
    gw_op_table_free(&ep->optab, req);
    if (req->tl_flags & TLF_STRIPED) {
        req->tl_flags &= (uint16_t)~TLF_STRIPED;
        ep->striped_puts--;
    }
    return GW_OK;
}
