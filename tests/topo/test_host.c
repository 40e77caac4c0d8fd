/* SPDX-License-Identifier: Apache-2.0 */
/* test_host.c - the doctor and the topology on this very machine, with no
 * CUDA or verbs hooks: nothing may crash, and no GPU check may pass that a
 * hook would have had to verify. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include "harness.h"
#include "diag/doctor.h"

static char *topo_json(const char *root)
{
    char err[512];
    gw_topo_t *t = NULL;
    gw_topo_opts_t o = {sizeof(o), NULL, NULL, ""};
    if (gw_topo_create(root, &o, &t, err, sizeof(err)) != GW_OK) {
        fprintf(stderr, "gw_topo_create(%s): %s\n", root, err);
        return NULL;
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    gw_topo_print_json(t, f);
    fclose(f);
    gw_topo_destroy(t);
    /* drop the root so that the two can be compared */
    char *body = strstr(buf, "\"numa_nodes\"");
    char *out = strdup(body ? body : buf);
    free(buf);
    return out;
}

/* scripts/record-sysfs.sh on this machine: the recording must read back as
 * the same topology as the live /sys. */
static void check_recording(void)
{
    char dir[] = "/tmp/gwtopo-rec-XXXXXX";
    REQUIRE(mkdtemp(dir));
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open("/dev/null", 1);
        dup2(fd, 1);
        execlp("bash", "bash", GW_RECORD_SCRIPT, dir, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    char rec[300];
    snprintf(rec, sizeof(rec), "%s/sys", dir);
    char *live = topo_json("/sys"), *recd = topo_json(rec);
    CHECK(live && recd);
    if (live && recd && strcmp(live, recd) != 0) {
        fprintf(stderr, "live:     %s\nrecorded: %s\n", live, recd);
        gwt_failures++;
    }
    free(live);
    free(recd);
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

int main(void)
{
    gw_topo_t *t = NULL;
    char err[512];
    gw_status_t st = gw_topo_create("/sys", NULL, &t, err, sizeof(err));
    if (st == GW_ERR_NOT_FOUND)
        SKIP("no /sys here: %s", err);
    REQUIRE(st == GW_OK);
    int ngpu = t->ngpu;
    gw_topo_print(t, stderr);
    gw_topo_destroy(t);

    gw_doctor_env_t env = {.size = sizeof(env), .sysfs_root = "/sys"};
    gw_doctor_report_t rep = {0};
    REQUIRE_OK(gw_doctor_run(&env, &rep));
    gw_doctor_print(&rep, stderr, 1);
    CHECK(rep.n >= 6);
    int code = gw_doctor_exit_code(&rep);
    CHECK(code >= 0 && code <= 2);
    const gw_check_t *gp = gw_doctor_find(&rep, "gpu.present", NULL);
    REQUIRE(gp);
    if (ngpu == 0) {
        CHECK(gp->verdict == GW_VERDICT_FAIL);
        CHECK(code == 2);
    }
    for (int i = 0; i < rep.n; i++) {
        const gw_check_t *c = &rep.checks[i];
        CHECK(c->evidence[0] != '\0'); /* every verdict says why */
        if (c->verdict == GW_VERDICT_FAIL || c->verdict == GW_VERDICT_WARN)
            CHECK(c->fix[0] != '\0');
        /* without hooks these cannot be verified */
        if (!strcmp(c->name, "cuda.driver") || !strcmp(c->name, "gpu.rdma") ||
            !strcmp(c->name, "gpu.dmabuf") || !strcmp(c->name, "live.gdr") ||
            !strcmp(c->name, "rdma_core.dmabuf"))
            CHECK(c->verdict == GW_VERDICT_SKIP);
        if (ngpu == 0 && strncmp(c->name, "gpu.", 4) == 0 && strcmp(c->name, "gpu.present") != 0)
            CHECK(c->verdict != GW_VERDICT_PASS);
    }
    gw_doctor_report_free(&rep);
    gw_doctor_report_free(&rep); /* twice is harmless */
    check_recording();
    return gwt_done("topo_host");
}
