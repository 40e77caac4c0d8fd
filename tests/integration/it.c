/* SPDX-License-Identifier: Apache-2.0 */
/* it.c - see it.h. */
#include "it.h"

#include "core/fault.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

uint64_t it_hash(const void *buf, size_t len)
{
    const uint8_t *p = buf;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

double it_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

gw_context_t *it_ctx(void)
{
    gw_context_t *ctx = NULL;
    gw_status_t st = gw_context_create(NULL, &ctx);
    if (st != GW_OK) {
        fprintf(stderr, "gw_context_create failed: %s\n", gw_status_name(st));
        exit(1);
    }
    return ctx;
}

void *it_alloc(size_t len)
{
    void *p = NULL;
    if (posix_memalign(&p, 4096, len ? len : 1) != 0) {
        fprintf(stderr, "cannot allocate %zu bytes\n", len);
        exit(1);
    }
    memset(p, 0, len);
    return p;
}

gw_status_t it_wait_free(gw_request_t *r, int timeout_ms)
{
    gw_status_t st = gw_request_wait(r, timeout_ms);
    gw_request_free(r);
    return st;
}

double it_time_scale(void)
{
    const char *v = getenv("IT_TIME_SCALE");
    double f = v && *v ? atof(v) : 1.0;
    return f >= 1.0 ? f : 1.0;
}

gw_ep_t *it_connect(gw_context_t *ctx, const char *addr)
{
    gw_ep_t *ep = NULL;
    IT_OK(ctx, gw_connect(ctx, addr, &ep));
    return ep;
}

/* ---- the target child ---------------------------------------------------------- */
typedef struct tgt {
    const it_target_cfg_t *cfg;
    gwt_chan_t *chan;
    gw_context_t *ctx;
    gw_ep_t *ep[IT_MAX_EPS];
    uint8_t *buf[IT_MAX_REGIONS];
    int allocated; /* IT_ALLOC=1: regions from gw_mem_alloc */
    gw_mem_t *mem[IT_MAX_REGIONS];
} tgt_t;

static void progress_all(gw_context_t *ctx)
{
    for (int i = 0; i < 1000 && gw_progress(ctx) > 0; i++)
        ;
}

/* Progresses until r completes or timeout_ms passes. */
static gw_status_t tgt_wait(tgt_t *t, gw_request_t *r, int timeout_ms)
{
    return gw_request_wait(r, timeout_ms);
}

static it_reply_t tgt_handle(tgt_t *t, const it_cmd_t *c)
{
    it_reply_t rep = {0, 0, 0, 0};
    uint8_t *base = c->region < IT_MAX_REGIONS ? t->buf[c->region] : NULL;
    gw_ep_t *ep = c->ep < IT_MAX_EPS ? t->ep[c->ep] : NULL;
    gw_request_t *r = NULL;
    switch (c->type) {
    case IT_CMD_VERIFY:
        progress_all(t->ctx);
        if (!base && t->allocated) { /* gw_mem_dereg freed it: nothing left to look at */
            fprintf(stderr, "target: region %u was freed by gw_mem_dereg (IT_ALLOC): not verified\n", c->region);
            rep.a = -1;
            break;
        }
        rep.a = gwt_verify(base + c->off, c->len, c->seed);
        break;
    case IT_CMD_FILL:
        gwt_fill(base + c->off, c->len, c->seed);
        break;
    case IT_CMD_DEREG:
        rep.a = gw_mem_dereg(t->mem[c->region]);
        if (rep.a == GW_OK && !t->allocated) /* its bytes as the deregistration left them */
            rep.b = (int64_t)it_hash(base, t->cfg->region[c->region].len);
        if (rep.a == GW_OK) {
            t->mem[c->region] = NULL;
            if (t->allocated)
                t->buf[c->region] = NULL; /* gw_mem_dereg freed it */
        }
        break;
    case IT_CMD_NOTIFY: {
        /* put i wrote [off + i*len, +len) with seed + i and then notified i */
        for (uint64_t i = 0; i < c->count; i++) {
            uint64_t v = ~0ull;
            gw_status_t st = gw_notify_wait(ep, 30000, &v);
            if (st != GW_OK) {
                fprintf(stderr, "target: gw_notify_wait #%llu: %s (%s)\n", (unsigned long long)i,
                        gw_status_name(st), gw_last_error(t->ctx));
                rep.a++;
                break;
            }
            if (v != i) {
                fprintf(stderr, "target: notification %llu arrived as #%llu\n",
                        (unsigned long long)v, (unsigned long long)i);
                rep.b++;
            }
            if (gwt_verify(base + c->off + v * c->len, c->len, c->seed + v) != -1) {
                fprintf(stderr, "target: notification %llu came before its data\n",
                        (unsigned long long)v);
                rep.a++;
            }
        }
        break;
    }
    case IT_CMD_RECV: {
        memset(base + c->off, 0, c->len);
        gw_status_t st = gw_recv(ep, base + c->off, c->len, t->mem[c->region], c->tag, c->mask, &r);
        if (st == GW_OK)
            st = tgt_wait(t, r, 30000);
        gw_request_info_t info = {.size = sizeof(info)};
        if (r)
            gw_request_info(r, &info);
        gw_request_free(r);
        rep.a = st;
        rep.b = (int64_t)info.length;
        rep.c = (int64_t)info.tag;
        rep.d = gwt_verify(base + c->off, info.length < c->len ? info.length : c->len, c->seed);
        break;
    }
    case IT_CMD_SEND: {
        gwt_fill(base + c->off, c->len, c->seed);
        gw_status_t st = gw_send(ep, base + c->off, c->len, t->mem[c->region], c->tag, &r);
        if (st == GW_OK)
            st = tgt_wait(t, r, 30000);
        gw_request_free(r);
        rep.a = st;
        break;
    }
    case IT_CMD_SLEEP_MS:
        usleep((useconds_t)(c->off * 1000));
        break;
    case IT_CMD_EP_STATUS: {
        progress_all(t->ctx);
        gw_ep_info_t info = {.size = sizeof(info)};
        rep.a = gw_ep_query(ep, &info);
        rep.b = info.error;
        break;
    }
    case IT_CMD_CLOSE_EP:
        rep.a = gw_ep_close(ep, 5000);
        if (rep.a == GW_OK)
            t->ep[c->ep] = NULL;
        break;
    case IT_CMD_HASH:
        progress_all(t->ctx);
        rep.a = (int64_t)it_hash(base + c->off, c->len);
        break;
    case IT_CMD_NCOUNT:
        rep.a = gw_notify_count_wait(ep, c->tag, c->count, (int)c->off);
        break;
    case IT_CMD_FAULT:
        rep.a = (int64_t)gw_fault_fired((int)c->region);
        rep.b = (int64_t)gw_fault_calls((int)c->region);
        rep.c = gw_fault_rules();
        break;
    case IT_CMD_NOTIFY_ANY: {
        uint64_t v = 0;
        rep.a = gw_notify_wait(ep, (int)c->off, &v);
        rep.b = (int64_t)v;
        break;
    }
    default:
        rep.a = GW_ERR_INVALID;
    }
    return rep;
}

static int target_main(void *arg)
{
    it_target_t *T = arg;
    const it_target_cfg_t *cfg = &T->cfg;
    close(T->to_child.wfd); /* the parent's ends: EOF when the parent dies */
    close(T->to_parent.rfd);
    /* over verbs across two devices (the guest's veth pair): the target's own NIC */
    const char *dev = getenv("IT_TARGET_IB_DEVICE");
    if (dev && dev[0])
        setenv("GPUWIRE_IB_DEVICE", dev, 1);
    for (int i = 0; i < 8 && cfg->env[i]; i++)
        putenv((char *)cfg->env[i]);
    tgt_t t;
    memset(&t, 0, sizeof(t));
    t.cfg = cfg;
    t.chan = &T->child_end;
    t.ctx = it_ctx();
    gw_listener_t *l = NULL;
    IT_OK(t.ctx, gw_listen(t.ctx, "127.0.0.1:0", &l));
    char addr[128];
    IT_OK(t.ctx, gw_listener_addr(l, addr, sizeof(addr)));
    REQUIRE(gwt_chan_send(t.chan, addr, (uint32_t)strlen(addr) + 1) == 0);
    for (int i = 0; i < cfg->n_eps; i++) {
        gw_status_t st = gw_accept(l, 30000, &t.ep[i]);
        if (st != GW_OK) {
            fprintf(stderr, "target: gw_accept #%d: %s (%s)\n", i, gw_status_name(st),
                    gw_last_error(t.ctx));
            return 1;
        }
    }
    /* IT_ALLOC=1: every region from gw_mem_alloc (shared memory that the
     * intra transport's peers copy into directly), the same suites apply */
    const char *alloc = getenv("IT_ALLOC");
    t.allocated = alloc && alloc[0] == '1';
    for (int i = 0; i < cfg->n_regions; i++) {
        const it_region_spec_t *s = &cfg->region[i];
        if (t.allocated) {
            void *p = NULL;
            IT_OK(t.ctx, gw_mem_alloc(t.ctx, s->len, s->access, &p, &t.mem[i]));
            t.buf[i] = p;
            if (s->seed)
                gwt_fill(t.buf[i], s->len, s->seed);
        } else {
            t.buf[i] = it_alloc(s->len);
            if (s->seed)
                gwt_fill(t.buf[i], s->len, s->seed);
            IT_OK(t.ctx, gw_mem_reg(t.ctx, t.buf[i], s->len, s->access, &t.mem[i]));
        }
        uint8_t key[IT_KEY_MAX];
        size_t klen = sizeof(key);
        gw_status_t st = gw_mem_pack_rkey(t.mem[i], key, &klen);
        if (st != GW_OK)
            klen = 0; /* local-only region: no key; the parent gets an empty blob */
        REQUIRE(gwt_chan_send(t.chan, key, (uint32_t)klen) == 0);
    }
    int fd = -1;
    IT_OK(t.ctx, gw_context_fd(t.ctx, &fd));
    int rc = 0;
    /* IT_TARGET_SPIN=1: progress without sleeping between commands (a
     * target that polls, as intra's ring wants one) */
    const char *sp = getenv("IT_TARGET_SPIN");
    int spin = sp && sp[0] == '1';
    for (;;) {
        progress_all(t.ctx);
        for (int k = 0; spin && k < 256; k++)
            gw_progress(t.ctx);
        struct pollfd p[2] = {{.fd = t.chan->rfd, .events = POLLIN}, {.fd = fd, .events = POLLIN}};
        int n = poll(p, 2, spin ? 0 : 5);
        if (n < 0 && errno != EINTR)
            break;
        if (!(p[0].revents & (POLLIN | POLLHUP)))
            continue;
        it_cmd_t c;
        if (gwt_chan_recv(t.chan, &c, sizeof(c), 30000) != (int)sizeof(c)) { /* (a parent gone: EOF at once) */
            fprintf(stderr, "target: the parent went away\n");
            rc = 1;
            break;
        }
        if (c.type == IT_CMD_QUIT)
            break;
        it_reply_t rep = tgt_handle(&t, &c);
        REQUIRE(gwt_chan_send(t.chan, &rep, sizeof(rep)) == 0);
    }
    for (int i = 0; i < cfg->n_eps; i++)
        if (t.ep[i] && gw_ep_close(t.ep[i], 2000) != GW_OK)
            rc = 1;
    for (int i = 0; i < cfg->n_regions; i++) {
        gw_status_t st = t.mem[i] ? gw_mem_dereg(t.mem[i]) : GW_OK;
        if (st != GW_OK) {
            fprintf(stderr, "target: gw_mem_dereg(region %d): %s\n", i, gw_status_name(st));
            rc = 1;
        }
        if (!t.allocated)
            free(t.buf[i]);
    }
    gw_listener_destroy(l);
    gw_status_t st = gw_context_destroy(t.ctx);
    if (st != GW_OK) {
        fprintf(stderr, "target: gw_context_destroy: %s\n", gw_status_name(st));
        rc = 1;
    }
    return rc;
}

void it_target_start(it_target_t *t, const it_target_cfg_t *cfg, char *addr, size_t addrlen)
{
    memset(t, 0, sizeof(*t));
    t->cfg = *cfg;
    gwt_chan_t parent;
    REQUIRE(gwt_chan_pair(&parent, &t->child_end) == 0);
    t->to_child = parent;
    t->to_parent = parent;
    t->pid = gwt_spawn(target_main, t);
    REQUIRE(t->pid > 0);
    close(t->child_end.rfd);
    close(t->child_end.wfd);
    int n = gwt_chan_recv(&t->to_parent, addr, (uint32_t)addrlen, 30000);
    REQUIRE(n > 0);
}

int it_target_keys(it_target_t *t, uint8_t keys[][IT_KEY_MAX], size_t *lens)
{
    for (int i = 0; i < t->cfg.n_regions; i++) {
        int n = gwt_chan_recv(&t->to_parent, keys[i], IT_KEY_MAX, 30000);
        if (n < 0)
            return -1;
        lens[i] = (size_t)n;
    }
    return 0;
}

static int recv_progress(gwt_chan_t *c, void *buf, uint32_t len, gw_context_t *ctx, int timeout_ms)
{
    double end = it_now() + timeout_ms / 1000.0;
    while (it_now() < end) {
        if (ctx)
            progress_all(ctx);
        struct pollfd p = {.fd = c->rfd, .events = POLLIN};
        if (poll(&p, 1, ctx ? 1 : 100) > 0)
            return gwt_chan_recv(c, buf, len, 5000);
    }
    return -1;
}

it_reply_t it_target_cmd(it_target_t *t, const it_cmd_t *cmd, gw_context_t *ctx)
{
    it_reply_t rep;
    REQUIRE(gwt_chan_send(&t->to_child, cmd, sizeof(*cmd)) == 0);
    if (recv_progress(&t->to_parent, &rep, sizeof(rep), ctx, 60000) != (int)sizeof(rep)) {
        fprintf(stderr, "target did not answer command %u\n", cmd->type);
        exit(1);
    }
    return rep;
}

int it_target_stop(it_target_t *t, gw_context_t *ctx)
{
    it_cmd_t q = {.type = IT_CMD_QUIT};
    gwt_chan_send(&t->to_child, &q, sizeof(q));
    /* keep progressing while the child closes its endpoints */
    double end = it_now() + 20;
    while (ctx && it_now() < end) {
        progress_all(ctx);
        int st;
        if (waitpid(t->pid, &st, WNOHANG) == t->pid) {
            close(t->to_child.wfd);
            close(t->to_parent.rfd);
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        usleep(1000);
    }
    int rc = gwt_wait(t->pid, 20);
    close(t->to_child.wfd);
    close(t->to_parent.rfd);
    return rc;
}

void it_target_rkeys(it_target_t *t, gw_context_t *ctx, gw_ep_t *ep, gw_rkey_t **rk, uint64_t *raddr,
                     size_t *rlen)
{
    uint8_t keys[IT_MAX_REGIONS][IT_KEY_MAX];
    size_t klen[IT_MAX_REGIONS];
    REQUIRE(it_target_keys(t, keys, klen) == 0);
    for (int i = 0; i < t->cfg.n_regions; i++) {
        IT_OK(ctx, gw_rkey_unpack(ep, keys[i], klen[i], &rk[i]));
        IT_OK(ctx, gw_rkey_range(rk[i], raddr ? &raddr[i] : NULL, rlen ? &rlen[i] : NULL));
    }
}

gw_rkey_t *it_single_key(it_target_t *t, gw_context_t *ctx, gw_ep_t *ep, uint64_t *raddr, size_t *rlen)
{
    REQUIRE(t->cfg.n_regions == 1);
    gw_rkey_t *rk = NULL;
    it_target_rkeys(t, ctx, ep, &rk, raddr, rlen);
    return rk;
}
