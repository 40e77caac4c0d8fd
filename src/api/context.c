/* SPDX-License-Identifier: Apache-2.0 */
/* context.c - context life cycle, progress, settings and transport queries. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"
#include "proto/proto.h"

/* "verbs, intra, tcp": every transport known (core/transports.def) */
static void known_transports(char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < GW_TL_COUNT && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? ", " : "", gw_tl_names[i]);
}

static gw_status_t parse_transports(gw_context_t *ctx, const char *list, char *err, size_t errlen)
{
    char buf[256], known[128];
    known_transports(known, sizeof(known));
    snprintf(buf, sizeof(buf), "%s", list);
    ctx->tl_norder = 0;
    /* an empty entry ("tcp,,verbs", a trailing comma) is a typo, not a choice */
    for (const char *p = list, *q; *p; p = q + 1) {
        q = strchr(p, ',');
        if (!q)
            q = p + strlen(p);
        size_t nonblank = 0;
        for (const char *r = p; r < q; r++)
            nonblank += *r != ' ';
        if (!nonblank && (*q == ',' || p != list)) {
            snprintf(err, errlen, "GPUWIRE_TRANSPORTS=\"%s\": empty entry in the list (expected a comma-separated "
                     "subset of %s)", list, known);
            return GW_ERR_CONFIG;
        }
        if (!*q)
            break;
    }
    char *save = NULL;
    for (char *tok = strtok_r(buf, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
        int found = -1;
        for (int i = 0; i < GW_TL_COUNT; i++)
            if (!strcmp(tok, gw_tl_names[i]))
                found = i;
        if (found < 0) {
            snprintf(err, errlen, "GPUWIRE_TRANSPORTS=\"%s\": unknown transport \"%s\" (known: %s)",
                     list, tok, known);
            return GW_ERR_CONFIG;
        }
        for (int i = 0; i < ctx->tl_norder; i++) {
            if (ctx->tl_order[i] == found) {
                snprintf(err, errlen, "GPUWIRE_TRANSPORTS=\"%s\": \"%s\" is listed twice", list, tok);
                return GW_ERR_CONFIG;
            }
        }
        ctx->tl_order[ctx->tl_norder++] = found;
    }
    if (!ctx->tl_norder) {
        snprintf(err, errlen, "GPUWIRE_TRANSPORTS=\"%s\" names no transport", list);
        return GW_ERR_CONFIG;
    }
    return GW_OK;
}

static int tl_allowed(const gw_context_t *ctx, int id)
{
    for (int i = 0; i < ctx->tl_norder; i++)
        if (ctx->tl_order[i] == id)
            return 1;
    return 0;
}

static gw_status_t load_secret(gw_context_t *ctx, char *err, size_t errlen)
{
    const char *file = gw_settings_str(&ctx->core.settings, GW_SET_AUTH_SECRET_FILE);
    const char *val = gw_settings_str(&ctx->core.settings, GW_SET_AUTH_SECRET);
    if (file[0]) {
        int fd = open(file, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            snprintf(err, errlen, "GPUWIRE_AUTH_SECRET_FILE=\"%s\": cannot open: %s", file, strerror(errno));
            return GW_ERR_CONFIG;
        }
        ssize_t n = read(fd, ctx->auth_secret, sizeof(ctx->auth_secret));
        close(fd);
        if (n < 0) {
            snprintf(err, errlen, "GPUWIRE_AUTH_SECRET_FILE=\"%s\": cannot read: %s", file, strerror(errno));
            return GW_ERR_CONFIG;
        }
        while (n > 0 && (ctx->auth_secret[n - 1] == '\n' || ctx->auth_secret[n - 1] == '\r'))
            n--;
        if (n == 0) {
            snprintf(err, errlen, "GPUWIRE_AUTH_SECRET_FILE=\"%s\" is empty", file);
            return GW_ERR_CONFIG;
        }
        ctx->auth_secret_len = (size_t)n;
    } else if (val[0]) {
        size_t n = strlen(val);
        if (n > sizeof(ctx->auth_secret))
            n = sizeof(ctx->auth_secret);
        memcpy(ctx->auth_secret, val, n);
        ctx->auth_secret_len = n;
    }
    if (!ctx->auth_secret_len)
        return GW_OK;
#if !GW_HAVE_AUTH
    snprintf(err, errlen, "a shared secret is set but this build has no authentication support "
                          "(rebuild with OpenSSL libcrypto: apt-get install libssl-dev)");
    return GW_ERR_NOT_BUILT;
#else
    ctx->auth_enabled = 1;
    return GW_OK;
#endif
}

gw_status_t gw_api_invalid(gw_core_t *core, const char *fn, const char *fmt, ...)
{
    if (!core)
        return GW_ERR_INVALID;
    char what[sizeof(core->errbuf)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    return gw_err(core, GW_ERR_INVALID, "%s: %s", fn, what);
}

gw_status_t gw_api_bad_struct(gw_core_t *core, const char *fn, const char *arg, const size_t *sizep)
{
    if (!sizep)
        return gw_api_invalid(core, fn, "%s is NULL", arg);
    return gw_api_invalid(core, fn, "%s->size is %zu, smaller than its size field (set it to the struct's sizeof)",
                          arg, *sizep);
}

gw_status_t gw_context_create(const gw_config_t *config, gw_context_t **out)
{
    char err[512] = "";
    if (!out) {
        fprintf(stderr, "gpuwire: gw_context_create: out is NULL\n");
        return GW_ERR_INVALID;
    }
    *out = NULL;
    if (config && (config->size < sizeof(size_t) || config->size > 4096)) {
        fprintf(stderr, "gpuwire: gw_context_create: config->size=%zu is not sizeof(gw_config_t)\n",
                config->size);
        return GW_ERR_INVALID;
    }
    gw_context_t *ctx = calloc(1, sizeof(*ctx));
    if (!ctx)
        return GW_ERR_NOMEM;
    gw_status_t st = gw_core_init(&ctx->core, err, sizeof(err));
    if (st != GW_OK)
        goto err_free;
    gw_list_init(&ctx->eps);
    gw_list_init(&ctx->ctl_gone);
    gw_list_init(&ctx->integ_eps);
    gw_list_init(&ctx->listeners);
    gw_list_init(&ctx->mems);
    gw_hmap_init(&ctx->tokens);
    size_t csize = config ? config->size : 0;
    if (csize >= offsetof(gw_config_t, log_level) + sizeof(int) && config->log_level >= 0)
        gw_log_set_level(config->log_level);
    if (csize >= offsetof(gw_config_t, ib_device) + sizeof(char *) && config->ib_device) {
        char *dev = strdup(config->ib_device);
        if (!dev) {
            st = GW_ERR_NOMEM;
            goto err_core;
        }
        free(ctx->core.settings.value[GW_SET_IB_DEVICE]);
        ctx->core.settings.value[GW_SET_IB_DEVICE] = dev;
    }
    const char *tls = (csize >= offsetof(gw_config_t, transports) + sizeof(char *) && config->transports)
                          ? config->transports
                          : gw_settings_str(&ctx->core.settings, GW_SET_TRANSPORTS);
    if ((st = parse_transports(ctx, tls, err, sizeof(err))) != GW_OK)
        goto err_core;
    if ((st = gw_settings_int(&ctx->core.settings, GW_SET_CONNECT_TIMEOUT_MS,
                              &ctx->connect_timeout_ms, err, sizeof(err))) != GW_OK)
        goto err_core;
    if ((st = gw_settings_int(&ctx->core.settings, GW_SET_SPIN_US, &ctx->spin_us, err,
                              sizeof(err))) != GW_OK)
        goto err_core;
    if ((st = load_secret(ctx, err, sizeof(err))) != GW_OK)
        goto err_core;
    const char *bpath = gw_settings_str(&ctx->core.settings, GW_SET_BATCH_PATH);
    ctx->batch_expand = !strcmp(bpath, "expand") ? GW_PROTO_EXPAND : !strcmp(bpath, "iov") ? GW_PROTO_IOV
                                                                                          : GW_PROTO_NATIVE;
    int stage_proto = ctx->gpu_stage_force = !strcmp(gw_settings_str(&ctx->core.settings, GW_SET_GPU_STAGE), "proto");
    ctx->reg_cache = !strcmp(gw_settings_str(&ctx->core.settings, GW_SET_REG_CACHE), "on");

    for (int i = 0; i < GW_TL_COUNT; i++) {
        const gw_tl_ops_t *ops = gw_tl_table[i];
        if (!ops) {
            snprintf(ctx->tl_why[i], sizeof(ctx->tl_why[i]), "not compiled into this build");
            continue;
        }
        if (!tl_allowed(ctx, i)) {
            snprintf(ctx->tl_why[i], sizeof(ctx->tl_why[i]), "not in GPUWIRE_TRANSPORTS=\"%s\"", tls);
            continue;
        }
        char why[256] = "";
        if (gw_tl_check_ops(ops, i, why, sizeof(why)) != GW_OK) {
            gw_log(GW_LOG_ERROR, "transport %s disabled (a bug): %s", gw_tl_names[i], why);
            snprintf(ctx->tl_why[i], sizeof(ctx->tl_why[i]), "broken: %s", why);
            continue;
        }
        st = ops->iface_open(&ctx->core, &ctx->tl[i], why, sizeof(why));
        if (st == GW_OK) {
            gw_tl_caps_t caps;
            ops->caps(ctx->tl[i], &caps);
            ctx->gpu_staged[i] = (uint8_t)(stage_proto || !(caps.mem_kinds & GW_TL_MEM_CUDA));
            continue;
        }
        ctx->tl[i] = NULL;
        if (st == GW_ERR_CONFIG) {
            snprintf(err, sizeof(err), "%s", why);
            goto err_ifaces;
        }
        snprintf(ctx->tl_why[i], sizeof(ctx->tl_why[i]), "%s", why[0] ? why : gw_status_str(st));
        if (st == GW_ERR_UNAVAILABLE || st == GW_ERR_NOT_BUILT)
            gw_log(GW_LOG_INFO, "transport %s not available here: %s", gw_tl_names[i], ctx->tl_why[i]);
        else
            gw_log(GW_LOG_WARN, "transport %s is broken: %s (%s)", gw_tl_names[i], ctx->tl_why[i],
                   gw_status_name(st));
    }
    if ((st = gw_ctx_ext_setup(ctx)) != GW_OK) {
        snprintf(err, sizeof(err), "%.500s", ctx->core.errbuf);
        goto err_ifaces;
    }
    /* end-to-end integrity: the config's choice, else GPUWIRE_INTEGRITY */
    int ig = csize >= offsetof(gw_config_t, integrity) + sizeof(int) ? config->integrity : 0;
    if (ig != GW_INTEGRITY_DEFAULT && ig != GW_INTEGRITY_ON && ig != GW_INTEGRITY_OFF) {
        snprintf(err, sizeof(err), "config->integrity=%d: expected GW_INTEGRITY_ON (1), _OFF (-1) or _DEFAULT (0)",
                 ig);
        st = GW_ERR_INVALID;
        goto err_names;
    }
    ctx->integrity = ig != GW_INTEGRITY_DEFAULT
                         ? ig == GW_INTEGRITY_ON
                         : !strcmp(gw_settings_str(&ctx->core.settings, GW_SET_INTEGRITY), "on");
    /* the progress thread: the config's choice, else GPUWIRE_PROGRESS_THREAD
     * (the context's value of the setting says which was taken) */
    int pt = csize >= offsetof(gw_config_t, progress_thread) + sizeof(int) ? config->progress_thread : 0;
    if (pt != GW_PROGRESS_THREAD_DEFAULT && pt != GW_PROGRESS_THREAD_ON && pt != GW_PROGRESS_THREAD_OFF) {
        snprintf(err, sizeof(err), "config->progress_thread=%d: expected GW_PROGRESS_THREAD_ON (1), _OFF (-1) "
                 "or _DEFAULT (0)", pt);
        st = GW_ERR_INVALID;
        goto err_names;
    }
    if (pt != GW_PROGRESS_THREAD_DEFAULT) {
        char *v = strdup(pt == GW_PROGRESS_THREAD_ON ? "on" : "off");
        if (!v) {
            st = GW_ERR_NOMEM;
            goto err_names;
        }
        free(ctx->core.settings.value[GW_SET_PROGRESS_THREAD]);
        ctx->core.settings.value[GW_SET_PROGRESS_THREAD] = v;
    }
    if (!strcmp(gw_settings_str(&ctx->core.settings, GW_SET_PROGRESS_THREAD), "on") &&
        (st = gw_ctx_mt_start(ctx, err, sizeof(err))) != GW_OK)
        goto err_names;
    *out = ctx;
    return GW_OK;

err_names:
    if (ctx->ext_ops && ctx->ext_ops->fini) { /* the extension setup made (nothing else holds it yet) */
        ctx->ext_ops->fini(ctx->ext);
        ctx->ext_ops = NULL;
        ctx->ext = NULL;
    }

err_ifaces:
    for (int i = 0; i < GW_TL_COUNT; i++)
        if (ctx->tl[i])
            ctx->tl[i]->ops->iface_close(ctx->tl[i]);
err_core:
    gw_hmap_fini(&ctx->tokens);
    free(atomic_load(&ctx->batch_spare));
    gw_core_fini(&ctx->core);
err_free:
    free(ctx);
    if (err[0])
        gw_log(GW_LOG_ERROR, "gw_context_create failed: %s", err);
    return st;
}

gw_status_t gw_context_destroy(gw_context_t *ctx)
{
    if (!ctx)
        return GW_OK;
    {
        GW_API_LOCK(ctx);
        if (ctx->ext_ops && ctx->ext_ops->fini) { /* its own endpoints and thread; BUSY while its keys live */
            gw_status_t nst = ctx->ext_ops->fini(ctx->ext);
            if (nst != GW_OK)
                return nst;
            ctx->ext_ops = NULL;
            ctx->ext = NULL;
        }
        if (ctx->n_eps || ctx->n_listeners || ctx->n_mems)
            return gw_err(&ctx->core, GW_ERR_BUSY,
                          "gw_context_destroy: %zu endpoint(s), %zu listener(s) and %zu memory region(s) are still "
                          "alive; close, destroy and deregister them first",
                          ctx->n_eps, ctx->n_listeners, ctx->n_mems);
    }
    gw_ctx_mt_stop(ctx); /* nothing is left for it to serve */
    gw_proto_stage_destroy(ctx->pstage); /* (no endpoint is left: only copies may still run) */
    for (int i = 0; i < GW_TL_COUNT; i++)
        if (ctx->tl[i])
            ctx->tl[i]->ops->iface_close(ctx->tl[i]);
    gw_hmap_fini(&ctx->tokens);
    free(atomic_load(&ctx->batch_spare)); /* the entry array kept for the next batch */
    free(ctx->regs);
    gw_core_fini(&ctx->core);
    free(ctx);
    return GW_OK;
}

void gw_ctx_ext_attach(gw_context_t *ctx, const gw_ctx_ext_ops_t *ops, void *ext)
{
    ctx->ext_ops = ops;
    ctx->ext = ext;
}

const char *gw_last_error(const gw_context_t *ctx)
{
    if (ctx && ctx->mt)
        return gw_ctx_mt_last_error(ctx);
    return ctx ? ctx->core.errbuf : "no context";
}

/* gw_progress on a context shared between threads: under its lock (out of
 * line, so that a spinning caller's gw_progress is a test and a jump). */
__attribute__((noinline)) static int progress_mt(gw_context_t *ctx)
{
    GW_API_LOCK(ctx);
    gw_ctx_mt_clear(ctx);
    return gw_progress_pass(ctx);
}

int gw_progress(gw_context_t *ctx)
{
    if (!ctx)
        return GW_ERR_INVALID;
    if (GW_UNLIKELY(ctx->mt))
        return progress_mt(ctx);
    return gw_progress_pass(ctx);
}

int gw_progress_pass(gw_context_t *ctx)
{
    ctx->app_passes++;
    if (GW_UNLIKELY(ctx->deferred != NULL) && !gw_ctx_on_progress_thread(ctx)) {
        void (*fn)(void *, uint32_t) = ctx->deferred;
        ctx->deferred = NULL;
        fn(ctx->deferred_arg, 0);
    }
    int n = gw_core_dispatch(&ctx->core, 0);
    ctx->quick_waits = GW_QUICK_WAITS; /* every poller, fd and timer had its turn */
    if (!gw_list_empty(&ctx->ctl_gone))
        gw_api_ep_ctl_reap(ctx);
    if (GW_UNLIKELY(ctx->core.n_canceling))
        gw_api_cancel_watch(ctx);
    return n < 0 ? GW_ERR_SYSTEM : n;
}

gw_status_t gw_context_fd(gw_context_t *ctx, int *fd)
{
    if (!ctx || !fd)
        return gw_api_invalid(ctx ? &ctx->core : NULL, "gw_context_fd", "fd is NULL");
    *fd = ctx->mt ? gw_ctx_mt_user_fd(ctx) : ctx->core.epfd;
    return GW_OK;
}

gw_status_t gw_context_wait(gw_context_t *ctx, int timeout_ms)
{
    if (!ctx)
        return GW_ERR_INVALID;
    GW_API_LOCK(ctx); /* (let go of while it sleeps) */
    return gw_ctx_sleep(ctx, timeout_ms);
}

/* Progress until *done says so or the deadline passes.  Spins for a short
 * while after the last event (latency), then sleeps on the context fd with
 * short timeouts (timers keep running).  The clock is read once per stride
 * of passes (where it has no vDSO mode, each read is a system call): the
 * stride doubles, up to 64, while a stride takes less than 0.5 ms and falls
 * back to 1 when it takes longer, so the deadline and the idle time are late
 * by about a millisecond at most. */
#define GW_WAIT_QUICK_PASSES 32u /* passes before the first clock read (see below) */

gw_status_t gw_ctx_progress_until(gw_context_t *ctx, int (*done)(void *), void *arg, int timeout_ms)
{
    /* one pass before the first clock read: a wait for an operation that
     * is about to complete (the oldest of a window, a message already in
     * the receive queue) ends here, without reading the clock */
    if (done(arg))
        return GW_OK;
    int event = gw_progress_pass(ctx) > 0;
    if (done(arg))
        return GW_OK;
    /* and a few more before it where the caller spins (GPUWIRE_SPIN_US > 0)
     * and can wait (timeout not 0): a put's completion comes a round trip
     * after the post, and in an emulated guest the clock read is a system
     * call longer than a pass, which would sit between the completion and
     * its notice (8-byte latency, bench/compare/verbs_small.sh).  Within one tick of
     * the coarse clock (a vDSO read, no system call) only: a pass can be
     * long (a large copy), and the deadline is late by one tick at most */
    uint64_t tick = gw_now_coarse_ns();
    for (unsigned i = ctx->spin_us && timeout_ms != 0 ? GW_WAIT_QUICK_PASSES : 0;
         i > 0 && gw_now_coarse_ns() == tick; i--) {
        if (gw_progress_pass(ctx) > 0)
            event = 1;
        if (done(arg))
            return GW_OK;
    }
    uint64_t start = gw_now_ns(), last_event = start, now = start, prev = start;
    uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : start + (uint64_t)timeout_ms * 1000000ull;
    uint64_t spin_ns = (uint64_t)ctx->spin_us * 1000ull;
    unsigned stride = 1, left = 1;
    for (;;) {
        if (done(arg))
            return GW_OK;
        if (gw_progress_pass(ctx) > 0)
            event = 1;
        if (done(arg))
            return GW_OK;
        if (ctx->mt) /* another thread asked for the lock: it has it for a while */
            gw_ctx_yield(ctx);
        if (--left)
            continue;
        now = gw_now_ns();
        stride = now - prev < 500000ull ? GW_MIN(stride * 2, 64u) : 1;
        left = stride;
        prev = now;
        int quiet = !event; /* a whole stride without events: every fd is armed for a wake-up */
        if (event)
            last_event = now;
        event = 0;
        if (now >= deadline)
            return GW_ERR_TIMEOUT;
        if (quiet && now - last_event >= spin_ns) { /* idle for GPUWIRE_SPIN_US: sleep on the fd */
            uint64_t left_ms = deadline == UINT64_MAX ? 10 : (deadline - now) / 1000000ull + 1;
            /* woken by an event: spin briefly (more may follow); woken by
             * the timeout: one pass for the timers, then sleep again */
            if (gw_ctx_sleep(ctx, (int)GW_MIN(left_ms, 10)) == GW_OK) {
                last_event = gw_now_ns() - spin_ns / 2;
                ctx->core.cold_pass = GW_CORE_COLD_EVERY - 1; /* the next pass reads the set that woke us */
            }
            left = stride = 1;
        }
    }
}

static int setting_id(const char *name)
{
    for (size_t i = 0; name && i < GW_SET_COUNT; i++)
        if (!strcmp(gw_settings_name((gw_setting_id_t)i), name))
            return (int)i;
    return -1;
}

const char *gw_setting_value(const gw_context_t *ctx, const char *name)
{
    int id = setting_id(name);
    if (id < 0)
        return NULL;
    return ctx ? gw_settings_str(&ctx->core.settings, (gw_setting_id_t)id)
               : gw_settings_env((gw_setting_id_t)id);
}

int gw_setting_from_env(const gw_context_t *ctx, const char *name)
{
    int id = setting_id(name);
    if (id < 0)
        return -1;
    return gw_settings_is_env(ctx ? &ctx->core.settings : NULL, (gw_setting_id_t)id);
}

gw_status_t gw_transport_at(const gw_context_t *ctx, size_t i, gw_transport_info_t *info)
{
    GW_API_LOCK((gw_context_t *)ctx);
    if (!ctx || !GW_API_SIZE_OK(info))
        return gw_api_bad_struct(ctx ? (gw_core_t *)&ctx->core : NULL, "gw_transport_at", "info",
                                 info ? &info->size : NULL);
    if (i >= GW_TL_COUNT)
        return GW_ERR_NOT_FOUND;
    gw_transport_info_t out;
    memset(&out, 0, sizeof(out));
    out.size = info->size;
    snprintf(out.name, sizeof(out.name), "%s", gw_tl_names[i]);
    out.usable = ctx->tl[i] != NULL;
    if (ctx->tl[i])
        ctx->tl[i]->ops->iface_describe(ctx->tl[i], out.detail, sizeof(out.detail));
    else
        snprintf(out.detail, sizeof(out.detail), "%s", ctx->tl_why[i]);
    memcpy(info, &out, GW_MIN(info->size, sizeof(out)));
    return GW_OK;
}
