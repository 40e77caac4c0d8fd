/* names_wire.c - encoder and decoder of the published-regions table. */
#include "bootstrap/names_wire.h"

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

/* Walks entries; with want >= 0 stops at that index and fills *out. */
static gw_status_t walk(const uint8_t *buf, size_t len, gw_nt_header_t *hdr, long want, gw_nt_entry_t *out,
                        char *why, size_t whylen)
{
    if (!buf || len < GW_NT_FIXED_LEN) {
        snprintf(why, whylen, "names table of %zu bytes is shorter than its %d-byte header", len, GW_NT_FIXED_LEN);
        return GW_ERR_PROTOCOL;
    }
    if (gw_get_u32(buf) != GW_NT_MAGIC) {
        snprintf(why, whylen, "names table has bad magic 0x%08x", gw_get_u32(buf));
        return GW_ERR_PROTOCOL;
    }
    if (gw_get_u16(buf + 4) != GW_NT_VERSION) {
        snprintf(why, whylen, "names table version %u, this build reads %u", gw_get_u16(buf + 4), GW_NT_VERSION);
        return GW_ERR_VERSION;
    }
    unsigned count = gw_get_u16(buf + 6);
    uint32_t total = gw_get_u32(buf + 8);
    if (total != len || total > GW_NT_MAX_LEN) {
        snprintf(why, whylen, "names table says %u bytes, %zu given (limit %d)", total, len, GW_NT_MAX_LEN);
        return GW_ERR_PROTOCOL;
    }
    memset(hdr, 0, sizeof(*hdr));
    hdr->uuid = gw_get_u64(buf + 12);
    hdr->epoch = gw_get_u64(buf + 20);
    hdr->count = count;
    size_t nl = buf[28], off = GW_NT_FIXED_LEN;
    if (off + nl > len || (nl && !name_ok(buf + off, nl))) {
        snprintf(why, whylen, "names table has a bad agent name");
        return GW_ERR_PROTOCOL;
    }
    memcpy(hdr->name, buf + off, nl);
    off += nl;
    size_t seen[GW_NT_MAX_LEN / 50 + 1]; /* name offsets: an entry takes at least 50 bytes */
    if (count > sizeof(seen) / sizeof(seen[0])) {
        snprintf(why, whylen, "names table claims %u entries, more than %zu fit", count, sizeof(seen) / sizeof(seen[0]));
        return GW_ERR_PROTOCOL;
    }
    for (unsigned i = 0; i < count; i++) {
        if (off + 1 > len || off + 1 + buf[off] + 2 > len || !name_ok(buf + off + 1, buf[off])) {
            snprintf(why, whylen, "names table entry %u has a bad or truncated name", i);
            return GW_ERR_PROTOCOL;
        }
        gw_nt_entry_t e;
        memset(&e, 0, sizeof(e));
        size_t enl = buf[off];
        if (want < 0) {
            for (unsigned j = 0; j < i; j++)
                if (buf[seen[j]] == enl && !memcmp(buf + seen[j] + 1, buf + off + 1, enl)) {
                    snprintf(why, whylen, "names table lists region \"%.*s\" twice", (int)enl, buf + off + 1);
                    return GW_ERR_PROTOCOL;
                }
            seen[i] = off;
        }
        memcpy(e.name, buf + off + 1, enl);
        off += 1 + enl;
        e.key_len = gw_get_u16(buf + off);
        off += 2;
        if (off + e.key_len > len) {
            snprintf(why, whylen, "names table entry %u (%s): key runs past the end", i, e.name);
            return GW_ERR_PROTOCOL;
        }
        e.key = buf + off;
        off += e.key_len;
        gw_rkey_wire_t rk;
        char kw[160];
        if (gw_rkey_decode(e.key, e.key_len, &rk, kw, sizeof(kw)) != GW_OK || rk.owner_uuid != hdr->uuid) {
            snprintf(why, whylen, "names table entry %u (%s): %s", i, e.name,
                     rk.owner_uuid != hdr->uuid ? "key issued by another context" : kw);
            return GW_ERR_PROTOCOL;
        }
        if (want == (long)i) {
            *out = e;
            return GW_OK;
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
    gw_put_u32(buf, GW_NT_MAGIC);
    gw_put_u16(buf + 4, GW_NT_VERSION);
    gw_put_u64(buf + 12, uuid);
    gw_put_u64(buf + 20, epoch);
    buf[28] = (uint8_t)nl;
    memcpy(buf + GW_NT_FIXED_LEN, name, nl);
    e->len = GW_NT_FIXED_LEN + nl;
}

void gw_nt_add(gw_nt_enc_t *e, const char *name, const uint8_t *key, size_t key_len)
{
    size_t nl = strlen(name);
    if (e->overflow || nl > GW_NAME_MAX || key_len > 0xffff || e->count == 0xffff ||
        e->len + 3 + nl + key_len > e->cap) {
        e->overflow = 1;
        return;
    }
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
    return e->len;
}
