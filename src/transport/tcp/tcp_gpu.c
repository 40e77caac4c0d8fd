/* SPDX-License-Identifier: Apache-2.0 */
/* tcp_gpu.c - GPU memory on the tcp transport: GPU-sourced frames are
 * copied device-to-host into pinned slots ahead of the socket, GPU-bound
 * payloads host-to-device behind it (mem/staging.h).
 * Private objects: tcp_int.h. */
#include "transport/tcp/tcp_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
        ssize_t w = gw_sock_send(c->fd, src, left, MSG_NOSIGNAL | MSG_DONTWAIT);
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

/* ---- batch runs and the copy kernel ------------------------------------------------------
 * GPU entries of a batch run move by the gather/scatter copy kernel
 * (src/cuda/copy_kernel.c), one launch for many entries, between GPU memory
 * and a pinned host buffer that holds the run's bytes as they go on the
 * wire; tcp_batch.c builds the descriptors.  Where no module loads, the
 * entries move by copy-engine copies, one per entry, and bkernel says why. */

/* 1 when device dev's kernel and the stream its launches go on are ready. */
int tcp_kern_ready(tcp_iface_t *tif, int dev)
{
    if (dev < 0 || dev >= MAX_DEV)
        return 0;
    if (tif->kstate[dev])
        return tif->kstate[dev] > 0;
    char why[200], eb[160];
    tif->kstate[dev] = -1;
    const gw_cuda_t *cu = gw_cuda_get(eb, sizeof(eb));
    if (gw_cuda_copy_kernel_ready(dev, why, sizeof(why)) != GW_OK) {
        /* keeps why */
    } else if (!cu || !gw_cuda_ctx_for_device(dev, eb, sizeof(eb))) {
        snprintf(why, sizeof(why), "%s", eb);
    } else {
        CUresult r = CUDA_SUCCESS;
        for (int l = 0; l < TCP_KLANES && r == CUDA_SUCCESS; l++)
            r = cu->cuStreamCreate(&tif->kstream[dev][l], CU_STREAM_NON_BLOCKING);
        if (r == CUDA_SUCCESS) {
            tif->kstate[dev] = 1;
            snprintf(tif->bkernel, sizeof(tif->bkernel), "%s",
                     tif->bscratch ? "copy kernel through GPU scratch" : "copy kernel");
            return 1;
        }
        snprintf(why, sizeof(why), "cuStreamCreate failed: %s", gw_cuda_strerror(r, eb, sizeof(eb)));
    }
    snprintf(tif->bkernel, sizeof(tif->bkernel), "copy engine per entry (no kernel: %.150s)", why);
    gw_log(GW_LOG_WARN, "tcp: GPU entries of batches move by one copy-engine copy each: %s", why);
    return 0;
}

static void gbuf_destroy(tcp_gbuf_t *gb)
{
    char eb[160];
    const gw_cuda_t *cu = gw_cuda_get(eb, sizeof(eb));
    if (cu) {
        gw_cuda_ctx_for_device(gb->dev, eb, sizeof(eb));
        for (uint32_t i = 0; i < gb->evcap; i++)
            if (gb->ev[i])
                cu->cuEventDestroy(gb->ev[i]);
        if (gb->host)
            cu->cuMemFreeHost(gb->host);
        if (gb->dscr)
            cu->cuMemFree(gb->dscr);
    }
    free(gb->ev);
    free(gb);
}

/* A pinned buffer of at least size bytes for device dev (one reference),
 * NULL with the error set in the core. */
tcp_gbuf_t *tcp_gbuf_get(tcp_iface_t *tif, int dev, size_t size)
{
    gw_core_t *core = tif->super.core;
    for (tcp_gbuf_t **p = &tif->gfree; *p; p = &(*p)->next) {
        tcp_gbuf_t *gb = *p;
        if (gb->dev == dev && gb->cap >= size) {
            *p = gb->next;
            gb->next = NULL;
            gb->refs = 1;
            gb->nev = 0;
            return gb;
        }
    }
    char eb[160];
    const gw_cuda_t *cu = gw_cuda_get(eb, sizeof(eb));
    tcp_gbuf_t *gb = calloc(1, sizeof(*gb));
    if (!gb) {
        gw_err(core, GW_ERR_NOMEM, "tcp: out of memory for a batch staging buffer");
        return NULL;
    }
    gb->dev = dev;
    gb->refs = 1;
    gb->cap = (size + (1u << 20) - 1) & ~(size_t)((1u << 20) - 1); /* whole MiB: reused by later batches */
    if (!cu || !gw_cuda_ctx_for_device(dev, eb, sizeof(eb))) {
        free(gb);
        gw_err(core, GW_ERR_CUDA, "tcp: no CUDA context for device %d: %s", dev, eb);
        return NULL;
    }
    CUresult r = cu->cuMemHostAlloc((void **)&gb->host, gb->cap, CU_MEMHOSTALLOC_PORTABLE);
    if (r != CUDA_SUCCESS) {
        free(gb);
        gw_err(core, GW_ERR_CUDA, "tcp: cuMemHostAlloc(%zu bytes for a GPU batch run) failed: %s", size,
               gw_cuda_strerror(r, eb, sizeof(eb)));
        return NULL;
    }
    return gb;
}

/* Drops a reference; the last one waits for the buffer's launches (a run
 * dropped by a failed endpoint may still be filling) and keeps the buffer
 * for later batches (the TCP_GBUF_KEEP, or kinflight + 8, most recent per iface; older ones are
 * freed: cuMemHostAlloc and cuMemFreeHost cost far more than a run).  A
 * receiving stream holds one while a frame comes in and one per frame whose
 * scatter runs. */
void tcp_gbuf_put(tcp_iface_t *tif, tcp_gbuf_t *gb)
{
    if (!gb || --gb->refs > 0)
        return;
    for (uint32_t i = 0; i < gb->nev; i++)
        tcp_kern_wait(tif, gb, (int)i);
    gb->nev = 0;
    gb->next = tif->gfree;
    tif->gfree = gb;
    int kept = 0, keep = (int)GW_MAX((unsigned)TCP_GBUF_KEEP, tif->kinflight + 8);
    for (tcp_gbuf_t **p = &tif->gfree; *p;) {
        if (++kept > keep) {
            tcp_gbuf_t *old = *p;
            *p = old->next;
            gbuf_destroy(old);
        } else {
            p = &(*p)->next;
        }
    }
}

void tcp_gbuf_free_all(tcp_iface_t *tif)
{
    while (tif->gfree) {
        tcp_gbuf_t *gb = tif->gfree;
        tif->gfree = gb->next;
        gbuf_destroy(gb);
    }
    char eb[160];
    const gw_cuda_t *cu = gw_cuda_get(eb, sizeof(eb));
    for (int d = 0; d < MAX_DEV; d++)
        for (int l = 0; l < TCP_KLANES; l++)
            if (tif->kstream[d][l] && cu && gw_cuda_ctx_for_device(d, eb, sizeof(eb)))
                cu->cuStreamDestroy(tif->kstream[d][l]);
}

/* gb's GPU scratch (as large as its pinned buffer, made on first use and
 * kept with it).  0, or -1 with the error set in the core. */
int tcp_gbuf_scratch(tcp_iface_t *tif, tcp_gbuf_t *gb)
{
    if (gb->dscr)
        return 0;
    char eb[160];
    const gw_cuda_t *cu = gw_cuda_get(eb, sizeof(eb));
    if (!cu || !gw_cuda_ctx_for_device(gb->dev, eb, sizeof(eb))) {
        gw_err(tif->super.core, GW_ERR_CUDA, "tcp: no CUDA context for device %d: %s", gb->dev, eb);
        return -1;
    }
    CUresult r = cu->cuMemAlloc(&gb->dscr, gb->cap);
    if (r != CUDA_SUCCESS) {
        gb->dscr = 0;
        gw_err(tif->super.core, GW_ERR_CUDA, "tcp: cuMemAlloc(%zu bytes of GPU scratch for a batch run) failed: %s",
               gb->cap, gw_cuda_strerror(r, eb, sizeof(eb)));
        return -1;
    }
    return 0;
}

/* Launches the copy of n descriptors (pinned, inside gb) on gb's device
 * on stream `lane` (modulo TCP_KLANES) and records an event after it; with `copy`, bytes [off, off + len) of gb
 * go by one copy-engine copy from its pinned buffer to its scratch before
 * the launch (TCP_KCOPY_H2D_FIRST) or back after it (TCP_KCOPY_D2H_AFTER),
 * on the same stream.  The event's index, or -1 with the error set in the
 * core. */
int tcp_kern_launch(tcp_iface_t *tif, tcp_gbuf_t *gb, unsigned lane, const gw_copy_desc_t *d, uint32_t n, int copy,
                    size_t off, size_t len)
{
    gw_core_t *core = tif->super.core;
    char why[200], eb[160];
    const gw_cuda_t *cu = gw_cuda_get(eb, sizeof(eb));
    if (!cu || !gw_cuda_ctx_for_device(gb->dev, eb, sizeof(eb))) {
        gw_err(core, GW_ERR_CUDA, "tcp: no CUDA context for device %d: %s", gb->dev, eb);
        return -1;
    }
    if (gb->nev == gb->evcap) {
        uint32_t cap = gb->evcap ? gb->evcap * 2 : 16;
        CUevent *a = realloc(gb->ev, cap * sizeof(*a));
        if (!a) {
            gw_err(core, GW_ERR_NOMEM, "tcp: out of memory for copy kernel events");
            return -1;
        }
        memset(a + gb->evcap, 0, (cap - gb->evcap) * sizeof(*a));
        gb->ev = a;
        gb->evcap = cap;
    }
    CUresult r = CUDA_SUCCESS;
    if (!gb->ev[gb->nev] && (r = cu->cuEventCreate(&gb->ev[gb->nev], CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS) {
        gb->ev[gb->nev] = NULL;
        gw_err(core, GW_ERR_CUDA, "tcp: cuEventCreate failed: %s", gw_cuda_strerror(r, eb, sizeof(eb)));
        return -1;
    }
    CUstream s = tif->kstream[gb->dev][lane % TCP_KLANES];
    if (copy == TCP_KCOPY_H2D_FIRST && len &&
        (r = cu->cuMemcpyHtoDAsync(gb->dscr + off, gb->host + off, len, s)) != CUDA_SUCCESS) {
        gw_err(core, GW_ERR_CUDA, "tcp: cuMemcpyHtoDAsync(%zu bytes of a batch run to GPU scratch) failed: %s", len,
               gw_cuda_strerror(r, eb, sizeof(eb)));
        return -1;
    }
    gw_status_t st = gw_cuda_copy_kernel_launch(gb->dev, s, d, n, why, sizeof(why));
    if (st != GW_OK) {
        gw_err(core, st, "tcp: %s", why);
        return -1;
    }
    if (copy == TCP_KCOPY_D2H_AFTER && len &&
        (r = cu->cuMemcpyDtoHAsync(gb->host + off, gb->dscr + off, len, s)) != CUDA_SUCCESS) {
        gw_err(core, GW_ERR_CUDA, "tcp: cuMemcpyDtoHAsync(%zu bytes of a batch run from GPU scratch) failed: %s", len,
               gw_cuda_strerror(r, eb, sizeof(eb)));
        return -1;
    }
    if ((r = cu->cuEventRecord(gb->ev[gb->nev], s)) != CUDA_SUCCESS) {
        gw_err(core, GW_ERR_CUDA, "tcp: cuEventRecord failed: %s", gw_cuda_strerror(r, eb, sizeof(eb)));
        return -1;
    }
    return (int)gb->nev++;
}

/* 1: launch ev of gb is complete, 0: still running, -1: it failed (error in the core). */
int tcp_kern_test(tcp_iface_t *tif, tcp_gbuf_t *gb, int ev)
{
    char eb[160];
    const gw_cuda_t *cu = gw_cuda_get(eb, sizeof(eb));
    CUresult r = cu->cuEventQuery(gb->ev[ev]);
    if (r == CUDA_SUCCESS)
        return 1;
    if (r == CUDA_ERROR_NOT_READY)
        return 0;
    gw_err(tif->super.core, GW_ERR_CUDA, "tcp: the copy kernel of a GPU batch run failed: %s",
           gw_cuda_strerror(r, eb, sizeof(eb)));
    return -1;
}

/* Waits (bounded: 10 s) for launch ev of gb. */
gw_status_t tcp_kern_wait(tcp_iface_t *tif, tcp_gbuf_t *gb, int ev)
{
    uint64_t deadline = gw_now_ns() + 10000000000ull;
    int r;
    while ((r = tcp_kern_test(tif, gb, ev)) == 0)
        if (gw_now_ns() > deadline)
            return gw_err(tif->super.core, GW_ERR_CUDA, "tcp: the copy kernel of a GPU batch run did not finish within 10 s");
    return r == 1 ? GW_OK : GW_ERR_CUDA;
}

/* Flushes the streams of ep waiting for a launch or a copy (as the poller
 * does), so that frames whose launch is done go out while a batch is still
 * being posted. */
void tcp_stg_wait_retry(tcp_ep_t *ep)
{
    for (int i = 0; i < ep->nconns; i++) {
        conn_t *c = &ep->conns[i];
        if (!c->stg_wait)
            continue;
        gw_list_del(&c->stg_link);
        c->stg_wait = 0;
        if (c->fd >= 0 && !c->want_out)
            tcp_conn_flush(c);
    }
}

/* 1 while frame t (the head of c, or one after it) waits for its gather
 * launch: the stream polls it (stg_wait); 0 when it may be written; -1 when
 * the launch failed (the endpoint failed). */
int tcp_tx_kern_pending(conn_t *c, tx_item_t *t)
{
    if (!t->gb || t->gev < 0)
        return 0;
    int r = tcp_kern_test(c->ep->tif, t->gb, t->gev);
    if (r == 1) {
        t->gev = -1;
        return 0;
    }
    if (r < 0) {
        tcp_fail(c->ep, GW_ERR_CUDA, "tcp: gathering GPU entries of a batch failed: %s", CORE(c->ep)->errbuf);
        return -1;
    }
    stg_wait_add(c);
    return 1;
}
