/* SPDX-License-Identifier: Apache-2.0 */
/* test_tool.c - `gpuwire doctor` and `gpuwire info --topo` output and exit
 * status on recorded trees. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"
#include "harness.h"
#include "subcommands.h"
#include "topo_print.h"

static char out[1 << 18];

/* Runs fn with stdout captured into out; returns its result. */
static int capture(int (*fn)(int, char **), int argc, char **argv, int topo_json)
{
    char path[] = "/tmp/gwtopo-out-XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    fflush(stdout);
    int saved = dup(1);
    dup2(fd, 1);
    int rc = fn ? fn(argc, argv) : gw_tool_print_topo(stdout, topo_json);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    lseek(fd, 0, SEEK_SET);
    ssize_t n = read(fd, out, sizeof(out) - 1);
    out[n > 0 ? n : 0] = '\0';
    close(fd);
    unlink(path);
    return rc;
}

static int doctor(fx_t *f, const char *extra1, const char *extra2)
{
    char *argv[12] = {"doctor", "--sysfs", f->sys, "--proc", f->proc, "--boot", f->boot};
    int argc = 7;
    if (extra1)
        argv[argc++] = (char *)extra1;
    if (extra2)
        argv[argc++] = (char *)extra2;
    argv[argc] = NULL;
    return capture(cmd_doctor, argc, argv, 0);
}

int main(void)
{
    fx_t dgx, acs;
    fx_build(&dgx, "dgx8");
    fx_build(&acs, "acs");

    /* dgx8 from a recorded tree: IB MTU unknown without libibverbs -> exit 1 */
    CHECK(doctor(&dgx, "--json", NULL) == 1);
    CHECK(!strncmp(out, "{\"exit_code\":1,", 15));
    CHECK(strstr(out, "{\"name\":\"pcie.path\",\"object\":\"GPU7 0000:a4:00.0\",\"verdict\":\"pass\""));
    CHECK(strstr(out, "\"name\":\"live.gdr\",\"object\":\"mlx5_0\",\"verdict\":\"skip\",\"evidence\":\"a recorded sysfs tree"));
    CHECK(strstr(out, "\"verdict\":\"fail\"") == NULL);

    /* acs: failures -> exit 2, text with fixes */
    CHECK(doctor(&acs, NULL, NULL) == 2);
    CHECK(strstr(out, "FAIL    pcie.acs         GPU0 0000:03:00.0: ACS redirects"));
    CHECK(strstr(out, "fix: setpci -s 0000:02:00.0 ECAP_ACS+0x6.w=0000"));
    CHECK(strstr(out, "-> exit 2"));
    CHECK(strstr(out, "SKIP") == NULL); /* skipped checks only with -v */
    CHECK(doctor(&acs, "-v", NULL) == 2);
    CHECK(strstr(out, "SKIP    live.gdr"));
    CHECK(doctor(&acs, "--bytes", "128M") == 2);
    CHECK(strstr(out, "PASS    gpu.bar1         GPU0 0000:03:00.0: BAR1 256 MiB >= 128 MiB"));

    /* usage */
    CHECK(doctor(&acs, "--bytes", "lots") == 2);
    CHECK(doctor(&acs, "--frobnicate", NULL) == 2);
    char *help[] = {"doctor", "--help", NULL};
    CHECK(capture(cmd_doctor, 2, help, 0) == 0 && strstr(out, "Exit status: 0 all pass"));

    /* info --topo on the recorded tree (GPUWIRE_SYSFS_ROOT) */
    setenv("GPUWIRE_SYSFS_ROOT", dgx.sys, 1);
    CHECK(capture(NULL, 0, NULL, 0) == 0);
    CHECK(strstr(out, "GPU0    X      NV12   NV12"));
    CHECK(strstr(out, "GPU7 0000:a4:00.0: mlx5_3 (PIX)"));
    CHECK(capture(NULL, 0, NULL, 1) == 0);
    CHECK(strstr(out, "\"nearest_nic\":{\"GPU0\":[\"mlx5_0\"]"));
    setenv("GPUWIRE_SYSFS_ROOT", "/nonexistent/gpuwire", 1);
    CHECK(capture(NULL, 0, NULL, 0) == 1);
    unsetenv("GPUWIRE_SYSFS_ROOT");

    fx_remove(&dgx);
    fx_remove(&acs);
    return gwt_done("topo_tool");
}
