/* hooks.c - the real NVLink, CUDA and verbs hooks of the topology and the
 * doctor, wired to the run-time loaders of libcuda.so.1 (src/cuda) and
 * libibverbs.so.1 (src/transport/verbs) when this build has them.  Without
 * a loader the hook stays NULL and the reason is what the doctor prints for
 * the checks that needed it.
 *
 * NVLink from the CUDA driver: sysfs cannot show NVLink, and the driver API
 * has no link count (NVML has; gpuwire does not load NVML).  A GPU pair is
 * taken as NVLink-connected when the driver reports peer access AND native
 * peer atomics (CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED), which
 * NVIDIA GPUs provide over NVLink/NVSwitch and not over PCIe.  The count is
 * unknown, so the matrix shows "NV".  Recorded trees carry exact counts in
 * gpuwire-nvlink.txt instead. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "cuda/cuda_wrap.h"
#include "topo/doctor.h"

/* CUDA ordinal of the GPU at a PCI address; -1 if CUDA does not see it. */
static int cuda_ordinal(const gw_cuda_t *cu, const char *bdf)
{
    size_t lb = strlen(bdf);
    for (int i = 0; i < cu->device_count; i++) {
        char id[32] = "";
        CUdevice d;
        if (cu->cuDeviceGet(&d, i) != CUDA_SUCCESS || cu->cuDeviceGetPCIBusId(id, sizeof(id), d) != CUDA_SUCCESS)
            continue;
        size_t li = strlen(id);
        if (li >= 12 && lb >= 12 && !strcasecmp(id + li - 12, bdf + lb - 12))
            return i;
    }
    return -1;
}

static int cuda_nvlink(void *arg, const gw_topo_dev_t *a, const gw_topo_dev_t *b)
{
    (void)arg;
    const gw_cuda_t *cu = gw_cuda_get(NULL, 0);
    if (!cu || !cu->cuDeviceGetP2PAttribute)
        return 0;
    int ia = cuda_ordinal(cu, a->bdf), ib = cuda_ordinal(cu, b->bdf);
    CUdevice da, db;
    if (ia < 0 || ib < 0 || cu->cuDeviceGet(&da, ia) != CUDA_SUCCESS || cu->cuDeviceGet(&db, ib) != CUDA_SUCCESS)
        return 0;
    int access = 0, atomics = 0;
    if (cu->cuDeviceGetP2PAttribute(&access, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, da, db) != CUDA_SUCCESS ||
        cu->cuDeviceGetP2PAttribute(&atomics, CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED, da, db) != CUDA_SUCCESS)
        return 0;
    return access && atomics ? -1 : 0; /* NVLink, count unknown */
}

void gw_topo_opts_default(gw_topo_opts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->size = sizeof(*o);
    char why[256];
    const gw_cuda_t *cu = gw_cuda_get(why, sizeof(why));
    if (cu && cu->cuDeviceGetP2PAttribute)
        o->nvlink = cuda_nvlink;
}

static int cuda_query(void *arg, gw_doctor_cuda_t *out, char *why, size_t whylen)
{
    (void)arg;
    const gw_cuda_t *cu = gw_cuda_get(why, whylen);
    if (!cu)
        return -1;
    out->driver_version = cu->driver_version;
    out->ngpu = 0;
    for (int i = 0; i < cu->device_count && out->ngpu < GW_TOPO_MAX_GPU; i++) {
        CUdevice d;
        gw_doctor_gpu_t *g = &out->gpu[out->ngpu];
        memset(g, 0, sizeof(*g));
        if (cu->cuDeviceGet(&d, i) != CUDA_SUCCESS)
            continue;
        if (cu->cuDeviceGetPCIBusId(g->pci_bus_id, sizeof(g->pci_bus_id), d) != CUDA_SUCCESS)
            continue;
        if (cu->cuDeviceGetName(g->name, sizeof(g->name), d) != CUDA_SUCCESS)
            snprintf(g->name, sizeof(g->name), "CUDA device %d", i);
        int v = 0;
        /* drivers older than the attribute answer CUDA_ERROR_INVALID_VALUE: unknown */
        g->gdr_supported = cu->cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED, d) == CUDA_SUCCESS ? !!v : -1;
        g->dmabuf_supported = cu->cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, d) == CUDA_SUCCESS ? !!v : -1;
        out->ngpu++;
    }
    return 0;
}

void gw_doctor_env_default(gw_doctor_env_t *e)
{
    memset(e, 0, sizeof(*e));
    e->size = sizeof(*e);
    gw_topo_opts_default(&e->topo_opts);
    e->cuda_query = cuda_query;
    e->verbs_absent_why = "built without the verbs loader (src/transport/verbs)";
    e->live_absent_why = "built without the live test (needs the CUDA and verbs loaders)";
}
