/* SPDX-License-Identifier: Apache-2.0 */
/* intra_rkey.c - the intra part of a packed remote key, checked once at
 * gw_rkey_unpack() (the rkey_unpack op, transport/base/tl.h).
 *
 * The part is 12 bytes: u32 slot of the owner's region table, u64 the
 * region id that slot must hold (the key's own id: a part naming another
 * region is forged).  A key without one is accepted here: its owner could not
 * export the region, and the operation says so.  Peers send these; nothing is
 * trusted.  The parsed part goes into rk->tl_key (gw_intra_rkey_t), which
 * the operations read (intra_copy.c, intra_rkey_capture; intra_batch.c);
 * the owner's table still has the last word on the slot's contents.
 */
#include "transport/intra/intra.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

gw_status_t gw_intra_rkey_unpack(gw_tl_iface_t *iface, const uint8_t *blob, size_t len, gw_rkey_t *rk,
                                 char *why, size_t whylen)
{
    (void)iface;
    gw_intra_rkey_t *ik = (gw_intra_rkey_t *)(void *)rk->tl_key;
    memset(ik, 0, sizeof(*ik));
    if (len == 0)
        return GW_OK;
    if (len != 12) {
        snprintf(why, whylen, "intra key part of %zu bytes (expected 12: slot, region id)", len);
        return GW_ERR_INVALID_KEY;
    }
    uint32_t si = gw_get_u32(blob);
    uint64_t id = gw_get_u64(blob + 4);
    if (si >= GW_INTRA_SLOTS) {
        snprintf(why, whylen, "intra key part names slot %" PRIu32 " (the region table has %d)", si,
                 GW_INTRA_SLOTS);
        return GW_ERR_INVALID_KEY;
    }
    if (id != rk->id) {
        snprintf(why, whylen, "intra key part names region %" PRIu64 ", the key region %" PRIu64, id, rk->id);
        return GW_ERR_INVALID_KEY;
    }
    ik->present = 1;
    ik->slot = si;
    ik->id = id;
    return GW_OK;
}
