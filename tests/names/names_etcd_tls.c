/* SPDX-License-Identifier: Apache-2.0 */
/* names_etcd_tls.c - the etcd directory against a real etcd on loopback
 * that serves TLS only, checks client certificates and has authentication
 * on (certificates made by the test with openssl; users and roles made
 * with etcdctl).  Skipped (77) without an etcd or openssl binary.
 *
 * It checks: an agent registers and a peer reaches it by name, puts to it
 * and lists the directory, all over TLS as an etcd user; the peer's watch
 * (a stream through the same TLS and token) sees the agent leave; a token
 * etcd has let expire is fetched again by itself; and every way of getting
 * the set-up wrong fails with a status and a message that says what to
 * fix: a missing library (named), a wrong password, no user, a CA that did
 * not sign etcd's certificate, a CA file that is not there, no client
 * certificate, TLS settings with a plain-http URL. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "names_util.h"

static int pull_left(gw_context_t *ctx, const char *name, double secs)
{
    double end = gwt_now_s() + secs;
    while (gwt_now_s() < end) {
        gw_peer_event_t ev = {.size = sizeof(ev)};
        if (gw_peer_event_next(ctx, &ev) == GW_OK) {
            fprintf(stderr, "event: agent \"%s\" %s\n", ev.name, ev.type == GW_PEER_LEFT ? "left" : "is back");
            if (!strcmp(ev.name, name) && ev.type == GW_PEER_LEFT)
                return 1;
        } else {
            gw_context_wait(ctx, 20);
        }
    }
    return 0;
}

typedef struct listing {
    int saw_agent, saw_region;
} listing_t;

static int on_entry(void *arg, const gw_dir_entry_t *e)
{
    listing_t *l = arg;
    if (!e->region)
        l->saw_agent |= !strcmp(e->agent, "tls-a");
    else
        l->saw_region |= !strcmp(e->agent, "tls-a") && !strcmp(e->region, "buf");
    return 0;
}

/* gw_agent_listen under the environment as it is now: its status, the
 * message in msg. */
static gw_status_t try_agent(const char *name, char *msg, size_t cap)
{
    gw_context_t *c;
    gw_status_t st = gw_context_create(NULL, &c);
    if (st != GW_OK) {
        snprintf(msg, cap, "(gw_context_create failed: see the log above)");
        return st;
    }
    gw_listener_t *l = NULL;
    st = gw_agent_listen(c, name, "127.0.0.1:0", &l);
    snprintf(msg, cap, "%s", gw_last_error(c));
    if (l)
        gw_listener_destroy(l);
    CHECK_ST(gw_context_destroy(c), GW_OK);
    return st;
}

int main(void)
{
    setvbuf(stderr, NULL, _IOLBF, 0);
    char msg[1024];
    FILE *f;
    /* absent is quiet, until an etcd directory is asked for: then named */
    setenv("GPUWIRE_CURL_LIB", "libgwt-no-such-curl.so.4", 1);
    gw_context_t *q;
    REQUIRE_OK(gw_context_create(NULL, &q)); /* no directory: nothing is missing */
    CHECK_ST(gw_context_destroy(q), GW_OK);
    setenv("GPUWIRE_DIRECTORY", "etcds://127.0.0.1:1", 1);
    char logf[64];
    snprintf(logf, sizeof(logf), "/tmp/gwt-tls-%d.log", (int)getpid());
    setenv("GPUWIRE_LOG_FILE", logf, 1); /* a failed create's message goes to the log */
    CHECK_ST(gw_context_create(NULL, &q), GW_ERR_UNAVAILABLE);
    unsetenv("GPUWIRE_LOG_FILE");
    unsetenv("GPUWIRE_CURL_LIB");
    f = fopen(logf, "r");
    size_t got = f ? fread(msg, 1, sizeof(msg) - 1, f) : 0;
    msg[got] = '\0';
    if (f)
        fclose(f);
    unlink(logf);
    fprintf(stderr, "libcurl missing: %s", msg);
    CHECK(strstr(msg, "libgwt-no-such-curl.so.4") && strstr(msg, "GPUWIRE_CURL_LIB"));

    gwt_etcd_t etcd;
    if (gwt_etcd_start_tls(&etcd) != 0)
        SKIP("no etcd or openssl binary (Debian: apt-get install etcd-server openssl; or set GWT_ETCD)");
    gwt_etcd_enable_auth(&etcd, "gw", "gw-pass", "/gwtls/");
    char pwfile[256];
    snprintf(pwfile, sizeof(pwfile), "%s/password", etcd.dir);
    f = fopen(pwfile, "w");
    REQUIRE(f && fputs("gw-pass\n", f) >= 0 && fclose(f) == 0);
    setenv("GPUWIRE_DIRECTORY", etcd.url, 1);
    setenv("GPUWIRE_DIRECTORY_PREFIX", "/gwtls/", 1);
    setenv("GPUWIRE_DIRECTORY_TTL", "2", 1);
    setenv("GPUWIRE_DIRECTORY_CA", etcd.ca, 1);
    setenv("GPUWIRE_DIRECTORY_CERT", etcd.cert, 1);
    setenv("GPUWIRE_DIRECTORY_KEY", etcd.key, 1);
    setenv("GPUWIRE_DIRECTORY_USER", "gw", 1);
    setenv("GPUWIRE_DIRECTORY_PASSWORD_FILE", pwfile, 1);

    /* an agent and a peer, both over TLS as etcd user gw */
    gwt_agent_t a;
    gwt_agent_start(&a, "tls-a", "127.0.0.1:0");
    gw_context_t *b;
    REQUIRE_OK(gw_context_create(NULL, &b));
    char desc[512];
    REQUIRE_OK(gw_directory_describe(b, desc, sizeof(desc)));
    fprintf(stderr, "directory: %s\n", desc);
    CHECK(strstr(desc, "reachable") && strstr(desc, "TLS") && strstr(desc, "client certificate") &&
          strstr(desc, "etcd user gw") && strstr(desc, "1 agent(s)"));
    REQUIRE_OK(gw_peer_watch(b, GW_PEER_WATCH_ALL, NULL, NULL));
    const char *one[] = {"buf"};
    gw_rkey_t *rk;
    REQUIRE_OK(gw_peer_regions(b, "tls-a", one, 1, &rk));
    gw_ep_t *ep;
    REQUIRE_OK(gw_peer_ep(b, "tls-a", &ep));
    uint64_t raddr;
    size_t rlen;
    REQUIRE_OK(gw_rkey_range(rk, &raddr, &rlen));
    CHECK_ST(gwt_put_wait(ep, "over etcds", 11, raddr, rk), GW_OK);
    CHECK(memcmp(a.buf, "over etcds", 11) == 0);
    listing_t l = {0};
    REQUIRE_OK(gw_directory_list(b, on_entry, &l));
    CHECK(l.saw_agent && l.saw_region);
    gw_rkey_destroy(rk);

    /* the token: fetched once, fetched again after etcd let it expire
     * (etcd runs with --auth-token-ttl 2 here: a token unused that long
     * goes) */
    gw_etcd_t c;
    char why[512];
    REQUIRE_OK(gwt_etcd_client(&c, &etcd, "gw", "gw-pass", why, sizeof(why)));
    int64_t rev = 0;
    REQUIRE_OK(gw_etcd_range(&c, "/gwtls/agents/tls-a", 0, NULL, NULL, &rev, why, sizeof(why)));
    CHECK(c.auths == 1 && rev > 0);
    usleep(3500 * 1000);
    CHECK_ST(gw_etcd_range(&c, "/gwtls/agents/tls-a", 0, NULL, NULL, &rev, why, sizeof(why)), GW_OK);
    fprintf(stderr, "tokens fetched by one client across an expiry: %u\n", c.auths);
    CHECK(c.auths == 2);
    /* outside the user's prefix: refused, and said so */
    CHECK_ST(gw_etcd_put(&c, "/elsewhere/x", "1", 1, 0, NULL, why, sizeof(why)), GW_ERR_AUTH);
    fprintf(stderr, "outside the role's prefix: %s\n", why);
    CHECK(strstr(why, "permission denied") != NULL);
    gw_etcd_fini(&c);

    /* the watch (TLS, token) sees the agent go */
    gwt_agent_stop(&a);
    CHECK(pull_left(b, "tls-a", 10.0));
    CHECK_ST(gw_context_destroy(b), GW_OK);

    /* set-ups that are wrong, each said */
    setenv("GPUWIRE_DIRECTORY_PASSWORD", "wrong", 1);
    unsetenv("GPUWIRE_DIRECTORY_PASSWORD_FILE");
    CHECK_ST(try_agent("tls-w", msg, sizeof(msg)), GW_ERR_AUTH);
    fprintf(stderr, "wrong password: %s\n", msg);
    CHECK(strstr(msg, "etcd user \"gw\"") && strstr(msg, "authentication failed") &&
          strstr(msg, "GPUWIRE_DIRECTORY_PASSWORD_FILE"));
    unsetenv("GPUWIRE_DIRECTORY_USER");
    unsetenv("GPUWIRE_DIRECTORY_PASSWORD");
    CHECK_ST(try_agent("tls-w", msg, sizeof(msg)), GW_ERR_AUTH);
    fprintf(stderr, "no user: %s\n", msg);
    CHECK(strstr(msg, "GPUWIRE_DIRECTORY_USER") != NULL);
    setenv("GPUWIRE_DIRECTORY_USER", "gw", 1);
    setenv("GPUWIRE_DIRECTORY_PASSWORD_FILE", pwfile, 1);
    setenv("GPUWIRE_DIRECTORY_CA", etcd.other_ca, 1);
    CHECK_ST(try_agent("tls-w", msg, sizeof(msg)), GW_ERR_AUTH);
    fprintf(stderr, "another CA: %s\n", msg);
    CHECK(strstr(msg, "GPUWIRE_DIRECTORY_CA") != NULL);
    setenv("GPUWIRE_DIRECTORY_CA", "/nonexistent/gwt-ca.pem", 1);
    CHECK_ST(try_agent("tls-w", msg, sizeof(msg)), GW_ERR_CONFIG);
    fprintf(stderr, "a CA file that is not there: %s\n", msg);
    CHECK(strstr(msg, "GPUWIRE_DIRECTORY_CA") != NULL);
    setenv("GPUWIRE_DIRECTORY_CA", etcd.ca, 1);
    unsetenv("GPUWIRE_DIRECTORY_CERT");
    unsetenv("GPUWIRE_DIRECTORY_KEY");
    CHECK_ST(try_agent("tls-w", msg, sizeof(msg)), GW_ERR_AUTH);
    fprintf(stderr, "no client certificate: %s\n", msg);
    CHECK(strstr(msg, "GPUWIRE_DIRECTORY_CERT") != NULL);
    setenv("GPUWIRE_DIRECTORY_CERT", etcd.cert, 1);
    setenv("GPUWIRE_DIRECTORY_KEY", etcd.key, 1);
    char plain[80];
    snprintf(plain, sizeof(plain), "etcd://%s", etcd.hostport);
    setenv("GPUWIRE_DIRECTORY", plain, 1);
    CHECK_ST(try_agent("tls-w", msg, sizeof(msg)), GW_ERR_CONFIG); /* (gw_context_create refuses it) */
    setenv("GPUWIRE_DIRECTORY", etcd.url, 1);
    /* and right again: the name is free (the agent's lease was revoked) */
    CHECK_ST(try_agent("tls-a", msg, sizeof(msg)), GW_OK);

    gwt_etcd_stop(&etcd);
    return gwt_done("names_etcd_tls");
}
