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
 * FI_HMEM registration of GPU memory, bit 1 the tagged message path, bit 2
 * credits (flow control of header messages, below) (GW_OFI_AF_*); a reader
 * ignores bits it does not know.
 *
 * Remote-key part (20 bytes): u8 version 1 | u8 flags (bit 0: the provider
 * addresses RMA by virtual address; otherwise by offset from base) | u16 0
 * | u64 key (fi_mr_key) | u64 base (the region's address at its owner).
 *
 * Message header (48 bytes, before an eager payload): u16 magic 0x4f46 |
 * u8 version 1 | u8 type | u32 flags | u64 f[5], whose meaning per type is
 * in the enum below.  Flags: bit 0 COUNTED (NOTIFY only), bits 1-15 zero,
 * bits 16-31 credits returned (GW_OFI_F_CREDIT_SHIFT).
 *
 * Credits (both blobs carry GW_OFI_AF_CREDITS; else every credit field is
 * zero and no CREDIT is sent): each side posts GW_OFI_CREDIT_SLOTS receive
 * slots and a sender starts with GW_OFI_CREDIT_SLOTS - GW_OFI_CREDIT_RESERVE
 * credits.  EAGER, RTS, NOTIFY, AM and PING cost one each; PONG, CREDIT
 * and FIN cost none (PONG and CREDIT land in the reserve; a FIN answers an
 * RTS that cost its receiver a credit, so those in flight are bounded, and
 * it must not wait for credits: a receiver whose receive completed may
 * stop progressing, and its peer's send would then never complete).  A receiver returns a credit
 * for each slot that held a costing message once it has posted that slot
 * again: in the credit field of any header it sends, or in a CREDIT message
 * (no body, f[] zero, at least one credit).  A field of more than
 * GW_OFI_CREDIT_SLOTS, or returns that would lift the sender above its
 * starting credits, is a protocol error.  The header version stays 1: the
 * handshake flag gates the field and the type, so a peer that never set
 * the flag never sees either.
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
    GW_OFI_AF_CREDITS = 1u << 2, /* header messages under credits (both sides set it: they are; an older
                                  * peer, or one with GPUWIRE_OFI_CREDITS=off, sets no such bit) */
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
    GW_OFI_CREDIT = 8, /* f[] 0: credits returned (flags' credit field, at least 1), nothing else */
    GW_OFI_TYPE_MAX = 8
} gw_ofi_msg_type_t;
enum { GW_OFI_F_COUNTED = 1u << 0 };
#define GW_OFI_F_CREDIT_SHIFT 16 /* flags bits 16-31: credits returned */
#define GW_OFI_CREDIT_SLOTS 64   /* receive slots each side posts (the credit unit's pool) */
#define GW_OFI_CREDIT_RESERVE 8  /* slots the sender's credits leave for PONG and CREDIT */
/* Does a message of this type cost a credit? */
static inline int gw_ofi_type_costs(unsigned type)
{
    return type != GW_OFI_PONG && type != GW_OFI_CREDIT && type != GW_OFI_FIN;
}
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
 * message gw_ofi_hdr_parse would accept (magic, version, no flags but at
 * most GW_OFI_CREDIT_SLOTS credits, the payload what the header says and
 * at most eager_max)?  1 with its tag in *tag and its credits in *cred,
 * else 0 (the caller parses it in full: another type, or an error). */
static inline int gw_ofi_hdr_eager(const uint8_t *buf, size_t len, size_t eager_max, uint64_t *tag, unsigned *cred)
{
    if (len < GW_OFI_HDR_LEN || gw_get_u16(buf) != GW_OFI_HDR_MAGIC || buf[2] != GW_OFI_HDR_VERSION ||
        buf[3] != GW_OFI_EAGER || gw_get_u64(buf + 16) != len - GW_OFI_HDR_LEN || len - GW_OFI_HDR_LEN > eager_max)
        return 0;
    uint32_t fl = gw_get_u32(buf + 4);
    if ((fl & 0xffffu) || fl > ((uint32_t)GW_OFI_CREDIT_SLOTS << GW_OFI_F_CREDIT_SHIFT))
        return 0;
    *tag = gw_get_u64(buf + 8);
    *cred = fl >> GW_OFI_F_CREDIT_SHIFT;
    return 1;
}

#endif
