/* raw_peer.h - a tcp peer written by hand, for tests and fuzz targets that
 * must control every byte after the handshake (fuzz_tcp_stream.c,
 * it_tcp_wire.c).  Depends on the library's wire formats only. */
#ifndef GW_TEST_RAW_PEER_H
#define GW_TEST_RAW_PEER_H

/* Completes the handshake on the connected socket fd as a one-stream tcp
 * client from another host (HELLO offering tcp only, then CONFIRM; no
 * stream JOIN is needed).  0 once READY came back, -1 otherwise (fd is left
 * to the caller).  Blocking reads: set SO_RCVTIMEO on fd first. */
int gwt_raw_tcp_handshake(int fd);

#endif
