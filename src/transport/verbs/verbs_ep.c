/* SPDX-License-Identifier: Apache-2.0 */
/* verbs_ep.c - verbs endpoint life: queue pairs from RESET to RTS, the
 * address blob, reachability, teardown; and failure.
 *
 * Failure: the first error completion fails the endpoint with the verbs
 * status, the operation and a hint; the flush errors after it are ignored.
 * A QP in error is never reused: the endpoint stays failed.  Failed means
 * the base's latch (gw_ep_failed, via vep_failed): the first gw_ep_fail(),
 * ours or the api layer's, runs verbs_on_fail, which releases what the
 * requests hold.  A failed endpoint's queue pairs are drained so the bounce slots the NIC may still
 * use go back to their engine (gw_verbs_ep_drain).
 */
#include "transport/verbs/verbs.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *mtu_str(int m)
{
    static const char *const s[] = {"?", "256", "512", "1024", "2048", "4096"};
    return m >= 1 && m <= 5 ? s[m] : "?";
}

static void ep_free_res(gw_verbs_ep_t *ep)
{
    const gw_ibv_t *ibv = ep->vif->ibv;
    for (int i = 0; i < GW_VERBS_MAX_QPS; i++) {
        if (ep->qps[i].qp) {
            int rc = ibv->destroy_qp(ep->qps[i].qp);
            if (rc)
                gw_log(GW_LOG_WARN, "ibv_destroy_qp(qp=0x%x) failed: %s", ep->qps[i].qp->qp_num,
                       strerror(rc));
        }
        free(ep->qps[i].ring);
    }
    free(ep->chain_wr);
    free(ep->chain_sge);
    free(ep->iov_pool);
    ep->chain_wr = NULL;
    ep->chain_sge = NULL;
    ep->iov_pool = NULL;
    gw_verbs_am_forget(ep);
    if (ep->cq) {
        if (ep->cq_unacked)
            ibv->ack_cq_events(ep->cq, ep->cq_unacked);
        int rc = ibv->destroy_cq(ep->cq);
        if (rc)
            gw_log(GW_LOG_WARN, "ibv_destroy_cq(%s) failed: %s", ep->vif->port.dev, strerror(rc));
    }
    gw_verbs_stage_ep_fini(ep); /* (after the QPs: no NIC access to bounce slots is left) */
    gw_op_table_fini(&ep->rdv);
    if (ep->smr)
        ibv->dereg_mr(ep->smr);
    if (ep->rmr)
        ibv->dereg_mr(ep->rmr);
    free(ep->sbuf);
    free(ep->rbuf);
    free(ep->sfree);
    free(ep);
}

static gw_status_t post_initial_recvs(gw_verbs_ep_t *ep)
{
    for (unsigned i = 0; i < ep->nrecv; i++) {
        struct ibv_sge sge = {.addr = (uint64_t)(uintptr_t)(ep->rbuf + (size_t)i * GW_VERBS_SLOT),
                              .length = GW_VERBS_SLOT,
                              .lkey = ep->rmr->lkey};
        struct ibv_recv_wr w = {.wr_id = GW_VERBS_RECV_WRID | i, .sg_list = &sge, .num_sge = 1}, *bad;
        int rc = ibv_post_recv(ep->qps[0].qp, &w, &bad);
        if (rc)
            return gw_err(ep->vif->super.core, GW_ERR_VERBS,
                          "ibv_post_recv(qp=0x%x, buffer %u) failed: %s", ep->qps[0].qp->qp_num, i,
                          strerror(rc));
    }
    /* QPs 1..: zero-length receives for the WRITE_WITH_IMM that closes a
     * striped rendezvous on each queue pair (the data goes where the WRITE
     * says; the receive only carries the immediate) */
    for (int qi = 1; qi < ep->nqps; qi++)
        ep->qps[qi].imm_repost = GW_VERBS_IMM_RECVS;
    int qi = 0, rc = gw_verbs_post_imm_recvs(ep, &qi);
    if (rc)
        return gw_err(ep->vif->super.core, GW_ERR_VERBS, "ibv_post_recv(qp=0x%x, %u zero-length receives) failed: %s",
                      ep->qps[qi].qp->qp_num, GW_VERBS_IMM_RECVS, strerror(rc));
    return GW_OK;
}

gw_status_t gw_verbs_ep_prepare(gw_tl_iface_t *iface, gw_ep_base_t *base, gw_tl_ep_t **out,
                                uint8_t *addr, size_t *addrlen)
{
    gw_verbs_iface_t *vif = (gw_verbs_iface_t *)iface;
    gw_core_t *c = iface->core;
    const gw_ibv_t *ibv = vif->ibv;
    const char *dev = vif->port.dev;
    gw_status_t st;
    gw_verbs_ep_t *ep = calloc(1, sizeof(*ep));
    if (!ep)
        return gw_err(c, GW_ERR_NOMEM, "verbs endpoint: out of memory");
    ep->super.iface = iface;
    ep->super.base = base;
    ep->vif = vif;
    gw_list_init(&ep->link);
    gw_list_init(&ep->pending);
    gw_list_init(&ep->rdv_recvs);
    gw_list_init(&ep->stg_reqs);
    gw_list_init(&ep->am_q);
    gw_op_table_init(&ep->rdv);
    ep->put_wr.sg_list = &ep->put_sge; /* (the rest per put: inline_put_post) */
    ep->put_wr.num_sge = 1;
    ep->put_wr.opcode = IBV_WR_RDMA_WRITE;
    ep->sgid_i = ep->dgid_i = -1;
    ep->nqps = vif->nqps;
    ep->nrecv = GW_VERBS_NRECV;

    int cqe = ep->nqps * GW_VERBS_SQ_DEPTH + (int)ep->nrecv + 8;
    if (vif->dattr.max_cqe > 0 && cqe > vif->dattr.max_cqe)
        cqe = vif->dattr.max_cqe;
    ep->cq = ibv->create_cq(vif->ctx, cqe, ep, vif->chan, 0);
    if (!ep->cq) {
        st = gw_err(c, GW_ERR_VERBS, "ibv_create_cq(dev=%s, cqe=%d) failed: %s", dev, cqe,
                    strerror(errno));
        goto err;
    }
    size_t sl = (size_t)GW_VERBS_NSLOTS * GW_VERBS_SLOT, rl = (size_t)ep->nrecv * GW_VERBS_SLOT;
    if (posix_memalign((void **)&ep->sbuf, 4096, sl) != 0 ||
        posix_memalign((void **)&ep->rbuf, 4096, rl) != 0 ||
        !(ep->sfree = calloc(GW_VERBS_NSLOTS, sizeof(uint16_t)))) {
        st = gw_err(c, GW_ERR_NOMEM, "verbs endpoint buffers (%zu bytes): out of memory", sl + rl);
        goto err;
    }
    for (int i = 0; i < GW_VERBS_NSLOTS; i++)
        ep->sfree[ep->nsfree++] = (uint16_t)(GW_VERBS_NSLOTS - 1 - i);
    ep->smr = ibv->reg_mr(vif->pd, ep->sbuf, sl, IBV_ACCESS_LOCAL_WRITE);
    ep->rmr = ep->smr ? ibv->reg_mr(vif->pd, ep->rbuf, rl, IBV_ACCESS_LOCAL_WRITE) : NULL;
    if (!ep->smr || !ep->rmr) {
        st = gw_err(c, errno == ENOMEM ? GW_ERR_MEMLOCK : GW_ERR_VERBS,
                    "ibv_reg_mr(dev=%s, endpoint buffers of %zu bytes) failed: %s%s", dev, sl + rl,
                    strerror(errno), errno == ENOMEM ? " (locked-memory limit: ulimit -l)" : "");
        goto err;
    }
    ep->max_inline = 256;
    /* a list's gathered WRs take more SGEs (verbs_iov.c); a device that
     * refuses that many gets the two of the eager path */
    ep->iov_sge = GW_MAX(1, GW_MIN(vif->dattr.max_sge, GW_VERBS_IOV_SGE));
    for (int i = 0; i < ep->nqps; i++) {
        gw_verbs_qp_t *q = &ep->qps[i];
        q->depth = GW_VERBS_SQ_DEPTH;
        if (vif->dattr.max_qp_wr > 0 && (int)q->depth > vif->dattr.max_qp_wr)
            q->depth = (uint32_t)vif->dattr.max_qp_wr;
        uint32_t rn = 1;
        while (rn < q->depth)
            rn <<= 1;
        q->ring_mask = rn - 1;
        q->ring = calloc(rn, sizeof(*q->ring));
        if (!q->ring) {
            st = gw_err(c, GW_ERR_NOMEM, "verbs send ring: out of memory");
            goto err;
        }
        struct ibv_qp_init_attr ia;
        memset(&ia, 0, sizeof(ia));
        ia.qp_context = ep;
        ia.send_cq = ep->cq;
        ia.recv_cq = ep->cq;
        ia.qp_type = IBV_QPT_RC;
        ia.sq_sig_all = 0;
        ia.cap.max_send_wr = q->depth;
        ia.cap.max_recv_wr = i == 0 ? ep->nrecv : GW_VERBS_IMM_RECVS;
        ep->max_send_sge = vif->dattr.max_sge >= 2 ? 2 : 1;
        ia.cap.max_send_sge = (uint32_t)GW_MAX(ep->max_send_sge, ep->iov_sge);
        ia.cap.max_recv_sge = 1;
        ia.cap.max_inline_data = ep->max_inline;
        q->qp = ibv->create_qp(vif->pd, &ia);
        if (!q->qp && errno == EINVAL && ia.cap.max_send_sge > (uint32_t)ep->max_send_sge) {
            /* (a device refusing that many SGEs: EINVAL; other failures are not retried here) */
            ep->iov_sge = ep->max_send_sge;
            ia.cap.max_send_sge = (uint32_t)ep->max_send_sge;
            q->qp = ibv->create_qp(vif->pd, &ia);
        }
        if (!q->qp && ia.cap.max_inline_data) { /* provider without inline data */
            ia.cap.max_inline_data = 0;
            q->qp = ibv->create_qp(vif->pd, &ia);
        }
        if (!q->qp) {
            st = gw_err(c, GW_ERR_VERBS, "ibv_create_qp(dev=%s, RC, send_wr=%u, recv_wr=%u) "
                        "failed: %s", dev, q->depth, ia.cap.max_recv_wr, strerror(errno));
            goto err;
        }
        if (ia.cap.max_inline_data < ep->max_inline)
            ep->max_inline = ia.cap.max_inline_data;
        uint32_t psn;
        gw_random_bytes(&psn, sizeof(psn));
        q->psn = psn & 0xffffff;
        struct ibv_qp_attr a;
        memset(&a, 0, sizeof(a));
        a.qp_state = IBV_QPS_INIT;
        a.pkey_index = 0;
        a.port_num = (uint8_t)vif->port.port;
        a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
        int rc = ibv->modify_qp(q->qp, &a,
                                IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
        if (rc) {
            st = gw_err(c, GW_ERR_VERBS, "ibv_modify_qp(qp=0x%x, INIT, port %d) failed: %s",
                        q->qp->qp_num, vif->port.port, strerror(rc));
            goto err;
        }
    }
    ep->iov_sge_rd = GW_MAX(1, GW_MIN(ep->iov_sge, vif->dattr.max_sge_rd > 0 ? vif->dattr.max_sge_rd : 1));
    /* a pass's chains: a whole send queue per queue pair (struct batch, verbs.h) */
    ep->chain_cap = (int)ep->qps[0].depth;
    ep->chain_wr = calloc((size_t)ep->nqps * (size_t)ep->chain_cap, sizeof(*ep->chain_wr));
    ep->chain_sge = calloc((size_t)ep->nqps * (size_t)ep->chain_cap, sizeof(*ep->chain_sge));
    if (!ep->chain_wr || !ep->chain_sge) {
        st = gw_err(c, GW_ERR_NOMEM, "verbs work-request chains (%d x %d): out of memory", ep->nqps, ep->chain_cap);
        goto err;
    }
    if ((st = post_initial_recvs(ep)) != GW_OK)
        goto err;

    gw_verbs_addr_t *la = &ep->local;
    la->version = GW_VERBS_ADDR_VERSION;
    la->features = GW_VERBS_FEAT_WRITE_RDV | GW_VERBS_FEAT_WRITE_IMM | GW_VERBS_FEAT_STAGED | GW_VERBS_FEAT_SBATCH |
                   GW_VERBS_FEAT_SEND_IMM | GW_VERBS_FEAT_AM;
    /* test hook (not a setting): announce fewer features, as a peer built
     * before them would, so the older protocols stay tested */
    const char *tf = gw_settings_test_hook("GW_TEST_VERBS_FEATURES");
    if (tf && *tf)
        la->features &= (uint32_t)strtoul(tf, NULL, 0);
    la->link_layer = (uint8_t)vif->port.link_layer;
    la->port = (uint8_t)vif->port.port;
    la->mtu = (uint8_t)vif->pattr.active_mtu;
    la->lid = vif->pattr.lid;
    la->nqps = (uint8_t)ep->nqps;
    la->ngids = (uint8_t)vif->port.ngids;
    la->max_msg = vif->pattr.max_msg_sz ? vif->pattr.max_msg_sz : (1u << 31);
    for (int i = 0; i < ep->nqps; i++) {
        la->qpn[i] = ep->qps[i].qp->qp_num;
        la->psn[i] = ep->qps[i].psn;
    }
    memcpy(la->gids, vif->port.gids, sizeof(la->gids[0]) * (size_t)la->ngids);
    if (la->ngids)
        memcpy(la->subnet, la->gids[0].raw, 8);
    snprintf(la->dev, sizeof(la->dev), "%.31s", dev);
    size_t n = gw_verbs_addr_pack(la, addr, *addrlen);
    if (!n) {
        st = gw_err(c, GW_ERR_INVALID, "verbs address needs more than %zu bytes", *addrlen);
        goto err;
    }
    *addrlen = n;
    gw_list_push_back(&vif->eps, &ep->link);
    *out = &ep->super;
    return GW_OK;
err:
    ep_free_res(ep);
    return st;
}

static void verbs_on_fail(void *arg, gw_status_t st);

static const char *ll_name(int ll) { return ll == GW_VERBS_LL_ETH ? "RoCE" : "InfiniBand"; }

gw_status_t gw_verbs_ep_reachable(gw_tl_iface_t *iface, const gw_tl_peer_t *peer,
                                  const uint8_t *peer_addr, size_t len, char *why, size_t whylen)
{
    gw_verbs_iface_t *vif = (gw_verbs_iface_t *)iface;
    (void)peer;
    gw_verbs_addr_t pa;
    if (gw_verbs_addr_unpack(&pa, peer_addr, len) != GW_OK) {
        snprintf(why, whylen, "peer's verbs address is malformed (%zu bytes, version %u; we "
                 "speak %d)", len, len ? peer_addr[0] : 0, GW_VERBS_ADDR_VERSION);
        return GW_ERR_PROTOCOL;
    }
    if (pa.link_layer != vif->port.link_layer) {
        snprintf(why, whylen, "link layers differ: local %s:%d is %s, peer %s:%u is %s", vif->port.dev,
                 vif->port.port, ll_name(vif->port.link_layer), pa.dev, pa.port,
                 ll_name(pa.link_layer));
        return GW_ERR_UNAVAILABLE;
    }
    if (pa.link_layer == GW_VERBS_LL_ETH) {
        int oi, pi;
        char w[256];
        if (gw_verbs_gid_pair(vif->port.gids, vif->port.ngids, pa.gids, pa.ngids, &oi, &pi, w,
                              sizeof(w)) != 0) {
            /* w reads "no common GID family: local ..., peer ...": say which side is which */
            const char *me = peer && peer->is_server ? "server" : "client";
            const char *them = peer && peer->is_server ? "client" : "server";
            snprintf(why, whylen, "%s %s:%d cannot address %s %s:%u (%s; local = %s, peer = %s; "
                     "set GPUWIRE_IB_GID_INDEX to GIDs of one family)", me, vif->port.dev,
                     vif->port.port, them, pa.dev, pa.port, w, me, them);
            return GW_ERR_UNAVAILABLE;
        }
    } else {
        if (pa.lid == 0 || vif->pattr.lid == 0) {
            snprintf(why, whylen, "InfiniBand without a LID: local %s:%d lid %u, peer %s:%u lid %u "
                     "(subnet manager running?)", vif->port.dev, vif->port.port, vif->pattr.lid,
                     pa.dev, pa.port, pa.lid);
            return GW_ERR_UNAVAILABLE;
        }
        if (vif->port.ngids && pa.ngids && memcmp(vif->port.gids[0].raw, pa.subnet, 8) != 0) {
            snprintf(why, whylen, "different InfiniBand subnets (GID prefixes differ): local %s:%d, "
                     "peer %s:%u; routing between subnets is not supported", vif->port.dev,
                     vif->port.port, pa.dev, pa.port);
            return GW_ERR_UNAVAILABLE;
        }
    }
    return GW_OK;
}

gw_status_t gw_verbs_ep_connect(gw_tl_ep_t *e, gw_tl_peer_t *peer, const uint8_t *peer_addr,
                                size_t len)
{
    gw_verbs_ep_t *ep = (gw_verbs_ep_t *)e;
    gw_verbs_iface_t *vif = ep->vif;
    gw_core_t *c = vif->super.core;
    const gw_ibv_t *ibv = vif->ibv;
    char why[256];
    (void)peer;
    gw_status_t st = gw_verbs_ep_reachable(&vif->super, peer, peer_addr, len, why, sizeof(why));
    if (st != GW_OK)
        return gw_err(c, st, "verbs connect to %s: %s", ep->super.base->peer, why);
    gw_verbs_addr_unpack(&ep->peer, peer_addr, len);
    ep->super.base->unjudged = 1; /* the chosen transport: RC retries judge the peer (liveness.h) */
    gw_verbs_addr_t *pa = &ep->peer, *la = &ep->local;
    ep->nqps = GW_MIN(la->nqps, pa->nqps);
    ep->path_mtu = GW_MIN(la->mtu, pa->mtu);
    char lg[64] = "-", pg[64] = "-";
    if (pa->link_layer == GW_VERBS_LL_ETH) {
        gw_verbs_gid_pair(la->gids, la->ngids, pa->gids, pa->ngids, &ep->sgid_i, &ep->dgid_i, why,
                          sizeof(why));
        gw_verbs_gid_str(la->gids[ep->sgid_i].raw, lg, sizeof(lg));
        gw_verbs_gid_str(pa->gids[ep->dgid_i].raw, pg, sizeof(pg));
    }
    int rd = vif->dattr.max_qp_rd_atom > 0 ? GW_MIN(vif->dattr.max_qp_rd_atom, 128) : 1;
    int rd_dest = vif->dattr.max_qp_init_rd_atom > 0 ? GW_MIN(vif->dattr.max_qp_init_rd_atom, 128) : 1;
    for (int i = 0; i < ep->nqps; i++) {
        struct ibv_qp *qp = ep->qps[i].qp;
        struct ibv_qp_attr a;
        memset(&a, 0, sizeof(a));
        a.qp_state = IBV_QPS_RTR;
        a.path_mtu = (enum ibv_mtu)ep->path_mtu;
        a.dest_qp_num = pa->qpn[i];
        a.rq_psn = pa->psn[i];
        a.max_dest_rd_atomic = (uint8_t)rd;
        a.min_rnr_timer = 1; /* 0.01 ms */
        a.ah_attr.port_num = (uint8_t)vif->port.port;
        if (pa->link_layer == GW_VERBS_LL_ETH) {
            a.ah_attr.is_global = 1;
            memcpy(a.ah_attr.grh.dgid.raw, pa->gids[ep->dgid_i].raw, 16);
            a.ah_attr.grh.sgid_index = la->gids[ep->sgid_i].index;
            a.ah_attr.grh.hop_limit = 64;
        } else {
            a.ah_attr.dlid = pa->lid;
        }
        int rc = ibv->modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                                            IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                            IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
        if (rc)
            return gw_err(c, GW_ERR_VERBS,
                          "ibv_modify_qp(qp=0x%x, RTR) failed: %s; local %s:%d %s mtu %s gid[%d] %s "
                          "lid %u, peer %s:%u qpn 0x%x mtu %s gid[%d] %s lid %u (path mtu %s; a "
                          "GID of the wrong type or a missing route is the usual cause: set "
                          "GPUWIRE_IB_GID_INDEX)",
                          qp->qp_num, strerror(rc), vif->port.dev, vif->port.port,
                          ll_name(la->link_layer), mtu_str(la->mtu),
                          ep->sgid_i >= 0 ? la->gids[ep->sgid_i].index : -1, lg, la->lid, pa->dev,
                          pa->port, pa->qpn[i], mtu_str(pa->mtu),
                          ep->dgid_i >= 0 ? pa->gids[ep->dgid_i].index : -1, pg, pa->lid,
                          mtu_str(ep->path_mtu));
        memset(&a, 0, sizeof(a));
        a.qp_state = IBV_QPS_RTS;
        a.timeout = vif->timeout;
        a.retry_cnt = vif->retry_cnt;
        a.rnr_retry = 7; /* receive buffers are reposted promptly: wait as long as it takes */
        a.sq_psn = la->psn[i];
        a.max_rd_atomic = (uint8_t)rd_dest;
        rc = ibv->modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                        IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
        if (rc)
            return gw_err(c, GW_ERR_VERBS, "ibv_modify_qp(qp=0x%x, RTS, timeout %u, retry %u) "
                          "failed: %s", qp->qp_num, vif->timeout, vif->retry_cnt, strerror(rc));
    }
    ep->connected = 1;
    ep->super.base->on_fail = verbs_on_fail;
    ep->super.base->on_fail_arg = ep;
    gw_log(GW_LOG_DEBUG, "verbs: connected %s:%d -> %s:%u, %d QPs, path mtu %s, gid %s -> %s",
           vif->port.dev, vif->port.port, pa->dev, pa->port, ep->nqps, mtu_str(ep->path_mtu), lg, pg);
    return GW_OK;
}

gw_status_t gw_verbs_ep_close(gw_tl_ep_t *e)
{
    (void)e; /* nothing to tell the peer over verbs: the api layer closes the bootstrap socket */
    return GW_OK;
}

void gw_verbs_ep_destroy(gw_tl_ep_t *e)
{
    if (!e)
        return;
    gw_verbs_ep_t *ep = (gw_verbs_ep_t *)e;
    if (ep->connected) { /* the generic endpoint is still there (it is not before connect) */
        /* what is still in flight ends now (receives mid-rendezvous are
         * held by nobody else) */
        if (!vep_failed(ep))
            gw_ep_fail(ep->super.base, GW_ERR_CANCELED, "endpoint closed"); /* (what the api layer says next) */
        if (ep->super.base->on_fail_arg == ep)
            ep->super.base->on_fail = NULL;
    }
    gw_list_del(&ep->link);
    ep_free_res(ep);
}

static void appendf(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void appendf(char *buf, size_t len, const char *fmt, ...)
{
    size_t u = strlen(buf);
    if (u >= len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + u, len - u, fmt, ap);
    va_end(ap);
}

gw_status_t gw_verbs_ep_describe(gw_tl_ep_t *e, char *buf, size_t len)
{
    gw_verbs_ep_t *ep = (gw_verbs_ep_t *)e;
    gw_verbs_iface_t *vif = ep->vif;
    if (ep->local.link_layer == GW_VERBS_LL_ETH && ep->sgid_i >= 0) {
        char lg[64], pg[64];
        gw_verbs_gid_str(ep->local.gids[ep->sgid_i].raw, lg, sizeof(lg));
        gw_verbs_gid_str(ep->peer.gids[ep->dgid_i].raw, pg, sizeof(pg));
        snprintf(buf, len, "verbs %s:%d gid %u (%s) -> %s gid %u (%s), RoCE v2, mtu %s, %d QPs",
                 vif->port.dev, vif->port.port, ep->local.gids[ep->sgid_i].index, lg, ep->peer.dev,
                 ep->peer.gids[ep->dgid_i].index, pg, mtu_str(ep->path_mtu), ep->nqps);
    } else {
        snprintf(buf, len, "verbs %s:%d lid %u -> %s lid %u, InfiniBand, mtu %s, %d QPs",
                 vif->port.dev, vif->port.port, ep->local.lid, ep->peer.dev, ep->peer.lid,
                 mtu_str(ep->path_mtu), ep->nqps);
    }
    /* (the staging rung first: the counters after it may not fit) */
    if (vif->stg_regions || ep->stg_ops || ep->stg_served)
        appendf(buf, len, "; GPU memory on the staging rung: pinned bounce buffers (%llu staged ops, %llu chunks served)",
                (unsigned long long)ep->stg_ops, (unsigned long long)ep->stg_served);
    for (int d = 0; d < GW_VERBS_STG_DEVS; d++) { /* how staged batches gather and scatter (the first engine that did) */
        const char *gp = "";
        for (int r = 0; r < 2 && !*gp; r++)
            if (vif->stg_eng[d][r])
                gp = gw_staging_gather_path(vif->stg_eng[d][r]->st);
        if (*gp) {
            appendf(buf, len, "; staged batches: %s", gp);
            break;
        }
    }
    if (ep->iov_lists)
        appendf(buf, len, "; %llu lists (rma_iov): %llu entries in %llu WRs", (unsigned long long)ep->iov_lists,
                (unsigned long long)ep->iov_entries, (unsigned long long)ep->iov_wrs);
    if (ep->wr_posted)
        appendf(buf, len, "; %llu WRs in %llu posts, %llu signalled; %llu completions in %llu polls",
                (unsigned long long)ep->wr_posted, (unsigned long long)ep->post_calls,
                (unsigned long long)ep->wr_signalled, (unsigned long long)ep->cq_wcs,
                (unsigned long long)ep->cq_polls);
    if (ep->rdv_by_write || ep->rdv_by_read)
        appendf(buf, len, "; rendezvous receives: %llu by the sender's RDMA WRITE, %llu by RDMA READ",
                (unsigned long long)ep->rdv_by_write, (unsigned long long)ep->rdv_by_read);
    if (ep->am_sent || ep->am_recv)
        appendf(buf, len, "; active messages: %llu sent, %llu received", (unsigned long long)ep->am_sent,
                (unsigned long long)ep->am_recv);
    if (ep->eager_gathered)
        appendf(buf, len, "; %llu eager sends straight from registered memory",
                (unsigned long long)ep->eager_gathered);
    if (ep->stg_nzombie || ep->stg_returned)
        appendf(buf, len, "; failed: %u bounce slots parked until its queue pairs drain, %u returned",
                ep->stg_nzombie, ep->stg_returned);
    if (ep->eager_imm) /* (last: the path has 256 bytes, the segments above are what tests read first) */
        appendf(buf, len, "; %llu eager header-less", (unsigned long long)ep->eager_imm);
    if (ep->wr_untracked) /* (puts with no api request: gw_verbs_put_direct) */
        appendf(buf, len, "; %llu untracked puts", (unsigned long long)ep->wr_untracked);
    if (ep->wr_direct) /* (tracked puts posted before their request: gw_verbs_put_direct) */
        appendf(buf, len, "; %llu direct puts", (unsigned long long)ep->wr_direct);
    if (ep->wr_covers) /* (of the signalled WRs: zero-length WRITEs completing an unsignalled tail) */
        appendf(buf, len, "; %llu covers", (unsigned long long)ep->wr_covers);
    return GW_OK;
}

/* ---- failure ------------------------------------------------------------------------ */
/* Drops every reference this endpoint holds to requests and releases their
 * resources.  Runs from verbs_on_fail, before the base fails the requests
 * on its lists: they are all still valid here. */
void gw_verbs_ep_forget_all(gw_verbs_ep_t *ep, gw_status_t st)
{
    gw_verbs_stg_forget_all(ep, 1);
    for (int qi = 0; qi < ep->nqps; qi++) {
        gw_verbs_qp_t *q = &ep->qps[qi];
        for (uint64_t s = q->tail; s != q->head; s++) {
            gw_verbs_wr_t *r = gw_verbs_ring_at(q, s);
            if (r->req && (r->req->tl_flags & TLF_IOV))
                r->req->length = r->req->done; /* a list: the bytes its retired WRs moved */
            if (r->req)
                gw_verbs_req_release(ep, r->req);
            r->req = NULL;
        }
    }
    gw_list_t *p, *t;
    gw_list_for_each_safe(p, t, &ep->pending) {
        gw_request_t *req = gw_container_of(p, gw_request_t, tl_link);
        if (req->tl_flags & TLF_IOV)
            req->length = req->done;
        gw_verbs_req_release(ep, req);
    }
    gw_list_init(&ep->pending);
    gw_verbs_am_forget(ep);
    /* rendezvous receives belong to nobody else: fail them here */
    gw_list_for_each_safe(p, t, &ep->rdv_recvs) {
        gw_request_t *req = gw_container_of(p, gw_request_t, tl_link);
        gw_verbs_req_release(ep, req);
        gw_verbs_rdv_recv_forget(ep, req);
        gw_ep_recv_done(ep->super.base, req, (size_t)verbs_rq(req)->rdv.mlen, req->rtag, st);
    }
    gw_op_table_clear(&ep->rdv);
}

/* A dead endpoint's QPs go to the error state and get one marker WR on their
 * send queues; every earlier WR (the READs into and WRITEs from bounce
 * slots) is flushed before its marker completes, and a QP in the error state
 * executes no incoming request, so once all markers are back the NIC touches
 * none of our slots any more and those parked at the failure
 * (stg_slot_drop_or_park) return to their engine, without waiting for the
 * application to close the endpoint: a failed endpoint left open held the
 * slots every other staged transfer of the context needs, and those waited
 * for ever (verbs_gpu_staged reproduced it).  No marker goes on the receive
 * queues: rxe in Linux 6.1 does not flush them, so it would never return.
 * Where a step fails, the slots stay parked until the QPs are destroyed. */
void gw_verbs_ep_drain(gw_verbs_ep_t *ep)
{
    if (!ep->stg_nzombie)
        return; /* nothing waits for it */
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_ERR;
    int posted = 0;
    for (int qi = 0; qi < ep->nqps; qi++) {
        struct ibv_qp *qp = ep->qps[qi].qp;
        if (ep->vif->ibv->modify_qp(qp, &a, IBV_QP_STATE) != 0)
            continue;
        struct ibv_send_wr sw, *sbad;
        memset(&sw, 0, sizeof(sw));
        sw.wr_id = DRAIN_WRID | (uint64_t)qi;
        sw.opcode = IBV_WR_SEND;
        sw.send_flags = IBV_SEND_SIGNALED;
        posted += ibv_post_send(qp, &sw, &sbad) == 0;
    }
    ep->draining = posted == ep->nqps ? posted : 0;
    if (!ep->draining)
        gw_log(GW_LOG_DEBUG, "verbs %s: could not drain the failed endpoint's queue pairs; %u bounce "
               "slots stay parked until it is closed", ep->vif->port.dev, ep->stg_nzombie);
}

/* A drain marker came back (poll_cq of a dead endpoint). */
void gw_verbs_ep_drained_one(gw_verbs_ep_t *ep)
{
    if (!ep->draining || --ep->draining)
        return;
    for (unsigned i = 0; i < ep->stg_nzombie; i++)
        gw_verbs_stg_slot_drop(ep->stg_zombie[i].eng, ep->stg_zombie[i].slot);
    gw_log(GW_LOG_DEBUG, "verbs %s: failed endpoint drained, %u bounce slots returned", ep->vif->port.dev,
           ep->stg_nzombie);
    ep->stg_returned += ep->stg_nzombie;
    ep->stg_nzombie = 0;
}

/* The endpoint's teardown (base on_fail), run once by the gw_ep_fail()
 * that latches the error, whoever calls it (gw_verbs_ep_die here; the api
 * layer for a peer timeout or a closed control socket), before the base
 * fails the requests it holds. */
static void verbs_on_fail(void *arg, gw_status_t st)
{
    gw_verbs_ep_t *ep = arg;
    ep->lazy_group = NULL; /* (completed with the error by the base, like every outstanding request) */
    gw_verbs_ep_forget_all(ep, st);
    gw_verbs_ep_drain(ep);
}

void gw_verbs_ep_die(gw_verbs_ep_t *ep, gw_status_t st, const char *fmt, ...)
{
    if (vep_failed(ep))
        return;
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    gw_err(ep_core(ep), st, "%s", msg);
    gw_ep_fail(ep->super.base, st, "%s", msg); /* runs verbs_on_fail once connected */
}

void gw_verbs_ep_fail_qp(gw_verbs_ep_t *ep, struct ibv_qp *qp, const char *why)
{
    gw_verbs_ep_die(ep, GW_ERR_CONN_RESET, "verbs qp 0x%x on %s:%d: %s (the queue pair went to the error "
           "state)", qp->qp_num, ep->vif->port.dev, ep->vif->port.port, why);
}

void gw_verbs_wc_fail(gw_verbs_ep_t *ep, const struct ibv_wc *wc, const gw_verbs_wr_t *r)
{
    gw_status_t st = GW_ERR_VERBS;
    const char *hint = "";
    switch (wc->status) {
    case IBV_WC_REM_ACCESS_ERR:
        st = GW_ERR_INVALID_KEY;
        hint = "the target refused the access: its region was deregistered (key revoked), the "
               "range lies outside it, or it lacks the access flag; the target memory was not "
               "touched";
        break;
    case IBV_WC_RETRY_EXC_ERR:
        st = GW_ERR_PEER_TIMEOUT;
        hint = "no acknowledgement after GPUWIRE_IB_RETRY_CNT retries: the peer is gone or the "
               "path is broken (cable, switch, GID/route)";
        break;
    case IBV_WC_RNR_RETRY_EXC_ERR:
        st = GW_ERR_PEER_TIMEOUT;
        hint = "the peer posted no receive buffer in time (peer stalled or gone)";
        break;
    case IBV_WC_LOC_PROT_ERR:
        hint = "local protection error: the local buffer is not covered by its registration "
               "(freed or unregistered memory?)";
        break;
    case IBV_WC_LOC_LEN_ERR:
        hint = "local length error: message larger than the receive buffer";
        st = GW_ERR_PROTOCOL;
        break;
    case IBV_WC_REM_INV_REQ_ERR:
        hint = "the target rejected the request as invalid (length beyond its limit or "
               "operation not enabled)";
        break;
    case IBV_WC_REM_OP_ERR:
        hint = "the target could not complete the operation";
        break;
    case IBV_WC_WR_FLUSH_ERR:
        st = GW_ERR_CONN_RESET;
        /* the first error seen: no failed completion of ours came before it */
        hint = "the queue pair was already in error, and no failed work request of ours "
               "came before this one: the device moved it there (on Soft-RoCE, see the "
               "kernel log)";
        break;
    default:
        break;
    }
    const char *what = r ? gw_verbs_op_name(r->kind) : (wc->wr_id & RECV_WRID) ? "RECV" : "work request";
    gw_verbs_ep_die(ep, st, "verbs %s of %u bytes on qp 0x%x (%s:%d -> %s) failed: %s (status %d, vendor "
           "error 0x%x): %s", what, r ? r->len : wc->byte_len, wc->qp_num, ep->vif->port.dev,
           ep->vif->port.port, ep->peer.dev, ep->vif->ibv->wc_status_str(wc->status),
           (int)wc->status, wc->vendor_err, hint);
}
