/* SPDX-License-Identifier: Apache-2.0 */
/* ibv_loader.c - dlopen of libibverbs.so.1 through the GW_IBV_SYMS table. */
#include "transport/verbs/ibv_syms.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/log.h"
#include "core/settings.h"
#include "core/util.h"

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static gw_ibv_t g_ibv;
static int g_state; /* 0 not tried, 1 loaded, -1 failed */
static char g_why[512];
static int g_listed; /* the first device listing (provider loading) happened */

static void set_why(char *why, size_t whylen, const char *text)
{
    if (why && whylen)
        snprintf(why, whylen, "%s", text);
}

static int load_locked(void)
{
    const char *name = gw_settings_env(GW_SET_IB_LIB);
    if (!name || !*name)
        name = "libibverbs.so.1";
    memset(&g_ibv, 0, sizeof(g_ibv));
    snprintf(g_ibv.lib, sizeof(g_ibv.lib), "%s", name);
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        /* absent: the usual case on machines without RDMA software */
        snprintf(g_why, sizeof(g_why), "dlopen(%s) failed: %s (install libibverbs1 and "
                 "ibverbs-providers, or set GPUWIRE_IB_LIB)", name, e ? e : "unknown error");
        return -1;
    }
    g_ibv.handle = h;
#define GW_IBV_LOAD_(field, sym, ver, req, ret, args)                                          \
    do {                                                                                       \
        void *p_ = dlvsym(h, sym, ver);                                                        \
        if (!p_ && (req)) {                                                                    \
            snprintf(g_why, sizeof(g_why),                                                     \
                     "%s has no %s@%s: libibverbs too old or not rdma-core's (broken)", name,  \
                     sym, ver);                                                                \
            goto fail;                                                                         \
        }                                                                                      \
        memcpy(&g_ibv.field, &p_, sizeof(p_));                                                 \
    } while (0);
    GW_IBV_SYMS(GW_IBV_LOAD_)
#undef GW_IBV_LOAD_
    return 0;
fail:
    dlclose(h);
    memset(&g_ibv, 0, sizeof(g_ibv));
    return -1;
}

const gw_ibv_t *gw_ibv_get(char *why, size_t whylen)
{
    pthread_mutex_lock(&g_lock);
    if (g_state == 0)
        g_state = load_locked() == 0 ? 1 : -1;
    int st = g_state;
    pthread_mutex_unlock(&g_lock);
    if (st < 0) {
        set_why(why, whylen, g_why);
        return NULL;
    }
    return &g_ibv;
}

/* Runs ibv_get_device_list() with fd 2 pointed at a memory file, then puts
 * stderr back, keeps what libibverbs said (its lines start with
 * "libibverbs:") and passes anything else through unchanged. */
static struct ibv_device **list_captured(gw_ibv_t *ibv, int *n)
{
    fflush(stderr);
    int cap = memfd_create("gw-ibv-stderr", MFD_CLOEXEC);
    int saved = cap >= 0 ? dup(STDERR_FILENO) : -1;
    if (cap < 0 || saved < 0 || dup2(cap, STDERR_FILENO) < 0) {
        if (saved >= 0)
            close(saved);
        if (cap >= 0)
            close(cap);
        return ibv->get_device_list(n); /* cannot capture: let it speak */
    }
    struct ibv_device **l = ibv->get_device_list(n);
    int err = errno;
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    char buf[4096];
    ssize_t len = pread(cap, buf, sizeof(buf) - 1, 0);
    close(cap);
    if (len > 0) {
        buf[len] = '\0';
        size_t used = strlen(ibv->init_noise);
        char *save = NULL;
        for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
            if (strncmp(line, "libibverbs:", 11) != 0 && strstr(line, "Warning") == NULL &&
                strncmp(line, "    ", 4) != 0) {
                fprintf(stderr, "%s\n", line); /* not libibverbs' chatter */
                continue;
            }
            gw_log(GW_LOG_DEBUG, "libibverbs (quieted): %s", line);
            if (used + strlen(line) + 2 < sizeof(ibv->init_noise)) {
                used += (size_t)snprintf(ibv->init_noise + used, sizeof(ibv->init_noise) - used,
                                         "%s%s", used ? "; " : "", line);
            }
        }
    }
    errno = err;
    return l;
}

struct ibv_device **gw_ibv_device_list(const gw_ibv_t *ibv, int *n)
{
    gw_ibv_t *w = (gw_ibv_t *)ibv; /* only init_noise is written, once, under the lock */
    pthread_mutex_lock(&g_lock);
    struct ibv_device **l;
    if (!g_listed && w == &g_ibv) {
        g_listed = 1;
        l = list_captured(w, n);
    } else {
        l = w->get_device_list(n);
    }
    pthread_mutex_unlock(&g_lock);
    return l;
}

int gw_ibv_query_port(const gw_ibv_t *ibv, struct ibv_context *ctx, uint8_t port,
                      struct ibv_port_attr *attr)
{
    struct verbs_context *vctx = verbs_get_ctx_op(ctx, query_port);
    if (vctx)
        return vctx->query_port(ctx, port, attr, sizeof(*attr));
    memset(attr, 0, sizeof(*attr));
    return ibv->query_port(ctx, port, (struct _compat_ibv_port_attr *)attr);
}
