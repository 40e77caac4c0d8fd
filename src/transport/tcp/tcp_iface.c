/* SPDX-License-Identifier: Apache-2.0 */
/* tcp_iface.c - the tcp iface: open/close/describe, memory registration
 * and revocation, the progress poller and timers, the ops table; the frame
 * header codec (fuzzed).
 * Private objects: tcp_int.h. */
#include "transport/tcp/tcp_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

void gw_tcp_hdr_encode(uint8_t *b, const gw_tcp_hdr_t *h)
{
    b[0] = GW_TCP_MAGIC;
    b[1] = GW_TCP_VERSION;
    b[2] = h->type;
    b[3] = h->flags;
    gw_put_u32(b + 4, (uint32_t)h->aux);
    gw_put_u64(b + 8, h->id);
    gw_put_u64(b + 16, h->key);
    gw_put_u64(b + 24, h->addr);
    gw_put_u64(b + 32, h->len);
    gw_put_u64(b + 40, h->val);
}

gw_status_t gw_tcp_hdr_decode(const uint8_t *b, gw_tcp_hdr_t *h, char *why, size_t whylen)
{
    if (b[0] != GW_TCP_MAGIC || b[1] != GW_TCP_VERSION) {
        snprintf(why, whylen, "bad tcp frame magic/version 0x%02x/%u (expected 0x%02x/%u)", b[0], b[1],
                 GW_TCP_MAGIC, GW_TCP_VERSION);
        return GW_ERR_PROTOCOL;
    }
    h->type = b[2];
    h->flags = b[3];
    h->aux = (int32_t)gw_get_u32(b + 4);
    h->id = gw_get_u64(b + 8);
    h->key = gw_get_u64(b + 16);
    h->addr = gw_get_u64(b + 24);
    h->len = gw_get_u64(b + 32);
    h->val = gw_get_u64(b + 40);
    if (h->type < GW_TCP_PUT || h->type > GW_TCP_FRAME_MAX) {
        snprintf(why, whylen, "unknown tcp frame type %u", h->type);
        return GW_ERR_PROTOCOL;
    }
    if (h->aux > 0) {
        snprintf(why, whylen, "tcp frame type %u carries a positive status %d", h->type, h->aux);
        return GW_ERR_PROTOCOL;
    }
    return GW_OK;
}

void tcp_job_done(gw_tcp_job_t *j, void *arg)
{
    conn_t *c = j->owner;
    (void)arg;
    if (j == &c->txj)
        tcp_tx_job_done(c, j);
    else
        tcp_rx_job_done(c, j);
}

static int tcp_poll(void *arg)
{
    tcp_iface_t *tif = arg;
    gw_list_t *lp;
    tif->gen++;
    int n = gw_tcp_pool_reap(tif->pool, tcp_job_done, tif);
    while ((lp = gw_list_first(&tif->cork)) != NULL) { /* small frames posted since the last call */
        conn_t *c = gw_container_of(lp, conn_t, cork_link);
        tcp_conn_uncork(c);
        if (c->fd >= 0 && !c->want_out && !c->stg_wait)
            tcp_conn_flush(c);
        n++;
    }
    while ((lp = gw_list_first(&tif->lazy)) != NULL) {
        conn_t *c = gw_container_of(lp, conn_t, lazy_link);
        if (c->lazy_gen + 2 > tif->gen) { /* queued during this call: one more chance to ride along */
            gw_core_signal(tif->super.core);
            break;
        }
        tcp_conn_flush(c); /* takes it off the list */
        if (c->lazy) { /* failed: make sure it is off */
            c->lazy = 0;
            gw_list_del(&c->lazy_link);
        }
        n++;
    }
    if (!gw_list_empty(&tif->stg_wait)) { /* frames waiting for device-to-host copies */
        gw_list_t waiting;
        gw_list_init(&waiting);
        while ((lp = gw_list_first(&tif->stg_wait)) != NULL) {
            gw_list_del(lp);
            gw_list_push_back(&waiting, lp);
        }
        while ((lp = gw_list_first(&waiting)) != NULL) {
            conn_t *c = gw_container_of(lp, conn_t, stg_link);
            gw_list_del(lp);
            c->stg_wait = 0;
            if (c->fd >= 0 && !c->want_out)
                tcp_conn_flush(c);
            n++;
        }
    }
    if (!gw_list_empty(&tif->kdone)) /* batch frames whose scatter launch runs */
        n += tcpb_kdone_poll(tif, -1);
    uint64_t now = gw_now_ns();
    if (!gw_liveness_due(&tif->live, now))
        return n;
    gw_list_t *p, *t;
    gw_list_for_each_safe(p, t, &tif->eps) {
        tcp_ep_t *ep = gw_container_of(p, tcp_ep_t, link);
        if (gw_ep_failed(B(ep)))
            continue;
        tcp_lost_check(ep, now);
        if (gw_ep_failed(B(ep)))
            continue;
        int busy = tcp_ep_busy(ep);
        if (busy)
            B(ep)->last_rx_ns = tcp_ep_last_ns(ep); /* helper threads stamp too */
        uint64_t idle;
        switch (gw_liveness_judge(B(ep), busy, now, &ep->last_ping_ns, &idle)) {
        case GW_LIVE_DEAD:
            if (ep->lost_ns) { /* a further stream's end is the known cause */
                tcp_lost_fail(ep, now);
                break;
            }
            tcp_fail(ep, GW_ERR_PEER_TIMEOUT,
                     "no data from peer %s for %llu ms with work outstanding (GPUWIRE_PEER_TIMEOUT_MS=%ld)",
                     B(ep)->peer, (unsigned long long)(idle / 1000000), tif->super.core->peer_timeout_ms);
            break;
        case GW_LIVE_PING:
            tcp_send_ctl(ep, &ep->conns[0], GW_TCP_PING, 0, 0, 0, 0, 0, 0);
            break;
        case GW_LIVE_OK:
            break;
        }
    }
    return 0;
}

static gw_status_t tcp_iface_open(gw_core_t *core, gw_tl_iface_t **out, char *why, size_t whylen)
{
    tcp_iface_t *tif = calloc(1, sizeof(*tif));
    if (!tif) {
        snprintf(why, whylen, "out of memory");
        return GW_ERR_NOMEM;
    }
    gw_status_t st;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (!strcmp(gw_settings_str(&core->settings, GW_SET_TCP_STREAMS), "auto"))
        /* 8 on hosts of 16 CPUs or more: GPU batches staged over tcp ran
         * 1.02-1.09x of the contiguous staged put with 8 streams against
         * 0.78-0.83x with 4 on an H100 host of 16 CPUs, the contiguous put
         * and host memory within noise (docs/PERFORMANCE.md, section 5) */
        tif->streams = cpus >= 16 ? 8 : cpus >= 8 ? 4 : 2;
    else if ((st = gw_settings_int(&core->settings, GW_SET_TCP_STREAMS, &tif->streams, why,
                                   whylen)) != GW_OK)
        goto err;
    if ((st = gw_settings_size(&core->settings, GW_SET_TCP_STRIPE_MIN, &tif->stripe_min, why, whylen)) ||
        (st = gw_settings_size(&core->settings, GW_SET_TCP_CHUNK, &tif->chunk, why, whylen)) ||
        (st = gw_settings_size(&core->settings, GW_SET_TCP_EAGER_MAX, &tif->eager_max, why, whylen)) ||
        (st = gw_settings_size(&core->settings, GW_SET_TCP_SOCKBUF, &tif->sockbuf, why, whylen)) ||
        (st = gw_settings_size(&core->settings, GW_SET_TCP_THREAD_MIN, &tif->thread_min, why, whylen)))
        goto err;
    long kin;
    if ((st = gw_settings_int(&core->settings, GW_SET_TCP_BATCH_INFLIGHT, &kin, why, whylen)) != GW_OK)
        goto err;
    tif->kinflight = (unsigned)kin;
    tif->cc = gw_settings_str(&core->settings, GW_SET_TCP_CONGESTION);
    tif->bscratch = !strcmp(gw_settings_str(&core->settings, GW_SET_TCP_BATCH_GPU), "scratch");
    if (!strcmp(gw_settings_str(&core->settings, GW_SET_TCP_THREADS), "auto"))
        tif->threads = cpus >= 4 ? GW_MIN(tif->streams, 4) : 0;
    else if ((st = gw_settings_int(&core->settings, GW_SET_TCP_THREADS, &tif->threads, why,
                                     whylen)) != GW_OK) {
        goto err;
    }
    if (tif->threads > 0) {
        uint64_t chunk;
        long nbufs;
        if ((st = gw_settings_size(&core->settings, GW_SET_STAGING_CHUNK, &chunk, why, whylen)) ||
            (st = gw_settings_int(&core->settings, GW_SET_STAGING_BUFFERS, &nbufs, why, whylen)))
            goto err;
        if ((st = gw_tcp_pool_create(core, (int)tif->threads, (size_t)chunk, (unsigned)GW_MAX(nbufs, 2), &tif->pool))) {
            snprintf(why, whylen, "%s", core->errbuf);
            goto err;
        }
    }
    tif->scratch = malloc(RBUF_CAP);
    if (!tif->scratch) {
        snprintf(why, whylen, "out of memory");
        st = GW_ERR_NOMEM;
        goto err;
    }
    tif->super.ops = &gw_tl_tcp_ops;
    tif->super.core = core;
    tif->super.id = GW_TL_TCP;
    gw_list_init(&tif->eps);
    gw_list_init(&tif->lazy);
    gw_list_init(&tif->cork);
    gw_list_init(&tif->stg_wait);
    gw_list_init(&tif->kdone);
    st = gw_core_add_poller(core, tcp_poll, tif);
    if (st != GW_OK) {
        snprintf(why, whylen, "%s", core->errbuf);
        goto err;
    }
    *out = &tif->super;
    return GW_OK;
err:
    gw_tcp_pool_destroy(tif->pool);
    free(tif->scratch);
    free(tif);
    return st;
}

static void tcp_iface_close(gw_tl_iface_t *iface)
{
    tcp_iface_t *tif = to_if(iface);
    gw_core_del_poller(iface->core, tcp_poll, tif);
    gw_tcp_pool_destroy(tif->pool);
    for (int i = 0; i < MAX_DEV; i++) {
        gw_staging_destroy(tif->stg_tx[i]);
        gw_staging_destroy(tif->stg_rx[i]);
    }
    tcp_gbuf_free_all(tif);
    free(tif->scratch);
    free(tif);
}

static gw_status_t tcp_iface_describe(gw_tl_iface_t *iface, char *buf, size_t len)
{
    tcp_iface_t *tif = to_if(iface);
    int n = snprintf(buf, len, "%ld stream(s) per endpoint, striping from %llu bytes in pieces of up to %llu",
                     tif->streams, (unsigned long long)tif->stripe_min, (unsigned long long)tif->chunk);
    if (n >= 0 && (size_t)n < len) {
        if (tif->pool)
            snprintf(buf + n, len - (size_t)n, "; %d helper thread(s) move payloads of %llu bytes or more",
                     gw_tcp_pool_size(tif->pool), (unsigned long long)tif->thread_min);
        else
            snprintf(buf + n, len - (size_t)n, "; no helper threads (GPUWIRE_TCP_THREADS=%s%s)",
                     gw_settings_str(&iface->core->settings, GW_SET_TCP_THREADS),
                     strcmp(gw_settings_str(&iface->core->settings, GW_SET_TCP_THREADS), "auto") ? ""
                                                                                           : ": fewer than 4 CPUs online");
    }
    return GW_OK;
}

static gw_status_t tcp_mem_reg(gw_tl_iface_t *iface, gw_mem_t *mem)
{
    size_t n = strlen(mem->path);
    if (mem->type == GW_MEM_HOST) {
        snprintf(mem->path + n, sizeof(mem->path) - n, "%stcp: direct (host memory)", n ? "; " : "");
        return GW_OK;
    }
    snprintf(mem->path + n, sizeof(mem->path) - n,
             "%stcp: staged through pinned host buffers (%s x %s, copies overlapped with the socket)", n ? "; " : "",
             gw_settings_str(&iface->core->settings, GW_SET_STAGING_BUFFERS),
             gw_settings_str(&iface->core->settings, GW_SET_STAGING_CHUNK));
    return GW_OK;
}

/* Revocation: stop writing into the region, and detach queued reads from it. */
static gw_status_t tcp_mem_dereg(gw_tl_iface_t *iface, gw_mem_t *mem)
{
    tcp_iface_t *tif = to_if(iface);
    gw_list_t *p;
    tcpb_kdone_poll(tif, 0); /* scatter launches in flight may write into it: let them land */
    for (p = tif->eps.next; p != &tif->eps; p = p->next) {
        tcp_ep_t *ep = gw_container_of(p, tcp_ep_t, link);
        for (int i = 0; i < ep->nconns; i++) {
            conn_t *c = &ep->conns[i];
            if (c->in_payload && c->bscat)
                tcpb_rx_revoke(c, mem);
            if (c->in_payload && c->dst_region == mem) {
                if (c->rx_busy) { /* the worker stores nothing more (waits for its copies into mem) */
                    gw_tcp_job_lock(&c->rxj);
                    c->keep = gw_tcp_job_rx_stop(&c->rxj);
                    gw_tcp_job_unlock(&c->rxj);
                } else {
                    c->keep = c->consumed; /* discard the rest */
                }
                c->cur_status = GW_ERR_INVALID_KEY;
                c->dst_region = NULL;
                mem->incoming--;
            }
            for (tx_item_t *t = c->txh; t; t = t->next) {
                if (t->region_id != mem->id || t->owned)
                    continue;
                void *copy = gw_op_state_get(iface->core, t->paylen ? t->paylen : 1);
                if (!copy)
                    return gw_err(iface->core, GW_ERR_NOMEM, "out of memory detaching a get from a deregistered region");
                int idx = 0; /* a worker is sending it: hold it still */
                for (tx_item_t *u = c->txh; u != t; u = u->next)
                    idx++;
                int busy = c->tx_busy && idx <= c->txj.nnext;
                if (busy)
                    gw_tcp_job_lock(&c->txj);
                if (t->gpu_dev >= 0) {
                    tcp_tx_drop_slots(ep, t); /* the rest now comes from the host copy */
                    t->sl_used = 0;
                    if (gw_staging_copy_sync(iface->core, t->gpu_dev, copy, t->payload, t->paylen) != GW_OK) {
                        if (busy)
                            gw_tcp_job_unlock(&c->txj);
                        gw_op_state_put(iface->core, copy);
                        return GW_ERR_CUDA;
                    }
                    t->gpu_dev = -1;
                } else {
                    memcpy(copy, t->payload, t->paylen);
                }
                if (busy) {
                    gw_tcp_job_tx_detach(&c->txj, idx, copy);
                    gw_tcp_job_unlock(&c->txj);
                }
                t->owned = copy;
                t->payload = copy;
                t->region_id = 0;
            }
        }
    }
    return GW_OK;
}

/* batched transfers: part of this translation unit (it uses the objects
 * above); a file of its own once the tcp transport has a private header */

/* the one operation entry (tl.h): one function per operation behind it */
static gw_status_t tcp_submit(gw_tl_ep_t *tep, gw_request_t *req)
{
    switch (req->op) {
    case GW_OP_PUT: return tcp_put(tep, req);
    case GW_OP_GET: return tcp_get(tep, req);
    case GW_OP_PUT_NOTIFY: return tcp_put_notify(tep, req);
    case GW_OP_SEND: return tcp_send(tep, req);
    case GW_OP_BATCH: return tcpb_batch(tep, req);
    default: return GW_ERR_UNSUPPORTED;
    }
}

static void tcp_caps(gw_tl_iface_t *iface, gw_tl_caps_t *out)
{
    out->eager_max = ((tcp_iface_t *)iface)->eager_max; /* GPUWIRE_TCP_EAGER_MAX */
    out->max_msg = UINT64_MAX;
    out->mem_kinds = GW_TL_MEM_HOST | GW_TL_MEM_CUDA;
    out->gpu_paths = GW_TL_GPU_STAGED; /* the socket reads and writes host bounce buffers */
    out->batch = GW_TL_BATCH_NATIVE | GW_TL_BATCH_GPU | GW_TL_BATCH_COUNTED;
}

const gw_tl_ops_t gw_tl_tcp_ops = {
    .size = sizeof(gw_tl_ops_t),
    .name = "tcp",
    .iface_open = tcp_iface_open,
    .iface_close = tcp_iface_close,
    .iface_describe = tcp_iface_describe,
    .mem_reg = tcp_mem_reg,
    .mem_dereg = tcp_mem_dereg,
    .rkey_pack = gw_tl_unsupported_rkey_pack,
    .rkey_unpack = gw_tl_no_rkey_unpack, /* tcp keys carry no tcp part: the target checks the region id */
    .rkey_release = gw_tl_noop_rkey_release,
    .caps = tcp_caps,
    .ep_prepare = tcp_ep_prepare,
    .ep_reachable = tcp_ep_reachable,
    .ep_connect = tcp_ep_connect,
    .ep_join = tcp_ep_join,
    .ep_close = tcp_ep_close,
    .ep_destroy = tcp_ep_destroy,
    .ep_describe = tcp_ep_describe,
    .submit = tcp_submit,
    .rma_iov = tcpb_batch, /* (the batch engine: one frame of many iovecs per run) */
    .am_send = tcp_am_send,
    .rma_now = gw_tl_unsupported_rma_now,
    .send_now = gw_tl_unsupported_send_now,
    .put_direct = gw_tl_unsupported_put_direct,
    .ep_progress = gw_tl_unsupported_ep_progress,
    .recv_matched = tcp_recv_matched,
    .cancel = tcp_cancel,
};
