/* SPDX-License-Identifier: Apache-2.0 */
/* proto_integrity.h - the end-to-end integrity check (protocol layer):
 * a CRC32C of every entry of a notifying put, computed at the source before
 * the data moves, checked at the target before the notification is
 * delivered (docs/INTEGRITY.md).
 *
 * It is built once over what every transport has (their single puts and
 * batches, their notification, their tagged messages); no transport knows
 * of it.  An endpoint checks when both sides know the check and either asks
 * for it (the handshake's GW_HS_FLAG_INTEG_* flags); then, for every put
 * that delivers a notification (put_notify, a batch or paged put with one):
 *
 *  initiator  takes the CRC32C of each entry's source (host memory: the
 *             CPU's crc32 instruction, core/crc32c.h; GPU memory: a kernel,
 *             cuda/crc_kernel.h), posts the operation itself with a token
 *             (31 bits, per endpoint) in place of the notification's value
 *             or counted id, and sends the manifest (the real value, and
 *             per entry its index, remote region, address, length and CRC)
 *             as a tagged message with the reserved tag GW_INTEG_TAG;
 *  target     holds every notification (the base's notification gate) until
 *             the manifest of its token is in, then takes the CRC of each
 *             entry where it landed, delivers the real notification (or, on
 *             a mismatch, a failure in its place that gw_notify_wait /
 *             gw_notify_count_wait report as GW_ERR_INTEGRITY with the
 *             detail) and sends the verdict back;
 *  initiator  completes the caller's request once the operation completed
 *             and the verdict came: GW_OK, or GW_ERR_INTEGRITY naming the
 *             first entry that differs.
 * Notifications stay in order: the target delivers them in arrival order,
 * holding a later one until every earlier one was checked.
 *
 * Wire format of the check's messages (little-endian; magic, version,
 * fuzzed by tests/fuzz/fuzz_integ.c):
 *   0  u32 magic "GWIC"   4  u16 version   6  u8 type   7  u8 flags
 *   manifest (type 1): 8 u32 token  12 u8 counted  13 u8 kind (entry names)
 *     14 u16 0  16 u64 value  24 u32 n  28 u32 0
 *     32 n x { u32 index, u32 crc, u64 region id, u64 raddr, u64 len }
 *     flags bit 0: the entries carry CRCs (0: the caller turned the check
 *     off for this operation; the notification is delivered unchecked)
 *   verdict (type 2): 8 u32 token  12 i32 status  16 u16 detail length
 *     18 the detail (no NUL)
 */
#ifndef GW_PROTO_INTEGRITY_H
#define GW_PROTO_INTEGRITY_H

#include "core/core.h"
#include "core/crc32c.h"
#include "core/request.h"
#include "mem/mem.h"
#include "transport/base/tl.h"

/* How an entry is named in messages: the put of a put_notify, an entry of
 * gw_xfer_batch (its index among the caller's pairs), a page of
 * gw_xfer_pages (its index i). */
enum { GW_INTEG_KIND_PUT = 0, GW_INTEG_KIND_ENTRY = 1, GW_INTEG_KIND_PAGE = 2 };

/* The entries of one operation, as the api layer names them. */
typedef struct gw_integ_set gw_integ_set_t;
/* n: room for entries; check 0: no CRCs (the caller turned the check off
 * for this operation).  NULL when out of memory. */
gw_integ_set_t *gw_proto_integ_set_new(uint32_t n, int kind, int check);
/* Adds entry idx: len bytes at laddr (in lmem; NULL: host memory) that go
 * to raddr in the peer's region rid.  Zero-length entries are skipped. */
void gw_proto_integ_set_add(gw_integ_set_t *s, uint32_t idx, const void *laddr, const gw_mem_t *lmem,
                            uint64_t rid, uint64_t raddr, uint64_t len);
/* The submit() the operation itself goes through (the transport's, or
 * gw_proto_batch_submit). */
void gw_proto_integ_set_route(gw_integ_set_t *s, gw_status_t (*submit)(gw_tl_ep_t *, gw_request_t *));
void gw_proto_integ_set_free(gw_integ_set_t *s);

/* submit() of a checked operation: req is a GW_OP_PUT_NOTIFY or notifying
 * GW_OP_BATCH request the api layer queued (gw_ep_op_start), req->owner its
 * set (taken over here, also on an error).  Takes the CRCs, posts the
 * operation as a request of its own and sends the manifest; req leaves the
 * endpoint's outstanding list (the operation's own request stands in it
 * for flushes and later notifications) and completes later, as the header
 * says.  An error: nothing was posted, req is as it came. */
gw_status_t gw_proto_integ_submit(gw_tl_ep_t *tl, gw_request_t *req);

/* Makes the endpoint check (after the handshake agreed): its state, the
 * notification gate.  GW_ERR_NOMEM. */
gw_status_t gw_proto_integ_attach(gw_ep_base_t *b, gw_tl_ep_t *tl);
/* Before the endpoint is freed: completes what still waits for a verdict
 * with GW_ERR_CANCELED (or the endpoint's error) and frees the state. */
void gw_proto_integ_detach(gw_ep_base_t *b);
/* One pass (every progress pass, for each checking endpoint): takes the
 * check's messages, checks held notifications, completes requests whose
 * verdict came.  Returns the events. */
int gw_proto_integ_poll(gw_ep_base_t *b);
/* Operations of the endpoint still waiting for their verdict (0: none, or
 * the endpoint does not check). */
unsigned gw_proto_integ_busy(const gw_ep_base_t *b);

/* ---- the wire format ---- */
#define GW_INTEG_MAGIC 0x43495747u /* "GWIC" */
#define GW_INTEG_VERSION 1
#define GW_INTEG_HDR 32
#define GW_INTEG_ENT 32
#define GW_INTEG_MAX_ENTS (1u << 24)
#define GW_INTEG_DETAIL_MAX 512
enum { GW_INTEG_MANIFEST = 1, GW_INTEG_VERDICT = 2 };
enum { GW_INTEG_F_CHECKED = 1u << 0 };

typedef struct gw_integ_msg {
    uint8_t type, flags;
    uint32_t token;
    /* manifest */
    uint8_t counted, kind;
    uint64_t value;
    uint32_t n;
    const uint8_t *ents; /* n entries of GW_INTEG_ENT bytes, inside the decoded buffer */
    /* verdict */
    int32_t status;
    uint16_t detail_len;
    const char *detail;  /* inside the buffer, not NUL-terminated */
} gw_integ_msg_t;

typedef struct gw_integ_went {
    uint32_t idx, crc;
    uint64_t rid, raddr, len;
} gw_integ_went_t;

/* Decodes a message of the check: GW_OK, or GW_ERR_PROTOCOL /
 * GW_ERR_VERSION with why. */
gw_status_t gw_integ_decode(const uint8_t *buf, size_t len, gw_integ_msg_t *out, char *why, size_t whylen);
/* Entry i of a decoded manifest. */
void gw_integ_entry(const gw_integ_msg_t *m, uint32_t i, gw_integ_went_t *e);

#endif
