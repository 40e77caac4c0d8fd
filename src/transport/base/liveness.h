/* SPDX-License-Identifier: Apache-2.0 */
/* liveness.h - the peer-liveness timer every transport runs (transport
 * base).
 *
 * A peer is judged only while work waits on it (an operation, a flush, a
 * posted receive, or the transport's own: gw_ep_has_work plus what the
 * transport adds): silence without work is no sign of death.  With work, a
 * peer silent for a third of GPUWIRE_PEER_TIMEOUT_MS is pinged (once per
 * third), and one silent for all of it is dead.  "Silent" counts from
 * base->last_rx_ns, which the transport stamps whenever the peer shows life
 * (or marks base->live_mark instead, which the judge turns into its now:
 * no clock read per message).
 *
 * Use from a progress poller:
 *   if (gw_liveness_due(&iface->live, now))
 *       for each endpoint:
 *           switch (gw_liveness_judge(base, busy, now, &ep->last_ping_ns, &idle)) {
 *           case GW_LIVE_PING: send a ping; break;
 *           case GW_LIVE_DEAD: fail the endpoint (GW_ERR_PEER_TIMEOUT); break;
 *           }
 * Local work is no sign of death.  A peer process busy with its own work
 * (allocating, registering and touching gigabytes before its first
 * transfer, computing) calls no progress and so answers no ping, yet it is
 * alive; only a peer that is gone, frozen (SIGSTOP, a debugger) or cut off
 * is dead.  Where the peer runs on this host and its pid is known here
 * (gw_liveness_set_peer_pid: intra's probe, or the handshake), a peer
 * silent past the timeout is asked about through /proc: running, sleeping
 * or in disk wait it is alive and keeps being pinged; stopped, traced, a
 * zombie or gone (or its pid now another process) it is dead.  A peer
 * process that exits closes its sockets, which every transport sees as a
 * reset at once.
 * tcp and intra do; verbs relies on RC retries and the api's control
 * socket today and marks its endpoints base->unjudged (no stamps: a clock
 * read per completion pass); it can adopt the timer for its CT_* pings the
 * same way, stamping again.
 */
#ifndef GW_TRANSPORT_LIVENESS_H
#define GW_TRANSPORT_LIVENESS_H

#include <stdint.h>

#include "transport/base/ep_base.h"

#define GW_LIVENESS_TICK_NS 20000000ull /* the timer runs at most every 20 ms */

typedef struct gw_liveness {
    uint64_t last_ns; /* last time the timer ran */
} gw_liveness_t;

typedef enum { GW_LIVE_OK, GW_LIVE_PING, GW_LIVE_DEAD } gw_live_t;

/* Is the timer due at `now`?  Stamps it when it is. */
static inline int gw_liveness_due(gw_liveness_t *l, uint64_t now)
{
    if (now - l->last_ns < GW_LIVENESS_TICK_NS)
        return 0;
    l->last_ns = now;
    return 1;
}

/* Judges one endpoint at `now`.  busy: work waits on the peer (not busy:
 * b->last_rx_ns is moved to now, GW_LIVE_OK).  *idle_ns gets the silence.
 * GW_LIVE_PING stamps *last_ping_ns. */
/* Records the peer process (a pid valid in this pid namespace) for the
 * judge; reads its start time now, while it is known to be the peer. */
void gw_liveness_set_peer_pid(gw_ep_base_t *b, int pid);
/* 1 when process pid (started at `start`, 0: any) exists and is neither
 * stopped, traced nor a zombie; 0 otherwise.  *state gets its state letter
 * ('?' when gone). */
int gw_liveness_proc_alive(int pid, uint64_t start, char *state);

gw_live_t gw_liveness_judge(gw_ep_base_t *b, int busy, uint64_t now, uint64_t *last_ping_ns, uint64_t *idle_ns);

#endif
