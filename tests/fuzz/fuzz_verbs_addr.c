/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_verbs_addr.c - libFuzzer target for the verbs address blob that the
 * handshake carries (queue pair numbers, GIDs, MTU, device name).  A blob
 * that decodes must stay inside its limits and survive a re-encode. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/verbs/verbs.h"

static void must(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz_verbs_addr: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static gw_verbs_addr_t a, b;
    memset(&a, 0, sizeof(a));
    if (gw_verbs_addr_unpack(&a, data, size) != GW_OK)
        return 0;
    must(a.nqps >= 1 && a.nqps <= GW_VERBS_MAX_QPS, "queue pair count out of range");
    must(a.ngids <= GW_VERBS_MAX_GIDS, "GID count out of range");
    must(memchr(a.dev, '\0', sizeof(a.dev)) != NULL, "device name not terminated");
    static uint8_t out[4096];
    size_t n = gw_verbs_addr_pack(&a, out, sizeof(out));
    must(n > 0, "a decoded blob does not re-encode");
    memset(&b, 0, sizeof(b));
    must(gw_verbs_addr_unpack(&b, out, n) == GW_OK, "a re-encoded blob does not decode");
    must(b.nqps == a.nqps && b.ngids == a.ngids && b.mtu == a.mtu && b.lid == a.lid && b.features == a.features &&
             !memcmp(b.qpn, a.qpn, sizeof(a.qpn[0]) * a.nqps) && !strcmp(b.dev, a.dev),
         "round trip changed the blob");
    return 0;
}
