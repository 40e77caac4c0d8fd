/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_rkey.c - libFuzzer target for the packed remote key decoder.
 *
 * Half the inputs get a valid magic, version and total length so the fuzzer
 * reaches the transport blobs.  A key that decodes must round-trip. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/wire.h"
#include "core/util.h"

static void must(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz_rkey: %s\n", what);
        abort();
    }
}

static void decode_one(const uint8_t *buf, size_t len)
{
    char why[256];
    static gw_rkey_wire_t k, k2;
    why[0] = '\0';
    gw_status_t st = gw_rkey_decode(buf, len, &k, why, sizeof(why));
    must(strlen(why) < sizeof(why), "why not terminated");
    if (st != GW_OK) {
        must(st == GW_ERR_INVALID_KEY, "a bad key must give GW_ERR_INVALID_KEY");
        must(why[0] != '\0', "a rejected key has no reason");
        return;
    }
    must(k.nblob >= 0 && k.nblob <= GW_HS_MAX_TL, "blob count out of range");
    for (int i = 0; i < k.nblob; i++)
        must(k.blob[i].len == 0 ||
                 (k.blob[i].data >= buf && k.blob[i].data + k.blob[i].len <= buf + len),
             "blob points outside the input");
    static uint8_t out[GW_RKEY_MAX_LEN + 64];
    size_t n = gw_rkey_encode(&k, out, sizeof(out));
    must(n > 0 && n <= sizeof(out), "a decoded key does not re-encode");
    st = gw_rkey_decode(out, n, &k2, why, sizeof(why));
    must(st == GW_OK, "re-encoded key does not decode");
    must(k.owner_uuid == k2.owner_uuid && k.id == k2.id && k.addr == k2.addr && k.len == k2.len &&
             k.access == k2.access && k.mem_type == k2.mem_type && k.nblob == k2.nblob,
         "fields changed in a round trip");
    for (int i = 0; i < k.nblob; i++)
        must(k.blob[i].tl == k2.blob[i].tl && k.blob[i].len == k2.blob[i].len &&
                 (k.blob[i].len == 0 || memcmp(k.blob[i].data, k2.blob[i].data, k.blob[i].len) == 0),
             "blob changed in a round trip");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    decode_one(data, size);
    if (size >= 1 && (data[0] & 1)) {
        static uint8_t buf[GW_RKEY_MAX_LEN + 16];
        size_t n = 6 + (size - 1);
        if (n > sizeof(buf))
            n = sizeof(buf);
        gw_put_u32(buf, GW_RKEY_MAGIC);
        gw_put_u16(buf + 4, GW_RKEY_VERSION);
        memcpy(buf + 6, data + 1, n - 6);
        if (n >= 8)
            gw_put_u16(buf + 6, (uint16_t)n); /* total length consistent */
        decode_one(buf, n);
    }
    return 0;
}
