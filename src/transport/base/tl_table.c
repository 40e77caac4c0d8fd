/* tl_table.c - the transports compiled in.  A transport that is not linked
 * into this build resolves to NULL (weak reference). */
#include "transport/base/tl.h"

#if GW_HAVE_VERBS
/* strong when built: a weak reference would not pull it out of the static library */
extern const gw_tl_ops_t gw_tl_verbs_ops;
#else
extern const gw_tl_ops_t gw_tl_verbs_ops __attribute__((weak));
#endif
extern const gw_tl_ops_t gw_tl_intra_ops; /* always built (no build-time dependency) */
extern const gw_tl_ops_t gw_tl_tcp_ops;

const gw_tl_ops_t *const gw_tl_table[GW_TL_COUNT] = {
    [GW_TL_VERBS] = &gw_tl_verbs_ops,
    [GW_TL_INTRA] = &gw_tl_intra_ops,
    [GW_TL_TCP] = &gw_tl_tcp_ops,
};

const char *const gw_tl_names[GW_TL_COUNT] = {
    [GW_TL_VERBS] = "verbs",
    [GW_TL_INTRA] = "intra",
    [GW_TL_TCP] = "tcp",
};
