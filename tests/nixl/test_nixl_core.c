/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The NIXL backend's core (plugin/nixl/gwnx.h) without NIXL: frames,
 * pairing, the agent map, descriptor translation, status mapping, and two
 * agents in one process (as NIXL allows, on one thread) moving KV blocks by
 * descriptor index with notifications that arrive only after their data.
 * argv[1] names the transport the endpoints must take (ctest runs it over
 * tcp and over intra, GPUWIRE_TRANSPORTS set to match).
 */
#include "gwnx.h"
#include "harness.h"

#include <time.h>
#include <unistd.h>

static void test_status(void)
{
    CHECK(gwnx_status_from_gw(GW_OK) == GWNX_SUCCESS);
    CHECK(gwnx_status_from_gw(GW_INPROGRESS) == GWNX_IN_PROG);
    CHECK(gwnx_status_from_gw(GW_ERR_INVALID) == GWNX_ERR_INVALID_PARAM);
    CHECK(gwnx_status_from_gw(GW_ERR_OUT_OF_BOUNDS) == GWNX_ERR_INVALID_PARAM);
    CHECK(gwnx_status_from_gw(GW_ERR_ACCESS) == GWNX_ERR_NOT_ALLOWED);
    CHECK(gwnx_status_from_gw(GW_ERR_CONN_RESET) == GWNX_ERR_REMOTE_DISCONNECT);
    CHECK(gwnx_status_from_gw(GW_ERR_PEER_TIMEOUT) == GWNX_ERR_REMOTE_DISCONNECT);
    CHECK(gwnx_status_from_gw(GW_ERR_ENDPOINT_FAILED) == GWNX_ERR_REMOTE_DISCONNECT);
    CHECK(gwnx_status_from_gw(GW_ERR_CANCELED) == GWNX_ERR_CANCELED);
    CHECK(gwnx_status_from_gw(GW_ERR_NOT_FOUND) == GWNX_ERR_NOT_FOUND);
    CHECK(gwnx_status_from_gw(GW_ERR_UNSUPPORTED) == GWNX_ERR_NOT_SUPPORTED);
    CHECK(gwnx_status_from_gw(GW_ERR_CUDA) == GWNX_ERR_BACKEND);
    CHECK(gwnx_status_from_gw((gw_status_t)-99) == GWNX_ERR_BACKEND);
}

static void test_frames(void)
{
    const char name[] = "prefill worker/0 \xc3\xbc"; /* NIXL agent names are free strings */
    const char msg[] = "blocks 3,7,9\0with a NUL";
    unsigned char buf[256];
    size_t sz = gwnx_frame_encode(buf, sizeof(buf), 42, name, strlen(name), msg, sizeof(msg));
    CHECK(sz == gwnx_frame_size(strlen(name), sizeof(msg)));
    gwnx_frame_view_t f;
    CHECK(gwnx_frame_decode(buf, sz, &f) == 0);
    CHECK(f.seq == 42);
    CHECK(f.name_len == strlen(name) && memcmp(f.name, name, f.name_len) == 0);
    CHECK(f.msg_len == sizeof(msg) && memcmp(f.msg, msg, sizeof(msg)) == 0);
    /* an empty message and an empty name are frames too */
    size_t sz0 = gwnx_frame_encode(buf, sizeof(buf), 1, "", 0, NULL, 0);
    CHECK(sz0 == GWNX_FRAME_HDR && gwnx_frame_decode(buf, sz0, &f) == 0 && f.msg_len == 0 && f.name_len == 0);
    /* too small a buffer, malformed input */
    CHECK(gwnx_frame_encode(buf, 10, 1, name, strlen(name), msg, sizeof(msg)) == 0);
    sz = gwnx_frame_encode(buf, sizeof(buf), 7, name, strlen(name), msg, sizeof(msg));
    CHECK(gwnx_frame_decode(buf, sz - 1, &f) == -1);
    CHECK(gwnx_frame_decode(buf, GWNX_FRAME_HDR - 1, &f) == -1);
    buf[0] ^= 1;
    CHECK(gwnx_frame_decode(buf, sz, &f) == -1);
    buf[0] ^= 1;
    buf[4] = 9; /* version */
    CHECK(gwnx_frame_decode(buf, sz, &f) == -1);
}

static void test_pairing(void)
{
    gwnx_pairing_t p = {0};
    const char *msgs[] = {"a", "bb", "ccc"};
    for (int i = 0; i < 3; i++) {
        gwnx_frame_view_t f = {.seq = (uint64_t)i + 1, .name = "x", .name_len = 1, .msg = msgs[i],
                               .msg_len = strlen(msgs[i])};
        CHECK(gwnx_pairing_add_frame(&p, &f) == 0);
    }
    CHECK(gwnx_pairing_take(&p) == NULL); /* no data has landed yet */
    gwnx_pairing_landed(&p, 1);
    gwnx_pending_t *e = gwnx_pairing_take(&p);
    CHECK(e && e->seq == 1 && e->msg_len == 1 && memcmp(e->msg, "a", 1) == 0 && strcmp(e->name, "x") == 0);
    gwnx_pending_free(e);
    CHECK(gwnx_pairing_take(&p) == NULL);
    gwnx_pairing_landed(&p, 3);
    gwnx_pairing_landed(&p, 2); /* an older value never moves it back */
    e = gwnx_pairing_take(&p);
    CHECK(e && e->seq == 2);
    gwnx_pending_free(e);
    e = gwnx_pairing_take(&p);
    CHECK(e && e->seq == 3 && e->msg_len == 3);
    gwnx_pending_free(e);
    CHECK(gwnx_pairing_take(&p) == NULL);
    /* a notification that landed before its frame: the frame is ready at once */
    gwnx_frame_view_t f = {.seq = 4, .name = "y", .name_len = 1, .msg = "", .msg_len = 0};
    gwnx_pairing_landed(&p, 4);
    CHECK(gwnx_pairing_add_frame(&p, &f) == 0);
    e = gwnx_pairing_take(&p);
    CHECK(e && e->seq == 4 && e->msg_len == 0);
    gwnx_pending_free(e);
    gwnx_pairing_add_frame(&p, &(gwnx_frame_view_t){.seq = 9, .name = "z", .name_len = 1});
    gwnx_pairing_clear(&p);
    CHECK(p.head == NULL && p.tail == NULL);
}

static void test_agents(void)
{
    gwnx_agent_map_t m = {0};
    char name[64];
    for (int i = 0; i < 100; i++) {
        snprintf(name, sizeof(name), "decode agent #%d / rank %d", i, i % 8);
        gwnx_agent_t *a = gwnx_agent_get(&m, name);
        REQUIRE(a);
        a->next_seq = (uint64_t)i;
    }
    CHECK(m.n == 100);
    CHECK(gwnx_agent_get(&m, "decode agent #5 / rank 5") == gwnx_agent_find(&m, "decode agent #5 / rank 5"));
    CHECK(m.n == 100);
    gwnx_agent_t *a = gwnx_agent_find(&m, "decode agent #42 / rank 2");
    CHECK(a && a->next_seq == 42);
    gwnx_agent_remove(&m, a);
    CHECK(m.n == 99 && gwnx_agent_find(&m, "decode agent #42 / rank 2") == NULL);
    CHECK(gwnx_agent_find(&m, "decode agent #99 / rank 3")->next_seq == 99);
    CHECK(gwnx_agent_find(&m, "nobody") == NULL);
    gwnx_agent_map_clear(&m);
    CHECK(m.n == 0);
}

static void test_translate(void)
{
    gwnx_span_t l[3] = {{0x1000, 16, 0x1000, 64}, {0x1030, 16, 0x1000, 64}, {0x2000, 0, 0x2000, 0}};
    gwnx_span_t r[3] = {{0x9010, 16, 0x9000, 32}, {0x9000, 16, 0x9000, 32}, {0x5000, 0, 0x5000, 8}};
    uint64_t lo[3], ro[3];
    char err[256] = "";
    CHECK(gwnx_translate(l, r, 3, lo, ro, err, sizeof(err)) == 0);
    CHECK(lo[0] == 0 && lo[1] == 0x30 && ro[0] == 0x10 && ro[1] == 0 && lo[2] == 0 && ro[2] == 0);
    r[1].len = 8;
    CHECK(gwnx_translate(l, r, 3, lo, ro, err, sizeof(err)) == -1 && strstr(err, "descriptor 1") &&
          strstr(err, "length"));
    r[1].len = 16;
    l[1].addr = 0x1031; /* one byte past the local registration */
    CHECK(gwnx_translate(l, r, 3, lo, ro, err, sizeof(err)) == -1 && strstr(err, "descriptor 1: local"));
    l[1].addr = 0x1030;
    r[0].addr = 0x8fff; /* before the remote range */
    CHECK(gwnx_translate(l, r, 3, lo, ro, err, sizeof(err)) == -1 && strstr(err, "descriptor 0: remote"));
    r[0].addr = UINT64_MAX - 4; /* an end that wraps */
    CHECK(gwnx_translate(l, r, 3, lo, ro, err, sizeof(err)) == -1);
}

/* ---- two agents ------------------------------------------------------------- */
typedef struct got {
    int n;
    char agent[64];
    char msg[64];
    int data_ok;         /* the data was in place when the notification came */
    const unsigned char *dst;
    const unsigned char *want;
    size_t want_len;
} got_t;

static void on_notif(void *arg, const char *agent, size_t alen, const void *msg, size_t mlen)
{
    got_t *g = arg;
    g->n++;
    snprintf(g->agent, sizeof(g->agent), "%.*s", (int)alen, agent);
    snprintf(g->msg, sizeof(g->msg), "%.*s", (int)mlen, (const char *)msg);
    g->data_ok = !g->want || memcmp(g->dst, g->want, g->want_len) == 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int wait_notif(gwnx_core_t *c, got_t *g, int want)
{
    double end = now_s() + 30;
    while (g->n < want && now_s() < end) {
        gwnx_notifs_take(c, on_notif, g);
        if (g->n < want)
            usleep(200);
    }
    return g->n >= want;
}

static int wait_xfer(gwnx_xfer_t *x)
{
    double end = now_s() + 30;
    int rc;
    while ((rc = gwnx_xfer_check(x)) == GWNX_IN_PROG && now_s() < end)
        usleep(50);
    return rc;
}

#define NBLK 64
#define BLK 16384

static void test_two_agents(const char *want_transport)
{
    char err[512];
    gwnx_core_t *pre = NULL, *dec = NULL;
    gwnx_core_opts_t o = {.agent = "prefill agent/0", .listen_addr = "127.0.0.1:0", .progress_thread = 1};
    int rc = gwnx_core_create(&o, &pre, err, sizeof(err));
    REQUIRE(rc == GWNX_SUCCESS);
    o.agent = "decode agent/1";
    REQUIRE(gwnx_core_create(&o, &dec, err, sizeof(err)) == GWNX_SUCCESS);

    /* connection info both ways (NIXL loads both) */
    char ci[512];
    REQUIRE(gwnx_conn_info(dec, ci, sizeof(ci)) == GWNX_SUCCESS);
    CHECK(strncmp(ci, "gwnx1 127.0.0.1:", 16) == 0);
    REQUIRE(gwnx_peer_set(pre, "decode agent/1", ci) == GWNX_SUCCESS);
    REQUIRE(gwnx_conn_info(pre, ci, sizeof(ci)) == GWNX_SUCCESS);
    REQUIRE(gwnx_peer_set(dec, "prefill agent/0", ci) == GWNX_SUCCESS);
    CHECK(gwnx_peer_set(dec, "x", "ucx blob") == GWNX_ERR_MISMATCH);
    CHECK(gwnx_peer_connect(pre, "nobody") == GWNX_ERR_NOT_FOUND);
    REQUIRE(gwnx_peer_connect(pre, "decode agent/1") == GWNX_SUCCESS);
    char tr[16] = "";
    CHECK(gwnx_peer_transport(pre, "decode agent/1", tr, sizeof(tr)) == GWNX_SUCCESS);
    if (want_transport && strcmp(tr, want_transport) != 0) {
        fprintf(stderr, "endpoint took %s, expected %s\n", tr, want_transport);
        gwt_failures++;
    }

    size_t sz = (size_t)NBLK * BLK;
    unsigned char *src = malloc(sz), *dst = calloc(1, sz), *want = calloc(1, sz), *back = calloc(1, sz);
    REQUIRE(src && dst && want && back);
    gwt_fill(src, sz, 7);
    gwnx_region_t *rs = NULL, *rd = NULL, *rb = NULL;
    REQUIRE(gwnx_mem_reg(pre, src, sz, &rs) == GWNX_SUCCESS);
    REQUIRE(gwnx_mem_reg(pre, back, sz, &rb) == GWNX_SUCCESS);
    REQUIRE(gwnx_mem_reg(dec, dst, sz, &rd) == GWNX_SUCCESS);
    unsigned char pub[1024];
    size_t publen = sizeof(pub);
    REQUIRE(gwnx_mem_public(rd, pub, &publen) == GWNX_SUCCESS);
    gwnx_rregion_t *remote = NULL;
    REQUIRE(gwnx_remote_load(pre, "decode agent/1", pub, publen, &remote) == GWNX_SUCCESS);
    uint64_t rbase;
    size_t rsize;
    gwnx_remote_range(remote, &rbase, &rsize);
    CHECK(rbase == (uint64_t)(uintptr_t)dst && rsize == sz);

    /* prefill block i goes to decode block perm[i] (a KV connector's block ids) */
    gwnx_desc_t ld[NBLK], rdsc[NBLK];
    uint64_t st = 99;
    int perm[NBLK];
    for (int i = 0; i < NBLK; i++)
        perm[i] = i;
    for (int i = NBLK - 1; i > 0; i--) {
        int j = (int)(gwt_xorshift(&st) % (uint64_t)(i + 1)), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    int nsent = NBLK / 2; /* half the blocks: the rest of dst stays zero */
    for (int i = 0; i < nsent; i++) {
        ld[i] = (gwnx_desc_t){(uint64_t)(uintptr_t)(src + (size_t)i * BLK), BLK, rs};
        rdsc[i] = (gwnx_desc_t){(uint64_t)(uintptr_t)(dst + (size_t)perm[i] * BLK), BLK, remote};
        memcpy(want + (size_t)perm[i] * BLK, src + (size_t)i * BLK, BLK);
    }
    gwnx_xfer_t *x = NULL;
    REQUIRE(gwnx_xfer_prep(pre, "decode agent/1", GWNX_WRITE, ld, rdsc, (size_t)nsent, &x) == GWNX_SUCCESS);
    got_t g = {.dst = dst, .want = want, .want_len = sz};
    for (int round = 0; round < 3; round++) {
        char m[32];
        snprintf(m, sizeof(m), "kv-ready %d", round);
        REQUIRE(gwnx_xfer_post(x, 1, m, strlen(m)) == GWNX_IN_PROG ||
                gwnx_xfer_check(x) == GWNX_SUCCESS);
        /* the decode side waits on its notification only: the data must be
         * there when it comes */
        CHECK(wait_notif(dec, &g, round + 1));
        CHECK(g.data_ok);
        CHECK(strcmp(g.agent, "prefill agent/0") == 0);
        CHECK(strcmp(g.msg, m) == 0);
        CHECK(wait_xfer(x) == GWNX_SUCCESS);
        if (round == 0)
            memset(dst, 0, sz); /* again, over zeroed memory */
    }

    /* a bad descriptor: named by index, nothing prepared */
    gwnx_xfer_t *bad = NULL;
    rdsc[3].addr = (uint64_t)(uintptr_t)(dst + sz - BLK / 2);
    CHECK(gwnx_xfer_prep(pre, "decode agent/1", GWNX_WRITE, ld, rdsc, (size_t)nsent, &bad) ==
          GWNX_ERR_INVALID_PARAM);
    CHECK(strstr(gwnx_core_error(pre), "descriptor 3") != NULL);
    rdsc[3].addr = (uint64_t)(uintptr_t)(dst + (size_t)perm[3] * BLK);

    /* a standalone notification */
    g.want = NULL;
    REQUIRE(gwnx_notif_gen(pre, "decode agent/1", "done", 4) == GWNX_SUCCESS);
    CHECK(wait_notif(dec, &g, 4));
    CHECK(strcmp(g.msg, "done") == 0 && strcmp(g.agent, "prefill agent/0") == 0);

    /* READ the blocks back by index, with a notification to the target after */
    gwnx_desc_t bd[NBLK];
    for (int i = 0; i < nsent; i++)
        bd[i] = (gwnx_desc_t){(uint64_t)(uintptr_t)(back + (size_t)i * BLK), BLK, rb};
    gwnx_xfer_t *rx = NULL;
    REQUIRE(gwnx_xfer_prep(pre, "decode agent/1", GWNX_READ, bd, rdsc, (size_t)nsent, &rx) == GWNX_SUCCESS);
    REQUIRE(gwnx_xfer_post(rx, 1, "read-done", 9) == GWNX_IN_PROG);
    CHECK(wait_xfer(rx) == GWNX_SUCCESS);
    CHECK(memcmp(back, src, (size_t)nsent * BLK) == 0);
    CHECK(wait_notif(dec, &g, 5));
    CHECK(strcmp(g.msg, "read-done") == 0);

    /* the initiator's counters: every completed post once, by its bytes,
     * however often it is checked after; the target counts nothing */
    CHECK(gwnx_xfer_check(rx) == GWNX_SUCCESS && gwnx_xfer_check(x) == GWNX_SUCCESS);
    gwnx_stats_t ps, ds;
    gwnx_core_stats(pre, &ps);
    gwnx_core_stats(dec, &ds);
    CHECK(ps.writes == 3 && ps.write_bytes == 3ull * (uint64_t)nsent * BLK);
    CHECK(ps.reads == 1 && ps.read_bytes == (uint64_t)nsent * BLK);
    CHECK(ds.writes == 0 && ds.write_bytes == 0 && ds.reads == 0 && ds.read_bytes == 0);

    /* metadata invalidation: unload, disconnect; a later load reconnects */
    CHECK(gwnx_xfer_release(rx) == GWNX_SUCCESS);
    CHECK(gwnx_xfer_release(x) == GWNX_SUCCESS);
    CHECK(gwnx_remote_unload(remote) == GWNX_SUCCESS);
    CHECK(gwnx_peer_disconnect(pre, "decode agent/1") == GWNX_SUCCESS);
    REQUIRE(gwnx_remote_load(pre, "decode agent/1", pub, publen, &remote) == GWNX_SUCCESS);
    rdsc[0].md = remote;
    REQUIRE(gwnx_xfer_prep(pre, "decode agent/1", GWNX_WRITE, ld, rdsc, 1, &x) == GWNX_SUCCESS);
    memset(dst, 0, sz);
    REQUIRE(gwnx_xfer_post(x, 1, "again", 5) == GWNX_IN_PROG);
    CHECK(wait_xfer(x) == GWNX_SUCCESS);
    CHECK(wait_notif(dec, &g, 6) && strcmp(g.msg, "again") == 0);
    CHECK(memcmp(dst + (size_t)perm[0] * BLK, src, BLK) == 0);
    CHECK(gwnx_xfer_release(x) == GWNX_SUCCESS);
    CHECK(gwnx_remote_unload(remote) == GWNX_SUCCESS);

    /* a deregistered region's old metadata no longer reaches it */
    CHECK(gwnx_mem_dereg(rd) == GWNX_SUCCESS);
    if (gwnx_remote_load(pre, "decode agent/1", pub, publen, &remote) == GWNX_SUCCESS) {
        rdsc[0].md = remote;
        rc = gwnx_xfer_prep(pre, "decode agent/1", GWNX_WRITE, ld, rdsc, 1, &x);
        if (rc == GWNX_SUCCESS) {
            rc = gwnx_xfer_post(x, 0, NULL, 0);
            if (rc == GWNX_IN_PROG)
                rc = wait_xfer(x);
            gwnx_xfer_release(x);
        }
        CHECK(rc != GWNX_SUCCESS && rc != GWNX_IN_PROG);
        gwnx_remote_unload(remote);
    }
    CHECK(gwnx_mem_dereg(rs) == GWNX_SUCCESS);
    CHECK(gwnx_mem_dereg(rb) == GWNX_SUCCESS);
    gwnx_core_destroy(pre);
    gwnx_core_destroy(dec);
    free(src);
    free(dst);
    free(want);
    free(back);
}

/* one agent writing into itself (NIXL's local transfers connect to self) */
static void test_self(void)
{
    char err[512];
    gwnx_core_t *c = NULL;
    gwnx_core_opts_t o = {.agent = "solo", .listen_addr = "127.0.0.1:0", .progress_thread = 1};
    REQUIRE(gwnx_core_create(&o, &c, err, sizeof(err)) == GWNX_SUCCESS);
    char ci[512];
    gwnx_conn_info(c, ci, sizeof(ci));
    REQUIRE(gwnx_peer_set(c, "solo", ci) == GWNX_SUCCESS);
    unsigned char a[4096], b[4096] = {0};
    gwt_fill(a, sizeof(a), 3);
    gwnx_region_t *ra, *rb;
    REQUIRE(gwnx_mem_reg(c, a, sizeof(a), &ra) == GWNX_SUCCESS);
    REQUIRE(gwnx_mem_reg(c, b, sizeof(b), &rb) == GWNX_SUCCESS);
    unsigned char pub[1024];
    size_t pl = sizeof(pub);
    gwnx_mem_public(rb, pub, &pl);
    gwnx_rregion_t *rr;
    REQUIRE(gwnx_remote_load(c, "solo", pub, pl, &rr) == GWNX_SUCCESS);
    gwnx_desc_t l = {(uint64_t)(uintptr_t)a, sizeof(a), ra}, r = {(uint64_t)(uintptr_t)b, sizeof(b), rr};
    gwnx_xfer_t *x;
    REQUIRE(gwnx_xfer_prep(c, "solo", GWNX_WRITE, &l, &r, 1, &x) == GWNX_SUCCESS);
    REQUIRE(gwnx_xfer_post(x, 1, "self", 4) == GWNX_IN_PROG);
    CHECK(wait_xfer(x) == GWNX_SUCCESS);
    got_t g = {0};
    CHECK(wait_notif(c, &g, 1) && strcmp(g.agent, "solo") == 0 && strcmp(g.msg, "self") == 0);
    CHECK(memcmp(a, b, sizeof(a)) == 0);
    gwnx_xfer_release(x);
    gwnx_remote_unload(rr);
    CHECK(gwnx_mem_dereg(ra) == GWNX_SUCCESS && gwnx_mem_dereg(rb) == GWNX_SUCCESS);
    gwnx_core_destroy(c);
}

int main(int argc, char **argv)
{
    test_status();
    test_frames();
    test_pairing();
    test_agents();
    test_translate();
    test_two_agents(argc > 1 ? argv[1] : NULL);
    test_self();
    return gwt_done("nixl_core");
}
