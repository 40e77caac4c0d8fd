/* SPDX-License-Identifier: Apache-2.0 */
/* request.c - the public request calls. */
#include <stdio.h>

#include "api/api.h"

/* gw_request_test under the lock of a context shared between threads (out
 * of line: a spinning caller's test is then a few loads, with no frame for
 * the lock's clean-up). */
__attribute__((noinline)) static gw_status_t request_test_mt(const gw_request_t *req)
{
    GW_API_LOCK(GW_CTX_OF_CORE(req->core));
    return req->status;
}

gw_status_t gw_request_test(const gw_request_t *req)
{
    if (!req)
        return GW_ERR_INVALID;
    if (GW_UNLIKELY(GW_CTX_OF_CORE(req->core)->mt))
        return request_test_mt(req);
    return req->status;
}

static int req_done(void *arg)
{
    return ((gw_request_t *)arg)->status != GW_INPROGRESS;
}

gw_status_t gw_request_wait(gw_request_t *req, int timeout_ms)
{
    GW_API_LOCK(req ? GW_CTX_OF_CORE(req->core) : NULL);
    if (!req)
        return GW_ERR_INVALID;
    if (req->status != GW_INPROGRESS)
        return req->status;
    gw_context_t *ctx = gw_container_of(req->core, gw_context_t, core);
    /* First the request's own endpoint alone (tl.h ep_progress), up to
     * GW_WAIT_EP_SPINS times: a completion in its queue, or about to be, is
     * reaped without passes over the whole context.  (An 8-byte put's round
     * trip in the Soft-RoCE guest: its completion is there when the
     * doorbell returns, or comes a few microseconds later, and a full pass,
     * several times longer than an endpoint's poll, would sit between its
     * arrival and its notice.)  At most GW_QUICK_WAITS waits in a row do
     * this: the next one starts with a full pass (gw_progress: it refills
     * the budget), so that the context's fds, timers and other endpoints
     * are never starved by a loop of quick waits, and then polls its
     * endpoint alone as a quick one would (one pass, not the whole loop of
     * them gw_ctx_progress_until makes until the completion comes: under
     * the guest's emulation a full pass costs ~3 endpoint polls).
     *
     * A caller that spins (GPUWIRE_SPIN_US > 0) goes on so for up to
     * GW_WAIT_EP_ROUNDS rounds within one tick of the coarse clock, one
     * full pass between two rounds: a message a few microseconds away (an
     * 8-byte one over libfabric's tcp provider takes ~9) is then noticed
     * by an endpoint poll, not by a pass over the whole context half a
     * pass late, and nothing else waits more than a round for its turn.  A
     * request still in progress has its endpoint (a destroyed endpoint
     * fails its requests). */
    gw_ep_t *ep = req->ep;
    if (timeout_ms != 0 && ep && ep->tl && ep->ops->ep_progress != gw_tl_unsupported_ep_progress) {
        if (ctx->quick_waits) {
            ctx->quick_waits--;
        } else {
            gw_progress(ctx);
            if (req->status != GW_INPROGRESS)
                return req->status;
        }
        ctx->app_passes++; /* (a progress thread stands aside meanwhile) */
        unsigned rounds = ctx->spin_us ? GW_WAIT_EP_ROUNDS : 1;
        uint64_t tick = rounds > 1 ? gw_now_coarse_ns() : 0;
        for (unsigned round = 1;; round++) {
            for (unsigned i = 0; i < GW_WAIT_EP_SPINS; i++) {
                ep->ops->ep_progress(ep->tl);
                if (req->status != GW_INPROGRESS)
                    return req->status;
            }
            if (round >= rounds || gw_now_coarse_ns() != tick)
                break;
            gw_progress_pass(ctx); /* the context's fds, timers and other endpoints */
            if (ctx->mt) /* another thread asked for the lock: it has it for a while */
                gw_ctx_yield(ctx);
            if (req->status != GW_INPROGRESS) /* (an endpoint destroyed meanwhile failed it) */
                return req->status;
        }
    }
    gw_status_t st = gw_ctx_progress_until(ctx, req_done, req, timeout_ms);
    if (st == GW_ERR_TIMEOUT)
        return gw_err(req->core, GW_ERR_TIMEOUT, "gw_request_wait: operation still in progress after %d ms",
                      timeout_ms);
    return req->status;
}

gw_status_t gw_request_info(const gw_request_t *req, gw_request_info_t *info)
{
    GW_API_LOCK(req ? GW_CTX_OF_CORE(req->core) : NULL);
    if (!req || !GW_API_SIZE_OK(info))
        return gw_api_bad_struct(req ? req->core : NULL, "gw_request_info", "info", info ? &info->size : NULL);
    if (info->size == sizeof(gw_request_info_t) && req->status >= 0) { /* (no 300-byte copy per message) */
        info->status = req->status;
        info->length = req->length;
        info->tag = req->rtag;
        info->error_detail[0] = '\0';
        return GW_OK;
    }
    gw_request_info_t o = {.size = info->size, .status = req->status, .length = req->length, .tag = req->rtag};
    if (req->status < 0)
        snprintf(o.error_detail, sizeof(o.error_detail), "%s", req->detail ? req->detail : gw_status_str(req->status));
    memcpy(info, &o, GW_MIN(info->size, sizeof(o)));
    return GW_OK;
}

void gw_request_free(gw_request_t *req)
{
    GW_API_LOCK(req ? GW_CTX_OF_CORE(req->core) : NULL);
    gw_api_withdraw_freed(req);
    gw_req_release(req);
}
