/* SPDX-License-Identifier: Apache-2.0 */
/* verbs_stage.h - what the two halves of the staging rung share (not
 * included outside verbs_stage.c and verbs_stage_own.c): the chunk
 * request's layout names, the staging engines and their slots' MRs, and
 * the owner's job step that the initiator's progress drives. */
#ifndef GW_TRANSPORT_VERBS_STAGE_H
#define GW_TRANSPORT_VERBS_STAGE_H

#include "transport/verbs/verbs.h"

#define SREQ_BYTES GW_VERBS_SREQ_BYTES
#define SREQ_EAGER 1u                             /* p[3]: the payload follows the request */
#define SREQ_LIST 2u                              /* p[3]: a piece list follows the request */
#define SBLIST_MAGIC GW_VERBS_SBLIST_MAGIC
#define SBLIST_VERSION GW_VERBS_SBLIST_VERSION
#define SBLIST_PIECE GW_VERBS_SBLIST_PIECE
#define SBLIST_MAX GW_VERBS_SBLIST_MAX
#define STG_EAGER_MAX (GW_VERBS_SLOT - SREQ_BYTES) /* puts this small to a staged owner carry their data */

/* The staging engine of CUDA device `device` for role 0 (operations
 * started here) or 1 (serving the peer), made on first use. */
gw_status_t gw_verbs_stg_engine(gw_verbs_iface_t *vif, int device, int role, gw_verbs_stgeng_t **out);
/* The slot's MR (registered on first use: LOCAL_WRITE, REMOTE_READ, REMOTE_WRITE). */
struct ibv_mr *gw_verbs_stg_slot_mr(gw_verbs_iface_t *vif, gw_verbs_stgeng_t *e, gw_stage_slot_t *s);
/* verbs_stage_own.c: advances the peer's chunk request in job ji. */
void gw_verbs_stg_job_step(gw_verbs_ep_t *ep, batch_t *b, unsigned ji);

#endif
