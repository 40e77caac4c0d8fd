/* SPDX-License-Identifier: Apache-2.0 */
/* verbs_iface.c - the verbs transport at context level: opening the device,
 * completion channel and async events in the context's epoll set, the
 * progress poller, region registration, and the ops table. */
#include "mem/gpu_reg.h"
#include "topo/topo.h"
#include "transport/verbs/verbs.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static int verbs_poll(void *arg)
{
    gw_verbs_iface_t *vif = arg;
    int n = 0;
    gw_list_t *p, *t;
    gw_list_for_each_safe(p, t, &vif->eps) {
        gw_verbs_ep_t *ep = gw_container_of(p, gw_verbs_ep_t, link);
        n += gw_verbs_ep_progress(ep);
    }
    /* the completion watchdog: on idle passes only (no clock read on the
     * busy path), every GW_VERBS_IDLE_CLOCK-th, or every 16th while an
     * endpoint waits armed for a completion (the caller then mostly
     * sleeps between passes, so idle passes come slowly) */
    if (n)
        return n;
    unsigned every = GW_VERBS_IDLE_CLOCK;
    gw_list_for_each_safe(p, t, &vif->eps) {
        gw_verbs_ep_t *ep = gw_container_of(p, gw_verbs_ep_t, link);
        if (ep->cq_armed && gw_verbs_awaits_cqe(ep))
            every = 16;
    }
    if (++vif->wd_passes % every)
        return 0;
    uint64_t now = gw_now_coarse_ns();
    gw_list_for_each_safe(p, t, &vif->eps)
        n += gw_verbs_watchdog(gw_container_of(p, gw_verbs_ep_t, link), now);
    return n;
}

/* tl.h ep_progress: this endpoint's queues alone */
static int verbs_ep_progress(gw_tl_ep_t *e)
{
    return gw_verbs_ep_progress(to_vep(e));
}

static void chan_cb(void *arg, uint32_t events)
{
    gw_verbs_iface_t *vif = arg;
    (void)events;
    struct ibv_cq *cq;
    void *cq_ctx;
    while (vif->ibv->get_cq_event(vif->chan, &cq, &cq_ctx) == 0) {
        gw_verbs_ep_t *ep = cq_ctx;
        ep->cq_armed = 0;
        if (++ep->cq_unacked >= 32) {
            vif->ibv->ack_cq_events(ep->cq, ep->cq_unacked);
            ep->cq_unacked = 0;
        }
    }
    /* the poller runs right after the fd callbacks and polls the CQs */
}

static void async_cb(void *arg, uint32_t events)
{
    gw_verbs_iface_t *vif = arg;
    (void)events;
    struct ibv_async_event ev;
    while (vif->ibv->get_async_event(vif->ctx, &ev) == 0) {
        const char *what = vif->ibv->event_type_str(ev.event_type);
        switch (ev.event_type) {
        case IBV_EVENT_QP_FATAL:
        case IBV_EVENT_QP_REQ_ERR:
        case IBV_EVENT_QP_ACCESS_ERR: {
            gw_verbs_ep_t *ep = ev.element.qp ? ev.element.qp->qp_context : NULL;
            if (ep)
                gw_verbs_ep_fail_qp(ep, ev.element.qp, what);
            break;
        }
        case IBV_EVENT_PORT_ERR:
            gw_log(GW_LOG_WARN, "verbs %s:%d: async event: %s (port went down; endpoints on it "
                   "will fail when their transfers time out)", vif->port.dev, vif->port.port, what);
            break;
        default:
            gw_log(GW_LOG_INFO, "verbs %s: async event: %s", vif->port.dev, what);
            break;
        }
        vif->ibv->ack_async_event(&ev);
    }
}

static int current_numa_node(void)
{
    unsigned cpu = 0, node = 0;
    if (getcpu(&cpu, &node) != 0)
        return -1;
    return (int)node;
}

static gw_status_t verbs_iface_open(gw_core_t *core, gw_tl_iface_t **out, char *why, size_t whylen)
{
    char lwhy[512];
    const gw_ibv_t *ibv = gw_ibv_get(lwhy, sizeof(lwhy));
    if (!ibv) {
        snprintf(why, whylen, "%s", lwhy);
        return GW_ERR_UNAVAILABLE;
    }
    const gw_settings_t *s = &core->settings;
    long gid_index = -1, qps, tmo, retry, cache_on;
    uint64_t split_min, max_mr;
    const char *gi = gw_settings_str(s, GW_SET_IB_GID_INDEX);
    const char *rdv = gw_settings_str(s, GW_SET_IB_RDV);
    if (strcmp(rdv, "auto") != 0 && strcmp(rdv, "read") != 0) {
        snprintf(why, whylen, "GPUWIRE_IB_RDV=%s: expected auto or read", rdv);
        return GW_ERR_INVALID;
    }
    gw_status_t st;
    if (gi && *gi && strcmp(gi, "auto") != 0) {
        st = gw_settings_int(s, GW_SET_IB_GID_INDEX, &gid_index, why, whylen);
        if (st != GW_OK)
            return st;
    }
    if ((st = gw_settings_int(s, GW_SET_IB_QPS, &qps, why, whylen)) != GW_OK ||
        (st = gw_settings_int(s, GW_SET_IB_TIMEOUT, &tmo, why, whylen)) != GW_OK ||
        (st = gw_settings_int(s, GW_SET_IB_RETRY_CNT, &retry, why, whylen)) != GW_OK ||
        (st = gw_settings_int(s, GW_SET_IB_REG_CACHE, &cache_on, why, whylen)) != GW_OK ||
        (st = gw_settings_size(s, GW_SET_IB_SPLIT_MIN, &split_min, why, whylen)) !=
            GW_OK ||
        (st = gw_settings_size(s, GW_SET_IB_MAX_MR, &max_mr, why, whylen)) != GW_OK)
        return st;

    gw_verbs_iface_t *vif = calloc(1, sizeof(*vif));
    if (!vif) {
        snprintf(why, whylen, "verbs: out of memory");
        return GW_ERR_NOMEM;
    }
    vif->super.ops = &gw_tl_verbs_ops;
    vif->super.core = core;
    vif->super.id = GW_TL_VERBS;
    vif->ibv = ibv;
    vif->nqps = (int)qps;
    vif->timeout = (uint8_t)tmo;
    vif->retry_cnt = (uint8_t)retry;
    vif->split_min = split_min;
    vif->rdv_read = !strcmp(rdv, "read");
    vif->rcache_on = (int)cache_on;
    vif->chan_io.fd = vif->async_io.fd = -1;
    gw_list_init(&vif->eps);
    gw_list_init(&vif->rcache);

    /* GPUWIRE_IB_DEVICE, else the NIC the topology puts nearest to this
     * process's GPU (topo/topo_cuda.c), else the NUMA-local active port */
    const char *sysfs = gw_settings_sysfs_root(s);
    const char *want = gw_settings_str(s, GW_SET_IB_DEVICE);
    char hint[64] = "", hint_why[256];
    if (!want[0]) {
        if (gw_topo_process_nic(s, hint, sizeof(hint), hint_why, sizeof(hint_why)) == GW_OK)
            want = hint;
        else
            gw_log(GW_LOG_DEBUG, "verbs: no default device from the topology: %s", hint_why);
    }
    st = gw_verbs_port_select(sysfs, want, (int)gid_index, current_numa_node(), &vif->port, vif->how,
                              sizeof(vif->how));
    if (st != GW_OK && want == hint) { /* the hint's port is down: any port */
        gw_log(GW_LOG_INFO, "verbs: nearest NIC %s unusable (%s); choosing another", want, vif->how);
        st = gw_verbs_port_select(sysfs, "", (int)gid_index, current_numa_node(), &vif->port, vif->how,
                                  sizeof(vif->how));
    } else if (st == GW_OK && want == hint) {
        size_t hl = strlen(vif->how);
        snprintf(vif->how + hl, sizeof(vif->how) - hl, " (%s)", hint_why);
    }
    if (st != GW_OK) {
        snprintf(why, whylen, "%s", vif->how);
        goto err_free;
    }

    int ndev = 0;
    struct ibv_device **list = gw_ibv_device_list(ibv, &ndev);
    if (!list) {
        snprintf(why, whylen, "ibv_get_device_list() failed: %s", strerror(errno));
        st = GW_ERR_UNAVAILABLE;
        goto err_free;
    }
    struct ibv_device *dev = NULL;
    for (int i = 0; i < ndev; i++)
        if (strcmp(ibv->get_device_name(list[i]), vif->port.dev) == 0)
            dev = list[i];
    if (!dev) {
        snprintf(why, whylen, "sysfs lists %s but libibverbs has no provider for it%s%s",
                 vif->port.dev, ibv->init_noise[0] ? ": " : " (install ibverbs-providers)",
                 ibv->init_noise);
        ibv->free_device_list(list);
        st = GW_ERR_UNAVAILABLE;
        goto err_free;
    }
    vif->ctx = ibv->open_device(dev);
    int err = errno;
    ibv->free_device_list(list);
    if (!vif->ctx) {
        snprintf(why, whylen, "ibv_open_device(%s) failed: %s (permission on /dev/infiniband?)",
                 vif->port.dev, strerror(err));
        st = GW_ERR_VERBS;
        goto err_free;
    }
    if ((err = ibv->query_device(vif->ctx, &vif->dattr)) != 0 ||
        (err = gw_ibv_query_port(ibv, vif->ctx, (uint8_t)vif->port.port, &vif->pattr)) != 0) {
        snprintf(why, whylen, "ibv_query_device/port(%s:%d) failed: %s", vif->port.dev,
                 vif->port.port, strerror(err));
        st = GW_ERR_VERBS;
        goto err_ctx;
    }
    if (vif->pattr.state != IBV_PORT_ACTIVE) {
        snprintf(why, whylen, "%s:%d is not active (state %d)", vif->port.dev, vif->port.port,
                 (int)vif->pattr.state);
        st = GW_ERR_UNAVAILABLE;
        goto err_ctx;
    }
    /* (capped at 2^48 so piece arithmetic cannot overflow; rxe says 2^64-1) */
    vif->max_mr = vif->dattr.max_mr_size ? GW_MIN(vif->dattr.max_mr_size, 1ull << 48) : (1ull << 32);
    if (max_mr && max_mr < vif->max_mr)
        vif->max_mr = max_mr;
    long pg = sysconf(_SC_PAGESIZE);
    if (vif->max_mr < (uint64_t)pg)
        vif->max_mr = (uint64_t)pg;
    if (vif->nqps > 1 && vif->dattr.max_qp_rd_atom <= 0)
        vif->nqps = 1;

    vif->pd = ibv->alloc_pd(vif->ctx);
    if (!vif->pd) {
        snprintf(why, whylen, "ibv_alloc_pd(%s) failed: %s", vif->port.dev, strerror(errno));
        st = GW_ERR_VERBS;
        goto err_ctx;
    }
    vif->chan = ibv->create_comp_channel(vif->ctx);
    if (!vif->chan) {
        snprintf(why, whylen, "ibv_create_comp_channel(%s) failed: %s", vif->port.dev,
                 strerror(errno));
        st = GW_ERR_VERBS;
        goto err_pd;
    }
    if (set_nonblock(vif->chan->fd) != 0 || set_nonblock(vif->ctx->async_fd) != 0) {
        snprintf(why, whylen, "fcntl(O_NONBLOCK) on verbs fds failed: %s", strerror(errno));
        st = GW_ERR_SYSTEM;
        goto err_chan;
    }
    if ((st = gw_io_add_cold(core, &vif->chan_io, vif->chan->fd, EPOLLIN, chan_cb, vif)) != GW_OK) {
        snprintf(why, whylen, "%s", core->errbuf);
        goto err_chan;
    }
    if ((st = gw_io_add_cold(core, &vif->async_io, vif->ctx->async_fd, EPOLLIN, async_cb, vif)) !=
        GW_OK) {
        snprintf(why, whylen, "%s", core->errbuf);
        goto err_io;
    }
    if ((st = gw_core_add_poller(core, verbs_poll, vif)) != GW_OK) {
        snprintf(why, whylen, "%s", core->errbuf);
        goto err_io2;
    }
    gw_log(GW_LOG_INFO, "verbs: using %s", vif->how);
    *out = &vif->super;
    return GW_OK;

err_io2:
    gw_io_del(core, &vif->async_io);
err_io:
    gw_io_del(core, &vif->chan_io);
err_chan:
    ibv->destroy_comp_channel(vif->chan);
err_pd:
    ibv->dealloc_pd(vif->pd);
err_ctx:
    ibv->close_device(vif->ctx);
err_free:
    free(vif);
    return st;
}

static void verbs_iface_close(gw_tl_iface_t *iface)
{
    if (!iface)
        return;
    gw_verbs_iface_t *vif = (gw_verbs_iface_t *)iface;
    gw_core_t *core = iface->core;
    if (!gw_list_empty(&vif->eps))
        gw_log(GW_LOG_WARN, "verbs %s: closing with %zu endpoints alive", vif->port.dev,
               gw_list_len(&vif->eps));
    gw_core_del_poller(core, verbs_poll, vif);
    gw_io_del(core, &vif->async_io);
    gw_io_del(core, &vif->chan_io);
    /* cached registrations: all go now, in use or not (their users are gone) */
    gw_list_t *p, *t;
    gw_list_for_each_safe(p, t, &vif->rcache) {
        gw_verbs_rc_entry_t *e = gw_container_of(p, gw_verbs_rc_entry_t, link);
        gw_list_del(p);
        gw_verbs_reg_destroy(vif, e->reg);
        free(e);
    }
    gw_verbs_stage_fini(vif); /* staging engines and their slot MRs */
    int rc;
    if ((rc = vif->ibv->destroy_comp_channel(vif->chan)) != 0)
        gw_log(GW_LOG_WARN, "ibv_destroy_comp_channel(%s) failed: %s", vif->port.dev, strerror(rc));
    if ((rc = vif->ibv->dealloc_pd(vif->pd)) != 0)
        gw_log(GW_LOG_WARN, "ibv_dealloc_pd(%s) failed: %s (regions still registered?)",
               vif->port.dev, strerror(rc));
    vif->ibv->close_device(vif->ctx);
    free(vif);
}

static const char *mtu_str(int m)
{
    static const char *const s[] = {"?", "256", "512", "1024", "2048", "4096"};
    return m >= 1 && m <= 5 ? s[m] : "?";
}

static gw_status_t verbs_iface_describe(gw_tl_iface_t *iface, char *buf, size_t len)
{
    gw_verbs_iface_t *vif = (gw_verbs_iface_t *)iface;
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    uint64_t v = vif->max_mr;
    int u = 0;
    while (u < 4 && v >= 1024 && v % 1024 == 0) {
        v /= 1024;
        u++;
    }
    snprintf(buf, len, "%s, active MTU %s, %d QPs per endpoint, largest MR %llu %s", vif->how,
             mtu_str(vif->pattr.active_mtu), vif->nqps, (unsigned long long)v, unit[u]);
    return GW_OK;
}

/* ---- regions ------------------------------------------------------------------- */
static int ibv_access_of(const gw_mem_t *mem)
{
    int access = IBV_ACCESS_LOCAL_WRITE;
    if (mem->access & GW_ACCESS_REMOTE_READ)
        access |= IBV_ACCESS_REMOTE_READ;
    if (mem->access & GW_ACCESS_REMOTE_WRITE)
        access |= IBV_ACCESS_REMOTE_WRITE;
    return access;
}

/* GPU ladder rung 1: the dma-buf fd of the device range, one MR. */
static gw_status_t gpu_reg_dmabuf(void *arg, gw_mem_t *m, int fd, uint64_t offset, uint64_t iova, char *why,
                                  size_t whylen)
{
    gw_verbs_iface_t *vif = arg;
    if (m->len > vif->max_mr) {
        snprintf(why, whylen, "the %zu-byte range exceeds the device's largest MR (%llu bytes)", m->len,
                 (unsigned long long)vif->max_mr);
        return GW_ERR_UNSUPPORTED;
    }
    gw_verbs_reg_t *reg = calloc(1, sizeof(*reg));
    if (!reg) {
        snprintf(why, whylen, "out of memory");
        return GW_ERR_NOMEM;
    }
    struct ibv_mr *mr;
    gw_status_t st = gw_verbs_reg_dmabuf(vif, fd, offset, m->len, iova, ibv_access_of(m), &mr);
    if (st != GW_OK) {
        snprintf(why, whylen, "%s", vif->super.core->errbuf);
        free(reg);
        return st;
    }
    reg->base = (uint64_t)(uintptr_t)m->addr;
    reg->len = m->len;
    reg->chunk = m->len ? m->len : 1;
    reg->nmr = 1;
    reg->mr[0] = mr;
    m->tl_reg[GW_TL_VERBS] = reg;
    vif->gpu_mrs++;
    return GW_OK;
}

/* GPU ladder rung 2: nvidia-peermem lets ibv_reg_mr take the device pointer. */
static gw_status_t gpu_reg_peermem(void *arg, gw_mem_t *m, char *why, size_t whylen)
{
    gw_verbs_iface_t *vif = arg;
    gw_verbs_reg_t *reg;
    gw_status_t st = gw_verbs_reg_create(vif, m->addr, m->len, ibv_access_of(m), &reg);
    if (st != GW_OK) {
        snprintf(why, whylen, "%s", vif->super.core->errbuf);
        return st;
    }
    m->tl_reg[GW_TL_VERBS] = reg;
    vif->gpu_mrs++;
    return GW_OK;
}

static gw_status_t verbs_mem_reg(gw_tl_iface_t *iface, gw_mem_t *mem)
{
    gw_verbs_iface_t *vif = (gw_verbs_iface_t *)iface;
    size_t u = strlen(mem->path);
    gw_verbs_reg_t *in = mem->within ? mem->within->tl_reg[GW_TL_VERBS] : NULL;
    if (in) { /* inside a registration of this context (the registration cache): its MRs cover this range
               * with at least this access */
        in->shares++;
        mem->tl_reg[GW_TL_VERBS] = in;
        if (mem->type != GW_MEM_HOST)
            vif->gpu_mrs++;
        snprintf(mem->path + u, sizeof(mem->path) - u, "%sverbs: the %d MR%s of the registration it lies in on %s:%d",
                 u ? "; " : "", in->nmr, in->nmr > 1 ? "s" : "", vif->port.dev, vif->port.port);
        return GW_OK;
    }
    if (mem->type != GW_MEM_HOST) {
        /* GPUDirect RDMA: dma-buf, then peer memory, else staging (mem/gpu_reg.h) */
        gw_gpu_reg_ops_t ops = {.reg_dmabuf = gpu_reg_dmabuf, .reg_peermem = gpu_reg_peermem, .arg = vif};
        gw_gpu_reg_result_t res;
        gw_status_t st = gw_gpu_reg_ladder(iface->core, mem, "verbs", &ops, &res);
        if (st == GW_ERR_UNSUPPORTED) /* a forced rung was refused: fail the registration, not just verbs */
            return GW_ERR_UNAVAILABLE;
        if (st != GW_OK)
            return st;
        snprintf(mem->path + u, sizeof(mem->path) - u, "%s%s on %s:%d", u ? "; " : "", res.path, vif->port.dev,
                 vif->port.port);
        if (res.rung == GW_GPU_RUNG_STAGING) {
            /* no MR of the device range: operations move it through registered
             * pinned bounce buffers, the owner's CPU cooperating for peers'
             * access (verbs_stage.c); tl_reg stays NULL */
            mem->tl_reg[GW_TL_VERBS] = NULL;
            vif->stg_regions++;
        }
        return GW_OK;
    }
    gw_verbs_reg_t *reg;
    gw_status_t st = gw_verbs_reg_create(vif, mem->addr, mem->len, ibv_access_of(mem), &reg);
    if (st != GW_OK)
        return st;
    mem->tl_reg[GW_TL_VERBS] = reg;
    snprintf(mem->path + u, sizeof(mem->path) - u, "%sverbs: host memory registered on %s:%d "
             "(%d MR%s)", u ? "; " : "", vif->port.dev, vif->port.port, reg->nmr,
             reg->nmr > 1 ? "s, split at the device's largest MR" : "");
    return GW_OK;
}

static gw_status_t verbs_mem_dereg(gw_tl_iface_t *iface, gw_mem_t *mem)
{
    gw_verbs_iface_t *vif = (gw_verbs_iface_t *)iface;
    gw_verbs_reg_t *reg = mem->tl_reg[GW_TL_VERBS];
    if (!reg) {
        if (mem->type != GW_MEM_HOST) { /* staging rung: fail the peers' chunks still on it */
            gw_verbs_stage_revoke(vif, mem);
            vif->stg_regions--;
        }
        return GW_OK;
    }
    /* ibv_dereg_mr() invalidates the rkeys: later remote access through them
     * fails at the initiator with a remote access error - once no other
     * registration shares the MRs */
    if (reg->shares)
        reg->shares--;
    else
        gw_verbs_reg_destroy(vif, reg);
    mem->tl_reg[GW_TL_VERBS] = NULL;
    if (mem->type != GW_MEM_HOST)
        vif->gpu_mrs--;
    return GW_OK;
}

/* rkey blob (verbs.h): version 1 u8 1, u8 n, u16 0, u64 base, u64 chunk, n x u32 rkey;
 * version 2 (staging rung) u8 2, u8 0, u16 0 */
static gw_status_t verbs_rkey_pack(gw_tl_iface_t *iface, const gw_mem_t *mem, uint8_t *buf,
                                   size_t *len)
{
    (void)iface;
    const gw_verbs_reg_t *reg = mem->tl_reg[GW_TL_VERBS];
    if (!reg && mem->type != GW_MEM_HOST) { /* staging rung: version 2, "ask the owner" */
        gw_verbs_rkey_info_t ki = {.version = GW_VERBS_RKEY_STAGED};
        uint8_t tmp[4];
        size_t n = gw_verbs_rkey_format(&ki, buf && *len >= 4 ? buf : tmp, sizeof(tmp));
        if (!buf || *len < n) {
            *len = n;
            return buf ? GW_ERR_INVALID : GW_OK;
        }
        *len = n;
        return GW_OK;
    }
    if (!reg) {
        *len = 0;
        return GW_ERR_UNSUPPORTED;
    }
    size_t need = 20 + 4 * (size_t)reg->nmr;
    if (!buf || *len < need) {
        *len = need;
        return buf ? GW_ERR_INVALID : GW_OK;
    }
    buf[0] = 1;
    buf[1] = (uint8_t)reg->nmr;
    buf[2] = buf[3] = 0;
    gw_put_u64(buf + 4, reg->base);
    gw_put_u64(buf + 12, reg->chunk);
    for (int i = 0; i < reg->nmr; i++)
        gw_put_u32(buf + 20 + 4 * i, reg->mr[i]->rkey);
    *len = need;
    return GW_OK;
}

/* endpoint ops: verbs_ep.c (life), verbs_post.c (operations), verbs_cq.c (recv_matched),
 * verbs_batch.c */
gw_status_t gw_verbs_ep_prepare(gw_tl_iface_t *iface, gw_ep_base_t *base, gw_tl_ep_t **out,
                                uint8_t *addr, size_t *addrlen);
gw_status_t gw_verbs_ep_reachable(gw_tl_iface_t *iface, const gw_tl_peer_t *peer,
                                  const uint8_t *peer_addr, size_t len, char *why, size_t whylen);
gw_status_t gw_verbs_ep_connect(gw_tl_ep_t *ep, gw_tl_peer_t *peer, const uint8_t *peer_addr,
                                size_t len);
gw_status_t gw_verbs_ep_close(gw_tl_ep_t *ep);
void gw_verbs_ep_destroy(gw_tl_ep_t *ep);
gw_status_t gw_verbs_ep_describe(gw_tl_ep_t *ep, char *buf, size_t len);
gw_status_t gw_verbs_recv_matched(gw_tl_ep_t *ep, gw_request_t *req, gw_unexp_t *msg);

static void verbs_caps(gw_tl_iface_t *iface, gw_tl_caps_t *out)
{
    (void)iface;
    out->eager_max = GW_VERBS_EAGER_MAX;
    out->max_msg = UINT64_MAX; /* cut into pieces of the port's largest message */
    out->mem_kinds = GW_TL_MEM_HOST | GW_TL_MEM_CUDA;
    out->gpu_paths = GW_TL_GPU_DIRECT | GW_TL_GPU_STAGED; /* dma-buf/peermem MRs, else the staging rung */
    out->batch = GW_TL_BATCH_NATIVE | GW_TL_BATCH_GPU | GW_TL_BATCH_COUNTED; /* (GPU: registered, or staged
                                                                                * through bounce buffers) */
}

const gw_tl_ops_t gw_tl_verbs_ops = {
    .size = sizeof(gw_tl_ops_t),
    .name = "verbs",
    .iface_open = verbs_iface_open,
    .iface_close = verbs_iface_close,
    .iface_describe = verbs_iface_describe,
    .mem_reg = verbs_mem_reg,
    .mem_dereg = verbs_mem_dereg,
    .rkey_pack = verbs_rkey_pack,
    .rkey_unpack = gw_verbs_rkey_unpack,
    .rkey_release = gw_tl_noop_rkey_release,
    .caps = verbs_caps,
    .ep_prepare = gw_verbs_ep_prepare,
    .ep_reachable = gw_verbs_ep_reachable,
    .ep_connect = gw_verbs_ep_connect,
    .ep_join = gw_tl_unsupported_ep_join,
    .ep_close = gw_verbs_ep_close,
    .ep_destroy = gw_verbs_ep_destroy,
    .ep_describe = gw_verbs_ep_describe,
    .submit = gw_verbs_submit,
    .rma_iov = gw_tl_unsupported_op, /* (batches: its own engine, GW_TL_BATCH_NATIVE) */
    .am_send = gw_tl_unsupported_am_send,
    .rma_now = gw_tl_unsupported_rma_now,
    .send_now = gw_tl_unsupported_send_now,
    .put_direct = gw_verbs_put_direct,
    .ep_progress = verbs_ep_progress,
    .recv_matched = gw_verbs_recv_matched,
    .cancel = gw_tl_no_cancel,
};
