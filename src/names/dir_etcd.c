/* SPDX-License-Identifier: Apache-2.0 */
/* dir_etcd.c - the etcd backend of the names layer.
 *
 * Keys under the prefix: agents/NAME (where it listens, its context, pid,
 * host) and regions/AGENT/REGION (address, length, type, access: for
 * people and `gpuwire ls`; keys never go there).  An agent puts its keys
 * under a lease; one thread per context keeps the lease alive (every
 * TTL/3) and follows a watch of PREFIX/agents/ into a cache, so lookups
 * cost no round trip and agents that leave or come back are noticed
 * (gw_names_event).  The thread touches only the cache (under mu), the
 * remembered registrations and its own watch. */
#include "names/names_int.h"

#if GW_HAVE_ETCD
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "core/settings.h"
#include "names/etcd.h"

typedef struct kv_reg { /* what this agent registered: re-put after a lost lease */
    char key[GW_ETCD_KEY_MAX];
    char val[512];
} kv_reg_t;

typedef struct etcd_dir {
    gw_dir_t base;
    gw_etcd_t etcd;
    char prefix[128];
    long ttl_s;
    pthread_t thr;
    int thr_on;
    pthread_mutex_t mu; /* guards everything below */
    pthread_cond_t cv;
    int stop;
    int64_t lease;
    int name_lost; /* our lease ran out and another agent registered the name meanwhile */
    kv_reg_t *kvs;
    size_t nkvs, kvcap;
    gw_dir_agent_t *agents;
    size_t nagents, agcap;
    int synced; /* 1 after the first listing, -1 while the directory does not answer */
    gw_etcd_watch_t *watch; /* the thread's open watch (woken to stop) */
    char dir_err[400];
    int synced_once; /* the first listing is in: later new agents are news */
} etcd_dir_t;

#define ED(d) ((etcd_dir_t *)(d))

static void agent_key(const etcd_dir_t *x, const char *name, char *out, size_t cap)
{
    snprintf(out, cap, "%.100sagents/%s", x->prefix, name);
}

static void region_key(const etcd_dir_t *x, const char *region, char *out, size_t cap)
{
    snprintf(out, cap, "%.100sregions/%s/%s", x->prefix, x->base.n->name, region);
}

/* ---- values (JSON through cJSON) ------------------------------------------------------ */
static cJSON *parse_value(const etcd_dir_t *x, const gw_etcd_kv_t *kv)
{
    if (!kv->value_len)
        return NULL;
    cJSON *j = x->etcd.js->parse_len(kv->value, kv->value_len);
    if (j && !(j->type & cJSON_Object)) {
        x->etcd.js->del(j);
        j = NULL;
    }
    return j;
}

static int val_str(const etcd_dir_t *x, const cJSON *o, const char *k, char *out, size_t cap)
{
    const cJSON *v = o ? x->etcd.js->get(o, k) : NULL;
    if (!v || !(v->type & cJSON_String) || !v->valuestring || strlen(v->valuestring) >= cap)
        return -1;
    snprintf(out, cap, "%s", v->valuestring);
    return 0;
}

static int val_num(const etcd_dir_t *x, const cJSON *o, const char *k, int64_t *out)
{
    const cJSON *v = o ? x->etcd.js->get(o, k) : NULL;
    if (v && (v->type & cJSON_Number)) {
        *out = (int64_t)v->valuedouble;
        return 0;
    }
    char s[32], *end;
    if (val_str(x, o, k, s, sizeof(s)) != 0 || !s[0])
        return -1;
    long long y = strtoll(s, &end, 0);
    if (*end)
        return -1;
    *out = y;
    return 0;
}

/* An agent entry's value. */
static int parse_agent(const etcd_dir_t *x, const gw_etcd_kv_t *kv, size_t plen, gw_dir_agent_t *a)
{
    memset(a, 0, sizeof(*a));
    const char *name = kv->key + plen;
    if (!gw_name_valid(name))
        return -1;
    cJSON *j = parse_value(x, kv);
    char uu[32];
    int ok = j && val_str(x, j, "addr", a->addr, sizeof(a->addr)) == 0 && val_str(x, j, "uuid", uu, sizeof(uu)) == 0;
    if (j)
        x->etcd.js->del(j);
    if (!ok)
        return -1;
    snprintf(a->name, sizeof(a->name), "%s", name);
    a->uuid = strtoull(uu, NULL, 16);
    a->epoch = kv->mod_rev;
    a->listed = 1;
    return 0;
}

/* The agent key's value: {"addr","uuid","pid","version","host"}. */
static char *agent_value(etcd_dir_t *x)
{
    names_t *n = x->base.n;
    const gw_cjson_t *js = x->etcd.js;
    char host[128] = "", uu[32];
    gethostname(host, sizeof(host) - 1);
    snprintf(uu, sizeof(uu), "%016llx", (unsigned long long)n->ctx->core.uuid);
    cJSON *o = js->create_object();
    char *s = NULL;
    if (o && js->add_string(o, "addr", n->addr) && js->add_string(o, "uuid", uu) &&
        js->add_number(o, "pid", (double)getpid()) && js->add_string(o, "version", GW_VERSION_STRING) &&
        js->add_string(o, "host", host))
        s = js->print(o);
    if (o)
        js->del(o);
    return s;
}

static void region_value(const pub_t *p, char *out, size_t cap)
{
    snprintf(out, cap, "{\"addr\":\"0x%llx\",\"len\":\"%zu\",\"type\":\"%s\",\"access\":%u}",
             (unsigned long long)(uintptr_t)p->mem->addr, p->mem->len, p->mem->type == GW_MEM_CUDA ? "cuda" : "host",
             p->mem->access);
}

/* ---- registration ---------------------------------------------------------------------- */
/* Remembers key=val for a re-registration (replacing an earlier value of
 * the key); returns the lease held now, or -1 when out of memory. */
static int64_t kv_remember(etcd_dir_t *x, const char *key, const char *val, char *why, size_t whylen)
{
    pthread_mutex_lock(&x->mu);
    int64_t lease = x->lease;
    size_t i;
    for (i = 0; i < x->nkvs && strcmp(x->kvs[i].key, key); i++)
        ;
    if (i == x->nkvs) {
        if (x->nkvs == x->kvcap) {
            size_t c = x->kvcap ? x->kvcap * 2 : 8;
            kv_reg_t *k = realloc(x->kvs, c * sizeof(*k));
            if (!k) {
                pthread_mutex_unlock(&x->mu);
                snprintf(why, whylen, "out of memory");
                return -1;
            }
            x->kvs = k;
            x->kvcap = c;
        }
        x->nkvs++;
    }
    snprintf(x->kvs[i].key, sizeof(x->kvs[i].key), "%s", key);
    snprintf(x->kvs[i].val, sizeof(x->kvs[i].val), "%s", val);
    pthread_mutex_unlock(&x->mu);
    return lease;
}

/* Puts key=val under the lease and remembers it for a re-registration. */
static gw_status_t reg_put(etcd_dir_t *x, const char *key, const char *val, char *why, size_t whylen)
{
    int64_t lease = kv_remember(x, key, val, why, whylen);
    if (lease < 0)
        return GW_ERR_NOMEM;
    if (!lease) /* not registered now (the name is held by another agent): put when registered again */
        return GW_OK;
    return gw_etcd_put(&x->etcd, key, val, strlen(val), lease, NULL, why, whylen);
}

static void reg_del(etcd_dir_t *x, const char *key)
{
    char why[400];
    pthread_mutex_lock(&x->mu);
    for (size_t i = 0; i < x->nkvs; i++)
        if (!strcmp(x->kvs[i].key, key)) {
            x->kvs[i] = x->kvs[--x->nkvs];
            break;
        }
    int64_t lease = x->lease;
    pthread_mutex_unlock(&x->mu);
    if (!lease) /* not registered now: the key, if any, is another agent's under our name */
        return;
    /* only our own entry: after a lost lease another agent may hold the name */
    if (gw_etcd_delete_leased(&x->etcd, key, lease, why, sizeof(why)) != GW_OK)
        gw_log(GW_LOG_WARN, "names: withdrawing %s from the directory failed: %s", key, why);
}

/* Describes who holds an agent key (the kv etcd returned): address, pid,
 * host, context, and how long its lease has left. */
static void holder_text(etcd_dir_t *x, const gw_etcd_kv_t *kv, char *out, size_t cap)
{
    char addr[80] = "?", host[128] = "?", uu[32] = "?";
    int64_t pid = 0, ttl = -1;
    cJSON *j = parse_value(x, kv);
    if (j) {
        val_str(x, j, "addr", addr, sizeof(addr));
        val_str(x, j, "host", host, sizeof(host));
        val_str(x, j, "uuid", uu, sizeof(uu));
        val_num(x, j, "pid", &pid);
        x->etcd.js->del(j);
    }
    char why[400], lease[96];
    if (kv->lease && gw_etcd_lease_ttl(&x->etcd, kv->lease, &ttl, why, sizeof(why)) == GW_OK && ttl >= 0)
        snprintf(lease, sizeof(lease), "its lease %llx has %lld s left", (unsigned long long)kv->lease,
                 (long long)ttl);
    else if (kv->lease)
        snprintf(lease, sizeof(lease), "under lease %llx", (unsigned long long)kv->lease);
    else
        snprintf(lease, sizeof(lease), "with no lease (put by hand: it stays until deleted)");
    snprintf(out, cap, "agent at %s (pid %lld on host %s, context %s, registered at revision %lld), %s", addr,
             (long long)pid, host, uu, (long long)kv->create_rev, lease);
}

/* ---- the cache --------------------------------------------------------------------------- */
/* Cache update, mu held. */
static void cache_put(etcd_dir_t *x, const gw_dir_agent_t *a)
{
    for (size_t i = 0; i < x->nagents; i++) {
        gw_dir_agent_t *c = &x->agents[i];
        if (strcmp(c->name, a->name))
            continue;
        int back = !c->listed || c->uuid != a->uuid, restarted = c->uuid && c->uuid != a->uuid;
        if (back)
            c->changes++;
        unsigned ch = c->changes;
        int used = c->used;
        *c = *a;
        c->changes = ch;
        c->used = used;
        if (back)
            gw_names_event(x->base.n, GW_PEER_BACK, c, restarted);
        return;
    }
    if (x->nagents == x->agcap) {
        size_t cap = x->agcap ? x->agcap * 2 : 16;
        gw_dir_agent_t *p = realloc(x->agents, cap * sizeof(*p));
        if (!p)
            return;
        x->agents = p;
        x->agcap = cap;
    }
    x->agents[x->nagents++] = *a;
    if (x->synced_once) /* a new agent (not one of the first listing) */
        gw_names_event(x->base.n, GW_PEER_BACK, &x->agents[x->nagents - 1], 0);
}

static gw_dir_agent_t *cache_find(etcd_dir_t *x, const char *name)
{
    for (size_t i = 0; i < x->nagents; i++)
        if (!strcmp(x->agents[i].name, name))
            return &x->agents[i];
    return NULL;
}

static void on_watch_event(void *arg, int is_delete, const gw_etcd_kv_t *kv)
{
    etcd_dir_t *x = arg;
    char pfx[160];
    agent_key(x, "", pfx, sizeof(pfx));
    size_t pl = strlen(pfx);
    if (strncmp(kv->key, pfx, pl) != 0)
        return;
    gw_dir_agent_t a;
    int ok = !is_delete && parse_agent(x, kv, pl, &a) == 0;
    pthread_mutex_lock(&x->mu);
    if (is_delete) {
        gw_dir_agent_t *c = cache_find(x, kv->key + pl);
        if (c && c->listed) {
            c->listed = 0;
            c->changes++;
            gw_names_event(x->base.n, GW_PEER_LEFT, c, 0);
        }
    } else if (ok) {
        cache_put(x, &a);
    }
    pthread_mutex_unlock(&x->mu);
}

typedef struct sync_arg {
    etcd_dir_t *x;
    size_t pl;
    gw_dir_agent_t *got;
    size_t n, cap;
} sync_arg_t;

static int on_sync_kv(void *arg, const gw_etcd_kv_t *kv)
{
    sync_arg_t *s = arg;
    if (s->n == s->cap) {
        size_t c = s->cap ? s->cap * 2 : 16;
        gw_dir_agent_t *p = realloc(s->got, c * sizeof(*p));
        if (!p)
            return 1;
        s->got = p;
        s->cap = c;
    }
    if (parse_agent(s->x, kv, s->pl, &s->got[s->n]) == 0)
        s->n++;
    return 0;
}

/* Lists the agents into the cache (entries no longer listed are marked
 * gone) and returns the revision to watch from. */
static gw_status_t cache_sync(etcd_dir_t *x, int64_t *rev, char *why, size_t whylen)
{
    char pfx[160];
    agent_key(x, "", pfx, sizeof(pfx));
    sync_arg_t s = {x, strlen(pfx), NULL, 0, 0};
    gw_status_t st = gw_etcd_range(&x->etcd, pfx, 1, on_sync_kv, &s, rev, why, whylen);
    if (st == GW_OK) {
        pthread_mutex_lock(&x->mu);
        for (size_t i = 0; i < x->nagents; i++) {
            int found = 0;
            for (size_t j = 0; j < s.n && !found; j++)
                found = !strcmp(x->agents[i].name, s.got[j].name);
            if (!found && x->agents[i].listed) {
                x->agents[i].listed = 0;
                x->agents[i].changes++;
                gw_names_event(x->base.n, GW_PEER_LEFT, &x->agents[i], 0);
            }
        }
        for (size_t j = 0; j < s.n; j++)
            cache_put(x, &s.got[j]);
        pthread_mutex_unlock(&x->mu);
    }
    free(s.got);
    return st;
}

/* Grants a lease and puts every remembered key under it (after the old lease
 * ran out, e.g. the process was stopped longer than the TTL). */
static gw_status_t reregister(etcd_dir_t *x, char *why, size_t whylen)
{
    names_t *n = x->base.n;
    int64_t lease;
    gw_status_t st = gw_etcd_grant(&x->etcd, x->ttl_s, &lease, why, whylen);
    if (st != GW_OK)
        return st;
    char akey[GW_ETCD_KEY_MAX];
    agent_key(x, n->name, akey, sizeof(akey));
    pthread_mutex_lock(&x->mu);
    size_t cnt = x->nkvs;
    kv_reg_t *copy = cnt ? malloc(cnt * sizeof(*copy)) : NULL;
    if (copy)
        memcpy(copy, x->kvs, cnt * sizeof(*copy));
    int was_lost = x->name_lost;
    pthread_mutex_unlock(&x->mu);
    if (cnt && !copy) {
        snprintf(why, whylen, "out of memory");
        return GW_ERR_NOMEM;
    }
    /* the agent key first, and only where nobody took the name meanwhile:
     * the regions follow it, never the other way round */
    gw_etcd_kv_t *holder = malloc(sizeof(*holder));
    for (size_t i = 0; holder && i < cnt && st == GW_OK; i++)
        if (!strcmp(copy[i].key, akey))
            st = gw_etcd_create(&x->etcd, akey, copy[i].val, strlen(copy[i].val), lease, NULL, holder, why, whylen);
    if (!holder)
        st = GW_ERR_NOMEM;
    if (st == GW_ERR_BUSY) {
        char who[400];
        holder_text(x, holder, who, sizeof(who));
        if (!was_lost)
            gw_log(GW_LOG_ERROR, "names: agent \"%s\" lost its name in directory %s: its lease ran out and another "
                   "agent registered \"%s\" meanwhile (%s); this agent stays unlisted until that agent leaves, "
                   "then registers again", n->name, x->etcd.url, n->name, who);
        char w2[64];
        gw_etcd_revoke(&x->etcd, lease, w2, sizeof(w2));
        pthread_mutex_lock(&x->mu);
        x->lease = 0;
        x->name_lost = 1;
        pthread_mutex_unlock(&x->mu);
        free(holder);
        free(copy);
        return GW_OK; /* not an error of the directory: tried again every third of the TTL */
    }
    free(holder);
    pthread_mutex_lock(&x->mu);
    x->lease = lease;
    x->name_lost = 0;
    pthread_mutex_unlock(&x->mu);
    if (st == GW_OK && was_lost)
        gw_log(GW_LOG_WARN, "names: agent \"%s\" is registered again in directory %s (the name was free again)",
               n->name, x->etcd.url);
    for (size_t i = 0; copy && i < cnt && st == GW_OK; i++)
        if (strcmp(copy[i].key, akey) != 0)
            st = gw_etcd_put(&x->etcd, copy[i].key, copy[i].val, strlen(copy[i].val), lease, NULL, why, whylen);
    free(copy);
    return st;
}

/* ---- the thread ---------------------------------------------------------------------------- */
static int stopping(etcd_dir_t *x)
{
    pthread_mutex_lock(&x->mu);
    int s = x->stop;
    pthread_mutex_unlock(&x->mu);
    return s;
}

static void set_synced(etcd_dir_t *x, int v, const char *why)
{
    pthread_mutex_lock(&x->mu);
    x->synced = v;
    if (v == 1)
        x->synced_once = 1;
    if (why)
        snprintf(x->dir_err, sizeof(x->dir_err), "%s", why);
    pthread_cond_broadcast(&x->cv);
    pthread_mutex_unlock(&x->mu);
}

/* Keeps the lease alive and the cache current. */
static void *dir_thread(void *arg)
{
    etcd_dir_t *x = arg;
    names_t *n = x->base.n;
    gw_etcd_watch_t w;
    memset(&w, 0, sizeof(w));
    int watching = 0;
    uint64_t next_ka = gw_now_ns() + (uint64_t)x->ttl_s * 1000000000ull / 3;
    char why[400];
    while (!stopping(x)) {
        uint64_t now = gw_now_ns();
        pthread_mutex_lock(&x->mu);
        int64_t lease = x->lease;
        int lost = x->name_lost;
        pthread_mutex_unlock(&x->mu);
        if ((lease || lost) && now >= next_ka) {
            int64_t ttl;
            gw_status_t st = lost ? GW_ERR_NOT_FOUND : gw_etcd_keepalive(&x->etcd, lease, &ttl, why, sizeof(why));
            if (lost) {
                st = reregister(x, why, sizeof(why));
            } else if (st == GW_ERR_NOT_FOUND) {
                gw_log(GW_LOG_WARN, "names: %s; registering agent \"%s\" again", why, n->name);
                st = reregister(x, why, sizeof(why));
            }
            if (st != GW_OK)
                gw_log(GW_LOG_WARN, "names: keeping the directory lease alive failed: %s", why);
            next_ka = now + (uint64_t)x->ttl_s * 1000000000ull / (st == GW_OK ? 3 : 10);
        }
        if (!watching) {
            int64_t rev = 0;
            gw_status_t st = cache_sync(x, &rev, why, sizeof(why));
            if (st == GW_OK)
                st = gw_etcd_watch_open(&x->etcd, x->prefix, rev + 1, &w, why, sizeof(why));
            if (st != GW_OK) {
                set_synced(x, -1, why);
                for (int i = 0; i < 5 && !stopping(x); i++)
                    usleep(100000);
                continue;
            }
            watching = 1;
            pthread_mutex_lock(&x->mu);
            x->watch = &w;
            pthread_mutex_unlock(&x->mu);
            set_synced(x, 1, NULL);
        }
        now = gw_now_ns();
        int to = 1000;
        if (lease)
            to = next_ka > now ? (int)GW_MIN((next_ka - now) / 1000000 + 1, 1000ull) : 0;
        gw_status_t st = gw_etcd_watch_poll(&w, to, on_watch_event, x, why, sizeof(why));
        if (st != GW_OK) {
            if (!stopping(x))
                gw_log(GW_LOG_INFO, "names: directory watch on %s: %s; reopening", x->etcd.url, why);
            pthread_mutex_lock(&x->mu);
            x->watch = NULL;
            pthread_mutex_unlock(&x->mu);
            gw_etcd_watch_close(&w);
            watching = 0;
        }
    }
    if (watching) {
        pthread_mutex_lock(&x->mu);
        x->watch = NULL;
        pthread_mutex_unlock(&x->mu);
        gw_etcd_watch_close(&w);
    }
    return NULL;
}

static gw_status_t start_thread(etcd_dir_t *x)
{
    if (x->thr_on)
        return GW_OK;
    if (pthread_create(&x->thr, NULL, dir_thread, x) != 0)
        return gw_err(&x->base.n->ctx->core, GW_ERR_SYSTEM, "names: cannot start the directory thread: %s",
                      strerror(errno));
    x->thr_on = 1;
    return GW_OK;
}

static void stop_thread(etcd_dir_t *x)
{
    if (!x->thr_on)
        return;
    pthread_mutex_lock(&x->mu);
    x->stop = 1;
    if (x->watch)
        gw_etcd_watch_wake(x->watch); /* wakes the thread's poll */
    pthread_mutex_unlock(&x->mu);
    pthread_join(x->thr, NULL);
    x->thr_on = 0;
}

/* ---- the hooks ------------------------------------------------------------------------------- */
static int ed_peek(gw_dir_t *d, const char *name, gw_dir_agent_t *out)
{
    etcd_dir_t *x = ED(d);
    pthread_mutex_lock(&x->mu);
    gw_dir_agent_t *c = cache_find(x, name);
    if (c)
        *out = *c;
    else if (x->synced == 1) { /* listed nowhere */
        memset(out, 0, sizeof(*out));
        snprintf(out->name, sizeof(out->name), "%s", name);
    }
    int known = c || x->synced == 1;
    pthread_mutex_unlock(&x->mu);
    return known ? (c ? 1 : 2) : 0;
}

/* The cache, else one direct read (an agent that registered a moment
 * ago).  Fails fast. */
static gw_status_t ed_lookup(gw_dir_t *d, const char *name, gw_dir_agent_t *out, const char *what)
{
    etcd_dir_t *x = ED(d);
    gw_core_t *core = &d->n->ctx->core;
    gw_status_t st = start_thread(x);
    if (st != GW_OK)
        return st;
    uint64_t deadline = gw_now_ns() + (uint64_t)x->etcd.timeout_ms * 1000000ull;
    pthread_mutex_lock(&x->mu);
    while (!x->synced && gw_now_ns() < deadline) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 20000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&x->cv, &x->mu, &ts);
    }
    gw_dir_agent_t *c = cache_find(x, name);
    int hit = c && c->listed && x->synced == 1;
    if (hit) {
        c->used = 1;
        *out = *c;
    }
    pthread_mutex_unlock(&x->mu);
    if (hit)
        return GW_OK;
    char key[GW_ETCD_KEY_MAX], why[400];
    agent_key(x, name, key, sizeof(key));
    sync_arg_t s = {x, strlen(key) - strlen(name), NULL, 0, 0};
    st = gw_etcd_range(&x->etcd, key, 0, on_sync_kv, &s, NULL, why, sizeof(why));
    if (st == GW_OK && s.n) {
        *out = s.got[0];
        pthread_mutex_lock(&x->mu);
        cache_put(x, &s.got[0]);
        if ((c = cache_find(x, name)) != NULL)
            c->used = 1;
        pthread_mutex_unlock(&x->mu);
    }
    free(s.got);
    if (st != GW_OK)
        return gw_err(core, st == GW_ERR_AUTH || st == GW_ERR_CONFIG ? st : GW_ERR_UNAVAILABLE,
                      "%s: the directory does not answer: %s", what, why);
    if (!s.n)
        return gw_err(core, GW_ERR_NOT_FOUND, "%s: no agent \"%s\" in directory %s (key %s)", what, name, x->etcd.url,
                      key);
    return GW_OK;
}

static gw_status_t ed_agent_up(gw_dir_t *d)
{
    etcd_dir_t *x = ED(d);
    names_t *n = d->n;
    gw_core_t *core = &n->ctx->core;
    char why[400], key[GW_ETCD_KEY_MAX];
    int64_t lease, rev = 0;
    gw_status_t st = gw_etcd_grant(&x->etcd, x->ttl_s, &lease, why, sizeof(why));
    if (st != GW_OK)
        return gw_err(core, st == GW_ERR_PROTOCOL || st == GW_ERR_AUTH || st == GW_ERR_CONFIG ? st : GW_ERR_UNAVAILABLE,
                      "gw_agent_listen(%s): %s", n->name, why);
    pthread_mutex_lock(&x->mu);
    x->lease = lease;
    pthread_mutex_unlock(&x->mu);
    char *val = agent_value(x);
    agent_key(x, n->name, key, sizeof(key));
    gw_etcd_kv_t *holder = malloc(sizeof(*holder));
    if (!val || !holder || strlen(val) >= sizeof(((kv_reg_t *)0)->val))
        st = !val || !holder ? GW_ERR_NOMEM : GW_ERR_INVALID;
    else if ((st = gw_etcd_create(&x->etcd, key, val, strlen(val), lease, &rev, holder, why, sizeof(why))) == GW_OK)
        st = kv_remember(x, key, val, why, sizeof(why)) < 0 ? GW_ERR_NOMEM : GW_OK;
    if (val)
        x->etcd.js->free_(val);
    if (st == GW_ERR_BUSY) { /* a live agent holds the name: refused, the holder named */
        char who[400];
        holder_text(x, holder, who, sizeof(who));
        free(holder);
        gw_etcd_revoke(&x->etcd, lease, why, sizeof(why));
        pthread_mutex_lock(&x->mu);
        x->lease = 0;
        x->nkvs = 0;
        pthread_mutex_unlock(&x->mu);
        return gw_err(core, GW_ERR_BUSY,
                      "gw_agent_listen(%s): the name is held by a live agent in directory %s (key %s): %s; the name "
                      "is free again when that agent ends (its listener destroyed) or its lease runs out "
                      "(GPUWIRE_DIRECTORY_TTL)",
                      n->name, x->etcd.url, key, who);
    }
    free(holder);
    for (size_t i = 0; st == GW_OK && i < n->npubs; i++) {
        char rk[GW_ETCD_KEY_MAX], rv[256];
        region_key(x, n->pubs[i].name, rk, sizeof(rk));
        region_value(&n->pubs[i], rv, sizeof(rv));
        st = reg_put(x, rk, rv, why, sizeof(why));
    }
    if (st != GW_OK) {
        char w2[256];
        gw_etcd_revoke(&x->etcd, lease, w2, sizeof(w2));
        pthread_mutex_lock(&x->mu);
        x->lease = 0;
        x->nkvs = 0;
        pthread_mutex_unlock(&x->mu);
        return gw_err(core, st == GW_ERR_AUTH ? st : GW_ERR_UNAVAILABLE,
                      "gw_agent_listen(%s): registering in the directory failed: %s", n->name, why);
    }
    n->epoch = (uint64_t)rev;
    n->table_dirty = 1;
    return start_thread(x);
}

static void ed_agent_down(gw_dir_t *d)
{
    etcd_dir_t *x = ED(d);
    char why[400];
    pthread_mutex_lock(&x->mu);
    int64_t lease = x->lease;
    x->lease = 0;
    x->nkvs = 0;
    x->name_lost = 0;
    pthread_mutex_unlock(&x->mu);
    if (lease && gw_etcd_revoke(&x->etcd, lease, why, sizeof(why)) != GW_OK)
        gw_log(GW_LOG_WARN, "names: withdrawing agent \"%s\" from directory %s failed: %s (its lease runs out in "
               "%ld s)", d->n->name, x->etcd.url, why, x->ttl_s);
}

static void ed_region_up(gw_dir_t *d, const char *region, const struct gw_mem *mem)
{
    etcd_dir_t *x = ED(d);
    pub_t p;
    memset(&p, 0, sizeof(p));
    p.mem = (gw_mem_t *)mem;
    char rk[GW_ETCD_KEY_MAX], rv[256], why[400];
    region_key(x, region, rk, sizeof(rk));
    region_value(&p, rv, sizeof(rv));
    if (reg_put(x, rk, rv, why, sizeof(why)) != GW_OK)
        gw_log(GW_LOG_WARN, "names: listing region \"%s\" in directory %s failed: %s (peers still get its key "
               "from this agent)", region, x->etcd.url, why);
}

static void ed_region_down(gw_dir_t *d, const char *region)
{
    etcd_dir_t *x = ED(d);
    char rk[GW_ETCD_KEY_MAX];
    region_key(x, region, rk, sizeof(rk));
    reg_del(x, rk);
}

static gw_status_t ed_watch(gw_dir_t *d)
{
    return start_thread(ED(d));
}

typedef struct list_arg {
    etcd_dir_t *x;
    size_t pl;
    int regions;
    int (*cb)(void *, const gw_dir_entry_t *);
    void *arg;
    int stopped;
} list_arg_t;

static int on_list_kv(void *arg, const gw_etcd_kv_t *kv)
{
    list_arg_t *a = arg;
    gw_dir_entry_t e;
    memset(&e, 0, sizeof(e));
    if (!a->regions) {
        gw_dir_agent_t d;
        if (parse_agent(a->x, kv, a->pl, &d) != 0)
            return 0;
        e.agent = d.name;
        e.addr = d.addr;
        e.epoch = (uint64_t)d.epoch;
        return a->stopped = a->cb(a->arg, &e);
    }
    char agent[GW_NAME_MAX + 1], type[16] = "", num[32];
    const char *rest = kv->key + a->pl, *slash = strchr(rest, '/');
    if (!slash || (size_t)(slash - rest) > GW_NAME_MAX)
        return 0;
    cJSON *j = parse_value(a->x, kv);
    if (!j)
        return 0;
    memcpy(agent, rest, (size_t)(slash - rest));
    agent[slash - rest] = '\0';
    e.agent = agent;
    e.region = slash + 1;
    if (val_str(a->x, j, "addr", num, sizeof(num)) == 0)
        e.raddr = strtoull(num, NULL, 0);
    int64_t v;
    if (val_num(a->x, j, "len", &v) == 0)
        e.rlen = (uint64_t)v;
    if (val_num(a->x, j, "access", &v) == 0)
        e.access = (unsigned)v;
    val_str(a->x, j, "type", type, sizeof(type));
    a->x->etcd.js->del(j);
    e.type = type;
    return a->stopped = a->cb(a->arg, &e);
}

static gw_status_t ed_list(gw_dir_t *d, int (*cb)(void *, const gw_dir_entry_t *), void *arg)
{
    etcd_dir_t *x = ED(d);
    char pfx[160], why[400];
    list_arg_t a = {x, 0, 0, cb, arg, 0};
    for (a.regions = 0; a.regions < 2 && !a.stopped; a.regions++) {
        snprintf(pfx, sizeof(pfx), "%s%s", x->prefix, a.regions ? "regions/" : "agents/");
        a.pl = strlen(pfx);
        gw_status_t st = gw_etcd_range(&x->etcd, pfx, 1, on_list_kv, &a, NULL, why, sizeof(why));
        if (st != GW_OK)
            return gw_err(&d->n->ctx->core, st == GW_ERR_AUTH ? st : GW_ERR_UNAVAILABLE,
                          "gw_directory_list: directory %s: %s", x->etcd.url, why);
    }
    return GW_OK;
}

static int count_kv(void *arg, const gw_etcd_kv_t *kv)
{
    (void)kv;
    (*(size_t *)arg)++;
    return 0;
}

static void ed_describe(gw_dir_t *d, char *buf, size_t len)
{
    etcd_dir_t *x = ED(d);
    char pfx[160], why[400], sec[96];
    size_t agents = 0;
    int64_t rev = 0;
    snprintf(sec, sizeof(sec), "%s%s%s", x->etcd.tls ? "TLS" : "plain http", x->etcd.cert[0] ? ", client certificate" : "",
             x->etcd.user[0] ? ", etcd user " : "");
    snprintf(pfx, sizeof(pfx), "%sagents/", x->prefix);
    gw_status_t st = gw_etcd_range(&x->etcd, pfx, 1, count_kv, &agents, &rev, why, sizeof(why));
    if (st != GW_OK)
        snprintf(buf, len, "%s prefix %s (%s%s): not answering: %s", x->etcd.url, x->prefix, sec, x->etcd.user, why);
    else
        snprintf(buf, len, "%s prefix %s (%s%s): reachable, revision %lld, %zu agent(s), lease TTL %ld s", x->etcd.url,
                 x->prefix, sec, x->etcd.user, (long long)rev, agents, x->ttl_s);
}

static const char *ed_where(gw_dir_t *d)
{
    return ED(d)->etcd.url;
}

static void ed_close(gw_dir_t *d)
{
    etcd_dir_t *x = ED(d);
    stop_thread(x);
    if (x->lease) {
        char why[400];
        gw_etcd_revoke(&x->etcd, x->lease, why, sizeof(why));
    }
    gw_etcd_fini(&x->etcd);
    free(x->kvs);
    free(x->agents);
    pthread_mutex_destroy(&x->mu);
    pthread_cond_destroy(&x->cv);
    free(x);
}

static const gw_dir_ops_t etcd_ops = {
    .kind = "etcd",
    .lookup = ed_lookup,
    .peek = ed_peek,
    .agent_up = ed_agent_up,
    .agent_down = ed_agent_down,
    .region_up = ed_region_up,
    .region_down = ed_region_down,
    .watch = ed_watch,
    .list = ed_list,
    .describe = ed_describe,
    .where = ed_where,
    .close = ed_close,
};

/* A password from GPUWIRE_DIRECTORY_PASSWORD_FILE (trailing newline
 * stripped) or GPUWIRE_DIRECTORY_PASSWORD. */
static gw_status_t read_password(gw_core_t *core, char *out, size_t cap)
{
    const char *file = gw_settings_str(&core->settings, GW_SET_DIRECTORY_PASSWORD_FILE);
    out[0] = '\0';
    if (!file[0]) {
        snprintf(out, cap, "%s", gw_settings_str(&core->settings, GW_SET_DIRECTORY_PASSWORD));
        return GW_OK;
    }
    FILE *f = fopen(file, "r");
    if (!f)
        return gw_err(core, GW_ERR_CONFIG, "GPUWIRE_DIRECTORY_PASSWORD_FILE=%s: cannot open it: %s", file,
                      strerror(errno));
    size_t k = fread(out, 1, cap - 1, f);
    int big = !feof(f) && fgetc(f) != EOF;
    fclose(f);
    out[k] = '\0';
    while (k && (out[k - 1] == '\n' || out[k - 1] == '\r'))
        out[--k] = '\0';
    if (big || !k) {
        memset(out, 0, cap);
        return gw_err(core, GW_ERR_CONFIG, "GPUWIRE_DIRECTORY_PASSWORD_FILE=%s: %s", file,
                      big ? "longer than a password may be (255 bytes)" : "empty");
    }
    return GW_OK;
}

gw_status_t gw_dir_etcd_open(struct gw_names *n, const char *url, gw_dir_t **out)
{
    gw_context_t *ctx = n->ctx;
    gw_core_t *core = &ctx->core;
    const gw_settings_t *s = &core->settings;
    etcd_dir_t *x = calloc(1, sizeof(*x));
    if (!x)
        return gw_err(core, GW_ERR_NOMEM, "names: out of memory");
    x->base.ops = &etcd_ops;
    x->base.n = n;
    pthread_mutex_init(&x->mu, NULL);
    pthread_cond_init(&x->cv, NULL);
    char pw[256], why[512];
    gw_status_t st = read_password(core, pw, sizeof(pw));
    if (st != GW_OK)
        goto fail;
    gw_etcd_cfg_t cfg = {
        .url = url,
        .timeout_ms = (int)(ctx->connect_timeout_ms < 5000 ? ctx->connect_timeout_ms : 5000),
        .ca = gw_settings_str(s, GW_SET_DIRECTORY_CA),
        .cert = gw_settings_str(s, GW_SET_DIRECTORY_CERT),
        .key = gw_settings_str(s, GW_SET_DIRECTORY_KEY),
        .user = gw_settings_str(s, GW_SET_DIRECTORY_USER),
        .password = pw,
    };
    st = gw_etcd_init(&x->etcd, &cfg, why, sizeof(why));
    memset(pw, 0, sizeof(pw));
    if (st != GW_OK) {
        st = gw_err(core, st, "GPUWIRE_DIRECTORY=%s: %s", url, why);
        gw_etcd_fini(&x->etcd);
        goto fail;
    }
    snprintf(x->prefix, sizeof(x->prefix), "%s", gw_settings_str(s, GW_SET_DIRECTORY_PREFIX));
    if (!x->prefix[0] || strlen(x->prefix) > 100) {
        st = gw_err(core, GW_ERR_CONFIG, "GPUWIRE_DIRECTORY_PREFIX=\"%s\": 1..100 characters expected", x->prefix);
        gw_etcd_fini(&x->etcd);
        goto fail;
    }
    if ((st = gw_settings_int(s, GW_SET_DIRECTORY_TTL, &x->ttl_s, why, sizeof(why))) != GW_OK) {
        st = gw_err(core, GW_ERR_CONFIG, "%s", why);
        gw_etcd_fini(&x->etcd);
        goto fail;
    }
    *out = &x->base;
    return GW_OK;
fail:
    pthread_mutex_destroy(&x->mu);
    pthread_cond_destroy(&x->cv);
    free(x);
    return st;
}

#else /* built without the libcurl and cJSON headers */
gw_status_t gw_dir_etcd_open(struct gw_names *n, const char *url, gw_dir_t **out)
{
    (void)out;
    return gw_err(&n->ctx->core, GW_ERR_UNAVAILABLE,
                  "GPUWIRE_DIRECTORY=%s: this build has no etcd directory (it was built without the libcurl and cJSON "
                  "headers: apt-get install libcurl4-openssl-dev libcjson-dev, then rebuild)", url);
}
#endif
