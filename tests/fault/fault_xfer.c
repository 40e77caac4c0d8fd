/* SPDX-License-Identifier: Apache-2.0 */
/* fault_xfer.c - faults injected below a transport under a stream of
 * transfers, two processes:
 *   fault_xfer CASE
 * sockets of the tcp transport (GPUWIRE_FAULT sock.send / sock.recv,
 * core/sock.c; GPUWIRE_TRANSPORTS=tcp): short_send, short_recv,
 * eagain_send, eagain_recv, reset_send, reset_recv, fail_recv;
 * verbs (the loader's hooks; GPUWIRE_TRANSPORTS=verbs, in the Soft-RoCE
 * guest): verbs_retry_exc, verbs_rem_access (an initiator's completion
 * given that error status: a target's puts and gets complete only at the
 * initiator), verbs_qp_err (the queue pair moved to the error state
 * before a post), verbs_post_fail (ibv_post_send refusing a chain),
 * verbs_drop (a completion lost), verbs_drop_all (every completion lost
 * from one on: the completion watchdog fails the endpoint after
 * GPUWIRE_OP_TIMEOUT_MS, the guest suite sets 5 s), verbs_create_qp
 * (ibv_create_qp failing under gw_connect).
 * A stream of puts (1 B to 1.5 MiB, the large ones striped), paged batch
 * puts and gets runs from the initiator into a target region while the
 * rule acts on one side ("_send" cases: the initiator, whose puts send;
 * "_recv" cases: the target, which receives them).
 *  - short, eagain: harmless to a correct transport: every request
 *    completes and the target's region is exactly what the puts wrote.
 *  - reset, fail: every request ends (OK or an endpoint error) within a
 *    bound, the initiator's endpoint and the target's both report an
 *    endpoint error, and the target's region holds, byte for byte, either
 *    its old content or what a put that was posted there wrote, and all of
 *    what the completed puts wrote (read back over a second endpoint).
 * The rule must have fired (its counter, read in the process it acts in),
 * else the test fails. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fault.h"
#include "it.h"

#define REGION (12u << 20)
#define GETAREA (10u << 20) /* [GETAREA, REGION): never put into; gets read it */
#define NPUT 24
#define PAGE 4096
#define NPAGE 24
#define WINDOW 8

typedef struct xcase {
    const char *name;
    const char *rule;
    int target_side; /* the rule acts in the target */
    int fatal;       /* the endpoint must fail */
    const char *connect_fails; /* the first gw_connect fails, its detail naming this */
} xcase_t;

static const xcase_t g_cases[] = {
    {"short_send", "sock.send:short=613*all", 0, 0, NULL},
    {"short_recv", "sock.recv:short=1@5*4000", 1, 0, NULL},
    {"eagain_send", "sock.send:eagain@3*400", 0, 0, NULL},
    {"eagain_recv", "sock.recv:eagain@2*400", 1, 0, NULL},
    {"reset_send", "sock.send:reset@12", 0, 1, NULL},
    {"reset_recv", "sock.recv:reset=9@20", 1, 1, NULL},
    {"fail_recv", "sock.recv:fail=EIO@15", 1, 1, NULL},
    {"verbs_retry_exc", "ibv.poll_cq:status=retry_exc@12", 0, 1, NULL},
    {"verbs_rem_access", "ibv.poll_cq:status=rem_access@6", 0, 1, NULL},
    {"verbs_qp_err", "ibv.post_send:qp_err@8", 0, 1, NULL},
    {"verbs_post_fail", "ibv.post_send:fail=ENOMEM@8", 0, 1, NULL},
    {"verbs_drop", "ibv.poll_cq:drop@10", 0, 0, NULL},
    {"verbs_drop_all", "ibv.poll_cq:drop@10*all", 0, 1, NULL},
    /* both tries: gpuwire asks again without inline data when the first fails */
    {"verbs_create_qp", "ibv.create_qp:fail=ENOMEM*2", 0, 0, "ibv_create_qp"},
    {NULL, NULL, 0, 0, NULL}};

static const size_t g_sizes[] = {1, 100, 4096, 65543, 300000, 1572864};

typedef struct op {
    int kind; /* 0 put, 1 paged put, 2 get */
    uint64_t off;
    size_t len;
    uint8_t *buf;
    gw_request_t *r;
    gw_status_t st;
    uint32_t rpages[NPAGE];
} op_t;

static int fired_here(const xcase_t *c, it_target_t *t, gw_context_t *ctx, uint64_t *calls)
{
    if (!c->target_side) {
        *calls = gw_fault_calls(0);
        return (int)gw_fault_fired(0);
    }
    it_cmd_t q = {.type = IT_CMD_FAULT, .region = 0};
    it_reply_t rep = it_target_cmd(t, &q, ctx);
    *calls = (uint64_t)rep.b;
    return (int)rep.a;
}

int main(int argc, char **argv)
{
    const xcase_t *c = NULL;
    for (int i = 0; argc > 1 && g_cases[i].name; i++)
        if (strcmp(argv[1], g_cases[i].name) == 0)
            c = &g_cases[i];
    if (!c) {
        fprintf(stderr, "usage: fault_xfer CASE (short_send, short_recv, eagain_send, eagain_recv, reset_send, "
                        "reset_recv, fail_recv, verbs_retry_exc, verbs_rem_access, verbs_qp_err, verbs_post_fail, "
                        "verbs_drop, verbs_drop_all, verbs_create_qp)\n");
        return 2;
    }
    static char target_env[160];
    snprintf(target_env, sizeof(target_env), "GPUWIRE_FAULT=%s", c->target_side ? c->rule : "");
    it_target_cfg_t cfg = {.n_eps = 2, .n_regions = 1};
    cfg.region[0] = (it_region_spec_t){REGION, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, 1};
    cfg.env[0] = target_env;
    /* small stripes and helper threads, so that the payload paths of the
     * helper threads and the striping meet the fault too */
    cfg.env[1] = "GPUWIRE_TCP_STREAMS=2";
    setenv("GPUWIRE_TCP_STREAMS", "2", 1);
    it_target_t t;
    char addr[128];
    it_target_start(&t, &cfg, addr, sizeof(addr));
    setenv("GPUWIRE_FAULT", c->target_side ? "" : c->rule, 1);
    double scale = it_time_scale();
    gw_context_t *ctx = it_ctx();
    if (c->connect_fails) {
        /* a verb of the connection's setup fails: gw_connect says which, and
         * the listener and this context stay usable */
        gw_ep_t *bad = NULL;
        gw_status_t st = gw_connect(ctx, addr, &bad);
        fprintf(stderr, "gw_connect: %s: %s\n", gw_status_name(st), gw_last_error(ctx));
        CHECK(st != GW_OK && bad == NULL);
        CHECK(strstr(gw_last_error(ctx), c->connect_fails) != NULL);
    }
    gw_ep_t *ep = it_connect(ctx, addr), *ep2 = it_connect(ctx, addr);
    uint8_t keys[IT_MAX_REGIONS][IT_KEY_MAX];
    size_t klen[IT_MAX_REGIONS];
    REQUIRE(it_target_keys(&t, keys, klen) == 0);
    gw_rkey_t *rk, *rk2;
    uint64_t raddr;
    IT_OK(ctx, gw_rkey_unpack(ep, keys[0], klen[0], &rk));
    IT_OK(ctx, gw_rkey_unpack(ep2, keys[0], klen[0], &rk2));
    IT_OK(ctx, gw_rkey_range(rk, &raddr, NULL));
    fprintf(stderr, "case %s: GPUWIRE_FAULT=\"%s\" in the %s\n", c->name, c->rule,
            c->target_side ? "target" : "initiator");

    uint8_t *model = it_alloc(REGION);
    gwt_fill(model, REGION, 1);
    uint8_t *pages = it_alloc(NPAGE * PAGE);
    gw_mem_t *pmem;
    IT_OK(ctx, gw_mem_reg(ctx, pages, NPAGE * PAGE, GW_ACCESS_LOCAL, &pmem));
    gwt_fill(pages, NPAGE * PAGE, 77);

    /* the ops: puts of every size into consecutive slots with a guard page
     * between, one paged put of NPAGE scattered pages, a get now and then */
    op_t ops[NPUT + 8];
    int nops = 0;
    uint64_t off = 0;
    for (int i = 0; i < NPUT; i++) {
        op_t *o = &ops[nops++];
        memset(o, 0, sizeof(*o));
        o->kind = 0;
        o->len = g_sizes[i % 6];
        o->off = off;
        off += (o->len + PAGE) & ~(uint64_t)(PAGE - 1);
        off += PAGE;
        o->buf = it_alloc(o->len);
        gwt_fill(o->buf, o->len, 100 + (uint64_t)i);
        if (i == NPUT / 2) { /* the paged batch */
            op_t *b = &ops[nops++];
            memset(b, 0, sizeof(*b));
            b->kind = 1;
            b->off = off;
            b->len = NPAGE * PAGE * 2;
            for (int k = 0; k < NPAGE; k++)
                b->rpages[k] = (uint32_t)(2 * (NPAGE - 1 - k)); /* every other page, backwards */
            off += b->len + PAGE;
        }
        if (i % 7 == 3) {
            op_t *g = &ops[nops++];
            memset(g, 0, sizeof(*g));
            g->kind = 2;
            g->off = GETAREA + (uint64_t)(i * 37 % 13) * 65536;
            g->len = i % 2 ? 200000 : 777;
            g->buf = it_alloc(g->len);
        }
    }
    REQUIRE(off <= GETAREA);

    double t0 = it_now();
    int posted = 0, done = 0, posting_refused = 0;
    gw_status_t first_err = GW_OK;
    while (done < nops) {
        while (posted < nops && posted - done < WINDOW) {
            op_t *o = &ops[posted];
            gw_status_t st;
            if (o->kind == 0)
                st = gw_put(ep, o->buf, o->len, NULL, raddr + o->off, rk, &o->r);
            else if (o->kind == 1)
                st = gw_xfer_pages(ep, GW_XFER_PUT, pmem, pages, NULL, rk, raddr + o->off, o->rpages, NPAGE,
                                   PAGE, NULL, &o->r);
            else
                st = gw_get(ep, o->buf, o->len, NULL, raddr + o->off, rk, &o->r);
            if (st != GW_OK && st != GW_INPROGRESS) {
                o->r = NULL;
                o->st = st;
                if (!GW_IS_ENDPOINT_ERROR(st)) {
                    fprintf(stderr, "op %d refused at posting with %s, not an endpoint error: %s\n", posted,
                            gw_status_name(st), gw_last_error(ctx));
                    gwt_failures++;
                }
                posting_refused++;
            }
            posted++;
        }
        op_t *o = &ops[done];
        if (o->r) {
            /* bounded: the fault, then the peer timeout at most */
            o->st = gw_request_wait(o->r, (int)(30000 * scale));
            if (o->st == GW_ERR_TIMEOUT) {
                fprintf(stderr, "op %d (kind %d, %zu bytes) still pending after %.0f s: a hang\n", done, o->kind,
                        o->len, 30 * scale);
                gwt_failures++;
            }
            gw_request_free(o->r);
            o->r = NULL;
        }
        if (o->st != GW_OK && first_err == GW_OK) {
            first_err = o->st;
            fprintf(stderr, "first failure: op %d after %.2f s: %s: %s\n", done, it_now() - t0,
                    gw_status_name(o->st), gw_last_error(ctx));
        }
        /* a failure is the endpoint's: an endpoint error, or the cause it
         * latched (GW_ERR_VERBS for a refused post, GW_ERR_INVALID_KEY for a
         * remote access error), the same for every request it fails */
        if (o->st != GW_OK && !GW_IS_ENDPOINT_ERROR(o->st) && o->st != GW_ERR_CANCELED && o->st != first_err) {
            fprintf(stderr, "op %d failed with %s, neither an endpoint error nor the endpoint's first (%s)\n", done,
                    gw_status_name(o->st), gw_status_name(first_err));
            gwt_failures++;
        }
        done++;
    }
    double took = it_now() - t0;
    int ok = 0;
    for (int i = 0; i < nops; i++)
        ok += ops[i].st == GW_OK;
    fprintf(stderr, "%d of %d operations completed OK in %.2f s (%d refused at posting)\n", ok, nops, took,
            posting_refused);

    uint64_t calls = 0;
    int fired = fired_here(c, &t, ctx, &calls);
    fprintf(stderr, "rule fired %d times in %llu calls\n", fired, (unsigned long long)calls);
    if (fired <= 0) {
        fprintf(stderr, "the injection never fired: this run tested nothing\n");
        gwt_failures++;
    }

    gw_ep_info_t info = {.size = sizeof(info)};
    IT_OK(ctx, gw_ep_query(ep, &info));
    if (!c->fatal) {
        CHECK(ok == nops);
        CHECK_ST(info.error, GW_OK);
    } else {
        CHECK(ok < nops);
        /* the side that met the fault latched its cause; the other side
         * learns of it as an endpoint error */
        CHECK(info.error != GW_OK && (GW_IS_ENDPOINT_ERROR(info.error) || !c->target_side));
        fprintf(stderr, "initiator endpoint: %s\n", gw_status_name(info.error));
        /* new work is refused at once with the endpoint's error */
        gw_request_t *r = NULL;
        CHECK_ST(gw_put(ep, ops[0].buf, 1, NULL, raddr, rk, &r), GW_ERR_ENDPOINT_FAILED);
        /* the target's endpoint fails too, within a bound */
        double tend = it_now() + 15 * scale;
        it_reply_t rep = {0};
        do {
            it_cmd_t q = {.type = IT_CMD_EP_STATUS, .ep = 0};
            rep = it_target_cmd(&t, &q, ctx);
            if (rep.b != GW_OK)
                break;
            usleep(20000);
        } while (it_now() < tend);
        fprintf(stderr, "target endpoint: %s\n", gw_status_name((gw_status_t)rep.b));
        CHECK(GW_IS_ENDPOINT_ERROR((gw_status_t)rep.b));
    }

    /* gets that completed read the untouched area */
    for (int i = 0; i < nops; i++)
        if (ops[i].kind == 2 && ops[i].st == GW_OK && memcmp(ops[i].buf, model + ops[i].off, ops[i].len) != 0) {
            fprintf(stderr, "get %d returned bytes that are not the target's\n", i);
            gwt_failures++;
        }

    /* a rule that drops every completion from one on acts on the second
     * endpoint's queue too: disarmed now, so that it can read back */
    if (strstr(c->rule, "drop") && strstr(c->rule, "*all")) {
        char why[200];
        IT_OK(ctx, gw_fault_configure("", why, sizeof(why)));
    }
    /* the target's region, read back over the healthy second endpoint */
    uint8_t *img = it_alloc(REGION);
    gw_request_t *r = NULL;
    IT_OK(ctx, gw_get(ep2, img, REGION, NULL, raddr, rk2, &r));
    CHECK_ST(it_wait_free(r, (int)(60000 * scale)), GW_OK);
    uint8_t *owner = calloc(REGION, 1); /* 1: a put that completed; 2: one that did not */
    uint8_t *want = it_alloc(REGION);
    memcpy(want, model, REGION);
    for (int i = 0; i < nops; i++) {
        op_t *o = &ops[i];
        if (o->kind == 2)
            continue;
        uint8_t mark = o->st == GW_OK ? 1 : 2;
        if (o->kind == 0) {
            memcpy(want + o->off, o->buf, o->len);
            memset(owner + o->off, mark, o->len);
        } else {
            for (int k = 0; k < NPAGE; k++) {
                memcpy(want + o->off + (uint64_t)o->rpages[k] * PAGE, pages + (size_t)k * PAGE, PAGE);
                memset(owner + o->off + (uint64_t)o->rpages[k] * PAGE, mark, PAGE);
            }
        }
    }
    long long bad = 0, partial = 0, first_bad = -1;
    for (size_t i = 0; i < REGION; i++) {
        if (img[i] == want[i])
            continue;
        if (owner[i] == 2 && img[i] == model[i]) {
            partial++; /* a failed put's byte that did not land */
            continue;
        }
        if (first_bad < 0)
            first_bad = (long long)i;
        bad++;
    }
    fprintf(stderr, "target region: %lld bytes of failed puts not written; %lld bytes corrupted%s\n", partial,
            bad, bad ? "" : " (none)");
    if (bad) {
        fprintf(stderr, "first corrupted byte at offset %lld (owner %d): 0x%02x, expected 0x%02x\n", first_bad,
                owner[first_bad], img[first_bad], want[first_bad]);
        gwt_failures++;
    }
    if (!c->fatal)
        CHECK(partial == 0);

    gw_rkey_destroy(rk);
    gw_rkey_destroy(rk2);
    CHECK_ST(gw_ep_close(ep, 5000), GW_OK);
    CHECK_ST(gw_ep_close(ep2, 5000), GW_OK);
    CHECK(it_target_stop(&t, ctx) == 0);
    IT_OK(ctx, gw_mem_dereg(pmem));
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    return gwt_done(c->name);
}
