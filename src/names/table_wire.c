/* SPDX-License-Identifier: Apache-2.0 */
/* table_wire.c - encoder and decoder of the published-regions table and of
 * its pieces (table_wire.h has the formats). */
#include "names/table_wire.h"

#include <stdio.h>
#include <string.h>

#include "bootstrap/wire.h"
#include "core/util.h"

static int name_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == ':' || c == '@' || c == '+' || c == '-';
}

static int name_ok(const uint8_t *s, size_t n)
{
    if (!n || n > GW_NAME_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!name_char(s[i]))
            return 0;
    return 1;
}

int gw_name_valid(const char *s)
{
    return s && name_ok((const uint8_t *)s, strnlen(s, GW_NAME_MAX + 1));
}

/* Bytewise order of two names (a shorter prefix first), as strcmp. */
static int name_cmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
    int r = memcmp(a, b, al < bl ? al : bl);
    return r ? r : (al > bl) - (al < bl);
}

/* Checks the header; fills hdr; returns the offset of the first entry or 0
 * with why. */
static size_t header(const uint8_t *buf, size_t len, gw_nt_header_t *hdr, gw_status_t *st, char *why, size_t whylen)
{
    *st = GW_ERR_PROTOCOL;
    if (!buf || len < GW_NT_FIXED_LEN) {
        snprintf(why, whylen, "names table of %zu bytes is shorter than its %d-byte header", len, GW_NT_FIXED_LEN);
        return 0;
    }
    if (gw_get_u32(buf) != GW_NT_MAGIC) {
        snprintf(why, whylen, "names table has bad magic 0x%08x", gw_get_u32(buf));
        return 0;
    }
    if (gw_get_u16(buf + 4) != GW_NT_VERSION) {
        snprintf(why, whylen, "names table version %u, this build reads %u", gw_get_u16(buf + 4), GW_NT_VERSION);
        *st = GW_ERR_VERSION;
        return 0;
    }
    uint32_t total = gw_get_u32(buf + 8), full = gw_get_u32(buf + 28);
    if (total != len || total > GW_NT_MAX_LEN) {
        snprintf(why, whylen, "names table says %u bytes, %zu given (limit %u)", total, len, GW_NT_MAX_LEN);
        return 0;
    }
    if (full < total || full > GW_NT_MAX_LEN) {
        snprintf(why, whylen, "names table says the whole table has %u bytes (these are %u, limit %u)", full, total,
                 GW_NT_MAX_LEN);
        return 0;
    }
    memset(hdr, 0, sizeof(*hdr));
    hdr->uuid = gw_get_u64(buf + 12);
    hdr->epoch = gw_get_u64(buf + 20);
    hdr->count = gw_get_u16(buf + 6);
    hdr->full_len = full;
    hdr->stub = full != total;
    size_t nl = buf[32], off = GW_NT_FIXED_LEN;
    if (off + nl > len || (nl && !name_ok(buf + off, nl))) {
        snprintf(why, whylen, "names table has a bad agent name");
        return 0;
    }
    memcpy(hdr->name, buf + off, nl);
    off += nl;
    if (hdr->stub && off != len) {
        snprintf(why, whylen, "names table stub (whole table %u bytes) carries %zu bytes of entries", full, len - off);
        return 0;
    }
    *st = GW_OK;
    return off;
}

/* Walks entries; with want >= 0 stops at that index and fills *out. */
static gw_status_t walk(const uint8_t *buf, size_t len, gw_nt_header_t *hdr, long want, gw_nt_entry_t *out,
                        char *why, size_t whylen)
{
    gw_status_t st;
    size_t off = header(buf, len, hdr, &st, why, whylen);
    if (!off)
        return st;
    if (hdr->stub)
        return want >= 0 ? GW_ERR_NOT_FOUND : GW_OK;
    const uint8_t *prev = NULL;
    size_t prev_len = 0;
    for (unsigned i = 0; i < hdr->count; i++) {
        if (off + 1 > len || off + 1 + buf[off] + 2 > len || !name_ok(buf + off + 1, buf[off])) {
            snprintf(why, whylen, "names table entry %u has a bad or truncated name", i);
            return GW_ERR_PROTOCOL;
        }
        gw_nt_entry_t e;
        memset(&e, 0, sizeof(e));
        size_t enl = buf[off];
        const uint8_t *nm = buf + off + 1;
        if (prev && name_cmp(prev, prev_len, nm, enl) >= 0) {
            snprintf(why, whylen, "names table lists region \"%.*s\" %s", (int)enl, nm,
                     name_cmp(prev, prev_len, nm, enl) ? "out of order" : "twice");
            return GW_ERR_PROTOCOL;
        }
        prev = nm;
        prev_len = enl;
        memcpy(e.name, nm, enl);
        off += 1 + enl;
        e.key_len = gw_get_u16(buf + off);
        off += 2;
        if (off + e.key_len > len) {
            snprintf(why, whylen, "names table entry %u (%s): key runs past the end", i, e.name);
            return GW_ERR_PROTOCOL;
        }
        e.key = buf + off;
        off += e.key_len;
        if (want == (long)i) {
            *out = e;
            return GW_OK;
        }
        if (want >= 0)
            continue;
        gw_rkey_wire_t rk;
        char kw[160];
        if (gw_rkey_decode(e.key, e.key_len, &rk, kw, sizeof(kw)) != GW_OK || rk.owner_uuid != hdr->uuid) {
            snprintf(why, whylen, "names table entry %u (%s): %s", i, e.name,
                     rk.owner_uuid != hdr->uuid ? "key issued by another context" : kw);
            return GW_ERR_PROTOCOL;
        }
    }
    if (want >= 0)
        return GW_ERR_NOT_FOUND;
    if (off != len) {
        snprintf(why, whylen, "names table has %zu trailing bytes", len - off);
        return GW_ERR_PROTOCOL;
    }
    return GW_OK;
}

gw_status_t gw_nt_decode(const uint8_t *buf, size_t len, gw_nt_header_t *hdr, char *why, size_t whylen)
{
    return walk(buf, len, hdr, -1, NULL, why, whylen);
}

int gw_nt_entry(const uint8_t *buf, size_t len, unsigned i, gw_nt_entry_t *e)
{
    gw_nt_header_t h;
    char why[8];
    return walk(buf, len, &h, (long)i, e, why, sizeof(why)) == GW_OK ? 0 : -1;
}

int gw_nt_next(const uint8_t *buf, size_t len, size_t *off, gw_nt_entry_t *e)
{
    if (!buf || len < GW_NT_FIXED_LEN)
        return 0;
    if (*off == 0) {
        if (gw_get_u32(buf + 28) != len) /* a stub */
            return 0;
        *off = GW_NT_FIXED_LEN + buf[32];
    }
    size_t o = *off;
    if (o + 1 > len || o + 1 + buf[o] + 2 > len)
        return 0;
    size_t nl = buf[o];
    memcpy(e->name, buf + o + 1, nl);
    e->name[nl] = '\0';
    e->key_len = gw_get_u16(buf + o + 1 + nl);
    e->key = buf + o + 3 + nl;
    if (o + 3 + nl + e->key_len > len)
        return 0;
    *off = o + 3 + nl + e->key_len;
    return 1;
}

int gw_nt_find(const uint8_t *buf, size_t len, const char *name, gw_nt_entry_t *e)
{
    if (!buf || len < GW_NT_FIXED_LEN || gw_get_u32(buf + 28) != len) /* a stub has no entries */
        return -1;
    size_t nl = strlen(name), o = GW_NT_FIXED_LEN + buf[32];
    while (o + 3 <= len) { /* compared in place: nothing copied until it matches */
        size_t enl = buf[o];
        if (o + 3 + enl > len)
            break;
        size_t kl = gw_get_u16(buf + o + 1 + enl);
        int c = name_cmp(buf + o + 1, enl, (const uint8_t *)name, nl);
        if (c > 0) /* sorted: it is not there */
            break;
        if (c == 0) {
            if (o + 3 + enl + kl > len)
                break;
            memcpy(e->name, buf + o + 1, enl);
            e->name[enl] = '\0';
            e->key_len = (uint16_t)kl;
            e->key = buf + o + 3 + enl;
            return 0;
        }
        o += 3 + enl + kl;
    }
    return -1;
}

size_t gw_nt_stub(const uint8_t *table, size_t len, uint8_t *out, size_t cap)
{
    if (!table || len < GW_NT_FIXED_LEN)
        return 0;
    size_t n = GW_NT_FIXED_LEN + table[32];
    if (n > len || n > cap)
        return 0;
    memcpy(out, table, n);
    gw_put_u32(out + 8, (uint32_t)n);
    gw_put_u32(out + 28, (uint32_t)len);
    return n;
}

void gw_nt_begin(gw_nt_enc_t *e, uint8_t *buf, size_t cap, uint64_t uuid, uint64_t epoch, const char *name)
{
    size_t nl = name ? strlen(name) : 0;
    memset(e, 0, sizeof(*e));
    e->buf = buf;
    e->cap = cap < GW_NT_MAX_LEN ? cap : GW_NT_MAX_LEN;
    if (GW_NT_FIXED_LEN + nl > e->cap || nl > GW_NAME_MAX) {
        e->overflow = 1;
        return;
    }
    memset(buf, 0, GW_NT_FIXED_LEN);
    gw_put_u32(buf, GW_NT_MAGIC);
    gw_put_u16(buf + 4, GW_NT_VERSION);
    gw_put_u64(buf + 12, uuid);
    gw_put_u64(buf + 20, epoch);
    buf[32] = (uint8_t)nl;
    memcpy(buf + GW_NT_FIXED_LEN, name, nl);
    e->len = GW_NT_FIXED_LEN + nl;
}

void gw_nt_add(gw_nt_enc_t *e, const char *name, const uint8_t *key, size_t key_len)
{
    size_t nl = strlen(name);
    if (e->overflow || nl > GW_NAME_MAX || key_len > 0xffff || e->count == 0xffff ||
        e->len + 3 + nl + key_len > e->cap ||
        (e->last && name_cmp(e->buf + e->last + 1, e->buf[e->last], (const uint8_t *)name, nl) >= 0)) {
        e->overflow = 1;
        return;
    }
    e->last = e->len;
    e->buf[e->len] = (uint8_t)nl;
    memcpy(e->buf + e->len + 1, name, nl);
    gw_put_u16(e->buf + e->len + 1 + nl, (uint16_t)key_len);
    memcpy(e->buf + e->len + 3 + nl, key, key_len);
    e->len += 3 + nl + key_len;
    e->count++;
}

size_t gw_nt_finish(gw_nt_enc_t *e)
{
    if (e->overflow)
        return 0;
    gw_put_u16(e->buf + 6, (uint16_t)e->count);
    gw_put_u32(e->buf + 8, (uint32_t)e->len);
    gw_put_u32(e->buf + 28, (uint32_t)e->len);
    return e->len;
}

/* ---- pieces ------------------------------------------------------------------------ */
gw_status_t gw_np_decode(const uint8_t *buf, size_t len, gw_np_header_t *hdr, char *why, size_t whylen)
{
    if (!buf || len < GW_NP_HDR_LEN) {
        snprintf(why, whylen, "names table piece of %zu bytes is shorter than its %d-byte header", len,
                 GW_NP_HDR_LEN);
        return GW_ERR_PROTOCOL;
    }
    if (gw_get_u32(buf) != GW_NP_MAGIC) {
        snprintf(why, whylen, "names table piece has bad magic 0x%08x", gw_get_u32(buf));
        return GW_ERR_PROTOCOL;
    }
    if (gw_get_u16(buf + 4) != GW_NP_VERSION) {
        snprintf(why, whylen, "names table piece version %u, this build reads %u", gw_get_u16(buf + 4),
                 GW_NP_VERSION);
        return GW_ERR_VERSION;
    }
    memset(hdr, 0, sizeof(*hdr));
    hdr->off = gw_get_u32(buf + 8);
    hdr->full_len = gw_get_u32(buf + 12);
    hdr->data_len = gw_get_u32(buf + 16);
    hdr->uuid = gw_get_u64(buf + 20);
    hdr->serial = gw_get_u64(buf + 28);
    hdr->data = buf + GW_NP_HDR_LEN;
    if (gw_get_u16(buf + 6) != 0 || hdr->data_len != len - GW_NP_HDR_LEN || !hdr->data_len ||
        hdr->data_len > GW_NP_MAX_DATA || hdr->full_len < GW_NT_FIXED_LEN || hdr->full_len > GW_NT_MAX_LEN ||
        (uint64_t)hdr->off + hdr->data_len > hdr->full_len) {
        snprintf(why, whylen,
                 "names table piece is inconsistent: bytes %u..%u of %u (limit %u), %zu given, piece limit %d",
                 hdr->off, hdr->off + hdr->data_len, hdr->full_len, GW_NT_MAX_LEN, len - GW_NP_HDR_LEN,
                 GW_NP_MAX_DATA);
        return GW_ERR_PROTOCOL;
    }
    return GW_OK;
}

size_t gw_np_encode(uint8_t *out, size_t cap, const uint8_t *table, size_t len, size_t off, uint64_t uuid,
                    uint64_t serial)
{
    if (off >= len || len > GW_NT_MAX_LEN || cap <= GW_NP_HDR_LEN)
        return 0;
    size_t n = len - off;
    if (n > GW_NP_MAX_DATA)
        n = GW_NP_MAX_DATA;
    if (n > cap - GW_NP_HDR_LEN)
        n = cap - GW_NP_HDR_LEN;
    gw_put_u32(out, GW_NP_MAGIC);
    gw_put_u16(out + 4, GW_NP_VERSION);
    gw_put_u16(out + 6, 0);
    gw_put_u32(out + 8, (uint32_t)off);
    gw_put_u32(out + 12, (uint32_t)len);
    gw_put_u32(out + 16, (uint32_t)n);
    gw_put_u64(out + 20, uuid);
    gw_put_u64(out + 28, serial);
    memcpy(out + GW_NP_HDR_LEN, table + off, n);
    return GW_NP_HDR_LEN + n;
}
