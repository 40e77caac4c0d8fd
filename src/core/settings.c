/* SPDX-License-Identifier: Apache-2.0 */
/* settings.c - resolve GPUWIRE_* settings from the environment. */
#include "settings.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "log.h"

extern char **environ;

/* the registry as written (settings.def) */
typedef struct raw_rule {
    gw_setting_kind_t kind;
    const char *min, *max, *words;
} raw_rule_t;

static gw_setting_desc_t g_settings[] = {
#define X(id, name, kind, min, max, words, def, help) {name, def, help, NULL},
#include "settings.def"
#undef X
};
static const raw_rule_t g_raw[] = {
#define X(id, name, kind, min, max, words, def, help) {GW_SK_##kind, min, max, words},
#include "settings.def"
#undef X
};
/* resolved once: numeric ranges and the "accepts" text of each setting */
static gw_setting_rule_t g_rules[GW_SET_COUNT];
static char g_accepts[GW_SET_COUNT][160];
static pthread_once_t g_rules_once = PTHREAD_ONCE_INIT;

/* "a|b|" -> "a, b or empty" */
static void list_words(const char *words, char *buf, size_t len)
{
    size_t o = 0, n = 0, total = 0;
    for (const char *w = words; *w; w += strcspn(w, "|") + (w[strcspn(w, "|")] ? 1 : 0))
        total++;
    if (*words && words[strlen(words) - 1] == '|')
        total++;
    buf[0] = '\0';
    const char *w = words;
    for (size_t i = 0; i < total && o + 1 < len; i++) {
        size_t wl = strcspn(w, "|");
        const char *sep = n == 0 ? "" : (i + 1 == total ? " or " : ", ");
        if (wl)
            o += (size_t)snprintf(buf + o, len - o, "%s%.*s", sep, (int)wl, w);
        else
            o += (size_t)snprintf(buf + o, len - o, "%sempty", sep);
        n++;
        w += wl + (w[wl] ? 1 : 0);
    }
}

static void resolve_rules(void)
{
    for (size_t i = 0; i < GW_SET_COUNT; i++) {
        const raw_rule_t *r = &g_raw[i];
        gw_setting_rule_t *o = &g_rules[i];
        char words[96], *t = g_accepts[i];
        size_t tl = sizeof(g_accepts[i]);
        o->kind = r->kind;
        o->words = r->words;
        list_words(r->words, words, sizeof(words));
        if (r->kind == GW_SK_INT) {
            o->min = (uint64_t)strtol(r->min, NULL, 10);
            o->max = (uint64_t)strtol(r->max, NULL, 10);
            snprintf(t, tl, "integer %s..%s%s%s", r->min, r->max, *words ? ", or " : "", words);
        } else if (r->kind == GW_SK_SIZE) {
            /* written in the registry; a unit test parses every one */
            if (gw_parse_size(r->min, &o->min) != 0)
                o->min = 0;
            if (!*r->max || gw_parse_size(r->max, &o->max) != 0)
                o->max = UINT64_MAX;
            if (*r->max)
                snprintf(t, tl, "size %s..%s (K/M/G/T)%s%s", r->min, r->max, *words ? ", or " : "",
                         words);
            else
                snprintf(t, tl, "size >= %s (K/M/G/T)%s%s", r->min, *words ? ", or " : "", words);
        } else if (r->kind == GW_SK_WORDS) {
            snprintf(t, tl, "one of %s", words);
        } else {
            snprintf(t, tl, "text");
        }
        g_settings[i].accepts = t;
    }
}

const gw_setting_rule_t *gw_settings_rule(gw_setting_id_t id)
{
    if ((unsigned)id >= GW_SET_COUNT)
        return NULL;
    pthread_once(&g_rules_once, resolve_rules);
    return &g_rules[id];
}

const gw_setting_desc_t *gw_setting_at(size_t i)
{
    if (i >= GW_SET_COUNT)
        return NULL;
    pthread_once(&g_rules_once, resolve_rules);
    return &g_settings[i];
}

int gw_settings_is_word(gw_setting_id_t id, const char *v)
{
    if ((unsigned)id >= GW_SET_COUNT || !v)
        return 0;
    const char *words = g_raw[id].words;
    size_t n = strlen(v);
    if (!*words)
        return 0;
    for (const char *w = words;;) {
        size_t wl = strcspn(w, "|");
        if (wl == n && !strncasecmp(v, w, n))
            return 1;
        if (!w[wl])
            return 0;
        w += wl + 1;
    }
}

const char *gw_settings_name(gw_setting_id_t id)
{
    return (unsigned)id < GW_SET_COUNT ? g_settings[id].name : "?";
}

/* Levenshtein distance, capped at small strings; used only for suggestions. */
static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63)
        return 64;
    size_t prev[64], cur[64];
    for (size_t j = 0; j <= lb; j++)
        prev[j] = j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
        memcpy(prev, cur, sizeof(size_t) * (lb + 1));
    }
    return prev[lb];
}

static void warn_unknown(void)
{
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "GPUWIRE_", 8) != 0)
            continue;
        const char *eq = strchr(*e, '=');
        size_t n = eq ? (size_t)(eq - *e) : strlen(*e);
        char name[128];
        if (n >= sizeof(name))
            n = sizeof(name) - 1;
        memcpy(name, *e, n);
        name[n] = '\0';
        int known = 0;
        size_t best = 64, best_i = 0;
        for (size_t i = 0; i < GW_SET_COUNT; i++) {
            if (strcmp(name, g_settings[i].name) == 0) {
                known = 1;
                break;
            }
            size_t d = edit_distance(name, g_settings[i].name);
            if (d < best) {
                best = d;
                best_i = i;
            }
        }
        if (known)
            continue;
        if (best <= 3)
            gw_log(GW_LOG_WARN, "unknown setting %s in the environment; did you mean %s?", name,
                   g_settings[best_i].name);
        else
            gw_log(GW_LOG_WARN, "unknown setting %s in the environment (gpuwire info lists them)",
                   name);
    }
}

gw_status_t gw_settings_load(gw_settings_t *s, char *err, size_t errlen)
{
    memset(s, 0, sizeof(*s));
    for (size_t i = 0; i < GW_SET_COUNT; i++) {
        const char *env = getenv(g_settings[i].name);
        s->value[i] = strdup(env ? env : g_settings[i].default_value);
        s->from_env[i] = env != NULL;
        if (!s->value[i]) {
            snprintf(err, errlen, "out of memory reading settings");
            gw_settings_free(s);
            return GW_ERR_NOMEM;
        }
    }
    warn_unknown();
    return GW_OK;
}

void gw_settings_free(gw_settings_t *s)
{
    for (size_t i = 0; i < GW_SET_COUNT; i++) {
        free(s->value[i]);
        s->value[i] = NULL;
    }
}

const char *gw_settings_str(const gw_settings_t *s, gw_setting_id_t id)
{
    return s->value[id] ? s->value[id] : g_settings[id].default_value;
}

const char *gw_settings_env(gw_setting_id_t id)
{
    if ((unsigned)id >= GW_SET_COUNT)
        return "";
    const char *env = getenv(g_settings[id].name);
    return env ? env : g_settings[id].default_value;
}

const char *gw_settings_test_hook(const char *name)
{
    if (!name || strncmp(name, "GW_TEST_", 8) != 0)
        return NULL;
    return getenv(name);
}

const char *gw_settings_foreign(const char *name)
{
    static const char *const known[] = {"NCCL_NET_GDR_LEVEL"};
    for (size_t i = 0; name && i < sizeof(known) / sizeof(known[0]); i++)
        if (strcmp(name, known[i]) == 0)
            return getenv(name);
    return NULL;
}

int gw_settings_is_env(const gw_settings_t *s, gw_setting_id_t id)
{
    if ((unsigned)id >= GW_SET_COUNT)
        return 0;
    return s ? s->from_env[id] != 0 : getenv(g_settings[id].name) != NULL;
}

const char *gw_settings_sysfs_root(const gw_settings_t *s)
{
    const char *v = s ? gw_settings_str(s, GW_SET_SYSFS_ROOT) : gw_settings_env(GW_SET_SYSFS_ROOT);
    return v && v[0] ? v : g_settings[GW_SET_SYSFS_ROOT].default_value;
}

gw_status_t gw_settings_int(const gw_settings_t *s, gw_setting_id_t id, long *out, char *err,
                            size_t errlen)
{
    const gw_setting_rule_t *r = gw_settings_rule(id);
    const char *v = gw_settings_str(s, id);
    long min = (long)r->min, max = (long)r->max;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (r->kind != GW_SK_INT || errno || end == v || *end != '\0' || x < min || x > max) {
        snprintf(err, errlen, "%s=\"%s\": expected %s", g_settings[id].name, v,
                 g_settings[id].accepts);
        return GW_ERR_CONFIG;
    }
    *out = x;
    return GW_OK;
}

int gw_parse_size(const char *str, uint64_t *out)
{
    if (!str || !*str || !isdigit((unsigned char)*str))
        return -1;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(str, &end, 10);
    if (errno)
        return -1;
    unsigned shift = 0;
    switch (*end) {
    case '\0': break;
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    case 't': case 'T': shift = 40; end++; break;
    default: return -1;
    }
    if (*end == 'i' || *end == 'I')
        end++;
    if (*end == 'b' || *end == 'B')
        end++;
    if (*end != '\0')
        return -1;
    if (shift && x > (UINT64_MAX >> shift))
        return -1;
    *out = (uint64_t)x << shift;
    return 0;
}

gw_status_t gw_settings_size(const gw_settings_t *s, gw_setting_id_t id, uint64_t *out,
                             char *err, size_t errlen)
{
    const gw_setting_rule_t *r = gw_settings_rule(id);
    const char *v = gw_settings_str(s, id);
    uint64_t x;
    if (r->kind != GW_SK_SIZE || gw_parse_size(v, &x) != 0 || x < r->min || x > r->max) {
        snprintf(err, errlen, "%s=\"%s\": expected %s", g_settings[id].name, v,
                 g_settings[id].accepts);
        return GW_ERR_CONFIG;
    }
    *out = x;
    return GW_OK;
}
