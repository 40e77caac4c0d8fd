/* SPDX-License-Identifier: Apache-2.0 */
/* test_proto_batch.c - the protocol layer's batch expansion over a fake
 * transport whose submit() records the requests it gets: the route chosen
 * from caps (native where the transport moves the batch itself, expanded
 * where it lacks batches, GPU batches or counted notifications, refused
 * where even its single operations cannot do it, native where expansion
 * is asked for but only the transport can carry the batch), one put or get per
 * entry with the entry's addresses, region and key, the batch request
 * completed once by the last entry with the batch's bytes, an ORDERED
 * notification through the base's deferred sender after the last entry
 * (or, with no sender, the last entry posted as a put_notify carrying the
 * value), a COUNTED one through the sender, an entry's failure naming that
 * entry, a refusal of the first entry leaving nothing behind, a refusal in
 * mid-batch failing the batch once the posted entries end, an endpoint
 * failure in mid-batch keeping the batch's memory until its last entry
 * completed, an unexpanded paged batch expanded (and merged) first. */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "core/request.h"
#include "harness.h"
#include "proto/proto.h"
#include "transport/base/batch.h"
#include "transport/base/ep_base.h"
#include "transport/base/tl.h"

#define MAXR 64

static gw_request_t *got[MAXR]; /* requests submit() took, in order */
static int ngot;
static int refuse_at = -1;      /* submit() refuses the request with this index */
static int nnotes;              /* notify_out calls */
static uint64_t note_value;
static int note_counted;
static int nfini;               /* the api layer's hook of the batch ran */

static gw_status_t fake_submit(gw_tl_ep_t *ep, gw_request_t *req)
{
    (void)ep;
    if (ngot == refuse_at) {
        refuse_at = -1;
        return gw_err(req->core, GW_ERR_NOMEM, "fake: refused");
    }
    REQUIRE(ngot < MAXR);
    got[ngot++] = req;
    return GW_OK;
}

static gw_status_t fake_notify_out(void *arg, gw_request_t *req)
{
    (void)arg;
    nnotes++;
    note_value = req->value;
    note_counted = gw_req_notify_counted(req);
    return GW_OK;
}

/* rma_iov: 0 takes the list, 1 answers GW_ERR_UNSUPPORTED, 2 refuses it */
static int iov_mode;
static gw_request_t *iov_got[4];
static int niov;

static gw_status_t fake_rma_iov(gw_tl_ep_t *ep, gw_request_t *req)
{
    (void)ep;
    if (iov_mode == 1)
        return GW_ERR_UNSUPPORTED;
    if (iov_mode == 2)
        return gw_err(req->core, GW_ERR_NOMEM, "fake: list refused");
    REQUIRE(niov < 4);
    iov_got[niov++] = req;
    return GW_OK;
}

static void fake_fini(gw_request_t *r)
{
    CHECK(r->batch != NULL);
    r->batch = NULL;
    nfini++;
}

static gw_tl_ops_t ops;
static gw_tl_iface_t iface;
static gw_tl_ep_t tl;
static gw_ep_base_t base;
static gw_mem_t lm;
static gw_rkey_t rk;
static gw_batch_ent_t ents[16];
static gw_mem_t *lmems[1] = {&lm};

static void setup(gw_core_t *c, int with_notify_out)
{
    ngot = 0;
    nnotes = 0;
    nfini = 0;
    refuse_at = -1;
    memset(&ops, 0, sizeof(ops));
    ops.size = sizeof(ops);
    ops.name = "fake";
    ops.submit = fake_submit;
    iface.ops = &ops;
    iface.core = c;
    gw_ep_base_init(&base, c);
    base.notify_out = with_notify_out ? fake_notify_out : NULL;
    tl.iface = &iface;
    tl.base = &base;
    memset(&lm, 0, sizeof(lm));
    memset(&rk, 0, sizeof(rk));
}

/* A batch request as the api layer posts it: outstanding, its hook set. */
static gw_request_t *batch_req(gw_core_t *c, gw_batch_t *b, unsigned n, int get, int notify, uint64_t value)
{
    memset(b, 0, sizeof(*b));
    b->ent = ents;
    b->rlo = UINT64_MAX;
    b->lmem = lmems;
    b->nlmem = 1;
    b->rkey = &rk;
    b->nrkey = 1;
    b->get = (uint8_t)get;
    b->notify = (uint8_t)notify;
    b->value = value;
    for (unsigned i = 0; i < n; i++) /* (gaps between entries: nothing merges) */
        gw_batch_add(b, 0x10000 + i * 0x1000, 0x900000 + i * 0x2000, 100 + i, 0, 0);
    gw_request_t *r = gw_req_alloc(c);
    REQUIRE(r);
    r->op = GW_OP_BATCH;
    r->flags |= GW_REQF_USER;
    r->batch = b;
    r->fini = fake_fini;
    r->len = (size_t)b->total;
    r->value = value;
    gw_ep_op_start(&base, r);
    return r;
}

static void done(gw_request_t *r, gw_status_t st)
{
    gw_ep_op_done(&base, r, st);
}

static void test_route(void)
{
    gw_batch_t b;
    memset(&b, 0, sizeof(b));
    gw_tl_caps_t caps = {.mem_kinds = GW_TL_MEM_HOST, .batch = GW_TL_BATCH_NATIVE};
    gw_proto_route_t route;
    const char *lack;
    CHECK_ST(gw_proto_batch_route(&caps, &b, 0, 1, &route, &lack), GW_OK);
    CHECK(route == GW_PROTO_NATIVE);
    /* the setting expands what the transport would take */
    CHECK_ST(gw_proto_batch_route(&caps, &b, 1, 1, &route, &lack), GW_OK);
    CHECK(route == GW_PROTO_EXPAND);
    /* no native batches: expanded */
    caps.batch = 0;
    CHECK_ST(gw_proto_batch_route(&caps, &b, 0, 0, &route, &lack), GW_OK);
    CHECK(route == GW_PROTO_IOV); /* (as lists where the transport has rma_iov) */
    CHECK_ST(gw_proto_batch_route(&caps, &b, GW_PROTO_IOV, 0, &route, &lack), GW_OK);
    CHECK(route == GW_PROTO_IOV);
    CHECK_ST(gw_proto_batch_route(&caps, &b, GW_PROTO_EXPAND, 0, &route, &lack), GW_OK);
    CHECK(route == GW_PROTO_EXPAND);
    /* GPU entries: native only with GW_TL_BATCH_GPU, expanded only where
     * single operations take GPU memory */
    b.lgpu = 1;
    caps.batch = GW_TL_BATCH_NATIVE;
    CHECK_ST(gw_proto_batch_route(&caps, &b, 0, 1, &route, &lack), GW_ERR_UNSUPPORTED);
    CHECK(lack && strcmp(lack, "GPU memory") == 0);
    caps.mem_kinds |= GW_TL_MEM_CUDA;
    CHECK_ST(gw_proto_batch_route(&caps, &b, 0, 1, &route, &lack), GW_OK);
    CHECK(route == GW_PROTO_IOV);
    caps.batch |= GW_TL_BATCH_GPU;
    CHECK_ST(gw_proto_batch_route(&caps, &b, 0, 1, &route, &lack), GW_OK);
    CHECK(route == GW_PROTO_NATIVE);
    /* counted: native with GW_TL_BATCH_COUNTED, else expanded only through a sender */
    b.lgpu = 0;
    b.notify = GW_NOTIFY_COUNTED;
    CHECK_ST(gw_proto_batch_route(&caps, &b, 0, 1, &route, &lack), GW_OK);
    CHECK(route == GW_PROTO_IOV);
    CHECK_ST(gw_proto_batch_route(&caps, &b, 0, 0, &route, &lack), GW_ERR_UNSUPPORTED);
    CHECK(lack && strcmp(lack, "counted notifications") == 0);
    caps.batch |= GW_TL_BATCH_COUNTED;
    CHECK_ST(gw_proto_batch_route(&caps, &b, 0, 0, &route, &lack), GW_OK);
    CHECK(route == GW_PROTO_NATIVE);
    /* expansion asked for what only the transport can carry (no sender): native */
    CHECK_ST(gw_proto_batch_route(&caps, &b, 1, 0, &route, &lack), GW_OK);
    CHECK(route == GW_PROTO_NATIVE);
    CHECK_ST(gw_proto_batch_route(&caps, &b, 1, 1, &route, &lack), GW_OK);
    CHECK(route == GW_PROTO_EXPAND);
    /* ordered with no sender rides on the last entry: with no entry, only a
     * native batch carries it */
    b.notify = GW_NOTIFY_ORDERED;
    CHECK_ST(gw_proto_batch_route(&caps, &b, 1, 0, &route, &lack), GW_OK);
    CHECK(route == GW_PROTO_NATIVE);
    caps.batch = 0;
    CHECK_ST(gw_proto_batch_route(&caps, &b, 1, 0, &route, &lack), GW_ERR_UNSUPPORTED);
    CHECK(lack && strcmp(lack, "notifications without data") == 0);
    b.n = 1;
    CHECK_ST(gw_proto_batch_route(&caps, &b, 1, 0, &route, &lack), GW_OK);
    CHECK(route == GW_PROTO_EXPAND);
}

static void test_expand_put(gw_core_t *c)
{
    setup(c, 1);
    gw_batch_t b;
    gw_request_t *r = batch_req(c, &b, 5, 0, GW_NOTIFY_NONE, 0);
    CHECK_ST(gw_proto_batch_submit(&tl, r), GW_OK);
    REQUIRE(ngot == 5);
    for (int i = 0; i < 5; i++) {
        CHECK(got[i]->op == GW_OP_PUT);
        CHECK((uint64_t)(uintptr_t)got[i]->buf == ents[i].laddr && got[i]->raddr == ents[i].raddr);
        CHECK(got[i]->len == ents[i].len && got[i]->lmem == &lm && got[i]->rkey == &rk);
        CHECK(got[i]->flags & GW_REQF_QUEUED); /* outstanding: flushes wait for it */
    }
    /* out of order: the batch waits for the last */
    done(got[3], GW_OK);
    done(got[0], GW_OK);
    done(got[4], GW_OK);
    done(got[1], GW_OK);
    CHECK_ST(r->status, GW_INPROGRESS);
    CHECK(nfini == 0);
    done(got[2], GW_OK);
    CHECK_ST(r->status, GW_OK);
    CHECK(r->length == 100 + 101 + 102 + 103 + 104);
    CHECK(nfini == 1 && nnotes == 0);
    CHECK(gw_list_empty(&base.outstanding));
    gw_req_release(r);
    gw_ep_base_fini(&base);
}

static void test_get_and_notify(gw_core_t *c)
{
    /* a get: single gets */
    setup(c, 1);
    gw_batch_t b;
    gw_request_t *r = batch_req(c, &b, 3, 1, GW_NOTIFY_NONE, 0);
    CHECK_ST(gw_proto_batch_submit(&tl, r), GW_OK);
    REQUIRE(ngot == 3);
    for (int i = 0; i < 3; i++) {
        CHECK(got[i]->op == GW_OP_GET);
        done(got[i], GW_OK);
    }
    CHECK_ST(r->status, GW_OK);
    gw_req_release(r);
    gw_ep_base_fini(&base);

    /* ORDERED through the sender: once, after the last entry, with the value */
    setup(c, 1);
    r = batch_req(c, &b, 3, 0, GW_NOTIFY_ORDERED, 77);
    CHECK_ST(gw_proto_batch_submit(&tl, r), GW_OK);
    REQUIRE(ngot == 3);
    CHECK(got[2]->op == GW_OP_PUT); /* plain puts: the base sends it */
    done(got[0], GW_OK);
    done(got[1], GW_OK);
    CHECK(nnotes == 0);
    done(got[2], GW_OK);
    CHECK(nnotes == 1 && note_value == 77 && !note_counted);
    CHECK_ST(r->status, GW_OK);
    gw_req_release(r);
    gw_ep_base_fini(&base);

    /* COUNTED through the sender, as a counted one */
    setup(c, 1);
    r = batch_req(c, &b, 2, 0, GW_NOTIFY_COUNTED, 5);
    CHECK_ST(gw_proto_batch_submit(&tl, r), GW_OK);
    done(got[0], GW_OK);
    done(got[1], GW_OK);
    CHECK(nnotes == 1 && note_value == 5 && note_counted);
    gw_req_release(r);
    gw_ep_base_fini(&base);

    /* a failed entry: no notification, the batch fails naming the entry */
    setup(c, 1);
    r = batch_req(c, &b, 3, 0, GW_NOTIFY_ORDERED, 9);
    CHECK_ST(gw_proto_batch_submit(&tl, r), GW_OK);
    done(got[0], GW_OK);
    gw_err(c, GW_ERR_OUT_OF_BOUNDS, "fake: beyond the region");
    done(got[1], GW_ERR_OUT_OF_BOUNDS);
    done(got[2], GW_OK);
    CHECK_ST(r->status, GW_ERR_OUT_OF_BOUNDS);
    CHECK(nnotes == 0 && nfini == 1);
    CHECK(strstr(c->errbuf, "remote 0x902000") != NULL && strstr(c->errbuf, "beyond the region") != NULL);
    gw_req_release(r);
    gw_ep_base_fini(&base);

    /* no sender: the last entry is a put_notify with the value */
    setup(c, 0);
    r = batch_req(c, &b, 3, 0, GW_NOTIFY_ORDERED, 42);
    CHECK_ST(gw_proto_batch_submit(&tl, r), GW_OK);
    REQUIRE(ngot == 3);
    CHECK(got[0]->op == GW_OP_PUT && got[1]->op == GW_OP_PUT);
    CHECK(got[2]->op == GW_OP_PUT_NOTIFY && got[2]->value == 42);
    for (int i = 0; i < 3; i++)
        done(got[i], GW_OK);
    CHECK_ST(r->status, GW_OK);
    gw_req_release(r);
    gw_ep_base_fini(&base);
}

static void test_refusals_and_failure(gw_core_t *c)
{
    /* the first entry refused: an error, nothing outstanding, the hook left to the caller */
    setup(c, 1);
    gw_batch_t b;
    gw_request_t *r = batch_req(c, &b, 4, 0, GW_NOTIFY_NONE, 0);
    refuse_at = 0;
    CHECK_ST(gw_proto_batch_submit(&tl, r), GW_ERR_NOMEM);
    CHECK(ngot == 0 && r->fini == fake_fini);
    gw_ep_op_unstart(&base, r); /* (what the api layer does with a refused request) */
    CHECK(gw_list_empty(&base.outstanding));
    r->fini = NULL;
    r->batch = NULL;
    r->status = GW_ERR_NOMEM;
    gw_req_release(r);
    gw_ep_base_fini(&base);

    /* refused in mid-batch: the posted ones finish, then the batch fails */
    setup(c, 1);
    r = batch_req(c, &b, 4, 0, GW_NOTIFY_NONE, 0);
    refuse_at = 2;
    CHECK_ST(gw_proto_batch_submit(&tl, r), GW_OK);
    REQUIRE(ngot == 2);
    done(got[0], GW_OK);
    CHECK_ST(r->status, GW_INPROGRESS);
    done(got[1], GW_OK);
    CHECK_ST(r->status, GW_ERR_NOMEM);
    CHECK(nfini == 1);
    gw_req_release(r);
    gw_ep_base_fini(&base);

    /* the endpoint fails in mid-batch: the batch fails, its memory stays
     * until the last entry request let go of it */
    setup(c, 1);
    r = batch_req(c, &b, 3, 0, GW_NOTIFY_ORDERED, 1);
    CHECK_ST(gw_proto_batch_submit(&tl, r), GW_OK);
    done(got[0], GW_OK);
    gw_list_del(&got[2]->link); /* entry 2 stays with the "transport" past the sweep */
    got[2]->flags &= (uint8_t)~GW_REQF_QUEUED;
    gw_ep_fail(&base, GW_ERR_CONN_RESET, "fake: the peer went away");
    CHECK_ST(r->status, GW_ERR_CONN_RESET);
    CHECK(nfini == 0 && nnotes == 0);
    gw_req_complete(got[2], GW_ERR_CONN_RESET);
    CHECK(nfini == 1);
    gw_req_release(r);
    gw_ep_base_fini(&base);
}

static void test_pages_expanded(gw_core_t *c)
{
    setup(c, 1);
    gw_batch_t b;
    gw_request_t *r = batch_req(c, &b, 0, 0, GW_NOTIFY_NONE, 0);
    static const uint32_t lp[3] = {2, 0, 1}, rp[3] = {0, 1, 2};
    b.npages = 3;
    b.lpage = lp;
    b.rpage = rp;
    b.plbase = 0x100000;
    b.prbase = 0x800000;
    b.psize = 4096;
    b.total = 3 * 4096;
    CHECK_ST(gw_proto_batch_submit(&tl, r), GW_OK);
    REQUIRE(ngot == 2); /* pages 0 and 1 continue each other on both sides: merged */
    CHECK((uint64_t)(uintptr_t)got[0]->buf == 0x100000 + 2 * 4096 && got[0]->raddr == 0x800000);
    CHECK((uint64_t)(uintptr_t)got[1]->buf == 0x100000 && got[1]->raddr == 0x801000 && got[1]->len == 8192);
    for (int i = 0; i < 2; i++)
        done(got[i], GW_OK);
    CHECK_ST(r->status, GW_OK);
    CHECK(r->length == 3 * 4096);
    gw_req_release(r);
    gw_ep_base_fini(&base);
}

/* The staged route (proto_stage.c): taken for a batch whose local regions
 * are all GPU memory of one device where the transport moves no GPU memory
 * (or when forced), refused where even staging cannot carry it. */
static void test_stage_route(void)
{
    gw_mem_t g0, g0b, g1, h;
    memset(&g0, 0, sizeof(g0));
    g0.type = GW_MEM_CUDA;
    g0b = g0;
    g1 = g0;
    g1.cuda_device = 1;
    memset(&h, 0, sizeof(h));
    h.type = GW_MEM_HOST;
    gw_mem_t *lms[2] = {&g0, &g0b};
    gw_batch_t b;
    memset(&b, 0, sizeof(b));
    b.lmem = lms;
    b.nlmem = 2;
    b.lgpu = 1;
    b.n = 3;
    gw_tl_caps_t caps = {.mem_kinds = GW_TL_MEM_HOST, .batch = 0};
    int staged = -1;
    const char *lack;
    CHECK_ST(gw_proto_batch_stage_route(&caps, &b, 0, 0, &staged, &lack), GW_OK);
    CHECK(staged == 1);
    /* a transport with GPU memory of its own: only when forced */
    caps.mem_kinds |= GW_TL_MEM_CUDA;
    CHECK_ST(gw_proto_batch_stage_route(&caps, &b, 0, 0, &staged, &lack), GW_OK);
    CHECK(staged == 0);
    CHECK_ST(gw_proto_batch_stage_route(&caps, &b, 1, 0, &staged, &lack), GW_OK);
    CHECK(staged == 1);
    caps.mem_kinds = GW_TL_MEM_HOST;
    /* a local side over two GPUs, or with host memory: not this route */
    lms[1] = &g1;
    CHECK_ST(gw_proto_batch_stage_route(&caps, &b, 0, 0, &staged, &lack), GW_OK);
    CHECK(staged == 0);
    lms[1] = &h;
    CHECK_ST(gw_proto_batch_stage_route(&caps, &b, 0, 0, &staged, &lack), GW_OK);
    CHECK(staged == 0);
    lms[1] = &g0b;
    /* what staging cannot give: remote GPU memory, counted notifications
     * without a sender, an ordered one without data or sender */
    b.rgpu = 1;
    CHECK_ST(gw_proto_batch_stage_route(&caps, &b, 0, 1, &staged, &lack), GW_ERR_UNSUPPORTED);
    CHECK(lack && strstr(lack, "GPU memory") != NULL);
    b.rgpu = 0;
    b.notify = GW_NOTIFY_COUNTED;
    CHECK_ST(gw_proto_batch_stage_route(&caps, &b, 0, 0, &staged, &lack), GW_ERR_UNSUPPORTED);
    CHECK(lack && strcmp(lack, "counted notifications") == 0);
    CHECK_ST(gw_proto_batch_stage_route(&caps, &b, 0, 1, &staged, &lack), GW_OK);
    CHECK(staged == 1);
    b.notify = GW_NOTIFY_ORDERED;
    b.n = 0;
    CHECK_ST(gw_proto_batch_stage_route(&caps, &b, 0, 0, &staged, &lack), GW_ERR_UNSUPPORTED);
    CHECK(lack && strcmp(lack, "notifications without data") == 0);
    /* host batches never */
    b.lgpu = 0;
    b.notify = 0;
    CHECK_ST(gw_proto_batch_stage_route(&caps, &b, 0, 0, &staged, &lack), GW_OK);
    CHECK(staged == 0);
}

/* A host batch through the scatter/gather primitive: one list request
 * (its entries the batch's, no notification), the ORDERED notification on
 * a last put_notify where there is no sender; GW_ERR_UNSUPPORTED falls
 * back to one request per entry; any other refusal posts nothing. */
static void test_iov(gw_core_t *c)
{
    gw_batch_t b;
    /* taken, with the notification deferred to the sender */
    setup(c, 1);
    ops.rma_iov = fake_rma_iov;
    iov_mode = 0;
    niov = 0;
    gw_request_t *r = batch_req(c, &b, 6, 0, GW_NOTIFY_ORDERED, 42);
    CHECK_ST(gw_proto_batch_submit_iov(&tl, r), GW_OK);
    CHECK(niov == 1 && ngot == 0);
    REQUIRE(niov == 1);
    gw_request_t *l = iov_got[0];
    CHECK(l->op == GW_OP_BATCH && l->batch && l->batch != &b);
    CHECK(l->batch->n == 6 && l->batch->ent == b.ent && l->batch->notify == GW_NOTIFY_NONE);
    CHECK(l->batch->total == b.total && l->len == b.total && !b.busy[0]);
    CHECK(l->flags & GW_REQF_QUEUED);
    CHECK(r->status == GW_INPROGRESS && nnotes == 0);
    l->length = l->len;
    done(l, GW_OK);
    CHECK(r->status == GW_OK && r->length == b.total);
    CHECK(nnotes == 1 && note_value == 42);
    gw_req_release(r);
    CHECK(nfini == 1);

    /* no sender: five entries as a list, the sixth a put_notify */
    setup(c, 0);
    ops.rma_iov = fake_rma_iov;
    niov = 0;
    r = batch_req(c, &b, 6, 0, GW_NOTIFY_ORDERED, 7);
    CHECK_ST(gw_proto_batch_submit_iov(&tl, r), GW_OK);
    REQUIRE(niov == 1 && ngot == 1);
    CHECK(iov_got[0]->batch->n == 5 && got[0]->op == GW_OP_PUT_NOTIFY && got[0]->value == 7);
    CHECK((uint64_t)(uintptr_t)got[0]->buf == ents[5].laddr);
    done(got[0], GW_OK);
    CHECK(r->status == GW_INPROGRESS);
    done(iov_got[0], GW_ERR_CONN_RESET); /* a failed list: the batch fails, naming it */
    CHECK(r->status == GW_ERR_CONN_RESET);
    CHECK(strstr(c->errbuf, "list of its first 5 entries") != NULL);
    gw_req_release(r);

    /* not taken: one request per entry */
    setup(c, 1);
    ops.rma_iov = fake_rma_iov;
    iov_mode = 1;
    niov = 0;
    r = batch_req(c, &b, 4, 1, GW_NOTIFY_NONE, 0);
    CHECK_ST(gw_proto_batch_submit_iov(&tl, r), GW_OK);
    CHECK(niov == 0 && ngot == 4);
    for (int i = 0; i < ngot; i++)
        CHECK(got[i]->op == GW_OP_GET);
    for (int i = 0; i < 4; i++)
        done(got[i], GW_OK);
    CHECK(r->status == GW_OK);
    gw_req_release(r);

    /* refused: nothing posted, the caller drops the batch */
    setup(c, 1);
    ops.rma_iov = fake_rma_iov;
    iov_mode = 2;
    r = batch_req(c, &b, 3, 0, GW_NOTIFY_NONE, 0);
    CHECK_ST(gw_proto_batch_submit_iov(&tl, r), GW_ERR_NOMEM);
    CHECK(ngot == 0 && base.outstanding.next == &r->link);
    gw_ep_op_unstart(&base, r);
    r->fini = NULL;
    r->batch = NULL;
    r->status = GW_ERR_NOMEM;
    gw_req_release(r);

    /* no slot, or GPU entries: one request per entry */
    setup(c, 1);
    iov_mode = 0;
    niov = 0;
    r = batch_req(c, &b, 3, 0, GW_NOTIFY_NONE, 0);
    CHECK_ST(gw_proto_batch_submit_iov(&tl, r), GW_OK);
    CHECK(niov == 0 && ngot == 3);
    for (int i = 0; i < 3; i++)
        done(got[i], GW_OK);
    gw_req_release(r);
    setup(c, 1);
    ops.rma_iov = fake_rma_iov;
    r = batch_req(c, &b, 3, 0, GW_NOTIFY_NONE, 0);
    b.rgpu = 1;
    CHECK_ST(gw_proto_batch_submit_iov(&tl, r), GW_OK);
    CHECK(niov == 0 && ngot == 3);
    for (int i = 0; i < 3; i++)
        done(got[i], GW_OK);
    gw_req_release(r);
}

int main(void)
{
    gw_core_t c;
    char err[256];
    REQUIRE_OK(gw_core_init(&c, err, sizeof(err)));
    test_route();
    test_stage_route();
    test_expand_put(&c);
    test_get_and_notify(&c);
    test_refusals_and_failure(&c);
    test_pages_expanded(&c);
    test_iov(&c);
    gw_core_fini(&c);
    return gwt_done("unit_proto_batch");
}
