/* SPDX-License-Identifier: Apache-2.0 */
/* hmap.h - open-addressing hash map from nonzero uint64_t to void * (core). */
#ifndef GW_CORE_HMAP_H
#define GW_CORE_HMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct gw_hmap {
    uint64_t *keys; /* 0 = empty, UINT64_MAX = deleted */
    void **vals;
    size_t cap, count, used;
} gw_hmap_t;

void gw_hmap_init(gw_hmap_t *m);
void gw_hmap_fini(gw_hmap_t *m);
/* 0 on success, -1 on allocation failure or a zero/UINT64_MAX key. */
int gw_hmap_put(gw_hmap_t *m, uint64_t key, void *val);
void *gw_hmap_get(const gw_hmap_t *m, uint64_t key);
void *gw_hmap_del(gw_hmap_t *m, uint64_t key);

#endif
