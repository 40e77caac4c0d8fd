/* SPDX-License-Identifier: Apache-2.0 */
/* ofi_wire.c - the ofi transport's address blob, key part and message
 * header (ofi_wire.h). */
#include "transport/ofi/ofi_wire.h"

#include <stdio.h>
#include <string.h>

#include "core/util.h"

size_t gw_ofi_addr_pack(const gw_ofi_addr_t *a, uint8_t *buf, size_t cap)
{
    size_t pl = strnlen(a->prov, sizeof(a->prov)), dl = strnlen(a->domain, sizeof(a->domain));
    if (pl >= sizeof(a->prov) || dl >= sizeof(a->domain) || a->namelen > GW_OFI_NAME_MAX)
        return 0;
    size_t need = 10 + pl + dl + a->namelen;
    if (cap < need)
        return 0;
    gw_put_u32(buf, GW_OFI_ADDR_MAGIC);
    buf[4] = GW_OFI_ADDR_VERSION;
    buf[5] = a->flags;
    gw_put_u16(buf + 6, a->namelen);
    buf[8] = (uint8_t)pl;
    buf[9] = (uint8_t)dl;
    memcpy(buf + 10, a->prov, pl);
    memcpy(buf + 10 + pl, a->domain, dl);
    memcpy(buf + 10 + pl + dl, a->name, a->namelen);
    return need;
}

gw_status_t gw_ofi_addr_unpack(gw_ofi_addr_t *a, const uint8_t *buf, size_t len, char *why, size_t whylen)
{
    memset(a, 0, sizeof(*a));
    if (len < 10 || gw_get_u32(buf) != GW_OFI_ADDR_MAGIC) {
        snprintf(why, whylen, "ofi address of %zu bytes has no GWOF magic", len);
        return GW_ERR_PROTOCOL;
    }
    if (buf[4] != GW_OFI_ADDR_VERSION) {
        snprintf(why, whylen, "ofi address version %u (we speak %d)", buf[4], GW_OFI_ADDR_VERSION);
        return GW_ERR_VERSION;
    }
    size_t nl = gw_get_u16(buf + 6), pl = buf[8], dl = buf[9];
    if (nl == 0 || nl > GW_OFI_NAME_MAX || pl == 0 || pl >= GW_OFI_PROV_MAX || dl >= GW_OFI_DOM_MAX) {
        snprintf(why, whylen, "ofi address field lengths out of range (name %zu of 1..%d, provider %zu of "
                 "1..%d, domain %zu of 0..%d)", nl, GW_OFI_NAME_MAX, pl, GW_OFI_PROV_MAX - 1, dl,
                 GW_OFI_DOM_MAX - 1);
        return GW_ERR_PROTOCOL;
    }
    if (len != 10 + pl + dl + nl) {
        snprintf(why, whylen, "ofi address is %zu bytes; its fields say %zu", len, 10 + pl + dl + nl);
        return GW_ERR_PROTOCOL;
    }
    const uint8_t *p = buf + 10;
    for (size_t i = 0; i < pl + dl; i++)
        if (p[i] < 0x20 || p[i] > 0x7e) {
            snprintf(why, whylen, "ofi address: provider or domain name has byte 0x%02x", p[i]);
            return GW_ERR_PROTOCOL;
        }
    a->version = buf[4];
    a->flags = buf[5];
    memcpy(a->prov, p, pl);
    memcpy(a->domain, p + pl, dl);
    a->namelen = (uint16_t)nl;
    memcpy(a->name, p + pl + dl, nl);
    return GW_OK;
}

size_t gw_ofi_rkey_pack(const gw_ofi_rkey_t *k, uint8_t *buf, size_t cap)
{
    if (cap < GW_OFI_RKEY_LEN)
        return 0;
    buf[0] = GW_OFI_RKEY_VERSION;
    buf[1] = k->virt ? GW_OFI_RK_VIRT : 0;
    buf[2] = buf[3] = 0;
    gw_put_u64(buf + 4, k->key);
    gw_put_u64(buf + 12, k->base);
    return GW_OFI_RKEY_LEN;
}

gw_status_t gw_ofi_rkey_parse(gw_ofi_rkey_t *k, const uint8_t *buf, size_t len, char *why, size_t whylen)
{
    memset(k, 0, sizeof(*k));
    if (len != GW_OFI_RKEY_LEN) {
        snprintf(why, whylen, "ofi key part: %zu bytes, expected %d", len, GW_OFI_RKEY_LEN);
        return GW_ERR_INVALID_KEY;
    }
    if (buf[0] != GW_OFI_RKEY_VERSION || (buf[1] & ~GW_OFI_RK_VIRT) || buf[2] || buf[3]) {
        snprintf(why, whylen, "ofi key part: version %u flags 0x%02x (we speak version %d)", buf[0], buf[1],
                 GW_OFI_RKEY_VERSION);
        return GW_ERR_INVALID_KEY;
    }
    k->virt = buf[1] & GW_OFI_RK_VIRT;
    k->key = gw_get_u64(buf + 4);
    k->base = gw_get_u64(buf + 12);
    return GW_OK;
}

gw_status_t gw_ofi_hdr_parse(gw_ofi_hdr_t *h, const uint8_t *buf, size_t len, size_t eager_max, char *why,
                             size_t whylen)
{
    if (len < GW_OFI_HDR_LEN || gw_get_u16(buf) != GW_OFI_HDR_MAGIC || buf[2] != GW_OFI_HDR_VERSION) {
        snprintf(why, whylen, "ofi message of %zu bytes without a version-%d header (magic 0x%04x)", len,
                 GW_OFI_HDR_VERSION, len >= 2 ? gw_get_u16(buf) : 0);
        return GW_ERR_PROTOCOL;
    }
    h->type = buf[3];
    h->flags = gw_get_u32(buf + 4);
    for (int i = 0; i < 5; i++)
        h->f[i] = gw_get_u64(buf + 8 + 8 * i);
    if (h->type < GW_OFI_EAGER || h->type > GW_OFI_TYPE_MAX) {
        snprintf(why, whylen, "ofi message of unknown type %u", h->type);
        return GW_ERR_PROTOCOL;
    }
    uint32_t low = h->flags & ((1u << GW_OFI_F_CREDIT_SHIFT) - 1u), cred = h->flags >> GW_OFI_F_CREDIT_SHIFT;
    if ((low & ~(uint32_t)GW_OFI_F_COUNTED) || ((low & GW_OFI_F_COUNTED) && h->type != GW_OFI_NOTIFY)) {
        snprintf(why, whylen, "ofi message type %u with unknown flags 0x%x", h->type, low);
        return GW_ERR_PROTOCOL;
    }
    if (cred > GW_OFI_CREDIT_SLOTS || (h->type == GW_OFI_CREDIT && cred == 0)) {
        snprintf(why, whylen, "ofi message type %u returns %u credits (1..%d for a CREDIT, 0..%d on others: "
                 "there are %d receive slots)", h->type, cred, GW_OFI_CREDIT_SLOTS, GW_OFI_CREDIT_SLOTS,
                 GW_OFI_CREDIT_SLOTS);
        return GW_ERR_PROTOCOL;
    }
    size_t body = len - GW_OFI_HDR_LEN;
    if (h->type == GW_OFI_EAGER || h->type == GW_OFI_AM) {
        size_t max = h->type == GW_OFI_AM && eager_max > GW_OFI_AM_MAX ? GW_OFI_AM_MAX : eager_max;
        if (h->f[1] != body || body > max) {
            snprintf(why, whylen, "ofi %s message says %llu payload bytes, carries %zu (at most %zu)",
                     h->type == GW_OFI_AM ? "active" : "eager", (unsigned long long)h->f[1], body, max);
            return GW_ERR_PROTOCOL;
        }
        return GW_OK;
    }
    if (body) {
        snprintf(why, whylen, "ofi message type %u carries %zu bytes after its header", h->type, body);
        return GW_ERR_PROTOCOL;
    }
    if (h->type == GW_OFI_CREDIT && (h->f[0] | h->f[1] | h->f[2] | h->f[3] | h->f[4])) {
        snprintf(why, whylen, "ofi CREDIT message with nonzero fields");
        return GW_ERR_PROTOCOL;
    }
    if (h->type == GW_OFI_FIN) {
        int64_t s = (int64_t)h->f[0];
        if (s > 0 || s < -100) {
            snprintf(why, whylen, "ofi FIN with status %lld", (long long)s);
            return GW_ERR_PROTOCOL;
        }
    }
    return GW_OK;
}
