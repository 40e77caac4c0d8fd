/* SPDX-License-Identifier: Apache-2.0 */
/* integ_gpu.c - the end-to-end integrity check (proto/proto_integrity.h)
 * with GPU memory, two processes, against the fake CUDA driver, over the
 * transport GPUWIRE_TRANSPORTS names: the CRCs of GPU entries are taken by
 * the CRC32C kernel (src/cuda/crc_kernel.cu), which the fake driver runs
 * where the GPU would read (FAKECUDA_LAUNCHES, when set, must log its
 * launches); against a real driver (no GPUWIRE_CUDA_LIB) the same program
 * runs the kernel on the GPU.
 *   1. a put_notify GPU -> GPU (the kernel at the source and at the target)
 *   2. an ordered paged put GPU -> GPU of 16 pages
 *   3. an ordered paged put host -> GPU of 8 pages, page 3 flipped at the
 *      source after its CRC (the fault point integ.source): the target's
 *      kernel finds the other CRC; both sides report page 3.
 * The initiator asks for the check through gw_config_t.integrity. */
#include <poll.h>
#include <unistd.h>

#include "core/fault.h"
#include "cuda/cuda_wrap.h"
#include "harness.h"
#include "fc_dev.h"

#define REGION (1u << 20)
#define PAGE 4096u
/* a transfer longer than the kernel's 256 KiB piece: its CRC is joined from
 * three pieces' on each side */
#define BIG_AT 393216u
#define BIG 589824u

static gwt_chan_t pch, cch;

static int server(void *arg)
{
    (void)arg;
    const gw_cuda_t *cu = fc_cuda(1);
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    gw_listener_t *l;
    gw_ep_t *ep = gwt_listen_accept(ctx, &cch, &l);
    void *region = fc_dev_alloc_filled(cu, REGION, 11);
    gw_mem_t *mem;
    REQUIRE_OK(gw_mem_reg(ctx, region, REGION, GW_ACCESS_REMOTE_WRITE, &mem));
    gwt_send_rkey(ep, mem, 1);
    uint64_t v = 0;
    CHECK_ST(gw_notify_wait(ep, 20000, &v), GW_OK);
    CHECK(v == 1);
    CHECK_ST(gw_notify_wait(ep, 20000, &v), GW_OK);
    CHECK(v == 10);
    CHECK_ST(gw_notify_wait(ep, 20000, &v), GW_OK);
    CHECK(v == 2);
    CHECK_ST(gw_notify_wait(ep, 20000, &v), GW_ERR_INTEGRITY);
    CHECK(v == 3);
    fprintf(stderr, "  target: %s\n", gw_last_error(ctx));
    CHECK(strstr(gw_last_error(ctx), "page 3 (remote 0x") != NULL);
    /* the first two transfers' bytes are in place */
    uint8_t *got = malloc(REGION), *want = malloc(REGION);
    REQUIRE(got && want);
    REQUIRE(cu->cuMemcpyDtoH(got, (CUdeviceptr)(uintptr_t)region, REGION) == CUDA_SUCCESS);
    gwt_fill(want, REGION, 21);
    CHECK(memcmp(got, want, 65536 + 16 * PAGE) == 0);
    CHECK(memcmp(got + BIG_AT, want + BIG_AT, BIG) == 0);
    free(got);
    free(want);
    REQUIRE(gwt_chan_send(&cch, "v", 1) == 0);
    gwt_chan_expect(&cch, ctx, "q");
    CHECK_ST(gw_ep_close(ep, 2000), GW_OK);
    CHECK_ST(gw_mem_dereg(mem), GW_OK);
    gw_listener_destroy(l);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    return gwt_done("integ_gpu target");
}

static unsigned crc_launches(void)
{
    return fc_launches("gw_crc32c_entries", NULL, 0, NULL);
}

static gw_status_t outcome(gw_context_t *ctx, gw_request_t *r, char *detail, size_t cap)
{
    gw_status_t st = gw_request_wait(r, 30000);
    gw_request_info_t info = {.size = sizeof(info)};
    gw_request_info(r, &info);
    snprintf(detail, cap, "%s", info.error_detail);
    gw_request_free(r);
    (void)ctx;
    return st;
}

int main(void)
{
    REQUIRE(gwt_chan_pair(&pch, &cch) == 0);
    int pid = gwt_spawn(server, NULL);
    const gw_cuda_t *cu = fc_cuda(1);
    setenv("GPUWIRE_FAULT", "integ.source:flip=33@4", 1);
    gw_config_t cfg = {.size = sizeof(cfg), .log_level = -1, .integrity = GW_INTEGRITY_ON};
    char addr[128];
    REQUIRE(gwt_chan_recv(&pch, addr, sizeof(addr), 10000) > 0);
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(&cfg, &ctx));
    unsetenv("GPUWIRE_FAULT");
    gw_ep_t *ep;
    REQUIRE_OK(gw_connect(ctx, addr, &ep));
    uint64_t rbase;
    gw_rkey_t *rk = gwt_recv_rkey(ep, 1, &rbase);
    void *src = fc_dev_alloc_filled(cu, REGION, 21);
    gw_mem_t *ms;
    REQUIRE_OK(gw_mem_reg(ctx, src, REGION, GW_ACCESS_LOCAL, &ms));
    uint8_t *hsrc = malloc(REGION);
    gwt_fill(hsrc, REGION, 31);
    gw_mem_t *mh;
    REQUIRE_OK(gw_mem_reg(ctx, hsrc, REGION, GW_ACCESS_LOCAL, &mh));
    char d[512];
    unsigned before = crc_launches();
    gw_request_t *r;
    REQUIRE_OK(gw_put_notify(ep, src, 65536, ms, rbase, rk, 1, &r));
    CHECK_ST(outcome(ctx, r, d, sizeof(d)), GW_OK);
    REQUIRE_OK(gw_put_notify(ep, (uint8_t *)src + BIG_AT, BIG, ms, rbase + BIG_AT, rk, 10, &r));
    CHECK_ST(outcome(ctx, r, d, sizeof(d)), GW_OK);
    gw_xfer_opts_t o = {.size = sizeof(o), .notify = GW_NOTIFY_ORDERED, .value = 2};
    REQUIRE_OK(gw_xfer_pages(ep, GW_XFER_PUT, ms, (uint8_t *)src + 65536, NULL, rk, rbase + 65536, NULL, 16, PAGE, &o,
                             &r));
    CHECK_ST(outcome(ctx, r, d, sizeof(d)), GW_OK);
    o.value = 3;
    REQUIRE_OK(gw_xfer_pages(ep, GW_XFER_PUT, mh, hsrc, NULL, rk, rbase + 262144, NULL, 8, PAGE, &o, &r));
    CHECK_ST(outcome(ctx, r, d, sizeof(d)), GW_ERR_INTEGRITY);
    fprintf(stderr, "  initiator: %s\n", d);
    CHECK(strstr(d, "page 3 (remote 0x") != NULL && strstr(d, "1 of 8 pages differ") != NULL);
    CHECK(gw_fault_rules() == 1 && gw_fault_fired(0) == 1);
    gwt_chan_expect(&pch, ctx, "v");
    /* the source's two GPU transfers took the kernel once each; the target's three too */
    if (getenv("FAKECUDA_LAUNCHES")) { /* (a real driver keeps no log: scripts/gpu-device-run.sh runs it so) */
        unsigned n = crc_launches() - before;
        fprintf(stderr, "  CRC32C kernel launches: %u\n", n);
        CHECK(n >= 5);
    }
    gw_fault_configure("", NULL, 0);
    gwt_chan_send(&pch, "q", 1);
    gw_rkey_destroy(rk);
    CHECK_ST(gw_ep_close(ep, 5000), GW_OK);
    CHECK_ST(gw_mem_dereg(ms), GW_OK);
    CHECK_ST(gw_mem_dereg(mh), GW_OK);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    CHECK(gwt_wait(pid, 30) == 0);
    return gwt_done("integ_gpu");
}
