/* SPDX-License-Identifier: Apache-2.0 */
/* ofi_shm.c - names of libfabric shm endpoints, and the regions of dead
 * processes (transport layer, ofi).
 *
 * libfabric's shm provider backs every endpoint with a file in /dev/shm.
 * Left to itself it names the file "<pid>:<uid>:<n>", and a process killed
 * with SIGKILL leaves its files behind (16 MiB each).  Once the kernel hands
 * the dead process's pid to a new one, the new process's endpoint gets the
 * same name, the provider finds the file, sees a live pid in it (its own)
 * and refuses the endpoint with FI_EBUSY: a pid that wrapped around is
 * enough to break an unrelated job.
 *
 * gpuwire therefore names its shm endpoints itself:
 *     gwofi_<pid namespace inode>_<pid>_<process start time>_<n>
 * The start time (field 22 of /proc/<pid>/stat) tells a reused pid from the
 * process that made the file, so a name is never met twice, and a file
 * whose process is gone can be recognised and removed.  Each process that
 * opens the shm provider sweeps once: it unlinks the files of this
 * namespace whose process no longer exists (or whose pid now belongs to a
 * younger process).  Files of other pid namespaces (containers sharing
 * /dev/shm) are never touched: their pids mean nothing here.  Unlinking
 * affects no mapping a live peer may still hold.
 */
#include "ofi.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define GW_OFI_SHM_PREFIX "gwofi_"
#define GW_OFI_SHM_DIR "/dev/shm"

/* The start time of process pid in clock ticks since boot, or 0 when it
 * does not exist (or cannot be read). */
static unsigned long long proc_start(long pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
    if (!p)
        return 0;
    p++;
    /* after ")" come field 3 (state) onwards: skip to field 22 */
    for (int field = 3; field < 22; field++) {
        p = strchr(p + 1, ' ');
        if (!p)
            return 0;
    }
    return strtoull(p + 1, NULL, 10);
}

static unsigned long long self_ns(void)
{
    struct stat sb;
    return stat("/proc/self/ns/pid", &sb) == 0 ? (unsigned long long)sb.st_ino : 0;
}

int gw_ofi_shm_name(char *buf, size_t len)
{
    static atomic_uint seq;
    pid_t me = getpid(); /* read each time: a forked child names its own */
    int n = snprintf(buf, len, GW_OFI_SHM_PREFIX "%llu_%ld_%llu_%u", self_ns(), (long)me, proc_start((long)me),
                     atomic_fetch_add(&seq, 1));
    return n > 0 && (size_t)n < len ? 0 : -1;
}

/* Is this name one of ours, of this namespace, whose process is gone? */
static int stale(const char *name, unsigned long long ns)
{
    unsigned long long fns, fstart;
    long fpid;
    unsigned seq;
    char tail;
    if (sscanf(name, GW_OFI_SHM_PREFIX "%llu_%ld_%llu_%u%c", &fns, &fpid, &fstart, &seq, &tail) != 4)
        return 0;
    if (fns != ns || fpid <= 0 || fpid == (long)getpid())
        return 0;
    unsigned long long now = proc_start(fpid);
    return now == 0 || now != fstart;
}

static void sweep(void)
{
    unsigned long long ns = self_ns();
    if (!ns)
        return; /* without the namespace we cannot tell whose pid a name holds */
    DIR *d = opendir(GW_OFI_SHM_DIR);
    if (!d)
        return;
    unsigned removed = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, GW_OFI_SHM_PREFIX, sizeof(GW_OFI_SHM_PREFIX) - 1) || !stale(e->d_name, ns))
            continue;
        if (shm_unlink(e->d_name) == 0)
            removed++;
        else if (errno != ENOENT) /* another process swept it first: fine */
            gw_log(GW_LOG_DEBUG, "ofi shm: could not remove %s/%s of a dead process: %s", GW_OFI_SHM_DIR,
                   e->d_name, strerror(errno));
    }
    closedir(d);
    if (removed)
        gw_log(GW_LOG_INFO, "ofi shm: removed %u region file(s) left in %s by processes that are gone", removed,
               GW_OFI_SHM_DIR);
}

void gw_ofi_shm_sweep(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, sweep);
}
