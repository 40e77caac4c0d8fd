/* SPDX-License-Identifier: Apache-2.0 */
/* The installed header and library work together: a context is made, and the
 * library's version is the header's. */
#include <gpuwire.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
    gw_context_t *c;
    if (gw_context_create(NULL, &c) != GW_OK)
        return 1;
    printf("gpuwire %s (%s)\n", gw_version(), gw_build_features());
    int rc = strcmp(gw_version(), GW_VERSION_STRING) != 0;
    return gw_context_destroy(c) != GW_OK || rc;
}
