/* SPDX-License-Identifier: Apache-2.0 */
/* test_intra_ring.c - the intra ring's layout functions (intra.h,
 * intra_ring.c) without processes: the header a target accepts, how many
 * entries fit a slot, the check of a slot against a region table (every
 * refusal with its status and the first bad entry, nothing copied on a
 * refusal), and the copy of a checked slot into place. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "transport/intra/intra.h"

static gw_intra_slot_t table[GW_INTRA_SLOTS];
static uint8_t region[1u << 16];

static void test_header(void)
{
    size_t len = gw_intra_ring_len();
    uint8_t *r = calloc(1, len);
    REQUIRE(r != NULL);
    char why[256];
    CHECK_ST(gw_intra_ring_accept(r, len, why, sizeof(why)), GW_ERR_PROTOCOL); /* no magic */
    gw_intra_ring_init(r);
    CHECK_ST(gw_intra_ring_accept(r, len, why, sizeof(why)), GW_OK);
    CHECK_ST(gw_intra_ring_accept(r, len - 1, why, sizeof(why)), GW_ERR_PROTOCOL); /* short */
    CHECK(strstr(why, "slots") != NULL);
    gw_intra_ring_hdr_t *h = (gw_intra_ring_hdr_t *)r;
    h->version = GW_INTRA_RING_VERSION + 1;
    CHECK_ST(gw_intra_ring_accept(r, len, why, sizeof(why)), GW_ERR_VERSION);
    CHECK(strstr(why, "version") != NULL);
    h->version = GW_INTRA_RING_VERSION;
    h->slot_bytes = 1;
    CHECK_ST(gw_intra_ring_accept(r, len, why, sizeof(why)), GW_ERR_PROTOCOL);
    free(r);
}

static void test_fit(void)
{
    uint64_t len[2048];
    for (int i = 0; i < 2048; i++)
        len[i] = 1024;
    /* 1 KiB entries: 24-byte descriptors plus 1024 bytes each in 36 KiB */
    uint32_t k = gw_intra_ring_fit(len, sizeof(len[0]), 2048);
    CHECK(k == 35);
    CHECK(gw_intra_ring_data_start(k) + (size_t)k * 1024 <= GW_INTRA_RING_SLOT_BYTES);
    CHECK(gw_intra_ring_data_start(k + 1) + (size_t)(k + 1) * 1024 > GW_INTRA_RING_SLOT_BYTES);
    CHECK(gw_intra_ring_fit(len, sizeof(len[0]), 5) == 5);
    len[0] = GW_INTRA_RING_SLOT_BYTES; /* descriptors need room too */
    CHECK(gw_intra_ring_fit(len, sizeof(len[0]), 4) == 0);
    len[0] = 40000;
    CHECK(gw_intra_ring_fit(len, sizeof(len[0]), 4) == 0);
    len[0] = len[1] = len[2] = 16384; /* two 16 KiB entries a slot */
    CHECK(gw_intra_ring_fit(len, sizeof(len[0]), 3) == 2);
    len[0] = 1;
    len[1] = 0; /* never a zero-length entry */
    CHECK(gw_intra_ring_fit(len, sizeof(len[0]), 4) == 1);
    for (int i = 0; i < 2048; i++)
        len[i] = 1;
    k = gw_intra_ring_fit(len, sizeof(len[0]), 2048); /* 16 bytes of data each at least */
    CHECK(k == 920); /* 64-aligned 920 descriptors (22080 bytes) + 920 * 16 = 36800; one more: 36880 */
    CHECK(gw_intra_ring_data_start(k) + (size_t)k * 16 <= GW_INTRA_RING_SLOT_BYTES);
    CHECK(gw_intra_ring_data_start(k + 1) + (size_t)(k + 1) * 16 > GW_INTRA_RING_SLOT_BYTES);
}

/* a slot of n entries of len bytes at region offsets off0 + i * step */
static uint32_t build(uint8_t *slot, gw_intra_ring_desc_t *d, uint32_t n, uint32_t len, uint64_t off0, uint64_t step)
{
    size_t off = gw_intra_ring_data_start(n);
    for (uint32_t i = 0; i < n; i++) {
        d[i] = (gw_intra_ring_desc_t){.slot = 3, .len = len, .id = 77, .raddr = (uint64_t)(uintptr_t)region + off0 + i * step};
        memset(slot + off, (int)(i + 1), len);
        off += (len + 15u) & ~15u;
    }
    memcpy(slot, d, n * sizeof(*d));
    return (uint32_t)off;
}

static void test_check(void)
{
    table[3] = (gw_intra_slot_t){.kind = GW_INTRA_SLOT_HOST, .addr = (uint64_t)(uintptr_t)region,
                                 .len = sizeof(region), .access = GW_ACCESS_REMOTE_WRITE};
    atomic_store(&table[3].id, 77);
    uint8_t *slot = calloc(1, GW_INTRA_RING_SLOT_BYTES);
    gw_intra_ring_desc_t d[8];
    REQUIRE(slot != NULL);
    char why[256];
    uint32_t bad = 99;
    uint32_t bytes = build(slot, d, 8, 100, 64, 1000);
    CHECK_ST(gw_intra_ring_check(table, d, 8, bytes, &bad, why, sizeof(why)), GW_OK);
    CHECK(bad == 0);
    memset(region, 0, sizeof(region));
    gw_intra_ring_unpack(d, 8, slot + gw_intra_ring_data_start(8));
    int ok = 1;
    for (uint32_t i = 0; i < 8; i++)
        for (uint32_t j = 0; j < 100; j++)
            ok &= region[64 + i * 1000 + j] == (uint8_t)(i + 1);
    CHECK(ok);
    CHECK(region[63] == 0 && region[64 + 100] == 0); /* nothing outside the entries */

    /* refusals: the status and the first bad entry */
    CHECK_ST(gw_intra_ring_check(table, d, 8, bytes + 16, &bad, why, sizeof(why)), GW_ERR_PROTOCOL);
    CHECK_ST(gw_intra_ring_check(table, d, 0, 0, &bad, why, sizeof(why)), GW_ERR_PROTOCOL);
    d[5].len = 0;
    CHECK_ST(gw_intra_ring_check(table, d, 8, bytes, &bad, why, sizeof(why)), GW_ERR_PROTOCOL);
    CHECK(bad == 5);
    d[5].len = 100;
    d[6].raddr = (uint64_t)(uintptr_t)region + sizeof(region) - 50; /* runs past the region */
    CHECK_ST(gw_intra_ring_check(table, d, 8, bytes, &bad, why, sizeof(why)), GW_ERR_OUT_OF_BOUNDS);
    CHECK(bad == 6);
    CHECK(strstr(why, "entry 6") != NULL);
    d[6].raddr = (uint64_t)(uintptr_t)region;
    d[2].id = 78; /* another region's id: revoked, the slot reused */
    CHECK_ST(gw_intra_ring_check(table, d, 8, bytes, &bad, why, sizeof(why)), GW_ERR_INVALID_KEY);
    CHECK(bad == 2);
    CHECK(strstr(why, "deregistered") != NULL);
    d[2].id = 77;
    d[1].slot = GW_INTRA_SLOTS;
    CHECK_ST(gw_intra_ring_check(table, d, 8, bytes, &bad, why, sizeof(why)), GW_ERR_PROTOCOL);
    CHECK(bad == 1);
    d[1].slot = 3;
    table[3].access = GW_ACCESS_REMOTE_READ;
    CHECK_ST(gw_intra_ring_check(table, d, 8, bytes, &bad, why, sizeof(why)), GW_ERR_ACCESS);
    CHECK(bad == 0);
    table[3].access = GW_ACCESS_REMOTE_WRITE;
    table[3].kind = GW_INTRA_SLOT_IPC;
    CHECK_ST(gw_intra_ring_check(table, d, 8, bytes, &bad, why, sizeof(why)), GW_ERR_PROTOCOL);
    table[3].kind = GW_INTRA_SLOT_HOST;
    atomic_store(&table[3].id, 0); /* deregistered */
    CHECK_ST(gw_intra_ring_check(table, d, 8, bytes, &bad, why, sizeof(why)), GW_ERR_INVALID_KEY);
    CHECK_ST(gw_intra_ring_check(NULL, d, 8, bytes, &bad, why, sizeof(why)), GW_OK); /* the layout alone */
    free(slot);
}

int main(void)
{
    test_header();
    test_fit();
    test_check();
    return gwt_done("unit_intra_ring");
}
