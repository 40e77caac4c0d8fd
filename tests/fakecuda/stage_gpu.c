/* SPDX-License-Identifier: Apache-2.0 */
/* stage_gpu.c - a local GPU buffer's puts and gets staged by the protocol
 * layer (proto/proto_stage.c) through pinned slots over the transport's
 * host operations, two processes, against the fake CUDA driver
 * (tests/fakecuda).  Run over ofi without FI_HMEM (a transport that moves no
 * GPU memory itself) and over tcp with GPUWIRE_GPU_STAGE=proto.  Asserts the
 * bytes (read back from "device" memory, or the peer's host region), that a
 * put_notify's notification follows every byte of it and of an earlier
 * untracked put, that every chunk went through the pipeline (its count), and
 * that a chunk the target refuses fails the operation with a message naming
 * the chunk, the region staying deregistrable. */
#include <unistd.h>

#include "api/api.h"
#include "cuda/cuda_wrap.h"
#include "harness.h"
#include "fc_dev.h"
#include "proto/proto.h"

#define REGION (16u << 20)
#define REGION_B (4u << 20)

static gwt_chan_t pch, cch;

/* the batch: NB entries, NB - 2 small ones spread over the local and the
 * remote side (never adjacent: no merging) and 2 longer than a 64 KiB slot */
#define NB 202
#define BATCH_SPAN (2u << 20)
#define RBATCH (12u << 20) /* remote offset of the batch's entries (to 13.5 MiB) */
#define BIG_GET REGION_B /* a host get of region B */
static void batch_layout(uint32_t i, size_t *loff, size_t *roff, size_t *len)
{
    if (i < NB - 2) {
        *loff = (size_t)i * 4096;
        *roff = (size_t)i * 3500;
        *len = 3000;
    } else {
        *loff = (1u << 20) + (i - (NB - 2)) * 200000u;
        *roff = (1u << 20) + (i - (NB - 2)) * 300000u;
        *len = 150000;
    }
}

static void send_tag(gw_ep_t *ep, uint64_t tag)
{
    gw_request_t *r;
    REQUIRE_OK(gw_send(ep, "x", 1, NULL, tag, &r));
    REQUIRE_OK(gw_request_wait(r, 20000));
    gw_request_free(r);
}

static void recv_tag(gw_ep_t *ep, uint64_t tag)
{
    char b[8];
    gw_request_t *r;
    REQUIRE_OK(gw_recv(ep, b, sizeof(b), NULL, tag, ~0ull, &r));
    REQUIRE_OK(gw_request_wait(r, 30000));
    gw_request_free(r);
}

static int server(void *arg)
{
    (void)arg;
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    gw_listener_t *l;
    gw_ep_t *ep = gwt_listen_accept(ctx, &cch, &l);
    uint8_t *region = malloc(REGION), *rb = malloc(REGION_B);
    gwt_fill(region, REGION, 11);
    gwt_fill(rb, REGION_B, 29);
    gw_mem_t *mem, *mb;
    REQUIRE_OK(gw_mem_reg(ctx, region, REGION, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, &mem));
    REQUIRE_OK(gw_mem_reg(ctx, rb, REGION_B, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, &mb));
    gwt_send_rkey(ep, mem, 1);
    gwt_send_rkey(ep, mb, 2);

    uint64_t v;
    REQUIRE_OK(gw_notify_wait(ep, 20000, &v)); /* after the staged put_notify of 9 MiB + 3 at 0 */
    CHECK(v == 1);
    CHECK(gwt_verify(region, (9u << 20) + 3, 21) == -1);
    REQUIRE_OK(gw_notify_wait(ep, 20000, &v)); /* after an untracked put and a put_notify */
    CHECK(v == 2);
    CHECK(gwt_verify(region + (10u << 20), 300000, 22) == -1);
    CHECK(gwt_verify(region + (11u << 20), 4097, 23) == -1);

    REQUIRE_OK(gw_notify_wait(ep, 20000, &v)); /* after the staged batch put */
    CHECK(v == 3);
    uint8_t *exp = malloc(BATCH_SPAN);
    gwt_fill(exp, BATCH_SPAN, 26);
    for (uint32_t i = 0; i < NB; i++) {
        size_t lo, ro, n;
        batch_layout(i, &lo, &ro, &n);
        if (memcmp(region + RBATCH + ro, exp + lo, n) != 0) {
            fprintf(stderr, "batch entry %u: bytes differ\n", i);
            CHECK(0);
            break;
        }
    }
    free(exp);

    REQUIRE_OK(gw_notify_wait(ep, 20000, &v)); /* after a host get of 4 MiB and a staged put_notify */
    CHECK(v == 4);
    CHECK(gwt_verify(region + (15u << 20), 5000, 28) == -1);

    recv_tag(ep, 5); /* the client asks for region B to go */
    CHECK_ST(gw_mem_dereg(mb), GW_OK);
    send_tag(ep, 6);

    /* the last word: tag 99, or the endpoint's end where the refused chunk
     * failed it (ofi over tcp: the provider drops the connection) */
    char b[8];
    gw_request_t *r;
    if (gw_recv(ep, b, sizeof(b), NULL, 99, ~0ull, &r) == GW_OK) {
        gw_status_t st = gw_request_wait(r, 30000);
        CHECK(st != GW_ERR_TIMEOUT);
        gw_request_free(r);
    }
    gw_ep_close(ep, 1000);
    gw_listener_destroy(l);
    CHECK_ST(gw_mem_dereg(mem), GW_OK);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    free(region);
    free(rb);
    return gwt_done("fakecuda_stage_gpu server");
}

/* Launches of the copy kernel the fake driver logged (FAKECUDA_LAUNCHES). */
int main(void)
{
    const char *launch_log = getenv("FAKECUDA_LAUNCHES");
    if (launch_log)
        unlink(launch_log); /* (appended to by every run) */
    gwt_chan_pair(&pch, &cch);
    int pid = gwt_spawn(server, NULL);
    const gw_cuda_t *cu = fc_cuda(0);
    char addr[80];
    REQUIRE(gwt_chan_recv(&pch, addr, sizeof(addr), 10000) > 0);
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    gw_ep_t *ep;
    REQUIRE_OK(gw_connect(ctx, addr, &ep));
    gw_ep_info_t ei = {.size = sizeof(ei)};
    REQUIRE_OK(gw_ep_query(ep, &ei));
    fprintf(stderr, "endpoint: %s\n", ei.path);
    REQUIRE(ctx->gpu_staged[ep->tl_id]); /* this run's transport stages GPU buffers in proto */
    gw_tl_caps_t caps;
    ep->ops->caps(ctx->tl[ep->tl_id], &caps);
    uint64_t chunk = 0;
    char why[200];
    REQUIRE_OK(gw_settings_size(&ctx->core.settings, GW_SET_STAGING_CHUNK, &chunk, why, sizeof(why)));

    gw_request_t *r;
    uint64_t base, bb;
    gw_rkey_t *rk = gwt_recv_rkey(ep, 1, &base);
    gw_rkey_t *rkb = gwt_recv_rkey(ep, 2, &bb);

    void *src = fc_dev_alloc(cu, REGION);
    gw_mem_t *smem;
    REQUIRE_OK(gw_mem_reg(ctx, src, REGION, GW_ACCESS_LOCAL, &smem));

    /* gets: host region -> local GPU buffer, sizes 1, 64K + 3, 5 MiB + 7 */
    size_t gsz[] = {1, 65539, (5u << 20) + 7};
    for (size_t i = 0; i < 3; i++) {
        uint64_t before = gw_proto_stage_chunks(ctx->pstage);
        fc_dev_fill(cu, src, gsz[i], 99); /* (not the peer's pattern) */
        CHECK_ST(gwt_outcome(gw_get(ep, src, gsz[i], smem, base, rk, &r), &r, 20000), GW_OK);
        CHECK(fc_dev_verify(cu, src, gsz[i], 11) == -1);
        CHECK(gw_proto_stage_chunks(ctx->pstage) - before == (gsz[i] + chunk - 1) / chunk);
    }

    /* a staged put_notify of 9 MiB + 3: the notification after its last byte */
    uint64_t before = gw_proto_stage_chunks(ctx->pstage);
    size_t psz = (9u << 20) + 3;
    fc_dev_fill(cu, src, psz, 21);
    REQUIRE_OK(gw_put_notify(ep, src, psz, smem, base, rk, 1, &r));
    CHECK_ST(gw_request_wait(r, 20000), GW_OK);
    gw_request_info_t ri = {.size = sizeof(ri)};
    gw_request_info(r, &ri);
    CHECK(ri.length == psz);
    gw_request_free(r);
    CHECK(gw_proto_stage_chunks(ctx->pstage) - before == (psz + chunk - 1) / chunk);

    /* an untracked staged put, then a put_notify: its notification follows both */
    void *src2 = (uint8_t *)src + (12u << 20);
    fc_dev_fill(cu, src, 300000, 22);
    fc_dev_fill(cu, src2, 4097, 23);
    REQUIRE_OK(gw_put(ep, src, 300000, smem, base + (10u << 20), rk, NULL));
    REQUIRE_OK(gw_put_notify(ep, src2, 4097, smem, base + (11u << 20), rk, 2, &r));
    CHECK_ST(gw_request_wait(r, 20000), GW_OK);
    gw_request_free(r);
    CHECK_ST(gwt_outcome(gw_flush(ep, &r), &r, 20000), GW_OK);

    /* a staged batch put with an ORDERED notification, then a batch get of
     * the same remote entries into other local places: entries gathered
     * into slots and scattered out of them */
    {
        gw_local_desc_t *ld = calloc(NB, sizeof(*ld)), *ld2 = calloc(NB, sizeof(*ld2));
        gw_remote_desc_t *rd = calloc(NB, sizeof(*rd));
        for (uint32_t i = 0; i < NB; i++) {
            size_t lo, ro, n;
            batch_layout(i, &lo, &ro, &n);
            ld[i] = (gw_local_desc_t){smem, lo, n};
            ld2[i] = (gw_local_desc_t){smem, (8u << 20) + lo, n};
            rd[i] = (gw_remote_desc_t){rk, RBATCH + ro, n};
        }
        gw_dlist_t *ll, *ll2, *rl;
        REQUIRE_OK(gw_dlist_local(ctx, ld, NB, &ll));
        REQUIRE_OK(gw_dlist_local(ctx, ld2, NB, &ll2));
        REQUIRE_OK(gw_dlist_remote(ep, rd, NB, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, &rl));
        fc_dev_fill(cu, src, BATCH_SPAN, 26);
        before = gw_proto_stage_chunks(ctx->pstage);
        gw_xfer_opts_t o = {.size = sizeof(o), .notify = GW_NOTIFY_ORDERED, .value = 3};
        CHECK_ST(gwt_outcome(gw_xfer_batch(ep, GW_XFER_PUT, ll, NULL, rl, NULL, NB, &o, &r), &r, 20000), GW_OK);
        uint64_t bchunks = gw_proto_stage_chunks(ctx->pstage) - before;
        fprintf(stderr, "batch put of %u entries: %llu chunks\n", NB, (unsigned long long)bchunks);
        /* every slot full but the last, an entry split at a slot's end at
         * most once per entry; many small entries share a slot */
        uint64_t bbytes = (NB - 2) * 3000ull + 2 * 150000ull, least = (bbytes + chunk - 1) / chunk;
        CHECK(bchunks >= least && bchunks <= least + NB);
        if (chunk >= 65536)
            CHECK(bchunks < NB);
        if (launch_log) { /* the slots were gathered by the copy kernel */
            int k = (int)fc_launches("gw_batch_copy", NULL, 0, NULL);
            fprintf(stderr, "copy kernel launches after the batch put: %d\n", k);
            CHECK(k >= 1);
        }
        fc_dev_fill(cu, (uint8_t *)src + (8u << 20), BATCH_SPAN, 98);
        CHECK_ST(gwt_outcome(gw_xfer_batch(ep, GW_XFER_GET, ll2, NULL, rl, NULL, NB, NULL, &r), &r, 20000), GW_OK);
        uint8_t *exp = malloc(BATCH_SPAN), *got = malloc(BATCH_SPAN);
        gwt_fill(exp, BATCH_SPAN, 26);
        REQUIRE(cu->cuMemcpyDtoH(got, (CUdeviceptr)(uintptr_t)src + (8u << 20), BATCH_SPAN) == CUDA_SUCCESS);
        for (uint32_t i = 0; i < NB; i++) {
            size_t lo, ro, n;
            batch_layout(i, &lo, &ro, &n);
            if (memcmp(got + lo, exp + lo, n) != 0) {
                fprintf(stderr, "batch get entry %u: bytes differ\n", i);
                CHECK(0);
                break;
            }
        }
        CHECK(got[3000] != exp[3000] || exp[3000] == 0); /* (a gap between entries: not written) */
        free(exp);
        free(got);
        CHECK_ST(gw_dlist_destroy(ll), GW_OK);
        CHECK_ST(gw_dlist_destroy(ll2), GW_OK);
        CHECK_ST(gw_dlist_destroy(rl), GW_OK);
        free(ld);
        free(ld2);
        free(rd);
    }

    /* a staged put_notify behind a large host get: its chunk is done
     * first and its notification held until the get has ended (the poller
     * keeps walking past the finished operation meanwhile) */
    {
        uint8_t *big = malloc(BIG_GET);
        gw_request_t *rg;
        fc_dev_fill(cu, src2, 5000, 28);
        REQUIRE_OK(gw_get(ep, big, BIG_GET, NULL, bb, rkb, &rg));
        REQUIRE_OK(gw_put_notify(ep, src2, 5000, smem, base + (15u << 20), rk, 4, &r));
        CHECK_ST(gw_request_wait(r, 20000), GW_OK);
        gw_request_free(r);
        CHECK_ST(gw_request_wait(rg, 20000), GW_OK);
        gw_request_free(rg);
        CHECK(gwt_verify(big, BIG_GET, 29) == -1);
        free(big);
    }

    /* a zero-length staged put: nothing to stage, done */
    CHECK_ST(gwt_outcome(gw_put(ep, src, 0, smem, base, rk, &r), &r, 20000), GW_OK);

    /* messages from GPU memory where the transport moves none: refused, saying why */
    if (!(caps.mem_kinds & GW_TL_MEM_CUDA)) {
        CHECK_ST(gw_send(ep, src, 100, smem, 7, &r), GW_ERR_UNSUPPORTED);
        const char *e = gw_last_error(ctx);
        fprintf(stderr, "send from GPU memory: %s\n", e);
        CHECK(strstr(e, "does not move GPU memory") != NULL);
    }

    /* a region the target deregistered: the staged put fails, naming the
     * chunk (not where nothing checks keys at the target: ofi over shm,
     * whose provider writes the peer's memory by CMA, registered or not) */
    const char *unenforced = getenv("IT_KEYS_UNENFORCED");
    if (unenforced && *unenforced) {
        fprintf(stderr, "a put into a deregistered region: skipped, IT_KEYS_UNENFORCED=%s\n", unenforced);
        send_tag(ep, 5);
        recv_tag(ep, 6);
        send_tag(ep, 99);
    } else {
        send_tag(ep, 5);
        recv_tag(ep, 6);
        fc_dev_fill(cu, src, 2u << 20, 24);
        gw_status_t st = gwt_outcome(gw_put(ep, src, 2u << 20, smem, bb, rkb, &r), &r, 20000);
        fprintf(stderr, "put into a deregistered region: %s: %s\n", gw_status_name(st), gw_last_error(ctx));
        CHECK(st != GW_OK && st != GW_ERR_TIMEOUT);
        REQUIRE_OK(gw_ep_query(ep, &ei));
        if (ei.error == GW_OK) {
            /* a refusal that failed the operation, not the endpoint (tcp): the
             * message names the chunk, and staged bytes still move */
            CHECK(strstr(gw_last_error(ctx), "staged through pinned host memory") != NULL);
            CHECK(strstr(gw_last_error(ctx), "the chunk at offset 0") != NULL);
            fc_dev_fill(cu, src, 70000, 25);
            CHECK_ST(gwt_outcome(gw_put(ep, src, 70000, smem, base, rk, &r), &r, 20000), GW_OK);
            CHECK_ST(gwt_outcome(gw_get(ep, src2, 70000, smem, base, rk, &r), &r, 20000), GW_OK);
            CHECK(fc_dev_verify(cu, src2, 70000, 25) == -1);
            send_tag(ep, 99);
        } else {
            /* a refusal that failed the endpoint (ofi over tcp: the provider
             * drops the connection): the operation carries its error */
            fprintf(stderr, "the refused chunk failed the endpoint: %s\n", ei.error_detail);
            CHECK(st == ei.error);
        }
    }

    gw_rkey_destroy(rk);
    gw_rkey_destroy(rkb);
    CHECK_ST(gw_ep_close(ep, 1000), GW_OK);
    CHECK_ST(gw_mem_dereg(smem), GW_OK); /* no staged operation holds it */
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    CHECK(gwt_wait(pid, 90) == 0);
    return gwt_done("fakecuda_stage_gpu");
}
