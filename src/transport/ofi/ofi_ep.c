/* SPDX-License-Identifier: Apache-2.0 */
/* ofi_ep.c - ofi endpoint life: an RDM endpoint with its completion queue
 * and address vector, registered receive and send slots, the address blob,
 * reachability, connecting (the peer's name into the address vector),
 * teardown; and failure.
 *
 * Failure: an operation the provider fails with a refused key
 * (GW_ERR_INVALID_KEY) fails that operation alone; any other failed
 * completion, a malformed message, or the liveness timer fails the endpoint
 * with the provider's error string.  The first gw_ep_fail() (ours or the
 * api layer's, e.g. its control socket closing) runs ofi_on_fail, which
 * drops what the transport holds of requests before the base fails them.
 */
#include "transport/ofi/ofi.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

gw_status_t gw_ofi_status_of(int err)
{
    switch (err < 0 ? -err : err) {
    case FI_ECANCELED:
        return GW_ERR_CANCELED;
    case FI_ETIMEDOUT:
        return GW_ERR_PEER_TIMEOUT;
    case FI_ECONNRESET:
    case FI_ECONNREFUSED:
    case FI_ECONNABORTED:
    case FI_ENOTCONN:
    case FI_EHOSTUNREACH:
    case FI_ENETUNREACH:
    case FI_ENETDOWN:
    case FI_ESHUTDOWN:
    case FI_EIO: /* (shm: the peer process is gone, its memory unreadable) */
        return GW_ERR_CONN_RESET;
    case FI_EACCES:
    case FI_EPERM:
    case FI_EKEYREJECTED:
    case FI_EINVAL:
        return GW_ERR_INVALID_KEY;
    case FI_ETRUNC:
        return GW_ERR_PROTOCOL;
    case FI_ENOMEM:
        return GW_ERR_NOMEM;
    default:
        return GW_ERR_SYSTEM;
    }
}

static void cq_cb(void *arg, uint32_t events)
{
    (void)arg;
    (void)events; /* the context's poller reads the queue right after the fd callbacks */
}

static void ep_free(gw_ofi_ep_t *ep)
{
    gw_ofi_iface_t *oif = ep->oif;
    gw_core_t *c = oif->super.core;
    int rc;
    /* the endpoint first: the provider then touches none of our buffers */
    if (ep->ep && (rc = fi_close(&ep->ep->fid)) != 0)
        gw_log(GW_LOG_WARN, "fi_close(endpoint of %s) failed: %s", oif->prov, gw_ofi_strerror(oif, rc));
    if (ep->cq_io.fd >= 0)
        gw_io_del(c, &ep->cq_io);
    if (ep->cq && (rc = fi_close(&ep->cq->fid)) != 0)
        gw_log(GW_LOG_WARN, "fi_close(completion queue of %s) failed: %s", oif->prov, gw_ofi_strerror(oif, rc));
    if (ep->av && (rc = fi_close(&ep->av->fid)) != 0)
        gw_log(GW_LOG_WARN, "fi_close(address vector of %s) failed: %s", oif->prov, gw_ofi_strerror(oif, rc));
    gw_ofi_close_mr(oif, ep->rxmr);
    gw_ofi_close_mr(oif, ep->txmr);
    gw_ofi_close_mr(oif, ep->tstage_mr);
    free(ep->tstage);
    free(ep->rxbuf);
    free(ep->txbuf);
    free(ep->rma);
    gw_list_t *p, *t;
    gw_list_for_each_safe(p, t, &ep->ctlq) {
        gw_list_del(p);
        gw_op_state_put(oep_core(ep), gw_container_of(p, gw_ofi_ctl_t, link));
    }
    gw_list_for_each_safe(p, t, &ep->rts) {
        gw_list_del(p);
        gw_op_state_put(oep_core(ep), gw_container_of(p, gw_ofi_rts_t, link));
    }
    gw_op_table_fini(&ep->sends);
    gw_list_t *lists[2] = {&ep->tctx_free, &ep->tctx_busy};
    for (int k = 0; k < 2; k++)
        gw_list_for_each_safe(p, t, lists[k]) {
            gw_list_del(p);
            free(gw_container_of(p, gw_ofi_ctx_t, link));
        }
    free(ep);
}

gw_status_t gw_ofi_ep_prepare(gw_tl_iface_t *iface, gw_ep_base_t *base, gw_tl_ep_t **out, uint8_t *addr,
                              size_t *addrlen)
{
    gw_ofi_iface_t *oif = (gw_ofi_iface_t *)iface;
    gw_core_t *c = iface->core;
    const char *pv = oif->prov;
    gw_status_t st;
    int rc;
    gw_ofi_ep_t *ep = calloc(1, sizeof(*ep));
    if (!ep)
        return gw_err(c, GW_ERR_NOMEM, "ofi endpoint: out of memory");
    ep->super.iface = iface;
    ep->super.base = base;
    ep->oif = oif;
    ep->cq_io.fd = -1;
    ep->peer = FI_ADDR_NOTAVAIL;
    gw_list_init(&ep->link);
    gw_list_init(&ep->rma_free);
    gw_list_init(&ep->rma_busy);
    gw_list_init(&ep->pending);
    gw_list_init(&ep->ctlq);
    gw_list_init(&ep->rdv_recvs);
    gw_list_init(&ep->rts);
    gw_list_init(&ep->tctx_free);
    gw_list_init(&ep->tctx_busy);
    gw_op_table_init(&ep->sends);

    struct fi_cq_attr ca;
    memset(&ca, 0, sizeof(ca));
    ca.format = FI_CQ_FORMAT_TAGGED; /* (the tagged path's receives need the tag of what matched) */
    ca.wait_obj = oif->wait_fd ? FI_WAIT_FD : FI_WAIT_NONE;
    ca.size = 4 * (GW_OFI_NRX + GW_OFI_NTX + GW_OFI_MAX_RMA);
    rc = fi_cq_open(oif->domain, &ca, &ep->cq, NULL);
    if (rc && oif->wait_fd) { /* a provider without wait fds: the context busy-polls while work waits */
        gw_log(GW_LOG_INFO, "ofi %s: completion queue with a wait fd refused (%s); polling without one", pv,
               gw_ofi_strerror(oif, rc));
        oif->wait_fd = 0;
        ca.wait_obj = FI_WAIT_NONE;
        rc = fi_cq_open(oif->domain, &ca, &ep->cq, NULL);
    }
    if (rc) {
        st = gw_err(c, GW_ERR_SYSTEM, "fi_cq_open(%s/%s, %zu entries) failed: %s", pv, oif->dom, ca.size,
                    gw_ofi_strerror(oif, rc));
        goto err;
    }
    if (oif->wait_fd) {
        int fd = -1;
        rc = fi_control(&ep->cq->fid, FI_GETWAIT, &fd);
        if (rc || fd < 0) {
            st = gw_err(c, GW_ERR_SYSTEM, "fi_control(%s completion queue, FI_GETWAIT) failed: %s", pv,
                        gw_ofi_strerror(oif, rc));
            goto err;
        }
        if ((st = gw_io_add_cold(c, &ep->cq_io, fd, EPOLLIN, cq_cb, ep)) != GW_OK)
            goto err;
    }
    struct fi_av_attr aa;
    memset(&aa, 0, sizeof(aa));
    aa.type = oif->info->domain_attr->av_type != FI_AV_UNSPEC ? oif->info->domain_attr->av_type : FI_AV_TABLE;
    aa.count = 4;
    if ((rc = fi_av_open(oif->domain, &aa, &ep->av, NULL)) != 0) {
        st = gw_err(c, GW_ERR_SYSTEM, "fi_av_open(%s/%s) failed: %s", pv, oif->dom, gw_ofi_strerror(oif, rc));
        goto err;
    }
    struct fi_info *einfo = oif->info;
    char shm_name[128];
    if (oif->shm_names) { /* a name of our own: the provider's may be a dead process's (ofi_shm.c) */
        if (gw_ofi_shm_name(shm_name, sizeof(shm_name)) != 0 || !(einfo = oif->fi->dupinfo(oif->info))) {
            st = gw_err(c, GW_ERR_NOMEM, "ofi %s endpoint: no name for its shared memory region", pv);
            goto err;
        }
        free(einfo->src_addr);
        einfo->src_addr = strdup(shm_name);
        einfo->src_addrlen = strlen(shm_name) + 1;
        if (!einfo->src_addr) {
            oif->fi->freeinfo(einfo);
            st = gw_err(c, GW_ERR_NOMEM, "ofi %s endpoint: out of memory", pv);
            goto err;
        }
    }
    rc = fi_endpoint(oif->domain, einfo, &ep->ep, NULL);
    if (einfo != oif->info)
        oif->fi->freeinfo(einfo);
    if (rc != 0) {
        st = gw_err(c, GW_ERR_SYSTEM, "fi_endpoint(%s/%s, RDM%s%s) failed: %s", pv, oif->dom,
                    oif->shm_names ? ", region " : "", oif->shm_names ? shm_name : "", gw_ofi_strerror(oif, rc));
        goto err;
    }
    if ((rc = fi_ep_bind(ep->ep, &ep->av->fid, 0)) != 0 ||
        (rc = fi_ep_bind(ep->ep, &ep->cq->fid, FI_TRANSMIT | FI_RECV)) != 0 || (rc = fi_enable(ep->ep)) != 0) {
        st = gw_err(c, GW_ERR_SYSTEM, "binding and enabling the %s endpoint failed: %s", pv,
                    gw_ofi_strerror(oif, rc));
        goto err;
    }
    size_t rl = (size_t)GW_OFI_NRX * GW_OFI_SLOT, tl = (size_t)GW_OFI_NTX * GW_OFI_SLOT;
    if (posix_memalign((void **)&ep->rxbuf, 4096, rl) != 0 || posix_memalign((void **)&ep->txbuf, 4096, tl) != 0 ||
        !(ep->rma = calloc(GW_OFI_MAX_RMA, sizeof(*ep->rma)))) {
        st = gw_err(c, GW_ERR_NOMEM, "ofi endpoint slots (%zu bytes): out of memory", rl + tl);
        goto err;
    }
    if (oif->mr_local) {
        ep->rxmr = gw_ofi_reg_local(oif, ep->rxbuf, rl, FI_RECV, -1, &st);
        if (!ep->rxmr)
            goto err;
        ep->txmr = gw_ofi_reg_local(oif, ep->txbuf, tl, FI_SEND | FI_READ | FI_WRITE, -1, &st);
        if (!ep->txmr)
            goto err;
        ep->rxdesc = fi_mr_desc(ep->rxmr);
        ep->txdesc = fi_mr_desc(ep->txmr);
    }
    if (oif->tagged) { /* the tagged path's stages for short receives */
        size_t sl = (size_t)GW_OFI_NTSTAGE * GW_OFI_TSTAGE;
        if (posix_memalign((void **)&ep->tstage, 64, sl) != 0) {
            st = gw_err(c, GW_ERR_NOMEM, "ofi endpoint: out of memory for %zu bytes of receive stages", sl);
            goto err;
        }
        if (oif->mr_local) {
            if (!(ep->tstage_mr = gw_ofi_reg_local(oif, ep->tstage, sl, FI_RECV, -1, &st)))
                goto err;
            ep->tstage_desc = fi_mr_desc(ep->tstage_mr);
        }
        for (unsigned i = 0; i < GW_OFI_NTSTAGE; i++)
            ep->tstage_free[ep->ntstage_free++] = (uint16_t)(GW_OFI_NTSTAGE - 1 - i);
    }
    for (unsigned i = 0; i < GW_OFI_NTX; i++) {
        ep->txctx[i] = (gw_ofi_ctx_t){.ep = ep, .kind = GW_OFI_CTX_TX, .slot = (uint16_t)i};
        ep->txfree[ep->ntxfree++] = (uint16_t)(GW_OFI_NTX - 1 - i);
    }
    for (unsigned i = 0; i < GW_OFI_MAX_RMA; i++) {
        ep->rma[i] = (gw_ofi_ctx_t){.ep = ep, .kind = GW_OFI_CTX_RMA};
        gw_list_push_back(&ep->rma_free, &ep->rma[i].link);
    }
    for (unsigned i = 0; i < GW_OFI_NRX; i++) {
        ep->rxctx[i] = (gw_ofi_ctx_t){.ep = ep, .kind = GW_OFI_CTX_RX, .slot = (uint16_t)i};
        if ((rc = gw_ofi_post_rx(ep, i)) != 0) {
            st = gw_err(c, GW_ERR_SYSTEM, "fi_recv(%s, receive slot %u) failed: %s", pv, i, gw_ofi_strerror(oif, rc));
            goto err;
        }
    }
    gw_ofi_addr_t *la = &ep->local;
    la->version = GW_OFI_ADDR_VERSION;
    la->flags = (oif->hmem ? GW_OFI_AF_HMEM : 0) | (oif->tagged ? GW_OFI_AF_TAGGED : 0) |
                (oif->credits ? GW_OFI_AF_CREDITS : 0);
    /* credits as if the peer agrees (a message may come before connect
     * settles it: its slot is owed back then) */
    ep->cr_on = oif->credits;
    ep->tx_credits = oif->credits ? GW_OFI_CREDIT_SLOTS - GW_OFI_CREDIT_RESERVE : UINT64_MAX / 2;
    snprintf(la->prov, sizeof(la->prov), "%s", oif->prov);
    snprintf(la->domain, sizeof(la->domain), "%s", oif->dom);
    size_t nl = sizeof(la->name);
    if ((rc = fi_getname(&ep->ep->fid, la->name, &nl)) != 0) {
        st = gw_err(c, GW_ERR_SYSTEM, "fi_getname(%s endpoint) failed: %s (address of %zu bytes?)", pv,
                    gw_ofi_strerror(oif, rc), nl);
        goto err;
    }
    la->namelen = (uint16_t)nl;
    size_t n = gw_ofi_addr_pack(la, addr, *addrlen);
    if (!n) {
        st = gw_err(c, GW_ERR_INVALID, "ofi address (%s, %zu-byte name) needs more than %zu bytes", pv, nl, *addrlen);
        goto err;
    }
    *addrlen = n;
    gw_list_push_back(&oif->eps, &ep->link);
    gw_ofi_keep_update(oif);
    *out = &ep->super;
    return GW_OK;
err:
    ep_free(ep);
    return st;
}

gw_status_t gw_ofi_ep_reachable(gw_tl_iface_t *iface, const gw_tl_peer_t *peer, const uint8_t *peer_addr,
                                size_t len, char *why, size_t whylen)
{
    gw_ofi_iface_t *oif = (gw_ofi_iface_t *)iface;
    gw_ofi_addr_t pa;
    char w[256];
    gw_status_t st = gw_ofi_addr_unpack(&pa, peer_addr, len, w, sizeof(w));
    if (st != GW_OK) {
        snprintf(why, whylen, "peer's %s", w);
        return st;
    }
    if (strcmp(pa.prov, oif->prov) != 0) {
        snprintf(why, whylen, "providers differ: ours %s, the peer's %s (set GPUWIRE_OFI_PROVIDER alike on both)",
                 oif->prov, pa.prov);
        return GW_ERR_UNAVAILABLE;
    }
    int same_host = peer && peer->host_id == iface->core->host_id;
    size_t cl = strcspn(oif->prov, ";");
    if (!same_host && ((cl == 3 && !strncmp(oif->prov, "shm", 3)) || !strcmp(pa.domain, "lo"))) {
        snprintf(why, whylen, "the peer is on another host and %s/%s reaches this host only", pa.prov, pa.domain);
        return GW_ERR_UNAVAILABLE;
    }
    return GW_OK;
}

static void ofi_on_fail(void *arg, gw_status_t st)
{
    gw_ofi_forget_all(arg, st);
}

gw_status_t gw_ofi_ep_connect(gw_tl_ep_t *e, gw_tl_peer_t *peer, const uint8_t *peer_addr, size_t len)
{
    gw_ofi_ep_t *ep = to_oep(e);
    gw_ofi_iface_t *oif = ep->oif;
    gw_core_t *c = oif->super.core;
    char why[300];
    gw_status_t st = gw_ofi_ep_reachable(&oif->super, peer, peer_addr, len, why, sizeof(why));
    if (st != GW_OK)
        return gw_err(c, st, "ofi connect to %s: %s", ep->super.base->peer, why);
    gw_ofi_addr_unpack(&ep->remote, peer_addr, len, why, sizeof(why));
    int rc = fi_av_insert(ep->av, ep->remote.name, 1, &ep->peer, 0, NULL);
    if (rc != 1)
        return gw_err(c, GW_ERR_ADDRESS, "fi_av_insert(%s, the peer's %u-byte address) failed: %s", oif->prov,
                      ep->remote.namelen, rc < 0 ? gw_ofi_strerror(oif, rc) : "not inserted");
    ep->connected = 1;
    gw_ep_base_t *b = ep->super.base;
    b->on_fail = ofi_on_fail;
    b->on_fail_arg = ep;
    b->notify_out = gw_ofi_notify_out; /* notifications go once the data before them is delivered */
    b->notify_arg = ep;
    b->last_rx_ns = gw_now_coarse_ns();
    /* application messages by the provider's tagged operations when both
     * sides offer them (an older peer, or one with GPUWIRE_OFI_TAGGED=off,
     * sets no flag: both then keep gpuwire's header path) */
    ep->tagged = oif->tagged && (ep->remote.flags & GW_OFI_AF_TAGGED);
    if (ep->tagged) {
        b->tl_recv = gw_ofi_trecv;
        b->tl_probe = gw_ofi_tprobe;
    }
    /* header messages under credits when both sides offer them (an older
     * peer, or one with GPUWIRE_OFI_CREDITS=off, sets no flag: then no
     * credit is counted, carried or waited for, either way) */
    ep->cr_on = oif->credits && (ep->remote.flags & GW_OFI_AF_CREDITS);
    if (!ep->cr_on) {
        ep->tx_credits = UINT64_MAX / 2; /* (never runs out: no compare but the one every sender makes) */
        ep->cr_owed = 0;
    } else {
        /* test hook (not a setting): return this many credits never spent
         * on the first header sent, as a broken peer would (the peer must
         * fail the endpoint with GW_ERR_PROTOCOL) */
        const char *th = gw_settings_test_hook("GW_TEST_OFI_CREDIT_LIE");
        if (th && atoi(th) > 0 && atoi(th) <= GW_OFI_CREDIT_SLOTS)
            ep->cr_owed = (unsigned)atoi(th);
    }
    gw_log(GW_LOG_DEBUG, "ofi: connected %s/%s -> %s/%s", oif->prov, oif->dom, ep->remote.prov,
           ep->remote.domain);
    /* A first message now, waited for (bounded): a provider that connects on
     * first use (ofi_rxm) does so while the accepting side still progresses
     * the handshake, so a later message from a peer that is then not
     * progressing (busy, or gone) needs no connection set up by it, and
     * gw_connect returns with the provider's connection up.  Past the bound
     * (an accepting side that stopped progressing) the connection completes
     * with later progress. */
    if (peer && !peer->is_server) {
        gw_ofi_hdr_t h = {.type = GW_OFI_PING};
        if (gw_ofi_send_ctl(ep, &h) != GW_OK)
            return gw_err(c, b->error, "%s", b->error_detail);
        uint64_t until = gw_now_ns() + 2000000000ull;
        while (!ep->tx_seen && !gw_ep_failed(b) && gw_now_ns() < until)
            if (gw_ofi_ep_progress(ep) == 0)
                usleep(100);
        if (gw_ep_failed(b))
            return gw_err(c, b->error, "ofi connect to %s: %s", b->peer, b->error_detail);
        if (!ep->tx_seen)
            gw_log(GW_LOG_INFO, "ofi %s: the first message to %s is not out after 2 s; going on", oif->prov, b->peer);
    }
    return GW_OK;
}

gw_status_t gw_ofi_ep_close(gw_tl_ep_t *e)
{
    (void)e; /* nothing to tell the peer: the api layer closes the bootstrap socket */
    return GW_OK;
}

void gw_ofi_ep_destroy(gw_tl_ep_t *e)
{
    if (!e)
        return;
    gw_ofi_ep_t *ep = to_oep(e);
    ep->closing = 1;
    if (ep->connected) {
        gw_ep_base_t *b = ep->super.base;
        if (!gw_ep_failed(b))
            gw_ep_fail(b, GW_ERR_CANCELED, "endpoint closed");
        if (b->on_fail_arg == ep)
            b->on_fail = NULL;
        if (b->notify_arg == ep)
            b->notify_out = NULL;
        if (ep->tagged) {
            b->tl_recv = NULL;
            b->tl_probe = NULL;
        }
    }
    gw_list_del(&ep->link);
    gw_ofi_keep_update(ep->oif);
    if (ep->oif->defer_close && ep->ep && !ep->used) {
        /* libfabric 2.x's tcp provider: each RDM endpoint listens for its
         * peers' connections on a socket of its own, and a connection it
         * accepted stays in the domain's progress set, pointing at that
         * listener, until the peer's connection request on it is read; an
         * fi_close before then frees the listener under it, and a later
         * fi_cq_read of any queue of the domain (all share its progress)
         * crashes in the provider.  An endpoint closed before anything came
         * from its peer (a server closing right after gw_accept, while the
         * client's first message connects) may be in that state: its
         * provider objects live on for a grace period (its queue read and
         * dropped by the poller, gw_ofi_graves_sweep), long enough for a
         * request the peer sent before learning of the close to be read.
         * One that carried anything is closed at once: its peer's
         * connection was read already, and data of operations in flight
         * (ours, or a rendezvous read of our buffer) must stop moving when
         * gw_ep_close returns. */
        ep->super.base = NULL;
        ep->grave_ns = gw_now_ns();
        if (ep->cq_io.fd >= 0) { /* its queue's fd, signalled and never reset by fi_trywait, would keep a
                                  * waiting context spinning: the poller's passes read it */
            gw_io_del(oep_core(ep), &ep->cq_io);
            ep->cq_io.fd = -1;
        }
        gw_list_push_back(&ep->oif->graves, &ep->link);
        return;
    }
    ep_free(ep);
}

void gw_ofi_graves_sweep(gw_ofi_iface_t *oif, int all)
{
    uint64_t now = gw_now_ns();
    gw_list_t *p, *t;
    gw_list_for_each_safe(p, t, &oif->graves) {
        gw_ofi_ep_t *ep = gw_container_of(p, gw_ofi_ep_t, link);
        struct fi_cq_tagged_entry ce[16];
        for (int round = 0; !all && round < 8; round++) { /* progress, and what arrived for it goes */
            ssize_t r = fi_cq_read(ep->cq, ce, 16);
            if (r == -FI_EAVAIL) {
                struct fi_cq_err_entry ee;
                memset(&ee, 0, sizeof(ee));
                if (fi_cq_readerr(ep->cq, &ee, 0) < 0)
                    break;
            } else if (r < 16) {
                break;
            }
        }
        if (all || now - ep->grave_ns >= GW_OFI_GRACE_NS) {
            gw_list_del(&ep->link);
            ep_free(ep);
        }
    }
}

gw_status_t gw_ofi_ep_describe(gw_tl_ep_t *e, char *buf, size_t len)
{
    gw_ofi_ep_t *ep = to_oep(e);
    gw_ofi_iface_t *oif = ep->oif;
    /* (short: the api layer appends to it within gw_ep_info_t.path) */
    const char *tg = ep->tagged && !ep->super.base->integ ? "tagged messages" : "header messages";
    char cr[64] = "";
    if (ep->cr_on) /* (flow control at work: messages that waited for a credit, credits sent back alone) */
        snprintf(cr, sizeof(cr), ", %llu credit waits, %llu CREDITs", (unsigned long long)ep->n_cstall,
                 (unsigned long long)ep->n_credit);
    snprintf(buf, len, "ofi %s/%s -> %s/%s, %s, %s, %s; %llu RMA, %llu eager (%llu injected), %llu "
             "rendezvous, %llu bounced, %llu registered per op, %llu room waits%s",
             oif->prov, oif->dom, ep->remote.prov, ep->remote.domain,
             oif->hmem ? "GPU memory by FI_HMEM" : "host memory only",
             oif->delivery ? "delivery complete" : "transmit complete", tg, (unsigned long long)ep->n_rma,
             (unsigned long long)ep->n_eager, (unsigned long long)ep->n_inject, (unsigned long long)ep->n_rdv,
             (unsigned long long)ep->n_bounce,
             (unsigned long long)ep->n_onfly, (unsigned long long)ep->n_eagain, cr);
    return GW_OK;
}

void gw_ofi_ep_die(gw_ofi_ep_t *ep, gw_status_t st, const char *fmt, ...)
{
    gw_ep_base_t *b = ep->super.base;
    if (gw_ep_failed(b))
        return;
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    gw_err(oep_core(ep), st, "%s", msg);
    gw_ep_fail(b, st, "%s", msg); /* runs ofi_on_fail once connected */
}
