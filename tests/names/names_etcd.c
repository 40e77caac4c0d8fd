/* names_etcd.c - the directory: a real etcd on loopback (skipped with the
 * reason where no etcd binary is installed).  Agents register under a lease;
 * a peer finds them by name through the watched cache; an unknown name fails
 * fast naming the directory; gw_directory_list lists agents and regions; an
 * agent that dies (SIGKILL) disappears when its lease runs out and the watch
 * says so; one that comes back has a new epoch and old keys fail; a forged
 * directory entry can neither hand a peer a key nor impersonate an agent
 * (authentication on). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "bootstrap/wire.h"
#include "directory/etcd.h"
#include "harness.h"
#include "names_util.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static gw_status_t put_wait(gw_ep_t *ep, const void *buf, size_t len, uint64_t raddr, gw_rkey_t *rk)
{
    gw_request_t *req;
    gw_status_t st = gw_put(ep, buf, len, NULL, raddr, rk, &req);
    if (st != GW_OK)
        return st;
    st = gw_request_wait(req, 10000);
    gw_request_free(req);
    return st;
}

typedef struct listing {
    int agents, regions, saw_b, saw_buf;
} listing_t;

static int on_entry(void *arg, const gw_dir_entry_t *e)
{
    listing_t *l = arg;
    if (!e->region) {
        l->agents++;
        l->saw_b |= !strcmp(e->agent, "b") && strstr(e->addr, ":") != NULL && e->epoch > 0;
    } else {
        l->regions++;
        l->saw_buf |= !strcmp(e->agent, "b") && !strcmp(e->region, "buf") && e->rlen == 1 << 20 &&
                      !strcmp(e->type, "host") && e->access == 3;
    }
    return 0;
}

/* A child process that registers agent `name`, tells the parent, and waits
 * to be killed. */
static int child_agent(const char *name)
{
    int p[2];
    REQUIRE(pipe(p) == 0);
    int pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        gwt_agent_t c;
        gwt_agent_start(&c, name, "127.0.0.1:0");
        char ok = 1;
        if (write(p[1], &ok, 1) != 1)
            _exit(1);
        for (;;)
            pause();
    }
    close(p[1]);
    char ok = 0;
    REQUIRE(read(p[0], &ok, 1) == 1 && ok == 1);
    close(p[0]);
    return pid;
}

static int listed_is(gw_context_t *ctx, const char *name, int want, double timeout_s)
{
    double end = now_s() + timeout_s;
    while (now_s() < end) {
        gw_peer_info_t pi = {.size = sizeof(pi)};
        if (gw_peer_query(ctx, name, &pi) == GW_OK && pi.listed == want)
            return 1;
        usleep(50000);
    }
    return 0;
}

int main(void)
{
    gwt_etcd_t etcd;
    if (gwt_etcd_start(&etcd) != 0)
        SKIP("no etcd binary (Debian: apt-get install etcd-server; or set GWT_ETCD)");
    setenv("GPUWIRE_DIRECTORY", etcd.url, 1);
    setenv("GPUWIRE_DIRECTORY_PREFIX", "/gwtest/", 1);
    setenv("GPUWIRE_DIRECTORY_TTL", "2", 1);
    setenv("GPUWIRE_AUTH_SECRET", "directory-test-secret", 1);
    int auth = strstr(gw_build_features(), "auth") != NULL;
    if (!auth)
        unsetenv("GPUWIRE_AUTH_SECRET");

    gwt_agent_t b;
    gwt_agent_start(&b, "b", "127.0.0.1:0");
    gw_context_t *a;
    REQUIRE_OK(gw_context_create(NULL, &a));

    char desc[256];
    REQUIRE_OK(gw_directory_describe(a, desc, sizeof(desc)));
    fprintf(stderr, "directory: %s\n", desc);
    CHECK(strstr(desc, "reachable") && strstr(desc, "1 agent(s)"));

    /* by name through the directory */
    const char *one[] = {"buf"};
    gw_rkey_t *rk;
    REQUIRE_OK(gw_peer_regions(a, "b", one, 1, &rk));
    gw_ep_t *ep;
    REQUIRE_OK(gw_peer_ep(a, "b", &ep));
    uint64_t raddr;
    size_t rlen;
    REQUIRE_OK(gw_rkey_range(rk, &raddr, &rlen));
    CHECK_ST(put_wait(ep, "via etcd", 9, raddr, rk), GW_OK);
    CHECK(memcmp(b.buf, "via etcd", 9) == 0);
    gw_peer_info_t pi = {.size = sizeof(pi)};
    REQUIRE_OK(gw_peer_query(a, "b", &pi));
    CHECK(pi.listed == 1 && pi.connected == 1 && pi.epoch > 0);

    /* an unknown name fails fast and names the directory */
    gw_ep_t *x;
    double t0 = now_s();
    CHECK_ST(gw_peer_ep(a, "nobody", &x), GW_ERR_NOT_FOUND);
    double dt = now_s() - t0;
    CHECK(dt < 1.0);
    CHECK(strstr(gw_last_error(a), etcd.url) != NULL);
    fprintf(stderr, "unknown name (%.1f ms): %s\n", dt * 1e3, gw_last_error(a));

    /* the listing */
    listing_t l = {0};
    REQUIRE_OK(gw_directory_list(a, on_entry, &l));
    CHECK(l.agents == 1 && l.regions == 1 && l.saw_b && l.saw_buf);

    /* forged entries: a region key the agent never published, and an agent
     * entry that points at an impostor (another secret) */
    gw_etcd_t e;
    char why[256];
    REQUIRE_OK(gw_etcd_init(&e, etcd.url, 2000, why, sizeof(why)));
    uint8_t forged[GW_RKEY_MAX_LEN];
    gw_rkey_wire_t w = {.owner_uuid = ep->peer_uuid, .id = 0x1234, .addr = raddr, .len = 1ull << 40,
                        .access = 3, .mem_type = 0};
    size_t fl = gw_rkey_encode(&w, forged, sizeof(forged));
    char val[1024];
    snprintf(val, sizeof(val), "{\"addr\":\"0x%llx\",\"len\":\"1099511627776\",\"type\":\"host\",\"access\":3,\"key\":\"",
             (unsigned long long)raddr);
    size_t vl = strlen(val);
    for (size_t i = 0; i < fl; i++)
        vl += (size_t)snprintf(val + vl, sizeof(val) - vl, "%02x", forged[i]);
    snprintf(val + vl, sizeof(val) - vl, "\"}");
    REQUIRE_OK(gw_etcd_put(&e, "/gwtest/regions/b/forged", val, strlen(val), 0, NULL, why, sizeof(why)));
    const char *fk[] = {"forged"};
    gw_rkey_t *frk = (gw_rkey_t *)1;
    CHECK_ST(gw_peer_regions(a, "b", fk, 1, &frk), GW_ERR_NOT_FOUND); /* keys come from the agent only */
    CHECK(frk == NULL);
    /* even handed over by other means, the agent refuses a key it did not issue */
    gw_rkey_t *direct;
    REQUIRE_OK(gw_rkey_unpack(ep, forged, fl, &direct));
    gw_status_t fst = put_wait(ep, "evil", 4, raddr + (2u << 20), direct);
    CHECK(fst == GW_ERR_INVALID_KEY || fst == GW_ERR_OUT_OF_BOUNDS);
    CHECK(memcmp(b.buf, "via etcd", 9) == 0);
    gw_rkey_destroy(direct);
    if (auth) {
        setenv("GPUWIRE_AUTH_SECRET", "the-impostors-secret", 1);
        gwt_agent_t imp;
        gwt_agent_start(&imp, "impostor", "127.0.0.1:0");
        setenv("GPUWIRE_AUTH_SECRET", "directory-test-secret", 1);
        snprintf(val, sizeof(val), "{\"addr\":\"%s\",\"uuid\":\"%016llx\",\"pid\":1,\"host\":\"x\"}", imp.addr,
                 (unsigned long long)ep->peer_uuid);
        REQUIRE_OK(gw_etcd_put(&e, "/gwtest/agents/evil", val, strlen(val), 0, NULL, why, sizeof(why)));
        CHECK_ST(gw_peer_ep(a, "evil", &x), GW_ERR_AUTH);
        fprintf(stderr, "forged agent entry: %s\n", gw_last_error(a));
        gwt_agent_stop(&imp);
        gw_etcd_delete(&e, "/gwtest/agents/evil", 0, why, sizeof(why));
    }
    gw_etcd_delete(&e, "/gwtest/regions/b/forged", 0, why, sizeof(why));

    /* a dead agent disappears when its lease runs out (TTL 2 s) */
    int pid = child_agent("d");
    gw_ep_t *dep;
    REQUIRE_OK(gw_peer_ep(a, "d", &dep));
    CHECK(listed_is(a, "d", 1, 5));
    t0 = now_s();
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
    CHECK(listed_is(a, "d", 0, 10));
    fprintf(stderr, "dead agent left the directory %.1f s after SIGKILL (TTL 2 s)\n", now_s() - t0);
    REQUIRE_OK(gw_peer_query(a, "d", &pi));
    CHECK(pi.changes >= 1);
    CHECK_ST(gw_peer_ep(a, "d", &x), GW_ERR_NOT_FOUND);

    /* an agent stopped longer than its lease (SIGSTOP): it drops out, and on
     * waking finds its lease gone and registers again by itself */
    int zpid = child_agent("z");
    CHECK(listed_is(a, "z", 1, 5));
    kill(zpid, SIGSTOP);
    CHECK(listed_is(a, "z", 0, 10));
    kill(zpid, SIGCONT);
    t0 = now_s();
    CHECK(listed_is(a, "z", 1, 10));
    fprintf(stderr, "stopped agent registered again %.1f s after SIGCONT\n", now_s() - t0);
    gw_ep_t *zep;
    CHECK_ST(gw_peer_ep(a, "z", &zep), GW_OK);
    kill(zpid, SIGKILL);
    waitpid(zpid, &status, 0);

    /* it comes back under the same name: the watch sees it, a new epoch, old keys void */
    gw_rkey_t *drk;
    gw_peer_info_t before = {.size = sizeof(before)};
    REQUIRE_OK(gw_peer_query(a, "b", &before));
    REQUIRE_OK(gw_peer_regions(a, "b", one, 1, &drk)); /* a key of b's first epoch */
    gwt_agent_cmd(&b, 2);                              /* b restarts: new context, same address */
    double end = now_s() + 10;
    gw_ep_t *nep = ep;
    while (now_s() < end) {
        gw_progress(a);
        if (gw_peer_ep(a, "b", &nep) == GW_OK && nep != ep)
            break;
        usleep(20000);
    }
    CHECK(nep != ep);
    REQUIRE_OK(gw_peer_query(a, "b", &pi));
    CHECK(pi.epoch > before.epoch && pi.restarts == 1 && pi.changes >= 1);
    CHECK_ST(put_wait(nep, "old", 3, raddr, drk), GW_ERR_INVALID_KEY);
    CHECK(strstr(gw_last_error(a), "restarted") != NULL);
    gw_rkey_t *nrk;
    REQUIRE_OK(gw_peer_regions(a, "b", one, 1, &nrk));
    CHECK_ST(put_wait(nep, "new epoch", 10, raddr, nrk), GW_OK);
    CHECK(memcmp(b.buf, "new epoch", 10) == 0);

    /* lookups come from the watched cache: with etcd frozen, gw_peer_ep still
     * answers at once and transfers go on */
    kill(etcd.pid, SIGSTOP);
    t0 = now_s();
    gw_ep_t *cached;
    for (int i = 0; i < 1000; i++)
        CHECK_ST(gw_peer_ep(a, "b", &cached), GW_OK);
    dt = now_s() - t0;
    CHECK(cached == nep && dt < 0.5);
    CHECK_ST(put_wait(cached, "frozen", 7, raddr, nrk), GW_OK);
    fprintf(stderr, "1000 lookups with etcd stopped: %.3f ms\n", dt * 1e3);
    kill(etcd.pid, SIGCONT);

    gw_rkey_destroy(rk);
    gw_rkey_destroy(drk);
    gw_rkey_destroy(nrk);
    CHECK_ST(gw_context_destroy(a), GW_OK);
    gwt_agent_stop(&b);
    /* a stopped agent withdrew itself at once (lease revoked) */
    gw_context_t *c;
    REQUIRE_OK(gw_context_create(NULL, &c));
    l = (listing_t){0};
    REQUIRE_OK(gw_directory_list(c, on_entry, &l));
    CHECK(!l.saw_b && !l.saw_buf); /* (killed agents linger until their lease runs out) */
    CHECK_ST(gw_context_destroy(c), GW_OK);
    gwt_etcd_stop(&etcd);
    return gwt_done("names_etcd");
}
