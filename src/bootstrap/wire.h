/* SPDX-License-Identifier: Apache-2.0 */
/* wire.h - wire formats of the handshake and of packed remote keys
 * (bootstrap layer).  Both carry a magic and a version; decoders never trust
 * a length they have not checked and are fuzzed (tests/fuzz).
 *
 * Handshake frame (little-endian):
 *   0  u32 magic  "GWHS"        4  u16 version (GW_HS_VERSION)
 *   6  u16 type (gw_hs_type_t)  8  u32 body length (<= GW_HS_MAX_BODY)
 *  12  body: TLVs { u16 tag, u16 len, len bytes }; unknown tags are skipped.
 * Exchange: client HELLO -> server ACCEPT -> client CONFIRM -> server READY;
 * either side may answer ERROR instead, then closes.  JOIN opens a further
 * connection of an established endpoint (tcp stripes).
 * Extensions: READY may carry typed, versioned payloads of a layer above
 * the api (TLV 17: u16 type, u16 version, payload; type GW_HS_EXT_NAMES is
 * the names layer's agent table), each with an HMAC (TLV 18: u16 type, 32
 * bytes) when authentication is on.  An extension-only HELLO (flag
 * GW_HS_FLAG_EXT_ONLY) names the extension it wants and an argument (TLV
 * 19: u16 type, u16 version, u32 argument); no endpoint is made.  Tags 13
 * to 15 (the names table before it became an extension) are retired: a
 * decoder skips them like any unknown tag.
 * HELLO and ACCEPT carry the sender's pid and pid namespace (TLV 16): a
 * peer on the same host in the same namespace judges its liveness by its
 * process state (transport/base/liveness.h).
 *
 * Packed remote key:
 *   0  u32 magic "GWRK"  4 u16 version  6 u16 total length
 *   8  u64 owner context uuid  16 u64 region id  24 u64 addr  32 u64 len
 *  40  u32 access  44 u8 memory type  45 u8 transport blob count
 *  46  blobs { u8 transport id, u8 len, len bytes }
 *
 * A transport id, here and in the handshake's preference list, blobs and
 * chosen transport, is a GW_TL_* wire id of core/transports.def: never
 * renumbered.  0xff (GW_HS_NO_TL) is reserved.
 */
#ifndef GW_BOOTSTRAP_WIRE_H
#define GW_BOOTSTRAP_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "gpuwire.h"

#define GW_HS_MAGIC 0x53485747u /* "GWHS" */
/* Version 2: the names table travels as the READY extension (TLVs 17, 18)
 * and a HELLO may ask for that extension alone (TLV 19, GW_HS_FLAG_EXT_ONLY:
 * no endpoint is made); version 1 carried the table in tags 13-15.  A
 * version-1 peer would skip the new TLVs (tables silently missing on both
 * sides) and answer an extension-only HELLO by making an endpoint, so the
 * two do not talk: each refuses the other's first frame with
 * GW_ERR_VERSION, "peer speaks handshake version N, this build speaks M"
 * (the server's ERROR answer is a frame of its own version, which the
 * client refuses with the same message). */
#define GW_HS_VERSION 2
#define GW_HS_HDR_LEN 12
#define GW_HS_MAX_BODY 16384
#define GW_HS_MAX_TL 8
#define GW_HS_NONCE_LEN 32
#define GW_HS_MAC_LEN 32

typedef enum gw_hs_type {
    GW_HS_HELLO = 1,
    GW_HS_ACCEPT = 2,
    GW_HS_CONFIRM = 3,
    GW_HS_READY = 4,
    GW_HS_ERROR = 5,
    GW_HS_JOIN = 6
} gw_hs_type_t;

enum {
    GW_HS_FLAG_AUTH = 1u << 0,
    GW_HS_FLAG_EXT_ONLY = 1u << 1, /* HELLO: only the extension of TLV 19 is wanted (no endpoint) */
    /* HELLO, ACCEPT: the sender knows the end-to-end integrity check
     * (proto/proto_integrity.h), and asks for it on this endpoint; the
     * endpoint checks when both know it and either asks */
    GW_HS_FLAG_INTEG_CAP = 1u << 2,
    GW_HS_FLAG_INTEG_ON = 1u << 3
};
/* An extension-only exchange runs HELLO/ACCEPT/CONFIRM as usual, ACCEPT
 * naming transport GW_HS_NO_TL, and READY (token GW_HS_EXT_TOKEN) carries
 * the extension; the server then closes. */
#define GW_HS_NO_TL 0xffu
#define GW_HS_EXT_TOKEN UINT64_MAX

/* Extension types: stable numbers, never reused. */
enum { GW_HS_EXT_NAMES = 1 };
#define GW_HS_MAX_EXT 4

typedef struct gw_hs_ext {
    uint16_t type, version;
    const uint8_t *data; /* points into the decoded buffer */
    uint16_t len;
    int has_mac;
    uint8_t mac[GW_HS_MAC_LEN];
} gw_hs_ext_t;

typedef struct gw_hs_blob {
    uint8_t tl;
    uint16_t len;
    const uint8_t *data; /* points into the decoded buffer */
} gw_hs_blob_t;

typedef struct gw_hs_msg {
    uint16_t version;
    uint16_t type;
    uint64_t uuid, host_id, token;
    uint32_t flags;
    int has_nonce, has_mac;
    uint8_t nonce[GW_HS_NONCE_LEN];
    uint8_t mac[GW_HS_MAC_LEN];
    uint8_t pref[GW_HS_MAX_TL]; /* transports in preference order */
    int npref;
    gw_hs_blob_t blob[GW_HS_MAX_TL];
    int nblob;
    int has_chosen;
    uint8_t chosen;
    int32_t status;   /* ERROR */
    char text[512];   /* ERROR reason / ACCEPT downgrades */
    uint16_t stream;  /* JOIN */
    /* READY: extensions (at most one of each type) */
    gw_hs_ext_t ext[GW_HS_MAX_EXT];
    int next;
    /* HELLO (extension only): the extension wanted, its version, an
     * argument the extension defines (names: the table offset wanted) */
    int has_ext_req;
    uint16_t ext_req_type, ext_req_version;
    uint32_t ext_req_arg;
    /* HELLO, ACCEPT: the sender's pid and pid namespace (0: not sent) */
    uint32_t pid;
    uint64_t pid_ns;
} gw_hs_msg_t;

/* Header check: GW_OK with *type and *body_len, GW_ERR_PROTOCOL (bad magic,
 * oversized body) or GW_ERR_VERSION (*version set). */
gw_status_t gw_hs_decode_header(const uint8_t *hdr, size_t len, uint16_t *version, uint16_t *type,
                                uint32_t *body_len, char *why, size_t whylen);
/* Decodes a whole frame (header + body).  Blob pointers point into buf. */
gw_status_t gw_hs_decode(const uint8_t *buf, size_t len, gw_hs_msg_t *out, char *why, size_t whylen);
/* The extension of type `type` a decoded message carries, or NULL. */
const gw_hs_ext_t *gw_hs_ext_find(const gw_hs_msg_t *m, uint16_t type);
/* Adds an extension to a message to encode (data must outlive the encode);
 * 0, or -1 when the message holds GW_HS_MAX_EXT already. */
int gw_hs_ext_add(gw_hs_msg_t *m, uint16_t type, uint16_t version, const uint8_t *data, uint16_t len);
/* Encodes msg into buf (cap bytes); returns the length, 0 if it does not fit. */
size_t gw_hs_encode(const gw_hs_msg_t *msg, uint8_t *buf, size_t cap);

#define GW_RKEY_MAGIC 0x4b525747u /* "GWRK" */
#define GW_RKEY_VERSION 1
#define GW_RKEY_FIXED_LEN 46
#define GW_RKEY_MAX_LEN 512

typedef struct gw_rkey_wire {
    uint64_t owner_uuid, id, addr, len;
    uint32_t access;
    uint8_t mem_type;
    int nblob;
    gw_hs_blob_t blob[GW_HS_MAX_TL];
} gw_rkey_wire_t;

gw_status_t gw_rkey_decode(const uint8_t *buf, size_t len, gw_rkey_wire_t *out, char *why,
                           size_t whylen);
/* Returns the encoded length (also when buf is NULL or cap too small: then
 * nothing is written). */
size_t gw_rkey_encode(const gw_rkey_wire_t *rk, uint8_t *buf, size_t cap);

#endif
