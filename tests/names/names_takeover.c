/* SPDX-License-Identifier: Apache-2.0 */
/* names_takeover.c - who may register a name in the directory (a real etcd
 * on loopback; skipped with the reason where no etcd binary is installed).
 *
 *   - a second agent that registers a name a live agent holds is refused
 *     with GW_ERR_BUSY naming the name and the holder; the holder stays
 *     listed and reachable, also after the refused one is gone and more
 *     than a lease's time has passed;
 *   - an agent withdrawing a region deletes its own entry only, never one
 *     that another holder of the name put under its lease;
 *   - a holder that was killed keeps its name until its lease runs out:
 *     refused before, granted after;
 *   - four contexts racing for one free name: exactly one wins;
 *   - an agent stopped (SIGSTOP) past its lease whose name another agent
 *     took meanwhile does not take it back on waking: the new holder stays
 *     listed; when the new holder leaves, the woken agent registers again. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "names_util.h"

/* Waits until the directory lists `name` at `addr` (addr NULL: not listed). */
static int listed_at(gw_context_t *ctx, const char *name, const char *addr, double timeout_s)
{
    double end = gwt_now_s() + timeout_s;
    for (;;) {
        gw_peer_info_t pi = {.size = sizeof(pi)};
        gw_status_t st = gw_peer_query(ctx, name, &pi);
        if (addr ? st == GW_OK && pi.listed == 1 && !strcmp(pi.addr, addr)
                 : st != GW_OK || pi.listed == 0)
            return 1;
        if (gwt_now_s() > end)
            return 0;
        usleep(50000);
    }
}

/* Waits until the directory lists `name` at any address. */
static int listed_any(gw_context_t *ctx, const char *name, double timeout_s)
{
    double end = gwt_now_s() + timeout_s;
    for (;;) {
        gw_peer_info_t pi = {.size = sizeof(pi)};
        if (gw_peer_query(ctx, name, &pi) == GW_OK && pi.listed == 1)
            return 1;
        if (gwt_now_s() > end)
            return 0;
        usleep(50000);
    }
}

/* Stays listed at addr for all of secs. */
static int stays_at(gw_context_t *ctx, const char *name, const char *addr, double secs)
{
    double end = gwt_now_s() + secs;
    while (gwt_now_s() < end) {
        gw_peer_info_t pi = {.size = sizeof(pi)};
        if (gw_peer_query(ctx, name, &pi) != GW_OK || pi.listed != 1 || strcmp(pi.addr, addr) != 0) {
            fprintf(stderr, "  \"%s\" is no longer listed at %s (listed %d at \"%s\")\n", name, addr, pi.listed,
                    pi.addr);
            return 0;
        }
        usleep(100000);
    }
    return 1;
}

/* A second live agent under the name of a first: refused; returns its status. */
static gw_status_t try_listen(const char *name, char *err, size_t errlen)
{
    gw_context_t *c;
    REQUIRE_OK(gw_context_create(NULL, &c));
    gw_listener_t *l = NULL;
    gw_status_t st = gw_agent_listen(c, name, "127.0.0.1:0", &l);
    snprintf(err, errlen, "%s", st == GW_OK ? "" : gw_last_error(c));
    gw_listener_destroy(l);
    CHECK_ST(gw_context_destroy(c), GW_OK);
    return st;
}

static int count_kv(void *arg, const gw_etcd_kv_t *kv)
{
    (void)kv;
    (*(int *)arg)++;
    return 0;
}

typedef struct racer {
    pthread_t t;
    gw_context_t *ctx;
    gw_listener_t *l;
    gw_status_t st;
    volatile int *go;
} racer_t;

static void *race(void *arg)
{
    racer_t *r = arg;
    while (!*r->go)
        ;
    r->st = gw_agent_listen(r->ctx, "contested", "127.0.0.1:0", &r->l);
    return NULL;
}

int main(void)
{
    gwt_etcd_t etcd;
    if (gwt_etcd_start(&etcd) != 0)
        SKIP("no etcd binary (Debian: apt-get install etcd-server; or set GWT_ETCD)");
    setenv("GPUWIRE_DIRECTORY", etcd.url, 1);
    setenv("GPUWIRE_DIRECTORY_PREFIX", "/gwtakeover/", 1);
    setenv("GPUWIRE_DIRECTORY_TTL", "2", 1);

    gw_context_t *a; /* the observer */
    REQUIRE_OK(gw_context_create(NULL, &a));
    REQUIRE_OK(gw_peer_watch(a, GW_PEER_WATCH_ALL, NULL, NULL)); /* follows the directory from now on */

    /* 1. a live holder keeps its name */
    gwt_agent_t first;
    gwt_agent_start(&first, "kv", "127.0.0.1:0");
    CHECK(listed_at(a, "kv", first.addr, 5));
    char err[1024];
    gw_status_t st = try_listen("kv", err, sizeof(err));
    fprintf(stderr, "second agent \"kv\": %s: %s\n", gw_status_name(st), err);
    CHECK_ST(st, GW_ERR_BUSY);
    CHECK(strstr(err, "\"kv\"") || strstr(err, "(kv)"));
    CHECK(strstr(err, first.addr) != NULL);   /* the holder is named */
    CHECK(strstr(err, etcd.url) != NULL);     /* and the directory */
    /* the refused one is gone; more than a lease later the first is still listed */
    CHECK(stays_at(a, "kv", first.addr, 3.0));
    const char *one[] = {"buf"};
    gw_rkey_t *rk;
    REQUIRE_OK(gw_peer_regions(a, "kv", one, 1, &rk));
    gw_ep_t *ep;
    REQUIRE_OK(gw_peer_ep(a, "kv", &ep));
    uint64_t raddr;
    size_t rlen;
    REQUIRE_OK(gw_rkey_range(rk, &raddr, &rlen));
    CHECK_ST(gwt_put_wait(ep, "first", 6, raddr, rk), GW_OK);
    CHECK(memcmp(first.buf, "first", 6) == 0);
    gw_rkey_destroy(rk);

    /* withdrawing a region removes only the agent's own entry: a key under
     * another lease (the name's next holder) is left alone */
    gw_etcd_t e;
    char why[256];
    int64_t l1, l2;
    REQUIRE_OK(gwt_etcd_client(&e, &etcd, NULL, NULL, why, sizeof(why)));
    REQUIRE_OK(gw_etcd_grant(&e, 30, &l1, why, sizeof(why)));
    REQUIRE_OK(gw_etcd_grant(&e, 30, &l2, why, sizeof(why)));
    const char *rkey = "/gwtakeover/regions/x/r";
    REQUIRE_OK(gw_etcd_put(&e, rkey, "{}", 2, l2, NULL, why, sizeof(why)));
    CHECK_ST(gw_etcd_delete_leased(&e, rkey, l1, why, sizeof(why)), GW_OK);
    int left = 0;
    REQUIRE_OK(gw_etcd_range(&e, rkey, 0, count_kv, &left, NULL, why, sizeof(why)));
    CHECK(left == 1);
    CHECK_ST(gw_etcd_delete_leased(&e, rkey, l2, why, sizeof(why)), GW_OK);
    left = 0;
    REQUIRE_OK(gw_etcd_range(&e, rkey, 0, count_kv, &left, NULL, why, sizeof(why)));
    CHECK(left == 0);
    gw_etcd_revoke(&e, l1, why, sizeof(why));
    gw_etcd_revoke(&e, l2, why, sizeof(why));

    /* 2. a killed holder's name frees when its lease runs out, not before */
    int pid = gwt_child_agent("dead");
    CHECK(listed_any(a, "dead", 5));
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
    st = try_listen("dead", err, sizeof(err));
    fprintf(stderr, "\"dead\" right after its holder was killed: %s: %s\n", gw_status_name(st), err);
    CHECK_ST(st, GW_ERR_BUSY);
    CHECK(strstr(err, "lease") != NULL);
    CHECK(listed_at(a, "dead", NULL, 10)); /* the lease ran out */
    CHECK_ST(try_listen("dead", err, sizeof(err)), GW_OK);

    /* 3. a race for a free name: one winner */
    enum { NR = 4 };
    racer_t r[NR];
    volatile int go = 0;
    for (int i = 0; i < NR; i++) {
        memset(&r[i], 0, sizeof(r[i]));
        r[i].go = &go;
        REQUIRE_OK(gw_context_create(NULL, &r[i].ctx));
        REQUIRE(pthread_create(&r[i].t, NULL, race, &r[i]) == 0);
    }
    go = 1;
    int won = 0, busy = 0;
    for (int i = 0; i < NR; i++) {
        pthread_join(r[i].t, NULL);
        won += r[i].st == GW_OK;
        busy += r[i].st == GW_ERR_BUSY;
    }
    fprintf(stderr, "race of %d for one name: %d won, %d refused\n", NR, won, busy);
    CHECK(won == 1 && busy == NR - 1);
    for (int i = 0; i < NR; i++) {
        gw_listener_destroy(r[i].l);
        CHECK_ST(gw_context_destroy(r[i].ctx), GW_OK);
    }

    /* 4. an agent stopped past its lease finds its name taken on waking: it
     * does not take it back; once the new holder leaves it registers again */
    int zpid = gwt_child_agent("z");
    CHECK(listed_any(a, "z", 5));
    kill(zpid, SIGSTOP);
    CHECK(listed_at(a, "z", NULL, 10));
    gwt_agent_t taker;
    gwt_agent_start(&taker, "z", "127.0.0.1:0"); /* the name was free: granted */
    CHECK(listed_at(a, "z", taker.addr, 5));
    kill(zpid, SIGCONT);
    CHECK(stays_at(a, "z", taker.addr, 3.0)); /* the woken agent renews for 3 s: no takeover */
    gwt_agent_stop(&taker);                   /* revokes its lease: the name is free */
    gw_peer_info_t zi = {.size = sizeof(zi)};
    double t0 = gwt_now_s();
    int back = 0;
    while (!back && gwt_now_s() - t0 < 10) {
        back = gw_peer_query(a, "z", &zi) == GW_OK && zi.listed == 1 && strcmp(zi.addr, taker.addr) != 0;
        usleep(50000);
    }
    fprintf(stderr, "the woken agent registered again %.1f s after the name came free (TTL 2 s)\n",
            gwt_now_s() - t0);
    CHECK(back);
    kill(zpid, SIGKILL);
    waitpid(zpid, &status, 0);

    CHECK_ST(gw_context_destroy(a), GW_OK);
    gwt_agent_stop(&first);
    gwt_etcd_stop(&etcd);
    return gwt_done("names_takeover");
}
