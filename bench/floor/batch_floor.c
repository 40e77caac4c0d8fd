/* SPDX-License-Identifier: Apache-2.0 */
/* batch_floor.c - what this machine itself gives a scattered transfer
 * against a contiguous one, with no gpuwire: the layout of `gpuwire perf
 * --batch N --size S` (N entries of S bytes, entry i at 2*i*S on both
 * sides, a gap of S after each) moved the way each gpuwire transport moves
 * host memory, against the same N*S bytes moved as one piece the same way.
 * The ratio is the floor under the batch goals on this machine: a
 * library that adds nothing to the kernel's or the CPU's own work reaches
 * it, none can beat it by moving the same bytes the same way.
 *
 *   copy  memcpy per entry from private memory into a shared memfd mapping
 *         (intra into gw_mem_alloc memory), against one memcpy;
 *   cma   process_vm_writev into a child's memory, an iovec pair per entry
 *         (at most IOV_MAX per call; intra with registered memory, where the
 *         kernel pins each remote iovec's pages in a round of its own),
 *         against one iovec pair;
 *   ring  the entries copied into 36 KiB slots of a shared memfd with
 *         streaming stores, a spinning child copying each slot out into its
 *         own memory as it is posted (intra's ring into registered memory,
 *         src/transport/intra/intra_ring.c, without descriptors' checks),
 *         against one process_vm_writev of one piece (intra's contiguous
 *         put into the same memory);
 *   tcp   TCP loopback to a child: sendmsg() over the entries' iovecs, the
 *         child recvmsg()s into its entries and answers one byte per
 *         transfer (gpuwire's tcp: an acknowledgement per put), against
 *         send()/recv() of one piece.  Both sockets use cubic, as gpuwire's
 *         local connections do (GPUWIRE_TCP_CONGESTION).
 *
 * One transfer in flight at a time; REPS rounds of SECONDS each, scattered
 * and contiguous alternating; prints the best rate of each (as
 * bench/compare/batch.sh takes the best of its runs) and their ratio:
 *   "floor MODE N S scattered_GBps contiguous_GBps ratio"
 * usage: cc -O2 -o batch_floor bench/floor/batch_floor.c && ./batch_floor MODE N S [SECONDS [REPS]] */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <stdatomic.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#ifndef IOV_MAX
#define IOV_MAX 1024
#endif

static size_t N, S;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void die(const char *what)
{
    fprintf(stderr, "batch_floor: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void *touched(size_t len, int shared)
{
    void *p;
    if (shared) {
        int fd = memfd_create("batch_floor", 0);
        if (fd < 0 || ftruncate(fd, (off_t)len) != 0)
            die("memfd");
        p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
    } else
        p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        die("mmap");
    memset(p, 7, len);
    return p;
}

/* the entries' iovecs over base (scattered) or one piece (contiguous) */
static int iovs(struct iovec *v, uint8_t *base, int scattered)
{
    if (!scattered) {
        v[0] = (struct iovec){base, N * S};
        return 1;
    }
    for (size_t i = 0; i < N; i++)
        v[i] = (struct iovec){base + 2 * i * S, S};
    return (int)N;
}

/* ---- modes: one transfer each ---- */
static uint8_t *src, *dst;
static struct iovec *lv[2], *rv[2];
static int nv[2];
static pid_t child;
static int sock;

static void copy_xfer(int scattered)
{
    if (!scattered) {
        memcpy(dst, src, N * S);
        return;
    }
    for (size_t i = 0; i < N; i++)
        memcpy(dst + 2 * i * S, src + 2 * i * S, S);
}

static void cma_xfer(int scattered)
{
    int n = nv[scattered];
    for (int i = 0; i < n; i += IOV_MAX) {
        int k = n - i < IOV_MAX ? n - i : IOV_MAX;
        if (process_vm_writev(child, lv[scattered] + i, (unsigned long)k, rv[scattered] + i, (unsigned long)k, 0) < 0)
            die("process_vm_writev");
    }
}

/* ring: slots of RSLOT bytes in a shared mapping, a state word per slot
 * (0 free, 1 posted, 2 done); slot data: entries at 16-byte steps */
#define RSLOTS 64
#define RSLOT (36u << 10)
static _Atomic uint32_t *rstate;
static uint8_t *rdata;
static unsigned rpost, rreap;

static void nt_copy(uint8_t *d, const uint8_t *s, size_t n)
{
#if defined(__x86_64__)
    size_t k = n & ~(size_t)15;
    for (size_t i = 0; i < k; i += 16)
        _mm_stream_si128((__m128i *)(void *)(d + i), _mm_loadu_si128((const __m128i *)(const void *)(s + i)));
    memcpy(d + k, s + k, n - k);
#else
    memcpy(d, s, n);
#endif
}

static void ring_reap(int wait_all)
{
    while (rreap != rpost && (wait_all || rpost - rreap == RSLOTS)) {
        _Atomic uint32_t *st = &rstate[(rreap % RSLOTS) * 16];
        if (atomic_load_explicit(st, memory_order_acquire) == 2) {
            atomic_store_explicit(st, 0, memory_order_relaxed);
            rreap++;
        }
    }
}

static void ring_xfer(int scattered)
{
    if (!scattered) {
        struct iovec l = {src, N * S}, r = {dst, N * S};
        if (process_vm_writev(child, &l, 1, &r, 1, 0) < 0)
            die("process_vm_writev");
        return;
    }
    size_t step = (S + 15) & ~(size_t)15, per = RSLOT / step;
    for (size_t e = 0; e < N;) {
        ring_reap(0);
        unsigned si = rpost % RSLOTS;
        uint8_t *p = rdata + (size_t)si * RSLOT;
        size_t k = 0;
        for (; k < per && e < N; k++, e++)
            nt_copy(p + k * step, src + 2 * e * S, S);
#if defined(__x86_64__)
        _mm_sfence();
#endif
        rstate[si * 16 + 1] = (uint32_t)k;
        rstate[si * 16 + 2] = (uint32_t)(e - k);
        atomic_store_explicit(&rstate[si * 16], 1, memory_order_release);
        rpost++;
    }
    ring_reap(1);
}

static void ring_child(void)
{
    size_t step = (S + 15) & ~(size_t)15;
    for (unsigned i = 0;; i++) {
        unsigned si = i % RSLOTS;
        _Atomic uint32_t *st = &rstate[si * 16];
        while (atomic_load_explicit(st, memory_order_acquire) != 1)
            if (getppid() == 1)
                _exit(0);
        size_t k = rstate[si * 16 + 1], e0 = rstate[si * 16 + 2];
        const uint8_t *p = rdata + (size_t)si * RSLOT;
        for (size_t j = 0; j < k; j++)
            memcpy(dst + 2 * (e0 + j) * S, p + j * step, S);
        atomic_store_explicit(st, 2, memory_order_release);
    }
}

/* every byte of v[0..n) through sendmsg/recvmsg, IOV_MAX iovecs a call */
static void sock_all(int fd, struct iovec *v, int n, int rx)
{
    struct iovec cur[IOV_MAX];
    int i = 0;
    size_t skip = 0;
    while (i < n) {
        int k = 0;
        for (int j = i; j < n && k < IOV_MAX; j++, k++)
            cur[k] = v[j];
        cur[0].iov_base = (uint8_t *)cur[0].iov_base + skip;
        cur[0].iov_len -= skip;
        struct msghdr m = {.msg_iov = cur, .msg_iovlen = (size_t)k};
        ssize_t r = rx ? recvmsg(fd, &m, 0) : sendmsg(fd, &m, 0);
        if (r <= 0) {
            if (r < 0 && errno == EINTR)
                continue;
            if (rx && r == 0)
                exit(0); /* the sender is done */
            die(rx ? "recvmsg" : "sendmsg");
        }
        size_t left = (size_t)r + skip;
        while (i < n && left >= v[i].iov_len) {
            left -= v[i].iov_len;
            i++;
        }
        skip = left;
    }
}

static void tcp_xfer(int scattered)
{
    uint8_t tag = (uint8_t)scattered, ack;
    if (write(sock, &tag, 1) != 1)
        die("write");
    sock_all(sock, lv[scattered], nv[scattered], 0);
    if (read(sock, &ack, 1) != 1)
        die("read ack");
}

static void tcp_child(int fd)
{
    for (;;) {
        uint8_t tag;
        ssize_t r = read(fd, &tag, 1);
        if (r <= 0)
            exit(0);
        sock_all(fd, rv[tag], nv[tag], 1);
        if (write(fd, &tag, 1) != 1)
            exit(1);
    }
}

static void cubic(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, "cubic", 5); /* where it is not there: the default */
}

static void tcp_setup(void)
{
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(ls, 1) != 0 ||
        getsockname(ls, (struct sockaddr *)&a, &al) != 0)
        die("listen");
    child = fork();
    if (child < 0)
        die("fork");
    if (child == 0) {
        int fd = accept(ls, NULL, NULL);
        if (fd < 0)
            die("accept");
        cubic(fd);
        tcp_child(fd);
    }
    close(ls);
    sock = socket(AF_INET, SOCK_STREAM, 0);
    cubic(sock);
    if (sock < 0 || connect(sock, (struct sockaddr *)&a, sizeof(a)) != 0)
        die("connect");
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: batch_floor copy|cma|ring|tcp N SIZE [SECONDS [REPS]]\n");
        return 2;
    }
    const char *mode = argv[1];
    N = strtoul(argv[2], NULL, 0);
    char *sfx = NULL;
    S = strtoul(argv[3], &sfx, 0);
    if (sfx && (*sfx == 'K' || *sfx == 'k'))
        S <<= 10;
    else if (sfx && (*sfx == 'M' || *sfx == 'm'))
        S <<= 20;
    double secs = argc > 4 ? strtod(argv[4], NULL) : 1.0;
    int reps = argc > 5 ? atoi(argv[5]) : 3;
    if (!N || !S || secs <= 0 || reps < 1) {
        fprintf(stderr, "batch_floor: N, SIZE, SECONDS and REPS must be positive\n");
        return 2;
    }
    size_t len = 2 * N * S;
    void (*xfer)(int);
    src = touched(len, 0);
    for (int k = 0; k < 2; k++) {
        lv[k] = calloc(N, sizeof(struct iovec));
        rv[k] = calloc(N, sizeof(struct iovec));
        if (!lv[k] || !rv[k])
            die("calloc");
    }
    if (!strcmp(mode, "copy")) {
        dst = touched(len, 1);
        xfer = copy_xfer;
    } else if (!strcmp(mode, "ring")) {
        if (S > 16384) {
            fprintf(stderr, "batch_floor: ring takes entries of at most 16 KiB (as gpuwire's ring)\n");
            return 2;
        }
        dst = touched(len, 0);
        uint8_t *sh = touched(4096 + (size_t)RSLOTS * RSLOT, 1);
        memset(sh, 0, 4096);
        rstate = (_Atomic uint32_t *)(void *)sh; /* a 64-byte line per slot */
        rdata = sh + 4096;
        child = fork();
        if (child == 0) {
            memset(dst, 9, len);
            ring_child();
        }
        usleep(100000);
        xfer = ring_xfer;
    } else if (!strcmp(mode, "cma") || !strcmp(mode, "tcp")) {
        dst = touched(len, 0); /* the child's copy after fork: its own pages once it writes them */
        for (int k = 0; k < 2; k++) {
            nv[k] = iovs(lv[k], src, k);
            iovs(rv[k], dst, k);
        }
        if (!strcmp(mode, "cma")) {
            int p[2];
            if (pipe(p) != 0)
                die("pipe");
            child = fork();
            if (child == 0) {
                close(p[1]);
                memset(dst, 9, len); /* pages of its own */
                char c;
                while (read(p[0], &c, 1) < 0 && errno == EINTR)
                    ;
                _exit(0);
            }
            close(p[0]);
            sock = p[1];
            usleep(100000); /* let the child write its pages first */
            xfer = cma_xfer;
        } else {
            tcp_setup();
            xfer = tcp_xfer;
        }
    } else {
        fprintf(stderr, "batch_floor: mode %s (copy, cma, ring or tcp)\n", mode);
        return 2;
    }
    double best[2] = {0, 0};
    for (int r = 0; r < reps; r++)
        for (int k = 1; k >= 0; k--) { /* scattered, then contiguous */
            xfer(k); /* warm */
            uint64_t ops = 0;
            double t0 = now(), t;
            do {
                xfer(k);
                ops++;
            } while ((t = now() - t0) < secs);
            double gbps = (double)ops * (double)(N * S) / t / 1e9;
            best[k] = gbps > best[k] ? gbps : best[k];
        }
    printf("floor %s %zu %zu %.6f %.6f %.3f\n", mode, N, S, best[1], best[0], best[1] / best[0]);
    if (child > 0) {
        if (sock > 0)
            close(sock);
        kill(child, SIGTERM);
        waitpid(child, NULL, 0);
    }
    return 0;
}
