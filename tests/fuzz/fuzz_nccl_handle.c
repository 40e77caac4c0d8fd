/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_nccl_handle.c - libFuzzer target for the NCCL plugin's handle and
 * hello checks (plugin/nccl/gwn_wire.h): any 128 bytes a peer's NCCL hands
 * over, any hello a connecting peer sends.  Half the inputs get a valid magic
 * and version so the address check is reached.  An accepted handle must have a
 * terminated "host:port" address and re-encode to the same bytes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../plugin/nccl/gwn_wire.h"

static void must(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz_nccl_handle: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t buf[128];
    char why[256];
    gwn_handle_t h;
    size_t n = size < sizeof(buf) ? size : sizeof(buf);
    memset(buf, 0, sizeof(buf));
    memcpy(buf, data, n);
    if (size && (data[0] & 1)) {
        uint32_t m = GWN_HANDLE_MAGIC;
        uint16_t v = GWN_HANDLE_VERSION;
        memcpy(buf, &m, 4);
        memcpy(buf + 4, &v, 2);
    }
    why[0] = '\0';
    if (gwn_handle_decode(buf, n < 16 ? n : sizeof(buf), &h, why, sizeof(why)) == 0) {
        must(memchr(h.addr, '\0', sizeof(h.addr)) != NULL, "accepted address not terminated");
        must(strrchr(h.addr, ':') != NULL, "accepted address without a port");
        uint8_t again[128];
        must(gwn_handle_encode(again, sizeof(again), h.dev, h.id, h.addr) == 0, "accepted handle does not re-encode");
        gwn_handle_t h2;
        must(gwn_handle_decode(again, sizeof(again), &h2, why, sizeof(why)) == 0, "re-encoded handle refused");
        must(h2.id == h.id && h2.dev == h.dev && strcmp(h2.addr, h.addr) == 0, "handle does not round-trip");
    } else {
        must(why[0] != '\0' && strlen(why) < sizeof(why), "a refused handle has no reason");
    }
    uint64_t want = 0;
    if (size >= 16)
        memcpy(&want, data + 8, 8);
    why[0] = '\0';
    if (gwn_hello_check(data, size, want, why, sizeof(why)) != 0)
        must(why[0] != '\0', "a refused hello has no reason");
    else
        must(size == sizeof(gwn_hello_t), "a hello of the wrong size accepted");
    return 0;
}
