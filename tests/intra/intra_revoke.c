/* SPDX-License-Identifier: Apache-2.0 */
/* intra_revoke - intra-host transport semantics with host memory:
 * automatic choice on one host, GPUWIRE_INTRA=off, revocation (a put
 * through a key of a deregistered region fails with GW_ERR_INVALID_KEY and
 * leaves the memory alone), notification order, unexpected eager and
 * rendezvous messages matched out of order, truncation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define REGION (1u << 20)
static gwt_chan_t pch, cch;

static int server(void *arg)
{
    (void)arg;
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    gw_listener_t *l;
    gw_ep_t *ep = gwt_listen_accept(ctx, &cch, &l);
    uint8_t *region = malloc(REGION);
    memset(region, 0xee, REGION);
    gw_mem_t *mem;
    REQUIRE_OK(gw_mem_reg(ctx, region, REGION, GW_ACCESS_REMOTE_WRITE | GW_ACCESS_REMOTE_READ, &mem));
    uint8_t key[512];
    size_t klen = sizeof(key);
    REQUIRE_OK(gw_mem_pack_rkey(mem, key, &klen));
    gwt_chan_send(&cch, key, (uint32_t)klen);
    /* notifications 1..20 in order, each after its put */
    for (uint64_t want = 1; want <= 20; want++) {
        uint64_t v = 0;
        REQUIRE_OK(gw_notify_wait(ep, 20000, &v));
        CHECK(v == want);
        CHECK(region[want * 100] == (uint8_t)want);
    }
    /* unexpected messages: tags 7 (eager), 8 (rendezvous 1 MiB), 9 (eager) sent
     * before these receives; take them 9, 8, 7 */
    char tok[8];
    REQUIRE(gwt_chan_recv(&cch, tok, sizeof(tok), 20000) > 0); /* all three sent */
    for (int k = 0; k < 200; k++)
        gw_progress(ctx);
    uint8_t *buf = malloc(REGION);
    gw_request_t *r;
    gw_request_info_t ri = {.size = sizeof(ri)};
    REQUIRE_OK(gw_recv(ep, buf, 64, NULL, 9, ~0ull, &r));
    CHECK_ST(gw_request_wait(r, 10000), GW_OK);
    gw_request_info(r, &ri);
    CHECK(ri.length == 9 && !memcmp(buf, "message9", 9));
    gw_request_free(r);
    REQUIRE_OK(gw_recv(ep, buf, REGION, NULL, 8, ~0ull, &r));
    CHECK_ST(gw_request_wait(r, 10000), GW_OK);
    gw_request_info(r, &ri);
    CHECK(ri.length == REGION && gwt_verify(buf, REGION, 8) == -1);
    gw_request_free(r);
    REQUIRE_OK(gw_recv(ep, buf, 4, NULL, 7, ~0ull, &r)); /* 9-byte message, 4-byte buffer */
    CHECK_ST(gw_request_wait(r, 10000), GW_ERR_TRUNCATED);
    gw_request_info(r, &ri);
    CHECK(ri.length == 9 && !memcmp(buf, "mess", 4));
    gw_request_free(r);
    /* revoke, then let the client try */
    CHECK_ST(gw_mem_dereg(mem), GW_OK);
    memset(region, 0x11, REGION);
    gwt_chan_send(&cch, "dereg", 6);
    REQUIRE(gwt_chan_recv(&cch, tok, sizeof(tok), 20000) > 0); /* the client tried */
    int untouched = 1;
    for (size_t i = 0; i < REGION; i++)
        untouched &= region[i] == 0x11;
    CHECK(untouched);
    gwt_chan_send(&cch, "ok", 3);
    REQUIRE(gwt_chan_recv(&cch, tok, sizeof(tok), 20000) > 0); /* the client closed */
    gw_ep_close(ep, 1000);
    gw_listener_destroy(l);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    free(region);
    free(buf);
    return gwt_done("intra_revoke server");
}

int main(void)
{
    /* GPUWIRE_INTRA=off: the transport says so */
    setenv("GPUWIRE_INTRA", "off", 1);
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    gw_transport_info_t ti = {.size = sizeof(ti)};
    int seen = 0;
    for (size_t i = 0; gw_transport_at(ctx, i, &ti) == GW_OK; i++)
        if (!strcmp(ti.name, "intra")) {
            seen = 1;
            CHECK(!ti.usable && strstr(ti.detail, "GPUWIRE_INTRA=off"));
            fprintf(stderr, "intra with GPUWIRE_INTRA=off: %s\n", ti.detail);
        }
    CHECK(seen);
    gw_context_destroy(ctx);
    unsetenv("GPUWIRE_INTRA");
    unsetenv("GPUWIRE_TRANSPORTS");

    gwt_chan_pair(&pch, &cch);
    int pid = gwt_spawn(server, NULL);
    gw_ep_t *ep = gwt_connect_chan(&pch, "intra", &ctx); /* intra: chosen automatically on one host */
    uint8_t key[512];
    int klen = gwt_chan_recv(&pch, key, sizeof(key), 20000);
    REQUIRE(klen > 0);
    gw_rkey_t *rk;
    REQUIRE_OK(gw_rkey_unpack(ep, key, (size_t)klen, &rk));
    uint64_t base;
    gw_rkey_range(rk, &base, NULL);
    uint8_t vals[21];
    for (int i = 1; i <= 20; i++) {
        vals[i] = (uint8_t)i;
        REQUIRE_OK(gw_put_notify(ep, &vals[i], 1, NULL, base + (uint64_t)i * 100, rk, (uint64_t)i, NULL));
    }
    gw_request_t *r;
    REQUIRE_OK(gw_flush(ep, &r));
    CHECK_ST(gw_request_wait(r, 10000), GW_OK);
    gw_request_free(r);
    /* three messages before the server receives */
    uint8_t *big = malloc(REGION);
    gwt_fill(big, REGION, 8);
    gw_request_t *m[3];
    REQUIRE_OK(gw_send(ep, "message7", 9, NULL, 7, &m[0]));
    REQUIRE_OK(gw_send(ep, big, REGION, NULL, 8, &m[1]));
    REQUIRE_OK(gw_send(ep, "message9", 9, NULL, 9, &m[2]));
    gwt_chan_send(&pch, "sent", 5);
    for (int i = 0; i < 3; i++) {
        CHECK_ST(gw_request_wait(m[i], 20000), GW_OK);
        gw_request_free(m[i]);
    }
    char tok[8];
    REQUIRE(gwt_chan_recv(&pch, tok, sizeof(tok), 20000) > 0); /* server deregistered */
    uint8_t junk[64];
    memset(junk, 0x77, sizeof(junk));
    REQUIRE_OK(gw_put(ep, junk, sizeof(junk), NULL, base, rk, &r));
    CHECK_ST(gw_request_wait(r, 10000), GW_ERR_INVALID_KEY);
    fprintf(stderr, "put after dereg: %s\n", gw_last_error(ctx));
    gw_request_free(r);
    REQUIRE_OK(gw_get(ep, junk, sizeof(junk), NULL, base, rk, &r));
    CHECK_ST(gw_request_wait(r, 10000), GW_ERR_INVALID_KEY);
    gw_request_free(r);
    gwt_chan_send(&pch, "tried", 6);
    REQUIRE(gwt_chan_recv(&pch, tok, sizeof(tok), 20000) > 0);
    gw_rkey_destroy(rk);
    CHECK_ST(gw_ep_close(ep, 1000), GW_OK);
    gwt_chan_send(&pch, "closed", 7);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    free(big);
    CHECK(gwt_wait(pid, 60) == 0);
    return gwt_done("intra_revoke");
}
