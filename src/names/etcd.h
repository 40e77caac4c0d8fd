/* SPDX-License-Identifier: Apache-2.0 */
/* etcd.h - an etcd v3 client over its JSON gateway (names layer), through
 * libcurl and cJSON (names/netlibs.h, loaded at run time).
 *
 * etcd is the store; this file only speaks to it: POST /v3/kv/range, put,
 * txn, deleterange, /v3/lease/grant, keepalive, revoke, timetolive, and
 * /v3/watch as a streaming response (one JSON object a line).  Keys and
 * values travel base64-encoded, 64-bit numbers as JSON strings.
 * etcds:// (or https://) speaks TLS: the server's certificate is verified
 * against a CA file (or the system's store), with a client certificate and
 * key when given.  With a user and password, a token from
 * /v3/auth/authenticate goes with every request in the Authorization
 * header, and is fetched again once when etcd calls it invalid (expired,
 * or etcd restarted).  Each call is bounded by the client's timeout.  What
 * is read from etcd (answers, kvs, the watch stream) is fuzzed
 * (tests/fuzz/fuzz_etcd.c). */
#ifndef GW_NAMES_ETCD_H
#define GW_NAMES_ETCD_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "gpuwire.h"
#include "names/netlibs.h"

#define GW_ETCD_KEY_MAX 256
#define GW_ETCD_VALUE_MAX 2048

typedef struct gw_etcd_cfg {
    const char *url; /* etcd://H:P, http://H:P, etcds://H:P or https://H:P */
    int timeout_ms;
    const char *ca, *cert, *key; /* PEM files ("" or NULL: none) */
    const char *user, *password;
} gw_etcd_cfg_t;

typedef struct gw_etcd {
    char url[200];  /* as configured, for messages */
    char base[224]; /* http(s)://host:port */
    int tls;
    int timeout_ms;
    char ca[256], cert[256], key[256];
    char user[128], password[256];
    const gw_curl_t *curl;
    const gw_cjson_t *js;
    pthread_mutex_t mu; /* guards token */
    char token[512];
    unsigned auths;     /* tokens fetched (tests read it) */
} gw_etcd_t;

typedef struct gw_etcd_kv {
    char key[GW_ETCD_KEY_MAX];
    char value[GW_ETCD_VALUE_MAX + 1]; /* NUL-terminated for convenience */
    size_t value_len;
    int64_t create_rev, mod_rev, lease;
} gw_etcd_kv_t;

/* Checks the configuration and loads libcurl and cJSON.  GW_ERR_CONFIG (a
 * URL or TLS/auth setting that does not fit) or GW_ERR_UNAVAILABLE (a
 * library missing or broken: why names it), with why. */
gw_status_t gw_etcd_init(gw_etcd_t *e, const gw_etcd_cfg_t *cfg, char *why, size_t whylen);
void gw_etcd_fini(gw_etcd_t *e);

/* A kv object of an answer ("key", "value" base64).  0 / -1. */
int gw_etcd_kv_from(const gw_etcd_t *e, const cJSON *o, gw_etcd_kv_t *kv);

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
/* The kvs of a range answer's body (what gw_etcd_range reads; fuzzed). */
gw_status_t gw_etcd_range_parse(gw_etcd_t *e, const char *body, size_t len, gw_etcd_kv_cb cb, void *arg,
                                int64_t *rev, char *why, size_t whylen);

/* A watch of every key under a prefix from start_rev on: a streaming
 * request driven by a curl multi handle. */
typedef struct gw_etcd_watch {
    gw_etcd_t *e;
    CURLM *m;
    CURL *h;
    struct curl_slist *hdr;
    char *body;
    char *buf; /* bytes of the stream not yet dispatched */
    size_t len, cap;
    int overflow;
    int created;
    int64_t rev; /* newest revision seen */
    char err[CURL_ERROR_SIZE];
} gw_etcd_watch_t;
gw_status_t gw_etcd_watch_open(gw_etcd_t *e, const char *prefix, int64_t start_rev, gw_etcd_watch_t *w,
                               char *why, size_t whylen);
/* Event callback: is_delete, the kv (a delete carries only key and mod_rev). */
typedef void (*gw_etcd_event_cb)(void *arg, int is_delete, const gw_etcd_kv_t *kv);
/* Appends bytes of the stream and dispatches every complete message (used
 * by the reader and the fuzzer).  GW_OK, GW_ERR_PROTOCOL (malformed or
 * oversized), GW_ERR_CANCELED (etcd canceled the watch, e.g. compaction),
 * GW_ERR_AUTH (etcd refused the token or the permission). */
gw_status_t gw_etcd_watch_feed(gw_etcd_watch_t *w, const char *data, size_t n, gw_etcd_event_cb cb, void *arg,
                               char *why, size_t whylen);
/* Waits up to timeout_ms for data (or gw_etcd_watch_wake), dispatches.
 * GW_OK (also on a quiet timeout), GW_ERR_CONN_RESET when the stream
 * ended, or as above. */
gw_status_t gw_etcd_watch_poll(gw_etcd_watch_t *w, int timeout_ms, gw_etcd_event_cb cb, void *arg, char *why,
                               size_t whylen);
/* Wakes a gw_etcd_watch_poll of another thread (thread-safe). */
void gw_etcd_watch_wake(gw_etcd_watch_t *w);
void gw_etcd_watch_close(gw_etcd_watch_t *w);

#endif
