/* SPDX-License-Identifier: Apache-2.0 */
/* it_api_ext.c - cancel, probe, wait-any, request detail, over the transport
 * GPUWIRE_TRANSPORTS names (ctest runs it over tcp and intra):
 *   1. gw_request_cancel() withdraws a posted receive (GW_ERR_CANCELED, and
 *      the message goes to the next receive); gw_request_free() of a posted
 *      receive withdraws it too (it must not eat a later message); a request
 *      already complete keeps its status; a put answers GW_OK or
 *      GW_INPROGRESS and then completes
 *   2. gw_probe() gives a queued message's length and tag before receiving
 *   3. gw_request_wait_any() / gw_request_test_many() over 2,000 requests:
 *      each completes exactly once, the ones that cannot complete stay in
 *      progress
 *   4. per-request failure detail in gw_request_info() (over verbs the
 *      target's NIC refuses the revoked key, which fails the RC queue pair
 *      and so the endpoint, docs/VERBS.md: asserted, and the case goes on
 *      with a spare endpoint the target accepted)
 *   5. gw_listener_query(): accepted count; a failed handshake (garbage on
 *      the port) is counted with its status and reason */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "it.h"

#define SEED 0x5151

static int g_verbs; /* the endpoints are verbs or ofi ones (a refused key fails the endpoint) */
static int g_tep;   /* the target's endpoint for target_send */

static gw_status_t wait_probe(gw_context_t *ctx, gw_ep_t *ep, uint64_t tag, gw_probe_info_t *pi, int ms)
{
    double end = it_now() + ms / 1000.0;
    gw_status_t st;
    while ((st = gw_probe(ep, tag, ~0ull, pi)) == GW_INPROGRESS && it_now() < end)
        gw_context_wait(ctx, 1);
    return st;
}

/* The target sends len bytes (pattern SEED) with tag; eager sizes only: its
 * command returns once the send completed. */
static void target_send(it_target_t *T, gw_context_t *ctx, size_t len, uint64_t tag)
{
    it_cmd_t c = {.type = IT_CMD_SEND, .ep = (uint32_t)g_tep, .region = 0, .off = 0, .len = len, .tag = tag, .seed = SEED};
    it_reply_t rep = it_target_cmd(T, &c, ctx);
    CHECK_ST((gw_status_t)rep.a, GW_OK);
}

static void detail_of(gw_request_t *r, gw_request_info_t *ri)
{
    memset(ri, 0, sizeof(*ri));
    ri->size = sizeof(*ri);
    REQUIRE(gw_request_info(r, ri) == GW_OK);
}

static void case_cancel(gw_context_t *ctx, it_target_t *T, gw_ep_t *ep, gw_rkey_t *rk, uint64_t ra)
{
    fprintf(stderr, "1. cancel\n");
    uint8_t *b = it_alloc(4096);
    gw_request_t *r, *r2;
    IT_OK(ctx, gw_recv(ep, b, 4096, NULL, 5, ~0ull, &r));
    CHECK_ST(gw_request_cancel(r), GW_OK);
    CHECK_ST(gw_request_test(r), GW_ERR_CANCELED);
    gw_request_info_t ri;
    detail_of(r, &ri);
    fprintf(stderr, "  canceled receive: %s\n", ri.error_detail);
    CHECK(strstr(ri.error_detail, "gw_request_cancel") != NULL);
    CHECK_ST(gw_request_cancel(r), GW_OK); /* complete already: unchanged */
    CHECK_ST(gw_request_test(r), GW_ERR_CANCELED);
    gw_request_free(r);
    /* a receive freed while posted must not eat the next message */
    IT_OK(ctx, gw_recv(ep, b, 4096, NULL, 6, ~0ull, &r));
    gw_request_free(r);
    target_send(T, ctx, 100, 5);
    target_send(T, ctx, 200, 6);
    IT_OK(ctx, gw_recv(ep, b, 4096, NULL, 5, ~0ull, &r));
    IT_OK(ctx, gw_recv(ep, b + 2048, 2048, NULL, 6, ~0ull, &r2));
    CHECK_ST(gw_request_wait(r, 5000), GW_OK);
    CHECK_ST(gw_request_wait(r2, 5000), GW_OK);
    detail_of(r, &ri);
    CHECK(ri.length == 100 && ri.tag == 5);
    detail_of(r2, &ri);
    CHECK(ri.length == 200 && ri.tag == 6);
    CHECK(gwt_verify(b, 100, SEED) == -1);
    CHECK(gwt_verify(b + 2048, 200, SEED) == -1);
    CHECK_ST(gw_request_cancel(r), GW_OK); /* complete: its own status stays */
    CHECK_ST(gw_request_test(r), GW_OK);
    gw_request_free(r);
    gw_request_free(r2);
    /* an operation past withdrawal completes on its own */
    IT_OK(ctx, gw_put(ep, b, 4096, NULL, ra, rk, &r));
    gw_status_t c = gw_request_cancel(r);
    CHECK(c == GW_OK || c == GW_INPROGRESS);
    CHECK_ST(gw_request_wait(r, 5000), GW_OK);
    gw_request_free(r);
    CHECK_ST(gw_request_cancel(NULL), GW_ERR_INVALID);
    free(b);
}

static void case_probe(gw_context_t *ctx, it_target_t *T, gw_ep_t *ep)
{
    fprintf(stderr, "2. probe\n");
    gw_probe_info_t pi = {.size = sizeof(pi)};
    CHECK_ST(gw_probe(ep, 0x77, ~0ull, &pi), GW_INPROGRESS);
    target_send(T, ctx, 3000, 0x77);
    target_send(T, ctx, 1, 0x7700);
    CHECK_ST(wait_probe(ctx, ep, 0x78, &pi, 200), GW_INPROGRESS);
    CHECK_ST(wait_probe(ctx, ep, 0x77, &pi, 5000), GW_OK);
    fprintf(stderr, "  probe: %zu bytes, tag 0x%llx\n", pi.length, (unsigned long long)pi.tag);
    CHECK(pi.length == 3000 && pi.tag == 0x77);
    /* a mask probe finds the oldest match, as gw_recv would */
    memset(&pi, 0, sizeof(pi));
    pi.size = sizeof(pi);
    CHECK_ST(gw_probe(ep, 0, 0, &pi), GW_OK); /* mask 0 matches both: the older */
    CHECK(pi.length == 3000 && pi.tag == 0x77);
    CHECK_ST(gw_probe(ep, 0x7700, 0xff00, &pi), GW_OK);
    CHECK(pi.length == 1 && pi.tag == 0x7700);
    /* receive exactly what the probe said */
    uint8_t *b = it_alloc(3000);
    gw_request_t *r;
    IT_OK(ctx, gw_recv(ep, b, 3000, NULL, 0x77, ~0ull, &r));
    CHECK_ST(it_wait_free(r, 5000), GW_OK);
    CHECK(gwt_verify(b, 3000, SEED) == -1);
    CHECK_ST(gw_probe(ep, 0x77, ~0ull, &pi), GW_INPROGRESS);
    IT_OK(ctx, gw_recv(ep, b, 1, NULL, 0x7700, ~0ull, &r));
    CHECK_ST(it_wait_free(r, 5000), GW_OK);
    free(b);
}

static void case_many(gw_context_t *ctx, gw_ep_t *ep, gw_rkey_t *rk, uint64_t ra)
{
    enum { N = 2000, NRECV = 4 };
    fprintf(stderr, "3. wait_any / test_many over %d requests\n", N + NRECV);
    static gw_request_t *r[N + NRECV];
    uint8_t *b = it_alloc((size_t)N * 64);
    static int seen[N + NRECV];
    memset(seen, 0, sizeof(seen));
    for (int i = 0; i < NRECV; i++) /* never matched: they stay in progress */
        IT_OK(ctx, gw_recv(ep, b, 64, NULL, 0xdead0000u + (unsigned)i, ~0ull, &r[i]));
    for (int i = 0; i < N; i++)
        IT_OK(ctx, gw_get(ep, b + (size_t)i * 64, 64, NULL, ra + (uint64_t)(i % 64) * 64, rk, &r[NRECV + i]));
    int completed = 0, rounds = 0;
    size_t idx[N + NRECV], nd = 0;
    while (completed < N) {
        size_t k;
        gw_status_t st = gw_request_wait_any(r, N + NRECV, 10000, &k);
        if (st != GW_OK) {
            fprintf(stderr, "  wait_any: %s after %d completions (%s)\n", gw_status_name(st), completed,
                    gw_last_error(ctx));
            gwt_failures++;
            break;
        }
        rounds++;
        /* take every complete one at once */
        IT_OK(ctx, gw_request_test_many(r, N + NRECV, idx, &nd));
        CHECK(nd >= 1);
        int has_k = 0;
        for (size_t j = 0; j < nd; j++) {
            size_t i = idx[j];
            has_k |= i == k;
            CHECK(i >= NRECV);
            CHECK(seen[i] == 0);
            seen[i]++;
            CHECK_ST(gw_request_test(r[i]), GW_OK);
            gw_request_free(r[i]);
            r[i] = NULL;
            completed++;
        }
        CHECK(has_k);
    }
    fprintf(stderr, "  %d gets completed in %d wait_any rounds\n", completed, rounds);
    IT_OK(ctx, gw_request_test_many(r, N + NRECV, idx, &nd));
    CHECK(nd == 0);
    size_t k;
    CHECK_ST(gw_request_wait_any(r, N + NRECV, 50, &k), GW_ERR_TIMEOUT);
    for (int i = 0; i < NRECV; i++) {
        CHECK_ST(gw_request_cancel(r[i]), GW_OK);
        gw_request_free(r[i]);
        r[i] = NULL;
    }
    CHECK_ST(gw_request_wait_any(r, N + NRECV, 50, &k), GW_ERR_INVALID); /* only NULLs */
    free(b);
}

static void case_detail(gw_context_t *ctx, it_target_t *T, gw_ep_t *ep, gw_rkey_t *rk, uint64_t ra, gw_ep_t *spare)
{
    fprintf(stderr, "4. per-request failure detail\n");
    it_cmd_t c = {.type = IT_CMD_DEREG, .region = 0};
    it_reply_t rep = it_target_cmd(T, &c, ctx);
    CHECK_ST((gw_status_t)rep.a, GW_OK);
    uint8_t b[64];
    gw_request_t *r;
    gw_status_t st = gw_get(ep, b, 64, NULL, ra, rk, &r);
    if (st == GW_OK) {
        st = gw_request_wait(r, 5000);
        gw_request_info_t ri;
        detail_of(r, &ri);
        fprintf(stderr, "  get from a deregistered region: %s: %s\n", gw_status_name(st), ri.error_detail);
        CHECK_ST(st, GW_ERR_INVALID_KEY);
        CHECK(!strncmp(ri.error_detail, "gw_get(len=64, raddr=0x", 23));
        CHECK(strlen(ri.error_detail) > 40);
        gw_request_free(r);
    } else {
        CHECK_ST(st, GW_ERR_INVALID_KEY);
    }
    if (g_verbs) { /* the refusal failed the endpoint, saying why; on with the spare */
        gw_ep_info_t ei = {.size = sizeof(ei)};
        IT_OK(ctx, gw_ep_query(ep, &ei));
        fprintf(stderr, "  verbs: the endpoint after it: %s: %s\n", gw_status_name(ei.error), ei.error_detail);
        CHECK_ST(ei.error, GW_ERR_INVALID_KEY);
        CHECK(strstr(ei.error_detail, "refused the access") != NULL && strstr(ei.error_detail, "key") != NULL);
        REQUIRE(spare);
        ep = spare;
        g_tep = 1;
    }
    /* a successful request has no detail */
    IT_OK(ctx, gw_recv(ep, b, 64, NULL, 9, ~0ull, &r));
    target_send(T, ctx, 10, 9);
    CHECK_ST(gw_request_wait(r, 5000), GW_OK);
    gw_request_info_t ri;
    detail_of(r, &ri);
    CHECK(ri.error_detail[0] == '\0');
    gw_request_free(r);
}

static void case_listener(void)
{
    fprintf(stderr, "5. listener statistics\n");
    gw_context_t *ctx = it_ctx();
    gw_listener_t *l;
    IT_OK(ctx, gw_listen(ctx, "127.0.0.1:0", &l));
    gw_listener_info_t li;
    memset(&li, 0, sizeof(li));
    li.size = sizeof(li);
    IT_OK(ctx, gw_listener_query(l, &li));
    CHECK(li.accepted == 0 && li.failed_handshakes == 0 && li.last_failure == GW_OK);
    char addr[128];
    IT_OK(ctx, gw_listener_addr(l, addr, sizeof(addr)));
    int port = atoi(strrchr(addr, ':') + 1);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    REQUIRE(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
    static const char junk[] = "GET / HTTP/1.0\r\n\r\n this is not a gpuwire handshake at all.....";
    REQUIRE(write(fd, junk, sizeof(junk)) == (ssize_t)sizeof(junk));
    gw_ep_t *ep = NULL;
    CHECK_ST(gw_accept(l, 500, &ep), GW_ERR_TIMEOUT);
    IT_OK(ctx, gw_listener_query(l, &li));
    fprintf(stderr, "  %lu failed handshake(s), last %s: %s\n", li.failed_handshakes, gw_status_name(li.last_failure),
            li.last_failure_detail);
    CHECK(li.failed_handshakes == 1);
    CHECK_ST(li.last_failure, GW_ERR_PROTOCOL);
    CHECK(strstr(li.last_failure_detail, "from 127.0.0.1:") != NULL);
    CHECK(li.pending == 0 && li.ready == 0);
    close(fd);
    gw_listener_destroy(l);
    IT_OK(ctx, gw_context_destroy(ctx));
}

int main(void)
{
    const char *tls = getenv("GPUWIRE_TRANSPORTS");
    g_verbs = tls && (!strcmp(tls, "verbs") || !strcmp(tls, "ofi"));
    it_target_cfg_t cfg = {.n_eps = g_verbs ? 2 : 1, .n_regions = 1,
                           .region = {{1u << 20, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, 0}}};
    it_target_t T;
    char addr[128];
    it_target_start(&T, &cfg, addr, sizeof(addr));
    gw_context_t *ctx = it_ctx();
    gw_ep_t *ep = it_connect(ctx, addr);
    gw_ep_t *spare = g_verbs ? it_connect(ctx, addr) : NULL;
    gw_ep_info_t ei = {.size = sizeof(ei)};
    IT_OK(ctx, gw_ep_query(ep, &ei));
    REQUIRE(g_verbs == (!strcmp(ei.transport, "verbs") || !strcmp(ei.transport, "ofi")));
    gw_rkey_t *rk[1];
    uint64_t ra[1];
    rk[0] = it_single_key(&T, ctx, ep, &ra[0], NULL);
    case_cancel(ctx, &T, ep, rk[0], ra[0]);
    case_probe(ctx, &T, ep);
    case_many(ctx, ep, rk[0], ra[0]);
    case_detail(ctx, &T, ep, rk[0], ra[0], spare);
    CHECK(it_target_stop(&T, ctx) == 0);
    gw_rkey_destroy(rk[0]);
    CHECK_ST(gw_ep_close(ep, 2000), GW_OK);
    if (spare)
        CHECK_ST(gw_ep_close(spare, 2000), GW_OK);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    case_listener();
    return gwt_done("it_api_ext");
}
