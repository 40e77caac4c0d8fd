/* SPDX-License-Identifier: Apache-2.0 */
/* sock.h - socket helpers (core layer). */
#ifndef GW_CORE_SOCK_H
#define GW_CORE_SOCK_H

#include <stddef.h>
#include <sys/socket.h>

#include "gpuwire.h"

/* Parses "host:port", ":port", "[v6]:port", "port".  passive: empty host
 * means any address.  Resolves names with getaddrinfo. */
gw_status_t gw_sock_resolve(const char *addr, int passive, struct sockaddr_storage *ss,
                            socklen_t *sslen, char *why, size_t whylen);
/* "host:port" of a socket address. */
void gw_sock_addr_str(const struct sockaddr *sa, char *buf, size_t len);
int gw_sock_nonblock(int fd, int on);
/* TCP_NODELAY, buffer sizes (0: leave), keepalive with an idle time. */
void gw_sock_tune(int fd, int bufsize, long peer_timeout_ms);
/* Blocking connect bounded by timeout_ms; returns the fd (blocking mode) or -1
 * with errno set (ETIMEDOUT on timeout). */
int gw_sock_connect(const struct sockaddr_storage *ss, socklen_t sslen, int bufsize,
                    int timeout_ms);
/* Writes/reads exactly len bytes on a (possibly non-blocking) socket, waiting
 * with poll() up to timeout_ms overall; 0 on success, -1 with errno. */
int gw_sock_write_full(int fd, const void *buf, size_t len, int timeout_ms);
int gw_sock_read_full(int fd, void *buf, size_t len, int timeout_ms);

/* The tcp transport's data-path calls: send/recv/sendmsg/recvmsg, where
 * GPUWIRE_FAULT's sock.send and sock.recv rules act (core/fault.h: short
 * transfers, EAGAIN storms, a reset mid-frame, a failing call).  With no
 * rule armed each is the system call. */
ssize_t gw_sock_send(int fd, const void *buf, size_t len, int flags);
ssize_t gw_sock_recv(int fd, void *buf, size_t len, int flags);
ssize_t gw_sock_sendmsg(int fd, struct msghdr *mh, int flags);
ssize_t gw_sock_recvmsg(int fd, struct msghdr *mh, int flags);

#endif
