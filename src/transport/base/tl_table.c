/* SPDX-License-Identifier: Apache-2.0 */
/* tl_table.c - the transports compiled in, made from core/transports.def,
 * and the check a table passes before the context uses it. */
#include <stdio.h>
#include <string.h>

#include "transport/base/tl.h"

/* A transport built in is referenced strongly (a weak reference would not
 * pull it out of the static library); one that is not resolves to NULL. */
#define TL_EXTERN_1(name) extern const gw_tl_ops_t gw_tl_##name##_ops;
#define TL_EXTERN_0(name) extern const gw_tl_ops_t gw_tl_##name##_ops __attribute__((weak));
#define TL_EXTERN_(name, built) TL_EXTERN_##built(name)
#define TL_EXTERN(name, built) TL_EXTERN_(name, built) /* expands built (GW_HAVE_VERBS) first */
#define GW_TL(id, name, wire_id, built) TL_EXTERN(name, built)
#include "core/transports.def"
#undef GW_TL

const gw_tl_ops_t *const gw_tl_table[GW_TL_COUNT] = {
#define GW_TL(id, name, wire_id, built) [GW_TL_##id] = &gw_tl_##name##_ops,
#include "core/transports.def"
#undef GW_TL
};

const char *const gw_tl_names[GW_TL_COUNT] = {
#define GW_TL(id, name, wire_id, built) [GW_TL_##id] = #name,
#include "core/transports.def"
#undef GW_TL
};

gw_status_t gw_tl_check_ops(const gw_tl_ops_t *o, int id, char *why, size_t whylen)
{
    if (o->size != sizeof(gw_tl_ops_t)) {
        snprintf(why, whylen, "its ops table is %zu bytes, this build's interface (tl.h) %zu: built against "
                 "another version", o->size, sizeof(gw_tl_ops_t));
        return GW_ERR_INVALID;
    }
    if (id < 0 || id >= GW_TL_COUNT || !o->name || strcmp(o->name, gw_tl_names[id]) != 0) {
        snprintf(why, whylen, "its ops table is named \"%s\", its slot %d in core/transports.def \"%s\"",
                 o->name ? o->name : "(null)", id, id >= 0 && id < GW_TL_COUNT ? gw_tl_names[id] : "?");
        return GW_ERR_INVALID;
    }
    /* every slot, in tl.h's order: a new slot is added here too */
#define S(f)                                                   \
    if (!o->f) {                                               \
        snprintf(why, whylen, "its ops table has no %s", #f); \
        return GW_ERR_INVALID;                                 \
    }
    S(iface_open) S(iface_close) S(iface_describe) S(mem_reg) S(mem_dereg) S(rkey_pack)
    S(rkey_unpack) S(rkey_release) S(caps)
    S(ep_prepare) S(ep_reachable) S(ep_connect) S(ep_join) S(ep_close) S(ep_destroy)
    S(ep_describe) S(submit) S(rma_iov) S(am_send) S(rma_now) S(send_now) S(put_direct) S(ep_progress) S(recv_matched) S(cancel)
#undef S
    return GW_OK;
}
