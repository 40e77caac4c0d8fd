/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_ofi_wire.c - libFuzzer target for the ofi transport's wire formats
 * (transport/ofi/ofi_wire.h): the address blob of the handshake, the ofi
 * part of a remote key and the header of every message a peer sends over
 * the provider (every type, the CREDIT message and the credits every
 * header's flags carry among them).  The first byte picks the parser; what
 * parses must stay in its limits and (blob and key) re-pack to the same
 * bytes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/ofi/ofi_wire.h"

static void must(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz_ofi_wire: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    char why[256];
    why[0] = '\0';
    static uint8_t out[1024];
    switch (data[0] % 3) {
    case 0: {
        static gw_ofi_addr_t a;
        gw_status_t st = gw_ofi_addr_unpack(&a, p, n, why, sizeof(why));
        must(strlen(why) < sizeof(why), "why not terminated");
        if (st != GW_OK) {
            must(st == GW_ERR_PROTOCOL || st == GW_ERR_VERSION, "a bad address must give PROTOCOL or VERSION");
            must(why[0] != '\0', "a rejected address has no reason");
            return 0;
        }
        must(a.namelen > 0 && a.namelen <= GW_OFI_NAME_MAX, "name length out of range");
        must(strlen(a.prov) > 0 && strlen(a.prov) < GW_OFI_PROV_MAX, "provider name out of range");
        size_t m = gw_ofi_addr_pack(&a, out, sizeof(out));
        must(m == n && !memcmp(out, p, n), "a parsed address does not re-pack to itself");
        break;
    }
    case 1: {
        gw_ofi_rkey_t k;
        gw_status_t st = gw_ofi_rkey_parse(&k, p, n, why, sizeof(why));
        if (st != GW_OK) {
            must(st == GW_ERR_INVALID_KEY && why[0], "a bad key part must give INVALID_KEY with a reason");
            return 0;
        }
        size_t m = gw_ofi_rkey_pack(&k, out, sizeof(out));
        must(m == n && !memcmp(out, p, n), "a parsed key part does not re-pack to itself");
        break;
    }
    default: {
        gw_ofi_hdr_t h;
        gw_status_t st = gw_ofi_hdr_parse(&h, p, n, 16384 - GW_OFI_HDR_LEN, why, sizeof(why));
        uint64_t tag = 0;
        unsigned cred = 0;
        int eager = gw_ofi_hdr_eager(p, n, 16384 - GW_OFI_HDR_LEN, &tag, &cred);
        /* the receive path's inline check: an eager message exactly when the full parse says so */
        must(eager == (st == GW_OK && h.type == GW_OFI_EAGER), "the inline eager check disagrees with the parse");
        must(!eager || tag == h.f[0], "the inline eager check's tag differs");
        must(!eager || cred == h.flags >> GW_OFI_F_CREDIT_SHIFT, "the inline eager check's credits differ");
        if (st != GW_OK) {
            must(st == GW_ERR_PROTOCOL && why[0], "a bad message must give PROTOCOL with a reason");
            return 0;
        }
        must(h.type >= GW_OFI_EAGER && h.type <= GW_OFI_TYPE_MAX, "unknown type accepted");
        must(h.type == GW_OFI_EAGER || h.type == GW_OFI_AM ? h.f[1] == n - GW_OFI_HDR_LEN : n == GW_OFI_HDR_LEN,
             "length not checked");
        must(h.type != GW_OFI_AM || h.f[1] <= GW_OFI_AM_MAX, "an active message over its bound accepted");
        /* credits: never more than the slots; a CREDIT returns some and carries nothing else */
        must(h.flags >> GW_OFI_F_CREDIT_SHIFT <= GW_OFI_CREDIT_SLOTS, "more credits than slots accepted");
        must(h.type != GW_OFI_CREDIT || (h.flags >> GW_OFI_F_CREDIT_SHIFT && !(h.f[0] | h.f[1] | h.f[2] | h.f[3] |
                                                                                h.f[4])),
             "a CREDIT without credits, or with fields, accepted");
        gw_ofi_hdr_write(&h, out);
        must(!memcmp(out, p, GW_OFI_HDR_LEN), "a parsed header does not re-write to itself");
        break;
    }
    }
    return 0;
}
