/* SPDX-License-Identifier: Apache-2.0 */
/* topo_print.h - `gpuwire info --topo [--json]`: the GPU/NIC matrix. */
#ifndef GW_TOOL_TOPO_PRINT_H
#define GW_TOOL_TOPO_PRINT_H

#include <stdio.h>

/* Prints the topology of GPUWIRE_SYSFS_ROOT (default /sys) to out, as text
 * (nvidia-smi topo -m layout, NICs included, nearest NIC per GPU) or as one
 * JSON object.  Returns 0, or 1 when the tree cannot be read (the reason goes
 * to stderr). */
int gw_tool_print_topo(FILE *out, int json);

#endif
