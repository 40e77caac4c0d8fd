/* SPDX-License-Identifier: Apache-2.0 */
/* gwn_wire.h - the NCCL plugin's two wire formats (fuzzed: tests/fuzz/fuzz_nccl_handle.c).
 *
 *   handle  what listen() writes into NCCL's 128-byte handle and connect()
 *           reads on another rank: u32 magic "GWNH", u16 version, u16 device,
 *           u64 listener id (random), char addr[96] "ip:port" NUL-terminated;
 *           the rest of NCCL's buffer is zero.
 *   hello   the first message of a connection (tag GWN_HELLO_TAG): u32 magic
 *           "GWHL", u32 device, u64 the listener id from the handle.
 * Both are exchanged between processes of one job on one architecture, as
 * NCCL's own handles are (host byte order).
 */
#ifndef GW_NCCL_WIRE_H
#define GW_NCCL_WIRE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GWN_HANDLE_MAGIC 0x484e5747u /* "GWNH" */
#define GWN_HANDLE_VERSION 1
#define GWN_HELLO_MAGIC 0x4c485747u /* "GWHL" */

typedef struct gwn_handle {
    uint32_t magic;
    uint16_t version;
    uint16_t dev;
    uint64_t id;
    char addr[96];
} gwn_handle_t;

typedef struct gwn_hello {
    uint32_t magic;
    uint32_t dev;
    uint64_t id;
} gwn_hello_t;

/* Checks a handle of len bytes; 0 and *out on success, -1 with the reason in why. */
static inline int gwn_handle_decode(const void *buf, size_t len, gwn_handle_t *out, char *why, size_t whylen)
{
    if (len < sizeof(*out)) {
        snprintf(why, whylen, "handle of %zu bytes, a gpuwire handle has %zu", len, sizeof(*out));
        return -1;
    }
    memcpy(out, buf, sizeof(*out));
    if (out->magic != GWN_HANDLE_MAGIC || out->version != GWN_HANDLE_VERSION) {
        snprintf(why, whylen, "not a gpuwire handle of version %d (magic 0x%08x version %u)", GWN_HANDLE_VERSION,
                 out->magic, out->version);
        return -1;
    }
    const char *nul = memchr(out->addr, '\0', sizeof(out->addr));
    const char *colon = nul ? strrchr(out->addr, ':') : NULL;
    char *end = NULL;
    long port = colon && colon[1] ? strtol(colon + 1, &end, 10) : -1;
    if (!nul || colon == out->addr || !end || *end || port < 1 || port > 65535) {
        snprintf(why, whylen, "gpuwire handle without a \"host:port\" address");
        return -1;
    }
    return 0;
}

/* Writes a handle into NCCL's buffer of cap bytes (zero-filled past it); -1 if
 * it does not fit or addr is too long. */
static inline int gwn_handle_encode(void *buf, size_t cap, uint16_t dev, uint64_t id, const char *addr)
{
    gwn_handle_t h = {.magic = GWN_HANDLE_MAGIC, .version = GWN_HANDLE_VERSION, .dev = dev, .id = id};
    if (cap < sizeof(h) || strlen(addr) >= sizeof(h.addr))
        return -1;
    memcpy(h.addr, addr, strlen(addr) + 1);
    memset(buf, 0, cap);
    memcpy(buf, &h, sizeof(h));
    return 0;
}

/* Checks a received hello against the listener's id; 0 when it matches. */
static inline int gwn_hello_check(const void *buf, size_t len, uint64_t want_id, char *why, size_t whylen)
{
    gwn_hello_t h;
    if (len != sizeof(h)) {
        snprintf(why, whylen, "hello of %zu bytes, expected %zu", len, sizeof(h));
        return -1;
    }
    memcpy(&h, buf, sizeof(h));
    if (h.magic != GWN_HELLO_MAGIC) {
        snprintf(why, whylen, "hello with magic 0x%08x", h.magic);
        return -1;
    }
    if (h.id != want_id) {
        snprintf(why, whylen, "the connecting peer carries handle id 0x%016llx, this listener gave out 0x%016llx",
                 (unsigned long long)h.id, (unsigned long long)want_id);
        return -1;
    }
    return 0;
}

#endif
