/* SPDX-License-Identifier: Apache-2.0 */
/* transports.h - transport ids, from the list in transports.def (core layer:
 * memory regions, the wire formats and the transports all use them). */
#ifndef GW_CORE_TRANSPORTS_H
#define GW_CORE_TRANSPORTS_H

/* GW_TL_VERBS, ...: wire ids, never renumbered (transports.def) */
enum gw_tl_id {
#define GW_TL(id, name, wire_id, built) GW_TL_##id = wire_id,
#include "core/transports.def"
#undef GW_TL
};

/* how many ids there are; with dense ids, one past the largest */
enum {
    GW_TL_COUNT = 0
#define GW_TL(id, name, wire_id, built) +1
#include "core/transports.def"
#undef GW_TL
};

#define GW_TL(id, name, wire_id, built) \
    _Static_assert(wire_id >= 0 && wire_id < GW_TL_COUNT, "transports.def: ids must be dense from 0 (" #name ")");
#include "core/transports.def"
#undef GW_TL

#endif
