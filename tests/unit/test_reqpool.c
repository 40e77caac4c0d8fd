/* SPDX-License-Identifier: Apache-2.0 */
/* test_reqpool.c - the core's request pool: slabs, recycling of untracked
 * requests at completion, caller-held requests stay readable until released,
 * release while in progress defers the recycle, region use counts; the
 * per-operation state pool beside it. */
#include "core/core.h"
#include "core/request.h"
#include "harness.h"

#define MANY 300 /* more than several slabs */

int main(void)
{
    gw_core_t c;
    char err[256];
    REQUIRE_OK(gw_core_init(&c, err, sizeof(err)));

    static gw_request_t *r[MANY];
    for (int i = 0; i < MANY; i++) {
        r[i] = gw_req_alloc(&c);
        REQUIRE(r[i] != NULL);
        CHECK(r[i]->status == GW_INPROGRESS);
        CHECK(r[i]->core == &c);
        CHECK(r[i]->flags == 0 && r[i]->len == 0 && r[i]->first_err == GW_OK);
        CHECK(gw_list_empty(&r[i]->tl_link));
        r[i]->len = (size_t)i + 1; /* dirty it: the next alloc must zero it */
        for (int j = 0; j < i; j++)
            if (r[j] == r[i]) {
                fprintf(stderr, "request %d handed out twice\n", i);
                gwt_failures++;
            }
    }
    CHECK(gw_list_len(&c.req_slabs) >= MANY / 64);

    /* untracked (no USER flag): recycled at completion */
    size_t free_before = gw_list_len(&c.req_free);
    gw_req_complete(r[0], GW_OK);
    CHECK(gw_list_len(&c.req_free) == free_before + 1);
    gw_request_t *again = gw_req_alloc(&c);
    CHECK(again == r[0]); /* LIFO reuse keeps it cache-warm */
    CHECK(again->len == 0 && again->status == GW_INPROGRESS);

    /* caller-held: completion keeps it, status readable; a second completion is ignored */
    r[1]->flags |= GW_REQF_USER;
    free_before = gw_list_len(&c.req_free);
    gw_req_complete(r[1], GW_ERR_CONN_RESET);
    CHECK(r[1]->status == GW_ERR_CONN_RESET);
    gw_req_complete(r[1], GW_OK);
    CHECK(r[1]->status == GW_ERR_CONN_RESET);
    CHECK(gw_list_len(&c.req_free) == free_before);
    gw_req_release(r[1]);
    CHECK(gw_list_len(&c.req_free) == free_before + 1);

    /* released while in progress: recycled when it completes */
    r[2]->flags |= GW_REQF_USER;
    free_before = gw_list_len(&c.req_free);
    gw_req_release(r[2]);
    CHECK(r[2]->flags & GW_REQF_FREED);
    CHECK(gw_list_len(&c.req_free) == free_before);
    gw_req_complete(r[2], GW_OK);
    CHECK(gw_list_len(&c.req_free) == free_before + 1);

    /* the local region's use count drops exactly once */
    uint32_t inflight = 2;
    r[3]->flags |= GW_REQF_USER;
    r[3]->use_count = &inflight;
    gw_req_complete(r[3], GW_OK);
    CHECK(inflight == 1);
    CHECK(r[3]->use_count == NULL);
    gw_req_complete(r[3], GW_OK);
    CHECK(inflight == 1);
    gw_req_release(r[3]);
    gw_req_release(NULL); /* harmless */

    for (int i = 4; i < MANY; i++)
        gw_req_complete(r[i], GW_OK);
    /* per-operation state: zeroed blocks by size class, reused once put
     * back (dirtied first: the next get must zero it), at most
     * GW_OP_STATE_KEEP_SMALL / GW_OP_STATE_KEEP kept per class; larger
     * blocks malloc'd and freed */
    size_t sizes[] = {1, 256, 257, 2048, 2049, 16384, 100000};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        unsigned char *a = gw_op_state_get(&c, sizes[i]);
        REQUIRE(a != NULL);
        int zero = 1;
        for (size_t k = 0; k < sizes[i]; k++)
            zero &= a[k] == 0;
        CHECK(zero);
        memset(a, 0xab, sizes[i]);
        gw_op_state_put(&c, a);
        unsigned char *b = gw_op_state_get(&c, sizes[i]);
        REQUIRE(b != NULL);
        if (sizes[i] <= 16384)
            CHECK(b == a); /* the class's block again */
        zero = 1;
        for (size_t k = 0; k < sizes[i]; k++)
            zero &= b[k] == 0;
        CHECK(zero);
        gw_op_state_put(&c, b);
    }
    static void *blk[GW_OP_STATE_KEEP_SMALL + 10];
    for (int i = 0; i < GW_OP_STATE_KEEP_SMALL + 10; i++)
        REQUIRE((blk[i] = gw_op_state_get(&c, 100)) != NULL);
    for (int i = 0; i < GW_OP_STATE_KEEP_SMALL + 10; i++)
        gw_op_state_put(&c, blk[i]);
    CHECK(c.op_nfree[0] == GW_OP_STATE_KEEP_SMALL); /* the small class keeps a window's worth */
    for (int i = 0; i < GW_OP_STATE_KEEP + 10; i++)
        REQUIRE((blk[i] = gw_op_state_get(&c, 1000)) != NULL);
    for (int i = 0; i < GW_OP_STATE_KEEP + 10; i++)
        gw_op_state_put(&c, blk[i]);
    CHECK(c.op_nfree[1] == GW_OP_STATE_KEEP);
    gw_op_state_put(&c, NULL);

    gw_core_fini(&c); /* frees the slabs (ASan/valgrind see leaks otherwise) */
    return gwt_done("unit_reqpool");
}
