/* SPDX-License-Identifier: Apache-2.0 */
/* perf_server.c - the target side of `gpuwire perf`: registers a buffer with
 * remote read+write, hands its rkey to the client, answers control messages,
 * plays pong in latency phases, keeps receives posted for --op send, counts
 * notifications, verifies payloads with --check and measures its CPU use. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perf.h"

typedef struct srv {
    gw_context_t *ctx;
    gw_ep_t *ep;
    uint8_t *buf;
    perf_buf_t pb; /* buf's memory: host or CUDA */
    int mem_dev;   /* --mem of this side */
    size_t max; /* zone size */
    gw_mem_t *mem;
    gw_rkey_t *peer_rkey;
    uint64_t peer_addr; /* start of the client's buffer */
    perf_op_t op;
    uint32_t window;
    /* control */
    uint8_t rx[PERF_CTRL_MAX], tx[PERF_CTRL_MAX];
    gw_request_t *ctrl_rx;
    perf_reqs_t pending; /* replies, pongs */
    /* data receives (--op send) */
    gw_request_t **data_rx; /* a ring: receives of one tag complete in posting order */
    uint32_t data_head;     /* the oldest */
    /* the phase */
    perf_phase_t phase;
    uint64_t size, seed;
    uint32_t flags;
    uint64_t cpu0, wall0;
    uint64_t notes, notes_bad, next_note;
    uint64_t data_msgs;
    int quit;
    perf_idle_t idle;
} srv_t;

static gw_status_t post_ctrl_rx(srv_t *s)
{
    return gw_recv(s->ep, s->rx, sizeof(s->rx), NULL, PERF_TAG_CTRL, ~0ull, &s->ctrl_rx);
}

static gw_status_t reply(srv_t *s, const perf_msg_t *m)
{
    size_t len = perf_msg_encode(m, s->tx);
    gw_request_t *r = NULL;
    /* the send buffer is reused: wait for the previous reply to leave first */
    gw_status_t st = gw_send(s->ep, s->tx, len, NULL, PERF_TAG_CTRL, &r);
    if (st != GW_OK)
        return perf_fail(s->ctx, "gw_send(control reply)", st), st;
    st = gw_request_wait(r, PERF_CTRL_TIMEOUT_MS);
    gw_request_free(r);
    if (st != GW_OK)
        perf_fail(s->ctx, "control reply", st);
    return st;
}

static gw_status_t post_data_rx(srv_t *s, uint32_t i)
{
    gw_status_t st = gw_recv(s->ep, s->buf, s->max, s->mem, PERF_TAG_DATA, ~0ull, &s->data_rx[i]);
    if (st != GW_OK)
        perf_fail(s->ctx, "gw_recv(data)", st);
    return st;
}

static gw_status_t on_hello(srv_t *s, const perf_msg_t *m)
{
    gw_status_t st;
    if (m->op > PERF_PUT_NOTIFY || m->window == 0 || m->window > PERF_MAX_WINDOW ||
        m->size > (1ull << 40)) {
        fprintf(stderr, "gpuwire perf server: bad HELLO (op %u, window %u, size %llu)\n", m->op,
                m->window, (unsigned long long)m->size);
        return GW_ERR_PROTOCOL;
    }
    s->op = (perf_op_t)m->op;
    s->window = m->window;
    s->max = m->size ? (size_t)m->size : 64;
    if ((m->flags & PERF_F_ALLOC) && s->mem_dev < 0) { /* the client asked for --alloc */
        void *p = NULL;
        st = gw_mem_alloc(s->ctx, 2 * s->max, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, &p, &s->mem);
        if (st != GW_OK)
            return perf_fail(s->ctx, "gw_mem_alloc(target buffer)", st), st;
        s->pb = (perf_buf_t){.p = p, .len = 2 * s->max, .dev = -1, .shm = 1};
        s->buf = s->pb.p;
    } else {
        s->pb.tick = s->ctx; /* the client waits for the reply meanwhile */
        if (perf_buf_alloc(&s->pb, 2 * s->max, s->mem_dev, (m->flags & PERF_F_HUGE) != 0) != 0)
            return GW_ERR_NOMEM;
        s->buf = s->pb.p;
        st = gw_mem_reg(s->ctx, s->buf, 2 * s->max, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE,
                        &s->mem);
        if (st != GW_OK)
            return perf_fail(s->ctx, "gw_mem_reg(target buffer)", st), st;
    }
    st = gw_rkey_unpack(s->ep, m->blob, m->bloblen, &s->peer_rkey);
    if (st != GW_OK)
        return perf_fail(s->ctx, "gw_rkey_unpack(client key)", st), st;
    size_t plen = 0;
    st = gw_rkey_range(s->peer_rkey, &s->peer_addr, &plen);
    if (st != GW_OK)
        return perf_fail(s->ctx, "gw_rkey_range", st), st;
    uint8_t key[PERF_CTRL_MAX - PERF_CTRL_HDR];
    size_t klen = sizeof(key);
    st = gw_mem_pack_rkey(s->mem, key, &klen);
    if (st != GW_OK)
        return perf_fail(s->ctx, "gw_mem_pack_rkey", st), st;
    if (s->op == PERF_SEND) {
        s->data_rx = calloc(s->window, sizeof(*s->data_rx));
        if (!s->data_rx)
            return GW_ERR_NOMEM;
        for (uint32_t i = 0; i < s->window; i++)
            if ((st = post_data_rx(s, i)) != GW_OK)
                return st;
    }
    perf_msg_t r = {.type = PERF_MSG_REPLY, .status = GW_OK, .seed = perf_gpu_id(s->mem),
                    .bloblen = (uint32_t)klen, .blob = key};
    return reply(s, &r);
}

static gw_status_t on_begin(srv_t *s, const perf_msg_t *m)
{
    if (m->size > s->max)
        return GW_ERR_PROTOCOL;
    s->phase = (perf_phase_t)m->phase;
    s->size = m->size;
    s->seed = m->seed;
    s->flags = m->flags;
    s->idle.spin_ns = m->a;
    if ((m->flags & PERF_F_SPIN_AUTO) && m->a != UINT64_MAX && perf_auto_spin_us(1) == 0)
        s->idle.spin_ns = 0; /* one CPU here: spinning would only delay the client's data */
    s->notes = s->notes_bad = s->next_note = 0;
    s->data_msgs = 0;
    if (s->flags & PERF_F_CHECK) {
        if (s->op == PERF_GET)
            perf_buf_fill(&s->pb, 0, s->size, s->seed); /* what the client will read */
        else
            perf_buf_zero(&s->pb, 0, s->size); /* what the client must overwrite */
    }
    s->cpu0 = perf_cpu_ns();
    s->wall0 = perf_now_ns();
    perf_msg_t r = {.type = PERF_MSG_REPLY, .status = GW_OK};
    return reply(s, &r);
}

static void drain_notes(srv_t *s)
{
    uint64_t v;
    while (gw_notify_wait(s->ep, 0, &v) == GW_OK) {
        if (s->phase == PERF_PHASE_LAT) {
            gw_request_t *r = NULL;
            gw_status_t st = gw_put_notify(s->ep, s->buf, s->size, s->mem, s->peer_addr + s->max,
                                           s->peer_rkey, v, &r);
            if (st != GW_OK || perf_reqs_add(&s->pending, r) != 0) {
                perf_fail(s->ctx, "gw_put_notify(pong)", st);
                s->quit = -1;
                return;
            }
        } else {
            if (v != s->next_note)
                s->notes_bad++;
            s->next_note = v + 1;
        }
        s->notes++;
    }
}

static int check_data_rx(srv_t *s);

static gw_status_t on_end(srv_t *s, const perf_msg_t *m)
{
    gw_status_t st = GW_OK;
    if (s->op == PERF_SEND && s->phase == PERF_PHASE_BW) {
        /* the END of a send stream comes after its messages (one endpoint,
         * in order), but some may still wait in the unexpected store for a
         * receive: receive all m->a before answering, so that the client's
         * clock stops when they have arrived, not when its sends completed
         * locally (an injected send completes at once) */
        uint64_t until = perf_now_ns() + 30000000000ull;
        while (s->data_msgs < m->a && !s->quit && perf_now_ns() < until) {
            gw_progress(s->ctx);
            check_data_rx(s);
        }
        if (s->data_msgs < m->a) {
            fprintf(stderr, "gpuwire perf server: %llu of the %llu messages the client sent arrived within 30 s\n",
                    (unsigned long long)s->data_msgs, (unsigned long long)m->a);
            st = GW_ERR_TIMEOUT;
        }
    }
    uint64_t cpu = perf_cpu_ns() - s->cpu0, wall = perf_now_ns() - s->wall0;
    drain_notes(s);
    if (s->flags & PERF_F_CHECK) {
        if (s->op != PERF_GET) {
            long long bad = perf_buf_verify(&s->pb, 0, s->size, s->seed);
            if (bad >= 0) {
                fprintf(stderr,
                        "gpuwire perf server: --check: %s of %llu bytes: byte %lld of the target "
                        "buffer differs from the pattern\n",
                        perf_op_name(s->op), (unsigned long long)s->size, bad);
                st = GW_ERR_PROTOCOL;
            }
        }
        if (s->op == PERF_PUT_NOTIFY && s->phase == PERF_PHASE_BW &&
            (s->notes != m->a || s->notes_bad)) {
            fprintf(stderr,
                    "gpuwire perf server: --check: %llu notifications received (%llu out of "
                    "order), the client completed %llu\n",
                    (unsigned long long)s->notes, (unsigned long long)s->notes_bad,
                    (unsigned long long)m->a);
            st = GW_ERR_PROTOCOL;
        }
    }
    s->phase = PERF_PHASE_IDLE;
    s->idle.spin_ns = 0;
    perf_msg_t r = {.type = PERF_MSG_REPLY, .status = st, .a = cpu, .b = wall};
    return reply(s, &r);
}

static gw_status_t handle_ctrl(srv_t *s)
{
    gw_request_info_t info = {.size = sizeof(info)};
    gw_status_t st = gw_request_info(s->ctrl_rx, &info);
    gw_request_free(s->ctrl_rx);
    s->ctrl_rx = NULL;
    if (st != GW_OK || info.status != GW_OK)
        return perf_fail(s->ctx, "control receive", st != GW_OK ? st : info.status),
               st != GW_OK ? st : info.status;
    perf_msg_t m;
    if (perf_msg_decode(s->rx, info.length, &m) != 0) {
        fprintf(stderr, "gpuwire perf server: malformed control message (%zu bytes)\n",
                info.length);
        return GW_ERR_PROTOCOL;
    }
    /* copy the blob out of rx before reposting it */
    uint8_t blob[PERF_CTRL_MAX];
    memcpy(blob, m.blob, m.bloblen);
    m.blob = blob;
    if ((st = post_ctrl_rx(s)) != GW_OK)
        return perf_fail(s->ctx, "gw_recv(control)", st), st;
    switch (m.type) {
    case PERF_MSG_HELLO: return on_hello(s, &m);
    case PERF_MSG_BEGIN: return on_begin(s, &m);
    case PERF_MSG_END: return on_end(s, &m);
    case PERF_MSG_QUIT: {
        perf_msg_t r = {.type = PERF_MSG_REPLY, .status = GW_OK};
        s->quit = 1;
        return reply(s, &r);
    }
    default:
        fprintf(stderr, "gpuwire perf server: unknown control message type %u\n", m.type);
        return GW_ERR_PROTOCOL;
    }
}

/* Reaps completed receives from the oldest on and reposts each (it becomes
 * the newest); stops at the first one still waiting, so a progress round
 * costs what completed, not the window. */
static int check_data_rx(srv_t *s)
{
    int n = 0;
    for (uint32_t k = 0; k < s->window; k++) {
        uint32_t i = s->data_head;
        gw_request_t *r = s->data_rx[i];
        gw_status_t st = gw_request_test(r);
        if (st == GW_INPROGRESS)
            break;
        s->data_head = (i + 1) % s->window;
        gw_request_info_t info; /* (not zeroed: 300 bytes of stores per message) */
        info.size = sizeof(info);
        gw_request_info(r, &info);
        if (st != GW_OK) {
            gw_request_free(r);
            s->data_rx[i] = NULL;
            perf_fail(s->ctx, "gw_recv(data) completion", st);
            s->quit = -1;
            return n;
        }
        n++;
        s->data_msgs++;
        if (s->phase == PERF_PHASE_LAT) { /* (the pong first: the receive's free after it) */
            gw_request_t *pr = NULL;
            st = gw_send(s->ep, s->buf, info.length, s->mem, PERF_TAG_DATA, &pr);
            if (st == GW_OK && gw_request_test(pr) == GW_OK) { /* sent at once (a small message) */
                gw_request_free(pr);
                pr = NULL;
            }
            if (st != GW_OK || (pr && perf_reqs_add(&s->pending, pr) != 0)) {
                gw_request_free(r);
                s->data_rx[i] = NULL;
                perf_fail(s->ctx, "gw_send(pong)", st);
                s->quit = -1;
                return n;
            }
        }
        gw_request_free(r);
        s->data_rx[i] = NULL;
        if (post_data_rx(s, i) != GW_OK) {
            s->quit = -1;
            return n;
        }
    }
    return n;
}

static void session_end(srv_t *s)
{
    perf_reqs_reap(&s->pending);
    if (s->ctrl_rx)
        gw_request_free(s->ctrl_rx);
    if (s->data_rx) {
        for (uint32_t i = 0; i < s->window; i++)
            gw_request_free(s->data_rx[i]);
        free(s->data_rx);
    }
    gw_rkey_destroy(s->peer_rkey);
    gw_status_t st = gw_ep_close(s->ep, 2000);
    if (st != GW_OK)
        perf_fail(s->ctx, "gw_ep_close", st);
    perf_reqs_free(&s->pending);
    st = gw_mem_dereg(s->mem);
    if (st != GW_OK)
        perf_fail(s->ctx, "gw_mem_dereg", st);
    perf_buf_free(&s->pb);
}

/* Serves one client on ep until it says QUIT or fails.  0 on a clean end. */
static int serve(gw_context_t *ctx, gw_ep_t *ep, int mem_dev)
{
    srv_t s;
    memset(&s, 0, sizeof(s));
    s.mem_dev = mem_dev;
    s.ctx = ctx;
    s.ep = ep;
    gw_status_t st = post_ctrl_rx(&s);
    if (st != GW_OK) {
        perf_fail(ctx, "gw_recv(control)", st);
        s.quit = -1;
    }
    while (!s.quit) {
        int n = gw_progress(ctx);
        if (n < 0) {
            perf_fail(ctx, "gw_progress", (gw_status_t)n);
            s.quit = -1;
            break;
        }
        int handled = 0;
        if (gw_request_test(s.ctrl_rx) != GW_INPROGRESS) {
            handled = 1;
            if (handle_ctrl(&s) != GW_OK) {
                s.quit = -1;
                break;
            }
        }
        if (s.phase != PERF_PHASE_IDLE && (s.op == PERF_PUT || s.op == PERF_PUT_NOTIFY))
            drain_notes(&s);
        if (s.data_rx)
            handled += check_data_rx(&s);
        if (s.pending.n && (st = perf_reqs_reap(&s.pending)) != GW_OK) {
            perf_fail(ctx, "pong", st);
            s.quit = -1;
        }
        perf_idle(&s.idle, ctx, n > 0 || handled);
    }
    session_end(&s);
    return s.quit == 1 ? 0 : 1;
}

int perf_server(const perf_opts_t *o)
{
    gw_context_t *ctx = NULL;
    gw_listener_t *l = NULL;
    gw_status_t st = gw_context_create(NULL, &ctx);
    if (st != GW_OK)
        return perf_fail(NULL, "gw_context_create", st);
    char addr[128];
    snprintf(addr, sizeof(addr), "%s:%u", o->bind ? o->bind : "", o->port);
    st = o->name ? gw_agent_listen(ctx, o->name, addr, &l) : gw_listen(ctx, addr, &l);
    if (st != GW_OK) {
        perf_fail(ctx, o->name ? "gw_agent_listen" : "gw_listen", st);
        gw_context_destroy(ctx);
        return 1;
    }
    char bound[128] = "";
    gw_listener_addr(l, bound, sizeof(bound));
    if (o->addr_fd >= 0) {
        size_t len = strlen(bound) + 1;
        if (write(o->addr_fd, bound, len) != (ssize_t)len)
            fprintf(stderr, "gpuwire perf server: cannot report the address: %s\n", strerror(errno));
        close(o->addr_fd);
    } else {
        printf("gpuwire perf server listening on %s\n", bound);
        fflush(stdout);
    }
    int rc = 0;
    for (;;) {
        gw_ep_t *ep = NULL;
        st = gw_accept(l, o->once ? 60000 : -1, &ep);
        if (st != GW_OK) {
            rc = perf_fail(ctx, "gw_accept", st);
            break;
        }
        gw_ep_info_t info = {.size = sizeof(info)};
        gw_ep_query(ep, &info);
        if (o->addr_fd < 0) {
            printf("client %s connected over %s (%s)\n", info.peer, info.transport, info.path);
            fflush(stdout);
        }
        rc = serve(ctx, ep, o->mem_dev);
        if (o->addr_fd < 0) {
            printf("client %s %s\n", info.peer, rc ? "failed (see above)" : "done");
            fflush(stdout);
        }
        if (o->once)
            break;
    }
    gw_listener_destroy(l);
    st = gw_context_destroy(ctx);
    if (st != GW_OK)
        rc = perf_fail(ctx, "gw_context_destroy", st);
    return rc;
}
