/* SPDX-License-Identifier: Apache-2.0 */
/* cuda_wrap.c - dlopen libcuda.so.1 and resolve the driver API through
 * cuGetProcAddress (see cuda_wrap.h). */
#include "cuda/cuda_wrap.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fault.h"
#include "core/log.h"
#include "core/settings.h"
#include "core/util.h"

#define GW_CUDA_DEFAULT_LIB "libcuda.so.1"
#define GW_CUDA_MIN_DRIVER 11000 /* cuIpcOpenMemHandle_v2 and cuMemRetainAllocationHandle */
#define GW_CUDA_MAX_DEVICES 64

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static gw_cuda_t g_cuda;
static const gw_cuda_t *g_cuda_ok;
static char g_why[256];
static void *g_dl;

static pthread_mutex_t g_ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static CUcontext g_ctx[GW_CUDA_MAX_DEVICES];
static CUcontext g_own[GW_CUDA_MAX_DEVICES]; /* gpuwire's own context per device, kept for the process */
static int g_copy_choice = -1;               /* gw_cuda_copy_ctx_choose, -1: the setting decides */

typedef CUresult (*gw_cu_getproc2_t)(const char *sym, void **pfn, int ver, unsigned long long flags,
                                     int *status);
typedef CUresult (*gw_cu_getproc1_t)(const char *sym, void **pfn, int ver, unsigned long long flags);
typedef CUresult (*gw_cu_drvver_t)(int *ver);

const char *gw_cuda_strerror(CUresult r, char *buf, size_t len)
{
    const char *name = NULL, *desc = NULL;
    if (g_cuda_ok) {
        g_cuda.cuGetErrorName(r, &name);
        g_cuda.cuGetErrorString(r, &desc);
    }
    if (name)
        snprintf(buf, len, "%s (%s)", name, desc ? desc : "no description");
    else
        snprintf(buf, len, "CUresult %d", r);
    return buf;
}

static int resolve(void *getproc, int v2, const char *sym, int ver, void **pfn)
{
    CUresult r;
    *pfn = NULL;
    if (v2) {
        int status = 0;
        r = ((gw_cu_getproc2_t)getproc)(sym, pfn, ver, 0, &status);
    } else {
        r = ((gw_cu_getproc1_t)getproc)(sym, pfn, ver, 0);
    }
    if (r != CUDA_SUCCESS || !*pfn) {
        *pfn = NULL;
        return -1;
    }
    return 0;
}

/* ---- faults (GPUWIRE_FAULT's cuda.<function> rules, core/fault.h) ----
 * The copies, synchronisations and registrations below go through a
 * wrapper that asks the fault layer first: a fired rule returns its
 * CUresult (default CUDA_ERROR_LAUNCH_FAILED) instead of calling the
 * driver.  With no rule armed the wrapper costs one load and a branch. */
static gw_cuda_t g_real;

#define GW_CUDA_FAULT_WRAPS(W)                                                                     \
    W(cuMemcpy, (CUdeviceptr dst, CUdeviceptr src, size_t n), (dst, src, n))                       \
    W(cuMemcpyAsync, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s), (dst, src, n, s))   \
    W(cuMemcpyHtoD, (CUdeviceptr dst, const void *src, size_t n), (dst, src, n))                   \
    W(cuMemcpyDtoH, (void *dst, CUdeviceptr src, size_t n), (dst, src, n))                         \
    W(cuMemcpyHtoDAsync, (CUdeviceptr dst, const void *src, size_t n, CUstream s), (dst, src, n, s)) \
    W(cuMemcpyDtoHAsync, (void *dst, CUdeviceptr src, size_t n, CUstream s), (dst, src, n, s))     \
    W(cuMemcpyPeerAsync, (CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n, \
                          CUstream s), (dst, dctx, src, sctx, n, s))                               \
    W(cuLaunchKernel, (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, \
                       unsigned bz, unsigned shmem, CUstream s, void **params, void **extra),      \
      (f, gx, gy, gz, bx, by, bz, shmem, s, params, extra))                                        \
    W(cuStreamSynchronize, (CUstream s), (s))                                                      \
    W(cuStreamQuery, (CUstream s), (s))                                                            \
    W(cuEventQuery, (CUevent e), (e))                                                              \
    W(cuEventSynchronize, (CUevent e), (e))                                                        \
    W(cuMemAlloc, (CUdeviceptr * p, size_t n), (p, n))                                             \
    W(cuMemHostAlloc, (void **p, size_t n, unsigned flags), (p, n, flags))                         \
    W(cuMemHostRegister, (void *p, size_t n, unsigned flags), (p, n, flags))                       \
    W(cuPointerGetAttributes, (unsigned n, int *attrs, void **data, CUdeviceptr p), (n, attrs, data, p)) \
    W(cuMemGetAddressRange, (CUdeviceptr * base, size_t *size, CUdeviceptr p), (base, size, p))    \
    W(cuIpcGetMemHandle, (CUipcMemHandle * h, CUdeviceptr p), (h, p))                              \
    W(cuIpcOpenMemHandle, (CUdeviceptr * p, CUipcMemHandle h, unsigned flags), (p, h, flags))

#define GW_CUDA_FAULT_FN_(name, params, args)                                                      \
    static CUresult fault_##name params                                                            \
    {                                                                                              \
        gw_fault_t f_;                                                                             \
        if (gw_fault_at("cuda." #name, &f_))                                                       \
            return f_.has_arg ? (CUresult)f_.arg : CUDA_ERROR_LAUNCH_FAILED;                       \
        return g_real.name args;                                                                   \
    }
GW_CUDA_FAULT_WRAPS(GW_CUDA_FAULT_FN_)
#undef GW_CUDA_FAULT_FN_

static void install_fault_wraps(void)
{
    g_real = g_cuda;
#define GW_CUDA_FAULT_SET_(name, params, args)                                                     \
    if (g_cuda.name)                                                                               \
        g_cuda.name = fault_##name;
    GW_CUDA_FAULT_WRAPS(GW_CUDA_FAULT_SET_)
#undef GW_CUDA_FAULT_SET_
}

static void load_once(void)
{
    const char *lib = gw_settings_env(GW_SET_CUDA_LIB);
    if (!lib || !*lib)
        lib = GW_CUDA_DEFAULT_LIB;
    int absent = 0;
    g_dl = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!g_dl) {
        const char *e = dlerror();
        if (strcmp(lib, GW_CUDA_DEFAULT_LIB) == 0) {
            snprintf(g_why, sizeof(g_why), "%s not found: no NVIDIA driver", lib);
            absent = 1;
        } else {
            snprintf(g_why, sizeof(g_why), "dlopen(%s) failed (GPUWIRE_CUDA_LIB): %s", lib,
                     e ? e : "unknown error");
        }
        goto fail;
    }
    gw_cu_drvver_t drvver = (gw_cu_drvver_t)dlsym(g_dl, "cuDriverGetVersion");
    if (!drvver) {
        snprintf(g_why, sizeof(g_why), "%s has no cuDriverGetVersion: not a CUDA driver library",
                 lib);
        goto fail_dl;
    }
    int ver = 0;
    CUresult r = drvver(&ver);
    if (r != CUDA_SUCCESS) {
        snprintf(g_why, sizeof(g_why), "cuDriverGetVersion() failed: CUresult %d (lib %s)", r, lib);
        goto fail_dl;
    }
    if (ver < GW_CUDA_MIN_DRIVER) {
        snprintf(g_why, sizeof(g_why),
                 "CUDA driver %d.%d is too old: gpuwire needs 11.0 or newer (lib %s)", ver / 1000,
                 (ver % 1000) / 10, lib);
        goto fail_dl;
    }
    g_cuda.driver_version = ver;
    int v2 = 1;
    void *getproc = dlsym(g_dl, "cuGetProcAddress_v2");
    if (!getproc) {
        v2 = 0;
        getproc = dlsym(g_dl, "cuGetProcAddress");
    }
    if (!getproc) {
        snprintf(g_why, sizeof(g_why), "%s (driver %d) has no cuGetProcAddress", lib, ver);
        goto fail_dl;
    }
#define GW_CUDA_REQ_(name, abi, params)                                                            \
    if (resolve(getproc, v2, #name, abi, (void **)&g_cuda.name) != 0 &&                            \
        resolve(getproc, v2, #name, ver, (void **)&g_cuda.name) != 0) {                            \
        snprintf(g_why, sizeof(g_why), "cuGetProcAddress(%s, version %d) failed (driver %d, %s)",  \
                 #name, abi, ver, lib);                                                            \
        goto fail_dl;                                                                              \
    }
#define GW_CUDA_OPT_(name, abi, params)                                                            \
    if (abi > ver || resolve(getproc, v2, #name, abi, (void **)&g_cuda.name) != 0)                 \
        g_cuda.name = NULL;
    GW_CUDA_SYMS(GW_CUDA_REQ_, GW_CUDA_OPT_)
#undef GW_CUDA_REQ_
#undef GW_CUDA_OPT_

    r = g_cuda.cuInit(0);
    if (r == CUDA_ERROR_NO_DEVICE) {
        snprintf(g_why, sizeof(g_why), "cuInit() found no CUDA device (driver %d.%d)", ver / 1000,
                 (ver % 1000) / 10);
        absent = 1;
        goto fail_dl;
    }
    if (r != CUDA_SUCCESS) {
        const char *name = NULL;
        g_cuda.cuGetErrorName(r, &name);
        snprintf(g_why, sizeof(g_why), "cuInit(0) failed: %s (driver %d.%d, %s)",
                 name ? name : "unknown CUresult", ver / 1000, (ver % 1000) / 10, lib);
        goto fail_dl;
    }
    int n = 0;
    r = g_cuda.cuDeviceGetCount(&n);
    if (r != CUDA_SUCCESS || n <= 0) {
        snprintf(g_why, sizeof(g_why), "cuDeviceGetCount() reports no device (CUresult %d)", r);
        absent = 1;
        goto fail_dl;
    }
    g_cuda.device_count = n;
    install_fault_wraps();
    g_cuda_ok = &g_cuda;
    gw_log(GW_LOG_DEBUG, "CUDA driver %d.%d loaded from %s: %d device(s)", ver / 1000,
           (ver % 1000) / 10, lib, n);
    return;

fail_dl:
    dlclose(g_dl);
    g_dl = NULL;
fail:
    memset(&g_cuda, 0, sizeof(g_cuda));
    if (absent)
        gw_log(GW_LOG_INFO, "CUDA unavailable: %s", g_why);
    else
        gw_log(GW_LOG_WARN, "CUDA unusable: %s", g_why);
}

const gw_cuda_t *gw_cuda_get(char *why, size_t whylen)
{
    pthread_once(&g_once, load_once);
    if (!g_cuda_ok && why && whylen)
        snprintf(why, whylen, "%s", g_why);
    return g_cuda_ok;
}

CUcontext gw_cuda_ctx_for_device(int dev, char *why, size_t whylen)
{
    char eb[160];
    const gw_cuda_t *cu = gw_cuda_get(why, whylen);
    if (!cu)
        return NULL;
    if (dev < 0 || dev >= cu->device_count || dev >= GW_CUDA_MAX_DEVICES) {
        snprintf(why, whylen, "CUDA device ordinal %d out of range (0..%d)", dev,
                 cu->device_count - 1);
        return NULL;
    }
    pthread_mutex_lock(&g_ctx_lock);
    CUcontext ctx = g_ctx[dev];
    if (!ctx) {
        CUdevice d;
        CUresult r = cu->cuDeviceGet(&d, dev);
        if (r == CUDA_SUCCESS)
            r = cu->cuDevicePrimaryCtxRetain(&ctx, d);
        if (r != CUDA_SUCCESS) {
            pthread_mutex_unlock(&g_ctx_lock);
            snprintf(why, whylen, "cuDevicePrimaryCtxRetain(device=%d) failed: %s", dev,
                     gw_cuda_strerror(r, eb, sizeof(eb)));
            return NULL;
        }
        g_ctx[dev] = ctx;
    }
    pthread_mutex_unlock(&g_ctx_lock);
    CUcontext cur = NULL;
    cu->cuCtxGetCurrent(&cur);
    if (cur != ctx) {
        CUresult r = cu->cuCtxSetCurrent(ctx);
        if (r != CUDA_SUCCESS) {
            snprintf(why, whylen, "cuCtxSetCurrent(device=%d) failed: %s", dev,
                     gw_cuda_strerror(r, eb, sizeof(eb)));
            return NULL;
        }
    }
    return ctx;
}

int gw_cuda_copy_ctx_mode(void)
{
    int c = __atomic_load_n(&g_copy_choice, __ATOMIC_ACQUIRE);
    if (c >= 0)
        return c;
    const char *v = gw_settings_env(GW_SET_CUDA_COPY_CONTEXT);
    return v && strcmp(v, "own") == 0 ? GW_CUDA_COPY_OWN : GW_CUDA_COPY_PRIMARY;
}

void gw_cuda_copy_ctx_choose(int mode)
{
    __atomic_store_n(&g_copy_choice, mode == GW_CUDA_COPY_OWN ? GW_CUDA_COPY_OWN : GW_CUDA_COPY_PRIMARY,
                     __ATOMIC_RELEASE);
}

int gw_cuda_ctx_is_own(CUcontext ctx)
{
    if (!ctx)
        return 0;
    pthread_mutex_lock(&g_ctx_lock);
    int own = 0;
    for (int d = 0; d < GW_CUDA_MAX_DEVICES && !own; d++)
        own = g_own[d] == ctx;
    pthread_mutex_unlock(&g_ctx_lock);
    return own;
}

CUcontext gw_cuda_own_ctx_enter(int dev, CUcontext *saved, char *why, size_t whylen)
{
    char eb[160];
    const gw_cuda_t *cu = gw_cuda_get(why, whylen);
    *saved = NULL;
    if (!cu)
        return NULL;
    if (dev < 0 || dev >= cu->device_count || dev >= GW_CUDA_MAX_DEVICES) {
        snprintf(why, whylen, "CUDA device ordinal %d out of range (0..%d)", dev, cu->device_count - 1);
        return NULL;
    }
    if (!cu->cuCtxCreate || !cu->cuCtxPopCurrent) {
        snprintf(why, whylen, "the CUDA driver lacks cuCtxCreate/cuCtxPopCurrent");
        return NULL;
    }
    CUcontext prev = NULL;
    cu->cuCtxGetCurrent(&prev);
    pthread_mutex_lock(&g_ctx_lock);
    CUcontext ctx = g_own[dev];
    if (!ctx) {
        CUdevice d;
        CUresult r = cu->cuDeviceGet(&d, dev);
        if (r == CUDA_SUCCESS)
            r = cu->cuCtxCreate(&ctx, 0, d); /* pushed on this thread's stack: popped below */
        if (r != CUDA_SUCCESS) {
            pthread_mutex_unlock(&g_ctx_lock);
            snprintf(why, whylen, "cuCtxCreate(device=%d) for gpuwire's own copy context failed: %s", dev,
                     gw_cuda_strerror(r, eb, sizeof(eb)));
            return NULL;
        }
        CUcontext popped = NULL;
        cu->cuCtxPopCurrent(&popped);
        g_own[dev] = ctx;
        gw_log(GW_LOG_INFO, "cuda: device %d: gpuwire's own copy context %p created (GPUWIRE_CUDA_COPY_CONTEXT=own)",
               dev, (void *)ctx);
    }
    pthread_mutex_unlock(&g_ctx_lock);
    if (prev != ctx) {
        CUresult r = cu->cuCtxSetCurrent(ctx);
        if (r != CUDA_SUCCESS) {
            cu->cuCtxSetCurrent(prev);
            snprintf(why, whylen, "cuCtxSetCurrent(gpuwire's own context of device %d) failed: %s", dev,
                     gw_cuda_strerror(r, eb, sizeof(eb)));
            return NULL;
        }
    }
    *saved = prev;
    return ctx;
}

void gw_cuda_ctx_leave(CUcontext saved)
{
    const gw_cuda_t *cu = gw_cuda_get(NULL, 0);
    CUcontext cur = NULL;
    if (!cu)
        return;
    cu->cuCtxGetCurrent(&cur);
    if (cur != saved)
        cu->cuCtxSetCurrent(saved);
}

/* The bus ids of the first PCI_IDS ordinals, asked for once each: a
 * device's place on the bus does not change while the process runs, and
 * the paged transfers look their peer's GPU up by it every post (two
 * driver calls and a format per ordinal tried). */
#define PCI_IDS 64
static char pci_ids[PCI_IDS][16];
static int pci_have[PCI_IDS]; /* (1 once pci_ids[dev] is written: release/acquire) */
static pthread_mutex_t pci_lock = PTHREAD_MUTEX_INITIALIZER;

void gw_cuda_pci_bus_id(int dev, char *buf, size_t len)
{
    if (len == 0)
        return;
    buf[0] = '\0';
    int slot = dev >= 0 && dev < PCI_IDS;
    if (slot && __atomic_load_n(&pci_have[dev], __ATOMIC_ACQUIRE)) {
        size_t n = strlen(pci_ids[dev]);
        n = n < len ? n : len - 1;
        memcpy(buf, pci_ids[dev], n);
        buf[n] = '\0';
        return;
    }
    const gw_cuda_t *cu = gw_cuda_get(NULL, 0);
    char tmp[32] = "";
    CUdevice d;
    if (!cu || cu->cuDeviceGet(&d, dev) != CUDA_SUCCESS)
        return;
    if (cu->cuDeviceGetPCIBusId(tmp, (int)sizeof(tmp), d) != CUDA_SUCCESS)
        return;
    /* the driver writes "0000:3B:00.0"; sysfs spells hex in lower case */
    for (size_t i = 0; tmp[i]; i++)
        if (tmp[i] >= 'A' && tmp[i] <= 'F')
            tmp[i] = (char)(tmp[i] - 'A' + 'a');
    snprintf(buf, len, "%s", tmp);
    if (slot && strlen(tmp) < sizeof(pci_ids[0])) {
        pthread_mutex_lock(&pci_lock);
        if (!pci_have[dev]) {
            memcpy(pci_ids[dev], tmp, strlen(tmp) + 1);
            __atomic_store_n(&pci_have[dev], 1, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&pci_lock);
    }
}

gw_status_t gw_cuda_dmabuf_fd(const void *ptr, size_t len, int *fd, uint64_t *dmabuf_off, char *why,
                              size_t whylen)
{
    char eb[160];
    const gw_cuda_t *cu = gw_cuda_get(why, whylen);
    *fd = -1;
    *dmabuf_off = 0;
    if (!cu)
        return GW_ERR_UNAVAILABLE;
    if (!cu->cuMemGetHandleForAddressRange) {
        snprintf(why, whylen, "dma-buf: driver %d.%d lacks cuMemGetHandleForAddressRange (needs 11.7)",
                 cu->driver_version / 1000, (cu->driver_version % 1000) / 10);
        return GW_ERR_UNSUPPORTED;
    }
    int dev = -1;
    CUresult r = cu->cuPointerGetAttribute(&dev, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                           (CUdeviceptr)(uintptr_t)ptr);
    if (r != CUDA_SUCCESS) {
        snprintf(why, whylen, "dma-buf: cuPointerGetAttribute(%p, DEVICE_ORDINAL) failed: %s", ptr,
                 gw_cuda_strerror(r, eb, sizeof(eb)));
        return GW_ERR_CUDA;
    }
    CUdevice d;
    int supported = 0;
    if (cu->cuDeviceGet(&d, dev) == CUDA_SUCCESS)
        cu->cuDeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, d);
    if (!supported) {
        snprintf(why, whylen,
                 "dma-buf: CUDA device %d reports CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED=0 "
                 "(needs the open kernel module, or a kernel >= 5.12 with dma-buf support)",
                 dev);
        return GW_ERR_UNSUPPORTED;
    }
    if (!gw_cuda_ctx_for_device(dev, why, whylen))
        return GW_ERR_CUDA;
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t start = (uint64_t)(uintptr_t)ptr & ~(page - 1);
    uint64_t end = ((uint64_t)(uintptr_t)ptr + len + page - 1) & ~(page - 1);
    if (end == start)
        end = start + page;
    int h = -1;
    r = cu->cuMemGetHandleForAddressRange(&h, (CUdeviceptr)start, (size_t)(end - start),
                                          CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
    if (r != CUDA_SUCCESS) {
        snprintf(why, whylen,
                 "dma-buf: cuMemGetHandleForAddressRange(0x%llx, %llu bytes, DMA_BUF_FD) failed: %s",
                 (unsigned long long)start, (unsigned long long)(end - start),
                 gw_cuda_strerror(r, eb, sizeof(eb)));
        return r == CUDA_ERROR_NOT_SUPPORTED ? GW_ERR_UNSUPPORTED : GW_ERR_CUDA;
    }
    *fd = h;
    *dmabuf_off = (uint64_t)(uintptr_t)ptr - start;
    return GW_OK;
}

gw_status_t gw_cuda_flush_rdma_writes(int *fenced_by_flush)
{
    const gw_cuda_t *cu = gw_cuda_get(NULL, 0);
    *fenced_by_flush = 0;
    if (!cu || !cu->cuFlushGPUDirectRDMAWrites)
        return GW_OK;
    CUresult r = cu->cuFlushGPUDirectRDMAWrites(CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX,
                                                CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_ALL_DEVICES);
    if (r == CUDA_SUCCESS) {
        *fenced_by_flush = 1;
        return GW_OK;
    }
    if (r == CUDA_ERROR_INVALID_CONTEXT || r == CUDA_ERROR_NOT_SUPPORTED)
        return GW_OK; /* no current context / not needed: caller fences by reading */
    return GW_ERR_CUDA;
}
