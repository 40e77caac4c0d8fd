/* SPDX-License-Identifier: Apache-2.0 */
/* test_ofi_loader.c - the ofi transport's loading of libfabric against a
 * stand-in library (fake_fabric.c) whose fi_version() answers
 * FAKE_FI_VERSION: one version per process (the loader keeps its first
 * answer), so ctest runs it once per case.
 *   usage: test_ofi_loader LIB accept|refuse
 * accept: a library of a newer major version (2.x, which keeps the 1.x entry
 * points) loads; refuse: an older major one is refused as broken, the
 * reason naming both versions. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "transport/ofi/ofi_syms.h"

int main(int argc, char **argv)
{
    REQUIRE(argc == 3);
    setenv("GPUWIRE_OFI_LIB", argv[1], 1);
    char why[512] = "";
    int broken = -1;
    const gw_fi_t *fi = gw_fi_get(why, sizeof(why), &broken);
    fprintf(stderr, "FAKE_FI_VERSION=%s: %s%s\n", getenv("FAKE_FI_VERSION") ? getenv("FAKE_FI_VERSION") : "(unset)",
            fi ? "loaded" : "refused: ", fi ? "" : why);
    if (!strcmp(argv[2], "accept")) {
        CHECK(fi != NULL);
        CHECK(broken == 0);
        if (fi) { /* every entry point bound, and the library's version as it reports it */
            CHECK(fi->getinfo && fi->freeinfo && fi->dupinfo && fi->fabric && fi->strerror && fi->version);
            CHECK(FI_MAJOR(fi->version()) >= FI_MAJOR_VERSION);
        }
    } else {
        CHECK(fi == NULL);
        CHECK(broken == 1);
        CHECK(strstr(why, "is libfabric 0.9") != NULL);
        CHECK(strstr(why, "built against") != NULL);
    }
    return gwt_done("unit_ofi_loader");
}
