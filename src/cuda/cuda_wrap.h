/* SPDX-License-Identifier: Apache-2.0 */
/* cuda_wrap.h - the CUDA driver API, loaded at run time (mem layer helper).
 *
 * gpuwire never links against CUDA and needs no CUDA header to build.  The
 * driver library (libcuda.so.1, or GPUWIRE_CUDA_LIB) is dlopen'ed on first
 * use; cuDriverGetVersion() is checked, then every entry point of the one
 * X-macro list below is resolved with cuGetProcAddress() at the ABI version
 * written next to it (so "cuMemAlloc" at 3020 is the 64-bit cuMemAlloc_v2).
 * The runtime library (libcudart) is never used.
 *
 *     char why[256];
 *     const gw_cuda_t *cu = gw_cuda_get(why, sizeof why);
 *     if (!cu) ... why says "libcuda.so.1 not found: no NVIDIA driver" (absent)
 *                  or what is broken (wrong version, missing symbol, cuInit).
 *     cu->cuMemAlloc(&p, n);
 *
 * The table is process-wide and immutable once loaded; calls through it are
 * thread-safe as far as the driver's are.
 */
#ifndef GW_CUDA_CUDA_WRAP_H
#define GW_CUDA_CUDA_WRAP_H

#include <stddef.h>
#include <stdint.h>

#include "gpuwire.h"

/* ---- the few driver types gpuwire uses (ABI-compatible with cuda.h) ---- */
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUipcMemHandle_st {
    char reserved[64];
} CUipcMemHandle;

typedef struct CUmemLocation_st {
    int type; /* CU_MEM_LOCATION_TYPE_* */
    int id;
} CUmemLocation;

typedef struct CUmemAllocationProp_st {
    int type;                 /* CU_MEM_ALLOCATION_TYPE_* */
    int requestedHandleTypes; /* CU_MEM_HANDLE_TYPE_* bits */
    CUmemLocation location;
    void *win32HandleMetaData;
    struct {
        unsigned char compressionType;
        unsigned char gpuDirectRDMACapable;
        unsigned short usage;
        unsigned char reserved[4];
    } allocFlags;
} CUmemAllocationProp;

typedef struct CUmemAccessDesc_st {
    CUmemLocation location;
    int flags; /* CU_MEM_ACCESS_FLAGS_* */
} CUmemAccessDesc;

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_DEINITIALIZED = 4,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_ALREADY_MAPPED = 208,
    CUDA_ERROR_NOT_READY = 600,
    CUDA_ERROR_ILLEGAL_ADDRESS = 700,
    CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704,
    CUDA_ERROR_LAUNCH_FAILED = 719,
    CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE = 720,
    CUDA_ERROR_NOT_SUPPORTED = 801
};
enum {
    CU_POINTER_ATTRIBUTE_CONTEXT = 1,
    CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,
    CU_POINTER_ATTRIBUTE_DEVICE_POINTER = 3,
    CU_POINTER_ATTRIBUTE_SYNC_MEMOPS = 6,
    CU_POINTER_ATTRIBUTE_BUFFER_ID = 7,
    CU_POINTER_ATTRIBUTE_IS_MANAGED = 8,
    CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9,
    CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE = 10,
    CU_POINTER_ATTRIBUTE_RANGE_START_ADDR = 11,
    CU_POINTER_ATTRIBUTE_RANGE_SIZE = 12,
    CU_POINTER_ATTRIBUTE_MAPPED = 13,
    CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES = 14,
    CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE = 15,
    CU_POINTER_ATTRIBUTE_MAPPING_SIZE = 18,
    CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR = 19
};
enum { CU_MEMORYTYPE_HOST = 1, CU_MEMORYTYPE_DEVICE = 2, CU_MEMORYTYPE_ARRAY = 3, CU_MEMORYTYPE_UNIFIED = 4 };
enum {
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    CU_DEVICE_ATTRIBUTE_PCI_BUS_ID = 33,
    CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID = 34,
    CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING = 41,
    CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID = 50,
    CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH = 95,
    CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 102,
    CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED = 103,
    CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED = 116,
    CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS = 117,
    CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = 124
};
/* cuDeviceGetP2PAttribute (topo: NVLink detection) */
enum { CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED = 2, CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED = 3 };
enum { CU_MEM_HANDLE_TYPE_NONE = 0, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1 };
enum { CU_MEM_ALLOCATION_TYPE_PINNED = 1 };
enum { CU_MEM_LOCATION_TYPE_DEVICE = 1 };
enum { CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3 };
enum { CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED = 1 };
enum { CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD = 1 };
enum { CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 1 };
enum { CU_STREAM_NON_BLOCKING = 1 };
enum { CU_EVENT_DISABLE_TIMING = 2 };
enum { CU_MEMHOSTALLOC_PORTABLE = 1 };
enum { CU_MEMHOSTREGISTER_PORTABLE = 1 };
enum { CU_FLUSH_GPU_DIRECT_RDMA_WRITES_OPTION_HOST = 1 };
enum { CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX = 0 };
enum { CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER = 100, CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_ALL_DEVICES = 200 };

/* ---- the entry points: X(name, abi_version, return, params) ----
 * REQ: needed for gpuwire to use CUDA at all; OPT: newer features, NULL when
 * the driver lacks them (callers check and say why they fall back). */
#define GW_CUDA_SYMS(REQ, OPT)                                                                     \
    REQ(cuInit, 2000, (unsigned flags))                                                            \
    REQ(cuDeviceGet, 2000, (CUdevice * dev, int ordinal))                                          \
    REQ(cuDeviceGetCount, 2000, (int *count))                                                      \
    REQ(cuDeviceGetName, 2000, (char *name, int len, CUdevice dev))                                \
    REQ(cuDeviceGetAttribute, 2000, (int *v, int attr, CUdevice dev))                              \
    REQ(cuDeviceGetPCIBusId, 4010, (char *buf, int len, CUdevice dev))                             \
    REQ(cuDeviceCanAccessPeer, 4000, (int *can, CUdevice dev, CUdevice peer))                      \
    REQ(cuDevicePrimaryCtxRetain, 7000, (CUcontext * ctx, CUdevice dev))                           \
    REQ(cuDevicePrimaryCtxRelease, 11000, (CUdevice dev))                                          \
    REQ(cuCtxGetCurrent, 4000, (CUcontext * ctx))                                                  \
    REQ(cuCtxSetCurrent, 4000, (CUcontext ctx))                                                    \
    REQ(cuCtxGetDevice, 2000, (CUdevice * dev))                                                    \
    REQ(cuCtxEnablePeerAccess, 4000, (CUcontext peer, unsigned flags))                             \
    REQ(cuGetErrorName, 6000, (CUresult e, const char **s))                                        \
    REQ(cuGetErrorString, 6000, (CUresult e, const char **s))                                      \
    REQ(cuPointerGetAttribute, 4000, (void *data, int attr, CUdeviceptr p))                        \
    REQ(cuPointerGetAttributes, 7000, (unsigned n, int *attrs, void **data, CUdeviceptr p))        \
    REQ(cuPointerSetAttribute, 6000, (const void *value, int attr, CUdeviceptr p))                 \
    REQ(cuMemGetAddressRange, 3020, (CUdeviceptr * base, size_t *size, CUdeviceptr p))             \
    REQ(cuMemAlloc, 3020, (CUdeviceptr * p, size_t n))                                             \
    REQ(cuMemFree, 3020, (CUdeviceptr p))                                                          \
    REQ(cuMemHostAlloc, 2020, (void **p, size_t n, unsigned flags))                                \
    REQ(cuMemFreeHost, 2000, (void *p))                                                            \
    REQ(cuMemHostRegister, 6050, (void *p, size_t n, unsigned flags))                              \
    REQ(cuMemHostUnregister, 4000, (void *p))                                                      \
    REQ(cuMemcpy, 4000, (CUdeviceptr dst, CUdeviceptr src, size_t n))                              \
    REQ(cuMemcpyAsync, 4000, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s))             \
    REQ(cuMemcpyPeer, 4000, (CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx,     \
                             size_t n))                                                            \
    REQ(cuMemcpyPeerAsync, 4000, (CUdeviceptr dst, CUcontext dctx, CUdeviceptr src,                \
                                  CUcontext sctx, size_t n, CUstream s))                           \
    REQ(cuMemcpyHtoD, 3020, (CUdeviceptr dst, const void *src, size_t n))                          \
    REQ(cuMemcpyDtoH, 3020, (void *dst, CUdeviceptr src, size_t n))                                \
    REQ(cuMemcpyHtoDAsync, 3020, (CUdeviceptr dst, const void *src, size_t n, CUstream s))         \
    REQ(cuMemcpyDtoHAsync, 3020, (void *dst, CUdeviceptr src, size_t n, CUstream s))               \
    REQ(cuMemsetD8, 3020, (CUdeviceptr p, unsigned char v, size_t n))                              \
    REQ(cuStreamCreate, 2000, (CUstream * s, unsigned flags))                                      \
    REQ(cuStreamDestroy, 4000, (CUstream s))                                                       \
    REQ(cuStreamSynchronize, 2000, (CUstream s))                                                   \
    REQ(cuStreamQuery, 2000, (CUstream s))                                                         \
    REQ(cuStreamWaitEvent, 3020, (CUstream s, CUevent e, unsigned flags))                          \
    REQ(cuEventCreate, 2000, (CUevent * e, unsigned flags))                                        \
    REQ(cuEventDestroy, 4000, (CUevent e))                                                         \
    REQ(cuEventRecord, 2000, (CUevent e, CUstream s))                                              \
    REQ(cuEventQuery, 2000, (CUevent e))                                                           \
    REQ(cuEventSynchronize, 2000, (CUevent e))                                                     \
    REQ(cuEventElapsedTime, 2000, (float *ms, CUevent a, CUevent b))                               \
    REQ(cuCtxSynchronize, 2000, (void))                                                            \
    REQ(cuIpcGetMemHandle, 4010, (CUipcMemHandle * h, CUdeviceptr p))                              \
    REQ(cuIpcOpenMemHandle, 11000, (CUdeviceptr * p, CUipcMemHandle h, unsigned flags))            \
    REQ(cuIpcCloseMemHandle, 4010, (CUdeviceptr p))                                                \
    OPT(cuCtxCreate, 3020, (CUcontext * ctx, unsigned flags, CUdevice dev))                        \
    OPT(cuCtxDestroy, 4000, (CUcontext ctx))                                                       \
    OPT(cuCtxPopCurrent, 4000, (CUcontext * ctx))                                                  \
    OPT(cuMemCreate, 10020, (CUmemGenericAllocationHandle * h, size_t n,                           \
                             const CUmemAllocationProp *prop, unsigned long long flags))           \
    OPT(cuMemRelease, 10020, (CUmemGenericAllocationHandle h))                                     \
    OPT(cuMemAddressReserve, 10020, (CUdeviceptr * p, size_t n, size_t align, CUdeviceptr addr,    \
                                     unsigned long long flags))                                    \
    OPT(cuMemAddressFree, 10020, (CUdeviceptr p, size_t n))                                        \
    OPT(cuMemMap, 10020, (CUdeviceptr p, size_t n, size_t off, CUmemGenericAllocationHandle h,     \
                          unsigned long long flags))                                               \
    OPT(cuMemUnmap, 10020, (CUdeviceptr p, size_t n))                                              \
    OPT(cuMemSetAccess, 10020, (CUdeviceptr p, size_t n, const CUmemAccessDesc *desc,              \
                                size_t count))                                                     \
    OPT(cuMemGetAllocationGranularity, 10020, (size_t *g, const CUmemAllocationProp *prop,         \
                                               int option))                                        \
    OPT(cuMemGetAllocationPropertiesFromHandle, 10020, (CUmemAllocationProp * prop,                \
                                                        CUmemGenericAllocationHandle h))           \
    OPT(cuMemRetainAllocationHandle, 11000, (CUmemGenericAllocationHandle * h, void *addr))        \
    OPT(cuMemExportToShareableHandle, 10020, (void *out, CUmemGenericAllocationHandle h,           \
                                              int type, unsigned long long flags))                 \
    OPT(cuMemImportFromShareableHandle, 10020, (CUmemGenericAllocationHandle * h, void *os,        \
                                                int type))                                         \
    OPT(cuMemGetHandleForAddressRange, 11070, (void *handle, CUdeviceptr p, size_t n, int type,    \
                                               unsigned long long flags))                          \
    OPT(cuFlushGPUDirectRDMAWrites, 11030, (int target, int scope))                               \
    OPT(cuDeviceGetP2PAttribute, 8000, (int *value, int attrib, CUdevice src, CUdevice dst))     \
    OPT(cuMemsetD32Async, 3020, (CUdeviceptr p, unsigned v, size_t n, CUstream s))                \
    OPT(cuModuleLoadData, 2000, (CUmodule * m, const void *image))                                \
    OPT(cuModuleGetFunction, 2000, (CUfunction * f, CUmodule m, const char *name))                \
    OPT(cuLaunchKernel, 4000, (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,   \
                               unsigned by, unsigned bz, unsigned shmem, CUstream s, void **params, \
                               void **extra))                                               \
    OPT(cuLaunchCooperativeKernel, 9000, (CUfunction f, unsigned gx, unsigned gy, unsigned gz,     \
                                          unsigned bx, unsigned by, unsigned bz, unsigned shmem,   \
                                          CUstream s, void **params))                              \
    OPT(cuOccupancyMaxActiveBlocksPerMultiprocessor, 6050, (int *blocks, CUfunction f, int threads, \
                                                            size_t shmem))

typedef struct gw_cuda {
    int driver_version; /* e.g. 13000 */
    int device_count;
#define GW_CUDA_PFN_(name, ver, params) CUresult (*name) params;
    GW_CUDA_SYMS(GW_CUDA_PFN_, GW_CUDA_PFN_)
#undef GW_CUDA_PFN_
} gw_cuda_t;

/* Loads the driver once per process.  Returns NULL with the reason in why:
 * "libcuda.so.1 not found: no NVIDIA driver" when absent (logged at info),
 * anything else when broken (logged at warn).  Later calls return the same
 * table or the same reason. */
const gw_cuda_t *gw_cuda_get(char *why, size_t whylen);

/* "cuMemAlloc(...) failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory)" style
 * text for a CUresult: writes "NAME (description)" into buf, returns buf. */
const char *gw_cuda_strerror(CUresult r, char *buf, size_t len);

/* Makes the primary context of dev current on the calling thread (retaining
 * it once per device per process).  Returns the context, NULL on failure
 * with the reason in why. */
CUcontext gw_cuda_ctx_for_device(int dev, char *why, size_t whylen);

/* ---- the context of gpuwire's own copies (GPUWIRE_CUDA_COPY_CONTEXT) ----
 * primary: copies run in the device's primary context (the application's).
 * own: a context gpuwire creates per device (cuCtxCreate, once, kept for the
 * process), for copies between VMM mappings: the driver does not hold work
 * there behind an application thread's blocking copy in the primary
 * context.  The choice is the setting's, unless a plugin that embeds
 * gpuwire chose for the process (gw_cuda_copy_ctx_choose). */
enum { GW_CUDA_COPY_PRIMARY = 0, GW_CUDA_COPY_OWN = 1 };
int gw_cuda_copy_ctx_mode(void);
void gw_cuda_copy_ctx_choose(int mode);
/* Makes gpuwire's own context of dev current on the calling thread (created
 * on first use), the previous current context in *saved for
 * gw_cuda_ctx_leave.  Returns it, NULL with why on failure (nothing then
 * changed). */
CUcontext gw_cuda_own_ctx_enter(int dev, CUcontext *saved, char *why, size_t whylen);
/* Makes saved current again (the caller's context before _enter). */
void gw_cuda_ctx_leave(CUcontext saved);
/* 1 when ctx is one of gpuwire's own contexts. */
int gw_cuda_ctx_is_own(CUcontext ctx);

/* PCI bus id "0000:3b:00.0" of a device ordinal; "" on failure. */
void gw_cuda_pci_bus_id(int dev, char *buf, size_t len);

/* A dma-buf file descriptor for the device range [ptr, ptr+len), for
 * ibv_reg_dmabuf_mr().  cuMemGetHandleForAddressRange() wants a range whose
 * start and size are multiples of the host page size, so the range is widened
 * to page boundaries; *dmabuf_off receives the offset of ptr inside the
 * exported range (pass it as ibv_reg_dmabuf_mr's `offset`, with iova = ptr and
 * length = len).  The caller closes *fd after registering.
 * Errors: GW_ERR_UNAVAILABLE (no driver), GW_ERR_UNSUPPORTED (driver lacks the
 * call, or the device lacks dma-buf: CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is
 * 0, or the kernel refused), GW_ERR_CUDA; why holds the cause either way. */
gw_status_t gw_cuda_dmabuf_fd(const void *ptr, size_t len, int *fd, uint64_t *dmabuf_off, char *why,
                              size_t whylen);

/* Makes completed GPUDirect RDMA writes into device memory visible to the GPU
 * (cuFlushGPUDirectRDMAWrites, to all devices).  Returns GW_OK when done or
 * when the driver/device does not need it (then nothing is flushed and the
 * caller may use a read fence instead: *fenced_by_flush tells which). */
gw_status_t gw_cuda_flush_rdma_writes(int *fenced_by_flush);

/* ---- the batched gather/scatter copy kernel (copy_kernel.c) ----
 * One launch copies n blocks (any device or host-mapped addresses the GPU
 * can reach: its own memory, peer memory opened by CUDA IPC, pinned host
 * memory) on a stream.  Descriptors live in pinned host memory (from
 * gw_cuda_desc_alloc) until the launch completes. */
typedef struct gw_copy_desc {
    uint64_t src, dst, len;
} gw_copy_desc_t;
#define GW_COPY_DESC_MAX_LEN (64u << 10) /* longer blocks are cut (spread over more SMs) */

/* The kernel of device dev, loaded once (cuModuleLoadData of the embedded
 * PTX).  GW_OK, or GW_ERR_UNAVAILABLE with why (no module: copy-engine
 * copies then). */
gw_status_t gw_cuda_copy_kernel_ready(int dev, char *why, size_t whylen);
/* Launches one copy of the n descriptors at desc (pinned host memory) on
 * stream (dev's context current). */
gw_status_t gw_cuda_copy_kernel_launch(int dev, CUstream stream, const gw_copy_desc_t *desc, uint32_t n,
                                       char *why, size_t whylen);
/* The bounds check of a paged launch whose index arrays are in dev's memory
 * (the host never reads them).  Entry i is bad when lidx[i] lies outside
 * [lim[0], lim[1]] or ridx[i] outside [lim[2], lim[3]] (a NULL array is not
 * checked); the first bad entry's value, gbase | (i << 1 | side) with side 0
 * local and 1 remote, goes into *word (dev's memory) by atomicMin, and when
 * there is one the launch copies nothing.  Generations: each check on a
 * word's stream passes a lower gbase (a multiple of 2^33) than the one
 * before, so that the word needs no reset between checks (the caller resets
 * it to all ones once, and again when its generations run out); a check
 * found a bad entry exactly when the word is below gbase + 2^33. */
enum {
    GW_CUDA_PAGE_GATE_FUSED = 0, /* one cooperative launch (gw_page_fused) where the device allows, else SPLIT */
    GW_CUDA_PAGE_GATE_SPLIT = 1  /* the check kernel, then the page kernel gated by the word */
};
typedef struct gw_cuda_page_gate {
    int form;                    /* GW_CUDA_PAGE_GATE_* */
    int get;                     /* the local side is the destination (lidx is didx) */
    const uint32_t *lidx, *ridx; /* the arrays checked: the local side's and the remote side's */
    uint32_t lim[4];
    uint64_t *word;              /* the outcome word (dev's memory, 8 bytes) */
    uint64_t gbase;              /* this check's generation */
    uint64_t *out;               /* pinned host memory (NULL: none): the outcome, (i << 1 | side) of the bad
                                  * entry or all ones, written by the GPU (read it after the launch completes) */
    uint64_t *bar;               /* FUSED: the grid barrier's counter (dev's memory, 8 bytes, only ever grows) */
    uint64_t *arrived;           /* FUSED: the host's count of blocks launched on bar (modulo 2^64), advanced
                                  * by a launch that went */
    uint32_t rcheck_max;         /* FUSED: at most this many entries go to gw_page_rcheck instead, one plain
                                  * launch in which every block checks every entry (0: none) */
    int fused;                   /* out: 1 when the launch was the fused one (or gw_page_rcheck) */
} gw_cuda_page_gate_t;
/* The paged form: one launch copies n pages of psize bytes, page i from
 * sbase + sidx[i] * psize to dbase + didx[i] * psize (an index array NULL:
 * i; otherwise pinned host memory, or dev's memory, kept until the launch
 * completes).  The caller has checked every page's bounds on both sides,
 * or gates the launch (gate non-NULL, the arrays in dev's memory): FUSED
 * checks and copies in one cooperative launch where the device takes one
 * (a refusal of the driver makes this and later launches on dev SPLIT), or
 * for at most gate->rcheck_max entries in one plain launch whose every
 * block checks them all (gw_page_rcheck: no barrier, no word);
 * SPLIT queues the check kernel, then the page kernel reading the word. */
gw_status_t gw_cuda_page_copy_launch(int dev, CUstream stream, const uint32_t *sidx, const uint32_t *didx,
                                     uint32_t n, uint64_t sbase, uint64_t dbase, uint64_t psize,
                                     gw_cuda_page_gate_t *gate, char *why, size_t whylen);
/* 1 when paged launches on dev can take the FUSED form, else 0 with why. */
int gw_cuda_page_fused_ok(int dev, char *why, size_t whylen);
/* The check kernel alone (the gate's rules, generation gbase). */
gw_status_t gw_cuda_page_check_launch(int dev, CUstream stream, const uint32_t *lidx, const uint32_t *ridx,
                                      uint32_t n, const uint32_t lim[4], uint64_t *word, uint64_t gbase, char *why,
                                      size_t whylen);
/* The list form: one launch copies n entries, entry i stab[sidx[i]].len
 * bytes from stab[sidx[i]].addr + sdelta to dtab[didx[i]].addr + ddelta (an
 * index array NULL: i).  Tables and index arrays in pinned host memory kept
 * until the launch completes; tables of {u64 addr, u64 len}.  The caller
 * has checked the indices and lengths; every entry is shorter than
 * GW_COPY_DESC_MAX_LEN and maxlen is the longest. */
gw_status_t gw_cuda_list_copy_launch(int dev, CUstream stream, const uint32_t *sidx, const uint32_t *didx,
                                     const void *stab, const void *dtab, uint32_t n, uint64_t sdelta,
                                     uint64_t ddelta, uint64_t maxlen, char *why, size_t whylen);
/* One side of the list form over region tables (gw_table_copy): entry j
 * is tab[j] (+ delta) where tab is given, else block j % per of region
 * j / per, at base[j / per] + (j % per) * clen (+ delta); idx the index
 * array (NULL: j).  Index arrays, tables and bases in pinned host memory
 * (or the launching GPU's) kept until the launch completes. */
typedef struct gw_cuda_table_side {
    const uint32_t *idx;
    const void *tab;      /* {u64 addr, u64 len} per entry, or NULL */
    const uint64_t *base; /* per region, when tab is NULL */
    uint32_t per;         /* blocks per region, when tab is NULL */
    uint64_t delta;
} gw_cuda_table_side_t;
/* One launch copies n entries from src's to dst's (lengths: src's table,
 * else dst's, else clen; maxlen the longest, cut into pieces of at most
 * GW_COPY_DESC_MAX_LEN).  The caller has checked indices, lengths and
 * bounds. */
gw_status_t gw_cuda_table_copy_launch(int dev, CUstream stream, const gw_cuda_table_side_t *src,
                                      const gw_cuda_table_side_t *dst, uint32_t n, uint64_t clen, uint64_t maxlen,
                                      char *why, size_t whylen);

#endif
