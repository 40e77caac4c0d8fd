/* cmd_doctor.c - `gpuwire doctor`: every GPUDirect RDMA requirement, one
 * check each, with the evidence and a one-line fix (checks: src/topo/doctor.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/settings.h"
#include "subcommands.h"
#include "topo/doctor.h"

static void doctor_usage(FILE *f)
{
    fprintf(f,
            "usage: gpuwire doctor [--json] [-v] [--bytes SIZE] [--sysfs DIR] [--proc DIR] [--boot DIR]\n"
            "\n"
            "Checks what GPUDirect RDMA needs on this machine: GPU and driver support (CUDA\n"
            "attributes), dma-buf support in the kernel, rdma-core and the NIC driver,\n"
            "nvidia-peermem, the PCIe path from each GPU to its nearest NIC, ACS on the\n"
            "bridges between them, the IOMMU mode, BAR1 size, the locked-memory limit, NIC\n"
            "ports (state, MTU, RoCE GIDs), and a live registration of GPU memory on each NIC.\n"
            "\n"
            "  --json        one JSON object: exit_code, summary, checks[{name, object, verdict, evidence, fix}]\n"
            "  -v            also list the checks that were skipped\n"
            "  --bytes SIZE  GPU memory one process will register (BAR1 and memlock checks; default 1G)\n"
            "  --sysfs DIR   read a recorded sysfs tree (default: GPUWIRE_SYSFS_ROOT, else /sys)\n"
            "  --proc DIR    read a recorded procfs (default /proc)\n"
            "  --boot DIR    where the kernel config-<release> lives (default /boot)\n"
            "\n"
            "Verdicts: pass, warn, fail, skip (not applicable or not built in), unknown (could not\n"
            "verify; the reason is given).  Exit status: 0 all pass, 1 warnings or unknowns, 2 failures.\n");
}

int cmd_doctor(int argc, char **argv)
{
    int json = 0, verbose = 0;
    gw_doctor_env_t env;
    gw_doctor_env_default(&env);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
            verbose = 1;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            doctor_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--bytes") || !strcmp(a, "--sysfs") || !strcmp(a, "--proc") ||
                   !strcmp(a, "--boot")) {
            if (!val) {
                fprintf(stderr, "gpuwire doctor: %s needs a value\n", a);
                return 2;
            }
            i++;
            if (!strcmp(a, "--bytes")) {
                uint64_t b;
                if (gw_parse_size(val, &b) < 0 || b == 0) {
                    fprintf(stderr, "gpuwire doctor: --bytes %s: not a size (e.g. 512M, 4G)\n", val);
                    return 2;
                }
                env.register_bytes = b;
            } else if (!strcmp(a, "--sysfs")) {
                env.sysfs_root = val;
            } else if (!strcmp(a, "--proc")) {
                env.proc_root = val;
            } else {
                env.boot_dir = val;
            }
        } else {
            fprintf(stderr, "gpuwire doctor: unknown option '%s'\n\n", a);
            doctor_usage(stderr);
            return 2;
        }
    }
    gw_doctor_report_t rep = {0};
    gw_status_t st = gw_doctor_run(&env, &rep);
    if (st != GW_OK) {
        fprintf(stderr, "gpuwire doctor: %s\n", gw_status_str(st));
        gw_doctor_report_free(&rep);
        return 2;
    }
    if (json)
        gw_doctor_print_json(&rep, stdout);
    else
        gw_doctor_print(&rep, stdout, verbose);
    int code = gw_doctor_exit_code(&rep);
    gw_doctor_report_free(&rep);
    return code;
}
