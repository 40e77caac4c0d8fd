/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_tcp_hdr.c - libFuzzer target for the tcp frame header decoder.
 * Inputs shorter than a header are padded with zeros; half the inputs get a
 * valid magic and version so the fuzzer reaches the field checks.  A header
 * that decodes must re-encode to one that decodes to the same fields. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/tcp/tcp.h"

static void must(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz_tcp_hdr: %s\n", what);
        abort();
    }
}

static void decode_one(const uint8_t *b)
{
    gw_tcp_hdr_t h;
    char why[256];
    why[0] = '\0';
    gw_status_t st = gw_tcp_hdr_decode(b, &h, why, sizeof(why));
    must(strlen(why) < sizeof(why), "why not terminated");
    if (st != GW_OK) {
        must(st == GW_ERR_PROTOCOL, "a bad header must give GW_ERR_PROTOCOL");
        must(why[0] != '\0', "a rejected header has no reason");
        return;
    }
    must(h.type >= GW_TCP_PUT && h.type <= GW_TCP_FRAME_MAX, "accepted an unknown frame type");
    must(h.aux <= 0, "accepted a positive status");
    uint8_t out[GW_TCP_HDR];
    gw_tcp_hdr_encode(out, &h);
    gw_tcp_hdr_t h2;
    must(gw_tcp_hdr_decode(out, &h2, why, sizeof(why)) == GW_OK, "re-encoded header does not decode");
    must(h.type == h2.type && h.flags == h2.flags && h.aux == h2.aux && h.id == h2.id &&
             h.key == h2.key && h.addr == h2.addr && h.len == h2.len && h.val == h2.val,
         "fields changed in a round trip");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t b[GW_TCP_HDR];
    memset(b, 0, sizeof(b));
    memcpy(b, data, size < sizeof(b) ? size : sizeof(b));
    decode_one(b);
    if (size && (data[0] & 1)) {
        b[0] = GW_TCP_MAGIC;
        b[1] = GW_TCP_VERSION;
        decode_one(b);
    }
    return 0;
}
