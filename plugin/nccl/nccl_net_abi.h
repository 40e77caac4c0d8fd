/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_net_abi.h - the NCCL net plugin interface, versions 8 to 12, as NCCL
 * loads it (2.28 looks up ncclNetPlugin_v11 .. _v8, 2.30 ncclNetPlugin_v12
 * first; newest first in both).
 *
 * Written for gpuwire from NCCL's documented interface (ext-net/README.md and
 * the shapes of the versioned structs); no NCCL header is needed to build.
 * Only what the plugin and its test driver use is declared.  The structs are
 * ABI: field order and types must match what NCCL passes, so each one is
 * spelled out per version rather than derived.
 *
 * Version differences, oldest first:
 *   v8   init(logger); sizes are int; properties end at netDeviceVersion.
 *   v9   sizes of isend/irecv are size_t; properties gain forceFlush (after
 *        regIsGlobal), vProps, maxP2pBytes, maxCollBytes; makeVDevice slot.
 *   v10  init(logger, profiler callback); connect takes a per-comm config;
 *        isend/irecv take profiler handles.
 *   v11  init(&ctx, commId, config, logger, profiler) once per communicator,
 *        listen/connect take that ctx, finalize(ctx); properties gain
 *        maxMultiRequestSize; setNetAttr slot.
 *   v12  same function slots as v11; properties: the virtual-device list
 *        holds up to 8 devices (was 4), and two 16-bit ids follow
 *        maxMultiRequestSize: railId and planeId (-1: not known, NCCL
 *        ignores them).
 * NCCL treats a NULL getDeviceMr, irecvConsumed, makeVDevice or setNetAttr as
 * "not supported" (it checks each before calling).
 */
#ifndef GW_NCCL_NET_ABI_H
#define GW_NCCL_NET_ABI_H

#include <stddef.h>
#include <stdint.h>

/* ncclResult_t: values are NCCL's public return codes. */
typedef enum {
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError = 2,
    ncclInternalError = 3,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5,
    ncclRemoteError = 6,
    ncclInProgress = 7
} ncclResult_t;

/* Logger levels and subsystem flags NCCL passes to/accepts from plugins. */
typedef enum {
    NCCL_LOG_NONE = 0,
    NCCL_LOG_VERSION = 1,
    NCCL_LOG_WARN = 2,
    NCCL_LOG_INFO = 3,
    NCCL_LOG_ABORT = 4,
    NCCL_LOG_TRACE = 5
} ncclDebugLogLevel;

#define NCCL_INIT 0x1UL
#define NCCL_NET 0x10UL
#define NCCL_ALL (~0UL)

typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags, const char *file,
                                  int line, const char *fmt, ...);
/* Profiler callback (v10+); the plugin records no events, so it is kept opaque. */
typedef ncclResult_t (*ncclProfilerCallback_t)(void **eHandle, int type, void *pHandle,
                                               int64_t pluginId, void *extData);

#define NCCL_NET_HANDLE_MAXSIZE 128
#define NCCL_PTR_HOST 0x1
#define NCCL_PTR_CUDA 0x2
#define NCCL_PTR_DMABUF 0x4
#define NCCL_NET_MAX_REQUESTS 32
#define NCCL_NET_MAX_DEVS_PER_NIC 4
/* Passed in *request to irecv (v9+) when NCCL does not need the completion. */
#define NCCL_NET_OPTIONAL_RECV_COMPLETION 0x1

typedef enum { NCCL_NET_DEVICE_HOST = 0, NCCL_NET_DEVICE_UNPACK = 1 } ncclNetDeviceType;

/* Device offload handle (same layout v7..v11); host-only plugins leave it alone. */
typedef struct {
    ncclNetDeviceType netDeviceType;
    int netDeviceVersion;
    void *handle;
    size_t size;
    int needsProxyProgress;
} ncclNetDeviceHandle_t;

typedef struct {
    int ndevs;
    int devs[NCCL_NET_MAX_DEVS_PER_NIC];
} ncclNetVDeviceProps_t; /* v9, v10, v11 */

/* v12: the same list, twice as long. */
#define NCCL_NET_MAX_DEVS_PER_NIC_V12 8
typedef struct {
    int ndevs;
    int devs[NCCL_NET_MAX_DEVS_PER_NIC_V12];
} ncclNetVDeviceProps_v12_t;

typedef struct {
    int trafficClass; /* -1: undefined */
} ncclNetCommConfig_t; /* v10, v11, v12 */

/* railId / planeId value meaning "not known" (v12). */
#define NCCL_NET_ID_UNDEF (-1)

/* ---- properties ---------------------------------------------------------------------------- */
typedef struct {
    char *name;
    char *pciPath;
    uint64_t guid;
    int ptrSupport;
    int regIsGlobal;
    int speed; /* Mb/s */
    int port;
    float latency; /* us */
    int maxComms;
    int maxRecvs;
    ncclNetDeviceType netDeviceType;
    int netDeviceVersion;
} ncclNetProperties_v8_t;

typedef struct {
    char *name;
    char *pciPath;
    uint64_t guid;
    int ptrSupport;
    int regIsGlobal;
    int forceFlush;
    int speed;
    int port;
    float latency;
    int maxComms;
    int maxRecvs;
    ncclNetDeviceType netDeviceType;
    int netDeviceVersion;
    ncclNetVDeviceProps_t vProps;
    size_t maxP2pBytes;
    size_t maxCollBytes;
} ncclNetProperties_v9_t; /* v10 has the same layout */

typedef ncclNetProperties_v9_t ncclNetProperties_v10_t;

typedef struct {
    char *name;
    char *pciPath;
    uint64_t guid;
    int ptrSupport;
    int regIsGlobal;
    int forceFlush;
    int speed;
    int port;
    float latency;
    int maxComms;
    int maxRecvs;
    ncclNetDeviceType netDeviceType;
    int netDeviceVersion;
    ncclNetVDeviceProps_t vProps;
    size_t maxP2pBytes;
    size_t maxCollBytes;
    int maxMultiRequestSize;
} ncclNetProperties_v11_t;

typedef struct {
    char *name;
    char *pciPath;
    uint64_t guid;
    int ptrSupport;
    int regIsGlobal;
    int forceFlush;
    int speed;
    int port;
    float latency;
    int maxComms;
    int maxRecvs;
    ncclNetDeviceType netDeviceType;
    int netDeviceVersion;
    ncclNetVDeviceProps_v12_t vProps; /* 8 entries from v12 on */
    size_t maxP2pBytes;
    size_t maxCollBytes;
    int maxMultiRequestSize;
    int16_t railId;  /* NCCL_NET_ID_UNDEF: no rail */
    int16_t planeId; /* NCCL_NET_ID_UNDEF: no plane */
} ncclNetProperties_v12_t;
/* v12 differs from v11 only by the longer device list and the two ids. */
_Static_assert(offsetof(ncclNetProperties_v12_t, maxP2pBytes) ==
                   offsetof(ncclNetProperties_v11_t, maxP2pBytes) +
                       (NCCL_NET_MAX_DEVS_PER_NIC_V12 - NCCL_NET_MAX_DEVS_PER_NIC) * sizeof(int),
               "v12 properties: only vProps grows before maxP2pBytes");
_Static_assert(offsetof(ncclNetProperties_v12_t, railId) ==
                   offsetof(ncclNetProperties_v12_t, maxMultiRequestSize) + sizeof(int),
               "v12 properties: railId follows maxMultiRequestSize");

/* ---- the function tables --------------------------------------------------------------------- */
/* Slots shared by every version from regMr to closeListen, in NCCL's order. */
#define GW_NCCL_REG_SLOTS                                                                          \
    ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);          \
    ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset,    \
                                int fd, void **mhandle);                                           \
    ncclResult_t (*deregMr)(void *comm, void *mhandle);
#define GW_NCCL_TAIL_SLOTS                                                                         \
    ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,        \
                           void **request);                                                        \
    ncclResult_t (*test)(void *request, int *done, int *sizes);                                    \
    ncclResult_t (*closeSend)(void *sendComm);                                                     \
    ncclResult_t (*closeRecv)(void *recvComm);                                                     \
    ncclResult_t (*closeListen)(void *listenComm);                                                 \
    ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);                   \
    ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);

typedef struct {
    const char *name;
    ncclResult_t (*init)(ncclDebugLogger_t logFunction);
    ncclResult_t (*devices)(int *ndev);
    ncclResult_t (*getProperties)(int dev, ncclNetProperties_v8_t *props);
    ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
    ncclResult_t (*connect)(int dev, void *handle, void **sendComm, ncclNetDeviceHandle_t **sendDevComm);
    ncclResult_t (*accept)(void *listenComm, void **recvComm, ncclNetDeviceHandle_t **recvDevComm);
    GW_NCCL_REG_SLOTS
    ncclResult_t (*isend)(void *sendComm, void *data, int size, int tag, void *mhandle, void **request);
    ncclResult_t (*irecv)(void *recvComm, int n, void **data, int *sizes, int *tags, void **mhandles,
                          void **request);
    GW_NCCL_TAIL_SLOTS
} ncclNet_v8_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(ncclDebugLogger_t logFunction);
    ncclResult_t (*devices)(int *ndev);
    ncclResult_t (*getProperties)(int dev, ncclNetProperties_v9_t *props);
    ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
    ncclResult_t (*connect)(int dev, void *handle, void **sendComm, ncclNetDeviceHandle_t **sendDevComm);
    ncclResult_t (*accept)(void *listenComm, void **recvComm, ncclNetDeviceHandle_t **recvDevComm);
    GW_NCCL_REG_SLOTS
    ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle, void **request);
    ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags, void **mhandles,
                          void **request);
    GW_NCCL_TAIL_SLOTS
    ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_t *props);
} ncclNet_v9_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
    ncclResult_t (*devices)(int *ndev);
    ncclResult_t (*getProperties)(int dev, ncclNetProperties_v10_t *props);
    ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
    ncclResult_t (*connect)(int dev, ncclNetCommConfig_t *config, void *handle, void **sendComm,
                            ncclNetDeviceHandle_t **sendDevComm);
    ncclResult_t (*accept)(void *listenComm, void **recvComm, ncclNetDeviceHandle_t **recvDevComm);
    GW_NCCL_REG_SLOTS
    ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle, void *phandle,
                          void **request);
    ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags, void **mhandles,
                          void **phandles, void **request);
    GW_NCCL_TAIL_SLOTS
    ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_t *props);
} ncclNet_v10_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(void **ctx, uint64_t commId, ncclNetCommConfig_t *config,
                         ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
    ncclResult_t (*devices)(int *ndev);
    ncclResult_t (*getProperties)(int dev, ncclNetProperties_v11_t *props);
    ncclResult_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);
    ncclResult_t (*connect)(void *ctx, int dev, void *handle, void **sendComm,
                            ncclNetDeviceHandle_t **sendDevComm);
    ncclResult_t (*accept)(void *listenComm, void **recvComm, ncclNetDeviceHandle_t **recvDevComm);
    GW_NCCL_REG_SLOTS
    ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle, void *phandle,
                          void **request);
    ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags, void **mhandles,
                          void **phandles, void **request);
    GW_NCCL_TAIL_SLOTS
    ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_t *props);
    ncclResult_t (*finalize)(void *ctx);
    ncclResult_t (*setNetAttr)(void *ctx, void *netAttr);
} ncclNet_v11_t;

/* v12: v11's slots in v11's order; only getProperties' struct differs. */
typedef struct {
    const char *name;
    ncclResult_t (*init)(void **ctx, uint64_t commId, ncclNetCommConfig_t *config,
                         ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
    ncclResult_t (*devices)(int *ndev);
    ncclResult_t (*getProperties)(int dev, ncclNetProperties_v12_t *props);
    ncclResult_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);
    ncclResult_t (*connect)(void *ctx, int dev, void *handle, void **sendComm,
                            ncclNetDeviceHandle_t **sendDevComm);
    ncclResult_t (*accept)(void *listenComm, void **recvComm, ncclNetDeviceHandle_t **recvDevComm);
    GW_NCCL_REG_SLOTS
    ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle, void *phandle,
                          void **request);
    ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags, void **mhandles,
                          void **phandles, void **request);
    GW_NCCL_TAIL_SLOTS
    ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v12_t *props);
    ncclResult_t (*finalize)(void *ctx);
    ncclResult_t (*setNetAttr)(void *ctx, void *netAttr);
} ncclNet_v12_t;

#endif
