/* names_wire.h - the published-regions table an agent hands its peers
 * (bootstrap layer).  It travels in the handshake's READY message (and in
 * the answer to a table-only handshake), covered by an HMAC when
 * authentication is on; the directory never holds it.
 *
 * Table (little-endian):
 *   0  u32 magic "GWNT"   4 u16 version (GW_NT_VERSION)   6 u16 entry count
 *   8  u32 total length  12 u64 owner context uuid  20 u64 epoch
 *  28  u8 agent name length  29 name bytes
 *  then per entry: u8 name length, name bytes, u16 key length, packed remote
 *  key (bootstrap/wire.h "GWRK"), whose owner uuid must be the table's.
 * Names: 1..GW_NAME_MAX bytes of [A-Za-z0-9._:@+-]; entry names are unique.
 * The decoder is fuzzed (tests/fuzz/fuzz_names_table.c). */
#ifndef GW_BOOTSTRAP_NAMES_WIRE_H
#define GW_BOOTSTRAP_NAMES_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "gpuwire.h"

#define GW_NT_MAGIC 0x544e5747u /* "GWNT" */
#define GW_NT_VERSION 1
#define GW_NT_FIXED_LEN 29
#define GW_NT_MAX_LEN 12288 /* fits a handshake message with room to spare */
#define GW_NAME_MAX 63

typedef struct gw_nt_entry {
    char name[GW_NAME_MAX + 1];
    const uint8_t *key; /* points into the decoded buffer */
    uint16_t key_len;
} gw_nt_entry_t;

typedef struct gw_nt_header {
    uint64_t uuid, epoch;
    char name[GW_NAME_MAX + 1];
    unsigned count;
} gw_nt_header_t;

/* 1 when s is a valid name (length and characters). */
int gw_name_valid(const char *s);

/* Checks the whole table; fills hdr.  GW_ERR_PROTOCOL with why. */
gw_status_t gw_nt_decode(const uint8_t *buf, size_t len, gw_nt_header_t *hdr, char *why, size_t whylen);
/* The i-th entry of a table gw_nt_decode() accepted; 0 / -1. */
int gw_nt_entry(const uint8_t *buf, size_t len, unsigned i, gw_nt_entry_t *e);

/* Encoder: start, add entries, finish.  Returns 0, or -1 when it would pass
 * cap (then the table is unusable). */
typedef struct gw_nt_enc {
    uint8_t *buf;
    size_t cap, len;
    unsigned count;
    int overflow;
} gw_nt_enc_t;
void gw_nt_begin(gw_nt_enc_t *e, uint8_t *buf, size_t cap, uint64_t uuid, uint64_t epoch, const char *name);
void gw_nt_add(gw_nt_enc_t *e, const char *name, const uint8_t *key, size_t key_len);
/* Returns the table length, 0 on overflow. */
size_t gw_nt_finish(gw_nt_enc_t *e);

#endif
