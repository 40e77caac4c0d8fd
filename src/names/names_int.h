/* SPDX-License-Identifier: Apache-2.0 */
/* names_int.h - the names layer's own state, shared by its files.
 *
 * The names layer sits above the api: it uses endpoints, listeners and
 * keys like an application, and the api knows it only as the context
 * extension (api/api.h gw_ctx_ext_ops_t): told of teardown through one
 * observer hook, carried in the handshake as extension GW_HS_EXT_NAMES,
 * asked to explain keys it voided.  Its files:
 *   names.c      set-up from the settings, the extension hooks, teardown
 *   table.c      published regions, the table (table_wire.h) in the
 *                handshake and fetched in pieces
 *   peers.c      peers by name: endpoints, keys, epochs and restarts
 *   events.c     peer events (gw_peer_watch): queue and delivery
 *   dir.h        the directory backend interface, with one file each:
 *   dir_p2p.c    addresses given (gw_peer_add, GPUWIRE_PEERS)
 *   dir_etcd.c   etcd (etcd.c: the client; netlibs.c: libcurl, cJSON)
 * Everything but the etcd backend's thread runs on the caller's thread,
 * like the rest of the context. */
#ifndef GW_NAMES_NAMES_INT_H
#define GW_NAMES_NAMES_INT_H

#include <pthread.h>
#include <stdint.h>

#include "api/api.h"
#include "names/dir.h"
#include "names/table_wire.h"

typedef struct pub {
    char name[GW_NAME_MAX + 1];
    gw_mem_t *mem;
    uint8_t *key; /* packed when published */
    size_t key_len;
} pub_t;

/* Bytes an entry takes in the table. */
#define PUB_BYTES(p) (3 + strlen((p)->name) + (p)->key_len)

/* What the names layer keeps of an endpoint (ep->ext): the peer agent's
 * table from READY, its name and epoch. */
typedef struct names_ep {
    uint8_t *table;
    size_t table_len;
    char name[GW_NAME_MAX + 1];
    uint64_t uuid;          /* the context that sent the table */
    uint64_t epoch;
    uint64_t newer_epoch;   /* that agent restarted: its epoch now (the keys are void) */
    int owned;              /* made by gw_peer_ep(): the context closes it */
} names_ep_t;

typedef struct peer {
    char name[GW_NAME_MAX + 1];
    gw_ep_t *ep;
    gw_dir_t *via; /* the backend that told where it listens */
    uint64_t uuid, epoch;
    unsigned restarts;
    struct peer *next;
} peer_t;

#define EVQ_CAP 1024 /* queued peer events; past that the oldest go */

struct gw_names {
    gw_context_t *ctx;
    char name[GW_NAME_MAX + 1]; /* agent name, "" when not an agent */
    gw_listener_t *listener;
    char addr[80];              /* advertised listen address */
    uint64_t epoch;
    pub_t *pubs;
    size_t npubs, pubcap;
    size_t pub_bytes;       /* sum of the entries' sizes: the limit check is O(1) */
    uint8_t *table;         /* built once per change (sorted by name) */
    size_t table_len, table_cap;
    uint64_t table_serial;  /* grows with each build: pieces of two builds never mix */
    int table_dirty;
    peer_t *peers;
    gw_ep_t **retired;
    size_t nretired, retcap;
    int closing;
    gw_dir_t *p2p; /* addresses given: always there, asked first */
    gw_dir_t *dir; /* the directory (etcd), NULL without one */
    /* peer events: a backend's thread queues them under ev_mu and writes
     * ev_fd; the caller's thread delivers them from progress */
    pthread_mutex_t ev_mu;
    int ev_on;
    unsigned ev_flags;
    gw_peer_event_t *evq; /* EVQ_CAP, a ring */
    size_t ev_head, ev_count;
    unsigned ev_dropped;
    int ev_fd;            /* eventfd in the context's epoll set */
    gw_io_t ev_io;
    void (*ev_cb)(void *, const gw_peer_event_t *);
    void *ev_arg;
    int ev_delivering;
};
typedef struct gw_names names_t;

/* names.c */
/* The context's names state, made (and attached) on first use. */
gw_status_t gw_names_get(gw_context_t *ctx, names_t **out);
/* The endpoint's names state, or NULL. */
static inline names_ep_t *gw_names_ep(const gw_ep_t *ep)
{
    return ep->ctx->ext_ops && ep->ext ? (names_ep_t *)ep->ext : NULL;
}

/* table.c */
void gw_names_hs_fill(void *ext, gw_hs_msg_t *m, uint8_t *buf, size_t cap, long req, const gw_hs_bind_t *b);
gw_status_t gw_names_hs_take(void *ext, gw_ep_t *ep, const gw_hs_msg_t *m, const gw_hs_bind_t *b, char *why,
                             size_t whylen);
/* The agent's whole table from addr, piece by piece. */
gw_status_t gw_names_fetch_table(names_t *n, const char *addr, uint8_t **table, size_t *len, gw_nt_header_t *h,
                                 char *why, size_t whylen);
void gw_names_mem_gone(names_t *n, gw_mem_t *mem);
void gw_names_tables_free(names_t *n);

/* peers.c */
void gw_names_ep_gone(names_t *n, gw_ep_t *ep);
int gw_names_explain_key(void *ext, const gw_ep_t *ep, const gw_rkey_t *rkey, char *buf, size_t cap);
/* Closes the endpoints the layer made; GW_ERR_BUSY while keys from
 * gw_peer_regions() live (nothing closed). */
gw_status_t gw_names_peers_fini(names_t *n);

/* events.c */
/* Queues an event about agent a (any thread) when events are on and a is
 * of interest (used, or every agent asked for), and wakes the context. */
void gw_names_event(names_t *n, int type, const gw_dir_agent_t *a, int restarted);
void gw_names_events_fini(names_t *n);

#endif
