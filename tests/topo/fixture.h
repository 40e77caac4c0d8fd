/* SPDX-License-Identifier: Apache-2.0 */
/* fixture.h - builds the recorded-style sysfs trees of mkfixture.sh. */
#ifndef GW_TEST_TOPO_FIXTURE_H
#define GW_TEST_TOPO_FIXTURE_H

typedef struct fx {
    char dir[256];    /* OUTDIR */
    char sys[300];    /* OUTDIR/sys */
    char proc[300];
    char boot[300];
    char nvlink[300]; /* OUTDIR/sys/gpuwire-nvlink.txt (may not exist) */
} fx_t;

/* Builds machine `name` in a fresh temporary directory; exits the test on failure. */
void fx_build(fx_t *f, const char *name);
/* Removes the tree (only what fx_build made). */
void fx_remove(fx_t *f);

#endif
