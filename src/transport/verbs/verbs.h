/* SPDX-License-Identifier: Apache-2.0 */
/* verbs.h - the verbs transport's private objects (transport layer).
 *
 *   gw_verbs_iface_t  one per context: device, port, PD, completion channel,
 *                     registration cache; embeds gw_tl_iface_t first.
 *   gw_verbs_ep_t     one per endpoint: a CQ, nqps RC queue pairs, eager
 *                     bounce and receive buffers; embeds gw_tl_ep_t first.
 *   gw_verbs_reg_t    a region's registration (several MRs when the region is
 *                     larger than the device's largest MR).
 *
 * Files: ibv_loader.c (dlopen), verbs_dev.c (sysfs port/GID choice, address
 * blob), verbs_mr.c (registration, cache, dma-buf), verbs_iface.c (context
 * level, polling, ops table), verbs_ep.c (endpoint life: queue pairs,
 * failure), verbs_post.c (operations, posting), verbs_cq.c (completions,
 * receive side, progress), verbs_stage.c and verbs_stage_own.c (staged GPU
 * memory: initiator and owner halves), verbs_batch.c
 * (batched transfers), verbs_iov.c (the scatter/gather primitive rma_iov
 * and cancel), verbs_am.c (active messages), verbs_rkey.c (the verbs part
 * of a remote key).
 */
#ifndef GW_VERBS_VERBS_H
#define GW_VERBS_VERBS_H

#include <stddef.h>
#include <stdint.h>

#include "mem/staging.h"
#include "transport/base/op_table.h"
#include "transport/base/tl.h"
#include "transport/verbs/ibv_syms.h"

#define GW_VERBS_MAX_QPS 8
#define GW_VERBS_MAX_GIDS 8
#define GW_VERBS_MAX_MRS 11 /* MR pieces of one region: fits the 64-byte rkey blob */

/* ---- device, port and GID choice (verbs_dev.c) ---------------------------- */
enum { GW_VERBS_LL_IB = 1, GW_VERBS_LL_ETH = 2 };
enum { GW_GID_IB = 0, GW_GID_ROCE_V1 = 1, GW_GID_ROCE_V2 = 2 };

typedef struct gw_verbs_gid {
    uint8_t index;
    uint8_t type;       /* GW_GID_* */
    uint8_t raw[16];
    uint8_t v4;         /* IPv4-mapped (::ffff:a.b.c.d) */
    uint8_t link_local; /* fe80::/10 */
    char ndev[32];      /* netdev the GID belongs to (RoCE) */
} gw_verbs_gid_t;

/* An RDMA port as sysfs describes it. */
typedef struct gw_verbs_port {
    char dev[64];
    int port;
    int active;
    int link_layer; /* GW_VERBS_LL_* */
    uint16_t lid;
    int numa_node;  /* -1 when unknown */
    int ngids;      /* usable GIDs, best first (RoCE v2 IPv4, v2 global v6, v2 link-local) */
    gw_verbs_gid_t gids[GW_VERBS_MAX_GIDS];
    char note[128]; /* why not usable, "" when usable */
} gw_verbs_port_t;

/* Reads one port (dev, port) from sysfs under root.  -1 if it does not exist. */
int gw_verbs_port_read(const char *root, const char *dev, int port, gw_verbs_port_t *out);
/* Chooses the port: want is GPUWIRE_IB_DEVICE ("", "dev" or "dev:port");
 * gid_index is GPUWIRE_IB_GID_INDEX (-1 = auto); numa_node the memory's node
 * (-1 unknown).  On failure why lists every candidate and why it was
 * rejected.  On success why says how the port was picked. */
gw_status_t gw_verbs_port_select(const char *root, const char *want, int gid_index, int numa_node,
                                 gw_verbs_port_t *out, char *why, size_t whylen);
/* Formats a GID for messages: "::ffff:192.168.77.1" or "fe80::..." */
void gw_verbs_gid_str(const uint8_t raw[16], char *buf, size_t len);

/* The address blob ep_prepare() hands to the handshake (little-endian, versioned). */
#define GW_VERBS_ADDR_VERSION 1
typedef struct gw_verbs_addr {
    uint8_t version;
    uint8_t link_layer;
    uint8_t port;
    uint8_t mtu;          /* enum ibv_mtu of the port's active MTU */
    uint16_t lid;
    uint8_t nqps;
    uint8_t ngids;
    uint32_t max_msg;     /* largest message (port max_msg_sz) */
    uint32_t qpn[GW_VERBS_MAX_QPS];
    uint32_t psn[GW_VERBS_MAX_QPS];
    gw_verbs_gid_t gids[GW_VERBS_MAX_GIDS]; /* index, type, raw only */
    uint8_t subnet[8];    /* IB: GID 0 prefix */
    char dev[32];
    uint32_t features;    /* GW_VERBS_FEAT_*: appended after the GIDs; 0 from
                             a peer whose blob ends there (built before it) */
} gw_verbs_addr_t;
#define GW_VERBS_FEAT_WRITE_RDV 0x1u /* understands CT_CTS / CT_WFIN (rendezvous by WRITE) */
#define GW_VERBS_FEAT_STAGED 0x4u    /* fetches a staged sender's message by chunk requests (RTS_STAGED,
                                        CT_SREQ/CT_SACK) and serves them */
#define GW_VERBS_FEAT_SBATCH 0x8u    /* serves chunk requests with a piece list (SREQ_LIST: batches
                                      * touching staged GPU memory) */
#define GW_VERBS_FEAT_WRITE_IMM 0x2u /* a CTS may ask for striped WRITEs closed by a WRITE_WITH_IMM
                                        per queue pair; keeps a zero-length receive pool on QPs 1.. */
#define GW_VERBS_FEAT_SEND_IMM 0x10u /* takes eager messages without a header: SEND_WITH_IMM on QP 0,
                                        the tag (below 2^32) in the immediate, the length from the
                                        completion; sent to a peer announcing it */
#define GW_VERBS_FEAT_AM 0x20u       /* takes active messages (CT_AM, verbs_am.c); sent only to a peer
                                        announcing it */

size_t gw_verbs_addr_pack(const gw_verbs_addr_t *a, uint8_t *buf, size_t cap);
gw_status_t gw_verbs_addr_unpack(gw_verbs_addr_t *a, const uint8_t *buf, size_t len);

/* The GIDs two sides use toward each other.  Returns 0 and fills the own
 * and peer GID positions (into own->gids / peer->gids), or -1 with why. */
int gw_verbs_gid_pair(const gw_verbs_gid_t *own, int nown, const gw_verbs_gid_t *peer, int npeer,
                      int *own_i, int *peer_i, char *why, size_t whylen);

/* ---- registration (verbs_mr.c) -------------------------------------------- */
typedef struct gw_verbs_reg {
    uint64_t base;   /* address of the first byte */
    uint64_t len;
    uint64_t chunk;  /* bytes per MR (the last may be shorter) */
    int nmr;
    int shares; /* other registrations using these MRs (the registration cache): the last one destroys them */
    struct ibv_mr *mr[GW_VERBS_MAX_MRS];
} gw_verbs_reg_t;

typedef struct gw_verbs_iface gw_verbs_iface_t;

/* Registers [addr, addr+len) with ibv access flags, split into pieces no
 * larger than the device's largest MR.  Errors name the device, range and
 * cause; a locked-memory limit too small gives GW_ERR_MEMLOCK with the limit
 * and the fix. */
gw_status_t gw_verbs_reg_create(gw_verbs_iface_t *vif, void *addr, size_t len, int access,
                                gw_verbs_reg_t **out);
void gw_verbs_reg_destroy(gw_verbs_iface_t *vif, gw_verbs_reg_t *reg);
/* lkey/rkey of the piece holding addr, and bytes left in that piece. */
int gw_verbs_reg_piece(const gw_verbs_reg_t *reg, uint64_t addr, uint32_t *lkey, uint32_t *rkey,
                       uint64_t *left);

/* Registration cache for buffers passed without a registered region. */
typedef struct gw_verbs_rc_entry {
    gw_list_t link;  /* LRU order, most recent first */
    uint64_t start, end;
    int access;
    unsigned refs;
    gw_verbs_reg_t *reg;
} gw_verbs_rc_entry_t;

/* Finds or makes a registration covering [addr, addr+len) with at least
 * `access`; the entry is held until gw_verbs_rcache_put(). */
gw_status_t gw_verbs_rcache_get(gw_verbs_iface_t *vif, const void *addr, size_t len, int access,
                                gw_verbs_rc_entry_t **out);
void gw_verbs_rcache_put(gw_verbs_iface_t *vif, gw_verbs_rc_entry_t *e);
void gw_verbs_rcache_flush(gw_verbs_iface_t *vif);

/* dma-buf registration (for GPU memory: the cuda side passes the fd it
 * exported).  GW_ERR_UNSUPPORTED with the reason when the library or the
 * device cannot (libibverbs without ibv_reg_dmabuf_mr, EOPNOTSUPP). */
gw_status_t gw_verbs_reg_dmabuf(gw_verbs_iface_t *vif, int fd, uint64_t offset, size_t len,
                                uint64_t iova, int access, struct ibv_mr **out);

/* ---- the verbs part of a packed remote key (verbs_rkey.c) --------------- */
/* version 1: u8 1, u8 n, u16 0, u64 base, u64 chunk, n x u32 rkey (MRs)
 * version 2: u8 2, u8 flags (0), u16 0: a GPU region on the staging rung,
 *            reached through its owner's bounce buffers (no rkey) */
#define GW_VERBS_RKEY_MR 1
#define GW_VERBS_RKEY_STAGED 2
typedef struct gw_verbs_rkey_info {
    int version;   /* GW_VERBS_RKEY_MR or GW_VERBS_RKEY_STAGED */
    int n;         /* MR pieces (version 1) */
    uint64_t base, chunk;
    uint32_t rkey[GW_VERBS_MAX_MRS];
} gw_verbs_rkey_info_t;
/* Parses a verbs rkey blob; GW_ERR_INVALID_KEY with why when malformed. */
gw_status_t gw_verbs_rkey_parse(const uint8_t *b, size_t len, gw_verbs_rkey_info_t *out, char *why,
                                size_t whylen);
/* Writes the blob for info into buf (cap bytes); returns its length, 0 if cap is too small. */
size_t gw_verbs_rkey_format(const gw_verbs_rkey_info_t *info, uint8_t *buf, size_t cap);
/* The ops table's rkey_unpack: parses the key's verbs part once, into
 * rk->tl_key (a gw_verbs_rkey_info_t; version 0 when the key has no verbs
 * part, which the operations refuse with GW_ERR_INVALID_KEY). */
gw_status_t gw_verbs_rkey_unpack(gw_tl_iface_t *iface, const uint8_t *blob, size_t len, gw_rkey_t *rk,
                                 char *why, size_t whylen);
/* The parsed verbs part of an unpacked key. */
static inline const gw_verbs_rkey_info_t *gw_verbs_rkey_of(const gw_rkey_t *k)
{
    return (const gw_verbs_rkey_info_t *)(const void *)k->tl_key;
}
/* rkey of the MR piece holding raddr and the bytes left in it; -1 when the
 * key has no MR pieces (no verbs part, staged, or raddr below the region). */
static inline int gw_verbs_key_piece(const gw_verbs_rkey_info_t *ki, uint64_t raddr, uint32_t *rkey,
                                     uint64_t *left)
{
    if (ki->version != GW_VERBS_RKEY_MR)
        return -1;
    if (ki->n == 0) { /* a zero-length region: only zero-length operations reach it */
        *rkey = 0;
        *left = UINT64_MAX;
        return 0;
    }
    if (raddr < ki->base)
        return -1;
    uint64_t i = ki->n == 1 ? 0 : (raddr - ki->base) / ki->chunk; /* (one piece: no division) */
    if (i >= (uint64_t)ki->n)
        i = (uint64_t)ki->n - 1;
    *rkey = ki->rkey[i];
    *left = (i + 1) * ki->chunk - (raddr - ki->base);
    return 0;
}

/* ---- staged GPU memory (verbs_stage.c, "staging rung") ---------------------------------- */
/* One staging engine (mem/staging.h) with its bounce slots registered as MRs.
 * Per device two: one for operations this side starts, one for the chunks
 * peers ask it to move (separate so a loopback cannot starve itself). */
#define GW_VERBS_STG_DEVS 8
#define GW_VERBS_STG_CREDITS 16 /* chunk requests in flight to the peer per endpoint */
#define GW_VERBS_STG_CHUNKS 64  /* initiator chunks in flight per endpoint */
typedef struct gw_verbs_stgeng {
    gw_staging_t *st;
    struct ibv_mr **mr; /* per slot, registered on first use */
    unsigned nslots;
    int device;
} gw_verbs_stgeng_t;

struct gw_verbs_sreq;
/* A chunk of a staged operation this side started. */
typedef struct gw_verbs_schunk {
    struct gw_verbs_sreq *sr; /* NULL: free */
    uint8_t state;
    uint8_t remote;           /* a chunk request to the peer (uses a credit) */
    uint16_t gen;
    size_t off;
    uint32_t len;
    gw_stage_slot_t *slot;
    /* a batch's chunk (verbs_stage.c, "staged batches"): its first entry and
     * the offset in it; the posting cursor (entry, offset, bytes) of its
     * RDMA WRITEs or READs to a registered peer region, and how many of
     * those are still out */
    uint32_t e0, pe;
    uint64_t eoff0, poff;
    uint32_t pdone, wrs;
} gw_verbs_schunk_t;

/* One piece of a chunk request with a list (SREQ_LIST): the owner's
 * address, the initiator's address and rkey, the length. */
typedef struct gw_verbs_lpiece {
    uint64_t taddr, iaddr;
    uint32_t len, irkey;
} gw_verbs_lpiece_t;

/* A chunk the peer asked this side to move (target of a staged operation). */
typedef struct gw_verbs_sjob {
    uint8_t state;            /* 0 free */
    uint8_t dir;              /* 0: peer puts (we READ and H2D), 1: peer gets (we D2H and WRITE) */
    uint8_t by_rdv;           /* ident is a rendezvous send of ours, not a region id */
    uint32_t cookie;
    uint64_t ident;
    uint64_t taddr, iaddr;
    uint32_t irkey, len, done, piece;
    gw_status_t status;
    gw_mem_t *mem;            /* the region (NULL for a send buffer or once revoked) */
    int device;
    gw_stage_slot_t *slot;
    gw_verbs_stgeng_t *eng;
    /* a chunk request with a list of pieces (a batch's): moved in passes of
     * at most one slot; cursor (pi, po), the pass's start (pi0, po0), bytes
     * of the pass posted, WRs out; bad: 1 + the piece refused */
    gw_verbs_lpiece_t *list;
    uint32_t nlist, pi, po, pi0, po0, pposted, wrs, bad;
} gw_verbs_sjob_t;

/* ---- context level (verbs_iface.c) --------------------------------------- */
struct gw_verbs_iface {
    gw_tl_iface_t super;
    unsigned wd_passes;      /* idle progress passes (the completion watchdog's clock) */
    const gw_ibv_t *ibv;
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_comp_channel *chan;
    gw_io_t chan_io;
    gw_io_t async_io;
    struct ibv_device_attr dattr;
    struct ibv_port_attr pattr;
    gw_verbs_port_t port;
    char how[256];        /* how the port was chosen */
    int nqps;
    uint8_t timeout, retry_cnt;
    uint64_t max_mr;      /* largest MR piece */
    int gpu_mrs;          /* GPU regions registered for GPUDirect RDMA (dma-buf or peermem) */
    uint64_t split_min;   /* transfers this large are striped over the QPs */
    int rdv_read;         /* GPUWIRE_IB_RDV=read: rendezvous always by the receiver's READ */
    int rcache_on;
    gw_list_t eps;
    gw_list_t rcache;     /* gw_verbs_rc_entry_t, most recent first */
    unsigned rcache_n;
    uint64_t rcache_hits, rcache_misses;
    /* staging rung: engines per (device, role), regions on the rung */
    gw_verbs_stgeng_t *stg_eng[GW_VERBS_STG_DEVS][2];
    int stg_regions;
};

/* ---- endpoint (verbs_ep.c, verbs_post.c, verbs_cq.c) ---------------------- */
typedef struct gw_verbs_wr {
    gw_request_t *req; /* NULL for control messages */
    uint16_t kind;
    uint16_t slot;     /* bounce slot, 0xffff if none */
    uint32_t len;
    uint32_t aux;      /* staged chunk / job index */
    uint16_t flags;    /* WRF_* */
} gw_verbs_wr_t;
/* A WR of an untracked put (the caller keeps no request: its errors reach
 * the next flush) holding no bounce slot or cached registration: it may
 * stay unsignalled and unretired until a flush, a close or a full queue
 * needs it (verbs_post.c, "Signalling"). */
#define WRF_LAZY 1u

typedef struct gw_verbs_qp {
    struct ibv_qp *qp;
    uint32_t psn;
    uint32_t depth;    /* send queue entries */
    uint32_t used;     /* entries not yet retired (signalled or not) */
    uint32_t unsig;    /* posted since the last signalled one */
    uint32_t prompt;   /* entries not yet retired that are not WRF_LAZY */
    uint64_t sig_end;  /* sequence + 1 of the last signalled WR posted (0: none yet) */
    uint64_t head;     /* sequence of the next WR */
    uint64_t tail;     /* oldest WR not retired */
    gw_verbs_wr_t *ring; /* a record per WR in flight: ring_mask + 1 (a power of two >= depth) of them */
    uint32_t ring_mask;
    uint32_t imm_repost; /* QPs 1..: zero-length receives to post (again): gw_verbs_post_imm_recvs */
} gw_verbs_qp_t;

/* The ring record of WR sequence seq (a mask, not a division: under the
 * Soft-RoCE guest's emulation a division is a helper call, and a put's
 * records are found several times between its doorbell and its retiring) */
static inline gw_verbs_wr_t *gw_verbs_ring_at(const gw_verbs_qp_t *q, uint64_t seq)
{
    return &q->ring[seq & q->ring_mask];
}

/* The newest ring record claimed on QP q (gw_verbs_wr_add's): where a
 * staged WR's chunk or job index (aux) goes. */
static inline gw_verbs_wr_t *gw_verbs_ring_newest(const gw_verbs_qp_t *q)
{
    return gw_verbs_ring_at(q, q->head - 1);
}

/* A control message waiting for a send slot. */
typedef struct gw_verbs_ctrl {
    uint8_t type;
    uint32_t status;
    uint64_t a, b;
} gw_verbs_ctrl_t;

typedef struct gw_verbs_ep {
    gw_tl_ep_t super;
    gw_verbs_iface_t *vif;
    gw_list_t link;          /* iface's list */
    struct ibv_cq *cq;
    unsigned cq_unacked;
    int cq_armed;
    uint64_t active_ns;      /* first idle pass after the last post or completion; 0 unset */
    unsigned idle_polls;     /* idle progress passes since then */
    int nqps;
    gw_verbs_qp_t qps[GW_VERBS_MAX_QPS];
    int connected;           /* (failed or not: the base's latch says, vep_failed) */
    unsigned stg_returned;   /* parked bounce slots given back by the drain */
    int draining;            /* failed: drain WRs whose flush completion is still to come
                              * (then the NIC touches none of our buffers: parked bounce
                              * slots go back to their engine, see ep_drain) */
    gw_list_t pending;       /* requests not fully posted, FIFO (req->tl_link) */
    gw_list_t rdv_recvs;     /* rendezvous receives in progress (req->tl_link) */
    /* bounce (send) slots and receive buffers, registered once */
    uint8_t *sbuf;
    struct ibv_mr *smr;
    uint16_t *sfree;
    unsigned nsfree;
    uint8_t *rbuf;
    struct ibv_mr *rmr;
    unsigned nrecv;
    uint16_t repost[32];     /* receive buffers to hand back after this poll */
    unsigned nrepost;
    unsigned imm_due; /* zero-length receives consumed on QPs 1.. since the last repost_flush */
    /* control messages waiting for a slot */
    gw_verbs_ctrl_t ctrlq[64];
    unsigned ctrl_head, ctrl_count;
    /* rendezvous sends waiting for the receiver's FIN or CTS, and receives
     * waiting for the sender's WRITEs (CTS sent): the base op table, capped
     * at GW_VERBS_RDV_MAX; its narrow ids (RDV_ID_BITS) are on the wire */
    gw_op_table_t rdv;
    /* chosen path */
    gw_verbs_addr_t local, peer;
    int sgid_i, dgid_i;      /* positions in local.gids / peer.gids, -1 for IB */
    int path_mtu;            /* enum ibv_mtu */
    uint32_t max_inline;
    /* a small put's inline WRITE, its fixed fields set once (verbs_ep.c):
     * the post writes only its address, length, key, id and flags (under
     * the guest's emulation, building a zeroed ibv_send_wr per put was ~23
     * instructions on the round trip) */
    struct ibv_send_wr put_wr;
    struct ibv_sge put_sge;
    uint64_t wr_posted, wr_signalled, post_calls; /* counters for describe/tests */
    /* a pass's chains (struct batch): room for a whole send queue per queue pair */
    struct ibv_send_wr *chain_wr;
    struct ibv_sge (*chain_sge)[2]; /* (a second one: eager sends, see post_req in verbs_post.c) */
    int chain_cap;                   /* WRs per queue pair: the send queue's depth */
    uint64_t wr_covers;      /* zero-length WRITEs posted to complete an unsignalled tail (gw_verbs_cover) */
    gw_request_t *lazy_group; /* open group of untracked puts posted with no api request
                               * (gw_verbs_put_direct): one request of ours stands in
                               * base->outstanding for all of them until they retire */
    uint64_t wr_untracked;   /* puts posted that way */
    uint64_t wr_direct;      /* tracked puts posted before their request was built (gw_verbs_put_direct) */
    uint64_t cq_polls, cq_wcs; /* ibv_poll_cq calls and the completions they returned */
    /* the completion watchdog (gw_verbs_watchdog): cq_wcs and wr_posted at
     * its last look, and since when they stood still with a signalled work
     * request outstanding */
    uint64_t wd_wcs, wd_posted, wd_ns;
    uint64_t rdv_by_write, rdv_by_read; /* rendezvous receives of ours, by how the data came */
    uint64_t eager_gathered; /* eager sends whose payload went from the user's registered buffer */
    uint64_t eager_imm;      /* eager sends without a header (GW_VERBS_FEAT_SEND_IMM) */
    int max_send_sge;        /* 2 where the device takes a header and a payload SGE, else 1 */
    /* the scatter/gather primitive (verbs_iov.c): SGEs per RDMA WRITE and
     * per RDMA READ of a list (the queue pairs' max_send_sge, the device's
     * max_sge_rd), the pass's pool of SGEs for WRs of more than two
     * (GW_VERBS_IOV_POOL, made on the first list), counters */
    int iov_sge, iov_sge_rd;
    struct ibv_sge *iov_pool;
    uint64_t iov_lists, iov_wrs, iov_entries;
    /* active messages waiting for a bounce slot (verbs_am.c), FIFO; counters */
    gw_list_t am_q;
    uint64_t am_sent, am_recv;
    /* staged GPU memory (verbs_stage.c) */
    gw_list_t stg_reqs;      /* gw_verbs_sreq_t in posting order */
    int stg_live;            /* staged work may exist: set when some starts, cleared by a
                              * stg_progress() pass that found none (progress skips the scans) */
    gw_verbs_schunk_t schunk[GW_VERBS_STG_CHUNKS];
    unsigned stg_credits;    /* chunk requests to the peer in flight */
    gw_verbs_sjob_t sjob[GW_VERBS_STG_CREDITS];
    uint64_t stg_ops, stg_bytes, stg_served; /* counters for describe/tests */
    /* bounce slots a failed endpoint's NIC may still read or write: given
     * back only once the QPs are destroyed (gw_verbs_stage_ep_fini) */
    struct {
        gw_verbs_stgeng_t *eng;
        gw_stage_slot_t *slot;
    } stg_zombie[GW_VERBS_STG_CHUNKS + GW_VERBS_STG_CREDITS];
    unsigned stg_nzombie;
} gw_verbs_ep_t;

/* ep operations and internals shared with verbs_iface.c */
int gw_verbs_ep_progress(gw_verbs_ep_t *ep);
/* Posts the zero-length receives counted in each QP's imm_repost (QPs 1..):
 * 0, or ibv_post_recv's error with *failed_qi set. */
int gw_verbs_post_imm_recvs(gw_verbs_ep_t *ep, int *failed_qi);
/* staging rung (verbs_stage.c): region revoked (fails the peer's chunks on it),
 * endpoint teardown (drops staged work), iface teardown (engines, slot MRs) */
void gw_verbs_stage_revoke(gw_verbs_iface_t *vif, gw_mem_t *m);
void gw_verbs_stage_ep_fini(gw_verbs_ep_t *ep);
void gw_verbs_stage_fini(gw_verbs_iface_t *vif);
void gw_verbs_ep_fail_qp(gw_verbs_ep_t *ep, struct ibv_qp *qp, const char *why);

extern const gw_tl_ops_t gw_tl_verbs_ops;

/* Wire sizes and limits. */
#define GW_VERBS_HDR 40
#define GW_VERBS_EAGER_MAX 8192 /* payload bytes of an eager message */
#define GW_VERBS_SLOT (GW_VERBS_HDR + GW_VERBS_EAGER_MAX)
#define GW_VERBS_NSLOTS 128
#define GW_VERBS_NRECV 256
/* Receive work request ids: bit 63 marks a receive; bit 62 one of the
 * zero-length receives on QPs 1.. (low byte: the QP), which only a
 * rendezvous WRITE_WITH_IMM consumes; otherwise the low bits index a bounce
 * buffer of QP 0.  Bit 61 (send or receive) marks the drain markers of a
 * failed endpoint (verbs_ep.c, gw_verbs_ep_drain). */
#define GW_VERBS_RECV_WRID (1ull << 63)
#define GW_VERBS_IMMQ_WRID (1ull << 62)
#define GW_VERBS_IMM_RECVS 128u /* zero-length receives kept posted on each QP 1.. */
#define GW_VERBS_ARM_IDLE_NS 200000ull /* keep polling this long after activity */
#define GW_VERBS_IDLE_CLOCK 512u       /* idle progress passes per clock read */
/* Send queue depth per queue pair.  A pass posts what a queue pair has room
 * for in one ibv_post_send (struct batch), so a batch of thousands of
 * entries goes out in a few doorbells: with 256, a 4096-entry batch took
 * 64+ posts, and Soft-RoCE, which runs a queue pair's requester inside the
 * poster's ibv_post_send until a budget of packets, then hands the rest to
 * its workers, did all of it on the posting CPU (4096 x 16 KiB: 0.58x of
 * one contiguous put, ~1.0x with whole-queue chains; docs/PERFORMANCE.md). */
#define GW_VERBS_SQ_DEPTH 1024
#define GW_VERBS_SIG_DEEP 16 /* tracked WRs in flight from which a pass's last one may go unsignalled
                              * (at most depth/4; verbs_post.c, "Signalling") */

/* ==== endpoint internals shared by verbs_ep.c (lifecycle, failure), verbs_post.c
 * (posting), verbs_cq.c (completions, receive side), verbs_stage.c (staged GPU
 * memory) and verbs_batch.c (batched transfers).  Not for other layers. ==== */

enum { WR_PUT = 1, WR_GET, WR_IMM, WR_SENDMSG, WR_RDV_READ, WR_RDV_IMM, WR_COVER };
enum { CT_EAGER = 1, CT_RTS, CT_FIN, CT_NOTIFY };
enum {
    TLF_PREP = 1u << 0,      /* local buffer keys resolved */
    TLF_ALLPOSTED = 1u << 1, /* every WR of the request is posted */
    TLF_DATA = 1u << 2,      /* put_notify: data WRs posted, notification next */
    TLF_WAIT_FIN = 1u << 3,  /* rendezvous send: RTS out, waiting for FIN */
    TLF_INLINE = 1u << 4,    /* put from the user buffer, inline */
    TLF_RDV = 1u << 5,       /* recv: rendezvous read */
    TLF_CTS = 1u << 7,       /* send: the receiver asked for the data by RDMA WRITE */
    TLF_WFIN = 1u << 8,      /* recv: CTS sent, the sender WRITEs and then says WFIN */
    TLF_WIMM = 1u << 9,      /* send/recv with TLF_CTS/TLF_WFIN: the WRITEs are striped and each
                              * queue pair used is closed by a WRITE_WITH_IMM instead of a WFIN */
    TLF_DIRECT = 1u << 10,   /* a tracked put of gw_verbs_put_direct: one inline WRITE, nothing
                              * attached (no slot, registration or staging): its WR's retiring
                              * completes it at once (gw_verbs_req_maybe_done, inline) */
    TLF_IOV = 1u << 11,      /* a list of rma_iov (verbs_iov.c): req->done counts its retired bytes */
    TLF_ICANCEL = 1u << 12   /* ... canceled while being posted: the rest is dropped, it ends with
                              * GW_ERR_CANCELED once its posted WRs retire */
};
/* Rendezvous by RDMA WRITE (receive buffer in a region the user opened to
 * remote writes, within one MR): the receiver answers the RTS with CT_CTS
 * (its address, rkey and id), and the sender WRITEs the data.
 * - With a peer announcing GW_VERBS_FEAT_WRITE_IMM the CTS carries
 *   CTS_WIMM: the sender stripes the WRITEs over the queue pairs as a put
 *   (from GPUWIRE_IB_SPLIT_MIN) and closes each queue pair it used with a
 *   zero-length WRITE_WITH_IMM whose immediate is RDV_IMM(number of queue
 *   pairs used, the receiver's id).  RC orders each queue pair, so the
 *   receiver has the whole message once it has seen that many immediates;
 *   nobody waits for a queue pair to drain and no FIN is sent.
 * - Otherwise (an older peer) the data goes on QP 0 only, followed there
 *   by a CT_WFIN message; messages from GPUWIRE_IB_SPLIT_MIN are READ. */
#define CTS_WIMM 1u
/* Rendezvous ids on the wire (RTS, CTS, FIN, WFIN, the immediate of
 * RDV_IMM, a staged chunk request's ident): the op table's narrow id, 8
 * bits of index under 16 of generation, 24 bits in all (RDV_IMM keeps the
 * top byte; RTS_STAGED is bit 31). */
#define RDV_IDX_BITS 8
#define RDV_GEN_BITS 16
#define GW_VERBS_RDV_MAX 64 /* rendezvous in flight per endpoint (< 1 << RDV_IDX_BITS) */
#define RDV_IMM(nq, opid) ((uint32_t)(nq) << 24 | (uint32_t)(opid)) /* bit 31 clear: not a notification */
enum { CT_CTS = 7, CT_WFIN, CT_AM };
#define RECV_WRID GW_VERBS_RECV_WRID
#define DRAIN_WRID (1ull << 61) /* the drain markers of a dead endpoint (send and receive) */
#define NO_SLOT 0xffff

/* A request's verbs scratch (core/request.h GW_REQ_TL_SCRATCH): verbs_rq(req). */
struct gw_verbs_sreq;
struct gw_req_verbs {
    struct gw_verbs_rc_entry *rc; /* registration-cache entry held for the local buffer */
    struct gw_verbs_sreq *stg;    /* staged (TLF_STAGED): its state (verbs_stage.c) */
    uint32_t slot;                /* bounce slot + 1 held by the request, 0 none */
    uint32_t stripe;              /* next QP of a striped transfer; a receive by WRITE_WITH_IMM:
                                   * the ends seen */
    union {
        struct {                  /* rendezvous: a receive's sender, a send's CTS from its receiver */
            uint64_t raddr;       /* the peer's buffer */
            uint32_t rkey;        /* ... its rkey */
            uint32_t opid;        /* the peer's rendezvous id (RTS_STAGED: the sender is staged) */
            uint64_t mlen;        /* message length */
        } rdv;
        struct {                  /* batched transfer (verbs_batch.c) */
            uint64_t ent;         /* next entry */
            uint64_t off;         /* bytes of it posted */
        } batch;
    };
};
GW_REQ_TL_SCRATCH(verbs_rq, struct gw_req_verbs)

/* staged GPU memory (verbs_stage.c) */
enum { WR_SPUT = 16, WR_SGET, WR_SREAD, WR_SWRITE }; /* chunk WRs (initiator: S*, owner: SREAD/SWRITE) */
enum { CT_SREQ = 5, CT_SACK };                       /* chunk request / its acknowledgement */
enum { C_FREE = 0, C_D2H, C_READY, C_XFER, C_H2D };  /* initiator chunk states */
enum { J_FREE = 0, J_SLOT, J_READ, J_H2D, J_D2H, J_WRITE, J_EAGER }; /* owner job states */
#define TLF_STAGED (1u << 6)      /* the request moves through bounce buffers */
#define RTS_STAGED (1u << 31)     /* in an RTS opid: the sender's buffer is staged */
#define GW_MAX_STG_HOST_CHUNK (1u << 20) /* chunk of a host buffer for a staged peer */
typedef struct gw_verbs_sreq gw_verbs_sreq_t;
typedef struct batch batch_t;

static inline gw_verbs_ep_t *to_vep(gw_tl_ep_t *e) { return (gw_verbs_ep_t *)e; }
static inline gw_core_t *ep_core(gw_verbs_ep_t *ep) { return ep->vif->super.core; }
/* Has the endpoint failed?  The base's latch is the one truth (ep_base.h):
 * whoever failed it (a completion error here, a peer timeout or closed
 * control socket in the api layer), verbs_on_fail has torn the endpoint
 * down, nothing more is posted and completions are only drained. */
static inline int vep_failed(const gw_verbs_ep_t *ep) { return gw_ep_failed(ep->super.base); }

/* Is anything waiting to be posted: a control message, a queued request, a
 * rendezvous receive or staged work?  (Inline: a progress pass asks on every
 * call, and on an idle endpoint that question is most of the pass.) */
static inline int vep_queued(const gw_verbs_ep_t *ep)
{
    return ep->ctrl_count || !gw_list_empty(&ep->pending) || !gw_list_empty(&ep->rdv_recvs) || ep->stg_live ||
           !gw_list_empty(&ep->am_q);
}

/* bounce slots */
static inline int slot_get(gw_verbs_ep_t *ep)
{
    return ep->nsfree ? ep->sfree[--ep->nsfree] : -1;
}
static inline void slot_put(gw_verbs_ep_t *ep, int s)
{
    if (s >= 0 && s < GW_VERBS_NSLOTS)
        ep->sfree[ep->nsfree++] = (uint16_t)s;
}
static inline uint8_t *slot_ptr(gw_verbs_ep_t *ep, int s) { return ep->sbuf + (size_t)s * GW_VERBS_SLOT; }

/* A pass's work requests: one chain per queue pair, each posted with one
 * ibv_post_send when the pass ends (batch_flush).  The chains live in the
 * endpoint (chain_wr / chain_sge, as deep as the send queue: a pass can
 * hand a queue pair everything it has room for at once); one pass at a
 * time per endpoint, as the send rings already require. */
struct batch {
    struct ibv_send_wr *wr[GW_VERBS_MAX_QPS];
    struct ibv_sge (*sge[GW_VERBS_MAX_QPS])[2];
    int n[GW_VERBS_MAX_QPS];
    /* a chain holding WRs of an rma_iov list is signalled once, at its
     * end (verbs_iov.c); SGEs of ep->iov_pool taken by this pass */
    uint8_t one_sig[GW_VERBS_MAX_QPS];
    unsigned iov_used;
};

static inline void batch_begin(gw_verbs_ep_t *ep, batch_t *b)
{
    for (int qi = 0; qi < ep->nqps; qi++) {
        b->wr[qi] = ep->chain_wr + (size_t)qi * (size_t)ep->chain_cap;
        b->sge[qi] = ep->chain_sge + (size_t)qi * (size_t)ep->chain_cap;
        b->n[qi] = 0;
        b->one_sig[qi] = 0;
    }
    b->iov_used = 0;
}

static inline int qp_room(gw_verbs_ep_t *ep, batch_t *b, int qi)
{
    return b->n[qi] < ep->chain_cap && ep->qps[qi].used < ep->qps[qi].depth;
}

/* A bounce slot for a message on QP 0 when QP 0 and the batch have room:
 * its index, else -1 (blocked: try again on a later pass). */
static inline int msg_slot(gw_verbs_ep_t *ep, batch_t *b)
{
    return qp_room(ep, b, 0) ? slot_get(ep) : -1;
}

/* verbs_post.c */
void gw_verbs_ctrl_queue(gw_verbs_ep_t *ep, uint8_t type, uint32_t status, uint64_t a, uint64_t b);
gw_status_t gw_verbs_submit(gw_tl_ep_t *e, gw_request_t *req);
/* The ops table's put_direct (tl.h): an inline WRITE posted before any api request (verbs_post.c) */
gw_status_t gw_verbs_put_direct(gw_tl_ep_t *e, const void *buf, size_t len, const gw_mem_t *lmem, uint64_t raddr,
                                const gw_rkey_t *rkey, gw_tl_req_make_fn make, void *arg);
void gw_verbs_hdr_fill(uint8_t *p, uint8_t type, uint32_t status, uint64_t tag, uint64_t len,
                     uint64_t addr, uint32_t rkey, uint64_t opid);
const char *gw_verbs_op_name(int kind);
int gw_verbs_others_drained(const gw_verbs_ep_t *ep, const batch_t *b);
int gw_verbs_post_pending(gw_verbs_ep_t *ep);
struct ibv_send_wr *gw_verbs_post_sendmsg(gw_verbs_ep_t *ep, batch_t *b, gw_request_t *req, int s,
                                         uint32_t bytes);
gw_request_t *gw_verbs_rdv_lookup(gw_verbs_ep_t *ep, uint64_t opid);
void gw_verbs_rdv_recv_forget(gw_verbs_ep_t *ep, gw_request_t *req);
int gw_verbs_remote_piece(gw_request_t *req, uint64_t raddr, uint32_t *rkey, uint64_t *left);
void gw_verbs_req_release(gw_verbs_ep_t *ep, gw_request_t *req);
struct ibv_send_wr *gw_verbs_wr_add(gw_verbs_ep_t *ep, batch_t *b, int qi, gw_request_t *req, int kind,
                                  int slot, uint32_t len);

/* A claimed WR as one RDMA READ (get) or WRITE of len bytes: remote
 * raddr/rkey, local laddr/lkey, one SGE. */
static inline void gw_verbs_wr_rdma(struct ibv_send_wr *w, int get, uint64_t raddr, uint32_t rkey, uint64_t laddr,
                                    uint32_t len, uint32_t lkey)
{
    w->opcode = get ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE;
    w->wr.rdma.remote_addr = raddr;
    w->wr.rdma.rkey = rkey;
    w->num_sge = 1;
    w->sg_list->addr = laddr;
    w->sg_list->length = len;
    w->sg_list->lkey = lkey;
}

/* Posts a signalled zero-length RDMA WRITE on each queue pair whose
 * unsignalled tail needs completing now: tracked work with no signalled WR
 * left in flight to complete it, any tail while a flush waits, untracked
 * puts' tails when idle (the CQ armed, or about to be) or when queued work
 * waits.  Returns the number posted. */
int gw_verbs_cover(gw_verbs_ep_t *ep, int idle);

/* Has QP q an unsignalled tail (WRs posted after its last signalled one
 * and not yet retired)?  Has some QP of ep one?  Without one gw_verbs_cover
 * has nothing to do; asked inline first, as every pass with completions
 * would call it (a latency loop's puts are signalled: no tail). */
static inline int qp_unsig_tail(const gw_verbs_qp_t *q)
{
    return q->used && q->head != q->sig_end;
}
static inline int vep_unsig_tail(const gw_verbs_ep_t *ep)
{
    for (int qi = 0; qi < ep->nqps; qi++)
        if (qp_unsig_tail(&ep->qps[qi]))
            return 1;
    return 0;
}

/* verbs_cq.c: completes req once all its WRs are posted and retired.
 * Inline: nothing to do while some are out, and a direct put's (TLF_DIRECT:
 * one inline WRITE, no slot, registration or staging) completes at once,
 * with no call and none of the op tests and releases the rest need. */
void gw_verbs_req_maybe_done_slow(gw_verbs_ep_t *ep, gw_request_t *req);
static inline void gw_verbs_req_maybe_done(gw_verbs_ep_t *ep, gw_request_t *req)
{
    if (req->pending || !(req->tl_flags & TLF_ALLPOSTED))
        return;
    if (req->tl_flags & TLF_DIRECT) {
        req->length = req->len;
        gw_ep_op_done(ep->super.base, req, GW_OK);
        return;
    }
    gw_verbs_req_maybe_done_slow(ep, req);
}

/* verbs_ep.c */
/* The completion watchdog, run on idle progress passes (verbs_iface.c):
 * an endpoint awaiting a completion that the device alone owes (an RDMA
 * WRITE or READ, gw_verbs_awaits_cqe) that has seen no completion and
 * posted nothing for GPUWIRE_OP_TIMEOUT_MS fails with GW_ERR_PEER_TIMEOUT.
 * RC retries end every work request on a dead or cut peer with an error
 * completion; one that never ends (a device or driver that lost it) would
 * leave its requests pending for good.  Returns 1 when it failed ep. */
int gw_verbs_watchdog(gw_verbs_ep_t *ep, uint64_t now);
/* Is a signalled RDMA WRITE or READ posted and not yet retired on ep? */
int gw_verbs_awaits_cqe(const gw_verbs_ep_t *ep);
void gw_verbs_ep_die(gw_verbs_ep_t *ep, gw_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void gw_verbs_ep_drain(gw_verbs_ep_t *ep);
void gw_verbs_ep_drained_one(gw_verbs_ep_t *ep);
void gw_verbs_ep_forget_all(gw_verbs_ep_t *ep, gw_status_t st);
void gw_verbs_wc_fail(gw_verbs_ep_t *ep, const struct ibv_wc *wc, const gw_verbs_wr_t *r);

/* verbs_stage.c */
int gw_verbs_mem_staged(const gw_mem_t *m);
int gw_verbs_rkey_staged(const gw_rkey_t *k);
int gw_verbs_stg_applies(gw_verbs_ep_t *ep, gw_request_t *req);
int gw_verbs_stg_busy(const gw_verbs_ep_t *ep);
void gw_verbs_stg_chunk_wr_done(gw_verbs_ep_t *ep, uint32_t aux);
void gw_verbs_stg_forget_all(gw_verbs_ep_t *ep, int own);
void gw_verbs_stg_free(gw_verbs_ep_t *ep, gw_verbs_sreq_t *sr, int touch_req);
void gw_verbs_stg_job_wr_done(gw_verbs_ep_t *ep, uint32_t aux);
void gw_verbs_stg_on_sack(gw_verbs_ep_t *ep, uint32_t cookie, gw_status_t st, uint64_t bad, const uint8_t *data,
                         uint32_t n);
void gw_verbs_stg_on_sreq(gw_verbs_ep_t *ep, const uint8_t *p, uint32_t bytes);
int gw_verbs_stg_progress(gw_verbs_ep_t *ep, batch_t *b);
void gw_verbs_stg_slot_drop(gw_verbs_stgeng_t *e, gw_stage_slot_t *s);
int gw_verbs_stg_start(gw_verbs_ep_t *ep, batch_t *b, gw_request_t *req);
int gw_verbs_stg_batch_start(gw_verbs_ep_t *ep, batch_t *b, gw_request_t *req);
/* A chunk request with a piece list (a staged batch's chunk): the 64-byte
 * request (p[3] bit SREQ_LIST; at p + 36 the bytes of all pieces), at
 * p + 40 the magic, p + 44 the version (u16), p + 46 the count (u16), then
 * count pieces of owner address (u64), initiator address (u64), length
 * (u32, > 0), initiator rkey (u32). */
#define GW_VERBS_SREQ_BYTES 64
#define GW_VERBS_SBLIST_MAGIC 0x47575342u /* "GWSB" */
#define GW_VERBS_SBLIST_VERSION 1
#define GW_VERBS_SBLIST_PIECE 24
#define GW_VERBS_SBLIST_MAX 256 /* (64 + 256 * 24 fits a bounce slot) */
/* The wire check of a chunk request's piece list (fuzzed): GW_OK with the
 * count, else GW_ERR_PROTOCOL and why. */
gw_status_t gw_verbs_sblist_check(const uint8_t *p, uint32_t bytes, uint32_t *n, char *why, size_t whylen);

/* verbs_batch.c */
int gw_verbs_batch_post(gw_verbs_ep_t *ep, batch_t *b, gw_request_t *req);

/* verbs_post.c: posts each queue pair's chain of the pass (one ibv_post_send each) */
void gw_verbs_batch_flush(gw_verbs_ep_t *ep, batch_t *b);
/* verbs_post.c: queues or posts req (submit's path) with tl_flags set to flags */
gw_status_t gw_verbs_submit_flags(gw_verbs_ep_t *ep, gw_request_t *req, uint16_t flags);

/* verbs_iov.c: the scatter/gather primitive (tl.h rma_iov) and cancel */
#define GW_VERBS_IOV_SGE 16    /* SGEs per work request of a list, at most (and the device's max_sge) */
#define GW_VERBS_IOV_POOL 4096 /* SGEs a pass may give WRs of more than two */
gw_status_t gw_verbs_rma_iov(gw_tl_ep_t *e, gw_request_t *req);
int gw_verbs_iov_post(gw_verbs_ep_t *ep, batch_t *b, gw_request_t *req);
gw_status_t gw_verbs_cancel(gw_tl_ep_t *e, gw_request_t *req);

/* verbs_am.c: active messages (tl.h am_send).  On the wire a SEND on QP 0:
 * the 40-byte header (type CT_AM, tag: the handler id, len: the payload's
 * bytes), then at GW_VERBS_HDR the magic (u32), the version (u16) and 0
 * (u16), then the payload. */
#define GW_VERBS_AM_MAGIC 0x4757414du /* "GWAM" */
#define GW_VERBS_AM_VERSION 1
#define GW_VERBS_AM_HDR (GW_VERBS_HDR + 8)
gw_status_t gw_verbs_am_send(gw_tl_ep_t *e, unsigned id, const void *data, size_t len);
/* Posts queued active messages while QP 0 and the pass have room. */
void gw_verbs_am_post_queued(gw_verbs_ep_t *ep, batch_t *b);
/* A CT_AM message of `bytes` at p arrived: checked, then handed to its handler. */
void gw_verbs_am_in(gw_verbs_ep_t *ep, const uint8_t *p, uint32_t bytes);
/* Frees what is queued (endpoint failed or destroyed). */
void gw_verbs_am_forget(gw_verbs_ep_t *ep);
/* Writes an active message (the payload: len <= GW_AM_MAX bytes) at p,
 * which has room for GW_VERBS_AM_HDR + len bytes; returns its length. */
uint32_t gw_verbs_am_format(uint8_t *p, unsigned id, const void *data, uint32_t len);
/* The wire check of an active message (fuzzed): GW_OK with its handler id,
 * payload and length, else GW_ERR_PROTOCOL and why. */
gw_status_t gw_verbs_am_check(const uint8_t *p, uint32_t bytes, unsigned *id, const uint8_t **data, uint32_t *len,
                              char *why, size_t whylen);

#endif
