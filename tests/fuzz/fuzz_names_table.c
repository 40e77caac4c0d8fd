/* fuzz_names_table.c - libFuzzer target for the names table decoder
 * (bootstrap/names_wire.c): what an agent's handshake hands its peers.
 *
 * Half the inputs get a valid magic, version and total length so the fuzzer
 * reaches the entries.  A table that decodes must list entries whose keys
 * lie inside the input, and must round-trip through the encoder. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/names_wire.h"
#include "bootstrap/wire.h"
#include "core/util.h"

static void must(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz_names_table: %s\n", what);
        abort();
    }
}

static void decode_one(const uint8_t *buf, size_t len)
{
    char why[256];
    gw_nt_header_t h, h2;
    why[0] = '\0';
    gw_status_t st = gw_nt_decode(buf, len, &h, why, sizeof(why));
    must(strlen(why) < sizeof(why), "why not terminated");
    if (st != GW_OK) {
        must(st == GW_ERR_PROTOCOL || st == GW_ERR_VERSION, "a bad table must give PROTOCOL or VERSION");
        must(why[0] != '\0', "a rejected table has no reason");
        return;
    }
    must(!h.name[0] || gw_name_valid(h.name), "agent name invalid");
    static uint8_t out[GW_NT_MAX_LEN];
    gw_nt_enc_t e;
    gw_nt_begin(&e, out, sizeof(out), h.uuid, h.epoch, h.name);
    for (unsigned i = 0; i < h.count; i++) {
        gw_nt_entry_t en;
        must(gw_nt_entry(buf, len, i, &en) == 0, "a listed entry cannot be read");
        must(gw_name_valid(en.name), "entry name invalid");
        must(en.key >= buf && en.key + en.key_len <= buf + len, "key points outside the input");
        gw_rkey_wire_t rk;
        must(gw_rkey_decode(en.key, en.key_len, &rk, why, sizeof(why)) == GW_OK && rk.owner_uuid == h.uuid,
             "an accepted entry's key does not decode or has another owner");
        gw_nt_add(&e, en.name, en.key, en.key_len);
    }
    gw_nt_entry_t past;
    must(gw_nt_entry(buf, len, h.count, &past) != 0, "an entry past the count");
    size_t n = gw_nt_finish(&e);
    must(n == len && memcmp(out, buf, len) == 0, "a decoded table does not re-encode to the same bytes");
    must(gw_nt_decode(out, n, &h2, why, sizeof(why)) == GW_OK && h2.count == h.count, "round trip");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    decode_one(data, size);
    if (size >= 1 && (data[0] & 1)) {
        static uint8_t buf[GW_NT_MAX_LEN];
        size_t body = size - 1, n = 6 + body < 12 ? 12 : 6 + body;
        if (n > sizeof(buf))
            n = sizeof(buf);
        memset(buf, 0, n);
        gw_put_u32(buf, GW_NT_MAGIC);
        gw_put_u16(buf + 4, GW_NT_VERSION);
        memcpy(buf + 6, data + 1, body < n - 6 ? body : n - 6);
        gw_put_u32(buf + 8, (uint32_t)n); /* total length consistent */
        decode_one(buf, n);
    }
    return 0;
}
