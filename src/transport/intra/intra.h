/* SPDX-License-Identifier: Apache-2.0 */
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
 *  - Data: the initiator moves the bytes itself, one copy, no target CPU
 *    (one exception, the ring below: small batched entries, only while the
 *    target polls):
 *      host <-> host       process_vm_writev / process_vm_readv (CMA)
 *      any  <-> peer GPU   cuMemcpyAsync on a copy engine into the peer's
 *                          allocation, opened with cuIpcOpenMemHandle
 *                          (cuMemAlloc memory) or imported from a VMM fd
 *                          (cuMemImportFromShareableHandle + cuMemMap)
 *      GPU  <-> peer host  through a pinned bounce buffer and CMA
 *    Why CMA rather than a shm staging ring: user memory cannot be put into
 *    shared memory after the fact, a ring costs two copies and needs the
 *    target's CPU, CMA costs one copy and none of the target's time.  But
 *    CMA pins every remote iovec's pages in a round of its own, so batched
 *    puts of small entries (16 KiB or less on average) do go through a ring
 *    (intra_ring.c, layout below) while the target polls, and by CMA when
 *    it does not or does not take them in time.
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

/* Counts the caller in slot s's inflight while s still holds region id:
 * 1 held (the caller drops it with atomic_fetch_sub when done), 0 the
 * region is gone (revoked, or the slot reused) and nothing is held.  The
 * second look closes the race with gw_mem_dereg, which clears the id and
 * then waits for inflight to drain. */
static inline int gw_intra_slot_hold(gw_intra_slot_t *s, uint64_t id)
{
    if (atomic_load(&s->id) != id)
        return 0;
    atomic_fetch_add(&s->inflight, 1);
    if (atomic_load(&s->id) == id)
        return 1;
    atomic_fetch_sub(&s->inflight, 1);
    return 0;
}

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
    GW_INTRA_M_PONG = 10,
    GW_INTRA_M_RING = 11,  /* fd attached: the sender's ring (below), a = its length */
    GW_INTRA_M_AM = 12     /* a = handler id, payload (at most GW_AM_MAX bytes): an active message */
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

/* The ring (intra_ring.c): batched puts of small host entries that the
 * target copies into place.  The initiator creates it (a memfd, sent once
 * with GW_INTRA_M_RING) and owns its slots; the target maps it, and its
 * progress engine takes what is posted:
 *   FREE -> POSTED      initiator: descriptors and bytes written, then the
 *                       state (release), then hdr.posted += 1
 *   POSTED -> CLAIMED   target (compare-and-swap): checks every entry
 *                       against its own region table (id, kind, access,
 *                       bounds) before copying any, copies, writes status
 *                       and bad, then
 *   CLAIMED -> DONE     (release); the initiator reads the result, -> FREE
 *   POSTED -> FREE      initiator (compare-and-swap): the target did not
 *                       take it in time; the initiator moves those entries
 *                       by CMA itself, and the target never sees them.
 * The target writes hb (its progress count) on every progress call and
 * asleep while it blocks in epoll_wait, so the initiator offers work only
 * to a target that is polling.  Layout: the header, the slot states (a
 * cache line each), then nslots data areas of slot_bytes: n descriptors,
 * then from the next 64-byte boundary each entry's bytes at a 16-byte
 * boundary.  Both processes run this library's version (checked by magic
 * and version); the fields are native-endian. */
#define GW_INTRA_RING_MAGIC 0x676e69727767ull /* "gwring" */
#define GW_INTRA_RING_VERSION 1u
#define GW_INTRA_RING_SLOTS 64u
#define GW_INTRA_RING_SLOT_BYTES (36u << 10) /* two 16 KiB entries and their descriptors */
#define GW_INTRA_RING_DATA_OFF 8192u /* header and slot states before it */
enum { GW_INTRA_RS_FREE = 0, GW_INTRA_RS_POSTED = 1, GW_INTRA_RS_CLAIMED = 2, GW_INTRA_RS_DONE = 3 };

typedef struct gw_intra_ring_hdr {
    uint64_t magic;
    uint32_t version, nslots;
    uint32_t slot_bytes, pad0;
    uint64_t pad1[5];
    _Atomic uint64_t posted;  /* initiator: slots posted so far */
    uint64_t pad2[7];
    _Atomic uint64_t hb;      /* target: its progress count, on every progress call */
    _Atomic uint32_t asleep;  /* target: 1 while it blocks in epoll_wait */
    uint32_t pad3[13];
} gw_intra_ring_hdr_t;

typedef struct gw_intra_ring_slot {
    _Atomic uint32_t state;   /* GW_INTRA_RS_* */
    uint32_t n;               /* entries */
    uint32_t bytes;           /* the slot's data bytes used, descriptors included */
    int32_t status;           /* DONE: gw_status_t */
    uint32_t bad;             /* DONE with an error: the slot's entry that failed */
    uint32_t pad[11];
} gw_intra_ring_slot_t;

typedef struct gw_intra_ring_desc {
    uint32_t slot;            /* the target's region table slot */
    uint32_t len;             /* > 0 */
    uint64_t id;              /* the region id that slot must hold */
    uint64_t raddr;           /* in the target's address space */
} gw_intra_ring_desc_t;
_Static_assert(sizeof(gw_intra_ring_hdr_t) == 192, "ring header layout");
_Static_assert(sizeof(gw_intra_ring_slot_t) == 64, "ring slot layout");
_Static_assert(sizeof(gw_intra_ring_desc_t) == 24, "ring descriptor layout");
_Static_assert(sizeof(gw_intra_ring_hdr_t) + GW_INTRA_RING_SLOTS * sizeof(gw_intra_ring_slot_t) <=
               GW_INTRA_RING_DATA_OFF, "ring header and states over the data");

/* Bytes of a ring. */
static inline size_t gw_intra_ring_len(void)
{
    return GW_INTRA_RING_DATA_OFF + (size_t)GW_INTRA_RING_SLOTS * GW_INTRA_RING_SLOT_BYTES;
}
static inline gw_intra_ring_slot_t *gw_intra_ring_slot(void *ring, uint32_t i)
{
    return (gw_intra_ring_slot_t *)((uint8_t *)ring + sizeof(gw_intra_ring_hdr_t)) + i;
}
static inline uint8_t *gw_intra_ring_data(void *ring, uint32_t i)
{
    return (uint8_t *)ring + GW_INTRA_RING_DATA_OFF + (size_t)i * GW_INTRA_RING_SLOT_BYTES;
}
/* Where a slot's entry bytes start, after n descriptors. */
static inline size_t gw_intra_ring_data_start(uint32_t n)
{
    return ((size_t)n * sizeof(gw_intra_ring_desc_t) + 63u) & ~(size_t)63u;
}
void gw_intra_ring_init(void *ring);
/* A mapped ring of len bytes from a peer: GW_OK, or GW_ERR_PROTOCOL /
 * GW_ERR_VERSION with the reason. */
gw_status_t gw_intra_ring_accept(const void *ring, size_t len, char *why, size_t whylen);
/* How many of the n lengths (each > 0) fit one slot, from the first. */
uint32_t gw_intra_ring_fit(const uint64_t *len, size_t stride, uint32_t n);
/* Checks a slot's n descriptors (a private copy) and its byte count against
 * the target's region table before anything is copied: every entry inside
 * a host region of the table holding its id, with remote write access, the
 * data inside the slot.  GW_OK, or the status of the first bad entry (*bad,
 * why says which and why); table NULL checks the layout only. */
gw_status_t gw_intra_ring_check(const gw_intra_slot_t *table, const gw_intra_ring_desc_t *d, uint32_t n,
                                uint32_t bytes, uint32_t *bad, char *why, size_t whylen);
/* Copies checked entries into place: entry i's bytes from data (the slot's
 * entry bytes) to d[i].raddr. */
void gw_intra_ring_unpack(const gw_intra_ring_desc_t *d, uint32_t n, const uint8_t *data);

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
