/* SPDX-License-Identifier: Apache-2.0 */
/* test_transports.c - the transport list (core/transports.def): the wire ids
 * stay where they are, the tables and names made from the list agree, the
 * default preference order names every transport once, and the check a
 * table passes at load refuses a wrong size, a wrong name and a NULL slot. */
#include <stdio.h>
#include <string.h>

#include "core/settings.h"
#include "transport/base/tl.h"
#include "transport/intra/intra.h"
#include "harness.h"

/* The ids are written into packed remote keys and handshakes: a peer of
 * another version reads them.  Never change these numbers. */
_Static_assert(GW_TL_VERBS == 0, "wire id of verbs");
_Static_assert(GW_TL_INTRA == 1, "wire id of intra");
_Static_assert(GW_TL_TCP == 2, "wire id of tcp");
_Static_assert(GW_TL_OFI == 3, "wire id of ofi");

static void check_refused(const gw_tl_ops_t *ops, int id, const char *want)
{
    char why[256] = "";
    gw_status_t st = gw_tl_check_ops(ops, id, why, sizeof(why));
    if (st == GW_OK || !strstr(why, want)) {
        fprintf(stderr, "gw_tl_check_ops: %s \"%s\", expected a refusal naming \"%s\"\n", gw_status_name(st), why,
                want);
        gwt_failures++;
    }
}

/* intra's key part is parsed once, at unpack, into rk->tl_key, which its
 * operations read (they never decode the raw part again). */
static void test_intra_rkey(void)
{
    gw_rkey_t rk;
    char why[256];
    uint8_t b[12] = {0};
    memset(&rk, 0xee, sizeof(rk)); /* stale bytes must not survive */
    rk.id = 77;
    CHECK(gw_intra_rkey_unpack(NULL, b, 0, &rk, why, sizeof(why)) == GW_OK);
    CHECK(gw_intra_rkey_of(&rk)->present == 0); /* no part: accepted, refused at the operation */
    gw_put_u32(b, 5);
    gw_put_u64(b + 4, 77);
    CHECK(gw_intra_rkey_unpack(NULL, b, sizeof(b), &rk, why, sizeof(why)) == GW_OK);
    const gw_intra_rkey_t *ik = gw_intra_rkey_of(&rk);
    CHECK(ik->present == 1 && ik->slot == 5 && ik->id == 77);
    gw_rkey_t copy = rk; /* a batch key list holds copies: the parsed part goes with them */
    CHECK(gw_intra_rkey_of(&copy)->slot == 5 && gw_intra_rkey_of(&copy)->id == 77);
    gw_put_u64(b + 4, 78); /* another region's id: forged */
    CHECK(gw_intra_rkey_unpack(NULL, b, sizeof(b), &rk, why, sizeof(why)) == GW_ERR_INVALID_KEY);
    CHECK(strstr(why, "names region 78") != NULL);
    gw_put_u64(b + 4, 77);
    gw_put_u32(b, GW_INTRA_SLOTS);
    CHECK(gw_intra_rkey_unpack(NULL, b, sizeof(b), &rk, why, sizeof(why)) == GW_ERR_INVALID_KEY);
    CHECK(strstr(why, "slot") != NULL);
    CHECK(gw_intra_rkey_unpack(NULL, b, 11, &rk, why, sizeof(why)) == GW_ERR_INVALID_KEY);
    CHECK(strstr(why, "11 bytes") != NULL);
}

int main(void)
{
    test_intra_rkey();
    /* the numbers at run time too (a renumbered .def with the asserts edited alike still fails here) */
    CHECK(GW_TL_VERBS == 0 && GW_TL_INTRA == 1 && GW_TL_TCP == 2 && GW_TL_OFI == 3);
    CHECK(GW_TL_COUNT == 4);
    CHECK(!strcmp(gw_tl_names[GW_TL_VERBS], "verbs"));
    CHECK(!strcmp(gw_tl_names[GW_TL_INTRA], "intra"));
    CHECK(!strcmp(gw_tl_names[GW_TL_TCP], "tcp"));
    CHECK(!strcmp(gw_tl_names[GW_TL_OFI], "ofi"));

    /* dense, named, distinct; each table built in passes the load check */
    for (int i = 0; i < GW_TL_COUNT; i++) {
        REQUIRE(gw_tl_names[i] && gw_tl_names[i][0]);
        for (int j = 0; j < i; j++)
            CHECK(strcmp(gw_tl_names[i], gw_tl_names[j]) != 0);
        const gw_tl_ops_t *ops = gw_tl_table[i];
        if (!ops)
            continue;
        char why[256] = "";
        gw_status_t st = gw_tl_check_ops(ops, i, why, sizeof(why));
        if (st != GW_OK)
            fprintf(stderr, "transport %s: %s\n", gw_tl_names[i], why);
        CHECK(st == GW_OK);
        CHECK(ops->size == sizeof(gw_tl_ops_t));
        CHECK(!strcmp(ops->name, gw_tl_names[i]));
    }
    CHECK(gw_tl_table[GW_TL_TCP] != NULL);
    CHECK(gw_tl_table[GW_TL_INTRA] != NULL);
    CHECK((gw_tl_table[GW_TL_VERBS] != NULL) == (GW_HAVE_VERBS != 0));
    CHECK((gw_tl_table[GW_TL_OFI] != NULL) == (GW_HAVE_OFI != 0));

    /* the default GPUWIRE_TRANSPORTS lists each transport exactly once */
    const gw_setting_desc_t *d = gw_setting_at(GW_SET_TRANSPORTS);
    REQUIRE(d && !strcmp(d->name, "GPUWIRE_TRANSPORTS"));
    int seen[GW_TL_COUNT] = {0};
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", d->default_value);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int found = -1;
        for (int i = 0; i < GW_TL_COUNT; i++)
            if (!strcmp(tok, gw_tl_names[i]))
                found = i;
        if (found < 0)
            fprintf(stderr, "default GPUWIRE_TRANSPORTS names \"%s\", not in core/transports.def\n", tok);
        CHECK(found >= 0);
        if (found >= 0)
            seen[found]++;
    }
    for (int i = 0; i < GW_TL_COUNT; i++) {
        if (seen[i] != 1)
            fprintf(stderr, "default GPUWIRE_TRANSPORTS \"%s\" names %s %d times\n", d->default_value,
                    gw_tl_names[i], seen[i]);
        CHECK(seen[i] == 1);
    }

    /* the load check refuses what the context must not use */
    gw_tl_ops_t bad = *gw_tl_table[GW_TL_TCP];
    bad.size = sizeof(gw_tl_ops_t) - sizeof(void *); /* built against an older tl.h */
    check_refused(&bad, GW_TL_TCP, "bytes");
    bad = *gw_tl_table[GW_TL_TCP];
    check_refused(&bad, GW_TL_INTRA, "named \"tcp\"");
    bad.name = NULL;
    check_refused(&bad, GW_TL_TCP, "(null)");
    bad = *gw_tl_table[GW_TL_TCP];
    bad.ep_describe = NULL;
    check_refused(&bad, GW_TL_TCP, "no ep_describe");
    bad = *gw_tl_table[GW_TL_TCP];
    bad.ep_progress = NULL; /* the newest slot: an absent operation is a default, never NULL */
    check_refused(&bad, GW_TL_TCP, "no ep_progress");
    bad = *gw_tl_table[GW_TL_TCP];
    bad.iface_open = NULL;
    check_refused(&bad, GW_TL_TCP, "no iface_open");
    return gwt_done("unit_transports");
}
