/* nccl_driver.c - drives libnccl-net-gpuwire.so the way NCCL's proxy does.
 *
 *   nccl_driver PLUGIN.so [--version 8|9|10|11|12] [--mem host|cuda] [--max BYTES]
 *               [--rounds N] [--no-inject] [--expect-transport tcp|intra|verbs] [--late-recv MS]
 *               [--init-fails]
 *
 * Two processes, each dlopen()s the plugin and looks up ncclNetPlugin_vN:
 * the parent receives (listen, accept), the child sends (connect with the
 * handle the parent passed it, as NCCL's bootstrap would).  Messages of 0 B
 * to --max (default 64 MiB) go concurrently: up to 16 isends and 8 grouped
 * irecvs (1..4 receives each, tags matched out of order) in flight, each
 * receive buffer larger than its message; every size test() reports and
 * every byte is checked.  Both sides must see the plugin log the connection's
 * transport and path through the logger.  Then errors are injected: bad
 * memory types, a garbage handle, a handle naming a closed port, a message
 * longer than its receive (truncation), and the sender dying in the middle of
 * a 64 MiB message; each must come back as an error (and a WARN), in bounded
 * time, never as success or a hang.  --late-recv MS: the receiver makes no
 * plugin call for MS before its first irecv (a rank reaching the collective
 * late); the plugin's own progress must keep the sender from timing it out.
 * --init-fails: only init, which must fail (the test breaks a setting) with a
 * WARN through the logger; ctest also wants the plugin's stderr line.
 */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cuda/cuda_wrap.h"
#include "harness.h"
#include "../../plugin/nccl/nccl_net_abi.h"

static const char *g_path;
static int g_ver = 11, g_cuda, g_rounds = 2, g_inject = 1, g_late_ms, g_init_fails;
static size_t g_max = 64u << 20;
static gwt_chan_t pch, cch;
static const char *g_who = "?";
static int g_path_lines, g_warns, g_expect_ok;
static const char *g_expect; /* --expect-transport: every connection must take it */
static char g_taken[16];      /* transport of the last connection logged */

static const ncclNet_v8_t *n8;
static const ncclNet_v9_t *n9;
static const ncclNet_v10_t *n10;
static const ncclNet_v11_t *n11;
static const ncclNet_v12_t *n12; /* v12: also set as n11 (same slots), only getProperties differs */
static void *g_ctx; /* v11, v12 */

static void logger(ncclDebugLogLevel lvl, unsigned long flags, const char *file, int line, const char *fmt, ...)
{
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    const char *t = strstr(buf, ": transport ");
    if (t) {
        g_path_lines++;
        sscanf(t + 12, "%15[a-z]", g_taken);
        size_t n = g_expect ? strlen(g_expect) : 0;
        if (g_expect && strncmp(t + 12, g_expect, n) == 0 && t[12 + n] == ',')
            g_expect_ok++;
    }
    if (lvl == NCCL_LOG_WARN)
        g_warns++;
    fprintf(stderr, "[%s] %s %s:%d %s\n", g_who, lvl == NCCL_LOG_WARN ? "WARN" : "INFO", file, line, buf);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* ---- one view over the four versions (what NCCL's compat layer does) ---------------------------- */
static void load(void)
{
    void *lib = dlopen(g_path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "[%s] dlopen(%s) failed: %s\n", g_who, g_path, dlerror());
        exit(1);
    }
    char sym[32];
    snprintf(sym, sizeof(sym), "ncclNetPlugin_v%d", g_ver);
    void *p = dlsym(lib, sym);
    if (!p) {
        fprintf(stderr, "[%s] %s not exported by %s\n", g_who, sym, g_path);
        exit(1);
    }
    n8 = g_ver == 8 ? p : NULL;
    n9 = g_ver == 9 ? p : NULL;
    n10 = g_ver == 10 ? p : NULL;
    n11 = g_ver == 11 ? p : NULL;
    n12 = g_ver == 12 ? p : NULL;
    if (n12) /* every slot but getProperties has v11's type and position */
        n11 = (const ncclNet_v11_t *)p;
    REQUIRE(strcmp(*(const char *const *)p, "gpuwire") == 0);
}

static ncclResult_t d_init(void)
{
    ncclNetCommConfig_t cfg = {.trafficClass = -1};
    if (n11)
        return n11->init(&g_ctx, 0x1234, &cfg, logger, NULL);
    if (n10)
        return n10->init(logger, NULL);
    return n9 ? n9->init(logger) : n8->init(logger);
}
#define CALL(slot, ...) (n11 ? n11->slot(__VA_ARGS__) : n10 ? n10->slot(__VA_ARGS__) : n9 ? n9->slot(__VA_ARGS__) : n8->slot(__VA_ARGS__))

static void d_props(int dev, int *ptr, int *maxrecvs, const char **name)
{
    if (n12) {
        ncclNetProperties_v12_t p;
        REQUIRE(n12->getProperties(dev, &p) == ncclSuccess);
        *ptr = p.ptrSupport, *maxrecvs = p.maxRecvs, *name = p.name;
        CHECK(p.maxMultiRequestSize == 1 && p.vProps.ndevs == 1 && p.vProps.devs[0] == dev &&
              p.maxP2pBytes >= (1u << 30) && p.railId == NCCL_NET_ID_UNDEF && p.planeId == NCCL_NET_ID_UNDEF);
    } else if (n11) {
        ncclNetProperties_v11_t p;
        REQUIRE(n11->getProperties(dev, &p) == ncclSuccess);
        *ptr = p.ptrSupport, *maxrecvs = p.maxRecvs, *name = p.name;
        CHECK(p.maxMultiRequestSize == 1 && p.vProps.ndevs == 1 && p.maxP2pBytes >= (1u << 30));
    } else if (n10 || n9) {
        ncclNetProperties_v9_t p;
        REQUIRE((n10 ? n10->getProperties(dev, &p) : n9->getProperties(dev, &p)) == ncclSuccess);
        *ptr = p.ptrSupport, *maxrecvs = p.maxRecvs, *name = p.name;
        CHECK(p.vProps.ndevs == 1 && p.maxP2pBytes >= (1u << 30));
    } else {
        ncclNetProperties_v8_t p;
        REQUIRE(n8->getProperties(dev, &p) == ncclSuccess);
        *ptr = p.ptrSupport, *maxrecvs = p.maxRecvs, *name = p.name;
        CHECK(p.speed > 0);
    }
}
static ncclResult_t d_listen(void *handle, void **lc)
{
    if (n11)
        return n11->listen(g_ctx, 0, handle, lc);
    if (n10)
        return n10->listen(0, handle, lc);
    return n9 ? n9->listen(0, handle, lc) : n8->listen(0, handle, lc);
}
static ncclResult_t d_connect(void *handle, void **sc)
{
    ncclNetDeviceHandle_t *dh = NULL;
    ncclNetCommConfig_t cfg = {.trafficClass = -1};
    if (n11)
        return n11->connect(g_ctx, 0, handle, sc, &dh);
    if (n10)
        return n10->connect(0, &cfg, handle, sc, &dh);
    return n9 ? n9->connect(0, handle, sc, &dh) : n8->connect(0, handle, sc, &dh);
}
static ncclResult_t d_isend(void *sc, void *data, size_t size, int tag, void *mh, void **req)
{
    if (n11)
        return n11->isend(sc, data, size, tag, mh, NULL, req);
    if (n10)
        return n10->isend(sc, data, size, tag, mh, NULL, req);
    return n9 ? n9->isend(sc, data, size, tag, mh, req) : n8->isend(sc, data, (int)size, tag, mh, req);
}
static ncclResult_t d_irecv(void *rc, int n, void **data, size_t *sizes, int *tags, void **mh, void **req)
{
    void *ph[8] = {0};
    *req = (void *)NCCL_NET_OPTIONAL_RECV_COMPLETION; /* as NCCL may pass it; the plugin overwrites it */
    if (n11)
        return n11->irecv(rc, n, data, sizes, tags, mh, ph, req);
    if (n10)
        return n10->irecv(rc, n, data, sizes, tags, mh, ph, req);
    if (n9)
        return n9->irecv(rc, n, data, sizes, tags, mh, req);
    int s[8];
    for (int i = 0; i < n; i++)
        s[i] = (int)sizes[i];
    return n8->irecv(rc, n, data, s, tags, mh, req);
}

/* Waits for a request; returns the test() result (done is set on success). */
static ncclResult_t d_wait(void *req, int *sizes, double limit_s)
{
    double end = now_s() + limit_s;
    int done = 0;
    while (now_s() < end) {
        ncclResult_t r = CALL(test, req, &done, sizes);
        if (r != ncclSuccess || done)
            return r;
    }
    fprintf(stderr, "[%s] request %p not complete after %.0f s\n", g_who, req, limit_s);
    return ncclInternalError;
}

/* ---- buffers --------------------------------------------------------------------------------- */
static const gw_cuda_t *g_cu;

static void cuda_setup(void)
{
    char why[256];
    g_cu = gw_cuda_get(why, sizeof(why));
    if (!g_cu)
        SKIP("--mem cuda: no CUDA driver: %s", why);
    if (g_cu->device_count < 1)
        SKIP("--mem cuda: no GPU");
    REQUIRE(gw_cuda_ctx_for_device(0, why, sizeof(why)) != NULL);
}
static int cuda_probe(void *arg)
{
    cuda_setup();
    return 0;
}
static void *buf_alloc(size_t n)
{
    if (!g_cuda) {
        void *p = malloc(n);
        REQUIRE(p);
        return p;
    }
    CUdeviceptr p;
    REQUIRE(g_cu->cuMemAlloc(&p, n) == CUDA_SUCCESS);
    return (void *)(uintptr_t)p;
}
static void buf_free(void *p)
{
    if (!g_cuda)
        free(p);
    else
        g_cu->cuMemFree((CUdeviceptr)(uintptr_t)p);
}
/* host <-> buffer copies (plain memcpy for host buffers) */
static void to_buf(void *dst, const void *src, size_t n)
{
    if (!g_cuda)
        memcpy(dst, src, n);
    else if (n)
        REQUIRE(g_cu->cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dst, src, n) == CUDA_SUCCESS);
}
static void from_buf(void *dst, const void *src, size_t n)
{
    if (!g_cuda)
        memcpy(dst, src, n);
    else if (n)
        REQUIRE(g_cu->cuMemcpyDtoH(dst, (CUdeviceptr)(uintptr_t)src, n) == CUDA_SUCCESS);
}

/* ---- the schedule both sides compute ------------------------------------------------------------ */
#define MAXMSG 64
#define SLACK 64
static size_t msz[MAXMSG], moff[MAXMSG];
static int mgroup[MAXMSG], mtag[MAXMSG], nmsg, ngroup, gfirst[MAXMSG], gsize[MAXMSG];
static size_t total;

static void schedule(void)
{
    static const size_t base[] = {0, 1, 7, 4096, 65535, 65536, 65537, 300000, 1u << 20, (4u << 20) + 5,
                                  16u << 20, 0 /* max */, 123, 2u << 20, 8};
    nmsg = 0;
    total = 0;
    for (size_t i = 0; i < sizeof(base) / sizeof(base[0]); i++) {
        size_t s = base[i] == 0 && i > 0 ? g_max : base[i];
        if (s > g_max)
            s = g_max;
        msz[nmsg] = s;
        moff[nmsg] = total;
        total += s + SLACK;
        nmsg++;
    }
    /* groups of 1, 2, 3, 4, 1, 2, ... receives; tags 0..g-1 in each */
    ngroup = 0;
    for (int m = 0, g = 1; m < nmsg; g = g % 4 + 1) {
        int k = g < nmsg - m ? g : nmsg - m;
        gfirst[ngroup] = m;
        gsize[ngroup] = k;
        for (int i = 0; i < k; i++) {
            mgroup[m + i] = ngroup;
            mtag[m + i] = i;
        }
        m += k;
        ngroup++;
    }
}

/* ---- sender (child) ---------------------------------------------------------------------------- */
static int sender(void *arg)
{
    g_who = "send";
    load();
    if (g_cuda)
        cuda_setup();
    REQUIRE(d_init() == ncclSuccess);
    int ndev = 0, ptr, maxr;
    const char *name;
    REQUIRE(CALL(devices, &ndev) == ncclSuccess && ndev >= 1);
    d_props(0, &ptr, &maxr, &name);
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    void *sc = NULL;
    if (g_inject) {
        /* a handle another plugin wrote: refused at once */
        memset(handle, 0x5a, sizeof(handle));
        double t0 = now_s();
        CHECK(d_connect(handle, &sc) != ncclSuccess && sc == NULL);
        CHECK(now_s() - t0 < 2);
    }
    REQUIRE(gwt_chan_recv(&cch, handle, sizeof(handle), 30000) == (int)sizeof(handle));
    if (g_inject) {
        /* a gpuwire handle naming a port nobody listens on: an error within the connect timeout */
        char bad[NCCL_NET_HANDLE_MAXSIZE];
        memcpy(bad, handle, sizeof(bad));
        char *addr = bad + 16; /* gwn_handle_t: magic, version, dev, id, then "ip:port" */
        char *colon = strrchr(addr, ':');
        REQUIRE(colon);
        strcpy(colon, ":1");
        double t0 = now_s();
        ncclResult_t r = d_connect(bad, &sc);
        CHECK(r != ncclSuccess && sc == NULL);
        CHECK(now_s() - t0 < 30);
        fprintf(stderr, "[send] connect to a closed port: result %d after %.1f s\n", r, now_s() - t0);
    }
    double end = now_s() + 30;
    while (!sc && now_s() < end)
        REQUIRE(d_connect(handle, &sc) == ncclSuccess);
    REQUIRE(sc);
    CHECK(g_path_lines >= 1);
    CHECK(!g_expect || g_expect_ok == g_path_lines);

    schedule();
    uint8_t *host = calloc(1, total);
    REQUIRE(host);
    void *buf = buf_alloc(total);
    for (int m = 0; m < nmsg; m++)
        gwt_fill(host + moff[m], msz[m], 1000 + m);
    to_buf(buf, host, total);
    void *mh = NULL;
    REQUIRE(CALL(regMr, sc, buf, total, g_cuda ? NCCL_PTR_CUDA : NCCL_PTR_HOST, &mh) == ncclSuccess);

    for (int round = 0; round < g_rounds; round++) {
        /* messages in group order, each group's last tag first */
        int order[MAXMSG], k = 0;
        for (int g = 0; g < ngroup; g++)
            for (int i = gsize[g] - 1; i >= 0; i--)
                order[k++] = gfirst[g] + i;
        void *req[16] = {0};
        int reqm[16], posted = 0, completed = 0;
        double until = now_s() + 120;
        while (completed < nmsg && now_s() < until) {
            for (int s = 0; s < 16; s++) {
                if (!req[s] && posted < nmsg) {
                    int m = order[posted];
                    REQUIRE(d_isend(sc, (uint8_t *)buf + moff[m], msz[m], mtag[m], mh, &req[s]) == ncclSuccess);
                    if (req[s]) {
                        reqm[s] = m;
                        posted++;
                    }
                }
                if (req[s]) {
                    int done = 0, size = -1;
                    REQUIRE(CALL(test, req[s], &done, &size) == ncclSuccess);
                    if (done) {
                        CHECK(size == (int)msz[reqm[s]]);
                        req[s] = NULL;
                        completed++;
                    }
                }
            }
        }
        REQUIRE(completed == nmsg);
    }
    /* wait for the receiver's "checked" before the injections */
    char ok;
    REQUIRE(gwt_chan_recv(&cch, &ok, 1, 120000) == 1);

    if (g_inject) {
        /* truncation: 4096 bytes for a 100-byte receive; the send itself completes */
        void *r = NULL;
        REQUIRE(d_isend(sc, buf, 4096, 999, mh, &r) == ncclSuccess && r);
        int sz = 0;
        CHECK(d_wait(r, &sz, 30) == ncclSuccess);
        REQUIRE(gwt_chan_recv(&cch, &ok, 1, 60000) == 1);
        /* dying in the middle of a large message: post it, let it start, exit */
        size_t big = total < (64u << 20) ? total : (64u << 20);
        REQUIRE(d_isend(sc, buf, big, 1000, mh, &r) == ncclSuccess && r);
        fprintf(stderr, "[send] exiting with a %zu-byte isend outstanding\n", big);
        fflush(stderr);
        _exit(gwt_failures ? 1 : 0);
    }
    REQUIRE(CALL(deregMr, sc, mh) == ncclSuccess);
    REQUIRE(CALL(closeSend, sc) == ncclSuccess);
    if (n11)
        REQUIRE(n11->finalize(g_ctx) == ncclSuccess);
    buf_free(buf);
    free(host);
    return gwt_failures ? 1 : 0;
}

/* ---- receiver (parent) --------------------------------------------------------------------------- */
static int receiver(void)
{
    g_who = "recv";
    load();
    if (g_cuda)
        cuda_setup();
    REQUIRE(d_init() == ncclSuccess);
    int ndev = 0, ptr = 0, maxr = 0;
    const char *name = NULL;
    REQUIRE(CALL(devices, &ndev) == ncclSuccess && ndev >= 1);
    d_props(0, &ptr, &maxr, &name);
    fprintf(stderr, "[recv] plugin v%d: %d device(s), dev 0 %s, ptrSupport 0x%x, maxRecvs %d\n", g_ver, ndev,
            name, ptr, maxr);
    CHECK(name && (ptr & NCCL_PTR_HOST) && maxr >= 4);
    if (g_cuda)
        CHECK(ptr & NCCL_PTR_CUDA);

    char handle[NCCL_NET_HANDLE_MAXSIZE];
    void *lc = NULL, *rc = NULL;
    REQUIRE(d_listen(handle, &lc) == ncclSuccess && lc);
    REQUIRE(gwt_chan_send(&pch, handle, sizeof(handle)) == 0);
    double end = now_s() + 60;
    while (!rc && now_s() < end)
        REQUIRE(CALL(accept, lc, &rc, NULL) == ncclSuccess);
    REQUIRE(rc);
    CHECK(g_path_lines >= 1);
    CHECK(!g_expect || g_expect_ok == g_path_lines);

    schedule();
    uint8_t *host = malloc(total), *want = calloc(1, total);
    REQUIRE(host && want);
    void *buf = buf_alloc(total);
    void *mh = NULL;
    if (g_inject) {
        void *bad = NULL;
        CHECK(CALL(regMr, rc, host, 4096, 7, &bad) != ncclSuccess && bad == NULL);
        /* host memory declared as CUDA memory: refused, not silently staged */
        CHECK(CALL(regMr, rc, host, 4096, NCCL_PTR_CUDA, &bad) != ncclSuccess && bad == NULL);
    }
    REQUIRE(CALL(regMr, rc, buf, total, g_cuda ? NCCL_PTR_CUDA : NCCL_PTR_HOST, &mh) == ncclSuccess);
    for (int m = 0; m < nmsg; m++)
        gwt_fill(want + moff[m], msz[m], 1000 + m);

    if (g_late_ms) {
        /* a rank that comes late: no plugin call at all while the sender's
         * isends wait (longer than GPUWIRE_PEER_TIMEOUT_MS in the test) */
        fprintf(stderr, "[recv] sleeping %d ms before the first irecv\n", g_late_ms);
        usleep((useconds_t)g_late_ms * 1000);
    }
    double t0 = now_s();
    size_t bytes = 0;
    for (int round = 0; round < g_rounds; round++) {
        memset(host, 0xee, total);
        to_buf(buf, host, total);
        void *req[8] = {0};
        int reqg[8], posted = 0, completed = 0;
        double until = now_s() + 120;
        while (completed < ngroup && now_s() < until) {
            for (int s = 0; s < 8; s++) {
                if (!req[s] && posted < ngroup) {
                    int g = posted, n = gsize[g];
                    void *data[4], *mhs[4];
                    size_t sizes[4];
                    int tags[4];
                    for (int i = 0; i < n; i++) {
                        int m = gfirst[g] + i;
                        data[i] = (uint8_t *)buf + moff[m];
                        sizes[i] = msz[m] + SLACK;
                        tags[i] = mtag[m];
                        mhs[i] = mh;
                    }
                    REQUIRE(d_irecv(rc, n, data, sizes, tags, mhs, &req[s]) == ncclSuccess);
                    if (req[s]) {
                        reqg[s] = g;
                        posted++;
                    }
                }
                if (req[s]) {
                    int done = 0, sizes[4] = {-1, -1, -1, -1};
                    REQUIRE(CALL(test, req[s], &done, sizes) == ncclSuccess);
                    if (done) {
                        int g = reqg[s];
                        for (int i = 0; i < gsize[g]; i++) {
                            int m = gfirst[g] + i;
                            if (sizes[i] != (int)msz[m]) {
                                fprintf(stderr, "[recv] round %d message %d (tag %d): test() says %d bytes, "
                                        "%zu were sent\n", round, m, mtag[m], sizes[i], msz[m]);
                                gwt_failures++;
                            }
                            bytes += msz[m];
                        }
                        void *flush = (void *)1;
                        int isz[4];
                        for (int i = 0; i < gsize[g]; i++)
                            isz[i] = (int)msz[gfirst[g] + i];
                        void *fdata[4];
                        for (int i = 0; i < gsize[g]; i++)
                            fdata[i] = (uint8_t *)buf + moff[gfirst[g] + i];
                        REQUIRE(CALL(iflush, rc, gsize[g], fdata, isz, NULL, &flush) == ncclSuccess);
                        if (flush)
                            REQUIRE(d_wait(flush, NULL, 10) == ncclSuccess);
                        req[s] = NULL;
                        completed++;
                    }
                }
            }
        }
        REQUIRE(completed == ngroup);
        from_buf(host, buf, total);
        for (int m = 0; m < nmsg; m++) {
            long long bad = gwt_verify(host + moff[m], msz[m], 1000 + m);
            if (bad >= 0) {
                fprintf(stderr, "[recv] round %d message %d (%zu bytes, tag %d): payload differs at byte %lld\n",
                        round, m, msz[m], mtag[m], bad);
                gwt_failures++;
            }
        }
    }
    double dt = now_s() - t0;
    fprintf(stderr, "[recv] %d rounds x %d messages (%d grouped receives), %zu bytes checked in %.2f s "
            "(%.0f MB/s)\n", g_rounds, nmsg, ngroup, bytes, dt, bytes / dt / 1e6);
    REQUIRE(gwt_chan_send(&pch, "k", 1) == 0);

    if (g_inject) {
        /* truncation: a 100-byte receive for a 4096-byte message */
        void *r = NULL, *data[1] = {buf}, *mhs[1] = {mh};
        size_t sizes[1] = {100};
        int tags[1] = {999}, sz[1];
        int warns = g_warns;
        REQUIRE(d_irecv(rc, 1, data, sizes, tags, mhs, &r) == ncclSuccess && r);
        ncclResult_t res = d_wait(r, sz, 30);
        fprintf(stderr, "[recv] truncated receive: result %d\n", res);
        CHECK(res != ncclSuccess && res != ncclInternalError /* internal = our own time-out */);
        CHECK(g_warns > warns);
        REQUIRE(gwt_chan_send(&pch, "k", 1) == 0);
        /* the sender dies in the middle of a large message */
        size_t big = total < (64u << 20) ? total : (64u << 20);
        sizes[0] = big;
        tags[0] = 1000;
        warns = g_warns;
        double t1 = now_s();
        res = d_irecv(rc, 1, data, sizes, tags, mhs, &r);
        if (res == ncclSuccess && r)
            res = d_wait(r, sz, 60);
        fprintf(stderr, "[recv] receive from a dead sender over %s: result %d after %.1f s\n", g_taken, res,
                now_s() - t1);
        if (res == ncclSuccess && strcmp(g_taken, "intra") == 0) {
            /* intra moves the message with one copy from the sender's memory,
             * which can finish before the sender is gone: then it must be whole */
            from_buf(host, buf, big);
            CHECK(memcmp(host, want, big) == 0);
            fprintf(stderr, "[recv] (the message completed before the sender died; payload checked)\n");
        } else {
            CHECK(res != ncclSuccess && res != ncclInternalError);
            CHECK(g_warns > warns);
        }
    }
    REQUIRE(CALL(deregMr, rc, mh) == ncclSuccess);
    double tc = now_s();
    REQUIRE(CALL(closeRecv, rc) == ncclSuccess);
    REQUIRE(CALL(closeListen, lc) == ncclSuccess);
    CHECK(now_s() - tc < 10);
    if (n11)
        REQUIRE(n11->finalize(g_ctx) == ncclSuccess);
    buf_free(buf);
    free(host);
    free(want);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s PLUGIN.so [--version N] [--mem host|cuda] [--max BYTES] [--rounds N] "
                "[--no-inject]\n", argv[0]);
        return 2;
    }
    g_path = argv[1];
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--version") && i + 1 < argc)
            g_ver = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--mem") && i + 1 < argc)
            g_cuda = !strcmp(argv[++i], "cuda");
        else if (!strcmp(argv[i], "--max") && i + 1 < argc)
            g_max = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            g_rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--expect-transport") && i + 1 < argc)
            g_expect = argv[++i];
        else if (!strcmp(argv[i], "--init-fails"))
            g_init_fails = 1;
        else if (!strcmp(argv[i], "--late-recv") && i + 1 < argc)
            g_late_ms = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-inject"))
            g_inject = 0;
        else {
            fprintf(stderr, "unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    REQUIRE(g_ver >= 8 && g_ver <= 12 && g_max >= 16 && g_rounds >= 1);
    if (g_cuda) { /* skip when there is no driver, probed in a child: CUDA does not survive fork() */
        int probe = gwt_spawn(cuda_probe, NULL);
        int prc = gwt_wait(probe, 60);
        if (prc == GW_TEST_SKIP)
            return GW_TEST_SKIP;
        REQUIRE(prc == 0);
    }
    if (g_init_fails) { /* a broken setting: init must fail, with a WARN */
        g_who = "init";
        load();
        ncclResult_t r = d_init();
        fprintf(stderr, "[init] init returned %d\n", r);
        CHECK(r != ncclSuccess);
        CHECK(g_warns > 0);
        return gwt_done("nccl_driver --init-fails");
    }
    REQUIRE(gwt_chan_pair(&pch, &cch) == 0);
    int pid = gwt_spawn(sender, NULL);
    REQUIRE(pid > 0);
    int rc = receiver();
    int crc = gwt_wait(pid, 300);
    if (crc != 0) {
        fprintf(stderr, "sender exited with %d\n", crc);
        gwt_failures++;
    }
    (void)rc;
    return gwt_done("nccl_driver");
}
