/* SPDX-License-Identifier: Apache-2.0 */
/* progress_thread.c - what the progress thread costs (gpuwire.h, Threading;
 * docs/PROGRESS.md): small-operation latency and rate over loopback with
 * and without it, on the transports of GPUWIRE_TRANSPORTS' list given as
 * arguments (default: tcp intra), and the CPU an idle context's thread
 * uses.
 *
 * Three setups, run in turn (ABCABC...) so that a change of the machine's
 * load hits each alike, each with a fresh target process:
 *   off      no thread; the target's application polls (gw_progress in a
 *            loop): the library as before, the reference
 *   on       both contexts run the thread; the target's application still
 *            polls (the thread and the application share the lock)
 *   passive  both run the thread; the target's application makes no call
 *            at all (blocked in read()): the thread alone serves it
 * Per setup: the 8-byte put latency (post, wait, one at a time: over tcp a
 * round trip through the target's progress; over intra a CMA copy the
 * target takes no part in) and the 1 KiB put rate (windows of 64 tracked
 * puts, each window waited for), and the time of a call that does no work
 * (gw_request_test of a complete request: the lock's own cost).  Prints
 * medians and the ratios on/off and passive/off.
 *
 * usage: progress_thread [TRANSPORT...]
 * env:   REPS=5 (rounds of the three setups), LAT_MS=400, RATE_MS=800 (time
 *        per measurement) */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gpuwire.h"

#define REGION (1u << 20)
#define WINDOW 64

enum { OFF, ON, PASSIVE, NSETUPS };
static const char *const setup_name[NSETUPS] = {"off", "on", "passive"};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *what, gw_status_t st, gw_context_t *ctx)
{
    fprintf(stderr, "progress_thread: %s: %s: %s\n", what, gw_status_name(st), ctx ? gw_last_error(ctx) : "");
    exit(1);
}
#define OK(ctx, e)                           \
    do {                                     \
        gw_status_t s_ = (e);                \
        if (s_ != GW_OK)                     \
            die(#e, s_, ctx);                \
    } while (0)

static gw_context_t *make_ctx(int thread)
{
    gw_config_t cfg = {.size = sizeof(cfg), .log_level = -1,
                       .progress_thread = thread ? GW_PROGRESS_THREAD_ON : GW_PROGRESS_THREAD_OFF};
    gw_context_t *ctx;
    OK(NULL, gw_context_create(&cfg, &ctx));
    return ctx;
}

static int read_full(int fd, void *b, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char *)b + got, n - got);
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return 0;
}

static void target(int setup, int wfd, int rfd)
{
    gw_context_t *ctx = make_ctx(setup != OFF);
    gw_listener_t *l;
    OK(ctx, gw_listen(ctx, "127.0.0.1:0", &l));
    char addr[128] = "";
    OK(ctx, gw_listener_addr(l, addr, sizeof(addr)));
    if (write(wfd, addr, sizeof(addr)) != sizeof(addr))
        _exit(2);
    gw_ep_t *ep;
    OK(ctx, gw_accept(l, 20000, &ep));
    void *buf = calloc(1, REGION);
    gw_mem_t *mem;
    OK(ctx, gw_mem_reg(ctx, buf, REGION, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, &mem));
    uint8_t key[1024];
    size_t klen = sizeof(key);
    OK(ctx, gw_mem_pack_rkey(mem, key, &klen));
    uint64_t k64 = klen;
    if (write(wfd, &k64, sizeof(k64)) != sizeof(k64) || write(wfd, key, klen) != (ssize_t)klen)
        _exit(2);
    char c;
    if (setup == PASSIVE) {
        if (read_full(rfd, &c, 1) != 0) /* no gpuwire call until the end */
            _exit(3);
    } else {
        for (;;) { /* an application that polls */
            for (int i = 0; i < 256; i++)
                gw_progress(ctx);
            struct pollfd p = {.fd = rfd, .events = POLLIN};
            if (poll(&p, 1, 0) != 0)
                break;
        }
    }
    gw_ep_close(ep, 1000);
    gw_listener_destroy(l);
    gw_mem_dereg(mem);
    gw_context_destroy(ctx);
    _exit(0);
}

typedef struct result {
    double lat_us, rate, call_ns;
} result_t;

static result_t run(int setup, int lat_ms, int rate_ms)
{
    int a[2], b[2];
    if (pipe(a) || pipe(b))
        exit(1);
    pid_t pid = fork();
    if (pid < 0)
        exit(1);
    if (pid == 0) {
        close(a[0]);
        close(b[1]);
        target(setup, a[1], b[0]);
    }
    close(a[1]);
    close(b[0]);
    gw_context_t *ctx = make_ctx(setup != OFF);
    char addr[128];
    uint64_t klen;
    uint8_t key[1024];
    if (read_full(a[0], addr, sizeof(addr)))
        die("target did not start", GW_ERR_SYSTEM, NULL);
    gw_ep_t *ep;
    OK(ctx, gw_connect(ctx, addr, &ep));
    if (read_full(a[0], &klen, sizeof(klen)) || klen > sizeof(key) || read_full(a[0], key, klen))
        die("target sent no key", GW_ERR_SYSTEM, NULL);
    gw_rkey_t *rk;
    OK(ctx, gw_rkey_unpack(ep, key, klen, &rk));
    uint64_t ra;
    size_t rlen;
    OK(ctx, gw_rkey_range(rk, &ra, &rlen));
    static uint8_t src[REGION];
    gw_mem_t *lm;
    OK(ctx, gw_mem_reg(ctx, src, sizeof(src), GW_ACCESS_LOCAL, &lm));
    gw_request_t *r, *w[WINDOW];
    for (int i = 0; i < 200; i++) { /* warm-up */
        OK(ctx, gw_put(ep, src, 8, lm, ra, rk, &r));
        OK(ctx, gw_request_wait(r, 20000));
        gw_request_free(r);
    }
    result_t res;
    long n = 0;
    double t0 = now_s(), t;
    do {
        for (int i = 0; i < 64; i++, n++) {
            OK(ctx, gw_put(ep, src, 8, lm, ra, rk, &r));
            OK(ctx, gw_request_wait(r, 20000));
            gw_request_free(r);
        }
        t = now_s();
    } while (t - t0 < lat_ms / 1000.0);
    res.lat_us = (t - t0) / (double)n * 1e6;
    n = 0;
    t0 = now_s();
    do {
        for (int i = 0; i < WINDOW; i++)
            OK(ctx, gw_put(ep, src + (size_t)i * 1024, 1024, lm, ra + (uint64_t)i * 1024, rk, &w[i]));
        for (int i = 0; i < WINDOW; i++) {
            OK(ctx, gw_request_wait(w[i], 20000));
            gw_request_free(w[i]);
        }
        n += WINDOW;
        t = now_s();
    } while (t - t0 < rate_ms / 1000.0);
    res.rate = (double)n / (t - t0);
    /* what the lock adds to a call that does no work: gw_request_test of a
     * complete request (without the thread: a load; with it: lock, load,
     * unlock) */
    OK(ctx, gw_put(ep, src, 8, lm, ra, rk, &r));
    OK(ctx, gw_request_wait(r, 20000));
    enum { CALLS = 1000000 };
    int bad = 0;
    t0 = now_s();
    for (int i = 0; i < CALLS; i++)
        bad += gw_request_test(r) != GW_OK;
    res.call_ns = (now_s() - t0) / CALLS * 1e9;
    gw_request_free(r);
    if (bad)
        die("gw_request_test of a complete request", GW_ERR_INVALID, ctx);
    if (write(b[1], "q", 1) != 1)
        exit(1);
    gw_rkey_destroy(rk);
    gw_ep_close(ep, 2000);
    gw_mem_dereg(lm);
    gw_context_destroy(ctx);
    int status;
    waitpid(pid, &status, 0);
    close(a[0]);
    close(b[1]);
    return res;
}

static int cmp(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* CPU time (user + system) of this process over `secs` seconds with one idle
 * context (no endpoint) of the given kind: what the thread's 10 ms timer
 * costs. */
static double idle_cpu_ms(int thread, double secs)
{
    gw_context_t *ctx = make_ctx(thread);
    struct rusage r0, r1;
    getrusage(RUSAGE_SELF, &r0);
    struct timespec ts = {(time_t)secs, (long)((secs - (time_t)secs) * 1e9)};
    nanosleep(&ts, NULL);
    getrusage(RUSAGE_SELF, &r1);
    gw_context_destroy(ctx);
    double u = (r1.ru_utime.tv_sec - r0.ru_utime.tv_sec) * 1e3 + (r1.ru_utime.tv_usec - r0.ru_utime.tv_usec) / 1e3;
    double s = (r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) * 1e3 + (r1.ru_stime.tv_usec - r0.ru_stime.tv_usec) / 1e3;
    return (u + s) / secs;
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    int reps = getenv("REPS") ? atoi(getenv("REPS")) : 5;
    int lat_ms = getenv("LAT_MS") ? atoi(getenv("LAT_MS")) : 400;
    int rate_ms = getenv("RATE_MS") ? atoi(getenv("RATE_MS")) : 800;
    if (reps < 1 || reps > 100)
        reps = 5;
    const char *deflt[] = {"tcp", "intra"};
    const char *const *tls = argc > 1 ? (const char *const *)argv + 1 : deflt;
    int ntl = argc > 1 ? argc - 1 : 2;
    double la = 0;
    if (getloadavg(&la, 1) != 1)
        la = -1;
    printf("# progress thread cost, %ld CPUs, load %.2f, %d rounds of off/on/passive, medians\n",
           sysconf(_SC_NPROCESSORS_ONLN), la, reps);
    printf("%-6s %-8s %14s %16s %14s\n", "tl", "setup", "8B put lat us", "1KiB put ops/s", "empty call ns");
    fflush(stdout); /* (before the fork of each run) */
    for (int t = 0; t < ntl; t++) {
        setenv("GPUWIRE_TRANSPORTS", tls[t], 1);
        double lat[NSETUPS][100], rate[NSETUPS][100], call[NSETUPS][100];
        for (int rep = 0; rep < reps; rep++)
            for (int s = 0; s < NSETUPS; s++) {
                result_t r = run(s, lat_ms, rate_ms);
                lat[s][rep] = r.lat_us;
                rate[s][rep] = r.rate;
                call[s][rep] = r.call_ns;
            }
        double ml[NSETUPS], mr[NSETUPS], mc[NSETUPS];
        for (int s = 0; s < NSETUPS; s++) {
            ml[s] = median(lat[s], reps);
            mr[s] = median(rate[s], reps);
            mc[s] = median(call[s], reps);
            printf("%-6s %-8s %14.2f %16.0f %14.1f\n", tls[t], setup_name[s], ml[s], mr[s], mc[s]);
        }
        printf("%-6s ratio on/off: latency %.2fx, rate %.2fx; passive/off: latency %.2fx, rate %.2fx\n", tls[t],
               ml[ON] / ml[OFF], mr[ON] / mr[OFF], ml[PASSIVE] / ml[OFF], mr[PASSIVE] / mr[OFF]);
        fflush(stdout);
    }
    unsetenv("GPUWIRE_TRANSPORTS");
    printf("idle context, CPU ms per second: thread off %.3f, thread on %.3f\n", idle_cpu_ms(0, 2.0),
           idle_cpu_ms(1, 2.0));
    return 0;
}
