/* SPDX-License-Identifier: Apache-2.0 */
/* it_handshake.c - handshake failures get a clear error on both sides, the
 * connection closes, and the listener keeps serving others.
 *
 * Server side (the listener runs in this process, its log captured): raw
 * sockets send garbage, a header of another protocol version, a message cut
 * short then closed, a message cut short then left silent (timed out by
 * GPUWIRE_CONNECT_TIMEOUT_MS, not before), a HELLO offering only an
 * unusable transport (GW_ERR_NO_TRANSPORT naming each candidate), and valid
 * clients connect while the silent ones are still open.  Client side
 * (gw_connect against a fake server in a child): garbage, a wrong version, a
 * close after HELLO, a truncated reply, a silent server (timed out by the
 * client's own limit), nothing listening, a malformed address, no transport
 * in common, an unknown name in GPUWIRE_TRANSPORTS.
 *
 * The limits: a context whose timeout the test makes fire has a short one
 * (SHORT_MS) and nothing that must succeed runs under it: the silent peers
 * are timed out by a listener of their own, and the client's limit is short
 * only against the silent server.  Any handshake that must complete, and
 * any answer that must come, runs under a limit sized for a busy machine
 * (long_ms()): there a valid handshake over ofi took over 5 s.
 *
 * The wire format (bootstrap/wire.h) is used to build the bad messages and
 * to read the ERROR frames the listener answers with. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap/wire.h"
#include "core/util.h"
#include "it.h"

static int raw_connect(const char *addr)
{
    char host[64];
    const char *colon = strrchr(addr, ':');
    REQUIRE(colon && (size_t)(colon - addr) < sizeof(host));
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = '\0';
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
    REQUIRE(inet_pton(AF_INET, host, &sa.sin_addr) == 1);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    REQUIRE(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
    return fd;
}

static size_t header(uint8_t *b, uint32_t magic, uint16_t version, uint16_t type, uint32_t body)
{
    gw_put_u32(b, magic);
    gw_put_u16(b + 4, version);
    gw_put_u16(b + 6, type);
    gw_put_u32(b + 8, body);
    return GW_HS_HDR_LEN;
}

/* Progresses ctx until fd reaches EOF (or an error) or timeout_s passes;
 * collects what arrived.  Returns bytes read, -1 on timeout. */
static ssize_t drain_until_eof(gw_context_t *ctx, gw_listener_t *l, int fd, uint8_t *buf, size_t cap,
                               double timeout_s)
{
    size_t got = 0;
    double end = it_now() + timeout_s;
    while (it_now() < end) {
        gw_ep_t *ep = NULL;
        gw_status_t st = gw_accept(l, 0, &ep); /* progresses; must never hand out a bad peer */
        if (st == GW_OK) {
            fprintf(stderr, "gw_accept returned an endpoint for a failed handshake\n");
            gwt_failures++;
            gw_ep_close(ep, 0);
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 5) > 0) {
            ssize_t n = recv(fd, buf + got, cap - got, MSG_DONTWAIT);
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
                return (ssize_t)got;
            if (n > 0)
                got += (size_t)n;
        }
    }
    return -1;
}

/* The ERROR frame the listener sent back, if any. */
static gw_status_t error_frame(const uint8_t *buf, ssize_t n, char *text, size_t len)
{
    gw_hs_msg_t m;
    char why[256];
    text[0] = '\0';
    if (n <= 0 || gw_hs_decode(buf, (size_t)n, &m, why, sizeof(why)) != GW_OK || m.type != GW_HS_ERROR)
        return GW_OK;
    snprintf(text, len, "%s", m.text);
    return (gw_status_t)m.status;
}

/* the client's limit in the silent-server case, where it must fire (ms) */
#define SHORT_MS 1000
/* a limit fires at it or after, give or take a coarse clock tick (s) */
#define EARLY_S 0.02

/* every other limit (ms): on the 2-core VM at load average 13 a valid
 * handshake over ofi's tcp provider took up to 0.8 s at the listener, at
 * load average 20 over 5 s; IT_TIME_SCALE widens it in the emulated guest */
static int long_ms(void)
{
    return (int)(30000 * it_time_scale());
}

/* sets GPUWIRE_CONNECT_TIMEOUT_MS for the contexts created next (and the
 * children spawned next) */
static void set_limit(int ms)
{
    char v[32];
    snprintf(v, sizeof(v), "%d", ms);
    setenv("GPUWIRE_CONNECT_TIMEOUT_MS", v, 1);
}

static int g_logfd = -1;
static char g_log[65536];

static const char *log_read(void)
{
    ssize_t n = pread(g_logfd, g_log, sizeof(g_log) - 1, 0);
    g_log[n > 0 ? n : 0] = '\0';
    return g_log;
}

/* A valid client in a child process: connects, sends one message, closes. */
static char g_addr[128];
static int good_client(void *arg)
{
    (void)arg;
    gw_context_t *ctx = it_ctx();
    gw_ep_t *ep = NULL;
    gw_status_t st = gw_connect(ctx, g_addr, &ep);
    if (st != GW_OK) {
        fprintf(stderr, "good client: gw_connect: %s (%s)\n", gw_status_name(st), gw_last_error(ctx));
        return 1;
    }
    gw_request_t *r = NULL;
    IT_OK(ctx, gw_send(ep, "hi", 3, NULL, 7, &r));
    IT_OK(ctx, gw_request_wait(r, 10000));
    gw_request_free(r);
    gw_ep_close(ep, 2000);
    gw_context_destroy(ctx);
    return 0;
}

static void expect_good_client(gw_context_t *ctx, gw_listener_t *l)
{
    int pid = gwt_spawn(good_client, NULL);
    gw_ep_t *ep = NULL;
    gw_status_t st = gw_accept(l, long_ms() + 5000, &ep);
    CHECK_ST(st, GW_OK);
    if (st != GW_OK)
        fprintf(stderr, "gw_accept: %s\n", gw_last_error(ctx));
    if (st == GW_OK) {
        char msg[8] = "";
        gw_request_t *r = NULL;
        IT_OK(ctx, gw_recv(ep, msg, sizeof(msg), NULL, 7, ~0ull, &r));
        CHECK_ST(it_wait_free(r, long_ms()), GW_OK);
        CHECK(strcmp(msg, "hi") == 0);
        gw_ep_close(ep, 2000);
    }
    CHECK(gwt_wait(pid, long_ms() / 1000 + 5) == 0);
}

/* Nothing came on fd yet: no bytes, no close. */
static int untouched(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, 0) == 0;
}

/* A HELLO's header saying 100 body bytes, and 10 of them. */
static size_t half_hello(uint8_t *out)
{
    header(out, GW_HS_MAGIC, GW_HS_VERSION, GW_HS_HELLO, 100);
    memset(out + GW_HS_HDR_LEN, 0, 10);
    return GW_HS_HDR_LEN + 10;
}

/* d. silent peers timed out: a listener of its own, with the short limit
 * and no valid client under it, closes a HELLO cut short and left silent
 * and a connection that sends nothing, each with GW_ERR_TIMEOUT, not before
 * the limit and not long after it */
static void silent_timed_out(void)
{
    set_limit(SHORT_MS);
    gw_context_t *ctx = it_ctx();
    gw_listener_t *l = NULL;
    char addr[128];
    IT_OK(ctx, gw_listen(ctx, "127.0.0.1:0", &l));
    IT_OK(ctx, gw_listener_addr(l, addr, sizeof(addr)));
    uint8_t out[256], in[4096];
    char text[512];
    size_t hn = half_hello(out);
    double t0 = it_now();
    int half = raw_connect(addr), none = raw_connect(addr);
    REQUIRE(send(half, out, hn, 0) == (ssize_t)hn);
    /* bound on the lateness: a progress pass after the deadline, on a busy machine */
    const double late = 10 * it_time_scale();
    int fds[2] = {half, none};
    const char *what[2] = {"a HELLO cut short", "a connection that sent nothing"};
    for (int i = 0; i < 2; i++) {
        ssize_t n = drain_until_eof(ctx, l, fds[i], in, sizeof(in), SHORT_MS / 1000.0 + late);
        double waited = it_now() - t0;
        CHECK(n >= 0);
        fprintf(stderr, "silent peer (%s) closed after %.2f s (GPUWIRE_CONNECT_TIMEOUT_MS=%d)\n", what[i], waited,
                SHORT_MS);
        CHECK(waited >= SHORT_MS / 1000.0 - EARLY_S);
        CHECK_ST(error_frame(in, n, text, sizeof(text)), GW_ERR_TIMEOUT);
        CHECK(strstr(text, "not completed within") != NULL);
        close(fds[i]);
    }
    gw_listener_destroy(l);
    IT_OK(ctx, gw_context_destroy(ctx));
}

static void server_side(void)
{
    silent_timed_out();

    /* everything else under the long limit: valid clients must get through */
    const int limit = long_ms();
    const double answer_s = limit / 1000.0; /* bound on an answer that must come */
    set_limit(limit); /* the listener's, and the valid clients' (children) */
    gw_context_t *ctx = it_ctx();
    gw_listener_t *l = NULL;
    IT_OK(ctx, gw_listen(ctx, "127.0.0.1:0", &l));
    IT_OK(ctx, gw_listener_addr(l, g_addr, sizeof(g_addr)));
    uint8_t out[256], in[4096];
    char text[512];
    ssize_t n;

    /* silent peers on this listener too, pending while it answers and
     * serves the others below */
    double t_open = it_now();
    int silent_half = raw_connect(g_addr);
    size_t hn = half_hello(out);
    REQUIRE(send(silent_half, out, hn, 0) == (ssize_t)hn);
    int silent_none = raw_connect(g_addr);

    /* a. garbage */
    int fd = raw_connect(g_addr);
    for (int i = 0; i < 64; i++)
        out[i] = (uint8_t)(i * 37 + 11);
    REQUIRE(send(fd, out, 64, 0) == 64);
    n = drain_until_eof(ctx, l, fd, in, sizeof(in), answer_s);
    CHECK(n >= 0); /* closed by the listener */
    CHECK_ST(error_frame(in, n, text, sizeof(text)), GW_ERR_PROTOCOL);
    fprintf(stderr, "garbage -> the peer was told: %s\n", text);
    CHECK(strstr(log_read(), "refused") && strstr(g_log, "GW_ERR_PROTOCOL"));
    close(fd);

    /* b. another protocol version */
    fd = raw_connect(g_addr);
    header(out, GW_HS_MAGIC, GW_HS_VERSION + 7, GW_HS_HELLO, 0);
    REQUIRE(send(fd, out, GW_HS_HDR_LEN, 0) == GW_HS_HDR_LEN);
    n = drain_until_eof(ctx, l, fd, in, sizeof(in), answer_s);
    CHECK(n >= 0);
    CHECK_ST(error_frame(in, n, text, sizeof(text)), GW_ERR_VERSION);
    fprintf(stderr, "wrong version -> the peer was told: %s\n", text);
    CHECK(strstr(text, "version") != NULL);
    CHECK(strstr(log_read(), "GW_ERR_VERSION") != NULL);
    close(fd);

    /* c. a HELLO cut short, then the peer closes */
    fd = raw_connect(g_addr);
    hn = half_hello(out);
    REQUIRE(send(fd, out, hn, 0) == (ssize_t)hn);
    shutdown(fd, SHUT_WR);
    n = drain_until_eof(ctx, l, fd, in, sizeof(in), answer_s);
    CHECK(n >= 0);
    CHECK(strstr(log_read(), "truncated") != NULL);
    close(fd);

    /* a valid client while the silent ones are open */
    expect_good_client(ctx, l);

    /* e. a HELLO offering only a transport the listener cannot use: refused,
     * every candidate named in the answer */
    fd = raw_connect(g_addr);
    gw_hs_msg_t h;
    memset(&h, 0, sizeof(h));
    h.type = GW_HS_HELLO;
    h.uuid = 42;
    h.host_id = 43;
    h.has_nonce = 1;
    h.pref[0] = 0; /* verbs */
    h.npref = 1;
    static uint8_t hello[GW_HS_HDR_LEN + 1024];
    hn = gw_hs_encode(&h, hello, sizeof(hello));
    REQUIRE(hn > 0 && send(fd, hello, hn, 0) == (ssize_t)hn);
    n = drain_until_eof(ctx, l, fd, in, sizeof(in), answer_s);
    CHECK_ST(error_frame(in, n, text, sizeof(text)), GW_ERR_NO_TRANSPORT);
    fprintf(stderr, "only verbs offered -> the peer was told: %s\n", text);
    CHECK(strstr(text, "verbs") != NULL);
    close(fd);

    /* the silent ones were left alone all along (within the limit), and
     * their leaving is noted */
    double open_s = it_now() - t_open;
    if (open_s < limit / 1000.0 - 0.1) {
        CHECK(untouched(silent_half));
        CHECK(untouched(silent_none));
    } else {
        fprintf(stderr, "(the cases above took %.2f s, past the listener's limit: the silent connections "
                        "may have been timed out)\n", open_s);
    }
    close(silent_half);
    close(silent_none);

    /* f. and once more at the end: the listener still serves */
    expect_good_client(ctx, l);
    gw_listener_destroy(l);
    IT_OK(ctx, gw_context_destroy(ctx));
}

/* ---- client side: gw_connect against a fake server ------------------------------- */
typedef enum fake_mode { FAKE_GARBAGE, FAKE_VERSION, FAKE_CLOSE, FAKE_TRUNC_CLOSE, FAKE_SILENT } fake_mode_t;
static gwt_chan_t g_pc, g_cc;

static int fake_server(void *arg)
{
    fake_mode_t mode = (fake_mode_t)(intptr_t)arg;
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    socklen_t sl = sizeof(sa);
    REQUIRE(bind(l, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(l, 4) == 0);
    REQUIRE(getsockname(l, (struct sockaddr *)&sa, &sl) == 0);
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%u", ntohs(sa.sin_port));
    gwt_chan_send(&g_cc, addr, (uint32_t)strlen(addr) + 1);
    int fd = accept(l, NULL, NULL);
    REQUIRE(fd >= 0);
    uint8_t hello[GW_HS_HDR_LEN + GW_HS_MAX_BODY];
    ssize_t n = recv(fd, hello, GW_HS_HDR_LEN, MSG_WAITALL); /* the client speaks first */
    REQUIRE(n == GW_HS_HDR_LEN);
    /* read the whole HELLO: closing with unread bytes would send a RST */
    uint32_t body = gw_get_u32(hello + 8);
    REQUIRE(body <= GW_HS_MAX_BODY);
    if (body)
        REQUIRE(recv(fd, hello + GW_HS_HDR_LEN, body, MSG_WAITALL) == (ssize_t)body);
    uint8_t out[64];
    switch (mode) {
    case FAKE_GARBAGE:
        memset(out, 0x5A, sizeof(out));
        send(fd, out, sizeof(out), MSG_NOSIGNAL);
        break;
    case FAKE_VERSION:
        header(out, GW_HS_MAGIC, GW_HS_VERSION + 1, GW_HS_ACCEPT, 0);
        send(fd, out, GW_HS_HDR_LEN, MSG_NOSIGNAL);
        break;
    case FAKE_CLOSE:
        break;
    case FAKE_TRUNC_CLOSE:
        header(out, GW_HS_MAGIC, GW_HS_VERSION, GW_HS_ACCEPT, 40);
        send(fd, out, GW_HS_HDR_LEN + 5, MSG_NOSIGNAL);
        break;
    case FAKE_SILENT: {
        char done;
        gwt_chan_recv(&g_cc, &done, 1, 10000); /* hold the connection open */
        break;
    }
    }
    usleep(100000);
    close(fd);
    close(l);
    return 0;
}

static void client_case(fake_mode_t mode, gw_status_t want, const char *want_text)
{
    /* the client's own limit: to fire against the silent server, else
     * never before the fake server's answer */
    const int limit = mode == FAKE_SILENT ? SHORT_MS : long_ms();
    set_limit(limit);
    int pid = gwt_spawn(fake_server, (void *)(intptr_t)mode);
    char addr[64];
    REQUIRE(gwt_chan_recv(&g_pc, addr, sizeof(addr), long_ms()) > 0);
    gw_context_t *ctx = it_ctx();
    gw_ep_t *ep = NULL;
    double t0 = it_now();
    gw_status_t st = gw_connect(ctx, addr, &ep);
    double took = it_now() - t0;
    fprintf(stderr, "fake server mode %d: gw_connect -> %s in %.2f s: %s\n", mode,
            gw_status_name(st), took, gw_last_error(ctx));
    if (want == GW_ERR_CONN_RESET) /* a close may also show as a protocol error */
        CHECK(st == GW_ERR_CONN_RESET || st == GW_ERR_PROTOCOL);
    else
        CHECK_ST(st, want);
    CHECK(ep == NULL);
    CHECK(strstr(gw_last_error(ctx), addr) != NULL); /* the message names the peer */
    if (want_text)
        CHECK(strstr(gw_last_error(ctx), want_text) != NULL);
    if (mode == FAKE_SILENT) /* at the limit, not before; late only by a busy machine's scheduling */
        CHECK(took >= limit / 1000.0 - EARLY_S && took < limit / 1000.0 + 10 * it_time_scale());
    else
        CHECK(took < limit / 1000.0);
    if (mode == FAKE_SILENT)
        gwt_chan_send(&g_pc, "x", 1);
    CHECK(gwt_wait(pid, long_ms() / 1000 + 5) == 0);
    IT_OK(ctx, gw_context_destroy(ctx));
}

int main(void)
{
    setenv("GPUWIRE_LOG_LEVEL", "warn", 1);
    /* the listener's log goes to a file we read back (and echo at the end) */
    char path[] = "/tmp/gw_it_hs_XXXXXX";
    g_logfd = mkstemp(path);
    REQUIRE(g_logfd >= 0);
    unlink(path);
    int saved = dup(2);
    dup2(g_logfd, 2);
    server_side();
    dup2(saved, 2);
    fprintf(stderr, "---- listener log ----\n%s----\n", log_read());

    REQUIRE(gwt_chan_pair(&g_pc, &g_cc) == 0);
    client_case(FAKE_GARBAGE, GW_ERR_PROTOCOL, NULL);
    client_case(FAKE_VERSION, GW_ERR_VERSION, "version");
    client_case(FAKE_CLOSE, GW_ERR_CONN_RESET, NULL);
    client_case(FAKE_TRUNC_CLOSE, GW_ERR_CONN_RESET, "truncated");
    client_case(FAKE_SILENT, GW_ERR_TIMEOUT, NULL);

    set_limit(long_ms());
    gw_context_t *ctx = it_ctx();
    gw_ep_t *ep = NULL;
    /* nothing listens on port 1 of loopback */
    CHECK_ST(gw_connect(ctx, "127.0.0.1:1", &ep), GW_ERR_CONN_REFUSED);
    fprintf(stderr, "closed port: %s\n", gw_last_error(ctx));
    CHECK(strstr(gw_last_error(ctx), "127.0.0.1:1") != NULL);
    CHECK_ST(gw_connect(ctx, "no-port-here", &ep), GW_ERR_ADDRESS);
    fprintf(stderr, "bad address: %s\n", gw_last_error(ctx));
    CHECK_ST(gw_connect(ctx, "256.1.1.1.1:80", &ep), GW_ERR_ADDRESS);
    CHECK_ST(gw_connect(ctx, "127.0.0.1:99999", &ep), GW_ERR_ADDRESS);
    gw_listener_t *l = NULL;
    CHECK_ST(gw_listen(ctx, "127.0.0.1:notaport", &l), GW_ERR_ADDRESS);
    IT_OK(ctx, gw_context_destroy(ctx));

    /* no transport both sides may use: refused, every candidate named */
    it_target_t T;
    it_target_cfg_t cfg = {.n_eps = 0, .n_regions = 0, .env = {"GPUWIRE_TRANSPORTS=tcp"}};
    char addr[128];
    it_target_start(&T, &cfg, addr, sizeof(addr));
    gw_config_t only_verbs = {.size = sizeof(only_verbs), .transports = "verbs", .log_level = -1};
    IT_OK(NULL, gw_context_create(&only_verbs, &ctx));
    CHECK_ST(gw_connect(ctx, addr, &ep), GW_ERR_NO_TRANSPORT);
    fprintf(stderr, "no common transport: %s\n", gw_last_error(ctx));
    CHECK(strstr(gw_last_error(ctx), "verbs") != NULL);
    IT_OK(ctx, gw_context_destroy(ctx));
    CHECK(it_target_stop(&T, NULL) == 0);
    /* a transport list that names no transport is a configuration error */
    setenv("GPUWIRE_TRANSPORTS", "tcp,carrier-pigeon", 1);
    CHECK_ST(gw_context_create(NULL, &ctx), GW_ERR_CONFIG);
    unsetenv("GPUWIRE_TRANSPORTS");
    return gwt_done("it_handshake");
}
