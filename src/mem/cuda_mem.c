/* SPDX-License-Identifier: Apache-2.0 */
/* cuda_mem.c - memory type detection through the CUDA driver's pointer
 * attributes (mem layer).
 *
 * A range is CUDA device memory when every byte of it lies in device
 * allocations of one GPU: cuMemAlloc'ed or VMM-mapped (cuMemCreate +
 * cuMemMap), whole or in part, possibly spanning several adjacent
 * allocations.  Host memory (malloc'ed, mmap'ed, cuMemHostAlloc'ed or
 * registered) and managed memory are GW_MEM_HOST: the CPU can address them.
 */
#include <inttypes.h>
#include <stdio.h>

#include "cuda/cuda_wrap.h"
#include "mem/mem.h"

static void set_host(gw_mem_t *m)
{
    m->nident = 0;
    m->cuda_vmm = 0;
    m->type = GW_MEM_HOST;
    m->cuda_device = -1;
    m->pci_bus_id[0] = '\0';
}

gw_status_t gw_mem_detect(gw_core_t *c, gw_mem_t *m)
{
    char why[256], eb[160];
    set_host(m);
    if (!m->addr || m->len == 0)
        return GW_OK;
    const gw_cuda_t *cu = gw_cuda_get(why, sizeof(why));
    if (!cu)
        return GW_OK; /* no driver: every pointer is a host pointer */

    uint64_t p = (uint64_t)(uintptr_t)m->addr;
    uint64_t end = p + m->len;
    int dev0 = -1;
    int pieces = 0, vmm_all = 1;
    while (p < end) {
        int attrs[4] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                        CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_BUFFER_ID};
        unsigned memtype = 0;
        int ordinal = -1;
        int managed = 0;
        unsigned long long bufid = 0;
        void *data[4] = {&memtype, &ordinal, &managed, &bufid};
        CUresult r = cu->cuPointerGetAttributes(4, attrs, data, (CUdeviceptr)p);
        /* the driver answers a pointer it does not know with success and
         * memory type 0; an error is the driver failing, and taking the
         * range for host memory then would let a transport read device
         * memory as if it were host memory */
        if (r == CUDA_ERROR_NOT_INITIALIZED || r == CUDA_ERROR_DEINITIALIZED || r == CUDA_ERROR_NO_DEVICE) {
            /* CUDA is not set up in this process (a child forked after
             * the parent initialised it, a process that never used a GPU,
             * one shutting CUDA down): no device memory can be mapped
             * here, so the range is host memory */
            if (pieces == 0)
                return GW_OK;
            r = CUDA_ERROR_NOT_INITIALIZED; /* mid-range: the driver went away under us */
        }
        if (r != CUDA_SUCCESS)
            return gw_err(c, GW_ERR_CUDA,
                          "gw_mem_reg(addr=%p, len=%zu) failed: cannot tell what memory it is: "
                          "cuPointerGetAttributes(0x%" PRIx64 ") failed: %s",
                          m->addr, m->len, p, gw_cuda_strerror(r, eb, sizeof(eb)));
        if (memtype != CU_MEMORYTYPE_DEVICE || managed) {
            if (pieces == 0)
                return GW_OK; /* unknown to CUDA, pinned host or managed: host */
            return gw_err(c, GW_ERR_INVALID,
                          "gw_mem_reg(addr=%p, len=%zu) failed: the range starts in CUDA device "
                          "memory of device %d but byte offset %" PRIu64
                          " is not device memory (%s)",
                          m->addr, m->len, dev0, p - (uint64_t)(uintptr_t)m->addr,
                          managed ? "managed memory" : "host or unmapped memory");
        }
        if (pieces == 0) {
            dev0 = ordinal;
        } else if (ordinal != dev0) {
            return gw_err(c, GW_ERR_INVALID,
                          "gw_mem_reg(addr=%p, len=%zu) failed: the range spans two GPUs "
                          "(device %d, then device %d at offset %" PRIu64 ")",
                          m->addr, m->len, dev0, ordinal, p - (uint64_t)(uintptr_t)m->addr);
        }
        CUdeviceptr base = 0;
        size_t size = 0;
        r = cu->cuMemGetAddressRange(&base, &size, (CUdeviceptr)p);
        if (r != CUDA_SUCCESS || size == 0 || base + size <= p)
            return gw_err(c, GW_ERR_CUDA,
                          "gw_mem_reg(addr=%p, len=%zu) failed: cuMemGetAddressRange(0x%" PRIx64
                          ") failed: %s",
                          m->addr, m->len, p, gw_cuda_strerror(r, eb, sizeof(eb)));
        /* GPUDirect consumers must see every synchronous copy complete */
        int one = 1;
        cu->cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, base);
        /* a VMM mapping is the one kind a legacy IPC handle refuses */
        int legacy = 1;
        if (cu->cuPointerGetAttribute(&legacy, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, (CUdeviceptr)p) !=
            CUDA_SUCCESS)
            legacy = 1;
        vmm_all &= !legacy;
        if (pieces < GW_MEM_IDENT) {
            m->ident[pieces].base = base;
            m->ident[pieces].size = size;
            m->ident[pieces].bufid = bufid;
        }
        p = base + size;
        pieces++;
    }
    m->nident = pieces <= GW_MEM_IDENT ? (uint32_t)pieces : 0;
    m->cuda_vmm = vmm_all;
    m->type = GW_MEM_CUDA;
    m->cuda_device = dev0;
    gw_cuda_pci_bus_id(dev0, m->pci_bus_id, sizeof(m->pci_bus_id));
    return GW_OK;
}

int gw_mem_within(const gw_mem_t *p, const gw_mem_t *m)
{
    if (p->shm_fd >= 0 || p->type != m->type || (p->access & m->access) != m->access ||
        !gw_range_inside((uint64_t)(uintptr_t)p->addr, p->len, (uint64_t)(uintptr_t)m->addr, m->len))
        return 0;
    if (m->type == GW_MEM_HOST)
        return 1;
    if (!m->nident || !p->nident || p->cuda_device != m->cuda_device)
        return 0;
    for (uint32_t i = 0; i < m->nident; i++) {
        uint32_t j = 0;
        while (j < p->nident && (p->ident[j].base != m->ident[i].base || p->ident[j].size != m->ident[i].size ||
                                 p->ident[j].bufid != m->ident[i].bufid))
            j++;
        if (j == p->nident)
            return 0;
    }
    return 1;
}
