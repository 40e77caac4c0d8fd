/* SPDX-License-Identifier: Apache-2.0 */
/* it_integrity.c - the end-to-end integrity check (GPUWIRE_INTEGRITY,
 * proto/proto_integrity.h) between two processes, over the transport
 * GPUWIRE_TRANSPORTS names.  The parent is the initiator and asks for the
 * check; the child is the target, which does not (either side asking is
 * enough).  Cases:
 *   match       put_notify, an ordered paged put, a counted paged put, an
 *               ordered list batch and a paged put of 3000 small pages (a
 *               manifest past the eager size) with intact data: every
 *               request and every notification succeeds, the data is in
 *               place, the endpoint says it checks
 *   mismatch    the fault point integ.source flips a byte of a source page
 *               after its CRC was taken (an application writing into a
 *               buffer in flight): the initiator's request fails with
 *               GW_ERR_INTEGRITY naming the page, the target's
 *               gw_notify_wait / gw_notify_count_wait report the same in
 *               place of the notification; the next operations on the
 *               endpoint are checked and pass
 *   late_write  (intra: the data lands without the target's help) the target
 *               writes into the slot after the data landed and before it
 *               takes the notification, as a reused KV slot would: caught,
 *               named, on both sides
 *   off         opts.integrity GW_INTEGRITY_OFF with a flipped byte: the
 *               batch passes unchecked; GW_INTEGRITY_ON without a
 *               notification is refused
 *   peer_gone   the target exits after the put was posted, before any
 *               verdict: the request ends with the endpoint's error within
 *               a bound */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fault.h"
#include "harness.h"
#include "it.h"

#define REGION (1u << 20)
#define PS 4096u

static gwt_chan_t g_pc, g_cc;

/* ---- the target ---- */
typedef struct step {
    int counted;      /* 0: gw_notify_wait; 1: gw_notify_count_wait(id, 1) */
    uint64_t id;      /* counted: the id */
} step_t;

typedef struct tcase {
    const char *name;
    int nsteps;
    step_t steps[8];
    int late_write;   /* flip a byte of the first put's data once it landed, before its notification */
    int vanish;       /* exit without a word once the initiator posted (its verdict never comes) */
} tcase_t;

static const tcase_t *g_case;

/* Reports each step as "status value detail\n" over the chan. */
static int target_main(void *arg)
{
    (void)arg;
    /* the cases that need this side silent keep it without a progress
     * thread, whatever GPUWIRE_PROGRESS_THREAD says */
    gw_config_t cfg = {.size = sizeof(cfg), .log_level = -1,
                       .progress_thread = g_case->vanish || g_case->late_write ? GW_PROGRESS_THREAD_OFF
                                                                                : GW_PROGRESS_THREAD_DEFAULT};
    gw_context_t *ctx = NULL;
    REQUIRE_OK(gw_context_create(&cfg, &ctx));
    uint8_t *buf = it_alloc(REGION);
    memset(buf, 0, REGION);
    gw_mem_t *mem;
    IT_OK(ctx, gw_mem_reg(ctx, buf, REGION, GW_ACCESS_REMOTE_WRITE | GW_ACCESS_REMOTE_READ, &mem));
    gw_listener_t *l;
    gw_ep_t *ep = gwt_listen_accept(ctx, &g_cc, &l);
    gwt_send_rkey(ep, mem, 1);
    if (g_case->vanish || g_case->late_write) /* no progress from here: the initiator may post now */
        gwt_chan_send(&g_cc, "r", 1);
    if (g_case->vanish) {
        gwt_chan_expect(&g_cc, NULL, "p");
        _exit(0); /* no verdict, no close: the process is gone */
    }
    if (g_case->late_write) {
        /* no progress from here until the data is there: over intra the
         * initiator's copies land it without this process */
        gwt_chan_expect(&g_cc, NULL, "p");
        double t0 = it_now();
        while (gwt_verify(buf, 65536, 5) != -1 && it_now() - t0 < 20)
            ;
        if (gwt_verify(buf, 65536, 5) != -1) {
            fprintf(stderr, "target: the put's data did not land within 20 s without progress\n");
            return 1;
        }
        buf[1000] ^= 0x40; /* the slot is reused before its notification is taken */
    }
    char rep[4096];
    size_t rl = 0;
    for (int i = 0; i < g_case->nsteps; i++) {
        const step_t *s = &g_case->steps[i];
        uint64_t v = s->id;
        gw_status_t st = s->counted ? gw_notify_count_wait(ep, s->id, 1, 20000) : gw_notify_wait(ep, 20000, &v);
        rl += (size_t)snprintf(rep + rl, sizeof(rep) - rl, "%d %llu %s\n", (int)st, (unsigned long long)v,
                               st == GW_OK ? "-" : gw_last_error(ctx));
        if (rl >= sizeof(rep))
            rl = sizeof(rep) - 1;
    }
    /* the data of the steps that passed, for the parent: a hash of the region */
    uint64_t h = it_hash(buf, REGION);
    rl += (size_t)snprintf(rep + rl, sizeof(rep) - rl, "hash %llx\n", (unsigned long long)h);
    gwt_chan_send(&g_cc, rep, (uint32_t)strlen(rep) + 1);
    gwt_chan_expect(&g_cc, ctx, "q");
    gw_ep_close(ep, 2000);
    gw_listener_destroy(l);
    gw_mem_dereg(mem);
    gw_context_destroy(ctx);
    return 0;
}

/* ---- the initiator ---- */
typedef struct ini {
    gw_context_t *ctx;
    gw_ep_t *ep;
    gw_rkey_t *rk;
    uint64_t rbase;
    uint8_t *src;
    gw_mem_t *lmem;
    int pid;
} ini_t;

/* Starts the target, then connects with the check asked for (and the
 * fault rules, if any, armed in this process only). */
static void ini_start(ini_t *I, const tcase_t *tc, const char *fault)
{
    g_case = tc;
    REQUIRE(gwt_chan_pair(&g_pc, &g_cc) == 0);
    I->pid = gwt_spawn(target_main, NULL);
    setenv("GPUWIRE_INTEGRITY", "on", 1);
    if (fault)
        setenv("GPUWIRE_FAULT", fault, 1);
    I->ep = gwt_connect_chan(&g_pc, NULL, &I->ctx);
    unsetenv("GPUWIRE_INTEGRITY");
    unsetenv("GPUWIRE_FAULT");
    I->rk = gwt_recv_rkey(I->ep, 1, &I->rbase);
    I->src = it_alloc(REGION);
    IT_OK(I->ctx, gw_mem_reg(I->ctx, I->src, REGION, GW_ACCESS_LOCAL, &I->lmem));
    gw_ep_info_t info = {.size = sizeof(info)};
    IT_OK(I->ctx, gw_ep_query(I->ep, &info));
    fprintf(stderr, "  endpoint: %s\n", info.path);
    CHECK(strstr(info.path, "integrity: crc32c") != NULL);
}

/* The target's report, line by line. */
static char g_rep[4096];
static const char *rep_line(int i)
{
    static char line[1024];
    const char *p = g_rep;
    for (int k = 0; k < i && p; k++) {
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    if (!p || !*p)
        return "";
    size_t n = strcspn(p, "\n");
    snprintf(line, sizeof(line), "%.*s", (int)n, p);
    return line;
}

static void ini_finish(ini_t *I)
{
    int n = gwt_chan_recv(&g_pc, g_rep, sizeof(g_rep), 60000);
    if (n <= 0) { /* progress while the target works: it may need our answers */
        double t0 = it_now();
        while (n <= 0 && it_now() - t0 < 30) {
            gw_progress(I->ctx);
            n = gwt_chan_recv(&g_pc, g_rep, sizeof(g_rep), 10);
        }
    }
    REQUIRE(n > 0);
    fprintf(stderr, "  target:\n%s", g_rep);
}

static void ini_stop(ini_t *I)
{
    gwt_chan_send(&g_pc, "q", 1);
    gw_rkey_destroy(I->rk);
    CHECK_ST(gw_ep_close(I->ep, 5000), GW_OK);
    CHECK_ST(gw_mem_dereg(I->lmem), GW_OK);
    CHECK_ST(gw_context_destroy(I->ctx), GW_OK);
    CHECK(gwt_wait(I->pid, 30) == 0);
}

/* Waits for r while the target reports: returns its status; *detail its text. */
static gw_status_t wait_req(gw_request_t *r, char *detail, size_t cap)
{
    gw_status_t st = gw_request_wait(r, 60000);
    gw_request_info_t info = {.size = sizeof(info)};
    gw_request_info(r, &info);
    snprintf(detail, cap, "%s", info.error_detail);
    gw_request_free(r);
    return st;
}

static gw_status_t pages(ini_t *I, uint64_t loff, uint64_t roff, size_t count, int notify, uint64_t value, int integ,
                         char *detail, size_t cap)
{
    gw_xfer_opts_t o = {.size = sizeof(o), .notify = notify, .value = value, .integrity = integ};
    gw_request_t *r;
    gw_status_t st = gw_xfer_pages(I->ep, GW_XFER_PUT, I->lmem, I->src + loff, NULL, I->rk, I->rbase + roff, NULL,
                                   count, PS, &o, &r);
    if (st != GW_OK) {
        snprintf(detail, cap, "%s", gw_last_error(I->ctx));
        return st;
    }
    return wait_req(r, detail, cap);
}

static gw_status_t put_notify(ini_t *I, uint64_t off, size_t len, uint64_t value, char *detail, size_t cap)
{
    gw_request_t *r;
    gw_status_t st = gw_put_notify(I->ep, I->src + off, len, I->lmem, I->rbase + off, I->rk, value, &r);
    if (st != GW_OK) {
        snprintf(detail, cap, "%s", gw_last_error(I->ctx));
        return st;
    }
    return wait_req(r, detail, cap);
}

static const tcase_t c_match = {"match", 5, {{0, 0}, {0, 0}, {1, 9}, {0, 0}, {0, 0}}, 0, 0};

static void case_match(void)
{
    ini_t I;
    ini_start(&I, &c_match, NULL);
    char d[512];
    gwt_fill(I.src, REGION, 3);
    CHECK_ST(put_notify(&I, 0, 65536, 7, d, sizeof(d)), GW_OK);
    CHECK_ST(pages(&I, 65536, 65536, 64, GW_NOTIFY_ORDERED, 8, GW_INTEGRITY_DEFAULT, d, sizeof(d)), GW_OK);
    CHECK_ST(pages(&I, 327680, 327680, 16, GW_NOTIFY_COUNTED, 9, GW_INTEGRITY_ON, d, sizeof(d)), GW_OK);
    /* a list batch: entries of unequal lengths, one of them empty */
    gw_local_desc_t ld[4] = {{I.lmem, 524288, 100}, {I.lmem, 524388, 0}, {I.lmem, 600000, 70000}, {I.lmem, 700000, 8}};
    gw_remote_desc_t rd[4] = {{I.rk, 524288, 100}, {I.rk, 524388, 0}, {I.rk, 600000, 70000}, {I.rk, 700000, 8}};
    gw_dlist_t *L, *R;
    IT_OK(I.ctx, gw_dlist_local(I.ctx, ld, 4, &L));
    IT_OK(I.ctx, gw_dlist_remote(I.ep, rd, 4, GW_ACCESS_REMOTE_WRITE, &R));
    gw_xfer_opts_t o = {.size = sizeof(o), .notify = GW_NOTIFY_ORDERED, .value = 10};
    gw_request_t *r;
    IT_OK(I.ctx, gw_xfer_batch(I.ep, GW_XFER_PUT, L, NULL, R, NULL, 4, &o, &r));
    CHECK_ST(wait_req(r, d, sizeof(d)), GW_OK);
    /* 3000 pages of 64 bytes: a manifest of 96 KiB, past tcp's eager size
     * (the target fetches it by a rendezvous receive of its own) */
    gw_xfer_opts_t o2 = {.size = sizeof(o2), .notify = GW_NOTIFY_ORDERED, .value = 12};
    IT_OK(I.ctx, gw_xfer_pages(I.ep, GW_XFER_PUT, I.lmem, I.src + 786432, NULL, I.rk, I.rbase + 786432, NULL, 3000, 64,
                               &o2, &r));
    CHECK_ST(wait_req(r, d, sizeof(d)), GW_OK);
    ini_finish(&I);
    CHECK(strcmp(rep_line(0), "0 7 -") == 0);
    CHECK(strcmp(rep_line(1), "0 8 -") == 0);
    CHECK(strcmp(rep_line(2), "0 9 -") == 0);
    CHECK(strcmp(rep_line(3), "0 10 -") == 0);
    CHECK(strcmp(rep_line(4), "0 12 -") == 0);
    /* the target's region: what the five transfers wrote, zeros elsewhere */
    uint8_t *want = calloc(1, REGION);
    REQUIRE(want);
    memcpy(want, I.src, 65536 + 64 * PS);
    memcpy(want + 327680, I.src + 327680, 16 * PS);
    memcpy(want + 524288, I.src + 524288, 100);
    memcpy(want + 600000, I.src + 600000, 70000);
    memcpy(want + 700000, I.src + 700000, 8);
    memcpy(want + 786432, I.src + 786432, 3000 * 64);
    char h[64];
    snprintf(h, sizeof(h), "hash %llx", (unsigned long long)it_hash(want, REGION));
    CHECK(strcmp(rep_line(5), h) == 0);
    free(want);
    CHECK_ST(gw_dlist_destroy(L), GW_OK);
    CHECK_ST(gw_dlist_destroy(R), GW_OK);
    ini_stop(&I);
}

static const tcase_t c_mismatch = {"mismatch", 4, {{0, 0}, {0, 0}, {1, 3}, {0, 0}}, 0, 0};

static void case_mismatch(void)
{
    /* entry calls at the point: the put_notify 1, the ordered pages 2..9
     * (page 1 is call 3), the counted pages 10..13 (page 2 is call 12) */
    ini_t I;
    ini_start(&I, &c_mismatch, "integ.source:flip=100@3; integ.source:flip=7@12");
    char d[512];
    gwt_fill(I.src, REGION, 4);
    CHECK_ST(put_notify(&I, 0, 8192, 1, d, sizeof(d)), GW_OK);
    CHECK_ST(pages(&I, 65536, 65536, 8, GW_NOTIFY_ORDERED, 2, GW_INTEGRITY_DEFAULT, d, sizeof(d)), GW_ERR_INTEGRITY);
    fprintf(stderr, "  initiator: %s\n", d);
    CHECK(strstr(d, "page 1 (remote 0x") != NULL);
    CHECK(strstr(d, "offset 69632 in its region") != NULL);
    CHECK(strstr(d, "expected CRC32C 0x") != NULL);
    CHECK(strstr(d, "1 of 8 pages differ") != NULL);
    CHECK_ST(pages(&I, 131072, 131072, 4, GW_NOTIFY_COUNTED, 3, GW_INTEGRITY_DEFAULT, d, sizeof(d)), GW_ERR_INTEGRITY);
    fprintf(stderr, "  initiator: %s\n", d);
    CHECK(strstr(d, "page 2 (remote 0x") != NULL);
    CHECK_ST(put_notify(&I, 8192, 8192, 4, d, sizeof(d)), GW_OK); /* the endpoint goes on, checked */
    ini_finish(&I);
    CHECK(strcmp(rep_line(0), "0 1 -") == 0);
    CHECK(strncmp(rep_line(1), "-17 2 ", 6) == 0 && strstr(rep_line(1), "page 1 (remote 0x") &&
          strstr(rep_line(1), "found 0x"));
    CHECK(strncmp(rep_line(2), "-17 3 ", 6) == 0 && strstr(rep_line(2), "page 2 (remote 0x") &&
          strstr(rep_line(2), "counted notification of id 3"));
    CHECK(strcmp(rep_line(3), "0 4 -") == 0);
    /* both rules fired exactly once */
    CHECK(gw_fault_rules() == 2 && gw_fault_fired(0) == 1 && gw_fault_fired(1) == 1);
    gw_fault_configure("", NULL, 0);
    ini_stop(&I);
}

static const tcase_t c_late = {"late_write", 1, {{0, 0}}, 1, 0};

static void case_late_write(void)
{
    const char *tl = getenv("GPUWIRE_TRANSPORTS");
    if (!tl || strcmp(tl, "intra") != 0)
        SKIP("late_write needs a transport that lands a put without the target's progress (intra), not %s",
             tl ? tl : "the default list");
    ini_t I;
    ini_start(&I, &c_late, NULL);
    char d[512];
    gwt_fill(I.src, 65536, 5);
    gwt_chan_expect(&g_pc, I.ctx, "r"); /* the target makes no more progress */
    gw_request_t *r;
    IT_OK(I.ctx, gw_put_notify(I.ep, I.src, 65536, I.lmem, I.rbase, I.rk, 5, &r));
    gwt_chan_send(&g_pc, "p", 1);
    CHECK_ST(wait_req(r, d, sizeof(d)), GW_ERR_INTEGRITY);
    fprintf(stderr, "  initiator: %s\n", d);
    CHECK(strstr(d, "put 0 (remote 0x") != NULL && strstr(d, "offset 0 in its region") != NULL);
    ini_finish(&I);
    CHECK(strncmp(rep_line(0), "-17 5 ", 6) == 0 && strstr(rep_line(0), "put 0 (remote 0x"));
    ini_stop(&I);
}

static const tcase_t c_gone = {"peer_gone", 0, {{0, 0}}, 0, 1};

/* The target exits after the put was posted and before it answered: the
 * request ends with the endpoint's error, within a bound, not never. */
static void case_peer_gone(void)
{
    ini_t I;
    ini_start(&I, &c_gone, NULL);
    char d[512];
    gwt_fill(I.src, 65536, 8);
    gwt_chan_expect(&g_pc, I.ctx, "r"); /* the target makes no more progress */
    gw_request_t *r;
    IT_OK(I.ctx, gw_put_notify(I.ep, I.src, 65536, I.lmem, I.rbase, I.rk, 5, &r));
    gwt_chan_send(&g_pc, "p", 1);
    double t0 = it_now();
    gw_status_t st = wait_req(r, d, sizeof(d));
    double dt = it_now() - t0;
    fprintf(stderr, "  initiator after %.2f s: %s: %s\n", dt, gw_status_name(st), d);
    /* (a bound, not a speed: the process's exit closes the control socket at
     * once, and a loaded 2-core machine may still take seconds to tell) */
    fprintf(stderr, "  bound %.0f s\n", 40 * it_time_scale());
    CHECK(GW_IS_ENDPOINT_ERROR(st) || st == GW_ERR_ENDPOINT_FAILED);
    CHECK(dt < 40 * it_time_scale());
    CHECK(gwt_wait(I.pid, 30) == 0);
    gw_rkey_destroy(I.rk);
    CHECK_ST(gw_ep_close(I.ep, 2000), GW_OK);
    CHECK_ST(gw_mem_dereg(I.lmem), GW_OK);
    CHECK_ST(gw_context_destroy(I.ctx), GW_OK);
}

static const tcase_t c_off = {"off", 1, {{0, 0}}, 0, 0};

static void case_off(void)
{
    ini_t I;
    ini_start(&I, &c_off, "integ.source:flip@1");
    char d[512];
    gwt_fill(I.src, REGION, 6);
    /* unchecked: no CRC is taken, so the point is never reached */
    CHECK_ST(pages(&I, 0, 0, 4, GW_NOTIFY_ORDERED, 11, GW_INTEGRITY_OFF, d, sizeof(d)), GW_OK);
    CHECK_ST(pages(&I, 0, 0, 4, GW_NOTIFY_NONE, 0, GW_INTEGRITY_ON, d, sizeof(d)), GW_ERR_INVALID);
    CHECK(strstr(d, "without a notification") != NULL);
    ini_finish(&I);
    CHECK(strcmp(rep_line(0), "0 11 -") == 0);
    CHECK(gw_fault_rules() == 1 && gw_fault_fired(0) == 0);
    gw_fault_configure("", NULL, 0);
    ini_stop(&I);
}

static const gwt_case_t cases[] = {GWT_CASE(match), GWT_CASE(mismatch), GWT_CASE(late_write), GWT_CASE(off),
                                   GWT_CASE(peer_gone)};

int main(int argc, char **argv)
{
    return GWT_MAIN(argc, argv, cases);
}
