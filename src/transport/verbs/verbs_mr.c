/* SPDX-License-Identifier: Apache-2.0 */
/* verbs_mr.c - memory registration: split regions, the registration cache,
 * locked-memory diagnosis, dma-buf.
 *
 * Shape for GPU memory (the cuda side plugs in here): a region is a
 * gw_verbs_reg_t of one or more MRs.  Host memory goes through
 * gw_verbs_reg_create(); GPU memory will try gw_verbs_reg_dmabuf() (an fd the
 * cuda layer exports), then peer memory (gw_verbs_reg_create() on the device
 * pointer with nvidia-peermem loaded), then staging through host bounce
 * buffers; whichever wins fills the same gw_verbs_reg_t. */
#include "transport/verbs/verbs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define RCACHE_MAX 64

static gw_status_t reg_error(gw_verbs_iface_t *vif, int err, void *addr, size_t len)
{
    gw_core_t *c = vif->super.core;
    struct rlimit rl;
    int have_rl = getrlimit(RLIMIT_MEMLOCK, &rl) == 0;
    if ((err == ENOMEM || err == EPERM || err == EAGAIN) && have_rl && rl.rlim_cur != RLIM_INFINITY &&
        geteuid() != 0) {
        return gw_err(c, GW_ERR_MEMLOCK,
                      "ibv_reg_mr(dev=%s, addr=%p, len=%zu) failed: %s; the locked-memory limit "
                      "(RLIMIT_MEMLOCK, ulimit -l) is %llu KiB and registrations pin memory "
                      "against it; raise it: `ulimit -l unlimited`, a memlock line in "
                      "/etc/security/limits.conf, LimitMEMLOCK=infinity for systemd services, "
                      "or --ulimit memlock=-1 for containers",
                      vif->port.dev, addr, len, strerror(err),
                      (unsigned long long)(rl.rlim_cur / 1024));
    }
    return gw_err(c, GW_ERR_VERBS, "ibv_reg_mr(dev=%s, addr=%p, len=%zu) failed: %s (errno %d)",
                  vif->port.dev, addr, len, strerror(err), err);
}

gw_status_t gw_verbs_reg_create(gw_verbs_iface_t *vif, void *addr, size_t len, int access,
                                gw_verbs_reg_t **out)
{
    gw_core_t *c = vif->super.core;
    uint64_t chunk = vif->max_mr;
    uint64_t n = len ? (len - 1) / chunk + 1 : 0; /* a zero-length region needs no MR */
    if (n > GW_VERBS_MAX_MRS)
        return gw_err(c, GW_ERR_NO_RESOURCE,
                      "register(dev=%s, len=%zu) failed: needs %llu memory regions of at most "
                      "%llu bytes each (the device's largest), more than the %d one region may "
                      "span", vif->port.dev, len, (unsigned long long)n,
                      (unsigned long long)chunk, GW_VERBS_MAX_MRS);
    gw_verbs_reg_t *r = calloc(1, sizeof(*r));
    if (!r)
        return gw_err(c, GW_ERR_NOMEM, "register(len=%zu): out of memory", len);
    r->base = (uint64_t)(uintptr_t)addr;
    r->len = len;
    r->chunk = chunk;
    for (uint64_t i = 0; i < n; i++) {
        uint8_t *a = (uint8_t *)addr + i * chunk;
        size_t l = (size_t)GW_MIN(chunk, len - i * chunk);
        errno = 0;
        struct ibv_mr *mr = vif->ibv->reg_mr(vif->pd, a, l, access);
        if (!mr) {
            int err = errno ? errno : ENOMEM;
            gw_status_t st = reg_error(vif, err, a, l);
            gw_verbs_reg_destroy(vif, r);
            return st;
        }
        r->mr[r->nmr++] = mr;
    }
    *out = r;
    return GW_OK;
}

void gw_verbs_reg_destroy(gw_verbs_iface_t *vif, gw_verbs_reg_t *reg)
{
    if (!reg)
        return;
    for (int i = 0; i < reg->nmr; i++) {
        int rc = vif->ibv->dereg_mr(reg->mr[i]);
        if (rc)
            gw_log(GW_LOG_WARN, "ibv_dereg_mr(dev=%s, rkey=0x%x) failed: %s", vif->port.dev,
                   reg->mr[i]->rkey, strerror(rc));
    }
    free(reg);
}

int gw_verbs_reg_piece(const gw_verbs_reg_t *reg, uint64_t addr, uint32_t *lkey, uint32_t *rkey,
                       uint64_t *left)
{
    if (reg->nmr == 0 || addr < reg->base || addr - reg->base > reg->len)
        return -1;
    uint64_t off = addr - reg->base;
    uint64_t i = off / reg->chunk;
    if (i >= (uint64_t)reg->nmr)
        i = (uint64_t)reg->nmr - 1; /* addr == end */
    if (lkey)
        *lkey = reg->mr[i]->lkey;
    if (rkey)
        *rkey = reg->mr[i]->rkey;
    if (left)
        *left = (i + 1) * reg->chunk - off;
    return 0;
}

/* ---- registration cache -------------------------------------------------------
 * Keyed by page-aligned range and access.  Entries in use are pinned; unused
 * ones stay (so the next transfer from the same buffer does not register
 * again) up to RCACHE_MAX, least recently used evicted first.  Caveat, as in
 * every registration cache without memory hooks: if the application frees a
 * buffer and a new mapping reuses the address, a cached MR still maps the old
 * pages.  GPUWIRE_IB_REG_CACHE=0 turns the cache off (register per transfer);
 * regions registered with gw_mem_reg() never go through it. */

static void rc_evict(gw_verbs_iface_t *vif, unsigned keep)
{
    gw_list_t *p = vif->rcache.prev;
    while (vif->rcache_n > keep && p != &vif->rcache) {
        gw_list_t *prev = p->prev;
        gw_verbs_rc_entry_t *e = gw_container_of(p, gw_verbs_rc_entry_t, link);
        if (e->refs == 0) {
            gw_list_del(p);
            gw_verbs_reg_destroy(vif, e->reg);
            free(e);
            vif->rcache_n--;
        }
        p = prev;
    }
}

gw_status_t gw_verbs_rcache_get(gw_verbs_iface_t *vif, const void *addr, size_t len, int access,
                                gw_verbs_rc_entry_t **out)
{
    long pg = sysconf(_SC_PAGESIZE);
    uint64_t ps = pg > 0 ? (uint64_t)pg : 4096;
    uint64_t a = (uint64_t)(uintptr_t)addr;
    uint64_t start = a & ~(ps - 1);
    uint64_t end = (a + (len ? len : 1) + ps - 1) & ~(ps - 1);
    gw_list_t *p, *t;
    gw_list_for_each_safe(p, t, &vif->rcache) {
        gw_verbs_rc_entry_t *e = gw_container_of(p, gw_verbs_rc_entry_t, link);
        if (e->start <= start && e->end >= end && (e->access & access) == access) {
            gw_list_del(p);
            gw_list_push_front(&vif->rcache, p);
            e->refs++;
            vif->rcache_hits++;
            *out = e;
            return GW_OK;
        }
    }
    vif->rcache_misses++;
    gw_verbs_rc_entry_t *e = calloc(1, sizeof(*e));
    if (!e)
        return gw_err(vif->super.core, GW_ERR_NOMEM, "registration cache: out of memory");
    gw_status_t st = gw_verbs_reg_create(vif, (void *)(uintptr_t)start, end - start, access, &e->reg);
    if (st != GW_OK) {
        free(e);
        return st;
    }
    e->start = start;
    e->end = end;
    e->access = access;
    e->refs = 1;
    gw_list_push_front(&vif->rcache, &e->link);
    vif->rcache_n++;
    if (vif->rcache_n > RCACHE_MAX)
        rc_evict(vif, RCACHE_MAX);
    *out = e;
    return GW_OK;
}

void gw_verbs_rcache_put(gw_verbs_iface_t *vif, gw_verbs_rc_entry_t *e)
{
    if (!e)
        return;
    e->refs--;
    if (!vif->rcache_on && e->refs == 0) {
        gw_list_del(&e->link);
        gw_verbs_reg_destroy(vif, e->reg);
        free(e);
        vif->rcache_n--;
    }
}

void gw_verbs_rcache_flush(gw_verbs_iface_t *vif)
{
    rc_evict(vif, 0);
    if (vif->rcache_n)
        gw_log(GW_LOG_WARN, "verbs %s: %u cached registrations still in use at close",
               vif->port.dev, vif->rcache_n);
}

/* ---- dma-buf -------------------------------------------------------------------- */
gw_status_t gw_verbs_reg_dmabuf(gw_verbs_iface_t *vif, int fd, uint64_t offset, size_t len,
                                uint64_t iova, int access, struct ibv_mr **out)
{
    gw_core_t *c = vif->super.core;
    if (!vif->ibv->reg_dmabuf_mr)
        return gw_err(c, GW_ERR_UNSUPPORTED,
                      "ibv_reg_dmabuf_mr(dev=%s, fd=%d) unavailable: %s lacks "
                      "ibv_reg_dmabuf_mr@IBVERBS_1.12 (rdma-core 34 or newer needed)",
                      vif->port.dev, fd, vif->ibv->lib);
    errno = 0;
    struct ibv_mr *mr = vif->ibv->reg_dmabuf_mr(vif->pd, offset, len, iova, fd, access);
    if (!mr) {
        int err = errno ? errno : EINVAL;
        if (err == EOPNOTSUPP || err == ENOSYS || err == EPROTONOSUPPORT)
            return gw_err(c, GW_ERR_UNSUPPORTED,
                          "ibv_reg_dmabuf_mr(dev=%s, fd=%d, offset=%llu, len=%zu) failed: %s "
                          "(errno %d): the device or its driver cannot register dma-buf memory",
                          vif->port.dev, fd, (unsigned long long)offset, len, strerror(err), err);
        if (err == EBADF || err == EINVAL)
            return gw_err(c, GW_ERR_INVALID,
                          "ibv_reg_dmabuf_mr(dev=%s, fd=%d, offset=%llu, len=%zu) failed: %s "
                          "(errno %d): not a dma-buf fd, or the range is outside it",
                          vif->port.dev, fd, (unsigned long long)offset, len, strerror(err), err);
        return gw_err(c, GW_ERR_VERBS,
                      "ibv_reg_dmabuf_mr(dev=%s, fd=%d, offset=%llu, len=%zu) failed: %s (errno %d)",
                      vif->port.dev, fd, (unsigned long long)offset, len, strerror(err), err);
    }
    *out = mr;
    return GW_OK;
}
