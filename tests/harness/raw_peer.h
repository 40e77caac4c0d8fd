/* SPDX-License-Identifier: Apache-2.0 */
/* raw_peer.h - a tcp peer written by hand, for tests and fuzz targets that
 * must control every byte after the handshake (fuzz_tcp_stream.c,
 * it_tcp_wire.c).  Depends on the library's wire formats only. */
#ifndef GW_TEST_RAW_PEER_H
#define GW_TEST_RAW_PEER_H

#include <stdint.h>

/* Completes the handshake on the connected socket fd as a one-stream tcp
 * client from another host (HELLO offering tcp only, then CONFIRM; no
 * stream JOIN is needed).  0 once READY came back, -1 otherwise (fd is left
 * to the caller).  Blocking reads: set SO_RCVTIMEO on fd first. */
int gwt_raw_tcp_handshake(int fd);
/* The same offering `streams` tcp streams; *token gets the endpoint token
 * READY carried (further streams join with it: gwt_raw_tcp_join). */
int gwt_raw_tcp_handshake_n(int fd, int streams, uint64_t *token);
/* Sends JOIN for stream idx of the endpoint `token` on the connected socket
 * fd (a new connection to the same listener).  0 or -1. */
int gwt_raw_tcp_join(int fd, uint64_t token, unsigned idx);

#endif
