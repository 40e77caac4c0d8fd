/* SPDX-License-Identifier: Apache-2.0 */
/* it_threads.c - contexts are independent (gpuwire.h): several pairs of
 * contexts, each driven by its own thread in one process, connect over and
 * over, exchange data and close, at the same time.  Catches state shared
 * between contexts (static buffers, globals) that a one-context test cannot. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "it.h"

#define PAIRS 3
#define ROUNDS 40

typedef struct pair {
    int id;
    char addr[128];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int ready;
    int failures;
} pair_t;

static void note(pair_t *p, const char *side, int round, const char *what, gw_status_t st,
                 gw_context_t *ctx)
{
    fprintf(stderr, "pair %d %s round %d: %s: %s (%s)\n", p->id, side, round, what, gw_status_name(st),
            ctx ? gw_last_error(ctx) : "");
    __atomic_add_fetch(&p->failures, 1, __ATOMIC_RELAXED);
}

static void *server(void *arg)
{
    pair_t *p = arg;
    gw_context_t *ctx = NULL;
    gw_listener_t *l = NULL;
    if (gw_context_create(NULL, &ctx) != GW_OK || gw_listen(ctx, "127.0.0.1:0", &l) != GW_OK) {
        note(p, "server", -1, "setup", GW_ERR_SYSTEM, ctx);
        return NULL;
    }
    pthread_mutex_lock(&p->mu);
    gw_listener_addr(l, p->addr, sizeof(p->addr));
    p->ready = 1;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    char buf[256];
    for (int r = 0; r < ROUNDS; r++) {
        gw_ep_t *ep = NULL;
        gw_status_t st = gw_accept(l, 20000, &ep);
        if (st != GW_OK) {
            note(p, "server", r, "gw_accept", st, ctx);
            break;
        }
        gw_request_t *q = NULL;
        memset(buf, 0, sizeof(buf));
        st = gw_recv(ep, buf, sizeof(buf), NULL, 5, ~0ull, &q);
        if (st == GW_OK)
            st = it_wait_free(q, 20000);
        char want[64];
        snprintf(want, sizeof(want), "pair %d round %d", p->id, r);
        if (st != GW_OK || strcmp(buf, want) != 0)
            note(p, "server", r, buf, st, ctx);
        if ((st = gw_send(ep, buf, strlen(buf) + 1, NULL, 6, &q)) == GW_OK)
            st = it_wait_free(q, 20000);
        if (st != GW_OK)
            note(p, "server", r, "reply", st, ctx);
        /* wait for the client to close first, then close */
        gw_request_t *eof = NULL;
        if (gw_recv(ep, buf, sizeof(buf), NULL, 99, ~0ull, &eof) == GW_OK) {
            gw_request_wait(eof, 20000);
            gw_request_free(eof);
        }
        gw_ep_close(ep, 1000);
    }
    gw_listener_destroy(l);
    if (gw_context_destroy(ctx) != GW_OK)
        note(p, "server", ROUNDS, "gw_context_destroy", GW_ERR_BUSY, NULL);
    return NULL;
}

static void *client(void *arg)
{
    pair_t *p = arg;
    pthread_mutex_lock(&p->mu);
    while (!p->ready)
        pthread_cond_wait(&p->cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
    gw_context_t *ctx = NULL;
    if (gw_context_create(NULL, &ctx) != GW_OK) {
        note(p, "client", -1, "gw_context_create", GW_ERR_SYSTEM, NULL);
        return NULL;
    }
    char msg[64], back[64];
    for (int r = 0; r < ROUNDS; r++) {
        gw_ep_t *ep = NULL;
        gw_status_t st = gw_connect(ctx, p->addr, &ep);
        if (st != GW_OK) {
            note(p, "client", r, "gw_connect", st, ctx);
            break;
        }
        snprintf(msg, sizeof(msg), "pair %d round %d", p->id, r);
        gw_request_t *s = NULL, *q = NULL;
        memset(back, 0, sizeof(back));
        if ((st = gw_recv(ep, back, sizeof(back), NULL, 6, ~0ull, &q)) == GW_OK &&
            (st = gw_send(ep, msg, strlen(msg) + 1, NULL, 5, &s)) == GW_OK) {
            st = it_wait_free(s, 20000);
            gw_status_t st2 = it_wait_free(q, 20000);
            if (st == GW_OK)
                st = st2;
        }
        if (st != GW_OK || strcmp(back, msg) != 0)
            note(p, "client", r, back, st, ctx);
        gw_ep_close(ep, 1000);
    }
    if (gw_context_destroy(ctx) != GW_OK)
        note(p, "client", ROUNDS, "gw_context_destroy", GW_ERR_BUSY, NULL);
    return NULL;
}

int main(void)
{
    static pair_t pairs[PAIRS];
    pthread_t th[2 * PAIRS];
    double t0 = it_now();
    for (int i = 0; i < PAIRS; i++) {
        pairs[i].id = i;
        pthread_mutex_init(&pairs[i].mu, NULL);
        pthread_cond_init(&pairs[i].cv, NULL);
        REQUIRE(pthread_create(&th[2 * i], NULL, server, &pairs[i]) == 0);
        REQUIRE(pthread_create(&th[2 * i + 1], NULL, client, &pairs[i]) == 0);
    }
    for (int i = 0; i < 2 * PAIRS; i++)
        pthread_join(th[i], NULL);
    int failures = 0;
    for (int i = 0; i < PAIRS; i++)
        failures += pairs[i].failures;
    fprintf(stderr, "%d pairs x %d connections in %.2f s, %d failure(s)\n", PAIRS, ROUNDS, it_now() - t0,
            failures);
    CHECK(failures == 0);
    return gwt_done("it_threads");
}
