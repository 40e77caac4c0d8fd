/* SPDX-License-Identifier: Apache-2.0 */
/* netlibs.c - dlopen of libcurl and cJSON (see netlibs.h). */
#include "names/netlibs.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "core/settings.h"

typedef struct lib_state {
    char name[128]; /* the file last tried: another name (a changed setting) is tried afresh */
    int state;      /* 0 not tried, 1 loaded, -1 failed */
    char why[400];
} lib_state_t;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static gw_curl_t g_curl;
static gw_cjson_t g_cjson;
static lib_state_t g_curl_st, g_cjson_st;

/* Opens `name`; 0, or -1 with why (absent: quiet; the caller says it when
 * an etcd directory is asked for). */
static void *open_lib(const char *name, const char *deflt, const char *pkg, const char *setting, lib_state_t *ls)
{
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(ls->why, sizeof(ls->why), "%s is not here (dlopen: %s): the etcd directory needs it (%s%s)", name,
                 e ? e : "unknown error", strcmp(name, deflt) ? "check " : "apt-get install ",
                 strcmp(name, deflt) ? setting : pkg);
    }
    return h;
}

/* A library that opened but lacks a symbol is broken: said loudly. */
static void broken(lib_state_t *ls, const char *name, const char *sym, const char *what)
{
    snprintf(ls->why, sizeof(ls->why), "%s has no %s: not a usable %s (broken)", name, sym, what);
    gw_log(GW_LOG_ERROR, "names: %s", ls->why);
}

static int load_curl(const char *name)
{
    void *h = open_lib(name, "libcurl.so.4", "libcurl4", "GPUWIRE_CURL_LIB", &g_curl_st);
    if (!h)
        return -1;
    gw_curl_t c;
    memset(&c, 0, sizeof(c));
#define LOAD_(field, sym, ret, args)                                                                               \
    do {                                                                                                           \
        void *p_ = dlsym(h, sym);                                                                                  \
        if (!p_) {                                                                                                 \
            broken(&g_curl_st, name, sym, "libcurl (7.68 or newer)");                                              \
            dlclose(h);                                                                                            \
            return -1;                                                                                             \
        }                                                                                                          \
        memcpy(&c.field, &p_, sizeof(p_));                                                                         \
    } while (0);
    GW_CURL_SYMS(LOAD_)
#undef LOAD_
    CURLcode r = c.global_init(CURL_GLOBAL_DEFAULT);
    if (r != CURLE_OK) {
        snprintf(g_curl_st.why, sizeof(g_curl_st.why), "%s: curl_global_init failed: %s (broken)", name,
                 c.easy_strerror(r));
        gw_log(GW_LOG_ERROR, "names: %s", g_curl_st.why);
        dlclose(h);
        return -1;
    }
    snprintf(c.lib, sizeof(c.lib), "%s", name);
    g_curl = c;
    return 0;
}

static int load_cjson(const char *name)
{
    void *h = open_lib(name, "libcjson.so.1", "libcjson1", "GPUWIRE_CJSON_LIB", &g_cjson_st);
    if (!h)
        return -1;
    gw_cjson_t c;
    memset(&c, 0, sizeof(c));
#define LOAD_(field, sym, ret, args)                                                                               \
    do {                                                                                                           \
        void *p_ = dlsym(h, sym);                                                                                  \
        if (!p_) {                                                                                                 \
            broken(&g_cjson_st, name, sym, "cJSON (1.7.13 or newer)");                                             \
            dlclose(h);                                                                                            \
            return -1;                                                                                             \
        }                                                                                                          \
        memcpy(&c.field, &p_, sizeof(p_));                                                                         \
    } while (0);
    GW_CJSON_SYMS(LOAD_)
#undef LOAD_
    snprintf(c.lib, sizeof(c.lib), "%s", name);
    g_cjson = c;
    return 0;
}

static int get(lib_state_t *ls, int set, const char *deflt, int (*load)(const char *), char *why, size_t whylen)
{
    const char *name = gw_settings_env(set);
    if (!name || !*name)
        name = deflt;
    pthread_mutex_lock(&g_lock);
    /* a failure is tried again under another name; a loaded library stays
     * (pointers into it are in use) */
    if (ls->state == 0 || (ls->state < 0 && strcmp(ls->name, name) != 0)) {
        snprintf(ls->name, sizeof(ls->name), "%s", name);
        ls->state = load(name) == 0 ? 1 : -1;
    }
    int st = ls->state;
    if (st < 0 && why && whylen)
        snprintf(why, whylen, "%s", ls->why);
    pthread_mutex_unlock(&g_lock);
    return st;
}

const gw_curl_t *gw_curl_get(char *why, size_t whylen)
{
    return get(&g_curl_st, GW_SET_CURL_LIB, "libcurl.so.4", load_curl, why, whylen) > 0 ? &g_curl : NULL;
}

const gw_cjson_t *gw_cjson_get(char *why, size_t whylen)
{
    return get(&g_cjson_st, GW_SET_CJSON_LIB, "libcjson.so.1", load_cjson, why, whylen) > 0 ? &g_cjson : NULL;
}
