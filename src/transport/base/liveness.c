/* liveness.c - peer-liveness verdicts (liveness.h). */
#include "transport/base/liveness.h"

gw_live_t gw_liveness_judge(gw_ep_base_t *b, int busy, uint64_t now, uint64_t *last_ping_ns, uint64_t *idle_ns)
{
    *idle_ns = 0;
    if (!busy) {
        b->last_rx_ns = now;
        return GW_LIVE_OK;
    }
    uint64_t limit = (uint64_t)b->core->peer_timeout_ms * 1000000ull;
    uint64_t idle = gw_elapsed_ns(now, b->last_rx_ns);
    *idle_ns = idle;
    if (idle > limit)
        return GW_LIVE_DEAD;
    if (idle > limit / 3 && now - *last_ping_ns > limit / 3) {
        *last_ping_ns = now;
        return GW_LIVE_PING;
    }
    return GW_LIVE_OK;
}
