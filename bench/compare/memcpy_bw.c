/* SPDX-License-Identifier: Apache-2.0 */
/* memcpy_bw.c - the reference of bench/compare/alloc_bw.sh: one thread copying SIZE
 * bytes from one buffer to another, again and again for SECONDS, both
 * buffers shared memory as gw_mem_alloc makes it (a memfd mapped
 * MAP_SHARED, touched before the clock starts).  Prints GB/s (1e9 bytes).
 * usage: memcpy_bw SIZE SECONDS */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void *shared(size_t len)
{
    int fd = memfd_create("memcpy_bw", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)len) != 0) {
        perror("memcpy_bw: memfd");
        exit(1);
    }
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        perror("memcpy_bw: mmap");
        exit(1);
    }
    memset(p, 0x5a, len);
    return p;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: memcpy_bw SIZE SECONDS\n");
        return 2;
    }
    size_t n = strtoull(argv[1], NULL, 0);
    double secs = atof(argv[2]);
    if (n == 0 || secs <= 0) {
        fprintf(stderr, "memcpy_bw: SIZE and SECONDS must be positive\n");
        return 2;
    }
    char *src = shared(n), *dst = shared(n);
    unsigned long it = 0;
    double t0 = now_s(), t = 0;
    do {
        for (int k = 0; k < 8; k++) { /* the clock every 8 copies */
            memcpy(dst, src, n);
            __asm__ volatile("" : : "r"(dst) : "memory"); /* the copy is not dead */
            it++;
        }
        t = now_s() - t0;
    } while (t < secs);
    printf("%.6f\n", (double)n * (double)it / t / 1e9);
    return 0;
}
