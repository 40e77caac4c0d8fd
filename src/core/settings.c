/* settings.c - resolve GPUWIRE_* settings from the environment. */
#include "settings.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

extern char **environ;

static const gw_setting_desc_t g_settings[] = {
#define X(id, name, def, help) {name, def, help},
#include "settings.def"
#undef X
};

const gw_setting_desc_t *gw_setting_at(size_t i)
{
    return i < GW_SET_COUNT ? &g_settings[i] : NULL;
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

gw_status_t gw_settings_int(const gw_settings_t *s, gw_setting_id_t id, long min, long max,
                            long *out, char *err, size_t errlen)
{
    const char *v = gw_settings_str(s, id);
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end != '\0' || x < min || x > max) {
        snprintf(err, errlen, "%s=\"%s\": expected an integer from %ld to %ld",
                 g_settings[id].name, v, min, max);
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

gw_status_t gw_settings_size(const gw_settings_t *s, gw_setting_id_t id, uint64_t min,
                             uint64_t max, uint64_t *out, char *err, size_t errlen)
{
    const char *v = gw_settings_str(s, id);
    uint64_t x;
    if (gw_parse_size(v, &x) != 0 || x < min || x > max) {
        snprintf(err, errlen,
                 "%s=\"%s\": expected a size from %llu to %llu bytes (K/M/G suffixes allowed)",
                 g_settings[id].name, v, (unsigned long long)min, (unsigned long long)max);
        return GW_ERR_CONFIG;
    }
    *out = x;
    return GW_OK;
}
