/* SPDX-License-Identifier: Apache-2.0 */
/* it.h - helpers of the multi-process integration tests (public API only).
 *
 * The usual shape: the parent is the initiator, a child spawned with
 * gwt_spawn() is the target.  The child (it_target_main) creates its own
 * context, listens on 127.0.0.1:0, sends the address over a gwt_chan,
 * accepts the endpoints, registers its regions (each filled with a known
 * pattern), sends their packed rkeys, then serves commands from the parent
 * over the chan (verify a range, fill, deregister, wait notifications,
 * receive messages...) while progressing its context.  The parent connects,
 * unpacks the keys and drives.
 * Environment: GPUWIRE_TRANSPORTS picks the transport (ctest: tcp, intra;
 * the Soft-RoCE guest: verbs, tests/verbs/guest_suite.sh); IT_TARGET_IB_DEVICE
 * gives the target its own RDMA device (the parent's is GPUWIRE_IB_DEVICE);
 * IT_ALLOC=1 takes the target's regions from gw_mem_alloc. */
#ifndef GW_IT_H
#define GW_IT_H

#include <stddef.h>
#include <stdint.h>

#include "gpuwire.h"
#include "harness.h"

#define IT_MAX_REGIONS 4
#define IT_MAX_EPS 8
#define IT_KEY_MAX 1024

/* Fails the test (exit 1) with the context's detail when expr is not GW_OK. */
#define IT_OK(ctx, expr)                                                                       \
    do {                                                                                       \
        gw_status_t st__ = (expr);                                                             \
        if (st__ != GW_OK) {                                                                   \
            fprintf(stderr, "%s:%d: %s returned %s: %s\n", __FILE__, __LINE__, #expr,          \
                    gw_status_name(st__), gw_last_error(ctx));                                 \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

typedef struct it_region_spec {
    size_t len;
    unsigned access;
    uint64_t seed; /* initial pattern; 0: zeroed */
} it_region_spec_t;

typedef struct it_target_cfg {
    int n_eps;
    int n_regions;
    it_region_spec_t region[IT_MAX_REGIONS];
    const char *env[8]; /* "NAME=value" set in the child before its context (IT_TARGET_SPIN=1:
                         * it progresses without sleeping between commands) */
    int recv_window;    /* receives kept posted for CMD_RECV_* (0: none) */
} it_target_cfg_t;

typedef enum it_cmd_type {
    IT_CMD_QUIT = 1,
    IT_CMD_VERIFY,      /* region, off, len, seed -> first bad offset or -1 */
    IT_CMD_FILL,        /* region, off, len, seed */
    IT_CMD_DEREG,       /* region -> a = status, b = it_hash of the region right after (not IT_ALLOC) */
    IT_CMD_NOTIFY,      /* ep, count, region/off/len/seed-base: wait count notifications;
                           at each, check the put it follows is visible -> bad count */
    IT_CMD_RECV,        /* ep, len, tag, mask -> status, length, tag, verify(seed) */
    IT_CMD_SEND,        /* ep, len, tag, seed -> status */
    IT_CMD_SLEEP_MS,    /* off = ms, without progressing */
    IT_CMD_EP_STATUS,   /* ep -> error of the endpoint */
    IT_CMD_CLOSE_EP,    /* ep -> status */
    IT_CMD_HASH,        /* region, off, len -> a = FNV-1a 64 of the bytes (it_hash) */
    IT_CMD_NCOUNT,      /* ep, tag = id, count, off = timeout ms -> a = gw_notify_count_wait's status */
    IT_CMD_NOTIFY_ANY,  /* ep, off = timeout ms -> a = status, b = value of the next ordered notification */
    IT_CMD_FAULT        /* region = rule -> a = injections it fired, b = calls it saw, c = rules armed
                           (GPUWIRE_FAULT in the target, core/fault.h) */
} it_cmd_type_t;

typedef struct it_cmd {
    uint32_t type;
    uint32_t ep;
    uint32_t region;
    uint64_t off, len, seed, tag, mask, count;
} it_cmd_t;

typedef struct it_reply {
    int64_t a, b, c, d;
} it_reply_t;

typedef struct it_target {
    it_target_cfg_t cfg;
    gwt_chan_t to_child, to_parent; /* parent's ends: to_child.wfd / to_parent.rfd */
    gwt_chan_t child_end;
    int pid;
} it_target_t;

/* Starts the target child and returns once it listens. addr gets its address. */
void it_target_start(it_target_t *t, const it_target_cfg_t *cfg, char *addr, size_t addrlen);
/* After connecting cfg->n_eps endpoints: receives the packed keys. */
int it_target_keys(it_target_t *t, uint8_t keys[][IT_KEY_MAX], size_t *lens);
it_reply_t it_target_cmd(it_target_t *t, const it_cmd_t *cmd, gw_context_t *progress_ctx);
/* QUIT and wait for the child; returns its exit code. */
int it_target_stop(it_target_t *t, gw_context_t *progress_ctx);
/* After it_target_keys' point: receives every region's key, unpacks it on
 * ep into rk[i] with its remote range (raddr[i], rlen[i]; either may be NULL). */
void it_target_rkeys(it_target_t *t, gw_context_t *ctx, gw_ep_t *ep, gw_rkey_t **rk, uint64_t *raddr,
                     size_t *rlen);
/* For a one-region target: receives its key, unpacks it on ep and returns it
 * with the remote range. */
gw_rkey_t *it_single_key(it_target_t *t, gw_context_t *ctx, gw_ep_t *ep, uint64_t *raddr, size_t *rlen);

gw_context_t *it_ctx(void);
void *it_alloc(size_t len);
/* Waits up to timeout_ms, frees the request, returns its status. */
gw_status_t it_wait_free(gw_request_t *r, int timeout_ms);
/* Connects and unpacks one key per region on the endpoint. */
gw_ep_t *it_connect(gw_context_t *ctx, const char *addr);
double it_now(void);
/* IT_TIME_SCALE (default 1; e.g. 10 in the emulated verbs guest,
 * tests/verbs/guest_suite.sh): wall-clock bounds a test asserts are
 * multiplied by it where only the machine's speed sets them.  The check
 * stays; only its bound moves. */
double it_time_scale(void);
/* FNV-1a 64 of len bytes (what IT_CMD_HASH answers). */
uint64_t it_hash(const void *buf, size_t len);

#endif
