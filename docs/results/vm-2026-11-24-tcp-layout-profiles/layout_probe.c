/* layout_probe.c - what the kernel's own copies cost for scattered memory,
 * without gpuwire: two processes on TCP loopback move OPS x 64 MiB in 1 MiB
 * sendmsg()/recvmsg() calls whose iovecs are
 *   mode 0: one contiguous 1 MiB piece,
 *   mode 1: 16 KiB (ES KiB) pieces with an equal gap after each (the layout
 *           of `gpuwire perf --batch 4096 --size 16K`),
 *   mode 2: the same 16 KiB pieces, adjacent (no gap),
 * and print each side's CPU time (getrusage).  THP=1: the buffer is
 * madvise(MADV_HUGEPAGE)d (2 MiB pages where the kernel gives them).
 * build: cc -O2 -o layout_probe layout_probe.c
 * usage: ./layout_probe SEND_MODE RECV_MODE ES_KIB OPS   e.g. ./layout_probe 1 1 16 20 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TOT (64u << 20)
#define FRAME (1u << 20)

static double wall(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static double cpu(void)
{
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return r.ru_utime.tv_sec + r.ru_utime.tv_usec * 1e-6 + r.ru_stime.tv_sec + r.ru_stime.tv_usec * 1e-6;
}

/* the iovecs of the frame at byte off of the stream */
static int layout(struct iovec *iov, char *buf, int mode, size_t es, size_t off)
{
    if (mode == 0) {
        iov[0] = (struct iovec){buf + off, FRAME};
        return 1;
    }
    int n = 0;
    for (size_t o = 0; o < FRAME; o += es)
        iov[n++] = (struct iovec){buf + (mode == 2 ? 1 : 2) * (off + o), es};
    return n;
}

/* moves one frame whole, however the calls split it */
static void move(int s, struct iovec *iov, int n, int tx)
{
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
    size_t left = FRAME;
    while (left) {
        ssize_t r = tx ? sendmsg(s, &mh, 0) : recvmsg(s, &mh, MSG_WAITALL);
        if (r <= 0) {
            perror(tx ? "sendmsg" : "recvmsg");
            exit(1);
        }
        left -= (size_t)r;
        while (r > 0 && mh.msg_iovlen) {
            if ((size_t)r >= mh.msg_iov[0].iov_len) {
                r -= (ssize_t)mh.msg_iov[0].iov_len;
                mh.msg_iov++;
                mh.msg_iovlen--;
            } else {
                mh.msg_iov[0].iov_base = (char *)mh.msg_iov[0].iov_base + r;
                mh.msg_iov[0].iov_len -= (size_t)r;
                r = 0;
            }
        }
    }
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: %s SEND_MODE RECV_MODE ES_KIB OPS\n", argv[0]);
        return 2;
    }
    int smode = atoi(argv[1]), rmode = atoi(argv[2]), ops = atoi(argv[4]);
    size_t es = (size_t)atoi(argv[3]) * 1024;
    if (es == 0 || FRAME % es || FRAME / es > 1024) {
        fprintf(stderr, "ES_KIB must divide 1024 and be at least 1\n");
        return 2;
    }
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001)};
    socklen_t al = sizeof(a);
    if (bind(ls, (void *)&a, sizeof(a)) || listen(ls, 1) || getsockname(ls, (void *)&a, &al)) {
        perror("listen");
        return 1;
    }
    pid_t p = fork();
    char *buf;
    if (posix_memalign((void **)&buf, 2u << 20, 2 * (size_t)TOT))
        return 1;
    if (getenv("THP"))
        madvise(buf, 2 * (size_t)TOT, MADV_HUGEPAGE);
    memset(buf, 1, 2 * (size_t)TOT);
    struct iovec iov[1024];
    int s;
    if (p == 0) {
        s = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(s, (void *)&a, sizeof(a))) {
            perror("connect");
            return 1;
        }
        double c0 = cpu();
        for (int k = 0; k < ops; k++) {
            for (size_t off = 0; off < TOT; off += FRAME)
                move(s, iov, layout(iov, buf, rmode, es, off), 0);
            if (write(s, "", 1) != 1) /* the op's end */
                return 1;
        }
        printf("recv mode %d: %.3f s CPU\n", rmode, cpu() - c0);
        return 0;
    }
    s = accept(ls, NULL, NULL);
    double t0 = wall(), c0 = cpu();
    for (int k = 0; k < ops; k++) {
        for (size_t off = 0; off < TOT; off += FRAME)
            move(s, iov, layout(iov, buf, smode, es, off), 1);
        char c;
        if (read(s, &c, 1) != 1)
            return 1;
    }
    double t = wall() - t0, cc = cpu() - c0;
    int st;
    fflush(stdout);
    waitpid(p, &st, 0);
    printf("send mode %d, %zu KiB pieces: %.2f GB/s, %.3f s CPU\n", smode, es / 1024, (double)TOT * ops / t / 1e9, cc);
    return 0;
}
