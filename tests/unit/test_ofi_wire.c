/* SPDX-License-Identifier: Apache-2.0 */
/* test_ofi_wire.c - the ofi transport's wire formats: the address blob, the
 * key part and the message header round-trip, and each kind of damage a
 * peer could send is refused with the status and a reason that names it. */
#include <string.h>

#include "harness.h"
#include "transport/ofi/ofi_wire.h"

static void addr_cases(void)
{
    gw_ofi_addr_t a = {.version = GW_OFI_ADDR_VERSION, .flags = GW_OFI_AF_HMEM, .namelen = 16};
    strcpy(a.prov, "tcp;ofi_rxm");
    strcpy(a.domain, "lo");
    for (int i = 0; i < 16; i++)
        a.name[i] = (uint8_t)(0xa0 + i);
    uint8_t buf[512], small[20];
    size_t n = gw_ofi_addr_pack(&a, buf, sizeof(buf));
    CHECK(n == 10 + 11 + 2 + 16);
    CHECK(gw_ofi_addr_pack(&a, small, sizeof(small)) == 0); /* no room: nothing written */
    gw_ofi_addr_t b;
    char why[256];
    CHECK_ST(gw_ofi_addr_unpack(&b, buf, n, why, sizeof(why)), GW_OK);
    CHECK(!strcmp(b.prov, "tcp;ofi_rxm") && !strcmp(b.domain, "lo") && b.namelen == 16 && b.flags == GW_OFI_AF_HMEM);
    CHECK(!memcmp(b.name, a.name, 16));
    /* damage */
    uint8_t d[512];
    memcpy(d, buf, n);
    d[0] ^= 1;
    CHECK_ST(gw_ofi_addr_unpack(&b, d, n, why, sizeof(why)), GW_ERR_PROTOCOL);
    CHECK(strstr(why, "magic") != NULL);
    memcpy(d, buf, n);
    d[4] = 2;
    CHECK_ST(gw_ofi_addr_unpack(&b, d, n, why, sizeof(why)), GW_ERR_VERSION);
    CHECK(strstr(why, "version 2") != NULL);
    CHECK_ST(gw_ofi_addr_unpack(&b, buf, n - 1, why, sizeof(why)), GW_ERR_PROTOCOL); /* cut short */
    CHECK(strstr(why, "fields say") != NULL);
    memcpy(d, buf, n);
    d[6] = 0; /* name length 0 */
    d[7] = 0;
    CHECK_ST(gw_ofi_addr_unpack(&b, d, n, why, sizeof(why)), GW_ERR_PROTOCOL);
    memcpy(d, buf, n);
    d[10] = 0x01; /* a control byte in the provider name */
    CHECK_ST(gw_ofi_addr_unpack(&b, d, n, why, sizeof(why)), GW_ERR_PROTOCOL);
    CHECK(strstr(why, "0x01") != NULL);
    CHECK_ST(gw_ofi_addr_unpack(&b, buf, 3, why, sizeof(why)), GW_ERR_PROTOCOL);
}

static void rkey_cases(void)
{
    gw_ofi_rkey_t k = {.key = 0x1122334455667788ull, .base = 0x7f0000001000ull, .virt = 1}, k2;
    uint8_t buf[64];
    char why[256];
    CHECK(gw_ofi_rkey_pack(&k, buf, 19) == 0);
    size_t n = gw_ofi_rkey_pack(&k, buf, sizeof(buf));
    CHECK(n == GW_OFI_RKEY_LEN);
    CHECK_ST(gw_ofi_rkey_parse(&k2, buf, n, why, sizeof(why)), GW_OK);
    CHECK(k2.key == k.key && k2.base == k.base && k2.virt == 1);
    CHECK_ST(gw_ofi_rkey_parse(&k2, buf, n - 1, why, sizeof(why)), GW_ERR_INVALID_KEY);
    CHECK(strstr(why, "ofi key part") != NULL && strstr(why, "19 bytes") != NULL);
    buf[0] = 9;
    CHECK_ST(gw_ofi_rkey_parse(&k2, buf, n, why, sizeof(why)), GW_ERR_INVALID_KEY);
    CHECK(strstr(why, "version 9") != NULL);
    buf[0] = GW_OFI_RKEY_VERSION;
    buf[1] = 0x80; /* an unknown flag */
    CHECK_ST(gw_ofi_rkey_parse(&k2, buf, n, why, sizeof(why)), GW_ERR_INVALID_KEY);
}

/* An active message: its payload is what the header says and at most
 * GW_OFI_AM_MAX bytes, whatever the eager bound. */
static void am_cases(void)
{
    uint8_t m[GW_OFI_HDR_LEN + GW_OFI_AM_MAX + 1];
    char why[256];
    gw_ofi_hdr_t h = {.type = GW_OFI_AM, .f = {3, GW_OFI_AM_MAX}}, g;
    gw_ofi_hdr_write(&h, m);
    CHECK_ST(gw_ofi_hdr_parse(&g, m, GW_OFI_HDR_LEN + GW_OFI_AM_MAX, 16000, why, sizeof(why)), GW_OK);
    CHECK(g.type == GW_OFI_AM && g.f[0] == 3 && g.f[1] == GW_OFI_AM_MAX);
    CHECK_ST(gw_ofi_hdr_parse(&g, m, GW_OFI_HDR_LEN + 5, 16000, why, sizeof(why)), GW_ERR_PROTOCOL);
    h.f[1] = GW_OFI_AM_MAX + 1;
    gw_ofi_hdr_write(&h, m);
    CHECK_ST(gw_ofi_hdr_parse(&g, m, GW_OFI_HDR_LEN + GW_OFI_AM_MAX + 1, 16000, why, sizeof(why)), GW_ERR_PROTOCOL);
    CHECK(strstr(why, "active message says 257 payload bytes") != NULL);
}

static void hdr_cases(void)
{
    enum { EMAX = 100 };
    uint8_t m[GW_OFI_HDR_LEN + EMAX + 1];
    char why[256];
    gw_ofi_hdr_t h = {.type = GW_OFI_EAGER, .f = {77, 10}}, g;
    gw_ofi_hdr_write(&h, m);
    CHECK_ST(gw_ofi_hdr_parse(&g, m, GW_OFI_HDR_LEN + 10, EMAX, why, sizeof(why)), GW_OK);
    CHECK(g.type == GW_OFI_EAGER && g.f[0] == 77 && g.f[1] == 10);
    /* the payload is what the header says, no more and no less */
    CHECK_ST(gw_ofi_hdr_parse(&g, m, GW_OFI_HDR_LEN + 9, EMAX, why, sizeof(why)), GW_ERR_PROTOCOL);
    CHECK(strstr(why, "says 10 payload bytes, carries 9") != NULL);
    h.f[1] = EMAX + 1; /* over the eager limit */
    gw_ofi_hdr_write(&h, m);
    CHECK_ST(gw_ofi_hdr_parse(&g, m, GW_OFI_HDR_LEN + EMAX + 1, EMAX, why, sizeof(why)), GW_ERR_PROTOCOL);
    /* control messages carry nothing after the header */
    h = (gw_ofi_hdr_t){.type = GW_OFI_NOTIFY, .flags = GW_OFI_F_COUNTED, .f = {5}};
    gw_ofi_hdr_write(&h, m);
    CHECK_ST(gw_ofi_hdr_parse(&g, m, GW_OFI_HDR_LEN, EMAX, why, sizeof(why)), GW_OK);
    CHECK(g.flags == GW_OFI_F_COUNTED && g.f[0] == 5);
    CHECK_ST(gw_ofi_hdr_parse(&g, m, GW_OFI_HDR_LEN + 1, EMAX, why, sizeof(why)), GW_ERR_PROTOCOL);
    /* the counted flag belongs to NOTIFY alone */
    h.type = GW_OFI_PING;
    gw_ofi_hdr_write(&h, m);
    CHECK_ST(gw_ofi_hdr_parse(&g, m, GW_OFI_HDR_LEN, EMAX, why, sizeof(why)), GW_ERR_PROTOCOL);
    /* unknown type, bad magic, bad version, short */
    h = (gw_ofi_hdr_t){.type = 42};
    gw_ofi_hdr_write(&h, m);
    CHECK_ST(gw_ofi_hdr_parse(&g, m, GW_OFI_HDR_LEN, EMAX, why, sizeof(why)), GW_ERR_PROTOCOL);
    CHECK(strstr(why, "unknown type 42") != NULL);
    h.type = GW_OFI_PONG;
    gw_ofi_hdr_write(&h, m);
    m[0] ^= 0xff;
    CHECK_ST(gw_ofi_hdr_parse(&g, m, GW_OFI_HDR_LEN, EMAX, why, sizeof(why)), GW_ERR_PROTOCOL);
    m[0] ^= 0xff;
    m[2] = 7;
    CHECK_ST(gw_ofi_hdr_parse(&g, m, GW_OFI_HDR_LEN, EMAX, why, sizeof(why)), GW_ERR_PROTOCOL);
    CHECK_ST(gw_ofi_hdr_parse(&g, m, 10, EMAX, why, sizeof(why)), GW_ERR_PROTOCOL);
    /* a FIN's status is GW_OK or an error, never positive */
    h = (gw_ofi_hdr_t){.type = GW_OFI_FIN, .f = {(uint64_t)(int64_t)GW_ERR_INVALID_KEY, 0, 3}};
    gw_ofi_hdr_write(&h, m);
    CHECK_ST(gw_ofi_hdr_parse(&g, m, GW_OFI_HDR_LEN, EMAX, why, sizeof(why)), GW_OK);
    CHECK((gw_status_t)(int64_t)g.f[0] == GW_ERR_INVALID_KEY);
    h.f[0] = 5;
    gw_ofi_hdr_write(&h, m);
    CHECK_ST(gw_ofi_hdr_parse(&g, m, GW_OFI_HDR_LEN, EMAX, why, sizeof(why)), GW_ERR_PROTOCOL);
}

/* Credits: any header carries up to GW_OFI_CREDIT_SLOTS in the flags' top
 * 16 bits (beside COUNTED on a NOTIFY); a CREDIT message carries at least
 * one and nothing else; more than the slots is refused with a reason. */
static void credit_cases(void)
{
    enum { EMAX = 100 };
    uint8_t m[GW_OFI_HDR_LEN + EMAX];
    char why[256];
    gw_ofi_hdr_t g, h = {.type = GW_OFI_EAGER, .flags = 7u << GW_OFI_F_CREDIT_SHIFT, .f = {9, 4}};
    gw_ofi_hdr_write(&h, m);
    CHECK_ST(gw_ofi_hdr_parse(&g, m, GW_OFI_HDR_LEN + 4, EMAX, why, sizeof(why)), GW_OK);
    CHECK(g.flags >> GW_OFI_F_CREDIT_SHIFT == 7);
    uint64_t tag = 0;
    unsigned cred = 0;
    CHECK(gw_ofi_hdr_eager(m, GW_OFI_HDR_LEN + 4, EMAX, &tag, &cred) == 1 && tag == 9 && cred == 7);
    h.flags = (uint32_t)GW_OFI_CREDIT_SLOTS << GW_OFI_F_CREDIT_SHIFT; /* all the slots: the most */
    gw_ofi_hdr_write(&h, m);
    CHECK_ST(gw_ofi_hdr_parse(&g, m, GW_OFI_HDR_LEN + 4, EMAX, why, sizeof(why)), GW_OK);
    h.flags = (uint32_t)(GW_OFI_CREDIT_SLOTS + 1) << GW_OFI_F_CREDIT_SHIFT; /* more credits than slots */
    gw_ofi_hdr_write(&h, m);
    CHECK_ST(gw_ofi_hdr_parse(&g, m, GW_OFI_HDR_LEN + 4, EMAX, why, sizeof(why)), GW_ERR_PROTOCOL);
    CHECK(strstr(why, "returns 65 credits") != NULL && strstr(why, "64 receive slots") != NULL);
    CHECK(gw_ofi_hdr_eager(m, GW_OFI_HDR_LEN + 4, EMAX, &tag, &cred) == 0);
    h = (gw_ofi_hdr_t){.type = GW_OFI_NOTIFY, .flags = GW_OFI_F_COUNTED | (3u << GW_OFI_F_CREDIT_SHIFT), .f = {1}};
    gw_ofi_hdr_write(&h, m);
    CHECK_ST(gw_ofi_hdr_parse(&g, m, GW_OFI_HDR_LEN, EMAX, why, sizeof(why)), GW_OK);
    CHECK(g.flags == (GW_OFI_F_COUNTED | (3u << GW_OFI_F_CREDIT_SHIFT)));
    h.flags = 2u; /* an unknown low flag, credits or not */
    gw_ofi_hdr_write(&h, m);
    CHECK_ST(gw_ofi_hdr_parse(&g, m, GW_OFI_HDR_LEN, EMAX, why, sizeof(why)), GW_ERR_PROTOCOL);
    h = (gw_ofi_hdr_t){.type = GW_OFI_CREDIT, .flags = 16u << GW_OFI_F_CREDIT_SHIFT};
    gw_ofi_hdr_write(&h, m);
    CHECK_ST(gw_ofi_hdr_parse(&g, m, GW_OFI_HDR_LEN, EMAX, why, sizeof(why)), GW_OK);
    CHECK(g.type == GW_OFI_CREDIT && g.flags >> GW_OFI_F_CREDIT_SHIFT == 16);
    CHECK(!gw_ofi_type_costs(GW_OFI_CREDIT) && !gw_ofi_type_costs(GW_OFI_PONG) && !gw_ofi_type_costs(GW_OFI_FIN) &&
          gw_ofi_type_costs(GW_OFI_PING) && gw_ofi_type_costs(GW_OFI_RTS) && gw_ofi_type_costs(GW_OFI_NOTIFY) &&
          gw_ofi_type_costs(GW_OFI_EAGER) && gw_ofi_type_costs(GW_OFI_AM));
    CHECK_ST(gw_ofi_hdr_parse(&g, m, GW_OFI_HDR_LEN + 1, EMAX, why, sizeof(why)), GW_ERR_PROTOCOL); /* a body */
    h.flags = 0; /* a CREDIT returning none */
    gw_ofi_hdr_write(&h, m);
    CHECK_ST(gw_ofi_hdr_parse(&g, m, GW_OFI_HDR_LEN, EMAX, why, sizeof(why)), GW_ERR_PROTOCOL);
    CHECK(strstr(why, "returns 0 credits") != NULL);
    h = (gw_ofi_hdr_t){.type = GW_OFI_CREDIT, .flags = 1u << GW_OFI_F_CREDIT_SHIFT, .f = {0, 0, 5}};
    gw_ofi_hdr_write(&h, m);
    CHECK_ST(gw_ofi_hdr_parse(&g, m, GW_OFI_HDR_LEN, EMAX, why, sizeof(why)), GW_ERR_PROTOCOL);
    CHECK(strstr(why, "CREDIT message with nonzero fields") != NULL);
}

/* The receive path's inline eager check agrees with the full parse on
 * every header the parse accepts or refuses, in a reproducible sweep of
 * single-byte changes to well-formed messages of every type. */
static void eager_inline_cases(void)
{
    enum { EMAX = 100 };
    uint8_t m[GW_OFI_HDR_LEN + EMAX + 2];
    char why[256];
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    int agreed = 0, eager_seen = 0;
    for (int type = 0; type <= GW_OFI_TYPE_MAX + 1; type++) {
        for (int trial = 0; trial < 400; trial++) {
            uint64_t r = gwt_xorshift(&seed);
            size_t body = type == GW_OFI_EAGER || type == GW_OFI_AM ? (size_t)(r % (EMAX + 2)) : 0;
            /* (credits in about half: the field's bounds, the CREDIT type's fields) */
            uint32_t cr = (r & 3) == 0 ? (uint32_t)(r >> 40) % (GW_OFI_CREDIT_SLOTS + 2) : 0;
            gw_ofi_hdr_t h = {.type = (uint8_t)type, .flags = cr << GW_OFI_F_CREDIT_SHIFT, .f = {r >> 8, body, 1, 2, 3}};
            if (type == GW_OFI_CREDIT && (r & 4))
                h.f[0] = h.f[1] = h.f[2] = h.f[3] = h.f[4] = 0;
            gw_ofi_hdr_write(&h, m);
            size_t len = GW_OFI_HDR_LEN + body;
            if (trial % 2) { /* one byte of the header changed, or the length off by one */
                uint64_t w = gwt_xorshift(&seed);
                if (w % 5 == 0)
                    len = len + (w & 16 ? 1 : (size_t)-1);
                else
                    m[(w >> 8) % GW_OFI_HDR_LEN] ^= (uint8_t)(1u << ((w >> 16) % 8));
            }
            gw_ofi_hdr_t g;
            gw_status_t st = gw_ofi_hdr_parse(&g, m, len, EMAX, why, sizeof(why));
            uint64_t tag = 0;
            unsigned cred = 0;
            int eager = gw_ofi_hdr_eager(m, len, EMAX, &tag, &cred);
            int want = st == GW_OK && g.type == GW_OFI_EAGER;
            CHECK(eager == want);
            CHECK(!eager || (tag == g.f[0] && cred == g.flags >> GW_OFI_F_CREDIT_SHIFT));
            agreed += eager == want;
            eager_seen += eager;
        }
    }
    CHECK(agreed == (GW_OFI_TYPE_MAX + 2) * 400);
    CHECK(eager_seen > 100); /* the sweep reached the accepting side, not refusals alone */
}

int main(void)
{
    credit_cases();
    eager_inline_cases();
    addr_cases();
    rkey_cases();
    am_cases();
    hdr_cases();
    return gwt_done("unit_ofi_wire");
}
