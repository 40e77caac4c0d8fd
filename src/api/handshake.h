/* SPDX-License-Identifier: Apache-2.0 */
/* handshake.h - private to the api layer's endpoint files: ep.c (the
 * endpoint), handshake.c (the handshake of both sides) and listener.c. */
#ifndef GW_API_HANDSHAKE_H
#define GW_API_HANDSHAKE_H

#include <sys/socket.h>

#include "api/api.h"

/* ---- handshake.c ---- */
/* Client side: runs the handshake for ep over fd (connected to ss, the
 * address further tcp streams connect to) until it completes, fails or
 * GPUWIRE_CONNECT_TIMEOUT_MS passes.  Owns fd from the call on.  GW_OK: ep
 * is READY; otherwise the context's detail message says why and the caller
 * frees ep. */
gw_status_t gw_hs_connect(gw_ep_t *ep, int fd, const struct sockaddr_storage *ss, socklen_t sl, const char *addr);
/* Server side: starts the handshake of a connection l accepted (owns fd on
 * GW_OK; GW_ERR_NOMEM leaves it to the caller). */
gw_status_t gw_hs_server_start(gw_listener_t *l, int fd, const char *peer);
/* Drops l's handshakes in progress and the endpoints they made. */
void gw_hs_drop_pending(gw_listener_t *l);
/* Core poller (arg: the context): fails server handshakes past their deadline. */
int gw_hs_timeouts(void *arg);

/* ---- ep.c ---- */
gw_ep_t *gw_api_ep_new(gw_context_t *ctx, const char *peer);
/* Destroys the transport endpoint, fails what is outstanding, frees ep. */
void gw_api_ep_free(gw_ep_t *ep);
/* Keeps fd (the handshake socket) as ep's control connection: its closing
 * fails a READY endpoint. */
void gw_api_ep_keep_ctl(gw_ep_t *ep, int fd);

#endif
