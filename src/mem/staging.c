/* SPDX-License-Identifier: Apache-2.0 */
/* staging.c - pipelined host staging engine for GPU memory (see staging.h). */
#include "mem/staging.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda/cuda_wrap.h"

#define GW_STAGING_MAX_DEV 64

struct gw_staging {
    gw_core_t *core;
    const gw_cuda_t *cu;
    int device;
    CUcontext ctx;
    CUstream d2h, h2d;
    size_t chunk;
    unsigned nbufs;
    unsigned next; /* FIFO hand-out position */
    gw_stage_slot_t *slots;
    int kstate;    /* copy kernel: 0 not tried, 1 loaded, -1 copy-engine copies */
    char kpath[200];
};

size_t gw_staging_chunk(const gw_staging_t *st) { return st->chunk; }
unsigned gw_staging_nbufs(const gw_staging_t *st) { return st->nbufs; }
int gw_staging_device(const gw_staging_t *st) { return st->device; }

static gw_status_t cu_fail(gw_core_t *c, const char *what, int dev, CUresult r)
{
    char eb[160];
    return gw_err(c, GW_ERR_CUDA, "staging: %s (device %d) failed: %s", what, dev,
                  gw_cuda_strerror(r, eb, sizeof(eb)));
}

static int set_ctx(gw_staging_t *st)
{
    CUcontext cur = NULL;
    st->cu->cuCtxGetCurrent(&cur);
    if (cur == st->ctx)
        return 0;
    return st->cu->cuCtxSetCurrent(st->ctx) == CUDA_SUCCESS ? 0 : -1;
}

gw_status_t gw_staging_create(gw_core_t *c, int device, size_t chunk, unsigned nbufs,
                              gw_staging_t **out)
{
    char why[256];
    gw_status_t st_ = GW_OK;
    CUresult r;
    *out = NULL;
    const gw_cuda_t *cu = gw_cuda_get(why, sizeof(why));
    if (!cu)
        return gw_err(c, GW_ERR_UNAVAILABLE, "staging engine(device %d): CUDA unavailable: %s",
                      device, why);
    if (chunk == 0) {
        uint64_t v = 0;
        st_ = gw_settings_size(&c->settings, GW_SET_STAGING_CHUNK, &v, why,
                               sizeof(why));
        if (st_ != GW_OK)
            return gw_err(c, st_, "staging engine: %s", why);
        chunk = (size_t)v;
    }
    if (nbufs == 0) {
        long v = 0;
        st_ = gw_settings_int(&c->settings, GW_SET_STAGING_BUFFERS, &v, why, sizeof(why));
        if (st_ != GW_OK)
            return gw_err(c, st_, "staging engine: %s", why);
        nbufs = (unsigned)v;
    }
    gw_staging_t *st = calloc(1, sizeof(*st));
    if (!st)
        return gw_err(c, GW_ERR_NOMEM, "staging engine(device %d): out of memory", device);
    st->core = c;
    st->cu = cu;
    st->device = device;
    st->chunk = chunk;
    st->nbufs = nbufs;
    st->slots = calloc(nbufs, sizeof(*st->slots));
    if (!st->slots) {
        st_ = gw_err(c, GW_ERR_NOMEM, "staging engine(device %d): out of memory", device);
        goto err_st;
    }
    st->ctx = gw_cuda_ctx_for_device(device, why, sizeof(why));
    if (!st->ctx) {
        st_ = gw_err(c, GW_ERR_CUDA, "staging engine: %s", why);
        goto err_slots;
    }
    r = cu->cuStreamCreate(&st->d2h, CU_STREAM_NON_BLOCKING);
    if (r != CUDA_SUCCESS) {
        st_ = cu_fail(c, "cuStreamCreate(D2H)", device, r);
        goto err_slots;
    }
    r = cu->cuStreamCreate(&st->h2d, CU_STREAM_NON_BLOCKING);
    if (r != CUDA_SUCCESS) {
        st_ = cu_fail(c, "cuStreamCreate(H2D)", device, r);
        goto err_d2h;
    }
    for (unsigned i = 0; i < nbufs; i++) {
        gw_stage_slot_t *s = &st->slots[i];
        s->index = i;
        r = cu->cuMemHostAlloc(&s->host, chunk, CU_MEMHOSTALLOC_PORTABLE);
        if (r != CUDA_SUCCESS) {
            s->host = NULL;
            char what[96];
            snprintf(what, sizeof(what), "cuMemHostAlloc(%zu bytes, bounce %u of %u)", chunk, i,
                     nbufs);
            st_ = cu_fail(c, what, device, r);
            goto err_slots_alloc;
        }
        r = cu->cuEventCreate((CUevent *)&s->event, CU_EVENT_DISABLE_TIMING);
        if (r != CUDA_SUCCESS) {
            s->event = NULL;
            st_ = cu_fail(c, "cuEventCreate", device, r);
            goto err_slots_alloc;
        }
    }
    *out = st;
    return GW_OK;

err_slots_alloc:
    for (unsigned i = 0; i < nbufs; i++) {
        if (st->slots[i].event)
            cu->cuEventDestroy((CUevent)st->slots[i].event);
        if (st->slots[i].host)
            cu->cuMemFreeHost(st->slots[i].host);
    }
    cu->cuStreamDestroy(st->h2d);
err_d2h:
    cu->cuStreamDestroy(st->d2h);
err_slots:
    free(st->slots);
err_st:
    free(st);
    return st_;
}

void gw_staging_destroy(gw_staging_t *st)
{
    if (!st)
        return;
    const gw_cuda_t *cu = st->cu;
    set_ctx(st);
    cu->cuStreamSynchronize(st->d2h);
    cu->cuStreamSynchronize(st->h2d);
    for (unsigned i = 0; i < st->nbufs; i++) {
        cu->cuEventDestroy((CUevent)st->slots[i].event);
        cu->cuMemFreeHost(st->slots[i].host);
        if (st->slots[i].desc)
            cu->cuMemFreeHost(st->slots[i].desc);
    }
    cu->cuStreamDestroy(st->h2d);
    cu->cuStreamDestroy(st->d2h);
    free(st->slots);
    free(st);
}

gw_stage_slot_t *gw_staging_acquire(gw_staging_t *st)
{
    gw_stage_slot_t *s = &st->slots[st->next];
    if (s->busy)
        return NULL; /* FIFO: the oldest is still out, so are the rest */
    s->busy = 1;
    s->copying = 0;
    s->len = 0;
    st->next = (st->next + 1) % st->nbufs;
    return s;
}

static gw_status_t start_copy(gw_staging_t *st, gw_stage_slot_t *slot, CUdeviceptr dst,
                              CUdeviceptr src, size_t len, CUstream stream, const char *what)
{
    if (!slot->busy || len > st->chunk)
        return gw_err(st->core, GW_ERR_INVALID,
                      "staging %s(slot %u, %zu bytes) failed: slot not acquired or len > chunk %zu",
                      what, slot->index, len, st->chunk);
    if (set_ctx(st) != 0)
        return gw_err(st->core, GW_ERR_CUDA, "staging %s: cuCtxSetCurrent(device %d) failed",
                      what, st->device);
    CUresult r = st->cu->cuMemcpyAsync(dst, src, len, stream);
    if (r != CUDA_SUCCESS)
        return cu_fail(st->core, what, st->device, r);
    r = st->cu->cuEventRecord((CUevent)slot->event, stream);
    if (r != CUDA_SUCCESS) {
        st->cu->cuStreamSynchronize(stream);
        return cu_fail(st->core, "cuEventRecord", st->device, r);
    }
    slot->len = len;
    slot->copying = 1;
    return GW_OK;
}

gw_status_t gw_staging_d2h(gw_staging_t *st, gw_stage_slot_t *slot, const void *dev_src, size_t len)
{
    return start_copy(st, slot, (CUdeviceptr)(uintptr_t)slot->host, (CUdeviceptr)(uintptr_t)dev_src,
                      len, st->d2h, "cuMemcpyAsync(D2H)");
}

gw_status_t gw_staging_h2d(gw_staging_t *st, gw_stage_slot_t *slot, void *dev_dst, size_t len)
{
    return start_copy(st, slot, (CUdeviceptr)(uintptr_t)dev_dst, (CUdeviceptr)(uintptr_t)slot->host,
                      len, st->h2d, "cuMemcpyAsync(H2D)");
}

const char *gw_staging_gather_path(const gw_staging_t *st) { return st->kpath; }

/* 1: the copy kernel of the engine's device is there; 0: copy-engine copies (kpath says why). */
static int kernel_ready(gw_staging_t *st)
{
    if (!st->kstate) {
        char why[160];
        if (gw_cuda_copy_kernel_ready(st->device, why, sizeof(why)) == GW_OK) {
            st->kstate = 1;
            snprintf(st->kpath, sizeof(st->kpath), "copy kernel");
        } else {
            st->kstate = -1;
            snprintf(st->kpath, sizeof(st->kpath), "copy engine per block (no kernel: %.150s)", why);
            gw_log(GW_LOG_WARN, "staging (device %d): gathered copies move by one copy-engine copy per block: %s",
                   st->device, why);
        }
    }
    return st->kstate > 0;
}

/* One gathered (to_host) or scattered copy between the slot and n blocks. */
static gw_status_t blk_copy(gw_staging_t *st, gw_stage_slot_t *slot, const gw_stage_blk_t *blk, unsigned n,
                            int to_host)
{
    const char *what = to_host ? "gather" : "scatter";
    CUstream stream = to_host ? st->d2h : st->h2d;
    uint64_t end = 0, ndesc = 0;
    for (unsigned i = 0; i < n; i++) {
        if (blk[i].off > st->chunk || blk[i].len > st->chunk - blk[i].off)
            return gw_err(st->core, GW_ERR_INVALID, "staging %s(slot %u): block %u [+%llu, %llu bytes) is outside "
                          "the %zu-byte slot", what, slot->index, i, (unsigned long long)blk[i].off,
                          (unsigned long long)blk[i].len, st->chunk);
        end = GW_MAX(end, blk[i].off + blk[i].len);
        ndesc += (blk[i].len + GW_COPY_DESC_MAX_LEN - 1) / GW_COPY_DESC_MAX_LEN;
    }
    if (!slot->busy)
        return gw_err(st->core, GW_ERR_INVALID, "staging %s(slot %u): slot not acquired", what, slot->index);
    if (set_ctx(st) != 0)
        return gw_err(st->core, GW_ERR_CUDA, "staging %s: cuCtxSetCurrent(device %d) failed", what, st->device);
    CUresult r = CUDA_SUCCESS;
    if (kernel_ready(st) && ndesc) {
        size_t need = (size_t)ndesc * sizeof(gw_copy_desc_t);
        if (slot->desc_cap < need) { /* (the slot's previous copy has completed: it was released) */
            size_t cap = GW_MAX(need, (size_t)4096);
            void *d = NULL;
            if ((r = st->cu->cuMemHostAlloc(&d, cap, CU_MEMHOSTALLOC_PORTABLE)) != CUDA_SUCCESS)
                return cu_fail(st->core, "cuMemHostAlloc(copy kernel descriptors)", st->device, r);
            if (slot->desc)
                st->cu->cuMemFreeHost(slot->desc);
            slot->desc = d;
            slot->desc_cap = cap;
        }
        gw_copy_desc_t *d = slot->desc;
        uint32_t k = 0;
        for (unsigned i = 0; i < n; i++) {
            for (uint64_t o = 0; o < blk[i].len; o += GW_COPY_DESC_MAX_LEN) {
                uint64_t h = (uint64_t)(uintptr_t)slot->host + blk[i].off + o;
                uint64_t l = GW_MIN((uint64_t)GW_COPY_DESC_MAX_LEN, blk[i].len - o);
                d[k++] = to_host ? (gw_copy_desc_t){blk[i].addr + o, h, l} : (gw_copy_desc_t){h, blk[i].addr + o, l};
            }
        }
        char why[200];
        gw_status_t s = gw_cuda_copy_kernel_launch(st->device, stream, d, k, why, sizeof(why));
        if (s != GW_OK)
            return gw_err(st->core, s, "staging %s (device %d, %u blocks): %s", what, st->device, n, why);
    } else {
        for (unsigned i = 0; i < n; i++) {
            CUdeviceptr h = (CUdeviceptr)(uintptr_t)slot->host + blk[i].off;
            r = to_host ? st->cu->cuMemcpyAsync(h, (CUdeviceptr)blk[i].addr, blk[i].len, stream)
                        : st->cu->cuMemcpyAsync((CUdeviceptr)blk[i].addr, h, blk[i].len, stream);
            if (r != CUDA_SUCCESS) {
                st->cu->cuStreamSynchronize(stream);
                return cu_fail(st->core, to_host ? "cuMemcpyAsync(gather block)" : "cuMemcpyAsync(scatter block)",
                               st->device, r);
            }
        }
    }
    r = st->cu->cuEventRecord((CUevent)slot->event, stream);
    if (r != CUDA_SUCCESS) {
        st->cu->cuStreamSynchronize(stream);
        return cu_fail(st->core, "cuEventRecord", st->device, r);
    }
    slot->len = (size_t)end;
    slot->copying = 1;
    return GW_OK;
}

gw_status_t gw_staging_gather(gw_staging_t *st, gw_stage_slot_t *slot, const gw_stage_blk_t *blk, unsigned n)
{
    return blk_copy(st, slot, blk, n, 1);
}

gw_status_t gw_staging_scatter(gw_staging_t *st, gw_stage_slot_t *slot, const gw_stage_blk_t *blk, unsigned n)
{
    return blk_copy(st, slot, blk, n, 0);
}

int gw_staging_test(gw_staging_t *st, gw_stage_slot_t *slot)
{
    if (!slot->copying)
        return 1;
    CUresult r = st->cu->cuEventQuery((CUevent)slot->event);
    if (r == CUDA_SUCCESS) {
        slot->copying = 0;
        return 1;
    }
    if (r == CUDA_ERROR_NOT_READY)
        return 0;
    slot->copying = 0;
    return cu_fail(st->core, "cuEventQuery(staging copy)", st->device, r);
}

void gw_staging_release(gw_staging_t *st, gw_stage_slot_t *slot)
{
    (void)st;
    slot->busy = 0;
    slot->copying = 0;
}

/* The stream of gw_staging_copy_sync, one per device for the process,
 * made on first use (non-blocking: see there). */
static pthread_mutex_t sync_lock = PTHREAD_MUTEX_INITIALIZER;
static CUstream sync_stream[GW_STAGING_MAX_DEV];
static CUstream own_stream[GW_STAGING_MAX_DEV]; /* the same in gpuwire's own context */

gw_status_t gw_staging_copy_sync_own(gw_core_t *c, int device, void *dst, const void *src, size_t len)
{
    char why[256];
    if (len == 0)
        return GW_OK;
    if (device < 0 || device >= GW_STAGING_MAX_DEV)
        return gw_err(c, GW_ERR_INVALID, "staging copy(%zu bytes): CUDA device %d out of range", len, device);
    const gw_cuda_t *cu = gw_cuda_get(NULL, 0);
    CUcontext saved = NULL;
    if (!cu || !gw_cuda_own_ctx_enter(device, &saved, why, sizeof(why)))
        return gw_err(c, GW_ERR_CUDA, "staging copy(%zu bytes) in gpuwire's own context: %s", len, why);
    pthread_mutex_lock(&sync_lock);
    CUresult r = CUDA_SUCCESS;
    if (!own_stream[device])
        r = cu->cuStreamCreate(&own_stream[device], CU_STREAM_NON_BLOCKING);
    CUstream s = own_stream[device];
    pthread_mutex_unlock(&sync_lock);
    gw_status_t st = GW_OK;
    if (r != CUDA_SUCCESS)
        st = cu_fail(c, "cuStreamCreate(synchronous copies, own context)", device, r);
    else if ((r = cu->cuMemcpyAsync((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, len, s)) != CUDA_SUCCESS)
        st = cu_fail(c, "cuMemcpyAsync(own context)", device, r);
    else if ((r = cu->cuStreamSynchronize(s)) != CUDA_SUCCESS)
        st = cu_fail(c, "cuStreamSynchronize(synchronous copy, own context)", device, r);
    gw_cuda_ctx_leave(saved);
    return st;
}

gw_status_t gw_staging_copy_sync(gw_core_t *c, int device, void *dst, const void *src, size_t len)
{
    char why[256];
    if (len == 0)
        return GW_OK;
    if (device < 0 || device >= GW_STAGING_MAX_DEV)
        return gw_err(c, GW_ERR_INVALID, "staging copy(%zu bytes): CUDA device %d out of range", len, device);
    if (!gw_cuda_ctx_for_device(device, why, sizeof(why)))
        return gw_err(c, GW_ERR_CUDA, "staging copy(%zu bytes): %s", len, why);
    const gw_cuda_t *cu = gw_cuda_get(NULL, 0);
    /* Not cuMemcpy: that runs on the legacy default stream, which waits for
     * the application's work on its blocking streams, and the application's
     * may be waiting for this very data (PyTorch's default stream waiting on
     * a NCCL collective whose bytes the net plugin delivers here): a copy
     * queued there never finishes.  A non-blocking stream of our own orders
     * against nothing of the application's. */
    pthread_mutex_lock(&sync_lock);
    CUresult r = CUDA_SUCCESS;
    if (!sync_stream[device])
        r = cu->cuStreamCreate(&sync_stream[device], CU_STREAM_NON_BLOCKING);
    CUstream s = sync_stream[device];
    pthread_mutex_unlock(&sync_lock);
    if (r != CUDA_SUCCESS)
        return cu_fail(c, "cuStreamCreate(synchronous copies)", device, r);
    r = cu->cuMemcpyAsync((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, len, s);
    if (r != CUDA_SUCCESS)
        return cu_fail(c, "cuMemcpyAsync", device, r);
    r = cu->cuStreamSynchronize(s);
    if (r != CUDA_SUCCESS)
        return cu_fail(c, "cuStreamSynchronize(synchronous copy)", device, r);
    return GW_OK;
}
