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
#if GW_HAVE_VERBS
#include "transport/verbs/ibv_syms.h"
#endif

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

#if GW_HAVE_VERBS
/* rdma-core's answer: ibv_reg_dmabuf_mr present, and each port's active MTU
 * (not in sysfs for InfiniBand). */
static int verbs_query(void *arg, gw_doctor_verbs_t *out, char *why, size_t whylen)
{
    (void)arg;
    const gw_ibv_t *ibv = gw_ibv_get(why, whylen);
    if (!ibv)
        return -1;
    snprintf(out->library, sizeof(out->library), "%s", ibv->lib);
    out->has_reg_dmabuf_mr = ibv->reg_dmabuf_mr != NULL;
    out->nports = 0;
    int n = 0;
    struct ibv_device **list = gw_ibv_device_list(ibv, &n);
    if (!list)
        return 0; /* the library works; ports stay unknown */
    for (int i = 0; i < n; i++) {
        struct ibv_context *ctx = ibv->open_device(list[i]);
        if (!ctx)
            continue;
        struct ibv_device_attr da;
        if (ibv->query_device(ctx, &da) == 0) {
            for (int p = 1; p <= da.phys_port_cnt && out->nports < 64; p++) {
                struct ibv_port_attr pa;
                if (gw_ibv_query_port(ibv, ctx, (uint8_t)p, &pa) != 0)
                    continue;
                snprintf(out->port[out->nports].dev, sizeof(out->port[0].dev), "%s",
                         ibv->get_device_name(list[i]));
                out->port[out->nports].port = p;
                /* enum ibv_mtu: 1 = 256 ... 5 = 4096; 0 before the port is up */
                out->port[out->nports].active_mtu =
                    pa.active_mtu >= IBV_MTU_256 && pa.active_mtu <= IBV_MTU_4096 ? 128 << pa.active_mtu : 0;
                out->nports++;
            }
        }
        ibv->close_device(ctx);
    }
    ibv->free_device_list(list);
    return 0;
}
#endif

void gw_doctor_env_default(gw_doctor_env_t *e)
{
    memset(e, 0, sizeof(*e));
    e->size = sizeof(*e);
    gw_topo_opts_default(&e->topo_opts);
    e->cuda_query = cuda_query;
#if GW_HAVE_VERBS
    e->verbs_query = verbs_query;
#else
    e->verbs_absent_why = "built without the verbs transport (infiniband/verbs.h was missing at build time)";
#endif
    e->live_absent_why = "no live test in this caller (`gpuwire doctor` has one)";
}
