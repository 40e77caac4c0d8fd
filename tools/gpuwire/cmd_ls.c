/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_ls.c - `gpuwire ls`: the agents and published regions a directory
 * holds (GPUWIRE_DIRECTORY), one per line, or JSON lines with --json. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "gpuwire.h"
#include "subcommands.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gpuwire ls [--json]\n"
            "\n"
            "Lists every agent registered in the directory (GPUWIRE_DIRECTORY, under\n"
            "GPUWIRE_DIRECTORY_PREFIX) with its address and epoch, and every region it\n"
            "published with its address, length, memory type and remote access.  The\n"
            "directory holds no keys: peers get those from the agent (docs/NAMES.md).\n"
            "\n"
            "  -j, --json   one JSON object per line\n"
            "  -h, --help   this text\n");
}

typedef struct ls_state {
    int json;
    int agents, regions;
} ls_state_t;

static int on_entry(void *arg, const gw_dir_entry_t *e)
{
    ls_state_t *s = arg;
    if (!e->region) {
        s->agents++;
        if (s->json)
            printf("{\"agent\":\"%s\",\"addr\":\"%s\",\"epoch\":%llu}\n", e->agent, e->addr,
                   (unsigned long long)e->epoch);
        else
            printf("agent  %-24s %-28s epoch %llu\n", e->agent, e->addr, (unsigned long long)e->epoch);
        return 0;
    }
    s->regions++;
    const char *acc = (e->access & 3) == 3 ? "rw" : (e->access & 1) ? "r" : (e->access & 2) ? "w" : "-";
    if (s->json)
        printf("{\"agent\":\"%s\",\"region\":\"%s\",\"addr\":\"0x%llx\",\"len\":%llu,\"type\":\"%s\",\"access\":\"%s\"}\n",
               e->agent, e->region, (unsigned long long)e->raddr, (unsigned long long)e->rlen, e->type, acc);
    else {
        char full[160];
        snprintf(full, sizeof(full), "%s/%s", e->agent, e->region);
        printf("region %-24s 0x%-16llx %12llu bytes  %-4s %s\n", full, (unsigned long long)e->raddr,
               (unsigned long long)e->rlen, e->type, acc);
    }
    return 0;
}

int cmd_ls(int argc, char **argv)
{
    static const struct option opts[] = {
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    ls_state_t s = {0};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "jh", opts, NULL)) != -1) {
        switch (c) {
        case 'j': s.json = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "gpuwire ls: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    gw_context_t *ctx;
    gw_status_t st = gw_context_create(NULL, &ctx);
    if (st != GW_OK) {
        fprintf(stderr, "gpuwire ls: gw_context_create: %s\n", gw_status_str(st));
        return 1;
    }
    char desc[512];
    if (!s.json && gw_directory_describe(ctx, desc, sizeof(desc)) == GW_OK)
        printf("directory: %s\n", desc);
    st = gw_directory_list(ctx, on_entry, &s);
    int rc = 0;
    if (st != GW_OK) {
        fprintf(stderr, "gpuwire ls: %s (%s)\n", gw_last_error(ctx), gw_status_name(st));
        rc = 1;
    } else if (!s.json) {
        printf("%d agent(s), %d region(s)\n", s.agents, s.regions);
    }
    gw_context_destroy(ctx);
    return rc;
}
