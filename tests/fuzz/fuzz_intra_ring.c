/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_intra_ring.c - libFuzzer target for the intra ring (intra.h): the
 * header a target maps from its peer, and a slot's descriptors and byte
 * count checked against a region table.  The table's one host region is a
 * real buffer, so a slot the check accepts is copied into it (ASan sees any
 * write outside); an accepted slot must keep every entry inside the region
 * and inside the slot's bytes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/intra/intra.h"

static gw_intra_slot_t table[GW_INTRA_SLOTS];
static uint8_t region[1u << 16];

static void must(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz_intra_ring: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char why[256];
    /* the header: any bytes, any length */
    uint8_t *h = calloc(1, sizeof(gw_intra_ring_hdr_t));
    must(h != NULL, "out of memory");
    memcpy(h, data, size < sizeof(gw_intra_ring_hdr_t) ? size : sizeof(gw_intra_ring_hdr_t));
    gw_status_t st = gw_intra_ring_accept(h, size < sizeof(gw_intra_ring_hdr_t) ? size : sizeof(gw_intra_ring_hdr_t),
                                          why, sizeof(why));
    must(st != GW_OK, "accepted a ring shorter than a ring"); /* the buffer is never a whole ring */
    free(h);
    /* a slot: the first 8 bytes are n and bytes, then descriptors and data */
    if (size < 8)
        return 0;
    table[5] = (gw_intra_slot_t){.kind = GW_INTRA_SLOT_HOST, .addr = (uint64_t)(uintptr_t)region,
                                 .len = sizeof(region), .access = GW_ACCESS_REMOTE_WRITE};
    atomic_store(&table[5].id, 9);
    uint32_t n, bytes;
    memcpy(&n, data, 4);
    memcpy(&bytes, data + 4, 4);
    uint8_t *slot = calloc(1, GW_INTRA_RING_SLOT_BYTES);
    must(slot != NULL, "out of memory");
    size_t body = size - 8 < GW_INTRA_RING_SLOT_BYTES ? size - 8 : GW_INTRA_RING_SLOT_BYTES;
    memcpy(slot, data + 8, body);
    n %= 2048; /* (the target refuses more descriptors than a slot holds before it reads any) */
    gw_intra_ring_desc_t *d = (gw_intra_ring_desc_t *)(void *)slot;
    if (data[0] & 1) /* aim half the inputs at the region */
        for (uint32_t i = 0; i < n && (size_t)(i + 1) * sizeof(*d) <= GW_INTRA_RING_SLOT_BYTES; i++) {
            d[i].slot = 5;
            d[i].id = 9;
            d[i].raddr = (uint64_t)(uintptr_t)region + d[i].raddr % sizeof(region);
        }
    if ((size_t)n * sizeof(*d) > GW_INTRA_RING_SLOT_BYTES)
        n = 0;
    if (data[0] & 2) { /* and a byte count that adds up, where it can */
        size_t off = gw_intra_ring_data_start(n);
        for (uint32_t i = 0; i < n; i++) {
            d[i].len = d[i].len % 4096;
            off += (d[i].len + 15u) & ~15u;
        }
        bytes = (uint32_t)off;
    }
    uint32_t bad = 0;
    st = gw_intra_ring_check(table, d, n, bytes, &bad, why, sizeof(why));
    if (st == GW_OK) {
        size_t off = gw_intra_ring_data_start(n);
        for (uint32_t i = 0; i < n; i++) {
            must(d[i].len > 0, "accepted an empty entry");
            must(d[i].raddr >= (uint64_t)(uintptr_t)region &&
                     d[i].raddr + d[i].len <= (uint64_t)(uintptr_t)region + sizeof(region),
                 "accepted an entry outside the region");
            off += (d[i].len + 15u) & ~15u;
        }
        must(off == bytes && bytes <= GW_INTRA_RING_SLOT_BYTES, "accepted entries past the slot");
        gw_intra_ring_unpack(d, n, slot + gw_intra_ring_data_start(n));
    } else {
        must(why[0] != '\0', "a refusal without a reason");
        must(n == 0 || bad < n, "a refusal naming an entry past the slot's");
    }
    free(slot);
    return 0;
}
