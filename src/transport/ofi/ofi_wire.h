/* SPDX-License-Identifier: Apache-2.0 */
/* ofi_wire.h - the ofi transport's wire formats (transport layer, ofi):
 * the address blob the handshake carries, the transport part of a remote
 * key, and the header of every message the transport sends over the
 * provider.  Plain C, no libfabric type: the fuzzers link these alone.
 *
 * Address blob (the handshake's transport blob), little-endian:
 *   u32 magic "GWOF" | u8 version 1 | u8 flags | u16 name length
 *   u8 provider length | u8 domain length | provider | domain | name
 * The name is the endpoint's fi_getname() address, opaque to gpuwire (a
 * sockaddr for tcp, a path for shm, a GID and QPN for efa).  Flags: bit 0
 * FI_HMEM registration of GPU memory, bit 1 the tagged message path
 * (GW_OFI_AF_*); a reader ignores bits it does not know.
 *
 * Remote-key part (20 bytes): u8 version 1 | u8 flags (bit 0: the provider
 * addresses RMA by virtual address; otherwise by offset from base) | u16 0
 * | u64 key (fi_mr_key) | u64 base (the region's address at its owner).
 *
 * Message header (48 bytes, before an eager payload): u16 magic 0x4f46 |
 * u8 version 1 | u8 type | u32 flags | u64 f[5], whose meaning per type is
 * in the enum below.
 */
#ifndef GW_OFI_WIRE_H
#define GW_OFI_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "core/core.h"
#include "core/util.h"

#define GW_OFI_ADDR_MAGIC 0x464f5747u /* "GWOF" little-endian */
#define GW_OFI_ADDR_VERSION 1
#define GW_OFI_NAME_MAX 256
#define GW_OFI_PROV_MAX 64
#define GW_OFI_DOM_MAX 64
enum {
    GW_OFI_AF_HMEM = 1u << 0,   /* the sender registers GPU memory with FI_HMEM */
    GW_OFI_AF_TAGGED = 1u << 1, /* application messages may go by the provider's tagged operations
                                 * (both sides set it: they do; an older peer sets no such bit) */
};

typedef struct gw_ofi_addr {
    uint8_t version;
    uint8_t flags;
    char prov[GW_OFI_PROV_MAX]; /* provider name, e.g. "tcp;ofi_rxm", NUL-terminated */
    char domain[GW_OFI_DOM_MAX];
    uint16_t namelen;
    uint8_t name[GW_OFI_NAME_MAX];
} gw_ofi_addr_t;

/* Bytes written (0: cap too small or a field too long). */
size_t gw_ofi_addr_pack(const gw_ofi_addr_t *a, uint8_t *buf, size_t cap);
/* GW_OK, or GW_ERR_PROTOCOL (malformed) / GW_ERR_VERSION with why. */
gw_status_t gw_ofi_addr_unpack(gw_ofi_addr_t *a, const uint8_t *buf, size_t len, char *why, size_t whylen);

#define GW_OFI_RKEY_VERSION 1
#define GW_OFI_RKEY_LEN 20
enum { GW_OFI_RK_VIRT = 1u << 0 };
typedef struct gw_ofi_rkey {
    uint64_t key;
    uint64_t base;
    uint8_t virt; /* address by virtual address (else offset from base) */
} gw_ofi_rkey_t;
size_t gw_ofi_rkey_pack(const gw_ofi_rkey_t *k, uint8_t *buf, size_t cap);
gw_status_t gw_ofi_rkey_parse(gw_ofi_rkey_t *k, const uint8_t *buf, size_t len, char *why, size_t whylen);

#define GW_OFI_HDR_MAGIC 0x4f46u
#define GW_OFI_HDR_VERSION 1
#define GW_OFI_HDR_LEN 48
typedef enum gw_ofi_msg_type {
    GW_OFI_EAGER = 1,  /* f0 tag, f1 payload length; the payload follows */
    GW_OFI_RTS = 2,    /* f0 tag, f1 message length, f2 sender's op id, f3 address, f4 key of the
                        * sender's buffer (read by the receiver) */
    GW_OFI_FIN = 3,    /* f0 status (signed), f2 the op id of the RTS it answers */
    GW_OFI_NOTIFY = 4, /* f0 value (flags COUNTED: the counted notification's id) */
    GW_OFI_PING = 5,   /* f0 0 (liveness) or a deregistration fence's number: answer with PONG */
    GW_OFI_PONG = 6,   /* f0 the PING's f0 */
    GW_OFI_AM = 7,     /* f0 handler id, f1 payload length (at most GW_AM_MAX); the payload follows:
                        * an active message */
    GW_OFI_TYPE_MAX = 7
} gw_ofi_msg_type_t;
enum { GW_OFI_F_COUNTED = 1u << 0 };
#define GW_OFI_AM_MAX 256 /* an active message's payload (ep_base.h GW_AM_MAX) */

/* The tagged path (GW_OFI_AF_TAGGED agreed): an application message is one
 * tagged message of the provider with the application's tag and 64 bits of
 * remote CQ data:
 *   data bit 63 clear: the message itself; data is its length;
 *   data bit 63 set:   an RTS of a larger one (GW_OFI_TRTS_LEN bytes: u64
 *                      message length | u64 address | u64 key of the
 *                      sender's buffer, read by the receiver, which answers
 *                      FIN as on the header path); data's low 63 bits are
 *                      the sender's op id. */
#define GW_OFI_TD_RTS (1ull << 63)
#define GW_OFI_TRTS_LEN 24

typedef struct gw_ofi_hdr {
    uint8_t type;
    uint32_t flags;
    uint64_t f[5];
} gw_ofi_hdr_t;

/* (Inline: every message writes one, an 8-byte one on its latency path.) */
static inline void gw_ofi_hdr_write(const gw_ofi_hdr_t *h, uint8_t *buf)
{
    gw_put_u16(buf, GW_OFI_HDR_MAGIC);
    buf[2] = GW_OFI_HDR_VERSION;
    buf[3] = h->type;
    gw_put_u32(buf + 4, h->flags);
    for (int i = 0; i < 5; i++)
        gw_put_u64(buf + 8 + 8 * i, h->f[i]);
}
/* Checks a received message of len bytes (header and payload): magic,
 * version, type, that an eager payload is exactly what the header says and
 * at most eager_max, an active message's likewise and at most GW_AM_MAX,
 * that other types carry none, a FIN's status in range.
 * GW_OK or GW_ERR_PROTOCOL with why. */
gw_status_t gw_ofi_hdr_parse(gw_ofi_hdr_t *h, const uint8_t *buf, size_t len, size_t eager_max, char *why,
                             size_t whylen);
/* The receive path's common case, inline: is buf (len bytes) an eager
 * message gw_ofi_hdr_parse would accept (magic, version, no flags, the
 * payload what the header says and at most eager_max)?  1 with its tag in
 * *tag, else 0 (the caller parses it in full: another type, or an error). */
static inline int gw_ofi_hdr_eager(const uint8_t *buf, size_t len, size_t eager_max, uint64_t *tag)
{
    if (len < GW_OFI_HDR_LEN || gw_get_u16(buf) != GW_OFI_HDR_MAGIC || buf[2] != GW_OFI_HDR_VERSION ||
        buf[3] != GW_OFI_EAGER || gw_get_u32(buf + 4) != 0 || gw_get_u64(buf + 16) != len - GW_OFI_HDR_LEN ||
        len - GW_OFI_HDR_LEN > eager_max)
        return 0;
    *tag = gw_get_u64(buf + 8);
    return 1;
}

#endif
