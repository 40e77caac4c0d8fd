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

#include "core/fault.h"
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

/* ---- faults (GPUWIRE_FAULT's ibv.<verb> rules, core/fault.h) ----
 * The control verbs below are bound through wrappers that ask the fault
 * layer first: a fired "fail=E" rule makes the verb fail as libibverbs
 * does (NULL with errno E, or the error number E returned; default EIO).
 * The data path (ibv_post_send, ibv_post_recv, ibv_poll_cq) is inline in
 * verbs.h and calls the device context's ops table: where a rule names one
 * of them when the device is opened, that context's entries are replaced by
 * wrappers that can fail a post, move the queue pair to the error state
 * before a post (qp_err), give a completion another status (status=S) or
 * drop it (drop).  Without such a rule the ops table is left alone. */
_Static_assert(IBV_WC_LOC_LEN_ERR == 1 && IBV_WC_LOC_PROT_ERR == 4 && IBV_WC_WR_FLUSH_ERR == 5 &&
                   IBV_WC_REM_ACCESS_ERR == 10 && IBV_WC_REM_OP_ERR == 11 && IBV_WC_RETRY_EXC_ERR == 12 &&
                   IBV_WC_RNR_RETRY_EXC_ERR == 13 && IBV_WC_FATAL_ERR == 19 && IBV_WC_GENERAL_ERR == 21,
               "core/fault.c names completion statuses by these numbers");

static gw_ibv_t g_real;

#define GW_IBV_FAULT_PTR_(x) (errno = (x), (void *)NULL)
#define GW_IBV_FAULT_INT_(x) (x)
#define GW_IBV_FAULT_WRAPS(W)                                                                   \
    W(open_device, struct ibv_context *, (struct ibv_device * d), (d), PTR)                     \
    W(alloc_pd, struct ibv_pd *, (struct ibv_context * c), (c), PTR)                            \
    W(reg_mr, struct ibv_mr *, (struct ibv_pd * pd, void *a, size_t n, int acc), (pd, a, n, acc), PTR) \
    W(reg_dmabuf_mr, struct ibv_mr *, (struct ibv_pd * pd, uint64_t off, size_t n, uint64_t iova, int fd, \
                                       int acc), (pd, off, n, iova, fd, acc), PTR)              \
    W(create_comp_channel, struct ibv_comp_channel *, (struct ibv_context * c), (c), PTR)       \
    W(create_cq, struct ibv_cq *, (struct ibv_context * c, int n, void *u, struct ibv_comp_channel *ch, \
                                   int v), (c, n, u, ch, v), PTR)                               \
    W(create_qp, struct ibv_qp *, (struct ibv_pd * pd, struct ibv_qp_init_attr * a), (pd, a), PTR) \
    W(modify_qp, int, (struct ibv_qp * qp, struct ibv_qp_attr * a, int m), (qp, a, m), INT)    \
    W(query_device, int, (struct ibv_context * c, struct ibv_device_attr * a), (c, a), INT)

static struct ibv_context *hooked_open_device(struct ibv_device *d);

#define GW_IBV_FAULT_FN_(field, ret, params, args, kind)                                        \
    static ret fault_##field params                                                             \
    {                                                                                           \
        gw_fault_t f_;                                                                          \
        if (gw_fault_at("ibv." #field, &f_))                                                    \
            return GW_IBV_FAULT_##kind##_(f_.has_arg ? (int)f_.arg : EIO);                      \
        return FAULT_CALL_##field args;                                                         \
    }
#define FAULT_CALL_open_device hooked_open_device
#define FAULT_CALL_alloc_pd g_real.alloc_pd
#define FAULT_CALL_reg_mr g_real.reg_mr
#define FAULT_CALL_reg_dmabuf_mr g_real.reg_dmabuf_mr
#define FAULT_CALL_create_comp_channel g_real.create_comp_channel
#define FAULT_CALL_create_cq g_real.create_cq
#define FAULT_CALL_create_qp g_real.create_qp
#define FAULT_CALL_modify_qp g_real.modify_qp
#define FAULT_CALL_query_device g_real.query_device
GW_IBV_FAULT_WRAPS(GW_IBV_FAULT_FN_)
#undef GW_IBV_FAULT_FN_

/* The data-path entries of the contexts whose ops were replaced. */
#define GW_IBV_HOOKED_MAX 16
static struct hooked {
    struct ibv_context *ctx;
    int (*post_send)(struct ibv_qp *, struct ibv_send_wr *, struct ibv_send_wr **);
    int (*post_recv)(struct ibv_qp *, struct ibv_recv_wr *, struct ibv_recv_wr **);
    int (*poll_cq)(struct ibv_cq *, int, struct ibv_wc *);
} g_hooked[GW_IBV_HOOKED_MAX];
static pthread_mutex_t g_hook_lock = PTHREAD_MUTEX_INITIALIZER;

static const struct hooked *hooked_of(struct ibv_context *ctx)
{
    for (int i = 0; i < GW_IBV_HOOKED_MAX; i++)
        if (g_hooked[i].ctx == ctx)
            return &g_hooked[i];
    return NULL; /* not reached: only hooked contexts call these */
}

static int fault_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
    const struct hooked *h = hooked_of(qp->context);
    gw_fault_t f;
    if (gw_fault_at("ibv.post_send", &f)) {
        if (f.act == GW_FAULT_FAIL) {
            *bad = wr;
            return f.has_arg ? (int)f.arg : EIO;
        }
        if (f.act == GW_FAULT_QP_ERR) {
            struct ibv_qp_attr a;
            memset(&a, 0, sizeof(a));
            a.qp_state = IBV_QPS_ERR;
            g_real.modify_qp(qp, &a, IBV_QP_STATE);
        }
    }
    return h->post_send(qp, wr, bad);
}

static int fault_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
    const struct hooked *h = hooked_of(qp->context);
    gw_fault_t f;
    if (gw_fault_at("ibv.post_recv", &f) && f.act == GW_FAULT_FAIL) {
        *bad = wr;
        return f.has_arg ? (int)f.arg : EIO;
    }
    return h->post_recv(qp, wr, bad);
}

/* Each completion polled is one call at ibv.poll_cq. */
static int fault_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
    const struct hooked *h = hooked_of(cq->context);
    int got = h->poll_cq(cq, n, wc);
    int out = 0;
    for (int i = 0; i < got; i++) {
        gw_fault_t f;
        if (gw_fault_at("ibv.poll_cq", &f)) {
            if (f.act == GW_FAULT_DROP)
                continue;
            if (f.act == GW_FAULT_FAIL)
                return -(f.has_arg ? (int)f.arg : EIO);
            if (f.act == GW_FAULT_STATUS) {
                wc[i].status = (enum ibv_wc_status)f.arg;
                wc[i].vendor_err = 0xfa17; /* tells an injected status from the device's */
            }
        }
        if (out != i)
            wc[out] = wc[i];
        out++;
    }
    return got < 0 ? got : out;
}

static struct ibv_context *hooked_open_device(struct ibv_device *d)
{
    struct ibv_context *ctx = g_real.open_device(d);
    if (!ctx || !(gw_fault_wants("ibv.post_send") || gw_fault_wants("ibv.post_recv") ||
                  gw_fault_wants("ibv.poll_cq")))
        return ctx;
    pthread_mutex_lock(&g_hook_lock);
    for (int i = 0; i < GW_IBV_HOOKED_MAX; i++) {
        struct hooked *h = &g_hooked[i];
        if (h->ctx && h->ctx != ctx)
            continue;
        /* a fresh context holds its provider's entries (also one opened
         * at the address of a closed one, whose slot it takes over) */
        h->ctx = ctx;
        h->post_send = ctx->ops.post_send;
        h->post_recv = ctx->ops.post_recv;
        h->poll_cq = ctx->ops.poll_cq;
        ctx->ops.post_send = fault_post_send;
        ctx->ops.post_recv = fault_post_recv;
        ctx->ops.poll_cq = fault_poll_cq;
        gw_log(GW_LOG_WARN, "GPUWIRE_FAULT: data-path verbs of %s go through the fault layer",
               g_real.get_device_name(d));
        break;
    }
    pthread_mutex_unlock(&g_hook_lock);
    return ctx;
}

static void install_fault_wraps(void)
{
    g_real = g_ibv;
#define GW_IBV_FAULT_SET_(field, ret, params, args, kind)                                       \
    if (g_ibv.field)                                                                            \
        g_ibv.field = fault_##field;
    GW_IBV_FAULT_WRAPS(GW_IBV_FAULT_SET_)
#undef GW_IBV_FAULT_SET_
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
    install_fault_wraps();
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
