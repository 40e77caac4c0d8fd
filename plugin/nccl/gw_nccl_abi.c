/* SPDX-License-Identifier: Apache-2.0 */
/* gw_nccl_abi.c - the plugin's exported tables, ncclNetPlugin_v12 down to
 * _v8, and the shims that adapt each older interface (property layouts,
 * int sizes, context arguments) to gw_nccl.c's v12 entry points. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gw_nccl_int.h"

/* ---- version 12 --------------------------------------------------------------------------------- */
static char g_ctx_token; /* what v11/v12's ctx points at: the plugin's state is process-wide */

static ncclResult_t v11_init(void **ctx, uint64_t comm_id, ncclNetCommConfig_t *config, ncclDebugLogger_t logfn,
                             ncclProfilerCallback_t prof);
static ncclResult_t v11_listen(void *ctx, int dev, void *handle, void **lc);
static ncclResult_t v11_connect(void *ctx, int dev, void *handle, void **sc, ncclNetDeviceHandle_t **dc);
static ncclResult_t v_accept(void *lc, void **rc, ncclNetDeviceHandle_t **dc);
static ncclResult_t v10_isend(void *sc, void *data, size_t size, int tag, void *mh, void *ph, void **req);
static ncclResult_t v10_irecv(void *rc, int n, void **data, size_t *sizes, int *tags, void **mh, void **ph,
                              void **req);
static ncclResult_t v11_finalize(void *ctx);

GWN_EXPORT const ncclNet_v12_t ncclNetPlugin_v12 = {
    .name = "gpuwire",
    .init = v11_init,
    .devices = gwn_devices,
    .getProperties = gwn_props,
    .listen = v11_listen,
    .connect = v11_connect,
    .accept = v_accept,
    .regMr = gwn_reg,
    .regMrDmaBuf = gwn_reg_dmabuf,
    .deregMr = gwn_dereg,
    .isend = v10_isend,
    .irecv = v10_irecv,
    .iflush = gwn_iflush,
    .test = gwn_test,
    .closeSend = gwn_close,
    .closeRecv = gwn_close,
    .closeListen = gwn_close,
    .getDeviceMr = NULL,   /* NULL: no device offload (NCCL checks) */
    .irecvConsumed = NULL, /* NULL: no device offload */
    .makeVDevice = NULL,   /* NULL: NCCL uses the physical devices */
    .finalize = v11_finalize,
    .setNetAttr = NULL,    /* NULL: no per-collective tuning */
};

/* ---- version 11 --------------------------------------------------------------------------------- */
/* v12's properties less railId/planeId, with the 4-entry device list; the
 * list is copied entry by entry (the plugin's devices are physical, 1 each). */
static void props_v11(const ncclNetProperties_v12_t *p, ncclNetProperties_v11_t *o)
{
    *o = (ncclNetProperties_v11_t){.name = p->name, .pciPath = p->pciPath, .guid = p->guid,
                                   .ptrSupport = p->ptrSupport, .regIsGlobal = p->regIsGlobal,
                                   .forceFlush = p->forceFlush, .speed = p->speed, .port = p->port,
                                   .latency = p->latency, .maxComms = p->maxComms, .maxRecvs = p->maxRecvs,
                                   .netDeviceType = p->netDeviceType, .netDeviceVersion = p->netDeviceVersion,
                                   .maxP2pBytes = p->maxP2pBytes, .maxCollBytes = p->maxCollBytes,
                                   .maxMultiRequestSize = p->maxMultiRequestSize};
    o->vProps.ndevs = p->vProps.ndevs < NCCL_NET_MAX_DEVS_PER_NIC ? p->vProps.ndevs : NCCL_NET_MAX_DEVS_PER_NIC;
    for (int i = 0; i < o->vProps.ndevs; i++)
        o->vProps.devs[i] = p->vProps.devs[i];
}
static ncclResult_t v11_props(int dev, ncclNetProperties_v11_t *props)
{
    ncclNetProperties_v12_t p;
    ncclResult_t rc = gwn_props(dev, &p);
    if (rc == ncclSuccess)
        props_v11(&p, props);
    return rc;
}

static ncclResult_t v11_init(void **ctx, uint64_t comm_id, ncclNetCommConfig_t *config, ncclDebugLogger_t logfn,
                             ncclProfilerCallback_t prof)
{
    (void)prof;
    *ctx = &g_ctx_token;
    ncclResult_t rc = gwn_init(logfn);
    if (rc == ncclSuccess && config && config->trafficClass != -1)
        INFO(NCCL_INIT | NCCL_NET, "communicator 0x%llx asks for traffic class %d: gpuwire does not set traffic "
             "classes (ignored)", (unsigned long long)comm_id, config->trafficClass);
    return rc;
}
static ncclResult_t v11_listen(void *ctx, int dev, void *handle, void **lc) { return gwn_listen(dev, handle, lc); }
static ncclResult_t v11_connect(void *ctx, int dev, void *handle, void **sc, ncclNetDeviceHandle_t **dc)
{
    return gwn_connect(dev, handle, sc);
}
static ncclResult_t v_accept(void *lc, void **rc, ncclNetDeviceHandle_t **dc) { return gwn_accept(lc, rc); }
static ncclResult_t v10_isend(void *sc, void *data, size_t size, int tag, void *mh, void *ph, void **req)
{
    return gwn_isend(sc, data, size, tag, mh, req);
}
static ncclResult_t v10_irecv(void *rc, int n, void **data, size_t *sizes, int *tags, void **mh, void **ph,
                              void **req)
{
    return gwn_irecv(rc, n, data, sizes, tags, mh, req);
}
static ncclResult_t v11_finalize(void *ctx) { return gwn_finalize(); }

GWN_EXPORT const ncclNet_v11_t ncclNetPlugin_v11 = {
    .name = "gpuwire",
    .init = v11_init,
    .devices = gwn_devices,
    .getProperties = v11_props,
    .listen = v11_listen,
    .connect = v11_connect,
    .accept = v_accept,
    .regMr = gwn_reg,
    .regMrDmaBuf = gwn_reg_dmabuf,
    .deregMr = gwn_dereg,
    .isend = v10_isend,
    .irecv = v10_irecv,
    .iflush = gwn_iflush,
    .test = gwn_test,
    .closeSend = gwn_close,
    .closeRecv = gwn_close,
    .closeListen = gwn_close,
    .getDeviceMr = NULL,   /* NULL: no device offload (NCCL checks) */
    .irecvConsumed = NULL, /* NULL: no device offload */
    .makeVDevice = NULL,   /* NULL: NCCL uses the physical devices */
    .finalize = v11_finalize,
    .setNetAttr = NULL,    /* NULL: no per-collective tuning */
};

/* ---- version 10 --------------------------------------------------------------------------------- */
static void props_v9(const ncclNetProperties_v11_t *p, ncclNetProperties_v9_t *o)
{
    memcpy(o, p, offsetof(ncclNetProperties_v9_t, maxCollBytes) + sizeof(o->maxCollBytes));
}
_Static_assert(offsetof(ncclNetProperties_v11_t, maxCollBytes) == offsetof(ncclNetProperties_v9_t, maxCollBytes),
               "v9 properties must be a prefix of v11's");
static ncclResult_t v10_init(ncclDebugLogger_t logfn, ncclProfilerCallback_t prof) { return gwn_init(logfn); }
static ncclResult_t v9_props(int dev, ncclNetProperties_v9_t *props)
{
    ncclNetProperties_v11_t p;
    ncclResult_t rc = v11_props(dev, &p);
    if (rc == ncclSuccess)
        props_v9(&p, props);
    return rc;
}
static ncclResult_t v8_listen(int dev, void *handle, void **lc) { return gwn_listen(dev, handle, lc); }
static ncclResult_t v10_connect(int dev, ncclNetCommConfig_t *config, void *handle, void **sc,
                                ncclNetDeviceHandle_t **dc)
{
    return gwn_connect(dev, handle, sc);
}

GWN_EXPORT const ncclNet_v10_t ncclNetPlugin_v10 = {
    .name = "gpuwire",
    .init = v10_init,
    .devices = gwn_devices,
    .getProperties = v9_props,
    .listen = v8_listen,
    .connect = v10_connect,
    .accept = v_accept,
    .regMr = gwn_reg,
    .regMrDmaBuf = gwn_reg_dmabuf,
    .deregMr = gwn_dereg,
    .isend = v10_isend,
    .irecv = v10_irecv,
    .iflush = gwn_iflush,
    .test = gwn_test,
    .closeSend = gwn_close,
    .closeRecv = gwn_close,
    .closeListen = gwn_close,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
    .makeVDevice = NULL,
};

/* ---- version 9 ---------------------------------------------------------------------------------- */
static ncclResult_t v8_init(ncclDebugLogger_t logfn) { return gwn_init(logfn); }
static ncclResult_t v8_connect(int dev, void *handle, void **sc, ncclNetDeviceHandle_t **dc)
{
    return gwn_connect(dev, handle, sc);
}

GWN_EXPORT const ncclNet_v9_t ncclNetPlugin_v9 = {
    .name = "gpuwire",
    .init = v8_init,
    .devices = gwn_devices,
    .getProperties = v9_props,
    .listen = v8_listen,
    .connect = v8_connect,
    .accept = v_accept,
    .regMr = gwn_reg,
    .regMrDmaBuf = gwn_reg_dmabuf,
    .deregMr = gwn_dereg,
    .isend = gwn_isend,
    .irecv = gwn_irecv,
    .iflush = gwn_iflush,
    .test = gwn_test,
    .closeSend = gwn_close,
    .closeRecv = gwn_close,
    .closeListen = gwn_close,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
    .makeVDevice = NULL,
};

/* ---- version 8 ---------------------------------------------------------------------------------- */
static ncclResult_t v8_props(int dev, ncclNetProperties_v8_t *props)
{
    ncclNetProperties_v11_t p;
    ncclResult_t rc = v11_props(dev, &p);
    if (rc != ncclSuccess)
        return rc;
    *props = (ncclNetProperties_v8_t){.name = p.name, .pciPath = p.pciPath, .guid = p.guid,
                                      .ptrSupport = p.ptrSupport, .regIsGlobal = p.regIsGlobal, .speed = p.speed,
                                      .port = p.port, .latency = p.latency, .maxComms = p.maxComms,
                                      .maxRecvs = p.maxRecvs, .netDeviceType = p.netDeviceType,
                                      .netDeviceVersion = p.netDeviceVersion};
    return ncclSuccess;
}
static ncclResult_t v8_isend(void *sc, void *data, int size, int tag, void *mh, void **req)
{
    if (size < 0) {
        WARN("isend: negative size %d", size);
        return ncclInvalidArgument;
    }
    return gwn_isend(sc, data, (size_t)size, tag, mh, req);
}
static ncclResult_t v8_irecv(void *rc, int n, void **data, int *sizes, int *tags, void **mh, void **req)
{
    size_t s[GWN_MAX_RECVS];
    if (n < 1 || n > GWN_MAX_RECVS) {
        WARN("irecv: %d receives grouped, this plugin takes 1 to %d", n, GWN_MAX_RECVS);
        return ncclInternalError;
    }
    for (int i = 0; i < n; i++) {
        if (sizes[i] < 0) {
            WARN("irecv: negative size %d", sizes[i]);
            return ncclInvalidArgument;
        }
        s[i] = (size_t)sizes[i];
    }
    return gwn_irecv(rc, n, data, s, tags, mh, req);
}

GWN_EXPORT const ncclNet_v8_t ncclNetPlugin_v8 = {
    .name = "gpuwire",
    .init = v8_init,
    .devices = gwn_devices,
    .getProperties = v8_props,
    .listen = v8_listen,
    .connect = v8_connect,
    .accept = v_accept,
    .regMr = gwn_reg,
    .regMrDmaBuf = gwn_reg_dmabuf,
    .deregMr = gwn_dereg,
    .isend = v8_isend,
    .irecv = v8_irecv,
    .iflush = gwn_iflush,
    .test = gwn_test,
    .closeSend = gwn_close,
    .closeRecv = gwn_close,
    .closeListen = gwn_close,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
};
