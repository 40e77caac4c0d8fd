/* SPDX-License-Identifier: Apache-2.0 */
/* verbs_am.c - active messages over verbs (tl.h am_send).
 *
 * An active message is a SEND on QP 0 from a bounce slot into one of the
 * peer's pre-posted receive buffers, as the control messages are: the
 * 40-byte header (type CT_AM, tag: the handler id, len: the payload's
 * bytes), then the message's own magic, version and a reserved zero
 * (verbs.h GW_VERBS_AM_*), then the payload, inline where it fits.  The
 * receiver checks it (gw_verbs_am_check, fuzzed) and hands the payload to
 * the handler (gw_ep_am_deliver) from its receive buffer, before that
 * buffer is posted again; a malformed message, or one for a handler the
 * context has not set, fails the endpoint with GW_ERR_PROTOCOL.
 *
 * Sending copies the payload at once: into a bounce slot when one is free,
 * nothing of the kind waits and QP 0 has room (posted then, in a chain of
 * its own), else into a queued record that the next progress pass posts,
 * after the control messages and before queued requests.  Messages of one
 * endpoint go in the order sent: a new one is queued while older ones wait,
 * and QP 0 delivers in order.  Sent only to a peer that announces
 * GW_VERBS_FEAT_AM (an older one would fail the endpoint on the unknown
 * type): else GW_ERR_UNSUPPORTED, saying so.
 */
#include "transport/verbs/verbs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct am_rec {
    gw_list_t link;
    unsigned id;
    uint32_t len;
    uint8_t data[];
} am_rec_t;

gw_status_t gw_verbs_am_check(const uint8_t *p, uint32_t bytes, unsigned *id, const uint8_t **data, uint32_t *len,
                              char *why, size_t whylen)
{
    if (bytes < GW_VERBS_AM_HDR) {
        snprintf(why, whylen, "active message of %u bytes is shorter than its %d-byte header", bytes,
                 GW_VERBS_AM_HDR);
        return GW_ERR_PROTOCOL;
    }
    uint32_t magic = gw_get_u32(p + GW_VERBS_HDR);
    uint16_t ver = gw_get_u16(p + GW_VERBS_HDR + 4), rsv = gw_get_u16(p + GW_VERBS_HDR + 6);
    uint64_t tag = gw_get_u64(p + 8), n = gw_get_u64(p + 16);
    if (p[0] != CT_AM || magic != GW_VERBS_AM_MAGIC || ver != GW_VERBS_AM_VERSION || rsv != 0) {
        snprintf(why, whylen, "active message header: type %u, magic 0x%08x, version %u, reserved %u (expected %u, "
                 "0x%08x, %u, 0)", p[0], magic, ver, rsv, CT_AM, GW_VERBS_AM_MAGIC, GW_VERBS_AM_VERSION);
        return GW_ERR_PROTOCOL;
    }
    if (n != bytes - GW_VERBS_AM_HDR || n > GW_AM_MAX || tag >= GW_AM_IDS) {
        snprintf(why, whylen, "active message for handler %llu claims %llu payload bytes and carries %u (handler "
                 "ids 0..%d, at most %d bytes)", (unsigned long long)tag, (unsigned long long)n,
                 bytes - GW_VERBS_AM_HDR, GW_AM_IDS - 1, GW_AM_MAX);
        return GW_ERR_PROTOCOL;
    }
    *id = (unsigned)tag;
    *data = p + GW_VERBS_AM_HDR;
    *len = (uint32_t)n;
    return GW_OK;
}

uint32_t gw_verbs_am_format(uint8_t *p, unsigned id, const void *data, uint32_t len)
{
    gw_verbs_hdr_fill(p, CT_AM, 0, id, len, 0, 0, 0);
    gw_put_u32(p + GW_VERBS_HDR, GW_VERBS_AM_MAGIC);
    gw_put_u16(p + GW_VERBS_HDR + 4, GW_VERBS_AM_VERSION);
    gw_put_u16(p + GW_VERBS_HDR + 6, 0);
    if (len)
        memcpy(p + GW_VERBS_AM_HDR, data, len);
    return GW_VERBS_AM_HDR + len;
}

/* Writes the message into bounce slot s and adds its SEND to the pass. */
static void am_post(gw_verbs_ep_t *ep, batch_t *b, int s, unsigned id, const void *data, uint32_t len)
{
    gw_verbs_post_sendmsg(ep, b, NULL, s, gw_verbs_am_format(slot_ptr(ep, s), id, data, len));
    ep->am_sent++;
}

gw_status_t gw_verbs_am_send(gw_tl_ep_t *e, unsigned id, const void *data, size_t len)
{
    gw_verbs_ep_t *ep = to_vep(e);
    gw_status_t st = gw_ep_am_check(ep->super.base, "verbs", id, len);
    if (st != GW_OK)
        return st;
    if (!ep->connected)
        return gw_err(ep_core(ep), GW_ERR_ENDPOINT_FAILED, "verbs active message to %s: the endpoint is not "
                      "connected", ep->super.base->peer);
    if (!(ep->local.features & ep->peer.features & GW_VERBS_FEAT_AM))
        return gw_err(ep_core(ep), GW_ERR_UNSUPPORTED, "verbs active message to %s: the peer (%s) does not "
                      "announce active messages (a gpuwire built before them)", ep->super.base->peer, ep->peer.dev);
    if (gw_list_empty(&ep->am_q) && !ep->ctrl_count) { /* nothing older waits: straight to QP 0 */
        batch_t b;
        batch_begin(ep, &b);
        int s = msg_slot(ep, &b);
        if (s >= 0) {
            am_post(ep, &b, s, id, data, (uint32_t)len);
            gw_verbs_batch_flush(ep, &b);
            ep->active_ns = 0; /* activity: stamped by the next idle progress pass */
            ep->idle_polls = 0;
            return GW_OK;
        }
    }
    am_rec_t *r = malloc(sizeof(*r) + len);
    if (!r)
        return gw_err(ep_core(ep), GW_ERR_NOMEM, "verbs active message to %s (%zu bytes): out of memory for "
                      "its queue", ep->super.base->peer, len);
    r->id = id;
    r->len = (uint32_t)len;
    if (len)
        memcpy(r->data, data, len);
    gw_list_push_back(&ep->am_q, &r->link);
    return GW_OK;
}

void gw_verbs_am_post_queued(gw_verbs_ep_t *ep, batch_t *b)
{
    while (!gw_list_empty(&ep->am_q)) {
        int s = msg_slot(ep, b);
        if (s < 0)
            return;
        am_rec_t *r = gw_container_of(ep->am_q.next, am_rec_t, link);
        gw_list_del(&r->link);
        am_post(ep, b, s, r->id, r->data, r->len);
        free(r);
    }
}

void gw_verbs_am_in(gw_verbs_ep_t *ep, const uint8_t *p, uint32_t bytes)
{
    char why[256];
    unsigned id;
    const uint8_t *data;
    uint32_t len;
    if (gw_verbs_am_check(p, bytes, &id, &data, &len, why, sizeof(why)) != GW_OK) {
        gw_verbs_ep_die(ep, GW_ERR_PROTOCOL, "verbs: %s, from %s", why, ep->peer.dev);
        return;
    }
    ep->am_recv++;
    if (gw_ep_am_deliver(ep->super.base, id, data, len) != GW_OK) {
        snprintf(why, sizeof(why), "%.*s", (int)sizeof(why) - 1, ep_core(ep)->errbuf);
        gw_verbs_ep_die(ep, GW_ERR_PROTOCOL, "%s", why);
    }
}

void gw_verbs_am_forget(gw_verbs_ep_t *ep)
{
    if (!ep->am_q.next)
        return; /* (never initialised) */
    while (!gw_list_empty(&ep->am_q)) {
        am_rec_t *r = gw_container_of(ep->am_q.next, am_rec_t, link);
        gw_list_del(&r->link);
        free(r);
    }
}
