/* SPDX-License-Identifier: Apache-2.0 */
/* gw_verbs_bench.c - gpuwire over verbs measured the way perftest measures,
 * for side-by-side runs (bench/compare/verbs_rxe.sh).
 *
 *   gw_verbs_bench OP SIZE ITERS [SERVER_DEV CLIENT_DEV]
 *     OP: put (like ib_write_bw), get (ib_read_bw), send (ib_send_bw),
 *         lat (8-byte put ping-pong, each side polling its memory for the
 *         peer's write, like ib_write_lat; prints half the round trip)
 *   prints one line: "OP SIZE ops_s=N bw_gbps=X" (operations first: at small sizes
 *   the rate is the figure) or "lat SIZE usec=X"
 *
 * lat has two loops (GW_BENCH_LAT):
 *   complete (default): ib_write_lat's loop: each side puts, waits for its
 *       put's completion (gw_request_wait), then watches its memory for the
 *       peer's write, calling gw_progress() only every GW_BENCH_POLL_EVERY
 *       (2^20, about a millisecond) checks (nothing is outstanding then;
 *       the library's timers);
 *   progress: an untracked put, then gw_progress() on every check while
 *       watching (the waiter notices the write after the pass it is in:
 *       the pass's length is on the measured path);
 *   untracked: UCX's put_nbi shape: an untracked put (req NULL, no
 *       completion asked for: over verbs an unsignalled WR), then the
 *       complete loop's watch, gw_progress() only every
 *       GW_BENCH_POLL_EVERY checks (a put that finds the send queue full
 *       is queued, not refused: it leaves with that progress call).
 *
 * Bandwidth keeps WINDOW (128, perftest's default tx depth) operations in
 * flight from one registered buffer, as perftest does, and times ITERS of
 * them.  Server and client are two processes on one
 * host; GPUWIRE_TRANSPORTS=verbs. */
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define WINDOW 128

static gwt_chan_t pch, cch;
static const char *op;
static size_t size;
static long iters;
static const char *sdev = "", *cdev = "";
/* lat: call gw_progress() every this many checks of the flag byte
 * (GW_BENCH_POLL_EVERY; default 2^20 in the complete loop, 1 in progress) */
static unsigned poll_every = 1;
enum { LAT_COMPLETE, LAT_PROGRESS, LAT_UNTRACKED };
static const char *const lat_names[] = {"complete", "progress", "untracked"};
static int lat_loop = LAT_COMPLETE; /* GW_BENCH_LAT */

/* lat: one put of the ping-pong (the complete loop waits for its completion) */
static void lat_put(gw_ep_t *ep, const uint8_t *out, uint64_t rbase, gw_rkey_t *rk)
{
    gw_request_t *r = NULL;
    REQUIRE_OK(gw_put(ep, out, size, NULL, rbase, rk, lat_loop == LAT_COMPLETE ? &r : NULL));
    if (r) {
        REQUIRE_OK(gw_request_wait(r, 20000));
        gw_request_free(r);
    }
}

/* lat: waits for the peer's write of round i; returns the progress passes made */
static long lat_early; /* rounds whose peer write was in place before the watch began */
static uint64_t lat_wait(gw_context_t *ctx, volatile uint8_t *buf, long i)
{
    uint64_t passes = 0;
    if (buf[size - 1] == (uint8_t)i)
        lat_early++;
    /* a count down, not spin % poll_every: a division per check is a
     * helper call under emulation, and ib_write_lat's check is a load and
     * a compare */
    for (unsigned left = poll_every; buf[size - 1] != (uint8_t)i;)
        if (--left == 0) {
            gw_progress(ctx);
            passes++;
            left = poll_every;
        }
    return passes;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Per-iteration stamps of the latency loop: the time-stamp counter where
 * there is one (as perftest's get_cycles), scaled by the whole run's
 * CLOCK_MONOTONIC time.  A clock_gettime() per iteration would sit on the
 * measured path, and in an emulated guest it is a system call. */
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
static uint64_t ticks(void) { return __rdtsc(); }
#else
static uint64_t ticks(void) { return (uint64_t)(now_s() * 1e9); }
#endif

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void sync_msg(gw_ep_t *ep, int sending, uint64_t tag)
{
    char b[8] = "sync";
    gw_request_t *r;
    if (sending)
        REQUIRE_OK(gw_send(ep, b, 5, NULL, tag, &r));
    else
        REQUIRE_OK(gw_recv(ep, b, sizeof(b), NULL, tag, ~0ull, &r));
    REQUIRE_OK(gw_request_wait(r, 60000));
    gw_request_free(r);
}

static int server(void *arg)
{
    (void)arg;
    setenv("GPUWIRE_IB_DEVICE", sdev, 1);
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    gw_listener_t *l;
    REQUIRE_OK(gw_listen(ctx, "127.0.0.1:0", &l));
    char addr[80];
    REQUIRE_OK(gw_listener_addr(l, addr, sizeof(addr)));
    gwt_chan_send(&cch, addr, (uint32_t)strlen(addr) + 1);
    gw_ep_t *ep;
    REQUIRE_OK(gw_accept(l, 20000, &ep));
    size_t len = size < 64 ? 64 : size;
    volatile uint8_t *buf = aligned_alloc(4096, (len + 4095) & ~(size_t)4095);
    memset((void *)buf, 0, len);
    gw_mem_t *m;
    REQUIRE_OK(gw_mem_reg(ctx, (void *)buf, len, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, &m));
    gwt_send_rkey(ep, m, 1);
    if (!strcmp(op, "send")) {
        gw_request_t **rs = calloc((size_t)iters, sizeof(*rs));
        for (long i = 0; i < iters; i++)
            REQUIRE_OK(gw_recv(ep, (void *)buf, size, m, 7, ~0ull, &rs[i]));
        sync_msg(ep, 1, 2);
        for (long i = 0; i < iters; i++) {
            REQUIRE_OK(gw_request_wait(rs[i], 60000));
            gw_request_free(rs[i]);
        }
        free(rs);
    } else if (!strcmp(op, "lat")) {
        gw_rkey_t *rk = gwt_recv_rkey(ep, 1, NULL);
        uint64_t rbase;
        size_t rlen;
        gw_rkey_range(rk, &rbase, &rlen);
        uint8_t out[8];
        long total = iters + iters / 10 + 1; /* warm-up included, as the client */
        for (long i = 1; i <= total; i++) {
            lat_wait(ctx, buf, i);
            memset(out, (int)(uint8_t)i, sizeof(out));
            lat_put(ep, out, rbase, rk);
        }
        while (gw_progress(ctx) > 0)
            ;
        if (getenv("GW_BENCH_DESCRIBE"))
            printf("server (%s loop): the peer's write was already in place when the watch began in %ld of %ld "
                   "rounds\n", lat_names[lat_loop], lat_early, total);
        sync_msg(ep, 0, 3);
        gw_rkey_destroy(rk);
    }
    sync_msg(ep, 0, 9);
    gw_mem_dereg(m);
    gw_ep_close(ep, 2000);
    gw_listener_destroy(l);
    gw_context_destroy(ctx);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s put|get|send|lat SIZE ITERS [SERVER_DEV CLIENT_DEV]\n", argv[0]);
        return 2;
    }
    op = argv[1];
    size = (size_t)strtoull(argv[2], NULL, 0);
    iters = strtol(argv[3], NULL, 0);
    if (!strcmp(op, "lat") && (size < 1 || size > 8)) {
        /* the ping-pong puts from an 8-byte buffer and watches its last byte */
        fprintf(stderr, "%s: lat SIZE must be 1 to 8 bytes, not %zu\n", argv[0], size);
        return 2;
    }
    if (argc >= 6) {
        sdev = argv[4];
        cdev = argv[5];
    }
    if (getenv("GW_BENCH_LAT")) {
        const char *l = getenv("GW_BENCH_LAT");
        for (lat_loop = 0; lat_loop < 3 && strcmp(l, lat_names[lat_loop]); lat_loop++)
            ;
        if (lat_loop == 3) {
            fprintf(stderr, "%s: GW_BENCH_LAT must be complete, progress or untracked, not '%s'\n", argv[0], l);
            return 2;
        }
    }
    /* complete loop: ib_write_lat calls nothing while it watches; the
     * library's timers are second-scale, and a check is a load and a compare
     * (~1 ns): 2^20 checks is about a millisecond between passes.  (At 1024,
     * once the check lost its division, passes took most of the watch:
     * 150-480 per round trip, each one the peer's write may land in.) */
    poll_every = lat_loop == LAT_PROGRESS ? 1 : 1u << 20;
    if (getenv("GW_BENCH_POLL_EVERY"))
        poll_every = atoi(getenv("GW_BENCH_POLL_EVERY")) > 0 ? (unsigned)atoi(getenv("GW_BENCH_POLL_EVERY")) : poll_every;
    setenv("GPUWIRE_TRANSPORTS", "verbs", 1);
    gwt_chan_pair(&pch, &cch);
    int pid = gwt_spawn(server, NULL);
    char addr[80];
    REQUIRE(gwt_chan_recv(&pch, addr, sizeof(addr), 20000) > 0);
    setenv("GPUWIRE_IB_DEVICE", cdev, 1);
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    gw_ep_t *ep;
    REQUIRE_OK(gw_connect(ctx, addr, &ep));
    gw_rkey_t *rk = gwt_recv_rkey(ep, 1, NULL);
    uint64_t rbase;
    size_t rlen;
    gw_rkey_range(rk, &rbase, &rlen);
    size_t len = size < 64 ? 64 : size;
    volatile uint8_t *buf = aligned_alloc(4096, (len + 4095) & ~(size_t)4095);
    memset((void *)buf, 0, len);
    gw_mem_t *m;
    REQUIRE_OK(gw_mem_reg(ctx, (void *)buf, len, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, &m));
    double t0 = 0, t1 = 0;
    if (!strcmp(op, "put") || !strcmp(op, "get")) {
        int put = !strcmp(op, "put");
        gw_request_t *win[WINDOW] = {0};
        /* warm up */
        for (int i = 0; i < 16; i++) {
            gw_request_t *r;
            REQUIRE_OK(put ? gw_put(ep, (void *)buf, size, m, rbase, rk, &r)
                           : gw_get(ep, (void *)buf, size, m, rbase, rk, &r));
            REQUIRE_OK(gw_request_wait(r, 20000));
            gw_request_free(r);
        }
        t0 = now_s();
        for (long i = 0; i < iters; i++) {
            gw_request_t **slot = &win[i % WINDOW];
            if (*slot) {
                REQUIRE_OK(gw_request_wait(*slot, 60000));
                gw_request_free(*slot);
            }
            REQUIRE_OK(put ? gw_put(ep, (void *)buf, size, m, rbase, rk, slot)
                           : gw_get(ep, (void *)buf, size, m, rbase, rk, slot));
        }
        for (int i = 0; i < WINDOW; i++)
            if (win[i]) {
                REQUIRE_OK(gw_request_wait(win[i], 60000));
                gw_request_free(win[i]);
            }
        t1 = now_s();
        printf("%s %zu ops_s=%.0f bw_gbps=%.4f\n", op, size, (double)iters / (t1 - t0),
               (double)size * (double)iters * 8 / (t1 - t0) / 1e9);
    } else if (!strcmp(op, "send")) {
        sync_msg(ep, 0, 2); /* the server's receives are posted */
        gw_request_t *win[WINDOW] = {0};
        t0 = now_s();
        for (long i = 0; i < iters; i++) {
            gw_request_t **slot = &win[i % WINDOW];
            if (*slot) {
                REQUIRE_OK(gw_request_wait(*slot, 60000));
                gw_request_free(*slot);
            }
            REQUIRE_OK(gw_send(ep, (void *)buf, size, m, 7, slot));
        }
        for (int i = 0; i < WINDOW; i++)
            if (win[i]) {
                REQUIRE_OK(gw_request_wait(win[i], 60000));
                gw_request_free(win[i]);
            }
        t1 = now_s();
        printf("send %zu ops_s=%.0f bw_gbps=%.4f\n", size, (double)iters / (t1 - t0),
               (double)size * (double)iters * 8 / (t1 - t0) / 1e9);
    } else if (!strcmp(op, "lat")) {
        /* the server needs our key to answer */
        uint8_t key[512];
        size_t klen = sizeof(key);
        REQUIRE_OK(gw_mem_pack_rkey(m, key, &klen));
        gw_request_t *r;
        REQUIRE_OK(gw_send(ep, key, klen, NULL, 1, &r));
        REQUIRE_OK(gw_request_wait(r, 20000));
        gw_request_free(r);
        uint8_t out[8];
        long warm = iters / 10 + 1;
        /* one counter read per round, before its put, as ib_write_lat's
         * tposted[]: a round trip is the difference of two consecutive
         * stamps (a second read at the end of each round would sit between
         * the watch's notice and the next post, the measured path) */
        double *rtt = calloc((size_t)iters + 1, sizeof(double));
        uint64_t k0 = 0, passes = 0, prev = 0;
        for (long i = 1; i <= iters + warm; i++) {
            if (i == warm + 1) {
                t0 = now_s();
                k0 = prev = ticks();
            } else if (i > warm) {
                uint64_t k = ticks();
                rtt[i - warm - 2] = (double)(k - prev);
                prev = k;
            }
            memset(out, (int)(uint8_t)i, sizeof(out));
            lat_put(ep, out, rbase, rk);
            uint64_t p = lat_wait(ctx, buf, i);
            passes += i > warm ? p : 0;
        }
        rtt[iters - 1] = (double)(ticks() - prev);
        t1 = now_s();
        double per_tick = (t1 - t0) / (double)(ticks() - k0);
        for (long i = 0; i < iters; i++)
            rtt[i] *= per_tick;
        sync_msg(ep, 1, 3);
        /* one-way = half the round trip; the median is perftest's t_typical */
        qsort(rtt, (size_t)iters, sizeof(double), cmp_double);
        printf("lat %zu usec=%.3f typical_usec=%.3f\n", size, (t1 - t0) / (double)iters / 2 * 1e6,
               rtt[iters / 2] / 2 * 1e6);
        free(rtt);
        if (getenv("GW_BENCH_DESCRIBE")) { /* how finely the client's wait was sliced, how late it began */
            printf("client (%s loop) progress passes per round trip %.1f, %.3f us per pass\n",
                   lat_names[lat_loop], (double)passes / (double)iters,
                   passes ? (t1 - t0) / (double)passes * 1e6 : 0.0);
            printf("client (%s loop): the peer's write was already in place when the watch began in %ld of %ld "
                   "rounds\n", lat_names[lat_loop], lat_early, iters + warm);
        }
    }
    if (getenv("GW_BENCH_DESCRIBE")) { /* the endpoint's posting counters (verbs_prof.sh) */
        gw_ep_info_t info = {.size = sizeof(info)};
        if (gw_ep_query(ep, &info) == GW_OK)
            printf("client path: %s\n", info.path);
    }
    fflush(stdout);
    sync_msg(ep, 1, 9);
    gw_rkey_destroy(rk);
    gw_mem_dereg(m);
    gw_ep_close(ep, 2000);
    gw_context_destroy(ctx);
    return gwt_wait(pid, 60) == 0 ? 0 : 1;
}
