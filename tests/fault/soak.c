/* SPDX-License-Identifier: Apache-2.0 */
/* soak.c - a bounded random run: puts, gets, paged batches, ordered and
 * counted notifications, cancels, deregistrations and peer kills, round
 * after round against a fresh target process, over the transport
 * GPUWIRE_TRANSPORTS names (ctest: tcp and intra; verbs in the Soft-RoCE
 * guest, tests/verbs/guest_suite.sh).
 *   soak [SECONDS]     (default: SOAK_SECONDS, else 20); SOAK_SEED repeats
 *                      a run (the seed is printed)
 * Kinds of round: plain; with a deregistration of the second region
 * mid-stream; with the target killed (SIGKILL) mid-stream.  Checked:
 *  - every posted request completes exactly once, within a bound (none
 *    lost: posted = completed); in a plain round every one succeeds
 *  - a completed get returns the target's bytes as the puts before it left them
 *  - after a plain or deregistration round, every slot of the target's
 *    region holds exactly what the model says (the last completed put)
 *  - no byte lands in a deregistered region after gw_mem_dereg returned
 *  - every ordered notification of a completed put_notify arrives exactly
 *    once, no other arrives; the counted ones add up to the completed
 *    notifying batches, no more
 *  - after a kill every outstanding request fails with an endpoint error
 * Over a transport whose endpoint fails when the target refuses a key
 * (verbs: the RC queue pair goes to the error state; ofi over tcp), a put
 * into the deregistered region fails the endpoint: from then on the round
 * is taken as one with a kill (every outstanding request may fail with the
 * endpoint's error, the slot check is skipped: a put failed with its
 * endpoint may have landed), and nothing may land in the deregistered
 * region all the same.
 * With GPUWIRE_FAULT set (both processes inherit it) the same runs under
 * those faults, and each rule must have fired in the initiator.
 * The totals are printed at the end (docs/FAULTS.md quotes a run). */
#include <signal.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/fault.h"
#include "it.h"

#define REGION (4u << 20)
#define SLOT (64u << 10)
#define NSLOT (REGION / SLOT)
#define BREGION (1u << 20)
#define WINDOW 16
#define PAGE 4096
#define NCOUNT_ID 7

enum { OP_PUT, OP_PUT_NOTIFY, OP_GET, OP_BATCH_PUT, OP_BATCH_GET, OP_PUT_B, OP_KINDS };
static const char *g_kind_name[OP_KINDS] = {"put", "put_notify", "get", "paged put", "paged get", "put (region 2)"};

typedef struct op {
    int kind, slot;
    size_t len;
    uint64_t seed, value;
    int after_dereg; /* a put into region 2 posted after its deregistration */
    int chunk;       /* paged ops: its 16 pages of the local page pool */
    int withdrawn;   /* gw_request_cancel returned GW_OK with it canceled: none of it moved */
    double t_post;
    uint8_t *buf;
    gw_request_t *r;
} op_t;

typedef struct totals {
    uint64_t ep_lost; /* deregistration rounds whose endpoint failed at the refused key */
    uint64_t rounds, kills, deregs, posted, completed, ok, failed, refused, cancels, cancels_done, withdrawn;
    uint64_t cut; /* puts canceled with pieces on the wire: the slot was read back */
    uint64_t notes_ordered, notes_counted, bytes_checked, gets_checked, corrupt, lost, bad_status;
    uint64_t by_kind[OP_KINDS];
} totals_t;

static totals_t T;
static uint64_t g_rng;
static int g_alloc; /* IT_ALLOC=1: the target's regions from gw_mem_alloc */

/* Does a refused key leave the endpoint usable (tcp, intra), or fail it? */
static int keys_fail_endpoint(void)
{
    const char *t = getenv("GPUWIRE_TRANSPORTS");
    return t && (!strcmp(t, "verbs") || !strcmp(t, "ofi"));
}

/* A status an endpoint fails with.  Over a transport whose endpoint fails
 * at a refused key that includes GW_ERR_INVALID_KEY: over verbs a killed
 * target's regions may go before its queue pairs, and its NIC then refuses
 * the keys (remote access error) rather than stopping to answer. */
static int ep_err(gw_status_t st)
{
    return GW_IS_ENDPOINT_ERROR(st) || (keys_fail_endpoint() && st == GW_ERR_INVALID_KEY);
}

static uint64_t rnd(uint64_t n)
{
    return gwt_xorshift(&g_rng) % n;
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : (getenv("SOAK_SECONDS") ? atof(getenv("SOAK_SECONDS")) : 20);
    g_rng = getenv("SOAK_SEED") ? strtoull(getenv("SOAK_SEED"), NULL, 0) : (uint64_t)time(NULL) * 2654435761u + 1;
    const char *tl = getenv("GPUWIRE_TRANSPORTS");
    fprintf(stderr, "soak: %.0f s over %s, SOAK_SEED=%llu\n", seconds, tl ? tl : "(default)",
            (unsigned long long)g_rng);
    double scale = it_time_scale();
    g_alloc = getenv("IT_ALLOC") && getenv("IT_ALLOC")[0] == '1';
    double end = it_now() + seconds;
    uint8_t *model = it_alloc(REGION);
    while (it_now() < end) {
        int kind = (int)rnd(10); /* 0-1: kill, 2-3: deregistration, else plain */
        int kill_round = kind < 2, dereg_round = kind >= 2 && kind < 4;
        it_target_cfg_t cfg = {.n_eps = 1, .n_regions = 2};
        cfg.region[0] = (it_region_spec_t){REGION, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, 1};
        cfg.region[1] = (it_region_spec_t){BREGION, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, 2};
        it_target_t t;
        char addr[128];
        it_target_start(&t, &cfg, addr, sizeof(addr));
        gw_context_t *ctx = it_ctx();
        gw_ep_t *ep = it_connect(ctx, addr);
        gw_rkey_t *rk[2];
        uint64_t raddr[2];
        it_target_rkeys(&t, ctx, ep, rk, raddr, NULL);
        gwt_fill(model, REGION, 1);
        /* the local pages of the paged ops: 16 per op in flight */
        uint8_t *pool = it_alloc(WINDOW * 16 * PAGE);
        uint8_t chunk_busy[WINDOW] = {0};
        gw_mem_t *pmem;
        IT_OK(ctx, gw_mem_reg(ctx, pool, WINDOW * 16 * PAGE, GW_ACCESS_LOCAL, &pmem));
        uint8_t busy[NSLOT] = {0}; /* a write or read of the slot is in flight */
        op_t ops[WINDOW];
        int inflight = 0;
        int nops = 100 + (int)rnd(200), posted = 0;
        int event_at = (int)rnd((uint64_t)nops); /* the kill or the deregistration */
        int dereg_done = 0, killed = 0, ep_lost = 0; /* ep_lost: see keys_fail_endpoint */
        uint64_t b_hash = 0, note_next = 1, notes_ok = 0, counted_ok = 0, counted_lost = 0;
        uint64_t *note_seen = calloc((size_t)nops + 2, sizeof(uint64_t));
        /* value -> 1 when its put_notify completed OK, 2 when it failed with its endpoint (ep_lost) */
        uint64_t *note_done = calloc((size_t)nops + 2, sizeof(uint64_t));
        T.rounds++;
        while (posted < nops || inflight) {
            if (posted == event_at && !killed && !dereg_done) {
                if (kill_round) {
                    kill(t.pid, SIGKILL);
                    killed = 1;
                    T.kills++;
                } else if (dereg_round) {
                    it_cmd_t q = {.type = IT_CMD_DEREG, .region = 1};
                    it_reply_t rep = it_target_cmd(&t, &q, ctx);
                    CHECK_ST((gw_status_t)rep.a, GW_OK);
                    if (!g_alloc) {
                        it_cmd_t h = {.type = IT_CMD_HASH, .region = 1, .off = 0, .len = BREGION};
                        b_hash = (uint64_t)it_target_cmd(&t, &h, ctx).a;
                    }
                    dereg_done = 1;
                    T.deregs++;
                }
            }
            /* post while the window has room */
            while (posted < nops && inflight < WINDOW && !(posted == event_at && !killed && !dereg_done &&
                                                          (kill_round || dereg_round))) {
                op_t *o = &ops[inflight];
                memset(o, 0, sizeof(*o));
                o->kind = (int)rnd(OP_KINDS);
                o->slot = (int)rnd(NSLOT);
                if (busy[o->slot])
                    break; /* try again after a completion */
                o->len = 1 + rnd(SLOT);
                o->chunk = -1;
                o->t_post = it_now();
                uint8_t *pages = NULL;
                if (o->kind == OP_BATCH_PUT || o->kind == OP_BATCH_GET) {
                    for (int k = 0; k < WINDOW && o->chunk < 0; k++)
                        if (!chunk_busy[k])
                            o->chunk = k;
                    pages = pool + (size_t)o->chunk * 16 * PAGE;
                }
                o->seed = gwt_xorshift(&g_rng);
                gw_status_t st = GW_OK;
                uint64_t ra = raddr[0] + (uint64_t)o->slot * SLOT;
                switch (o->kind) {
                case OP_PUT:
                case OP_PUT_NOTIFY:
                case OP_PUT_B:
                    o->buf = malloc(o->len);
                    gwt_fill(o->buf, o->len, o->seed);
                    if (o->kind == OP_PUT)
                        st = gw_put(ep, o->buf, o->len, NULL, ra, rk[0], &o->r);
                    else if (o->kind == OP_PUT_NOTIFY) {
                        o->value = note_next++;
                        st = gw_put_notify(ep, o->buf, o->len, NULL, ra, rk[0], o->value, &o->r);
                    } else {
                        o->len = o->len < BREGION ? o->len : BREGION;
                        o->after_dereg = dereg_done;
                        st = gw_put(ep, o->buf, o->len, NULL, raddr[1] + rnd(BREGION - o->len + 1), rk[1], &o->r);
                    }
                    break;
                case OP_GET:
                    o->buf = malloc(o->len);
                    st = gw_get(ep, o->buf, o->len, NULL, ra, rk[0], &o->r);
                    break;
                case OP_BATCH_PUT:
                case OP_BATCH_GET: {
                    /* 16 pages of the slot, in a shuffled order */
                    uint32_t rp[16];
                    for (int k = 0; k < 16; k++)
                        rp[k] = (uint32_t)k;
                    for (int k = 15; k > 0; k--) {
                        int j = (int)rnd((uint64_t)k + 1);
                        uint32_t x = rp[k];
                        rp[k] = rp[j];
                        rp[j] = x;
                    }
                    o->len = SLOT;
                    o->buf = malloc(SLOT); /* the slot's bytes as the batch writes them */
                    gw_xfer_opts_t xo = {.size = sizeof(xo), .notify = GW_NOTIFY_COUNTED, .value = NCOUNT_ID};
                    if (o->kind == OP_BATCH_PUT) {
                        gwt_fill(pages, 16 * PAGE, o->seed);
                        for (int k = 0; k < 16; k++)
                            memcpy(o->buf + (size_t)rp[k] * PAGE, pages + (size_t)k * PAGE, PAGE);
                        st = gw_xfer_pages(ep, GW_XFER_PUT, pmem, pages, NULL, rk[0], ra, rp, 16, PAGE, &xo, &o->r);
                    } else {
                        memcpy(o->buf, rp, sizeof(rp)); /* kept to undo the shuffle */
                        st = gw_xfer_pages(ep, GW_XFER_GET, pmem, pages, NULL, rk[0], ra, rp, 16, PAGE, NULL, &o->r);
                    }
                    break;
                }
                }
                posted++;
                T.posted++;
                T.by_kind[o->kind]++;
                if (st != GW_OK && st != GW_INPROGRESS) {
                    /* refused at posting: it never became a request */
                    T.posted--;
                    T.refused++;
                    if (!killed && !(o->kind == OP_PUT_B && dereg_done) && !ep_err(st)) {
                        fprintf(stderr, "%s refused at posting: %s: %s\n", g_kind_name[o->kind], gw_status_name(st),
                                gw_last_error(ctx));
                        T.bad_status++;
                    }
                    free(o->buf);
                    continue;
                }
                if (o->kind != OP_PUT_B)
                    busy[o->slot] = 1;
                if (o->chunk >= 0)
                    chunk_busy[o->chunk] = 1;
                inflight++;
                /* now and then, try to withdraw it */
                if (rnd(10) == 0) {
                    T.cancels++;
                    gw_status_t cs = gw_request_cancel(o->r);
                    T.cancels_done += cs == GW_OK;
                    o->withdrawn = cs == GW_OK && gw_request_test(o->r) == GW_ERR_CANCELED;
                    T.withdrawn += o->withdrawn;
                }
            }
            /* reap what completed; a bounded wait on the oldest */
            int reaped = 0;
            for (int i = 0; i < inflight; i++) {
                op_t *o = &ops[i];
                gw_status_t st = gw_request_test(o->r);
                if (st == GW_INPROGRESS && it_now() - o->t_post < 30 * scale)
                    continue;
                if (st == GW_INPROGRESS) {
                    fprintf(stderr, "%s still pending after %.0f s: lost\n", g_kind_name[o->kind], 30 * scale);
                    T.lost++;
                    gwt_failures++;
                    return gwt_done("soak"); /* nothing after a lost request can be trusted */
                }
                gw_request_free(o->r);
                T.completed++;
                reaped++;
                if (st == GW_OK) {
                    T.ok++;
                    switch (o->kind) {
                    case OP_PUT:
                    case OP_PUT_NOTIFY:
                        memcpy(model + (size_t)o->slot * SLOT, o->buf, o->len);
                        if (o->kind == OP_PUT_NOTIFY) {
                            note_done[o->value] = 1;
                            notes_ok++;
                        }
                        break;
                    case OP_BATCH_PUT:
                        memcpy(model + (size_t)o->slot * SLOT, o->buf, SLOT);
                        counted_ok++;
                        break;
                    case OP_GET:
                        T.gets_checked++;
                        if (memcmp(o->buf, model + (size_t)o->slot * SLOT, o->len) != 0) {
                            fprintf(stderr, "get of slot %d returned bytes the puts did not leave there\n", o->slot);
                            T.corrupt++;
                        }
                        break;
                    case OP_BATCH_GET: {
                        uint8_t *pages = pool + (size_t)o->chunk * 16 * PAGE;
                        uint32_t rp[16];
                        memcpy(rp, o->buf, sizeof(rp));
                        T.gets_checked++;
                        for (int k = 0; k < 16; k++)
                            if (memcmp(pages + (size_t)k * PAGE, model + (size_t)o->slot * SLOT + (size_t)rp[k] * PAGE,
                                       PAGE) != 0) {
                                fprintf(stderr, "paged get of slot %d page %u: not the target's bytes\n", o->slot, rp[k]);
                                T.corrupt++;
                                break;
                            }
                        break;
                    }
                    case OP_PUT_B:
                        if (o->after_dereg) {
                            fprintf(stderr, "a put into a deregistered region succeeded\n");
                            T.corrupt++;
                        }
                        break;
                    }
                } else {
                    T.failed++;
                    if (dereg_done && !killed && !ep_lost && keys_fail_endpoint()) {
                        gw_ep_info_t ei = {.size = sizeof(ei)};
                        if (gw_ep_query(ep, &ei) == GW_OK && ei.error != GW_OK) {
                            ep_lost = 1; /* the refused key failed the endpoint: as after a kill from here on */
                            T.ep_lost++;
                        }
                    }
                    int expected = killed || ep_lost ? (ep_err(st) || st == GW_ERR_CANCELED)
                                   : o->kind == OP_PUT_B && dereg_done
                                       ? (st == GW_ERR_INVALID_KEY || ep_err(st) || st == GW_ERR_CANCELED)
                                       : st == GW_ERR_CANCELED;
                    if (!expected) {
                        fprintf(stderr, "%s failed with %s (round: %s)\n", g_kind_name[o->kind], gw_status_name(st),
                                killed ? "kill" : ep_lost ? "deregistration, endpoint failed" : dereg_done ? "deregistration" : "plain");
                        T.bad_status++;
                    }
                    /* failed with its endpoint: its notification may still have gone (docs/ERRORS.md:
                     * what reaches a target whose endpoint failed) */
                    if (ep_lost && ep_err(st) && o->kind == OP_PUT_NOTIFY)
                        note_done[o->value] = 2;
                    if (ep_lost && ep_err(st) && o->kind == OP_BATCH_PUT)
                        counted_lost++;
                    int is_put = o->kind == OP_PUT || o->kind == OP_PUT_NOTIFY || o->kind == OP_BATCH_PUT;
                    if (is_put && !killed && !ep_lost && st != GW_ERR_CANCELED) {
                        fprintf(stderr, "a put failed in a round without a kill: %s\n", gw_status_name(st));
                        T.bad_status++;
                    }
                    if (is_put && !killed && !ep_lost && st == GW_ERR_CANCELED && !o->withdrawn) {
                        /* canceled with pieces on the wire: they may have
                         * landed (nothing lands after it ended, which the
                         * slot check at the round's end asserts): the
                         * model takes the slot as it now stands */
                        gw_request_t *g = NULL;
                        T.cut++;
                        if (gw_get(ep, model + (size_t)o->slot * SLOT, SLOT, NULL, raddr[0] + (uint64_t)o->slot * SLOT,
                                   rk[0], &g) != GW_OK || gw_request_wait(g, (int)(30000 * scale)) != GW_OK ||
                            gw_request_test(g) != GW_OK) {
                            fprintf(stderr, "reading back the slot of a canceled put failed: %s\n", gw_last_error(ctx));
                            T.bad_status++;
                        }
                        gw_request_free(g);
                    }
                }
                if (o->kind != OP_PUT_B)
                    busy[o->slot] = 0;
                if (o->chunk >= 0)
                    chunk_busy[o->chunk] = 0;
                free(o->buf);
                ops[i] = ops[--inflight];
                i--;
            }
            if (!reaped)
                gw_progress(ctx);
        }
        if (!killed) {
            /* the target's region against the model, slot by slot (not
             * after the endpoint failed: a put failed with it may have landed) */
            for (int s = 0; s < (int)NSLOT && !ep_lost; s++) {
                it_cmd_t h = {.type = IT_CMD_HASH, .region = 0, .off = (uint64_t)s * SLOT, .len = SLOT};
                if ((uint64_t)it_target_cmd(&t, &h, ctx).a != it_hash(model + (size_t)s * SLOT, SLOT)) {
                    fprintf(stderr, "slot %d of the target's region differs from what the puts wrote\n", s);
                    T.corrupt++;
                }
                T.bytes_checked += SLOT;
            }
            if (dereg_done && !g_alloc) { /* IT_ALLOC: gw_mem_dereg freed it */
                it_cmd_t h = {.type = IT_CMD_HASH, .region = 1, .off = 0, .len = BREGION};
                if ((uint64_t)it_target_cmd(&t, &h, ctx).a != b_hash) {
                    fprintf(stderr, "bytes landed in region 2 after its deregistration\n");
                    T.corrupt++;
                }
            }
            /* notifications: each completed put_notify's value exactly once, nothing else (after
             * the endpoint failed: also, at most once, those of put_notifys failed with it) */
            uint64_t got = 0, got_lost = 0;
            for (;;) {
                it_cmd_t q = {.type = IT_CMD_NOTIFY_ANY, .ep = 0, .off = got < notes_ok ? 10000 : 0};
                it_reply_t rep = it_target_cmd(&t, &q, ctx);
                if (rep.a != GW_OK)
                    break;
                uint64_t v = (uint64_t)rep.b;
                if (v == 0 || v >= note_next || !note_done[v] || note_seen[v]++) {
                    fprintf(stderr, "notification %llu: %s (round: %s)\n", (unsigned long long)v,
                            v && v < note_next && note_seen[v] > 1 ? "delivered twice" : "never completed",
                            ep_lost ? "deregistration, endpoint failed" : dereg_done ? "deregistration" : "plain");
                    T.corrupt++;
                }
                got++;
                got_lost += v && v < note_next && note_done[v] == 2;
            }
            if (got - got_lost != notes_ok) {
                fprintf(stderr, "%llu ordered notifications arrived, %llu put_notify completed\n",
                        (unsigned long long)got, (unsigned long long)notes_ok);
                T.corrupt++;
            }
            T.notes_ordered += got;
            it_cmd_t q = {.type = IT_CMD_NCOUNT, .ep = 0, .tag = NCOUNT_ID, .count = counted_ok, .off = 10000};
            CHECK_ST((gw_status_t)it_target_cmd(&t, &q, ctx).a, GW_OK);
            it_cmd_t q2 = {.type = IT_CMD_NCOUNT, .ep = 0, .tag = NCOUNT_ID, .count = 1, .off = 0};
            gw_status_t extra = (gw_status_t)it_target_cmd(&t, &q2, ctx).a;
            if (extra != GW_INPROGRESS && !(ep_lost && (extra == GW_ERR_ENDPOINT_FAILED ||
                                                        (extra == GW_OK && counted_lost > 0)))) {
                fprintf(stderr, "a counted notification more than the %llu batches that completed: %s\n",
                        (unsigned long long)counted_ok, gw_status_name(extra));
                T.corrupt++;
            }
            T.notes_counted += counted_ok;
        } else {
            gw_ep_info_t info = {.size = sizeof(info)};
            IT_OK(ctx, gw_ep_query(ep, &info));
            /* the target is gone for sure once reaped: until then (SIGKILL is
             * asynchronous) a request may still have been served */
            int rc = gwt_wait(t.pid, 20);
            t.pid = -1;
            if (rc != 128 + SIGKILL) {
                fprintf(stderr, "the killed target exited with %d\n", rc);
                gwt_failures++;
            }
            /* the endpoint learns of the death within a bound even when idle */
            double until = it_now() + 10 * scale;
            while (!ep_err(info.error) && it_now() < until) {
                gw_progress(ctx);
                usleep(1000);
                IT_OK(ctx, gw_ep_query(ep, &info));
            }
            if (!ep_err(info.error)) {
                fprintf(stderr, "the endpoint to a killed target is still healthy after %.0f s\n", 10 * scale);
                T.bad_status++;
            }
            if (!ep_err(info.error)) {
                /* use it once: that must fail */
                gw_request_t *r = NULL;
                uint8_t b[8];
                if (gw_get(ep, b, sizeof(b), NULL, raddr[0], rk[0], &r) == GW_OK) {
                    gw_status_t st = it_wait_free(r, (int)(30000 * scale));
                    if (!ep_err(st)) {
                        fprintf(stderr, "a get from a killed target: %s\n", gw_status_name(st));
                        T.bad_status++;
                    }
                }
            }
        }
        free(note_seen);
        free(note_done);
        gw_rkey_destroy(rk[0]);
        gw_rkey_destroy(rk[1]);
        CHECK_ST(gw_ep_close(ep, 5000), GW_OK);
        IT_OK(ctx, gw_mem_dereg(pmem));
        free(pool);
        int rc = killed ? (close(t.to_child.wfd), close(t.to_parent.rfd), 0) : it_target_stop(&t, ctx);
        if (rc != 0) {
            fprintf(stderr, "the target exited with %d\n", rc);
            gwt_failures++;
        }
        CHECK_ST(gw_context_destroy(ctx), GW_OK);
    }
    fprintf(stderr,
            "soak totals: %llu rounds (%llu with a peer kill, %llu with a deregistration, %llu of them failing the endpoint); requests posted %llu, "
            "completed %llu (OK %llu, failed %llu), lost %llu; refused at posting %llu; cancels tried %llu "
            "(%llu complete at once, %llu of them withdrawn; %llu puts cut short); notifications ordered %llu, counted %llu; gets checked %llu, target bytes "
            "checked %llu; corrupted or misdelivered %llu; unexpected statuses %llu\n",
            (unsigned long long)T.rounds, (unsigned long long)T.kills, (unsigned long long)T.deregs,
            (unsigned long long)T.ep_lost, (unsigned long long)T.posted, (unsigned long long)T.completed, (unsigned long long)T.ok,
            (unsigned long long)T.failed, (unsigned long long)T.lost, (unsigned long long)T.refused,
            (unsigned long long)T.cancels, (unsigned long long)T.cancels_done, (unsigned long long)T.withdrawn,
            (unsigned long long)T.cut, (unsigned long long)T.notes_ordered,
            (unsigned long long)T.notes_counted, (unsigned long long)T.gets_checked,
            (unsigned long long)T.bytes_checked, (unsigned long long)T.corrupt, (unsigned long long)T.bad_status);
    fprintf(stderr, "by kind:");
    for (int k = 0; k < OP_KINDS; k++)
        fprintf(stderr, " %s %llu", g_kind_name[k], (unsigned long long)T.by_kind[k]);
    fprintf(stderr, "\n");
    /* with GPUWIRE_FAULT (armed in both processes), every rule must have acted here */
    if (gw_fault_rules() > 0) {
        char rep[1024];
        int unfired = gw_fault_report(rep, sizeof(rep));
        fprintf(stderr, "GPUWIRE_FAULT in the initiator: %s\n", rep);
        if (unfired) {
            fprintf(stderr, "a fault rule never fired: this run did not test it\n");
            gwt_failures++;
        }
    }
    CHECK(T.posted == T.completed);
    CHECK(T.lost == 0);
    CHECK(T.corrupt == 0);
    CHECK(T.bad_status == 0);
    CHECK(T.rounds > 0);
    return gwt_done("soak");
}
