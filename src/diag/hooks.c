/* SPDX-License-Identifier: Apache-2.0 */
/* hooks.c - the doctor's real CUDA, verbs and libfabric hooks, wired to the
 * run-time loaders of libcuda.so.1 (src/cuda), libibverbs.so.1
 * (src/transport/verbs) and libfabric.so.1 (src/transport/ofi) when this
 * build has them, plus the topology's NVLink
 * hook (topo/topo_cuda.c).  Without a loader the hook stays NULL and the
 * reason is what the doctor prints for the checks that needed it. */
#include <stdio.h>
#include <string.h>

#include "cuda/cuda_wrap.h"
#include "diag/doctor.h"
#if GW_HAVE_VERBS
#include "transport/verbs/ibv_syms.h"
#endif
#if GW_HAVE_OFI
#include "transport/ofi/ofi.h"
#endif

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

#if GW_HAVE_OFI
/* The ofi transport's fi_getinfo, for provider prov, with FI_HMEM first;
 * a domain named after the NIC (efa: "<device>-rdm") answers for it. */
static int ofi_query(void *arg, const char *prov, const char *nic, char *domain, size_t domlen, int *hmem,
                     char *why, size_t whylen)
{
    (void)arg;
    int broken = 0;
    const gw_fi_t *fi = gw_fi_get(why, whylen, &broken);
    if (!fi)
        return -1;
    char seen[256] = "";
    *hmem = 0;
    for (int h = 1; h >= 0; h--) {
        char w[400] = "";
        struct fi_info *list = gw_ofi_getinfo(fi, prov, NULL, h, 0, w, sizeof(w));
        if (!list) {
            if (!seen[0])
                snprintf(why, whylen, "%s", w);
            continue;
        }
        for (struct fi_info *i = list; i; i = i->next) {
            const char *dn = i->domain_attr && i->domain_attr->name ? i->domain_attr->name : "";
            if (!strncmp(dn, nic, strlen(nic))) {
                snprintf(domain, domlen, "%s", dn);
                *hmem = h;
                fi->freeinfo(list);
                return 1;
            }
            if (!strstr(seen, dn)) {
                size_t u = strlen(seen);
                snprintf(seen + u, sizeof(seen) - u, "%s%s", u ? ", " : "", dn);
            }
        }
        fi->freeinfo(list);
        snprintf(why, whylen, "its domains are %s, none named after %s", seen, nic);
    }
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
#if GW_HAVE_OFI
    e->ofi_query = ofi_query;
#else
    e->ofi_absent_why = "built without the ofi transport (rdma/fi_rma.h was missing at build time)";
#endif
    e->live_absent_why = "no live test in this caller (`gpuwire doctor` has one)";
}
