/* SPDX-License-Identifier: Apache-2.0 */
/* idx.c - spans of uint32 index arrays, alone or fused with a copy (idx.h). */
#include "core/idx.h"

#include <stdio.h>
#include <string.h>
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h> /* (AVX2 where the CPU has it, chosen at run time) */
#define IDX_AVX2 1
#endif

/* Four independent pairs of running minimum and maximum, so that no
 * compare waits on the previous one: GCC/clang vector extensions (SSE2 or NEON, no newer instruction set
 * assumed), and on x86-64 CPUs with AVX2 eight lanes with native unsigned
 * min/max.  A single chain of four lanes cost ~5.4 us per 16,384 indices on
 * the 2-core VM; the AVX2 form ~0.6 us, the four chains ~3 us. */
typedef uint32_t idx_v4 __attribute__((vector_size(16)));
static inline idx_v4 v4_min(idx_v4 a, idx_v4 b)
{
    idx_v4 lt = (idx_v4)(a < b);
    return (a & lt) | (b & ~lt);
}
static inline idx_v4 v4_max(idx_v4 a, idx_v4 b)
{
    idx_v4 gt = (idx_v4)(a > b);
    return (a & gt) | (b & ~gt);
}

#ifdef IDX_AVX2
/* The eight lanes of a running minimum m and maximum x folded into *lo / *hi. */
__attribute__((target("avx2"))) static inline void fold8(__m256i m, __m256i x, uint32_t *lo, uint32_t *hi)
{
    uint32_t mm[8], xx[8];
    _mm256_storeu_si256((__m256i *)(void *)mm, m);
    _mm256_storeu_si256((__m256i *)(void *)xx, x);
    uint32_t a = *lo, z = *hi;
    for (int k = 0; k < 8; k++) {
        a = mm[k] < a ? mm[k] : a;
        z = xx[k] > z ? xx[k] : z;
    }
    *lo = a;
    *hi = z;
}

/* The part of p[0 .. n-1] in whole rounds of 32, folded into *lo / *hi and
 * copied to dst (NULL: not copied); returns the indices it read.  The copy
 * stores the vectors the span loads: one pass over the array, not two. */
__attribute__((target("avx2"))) static size_t idx_span_avx2(uint32_t *dst, const uint32_t *p, size_t n, uint32_t *lo,
                                                             uint32_t *hi)
{
    __m256i m0 = _mm256_set1_epi32(-1), m1 = m0, m2 = m0, m3 = m0;
    __m256i x0 = _mm256_setzero_si256(), x1 = x0, x2 = x0, x3 = x0;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256i v0 = _mm256_loadu_si256((const __m256i *)(const void *)(p + i));
        __m256i v1 = _mm256_loadu_si256((const __m256i *)(const void *)(p + i + 8));
        __m256i v2 = _mm256_loadu_si256((const __m256i *)(const void *)(p + i + 16));
        __m256i v3 = _mm256_loadu_si256((const __m256i *)(const void *)(p + i + 24));
        if (dst) { /* (the same every round: predicted) */
            _mm256_storeu_si256((__m256i *)(void *)(dst + i), v0);
            _mm256_storeu_si256((__m256i *)(void *)(dst + i + 8), v1);
            _mm256_storeu_si256((__m256i *)(void *)(dst + i + 16), v2);
            _mm256_storeu_si256((__m256i *)(void *)(dst + i + 24), v3);
        }
        m0 = _mm256_min_epu32(m0, v0);
        m1 = _mm256_min_epu32(m1, v1);
        m2 = _mm256_min_epu32(m2, v2);
        m3 = _mm256_min_epu32(m3, v3);
        x0 = _mm256_max_epu32(x0, v0);
        x1 = _mm256_max_epu32(x1, v1);
        x2 = _mm256_max_epu32(x2, v2);
        x3 = _mm256_max_epu32(x3, v3);
    }
    m0 = _mm256_min_epu32(_mm256_min_epu32(m0, m1), _mm256_min_epu32(m2, m3));
    x0 = _mm256_max_epu32(_mm256_max_epu32(x0, x1), _mm256_max_epu32(x2, x3));
    fold8(m0, x0, lo, hi);
    return i;
}
#endif

/* gw_idx_span and gw_idx_copy_span: dst NULL copies nothing. */
static void span(uint32_t *dst, const uint32_t *p, size_t n, uint32_t *lo, uint32_t *hi)
{
    if (!p || !n) {
        *lo = 0;
        *hi = n ? (uint32_t)(n - 1) : 0;
        return;
    }
    uint32_t a = UINT32_MAX, z = 0;
    size_t i = 0;
#ifdef IDX_AVX2
    static int avx2 = -1; /* (a benign race: every thread finds the same) */
    if (avx2 < 0)
        avx2 = __builtin_cpu_supports("avx2") ? 1 : 0;
    if (avx2 && n >= 32)
        i = idx_span_avx2(dst, p, n, &a, &z);
#endif
    if (n - i >= 16) {
        idx_v4 m[4], x[4];
        for (int k = 0; k < 4; k++) {
            m[k] = (idx_v4){a, a, a, a};
            x[k] = (idx_v4){z, z, z, z};
        }
        for (; i + 16 <= n; i += 16)
            for (int k = 0; k < 4; k++) {
                idx_v4 v;
                memcpy(&v, p + i + 4 * k, sizeof(v)); /* (any alignment) */
                if (dst)
                    memcpy(dst + i + 4 * k, &v, sizeof(v));
                m[k] = v4_min(m[k], v);
                x[k] = v4_max(x[k], v);
            }
        idx_v4 vm = v4_min(v4_min(m[0], m[1]), v4_min(m[2], m[3]));
        idx_v4 vx = v4_max(v4_max(x[0], x[1]), v4_max(x[2], x[3]));
        for (int k = 0; k < 4; k++) {
            a = vm[k] < a ? vm[k] : a;
            z = vx[k] > z ? vx[k] : z;
        }
    }
    for (; i < n; i++) {
        uint32_t v = p[i];
        if (dst)
            dst[i] = v;
        a = v < a ? v : a;
        z = v > z ? v : z;
    }
    *lo = a;
    *hi = z;
}

void gw_idx_span(const uint32_t *p, size_t n, uint32_t *lo, uint32_t *hi)
{
    span(NULL, p, n, lo, hi);
}

void gw_idx_copy_span(uint32_t *dst, const uint32_t *src, size_t n, uint32_t *lo, uint32_t *hi)
{
    span(src ? dst : NULL, src, n, lo, hi);
}

#ifdef IDX_AVX2
/* gw_idx_narrow_span's rounds of 16: each vector's dwords gathered lower
 * halves first, two vectors' halves joined; the lower halves stored and
 * folded into the span, the upper ones ORed into *up.  Returns the items
 * done. */
__attribute__((target("avx2"))) static size_t narrow_avx2(uint32_t *dst, const uint64_t *p, size_t n, uint32_t *lo,
                                                          uint32_t *hi, uint32_t *up)
{
    const __m256i gather = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    __m256i m0 = _mm256_set1_epi32(-1), m1 = m0;
    __m256i x0 = _mm256_setzero_si256(), x1 = x0, h0 = x0, h1 = x0;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i p0 = _mm256_permutevar8x32_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(p + i)), gather);
        __m256i p1 = _mm256_permutevar8x32_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(p + i + 4)), gather);
        __m256i p2 = _mm256_permutevar8x32_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(p + i + 8)), gather);
        __m256i p3 = _mm256_permutevar8x32_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(p + i + 12)), gather);
        __m256i v0 = _mm256_permute2x128_si256(p0, p1, 0x20), v1 = _mm256_permute2x128_si256(p2, p3, 0x20);
        _mm256_storeu_si256((__m256i *)(void *)(dst + i), v0);
        _mm256_storeu_si256((__m256i *)(void *)(dst + i + 8), v1);
        h0 = _mm256_or_si256(h0, _mm256_permute2x128_si256(p0, p1, 0x31));
        h1 = _mm256_or_si256(h1, _mm256_permute2x128_si256(p2, p3, 0x31));
        m0 = _mm256_min_epu32(m0, v0);
        m1 = _mm256_min_epu32(m1, v1);
        x0 = _mm256_max_epu32(x0, v0);
        x1 = _mm256_max_epu32(x1, v1);
    }
    m0 = _mm256_min_epu32(m0, m1);
    x0 = _mm256_max_epu32(x0, x1);
    h0 = _mm256_or_si256(h0, h1);
    fold8(m0, x0, lo, hi);
    *up |= !_mm256_testz_si256(h0, h0);
    return i;
}
#endif

int gw_idx_narrow_span(uint32_t *dst, const uint64_t *src, size_t n, uint32_t *lo, uint32_t *hi)
{
    uint32_t a = UINT32_MAX, z = 0, up = 0;
    size_t i = 0;
#ifdef IDX_AVX2
    static int avx2 = -1; /* (a benign race: every thread finds the same) */
    if (avx2 < 0)
        avx2 = __builtin_cpu_supports("avx2") ? 1 : 0;
    if (avx2 && n >= 16)
        i = narrow_avx2(dst, src, n, &a, &z, &up);
#endif
    for (; i < n; i++) { /* (no exit per item: the compiler may vectorize it) */
        uint64_t v = src[i];
        uint32_t w = (uint32_t)v;
        up |= (uint32_t)(v >> 32);
        dst[i] = w;
        a = w < a ? w : a;
        z = w > z ? w : z;
    }
    if (up)
        return 1;
    *lo = n ? a : 0;
    *hi = n ? z : 0;
    return 0;
}

size_t gw_idx_wide_bad(const uint64_t *src, size_t n, int is_signed, char *buf, size_t len)
{
    for (size_t i = 0; i < n; i++) {
        if (!(src[i] >> 32))
            continue;
        if (is_signed && (int64_t)src[i] < 0)
            snprintf(buf, len, "%lld is negative", (long long)(int64_t)src[i]);
        else
            snprintf(buf, len, "%llu is above 4294967295", (unsigned long long)src[i]);
        return i;
    }
    if (len)
        buf[0] = '\0';
    return n;
}
