/* SPDX-License-Identifier: Apache-2.0 */
/* names_table.c - an agent's table far past what one handshake message
 * holds (12 KiB, about 150 regions): the agent publishes
 * until the 1 MiB limit refuses (GW_ERR_NO_RESOURCE saying so); a peer's
 * handshake brings a stub, the first lookup fetches the whole table in
 * pieces (authenticated when the build has auth), and keys from the start,
 * middle and end of it work; a lookup after that costs no exchange. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/api.h"
#include "names/names_int.h"
#include "harness.h"
#include "names_util.h"

int main(void)
{
    if (strstr(gw_build_features(), "auth"))
        setenv("GPUWIRE_AUTH_SECRET", "big-table-secret", 1);
    gwt_agent_t b;
    gwt_agent_start(&b, "big", "127.0.0.1:0");
    gwt_agent_cmd(&b, 4);
    fprintf(stderr, "published %zu regions in %.2f s; the next: %s: %s\n", b.published, b.publish_s,
            gw_status_name(b.publish_st), b.publish_err);
    CHECK(b.published > 10000); /* 55 bytes an entry: about 19,000 fit 1 MiB (150 fitted 12 KiB) */
    CHECK_ST(b.publish_st, GW_ERR_NO_RESOURCE);
    CHECK(strstr(b.publish_err, "limit") != NULL);

    gw_context_t *a;
    REQUIRE_OK(gw_context_create(NULL, &a));
    REQUIRE_OK(gw_peer_add(a, "big", b.addr));
    gw_ep_t *ep;
    REQUIRE_OK(gw_peer_ep(a, "big", &ep));
    CHECK(gw_names_ep(ep)->table && gw_names_ep(ep)->table_len < GW_NT_INLINE_MAX); /* the handshake brought a stub */
    gw_nt_header_t h;
    char why[256];
    CHECK_ST(gw_nt_decode(gw_names_ep(ep)->table, gw_names_ep(ep)->table_len, &h, why, sizeof(why)), GW_OK);
    CHECK(h.stub && h.count == b.published + 1 && h.full_len > 64 * GW_NT_INLINE_MAX);

    char n0[32], n1[32], n2[32];
    snprintf(n0, sizeof(n0), "r%05d", 0);
    snprintf(n1, sizeof(n1), "r%05zu", b.published / 2);
    snprintf(n2, sizeof(n2), "r%05zu", b.published - 1);
    const char *names[] = {n0, n1, n2, "buf"};
    size_t idx[] = {0, b.published / 2, b.published - 1};
    gw_rkey_t *keys[4];
    double t0 = gwt_now_s();
    REQUIRE_OK(gw_peer_regions(a, "big", names, 4, keys));
    double dt = gwt_now_s() - t0;
    size_t pieces = (h.full_len + GW_NP_MAX_DATA - 1) / GW_NP_MAX_DATA;
    fprintf(stderr, "whole table: %u bytes, %u entries, fetched in %zu pieces in %.1f ms (%.2f ms a piece)\n",
            h.full_len, h.count, pieces, dt * 1e3, dt * 1e3 / (double)pieces);
    CHECK(gw_names_ep(ep)->table_len == h.full_len);
    for (int i = 0; i < 3; i++) {
        uint64_t raddr;
        size_t rlen;
        REQUIRE_OK(gw_rkey_range(keys[i], &raddr, &rlen));
        uint64_t want = (uint64_t)(uintptr_t)b.buf + (idx[i] % 64) * 16384;
        CHECK(raddr == want && rlen == 16384);
        char msg[32];
        snprintf(msg, sizeof(msg), "entry %zu", idx[i]);
        CHECK_ST(gwt_put_wait(ep, msg, strlen(msg) + 1, raddr + 100, keys[i]), GW_OK);
        CHECK(strcmp((char *)(uintptr_t)(raddr + 100), msg) == 0);
    }
    /* once fetched, lookups read the kept table: no exchange */
    t0 = gwt_now_s();
    gw_rkey_t *again;
    for (int i = 0; i < 100; i++) {
        REQUIRE_OK(gw_peer_regions(a, "big", &names[2], 1, &again));
        gw_rkey_destroy(again);
    }
    dt = gwt_now_s() - t0;
    fprintf(stderr, "100 lookups in the fetched table: %.2f ms\n", dt * 1e3);
    CHECK(dt < 1.0);
    /* a name that is not there: NOT_FOUND, the list of what there is cut short */
    const char *nope[] = {"r99999"};
    CHECK_ST(gw_peer_regions(a, "big", nope, 1, &again), GW_ERR_NOT_FOUND);
    CHECK(strstr(gw_last_error(a), "in all)") != NULL);
    fprintf(stderr, "missing: %.200s\n", gw_last_error(a));

    for (int i = 0; i < 4; i++)
        gw_rkey_destroy(keys[i]);
    CHECK_ST(gw_context_destroy(a), GW_OK);
    gwt_agent_stop(&b);
    return gwt_done("names_table");
}
