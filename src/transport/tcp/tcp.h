/* SPDX-License-Identifier: Apache-2.0 */
/* tcp.h - the tcp transport's private objects and its frame format.
 *
 * Every endpoint has S connections ("streams", GPUWIRE_TCP_STREAMS, the
 * smaller of both sides' values).  Stream 0 is the handshake socket; it
 * carries small operations, notifications and control frames in order.
 * Transfers of at least GPUWIRE_TCP_STRIPE_MIN bytes are cut into pieces of
 * at most GPUWIRE_TCP_CHUNK bytes spread over the least-loaded streams.
 *
 * Frame: a 48-byte header, then `len` payload bytes for PUT, GET_RESP, EAGER,
 * RDATA, the batch frames and AM.  Little-endian:
 *   0 u8 magic (0xA7)  1 u8 version (1)  2 u8 type  3 u8 flags
 *   4 u32 aux (status of replies, as a negative gw_status_t)
 *   8 u64 id   (initiator's request slot, echoed in replies)
 *  16 u64 key  (target region id, or the receiver's slot for RDATA/CTS)
 *  24 u64 addr (remote address, or offset)
 *  32 u64 len  (payload length)
 *  40 u64 val  (notification value, tag, or local offset of a piece)
 * Data is read straight from and written straight into user memory: the
 * only copies are the kernel's.  The payloads of frames of at least
 * GPUWIRE_TCP_THREAD_MIN bytes are moved by helper threads (tcp_pool.h);
 * the wire format does not change.
 */
#ifndef GW_TRANSPORT_TCP_H
#define GW_TRANSPORT_TCP_H

#include <stdint.h>
#include <sys/uio.h>

#include "transport/base/tl.h"

#define GW_TCP_MAGIC 0xA7
#define GW_TCP_VERSION 1
#define GW_TCP_HDR 48
#define GW_TCP_MAX_STREAMS 16

enum gw_tcp_frame {
    GW_TCP_PUT = 1,      /* payload -> region; flags NOTIFY: deliver val after */
    GW_TCP_PUT_ACK = 2,  /* aux status, len bytes placed */
    GW_TCP_GET_REQ = 3,  /* key/addr/len; val = local offset echoed back */
    GW_TCP_GET_RESP = 4, /* aux status, payload (none on error) */
    GW_TCP_NOTIFY = 5,   /* val */
    GW_TCP_EAGER = 6,    /* val = tag, payload */
    GW_TCP_RTS = 7,      /* val = tag, len = message length */
    GW_TCP_CTS = 8,      /* id = sender slot, key = receiver slot, len = bytes accepted */
    GW_TCP_RDATA = 9,    /* key = receiver slot, addr = offset, payload */
    GW_TCP_MSG_ACK = 10, /* id = sender slot, aux status */
    GW_TCP_PING = 11,
    GW_TCP_PONG = 12,
    GW_TCP_CLOSE = 13,
    /* batched transfers (tcp_batch.c): one frame per run of entries */
    GW_TCP_BPUT = 14,      /* addr = D, len = D + data; payload: a descriptor block of D bytes, then
                              each entry's bytes in block order; answered by PUT_ACK */
    GW_TCP_BGET_REQ = 15,  /* len = D, val = run index; payload: a descriptor block */
    GW_TCP_BGET_RESP = 16, /* aux status, val = run index; payload: the entries' bytes (none on error) */
    GW_TCP_AM = 17,        /* val = handler id, payload (at most GW_AM_MAX bytes): an active message */
    GW_TCP_FRAME_MAX = 17
};
enum { GW_TCP_F_NOTIFY = 1, GW_TCP_F_COUNTED = 2 /* NOTIFY: val is the id of a counted notification */ };

/* Descriptor block of a batch run: u32 magic "GWBT", u16 version, u16 0,
 * u32 entry count, u32 0, then per entry u64 region id, u64 address, u64
 * length (little-endian).  The target checks every entry against its own
 * region table. */
#define GW_TCP_BDESC_MAGIC 0x54425747u
#define GW_TCP_BDESC_VERSION 1
#define GW_TCP_BDESC_HDR 16
#define GW_TCP_BDESC_ENT 24
#define GW_TCP_BDESC_MAX_ENT 1000 /* entries per run: header + block + entries fit one sendmsg (UIO_MAXIOV) */

/* Checks a descriptor block of len bytes (magic, version, count against
 * len); *n gets the entry count.  Fuzzed. */
gw_status_t gw_tcp_bdesc_check(const uint8_t *p, size_t len, uint32_t *n, char *why, size_t whylen);
/* Entry i of a checked block. */
void gw_tcp_bdesc_entry(const uint8_t *p, uint32_t i, uint64_t *region, uint64_t *addr, uint64_t *len);
/* Writes the block header for n entries (entries follow at GW_TCP_BDESC_HDR). */
void gw_tcp_bdesc_init(uint8_t *p, uint32_t n);
void gw_tcp_bdesc_set(uint8_t *p, uint32_t i, uint64_t region, uint64_t addr, uint64_t len);

typedef struct gw_tcp_hdr {
    uint8_t type, flags;
    int32_t aux;
    uint64_t id, key, addr, len, val;
} gw_tcp_hdr_t;

/* Decodes and checks a header (magic, version, type); fuzzed. */
gw_status_t gw_tcp_hdr_decode(const uint8_t *buf, gw_tcp_hdr_t *h, char *why, size_t whylen);
void gw_tcp_hdr_encode(uint8_t *buf, const gw_tcp_hdr_t *h);

extern const gw_tl_ops_t gw_tl_tcp_ops;

#endif
