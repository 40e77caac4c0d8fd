/* SPDX-License-Identifier: Apache-2.0 */
/* ofi_loader.c - dlopen of libfabric.so.1 through the GW_FI_SYMS table. */
#include "transport/ofi/ofi_syms.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/settings.h"

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static gw_fi_t g_fi;
static int g_state; /* 0 not tried, 1 loaded, -1 absent, -2 broken */
static char g_why[512];

static int load_locked(void)
{
    const char *name = gw_settings_env(GW_SET_OFI_LIB);
    if (!name || !*name)
        name = "libfabric.so.1";
    memset(&g_fi, 0, sizeof(g_fi));
    snprintf(g_fi.lib, sizeof(g_fi.lib), "%s", name);
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(g_why, sizeof(g_why), "dlopen(%s) failed: %s (install libfabric1, or set GPUWIRE_OFI_LIB)", name,
                 e ? e : "unknown error");
        return -1;
    }
    g_fi.handle = h;
#define GW_FI_LOAD_(field, sym, ver, req, ret, args)                                           \
    do {                                                                                       \
        void *p_ = dlvsym(h, sym, ver);                                                        \
        if (!p_ && (req)) {                                                                    \
            snprintf(g_why, sizeof(g_why), "%s has no %s@%s: not libfabric, or too old (broken)", name, sym, \
                     ver);                                                                     \
            goto fail;                                                                         \
        }                                                                                      \
        memcpy(&g_fi.field, &p_, sizeof(p_));                                                  \
    } while (0);
    GW_FI_SYMS(GW_FI_LOAD_)
#undef GW_FI_LOAD_
    /* A newer major version is taken: libfabric 2.x keeps the 1.x entry
     * points bound above (libfabric.so.1, FABRIC_1.* symbol versions), and
     * fi_getinfo asks for the older of its API and ours (ofi_iface.c), under
     * which the library keeps the 1.x behaviour and structure layouts.  An
     * older major cannot serve what we were built against. */
    if (FI_MAJOR(g_fi.version()) < FI_MAJOR_VERSION) {
        snprintf(g_why, sizeof(g_why), "%s is libfabric %u.%u; gpuwire was built against %d.%d (broken)", name,
                 FI_MAJOR(g_fi.version()), FI_MINOR(g_fi.version()), FI_MAJOR_VERSION, FI_MINOR_VERSION);
        goto fail;
    }
    return 0;
fail:
    dlclose(h);
    memset(&g_fi, 0, sizeof(g_fi));
    return -2;
}

const gw_fi_t *gw_fi_get(char *why, size_t whylen, int *broken)
{
    pthread_mutex_lock(&g_lock);
    if (g_state == 0) {
        int r = load_locked();
        g_state = r == 0 ? 1 : r;
    }
    int st = g_state;
    pthread_mutex_unlock(&g_lock);
    if (broken)
        *broken = st == -2;
    if (st < 0) {
        if (why && whylen)
            snprintf(why, whylen, "%s", g_why);
        return NULL;
    }
    return &g_fi;
}
