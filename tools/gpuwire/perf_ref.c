/* SPDX-License-Identifier: Apache-2.0 */
/* perf_ref.c - `gpuwire perf --reference`: what this machine does without
 * gpuwire, measured after the table, so that its figures can be judged here:
 * memcpy bandwidth of the largest size in one thread (the ceiling for a
 * host-memory copy between two processes), and the one-way latency of a
 * one-byte pipe ping-pong between two processes (what waking a sleeping
 * peer costs through the kernel). */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "perf.h"

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

double perf_ref_memcpy_GBps(size_t size)
{
    if (size < 4096)
        size = 4096;
    char *a = malloc(size), *b = malloc(size);
    if (!a || !b) {
        free(a);
        free(b);
        return 0.0;
    }
    memset(a, 1, size);
    memset(b, 2, size);
    uint64_t bytes = 0, t0 = perf_now_ns(), t;
    do {
        memcpy(b, a, size);
        __asm__ volatile("" ::"r"(b) : "memory"); /* the copy is used */
        bytes += size;
        t = perf_now_ns();
    } while (t - t0 < 200000000ull || bytes < 4 * (uint64_t)size);
    free(a);
    free(b);
    return (double)bytes / (double)(t - t0);
}

double perf_ref_pipe_us(void)
{
    enum { N = 2000 };
    int ab[2], ba[2];
    if (pipe(ab) != 0)
        return 0.0;
    if (pipe(ba) != 0) {
        close(ab[0]);
        close(ab[1]);
        return 0.0;
    }
    pid_t pid = fork();
    if (pid < 0)
        return 0.0;
    char c = 0;
    if (pid == 0) {
        close(ab[1]);
        close(ba[0]);
        while (read(ab[0], &c, 1) == 1 && write(ba[1], &c, 1) == 1)
            ;
        _exit(0);
    }
    close(ab[0]);
    close(ba[1]);
    static uint64_t rt[N];
    int n = 0;
    for (int i = 0; i < N + 100; i++) {
        uint64_t t0 = perf_now_ns();
        if (write(ab[1], &c, 1) != 1 || read(ba[0], &c, 1) != 1)
            break;
        if (i >= 100) /* warm-up */
            rt[n++] = perf_now_ns() - t0;
    }
    close(ab[1]);
    close(ba[0]);
    waitpid(pid, NULL, 0);
    if (!n)
        return 0.0;
    qsort(rt, (size_t)n, sizeof(rt[0]), cmp_u64);
    return (double)rt[n / 2] / 2.0 / 1000.0;
}
