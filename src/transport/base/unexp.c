/* SPDX-License-Identifier: Apache-2.0 */
/* unexp.c - the unexpected-message store (ep_base.h): records pooled per
 * endpoint, owned by the base from the transport's take to the receive.
 *
 * A stream of small sends that outruns the receiver's posted receives makes
 * every message unexpected: two allocations (record, payload) and two frees
 * each were most of the receiver's cost (callgrind: malloc/free 60% of its
 * instructions for 1 KiB sends).  Messages of up to GW_UNEXP_CLASS_MAX bytes
 * get one block, record and payload together, from a free list of their
 * size class; freed blocks go back to the list (up to GW_UNEXP_KEEP_BYTES
 * of payload room per class), larger messages are allocated as before. */
#include <stdlib.h>

#include "mem/mem_copy.h"
#include "transport/base/ep_base.h"

static const size_t class_bytes[GW_UNEXP_CLASSES] = {256, 1024, GW_UNEXP_CLASS_MAX};

static gw_unexp_t *unexp_new(gw_ep_base_t *b, size_t len)
{
    for (int k = 0; k < GW_UNEXP_CLASSES; k++) {
        if (len > class_bytes[k])
            continue;
        gw_unexp_t *u;
        gw_list_t *l = gw_list_first(&b->unexp_free[k]);
        if (l) {
            gw_list_del(l);
            b->unexp_nfree[k]--;
            u = gw_container_of(l, gw_unexp_t, link);
        } else if (!(u = malloc(sizeof(*u) + class_bytes[k]))) {
            return NULL;
        }
        *u = (gw_unexp_t){.len = len, .data = u + 1, .pool_class = k + 1};
        gw_list_init(&u->link);
        return u;
    }
    gw_unexp_t *u = calloc(1, sizeof(*u));
    void *data = malloc(len ? len : 1);
    if (!u || !data) {
        free(u);
        free(data);
        return NULL;
    }
    u->len = len;
    u->data = data;
    gw_list_init(&u->link);
    return u;
}

gw_unexp_t *gw_ep_unexp_eager(gw_ep_base_t *b, uint64_t tag, size_t len)
{
    gw_unexp_t *u = unexp_new(b, len);
    if (!u)
        return NULL;
    u->tag = tag;
    u->filling = 1;
    gw_list_push_back(&b->unexpected, &u->link); /* its place in the matching order is now */
    return u;
}

void gw_ep_unexp_filled(gw_ep_base_t *b, gw_unexp_t *u)
{
    u->filling = 0;
    /* receives that matched it while it filled were posted after its header
     * arrived (an older one would have taken it then): the oldest is its */
    gw_request_t *r = gw_ep_match_posted(b, u->tag);
    if (!r)
        return;
    gw_list_del(&u->link);
    gw_ep_recv_unexp(b, r, u, NULL, NULL);
}

gw_status_t gw_ep_unexp_rndv(gw_ep_base_t *b, uint64_t tag, size_t len, uint64_t handle, uint64_t handle2)
{
    gw_unexp_t *u = unexp_new(b, 0); /* a pooled block of the smallest class */
    if (!u)
        return GW_ERR_NOMEM;
    u->data = NULL;
    u->tag = tag;
    u->len = len;
    u->handle = handle;
    u->handle2 = handle2;
    gw_list_push_back(&b->unexpected, &u->link);
    return GW_OK;
}

void gw_ep_recv_eager(gw_ep_base_t *b, gw_request_t *req, const void *data, size_t len, uint64_t tag)
{
    gw_status_t st = gw_mem_copy_to(b->core, req->lmem, req->buf, data, GW_MIN(len, req->len));
    gw_ep_recv_done(b, req, len, tag, st);
}

gw_status_t gw_ep_recv_unexp(gw_ep_base_t *b, gw_request_t *req, gw_unexp_t *u,
                             gw_status_t (*start)(struct gw_tl_ep *tl, gw_request_t *req, gw_unexp_t *u),
                             struct gw_tl_ep *tl)
{
    gw_status_t st = GW_OK;
    if (u->data)
        gw_ep_recv_eager(b, req, u->data, u->len, u->tag);
    else
        st = start(tl, req, u);
    gw_ep_unexp_free(b, u);
    return st;
}

void gw_ep_unexp_free(gw_ep_base_t *b, gw_unexp_t *u)
{
    if (!u)
        return;
    gw_list_del(&u->link); /* a record still filling is queued */
    int k = u->pool_class - 1;
    if (k < 0) { /* not pooled: record and payload apart */
        free(u->data);
        free(u);
        return;
    }
    if (b->unexp_nfree[k] >= GW_UNEXP_KEEP_BYTES / class_bytes[k]) {
        free(u);
        return;
    }
    gw_list_push_front(&b->unexp_free[k], &u->link);
    b->unexp_nfree[k]++;
}

void gw_ep_unexp_pool_init(gw_ep_base_t *b)
{
    for (int k = 0; k < GW_UNEXP_CLASSES; k++) {
        gw_list_init(&b->unexp_free[k]);
        b->unexp_nfree[k] = 0;
    }
}

void gw_ep_unexp_pool_fini(gw_ep_base_t *b)
{
    for (int k = 0; k < GW_UNEXP_CLASSES; k++) {
        gw_list_t *l;
        while ((l = gw_list_first(&b->unexp_free[k])) != NULL) {
            gw_list_del(l);
            free(gw_container_of(l, gw_unexp_t, link));
        }
        b->unexp_nfree[k] = 0;
    }
}
