/* SPDX-License-Identifier: Apache-2.0 */
/* test_ep_base.c - shared endpoint state: posting order, flush waits for
 * everything older and reports untracked errors once, first error kept and
 * fanned out to every outstanding request / receive / flush, notification
 * FIFO across growth, tag matching (oldest first, masks), truncation; the
 * base pieces the transports share: the on_fail teardown hook (run once, by
 * the first failure), the unexpected-message store (eager and rendezvous
 * records, delivery, truncation), generation-counted op ids, liveness
 * verdicts and region checks; deferred notifications (sent in posting
 * order once every older operation completed, none for a failed or
 * refused operation). */
#include <stdlib.h>

#include "core/core.h"
#include "core/request.h"
#include "harness.h"
#include "transport/base/ep_base.h"
#include "transport/base/liveness.h"
#include "transport/base/op_table.h"
#include "transport/base/region.h"

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
    CHECK(gw_ep_notify_pop(&b, &v, NULL) == -1);
    /* interleave so the ring wraps before it grows */
    uint64_t next_in = 0, next_out = 0;
    for (int i = 0; i < 40; i++)
        CHECK(gw_ep_notify_push(&b, next_in++) == 0);
    for (int i = 0; i < 30; i++) {
        CHECK(gw_ep_notify_pop(&b, &v, NULL) == 0);
        CHECK(v == next_out++);
    }
    for (int i = 0; i < 1000; i++)
        CHECK(gw_ep_notify_push(&b, next_in++) == 0);
    while (gw_ep_notify_pop(&b, &v, NULL) == 0) {
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

static int hook_calls;
static gw_status_t hook_status;
static void on_fail(void *arg, gw_status_t st)
{
    gw_ep_base_t *b = arg;
    hook_calls++;
    hook_status = st;
    CHECK(gw_ep_failed(b)); /* the latch is set before the teardown runs */
}

static void test_fail_hook(gw_core_t *c)
{
    gw_ep_base_t b;
    gw_ep_base_init(&b, c);
    CHECK(!gw_ep_failed(&b));
    b.on_fail = on_fail;
    b.on_fail_arg = &b;
    hook_calls = 0;
    gw_ep_fail(&b, GW_ERR_PEER_TIMEOUT, "first");
    gw_ep_fail(&b, GW_ERR_CONN_RESET, "second");
    CHECK(hook_calls == 1);
    CHECK_ST(hook_status, GW_ERR_PEER_TIMEOUT);
    CHECK(gw_ep_failed(&b));
    gw_ep_base_fini(&b);
}

static gw_status_t started;
static gw_unexp_t *started_u;
static gw_status_t start_rndv(struct gw_tl_ep *tl, gw_request_t *req, gw_unexp_t *u)
{
    (void)tl;
    (void)req;
    CHECK(u->data == NULL && u->handle == 77 && u->handle2 == 78 && u->len == 5000);
    started_u = u;
    return started;
}

static void test_unexp_store(gw_core_t *c)
{
    gw_ep_base_t b;
    gw_ep_base_init(&b, c);
    /* eager: the base gives the room and queues it, the transport fills it */
    gw_unexp_t *u = gw_ep_unexp_eager(&b, 9, 6);
    REQUIRE(u && u->data && u->len == 6 && u->tag == 9);
    CHECK(gw_ep_peek_unexp(&b, 9, ~0ull) == NULL); /* filling: nobody takes it yet */
    memcpy(u->data, "abcdef", 6);
    gw_ep_unexp_filled(&b, u);
    REQUIRE_OK(gw_ep_unexp_rndv(&b, 10, 5000, 77, 78));
    /* a short receive matches the eager one: truncated, first bytes copied */
    char buf[4] = {0};
    gw_request_t *r = gw_req_alloc(c);
    REQUIRE(r);
    r->op = GW_OP_RECV;
    r->flags |= GW_REQF_USER;
    r->buf = buf;
    r->len = sizeof(buf);
    gw_unexp_t *m = gw_ep_match_unexp(&b, 9, ~0ull);
    REQUIRE(m == u);
    CHECK_ST(gw_ep_recv_unexp(&b, r, m, start_rndv, NULL), GW_OK);
    CHECK_ST(r->status, GW_ERR_TRUNCATED);
    CHECK(r->length == 6 && r->rtag == 9 && !memcmp(buf, "abcd", 4));
    gw_req_release(r);
    /* a rendezvous goes to the transport's start, whose status comes back */
    gw_request_t *r2 = gw_req_alloc(c);
    REQUIRE(r2);
    r2->op = GW_OP_RECV;
    r2->flags |= GW_REQF_USER;
    started = GW_ERR_NOMEM;
    m = gw_ep_match_unexp(&b, 10, ~0ull);
    REQUIRE(m);
    CHECK_ST(gw_ep_recv_unexp(&b, r2, m, start_rndv, NULL), GW_ERR_NOMEM);
    CHECK(started_u == m);
    CHECK(gw_list_empty(&b.unexpected));
    CHECK_ST(r2->status, GW_INPROGRESS); /* the transport completes it later */
    gw_ep_recv_done(&b, r2, 5000, 10, GW_OK);
    gw_req_release(r2);
    /* records never received are the base's to free */
    u = gw_ep_unexp_eager(&b, 11, 100000); /* too large for the pool */
    REQUIRE(u);
    gw_ep_unexp_filled(&b, u);
    REQUIRE_OK(gw_ep_unexp_rndv(&b, 12, 1, 1, 0));
    u = gw_ep_unexp_eager(&b, 13, 10); /* a payload that never completed */
    REQUIRE(u);
    gw_ep_unexp_free(&b, u); /* leaves the queue too */
    CHECK(gw_list_len(&b.unexpected) == 2);
    gw_ep_base_fini(&b);
}

static gw_request_t *buf_req(gw_core_t *c, void *buf, size_t len, uint64_t tag, uint64_t mask)
{
    gw_request_t *r = gw_req_alloc(c);
    REQUIRE(r);
    r->op = GW_OP_RECV;
    r->flags |= GW_REQF_USER;
    r->buf = buf;
    r->len = len;
    r->value = tag;
    r->mask = mask;
    return r;
}

/* What api/ops.c's recv_post does: take the unexpected message, or post. */
static void post_recv(gw_ep_base_t *b, gw_request_t *r)
{
    gw_unexp_t *u = gw_ep_match_unexp(b, r->value, r->mask);
    if (u) {
        CHECK_ST(gw_ep_recv_unexp(b, r, u, start_rndv, NULL), GW_OK);
        return;
    }
    r->flags |= GW_REQF_QUEUED;
    gw_list_push_back(&b->posted, &r->link);
}

/* Messages match receives in the order their headers arrived, even when a
 * receive is posted while the older one's payload is still arriving (the
 * NCCL plugin's flake: a 65537-byte tag-0 message landed in the receive
 * meant for the 4096-byte tag-0 message still being read). */
static void test_unexp_order_while_filling(gw_core_t *c)
{
    gw_ep_base_t b;
    gw_ep_base_init(&b, c);
    char big[4096], small[64], other[16];
    memset(big, 0, sizeof(big));
    memset(small, 0, sizeof(small));
    memset(other, 0, sizeof(other));
    /* an older, complete message of another tag stays receivable past it */
    gw_unexp_t *o = gw_ep_unexp_eager(&b, 7, 3);
    REQUIRE(o);
    memcpy(o->data, "old", 3);
    gw_ep_unexp_filled(&b, o);
    /* M1: tag 0, 4000 bytes, header in, payload half there */
    gw_unexp_t *m1 = gw_ep_unexp_eager(&b, 0, 4000);
    REQUIRE(m1);
    memset(m1->data, 0x11, 2000);
    /* R1 (tag 0) and R2 (any tag) are posted now: neither may take a younger message */
    gw_request_t *r1 = buf_req(c, big, sizeof(big), 0, ~0ull);
    post_recv(&b, r1);
    CHECK_ST(r1->status, GW_INPROGRESS);
    gw_request_t *r2 = buf_req(c, other, sizeof(other), 0, 0); /* mask 0: the oldest, tag 7 */
    post_recv(&b, r2);
    CHECK_ST(r2->status, GW_OK);
    CHECK(r2->rtag == 7 && r2->length == 3 && !memcmp(other, "old", 3));
    /* M1's payload completes: R1, posted while it filled, gets it */
    memset((char *)m1->data + 2000, 0x22, 2000);
    gw_ep_unexp_filled(&b, m1);
    CHECK_ST(r1->status, GW_OK);
    CHECK(r1->length == 4000 && r1->rtag == 0 && big[0] == 0x11 && big[3999] == 0x22);
    CHECK(gw_list_empty(&b.posted) && gw_list_empty(&b.unexpected));
    /* M2: tag 0, 40 bytes, with no receive waiting: queued for the next */
    gw_unexp_t *m2 = gw_ep_unexp_eager(&b, 0, 40);
    REQUIRE(m2);
    memset(m2->data, 0x33, 40);
    gw_ep_unexp_filled(&b, m2);
    gw_request_t *r3 = buf_req(c, small, sizeof(small), 0, ~0ull);
    post_recv(&b, r3);
    CHECK_ST(r3->status, GW_OK);
    CHECK(r3->length == 40 && small[39] == 0x33);
    gw_req_release(r1);
    gw_req_release(r2);
    gw_req_release(r3);
    gw_ep_base_fini(&b);
}

static void test_op_table(gw_core_t *c)
{
    gw_op_table_t t;
    gw_op_table_init(&t);
    gw_request_t *rs[300];
    uint64_t ids[300];
    for (int i = 0; i < 300; i++) { /* past the first growth */
        rs[i] = gw_req_alloc(c);
        REQUIRE(rs[i]);
        REQUIRE(gw_op_table_alloc(&t, rs[i], &ids[i]) == 0);
    }
    CHECK(t.used == 300);
    for (int i = 0; i < 300; i++)
        CHECK(gw_op_table_get(&t, ids[i]) == rs[i]);
    gw_op_table_free(&t, rs[7]);
    CHECK(gw_op_table_get(&t, ids[7]) == NULL); /* stale */
    uint64_t id;
    REQUIRE(gw_op_table_alloc(&t, rs[7], &id) == 0);
    CHECK((uint32_t)id == (uint32_t)ids[7] && id != ids[7]); /* index reused, generation moved on */
    CHECK(gw_op_table_get(&t, ids[7]) == NULL && gw_op_table_get(&t, id) == rs[7]);
    CHECK(gw_op_table_get(&t, (uint64_t)1 << 32 | 100000) == NULL); /* out of range */
    gw_op_table_free(&t, rs[7]);
    gw_op_table_free(&t, rs[7]); /* twice: no effect */
    CHECK(t.used == 299);
    for (int i = 0; i < 300; i++) {
        gw_op_table_free(&t, rs[i]);
        rs[i]->flags |= GW_REQF_USER;
        gw_req_complete(rs[i], GW_OK);
        gw_req_release(rs[i]);
    }
    CHECK(t.used == 0);
    gw_op_table_fini(&t);
}

/* Narrow ids (verbs: 8 bits of index under 16 of generation) and clear. */
static void test_op_table_short(gw_core_t *c)
{
    gw_op_table_t t;
    gw_op_table_init(&t);
    gw_request_t *a = gw_req_alloc(c), *b = gw_req_alloc(c);
    REQUIRE(a && b);
    uint64_t id;
    REQUIRE(gw_op_table_alloc(&t, a, &id) == 0);
    REQUIRE(gw_op_table_alloc(&t, b, &id) == 0);
    uint64_t sa = gw_op_table_short_id(&t, a, 8, 16), sb = gw_op_table_short_id(&t, b, 8, 16);
    CHECK(sa < (1u << 24) && sb < (1u << 24) && sa != sb);
    CHECK(gw_op_table_get_short(&t, sa, 8, 16) == a && gw_op_table_get_short(&t, sb, 8, 16) == b);
    gw_op_table_free(&t, a);
    CHECK(gw_op_table_get_short(&t, sa, 8, 16) == NULL); /* stale */
    REQUIRE(gw_op_table_alloc(&t, a, &id) == 0);
    uint64_t sa2 = gw_op_table_short_id(&t, a, 8, 16);
    CHECK((sa2 & 0xff) == (sa & 0xff) && sa2 != sa); /* same index, generation moved on */
    CHECK(gw_op_table_get_short(&t, sa, 8, 16) == NULL && gw_op_table_get_short(&t, sa2, 8, 16) == a);
    CHECK(gw_op_table_get_short(&t, 0xffffff, 8, 16) == NULL); /* a forged one */
    gw_op_table_clear(&t);
    CHECK(t.used == 0 && gw_op_table_get_short(&t, sa2, 8, 16) == NULL &&
          gw_op_table_get_short(&t, sb, 8, 16) == NULL);
    REQUIRE(gw_op_table_alloc(&t, b, &id) == 0); /* usable after */
    CHECK(t.used == 1 && gw_op_table_get(&t, id) == b);
    gw_op_table_fini(&t);
    gw_request_t *both[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        both[i]->flags |= GW_REQF_USER;
        gw_req_complete(both[i], GW_OK);
        gw_req_release(both[i]);
    }
}

static void test_liveness_region(gw_core_t *c)
{
    gw_ep_base_t b;
    gw_ep_base_init(&b, c);
    long saved = c->peer_timeout_ms;
    c->peer_timeout_ms = 3000;
    uint64_t ms = 1000000ull, t0 = 1000000 * ms, ping = 0, idle;
    gw_liveness_t l = {0};
    CHECK(gw_liveness_due(&l, t0) && !gw_liveness_due(&l, t0 + 5 * ms) && gw_liveness_due(&l, t0 + 25 * ms));
    b.last_rx_ns = t0;
    CHECK(gw_liveness_judge(&b, 0, t0 + 5000 * ms, &ping, &idle) == GW_LIVE_OK); /* no work: no verdict */
    CHECK(b.last_rx_ns == t0 + 5000 * ms);
    b.last_rx_ns = t0;
    CHECK(gw_liveness_judge(&b, 1, t0 + 500 * ms, &ping, &idle) == GW_LIVE_OK && idle == 500 * ms);
    CHECK(gw_liveness_judge(&b, 1, t0 + 1500 * ms, &ping, &idle) == GW_LIVE_PING && ping == t0 + 1500 * ms);
    CHECK(gw_liveness_judge(&b, 1, t0 + 1600 * ms, &ping, &idle) == GW_LIVE_OK); /* pinged a moment ago */
    CHECK(gw_liveness_judge(&b, 1, t0 + 3100 * ms, &ping, &idle) == GW_LIVE_DEAD);
    c->peer_timeout_ms = saved;
    gw_ep_base_fini(&b);
    CHECK_ST(gw_region_allows(0x1000, 0x100, GW_ACCESS_REMOTE_READ, 0x1000, 0x100, GW_ACCESS_REMOTE_READ), GW_OK);
    CHECK_ST(gw_region_allows(0x1000, 0x100, GW_ACCESS_REMOTE_READ, 0x1001, 0x100, GW_ACCESS_REMOTE_READ),
             GW_ERR_OUT_OF_BOUNDS);
    CHECK_ST(gw_region_allows(0x1000, 0x100, GW_ACCESS_REMOTE_READ, 0x1000, 8, GW_ACCESS_REMOTE_WRITE),
             GW_ERR_ACCESS);
    gw_mem_t *m = (gw_mem_t *)1;
    CHECK_ST(gw_region_check(c, 0x1234567, 0, 8, GW_ACCESS_REMOTE_READ, &m), GW_ERR_INVALID_KEY);
    CHECK(m == NULL);
}

/* Deferred notifications: the base's sender records what it was asked to send. */
static uint64_t sent[8];
static int nsent;
static gw_status_t send_result;
static gw_ep_base_t *send_fails_ep; /* when set, sending fails this endpoint first */
static gw_status_t notify_out(void *arg, gw_request_t *req)
{
    (void)arg;
    CHECK(!(req->flags & GW_REQF_QUEUED)); /* off the outstanding list before it is sent */
    CHECK_ST(req->status, GW_INPROGRESS);
    if (send_fails_ep) {
        gw_ep_fail(send_fails_ep, GW_ERR_CONN_RESET, "send of the notification failed");
        return GW_ERR_CONN_RESET;
    }
    if (nsent < 8)
        sent[nsent++] = req->value;
    return send_result;
}

static gw_request_t *noted(gw_core_t *c, gw_ep_base_t *b, uint64_t value)
{
    gw_request_t *r = op(c, b, 1);
    r->op = GW_OP_PUT_NOTIFY;
    r->value = value;
    CHECK_ST(gw_ep_notify_defer(b, r), GW_OK);
    return r;
}

static void test_deferred_notify(gw_core_t *c)
{
    gw_ep_base_t b;
    gw_ep_base_init(&b, c);
    nsent = 0;
    send_result = GW_OK;
    send_fails_ep = NULL;

    /* no sender: a deferral is refused, not left to hang */
    gw_request_t *x = op(c, &b, 1);
    CHECK_ST(gw_ep_notify_defer(&b, x), GW_ERR_INVALID);
    b.notify_out = notify_out;
    CHECK_ST(gw_ep_notify_defer(&b, x), GW_OK);
    CHECK_ST(gw_ep_notify_defer(&b, x), GW_ERR_INVALID); /* twice: refused */
    gw_ep_op_done(&b, x, GW_OK);
    CHECK(nsent == 1 && sent[0] == 0); /* oldest and in place: sent at once */
    CHECK_ST(x->status, GW_OK);
    CHECK(gw_ep_notify_pending(&b) == 0);
    gw_req_release(x);

    /* a put, then two put_notify: the later lands first, the put last */
    nsent = 0;
    gw_request_t *p = op(c, &b, 1), *n1 = noted(c, &b, 11), *n2 = noted(c, &b, 12);
    gw_request_t *fl = flush(c, &b);
    CHECK(gw_ep_notify_pending(&b) == 2);
    gw_ep_op_done(&b, n2, GW_OK);
    gw_ep_op_done(&b, n1, GW_OK);
    CHECK(nsent == 0); /* the put is still moving */
    CHECK_ST(n1->status, GW_INPROGRESS);
    CHECK_ST(n2->status, GW_INPROGRESS);
    CHECK_ST(fl->status, GW_INPROGRESS); /* the held ones are still outstanding */
    gw_ep_op_done(&b, p, GW_OK);
    CHECK(nsent == 2 && sent[0] == 11 && sent[1] == 12); /* posting order */
    CHECK_ST(n1->status, GW_OK);
    CHECK_ST(n2->status, GW_OK);
    CHECK_ST(fl->status, GW_OK);
    CHECK(gw_ep_notify_pending(&b) == 0);
    gw_request_t *done1[] = {p, n1, n2, fl};
    for (size_t i = 0; i < 4; i++)
        gw_req_release(done1[i]);

    /* a put_notify that fails sends nothing; the next one still goes */
    nsent = 0;
    gw_request_t *f1 = noted(c, &b, 21), *f2 = noted(c, &b, 22);
    gw_ep_op_done(&b, f2, GW_OK);
    gw_ep_op_done(&b, f1, GW_ERR_OUT_OF_BOUNDS);
    CHECK_ST(f1->status, GW_ERR_OUT_OF_BOUNDS);
    CHECK(nsent == 1 && sent[0] == 22);
    CHECK_ST(f2->status, GW_OK);
    gw_req_release(f1);
    gw_req_release(f2);

    /* a posting refused after the deferral (tcp out of memory): taken back,
     * and a later one is not held behind it, nor is its value ever sent */
    nsent = 0;
    gw_request_t *u = noted(c, &b, 31);
    gw_ep_op_unstart(&b, u);
    CHECK(!(u->flags & (GW_REQF_QUEUED | GW_REQF_NDEFER)));
    CHECK(gw_ep_notify_pending(&b) == 0);
    u->status = GW_ERR_NOMEM; /* as submit() drops it */
    gw_req_release(u);
    gw_request_t *v = noted(c, &b, 32);
    gw_ep_op_done(&b, v, GW_OK);
    CHECK(nsent == 1 && sent[0] == 32);
    gw_req_release(v);

    /* the sender's error completes the request with it */
    nsent = 0;
    send_result = GW_ERR_NOMEM;
    gw_request_t *w = noted(c, &b, 41);
    gw_ep_op_done(&b, w, GW_OK);
    CHECK_ST(w->status, GW_ERR_NOMEM);
    CHECK(gw_ep_notify_pending(&b) == 0);
    gw_req_release(w);
    send_result = GW_OK;

    /* sending fails the endpoint: the one being sent and the rest fail */
    nsent = 0;
    gw_request_t *h1 = noted(c, &b, 51), *h2 = noted(c, &b, 52), *h3 = op(c, &b, 1);
    gw_ep_op_done(&b, h2, GW_OK);
    send_fails_ep = &b;
    gw_ep_op_done(&b, h1, GW_OK);
    CHECK_ST(h1->status, GW_ERR_CONN_RESET);
    CHECK_ST(h2->status, GW_ERR_CONN_RESET);
    CHECK_ST(h3->status, GW_ERR_CONN_RESET);
    CHECK(nsent == 0);
    CHECK(gw_ep_notify_pending(&b) == 0);
    CHECK(gw_list_empty(&b.outstanding));
    send_fails_ep = NULL;
    gw_request_t *hs[] = {h1, h2, h3};
    for (size_t i = 0; i < 3; i++)
        gw_req_release(hs[i]);
    gw_ep_base_fini(&b);

    /* the endpoint fails while one is held: no notification, it fails */
    gw_ep_base_init(&b, c);
    b.notify_out = notify_out;
    nsent = 0;
    gw_request_t *g = op(c, &b, 1), *gn = noted(c, &b, 61);
    gw_ep_op_done(&b, gn, GW_OK);
    gw_ep_fail(&b, GW_ERR_PEER_TIMEOUT, "peer silent");
    CHECK_ST(g->status, GW_ERR_PEER_TIMEOUT);
    CHECK_ST(gn->status, GW_ERR_PEER_TIMEOUT);
    CHECK(nsent == 0 && gw_ep_notify_pending(&b) == 0);
    gw_req_release(g);
    gw_req_release(gn);
    gw_ep_base_fini(&b);
}

int main(void)
{
    gw_core_t c;
    char err[256];
    REQUIRE_OK(gw_core_init(&c, err, sizeof(err)));
    test_order_and_flush(&c);
    test_fail(&c);
    test_notify(&c);
    test_deferred_notify(&c);
    test_matching(&c);
    test_fail_hook(&c);
    test_unexp_store(&c);
    test_unexp_order_while_filling(&c);
    test_op_table(&c);
    test_op_table_short(&c);
    test_liveness_region(&c);
    gw_core_fini(&c);
    return gwt_done("unit_ep_base");
}
