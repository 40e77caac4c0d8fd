/* SPDX-License-Identifier: Apache-2.0 */
/* verbs_gpu_staged.c SERVER_DEV CLIENT_DEV - GPU memory on the staging rung
 * over verbs (Soft-RoCE in the guest, the fake CUDA driver: its device memory
 * is PROT_NONE and rxe really refuses to register it, so regions land on the
 * staging rung honestly), between two processes.
 *
 * The server (owner) registers a staged GPU region G, a host region H, a
 * read-only staged region R and a staged region D it deregisters on demand.
 * The client (initiator) has a staged GPU buffer L and a host buffer HL and
 * drives everything; the server verifies what landed in its memory and
 * answers over tagged messages.
 *   put / get / put_notify: staged->staged, staged->host MR, host->staged, at
 *   1 B, 4097 B, 1 MiB + 13 (not a chunk multiple), 64 MiB (staged<->staged;
 *   8 MiB + 1 for the others), odd remote offsets
 *   untracked puts + flush; notification order after a staged put
 *   send/recv eager and rendezvous, GPU<->GPU, GPU->host, host->GPU, both
 *   directions, expected and unexpected
 *   errors: forged out-of-range and write-to-read-only keys (the owner
 *   refuses: GW_ERR_OUT_OF_BOUNDS / GW_ERR_ACCESS), a deregistered region
 *   (GW_ERR_INVALID_KEY), the owner dying mid-transfer (bounded failure),
 *   an initiator dying while the owner serves its chunks (the owner's
 *   endpoint fails, the region deregisters, the context closes: no hang);
 *   while that failed endpoint is still open, another initiator's put into
 *   the region goes through: the dead endpoint's queue pairs are drained and
 *   the bounce slots they held return to the owner's engine.
 * Skips (77) without GPUWIRE_CUDA_LIB or an RDMA device. */
#include <stdlib.h>
#include <unistd.h>

#include "cuda/cuda_wrap.h"
#include "harness.h"
#include "mem/mem.h"

#define MB (1u << 20)
#define REGION (64u * MB + 65536)
#define SMALL (1u * MB)

enum { T_CMD = 1000, T_REPLY = 1001, T_DATA = 7, T_KEYS = 10 };
enum { CMD_VERIFY = 1, CMD_FILL, CMD_RECV, CMD_SEND, CMD_DEREG_D, CMD_DIE, CMD_DONE };
enum { RG = 0, RH, RR, RD, NREG }; /* server regions */

typedef struct cmd {
    uint32_t op, region;  /* region: RG/RH, or for RECV/SEND 0 GPU, 1 host */
    uint64_t off, len, seed, notify, late;
} cmd_t;

static gwt_chan_t pch, cch, pch2, cch2, pch3, cch3;
static const char *sdev = "", *cdev = "";
static const gw_cuda_t *cu;

static void *dev_alloc(size_t n)
{
    CUdeviceptr p;
    REQUIRE(cu->cuMemAlloc(&p, n) == CUDA_SUCCESS);
    return (void *)(uintptr_t)p;
}

static void fill_any(void *buf, int gpu, size_t n, uint64_t seed)
{
    if (!gpu) {
        gwt_fill(buf, n, seed);
        return;
    }
    uint8_t *h = malloc(n ? n : 1);
    gwt_fill(h, n, seed);
    REQUIRE(cu->cuMemcpyHtoD((CUdeviceptr)(uintptr_t)buf, h, n) == CUDA_SUCCESS);
    free(h);
}

static long long verify_any(const void *buf, int gpu, size_t n, uint64_t seed)
{
    if (!gpu)
        return gwt_verify(buf, n, seed);
    uint8_t *h = malloc(n ? n : 1);
    REQUIRE(cu->cuMemcpyDtoH(h, (CUdeviceptr)(uintptr_t)buf, n) == CUDA_SUCCESS);
    long long r = gwt_verify(h, n, seed);
    free(h);
    return r;
}

static gw_status_t wait_st(gw_request_t *r, int ms)
{
    gw_status_t st = gw_request_wait(r, ms);
    gw_request_free(r);
    return st;
}

static void msg_send(gw_ep_t *ep, const void *b, size_t n, uint64_t tag)
{
    gw_request_t *r;
    REQUIRE_OK(gw_send(ep, b, n, NULL, tag, &r));
    REQUIRE_OK(wait_st(r, 30000));
}

static void msg_recv(gw_ep_t *ep, void *b, size_t n, uint64_t tag)
{
    gw_request_t *r;
    REQUIRE_OK(gw_recv(ep, b, n, NULL, tag, ~0ull, &r));
    REQUIRE_OK(wait_st(r, 60000));
}

/* ---- server (owner of the staged regions) -------------------------------------------- */
static int server(void *arg)
{
    (void)arg;
    setenv("GPUWIRE_IB_DEVICE", sdev, 1);
    char why[256];
    cu = gw_cuda_get(why, sizeof(why));
    REQUIRE(cu != NULL);
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    gw_listener_t *l;
    gw_ep_t *ep = gwt_listen_accept(ctx, &cch, &l);
    void *gbuf = dev_alloc(REGION), *rbuf = dev_alloc(SMALL), *dbuf = dev_alloc(SMALL);
    uint8_t *hbuf = malloc(REGION);
    void *addr[NREG] = {gbuf, hbuf, rbuf, dbuf};
    size_t len[NREG] = {REGION, REGION, SMALL, SMALL};
    unsigned acc[NREG] = {GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE,
                          GW_ACCESS_REMOTE_READ, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE};
    gw_mem_t *m[NREG];
    for (int i = 0; i < NREG; i++) {
        fill_any(addr[i], i != RH, len[i], 100 + (uint64_t)i);
        REQUIRE_OK(gw_mem_reg(ctx, addr[i], len[i], acc[i], &m[i]));
        gwt_send_rkey(ep, m[i], T_KEYS + (uint64_t)i);
    }
    gw_mem_info_t mi = {.size = sizeof(mi)};
    gw_mem_query(m[RG], &mi);
    fprintf(stderr, "server G: %s\n", mi.path);
    CHECK(strstr(mi.path, "verbs: staging") != NULL);
    /* receive buffers for tagged messages */
    void *grecv = dev_alloc(8 * MB);
    uint8_t *hrecv = malloc(8 * MB);
    gw_mem_t *mg, *mh;
    REQUIRE_OK(gw_mem_reg(ctx, grecv, 8 * MB, GW_ACCESS_LOCAL, &mg));
    REQUIRE_OK(gw_mem_reg(ctx, hrecv, 8 * MB, GW_ACCESS_LOCAL, &mh));
    for (;;) {
        cmd_t c;
        msg_recv(ep, &c, sizeof(c), T_CMD);
        int32_t res = 1;
        gw_request_t *r;
        switch (c.op) {
        case CMD_VERIFY:
            if (c.notify) {
                uint64_t v = 0;
                gw_status_t st = gw_notify_wait(ep, 30000, &v);
                if (st != GW_OK || v != c.notify) {
                    fprintf(stderr, "notify: %s, value %llu (want %llu)\n", gw_status_name(st),
                            (unsigned long long)v, (unsigned long long)c.notify);
                    res = 0;
                }
            }
            if (verify_any((uint8_t *)addr[c.region] + c.off, c.region != RH, c.len, c.seed) != -1)
                res = 0;
            break;
        case CMD_FILL:
            fill_any((uint8_t *)addr[c.region] + c.off, c.region != RH, c.len, c.seed);
            break;
        case CMD_RECV: {
            void *b = c.region ? (void *)hrecv : grecv;
            if (c.late) /* let the message arrive first: unexpected */
                for (int i = 0; i < 50; i++) {
                    gw_progress(ctx);
                    usleep(2000);
                }
            REQUIRE_OK(gw_recv(ep, b, 8 * MB, c.region ? mh : mg, T_DATA, ~0ull, &r));
            gw_status_t st = gw_request_wait(r, 60000);
            gw_request_info_t ri = {.size = sizeof(ri)};
            gw_request_info(r, &ri);
            gw_request_free(r);
            if (st != GW_OK || ri.length != c.len || verify_any(b, !c.region, c.len, c.seed) != -1) {
                fprintf(stderr, "recv %llu into %s: %s, length %zu\n", (unsigned long long)c.len,
                        c.region ? "host" : "GPU", gw_status_name(st), ri.length);
                res = 0;
            }
            break;
        }
        case CMD_SEND: {
            void *b = c.region ? (void *)hrecv : grecv;
            fill_any(b, !c.region, c.len, c.seed);
            REQUIRE_OK(gw_send(ep, b, c.len, c.region ? mh : mg, T_DATA, &r));
            gw_status_t st = wait_st(r, 60000);
            if (st != GW_OK) {
                fprintf(stderr, "send %llu from %s: %s: %s\n", (unsigned long long)c.len,
                        c.region ? "host" : "GPU", gw_status_name(st), gw_last_error(ctx));
                res = 0;
            }
            break;
        }
        case CMD_DEREG_D:
            res = gw_mem_dereg(m[RD]) == GW_OK;
            m[RD] = NULL;
            break;
        case CMD_DIE:
            _exit(0); /* mid-transfer: the client's get must fail, not hang */
        case CMD_DONE:
            break;
        default:
            res = 0;
        }
        if (c.op == CMD_DONE)
            break;
        msg_send(ep, &res, sizeof(res), T_REPLY);
    }
    gw_ep_close(ep, 1000);
    gw_listener_destroy(l);
    gw_mem_dereg(mg);
    gw_mem_dereg(mh);
    for (int i = 0; i < NREG; i++)
        CHECK_ST(gw_mem_dereg(m[i]), GW_OK);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    return gwt_done("verbs_gpu_staged server");
}

/* ---- an initiator that dies in the middle of a staged put ------------------------------------ */
/* A second initiator (a child process): connects to the owner whose address
 * comes over chan and receives the region's key.  NULL when the main test
 * ended before sending the address. */
static gw_ep_t *connect_initiator(gwt_chan_t *chan, gw_context_t **c, gw_rkey_t **k, uint64_t *b)
{
    char addr[80];
    if (gwt_chan_recv(chan, addr, sizeof(addr), 240000) <= 0)
        return NULL;
    setenv("GPUWIRE_IB_DEVICE", sdev, 1); /* (the owner is on the client's device: rxea<->rxeb too) */
    REQUIRE_OK(gw_context_create(NULL, c));
    gw_ep_t *e;
    REQUIRE_OK(gw_connect(*c, addr, &e));
    *k = gwt_recv_rkey(e, T_KEYS, b);
    return e;
}

static int dier(void *arg)
{
    (void)arg;
    char why[256];
    gw_context_t *c;
    gw_rkey_t *k;
    uint64_t b;
    gw_ep_t *e = connect_initiator(&cch2, &c, &k, &b);
    if (!e)
        return 0; /* the main test ended early */
    cu = gw_cuda_get(why, sizeof(why));
    REQUIRE(cu != NULL);
    void *src = dev_alloc(32 * MB);
    gw_mem_t *m;
    REQUIRE_OK(gw_mem_reg(c, src, 32 * MB, GW_ACCESS_LOCAL, &m));
    REQUIRE_OK(gw_put(e, src, 32 * MB, m, b, k, NULL));
    for (int i = 0; i < 20; i++) { /* chunks go out and the owner starts reading them: it is mid-READ
                                    * when this process exits (its bounce slots get parked) */
        gw_progress(c);
        usleep(200);
    }
    _exit(0);
}

/* ---- a healthy initiator: puts host memory into the staged region, says done -------------- */
static int putter(void *arg)
{
    (void)arg;
    gw_context_t *c;
    gw_rkey_t *k;
    uint64_t b;
    gw_ep_t *e = connect_initiator(&cch3, &c, &k, &b);
    if (!e)
        return 0;
    uint8_t *src = malloc(8 * MB);
    gwt_fill(src, 8 * MB, 77);
    gw_request_t *r;
    REQUIRE_OK(gw_put(e, src, 8 * MB, NULL, b, k, &r));
    gw_status_t st = gw_request_wait(r, 20000);
    gw_request_free(r);
    if (st != GW_OK)
        fprintf(stderr, "putter: %s: %s\n", gw_status_name(st), gw_last_error(c));
    msg_send(e, &st, sizeof(st), T_REPLY);
    gw_rkey_destroy(k);
    gw_ep_close(e, 2000);
    gw_context_destroy(c);
    free(src);
    return st == GW_OK ? 0 : 1;
}

/* ---- client (initiator) -------------------------------------------------------------------- */
static gw_ep_t *ep;
static gw_context_t *ctx;
static uint64_t t_start;

static double elapsed(void) { return (double)(gw_now_ns() - t_start) / 1e9; }

static int command(const cmd_t *c)
{
    msg_send(ep, c, sizeof(*c), T_CMD);
    int32_t res = 0;
    msg_recv(ep, &res, sizeof(res), T_REPLY);
    return res;
}

static void op_ok(gw_status_t st, gw_request_t **r, const char *what, size_t n)
{
    if (st == GW_OK)
        st = wait_st(*r, 60000);
    if (st != GW_OK) {
        fprintf(stderr, "FAIL %s(%zu): %s: %s\n", what, n, gw_status_name(st), gw_last_error(ctx));
        gwt_failures++;
    }
}

int main(int argc, char **argv)
{
    if (argc < 3)
        SKIP("usage: verbs_gpu_staged SERVER_DEV CLIENT_DEV (run in the rxe guest)");
    if (!getenv("GPUWIRE_CUDA_LIB"))
        SKIP("GPUWIRE_CUDA_LIB (the fake CUDA driver) not set");
    sdev = argv[1];
    cdev = argv[2];
    setenv("GPUWIRE_TRANSPORTS", "verbs", 1);
    setenv("GPUWIRE_STAGING_CHUNK", "256K", 1); /* several chunks in flight even at 1 MiB */
    t_start = gw_now_ns();
    gwt_chan_pair(&pch, &cch);
    gwt_chan_pair(&pch2, &cch2);
    int pid = gwt_spawn(server, NULL); /* (CUDA is initialised after the forks) */
    int pid2 = gwt_spawn(dier, NULL);
    char why[256];
    cu = gw_cuda_get(why, sizeof(why));
    if (!cu)
        SKIP("fake CUDA driver not loaded: %s", why);
    setenv("GPUWIRE_IB_DEVICE", cdev, 1);
    char addr[80];
    REQUIRE(gwt_chan_recv(&pch, addr, sizeof(addr), 20000) > 0);
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    REQUIRE_OK(gw_connect(ctx, addr, &ep));
    gw_rkey_t *rk[NREG];
    uint64_t base[NREG];
    for (int i = 0; i < NREG; i++)
        rk[i] = gwt_recv_rkey(ep, T_KEYS + (uint64_t)i, &base[i]);
    void *lbuf = dev_alloc(REGION);
    uint8_t *hl = malloc(REGION);
    gw_mem_t *ml, *mhl;
    REQUIRE_OK(gw_mem_reg(ctx, lbuf, REGION, GW_ACCESS_LOCAL, &ml));
    REQUIRE_OK(gw_mem_reg(ctx, hl, REGION, GW_ACCESS_LOCAL, &mhl));
    gw_request_t *r;
    fprintf(stderr, "[%.1fs] set up\n", elapsed());

    /* get: the server filled G with seed 100, H with seed 101 */
    static const size_t sizes[] = {1, 4097, MB + 13, 64 * MB};
    struct { int lgpu, reg; const char *name; } combos[] = {
        {1, RG, "staged->staged"}, {1, RH, "staged<-host MR"}, {0, RG, "host<-staged"}};
    for (size_t k = 0; k < 3; k++) {
        for (size_t i = 0; i < 4; i++) {
            size_t n = i == 3 && k ? 8 * MB + 1 : sizes[i]; /* 64 MiB: staged->staged only (time) */
            void *dst = combos[k].lgpu ? lbuf : (void *)hl;
            op_ok(gw_get(ep, dst, n, combos[k].lgpu ? ml : mhl, base[combos[k].reg], rk[combos[k].reg], &r), &r,
                  combos[k].name, n);
            if (verify_any(dst, combos[k].lgpu, n, 100 + (uint64_t)combos[k].reg) != -1) {
                fprintf(stderr, "FAIL get %s %zu: payload differs\n", combos[k].name, n);
                gwt_failures++;
            }
        }
        fprintf(stderr, "[%.1fs] get %s: done\n", elapsed(), combos[k].name);
    }
    /* put (odd remote offset 3), verified by the owner; every other one with a notification */
    uint64_t seed = 1000;
    for (size_t k = 0; k < 3; k++) {
        for (size_t i = 0; i < 4; i++) {
            size_t n = i == 3 && k ? 8 * MB + 1 : sizes[i];
            int lg = combos[k].lgpu;
            void *src = lg ? lbuf : (void *)hl;
            fill_any(src, lg, n, ++seed);
            cmd_t c = {.op = CMD_VERIFY, .region = (uint32_t)combos[k].reg, .off = 3, .len = n, .seed = seed};
            if (i % 2) {
                c.notify = seed;
                /* untracked: only the notification says the data is there */
                CHECK_ST(gw_put_notify(ep, src, n, lg ? ml : mhl, base[c.region] + 3, rk[c.region], seed, NULL),
                         GW_OK);
            } else {
                op_ok(gw_put(ep, src, n, lg ? ml : mhl, base[c.region] + 3, rk[c.region], &r), &r, combos[k].name,
                      n);
            }
            if (!command(&c)) {
                fprintf(stderr, "FAIL put %s %zu%s: the owner's memory differs\n", combos[k].name, n,
                        c.notify ? " (notify)" : "");
                gwt_failures++;
            }
        }
        fprintf(stderr, "[%.1fs] put %s: done\n", elapsed(), combos[k].name);
    }
    /* untracked staged puts, then flush */
    for (int i = 0; i < 4; i++) {
        fill_any((uint8_t *)lbuf + (size_t)i * 2 * MB, 1, 2 * MB - 7, 2000 + (uint64_t)i);
        CHECK_ST(gw_put(ep, (uint8_t *)lbuf + (size_t)i * 2 * MB, 2 * MB - 7, ml, base[RG] + (uint64_t)i * 2 * MB,
                        rk[RG], NULL), GW_OK);
    }
    REQUIRE_OK(gw_flush(ep, &r));
    op_ok(GW_OK, &r, "flush", 0);
    for (int i = 0; i < 4; i++) {
        cmd_t c = {.op = CMD_VERIFY, .region = RG, .off = (uint64_t)i * 2 * MB, .len = 2 * MB - 7,
                   .seed = 2000 + (uint64_t)i};
        if (!command(&c)) {
            fprintf(stderr, "FAIL untracked put %d + flush\n", i);
            gwt_failures++;
        }
    }
    /* order: a large staged put, then a 1-byte put_notify to host memory: the
     * notification may only arrive once the staged data is in GPU memory */
    fill_any(lbuf, 1, 16 * MB, 3000);
    fill_any(hl, 0, 1, 3001);
    CHECK_ST(gw_put(ep, lbuf, 16 * MB, ml, base[RG], rk[RG], NULL), GW_OK);
    CHECK_ST(gw_put_notify(ep, hl, 1, mhl, base[RH], rk[RH], 77, NULL), GW_OK);
    {
        cmd_t c = {.op = CMD_VERIFY, .region = RG, .off = 0, .len = 16 * MB, .seed = 3000, .notify = 77};
        if (!command(&c)) {
            fprintf(stderr, "FAIL notification overtook the staged put before it\n");
            gwt_failures++;
        }
    }
    fprintf(stderr, "[%.1fs] flush and order: done\n", elapsed());

    /* tagged messages: eager 1000 B and rendezvous 3 MiB + 5, both ways */
    static const size_t msz[] = {1000, 3 * MB + 5};
    for (int srv_host = 0; srv_host < 2; srv_host++) {
        for (int cli_host = 0; cli_host < 2; cli_host++) {
            if (srv_host && cli_host)
                continue; /* host<->host is verbs_api's */
            for (int i = 0; i < 2; i++) {
                size_t n = msz[i];
                /* client -> server (server receives into GPU or host; every other one posted late) */
                void *src = cli_host ? (void *)hl : lbuf;
                fill_any(src, !cli_host, n, ++seed);
                cmd_t c = {.op = CMD_RECV, .region = (uint32_t)srv_host, .len = n, .seed = seed, .late = (uint64_t)i};
                msg_send(ep, &c, sizeof(c), T_CMD);
                op_ok(gw_send(ep, src, n, cli_host ? mhl : ml, T_DATA, &r), &r, "send", n);
                int32_t res = 0;
                msg_recv(ep, &res, sizeof(res), T_REPLY);
                if (!res) {
                    fprintf(stderr, "FAIL send %zu %s -> %s\n", n, cli_host ? "host" : "GPU", srv_host ? "host" : "GPU");
                    gwt_failures++;
                }
                /* server -> client */
                c = (cmd_t){.op = CMD_SEND, .region = (uint32_t)srv_host, .len = n, .seed = ++seed};
                msg_send(ep, &c, sizeof(c), T_CMD);
                void *dst = cli_host ? (void *)hl : lbuf;
                gw_request_t *rr;
                REQUIRE_OK(gw_recv(ep, dst, 8 * MB, cli_host ? mhl : ml, T_DATA, ~0ull, &rr));
                gw_status_t st = gw_request_wait(rr, 60000);
                gw_request_info_t ri = {.size = sizeof(ri)};
                gw_request_info(rr, &ri);
                gw_request_free(rr);
                msg_recv(ep, &res, sizeof(res), T_REPLY);
                if (st != GW_OK || ri.length != n || !res || verify_any(dst, !cli_host, n, seed) != -1) {
                    fprintf(stderr, "FAIL recv %zu %s <- %s: %s\n", n, cli_host ? "host" : "GPU",
                            srv_host ? "host" : "GPU", gw_status_name(st));
                    gwt_failures++;
                }
            }
        }
    }
    fprintf(stderr, "[%.1fs] send/recv: done\n", elapsed());

    /* errors the api layer catches from the key, then the same with a forged
     * key that only the owner can refuse */
    CHECK_ST(gw_put(ep, lbuf, 4096, ml, base[RG] + REGION - 100, rk[RG], NULL), GW_ERR_OUT_OF_BOUNDS);
    CHECK_ST(gw_put(ep, lbuf, 10, ml, base[RR], rk[RR], NULL), GW_ERR_ACCESS);
    rk[RG]->len += 1 * MB; /* forged: the owner knows better */
    REQUIRE_OK(gw_put(ep, lbuf, 4096, ml, base[RG] + REGION - 100, rk[RG], &r));
    CHECK_ST(wait_st(r, 30000), GW_ERR_OUT_OF_BOUNDS);
    fprintf(stderr, "forged range: %s\n", gw_last_error(ctx));
    REQUIRE_OK(gw_get(ep, hl, 4096, mhl, base[RG] + REGION - 100, rk[RG], &r));
    CHECK_ST(wait_st(r, 30000), GW_ERR_OUT_OF_BOUNDS);
    rk[RG]->len -= 1 * MB;
    rk[RR]->access |= GW_ACCESS_REMOTE_WRITE;
    REQUIRE_OK(gw_put(ep, hl, 10, mhl, base[RR], rk[RR], &r));
    CHECK_ST(wait_st(r, 30000), GW_ERR_ACCESS);
    fprintf(stderr, "forged access: %s\n", gw_last_error(ctx));
    {
        cmd_t c = {.op = CMD_VERIFY, .region = RR, .off = 0, .len = SMALL, .seed = 102};
        CHECK(command(&c)); /* untouched */
    }
    /* dereg'd region: the key is revoked */
    op_ok(gw_get(ep, lbuf, 4096, ml, base[RD], rk[RD], &r), &r, "get before dereg", 4096);
    {
        cmd_t c = {.op = CMD_DEREG_D};
        CHECK(command(&c));
    }
    REQUIRE_OK(gw_put(ep, lbuf, 4096, ml, base[RD], rk[RD], &r));
    CHECK_ST(wait_st(r, 30000), GW_ERR_INVALID_KEY);
    fprintf(stderr, "revoked: %s\n", gw_last_error(ctx));
    /* the endpoint is still healthy after refusals */
    op_ok(gw_get(ep, lbuf, 5000, ml, base[RG], rk[RG], &r), &r, "get after refusals", 5000);

    gw_ep_info_t ei = {.size = sizeof(ei)};
    gw_ep_query(ep, &ei);
    fprintf(stderr, "endpoint: %s\n", ei.path);
    CHECK(strstr(ei.path, "staging rung") != NULL);

    fprintf(stderr, "[%.1fs] errors: done\n", elapsed());
    /* the owner dies while a 32 MiB staged get is in flight: bounded failure */
    {
        cmd_t c = {.op = CMD_DIE};
        msg_send(ep, &c, sizeof(c), T_CMD);
        REQUIRE_OK(gw_get(ep, lbuf, 32 * MB, ml, base[RG], rk[RG], &r));
        uint64_t t0 = gw_now_ns();
        gw_status_t st = wait_st(r, 60000);
        double s = (double)(gw_now_ns() - t0) / 1e9;
        fprintf(stderr, "owner died: %s after %.1f s: %s\n", gw_status_name(st), s, gw_last_error(ctx));
        CHECK(st != GW_OK && st != GW_ERR_TIMEOUT);
    }
    for (int i = 0; i < NREG; i++)
        gw_rkey_destroy(rk[i]);
    gw_ep_close(ep, 1000);
    CHECK_ST(gw_mem_dereg(ml), GW_OK);
    CHECK_ST(gw_mem_dereg(mhl), GW_OK);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    CHECK(gwt_wait(pid, 30) == 0);

    /* this process owns a staged region; the initiator dies mid-put */
    {
        REQUIRE_OK(gw_context_create(NULL, &ctx));
        gw_listener_t *l;
        gw_ep_t *e = gwt_listen_accept(ctx, &pch2, &l);
        REQUIRE_OK(gw_mem_reg(ctx, lbuf, REGION, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, &ml));
        gwt_send_rkey(e, ml, T_KEYS);
        gw_ep_info_t info = {.size = sizeof(info)};
        uint64_t t0 = gw_now_ns();
        do {
            gw_progress(ctx);
            gw_ep_query(e, &info);
        } while (info.error == GW_OK && gw_now_ns() - t0 < 30000000000ull);
        fprintf(stderr, "initiator died: owner's endpoint %s after %.1f s: %s\n", gw_status_name(info.error),
                (double)(gw_now_ns() - t0) / 1e9, info.error_detail);
        fprintf(stderr, "owner's endpoint: %s\n", info.path);
        CHECK(info.error != GW_OK);
        /* the failed endpoint stays open; another initiator puts 8 MiB into the region */
        gwt_chan_pair(&pch3, &cch3);
        int pid3 = gwt_spawn(putter, NULL);
        char a[80];
        REQUIRE_OK(gw_listener_addr(l, a, sizeof(a)));
        gwt_chan_send(&pch3, a, (uint32_t)strlen(a) + 1);
        gw_ep_t *e3;
        REQUIRE_OK(gw_accept(l, 20000, &e3));
        gwt_send_rkey(e3, ml, T_KEYS);
        gw_status_t pst = GW_ERR_TIMEOUT;
        gw_request_t *pr;
        REQUIRE_OK(gw_recv(e3, &pst, sizeof(pst), NULL, T_REPLY, ~0ull, &pr));
        CHECK_ST(gw_request_wait(pr, 30000), GW_OK);
        gw_request_free(pr);
        fprintf(stderr, "a put beside the failed endpoint: %s\n", gw_status_name(pst));
        gw_ep_query(e, &info);
        fprintf(stderr, "the failed endpoint now: %s\n", info.path);
        /* slots parked at the failure (the owner was reading from the dying
         * initiator) were given back by the drain, not held until the close */
        CHECK(strstr(info.path, "slots parked") == NULL || strstr(info.path, "failed: 0 bounce slots parked") != NULL);
        CHECK_ST(pst, GW_OK);
        CHECK(verify_any(lbuf, 1, 8 * MB, 77) == -1);
        CHECK(gwt_wait(pid3, 30) == 0);
        gw_ep_close(e3, 1000);
        gw_ep_close(e, 1000);
        CHECK_ST(gw_mem_dereg(ml), GW_OK);
        gw_listener_destroy(l);
        CHECK_ST(gw_context_destroy(ctx), GW_OK);
        CHECK(gwt_wait(pid2, 30) == 0);
    }
    free(hl);
    return gwt_done("verbs_gpu_staged");
}
