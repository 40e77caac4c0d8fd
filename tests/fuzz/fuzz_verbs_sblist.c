/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_verbs_sblist.c - libFuzzer target for the piece list of a verbs
 * chunk request (a staged batch's chunk, verbs.h GW_VERBS_SBLIST_*), which
 * the owner of staged GPU memory parses from its peer.  Half the inputs get
 * a valid magic, version, a count that fits their length and the matching
 * byte total, so the fuzzer reaches the pieces.  An accepted list must fit
 * the message and its pieces must add up to the request's length. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/verbs/verbs.h"

static void must(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz_verbs_sblist: %s\n", what);
        abort();
    }
}

static void check_one(const uint8_t *b, size_t len)
{
    char why[256];
    why[0] = '\0';
    uint32_t n = 12345;
    gw_status_t st = gw_verbs_sblist_check(b, (uint32_t)len, &n, why, sizeof(why));
    must(strlen(why) < sizeof(why), "why not terminated");
    if (st != GW_OK) {
        must(st == GW_ERR_PROTOCOL, "a bad list must give GW_ERR_PROTOCOL");
        must(why[0] != '\0', "a rejected list has no reason");
        must(n == 12345, "a rejected list reports a count");
        return;
    }
    must(n >= 1 && n <= GW_VERBS_SBLIST_MAX, "accepted a count out of range");
    must(len >= GW_VERBS_SREQ_BYTES + (size_t)n * GW_VERBS_SBLIST_PIECE, "accepted a list longer than its message");
    uint64_t sum = 0;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t l = gw_get_u32(b + GW_VERBS_SREQ_BYTES + (size_t)k * GW_VERBS_SBLIST_PIECE + 16);
        must(l > 0, "accepted an empty piece");
        sum += l;
    }
    must(sum == gw_get_u32(b + 36), "accepted pieces that do not add up to the request");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1u << 20))
        return 0;
    check_one(data, size);
    if (size >= GW_VERBS_SREQ_BYTES + GW_VERBS_SBLIST_PIECE && (data[0] & 1)) {
        uint8_t *b = malloc(size);
        must(b != NULL, "out of memory");
        memcpy(b, data, size);
        uint32_t n = (uint32_t)((size - GW_VERBS_SREQ_BYTES) / GW_VERBS_SBLIST_PIECE);
        if (n > GW_VERBS_SBLIST_MAX)
            n = GW_VERBS_SBLIST_MAX;
        gw_put_u32(b + 40, GW_VERBS_SBLIST_MAGIC);
        gw_put_u16(b + 44, GW_VERBS_SBLIST_VERSION);
        gw_put_u16(b + 46, (uint16_t)n);
        uint32_t sum = 0;
        for (uint32_t k = 0; k < n; k++)
            sum += gw_get_u32(b + GW_VERBS_SREQ_BYTES + (size_t)k * GW_VERBS_SBLIST_PIECE + 16);
        gw_put_u32(b + 36, sum);
        check_one(b, size);
        free(b);
    }
    return 0;
}
