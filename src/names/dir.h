/* SPDX-License-Identifier: Apache-2.0 */
/* dir.h - the directory backends of the names layer: where an agent
 * listens, and (for a directory proper) the agent's own registration, its
 * published regions listed for people, and news of agents leaving and
 * coming back.  One interface, one file per backend, as NIXL's metadata
 * backends: dir_p2p.c (addresses given by gw_peer_add/GPUWIRE_PEERS,
 * always there and asked first) and dir_etcd.c (GPUWIRE_DIRECTORY).  A
 * backend that cannot do something says so through its hook's status. */
#ifndef GW_NAMES_DIR_H
#define GW_NAMES_DIR_H

#include <stdint.h>

#include "gpuwire.h"
#include "names/table_wire.h"

struct gw_names;
struct gw_mem;

/* What a backend knows of an agent. */
typedef struct gw_dir_agent {
    char name[GW_NAME_MAX + 1];
    char addr[80];
    uint64_t uuid;    /* its context, 0: not known (an address given) */
    int64_t epoch;
    int listed;       /* -1: this backend has no listing */
    unsigned changes; /* times it left or came back */
    int used;         /* looked up by this context: its changes make events */
} gw_dir_agent_t;

typedef struct gw_dir gw_dir_t;

typedef struct gw_dir_ops {
    const char *kind;
    /* Where agent `name` listens: GW_OK with *out; GW_ERR_NOT_FOUND and
     * nothing said when this backend does not know it and asks no one;
     * else a status with the context's error set (what: the public call,
     * for messages). */
    gw_status_t (*lookup)(gw_dir_t *d, const char *name, gw_dir_agent_t *out, const char *what);
    /* What it knows of `name` now, asking no one: 1 with *out; 2 when it
     * holds a listing that lacks the name (*out: listed 0); else 0. */
    int (*peek)(gw_dir_t *d, const char *name, gw_dir_agent_t *out);
    /* The context became agent n->name at n->addr (publish the regions
     * of n->pubs too); the agent ended; a region was published or
     * withdrawn while it is an agent.  NULL: nothing to do. */
    gw_status_t (*agent_up)(gw_dir_t *d);
    void (*agent_down)(gw_dir_t *d);
    void (*region_up)(gw_dir_t *d, const char *region, const struct gw_mem *mem);
    void (*region_down)(gw_dir_t *d, const char *region);
    /* Start following agents (gw_names_event from then on). */
    gw_status_t (*watch)(gw_dir_t *d);
    gw_status_t (*list)(gw_dir_t *d, int (*cb)(void *arg, const gw_dir_entry_t *e), void *arg);
    void (*describe)(gw_dir_t *d, char *buf, size_t len);
    /* For messages: where its answers come from. */
    const char *(*where)(gw_dir_t *d);
    void (*close)(gw_dir_t *d);
} gw_dir_ops_t;

struct gw_dir {
    const gw_dir_ops_t *ops;
    struct gw_names *n;
};

/* dir_p2p.c */
gw_status_t gw_dir_p2p_open(struct gw_names *n, gw_dir_t **out);
/* Where agent `name` listens (replacing an earlier address). */
gw_status_t gw_dir_p2p_add(gw_dir_t *d, const char *name, const char *addr);

/* dir_etcd.c: url as GPUWIRE_DIRECTORY has it; the other settings are read
 * from the context. */
gw_status_t gw_dir_etcd_open(struct gw_names *n, const char *url, gw_dir_t **out);

#endif
