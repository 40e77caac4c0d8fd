/* SPDX-License-Identifier: Apache-2.0 */
/* harness.h - minimal test helpers: checks that say what failed, skips,
 * child processes with timeouts. */
#ifndef GW_TEST_HARNESS_H
#define GW_TEST_HARNESS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpuwire.h"

#define GW_TEST_SKIP 77

extern int gwt_failures;

#define CHECK(cond)                                                                            \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);           \
            gwt_failures++;                                                                    \
        }                                                                                      \
    } while (0)

/* Asserts a status and prints both sides by name on mismatch. */
#define CHECK_ST(expr, want)                                                                   \
    do {                                                                                       \
        gw_status_t st_ = (expr);                                                              \
        if (st_ != (want)) {                                                                   \
            fprintf(stderr, "%s:%d: %s returned %s, expected %s\n", __FILE__, __LINE__, #expr, \
                    gw_status_name(st_), gw_status_name(want));                                \
            gwt_failures++;                                                                    \
        }                                                                                      \
    } while (0)

/* Fatal variant: stop the test (child or parent). */
#define REQUIRE(cond)                                                                          \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "%s:%d: REQUIRE failed: %s\n", __FILE__, __LINE__, #cond);         \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)
#define REQUIRE_OK(expr)                                                                       \
    do {                                                                                       \
        gw_status_t st_ = (expr);                                                              \
        if (st_ != GW_OK) {                                                                    \
            fprintf(stderr, "%s:%d: %s returned %s\n", __FILE__, __LINE__, #expr,              \
                    gw_status_name(st_));                                                      \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

#define SKIP(...)                                                                              \
    do {                                                                                       \
        fprintf(stderr, "SKIP: ");                                                             \
        fprintf(stderr, __VA_ARGS__);                                                          \
        fprintf(stderr, "\n");                                                                 \
        exit(GW_TEST_SKIP);                                                                    \
    } while (0)

/* Ends a test: prints a summary and returns the exit code. */
int gwt_done(const char *name);

/* Named cases.  A program of several cases lists them in a table and lets
 * gwt_main dispatch:
 *
 *     static void case_killed(void) { ... CHECK(...); }
 *     static const gwt_case_t cases[] = {GWT_CASE(killed), GWT_CASE(notify_order)};
 *     int main(int argc, char **argv) { return GWT_MAIN(argc, argv, cases); }
 *
 *   prog NAME    runs that case in this process (what ctest runs: one test
 *                per case, tests/README.md); exit 0, 1 (a check failed) or 77
 *                (the case called SKIP)
 *   prog --list  prints the names, one a line
 *   prog         runs every case, each in its own child process with a
 *                deadline of GWT_CASE_TIMEOUT seconds (default 120), and
 *                prints one PASS/FAIL/SKIP line per case; exit 1 if any
 *                failed, 77 if every case skipped
 * An unknown name is refused (exit 2) with the list of names. */
typedef struct gwt_case {
    const char *name;
    void (*fn)(void);
} gwt_case_t;
#define GWT_CASE(n) {#n, case_##n}
#define GWT_MAIN(argc, argv, cases) gwt_main((argc), (argv), (cases), sizeof(cases) / sizeof((cases)[0]))
int gwt_main(int argc, char **argv, const gwt_case_t *cases, size_t n);

/* Runs fn(arg) in a child process; returns its pid. */
int gwt_spawn(int (*fn)(void *), void *arg);
/* Waits for pid up to timeout_s, killing it past that; returns its exit code
 * (128+signal when killed). */
int gwt_wait(int pid, int timeout_s);

/* A pipe-based rendezvous between parent and child: pass small blobs. */
typedef struct gwt_chan {
    int rfd, wfd;
} gwt_chan_t;
/* How long the helpers below wait for the peer process to do its part
 * (connect, accept, send a key): on the loaded 2-core VM (load average
 * 20-23) an ofi context and handshake alone took over 10 s there.  A peer
 * that is gone shows sooner (EOF, a reset). */
#define GWT_PEER_WAIT_MS 60000
/* Two channels (a: parent->child, b: child->parent) made before fork. */
int gwt_chan_pair(gwt_chan_t *parent, gwt_chan_t *child);
/* One message (up to PIPE_BUF - 4 bytes it goes in one write: whole or not at all). */
int gwt_chan_send(gwt_chan_t *c, const void *buf, uint32_t len);
/* Returns length received, -1 on EOF/error/timeout. */
int gwt_chan_recv(gwt_chan_t *c, void *buf, uint32_t cap, int timeout_ms);

/* Endpoint helpers for two-process tests: send a region's packed rkey as a
 * tagged message; receive one and unpack it (base address in *base). */
void gwt_send_rkey(gw_ep_t *ep, const gw_mem_t *mem, uint64_t tag);
gw_rkey_t *gwt_recv_rkey(gw_ep_t *ep, uint64_t tag, uint64_t *base);
/* Exits with GW_TEST_SKIP unless /sys/class/infiniband lists an RDMA device
 * (the verbs tests run inside the Soft-RoCE guest: tests/rxe). */
void gwt_require_rdma_device(void);
/* Listens on 127.0.0.1:0, hands the address to the peer over chan, accepts. */
gw_ep_t *gwt_listen_accept(gw_context_t *ctx, gwt_chan_t *chan, gw_listener_t **l);
/* The other side: takes that address from chan, creates *ctx, connects, and
 * requires the endpoint's transport to be `transport` (NULL: any). */
gw_ep_t *gwt_connect_chan(gwt_chan_t *chan, const char *transport, gw_context_t **ctx);
/* Waits up to 30 s for the token `what` on chan, calling gw_progress(ctx)
 * meanwhile when ctx is given (the peer may need this side to progress
 * before it can send it); requires that token. */
void gwt_chan_expect(gwt_chan_t *chan, gw_context_t *ctx, const char *what);
/* An operation's outcome: `posted` (what the posting call returned) when it
 * failed, else *req's once it completes (GW_ERR_TIMEOUT after timeout_ms);
 * frees *req.  gwt_outcome(gw_put(..., &r), &r, 10000). */
gw_status_t gwt_outcome(gw_status_t posted, gw_request_t **req, int timeout_ms);

/* Fills buf with a pattern derived from seed; verify returns the first
 * mismatching offset or -1. */
void gwt_fill(void *buf, size_t len, uint64_t seed);
long long gwt_verify(const void *buf, size_t len, uint64_t seed);
/* xorshift64: steps *state and returns it (the tests' reproducible random
 * numbers; *state must not be 0). */
static inline uint64_t gwt_xorshift(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *state = x;
}

#endif
