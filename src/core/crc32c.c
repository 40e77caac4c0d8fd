/* SPDX-License-Identifier: Apache-2.0 */
/* crc32c.c - CRC32C of host memory (core layer; crc32c.h).
 *
 * Both paths keep the register in the reflected form of the polynomial
 * 0x1EDC6F41 (0x82F63B78), inverted before and after, as RFC 3720 defines
 * the checksum.
 *
 * Instruction path: the crc32 instruction takes 8 bytes a cycle but gives
 * its result only 3 cycles later, so one chain of it runs at a third of its
 * rate.  Three chains run over three adjacent blocks of equal length n;
 * their registers are then joined: a register r that has still n bytes to
 * go ends as r * x^(8n) mod P (the bytes' own part being the next chain's
 * register, which started at 0), a carry-less product that is linear in r:
 * four tables per block length, made once, turn it into four lookups. */
#include <pthread.h>
#include <string.h>

#include "core/crc32c.h"

#define POLY 0x82f63b78u

static uint32_t g_tab[8][256];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* block lengths of the three-chain loops, and their joining constants */
#define LONG_BLOCK 8192u
#define SHORT_BLOCK 256u
/* r * x^(8n) mod P is linear in r: four tables per block length n, one per
 * byte of r, make it four lookups */
static uint32_t g_shift_long[4][256], g_shift_short[4][256];
static int g_hw;

/* a * b mod P, both in the reflected form (bit 31 is x^0) */
static uint32_t mulmod(uint32_t a, uint32_t b)
{
    uint32_t p = 0;
    for (int i = 31; i >= 0; i--) {
        if (a & (1u << i))
            p ^= b;
        b = (b & 1) ? (b >> 1) ^ POLY : b >> 1;
    }
    return p;
}

/* x^(8n) mod P in the reflected form */
static uint32_t xpow8n(uint32_t n)
{
    uint32_t v = 0x80000000u; /* x^0 */
    for (uint64_t i = 0; i < 8ull * n; i++)
        v = (v & 1) ? (v >> 1) ^ POLY : v >> 1;
    return v;
}

static void init_once(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ POLY : c >> 1;
        g_tab[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            g_tab[t][i] = (g_tab[t - 1][i] >> 8) ^ g_tab[0][g_tab[t - 1][i] & 0xff];
    uint32_t kl = xpow8n(LONG_BLOCK), ks = xpow8n(SHORT_BLOCK);
    for (int j = 0; j < 4; j++)
        for (uint32_t b = 0; b < 256; b++) {
            g_shift_long[j][b] = mulmod(kl, b << (8 * j));
            g_shift_short[j][b] = mulmod(ks, b << (8 * j));
        }
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    g_hw = __builtin_cpu_supports("sse4.2") != 0;
#else
    g_hw = 0;
#endif
}

static inline uint64_t load64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

uint32_t gw_crc32c_table(uint32_t crc, const void *buf, size_t len)
{
    pthread_once(&g_once, init_once);
    const unsigned char *p = buf;
    uint32_t c = ~crc;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    for (; len >= 8; len -= 8, p += 8) {
        uint64_t v = load64(p) ^ c;
        c = g_tab[7][v & 0xff] ^ g_tab[6][(v >> 8) & 0xff] ^ g_tab[5][(v >> 16) & 0xff] ^
            g_tab[4][(v >> 24) & 0xff] ^ g_tab[3][(v >> 32) & 0xff] ^ g_tab[2][(v >> 40) & 0xff] ^
            g_tab[1][(v >> 48) & 0xff] ^ g_tab[0][v >> 56];
    }
#endif
    for (; len; len--, p++)
        c = (c >> 8) ^ g_tab[0][(c ^ *p) & 0xff];
    return ~c;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HW_ATTR __attribute__((target("sse4.2")))

static inline uint32_t shift_by(const uint32_t t[4][256], uint32_t r)
{
    return t[0][r & 0xff] ^ t[1][(r >> 8) & 0xff] ^ t[2][(r >> 16) & 0xff] ^ t[3][r >> 24];
}

/* three chains over [p, +3n): the register after them, started at c */
HW_ATTR static inline uint32_t three_chains(uint32_t c, const unsigned char *p, size_t n, const uint32_t k[4][256])
{
    uint64_t c0 = c, c1 = 0, c2 = 0;
    const unsigned char *p1 = p + n, *p2 = p + 2 * n;
    for (size_t i = 0; i < n; i += 8) {
        c0 = __builtin_ia32_crc32di(c0, load64(p + i));
        c1 = __builtin_ia32_crc32di(c1, load64(p1 + i));
        c2 = __builtin_ia32_crc32di(c2, load64(p2 + i));
    }
    uint32_t r = shift_by(k, (uint32_t)c0) ^ (uint32_t)c1;
    return shift_by(k, r) ^ (uint32_t)c2;
}

HW_ATTR uint32_t gw_crc32c_hw(uint32_t crc, const void *buf, size_t len)
{
    pthread_once(&g_once, init_once);
    const unsigned char *p = buf;
    uint32_t c = ~crc;
    for (; len && ((uintptr_t)p & 7); len--, p++) /* to an 8-byte boundary */
        c = __builtin_ia32_crc32qi(c, *p);
    for (; len >= 3 * LONG_BLOCK; len -= 3 * LONG_BLOCK, p += 3 * LONG_BLOCK)
        c = three_chains(c, p, LONG_BLOCK, g_shift_long);
    for (; len >= 3 * SHORT_BLOCK; len -= 3 * SHORT_BLOCK, p += 3 * SHORT_BLOCK)
        c = three_chains(c, p, SHORT_BLOCK, g_shift_short);
    uint64_t c64 = c;
    for (; len >= 8; len -= 8, p += 8)
        c64 = __builtin_ia32_crc32di(c64, load64(p));
    c = (uint32_t)c64;
    for (; len; len--, p++)
        c = __builtin_ia32_crc32qi(c, *p);
    return ~c;
}
#else
uint32_t gw_crc32c_hw(uint32_t crc, const void *buf, size_t len)
{
    return gw_crc32c_table(crc, buf, len); /* (never chosen: gw_crc32c_hw_available() is 0) */
}
#endif

int gw_crc32c_hw_available(void)
{
    pthread_once(&g_once, init_once);
    return g_hw;
}

uint32_t gw_crc32c_combine(uint32_t crc1, uint32_t crc2, uint64_t len2)
{
    /* crc1 times x^(8 len2) mod P, by the binary digits of len2: x^(8 2^k)
     * squared from x^8 (64 squarings at most) */
    uint32_t p = 0x80000000u >> 8; /* x^8 */
    for (; len2; len2 >>= 1) {
        if (len2 & 1)
            crc1 = mulmod(p, crc1);
        p = mulmod(p, p);
    }
    return crc1 ^ crc2;
}

const char *gw_crc32c_impl(void)
{
    return gw_crc32c_hw_available() ? "sse4.2 crc32, 3 streams" : "table (slicing-by-8)";
}

uint32_t gw_crc32c(uint32_t crc, const void *buf, size_t len)
{
    pthread_once(&g_once, init_once);
    return g_hw ? gw_crc32c_hw(crc, buf, len) : gw_crc32c_table(crc, buf, len);
}
