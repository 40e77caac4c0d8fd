/* SPDX-License-Identifier: Apache-2.0 */
/* util.c - randomness and host identity. */
#include "util.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/random.h>
#include <unistd.h>

static uint64_t fnv1a(const void *data, size_t len)
{
    const uint8_t *p = data;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

void gw_random_bytes(void *buf, size_t len)
{
    uint8_t *p = buf;
    size_t got = 0;
    while (got < len) {
        ssize_t n = getrandom(p + got, len - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    if (got < len) { /* no entropy source: still unique enough for ids */
        uint64_t x = gw_now_ns() ^ ((uint64_t)getpid() << 32);
        for (; got < len; got++) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            p[got] = (uint8_t)x;
        }
    }
}

uint64_t gw_host_id(void)
{
    char buf[256] = {0};
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    ssize_t n = -1;
    if (fd >= 0) {
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
    }
    if (n <= 0) {
        gethostname(buf, sizeof(buf) - 1);
        n = (ssize_t)strlen(buf);
    }
    return fnv1a(buf, (size_t)n);
}

static inline uint64_t pattern_word(uint64_t x) /* splitmix64 finaliser */
{
    x ^= x >> 31;
    x *= 0x7fb5d329728ea185ull;
    x ^= x >> 27;
    x *= 0x81dadef4bc2dd44dull;
    x ^= x >> 33;
    return x;
}

/* Whole words by fixed-size copies (compiled to plain loads and stores:
 * tests fill and check GiB buffers with these), then the tail. */
void gw_pattern_fill(void *buf, size_t len, uint64_t seed)
{
    uint8_t *p = buf;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t v = pattern_word(seed + i);
        memcpy(p + i, &v, 8);
    }
    if (i < len) {
        uint64_t v = pattern_word(seed + i);
        memcpy(p + i, &v, len - i);
    }
}

long long gw_pattern_verify(const void *buf, size_t len, uint64_t seed)
{
    const uint8_t *p = buf;
    for (size_t i = 0; i < len; i += 8) {
        uint64_t v = pattern_word(seed + i);
        size_t n = len - i < 8 ? len - i : 8;
        if (n == 8) {
            uint64_t w;
            memcpy(&w, p + i, 8);
            if (w == v)
                continue;
        }
        for (size_t j = 0; j < n; j++)
            if (p[i + j] != ((const uint8_t *)&v)[j])
                return (long long)(i + j);
    }
    return -1;
}
