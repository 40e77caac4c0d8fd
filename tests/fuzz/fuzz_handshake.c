/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_handshake.c - libFuzzer target for the handshake decoder.
 *
 * Half the inputs are decoded as they come; the other half get a valid
 * header (magic, version, a type and a body length that matches) so the
 * fuzzer spends its time inside the TLV body.  A frame that decodes must
 * re-encode and decode to the same message (the decoder accepts nothing the
 * encoder cannot say), typed extensions and their HMACs included. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/wire.h"
#include "core/util.h"

static void must(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz_handshake: %s\n", what);
        abort();
    }
}

static void same_msg(const gw_hs_msg_t *a, const gw_hs_msg_t *b)
{
    must(a->type == b->type && a->version == b->version, "type/version changed in a round trip");
    must(a->uuid == b->uuid && a->host_id == b->host_id && a->token == b->token,
         "ids changed in a round trip");
    must(a->flags == b->flags && a->npref == b->npref && a->nblob == b->nblob,
         "flags/pref/blob count changed in a round trip");
    must(a->has_nonce == b->has_nonce && a->has_mac == b->has_mac, "nonce/mac presence changed");
    for (int i = 0; i < a->nblob; i++)
        must(a->blob[i].tl == b->blob[i].tl && a->blob[i].len == b->blob[i].len &&
                 (a->blob[i].len == 0 || memcmp(a->blob[i].data, b->blob[i].data, a->blob[i].len) == 0),
             "blob changed in a round trip");
    must(a->next == b->next && a->has_ext_req == b->has_ext_req, "extension count/request changed in a round trip");
    for (int i = 0; i < a->next; i++) {
        const gw_hs_ext_t *x = &a->ext[i], *y = gw_hs_ext_find(b, x->type);
        must(y && y->version == x->version && y->len == x->len && y->has_mac == x->has_mac &&
                 (!x->len || memcmp(x->data, y->data, x->len) == 0) &&
                 (!x->has_mac || memcmp(x->mac, y->mac, GW_HS_MAC_LEN) == 0),
             "extension changed in a round trip");
    }
    if (a->has_ext_req)
        must(a->ext_req_type == b->ext_req_type && a->ext_req_version == b->ext_req_version &&
                 a->ext_req_arg == b->ext_req_arg, "extension request changed in a round trip");
}

static void decode_one(const uint8_t *buf, size_t len)
{
    char why[256];
    uint16_t ver, type;
    uint32_t body;
    why[0] = '\0';
    gw_status_t hst = gw_hs_decode_header(buf, len, &ver, &type, &body, why, sizeof(why));
    must(strlen(why) < sizeof(why), "why not terminated");
    if (hst == GW_OK)
        must(body <= GW_HS_MAX_BODY, "header accepted an oversized body");

    static gw_hs_msg_t m, m2;
    why[0] = '\0';
    gw_status_t st = gw_hs_decode(buf, len, &m, why, sizeof(why));
    must(strlen(why) < sizeof(why), "why not terminated");
    if (st != GW_OK) {
        must(st == GW_ERR_PROTOCOL || st == GW_ERR_VERSION, "unexpected status for a bad frame");
        must(why[0] != '\0', "a rejected frame has no reason");
        return;
    }
    must(hst == GW_OK, "frame decoded but its header did not");
    must(m.npref >= 0 && m.npref <= GW_HS_MAX_TL && m.nblob >= 0 && m.nblob <= GW_HS_MAX_TL,
         "counts out of range");
    for (int i = 0; i < m.nblob; i++)
        must(m.blob[i].len == 0 ||
                 (m.blob[i].data >= buf && m.blob[i].data + m.blob[i].len <= buf + len),
             "blob points outside the input");
    must(m.next >= 0 && m.next <= GW_HS_MAX_EXT, "extension count out of range");
    for (int i = 0; i < m.next; i++)
        must(m.ext[i].len == 0 || (m.ext[i].data >= buf && m.ext[i].data + m.ext[i].len <= buf + len),
             "extension payload points outside the input");
    must(memchr(m.text, '\0', sizeof(m.text)) != NULL, "text not terminated");
    static uint8_t out[GW_HS_HDR_LEN + GW_HS_MAX_BODY + 64];
    size_t n = gw_hs_encode(&m, out, sizeof(out));
    if (n == 0)
        return; /* e.g. text longer than an encoder limit: not a decoder bug */
    st = gw_hs_decode(out, n, &m2, why, sizeof(why));
    must(st == GW_OK, "re-encoded frame does not decode");
    same_msg(&m, &m2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    decode_one(data, size);
    if (size >= 1 && (data[0] & 1)) {
        /* the same bytes behind a valid header */
        static uint8_t buf[GW_HS_HDR_LEN + GW_HS_MAX_BODY + 16];
        size_t body = size - 1 > GW_HS_MAX_BODY ? GW_HS_MAX_BODY : size - 1;
        gw_put_u32(buf, GW_HS_MAGIC);
        gw_put_u16(buf + 4, GW_HS_VERSION);
        gw_put_u16(buf + 6, (uint16_t)(1 + (data[0] >> 1) % 6));
        gw_put_u32(buf + 8, (uint32_t)body);
        memcpy(buf + GW_HS_HDR_LEN, data + 1, body);
        decode_one(buf, GW_HS_HDR_LEN + body);
        /* the same frame from a peer of another version (the previous one
         * among them): refused with GW_ERR_VERSION, whatever follows */
        uint16_t other = (data[0] & 2) ? (uint16_t)(GW_HS_VERSION - 1) : (uint16_t)(data[0] >> 2);
        if (other != GW_HS_VERSION) {
            static gw_hs_msg_t mv;
            char why[256];
            gw_put_u16(buf + 4, other);
            must(gw_hs_decode(buf, GW_HS_HDR_LEN + body, &mv, why, sizeof(why)) == GW_ERR_VERSION,
                 "a frame of another version was not refused as such");
            must(strstr(why, "version") != NULL, "a version refusal does not say so");
        }
    }
    return 0;
}
