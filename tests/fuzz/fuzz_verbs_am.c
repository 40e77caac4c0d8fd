/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_verbs_am.c - libFuzzer target for a verbs active message (verbs.h
 * GW_VERBS_AM_*, verbs_am.c), which the receiver parses from its peer.
 * Half the inputs get a valid type, magic and version and a length that
 * matches their size, so the fuzzer reaches the handler id and payload
 * checks.  An accepted message must name a handler in range and a payload
 * inside the message, of at most GW_AM_MAX bytes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/verbs/verbs.h"

static void must(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz_verbs_am: %s\n", what);
        abort();
    }
}

static void check_one(const uint8_t *b, size_t size)
{
    char why[256];
    why[0] = '\0';
    unsigned id = 12345;
    const uint8_t *data = NULL;
    uint32_t len = 54321;
    gw_status_t st = gw_verbs_am_check(b, (uint32_t)size, &id, &data, &len, why, sizeof(why));
    must(strlen(why) < sizeof(why), "why not terminated");
    if (st != GW_OK) {
        must(st == GW_ERR_PROTOCOL, "a bad message must give GW_ERR_PROTOCOL");
        must(why[0] != '\0', "a rejected message has no reason");
        must(id == 12345 && len == 54321 && data == NULL, "a rejected message reports a handler or payload");
        return;
    }
    must(id < GW_AM_IDS, "accepted a handler id out of range");
    must(len <= GW_AM_MAX, "accepted a payload over GW_AM_MAX");
    must(data == b + GW_VERBS_AM_HDR && (size_t)GW_VERBS_AM_HDR + len == size,
         "accepted a payload that is not the message's rest");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1u << 16))
        return 0;
    check_one(data, size);
    if (size >= GW_VERBS_AM_HDR && (data[0] & 1)) {
        uint8_t *b = malloc(size);
        must(b != NULL, "out of memory");
        memcpy(b, data, size);
        b[0] = CT_AM;
        gw_put_u32(b + GW_VERBS_HDR, GW_VERBS_AM_MAGIC);
        gw_put_u16(b + GW_VERBS_HDR + 4, GW_VERBS_AM_VERSION);
        gw_put_u16(b + GW_VERBS_HDR + 6, 0);
        gw_put_u64(b + 16, size - GW_VERBS_AM_HDR);
        if (data[0] & 2)
            gw_put_u64(b + 8, data[1] % (GW_AM_IDS + 1));
        check_one(b, size);
        free(b);
    }
    return 0;
}
