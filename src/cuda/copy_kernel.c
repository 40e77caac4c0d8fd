/* SPDX-License-Identifier: Apache-2.0 */
/* copy_kernel.c - loads and launches the batched copy kernel (mem layer):
 * the PTX of copy_kernel.cu, embedded as text (copy_kernel_ptx.h, generated
 * by scripts/gen-copy-kernel.sh), loaded per device with cuModuleLoadData on
 * first use.  A driver without the module entry points, or one that refuses
 * the PTX, leaves the callers on copy-engine copies; the reason is kept for
 * their path text. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/settings.h"
#include "cuda/cuda_wrap.h"
#include "cuda/copy_kernel_ptx.h"

#define MAX_DEV 64
#define THREADS 256
#define MAX_BLOCKS 8192
#define PAGE_WAVE 1024 /* blocks of 256 threads an H100 (132 SMs) holds at once, about */

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER; /* contexts of other threads load too */
static struct {
    int state; /* 0 not tried, 1 loaded, -1 failed */
    CUfunction fn;  /* gw_batch_copy: descriptors */
    CUfunction pfn; /* gw_page_copy: the paged form */
    CUfunction lfn; /* gw_list_copy: the list form */
    CUfunction tfn; /* gw_table_copy: the list form over region tables */
    CUfunction cfn; /* gw_page_check: bounds of page index arrays in GPU memory */
    CUfunction ffn; /* gw_page_fused: the check and the paged form in one cooperative launch */
    CUfunction rfn; /* gw_page_rcheck: the same for few entries, every block checking them all */
    int coop_max;   /* blocks of ffn the device holds at once (0: no cooperative launch, coop_why says why) */
    char why[200];
    char coop_why[160];
} g_k[MAX_DEV];

/* How many blocks of THREADS threads of gw_page_fused dev holds at once
 * (g_k[dev].coop_max), or 0 with the reason: no cooperative launch in the
 * driver or on the device, or no occupancy query. */
static void coop_size(const gw_cuda_t *cu, int dev)
{
    CUdevice d = 0;
    int coop = 0, sms = 0, per_sm = 0;
    CUresult r;
    char eb[120];
    g_k[dev].coop_max = 0;
    if (!cu->cuLaunchCooperativeKernel || !cu->cuOccupancyMaxActiveBlocksPerMultiprocessor)
        snprintf(g_k[dev].coop_why, sizeof(g_k[dev].coop_why),
                 "the driver has no cuLaunchCooperativeKernel/cuOccupancyMaxActiveBlocksPerMultiprocessor");
    else if (cu->cuDeviceGet(&d, dev) != CUDA_SUCCESS ||
             cu->cuDeviceGetAttribute(&coop, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, d) != CUDA_SUCCESS || !coop)
        snprintf(g_k[dev].coop_why, sizeof(g_k[dev].coop_why), "GPU %d takes no cooperative launch", dev);
    else if (cu->cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d) != CUDA_SUCCESS || sms <= 0)
        snprintf(g_k[dev].coop_why, sizeof(g_k[dev].coop_why), "GPU %d reports no multiprocessor count", dev);
    else if ((r = cu->cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, g_k[dev].ffn, THREADS, 0)) !=
                 CUDA_SUCCESS || per_sm <= 0)
        snprintf(g_k[dev].coop_why, sizeof(g_k[dev].coop_why),
                 "cuOccupancyMaxActiveBlocksPerMultiprocessor(gw_page_fused) gave %d: %s", per_sm,
                 gw_cuda_strerror(r, eb, sizeof(eb)));
    else
        g_k[dev].coop_max = sms * per_sm < MAX_BLOCKS ? sms * per_sm : MAX_BLOCKS;
    if (g_k[dev].coop_max)
        gw_log(GW_LOG_DEBUG, "cuda: GPU %d holds %d blocks of gw_page_fused at once (%d SMs)", dev, g_k[dev].coop_max,
               sms);
    else
        gw_log(GW_LOG_INFO, "cuda: paged transfers with index arrays in GPU memory check them in a launch of their "
               "own on GPU %d: %s", dev, g_k[dev].coop_why);
}

gw_status_t gw_cuda_copy_kernel_ready(int dev, char *why, size_t whylen)
{
    char eb[160];
    if (dev < 0 || dev >= MAX_DEV) {
        snprintf(why, whylen, "device %d out of range", dev);
        return GW_ERR_UNAVAILABLE;
    }
    pthread_mutex_lock(&g_mu);
    if (g_k[dev].state == 0) {
        const gw_cuda_t *cu = gw_cuda_get(eb, sizeof(eb));
        CUmodule m = NULL;
        CUresult r;
        g_k[dev].state = -1;
        if (!cu)
            snprintf(g_k[dev].why, sizeof(g_k[dev].why), "no CUDA driver: %s", eb);
        else if (!cu->cuModuleLoadData || !cu->cuModuleGetFunction || !cu->cuLaunchKernel)
            snprintf(g_k[dev].why, sizeof(g_k[dev].why), "the driver has no cuModuleLoadData/cuLaunchKernel");
        else if (!gw_cuda_ctx_for_device(dev, eb, sizeof(eb)))
            snprintf(g_k[dev].why, sizeof(g_k[dev].why), "%s", eb);
        else if ((r = cu->cuModuleLoadData(&m, gw_copy_kernel_ptx)) != CUDA_SUCCESS)
            snprintf(g_k[dev].why, sizeof(g_k[dev].why), "cuModuleLoadData(copy kernel PTX) failed: %s",
                     gw_cuda_strerror(r, eb, sizeof(eb)));
        else {
            /* every kernel of the module, by name */
            struct {
                CUfunction *f;
                const char *name;
            } fns[] = {{&g_k[dev].fn, "gw_batch_copy"},  {&g_k[dev].pfn, "gw_page_copy"},
                       {&g_k[dev].lfn, "gw_list_copy"},  {&g_k[dev].tfn, "gw_table_copy"},
                       {&g_k[dev].cfn, "gw_page_check"}, {&g_k[dev].ffn, "gw_page_fused"},
                       {&g_k[dev].rfn, "gw_page_rcheck"}};
            size_t i = 0;
            for (; i < sizeof(fns) / sizeof(fns[0]); i++)
                if ((r = cu->cuModuleGetFunction(fns[i].f, m, fns[i].name)) != CUDA_SUCCESS) {
                    snprintf(g_k[dev].why, sizeof(g_k[dev].why), "cuModuleGetFunction(%s) failed: %s", fns[i].name,
                             gw_cuda_strerror(r, eb, sizeof(eb)));
                    break;
                }
            if (i == sizeof(fns) / sizeof(fns[0])) {
                g_k[dev].state = 1;
                coop_size(cu, dev);
            }
        }
    }
    int state = g_k[dev].state;
    pthread_mutex_unlock(&g_mu);
    if (state < 0) {
        snprintf(why, whylen, "%s", g_k[dev].why);
        return GW_ERR_UNAVAILABLE;
    }
    return GW_OK;
}

/* cuLaunchKernel of f over `blocks` blocks of THREADS threads on stream;
 * on failure *why names the launch (fmt, ...) and the driver's error. */
static gw_status_t launch(const gw_cuda_t *cu, CUfunction f, unsigned blocks, CUstream stream, void **params,
                          char *why, size_t whylen, const char *fmt, ...) __attribute__((format(printf, 8, 9)));
static gw_status_t launch(const gw_cuda_t *cu, CUfunction f, unsigned blocks, CUstream stream, void **params,
                          char *why, size_t whylen, const char *fmt, ...)
{
    CUresult r = cu->cuLaunchKernel(f, blocks, 1, 1, THREADS, 1, 1, 0, stream, params, NULL);
    if (r == CUDA_SUCCESS)
        return GW_OK;
    char what[120], eb[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    snprintf(why, whylen, "cuLaunchKernel(%s) failed: %s", what, gw_cuda_strerror(r, eb, sizeof(eb)));
    return GW_ERR_CUDA;
}

gw_status_t gw_cuda_copy_kernel_launch(int dev, CUstream stream, const gw_copy_desc_t *desc, uint32_t n,
                                       char *why, size_t whylen)
{
    gw_status_t st = gw_cuda_copy_kernel_ready(dev, why, whylen);
    if (st != GW_OK || n == 0)
        return st;
    char eb[160];
    const gw_cuda_t *cu = gw_cuda_get(eb, sizeof(eb));
    const gw_copy_desc_t *d = desc;
    unsigned int cnt = n;
    void *params[2] = {&d, &cnt};
    unsigned blocks = n < MAX_BLOCKS ? n : MAX_BLOCKS;
    return launch(cu, g_k[dev].fn, blocks, stream, params, why, whylen, "gw_batch_copy, %u descriptors", n);
}

/* The geometry of gw_page_copy and gw_list_copy for nitems items of at most
 * `len` bytes: *g threads per item (a group sized to the item), *per items
 * per block and round; returns the blocks. */
static unsigned item_grid(unsigned long long nitems, unsigned long long len, unsigned *g_out, unsigned *per_out)
{
    static int moves; /* GPUWIRE_COPY_KERNEL_MOVES, read once (checked at context creation) */
    if (!moves) {
        long m = strtol(gw_settings_env(GW_SET_COPY_KERNEL_MOVES), NULL, 10);
        moves = m >= 1 && m <= 64 ? (int)m : 2;
    }
    unsigned int g = 32;
    while (g < THREADS && (unsigned long long)g * 2 * 16 * (unsigned)moves <= len) /* `moves` 16-byte moves per thread or more */
        g *= 2;
    /* items per block and round: enough that the grid is about one wave of
     * PAGE_WAVE blocks (each round costs one PCIe round trip for its
     * indices), at least a round of every group, at most 64 */
    unsigned int ipb = THREADS / g;
    unsigned long long per = (nitems + PAGE_WAVE - 1) / PAGE_WAVE;
    per = per < ipb ? ipb : per > 64 ? 64 : (per + ipb - 1) / ipb * ipb;
    unsigned long long nb = (nitems + per - 1) / per;
    *g_out = g;
    *per_out = (unsigned)per;
    return nb < MAX_BLOCKS ? (unsigned)nb : MAX_BLOCKS;
}

gw_status_t gw_cuda_page_check_launch(int dev, CUstream stream, const uint32_t *lidx, const uint32_t *ridx,
                                      uint32_t n, const uint32_t lim[4], uint64_t *word, uint64_t gbase, char *why,
                                      size_t whylen)
{
    gw_status_t st = gw_cuda_copy_kernel_ready(dev, why, whylen);
    if (st != GW_OK || n == 0 || (!lidx && !ridx))
        return st;
    char eb[160];
    const gw_cuda_t *cu = gw_cuda_get(eb, sizeof(eb));
    /* one entry per thread up to a wave, then grid-stride: 16,384 entries
     * are 64 blocks, a read of 128 KiB */
    unsigned blocks = (n + THREADS - 1) / THREADS;
    blocks = blocks < PAGE_WAVE ? blocks : PAGE_WAVE;
    const uint32_t *l = lidx, *r = ridx;
    unsigned long long nn = n, gb = gbase;
    unsigned int llo = lim[0], lhi = lim[1], rlo = lim[2], rhi = lim[3];
    uint64_t *w = word;
    void *params[9] = {&l, &r, &nn, &llo, &lhi, &rlo, &rhi, &w, &gb};
    return launch(cu, g_k[dev].cfn, blocks, stream, params, why, whylen, "gw_page_check, %u pages", n);
}

int gw_cuda_page_fused_ok(int dev, char *why, size_t whylen)
{
    if (gw_cuda_copy_kernel_ready(dev, why, whylen) != GW_OK)
        return 0;
    pthread_mutex_lock(&g_mu);
    int ok = g_k[dev].coop_max > 0;
    if (!ok)
        snprintf(why, whylen, "%s", g_k[dev].coop_why);
    pthread_mutex_unlock(&g_mu);
    return ok;
}

/* gw_page_fused over blocks blocks (at most what the device holds at once):
 * CUDA_SUCCESS, or the driver's refusal (nothing queued). */
static CUresult page_fused(const gw_cuda_t *cu, int dev, CUstream stream, const uint32_t *sidx, const uint32_t *didx,
                           unsigned long long nitems, unsigned chunks, uint64_t sbase, uint64_t dbase, uint64_t psize,
                           unsigned long long chunk, unsigned g, unsigned pr, uint32_t n, const gw_cuda_page_gate_t *gate,
                           unsigned blocks)
{
    const uint32_t *s = sidx, *d = didx;
    unsigned long long sb = sbase, db = dbase, ps = psize, nn = n, gb = gate->gbase;
    unsigned int get = gate->get != 0, llo = gate->lim[0], lhi = gate->lim[1], rlo = gate->lim[2], rhi = gate->lim[3];
    uint64_t *w = gate->word, *bar = gate->bar, *out = gate->out;
    unsigned long long target = *gate->arrived + blocks;
    void *params[21] = {&s, &d, &nitems, &chunks, &sb, &db, &ps, &chunk, &g, &pr, &nn,
                        &get, &llo, &lhi, &rlo, &rhi, &w, &gb, &bar, &target, &out};
    CUresult r = cu->cuLaunchCooperativeKernel(g_k[dev].ffn, blocks, 1, 1, THREADS, 1, 1, 0, stream, params);
    if (r == CUDA_SUCCESS)
        *gate->arrived = target;
    return r;
}

gw_status_t gw_cuda_page_copy_launch(int dev, CUstream stream, const uint32_t *sidx, const uint32_t *didx,
                                     uint32_t n, uint64_t sbase, uint64_t dbase, uint64_t psize,
                                     gw_cuda_page_gate_t *gate, char *why, size_t whylen)
{
    gw_status_t st = gw_cuda_copy_kernel_ready(dev, why, whylen);
    if (gate)
        gate->fused = 0;
    if (st != GW_OK || n == 0 || psize == 0)
        return st;
    char eb[160];
    const gw_cuda_t *cu = gw_cuda_get(eb, sizeof(eb));
    /* pages longer than a descriptor's most are cut the same way, so that
     * they spread over SMs; a group of threads per piece, sized to it */
    unsigned long long chunk = psize < GW_COPY_DESC_MAX_LEN ? psize : GW_COPY_DESC_MAX_LEN;
    unsigned int chunks = (unsigned int)((psize + chunk - 1) / chunk);
    unsigned long long nitems = (unsigned long long)n * chunks;
    unsigned int g, pr;
    unsigned blocks = item_grid(nitems, chunk, &g, &pr);
    if (gate && gate->form == GW_CUDA_PAGE_GATE_FUSED && n <= gate->rcheck_max) {
        /* few entries: every block checks them all, one plain launch */
        const uint32_t *s = sidx, *d = didx;
        unsigned long long sb = sbase, db = dbase, ps = psize, nn = n;
        unsigned int get = gate->get != 0, llo = gate->lim[0], lhi = gate->lim[1], rlo = gate->lim[2],
                     rhi = gate->lim[3];
        uint64_t *out = gate->out;
        void *params[17] = {&s, &d, &nitems, &chunks, &sb, &db, &ps, &chunk, &g, &pr, &nn, &get, &llo, &lhi, &rlo,
                            &rhi, &out};
        st = launch(cu, g_k[dev].rfn, blocks, stream, params, why, whylen, "gw_page_rcheck, %u pages of %llu bytes",
                    n, (unsigned long long)psize);
        if (st == GW_OK)
            gate->fused = 1;
        return st;
    }
    if (gate && gate->form == GW_CUDA_PAGE_GATE_FUSED) {
        int most = __atomic_load_n(&g_k[dev].coop_max, __ATOMIC_RELAXED);
        if (most > 0) {
            /* (the rounds are grid-stride: fewer blocks than one wave only
             * take more rounds each) */
            unsigned fb = blocks < (unsigned)most ? blocks : (unsigned)most;
            CUresult r = page_fused(cu, dev, stream, sidx, didx, nitems, chunks, sbase, dbase, psize, chunk, g, pr, n,
                                    gate, fb);
            if (r == CUDA_SUCCESS) {
                gate->fused = 1;
                return GW_OK;
            }
            /* refused (a grid the device cannot hold at once, no
             * cooperative launch under this setup): the two launches from
             * now on, for this device */
            pthread_mutex_lock(&g_mu);
            g_k[dev].coop_max = 0;
            snprintf(g_k[dev].coop_why, sizeof(g_k[dev].coop_why),
                     "cuLaunchCooperativeKernel(gw_page_fused, %u blocks) failed: %s", fb,
                     gw_cuda_strerror(r, eb, sizeof(eb)));
            gw_log(GW_LOG_INFO, "cuda: paged transfers with index arrays in GPU memory check them in a launch of "
                   "their own on GPU %d: %s", dev, g_k[dev].coop_why);
            pthread_mutex_unlock(&g_mu);
        }
    }
    const uint64_t *gw = NULL;
    uint64_t *out = NULL;
    unsigned long long gb = 0;
    if (gate) {
        st = gw_cuda_page_check_launch(dev, stream, gate->lidx, gate->ridx, n, gate->lim, gate->word, gate->gbase,
                                       why, whylen);
        if (st != GW_OK)
            return st;
        gw = gate->word;
        out = gate->out;
        gb = gate->gbase;
    }
    const uint32_t *s = sidx, *d = didx;
    unsigned long long sb = sbase, db = dbase, ps = psize;
    void *params[13] = {&s, &d, &nitems, &chunks, &sb, &db, &ps, &chunk, &g, &pr, &gw, &gb, &out};
    return launch(cu, g_k[dev].pfn, blocks, stream, params, why, whylen, "gw_page_copy, %u pages of %llu bytes", n,
                  (unsigned long long)psize);
}

gw_status_t gw_cuda_list_copy_launch(int dev, CUstream stream, const uint32_t *sidx, const uint32_t *didx,
                                     const void *stab, const void *dtab, uint32_t n, uint64_t sdelta,
                                     uint64_t ddelta, uint64_t maxlen, char *why, size_t whylen)
{
    gw_status_t st = gw_cuda_copy_kernel_ready(dev, why, whylen);
    if (st != GW_OK || n == 0 || maxlen == 0)
        return st;
    if (maxlen >= GW_COPY_DESC_MAX_LEN) {
        snprintf(why, whylen, "gw_list_copy: entries of %llu bytes (under %u only)", (unsigned long long)maxlen,
                 GW_COPY_DESC_MAX_LEN);
        return GW_ERR_INVALID;
    }
    char eb[160];
    const gw_cuda_t *cu = gw_cuda_get(eb, sizeof(eb));
    unsigned int g, pr;
    unsigned long long nn = n, sd = sdelta, dd = ddelta;
    unsigned blocks = item_grid(nn, maxlen, &g, &pr);
    const uint32_t *s = sidx, *d = didx;
    const void *ts = stab, *td = dtab;
    void *params[9] = {&s, &d, &ts, &td, &nn, &sd, &dd, &g, &pr};
    return launch(cu, g_k[dev].lfn, blocks, stream, params, why, whylen, "gw_list_copy, %u entries", n);
}

gw_status_t gw_cuda_table_copy_launch(int dev, CUstream stream, const gw_cuda_table_side_t *src,
                                      const gw_cuda_table_side_t *dst, uint32_t n, uint64_t clen, uint64_t maxlen,
                                      char *why, size_t whylen)
{
    gw_status_t st = gw_cuda_copy_kernel_ready(dev, why, whylen);
    if (st != GW_OK || n == 0 || maxlen == 0)
        return st;
    if ((!src->tab && (!src->base || !src->per)) || (!dst->tab && (!dst->base || !dst->per))) {
        snprintf(why, whylen, "gw_table_copy: a side with neither a table nor region bases and blocks per region");
        return GW_ERR_INVALID;
    }
    char eb[160];
    const gw_cuda_t *cu = gw_cuda_get(eb, sizeof(eb));
    /* entries longer than a descriptor's most are cut as pages are */
    unsigned long long chunk = maxlen < GW_COPY_DESC_MAX_LEN ? maxlen : GW_COPY_DESC_MAX_LEN;
    unsigned int chunks = (unsigned int)((maxlen + chunk - 1) / chunk);
    unsigned long long nitems = (unsigned long long)n * chunks, cl = clen;
    unsigned long long sd = src->delta, dd = dst->delta;
    unsigned int g, pr, sp = src->per, dp = dst->per;
    unsigned blocks = item_grid(nitems, chunk, &g, &pr);
    const uint32_t *si = src->idx, *di = dst->idx;
    const void *ts = src->tab, *td = dst->tab;
    const uint64_t *bs = src->base, *bd = dst->base;
    void *params[16] = {&si, &di, &ts, &td, &bs, &bd, &sp, &dp, &cl, &sd, &dd, &nitems, &chunks, &chunk, &g, &pr};
    return launch(cu, g_k[dev].tfn, blocks, stream, params, why, whylen, "gw_table_copy, %u entries", n);
}
