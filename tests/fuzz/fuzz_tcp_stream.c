/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_tcp_stream.c - libFuzzer target for the tcp transport's frame stream:
 * what a connected peer can send after a completed handshake.
 *
 * A server context runs in a thread of its own (contexts are independent):
 * it listens on 127.0.0.1, accepts every endpoint, keeps two receives posted
 * on each, drains notifications, and closes endpoints that fail.  It
 * registers a 1 MiB region with remote read and write.  For each input the
 * fuzzer connects a raw socket, completes the handshake itself (HELLO with
 * one tcp stream, CONFIRM), then writes frames built from the input and
 * closes.  Inputs whose first byte is even are written as they are; odd ones
 * are read as records that become well-formed headers (valid magic, version
 * and type; keys and addresses that often name the real region; payloads of
 * the stated length), so the fuzzer spends its time in the frame handlers. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "bootstrap/wire.h"
#include "core/util.h"
#include "gpuwire.h"
#include "raw_peer.h"
#include "transport/base/tl.h"
#include "transport/tcp/tcp.h"

#define REGION (1u << 20)
#define MAX_EPS 64
#define RX_LEN 65536

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static int g_ready;
static struct sockaddr_in g_sa;
static uint64_t g_region_id, g_region_addr;

typedef struct srv_ep {
    gw_ep_t *ep;
    gw_request_t *rx[2];
    uint8_t *buf;
} srv_ep_t;

static void post_rx(srv_ep_t *s, int i)
{
    if (gw_recv(s->ep, s->buf + (size_t)i * RX_LEN, RX_LEN, NULL, 0, 0, &s->rx[i]) != GW_OK)
        s->rx[i] = NULL;
}

static void *server(void *arg)
{
    (void)arg;
    gw_context_t *ctx = NULL;
    gw_listener_t *l = NULL;
    gw_mem_t *mem = NULL;
    if (gw_context_create(NULL, &ctx) != GW_OK || gw_listen(ctx, "127.0.0.1:0", &l) != GW_OK)
        abort();
    uint8_t *region = aligned_alloc(4096, REGION);
    if (!region || gw_mem_reg(ctx, region, REGION, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE,
                              &mem) != GW_OK)
        abort();
    uint8_t key[GW_RKEY_MAX_LEN];
    size_t klen = sizeof(key);
    gw_rkey_wire_t w;
    char why[256], addr[80];
    if (gw_mem_pack_rkey(mem, key, &klen) != GW_OK ||
        gw_rkey_decode(key, klen, &w, why, sizeof(why)) != GW_OK ||
        gw_listener_addr(l, addr, sizeof(addr)) != GW_OK)
        abort();
    char *colon = strrchr(addr, ':');
    *colon = '\0';
    g_sa.sin_family = AF_INET;
    g_sa.sin_port = htons((uint16_t)atoi(colon + 1));
    inet_pton(AF_INET, addr, &g_sa.sin_addr);
    pthread_mutex_lock(&g_mu);
    g_region_id = w.id;
    g_region_addr = w.addr;
    g_ready = 1;
    pthread_cond_signal(&g_cv);
    pthread_mutex_unlock(&g_mu);

    static srv_ep_t eps[MAX_EPS];
    int n = 0;
    for (;;) {
        gw_ep_t *ep = NULL;
        while (n < MAX_EPS && gw_accept(l, 0, &ep) == GW_OK) {
            srv_ep_t *s = &eps[n++];
            s->ep = ep;
            s->buf = malloc(2 * RX_LEN);
            post_rx(s, 0);
            post_rx(s, 1);
        }
        if (gw_progress(ctx) == 0)
            gw_context_wait(ctx, 5);
        for (int i = 0; i < n; i++) {
            srv_ep_t *s = &eps[i];
            uint64_t v;
            while (gw_notify_wait(s->ep, 0, &v) == GW_OK)
                ;
            for (int k = 0; k < 2; k++) {
                if (s->rx[k] && gw_request_test(s->rx[k]) != GW_INPROGRESS) {
                    gw_request_free(s->rx[k]);
                    s->rx[k] = NULL;
                    post_rx(s, k);
                }
            }
            gw_ep_info_t info = {.size = sizeof(info)};
            if (gw_ep_query(s->ep, &info) == GW_OK && info.error == GW_OK)
                continue;
            /* failed (the fuzzer closed, or sent something wrong): close it */
            gw_ep_close(s->ep, 0);
            gw_request_free(s->rx[0]);
            gw_request_free(s->rx[1]);
            free(s->buf);
            eps[i--] = eps[--n];
        }
    }
    return NULL;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    setenv("GPUWIRE_TRANSPORTS", "tcp", 1);
    setenv("GPUWIRE_LOG_LEVEL", "error", 1); /* protocol errors are expected: keep quiet */
    setenv("GPUWIRE_CONNECT_TIMEOUT_MS", "2000", 1);
    pthread_t th;
    if (pthread_create(&th, NULL, server, NULL) != 0)
        abort();
    pthread_mutex_lock(&g_mu);
    while (!g_ready)
        pthread_cond_wait(&g_cv, &g_mu);
    pthread_mutex_unlock(&g_mu);
    return 0;
}

/* Connects and completes the handshake as a one-stream tcp client. */
static int handshake(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct timeval tv = {.tv_sec = 2};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd, (struct sockaddr *)&g_sa, sizeof(g_sa)) != 0 || gwt_raw_tcp_handshake(fd) != 0)
        goto fail;
    return fd;
fail:
    close(fd);
    return -1;
}

static uint8_t g_out[1 << 20];

/* Turns records of the input into well-formed frames. */
static size_t structured(const uint8_t *d, size_t n)
{
    size_t o = 0, i = 0;
    while (i + 16 <= n && o + GW_TCP_HDR + 65536 <= sizeof(g_out)) {
        const uint8_t *r = d + i;
        i += 16;
        gw_tcp_hdr_t h;
        memset(&h, 0, sizeof(h));
        h.type = (uint8_t)(GW_TCP_PUT + r[0] % GW_TCP_FRAME_MAX);
        h.flags = r[1] & 1;
        h.aux = -(int32_t)(r[2] & 0x3f);
        h.id = (r[3] & 0x80) ? gw_get_u32(r + 4) : (uint64_t)(r[3] & 7);
        h.key = (r[3] & 1) ? g_region_id : gw_get_u64(r + 8);
        uint32_t off = gw_get_u32(r + 8) % (REGION + 4096);
        h.addr = (r[3] & 2) ? g_region_addr + off : (r[3] & 4) ? off : gw_get_u64(r + 4);
        h.len = (r[1] & 0x80) ? gw_get_u16(r + 12) : (uint64_t)(r[12] & 0x3f);
        if (r[1] & 0x40)
            h.len = gw_get_u64(r + 8); /* absurd lengths too */
        h.val = gw_get_u16(r + 14);
        gw_tcp_hdr_encode(g_out + o, &h);
        o += GW_TCP_HDR;
        int payload = h.type == GW_TCP_PUT || h.type == GW_TCP_GET_RESP || h.type == GW_TCP_EAGER ||
                      h.type == GW_TCP_RDATA || h.type == GW_TCP_AM;
        if (payload && h.len <= 65536) {
            size_t take = n - i < h.len ? n - i : (size_t)h.len;
            memcpy(g_out + o, d + i, take);
            memset(g_out + o + take, 0xA5, (size_t)h.len - take);
            o += (size_t)h.len;
            i += take;
        }
    }
    return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    int fd = handshake();
    if (fd < 0) {
        static int warned;
        if (!warned++)
            fprintf(stderr, "fuzz_tcp_stream: the handshake with the server failed\n");
        return 0;
    }
    const uint8_t *out = data + 1;
    size_t len = size - 1;
    if (data[0] & 1) {
        len = structured(data + 1, size - 1);
        out = g_out;
    }
    if (len)
        (void)!send(fd, out, len, MSG_NOSIGNAL);
    shutdown(fd, SHUT_WR);
    /* let the server react (answers, errors) before the next input */
    uint8_t sink[65536];
    struct timeval tv = {.tv_usec = 20000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    for (int k = 0; k < 64 && recv(fd, sink, sizeof(sink), 0) > 0; k++)
        ;
    close(fd);
    return 0;
}
