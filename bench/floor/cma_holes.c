/* SPDX-License-Identifier: Apache-2.0 */
/* cma_holes.c - what reading through remote holes costs a batched CMA get
 * (intra_batch.c, INTRAB_HOLE), with no gpuwire involved: N entries of S
 * bytes, H bytes apart in a child process, read by one process_vm_readv
 *  - per entry: one remote and one local iovec per entry (the kernel pins
 *    the pages of every remote iovec in a round of its own),
 *  - holes: one remote iovec over the whole run, local iovecs alternating
 *    entry and a sink for the hole's bytes,
 *  - contiguous: the same bytes as one range on both sides (the reference),
 * best of REPS each, side by side in one run.
 * usage: cc -O2 -o /tmp/cma_holes bench/floor/cma_holes.c && /tmp/cma_holes N S H [REPS]
 *        (N + N - 1 <= 1024: one call) */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s N ENTRY_BYTES HOLE_BYTES [REPS]\n", argv[0]);
        return 2;
    }
    size_t n = strtoul(argv[1], NULL, 0), sz = strtoul(argv[2], NULL, 0), hole = strtoul(argv[3], NULL, 0);
    int reps = argc > 4 ? atoi(argv[4]) : 1000;
    if (!n || !sz || 2 * n - 1 > 1024 || reps < 1) {
        fprintf(stderr, "cma_holes: N must be 1..512, ENTRY_BYTES > 0, REPS > 0\n");
        return 2;
    }
    size_t stride = sz + hole, span = n * stride;
    char *rb = malloc(span), *lb = malloc(span), *sink = malloc(hole ? hole : 1);
    struct iovec *l = calloc(2 * n, sizeof(*l)), *r = calloc(2 * n, sizeof(*r));
    if (!rb || !lb || !sink || !l || !r) {
        fprintf(stderr, "cma_holes: out of memory\n");
        return 1;
    }
    memset(rb, 1, span); /* the child inherits these pages, touched */
    pid_t child = fork();
    if (child < 0) {
        perror("fork");
        return 1;
    }
    if (child == 0) {
        pause();
        _exit(0);
    }
    memset(lb, 0, span);
    static const char *name[3] = {"per entry", "holes", "contiguous"};
    double best[3];
    for (int m = 0; m < 3; m++) {
        int nl = 0, nr = 0;
        if (m == 0) {
            for (size_t i = 0; i < n; i++) {
                l[nl++] = (struct iovec){lb + i * stride, sz};
                r[nr++] = (struct iovec){rb + i * stride, sz};
            }
        } else if (m == 1) {
            for (size_t i = 0; i < n; i++) {
                l[nl++] = (struct iovec){lb + i * stride, sz};
                if (i + 1 < n && hole)
                    l[nl++] = (struct iovec){sink, hole};
            }
            r[nr++] = (struct iovec){rb, span - hole};
        } else {
            l[nl++] = (struct iovec){lb, n * sz};
            r[nr++] = (struct iovec){rb, n * sz};
        }
        best[m] = 1e9;
        for (int k = 0; k < reps; k++) {
            double t = now();
            if (process_vm_readv(child, l, (unsigned long)nl, r, (unsigned long)nr, 0) < 0) {
                perror("process_vm_readv");
                kill(child, SIGKILL);
                return 1;
            }
            t = now() - t;
            best[m] = t < best[m] ? t : best[m];
        }
    }
    printf("n=%zu entry=%zu hole=%zu:", n, sz, hole);
    for (int m = 0; m < 3; m++)
        printf(" %s %.1f us,", name[m], best[m] * 1e6);
    printf(" holes/per-entry speed-up %.2fx\n", best[0] / best[1]);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    return 0;
}
