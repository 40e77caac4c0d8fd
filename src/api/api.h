/* SPDX-License-Identifier: Apache-2.0 */
/* api.h - the public objects behind gpuwire.h (api layer). */
#ifndef GW_API_API_H
#define GW_API_API_H

#include "core/core.h"
#include "core/request.h"
#include "mem/mem.h"
#include "transport/base/ep_base.h"
#include "transport/base/tl.h"
#include "bootstrap/wire.h"

/* gw_request_wait() calls that may try their endpoint alone (tl.h
 * ep_progress) between two full passes of gw_progress() (the next wait
 * makes that pass first, then tries its endpoint alone too) */
#define GW_QUICK_WAITS 16u
/* ... and how many times such a wait polls its endpoint before a full pass
 * (an endpoint's poll is ~0.1-0.2 us under the guest's emulation) */
#define GW_WAIT_EP_SPINS 64u
/* ... and how many such rounds (a full pass between two) a wait of a
 * caller that spins makes before it leaves the endpoint for
 * gw_ctx_progress_until's full passes (request.c) */
#define GW_WAIT_EP_ROUNDS 16u

struct gw_context {
    gw_core_t core; /* first: transports see only this */
    gw_tl_iface_t *tl[GW_TL_COUNT];  /* NULL when not usable here */
    char tl_why[GW_TL_COUNT][256];   /* why not usable */
    int tl_order[GW_TL_COUNT];       /* allowed transports, preference order */
    int tl_norder;
    gw_list_t eps, listeners, mems;
    uint64_t cancel_watch_ns; /* the cancel watch's last look (api_ext.c) */
    /* endpoints whose control connection closed in this progress pass; they
     * fail at the end of the pass, after the transports have drained what the
     * peer delivered before it closed (api/ep.c gw_api_ep_ctl_reap) */
    gw_list_t ctl_gone;
    size_t n_eps, n_listeners, n_mems;
    uint8_t auth_secret[256];
    size_t auth_secret_len;
    int auth_enabled;
    long connect_timeout_ms;
    long spin_us; /* GPUWIRE_SPIN_US: a waiter polls this long after the last event */
    unsigned quick_waits; /* waits that may still try their endpoint alone first (request.c) */
    int hs_poller; /* handshake-timeout poller registered */
    gw_hmap_t tokens; /* endpoint token -> gw_ep (tcp stream joins) */
    /* tokens of the latest closed endpoints: a stream join that arrives after
     * the application closed its endpoint is turned away quietly */
    uint64_t closed_tokens[64];
    unsigned closed_next;
    int batch_expand; /* GPUWIRE_BATCH_PATH as a gw_proto_route_t: expand or iov, every batch through
                       * proto/proto_batch.c */
    /* per transport: 1 where a put's or get's local GPU buffer is staged by
     * the protocol layer (proto/proto_stage.c: the transport moves no GPU
     * memory itself, or GPUWIRE_GPU_STAGE=proto), set at iface open */
    uint8_t gpu_staged[GW_TL_COUNT];
    int gpu_stage_force; /* GPUWIRE_GPU_STAGE=proto */
    struct gw_proto_stage *pstage; /* its state, made on the first staged operation */
    /* the registration cache (api/mem.c): live registrations sorted by
     * address, searched by gw_mem_reg for one a new range lies in */
    int reg_cache;    /* GPUWIRE_REG_CACHE=on */
    gw_mem_t **regs;
    size_t nregs, capregs;
    int integrity;    /* GPUWIRE_INTEGRITY / gw_config_t.integrity: this side asks for the CRC32C check */
    gw_list_t integ_eps; /* endpoints that check (proto/proto_integrity.c): a poller of the context polls them */
    /* the context extension (the names layer, src/names/): its hooks and
     * state; NULL until it attaches (gw_ctx_ext_attach) */
    const struct gw_ctx_ext_ops *ext_ops;
    void *ext;
    _Atomic(void *) batch_spare; /* api/batch.c: the entry array of the last finished batch, for the next */
    struct gw_ctx_mt *mt; /* the progress thread and the context lock (api/progress.c); NULL when off */
    unsigned long app_passes; /* progress passes made (the progress thread stands aside while it moves) */
    void (*deferred)(void *, uint32_t); /* gw_ctx_defer: for an application thread's next pass */
    void *deferred_arg;
};

/* ---- the progress thread and the context lock (api/progress.c) ----
 * With a progress thread (gw_config_t.progress_thread,
 * GPUWIRE_PROGRESS_THREAD) every public call takes the context's lock:
 * GW_API_LOCK(ctx) as the first statement of its body (ctx may be NULL; the
 * lock is let go when the body's scope ends).  The lock is recursive (a
 * call made from a callback inside progress).  Without the thread ctx->mt
 * is NULL and a call pays one test. */
struct gw_ctx_mt;
void gw_ctx_lock(gw_context_t *ctx);
void gw_ctx_unlock(gw_context_t *ctx);
/* Lets go of every level the calling thread holds (a waiting call about to
 * sleep); returns them for gw_ctx_relock. */
unsigned gw_ctx_unlock_all(gw_context_t *ctx);
void gw_ctx_relock(gw_context_t *ctx, unsigned depth);
/* Between two passes of a waiting call: lets another thread that asked for
 * the lock have it once. */
void gw_ctx_yield(gw_context_t *ctx);
/* Sleeps up to timeout_ms on the context fd (and, with the thread, on what
 * it signals), without the lock: GW_OK when woken, GW_ERR_TIMEOUT. */
gw_status_t gw_ctx_sleep(gw_context_t *ctx, int timeout_ms);
/* Starts the thread (at gw_context_create) / stops and joins it. */
gw_status_t gw_ctx_mt_start(gw_context_t *ctx, char *err, size_t errlen);
void gw_ctx_mt_stop(gw_context_t *ctx);
/* The fd gw_context_fd() hands out with the thread; its readiness cleared. */
int gw_ctx_mt_user_fd(gw_context_t *ctx);
void gw_ctx_mt_clear(gw_context_t *ctx);
/* Is the caller the context's progress thread? */
int gw_ctx_on_progress_thread(const gw_context_t *ctx);
/* From the progress thread: have fn(arg, 0) called by the next progress
 * pass of an application thread (callbacks into the application), and make
 * the context fd readable.  One pending call at a time. */
void gw_ctx_defer(gw_context_t *ctx, void (*fn)(void *, uint32_t), void *arg);
/* The calling thread's copy of the context's last error (gw_last_error). */
const char *gw_ctx_mt_last_error(const gw_context_t *ctx);

static inline gw_context_t *gw_api_enter(gw_context_t *ctx)
{
    if (ctx && ctx->mt)
        gw_ctx_lock(ctx);
    return ctx;
}
static inline void gw_api_leave(gw_context_t **ctx)
{
    if (*ctx && (*ctx)->mt)
        gw_ctx_unlock(*ctx);
}
#define GW_API_LOCK(ctx) \
    gw_context_t *gw_api_locked_ __attribute__((cleanup(gw_api_leave), unused)) = gw_api_enter(ctx)
/* The context of an object argument that may be NULL. */
#define GW_CTX_OF_EP(ep) ((ep) ? (ep)->ctx : NULL)
#define GW_CTX_OF_CORE(c) ((c) ? gw_container_of((c), gw_context_t, core) : NULL)

/* ops.c's posting steps, shared with api/batch.c: the endpoint is ready;
 * a request for op; queue it (tracked) and hand it to the transport's fn
 * (on an error nothing is left behind). */
gw_status_t gw_api_ep_usable(struct gw_ep *ep, int op);
gw_request_t *gw_api_new_req(struct gw_ep *ep, int op, gw_request_t **user);
gw_status_t gw_api_submit(struct gw_ep *ep, gw_request_t *r, gw_request_t **user,
                          gw_status_t (*fn)(gw_tl_ep_t *, gw_request_t *));
/* gw_mem_reg of memory behind shm_fd (gw_mem_alloc's memfd; -1: none): the
 * region owns it from then on, gw_mem_dereg unmaps and closes it. */
gw_status_t gw_mem_reg_shm(gw_context_t *ctx, void *addr, size_t len, unsigned access, int shm_fd,
                           gw_mem_t **out);

/* Progress until done(arg) or timeout_ms (-1: none); GW_ERR_TIMEOUT. */
/* api_ext.c: gw_request_free() withdraws a receive no message matched.
 * Inline: a complete request (every freed put's, say) has nothing to
 * withdraw and costs no call. */
void gw_api_withdraw_freed_slow(gw_request_t *req);
static inline void gw_api_withdraw_freed(gw_request_t *req)
{
    if (req && req->status == GW_INPROGRESS)
        gw_api_withdraw_freed_slow(req);
}
/* api_ext.c: fails the endpoint of a canceled request still on the wire
 * GPUWIRE_OP_TIMEOUT_MS after its cancel (run by a progress pass while
 * core.n_canceling says one is watched). */
void gw_api_cancel_watch(gw_context_t *ctx);
/* ep.c: fail the endpoints whose control connection closed, after polling the
 * transports until they have nothing more to complete (bounded). */
void gw_api_ep_ctl_reap(gw_context_t *ctx);
/* ep.c: ep checks integrity from now on (after gw_proto_integ_attach): the
 * context polls it every pass. */
gw_status_t gw_api_ep_integ_on(gw_ep_t *ep);
/* The transport's line for gw_ep_query's path, and whether ep checks. */
void gw_api_ep_describe(const gw_ep_t *ep, char *path, size_t cap);
/* One progress pass (gw_progress without the lock: the caller holds it). */
int gw_progress_pass(gw_context_t *ctx);
gw_status_t gw_ctx_progress_until(gw_context_t *ctx, int (*done)(void *), void *arg, int timeout_ms);

typedef enum gw_ep_state {
    GW_EP_HANDSHAKE = 0,
    GW_EP_READY,
    GW_EP_FAILED,
    GW_EP_CLOSING
} gw_ep_state_t;

struct gw_ctx_ext_ops;

struct gw_hs; /* handshake in progress (api/handshake.c) */

struct gw_ep {
    gw_ep_base_t base; /* first: transports see only this */
    gw_context_t *ctx;
    gw_list_t link;    /* context's list, or listener's accept queue */
    gw_ep_state_t state;
    int tl_id;
    gw_tl_ep_t *tl;
    const gw_tl_ops_t *ops;
    uint64_t peer_uuid;
    uint64_t token;    /* server-assigned, names it in extra connections */
    size_t n_rkeys;
    char path[256];
    char downgrades[512];
    struct gw_hs *hs;
    struct gw_listener *listener; /* accepted from, while queued */
    unsigned joins_left;          /* while on the listener's joining list: further connections still to come */
    uint64_t joins_deadline_ns;   /* after which it is handed out with the connections it has */
    int ctl_fd;        /* handshake socket kept for liveness when the transport did not adopt it */
    gw_io_t ctl_io;
    gw_list_t gone_link; /* on ctx->ctl_gone while its failure waits for the drain */
    /* the context extension's state of this endpoint (names: the peer
     * agent's table, name and epoch); freed by its `gone` hook */
    void *ext;
    /* set by the extension (gw_ep_void_keys): the peer behind this endpoint
     * is gone for good (an agent that restarted), so its keys are void:
     * remote operations fail with GW_ERR_INVALID_KEY, explained by the
     * extension.  Such an endpoint has failed, so this is read only on the
     * refusal path, never for a usable endpoint. */
    int keys_void;
    /* this side asked for the integrity check and the peer's version has
     * none: notifying puts are refused (GW_ERR_UNSUPPORTED) rather than sent
     * unchecked */
    int integ_refused;
    gw_list_t integ_link; /* on ctx->integ_eps while it checks */
};

struct gw_listener {
    gw_context_t *ctx;
    gw_list_t link;
    gw_io_t io;
    int fd;
    char addr[80];
    gw_list_t ready;    /* endpoints whose handshake completed, not yet accepted */
    gw_list_t joining;  /* endpoints whose further connections (tcp streams) are still to join */
    gw_list_t pending;  /* handshakes in progress */
    unsigned long failed_handshakes;
    unsigned long accepted;       /* for gw_listener_query */
    gw_status_t last_failure;
    char last_failure_detail[384];
};

/* ---- the context extension (one hook set; the names layer fills it) ----
 * The api knows nothing of names.  A layer above it attaches to a context
 * once and is then told of object teardown through one observer hook,
 * carries its payload in the handshake through an extension slot (a typed,
 * versioned TLV of bootstrap/wire.h), and explains refusals it caused. */
typedef enum gw_obj_event {
    GW_OBJ_EP_GONE = 1,       /* obj: gw_ep_t, about to be freed */
    GW_OBJ_MEM_GONE = 2,      /* obj: gw_mem_t, about to be deregistered */
    GW_OBJ_LISTENER_GONE = 3  /* obj: gw_listener_t, about to be closed */
} gw_obj_event_t;

/* What the handshake hands an extension: both nonces and context ids, so
 * that an HMAC over its payload binds it to this exchange. */
typedef struct gw_hs_bind {
    const uint8_t *nonce_c, *nonce_s;
    uint64_t uuid_c, uuid_s;
} gw_hs_bind_t;

typedef struct gw_ctx_ext_ops {
    const char *name;
    uint16_t hs_type, hs_version; /* its handshake extension (GW_HS_EXT_*) */
    /* Server: adds its extension to READY (payload in buf, cap bytes; with
     * authentication, its HMAC).  req: the argument of an extension-only
     * HELLO, -1 in a full handshake. */
    void (*hs_fill)(void *ext, gw_hs_msg_t *m, uint8_t *buf, size_t cap, long req, const gw_hs_bind_t *b);
    /* Client: takes its extension from READY (ep's state).  GW_OK, or a
     * status with why that fails the endpoint. */
    gw_status_t (*hs_take)(void *ext, gw_ep_t *ep, const gw_hs_msg_t *m, const gw_hs_bind_t *b, char *why,
                           size_t whylen);
    /* The observer: an object is going. */
    void (*gone)(void *ext, gw_obj_event_t ev, void *obj);
    /* Why rkey cannot be used on ep (a key of another endpoint, or an
     * endpoint whose keys are void): a sentence into buf, or 0 (nothing to
     * add). */
    int (*explain_key)(void *ext, const gw_ep_t *ep, const gw_rkey_t *rkey, char *buf, size_t cap);
    /* Context destroy: releases everything; GW_ERR_BUSY (nothing done) to
     * keep the context alive (keys the extension handed out still live). */
    gw_status_t (*fini)(void *ext);
} gw_ctx_ext_ops_t;

/* Attaches the extension (once per context). */
void gw_ctx_ext_attach(gw_context_t *ctx, const gw_ctx_ext_ops_t *ops, void *ext);
/* Tells the extension, if any, that obj is going. */
static inline void gw_ctx_notify(gw_context_t *ctx, gw_obj_event_t ev, void *obj)
{
    if (ctx->ext_ops && ctx->ext_ops->gone)
        ctx->ext_ops->gone(ctx->ext, ev, obj);
}
/* Declares ep's keys void (see gw_ep.keys_void) and fails it with why
 * when it has not failed yet. */
void gw_ep_void_keys(gw_ep_t *ep, const char *why);
/* At gw_context_create, after the transports: the extension layer reads
 * its settings (defined by that layer, src/names/names.c: GPUWIRE_PEERS
 * and GPUWIRE_DIRECTORY, so that a value that does not parse fails the
 * create with GW_ERR_CONFIG). */
gw_status_t gw_ctx_ext_setup(gw_context_t *ctx);

/* A refused argument of a public call: GW_ERR_INVALID, with "fn: " and the
 * rest (which names the argument) as the context's last error.  core NULL
 * (the call was given no object that leads to a context): the status only. */
gw_status_t gw_api_invalid(gw_core_t *core, const char *fn, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* An extensible struct argument (its first field: size) is usable. */
#define GW_API_SIZE_OK(p) ((p) && (p)->size >= sizeof(size_t))
/* The refusal of such an argument `arg`: NULL (sizep NULL) or a size
 * field too small. */
gw_status_t gw_api_bad_struct(gw_core_t *core, const char *fn, const char *arg, const size_t *sizep);

#endif
