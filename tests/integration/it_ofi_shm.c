/* SPDX-License-Identifier: Apache-2.0 */
/* it_ofi_shm.c - the shared memory regions of libfabric's shm provider, as a
 * machine that has run for a while leaves them (run over ofi/shm only).
 *
 *   stale_same_pid  region files of a dead process that had this process's
 *                   pid (the kernel reuses pids) lie in /dev/shm under the
 *                   names the provider would choose: endpoints still open
 *                   and messages move.
 *   sweep_dead      gpuwire's own region files: one of a process that is
 *                   gone is removed when the provider is opened; one of a
 *                   live process, and one of another pid namespace, stay.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "gpuwire.h"

#define NSTALE 16

static void make_file(const char *name)
{
    char path[300];
    snprintf(path, sizeof(path), "/dev/shm/%.250s", name);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(ftruncate(fd, 4096) == 0); /* zeros: not a region of this libfabric's version */
    close(fd);
}

static int exists(const char *name)
{
    char path[300];
    snprintf(path, sizeof(path), "/dev/shm/%.250s", name);
    return access(path, F_OK) == 0;
}

static void drop(const char *name)
{
    char path[300];
    snprintf(path, sizeof(path), "/dev/shm/%.250s", name);
    unlink(path);
}

static int peer(void *arg)
{
    gwt_chan_t *chan = arg;
    gw_context_t *ctx;
    gw_ep_t *ep = gwt_connect_chan(chan, "ofi", &ctx);
    const char msg[] = "through a region named anew";
    gw_request_t *r;
    REQUIRE(gwt_outcome(gw_send(ep, msg, sizeof(msg), NULL, 7, &r), &r, 20000) == GW_OK);
    gwt_chan_expect(chan, ctx, "done");
    gw_ep_close(ep, 5000);
    gw_context_destroy(ctx);
    return gwt_failures ? 1 : 0;
}

static void case_stale_same_pid(void)
{
    char names[NSTALE][64];
    for (int k = 0; k < NSTALE; k++) {
        snprintf(names[k], sizeof(names[k]), "%d:%d:%d", (int)getpid(), (int)getuid(), k);
        make_file(names[k]);
    }
    gwt_chan_t mine, theirs;
    REQUIRE(gwt_chan_pair(&mine, &theirs) == 0);
    int pid = gwt_spawn(peer, &theirs);
    REQUIRE(pid > 0);
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    gw_listener_t *l;
    gw_ep_t *ep = gwt_listen_accept(ctx, &mine, &l);
    char buf[64] = {0};
    gw_request_t *r;
    REQUIRE(gwt_outcome(gw_recv(ep, buf, sizeof(buf), NULL, 7, ~0ull, &r), &r, 20000) == GW_OK);
    REQUIRE(strcmp(buf, "through a region named anew") == 0);
    REQUIRE(gwt_chan_send(&mine, "done", 4) == 0);
    REQUIRE(gwt_wait(pid, 30) == 0);
    gw_ep_close(ep, 5000);
    gw_listener_destroy(l);
    gw_context_destroy(ctx);
    for (int k = 0; k < NSTALE; k++)
        drop(names[k]);
}

static unsigned long long start_of(long pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    REQUIRE(f != NULL);
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    REQUIRE(p != NULL);
    p++; /* the space before field 3 */
    for (int field = 3; field < 22 && p; field++)
        p = strchr(p + 1, ' ');
    REQUIRE(p != NULL);
    return strtoull(p + 1, NULL, 10);
}

static void case_sweep_dead(void)
{
    struct stat sb;
    REQUIRE(stat("/proc/self/ns/pid", &sb) == 0);
    unsigned long long ns = (unsigned long long)sb.st_ino;
    /* a process that has come and gone: its pid is free (until reused, which
     * the start time below tells apart) */
    pid_t gone = fork();
    REQUIRE(gone >= 0);
    if (gone == 0)
        _exit(0);
    unsigned long long gone_start = start_of((long)getpid()) + 1; /* after ours: its own start is unreadable now */
    REQUIRE(waitpid(gone, NULL, 0) == gone);
    char dead[96], live[96], other_ns[96];
    snprintf(dead, sizeof(dead), "gwofi_%llu_%d_%llu_0", ns, (int)gone, gone_start);
    snprintf(live, sizeof(live), "gwofi_%llu_%d_%llu_0", ns, (int)getppid(), start_of((long)getppid()));
    snprintf(other_ns, sizeof(other_ns), "gwofi_%llu_%d_%llu_0", ns + 1, (int)gone, gone_start);
    make_file(dead);
    make_file(live);
    make_file(other_ns);
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    int dead_left = exists(dead), live_left = exists(live), other_left = exists(other_ns);
    gw_context_destroy(ctx);
    drop(dead);
    drop(live);
    drop(other_ns);
    if (dead_left)
        fprintf(stderr, "the region file of a process that is gone (%s) was not removed\n", dead);
    REQUIRE(!dead_left);
    REQUIRE(live_left);
    REQUIRE(other_left);
}

static const gwt_case_t cases[] = {GWT_CASE(stale_same_pid), GWT_CASE(sweep_dead)};
int main(int argc, char **argv)
{
    return GWT_MAIN(argc, argv, cases);
}
