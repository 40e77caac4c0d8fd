/* SPDX-License-Identifier: Apache-2.0 */
/* fault_cuda.c - faults injected into the CUDA driver (GPUWIRE_FAULT
 * cuda.<function>, cuda/cuda_wrap.c) under GPU memory moved over tcp, two
 * processes, against the fake driver (tests/fakecuda):
 *   fault_cuda CASE
 *   d2h     the initiator's device-to-host staging copy of a put fails
 *   h2d     the target's host-to-device staging copy fails
 *   kernel  the target's scatter kernel of a paged put fails to launch
 *   event   the initiator's copy reports an error when it is waited for
 *           (an asynchronous failure: cuEventQuery)
 *   pin     the target cannot pin its staging buffers (cuMemHostAlloc)
 *   reg     the target's gw_mem_reg of GPU memory meets a failing
 *           cuPointerGetAttributes: GW_ERR_CUDA naming the call, nothing
 *           registered, the next registration works
 *   ipc_open, ipc_copy (over intra, CUDA IPC): opening the target's GPU
 *           memory, or a copy into it, fails in the initiator: that put
 *           fails with GW_ERR_CUDA, the endpoints stay healthy (the copies
 *           are one-sided: nothing half-sent) and the next puts complete
 * For the transfer cases: every request ends within a bound; at least one
 * fails with GW_ERR_CUDA (the side that met the fault) or an endpoint error;
 * both endpoints report the failure; the target's GPU region holds only its
 * old bytes and what the posted puts wrote, and all of what the completed
 * ones wrote; the rule fired in the process it acts in. */
#include <poll.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/fault.h"
#include "cuda/cuda_wrap.h"
#include "harness.h"
#include "../fakecuda/fc_dev.h"

#define REGION (4u << 20)
#define NPUT 6 /* at 0, 512 KiB, ... 2.5 MiB: below the paged put */
#define PUTLEN (256u << 10)
#define PAGE 4096
#define NPAGE 64
#define PAGED_OFF (3u << 20) /* the paged put's pages: [3 MiB, 3.5 MiB) */

typedef struct xcase {
    const char *name, *rule;
    int target_side;
    int ep_survives; /* the failure is the request's alone (intra: one-sided copies) */
} xcase_t;

static const xcase_t g_cases[] = {{"d2h", "cuda.cuMemcpyAsync:fail@3", 0, 0},
                                  {"h2d", "cuda.cuMemcpyAsync:fail=CUDA_ERROR_ILLEGAL_ADDRESS@4", 1, 0},
                                  {"kernel", "cuda.cuLaunchKernel:fail", 1, 0},
                                  {"event", "cuda.cuEventQuery:fail=CUDA_ERROR_ILLEGAL_ADDRESS@6", 0, 0},
                                  {"pin", "cuda.cuMemHostAlloc:fail=CUDA_ERROR_OUT_OF_MEMORY*all", 1, 0},
                                  {"reg", "cuda.cuPointerGetAttributes:fail", 1, 1},
                                  {"ipc_open", "cuda.cuIpcOpenMemHandle:fail", 0, 1},
                                  {"ipc_copy", "cuda.cuMemcpy*:fail@3", 0, 1},
                                  {NULL, NULL, 0, 0}};

typedef struct report {
    int32_t ep_error, fired, reg_status, reg_named;
    uint64_t calls;
} report_t;

static gwt_chan_t pch, cch;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}
static const xcase_t *g_case;

static int server(void *arg)
{
    (void)arg;
    const gw_cuda_t *cu = fc_cuda(0);
    /* the region is filled before the rule is armed (at the context) */
    void *region = fc_dev_alloc_filled(cu, REGION, 1);
    setenv("GPUWIRE_FAULT", g_case->target_side ? g_case->rule : "", 1);
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    gw_listener_t *l;
    gw_ep_t *ep = gwt_listen_accept(ctx, &cch, &l);
    report_t rep = {0};
    gw_mem_t *mem = NULL;
    gw_status_t st = gw_mem_reg(ctx, region, REGION, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, &mem);
    if (strcmp(g_case->name, "reg") == 0) {
        rep.reg_status = st;
        rep.reg_named = strstr(gw_last_error(ctx), "cuPointerGetAttributes") != NULL;
        fprintf(stderr, "target: gw_mem_reg: %s: %s\n", gw_status_name(st), gw_last_error(ctx));
        if (st == GW_OK)
            gw_mem_dereg(mem);
        st = gw_mem_reg(ctx, region, REGION, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, &mem);
    }
    REQUIRE_OK(st);
    gwt_send_rkey(ep, mem, 1);
    /* serve until the parent asks for the report */
    char cmd;
    int fd = -1;
    gw_context_fd(ctx, &fd);
    for (;;) {
        gw_progress(ctx);
        struct pollfd p = {.fd = cch.rfd, .events = POLLIN};
        if (poll(&p, 1, 2) > 0)
            break;
    }
    REQUIRE(gwt_chan_recv(&cch, &cmd, 1, 5000) == 1);
    gw_ep_info_t info = {.size = sizeof(info)};
    gw_ep_query(ep, &info);
    rep.ep_error = info.error;
    if (info.error != GW_OK)
        fprintf(stderr, "target endpoint: %s: %s\n", gw_status_name(info.error), gw_last_error(ctx));
    rep.fired = (int32_t)gw_fault_fired(0);
    rep.calls = gw_fault_calls(0);
    REQUIRE(gwt_chan_send(&cch, &rep, sizeof(rep)) == 0);
    /* the region's bytes, as the GPU holds them */
    uint8_t *img = malloc(REGION);
    REQUIRE(cu->cuMemcpyDtoH(img, (CUdeviceptr)(uintptr_t)region, REGION) == CUDA_SUCCESS);
    REQUIRE(gwt_chan_send(&cch, img, REGION) == 0);
    REQUIRE(gwt_chan_recv(&cch, &cmd, 1, 30000) == 1);
    CHECK_ST(gw_ep_close(ep, 2000), GW_OK);
    gw_listener_destroy(l);
    CHECK_ST(gw_mem_dereg(mem), GW_OK);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    return gwt_done("fault_cuda target");
}

int main(int argc, char **argv)
{
    for (int i = 0; argc > 1 && g_cases[i].name; i++)
        if (strcmp(argv[1], g_cases[i].name) == 0)
            g_case = &g_cases[i];
    if (!g_case) {
        fprintf(stderr, "usage: fault_cuda CASE (d2h, h2d, kernel, event, pin, reg)\n");
        return 2;
    }
    const gw_cuda_t *cu = fc_cuda(0);
    gwt_chan_pair(&pch, &cch);
    int pid = gwt_spawn(server, NULL);
    uint8_t *srch = malloc(REGION);
    gwt_fill(srch, REGION, 2);
    void *src = fc_dev_alloc_filled(cu, REGION, 2);
    setenv("GPUWIRE_FAULT", g_case->target_side ? "" : g_case->rule, 1);
    fprintf(stderr, "case %s: GPUWIRE_FAULT=\"%s\" in the %s\n", g_case->name, g_case->rule,
            g_case->target_side ? "target" : "initiator");
    char addr[80];
    REQUIRE(gwt_chan_recv(&pch, addr, sizeof(addr), 10000) > 0);
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    gw_ep_t *ep;
    REQUIRE_OK(gw_connect(ctx, addr, &ep));
    uint64_t base;
    gw_rkey_t *rk = gwt_recv_rkey(ep, 1, &base);
    gw_mem_t *smem;
    REQUIRE_OK(gw_mem_reg(ctx, src, REGION, GW_ACCESS_LOCAL, &smem));

    /* NPUT puts of PUTLEN at 0, 2*PUTLEN, ... (a gap after each), then a
     * paged put of NPAGE pages into every other page from PAGED_OFF on */
    gw_request_t *r[NPUT + 1];
    gw_status_t st[NPUT + 1];
    uint32_t rpages[NPAGE];
    for (int i = 0; i < NPAGE; i++)
        rpages[i] = (uint32_t)(2 * i);
    int nops = NPUT + 1, ok = 0, cuda_err = 0;
    for (int i = 0; i < nops; i++) {
        gw_status_t s;
        if (i < NPUT)
            s = gw_put(ep, (uint8_t *)src + (size_t)i * PUTLEN, PUTLEN, smem, base + (uint64_t)i * 2 * PUTLEN, rk,
                       &r[i]);
        else
            s = gw_xfer_pages(ep, GW_XFER_PUT, smem, src, NULL, rk, base + PAGED_OFF, rpages, NPAGE, PAGE, NULL,
                              &r[i]);
        if (s != GW_OK && s != GW_INPROGRESS) {
            r[i] = NULL;
            st[i] = s;
        }
    }
    for (int i = 0; i < nops; i++) {
        if (r[i]) {
            st[i] = gw_request_wait(r[i], 30000);
            if (st[i] == GW_ERR_TIMEOUT) {
                fprintf(stderr, "op %d still pending after 30 s: a hang\n", i);
                gwt_failures++;
            }
            gw_request_free(r[i]);
        }
        ok += st[i] == GW_OK;
        cuda_err += st[i] == GW_ERR_CUDA;
        if (st[i] != GW_OK && st[i] != GW_ERR_CUDA && !GW_IS_ENDPOINT_ERROR(st[i]) && st[i] != GW_ERR_CANCELED) {
            fprintf(stderr, "op %d failed with %s: neither GW_ERR_CUDA nor an endpoint error\n", i,
                    gw_status_name(st[i]));
            gwt_failures++;
        }
    }
    fprintf(stderr, "%d of %d operations completed OK; %d failed with GW_ERR_CUDA; last error: %s\n", ok, nops,
            cuda_err, gw_last_error(ctx));
    int transfer_case = !g_case->ep_survives;
    if (!g_case->target_side) {
        CHECK(cuda_err > 0); /* the side that met the fault says it was CUDA */
        CHECK(strstr(gw_last_error(ctx), "CUDA_ERROR") != NULL);
    }
    gw_ep_info_t info = {.size = sizeof(info)};
    gw_ep_query(ep, &info);
    fprintf(stderr, "initiator endpoint: %s\n", gw_status_name(info.error));

    /* the target's report, after its endpoint had time to learn of ours */
    report_t rep;
    double end = now_s() + 15;
    do {
        usleep(50000);
        gw_progress(ctx);
    } while (transfer_case && now_s() < end && info.error == GW_OK);
    char cmd = 'r';
    /* progress while the target answers */
    REQUIRE(gwt_chan_send(&pch, &cmd, 1) == 0);
    REQUIRE(gwt_chan_recv(&pch, &rep, sizeof(rep), 20000) == (int)sizeof(rep));
    uint8_t *img = malloc(REGION);
    REQUIRE(gwt_chan_recv(&pch, img, REGION, 20000) == (int)REGION);
    int fired = g_case->target_side ? rep.fired : (int)gw_fault_fired(0);
    uint64_t calls = g_case->target_side ? rep.calls : gw_fault_calls(0);
    fprintf(stderr, "rule fired %d times in %llu calls; target endpoint %s\n", fired, (unsigned long long)calls,
            gw_status_name(rep.ep_error));
    if (fired <= 0) {
        fprintf(stderr, "the injection never fired: this run tested nothing\n");
        gwt_failures++;
    }
    if (transfer_case) {
        CHECK(ok < nops);
        /* the side that met the fault fails its endpoint with GW_ERR_CUDA,
         * the other learns of it as a lost connection */
        CHECK(GW_IS_ENDPOINT_ERROR(info.error) || (!g_case->target_side && info.error == GW_ERR_CUDA));
        CHECK(GW_IS_ENDPOINT_ERROR(rep.ep_error) || (g_case->target_side && rep.ep_error == GW_ERR_CUDA));
    } else if (strcmp(g_case->name, "reg") == 0) {
        CHECK_ST((gw_status_t)rep.reg_status, GW_ERR_CUDA);
        CHECK(rep.reg_named);
        CHECK(ok == nops);
        CHECK_ST(info.error, GW_OK);
        CHECK_ST(rep.ep_error, GW_OK);
    } else {
        CHECK(cuda_err == 1 && ok == nops - 1);
        CHECK_ST(info.error, GW_OK);
        CHECK_ST(rep.ep_error, GW_OK);
    }

    /* the region: old bytes (seed 1), or the bytes a posted put wrote */
    uint8_t *old = malloc(REGION), *want = malloc(REGION), *owner = calloc(REGION, 1);
    gwt_fill(old, REGION, 1);
    memcpy(want, old, REGION);
    for (int i = 0; i < NPUT; i++) {
        memcpy(want + (size_t)i * 2 * PUTLEN, srch + (size_t)i * PUTLEN, PUTLEN);
        memset(owner + (size_t)i * 2 * PUTLEN, st[i] == GW_OK ? 1 : 2, PUTLEN);
    }
    for (int k = 0; k < NPAGE; k++) {
        memcpy(want + PAGED_OFF + (size_t)rpages[k] * PAGE, srch + (size_t)k * PAGE, PAGE);
        memset(owner + PAGED_OFF + (size_t)rpages[k] * PAGE, st[NPUT] == GW_OK ? 1 : 2, PAGE);
    }
    long long bad = 0, partial = 0, first = -1;
    for (size_t i = 0; i < REGION; i++) {
        if (img[i] == want[i])
            continue;
        if (owner[i] == 2 && img[i] == old[i]) {
            partial++;
            continue;
        }
        if (first < 0)
            first = (long long)i;
        bad++;
    }
    fprintf(stderr, "target region: %lld bytes of failed puts not written; %lld bytes corrupted\n", partial, bad);
    if (bad) {
        fprintf(stderr, "first corrupted byte at %lld (owner %d)\n", first, owner[first]);
        gwt_failures++;
    }
    REQUIRE(gwt_chan_send(&pch, &cmd, 1) == 0);
    gw_rkey_destroy(rk);
    CHECK_ST(gw_ep_close(ep, 5000), GW_OK);
    CHECK_ST(gw_mem_dereg(smem), GW_OK);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    CHECK(gwt_wait(pid, 30) == 0);
    return gwt_done(g_case->name);
}
