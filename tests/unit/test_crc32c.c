/* SPDX-License-Identifier: Apache-2.0 */
/* test_crc32c.c - CRC32C (core/crc32c.h): the RFC 3720 (B.4) test vectors
 * and the common check value through both the instruction path (where this
 * CPU has it; skipped with a note otherwise) and the table path; both paths
 * equal on random data at every alignment and many lengths, chained
 * checksums equal whole ones; and the integrity check's message decoder
 * (proto/proto_integrity.h) on good and bad messages. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/crc32c.h"
#include "core/util.h"
#include "harness.h"
#include "proto/proto_integrity.h"

typedef uint32_t (*crc_fn)(uint32_t, const void *, size_t);

static void vectors(const char *name, crc_fn f)
{
    uint8_t z[32], o[32], inc[32], dec[32];
    for (int i = 0; i < 32; i++) {
        z[i] = 0;
        o[i] = 0xff;
        inc[i] = (uint8_t)i;
        dec[i] = (uint8_t)(31 - i);
    }
    /* RFC 3720 B.4: an iSCSI read command PDU */
    static const uint8_t pdu[48] = {0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                                    0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
                                    0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18, 0x28, 0x00, 0x00, 0x00,
                                    0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
    fprintf(stderr, "  %s path\n", name);
    /* the RFC lists the CRC's bytes as sent (little-endian): aa 36 91 8a is 0x8a9136aa */
    CHECK(f(0, z, 32) == 0x8a9136aau);
    CHECK(f(0, o, 32) == 0x62a8ab43u);
    CHECK(f(0, inc, 32) == 0x46dd794eu);
    CHECK(f(0, dec, 32) == 0x113fdb5cu);
    CHECK(f(0, pdu, 48) == 0xd9963a56u);
    CHECK(f(0, "123456789", 9) == 0xe3069283u);
    CHECK(f(0, "", 0) == 0);
}

static void case_vectors(void)
{
    vectors("table", gw_crc32c_table);
    if (gw_crc32c_hw_available())
        vectors("instruction", gw_crc32c_hw);
    else
        fprintf(stderr, "  this CPU has no crc32 instruction: only the table path is tested here\n");
    vectors("dispatch", gw_crc32c);
    fprintf(stderr, "  gw_crc32c runs: %s\n", gw_crc32c_impl());
}

static void case_paths_agree(void)
{
    size_t n = (3u << 15) + 4096; /* past three long blocks of the instruction path */
    uint8_t *b = malloc(n + 16);
    REQUIRE(b);
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < n + 16; i++)
        b[i] = (uint8_t)gwt_xorshift(&s);
    int bad = 0;
    for (size_t off = 0; off < 9; off++)
        for (size_t len = 0; len < n; len = len * 2 + 1 + off) {
            uint32_t t = gw_crc32c_table(0x1234u, b + off, len);
            if (gw_crc32c(0x1234u, b + off, len) != t)
                bad++;
            /* chained over two pieces = whole */
            size_t cut = len / 3;
            if (gw_crc32c(gw_crc32c(0x1234u, b + off, cut), b + off + cut, len - cut) != t)
                bad++;
        }
    CHECK(bad == 0);
    free(b);
}

/* gw_crc32c_combine joins two pieces' independent CRCs into the whole's,
 * as the GPU kernel's pieces of a long entry are joined */
static void case_combine(void)
{
    size_t n = (1u << 20) + 777;
    uint8_t *b = malloc(n);
    REQUIRE(b);
    uint64_t s = 0x243f6a8885a308d3ull;
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)gwt_xorshift(&s);
    int bad = 0;
    size_t cuts[] = {0, 1, 7, 64, 4095, 262144, n / 2, n - 1, n};
    for (size_t k = 0; k < sizeof(cuts) / sizeof(cuts[0]); k++) {
        size_t c = cuts[k];
        uint32_t whole = gw_crc32c(0, b, n);
        uint32_t a = gw_crc32c(0, b, c), z = gw_crc32c(0, b + c, n - c);
        if (gw_crc32c_combine(a, z, n - c) != whole) {
            fprintf(stderr, "  combine at cut %zu: 0x%08x, whole 0x%08x\n", c, gw_crc32c_combine(a, z, n - c), whole);
            bad++;
        }
    }
    /* three pieces of 256 KiB and a tail, joined left to right */
    uint32_t c = gw_crc32c(0, b, 262144);
    for (size_t off = 262144; off < n; off += 262144) {
        size_t l = n - off < 262144 ? n - off : 262144;
        c = gw_crc32c_combine(c, gw_crc32c(0, b + off, l), l);
    }
    CHECK(c == gw_crc32c(0, b, n));
    CHECK(bad == 0);
    free(b);
}

static void case_integ_decode(void)
{
    uint8_t m[GW_INTEG_HDR + 2 * GW_INTEG_ENT];
    memset(m, 0, sizeof(m));
    gw_put_u32(m, GW_INTEG_MAGIC);
    gw_put_u16(m + 4, GW_INTEG_VERSION);
    m[6] = GW_INTEG_MANIFEST;
    m[7] = GW_INTEG_F_CHECKED;
    gw_put_u32(m + 8, 42);
    m[12] = 1;
    m[13] = GW_INTEG_KIND_PAGE;
    gw_put_u64(m + 16, 77);
    gw_put_u32(m + 24, 2);
    gw_put_u32(m + GW_INTEG_HDR + GW_INTEG_ENT, 5);
    gw_put_u32(m + GW_INTEG_HDR + GW_INTEG_ENT + 4, 0xdeadbeefu);
    gw_put_u64(m + GW_INTEG_HDR + GW_INTEG_ENT + 24, 4096);
    gw_integ_msg_t d;
    gw_integ_went_t e;
    char why[200];
    CHECK_ST(gw_integ_decode(m, sizeof(m), &d, why, sizeof(why)), GW_OK);
    CHECK(d.token == 42 && d.counted == 1 && d.kind == GW_INTEG_KIND_PAGE && d.value == 77 && d.n == 2);
    gw_integ_entry(&d, 1, &e);
    CHECK(e.idx == 5 && e.crc == 0xdeadbeefu && e.len == 4096);
    CHECK_ST(gw_integ_decode(m, sizeof(m) - 1, &d, why, sizeof(why)), GW_ERR_PROTOCOL); /* entries cut */
    m[13] = 9;
    CHECK_ST(gw_integ_decode(m, sizeof(m), &d, why, sizeof(why)), GW_ERR_PROTOCOL); /* unknown kind */
    m[13] = GW_INTEG_KIND_PAGE;
    gw_put_u16(m + 4, GW_INTEG_VERSION + 1);
    CHECK_ST(gw_integ_decode(m, sizeof(m), &d, why, sizeof(why)), GW_ERR_VERSION);
    CHECK(strstr(why, "version") != NULL);
    gw_put_u32(m, 0);
    CHECK_ST(gw_integ_decode(m, sizeof(m), &d, why, sizeof(why)), GW_ERR_PROTOCOL);
    /* a verdict */
    uint8_t v[18 + 5];
    gw_put_u32(v, GW_INTEG_MAGIC);
    gw_put_u16(v + 4, GW_INTEG_VERSION);
    v[6] = GW_INTEG_VERDICT;
    v[7] = 0;
    gw_put_u32(v + 8, 3);
    gw_put_u32(v + 12, (uint32_t)GW_ERR_INTEGRITY);
    gw_put_u16(v + 16, 5);
    memcpy(v + 18, "page1", 5);
    CHECK_ST(gw_integ_decode(v, sizeof(v), &d, why, sizeof(why)), GW_OK);
    CHECK(d.token == 3 && d.status == GW_ERR_INTEGRITY && d.detail_len == 5 && !memcmp(d.detail, "page1", 5));
    gw_put_u32(v + 12, 5); /* a positive status */
    CHECK_ST(gw_integ_decode(v, sizeof(v), &d, why, sizeof(why)), GW_ERR_PROTOCOL);
}

static const gwt_case_t cases[] = {GWT_CASE(vectors), GWT_CASE(paths_agree), GWT_CASE(combine), GWT_CASE(integ_decode)};

int main(int argc, char **argv)
{
    return GWT_MAIN(argc, argv, cases);
}
