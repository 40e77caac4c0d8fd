/* SPDX-License-Identifier: Apache-2.0 */
/* it_safety.c - remote access safety.  A put/get outside the region an rkey
 * covers, or without the access the region granted, fails at the initiator
 * with a clear error and leaves the target's memory untouched; keys whose
 * bytes were forged to claim more (length, access, another region) are
 * refused by the target; malformed keys, keys whose transport part is
 * malformed (for the endpoint's transport: checked once, at unpack) and keys
 * of another peer do not unpack; deregistering a region revokes its keys (later puts/gets fail,
 * memory untouched) while the endpoint stays usable; errors of untracked
 * operations surface in the next flush.
 *
 * Over verbs the target's NIC has the last word, and an RC queue pair that
 * a NIC refused goes to the error state (docs/VERBS.md): a forged or revoked
 * key fails the operation with GW_ERR_INVALID_KEY and the endpoint with it,
 * its detail naming the key.  There the test asserts exactly that and goes
 * on with a spare endpoint (the target accepts IT_MAX_EPS).  Over ofi the
 * provider checks the key the same way (the tcp provider drops its
 * connection on a refusal), and the transport fails the endpoint alike, so
 * the test takes the same branch there.  The region ids
 * of the key's envelope are checked by nobody over verbs (the verbs part's
 * MR rkey is what grants access), asserted in place. */
#include <stdlib.h>
#include <string.h>

#include "bootstrap/wire.h"
#include "core/util.h"
#include "it.h"

#define RLEN 65536
enum { R_RW = 0, R_RO = 1, R_WO = 2, R_DEREG = 3 };
static const uint64_t g_seed[4] = {0xA0, 0xA1, 0xA2, 0xA3};

static it_target_t T;
static gw_context_t *ctx;
static gw_ep_t *ep;
static int g_verbs;              /* the endpoints are verbs or ofi ones: the target's NIC (the
                                  * provider) has the last word, and its refusal fails the endpoint */
static gw_ep_t *g_eps[IT_MAX_EPS]; /* over verbs: spares, one per refused access */
static int g_cur;
static gw_rkey_t *g_rk[4];
static uint64_t g_ra[4];
static uint8_t g_keys[4][IT_KEY_MAX];
static size_t g_klen[4];

static void unpack_keys(void)
{
    for (int i = 0; i < 4; i++) {
        IT_OK(ctx, gw_rkey_unpack(ep, g_keys[i], g_klen[i], &g_rk[i]));
        size_t l;
        IT_OK(ctx, gw_rkey_range(g_rk[i], &g_ra[i], &l));
        CHECK(l == RLEN);
    }
}

/* Over verbs, after the target's NIC refused an access (what): the endpoint
 * failed with want, its detail saying the target refused the key; its keys
 * go, it is closed, and the test goes on with the next endpoint. */
static void verbs_refused(gw_status_t want, const char *what)
{
    gw_ep_info_t ei = {.size = sizeof(ei)};
    IT_OK(ctx, gw_ep_query(ep, &ei));
    fprintf(stderr, "  verbs: the endpoint after %s: %s: %s\n", what, gw_status_name(ei.error), ei.error_detail);
    CHECK_ST(ei.error, want);
    CHECK(strstr(ei.error_detail, "refused the access") != NULL && strstr(ei.error_detail, "key") != NULL);
    gw_request_t *r = NULL; /* and it stays failed: nothing more is posted on it */
    CHECK_ST(gw_flush(ep, &r), GW_ERR_ENDPOINT_FAILED);
    CHECK(r == NULL && strstr(gw_last_error(ctx), "failed earlier") != NULL);
    for (int i = 0; i < 4; i++)
        gw_rkey_destroy(g_rk[i]);
    CHECK_ST(gw_ep_close(ep, 0), GW_OK);
    g_eps[g_cur] = NULL;
    REQUIRE(++g_cur < IT_MAX_EPS);
    ep = g_eps[g_cur];
    unpack_keys();
}

static void untouched(int region, const char *after)
{
    it_cmd_t c = {.type = IT_CMD_VERIFY, .region = (uint32_t)region, .off = 0, .len = RLEN,
                  .seed = g_seed[region]};
    it_reply_t r = it_target_cmd(&T, &c, ctx);
    if (r.a != -1) {
        fprintf(stderr, "after %s: region %d changed at byte %lld\n", after, region, (long long)r.a);
        gwt_failures++;
    }
}

/* Posting must fail with want; the message must name the operation. */
static void bad_post(gw_status_t st, gw_status_t want, const char *what)
{
    if (st != want) {
        fprintf(stderr, "%s: got %s, expected %s (%s)\n", what, gw_status_name(st),
                gw_status_name(want), gw_last_error(ctx));
        gwt_failures++;
        return;
    }
    fprintf(stderr, "%s -> %s: %s\n", what, gw_status_name(st), gw_last_error(ctx));
    CHECK(strlen(gw_last_error(ctx)) > 10);
}

/* Either the operation is refused when posted or its completion fails.
 * r is read after the call that sets it (argument order is unspecified). */
static gw_status_t op_result(gw_status_t post, gw_request_t **r)
{
    if (post != GW_OK) {
        fprintf(stderr, "  (refused when posted: %s)\n", gw_last_error(ctx));
        return post;
    }
    return it_wait_free(*r, 10000);
}

/* Rewrites one field of a packed key; NULL when the forgery does not unpack. */
static gw_rkey_t *forge(const uint8_t *key, size_t klen, size_t off, uint64_t val, int width)
{
    uint8_t k[IT_KEY_MAX];
    memcpy(k, key, klen);
    if (width == 8)
        gw_put_u64(k + off, val);
    else
        gw_put_u32(k + off, (uint32_t)val);
    gw_rkey_t *rk = NULL;
    gw_status_t st = gw_rkey_unpack(ep, k, klen, &rk);
    if (st != GW_OK) {
        CHECK_ST(st, GW_ERR_INVALID_KEY); /* a key with an integrity check may refuse here */
        return NULL;
    }
    return rk;
}

/* The key again with the part of transport `tl` (wire id) replaced by
 * part/plen; 0 when it does not encode. */
static size_t with_tl_part(const uint8_t *key, size_t klen, int tl, const uint8_t *part, size_t plen,
                           uint8_t *out, size_t cap)
{
    gw_rkey_wire_t w;
    char why[256];
    if (gw_rkey_decode(key, klen, &w, why, sizeof(why)) != GW_OK)
        return 0;
    int n = 0;
    for (int i = 0; i < w.nblob; i++)
        if (w.blob[i].tl != tl)
            w.blob[n++] = w.blob[i];
    w.blob[n].tl = (uint8_t)tl;
    w.blob[n].len = (uint16_t)plen;
    w.blob[n].data = part;
    w.nblob = n + 1;
    size_t len = gw_rkey_encode(&w, out, cap);
    return len <= cap ? len : 0;
}

/* A malformed transport part of the endpoint's transport is refused by
 * gw_rkey_unpack, with a message naming the transport's part. */
static void bad_tl_part(const uint8_t *key, size_t klen, const uint8_t *part, size_t plen, const char *what)
{
    gw_ep_info_t ei = {.size = sizeof(ei)};
    IT_OK(ctx, gw_ep_query(ep, &ei));
    int tl = !strcmp(ei.transport, "verbs") ? 0 : !strcmp(ei.transport, "intra") ? 1 : !strcmp(ei.transport, "ofi") ? 3 : 2; /* wire ids */
    uint8_t k[IT_KEY_MAX];
    size_t n = with_tl_part(key, klen, tl, part, plen, k, sizeof(k));
    REQUIRE(n > 0);
    gw_rkey_t *rk = NULL;
    gw_status_t st = gw_rkey_unpack(ep, k, n, &rk);
    fprintf(stderr, "%s key, %s: %s: %s\n", ei.transport, what, gw_status_name(st), gw_last_error(ctx));
    CHECK_ST(st, GW_ERR_INVALID_KEY);
    CHECK(rk == NULL);
    char want[32];
    snprintf(want, sizeof(want), "%s key part", ei.transport);
    CHECK(strstr(gw_last_error(ctx), want) != NULL || (tl == 0 && strstr(gw_last_error(ctx), "verbs key")));
    if (rk)
        gw_rkey_destroy(rk);
}

int main(void)
{
    /* (the transport is known before connecting: over verbs the target
     * accepts spare endpoints, see verbs_refused) */
    const char *tls = getenv("GPUWIRE_TRANSPORTS");
    g_verbs = tls && (!strcmp(tls, "verbs") || !strcmp(tls, "ofi"));
    it_target_cfg_t cfg = {.n_eps = g_verbs ? IT_MAX_EPS : 1, .n_regions = 4,
                           .region = {{RLEN, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, 0xA0},
                                      {RLEN, GW_ACCESS_REMOTE_READ, 0xA1},
                                      {RLEN, GW_ACCESS_REMOTE_WRITE, 0xA2},
                                      {RLEN, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, 0xA3}}};
    char addr[128];
    it_target_start(&T, &cfg, addr, sizeof(addr));
    ctx = it_ctx();
    for (int i = 0; i < cfg.n_eps; i++)
        g_eps[i] = it_connect(ctx, addr);
    ep = g_eps[0];
    gw_ep_info_t ei0 = {.size = sizeof(ei0)};
    IT_OK(ctx, gw_ep_query(ep, &ei0));
    REQUIRE(g_verbs == (!strcmp(ei0.transport, "verbs") || !strcmp(ei0.transport, "ofi")));
    REQUIRE(it_target_keys(&T, g_keys, g_klen) == 0);
    unpack_keys();
    uint8_t *buf = it_alloc(2 * RLEN);
    gwt_fill(buf, 2 * RLEN, 0x5EED);
    gw_request_t *r = NULL;

    /* 1. out of bounds, checked before anything is sent */
    bad_post(gw_put(ep, buf, 20, NULL, g_ra[R_RW] + RLEN - 10, g_rk[R_RW], &r), GW_ERR_OUT_OF_BOUNDS,
             "put crossing the end");
    bad_post(gw_put(ep, buf, 1, NULL, g_ra[R_RW] - 1, g_rk[R_RW], &r), GW_ERR_OUT_OF_BOUNDS,
             "put before the start");
    bad_post(gw_put(ep, buf, RLEN + 1, NULL, g_ra[R_RW], g_rk[R_RW], &r), GW_ERR_OUT_OF_BOUNDS,
             "put longer than the region");
    bad_post(gw_put(ep, buf, 16, NULL, UINT64_MAX - 7, g_rk[R_RW], &r), GW_ERR_OUT_OF_BOUNDS,
             "put whose end wraps around");
    bad_post(gw_get(ep, buf, 20, NULL, g_ra[R_RW] + RLEN - 10, g_rk[R_RW], &r), GW_ERR_OUT_OF_BOUNDS,
             "get crossing the end");
    bad_post(gw_put_notify(ep, buf, 8, NULL, g_ra[R_RW] + RLEN, g_rk[R_RW], 1, &r), GW_ERR_OUT_OF_BOUNDS,
             "put_notify past the end");
    bad_post(gw_put(ep, buf, 20, NULL, g_ra[R_RW] + RLEN - 10, g_rk[R_RW], NULL), GW_ERR_OUT_OF_BOUNDS,
             "untracked put crossing the end");

    /* 2. access */
    bad_post(gw_put(ep, buf, 8, NULL, g_ra[R_RO], g_rk[R_RO], &r), GW_ERR_ACCESS, "put into a read-only region");
    bad_post(gw_put_notify(ep, buf, 8, NULL, g_ra[R_RO], g_rk[R_RO], 3, &r), GW_ERR_ACCESS,
             "put_notify into a read-only region");
    bad_post(gw_get(ep, buf, 8, NULL, g_ra[R_WO], g_rk[R_WO], &r), GW_ERR_ACCESS, "get from a write-only region");
    for (int i = 0; i < 3; i++)
        untouched(i, "refused accesses");

    /* 3. forged keys: the target has the last word */
    size_t fl[4];
    memcpy(fl, g_klen, sizeof(fl));
    gw_rkey_t *f = forge(g_keys[R_RW], fl[R_RW], 32, 2 * RLEN, 8); /* claims twice the length */
    if (f) {
        gw_status_t st = op_result(gw_put(ep, buf, 64, NULL, g_ra[R_RW] + RLEN + 64, f, &r), &r);
        fprintf(stderr, "put through a key forged to twice the length -> %s\n", gw_status_name(st));
        if (g_verbs) { /* the NIC refuses the range its MR does not cover */
            gw_rkey_destroy(f); /* (unpacked on the endpoint about to go) */
            CHECK_ST(st, GW_ERR_INVALID_KEY);
            verbs_refused(GW_ERR_INVALID_KEY, "a put through a key forged to twice the length");
            f = forge(g_keys[R_RW], fl[R_RW], 32, 2 * RLEN, 8);
            REQUIRE(f);
        }
        st = op_result(gw_get(ep, buf, 64, NULL, g_ra[R_RW] + RLEN + 64, f, &r), &r);
        CHECK_ST(st, g_verbs ? GW_ERR_INVALID_KEY : GW_ERR_OUT_OF_BOUNDS);
        gw_rkey_destroy(f);
        if (g_verbs)
            verbs_refused(GW_ERR_INVALID_KEY, "a get through a key forged to twice the length");
    }
    f = forge(g_keys[R_RO], fl[R_RO], 40, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, 4);
    if (f) {
        gw_status_t st = op_result(gw_put(ep, buf, 64, NULL, g_ra[R_RO], f, &r), &r);
        fprintf(stderr, "put through a key forged to grant write -> %s\n", gw_status_name(st));
        gw_rkey_destroy(f);
        if (g_verbs) { /* the NIC refuses a WRITE to an MR without remote write */
            CHECK_ST(st, GW_ERR_INVALID_KEY);
            verbs_refused(GW_ERR_INVALID_KEY, "a put through a key forged to grant write");
        } else {
            CHECK_ST(st, GW_ERR_ACCESS);
        }
    }
    f = forge(g_keys[R_RW], fl[R_RW], 16, 0x1234567890ull, 8); /* names no region */
    if (f) {
        gw_status_t st = op_result(gw_put(ep, buf, 64, NULL, g_ra[R_RW], f, &r), &r);
        fprintf(stderr, "put through a key naming no region -> %s\n", gw_status_name(st));
        gw_rkey_destroy(f);
        if (g_verbs) {
            /* the envelope's region id grants nothing over verbs: the key's
             * verbs part (the MR's rkey, genuine here) does, so the put
             * lands in region R_RW; put its pattern back */
            CHECK_ST(st, GW_OK);
            it_cmd_t fill = {.type = IT_CMD_FILL, .region = R_RW, .off = 0, .len = RLEN, .seed = g_seed[R_RW]};
            it_target_cmd(&T, &fill, ctx);
        } else {
            CHECK_ST(st, GW_ERR_INVALID_KEY);
        }
    }
    /* a put_notify the target refuses sends no notification, also when it
     * is large enough to go striped over tcp (its notification deferred
     * behind the pieces must be dropped, not sent once older operations
     * are done); the next put_notify's is the one that arrives */
    f = g_verbs ? NULL : forge(g_keys[R_RW], fl[R_RW], 32, RLEN + (2u << 20), 8);
    if (f) {
        const size_t big = 1u << 20; /* over tcp's striping threshold (512 KiB) */
        uint8_t *bigbuf = it_alloc(big);
        gw_status_t st = op_result(gw_put_notify(ep, bigbuf, big, NULL, g_ra[R_RW] + RLEN, f, 77, &r), &r);
        fprintf(stderr, "put_notify of %zu bytes through a key forged to %u more bytes -> %s\n", big, 2u << 20,
                gw_status_name(st));
        CHECK_ST(st, GW_ERR_OUT_OF_BOUNDS);
        gw_rkey_destroy(f);
        gw_ep_info_t pi = {.size = sizeof(pi)};
        IT_OK(ctx, gw_ep_query(ep, &pi));
        fprintf(stderr, "  (over %s)\n", pi.path);
        CHECK_ST(op_result(gw_put_notify(ep, bigbuf, 0, NULL, g_ra[R_RW], g_rk[R_RW], 78, &r), &r), GW_OK);
        it_cmd_t w = {.type = IT_CMD_NOTIFY_ANY, .off = 10000};
        it_reply_t got = it_target_cmd(&T, &w, ctx);
        CHECK_ST((gw_status_t)got.a, GW_OK);
        CHECK(got.b == 78); /* not 77 */
        w.off = 300;
        got = it_target_cmd(&T, &w, ctx);
        CHECK_ST((gw_status_t)got.a, GW_ERR_TIMEOUT); /* and nothing after it */
        free(bigbuf);
    }
    for (int i = 0; i < 3; i++)
        untouched(i, "forged keys");

    /* 4. malformed keys, keys of another peer, keys of local-only regions */
    gw_rkey_t *bad = NULL;
    CHECK_ST(gw_rkey_unpack(ep, g_keys[R_RW], g_klen[R_RW] - 1, &bad), GW_ERR_INVALID_KEY);
    CHECK_ST(gw_rkey_unpack(ep, g_keys[R_RW], 3, &bad), GW_ERR_INVALID_KEY);
    CHECK_ST(gw_rkey_unpack(ep, g_keys[R_RW], 0, &bad), GW_ERR_INVALID_KEY);
    uint8_t k2[IT_KEY_MAX];
    memcpy(k2, g_keys[R_RW], g_klen[R_RW]);
    k2[0] ^= 0xFF;
    CHECK_ST(gw_rkey_unpack(ep, k2, g_klen[R_RW], &bad), GW_ERR_INVALID_KEY);
    memcpy(k2, g_keys[R_RW], g_klen[R_RW]);
    k2[4] += 1; /* version */
    CHECK_ST(gw_rkey_unpack(ep, k2, g_klen[R_RW], &bad), GW_ERR_INVALID_KEY);
    fprintf(stderr, "key of another version: %s\n", gw_last_error(ctx));
    CHECK(bad == NULL);
    /* a malformed part for the endpoint's transport: refused at unpack, not at the first put */
    const uint8_t junk[3] = {0xEE, 0xEE, 0xEE};
    bad_tl_part(g_keys[R_RW], g_klen[R_RW], junk, sizeof(junk), "3-byte part");
    uint8_t v9[4] = {9, 0, 0, 0}; /* (verbs: an unknown version; intra, tcp: a wrong size) */
    bad_tl_part(g_keys[R_RW], g_klen[R_RW], v9, sizeof(v9), "version-9 part");
    uint8_t p12[12]; /* (intra: a slot past the table; verbs: too short for an MR piece list) */
    gw_put_u32(p12, 1u << 20);
    gw_put_u64(p12 + 4, 1);
    bad_tl_part(g_keys[R_RW], g_klen[R_RW], p12, sizeof(p12), "12-byte part naming slot 2^20");
    gw_mem_t *mine = NULL, *local = NULL;
    IT_OK(ctx, gw_mem_reg(ctx, buf, RLEN, GW_ACCESS_REMOTE_WRITE, &mine));
    IT_OK(ctx, gw_mem_reg(ctx, buf + RLEN, RLEN, GW_ACCESS_LOCAL, &local));
    size_t ol = sizeof(k2);
    IT_OK(ctx, gw_mem_pack_rkey(mine, k2, &ol));
    CHECK_ST(gw_rkey_unpack(ep, k2, ol, &bad), GW_ERR_INVALID_KEY); /* ours, not the peer's */
    fprintf(stderr, "key of another context: %s\n", gw_last_error(ctx));
    ol = sizeof(k2);
    CHECK_ST(gw_mem_pack_rkey(local, k2, &ol), GW_ERR_INVALID);
    size_t need = 0;
    CHECK_ST(gw_mem_pack_rkey(mine, NULL, &need), GW_OK);
    CHECK(need > 0 && need <= IT_KEY_MAX);
    ol = need - 1;
    CHECK_ST(gw_mem_pack_rkey(mine, k2, &ol), GW_ERR_INVALID);
    CHECK(ol == need);
    IT_OK(ctx, gw_mem_dereg(mine));
    IT_OK(ctx, gw_mem_dereg(local));

    /* 5. revocation: the target deregisters; the key we hold stops working */
    it_cmd_t d = {.type = IT_CMD_DEREG, .region = R_DEREG};
    CHECK_ST((gw_status_t)it_target_cmd(&T, &d, ctx).a, GW_OK);
    gw_status_t st = op_result(gw_put(ep, buf, 128, NULL, g_ra[R_DEREG], g_rk[R_DEREG], &r), &r);
    fprintf(stderr, "put through a revoked key -> %s\n", gw_status_name(st));
    CHECK_ST(st, GW_ERR_INVALID_KEY);
    if (g_verbs)
        verbs_refused(GW_ERR_INVALID_KEY, "a put through a revoked key");
    st = op_result(gw_get(ep, buf, 128, NULL, g_ra[R_DEREG], g_rk[R_DEREG], &r), &r);
    CHECK_ST(st, GW_ERR_INVALID_KEY);
    if (g_verbs)
        verbs_refused(GW_ERR_INVALID_KEY, "a get through a revoked key");
    st = op_result(gw_put_notify(ep, buf, 128, NULL, g_ra[R_DEREG], g_rk[R_DEREG], 9, &r), &r);
    CHECK_ST(st, GW_ERR_INVALID_KEY);
    if (g_verbs)
        verbs_refused(GW_ERR_INVALID_KEY, "a put_notify through a revoked key");
    untouched(R_DEREG, "puts through a revoked key");
    /* untracked: the next flush reports it, the one after is clean (over
     * verbs: on the next endpoint, the refused one failed) */
    IT_OK(ctx, gw_put(ep, buf, 128, NULL, g_ra[R_DEREG], g_rk[R_DEREG], NULL));
    IT_OK(ctx, gw_flush(ep, &r));
    CHECK_ST(it_wait_free(r, 10000), GW_ERR_INVALID_KEY);
    if (g_verbs)
        verbs_refused(GW_ERR_INVALID_KEY, "an untracked put through a revoked key");
    IT_OK(ctx, gw_flush(ep, &r));
    CHECK_ST(it_wait_free(r, 10000), GW_OK);
    untouched(R_DEREG, "an untracked put through a revoked key");

    /* 6. the endpoint is still healthy: a valid put at the very end of the region */
    gw_ep_info_t info = {.size = sizeof(info)};
    IT_OK(ctx, gw_ep_query(ep, &info));
    CHECK_ST(info.error, GW_OK);
    IT_OK(ctx, gw_put(ep, buf, 1, NULL, g_ra[R_RW] + RLEN - 1, g_rk[R_RW], &r));
    CHECK_ST(it_wait_free(r, 10000), GW_OK);
    it_cmd_t v = {.type = IT_CMD_VERIFY, .region = R_RW, .off = 0, .len = RLEN - 1, .seed = 0xA0};
    CHECK(it_target_cmd(&T, &v, ctx).a == -1);

    for (int i = 0; i < 4; i++)
        gw_rkey_destroy(g_rk[i]);
    for (int i = g_cur; i < cfg.n_eps; i++)
        IT_OK(ctx, gw_ep_close(g_eps[i], 2000));
    CHECK(it_target_stop(&T, ctx) == 0);
    IT_OK(ctx, gw_context_destroy(ctx));
    free(buf);
    return gwt_done("it_safety");
}
