/* SPDX-License-Identifier: Apache-2.0 */
/* perf_proto.c - `gpuwire perf` control messages, size parsing, the data
 * pattern, timing and request bookkeeping. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "core/settings.h" /* gw_parse_size: one size syntax for settings and the tool */
#include "core/util.h"
#include "cuda/cuda_wrap.h"
#include "perf.h"
#include "topo/topo.h" /* gw_sysfs_read */

#define PERF_MAGIC 0x46505747u /* "GWPF" */
#define PERF_VERSION 1

static const char *const g_op_names[] = {"put", "get", "send", "put_notify"};

const char *perf_op_name(perf_op_t op)
{
    return (unsigned)op < 4 ? g_op_names[op] : "?";
}

int perf_parse_op(const char *s, perf_op_t *op)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(s, g_op_names[i]) == 0) {
            *op = (perf_op_t)i;
            return 0;
        }
    return -1;
}

static int add_size(uint64_t **v, size_t *n, size_t *cap, uint64_t x)
{
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        uint64_t *nv = realloc(*v, nc * sizeof(*nv));
        if (!nv)
            return -1;
        *v = nv;
        *cap = nc;
    }
    (*v)[(*n)++] = x;
    return 0;
}

int perf_parse_sizes(const char *s, uint64_t **out, size_t *n)
{
    uint64_t *v = NULL;
    size_t cnt = 0, cap = 0;
    char *dup = strdup(s), *save = NULL;
    if (!dup)
        return -1;
    for (char *tok = strtok_r(dup, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(tok, ':');
        uint64_t lo, hi;
        if (colon) {
            *colon = '\0';
            if (gw_parse_size(tok, &lo) || gw_parse_size(colon + 1, &hi) || lo > hi)
                goto bad;
            for (uint64_t x = lo;;) {
                if (add_size(&v, &cnt, &cap, x))
                    goto bad;
                if (x == hi)
                    break;
                uint64_t next = x ? x * 2 : 1;
                if (next > hi || next < x)
                    next = hi;
                x = next;
            }
        } else {
            if (gw_parse_size(tok, &lo) || add_size(&v, &cnt, &cap, lo))
                goto bad;
        }
    }
    free(dup);
    if (!cnt) {
        free(v);
        return -1;
    }
    *out = v;
    *n = cnt;
    return 0;
bad:
    free(dup);
    free(v);
    return -1;
}

void perf_format_size(uint64_t v, char *buf, size_t len)
{
    static const char sfx[] = "KMGT";
    int i = -1;
    while (v && (v & 1023) == 0 && i < 3) {
        v >>= 10;
        i++;
    }
    if (i < 0)
        snprintf(buf, len, "%llu", (unsigned long long)v);
    else
        snprintf(buf, len, "%llu%c", (unsigned long long)v, sfx[i]);
}

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t get32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}
static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* layout: magic 0, version 4, type 6, phase 8, zero 10, op 12,
 * size 16, seed 24, a 32, b 40, window 48, status 52, flags 56, bloblen 60 */
size_t perf_msg_encode(const perf_msg_t *m, uint8_t *buf)
{
    memset(buf, 0, PERF_CTRL_HDR);
    put32(buf + 0, PERF_MAGIC);
    put16(buf + 4, PERF_VERSION);
    put16(buf + 6, m->type);
    put16(buf + 8, m->phase);
    put32(buf + 12, m->op);
    put64(buf + 16, m->size);
    put64(buf + 24, m->seed);
    put64(buf + 32, m->a);
    put64(buf + 40, m->b);
    put32(buf + 48, m->window);
    put32(buf + 52, (uint32_t)m->status);
    put32(buf + 56, m->flags);
    uint32_t bl = m->bloblen;
    if (bl > PERF_CTRL_MAX - PERF_CTRL_HDR)
        bl = PERF_CTRL_MAX - PERF_CTRL_HDR;
    put32(buf + 60, bl);
    if (bl)
        memcpy(buf + PERF_CTRL_HDR, m->blob, bl);
    return PERF_CTRL_HDR + bl;
}

int perf_msg_decode(const uint8_t *buf, size_t len, perf_msg_t *m)
{
    if (len < PERF_CTRL_HDR || get32(buf) != PERF_MAGIC || get16(buf + 4) != PERF_VERSION)
        return -1;
    memset(m, 0, sizeof(*m));
    m->type = get16(buf + 6);
    m->phase = get16(buf + 8);
    m->op = get32(buf + 12);
    m->size = get64(buf + 16);
    m->seed = get64(buf + 24);
    m->a = get64(buf + 32);
    m->b = get64(buf + 40);
    m->window = get32(buf + 48);
    m->status = (int32_t)get32(buf + 52);
    m->flags = get32(buf + 56);
    m->bloblen = get32(buf + 60);
    if (m->bloblen > len - PERF_CTRL_HDR)
        return -1;
    m->blob = buf + PERF_CTRL_HDR;
    return 0;
}


void perf_fill(void *buf, size_t len, uint64_t seed)
{
    gw_pattern_fill(buf, len, seed);
}

long long perf_verify(const void *buf, size_t len, uint64_t seed)
{
    return gw_pattern_verify(buf, len, seed);
}

uint64_t perf_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void perf_idle(perf_idle_t *p, gw_context_t *ctx, int busy)
{
    if (busy || p->spin_ns == UINT64_MAX) {
        p->since = 0;
        return;
    }
    uint64_t now = perf_now_ns();
    if (!p->since)
        p->since = now;
    if (now - p->since >= p->spin_ns) {
        gw_context_wait(ctx, 100);
        p->since = 0;
    }
}

uint64_t perf_cpu_ns(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ull +
           (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ull;
}

int perf_cpus(void)
{
    int n = 0;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0)
        n = CPU_COUNT(&set);
    if (n <= 0)
        n = (int)sysconf(_SC_NPROCESSORS_ONLN);
    /* a cgroup v2 quota ("max 100000" or "150000 100000": 1.5 CPUs) */
    FILE *f = fopen("/sys/fs/cgroup/cpu.max", "r");
    if (f) {
        char q[32];
        unsigned long long period = 0;
        if (fscanf(f, "%31s %llu", q, &period) == 2 && strcmp(q, "max") != 0 && period) {
            unsigned long long quota = strtoull(q, NULL, 10);
            int qn = (int)((quota + period - 1) / period);
            if (qn > 0 && qn < n)
                n = qn;
        }
        fclose(f);
    }
    return n > 0 ? n : 1;
}

long perf_auto_spin_us(int spinners)
{
    return perf_cpus() > spinners ? PERF_SPIN_US : 0;
}

/* utime + stime of pid (all its threads), in clock ticks; 0 when unreadable */
static uint64_t proc_ticks(int pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), pid ? "/proc/%d/stat" : "/proc/self/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    unsigned long long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return 0;
    return ut + st;
}

void perf_load_sample(perf_load_t *l, int pid)
{
    memset(l, 0, sizeof(*l));
    l->t_ns = perf_now_ns();
    FILE *f = fopen("/proc/stat", "r");
    if (f) {
        unsigned long long v[8] = {0};
        if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                   &v[4], &v[5], &v[6], &v[7]) == 8) {
            l->busy = v[0] + v[1] + v[2] + v[5] + v[6]; /* user nice system irq softirq */
            l->steal = v[7];
        }
        fclose(f);
    }
    l->own = proc_ticks(0) + (pid > 0 ? proc_ticks(pid) : 0);
}

void perf_load_diff(const perf_load_t *a, const perf_load_t *b, double *other, double *steal)
{
    double secs = (double)(b->t_ns - a->t_ns) / 1e9, hz = (double)sysconf(_SC_CLK_TCK);
    *other = *steal = 0.0;
    if (secs <= 0 || hz <= 0 || !b->busy)
        return;
    double busy = (double)(b->busy - a->busy), own = (double)(b->own - a->own);
    *other = busy > own ? (busy - own) / hz / secs : 0.0;
    *steal = (double)(b->steal - a->steal) / hz / secs;
}

int perf_reqs_add(perf_reqs_t *q, gw_request_t *r)
{
    if (q->n == q->cap) {
        size_t nc = q->cap ? q->cap * 2 : 64;
        gw_request_t **nr = realloc(q->r, nc * sizeof(*nr));
        if (!nr)
            return -1;
        q->r = nr;
        q->cap = nc;
    }
    q->r[q->n++] = r;
    return 0;
}

gw_status_t perf_reqs_reap(perf_reqs_t *q)
{
    gw_status_t first = GW_OK;
    size_t j = 0;
    for (size_t i = 0; i < q->n; i++) {
        gw_status_t st = gw_request_test(q->r[i]);
        if (st == GW_INPROGRESS) {
            q->r[j++] = q->r[i];
            continue;
        }
        if (st != GW_OK && first == GW_OK)
            first = st;
        gw_request_free(q->r[i]);
    }
    q->n = j;
    return first;
}

void perf_reqs_free(perf_reqs_t *q)
{
    for (size_t i = 0; i < q->n; i++)
        gw_request_free(q->r[i]);
    free(q->r);
    q->r = NULL;
    q->n = q->cap = 0;
}

int perf_fail(gw_context_t *ctx, const char *what, gw_status_t st)
{
    fprintf(stderr, "gpuwire perf: %s failed: %s (%s)%s%s\n", what, gw_status_name(st),
            gw_status_str(st), ctx && *gw_last_error(ctx) ? ": " : "",
            ctx ? gw_last_error(ctx) : "");
    return 1;
}

/* ---- buffers: host or CUDA device memory ---------------------------------------- */
int perf_parse_mem(const char *s)
{
    if (!strcmp(s, "host"))
        return -1;
    if (!strcmp(s, "cuda"))
        return 0;
    if (!strncmp(s, "cuda:", 5) && s[5] >= '0' && s[5] <= '9') {
        char *end;
        long d = strtol(s + 5, &end, 10);
        if (!*end && d < 1024)
            return (int)d;
    }
    return -2;
}

/* The kernel's transparent huge page mode ("always", "madvise", "never"),
 * or "" when it cannot be read. */
static void thp_mode(char *out, size_t cap)
{
    char line[128], why[128];
    out[0] = 0;
    if (gw_sysfs_read("/sys", "kernel/mm/transparent_hugepage/enabled", line, sizeof(line), why, sizeof(why)) < 0)
        return;
    char *a = strchr(line, '['), *z = a ? strchr(a, ']') : NULL;
    if (a && z && (size_t)(z - a - 1) < cap) {
        memcpy(out, a + 1, (size_t)(z - a - 1));
        out[z - a - 1] = 0;
    }
}

/* len bytes of host memory from a 2 MiB boundary, advised MADV_HUGEPAGE. */
static int huge_alloc(perf_buf_t *b, size_t len)
{
    const size_t H = 2u << 20;
    char mode[32];
    thp_mode(mode, sizeof(mode));
    if (!strcmp(mode, "never"))
        fprintf(stderr, "gpuwire perf: --hugepages: transparent huge pages are off on this machine "
                        "(/sys/kernel/mm/transparent_hugepage/enabled: never); the buffer stays in 4 KiB pages\n");
    size_t need = (len + H - 1) / H * H;
    b->maplen = need + H;
    b->map = mmap(NULL, b->maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (b->map == MAP_FAILED) {
        b->map = NULL;
        fprintf(stderr, "gpuwire perf: --hugepages: mmap(%zu bytes) failed: %s\n", b->maplen, strerror(errno));
        return -1;
    }
    b->p = (uint8_t *)(((uintptr_t)b->map + H - 1) & ~(uintptr_t)(H - 1));
    if (madvise(b->p, need, MADV_HUGEPAGE) != 0)
        fprintf(stderr, "gpuwire perf: --hugepages: madvise(MADV_HUGEPAGE) failed: %s; the buffer may stay "
                        "in 4 KiB pages\n", strerror(errno));
    return 0;
}

/* Zeroes host memory, progressing b->tick between 64 MiB pieces. */
static void host_zero(perf_buf_t *b, uint8_t *p, size_t len)
{
    const size_t piece = 64u << 20;
    for (size_t off = 0; off < len; off += piece) {
        memset(p + off, 0, len - off < piece ? len - off : piece);
        if (b->tick)
            gw_progress(b->tick);
    }
}

int perf_buf_alloc(perf_buf_t *b, size_t len, int dev, int huge)
{
    b->len = len;
    b->dev = dev;
    b->p = NULL;
    b->map = NULL;
    b->maplen = 0;
    if (dev < 0 && huge) {
        if (huge_alloc(b, len) != 0)
            return -1;
        host_zero(b, b->p, len); /* touch every page before measuring */
        return 0;
    }
    if (dev < 0) {
        if (posix_memalign((void **)&b->p, 4096, len) != 0) {
            fprintf(stderr, "gpuwire perf: cannot allocate %zu bytes\n", len);
            return -1;
        }
        host_zero(b, b->p, len); /* touch every page before measuring */
        return 0;
    }
    char why[256];
    if (!gw_cuda_ctx_for_device(dev, why, sizeof(why))) {
        fprintf(stderr, "gpuwire perf: --mem cuda:%d: %s\n", dev, why);
        return -1;
    }
    const gw_cuda_t *cu = gw_cuda_get(NULL, 0);
    CUdeviceptr d;
    CUresult r = cu->cuMemAlloc(&d, len);
    if (r != CUDA_SUCCESS || cu->cuMemsetD8(d, 0, len) != CUDA_SUCCESS) {
        fprintf(stderr, "gpuwire perf: cuMemAlloc(%zu bytes) on device %d failed: %s\n", len, dev,
                gw_cuda_strerror(r, why, sizeof(why)));
        return -1;
    }
    b->p = (uint8_t *)(uintptr_t)d;
    return 0;
}

void perf_buf_free(perf_buf_t *b)
{
    if (!b->p)
        return;
    if (b->shm)
        ; /* gw_mem_dereg freed it */
    else if (b->map)
        munmap(b->map, b->maplen);
    else if (b->dev < 0)
        free(b->p);
    else
        gw_cuda_get(NULL, 0)->cuMemFree((CUdeviceptr)(uintptr_t)b->p);
    b->p = NULL;
}

void perf_buf_fill(perf_buf_t *b, size_t off, size_t len, uint64_t seed)
{
    if (b->dev < 0) {
        perf_fill(b->p + off, len, seed);
        return;
    }
    uint8_t *h = malloc(len ? len : 1);
    if (!h)
        return;
    perf_fill(h, len, seed);
    gw_cuda_get(NULL, 0)->cuMemcpyHtoD((CUdeviceptr)(uintptr_t)(b->p + off), h, len);
    free(h);
}

void perf_buf_zero(perf_buf_t *b, size_t off, size_t len)
{
    if (b->dev < 0)
        host_zero(b, b->p + off, len);
    else
        gw_cuda_get(NULL, 0)->cuMemsetD8((CUdeviceptr)(uintptr_t)(b->p + off), 0, len);
}

long long perf_buf_verify(perf_buf_t *b, size_t off, size_t len, uint64_t seed)
{
    if (b->dev < 0)
        return perf_verify(b->p + off, len, seed);
    uint8_t *h = malloc(len ? len : 1);
    if (!h)
        return 0;
    gw_cuda_get(NULL, 0)->cuMemcpyDtoH(h, (CUdeviceptr)(uintptr_t)(b->p + off), len);
    long long bad = perf_verify(h, len, seed);
    free(h);
    return bad;
}

uint64_t perf_gpu_id(gw_mem_t *mem)
{
    gw_mem_info_t mi = {.size = sizeof(mi)};
    if (gw_mem_query(mem, &mi) != GW_OK || mi.type != GW_MEM_CUDA || !mi.pci_bus_id[0])
        return 0;
    char boot[64] = "";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(boot, sizeof(boot), f))
            boot[0] = '\0';
        fclose(f);
    }
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a over "boot id|bus id" */
    for (const char *s = boot; *s && *s != '\n'; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    h = (h ^ '|') * 0x100000001b3ull;
    for (const char *s = mi.pci_bus_id; *s; s++)
        h = (h ^ (unsigned char)(*s >= 'A' && *s <= 'F' ? *s + 32 : *s)) * 0x100000001b3ull;
    return h ? h : 1;
}
