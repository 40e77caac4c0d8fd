/* SPDX-License-Identifier: Apache-2.0 */
/* intra_shm - small copies over intra, two processes:
 *  - into gw_mem_alloc memory: plain copies (no CMA); revocation while puts
 *    keep coming (each put either lands or fails with GW_ERR_INVALID_KEY,
 *    never anything else, and once one fails the later ones do too); after
 *    the revocation the old key fails for puts and gets, also when a new
 *    region took the old one's slot, and nothing of the old key's puts
 *    reaches the new region;
 *  - into registered (malloc) memory: small puts posted back to back leave
 *    in batched process_vm_writev calls, many copies per call, and land. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define RLEN (64u << 10)
#define NCMA 64
#define OP 1024
static gwt_chan_t pch, cch;

static int server(void *arg)
{
    (void)arg;
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    gw_listener_t *l;
    gw_ep_t *ep = gwt_listen_accept(ctx, &cch, &l);
    unsigned rw = GW_ACCESS_REMOTE_WRITE | GW_ACCESS_REMOTE_READ;
    void *a = NULL, *b = NULL;
    gw_mem_t *ma, *mb, *mc;
    REQUIRE_OK(gw_mem_alloc(ctx, RLEN, rw, &a, &ma));
    gwt_send_rkey(ep, ma, 1);
    gwt_chan_expect(&cch, ctx, "put");
    CHECK(gwt_verify(a, 4 * OP, 1) == -1); /* four 1 KiB puts */

    gwt_chan_expect(&cch, ctx, "go"); /* the client is putting in a loop */
    usleep(20000);
    REQUIRE_OK(gw_mem_dereg(ma));
    gwt_chan_send(&cch, "revoked", 8);

    REQUIRE_OK(gw_mem_alloc(ctx, RLEN, rw, &b, &mb)); /* takes the freed slot */
    gwt_send_rkey(ep, mb, 2);
    gwt_chan_expect(&cch, ctx, "new");
    CHECK(gwt_verify(b, OP, 2) == -1);
    int zero = 1;
    for (size_t i = OP; i < RLEN; i++)
        zero &= ((uint8_t *)b)[i] == 0;
    CHECK(zero); /* the old key's puts did not land here */

    uint8_t *c = calloc(1, NCMA * OP);
    REQUIRE(c != NULL);
    REQUIRE_OK(gw_mem_reg(ctx, c, NCMA * OP, rw, &mc));
    gwt_send_rkey(ep, mc, 3);
    gwt_chan_expect(&cch, ctx, "cma");
    CHECK(gwt_verify(c, NCMA * OP, 3) == -1);
    gwt_chan_send(&cch, "ok", 3);
    gwt_chan_expect(&cch, ctx, "closed");
    gw_ep_close(ep, 1000);
    gw_listener_destroy(l);
    CHECK_ST(gw_mem_dereg(mb), GW_OK);
    CHECK_ST(gw_mem_dereg(mc), GW_OK);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    free(c);
    return gwt_done("intra_shm server");
}

/* The counters of the endpoint's path line ("N CMA, M shared memory",
 * "B CMA copies batched in K calls"). */
static void counters(gw_ep_t *ep, unsigned long *cma, unsigned long *shm, unsigned long *batched,
                     unsigned long *calls)
{
    gw_ep_info_t info = {.size = sizeof(info)};
    REQUIRE_OK(gw_ep_query(ep, &info));
    const char *p = strstr(info.path, "copies so far: ");
    const char *q = strstr(info.path, "; GPU batches");
    REQUIRE(p != NULL && q != NULL);
    const char *b = q;
    while (b > info.path && b[-1] != ';')
        b--;
    REQUIRE(sscanf(p, "copies so far: %lu CMA, %lu shared memory", cma, shm) == 2);
    REQUIRE(sscanf(b, " %lu CMA copies batched in %lu calls", batched, calls) == 2);
}

static gw_status_t put_wait(gw_ep_t *ep, void *buf, size_t len, uint64_t raddr, gw_rkey_t *rk)
{
    gw_request_t *r = NULL;
    return gwt_outcome(gw_put(ep, buf, len, NULL, raddr, rk, &r), &r, 10000);
}

int main(void)
{
    unsetenv("GPUWIRE_INTRA");
    setenv("GPUWIRE_TRANSPORTS", "intra", 1);
    gwt_chan_pair(&pch, &cch);
    int pid = gwt_spawn(server, NULL);
    gw_context_t *ctx;
    gw_ep_t *ep = gwt_connect_chan(&pch, "intra", &ctx);
    uint8_t *src = malloc(NCMA * OP);
    REQUIRE(src != NULL);
    unsigned long cma0, shm0, bat0, calls0, cma, shm, bat, calls;
    counters(ep, &cma0, &shm0, &bat0, &calls0);

    /* 1. four 1 KiB puts into the allocated region: shared memory, no CMA */
    uint64_t ba;
    gw_rkey_t *ka = gwt_recv_rkey(ep, 1, &ba);
    REQUIRE(ka != NULL);
    gwt_fill(src, 4 * OP, 1);
    for (int i = 0; i < 4; i++)
        CHECK_ST(put_wait(ep, src + i * OP, OP, ba + (uint64_t)i * OP, ka), GW_OK);
    counters(ep, &cma, &shm, &bat, &calls);
    CHECK(cma == cma0);
    CHECK(shm >= shm0 + 4);
    gwt_chan_send(&pch, "put", 4);

    /* 2. puts while the owner revokes: each lands or fails as revoked */
    gwt_chan_send(&pch, "go", 3);
    unsigned long ok = 0, refused = 0, other = 0, after = 0;
    uint64_t t0 = (uint64_t)time(NULL);
    while (!refused && (uint64_t)time(NULL) - t0 < 20) {
        gw_status_t st = put_wait(ep, src, 256, ba + RLEN - 256, ka);
        if (st == GW_OK)
            ok++;
        else if (st == GW_ERR_INVALID_KEY)
            refused++;
        else {
            other++;
            fprintf(stderr, "put during the revocation: %s\n", gw_last_error(ctx));
            break;
        }
    }
    for (int i = 0; i < 100; i++) /* revoked stays revoked */
        after += put_wait(ep, src, 256, ba + RLEN - 256, ka) != GW_ERR_INVALID_KEY;
    fprintf(stderr, "during the revocation: %lu puts landed, then refused; %lu other results, %lu later puts "
            "not refused\n", ok, other, after);
    CHECK(refused == 1);
    CHECK(other == 0);
    CHECK(after == 0);
    gwt_chan_expect(&pch, ctx, "revoked");

    /* 3. a new region in the old one's slot: the old key still fails */
    uint64_t bb;
    gw_rkey_t *kb = gwt_recv_rkey(ep, 2, &bb);
    REQUIRE(kb != NULL);
    CHECK_ST(put_wait(ep, src, OP, ba, ka), GW_ERR_INVALID_KEY);
    gw_request_t *r = NULL;
    REQUIRE_OK(gw_get(ep, src, OP, NULL, ba, ka, &r));
    CHECK_ST(gw_request_wait(r, 10000), GW_ERR_INVALID_KEY);
    gw_request_free(r);
    gwt_fill(src, OP, 2);
    CHECK_ST(put_wait(ep, src, OP, bb, kb), GW_OK);
    gwt_chan_send(&pch, "new", 4);

    /* 4. registered memory: 64 small puts posted back to back go by CMA,
     * all but the first in one process_vm_writev (the queue leaves on the
     * next progress call) */
    uint64_t bc;
    gw_rkey_t *kc = gwt_recv_rkey(ep, 3, &bc);
    REQUIRE(kc != NULL);
    gwt_fill(src, NCMA * OP, 3);
    counters(ep, &cma0, &shm0, &bat0, &calls0);
    gw_request_t *rq[NCMA];
    for (int i = 0; i < NCMA; i++)
        REQUIRE_OK(gw_put(ep, src + i * OP, OP, NULL, bc + (uint64_t)i * OP, kc, &rq[i]));
    for (int i = 0; i < NCMA; i++) {
        CHECK_ST(gw_request_wait(rq[i], 10000), GW_OK);
        gw_request_free(rq[i]);
    }
    counters(ep, &cma, &shm, &bat, &calls);
    fprintf(stderr, "%d puts into registered memory: %lu CMA copies, %lu of them batched in %lu calls\n", NCMA,
            cma - cma0, bat - bat0, calls - calls0);
    CHECK(cma - cma0 == NCMA);
    CHECK(bat - bat0 >= NCMA / 2);
    CHECK(calls - calls0 >= 1);
    CHECK((bat - bat0) >= 16 * (calls - calls0)); /* many iovecs per system call */
    gwt_chan_send(&pch, "cma", 4);
    gwt_chan_expect(&pch, ctx, "ok");

    gw_rkey_destroy(ka);
    gw_rkey_destroy(kb);
    gw_rkey_destroy(kc);
    CHECK_ST(gw_ep_close(ep, 1000), GW_OK);
    gwt_chan_send(&pch, "closed", 7);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    free(src);
    CHECK(gwt_wait(pid, 60) == 0);
    return gwt_done("intra_shm");
}
