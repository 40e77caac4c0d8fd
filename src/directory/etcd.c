/* SPDX-License-Identifier: Apache-2.0 */
/* etcd.c - etcd v3 JSON gateway client (see etcd.h). */
#include "directory/etcd.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "directory/json.h"

gw_status_t gw_etcd_init(gw_etcd_t *e, const char *url, int timeout_ms, char *why, size_t whylen)
{
    memset(e, 0, sizeof(*e));
    snprintf(e->url, sizeof(e->url), "%s", url);
    e->timeout_ms = timeout_ms > 0 ? timeout_ms : 2000;
    return gw_http_hostport(url, e->hostport, sizeof(e->hostport), why, whylen);
}

/* base64 of a string key, and of its prefix end (last byte + 1). */
static int b64_key(const char *key, int range_end, char *out, size_t cap)
{
    char k[GW_ETCD_KEY_MAX];
    size_t n = strlen(key);
    if (!n || n >= sizeof(k))
        return -1;
    memcpy(k, key, n);
    if (range_end) {
        if ((unsigned char)k[n - 1] == 0xff)
            return -1;
        k[n - 1]++;
    }
    return gw_b64_encode(k, n, out, cap) ? 0 : -1;
}

/* POSTs and parses the JSON answer; maps etcd's error objects. */
static gw_status_t call(gw_etcd_t *e, const char *path, const char *body, gw_buf_t *out, gw_json_t *root,
                        char *why, size_t whylen)
{
    int status = 0;
    char w[256];
    gw_status_t st = gw_http_post(e->hostport, path, body, e->timeout_ms, &status, out, w, sizeof(w));
    if (st != GW_OK) {
        snprintf(why, whylen, "etcd at %s: %s", e->url, w);
        return st == GW_ERR_CONN_REFUSED ? GW_ERR_UNAVAILABLE : st;
    }
    size_t used;
    if (!out->p || gw_json_value(out->p, out->len, root, &used) != 1 || root->p[0] != '{') {
        snprintf(why, whylen, "etcd at %s: %s answered HTTP %d with no JSON object", e->url, path, status);
        return GW_ERR_PROTOCOL;
    }
    gw_json_t msg;
    if (status != 200 || gw_json_get(*root, "error", &msg)) {
        char m[200] = "";
        if (gw_json_get(*root, "message", &msg) || gw_json_get(*root, "error", &msg))
            gw_json_string(msg, m, sizeof(m));
        snprintf(why, whylen, "etcd at %s: %s failed (HTTP %d): %s", e->url, path, status, m[0] ? m : "no reason");
        return strstr(m, "not found") ? GW_ERR_NOT_FOUND : GW_ERR_PROTOCOL;
    }
    return GW_OK;
}

static int64_t header_rev(gw_json_t root)
{
    gw_json_t h, r;
    int64_t rev = 0;
    if (gw_json_get(root, "header", &h) && gw_json_get(h, "revision", &r))
        gw_json_i64(r, &rev);
    return rev;
}

int gw_etcd_parse_kv(const char *json, size_t n, gw_etcd_kv_t *kv)
{
    gw_json_t o = {json, n}, v;
    memset(kv, 0, sizeof(*kv));
    if (n < 2 || json[0] != '{')
        return -1;
    char b[((GW_ETCD_VALUE_MAX + 2) / 3) * 4 + 8];
    if (!gw_json_get(o, "key", &v) || gw_json_string(v, b, sizeof(b)) != 0)
        return -1;
    long kl = gw_b64_decode(b, strlen(b), kv->key, sizeof(kv->key) - 1);
    if (kl <= 0 || memchr(kv->key, '\0', (size_t)kl))
        return -1;
    kv->key[kl] = '\0';
    if (gw_json_get(o, "value", &v)) {
        if (gw_json_string(v, b, sizeof(b)) != 0)
            return -1;
        long vl = gw_b64_decode(b, strlen(b), kv->value, GW_ETCD_VALUE_MAX);
        if (vl < 0)
            return -1;
        kv->value_len = (size_t)vl;
        kv->value[vl] = '\0';
    }
    if (gw_json_get(o, "create_revision", &v) && gw_json_i64(v, &kv->create_rev) != 0)
        return -1;
    if (gw_json_get(o, "mod_revision", &v) && gw_json_i64(v, &kv->mod_rev) != 0)
        return -1;
    if (gw_json_get(o, "lease", &v) && gw_json_i64(v, &kv->lease) != 0)
        return -1;
    return 0;
}

gw_status_t gw_etcd_grant(gw_etcd_t *e, long ttl_s, int64_t *lease, char *why, size_t whylen)
{
    char body[64];
    snprintf(body, sizeof(body), "{\"TTL\":%ld}", ttl_s);
    gw_buf_t out = {0};
    gw_json_t root, v;
    gw_status_t st = call(e, "/v3/lease/grant", body, &out, &root, why, whylen);
    if (st == GW_OK && (!gw_json_get(root, "ID", &v) || gw_json_i64(v, lease) != 0 || *lease == 0)) {
        snprintf(why, whylen, "etcd at %s: lease grant answer has no ID", e->url);
        st = GW_ERR_PROTOCOL;
    }
    gw_buf_free(&out);
    return st;
}

gw_status_t gw_etcd_keepalive(gw_etcd_t *e, int64_t lease, int64_t *ttl, char *why, size_t whylen)
{
    char body[64];
    snprintf(body, sizeof(body), "{\"ID\":\"%lld\"}", (long long)lease);
    gw_buf_t out = {0};
    gw_json_t root, res, v;
    *ttl = 0;
    gw_status_t st = call(e, "/v3/lease/keepalive", body, &out, &root, why, whylen);
    if (st == GW_OK) {
        if (!gw_json_get(root, "result", &res))
            res = root;
        if (gw_json_get(res, "TTL", &v))
            gw_json_i64(v, ttl);
        if (*ttl <= 0) {
            snprintf(why, whylen, "etcd at %s: lease %lld has expired", e->url, (long long)lease);
            st = GW_ERR_NOT_FOUND;
        }
    }
    gw_buf_free(&out);
    return st;
}

gw_status_t gw_etcd_revoke(gw_etcd_t *e, int64_t lease, char *why, size_t whylen)
{
    char body[64];
    snprintf(body, sizeof(body), "{\"ID\":\"%lld\"}", (long long)lease);
    gw_buf_t out = {0};
    gw_json_t root;
    gw_status_t st = call(e, "/v3/lease/revoke", body, &out, &root, why, whylen);
    gw_buf_free(&out);
    return st;
}

gw_status_t gw_etcd_put(gw_etcd_t *e, const char *key, const void *val, size_t vlen, int64_t lease,
                        int64_t *rev, char *why, size_t whylen)
{
    char k[GW_ETCD_KEY_MAX * 2];
    char v[((GW_ETCD_VALUE_MAX + 2) / 3) * 4 + 8];
    if (vlen > GW_ETCD_VALUE_MAX || b64_key(key, 0, k, sizeof(k)) != 0 || !gw_b64_encode(val, vlen, v, sizeof(v))) {
        snprintf(why, whylen, "etcd put %s: key or value too long (%zu bytes, limit %d)", key, vlen, GW_ETCD_VALUE_MAX);
        return GW_ERR_INVALID;
    }
    char body[sizeof(k) + sizeof(v) + 96];
    if (lease)
        snprintf(body, sizeof(body), "{\"key\":\"%s\",\"value\":\"%s\",\"lease\":\"%lld\"}", k, v, (long long)lease);
    else
        snprintf(body, sizeof(body), "{\"key\":\"%s\",\"value\":\"%s\"}", k, v);
    gw_buf_t out = {0};
    gw_json_t root;
    gw_status_t st = call(e, "/v3/kv/put", body, &out, &root, why, whylen);
    if (st == GW_OK && rev)
        *rev = header_rev(root);
    gw_buf_free(&out);
    return st;
}

gw_status_t gw_etcd_create(gw_etcd_t *e, const char *key, const void *val, size_t vlen, int64_t lease, int64_t *rev,
                           gw_etcd_kv_t *holder, char *why, size_t whylen)
{
    char k[GW_ETCD_KEY_MAX * 2];
    char v[((GW_ETCD_VALUE_MAX + 2) / 3) * 4 + 8];
    if (vlen > GW_ETCD_VALUE_MAX || b64_key(key, 0, k, sizeof(k)) != 0 || !gw_b64_encode(val, vlen, v, sizeof(v))) {
        snprintf(why, whylen, "etcd create %s: key or value too long (%zu bytes, limit %d)", key, vlen,
                 GW_ETCD_VALUE_MAX);
        return GW_ERR_INVALID;
    }
    char ls[48] = "";
    if (lease)
        snprintf(ls, sizeof(ls), ",\"lease\":\"%lld\"", (long long)lease);
    /* one transaction: put only where the key has never been created (or was
     * deleted since, e.g. its lease ran out); otherwise read who holds it */
    char body[sizeof(k) * 3 + sizeof(v) + 256];
    snprintf(body, sizeof(body),
             "{\"compare\":[{\"key\":\"%s\",\"target\":\"CREATE\",\"result\":\"EQUAL\",\"create_revision\":\"0\"}],"
             "\"success\":[{\"request_put\":{\"key\":\"%s\",\"value\":\"%s\"%s}}],"
             "\"failure\":[{\"request_range\":{\"key\":\"%s\"}}]}",
             k, k, v, ls, k);
    gw_buf_t out = {0};
    gw_json_t root, x, resps, one, rr, kvs, kv;
    if (holder)
        memset(holder, 0, sizeof(*holder));
    gw_status_t st = call(e, "/v3/kv/txn", body, &out, &root, why, whylen);
    if (st != GW_OK)
        goto done;
    if (gw_json_get(root, "succeeded", &x) && gw_json_true(x)) {
        if (rev)
            *rev = header_rev(root);
        goto done;
    }
    st = GW_ERR_BUSY;
    snprintf(why, whylen, "etcd at %s: key %s exists", e->url, key);
    size_t it = 0, it2 = 0;
    if (holder && gw_json_get(root, "responses", &resps) && gw_json_next(resps, &it, &one) &&
        gw_json_get(one, "response_range", &rr) && gw_json_get(rr, "kvs", &kvs) && gw_json_next(kvs, &it2, &kv) &&
        gw_etcd_parse_kv(kv.p, kv.n, holder) != 0) {
        snprintf(why, whylen, "etcd at %s: malformed kv in a txn answer", e->url);
        st = GW_ERR_PROTOCOL;
    }
done:
    gw_buf_free(&out);
    return st;
}

gw_status_t gw_etcd_delete_leased(gw_etcd_t *e, const char *key, int64_t lease, char *why, size_t whylen)
{
    char k[GW_ETCD_KEY_MAX * 2];
    if (b64_key(key, 0, k, sizeof(k)) != 0) {
        snprintf(why, whylen, "etcd delete: bad key \"%s\"", key);
        return GW_ERR_INVALID;
    }
    char body[sizeof(k) * 2 + 256];
    snprintf(body, sizeof(body),
             "{\"compare\":[{\"key\":\"%s\",\"target\":\"LEASE\",\"result\":\"EQUAL\",\"lease\":\"%lld\"}],"
             "\"success\":[{\"request_delete_range\":{\"key\":\"%s\"}}]}",
             k, (long long)lease, k);
    gw_buf_t out = {0};
    gw_json_t root;
    gw_status_t st = call(e, "/v3/kv/txn", body, &out, &root, why, whylen);
    gw_buf_free(&out);
    return st;
}

gw_status_t gw_etcd_lease_ttl(gw_etcd_t *e, int64_t lease, int64_t *ttl, char *why, size_t whylen)
{
    char body[64];
    snprintf(body, sizeof(body), "{\"ID\":\"%lld\"}", (long long)lease);
    gw_buf_t out = {0};
    gw_json_t root, v;
    *ttl = -1;
    gw_status_t st = call(e, "/v3/lease/timetolive", body, &out, &root, why, whylen);
    if (st == GW_OK && gw_json_get(root, "TTL", &v))
        gw_json_i64(v, ttl);
    gw_buf_free(&out);
    return st;
}

/* The request body naming KEY, or every key under the prefix KEY
 * (deleterange and range take the same one). */
#define KEY_BODY_MAX (GW_ETCD_KEY_MAX * 4 + 64)
static int key_body(const char *key, int prefix, char *body, size_t cap)
{
    char k[GW_ETCD_KEY_MAX * 2], r[GW_ETCD_KEY_MAX * 2];
    if (b64_key(key, 0, k, sizeof(k)) != 0 || b64_key(key, 1, r, sizeof(r)) != 0)
        return -1;
    if (prefix)
        snprintf(body, cap, "{\"key\":\"%s\",\"range_end\":\"%s\"}", k, r);
    else
        snprintf(body, cap, "{\"key\":\"%s\"}", k);
    return 0;
}

gw_status_t gw_etcd_delete(gw_etcd_t *e, const char *key, int prefix, char *why, size_t whylen)
{
    char body[KEY_BODY_MAX];
    if (key_body(key, prefix, body, sizeof(body)) != 0) {
        snprintf(why, whylen, "etcd delete: bad key \"%s\"", key);
        return GW_ERR_INVALID;
    }
    gw_buf_t out = {0};
    gw_json_t root;
    gw_status_t st = call(e, "/v3/kv/deleterange", body, &out, &root, why, whylen);
    gw_buf_free(&out);
    return st;
}

gw_status_t gw_etcd_range(gw_etcd_t *e, const char *key, int prefix, gw_etcd_kv_cb cb, void *arg,
                          int64_t *rev, char *why, size_t whylen)
{
    char body[KEY_BODY_MAX];
    if (key_body(key, prefix, body, sizeof(body)) != 0) {
        snprintf(why, whylen, "etcd range: bad key \"%s\"", key);
        return GW_ERR_INVALID;
    }
    gw_buf_t out = {0};
    gw_json_t root, kvs, one;
    gw_status_t st = call(e, "/v3/kv/range", body, &out, &root, why, whylen);
    if (st != GW_OK)
        goto done;
    if (rev)
        *rev = header_rev(root);
    if (gw_json_get(root, "kvs", &kvs)) {
        size_t it = 0;
        gw_etcd_kv_t *kv = malloc(sizeof(*kv));
        if (!kv) {
            st = GW_ERR_NOMEM;
            goto done;
        }
        while (gw_json_next(kvs, &it, &one)) {
            if (gw_etcd_parse_kv(one.p, one.n, kv) != 0) {
                snprintf(why, whylen, "etcd at %s: malformed kv in a range answer", e->url);
                st = GW_ERR_PROTOCOL;
                break;
            }
            if (cb(arg, kv))
                break;
        }
        free(kv);
    }
done:
    gw_buf_free(&out);
    return st;
}

gw_status_t gw_etcd_watch_open(gw_etcd_t *e, const char *prefix, int64_t start_rev, gw_etcd_watch_t *w,
                               char *why, size_t whylen)
{
    memset(w, 0, sizeof(*w));
    w->fd = -1;
    w->buf.max = 4u << 20;
    char k[GW_ETCD_KEY_MAX * 2], r[GW_ETCD_KEY_MAX * 2];
    if (b64_key(prefix, 0, k, sizeof(k)) != 0 || b64_key(prefix, 1, r, sizeof(r)) != 0) {
        snprintf(why, whylen, "etcd watch: bad prefix \"%s\"", prefix);
        return GW_ERR_INVALID;
    }
    char body[sizeof(k) * 2 + 128];
    snprintf(body, sizeof(body), "{\"create_request\":{\"key\":\"%s\",\"range_end\":\"%s\",\"start_revision\":\"%lld\"}}",
             k, r, (long long)start_rev);
    char wy[256];
    gw_status_t st = gw_http_stream_open(e->hostport, "/v3/watch", body, e->timeout_ms, &w->fd, &w->dec, &w->buf, wy,
                                         sizeof(wy));
    if (st != GW_OK) {
        snprintf(why, whylen, "etcd at %s: watch: %s", e->url, wy);
        gw_buf_free(&w->buf);
        return st == GW_ERR_CONN_REFUSED ? GW_ERR_UNAVAILABLE : st;
    }
    w->rev = start_rev - 1;
    return GW_OK;
}

gw_status_t gw_etcd_watch_dispatch(gw_etcd_watch_t *w, gw_etcd_event_cb cb, void *arg, char *why, size_t whylen)
{
    gw_etcd_kv_t *kv = NULL;
    gw_status_t st = GW_OK;
    while (w->buf.len) {
        gw_json_t msg, res, v, evs, ev;
        size_t used;
        int r = gw_json_value(w->buf.p, w->buf.len, &msg, &used);
        if (r == 0)
            break;
        if (r < 0 || msg.p[0] != '{') {
            snprintf(why, whylen, "malformed watch message");
            st = GW_ERR_PROTOCOL;
            break;
        }
        if (gw_json_get(msg, "error", &v)) {
            char m[160] = "";
            gw_json_t mm;
            if (gw_json_get(msg, "message", &mm) || gw_json_get(v, "message", &mm))
                gw_json_string(mm, m, sizeof(m));
            snprintf(why, whylen, "watch failed: %s", m[0] ? m : "no reason");
            st = GW_ERR_CANCELED;
            break;
        }
        if (!gw_json_get(msg, "result", &res))
            res = msg;
        int64_t hrev = header_rev(res);
        if (hrev > w->rev)
            w->rev = hrev;
        if (gw_json_get(res, "created", &v) && gw_json_true(v))
            w->created = 1;
        if (gw_json_get(res, "canceled", &v) && gw_json_true(v)) {
            char m[160] = "";
            if (gw_json_get(res, "cancel_reason", &v))
                gw_json_string(v, m, sizeof(m));
            snprintf(why, whylen, "etcd canceled the watch: %s", m[0] ? m : "no reason");
            st = GW_ERR_CANCELED;
            break;
        }
        if (gw_json_get(res, "events", &evs)) {
            if (!kv && !(kv = malloc(sizeof(*kv)))) {
                st = GW_ERR_NOMEM;
                break;
            }
            size_t it = 0;
            while (gw_json_next(evs, &it, &ev)) {
                gw_json_t kvj, t;
                char type[16] = "PUT";
                if (gw_json_get(ev, "type", &t))
                    gw_json_string(t, type, sizeof(type));
                if (!gw_json_get(ev, "kv", &kvj) || gw_etcd_parse_kv(kvj.p, kvj.n, kv) != 0) {
                    snprintf(why, whylen, "malformed watch event");
                    st = GW_ERR_PROTOCOL;
                    goto out;
                }
                if (kv->mod_rev > w->rev)
                    w->rev = kv->mod_rev;
                cb(arg, strcmp(type, "DELETE") == 0, kv);
            }
        }
        gw_buf_consume(&w->buf, used); /* used counts from the buffer's start */
    }
out:
    free(kv);
    return st;
}

gw_status_t gw_etcd_watch_poll(gw_etcd_watch_t *w, int timeout_ms, gw_etcd_event_cb cb, void *arg, char *why,
                               size_t whylen)
{
    gw_status_t st = gw_etcd_watch_dispatch(w, cb, arg, why, whylen);
    if (st != GW_OK)
        return st;
    struct pollfd p = {.fd = w->fd, .events = POLLIN};
    int r = poll(&p, 1, timeout_ms);
    if (r <= 0)
        return GW_OK;
    char tmp[8192];
    ssize_t n = read(w->fd, tmp, sizeof(tmp));
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return GW_OK;
    if (n <= 0) {
        snprintf(why, whylen, "the watch stream ended");
        return GW_ERR_CONN_RESET;
    }
    size_t off = 0;
    while (off < (size_t)n) {
        size_t used;
        int fr = gw_http_body_feed(&w->dec, tmp + off, (size_t)n - off, &used, &w->buf);
        if (fr < 0) {
            snprintf(why, whylen, "malformed or oversized watch stream");
            return GW_ERR_PROTOCOL;
        }
        off += used;
        if (fr == 1) {
            gw_etcd_watch_dispatch(w, cb, arg, why, whylen);
            snprintf(why, whylen, "the watch stream ended");
            return GW_ERR_CONN_RESET;
        }
    }
    return gw_etcd_watch_dispatch(w, cb, arg, why, whylen);
}

void gw_etcd_watch_close(gw_etcd_watch_t *w)
{
    if (w->fd >= 0)
        close(w->fd);
    w->fd = -1;
    gw_buf_free(&w->buf);
}
