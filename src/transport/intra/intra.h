/* intra.h - the intra-host transport's shared region table and control
 * messages (transport layer).
 *
 * Design (docs/GPU.md has the long form):
 *  - Both endpoints run on one host (the handshake's host ids match and a
 *    process_vm_readv probe of the peer succeeds).
 *  - Control: one Unix stream socket per endpoint (abstract name made by the
 *    accepting side, in its address blob).  It carries notifications, tagged
 *    messages (eager payload, or a rendezvous the receiver pulls), and file
 *    descriptors (SCM_RIGHTS): each side's region table memfd at connect,
 *    VMM allocation fds on request.
 *  - Region table: each context exports a memfd of GW_INTRA_SLOTS slots, one
 *    per registered region (host regions with remote access, every GPU
 *    region).  The peer maps it and checks the slot's id before touching the
 *    region, counting itself in `inflight` meanwhile; gw_mem_dereg() clears
 *    the id and waits for inflight to drain, so a revoked key fails with
 *    GW_ERR_INVALID_KEY and never touches the memory.
 *  - Data: the initiator moves the bytes itself, one copy, no target CPU:
 *      host <-> host       process_vm_writev / process_vm_readv (CMA)
 *      any  <-> peer GPU   cuMemcpyAsync on a copy engine into the peer's
 *                          allocation, opened with cuIpcOpenMemHandle
 *                          (cuMemAlloc memory) or imported from a VMM fd
 *                          (cuMemImportFromShareableHandle + cuMemMap)
 *      GPU  <-> peer host  through a pinned bounce buffer and CMA
 *    Why CMA rather than a shm staging ring: user memory cannot be put into
 *    shared memory after the fact, a ring costs two copies and needs the
 *    target's CPU, CMA costs one copy and none of the target's time.
 *    Memory gpuwire allocates (gw_mem_alloc: a memfd) is shared from the
 *    start: slot kind SHM, the peer maps the fd and copies with memcpy
 *    (intra_shm.c), no system call per operation; small copies check the
 *    slot's id around reading it instead of counting themselves in inflight
 *    (no locked instruction: dereg frees such memory, see intra_shm_fast).  Small CMA copies posted
 *    back to back share one process_vm_writev/readv (intra_cma.c).  CMA's
 *    price is ptrace permission between the two processes (same user; under
 *    Yama ptrace_scope=1 only with GPUWIRE_INTRA=force, which calls
 *    prctl(PR_SET_PTRACER_ANY)); the probe finds out before the transport
 *    is chosen, so refusal falls back to tcp.
 */
#ifndef GW_TRANSPORT_INTRA_H
#define GW_TRANSPORT_INTRA_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "cuda/cuda_wrap.h"
#include "transport/base/tl.h"

#define GW_INTRA_SLOTS 1024
#define GW_INTRA_SEGS 8 /* allocations one GPU region may span */
#define GW_INTRA_MAGIC 0x677769746e726100ull /* probe word */
#define GW_INTRA_EAGER_MAX 8192

/* SHM: host memory from gw_mem_alloc, seg[0] its memfd (sent on FDREQ, as
 * VMM fds are); peers map it and copy with memcpy (intra_shm.c). */
enum { GW_INTRA_SLOT_HOST = 1, GW_INTRA_SLOT_IPC = 2, GW_INTRA_SLOT_VMM = 3, GW_INTRA_SLOT_SHM = 4 };

typedef struct gw_intra_seg {
    uint64_t base, size;  /* the allocation (cuMemGetAddressRange) */
    CUipcMemHandle ipc;   /* legacy handle of it (SLOT_IPC) */
    int32_t fd;           /* exporter's own fd of it (SLOT_VMM), meaningful there only */
    uint32_t pad;
} gw_intra_seg_t;

typedef struct gw_intra_slot {
    _Atomic uint64_t id;       /* region id; 0 while free or revoked */
    _Atomic uint32_t inflight; /* peers' accesses in progress */
    uint32_t kind;             /* GW_INTRA_SLOT_* */
    uint64_t addr, len;
    uint32_t access;
    int32_t device;            /* exporter's ordinal */
    char pci_bus_id[16];
    uint32_t nseg;
    uint32_t pad;
    gw_intra_seg_t seg[GW_INTRA_SEGS];
} gw_intra_slot_t;

/* Control messages: a 48-byte header (its first word: magic 0xA9, version,
 * type), then `len` payload bytes. */
enum gw_intra_msg {
    GW_INTRA_M_TABLE = 1,  /* fd attached: the sender's region table */
    GW_INTRA_M_NOTIFY = 2, /* a = value; b = 1: a counted notification of id a */
    GW_INTRA_M_EAGER = 3,  /* a = tag, b = sender op, payload (answered by FIN) */
    GW_INTRA_M_RTS = 4,    /* a = tag, b = length, c = address, d = sender op, e = slot+1 (0: host) */
    GW_INTRA_M_FIN = 5,    /* a = sender op, b = status (negative gw_status_t) */
    GW_INTRA_M_FDREQ = 6,  /* a = slot, b = region id */
    GW_INTRA_M_FDREP = 7,  /* a = slot, b = region id, c = fds attached, d = status */
    GW_INTRA_M_BYE = 8,
    GW_INTRA_M_PING = 9,   /* liveness probe while work is outstanding */
    GW_INTRA_M_PONG = 10
};

typedef struct gw_intra_hdr {
    uint32_t type, len;
    uint64_t a, b, c, d, e;
} gw_intra_hdr_t;

/* A peer's shared region mapped here (intra_shm.c). */
typedef struct gw_intra_shm {
    gw_list_t link;
    uint32_t slot;
    uint64_t id;
    uint64_t addr;  /* the region's address in its owner */
    size_t len;
    uint8_t *base;  /* the same bytes here */
} gw_intra_shm_t;
/* The mapping of peer slot+id (moved to the front), NULL when none; drops
 * mappings of the slot's earlier regions on the way. */
gw_intra_shm_t *gw_intra_shm_find(gw_list_t *maps, uint32_t slot, uint64_t id);
gw_status_t gw_intra_shm_add(gw_core_t *c, gw_list_t *maps, uint32_t slot, uint64_t id, int fd, uint64_t addr,
                             uint64_t len, gw_intra_shm_t **out);
void gw_intra_shm_drop_all(gw_list_t *maps);

/* Moves n host copies (loc[i] <-> rem[i], equal lengths) in as few
 * process_vm_writev/readv calls as IOV_MAX allows (intra_cma.c).  Returns
 * how many leading entries were wholly moved; *err is 0 when all were, else
 * the errno of the failure (the caller redoes the first entry not moved
 * alone, for its precise error, and batches the rest again). */
#define GW_INTRA_IOV_MAX 1024
struct iovec;
size_t gw_intra_cma_batch(pid_t pid, int to_remote, const struct iovec *loc, const struct iovec *rem, size_t n,
                          int *err);

extern const gw_tl_ops_t gw_tl_intra_ops;

/* intra_rkey.c: the rkey_unpack op (checks the key's intra part once and
 * keeps its parsed form in rk->tl_key, which the operations read) */
gw_status_t gw_intra_rkey_unpack(gw_tl_iface_t *iface, const uint8_t *blob, size_t len, gw_rkey_t *rk,
                                 char *why, size_t whylen);
typedef struct gw_intra_rkey {
    uint32_t present; /* 0: the key carries no intra part (its owner could not export the region) */
    uint32_t slot;    /* the owner's region table slot (< GW_INTRA_SLOTS) */
    uint64_t id;      /* the region id that slot must hold (the key's own) */
} gw_intra_rkey_t;
_Static_assert(sizeof(gw_intra_rkey_t) <= GW_RKEY_TL_KEY_MAX, "intra parsed key over rk->tl_key");
/* The parsed intra part of a key unpacked on an intra endpoint. */
static inline const gw_intra_rkey_t *gw_intra_rkey_of(const gw_rkey_t *k)
{
    return (const gw_intra_rkey_t *)(const void *)k->tl_key;
}

#endif
