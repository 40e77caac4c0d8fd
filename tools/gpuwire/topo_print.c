/* SPDX-License-Identifier: Apache-2.0 */
/* topo_print.c - see topo_print.h. */
#include "topo_print.h"

#include <string.h>

#include "core/settings.h"
#include "topo/topo.h"

int gw_tool_print_topo(FILE *out, int json)
{
    char err[512];
    gw_topo_t *t = NULL;
    gw_topo_opts_t opts;
    gw_topo_opts_default(&opts);
    if (strcmp(gw_settings_sysfs_root(NULL), "/sys") != 0)
        opts.nvlink = NULL; /* a recorded tree: this machine's CUDA cannot speak for it */
    gw_status_t st = gw_topo_create(NULL, &opts, &t, err, sizeof(err));
    if (st != GW_OK) {
        fprintf(stderr, "gpuwire: reading the topology failed: %s\n", err);
        return 1;
    }
    if (json)
        gw_topo_print_json(t, out);
    else
        gw_topo_print(t, out);
    gw_topo_destroy(t);
    return 0;
}
