/* SPDX-License-Identifier: Apache-2.0 */
/* kv_tables.c - KV-cache batches over computed descriptor tables of many
 * GPU regions a side (gw_dlist_local_table / gw_dlist_remote_table with
 * per_region blocks), two processes, against the fake CUDA driver: a put of
 * randomly chosen blocks with a counted notification, checked byte by byte
 * on the target (every selected block where it belongs, every other byte
 * untouched), then a get of other blocks back into a second set of local
 * regions, checked byte by byte here.  The target's regions are separate
 * allocations; the initiator's are slices of one allocation, as a serving
 * engine's layers carved out of one tensor.  With FAKECUDA_LAUNCHES set,
 * each batch must have gone to the GPU in exactly one launch of the
 * region-table kernel, no descriptors built on the host (KV_TABLES_EXPECT=
 * none: no launch at all, where FAKECUDA_NO_MODULE leaves copy-engine
 * copies).  Then the target deregisters its last region: a batch whose
 * entries avoid it still completes, one naming it fails with
 * GW_ERR_INVALID_KEY.  KV_TABLES_PAGE sets the block size (over 64 KiB: the
 * kernel cuts blocks in pieces).  KV_TABLES_PREPARED=1 posts the put and
 * the get from prepared selections (gw_pages_create, gw_xfer_batch_prepared):
 * the same bytes, and each launch must read both index arrays from GPU
 * memory (the selection's copy: nothing copied at posting), where the
 * plain batches' come from host memory (the pinned copies made at posting).
 *
 * KV_TABLES_BENCH=1 instead times the post of the Llama-3-70B shape of
 * bench/compare/kv_shapes.py (--tokens 8192: 81,920 blocks of 4 KiB out of
 * 160 regions of 1,024 blocks a side, random distinct indices) over and
 * over, plain (gw_xfer_batch) and from a prepared selection
 * (gw_xfer_batch_prepared), and prints the host's time per entry (run it with
 * FAKECUDA_KERNEL_NOCOPY=1 so that the fake driver's CPU copies are not
 * counted); nothing is checked then.  KV_TABLES_COLUMNS=1 builds the same
 * tables from columns (region and offset per entry), which go by entries. */
#include <poll.h>
#include <time.h>
#include <unistd.h>

#include "cuda/cuda_wrap.h"
#include "harness.h"
#include "fc_dev.h"

static gwt_chan_t pch, cch;
static int bench, prepared;
static uint32_t nreg, per, nsel;
static size_t page;

static void shape(void)
{
    bench = getenv("KV_TABLES_BENCH") && atoi(getenv("KV_TABLES_BENCH")) > 0;
    prepared = getenv("KV_TABLES_PREPARED") && atoi(getenv("KV_TABLES_PREPARED")) > 0;
    nreg = bench ? 160 : 7;
    per = bench ? 1024 : 40;
    nsel = bench ? 81920 : 150;
    page = bench ? 4096 : 1536 + 16; /* (the test: 16-byte aligned, not a power of two) */
    if (getenv("KV_TABLES_PAGE")) /* e.g. an MLA block over 64 KiB: the kernel cuts each in pieces */
        page = (size_t)strtoull(getenv("KV_TABLES_PAGE"), NULL, 10);
}

/* n distinct indices below lim, reproducible from seed, in a new array */
static uint32_t *pick(uint32_t n, uint32_t lim, uint64_t seed)
{
    uint32_t *out = malloc((size_t)n * sizeof(*out) + 1);
    REQUIRE(out);
    fc_pick(out, n, lim, seed);
    return out;
}

/* Launches of kernel `name` logged so far (FAKECUDA_LAUNCHES), the items
 * they covered in *items. */
static unsigned launches(const char *name, unsigned *items)
{
    return fc_launches(name, items, 0, NULL);
}

static uint64_t seed_of(uint32_t r, uint64_t base) { return base + r; }

static int server(void *arg)
{
    (void)arg;
    shape();
    const gw_cuda_t *cu = fc_cuda(1);
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    gw_listener_t *l;
    gw_ep_t *ep = gwt_listen_accept(ctx, &cch, &l);
    size_t rsz = (size_t)per * page;
    void **reg = calloc(nreg, sizeof(*reg));
    gw_mem_t **mem = calloc(nreg, sizeof(*mem));
    for (uint32_t r = 0; r < nreg; r++) {
        reg[r] = bench ? fc_dev_alloc(cu, rsz) : fc_dev_alloc_filled(cu, rsz, seed_of(r, 1000));
        REQUIRE_OK(gw_mem_reg(ctx, reg[r], rsz, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, &mem[r]));
        gwt_send_rkey(ep, mem[r], 100 + r);
    }
    if (!bench) {
        CHECK_ST(gw_notify_count_wait(ep, 9, 1, 30000), GW_OK);
        /* every byte: the selected blocks hold the initiator's, the rest is as filled */
        uint32_t *lidx = pick(nsel, nreg * per, 7), *ridx = pick(nsel, nreg * per, 8);
        uint8_t **want = calloc(nreg, sizeof(*want)), *src = malloc(rsz);
        for (uint32_t r = 0; r < nreg; r++) {
            want[r] = malloc(rsz);
            gwt_fill(want[r], rsz, seed_of(r, 1000));
        }
        for (uint32_t i = 0; i < nsel; i++) {
            uint32_t lr = lidx[i] / per, lb = lidx[i] % per, rr = ridx[i] / per, rb = ridx[i] % per;
            gwt_fill(src, rsz, seed_of(lr, 2000));
            memcpy(want[rr] + (size_t)rb * page, src + (size_t)lb * page, page);
        }
        int bad = 0;
        for (uint32_t r = 0; r < nreg; r++) {
            uint8_t *got = malloc(rsz);
            REQUIRE(cu->cuMemcpyDtoH(got, (CUdeviceptr)(uintptr_t)reg[r], rsz) == CUDA_SUCCESS);
            bad += memcmp(got, want[r], rsz) != 0;
            free(got);
            free(want[r]);
        }
        CHECK(bad == 0);
        free(want);
        free(src);
        free(lidx);
        free(ridx);
    }
    REQUIRE(gwt_chan_send(&cch, "v", 1) == 0);
    uint32_t gone = nreg;
    if (!bench) { /* serve the get; then the last region goes when asked */
        fc_wait_chan(&cch, ctx);
        gone = nreg - 1;
        CHECK_ST(gw_mem_dereg(mem[gone]), GW_OK);
        REQUIRE(gwt_chan_send(&cch, "y", 1) == 0);
    }
    fc_wait_chan(&cch, ctx); /* serve until the initiator is done */
    CHECK_ST(gw_ep_close(ep, 2000), GW_OK);
    for (uint32_t r = 0; r < nreg; r++)
        if (r != gone)
            CHECK_ST(gw_mem_dereg(mem[r]), GW_OK);
    gw_listener_destroy(l);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    return gwt_done("kv_tables server");
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(void)
{
    shape();
    gwt_chan_pair(&pch, &cch);
    int pid = gwt_spawn(server, NULL); /* before CUDA is initialised here */
    const gw_cuda_t *cu = fc_cuda(1);
    gw_context_t *ctx;
    gw_ep_t *ep = fc_client(&pch, &ctx, "intra");
    gw_rkey_t **rk = calloc(nreg, sizeof(*rk));
    for (uint32_t r = 0; r < nreg; r++) {
        uint64_t b;
        rk[r] = gwt_recv_rkey(ep, 100 + r, &b);
    }
    /* local: two sets of nreg regions, each set slices of one allocation */
    size_t rsz = (size_t)per * page;
    uint8_t *src = fc_dev_alloc(cu, rsz * nreg), *dst = fc_dev_alloc(cu, rsz * nreg);
    if (!bench)
        for (uint32_t r = 0; r < nreg; r++) {
            fc_dev_fill(cu, src + r * rsz, rsz, seed_of(r, 2000));
            fc_dev_fill(cu, dst + r * rsz, rsz, seed_of(r, 3000));
        }
    gw_mem_t **ms = calloc(nreg, sizeof(*ms)), **md = calloc(nreg, sizeof(*md));
    for (uint32_t r = 0; r < nreg; r++) {
        REQUIRE_OK(gw_mem_reg(ctx, src + r * rsz, rsz, GW_ACCESS_LOCAL, &ms[r]));
        REQUIRE_OK(gw_mem_reg(ctx, dst + r * rsz, rsz, GW_ACCESS_LOCAL, &md[r]));
    }
    gw_dlist_table_t t = {.size = sizeof(t), .n = (size_t)nreg * per, .len_all = page, .per_region = per};
    uint32_t *creg = NULL;
    uint64_t *coff = NULL;
    if (getenv("KV_TABLES_COLUMNS")) {
        /* the same entries from columns (region, offset): no computed form,
         * so the batch goes by entries and the descriptor kernel */
        creg = malloc(t.n * sizeof(*creg));
        coff = malloc(t.n * sizeof(*coff));
        REQUIRE(creg && coff);
        for (size_t i = 0; i < t.n; i++) {
            creg[i] = (uint32_t)(i / per);
            coff[i] = (uint64_t)(i % per) * page;
        }
        t.region = creg;
        t.offset = coff;
        t.per_region = 0;
    }
    gw_dlist_t *LS, *LD, *R;
    REQUIRE_OK(gw_dlist_local_table(ctx, ms, nreg, &t, &LS));
    REQUIRE_OK(gw_dlist_local_table(ctx, md, nreg, &t, &LD));
    REQUIRE_OK(gw_dlist_remote_table(ep, rk, nreg, &t, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, &R));
    free(creg);
    free(coff);
    uint32_t *lidx = pick(nsel, nreg * per, 7), *ridx = pick(nsel, nreg * per, 8);
    gw_request_t *q;
    if (bench) {
        /* the post alone (the fake driver copies nothing with
         * FAKECUDA_KERNEL_NOCOPY), and post to completion */
        int rounds = getenv("KV_TABLES_ROUNDS") ? atoi(getenv("KV_TABLES_ROUNDS")) : 20;
        gw_pages_t *sel;
        REQUIRE_OK(gw_pages_create(ctx, lidx, ridx, nsel, &sel));
        for (int form = 0; form < 2; form++) { /* plain, then from the prepared selection */
            double best = 1e9, bestw = 1e9, sum = 0;
            for (int i = 0; i <= rounds; i++) {
                double t0 = now_s();
                if (form)
                    REQUIRE_OK(gw_xfer_batch_prepared(ep, GW_XFER_PUT, LS, R, sel, NULL, &q));
                else
                    REQUIRE_OK(gw_xfer_batch(ep, GW_XFER_PUT, LS, lidx, R, ridx, nsel, NULL, &q));
                double t1 = now_s();
                CHECK_ST(gw_request_wait(q, 60000), GW_OK);
                double t2 = now_s();
                gw_request_free(q);
                if (!i)
                    continue; /* the first imports every region (prepared: copies the selection to the GPU) */
                best = t1 - t0 < best ? t1 - t0 : best;
                bestw = t2 - t0 < bestw ? t2 - t0 : bestw;
                sum += t1 - t0;
            }
            printf("kv_tables bench: %u entries of %zu bytes over %u regions a side, %s, %d rounds: post best "
                   "%.1f us (%.1f ns/entry), mean %.1f us; post to completion best %.1f us (%.1f ns/entry)\n",
                   nsel, page, nreg, form ? "prepared selection (gw_xfer_batch_prepared)" : "gw_xfer_batch", rounds,
                   best * 1e6, best * 1e9 / nsel, sum / rounds * 1e6, bestw * 1e6, bestw * 1e9 / nsel);
        }
        CHECK_ST(gw_pages_destroy(sel), GW_OK);
    } else {
        /* 1. put of the selected blocks, a counted notification */
        gw_xfer_opts_t o = {.size = sizeof(o), .notify = GW_NOTIFY_COUNTED, .value = 9};
        gw_pages_t *sel = NULL;
        if (prepared) { /* destroyed while the put may run: freed when it ends */
            REQUIRE_OK(gw_pages_create(ctx, lidx, ridx, nsel, &sel));
            REQUIRE_OK(gw_xfer_batch_prepared(ep, GW_XFER_PUT, LS, R, sel, &o, &q));
            CHECK_ST(gw_pages_destroy(sel), GW_OK);
        } else {
            REQUIRE_OK(gw_xfer_batch(ep, GW_XFER_PUT, LS, lidx, R, ridx, nsel, &o, &q));
        }
        CHECK_ST(gw_request_wait(q, 30000), GW_OK);
        gw_request_free(q);
        fc_wait_chan(&pch, ctx); /* the target checked every byte */
        /* 2. get of other target blocks into the second set */
        uint32_t *gl = pick(nsel, nreg * per, 17), *gr = pick(nsel, nreg * per, 18);
        if (prepared) {
            REQUIRE_OK(gw_pages_create(ctx, gl, gr, nsel, &sel));
            REQUIRE_OK(gw_xfer_batch_prepared(ep, GW_XFER_GET, LD, R, sel, NULL, &q));
        } else {
            REQUIRE_OK(gw_xfer_batch(ep, GW_XFER_GET, LD, gl, R, gr, nsel, NULL, &q));
        }
        CHECK_ST(gw_request_wait(q, 30000), GW_OK);
        gw_request_free(q);
        if (sel)
            CHECK_ST(gw_pages_destroy(sel), GW_OK);
        /* what the target holds now: its fill, with the put's blocks */
        uint8_t **tgt = calloc(nreg, sizeof(*tgt)), *s = malloc(rsz);
        for (uint32_t r = 0; r < nreg; r++) {
            tgt[r] = malloc(rsz);
            gwt_fill(tgt[r], rsz, seed_of(r, 1000));
        }
        for (uint32_t i = 0; i < nsel; i++) {
            gwt_fill(s, rsz, seed_of(lidx[i] / per, 2000));
            memcpy(tgt[ridx[i] / per] + (size_t)(ridx[i] % per) * page, s + (size_t)(lidx[i] % per) * page, page);
        }
        uint8_t *want = malloc(rsz * nreg), *got = malloc(rsz * nreg);
        for (uint32_t r = 0; r < nreg; r++)
            gwt_fill(want + r * rsz, rsz, seed_of(r, 3000));
        for (uint32_t i = 0; i < nsel; i++)
            memcpy(want + (size_t)gl[i] * page, tgt[gr[i] / per] + (size_t)(gr[i] % per) * page, page);
        REQUIRE(cu->cuMemcpyDtoH(got, (CUdeviceptr)(uintptr_t)dst, rsz * nreg) == CUDA_SUCCESS);
        size_t off = 0;
        while (off < rsz * nreg && got[off] == want[off])
            off++;
        if (off < rsz * nreg)
            fprintf(stderr, "get: first wrong byte at %zu (region %zu, block %zu)\n", off, off / rsz,
                    off % rsz / page);
        CHECK(off == rsz * nreg);
        for (uint32_t r = 0; r < nreg; r++)
            free(tgt[r]);
        free(tgt);
        free(s);
        free(want);
        free(got);
        free(gl);
        free(gr);
        if (getenv("FAKECUDA_LAUNCHES")) {
            /* KV_TABLES_EXPECT=none: no kernel loads (FAKECUDA_NO_MODULE),
             * every entry one copy-engine copy; else one table-kernel
             * launch per batch over every entry, no descriptors */
            int none = getenv("KV_TABLES_EXPECT") && !strcmp(getenv("KV_TABLES_EXPECT"), "none");
            unsigned items, items_t, nb = launches("gw_batch_copy", &items), nt = launches("gw_table_copy", &items_t);
            fprintf(stderr, "launches: gw_table_copy %u (%u entries), gw_batch_copy %u\n", nt, items_t, nb);
            CHECK(nt == (none ? 0u : 2u));
            CHECK(items_t == (none ? 0u : 2 * nsel));
            CHECK(nb == 0);
            /* the index arrays the launches read: a prepared selection's
             * in GPU memory (nothing copied at posting), the plain
             * batches' pinned copies in host memory */
            unsigned kd, kh;
            fc_launches("kidx_dev", &kd, 0, NULL);
            fc_launches("kidx_host", &kh, 0, NULL);
            fprintf(stderr, "index arrays read by the launches: %u in GPU memory, %u in host memory\n", kd, kh);
            CHECK(kd == (none || !prepared ? 0u : 4u));
            CHECK(kh == (none || prepared ? 0u : 4u));
            gw_ep_info_t info = {.size = sizeof(info)};
            gw_ep_query(ep, &info);
            fprintf(stderr, "path: %s\n", info.path);
            CHECK(strstr(info.path, none ? "GPU batches: copy engine per entry" : "GPU batches: copy kernel") != NULL);
        }
        /* 3. the target deregisters its last region: a batch whose
         * entries avoid it still moves (the other keys only), one that
         * names it fails as deregistered */
        REQUIRE(gwt_chan_send(&pch, "x", 1) == 0);
        fc_wait_chan(&pch, ctx);
        uint32_t m = 0;
        for (uint32_t i = 0; i < nsel; i++)
            if (ridx[i] / per != nreg - 1) { /* (pairs kept in order, the rest dropped) */
                lidx[m] = lidx[i];
                ridx[m++] = ridx[i];
            }
        REQUIRE(m > 0 && m < nsel);
        CHECK_ST(gwt_outcome(gw_xfer_batch(ep, GW_XFER_PUT, LS, lidx, R, ridx, m, NULL, &q), &q, 30000), GW_OK);
        ridx[0] = (nreg - 1) * per + 3;
        CHECK_ST(gwt_outcome(gw_xfer_batch(ep, GW_XFER_PUT, LS, lidx, R, ridx, m, NULL, &q), &q, 30000),
                 GW_ERR_INVALID_KEY);
    }
    if (!bench) {
        /* not waited for above in bench mode: the server's verdict came */
    } else {
        fc_wait_chan(&pch, ctx);
    }
    REQUIRE(gwt_chan_send(&pch, "d", 1) == 0);
    CHECK_ST(gw_dlist_destroy(LS), GW_OK);
    CHECK_ST(gw_dlist_destroy(LD), GW_OK);
    CHECK_ST(gw_dlist_destroy(R), GW_OK);
    for (uint32_t r = 0; r < nreg; r++) {
        CHECK_ST(gw_mem_dereg(ms[r]), GW_OK);
        CHECK_ST(gw_mem_dereg(md[r]), GW_OK);
        gw_rkey_destroy(rk[r]);
    }
    CHECK_ST(gw_ep_close(ep, 2000), GW_OK);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    CHECK(gwt_wait(pid, 60) == 0);
    free(lidx);
    free(ridx);
    return gwt_done("kv_tables");
}
