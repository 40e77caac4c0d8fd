/* SPDX-License-Identifier: Apache-2.0 */
/* intra_ctl.c - the intra control socket: frame codec, the output byte
 * queue, fd passing (SCM_RIGHTS), incoming control messages, accepting.
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

/* The first word of a control frame: magic (8 bits), version (8), type (16). */
#define INTRA_WIRE_MAGIC 0xA9u
#define INTRA_WIRE_VERSION 1u

static void hdr_encode(uint8_t *p, const gw_intra_hdr_t *h)
{
    gw_put_u32(p, (INTRA_WIRE_MAGIC << 24) | (INTRA_WIRE_VERSION << 16) | (h->type & 0xffffu));
    gw_put_u32(p + 4, h->len);
    gw_put_u64(p + 8, h->a);
    gw_put_u64(p + 16, h->b);
    gw_put_u64(p + 24, h->c);
    gw_put_u64(p + 32, h->d);
    gw_put_u64(p + 40, h->e);
}

/* 0, or -1 when the frame's magic or version is not ours. */
static int hdr_decode(const uint8_t *p, gw_intra_hdr_t *h)
{
    uint32_t w = gw_get_u32(p);
    if ((w >> 24) != INTRA_WIRE_MAGIC || ((w >> 16) & 0xffu) != INTRA_WIRE_VERSION)
        return -1;
    h->type = w & 0xffffu;
    h->len = gw_get_u32(p + 4);
    h->a = gw_get_u64(p + 8);
    h->b = gw_get_u64(p + 16);
    h->c = gw_get_u64(p + 24);
    h->d = gw_get_u64(p + 32);
    h->e = gw_get_u64(p + 40);
    return 0;
}

static int sock_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

socklen_t intra_abstract_addr(struct sockaddr_un *sa, const char *name)
{
    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    size_t n = strlen(name);
    if (n > sizeof(sa->sun_path) - 2)
        n = sizeof(sa->sun_path) - 2;
    memcpy(sa->sun_path + 1, name, n); /* sun_path[0] = 0: abstract namespace */
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

static void ep_io_update(intra_ep_t *e)
{
    if (!e->io_on)
        return;
    uint32_t want = EPOLLIN | (e->out_len > e->out_off ? EPOLLOUT : 0);
    if (want != e->io.events)
        gw_io_mod(e->super.iface->core, &e->io, want);
}

void intra_out_flush(intra_ep_t *e)
{
    while (e->fd >= 0 && e->out_off < e->out_len) {
        ssize_t n = send(e->fd, e->out + e->out_off, e->out_len - e->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            char d[128];
            snprintf(d, sizeof(d), "send() on the control socket failed: %s", strerror(errno));
            intra_ep_fail(e, GW_ERR_CONN_RESET, "intra: %s", d);
            return;
        }
        e->out_off += (size_t)n;
        e->out_sent += (uint64_t)n;
    }
    if (e->out_off == e->out_len)
        e->out_off = e->out_len = 0;
    ep_io_update(e);
}

gw_status_t intra_out_msg(intra_ep_t *e, const gw_intra_hdr_t *h, const void *payload)
{
    size_t need = e->out_len + INTRA_HDR + h->len;
    if (need > e->out_cap) {
        if (e->out_off) {
            memmove(e->out, e->out + e->out_off, e->out_len - e->out_off);
            e->out_len -= e->out_off;
            e->out_off = 0;
            need = e->out_len + INTRA_HDR + h->len;
        }
        if (need > e->out_cap) {
            size_t cap = e->out_cap ? e->out_cap : 4096;
            while (cap < need)
                cap *= 2;
            uint8_t *p = realloc(e->out, cap);
            if (!p)
                return gw_err(e->super.iface->core, GW_ERR_NOMEM, "intra: out of memory for the send queue");
            e->out = p;
            e->out_cap = cap;
        }
    }
    hdr_encode(e->out + e->out_len, h);
    if (h->len && payload)
        memcpy(e->out + e->out_len + INTRA_HDR, payload, h->len);
    e->out_len += INTRA_HDR + h->len;
    intra_out_flush(e);
    return GW_OK;
}

int intra_out_withdraw(intra_ep_t *e, gw_request_t *req)
{
    uint64_t at = intra_rq(req)->out_at;
    if (!at || e->fd < 0 || at - 1 < e->out_sent)
        return 0; /* not tracked, or some of it (all, mostly) is the socket's */
    size_t i = e->out_off + (size_t)(at - 1 - e->out_sent);
    gw_intra_hdr_t h;
    uint64_t op = intra_rq(req)->opid;
    if (i + INTRA_HDR > e->out_len || hdr_decode(e->out + i, &h) != 0 || i + INTRA_HDR + h.len > e->out_len ||
        !((h.type == GW_INTRA_M_RTS && h.d == op) || (h.type == GW_INTRA_M_EAGER && h.b == op)))
        return 0; /* (cannot be: the queue holds whole messages from out_off on) */
    size_t n = INTRA_HDR + h.len;
    memmove(e->out + i, e->out + i + n, e->out_len - i - n);
    e->out_len -= n;
    intra_rq(req)->out_at = 0;
    /* the messages queued behind it moved up */
    gw_list_t *p;
    for (p = e->sends.next; p != &e->sends; p = p->next) {
        gw_request_t *o = gw_container_of(p, gw_request_t, tl_link);
        if (intra_rq(o)->out_at > at)
            intra_rq(o)->out_at -= n;
    }
    if (e->out_off == e->out_len)
        e->out_off = e->out_len = 0;
    ep_io_update(e);
    return 1;
}

/* A message with fds attached: sent after the queue drained, at once. */
gw_status_t intra_out_msg_fds(intra_ep_t *e, const gw_intra_hdr_t *h, const int *fds, int nfd)
{
    gw_core_t *c = e->super.iface->core;
    /* drain the queue first so the fds ride with this message's bytes */
    for (int spins = 0; e->out_off < e->out_len; spins++) {
        struct pollfd pfd = {e->fd, POLLOUT, 0};
        poll(&pfd, 1, 100);
        intra_out_flush(e);
        if (e->failed || spins > 100)
            return gw_err(c, GW_ERR_CONN_RESET, "intra: control socket stuck while passing fds");
    }
    uint8_t buf[INTRA_HDR];
    hdr_encode(buf, h);
    struct iovec iov = {buf, sizeof(buf)};
    union {
        struct cmsghdr align;
        char b[CMSG_SPACE(sizeof(int) * GW_INTRA_SEGS)];
    } cm;
    memset(&cm, 0, sizeof(cm));
    struct msghdr mh = {0};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    if (nfd > 0) {
        mh.msg_control = cm.b;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfd);
        struct cmsghdr *ch = CMSG_FIRSTHDR(&mh);
        ch->cmsg_level = SOL_SOCKET;
        ch->cmsg_type = SCM_RIGHTS;
        ch->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfd);
        memcpy(CMSG_DATA(ch), fds, sizeof(int) * (size_t)nfd);
    }
    for (int tries = 0;; tries++) {
        ssize_t n = sendmsg(e->fd, &mh, MSG_NOSIGNAL);
        if (n == (ssize_t)sizeof(buf))
            return GW_OK;
        if (n < 0 && (errno == EINTR || errno == EAGAIN) && tries < 1000) {
            struct pollfd pfd = {e->fd, POLLOUT, 0};
            poll(&pfd, 1, 10);
            continue;
        }
        return gw_err(c, GW_ERR_CONN_RESET, "intra: sendmsg(SCM_RIGHTS, %d fds) failed: %s", nfd,
                      n < 0 ? strerror(errno) : "short write");
    }
}

static int take_rxfd(intra_ep_t *e)
{
    if (!e->nrxfd)
        return -1;
    int fd = e->rxfd[0];
    memmove(e->rxfd, e->rxfd + 1, sizeof(int) * (size_t)(e->nrxfd - 1));
    e->nrxfd--;
    return fd;
}

static gw_status_t on_table(intra_ep_t *e)
{
    gw_core_t *c = e->super.iface->core;
    int fd = take_rxfd(e);
    if (fd < 0)
        return gw_err(c, GW_ERR_PROTOCOL, "intra: the peer's region table arrived without its fd");
    void *p = mmap(NULL, sizeof(gw_intra_slot_t) * GW_INTRA_SLOTS, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return gw_err(c, GW_ERR_SYSTEM, "intra: mmap(peer region table) failed: %s", strerror(errno));
    e->peer_table = p;
    e->ready = 1;
    intra_retry_waiting(e);
    return GW_OK;
}

static void on_fdreq(intra_ep_t *e, const gw_intra_hdr_t *h)
{
    intra_iface_t *ifc = e->ifc;
    gw_intra_hdr_t r = {.type = GW_INTRA_M_FDREP, .a = h->a, .b = h->b};
    int fds[GW_INTRA_SEGS];
    int n = 0;
    gw_intra_slot_t *s = h->a < GW_INTRA_SLOTS ? &ifc->table[h->a] : NULL;
    if (!s || atomic_load(&s->id) != h->b || (s->kind != GW_INTRA_SLOT_VMM && s->kind != GW_INTRA_SLOT_SHM)) {
        r.d = (uint64_t)(int64_t)GW_ERR_INVALID_KEY;
    } else {
        for (uint32_t i = 0; i < s->nseg; i++)
            fds[n++] = s->seg[i].fd;
    }
    r.c = (uint64_t)n;
    intra_out_msg_fds(e, &r, fds, n);
}

static void on_fdrep(intra_ep_t *e, const gw_intra_hdr_t *h)
{
    intra_fdset_t *f = intra_fdset_find(e, (uint32_t)h->a, h->b);
    int n = (int)GW_MIN(h->c, (uint64_t)GW_INTRA_SEGS);
    int fds[GW_INTRA_SEGS];
    for (int i = 0; i < n; i++)
        fds[i] = take_rxfd(e);
    if (!f) {
        for (int i = 0; i < n; i++)
            if (fds[i] >= 0)
                close(fds[i]);
        return;
    }
    f->requested = 0;
    f->status = (gw_status_t)(int64_t)h->d;
    f->n = n;
    memcpy(f->fd, fds, sizeof(int) * (size_t)n);
    intra_retry_waiting(e);
}

static void on_rts(intra_ep_t *e, const gw_intra_hdr_t *h)
{
    gw_request_t *req = gw_ep_match_posted(e->super.base, h->a);
    if (req) {
        intra_recv_pull(e, req, h->a, h->b, h->c, h->d, h->e);
        return;
    }
    /* handle: the sender's op id, and its table slot + 1 above bit 32 */
    if (gw_ep_unexp_rndv(e->super.base, h->a, (size_t)h->b, (h->d & 0xffffffffu) | (h->e << 32), h->c) != GW_OK)
        intra_ep_send_fin(e, h->d, GW_ERR_NOMEM);
}

static void on_eager(intra_ep_t *e, const gw_intra_hdr_t *h, const uint8_t *payload)
{
    gw_request_t *req = gw_ep_match_posted(e->super.base, h->a);
    intra_ep_send_fin(e, h->b, GW_OK);
    if (req) {
        gw_ep_recv_eager(e->super.base, req, payload, h->len, h->a);
        return;
    }
    /* kept in the base's store: a later receive gets it, GPU buffers
     * included, even after the peer left */
    gw_unexp_t *u = gw_ep_unexp_eager(e->super.base, h->a, h->len);
    if (!u) {
        gw_log(GW_LOG_WARN, "intra: out of memory: dropped an unexpected message (tag 0x%" PRIx64 ")", h->a);
        return;
    }
    memcpy(u->data, payload, h->len);
    gw_ep_unexp_filled(e->super.base, u);
}

static void on_fin(intra_ep_t *e, const gw_intra_hdr_t *h)
{
    gw_list_t *p;
    gw_list_t *t_;
    gw_list_for_each_safe(p, t_, &e->sends) {
        gw_request_t *req = gw_container_of(p, gw_request_t, tl_link);
        if (intra_rq(req)->opid == h->a) {
            gw_list_del(p);
            gw_status_t st = (gw_status_t)(int64_t)h->b;
            req->length = st == GW_OK ? req->len : 0;
            gw_ep_op_done(e->super.base, req, st);
            return;
        }
    }
}

static int handle_msg(intra_ep_t *e, const gw_intra_hdr_t *h, const uint8_t *payload)
{
    gw_status_t st = GW_OK;
    switch (h->type) {
    case GW_INTRA_M_TABLE: st = on_table(e); break;
    case GW_INTRA_M_NOTIFY:
        if (h->b == 1 ? gw_ep_ncount_add(e->super.base, h->a) != 0 : gw_ep_notify_push(e->super.base, h->a) != 0)
            st = gw_err(e->super.iface->core, GW_ERR_NOMEM, "intra: out of memory for a notification");
        break;
    case GW_INTRA_M_EAGER: on_eager(e, h, payload); break;
    case GW_INTRA_M_RTS: on_rts(e, h); break;
    case GW_INTRA_M_FIN: on_fin(e, h); break;
    case GW_INTRA_M_FDREQ: on_fdreq(e, h); break;
    case GW_INTRA_M_FDREP: on_fdrep(e, h); break;
    case GW_INTRA_M_PING: {
        gw_intra_hdr_t r = {.type = GW_INTRA_M_PONG};
        st = intra_out_msg(e, &r, NULL);
        break;
    }
    case GW_INTRA_M_PONG: break; /* its arrival refreshed last_rx_ns */
    case GW_INTRA_M_AM:
        st = h->a >= GW_AM_IDS ? gw_err(e->super.iface->core, GW_ERR_PROTOCOL,
                                        "intra: active message for handler %" PRIu64 " (ids below %d)", h->a, GW_AM_IDS)
                               : gw_ep_am_deliver(e->super.base, (unsigned)h->a, payload, h->len);
        break;
    case GW_INTRA_M_RING: {
        int fd = take_rxfd(e);
        st = fd < 0 ? gw_err(e->super.iface->core, GW_ERR_PROTOCOL, "intra: the peer's ring arrived without its fd")
                    : intra_ring_on_offer(e, fd, h->a);
        break;
    }
    case GW_INTRA_M_BYE:
        /* what arrived before the goodbye completes in this progress call;
         * the endpoint fails in the next, so the caller sees both in order */
        e->bye = 1;
        e->bye_gen = e->ifc->gen;
        gw_core_signal(e->super.iface->core);
        return -1;
    default:
        st = gw_err(e->super.iface->core, GW_ERR_PROTOCOL, "intra: unknown control message type %u", h->type);
    }
    if (st != GW_OK) {
        intra_ep_fail(e, st, "intra: %s", e->super.iface->core->errbuf);
        return -1;
    }
    return 0;
}

static void ep_read(intra_ep_t *e)
{
    for (;;) {
        if (e->in_cap - e->in_len < 65536) {
            size_t cap = e->in_cap ? e->in_cap * 2 : 131072;
            uint8_t *p = realloc(e->in, cap);
            if (!p) {
                intra_ep_fail(e, GW_ERR_NOMEM, "intra: %s", "out of memory for the receive buffer");
                return;
            }
            e->in = p;
            e->in_cap = cap;
        }
        union {
            struct cmsghdr align;
            char b[CMSG_SPACE(sizeof(int) * 16)];
        } cm;
        struct iovec iov = {e->in + e->in_len, e->in_cap - e->in_len};
        struct msghdr mh = {0};
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        mh.msg_control = cm.b;
        mh.msg_controllen = sizeof(cm.b);
        ssize_t n = recvmsg(e->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            char d[128];
            snprintf(d, sizeof(d), "recvmsg() on the control socket failed: %s", strerror(errno));
            intra_ep_fail(e, GW_ERR_CONN_RESET, "intra: %s", d);
            return;
        }
        for (struct cmsghdr *ch = CMSG_FIRSTHDR(&mh); ch; ch = CMSG_NXTHDR(&mh, ch)) {
            if (ch->cmsg_level != SOL_SOCKET || ch->cmsg_type != SCM_RIGHTS)
                continue;
            int k = (int)((ch->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            int *fds = (int *)CMSG_DATA(ch);
            for (int i = 0; i < k; i++) {
                if (e->nrxfd < INTRA_MAX_RXFD)
                    e->rxfd[e->nrxfd++] = fds[i];
                else
                    close(fds[i]);
            }
        }
        if (n == 0) {
            if (!e->bye)
                intra_ep_fail(e, GW_ERR_CONN_RESET, "intra: %s", "the peer closed the control socket (exited?)");
            else if (e->io_on) {
                gw_io_del(e->super.iface->core, &e->io);
                e->io_on = 0;
            }
            return;
        }
        e->in_len += (size_t)n;
        e->super.base->last_rx_ns = gw_now_ns();
        size_t off = 0;
        while (e->in_len - off >= INTRA_HDR) {
            gw_intra_hdr_t h;
            if (hdr_decode(e->in + off, &h) != 0) {
                intra_ep_fail(e, GW_ERR_PROTOCOL, "intra: %s", "control frame with a bad magic or version");
                return;
            }
            if (h.len > GW_INTRA_EAGER_MAX) {
                intra_ep_fail(e, GW_ERR_PROTOCOL, "intra: %s", "control message longer than the eager limit");
                return;
            }
            if (e->in_len - off < INTRA_HDR + h.len)
                break;
            if (handle_msg(e, &h, e->in + off + INTRA_HDR) != 0)
                return;
            off += INTRA_HDR + h.len;
        }
        memmove(e->in, e->in + off, e->in_len - off);
        e->in_len -= off;
    }
}

static void ep_event(void *arg, uint32_t events)
{
    intra_ep_t *e = arg;
    if (intra_ep_dead(e)) {
        if (e->io_on) {
            gw_io_del(e->super.iface->core, &e->io);
            e->io_on = 0;
        }
        return;
    }
    if (events & EPOLLOUT)
        intra_out_flush(e);
    if (!e->failed && (events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
        ep_read(e);
}

static gw_status_t send_table(intra_ep_t *e)
{
    gw_intra_hdr_t h = {.type = GW_INTRA_M_TABLE};
    int fd = e->ifc->table_fd;
    return intra_out_msg_fds(e, &h, &fd, 1);
}

gw_status_t intra_ep_attach(intra_ep_t *e, int fd)
{
    gw_core_t *c = e->super.iface->core;
    e->fd = fd;
    sock_nonblock(fd);
    gw_status_t st = gw_io_add(c, &e->io, fd, EPOLLIN, ep_event, e);
    if (st != GW_OK)
        return st;
    e->io_on = 1;
    return send_table(e);
}

void intra_listen_event(void *arg, uint32_t events)
{
    intra_ep_t *e = arg;
    (void)events;
    int fd = accept4(e->lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        return;
    struct ucred cr;
    socklen_t cl = sizeof(cr);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0 || cr.pid != e->peer_pid) {
        close(fd); /* a stranger, or the reachability probe of the peer */
        return;
    }
    gw_io_del(e->super.iface->core, &e->lio);
    e->lio_on = 0;
    close(e->lfd);
    e->lfd = -1;
    if (intra_ep_attach(e, fd) != GW_OK)
        intra_ep_fail(e, GW_ERR_CONN_RESET, "intra: %s", e->super.iface->core->errbuf);
}
