/* SPDX-License-Identifier: Apache-2.0 */
/* sock.c - socket helpers. */
#include "core/sock.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fault.h"
#include "core/util.h"

gw_status_t gw_sock_resolve(const char *addr, int passive, struct sockaddr_storage *ss,
                            socklen_t *sslen, char *why, size_t whylen)
{
    char host[256] = "", port[32] = "";
    if (!addr || !*addr) {
        snprintf(why, whylen, "empty address");
        return GW_ERR_ADDRESS;
    }
    const char *colon;
    if (addr[0] == '[') {
        const char *rb = strchr(addr, ']');
        if (!rb || (rb[1] != ':' && rb[1] != '\0')) {
            snprintf(why, whylen, "cannot parse address \"%s\": expected [v6addr]:port", addr);
            return GW_ERR_ADDRESS;
        }
        snprintf(host, sizeof(host), "%.*s", (int)(rb - addr - 1), addr + 1);
        snprintf(port, sizeof(port), "%s", rb[1] ? rb + 2 : "0");
    } else if ((colon = strrchr(addr, ':')) != NULL) {
        if (strchr(addr, ':') != colon) {
            snprintf(why, whylen, "cannot parse address \"%s\": write IPv6 as [addr]:port", addr);
            return GW_ERR_ADDRESS;
        }
        snprintf(host, sizeof(host), "%.*s", (int)(colon - addr), addr);
        snprintf(port, sizeof(port), "%s", colon + 1);
    } else {
        int all_digits = 1;
        for (const char *p = addr; *p; p++)
            all_digits &= (*p >= '0' && *p <= '9');
        if (all_digits)
            snprintf(port, sizeof(port), "%s", addr);
        else {
            snprintf(host, sizeof(host), "%s", addr);
            snprintf(port, sizeof(port), "%s", passive ? "0" : "");
        }
    }
    if (!port[0]) {
        snprintf(why, whylen, "address \"%s\" has no port (expected host:port)", addr);
        return GW_ERR_ADDRESS;
    }
    char *end;
    long pn = strtol(port, &end, 10);
    if (*end || pn < 0 || pn > 65535) {
        snprintf(why, whylen, "address \"%s\": port \"%s\" is not a number from 0 to 65535", addr, port);
        return GW_ERR_ADDRESS;
    }
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = passive ? AI_PASSIVE : 0;
    if (!host[0] && !passive)
        snprintf(host, sizeof(host), "127.0.0.1");
    int rc = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
    if (rc != 0 || !res) {
        snprintf(why, whylen, "cannot resolve \"%s\": %s", host, gai_strerror(rc));
        return GW_ERR_ADDRESS;
    }
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *sslen = res->ai_addrlen;
    freeaddrinfo(res);
    return GW_OK;
}

void gw_sock_addr_str(const struct sockaddr *sa, char *buf, size_t len)
{
    char host[NI_MAXHOST], serv[NI_MAXSERV];
    socklen_t sl = sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    if (getnameinfo(sa, sl, host, sizeof(host), serv, sizeof(serv), NI_NUMERICHOST | NI_NUMERICSERV)) {
        snprintf(buf, len, "?");
        return;
    }
    if (sa->sa_family == AF_INET6)
        snprintf(buf, len, "[%s]:%s", host, serv);
    else
        snprintf(buf, len, "%s:%s", host, serv);
}

int gw_sock_nonblock(int fd, int on)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0)
        return -1;
    return fcntl(fd, F_SETFL, on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK));
}

void gw_sock_tune(int fd, int bufsize, long peer_timeout_ms)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (bufsize > 0) {
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bufsize, sizeof(bufsize));
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bufsize, sizeof(bufsize));
    }
    if (peer_timeout_ms > 0) {
        /* the kernel gives up on unacknowledged data after the peer timeout,
         * and probes idle connections so a vanished host is noticed */
        unsigned ut = (unsigned)peer_timeout_ms;
        setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ut, sizeof(ut));
        setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
        int idle = (int)GW_MAX(1, peer_timeout_ms / 3000), cnt = 3, intvl = (int)GW_MAX(1, peer_timeout_ms / 9000);
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
    }
}

static int wait_fd(int fd, short ev, uint64_t deadline_ns)
{
    for (;;) {
        uint64_t now = gw_now_ns();
        int ms = deadline_ns == UINT64_MAX ? -1 : (now >= deadline_ns ? 0 : (int)((deadline_ns - now) / 1000000 + 1));
        struct pollfd p = {.fd = fd, .events = ev};
        int r = poll(&p, 1, ms);
        if (r > 0)
            return 0;
        if (r == 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        if (errno != EINTR)
            return -1;
    }
}

int gw_sock_connect(const struct sockaddr_storage *ss, socklen_t sslen, int bufsize, int timeout_ms)
{
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    gw_sock_tune(fd, bufsize, 0);
    uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : gw_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    if (connect(fd, (const struct sockaddr *)ss, sslen) != 0) {
        if (errno != EINPROGRESS)
            goto fail;
        if (wait_fd(fd, POLLOUT, deadline) != 0)
            goto fail;
        int err = 0;
        socklen_t el = sizeof(err);
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
        if (err) {
            errno = err;
            goto fail;
        }
    }
    return fd;
fail: {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
}
}

static int full_io(int fd, void *buf, size_t len, int timeout_ms, int wr)
{
    uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : gw_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    char *p = buf;
    while (len) {
        ssize_t n = wr ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n == 0) {
            errno = ECONNRESET;
            return -1;
        }
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return -1;
        if (wait_fd(fd, wr ? POLLOUT : POLLIN, deadline) != 0)
            return -1;
    }
    return 0;
}

int gw_sock_write_full(int fd, const void *buf, size_t len, int timeout_ms)
{
    return full_io(fd, (void *)buf, len, timeout_ms, 1);
}

int gw_sock_read_full(int fd, void *buf, size_t len, int timeout_ms)
{
    return full_io(fd, buf, len, timeout_ms, 0);
}

/* ---- the data-path calls and their faults ---- */

/* Aborts the connection as a peer's crash or a middlebox would: a TCP reset
 * (connect() to AF_UNSPEC disconnects with RST), leaving the fd open and
 * unusable, as after a real reset. */
static void abort_conn(int fd)
{
    struct sockaddr sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_family = AF_UNSPEC;
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    if (connect(fd, &sa, sizeof(sa)) != 0)
        shutdown(fd, SHUT_RDWR);
}

static size_t iov_total(const struct msghdr *mh)
{
    size_t t = 0;
    for (size_t i = 0; i < (size_t)mh->msg_iovlen; i++)
        t += mh->msg_iov[i].iov_len;
    return t;
}

/* One call with at most max bytes of mh's iovecs (the caller's iovec array
 * is trimmed for the call and put back). */
static ssize_t msg_capped(int fd, struct msghdr *mh, int flags, size_t max, int wr)
{
    size_t keep_n = (size_t)mh->msg_iovlen, k = 0, acc = 0;
    while (k < keep_n && acc + mh->msg_iov[k].iov_len < max)
        acc += mh->msg_iov[k++].iov_len;
    if (k == keep_n) /* the whole message fits */
        return wr ? sendmsg(fd, mh, flags) : recvmsg(fd, mh, flags);
    size_t keep_len = mh->msg_iov[k].iov_len;
    mh->msg_iov[k].iov_len = max - acc;
    mh->msg_iovlen = k + 1;
    ssize_t r = wr ? sendmsg(fd, mh, flags) : recvmsg(fd, mh, flags);
    int e = errno;
    mh->msg_iov[k].iov_len = keep_len;
    mh->msg_iovlen = keep_n;
    errno = e;
    return r;
}

/* A fired rule on one call of len bytes: <0 with errno when the call fails,
 * else the most bytes the call may move. */
static ssize_t fault_cap(const gw_fault_t *f, int fd, size_t len, int *reset_after)
{
    *reset_after = 0;
    switch (f->act) {
    case GW_FAULT_EAGAIN:
        errno = EAGAIN;
        return -1;
    case GW_FAULT_FAIL:
        errno = f->has_arg ? (int)f->arg : EIO;
        return -1;
    case GW_FAULT_SHORT:
        return (ssize_t)GW_MIN(len, f->has_arg && f->arg > 0 ? (size_t)f->arg : 1);
    case GW_FAULT_RESET: {
        size_t b = f->has_arg ? (size_t)f->arg : len / 2;
        b = GW_MIN(b, len);
        *reset_after = 1;
        if (b == 0) {
            abort_conn(fd);
            errno = ECONNRESET;
            return -1;
        }
        return (ssize_t)b;
    }
    default:
        return (ssize_t)len;
    }
}

static ssize_t faulted(int fd, void *buf, struct msghdr *mh, size_t len, int flags, int wr, const gw_fault_t *f)
{
    int reset;
    if (mh)
        len = iov_total(mh);
    ssize_t cap = fault_cap(f, fd, len, &reset);
    if (cap < 0)
        return -1;
    ssize_t r;
    if (mh)
        r = msg_capped(fd, mh, flags, (size_t)cap, wr);
    else
        r = wr ? send(fd, buf, (size_t)cap, flags) : recv(fd, buf, (size_t)cap, flags);
    if (reset) {
        /* the bytes moved, then the connection went: the caller sees the
         * reset now (as a later call would), the peer mid-frame */
        abort_conn(fd);
        errno = ECONNRESET;
        return -1;
    }
    return r;
}

ssize_t gw_sock_send(int fd, const void *buf, size_t len, int flags)
{
    gw_fault_t f;
    if (gw_fault_at("sock.send", &f))
        return faulted(fd, (void *)buf, NULL, len, flags, 1, &f);
    return send(fd, buf, len, flags);
}

ssize_t gw_sock_recv(int fd, void *buf, size_t len, int flags)
{
    gw_fault_t f;
    if (gw_fault_at("sock.recv", &f))
        return faulted(fd, buf, NULL, len, flags, 0, &f);
    return recv(fd, buf, len, flags);
}

ssize_t gw_sock_sendmsg(int fd, struct msghdr *mh, int flags)
{
    gw_fault_t f;
    if (gw_fault_at("sock.send", &f))
        return faulted(fd, NULL, mh, 0, flags, 1, &f);
    return sendmsg(fd, mh, flags);
}

ssize_t gw_sock_recvmsg(int fd, struct msghdr *mh, int flags)
{
    gw_fault_t f;
    if (gw_fault_at("sock.recv", &f))
        return faulted(fd, NULL, mh, 0, flags, 0, &f);
    return recvmsg(fd, mh, flags);
}
