/* SPDX-License-Identifier: Apache-2.0 */
/* intra_ep.c - intra endpoints: lifecycle (prepare, connect, close,
 * destroy), failure, issuing operations and their completions, tagged
 * messages.
 * Private objects: intra_int.h. */
#include "transport/intra/intra_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

/* Ends the endpoint's work.  Requests on base->outstanding (put, get,
 * put_notify, send) belong to gw_ep_fail(); when the api layer failed the
 * endpoint itself (external), they may already be recycled, so the
 * transport's lists are dropped without touching them.  Receives being
 * pulled are the transport's alone: they are completed here.  Copies in
 * flight are waited for first, so no engine writes into a buffer whose
 * operation has completed. */
static void ep_abort(intra_ep_t *e, gw_status_t st, int external)
{
    const gw_cuda_t *cu = e->ifc->cu;
    gw_status_t err = external ? e->super.base->error : st;
    e->failed = 1;
    for (size_t i = 0; i < e->ncp; i++) {
        intra_cp_t *cp = &e->cps[i];
        if (cp->ev) {
            cu->cuEventSynchronize(cp->ev);
            cu->cuEventDestroy(cp->ev);
        }
        if (cp->slot)
            atomic_fetch_sub(&cp->slot->inflight, 1);
        if (cp->op == GW_OP_RECV)
            gw_ep_recv_done(e->super.base, cp->req, 0, cp->req->rtag, err);
    }
    e->ncp = 0;
    intra_ring_abort(e);
    e->ncmaq = 0; /* outstanding in the base: gw_ep_fail completes them */
    gw_list_t *p, *t;
    gw_list_for_each_safe(p, t, &e->waiting_recv) {
        gw_list_del(p);
        gw_request_t *req = gw_container_of(p, gw_request_t, tl_link);
        gw_ep_recv_done(e->super.base, req, 0, req->rtag, err);
    }
    gw_list_init(&e->waiting);
    gw_list_init(&e->sends);
}

/* The endpoint's teardown (base on_fail), run by the first gw_ep_fail(). */
static void intra_on_fail(void *arg, gw_status_t st)
{
    intra_ep_t *e = arg;
    if (!e->failed)
        ep_abort(e, st, 0);
}

/* Connected: the base runs our teardown whoever fails the endpoint. */
static void intra_hook(intra_ep_t *e)
{
    e->super.base->on_fail = intra_on_fail;
    e->super.base->on_fail_arg = e;
    e->super.base->notify_out = intra_notify_out;
    e->super.base->notify_arg = e;
}

void intra_ep_fail(intra_ep_t *e, gw_status_t st, const char *fmt, const char *detail)
{
    if (e->failed)
        return;
    if (!gw_ep_failed(e->super.base))
        gw_ep_fail(e->super.base, st, fmt, detail); /* runs intra_on_fail once connected */
    if (!e->failed) /* no hook yet (not connected), or the base had failed before */
        ep_abort(e, st, 1);
}

/* The api layer may fail the endpoint on its own (peer timeout, control
 * socket closed): the on_fail hook has torn it down then, except before
 * connect (no hook yet): notice before touching any list.  e->failed says
 * the teardown ran; whether the endpoint failed is the base's to say. */
int intra_ep_dead(intra_ep_t *e)
{
    if (!e->failed && e->super.base->error != GW_OK)
        ep_abort(e, e->super.base->error, 1);
    return e->failed;
}

/* The base's sender of a deferred notification (ep_base.h): every put_notify
 * and notifying batch is deferred here (intra_submit), because copies on
 * several engines (CMA, memcpy, CUDA streams) land out of posting order.
 * b = 1: a counted notification of id a (a batch's). */
gw_status_t intra_notify_out(void *arg, gw_request_t *req)
{
    intra_ep_t *e = arg;
    gw_intra_hdr_t h = {.type = GW_INTRA_M_NOTIFY, .a = req->value,
                        .b = (uint64_t)gw_req_notify_counted(req)};
    return intra_out_msg(e, &h, NULL);
}

/* A put/get/put_notify's bytes are where they belong (or failed); a
 * put_notify's request is then held by the base until its notification goes
 * out (after every older operation but sends: gw_ep_notify_defer). */
void intra_rma_done(intra_ep_t *e, gw_request_t *req, gw_status_t st)
{
    intra_slot_leave(e, req);
    req->length = st == GW_OK ? req->len : req->op == GW_OP_BATCH ? intrab_length(req) : 0;
    if (GW_IS_ENDPOINT_ERROR(st) && !e->failed) { /* e.g. the peer process vanished under a copy */
        intra_ep_fail(e, st, "intra: %s", e->super.iface->core->errbuf);
        return;
    }
    gw_ep_op_done(e->super.base, req, st);
}

/* A receive's pull finished: tell the sender, complete the receive. */
static void pull_done(intra_ep_t *e, gw_request_t *req, gw_status_t st)
{
    intra_slot_leave(e, req);
    if (GW_IS_ENDPOINT_ERROR(st) && !e->failed) {
        char why[384];
        snprintf(why, sizeof(why), "%.380s", e->super.iface->core->errbuf);
        gw_ep_recv_done(e->super.base, req, 0, req->rtag, st);
        intra_ep_fail(e, st, "intra: %s", why);
        return;
    }
    intra_ep_send_fin(e, intra_rq(req)->opid, st);
    gw_ep_recv_done(e->super.base, req, (size_t)intra_rq(req)->src2, req->rtag, st);
}

static void op_finished(intra_ep_t *e, gw_request_t *req, gw_status_t st)
{
    if (req->op == GW_OP_BATCH && !intrab_part_done(req, &st))
        return; /* another part of the batch is still moving */
    if (req->op == GW_OP_RECV)
        pull_done(e, req, st);
    else
        intra_rma_done(e, req, st);
}

int intra_poll_inflight(intra_ep_t *e)
{
    int n = 0;
    size_t i = 0, budget = INTRA_CMA_BUDGET;
    while (i < e->ncp) {
        intra_cp_t *cp = &e->cps[i];
        gw_status_t st = GW_OK;
        if (cp->ring) { /* a batch's entries in ring slots (intra_ring.c) */
            if (!intra_ring_reap(e, cp, &budget, &st)) {
                i++;
                continue;
            }
        } else if (!cp->ev && cp->op == GW_OP_BATCH) { /* a batch's host entries (intra_batch.c) */
            if (!budget) {
                i++;
                continue;
            }
            int fin = 0;
            budget -= intrab_cma_step(e, cp->req, budget, &st, &fin);
            if (st == GW_OK && !fin) {
                i++;
                continue;
            }
        } else if (!cp->ev) { /* piecewise CMA */
            if (!budget) {
                i++;
                continue;
            }
            size_t k = GW_MIN(budget, cp->len - cp->done);
            if (cp->rptr && cp->to_remote)
                memcpy(cp->rptr + cp->done, cp->lbuf + cp->done, k);
            else if (cp->rptr)
                memcpy(cp->lbuf + cp->done, cp->rptr + cp->done, k);
            else
                st = intra_cma_copy(e->super.iface->core, e->peer_pid, cp->to_remote, cp->lbuf + cp->done,
                              cp->raddr + cp->done, k);
            cp->done += k;
            budget -= k;
            if (st == GW_OK && cp->done < cp->len) {
                i++;
                continue;
            }
        } else {
            CUresult r = e->ifc->cu->cuEventQuery(cp->ev);
            if (r == CUDA_ERROR_NOT_READY) {
                i++;
                continue;
            }
            if (r == CUDA_SUCCESS)
                intra_ev_put(e, cp->ev, cp->evk);
            else
                e->ifc->cu->cuEventDestroy(cp->ev);
            if (r != CUDA_SUCCESS)
                st = intra_cu_err(e->super.iface->core, "GPU copy to/from the peer (cuEventQuery)", r);
        }
        intra_cp_t done = *cp;
        e->cps[i] = e->cps[--e->ncp]; /* completion order does not matter: notifications wait on seq (ep_base.h) */
        if (done.slot)
            atomic_fetch_sub(&done.slot->inflight, 1);
        op_finished(e, done.req, st);
        n++;
        if (e->failed)
            break;
    }
    return n;
}

/* Runs an rma request as far as it goes now. */
static void rma_issue(intra_ep_t *e, gw_request_t *req)
{
    if (intra_shm_fast(e, req) || intra_cma_queue(e, req))
        return;
    rdesc_t r;
    gw_status_t st = intra_slot_enter(e, req, &r);
    if (st != GW_OK) {
        intra_rma_done(e, req, st);
        return;
    }
    intra_rq(req)->slot = (gw_intra_slot_t *)r.s; /* its inflight is ours to drop */
    int again = 0;
    st = intra_copy_start(e, req, req->op != GW_OP_GET, req->buf, &r, req->len, &again);
    if (st == GW_INPROGRESS) {
        if (again) {
            intra_slot_leave(e, req);
            gw_list_push_back(&e->waiting, &req->tl_link);
        }
        return;
    }
    intra_rma_done(e, req, st);
}

/* Pulls a rendezvous message (described in intra_rq(req)->src, .src2) into a recv. */
static void pull_issue(intra_ep_t *e, gw_request_t *req)
{
    gw_core_t *c = e->super.iface->core;
    uint64_t slot1 = intra_rq(req)->src >> 32;
    rdesc_t r = {0};
    size_t msg_len = (size_t)intra_rq(req)->src2;
    size_t n = GW_MIN(msg_len, req->len);
    r.addr = req->raddr; /* the sender's buffer address */
    if (slot1) {
        uint32_t si = (uint32_t)(slot1 - 1);
        gw_intra_slot_t *s = si < GW_INTRA_SLOTS ? &e->peer_table[si] : NULL;
        uint64_t id = s ? atomic_load(&s->id) : 0;
        if (!s || !id) {
            pull_done(e, req, gw_err(c, GW_ERR_PROTOCOL, "intra: rendezvous names peer slot %u, which is empty", si));
            return;
        }
        atomic_fetch_add(&s->inflight, 1);
        intra_rq(req)->slot = s;
        r.gpu = s->kind != GW_INTRA_SLOT_HOST && s->kind != GW_INTRA_SLOT_SHM;
        r.slot = si;
        r.s = s;
        r.id = id;
    }
    int again = 0;
    gw_status_t st = intra_copy_start(e, req, 0, req->buf, &r, n, &again);
    if (st == GW_INPROGRESS) {
        if (again) {
            intra_slot_leave(e, req);
            gw_list_push_back(&e->waiting_recv, &req->tl_link);
        }
        return;
    }
    pull_done(e, req, st);
}

static void issue(intra_ep_t *e, gw_request_t *req)
{
    if (req->op == GW_OP_BATCH)
        intrab_issue(e, req);
    else if (req->op == GW_OP_RECV)
        pull_issue(e, req);
    else if (req->op == GW_OP_SEND)
        ; /* sends wait in e->sends, never here */
    else
        rma_issue(e, req);
}

void intra_retry_waiting(intra_ep_t *e)
{
    if (!e->ready || e->failed)
        return;
    gw_list_t todo;
    gw_list_init(&todo);
    gw_list_t *p, *t;
    gw_list_for_each_safe(p, t, &e->waiting) {
        gw_list_del(p);
        gw_list_push_back(&todo, p);
    }
    gw_list_for_each_safe(p, t, &e->waiting_recv) {
        gw_list_del(p);
        gw_list_push_back(&todo, p);
    }
    gw_list_for_each_safe(p, t, &todo) {
        if (e->failed) /* an issue below failed the endpoint: the base completed the rest (do not touch them) */
            return;
        gw_list_del(p);
        issue(e, gw_container_of(p, gw_request_t, tl_link));
    }
}

gw_status_t intra_put(gw_tl_ep_t *tep, gw_request_t *req)
{
    intra_ep_t *e = to_ep(tep);
    gw_status_t st = intra_rkey_capture(e, req);
    if (st != GW_OK)
        return st;
    if (!e->ready) {
        gw_list_push_back(&e->waiting, &req->tl_link);
        return GW_OK;
    }
    rma_issue(e, req);
    return GW_OK;
}

/* gw_request_cancel(): withdraws what has not moved yet.
 *  - a put or get not yet copied: waiting for the connection (or the
 *    peer's fds), or in the queue of small CMA copies that the next
 *    progress pass writes in one system call.  Either holds nothing of the
 *    peer's (no slot entered), so it leaves without a trace.  A copy
 *    already started (CMA runs inside the call that issues it, a GPU copy
 *    on its stream) is let finish;
 *  - a send (eager or rendezvous) whose message is still whole in the
 *    control socket's queue (the peer's socket is full): taken out, the
 *    peer never sees it.  Once written, the receiver may take or pull it;
 *  - a batch: whole while it waits for the connection; else its ring slots
 *    the target has not claimed and the entries not yet posted to the ring,
 *    or the host entries its piecewise CMA copy has not reached
 *    (intrab_cancel): it ends GW_ERR_CANCELED once what it started (a
 *    claimed slot, a GPU copy) is done. */
gw_status_t intra_cancel(gw_tl_ep_t *tep, gw_request_t *req)
{
    intra_ep_t *e = to_ep(tep);
    if (e->failed || req->op == GW_OP_RECV)
        return GW_INPROGRESS;
    if (req->op == GW_OP_SEND) {
        if (!intra_out_withdraw(e, req))
            return GW_INPROGRESS;
        gw_list_del(&req->tl_link); /* off e->sends: no FIN will come */
        return GW_OK;
    }
    if (req->op != GW_OP_BATCH)
        for (unsigned i = 0; i < e->ncmaq; i++)
            if (e->cmaq[i] == req) {
                memmove(&e->cmaq[i], &e->cmaq[i + 1], (e->ncmaq - i - 1) * sizeof(e->cmaq[0]));
                e->ncmaq--;
                return GW_OK;
            }
    for (gw_list_t *p = e->waiting.next; p != &e->waiting; p = p->next)
        if (p == &req->tl_link && !intra_rq(req)->slot) {
            gw_list_del(p);
            return GW_OK;
        }
    int w = req->op == GW_OP_BATCH ? intrab_cancel(e, req) : 0;
    if (w == 2)
        return GW_OK;
    if (w)
        gw_core_signal(e->super.iface->core); /* the next progress pass ends it */
    return GW_INPROGRESS;
}

void intra_ep_send_fin(intra_ep_t *e, uint64_t op, gw_status_t st)
{
    gw_intra_hdr_t h = {.type = GW_INTRA_M_FIN, .a = op, .b = (uint64_t)(int64_t)st};
    intra_out_msg(e, &h, NULL);
}

/* An active message: one control message, its payload copied into the
 * socket's output queue. */
gw_status_t intra_am_send(gw_tl_ep_t *tep, unsigned id, const void *data, size_t len)
{
    intra_ep_t *e = to_ep(tep);
    gw_status_t st = gw_ep_am_check(tep->base, "intra", id, len);
    if (st != GW_OK)
        return st;
    gw_intra_hdr_t h = {.type = GW_INTRA_M_AM, .len = (uint32_t)len, .a = id};
    return intra_out_msg(e, &h, data);
}

gw_status_t intra_send(gw_tl_ep_t *tep, gw_request_t *req)
{
    intra_ep_t *e = to_ep(tep);
    gw_core_t *c = tep->iface->core;
    int gpu = req->lmem && req->lmem->type == GW_MEM_CUDA;
    if (!gpu && req->len <= GW_INTRA_EAGER_MAX) {
        /* completes on the receiver's FIN: "the peer has the message" */
        intra_rq(req)->opid = ++e->next_op;
        gw_intra_hdr_t h = {.type = GW_INTRA_M_EAGER, .len = (uint32_t)req->len, .a = req->value,
                            .b = intra_rq(req)->opid};
        intra_rq(req)->out_at = 1 + intra_out_next(e);
        gw_status_t st = intra_out_msg(e, &h, req->buf);
        if (st != GW_OK)
            return st;
        gw_list_push_back(&e->sends, &req->tl_link);
        return GW_OK;
    }
    uint64_t slot1 = 0;
    if (gpu) {
        uintptr_t si = (uintptr_t)req->lmem->tl_reg[GW_TL_INTRA];
        if (!si)
            return gw_err(c, GW_ERR_UNSUPPORTED,
                          "gw_send: the GPU buffer's region is not registered with the intra transport (%s)",
                          req->lmem->path);
        slot1 = si; /* stored as slot+1 */
    }
    intra_rq(req)->opid = ++e->next_op;
    gw_intra_hdr_t h = {.type = GW_INTRA_M_RTS, .a = req->value, .b = req->len,
                        .c = (uint64_t)(uintptr_t)req->buf, .d = intra_rq(req)->opid, .e = slot1};
    intra_rq(req)->out_at = 1 + intra_out_next(e);
    gw_status_t st = intra_out_msg(e, &h, NULL);
    if (st != GW_OK)
        return st;
    gw_list_push_back(&e->sends, &req->tl_link);
    return GW_OK;
}

/* Sets up a receive that matched a rendezvous and pulls. */
void intra_recv_pull(intra_ep_t *e, gw_request_t *req, uint64_t tag, uint64_t len, uint64_t addr, uint64_t op,
                      uint64_t slot1)
{
    req->rtag = tag;
    req->raddr = addr;
    intra_rq(req)->opid = op;
    intra_rq(req)->src = slot1 << 32;
    intra_rq(req)->src2 = len;
    intra_rq(req)->slot = NULL;
    pull_issue(e, req);
}

gw_status_t intra_recv_matched(gw_tl_ep_t *tep, gw_request_t *req, gw_unexp_t *u)
{
    uint64_t op = u->handle & 0xffffffffu, slot1 = u->handle >> 32;
    intra_recv_pull(to_ep(tep), req, u->tag, u->len, u->handle2, op, slot1);
    return GW_OK;
}

/* Address blob: u32 version(1) u32 pid u64 probe address u64 uuid, then the
 * abstract socket name (NUL-terminated, <= 40 bytes). */
gw_status_t intra_ep_prepare(gw_tl_iface_t *iface, gw_ep_base_t *base, gw_tl_ep_t **out, uint8_t *addr,
                                    size_t *addrlen)
{
    intra_iface_t *ifc = to_ifc(iface);
    gw_core_t *c = iface->core;
    if (*addrlen < INTRA_BLOB_LEN)
        return gw_err(c, GW_ERR_INVALID, "intra: address buffer of %zu bytes is too small", *addrlen);
    intra_ep_t *e = calloc(1, sizeof(*e));
    if (!e)
        return gw_err(c, GW_ERR_NOMEM, "intra: out of memory for an endpoint");
    e->super.iface = iface;
    e->super.base = base;
    e->ifc = ifc;
    e->own_ctx = ifc->cu && gw_cuda_copy_ctx_mode() == GW_CUDA_COPY_OWN;
    e->fd = e->lfd = e->bootfd = -1;
    gw_list_init(&e->waiting);
    gw_list_init(&e->waiting_recv);
    gw_list_init(&e->sends);
    gw_list_init(&e->imports);
    gw_hmap_init(&e->import_map);
    gw_list_init(&e->fdsets);
    gw_list_init(&e->shm_maps);
    uint64_t rnd;
    gw_random_bytes(&rnd, sizeof(rnd));
    snprintf(e->lname, sizeof(e->lname), "gw-intra-%d-%016" PRIx64, (int)ifc->pid, rnd);
    e->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct sockaddr_un sa;
    socklen_t sl = intra_abstract_addr(&sa, e->lname);
    if (e->lfd < 0 || bind(e->lfd, (struct sockaddr *)&sa, sl) != 0 || listen(e->lfd, 4) != 0) {
        gw_status_t st = gw_err(c, GW_ERR_SYSTEM, "intra: Unix socket @%s: %s", e->lname, strerror(errno));
        if (e->lfd >= 0)
            close(e->lfd);
        free(e);
        return st;
    }
    memset(addr, 0, INTRA_BLOB_LEN);
    gw_put_u32(addr, 1);
    gw_put_u32(addr + 4, (uint32_t)ifc->pid);
    gw_put_u64(addr + 8, (uint64_t)(uintptr_t)&ifc->probe);
    gw_put_u64(addr + 16, c->uuid);
    snprintf((char *)addr + 24, INTRA_BLOB_LEN - 24, "%s", e->lname);
    addr[INTRA_BLOB_FEAT] = INTRA_FEAT_RING; /* after the name's end; 0 from peers before the ring */
    *addrlen = INTRA_BLOB_LEN;
    gw_list_push_back(&ifc->eps, &e->link);
    *out = &e->super;
    return GW_OK;
}

static gw_status_t parse_blob(const uint8_t *p, size_t len, pid_t *pid, uint64_t *probe, char *name, size_t nlen,
                              uint8_t *feat, char *why, size_t whylen)
{
    if (len != INTRA_BLOB_LEN || gw_get_u32(p) != 1 || p[INTRA_BLOB_LEN - 1] != 0) {
        snprintf(why, whylen, "malformed intra address (%zu bytes)", len);
        return GW_ERR_PROTOCOL;
    }
    *pid = (pid_t)gw_get_u32(p + 4);
    *probe = gw_get_u64(p + 8);
    size_t raw = strnlen((const char *)p + 24, INTRA_BLOB_LEN - 24), nl = raw < nlen ? raw : nlen - 1;
    memcpy(name, p + 24, nl);
    name[nl] = '\0';
    if (feat) /* the features byte, where the name left room for it */
        *feat = raw < INTRA_BLOB_FEAT - 24 ? p[INTRA_BLOB_FEAT] : 0;
    return GW_OK;
}

gw_status_t intra_ep_reachable(gw_tl_iface_t *iface, const gw_tl_peer_t *peer, const uint8_t *blob,
                                      size_t len, char *why, size_t whylen)
{
    if (peer->host_id != iface->core->host_id) {
        snprintf(why, whylen, "the peer is on another host");
        return GW_ERR_UNAVAILABLE;
    }
    pid_t pid;
    uint64_t probe;
    char name[80];
    gw_status_t st = parse_blob(blob, len, &pid, &probe, name, sizeof(name), NULL, why, whylen);
    if (st != GW_OK)
        return st;
    if (intra_cma_probe(pid, probe, why, whylen) != 0)
        return GW_ERR_UNAVAILABLE;
    return GW_OK;
}

gw_status_t intra_ep_connect(gw_tl_ep_t *tep, gw_tl_peer_t *peer, const uint8_t *blob, size_t len)
{
    intra_ep_t *e = to_ep(tep);
    gw_core_t *c = tep->iface->core;
    char why[256];
    gw_status_t st = parse_blob(blob, len, &e->peer_pid, &e->peer_probe, e->peer_name, sizeof(e->peer_name),
                                &e->peer_feat, why, sizeof(why));
    if (st != GW_OK)
        return gw_err(c, st, "intra: %s", why);
    if (intra_cma_probe(e->peer_pid, e->peer_probe, why, sizeof(why)) != 0)
        return gw_err(c, GW_ERR_UNAVAILABLE, "intra: the server chose the intra-host transport but %s", why);
    /* the probe proved the pid names the peer here: a silent peer is judged
     * by its process state, so local work on its side never looks like death */
    gw_liveness_set_peer_pid(e->super.base, (int)e->peer_pid);
    /* adopt the handshake socket: a peer's orderly close then reaches us as
     * BYE after its last messages, not as an abrupt end of that socket */
    if (peer->bootstrap_fd >= 0) {
        e->bootfd = peer->bootstrap_fd;
        peer->bootstrap_fd = -1;
    }
    if (peer->is_server) {
        /* wait for the client's connection on our listener */
        st = gw_io_add(c, &e->lio, e->lfd, EPOLLIN, intra_listen_event, e);
        if (st != GW_OK)
            return st;
        e->lio_on = 1;
        e->connected = 1;
        intra_hook(e);
        return GW_OK;
    }
    close(e->lfd);
    e->lfd = -1;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa;
    socklen_t sl = intra_abstract_addr(&sa, e->peer_name);
    int rc = fd >= 0 ? connect(fd, (struct sockaddr *)&sa, sl) : -1;
    if (rc != 0 && fd >= 0 && errno == ECONNREFUSED) {
        /* The server completed the handshake (READY came) and its endpoint
         * is gone already: it was closed right after gw_accept.  The
         * connection was made; the endpoint ends as any endpoint whose peer
         * closed it, not as a refused connect. */
        close(fd);
        e->connected = 1;
        intra_hook(e);
        intra_ep_fail(e, GW_ERR_CONN_RESET, "intra: %s",
                "the peer closed the endpoint before its control connection was made (closed right after accepting it)");
        return GW_OK;
    }
    if (rc != 0) {
        st = gw_err(c, GW_ERR_CONN_REFUSED, "intra: connect(@%s) failed: %s", e->peer_name, strerror(errno));
        if (fd >= 0)
            close(fd);
        return st;
    }
    e->connected = 1; /* from here on destroy cleans up through the endpoint */
    intra_hook(e);
    st = intra_ep_attach(e, fd);
    if (st == GW_ERR_CONN_RESET) {
        /* The same close as above, a moment later: the server's endpoint went
         * between our connect() and the table's sendmsg (EPIPE/ECONNRESET).
         * The connection was made; the endpoint fails, the connect does not. */
        intra_ep_fail(e, GW_ERR_CONN_RESET, "intra: %s",
                "the peer closed the endpoint while its control connection was being set up "
                "(closed right after accepting it)");
        return GW_OK;
    }
    return st;
}

gw_status_t intra_ep_close(gw_tl_ep_t *tep)
{
    intra_ep_t *e = to_ep(tep);
    if (e->fd >= 0 && !e->failed) {
        gw_intra_hdr_t h = {.type = GW_INTRA_M_BYE};
        intra_out_msg(e, &h, NULL);
        for (int i = 0; i < 50 && e->out_off < e->out_len && !e->failed; i++) {
            struct pollfd pfd = {e->fd, POLLOUT, 0};
            poll(&pfd, 1, 10);
            intra_out_flush(e);
        }
    }
    return GW_OK;
}

void intra_ep_destroy(gw_tl_ep_t *tep)
{
    intra_ep_t *e = to_ep(tep);
    if (!e)
        return;
    gw_core_t *c = tep->iface->core;
    const gw_cuda_t *cu = e->ifc->cu;
    gw_list_t *p, *t;
    if (e->connected && e->super.base->on_fail_arg == e)
        e->super.base->on_fail = NULL;
    if (e->connected && e->super.base->notify_arg == e)
        e->super.base->notify_out = NULL;
    /* copies in flight must land before their buffers can go.  An endpoint
     * that never connected has none, and its generic endpoint may already
     * be gone (a failed handshake frees it first): leave it alone then. */
    if (e->connected && !intra_ep_dead(e))
        ep_abort(e, GW_ERR_CANCELED, 0);
    free(e->cps);
    intra_ring_destroy(e);
    gw_list_for_each_safe(p, t, &e->imports) intra_import_close(e, gw_container_of(p, intra_import_t, link));
    gw_hmap_fini(&e->import_map);
    gw_intra_shm_drop_all(&e->shm_maps);
    gw_list_for_each_safe(p, t, &e->fdsets) {
        intra_fdset_t *f = gw_container_of(p, intra_fdset_t, link);
        for (int i = 0; i < f->n; i++)
            if (f->fd[i] >= 0)
                close(f->fd[i]);
        gw_list_del(p);
        free(f);
    }
    while (e->nevfree)
        cu->cuEventDestroy(e->evfree[--e->nevfree]);
    for (int d = 0; d < INTRA_MAX_DEV; d++) {
        char why[64];
        if (e->stream[d]) {
            gw_cuda_ctx_for_device(d, why, sizeof(why));
            cu->cuStreamDestroy(e->stream[d]);
        }
        if (e->gword[d]) {
            gw_cuda_ctx_for_device(d, why, sizeof(why));
            cu->cuMemFree(e->gword[d]);
        }
        CUcontext saved = NULL;
        if (e->ostream[d] && gw_cuda_own_ctx_enter(d, &saved, why, sizeof(why))) {
            cu->cuStreamDestroy(e->ostream[d]);
            gw_cuda_ctx_leave(saved);
        }
    }
    for (int i = 0; i < e->nrxfd; i++)
        close(e->rxfd[i]);
    if (e->io_on)
        gw_io_del(c, &e->io);
    if (e->lio_on)
        gw_io_del(c, &e->lio);
    if (e->fd >= 0)
        close(e->fd);
    if (e->lfd >= 0)
        close(e->lfd);
    if (e->bootfd >= 0)
        close(e->bootfd);
    if (e->peer_table)
        munmap(e->peer_table, sizeof(gw_intra_slot_t) * GW_INTRA_SLOTS);
    free(e->out);
    free(e->in);
    gw_list_del(&e->link);
    free(e);
}

gw_status_t intra_ep_describe(gw_tl_ep_t *tep, char *buf, size_t len)
{
    intra_ep_t *e = to_ep(tep);
    char holes[48] = "", ring[64] = "", own[48] = ""; /* once there are any: gets that read through remote holes (intra_batch.c), ring slots (intra_ring.c) */
    if (e->n_holes)
        snprintf(holes, sizeof(holes), "; %lu read holes", e->n_holes);
    if (e->n_ring || e->n_ring_served)
        snprintf(ring, sizeof(ring), "; ring slots %lu out (%lu taken back), %lu in", e->n_ring, e->n_ring_back,
                 e->n_ring_served);
    if (e->own_ctx)
        snprintf(own, sizeof(own), " (%lu in own ctx)", e->n_own);
    /* kept short: gw_ep_info_t.path has 256 bytes */
    snprintf(buf, len,
             "intra: peer pid %d, Unix socket @%s%s; copies so far: %lu CMA, %lu shared memory, %lu copy engine%s, "
             "%lu staged, %lu kernel; %lu CMA copies batched in %lu calls%s%s; GPU batches: %s",
             (int)e->peer_pid, e->peer_name[0] ? e->peer_name : e->lname, e->ifc->cu ? "" : " (no CUDA here)",
             e->n_cma, e->n_shm, e->n_cuda, own, e->n_staged, e->n_kernel, e->n_cma_batched, e->n_cma_calls, holes, ring,
             e->ifc->bkernel[0] ? e->ifc->bkernel : "none yet");
    return GW_OK;
}
