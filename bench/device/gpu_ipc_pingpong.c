/* SPDX-License-Identifier: Apache-2.0 */
/* gpu_ipc_pingpong - a plain CUDA ping-pong with no gpuwire in the data path,
 * written to explain small-transfer latency when two processes share one GPU.
 * Two sides take turns: side 0 copies SIZE bytes, waits for the copy, then
 * raises a flag in shared host memory; side 1 sees it, copies, waits, raises
 * its flag; and so on.  Only the CUDA driver (loaded by gpuwire's loader) and
 * a host flag: what remains is what the GPU and the driver cost.
 *
 *   gpu_ipc_pingpong [--mode proc|thread] [--copy dd|local|dh|hd|none]
 *                    [--wait event|stream|sync|memcpy|null] [--size N] [--iters N]
 *                    [--dev D0,D1] [--half]
 *
 *   --mode proc:   two processes (forked before CUDA starts), one context each
 *          thread: two threads of one process, one (primary) context, a
 *                  stream each
 *   --copy dd:     into the other side's device buffer (CUDA IPC in proc mode)
 *          local:  device -> device within this side's own allocation
 *          dh:     device -> pinned host buffer of this side (what staging does)
 *          hd:     pinned host buffer -> device (the staging receiver's copy)
 *          none:   no GPU work at all (the cost of the flag hand-off alone)
 *   --wait event:  cuEventRecord + cuEventQuery spin (what gpuwire's intra does)
 *          stream: cuStreamQuery spin
 *          sync:   cuStreamSynchronize
 *          memcpy: synchronous cuMemcpy, no stream (what small staged copies do).
 *                  The allocations get CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, as
 *                  gw_mem_reg() gives them: without it a device-to-device
 *                  cuMemcpy returns before the copy is done (CUDA's documented
 *                  behaviour), and the probe's first run timed only the launch
 *          null:   cuMemcpyAsync on the legacy NULL stream + cuEventRecord/Query
 *   --half: only side 0 touches the GPU; side 1 just hands the flag back
 *           (does the time go to one context's copy, or to switching?)
 *   --dev D0,D1: device of each side (default 0,0: one GPU)
 *
 * Prints one line:
 *   PINGPONG mode=.. copy=.. wait=.. size=.. half=.. oneway_avg_us= oneway_p50_us=
 *            copy0_us= copy1_us= hand_us=
 * oneway: round trip / 2; copyN: mean time from posting side N's copy to
 * seeing it complete; hand: mean time from raising a flag to the other side
 * seeing it.  Exit 77 without a GPU. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cuda/cuda_wrap.h"

static const char *g_mode = "proc", *g_copy = "dd", *g_wait = "event";
static size_t g_size = 8;
static long g_iters = 2000;
static int g_half, g_dev[2];

typedef struct shared {
    _Atomic uint64_t flag[2];  /* side i raised its flag for round flag[i] */
    _Atomic uint64_t raised[2]; /* when (ns) */
    _Atomic int ready[2];
    CUipcMemHandle h[2];
    /* per side: sums over the measured rounds */
    uint64_t copy_ns[2], hand_ns[2], n[2];
    uint64_t rt[1];           /* round trips of side 0, g_iters of them (flexible) */
} shared_t;

static shared_t *S;
static const gw_cuda_t *cu;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#define CK(call)                                                                               \
    do {                                                                                       \
        CUresult r_ = (call);                                                                  \
        if (r_ != CUDA_SUCCESS) {                                                              \
            char eb_[160];                                                                     \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,                      \
                    gw_cuda_strerror(r_, eb_, sizeof(eb_)));                                   \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

typedef struct sidectx {
    int side;
    CUdeviceptr mine, peer; /* peer: the other side's buffer (dd) */
    void *pinned;
    CUstream st;
    CUevent ev;
} side_t;

static void side_setup(side_t *s, int side, int threads)
{
    char why[256];
    s->side = side;
    if (!gw_cuda_ctx_for_device(g_dev[side], why, sizeof(why))) {
        fprintf(stderr, "side %d: %s\n", side, why);
        exit(1);
    }
    CK(cu->cuMemAlloc(&s->mine, 2 * g_size + 256));
    CK(cu->cuMemsetD8(s->mine, (unsigned char)side, 2 * g_size + 256));
    unsigned one = 1;
    CK(cu->cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, s->mine));
    CK(cu->cuMemHostAlloc(&s->pinned, g_size, 0));
    CK(cu->cuStreamCreate(&s->st, 1 /* CU_STREAM_NON_BLOCKING */));
    CK(cu->cuEventCreate(&s->ev, 2 /* CU_EVENT_DISABLE_TIMING */));
    if (threads)
        return;
    CK(cu->cuIpcGetMemHandle(&S->h[side], s->mine));
}

static void side_connect(side_t *s, int threads, CUdeviceptr other)
{
    if (threads) {
        s->peer = other;
        return;
    }
    CK(cu->cuIpcOpenMemHandle(&s->peer, S->h[1 - s->side], 1 /* LAZY_ENABLE_PEER_ACCESS */));
}

/* One copy and its wait; returns when the bytes are in place. */
static void do_copy(side_t *s)
{
    CUdeviceptr src = s->mine, dst;
    if (!strcmp(g_copy, "none"))
        return;
    if (!strcmp(g_copy, "hd")) {
        src = (CUdeviceptr)(uintptr_t)s->pinned;
        dst = s->mine + g_size + 128;
    } else if (!strcmp(g_copy, "dd"))
        dst = s->peer + 128;
    else if (!strcmp(g_copy, "local"))
        dst = s->mine + g_size + 128;
    else
        dst = (CUdeviceptr)(uintptr_t)s->pinned;
    if (!strcmp(g_wait, "memcpy")) {
        CK(cu->cuMemcpy(dst, src, g_size));
        return;
    }
    CUstream st = !strcmp(g_wait, "null") ? NULL : s->st;
    CK(cu->cuMemcpyAsync(dst, src, g_size, st));
    if (!strcmp(g_wait, "event") || !strcmp(g_wait, "null")) {
        CK(cu->cuEventRecord(s->ev, st));
        CUresult r;
        while ((r = cu->cuEventQuery(s->ev)) == CUDA_ERROR_NOT_READY)
            ;
        CK(r);
    } else if (!strcmp(g_wait, "stream")) {
        CUresult r;
        while ((r = cu->cuStreamQuery(s->st)) == CUDA_ERROR_NOT_READY)
            ;
        CK(r);
    } else {
        CK(cu->cuStreamSynchronize(s->st));
    }
}

/* side 0 measures round trips: its copy start to the other side's flag */
static void play0(side_t *s)
{
    long warm = 50, total = warm + g_iters;
    for (long i = 1; i <= total; i++) {
        uint64_t t0 = now_ns();
        uint64_t c0 = t0;
        do_copy(s);
        uint64_t c1 = now_ns();
        atomic_store(&S->raised[0], now_ns());
        atomic_store_explicit(&S->flag[0], (uint64_t)i, memory_order_release);
        while (atomic_load_explicit(&S->flag[1], memory_order_acquire) < (uint64_t)i)
            ;
        uint64_t t1 = now_ns();
        if (i > warm) {
            S->copy_ns[0] += c1 - c0;
            S->hand_ns[0] += t1 - atomic_load(&S->raised[1]);
            S->n[0]++;
            S->rt[i - warm - 1] = t1 - t0;
        }
    }
}

static void play1(side_t *s)
{
    long warm = 50, total = warm + g_iters;
    for (long i = 1; i <= total; i++) {
        while (atomic_load_explicit(&S->flag[0], memory_order_acquire) < (uint64_t)i)
            ;
        uint64_t c0 = now_ns();
        if (i > warm)
            S->hand_ns[1] += c0 - atomic_load(&S->raised[0]);
        if (!g_half)
            do_copy(s);
        uint64_t c1 = now_ns();
        if (i > warm) {
            S->copy_ns[1] += c1 - c0;
            S->n[1]++;
        }
        atomic_store(&S->raised[1], now_ns());
        atomic_store_explicit(&S->flag[1], (uint64_t)i, memory_order_release);
    }
}

static side_t g_side[2];

static void *thread1(void *arg)
{
    (void)arg;
    side_setup(&g_side[1], 1, 1);
    atomic_store(&S->ready[1], 1);
    while (!atomic_load(&S->ready[0]))
        ;
    side_connect(&g_side[1], 1, g_side[0].mine);
    atomic_store(&S->ready[1], 2);
    play1(&g_side[1]);
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--half")) {
            g_half = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "gpu_ipc_pingpong: %s needs a value\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "--mode"))
            g_mode = v;
        else if (!strcmp(a, "--copy"))
            g_copy = v;
        else if (!strcmp(a, "--wait"))
            g_wait = v;
        else if (!strcmp(a, "--size"))
            g_size = (size_t)strtoull(v, NULL, 0);
        else if (!strcmp(a, "--iters"))
            g_iters = strtol(v, NULL, 0);
        else if (!strcmp(a, "--dev"))
            sscanf(v, "%d,%d", &g_dev[0], &g_dev[1]);
        else {
            fprintf(stderr, "gpu_ipc_pingpong: unknown option %s\n", a);
            return 2;
        }
    }
    if (g_iters < 1 || g_size < 1) {
        fprintf(stderr, "gpu_ipc_pingpong: --iters and --size must be positive\n");
        return 2;
    }
    int threads = !strcmp(g_mode, "thread");
    S = mmap(NULL, sizeof(*S) + (size_t)g_iters * 8, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (S == MAP_FAILED)
        return 1;
    if (threads) {
        char why[256];
        cu = gw_cuda_get(why, sizeof(why));
        if (!cu) {
            printf("SKIP: %s\n", why);
            return 77;
        }
        side_setup(&g_side[0], 0, 1);
        atomic_store(&S->ready[0], 1);
        pthread_t t;
        pthread_create(&t, NULL, thread1, NULL);
        while (atomic_load(&S->ready[1]) < 1)
            ;
        side_connect(&g_side[0], 1, g_side[1].mine);
        while (atomic_load(&S->ready[1]) < 2)
            ;
        play0(&g_side[0]);
        pthread_join(t, NULL);
    } else {
        pid_t pid = fork();
        if (pid < 0)
            return 1;
        int me = pid == 0;
        char why[256];
        cu = gw_cuda_get(why, sizeof(why));
        if (!cu) {
            if (me)
                _exit(77);
            waitpid(pid, NULL, 0);
            printf("SKIP: %s\n", why);
            return 77;
        }
        side_setup(&g_side[me], me, 0);
        atomic_store(&S->ready[me], 1);
        while (!atomic_load(&S->ready[1 - me]))
            ;
        side_connect(&g_side[me], 0, 0);
        atomic_store(&S->ready[me], 2);
        while (atomic_load(&S->ready[1 - me]) < 2)
            ;
        if (me) {
            play1(&g_side[1]);
            _exit(0);
        }
        play0(&g_side[0]);
        int status;
        waitpid(pid, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status)) {
            fprintf(stderr, "gpu_ipc_pingpong: side 1 failed (status 0x%x)\n", status);
            return 1;
        }
    }
    qsort(S->rt, (size_t)g_iters, 8, cmp_u64);
    double sum = 0;
    for (long i = 0; i < g_iters; i++)
        sum += (double)S->rt[i];
    printf("PINGPONG mode=%s copy=%s wait=%s size=%zu half=%d dev=%d,%d oneway_avg_us=%.2f oneway_p50_us=%.2f "
           "copy0_us=%.2f copy1_us=%.2f hand_us=%.2f\n",
           g_mode, g_copy, g_wait, g_size, g_half, g_dev[0], g_dev[1], sum / (double)g_iters / 2000.0,
           (double)S->rt[(g_iters - 1) / 2] / 2000.0, (double)S->copy_ns[0] / (double)S->n[0] / 1000.0,
           (double)S->copy_ns[1] / (double)S->n[1] / 1000.0,
           (double)(S->hand_ns[0] + S->hand_ns[1]) / (double)(S->n[0] + S->n[1]) / 1000.0);
    return 0;
}
