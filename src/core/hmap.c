/* SPDX-License-Identifier: Apache-2.0 */
/* hmap.c - linear-probing hash map. */
#include "hmap.h"

#include <stdlib.h>

#define TOMB UINT64_MAX

static size_t slot_of(uint64_t k, size_t cap)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return (size_t)k & (cap - 1);
}

void gw_hmap_init(gw_hmap_t *m)
{
    m->keys = NULL;
    m->vals = NULL;
    m->cap = m->count = m->used = 0;
}

void gw_hmap_fini(gw_hmap_t *m)
{
    free(m->keys);
    free(m->vals);
    gw_hmap_init(m);
}

static int grow(gw_hmap_t *m)
{
    size_t ncap = m->cap ? m->cap * 2 : 64;
    if (m->count * 4 < m->cap) /* many tombstones: rehash at the same size */
        ncap = m->cap;
    uint64_t *nk = calloc(ncap, sizeof(*nk));
    void **nv = calloc(ncap, sizeof(*nv));
    if (!nk || !nv) {
        free(nk);
        free(nv);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++) {
        uint64_t k = m->keys[i];
        if (k == 0 || k == TOMB)
            continue;
        size_t s = slot_of(k, ncap);
        while (nk[s])
            s = (s + 1) & (ncap - 1);
        nk[s] = k;
        nv[s] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = nk;
    m->vals = nv;
    m->cap = ncap;
    m->used = m->count;
    return 0;
}

int gw_hmap_put(gw_hmap_t *m, uint64_t key, void *val)
{
    if (key == 0 || key == TOMB)
        return -1;
    if ((m->used + 1) * 2 > m->cap && grow(m) != 0)
        return -1;
    size_t s = slot_of(key, m->cap), tomb = (size_t)-1;
    while (m->keys[s]) {
        if (m->keys[s] == key) {
            m->vals[s] = val;
            return 0;
        }
        if (m->keys[s] == TOMB && tomb == (size_t)-1)
            tomb = s;
        s = (s + 1) & (m->cap - 1);
    }
    if (tomb != (size_t)-1)
        s = tomb;
    else
        m->used++;
    m->keys[s] = key;
    m->vals[s] = val;
    m->count++;
    return 0;
}

static size_t find(const gw_hmap_t *m, uint64_t key)
{
    if (!m->cap || key == 0 || key == TOMB)
        return (size_t)-1;
    size_t s = slot_of(key, m->cap);
    while (m->keys[s]) {
        if (m->keys[s] == key)
            return s;
        s = (s + 1) & (m->cap - 1);
    }
    return (size_t)-1;
}

void *gw_hmap_get(const gw_hmap_t *m, uint64_t key)
{
    size_t s = find(m, key);
    return s == (size_t)-1 ? NULL : m->vals[s];
}

void *gw_hmap_del(gw_hmap_t *m, uint64_t key)
{
    size_t s = find(m, key);
    if (s == (size_t)-1)
        return NULL;
    void *v = m->vals[s];
    m->keys[s] = TOMB;
    m->vals[s] = NULL;
    m->count--;
    return v;
}
