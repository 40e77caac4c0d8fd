/* SPDX-License-Identifier: Apache-2.0 */
/* integrity.c - what the end-to-end integrity check costs
 * (GPUWIRE_INTEGRITY, docs/INTEGRITY.md).
 *
 * 1. The checksum alone: CRC32C of host memory in GB/s on one core, by the
 *    CPU's instruction (three streams) and by the table, from 4 KiB to
 *    64 MiB (buffers past the last-level cache at the large sizes), and,
 *    with --gpu, by the kernel on GPU 0 (one launch over a 64 MiB buffer
 *    cut into entries of each size, synchronized).
 * 2. The check end to end: put_notify of each size over loopback (the
 *    transports named as arguments; default tcp intra) with and without
 *    the check, the two endpoints alternating (ABAB...) so that a change of
 *    load hits both: a window of puts, each with its notification, posted
 *    and waited for; the target drains the notifications.  Prints GB/s of
 *    each, and the ratio checked / unchecked.
 *
 * usage: integrity [--gpu] [--no-xfer] [TRANSPORT...]
 * env:   REPS=5 (rounds), MS=300 (time per measurement), SIZES (bytes,
 *        comma-separated; default 4096,65536,1048576,16777216,67108864) */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/crc32c.h"
#include "cuda/crc_kernel.h"
#include "cuda/cuda_wrap.h"
#include "gpuwire.h"

#define WINDOW 4
#define MAXSZ (64u << 20)
#define REGION ((size_t)WINDOW * MAXSZ)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_d);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static size_t g_sizes[16];
static int g_nsizes;
static int g_reps = 5;
static double g_ms = 300;

static void parse_sizes(void)
{
    const char *s = getenv("SIZES");
    if (!s)
        s = "4096,65536,1048576,16777216,67108864";
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", s);
    for (char *t = strtok(buf, ","); t && g_nsizes < 16; t = strtok(NULL, ",")) {
        size_t v = strtoull(t, NULL, 10);
        if (v && v <= MAXSZ)
            g_sizes[g_nsizes++] = v;
    }
}

/* ---- 1. the checksum alone ---- */
typedef uint32_t (*crc_fn)(uint32_t, const void *, size_t);

/* GB/s of wall-clock time; *per_cpu: GB per second of this thread's CPU
 * time (what a loaded machine's scheduler does not take away) */
static double crc_gbs(crc_fn f, const uint8_t *buf, size_t total, size_t sz, double *per_cpu)
{
    volatile uint32_t sink = 0;
    double c0 = cpu_s();
    double t0 = now_s(), t;
    uint64_t bytes = 0;
    size_t off = 0;
    do {
        sink ^= f(0, buf + off, sz);
        bytes += sz;
        off += sz;
        if (off + sz > total)
            off = 0;
        t = now_s();
    } while (t - t0 < g_ms / 1000);
    (void)sink;
    *per_cpu = bytes / (cpu_s() - c0) / 1e9;
    return bytes / (t - t0) / 1e9;
}

static void crc_alone(int gpu)
{
    size_t total = 256u << 20; /* walked through: past the last-level cache */
    uint8_t *buf = malloc(total);
    if (!buf)
        return;
    for (size_t i = 0; i < total; i++)
        buf[i] = (uint8_t)(i * 131 + (i >> 9));
    printf("CRC32C of host memory, one core (GB/s of wall time, and per CPU second; median of %d): gw_crc32c runs "
           "%s\n", g_reps, gw_crc32c_impl());
    printf("%10s %12s %12s %12s %12s", "size", "instruction", "(per cpu s)", "table", "(per cpu s)");
    char why[256];
    const gw_cuda_t *cu = gpu ? gw_cuda_get(why, sizeof(why)) : NULL;
    CUdeviceptr dbuf = 0;
    if (gpu && !cu)
        printf("   (no GPU: %s)", why);
    if (cu && (!gw_cuda_ctx_for_device(0, why, sizeof(why)) || cu->cuMemAlloc(&dbuf, MAXSZ) != CUDA_SUCCESS ||
               cu->cuMemcpyHtoD(dbuf, buf, MAXSZ) != CUDA_SUCCESS)) {
        printf("   (GPU 0 unusable: %s)", why);
        cu = NULL;
    }
    if (cu)
        printf(" %12s", "gpu kernel");
    printf("\n");
    for (int k = 0; k < g_nsizes; k++) {
        size_t sz = g_sizes[k];
        double hw[32], tb[32], gk[32], hwc[32], tbc[32];
        for (int r = 0; r < g_reps && r < 32; r++) {
            hw[r] = hwc[r] = 0;
            if (gw_crc32c_hw_available())
                hw[r] = crc_gbs(gw_crc32c_hw, buf, total, sz, &hwc[r]);
            tb[r] = crc_gbs(gw_crc32c_table, buf, total, sz, &tbc[r]);
            gk[r] = 0;
            if (cu) { /* 64 MiB cut into entries of sz, one launch */
                uint32_t n = (uint32_t)(MAXSZ / sz);
                uint64_t *a = malloc(n * 8), *l = malloc(n * 8);
                uint32_t *c = malloc(n * 4);
                for (uint32_t i = 0; i < n; i++) {
                    a[i] = dbuf + (uint64_t)i * sz;
                    l[i] = sz;
                }
                double t0 = now_s(), t;
                uint64_t bytes = 0;
                do {
                    if (gw_cuda_crc32c(0, a, l, c, n, why, sizeof(why)) != GW_OK) {
                        printf("gpu: %s\n", why);
                        break;
                    }
                    bytes += (uint64_t)n * sz;
                    t = now_s();
                } while (t - t0 < g_ms / 1000);
                gk[r] = bytes / (now_s() - t0) / 1e9;
                /* the kernel's values are the CPU's */
                uint32_t want = gw_crc32c(0, buf, sz);
                if (c[0] != want)
                    printf("gpu: entry 0 CRC 0x%08x, the CPU's 0x%08x: WRONG\n", c[0], want);
                free(a);
                free(l);
                free(c);
            }
        }
        int n = g_reps < 32 ? g_reps : 32;
        printf("%10zu %12.2f %12.2f %12.2f %12.2f", sz, median(hw, n), median(hwc, n), median(tb, n), median(tbc, n));
        if (cu)
            printf(" %12.2f", median(gk, n));
        printf("\n");
    }
    free(buf);
}

/* ---- 2. end to end ---- */
static int target_main(int rfd, int wfd, const char *tl)
{
    gw_config_t cfg = {.size = sizeof(cfg), .transports = tl, .log_level = -1, .integrity = GW_INTEGRITY_OFF};
    gw_context_t *ctx;
    if (gw_context_create(&cfg, &ctx) != GW_OK)
        return 1;
    void *buf = NULL;
    gw_mem_t *mem;
    if (gw_mem_alloc(ctx, REGION, GW_ACCESS_REMOTE_WRITE, &buf, &mem) != GW_OK)
        return 1;
    gw_listener_t *l;
    char addr[128];
    if (gw_listen(ctx, "127.0.0.1:0", &l) != GW_OK || gw_listener_addr(l, addr, sizeof(addr)) != GW_OK)
        return 1;
    uint8_t key[1024];
    size_t klen = sizeof(key);
    gw_mem_pack_rkey(mem, key, &klen);
    if (write(wfd, addr, sizeof(addr)) != (ssize_t)sizeof(addr) || write(wfd, &klen, sizeof(klen)) < 0 ||
        write(wfd, key, klen) != (ssize_t)klen)
        return 1;
    gw_ep_t *ep[2];
    for (int i = 0; i < 2; i++)
        if (gw_accept(l, 20000, &ep[i]) != GW_OK)
            return 1;
    for (;;) { /* drain notifications until the initiator says stop */
        struct pollfd p = {.fd = rfd, .events = POLLIN};
        if (poll(&p, 1, 0) > 0)
            break;
        gw_progress(ctx);
        uint64_t v;
        for (int i = 0; i < 2; i++)
            while (gw_notify_wait(ep[i], 0, &v) == GW_OK)
                ;
    }
    for (int i = 0; i < 2; i++)
        gw_ep_close(ep[i], 1000);
    gw_listener_destroy(l);
    gw_mem_dereg(mem);
    gw_context_destroy(ctx);
    return 0;
}

typedef struct side {
    gw_context_t *ctx;
    gw_ep_t *ep;
    gw_rkey_t *rk;
    uint64_t raddr;
    void *buf;
    gw_mem_t *mem;
} side_t;

/* GB/s of windows of put_notify of sz bytes for about g_ms */
static double xfer_gbs(side_t *s, size_t sz)
{
    double t0 = now_s(), t;
    uint64_t bytes = 0;
    uint64_t v = 0;
    do {
        gw_request_t *r[WINDOW];
        for (int w = 0; w < WINDOW; w++)
            if (gw_put_notify(s->ep, (uint8_t *)s->buf + (size_t)w * MAXSZ, sz, s->mem, s->raddr + (uint64_t)w * MAXSZ,
                              s->rk, ++v, &r[w]) != GW_OK) {
                fprintf(stderr, "put_notify: %s\n", gw_last_error(s->ctx));
                exit(1);
            }
        for (int w = 0; w < WINDOW; w++) {
            gw_status_t st = gw_request_wait(r[w], 30000);
            if (st != GW_OK) {
                fprintf(stderr, "put_notify of %zu bytes: %s\n", sz, gw_status_name(st));
                exit(1);
            }
            gw_request_free(r[w]);
        }
        bytes += (uint64_t)WINDOW * sz;
        t = now_s();
    } while (t - t0 < g_ms / 1000);
    return bytes / (t - t0) / 1e9;
}

static int run_transport(const char *tl)
{
    int to_child[2], to_parent[2];
    if (pipe(to_child) || pipe(to_parent))
        return 1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(to_child[1]);
        close(to_parent[0]);
        _exit(target_main(to_child[0], to_parent[1], tl));
    }
    close(to_child[0]);
    close(to_parent[1]);
    char addr[128];
    size_t klen;
    uint8_t key[1024];
    if (read(to_parent[0], addr, sizeof(addr)) != (ssize_t)sizeof(addr) ||
        read(to_parent[0], &klen, sizeof(klen)) != (ssize_t)sizeof(klen) || klen > sizeof(key) ||
        read(to_parent[0], key, klen) != (ssize_t)klen) {
        fprintf(stderr, "%s: the target did not start\n", tl);
        return 1;
    }
    side_t s[2];
    for (int i = 0; i < 2; i++) { /* 0: unchecked, 1: checked (this side asks) */
        gw_config_t cfg = {.size = sizeof(cfg), .transports = tl, .log_level = -1,
                           .integrity = i ? GW_INTEGRITY_ON : GW_INTEGRITY_OFF};
        size_t rlen;
        if (gw_context_create(&cfg, &s[i].ctx) != GW_OK || gw_connect(s[i].ctx, addr, &s[i].ep) != GW_OK ||
            gw_rkey_unpack(s[i].ep, key, klen, &s[i].rk) != GW_OK ||
            gw_rkey_range(s[i].rk, &s[i].raddr, &rlen) != GW_OK ||
            gw_mem_alloc(s[i].ctx, REGION, GW_ACCESS_LOCAL, &s[i].buf, &s[i].mem) != GW_OK) {
            fprintf(stderr, "%s: set-up failed: %s\n", tl, s[i].ctx ? gw_last_error(s[i].ctx) : "");
            return 1;
        }
        memset(s[i].buf, 0x5a, REGION);
    }
    gw_ep_info_t info = {.size = sizeof(info)};
    gw_ep_query(s[1].ep, &info);
    printf("\n%s, put_notify, window %d, GB/s (median of %d rounds of %.0f ms, alternating)\n  checked endpoint: %s\n",
           tl, WINDOW, g_reps, g_ms, info.path);
    printf("%10s %12s %12s %8s\n", "size", "unchecked", "checked", "ratio");
    for (int k = 0; k < g_nsizes; k++) {
        double a[32], b[32];
        int n = g_reps < 32 ? g_reps : 32;
        for (int r = 0; r < n; r++) {
            a[r] = xfer_gbs(&s[0], g_sizes[k]);
            b[r] = xfer_gbs(&s[1], g_sizes[k]);
        }
        double ma = median(a, n), mb = median(b, n);
        printf("%10zu %12.3f %12.3f %8.3f\n", g_sizes[k], ma, mb, mb / ma);
        fflush(stdout);
    }
    if (write(to_child[1], "q", 1) != 1)
        kill(pid, SIGKILL);
    for (int i = 0; i < 2; i++) {
        gw_rkey_destroy(s[i].rk);
        gw_ep_close(s[i].ep, 2000);
        gw_mem_dereg(s[i].mem);
        gw_context_destroy(s[i].ctx);
    }
    int status;
    waitpid(pid, &status, 0);
    return 0;
}

int main(int argc, char **argv)
{
    int gpu = 0, xfer = 1, ntl = 0;
    const char *tls[8];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--gpu"))
            gpu = 1;
        else if (!strcmp(argv[i], "--no-xfer"))
            xfer = 0;
        else if (ntl < 8)
            tls[ntl++] = argv[i];
    }
    if (!ntl) {
        tls[ntl++] = "tcp";
        tls[ntl++] = "intra";
    }
    if (getenv("REPS"))
        g_reps = atoi(getenv("REPS"));
    if (getenv("MS"))
        g_ms = atof(getenv("MS"));
    if (g_reps < 1)
        g_reps = 1;
    parse_sizes();
    crc_alone(gpu);
    int rc = 0;
    for (int i = 0; xfer && i < ntl; i++)
        rc |= run_transport(tls[i]);
    return rc;
}
