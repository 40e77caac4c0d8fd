/* SPDX-License-Identifier: Apache-2.0 */
/* settings_check.c - every GPUWIRE_* value must parse, whichever transports
 * are allowed (core layer).
 *
 * A transport reads its own settings when it opens; one that is not allowed
 * never opens, so a bad value of its settings would pass unnoticed until
 * the day it is allowed.  gw_settings_check() runs at gw_context_create()
 * and checks each value's syntax and range here, once for all, by the
 * registry's kind, range and words (settings.def), which the readers parse
 * with too.  TEXT settings (GPUWIRE_TRANSPORTS, addresses, paths) are
 * checked by their readers. */
#include <stdio.h>
#include <string.h>

#include "settings.h"

gw_status_t gw_settings_check(const gw_settings_t *s, char *err, size_t errlen)
{
    for (size_t i = 0; i < GW_SET_COUNT; i++) {
        gw_setting_id_t id = (gw_setting_id_t)i;
        const gw_setting_rule_t *r = gw_settings_rule(id);
        const char *v = gw_settings_str(s, id);
        if (r->kind == GW_SK_TEXT || gw_settings_is_word(id, v))
            continue;
        gw_status_t st = GW_OK;
        if (r->kind == GW_SK_INT) {
            long x;
            st = gw_settings_int(s, id, &x, err, errlen);
        } else if (r->kind == GW_SK_SIZE) {
            uint64_t x;
            st = gw_settings_size(s, id, &x, err, errlen);
        } else {
            snprintf(err, errlen, "%s=\"%s\": expected %s", gw_settings_name(id), v,
                     gw_setting_at(i)->accepts);
            st = GW_ERR_CONFIG;
        }
        if (st != GW_OK)
            return GW_ERR_CONFIG;
    }
    return GW_OK;
}
