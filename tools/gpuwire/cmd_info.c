#include <stdio.h>
#include "subcommands.h"
int cmd_info(int argc, char **argv) { (void)argc; (void)argv; fprintf(stderr, "not yet\n"); return 2; }
