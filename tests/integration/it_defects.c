/* SPDX-License-Identifier: Apache-2.0 */
/* it_defects.c - regression cases, one per defect found, each run by
 * name (argv[1], gwt_main) over the transport GPUWIRE_TRANSPORTS names
 * (ctest runs every case over tcp and over intra):
 *   notify_order  put_notify of 1 MiB followed by small ones: every
 *                 notification arrives, in order, and the requests report
 *                 their length
 *   killed        a put and a get to a peer process that was killed fail
 *                 with an endpoint error
 *   frozen_get    a peer frozen with SIGSTOP while only a get is outstanding:
 *                 tcp fails it with GW_ERR_PEER_TIMEOUT; intra
 *                 completes it (CMA needs no help from the peer)
 *   frozen_recv   the same with only a posted receive: both fail it with
 *                 GW_ERR_PEER_TIMEOUT
 *   accept_close  the server closes every endpoint right after gw_accept:
 *                 the client's connect succeeds and its endpoint then fails
 *                 with an endpoint error; the server logs no warning
 *   bad_args      gw_listen(ctx, NULL) and gw_rkey_unpack(ep, NULL, n) are
 *                 GW_ERR_INVALID with a message naming the NULL
 *   settings      a setting that does not parse fails gw_context_create()
 *                 whatever transports are allowed
 *   idle_recv     an endpoint left without progress calls for longer than
 *                 the peer timeout, then given a receive: the receive waits
 *                 for its message (it failed at once with a false
 *                 GW_ERR_PEER_TIMEOUT: posting a receive did not restart
 *                 the peer's silence clock, as posting a put does)
 *   busy_peer     the peer connects, then does local work without any
 *                 progress call (a sleep of 2.5 peer timeouts, as a server
 *                 preparing gigabytes of buffers) before its first
 *                 transfer, while this side waits on a receive and a send
 *                 to it: both complete, the endpoint stays healthy (it
 *                 failed with GW_ERR_PEER_TIMEOUT: silence alone was taken
 *                 for death, though the peer process was alive) */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "it.h"

static int is_intra(void)
{
    const char *t = getenv("GPUWIRE_TRANSPORTS");
    return t && !strcmp(t, "intra");
}

/* ofi over libfabric's shm provider: its gets read the peer's memory
 * directly (CMA), needing nothing from the peer process, as intra's do */
static int is_ofi_shm(void)
{
    const char *t = getenv("GPUWIRE_TRANSPORTS"), *p = getenv("GPUWIRE_OFI_PROVIDER");
    return t && !strcmp(t, "ofi") && p && !strcmp(p, "shm");
}

static gw_context_t *ctx_with(const char *name, const char *value)
{
    setenv(name, value, 1);
    gw_context_t *ctx = it_ctx();
    unsetenv(name);
    return ctx;
}

static void start_target(it_target_t *T, gw_context_t *ctx, size_t region, const char *env, gw_ep_t **ep,
                         gw_rkey_t **rk, uint64_t *raddr)
{
    it_target_cfg_t cfg = {.n_eps = 1, .n_regions = 1,
                           .region = {{region, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, 0}},
                           .env = {env}};
    char addr[128];
    it_target_start(T, &cfg, addr, sizeof(addr));
    *ep = it_connect(ctx, addr);
    *rk = it_single_key(T, ctx, *ep, raddr, NULL);
}

static void reap_target(it_target_t *T)
{
    kill(T->pid, SIGKILL);
    kill(T->pid, SIGCONT);
    gwt_wait(T->pid, 5);
    close(T->to_child.wfd);
    close(T->to_parent.rfd);
}

static void finish(gw_context_t *ctx, gw_ep_t *ep, gw_rkey_t *rk)
{
    gw_rkey_destroy(rk);
    CHECK_ST(gw_ep_close(ep, 2000), GW_OK);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
}

/* ---- notify_order ------------------------------------------------------------ */
static void case_notify_order(void)
{
    enum { ROUNDS = 8, BIG = 1u << 20, SMALL = 4096 };
    gw_context_t *ctx = it_ctx();
    it_target_t T;
    gw_ep_t *ep;
    gw_rkey_t *rk;
    uint64_t ra;
    start_target(&T, ctx, 4u << 20, NULL, &ep, &rk, &ra);
    uint8_t *src = it_alloc(BIG);
    gw_request_t *r[2 * ROUNDS];
    for (int i = 0; i < ROUNDS; i++) {
        /* the small put lands (a synchronous copy) while the large one moves */
        IT_OK(ctx, gw_put_notify(ep, src, BIG, NULL, ra, rk, (uint64_t)(2 * i), &r[2 * i]));
        IT_OK(ctx, gw_put_notify(ep, src, SMALL, NULL, ra + (2u << 20), rk, (uint64_t)(2 * i + 1), &r[2 * i + 1]));
    }
    gw_request_t *f;
    IT_OK(ctx, gw_flush(ep, &f));
    gw_status_t st = it_wait_free(f, 10000);
    fprintf(stderr, "  flush after %d put_notify pairs: %s (%s)\n", ROUNDS, gw_status_name(st),
            st == GW_OK ? "" : gw_last_error(ctx));
    CHECK_ST(st, GW_OK);
    for (int i = 0; i < 2 * ROUNDS; i++) {
        gw_request_info_t ri = {.size = sizeof(ri)};
        IT_OK(ctx, gw_request_info(r[i], &ri));
        CHECK_ST(ri.status, GW_OK);
        size_t want = (i & 1) ? SMALL : BIG;
        if (ri.length != want) {
            fprintf(stderr, "  put_notify #%d reports length %zu, expected %zu\n", i, ri.length, want);
            gwt_failures++;
        }
        gw_request_free(r[i]);
    }
    /* the target sees every notification, in posting order (len 0: the
     * data check is it_rma's business) */
    it_cmd_t c = {.type = IT_CMD_NOTIFY, .ep = 0, .count = 2 * ROUNDS, .len = 0};
    it_reply_t rep = it_target_cmd(&T, &c, ctx);
    CHECK(rep.a == 0 && rep.b == 0);
    CHECK(it_target_stop(&T, ctx) == 0);
    free(src);
    finish(ctx, ep, rk);
}

/* ---- killed ------------------------------------------------------------------ */
static void case_killed(void)
{
    gw_context_t *ctx = ctx_with("GPUWIRE_PEER_TIMEOUT_MS", "10000");
    it_target_t T;
    gw_ep_t *ep;
    gw_rkey_t *rk;
    uint64_t ra;
    start_target(&T, ctx, 1u << 20, NULL, &ep, &rk, &ra);
    uint8_t *b = it_alloc(8192);
    gw_request_t *w; /* one round trip first: the connection is fully set up (intra: the peer's table came) */
    IT_OK(ctx, gw_get(ep, b, 8, NULL, ra, rk, &w));
    IT_OK(ctx, it_wait_free(w, 5000));
    kill(T.pid, SIGKILL);
    gwt_wait(T.pid, 5); /* gone for good before we touch it */
    gw_request_t *r[2];
    gw_status_t st0 = gw_put(ep, b, 4096, NULL, ra, rk, &r[0]);
    gw_status_t st1 = gw_get(ep, b + 4096, 4096, NULL, ra, rk, &r[1]);
    if (st0 == GW_OK)
        st0 = it_wait_free(r[0], 10000);
    if (st1 == GW_OK)
        st1 = it_wait_free(r[1], 10000);
    fprintf(stderr, "  put: %s, get: %s (%s)\n", gw_status_name(st0), gw_status_name(st1), gw_last_error(ctx));
    CHECK(GW_IS_ENDPOINT_ERROR(st0));
    CHECK(GW_IS_ENDPOINT_ERROR(st1));
    gw_ep_info_t info = {.size = sizeof(info)};
    IT_OK(ctx, gw_ep_query(ep, &info));
    fprintf(stderr, "  endpoint: %s (%s)\n", gw_status_name(info.error), info.error_detail);
    CHECK(GW_IS_ENDPOINT_ERROR(info.error));
    close(T.to_child.wfd);
    close(T.to_parent.rfd);
    free(b);
    finish(ctx, ep, rk);
}

/* ---- frozen_get, frozen_recv ------------------------------------------------- */
static void case_frozen(int recv)
{
    gw_context_t *ctx = ctx_with("GPUWIRE_PEER_TIMEOUT_MS", "1000");
    it_target_t T;
    gw_ep_t *ep;
    gw_rkey_t *rk;
    uint64_t ra;
    start_target(&T, ctx, 1u << 20, "GPUWIRE_PEER_TIMEOUT_MS=1000", &ep, &rk, &ra);
    uint8_t *b = it_alloc(4096);
    gw_request_t *w; /* one round trip first: the connection is fully set up (intra: the peer's table came) */
    IT_OK(ctx, gw_get(ep, b, 8, NULL, ra, rk, &w));
    IT_OK(ctx, it_wait_free(w, 5000));
    kill(T.pid, SIGSTOP);
    double t0 = it_now();
    gw_request_t *r;
    if (recv)
        IT_OK(ctx, gw_recv(ep, b, 4096, NULL, 7, ~0ull, &r));
    else
        IT_OK(ctx, gw_get(ep, b, 4096, NULL, ra, rk, &r));
    gw_status_t st = it_wait_free(r, 8000);
    double took = it_now() - t0;
    gw_ep_info_t info = {.size = sizeof(info)};
    IT_OK(ctx, gw_ep_query(ep, &info));
    fprintf(stderr, "  %s against a frozen peer: %s after %.2f s; endpoint %s (%s)\n", recv ? "recv" : "get",
            gw_status_name(st), took, gw_status_name(info.error), info.error_detail);
    if (!recv && (is_intra() || is_ofi_shm())) {
        /* documented: intra (and shm's) puts and gets need nothing from the peer process */
        CHECK_ST(st, GW_OK);
        CHECK_ST(info.error, GW_OK);
    } else {
        CHECK_ST(st, GW_ERR_PEER_TIMEOUT);
        CHECK_ST(info.error, GW_ERR_PEER_TIMEOUT);
        CHECK(took < 1.0 + 3.0); /* the timeout plus slack for a loaded machine */
    }
    reap_target(&T);
    free(b);
    finish(ctx, ep, rk);
}

/* ---- local work on the peer's side (found by gpuwire perf --size 2G) ----------- */
static void case_busy_peer(void)
{
    enum { LEN = 4096 };
    const int work_ms = 2500; /* 2.5 peer timeouts */
    setenv("GPUWIRE_PEER_TIMEOUT_MS", "1000", 1);
    int p[2], q[2]; /* p: the peer's address; q: closed when this side is done */
    REQUIRE(pipe(p) == 0 && pipe(q) == 0);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) { /* the busy peer */
        close(p[0]);
        close(q[1]);
        gw_context_t *c = it_ctx();
        gw_listener_t *l;
        IT_OK(c, gw_listen(c, "127.0.0.1:0", &l));
        char addr[128];
        IT_OK(c, gw_listener_addr(l, addr, sizeof(addr)));
        if (write(p[1], addr, strlen(addr) + 1) != (ssize_t)strlen(addr) + 1)
            _exit(2);
        gw_ep_t *ep;
        IT_OK(c, gw_accept(l, 10000, &ep));
        usleep((useconds_t)work_ms * 1000); /* local work: no progress call */
        uint8_t *in = it_alloc(LEN), *out = it_alloc(LEN);
        memset(out, 0xb2, LEN);
        gw_request_t *r, *s;
        IT_OK(c, gw_recv(ep, in, LEN, NULL, 1, ~0ull, &r));
        IT_OK(c, gw_send(ep, out, LEN, NULL, 2, &s));
        gw_status_t rs = it_wait_free(r, 10000), ss = it_wait_free(s, 10000);
        int ok = rs == GW_OK && ss == GW_OK && in[0] == 0xa1 && in[LEN - 1] == 0xa1;
        if (!ok)
            fprintf(stderr, "  busy peer: recv %s, send %s: %s\n", gw_status_name(rs), gw_status_name(ss),
                    gw_last_error(c));
        /* progress until the other side has what it waits for, then go */
        double end = it_now() + 20;
        struct pollfd pf = {.fd = q[0], .events = POLLIN};
        while (poll(&pf, 1, 0) == 0 && it_now() < end) {
            if (gw_progress(c) == 0)
                gw_context_wait(c, 10);
        }
        gw_ep_close(ep, 2000);
        gw_listener_destroy(l);
        gw_context_destroy(c);
        _exit(ok ? 0 : 1);
    }
    close(p[1]);
    close(q[0]);
    gw_context_t *ctx = it_ctx();
    unsetenv("GPUWIRE_PEER_TIMEOUT_MS");
    char addr[128] = "";
    size_t got = 0;
    while (got < sizeof(addr)) {
        ssize_t n = read(p[0], addr + got, sizeof(addr) - got);
        REQUIRE(n > 0);
        got += (size_t)n;
        if (memchr(addr, '\0', got))
            break;
    }
    gw_ep_t *ep = it_connect(ctx, addr);
    uint8_t *in = it_alloc(LEN), *out = it_alloc(LEN);
    memset(out, 0xa1, LEN);
    double t0 = it_now();
    gw_request_t *r, *s;
    IT_OK(ctx, gw_recv(ep, in, LEN, NULL, 2, ~0ull, &r));
    IT_OK(ctx, gw_send(ep, out, LEN, NULL, 1, &s));
    gw_status_t rs = it_wait_free(r, 15000), ss = it_wait_free(s, 15000);
    double took = it_now() - t0;
    gw_ep_info_t info = {.size = sizeof(info)};
    IT_OK(ctx, gw_ep_query(ep, &info));
    fprintf(stderr, "  recv and send to a peer busy for %d ms (peer timeout 1000 ms): %s, %s after %.2f s; "
            "endpoint %s (%s)\n", work_ms, gw_status_name(rs), gw_status_name(ss), took, gw_status_name(info.error),
            info.error_detail);
    CHECK_ST(rs, GW_OK);
    CHECK_ST(ss, GW_OK);
    CHECK_ST(info.error, GW_OK);
    CHECK(in[0] == 0xb2 && in[LEN - 1] == 0xb2);
    CHECK(took >= work_ms / 1e3 - 0.2); /* it did wait for the peer's work */
    close(p[0]);
    close(q[1]); /* the peer may go */
    CHECK(gwt_wait(pid, 20) == 0);
    free(in);
    free(out);
    CHECK_ST(gw_ep_close(ep, 2000), GW_OK);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
}

/* ---- a receive after an idle spell (found by the Python tests) ----------------- */
static void case_idle_recv(void)
{
    gw_context_t *ctx = ctx_with("GPUWIRE_PEER_TIMEOUT_MS", "1000");
    it_target_t T;
    gw_ep_t *ep;
    gw_rkey_t *rk;
    uint64_t ra;
    start_target(&T, ctx, 1u << 20, "GPUWIRE_PEER_TIMEOUT_MS=1000", &ep, &rk, &ra);
    uint8_t *b = it_alloc(4096);
    gw_request_t *w;
    IT_OK(ctx, gw_get(ep, b, 8, NULL, ra, rk, &w));
    IT_OK(ctx, it_wait_free(w, 5000));
    usleep(2500 * 1000); /* no progress call for 2.5 peer timeouts; the peer is alive */
    gw_request_t *r;
    IT_OK(ctx, gw_recv(ep, b, 4096, NULL, 7, ~0ull, &r));
    double t0 = it_now();
    while (it_now() - t0 < 0.5) {
        gw_progress(ctx);
        usleep(1000);
    }
    gw_status_t st = gw_request_test(r);
    gw_ep_info_t info = {.size = sizeof(info)};
    IT_OK(ctx, gw_ep_query(ep, &info));
    fprintf(stderr, "  recv posted after an idle spell: %s after 0.5 s; endpoint %s (%s)\n", gw_status_name(st),
            gw_status_name(info.error), info.error_detail);
    CHECK_ST(st, GW_INPROGRESS);
    CHECK_ST(info.error, GW_OK);
    CHECK_ST(gw_request_cancel(r), GW_OK);
    gw_request_free(r);
    IT_OK(ctx, gw_get(ep, b, 8, NULL, ra, rk, &w)); /* and the endpoint still works */
    CHECK_ST(it_wait_free(w, 5000), GW_OK);
    reap_target(&T);
    free(b);
    finish(ctx, ep, rk);
}

/* ---- accept_close ------------------------------------------------------------ */
enum { CYCLES = 40 };
static gwt_chan_t g_pc, g_cc;

static int closing_server(void *arg)
{
    const char *logpath = arg;
    int fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    REQUIRE(fd >= 0);
    dup2(fd, 2); /* the library logs to stderr: keep what it says */
    close(fd);
    gw_context_t *ctx = it_ctx();
    gw_listener_t *l = NULL;
    IT_OK(ctx, gw_listen(ctx, "127.0.0.1:0", &l));
    char addr[128];
    IT_OK(ctx, gw_listener_addr(l, addr, sizeof(addr)));
    REQUIRE(gwt_chan_send(&g_cc, addr, (uint32_t)strlen(addr) + 1) == 0);
    int bad = 0;
    for (int i = 0; i < CYCLES; i++) {
        gw_ep_t *ep = NULL;
        gw_status_t st = gw_accept(l, 10000, &ep);
        if (st != GW_OK) {
            fprintf(stderr, "server: gw_accept #%d: %s\n", i, gw_status_name(st));
            bad++;
            break;
        }
        st = gw_ep_close(ep, 2000);
        if (st != GW_OK) {
            fprintf(stderr, "server: gw_ep_close #%d: %s\n", i, gw_status_name(st));
            bad++;
        }
    }
    /* late stream joins of the last endpoints arrive in these calls */
    for (int i = 0; i < 100; i++) {
        gw_progress(ctx);
        gw_context_wait(ctx, 5);
    }
    char c;
    gwt_chan_recv(&g_cc, &c, 1, 30000); /* the client is done */
    gw_listener_destroy(l);
    if (gw_context_destroy(ctx) != GW_OK)
        bad++;
    return bad ? 1 : 0;
}

static void case_accept_close(void)
{
    char logpath[] = "/tmp/gw-it-defects-XXXXXX";
    int lfd = mkstemp(logpath);
    REQUIRE(lfd >= 0);
    close(lfd);
    REQUIRE(gwt_chan_pair(&g_pc, &g_cc) == 0);
    int pid = gwt_spawn(closing_server, logpath);
    char addr[128];
    REQUIRE(gwt_chan_recv(&g_pc, addr, sizeof(addr), 10000) > 0);
    gw_context_t *ctx = it_ctx();
    int connected = 0, failed_later = 0;
    for (int i = 0; i < CYCLES; i++) {
        gw_ep_t *ep = NULL;
        gw_status_t st = gw_connect(ctx, addr, &ep);
        if (st != GW_OK) {
            fprintf(stderr, "  connect #%d: %s (%s)\n", i, gw_status_name(st), gw_last_error(ctx));
            continue;
        }
        connected++;
        gw_ep_info_t info = {.size = sizeof(info)};
        double t0 = it_now();
        do {
            gw_progress(ctx);
            gw_context_wait(ctx, 5);
            IT_OK(ctx, gw_ep_query(ep, &info));
        } while (info.error == GW_OK && it_now() - t0 < 5);
        if (GW_IS_ENDPOINT_ERROR(info.error))
            failed_later++;
        else
            fprintf(stderr, "  endpoint #%d still reports %s 5 s after the server closed it\n", i,
                    gw_status_name(info.error));
        CHECK_ST(gw_ep_close(ep, 2000), GW_OK);
    }
    gwt_chan_send(&g_pc, "d", 1);
    int rc = gwt_wait(pid, 30);
    fprintf(stderr, "  %d/%d connects succeeded, %d endpoints then failed; server exit %d\n", connected, CYCLES,
            failed_later, rc);
    CHECK(connected == CYCLES);
    CHECK(failed_later == connected);
    CHECK(rc == 0);
    FILE *f = fopen(logpath, "r");
    REQUIRE(f);
    char line[512];
    int warnings = 0;
    while (fgets(line, sizeof(line), f)) {
        if (strstr(line, "warn") || strstr(line, "WARN") || strstr(line, "error")) {
            if (warnings++ < 3)
                fprintf(stderr, "  server said: %s", line);
        }
    }
    fclose(f);
    unlink(logpath);
    fprintf(stderr, "  %d warning/error lines in the server's log\n", warnings);
    CHECK(warnings == 0);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
}

/* ---- bad_args ---------------------------------------------------------------- */
static void case_bad_args(void)
{
    gw_context_t *ctx = it_ctx();
    gw_listener_t *l = (gw_listener_t *)1;
    CHECK_ST(gw_listen(ctx, NULL, &l), GW_ERR_INVALID);
    CHECK(l == NULL);
    fprintf(stderr, "  gw_listen(ctx, NULL): %s\n", gw_last_error(ctx));
    CHECK(strstr(gw_last_error(ctx), "NULL") != NULL);
    it_target_t T;
    gw_ep_t *ep;
    gw_rkey_t *rk;
    uint64_t ra;
    start_target(&T, ctx, 4096, NULL, &ep, &rk, &ra);
    gw_rkey_t *k = (gw_rkey_t *)1;
    CHECK_ST(gw_rkey_unpack(ep, NULL, 46, &k), GW_ERR_INVALID);
    CHECK(k == NULL);
    fprintf(stderr, "  gw_rkey_unpack(ep, NULL, 46): %s\n", gw_last_error(ctx));
    CHECK(strstr(gw_last_error(ctx), "NULL") != NULL);
    CHECK(strstr(gw_last_error(ctx), "shorter") == NULL);
    CHECK(it_target_stop(&T, ctx) == 0);
    finish(ctx, ep, rk);
}

/* ---- settings ---------------------------------------------------------------- */
static void expect_config_error(const char *name, const char *value)
{
    const char *keep = getenv("GPUWIRE_TRANSPORTS");
    char saved[64];
    snprintf(saved, sizeof(saved), "%s", keep ? keep : "");
    setenv(name, value, 1);
    gw_context_t *ctx = NULL;
    gw_status_t st = gw_context_create(NULL, &ctx);
    fprintf(stderr, "  GPUWIRE_TRANSPORTS=%s %s=%s: %s\n", getenv("GPUWIRE_TRANSPORTS"), name, value,
            gw_status_name(st));
    CHECK_ST(st, GW_ERR_CONFIG);
    CHECK(ctx == NULL);
    if (ctx)
        gw_context_destroy(ctx);
    if (!strcmp(name, "GPUWIRE_TRANSPORTS"))
        setenv(name, saved, 1);
    else
        unsetenv(name);
}

static void case_settings(void)
{
    /* settings of a transport that is not allowed still have to parse */
    setenv("GPUWIRE_TRANSPORTS", "intra", 1);
    expect_config_error("GPUWIRE_TCP_STREAMS", "banana");
    expect_config_error("GPUWIRE_TCP_CHUNK", "12 parsecs");
    expect_config_error("GPUWIRE_TCP_THREADS", "-3");
    setenv("GPUWIRE_TRANSPORTS", "tcp", 1);
    expect_config_error("GPUWIRE_INTRA", "sometimes");
    expect_config_error("GPUWIRE_TRANSPORTS", "tcp,,tcp");
    expect_config_error("GPUWIRE_TRANSPORTS", "tcp,tcp");
    expect_config_error("GPUWIRE_TRANSPORTS", "tcp,carrier-pigeon");
    expect_config_error("GPUWIRE_TRANSPORTS", "");
    /* and the well-formed ones still work */
    setenv("GPUWIRE_TRANSPORTS", "intra", 1);
    setenv("GPUWIRE_TCP_STREAMS", "3", 1);
    gw_context_t *ctx = NULL;
    CHECK_ST(gw_context_create(NULL, &ctx), GW_OK);
    gw_context_destroy(ctx);
    unsetenv("GPUWIRE_TCP_STREAMS");
}

static void case_frozen_get(void)
{
    case_frozen(0);
}

static void case_frozen_recv(void)
{
    case_frozen(1);
}

static const gwt_case_t cases[] = {
    GWT_CASE(notify_order), GWT_CASE(killed),   GWT_CASE(frozen_get), GWT_CASE(frozen_recv), GWT_CASE(accept_close),
    GWT_CASE(bad_args),     GWT_CASE(settings), GWT_CASE(idle_recv),  GWT_CASE(busy_peer),
};

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    return GWT_MAIN(argc, argv, cases);
}
