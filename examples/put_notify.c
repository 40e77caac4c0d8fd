/* SPDX-License-Identifier: Apache-2.0 */
/* put_notify.c - a complete two-process example of gpuwire's put with a
 * notification, using only <gpuwire.h>.
 *
 *   ./put_notify target [HOST:PORT]      listens (default 127.0.0.1:0), prints
 *                                        "listening on HOST:PORT", serves one
 *                                        initiator, then exits
 *   ./put_notify initiator HOST:PORT     connects and writes into the target
 *
 * What happens:
 *   1. the target registers a buffer that peers may write, packs its remote
 *      key, and sends the key to the initiator as an ordinary tagged message
 *      (TAG_KEY) once the initiator connected: keys are application data;
 *   2. the initiator learns the key's size with gw_probe(), receives it,
 *      unpacks it on its endpoint and reads the remote range from it;
 *   3. the initiator puts a message into the target's buffer with
 *      gw_put_notify(): the value 42 reaches the target's notification queue
 *      only after the data is in the target's memory;
 *   4. the target waits for the notification, prints what landed, and
 *      answers with a one-byte message (TAG_DONE) so the initiator knows it
 *      may close.
 * Both sides check every call; a failure prints gw_last_error() and exits 1.
 * Build: cc put_notify.c $(pkg-config --cflags --libs gpuwire)  */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpuwire.h>

#define TAG_KEY 1
#define TAG_DONE 2
#define BUF_LEN 4096
#define WAIT_MS 10000

static gw_context_t *g_ctx;

static void check(gw_status_t st, const char *what)
{
    if (st != GW_OK) {
        fprintf(stderr, "%s failed: %s (%s)\n", what, gw_status_name(st), g_ctx ? gw_last_error(g_ctx) : "");
        exit(1);
    }
}

/* Waits for a request and frees it; on failure prints the request's own detail. */
static void wait_req(gw_request_t *r, const char *what)
{
    gw_status_t st = gw_request_wait(r, WAIT_MS);
    if (st != GW_OK) {
        gw_request_info_t ri = {.size = sizeof(ri)};
        gw_request_info(r, &ri);
        fprintf(stderr, "%s failed: %s (%s)\n", what, gw_status_name(st), ri.error_detail);
        exit(1);
    }
    gw_request_free(r);
}

static int run_target(const char *bind_addr)
{
    gw_listener_t *l = NULL;
    check(gw_listen(g_ctx, bind_addr, &l), "gw_listen");
    char addr[128];
    check(gw_listener_addr(l, addr, sizeof(addr)), "gw_listener_addr");
    printf("listening on %s\n", addr);
    fflush(stdout);

    /* memory the initiator may write into */
    static char buf[BUF_LEN];
    gw_mem_t *mem = NULL;
    check(gw_mem_reg(g_ctx, buf, sizeof(buf), GW_ACCESS_REMOTE_WRITE, &mem), "gw_mem_reg");
    size_t klen = 0;
    check(gw_mem_pack_rkey(mem, NULL, &klen), "gw_mem_pack_rkey(size)"); /* buf NULL: the size */
    void *key = malloc(klen);
    check(gw_mem_pack_rkey(mem, key, &klen), "gw_mem_pack_rkey");

    gw_ep_t *ep = NULL;
    gw_status_t st = gw_accept(l, WAIT_MS, &ep);
    if (st != GW_OK) { /* say why, with what the listener saw */
        gw_listener_info_t li = {.size = sizeof(li)};
        gw_listener_query(l, &li);
        fprintf(stderr, "gw_accept: %s; %lu failed handshake(s), last: %s\n", gw_status_name(st),
                li.failed_handshakes, li.last_failure_detail);
        return 1;
    }
    /* 1. the key, as a message */
    gw_request_t *r = NULL;
    check(gw_send(ep, key, klen, NULL, TAG_KEY, &r), "gw_send(key)");
    wait_req(r, "sending the key");

    /* 4. the notification says the data is here */
    uint64_t value = 0;
    check(gw_notify_wait(ep, WAIT_MS, &value), "gw_notify_wait");
    printf("target: notification %llu, buffer holds \"%s\"\n", (unsigned long long)value, buf);
    int ok = value == 42 && strcmp(buf, "hello from the initiator") == 0;

    char done = ok ? 'y' : 'n';
    check(gw_send(ep, &done, 1, NULL, TAG_DONE, &r), "gw_send(done)");
    wait_req(r, "sending done");

    check(gw_ep_close(ep, WAIT_MS), "gw_ep_close");
    check(gw_mem_dereg(mem), "gw_mem_dereg");
    free(key);
    gw_listener_destroy(l);
    return ok ? 0 : 1;
}

static int run_initiator(const char *addr)
{
    gw_ep_t *ep = NULL;
    check(gw_connect(g_ctx, addr, &ep), "gw_connect");
    gw_ep_info_t ei = {.size = sizeof(ei)};
    check(gw_ep_query(ep, &ei), "gw_ep_query");
    printf("initiator: connected over %s (%s)\n", ei.transport, ei.path);

    /* 2. probe for the key's size, receive it, unpack it */
    gw_probe_info_t pi = {.size = sizeof(pi)};
    gw_status_t st;
    for (int waited = 0; (st = gw_probe(ep, TAG_KEY, UINT64_MAX, &pi)) == GW_INPROGRESS && waited < WAIT_MS;
         waited++)
        gw_context_wait(g_ctx, 1);
    check(st, "gw_probe(key)");
    void *key = malloc(pi.length);
    gw_request_t *r = NULL;
    check(gw_recv(ep, key, pi.length, NULL, TAG_KEY, UINT64_MAX, &r), "gw_recv(key)");
    wait_req(r, "receiving the key");
    gw_rkey_t *rkey = NULL;
    check(gw_rkey_unpack(ep, key, pi.length, &rkey), "gw_rkey_unpack");
    free(key);
    uint64_t raddr = 0;
    size_t rlen = 0;
    check(gw_rkey_range(rkey, &raddr, &rlen), "gw_rkey_range");

    /* 3. the data, then the notification */
    static const char msg[] = "hello from the initiator";
    if (sizeof(msg) > rlen) {
        fprintf(stderr, "the target's buffer (%zu bytes) is too small\n", rlen);
        return 1;
    }
    check(gw_put_notify(ep, msg, sizeof(msg), NULL, raddr, rkey, 42, &r), "gw_put_notify");
    wait_req(r, "gw_put_notify");
    printf("initiator: put %zu bytes and notification 42\n", sizeof(msg));

    /* wait for the target's word before closing */
    char done = 0;
    check(gw_recv(ep, &done, 1, NULL, TAG_DONE, UINT64_MAX, &r), "gw_recv(done)");
    wait_req(r, "receiving done");
    gw_rkey_destroy(rkey);
    check(gw_ep_close(ep, WAIT_MS), "gw_ep_close");
    printf("initiator: target says %s\n", done == 'y' ? "all good" : "the data was wrong");
    return done == 'y' ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc < 2 || (strcmp(argv[1], "target") && strcmp(argv[1], "initiator")) ||
        (!strcmp(argv[1], "initiator") && argc < 3)) {
        fprintf(stderr, "usage: %s target [HOST:PORT] | initiator HOST:PORT\n", argv[0]);
        return 2;
    }
    check(gw_context_create(NULL, &g_ctx), "gw_context_create");
    int rc = !strcmp(argv[1], "target") ? run_target(argc > 2 ? argv[2] : "127.0.0.1:0") : run_initiator(argv[2]);
    check(gw_context_destroy(g_ctx), "gw_context_destroy");
    return rc;
}
