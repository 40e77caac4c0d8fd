/* SPDX-License-Identifier: Apache-2.0 */
/* util.h - small helpers shared by every layer (core layer). */
#ifndef GW_CORE_UTIL_H
#define GW_CORE_UTIL_H

#include <stdint.h>
#include <string.h>
#include <time.h>

#define GW_MIN(a, b) ((a) < (b) ? (a) : (b))
#define GW_MAX(a, b) ((a) > (b) ? (a) : (b))
#define GW_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define GW_LIKELY(x) __builtin_expect(!!(x), 1)
#define GW_UNLIKELY(x) __builtin_expect(!!(x), 0)

static inline uint64_t gw_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* now - then, 0 where then is later than now (a stamp taken by another
 * thread, or from the coarse clock, can follow a clock read). */
static inline uint64_t gw_elapsed_ns(uint64_t now, uint64_t then)
{
    return now > then ? now - then : 0;
}

/* The same clock at tick resolution (1-4 ms), never later than gw_now_ns().
 * It is read from the vDSO's data page without touching the clock hardware,
 * so it stays cheap where CLOCK_MONOTONIC falls back to a system call (a
 * guest whose clock source has no vDSO mode, e.g. under emulation).  For
 * stamps compared with second-scale timeouts (peer liveness) on hot paths. */
static inline uint64_t gw_now_coarse_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Little-endian encoders for wire formats (never memcpy structs).  One
 * unaligned load or store on a little-endian host (these run on every
 * message header and key lookup), a byte swap on a big-endian one. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define GW_LE16(v) __builtin_bswap16(v)
#define GW_LE32(v) __builtin_bswap32(v)
#define GW_LE64(v) __builtin_bswap64(v)
#else
#define GW_LE16(v) (v)
#define GW_LE32(v) (v)
#define GW_LE64(v) (v)
#endif
static inline void gw_put_u16(uint8_t *p, uint16_t v)
{
    v = GW_LE16(v);
    memcpy(p, &v, sizeof(v));
}
static inline void gw_put_u32(uint8_t *p, uint32_t v)
{
    v = GW_LE32(v);
    memcpy(p, &v, sizeof(v));
}
static inline void gw_put_u64(uint8_t *p, uint64_t v)
{
    v = GW_LE64(v);
    memcpy(p, &v, sizeof(v));
}
static inline uint16_t gw_get_u16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof(v));
    return GW_LE16(v);
}
static inline uint32_t gw_get_u32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof(v));
    return GW_LE32(v);
}
static inline uint64_t gw_get_u64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    return GW_LE64(v);
}

/* A reproducible test pattern (tests, `gpuwire perf --check`): fill writes
 * it for seed; verify returns the offset of the first byte that differs, or
 * -1 when the whole buffer matches. */
void gw_pattern_fill(void *buf, size_t len, uint64_t seed);
long long gw_pattern_verify(const void *buf, size_t len, uint64_t seed);

/* Fills buf with random bytes (getrandom, falling back to time^pid mixing). */
void gw_random_bytes(void *buf, size_t len);
/* A stable identifier of this host (boot id, else hostname), hashed. */
uint64_t gw_host_id(void);

#endif
