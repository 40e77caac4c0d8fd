/* SPDX-License-Identifier: Apache-2.0 */
/* gpu_put_bench - gpuwire put GPU0 -> GPU1 between two processes, through
 * whatever transport GPUWIRE_TRANSPORTS allows (intra: CUDA IPC + copy
 * engines; tcp: host-staged over loopback).  Per size: latency of one put
 * waited for, bandwidth of a window of untracked puts closed by a flush, and
 * the CPU time both processes spent during the bandwidth loop (cpu_pct:
 * initiator, srv_cpu_pct: target, percent of one core).  argv[1]: label. */
#include <poll.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../tests/gpu/gpu_util.h"
#include "gpu_bench_util.h"
#include "gpuwire.h"

#define OK(x)                                                                                  \
    do {                                                                                       \
        gw_status_t s_ = (x);                                                                  \
        if (s_ != GW_OK) {                                                                     \
            fprintf(stderr, "%s:%d: %s: %s: %s\n", __FILE__, __LINE__, #x, gw_status_name(s_),  \
                    ctx ? gw_last_error(ctx) : "");                                           \
            exit(2);                                                                           \
        }                                                                                      \
    } while (0)

static int c2s[2], s2c[2];

static double cpu_us(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec * 1e6 + (double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_sec * 1e6 +
           (double)ru.ru_stime.tv_usec;
}

static int server(size_t maxs)
{
    gw_context_t *ctx = NULL;
    const gw_cuda_t *cu = gpu_require(2);
    char why[256];
    REQUIRE(gw_cuda_ctx_for_device(1, why, sizeof(why)));
    CUdeviceptr region;
    CU_CHECK(cu->cuMemAlloc(&region, maxs));
    OK(gw_context_create(NULL, &ctx));
    gw_listener_t *l;
    OK(gw_listen(ctx, "127.0.0.1:0", &l));
    char addr[80];
    OK(gw_listener_addr(l, addr, sizeof(addr)));
    REQUIRE(write(s2c[1], addr, sizeof(addr)) == (ssize_t)sizeof(addr));
    gw_ep_t *ep;
    OK(gw_accept(l, 30000, &ep));
    gw_mem_t *mem;
    OK(gw_mem_reg(ctx, (void *)(uintptr_t)region, maxs, GW_ACCESS_REMOTE_WRITE, &mem));
    uint8_t key[512];
    size_t klen = sizeof(key);
    OK(gw_mem_pack_rkey(mem, key, &klen));
    REQUIRE(write(s2c[1], &klen, sizeof(klen)) == (ssize_t)sizeof(klen));
    REQUIRE(write(s2c[1], key, klen) == (ssize_t)klen);
    int cfd;
    OK(gw_context_fd(ctx, &cfd));
    double c0 = 0;
    for (;;) {
        struct pollfd p[2] = {{c2s[0], POLLIN, 0}, {cfd, POLLIN, 0}};
        while (gw_progress(ctx) > 0)
            ;
        poll(p, 2, 1);
        if (!(p[0].revents & (POLLIN | POLLHUP)))
            continue;
        char cmd;
        if (read(c2s[0], &cmd, 1) != 1 || cmd == 'Q')
            break;
        if (cmd == 'B')
            c0 = cpu_us();
        if (cmd == 'E') {
            double d = cpu_us() - c0;
            REQUIRE(write(s2c[1], &d, sizeof(d)) == (ssize_t)sizeof(d));
        }
    }
    gw_mem_dereg(mem);
    gw_ep_close(ep, 1000);
    gw_listener_destroy(l);
    gw_context_destroy(ctx);
    return 0;
}

int main(int argc, char **argv)
{
    const char *label = argc > 1 ? argv[1] : "gw";
    size_t maxs = gwb_max_size();
    gpu_require_before_fork(2);
    REQUIRE(pipe(c2s) == 0 && pipe(s2c) == 0);
    int pid = fork();
    if (pid == 0) {
        close(c2s[1]);
        close(s2c[0]);
        _exit(server(maxs));
    }
    close(c2s[0]);
    close(s2c[1]); /* a dead server reads as EOF, never a hang */
    gw_context_t *ctx = NULL;
    const gw_cuda_t *cu = gpu_require(2);
    char why[256];
    REQUIRE(gw_cuda_ctx_for_device(0, why, sizeof(why)));
    CUdeviceptr src;
    CU_CHECK(cu->cuMemAlloc(&src, maxs));
    CU_CHECK(cu->cuMemsetD8(src, 0x3c, maxs));
    char addr[80];
    REQUIRE(read(s2c[0], addr, sizeof(addr)) == (ssize_t)sizeof(addr));
    OK(gw_context_create(NULL, &ctx));
    gw_ep_t *ep;
    OK(gw_connect(ctx, addr, &ep));
    gw_ep_info_t info = {.size = sizeof(info)};
    OK(gw_ep_query(ep, &info));
    fprintf(stderr, "%s: endpoint %s (%s)\n", label, info.transport, info.path);
    size_t klen;
    uint8_t key[512];
    REQUIRE(read(s2c[0], &klen, sizeof(klen)) == (ssize_t)sizeof(klen) && klen <= sizeof(key));
    REQUIRE(read(s2c[0], key, klen) == (ssize_t)klen);
    gw_rkey_t *rk;
    OK(gw_rkey_unpack(ep, key, klen, &rk));
    uint64_t base;
    gw_rkey_range(rk, &base, NULL);
    gw_mem_t *msrc;
    OK(gw_mem_reg(ctx, (void *)(uintptr_t)src, maxs, GW_ACCESS_LOCAL, &msrc));
    gw_mem_info_t mi = {.size = sizeof(mi)};
    gw_mem_query(msrc, &mi);
    fprintf(stderr, "%s: source path: %s\n", label, mi.path);
    void *sp = (void *)(uintptr_t)src;
    for (size_t i = 0; i < GWB_NSIZES && gwb_sizes[i] <= maxs; i++) {
        size_t n = gwb_sizes[i];
        int it = gwb_iters(n);
        gw_request_t *r;
        int lit = n <= (1u << 20) ? (it > 200 ? 200 : it) : 2;
        double t0 = 0;
        for (int k = -3; k < lit; k++) {
            if (k == 0)
                t0 = gwb_now();
            OK(gw_put(ep, sp, n, msrc, base, rk, &r));
            OK(gw_request_wait(r, 60000));
            gw_request_free(r);
        }
        double lat = (gwb_now() - t0) / lit * 1e6;
        REQUIRE(write(c2s[1], "B", 1) == 1);
        double c0 = cpu_us();
        t0 = gwb_now();
        for (int k = 0; k < it; k++)
            OK(gw_put(ep, sp, n, msrc, base, rk, NULL));
        OK(gw_flush(ep, &r));
        OK(gw_request_wait(r, 120000));
        gw_request_free(r);
        double dt = gwb_now() - t0;
        double ccpu = cpu_us() - c0;
        REQUIRE(write(c2s[1], "E", 1) == 1);
        double scpu = 0;
        REQUIRE(read(s2c[0], &scpu, sizeof(scpu)) == (ssize_t)sizeof(scpu));
        printf("RESULT %s %zu lat_us=%.2f bw_GBps=%.3f cpu_pct=%.0f srv_cpu_pct=%.0f\n", label, n, lat,
               (double)n * it / dt / 1e9, ccpu / (dt * 1e6) * 100, scpu / (dt * 1e6) * 100);
        fflush(stdout);
    }
    REQUIRE(write(c2s[1], "Q", 1) == 1);
    gw_rkey_destroy(rk);
    gw_mem_dereg(msrc);
    gw_ep_close(ep, 1000);
    gw_context_destroy(ctx);
    int ws;
    waitpid(pid, &ws, 0);
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : 1;
}
