/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_tcp_bdesc.c - libFuzzer target for the descriptor block of a tcp
 * batch frame (tcp.h).  Half the inputs get a valid magic, version and an
 * entry count that matches their length, so the fuzzer reaches the entries.
 * A block that checks must yield entries that re-encode to the same bytes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/tcp/tcp.h"

static void must(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz_tcp_bdesc: %s\n", what);
        abort();
    }
}

static void check_one(const uint8_t *b, size_t len)
{
    char why[256];
    why[0] = '\0';
    uint32_t n = 12345;
    gw_status_t st = gw_tcp_bdesc_check(b, len, &n, why, sizeof(why));
    must(strlen(why) < sizeof(why), "why not terminated");
    if (st != GW_OK) {
        must(st == GW_ERR_PROTOCOL || st == GW_ERR_VERSION, "a bad block must give PROTOCOL or VERSION");
        must(why[0] != '\0', "a rejected block has no reason");
        must(n == 0, "a rejected block reports entries");
        return;
    }
    must(n <= GW_TCP_BDESC_MAX_ENT, "accepted too many entries");
    must(len == GW_TCP_BDESC_HDR + (size_t)n * GW_TCP_BDESC_ENT, "accepted a block of the wrong length");
    uint8_t *out = malloc(len);
    must(out != NULL, "out of memory");
    gw_tcp_bdesc_init(out, n);
    for (uint32_t i = 0; i < n; i++) {
        uint64_t r, a, l;
        gw_tcp_bdesc_entry(b, i, &r, &a, &l);
        gw_tcp_bdesc_set(out, i, r, a, l);
    }
    uint32_t n2;
    must(gw_tcp_bdesc_check(out, len, &n2, why, sizeof(why)) == GW_OK && n2 == n, "re-encoded block does not check");
    must(memcmp(out + GW_TCP_BDESC_HDR, b + GW_TCP_BDESC_HDR, len - GW_TCP_BDESC_HDR) == 0,
         "entries changed in a round trip");
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_one(data, size);
    if (size >= GW_TCP_BDESC_HDR && (data[0] & 1)) {
        uint8_t *b = malloc(size);
        must(b != NULL, "out of memory");
        memcpy(b, data, size);
        uint32_t n = (uint32_t)((size - GW_TCP_BDESC_HDR) / GW_TCP_BDESC_ENT);
        gw_tcp_bdesc_init(b, n);
        check_one(b, GW_TCP_BDESC_HDR + (size_t)n * GW_TCP_BDESC_ENT);
        free(b);
    }
    return 0;
}
