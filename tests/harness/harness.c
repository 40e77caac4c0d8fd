/* SPDX-License-Identifier: Apache-2.0 */
/* harness.c - see harness.h. */
#include "harness.h"
#include "core/util.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int gwt_failures = 0;

int gwt_done(const char *name)
{
    if (gwt_failures) {
        fprintf(stderr, "%s: %d check(s) failed\n", name, gwt_failures);
        return 1;
    }
    fprintf(stderr, "%s: all checks passed\n", name);
    return 0;
}

static const gwt_case_t *find_case(const gwt_case_t *cases, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(cases[i].name, name))
            return &cases[i];
    return NULL;
}

static int run_case(void *arg)
{
    const gwt_case_t *c = arg;
    gwt_failures = 0;
    c->fn();
    return gwt_done(c->name);
}

static int run_all(const char *prog, const gwt_case_t *cases, size_t n)
{
    const char *v = getenv("GWT_CASE_TIMEOUT");
    int timeout_s = v && atoi(v) > 0 ? atoi(v) : 120;
    size_t failed = 0, skipped = 0;
    for (size_t i = 0; i < n; i++) {
        fprintf(stderr, "== %s %s\n", prog, cases[i].name);
        int pid = gwt_spawn(run_case, (void *)&cases[i]);
        int rc = pid > 0 ? gwt_wait(pid, timeout_s) : -1;
        const char *what = rc == 0 ? "PASS" : rc == GW_TEST_SKIP ? "SKIP" : "FAIL";
        if (rc == GW_TEST_SKIP)
            skipped++;
        else if (rc != 0)
            failed++;
        fprintf(stderr, "%s %s (exit %d)\n", what, cases[i].name, rc);
    }
    fprintf(stderr, "%s: %zu case(s): %zu passed, %zu failed, %zu skipped\n", prog, n, n - failed - skipped,
            failed, skipped);
    if (failed)
        return 1;
    return skipped == n ? GW_TEST_SKIP : 0;
}

int gwt_main(int argc, char **argv, const gwt_case_t *cases, size_t n)
{
    const char *prog = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    if (argc < 2)
        return run_all(prog, cases, n);
    if (!strcmp(argv[1], "--list")) {
        for (size_t i = 0; i < n; i++)
            printf("%s\n", cases[i].name);
        return 0;
    }
    const gwt_case_t *c = find_case(cases, n, argv[1]);
    if (!c) {
        fprintf(stderr, "%s: no case named '%s'; the cases are:", prog, argv[1]);
        for (size_t i = 0; i < n; i++)
            fprintf(stderr, " %s", cases[i].name);
        fprintf(stderr, "\n");
        return 2;
    }
    fprintf(stderr, "case %s over %s\n", c->name,
            getenv("GPUWIRE_TRANSPORTS") ? getenv("GPUWIRE_TRANSPORTS") : "the default transports");
    c->fn();
    return gwt_done(c->name);
}

int gwt_spawn(int (*fn)(void *), void *arg)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        int rc = fn(arg);
        fflush(stdout);
        fflush(stderr);
        _exit(rc);
    }
    return (int)pid;
}

int gwt_wait(int pid, int timeout_s)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int status;
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) {
            if (WIFEXITED(status))
                return WEXITSTATUS(status);
            if (WIFSIGNALED(status))
                return 128 + WTERMSIG(status);
            return 1;
        }
        if (r < 0)
            return -1;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec - t0.tv_sec >= timeout_s) {
            fprintf(stderr, "child %d ran past %d s: killed\n", pid, timeout_s);
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return 128 + SIGKILL;
        }
        usleep(2000);
    }
}

int gwt_chan_pair(gwt_chan_t *parent, gwt_chan_t *child)
{
    int a[2], b[2];
    if (pipe(a) || pipe(b))
        return -1;
    parent->wfd = a[1];
    child->rfd = a[0];
    child->wfd = b[1];
    parent->rfd = b[0];
    return 0;
}

static int full_io(int fd, void *buf, size_t len, int wr, int timeout_ms)
{
    char *p = buf;
    while (len) {
        if (!wr) {
            struct pollfd pfd = {.fd = fd, .events = POLLIN};
            int pr = poll(&pfd, 1, timeout_ms);
            if (pr <= 0)
                return -1;
        }
        ssize_t n = wr ? write(fd, p, len) : read(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int gwt_chan_send(gwt_chan_t *c, const void *buf, uint32_t len)
{
    /* the length and the bytes in one write: up to PIPE_BUF a pipe takes it
     * whole or not at all, so a reader woken by it never waits for the rest
     * on a writer the scheduler put aside (on a busy machine, seconds) */
    uint8_t one[PIPE_BUF];
    if (sizeof(len) + len <= sizeof(one)) {
        memcpy(one, &len, sizeof(len));
        if (len)
            memcpy(one + sizeof(len), buf, len);
        return full_io(c->wfd, one, sizeof(len) + len, 1, -1);
    }
    if (full_io(c->wfd, &len, sizeof(len), 1, -1))
        return -1;
    return full_io(c->wfd, (void *)buf, len, 1, -1);
}

int gwt_chan_recv(gwt_chan_t *c, void *buf, uint32_t cap, int timeout_ms)
{
    uint32_t len;
    if (full_io(c->rfd, &len, sizeof(len), 0, timeout_ms) || len > cap)
        return -1;
    if (full_io(c->rfd, buf, len, 0, timeout_ms))
        return -1;
    return (int)len;
}


void gwt_fill(void *buf, size_t len, uint64_t seed)
{
    gw_pattern_fill(buf, len, seed);
}

long long gwt_verify(const void *buf, size_t len, uint64_t seed)
{
    return gw_pattern_verify(buf, len, seed);
}

void gwt_send_rkey(gw_ep_t *ep, const gw_mem_t *mem, uint64_t tag)
{
    uint8_t key[512];
    size_t klen = sizeof(key);
    REQUIRE_OK(gw_mem_pack_rkey(mem, key, &klen));
    gw_request_t *r;
    REQUIRE_OK(gw_send(ep, key, klen, NULL, tag, &r));
    REQUIRE_OK(gw_request_wait(r, GWT_PEER_WAIT_MS));
    gw_request_free(r);
}

gw_rkey_t *gwt_recv_rkey(gw_ep_t *ep, uint64_t tag, uint64_t *base)
{
    uint8_t key[512];
    gw_request_t *r;
    REQUIRE_OK(gw_recv(ep, key, sizeof(key), NULL, tag, ~0ull, &r));
    REQUIRE_OK(gw_request_wait(r, GWT_PEER_WAIT_MS));
    gw_request_info_t ri = {.size = sizeof(ri)};
    gw_request_info(r, &ri);
    gw_request_free(r);
    gw_rkey_t *rk;
    REQUIRE_OK(gw_rkey_unpack(ep, key, ri.length, &rk));
    if (base)
        gw_rkey_range(rk, base, NULL);
    return rk;
}

gw_ep_t *gwt_listen_accept(gw_context_t *ctx, gwt_chan_t *chan, gw_listener_t **l)
{
    REQUIRE_OK(gw_listen(ctx, "127.0.0.1:0", l));
    char addr[80];
    REQUIRE_OK(gw_listener_addr(*l, addr, sizeof(addr)));
    REQUIRE(gwt_chan_send(chan, addr, (uint32_t)strlen(addr) + 1) == 0);
    gw_ep_t *ep;
    REQUIRE_OK(gw_accept(*l, GWT_PEER_WAIT_MS, &ep));
    return ep;
}

gw_ep_t *gwt_connect_chan(gwt_chan_t *chan, const char *transport, gw_context_t **ctx)
{
    char addr[80];
    REQUIRE(gwt_chan_recv(chan, addr, sizeof(addr), GWT_PEER_WAIT_MS) > 0);
    REQUIRE_OK(gw_context_create(NULL, ctx));
    gw_ep_t *ep;
    REQUIRE_OK(gw_connect(*ctx, addr, &ep));
    gw_ep_info_t info = {.size = sizeof(info)};
    REQUIRE_OK(gw_ep_query(ep, &info));
    if (transport && strcmp(info.transport, transport) != 0) {
        fprintf(stderr, "endpoint to %s is over %s, not %s\n", addr, info.transport, transport);
        REQUIRE(!"the expected transport");
    }
    return ep;
}

void gwt_chan_expect(gwt_chan_t *chan, gw_context_t *ctx, const char *what)
{
    char tok[64];
    struct pollfd p = {.fd = chan->rfd, .events = POLLIN};
    time_t t0 = time(NULL);
    while (poll(&p, 1, 1) == 0) {
        REQUIRE(time(NULL) - t0 < 30);
        if (ctx)
            gw_progress(ctx);
    }
    int n = gwt_chan_recv(chan, tok, sizeof(tok) - 1, 30000);
    REQUIRE(n > 0);
    tok[n] = 0;
    if (strcmp(tok, what) != 0) {
        fprintf(stderr, "expected \"%s\" from the peer, got \"%.63s\"\n", what, tok);
        REQUIRE(!"the expected token");
    }
}

gw_status_t gwt_outcome(gw_status_t posted, gw_request_t **req, int timeout_ms)
{
    if (posted != GW_OK)
        return posted;
    gw_status_t st = gw_request_wait(*req, timeout_ms);
    gw_request_free(*req);
    *req = NULL;
    return st;
}

void gwt_require_rdma_device(void)
{
    DIR *d = opendir("/sys/class/infiniband");
    struct dirent *de = NULL;
    while (d && (de = readdir(d)) && de->d_name[0] == '.')
        ;
    if (d)
        closedir(d);
    if (!de)
        SKIP("no RDMA device in /sys/class/infiniband (run in the Soft-RoCE VM: tests/rxe)");
}
