/* SPDX-License-Identifier: Apache-2.0 */
/* settings.h - the GPUWIRE_* registry (core layer). */
#ifndef GW_CORE_SETTINGS_H
#define GW_CORE_SETTINGS_H

#include <stddef.h>
#include <stdint.h>
#include "gpuwire.h"

typedef enum gw_setting_id {
#define X(id, name, kind, min, max, words, def, help) GW_SET_##id,
#include "settings.def"
#undef X
    GW_SET_COUNT
} gw_setting_id_t;

typedef struct gw_settings {
    char *value[GW_SET_COUNT]; /* resolved: env, else default; owned */
    unsigned from_env[GW_SET_COUNT];
} gw_settings_t;

/* Resolves every setting from the environment; warns (once per name) about
 * unknown GPUWIRE_* variables, suggesting the nearest known name. */
gw_status_t gw_settings_load(gw_settings_t *s, char *err, size_t errlen);
void gw_settings_free(gw_settings_t *s);

const char *gw_settings_name(gw_setting_id_t id);
const char *gw_settings_str(const gw_settings_t *s, gw_setting_id_t id);
/* A setting's value for code that runs without a context (the tool, the
 * topology and doctor of a process): from the environment now, else its
 * default.  The registry is the only reader of GPUWIRE_* variables. */
const char *gw_settings_env(gw_setting_id_t id);
/* A test hook (GW_TEST_*: not a setting, not listed by `gpuwire info`, for
 * the project's tests only), or NULL when unset.  Here so that the registry
 * stays the one reader of the environment. */
const char *gw_settings_test_hook(const char *name);
/* Another program's variable that gpuwire code must respect, or NULL when
 * unset: only the names listed in settings.c (NCCL_NET_GDR_LEVEL, which the
 * NCCL plugin leaves alone when the user set it).  Never a GPUWIRE_* setting. */
const char *gw_settings_foreign(const char *name);
/* Whether a setting came from the environment (s NULL: the process's now). */
int gw_settings_is_env(const gw_settings_t *s, gw_setting_id_t id);
/* The root of the sysfs tree (GPUWIRE_SYSFS_ROOT, else /sys; empty counts
 * as unset): the one resolver, used by mem, topo, verbs and the doctor.
 * s NULL: the process environment (gw_settings_env). */
const char *gw_settings_sysfs_root(const gw_settings_t *s);
/* What a setting accepts, as the registry says (settings.def). */
typedef enum gw_setting_kind { GW_SK_TEXT, GW_SK_INT, GW_SK_SIZE, GW_SK_WORDS } gw_setting_kind_t;
typedef struct gw_setting_rule {
    gw_setting_kind_t kind;
    uint64_t min, max; /* INT and SIZE: the range (INT: as long) */
    const char *words; /* '|'-separated words also accepted; "" none */
} gw_setting_rule_t;
const gw_setting_rule_t *gw_settings_rule(gw_setting_id_t id);
/* Parse an INT or SIZE setting within the registry's range; on failure
 * write "GPUWIRE_X=value: expected ..." into err (GW_ERR_CONFIG).  A value
 * that is one of the setting's words ("auto") is the caller's to test first:
 * here it is an error.  Sizes accept K, M, G, T suffixes (powers of 1024). */
gw_status_t gw_settings_int(const gw_settings_t *s, gw_setting_id_t id, long *out, char *err,
                            size_t errlen);
gw_status_t gw_settings_size(const gw_settings_t *s, gw_setting_id_t id, uint64_t *out,
                             char *err, size_t errlen);
/* Is v one of the setting's words (case-insensitive)? */
int gw_settings_is_word(gw_setting_id_t id, const char *v);
/* Checks that every value parses and lies in its range, whichever transports
 * will read it (settings_check.c); GW_ERR_CONFIG with the reason in err. */
gw_status_t gw_settings_check(const gw_settings_t *s, char *err, size_t errlen);
/* Parses "4K", "1M", "3G", "123" into bytes; -1 on error. */
int gw_parse_size(const char *str, uint64_t *out);

#endif
