/* SPDX-License-Identifier: Apache-2.0 */
/* api_refusals - every GW_ERR_INVALID refusal of the public API that has a
 * context to tell says so itself: each row of the table plants an
 * unrelated earlier failure (a gw_mem_unpublish of a name never
 * published), makes one refused call, and checks that the call returned
 * GW_ERR_INVALID and that gw_last_error() now names the function and the
 * argument (not the planted failure).  Also: GPUWIRE_PEERS is read at
 * gw_context_create (a value that does not parse fails there with
 * GW_ERR_CONFIG naming it; gw_peer_query knows the agents it names at
 * once). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static gw_context_t *ctx;
static gw_ep_t *ep;
static gw_listener_t *lis;
static gw_mem_t *mem, *lmem;
static gw_rkey_t *rk;
static gw_request_t *req;
static uint64_t raddr;
static uint8_t key[512], buf[4096];
static size_t keylen;
static char text[64];
static size_t small_len = 2, nd, idx;
static void *p_out;
static gw_mem_t *m_out;
static gw_ep_t *e_out;
static gw_listener_t *l_out;
static gw_rkey_t *k_out[2];
static gw_dlist_t *d_out;
static gw_transport_info_t ti0 = {.size = 0};
static gw_ep_info_t ei0 = {.size = 0};
static gw_listener_info_t li0 = {.size = 0};
static gw_mem_info_t mi0 = {.size = 0};
static gw_probe_info_t pi0 = {.size = 0};
static gw_request_info_t ri0 = {.size = 0};
static gw_peer_info_t qi = {.size = sizeof(gw_peer_info_t)}, qi0 = {.size = 0};
static gw_peer_event_t ev0 = {.size = 4};
static const char *no_name[1] = {NULL};
static const char *one_name[1] = {"r"};
static gw_local_desc_t ld[1];
static gw_remote_desc_t rd[1];
static uint32_t pages[1];

/* function, the argument its detail must name, the refused call */
#define ROWS(X)                                                                                      \
    X("gw_context_fd", "fd", gw_context_fd(ctx, NULL))                                               \
    X("gw_transport_at", "info", gw_transport_at(ctx, 0, NULL))                                      \
    X("gw_transport_at", "info->size", gw_transport_at(ctx, 0, &ti0))                                \
    X("gw_connect", "addr", gw_connect(ctx, NULL, &e_out))                                           \
    X("gw_connect", "out", gw_connect(ctx, "127.0.0.1:1", NULL))                                     \
    X("gw_ep_query", "info", gw_ep_query(ep, NULL))                                                  \
    X("gw_ep_query", "info->size", gw_ep_query(ep, &ei0))                                            \
    X("gw_listen", "out", gw_listen(ctx, ":0", NULL))                                                \
    X("gw_listen", "addr", gw_listen(ctx, NULL, &l_out))                                             \
    X("gw_listener_addr", "buf", gw_listener_addr(lis, NULL, sizeof(text)))                          \
    X("gw_listener_addr", "len", gw_listener_addr(lis, text, 0))                                     \
    X("gw_listener_addr", "buf", gw_listener_addr(lis, text, 3))                                     \
    X("gw_accept", "out", gw_accept(lis, 0, NULL))                                                   \
    X("gw_listener_query", "info", gw_listener_query(lis, NULL))                                     \
    X("gw_listener_query", "info->size", gw_listener_query(lis, &li0))                               \
    X("gw_mem_reg", "out", gw_mem_reg(ctx, buf, 64, 0, NULL))                                        \
    X("gw_mem_reg", "access", gw_mem_reg(ctx, buf, 64, 0x80, &m_out))                                \
    X("gw_mem_reg", "address", gw_mem_reg(ctx, NULL, 64, 0, &m_out))                                \
    X("gw_mem_alloc", "addr", gw_mem_alloc(ctx, 64, 0, NULL, &m_out))                                \
    X("gw_mem_alloc", "mem", gw_mem_alloc(ctx, 64, 0, &p_out, NULL))                                 \
    X("gw_mem_alloc", "length", gw_mem_alloc(ctx, 0, 0, &p_out, &m_out))                             \
    X("gw_mem_query", "info", gw_mem_query(mem, NULL))                                               \
    X("gw_mem_query", "info->size", gw_mem_query(mem, &mi0))                                         \
    X("gw_mem_pack_rkey", "len", gw_mem_pack_rkey(mem, key, NULL))                                   \
    X("gw_mem_pack_rkey", "buffer", gw_mem_pack_rkey(mem, key, &small_len))                          \
    X("gw_mem_pack_rkey", "local access", gw_mem_pack_rkey(lmem, NULL, &small_len))                  \
    X("gw_rkey_unpack", "out", gw_rkey_unpack(ep, key, keylen, NULL))                                \
    X("gw_rkey_unpack", "buf", gw_rkey_unpack(ep, NULL, keylen, &k_out[0]))                          \
    X("gw_put", "buffer", gw_put(ep, NULL, 64, NULL, raddr, rk, NULL))                               \
    X("gw_put", "remote key", gw_put(ep, buf, 64, NULL, raddr, NULL, NULL))                          \
    X("gw_get", "buffer", gw_get(ep, NULL, 64, NULL, raddr, rk, NULL))                               \
    X("gw_put_notify", "remote key", gw_put_notify(ep, buf, 64, NULL, raddr, NULL, 1, NULL))         \
    X("gw_send", "buffer", gw_send(ep, NULL, 64, NULL, 1, NULL))                                     \
    X("gw_recv", "buffer", gw_recv(ep, NULL, 64, NULL, 1, ~0ull, NULL))                              \
    X("gw_notify_wait", "value", gw_notify_wait(ep, 0, NULL))                                        \
    X("gw_notify_count", "count", gw_notify_count(ep, 1, NULL))                                      \
    X("gw_probe", "info", gw_probe(ep, 0, 0, NULL))                                                  \
    X("gw_probe", "info->size", gw_probe(ep, 0, 0, &pi0))                                            \
    X("gw_request_info", "info", gw_request_info(req, NULL))                                         \
    X("gw_request_info", "info->size", gw_request_info(req, &ri0))                                  \
    X("gw_request_test_many", "done_idx", gw_request_test_many(&req, 1, NULL, &nd))                  \
    X("gw_request_test_many", "ndone", gw_request_test_many(&req, 1, &idx, NULL))                    \
    X("gw_request_wait_any", "index", gw_request_wait_any(&req, 1, 0, NULL))                         \
    X("gw_dlist_local", "d", gw_dlist_local(ctx, NULL, 1, &d_out))                                   \
    X("gw_dlist_local", "out", gw_dlist_local(ctx, ld, 1, NULL))                                     \
    X("gw_dlist_remote", "out", gw_dlist_remote(ep, rd, 1, GW_ACCESS_REMOTE_WRITE, NULL))            \
    X("gw_dlist_remote", "descriptors", gw_dlist_remote(ep, NULL, 1, GW_ACCESS_REMOTE_WRITE, &d_out)) \
    X("gw_dlist_remote", "access", gw_dlist_remote(ep, rd, 1, 0, &d_out))                            \
    X("gw_xfer_pages", "local region",                                                               \
      gw_xfer_pages(ep, GW_XFER_PUT, NULL, buf, pages, rk, raddr, pages, 1, 64, NULL, NULL))         \
    X("gw_xfer_pages", "op", gw_xfer_pages(ep, 9, lmem, buf, pages, rk, raddr, pages, 1, 64, NULL, NULL)) \
    X("gw_pages_create", "out", gw_pages_create(ctx, pages, pages, 1, NULL))                          \
    X("gw_xfer_pages_prepared", "page list",                                                         \
      gw_xfer_pages_prepared(ep, GW_XFER_PUT, lmem, buf, rk, raddr, NULL, 64, NULL, NULL))           \
    X("gw_xfer_batch_prepared", "selection",                                                        \
      gw_xfer_batch_prepared(ep, GW_XFER_PUT, NULL, NULL, NULL, NULL, NULL))                        \
    X("gw_agent_listen", "out", gw_agent_listen(ctx, "refusals", NULL, NULL))                        \
    X("gw_agent_listen", "name", gw_agent_listen(ctx, "bad name", NULL, &l_out))                     \
    X("gw_mem_publish", "name", gw_mem_publish(mem, NULL))                                           \
    X("gw_mem_unpublish", "name", gw_mem_unpublish(ctx, NULL))                                       \
    X("gw_peer_add", "name", gw_peer_add(ctx, NULL, "127.0.0.1:1"))                                  \
    X("gw_peer_add", "addr", gw_peer_add(ctx, "agent-x", NULL))                                      \
    X("gw_peer_ep", "out", gw_peer_ep(ctx, "agent-x", NULL))                                         \
    X("gw_peer_ep", "name", gw_peer_ep(ctx, NULL, &e_out))                                           \
    X("gw_peer_regions", "names[0]", gw_peer_regions(ctx, "agent-x", no_name, 1, k_out))             \
    X("gw_peer_regions", "names", gw_peer_regions(ctx, "agent-x", NULL, 1, k_out))                   \
    X("gw_peer_regions", "out", gw_peer_regions(ctx, "agent-x", one_name, 1, NULL))                  \
    X("gw_peer_regions", "peer", gw_peer_regions(ctx, NULL, one_name, 1, k_out))                     \
    X("gw_peer_query", "name", gw_peer_query(ctx, NULL, &qi))                                        \
    X("gw_peer_query", "info", gw_peer_query(ctx, "agent-x", NULL))                                  \
    X("gw_peer_query", "info->size", gw_peer_query(ctx, "agent-x", &qi0))                            \
    X("gw_peer_watch", "flags", gw_peer_watch(ctx, 0x100, NULL, NULL))                               \
    X("gw_peer_event_next", "ev", gw_peer_event_next(ctx, NULL))                                     \
    X("gw_peer_event_next", "ev->size", gw_peer_event_next(ctx, &ev0))                               \
    X("gw_directory_list", "cb", gw_directory_list(ctx, NULL, NULL))                                 \
    X("gw_directory_describe", "buf", gw_directory_describe(ctx, NULL, 16))                          \
    X("gw_directory_describe", "len", gw_directory_describe(ctx, text, 0))

static const struct {
    const char *fn, *arg, *call;
} rows[] = {
#define ROW_(f, a, e) {f, a, #e},
    ROWS(ROW_)
#undef ROW_
};

static gw_status_t call_row(size_t i)
{
    size_t k = 0;
#define CALL_(f, a, e)                                                                               \
    if (i == k++)                                                                                    \
        return (e);
    ROWS(CALL_)
#undef CALL_
    return GW_OK;
}

/* An unrelated failure the next refusal must not leave standing. */
static void plant(void)
{
    REQUIRE(gw_mem_unpublish(ctx, "planted-earlier-failure") == GW_ERR_NOT_FOUND);
    REQUIRE(strstr(gw_last_error(ctx), "planted-earlier-failure") != NULL);
}

/* GPUWIRE_PEERS: read when the context is created. */
static void peers_setting(void)
{
    setenv("GPUWIRE_PEERS", "alpha=127.0.0.1:4000, beta=127.0.0.1:4001", 1);
    gw_context_t *c = NULL;
    REQUIRE_OK(gw_context_create(NULL, &c));
    gw_peer_info_t pi = {.size = sizeof(pi)};
    CHECK_ST(gw_peer_query(c, "beta", &pi), GW_OK); /* no other names call first */
    CHECK(!strcmp(pi.addr, "127.0.0.1:4001"));
    CHECK_ST(gw_peer_query(c, "gamma", &pi), GW_ERR_NOT_FOUND);
    CHECK_ST(gw_context_destroy(c), GW_OK);

    /* a value that does not parse fails the create, and the message (on
     * stderr: there is no context) names it */
    setenv("GPUWIRE_PEERS", "alpha=127.0.0.1:4000,no-equals-sign", 1);
    char path[] = "/tmp/gw_refusals_XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    REQUIRE(saved >= 0 && dup2(fd, 2) == 2);
    c = NULL;
    gw_status_t st = gw_context_create(NULL, &c);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char msg[2048] = "";
    ssize_t n = pread(fd, msg, sizeof(msg) - 1, 0);
    msg[n > 0 ? n : 0] = 0;
    close(fd);
    unlink(path);
    CHECK_ST(st, GW_ERR_CONFIG);
    CHECK(c == NULL);
    CHECK(strstr(msg, "GPUWIRE_PEERS") != NULL && strstr(msg, "no-equals-sign") != NULL);
    if (c)
        gw_context_destroy(c);
    unsetenv("GPUWIRE_PEERS");
}

int main(void)
{
    unsetenv("GPUWIRE_DIRECTORY");
    unsetenv("GPUWIRE_PEERS");
    setenv("GPUWIRE_TRANSPORTS", "tcp", 1);
    peers_setting();

    REQUIRE_OK(gw_context_create(NULL, &ctx));
    REQUIRE_OK(gw_listen(ctx, "127.0.0.1:0", &lis));
    char addr[80];
    REQUIRE_OK(gw_listener_addr(lis, addr, sizeof(addr)));
    REQUIRE_OK(gw_connect(ctx, addr, &ep));
    REQUIRE_OK(gw_mem_reg(ctx, buf, sizeof(buf), GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, &mem));
    REQUIRE_OK(gw_mem_reg(ctx, buf, 64, GW_ACCESS_LOCAL, &lmem));
    keylen = sizeof(key);
    REQUIRE_OK(gw_mem_pack_rkey(mem, key, &keylen));
    REQUIRE_OK(gw_rkey_unpack(ep, key, keylen, &rk));
    REQUIRE_OK(gw_rkey_range(rk, &raddr, NULL));
    REQUIRE_OK(gw_recv(ep, buf, 8, NULL, 0xabc, ~0ull, &req)); /* stays pending */
    ld[0] = (gw_local_desc_t){mem, 0, 64};
    rd[0] = (gw_remote_desc_t){rk, 0, 64};

    size_t n = sizeof(rows) / sizeof(rows[0]);
    for (size_t i = 0; i < n; i++) {
        plant();
        gw_status_t st = call_row(i);
        const char *d = gw_last_error(ctx);
        int ok = st == GW_ERR_INVALID && strstr(d, rows[i].fn) && strstr(d, rows[i].arg) &&
                 !strstr(d, "planted-earlier-failure");
        if (!ok) {
            fprintf(stderr, "row %zu: %s: %s, detail \"%s\" (expected GW_ERR_INVALID naming %s and %s)\n", i,
                    rows[i].call, gw_status_name(st), d, rows[i].fn, rows[i].arg);
            gwt_failures++;
        }
    }
    fprintf(stderr, "%zu refusals checked\n", n);

    gw_request_free(req);
    gw_rkey_destroy(rk);
    CHECK_ST(gw_ep_close(ep, 1000), GW_OK);
    gw_listener_destroy(lis);
    CHECK_ST(gw_mem_dereg(lmem), GW_OK);
    CHECK_ST(gw_mem_dereg(mem), GW_OK);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    return gwt_done("api_refusals");
}
