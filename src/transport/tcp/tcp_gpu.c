/* tcp_gpu.c - GPU memory on the tcp transport: GPU-sourced frames are
 * copied device-to-host into pinned slots ahead of the socket, GPU-bound
 * payloads host-to-device behind it (mem/staging.h).
 * Private objects: tcp_int.h. */
#include "transport/tcp/tcp_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

gw_staging_t *tcp_stg_get(tcp_iface_t *tif, int dev, int rx)
{
    if (dev < 0 || dev >= MAX_DEV) {
        gw_err(tif->super.core, GW_ERR_INVALID, "tcp staging: CUDA device %d out of range", dev);
        return NULL;
    }
    gw_staging_t **p = rx ? &tif->stg_rx[dev] : &tif->stg_tx[dev];
    if (!*p && gw_staging_create(tif->super.core, dev, 0, 0, p) != GW_OK)
        *p = NULL;
    return *p;
}

/* Waits (bounded) for a slot's copy, then returns it to its ring. */
gw_status_t tcp_slot_finish(tcp_iface_t *tif, gw_staging_t *st, gw_stage_slot_t *sl)
{
    uint64_t deadline = gw_now_ns() + 10000000000ull;
    int r;
    while ((r = gw_staging_test(st, sl)) == 0 && gw_now_ns() < deadline)
        ;
    gw_staging_release(st, sl);
    if (r == 1)
        return GW_OK;
    return r < 0 ? GW_ERR_CUDA
                 : gw_err(tif->super.core, GW_ERR_CUDA, "tcp staging: a copy did not finish within 10 s");
}

void tcp_tx_drop_slots(tcp_ep_t *ep, tx_item_t *t)
{
    if (!t->sl_n)
        return;
    gw_staging_t *st = tcp_stg_get(ep->tif, t->gpu_dev, 0);
    while (t->sl_n) {
        if (st)
            tcp_slot_finish(ep->tif, st, t->sl[t->sl_head]);
        t->sl_head = (t->sl_head + 1) % TX_SLOTS;
        t->sl_n--;
    }
}

static void stg_wait_add(conn_t *c)
{
    if (!c->stg_wait) {
        c->stg_wait = 1;
        gw_list_push_back(&c->ep->tif->stg_wait, &c->stg_link);
    }
    gw_core_signal(CORE(c->ep));
}

/* Writes the head frame whose payload is in GPU memory: device-to-host
 * copies run up to TX_SLOTS slots ahead of the socket.  1: frame written;
 * 0: waiting for the socket or a copy; -1: the endpoint failed. */
int tcp_flush_gpu_head(conn_t *c)
{
    tcp_ep_t *ep = c->ep;
    tx_item_t *t = c->txh;
    gw_staging_t *st = tcp_stg_get(ep->tif, t->gpu_dev, 0);
    if (!st) {
        tcp_fail(ep, GW_ERR_CUDA, "tcp: cannot stage GPU memory of device %d: %s", t->gpu_dev, CORE(ep)->errbuf);
        return -1;
    }
    size_t chunk = gw_staging_chunk(st);
    for (;;) {
        while (t->staged < t->paylen && t->sl_n < TX_SLOTS) {
            gw_stage_slot_t *sl = gw_staging_acquire(st);
            if (!sl)
                break;
            size_t n = GW_MIN(chunk, t->paylen - t->staged);
            if (gw_staging_d2h(st, sl, t->payload + t->staged, n) != GW_OK) {
                gw_staging_release(st, sl);
                tcp_fail(ep, GW_ERR_CUDA, "tcp: device-to-host staging copy failed: %s", CORE(ep)->errbuf);
                return -1;
            }
            int i = (t->sl_head + t->sl_n) % TX_SLOTS;
            t->sl[i] = sl;
            t->sl_len[i] = n;
            t->sl_n++;
            t->staged += n;
        }
        const void *src;
        size_t left;
        if (t->off < GW_TCP_HDR) {
            src = t->hdr + t->off;
            left = GW_TCP_HDR - t->off;
        } else if (t->off - GW_TCP_HDR == t->paylen) {
            tcp_tx_done(c, t);
            return 1;
        } else {
            if (!t->sl_n) { /* every slot is taken by other transfers */
                stg_wait_add(c);
                return 0;
            }
            gw_stage_slot_t *sl = t->sl[t->sl_head];
            int r = gw_staging_test(st, sl);
            if (r < 0) {
                tcp_fail(ep, GW_ERR_CUDA, "tcp: device-to-host staging copy failed: %s", CORE(ep)->errbuf);
                return -1;
            }
            if (r == 0) {
                stg_wait_add(c);
                return 0;
            }
            src = (const uint8_t *)sl->host + t->sl_used;
            left = t->sl_len[t->sl_head] - t->sl_used;
        }
        ssize_t w = send(c->fd, src, left, MSG_NOSIGNAL | MSG_DONTWAIT);
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
        int in_payload = t->off >= GW_TCP_HDR;
        tcp_tx_taken(c, (size_t)w);
        t->off += (size_t)w;
        c->tx_bytes -= GW_MIN(c->tx_bytes, (size_t)w);
        if (in_payload) {
            t->sl_used += (size_t)w;
            if (t->sl_used == t->sl_len[t->sl_head]) {
                gw_staging_release(st, t->sl[t->sl_head]);
                t->sl_head = (t->sl_head + 1) % TX_SLOTS;
                t->sl_n--;
                t->sl_used = 0;
            }
        }
    }
}

/* Starts the host-to-device copy of the filled slot. */
int tcp_rx_submit(conn_t *c, gw_staging_t *st)
{
    if (gw_staging_h2d(st, c->rx_slot, c->dst + c->rx_slot_off, c->rx_fill) != GW_OK) {
        gw_staging_release(st, c->rx_slot);
        c->rx_slot = NULL;
        tcp_fail(c->ep, GW_ERR_CUDA, "tcp: host-to-device staging copy failed: %s", CORE(c->ep)->errbuf);
        return -1;
    }
    c->rx_in[c->rx_nin++] = c->rx_slot;
    c->rx_slot_off += c->rx_fill;
    c->rx_slot = NULL;
    c->rx_fill = 0;
    return 0;
}

/* A slot to receive GPU-bound bytes into: the current one, a free one, or
 * the oldest in-flight one once its copy is done.  NULL with *st set when
 * every slot is held elsewhere (the caller copies synchronously). */
gw_stage_slot_t *tcp_rx_slot(conn_t *c, gw_staging_t **stp)
{
    tcp_iface_t *tif = c->ep->tif;
    gw_staging_t *st = tcp_stg_get(tif, c->rx_dev, 1);
    *stp = st;
    if (!st)
        return NULL;
    if (c->rx_slot)
        return c->rx_slot;
    if (c->rx_nin < RX_INFLIGHT)
        c->rx_slot = gw_staging_acquire(st);
    if (!c->rx_slot && c->rx_nin) {
        if (tcp_slot_finish(tif, st, c->rx_in[0]) != GW_OK) {
            memmove(c->rx_in, c->rx_in + 1, (size_t)(--c->rx_nin) * sizeof(c->rx_in[0]));
            tcp_fail(c->ep, GW_ERR_CUDA, "tcp: host-to-device staging copy failed: %s", CORE(c->ep)->errbuf);
            return NULL;
        }
        memmove(c->rx_in, c->rx_in + 1, (size_t)(--c->rx_nin) * sizeof(c->rx_in[0]));
        c->rx_slot = gw_staging_acquire(st);
    }
    c->rx_fill = 0;
    return c->rx_slot;
}

/* Stores len received bytes bound for GPU memory at payload offset c->consumed. */
int tcp_gpu_store(conn_t *c, const uint8_t *src, size_t len)
{
    while (len) {
        gw_staging_t *st;
        gw_stage_slot_t *sl = tcp_rx_slot(c, &st);
        if (c->fd < 0)
            return -1;
        if (!sl) {
            if (!st) {
                tcp_fail(c->ep, GW_ERR_CUDA, "tcp: cannot stage into GPU memory of device %d: %s", c->rx_dev,
                         CORE(c->ep)->errbuf);
                return -1;
            }
            /* every slot is busy elsewhere: one synchronous copy */
            if (gw_staging_copy_sync(CORE(c->ep), c->rx_dev, c->dst + c->rx_slot_off, src, len) != GW_OK) {
                tcp_fail(c->ep, GW_ERR_CUDA, "tcp: host-to-device copy failed: %s", CORE(c->ep)->errbuf);
                return -1;
            }
            c->rx_slot_off += len;
            return 0;
        }
        size_t n = GW_MIN(len, gw_staging_chunk(st) - c->rx_fill);
        memcpy((uint8_t *)sl->host + c->rx_fill, src, n);
        c->rx_fill += n;
        src += n;
        len -= n;
        if (c->rx_fill == gw_staging_chunk(st) && tcp_rx_submit(c, st) < 0)
            return -1;
    }
    return 0;
}

/* The payload is complete: its bytes are in GPU memory once every copy is done. */
int tcp_gpu_finish(conn_t *c)
{
    tcp_iface_t *tif = c->ep->tif;
    gw_staging_t *st = tcp_stg_get(tif, c->rx_dev, 1);
    int failed = 0;
    if (st && c->rx_slot && c->rx_fill && tcp_rx_submit(c, st) < 0)
        return -1;
    if (st && c->rx_slot) {
        gw_staging_release(st, c->rx_slot);
        c->rx_slot = NULL;
    }
    for (int i = 0; i < c->rx_nin; i++)
        failed |= st && tcp_slot_finish(tif, st, c->rx_in[i]) != GW_OK;
    c->rx_nin = 0;
    c->rx_dev = -1;
    if (failed) {
        tcp_fail(c->ep, GW_ERR_CUDA, "tcp: host-to-device staging copy failed: %s", CORE(c->ep)->errbuf);
        return -1;
    }
    return 0;
}
