/* SPDX-License-Identifier: Apache-2.0 */
/* etcd.c - etcd v3 JSON gateway client through libcurl and cJSON (see
 * etcd.h). */
#include "names/etcd.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BODY_MAX (8u << 20)  /* a unary answer */
#define WATCH_MAX (4u << 20) /* undelivered watch bytes */

/* ---- base64 (etcd's keys and values) ------------------------------------------------ */
static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static size_t b64_encode(const void *in, size_t n, char *buf, size_t cap)
{
    const uint8_t *p = in;
    size_t need = (n + 2) / 3 * 4;
    if (need + 1 > cap)
        return 0;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        buf[o++] = B64[v >> 18 & 63];
        buf[o++] = B64[v >> 12 & 63];
        buf[o++] = i + 1 < n ? B64[v >> 6 & 63] : '=';
        buf[o++] = i + 2 < n ? B64[v & 63] : '=';
    }
    buf[o] = '\0';
    return o;
}

static int b64_val(char c)
{
    const char *p = c ? strchr(B64, c) : NULL;
    return p ? (int)(p - B64) : -1;
}

static long b64_decode(const char *in, size_t n, void *out, size_t cap)
{
    uint8_t *o = out;
    size_t k = 0;
    if (n % 4)
        return -1;
    for (size_t i = 0; i < n; i += 4) {
        int v[4];
        for (int j = 0; j < 4; j++) {
            v[j] = in[i + j] == '=' && i + 4 == n && j >= 2 ? 0 : b64_val(in[i + j]);
            if (v[j] < 0)
                return -1;
        }
        if (in[i + 2] == '=' && in[i + 3] != '=')
            return -1;
        uint32_t x = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        int bytes = in[i + 2] == '=' ? 1 : in[i + 3] == '=' ? 2 : 3;
        if (k + (size_t)bytes > cap)
            return -1;
        o[k++] = (uint8_t)(x >> 16);
        if (bytes > 1)
            o[k++] = (uint8_t)(x >> 8);
        if (bytes > 2)
            o[k++] = (uint8_t)x;
    }
    return (long)k;
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
    return b64_encode(k, n, out, cap) ? 0 : -1;
}

/* ---- JSON helpers (cJSON) ------------------------------------------------------------- */
static int j_str(const gw_etcd_t *e, const cJSON *o, const char *name, char *buf, size_t cap)
{
    const cJSON *v = o ? e->js->get(o, name) : NULL;
    if (!v || !(v->type & cJSON_String) || !v->valuestring || strlen(v->valuestring) >= cap)
        return -1;
    snprintf(buf, cap, "%s", v->valuestring);
    return 0;
}

/* etcd's gateway writes 64-bit integers as strings; numbers are taken too.
 * 1 found, 0 absent, -1 malformed. */
static int j_i64(const gw_etcd_t *e, const cJSON *o, const char *name, int64_t *out)
{
    const cJSON *v = o ? e->js->get(o, name) : NULL;
    if (!v)
        return 0;
    if (v->type & cJSON_Number) {
        if (v->valuedouble < -9.2e18 || v->valuedouble > 9.2e18)
            return -1;
        *out = (int64_t)v->valuedouble;
        return 1;
    }
    if (!(v->type & cJSON_String) || !v->valuestring || !v->valuestring[0])
        return -1;
    char *end;
    errno = 0;
    long long x = strtoll(v->valuestring, &end, 10);
    if (*end || errno)
        return -1;
    *out = x;
    return 1;
}

static int j_true(const gw_etcd_t *e, const cJSON *o, const char *name)
{
    const cJSON *v = o ? e->js->get(o, name) : NULL;
    return v && (v->type & 0xff) == cJSON_True;
}

static int64_t header_rev(const gw_etcd_t *e, const cJSON *root)
{
    int64_t rev = 0;
    if (j_i64(e, e->js->get(root, "header"), "revision", &rev) != 1)
        rev = 0;
    return rev;
}

int gw_etcd_kv_from(const gw_etcd_t *e, const cJSON *o, gw_etcd_kv_t *kv)
{
    memset(kv, 0, sizeof(*kv));
    if (!o || !(o->type & cJSON_Object))
        return -1;
    char b[((GW_ETCD_VALUE_MAX + 2) / 3) * 4 + 8];
    if (j_str(e, o, "key", b, sizeof(b)) != 0)
        return -1;
    long kl = b64_decode(b, strlen(b), kv->key, sizeof(kv->key) - 1);
    if (kl <= 0 || memchr(kv->key, '\0', (size_t)kl))
        return -1;
    kv->key[kl] = '\0';
    if (e->js->get(o, "value")) {
        if (j_str(e, o, "value", b, sizeof(b)) != 0)
            return -1;
        long vl = b64_decode(b, strlen(b), kv->value, GW_ETCD_VALUE_MAX);
        if (vl < 0)
            return -1;
        kv->value_len = (size_t)vl;
        kv->value[vl] = '\0';
    }
    if (j_i64(e, o, "create_revision", &kv->create_rev) < 0 || j_i64(e, o, "mod_revision", &kv->mod_rev) < 0 ||
        j_i64(e, o, "lease", &kv->lease) < 0)
        return -1;
    return 0;
}

/* ---- set-up --------------------------------------------------------------------------- */
gw_status_t gw_etcd_init(gw_etcd_t *e, const gw_etcd_cfg_t *cfg, char *why, size_t whylen)
{
    memset(e, 0, sizeof(*e));
    pthread_mutex_init(&e->mu, NULL);
    const char *url = cfg->url ? cfg->url : "";
    snprintf(e->url, sizeof(e->url), "%s", url);
    e->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : 2000;
    const char *hp = url;
    static const struct { const char *scheme; int tls; } schemes[] = {
        {"etcd://", 0}, {"http://", 0}, {"etcds://", 1}, {"https://", 1}};
    int known = 0;
    for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++)
        if (!strncmp(url, schemes[i].scheme, strlen(schemes[i].scheme))) {
            hp = url + strlen(schemes[i].scheme);
            e->tls = schemes[i].tls;
            known = 1;
        }
    if (!known && strstr(url, "://")) {
        snprintf(why, whylen, "unknown scheme in \"%s\" (etcd://, http://, etcds:// or https:// expected)", url);
        return GW_ERR_CONFIG;
    }
    size_t hl = strcspn(hp, "/");
    if (!hl || hl > 200 || !memchr(hp, ':', hl) || (hp[hl] && strcmp(hp + hl, "/"))) {
        snprintf(why, whylen, "\"%s\" is not [etcd|etcds]://HOST:PORT", url);
        return GW_ERR_CONFIG;
    }
    snprintf(e->base, sizeof(e->base), "%s://%.*s", e->tls ? "https" : "http", (int)hl, hp);
#define CP_(field, v) snprintf(e->field, sizeof(e->field), "%s", (v) ? (v) : "")
    CP_(ca, cfg->ca);
    CP_(cert, cfg->cert);
    CP_(key, cfg->key);
    CP_(user, cfg->user);
    CP_(password, cfg->password);
#undef CP_
    if (!e->tls && (e->ca[0] || e->cert[0] || e->key[0])) {
        snprintf(why, whylen, "GPUWIRE_DIRECTORY_%s is set but %s speaks plain http: use etcds://%.*s for TLS",
                 e->ca[0] ? "CA" : e->cert[0] ? "CERT" : "KEY", url, (int)hl, hp);
        return GW_ERR_CONFIG;
    }
    if (!e->cert[0] != !e->key[0]) {
        snprintf(why, whylen, "GPUWIRE_DIRECTORY_%s is set without GPUWIRE_DIRECTORY_%s (a client certificate needs both)",
                 e->cert[0] ? "CERT" : "KEY", e->cert[0] ? "KEY" : "CERT");
        return GW_ERR_CONFIG;
    }
    if (!e->user[0] != !e->password[0]) {
        snprintf(why, whylen, "%s (etcd authentication needs GPUWIRE_DIRECTORY_USER and a password)",
                 e->user[0] ? "GPUWIRE_DIRECTORY_USER is set without a password (GPUWIRE_DIRECTORY_PASSWORD or _FILE)"
                            : "a directory password is set without GPUWIRE_DIRECTORY_USER");
        return GW_ERR_CONFIG;
    }
    char w[400];
    if (!(e->curl = gw_curl_get(w, sizeof(w))) || !(e->js = gw_cjson_get(w, sizeof(w)))) {
        snprintf(why, whylen, "the etcd directory is unavailable: %s", w);
        return GW_ERR_UNAVAILABLE;
    }
    return GW_OK;
}

void gw_etcd_fini(gw_etcd_t *e)
{
    memset(e->password, 0, sizeof(e->password));
    memset(e->token, 0, sizeof(e->token));
    pthread_mutex_destroy(&e->mu);
}

/* ---- requests ------------------------------------------------------------------------- */
/* A SIGPIPE that a write into a connection etcd closed might raise (the TLS
 * library's writes, depending on the libcurl build) is kept from the
 * application: blocked on this thread for the call, and taken if it came
 * (only if it was not pending before). */
typedef struct pipe_guard {
    sigset_t old;
    int was_pending;
} pipe_guard_t;

static void pipe_block(pipe_guard_t *g)
{
    sigset_t set, pend;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    sigpending(&pend);
    g->was_pending = sigismember(&pend, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set, &g->old);
}

static void pipe_restore(pipe_guard_t *g)
{
    sigset_t set, pend;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    sigpending(&pend);
    if (!g->was_pending && sigismember(&pend, SIGPIPE)) {
        struct timespec zero = {0, 0};
        sigtimedwait(&set, NULL, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

typedef struct sink {
    char *p;
    size_t len, cap, max;
    int overflow;
} sink_t;

/* Appends n bytes of a response to a growing buffer (first size `first`,
 * doubled as needed; a NUL kept after the data); more than max in all sets
 * *overflow.  Returns n, or 0 to make libcurl abort the transfer. */
static size_t append_grow(char **buf, size_t *len, size_t *cap, size_t max, size_t first, int *overflow,
                          const char *data, size_t n)
{
    if (*len + n + 1 > max) {
        *overflow = 1;
        return 0;
    }
    if (*len + n + 1 > *cap) {
        size_t c = *cap ? *cap : first;
        while (c < *len + n + 1)
            c *= 2;
        char *p = realloc(*buf, c);
        if (!p)
            return 0;
        *buf = p;
        *cap = c;
    }
    memcpy(*buf + *len, data, n);
    *len += n;
    (*buf)[*len] = '\0';
    return n;
}

static size_t sink_write(char *data, size_t sz, size_t nm, void *arg)
{
    sink_t *s = arg;
    return append_grow(&s->p, &s->len, &s->cap, s->max, 4096, &s->overflow, data, sz * nm);
}

/* A handle set up for one POST of path (TLS, timeouts, the token). */
static CURL *new_handle(gw_etcd_t *e, const char *path, const char *body, int stream, struct curl_slist **hdr,
                        char *errbuf)
{
    const gw_curl_t *c = e->curl;
    CURL *h = c->easy_init();
    if (!h)
        return NULL;
    char url[sizeof(e->base) + 64], auth[sizeof(e->token) + 32] = "";
    snprintf(url, sizeof(url), "%s%s", e->base, path);
    *hdr = c->slist_append(NULL, "Content-Type: application/json");
    pthread_mutex_lock(&e->mu);
    if (e->token[0] && strcmp(path, "/v3/auth/authenticate") != 0)
        snprintf(auth, sizeof(auth), "Authorization: %s", e->token);
    pthread_mutex_unlock(&e->mu);
    if (auth[0] && *hdr)
        *hdr = c->slist_append(*hdr, auth);
    memset(auth, 0, sizeof(auth));
    errbuf[0] = '\0';
    c->easy_setopt(h, CURLOPT_URL, url);
    c->easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    c->easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    c->easy_setopt(h, CURLOPT_POSTFIELDS, body);
    c->easy_setopt(h, CURLOPT_HTTPHEADER, *hdr);
    c->easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)e->timeout_ms);
    if (!stream)
        c->easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)e->timeout_ms);
    c->easy_setopt(h, CURLOPT_PROXY, ""); /* the directory is reached directly, never through a proxy */
    if (e->tls) {
        c->easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
        c->easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
        if (e->ca[0])
            c->easy_setopt(h, CURLOPT_CAINFO, e->ca);
        if (e->cert[0]) {
            c->easy_setopt(h, CURLOPT_SSLCERT, e->cert);
            c->easy_setopt(h, CURLOPT_SSLKEY, e->key);
        }
    }
    return h;
}

/* A transfer's failure, by what it means to the caller. */
static gw_status_t curl_status(gw_etcd_t *e, CURL *h, CURLcode r, const char *errbuf, const char *path, char *why,
                               size_t whylen)
{
    /* each request has a connection of its own: one that failed before any
     * answer came over TLS was refused by TLS (with TLS 1.3 a server that
     * rejects the client's certificate says so after the client finished
     * its handshake, at the first read); a failure after an answer began is
     * the network's */
    long answered = 0;
    if (h && e->curl->easy_getinfo(h, CURLINFO_RESPONSE_CODE, &answered) != CURLE_OK)
        answered = 0;
    const char *d = errbuf && errbuf[0] ? errbuf : e->curl->easy_strerror(r);
    gw_status_t st = GW_ERR_UNAVAILABLE;
    const char *hint = "";
    switch (r) {
    case CURLE_OPERATION_TIMEDOUT: st = GW_ERR_TIMEOUT; break;
    case CURLE_PEER_FAILED_VERIFICATION:
        st = GW_ERR_AUTH;
        hint = " (etcd's certificate is not signed by GPUWIRE_DIRECTORY_CA, or names another host)";
        break;
    case CURLE_SSL_CACERT_BADFILE: st = GW_ERR_CONFIG; hint = " (GPUWIRE_DIRECTORY_CA)"; break;
    case CURLE_SSL_CERTPROBLEM: st = GW_ERR_CONFIG; hint = " (GPUWIRE_DIRECTORY_CERT / GPUWIRE_DIRECTORY_KEY)"; break;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
        if (e->tls && !answered) {
            st = GW_ERR_AUTH;
            hint = e->cert[0] ? " (the TLS connection was refused before any answer: does etcd trust this client "
                                "certificate?)"
                              : " (the TLS connection was refused before any answer: an etcd that checks clients "
                                "needs GPUWIRE_DIRECTORY_CERT and GPUWIRE_DIRECTORY_KEY)";
        }
        break;
    default: break;
    }
    snprintf(why, whylen, "etcd at %s: %s: %s%s", e->url, path, d, hint);
    return st;
}

/* etcd's error object: status and message.  1 when it is one. */
static int etcd_error(gw_etcd_t *e, const cJSON *root, long http, gw_status_t *st, char *msg, size_t cap,
                      int *bad_token)
{
    const cJSON *er = e->js->get(root, "error");
    *bad_token = 0;
    if (!er && http == 200)
        return 0;
    msg[0] = '\0';
    if (j_str(e, root, "message", msg, cap) != 0 && (!er || j_str(e, er, "message", msg, cap) != 0) &&
        j_str(e, root, "error", msg, cap) != 0)
        snprintf(msg, cap, "no reason given");
    int64_t code = 0;
    if (j_i64(e, root, "code", &code) != 1 && er)
        j_i64(e, er, "grpc_code", &code);
    *st = GW_ERR_PROTOCOL;
    if (strstr(msg, "not found"))
        *st = GW_ERR_NOT_FOUND;
    if (code == 16 || strstr(msg, "invalid auth token")) {
        *st = GW_ERR_AUTH;
        *bad_token = 1;
    } else if (code == 7 || strstr(msg, "permission denied") || strstr(msg, "user name is empty") ||
               strstr(msg, "authentication failed") || strstr(msg, "user name not found")) {
        *st = GW_ERR_AUTH;
    }
    return 1;
}

static gw_status_t authenticate(gw_etcd_t *e, char *why, size_t whylen);

/* POSTs body to path and parses the JSON answer into *root (the caller
 * deletes it); maps etcd's error objects.  A token etcd calls invalid is
 * fetched again, once. */
static gw_status_t call(gw_etcd_t *e, const char *path, const char *body, cJSON **root, char *why, size_t whylen)
{
    *root = NULL;
    for (int attempt = 0;; attempt++) {
        if (e->user[0] && strcmp(path, "/v3/auth/authenticate") != 0) {
            pthread_mutex_lock(&e->mu);
            int have = e->token[0] != 0;
            pthread_mutex_unlock(&e->mu);
            gw_status_t ast = have ? GW_OK : authenticate(e, why, whylen);
            if (ast != GW_OK)
                return ast;
        }
        struct curl_slist *hdr = NULL;
        char errbuf[CURL_ERROR_SIZE];
        CURL *h = new_handle(e, path, body, 0, &hdr, errbuf);
        if (!h || !hdr) {
            if (h)
                e->curl->easy_cleanup(h);
            e->curl->slist_free_all(hdr);
            snprintf(why, whylen, "etcd at %s: out of memory for a request", e->url);
            return GW_ERR_NOMEM;
        }
        sink_t s = {.max = BODY_MAX};
        e->curl->easy_setopt(h, CURLOPT_WRITEFUNCTION, sink_write);
        e->curl->easy_setopt(h, CURLOPT_WRITEDATA, &s);
        pipe_guard_t pg;
        pipe_block(&pg);
        CURLcode r = e->curl->easy_perform(h);
        pipe_restore(&pg);
        long http = 0;
        e->curl->easy_getinfo(h, CURLINFO_RESPONSE_CODE, &http);
        gw_status_t st = GW_OK;
        if (r != CURLE_OK)
            st = s.overflow ? (snprintf(why, whylen, "etcd at %s: %s: answer longer than %u bytes", e->url, path,
                                        BODY_MAX), GW_ERR_PROTOCOL)
                            : curl_status(e, h, r, errbuf, path, why, whylen);
        e->curl->easy_cleanup(h);
        e->curl->slist_free_all(hdr);
        cJSON *j = st == GW_OK && s.p ? e->js->parse_len(s.p, s.len) : NULL;
        if (st == GW_OK && (!j || !(j->type & cJSON_Object))) {
            snprintf(why, whylen, "etcd at %s: %s answered HTTP %ld with no JSON object (%.80s)", e->url, path, http,
                     s.p ? s.p : "an empty body");
            st = GW_ERR_PROTOCOL;
        }
        free(s.p);
        if (st != GW_OK) {
            if (j)
                e->js->del(j);
            return st;
        }
        char msg[240];
        int bad_token;
        if (etcd_error(e, j, http, &st, msg, sizeof(msg), &bad_token)) {
            e->js->del(j);
            if (bad_token && e->user[0] && attempt == 0) { /* expired, or etcd restarted: a new token */
                pthread_mutex_lock(&e->mu);
                e->token[0] = '\0';
                pthread_mutex_unlock(&e->mu);
                continue;
            }
            const char *hint = "";
            if (st == GW_ERR_AUTH && !e->user[0])
                hint = " (etcd has authentication on: set GPUWIRE_DIRECTORY_USER and GPUWIRE_DIRECTORY_PASSWORD_FILE)";
            else if (st == GW_ERR_AUTH && strstr(msg, "permission denied"))
                hint = " (check the role of GPUWIRE_DIRECTORY_USER: it needs read and write on the directory prefix)";
            else if (st == GW_ERR_AUTH && !strcmp(path, "/v3/auth/authenticate"))
                hint = " (check GPUWIRE_DIRECTORY_USER and GPUWIRE_DIRECTORY_PASSWORD_FILE)";
            snprintf(why, whylen, "etcd at %s: %s failed (HTTP %ld): %s%s", e->url, path, http, msg, hint);
            return st;
        }
        *root = j;
        return GW_OK;
    }
}

static gw_status_t authenticate(gw_etcd_t *e, char *why, size_t whylen)
{
    cJSON *req = e->js->create_object();
    char *body = NULL;
    if (req && e->js->add_string(req, "name", e->user) && e->js->add_string(req, "password", e->password))
        body = e->js->print(req);
    if (req)
        e->js->del(req);
    if (!body) {
        snprintf(why, whylen, "etcd at %s: out of memory", e->url);
        return GW_ERR_NOMEM;
    }
    cJSON *root;
    char w[400];
    gw_status_t st = call(e, "/v3/auth/authenticate", body, &root, w, sizeof(w));
    memset(body, 0, strlen(body)); /* it held the password */
    e->js->free_(body);
    if (st != GW_OK) {
        snprintf(why, whylen, "authenticating as etcd user \"%s\": %s", e->user, w);
        return st == GW_ERR_PROTOCOL && strstr(w, "authentication is not enabled") ? GW_ERR_CONFIG
               : st == GW_ERR_PROTOCOL                                                ? GW_ERR_AUTH
                                                                                      : st;
    }
    char tok[sizeof(e->token)];
    if (j_str(e, root, "token", tok, sizeof(tok)) != 0 || !tok[0]) {
        e->js->del(root);
        snprintf(why, whylen, "etcd at %s: the authenticate answer has no token", e->url);
        return GW_ERR_PROTOCOL;
    }
    e->js->del(root);
    pthread_mutex_lock(&e->mu);
    snprintf(e->token, sizeof(e->token), "%s", tok);
    e->auths++;
    pthread_mutex_unlock(&e->mu);
    memset(tok, 0, sizeof(tok));
    return GW_OK;
}

/* ---- the calls ------------------------------------------------------------------------ */
gw_status_t gw_etcd_grant(gw_etcd_t *e, long ttl_s, int64_t *lease, char *why, size_t whylen)
{
    char body[64];
    snprintf(body, sizeof(body), "{\"TTL\":%ld}", ttl_s);
    cJSON *root;
    gw_status_t st = call(e, "/v3/lease/grant", body, &root, why, whylen);
    if (st != GW_OK)
        return st;
    if (j_i64(e, root, "ID", lease) != 1 || *lease == 0) {
        snprintf(why, whylen, "etcd at %s: lease grant answer has no ID", e->url);
        st = GW_ERR_PROTOCOL;
    }
    e->js->del(root);
    return st;
}

gw_status_t gw_etcd_keepalive(gw_etcd_t *e, int64_t lease, int64_t *ttl, char *why, size_t whylen)
{
    char body[64];
    snprintf(body, sizeof(body), "{\"ID\":\"%lld\"}", (long long)lease);
    cJSON *root;
    *ttl = 0;
    gw_status_t st = call(e, "/v3/lease/keepalive", body, &root, why, whylen);
    if (st != GW_OK)
        return st;
    const cJSON *res = e->js->get(root, "result");
    if (j_i64(e, res ? res : root, "TTL", ttl) != 1 || *ttl <= 0) {
        snprintf(why, whylen, "etcd at %s: lease %lld has expired", e->url, (long long)lease);
        st = GW_ERR_NOT_FOUND;
    }
    e->js->del(root);
    return st;
}

static gw_status_t call_only(gw_etcd_t *e, const char *path, const char *body, char *why, size_t whylen)
{
    cJSON *root;
    gw_status_t st = call(e, path, body, &root, why, whylen);
    if (st == GW_OK)
        e->js->del(root);
    return st;
}

gw_status_t gw_etcd_revoke(gw_etcd_t *e, int64_t lease, char *why, size_t whylen)
{
    char body[64];
    snprintf(body, sizeof(body), "{\"ID\":\"%lld\"}", (long long)lease);
    return call_only(e, "/v3/lease/revoke", body, why, whylen);
}

gw_status_t gw_etcd_put(gw_etcd_t *e, const char *key, const void *val, size_t vlen, int64_t lease,
                        int64_t *rev, char *why, size_t whylen)
{
    char k[GW_ETCD_KEY_MAX * 2];
    char v[((GW_ETCD_VALUE_MAX + 2) / 3) * 4 + 8];
    if (vlen > GW_ETCD_VALUE_MAX || b64_key(key, 0, k, sizeof(k)) != 0 || !b64_encode(val, vlen, v, sizeof(v))) {
        snprintf(why, whylen, "etcd put %s: key or value too long (%zu bytes, limit %d)", key, vlen, GW_ETCD_VALUE_MAX);
        return GW_ERR_INVALID;
    }
    char body[sizeof(k) + sizeof(v) + 96];
    if (lease)
        snprintf(body, sizeof(body), "{\"key\":\"%s\",\"value\":\"%s\",\"lease\":\"%lld\"}", k, v, (long long)lease);
    else
        snprintf(body, sizeof(body), "{\"key\":\"%s\",\"value\":\"%s\"}", k, v);
    cJSON *root;
    gw_status_t st = call(e, "/v3/kv/put", body, &root, why, whylen);
    if (st != GW_OK)
        return st;
    if (rev)
        *rev = header_rev(e, root);
    e->js->del(root);
    return GW_OK;
}

gw_status_t gw_etcd_create(gw_etcd_t *e, const char *key, const void *val, size_t vlen, int64_t lease, int64_t *rev,
                           gw_etcd_kv_t *holder, char *why, size_t whylen)
{
    char k[GW_ETCD_KEY_MAX * 2];
    char v[((GW_ETCD_VALUE_MAX + 2) / 3) * 4 + 8];
    if (vlen > GW_ETCD_VALUE_MAX || b64_key(key, 0, k, sizeof(k)) != 0 || !b64_encode(val, vlen, v, sizeof(v))) {
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
    if (holder)
        memset(holder, 0, sizeof(*holder));
    cJSON *root;
    gw_status_t st = call(e, "/v3/kv/txn", body, &root, why, whylen);
    if (st != GW_OK)
        return st;
    if (j_true(e, root, "succeeded")) {
        if (rev)
            *rev = header_rev(e, root);
        e->js->del(root);
        return GW_OK;
    }
    st = GW_ERR_BUSY;
    snprintf(why, whylen, "etcd at %s: key %s exists", e->url, key);
    const cJSON *resps = e->js->get(root, "responses"), *one = resps && resps->child ? resps->child : NULL;
    const cJSON *rr = one ? e->js->get(one, "response_range") : NULL, *kvs = rr ? e->js->get(rr, "kvs") : NULL;
    if (holder && kvs && kvs->child && gw_etcd_kv_from(e, kvs->child, holder) != 0) {
        snprintf(why, whylen, "etcd at %s: malformed kv in a txn answer", e->url);
        st = GW_ERR_PROTOCOL;
    }
    e->js->del(root);
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
    return call_only(e, "/v3/kv/txn", body, why, whylen);
}

gw_status_t gw_etcd_lease_ttl(gw_etcd_t *e, int64_t lease, int64_t *ttl, char *why, size_t whylen)
{
    char body[64];
    snprintf(body, sizeof(body), "{\"ID\":\"%lld\"}", (long long)lease);
    cJSON *root;
    *ttl = -1;
    gw_status_t st = call(e, "/v3/lease/timetolive", body, &root, why, whylen);
    if (st != GW_OK)
        return st;
    if (j_i64(e, root, "TTL", ttl) != 1)
        *ttl = -1;
    e->js->del(root);
    return GW_OK;
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
    return call_only(e, "/v3/kv/deleterange", body, why, whylen);
}

static gw_status_t range_kvs(gw_etcd_t *e, const cJSON *root, gw_etcd_kv_cb cb, void *arg, int64_t *rev, char *why,
                             size_t whylen)
{
    if (rev)
        *rev = header_rev(e, root);
    const cJSON *kvs = e->js->get(root, "kvs"), *one;
    if (!kvs)
        return GW_OK;
    if (!(kvs->type & cJSON_Array)) {
        snprintf(why, whylen, "etcd at %s: a range answer's kvs is no array", e->url);
        return GW_ERR_PROTOCOL;
    }
    gw_etcd_kv_t *kv = malloc(sizeof(*kv));
    if (!kv)
        return GW_ERR_NOMEM;
    gw_status_t st = GW_OK;
    cJSON_ArrayForEach(one, kvs)
    {
        if (gw_etcd_kv_from(e, one, kv) != 0) {
            snprintf(why, whylen, "etcd at %s: malformed kv in a range answer", e->url);
            st = GW_ERR_PROTOCOL;
            break;
        }
        if (cb && cb(arg, kv))
            break;
    }
    free(kv);
    return st;
}

gw_status_t gw_etcd_range_parse(gw_etcd_t *e, const char *body, size_t len, gw_etcd_kv_cb cb, void *arg,
                                int64_t *rev, char *why, size_t whylen)
{
    cJSON *root = e->js->parse_len(body, len);
    if (!root || !(root->type & cJSON_Object)) {
        if (root)
            e->js->del(root);
        snprintf(why, whylen, "etcd at %s: a range answer is no JSON object", e->url);
        return GW_ERR_PROTOCOL;
    }
    gw_status_t st = range_kvs(e, root, cb, arg, rev, why, whylen);
    e->js->del(root);
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
    cJSON *root;
    gw_status_t st = call(e, "/v3/kv/range", body, &root, why, whylen);
    if (st != GW_OK)
        return st;
    st = range_kvs(e, root, cb, arg, rev, why, whylen);
    e->js->del(root);
    return st;
}

/* ---- watch ---------------------------------------------------------------------------- */
static size_t watch_write(char *data, size_t sz, size_t nm, void *arg)
{
    gw_etcd_watch_t *w = arg;
    return append_grow(&w->buf, &w->len, &w->cap, WATCH_MAX, 8192, &w->overflow, data, sz * nm);
}

gw_status_t gw_etcd_watch_open(gw_etcd_t *e, const char *prefix, int64_t start_rev, gw_etcd_watch_t *w,
                               char *why, size_t whylen)
{
    memset(w, 0, sizeof(*w));
    w->e = e;
    char k[GW_ETCD_KEY_MAX * 2], r[GW_ETCD_KEY_MAX * 2];
    if (b64_key(prefix, 0, k, sizeof(k)) != 0 || b64_key(prefix, 1, r, sizeof(r)) != 0) {
        snprintf(why, whylen, "etcd watch: bad prefix \"%s\"", prefix);
        return GW_ERR_INVALID;
    }
    if (e->user[0]) { /* a token first (the watch itself cannot fetch one) */
        pthread_mutex_lock(&e->mu);
        int have = e->token[0] != 0;
        pthread_mutex_unlock(&e->mu);
        gw_status_t ast = have ? GW_OK : authenticate(e, why, whylen);
        if (ast != GW_OK)
            return ast;
    }
    size_t bl = sizeof(k) * 2 + 128;
    if (!(w->body = malloc(bl)))
        return GW_ERR_NOMEM;
    snprintf(w->body, bl, "{\"create_request\":{\"key\":\"%s\",\"range_end\":\"%s\",\"start_revision\":\"%lld\"}}", k,
             r, (long long)start_rev);
    w->h = new_handle(e, "/v3/watch", w->body, 1, &w->hdr, w->err);
    if (!w->h || !w->hdr || !(w->m = e->curl->multi_init())) {
        gw_etcd_watch_close(w);
        snprintf(why, whylen, "etcd at %s: out of memory for a watch", e->url);
        return GW_ERR_NOMEM;
    }
    e->curl->easy_setopt(w->h, CURLOPT_WRITEFUNCTION, watch_write);
    e->curl->easy_setopt(w->h, CURLOPT_WRITEDATA, w);
    e->curl->multi_add_handle(w->m, w->h);
    w->rev = start_rev - 1;
    /* until the first answer: connection and TLS failures are reported here */
    uint64_t waited = 0;
    while (!w->len && waited < (uint64_t)e->timeout_ms) {
        int running = 0;
        pipe_guard_t pg;
        pipe_block(&pg);
        e->curl->multi_perform(w->m, &running);
        pipe_restore(&pg);
        if (!running) {
            int left;
            CURLMsg *msg = e->curl->multi_info_read(w->m, &left);
            CURLcode res = msg && msg->msg == CURLMSG_DONE ? msg->data.result : CURLE_OK;
            if (!w->len) {
                gw_status_t st = res != CURLE_OK ? curl_status(e, w->h, res, w->err, "/v3/watch", why, whylen)
                                                 : (snprintf(why, whylen, "etcd at %s: the watch ended at once",
                                                             e->url), GW_ERR_PROTOCOL);
                gw_etcd_watch_close(w);
                return st;
            }
            break;
        }
        e->curl->multi_poll(w->m, NULL, 0, 50, NULL);
        waited += 50;
    }
    return GW_OK;
}

/* One message of the stream. */
static gw_status_t watch_msg(gw_etcd_watch_t *w, const char *s, size_t n, gw_etcd_event_cb cb, void *arg, char *why,
                             size_t whylen)
{
    gw_etcd_t *e = w->e;
    cJSON *msg = e->js->parse_len(s, n);
    gw_status_t st = GW_OK;
    if (!msg || !(msg->type & cJSON_Object)) {
        snprintf(why, whylen, "malformed watch message");
        st = GW_ERR_PROTOCOL;
        goto out;
    }
    const cJSON *er = e->js->get(msg, "error");
    if (er) {
        char m[200];
        if (j_str(e, er, "message", m, sizeof(m)) != 0 && j_str(e, msg, "message", m, sizeof(m)) != 0 &&
            j_str(e, msg, "error", m, sizeof(m)) != 0)
            snprintf(m, sizeof(m), "no reason given");
        int64_t code = 0;
        if (j_i64(e, er, "grpc_code", &code) != 1)
            j_i64(e, msg, "code", &code);
        snprintf(why, whylen, "watch failed: %s", m);
        st = code == 16 || code == 7 || strstr(m, "auth") || strstr(m, "permission") ? GW_ERR_AUTH : GW_ERR_CANCELED;
        if (code == 16 || strstr(m, "invalid auth token")) { /* a new token when the watch is opened again */
            pthread_mutex_lock(&e->mu);
            e->token[0] = '\0';
            pthread_mutex_unlock(&e->mu);
        }
        goto out;
    }
    const cJSON *res = e->js->get(msg, "result");
    if (!res)
        res = msg;
    int64_t hrev = header_rev(e, res);
    if (hrev > w->rev)
        w->rev = hrev;
    if (j_true(e, res, "created"))
        w->created = 1;
    if (j_true(e, res, "canceled")) {
        char m[160];
        if (j_str(e, res, "cancel_reason", m, sizeof(m)) != 0)
            snprintf(m, sizeof(m), "no reason given");
        snprintf(why, whylen, "etcd canceled the watch: %s", m);
        st = GW_ERR_CANCELED;
        goto out;
    }
    const cJSON *evs = e->js->get(res, "events"), *ev;
    if (evs && !(evs->type & cJSON_Array)) {
        snprintf(why, whylen, "malformed watch events");
        st = GW_ERR_PROTOCOL;
        goto out;
    }
    gw_etcd_kv_t *kv = evs && evs->child ? malloc(sizeof(*kv)) : NULL;
    if (evs && evs->child && !kv) {
        st = GW_ERR_NOMEM;
        goto out;
    }
    cJSON_ArrayForEach(ev, evs)
    {
        char type[16] = "PUT";
        if (e->js->get(ev, "type") && j_str(e, ev, "type", type, sizeof(type)) != 0) {
            snprintf(why, whylen, "malformed watch event type");
            st = GW_ERR_PROTOCOL;
            break;
        }
        if (gw_etcd_kv_from(e, e->js->get(ev, "kv"), kv) != 0) {
            snprintf(why, whylen, "malformed watch event");
            st = GW_ERR_PROTOCOL;
            break;
        }
        if (kv->mod_rev > w->rev)
            w->rev = kv->mod_rev;
        cb(arg, strcmp(type, "DELETE") == 0, kv);
    }
    free(kv);
out:
    if (msg)
        e->js->del(msg);
    return st;
}

static gw_status_t dispatch(gw_etcd_watch_t *w, gw_etcd_event_cb cb, void *arg, char *why, size_t whylen)
{
    size_t off = 0;
    gw_status_t st = GW_OK;
    while (off < w->len) { /* one JSON object a line */
        char *nl = memchr(w->buf + off, '\n', w->len - off);
        if (!nl)
            break;
        size_t n = (size_t)(nl - (w->buf + off));
        size_t lead = 0;
        while (lead < n && (w->buf[off + lead] == ' ' || w->buf[off + lead] == '\r'))
            lead++;
        if (n > lead && (st = watch_msg(w, w->buf + off, n, cb, arg, why, whylen)) != GW_OK)
            break;
        off += n + 1;
    }
    if (off) {
        memmove(w->buf, w->buf + off, w->len - off);
        w->len -= off;
    }
    return st;
}

gw_status_t gw_etcd_watch_feed(gw_etcd_watch_t *w, const char *data, size_t n, gw_etcd_event_cb cb, void *arg,
                               char *why, size_t whylen)
{
    if (n && watch_write((char *)data, 1, n, w) != n) {
        snprintf(why, whylen, "watch stream past %u undelivered bytes", WATCH_MAX);
        return GW_ERR_PROTOCOL;
    }
    return dispatch(w, cb, arg, why, whylen);
}

gw_status_t gw_etcd_watch_poll(gw_etcd_watch_t *w, int timeout_ms, gw_etcd_event_cb cb, void *arg, char *why,
                               size_t whylen)
{
    gw_etcd_t *e = w->e;
    gw_status_t st = dispatch(w, cb, arg, why, whylen);
    if (st != GW_OK)
        return st;
    e->curl->multi_poll(w->m, NULL, 0, timeout_ms, NULL);
    int running = 0;
    pipe_guard_t pg;
    pipe_block(&pg);
    CURLMcode mr = e->curl->multi_perform(w->m, &running);
    pipe_restore(&pg);
    if ((st = dispatch(w, cb, arg, why, whylen)) != GW_OK)
        return st;
    if (w->overflow) {
        snprintf(why, whylen, "watch stream past %u undelivered bytes", WATCH_MAX);
        return GW_ERR_PROTOCOL;
    }
    if (mr != CURLM_OK || !running) {
        int left;
        CURLMsg *msg = e->curl->multi_info_read(w->m, &left);
        CURLcode res = msg && msg->msg == CURLMSG_DONE ? msg->data.result : CURLE_OK;
        if (res != CURLE_OK)
            curl_status(e, w->h, res, w->err, "/v3/watch", why, whylen);
        else
            snprintf(why, whylen, "the watch stream ended");
        return GW_ERR_CONN_RESET;
    }
    return GW_OK;
}

void gw_etcd_watch_wake(gw_etcd_watch_t *w)
{
    if (w->m)
        w->e->curl->multi_wakeup(w->m);
}

void gw_etcd_watch_close(gw_etcd_watch_t *w)
{
    const gw_curl_t *c = w->e ? w->e->curl : NULL;
    if (c) {
        if (w->m && w->h)
            c->multi_remove_handle(w->m, w->h);
        if (w->h)
            c->easy_cleanup(w->h);
        if (w->m)
            c->multi_cleanup(w->m);
        c->slist_free_all(w->hdr);
    }
    free(w->body);
    free(w->buf);
    w->m = NULL;
    w->h = NULL;
    w->hdr = NULL;
    w->body = NULL;
    w->buf = NULL;
    w->len = w->cap = 0;
}
