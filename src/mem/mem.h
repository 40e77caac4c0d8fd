/* SPDX-License-Identifier: Apache-2.0 */
/* mem.h - registered memory regions (mem layer). */
#ifndef GW_MEM_MEM_H
#define GW_MEM_MEM_H

#include <stddef.h>
#include <stdint.h>

#include "core/core.h"
#include "core/transports.h"

#define GW_MEM_IDENT 8
struct gw_mem {
    gw_core_t *core;
    void *addr;
    size_t len;
    unsigned access;
    gw_mem_type_t type;
    int cuda_device;        /* ordinal, -1 for host */
    char pci_bus_id[16];
    uint64_t id;            /* random, nonzero; names the region in remote keys */
    uint32_t inflight;      /* local operations using the region */
    uint32_t incoming;      /* remote writes streaming into it right now */
    uint32_t lists;         /* local descriptor lists naming it (gw_dlist_local) */
    void *tl_reg[GW_TL_COUNT]; /* per-transport registration (e.g. verbs MR) */
    char path[512];         /* how each transport reaches it, with downgrade reasons */
    gw_list_t link;         /* context's list */
    int shm_fd;             /* gw_mem_alloc: the memfd behind it (shared with local peers), else -1 */
    /* CUDA memory: the allocations the range lies in, as gw_mem_detect
     * found them (base, size, the driver's buffer id, which no later
     * allocation reuses); nident 0 when more than GW_MEM_IDENT or host */
    struct { uint64_t base, size, bufid; } ident[GW_MEM_IDENT];
    uint32_t nident;
    /* CUDA memory: every allocation of the range is a VMM mapping (the
     * driver calls it not legacy-IPC capable: cuMemCreate + cuMemMap) */
    int cuda_vmm;
    /* set during gw_mem_reg only: the live registration this one lies in
     * (the registration cache found it); a transport may share what it
     * made for that one (verbs: its MRs, counted; intra: its GPU export)
     * instead of registering again.  NULL afterwards: the two are
     * independent, either may be deregistered first. */
    struct gw_mem *within;
    int cached;             /* the registration cache found it inside another */
};
typedef struct gw_mem gw_mem_t;

/* An rkey unpacked on an endpoint: what the initiator knows of a peer region. */
#define GW_RKEY_TL_BLOB_MAX 64
#define GW_RKEY_TL_KEY_MAX 80 /* room for a transport's parsed key part (gw_rkey_t.tl_key) */
struct gw_rkey {
    struct gw_ep *ep;
    uint64_t owner_uuid;    /* context that registered it */
    uint64_t id;            /* region id at the owner */
    uint64_t addr;
    uint64_t len;
    unsigned access;
    gw_mem_type_t type;
    /* transport blob for the endpoint's transport (e.g. verbs rkey), len 0 if none */
    uint8_t tl_blob[GW_RKEY_TL_BLOB_MAX];
    size_t tl_blob_len;
    /* the transport's parsed form of tl_blob, written once by its rkey_unpack
     * (transport/base/tl.h) and read by its operations; plain bytes, so a
     * struct copy of the key (batch key lists) copies it too */
    _Alignas(8) uint8_t tl_key[GW_RKEY_TL_KEY_MAX];
};
typedef struct gw_rkey gw_rkey_t;

/* Detects the memory type of [addr, addr+len): host, or CUDA device memory
 * (fills cuda_device/pci_bus_id) when the CUDA driver is loaded.  Implemented
 * in mem/cuda_mem.c; host-only builds report GW_MEM_HOST. */
gw_status_t gw_mem_detect(gw_core_t *c, gw_mem_t *m);

/* 1 when registration m (being made) may share what live registration p
 * made: p is not a gw_mem_alloc region, covers m's range with at least m's
 * access, is the same kind of memory, and for CUDA memory every
 * allocation m lies in is one p recorded (base, size and buffer id: an
 * allocation freed and made again at the same address has a new id). */
int gw_mem_within(const gw_mem_t *p, const gw_mem_t *m);

/* Shared host memory (mem/shm.c): len bytes (rounded up to pages) of a
 * memfd mapped MAP_SHARED, zeroed; local peers map the same pages from the
 * fd.  GW_ERR_NOMEM / GW_ERR_SYSTEM with the detail in c's message. */
gw_status_t gw_shm_alloc(gw_core_t *c, size_t len, void **addr, int *fd);
void gw_shm_free(void *addr, size_t len, int fd);
/* Maps a peer's shared memory fd read-write (len bytes from offset 0). */
gw_status_t gw_shm_map(gw_core_t *c, int fd, size_t len, void **addr);
void gw_shm_unmap(void *addr, size_t len);

/* True when [addr, addr+len) lies inside the region (overflow-safe). */
static inline int gw_range_inside(uint64_t base, uint64_t blen, uint64_t addr, uint64_t len)
{
    return addr >= base && len <= blen && addr - base <= blen - len;
}

#endif
