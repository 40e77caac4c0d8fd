/* SPDX-License-Identifier: Apache-2.0 */
/* list.h - intrusive circular doubly-linked list (core layer). */
#ifndef GW_CORE_LIST_H
#define GW_CORE_LIST_H

#include <stddef.h>

typedef struct gw_list {
    struct gw_list *prev, *next;
} gw_list_t;

#define gw_container_of(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))

static inline void gw_list_init(gw_list_t *h) { h->prev = h->next = h; }
static inline int gw_list_empty(const gw_list_t *h) { return h->next == h; }

static inline void gw_list_insert_between_(gw_list_t *n, gw_list_t *p, gw_list_t *nx)
{
    n->prev = p;
    n->next = nx;
    p->next = n;
    nx->prev = n;
}
static inline void gw_list_push_back(gw_list_t *h, gw_list_t *n) { gw_list_insert_between_(n, h->prev, h); }
static inline void gw_list_push_front(gw_list_t *h, gw_list_t *n) { gw_list_insert_between_(n, h, h->next); }
static inline void gw_list_del(gw_list_t *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
    n->prev = n->next = n;
}
static inline gw_list_t *gw_list_first(const gw_list_t *h) { return h->next == h ? NULL : h->next; }
static inline size_t gw_list_len(const gw_list_t *h)
{
    size_t n = 0;
    for (const gw_list_t *p = h->next; p != h; p = p->next)
        n++;
    return n;
}

#define gw_list_for_each_safe(pos, tmp, head)                                                  \
    for ((pos) = (head)->next, (tmp) = (pos)->next; (pos) != (head); (pos) = (tmp), (tmp) = (pos)->next)

#endif
