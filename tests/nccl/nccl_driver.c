/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_driver.c - drives libnccl-net-gpuwire.so the way NCCL's proxy does.
 *
 *   nccl_driver PLUGIN.so [--version 8|9|10|11|12] [--mem host|cuda] [--max BYTES]
 *               [--rounds N] [--no-inject] [--expect-transport tcp|intra|verbs] [--late-recv MS]
 *               [--init-fails] [--channels N] [--ll]
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
 * --channels N: the connection set-up of NCCL's proxy instead: both
 * processes listen N times and swap the handles, then one thread connects N
 * send comms while another accepts N receive comms, closing each listen
 * comm as soon as its accept is done (as NCCL does); then every channel
 * carries messages of 1 MiB and 4 MiB + 3 bytes each way at once, each
 * checked, and each side's send and receive comms must report the same
 * number of tcp streams.
 * --ll: the buffers NCCL uses when the plugin leads it to GPU buffers, one
 * message at a time on one comm, as a run of collectives moves them: the
 * sender's Simple buffer in GPU memory and its LL buffer in pinned host
 * memory (NCCL's proxy reads the LL flags), the receiver's buffers all in
 * GPU memory plus a host one, each registered on its own.  52 messages of
 * 1 MiB GPU to GPU, then 8, 16, 0, 1000, 8192, 8193 and 65536 bytes from
 * host to GPU (each receive posted larger than its message, an iflush after
 * each), GPU to host, host to host and GPU to GPU, then 1 MiB again; every
 * payload checked.  Run with FAKECUDA_LEGACY_STREAM=busy (tests/fakecuda):
 * the application's default stream waits on the collective, so a copy the
 * plugin queued on it would never finish on a GPU.
 */
#include <dlfcn.h>
#include <pthread.h>
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
static int g_ver = 11, g_cuda, g_rounds = 2, g_inject = 1, g_late_ms, g_init_fails, g_channels, g_ll;
static size_t g_max = 64u << 20;
static gwt_chan_t pch, cch;
static const char *g_who = "?";
static int g_path_lines, g_warns, g_expect_ok;
static const char *g_expect; /* --expect-transport: every connection must take it */
static int g_streams[2][64], g_nstreams[2]; /* --channels: "N stream(s)" of each path line, by comm kind */
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
        const char *s = strstr(t, "tcp: ");
        int k = strncmp(buf, "recv", 4) == 0; /* the line starts with the comm's kind */
        if (s && g_nstreams[k] < 64 && sscanf(s + 5, "%d stream(s)", &g_streams[k][g_nstreams[k]]) == 1)
            g_nstreams[k]++;
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
/* host <-> GPU copies on a stream of the test's own, never the legacy
 * default stream (--ll runs with it blocked, see the top) */
static CUstream g_stream;
static void dev_copy(void *dst, const void *src, size_t n)
{
    if (!g_stream)
        REQUIRE(g_cu->cuStreamCreate(&g_stream, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    REQUIRE(g_cu->cuMemcpyAsync((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, n, g_stream) ==
            CUDA_SUCCESS);
    REQUIRE(g_cu->cuStreamSynchronize(g_stream) == CUDA_SUCCESS);
}
static void to_buf(void *dst, const void *src, size_t n)
{
    if (!g_cuda)
        memcpy(dst, src, n);
    else if (n)
        dev_copy(dst, src, n);
}
static void from_buf(void *dst, const void *src, size_t n)
{
    if (!g_cuda)
        memcpy(dst, src, n);
    else if (n)
        dev_copy(dst, src, n);
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

/* ---- --ll: NCCL's protocols' buffers, one message at a time -------------------------------------- */
enum { LL_GPU = 0, LL_HOST = 1 };
typedef struct ll_msg {
    size_t len, room; /* message, posted receive */
    int smem, rmem;   /* LL_GPU / LL_HOST on each side */
} ll_msg_t;
#define LL_BIG (2u << 20)     /* Simple buffers */
#define LL_SMALL (256u << 10) /* LL buffers */
static ll_msg_t llm[128];
static int nll;

static void ll_schedule(void)
{
    static const size_t small[] = {8, 16, 0, 8, 1000, 8192, 8193, 65536};
    nll = 0;
    for (int i = 0; i < 52; i++)
        llm[nll++] = (ll_msg_t){1u << 20, 1u << 20, LL_GPU, LL_GPU};
    for (size_t i = 0; i < sizeof(small) / sizeof(small[0]); i++)
        llm[nll++] = (ll_msg_t){small[i], 128u << 10, LL_HOST, LL_GPU};
    llm[nll++] = (ll_msg_t){8, 4096, LL_GPU, LL_HOST};
    llm[nll++] = (ll_msg_t){16, 4096, LL_GPU, LL_HOST};
    llm[nll++] = (ll_msg_t){8, 4096, LL_HOST, LL_HOST};
    llm[nll++] = (ll_msg_t){8, 4096, LL_GPU, LL_GPU};
    llm[nll++] = (ll_msg_t){16, 4096, LL_GPU, LL_GPU};
    for (int i = 0; i < 4; i++)
        llm[nll++] = (ll_msg_t){1u << 20, 1u << 20, LL_GPU, LL_GPU};
    llm[nll++] = (ll_msg_t){8, 4096, LL_HOST, LL_GPU};
}

static void *ll_host_alloc(size_t n)
{
    void *p = NULL;
    REQUIRE(g_cu->cuMemHostAlloc(&p, n, CU_MEMHOSTALLOC_PORTABLE) == CUDA_SUCCESS && p);
    return p;
}

/* copies between any buffer of the run and host memory */
static void ll_copy(void *dst, const void *src, size_t n, int dev)
{
    if (dev)
        dev_copy(dst, src, n);
    else
        memcpy(dst, src, n);
}

static int ll_sender(void *arg)
{
    (void)arg;
    g_who = "send";
    load();
    cuda_setup();
    REQUIRE(d_init() == ncclSuccess);
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    REQUIRE(gwt_chan_recv(&cch, handle, sizeof(handle), 30000) == (int)sizeof(handle));
    void *sc = NULL;
    double end = now_s() + 30;
    while (!sc && now_s() < end)
        REQUIRE(d_connect(handle, &sc) == ncclSuccess);
    REQUIRE(sc);
    CHECK(!g_expect || g_expect_ok == g_path_lines);
    CUdeviceptr g;
    REQUIRE(g_cu->cuMemAlloc(&g, LL_BIG) == CUDA_SUCCESS);
    void *gbuf = (void *)(uintptr_t)g, *hbuf = ll_host_alloc(LL_SMALL), *mg = NULL, *mh = NULL;
    REQUIRE(CALL(regMr, sc, gbuf, LL_BIG, NCCL_PTR_CUDA, &mg) == ncclSuccess);
    REQUIRE(CALL(regMr, sc, hbuf, LL_SMALL, NCCL_PTR_HOST, &mh) == ncclSuccess);
    uint8_t *tmp = malloc(LL_BIG);
    REQUIRE(tmp);
    ll_schedule();
    for (int i = 0; i < nll; i++) {
        const ll_msg_t *m = &llm[i];
        void *buf = m->smem == LL_GPU ? gbuf : hbuf;
        gwt_fill(tmp, m->len, 5000 + (uint64_t)i);
        ll_copy(buf, tmp, m->len, m->smem == LL_GPU);
        void *req = NULL;
        end = now_s() + 30;
        while (!req && now_s() < end)
            REQUIRE(d_isend(sc, buf, m->len, 0, m->smem == LL_GPU ? mg : mh, &req) == ncclSuccess);
        REQUIRE(req);
        int size = -1;
        ncclResult_t r = d_wait(req, &size, 30);
        if (r != ncclSuccess) {
            fprintf(stderr, "[send] message %d (%zu bytes, %s to %s) failed: %d\n", i, m->len,
                    m->smem == LL_GPU ? "GPU" : "host", m->rmem == LL_GPU ? "GPU" : "host", r);
            REQUIRE(!"isend");
        }
        CHECK(size == (int)m->len);
    }
    char ok;
    REQUIRE(gwt_chan_recv(&cch, &ok, 1, 60000) == 1);
    REQUIRE(CALL(deregMr, sc, mg) == ncclSuccess);
    REQUIRE(CALL(deregMr, sc, mh) == ncclSuccess);
    REQUIRE(CALL(closeSend, sc) == ncclSuccess);
    if (n11)
        REQUIRE(n11->finalize(g_ctx) == ncclSuccess);
    free(tmp);
    return gwt_failures ? 1 : 0;
}

static int ll_receiver(void)
{
    g_who = "recv";
    load();
    cuda_setup();
    REQUIRE(d_init() == ncclSuccess);
    int ptr = 0, maxr = 0;
    const char *name = NULL;
    d_props(0, &ptr, &maxr, &name);
    CHECK(ptr & NCCL_PTR_CUDA); /* (the tests set GPUWIRE_NCCL_GPU_BUFFERS=on) */
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    void *lc = NULL, *rc = NULL;
    REQUIRE(d_listen(handle, &lc) == ncclSuccess && lc);
    REQUIRE(gwt_chan_send(&pch, handle, sizeof(handle)) == 0);
    double end = now_s() + 60;
    while (!rc && now_s() < end)
        REQUIRE(CALL(accept, lc, &rc, NULL) == ncclSuccess);
    REQUIRE(rc);
    CHECK(!g_expect || g_expect_ok == g_path_lines);
    CUdeviceptr g, l;
    REQUIRE(g_cu->cuMemAlloc(&g, LL_BIG) == CUDA_SUCCESS && g_cu->cuMemAlloc(&l, LL_SMALL) == CUDA_SUCCESS);
    void *simple = (void *)(uintptr_t)g, *llbuf = (void *)(uintptr_t)l, *hbuf = ll_host_alloc(LL_SMALL);
    void *msimple = NULL, *mll = NULL, *mh = NULL;
    REQUIRE(CALL(regMr, rc, simple, LL_BIG, NCCL_PTR_CUDA, &msimple) == ncclSuccess);
    REQUIRE(CALL(regMr, rc, llbuf, LL_SMALL, NCCL_PTR_CUDA, &mll) == ncclSuccess);
    REQUIRE(CALL(regMr, rc, hbuf, LL_SMALL, NCCL_PTR_HOST, &mh) == ncclSuccess);
    uint8_t *tmp = malloc(LL_BIG);
    REQUIRE(tmp);
    ll_schedule();
    for (int i = 0; i < nll; i++) {
        const ll_msg_t *m = &llm[i];
        int dev = m->rmem == LL_GPU;
        void *buf = !dev ? hbuf : m->room > LL_SMALL ? simple : llbuf;
        void *mr = !dev ? mh : m->room > LL_SMALL ? msimple : mll;
        memset(tmp, 0xee, m->room);
        ll_copy(buf, tmp, m->room, dev);
        void *req = NULL, *data[1] = {buf}, *mhs[1] = {mr};
        size_t sizes[1] = {m->room};
        int tags[1] = {0}, got[1] = {-1};
        end = now_s() + 30;
        while (!req && now_s() < end)
            REQUIRE(d_irecv(rc, 1, data, sizes, tags, mhs, &req) == ncclSuccess);
        REQUIRE(req);
        ncclResult_t r = d_wait(req, got, 30);
        if (r != ncclSuccess) {
            fprintf(stderr, "[recv] message %d (%zu bytes, %s to %s, receive of %zu) failed: %d\n", i, m->len,
                    m->smem == LL_GPU ? "GPU" : "host", dev ? "GPU" : "host", m->room, r);
            REQUIRE(!"irecv");
        }
        CHECK(got[0] == (int)m->len);
        void *flush = (void *)1;
        int isz[1] = {got[0]};
        REQUIRE(CALL(iflush, rc, 1, data, isz, mhs, &flush) == ncclSuccess);
        if (flush)
            REQUIRE(d_wait(flush, NULL, 10) == ncclSuccess);
        ll_copy(tmp, buf, m->len, dev);
        long long bad = gwt_verify(tmp, m->len, 5000 + (uint64_t)i);
        if (bad >= 0) {
            fprintf(stderr, "[recv] message %d (%zu bytes): payload differs at byte %lld\n", i, m->len, bad);
            gwt_failures++;
        }
    }
    fprintf(stderr, "[recv] --ll: %d messages received and checked over %s\n", nll, g_taken);
    REQUIRE(gwt_chan_send(&pch, "k", 1) == 0);
    REQUIRE(CALL(deregMr, rc, msimple) == ncclSuccess);
    REQUIRE(CALL(deregMr, rc, mll) == ncclSuccess);
    REQUIRE(CALL(deregMr, rc, mh) == ncclSuccess);
    REQUIRE(CALL(closeRecv, rc) == ncclSuccess);
    REQUIRE(CALL(closeListen, lc) == ncclSuccess);
    if (n11)
        REQUIRE(n11->finalize(g_ctx) == ncclSuccess);
    free(tmp);
    return 0;
}

/* ---- --channels: NCCL's connection set-up, both sides alike ---------------------------------------- */
#define MAXCH 16
static const size_t ch_size[] = {1u << 20, (4u << 20) + 3};
#define CH_NMSG 2

typedef struct ch_side {
    gwt_chan_t *chan;
    char mine[MAXCH][NCCL_NET_HANDLE_MAXSIZE], theirs[MAXCH][NCCL_NET_HANDLE_MAXSIZE];
    void *lc[MAXCH], *sc[MAXCH], *rc[MAXCH];
    int failed;
} ch_side_t;

/* Thread: connects a send comm to each of the peer's handles. */
static void *ch_connect(void *arg)
{
    ch_side_t *s = arg;
    double end = now_s() + 60;
    for (int c = 0; c < g_channels; c++) {
        while (!s->sc[c] && now_s() < end) {
            if (d_connect(s->theirs[c], &s->sc[c]) != ncclSuccess) {
                fprintf(stderr, "[%s] connect of channel %d failed\n", g_who, c);
                s->failed = 1;
                return NULL;
            }
        }
        if (!s->sc[c]) {
            fprintf(stderr, "[%s] channel %d: no send comm within 60 s\n", g_who, c);
            s->failed = 1;
            return NULL;
        }
    }
    return NULL;
}

/* Thread: accepts a receive comm on each listen comm and closes that listen
 * comm as soon as its accept is done, as NCCL does. */
static void *ch_accept(void *arg)
{
    ch_side_t *s = arg;
    double end = now_s() + 60;
    int left = g_channels;
    while (left && now_s() < end) {
        for (int c = 0; c < g_channels; c++) {
            if (s->rc[c] || !s->lc[c])
                continue;
            if (CALL(accept, s->lc[c], &s->rc[c], NULL) != ncclSuccess) {
                fprintf(stderr, "[%s] accept of channel %d failed\n", g_who, c);
                s->failed = 1;
                return NULL;
            }
            if (s->rc[c]) {
                if (CALL(closeListen, s->lc[c]) != ncclSuccess)
                    s->failed = 1;
                s->lc[c] = NULL;
                left--;
            }
        }
    }
    if (left) {
        fprintf(stderr, "[%s] %d channel(s) not accepted within 60 s\n", g_who, left);
        s->failed = 1;
    }
    return NULL;
}

static int ch_run(gwt_chan_t *chan, const char *who, uint64_t seed_out, uint64_t seed_in)
{
    g_who = who;
    load();
    REQUIRE(d_init() == ncclSuccess);
    int ndev = 0;
    REQUIRE(CALL(devices, &ndev) == ncclSuccess && ndev >= 1);
    static ch_side_t s;
    s.chan = chan;
    for (int c = 0; c < g_channels; c++)
        REQUIRE(d_listen(s.mine[c], &s.lc[c]) == ncclSuccess && s.lc[c]);
    REQUIRE(gwt_chan_send(chan, s.mine, (uint32_t)(g_channels * NCCL_NET_HANDLE_MAXSIZE)) == 0);
    REQUIRE(gwt_chan_recv(chan, s.theirs, sizeof(s.theirs), 30000) == g_channels * NCCL_NET_HANDLE_MAXSIZE);
    pthread_t tc, ta;
    REQUIRE(pthread_create(&tc, NULL, ch_connect, &s) == 0);
    REQUIRE(pthread_create(&ta, NULL, ch_accept, &s) == 0);
    pthread_join(tc, NULL);
    pthread_join(ta, NULL);
    REQUIRE(!s.failed);
    fprintf(stderr, "[%s] %d channel(s) each way connected, listen comms closed\n", who, g_channels);

    size_t per = 0;
    for (int k = 0; k < CH_NMSG; k++)
        per += ch_size[k];
    uint8_t *out = malloc(per * (size_t)g_channels), *in = malloc(per * (size_t)g_channels);
    REQUIRE(out && in);
    memset(in, 0xee, per * (size_t)g_channels);
    void *smh[MAXCH], *rmh[MAXCH];
    void *sreq[MAXCH][CH_NMSG] = {{0}}, *rreq[MAXCH][CH_NMSG] = {{0}};
    int sdone[MAXCH][CH_NMSG] = {{0}}, rdone[MAXCH][CH_NMSG] = {{0}};
    for (int c = 0; c < g_channels; c++) {
        REQUIRE(CALL(regMr, s.sc[c], out + per * c, per, NCCL_PTR_HOST, &smh[c]) == ncclSuccess);
        REQUIRE(CALL(regMr, s.rc[c], in + per * c, per, NCCL_PTR_HOST, &rmh[c]) == ncclSuccess);
        size_t off = 0;
        for (int k = 0; k < CH_NMSG; k++) {
            gwt_fill(out + per * c + off, ch_size[k], seed_out + (uint64_t)c * 10 + k);
            off += ch_size[k];
        }
    }
    int left = 2 * g_channels * CH_NMSG;
    double end = now_s() + 120;
    while (left && now_s() < end) {
        for (int c = 0; c < g_channels; c++) {
            size_t off = 0;
            for (int k = 0; k < CH_NMSG; off += ch_size[k], k++) {
                if (!sdone[c][k]) {
                    if (!sreq[c][k])
                        REQUIRE(d_isend(s.sc[c], out + per * c + off, ch_size[k], k, smh[c], &sreq[c][k]) ==
                                ncclSuccess);
                    int done = 0, size = -1;
                    if (sreq[c][k]) {
                        if (CALL(test, sreq[c][k], &done, &size) != ncclSuccess) {
                            fprintf(stderr, "[%s] channel %d: isend of %zu bytes failed\n", who, c, ch_size[k]);
                            REQUIRE(!"isend");
                        }
                        if (done) {
                            CHECK(size == (int)ch_size[k]);
                            sdone[c][k] = 1;
                            left--;
                        }
                    }
                }
                if (!rdone[c][k]) {
                    if (!rreq[c][k]) {
                        void *data[1] = {in + per * c + off}, *mhs[1] = {rmh[c]};
                        size_t sizes[1] = {ch_size[k]};
                        int tags[1] = {k};
                        REQUIRE(d_irecv(s.rc[c], 1, data, sizes, tags, mhs, &rreq[c][k]) == ncclSuccess);
                    }
                    int done = 0, size[1] = {-1};
                    if (rreq[c][k]) {
                        if (CALL(test, rreq[c][k], &done, size) != ncclSuccess) {
                            fprintf(stderr, "[%s] channel %d: irecv of %zu bytes failed\n", who, c, ch_size[k]);
                            REQUIRE(!"irecv");
                        }
                        if (done) {
                            CHECK(size[0] == (int)ch_size[k]);
                            rdone[c][k] = 1;
                            left--;
                        }
                    }
                }
            }
        }
    }
    REQUIRE(left == 0);
    for (int c = 0; c < g_channels; c++) {
        size_t off = 0;
        for (int k = 0; k < CH_NMSG; off += ch_size[k], k++) {
            long long bad = gwt_verify(in + per * c + off, ch_size[k], seed_in + (uint64_t)c * 10 + k);
            if (bad >= 0)
                fprintf(stderr, "[%s] channel %d: the %zu-byte message differs at byte %lld\n", who, c, ch_size[k],
                        bad);
            CHECK(bad < 0);
        }
    }
    /* both kinds of comm report the same number of streams (the sender's
     * endpoint is another process's receiver) */
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < g_nstreams[k]; i++)
            if (g_streams[k][i] != g_streams[0][0]) {
                fprintf(stderr, "[%s] a %s comm reports %d stream(s), the first send comm %d\n", who,
                        k ? "recv" : "send", g_streams[k][i], g_streams[0][0]);
                gwt_failures++;
            }
    const char *want = getenv("GPUWIRE_TCP_STREAMS");
    if (want && g_nstreams[0]) {
        fprintf(stderr, "[%s] every comm reports %d stream(s) (GPUWIRE_TCP_STREAMS=%s)\n", who, g_streams[0][0],
                want);
        CHECK(g_streams[0][0] == atoi(want));
    }
    REQUIRE(gwt_chan_send(chan, "k", 1) == 0); /* neither closes before the other checked */
    char ok;
    REQUIRE(gwt_chan_recv(chan, &ok, 1, 60000) == 1);
    for (int c = 0; c < g_channels; c++) {
        CHECK(CALL(deregMr, s.sc[c], smh[c]) == ncclSuccess);
        CHECK(CALL(deregMr, s.rc[c], rmh[c]) == ncclSuccess);
        CHECK(CALL(closeSend, s.sc[c]) == ncclSuccess);
        CHECK(CALL(closeRecv, s.rc[c]) == ncclSuccess);
    }
    if (n11)
        REQUIRE(n11->finalize(g_ctx) == ncclSuccess);
    free(out);
    free(in);
    return gwt_failures ? 1 : 0;
}

static int ch_child(void *arg)
{
    (void)arg;
    return ch_run(&cch, "ch-b", 2000, 1000);
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
        else if (!strcmp(argv[i], "--ll"))
            g_ll = g_cuda = 1;
        else if (!strcmp(argv[i], "--channels") && i + 1 < argc)
            g_channels = atoi(argv[++i]);
        else {
            fprintf(stderr, "unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    REQUIRE(g_ver >= 8 && g_ver <= 12 && g_max >= 16 && g_rounds >= 1 && g_channels >= 0 && g_channels <= MAXCH);
    if (g_channels) {
        REQUIRE(!g_cuda);
        REQUIRE(gwt_chan_pair(&pch, &cch) == 0);
        int pid = gwt_spawn(ch_child, NULL);
        REQUIRE(pid > 0);
        ch_run(&pch, "ch-a", 1000, 2000);
        int crc = gwt_wait(pid, 300);
        if (crc != 0) {
            fprintf(stderr, "the other process exited with %d\n", crc);
            gwt_failures++;
        }
        return gwt_done("nccl_driver --channels");
    }
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
    if (g_ll) {
        int lpid = gwt_spawn(ll_sender, NULL);
        REQUIRE(lpid > 0);
        ll_receiver();
        int crc = gwt_wait(lpid, 300);
        if (crc != 0) {
            fprintf(stderr, "sender exited with %d\n", crc);
            gwt_failures++;
        }
        return gwt_done("nccl_driver --ll");
    }
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
