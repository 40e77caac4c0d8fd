/* SPDX-License-Identifier: Apache-2.0 */
/* it_kv.c - descriptor tables at serving scale between two processes (over
 * tcp, and over intra as it_kv_intra): local and remote tables of 1,000,000
 * entries built from columns (gw_dlist_*_table) and computed ones (no
 * columns, blocks per region), transfers of random index subsets (puts
 * checked against the image the target's region must hold, gets checked
 * entry by entry), and the refusals that name the bad entry: an index past
 * the list, a region index past the regions given, an entry outside its
 * region. */
#include <stdlib.h>
#include <string.h>

#include "it.h"

#define NENT 1000000u
#define ESZ 16u              /* bytes per entry: the target's region is 16 MB */
#define REGION ((size_t)NENT * ESZ)
#define NSEL 327680u         /* the 70B prompt's descriptors per rank */
#define NLREG 4              /* local regions of the column and per-region tables */

static it_target_t T;
static gw_context_t *ctx;
static gw_ep_t *ep;
static gw_rkey_t *rk;
static uint8_t *src, *dst, *img;
static uint8_t *lreg[NLREG];
static gw_mem_t *msrc, *mdst, *mreg[NLREG];
static uint64_t rng = 0x51ed270b27d3c1a5ull;

static int msg_has(const char *s)
{
    if (strstr(gw_last_error(ctx), s))
        return 1;
    fprintf(stderr, "expected \"%s\" in: %s\n", s, gw_last_error(ctx));
    return 0;
}

/* The first k of a random permutation of 0 .. n-1. */
static void pick(uint32_t *out, uint32_t k, uint32_t n)
{
    uint32_t *p = malloc((size_t)n * sizeof(*p));
    CHECK(p != NULL);
    for (uint32_t i = 0; i < n; i++)
        p[i] = i;
    for (uint32_t i = 0; i < k; i++) {
        uint32_t j = i + (uint32_t)(gwt_xorshift(&rng) % (n - i));
        uint32_t t = p[i];
        p[i] = p[j];
        p[j] = t;
        out[i] = p[i];
    }
    free(p);
}

static void check_target(const char *what)
{
    it_cmd_t c = {.type = IT_CMD_HASH, .region = 0, .off = 0, .len = REGION};
    it_reply_t r = it_target_cmd(&T, &c, ctx);
    if ((uint64_t)r.a != it_hash(img, REGION))
        fprintf(stderr, "%s: the target's region differs from the expected image\n", what);
    CHECK((uint64_t)r.a == it_hash(img, REGION));
}

/* Puts lidx[i] -> ridx[i] of L and R, with a counted notification, and
 * updates the image through laddr(): where local entry j lies here. */
static void put_sel(gw_dlist_t *L, gw_dlist_t *R, const uint32_t *li, const uint32_t *ri, uint32_t k,
                    const uint8_t *(*laddr)(uint32_t), const char *what)
{
    gw_xfer_opts_t o = {.size = sizeof(o), .notify = GW_NOTIFY_COUNTED, .value = 33};
    gw_request_t *r = NULL;
    IT_OK(ctx, gw_xfer_batch(ep, GW_XFER_PUT, L, li, R, ri, k, &o, &r));
    gw_request_info_t inf = {.size = sizeof(inf)};
    CHECK_ST(gw_request_wait(r, 120000), GW_OK);
    gw_request_info(r, &inf);
    CHECK(inf.length == (size_t)k * ESZ);
    gw_request_free(r);
    for (uint32_t i = 0; i < k; i++)
        memcpy(img + (size_t)ri[i] * ESZ, laddr(li[i]), ESZ);
    it_cmd_t c = {.type = IT_CMD_NCOUNT, .ep = 0, .tag = 33, .count = 1, .off = 60000};
    CHECK_ST((gw_status_t)it_target_cmd(&T, &c, ctx).a, GW_OK);
    check_target(what);
}

static const uint8_t *src_at(uint32_t j)
{
    return src + (size_t)j * ESZ;
}

/* the column table's local entry j: region j % NLREG, slot perm[j] of it */
static uint32_t *perm;
static const uint8_t *col_at(uint32_t j)
{
    return lreg[j % NLREG] + (size_t)perm[j] * ESZ;
}

/* the per-region table's local entry j: block j % (NENT / NLREG) of region j / (NENT / NLREG) */
static const uint8_t *blk_at(uint32_t j)
{
    return lreg[j / (NENT / NLREG)] + (size_t)(j % (NENT / NLREG)) * ESZ;
}

/* A. computed tables (no columns): 1M entries a side, random subsets moved */
static void case_computed(uint32_t *li, uint32_t *ri)
{
    fprintf(stderr, "A. computed tables of %u entries, puts and a get of %u random entries\n", NENT, NSEL);
    gw_dlist_table_t t = {.size = sizeof(t), .n = NENT, .len_all = ESZ};
    gw_dlist_t *L, *R, *D;
    IT_OK(ctx, gw_dlist_local_table(ctx, &msrc, 1, &t, &L));
    IT_OK(ctx, gw_dlist_remote_table(ep, &rk, 1, &t, GW_ACCESS_REMOTE_WRITE | GW_ACCESS_REMOTE_READ, &R));
    IT_OK(ctx, gw_dlist_local_table(ctx, &mdst, 1, &t, &D));
    CHECK(gw_dlist_count(L) == NENT && gw_dlist_count(R) == NENT);
    for (int round = 0; round < 2; round++) {
        gwt_fill(src, REGION, 100 + (uint64_t)round);
        pick(li, NSEL, NENT);
        pick(ri, NSEL, NENT);
        put_sel(L, R, li, ri, NSEL, src_at, "computed tables");
    }
    /* a get of another random subset, checked entry by entry */
    memset(dst, 0, REGION);
    pick(li, NSEL / 2, NENT);
    pick(ri, NSEL / 2, NENT);
    gw_request_t *r = NULL;
    IT_OK(ctx, gw_xfer_batch(ep, GW_XFER_GET, D, li, R, ri, NSEL / 2, NULL, &r));
    CHECK_ST(gw_request_wait(r, 120000), GW_OK);
    gw_request_free(r);
    uint32_t bad = 0;
    for (uint32_t i = 0; i < NSEL / 2; i++)
        bad += memcmp(dst + (size_t)li[i] * ESZ, img + (size_t)ri[i] * ESZ, ESZ) != 0;
    CHECK(bad == 0);
    CHECK_ST(gw_dlist_destroy(L), GW_OK);
    CHECK_ST(gw_dlist_destroy(R), GW_OK);
    CHECK_ST(gw_dlist_destroy(D), GW_OK);
}

/* B. column tables: a local table over 4 regions from region and offset
 * columns (a shuffled layout), a remote one from an offset column; and a
 * local table of blocks per region with no columns */
static void case_columns(uint32_t *li, uint32_t *ri)
{
    fprintf(stderr, "B. column tables and blocks per region\n");
    uint32_t *reg = malloc(NENT * sizeof(*reg));
    uint64_t *off = malloc(NENT * sizeof(*off)), *roff = malloc(NENT * sizeof(*roff));
    perm = malloc(NENT * sizeof(*perm));
    CHECK(reg && off && roff && perm);
    /* entry j: region j % 4, slot perm[j] (distinct within the region) */
    uint32_t per = NENT / NLREG;
    uint32_t *slots = malloc(per * sizeof(*slots));
    CHECK(slots != NULL);
    for (int r = 0; r < NLREG; r++) {
        pick(slots, per, per);
        for (uint32_t s = 0; s < per; s++)
            perm[s * NLREG + (uint32_t)r] = slots[s];
    }
    free(slots);
    for (uint32_t j = 0; j < NENT; j++) {
        reg[j] = j % NLREG;
        off[j] = (uint64_t)perm[j] * ESZ;
        roff[j] = (uint64_t)(NENT - 1 - j) * ESZ; /* the remote table reversed */
    }
    for (int r = 0; r < NLREG; r++)
        gwt_fill(lreg[r], REGION / NLREG, 300 + (uint64_t)r);
    gw_dlist_table_t lt = {.size = sizeof(lt), .n = NENT, .region = reg, .offset = off, .len_all = ESZ};
    gw_dlist_table_t rt = {.size = sizeof(rt), .n = NENT, .offset = roff, .len_all = ESZ};
    gw_dlist_t *L, *R;
    IT_OK(ctx, gw_dlist_local_table(ctx, mreg, NLREG, &lt, &L));
    IT_OK(ctx, gw_dlist_remote_table(ep, &rk, 1, &rt, GW_ACCESS_REMOTE_WRITE, &R));
    pick(li, NSEL, NENT);
    pick(ri, NSEL, NENT);
    /* remote entry j is slot NENT-1-j: the image's slot, not j */
    uint32_t *rslot = malloc(NSEL * sizeof(*rslot));
    CHECK(rslot != NULL);
    for (uint32_t i = 0; i < NSEL; i++)
        rslot[i] = NENT - 1 - ri[i];
    gw_xfer_opts_t o = {.size = sizeof(o), .notify = GW_NOTIFY_COUNTED, .value = 33};
    gw_request_t *r = NULL;
    IT_OK(ctx, gw_xfer_batch(ep, GW_XFER_PUT, L, li, R, ri, NSEL, &o, &r));
    CHECK_ST(gw_request_wait(r, 120000), GW_OK);
    gw_request_free(r);
    for (uint32_t i = 0; i < NSEL; i++)
        memcpy(img + (size_t)rslot[i] * ESZ, col_at(li[i]), ESZ);
    it_cmd_t c = {.type = IT_CMD_NCOUNT, .ep = 0, .tag = 33, .count = 1, .off = 60000};
    CHECK_ST((gw_status_t)it_target_cmd(&T, &c, ctx).a, GW_OK);
    check_target("column tables");
    free(rslot);
    CHECK_ST(gw_dlist_destroy(L), GW_OK);

    /* blocks per region: entry j is block j % per of region j / per */
    gw_dlist_table_t bt = {.size = sizeof(bt), .n = NENT, .len_all = ESZ, .per_region = per};
    IT_OK(ctx, gw_dlist_local_table(ctx, mreg, NLREG, &bt, &L));
    gw_dlist_t *R2;
    gw_dlist_table_t t = {.size = sizeof(t), .n = NENT, .len_all = ESZ};
    IT_OK(ctx, gw_dlist_remote_table(ep, &rk, 1, &t, GW_ACCESS_REMOTE_WRITE, &R2));
    pick(li, NSEL, NENT);
    pick(ri, NSEL, NENT);
    put_sel(L, R2, li, ri, NSEL, blk_at, "blocks per region");
    /* a region given to the table is in use until the list goes */
    CHECK_ST(gw_mem_dereg(mreg[NLREG - 1]), GW_ERR_BUSY);
    CHECK_ST(gw_dlist_destroy(L), GW_OK);
    CHECK_ST(gw_dlist_destroy(R), GW_OK);
    CHECK_ST(gw_dlist_destroy(R2), GW_OK);
    free(reg);
    free(off);
    free(roff);
    free(perm);
}

/* C. refusals that name the entry */
static void case_errors(uint32_t *li, uint32_t *ri)
{
    fprintf(stderr, "C. bad indices and bad tables\n");
    gw_dlist_table_t t = {.size = sizeof(t), .n = NENT, .len_all = ESZ};
    gw_dlist_t *L, *R, *X = NULL;
    IT_OK(ctx, gw_dlist_local_table(ctx, &msrc, 1, &t, &L));
    IT_OK(ctx, gw_dlist_remote_table(ep, &rk, 1, &t, GW_ACCESS_REMOTE_WRITE, &R));
    pick(li, 1000, NENT);
    pick(ri, 1000, NENT);
    li[777] = NENT; /* one past the list */
    gw_request_t *r = NULL;
    CHECK_ST(gw_xfer_batch(ep, GW_XFER_PUT, L, li, R, ri, 1000, NULL, &r), GW_ERR_INVALID);
    CHECK(r == NULL);
    CHECK(msg_has("entry 777: local index 1000000 is outside the list (1000000 entries)"));
    li[777] = 5;
    ri[12] = 0xffffffffu;
    CHECK_ST(gw_xfer_batch(ep, GW_XFER_PUT, L, li, R, ri, 1000, NULL, &r), GW_ERR_INVALID);
    CHECK(msg_has("entry 12: remote index 4294967295 is outside the list"));
    /* tables: a region index past the regions, an entry outside its region,
     * a computed table longer than its region */
    uint32_t reg[4] = {0, 0, 1, 0};
    gw_dlist_table_t bt = {.size = sizeof(bt), .n = 4, .region = reg, .len_all = ESZ};
    CHECK_ST(gw_dlist_local_table(ctx, &msrc, 1, &bt, &X), GW_ERR_INVALID);
    CHECK(X == NULL && msg_has("entry 2: region index 1, but 1 regions were given"));
    uint64_t off[3] = {0, REGION - ESZ, REGION - ESZ + 1};
    gw_dlist_table_t ot = {.size = sizeof(ot), .n = 3, .offset = off, .len_all = ESZ};
    CHECK_ST(gw_dlist_remote_table(ep, &rk, 1, &ot, GW_ACCESS_REMOTE_WRITE, &X), GW_ERR_OUT_OF_BOUNDS);
    CHECK(X == NULL && msg_has("entry 2: [offset 15999985, +16) is outside key 0"));
    CHECK_ST(gw_dlist_local_table(ctx, &msrc, 1, &ot, &X), GW_ERR_INVALID);
    CHECK(msg_has("entry 2: [offset 15999985, +16) is outside region 0"));
    gw_dlist_table_t big = {.size = sizeof(big), .n = NENT + 1, .len_all = ESZ};
    CHECK_ST(gw_dlist_local_table(ctx, &msrc, 1, &big, &X), GW_ERR_INVALID);
    CHECK(msg_has("entry 1000000: [offset 16000000, +16) is outside region 0"));
    gw_dlist_table_t four = {.size = sizeof(four), .n = NENT, .len_all = ESZ, .per_region = NENT / 8};
    CHECK_ST(gw_dlist_local_table(ctx, mreg, NLREG, &four, &X), GW_ERR_INVALID);
    CHECK(msg_has("entries of 125000 per region need 8 regions, 4 given"));
    gw_dlist_table_t old = {.size = 8, .n = 1, .len_all = ESZ};
    CHECK_ST(gw_dlist_local_table(ctx, &msrc, 1, &old, &X), GW_ERR_INVALID);
    CHECK(msg_has("table->size 8 is smaller than version 1"));
    CHECK_ST(gw_dlist_remote_table(ep, &rk, 1, &t, 0, &X), GW_ERR_INVALID);
    CHECK_ST(gw_dlist_destroy(L), GW_OK);
    CHECK_ST(gw_dlist_destroy(R), GW_OK);
}

int main(void)
{
    it_target_cfg_t cfg = {
        .n_eps = 1,
        .n_regions = 1,
        .region = {{REGION, GW_ACCESS_REMOTE_WRITE | GW_ACCESS_REMOTE_READ, 0}},
    };
    char addr[128];
    it_target_start(&T, &cfg, addr, sizeof(addr));
    ctx = it_ctx();
    ep = it_connect(ctx, addr);
    rk = it_single_key(&T, ctx, ep, NULL, NULL);
    gw_ep_info_t info = {.size = sizeof(info)};
    IT_OK(ctx, gw_ep_query(ep, &info));
    fprintf(stderr, "connected over %s (%s)\n", info.transport, info.path);
    src = it_alloc(REGION);
    dst = it_alloc(REGION);
    img = it_alloc(REGION);
    memset(img, 0, REGION);
    IT_OK(ctx, gw_mem_reg(ctx, src, REGION, GW_ACCESS_LOCAL, &msrc));
    IT_OK(ctx, gw_mem_reg(ctx, dst, REGION, GW_ACCESS_LOCAL, &mdst));
    for (int r = 0; r < NLREG; r++) {
        lreg[r] = it_alloc(REGION / NLREG);
        IT_OK(ctx, gw_mem_reg(ctx, lreg[r], REGION / NLREG, GW_ACCESS_LOCAL, &mreg[r]));
    }
    uint32_t *li = malloc(NSEL * sizeof(*li)), *ri = malloc(NSEL * sizeof(*ri));
    CHECK(li && ri);

    case_computed(li, ri);
    case_columns(li, ri);
    case_errors(li, ri);

    gw_rkey_destroy(rk);
    CHECK_ST(gw_ep_close(ep, 5000), GW_OK);
    CHECK(it_target_stop(&T, ctx) == 0);
    CHECK_ST(gw_mem_dereg(msrc), GW_OK);
    CHECK_ST(gw_mem_dereg(mdst), GW_OK);
    for (int r = 0; r < NLREG; r++) {
        CHECK_ST(gw_mem_dereg(mreg[r]), GW_OK);
        free(lreg[r]);
    }
    IT_OK(ctx, gw_context_destroy(ctx));
    free(li);
    free(ri);
    free(src);
    free(dst);
    free(img);
    return gwt_done("it_kv");
}
