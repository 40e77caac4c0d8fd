/* SPDX-License-Identifier: Apache-2.0 */
/* etcd.h - an etcd v3 client over its JSON gateway (directory layer).
 *
 * etcd is the store; this file only speaks to it: POST /v3/kv/range, put,
 * deleterange, /v3/lease/grant, keepalive, revoke, and /v3/watch as a
 * streaming response (one JSON object per message).  Keys and values travel
 * base64-encoded, 64-bit numbers as JSON strings.  Each call is bounded by
 * the client's timeout.  The response parsers are fuzzed
 * (tests/fuzz/fuzz_etcd_json.c). */
#ifndef GW_DIRECTORY_ETCD_H
#define GW_DIRECTORY_ETCD_H

#include <stddef.h>
#include <stdint.h>

#include "directory/http.h"
#include "gpuwire.h"

#define GW_ETCD_KEY_MAX 256
#define GW_ETCD_VALUE_MAX 2048

typedef struct gw_etcd {
    char url[200];      /* as configured, for messages */
    char hostport[200];
    int timeout_ms;
} gw_etcd_t;

typedef struct gw_etcd_kv {
    char key[GW_ETCD_KEY_MAX];
    char value[GW_ETCD_VALUE_MAX + 1]; /* NUL-terminated for convenience */
    size_t value_len;
    int64_t create_rev, mod_rev, lease;
} gw_etcd_kv_t;

gw_status_t gw_etcd_init(gw_etcd_t *e, const char *url, int timeout_ms, char *why, size_t whylen);

/* Parses one kv object of a response ("key", "value" base64). 0 / -1. */
int gw_etcd_parse_kv(const char *json, size_t n, gw_etcd_kv_t *kv);

gw_status_t gw_etcd_grant(gw_etcd_t *e, long ttl_s, int64_t *lease, char *why, size_t whylen);
/* GW_ERR_NOT_FOUND when the lease expired or was revoked. */
gw_status_t gw_etcd_keepalive(gw_etcd_t *e, int64_t lease, int64_t *ttl, char *why, size_t whylen);
gw_status_t gw_etcd_revoke(gw_etcd_t *e, int64_t lease, char *why, size_t whylen);
/* *rev: the store's revision after the put (the key's mod_revision). */
gw_status_t gw_etcd_put(gw_etcd_t *e, const char *key, const void *val, size_t vlen, int64_t lease,
                        int64_t *rev, char *why, size_t whylen);
/* Puts key=val (under lease when non-zero) only if the key does not exist,
 * in one etcd transaction (compare create_revision == 0): two callers racing
 * for one key cannot both win.  GW_OK (*rev: the revision of the put), or
 * GW_ERR_BUSY when the key exists (*holder, when given: its kv as it stood
 * at that revision, lease included). */
gw_status_t gw_etcd_create(gw_etcd_t *e, const char *key, const void *val, size_t vlen, int64_t lease, int64_t *rev,
                           gw_etcd_kv_t *holder, char *why, size_t whylen);
/* Deletes key only while it is under lease (one transaction): a key that
 * another holder put since is left alone.  GW_OK either way. */
gw_status_t gw_etcd_delete_leased(gw_etcd_t *e, const char *key, int64_t lease, char *why, size_t whylen);
/* Seconds lease has left; -1 when it expired or was revoked. */
gw_status_t gw_etcd_lease_ttl(gw_etcd_t *e, int64_t lease, int64_t *ttl, char *why, size_t whylen);
gw_status_t gw_etcd_delete(gw_etcd_t *e, const char *key, int prefix, char *why, size_t whylen);
/* Every kv under key (prefix) or the one key; cb returns non-zero to stop.
 * *rev: the store's revision of the answer. */
typedef int (*gw_etcd_kv_cb)(void *arg, const gw_etcd_kv_t *kv);
gw_status_t gw_etcd_range(gw_etcd_t *e, const char *key, int prefix, gw_etcd_kv_cb cb, void *arg,
                          int64_t *rev, char *why, size_t whylen);

/* A watch of every key under a prefix from start_rev on. */
typedef struct gw_etcd_watch {
    int fd;
    int created;
    int64_t rev; /* newest revision seen */
    gw_http_body_t dec;
    gw_buf_t buf;
} gw_etcd_watch_t;
gw_status_t gw_etcd_watch_open(gw_etcd_t *e, const char *prefix, int64_t start_rev, gw_etcd_watch_t *w,
                               char *why, size_t whylen);
/* Event callback: is_delete, the kv (a delete carries only key and mod_rev). */
typedef void (*gw_etcd_event_cb)(void *arg, int is_delete, const gw_etcd_kv_t *kv);
/* Handles the messages already buffered in w (used by the reader and the
 * fuzzer).  GW_OK, GW_ERR_PROTOCOL (malformed), GW_ERR_CANCELED (etcd
 * canceled the watch, e.g. compaction). */
gw_status_t gw_etcd_watch_dispatch(gw_etcd_watch_t *w, gw_etcd_event_cb cb, void *arg, char *why, size_t whylen);
/* Waits up to timeout_ms for data, reads it, dispatches.  GW_OK (also on a
 * quiet timeout), GW_ERR_CONN_RESET when the stream ended, or as above. */
gw_status_t gw_etcd_watch_poll(gw_etcd_watch_t *w, int timeout_ms, gw_etcd_event_cb cb, void *arg, char *why,
                               size_t whylen);
void gw_etcd_watch_close(gw_etcd_watch_t *w);

#endif
