/* SPDX-License-Identifier: Apache-2.0 */
/* names_2host.c - the two roles of the two-host names test
 * (names_2host.sh runs them in two network namespaces joined by a veth
 * pair, so every byte crosses a real interface between two addresses).
 *
 *   names_2host agent NAME LISTEN DIR     serve as agent NAME on LISTEN;
 *       publishes "buf" (1 MiB, a known pattern, for gets) and "inbox"
 *       (64 KiB, for puts); writes "ADDR BUFADDR" to DIR/agent.addr once
 *       listening; checks the bytes behind every notification it receives
 *       and writes DIR/verified.VALUE ("ok" or where they differ); exits
 *       cleanly on SIGTERM.
 *   names_2host client NAME p2p DIR       reach NAME at the address of
 *       DIR/agent.addr with no directory (gw_peer_add): keys by name from
 *       the handshake, get + put + put_notify, data checked on both sides.
 *   names_2host client NAME etcd DIR      the same through the directory
 *       (GPUWIRE_DIRECTORY), then: the agent is killed (the script does it
 *       after DIR/client.step1) and the watch must see it leave; it comes
 *       back (after DIR/client.step2) and the watch must see that, with a
 *       new epoch: old keys fail, new ones work.
 *   names_2host wait-etcd HOST:PORT SECS  exit 0 once etcd answers there.
 *
 * Environment: the script sets GPUWIRE_TRANSPORTS=tcp (both namespaces are
 * one kernel, so intra would otherwise take the shared-memory shortcut) and
 * GPUWIRE_DIRECTORY / _TTL for the etcd form. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "names/names_int.h"
#include "harness.h"
#include "names_util.h"

#define BUF_LEN (1u << 20)
#define INBOX_LEN (64u << 10)

static uint8_t buf_byte(size_t i)
{
    return (uint8_t)(i * 7 + 3);
}

static uint8_t inbox_byte(size_t i, uint64_t v)
{
    return (uint8_t)(i * 13 + v);
}

static void write_file(const char *dir, const char *name, const char *text)
{
    char tmp[512], path[512];
    snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, name);
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(tmp, "w");
    REQUIRE(f);
    fputs(text, f);
    REQUIRE(fclose(f) == 0);
    REQUIRE(rename(tmp, path) == 0); /* readers see all of it or nothing */
}

/* Waits up to secs for DIR/name; returns its first line in out (or exits). */
static void wait_file(const char *dir, const char *name, double secs, char *out, size_t cap)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    double end = gwt_now_s() + secs;
    for (;;) {
        FILE *f = fopen(path, "r");
        if (f) {
            if (!fgets(out, (int)cap, f))
                out[0] = '\0';
            fclose(f);
            out[strcspn(out, "\n")] = '\0';
            return;
        }
        if (gwt_now_s() > end) {
            fprintf(stderr, "client: %s did not appear within %.0f s\n", path, secs);
            exit(1);
        }
        usleep(20000);
    }
}

static void auth_if_built(void)
{
    if (!strstr(gw_build_features(), "auth"))
        unsetenv("GPUWIRE_AUTH_SECRET");
}

/* ---- agent -------------------------------------------------------------------------- */
static volatile sig_atomic_t stop_agent;

static void on_term(int sig)
{
    (void)sig;
    stop_agent = 1;
}

static int agent(const char *name, const char *listen, const char *dir)
{
    signal(SIGTERM, on_term);
    auth_if_built();
    uint8_t *buf = malloc(BUF_LEN), *inbox = calloc(1, INBOX_LEN);
    REQUIRE(buf && inbox);
    for (size_t i = 0; i < BUF_LEN; i++)
        buf[i] = buf_byte(i);
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    gw_listener_t *l;
    gw_status_t st = gw_agent_listen(ctx, name, listen, &l);
    if (st != GW_OK) {
        fprintf(stderr, "agent: gw_agent_listen(%s, %s): %s: %s\n", name, listen, gw_status_name(st),
                gw_last_error(ctx));
        return 1;
    }
    gw_mem_t *mb, *mi;
    REQUIRE_OK(gw_mem_reg(ctx, buf, BUF_LEN, GW_ACCESS_REMOTE_READ, &mb));
    REQUIRE_OK(gw_mem_reg(ctx, inbox, INBOX_LEN, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, &mi));
    REQUIRE_OK(gw_mem_publish(mb, "buf"));
    REQUIRE_OK(gw_mem_publish(mi, "inbox"));
    /* GWT_PAD=N: N more names, so that the table passes what one handshake
     * message holds and travels in pieces */
    long pad = getenv("GWT_PAD") ? atol(getenv("GWT_PAD")) : 0;
    for (long i = 0; i < pad; i++) {
        char nm[32];
        snprintf(nm, sizeof(nm), "pad%05ld", i);
        REQUIRE_OK(gw_mem_publish(mb, nm));
    }
    char addr[80], line[160];
    REQUIRE_OK(gw_listener_addr(l, addr, sizeof(addr)));
    snprintf(line, sizeof(line), "%s 0x%llx\n", addr, (unsigned long long)(uintptr_t)buf);
    write_file(dir, "agent.addr", line);
    fprintf(stderr, "agent %s: listening on %s\n", name, addr);
    gw_ep_t *eps[64];
    size_t neps = 0;
    while (!stop_agent) {
        gw_ep_t *ep;
        while (neps < 64 && gw_accept(l, 0, &ep) == GW_OK)
            eps[neps++] = ep;
        for (size_t e = 0; e < neps; e++) {
            uint64_t v;
            if (gw_notify_wait(eps[e], 0, &v) != GW_OK)
                continue;
            size_t bad = INBOX_LEN;
            for (size_t i = 0; i < INBOX_LEN && bad == INBOX_LEN; i++)
                if (inbox[i] != inbox_byte(i, v))
                    bad = i;
            char fn[64], res[128];
            snprintf(fn, sizeof(fn), "verified.%llu", (unsigned long long)v);
            if (bad == INBOX_LEN)
                snprintf(res, sizeof(res), "ok\n");
            else
                snprintf(res, sizeof(res), "byte %zu is %u, expected %u\n", bad, inbox[bad], inbox_byte(bad, v));
            write_file(dir, fn, res);
            fprintf(stderr, "agent %s: notification %llu: %s", name, (unsigned long long)v, res);
        }
        if (gw_progress(ctx) == 0)
            gw_context_wait(ctx, 5);
    }
    for (size_t e = 0; e < neps; e++)
        gw_ep_close(eps[e], 0);
    gw_listener_destroy(l); /* withdraws the agent from the directory at once */
    gw_mem_dereg(mb);
    gw_mem_dereg(mi);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    free(buf);
    free(inbox);
    return gwt_failures ? 1 : 0;
}

/* ---- client ------------------------------------------------------------------------- */
static gw_context_t *cctx;

/* Waits for the request a call just posted (st: what the call returned). */
static gw_status_t finish(gw_status_t st, gw_request_t **req)
{
    if (st == GW_OK) {
        st = gw_request_wait(*req, 10000);
        gw_request_free(*req);
    }
    if (st != GW_OK)
        fprintf(stderr, "client: %s: %s\n", gw_status_name(st), gw_last_error(cctx));
    return st;
}

/* Keys by name, a get of the whole published buffer, a put + notification
 * the agent checks, and a get of what was put.  Returns the keys. */
static void exercise(gw_context_t *ctx, const char *name, const char *dir, uint64_t v, gw_rkey_t **keys)
{
    char line[160];
    wait_file(dir, "agent.addr", 30, line, sizeof(line));
    unsigned long long want_buf = strtoull(strchr(line, ' ') + 1, NULL, 16);
    const char *names[] = {"buf", "inbox"};
    double t0 = gwt_now_s();
    gw_status_t st = gw_peer_regions(ctx, name, names, 2, keys);
    if (st != GW_OK) {
        fprintf(stderr, "client: gw_peer_regions(%s): %s: %s\n", name, gw_status_name(st), gw_last_error(ctx));
        exit(1);
    }
    fprintf(stderr, "client: gw_peer_regions (first: connect + handshake with the table): %.1f ms\n",
            (gwt_now_s() - t0) * 1e3);
    long pad = getenv("GWT_PAD") ? atol(getenv("GWT_PAD")) : 0;
    gw_ep_t *tep;
    REQUIRE_OK(gw_peer_ep(ctx, name, &tep));
    fprintf(stderr, "client: the agent's table: %zu bytes%s\n", gw_names_ep(tep)->table_len,
            gw_names_ep(tep)->table_len > GW_NT_INLINE_MAX ? " (past one handshake message: fetched in pieces)" : "");
    if (pad >= 1000)
        CHECK(gw_names_ep(tep)->table_len > GW_NT_INLINE_MAX);
    gw_ep_t *ep, *ep2;
    REQUIRE_OK(gw_peer_ep(ctx, name, &ep));
    REQUIRE_OK(gw_peer_ep(ctx, name, &ep2));
    CHECK(ep == ep2); /* reused, not reconnected */
    gw_ep_info_t ei = {.size = sizeof(ei)};
    REQUIRE_OK(gw_ep_query(ep, &ei));
    fprintf(stderr, "client: endpoint to %s: %s (%s)\n", ei.peer, ei.transport, ei.path);
    CHECK(!strcmp(ei.transport, "tcp"));
    CHECK(!strncmp(ei.peer, "10.77.0.1:", 10)); /* the other namespace's address, not loopback */
    uint64_t raddr, iaddr;
    size_t rlen, ilen;
    REQUIRE_OK(gw_rkey_range(keys[0], &raddr, &rlen));
    REQUIRE_OK(gw_rkey_range(keys[1], &iaddr, &ilen));
    CHECK(raddr == want_buf && rlen == BUF_LEN && ilen == INBOX_LEN);

    uint8_t *got = calloc(1, BUF_LEN), *out = malloc(INBOX_LEN);
    REQUIRE(got && out);
    gw_request_t *req;
    CHECK_ST(finish(gw_get(ep, got, BUF_LEN, NULL, raddr, keys[0], &req), &req), GW_OK);
    size_t bad = BUF_LEN;
    for (size_t i = 0; i < BUF_LEN && bad == BUF_LEN; i++)
        if (got[i] != buf_byte(i))
            bad = i;
    CHECK(bad == BUF_LEN);
    for (size_t i = 0; i < INBOX_LEN; i++)
        out[i] = inbox_byte(i, v);
    CHECK_ST(finish(gw_put_notify(ep, out, INBOX_LEN, NULL, iaddr, keys[1], v, &req), &req), GW_OK);
    char fn[64], res[128];
    snprintf(fn, sizeof(fn), "verified.%llu", (unsigned long long)v);
    wait_file(dir, fn, 20, res, sizeof(res));
    if (strcmp(res, "ok") != 0)
        fprintf(stderr, "client: the agent found other bytes behind notification %llu: %s\n", (unsigned long long)v,
                res);
    CHECK(!strcmp(res, "ok"));
    memset(got, 0, INBOX_LEN);
    CHECK_ST(finish(gw_get(ep, got, INBOX_LEN, NULL, iaddr, keys[1], &req), &req), GW_OK);
    CHECK(memcmp(got, out, INBOX_LEN) == 0);
    fprintf(stderr, "client: get 1 MiB, put+notify 64 KiB (checked by the agent), get 64 KiB: data verified\n");
    free(got);
    free(out);
}

/* Peer events delivered by the client's progress (gw_peer_watch). */
static int ev_left, ev_back, ev_back_restarted;

static void on_peer_event(void *arg, const gw_peer_event_t *ev)
{
    (void)arg;
    fprintf(stderr, "client: event: agent \"%s\" %s (epoch %llu, %s%s)\n", ev->name,
            ev->type == GW_PEER_LEFT ? "left" : "is back", (unsigned long long)ev->epoch, ev->addr,
            ev->restarted ? ", restarted" : "");
    if (ev->type == GW_PEER_LEFT)
        ev_left++;
    else {
        ev_back++;
        ev_back_restarted += ev->restarted;
    }
}

static int listed_is(gw_context_t *ctx, const char *name, int want, double secs, gw_peer_info_t *pi)
{
    double end = gwt_now_s() + secs;
    while (gwt_now_s() < end) {
        pi->size = sizeof(*pi);
        if (gw_peer_query(ctx, name, pi) == GW_OK && pi->listed == want)
            return 1;
        gw_progress(ctx);
        usleep(20000);
    }
    return 0;
}

static int client(const char *name, const char *mode, const char *dir)
{
    auth_if_built();
    int dirmode = !strcmp(mode, "etcd");
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    cctx = ctx;
    char line[160];
    wait_file(dir, "agent.addr", 30, line, sizeof(line));
    if (!dirmode) {
        *strchr(line, ' ') = '\0';
        REQUIRE_OK(gw_peer_add(ctx, name, line));
    } else {
        char desc[256];
        REQUIRE_OK(gw_directory_describe(ctx, desc, sizeof(desc)));
        fprintf(stderr, "client: directory %s\n", desc);
        CHECK(strstr(desc, "etcd://10.77.0.1:") && strstr(desc, "reachable"));
        gw_ep_t *x;
        CHECK_ST(gw_peer_ep(ctx, "nobody", &x), GW_ERR_NOT_FOUND);
        REQUIRE_OK(gw_peer_watch(ctx, 0, on_peer_event, NULL));
        CHECK(strstr(gw_last_error(ctx), "etcd://10.77.0.1:") != NULL);
    }
    gw_rkey_t *keys[2];
    exercise(ctx, name, dir, 1, keys);
    gw_peer_info_t pi = {.size = sizeof(pi)};
    REQUIRE_OK(gw_peer_query(ctx, name, &pi));
    CHECK(pi.connected == 1 && pi.epoch > 0 && pi.restarts == 0);
    CHECK(pi.listed == (dirmode ? 1 : -1));
    if (dirmode) {
        uint64_t epoch1 = pi.epoch;
        unsigned changes0 = pi.changes;
        gw_ep_t *old_ep;
        REQUIRE_OK(gw_peer_ep(ctx, name, &old_ep));
        write_file(dir, "client.step1", "killing the agent\n");
        wait_file(dir, "agent.killed", 30, line, sizeof(line));
        double t0 = gwt_now_s();
        CHECK(listed_is(ctx, name, 0, 20, &pi)); /* lease expiry (TTL 2 s), seen by the watch */
        fprintf(stderr, "client: the watch saw agent \"%s\" leave %.1f s after SIGKILL\n", name, gwt_now_s() - t0);
        CHECK(pi.changes == changes0 + 1);
        double end = gwt_now_s() + 5;
        while (!ev_left && gwt_now_s() < end)
            if (gw_progress(ctx) == 0)
                gw_context_wait(ctx, 10);
        CHECK(ev_left == 1 && ev_back == 0); /* told, not only visible to polling */
        write_file(dir, "client.step2", "restart the agent\n");
        t0 = gwt_now_s();
        CHECK(listed_is(ctx, name, 1, 30, &pi));
        fprintf(stderr, "client: the watch saw agent \"%s\" come back %.1f s after asking\n", name, gwt_now_s() - t0);
        CHECK(pi.changes == changes0 + 2);
        end = gwt_now_s() + 5;
        while (!ev_back && gwt_now_s() < end)
            if (gw_progress(ctx) == 0)
                gw_context_wait(ctx, 10);
        CHECK(ev_left == 1 && ev_back == 1 && ev_back_restarted == 1);
        gw_ep_t *ep;
        REQUIRE_OK(gw_peer_ep(ctx, name, &ep));
        CHECK(ep != old_ep);
        REQUIRE_OK(gw_peer_query(ctx, name, &pi));
        CHECK(pi.restarts == 1 && pi.epoch > epoch1 && pi.connected == 1);
        gw_request_t *req;
        uint8_t x[8] = {0};
        uint64_t oaddr;
        size_t olen;
        REQUIRE_OK(gw_rkey_range(keys[1], &oaddr, &olen));
        CHECK_ST(finish(gw_put(ep, x, sizeof(x), NULL, oaddr, keys[1], &req), &req), GW_ERR_INVALID_KEY);
        CHECK(strstr(gw_last_error(ctx), "restarted") != NULL);
        gw_rkey_destroy(keys[0]);
        gw_rkey_destroy(keys[1]);
        exercise(ctx, name, dir, 2, keys);
    }
    gw_rkey_destroy(keys[0]);
    gw_rkey_destroy(keys[1]);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    return gwt_done(dirmode ? "names_2host client (etcd)" : "names_2host client (p2p)");
}

static int wait_etcd(const char *hostport, int secs)
{
    double end = gwt_now_s() + secs;
    char why[400] = "no client in this build";
    while (gwt_now_s() < end) {
#if GW_HAVE_ETCD
        gwt_etcd_t e;
        memset(&e, 0, sizeof(e));
        snprintf(e.url, sizeof(e.url), "etcd://%s", hostport);
        gw_etcd_t c;
        int64_t rev = 0;
        gw_status_t st = gwt_etcd_client(&c, &e, NULL, NULL, why, sizeof(why));
        if (st == GW_OK)
            st = gw_etcd_range(&c, "/gwt-ready", 0, NULL, NULL, &rev, why, sizeof(why));
        gw_etcd_fini(&c);
        if (st == GW_OK)
            return 0;
#endif
        usleep(100000);
    }
    fprintf(stderr, "etcd at %s did not answer within %d s: %s\n", hostport, secs, why);
    return 1;
}

int main(int argc, char **argv)
{
    setvbuf(stderr, NULL, _IOLBF, 0);
    if (argc == 5 && !strcmp(argv[1], "agent"))
        return agent(argv[2], argv[3], argv[4]);
    if (argc == 5 && !strcmp(argv[1], "client") && (!strcmp(argv[3], "p2p") || !strcmp(argv[3], "etcd")))
        return client(argv[2], argv[3], argv[4]);
    if (argc == 4 && !strcmp(argv[1], "wait-etcd"))
        return wait_etcd(argv[2], atoi(argv[3]));
    fprintf(stderr, "usage: names_2host agent NAME LISTEN DIR | client NAME p2p|etcd DIR | wait-etcd HOST:PORT SECS\n");
    return 2;
}
