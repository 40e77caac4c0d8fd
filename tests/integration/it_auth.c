/* SPDX-License-Identifier: Apache-2.0 */
/* it_auth.c - shared-secret authentication (GPUWIRE_AUTH_SECRET[_FILE]):
 * a client without the secret, with a wrong one, or a client with a secret
 * against a server without one, is refused with GW_ERR_AUTH and a message
 * that says what to set; the server hands no endpoint for it to the
 * application (so no key is ever packed for it); the right secret, given
 * through a file, connects and moves data. */
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "it.h"

static gw_context_t *ctx_with(const char *secret, const char *file)
{
    unsetenv("GPUWIRE_AUTH_SECRET");
    unsetenv("GPUWIRE_AUTH_SECRET_FILE");
    if (secret)
        setenv("GPUWIRE_AUTH_SECRET", secret, 1);
    if (file)
        setenv("GPUWIRE_AUTH_SECRET_FILE", file, 1);
    gw_context_t *ctx = it_ctx();
    unsetenv("GPUWIRE_AUTH_SECRET");
    unsetenv("GPUWIRE_AUTH_SECRET_FILE");
    return ctx;
}

static void refused(const char *addr, const char *secret, const char *what)
{
    gw_context_t *ctx = ctx_with(secret, NULL);
    gw_ep_t *ep = NULL;
    gw_status_t st = gw_connect(ctx, addr, &ep);
    fprintf(stderr, "%s: %s: %s\n", what, gw_status_name(st), gw_last_error(ctx));
    CHECK_ST(st, GW_ERR_AUTH);
    CHECK(ep == NULL);
    CHECK(strstr(gw_last_error(ctx), "secret") != NULL);
    IT_OK(ctx, gw_context_destroy(ctx));
}

int main(void)
{
    if (!strstr(gw_build_features(), "auth"))
        SKIP("built without auth (OpenSSL libcrypto missing at build time)");
    it_target_cfg_t cfg = {.n_eps = 1, .n_regions = 1,
                           .region = {{4096, GW_ACCESS_REMOTE_WRITE | GW_ACCESS_REMOTE_READ, 0}},
                           .env = {"GPUWIRE_AUTH_SECRET=s3cret-\x01\x02-value"}};
    it_target_t T;
    char addr[128];
    it_target_start(&T, &cfg, addr, sizeof(addr));

    refused(addr, NULL, "no secret");
    refused(addr, "wrong", "wrong secret");
    refused(addr, "s3cret-\x01\x02-valu", "secret missing its last byte");
    /* the target has accepted nothing: it would have sent its key by now */
    struct pollfd p = {.fd = T.to_parent.rfd, .events = POLLIN};
    CHECK(poll(&p, 1, 300) == 0);

    /* a file with the secret and a trailing newline */
    char path[] = "/tmp/gw_it_auth_XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    const char content[] = "s3cret-\x01\x02-value\n";
    REQUIRE(write(fd, content, sizeof(content) - 1) == (ssize_t)sizeof(content) - 1);
    close(fd);
    gw_context_t *ctx = ctx_with("ignored-because-the-file-wins", path);
    gw_ep_t *ep = it_connect(ctx, addr);
    uint8_t keys[1][IT_KEY_MAX];
    size_t klen[1];
    REQUIRE(it_target_keys(&T, keys, klen) == 0);
    gw_rkey_t *rk = NULL;
    IT_OK(ctx, gw_rkey_unpack(ep, keys[0], klen[0], &rk));
    uint64_t raddr;
    size_t rlen;
    IT_OK(ctx, gw_rkey_range(rk, &raddr, &rlen));
    uint8_t data[4096];
    gwt_fill(data, sizeof(data), 31);
    gw_request_t *r = NULL;
    IT_OK(ctx, gw_put(ep, data, sizeof(data), NULL, raddr, rk, &r));
    CHECK_ST(it_wait_free(r, 10000), GW_OK);
    it_cmd_t v = {.type = IT_CMD_VERIFY, .len = sizeof(data), .seed = 31};
    CHECK(it_target_cmd(&T, &v, ctx).a == -1);
    gw_rkey_destroy(rk);
    IT_OK(ctx, gw_ep_close(ep, 2000));
    CHECK(it_target_stop(&T, ctx) == 0);
    IT_OK(ctx, gw_context_destroy(ctx));
    unlink(path);

    /* a secret on the client only: the server cannot prove it, refused too */
    it_target_cfg_t open_cfg = {.n_eps = 1, .n_regions = 1, .region = {{4096, GW_ACCESS_REMOTE_READ, 0}}};
    it_target_start(&T, &open_cfg, addr, sizeof(addr));
    refused(addr, "s3cret", "secret on the client only");
    ctx = ctx_with(NULL, NULL);
    ep = it_connect(ctx, addr);
    REQUIRE(it_target_keys(&T, keys, klen) == 0);
    IT_OK(ctx, gw_ep_close(ep, 2000));
    CHECK(it_target_stop(&T, ctx) == 0);
    IT_OK(ctx, gw_context_destroy(ctx));

    /* a secret file that cannot be read fails context creation, naming it */
    setenv("GPUWIRE_AUTH_SECRET_FILE", "/nonexistent/gw-secret", 1);
    gw_context_t *bad = NULL;
    CHECK_ST(gw_context_create(NULL, &bad), GW_ERR_CONFIG);
    CHECK(bad == NULL);
    unsetenv("GPUWIRE_AUTH_SECRET_FILE");
    return gwt_done("it_auth");
}
