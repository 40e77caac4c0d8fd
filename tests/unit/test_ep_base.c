/* test_ep_base.c - shared endpoint state: posting order, flush waits for
 * everything older and reports untracked errors once, first error kept and
 * fanned out to every outstanding request / receive / flush, notification
 * FIFO across growth, tag matching (oldest first, masks), truncation. */
#include <stdlib.h>

#include "core/core.h"
#include "core/request.h"
#include "harness.h"
#include "transport/base/ep_base.h"

static gw_request_t *op(gw_core_t *c, gw_ep_base_t *b, int user)
{
    gw_request_t *r = gw_req_alloc(c);
    REQUIRE(r);
    r->op = GW_OP_PUT;
    if (user)
        r->flags |= GW_REQF_USER;
    else
        r->err_sink = &b->implicit_err;
    gw_ep_op_start(b, r);
    return r;
}

static gw_request_t *flush(gw_core_t *c, gw_ep_base_t *b)
{
    gw_request_t *f = gw_req_alloc(c);
    REQUIRE(f);
    f->op = GW_OP_FLUSH;
    f->flags |= GW_REQF_USER;
    gw_ep_flush_start(b, f);
    return f;
}

static gw_request_t *recv_req(gw_core_t *c, gw_ep_base_t *b, uint64_t tag, uint64_t mask, size_t len)
{
    gw_request_t *r = gw_req_alloc(c);
    REQUIRE(r);
    r->op = GW_OP_RECV;
    r->flags |= GW_REQF_USER | GW_REQF_QUEUED;
    r->value = tag;
    r->mask = mask;
    r->len = len;
    gw_list_push_back(&b->posted, &r->link);
    return r;
}

static void test_order_and_flush(gw_core_t *c)
{
    gw_ep_base_t b;
    gw_ep_base_init(&b, c);
    CHECK(gw_ep_oldest_seq(&b) == UINT64_MAX);

    /* a flush with nothing outstanding completes at once */
    gw_request_t *f0 = flush(c, &b);
    CHECK_ST(f0->status, GW_OK);
    gw_req_release(f0);

    gw_request_t *a = op(c, &b, 1), *bb = op(c, &b, 1), *cc = op(c, &b, 1);
    CHECK(a->seq < bb->seq && bb->seq < cc->seq);
    CHECK(gw_ep_oldest_seq(&b) == a->seq);
    gw_request_t *f1 = flush(c, &b);
    gw_request_t *d = op(c, &b, 1); /* posted after the flush: not covered */
    gw_request_t *f2 = flush(c, &b);

    gw_ep_op_done(&b, bb, GW_OK); /* out of order completion */
    CHECK_ST(f1->status, GW_INPROGRESS);
    CHECK(gw_ep_oldest_seq(&b) == a->seq);
    gw_ep_op_done(&b, a, GW_OK);
    CHECK_ST(f1->status, GW_INPROGRESS); /* cc still outstanding */
    gw_ep_op_done(&b, cc, GW_OK);
    CHECK_ST(f1->status, GW_OK);
    CHECK_ST(f2->status, GW_INPROGRESS); /* d still outstanding */
    gw_ep_op_done(&b, d, GW_OK);
    CHECK_ST(f2->status, GW_OK);
    CHECK(gw_list_empty(&b.outstanding) && gw_list_empty(&b.flushes));
    gw_request_t *all[] = {a, bb, cc, d, f1, f2};
    for (size_t i = 0; i < 6; i++)
        gw_req_release(all[i]);

    /* an untracked op's error is reported by the next flush, once */
    gw_request_t *u1 = op(c, &b, 0), *u2 = op(c, &b, 0);
    gw_request_t *f3 = flush(c, &b);
    gw_ep_op_done(&b, u1, GW_ERR_OUT_OF_BOUNDS);
    gw_ep_op_done(&b, u2, GW_ERR_ACCESS); /* later errors do not replace the first */
    CHECK_ST(f3->status, GW_ERR_OUT_OF_BOUNDS);
    gw_request_t *f4 = flush(c, &b);
    CHECK_ST(f4->status, GW_OK);
    gw_req_release(f3);
    gw_req_release(f4);
    CHECK_ST(b.error, GW_OK); /* op errors do not fail the endpoint */
    gw_ep_base_fini(&b);
}

static void test_fail(gw_core_t *c)
{
    gw_ep_base_t b;
    gw_ep_base_init(&b, c);
    snprintf(b.peer, sizeof(b.peer), "10.0.0.1:1234");
    gw_request_t *a = op(c, &b, 1), *bb = op(c, &b, 1);
    gw_request_t *f = flush(c, &b);
    gw_request_t *r = recv_req(c, &b, 5, ~0ull, 64);
    gw_ep_fail(&b, GW_ERR_CONN_RESET, "read(fd=%d) returned 0", 7);
    CHECK_ST(b.error, GW_ERR_CONN_RESET);
    CHECK(strstr(b.error_detail, "read(fd=7)") != NULL);
    CHECK_ST(a->status, GW_ERR_CONN_RESET);
    CHECK_ST(bb->status, GW_ERR_CONN_RESET);
    CHECK_ST(f->status, GW_ERR_CONN_RESET);
    CHECK_ST(r->status, GW_ERR_CONN_RESET);
    CHECK(gw_list_empty(&b.outstanding) && gw_list_empty(&b.posted) && gw_list_empty(&b.flushes));
    /* the first error stays */
    gw_ep_fail(&b, GW_ERR_PEER_TIMEOUT, "later");
    CHECK_ST(b.error, GW_ERR_CONN_RESET);
    CHECK(strstr(b.error_detail, "read(fd=7)") != NULL);
    /* a flush after the failure reports it */
    gw_request_t *f2 = flush(c, &b);
    CHECK_ST(f2->status, GW_ERR_CONN_RESET);
    gw_request_t *all[] = {a, bb, f, r, f2};
    for (size_t i = 0; i < 5; i++)
        gw_req_release(all[i]);
    gw_ep_base_fini(&b);
}

static void test_notify(gw_core_t *c)
{
    gw_ep_base_t b;
    gw_ep_base_init(&b, c);
    uint64_t v;
    CHECK(gw_ep_notify_pop(&b, &v) == -1);
    /* interleave so the ring wraps before it grows */
    uint64_t next_in = 0, next_out = 0;
    for (int i = 0; i < 40; i++)
        CHECK(gw_ep_notify_push(&b, next_in++) == 0);
    for (int i = 0; i < 30; i++) {
        CHECK(gw_ep_notify_pop(&b, &v) == 0);
        CHECK(v == next_out++);
    }
    for (int i = 0; i < 1000; i++)
        CHECK(gw_ep_notify_push(&b, next_in++) == 0);
    while (gw_ep_notify_pop(&b, &v) == 0) {
        if (v != next_out) {
            fprintf(stderr, "notification %llu out of order (expected %llu)\n",
                    (unsigned long long)v, (unsigned long long)next_out);
            gwt_failures++;
            break;
        }
        next_out++;
    }
    CHECK(next_out == next_in);
    gw_ep_base_fini(&b);
}

static void test_matching(gw_core_t *c)
{
    gw_ep_base_t b;
    gw_ep_base_init(&b, c);
    gw_request_t *r1 = recv_req(c, &b, 0x10, 0xF0, 8);   /* any 0x1? */
    gw_request_t *r2 = recv_req(c, &b, 0x12, ~0ull, 8);  /* exactly 0x12 */
    gw_request_t *r3 = recv_req(c, &b, 0, 0, 4);         /* wildcard */
    CHECK(gw_ep_match_posted(&b, 0x12) == r1);           /* oldest match wins */
    CHECK(gw_ep_match_posted(&b, 0x12) == r2);
    CHECK(gw_ep_match_posted(&b, 0x99) == r3);
    CHECK(gw_ep_match_posted(&b, 0x12) == NULL);
    gw_ep_recv_done(&b, r1, 8, 0x12, GW_OK);
    CHECK_ST(r1->status, GW_OK);
    CHECK(r1->length == 8 && r1->rtag == 0x12);
    gw_ep_recv_done(&b, r3, 100, 0x99, GW_OK); /* longer than its 4-byte buffer */
    CHECK_ST(r3->status, GW_ERR_TRUNCATED);
    CHECK(r3->length == 100);
    gw_ep_recv_done(&b, r2, 0, 0x12, GW_OK); /* zero-length message */
    CHECK_ST(r2->status, GW_OK);
    gw_req_release(r1);
    gw_req_release(r2);
    gw_req_release(r3);

    /* unexpected messages, matched oldest first under the receive's mask */
    for (int i = 0; i < 4; i++) {
        gw_unexp_t *u = calloc(1, sizeof(*u));
        REQUIRE(u);
        u->tag = (i % 2) ? 0x200 + (uint64_t)i : 0x100 + (uint64_t)i;
        u->len = (size_t)i;
        u->data = malloc(4);
        gw_list_push_back(&b.unexpected, &u->link);
    }
    gw_unexp_t *u = gw_ep_match_unexp(&b, 0x200, 0xF00);
    CHECK(u && u->tag == 0x201);
    free(u->data);
    free(u);
    u = gw_ep_match_unexp(&b, 0x100, 0xF00);
    CHECK(u && u->tag == 0x100);
    free(u->data);
    free(u);
    CHECK(gw_ep_match_unexp(&b, 0x300, 0xF00) == NULL);
    CHECK(gw_list_len(&b.unexpected) == 2);
    gw_ep_base_fini(&b); /* frees the remaining unexpected messages */
}

int main(void)
{
    gw_core_t c;
    char err[256];
    REQUIRE_OK(gw_core_init(&c, err, sizeof(err)));
    test_order_and_flush(&c);
    test_fail(&c);
    test_notify(&c);
    test_matching(&c);
    gw_core_fini(&c);
    return gwt_done("unit_ep_base");
}
