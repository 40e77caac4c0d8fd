/* SPDX-License-Identifier: Apache-2.0 */
/* names_etcd.c - the directory: a real etcd on loopback (skipped with the
 * reason where no etcd binary is installed).  Agents register under a lease;
 * a peer finds them by name through the watched cache; an unknown name fails
 * fast naming the directory; gw_directory_list lists agents and regions; an
 * agent that dies (SIGKILL) disappears when its lease runs out and the watch
 * says so; one that comes back has a new epoch and old keys fail; a forged
 * directory entry can neither hand a peer a key nor impersonate an agent
 * (authentication on). */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "bootstrap/wire.h"
#include "harness.h"
#include "names_util.h"

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

static int listed_is(gw_context_t *ctx, const char *name, int want, double timeout_s)
{
    double end = gwt_now_s() + timeout_s;
    while (gwt_now_s() < end) {
        gw_peer_info_t pi = {.size = sizeof(pi)};
        if (gw_peer_query(ctx, name, &pi) == GW_OK && pi.listed == want)
            return 1;
        usleep(50000);
    }
    return 0;
}

/* Events received by a callback, in order. */
typedef struct ev_log {
    gw_peer_event_t v[256];
    int n;
    int in_cb; /* the callback runs on the thread that calls gw_progress */
    pthread_t progress_thread;
} ev_log_t;

static void on_event(void *arg, const gw_peer_event_t *ev)
{
    ev_log_t *l = arg;
    l->in_cb += pthread_equal(pthread_self(), l->progress_thread) ? 0 : 1000;
    if (l->n < 256)
        l->v[l->n++] = *ev;
    fprintf(stderr, "event: agent \"%s\" %s (epoch %llu%s)\n", ev->name, ev->type == GW_PEER_LEFT ? "left" : "is back",
            (unsigned long long)ev->epoch, ev->restarted ? ", restarted" : "");
}

/* Index in l of the first event (name, type) from index `from`, or -1. */
static int ev_find(const ev_log_t *l, int from, const char *name, int type)
{
    for (int i = from; i < l->n; i++)
        if (!strcmp(l->v[i].name, name) && l->v[i].type == type)
            return i;
    return -1;
}

/* Progresses ctx (the callback's deliveries) until event (name, type) from
 * index `from` is in l; returns its index or -1 after secs. */
static int wait_event(gw_context_t *ctx, ev_log_t *l, int from, const char *name, int type, double secs)
{
    double end = gwt_now_s() + secs;
    int i;
    while ((i = ev_find(l, from, name, type)) < 0 && gwt_now_s() < end)
        if (gw_progress(ctx) == 0)
            gw_context_wait(ctx, 10);
    return i;
}

/* The pull form: takes events from ctx's queue into l until (name, type). */
static int pull_event(gw_context_t *ctx, ev_log_t *l, const char *name, int type, double secs)
{
    double end = gwt_now_s() + secs;
    int i;
    while ((i = ev_find(l, 0, name, type)) < 0 && gwt_now_s() < end) {
        gw_peer_event_t ev = {.size = sizeof(ev)};
        if (gw_peer_event_next(ctx, &ev) == GW_OK && l->n < 256)
            l->v[l->n++] = ev;
        else
            gw_context_wait(ctx, 20); /* the context fd turns ready when one is queued */
    }
    return i;
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
    CHECK_ST(gwt_put_wait(ep, "via etcd", 9, raddr, rk), GW_OK);
    CHECK(memcmp(b.buf, "via etcd", 9) == 0);
    gw_peer_info_t pi = {.size = sizeof(pi)};
    REQUIRE_OK(gw_peer_query(a, "b", &pi));
    CHECK(pi.listed == 1 && pi.connected == 1 && pi.epoch > 0);

    /* an unknown name fails fast and names the directory */
    gw_ep_t *x;
    double t0 = gwt_now_s();
    CHECK_ST(gw_peer_ep(a, "nobody", &x), GW_ERR_NOT_FOUND);
    double dt = gwt_now_s() - t0;
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
    REQUIRE_OK(gwt_etcd_client(&e, &etcd, NULL, NULL, why, sizeof(why)));
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
    gw_status_t fst = gwt_put_wait(ep, "evil", 4, raddr + (2u << 20), direct);
    fprintf(stderr, "put with a forged key: %s\n", gw_status_name(fst));
    /* refused: by the owner's table (tcp), or over intra already at the
     * initiator, since a key the owner never issued carries no intra part */
    CHECK(fst == GW_ERR_INVALID_KEY || fst == GW_ERR_OUT_OF_BOUNDS || fst == GW_ERR_UNSUPPORTED);
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

    /* events: a's callback (delivered by a's progress) for the agents a uses;
     * wc, which uses none, takes every agent's events from its queue */
    static ev_log_t evs, wevs;
    evs.progress_thread = pthread_self();
    REQUIRE_OK(gw_peer_watch(a, 0, on_event, &evs));
    gw_context_t *wc;
    REQUIRE_OK(gw_context_create(NULL, &wc));
    REQUIRE_OK(gw_peer_watch(wc, GW_PEER_WATCH_ALL, NULL, NULL));
    gw_peer_event_t none = {.size = sizeof(none)};
    CHECK_ST(gw_peer_event_next(wc, &none), GW_ERR_NOT_FOUND);
    none.size = 8;
    CHECK_ST(gw_peer_event_next(wc, &none), GW_ERR_INVALID);
    CHECK_ST(gw_peer_watch(a, 0x80, on_event, &evs), GW_ERR_INVALID);

    /* a dead agent disappears when its lease runs out (TTL 2 s) */
    int pid = gwt_child_agent("d");
    gw_ep_t *dep;
    REQUIRE_OK(gw_peer_ep(a, "d", &dep));
    CHECK(listed_is(a, "d", 1, 5));
    t0 = gwt_now_s();
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
    CHECK(listed_is(a, "d", 0, 10));
    fprintf(stderr, "dead agent left the directory %.1f s after SIGKILL (TTL 2 s)\n", gwt_now_s() - t0);
    REQUIRE_OK(gw_peer_query(a, "d", &pi));
    CHECK(pi.changes >= 1);
    CHECK_ST(gw_peer_ep(a, "d", &x), GW_ERR_NOT_FOUND);
    int ed = wait_event(a, &evs, 0, "d", GW_PEER_LEFT, 5);
    CHECK(ed >= 0);
    if (ed >= 0)
        CHECK(evs.v[ed].epoch > 0 && strchr(evs.v[ed].addr, ':') && evs.v[ed].dropped == 0);
    CHECK(ev_find(&evs, 0, "b", GW_PEER_LEFT) < 0); /* b is still there */
    CHECK(pull_event(wc, &wevs, "d", GW_PEER_LEFT, 5) >= 0); /* every agent's events for wc */

    /* an agent stopped longer than its lease (SIGSTOP): it drops out, and on
     * waking finds its lease gone and registers again by itself */
    int zpid = gwt_child_agent("z");
    CHECK(listed_is(a, "z", 1, 5));
    gw_ep_t *zep;
    CHECK_ST(gw_peer_ep(a, "z", &zep), GW_OK); /* a uses z: its events come */
    int mark = evs.n;
    kill(zpid, SIGSTOP);
    CHECK(listed_is(a, "z", 0, 10));
    CHECK(wait_event(a, &evs, mark, "z", GW_PEER_LEFT, 5) >= 0);
    kill(zpid, SIGCONT);
    t0 = gwt_now_s();
    CHECK(listed_is(a, "z", 1, 10));
    fprintf(stderr, "stopped agent registered again %.1f s after SIGCONT\n", gwt_now_s() - t0);
    int ez = wait_event(a, &evs, mark, "z", GW_PEER_BACK, 5);
    CHECK(ez >= 0);
    if (ez >= 0)
        CHECK(evs.v[ez].restarted == 0); /* the same context registered again */
    CHECK_ST(gw_peer_ep(a, "z", &zep), GW_OK);
    kill(zpid, SIGKILL);
    waitpid(zpid, &status, 0);

    /* it comes back under the same name: the watch sees it, a new epoch, old keys void */
    gw_rkey_t *drk;
    gw_peer_info_t before = {.size = sizeof(before)};
    REQUIRE_OK(gw_peer_query(a, "b", &before));
    REQUIRE_OK(gw_peer_regions(a, "b", one, 1, &drk)); /* a key of b's first epoch */
    gwt_agent_cmd(&b, 2);                              /* b restarts: new context, same address */
    double end = gwt_now_s() + 10;
    gw_ep_t *nep = ep;
    while (gwt_now_s() < end) {
        gw_progress(a);
        if (gw_peer_ep(a, "b", &nep) == GW_OK && nep != ep)
            break;
        usleep(20000);
    }
    CHECK(nep != ep);
    mark = wait_event(a, &evs, 0, "b", GW_PEER_LEFT, 5); /* its listener went: lease revoked at once */
    CHECK(mark >= 0);
    int eb = wait_event(a, &evs, mark < 0 ? 0 : mark, "b", GW_PEER_BACK, 5);
    CHECK(eb >= 0);
    if (eb >= 0)
        CHECK(evs.v[eb].restarted == 1 && strcmp(evs.v[eb].addr, b.addr) == 0);
    CHECK(evs.in_cb == 0); /* every callback ran on this thread, from gw_progress */
    int wb = pull_event(wc, &wevs, "b", GW_PEER_BACK, 5);
    CHECK(wb >= 0);
    if (wb >= 0)
        CHECK(wevs.v[wb].restarted == 1);
    /* a queue nobody reads keeps the newest 1,024 events and counts the rest:
     * 1,100 agents appear (entries put straight into etcd) */
    CHECK(listed_is(wc, "z", 0, 10)); /* killed above: its leaving is not to land in the middle */
    gw_peer_event_t qe = {.size = sizeof(qe)};
    while (gw_peer_event_next(wc, &qe) == GW_OK)
        ;
    for (int i = 0; i < 1100; i++) {
        char k[64];
        snprintf(k, sizeof(k), "/gwtest/agents/q%04d", i);
        snprintf(val, sizeof(val), "{\"addr\":\"127.0.0.1:9\",\"uuid\":\"%016x\",\"pid\":1,\"host\":\"x\"}", i + 1);
        REQUIRE_OK(gw_etcd_put(&e, k, val, strlen(val), 0, NULL, why, sizeof(why)));
    }
    gw_peer_info_t qi = {.size = sizeof(qi)};
    double qend = gwt_now_s() + 10;
    while ((gw_peer_query(wc, "q1099", &qi) != GW_OK || qi.listed != 1) && gwt_now_s() < qend)
        usleep(20000);
    CHECK(qi.listed == 1);
    unsigned popped = 0, dropped = 0;
    while (gw_peer_event_next(wc, &qe) == GW_OK) {
        if (!popped)
            CHECK(qe.dropped == 1100 - 1024 && !strcmp(qe.name, "q0076")); /* the oldest went */
        popped++;
        dropped += qe.dropped;
    }
    CHECK(popped == 1024 && dropped == 1100 - 1024);
    fprintf(stderr, "event queue: %u taken, %u dropped (counted in the first taken)\n", popped, dropped);
    gw_etcd_delete(&e, "/gwtest/agents/q", 1, why, sizeof(why));
    REQUIRE_OK(gw_peer_watch(wc, GW_PEER_WATCH_OFF, NULL, NULL));
    CHECK_ST(gw_peer_event_next(wc, &none), GW_ERR_INVALID); /* size 8 still */
    none.size = sizeof(none);
    CHECK_ST(gw_peer_event_next(wc, &none), GW_ERR_NOT_FOUND);
    CHECK_ST(gw_context_destroy(wc), GW_OK);
    REQUIRE_OK(gw_peer_query(a, "b", &pi));
    CHECK(pi.epoch > before.epoch && pi.restarts == 1 && pi.changes >= 1);
    CHECK_ST(gwt_put_wait(nep, "old", 3, raddr, drk), GW_ERR_INVALID_KEY);
    CHECK(strstr(gw_last_error(a), "restarted") != NULL);
    gw_rkey_t *nrk;
    REQUIRE_OK(gw_peer_regions(a, "b", one, 1, &nrk));
    CHECK_ST(gwt_put_wait(nep, "new epoch", 10, raddr, nrk), GW_OK);
    CHECK(memcmp(b.buf, "new epoch", 10) == 0);

    /* lookups come from the watched cache: with etcd frozen, gw_peer_ep still
     * answers at once and transfers go on */
    kill(etcd.pid, SIGSTOP);
    t0 = gwt_now_s();
    gw_ep_t *cached;
    for (int i = 0; i < 1000; i++)
        CHECK_ST(gw_peer_ep(a, "b", &cached), GW_OK);
    dt = gwt_now_s() - t0;
    CHECK(cached == nep && dt < 0.5);
    CHECK_ST(gwt_put_wait(cached, "frozen", 7, raddr, nrk), GW_OK);
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
