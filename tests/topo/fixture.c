/* SPDX-License-Identifier: Apache-2.0 */
/* fixture.c - see fixture.h. */
#include "fixture.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

void fx_build(fx_t *f, const char *name)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(f->dir, sizeof(f->dir), "%s/gwtopo-%s-XXXXXX", tmp && tmp[0] ? tmp : "/tmp", name);
    if (!mkdtemp(f->dir)) {
        perror("mkdtemp");
        exit(1);
    }
    snprintf(f->sys, sizeof(f->sys), "%s/sys", f->dir);
    snprintf(f->proc, sizeof(f->proc), "%s/proc", f->dir);
    snprintf(f->boot, sizeof(f->boot), "%s/boot", f->dir);
    snprintf(f->nvlink, sizeof(f->nvlink), "%s/sys/gpuwire-nvlink.txt", f->dir);
    pid_t pid = fork();
    if (pid == 0) {
        execlp("bash", "bash", GW_MKFIXTURE, name, f->dir, (char *)NULL);
        perror("exec bash " GW_MKFIXTURE);
        _exit(127);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "mkfixture.sh %s %s failed (status 0x%x)\n", name, f->dir, st);
        exit(1);
    }
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void fx_remove(fx_t *f)
{
    if (f->dir[0] && strstr(f->dir, "/gwtopo-"))
        nftw(f->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    f->dir[0] = '\0';
}
