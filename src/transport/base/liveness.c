/* SPDX-License-Identifier: Apache-2.0 */
/* liveness.c - peer-liveness verdicts (liveness.h). */
#include "transport/base/liveness.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* State letter and start time (field 22) of /proc/PID/stat; -1 when gone. */
static int proc_stat(int pid, char *state, uint64_t *start)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
    if (!p || p[1] != ' ' || !p[2])
        return -1;
    *state = p[2];
    p += 3; /* at field 4 */
    for (int f = 4; f < 22; f++) {
        p = strchr(p, ' ');
        if (!p)
            return -1;
        p++;
    }
    *start = strtoull(p, NULL, 10);
    return 0;
}

int gw_liveness_proc_alive(int pid, uint64_t start, char *state)
{
    char st = '?';
    uint64_t t = 0;
    int alive = 0;
    if (pid > 0 && proc_stat(pid, &st, &t) == 0 && (!start || t == start))
        alive = st != 'T' && st != 't' && st != 'Z' && st != 'X' && st != 'x';
    else
        st = '?';
    if (state)
        *state = st;
    return alive;
}

void gw_liveness_set_peer_pid(gw_ep_base_t *b, int pid)
{
    char st;
    uint64_t start = 0;
    if (pid <= 0 || proc_stat(pid, &st, &start) != 0) {
        b->peer_pid = 0; /* not visible here: judged by silence alone */
        return;
    }
    b->peer_pid = pid;
    b->peer_start = start;
}

gw_live_t gw_liveness_judge(gw_ep_base_t *b, int busy, uint64_t now, uint64_t *last_ping_ns, uint64_t *idle_ns)
{
    *idle_ns = 0;
    if (b->live_mark) { /* life (or new work) since the last judge: silence counts from now */
        b->live_mark = 0;
        b->last_rx_ns = now;
    }
    if (!busy) {
        b->last_rx_ns = now;
        return GW_LIVE_OK;
    }
    uint64_t limit = (uint64_t)b->core->peer_timeout_ms * 1000000ull;
    uint64_t idle = gw_elapsed_ns(now, b->last_rx_ns);
    *idle_ns = idle;
    /* silent past the timeout: dead, unless it is a live process of this
     * host busy with its own work (then it is pinged on, once per third) */
    if (idle > limit && !(b->peer_pid && gw_liveness_proc_alive(b->peer_pid, b->peer_start, NULL)))
        return GW_LIVE_DEAD;
    if (idle > limit / 3 && now - *last_ping_ns > limit / 3) {
        *last_ping_ns = now;
        return GW_LIVE_PING;
    }
    return GW_LIVE_OK;
}
