/* SPDX-License-Identifier: Apache-2.0 */
/* test_hmap.c - the hash map against a plain reference array under random
 * inserts, overwrites and deletes (tombstones, growth, reuse). */
#include <stdlib.h>

#include "core/hmap.h"
#include "harness.h"

#define N 5000

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

int main(void)
{
    gw_hmap_t m;
    gw_hmap_init(&m);
    CHECK(gw_hmap_get(&m, 1) == NULL); /* empty map, no table yet */
    CHECK(gw_hmap_del(&m, 1) == NULL);
    CHECK(gw_hmap_put(&m, 0, (void *)1) == -1);
    CHECK(gw_hmap_put(&m, UINT64_MAX, (void *)1) == -1);
    CHECK(gw_hmap_get(&m, 0) == NULL);
    CHECK(gw_hmap_get(&m, UINT64_MAX) == NULL);

    static uint64_t keys[N];
    static uintptr_t vals[N]; /* 0: absent */
    for (int i = 0; i < N; i++)
        keys[i] = (i % 3 == 0) ? (uint64_t)i + 1 : (rnd() | 1); /* dense and sparse keys */

    for (int round = 0; round < 200000; round++) {
        int i = (int)(rnd() % N);
        switch (rnd() % 3) {
        case 0:
        case 1: {
            uintptr_t v = (uintptr_t)(rnd() | 1);
            REQUIRE(gw_hmap_put(&m, keys[i], (void *)v) == 0);
            vals[i] = v;
            break;
        }
        default: {
            void *got = gw_hmap_del(&m, keys[i]);
            if ((uintptr_t)got != vals[i]) {
                fprintf(stderr, "del(%llx) = %p, expected %p\n", (unsigned long long)keys[i], got,
                        (void *)vals[i]);
                gwt_failures++;
            }
            vals[i] = 0;
        }
        }
        if (round % 20000 == 0) {
            size_t count = 0;
            for (int j = 0; j < N; j++) {
                count += vals[j] != 0;
                if ((uintptr_t)gw_hmap_get(&m, keys[j]) != vals[j]) {
                    fprintf(stderr, "round %d: get(%llx) wrong\n", round, (unsigned long long)keys[j]);
                    gwt_failures++;
                    break;
                }
            }
            CHECK(m.count == count);
            CHECK(m.used <= m.cap / 2 + 1); /* load factor kept, tombstones included */
        }
        if (gwt_failures > 10)
            break;
    }
    /* delete everything: the map is empty and still usable */
    for (int j = 0; j < N; j++)
        if (vals[j])
            CHECK((uintptr_t)gw_hmap_del(&m, keys[j]) == vals[j]);
    CHECK(m.count == 0);
    CHECK(gw_hmap_put(&m, 42, (void *)7) == 0);
    CHECK((uintptr_t)gw_hmap_get(&m, 42) == 7);
    gw_hmap_fini(&m);
    CHECK(m.cap == 0 && m.keys == NULL);
    return gwt_done("unit_hmap");
}
