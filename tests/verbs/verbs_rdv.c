/* SPDX-License-Identifier: Apache-2.0 */
/* verbs_rdv.c - the rendezvous protocols of tagged messages over verbs, with
 * every combination of peers that can meet:
 *
 *   verbs_rdv [SERVER_DEV CLIENT_DEV]    e.g. rxe0 rxe0 (loopback) or rxea rxeb
 *
 * For each mode a fresh server process (the receiver) and a fresh client
 * context (the sender) connect; the client sends a fixed list of messages
 * (just above the eager limit to 7 MiB, odd sizes, one truncated, eight in
 * flight at once) into the server's region registered for remote writes and
 * into a buffer without a registration, all from a registered buffer (so
 * eager messages above the inline size go without a copy: two SGEs, counted
 * in the sender's endpoint path; between two sides announcing it, the
 * eager messages go without a header, SEND_WITH_IMM with the tag in the
 * immediate, counted there too); the server checks every byte, that
 * the bytes after a truncated receive are untouched, and how each receive
 * came (its endpoint's counters: by the sender's WRITE or by its own READ):
 *   imm     both sides of this build: WRITE for every registered receive,
 *           striped from GPUWIRE_IB_SPLIT_MIN, ended by WRITE_WITH_IMM
 *   q1      the same with one queue pair (the end marks on QP 0 only)
 *   oldrecv the receiver announces only the WFIN write (as a build before
 *           the striped write): WRITE below SPLIT_MIN, READ above
 *   oldsend the sender announces only the WFIN write: the same
 *   none    neither announces a write rendezvous: READ only
 *   read    GPUWIRE_IB_RDV=read on the receiver: READ only
 * GW_TEST_VERBS_FEATURES is the test hook that masks what a side announces.
 *
 *   verbs_rdv SERVER_DEV CLIENT_DEV staged    (with GPUWIRE_CUDA_LIB: the fake driver)
 *
 * runs one more pairing instead: a send from GPU memory on the staging rung
 * to a receiver that does not announce staged transfers fails at once with
 * GW_ERR_UNSUPPORTED naming the cause (it would otherwise be asked to READ a
 * GPU address it cannot reach), and the endpoint keeps working.
 * Skips (77) when no RDMA device is present. */
#include <unistd.h>

#include "cuda/cuda_wrap.h"
#include "harness.h"

#define MB (1u << 20)
#define REGION (16u * MB)
#define SPLIT (512u * 1024) /* GPUWIRE_IB_SPLIT_MIN for both sides */

typedef struct {
    const char *name;
    const char *srv_feat, *cli_feat; /* GW_TEST_VERBS_FEATURES, "" = all */
    const char *srv_rdv;             /* GPUWIRE_IB_RDV of the receiver */
    const char *qps;                 /* GPUWIRE_IB_QPS of both */
    int write_all;                   /* registered receives all by WRITE */
    int write_small;                 /* registered receives below SPLIT by WRITE */
} mode_t_;

static const mode_t_ modes[] = {
    {"imm", "", "", "auto", "2", 1, 1},
    {"q1", "", "", "auto", "1", 1, 1},
    {"oldrecv", "1", "", "auto", "2", 0, 1},
    {"oldsend", "", "1", "auto", "2", 0, 1},
    {"none", "0", "0", "auto", "2", 0, 0},
    {"read", "", "", "read", "2", 0, 0},
};

/* The messages, in order.  off: where in the server's region the receive
 * goes (-1: a malloc'd buffer without a registration, -2: the same, an
 * eager message); cap: the receive buffer's size (smaller than len:
 * truncated). */
typedef struct {
    size_t len, cap;
    long off;
} msg_t;
static const msg_t msgs[] = {
    {100, 100, -2},                      /* eager, inline (header + payload copied) */
    {300, 300, -2},                      /* eager: payload straight from the registered buffer */
    {8192, 8192, -2},                    /* the largest eager message, the same */
    {8193, 8193, 64},                    /* just above the eager limit */
    {65536, 65536, 16384 + 100},         /* unaligned */
    {300001, 300001, MB},                /* odd, below SPLIT */
    {SPLIT, SPLIT, 2 * MB},              /* striped from here (write modes) */
    {MB + 13, MB + 13, 3 * MB + 7},      /* odd, striped */
    {7 * MB - 5, 7 * MB - 5, 5 * MB},    /* large, odd */
    {2 * MB, MB + 5, 13 * MB},           /* truncated to MB + 5 bytes */
    {MB, MB, -1},                        /* no registration: READ */
};
#define NMSG (sizeof(msgs) / sizeof(msgs[0]))
#define NBURST 8 /* then NBURST messages of 1 MiB in flight together */

static gwt_chan_t pch, cch;
static const char *sdev = "", *cdev = "";
static const mode_t_ *cur;

static void set_env(const char *feat, const char *rdv, const char *qps)
{
    if (*feat)
        setenv("GW_TEST_VERBS_FEATURES", feat, 1);
    else
        unsetenv("GW_TEST_VERBS_FEATURES");
    setenv("GPUWIRE_IB_RDV", rdv, 1);
    setenv("GPUWIRE_IB_QPS", qps, 1);
    char s[32];
    snprintf(s, sizeof(s), "%u", SPLIT);
    setenv("GPUWIRE_IB_SPLIT_MIN", s, 1);
}

static int server(void *arg)
{
    (void)arg;
    setenv("GPUWIRE_IB_DEVICE", sdev, 1);
    set_env(cur->srv_feat, cur->srv_rdv, cur->qps);
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    gw_listener_t *l;
    gw_ep_t *ep = gwt_listen_accept(ctx, &cch, &l);
    uint8_t *region = aligned_alloc(4096, REGION);
    memset(region, 0xee, REGION);
    gw_mem_t *mem;
    REQUIRE_OK(gw_mem_reg(ctx, region, REGION, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, &mem));
    uint8_t *plain = malloc(2 * MB);
    int writes = 0, reads = 0;
    for (unsigned i = 0; i < NMSG; i++) {
        const msg_t *m = &msgs[i];
        uint8_t *dst = m->off < 0 ? plain : region + m->off;
        gw_request_t *r;
        REQUIRE_OK(gw_recv(ep, dst, m->cap, m->off < 0 ? NULL : mem, 100 + i, ~0ull, &r));
        gw_status_t st = gw_request_wait(r, 30000);
        CHECK_ST(st, m->cap < m->len ? GW_ERR_TRUNCATED : GW_OK);
        gw_request_info_t ri = {.size = sizeof(ri)};
        gw_request_info(r, &ri);
        CHECK(ri.length == m->len);
        size_t n = m->cap < m->len ? m->cap : m->len;
        long long bad = gwt_verify(dst, n, 100 + i);
        if (bad != -1)
            fprintf(stderr, "%s: message %u (%zu bytes): first wrong byte at %lld\n", cur->name, i, n, bad);
        CHECK(bad == -1);
        if (m->off >= 0 && (dst[n] != 0xee || dst[-1] != 0xee)) { /* neighbours untouched */
            fprintf(stderr, "%s: message %u: byte before 0x%02x, byte after 0x%02x (want 0xee)\n", cur->name,
                    i, dst[-1], dst[n]);
            CHECK(0);
        }
        gw_request_free(r);
        if (m->off == -2)
            continue; /* eager: no rendezvous */
        int by_write = m->off >= 0 && (cur->write_all || (cur->write_small && n < SPLIT));
        writes += by_write;
        reads += !by_write;
    }
    /* NBURST receives posted at once, then the sender sends them together */
    gw_request_t *rs[NBURST];
    for (unsigned k = 0; k < NBURST; k++)
        REQUIRE_OK(gw_recv(ep, region + (size_t)k * MB, MB, mem, 200 + k, ~0ull, &rs[k]));
    gwt_chan_send(&cch, "go", 3);
    for (unsigned k = 0; k < NBURST; k++) {
        CHECK_ST(gw_request_wait(rs[k], 30000), GW_OK);
        CHECK(gwt_verify(region + (size_t)k * MB, MB, 200 + k) == -1);
        gw_request_free(rs[k]);
        writes += cur->write_all;
        reads += !cur->write_all;
    }
    gw_ep_info_t info = {.size = sizeof(info)};
    REQUIRE_OK(gw_ep_query(ep, &info));
    char want[128];
    snprintf(want, sizeof(want), "%d by the sender's RDMA WRITE, %d by RDMA READ", writes, reads);
    fprintf(stderr, "%s: server endpoint: %s (want \"%s\")\n", cur->name, info.path, want);
    CHECK(strstr(info.path, want) != NULL);
    gwt_chan_send(&cch, "done", 5);
    char b[8];
    gwt_chan_recv(&cch, b, sizeof(b), 30000);
    gw_mem_dereg(mem);
    gw_ep_close(ep, 2000);
    gw_listener_destroy(l);
    gw_context_destroy(ctx);
    free(region);
    free(plain);
    return gwt_failures ? 1 : 0;
}

/* A client context on CLIENT_DEV, connected to the server whose address
 * comes over pch. */
static gw_ep_t *connect_client(gw_context_t **ctx)
{
    setenv("GPUWIRE_IB_DEVICE", cdev, 1);
    REQUIRE_OK(gw_context_create(NULL, ctx));
    char addr[80];
    REQUIRE(gwt_chan_recv(&pch, addr, sizeof(addr), 20000) > 0);
    gw_ep_t *ep;
    REQUIRE_OK(gw_connect(*ctx, addr, &ep));
    return ep;
}

static void client(void)
{
    set_env(cur->cli_feat, "auto", cur->qps);
    gw_context_t *ctx;
    gw_ep_t *ep = connect_client(&ctx);
    uint8_t *buf = malloc(8 * MB);
    gw_mem_t *bm;
    REQUIRE_OK(gw_mem_reg(ctx, buf, 8 * MB, GW_ACCESS_LOCAL, &bm));
    for (unsigned i = 0; i < NMSG; i++) {
        gwt_fill(buf, msgs[i].len, 100 + i);
        gw_request_t *r;
        REQUIRE_OK(gw_send(ep, buf, msgs[i].len, bm, 100 + i, &r));
        gw_status_t st = gw_request_wait(r, 30000);
        if (st != GW_OK)
            fprintf(stderr, "%s: send %u: %s: %s\n", cur->name, i, gw_status_name(st), gw_last_error(ctx));
        CHECK_ST(st, GW_OK);
        gw_request_free(r);
    }
    char b[8];
    REQUIRE(gwt_chan_recv(&pch, b, sizeof(b), 30000) > 0);
    gw_request_t *rs[NBURST];
    for (unsigned k = 0; k < NBURST; k++) {
        gwt_fill(buf + (size_t)k * MB, MB, 200 + k);
        REQUIRE_OK(gw_send(ep, buf + (size_t)k * MB, MB, bm, 200 + k, &rs[k]));
    }
    for (unsigned k = 0; k < NBURST; k++) {
        CHECK_ST(gw_request_wait(rs[k], 30000), GW_OK);
        gw_request_free(rs[k]);
    }
    REQUIRE(gwt_chan_recv(&pch, b, sizeof(b), 30000) > 0);
    gw_ep_info_t info = {.size = sizeof(info)};
    REQUIRE_OK(gw_ep_query(ep, &info));
    fprintf(stderr, "%s: client endpoint: %s\n", cur->name, info.path);
    CHECK(strstr(info.path, "; 2 eager sends straight from registered memory") != NULL);
    /* both sides announcing header-less eager messages (GW_VERBS_FEAT_SEND_IMM,
     * 0x8; the masks of the old-peer modes leave it out): the three eager
     * sends (tags 100-102) went as SEND_WITH_IMM, and were received whole
     * above; else none did */
    int imm = (!*cur->srv_feat || (strtoul(cur->srv_feat, NULL, 0) & 0x8)) &&
              (!*cur->cli_feat || (strtoul(cur->cli_feat, NULL, 0) & 0x8));
    CHECK((strstr(info.path, "; 3 eager header-less") != NULL) == imm);
    gwt_chan_send(&pch, "bye", 4);
    gw_mem_dereg(bm);
    gw_ep_close(ep, 2000);
    gw_context_destroy(ctx);
    free(buf);
}

/* The staged pairing: the receiver announces everything but staged transfers. */
static int staged_server(void *arg)
{
    (void)arg;
    setenv("GPUWIRE_IB_DEVICE", sdev, 1);
    setenv("GW_TEST_VERBS_FEATURES", "3", 1); /* WRITE_RDV | WRITE_IMM, no STAGED */
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    gw_listener_t *l;
    gw_ep_t *ep = gwt_listen_accept(ctx, &cch, &l);
    char b[16];
    gw_request_t *r;
    REQUIRE_OK(gw_recv(ep, b, sizeof(b), NULL, 2, ~0ull, &r)); /* only the message after the refused one */
    CHECK_ST(gw_request_wait(r, 30000), GW_OK);
    CHECK(!strcmp(b, "still here"));
    gw_request_free(r);
    gw_ep_close(ep, 2000);
    gw_listener_destroy(l);
    gw_context_destroy(ctx);
    return gwt_failures ? 1 : 0;
}

static int staged_pairing(void)
{
    if (!getenv("GPUWIRE_CUDA_LIB"))
        SKIP("GPUWIRE_CUDA_LIB (the fake CUDA driver) not set");
    gwt_chan_pair(&pch, &cch);
    int pid = gwt_spawn(staged_server, NULL); /* (CUDA is initialised after the fork) */
    char why[256];
    const gw_cuda_t *cu = gw_cuda_get(why, sizeof(why));
    if (!cu)
        SKIP("fake CUDA driver not loaded: %s", why);
    gw_context_t *ctx;
    gw_ep_t *ep = connect_client(&ctx);
    CUdeviceptr dp;
    REQUIRE(cu->cuMemAlloc(&dp, MB) == CUDA_SUCCESS);
    gw_mem_t *m;
    REQUIRE_OK(gw_mem_reg(ctx, (void *)(uintptr_t)dp, MB, GW_ACCESS_LOCAL, &m));
    gw_mem_info_t mi = {.size = sizeof(mi)};
    gw_mem_query(m, &mi);
    fprintf(stderr, "staged: region path %s\n", mi.path);
    gw_request_t *r;
    gw_status_t st = gw_send(ep, (void *)(uintptr_t)dp, MB, m, 1, &r);
    if (st == GW_OK) {
        st = gw_request_wait(r, 30000);
        gw_request_free(r);
    }
    fprintf(stderr, "staged: send to an older receiver: %s: %s\n", gw_status_name(st), gw_last_error(ctx));
    CHECK_ST(st, GW_ERR_UNSUPPORTED);
    CHECK(strstr(gw_last_error(ctx), "does not announce staged transfers") != NULL);
    REQUIRE_OK(gw_send(ep, "still here", 11, NULL, 2, &r));
    CHECK_ST(gw_request_wait(r, 30000), GW_OK);
    gw_request_free(r);
    gw_mem_dereg(m);
    cu->cuMemFree(dp);
    gw_ep_close(ep, 2000);
    gw_context_destroy(ctx);
    CHECK(gwt_wait(pid, 60) == 0);
    return gwt_done("verbs_rdv staged");
}

int main(int argc, char **argv)
{
    if (argc >= 3) {
        sdev = argv[1];
        cdev = argv[2];
    }
    gwt_require_rdma_device();
    setenv("GPUWIRE_TRANSPORTS", "verbs", 1);
    if (argc >= 4 && !strcmp(argv[3], "staged"))
        return staged_pairing();
    for (unsigned m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
        cur = &modes[m];
        fprintf(stderr, "mode %s\n", cur->name);
        gwt_chan_pair(&pch, &cch);
        int pid = gwt_spawn(server, NULL);
        client();
        CHECK(gwt_wait(pid, 60) == 0);
    }
    unsetenv("GW_TEST_VERBS_FEATURES");
    return gwt_done("verbs_rdv");
}
