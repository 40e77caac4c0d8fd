/* SPDX-License-Identifier: Apache-2.0 */
/* tcp_pool.c - helper threads moving large tcp payloads (see tcp_pool.h). */
#include "transport/tcp/tcp_pool.h"

#include "core/sock.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define POOL_MAX_DEV 16
#define STEP_BUDGET (4u << 20)  /* bytes one job moves before the worker's other jobs get a turn */
#define SCRATCH_CAP (256u << 10) /* discard target */
#define COPY_WAIT_NS 10000000000ull

enum { STEP_MOVED, STEP_BLOCKED, STEP_WAIT, STEP_DONE };

struct gw_tcp_worker {
    gw_tcp_pool_t *pool;
    int idx;
    int started;          /* progress thread only */
    pthread_t th;
    int efd;              /* wakes the thread: new job or stop */
    pthread_mutex_t mu;   /* running jobs, their memory and sockets, the engines */
    pthread_mutex_t qmu;  /* incoming, stop */
    gw_list_t incoming;
    gw_list_t run;
    int stop;
    gw_core_t *errc;      /* detail sink for the engines' errors (never the context's) */
    gw_staging_t *stg[2][POOL_MAX_DEV]; /* [rx][device], made on first use */
    uint8_t *scratch;
    struct pollfd *pfd;
    size_t npfd;
};

struct gw_tcp_pool {
    gw_core_t *core;
    int n;
    size_t chunk;
    unsigned nbufs;
    pthread_mutex_t dmu;  /* done */
    gw_list_t done;
    int maybe_done;       /* atomic hint: done may be non-empty */
    gw_tcp_worker_t *w;
};

int gw_tcp_pool_size(const gw_tcp_pool_t *p) { return p ? p->n : 0; }

uint64_t gw_tcp_job_last_ns(const gw_tcp_job_t *job) { return __atomic_load_n(&job->last_ns, __ATOMIC_RELAXED); }

static void touch(gw_tcp_job_t *job) { __atomic_store_n(&job->last_ns, gw_now_ns(), __ATOMIC_RELAXED); }

gw_status_t gw_tcp_pool_create(gw_core_t *core, int nthreads, size_t chunk, unsigned nbufs, gw_tcp_pool_t **out)
{
    *out = NULL;
    gw_tcp_pool_t *p = calloc(1, sizeof(*p));
    if (!p)
        return gw_err(core, GW_ERR_NOMEM, "tcp helper threads: out of memory");
    p->w = calloc((size_t)nthreads, sizeof(*p->w));
    if (!p->w) {
        free(p);
        return gw_err(core, GW_ERR_NOMEM, "tcp helper threads: out of memory");
    }
    p->core = core;
    p->n = nthreads;
    p->chunk = chunk;
    p->nbufs = nbufs;
    pthread_mutex_init(&p->dmu, NULL);
    gw_list_init(&p->done);
    for (int i = 0; i < nthreads; i++) {
        gw_tcp_worker_t *w = &p->w[i];
        w->pool = p;
        w->idx = i;
        w->efd = -1;
        pthread_mutex_init(&w->mu, NULL);
        pthread_mutex_init(&w->qmu, NULL);
        gw_list_init(&w->incoming);
        gw_list_init(&w->run);
    }
    *out = p;
    return GW_OK;
}

static void worker_free(gw_tcp_worker_t *w)
{
    for (int d = 0; d < 2; d++)
        for (int i = 0; i < POOL_MAX_DEV; i++)
            gw_staging_destroy(w->stg[d][i]);
    if (w->efd >= 0)
        close(w->efd);
    free(w->errc);
    free(w->scratch);
    free(w->pfd);
    pthread_mutex_destroy(&w->mu);
    pthread_mutex_destroy(&w->qmu);
}

void gw_tcp_pool_destroy(gw_tcp_pool_t *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->n; i++) {
        gw_tcp_worker_t *w = &p->w[i];
        if (!w->started)
            continue;
        pthread_mutex_lock(&w->qmu);
        w->stop = 1;
        pthread_mutex_unlock(&w->qmu);
        uint64_t one = 1;
        ssize_t r = write(w->efd, &one, sizeof(one));
        (void)r;
        pthread_join(w->th, NULL);
    }
    for (int i = 0; i < p->n; i++)
        worker_free(&p->w[i]);
    pthread_mutex_destroy(&p->dmu);
    free(p->w);
    free(p);
}

/* ---- the worker's side --------------------------------------------------------------- */
static void cuda_fail(gw_tcp_job_t *job, const gw_core_t *errc)
{
    job->cuda = GW_ERR_CUDA;
    snprintf(job->why, sizeof(job->why), "%.*s", (int)sizeof(job->why) - 1, errc->errbuf);
}

static gw_staging_t *worker_stg(gw_tcp_worker_t *w, gw_tcp_job_t *job, int rx)
{
    if (job->st)
        return job->st;
    if (job->dev < 0 || job->dev >= POOL_MAX_DEV) {
        job->cuda = GW_ERR_CUDA;
        snprintf(job->why, sizeof(job->why), "CUDA device %d out of range", job->dev);
        return NULL;
    }
    gw_staging_t **p = &w->stg[rx][job->dev];
    if (!*p && gw_staging_create(w->errc, job->dev, w->pool->chunk, w->pool->nbufs, p) != GW_OK) {
        *p = NULL;
        cuda_fail(job, w->errc);
        return NULL;
    }
    return job->st = *p;
}

/* Waits (bounded) for a slot's copy.  0 or -1 with the job's detail set. */
static int wait_copy(gw_tcp_job_t *job, gw_staging_t *st, gw_stage_slot_t *sl, gw_core_t *errc)
{
    uint64_t deadline = 0;
    for (;;) {
        int r = gw_staging_test(st, sl);
        if (r == 1)
            return 0;
        if (r < 0) {
            cuda_fail(job, errc);
            return -1;
        }
        uint64_t now = gw_now_ns();
        if (!deadline) {
            deadline = now + COPY_WAIT_NS;
        } else if (now > deadline) {
            job->cuda = GW_ERR_CUDA;
            snprintf(job->why, sizeof(job->why), "a staging copy did not finish within 10 s");
            return -1;
        }
    }
}

/* Drops every slot the job holds, after its copy finished (or 10 s). */
static void drop_slots(gw_tcp_job_t *job, gw_core_t *errc)
{
    gw_staging_t *st = job->st;
    if (!st)
        return;
    while (job->sl_n) {
        gw_stage_slot_t *sl = job->sl[job->sl_head];
        if (wait_copy(job, st, sl, errc) < 0 && !job->cuda)
            job->cuda = GW_ERR_CUDA;
        gw_staging_release(st, sl);
        job->sl_head = (job->sl_head + 1) % GW_TCP_JOB_SLOTS;
        job->sl_n--;
    }
    job->sl_head = 0;
    job->sl_used = 0;
    if (job->fill) {
        gw_staging_release(st, job->fill);
        job->fill = NULL;
    }
}

static int sock_fail(gw_tcp_job_t *job, int e)
{
    job->err = e ? e : EIO;
    return STEP_DONE;
}

/* After a failed send/recv of a step that moved `moved` bytes so far: -1 to
 * retry (EINTR), else what the step returns. */
static int io_fail(gw_tcp_job_t *job, size_t moved)
{
    if (errno == EINTR)
        return -1;
    if (errno == EAGAIN || errno == EWOULDBLOCK)
        return moved ? STEP_MOVED : STEP_BLOCKED;
    return sock_fail(job, errno);
}

static int tx_step_gpu(gw_tcp_worker_t *w, gw_tcp_job_t *job)
{
    gw_staging_t *st = worker_stg(w, job, 0);
    if (!st)
        return STEP_DONE;
    size_t pay = job->len - GW_TCP_HDR, chunk = gw_staging_chunk(st), moved = 0;
    for (;;) {
        while (job->staged < pay && job->sl_n < GW_TCP_JOB_SLOTS) {
            gw_stage_slot_t *sl = gw_staging_acquire(st);
            if (!sl)
                break;
            size_t n = GW_MIN(chunk, pay - job->staged);
            if (gw_staging_d2h(st, sl, job->src + job->staged, n) != GW_OK) {
                gw_staging_release(st, sl);
                cuda_fail(job, w->errc);
                return STEP_DONE;
            }
            int i = (job->sl_head + job->sl_n) % GW_TCP_JOB_SLOTS;
            job->sl[i] = sl;
            job->sl_len[i] = n;
            job->sl_n++;
            job->staged += n;
        }
        const uint8_t *src;
        size_t left;
        int in_payload = job->off >= GW_TCP_HDR;
        if (!in_payload) {
            src = job->hdr + job->off;
            left = GW_TCP_HDR - job->off;
        } else if (job->off == job->len) {
            drop_slots(job, w->errc);
            return STEP_DONE;
        } else {
            if (!job->sl_n) /* this worker's other jobs hold every slot */
                return moved ? STEP_MOVED : STEP_WAIT;
            gw_stage_slot_t *sl = job->sl[job->sl_head];
            if (wait_copy(job, st, sl, w->errc) < 0)
                return STEP_DONE;
            src = (const uint8_t *)sl->host + job->sl_used;
            left = job->sl_len[job->sl_head] - job->sl_used;
        }
        ssize_t n = gw_sock_send(job->fd, src, left, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            int f = io_fail(job, moved);
            if (f < 0)
                continue;
            return f;
        }
        job->off += (size_t)n;
        touch(job);
        if (in_payload) {
            job->sl_used += (size_t)n;
            if (job->sl_used == job->sl_len[job->sl_head]) {
                gw_staging_release(st, job->sl[job->sl_head]);
                job->sl_head = (job->sl_head + 1) % GW_TCP_JOB_SLOTS;
                job->sl_n--;
                job->sl_used = 0;
            }
        }
        moved += (size_t)n;
        if (moved >= STEP_BUDGET && job->off < job->len)
            return STEP_MOVED;
    }
}

static int tx_frame_host(gw_tcp_job_t *job)
{
    size_t moved = 0;
    while (job->off < job->len) {
        struct iovec iov[2];
        int n = 0;
        size_t pay = job->len - GW_TCP_HDR;
        if (job->off < GW_TCP_HDR) {
            iov[n].iov_base = job->hdr + job->off;
            iov[n++].iov_len = GW_TCP_HDR - job->off;
            if (pay) {
                iov[n].iov_base = (void *)job->src;
                iov[n++].iov_len = pay;
            }
        } else {
            iov[n].iov_base = (void *)(job->src + (job->off - GW_TCP_HDR));
            iov[n++].iov_len = job->len - job->off;
        }
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t r = gw_sock_sendmsg(job->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (r < 0) {
            int f = io_fail(job, moved);
            if (f < 0)
                continue;
            return f;
        }
        job->off += (size_t)r;
        touch(job);
        moved += (size_t)r;
        if (moved >= STEP_BUDGET && job->off < job->len)
            return STEP_MOVED;
    }
    return STEP_DONE;
}

static int tx_step(gw_tcp_worker_t *w, gw_tcp_job_t *job)
{
    for (;;) {
        int r = job->dev >= 0 ? tx_step_gpu(w, job) : tx_frame_host(job);
        if (r != STEP_DONE || job->err || job->cuda)
            return r;
        job->frames_done++;
        if (job->next_i == job->nnext)
            return STEP_DONE;
        const gw_tcp_next_frame_t *f = &job->next[job->next_i++];
        memcpy(job->hdr, f->hdr, GW_TCP_HDR);
        job->src = f->src;
        job->len = f->len;
        job->dev = f->dev;
        job->off = 0;
        job->st = NULL;
        job->staged = job->sl_used = 0;
    }
}

/* rx into GPU memory: the slot being filled, started when full or at keep. */
static int rx_gpu_slot(gw_tcp_worker_t *w, gw_tcp_job_t *job, gw_staging_t *st)
{
    if (job->fill)
        return 0;
    if (job->sl_n == GW_TCP_JOB_SLOTS || (job->sl_n && !(job->fill = gw_staging_acquire(st)))) {
        gw_stage_slot_t *old = job->sl[job->sl_head];
        if (wait_copy(job, st, old, w->errc) < 0)
            return -1;
        gw_staging_release(st, old);
        job->sl_head = (job->sl_head + 1) % GW_TCP_JOB_SLOTS;
        job->sl_n--;
    }
    if (!job->fill && !(job->fill = gw_staging_acquire(st)))
        return 1; /* every slot is out with this worker's other jobs */
    job->fill_len = 0;
    job->fill_at = job->off;
    return 0;
}

static int rx_gpu_submit(gw_tcp_worker_t *w, gw_tcp_job_t *job, gw_staging_t *st)
{
    if (gw_staging_h2d(st, job->fill, job->dst + job->fill_at, job->fill_len) != GW_OK) {
        gw_staging_release(st, job->fill);
        job->fill = NULL;
        cuda_fail(job, w->errc);
        return -1;
    }
    int i = (job->sl_head + job->sl_n) % GW_TCP_JOB_SLOTS;
    job->sl[i] = job->fill;
    job->sl_at[i] = job->fill_at;
    job->sl_len[i] = job->fill_len;
    job->sl_n++;
    job->fill = NULL;
    return 0;
}

static int rx_step(gw_tcp_worker_t *w, gw_tcp_job_t *job)
{
    size_t moved = 0;
    while (job->off < job->len) {
        uint8_t *d;
        size_t want;
        gw_staging_t *st = NULL;
        if (job->off < job->keep && job->dev >= 0) {
            if (!(st = worker_stg(w, job, 1)))
                return STEP_DONE;
            int r = rx_gpu_slot(w, job, st);
            if (r < 0)
                return STEP_DONE;
            if (r > 0)
                return moved ? STEP_MOVED : STEP_WAIT;
            d = (uint8_t *)job->fill->host + job->fill_len;
            want = GW_MIN(job->keep - job->off, gw_staging_chunk(st) - job->fill_len);
        } else if (job->off < job->keep) {
            d = job->dst + job->off;
            want = job->keep - job->off;
        } else {
            d = w->scratch;
            want = GW_MIN(job->len - job->off, (size_t)SCRATCH_CAP);
        }
        ssize_t n = gw_sock_recv(job->fd, d, want, MSG_DONTWAIT);
        if (n == 0) {
            job->eof = 1;
            return STEP_DONE;
        }
        if (n < 0) {
            int f = io_fail(job, moved);
            if (f < 0)
                continue;
            return f;
        }
        job->off += (size_t)n;
        touch(job);
        if (st) {
            job->fill_len += (size_t)n;
            if ((job->fill_len == gw_staging_chunk(st) || job->off == job->keep) && rx_gpu_submit(w, job, st) < 0)
                return STEP_DONE;
        }
        moved += (size_t)n;
        if (moved >= STEP_BUDGET && job->off < job->len)
            return STEP_MOVED;
    }
    drop_slots(job, w->errc); /* done once every copy into place finished */
    return STEP_DONE;
}

static void job_finish(gw_tcp_worker_t *w, gw_tcp_job_t *job)
{
    gw_tcp_pool_t *p = w->pool;
    if (job->err || job->eof || job->cuda)
        drop_slots(job, w->errc);
    gw_list_del(&job->link);
    pthread_mutex_lock(&p->dmu);
    gw_list_push_back(&p->done, &job->link);
    __atomic_store_n(&p->maybe_done, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&p->dmu);
    gw_core_wake(p->core);
}

static void *worker_main(void *arg)
{
    gw_tcp_worker_t *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        pthread_mutex_lock(&w->qmu);
        if (w->stop) {
            pthread_mutex_unlock(&w->qmu);
            break;
        }
        gw_list_t *l;
        while ((l = gw_list_first(&w->incoming)) != NULL) {
            gw_list_del(l);
            gw_list_push_back(&w->run, l);
        }
        pthread_mutex_unlock(&w->qmu);
        int moved = 0, waiting = 0;
        size_t n = 1;
        gw_list_t *pos, *tmp;
        gw_list_for_each_safe(pos, tmp, &w->run) {
            gw_tcp_job_t *job = gw_container_of(pos, gw_tcp_job_t, link);
            int r = job->rx ? rx_step(w, job) : tx_step(w, job);
            if (r == STEP_DONE)
                job_finish(w, job);
            else if (r == STEP_MOVED)
                moved = 1;
            else if (r == STEP_WAIT)
                waiting = 1;
        }
        if (moved)
            continue;
        size_t njobs = gw_list_len(&w->run) + 1;
        if (njobs > w->npfd) {
            struct pollfd *np = realloc(w->pfd, njobs * 2 * sizeof(*np));
            if (np) {
                w->pfd = np;
                w->npfd = njobs * 2;
            }
        }
        w->pfd[0] = (struct pollfd){.fd = w->efd, .events = POLLIN};
        gw_list_for_each_safe(pos, tmp, &w->run) {
            gw_tcp_job_t *job = gw_container_of(pos, gw_tcp_job_t, link);
            if (n < w->npfd)
                w->pfd[n++] = (struct pollfd){.fd = job->fd, .events = job->rx ? POLLIN : POLLOUT};
            else
                waiting = 1; /* no room to watch it (out of memory): come back soon */
        }
        pthread_mutex_unlock(&w->mu);
        int r = poll(w->pfd, (nfds_t)n, waiting ? 1 : -1);
        if (r > 0 && (w->pfd[0].revents & POLLIN)) {
            uint64_t v;
            ssize_t rr = read(w->efd, &v, sizeof(v));
            (void)rr;
        }
        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

static gw_status_t worker_start(gw_tcp_worker_t *w)
{
    gw_core_t *core = w->pool->core;
    w->errc = calloc(1, sizeof(*w->errc));
    w->scratch = malloc(SCRATCH_CAP);
    w->pfd = calloc(8, sizeof(*w->pfd));
    if (!w->errc || !w->scratch || !w->pfd)
        return gw_err(core, GW_ERR_NOMEM, "tcp helper thread %d: out of memory", w->idx);
    w->npfd = 8;
    w->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (w->efd < 0)
        return gw_err(core, GW_ERR_SYSTEM, "tcp helper thread %d: eventfd() failed: %s", w->idx, strerror(errno));
    /* signals stay with the application's threads */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int e = pthread_create(&w->th, NULL, worker_main, w);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e != 0)
        return gw_err(core, GW_ERR_SYSTEM, "tcp helper thread %d: pthread_create failed: %s", w->idx, strerror(e));
    w->started = 1;
    gw_log(GW_LOG_DEBUG, "tcp helper thread %d of %d started", w->idx, w->pool->n);
    return GW_OK;
}

/* ---- the progress thread's side ------------------------------------------------------ */
gw_status_t gw_tcp_pool_submit(gw_tcp_pool_t *p, int wi, gw_tcp_job_t *job)
{
    gw_tcp_worker_t *w = &p->w[(unsigned)wi % (unsigned)p->n];
    if (!w->started) {
        gw_status_t st = worker_start(w);
        if (st != GW_OK)
            return st;
    }
    job->wk = w;
    job->err = job->eof = 0;
    job->cuda = GW_OK;
    job->why[0] = 0;
    job->st = NULL;
    job->sl_head = job->sl_n = 0;
    job->staged = job->off >= GW_TCP_HDR && !job->rx ? job->off - GW_TCP_HDR : 0;
    job->sl_used = 0;
    job->fill = NULL;
    job->frames_done = 0;
    job->next_i = 0;
    touch(job);
    job->active = 1;
    pthread_mutex_lock(&w->qmu);
    gw_list_push_back(&w->incoming, &job->link);
    pthread_mutex_unlock(&w->qmu);
    uint64_t one = 1;
    ssize_t r = write(w->efd, &one, sizeof(one));
    (void)r;
    return GW_OK;
}

void gw_tcp_pool_cancel(gw_tcp_pool_t *p, gw_tcp_job_t *job)
{
    if (!p || !job->active)
        return;
    gw_tcp_worker_t *w = job->wk;
    pthread_mutex_lock(&w->mu);
    pthread_mutex_lock(&w->qmu);
    pthread_mutex_lock(&p->dmu);
    gw_list_del(&job->link); /* from whichever list holds it */
    job->active = 0;
    pthread_mutex_unlock(&p->dmu);
    pthread_mutex_unlock(&w->qmu);
    drop_slots(job, w->errc);
    pthread_mutex_unlock(&w->mu);
}

int gw_tcp_pool_reap(gw_tcp_pool_t *p, void (*done)(gw_tcp_job_t *job, void *arg), void *arg)
{
    if (!p || !__atomic_load_n(&p->maybe_done, __ATOMIC_ACQUIRE))
        return 0;
    int n = 0;
    for (;;) {
        pthread_mutex_lock(&p->dmu);
        gw_list_t *l = gw_list_first(&p->done);
        if (!l)
            __atomic_store_n(&p->maybe_done, 0, __ATOMIC_RELAXED);
        else {
            gw_list_del(l);
            gw_container_of(l, gw_tcp_job_t, link)->active = 0;
        }
        pthread_mutex_unlock(&p->dmu);
        if (!l)
            return n;
        done(gw_container_of(l, gw_tcp_job_t, link), arg);
        n++;
    }
}

void gw_tcp_job_lock(gw_tcp_job_t *job)
{
    if (job->active)
        pthread_mutex_lock(&job->wk->mu);
}

void gw_tcp_job_unlock(gw_tcp_job_t *job)
{
    if (job->active)
        pthread_mutex_unlock(&job->wk->mu);
}

void gw_tcp_job_tx_detach(gw_tcp_job_t *job, int index, const void *host_copy)
{
    if (index < job->frames_done)
        return; /* sent already */
    if (index > job->frames_done) {
        gw_tcp_next_frame_t *f = &job->next[job->next_i + (index - job->frames_done) - 1];
        f->src = host_copy;
        f->dev = -1;
        return;
    }
    if (job->dev >= 0 && job->wk)
        drop_slots(job, job->wk->errc);
    job->src = host_copy;
    job->dev = -1;
    job->staged = 0;
}

size_t gw_tcp_job_rx_stop(gw_tcp_job_t *job)
{
    if (job->fill && job->keep > job->fill_at)
        job->keep = job->fill_at; /* the partly filled slot is dropped below: not stored */
    if (job->dev >= 0 && job->wk) {
        drop_slots(job, job->wk->errc);
        job->dev = -1;
    }
    if (job->keep > job->off)
        job->keep = job->off;
    return job->keep;
}
