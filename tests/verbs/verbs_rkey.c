/* SPDX-License-Identifier: Apache-2.0 */
/* verbs_rkey.c - the verbs part of a packed remote key (host only, no
 * device): version 1 (MR pieces) and version 2 (a GPU region on the staging
 * rung) round-trip; malformed blobs are refused with a reason. */
#include "harness.h"
#include "transport/verbs/verbs.h"

static gw_status_t parse(const uint8_t *b, size_t n, gw_verbs_rkey_info_t *k)
{
    char why[256] = "";
    gw_status_t st = gw_verbs_rkey_parse(b, n, k, why, sizeof(why));
    if (st != GW_OK) {
        fprintf(stderr, "refused (%zu bytes): %s\n", n, why);
        CHECK(why[0] != '\0');
    }
    return st;
}

int main(void)
{
    uint8_t buf[128];
    gw_verbs_rkey_info_t k = {.version = GW_VERBS_RKEY_MR, .n = 3, .base = 0x7f0000001000ull, .chunk = 1u << 20};
    k.rkey[0] = 0x11;
    k.rkey[1] = 0x22;
    k.rkey[2] = 0x33;
    size_t n = gw_verbs_rkey_format(&k, buf, sizeof(buf));
    CHECK(n == 20 + 12);
    gw_verbs_rkey_info_t o;
    CHECK_ST(parse(buf, n, &o), GW_OK);
    CHECK(o.version == 1 && o.n == 3 && o.base == k.base && o.chunk == k.chunk && o.rkey[2] == 0x33);
    CHECK(gw_verbs_rkey_format(&k, buf, n - 1) == 0);
    /* every truncation and an extra byte are refused */
    for (size_t i = 0; i < n; i++)
        CHECK_ST(parse(buf, i, &o), GW_ERR_INVALID_KEY);
    CHECK_ST(parse(buf, n + 1, &o), GW_ERR_INVALID_KEY);
    /* more pieces than a key may carry, pieces of 0 bytes, reserved bytes */
    buf[1] = GW_VERBS_MAX_MRS + 1;
    CHECK_ST(parse(buf, 20 + 4 * (GW_VERBS_MAX_MRS + 1), &o), GW_ERR_INVALID_KEY);
    gw_verbs_rkey_info_t z = {.version = GW_VERBS_RKEY_MR, .n = 1, .chunk = 0};
    n = gw_verbs_rkey_format(&z, buf, sizeof(buf));
    CHECK_ST(parse(buf, n, &o), GW_ERR_INVALID_KEY);
    z.n = 0; /* a zero-length region: no MR, valid */
    n = gw_verbs_rkey_format(&z, buf, sizeof(buf));
    CHECK_ST(parse(buf, n, &o), GW_OK);
    buf[2] = 1;
    CHECK_ST(parse(buf, n, &o), GW_ERR_INVALID_KEY);

    /* version 2: staged */
    gw_verbs_rkey_info_t s = {.version = GW_VERBS_RKEY_STAGED};
    n = gw_verbs_rkey_format(&s, buf, sizeof(buf));
    CHECK(n == 4 && buf[0] == 2 && !buf[1] && !buf[2] && !buf[3]);
    CHECK_ST(parse(buf, n, &o), GW_OK);
    CHECK(o.version == GW_VERBS_RKEY_STAGED && o.n == 0);
    CHECK(gw_verbs_rkey_format(&s, buf, 3) == 0);
    buf[1] = 1; /* unknown flag */
    CHECK_ST(parse(buf, 4, &o), GW_ERR_INVALID_KEY);
    buf[1] = 0;
    CHECK_ST(parse(buf, 5, &o), GW_ERR_INVALID_KEY);
    buf[0] = 3; /* unknown version */
    CHECK_ST(parse(buf, 4, &o), GW_ERR_INVALID_KEY);
    CHECK_ST(parse(NULL, 0, &o), GW_ERR_INVALID_KEY);
    return gwt_done("verbs_rkey");
}
