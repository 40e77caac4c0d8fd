/* SPDX-License-Identifier: Apache-2.0 */
/* verbs_am_wire.c - the verbs active message on the wire (host only, no
 * device): messages of every payload length up to GW_AM_MAX and every
 * handler id round-trip through gw_verbs_am_format and gw_verbs_am_check;
 * a truncated or lengthened message, a wrong type, magic, version or
 * reserved word, a handler id out of range and a payload over GW_AM_MAX
 * are refused with GW_ERR_PROTOCOL and a reason. */
#include <string.h>

#include "harness.h"
#include "transport/verbs/verbs.h"

static uint8_t msg[GW_VERBS_AM_HDR + GW_AM_MAX + 64];

static gw_status_t check(uint32_t bytes, unsigned *id, const uint8_t **data, uint32_t *len)
{
    char why[256] = "";
    gw_status_t st = gw_verbs_am_check(msg, bytes, id, data, len, why, sizeof(why));
    if (st != GW_OK)
        CHECK(why[0] != '\0');
    return st;
}

/* A valid message of n payload bytes for handler id; returns its length. */
static uint32_t make(unsigned id, uint32_t n)
{
    uint8_t pay[GW_AM_MAX + 64];
    for (uint32_t k = 0; k < n; k++)
        pay[k] = (uint8_t)(id * 7 + k);
    return gw_verbs_am_format(msg, id, pay, n);
}

int main(void)
{
    unsigned id;
    const uint8_t *data;
    uint32_t len;
    for (unsigned h = 0; h < GW_AM_IDS; h++)
        for (uint32_t n = 0; n <= GW_AM_MAX; n += n < 8 ? 1 : 31) {
            uint32_t bytes = make(h, n);
            CHECK(bytes == GW_VERBS_AM_HDR + n);
            REQUIRE(check(bytes, &id, &data, &len) == GW_OK);
            CHECK(id == h && len == n && data == msg + GW_VERBS_AM_HDR);
            int same = 1;
            for (uint32_t k = 0; k < n; k++)
                same &= data[k] == (uint8_t)(h * 7 + k);
            CHECK(same);
        }
    /* the full payload, and its every truncation and one byte more */
    uint32_t full = make(3, GW_AM_MAX);
    CHECK_ST(check(full, &id, &data, &len), GW_OK);
    for (uint32_t b = 0; b < full; b++)
        CHECK_ST(check(b, &id, &data, &len), GW_ERR_PROTOCOL);
    CHECK_ST(check(full + 1, &id, &data, &len), GW_ERR_PROTOCOL);
    /* each header field wrong in turn */
    static const struct { unsigned off, width; uint64_t val; const char *what; } bad[] = {
        {0, 1, CT_EAGER, "type"},
        {GW_VERBS_HDR, 4, GW_VERBS_AM_MAGIC ^ 1u, "magic"},
        {GW_VERBS_HDR + 4, 2, GW_VERBS_AM_VERSION + 1, "version"},
        {GW_VERBS_HDR + 6, 2, 1, "reserved"},
        {8, 8, GW_AM_IDS, "handler id"},
        {16, 8, 17, "length"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint32_t bytes = make(2, 16);
        if (bad[i].width == 1)
            msg[bad[i].off] = (uint8_t)bad[i].val;
        else if (bad[i].width == 2)
            gw_put_u16(msg + bad[i].off, (uint16_t)bad[i].val);
        else if (bad[i].width == 4)
            gw_put_u32(msg + bad[i].off, (uint32_t)bad[i].val);
        else
            gw_put_u64(msg + bad[i].off, bad[i].val);
        if (check(bytes, &id, &data, &len) != GW_ERR_PROTOCOL) {
            fprintf(stderr, "a message with a wrong %s was accepted\n", bad[i].what);
            gwt_failures++;
        }
    }
    /* a payload over GW_AM_MAX, its length claimed honestly */
    uint8_t big[GW_AM_MAX + 1] = {0};
    uint32_t bytes = gw_verbs_am_format(msg, 1, big, GW_AM_MAX + 1);
    CHECK_ST(check(bytes, &id, &data, &len), GW_ERR_PROTOCOL);
    return gwt_failures ? 1 : 0;
}
