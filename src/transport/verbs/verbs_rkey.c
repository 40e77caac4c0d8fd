/* SPDX-License-Identifier: Apache-2.0 */
/* verbs_rkey.c - the verbs part of a packed remote key (see verbs.h):
 * version 1 lists the MR pieces of a registered region, version 2 marks a GPU
 * region on the staging rung.  Peers send these: the parser trusts nothing
 * (tests/fuzz/fuzz_verbs_rkey.c). */
#include "transport/verbs/verbs.h"

#include <stdio.h>
#include <string.h>

gw_status_t gw_verbs_rkey_parse(const uint8_t *b, size_t len, gw_verbs_rkey_info_t *out, char *why,
                                size_t whylen)
{
    memset(out, 0, sizeof(*out));
    if (!b || len < 4) {
        snprintf(why, whylen, "verbs key part of %zu bytes is shorter than its 4-byte header", len);
        return GW_ERR_INVALID_KEY;
    }
    out->version = b[0];
    if (b[2] || b[3]) {
        snprintf(why, whylen, "verbs key: reserved bytes 0x%02x%02x are not zero", b[3], b[2]);
        return GW_ERR_INVALID_KEY;
    }
    if (b[0] == GW_VERBS_RKEY_STAGED) {
        if (b[1] != 0 || len != 4) {
            snprintf(why, whylen, "staged verbs key: flags 0x%x, %zu bytes (expected 0 and 4)", b[1], len);
            return GW_ERR_INVALID_KEY;
        }
        return GW_OK;
    }
    if (b[0] != GW_VERBS_RKEY_MR) {
        snprintf(why, whylen, "verbs key version %u (this build knows 1 and 2)", b[0]);
        return GW_ERR_INVALID_KEY;
    }
    int n = b[1];
    if (n > GW_VERBS_MAX_MRS || len != 20 + 4 * (size_t)n) {
        snprintf(why, whylen, "verbs key with %d MR pieces in %zu bytes (at most %d, 20 + 4 each)", n, len,
                 GW_VERBS_MAX_MRS);
        return GW_ERR_INVALID_KEY;
    }
    out->n = n;
    out->base = gw_get_u64(b + 4);
    out->chunk = gw_get_u64(b + 12);
    if (n > 0 && out->chunk == 0) {
        snprintf(why, whylen, "verbs key with %d MR pieces of 0 bytes", n);
        return GW_ERR_INVALID_KEY;
    }
    for (int i = 0; i < n; i++)
        out->rkey[i] = gw_get_u32(b + 20 + 4 * i);
    return GW_OK;
}

size_t gw_verbs_rkey_format(const gw_verbs_rkey_info_t *info, uint8_t *buf, size_t cap)
{
    if (info->version == GW_VERBS_RKEY_STAGED) {
        if (cap < 4)
            return 0;
        buf[0] = GW_VERBS_RKEY_STAGED;
        buf[1] = buf[2] = buf[3] = 0;
        return 4;
    }
    if (info->n < 0 || info->n > GW_VERBS_MAX_MRS)
        return 0;
    size_t need = 20 + 4 * (size_t)info->n;
    if (cap < need)
        return 0;
    buf[0] = GW_VERBS_RKEY_MR;
    buf[1] = (uint8_t)info->n;
    buf[2] = buf[3] = 0;
    gw_put_u64(buf + 4, info->base);
    gw_put_u64(buf + 12, info->chunk);
    for (int i = 0; i < info->n; i++)
        gw_put_u32(buf + 20 + 4 * i, info->rkey[i]);
    return need;
}

_Static_assert(sizeof(gw_verbs_rkey_info_t) <= GW_RKEY_TL_KEY_MAX, "the parsed verbs key part fits gw_rkey_t.tl_key");

gw_status_t gw_verbs_rkey_unpack(gw_tl_iface_t *iface, const uint8_t *blob, size_t len, gw_rkey_t *rk,
                                 char *why, size_t whylen)
{
    (void)iface;
    gw_verbs_rkey_info_t ki;
    memset(&ki, 0, sizeof(ki)); /* version 0: no verbs part (refused at the operation, as before) */
    if (len) {
        gw_status_t st = gw_verbs_rkey_parse(blob, len, &ki, why, whylen);
        if (st != GW_OK)
            return st;
    }
    memcpy(rk->tl_key, &ki, sizeof(ki));
    return GW_OK;
}
