/* SPDX-License-Identifier: Apache-2.0 */
/* wire.c - encoders and decoders of the handshake and remote-key formats. */
#include "bootstrap/wire.h"

#include <stdio.h>
#include <string.h>

#include "core/util.h"

enum {
    T_UUID = 1, T_HOST = 2, T_TOKEN = 3, T_FLAGS = 4, T_NONCE = 5, T_MAC = 6,
    T_PREF = 7, T_BLOB = 8, T_STATUS = 9, T_TEXT = 10, T_CHOSEN = 11, T_STREAM = 12,
    /* 13..15 retired */ T_PID = 16, T_EXT = 17, T_EXT_MAC = 18, T_EXT_REQ = 19
};

gw_status_t gw_hs_decode_header(const uint8_t *hdr, size_t len, uint16_t *version, uint16_t *type,
                                uint32_t *body_len, char *why, size_t whylen)
{
    if (len < GW_HS_HDR_LEN) {
        snprintf(why, whylen, "truncated handshake header (%zu of %d bytes)", len, GW_HS_HDR_LEN);
        return GW_ERR_PROTOCOL;
    }
    uint32_t magic = gw_get_u32(hdr);
    if (magic != GW_HS_MAGIC) {
        snprintf(why, whylen, "bad magic 0x%08x (expected 0x%08x): not a gpuwire peer", magic,
                 GW_HS_MAGIC);
        return GW_ERR_PROTOCOL;
    }
    *version = gw_get_u16(hdr + 4);
    *type = gw_get_u16(hdr + 6);
    *body_len = gw_get_u32(hdr + 8);
    if (*version != GW_HS_VERSION) {
        snprintf(why, whylen, "peer speaks handshake version %u, this build speaks %u",
                 (unsigned)*version, GW_HS_VERSION);
        return GW_ERR_VERSION;
    }
    if (*body_len > GW_HS_MAX_BODY) {
        snprintf(why, whylen, "handshake body of %u bytes exceeds the limit of %d", *body_len,
                 GW_HS_MAX_BODY);
        return GW_ERR_PROTOCOL;
    }
    if (*type < GW_HS_HELLO || *type > GW_HS_JOIN) {
        snprintf(why, whylen, "unknown handshake message type %u", (unsigned)*type);
        return GW_ERR_PROTOCOL;
    }
    return GW_OK;
}

#define NEED(n)                                                                                \
    do {                                                                                       \
        if (tlen != (n)) {                                                                     \
            snprintf(why, whylen, "handshake field %u has length %u, expected %u", tag, tlen,  \
                     (unsigned)(n));                                                           \
            return GW_ERR_PROTOCOL;                                                            \
        }                                                                                      \
    } while (0)

gw_status_t gw_hs_decode(const uint8_t *buf, size_t len, gw_hs_msg_t *out, char *why, size_t whylen)
{
    uint32_t body_len;
    memset(out, 0, sizeof(*out));
    gw_status_t st = gw_hs_decode_header(buf, len, &out->version, &out->type, &body_len, why, whylen);
    if (st != GW_OK)
        return st;
    if (len - GW_HS_HDR_LEN < body_len) {
        snprintf(why, whylen, "truncated handshake message (%zu of %u body bytes)",
                 len - GW_HS_HDR_LEN, body_len);
        return GW_ERR_PROTOCOL;
    }
    const uint8_t *p = buf + GW_HS_HDR_LEN, *end = p + body_len;
    while (p < end) {
        if (end - p < 4) {
            snprintf(why, whylen, "truncated handshake field header");
            return GW_ERR_PROTOCOL;
        }
        unsigned tag = gw_get_u16(p), tlen = gw_get_u16(p + 2);
        p += 4;
        if ((size_t)(end - p) < tlen) {
            snprintf(why, whylen, "handshake field %u claims %u bytes, %zu remain", tag, tlen,
                     (size_t)(end - p));
            return GW_ERR_PROTOCOL;
        }
        switch (tag) {
        case T_UUID: NEED(8); out->uuid = gw_get_u64(p); break;
        case T_HOST: NEED(8); out->host_id = gw_get_u64(p); break;
        case T_TOKEN: NEED(8); out->token = gw_get_u64(p); break;
        case T_FLAGS: NEED(4); out->flags = gw_get_u32(p); break;
        case T_NONCE: NEED(GW_HS_NONCE_LEN); memcpy(out->nonce, p, tlen); out->has_nonce = 1; break;
        case T_MAC: NEED(GW_HS_MAC_LEN); memcpy(out->mac, p, tlen); out->has_mac = 1; break;
        case T_PREF:
            if (tlen > GW_HS_MAX_TL) {
                snprintf(why, whylen, "transport list of %u entries exceeds %d", tlen, GW_HS_MAX_TL);
                return GW_ERR_PROTOCOL;
            }
            memcpy(out->pref, p, tlen);
            out->npref = (int)tlen;
            break;
        case T_BLOB:
            if (tlen < 1 || out->nblob == GW_HS_MAX_TL) {
                snprintf(why, whylen, "bad transport address field (len %u, count %d)", tlen, out->nblob);
                return GW_ERR_PROTOCOL;
            }
            out->blob[out->nblob].tl = p[0];
            out->blob[out->nblob].len = (uint16_t)(tlen - 1);
            out->blob[out->nblob].data = p + 1;
            out->nblob++;
            break;
        case T_STATUS: NEED(4); out->status = (int32_t)gw_get_u32(p); break;
        case T_TEXT: {
            size_t n = tlen < sizeof(out->text) - 1 ? tlen : sizeof(out->text) - 1;
            memcpy(out->text, p, n);
            out->text[n] = '\0';
            for (size_t i = 0; i < n; i++) /* keep logs printable */
                if ((unsigned char)out->text[i] < 0x20 || (unsigned char)out->text[i] > 0x7e)
                    out->text[i] = '?';
            break;
        }
        case T_CHOSEN: NEED(1); out->chosen = p[0]; out->has_chosen = 1; break;
        case T_STREAM: NEED(2); out->stream = gw_get_u16(p); break;
        case T_EXT: { /* the payload is the extension's to check */
            if (tlen < 4 || out->next == GW_HS_MAX_EXT || gw_hs_ext_find(out, gw_get_u16(p))) {
                snprintf(why, whylen, "bad extension field (len %u, %d before it, type %u)", tlen, out->next,
                         tlen >= 2 ? (unsigned)gw_get_u16(p) : 0u);
                return GW_ERR_PROTOCOL;
            }
            gw_hs_ext_t *x = &out->ext[out->next++];
            x->type = gw_get_u16(p);
            x->version = gw_get_u16(p + 2);
            x->data = p + 4;
            x->len = (uint16_t)(tlen - 4);
            break;
        }
        case T_EXT_MAC: {
            NEED(2 + GW_HS_MAC_LEN);
            gw_hs_ext_t *x = (gw_hs_ext_t *)gw_hs_ext_find(out, gw_get_u16(p));
            if (!x || x->has_mac) {
                snprintf(why, whylen, "extension HMAC for type %u %s", (unsigned)gw_get_u16(p),
                         x ? "twice" : "before (or without) its extension");
                return GW_ERR_PROTOCOL;
            }
            memcpy(x->mac, p + 2, GW_HS_MAC_LEN);
            x->has_mac = 1;
            break;
        }
        case T_EXT_REQ:
            NEED(8);
            out->ext_req_type = gw_get_u16(p);
            out->ext_req_version = gw_get_u16(p + 2);
            out->ext_req_arg = gw_get_u32(p + 4);
            out->has_ext_req = 1;
            break;
        case T_PID: NEED(12); out->pid = gw_get_u32(p); out->pid_ns = gw_get_u64(p + 4); break;
        default: break; /* newer field: skip */
        }
        p += tlen;
    }
    /* required fields per type */
    const char *missing = NULL;
    switch (out->type) {
    case GW_HS_HELLO: if (!out->uuid || !out->has_nonce || !out->npref) missing = "uuid, nonce or transport list"; break;
    case GW_HS_ACCEPT: if (!out->uuid || !out->has_nonce || !out->has_chosen) missing = "uuid, nonce or chosen transport"; break;
    case GW_HS_READY: if (!out->token) missing = "endpoint token"; break;
    case GW_HS_JOIN: if (!out->token) missing = "endpoint token"; break;
    case GW_HS_ERROR: if (out->status >= 0) missing = "error status"; break;
    default: break;
    }
    if (missing) {
        snprintf(why, whylen, "handshake message type %u lacks its %s", out->type, missing);
        return GW_ERR_PROTOCOL;
    }
    return GW_OK;
}

typedef struct enc {
    uint8_t *buf;
    size_t cap, len;
    int overflow;
} enc_t;

static void put_tlv(enc_t *e, unsigned tag, const void *data, size_t len)
{
    if (e->overflow || len > 0xffff || e->len + 4 + len > e->cap) {
        e->overflow = 1;
        return;
    }
    gw_put_u16(e->buf + e->len, (uint16_t)tag);
    gw_put_u16(e->buf + e->len + 2, (uint16_t)len);
    if (len)
        memcpy(e->buf + e->len + 4, data, len);
    e->len += 4 + len;
}

static void put_u64_tlv(enc_t *e, unsigned tag, uint64_t v)
{
    uint8_t b[8];
    gw_put_u64(b, v);
    put_tlv(e, tag, b, 8);
}

size_t gw_hs_encode(const gw_hs_msg_t *m, uint8_t *buf, size_t cap)
{
    if (cap < GW_HS_HDR_LEN)
        return 0;
    enc_t e = {buf, cap, GW_HS_HDR_LEN, 0};
    uint8_t tmp[4 + 65536];
    if (m->uuid) put_u64_tlv(&e, T_UUID, m->uuid);
    if (m->host_id) put_u64_tlv(&e, T_HOST, m->host_id);
    if (m->token) put_u64_tlv(&e, T_TOKEN, m->token);
    if (m->flags) { gw_put_u32(tmp, m->flags); put_tlv(&e, T_FLAGS, tmp, 4); }
    if (m->has_nonce) put_tlv(&e, T_NONCE, m->nonce, GW_HS_NONCE_LEN);
    if (m->has_mac) put_tlv(&e, T_MAC, m->mac, GW_HS_MAC_LEN);
    if (m->npref) put_tlv(&e, T_PREF, m->pref, (size_t)m->npref);
    for (int i = 0; i < m->nblob; i++) {
        tmp[0] = m->blob[i].tl;
        memcpy(tmp + 1, m->blob[i].data, m->blob[i].len);
        put_tlv(&e, T_BLOB, tmp, 1u + m->blob[i].len);
    }
    if (m->type == GW_HS_ERROR) { gw_put_u32(tmp, (uint32_t)m->status); put_tlv(&e, T_STATUS, tmp, 4); }
    if (m->text[0]) put_tlv(&e, T_TEXT, m->text, strnlen(m->text, sizeof(m->text)));
    if (m->has_chosen) put_tlv(&e, T_CHOSEN, &m->chosen, 1);
    if (m->type == GW_HS_JOIN) { gw_put_u16(tmp, m->stream); put_tlv(&e, T_STREAM, tmp, 2); }
    for (int i = 0; i < m->next && i < GW_HS_MAX_EXT; i++) {
        const gw_hs_ext_t *x = &m->ext[i];
        gw_put_u16(tmp, x->type);
        gw_put_u16(tmp + 2, x->version);
        if (x->len)
            memcpy(tmp + 4, x->data, x->len);
        put_tlv(&e, T_EXT, tmp, 4u + x->len);
        if (x->has_mac) {
            gw_put_u16(tmp, x->type);
            memcpy(tmp + 2, x->mac, GW_HS_MAC_LEN);
            put_tlv(&e, T_EXT_MAC, tmp, 2 + GW_HS_MAC_LEN);
        }
    }
    if (m->has_ext_req) {
        gw_put_u16(tmp, m->ext_req_type);
        gw_put_u16(tmp + 2, m->ext_req_version);
        gw_put_u32(tmp + 4, m->ext_req_arg);
        put_tlv(&e, T_EXT_REQ, tmp, 8);
    }
    if (m->pid) { gw_put_u32(tmp, m->pid); gw_put_u64(tmp + 4, m->pid_ns); put_tlv(&e, T_PID, tmp, 12); }
    if (e.overflow || e.len - GW_HS_HDR_LEN > GW_HS_MAX_BODY)
        return 0;
    gw_put_u32(buf, GW_HS_MAGIC);
    gw_put_u16(buf + 4, GW_HS_VERSION);
    gw_put_u16(buf + 6, m->type);
    gw_put_u32(buf + 8, (uint32_t)(e.len - GW_HS_HDR_LEN));
    return e.len;
}

gw_status_t gw_rkey_decode(const uint8_t *buf, size_t len, gw_rkey_wire_t *out, char *why,
                           size_t whylen)
{
    memset(out, 0, sizeof(*out));
    if (!buf || len < GW_RKEY_FIXED_LEN) {
        snprintf(why, whylen, "packed rkey of %zu bytes is shorter than the %d-byte minimum", len,
                 GW_RKEY_FIXED_LEN);
        return GW_ERR_INVALID_KEY;
    }
    uint32_t magic = gw_get_u32(buf);
    if (magic != GW_RKEY_MAGIC) {
        snprintf(why, whylen, "packed rkey has bad magic 0x%08x (expected 0x%08x)", magic, GW_RKEY_MAGIC);
        return GW_ERR_INVALID_KEY;
    }
    unsigned ver = gw_get_u16(buf + 4), total = gw_get_u16(buf + 6);
    if (ver != GW_RKEY_VERSION) {
        snprintf(why, whylen, "packed rkey version %u, this build reads %u", ver, GW_RKEY_VERSION);
        return GW_ERR_INVALID_KEY;
    }
    if (total != len || total > GW_RKEY_MAX_LEN) {
        snprintf(why, whylen, "packed rkey says %u bytes but %zu were given", total, len);
        return GW_ERR_INVALID_KEY;
    }
    out->owner_uuid = gw_get_u64(buf + 8);
    out->id = gw_get_u64(buf + 16);
    out->addr = gw_get_u64(buf + 24);
    out->len = gw_get_u64(buf + 32);
    out->access = gw_get_u32(buf + 40);
    out->mem_type = buf[44];
    unsigned n = buf[45];
    if (n > GW_HS_MAX_TL || out->id == 0 || out->mem_type > GW_MEM_CUDA ||
        (out->access & ~3u) || out->addr + out->len < out->addr) {
        snprintf(why, whylen, "packed rkey has invalid fields (id %llu, type %u, access 0x%x, %u blobs)",
                 (unsigned long long)out->id, out->mem_type, out->access, n);
        return GW_ERR_INVALID_KEY;
    }
    size_t off = GW_RKEY_FIXED_LEN;
    for (unsigned i = 0; i < n; i++) {
        if (off + 2 > len || off + 2 + buf[off + 1] > len) {
            snprintf(why, whylen, "packed rkey transport blob %u runs past the end", i);
            return GW_ERR_INVALID_KEY;
        }
        out->blob[i].tl = buf[off];
        out->blob[i].len = buf[off + 1];
        out->blob[i].data = buf + off + 2;
        off += 2u + buf[off + 1];
    }
    out->nblob = (int)n;
    if (off != len) {
        snprintf(why, whylen, "packed rkey has %zu trailing bytes", len - off);
        return GW_ERR_INVALID_KEY;
    }
    return GW_OK;
}

size_t gw_rkey_encode(const gw_rkey_wire_t *rk, uint8_t *buf, size_t cap)
{
    size_t total = GW_RKEY_FIXED_LEN;
    for (int i = 0; i < rk->nblob; i++)
        total += 2u + rk->blob[i].len;
    if (!buf || cap < total || total > GW_RKEY_MAX_LEN)
        return total;
    gw_put_u32(buf, GW_RKEY_MAGIC);
    gw_put_u16(buf + 4, GW_RKEY_VERSION);
    gw_put_u16(buf + 6, (uint16_t)total);
    gw_put_u64(buf + 8, rk->owner_uuid);
    gw_put_u64(buf + 16, rk->id);
    gw_put_u64(buf + 24, rk->addr);
    gw_put_u64(buf + 32, rk->len);
    gw_put_u32(buf + 40, rk->access);
    buf[44] = rk->mem_type;
    buf[45] = (uint8_t)rk->nblob;
    size_t off = GW_RKEY_FIXED_LEN;
    for (int i = 0; i < rk->nblob; i++) {
        buf[off] = rk->blob[i].tl;
        buf[off + 1] = (uint8_t)rk->blob[i].len;
        memcpy(buf + off + 2, rk->blob[i].data, rk->blob[i].len);
        off += 2u + rk->blob[i].len;
    }
    return total;
}

const gw_hs_ext_t *gw_hs_ext_find(const gw_hs_msg_t *m, uint16_t type)
{
    for (int i = 0; i < m->next && i < GW_HS_MAX_EXT; i++)
        if (m->ext[i].type == type)
            return &m->ext[i];
    return NULL;
}

int gw_hs_ext_add(gw_hs_msg_t *m, uint16_t type, uint16_t version, const uint8_t *data, uint16_t len)
{
    if (m->next >= GW_HS_MAX_EXT || gw_hs_ext_find(m, type))
        return -1;
    gw_hs_ext_t *x = &m->ext[m->next++];
    memset(x, 0, sizeof(*x));
    x->type = type;
    x->version = version;
    x->data = data;
    x->len = len;
    return 0;
}
