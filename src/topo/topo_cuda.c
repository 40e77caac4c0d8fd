/* SPDX-License-Identifier: Apache-2.0 */
/* topo_cuda.c - what the topology asks the CUDA driver (topo layer, over
 * the run-time loader in src/cuda): NVLink between two GPUs, and which GPU
 * this process works on, for the verbs transport's default NIC.
 *
 * NVLink from the CUDA driver: sysfs cannot show NVLink, and the driver API
 * has no link count (NVML has; gpuwire does not load NVML).  A GPU pair is
 * taken as NVLink-connected when the driver reports peer access AND native
 * peer atomics (CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED), which
 * NVIDIA GPUs provide over NVLink/NVSwitch and not over PCIe.  The count is
 * unknown, so the matrix shows "NV".  Recorded trees carry exact counts in
 * gpuwire-nvlink.txt instead. */
#include <ctype.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/settings.h"
#include "cuda/cuda_wrap.h"
#include "topo/topo.h"

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

gw_status_t gw_topo_process_nic(const gw_settings_t *s, char *nic, size_t niclen, char *why, size_t whylen)
{
    nic[0] = '\0';
    const char *lib = gw_settings_str(s, GW_SET_CUDA_LIB);
    void *h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
    if (!h) {
        snprintf(why, whylen, "the process has not loaded the CUDA driver (%s)", lib);
        return GW_ERR_NOT_FOUND;
    }
    dlclose(h);
    char cwhy[256];
    const gw_cuda_t *cu = gw_cuda_get(cwhy, sizeof(cwhy));
    if (!cu) {
        snprintf(why, whylen, "%s", cwhy);
        return GW_ERR_NOT_FOUND;
    }
    CUcontext cur = NULL;
    CUdevice dev = 0;
    if (cu->cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur)
        cu->cuCtxGetDevice(&dev);
    char bdf[32];
    gw_cuda_pci_bus_id((int)dev, bdf, sizeof(bdf));
    for (char *p = bdf; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    if (!bdf[0]) {
        snprintf(why, whylen, "no PCI address for GPU %d", (int)dev);
        return GW_ERR_NOT_FOUND;
    }
    char twhy[256];
    if (gw_topo_default_nic(gw_settings_sysfs_root(s), bdf, nic, niclen, twhy, sizeof(twhy)) != GW_OK) {
        nic[0] = '\0';
        snprintf(why, whylen, "no nearest NIC for GPU %d (%s): %s", (int)dev, bdf, twhy);
        return GW_ERR_NOT_FOUND;
    }
    snprintf(why, whylen, "nearest to GPU %d at %s", (int)dev, bdf);
    return GW_OK;
}
