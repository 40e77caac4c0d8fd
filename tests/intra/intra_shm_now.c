/* SPDX-License-Identifier: Apache-2.0 */
/* intra_shm_now - the rma_now shortcut (tl.h): small puts and gets into a
 * peer's gw_mem_alloc memory finished inside gw_put/gw_get, two processes:
 *  - with no request pointer the bytes land and the shared-memory counter
 *    moves (no CMA); with one, the request is complete when gw_put returns
 *    (before any progress call) and says how many bytes moved; a get
 *    likewise fills the buffer at once;
 *  - ordering: a large put (moved piecewise by progress), then small puts
 *    that take the shortcut, then a put_notify: when the notification
 *    arrives every byte of all of them is there; the same with a flush;
 *  - refusals stay what they were: a range past the region's end is
 *    GW_ERR_OUT_OF_BOUNDS at posting and writes nothing, a read-only
 *    region refuses puts with GW_ERR_ACCESS, a local buffer outside its lmem
 *    is GW_ERR_INVALID; after the owner revokes the region a put with no
 *    request posts, and the next flush reports GW_ERR_INVALID_KEY, and no
 *    byte reaches the new region that took the old one's slot. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define BIG (4u << 20)       /* moved piecewise (over the intra sync limit) */
#define NSMALL 16
#define OP 1024
#define ALEN (BIG + NSMALL * OP + 4096)
static gwt_chan_t pch, cch;

static int all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return 0;
    return 1;
}

static int server(void *arg)
{
    (void)arg;
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    gw_listener_t *l;
    gw_ep_t *ep = gwt_listen_accept(ctx, &cch, &l);
    unsigned rw = GW_ACCESS_REMOTE_WRITE | GW_ACCESS_REMOTE_READ;
    void *a = NULL, *ro = NULL, *b = NULL;
    gw_mem_t *ma, *mro, *mb;
    REQUIRE_OK(gw_mem_alloc(ctx, ALEN, rw, &a, &ma));
    REQUIRE_OK(gw_mem_alloc(ctx, 4096, GW_ACCESS_REMOTE_READ, &ro, &mro));
    gwt_fill(a, ALEN, 9); /* what the client's gets read, and what refused puts must leave */
    gwt_send_rkey(ep, ma, 1);
    gwt_send_rkey(ep, mro, 2);
    uint8_t *A = a;

    gwt_chan_expect(&cch, ctx, "small"); /* NSMALL puts with no request, one with */
    CHECK(gwt_verify(A, (NSMALL + 1) * OP, 1) == -1);
    gwt_chan_send(&cch, "checked", 8); /* the client's next puts overwrite this range */

    /* the large put, the small ones, then the notification */
    uint64_t v = 0;
    CHECK_ST(gw_notify_wait(ep, 20000, &v), GW_OK);
    CHECK(v == 77);
    CHECK(gwt_verify(A, BIG, 2) == -1);
    CHECK(gwt_verify(A + BIG, NSMALL * OP, 3) == -1);
    CHECK(gwt_verify(A + BIG + NSMALL * OP, OP, 4) == -1); /* the put_notify's own bytes */
    gwt_chan_send(&cch, "notified", 9);

    gwt_chan_expect(&cch, ctx, "flushed");
    CHECK(gwt_verify(A, BIG, 5) == -1);
    CHECK(gwt_verify(A + BIG, NSMALL * OP, 6) == -1);

    gwt_chan_expect(&cch, ctx, "refused");
    CHECK(all_zero(ro, 4096) == 1); /* the read-only region: no put landed */
    /* (the client read the tail the out-of-bounds put aimed at back) */

    REQUIRE_OK(gw_mem_dereg(ma));
    REQUIRE_OK(gw_mem_alloc(ctx, ALEN, rw, &b, &mb)); /* takes the freed slot */
    gwt_send_rkey(ep, mb, 3);
    gwt_chan_expect(&cch, ctx, "revoked");
    CHECK(gwt_verify(b, OP, 7) == -1);
    CHECK(all_zero((uint8_t *)b + OP, ALEN - OP) == 1); /* the old key's puts did not land here */
    gwt_chan_send(&cch, "ok", 3);
    gwt_chan_expect(&cch, ctx, "closed");
    gw_ep_close(ep, 1000);
    gw_listener_destroy(l);
    CHECK_ST(gw_mem_dereg(mb), GW_OK);
    CHECK_ST(gw_mem_dereg(mro), GW_OK);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    return gwt_done("intra_shm_now server");
}

/* The endpoint's copy counters ("copies so far: N CMA, M shared memory"). */
static void counters(gw_ep_t *ep, unsigned long *cma, unsigned long *shm)
{
    gw_ep_info_t info = {.size = sizeof(info)};
    REQUIRE_OK(gw_ep_query(ep, &info));
    const char *p = strstr(info.path, "copies so far: ");
    REQUIRE(p != NULL);
    REQUIRE(sscanf(p, "copies so far: %lu CMA, %lu shared memory", cma, shm) == 2);
}

static gw_status_t flush_wait(gw_ep_t *ep)
{
    gw_request_t *f = NULL;
    return gwt_outcome(gw_flush(ep, &f), &f, 20000);
}

int main(void)
{
    unsetenv("GPUWIRE_INTRA");
    setenv("GPUWIRE_TRANSPORTS", "intra", 1);
    gwt_chan_pair(&pch, &cch);
    int pid = gwt_spawn(server, NULL);
    gw_context_t *ctx;
    gw_ep_t *ep = gwt_connect_chan(&pch, "intra", &ctx);
    uint64_t ba, bro;
    gw_rkey_t *ka = gwt_recv_rkey(ep, 1, &ba);
    gw_rkey_t *kro = gwt_recv_rkey(ep, 2, &bro);
    REQUIRE(ka != NULL && kro != NULL);
    /* the local side is gw_mem_alloc memory too, passed as lmem */
    void *lp = NULL;
    gw_mem_t *lm;
    REQUIRE_OK(gw_mem_alloc(ctx, ALEN, 0, &lp, &lm));
    uint8_t *src = lp;

    /* the first use maps the peer's region (a control round trip): the
     * request path takes that one */
    gw_request_t *r = NULL;
    REQUIRE_OK(gw_get(ep, src, OP, lm, ba, ka, &r));
    CHECK_ST(gw_request_wait(r, 20000), GW_OK);
    gw_request_free(r);

    /* 1. small puts with no request, then one with: done inside gw_put */
    unsigned long cma0, shm0, cma, shm;
    counters(ep, &cma0, &shm0);
    gwt_fill(src, (NSMALL + 1) * OP, 1);
    for (int i = 0; i < NSMALL; i++)
        CHECK_ST(gw_put(ep, src + i * OP, OP, lm, ba + (uint64_t)i * OP, ka, NULL), GW_OK);
    r = NULL;
    CHECK_ST(gw_put(ep, src + NSMALL * OP, OP, lm, ba + (uint64_t)NSMALL * OP, ka, &r), GW_OK);
    REQUIRE(r != NULL);
    CHECK_ST(gw_request_test(r), GW_OK); /* no progress call in between */
    gw_request_info_t ri = {.size = sizeof(ri)};
    REQUIRE_OK(gw_request_info(r, &ri));
    CHECK(ri.status == GW_OK);
    CHECK(ri.length == OP);
    gw_request_free(r);
    counters(ep, &cma, &shm);
    CHECK(cma == cma0);
    CHECK(shm == shm0 + NSMALL + 1);
    /* a get: the buffer holds the peer's bytes when gw_get returns */
    uint8_t *dst = src + ALEN - OP;
    memset(dst, 0, OP);
    r = NULL;
    CHECK_ST(gw_get(ep, dst, OP, lm, ba + (uint64_t)(NSMALL + 1) * OP, ka, &r), GW_OK);
    CHECK_ST(gw_request_test(r), GW_OK);
    gw_request_free(r);
    uint8_t *want = malloc(ALEN);
    REQUIRE(want != NULL);
    gwt_fill(want, ALEN, 9);
    CHECK(memcmp(dst, want + (NSMALL + 1) * OP, OP) == 0);
    gwt_chan_send(&pch, "small", 6);
    gwt_chan_expect(&pch, ctx, "checked"); /* step 2 writes over what the server checks */

    /* 2. a large put still moving, small puts done at once, then put_notify:
     * the notification comes after all of them */
    gwt_fill(src, BIG, 2);
    gwt_fill(src + BIG, NSMALL * OP, 3);
    gwt_fill(src + BIG + NSMALL * OP, OP, 4);
    gw_request_t *big = NULL;
    REQUIRE_OK(gw_put(ep, src, BIG, lm, ba, ka, &big));
    CHECK_ST(gw_request_test(big), GW_INPROGRESS); /* the shortcut is for small copies only */
    for (int i = 0; i < NSMALL; i++)
        CHECK_ST(gw_put(ep, src + BIG + i * OP, OP, lm, ba + BIG + (uint64_t)i * OP, ka, NULL), GW_OK);
    CHECK_ST(gw_put_notify(ep, src + BIG + NSMALL * OP, OP, lm, ba + BIG + (uint64_t)NSMALL * OP, ka, 77, NULL),
             GW_OK);
    CHECK_ST(gw_request_wait(big, 20000), GW_OK);
    gw_request_free(big);
    gwt_chan_expect(&pch, ctx, "notified");

    /* 3. the same with a flush, every put untracked */
    gwt_fill(src, BIG, 5);
    gwt_fill(src + BIG, NSMALL * OP, 6);
    CHECK_ST(gw_put(ep, src, BIG, lm, ba, ka, NULL), GW_OK);
    for (int i = 0; i < NSMALL; i++)
        CHECK_ST(gw_put(ep, src + BIG + i * OP, OP, lm, ba + BIG + (uint64_t)i * OP, ka, NULL), GW_OK);
    CHECK_ST(flush_wait(ep), GW_OK);
    gwt_chan_send(&pch, "flushed", 8);

    /* 4. refusals at posting, with and without a request pointer */
    counters(ep, &cma0, &shm0);
    r = (gw_request_t *)1;
    CHECK_ST(gw_put(ep, src, OP, lm, ba + ALEN - OP / 2, ka, &r), GW_ERR_OUT_OF_BOUNDS);
    CHECK(r == NULL);
    CHECK_ST(gw_put(ep, src, OP, lm, ba + ALEN - OP / 2, ka, NULL), GW_ERR_OUT_OF_BOUNDS);
    CHECK(strstr(gw_last_error(ctx), "outside the region") != NULL);
    CHECK_ST(gw_put(ep, src, OP, lm, bro, kro, NULL), GW_ERR_ACCESS);
    /* reading it is allowed (its first use maps it: the request path) */
    memset(dst, 1, OP);
    r = NULL;
    CHECK_ST(gw_get(ep, dst, OP, lm, bro, kro, &r), GW_OK);
    CHECK_ST(gw_request_wait(r, 20000), GW_OK);
    gw_request_free(r);
    CHECK(all_zero(dst, OP) == 1);
    uint8_t outside[OP];
    CHECK_ST(gw_put(ep, outside, OP, lm, ba, ka, NULL), GW_ERR_INVALID); /* buf not inside lmem */
    counters(ep, &cma, &shm);
    CHECK(shm == shm0 + 1); /* the get only */
    CHECK(cma == cma0);
    /* the out-of-bounds put left the region's tail alone: read it back */
    memset(dst, 0, OP);
    CHECK_ST(gw_get(ep, dst, OP, lm, ba + ALEN - OP, ka, NULL), GW_OK);
    CHECK(memcmp(dst, want + ALEN - OP, OP) == 0);
    CHECK_ST(flush_wait(ep), GW_OK);
    gwt_chan_send(&pch, "refused", 8);

    /* 5. the owner revoked the region and allocated another in its slot:
     * the old key's put posts, the flush reports it, nothing lands */
    uint64_t bb;
    gw_rkey_t *kb = gwt_recv_rkey(ep, 3, &bb);
    REQUIRE(kb != NULL);
    gwt_fill(src, OP, 7);
    CHECK_ST(gw_put(ep, src + OP, OP, lm, ba + OP, ka, NULL), GW_OK);
    CHECK_ST(flush_wait(ep), GW_ERR_INVALID_KEY);
    CHECK_ST(flush_wait(ep), GW_OK); /* reported once */
    r = NULL;
    CHECK_ST(gw_put(ep, src + OP, OP, lm, ba + 2 * OP, ka, &r), GW_OK);
    CHECK_ST(gw_request_wait(r, 20000), GW_ERR_INVALID_KEY);
    gw_request_free(r);
    CHECK_ST(gw_put(ep, src, OP, lm, bb, kb, NULL), GW_OK);
    CHECK_ST(flush_wait(ep), GW_OK);
    gwt_chan_send(&pch, "revoked", 8);
    gwt_chan_expect(&pch, ctx, "ok");

    free(want);
    gw_rkey_destroy(ka);
    gw_rkey_destroy(kro);
    gw_rkey_destroy(kb);
    CHECK_ST(gw_ep_close(ep, 1000), GW_OK);
    gwt_chan_send(&pch, "closed", 7);
    CHECK_ST(gw_mem_dereg(lm), GW_OK);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    CHECK(gwt_wait(pid, 60) == 0);
    return gwt_done("intra_shm_now");
}
