/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_names_table.c - libFuzzer target for the names table decoder and
 * the decoder of its pieces (names/table_wire.c): what an agent's
 * handshake hands its peers.
 *
 * Half the inputs get a valid magic, version and lengths (of the bytes and,
 * for one in four, of a whole table: a stub) so the fuzzer reaches the
 * entries.  A table that decodes must list entries whose keys lie inside the
 * input, in order, and must round-trip through the encoder; a stub must
 * list none.  Every input is also read as a piece, which must lie inside
 * the whole table it names and round-trip through the piece encoder. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "names/table_wire.h"
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
    gw_nt_entry_t en0;
    size_t off = 0;
    if (h.stub) {
        must(h.full_len > len && gw_nt_next(buf, len, &off, &en0) == 0 && gw_nt_entry(buf, len, 0, &en0) != 0,
             "a stub lists entries");
        uint8_t again[GW_NT_FIXED_LEN + GW_NAME_MAX];
        /* the stub of a stub is itself but for the whole-table length */
        must(gw_nt_stub(buf, len, again, sizeof(again)) == len && !memcmp(again, buf, 8) &&
                 !memcmp(again + 12, buf + 12, 16) && !memcmp(again + 32, buf + 32, len - 32) &&
                 gw_get_u32(again + 28) == len,
             "a stub does not re-make itself");
        return;
    }
    unsigned walked = 0;
    while (gw_nt_next(buf, len, &off, &en0)) {
        gw_nt_entry_t f;
        must(gw_nt_find(buf, len, en0.name, &f) == 0 && f.key == en0.key, "an entry cannot be found by name");
        walked++;
    }
    must(walked == h.count && off == len, "walking the entries disagrees with the count");
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

static void piece_one(const uint8_t *buf, size_t len)
{
    char why[256];
    why[0] = '\0';
    gw_np_header_t h;
    gw_status_t st = gw_np_decode(buf, len, &h, why, sizeof(why));
    must(strlen(why) < sizeof(why), "why not terminated");
    if (st != GW_OK) {
        must(st == GW_ERR_PROTOCOL || st == GW_ERR_VERSION, "a bad piece must give PROTOCOL or VERSION");
        must(why[0] != '\0', "a rejected piece has no reason");
        return;
    }
    must(h.data == buf + GW_NP_HDR_LEN && h.data_len == len - GW_NP_HDR_LEN && h.data_len <= GW_NP_MAX_DATA &&
             (uint64_t)h.off + h.data_len <= h.full_len && h.full_len <= GW_NT_MAX_LEN,
         "an accepted piece lies outside its table");
    static uint8_t whole[GW_NT_MAX_LEN], out[GW_NP_HDR_LEN + GW_NP_MAX_DATA];
    memcpy(whole + h.off, h.data, h.data_len);
    size_t n = gw_np_encode(out, sizeof(out), whole, h.full_len, h.off, h.uuid, h.serial);
    must(n >= GW_NP_HDR_LEN + h.data_len && !memcmp(out, buf, 8) && !memcmp(out + 12, buf + 12, 4) &&
             !memcmp(out + 20, buf + 20, 16) && !memcmp(out + GW_NP_HDR_LEN, h.data, h.data_len),
         "a piece does not re-encode to the same bytes");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    decode_one(data, size);
    piece_one(data, size);
    if (size >= 1 && (data[0] & 1)) {
        static uint8_t buf[GW_NT_MAX_LEN];
        size_t body = size - 1, n = 6 + body < GW_NT_FIXED_LEN ? GW_NT_FIXED_LEN : 6 + body;
        if (n > sizeof(buf))
            n = sizeof(buf);
        memset(buf, 0, n);
        gw_put_u32(buf, GW_NT_MAGIC);
        gw_put_u16(buf + 4, GW_NT_VERSION);
        memcpy(buf + 6, data + 1, body < n - 6 ? body : n - 6);
        gw_put_u32(buf + 8, (uint32_t)n); /* lengths consistent: a whole table, or a stub */
        gw_put_u32(buf + 28, (data[0] & 6) == 6 ? (uint32_t)n + (data[0] >> 3) + 1 : (uint32_t)n);
        decode_one(buf, n);
        /* and as a piece with a consistent header */
        if (n >= GW_NP_HDR_LEN) {
            gw_put_u32(buf, GW_NP_MAGIC);
            gw_put_u16(buf + 4, GW_NP_VERSION);
            gw_put_u16(buf + 6, 0);
            size_t dl = n - GW_NP_HDR_LEN;
            gw_put_u32(buf + 16, (uint32_t)dl);
            uint32_t off = gw_get_u32(buf + 8) % (GW_NT_MAX_LEN / 2);
            gw_put_u32(buf + 8, off);
            gw_put_u32(buf + 12, (uint32_t)(off + dl + (data[0] >> 4)));
            piece_one(buf, n);
        }
    }
    return 0;
}
