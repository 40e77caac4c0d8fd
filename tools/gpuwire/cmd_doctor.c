#include <stdio.h>
#include "subcommands.h"
int cmd_doctor(int argc, char **argv) { (void)argc; (void)argv; fprintf(stderr, "not yet\n"); return 2; }
