/* SPDX-License-Identifier: Apache-2.0 */
/* tl_default.c - "unsupported" implementations for absent transport ops. */
#include "transport/base/tl.h"

#include <stdio.h>

gw_status_t gw_tl_unsupported_mem_reg(gw_tl_iface_t *iface, gw_mem_t *mem)
{
    (void)iface; (void)mem;
    return GW_ERR_UNSUPPORTED;
}
gw_status_t gw_tl_unsupported_mem_dereg(gw_tl_iface_t *iface, gw_mem_t *mem)
{
    (void)iface; (void)mem;
    return GW_ERR_UNSUPPORTED;
}
gw_status_t gw_tl_unsupported_rkey_pack(gw_tl_iface_t *iface, const gw_mem_t *mem, uint8_t *buf,
                                        size_t *len)
{
    (void)iface; (void)mem; (void)buf;
    *len = 0;
    return GW_ERR_UNSUPPORTED;
}
gw_status_t gw_tl_unsupported_ep_join(gw_tl_ep_t *ep, int fd, unsigned stream_index)
{
    (void)ep; (void)fd; (void)stream_index;
    return GW_ERR_UNSUPPORTED;
}
gw_status_t gw_tl_unsupported_op(gw_tl_ep_t *ep, gw_request_t *req)
{
    (void)ep; (void)req;
    return GW_ERR_UNSUPPORTED;
}
gw_status_t gw_tl_unsupported_rma_now(gw_tl_ep_t *ep, int op, void *buf, size_t len, const gw_mem_t *lmem,
                                      uint64_t raddr, const gw_rkey_t *rkey)
{
    (void)ep; (void)op; (void)buf; (void)len; (void)lmem; (void)raddr; (void)rkey;
    return GW_ERR_UNSUPPORTED;
}
gw_status_t gw_tl_unsupported_send_now(gw_tl_ep_t *ep, const void *buf, size_t len, uint64_t tag)
{
    (void)ep; (void)buf; (void)len; (void)tag;
    return GW_ERR_UNSUPPORTED;
}
gw_status_t gw_tl_unsupported_put_direct(gw_tl_ep_t *ep, const void *buf, size_t len, const gw_mem_t *lmem,
                                         uint64_t raddr, const gw_rkey_t *rkey, gw_tl_req_make_fn make, void *arg)
{
    (void)ep; (void)buf; (void)len; (void)lmem; (void)raddr; (void)rkey; (void)make; (void)arg;
    return GW_ERR_UNSUPPORTED;
}
int gw_tl_unsupported_ep_progress(gw_tl_ep_t *ep)
{
    (void)ep;
    return GW_ERR_UNSUPPORTED;
}
gw_status_t gw_tl_unsupported_recv_matched(gw_tl_ep_t *ep, gw_request_t *req, gw_unexp_t *msg)
{
    (void)ep; (void)req; (void)msg;
    return GW_ERR_UNSUPPORTED;
}
gw_status_t gw_tl_no_cancel(gw_tl_ep_t *ep, gw_request_t *req)
{
    (void)ep; (void)req;
    return GW_INPROGRESS;
}
gw_status_t gw_tl_unsupported_reachable(gw_tl_iface_t *iface, const gw_tl_peer_t *peer,
                                        const uint8_t *peer_addr, size_t len, char *why,
                                        size_t whylen)
{
    (void)iface; (void)peer; (void)peer_addr; (void)len; (void)why; (void)whylen;
    return GW_OK; /* no constraint known: assume reachable */
}
gw_status_t gw_tl_no_rkey_unpack(gw_tl_iface_t *iface, const uint8_t *blob, size_t len, gw_rkey_t *rk,
                                 char *why, size_t whylen)
{
    (void)blob; (void)rk;
    if (len == 0)
        return GW_OK;
    snprintf(why, whylen, "%s key part of %zu bytes: this transport's keys carry none",
             iface && iface->ops ? iface->ops->name : "transport", len);
    return GW_ERR_INVALID_KEY;
}
void gw_tl_noop_rkey_release(gw_tl_iface_t *iface, gw_rkey_t *rk)
{
    (void)iface; (void)rk;
}
gw_status_t gw_tl_unsupported_am_send(gw_tl_ep_t *ep, unsigned id, const void *data, size_t len)
{
    (void)data;
    return gw_err(ep->iface->core, GW_ERR_UNSUPPORTED, "the %s transport carries no active messages (handler %u, "
                  "%zu bytes to %s)", ep->iface->ops->name, id, len, ep->base->peer);
}
