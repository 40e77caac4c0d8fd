/* SPDX-License-Identifier: Apache-2.0 */
/* perf_kv.c - `gpuwire perf --table N` (descriptor tables at serving scale:
 * build time and post cost per selected entry) and `gpuwire perf --reg`
 * (registration time per GiB by memory kind).  Both run in one process:
 * the target is a second context of it with a progress thread, so the post
 * cost is the initiator's call alone and the moved bytes can be compared
 * directly. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cuda/cuda_wrap.h"
#include "perf.h"

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t median(uint64_t *v, size_t n)
{
    qsort(v, n, sizeof(*v), cmp_u64);
    return v[n / 2];
}

static uint64_t xs(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* The first k of a random permutation of 0 .. n-1. */
static void perm_prefix(uint32_t *out, size_t k, size_t n, uint64_t seed)
{
    uint32_t *p = malloc(n * sizeof(*p));
    if (!p) {
        for (size_t i = 0; i < k; i++)
            out[i] = (uint32_t)i;
        return;
    }
    for (size_t i = 0; i < n; i++)
        p[i] = (uint32_t)i;
    for (size_t i = 0; i < k; i++) {
        size_t j = i + (size_t)(xs(&seed) % (n - i));
        uint32_t t = p[i];
        p[i] = p[j];
        p[j] = t;
        out[i] = p[i];
    }
    free(p);
}

/* Two contexts of this process: t (the target, its own progress thread) and
 * i (the initiator), and an endpoint from i to t. */
typedef struct pair {
    gw_context_t *t, *i;
    gw_listener_t *l;
    gw_ep_t *ep, *tep;
} pair_t;

static int pair_open(pair_t *p)
{
    memset(p, 0, sizeof(*p));
    gw_config_t tc = {.size = sizeof(tc), .log_level = -1, .progress_thread = GW_PROGRESS_THREAD_ON};
    gw_status_t st;
    char addr[128];
    if ((st = gw_context_create(&tc, &p->t)) != GW_OK || (st = gw_context_create(NULL, &p->i)) != GW_OK) {
        fprintf(stderr, "gpuwire perf: gw_context_create: %s\n", gw_status_str(st));
        return -1;
    }
    if ((st = gw_listen(p->t, "127.0.0.1:0", &p->l)) != GW_OK)
        return perf_fail(p->t, "gw_listen", st);
    if ((st = gw_listener_addr(p->l, addr, sizeof(addr))) != GW_OK)
        return perf_fail(p->t, "gw_listener_addr", st);
    if ((st = gw_connect(p->i, addr, &p->ep)) != GW_OK)
        return perf_fail(p->i, "gw_connect", st);
    if ((st = gw_accept(p->l, 30000, &p->tep)) != GW_OK)
        return perf_fail(p->t, "gw_accept", st);
    return 0;
}

static void pair_close(pair_t *p)
{
    if (p->ep)
        gw_ep_close(p->ep, 5000);
    if (p->tep)
        gw_ep_close(p->tep, 5000);
    gw_listener_destroy(p->l);
    gw_context_destroy(p->i);
    gw_context_destroy(p->t);
}

int perf_table(const perf_opts_t *o)
{
    size_t n = (size_t)o->table, k = o->select ? (size_t)o->select : (n < 327680 ? n : 327680);
    uint64_t esz = o->nsizes ? o->sizes[0] : 64;
    if (k > n) {
        fprintf(stderr, "gpuwire perf: --select %zu is more than the table's %zu entries\n", k, n);
        return 2;
    }
    if (esz == 0 || esz > (1ull << 40) / n) {
        fprintf(stderr, "gpuwire perf: --table %zu entries of %llu bytes: give a --size from 1 to %llu\n", n,
                (unsigned long long)esz, (unsigned long long)((1ull << 40) / n));
        return 2;
    }
    size_t len = n * (size_t)esz;
    pair_t p;
    int rc = 1;
    uint8_t *src = NULL, *dst = NULL;
    gw_mem_t *ms = NULL, *md = NULL;
    gw_rkey_t *rk = NULL;
    gw_dlist_t *L = NULL, *R = NULL, *Lc = NULL, *Rc = NULL;
    uint32_t *li = malloc(k * sizeof(*li)), *ri = malloc(k * sizeof(*ri));
    gw_local_desc_t *ld = NULL;
    gw_status_t st;
    if (!li || !ri || pair_open(&p) != 0)
        goto out;
    src = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    dst = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (src == MAP_FAILED || dst == MAP_FAILED) {
        fprintf(stderr, "gpuwire perf: --table: mmap of 2 x %zu bytes failed: %s\n", len, strerror(errno));
        src = src == MAP_FAILED ? NULL : src;
        dst = dst == MAP_FAILED ? NULL : dst;
        goto out;
    }
    perf_fill(src, len, 77);
    memset(dst, 0, len);
    if ((st = gw_mem_reg(p.i, src, len, GW_ACCESS_LOCAL, &ms)) != GW_OK) {
        perf_fail(p.i, "gw_mem_reg", st);
        goto out;
    }
    if ((st = gw_mem_reg(p.t, dst, len, GW_ACCESS_REMOTE_WRITE | GW_ACCESS_REMOTE_READ, &md)) != GW_OK) {
        perf_fail(p.t, "gw_mem_reg", st);
        goto out;
    }
    uint8_t kb[512];
    size_t kl = sizeof(kb);
    if ((st = gw_mem_pack_rkey(md, kb, &kl)) != GW_OK || (st = gw_rkey_unpack(p.ep, kb, kl, &rk)) != GW_OK) {
        perf_fail(p.i, "remote key", st);
        goto out;
    }
    gw_ep_info_t ei = {.size = sizeof(ei)};
    gw_ep_query(p.ep, &ei);
    printf("# gpuwire perf --table: %zu entries of %llu bytes per side, transfers of %zu entries selected by "
           "random index arrays, over %s (%s), one process (target: a second context with a progress thread)\n",
           n, (unsigned long long)esz, k, ei.transport, ei.path);
    /* build: the table form (no arrays at all: entry i at i * size), and
     * the struct form of the same entries for comparison */
    gw_dlist_table_t t = {.size = sizeof(t), .n = n, .len_all = esz};
    uint64_t t0 = perf_now_ns();
    if ((st = gw_dlist_local_table(p.i, &ms, 1, &t, &L)) != GW_OK) {
        perf_fail(p.i, "gw_dlist_local_table", st);
        goto out;
    }
    uint64_t t1 = perf_now_ns();
    if ((st = gw_dlist_remote_table(p.ep, &rk, 1, &t, GW_ACCESS_REMOTE_WRITE, &R)) != GW_OK) {
        perf_fail(p.i, "gw_dlist_remote_table", st);
        goto out;
    }
    uint64_t t2 = perf_now_ns();
    /* the same entries as columns (an offset array, as from NumPy): an
     * entry array, 24 bytes per entry */
    uint64_t *offs = malloc(n * sizeof(*offs));
    double build_cols = -1;
    if (offs) {
        for (size_t i = 0; i < n; i++)
            offs[i] = i * esz;
        gw_dlist_table_t tc = {.size = sizeof(tc), .n = n, .offset = offs, .len_all = esz};
        uint64_t a = perf_now_ns();
        if (gw_dlist_local_table(p.i, &ms, 1, &tc, &Lc) == GW_OK &&
            gw_dlist_remote_table(p.ep, &rk, 1, &tc, GW_ACCESS_REMOTE_WRITE, &Rc) == GW_OK)
            build_cols = (double)(perf_now_ns() - a) / 2e6;
        free(offs);
    }
    double build_struct = -1;
    if ((ld = malloc(n * sizeof(*ld)))) {
        for (size_t i = 0; i < n; i++)
            ld[i] = (gw_local_desc_t){ms, i * (size_t)esz, (size_t)esz};
        gw_dlist_t *L2 = NULL;
        uint64_t a = perf_now_ns();
        if (gw_dlist_local(p.i, ld, n, &L2) == GW_OK)
            build_struct = (double)(perf_now_ns() - a) / 1e6;
        gw_dlist_destroy(L2);
    }
    printf("build  computed table (no columns): local %.3f ms, remote %.3f ms; from an offset column: %.2f ms per "
           "side (%.1f ns/entry); gw_dlist_local from structs: %.2f ms\n", (t1 - t0) / 1e6, (t2 - t1) / 1e6,
           build_cols, build_cols * 1e6 / (double)n, build_struct);
    /* post: each transfer selects k entries by two random permutations */
    perm_prefix(li, k, n, 1);
    perm_prefix(ri, k, n, 2);
    /* the api layer's part alone: the same transfer with its last local
     * index out of range is refused after every entry before it was
     * checked and built, and before anything is handed to the transport */
    double dm = 0;
    char refusal[512] = "";
    for (int form = 0; form < 2; form++) {
        gw_dlist_t *FL = form ? Lc : L, *FR = form ? Rc : R;
        if (!FL || !FR)
            continue;
        uint64_t desc[64];
        int nd = 0;
        uint32_t keep = li[k - 1];
        li[k - 1] = (uint32_t)n;
        for (uint64_t until0 = perf_now_ns() + (uint64_t)(o->duration * 5e8);
             nd < 64 && (nd < 5 || perf_now_ns() < until0); nd++) {
            uint64_t a = perf_now_ns();
            st = gw_xfer_batch(p.ep, GW_XFER_PUT, FL, li, FR, ri, k, NULL, NULL);
            desc[nd] = perf_now_ns() - a;
            if (st != GW_ERR_INVALID) {
                fprintf(stderr, "gpuwire perf --table: a transfer with local index %zu of a %zu-entry list was not "
                                "refused (%s)\n", n, n, gw_status_name(st));
                li[k - 1] = keep;
                goto out;
            }
            if (!nd)
                snprintf(refusal, sizeof(refusal), "%s", gw_last_error(p.i));
        }
        li[k - 1] = keep;
        double m = (double)median(desc, (size_t)nd);
        if (!form)
            dm = m;
        printf("select %zu entries of the %s table: %.3f ms (median of %d)  %.1f ns/entry  %.2f M entries/s  "
               "(327,680 entries: %.2f ms)\n", k, form ? "offset-column" : "computed", m / 1e6, nd, m / (double)k,
               (double)k / m * 1e3, m / (double)k * 327680 / 1e6);
    }
    printf("       select: the api layer's part of a post (index checks, the transport's entry array), measured\n"
           "       by the same transfer refused at its last entry: \"%s\"\n", refusal);
    uint64_t post[64], wall[64];
    int reps = 0;
    uint64_t until = perf_now_ns() + (uint64_t)(o->duration * 1e9);
    for (; reps < 64 && (reps < 5 || perf_now_ns() < until); reps++) {
        gw_request_t *r = NULL;
        uint64_t a = perf_now_ns();
        st = gw_xfer_batch(p.ep, GW_XFER_PUT, L, li, R, ri, k, NULL, &r);
        uint64_t b = perf_now_ns();
        if (st != GW_OK) {
            perf_fail(p.i, "gw_xfer_batch", st);
            goto out;
        }
        if ((st = gw_request_wait(r, 120000)) != GW_OK) {
            gw_request_free(r);
            perf_fail(p.i, "the transfer", st);
            goto out;
        }
        gw_request_free(r);
        post[reps] = b - a;
        wall[reps] = perf_now_ns() - a;
        if (reps == 0) { /* the first one checked entry by entry */
            size_t bad = 0;
            for (size_t i = 0; i < k; i++)
                bad += memcmp(dst + (size_t)ri[i] * esz, src + (size_t)li[i] * esz, esz) != 0;
            if (bad) {
                fprintf(stderr, "gpuwire perf --table: %zu of %zu entries arrived wrong\n", bad, k);
                goto out;
            }
        }
    }
    double pm = (double)median(post, (size_t)reps), wm = (double)median(wall, (size_t)reps);
    printf("post   %zu entries: %.3f ms (median of %d)  %.1f ns/entry  %.2f M entries/s  "
           "(327,680 entries: %.2f ms)\n"
           "       the whole call (computed table); over tcp and intra with host memory it includes the\n"
           "       transport's first sends or copies\n", k, pm / 1e6, reps, pm / (double)k, (double)k / pm * 1e3,
           pm / (double)k * 327680 / 1e6);
    printf("moved  %zu entries: %.3f ms post to completion, %.2f GB/s; the first transfer checked entry by entry\n", k,
           wm / 1e6, (double)k * (double)esz / wm);
    if (o->json)
        printf("{\"table\":%zu,\"select\":%zu,\"size\":%llu,\"transport\":\"%s\",\"build_local_ms\":%.3f,"
               "\"build_remote_ms\":%.3f,\"select_ms\":%.4f,\"post_ms\":%.4f,\"post_entries_per_s\":%.0f,\"wall_ms\":%.4f}\n",
               n, k, (unsigned long long)esz, ei.transport, (t1 - t0) / 1e6, (t2 - t1) / 1e6, dm / 1e6, pm / 1e6,
               (double)k / pm * 1e9, wm / 1e6);
    rc = 0;
out:
    if (L)
        gw_dlist_destroy(L);
    if (R)
        gw_dlist_destroy(R);
    if (Lc)
        gw_dlist_destroy(Lc);
    if (Rc)
        gw_dlist_destroy(Rc);
    gw_rkey_destroy(rk);
    if (ms)
        gw_mem_dereg(ms);
    if (md)
        gw_mem_dereg(md);
    if (p.i)
        pair_close(&p);
    if (src)
        munmap(src, len);
    if (dst)
        munmap(dst, len);
    free(ld);
    free(li);
    free(ri);
    return rc;
}

/* ---- --reg ------------------------------------------------------------------------------ */
typedef struct regbuf {
    void *p;
    size_t len;
    int kind; /* 0 host touched, 1 host untouched, 2 pinned, 3 cuda, 4 vmm */
    CUmemGenericAllocationHandle h;
    size_t vlen;
} regbuf_t;

static const char *const kind_name[] = {"host", "host-untouched", "pinned", "cuda", "vmm"};

/* 0, or -1 with *why saying why this kind is not measured here. */
static int rb_alloc(regbuf_t *b, int kind, size_t len, int dev, char *why, size_t wl)
{
    memset(b, 0, sizeof(*b));
    b->kind = kind;
    b->len = len;
    if (kind <= 1) {
        b->p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (b->p == MAP_FAILED) {
            snprintf(why, wl, "mmap(%zu): %s", len, strerror(errno));
            return -1;
        }
        if (kind == 0)
            memset(b->p, 1, len);
        return 0;
    }
    const gw_cuda_t *cu = gw_cuda_get(why, wl);
    if (!cu)
        return -1;
    if (!gw_cuda_ctx_for_device(dev, why, wl))
        return -1;
    CUresult r;
    if (kind == 2) {
        if ((r = cu->cuMemHostAlloc(&b->p, len, CU_MEMHOSTALLOC_PORTABLE)) != CUDA_SUCCESS)
            goto cuerr;
        return 0;
    }
    if (kind == 3) {
        CUdeviceptr d;
        if ((r = cu->cuMemAlloc(&d, len)) != CUDA_SUCCESS)
            goto cuerr;
        b->p = (void *)(uintptr_t)d;
        return 0;
    }
    if (!cu->cuMemCreate) {
        snprintf(why, wl, "the CUDA driver has no VMM (cuMemCreate)");
        return -1;
    }
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    size_t g = 0;
    if ((r = cu->cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM)) != CUDA_SUCCESS)
        goto cuerr;
    b->vlen = (len + g - 1) / g * g;
    CUdeviceptr va;
    if ((r = cu->cuMemAddressReserve(&va, b->vlen, 0, 0, 0)) != CUDA_SUCCESS)
        goto cuerr;
    if ((r = cu->cuMemCreate(&b->h, b->vlen, &prop, 0)) != CUDA_SUCCESS ||
        (r = cu->cuMemMap(va, b->vlen, 0, b->h, 0)) != CUDA_SUCCESS) {
        cu->cuMemAddressFree(va, b->vlen);
        goto cuerr;
    }
    CUmemAccessDesc acc = {{CU_MEM_LOCATION_TYPE_DEVICE, dev}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    if ((r = cu->cuMemSetAccess(va, b->vlen, &acc, 1)) != CUDA_SUCCESS)
        goto cuerr;
    b->p = (void *)(uintptr_t)va;
    return 0;
cuerr:
    gw_cuda_strerror(r, why, wl);
    return -1;
}

static void rb_free(regbuf_t *b)
{
    if (!b->p)
        return;
    const gw_cuda_t *cu = b->kind >= 2 ? gw_cuda_get(NULL, 0) : NULL;
    if (b->kind <= 1)
        munmap(b->p, b->len);
    else if (b->kind == 2)
        cu->cuMemFreeHost(b->p);
    else if (b->kind == 3)
        cu->cuMemFree((CUdeviceptr)(uintptr_t)b->p);
    else {
        cu->cuMemUnmap((CUdeviceptr)(uintptr_t)b->p, b->vlen);
        cu->cuMemRelease(b->h);
        cu->cuMemAddressFree((CUdeviceptr)(uintptr_t)b->p, b->vlen);
    }
    b->p = NULL;
}

int perf_reg(const perf_opts_t *o)
{
    size_t len = o->nsizes ? (size_t)o->sizes[0] : (size_t)256 << 20;
    int dev = o->mem_dev >= 0 ? o->mem_dev : 0;
    gw_context_t *ctx = NULL;
    gw_status_t st = gw_context_create(NULL, &ctx);
    if (st != GW_OK) {
        fprintf(stderr, "gpuwire perf: gw_context_create: %s\n", gw_status_str(st));
        return 1;
    }
    char tls[256] = "";
    for (size_t i = 0;; i++) {
        gw_transport_info_t ti = {.size = sizeof(ti)};
        if (gw_transport_at(ctx, i, &ti) != GW_OK)
            break;
        if (ti.usable)
            snprintf(tls + strlen(tls), sizeof(tls) - strlen(tls), "%s%s", *tls ? "," : "", ti.name);
    }
    char sz[32];
    perf_format_size(len, sz, sizeof(sz));
    printf("# gpuwire perf --reg: gw_mem_reg / gw_mem_dereg of %s regions (remote read+write) with the transports "
           "open here (%s); median of the repetitions; GPU kinds on device %d\n", sz, tls, dev);
    printf("# re-reg sub: gw_mem_reg of the region's middle half while the region is registered (a tensor in a\n"
           "# registered allocator segment), found in the registration cache unless GPUWIRE_REG_CACHE=off\n");
    printf("%-15s %6s %11s %11s %11s %13s %s\n", "kind", "reps", "reg ms", "ms/GiB", "dereg ms", "re-reg sub us",
           "path");
    int rc = 0;
    for (int kind = 0; kind < 5; kind++) {
        char why[256] = "";
        regbuf_t b;
        if (rb_alloc(&b, kind, len, dev, why, sizeof(why)) != 0) {
            printf("%-15s skipped: %s\n", kind_name[kind], why);
            continue;
        }
        uint64_t reg[16], dereg[16], sub[16];
        int reps = 0;
        char path[512] = "";
        uint64_t until = perf_now_ns() + (uint64_t)(o->duration * 1e9);
        for (; reps < 16 && (reps < 3 || perf_now_ns() < until); reps++) {
            if (kind == 1 && reps) { /* untouched each time: a fresh mapping */
                rb_free(&b);
                if (rb_alloc(&b, kind, len, dev, why, sizeof(why)) != 0)
                    break;
            }
            gw_mem_t *m = NULL, *s = NULL;
            uint64_t a = perf_now_ns();
            st = gw_mem_reg(ctx, b.p, len, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, &m);
            uint64_t z = perf_now_ns();
            if (st != GW_OK) {
                printf("%-15s failed: %s: %s\n", kind_name[kind], gw_status_str(st), gw_last_error(ctx));
                rc = 1;
                break;
            }
            /* a sub-range of the registered region registered again (a
             * tensor inside an allocator segment) */
            uint64_t c = perf_now_ns();
            st = gw_mem_reg(ctx, (char *)b.p + len / 4, len / 2, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, &s);
            sub[reps] = perf_now_ns() - c;
            gw_mem_dereg(s);
            if (!reps) {
                gw_mem_info_t mi = {.size = sizeof(mi)};
                gw_mem_query(m, &mi);
                snprintf(path, sizeof(path), "%s", mi.path);
            }
            uint64_t d = perf_now_ns();
            gw_mem_dereg(m);
            dereg[reps] = perf_now_ns() - d;
            reg[reps] = z - a;
        }
        if (reps > 0 && rc == 0) {
            double rm = (double)median(reg, (size_t)reps) / 1e6;
            printf("%-15s %6d %11.3f %11.3f %11.3f %13.2f %s\n", kind_name[kind], reps, rm,
                   rm * (double)(1ull << 30) / (double)len, (double)median(dereg, (size_t)reps) / 1e6,
                   (double)median(sub, (size_t)reps) / 1e3, path);
        }
        rb_free(&b);
    }
    gw_context_destroy(ctx);
    return rc;
}
