/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_verbs_rkey.c - libFuzzer target for the verbs part of a packed remote
 * key (version 1: MR pieces; version 2: a GPU region on the staging rung).
 * Peers send it; a blob that parses must stay inside its limits and survive a
 * re-format unchanged. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/verbs/verbs.h"

static void must(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz_verbs_rkey: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static gw_verbs_rkey_info_t k, k2;
    char why[256];
    why[0] = '\0';
    gw_status_t st = gw_verbs_rkey_parse(data, size, &k, why, sizeof(why));
    must(strlen(why) < sizeof(why), "why not terminated");
    if (st != GW_OK) {
        must(st == GW_ERR_INVALID_KEY, "a bad blob must give GW_ERR_INVALID_KEY");
        must(why[0] != '\0', "a rejected blob has no reason");
        return 0;
    }
    must(k.version == GW_VERBS_RKEY_MR || k.version == GW_VERBS_RKEY_STAGED, "unknown version accepted");
    must(k.n >= 0 && k.n <= GW_VERBS_MAX_MRS, "piece count out of range");
    must(k.version == GW_VERBS_RKEY_STAGED || k.n == 0 || k.chunk > 0, "pieces of 0 bytes");
    static uint8_t out[256];
    size_t n = gw_verbs_rkey_format(&k, out, sizeof(out));
    must(n == size && memcmp(out, data, n) == 0, "a parsed blob does not re-format to itself");
    must(gw_verbs_rkey_parse(out, n, &k2, why, sizeof(why)) == GW_OK && k2.version == k.version && k2.n == k.n &&
             k2.base == k.base && k2.chunk == k.chunk && !memcmp(k2.rkey, k.rkey, sizeof(k.rkey)),
         "round trip changed the blob");
    must(gw_verbs_rkey_format(&k, out, n - 1) == 0, "formatting into a short buffer must fail");
    return 0;
}
