/* SPDX-License-Identifier: Apache-2.0 */
/* table_wire.h - the published-regions table an agent hands its peers
 * (names layer).  It travels in the handshake's READY message when it
 * fits one (GW_NT_INLINE_MAX), else as a stub there and in pieces through
 * extension-only handshakes; an HMAC covers what each READY carries when
 * authentication is on; the directory never holds it.
 *
 * Table, version 2 (little-endian):
 *   0  u32 magic "GWNT"   4 u16 version (GW_NT_VERSION)   6 u16 entry count
 *   8  u32 length of these bytes  12 u64 owner context uuid  20 u64 epoch
 *  28  u32 length of the whole table  32 u8 agent name length  33 name bytes
 *  then per entry: u8 name length, name bytes, u16 key length, packed remote
 *  key (bootstrap/wire.h "GWRK"), whose owner uuid must be the table's.
 * Entries are sorted by name (bytewise, strictly ascending: no name twice).
 * A *stub* has no entries and a whole-table length above its own: it names
 * the agent (uuid, epoch, name, entry count) and says the entries must be
 * fetched in pieces.  Version 1 (no whole-table length, any order, 12 KiB)
 * is refused with GW_ERR_VERSION.
 *
 * Piece of a table (the answer to an extension-only handshake that asks for the
 * bytes from an offset):
 *   0  u32 magic "GWNP"   4 u16 version (GW_NP_VERSION)   6 u16 zero
 *   8  u32 offset  12 u32 length of the whole table  16 u32 data length
 *  20  u64 owner context uuid  28 u64 table serial (changes whenever the
 *      agent's table does: pieces of two serials are never mixed)
 *  36  data
 * Names: 1..GW_NAME_MAX bytes of [A-Za-z0-9._:@+-].
 * Both decoders are fuzzed (tests/fuzz/fuzz_names_table.c). */
#ifndef GW_NAMES_TABLE_WIRE_H
#define GW_NAMES_TABLE_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "gpuwire.h"

#define GW_NT_MAGIC 0x544e5747u /* "GWNT" */
#define GW_NT_VERSION 2
#define GW_NT_FIXED_LEN 33
#define GW_NT_MAX_LEN (1u << 20) /* a whole table */
#define GW_NT_INLINE_MAX 12288   /* the most a READY carries (a handshake body is 16 KiB) */
#define GW_NAME_MAX 63

#define GW_NP_MAGIC 0x504e5747u /* "GWNP" */
#define GW_NP_VERSION 1
#define GW_NP_HDR_LEN 36
#define GW_NP_MAX_DATA GW_NT_INLINE_MAX

typedef struct gw_nt_entry {
    char name[GW_NAME_MAX + 1];
    const uint8_t *key; /* points into the decoded buffer */
    uint16_t key_len;
} gw_nt_entry_t;

typedef struct gw_nt_header {
    uint64_t uuid, epoch;
    char name[GW_NAME_MAX + 1];
    unsigned count;
    uint32_t full_len; /* the whole table's length */
    int stub;          /* no entries here: fetch them in pieces */
} gw_nt_header_t;

/* 1 when s is a valid name (length and characters). */
int gw_name_valid(const char *s);

/* Checks the whole table; fills hdr.  GW_ERR_PROTOCOL with why. */
gw_status_t gw_nt_decode(const uint8_t *buf, size_t len, gw_nt_header_t *hdr, char *why, size_t whylen);
/* The i-th entry of a table gw_nt_decode() accepted; 0 / -1 (O(i)). */
int gw_nt_entry(const uint8_t *buf, size_t len, unsigned i, gw_nt_entry_t *e);
/* Walks the entries of a table gw_nt_decode() accepted: *off = 0 first,
 * then 1 with *e per entry until 0 (none left). */
int gw_nt_next(const uint8_t *buf, size_t len, size_t *off, gw_nt_entry_t *e);
/* Finds entry `name` in a table gw_nt_decode() accepted (stops early: the
 * entries are sorted); 0 / -1. */
int gw_nt_find(const uint8_t *buf, size_t len, const char *name, gw_nt_entry_t *e);
/* The stub of a whole table (its header with full_len set, no entries)
 * into out (cap >= GW_NT_FIXED_LEN + GW_NAME_MAX); returns its length or 0. */
size_t gw_nt_stub(const uint8_t *table, size_t len, uint8_t *out, size_t cap);

/* Pieces. */
typedef struct gw_np_header {
    uint32_t off, full_len, data_len;
    uint64_t uuid, serial;
    const uint8_t *data; /* points into the decoded buffer */
} gw_np_header_t;
/* Checks a piece; GW_ERR_PROTOCOL / GW_ERR_VERSION with why. */
gw_status_t gw_np_decode(const uint8_t *buf, size_t len, gw_np_header_t *hdr, char *why, size_t whylen);
/* The piece of table (len bytes) from off (<= len): at most GW_NP_MAX_DATA
 * bytes and what fits cap; returns its length, 0 when cap is too small. */
size_t gw_np_encode(uint8_t *out, size_t cap, const uint8_t *table, size_t len, size_t off, uint64_t uuid,
                    uint64_t serial);

/* Encoder: start, add entries in ascending name order, finish.  An entry out
 * of order or past cap makes the table unusable (finish returns 0). */
typedef struct gw_nt_enc {
    uint8_t *buf;
    size_t cap, len;
    size_t last; /* offset of the last entry, 0 before the first */
    unsigned count;
    int overflow;
} gw_nt_enc_t;
void gw_nt_begin(gw_nt_enc_t *e, uint8_t *buf, size_t cap, uint64_t uuid, uint64_t epoch, const char *name);
void gw_nt_add(gw_nt_enc_t *e, const char *name, const uint8_t *key, size_t key_len);
/* Returns the table length, 0 on overflow. */
size_t gw_nt_finish(gw_nt_enc_t *e);

#endif
