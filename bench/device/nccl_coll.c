/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_coll - NCCL collectives, one process per GPU, every result checked.
 *
 *   nccl_coll --rank R --nranks N --id-file PATH [--device D] [--label L]
 *             [--colls all_reduce,all_gather,reduce_scatter,alltoall,broadcast]
 *             [--min BYTES] [--max BYTES] [--small] [--iters N] [--warmup N]
 *             [--csv FILE]
 *
 * Written from NCCL's public API (nccl.h): rank 0 calls ncclGetUniqueId and
 * writes the id to PATH (written whole, then renamed into place); the other
 * ranks wait for the file (60 s) and read it; every rank then calls
 * ncclCommInitRank on its GPU (--device, default the rank).  bench/device/nccl_coll.sh
 * launches the processes; no MPI is needed.  NCCL's environment (NCCL_NET,
 * NCCL_NET_PLUGIN, NCCL_P2P_DISABLE, ...) passes through.
 *
 * Sizes double from --min (default 1 MiB) to --max (256 MiB); --small adds
 * 1 KiB, 8 KiB, 64 KiB and 256 KiB first (latency).  A size is the bytes per
 * rank nccl-tests names for that collective (float elements, rounded up to a
 * multiple of 4 * N bytes):
 *   all_reduce      size in and out, sum          busbw = algbw * 2(N-1)/N
 *   all_gather      size out (size/N in)          busbw = algbw * (N-1)/N
 *   reduce_scatter  size in (size/N out), sum     busbw = algbw * (N-1)/N
 *   alltoall        size in and out; grouped ncclSend/ncclRecv, one chunk
 *                   of size/N to and from every rank   busbw = algbw * (N-1)/N
 *   broadcast       size, root 0                  busbw = algbw
 * algbw = size / time of one operation (the slowest rank's mean over --iters
 * after --warmup).  Every rank's input element i is a small integer made
 * from (rank, i), so sums are exact in float; after timing each rank copies
 * its output to the host and compares every element with the value computed
 * on the host.  A wrong element makes the run fail (exit 1) after printing.
 *
 * Output (rank 0): one line per collective and size, and with --csv one CSV
 * row each (appended; a header is written to a new file):
 *   label,coll,nranks,bytes,iters,time_us,algbw_GBps,busbw_GBps,wrong
 * Without a CUDA driver or with fewer GPUs than the device named it exits 2
 * with the reason.
 */
#include <errno.h>
#include <math.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cuda/cuda_wrap.h"

#define DIE(code, ...)                                                                             \
    do {                                                                                           \
        fprintf(stderr, "nccl_coll rank %d: ", g_rank);                                            \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fputc('\n', stderr);                                                                       \
        exit(code);                                                                                \
    } while (0)
#define NC(call)                                                                                   \
    do {                                                                                           \
        ncclResult_t n_ = (call);                                                                  \
        if (n_ != ncclSuccess)                                                                     \
            DIE(1, "%s failed: %s (%s)", #call, ncclGetErrorString(n_), ncclGetLastError(NULL));   \
    } while (0)
#define CU(call)                                                                                   \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        if (r_ != CUDA_SUCCESS) {                                                                  \
            char eb_[160];                                                                         \
            DIE(1, "%s failed: %s", #call, gw_cuda_strerror(r_, eb_, sizeof(eb_)));                \
        }                                                                                          \
    } while (0)

enum { C_ALL_REDUCE, C_ALL_GATHER, C_REDUCE_SCATTER, C_ALLTOALL, C_BROADCAST, C_N };
static const char *const coll_name[C_N] = {"all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast"};

static int g_rank = -1, g_n;
static const gw_cuda_t *cu;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Input element i of rank r (for alltoall: of the chunk rank r sends to
 * rank d, d folded in): integers below 2^24 / N^2, exact when summed. */
static float val(int r, int d, size_t i) { return (float)((r + 1) * 16 + d + (int)(i % 61)); }

static void exchange_id(const char *path, ncclUniqueId *id)
{
    if (g_rank == 0) {
        NC(ncclGetUniqueId(id));
        char tmp[4096];
        snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
        FILE *f = fopen(tmp, "wb");
        if (!f || fwrite(id, sizeof(*id), 1, f) != 1 || fclose(f) != 0)
            DIE(1, "writing the NCCL id to %s failed: %s", tmp, strerror(errno));
        if (rename(tmp, path) != 0)
            DIE(1, "renaming %s to %s failed: %s", tmp, path, strerror(errno));
        return;
    }
    double end = now_s() + 60;
    for (;;) {
        FILE *f = fopen(path, "rb");
        if (f) {
            size_t got = fread(id, sizeof(*id), 1, f);
            fclose(f);
            if (got == 1)
                return;
        }
        if (now_s() > end)
            DIE(1, "no NCCL id in %s after 60 s: did rank 0 start (and with the same --id-file)?", path);
        usleep(20000);
    }
}

typedef struct {
    CUdeviceptr in, out;
    float *host_in, *host_out;
    size_t cap; /* bytes of each buffer */
    ncclComm_t comm;
    cudaStream_t s;
} ctx_t;

/* Bytes each side of the collective moves for `size`; elements in and out. */
static void shape(int c, size_t size, size_t *in_elems, size_t *out_elems)
{
    size_t e = size / sizeof(float);
    switch (c) {
    case C_ALL_GATHER:
        *in_elems = e / g_n, *out_elems = e;
        break;
    case C_REDUCE_SCATTER:
        *in_elems = e, *out_elems = e / g_n;
        break;
    default:
        *in_elems = e, *out_elems = e;
    }
}

static void fill_input(ctx_t *x, int c, size_t in_elems)
{
    size_t chunk = in_elems / g_n;
    for (size_t i = 0; i < in_elems; i++) {
        x->host_in[i] = c == C_ALLTOALL ? val(g_rank, (int)(i / chunk), i % chunk) : val(g_rank, 0, i);
    }
    CU(cu->cuMemcpyHtoD(x->in, x->host_in, in_elems * sizeof(float)));
    CU(cu->cuMemsetD8(x->out, 0xff, x->cap)); /* 0xffffffff: a NaN, equal to no result */
}

static float expected(int c, size_t j, size_t out_elems)
{
    float sum = 0;
    switch (c) {
    case C_ALL_REDUCE:
        for (int r = 0; r < g_n; r++)
            sum += val(r, 0, j);
        return sum;
    case C_ALL_GATHER: {
        size_t per = out_elems / g_n;
        return val((int)(j / per), 0, j % per);
    }
    case C_REDUCE_SCATTER:
        for (int r = 0; r < g_n; r++)
            sum += val(r, 0, (size_t)g_rank * out_elems + j);
        return sum;
    case C_ALLTOALL: {
        size_t chunk = out_elems / g_n;
        return val((int)(j / chunk), g_rank, j % chunk);
    }
    default: /* broadcast from rank 0 */
        return val(0, 0, j);
    }
}

static void run_once(ctx_t *x, int c, size_t in_elems, size_t out_elems)
{
    void *in = (void *)x->in, *out = (void *)x->out;
    switch (c) {
    case C_ALL_REDUCE:
        NC(ncclAllReduce(in, out, in_elems, ncclFloat, ncclSum, x->comm, x->s));
        break;
    case C_ALL_GATHER:
        NC(ncclAllGather(in, out, in_elems, ncclFloat, x->comm, x->s));
        break;
    case C_REDUCE_SCATTER:
        NC(ncclReduceScatter(in, out, out_elems, ncclFloat, ncclSum, x->comm, x->s));
        break;
    case C_ALLTOALL: {
        size_t chunk = in_elems / g_n;
        NC(ncclGroupStart());
        for (int p = 0; p < g_n; p++) {
            NC(ncclSend((float *)in + p * chunk, chunk, ncclFloat, p, x->comm, x->s));
            NC(ncclRecv((float *)out + p * chunk, chunk, ncclFloat, p, x->comm, x->s));
        }
        NC(ncclGroupEnd());
        break;
    }
    default:
        NC(ncclBroadcast(in, out, in_elems, ncclFloat, 0, x->comm, x->s));
    }
}

/* The slowest rank's time: a max all-reduce of one double. */
static double slowest(ctx_t *x, double t)
{
    CUdeviceptr d;
    CU(cu->cuMemAlloc(&d, sizeof(double)));
    CU(cu->cuMemcpyHtoD(d, &t, sizeof(t)));
    NC(ncclAllReduce((void *)d, (void *)d, 1, ncclDouble, ncclMax, x->comm, x->s));
    CU(cu->cuStreamSynchronize((CUstream)x->s));
    CU(cu->cuMemcpyDtoH(&t, d, sizeof(t)));
    CU(cu->cuMemFree(d));
    return t;
}

static int iters_for(size_t size, int fixed)
{
    if (fixed > 0)
        return fixed;
    size_t it = (size_t)(256u << 20) / (size ? size : 1); /* about 256 MiB moved per size */
    return it < 3 ? 3 : it > 50 ? 50 : (int)it;
}

int main(int argc, char **argv)
{
    const char *id_file = NULL, *label = "nccl", *colls = "all_reduce,all_gather,reduce_scatter,alltoall,broadcast";
    const char *csv = NULL;
    size_t min = 1u << 20, max = 256u << 20;
    int dev = -1, small = 0, fixed_iters = 0, warmup = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--small")) {
            small = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "nccl_coll: %s needs a value (see the comment at the top of bench/device/nccl_coll.c)\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "--rank"))
            g_rank = atoi(v);
        else if (!strcmp(a, "--nranks"))
            g_n = atoi(v);
        else if (!strcmp(a, "--id-file"))
            id_file = v;
        else if (!strcmp(a, "--device"))
            dev = atoi(v);
        else if (!strcmp(a, "--label"))
            label = v;
        else if (!strcmp(a, "--colls"))
            colls = v;
        else if (!strcmp(a, "--min"))
            min = strtoull(v, NULL, 0);
        else if (!strcmp(a, "--max"))
            max = strtoull(v, NULL, 0);
        else if (!strcmp(a, "--iters"))
            fixed_iters = atoi(v);
        else if (!strcmp(a, "--warmup"))
            warmup = atoi(v);
        else if (!strcmp(a, "--csv"))
            csv = v;
        else {
            fprintf(stderr, "nccl_coll: unknown argument %s\n", a);
            return 2;
        }
    }
    if (g_n < 1 || g_rank < 0 || g_rank >= g_n || !id_file || min < 4 || max < min) {
        fprintf(stderr, "usage: nccl_coll --rank R --nranks N --id-file PATH [--device D] [--label L] [--colls LIST] "
                "[--min BYTES] [--max BYTES] [--small] [--iters N] [--warmup N] [--csv FILE]\n");
        return 2;
    }
    if (dev < 0)
        dev = g_rank;
    char why[256];
    cu = gw_cuda_get(why, sizeof(why));
    if (!cu)
        DIE(2, "no usable CUDA driver: %s (this benchmark needs one GPU per rank)", why);
    if (cu->device_count <= dev)
        DIE(2, "GPU %d asked for, this host has %d GPU(s)", dev, cu->device_count);
    if (!gw_cuda_ctx_for_device(dev, why, sizeof(why)))
        DIE(2, "no context on GPU %d: %s", dev, why);

    int want[C_N] = {0};
    for (int c = 0; c < C_N; c++) {
        const char *p = strstr(colls, coll_name[c]);
        size_t n = strlen(coll_name[c]);
        want[c] = p && (p == colls || p[-1] == ',') && (p[n] == ',' || p[n] == '\0');
    }

    size_t sizes[64];
    int nsz = 0;
    size_t unit = 4 * (size_t)g_n;
    if (small)
        for (size_t s = 1024; s < min && nsz < 4; s *= (s < 65536 ? 8 : 4))
            sizes[nsz++] = (s + unit - 1) / unit * unit;
    for (size_t s = min; s <= max && nsz < 64; s *= 2)
        sizes[nsz++] = (s + unit - 1) / unit * unit;

    ctx_t x = {.cap = sizes[nsz - 1]};
    CU(cu->cuMemAlloc(&x.in, x.cap));
    CU(cu->cuMemAlloc(&x.out, x.cap));
    x.host_in = malloc(x.cap);
    x.host_out = malloc(x.cap);
    if (!x.host_in || !x.host_out)
        DIE(1, "no host memory for two buffers of %zu bytes", x.cap);
    CUstream cs;
    CU(cu->cuStreamCreate(&cs, CU_STREAM_NON_BLOCKING));
    x.s = (cudaStream_t)cs;

    ncclUniqueId id;
    exchange_id(id_file, &id);
    double t0 = now_s();
    NC(ncclCommInitRank(&x.comm, g_n, id, g_rank));
    int ver = 0;
    ncclGetVersion(&ver);
    FILE *out = NULL;
    if (g_rank == 0) {
        printf("# nccl_coll %s: %d ranks, NCCL %d, init %.2f s\n", label, g_n, ver, now_s() - t0);
        printf("# %-8s %-15s %12s %6s %11s %10s %10s %6s\n", "label", "coll", "bytes", "iters", "time_us",
               "algbw", "busbw", "wrong");
        fflush(stdout);
        if (csv) {
            struct stat st;
            int fresh = stat(csv, &st) != 0 || st.st_size == 0;
            out = fopen(csv, "a");
            if (!out)
                DIE(1, "cannot open %s for appending: %s", csv, strerror(errno));
            if (fresh)
                fprintf(out, "label,coll,nranks,bytes,iters,time_us,algbw_GBps,busbw_GBps,wrong\n");
        }
    }
    long long total_wrong = 0;
    for (int c = 0; c < C_N; c++) {
        if (!want[c])
            continue;
        for (int k = 0; k < nsz; k++) {
            size_t size = sizes[k], in_e, out_e;
            shape(c, size, &in_e, &out_e);
            int iters = iters_for(size, fixed_iters);
            fill_input(&x, c, in_e);
            for (int w = 0; w < warmup; w++)
                run_once(&x, c, in_e, out_e);
            CU(cu->cuStreamSynchronize(cs));
            double a = now_s();
            for (int it = 0; it < iters; it++)
                run_once(&x, c, in_e, out_e);
            CU(cu->cuStreamSynchronize(cs));
            double t = slowest(&x, (now_s() - a) / iters);
            /* check every element this rank received */
            CU(cu->cuMemcpyDtoH(x.host_out, x.out, out_e * sizeof(float)));
            long long wrong = 0;
            size_t first = (size_t)-1;
            for (size_t j = 0; j < out_e; j++)
                if (x.host_out[j] != expected(c, j, out_e)) {
                    if (!wrong)
                        first = j;
                    wrong++;
                }
            if (wrong)
                fprintf(stderr, "nccl_coll rank %d: %s %zu B: %lld of %zu elements wrong, first at %zu: %g, "
                        "expected %g\n", g_rank, coll_name[c], size, wrong, out_e, first,
                        (double)x.host_out[first], (double)expected(c, first, out_e));
            /* every rank's count, summed, so rank 0 reports them all */
            double w = (double)wrong;
            {
                CUdeviceptr d;
                CU(cu->cuMemAlloc(&d, sizeof(double)));
                CU(cu->cuMemcpyHtoD(d, &w, sizeof(w)));
                NC(ncclAllReduce((void *)d, (void *)d, 1, ncclDouble, ncclSum, x.comm, x.s));
                CU(cu->cuStreamSynchronize(cs));
                CU(cu->cuMemcpyDtoH(&w, d, sizeof(w)));
                CU(cu->cuMemFree(d));
            }
            total_wrong += (long long)w;
            double algbw = (double)size / t / 1e9;
            double f = c == C_ALL_REDUCE ? 2.0 * (g_n - 1) / g_n : c == C_BROADCAST ? 1.0 : (double)(g_n - 1) / g_n;
            if (g_rank == 0) {
                printf("  %-8s %-15s %12zu %6d %11.1f %10.3f %10.3f %6lld\n", label, coll_name[c], size, iters,
                       t * 1e6, algbw, algbw * f, (long long)w);
                fflush(stdout);
                if (out) {
                    fprintf(out, "%s,%s,%d,%zu,%d,%.2f,%.4f,%.4f,%lld\n", label, coll_name[c], g_n, size, iters,
                            t * 1e6, algbw, algbw * f, (long long)w);
                    fflush(out);
                }
            }
        }
    }
    if (out)
        fclose(out);
    ncclCommDestroy(x.comm);
    if (g_rank == 0)
        printf("# nccl_coll %s: %s (%lld wrong elements)\n", label, total_wrong ? "WRONG RESULTS" : "every result correct",
               total_wrong);
    if (g_rank == 0 && unlink(id_file) != 0 && errno != ENOENT)
        fprintf(stderr, "nccl_coll: could not remove %s: %s\n", id_file, strerror(errno));
    return total_wrong ? 1 : 0;
}
