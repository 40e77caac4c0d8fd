/* SPDX-License-Identifier: Apache-2.0 */
/* fault.h - faults injected below the library (core layer).
 *
 * GPUWIRE_FAULT holds rules, separated by ';' or white space, each
 *     POINT:ACTION[=ARG][@N][*K]
 * POINT names one call gpuwire makes into the system or a loaded library:
 * sock.send and sock.recv (the tcp transport's data sockets, core/sock.c),
 * cuda.<driver function> (cuda/cuda_wrap.c), ibv.<verb> (the verbs loader),
 * integ.source (the integrity check's source entries).
 * A POINT ending in '*' matches every point it is a prefix of.  The rule
 * counts the calls made at its point; it fires on the Nth (default 1) and on
 * the K-1 calls after it (default K 1; "*all": every call from the Nth on).
 * ACTION says what the call does instead (docs/FAULTS.md lists which point
 * takes which):
 *   fail[=E]      the call fails: E an errno (sock, ibv), a CUresult (cuda)
 *   short[=B]     sock: at most B bytes (default 1) move
 *   eagain        sock: EAGAIN, no byte moves
 *   reset[=B]     sock: B bytes (default half the call's) move, then the
 *                 connection is aborted with a TCP reset; the call fails
 *                 with ECONNRESET
 *   status=S      ibv.poll_cq: the completion gets status S
 *   drop          ibv.poll_cq: the completion is never delivered
 *   qp_err        ibv.post_send: the queue pair is moved to the error state
 *                 before the post
 *   flip[=B]      integ.source (the integrity check, proto/proto_integrity.c):
 *                 after the CRC32C of an entry in host memory is taken at the
 *                 source, bit 0 of its byte B (default 0) is flipped, as an
 *                 application writing into a buffer in flight would
 * The spec is parsed at every gw_context_create() (a spec that does not
 * parse refuses the context with GW_ERR_CONFIG); a spec that differs from
 * the armed one replaces it and zeroes the counters.  Each rule counts the
 * calls it saw and the injections that fired (gw_fault_report), so that a
 * test can fail when its injection never fired. */
#ifndef GW_CORE_FAULT_H
#define GW_CORE_FAULT_H

#include <stddef.h>
#include <stdint.h>

#include "gpuwire.h"

typedef enum gw_fault_act {
    GW_FAULT_NONE = 0,
    GW_FAULT_FAIL,
    GW_FAULT_SHORT,
    GW_FAULT_EAGAIN,
    GW_FAULT_RESET,
    GW_FAULT_STATUS,
    GW_FAULT_DROP,
    GW_FAULT_QP_ERR,
    GW_FAULT_FLIP
} gw_fault_act_t;

typedef struct gw_fault {
    gw_fault_act_t act;
    long arg;     /* the rule's ARG; has_arg 0: the action's default */
    int has_arg;
    int rule;     /* index of the rule that fired */
} gw_fault_t;

#define GW_FAULT_MAX_RULES 16

/* Nonzero while any rule is armed: the one load on the path of a call when
 * no fault is armed. */
extern volatile int gw_fault_on;

/* Parses spec (NULL or "": disarm) and arms it unless it is the spec armed
 * now.  GW_ERR_CONFIG with the rule and the reason in err when a rule does
 * not parse (then the armed rules stay). */
gw_status_t gw_fault_configure(const char *spec, char *err, size_t errlen);

/* Counts one call at point; returns 1 and fills *f when a rule fires on it. */
int gw_fault_check(const char *point, gw_fault_t *f);
static inline int gw_fault_at(const char *point, gw_fault_t *f)
{
    return __builtin_expect(gw_fault_on != 0, 0) ? gw_fault_check(point, f) : 0;
}
/* Whether any armed rule's point matches point (or, when point ends in
 * '*', starts with it): loaders install their hooks only then. */
int gw_fault_wants(const char *point);

/* The armed rules. */
int gw_fault_rules(void);
/* Injections rule i made so far, and calls it saw at its point. */
uint64_t gw_fault_fired(int rule);
uint64_t gw_fault_calls(int rule);
/* The text of rule i as written. */
const char *gw_fault_rule_text(int rule);
/* "sock.send:reset@3 fired 1 of 57 calls; ..." for every rule; returns the
 * number of rules that never fired. */
int gw_fault_report(char *buf, size_t len);

/* Named values of ARGs (also used by the loaders' messages). */
int gw_fault_errno_value(const char *name, long *out);

#endif
