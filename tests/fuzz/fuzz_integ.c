/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_integ.c - libFuzzer target for the integrity check's messages
 * (proto/proto_integrity.h: the manifest and the verdict a peer sends).
 * Half the inputs get a valid magic and version so that the fuzzer reaches
 * the field checks.  A message that decodes must be exactly as long as its
 * fields say, its entries readable, its verdict's detail inside it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "proto/proto_integrity.h"

static void must(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz_integ: %s\n", what);
        abort();
    }
}

static void decode_one(const uint8_t *b, size_t len)
{
    gw_integ_msg_t m;
    char why[200];
    why[0] = '\0';
    gw_status_t st = gw_integ_decode(b, len, &m, why, sizeof(why));
    must(strlen(why) < sizeof(why), "why not terminated");
    if (st != GW_OK) {
        must(st == GW_ERR_PROTOCOL || st == GW_ERR_VERSION, "a bad message must give GW_ERR_PROTOCOL/VERSION");
        must(why[0] != '\0', "a rejected message has no reason");
        return;
    }
    if (m.type == GW_INTEG_MANIFEST) {
        must(len == GW_INTEG_HDR + (size_t)m.n * GW_INTEG_ENT, "manifest length differs from its entries");
        must(m.counted <= 1 && m.kind <= GW_INTEG_KIND_PAGE, "accepted a bad counted flag or kind");
        uint64_t sum = 0;
        for (uint32_t i = 0; i < m.n; i++) {
            gw_integ_went_t e;
            gw_integ_entry(&m, i, &e);
            sum += e.len ^ e.crc;
        }
        (void)sum;
    } else {
        must(m.type == GW_INTEG_VERDICT, "accepted an unknown type");
        must(len == 18u + m.detail_len && m.detail_len <= GW_INTEG_DETAIL_MAX, "verdict detail outside it");
        must(m.status <= 0, "accepted a positive status");
        if (m.detail_len)
            must(m.detail[m.detail_len - 1] == (char)b[len - 1], "detail does not end the message");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    decode_one(data, size);
    if (size >= 8 && size < (1u << 20)) {
        uint8_t *b = malloc(size);
        if (!b)
            return 0;
        memcpy(b, data, size);
        gw_put_u32(b, GW_INTEG_MAGIC);
        gw_put_u16(b + 4, GW_INTEG_VERSION);
        decode_one(b, size);
        free(b);
    }
    return 0;
}
