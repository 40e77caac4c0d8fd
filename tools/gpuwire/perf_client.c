/* SPDX-License-Identifier: Apache-2.0 */
/* perf_client.c - the initiator side of `gpuwire perf`: per size a latency
 * phase (ping-pong, or one round trip per get) and a bandwidth phase (a
 * window of outstanding operations), then one table row or JSON object. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "perf.h"

typedef struct cli {
    const perf_opts_t *o;
    gw_context_t *ctx;
    gw_ep_t *ep;
    uint8_t *buf;
    perf_buf_t pb; /* buf's memory: host or CUDA */
    size_t max;
    gw_mem_t *mem;
    gw_rkey_t *rkey;
    uint64_t raddr; /* start of the server's buffer */
    uint8_t tx[PERF_CTRL_MAX], rx[PERF_CTRL_MAX];
    gw_ep_info_t info;
    uint64_t seq;
    perf_idle_t idle;
    /* --batch: the descriptor lists (or page indices) of the current size */
    gw_dlist_t *L, *R;
    uint32_t *pidx;
    int same_gpu; /* both buffers on one GPU of this machine (the server said so) */
    long spin_us;  /* the spin budget in effect (--spin-us, or chosen by CPU count) */
    int spin_auto; /* chosen by CPU count (--spin-us auto, the default) */
    int spinners;  /* processes that spin on this machine: 2 with --loopback */
    /* other processes' CPU use while sizes ran: the most, the size it was at, the total */
    double busy_max, busy_steal, busy_sum, busy_secs;
    uint64_t busy_at;
    int busy_sizes;
    /* --reference: gpuwire's figures to set beside the machine's */
    double first_p50, last_bw;
    uint64_t first_bytes, last_bytes;
} cli_t;

typedef struct result {
    uint64_t bytes;
    uint64_t bw_iters, lat_iters;
    double bw_GBps, msg_rate, elapsed_s;
    double lat_avg, lat_p50, lat_p99;
    double cpu_init, cpu_target;
    double post_us; /* bandwidth phase: posting time per operation (bursts timed whole) */
    int checked;
    double other_cpus, steal_cpus; /* other processes' CPU use (in CPUs) and steal over this size */
} result_t;

/* Sends a control message and waits for the server's reply. */
static gw_status_t ctrl_call(cli_t *c, const perf_msg_t *m, perf_msg_t *reply)
{
    gw_request_t *rr = NULL, *sr = NULL;
    gw_status_t st = gw_recv(c->ep, c->rx, sizeof(c->rx), NULL, PERF_TAG_CTRL, ~0ull, &rr);
    if (st != GW_OK)
        return perf_fail(c->ctx, "gw_recv(control)", st), st;
    size_t len = perf_msg_encode(m, c->tx);
    st = gw_send(c->ep, c->tx, len, NULL, PERF_TAG_CTRL, &sr);
    if (st != GW_OK) {
        gw_request_free(rr);
        return perf_fail(c->ctx, "gw_send(control)", st), st;
    }
    st = gw_request_wait(sr, PERF_CTRL_TIMEOUT_MS);
    gw_request_free(sr);
    if (st != GW_OK) {
        gw_request_free(rr);
        return perf_fail(c->ctx, "control send", st), st;
    }
    st = gw_request_wait(rr, PERF_CTRL_TIMEOUT_MS);
    gw_request_info_t info = {.size = sizeof(info)};
    gw_request_info(rr, &info);
    gw_request_free(rr);
    if (st != GW_OK)
        return perf_fail(c->ctx, "waiting for the server's reply", st), st;
    if (perf_msg_decode(c->rx, info.length, reply) != 0 || reply->type != PERF_MSG_REPLY) {
        fprintf(stderr, "gpuwire perf: malformed reply from the server (%zu bytes)\n", info.length);
        return GW_ERR_PROTOCOL;
    }
    return GW_OK;
}

/* Polls one request to completion (spinning, then sleeping: perf_idle). */
static gw_status_t spin_wait(cli_t *c, gw_request_t *r)
{
    if (c->o->wait) /* the library's own waiting call (--wait) */
        return gw_request_wait(r, PERF_CTRL_TIMEOUT_MS);
    gw_status_t st;
    while ((st = gw_request_test(r)) == GW_INPROGRESS) {
        int n = gw_progress(c->ctx);
        if (n < 0)
            break;
        if (gw_request_test(r) != GW_INPROGRESS) {
            perf_idle(&c->idle, c->ctx, 1); /* its completion is an event: the spin starts over */
            continue;
        }
        perf_idle(&c->idle, c->ctx, n > 0);
    }
    if (st == GW_INPROGRESS)
        st = gw_request_wait(r, PERF_CTRL_TIMEOUT_MS);
    return st;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int done_yet(const perf_opts_t *o, uint64_t n, uint64_t t0, uint64_t now)
{
    if (o->iters > 0)
        return n >= (uint64_t)o->iters;
    return n > 0 && (double)(now - t0) >= o->duration * 1e9;
}

/* One ping-pong (or one get round trip); returns its time in ns, 0 on error. */
static uint64_t one_lat(cli_t *c, uint64_t size, uint64_t value, gw_status_t *stp)
{
    gw_status_t st;
    gw_request_t *a = NULL, *b = NULL;
    uint8_t *zone1 = c->buf + c->max;
    uint64_t t0 = perf_now_ns(), v;
    switch (c->o->op) {
    case PERF_PUT:
    case PERF_PUT_NOTIFY:
        st = gw_put_notify(c->ep, c->buf, size, c->mem, c->raddr, c->rkey, value, &a);
        if (st != GW_OK)
            goto fail_post;
        for (;;) {
            int n = gw_progress(c->ctx);
            if (n < 0)
                break;
            st = gw_notify_wait(c->ep, 0, &v);
            if (st == GW_OK) {
                perf_idle(&c->idle, c->ctx, 1);
                break;
            }
            if (st != GW_INPROGRESS && st != GW_ERR_TIMEOUT)
                goto fail;
            perf_idle(&c->idle, c->ctx, n > 0);
        }
        if (st != GW_OK)
            goto fail;
        if (v != value) {
            fprintf(stderr, "gpuwire perf: pong %llu came back as %llu\n",
                    (unsigned long long)value, (unsigned long long)v);
            st = GW_ERR_PROTOCOL;
            goto fail;
        }
        st = spin_wait(c, a);
        break;
    case PERF_GET:
        st = gw_get(c->ep, zone1, size, c->mem, c->raddr, c->rkey, &a);
        if (st != GW_OK)
            goto fail_post;
        st = spin_wait(c, a);
        break;
    case PERF_SEND:
        st = gw_recv(c->ep, zone1, size, c->mem, PERF_TAG_DATA, ~0ull, &b);
        if (st != GW_OK)
            goto fail_post;
        st = gw_send(c->ep, c->buf, size, c->mem, PERF_TAG_DATA, &a);
        if (st != GW_OK)
            goto fail_post;
        st = spin_wait(c, b);
        if (st == GW_OK)
            st = spin_wait(c, a);
        break;
    default:
        st = GW_ERR_INVALID;
    }
    if (st != GW_OK)
        goto fail;
    uint64_t t = perf_now_ns() - t0;
    gw_request_free(a);
    gw_request_free(b);
    return t ? t : 1;
fail_post:
    perf_fail(c->ctx, "posting a latency operation", st);
    *stp = st;
    gw_request_free(a);
    gw_request_free(b);
    return 0;
fail:
    perf_fail(c->ctx, "latency operation", st);
    *stp = st;
    gw_request_free(a);
    gw_request_free(b);
    return 0;
}

/* Tells the server a phase starts (with the pattern seed under --check, after
 * writing this side's pattern and clearing what the peer will fill). */
static gw_status_t begin_phase(cli_t *c, perf_phase_t phase, uint64_t size, perf_msg_t *m)
{
    const perf_opts_t *o = c->o;
    perf_msg_t r;
    *m = (perf_msg_t){.type = PERF_MSG_BEGIN, .phase = phase, .op = o->op, .size = size,
                      .a = c->idle.spin_ns, .flags = c->spin_auto ? PERF_F_SPIN_AUTO : 0u};
    if (o->check) {
        m->flags |= PERF_F_CHECK;
        m->seed = ++c->seq * 0x9e3779b97f4a7c15ull + size;
        perf_buf_fill(&c->pb, 0, size, m->seed);
        perf_buf_zero(&c->pb, c->max, size);
    }
    gw_status_t st = ctrl_call(c, m, &r);
    if (st != GW_OK)
        return st;
    return (gw_status_t)r.status;
}

static gw_status_t run_lat(cli_t *c, uint64_t size, result_t *res)
{
    const perf_opts_t *o = c->o;
    gw_status_t st;
    perf_msg_t m, r;
    if ((st = begin_phase(c, PERF_PHASE_LAT, size, &m)) != GW_OK)
        return st;
    /* warm up: connections, caches, the server's spinning */
    int warm = size >= (16u << 20) ? 1 : 8;
    for (int i = 0; i < warm; i++)
        if (!one_lat(c, size, (uint64_t)i, &st))
            return st;
    uint64_t cap = 1024, n = 0;
    uint64_t *samples = malloc(cap * sizeof(*samples));
    if (!samples)
        return GW_ERR_NOMEM;
    uint64_t t0 = perf_now_ns(), sum = 0;
    while (!done_yet(o, n, t0, perf_now_ns())) {
        uint64_t t = one_lat(c, size, warm + n, &st);
        if (!t) {
            free(samples);
            return st;
        }
        if (n == cap) {
            uint64_t *ns = realloc(samples, 2 * cap * sizeof(*ns));
            if (!ns) {
                free(samples);
                return GW_ERR_NOMEM;
            }
            samples = ns;
            cap *= 2;
        }
        samples[n++] = t;
        sum += t;
    }
    qsort(samples, n, sizeof(*samples), cmp_u64);
    /* one-way latency for ping-pongs, the whole round trip for a get */
    double div = o->op == PERF_GET ? 1000.0 : 2000.0;
    res->lat_iters = n;
    res->lat_avg = (double)sum / (double)n / div;
    res->lat_p50 = (double)samples[(n - 1) / 2] / div;
    size_t i99 = (size_t)ceil(0.99 * (double)n) - 1;
    res->lat_p99 = (double)samples[i99 < n ? i99 : n - 1] / div;
    free(samples);

    m.type = PERF_MSG_END;
    if ((st = ctrl_call(c, &m, &r)) != GW_OK)
        return st;
    if (r.status != GW_OK)
        return (gw_status_t)r.status;
    if (o->check) {
        long long bad = perf_buf_verify(&c->pb, c->max, size, m.seed);
        if (bad >= 0) {
            fprintf(stderr,
                    "gpuwire perf: --check: %s latency, %llu bytes: byte %lld of what came back "
                    "differs from what was sent\n",
                    perf_op_name(o->op), (unsigned long long)size, bad);
            return GW_ERR_PROTOCOL;
        }
        res->checked = 1;
    }
    return GW_OK;
}

/* --batch: N descriptors of size bytes, one size apart, from the start of
 * both zones (zone 0 here for a put, zone 1 for a get; zone 0 there). */
static gw_status_t batch_lists(cli_t *c, uint64_t size)
{
    const perf_opts_t *o = c->o;
    size_t n = (size_t)o->batch;
    gw_status_t st = GW_OK;
    size_t lbase = o->op == PERF_GET ? c->max : 0;
    if (o->pages) {
        c->pidx = malloc(n * sizeof(*c->pidx));
        if (!c->pidx)
            return GW_ERR_NOMEM;
        for (size_t i = 0; i < n; i++)
            c->pidx[i] = (uint32_t)(2 * i);
        return GW_OK;
    }
    gw_local_desc_t *ld = malloc(n * sizeof(*ld));
    gw_remote_desc_t *rd = malloc(n * sizeof(*rd));
    if (!ld || !rd) {
        free(ld);
        free(rd);
        return GW_ERR_NOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        ld[i] = (gw_local_desc_t){c->mem, lbase + 2 * i * size, (size_t)size};
        rd[i] = (gw_remote_desc_t){c->rkey, 2 * i * size, (size_t)size};
    }
    if (o->indices && !(c->pidx = malloc(n * sizeof(*c->pidx)))) {
        free(ld);
        free(rd);
        return GW_ERR_NOMEM;
    }
    for (size_t i = 0; c->pidx && i < n; i++) /* the index arrays --indices passes: every entry, by index */
        c->pidx[i] = (uint32_t)i;
    if ((st = gw_dlist_local(c->ctx, ld, n, &c->L)) != GW_OK)
        perf_fail(c->ctx, "gw_dlist_local", st);
    else if ((st = gw_dlist_remote(c->ep, rd, n, o->op == PERF_GET ? GW_ACCESS_REMOTE_READ : GW_ACCESS_REMOTE_WRITE,
                                   &c->R)) != GW_OK)
        perf_fail(c->ctx, "gw_dlist_remote", st);
    free(ld);
    free(rd);
    return st;
}

static void batch_lists_free(cli_t *c)
{
    gw_dlist_destroy(c->L);
    gw_dlist_destroy(c->R);
    free(c->pidx);
    c->L = c->R = NULL;
    c->pidx = NULL;
}

static gw_status_t post_bw(cli_t *c, uint64_t size, uint64_t n, gw_request_t **r)
{
    uint8_t *zone1 = c->buf + c->max;
    if (c->o->batch) {
        int op = c->o->op == PERF_GET ? GW_XFER_GET : GW_XFER_PUT;
        if (c->o->pages)
            return gw_xfer_pages(c->ep, op, c->mem, op == GW_XFER_GET ? zone1 : c->buf, c->pidx, c->rkey, c->raddr,
                                 c->pidx, (size_t)c->o->batch, (size_t)size, NULL, r);
        return gw_xfer_batch(c->ep, op, c->L, c->pidx, c->R, c->pidx, (size_t)c->o->batch, NULL, r);
    }
    switch (c->o->op) {
    case PERF_PUT: return gw_put(c->ep, c->buf, size, c->mem, c->raddr, c->rkey, r);
    case PERF_GET: return gw_get(c->ep, zone1, size, c->mem, c->raddr, c->rkey, r);
    case PERF_SEND: return gw_send(c->ep, c->buf, size, c->mem, PERF_TAG_DATA, r);
    case PERF_PUT_NOTIFY:
        return gw_put_notify(c->ep, c->buf, size, c->mem, c->raddr, c->rkey, n, r);
    }
    return GW_ERR_INVALID;
}

#define PERF_POST_BURST 64 /* posts between two clock reads (a time-limited run) */

static gw_status_t run_bw(cli_t *c, uint64_t size, result_t *res)
{
    const perf_opts_t *o = c->o;
    gw_status_t st;
    perf_msg_t m, r;
    if ((st = begin_phase(c, PERF_PHASE_BW, size, &m)) != GW_OK)
        return st;
    /* warm up with one put or get before the clock starts (one-sided: the
     * server counts nothing): first use of the peer's region (mapping it,
     * importing it) is not what the phase measures */
    if (!o->batch && (o->op == PERF_PUT || o->op == PERF_GET)) {
        gw_request_t *wr = NULL;
        if ((st = post_bw(c, size, 0, &wr)) == GW_OK)
            st = gw_request_wait(wr, PERF_CTRL_TIMEOUT_MS);
        gw_request_free(wr);
        if (st != GW_OK) {
            perf_fail(c->ctx, "the warm-up operation", st);
            return st;
        }
    }

    /* the window is a ring, reaped from the oldest: small operations complete
     * in posting order, and a round costs what completed, not the window */
    gw_request_t *win[PERF_MAX_WINDOW] = {0};
    uint64_t w = (uint64_t)o->window;
    uint64_t posted = 0, done = 0;
    uint64_t cpu0 = perf_cpu_ns(), t0 = perf_now_ns(), post_ns = 0;
    for (;;) {
        /* the clock is read once per burst of posts, not per post: on a VM a
         * clock read can cost as much as a small operation itself */
        uint64_t p0 = perf_now_ns();
        int more = !done_yet(o, posted, t0, p0);
        if (more && posted - done < w) {
            for (unsigned k = 1; more && posted - done < w; k++) {
                st = post_bw(c, size, posted, &win[posted % w]);
                if (st != GW_OK) {
                    perf_fail(c->ctx, "posting a bandwidth operation", st);
                    goto out;
                }
                posted++;
                if (o->iters > 0)
                    more = !done_yet(o, posted, t0, 0);
                else if (k % PERF_POST_BURST == 0)
                    more = !done_yet(o, posted, t0, perf_now_ns());
            }
            post_ns += perf_now_ns() - p0;
        }
        int n = gw_progress(c->ctx);
        if (n < 0) {
            st = (gw_status_t)n;
            perf_fail(c->ctx, "gw_progress", st);
            goto out;
        }
        int completed = 0;
        while (done < posted) {
            gw_request_t **slot = &win[done % w];
            gw_status_t s = gw_request_test(*slot);
            if (s == GW_INPROGRESS)
                break;
            gw_request_free(*slot);
            *slot = NULL;
            if (s != GW_OK) {
                st = s;
                perf_fail(c->ctx, "bandwidth operation", st);
                goto out;
            }
            done++;
            completed++;
        }
        if (!more && done == posted)
            break;
        perf_idle(&c->idle, c->ctx, n > 0 || completed);
    }
    gw_request_t *f = NULL;
    if ((st = gw_flush(c->ep, &f)) != GW_OK) {
        perf_fail(c->ctx, "gw_flush", st);
        goto out;
    }
    st = gw_request_wait(f, PERF_CTRL_TIMEOUT_MS);
    gw_request_free(f);
    if (st != GW_OK) {
        perf_fail(c->ctx, "flush", st);
        goto out;
    }
    uint64_t t1 = perf_now_ns(), cpu1 = perf_cpu_ns();
    double secs = (double)(t1 - t0) / 1e9;
    uint64_t per = o->batch ? (uint64_t)o->batch : 1; /* descriptors per operation */
    res->bw_iters = done;
    res->elapsed_s = secs;
    res->bw_GBps = (double)size * (double)per * (double)done / secs / 1e9;
    res->msg_rate = (double)per * (double)done / secs;
    res->cpu_init = 100.0 * (double)(cpu1 - cpu0) / (double)(t1 - t0);
    res->post_us = posted ? (double)post_ns / 1e3 / (double)posted : 0.0;

    m.type = PERF_MSG_END;
    m.a = done;
    if ((st = ctrl_call(c, &m, &r)) != GW_OK)
        return st;
    if (r.status != GW_OK) {
        fprintf(stderr, "gpuwire perf: the server reports %s for %s of %llu bytes\n",
                gw_status_name((gw_status_t)r.status), perf_op_name(o->op),
                (unsigned long long)size);
        return (gw_status_t)r.status;
    }
    res->cpu_target = r.b ? 100.0 * (double)r.a / (double)r.b : 0.0;
    if (o->op == PERF_SEND) { /* the server answered once every message arrived: delivered, not sent */
        secs = (double)(perf_now_ns() - t0) / 1e9;
        res->elapsed_s = secs;
        res->bw_GBps = (double)size * (double)per * (double)done / secs / 1e9;
        res->msg_rate = (double)per * (double)done / secs;
    }
    if (o->check && o->op == PERF_GET) {
        long long bad = perf_buf_verify(&c->pb, c->max, size, m.seed);
        if (bad >= 0) {
            fprintf(stderr, "gpuwire perf: --check: get of %llu bytes: byte %lld differs\n",
                    (unsigned long long)size, bad);
            return GW_ERR_PROTOCOL;
        }
    }
    if (o->check)
        res->checked = 1;
    return GW_OK;
out:
    for (uint64_t i = 0; i < w; i++)
        gw_request_free(win[i]);
    return st;
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", *s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

static void print_header(cli_t *c)
{
    const perf_opts_t *o = c->o;
    if (o->json)
        return;
    if (o->batch)
        printf("# batched: each operation moves %ld descriptors of the size below, one size apart, as %s; "
               "MsgRate counts descriptors\n", o->batch, o->pages ? "gw_xfer_pages" : "gw_xfer_batch over prepared lists");
    if (o->busy_poll)
        printf("# gpuwire perf: op %s, window %d, busy polling%s\n", perf_op_name(o->op), o->window,
               o->check ? ", payload checked" : "");
    else if (c->spin_auto)
        printf("# gpuwire perf: op %s, window %d, %s%s (auto: %d CPUs for %d spinning process%s; "
               "--spin-us sets it)\n",
               perf_op_name(o->op), o->window,
               c->spin_us ? "spin " PERF_SPIN_STR " us then sleep on the context fd" : "no spinning: sleep on the context fd",
               o->check ? ", payload checked" : "", perf_cpus(), c->spinners, c->spinners > 1 ? "es" : "");
    else
        printf("# gpuwire perf: op %s, window %d, spin %ld us then sleep on the context fd%s\n",
               perf_op_name(o->op), o->window, c->spin_us, o->check ? ", payload checked" : "");
    if (o->wait)
        printf("# the latency phase waits with gw_request_wait() (GPUWIRE_SPIN_US, then the context fd)\n");
    printf("# transport %s: %s, peer %s\n", c->info.transport, c->info.path, c->info.peer);
    gw_mem_info_t mi = {.size = sizeof(mi)};
    if (gw_mem_query(c->mem, &mi) == GW_OK)
        printf("# initiator buffer: %s%s%s; %s\n", mi.type == GW_MEM_CUDA ? "CUDA device memory of GPU " : "host memory",
               mi.type == GW_MEM_CUDA ? mi.pci_bus_id : "",
               mi.type != GW_MEM_CUDA && o->huge ? " (2 MiB-aligned, MADV_HUGEPAGE, both sides)" : "", mi.path[0] ? mi.path : "no transport path");
    if (c->info.downgrades[0])
        printf("# not taken: %s\n", c->info.downgrades);
    printf("# ops/s: %ss %s per second in the bandwidth phase, %d outstanding\n", perf_op_name(o->op),
           o->op == PERF_SEND ? "received by the server" : "completed", o->window);
    if (c->same_gpu)
        printf("# note: both processes use GPU %s.  The GPU runs one process's CUDA context at a\n"
               "# time, and each turn of the other process costs a context switch: on an H100 a small\n"
               "# copy took about 145 us when two processes took turns and 5-11 us in one process\n"
               "# (plain CUDA, no gpuwire: bench/device/gpu_ipc_pingpong.c).  Latency near that figure here is\n"
               "# the GPU's, not the transport's; two GPUs, or two threads of one process, avoid it.\n"
               "# See docs/GPU.md, \"Two processes on one GPU\".\n",
               mi.pci_bus_id);
    printf("# latency: %s; CPU: of the bandwidth phase, per side (100%% = one core)\n",
           o->op == PERF_GET ? "round trip of one get" : "half the round trip of a ping-pong");
    printf("%-10s %13s %10s %10s %10s %10s %10s %9s %9s\n", "#bytes", "ops/s", "iters", "BW[GB/s]",
           "lat_avg", "lat_p50", "lat_p99", "CPU_init", "CPU_tgt");
    printf("%-10s %13s %10s %10s %10s %10s %10s %9s %9s\n", "#", "", "", "", "[us]", "[us]",
           "[us]", "[%]", "[%]");
    fflush(stdout);
}

/* Operations per second, whole, in groups of three digits ("1,234,567"): the
 * figure small operations are judged by; "-" when no bandwidth phase ran. */
static void format_rate(double rate, char *buf, size_t len)
{
    if (rate <= 0.0) {
        snprintf(buf, len, "-");
        return;
    }
    char digits[32];
    int n = snprintf(digits, sizeof(digits), "%.0f", rate);
    size_t o = 0;
    for (int i = 0; i < n && o + 2 < len; i++) {
        if (i && (n - i) % 3 == 0)
            buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = '\0';
}

static void print_result(cli_t *c, const result_t *r)
{
    const perf_opts_t *o = c->o;
    if (!o->json) {
        char rate[32];
        format_rate(r->msg_rate, rate, sizeof(rate));
        printf("%-10llu %13s %10llu %10.3f %10.2f %10.2f %10.2f %9.1f %9.1f\n",
               (unsigned long long)r->bytes, rate, (unsigned long long)r->bw_iters, r->bw_GBps,
               r->lat_avg, r->lat_p50, r->lat_p99, r->cpu_init, r->cpu_target);
        fflush(stdout);
        return;
    }
    printf("{\"op\":\"%s\",\"bytes\":%llu,\"iterations\":%llu,\"lat_iterations\":%llu,"
           "\"bw_GBps\":%.6f,\"msg_rate\":%.1f,\"lat_us_avg\":%.3f,\"lat_us_p50\":%.3f,"
           "\"lat_us_p99\":%.3f,\"cpu_initiator_pct\":%.1f,\"cpu_target_pct\":%.1f,\"post_us\":%.3f,"
           "\"elapsed_s\":%.4f,\"window\":%d,\"batch\":%ld,\"pages\":%s,\"checked\":%s,\"same_gpu\":%s,"
           "\"hugepages\":%s,\"spin_us\":%ld,\"other_cpus\":%.2f,\"steal_cpus\":%.2f,\"transport\":",
           perf_op_name(o->op), (unsigned long long)r->bytes, (unsigned long long)r->bw_iters,
           (unsigned long long)r->lat_iters, r->bw_GBps, r->msg_rate, r->lat_avg, r->lat_p50,
           r->lat_p99, r->cpu_init, r->cpu_target, r->post_us, r->elapsed_s, o->window, o->batch,
           o->pages ? "true" : "false", r->checked ? "true" : "false", c->same_gpu ? "true" : "false",
           o->huge ? "true" : "false", o->busy_poll ? -1L : c->spin_us, r->other_cpus, r->steal_cpus);
    json_str(stdout, c->info.transport);
    printf(",\"path\":");
    json_str(stdout, c->info.path);
    printf("}\n");
    fflush(stdout);
}

/* Other processes' CPU use at or above this (in CPUs) marks a size's figures
 * as taken on a busy machine. */
#define PERF_BUSY_CPUS 0.25

static void note_load(cli_t *c, const result_t *r, double secs)
{
    c->busy_sum += r->other_cpus * secs;
    c->busy_secs += secs;
    if (secs < 0.2) /* /proc/stat counts in clock ticks (10 ms): too coarse to judge this size */
        return;
    if (r->other_cpus + r->steal_cpus >= PERF_BUSY_CPUS)
        c->busy_sizes++;
    if (r->other_cpus + r->steal_cpus > c->busy_max + c->busy_steal) {
        c->busy_max = r->other_cpus;
        c->busy_steal = r->steal_cpus;
        c->busy_at = r->bytes;
    }
}

/* One line when the machine was busy during the run (text output only; JSON
 * rows carry other_cpus and steal_cpus). */
static void print_load(const cli_t *c)
{
    if (c->o->json || !c->busy_sizes)
        return;
    printf("# busy machine: other processes used %.2f of %d CPUs on average during the run, "
           "%.2f at %llu bytes%s; %d of %zu sizes ran busy: their figures may not repeat\n",
           c->busy_secs > 0 ? c->busy_sum / c->busy_secs : 0.0, perf_cpus(), c->busy_max,
           (unsigned long long)c->busy_at, c->busy_steal >= 0.05 ? " (plus steal by the hypervisor)" : "",
           c->busy_sizes, c->o->nsizes);
}

/* --reference: this machine's memcpy and pipe ping-pong, beside gpuwire's
 * bandwidth at the largest size and p50 latency at the smallest. */
static void print_reference(const cli_t *c)
{
    const perf_opts_t *o = c->o;
    if (!o->no_bw && c->last_bytes) {
        double m = perf_ref_memcpy_GBps((size_t)c->last_bytes);
        if (m > 0)
            printf("# reference, this machine: memcpy of %llu bytes in one thread %.2f GB/s; gpuwire "
                   "%.2f GB/s there is %.2fx of it\n",
                   (unsigned long long)c->last_bytes, m, c->last_bw, c->last_bw / m);
    }
    if (!o->no_lat && c->first_bytes <= 4096) {
        double p = perf_ref_pipe_us();
        if (p > 0)
            printf("# reference, this machine: pipe ping-pong between two processes %.2f us one way; "
                   "gpuwire p50 %.2f us at %llu bytes is %.2fx of it\n",
                   p, c->first_p50, (unsigned long long)c->first_bytes, c->first_p50 / p);
    }
}

int perf_client(const perf_opts_t *o, const char *addr)
{
    cli_t c;
    memset(&c, 0, sizeof(c));
    c.o = o;
    c.spinners = o->loopback ? 2 : 1;
    c.spin_auto = o->spin_us < 0;
    c.spin_us = c.spin_auto ? perf_auto_spin_us(c.spinners) : o->spin_us;
    c.idle.spin_ns = o->busy_poll ? UINT64_MAX : (uint64_t)c.spin_us * 1000u;
    int rc = 1;
    gw_status_t st;
    uint64_t max = 0;
    for (size_t i = 0; i < o->nsizes; i++)
        if (o->sizes[i] > max)
            max = o->sizes[i];
    c.max = max ? (size_t)max : 64;
    if (o->batch) /* each zone holds the batch's descriptors with a gap of one size after each */
        c.max *= 2 * (size_t)o->batch;
    if ((st = gw_context_create(NULL, &c.ctx)) != GW_OK)
        return perf_fail(NULL, "gw_context_create", st);
    if (o->alloc) { /* shared memory gpuwire allocates: local peers copy into it directly */
        void *p = NULL;
        st = gw_mem_alloc(c.ctx, 2 * c.max, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, &p, &c.mem);
        if (st != GW_OK) {
            perf_fail(c.ctx, "gw_mem_alloc", st);
            goto err_ctx;
        }
        c.pb = (perf_buf_t){.p = p, .len = 2 * c.max, .dev = -1, .shm = 1};
        c.buf = c.pb.p;
    } else {
        if (perf_buf_alloc(&c.pb, 2 * c.max, o->mem_dev, o->huge) != 0)
            goto err_ctx;
        c.buf = c.pb.p;
        st = gw_mem_reg(c.ctx, c.buf, 2 * c.max, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, &c.mem);
        if (st != GW_OK) {
            perf_fail(c.ctx, "gw_mem_reg", st);
            goto err_buf;
        }
    }
    st = o->peer ? gw_peer_ep(c.ctx, o->peer, &c.ep) : gw_connect(c.ctx, addr, &c.ep);
    if (st != GW_OK) {
        perf_fail(c.ctx, o->peer ? "gw_peer_ep" : "gw_connect", st);
        goto err_mem;
    }
    c.info.size = sizeof(c.info);
    gw_ep_query(c.ep, &c.info);

    uint8_t key[PERF_CTRL_MAX - PERF_CTRL_HDR];
    size_t klen = sizeof(key);
    if ((st = gw_mem_pack_rkey(c.mem, key, &klen)) != GW_OK) {
        perf_fail(c.ctx, "gw_mem_pack_rkey", st);
        goto err_ep;
    }
    perf_msg_t hello = {.type = PERF_MSG_HELLO, .op = o->op, .size = c.max,
                        .window = (uint32_t)o->window, .flags = (o->alloc ? PERF_F_ALLOC : 0u) | (o->huge ? PERF_F_HUGE : 0u),
                        .bloblen = (uint32_t)klen, .blob = key},
               r;
    if ((st = ctrl_call(&c, &hello, &r)) != GW_OK)
        goto err_ep;
    if (r.status != GW_OK) {
        fprintf(stderr, "gpuwire perf: the server refused the session: %s\n",
                gw_status_name((gw_status_t)r.status));
        goto err_ep;
    }
    c.same_gpu = r.seed != 0 && r.seed == perf_gpu_id(c.mem);
    uint8_t skey[PERF_CTRL_MAX];
    memcpy(skey, r.blob, r.bloblen);
    if ((st = gw_rkey_unpack(c.ep, skey, r.bloblen, &c.rkey)) != GW_OK) {
        perf_fail(c.ctx, "gw_rkey_unpack(server key)", st);
        goto err_ep;
    }
    size_t rlen = 0;
    if ((st = gw_rkey_range(c.rkey, &c.raddr, &rlen)) != GW_OK || rlen < 2 * c.max) {
        fprintf(stderr, "gpuwire perf: the server's buffer is too small (%zu bytes)\n", rlen);
        goto err_rkey;
    }

    print_header(&c);
    for (size_t i = 0; i < o->nsizes; i++) {
        result_t res;
        memset(&res, 0, sizeof(res));
        res.bytes = o->sizes[i];
        perf_load_t l0, l1;
        perf_load_sample(&l0, o->peer_pid);
        if (!o->no_lat && (st = run_lat(&c, o->sizes[i], &res)) != GW_OK) {
            fprintf(stderr, "gpuwire perf: %s latency of %llu bytes failed: %s\n",
                    perf_op_name(o->op), (unsigned long long)o->sizes[i], gw_status_name(st));
            goto err_rkey;
        }
        if (o->batch && (st = batch_lists(&c, o->sizes[i])) != GW_OK)
            goto err_rkey;
        if (!o->no_bw && (st = run_bw(&c, o->sizes[i], &res)) != GW_OK) {
            batch_lists_free(&c);
            fprintf(stderr, "gpuwire perf: %s bandwidth of %llu bytes failed: %s\n",
                    perf_op_name(o->op), (unsigned long long)o->sizes[i], gw_status_name(st));
            goto err_rkey;
        }
        batch_lists_free(&c);
        perf_load_sample(&l1, o->peer_pid);
        perf_load_diff(&l0, &l1, &res.other_cpus, &res.steal_cpus);
        note_load(&c, &res, (double)(l1.t_ns - l0.t_ns) / 1e9);
        if (i == 0) {
            c.first_p50 = res.lat_p50;
            c.first_bytes = res.bytes;
        }
        c.last_bw = res.bw_GBps;
        c.last_bytes = res.bytes;
        gw_ep_query(c.ep, &c.info); /* the path's counters after this size's runs (JSON rows carry them) */
        print_result(&c, &res);
    }
    if (!o->json) /* what moved the bytes: the header's path line was taken before any */
        printf("# after the runs: %s\n", c.info.path);
    print_load(&c);
    if (o->reference && !o->json)
        print_reference(&c);
    perf_msg_t quit = {.type = PERF_MSG_QUIT};
    if (ctrl_call(&c, &quit, &r) == GW_OK)
        rc = 0;

err_rkey:
    gw_rkey_destroy(c.rkey);
err_ep:
    if ((st = gw_ep_close(c.ep, 2000)) != GW_OK)
        perf_fail(c.ctx, "gw_ep_close", st);
err_mem:
    if ((st = gw_mem_dereg(c.mem)) != GW_OK)
        perf_fail(c.ctx, "gw_mem_dereg", st);
err_buf:
    perf_buf_free(&c.pb);
err_ctx:
    if ((st = gw_context_destroy(c.ctx)) != GW_OK)
        perf_fail(c.ctx, "gw_context_destroy", st);
    return rc;
}
