/* SPDX-License-Identifier: Apache-2.0 */
/* it_progress.c - the progress thread (gpuwire.h, Threading): a target busy
 * elsewhere still serves its peers.
 *
 * The target is a child process that connects, registers an 8 MiB region,
 * posts one receive, then blocks in read() on a pipe - no gpuwire call -
 * until this side says it is done (a decode step, a long computation).
 * Both sides run with GPUWIRE_PEER_TIMEOUT_MS=1000 and the target stays
 * busy for at least 2.5 timeouts.
 *   busy     target's thread on (gw_config_t.progress_thread): a 4 MiB put,
 *            a put_notify, batches with an ordered and with counted
 *            notifications, a paged transfer, a message and gets all
 *            complete within a bound well under the busy time, again and
 *            again past the peer timeout; the endpoint stays healthy.
 *            Then the target checks, before any call that progresses:
 *            its receive is complete, the counted notifications are
 *            there, the ordered ones in order, its memory holds exactly
 *            what was written.
 *   load     the same with the thread turned on by GPUWIRE_PROGRESS_THREAD
 *            and two processes spinning on the CPUs all along
 *   off      control, thread off: over tcp the 4 MiB put is still in
 *            progress after the bound, or failed with GW_ERR_PEER_TIMEOUT
 *            (the case); over intra (CMA) and verbs (the NIC) it
 *            completes
 *   threads  this side's context with the thread on, used by three
 *            threads at once (puts, gets and waits on one endpoint) and a
 *            fourth calling gw_progress: every byte comes back right
 *   config   gw_config_t's field and the setting: a config of the size
 *            before the field takes the setting, the field overrides it,
 *            a value outside the three is refused
 * IT_PROGRESS_GPU=1 (with GPUWIRE_CUDA_LIB, e.g. the fake driver): the
 * target's region is GPU memory, so what lands in it goes through the
 * target's staging (tcp's and verbs' staged paths need the target's CPU). */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuda/cuda_wrap.h"
#include "it.h"

#define REGION (8u << 20)
#define BIGPUT (4u << 20)
#define BUSY_MIN_S 2.5 /* 2.5 peer timeouts */
#define RECV_LEN 4096

/* intra (CMA) and verbs (the NIC) move a put's bytes without the target's CPU */
static int put_needs_no_cpu(void)
{
    const char *t = getenv("GPUWIRE_TRANSPORTS");
    return t && (!strcmp(t, "intra") || !strcmp(t, "verbs"));
}

static void xwrite(int fd, const void *b, size_t n)
{
    if (write(fd, b, n) != (ssize_t)n)
        _exit(3);
}

/* Reads n bytes within timeout_ms; 0 or -1. */
static int xread(int fd, void *b, size_t n, int timeout_ms)
{
    double end = it_now() + timeout_ms / 1000.0;
    size_t got = 0;
    while (got < n) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int left = (int)((end - it_now()) * 1000);
        if (left <= 0 || poll(&p, 1, left) <= 0)
            return -1;
        ssize_t r = read(fd, (char *)b + got, n - got);
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return 0;
}

typedef struct result {
    int32_t recv_st, ep_err;
    uint64_t recv_len, count, nvals, vals[4];
    uint64_t hash;
} result_t;

/* ---- the target ------------------------------------------------------------------ */
static const gw_cuda_t *cu;

static int gpu_target(void)
{
    const char *v = getenv("IT_PROGRESS_GPU");
    return v && !strcmp(v, "1");
}

static void target(int to_parent, int from_parent, int thread)
{
    gw_config_t cfg = {.size = sizeof(cfg), .log_level = -1,
                       .progress_thread = thread > 0 ? GW_PROGRESS_THREAD_ON
                                          : thread < 0 ? GW_PROGRESS_THREAD_DEFAULT : GW_PROGRESS_THREAD_OFF};
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(&cfg, &ctx));
    gw_listener_t *l;
    IT_OK(ctx, gw_listen(ctx, "127.0.0.1:0", &l));
    char addr[128] = "";
    IT_OK(ctx, gw_listener_addr(l, addr, sizeof(addr)));
    xwrite(to_parent, addr, sizeof(addr));
    gw_ep_t *ep;
    IT_OK(ctx, gw_accept(l, 20000, &ep));
    uint8_t *region = it_alloc(REGION), *host = region;
    memset(region, 0, REGION);
    if (gpu_target()) {
        char why[256] = "";
        CUdeviceptr d;
        REQUIRE((cu = gw_cuda_get(why, sizeof(why))) != NULL);
        REQUIRE(cu->cuMemAlloc(&d, REGION) == CUDA_SUCCESS);
        REQUIRE(cu->cuMemcpyHtoD(d, host, REGION) == CUDA_SUCCESS);
        region = (uint8_t *)(uintptr_t)d;
    }
    gw_mem_t *mem;
    IT_OK(ctx, gw_mem_reg(ctx, region, REGION, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, &mem));
    uint8_t key[IT_KEY_MAX];
    size_t klen = sizeof(key);
    IT_OK(ctx, gw_mem_pack_rkey(mem, key, &klen));
    static uint8_t rbuf[RECV_LEN];
    gw_request_t *rq;
    IT_OK(ctx, gw_recv(ep, rbuf, sizeof(rbuf), NULL, 5, ~0ull, &rq));
    uint64_t k64 = klen;
    xwrite(to_parent, &k64, sizeof(k64));
    xwrite(to_parent, key, klen);
    /* serve the parent's first round trip (the connection fully set up:
     * over intra the region table comes then), until it says 'b' */
    char c;
    for (double end = it_now() + 60;;) {
        struct pollfd p = {.fd = from_parent, .events = POLLIN};
        gw_progress(ctx);
        if (poll(&p, 1, 1) != 0 || it_now() > end)
            break;
    }
    if (xread(from_parent, &c, 1, 1000) != 0 || c != 'b')
        _exit(5);
    /* busy elsewhere: no gpuwire call until the parent says so */
    if (xread(from_parent, &c, 1, 120000) != 0)
        _exit(4);
    /* what arrived meanwhile, before any call that progresses */
    result_t res = {0};
    res.recv_st = gw_request_test(rq);
    gw_request_info_t ri = {.size = sizeof(ri)};
    gw_request_info(rq, &ri);
    res.recv_len = ri.length;
    gw_notify_count(ep, 7, &res.count);
    while (res.nvals < 4 && gw_notify_wait(ep, 0, &res.vals[res.nvals]) == GW_OK)
        res.nvals++;
    if (region != host)
        REQUIRE(cu->cuMemcpyDtoH(host, (CUdeviceptr)(uintptr_t)region, REGION) == CUDA_SUCCESS);
    res.hash = it_hash(host, REGION);
    gw_ep_info_t info = {.size = sizeof(info)};
    gw_ep_query(ep, &info);
    res.ep_err = info.error;
    xwrite(to_parent, &res, sizeof(res));
    /* then serve (progressing) until the parent is done with us */
    for (;;) {
        struct pollfd p = {.fd = from_parent, .events = POLLIN};
        gw_progress(ctx);
        if (poll(&p, 1, 1) != 0)
            break;
    }
    gw_request_free(rq);
    gw_ep_close(ep, 2000);
    gw_listener_destroy(l);
    gw_mem_dereg(mem);
    gw_context_destroy(ctx);
    _exit(0);
}

typedef struct tgt {
    int pid, rfd, wfd;
} tgt_t;

static gw_ep_t *start(tgt_t *t, gw_context_t *ctx, int thread, gw_rkey_t **rk, uint64_t *raddr)
{
    int a[2], b[2];
    REQUIRE(pipe(a) == 0 && pipe(b) == 0);
    t->pid = fork();
    REQUIRE(t->pid >= 0);
    if (t->pid == 0) {
        close(a[0]);
        close(b[1]);
        target(a[1], b[0], thread);
    }
    close(a[1]);
    close(b[0]);
    t->rfd = a[0];
    t->wfd = b[1];
    char addr[128];
    REQUIRE(xread(t->rfd, addr, sizeof(addr), 20000) == 0);
    gw_ep_t *ep;
    IT_OK(ctx, gw_connect(ctx, addr, &ep));
    uint64_t klen;
    uint8_t key[IT_KEY_MAX];
    REQUIRE(xread(t->rfd, &klen, sizeof(klen), 20000) == 0 && klen <= sizeof(key));
    REQUIRE(xread(t->rfd, key, klen, 20000) == 0);
    IT_OK(ctx, gw_rkey_unpack(ep, key, klen, rk));
    size_t rlen;
    IT_OK(ctx, gw_rkey_range(*rk, raddr, &rlen));
    uint64_t word;
    gw_request_t *r;
    IT_OK(ctx, gw_get(ep, &word, sizeof(word), NULL, *raddr, *rk, &r));
    IT_OK(ctx, it_wait_free(r, 20000));
    xwrite(t->wfd, "b", 1); /* the target goes busy now */
    return ep;
}

static void finish(tgt_t *t, gw_context_t *ctx, gw_ep_t *ep, gw_rkey_t *rk)
{
    xwrite(t->wfd, "q", 1);
    gw_rkey_destroy(rk);
    CHECK_ST(gw_ep_close(ep, 5000), GW_OK);
    int rc = gwt_wait(t->pid, 30);
    CHECK(rc == 0);
    close(t->rfd);
    close(t->wfd);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
}

/* Waits for r within the bound and says how long it took. */
static void prompt(gw_context_t *ctx, const char *what, gw_status_t posted, gw_request_t **rp, double *worst)
{
    gw_request_t *r = *rp; /* (read after the posting call, an argument evaluated before this call) */
    if (posted != GW_OK) {
        fprintf(stderr, "  %s: posting failed: %s: %s\n", what, gw_status_name(posted), gw_last_error(ctx));
        gwt_failures++;
        return;
    }
    double bound = 5.0 * it_time_scale(), t0 = it_now();
    gw_status_t st = gw_request_wait(r, (int)(bound * 1000));
    double took = it_now() - t0;
    if (took > *worst)
        *worst = took;
    if (st != GW_OK) {
        fprintf(stderr, "  %s: %s after %.3f s (bound %.1f s): %s\n", what, gw_status_name(st), took, bound,
                gw_last_error(ctx));
        gwt_failures++;
    }
    gw_request_free(r);
}

/* ---- busy, load ------------------------------------------------------------------ */
static void case_busy(int via_env, int hogs)
{
    setenv("GPUWIRE_PEER_TIMEOUT_MS", "1000", 1);
    if (via_env)
        setenv("GPUWIRE_PROGRESS_THREAD", "on", 1);
    gw_context_t *ctx = it_ctx(); /* (with via_env this side's thread is on too) */
    int hog_pid[2] = {0, 0};
    for (int i = 0; i < hogs; i++) {
        hog_pid[i] = fork();
        REQUIRE(hog_pid[i] >= 0);
        if (hog_pid[i] == 0) {
            volatile uint64_t x = 0;
            pid_t parent = getppid();
            for (double end = it_now() + 120; it_now() < end && getppid() == parent;)
                for (int k = 0; k < 1000000; k++)
                    x += (uint64_t)k;
            _exit(0);
        }
    }
    tgt_t T;
    gw_rkey_t *rk;
    uint64_t ra;
    gw_ep_t *ep = start(&T, ctx, via_env ? -1 : 1, &rk, &ra);
    if (via_env)
        unsetenv("GPUWIRE_PROGRESS_THREAD");
    /* the mirror of the target's region: what it must hold at the end */
    uint8_t *mirror = it_alloc(REGION), *src = it_alloc(REGION), *back = it_alloc(REGION);
    memset(mirror, 0, REGION);
    gwt_fill(src, REGION, 42);
    gw_mem_t *lm;
    IT_OK(ctx, gw_mem_reg(ctx, src, REGION, GW_ACCESS_LOCAL, &lm));
    double t0 = it_now(), worst = 0;
    gw_request_t *r;

    /* the case of the issue: 4 MiB into the busy target */
    prompt(ctx, "4 MiB put", gw_put(ep, src, BIGPUT, lm, ra, rk, &r), &r, &worst);
    memcpy(mirror, src, BIGPUT);
    /* a put with its notification, then batches ending in notifications */
    prompt(ctx, "put_notify", gw_put_notify(ep, src + BIGPUT, 65536, lm, ra + BIGPUT, rk, 0x1111, &r), &r, &worst);
    memcpy(mirror + BIGPUT, src + BIGPUT, 65536);
    enum { N = 16, E = 4096 };
    gw_local_desc_t ld[N];
    gw_remote_desc_t rd[N];
    for (int i = 0; i < N; i++) {
        ld[i] = (gw_local_desc_t){lm, (size_t)(5u << 20) + (size_t)i * 2 * E, E};
        rd[i] = (gw_remote_desc_t){rk, (uint64_t)(5u << 20) + (uint64_t)(N - 1 - i) * E, E};
        memcpy(mirror + (5u << 20) + (size_t)(N - 1 - i) * E, src + (5u << 20) + (size_t)i * 2 * E, E);
    }
    gw_dlist_t *dl, *dr;
    IT_OK(ctx, gw_dlist_local(ctx, ld, N, &dl));
    IT_OK(ctx, gw_dlist_remote(ep, rd, N, GW_ACCESS_REMOTE_WRITE, &dr));
    gw_xfer_opts_t ord = {.size = sizeof(ord), .notify = GW_NOTIFY_ORDERED, .value = 0x2222};
    prompt(ctx, "batch, ordered notification", gw_xfer_batch(ep, GW_XFER_PUT, dl, NULL, dr, NULL, N, &ord, &r), &r,
           &worst);
    gw_xfer_opts_t cnt = {.size = sizeof(cnt), .notify = GW_NOTIFY_COUNTED, .value = 7};
    for (int k = 0; k < 3; k++)
        prompt(ctx, "batch, counted notification", gw_xfer_batch(ep, GW_XFER_PUT, dl, NULL, dr, NULL, N, &cnt, &r), &r,
               &worst);
    uint32_t pages[32];
    for (int i = 0; i < 32; i++) {
        pages[i] = (uint32_t)(31 - i);
        memcpy(mirror + (6u << 20) + (size_t)pages[i] * E, src + (6u << 20) + (size_t)i * E, E);
    }
    prompt(ctx, "paged put, counted notification",
           gw_xfer_pages(ep, GW_XFER_PUT, lm, src + (6u << 20), NULL, rk, ra + (6u << 20), pages, 32, E, &cnt, &r),
           &r, &worst);
    prompt(ctx, "send", gw_send(ep, src, 1000, lm, 5, &r), &r, &worst);
    /* gets read it all back while the target is still busy, and keep the
     * endpoint working past the peer timeout */
    int rounds = 0;
    do {
        prompt(ctx, "8 MiB get", gw_get(ep, back, REGION, NULL, ra, rk, &r), &r, &worst);
        rounds++;
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    } while (it_now() - t0 < BUSY_MIN_S);
    CHECK(memcmp(back, mirror, REGION) == 0);
    double busy = it_now() - t0;
    gw_ep_info_t info = {.size = sizeof(info)};
    IT_OK(ctx, gw_ep_query(ep, &info));
    CHECK_ST(info.error, GW_OK);
    fprintf(stderr, "  target busy %.2f s (%d gets): slowest operation %.3f s; endpoint %s %s\n", busy, rounds, worst,
            gw_status_name(info.error), info.error_detail);
    /* the target's own view, before it progresses */
    xwrite(T.wfd, "d", 1);
    result_t res;
    REQUIRE(xread(T.rfd, &res, sizeof(res), 20000) == 0);
    fprintf(stderr, "  target: receive %s (%llu bytes), %llu counted, %llu ordered (0x%llx 0x%llx), endpoint %s\n",
            gw_status_name(res.recv_st), (unsigned long long)res.recv_len, (unsigned long long)res.count,
            (unsigned long long)res.nvals, (unsigned long long)res.vals[0], (unsigned long long)res.vals[1],
            gw_status_name(res.ep_err));
    CHECK_ST(res.recv_st, GW_OK);
    CHECK(res.recv_len == 1000);
    CHECK(res.count == 4);
    CHECK(res.nvals == 2 && res.vals[0] == 0x1111 && res.vals[1] == 0x2222);
    CHECK(res.hash == it_hash(mirror, REGION));
    CHECK_ST(res.ep_err, GW_OK);
    IT_OK(ctx, gw_dlist_destroy(dr));
    IT_OK(ctx, gw_dlist_destroy(dl));
    IT_OK(ctx, gw_mem_dereg(lm));
    for (int i = 0; i < hogs; i++) {
        kill(hog_pid[i], SIGKILL);
        gwt_wait(hog_pid[i], 10);
    }
    finish(&T, ctx, ep, rk);
    free(mirror);
    free(src);
    free(back);
}

/* ---- off: the control --------------------------------------------------------------- */
static void case_off(void)
{
    setenv("GPUWIRE_PEER_TIMEOUT_MS", "1000", 1);
    gw_context_t *ctx = it_ctx();
    tgt_t T;
    gw_rkey_t *rk;
    uint64_t ra;
    gw_ep_t *ep = start(&T, ctx, 0, &rk, &ra);
    uint8_t *src = it_alloc(BIGPUT);
    gwt_fill(src, BIGPUT, 9);
    gw_request_t *r;
    IT_OK(ctx, gw_put(ep, src, BIGPUT, NULL, ra, rk, &r));
    double t0 = it_now();
    gw_status_t st = gw_request_wait(r, 2000);
    gw_ep_info_t info = {.size = sizeof(info)};
    IT_OK(ctx, gw_ep_query(ep, &info));
    fprintf(stderr, "  4 MiB put into a busy target without its thread: %s after %.2f s; endpoint %s %s\n",
            gw_status_name(st), it_now() - t0, gw_status_name(info.error), info.error_detail);
    if (put_needs_no_cpu()) {
        CHECK_ST(st, GW_OK); /* CMA: the data moves without the target process */
    } else {
        /* documented: over tcp it waits for the target, and the endpoint
         * fails once the target was silent for the peer timeout (unless the
         * target's process is known alive here) */
        CHECK(st == GW_ERR_TIMEOUT || st == GW_ERR_PEER_TIMEOUT);
        xwrite(T.wfd, "d", 1);
        result_t res;
        REQUIRE(xread(T.rfd, &res, sizeof(res), 20000) == 0);
        st = gw_request_wait(r, 20000);
        CHECK(st == GW_OK || st == GW_ERR_PEER_TIMEOUT);
    }
    gw_request_free(r);
    if (put_needs_no_cpu()) {
        xwrite(T.wfd, "d", 1);
        result_t res;
        REQUIRE(xread(T.rfd, &res, sizeof(res), 20000) == 0);
    }
    finish(&T, ctx, ep, rk);
    free(src);
}

/* ---- threads: one context, several application threads ------------------------------ */
typedef struct worker {
    gw_context_t *ctx;
    gw_ep_t *ep;
    gw_rkey_t *rk;
    uint64_t ra;
    int id, errors;
    volatile int *stop;
} worker_t;

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    enum { SLICE = 256 * 1024 };
    uint8_t *out = it_alloc(SLICE), *in = it_alloc(SLICE);
    uint64_t off = (uint64_t)w->id * SLICE;
    for (int i = 0; i < 60; i++) {
        size_t len = 1 + (size_t)((i * 7919 + w->id * 104729) % SLICE);
        gwt_fill(out, len, (uint64_t)(w->id * 1000 + i));
        gw_request_t *r;
        gw_status_t st = gw_put(w->ep, out, len, NULL, w->ra + off, w->rk, &r);
        if (st == GW_OK)
            st = it_wait_free(r, 20000);
        if (st == GW_OK)
            st = gw_get(w->ep, in, len, NULL, w->ra + off, w->rk, &r);
        if (st == GW_OK)
            st = it_wait_free(r, 20000);
        if (st != GW_OK || memcmp(in, out, len) != 0) {
            fprintf(stderr, "  thread %d round %d (len %zu): %s\n", w->id, i, len, gw_status_name(st));
            w->errors++;
        }
    }
    free(out);
    free(in);
    return NULL;
}

static void *progress_main(void *arg)
{
    worker_t *w = arg;
    while (!*w->stop) {
        gw_progress(w->ctx);
        gw_context_wait(w->ctx, 5);
    }
    return NULL;
}

static void case_threads(void)
{
    gw_config_t cfg = {.size = sizeof(cfg), .log_level = -1, .progress_thread = GW_PROGRESS_THREAD_ON};
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(&cfg, &ctx));
    CHECK(strcmp(gw_setting_value(ctx, "GPUWIRE_PROGRESS_THREAD"), "on") == 0);
    tgt_t T;
    gw_rkey_t *rk;
    uint64_t ra;
    gw_ep_t *ep = start(&T, ctx, 1, &rk, &ra);
    volatile int stop = 0;
    worker_t w[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (worker_t){ctx, ep, rk, ra, i, 0, &stop};
        REQUIRE(pthread_create(&th[i], NULL, i < 3 ? worker_main : progress_main, &w[i]) == 0);
    }
    for (int i = 0; i < 3; i++) {
        pthread_join(th[i], NULL);
        CHECK(w[i].errors == 0);
    }
    stop = 1;
    pthread_join(th[3], NULL);
    /* the per-thread detail: a refusal on this thread names its own call */
    gw_request_t *r;
    CHECK_ST(gw_put(ep, NULL, 8, NULL, ra, rk, &r), GW_ERR_INVALID);
    CHECK(strstr(gw_last_error(ctx), "NULL buffer") != NULL);
    xwrite(T.wfd, "d", 1);
    result_t res;
    REQUIRE(xread(T.rfd, &res, sizeof(res), 20000) == 0);
    finish(&T, ctx, ep, rk);
}

/* ---- config: the field, its ABI, the setting ------------------------------------------ */
static const char *pt_of(const gw_config_t *cfg, gw_status_t want)
{
    gw_context_t *ctx = NULL;
    gw_status_t st = gw_context_create(cfg, &ctx);
    CHECK_ST(st, want);
    static char v[16];
    snprintf(v, sizeof(v), "%s", ctx ? gw_setting_value(ctx, "GPUWIRE_PROGRESS_THREAD") : "-");
    if (ctx)
        CHECK_ST(gw_context_destroy(ctx), GW_OK);
    return v;
}

static void case_config(void)
{
    gw_config_t cfg = {.size = sizeof(cfg), .log_level = -1};
    unsetenv("GPUWIRE_PROGRESS_THREAD");
    CHECK(!strcmp(pt_of(&cfg, GW_OK), "off")); /* the default */
    CHECK(!strcmp(pt_of(NULL, GW_OK), "off"));
    setenv("GPUWIRE_PROGRESS_THREAD", "on", 1);
    CHECK(!strcmp(pt_of(&cfg, GW_OK), "on")); /* 0: the setting decides */
    CHECK(!strcmp(pt_of(NULL, GW_OK), "on"));
    cfg.progress_thread = GW_PROGRESS_THREAD_OFF;
    CHECK(!strcmp(pt_of(&cfg, GW_OK), "off")); /* the field wins */
    /* a caller compiled before the field: its size ends before it, and
     * whatever lies past it is not read */
    cfg.size = offsetof(gw_config_t, progress_thread);
    CHECK(!strcmp(pt_of(&cfg, GW_OK), "on"));
    unsetenv("GPUWIRE_PROGRESS_THREAD");
    cfg.size = sizeof(cfg);
    cfg.progress_thread = GW_PROGRESS_THREAD_ON;
    CHECK(!strcmp(pt_of(&cfg, GW_OK), "on"));
    cfg.progress_thread = 5;
    CHECK(!strcmp(pt_of(&cfg, GW_ERR_INVALID), "-"));
    setenv("GPUWIRE_PROGRESS_THREAD", "sometimes", 1);
    CHECK(!strcmp(pt_of(NULL, GW_ERR_CONFIG), "-"));
    unsetenv("GPUWIRE_PROGRESS_THREAD");
    /* a context with its thread, created and destroyed over and over */
    cfg.progress_thread = GW_PROGRESS_THREAD_ON;
    for (int i = 0; i < 50; i++)
        pt_of(&cfg, GW_OK);
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    if (gpu_target()) {
        char why[256] = "";
        if (!gw_cuda_get(why, sizeof(why)))
            SKIP("IT_PROGRESS_GPU=1 but no CUDA driver: %s", why);
    }
    const char *c = argc > 1 ? argv[1] : "";
    fprintf(stderr, "case %s over %s\n", c, getenv("GPUWIRE_TRANSPORTS") ? getenv("GPUWIRE_TRANSPORTS") : "default");
    if (!strcmp(c, "busy"))
        case_busy(0, 0);
    else if (!strcmp(c, "load"))
        case_busy(1, 2);
    else if (!strcmp(c, "off"))
        case_off();
    else if (!strcmp(c, "threads"))
        case_threads();
    else if (!strcmp(c, "config"))
        case_config();
    else {
        fprintf(stderr, "unknown case '%s'\n", c);
        return 2;
    }
    return gwt_done(c);
}
