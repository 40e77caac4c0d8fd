/* SPDX-License-Identifier: Apache-2.0 */
/* stage_order.c - the staging pipeline's bookkeeping over a fake transport
 * whose submit() records the chunk requests it gets, completed by the test
 * in the order it chooses, against the fake CUDA driver: a put cut into
 * slot-sized chunks posted in offset order with no more in flight than the
 * ring holds; a staged put_notify whose chunks are done while an older
 * operation still runs is held for its notification's turn, the poller
 * walking past it meanwhile, and then notifies and completes once; a
 * chunk's failure fails the request once the chunks in flight have ended,
 * naming the chunk; an endpoint failure with chunks in flight fails the
 * request at once and the op lets go of its slots afterwards. */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "core/request.h"
#include "cuda/cuda_wrap.h"
#include "harness.h"
#include "proto/proto.h"
#include "transport/base/ep_base.h"
#include "transport/base/tl.h"

#define MAXR 256

static gw_request_t *got[MAXR];
static int ngot, nnotes;

static gw_status_t fake_submit(gw_tl_ep_t *ep, gw_request_t *req)
{
    (void)ep;
    REQUIRE(ngot < MAXR);
    got[ngot++] = req;
    return GW_OK;
}

static gw_status_t fake_notify_out(void *arg, gw_request_t *req)
{
    (void)arg;
    (void)req;
    nnotes++;
    return GW_OK;
}

static gw_tl_ops_t ops;
static gw_tl_iface_t iface;
static gw_tl_ep_t tl;
static gw_ep_base_t base;
static gw_mem_t lm;
static gw_rkey_t rk;
static gw_proto_stage_t *pst;

static void setup(gw_core_t *c)
{
    ngot = 0;
    nnotes = 0;
    memset(&ops, 0, sizeof(ops));
    ops.size = sizeof(ops);
    ops.name = "fake";
    ops.submit = fake_submit;
    iface.ops = &ops;
    iface.core = c;
    gw_ep_base_init(&base, c);
    base.notify_out = fake_notify_out;
    tl.iface = &iface;
    tl.base = &base;
}

/* Progress as the context's loop would: the core's pollers, until the
 * count of submitted requests reaches want (or a bound of passes). */
static void poll_until(gw_core_t *c, int want)
{
    for (int i = 0; i < 10000 && ngot < want; i++)
        gw_core_poll(c);
}

static gw_request_t *staged_req(gw_core_t *c, int op, void *buf, size_t len, uint64_t value)
{
    gw_request_t *r = gw_req_alloc(c);
    REQUIRE(r);
    r->op = (uint8_t)op;
    r->flags |= GW_REQF_USER;
    r->buf = buf;
    r->len = len;
    r->lmem = &lm;
    r->rkey = &rk;
    r->raddr = 0x900000;
    r->value = value;
    gw_ep_op_start(&base, r);
    return r;
}

int main(void)
{
    char why[256];
    const gw_cuda_t *cu = gw_cuda_get(why, sizeof(why));
    if (!cu)
        SKIP("fake CUDA driver not loaded: %s", why);
    gw_core_t c;
    REQUIRE_OK(gw_core_init(&c, why, sizeof(why)));
    CUdeviceptr dev;
    REQUIRE(cu->cuMemAlloc(&dev, 1u << 20) == CUDA_SUCCESS);
    memset(&lm, 0, sizeof(lm));
    lm.type = GW_MEM_CUDA;
    lm.cuda_device = 0;
    lm.addr = (void *)(uintptr_t)dev;
    lm.len = 1u << 20;
    memset(&rk, 0, sizeof(rk));
    size_t chunk = 64u << 10; /* GPUWIRE_STAGING_CHUNK=64K, GPUWIRE_STAGING_BUFFERS=3 (CMake) */

    /* 1. a put of 5 chunks and a bit: at most 3 in flight, in offset order */
    setup(&c);
    size_t len = 5 * chunk + 100;
    gw_request_t *r = staged_req(&c, GW_OP_PUT, (void *)(uintptr_t)dev, len, 0);
    CHECK_ST(gw_proto_stage_submit(&pst, &tl, r), GW_OK);
    poll_until(&c, 3);
    CHECK(ngot == 3);
    for (int i = 0; i < 200; i++)
        gw_core_poll(&c);
    CHECK(ngot == 3); /* the ring is full until a chunk ends */
    for (int i = 0; i < ngot; i++) {
        CHECK(got[i]->op == GW_OP_PUT && got[i]->lmem == NULL && got[i]->rkey == &rk);
        CHECK(got[i]->raddr == 0x900000 + (uint64_t)i * chunk && got[i]->len == chunk);
    }
    int k = 0;
    while (k < ngot || ngot < 6) {
        if (k < ngot)
            gw_ep_op_done(&base, got[k++], GW_OK);
        poll_until(&c, k + 1 < 6 ? k + 1 : 6);
    }
    CHECK(ngot == 6 && got[5]->len == 100 && got[5]->raddr == 0x900000 + 5 * chunk);
    CHECK(r->status == GW_OK && r->length == len);
    gw_req_release(r);

    /* 2. a staged put_notify behind an older operation: held, walked past,
     * then notified once */
    setup(&c);
    gw_request_t *older = gw_req_alloc(&c);
    REQUIRE(older);
    older->op = GW_OP_GET;
    older->flags |= GW_REQF_USER;
    gw_ep_op_start(&base, older);
    r = staged_req(&c, GW_OP_PUT_NOTIFY, (void *)(uintptr_t)dev, 1000, 42);
    CHECK_ST(gw_proto_stage_submit(&pst, &tl, r), GW_OK);
    poll_until(&c, 1);
    REQUIRE(ngot == 1);
    CHECK(got[0]->op == GW_OP_PUT); /* (the notification is the base's, deferred) */
    gw_ep_op_done(&base, got[0], GW_OK);
    for (int i = 0; i < 200; i++) /* the finished op stays while its parent is held */
        gw_core_poll(&c);
    CHECK(r->status == GW_INPROGRESS && nnotes == 0);
    gw_ep_op_done(&base, older, GW_OK);
    CHECK(nnotes == 1);
    CHECK(r->status == GW_OK && r->length == 1000);
    for (int i = 0; i < 50; i++)
        gw_core_poll(&c);
    CHECK(nnotes == 1 && ngot == 1);
    gw_req_release(older);
    gw_req_release(r);

    /* 3. a failed chunk: the request fails once the chunks in flight end,
     * and the message names the chunk */
    setup(&c);
    r = staged_req(&c, GW_OP_PUT, (void *)(uintptr_t)dev, 3 * chunk, 0);
    CHECK_ST(gw_proto_stage_submit(&pst, &tl, r), GW_OK);
    poll_until(&c, 3);
    REQUIRE(ngot == 3);
    gw_err(&c, GW_ERR_INVALID_KEY, "fake: key revoked");
    gw_ep_op_done(&base, got[1], GW_ERR_INVALID_KEY);
    gw_ep_op_done(&base, got[0], GW_OK);
    CHECK(r->status == GW_INPROGRESS); /* chunk 2 still moves */
    gw_ep_op_done(&base, got[2], GW_OK);
    CHECK(r->status == GW_ERR_INVALID_KEY);
    CHECK(strstr(c.errbuf, "the chunk at offset 65536") && strstr(c.errbuf, "fake: key revoked"));
    gw_req_release(r);

    /* 4. the endpoint fails with chunks in flight: the request fails at
     * once, the op ends with them and a later put finds the slots free */
    setup(&c);
    r = staged_req(&c, GW_OP_GET, (void *)(uintptr_t)dev, 2 * chunk, 0);
    CHECK_ST(gw_proto_stage_submit(&pst, &tl, r), GW_OK);
    REQUIRE(ngot == 2 && got[0]->op == GW_OP_GET);
    gw_ep_fail(&base, GW_ERR_CONN_RESET, "fake: connection reset");
    CHECK(r->status == GW_ERR_CONN_RESET);
    gw_req_release(r);
    setup(&c);
    r = staged_req(&c, GW_OP_PUT, (void *)(uintptr_t)dev, 3 * chunk, 0);
    CHECK_ST(gw_proto_stage_submit(&pst, &tl, r), GW_OK);
    poll_until(&c, 3);
    CHECK(ngot == 3); /* every slot came back */
    for (int i = 0; i < 3; i++)
        gw_ep_op_done(&base, got[i], GW_OK);
    CHECK(r->status == GW_OK);
    gw_req_release(r);
    CHECK(gw_proto_stage_chunks(pst) == 6 + 1 + 3);

    gw_proto_stage_destroy(pst);
    cu->cuMemFree(dev);
    gw_core_fini(&c);
    return gwt_done("fakecuda_stage_order");
}
