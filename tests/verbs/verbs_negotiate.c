/* SPDX-License-Identifier: Apache-2.0 */
/* verbs_negotiate.c - transport choice when verbs cannot connect the two
 * sides: the server forces a RoCE v2 IPv4 GID, the client an IPv6
 * link-local one, so they share no GID family.
 *   - GPUWIRE_TRANSPORTS=verbs on the client: the connect fails with
 *     GW_ERR_NO_TRANSPORT, and the reason names both sides' GIDs;
 *   - GPUWIRE_TRANSPORTS=verbs,tcp: tcp is taken and the endpoint's
 *     downgrades say why verbs was not.
 *   verbs_negotiate DEV    (skips without an RDMA device) */
#include <unistd.h>

#include "harness.h"

static gwt_chan_t pch, cch;
static const char *dev = "";

static int server(void *arg)
{
    (void)arg;
    setenv("GPUWIRE_IB_DEVICE", dev, 1);
    setenv("GPUWIRE_IB_GID_INDEX", "1", 1); /* rxe: the IPv4-mapped RoCE v2 GID */
    setenv("GPUWIRE_TRANSPORTS", "verbs,tcp", 1);
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    gw_listener_t *l;
    REQUIRE_OK(gw_listen(ctx, "127.0.0.1:0", &l));
    char addr[80];
    REQUIRE_OK(gw_listener_addr(l, addr, sizeof(addr)));
    gwt_chan_send(&cch, addr, (uint32_t)strlen(addr) + 1);
    gw_ep_t *ep;
    /* the first handshake fails (client allows only verbs); the second works */
    REQUIRE_OK(gw_accept(l, 30000, &ep));
    gw_ep_info_t info = {.size = sizeof(info)};
    gw_ep_query(ep, &info);
    CHECK(!strcmp(info.transport, "tcp"));
    char b[8];
    gw_request_t *r;
    REQUIRE_OK(gw_recv(ep, b, sizeof(b), NULL, 1, ~0ull, &r));
    REQUIRE_OK(gw_request_wait(r, 20000));
    gw_request_free(r);
    gw_ep_close(ep, 1000);
    gw_listener_destroy(l);
    gw_context_destroy(ctx);
    return gwt_done("verbs_negotiate server");
}

int main(int argc, char **argv)
{
    dev = argc > 1 ? argv[1] : "rxe0";
    gwt_require_rdma_device();
    gwt_chan_pair(&pch, &cch);
    int pid = gwt_spawn(server, NULL);
    char addr[80];
    REQUIRE(gwt_chan_recv(&pch, addr, sizeof(addr), 20000) > 0);
    setenv("GPUWIRE_IB_DEVICE", dev, 1);
    setenv("GPUWIRE_IB_GID_INDEX", "0", 1); /* rxe: the IPv6 link-local GID */

    setenv("GPUWIRE_TRANSPORTS", "verbs", 1);
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    gw_ep_t *ep = NULL;
    CHECK_ST(gw_connect(ctx, addr, &ep), GW_ERR_NO_TRANSPORT);
    const char *e = gw_last_error(ctx);
    fprintf(stderr, "verbs only: %s\n", e);
    CHECK(strstr(e, "verbs") != NULL);
    CHECK(strstr(e, "no common GID family") != NULL);
    CHECK(strstr(e, "1:IPv4") != NULL && strstr(e, "0:IPv6 link-local") != NULL);
    gw_context_destroy(ctx);

    setenv("GPUWIRE_TRANSPORTS", "verbs,tcp", 1);
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    REQUIRE_OK(gw_connect(ctx, addr, &ep));
    gw_ep_info_t info = {.size = sizeof(info)};
    REQUIRE_OK(gw_ep_query(ep, &info));
    fprintf(stderr, "verbs,tcp: took %s; downgrades: %s\n", info.transport, info.downgrades);
    CHECK(!strcmp(info.transport, "tcp"));
    CHECK(strstr(info.downgrades, "verbs") != NULL &&
          strstr(info.downgrades, "no common GID family") != NULL);
    gw_request_t *r;
    REQUIRE_OK(gw_send(ep, "bye", 4, NULL, 1, &r));
    REQUIRE_OK(gw_request_wait(r, 20000));
    gw_request_free(r);
    gw_ep_close(ep, 1000);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    CHECK(gwt_wait(pid, 60) == 0);
    return gwt_done("verbs_negotiate");
}
