/* SPDX-License-Identifier: Apache-2.0 */
/* test_wire.c - the bootstrap wire formats and the tcp frame header:
 * round trips of every field, every truncation of a valid message refused
 * with the documented status (never a crash), wrong magic / version /
 * oversized bodies / unknown types named in the reason. */
#include <stdlib.h>
#include <string.h>

#include "bootstrap/wire.h"
#include "core/util.h"
#include "harness.h"
#include "transport/tcp/tcp.h"

static void test_hs(void)
{
    gw_hs_msg_t m, d;
    memset(&m, 0, sizeof(m));
    m.type = GW_HS_ACCEPT;
    m.uuid = 0x0102030405060708ull;
    m.host_id = 0x1112131415161718ull;
    m.pid = 4321;
    m.pid_ns = 0x4026531836ull;
    m.token = 0x2122232425262728ull;
    m.flags = GW_HS_FLAG_AUTH;
    m.has_nonce = m.has_mac = 1;
    for (int i = 0; i < GW_HS_NONCE_LEN; i++)
        m.nonce[i] = (uint8_t)(i + 1);
    for (int i = 0; i < GW_HS_MAC_LEN; i++)
        m.mac[i] = (uint8_t)(0xF0 ^ i);
    m.pref[0] = 2;
    m.pref[1] = 0;
    m.npref = 2;
    static const uint8_t b0[4] = {1, 0, 2, 0}, b1[40] = {9};
    m.blob[0] = (gw_hs_blob_t){.tl = 2, .len = sizeof(b0), .data = b0};
    m.blob[1] = (gw_hs_blob_t){.tl = 0, .len = sizeof(b1), .data = b1};
    m.nblob = 2;
    m.has_chosen = 1;
    m.chosen = 2;
    snprintf(m.text, sizeof(m.text), "verbs: no active port");
    m.stream = 3;
    uint8_t buf[GW_HS_HDR_LEN + GW_HS_MAX_BODY];
    size_t n = gw_hs_encode(&m, buf, sizeof(buf));
    REQUIRE(n > GW_HS_HDR_LEN);
    char why[256];
    CHECK_ST(gw_hs_decode(buf, n, &d, why, sizeof(why)), GW_OK);
    CHECK(d.type == m.type && d.version == GW_HS_VERSION);
    CHECK(d.uuid == m.uuid && d.host_id == m.host_id && d.token == m.token && d.flags == m.flags);
    CHECK(d.pid == 4321 && d.pid_ns == m.pid_ns); /* TLV 16 */
    CHECK(d.has_nonce && !memcmp(d.nonce, m.nonce, GW_HS_NONCE_LEN));
    CHECK(d.has_mac && !memcmp(d.mac, m.mac, GW_HS_MAC_LEN));
    CHECK(d.npref == 2 && d.pref[0] == 2 && d.pref[1] == 0);
    CHECK(d.nblob == 2 && d.blob[0].tl == 2 && d.blob[0].len == 4 && !memcmp(d.blob[0].data, b0, 4));
    CHECK(d.blob[1].len == sizeof(b1) && !memcmp(d.blob[1].data, b1, sizeof(b1)));
    CHECK(d.has_chosen && d.chosen == 2);
    CHECK(strcmp(d.text, m.text) == 0);

    /* every truncation is refused as a protocol error with a reason */
    for (size_t cut = 0; cut < n; cut++) {
        why[0] = '\0';
        gw_status_t st = gw_hs_decode(buf, cut, &d, why, sizeof(why));
        if (st != GW_ERR_PROTOCOL || !why[0]) {
            fprintf(stderr, "frame cut to %zu of %zu bytes: %s (%s)\n", cut, n, gw_status_name(st), why);
            gwt_failures++;
            break;
        }
    }
    /* a body length that disagrees with the bytes given */
    uint8_t bad[sizeof(buf)];
    memcpy(bad, buf, n);
    gw_put_u32(bad + 8, gw_get_u32(buf + 8) + 1);
    CHECK_ST(gw_hs_decode(bad, n, &d, why, sizeof(why)), GW_ERR_PROTOCOL);
    /* magic, version, size, type */
    memcpy(bad, buf, n);
    bad[0] ^= 1;
    CHECK_ST(gw_hs_decode(bad, n, &d, why, sizeof(why)), GW_ERR_PROTOCOL);
    CHECK(strstr(why, "magic") != NULL);
    memcpy(bad, buf, n);
    gw_put_u16(bad + 4, GW_HS_VERSION + 1);
    CHECK_ST(gw_hs_decode(bad, n, &d, why, sizeof(why)), GW_ERR_VERSION);
    CHECK(strstr(why, "version") != NULL);
    /* a version-1 peer (names table in tags 13-15, no extension-only
     * HELLO): refused, the message naming both versions */
    CHECK(GW_HS_VERSION == 2);
    gw_put_u16(bad + 4, 1);
    CHECK_ST(gw_hs_decode(bad, n, &d, why, sizeof(why)), GW_ERR_VERSION);
    CHECK(strstr(why, "peer speaks handshake version 1, this build speaks 2") != NULL);
    uint16_t ver, type;
    uint32_t body;
    memcpy(bad, buf, GW_HS_HDR_LEN);
    gw_put_u32(bad + 8, GW_HS_MAX_BODY + 1);
    CHECK_ST(gw_hs_decode_header(bad, GW_HS_HDR_LEN, &ver, &type, &body, why, sizeof(why)), GW_ERR_PROTOCOL);
    memcpy(bad, buf, GW_HS_HDR_LEN);
    gw_put_u16(bad + 6, 99);
    CHECK_ST(gw_hs_decode_header(bad, GW_HS_HDR_LEN, &ver, &type, &body, why, sizeof(why)), GW_ERR_PROTOCOL);
    CHECK(strstr(why, "type") != NULL);
    /* an encoder buffer too small says so instead of overflowing */
    CHECK(gw_hs_encode(&m, buf, GW_HS_HDR_LEN + 10) == 0);
}

static void test_rkey(void)
{
    static const uint8_t tb[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    gw_rkey_wire_t k = {.owner_uuid = 0xAAAABBBBCCCCDDDDull, .id = 0x1234, .addr = 0x7f0000001000ull,
                        .len = (1ull << 30) + 4096, .access = GW_ACCESS_REMOTE_READ, .mem_type = GW_MEM_CUDA,
                        .nblob = 1, .blob = {{.tl = 0, .len = sizeof(tb), .data = tb}}};
    uint8_t buf[GW_RKEY_MAX_LEN], bad[GW_RKEY_MAX_LEN];
    size_t need = gw_rkey_encode(&k, NULL, 0);
    CHECK(need == GW_RKEY_FIXED_LEN + 2 + sizeof(tb));
    size_t n = gw_rkey_encode(&k, buf, sizeof(buf));
    CHECK(n == need);
    gw_rkey_wire_t d;
    char why[256];
    CHECK_ST(gw_rkey_decode(buf, n, &d, why, sizeof(why)), GW_OK);
    CHECK(d.owner_uuid == k.owner_uuid && d.id == k.id && d.addr == k.addr && d.len == k.len);
    CHECK(d.access == k.access && d.mem_type == k.mem_type && d.nblob == 1);
    CHECK(d.blob[0].tl == 0 && d.blob[0].len == sizeof(tb) && !memcmp(d.blob[0].data, tb, sizeof(tb)));
    for (size_t cut = 0; cut < n; cut++) {
        why[0] = '\0';
        gw_status_t st = gw_rkey_decode(buf, cut, &d, why, sizeof(why));
        if (st != GW_ERR_INVALID_KEY || !why[0]) {
            fprintf(stderr, "key cut to %zu of %zu bytes: %s (%s)\n", cut, n, gw_status_name(st), why);
            gwt_failures++;
            break;
        }
    }
    memcpy(bad, buf, n);
    bad[1] ^= 0x40;
    CHECK_ST(gw_rkey_decode(bad, n, &d, why, sizeof(why)), GW_ERR_INVALID_KEY);
    memcpy(bad, buf, n);
    gw_put_u16(bad + 4, GW_RKEY_VERSION + 1);
    CHECK_ST(gw_rkey_decode(bad, n, &d, why, sizeof(why)), GW_ERR_INVALID_KEY);
    CHECK(strstr(why, "version") != NULL);
    memcpy(bad, buf, n);
    bad[45] = 3; /* claims three blobs, holds one */
    CHECK_ST(gw_rkey_decode(bad, n, &d, why, sizeof(why)), GW_ERR_INVALID_KEY);
    memcpy(bad, buf, n);
    bad[47] = 200; /* a blob longer than the key */
    CHECK_ST(gw_rkey_decode(bad, n, &d, why, sizeof(why)), GW_ERR_INVALID_KEY);
    CHECK(gw_rkey_encode(&k, buf, 10) == need); /* too small: nothing written, size told */
}

static void test_tcp_hdr(void)
{
    gw_tcp_hdr_t h = {.type = GW_TCP_GET_RESP, .flags = GW_TCP_F_NOTIFY, .aux = GW_ERR_OUT_OF_BOUNDS,
                      .id = 1, .key = 2, .addr = 3, .len = 4, .val = UINT64_MAX}, d;
    uint8_t b[GW_TCP_HDR];
    char why[128];
    gw_tcp_hdr_encode(b, &h);
    CHECK_ST(gw_tcp_hdr_decode(b, &d, why, sizeof(why)), GW_OK);
    CHECK(d.type == h.type && d.flags == h.flags && d.aux == h.aux && d.id == 1 && d.key == 2 &&
          d.addr == 3 && d.len == 4 && d.val == UINT64_MAX);
    uint8_t x[GW_TCP_HDR];
    memcpy(x, b, sizeof(x));
    x[0] ^= 1;
    CHECK_ST(gw_tcp_hdr_decode(x, &d, why, sizeof(why)), GW_ERR_PROTOCOL);
    memcpy(x, b, sizeof(x));
    x[2] = GW_TCP_FRAME_MAX + 1;
    CHECK_ST(gw_tcp_hdr_decode(x, &d, why, sizeof(why)), GW_ERR_PROTOCOL);
    memcpy(x, b, sizeof(x));
    gw_put_u32(x + 4, 5); /* a positive status */
    CHECK_ST(gw_tcp_hdr_decode(x, &d, why, sizeof(why)), GW_ERR_PROTOCOL);
}

int main(void)
{
    test_hs();
    test_rkey();
    test_tcp_hdr();
    return gwt_done("unit_wire");
}
