/* SPDX-License-Identifier: Apache-2.0 */
/* fake_cuda.c - a stand-in for libcuda.so.1 so that CI, which has no GPU,
 * runs gpuwire's GPU code paths (memory detection, the staging engine, GPU
 * memory over tcp, CUDA IPC between processes).  Loaded with
 * GPUWIRE_CUDA_LIB=/path/libgwfakecuda.so.
 *
 * It is honest in the ways that catch bugs:
 *  - "device memory" is a memfd mapped twice: the address handed out is
 *    PROT_NONE, so a host access to it crashes exactly as it would on a GPU;
 *    only the fake's copy functions reach the bytes, through a second mapping.
 *  - asynchronous copies and events complete only after they were queried
 *    FAKECUDA_LAG times (default 2), so "not ready yet" paths run.
 *  - IPC handles name the exporting process's memfd; another process maps
 *    the same pages, as CUDA IPC maps the same device memory.
 *  - FAKECUDA_LEGACY_STREAM=busy: the legacy default stream (stream 0) is
 *    taken to be waiting on a kernel that waits on the caller, as PyTorch's
 *    default stream waits on a NCCL collective whose data the net plugin's
 *    proxy must deliver.  On a GPU an operation on that stream (cuMemcpy,
 *    cuMemcpyHtoD/DtoH, an async copy on stream 0, synchronizing stream 0
 *    or the context) then never returns; here it fails with
 *    CUDA_ERROR_LAUNCH_TIMEOUT and says so on stderr, so a library that
 *    queues work behind the application's kernels fails a test instead of
 *    hanging it.
 *  - contexts: each device's primary context, and contexts made with
 *    cuCtxCreate (one stack per thread, as in CUDA).  A stream or an event
 *    belongs to the context current when it was made; a copy on a stream of
 *    another context, or an event recorded on a stream of another one,
 *    fails, as on a GPU.  FAKECUDA_CTXLOG=path appends one line per
 *    asynchronous copy: "<call> primary|own <bytes>" (the current context).
 *  - VMM: cuMemCreate makes a memfd, cuMemMap maps it into a range from
 *    cuMemAddressReserve (device memory as above), POSIX-fd export and
 *    import pass the memfd; such memory refuses a legacy IPC handle
 *    (CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE is 0).
 *  - FAKECUDA_HELD=path: while that file exists, an application thread is
 *    taken to sit in a blocking copy in the primary context: an
 *    asynchronous copy (or stream creation) in a primary context, or one
 *    that touches cuMemAlloc memory in any context, is held by the driver's
 *    lock on a GPU until that copy ends (which waits on the caller): here it
 *    fails with CUDA_ERROR_LAUNCH_TIMEOUT and says so on stderr.  A copy in
 *    a context of its own between VMM mappings runs, as measured on H200s.
 * It models one or FAKECUDA_DEVICES devices, no real copy engines, no
 * timing: it says nothing about speed.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
enum { OK = 0, EINVAL_ = 1, ENOTINIT = 3, ENOMEM_ = 2, ENOTREADY = 600, ENOTSUP = 801, ENOTFOUND = 500,
       ELEGACY = 702 /* CUDA_ERROR_LAUNCH_TIMEOUT: see FAKECUDA_LEGACY_STREAM */ };

#define MAXA 4096
typedef struct alloc {
    uintptr_t dev;   /* PROT_NONE address handed out */
    uint8_t *host;   /* RW mapping of the same pages */
    size_t size;
    int fd, device, imported;
    struct vh *vmm;  /* a VMM mapping: the allocation handle mapped here */
    unsigned long long bufid; /* CU_POINTER_ATTRIBUTE_BUFFER_ID: unique in the process, never reused */
} alloc_t;
static unsigned long long g_bufid;
static alloc_t g_a[MAXA];
static int g_hi; /* slots at and above it were never used: lookups stop there */
static int g_inited, g_lag = -1, g_ndev = 1;
/* The multiprocessors of a fake GPU, and the blocks of 256 threads of the
 * fused page kernel one holds at once: a cooperative launch of more blocks
 * than FAKE_SMS * FAKE_BLOCKS_PER_SM is refused, as a GPU would. */
#define FAKE_SMS 2
#define FAKE_BLOCKS_PER_SM 8
static long g_serial;

static void init_env(void)
{
    if (g_lag < 0) {
        const char *l = getenv("FAKECUDA_LAG"), *d = getenv("FAKECUDA_DEVICES");
        g_lag = l ? atoi(l) : 2;
        g_ndev = d ? atoi(d) : 1;
        if (g_ndev < 1)
            g_ndev = 1;
    }
}

static alloc_t *find(uintptr_t p)
{
    int hi = __atomic_load_n(&g_hi, __ATOMIC_ACQUIRE);
    for (int i = 0; i < hi; i++)
        if (g_a[i].size && p >= g_a[i].dev && p < g_a[i].dev + g_a[i].size)
            return &g_a[i];
    return NULL;
}

/* host-visible address for p (device or host pointer) */
static uint8_t *hv(uintptr_t p, size_t n)
{
    alloc_t *a = find(p);
    if (!a)
        return (uint8_t *)p;
    if (p + n > a->dev + a->size)
        return NULL;
    return a->host + (p - a->dev);
}

/* FAKECUDA_LEGACY_STREAM=busy: nonzero (and a line on stderr) for an
 * operation that would queue behind the blocked legacy default stream. */
static int legacy_busy(const char *fn, const void *stream)
{
    if (stream)
        return 0;
    const char *l = getenv("FAKECUDA_LEGACY_STREAM");
    if (!l || strcmp(l, "busy") != 0)
        return 0;
    fprintf(stderr, "fakecuda: %s on the legacy default stream while it waits on a kernel "
            "(FAKECUDA_LEGACY_STREAM=busy): on a GPU this call never returns\n", fn);
    return 1;
}
#define LEGACY(fn, stream) do { if (legacy_busy(fn, stream)) return ELEGACY; } while (0)

static __thread int cur_dev; /* the current context is per thread, as in CUDA */

/* Calls counted per entry point, for tests that bound the driver calls a
 * transfer makes: fakecuda_calls("cuMemsetD32Async") (the test finds it with
 * dlsym in the loaded fake), or all of them: fakecuda_calls(NULL). */
static const char *const g_cnames[] = {
    "cuPointerGetAttributes", "cuPointerGetAttribute", "cuMemsetD32Async", "cuMemcpyDtoHAsync", "cuMemcpyHtoDAsync",
    "cuMemcpyAsync", "cuMemcpyPeerAsync", "cuLaunchKernel", "cuLaunchCooperativeKernel", "cuEventRecord",
    "cuStreamWaitEvent", "cuMemAlloc", "cuMemHostAlloc", "cuEventCreate", "cuStreamCreate", "cuStreamSynchronize",
    "cuMemcpyDtoH", "cuMemcpyHtoD",
};
#define NCNAMES (sizeof(g_cnames) / sizeof(g_cnames[0]))
static unsigned long g_calls[NCNAMES];
static void counted(const char *fn)
{
    for (size_t i = 0; i < NCNAMES; i++)
        if (!strcmp(g_cnames[i], fn)) {
            __atomic_add_fetch(&g_calls[i], 1, __ATOMIC_RELAXED);
            return;
        }
}
__attribute__((visibility("default"))) unsigned long fakecuda_calls(const char *fn)
{
    unsigned long n = 0;
    for (size_t i = 0; i < NCNAMES; i++)
        if (!fn || !strcmp(g_cnames[i], fn))
            n += __atomic_load_n(&g_calls[i], __ATOMIC_RELAXED);
    return n;
}

CUresult cuDriverGetVersion(int *v) { *v = 12040; return OK; }
static CUresult cuInit(unsigned f) { (void)f; init_env(); g_inited = 1; return OK; }
static CUresult cuDeviceGet(int *d, int o) { if (o < 0 || o >= g_ndev) return EINVAL_; *d = o; return OK; }
static CUresult cuDeviceGetCount(int *c) { if (!g_inited) return ENOTINIT; *c = g_ndev; return OK; }
static CUresult cuDeviceGetName(char *n, int len, int d) { snprintf(n, (size_t)len, "gpuwire fake GPU %d", d); return OK; }
static CUresult cuDeviceGetAttribute(int *v, int attr, int d)
{
    switch (attr) {
    case 33: *v = 0x90 + d; break;          /* PCI bus */
    case 34: *v = 0; break;                 /* PCI device */
    case 50: *v = 0; break;                 /* PCI domain */
    case 41: *v = 1; break;                 /* unified addressing */
    case 16: *v = FAKE_SMS; break;          /* multiprocessors */
    case 95: *v = 1; break;                 /* cooperative launch */
    case 102: *v = 0; break;                /* VMM: not modelled */
    case 124: *v = getenv("FAKECUDA_DMABUF") != NULL; break; /* dma-buf export (see below) */
    default: *v = 0; break;                 /* GPUDirect RDMA: no */
    }
    return OK;
}
static CUresult cuDeviceGetPCIBusId(char *b, int len, int d) { snprintf(b, (size_t)len, "0000:%02x:00.0", 0x90 + d); return OK; }
static CUresult cuDeviceCanAccessPeer(int *c, int a, int b) { *c = a != b; return OK; }
static CUresult cuDevicePrimaryCtxRetain(void **ctx, int d) { *ctx = (void *)(uintptr_t)(0x1000 + d); return OK; }
static CUresult cuDevicePrimaryCtxRelease(int d) { (void)d; return OK; }
/* contexts: 0x1000 + device (primary), 0x2000 + device (made by cuCtxCreate) */
static __thread int cur_own;
static __thread uintptr_t ctx_stack[8];
static __thread int ctx_depth;
static uintptr_t cur_ctx(void) { return (uintptr_t)((cur_own ? 0x2000 : 0x1000) + cur_dev); }
static void set_ctx(uintptr_t c) { cur_own = c >= 0x2000; cur_dev = (int)(c & 0xff); }
static CUresult cuCtxGetCurrent(void **c) { *c = (void *)cur_ctx(); return OK; }
static CUresult cuCtxSetCurrent(void *c) { if (c) set_ctx((uintptr_t)c); return OK; }
static CUresult cuCtxCreate(void **c, unsigned f, int d)
{
    (void)f;
    if (d < 0 || d >= g_ndev || ctx_depth == 8)
        return EINVAL_;
    ctx_stack[ctx_depth++] = cur_ctx();
    *c = (void *)(uintptr_t)(0x2000 + d);
    set_ctx(0x2000 + (uintptr_t)d);
    return OK;
}
static CUresult cuCtxPopCurrent(void **c)
{
    if (c)
        *c = (void *)cur_ctx();
    set_ctx(ctx_depth ? ctx_stack[--ctx_depth] : 0x1000 + (uintptr_t)cur_dev);
    return OK;
}
static CUresult cuCtxDestroy(void *c) { (void)c; return OK; }
static CUresult cuCtxGetDevice(int *d) { *d = cur_dev; return OK; }
static CUresult cuCtxEnablePeerAccess(void *p, unsigned f) { (void)p; (void)f; return OK; }
static CUresult cuCtxSynchronize(void) { LEGACY("cuCtxSynchronize", NULL); return OK; }
static CUresult cuGetErrorName(CUresult e, const char **s)
{
    *s = e == OK ? "CUDA_SUCCESS" : e == EINVAL_ ? "CUDA_ERROR_INVALID_VALUE" : e == ENOTREADY ? "CUDA_ERROR_NOT_READY"
       : e == ENOTSUP ? "CUDA_ERROR_NOT_SUPPORTED" : e == 700 ? "CUDA_ERROR_ILLEGAL_ADDRESS" : e == 719 ? "CUDA_ERROR_LAUNCH_FAILED" : e == ELEGACY ? "CUDA_ERROR_LAUNCH_TIMEOUT" : e == ENOMEM_ ? "CUDA_ERROR_OUT_OF_MEMORY" : "CUDA_ERROR_UNKNOWN";
    return OK;
}
static CUresult cuGetErrorString(CUresult e, const char **s) { *s = e == OK ? "no error" : "fake driver error"; return OK; }

static CUresult cuMemAlloc(CUdeviceptr *p, size_t n)
{
    counted("cuMemAlloc");
    if (!n)
        return EINVAL_;
    int i;
    for (i = 0; i < MAXA && g_a[i].size; i++)
        ;
    if (i == MAXA)
        return ENOMEM_;
    size_t sz = (n + 4095) & ~(size_t)4095;
    int fd = memfd_create("fakecuda", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)sz) != 0)
        return ENOMEM_;
    void *dev = mmap(NULL, sz, PROT_NONE, MAP_SHARED, fd, 0);
    void *host = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (dev == MAP_FAILED || host == MAP_FAILED) {
        close(fd);
        return ENOMEM_;
    }
    g_a[i] = (alloc_t){(uintptr_t)dev, host, sz, fd, cur_dev, 0, NULL, ++g_bufid};
    if (i + 1 > __atomic_load_n(&g_hi, __ATOMIC_RELAXED))
        __atomic_store_n(&g_hi, i + 1, __ATOMIC_RELEASE);
    *p = (CUdeviceptr)(uintptr_t)dev;
    return OK;
}

static CUresult cuMemFree(CUdeviceptr p)
{
    alloc_t *a = find((uintptr_t)p);
    if (!a || a->dev != (uintptr_t)p || a->vmm)
        return EINVAL_;
    munmap((void *)a->dev, a->size);
    munmap(a->host, a->size);
    if (a->fd >= 0)
        close(a->fd);
    memset(a, 0, sizeof(*a));
    return OK;
}

static CUresult cuMemGetAddressRange(CUdeviceptr *base, size_t *size, CUdeviceptr p)
{
    alloc_t *a = find((uintptr_t)p);
    if (!a)
        return EINVAL_;
    if (base) *base = a->dev;
    if (size) *size = a->size;
    return OK;
}

static CUresult get_attr(void *data, int attr, CUdeviceptr p)
{
    alloc_t *a = find((uintptr_t)p);
    switch (attr) {
    case 2: *(unsigned *)data = a ? 2u : 0u; return a ? OK : EINVAL_;   /* memory type */
    case 9: if (!a) return EINVAL_; *(int *)data = a->device; return OK;  /* ordinal */
    case 8: *(int *)data = 0; return OK;                                  /* managed */
    case 11: if (!a) return EINVAL_; *(CUdeviceptr *)data = a->dev; return OK;
    case 12: if (!a) return EINVAL_; *(size_t *)data = a->size; return OK;
    case 7: if (!a) return EINVAL_; *(unsigned long long *)data = a->bufid; return OK;
    case 10: if (!a) return EINVAL_; *(int *)data = a->vmm == NULL; return OK;
    default: return a ? OK : EINVAL_;
    }
}
static CUresult cuPointerGetAttribute(void *data, int attr, CUdeviceptr p) { counted("cuPointerGetAttribute"); return get_attr(data, attr, p); }
static CUresult cuPointerGetAttributes(unsigned n, int *attrs, void **data, CUdeviceptr p)
{
    counted("cuPointerGetAttributes");
    /* like the real driver: success, with memory type 0 for pointers it does not know */
    for (unsigned i = 0; i < n; i++)
        if (get_attr(data[i], attrs[i], p) != OK && attrs[i] != 2)
            memset(data[i], 0xff, sizeof(int));
    return OK;
}
static CUresult cuPointerSetAttribute(const void *v, int a, CUdeviceptr p) { (void)v; (void)a; return find((uintptr_t)p) ? OK : EINVAL_; }

/* FAKECUDA_LAUNCHES also logs pinned allocations ("cuMemHostAlloc <MiB>"):
 * tests bound how many buffers a transport keeps making */
static CUresult cuMemHostAlloc(void **p, size_t n, unsigned f)
{
    (void)f;
    counted("cuMemHostAlloc");
    const char *log = getenv("FAKECUDA_LAUNCHES");
    FILE *lf = log ? fopen(log, "a") : NULL;
    if (lf) {
        fprintf(lf, "cuMemHostAlloc %zu\n", n >> 20);
        fclose(lf);
    }
    return posix_memalign(p, 4096, n ? n : 1) ? ENOMEM_ : OK;
}
static CUresult cuMemFreeHost(void *p) { free(p); return OK; }
static CUresult cuMemHostRegister(void *p, size_t n, unsigned f) { (void)p; (void)n; (void)f; return OK; }
static CUresult cuMemHostUnregister(void *p) { (void)p; return OK; }

/* FAKECUDA_HELD: the named file exists (an application thread sits in a
 * blocking copy in the primary context) */
static int held_now(void)
{
    const char *h = getenv("FAKECUDA_HELD");
    return h && h[0] && access(h, F_OK) == 0;
}

/* A stream (or event) is the context it was made in. */
typedef struct fstream { uintptr_t ctx; } fstream_t;

/* The checks of an asynchronous copy on stream st: the stream is the
 * current context's; under FAKECUDA_HELD the copy is not one the driver
 * holds; the FAKECUDA_CTXLOG line. */
static CUresult ctx_check(const char *fn, void *st, uintptr_t d, uintptr_t s, size_t n)
{
    if (st && ((fstream_t *)st)->ctx != cur_ctx()) {
        fprintf(stderr, "fakecuda: %s on a stream of context 0x%lx while context 0x%lx is current\n", fn,
                (unsigned long)((fstream_t *)st)->ctx, (unsigned long)cur_ctx());
        return EINVAL_;
    }
    if (held_now()) {
        alloc_t *ad = find(d), *as = find(s);
        int legacy_mem = (ad && !ad->vmm) || (as && !as->vmm);
        if (!cur_own || legacy_mem) {
            fprintf(stderr, "fakecuda: %s in %s context%s while the application's blocking copy holds the primary "
                    "context (FAKECUDA_HELD): on a GPU this call waits for it\n", fn, cur_own ? "an own" : "the primary",
                    legacy_mem ? " on cuMemAlloc memory" : "");
            return ELEGACY;
        }
    }
    const char *log = getenv("FAKECUDA_CTXLOG");
    if (log && log[0]) {
        int fd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (fd >= 0) {
            dprintf(fd, "%s %s %zu\n", fn, cur_own ? "own" : "primary", n);
            close(fd);
        }
    }
    return OK;
}
#define CTXCHK(fn, st, d, s, n) do { CUresult r_ = ctx_check(fn, st, d, s, n); if (r_ != OK) return r_; } while (0)

static CUresult copy(uintptr_t dst, uintptr_t src, size_t n)
{
    if (!n)
        return OK;
    uint8_t *d = hv(dst, n), *s = hv(src, n);
    if (!d || !s)
        return EINVAL_;
    memmove(d, s, n);
    return OK;
}
static CUresult cuMemcpy(CUdeviceptr d, CUdeviceptr s, size_t n) { LEGACY("cuMemcpy", NULL); return copy(d, s, n); }
static CUresult cuMemcpyAsync(CUdeviceptr d, CUdeviceptr s, size_t n, void *st) { counted("cuMemcpyAsync"); LEGACY("cuMemcpyAsync", st); CTXCHK("cuMemcpyAsync", st, d, s, n); __atomic_add_fetch(&g_serial, 1, __ATOMIC_RELAXED); return copy(d, s, n); }
static CUresult cuMemcpyPeer(CUdeviceptr d, void *dc, CUdeviceptr s, void *sc, size_t n) { (void)dc; (void)sc; LEGACY("cuMemcpyPeer", NULL); return copy(d, s, n); }
static CUresult cuMemcpyPeerAsync(CUdeviceptr d, void *dc, CUdeviceptr s, void *sc, size_t n, void *st) { counted("cuMemcpyPeerAsync"); (void)dc; (void)sc; LEGACY("cuMemcpyPeerAsync", st); CTXCHK("cuMemcpyPeerAsync", st, d, s, n); __atomic_add_fetch(&g_serial, 1, __ATOMIC_RELAXED); return copy(d, s, n); }
static CUresult cuMemcpyHtoD(CUdeviceptr d, const void *s, size_t n) { counted("cuMemcpyHtoD"); LEGACY("cuMemcpyHtoD", NULL); return copy(d, (uintptr_t)s, n); }
static CUresult cuMemcpyDtoH(void *d, CUdeviceptr s, size_t n) { counted("cuMemcpyDtoH"); LEGACY("cuMemcpyDtoH", NULL); return copy((uintptr_t)d, s, n); }
static CUresult cuMemcpyHtoDAsync(CUdeviceptr d, const void *s, size_t n, void *st) { counted("cuMemcpyHtoDAsync"); LEGACY("cuMemcpyHtoDAsync", st); CTXCHK("cuMemcpyHtoDAsync", st, d, (uintptr_t)s, n); __atomic_add_fetch(&g_serial, 1, __ATOMIC_RELAXED); return copy(d, (uintptr_t)s, n); }
static CUresult cuMemcpyDtoHAsync(void *d, CUdeviceptr s, size_t n, void *st) { counted("cuMemcpyDtoHAsync"); LEGACY("cuMemcpyDtoHAsync", st); CTXCHK("cuMemcpyDtoHAsync", st, (uintptr_t)d, s, n); __atomic_add_fetch(&g_serial, 1, __ATOMIC_RELAXED); return copy((uintptr_t)d, s, n); }
static CUresult cuMemsetD8(CUdeviceptr p, unsigned char v, size_t n) { LEGACY("cuMemsetD8", NULL); uint8_t *d = hv(p, n); if (!d) return EINVAL_; memset(d, v, n); return OK; }

typedef struct fev { int queries; uintptr_t ctx; } fev_t;
static CUresult cuMemsetD32Async(CUdeviceptr p, unsigned v, size_t n, void *st)
{
    counted("cuMemsetD32Async");
    LEGACY("cuMemsetD32Async", st);
    uint32_t *d = (uint32_t *)hv(p, n * 4);
    if (!d || !find((uintptr_t)p)) /* (device memory only, as the driver) */
        return EINVAL_;
    for (size_t i = 0; i < n; i++)
        d[i] = v;
    __atomic_add_fetch(&g_serial, 1, __ATOMIC_RELAXED);
    return OK;
}
static CUresult cuStreamCreate(void **s, unsigned f)
{
    (void)f;
    counted("cuStreamCreate");
    if (held_now() && !cur_own) {
        fprintf(stderr, "fakecuda: cuStreamCreate in the primary context while the application's blocking copy "
                "holds it (FAKECUDA_HELD): on a GPU this call waits for it\n");
        return ELEGACY;
    }
    fstream_t *fs = malloc(sizeof(*fs));
    fs->ctx = cur_ctx();
    *s = fs;
    return OK;
}
static CUresult cuStreamDestroy(void *s) { free(s); return OK; }
static CUresult cuStreamSynchronize(void *s) { counted("cuStreamSynchronize"); LEGACY("cuStreamSynchronize", s); return OK; }
static CUresult cuStreamQuery(void *s) { (void)s; return OK; }
static CUresult cuStreamWaitEvent(void *s, void *e, unsigned f) { counted("cuStreamWaitEvent"); (void)s; (void)e; (void)f; return OK; }
/* FAKECUDA_LAUNCHES also logs event creations ("cuEventCreate 0"): tests
 * bound how many a transport makes for its copies */
static CUresult cuEventCreate(void **e, unsigned f)
{
    (void)f;
    counted("cuEventCreate");
    const char *log = getenv("FAKECUDA_LAUNCHES");
    FILE *lf = log ? fopen(log, "a") : NULL;
    if (lf) {
        fprintf(lf, "cuEventCreate 0\n");
        fclose(lf);
    }
    fev_t *v = calloc(1, sizeof(fev_t));
    v->ctx = cur_ctx();
    *e = v;
    return OK;
}
static CUresult cuEventDestroy(void *e) { free(e); return OK; }
static CUresult cuEventRecord(void *e, void *s)
{
    counted("cuEventRecord");
    if (s && ((fstream_t *)s)->ctx != ((fev_t *)e)->ctx) {
        fprintf(stderr, "fakecuda: cuEventRecord of an event of context 0x%lx on a stream of context 0x%lx\n",
                (unsigned long)((fev_t *)e)->ctx, (unsigned long)((fstream_t *)s)->ctx);
        return EINVAL_;
    }
    ((fev_t *)e)->queries = 0;
    return OK;
}
static CUresult cuEventQuery(void *e) { fev_t *f = e; return f->queries++ >= g_lag ? OK : ENOTREADY; }
static CUresult cuEventSynchronize(void *e) { ((fev_t *)e)->queries = g_lag; return OK; }
static CUresult cuEventElapsedTime(float *ms, void *a, void *b) { (void)a; (void)b; *ms = 0; return OK; }

/* VMM: an allocation handle is a memfd; mapping it at a reserved address
 * makes device memory as cuMemAlloc's (PROT_NONE there, a second mapping
 * for the fake's copies). */
typedef struct vh { int fd; size_t size; int device, refs; } vh_t;
typedef struct { int type, htypes; struct { int type, id; } loc; } fprop_t;
static void vh_put(vh_t *h)
{
    if (h && --h->refs == 0) {
        close(h->fd);
        free(h);
    }
}
static CUresult cuMemGetAllocationGranularity(size_t *g, const void *prop, int opt) { (void)prop; (void)opt; *g = 65536; return OK; }
static CUresult cuMemCreate(vh_t **h, size_t n, const fprop_t *prop, unsigned long long f)
{
    (void)f;
    if (!n || (n & 65535) || !prop || prop->loc.id < 0 || prop->loc.id >= g_ndev)
        return EINVAL_;
    int fd = memfd_create("fakecuda-vmm", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)n) != 0)
        return ENOMEM_;
    vh_t *v = calloc(1, sizeof(*v));
    *v = (vh_t){fd, n, prop->loc.id, 1};
    *h = v;
    return OK;
}
static CUresult cuMemRelease(vh_t *h) { if (!h) return EINVAL_; vh_put(h); return OK; }
static CUresult cuMemAddressReserve(CUdeviceptr *p, size_t n, size_t al, CUdeviceptr addr, unsigned long long f)
{
    (void)al; (void)addr; (void)f;
    void *v = mmap(NULL, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (v == MAP_FAILED)
        return ENOMEM_;
    *p = (CUdeviceptr)(uintptr_t)v;
    return OK;
}
static CUresult cuMemAddressFree(CUdeviceptr p, size_t n) { return munmap((void *)(uintptr_t)p, n) ? EINVAL_ : OK; }
static CUresult cuMemMap(CUdeviceptr p, size_t n, size_t off, vh_t *h, unsigned long long f)
{
    (void)f;
    if (!h || off + n > h->size)
        return EINVAL_;
    int i;
    for (i = 0; i < MAXA && g_a[i].size; i++)
        ;
    if (i == MAXA)
        return ENOMEM_;
    void *dv = mmap((void *)(uintptr_t)p, n, PROT_NONE, MAP_SHARED | MAP_FIXED, h->fd, (off_t)off);
    void *host = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, h->fd, (off_t)off);
    if (dv == MAP_FAILED || host == MAP_FAILED)
        return ENOMEM_;
    h->refs++;
    g_a[i] = (alloc_t){(uintptr_t)dv, host, n, -1, h->device, 0, h, ++g_bufid};
    if (i + 1 > __atomic_load_n(&g_hi, __ATOMIC_RELAXED))
        __atomic_store_n(&g_hi, i + 1, __ATOMIC_RELEASE);
    return OK;
}
static CUresult cuMemUnmap(CUdeviceptr p, size_t n)
{
    uintptr_t end = (uintptr_t)p + n;
    for (int i = 0; i < MAXA; i++) {
        alloc_t *a = &g_a[i];
        if (!a->size || !a->vmm || a->dev < (uintptr_t)p || a->dev >= end)
            continue;
        munmap(a->host, a->size);
        /* the range stays reserved */
        mmap((void *)a->dev, a->size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
        vh_put(a->vmm);
        memset(a, 0, sizeof(*a));
    }
    return OK;
}
static CUresult cuMemSetAccess(CUdeviceptr p, size_t n, const void *d, size_t c) { (void)d; (void)c; return find((uintptr_t)p) && find((uintptr_t)p + n - 1) ? OK : EINVAL_; }
static CUresult cuMemRetainAllocationHandle(vh_t **h, void *addr)
{
    alloc_t *a = find((uintptr_t)addr);
    if (!a || !a->vmm)
        return EINVAL_;
    a->vmm->refs++;
    *h = a->vmm;
    return OK;
}
static CUresult cuMemExportToShareableHandle(void *out, vh_t *h, int type, unsigned long long f)
{
    (void)f;
    if (!h || type != 1)
        return ENOTSUP;
    int fd = dup(h->fd);
    if (fd < 0)
        return ENOMEM_;
    *(int *)out = fd;
    return OK;
}
static CUresult cuMemImportFromShareableHandle(vh_t **h, void *os, int type)
{
    struct stat sb;
    int fd = (int)(intptr_t)os;
    if (type != 1 || fstat(fd, &sb) != 0)
        return EINVAL_;
    int nfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (nfd < 0)
        return ENOMEM_;
    vh_t *v = calloc(1, sizeof(*v));
    *v = (vh_t){nfd, (size_t)sb.st_size, 0, 1};
    *h = v;
    return OK;
}

/* IPC: the handle names the exporter's memfd through /proc */
typedef struct { char reserved[64]; } ipch_t;
static CUresult cuIpcGetMemHandle(ipch_t *h, CUdeviceptr p)
{
    alloc_t *a = find((uintptr_t)p);
    if (!a || a->dev != (uintptr_t)p || a->vmm)
        return EINVAL_;
    memset(h, 0, sizeof(*h));
    snprintf(h->reserved, sizeof(h->reserved), "fakecuda %d %d %zu %d", (int)getpid(), a->fd, a->size, a->device);
    return OK;
}
static CUresult cuIpcOpenMemHandle(CUdeviceptr *p, ipch_t h, unsigned f)
{
    (void)f;
    int pid, fd, dev;
    size_t size;
    if (sscanf(h.reserved, "fakecuda %d %d %zu %d", &pid, &fd, &size, &dev) != 4)
        return EINVAL_;
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
    int nfd = open(path, O_RDWR | O_CLOEXEC);
    if (nfd < 0)
        return EINVAL_;
    int i;
    for (i = 0; i < MAXA && g_a[i].size; i++)
        ;
    void *dv = mmap(NULL, size, PROT_NONE, MAP_SHARED, nfd, 0);
    void *host = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, nfd, 0);
    if (i == MAXA || dv == MAP_FAILED || host == MAP_FAILED) {
        close(nfd);
        return ENOMEM_;
    }
    g_a[i] = (alloc_t){(uintptr_t)dv, host, size, nfd, dev, 1, NULL, ++g_bufid};
    if (i + 1 > __atomic_load_n(&g_hi, __ATOMIC_RELAXED))
        __atomic_store_n(&g_hi, i + 1, __ATOMIC_RELEASE);
    *p = (CUdeviceptr)(uintptr_t)dv;
    return OK;
}
static CUresult cuIpcCloseMemHandle(CUdeviceptr p) { return cuMemFree(p); }

/* With FAKECUDA_DMABUF set, "exports" a range as a dup of its memfd: not a
 * real dma-buf, but enough to reach the NIC's own verdict (Soft-RoCE refuses
 * every dma-buf registration with EOPNOTSUPP before looking at the fd). */
static CUresult cuMemGetHandleForAddressRange(void *h, CUdeviceptr p, size_t n, int t, unsigned long long f)
{
    (void)f;
    alloc_t *a = find((uintptr_t)p);
    if (!getenv("FAKECUDA_DMABUF") || t != 1 || !a || (uintptr_t)p + n > a->dev + a->size)
        return ENOTSUP;
    int fd = dup(a->fd);
    if (fd < 0)
        return ENOMEM_;
    *(int *)h = fd;
    return OK;
}

/* The batched copy kernels (src/cuda/copy_kernel.cu): a module whose image
 * names gw_batch_copy (and gw_page_copy, gw_list_copy, gw_table_copy,
 * gw_page_check, gw_page_fused, gw_page_rcheck) loads (unless FAKECUDA_NO_MODULE is
 * set); a launch does the copies at once, reading the descriptors, or the
 * page index arrays, where the GPU would (host or fake device memory).
 * FAKECUDA_LAUNCHES, when set, names a file that gets one line per launch
 * (tests check which kernel ran, over how many descriptors or pages), and
 * for the index kernels (page, list, table) where their two index arrays
 * lie: "kidx_dev k" and "kidx_host k", k of them in device / host memory. */
#define FN_BATCH ((void *)(uintptr_t)0x46554e)
#define FN_PAGE ((void *)(uintptr_t)0x504147)
#define FN_LIST ((void *)(uintptr_t)0x4c4953)
#define FN_TABLE ((void *)(uintptr_t)0x544142)
#define FN_PCHECK ((void *)(uintptr_t)0x50434b)
#define FN_PFUSED ((void *)(uintptr_t)0x504655)
#define FN_PRCHECK ((void *)(uintptr_t)0x505243)
/* The CRC32C kernel (src/cuda/crc_kernel.cu), a module of its own: a launch
 * takes the CRC32C of each (address, length) descriptor where the GPU would
 * read it, with a table of this file (not the library's), and writes the
 * results where the kernel would. */
#define FN_CRC ((void *)(uintptr_t)0x435243)
#define MOD_CRC ((void *)(uintptr_t)0x4d4f45)
static uint32_t fake_crc32c(const uint8_t *p, size_t n)
{
    static uint32_t t[256];
    if (!t[1])
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++)
                c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
            t[i] = c;
        }
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++)
        c = (c >> 8) ^ t[(c ^ p[i]) & 0xff];
    return ~c;
}
static CUresult crc_entries(void **params, unsigned *n_out)
{
    unsigned n = *(const unsigned *)params[2];
    const uint64_t *d = (const uint64_t *)hv(*(const uintptr_t *)params[0], (size_t)n * 16);
    uint32_t *out = (uint32_t *)hv(*(const uintptr_t *)params[1], (size_t)n * 4);
    if (!d || !out)
        return EINVAL_;
    for (unsigned i = 0; i < n; i++) {
        const uint8_t *p = hv((uintptr_t)d[2 * i], (size_t)d[2 * i + 1]);
        if (!p)
            return EINVAL_;
        out[i] = fake_crc32c(p, (size_t)d[2 * i + 1]);
    }
    *n_out = n;
    return OK;
}

static CUresult cuModuleLoadData(void **m, const void *image)
{
    if (getenv("FAKECUDA_NO_MODULE"))
        return EINVAL_;
    if (strstr((const char *)image, "gw_crc32c_entries")) {
        *m = MOD_CRC;
        return OK;
    }
    if (!strstr((const char *)image, "gw_batch_copy"))
        return EINVAL_;
    *m = (void *)(uintptr_t)0x4d4f44;
    return OK;
}
static CUresult cuModuleGetFunction(void **f, void *m, const char *name)
{
    if (m == MOD_CRC) {
        if (strcmp(name, "gw_crc32c_entries"))
            return ENOTFOUND;
        *f = FN_CRC;
        return OK;
    }
    if (m != (void *)(uintptr_t)0x4d4f44)
        return EINVAL_;
    if (!strcmp(name, "gw_batch_copy"))
        *f = FN_BATCH;
    else if (!strcmp(name, "gw_page_copy"))
        *f = FN_PAGE;
    else if (!strcmp(name, "gw_list_copy"))
        *f = FN_LIST;
    else if (!strcmp(name, "gw_table_copy"))
        *f = FN_TABLE;
    else if (!strcmp(name, "gw_page_check"))
        *f = FN_PCHECK;
    else if (!strcmp(name, "gw_page_fused"))
        *f = FN_PFUSED;
    else if (!strcmp(name, "gw_page_rcheck"))
        *f = FN_PRCHECK;
    else
        return EINVAL_;
    return OK;
}

/* The outcome of a bounds word for generation gbase (copy_kernel.cu): the
 * bad entry's (i << 1 | side) when the word holds a value of this
 * generation, else all ones. */
static uint64_t outcome(uint64_t v, uint64_t gbase)
{
    return v >= gbase && v - gbase < (1ull << 33) ? v - gbase : UINT64_MAX;
}

/* gw_page_copy's semantics: item w (of nitems = pages x chunks) copies piece
 * w % chunks (at most `chunk` bytes) of page p = w / chunks from
 * sbase + sidx[p] * psize to dbase + didx[p] * psize; NULL index arrays
 * read as p.  A group of g threads per item, g a power of two from 32 to the
 * block's size, and `per` items per block and round (a multiple of the
 * block's groups, at most 64), as the kernel requires.  params[10], the
 * gate (fake device memory, or NULL), for generation params[11]: when it
 * holds a bad entry of that generation nothing is copied; params[12] (host
 * memory, or NULL) gets the outcome. */
static CUresult page_copy(void **params, unsigned bx, int nocopy, unsigned *npages)
{
    uintptr_t gate = *(const uintptr_t *)params[10];
    if (gate) {
        const uint64_t *gw = (const uint64_t *)hv(gate, 8);
        uintptr_t out = *(const uintptr_t *)params[12];
        if (!gw || !find(gate) || (out && find(out)))
            return EINVAL_;
        uint64_t o = outcome(*gw, *(const unsigned long long *)params[11]);
        if (out)
            *(uint64_t *)out = o;
        if (o != UINT64_MAX)
            nocopy = 1;
    }
    uintptr_t sidx = *(const uintptr_t *)params[0], didx = *(const uintptr_t *)params[1];
    unsigned long long nitems = *(const unsigned long long *)params[2];
    unsigned chunks = *(const unsigned *)params[3];
    unsigned long long sbase = *(const unsigned long long *)params[4], dbase = *(const unsigned long long *)params[5];
    unsigned long long psize = *(const unsigned long long *)params[6], chunk = *(const unsigned long long *)params[7];
    unsigned g = *(const unsigned *)params[8], per = *(const unsigned *)params[9];
    if (!chunks || !chunk || !psize || nitems % chunks || (unsigned long long)chunks * chunk < psize ||
        (unsigned long long)(chunks - 1) * chunk >= psize || g < 32 || g > bx || (g & (g - 1)) || bx % g ||
        per < bx / g || per > 64 || per % (bx / g))
        return EINVAL_;
    unsigned long long n = nitems / chunks;
    const uint32_t *si = sidx ? (const uint32_t *)hv(sidx, (size_t)n * 4) : NULL;
    const uint32_t *di = didx ? (const uint32_t *)hv(didx, (size_t)n * 4) : NULL;
    if ((sidx && !si) || (didx && !di))
        return EINVAL_;
    *npages = (unsigned)n;
    for (unsigned long long w = 0; w < nitems && !nocopy; w++) {
        unsigned long long p = w / chunks, off = (w % chunks) * chunk, len = psize - off < chunk ? psize - off : chunk;
        unsigned long long s = sbase + (si ? si[p] : p) * psize + off, d = dbase + (di ? di[p] : p) * psize + off;
        CUresult r = copy((uintptr_t)d, (uintptr_t)s, (size_t)len);
        if (r != OK)
            return r;
    }
    return OK;
}

/* gw_page_check's semantics: entry i is bad when lidx[i] lies outside
 * [llo, lhi] or ridx[i] outside [rlo, rhi] (NULL arrays unchecked); the
 * word (fake device memory) takes the least (i << 1 | side) of the bad
 * ones, side 0 local, 1 remote, as atomicMin would (FAKECUDA_KERNEL_NOCOPY:
 * no scan, the word stays clear). */
static CUresult check_entries(uintptr_t lidx, uintptr_t ridx, unsigned long long n, unsigned llo, unsigned lhi,
                              unsigned rlo, unsigned rhi, uintptr_t word, uint64_t gbase, int nocopy);
static CUresult page_check(void **params, int nocopy, unsigned *n_out)
{
    unsigned long long n = *(const unsigned long long *)params[2];
    CUresult r = check_entries(*(const uintptr_t *)params[0], *(const uintptr_t *)params[1], n,
                               *(const unsigned *)params[3], *(const unsigned *)params[4], *(const unsigned *)params[5],
                               *(const unsigned *)params[6], *(const uintptr_t *)params[7],
                               *(const unsigned long long *)params[8], nocopy);
    *n_out = (unsigned)n;
    return r;
}
static CUresult check_entries(uintptr_t lidx, uintptr_t ridx, unsigned long long n, unsigned llo, unsigned lhi,
                              unsigned rlo, unsigned rhi, uintptr_t word, uint64_t gbase, int nocopy)
{
    const uint32_t *li = lidx ? (const uint32_t *)hv(lidx, (size_t)n * 4) : NULL;
    const uint32_t *ri = ridx ? (const uint32_t *)hv(ridx, (size_t)n * 4) : NULL;
    uint64_t *w = (uint64_t *)hv(word, 8);
    if ((lidx && !li) || (ridx && !ri) || !w || !find(word))
        return EINVAL_;
    for (unsigned long long i = 0; i < n && !nocopy; i++) { /* (nocopy: the GPU's work is not the host's) */
        uint64_t bad = UINT64_MAX;
        if (li && (li[i] < llo || li[i] > lhi))
            bad = gbase | i << 1;
        else if (ri && (ri[i] < rlo || ri[i] > rhi))
            bad = gbase | (i << 1) | 1;
        if (bad < *w)
            *w = bad;
    }
    return OK;
}

/* gw_page_fused's semantics: the check of gw_page_check over sidx/didx (the
 * local side's array is didx when params[11], get, is set) into the word,
 * then the grid barrier: the counter params[18] (fake device memory) grows
 * by the launch's blocks and must then equal the target params[19] exactly
 * (fewer: the GPU's blocks would wait forever; more: they would pass before
 * the others checked), then the outcome for generation params[17] into
 * params[20] (host memory), then gw_page_copy's copies unless it names a
 * bad entry. */
static CUresult page_fused(void **params, unsigned gx, unsigned bx, int nocopy, unsigned *npages)
{
    uintptr_t sidx = *(const uintptr_t *)params[0], didx = *(const uintptr_t *)params[1];
    unsigned long long n = *(const unsigned long long *)params[10];
    unsigned get = *(const unsigned *)params[11];
    uintptr_t word = *(const uintptr_t *)params[16], bar = *(const uintptr_t *)params[18];
    uint64_t gbase = *(const unsigned long long *)params[17], target = *(const unsigned long long *)params[19];
    uintptr_t out = *(const uintptr_t *)params[20];
    uint64_t *bw = (uint64_t *)hv(bar, 8);
    if (!bw || !find(bar) || !out || find(out) || (gbase & ((1ull << 33) - 1)))
        return EINVAL_;
    CUresult r = check_entries(get ? didx : sidx, get ? sidx : didx, n, *(const unsigned *)params[12],
                               *(const unsigned *)params[13], *(const unsigned *)params[14],
                               *(const unsigned *)params[15], word, gbase, nocopy);
    if (r != OK)
        return r;
    *bw += gx;
    if (*bw != target) {
        fprintf(stderr, "fakecuda: gw_page_fused's barrier counter reached %llu, the target is %llu: on a GPU the "
                "blocks would %s\n", (unsigned long long)*bw, (unsigned long long)target,
                *bw < target ? "wait forever" : "pass it before every block checked");
        return EINVAL_;
    }
    uint64_t o = outcome(*(const uint64_t *)hv(word, 8), gbase);
    *(uint64_t *)out = o;
    /* the copies: gw_page_copy's parameters (no gate) */
    uintptr_t nogate = 0;
    void *cp[13] = {params[0], params[1], params[2], params[3], params[4], params[5], params[6], params[7],
                    params[8], params[9], &nogate, params[17], &nogate};
    return page_copy(cp, bx, nocopy || o != UINT64_MAX, npages);
}

/* gw_page_rcheck's semantics: every entry checked (gw_page_check's rules,
 * the local side's array didx when params[11], get, is set), the outcome
 * ((i << 1 | side) of the first bad entry or all ones) into params[16]
 * (host memory), then gw_page_copy's copies unless it names a bad entry. */
static CUresult page_rcheck(void **params, unsigned bx, int nocopy, unsigned *npages)
{
    uintptr_t sidx = *(const uintptr_t *)params[0], didx = *(const uintptr_t *)params[1];
    unsigned long long n = *(const unsigned long long *)params[10];
    unsigned get = *(const unsigned *)params[11];
    unsigned llo = *(const unsigned *)params[12], lhi = *(const unsigned *)params[13];
    unsigned rlo = *(const unsigned *)params[14], rhi = *(const unsigned *)params[15];
    uintptr_t out = *(const uintptr_t *)params[16], lidx = get ? didx : sidx, ridx = get ? sidx : didx;
    const uint32_t *li = lidx ? (const uint32_t *)hv(lidx, (size_t)n * 4) : NULL;
    const uint32_t *ri = ridx ? (const uint32_t *)hv(ridx, (size_t)n * 4) : NULL;
    if ((lidx && !li) || (ridx && !ri) || !out || find(out))
        return EINVAL_;
    uint64_t o = UINT64_MAX;
    for (unsigned long long i = 0; i < n && o == UINT64_MAX && !nocopy; i++) {
        if (li && (li[i] < llo || li[i] > lhi))
            o = i << 1;
        else if (ri && (ri[i] < rlo || ri[i] > rhi))
            o = (i << 1) | 1;
    }
    *(uint64_t *)out = o;
    uintptr_t nogate = 0;
    unsigned long long gb = 0;
    void *cp[13] = {params[0], params[1], params[2], params[3], params[4], params[5], params[6], params[7],
                    params[8], params[9], &nogate, &gb, &nogate};
    return page_copy(cp, bx, nocopy || o != UINT64_MAX, npages);
}

/* gw_list_copy's semantics: entry i copies stab[si].len bytes from
 * stab[si].addr + sdelta to dtab[di].addr + ddelta, si = sidx[i] and di =
 * didx[i] (NULL arrays read as i); tables of {u64 addr, u64 len}.  The
 * kernel reads no bounds: an index past a table is the host's bug, so the
 * fake refuses a launch whose entries are longer than a kernel item may be
 * (64 KiB) or whose lengths differ from the destination table's.  Geometry
 * as page_copy's. */
static CUresult list_copy(void **params, unsigned bx, int nocopy, unsigned *nents)
{
    uintptr_t sidx = *(const uintptr_t *)params[0], didx = *(const uintptr_t *)params[1];
    uintptr_t stab = *(const uintptr_t *)params[2], dtab = *(const uintptr_t *)params[3];
    unsigned long long n = *(const unsigned long long *)params[4];
    unsigned long long sdelta = *(const unsigned long long *)params[5], ddelta = *(const unsigned long long *)params[6];
    unsigned g = *(const unsigned *)params[7], per = *(const unsigned *)params[8];
    if (!n || !stab || !dtab || g < 32 || g > bx || (g & (g - 1)) || bx % g || per < bx / g || per > 64 ||
        per % (bx / g))
        return EINVAL_;
    const uint32_t *si = sidx ? (const uint32_t *)hv(sidx, (size_t)n * 4) : NULL;
    const uint32_t *di = didx ? (const uint32_t *)hv(didx, (size_t)n * 4) : NULL;
    if ((sidx && !si) || (didx && !di))
        return EINVAL_;
    *nents = (unsigned)n;
    for (unsigned long long i = 0; i < n; i++) {
        unsigned long long a = si ? si[i] : i, b = di ? di[i] : i;
        const uint64_t *se = (const uint64_t *)hv(stab + (uintptr_t)a * 16, 16);
        const uint64_t *de = (const uint64_t *)hv(dtab + (uintptr_t)b * 16, 16);
        if (!se || !de || se[1] != de[1] || se[1] >= (64u << 10))
            return EINVAL_;
        if (nocopy || !se[1])
            continue;
        CUresult r = copy((uintptr_t)(de[0] + ddelta), (uintptr_t)(se[0] + sdelta), (size_t)se[1]);
        if (r != OK)
            return r;
    }
    return OK;
}

/* gw_table_copy's semantics: item w (of nitems = entries x chunks) copies
 * piece w % chunks (at most `chunk` bytes) of entry e = w / chunks, si =
 * sidx[e], di = didx[e] (NULL arrays read as e).  A side with a table reads
 * {u64 addr, u64 len} entry si (di) there, plus its delta; a side without
 * one is computed: its bases array (u64, where the GPU would read it) holds
 * region r = si / sper, the entry at base[r] + (si % sper) * clen, plus its
 * delta.  The length: the source table's, else the destination table's,
 * else clen.  Refused (as the host's bug): a computed side with no bases or
 * no blocks per region, tables whose lengths differ, an entry longer than
 * its chunks cover, geometry as page_copy's. */
static CUresult table_copy(void **params, unsigned bx, int nocopy, unsigned *nents)
{
    uintptr_t sidx = *(const uintptr_t *)params[0], didx = *(const uintptr_t *)params[1];
    uintptr_t stab = *(const uintptr_t *)params[2], dtab = *(const uintptr_t *)params[3];
    uintptr_t sbase = *(const uintptr_t *)params[4], dbase = *(const uintptr_t *)params[5];
    unsigned sper = *(const unsigned *)params[6], dper = *(const unsigned *)params[7];
    unsigned long long clen = *(const unsigned long long *)params[8];
    unsigned long long sdelta = *(const unsigned long long *)params[9], ddelta = *(const unsigned long long *)params[10];
    unsigned long long nitems = *(const unsigned long long *)params[11];
    unsigned chunks = *(const unsigned *)params[12];
    unsigned long long chunk = *(const unsigned long long *)params[13];
    unsigned g = *(const unsigned *)params[14], per = *(const unsigned *)params[15];
    if (!nitems || !chunks || !chunk || nitems % chunks || (!stab && (!sbase || !sper)) ||
        (!dtab && (!dbase || !dper)) || g < 32 || g > bx || (g & (g - 1)) || bx % g || per < bx / g || per > 64 ||
        per % (bx / g))
        return EINVAL_;
    unsigned long long n = nitems / chunks;
    const uint32_t *si = sidx ? (const uint32_t *)hv(sidx, (size_t)n * 4) : NULL;
    const uint32_t *di = didx ? (const uint32_t *)hv(didx, (size_t)n * 4) : NULL;
    if ((sidx && !si) || (didx && !di))
        return EINVAL_;
    *nents = (unsigned)n;
    for (unsigned long long e = 0; e < n && !nocopy; e++) { /* (nocopy: not even the fake's address lookups) */
        unsigned long long a = si ? si[e] : e, b = di ? di[e] : e, s, d, len = clen;
        if (stab) {
            const uint64_t *se = (const uint64_t *)hv(stab + (uintptr_t)a * 16, 16);
            if (!se)
                return EINVAL_;
            s = se[0];
            len = se[1];
        } else {
            const uint64_t *rb = (const uint64_t *)hv(sbase + (uintptr_t)(a / sper) * 8, 8);
            if (!rb)
                return EINVAL_;
            s = *rb + (a % sper) * clen;
        }
        if (dtab) {
            const uint64_t *de = (const uint64_t *)hv(dtab + (uintptr_t)b * 16, 16);
            if (!de || (stab && de[1] != len))
                return EINVAL_;
            d = de[0];
            len = de[1];
        } else {
            const uint64_t *rb = (const uint64_t *)hv(dbase + (uintptr_t)(b / dper) * 8, 8);
            if (!rb)
                return EINVAL_;
            d = *rb + (b % dper) * clen;
        }
        if (len > chunks * chunk)
            return EINVAL_;
        if (!len)
            continue;
        CUresult r = copy((uintptr_t)(d + ddelta), (uintptr_t)(s + sdelta), (size_t)len);
        if (r != OK)
            return r;
    }
    return OK;
}

static CUresult launch(void *f, unsigned gx, unsigned bx, void **params, int coop)
{
    if (held_now() && !cur_own) {
        fprintf(stderr, "fakecuda: cuLaunchKernel in the primary context while the application's blocking copy "
                "holds it (FAKECUDA_HELD): on a GPU this call waits for it\n");
        return ELEGACY;
    }
    if ((f != FN_BATCH && f != FN_PAGE && f != FN_LIST && f != FN_TABLE && f != FN_CRC && f != FN_PCHECK &&
         f != FN_PFUSED && f != FN_PRCHECK) || !params)
        return EINVAL_;
    if ((f == FN_PFUSED) != coop) {
        fprintf(stderr, "fakecuda: %s launched %s: the fused page kernel's grid barrier needs a cooperative launch "
                "(and only it takes one here)\n", f == FN_PFUSED ? "gw_page_fused" : "a kernel",
                coop ? "cooperatively" : "by cuLaunchKernel");
        return EINVAL_;
    }
    /* FAKECUDA_KERNEL_NOCOPY: the launch moves nothing, for profiling the
     * host side of a batch without the fake's memcpy in the samples */
    static int nocopy = -1;
    if (nocopy < 0)
        nocopy = getenv("FAKECUDA_KERNEL_NOCOPY") != NULL;
    unsigned n = 0;
    if (f == FN_CRC || f == FN_PCHECK) {
        CUresult r = f == FN_CRC ? crc_entries(params, &n) : page_check(params, nocopy, &n);
        if (r != OK)
            return r;
    } else if (f == FN_PFUSED) {
        CUresult r = page_fused(params, gx, bx, nocopy, &n);
        if (r != OK)
            return r;
    } else if (f == FN_PRCHECK) {
        CUresult r = page_rcheck(params, bx, nocopy, &n);
        if (r != OK)
            return r;
    } else if (f == FN_PAGE || f == FN_LIST || f == FN_TABLE) {
        CUresult r = f == FN_PAGE   ? page_copy(params, bx, nocopy, &n)
                     : f == FN_LIST ? list_copy(params, bx, nocopy, &n)
                                    : table_copy(params, bx, nocopy, &n);
        if (r != OK)
            return r;
    } else {
        n = *(const unsigned *)params[1];
        /* the descriptors may be in (fake) device memory, as the GPU would read them */
        const uint64_t *d = (const uint64_t *)hv(*(const uintptr_t *)params[0], (size_t)n * 24);
        if (!d)
            return EINVAL_;
        for (unsigned i = 0; i < n && !nocopy; i++) {
            CUresult r = copy((uintptr_t)d[3 * i + 1], (uintptr_t)d[3 * i], (size_t)d[3 * i + 2]);
            if (r != OK)
                return r;
        }
    }
    const char *log = getenv("FAKECUDA_LAUNCHES");
    FILE *lf = log ? fopen(log, "a") : NULL;
    if (lf) {
        fprintf(lf, "%s %u\n", f == FN_CRC ? "gw_crc32c_entries" : f == FN_PCHECK ? "gw_page_check" : f == FN_PAGE ? "gw_page_copy" : f == FN_PFUSED ? "gw_page_fused" : f == FN_PRCHECK ? "gw_page_rcheck" : f == FN_LIST ? "gw_list_copy" : f == FN_TABLE ? "gw_table_copy" : "gw_batch_copy", n);
        if (f == FN_PAGE || f == FN_LIST || f == FN_TABLE || f == FN_PCHECK || f == FN_PFUSED || f == FN_PRCHECK) {
            /* where the kernel's index arrays lie: "kidx_dev k" / "kidx_host k",
             * k of the two in (fake) device memory / in host memory */
            unsigned kd = 0, kh = 0;
            for (int i = 0; i < 2; i++) {
                uintptr_t x = *(const uintptr_t *)params[i];
                kd += x && find(x) != NULL;
                kh += x && find(x) == NULL;
            }
            fprintf(lf, "kidx_dev %u\nkidx_host %u\n", kd, kh);
        }
        fclose(lf);
    }
    __atomic_add_fetch(&g_serial, 1, __ATOMIC_RELAXED);
    return OK;
}

static CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                               unsigned bz, unsigned sh, void *st, void **params, void **extra)
{
    (void)gy; (void)gz; (void)by; (void)bz; (void)sh; (void)st; (void)extra;
    counted("cuLaunchKernel");
    return launch(f, gx, bx, params, 0);
}
/* FAKECUDA_COOP=refuse: every cooperative launch fails with
 * CUDA_ERROR_NOT_SUPPORTED (a setup that takes none, as under some MPS
 * configurations); =absent: the driver has no cuLaunchCooperativeKernel. */
static CUresult cuLaunchCooperativeKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                          unsigned bz, unsigned sh, void *st, void **params)
{
    (void)gy; (void)gz; (void)by; (void)bz; (void)sh; (void)st;
    counted("cuLaunchCooperativeKernel");
    const char *c = getenv("FAKECUDA_COOP");
    if (c && !strcmp(c, "refuse"))
        return ENOTSUP;
    if (bx != 256 || gx > FAKE_SMS * FAKE_BLOCKS_PER_SM)
        return 720; /* CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE */
    return launch(f, gx, bx, params, 1);
}
static CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *nb, void *f, int threads, size_t sh)
{
    (void)sh;
    if (f != FN_PFUSED || threads != 256)
        return EINVAL_;
    *nb = FAKE_BLOCKS_PER_SM;
    return OK;
}

#define F(n) {#n, (void *)n}
static const struct { const char *name; void *fn; } g_tab[] = {
    F(cuInit), F(cuDeviceGet), F(cuDeviceGetCount), F(cuDeviceGetName), F(cuDeviceGetAttribute),
    F(cuDeviceGetPCIBusId), F(cuDeviceCanAccessPeer), F(cuDevicePrimaryCtxRetain), F(cuDevicePrimaryCtxRelease),
    F(cuCtxGetCurrent), F(cuCtxSetCurrent), F(cuCtxGetDevice), F(cuCtxEnablePeerAccess), F(cuCtxSynchronize),
    F(cuGetErrorName), F(cuGetErrorString), F(cuPointerGetAttribute), F(cuPointerGetAttributes),
    F(cuPointerSetAttribute), F(cuMemGetAddressRange), F(cuMemAlloc), F(cuMemFree), F(cuMemHostAlloc),
    F(cuMemFreeHost), F(cuMemHostRegister), F(cuMemHostUnregister), F(cuMemcpy), F(cuMemcpyAsync),
    F(cuMemcpyPeer), F(cuMemcpyPeerAsync), F(cuMemcpyHtoD), F(cuMemcpyDtoH), F(cuMemcpyHtoDAsync),
    F(cuMemcpyDtoHAsync), F(cuMemsetD8), F(cuMemsetD32Async), F(cuStreamCreate), F(cuStreamDestroy), F(cuStreamSynchronize),
    F(cuStreamQuery), F(cuStreamWaitEvent), F(cuEventCreate), F(cuEventDestroy), F(cuEventRecord),
    F(cuEventQuery), F(cuEventSynchronize), F(cuEventElapsedTime), F(cuIpcGetMemHandle),
    F(cuIpcOpenMemHandle), F(cuIpcCloseMemHandle), F(cuMemGetHandleForAddressRange),
    F(cuModuleLoadData), F(cuModuleGetFunction), F(cuLaunchKernel), F(cuLaunchCooperativeKernel),
    F(cuOccupancyMaxActiveBlocksPerMultiprocessor),
    F(cuCtxCreate), F(cuCtxDestroy), F(cuCtxPopCurrent), F(cuMemCreate), F(cuMemRelease), F(cuMemAddressReserve),
    F(cuMemAddressFree), F(cuMemMap), F(cuMemUnmap), F(cuMemSetAccess), F(cuMemGetAllocationGranularity),
    F(cuMemRetainAllocationHandle), F(cuMemExportToShareableHandle), F(cuMemImportFromShareableHandle),
};

CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver, unsigned long long flags, int *status)
{
    (void)ver; (void)flags;
    const char *coop = getenv("FAKECUDA_COOP");
    for (size_t i = 0; i < sizeof(g_tab) / sizeof(g_tab[0]); i++)
        if (!strcmp(g_tab[i].name, sym) &&
            !(coop && !strcmp(coop, "absent") && !strcmp(sym, "cuLaunchCooperativeKernel"))) {
            *pfn = g_tab[i].fn;
            if (status) *status = 0;
            return OK;
        }
    *pfn = NULL;
    if (status) *status = 1;
    return ENOTFOUND;
}
