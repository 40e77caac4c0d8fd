/* settings_check.c - every GPUWIRE_* value must parse, whichever transports
 * are allowed (core layer).
 *
 * A transport reads its own settings when it opens; one that is not allowed
 * never opens, so a bad value of its settings used to pass unnoticed until
 * the day it was allowed.  gw_settings_check() runs at gw_context_create()
 * and checks each value's syntax and range here, once for all.  The ranges
 * are the ones the readers use (tcp_iface.c, verbs_iface.c, staging.c, context.c,
 * core.c); a reader may still refuse a value for reasons only it knows.
 * GPUWIRE_LOG_LEVEL (core.c) and GPUWIRE_TRANSPORTS (context.c) are checked
 * where they are parsed, which happens whatever is allowed. */
#include <stdio.h>
#include <string.h>

#include "settings.h"

typedef enum { K_ANY, K_INT, K_SIZE, K_WORDS } kind_t;

typedef struct rule {
    gw_setting_id_t id;
    kind_t kind;
    uint64_t min, max;   /* K_INT, K_SIZE */
    const char *words;   /* K_WORDS: "a|b|c"; K_INT/K_SIZE: extra words accepted ("auto") */
} rule_t;

static const rule_t g_rules[] = {
    {GW_SET_CONNECT_TIMEOUT_MS, K_INT, 1, 3600000, NULL},
    {GW_SET_PEER_TIMEOUT_MS, K_INT, 1, 86400000, NULL},
    {GW_SET_SPIN_US, K_INT, 0, 10000000, NULL},
    {GW_SET_TCP_STREAMS, K_INT, 1, 16, "auto"},
    {GW_SET_TCP_STRIPE_MIN, K_SIZE, 1, UINT64_MAX, NULL},
    {GW_SET_TCP_CHUNK, K_SIZE, 4096, 1ull << 30, NULL},
    {GW_SET_TCP_EAGER_MAX, K_SIZE, 0, 64ull << 20, NULL},
    {GW_SET_TCP_THREADS, K_INT, 0, 16, "auto"},
    {GW_SET_TCP_THREAD_MIN, K_SIZE, 1, UINT64_MAX, NULL},
    {GW_SET_TCP_SOCKBUF, K_SIZE, 0, 1ull << 30, NULL},
    {GW_SET_IB_GID_INDEX, K_INT, 0, 255, "auto|"},
    {GW_SET_IB_TIMEOUT, K_INT, 1, 31, NULL},
    {GW_SET_IB_RETRY_CNT, K_INT, 0, 7, NULL},
    {GW_SET_IB_QPS, K_INT, 1, 8, NULL},
    {GW_SET_IB_SPLIT_MIN, K_SIZE, 1, UINT64_MAX, NULL},
    {GW_SET_IB_RDV, K_WORDS, 0, 0, "auto|read"},
    {GW_SET_IB_REG_CACHE, K_INT, 0, 1, NULL},
    {GW_SET_IB_MAX_MR, K_SIZE, 0, UINT64_MAX, NULL},
    {GW_SET_GPU_REG, K_WORDS, 0, 0, "auto|dmabuf|peermem|staging"},
    {GW_SET_STAGING_CHUNK, K_SIZE, 4096, 1ull << 30, NULL},
    {GW_SET_STAGING_BUFFERS, K_INT, 1, 64, NULL},
    {GW_SET_INTRA, K_WORDS, 0, 0, "auto|force|off"},
};

/* Is v one of the '|'-separated words ("" matches an empty word)? */
static int one_of(const char *v, const char *words)
{
    size_t n = strlen(v);
    for (const char *w = words; w;) {
        const char *bar = strchr(w, '|');
        size_t wl = bar ? (size_t)(bar - w) : strlen(w);
        if (wl == n && !strncmp(v, w, n))
            return 1;
        w = bar ? bar + 1 : NULL;
    }
    return 0;
}

static void list_words(const char *words, char *buf, size_t len)
{
    size_t o = 0;
    for (const char *w = words; w && o + 1 < len;) {
        const char *bar = strchr(w, '|');
        int wl = bar ? (int)(bar - w) : (int)strlen(w);
        if (wl)
            o += (size_t)snprintf(buf + o, len - o, "%s%.*s", o ? ", " : "", wl, w);
        if (o >= len)
            break;
        w = bar ? bar + 1 : NULL;
    }
}

gw_status_t gw_settings_check(const gw_settings_t *s, char *err, size_t errlen)
{
    for (size_t i = 0; i < sizeof(g_rules) / sizeof(g_rules[0]); i++) {
        const rule_t *r = &g_rules[i];
        const char *v = gw_settings_str(s, r->id);
        if (r->words && one_of(v, r->words))
            continue;
        gw_status_t st = GW_OK;
        char why[256];
        if (r->kind == K_INT) {
            long x;
            st = gw_settings_int(s, r->id, (long)r->min, (long)r->max, &x, why, sizeof(why));
        } else if (r->kind == K_SIZE) {
            uint64_t x;
            st = gw_settings_size(s, r->id, r->min, r->max, &x, why, sizeof(why));
        } else if (r->kind == K_WORDS) {
            char w[128];
            list_words(r->words, w, sizeof(w));
            snprintf(why, sizeof(why), "%s=\"%s\": expected one of %s", gw_settings_name(r->id), v, w);
            st = GW_ERR_CONFIG;
        }
        if (st != GW_OK) {
            if (r->words && r->kind != K_WORDS) {
                char w[128];
                list_words(r->words, w, sizeof(w));
                snprintf(err, errlen, "%s, or %s", why, w);
            } else {
                snprintf(err, errlen, "%s", why);
            }
            return GW_ERR_CONFIG;
        }
    }
    return GW_OK;
}
