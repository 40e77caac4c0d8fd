/* intra.c - the intra-host transport: CMA for host memory, CUDA IPC and copy
 * engines for GPU memory, a Unix socket for control (see intra.h). */
#include "transport/intra/intra.h"

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

#include "mem/staging.h"
#include "transport/base/batch.h"

#define INTRA_HDR 48
#define INTRA_MAX_DEV 16
#define INTRA_MAX_RXFD 64
#define INTRA_BOUNCE (4u << 20)
#define INTRA_DEREG_WAIT_MS 10000
#define INTRA_CMA_SYNC_MAX (256u << 10) /* larger CMA copies run piecewise in progress */
#define INTRA_CMA_BUDGET (4u << 20)     /* CMA bytes one progress call moves per endpoint */
#define INTRA_BLOB_LEN 64
#define INTRA_CMA_BATCH 64              /* small CMA copies queued for one system call */
#define INTRA_CMA_BATCH_MAX (64u << 10) /* largest copy that is queued */

/* ------------------------------------------------------------------------ */
/* objects                                                                  */
/* ------------------------------------------------------------------------ */
typedef struct intra_iface {
    gw_tl_iface_t super;
    pid_t pid;
    int table_fd;
    gw_intra_slot_t *table;
    gw_mem_t *slot_mem[GW_INTRA_SLOTS];
    uint32_t free_slots[GW_INTRA_SLOTS];
    uint32_t nfree;
    volatile uint64_t probe;
    int force;
    gw_list_t eps;
    int poller_on;
    const gw_cuda_t *cu; /* NULL: host memory only */
    char cuda_why[256];
    void *bounce;        /* pinned, INTRA_BOUNCE bytes, for GPU <-> peer host */
    uint64_t gen;        /* progress calls seen */
    uint64_t last_timer_ns;
    void *bdesc;         /* a free pinned descriptor buffer of GPU batches (intra_batch.c) */
    size_t bdesc_cap;
    char bkernel[200];   /* how GPU batch entries move (intra_batch.c) */
} intra_iface_t;

typedef struct intra_import {
    gw_list_t link;
    uint32_t slot;
    uint64_t id;
    uint32_t seg;
    int dev;        /* our device whose context opened it */
    int kind;
    CUdeviceptr ptr;
    size_t size;
    CUmemGenericAllocationHandle h;
} intra_import_t;

typedef struct intra_fdset { /* VMM fds received for a peer slot */
    gw_list_t link;
    uint32_t slot;
    uint64_t id;
    int n;
    int fd[GW_INTRA_SEGS];
    int requested; /* FDREQ sent, no reply yet */
    gw_status_t status;
} intra_fdset_t;

typedef struct intra_blob { /* unexpected eager payload (kept off u->data: see recv_matched) */
    gw_list_t link;
    size_t len;
    uint8_t data[];
} intra_blob_t;

typedef struct intra_cp { /* one copy in flight (kept off the request: see ep_abort) */
    CUevent ev;             /* CUDA copy; NULL for a CMA copy done piecewise in progress */
    gw_request_t *req;
    gw_intra_slot_t *slot;
    int op;
    int to_remote;          /* CMA: direction, buffer, remote address, progress */
    char *lbuf;
    uint64_t raddr;
    uint8_t *rptr;          /* the peer's shared region mapped here: memcpy instead of CMA */
    size_t len, done;
} intra_cp_t;

typedef struct intra_ep {
    gw_tl_ep_t super;
    intra_iface_t *ifc;
    gw_list_t link;
    int lfd, fd;
    int bootfd;  /* the handshake socket, adopted and held (liveness is the Unix socket's job) */
    gw_io_t lio, io;
    int lio_on, io_on;
    char lname[40];
    pid_t peer_pid;
    uint64_t peer_probe;
    char peer_name[80];
    gw_intra_slot_t *peer_table;
    int ready;   /* socket connected and peer table mapped */
    int failed;
    int bye;     /* the peer closed: fail on the next progress call */
    int connected; /* ep_connect succeeded */
    uint64_t bye_gen;
    uint64_t last_ping_ns;
    uint8_t *out;
    size_t out_len, out_off, out_cap;
    uint8_t *in;
    size_t in_len, in_cap;
    int rxfd[INTRA_MAX_RXFD];
    int nrxfd;
    gw_list_t waiting;   /* put/get/put_notify waiting for the connection or VMM fds */
    gw_list_t waiting_recv; /* receives whose pull waits likewise */
    intra_cp_t *cps;     /* CUDA copies in flight */
    size_t ncp, capcp;
    gw_list_t notifies;  /* put_notify whose data landed, waiting for older ops */
    gw_list_t sends;     /* rendezvous sends waiting for FIN */
    gw_list_t imports;
    gw_list_t fdsets;
    gw_list_t blobs;
    gw_list_t shm_maps;  /* the peer's gw_mem_alloc regions mapped here (intra_shm.c) */
    /* small CMA puts (or gets) posted back to back: one system call (cma_flush) */
    gw_request_t *cmaq[INTRA_CMA_BATCH];
    unsigned ncmaq;
    int cmaq_get;        /* the queue holds gets (process_vm_readv), else puts */
    uint64_t cma_gen;    /* ifc->gen when the last CMA copy went at once */
    uint32_t next_op;
    CUstream stream[INTRA_MAX_DEV];
    unsigned long n_cma, n_cuda, n_staged, n_shm, n_cma_batched;
    unsigned long n_kernel; /* batched copy kernel launches (intra_batch.c) */
} intra_ep_t;

/* request scratch (req->tl[]) */
enum { T_EVENT = 0, T_SLOT = 1, T_STATE = 2, T_OPID = 3, T_SRC = 4, T_SRC2 = 5 };
enum { ST_NEW = 0, ST_COPYING = 1, ST_LANDED = 2 };

#define to_ifc(i) ((intra_iface_t *)(i))
#define to_ep(e) ((intra_ep_t *)(e))

static void ep_send_fin(intra_ep_t *e, uint64_t op, gw_status_t st);
static void retry_waiting(intra_ep_t *e);
/* batched transfers: intra_batch.c, included at the end */
static void intrab_issue(intra_ep_t *e, gw_request_t *req);
static size_t intrab_cma_step(intra_ep_t *e, gw_request_t *req, size_t budget, gw_status_t *st, int *fin);
static int intrab_part_done(gw_request_t *req, gw_status_t *st);

/* ------------------------------------------------------------------------ */
/* helpers                                                                  */
/* ------------------------------------------------------------------------ */
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

static socklen_t abstract_addr(struct sockaddr_un *sa, const char *name)
{
    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    size_t n = strlen(name);
    if (n > sizeof(sa->sun_path) - 2)
        n = sizeof(sa->sun_path) - 2;
    memcpy(sa->sun_path + 1, name, n); /* sun_path[0] = 0: abstract namespace */
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

static int cma_probe(pid_t pid, uint64_t addr, char *why, size_t whylen)
{
    uint64_t v = 0;
    struct iovec l = {&v, sizeof(v)}, r = {(void *)(uintptr_t)addr, sizeof(v)};
    ssize_t n = process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (n != (ssize_t)sizeof(v)) {
        int e = errno;
        snprintf(why, whylen,
                 "process_vm_readv(pid=%d) refused: %s%s", (int)pid, n < 0 ? strerror(e) : "short read",
                 e == EPERM ? " (ptrace permission: same user needed; with Yama ptrace_scope=1 set "
                              "GPUWIRE_INTRA=force on both sides)"
                            : "");
        return -1;
    }
    if (v != GW_INTRA_MAGIC) {
        snprintf(why, whylen, "pid %d on this host is not the peer (probe word mismatch: "
                 "different pid namespace?)", (int)pid);
        return -1;
    }
    return 0;
}

/* CMA copy, whole length (loops on partial transfers). to_remote: write. */
static gw_status_t cma_copy(gw_core_t *c, pid_t pid, int to_remote, void *lbuf, uint64_t raddr,
                            size_t len)
{
    size_t done = 0;
    while (done < len) {
        struct iovec l = {(char *)lbuf + done, len - done};
        struct iovec r = {(void *)(uintptr_t)(raddr + done), len - done};
        ssize_t n = to_remote ? process_vm_writev(pid, &l, 1, &r, 1, 0)
                              : process_vm_readv(pid, &l, 1, &r, 1, 0);
        if (n <= 0) {
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0 && errno == ESRCH) /* the peer process is gone: the endpoint is, too */
                return gw_err(c, GW_ERR_CONN_RESET, "intra: %s(pid=%d): the peer process exited (%s)",
                              to_remote ? "process_vm_writev" : "process_vm_readv", (int)pid, strerror(ESRCH));
            return gw_err(c, GW_ERR_SYSTEM, "intra: %s(pid=%d, remote 0x%" PRIx64 ", %zu bytes) failed: %s",
                          to_remote ? "process_vm_writev" : "process_vm_readv", (int)pid, raddr + done,
                          len - done, n < 0 ? strerror(errno) : "no progress");
        }
        done += (size_t)n;
    }
    return GW_OK;
}

static gw_status_t cu_err(gw_core_t *c, const char *what, CUresult r)
{
    char eb[160];
    return gw_err(c, GW_ERR_CUDA, "intra: %s failed: %s", what, gw_cuda_strerror(r, eb, sizeof(eb)));
}

/* Our ordinal of the GPU with this PCI bus id, or -1. */
static int dev_by_pci(const char *pci)
{
    const gw_cuda_t *cu = gw_cuda_get(NULL, 0);
    if (!cu || !pci[0])
        return -1;
    for (int d = 0; d < cu->device_count && d < INTRA_MAX_DEV; d++) {
        char b[32];
        gw_cuda_pci_bus_id(d, b, sizeof(b));
        if (!strcmp(b, pci))
            return d;
    }
    return -1;
}

/* ------------------------------------------------------------------------ */
/* socket output: a byte queue, flushed on EPOLLOUT                         */
/* ------------------------------------------------------------------------ */
static void ep_io_update(intra_ep_t *e)
{
    if (!e->io_on)
        return;
    uint32_t want = EPOLLIN | (e->out_len > e->out_off ? EPOLLOUT : 0);
    if (want != e->io.events)
        gw_io_mod(e->super.iface->core, &e->io, want);
}

/* Ends the endpoint's work.  Requests on base->outstanding (put, get,
 * put_notify, send) belong to gw_ep_fail(); when the api layer failed the
 * endpoint itself (external), they may already be recycled, so the
 * transport's lists are dropped without touching them.  Receives being
 * pulled are the transport's alone: they are completed here.  Copies in
 * flight are waited for first, so no engine writes into a buffer whose
 * operation has completed. */
static void ep_abort(intra_ep_t *e, gw_status_t st, int external)
{
    const gw_cuda_t *cu = e->ifc->cu;
    gw_status_t err = external ? e->super.base->error : st;
    e->failed = 1;
    for (size_t i = 0; i < e->ncp; i++) {
        intra_cp_t *cp = &e->cps[i];
        if (cp->ev) {
            cu->cuEventSynchronize(cp->ev);
            cu->cuEventDestroy(cp->ev);
        }
        if (cp->slot)
            atomic_fetch_sub(&cp->slot->inflight, 1);
        if (cp->op == GW_OP_RECV)
            gw_ep_recv_done(e->super.base, cp->req, 0, cp->req->rtag, err);
    }
    e->ncp = 0;
    e->ncmaq = 0; /* outstanding in the base: gw_ep_fail completes them */
    gw_list_t *p, *t;
    gw_list_for_each_safe(p, t, &e->waiting_recv) {
        gw_list_del(p);
        gw_request_t *req = gw_container_of(p, gw_request_t, tl_link);
        gw_ep_recv_done(e->super.base, req, 0, req->rtag, err);
    }
    gw_list_init(&e->waiting);
    gw_list_init(&e->notifies);
    gw_list_init(&e->sends);
}

static void ep_fail(intra_ep_t *e, gw_status_t st, const char *fmt, const char *detail)
{
    if (e->failed)
        return;
    ep_abort(e, st, 0);
    gw_ep_fail(e->super.base, st, fmt, detail);
}

/* The api layer may fail the endpoint on its own (peer timeout, control
 * socket closed): notice before touching any list. */
static int ep_dead(intra_ep_t *e)
{
    if (!e->failed && e->super.base->error != GW_OK)
        ep_abort(e, e->super.base->error, 1);
    return e->failed;
}

static void out_flush(intra_ep_t *e)
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
            ep_fail(e, GW_ERR_CONN_RESET, "intra: %s", d);
            return;
        }
        e->out_off += (size_t)n;
    }
    if (e->out_off == e->out_len)
        e->out_off = e->out_len = 0;
    ep_io_update(e);
}

static gw_status_t out_msg(intra_ep_t *e, const gw_intra_hdr_t *h, const void *payload)
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
    out_flush(e);
    return GW_OK;
}

/* A message with fds attached: sent after the queue drained, at once. */
static gw_status_t out_msg_fds(intra_ep_t *e, const gw_intra_hdr_t *h, const int *fds, int nfd)
{
    gw_core_t *c = e->super.iface->core;
    /* drain the queue first so the fds ride with this message's bytes */
    for (int spins = 0; e->out_off < e->out_len; spins++) {
        struct pollfd pfd = {e->fd, POLLOUT, 0};
        poll(&pfd, 1, 100);
        out_flush(e);
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

/* ------------------------------------------------------------------------ */
/* CUDA side: streams, imports                                              */
/* ------------------------------------------------------------------------ */
static gw_status_t ep_stream(intra_ep_t *e, int dev, CUstream *out)
{
    gw_core_t *c = e->super.iface->core;
    char why[256];
    if (dev < 0 || dev >= INTRA_MAX_DEV)
        return gw_err(c, GW_ERR_INVALID, "intra: CUDA device %d out of range", dev);
    if (!gw_cuda_ctx_for_device(dev, why, sizeof(why)))
        return gw_err(c, GW_ERR_CUDA, "intra: %s", why);
    if (!e->stream[dev]) {
        CUresult r = e->ifc->cu->cuStreamCreate(&e->stream[dev], CU_STREAM_NON_BLOCKING);
        if (r != CUDA_SUCCESS)
            return cu_err(c, "cuStreamCreate", r);
    }
    *out = e->stream[dev];
    return GW_OK;
}

static void import_close(intra_ep_t *e, intra_import_t *im)
{
    const gw_cuda_t *cu = e->ifc->cu;
    char why[64];
    gw_cuda_ctx_for_device(im->dev, why, sizeof(why));
    if (im->kind == GW_INTRA_SLOT_IPC) {
        cu->cuIpcCloseMemHandle(im->ptr);
    } else {
        cu->cuMemUnmap(im->ptr, im->size);
        cu->cuMemAddressFree(im->ptr, im->size);
        cu->cuMemRelease(im->h);
    }
    gw_list_del(&im->link);
    free(im);
}

static intra_fdset_t *fdset_find(intra_ep_t *e, uint32_t slot, uint64_t id)
{
    gw_list_t *p;
    gw_list_t *t_;
    gw_list_for_each_safe(p, t_, &e->fdsets) {
        intra_fdset_t *f = gw_container_of(p, intra_fdset_t, link);
        if (f->slot == slot && f->id == id)
            return f;
    }
    return NULL;
}

/* Device pointer of peer slot `si` segment `sg`, opened in device dev's
 * context.  GW_INPROGRESS while the VMM fds are on their way. */
static gw_status_t import_seg(intra_ep_t *e, uint32_t si, const gw_intra_slot_t *s, uint64_t id,
                              uint32_t sg, int dev, CUdeviceptr *out)
{
    gw_core_t *c = e->super.iface->core;
    const gw_cuda_t *cu = e->ifc->cu;
    gw_list_t *p, *t;
    gw_list_for_each_safe(p, t, &e->imports) {
        intra_import_t *im = gw_container_of(p, intra_import_t, link);
        if (im->slot != si || im->seg != sg || im->dev != dev)
            continue;
        if (im->id == id) {
            *out = im->ptr;
            return GW_OK;
        }
        import_close(e, im); /* the slot was reused: stale mapping */
    }
    char why[256];
    if (!gw_cuda_ctx_for_device(dev, why, sizeof(why)))
        return gw_err(c, GW_ERR_CUDA, "intra: %s", why);
    intra_import_t *im = calloc(1, sizeof(*im));
    if (!im)
        return gw_err(c, GW_ERR_NOMEM, "intra: out of memory");
    im->slot = si;
    im->id = id;
    im->seg = sg;
    im->dev = dev;
    im->kind = (int)s->kind;
    im->size = s->seg[sg].size;
    CUresult r;
    if (s->kind == GW_INTRA_SLOT_IPC) {
        CUipcMemHandle h;
        memcpy(&h, &s->seg[sg].ipc, sizeof(h));
        r = cu->cuIpcOpenMemHandle(&im->ptr, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
        if (r != CUDA_SUCCESS) {
            free(im);
            return cu_err(c, "cuIpcOpenMemHandle(peer GPU memory)", r);
        }
    } else {
        intra_fdset_t *f = fdset_find(e, si, id);
        if (!f || f->requested) {
            if (!f) {
                f = calloc(1, sizeof(*f));
                if (!f) {
                    free(im);
                    return gw_err(c, GW_ERR_NOMEM, "intra: out of memory");
                }
                f->slot = si;
                f->id = id;
                f->requested = 1;
                gw_list_push_back(&e->fdsets, &f->link);
                gw_intra_hdr_t h = {.type = GW_INTRA_M_FDREQ, .a = si, .b = id};
                gw_status_t st = out_msg(e, &h, NULL);
                if (st != GW_OK) {
                    free(im);
                    return st;
                }
            }
            free(im);
            return GW_INPROGRESS;
        }
        if (f->status != GW_OK || sg >= (uint32_t)f->n || f->fd[sg] < 0) {
            free(im);
            return gw_err(c, f->status != GW_OK ? f->status : GW_ERR_PROTOCOL,
                          "intra: the peer could not export its VMM allocation (slot %u)", si);
        }
        if (!cu->cuMemImportFromShareableHandle) {
            free(im);
            return gw_err(c, GW_ERR_UNSUPPORTED, "intra: this CUDA driver lacks VMM import");
        }
        r = cu->cuMemImportFromShareableHandle(&im->h, (void *)(uintptr_t)f->fd[sg],
                                                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        if (r != CUDA_SUCCESS) {
            free(im);
            return cu_err(c, "cuMemImportFromShareableHandle(peer VMM fd)", r);
        }
        r = cu->cuMemAddressReserve(&im->ptr, im->size, 0, 0, 0);
        if (r == CUDA_SUCCESS) {
            r = cu->cuMemMap(im->ptr, im->size, 0, im->h, 0);
            if (r == CUDA_SUCCESS) {
                CUmemAccessDesc acc = {{CU_MEM_LOCATION_TYPE_DEVICE, dev}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
                r = cu->cuMemSetAccess(im->ptr, im->size, &acc, 1);
                if (r != CUDA_SUCCESS)
                    cu->cuMemUnmap(im->ptr, im->size);
            }
            if (r != CUDA_SUCCESS)
                cu->cuMemAddressFree(im->ptr, im->size);
        }
        if (r != CUDA_SUCCESS) {
            cu->cuMemRelease(im->h);
            free(im);
            return cu_err(c, "mapping the peer's VMM allocation (cuMemMap/cuMemSetAccess)", r);
        }
    }
    gw_list_push_back(&e->imports, &im->link);
    *out = im->ptr;
    return GW_OK;
}

/* ------------------------------------------------------------------------ */
/* the copy engine: one request's bytes between a local buffer and a peer   */
/* region; completion through finish()                                      */
/* ------------------------------------------------------------------------ */
typedef struct rdesc {
    int gpu;                   /* peer memory is GPU memory (slot) */
    uint32_t slot;             /* peer slot index (gpu, or host with a key) */
    const gw_intra_slot_t *s;  /* mapped peer slot, NULL for keyless host (send) */
    uint64_t id;
    uint64_t addr;
} rdesc_t;

static int local_dev(const gw_request_t *req)
{
    return req->lmem && req->lmem->type == GW_MEM_CUDA ? req->lmem->cuda_device : -1;
}

static gw_status_t cp_push(intra_ep_t *e, const intra_cp_t *cp)
{
    if (e->ncp == e->capcp) {
        size_t cap = e->capcp ? e->capcp * 2 : 32;
        intra_cp_t *n = realloc(e->cps, cap * sizeof(*n));
        if (!n)
            return gw_err(e->super.iface->core, GW_ERR_NOMEM, "intra: out of memory");
        e->cps = n;
        e->capcp = cap;
    }
    e->cps[e->ncp++] = *cp;
    return GW_OK;
}

/* GPU buffer <-> peer host memory, through the pinned bounce, synchronous. */
static gw_status_t staged_host(intra_ep_t *e, int to_remote, void *lbuf, int ldev, uint64_t raddr, size_t len)
{
    gw_core_t *c = e->super.iface->core;
    const gw_cuda_t *cu = e->ifc->cu;
    if (!e->ifc->bounce) {
        char why[256];
        if (!gw_cuda_ctx_for_device(ldev, why, sizeof(why)))
            return gw_err(c, GW_ERR_CUDA, "intra: %s", why);
        CUresult r = cu->cuMemHostAlloc(&e->ifc->bounce, INTRA_BOUNCE, CU_MEMHOSTALLOC_PORTABLE);
        if (r != CUDA_SUCCESS) {
            e->ifc->bounce = NULL;
            return cu_err(c, "cuMemHostAlloc(intra bounce buffer)", r);
        }
    }
    for (size_t off = 0; off < len;) {
        size_t n = GW_MIN(len - off, (size_t)INTRA_BOUNCE);
        gw_status_t st;
        if (to_remote) {
            st = gw_staging_copy_sync(c, ldev, e->ifc->bounce, (char *)lbuf + off, n);
            if (st == GW_OK)
                st = cma_copy(c, e->peer_pid, 1, e->ifc->bounce, raddr + off, n);
        } else {
            st = cma_copy(c, e->peer_pid, 0, e->ifc->bounce, raddr + off, n);
            if (st == GW_OK)
                st = gw_staging_copy_sync(c, ldev, (char *)lbuf + off, e->ifc->bounce, n);
        }
        if (st != GW_OK)
            return st;
        off += n;
    }
    e->n_staged++;
    return GW_OK;
}

/* Where [r->addr, +len) of a peer's shared region (gw_mem_alloc) is mapped
 * here.  The first use asks the peer for the region's memfd (FDREQ, as for
 * VMM allocations) and returns GW_INPROGRESS; the request is retried when
 * the reply comes.  The range is checked against what was mapped, not only
 * against the peer's table. */
static gw_status_t shm_ptr(intra_ep_t *e, const rdesc_t *r, size_t len, uint8_t **out)
{
    gw_core_t *c = e->super.iface->core;
    gw_intra_shm_t *m = gw_intra_shm_find(&e->shm_maps, r->slot, r->id);
    if (!m) {
        intra_fdset_t *f = fdset_find(e, r->slot, r->id);
        if (!f) {
            if (!(f = calloc(1, sizeof(*f))))
                return gw_err(c, GW_ERR_NOMEM, "intra: out of memory");
            f->slot = r->slot;
            f->id = r->id;
            f->requested = 1;
            gw_list_push_back(&e->fdsets, &f->link);
            gw_intra_hdr_t h = {.type = GW_INTRA_M_FDREQ, .a = r->slot, .b = r->id};
            gw_status_t st = out_msg(e, &h, NULL);
            return st != GW_OK ? st : GW_INPROGRESS;
        }
        if (f->requested)
            return GW_INPROGRESS;
        if (f->status != GW_OK || f->n < 1 || f->fd[0] < 0)
            return gw_err(c, f->status != GW_OK ? f->status : GW_ERR_PROTOCOL,
                          "intra: the peer could not share its allocated region (slot %u)", r->slot);
        gw_status_t st = gw_intra_shm_add(c, &e->shm_maps, r->slot, r->id, f->fd[0], r->s->addr, r->s->len, &m);
        for (int i = 0; i < f->n; i++) /* the mapping keeps the pages */
            if (f->fd[i] >= 0)
                close(f->fd[i]);
        gw_list_del(&f->link);
        free(f);
        if (st != GW_OK)
            return st;
    }
    if (!gw_range_inside(m->addr, m->len, r->addr, len))
        return gw_err(c, GW_ERR_OUT_OF_BOUNDS,
                      "intra: remote range [0x%" PRIx64 ", +%zu) is outside the peer's shared region [0x%" PRIx64
                      ", +%zu)", r->addr, len, m->addr, m->len);
    *out = m->base + (r->addr - m->addr);
    return GW_OK;
}

/* Starts moving len bytes.  Returns GW_OK when done synchronously,
 * GW_INPROGRESS when a CUDA copy was queued (req goes on e->inflight), an
 * error otherwise.  The caller holds the peer slot's inflight count. */
static gw_status_t copy_start(intra_ep_t *e, gw_request_t *req, int to_remote, void *lbuf, const rdesc_t *r,
                              size_t len, int *again)
{
    gw_core_t *c = e->super.iface->core;
    int ldev = local_dev(req);
    *again = 0;
    if (len == 0)
        return GW_OK;
    if (!r->gpu) {
        if (ldev < 0 && r->s && r->s->kind == GW_INTRA_SLOT_SHM) {
            uint8_t *p = NULL;
            gw_status_t st = shm_ptr(e, r, len, &p);
            if (st == GW_INPROGRESS)
                *again = 1;
            if (st != GW_OK)
                return st;
            e->n_shm++;
            if (len > INTRA_CMA_SYNC_MAX) { /* large: piecewise from progress, as CMA */
                intra_cp_t cp = {.ev = NULL, .req = req, .slot = (gw_intra_slot_t *)(uintptr_t)req->tl[T_SLOT],
                                 .op = req->op, .to_remote = to_remote, .lbuf = lbuf, .raddr = r->addr,
                                 .rptr = p, .len = len};
                if ((st = cp_push(e, &cp)) != GW_OK)
                    return st;
                req->tl[T_SLOT] = 0;
                gw_core_signal(c);
                return GW_INPROGRESS;
            }
            if (to_remote)
                memcpy(p, lbuf, len);
            else
                memcpy(lbuf, p, len);
            return GW_OK;
        }
        if (ldev < 0) {
            e->n_cma++;
            if (len <= INTRA_CMA_SYNC_MAX)
                return cma_copy(c, e->peer_pid, to_remote, lbuf, r->addr, len);
            /* large: piecewise from the progress engine, so posting never
             * blocks for long and other endpoints keep moving */
            intra_cp_t cp = {.ev = NULL, .req = req, .slot = (gw_intra_slot_t *)(uintptr_t)req->tl[T_SLOT],
                             .op = req->op, .to_remote = to_remote, .lbuf = lbuf, .raddr = r->addr, .len = len};
            gw_status_t st = cp_push(e, &cp);
            if (st != GW_OK)
                return st;
            req->tl[T_SLOT] = 0;
            gw_core_signal(c);
            return GW_INPROGRESS;
        }
        return staged_host(e, to_remote, lbuf, ldev, r->addr, len);
    }
    const gw_cuda_t *cu = e->ifc->cu;
    if (!cu)
        return gw_err(c, GW_ERR_UNSUPPORTED,
                      "intra: the peer's region is GPU memory but CUDA is unavailable in this process (%s)",
                      e->ifc->cuda_why);
    const gw_intra_slot_t *s = r->s;
    int dev = ldev >= 0 ? ldev : dev_by_pci(s->pci_bus_id);
    if (dev < 0)
        dev = 0;
    /* find the segment (allocation) holding the range; ranges crossing
     * allocations are copied piecewise on the same stream */
    CUstream stream = NULL;
    gw_status_t st = ep_stream(e, dev, &stream);
    if (st != GW_OK)
        return st;
    uint64_t ra = r->addr;
    size_t left = len;
    char *lp = lbuf;
    while (left) {
        uint32_t sg = 0;
        while (sg < s->nseg && !(ra >= s->seg[sg].base && ra < s->seg[sg].base + s->seg[sg].size))
            sg++;
        if (sg == s->nseg)
            return gw_err(c, GW_ERR_OUT_OF_BOUNDS, "intra: remote address 0x%" PRIx64 " is in no allocation of the "
                          "peer's region", ra);
        CUdeviceptr base = 0;
        st = import_seg(e, r->slot, s, r->id, sg, dev, &base);
        if (st == GW_INPROGRESS) {
            if (left != len)
                return gw_err(c, GW_ERR_UNSUPPORTED, "intra: region mixes allocation kinds");
            *again = 1;
            return GW_INPROGRESS;
        }
        if (st != GW_OK)
            return st;
        size_t n = GW_MIN(left, (size_t)(s->seg[sg].base + s->seg[sg].size - ra));
        CUdeviceptr rp = base + (ra - s->seg[sg].base);
        CUdeviceptr lptr = (CUdeviceptr)(uintptr_t)lp;
        CUresult cr = cu->cuMemcpyAsync(to_remote ? rp : lptr, to_remote ? lptr : rp, n, stream);
        if (cr != CUDA_SUCCESS)
            return cu_err(c, "cuMemcpyAsync(to/from peer GPU memory)", cr);
        ra += n;
        lp += n;
        left -= n;
    }
    CUevent ev = NULL;
    CUresult cr = cu->cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING);
    if (cr == CUDA_SUCCESS)
        cr = cu->cuEventRecord(ev, stream);
    if (cr != CUDA_SUCCESS) {
        if (ev)
            cu->cuEventDestroy(ev);
        cu->cuStreamSynchronize(stream);
        return cu_err(c, "cuEventCreate/cuEventRecord", cr);
    }
    intra_cp_t rec = {.ev = ev, .req = req, .slot = (gw_intra_slot_t *)(uintptr_t)req->tl[T_SLOT], .op = req->op};
    if (cp_push(e, &rec) != GW_OK) {
        cu->cuEventSynchronize(ev);
        cu->cuEventDestroy(ev);
        return GW_ERR_NOMEM;
    }
    req->tl[T_SLOT] = 0; /* the record owns the slot count now */
    req->tl[T_STATE] = ST_COPYING;
    e->n_cuda++;
    return GW_INPROGRESS;
}

/* Looks a peer slot up for an rkey-addressed access and counts us in. */
/* The key's intra part, copied into the request when it is posted: the
 * caller may destroy the rkey while the operation waits (T_SRC: slot | a
 * valid bit, T_SRC2: region id named by the blob, T_OPID: the key's id). */
#define RK_VALID (1ull << 63)
static gw_status_t rkey_capture(intra_ep_t *e, gw_request_t *req)
{
    gw_core_t *c = e->super.iface->core;
    const gw_rkey_t *rk = req->rkey;
    if (rk->tl_blob_len == 0)
        return gw_err(c, GW_ERR_UNSUPPORTED,
                      "intra: the remote region 0x%" PRIx64 " (+%" PRIu64 ") is not reachable through the intra-host "
                      "transport (its owner could not export it: see gw_mem_query's path there)", rk->addr, rk->len);
    req->tl[T_SRC] = 0;
    if (rk->tl_blob_len == 12) {
        req->tl[T_SRC] = RK_VALID | gw_get_u32(rk->tl_blob);
        req->tl[T_SRC2] = gw_get_u64(rk->tl_blob + 4);
    }
    req->tl[T_OPID] = rk->id;
    return GW_OK;
}

/* Looks a peer slot up for an rkey-addressed access and counts us in. */
static gw_status_t slot_enter(intra_ep_t *e, const gw_request_t *req, rdesc_t *r)
{
    gw_core_t *c = e->super.iface->core;
    if (!(req->tl[T_SRC] & RK_VALID))
        return gw_err(c, GW_ERR_INVALID_KEY, "intra: malformed remote key (bad intra part)");
    uint32_t si = (uint32_t)(req->tl[T_SRC] & 0xffffffffu);
    uint64_t id = req->tl[T_SRC2];
    if (si >= GW_INTRA_SLOTS || id != req->tl[T_OPID])
        return gw_err(c, GW_ERR_INVALID_KEY, "intra: malformed remote key (slot %u)", si);
    gw_intra_slot_t *s = &e->peer_table[si];
    if (atomic_load(&s->id) != id)
        goto revoked;
    atomic_fetch_add(&s->inflight, 1);
    if (atomic_load(&s->id) != id) {
        atomic_fetch_sub(&s->inflight, 1);
        goto revoked;
    }
    /* the owner's table has the last word, not the key (keys can be forged) */
    unsigned need = req->op == GW_OP_GET ? GW_ACCESS_REMOTE_READ : GW_ACCESS_REMOTE_WRITE;
    if (!gw_range_inside(s->addr, s->len, req->raddr, req->len)) {
        atomic_fetch_sub(&s->inflight, 1);
        return gw_err(c, GW_ERR_OUT_OF_BOUNDS,
                      "intra: remote range [0x%" PRIx64 ", +%zu) is outside the region [0x%" PRIx64 ", +%" PRIu64
                      ") its owner registered", req->raddr, req->len, s->addr, s->len);
    }
    if (!(s->access & need)) {
        atomic_fetch_sub(&s->inflight, 1);
        return gw_err(c, GW_ERR_ACCESS, "intra: the owner registered region 0x%" PRIx64 " without remote %s access",
                      s->addr, need == GW_ACCESS_REMOTE_READ ? "read" : "write");
    }
    r->gpu = s->kind != GW_INTRA_SLOT_HOST && s->kind != GW_INTRA_SLOT_SHM;
    r->slot = si;
    r->s = s;
    r->id = id;
    r->addr = req->raddr;
    return GW_OK;
revoked:
    return gw_err(c, GW_ERR_INVALID_KEY,
                  "%s: the remote region holding 0x%" PRIx64 " was deregistered by its owner",
                  req->op == GW_OP_GET ? "gw_get" : "gw_put", req->raddr);
}

static void slot_leave(intra_ep_t *e, gw_request_t *req)
{
    gw_intra_slot_t *s = (gw_intra_slot_t *)(uintptr_t)req->tl[T_SLOT];
    (void)e;
    if (s) {
        atomic_fetch_sub(&s->inflight, 1);
        req->tl[T_SLOT] = 0;
    }
}

/* ------------------------------------------------------------------------ */
/* completions                                                              */
/* ------------------------------------------------------------------------ */
static void check_notifies(intra_ep_t *e)
{
    gw_list_t *p;
    while ((p = gw_list_first(&e->notifies)) != NULL) {
        gw_request_t *req = gw_container_of(p, gw_request_t, tl_link);
        if (gw_ep_oldest_seq(e->super.base) < req->seq)
            return; /* an older put is still moving */
        gw_list_del(p);
        /* b = 1: a counted notification of id a (a batch's) */
        gw_intra_hdr_t h = {.type = GW_INTRA_M_NOTIFY, .a = req->value,
                            .b = req->op == GW_OP_BATCH && req->batch->notify == GW_NOTIFY_COUNTED};
        gw_status_t st = out_msg(e, &h, NULL);
        gw_ep_op_done(e->super.base, req, st);
    }
}

/* A put/get/put_notify's bytes are where they belong (or failed). */
static void rma_done(intra_ep_t *e, gw_request_t *req, gw_status_t st)
{
    slot_leave(e, req);
    req->length = st == GW_OK ? req->len : 0; /* (a put_notify completes later with it) */
    if ((req->op == GW_OP_PUT_NOTIFY || (req->op == GW_OP_BATCH && req->batch->notify)) && st == GW_OK) {
        req->tl[T_STATE] = ST_LANDED;
        req->length = req->len;
        /* kept in posting order, not landing order: check_notifies looks at
         * the head only, so a small later put that landed first must not
         * stand in front of an older large one */
        gw_list_t *at = &e->notifies;
        while (at->prev != &e->notifies &&
               gw_container_of(at->prev, gw_request_t, tl_link)->seq > req->seq)
            at = at->prev;
        gw_list_push_back(at, &req->tl_link);
        check_notifies(e);
        return;
    }
    req->length = st == GW_OK ? req->len : 0;
    if (GW_IS_ENDPOINT_ERROR(st) && !e->failed) { /* e.g. the peer process vanished under a copy */
        ep_fail(e, st, "intra: %s", e->super.iface->core->errbuf);
        return;
    }
    gw_ep_op_done(e->super.base, req, st);
    check_notifies(e);
}

/* A receive's pull finished: tell the sender, complete the receive. */
static void pull_done(intra_ep_t *e, gw_request_t *req, gw_status_t st)
{
    slot_leave(e, req);
    if (GW_IS_ENDPOINT_ERROR(st) && !e->failed) {
        char why[384];
        snprintf(why, sizeof(why), "%.380s", e->super.iface->core->errbuf);
        gw_ep_recv_done(e->super.base, req, 0, req->rtag, st);
        ep_fail(e, st, "intra: %s", why);
        return;
    }
    ep_send_fin(e, req->tl[T_OPID], st);
    gw_ep_recv_done(e->super.base, req, (size_t)req->tl[T_SRC2], req->rtag, st);
}

static void op_finished(intra_ep_t *e, gw_request_t *req, gw_status_t st)
{
    if (req->op == GW_OP_BATCH && !intrab_part_done(req, &st))
        return; /* another part of the batch is still moving */
    if (req->op == GW_OP_RECV)
        pull_done(e, req, st);
    else
        rma_done(e, req, st);
}

static int poll_inflight(intra_ep_t *e)
{
    int n = 0;
    size_t i = 0, budget = INTRA_CMA_BUDGET;
    while (i < e->ncp) {
        intra_cp_t *cp = &e->cps[i];
        gw_status_t st = GW_OK;
        if (!cp->ev && cp->op == GW_OP_BATCH) { /* a batch's host entries (intra_batch.c) */
            if (!budget) {
                i++;
                continue;
            }
            int fin = 0;
            budget -= intrab_cma_step(e, cp->req, budget, &st, &fin);
            if (st == GW_OK && !fin) {
                i++;
                continue;
            }
        } else if (!cp->ev) { /* piecewise CMA */
            if (!budget) {
                i++;
                continue;
            }
            size_t k = GW_MIN(budget, cp->len - cp->done);
            if (cp->rptr && cp->to_remote)
                memcpy(cp->rptr + cp->done, cp->lbuf + cp->done, k);
            else if (cp->rptr)
                memcpy(cp->lbuf + cp->done, cp->rptr + cp->done, k);
            else
                st = cma_copy(e->super.iface->core, e->peer_pid, cp->to_remote, cp->lbuf + cp->done,
                              cp->raddr + cp->done, k);
            cp->done += k;
            budget -= k;
            if (st == GW_OK && cp->done < cp->len) {
                i++;
                continue;
            }
        } else {
            CUresult r = e->ifc->cu->cuEventQuery(cp->ev);
            if (r == CUDA_ERROR_NOT_READY) {
                i++;
                continue;
            }
            e->ifc->cu->cuEventDestroy(cp->ev);
            if (r != CUDA_SUCCESS)
                st = cu_err(e->super.iface->core, "GPU copy to/from the peer (cuEventQuery)", r);
        }
        intra_cp_t done = *cp;
        e->cps[i] = e->cps[--e->ncp]; /* completion order does not matter: notifies wait on seq */
        if (done.slot)
            atomic_fetch_sub(&done.slot->inflight, 1);
        op_finished(e, done.req, st);
        n++;
        if (e->failed)
            break;
    }
    return n;
}

/* ------------------------------------------------------------------------ */
/* issuing operations                                                       */
/* ------------------------------------------------------------------------ */
/* Writes (reads) the queued small CMA copies: every request enters its
 * slot (the owner's table decides, as for a lone copy), then one
 * process_vm_writev/readv moves the lot; a copy the batch could not move is
 * redone alone for its precise error. */
static void cma_flush(intra_ep_t *e)
{
    gw_core_t *c = e->super.iface->core;
    unsigned n = e->ncmaq, k = 0;
    int get = e->cmaq_get;
    gw_request_t *q[INTRA_CMA_BATCH];
    struct iovec loc[INTRA_CMA_BATCH], rem[INTRA_CMA_BATCH];
    e->ncmaq = 0;
    for (unsigned i = 0; i < n; i++) {
        gw_request_t *req = e->cmaq[i];
        rdesc_t r;
        gw_status_t st = slot_enter(e, req, &r);
        if (st == GW_OK && r.s->kind != GW_INTRA_SLOT_HOST) { /* the slot was reused meanwhile */
            req->tl[T_SLOT] = (uint64_t)(uintptr_t)r.s;
            slot_leave(e, req);
            st = gw_err(c, GW_ERR_INVALID_KEY, "intra: the remote region holding 0x%" PRIx64 " was deregistered by "
                        "its owner", req->raddr);
        }
        if (st != GW_OK) {
            rma_done(e, req, st);
            if (e->failed)
                return;
            continue;
        }
        req->tl[T_SLOT] = (uint64_t)(uintptr_t)r.s;
        q[k] = req;
        loc[k] = (struct iovec){req->buf, req->len};
        rem[k] = (struct iovec){(void *)(uintptr_t)req->raddr, req->len};
        k++;
    }
    size_t off = 0;
    while (off < k) {
        int err = 0;
        size_t moved = gw_intra_cma_batch(e->peer_pid, !get, loc + off, rem + off, k - off, &err);
        e->n_cma += moved;
        e->n_cma_batched += moved;
        for (size_t i = 0; i < moved; i++)
            rma_done(e, q[off + i], GW_OK);
        off += moved;
        if (off < k) { /* alone, for its own verdict */
            gw_request_t *req = q[off++];
            e->n_cma++;
            rma_done(e, req, cma_copy(c, e->peer_pid, !get, req->buf, req->raddr, req->len));
        }
    }
}

/* Queues a small host-to-host copy when another went at once since the last
 * progress call (the first one keeps a lone operation's latency); the queue
 * leaves in one system call on the next progress call or when full.  1:
 * queued. */
static int cma_queue(intra_ep_t *e, gw_request_t *req)
{
    if (req->len > INTRA_CMA_BATCH_MAX || local_dev(req) >= 0 || !(req->tl[T_SRC] & RK_VALID))
        return 0;
    uint32_t si = (uint32_t)(req->tl[T_SRC] & 0xffffffffu);
    if (si >= GW_INTRA_SLOTS || e->peer_table[si].kind != GW_INTRA_SLOT_HOST)
        return 0; /* GPU, shared memory: their own paths */
    int get = req->op == GW_OP_GET;
    if (e->ncmaq && e->cmaq_get != get)
        cma_flush(e);
    if (!e->ncmaq && e->cma_gen != e->ifc->gen) {
        e->cma_gen = e->ifc->gen;
        return 0;
    }
    if (e->failed)
        return 0;
    if (!e->ncmaq)
        gw_core_signal(e->super.iface->core); /* a sleeping caller wakes to flush it */
    e->cmaq_get = get;
    e->cmaq[e->ncmaq++] = req;
    if (e->ncmaq == INTRA_CMA_BATCH)
        cma_flush(e);
    return 1;
}

/* Runs an rma request as far as it goes now. */
static void rma_issue(intra_ep_t *e, gw_request_t *req)
{
    if (cma_queue(e, req))
        return;
    rdesc_t r;
    gw_status_t st = slot_enter(e, req, &r);
    if (st != GW_OK) {
        rma_done(e, req, st);
        return;
    }
    req->tl[T_SLOT] = (uint64_t)(uintptr_t)r.s;
    int again = 0;
    st = copy_start(e, req, req->op != GW_OP_GET, req->buf, &r, req->len, &again);
    if (st == GW_INPROGRESS) {
        if (again) {
            slot_leave(e, req);
            gw_list_push_back(&e->waiting, &req->tl_link);
        }
        return;
    }
    rma_done(e, req, st);
}

/* Pulls a rendezvous message (described in req->tl[T_SRC..]) into a recv. */
static void pull_issue(intra_ep_t *e, gw_request_t *req)
{
    gw_core_t *c = e->super.iface->core;
    uint64_t slot1 = req->tl[T_SRC] >> 32;
    rdesc_t r = {0};
    size_t msg_len = (size_t)req->tl[T_SRC2];
    size_t n = GW_MIN(msg_len, req->len);
    r.addr = req->raddr; /* the sender's buffer address */
    if (slot1) {
        uint32_t si = (uint32_t)(slot1 - 1);
        gw_intra_slot_t *s = si < GW_INTRA_SLOTS ? &e->peer_table[si] : NULL;
        uint64_t id = s ? atomic_load(&s->id) : 0;
        if (!s || !id) {
            pull_done(e, req, gw_err(c, GW_ERR_PROTOCOL, "intra: rendezvous names peer slot %u, which is empty", si));
            return;
        }
        atomic_fetch_add(&s->inflight, 1);
        req->tl[T_SLOT] = (uint64_t)(uintptr_t)s;
        r.gpu = s->kind != GW_INTRA_SLOT_HOST && s->kind != GW_INTRA_SLOT_SHM;
        r.slot = si;
        r.s = s;
        r.id = id;
    }
    int again = 0;
    gw_status_t st = copy_start(e, req, 0, req->buf, &r, n, &again);
    if (st == GW_INPROGRESS) {
        if (again) {
            slot_leave(e, req);
            gw_list_push_back(&e->waiting_recv, &req->tl_link);
        }
        return;
    }
    pull_done(e, req, st);
}

static void issue(intra_ep_t *e, gw_request_t *req)
{
    if (req->op == GW_OP_BATCH)
        intrab_issue(e, req);
    else if (req->op == GW_OP_RECV)
        pull_issue(e, req);
    else if (req->op == GW_OP_SEND)
        ; /* sends wait in e->sends, never here */
    else
        rma_issue(e, req);
}

static void retry_waiting(intra_ep_t *e)
{
    if (!e->ready || e->failed)
        return;
    gw_list_t todo;
    gw_list_init(&todo);
    gw_list_t *p, *t;
    gw_list_for_each_safe(p, t, &e->waiting) {
        gw_list_del(p);
        gw_list_push_back(&todo, p);
    }
    gw_list_for_each_safe(p, t, &e->waiting_recv) {
        gw_list_del(p);
        gw_list_push_back(&todo, p);
    }
    gw_list_for_each_safe(p, t, &todo) {
        gw_list_del(p);
        issue(e, gw_container_of(p, gw_request_t, tl_link));
    }
}

static gw_status_t intra_put(gw_tl_ep_t *tep, gw_request_t *req)
{
    intra_ep_t *e = to_ep(tep);
    req->tl[T_STATE] = ST_NEW;
    gw_status_t st = rkey_capture(e, req);
    if (st != GW_OK)
        return st;
    if (!e->ready) {
        gw_list_push_back(&e->waiting, &req->tl_link);
        return GW_OK;
    }
    rma_issue(e, req);
    return GW_OK;
}

static void ep_send_fin(intra_ep_t *e, uint64_t op, gw_status_t st)
{
    gw_intra_hdr_t h = {.type = GW_INTRA_M_FIN, .a = op, .b = (uint64_t)(int64_t)st};
    out_msg(e, &h, NULL);
}

static gw_status_t intra_send(gw_tl_ep_t *tep, gw_request_t *req)
{
    intra_ep_t *e = to_ep(tep);
    gw_core_t *c = tep->iface->core;
    int gpu = req->lmem && req->lmem->type == GW_MEM_CUDA;
    if (!gpu && req->len <= GW_INTRA_EAGER_MAX) {
        /* completes on the receiver's FIN: "the peer has the message" */
        req->tl[T_OPID] = ++e->next_op;
        gw_intra_hdr_t h = {.type = GW_INTRA_M_EAGER, .len = (uint32_t)req->len, .a = req->value,
                            .b = req->tl[T_OPID]};
        gw_status_t st = out_msg(e, &h, req->buf);
        if (st != GW_OK)
            return st;
        gw_list_push_back(&e->sends, &req->tl_link);
        return GW_OK;
    }
    uint64_t slot1 = 0;
    if (gpu) {
        uintptr_t si = (uintptr_t)req->lmem->tl_reg[GW_TL_INTRA];
        if (!si)
            return gw_err(c, GW_ERR_UNSUPPORTED,
                          "gw_send: the GPU buffer's region is not registered with the intra transport (%s)",
                          req->lmem->path);
        slot1 = si; /* stored as slot+1 */
    }
    req->tl[T_OPID] = ++e->next_op;
    gw_intra_hdr_t h = {.type = GW_INTRA_M_RTS, .a = req->value, .b = req->len,
                        .c = (uint64_t)(uintptr_t)req->buf, .d = req->tl[T_OPID], .e = slot1};
    gw_status_t st = out_msg(e, &h, NULL);
    if (st != GW_OK)
        return st;
    gw_list_push_back(&e->sends, &req->tl_link);
    return GW_OK;
}

/* Sets up a receive that matched a rendezvous and pulls. */
static void recv_pull(intra_ep_t *e, gw_request_t *req, uint64_t tag, uint64_t len, uint64_t addr, uint64_t op,
                      uint64_t slot1)
{
    req->rtag = tag;
    req->raddr = addr;
    req->tl[T_OPID] = op;
    req->tl[T_SRC] = slot1 << 32;
    req->tl[T_SRC2] = len;
    req->tl[T_SLOT] = 0;
    pull_issue(e, req);
}

static gw_status_t deliver_eager(intra_ep_t *e, gw_request_t *req, const void *data, size_t len, uint64_t tag)
{
    size_t n = GW_MIN(len, req->len);
    gw_status_t st = GW_OK;
    if (n) {
        if (req->lmem && req->lmem->type == GW_MEM_CUDA)
            st = gw_staging_copy_sync(e->super.iface->core, req->lmem->cuda_device, req->buf, data, n);
        else
            memcpy(req->buf, data, n);
    }
    gw_ep_recv_done(e->super.base, req, len, tag, st);
    return GW_OK;
}

static gw_status_t intra_recv_matched(gw_tl_ep_t *tep, gw_request_t *req, gw_unexp_t *u)
{
    intra_ep_t *e = to_ep(tep);
    /* the api layer posted req on base->posted; take it back */
    if (req->flags & GW_REQF_QUEUED) {
        gw_list_del(&req->link);
        req->flags &= (uint8_t)~GW_REQF_QUEUED;
    }
    if (u->handle == 0) { /* eager, payload kept in a blob */
        intra_blob_t *b = (intra_blob_t *)(uintptr_t)u->handle2;
        gw_list_del(&b->link);
        deliver_eager(e, req, b->data, b->len, u->tag);
        free(b);
    } else {
        uint64_t op = u->handle & 0xffffffffu, slot1 = u->handle >> 32;
        recv_pull(e, req, u->tag, u->len, u->handle2, op, slot1);
    }
    free(u);
    return GW_OK;
}

/* ------------------------------------------------------------------------ */
/* incoming control messages                                                */
/* ------------------------------------------------------------------------ */
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
    retry_waiting(e);
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
    out_msg_fds(e, &r, fds, n);
}

static void on_fdrep(intra_ep_t *e, const gw_intra_hdr_t *h)
{
    intra_fdset_t *f = fdset_find(e, (uint32_t)h->a, h->b);
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
    retry_waiting(e);
}

static void on_rts(intra_ep_t *e, const gw_intra_hdr_t *h)
{
    gw_request_t *req = gw_ep_match_posted(e->super.base, h->a);
    if (req) {
        recv_pull(e, req, h->a, h->b, h->c, h->d, h->e);
        return;
    }
    gw_unexp_t *u = calloc(1, sizeof(*u));
    if (!u) {
        ep_send_fin(e, h->d, GW_ERR_NOMEM);
        return;
    }
    u->tag = h->a;
    u->len = (size_t)h->b;
    u->handle = (h->d & 0xffffffffu) | (h->e << 32);
    if (!u->handle)
        u->handle = 1u << 31; /* never 0: 0 marks eager */
    u->handle2 = h->c;
    gw_list_push_back(&e->super.base->unexpected, &u->link);
}

static void on_eager(intra_ep_t *e, const gw_intra_hdr_t *h, const uint8_t *payload)
{
    gw_request_t *req = gw_ep_match_posted(e->super.base, h->a);
    ep_send_fin(e, h->b, GW_OK);
    if (req) {
        deliver_eager(e, req, payload, h->len, h->a);
        return;
    }
    /* kept as an ordinary eager message (u->data): the api layer copies it
     * into a later receive, GPU buffers included, even after the peer left */
    gw_unexp_t *u = calloc(1, sizeof(*u));
    void *data = malloc(h->len ? h->len : 1);
    if (!u || !data) {
        free(u);
        free(data);
        gw_log(GW_LOG_WARN, "intra: out of memory: dropped an unexpected message (tag 0x%" PRIx64 ")", h->a);
        return;
    }
    memcpy(data, payload, h->len);
    u->tag = h->a;
    u->len = h->len;
    u->data = data;
    gw_list_push_back(&e->super.base->unexpected, &u->link);
}

static void on_fin(intra_ep_t *e, const gw_intra_hdr_t *h)
{
    gw_list_t *p;
    gw_list_t *t_;
    gw_list_for_each_safe(p, t_, &e->sends) {
        gw_request_t *req = gw_container_of(p, gw_request_t, tl_link);
        if (req->tl[T_OPID] == h->a) {
            gw_list_del(p);
            gw_status_t st = (gw_status_t)(int64_t)h->b;
            req->length = st == GW_OK ? req->len : 0;
            gw_ep_op_done(e->super.base, req, st);
            check_notifies(e);
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
        st = out_msg(e, &r, NULL);
        break;
    }
    case GW_INTRA_M_PONG: break; /* its arrival refreshed last_rx_ns */
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
        ep_fail(e, st, "intra: %s", e->super.iface->core->errbuf);
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
                ep_fail(e, GW_ERR_NOMEM, "intra: %s", "out of memory for the receive buffer");
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
            ep_fail(e, GW_ERR_CONN_RESET, "intra: %s", d);
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
                ep_fail(e, GW_ERR_CONN_RESET, "intra: %s", "the peer closed the control socket (exited?)");
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
                ep_fail(e, GW_ERR_PROTOCOL, "intra: %s", "control frame with a bad magic or version");
                return;
            }
            if (h.len > GW_INTRA_EAGER_MAX) {
                ep_fail(e, GW_ERR_PROTOCOL, "intra: %s", "control message longer than the eager limit");
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
    if (ep_dead(e)) {
        if (e->io_on) {
            gw_io_del(e->super.iface->core, &e->io);
            e->io_on = 0;
        }
        return;
    }
    if (events & EPOLLOUT)
        out_flush(e);
    if (!e->failed && (events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
        ep_read(e);
}

static gw_status_t send_table(intra_ep_t *e)
{
    gw_intra_hdr_t h = {.type = GW_INTRA_M_TABLE};
    int fd = e->ifc->table_fd;
    return out_msg_fds(e, &h, &fd, 1);
}

static gw_status_t ep_attach(intra_ep_t *e, int fd)
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

static void listen_event(void *arg, uint32_t events)
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
    if (ep_attach(e, fd) != GW_OK)
        ep_fail(e, GW_ERR_CONN_RESET, "intra: %s", e->super.iface->core->errbuf);
}

/* ------------------------------------------------------------------------ */
/* progress hook                                                            */
/* ------------------------------------------------------------------------ */
static int intra_poll(void *arg)
{
    intra_iface_t *ifc = arg;
    int n = 0, busy = 0;
    gw_list_t *p, *t;
    ifc->gen++;
    gw_list_for_each_safe(p, t, &ifc->eps) {
        intra_ep_t *e = gw_container_of(p, intra_ep_t, link);
        if (e->ncmaq && !ep_dead(e)) {
            n += (int)e->ncmaq;
            cma_flush(e);
        }
        if (e->ncp && !ep_dead(e))
            n += poll_inflight(e);
        if (e->bye == 1 && ifc->gen > e->bye_gen + 1 && !ep_dead(e)) {
            e->bye = 2;
            ep_fail(e, GW_ERR_CONN_RESET, "intra: %s", "the peer closed the endpoint");
            n++;
        }
        busy |= e->ncp != 0 || e->bye == 1;
    }
    uint64_t now = gw_now_ns();
    if (now - ifc->last_timer_ns >= 20000000ull) { /* peer liveness, as tcp does it */
        ifc->last_timer_ns = now;
        uint64_t limit = (uint64_t)ifc->super.core->peer_timeout_ms * 1000000ull;
        gw_list_for_each_safe(p, t, &ifc->eps) {
            intra_ep_t *e = gw_container_of(p, intra_ep_t, link);
            gw_ep_base_t *b = e->super.base;
            if (ep_dead(e) || e->bye)
                continue;
            if (!gw_ep_has_work(b) && !e->ncp) {
                b->last_rx_ns = now; /* silence without work outstanding is no sign of death */
                continue;
            }
            uint64_t idle = gw_elapsed_ns(now, b->last_rx_ns);
            if (idle > limit) {
                char why[160];
                snprintf(why, sizeof(why), "no message from the peer for %llu ms with work outstanding "
                         "(GPUWIRE_PEER_TIMEOUT_MS=%ld)", (unsigned long long)(idle / 1000000),
                         ifc->super.core->peer_timeout_ms);
                ep_fail(e, GW_ERR_PEER_TIMEOUT, "intra: %s", why);
                n++;
            } else if (idle > limit / 3 && now - e->last_ping_ns > limit / 3) {
                e->last_ping_ns = now;
                gw_intra_hdr_t ping = {.type = GW_INTRA_M_PING};
                out_msg(e, &ping, NULL);
            }
        }
    }
    if (busy)
        gw_core_signal(ifc->super.core); /* CUDA copies have no fd: keep the loop spinning */
    return n;
}

/* ------------------------------------------------------------------------ */
/* iface                                                                    */
/* ------------------------------------------------------------------------ */
static gw_status_t intra_iface_open(gw_core_t *core, gw_tl_iface_t **out, char *why, size_t whylen)
{
    const char *mode = gw_settings_str(&core->settings, GW_SET_INTRA);
    int force = 0;
    if (!strcmp(mode, "off")) {
        snprintf(why, whylen, "disabled by GPUWIRE_INTRA=off");
        return GW_ERR_UNAVAILABLE;
    } else if (!strcmp(mode, "force")) {
        force = 1;
    } else if (strcmp(mode, "auto") != 0) {
        snprintf(why, whylen, "GPUWIRE_INTRA=\"%s\": expected auto, force or off", mode);
        return GW_ERR_CONFIG;
    }
    intra_iface_t *ifc = calloc(1, sizeof(*ifc));
    if (!ifc) {
        snprintf(why, whylen, "out of memory");
        return GW_ERR_NOMEM;
    }
    gw_status_t st;
    ifc->super.core = core;
    ifc->super.id = GW_TL_INTRA;
    ifc->super.ops = &gw_tl_intra_ops;
    ifc->pid = getpid();
    ifc->force = force;
    ifc->probe = GW_INTRA_MAGIC;
    gw_list_init(&ifc->eps);
    ifc->table_fd = memfd_create("gpuwire-intra-regions", MFD_CLOEXEC);
    if (ifc->table_fd < 0) {
        snprintf(why, whylen, "memfd_create() failed: %s", strerror(errno));
        st = GW_ERR_SYSTEM;
        goto err_free;
    }
    size_t tsz = sizeof(gw_intra_slot_t) * GW_INTRA_SLOTS;
    if (ftruncate(ifc->table_fd, (off_t)tsz) != 0) {
        snprintf(why, whylen, "ftruncate(region table, %zu) failed: %s", tsz, strerror(errno));
        st = GW_ERR_SYSTEM;
        goto err_fd;
    }
    ifc->table = mmap(NULL, tsz, PROT_READ | PROT_WRITE, MAP_SHARED, ifc->table_fd, 0);
    if (ifc->table == MAP_FAILED) {
        snprintf(why, whylen, "mmap(region table) failed: %s", strerror(errno));
        st = GW_ERR_SYSTEM;
        goto err_fd;
    }
    for (uint32_t i = 0; i < GW_INTRA_SLOTS; i++)
        ifc->free_slots[i] = GW_INTRA_SLOTS - 1 - i;
    ifc->nfree = GW_INTRA_SLOTS;
    ifc->cu = gw_cuda_get(ifc->cuda_why, sizeof(ifc->cuda_why));
    if (force) {
        /* Yama ptrace_scope=1 lets only ancestors use CMA on us; force
         * opens it to every process of this user (documented in GPU.md) */
        prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    }
    st = gw_core_add_poller(core, intra_poll, ifc);
    if (st != GW_OK) {
        snprintf(why, whylen, "%s", core->errbuf);
        goto err_map;
    }
    ifc->poller_on = 1;
    *out = &ifc->super;
    return GW_OK;

err_map:
    munmap(ifc->table, tsz);
err_fd:
    close(ifc->table_fd);
err_free:
    free(ifc);
    return st;
}

static void intra_iface_close(gw_tl_iface_t *iface)
{
    intra_iface_t *ifc = to_ifc(iface);
    if (!ifc)
        return;
    if (ifc->poller_on)
        gw_core_del_poller(iface->core, intra_poll, ifc);
    if (ifc->bounce && ifc->cu)
        ifc->cu->cuMemFreeHost(ifc->bounce);
    if (ifc->bdesc && ifc->cu)
        ifc->cu->cuMemFreeHost(ifc->bdesc);
    munmap(ifc->table, sizeof(gw_intra_slot_t) * GW_INTRA_SLOTS);
    close(ifc->table_fd);
    free(ifc);
}

static gw_status_t intra_iface_describe(gw_tl_iface_t *iface, char *buf, size_t len)
{
    intra_iface_t *ifc = to_ifc(iface);
    if (!ifc->cu) {
        snprintf(buf, len, "host memory by CMA (process_vm_readv/writev); GPU memory: no (%s)%s", ifc->cuda_why,
                 ifc->force ? "; GPUWIRE_INTRA=force" : "");
        return GW_OK;
    }
    int n = ifc->cu->device_count;
    char peers[128] = "";
    size_t pl = 0;
    for (int a = 0; a < n && a < 8; a++)
        for (int b = a + 1; b < n && b < 8; b++) {
            CUdevice da, db;
            int can = 0;
            if (ifc->cu->cuDeviceGet(&da, a) == CUDA_SUCCESS && ifc->cu->cuDeviceGet(&db, b) == CUDA_SUCCESS)
                ifc->cu->cuDeviceCanAccessPeer(&can, da, db);
            if (can && pl < sizeof(peers) - 16)
                pl += (size_t)snprintf(peers + pl, sizeof(peers) - pl, "%s%d<->%d", pl ? " " : "", a, b);
        }
    snprintf(buf, len, "host memory by CMA; GPU memory by CUDA IPC + copy engines on %d GPU(s)%s%s%s", n,
             pl ? ", peer access " : "", peers, ifc->force ? "; GPUWIRE_INTRA=force" : "");
    return GW_OK;
}

/* ------------------------------------------------------------------------ */
/* memory                                                                   */
/* ------------------------------------------------------------------------ */
static void path_add(gw_mem_t *m, const char *fmt, const char *arg)
{
    size_t n = strlen(m->path);
    char tmp[400];
    snprintf(tmp, sizeof(tmp), fmt, arg);
    snprintf(m->path + n, sizeof(m->path) - n, "%sintra: %s", n ? "; " : "", tmp);
}

/* Fills the slot's segments for a GPU range: legacy IPC handles where the
 * allocation allows them, else VMM POSIX fds. */
static gw_status_t export_gpu(intra_iface_t *ifc, gw_mem_t *m, gw_intra_slot_t *s, char *why, size_t whylen)
{
    const gw_cuda_t *cu = ifc->cu;
    char eb[160];
    if (!gw_cuda_ctx_for_device(m->cuda_device, why, whylen))
        return GW_ERR_CUDA;
    uint64_t p = (uint64_t)(uintptr_t)m->addr, end = p + m->len;
    s->nseg = 0;
    while (p < end) {
        if (s->nseg == GW_INTRA_SEGS) {
            snprintf(why, whylen, "the range spans more than %d allocations", GW_INTRA_SEGS);
            return GW_ERR_UNSUPPORTED;
        }
        gw_intra_seg_t *sg = &s->seg[s->nseg];
        CUdeviceptr base = 0;
        size_t size = 0;
        CUresult r = cu->cuMemGetAddressRange(&base, &size, (CUdeviceptr)p);
        if (r != CUDA_SUCCESS) {
            snprintf(why, whylen, "cuMemGetAddressRange(0x%" PRIx64 ") failed: %s", p,
                     gw_cuda_strerror(r, eb, sizeof(eb)));
            return GW_ERR_CUDA;
        }
        sg->base = base;
        sg->size = size;
        sg->fd = -1;
        /* cuMemAlloc memory takes a legacy handle; VMM memory refuses one
         * (CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE says so too, but
         * the call itself is the authority) and is exported as an fd */
        int legacy = 1;
        if (cu->cuPointerGetAttribute(&legacy, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, (CUdeviceptr)p) !=
            CUDA_SUCCESS)
            legacy = 1;
        uint32_t kind;
        if (legacy && cu->cuIpcGetMemHandle(&sg->ipc, base) == CUDA_SUCCESS) {
            kind = GW_INTRA_SLOT_IPC;
        } else {
            CUmemGenericAllocationHandle h = 0;
            if (!cu->cuMemRetainAllocationHandle || !cu->cuMemExportToShareableHandle) {
                snprintf(why, whylen, "the allocation is not legacy-IPC capable and the driver lacks VMM export");
                return GW_ERR_UNSUPPORTED;
            }
            r = cu->cuMemRetainAllocationHandle(&h, (void *)(uintptr_t)p);
            if (r != CUDA_SUCCESS) {
                snprintf(why, whylen, "cuMemRetainAllocationHandle(0x%" PRIx64 ") failed: %s", p,
                         gw_cuda_strerror(r, eb, sizeof(eb)));
                return GW_ERR_UNSUPPORTED;
            }
            int fd = -1;
            r = cu->cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
            cu->cuMemRelease(h);
            if (r != CUDA_SUCCESS) {
                snprintf(why, whylen,
                         "cuMemExportToShareableHandle(POSIX fd) failed: %s (create the allocation with "
                         "requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)",
                         gw_cuda_strerror(r, eb, sizeof(eb)));
                return GW_ERR_UNSUPPORTED;
            }
            sg->fd = fd;
            kind = GW_INTRA_SLOT_VMM;
        }
        if (s->nseg == 0)
            s->kind = kind;
        s->nseg++;
        if (kind != s->kind) {
            snprintf(why, whylen, "the range mixes cuMemAlloc and VMM allocations");
            return GW_ERR_UNSUPPORTED;
        }
        p = base + size;
    }
    return GW_OK;
}

static void slot_release_fds(gw_intra_slot_t *s)
{
    for (uint32_t i = 0; i < s->nseg; i++)
        if (s->kind == GW_INTRA_SLOT_VMM && s->seg[i].fd >= 0) {
            close(s->seg[i].fd);
            s->seg[i].fd = -1;
        }
}

static gw_status_t intra_mem_reg(gw_tl_iface_t *iface, gw_mem_t *m)
{
    intra_iface_t *ifc = to_ifc(iface);
    int gpu = m->type == GW_MEM_CUDA;
    int remote = (m->access & (GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE)) != 0;
    if (!gpu && !remote) {
        path_add(m, "%s", "CMA (host memory)");
        return GW_OK;
    }
    if (gpu && !ifc->cu) {
        path_add(m, "unavailable (%s)", ifc->cuda_why);
        return GW_ERR_UNSUPPORTED;
    }
    if (!ifc->nfree) {
        path_add(m, "unavailable (all %s region slots in use)", "1024");
        return GW_ERR_UNSUPPORTED;
    }
    uint32_t si = ifc->free_slots[ifc->nfree - 1];
    gw_intra_slot_t *s = &ifc->table[si];
    memset((char *)s + offsetof(gw_intra_slot_t, kind), 0, sizeof(*s) - offsetof(gw_intra_slot_t, kind));
    s->addr = (uint64_t)(uintptr_t)m->addr;
    s->len = m->len;
    s->access = m->access;
    s->device = m->cuda_device;
    snprintf(s->pci_bus_id, sizeof(s->pci_bus_id), "%s", m->pci_bus_id);
    if (gpu) {
        char why[256];
        gw_status_t st = export_gpu(ifc, m, s, why, sizeof(why));
        if (st != GW_OK) {
            slot_release_fds(s);
            path_add(m, "unavailable (%s)", why);
            return GW_ERR_UNSUPPORTED;
        }
        path_add(m, "%s", s->kind == GW_INTRA_SLOT_IPC ? "CUDA IPC (legacy handle) + copy engine"
                                                       : "CUDA IPC (VMM fd over the Unix socket) + copy engine");
    } else if (m->shm_fd >= 0) { /* gw_mem_alloc: peers map it */
        s->kind = GW_INTRA_SLOT_SHM;
        s->nseg = 1;
        s->seg[0].base = s->addr;
        s->seg[0].size = s->len;
        s->seg[0].fd = m->shm_fd; /* the region's: not closed with the slot */
        path_add(m, "%s", "shared memory (local peers copy with memcpy)");
    } else {
        s->kind = GW_INTRA_SLOT_HOST;
        path_add(m, "%s", "CMA (host memory)");
    }
    ifc->nfree--;
    ifc->slot_mem[si] = m;
    atomic_store(&s->id, m->id); /* published: peers may use it from now on */
    m->tl_reg[GW_TL_INTRA] = (void *)(uintptr_t)(si + 1);
    return GW_OK;
}

static gw_status_t intra_mem_dereg(gw_tl_iface_t *iface, gw_mem_t *m)
{
    intra_iface_t *ifc = to_ifc(iface);
    uintptr_t s1 = (uintptr_t)m->tl_reg[GW_TL_INTRA];
    if (!s1)
        return GW_OK;
    uint32_t si = (uint32_t)(s1 - 1);
    gw_intra_slot_t *s = &ifc->table[si];
    atomic_store(&s->id, 0); /* revoked: new accesses fail */
    uint64_t t0 = gw_now_ns();
    while (atomic_load(&s->inflight) != 0) {
        if (gw_now_ns() - t0 > (uint64_t)INTRA_DEREG_WAIT_MS * 1000000ull) {
            gw_log(GW_LOG_WARN, "intra: gw_mem_dereg(%p): %u peer access(es) still counted after %d ms "
                   "(a peer died mid-copy?); deregistering anyway", m->addr, atomic_load(&s->inflight),
                   INTRA_DEREG_WAIT_MS);
            break;
        }
        sched_yield();
    }
    atomic_store(&s->inflight, 0);
    slot_release_fds(s);
    ifc->slot_mem[si] = NULL;
    ifc->free_slots[ifc->nfree++] = si;
    m->tl_reg[GW_TL_INTRA] = NULL;
    return GW_OK;
}

static gw_status_t intra_rkey_pack(gw_tl_iface_t *iface, const gw_mem_t *m, uint8_t *buf, size_t *len)
{
    (void)iface;
    uintptr_t s1 = (uintptr_t)m->tl_reg[GW_TL_INTRA];
    if (!s1 || *len < 12) {
        *len = 0;
        return GW_ERR_UNSUPPORTED;
    }
    gw_put_u32(buf, (uint32_t)(s1 - 1));
    gw_put_u64(buf + 4, m->id);
    *len = 12;
    return GW_OK;
}

/* ------------------------------------------------------------------------ */
/* endpoints                                                                */
/* ------------------------------------------------------------------------ */
/* Address blob: u32 version(1) u32 pid u64 probe address u64 uuid, then the
 * abstract socket name (NUL-terminated, <= 40 bytes). */
static gw_status_t intra_ep_prepare(gw_tl_iface_t *iface, gw_ep_base_t *base, gw_tl_ep_t **out, uint8_t *addr,
                                    size_t *addrlen)
{
    intra_iface_t *ifc = to_ifc(iface);
    gw_core_t *c = iface->core;
    if (*addrlen < INTRA_BLOB_LEN)
        return gw_err(c, GW_ERR_INVALID, "intra: address buffer of %zu bytes is too small", *addrlen);
    intra_ep_t *e = calloc(1, sizeof(*e));
    if (!e)
        return gw_err(c, GW_ERR_NOMEM, "intra: out of memory for an endpoint");
    e->super.iface = iface;
    e->super.base = base;
    e->ifc = ifc;
    e->fd = e->lfd = e->bootfd = -1;
    gw_list_init(&e->waiting);
    gw_list_init(&e->waiting_recv);
    gw_list_init(&e->notifies);
    gw_list_init(&e->sends);
    gw_list_init(&e->imports);
    gw_list_init(&e->fdsets);
    gw_list_init(&e->blobs);
    gw_list_init(&e->shm_maps);
    uint64_t rnd;
    gw_random_bytes(&rnd, sizeof(rnd));
    snprintf(e->lname, sizeof(e->lname), "gw-intra-%d-%016" PRIx64, (int)ifc->pid, rnd);
    e->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct sockaddr_un sa;
    socklen_t sl = abstract_addr(&sa, e->lname);
    if (e->lfd < 0 || bind(e->lfd, (struct sockaddr *)&sa, sl) != 0 || listen(e->lfd, 4) != 0) {
        gw_status_t st = gw_err(c, GW_ERR_SYSTEM, "intra: Unix socket @%s: %s", e->lname, strerror(errno));
        if (e->lfd >= 0)
            close(e->lfd);
        free(e);
        return st;
    }
    memset(addr, 0, INTRA_BLOB_LEN);
    gw_put_u32(addr, 1);
    gw_put_u32(addr + 4, (uint32_t)ifc->pid);
    gw_put_u64(addr + 8, (uint64_t)(uintptr_t)&ifc->probe);
    gw_put_u64(addr + 16, c->uuid);
    snprintf((char *)addr + 24, INTRA_BLOB_LEN - 24, "%s", e->lname);
    *addrlen = INTRA_BLOB_LEN;
    gw_list_push_back(&ifc->eps, &e->link);
    *out = &e->super;
    return GW_OK;
}

static gw_status_t parse_blob(const uint8_t *p, size_t len, pid_t *pid, uint64_t *probe, char *name, size_t nlen,
                              char *why, size_t whylen)
{
    if (len != INTRA_BLOB_LEN || gw_get_u32(p) != 1 || p[INTRA_BLOB_LEN - 1] != 0) {
        snprintf(why, whylen, "malformed intra address (%zu bytes)", len);
        return GW_ERR_PROTOCOL;
    }
    *pid = (pid_t)gw_get_u32(p + 4);
    *probe = gw_get_u64(p + 8);
    size_t nl = strnlen((const char *)p + 24, INTRA_BLOB_LEN - 24);
    if (nl >= nlen)
        nl = nlen - 1;
    memcpy(name, p + 24, nl);
    name[nl] = '\0';
    return GW_OK;
}

static gw_status_t intra_ep_reachable(gw_tl_iface_t *iface, const gw_tl_peer_t *peer, const uint8_t *blob,
                                      size_t len, char *why, size_t whylen)
{
    if (peer->host_id != iface->core->host_id) {
        snprintf(why, whylen, "the peer is on another host");
        return GW_ERR_UNAVAILABLE;
    }
    pid_t pid;
    uint64_t probe;
    char name[80];
    gw_status_t st = parse_blob(blob, len, &pid, &probe, name, sizeof(name), why, whylen);
    if (st != GW_OK)
        return st;
    if (cma_probe(pid, probe, why, whylen) != 0)
        return GW_ERR_UNAVAILABLE;
    return GW_OK;
}

static gw_status_t intra_ep_connect(gw_tl_ep_t *tep, gw_tl_peer_t *peer, const uint8_t *blob, size_t len)
{
    intra_ep_t *e = to_ep(tep);
    gw_core_t *c = tep->iface->core;
    char why[256];
    gw_status_t st = parse_blob(blob, len, &e->peer_pid, &e->peer_probe, e->peer_name, sizeof(e->peer_name), why,
                                sizeof(why));
    if (st != GW_OK)
        return gw_err(c, st, "intra: %s", why);
    if (cma_probe(e->peer_pid, e->peer_probe, why, sizeof(why)) != 0)
        return gw_err(c, GW_ERR_UNAVAILABLE, "intra: the server chose the intra-host transport but %s", why);
    /* adopt the handshake socket: a peer's orderly close then reaches us as
     * BYE after its last messages, not as an abrupt end of that socket */
    if (peer->bootstrap_fd >= 0) {
        e->bootfd = peer->bootstrap_fd;
        peer->bootstrap_fd = -1;
    }
    if (peer->is_server) {
        /* wait for the client's connection on our listener */
        st = gw_io_add(c, &e->lio, e->lfd, EPOLLIN, listen_event, e);
        if (st != GW_OK)
            return st;
        e->lio_on = 1;
        e->connected = 1;
        return GW_OK;
    }
    close(e->lfd);
    e->lfd = -1;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa;
    socklen_t sl = abstract_addr(&sa, e->peer_name);
    int rc = fd >= 0 ? connect(fd, (struct sockaddr *)&sa, sl) : -1;
    if (rc != 0 && fd >= 0 && errno == ECONNREFUSED) {
        /* The server completed the handshake (READY came) and its endpoint
         * is gone already: it was closed right after gw_accept.  The
         * connection was made; the endpoint ends as any endpoint whose peer
         * closed it, not as a refused connect. */
        close(fd);
        e->connected = 1;
        ep_fail(e, GW_ERR_CONN_RESET, "intra: %s",
                "the peer closed the endpoint before its control connection was made (closed right after accepting it)");
        return GW_OK;
    }
    if (rc != 0) {
        st = gw_err(c, GW_ERR_CONN_REFUSED, "intra: connect(@%s) failed: %s", e->peer_name, strerror(errno));
        if (fd >= 0)
            close(fd);
        return st;
    }
    e->connected = 1; /* from here on destroy cleans up through the endpoint */
    st = ep_attach(e, fd);
    if (st == GW_ERR_CONN_RESET) {
        /* The same close as above, a moment later: the server's endpoint went
         * between our connect() and the table's sendmsg (EPIPE/ECONNRESET).
         * The connection was made; the endpoint fails, the connect does not. */
        ep_fail(e, GW_ERR_CONN_RESET, "intra: %s",
                "the peer closed the endpoint while its control connection was being set up "
                "(closed right after accepting it)");
        return GW_OK;
    }
    return st;
}

static gw_status_t intra_ep_close(gw_tl_ep_t *tep)
{
    intra_ep_t *e = to_ep(tep);
    if (e->fd >= 0 && !e->failed) {
        gw_intra_hdr_t h = {.type = GW_INTRA_M_BYE};
        out_msg(e, &h, NULL);
        for (int i = 0; i < 50 && e->out_off < e->out_len && !e->failed; i++) {
            struct pollfd pfd = {e->fd, POLLOUT, 0};
            poll(&pfd, 1, 10);
            out_flush(e);
        }
    }
    return GW_OK;
}

static void intra_ep_destroy(gw_tl_ep_t *tep)
{
    intra_ep_t *e = to_ep(tep);
    if (!e)
        return;
    gw_core_t *c = tep->iface->core;
    const gw_cuda_t *cu = e->ifc->cu;
    gw_list_t *p, *t;
    /* copies in flight must land before their buffers can go.  An endpoint
     * that never connected has none, and its generic endpoint may already
     * be gone (a failed handshake frees it first): leave it alone then. */
    if (e->connected && !ep_dead(e))
        ep_abort(e, GW_ERR_CANCELED, 0);
    free(e->cps);
    gw_list_for_each_safe(p, t, &e->imports) import_close(e, gw_container_of(p, intra_import_t, link));
    gw_intra_shm_drop_all(&e->shm_maps);
    gw_list_for_each_safe(p, t, &e->fdsets) {
        intra_fdset_t *f = gw_container_of(p, intra_fdset_t, link);
        for (int i = 0; i < f->n; i++)
            if (f->fd[i] >= 0)
                close(f->fd[i]);
        gw_list_del(p);
        free(f);
    }
    gw_list_for_each_safe(p, t, &e->blobs) {
        gw_list_del(p);
        free(gw_container_of(p, intra_blob_t, link));
    }
    for (int d = 0; d < INTRA_MAX_DEV; d++)
        if (e->stream[d]) {
            char why[64];
            gw_cuda_ctx_for_device(d, why, sizeof(why));
            cu->cuStreamDestroy(e->stream[d]);
        }
    for (int i = 0; i < e->nrxfd; i++)
        close(e->rxfd[i]);
    if (e->io_on)
        gw_io_del(c, &e->io);
    if (e->lio_on)
        gw_io_del(c, &e->lio);
    if (e->fd >= 0)
        close(e->fd);
    if (e->lfd >= 0)
        close(e->lfd);
    if (e->bootfd >= 0)
        close(e->bootfd);
    if (e->peer_table)
        munmap(e->peer_table, sizeof(gw_intra_slot_t) * GW_INTRA_SLOTS);
    free(e->out);
    free(e->in);
    gw_list_del(&e->link);
    free(e);
}

static gw_status_t intra_ep_describe(gw_tl_ep_t *tep, char *buf, size_t len)
{
    intra_ep_t *e = to_ep(tep);
    /* kept short: gw_ep_info_t.path has 256 bytes */
    snprintf(buf, len,
             "intra: peer pid %d, Unix socket @%s%s; copies so far: %lu CMA, %lu shared memory, %lu copy engine, "
             "%lu staged, %lu kernel; %lu CMA copies batched; GPU batches: %s",
             (int)e->peer_pid, e->peer_name[0] ? e->peer_name : e->lname, e->ifc->cu ? "" : " (no CUDA here)",
             e->n_cma, e->n_shm, e->n_cuda, e->n_staged, e->n_kernel, e->n_cma_batched,
             e->ifc->bkernel[0] ? e->ifc->bkernel : "none yet");
    return GW_OK;
}

/* batched transfers: part of this translation unit (it uses the objects
 * above); a file of its own once the transport has a private header */
#define GW_INTRA_INTERNAL 1
#include "transport/intra/intra_batch.c"

/* the one operation entry (tl.h) */
static gw_status_t intra_submit(gw_tl_ep_t *tep, gw_request_t *req)
{
    switch (req->op) {
    case GW_OP_PUT:
    case GW_OP_GET:
    case GW_OP_PUT_NOTIFY: return intra_put(tep, req); /* (one engine: rma_issue looks at the op) */
    case GW_OP_SEND: return intra_send(tep, req);
    case GW_OP_BATCH: return intrab_batch(tep, req);
    default: return GW_ERR_UNSUPPORTED;
    }
}

static void intra_caps(gw_tl_iface_t *iface, gw_tl_caps_t *out)
{
    (void)iface;
    out->eager_max = GW_INTRA_EAGER_MAX;
    out->max_msg = UINT64_MAX;
    out->mem_kinds = GW_TL_MEM_HOST | GW_TL_MEM_CUDA;
    out->gpu_paths = GW_TL_GPU_IPC | GW_TL_GPU_STAGED;
    out->batch = GW_TL_BATCH_NATIVE | GW_TL_BATCH_GPU | GW_TL_BATCH_COUNTED;
}

const gw_tl_ops_t gw_tl_intra_ops = {
    .size = sizeof(gw_tl_ops_t),
    .name = "intra",
    .iface_open = intra_iface_open,
    .iface_close = intra_iface_close,
    .iface_describe = intra_iface_describe,
    .mem_reg = intra_mem_reg,
    .mem_dereg = intra_mem_dereg,
    .rkey_pack = intra_rkey_pack,
    .rkey_unpack = gw_intra_rkey_unpack,
    .rkey_release = gw_tl_noop_rkey_release,
    .caps = intra_caps,
    .ep_prepare = intra_ep_prepare,
    .ep_reachable = intra_ep_reachable,
    .ep_connect = intra_ep_connect,
    .ep_join = gw_tl_unsupported_ep_join,
    .ep_close = intra_ep_close,
    .ep_destroy = intra_ep_destroy,
    .ep_describe = intra_ep_describe,
    .submit = intra_submit,
    .recv_matched = intra_recv_matched,
};
