/* SPDX-License-Identifier: Apache-2.0 */
/* subcommands.h - one function per subcommand, one file each (cmd_*.c). */
#ifndef GW_TOOL_SUBCOMMANDS_H
#define GW_TOOL_SUBCOMMANDS_H

int cmd_info(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
int cmd_perf(int argc, char **argv);
int cmd_ls(int argc, char **argv);

#endif
