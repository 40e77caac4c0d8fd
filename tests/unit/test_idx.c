/* SPDX-License-Identifier: Apache-2.0 */
/* test_idx.c - spans of index arrays (core/idx.h): gw_idx_span and the
 * fused gw_idx_copy_span against a plain loop, at every length around the
 * vector widths, at every alignment of source and destination, with the
 * extremes anywhere in the array; the copy exact and nothing written past
 * its end. */
#include <stdlib.h>
#include <string.h>

#include "core/idx.h"
#include "harness.h"

static uint64_t rng_state = 0x2545f4914f6cdd1dull;
static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

static void ref_span(const uint32_t *p, size_t n, uint32_t *lo, uint32_t *hi)
{
    uint32_t a = UINT32_MAX, z = 0;
    for (size_t i = 0; i < n; i++) {
        a = p[i] < a ? p[i] : a;
        z = p[i] > z ? p[i] : z;
    }
    *lo = n ? a : 0;
    *hi = n ? z : 0;
}

int main(void)
{
    enum { MAXN = 300 };
    static uint32_t src[MAXN + 8], dst[MAXN + 16];
    uint32_t lo, hi, rlo, rhi;
    /* NULL reads as 0 .. n-1; n 0 as 0, 0 */
    gw_idx_span(NULL, 0, &lo, &hi);
    CHECK(lo == 0 && hi == 0);
    gw_idx_span(NULL, 1000, &lo, &hi);
    CHECK(lo == 0 && hi == 999);
    gw_idx_copy_span(dst, NULL, 70, &lo, &hi);
    CHECK(lo == 0 && hi == 69);
    for (size_t n = 1; n <= MAXN; n++)
        for (int sa = 0; sa < 8; sa += 3)
            for (int da = 0; da < 8; da += 5)
                for (int pat = 0; pat < 4; pat++) {
                    uint32_t *s = src + sa, *d = dst + da;
                    for (size_t i = 0; i < n; i++)
                        s[i] = pat == 0 ? rnd() : pat == 1 ? 1000 + rnd() % 50 : pat == 2 ? 7 : (uint32_t)i;
                    if (pat == 1) { /* the extremes at random places, the last entry or the first */
                        s[rnd() % n] = 0;
                        s[n > 1 ? n - 1 : 0] = UINT32_MAX;
                    }
                    ref_span(s, n, &rlo, &rhi);
                    gw_idx_span(s, n, &lo, &hi);
                    CHECK(lo == rlo && hi == rhi);
                    memset(dst, 0xab, sizeof(dst));
                    lo = hi = 12345;
                    gw_idx_copy_span(d, s, n, &lo, &hi);
                    CHECK(lo == rlo && hi == rhi);
                    CHECK(memcmp(d, s, n * sizeof(uint32_t)) == 0);
                    for (size_t k = da + n; k < MAXN + 16; k++)
                        if (dst[k] != 0xabababab) {
                            CHECK(!"written past the copy's end");
                            break;
                        }
                    for (int k = 0; k < da; k++)
                        CHECK(dst[k] == 0xabababab);
                }
    return gwt_done("unit_idx");
}
