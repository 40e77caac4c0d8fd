/* SPDX-License-Identifier: Apache-2.0 */
/* mem.c - registration, remote keys. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "bootstrap/wire.h"

/* ---- the registration cache ------------------------------------------------------------
 * Live registrations of the context sorted by start address (ctx->regs).
 * A new range is looked for among those starting at or below it, nearest
 * first, up to REG_LOOK of them: a registration that contains it (and
 * gw_mem_within agrees) lends the transports what they made for it. */
#define REG_LOOK 16

/* The index of the first registration starting above a. */
static size_t regs_upper(const gw_context_t *ctx, uint64_t a)
{
    size_t lo = 0, hi = ctx->nregs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((uint64_t)(uintptr_t)ctx->regs[mid]->addr <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static gw_mem_t *regs_find(const gw_context_t *ctx, const gw_mem_t *m)
{
    if (!m->len)
        return NULL;
    size_t i = regs_upper(ctx, (uint64_t)(uintptr_t)m->addr);
    for (size_t k = 0; k < REG_LOOK && i > 0; k++) {
        gw_mem_t *p = ctx->regs[--i];
        if (gw_mem_within(p, m))
            return p;
    }
    return NULL;
}

static int regs_add(gw_context_t *ctx, gw_mem_t *m)
{
    if (!m->len || m->shm_fd >= 0)
        return 0; /* (not something a later range can lie in) */
    if (ctx->nregs == ctx->capregs) {
        size_t cap = ctx->capregs ? 2 * ctx->capregs : 64;
        gw_mem_t **a = realloc(ctx->regs, cap * sizeof(*a));
        if (!a)
            return -1;
        ctx->regs = a;
        ctx->capregs = cap;
    }
    size_t i = regs_upper(ctx, (uint64_t)(uintptr_t)m->addr);
    memmove(ctx->regs + i + 1, ctx->regs + i, (ctx->nregs - i) * sizeof(*ctx->regs));
    ctx->regs[i] = m;
    ctx->nregs++;
    return 0;
}

static void regs_del(gw_context_t *ctx, gw_mem_t *m)
{
    size_t i = regs_upper(ctx, (uint64_t)(uintptr_t)m->addr);
    while (i > 0 && ctx->regs[i - 1] != m && ctx->regs[i - 1]->addr == m->addr)
        i--;
    if (i == 0 || ctx->regs[i - 1] != m)
        return; /* (not listed: empty, gw_mem_alloc's, or the list could not grow) */
    memmove(ctx->regs + i - 1, ctx->regs + i, (ctx->nregs - i) * sizeof(*ctx->regs));
    ctx->nregs--;
}

gw_status_t gw_mem_reg(gw_context_t *ctx, void *addr, size_t len, unsigned access, gw_mem_t **out)
{
    GW_API_LOCK(ctx);
    return gw_mem_reg_shm(ctx, addr, len, access, -1, out);
}

gw_status_t gw_mem_reg_shm(gw_context_t *ctx, void *addr, size_t len, unsigned access, int shm_fd,
                           gw_mem_t **out)
{
    if (!ctx || !out)
        return gw_api_invalid(ctx ? &ctx->core : NULL, "gw_mem_reg", "out is NULL");
    *out = NULL;
    gw_core_t *core = &ctx->core;
    if (access & ~(unsigned)(GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE))
        return gw_err(core, GW_ERR_INVALID, "gw_mem_reg(addr=%p, len=%zu): unknown access flags 0x%x",
                      addr, len, access);
    if (!addr && len)
        return gw_err(core, GW_ERR_INVALID, "gw_mem_reg: NULL address with length %zu", len);
    if ((uintptr_t)addr + len < (uintptr_t)addr)
        return gw_err(core, GW_ERR_INVALID, "gw_mem_reg(addr=%p, len=%zu): range wraps around", addr, len);
    gw_mem_t *m = calloc(1, sizeof(*m));
    if (!m)
        return gw_err(core, GW_ERR_NOMEM, "gw_mem_reg: out of memory");
    m->core = core;
    m->addr = addr;
    m->len = len;
    m->access = access;
    m->cuda_device = -1;
    m->shm_fd = shm_fd;
    gw_status_t st = gw_mem_detect(core, m);
    if (st != GW_OK)
        goto err_free;
    if (ctx->reg_cache && shm_fd < 0 && (m->within = regs_find(ctx, m)) != NULL) {
        m->cached = 1;
        snprintf(m->path, sizeof(m->path), "registration cache: inside the registration [%p, +%zu)",
                 m->within->addr, m->within->len);
    }
    do {
        gw_random_bytes(&m->id, sizeof(m->id));
    } while (m->id == 0 || m->id == UINT64_MAX || gw_hmap_get(&core->regions, m->id));
    int reachable = 0;
    int i;
    for (i = 0; i < GW_TL_COUNT; i++) {
        gw_tl_iface_t *tl = ctx->tl[i];
        if (!tl)
            continue;
        st = tl->ops->mem_reg(tl, m);
        if (st == GW_OK)
            reachable++;
        else if (st != GW_ERR_UNSUPPORTED)
            goto err_dereg;
    }
    if (!reachable && ctx->tl[GW_TL_TCP] == NULL && ctx->tl[GW_TL_VERBS] == NULL && ctx->tl[GW_TL_INTRA] == NULL)
        snprintf(m->path, sizeof(m->path), "no transport is open in this context");
    if ((access & (GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE)) && gw_hmap_put(&core->regions, m->id, m) != 0) {
        st = gw_err(core, GW_ERR_NOMEM, "gw_mem_reg: out of memory for the region table");
        i = GW_TL_COUNT;
        goto err_dereg;
    }
    m->within = NULL;
    if (regs_add(ctx, m) != 0) /* the cache cannot list it: it is just not found later */
        gw_log(GW_LOG_DEBUG, "gw_mem_reg(%p, %zu): out of memory for the registration cache's list", addr, len);
    gw_list_push_back(&ctx->mems, &m->link);
    ctx->n_mems++;
    *out = m;
    return GW_OK;

err_dereg: {
    char keep[sizeof(core->errbuf)];
    snprintf(keep, sizeof(keep), "%s", core->errbuf);
    while (--i >= 0)
        if (ctx->tl[i])
            ctx->tl[i]->ops->mem_dereg(ctx->tl[i], m);
    snprintf(core->errbuf, sizeof(core->errbuf), "%s", keep);
}
err_free:
    free(m);
    return st;
}

static gw_context_t *ctx_of(const gw_mem_t *m)
{
    return gw_container_of(m->core, gw_context_t, core);
}

gw_status_t gw_mem_dereg(gw_mem_t *m)
{
    GW_API_LOCK(m ? GW_CTX_OF_CORE(m->core) : NULL);
    if (!m)
        return GW_OK;
    gw_context_t *ctx = ctx_of(m);
    if (m->inflight)
        return gw_err(&ctx->core, GW_ERR_BUSY,
                      "gw_mem_dereg(addr=%p, len=%zu): %u local operation(s) still use the region; "
                      "wait for them first", m->addr, m->len, m->inflight);
    if (m->lists)
        return gw_err(&ctx->core, GW_ERR_BUSY,
                      "gw_mem_dereg(addr=%p, len=%zu): %u local descriptor list(s) name the region; "
                      "gw_dlist_destroy() them first", m->addr, m->len, m->lists);
    gw_ctx_notify(ctx, GW_OBJ_MEM_GONE, m); /* e.g. its published names are withdrawn */
    gw_hmap_del(&ctx->core.regions, m->id); /* revoke: no new remote access finds it */
    regs_del(ctx, m);
    for (int i = 0; i < GW_TL_COUNT; i++)
        if (ctx->tl[i])
            ctx->tl[i]->ops->mem_dereg(ctx->tl[i], m);
    gw_list_del(&m->link);
    ctx->n_mems--;
    if (m->shm_fd >= 0) /* gw_mem_alloc's memory goes with it */
        gw_shm_free(m->addr, m->len, m->shm_fd);
    free(m);
    return GW_OK;
}

gw_status_t gw_mem_query(const gw_mem_t *m, gw_mem_info_t *info)
{
    GW_API_LOCK(m ? GW_CTX_OF_CORE(m->core) : NULL);
    if (!m || !GW_API_SIZE_OK(info))
        return gw_api_bad_struct(m ? m->core : NULL, "gw_mem_query", "info", info ? &info->size : NULL);
    gw_mem_info_t o;
    memset(&o, 0, sizeof(o));
    o.size = info->size;
    o.addr = m->addr;
    o.len = m->len;
    o.access = m->access;
    o.type = m->type;
    o.cuda_device = m->cuda_device;
    snprintf(o.pci_bus_id, sizeof(o.pci_bus_id), "%s", m->pci_bus_id);
    snprintf(o.path, sizeof(o.path), "%s", m->path);
    memcpy(info, &o, GW_MIN(info->size, sizeof(o)));
    return GW_OK;
}

gw_status_t gw_mem_pack_rkey(const gw_mem_t *m, void *buf, size_t *len)
{
    GW_API_LOCK(m ? GW_CTX_OF_CORE(m->core) : NULL);
    if (!m || !len)
        return gw_api_invalid(m ? m->core : NULL, "gw_mem_pack_rkey", "len is NULL");
    gw_context_t *ctx = ctx_of(m);
    if (!(m->access & (GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE)))
        return gw_err(&ctx->core, GW_ERR_INVALID,
                      "gw_mem_pack_rkey(addr=%p, len=%zu): the region was registered for local access only",
                      m->addr, m->len);
    gw_rkey_wire_t rk;
    memset(&rk, 0, sizeof(rk));
    rk.owner_uuid = ctx->core.uuid;
    rk.id = m->id;
    rk.addr = (uint64_t)(uintptr_t)m->addr;
    rk.len = m->len;
    rk.access = m->access;
    rk.mem_type = (uint8_t)m->type;
    uint8_t blobs[GW_TL_COUNT][GW_RKEY_TL_BLOB_MAX];
    for (int i = 0; i < GW_TL_COUNT; i++) {
        if (!ctx->tl[i])
            continue;
        size_t bl = GW_RKEY_TL_BLOB_MAX;
        if (ctx->tl[i]->ops->rkey_pack(ctx->tl[i], m, blobs[i], &bl) != GW_OK || bl == 0)
            continue;
        rk.blob[rk.nblob].tl = (uint8_t)i;
        rk.blob[rk.nblob].len = (uint16_t)bl;
        rk.blob[rk.nblob].data = blobs[i];
        rk.nblob++;
    }
    size_t need = gw_rkey_encode(&rk, NULL, 0);
    if (!buf) {
        *len = need;
        return GW_OK;
    }
    if (*len < need) {
        size_t have = *len;
        *len = need;
        return gw_err(&ctx->core, GW_ERR_INVALID, "gw_mem_pack_rkey: buffer of %zu bytes, %zu needed", have, need);
    }
    *len = gw_rkey_encode(&rk, buf, *len);
    return GW_OK;
}

gw_status_t gw_rkey_unpack(gw_ep_t *ep, const void *buf, size_t len, gw_rkey_t **out)
{
    GW_API_LOCK(GW_CTX_OF_EP(ep));
    if (!ep || !out)
        return gw_api_invalid(ep ? &ep->ctx->core : NULL, "gw_rkey_unpack", "out is NULL");
    *out = NULL;
    gw_core_t *core = &ep->ctx->core;
    if (!buf)
        return gw_err(core, GW_ERR_INVALID, "gw_rkey_unpack(len=%zu): buf is NULL", len);
    gw_rkey_wire_t w;
    char why[256];
    gw_status_t st = gw_rkey_decode(buf, len, &w, why, sizeof(why));
    if (st != GW_OK)
        return gw_err(core, st, "gw_rkey_unpack(len=%zu): %s", len, why);
    if (w.owner_uuid != ep->peer_uuid)
        return gw_err(core, GW_ERR_INVALID_KEY,
                      "gw_rkey_unpack: the key was packed by context %016llx, but this endpoint's peer is %016llx "
                      "(%s)", (unsigned long long)w.owner_uuid, (unsigned long long)ep->peer_uuid, ep->base.peer);
    gw_rkey_t *rk = calloc(1, sizeof(*rk));
    if (!rk)
        return gw_err(core, GW_ERR_NOMEM, "gw_rkey_unpack: out of memory");
    rk->ep = ep;
    rk->owner_uuid = w.owner_uuid;
    rk->id = w.id;
    rk->addr = w.addr;
    rk->len = w.len;
    rk->access = w.access;
    rk->type = (gw_mem_type_t)w.mem_type;
    for (int i = 0; i < w.nblob; i++) {
        if (w.blob[i].tl == ep->tl_id && w.blob[i].len <= GW_RKEY_TL_BLOB_MAX) {
            memcpy(rk->tl_blob, w.blob[i].data, w.blob[i].len);
            rk->tl_blob_len = w.blob[i].len;
        }
    }
    /* the endpoint's transport parses its part once, here (tl.h) */
    gw_tl_iface_t *tl = ep->tl_id >= 0 ? ep->ctx->tl[ep->tl_id] : NULL;
    if (tl && (st = tl->ops->rkey_unpack(tl, rk->tl_blob, rk->tl_blob_len, rk, why, sizeof(why))) != GW_OK) {
        free(rk);
        return gw_err(core, st, "gw_rkey_unpack(len=%zu, region 0x%llx of %s): %s", len,
                      (unsigned long long)w.addr, ep->base.peer, why);
    }
    ep->n_rkeys++;
    *out = rk;
    return GW_OK;
}

void gw_rkey_destroy(gw_rkey_t *rk)
{
    GW_API_LOCK(rk ? GW_CTX_OF_EP(rk->ep) : NULL);
    if (!rk)
        return;
    gw_ep_t *ep = rk->ep;
    gw_tl_iface_t *tl = ep->tl_id >= 0 ? ep->ctx->tl[ep->tl_id] : NULL;
    if (tl)
        tl->ops->rkey_release(tl, rk);
    ep->n_rkeys--;
    free(rk);
}

gw_status_t gw_rkey_range(const gw_rkey_t *rk, uint64_t *addr, size_t *len)
{
    if (!rk)
        return GW_ERR_INVALID;
    if (addr)
        *addr = rk->addr;
    if (len)
        *len = (size_t)rk->len;
    return GW_OK;
}
