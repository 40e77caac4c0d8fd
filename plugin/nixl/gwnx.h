/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gwnx.h - the NIXL backend's core, in plain C over include/gpuwire.h.
 *
 * Everything the GPUWIRE backend of NIXL does that needs no NIXL header
 * lives here, so that it is built and tested on every machine; the C++
 * engine class (gw_nixl_engine.cpp) only translates NIXL's types to these
 * calls.
 *
 * Pure parts (no context): notification framing, the pairing of framed
 * notifications with gpuwire's ordered notifications, the agent-name map,
 * descriptor translation and the status mapping.
 *
 * The core (gwnx_core_t): one gpuwire context with a listener, serialised
 * behind one mutex, and a progress thread that sleeps on the context fd.
 * Every function below takes the lock itself, so they may be called from
 * any thread (NIXL calls checkXfer, genNotif and getNotifs from user
 * threads, and two agents may share one thread).
 *
 * Notifications: a transfer with a notification posts its batch with an
 * ORDERED gpuwire notification whose value is a per-endpoint sequence
 * number, and sends a tagged message (a frame: the sequence number, the
 * sender's agent name and the bytes).  The receiver hands a frame out only
 * once the ordered notification of the same sequence number has arrived,
 * which gpuwire delivers after the batch's data (and every earlier put of
 * the endpoint) is in the receiver's memory.  A READ's notification is
 * posted when the read completes, as an empty ordered batch.
 */
#ifndef GWNX_H
#define GWNX_H

#include <stddef.h>
#include <stdint.h>

#include "gpuwire.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- statuses: the numeric values of NIXL's nixl_status_t ------------------ */
enum {
    GWNX_IN_PROG = 1,
    GWNX_SUCCESS = 0,
    GWNX_ERR_NOT_POSTED = -1,
    GWNX_ERR_INVALID_PARAM = -2,
    GWNX_ERR_BACKEND = -3,
    GWNX_ERR_NOT_FOUND = -4,
    GWNX_ERR_MISMATCH = -5,
    GWNX_ERR_NOT_ALLOWED = -6,
    GWNX_ERR_REPOST_ACTIVE = -7,
    GWNX_ERR_UNKNOWN = -8,
    GWNX_ERR_NOT_SUPPORTED = -9,
    GWNX_ERR_REMOTE_DISCONNECT = -10,
    GWNX_ERR_CANCELED = -11
};
/* The NIXL status for a gpuwire status. */
int gwnx_status_from_gw(gw_status_t st);

/* ---- frames: one notification on the wire ---------------------------------- */
/* Tag of notification frames (gw_send/gw_recv, full mask). */
#define GWNX_FRAME_TAG 0x4e49584c46524d31ull
#define GWNX_FRAME_HDR 24
/* Longest agent name and message a frame carries. */
#define GWNX_MAX_NAME 4096u
#define GWNX_MAX_MSG (64u << 20)

typedef struct gwnx_frame_view {
    uint64_t seq;
    const char *name;   /* points into the frame; not NUL-terminated */
    size_t name_len;
    const void *msg;
    size_t msg_len;
} gwnx_frame_view_t;

/* Bytes a frame of these lengths takes. */
size_t gwnx_frame_size(size_t name_len, size_t msg_len);
/* Encodes into buf (cap bytes); returns the frame's size, 0 when it does not
 * fit or a length is over its limit. */
size_t gwnx_frame_encode(void *buf, size_t cap, uint64_t seq, const char *name, size_t name_len,
                         const void *msg, size_t msg_len);
/* Decodes a received frame; 0 on success, -1 when malformed (bad magic or
 * version, lengths that do not add up to len). */
int gwnx_frame_decode(const void *buf, size_t len, gwnx_frame_view_t *out);

/* ---- pairing: frames held until their ordered notification ------------------ */
typedef struct gwnx_pending {
    uint64_t seq;
    char *name;
    size_t name_len;
    void *msg;
    size_t msg_len;
    struct gwnx_pending *next;
} gwnx_pending_t;

/* Per incoming endpoint.  Frames and ordered notifications both arrive in
 * sending order; a frame is ready once `landed` reached its seq. */
typedef struct gwnx_pairing {
    gwnx_pending_t *head, *tail;
    uint64_t landed;    /* highest ordered notification value seen */
} gwnx_pairing_t;

/* Queues a copy of a decoded frame.  0, or -1 out of memory. */
int gwnx_pairing_add_frame(gwnx_pairing_t *p, const gwnx_frame_view_t *f);
/* Records an ordered notification value. */
void gwnx_pairing_landed(gwnx_pairing_t *p, uint64_t value);
/* Takes the oldest ready frame (the caller frees it with gwnx_pending_free),
 * NULL when none is ready. */
gwnx_pending_t *gwnx_pairing_take(gwnx_pairing_t *p);
void gwnx_pending_free(gwnx_pending_t *e);
void gwnx_pairing_clear(gwnx_pairing_t *p);

/* ---- agent map: NIXL agent names (free strings) -> peer state -------------- */
typedef struct gwnx_agent {
    char *name;
    char *conn_info;     /* as loadRemoteConnInfo gave it, NULL before */
    gw_ep_t *ep;         /* our endpoint to it, NULL until connected */
    uint64_t next_seq;   /* last notification sequence number used on ep */
    unsigned refs;       /* remote regions and transfers that use ep */
    int closing;         /* disconnect asked while refs > 0 */
    gw_dlist_t *empty_local, *empty_remote; /* for notifications without data */
} gwnx_agent_t;

typedef struct gwnx_agent_map {
    gwnx_agent_t **v;
    size_t n, cap;
} gwnx_agent_map_t;

gwnx_agent_t *gwnx_agent_find(const gwnx_agent_map_t *m, const char *name);
/* Finds or adds `name`; NULL out of memory. */
gwnx_agent_t *gwnx_agent_get(gwnx_agent_map_t *m, const char *name);
/* Removes and frees an entry (its endpoint must be closed already). */
void gwnx_agent_remove(gwnx_agent_map_t *m, gwnx_agent_t *a);
void gwnx_agent_map_clear(gwnx_agent_map_t *m);

/* ---- descriptor translation --------------------------------------------- */
/* One side of a NIXL descriptor as the engine sees it: an address, a length
 * and the region (or remote range) it was registered or loaded with. */
typedef struct gwnx_span {
    uint64_t addr;
    size_t len;
    uint64_t base;      /* start of the region / of the remote key's range */
    size_t size;        /* its length */
} gwnx_span_t;

/* Checks n descriptor pairs and writes each side's offset from its base.
 * Returns -1 with a message naming the first bad index (a length mismatch,
 * an entry outside its region). */
int gwnx_translate(const gwnx_span_t *local, const gwnx_span_t *remote, size_t n, uint64_t *loff,
                   uint64_t *roff, char *err, size_t errlen);

/* ---- the core -------------------------------------------------------------- */
typedef struct gwnx_core gwnx_core_t;
typedef struct gwnx_region gwnx_region_t;    /* a local registration */
typedef struct gwnx_rregion gwnx_rregion_t;  /* a peer's region, loaded */
typedef struct gwnx_xfer gwnx_xfer_t;

typedef struct gwnx_core_opts {
    const char *agent;        /* this NIXL agent's name */
    const char *listen_addr;  /* NULL: ":0" */
    const char *advertise;    /* host put in the connection info; NULL: this
                                 host's first non-loopback IPv4, then 127.0.0.1 */
    int progress_thread;      /* 1: own progress thread (the default use) */
} gwnx_core_opts_t;

/* Creates the core.  On failure returns a status and writes why to err. */
int gwnx_core_create(const gwnx_core_opts_t *o, gwnx_core_t **out, char *err, size_t errlen);
void gwnx_core_destroy(gwnx_core_t *c);
/* The detail of the latest failure of a call of this thread on the core. */
const char *gwnx_core_error(const gwnx_core_t *c);

/* Connection info: "gwnx1 host:port[,host:port...]" (every candidate). */
int gwnx_conn_info(gwnx_core_t *c, char *buf, size_t len);
int gwnx_peer_set(gwnx_core_t *c, const char *agent, const char *conn_info);
/* Connects to the agent if not connected yet (the first candidate that
 * answers).  Connecting to one's own agent name is allowed. */
int gwnx_peer_connect(gwnx_core_t *c, const char *agent);
/* Closes the endpoint now, or once the last remote region and transfer
 * using it are released. */
int gwnx_peer_disconnect(gwnx_core_t *c, const char *agent);
/* The transport of the endpoint to the agent ("tcp", "intra", "verbs"). */
int gwnx_peer_transport(gwnx_core_t *c, const char *agent, char *buf, size_t len);

int gwnx_mem_reg(gwnx_core_t *c, void *addr, size_t len, gwnx_region_t **out);
int gwnx_mem_dereg(gwnx_region_t *r);
/* The packed remote key of the region (what peers load). */
int gwnx_mem_public(gwnx_region_t *r, void *buf, size_t *len);
void gwnx_mem_range(const gwnx_region_t *r, uint64_t *base, size_t *size);

/* Unpacks a peer's public data on the endpoint to `agent` (connecting on
 * first use). */
int gwnx_remote_load(gwnx_core_t *c, const char *agent, const void *blob, size_t len,
                     gwnx_rregion_t **out);
void gwnx_remote_range(const gwnx_rregion_t *r, uint64_t *base, size_t *size);
int gwnx_remote_unload(gwnx_rregion_t *r);

enum { GWNX_WRITE = 0, GWNX_READ = 1 };
typedef struct gwnx_desc {
    uint64_t addr;
    size_t len;
    const void *md;   /* gwnx_region_t* (local) or gwnx_rregion_t* (remote) */
} gwnx_desc_t;

/* Prepares a transfer of n pairs (descriptor lists built once, reused by
 * every post). */
int gwnx_xfer_prep(gwnx_core_t *c, const char *agent, int op, const gwnx_desc_t *local,
                   const gwnx_desc_t *remote, size_t n, gwnx_xfer_t **out);
/* Posts it; with has_notif the notification msg follows the data.
 * GWNX_IN_PROG, or an error.  GWNX_ERR_REPOST_ACTIVE while the previous
 * post is still in progress. */
int gwnx_xfer_post(gwnx_xfer_t *x, int has_notif, const void *msg, size_t msg_len);
/* GWNX_IN_PROG, GWNX_SUCCESS or the error of the transfer. */
int gwnx_xfer_check(gwnx_xfer_t *x);
/* Releases it; a transfer in progress is waited for (bounded) first. */
int gwnx_xfer_release(gwnx_xfer_t *x);

/* A notification not bound to a transfer, ordered after every put posted
 * to that agent before it. */
int gwnx_notif_gen(gwnx_core_t *c, const char *agent, const void *msg, size_t len);

typedef void (*gwnx_notif_cb)(void *arg, const char *agent, size_t agent_len, const void *msg,
                              size_t msg_len);
/* Hands out every notification whose data has landed, oldest first per
 * sender; returns how many. */
size_t gwnx_notifs_take(gwnx_core_t *c, gwnx_notif_cb cb, void *arg);

/* Progresses once on the caller's thread (for a core without a progress
 * thread, and for tests). */
void gwnx_core_progress(gwnx_core_t *c);

/* What the backend moved as initiator: transfers seen complete (by
 * gwnx_xfer_check) and the bytes of their descriptors, counted once per
 * post.  With GPUWIRE_NIXL_XFER_LOG=on each completion is also logged. */
typedef struct gwnx_stats {
    uint64_t writes, write_bytes;
    uint64_t reads, read_bytes;
} gwnx_stats_t;
void gwnx_core_stats(gwnx_core_t *c, gwnx_stats_t *out);

#ifdef __cplusplus
}
#endif
#endif /* GWNX_H */
