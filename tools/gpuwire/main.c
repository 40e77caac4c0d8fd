/* SPDX-License-Identifier: Apache-2.0 */
/* main.c - the gpuwire tool: a table of subcommands (wireguard-tools style). */
#include <stdio.h>
#include <string.h>

#include "subcommands.h"

static const struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *description;
} subcommands[] = {
    {"info", cmd_info, "versions, build features, transports, devices, topology and settings"},
    {"doctor", cmd_doctor, "check every requirement of GPUDirect RDMA and say how to fix what fails"},
    {"perf", cmd_perf, "measure bandwidth, latency and CPU use (perftest-style)"},
    {"ls", cmd_ls, "list the agents and published regions a directory holds (GPUWIRE_DIRECTORY)"},
};

static void usage(FILE *f, const char *prog)
{
    fprintf(f, "usage: %s <command> [options]\n\ncommands:\n", prog);
    for (size_t i = 0; i < sizeof(subcommands) / sizeof(subcommands[0]); i++)
        fprintf(f, "  %-8s %s\n", subcommands[i].name, subcommands[i].description);
    fprintf(f, "\n'%s <command> --help' describes a command's options.\n", prog);
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout, argv[0]);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        extern const char *gw_version(void);
        printf("gpuwire %s\n", gw_version());
        return 0;
    }
    for (size_t i = 0; i < sizeof(subcommands) / sizeof(subcommands[0]); i++)
        if (!strcmp(argv[1], subcommands[i].name))
            return subcommands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "%s: unknown command '%s'\n\n", argv[0], argv[1]);
    usage(stderr, argv[0]);
    return 2;
}
