/* SPDX-License-Identifier: Apache-2.0 */
/* fault.c - the rules of GPUWIRE_FAULT and their counters (see fault.h). */
#include "core/fault.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/log.h"

typedef struct rule {
    char text[96];
    char point[64];
    size_t plen;   /* prefix length when the point ends in '*', else 0 */
    gw_fault_act_t act;
    long arg;
    int has_arg;
    uint64_t first; /* the Nth call (1-based) */
    uint64_t count; /* calls it fires on; UINT64_MAX: all */
    uint64_t calls, fired;
} rule_t;

volatile int gw_fault_on;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static rule_t g_rules[GW_FAULT_MAX_RULES];
static int g_n;
static char g_spec[1024];

typedef struct named {
    const char *name;
    long value;
} named_t;

static const named_t g_errnos[] = {
    {"EIO", EIO},         {"EINVAL", EINVAL},       {"ENOMEM", ENOMEM},   {"EAGAIN", EAGAIN},
    {"EPIPE", EPIPE},     {"ECONNRESET", ECONNRESET}, {"ETIMEDOUT", ETIMEDOUT}, {"EFAULT", EFAULT},
    {"ENOSPC", ENOSPC},   {"EPERM", EPERM},         {"EBUSY", EBUSY},     {"EOPNOTSUPP", EOPNOTSUPP},
    {"ENOBUFS", ENOBUFS}, {"EHOSTUNREACH", EHOSTUNREACH}, {NULL, 0}};
/* CUresult values of the driver API (stable numbers of cuda.h) */
static const named_t g_curesults[] = {{"CUDA_ERROR_INVALID_VALUE", 1},
                                      {"CUDA_ERROR_OUT_OF_MEMORY", 2},
                                      {"CUDA_ERROR_NOT_INITIALIZED", 3},
                                      {"CUDA_ERROR_DEINITIALIZED", 4},
                                      {"CUDA_ERROR_ECC_UNCORRECTABLE", 214},
                                      {"CUDA_ERROR_ILLEGAL_ADDRESS", 700},
                                      {"CUDA_ERROR_LAUNCH_FAILED", 719},
                                      {"CUDA_ERROR_UNKNOWN", 999},
                                      {NULL, 0}};
/* enum ibv_wc_status of <infiniband/verbs.h> (a stable ABI; the verbs loader
 * checks these numbers against the header it is built with) */
static const named_t g_wcstatus[] = {{"loc_len", 1},     {"loc_qp_op", 2},  {"loc_prot", 4},
                                     {"wr_flush", 5},    {"bad_resp", 7},   {"loc_access", 8},
                                     {"rem_inv_req", 9}, {"rem_access", 10}, {"rem_op", 11},
                                     {"retry_exc", 12},  {"rnr_retry_exc", 13}, {"fatal", 19},
                                     {"general", 21},    {NULL, 0}};

static int lookup(const named_t *t, const char *s, long *out)
{
    for (; t->name; t++)
        if (strcasecmp(t->name, s) == 0) {
            *out = t->value;
            return 0;
        }
    char *end;
    long v = strtol(s, &end, 0);
    if (!*s || *end)
        return -1;
    *out = v;
    return 0;
}

int gw_fault_errno_value(const char *name, long *out)
{
    return lookup(g_errnos, name, out);
}

/* The points the hooks ask about: keep in step with GW_CUDA_FAULT_WRAPS
 * (cuda/cuda_wrap.c), GW_IBV_FAULT_WRAPS and the data-path wrappers
 * (transport/verbs/ibv_loader.c) and core/sock.c.  A rule naming another
 * point would never fire; it is refused instead. */
static const char *const g_points[] = {
    "sock.send", "sock.recv",
    "cuda.cuMemcpy", "cuda.cuMemcpyAsync", "cuda.cuMemcpyHtoD", "cuda.cuMemcpyDtoH", "cuda.cuMemcpyHtoDAsync",
    "cuda.cuMemcpyDtoHAsync", "cuda.cuMemcpyPeerAsync", "cuda.cuLaunchKernel", "cuda.cuStreamSynchronize",
    "cuda.cuStreamQuery", "cuda.cuEventQuery", "cuda.cuEventSynchronize", "cuda.cuMemAlloc", "cuda.cuMemHostAlloc",
    "cuda.cuMemHostRegister", "cuda.cuPointerGetAttributes", "cuda.cuMemGetAddressRange", "cuda.cuIpcGetMemHandle",
    "cuda.cuIpcOpenMemHandle",
    "ibv.open_device", "ibv.query_device", "ibv.alloc_pd", "ibv.reg_mr", "ibv.reg_dmabuf_mr",
    "ibv.create_comp_channel", "ibv.create_cq", "ibv.create_qp", "ibv.modify_qp", "ibv.post_send", "ibv.post_recv",
    "ibv.poll_cq", "integ.source", NULL};

static int known_point(const char *point, size_t plen)
{
    for (int i = 0; g_points[i]; i++)
        if (plen ? strncmp(g_points[i], point, plen) == 0 : strcmp(g_points[i], point) == 0)
            return 1;
    return 0;
}

static const struct {
    const char *name;
    gw_fault_act_t act;
} g_acts[] = {{"fail", GW_FAULT_FAIL},     {"short", GW_FAULT_SHORT}, {"eagain", GW_FAULT_EAGAIN},
              {"reset", GW_FAULT_RESET},   {"status", GW_FAULT_STATUS}, {"drop", GW_FAULT_DROP},
              {"qp_err", GW_FAULT_QP_ERR}, {"flip", GW_FAULT_FLIP},    {NULL, GW_FAULT_NONE}};

/* Which actions a point takes, and how its ARG reads. */
static int parse_rule(const char *text, rule_t *r, char *err, size_t errlen)
{
    memset(r, 0, sizeof(*r));
    snprintf(r->text, sizeof(r->text), "%s", text);
    const char *colon = strchr(text, ':');
    if (!colon || colon == text || (size_t)(colon - text) >= sizeof(r->point)) {
        snprintf(err, errlen, "GPUWIRE_FAULT rule \"%s\": expected POINT:ACTION[=ARG][@N][*K]", text);
        return -1;
    }
    snprintf(r->point, sizeof(r->point), "%.*s", (int)(colon - text), text);
    size_t pl = strlen(r->point);
    if (r->point[pl - 1] == '*')
        r->plen = pl - 1;
    const char *fam = strncmp(r->point, "sock.", 5) == 0   ? "sock"
                      : strncmp(r->point, "cuda.", 5) == 0 ? "cuda"
                      : strncmp(r->point, "ibv.", 4) == 0  ? "ibv"
                      : strncmp(r->point, "integ.", 6) == 0 ? "integ"
                                                           : NULL;
    if (!fam || !known_point(r->point, r->plen)) {
        snprintf(err, errlen,
                 "GPUWIRE_FAULT rule \"%s\": unknown point \"%s\" (sock.send, sock.recv, "
                 "cuda.<driver function>, ibv.<verb> of those docs/FAULTS.md lists, or integ.source)",
                 text, r->point);
        return -1;
    }
    /* ACTION up to '=', '@', '*' or the end */
    char act[32], arg[48] = "";
    const char *p = colon + 1;
    size_t n = strcspn(p, "=@*");
    if (n == 0 || n >= sizeof(act)) {
        snprintf(err, errlen, "GPUWIRE_FAULT rule \"%s\": missing action", text);
        return -1;
    }
    snprintf(act, sizeof(act), "%.*s", (int)n, p);
    p += n;
    if (*p == '=') {
        p++;
        n = strcspn(p, "@*");
        if (n == 0 || n >= sizeof(arg)) {
            snprintf(err, errlen, "GPUWIRE_FAULT rule \"%s\": empty or long argument", text);
            return -1;
        }
        snprintf(arg, sizeof(arg), "%.*s", (int)n, p);
        p += n;
    }
    r->first = 1;
    r->count = 1;
    while (*p) {
        char c = *p++;
        n = strcspn(p, "@*");
        char num[24];
        if (n == 0 || n >= sizeof(num)) {
            snprintf(err, errlen, "GPUWIRE_FAULT rule \"%s\": '%c' wants a number", text, c);
            return -1;
        }
        snprintf(num, sizeof(num), "%.*s", (int)n, p);
        p += n;
        char *end;
        unsigned long long v = strtoull(num, &end, 10);
        if (c == '*' && strcmp(num, "all") == 0) {
            r->count = UINT64_MAX;
            continue;
        }
        if (*end || v == 0) {
            snprintf(err, errlen, "GPUWIRE_FAULT rule \"%s\": \"%s\" after '%c' is not a number from 1 up%s",
                     text, num, c, c == '*' ? " (or all)" : "");
            return -1;
        }
        if (c == '@')
            r->first = v;
        else
            r->count = v;
    }
    for (int i = 0; g_acts[i].name; i++)
        if (strcmp(g_acts[i].name, act) == 0)
            r->act = g_acts[i].act;
    int ok;
    switch (r->act) {
    case GW_FAULT_FAIL: ok = strcmp(fam, "integ") != 0; break;
    case GW_FAULT_FLIP: ok = strcmp(fam, "integ") == 0; break;
    case GW_FAULT_SHORT:
    case GW_FAULT_EAGAIN:
    case GW_FAULT_RESET: ok = strcmp(fam, "sock") == 0; break;
    case GW_FAULT_STATUS:
    case GW_FAULT_DROP: ok = strcmp(r->point, "ibv.poll_cq") == 0; break;
    case GW_FAULT_QP_ERR: ok = strcmp(r->point, "ibv.post_send") == 0; break;
    default:
        snprintf(err, errlen,
                 "GPUWIRE_FAULT rule \"%s\": unknown action \"%s\" (fail, short, eagain, reset, status, "
                 "drop, qp_err, flip)",
                 text, act);
        return -1;
    }
    if (!ok) {
        snprintf(err, errlen, "GPUWIRE_FAULT rule \"%s\": point %s does not take action %s (docs/FAULTS.md)",
                 text, r->point, act);
        return -1;
    }
    if (r->act == GW_FAULT_STATUS && !arg[0]) {
        snprintf(err, errlen, "GPUWIRE_FAULT rule \"%s\": status wants a completion status (e.g. status=retry_exc)",
                 text);
        return -1;
    }
    if (arg[0]) {
        const named_t *t = r->act == GW_FAULT_STATUS ? g_wcstatus
                           : r->act == GW_FAULT_FAIL ? (strcmp(fam, "cuda") == 0 ? g_curesults : g_errnos)
                                                     : NULL;
        int bad = 0;
        if (r->act == GW_FAULT_EAGAIN || r->act == GW_FAULT_DROP || r->act == GW_FAULT_QP_ERR)
            bad = 1;
        else if (t)
            bad = lookup(t, arg, &r->arg) != 0 || r->arg <= 0;
        else {
            char *end;
            r->arg = strtol(arg, &end, 10);
            bad = *end || r->arg < 0;
        }
        if (bad) {
            snprintf(err, errlen, "GPUWIRE_FAULT rule \"%s\": bad argument \"%s\" for %s", text, arg, act);
            return -1;
        }
        r->has_arg = 1;
    }
    return 0;
}

static int matches(const rule_t *r, const char *point)
{
    return r->plen ? strncmp(r->point, point, r->plen) == 0 : strcmp(r->point, point) == 0;
}

static void report_at_exit(void)
{
    char buf[2048];
    if (!g_n)
        return;
    int unfired = gw_fault_report(buf, sizeof(buf));
    gw_log(unfired ? GW_LOG_WARN : GW_LOG_INFO, "GPUWIRE_FAULT at exit: %s", buf);
}

gw_status_t gw_fault_configure(const char *spec, char *err, size_t errlen)
{
    static int registered;
    if (!spec)
        spec = "";
    if (strlen(spec) >= sizeof(g_spec)) {
        snprintf(err, errlen, "GPUWIRE_FAULT: longer than %zu characters", sizeof(g_spec) - 1);
        return GW_ERR_CONFIG;
    }
    pthread_mutex_lock(&g_lock);
    if (strcmp(spec, g_spec) == 0) {
        pthread_mutex_unlock(&g_lock);
        return GW_OK;
    }
    rule_t rules[GW_FAULT_MAX_RULES];
    int n = 0;
    char copy[sizeof(g_spec)];
    snprintf(copy, sizeof(copy), "%s", spec);
    char *save = NULL;
    for (char *t = strtok_r(copy, "; \t\n", &save); t; t = strtok_r(NULL, "; \t\n", &save)) {
        if (n == GW_FAULT_MAX_RULES) {
            snprintf(err, errlen, "GPUWIRE_FAULT: more than %d rules", GW_FAULT_MAX_RULES);
            pthread_mutex_unlock(&g_lock);
            return GW_ERR_CONFIG;
        }
        if (parse_rule(t, &rules[n], err, errlen) != 0) {
            pthread_mutex_unlock(&g_lock);
            return GW_ERR_CONFIG;
        }
        n++;
    }
    memcpy(g_rules, rules, sizeof(rule_t) * (size_t)n);
    g_n = n;
    snprintf(g_spec, sizeof(g_spec), "%s", spec);
    gw_fault_on = n > 0;
    if (n && !registered) {
        registered = 1;
        atexit(report_at_exit);
    }
    pthread_mutex_unlock(&g_lock);
    if (n)
        gw_log(GW_LOG_WARN, "GPUWIRE_FAULT armed: %d fault rule(s) \"%s\" (faults are injected on purpose)", n,
               spec);
    return GW_OK;
}

int gw_fault_check(const char *point, gw_fault_t *f)
{
    int hit = 0;
    pthread_mutex_lock(&g_lock);
    /* every rule counts the call; the first one whose turn it is acts */
    for (int i = 0; i < g_n; i++) {
        rule_t *r = &g_rules[i];
        if (!matches(r, point))
            continue;
        uint64_t k = ++r->calls;
        if (!hit && k >= r->first && (r->count == UINT64_MAX || k - r->first < r->count)) {
            r->fired++;
            f->act = r->act;
            f->arg = r->arg;
            f->has_arg = r->has_arg;
            f->rule = i;
            hit = 1;
        }
    }
    pthread_mutex_unlock(&g_lock);
    if (hit)
        gw_log(GW_LOG_INFO, "GPUWIRE_FAULT: %s fired at %s", g_rules[f->rule].text, point);
    return hit;
}

int gw_fault_wants(const char *point)
{
    size_t pl = strlen(point);
    int prefix = pl && point[pl - 1] == '*';
    int want = 0;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < g_n && !want; i++) {
        const rule_t *r = &g_rules[i];
        want = prefix ? strncmp(r->point, point, pl - 1) == 0 || (r->plen && strncmp(point, r->point, r->plen) == 0)
                      : matches(r, point);
    }
    pthread_mutex_unlock(&g_lock);
    return want;
}

int gw_fault_rules(void)
{
    return g_n;
}

uint64_t gw_fault_fired(int rule)
{
    pthread_mutex_lock(&g_lock);
    uint64_t v = rule >= 0 && rule < g_n ? g_rules[rule].fired : 0;
    pthread_mutex_unlock(&g_lock);
    return v;
}

uint64_t gw_fault_calls(int rule)
{
    pthread_mutex_lock(&g_lock);
    uint64_t v = rule >= 0 && rule < g_n ? g_rules[rule].calls : 0;
    pthread_mutex_unlock(&g_lock);
    return v;
}

const char *gw_fault_rule_text(int rule)
{
    return rule >= 0 && rule < g_n ? g_rules[rule].text : "";
}

int gw_fault_report(char *buf, size_t len)
{
    size_t used = 0;
    int unfired = 0;
    if (len)
        buf[0] = '\0';
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < g_n; i++) {
        const rule_t *r = &g_rules[i];
        unfired += r->fired == 0;
        if (used < len)
            used += (size_t)snprintf(buf + used, len - used, "%s%s fired %llu of %llu calls%s", i ? "; " : "",
                                     r->text, (unsigned long long)r->fired, (unsigned long long)r->calls,
                                     r->fired ? "" : " (NEVER FIRED)");
    }
    pthread_mutex_unlock(&g_lock);
    return unfired;
}
