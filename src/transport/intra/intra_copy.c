/* SPDX-License-Identifier: Apache-2.0 */
/* intra_copy.c - the intra copy engine: CMA, CUDA IPC/VMM imports, the
 * pinned bounce path, shared-memory regions, entering and leaving the
 * peer's region table slots.
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

int intra_cma_probe(pid_t pid, uint64_t addr, char *why, size_t whylen)
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
gw_status_t intra_cma_copy(gw_core_t *c, pid_t pid, int to_remote, void *lbuf, uint64_t raddr,
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

gw_status_t intra_cu_err(gw_core_t *c, const char *what, CUresult r)
{
    char eb[160];
    return gw_err(c, GW_ERR_CUDA, "intra: %s failed: %s", what, gw_cuda_strerror(r, eb, sizeof(eb)));
}

/* Our ordinal of the GPU with this PCI bus id, or -1. */
int intra_dev_by_pci(const char *pci)
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

gw_status_t intra_ep_stream(intra_ep_t *e, int dev, int own, CUstream *out)
{
    gw_core_t *c = e->super.iface->core;
    char why[256];
    if (dev < 0 || dev >= INTRA_MAX_DEV)
        return gw_err(c, GW_ERR_INVALID, "intra: CUDA device %d out of range", dev);
    if (own) {
        if (!e->ostream[dev]) {
            CUcontext saved = NULL;
            if (!gw_cuda_own_ctx_enter(dev, &saved, why, sizeof(why)))
                return gw_err(c, GW_ERR_CUDA, "intra: %s", why);
            CUresult r = e->ifc->cu->cuStreamCreate(&e->ostream[dev], CU_STREAM_NON_BLOCKING);
            gw_cuda_ctx_leave(saved);
            if (r != CUDA_SUCCESS) {
                e->ostream[dev] = NULL;
                return intra_cu_err(c, "cuStreamCreate(in gpuwire's own context)", r);
            }
        }
        *out = e->ostream[dev];
        return GW_OK;
    }
    if (!gw_cuda_ctx_for_device(dev, why, sizeof(why)))
        return gw_err(c, GW_ERR_CUDA, "intra: %s", why);
    if (!e->stream[dev]) {
        CUresult r = e->ifc->cu->cuStreamCreate(&e->stream[dev], CU_STREAM_NON_BLOCKING);
        if (r != CUDA_SUCCESS)
            return intra_cu_err(c, "cuStreamCreate", r);
    }
    *out = e->stream[dev];
    return GW_OK;
}

int intra_own_copy(const intra_ep_t *e, const gw_mem_t *lmem, const gw_intra_slot_t *s)
{
    static int noted; /* reasons logged, once per process each */
    if (!e->own_ctx)
        return 0;
    int local_vmm = lmem && lmem->type == GW_MEM_CUDA && lmem->cuda_vmm;
    int remote_vmm = s && s->kind == GW_INTRA_SLOT_VMM;
    if (local_vmm && remote_vmm)
        return 1;
    int bit = !remote_vmm ? 1 : !lmem || lmem->type != GW_MEM_CUDA ? 2 : 4;
    if (!(__atomic_fetch_or(&noted, bit, __ATOMIC_RELAXED) & bit))
        gw_log(GW_LOG_INFO, "intra: GPUWIRE_CUDA_COPY_CONTEXT=own, but GPU copies %s stay in the primary context: "
               "%s (only copies between VMM mappings, cuMemCreate + cuMemMap, were measured to escape an "
               "application's blocking copy in a context of their own; copies of cudaMalloc memory are held in any)",
               bit == 1 ? "to or from a peer region of cudaMalloc memory"
               : bit == 2 ? "between local host memory and peer GPU memory" : "from local cudaMalloc memory",
               bit == 1 ? "the peer's region is not a VMM mapping"
               : bit == 2 ? "the local buffer is host memory"
                          : "the local region is not a VMM mapping");
    return 0;
}

/* The import map's key of (slot, segment, device) in *k: slot in the high
 * 32 bits, segment (under 2^24) and device (0-255) below, plus one (the map
 * takes no 0).  0 when they do not fit: such imports live in the list only
 * and are found by walking it. */
static int import_key(uint32_t si, uint32_t sg, int dev, uint64_t *k)
{
    if (si == UINT32_MAX || sg >= (1u << 24) || dev < 0 || dev > 255)
        return 0;
    *k = (((uint64_t)si << 32) | ((uint64_t)sg << 8) | (uint64_t)dev) + 1;
    return 1;
}

void intra_import_close(intra_ep_t *e, intra_import_t *im)
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
    uint64_t k;
    if (import_key(im->slot, im->seg, im->dev, &k) && gw_hmap_get(&e->import_map, k) == im)
        gw_hmap_del(&e->import_map, k);
    gw_list_del(&im->link);
    free(im);
}

intra_import_t *intra_import_find(const intra_ep_t *e, uint32_t si, uint32_t sg, int dev)
{
    uint64_t k;
    if (import_key(si, sg, dev, &k))
        return gw_hmap_get(&e->import_map, k);
    gw_list_t *p, *t;
    gw_list_for_each_safe(p, t, &e->imports) {
        intra_import_t *im = gw_container_of(p, intra_import_t, link);
        if (im->slot == si && im->seg == sg && im->dev == dev)
            return im;
    }
    return NULL;
}

intra_fdset_t *intra_fdset_find(intra_ep_t *e, uint32_t slot, uint64_t id)
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

static gw_status_t import_seg(intra_ep_t *e, uint32_t si, const gw_intra_slot_t *s, uint64_t id, uint32_t sg,
                              int dev, CUdeviceptr *out);

/* Device pointer of peer slot `si` segment `sg`, opened in device dev's
 * primary context (a VMM mapping is the process's, usable from any context
 * of the device).  GW_INPROGRESS while the VMM fds are on their way.  The
 * caller's current context is current again on return. */
gw_status_t intra_import_seg(intra_ep_t *e, uint32_t si, const gw_intra_slot_t *s, uint64_t id,
                              uint32_t sg, int dev, CUdeviceptr *out)
{
    const intra_import_t *im = intra_import_find(e, si, sg, dev);
    if (im && im->id == id) {
        *out = im->ptr;
        return GW_OK;
    }
    CUcontext cur = NULL;
    e->ifc->cu->cuCtxGetCurrent(&cur);
    gw_status_t st = import_seg(e, si, s, id, sg, dev, out);
    gw_cuda_ctx_leave(cur);
    return st;
}

static gw_status_t import_seg(intra_ep_t *e, uint32_t si, const gw_intra_slot_t *s, uint64_t id, uint32_t sg,
                              int dev, CUdeviceptr *out)
{
    gw_core_t *c = e->super.iface->core;
    const gw_cuda_t *cu = e->ifc->cu;
    intra_import_t *old = intra_import_find(e, si, sg, dev);
    if (old && old->id == id) {
        *out = old->ptr;
        return GW_OK;
    }
    if (old)
        intra_import_close(e, old); /* the slot was reused: stale mapping */
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
            return intra_cu_err(c, "cuIpcOpenMemHandle(peer GPU memory)", r);
        }
    } else {
        intra_fdset_t *f = intra_fdset_find(e, si, id);
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
                gw_status_t st = intra_out_msg(e, &h, NULL);
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
            return intra_cu_err(c, "cuMemImportFromShareableHandle(peer VMM fd)", r);
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
            return intra_cu_err(c, "mapping the peer's VMM allocation (cuMemMap/cuMemSetAccess)", r);
        }
    }
    gw_list_push_back(&e->imports, &im->link);
    uint64_t k;
    if (import_key(si, sg, dev, &k) && gw_hmap_put(&e->import_map, k, im) != 0) {
        intra_import_close(e, im); /* (not findable: it would be imported again per use) */
        return gw_err(c, GW_ERR_NOMEM, "intra: out of memory for the import map");
    }
    *out = im->ptr;
    return GW_OK;
}

static int local_dev(const gw_request_t *req)
{
    return req->lmem && req->lmem->type == GW_MEM_CUDA ? req->lmem->cuda_device : -1;
}

gw_status_t intra_cp_push(intra_ep_t *e, const intra_cp_t *cp)
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

CUresult intra_ev_get(intra_ep_t *e, int key, CUevent *ev)
{
    for (unsigned i = e->nevfree; i-- > 0;)
        if (e->evfree_k[i] == key) {
            *ev = e->evfree[i];
            e->nevfree--;
            e->evfree[i] = e->evfree[e->nevfree];
            e->evfree_k[i] = e->evfree_k[e->nevfree];
            return CUDA_SUCCESS;
        }
    return e->ifc->cu->cuEventCreate(ev, CU_EVENT_DISABLE_TIMING);
}

void intra_ev_put(intra_ep_t *e, CUevent ev, int key)
{
    if (!ev)
        return;
    if (e->nevfree < INTRA_EV_KEEP) {
        e->evfree[e->nevfree] = ev;
        e->evfree_k[e->nevfree++] = key;
        return;
    }
    e->ifc->cu->cuEventDestroy(ev);
}

/* GPU buffer <-> peer host memory, through the pinned bounce, synchronous. */
gw_status_t intra_staged_host(intra_ep_t *e, int to_remote, void *lbuf, int ldev, uint64_t raddr, size_t len)
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
            return intra_cu_err(c, "cuMemHostAlloc(intra bounce buffer)", r);
        }
    }
    for (size_t off = 0; off < len;) {
        size_t n = GW_MIN(len - off, (size_t)INTRA_BOUNCE);
        gw_status_t st;
        if (to_remote) {
            st = gw_staging_copy_sync(c, ldev, e->ifc->bounce, (char *)lbuf + off, n);
            if (st == GW_OK)
                st = intra_cma_copy(c, e->peer_pid, 1, e->ifc->bounce, raddr + off, n);
        } else {
            st = intra_cma_copy(c, e->peer_pid, 0, e->ifc->bounce, raddr + off, n);
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
        intra_fdset_t *f = intra_fdset_find(e, r->slot, r->id);
        if (!f) {
            if (!(f = calloc(1, sizeof(*f))))
                return gw_err(c, GW_ERR_NOMEM, "intra: out of memory");
            f->slot = r->slot;
            f->id = r->id;
            f->requested = 1;
            gw_list_push_back(&e->fdsets, &f->link);
            gw_intra_hdr_t h = {.type = GW_INTRA_M_FDREQ, .a = r->slot, .b = r->id};
            gw_status_t st = intra_out_msg(e, &h, NULL);
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

/* Where peer slot r->s (an allocated, shared region) is mapped here: the
 * whole slot checked against the mapping; *delta added to a peer address
 * gives the local one.  GW_INPROGRESS: its fd was asked for (again later). */
gw_status_t intra_shm_delta(intra_ep_t *e, const rdesc_t *r, intptr_t *delta)
{
    rdesc_t whole = *r;
    whole.addr = r->s->addr;
    uint8_t *p = NULL;
    gw_status_t st = shm_ptr(e, &whole, (size_t)r->s->len, &p);
    if (st == GW_OK)
        *delta = (intptr_t)((uintptr_t)p - (uintptr_t)whole.addr);
    return st;
}

static gw_status_t gpu_copy(intra_ep_t *e, gw_request_t *req, int to_remote, void *lbuf, const rdesc_t *r,
                            size_t len, int dev, int own, CUstream stream, int *again);

/* Starts moving len bytes.  Returns GW_OK when done synchronously,
 * GW_INPROGRESS when a CUDA copy was queued (req goes on e->inflight), an
 * error otherwise.  The caller holds the peer slot's inflight count. */
gw_status_t intra_copy_start(intra_ep_t *e, gw_request_t *req, int to_remote, void *lbuf, const rdesc_t *r,
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
            if (len > INTRA_SHM_SYNC_MAX) { /* large: piecewise from progress, as CMA */
                intra_cp_t cp = {.ev = NULL, .req = req, .slot = intra_rq(req)->slot,
                                 .op = req->op, .to_remote = to_remote, .lbuf = lbuf, .raddr = r->addr,
                                 .rptr = p, .len = len};
                if ((st = intra_cp_push(e, &cp)) != GW_OK)
                    return st;
                intra_rq(req)->slot = NULL;
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
                return intra_cma_copy(c, e->peer_pid, to_remote, lbuf, r->addr, len);
            /* large: piecewise from the progress engine, so posting never
             * blocks for long and other endpoints keep moving */
            intra_cp_t cp = {.ev = NULL, .req = req, .slot = intra_rq(req)->slot,
                             .op = req->op, .to_remote = to_remote, .lbuf = lbuf, .raddr = r->addr, .len = len};
            gw_status_t st = intra_cp_push(e, &cp);
            if (st != GW_OK)
                return st;
            intra_rq(req)->slot = NULL;
            gw_core_signal(c);
            return GW_INPROGRESS;
        }
        return intra_staged_host(e, to_remote, lbuf, ldev, r->addr, len);
    }
    const gw_cuda_t *cu = e->ifc->cu;
    if (!cu)
        return gw_err(c, GW_ERR_UNSUPPORTED,
                      "intra: the peer's region is GPU memory but CUDA is unavailable in this process (%s)",
                      e->ifc->cuda_why);
    const gw_intra_slot_t *s = r->s;
    int dev = ldev >= 0 ? ldev : intra_dev_by_pci(s->pci_bus_id);
    if (dev < 0)
        dev = 0;
    /* find the segment (allocation) holding the range; ranges crossing
     * allocations are copied piecewise on the same stream */
    int own = intra_own_copy(e, ldev >= 0 ? req->lmem : NULL, s);
    CUstream stream = NULL;
    gw_status_t st = intra_ep_stream(e, dev, own, &stream);
    if (st != GW_OK)
        return st;
    if (!own)
        return gpu_copy(e, req, to_remote, lbuf, r, len, dev, 0, stream, again);
    char why[256];
    CUcontext saved = NULL;
    if (!gw_cuda_own_ctx_enter(dev, &saved, why, sizeof(why)))
        return gw_err(c, GW_ERR_CUDA, "intra: %s", why);
    st = gpu_copy(e, req, to_remote, lbuf, r, len, dev, 1, stream, again);
    gw_cuda_ctx_leave(saved);
    if (st == GW_INPROGRESS && !*again)
        e->n_own++;
    return st;
}

/* The copies of intra_copy_start's range to or from peer GPU memory, on
 * stream (its context current), and the event that tells their end. */
static gw_status_t gpu_copy(intra_ep_t *e, gw_request_t *req, int to_remote, void *lbuf, const rdesc_t *r,
                            size_t len, int dev, int own, CUstream stream, int *again)
{
    gw_core_t *c = e->super.iface->core;
    const gw_cuda_t *cu = e->ifc->cu;
    const gw_intra_slot_t *s = r->s;
    gw_status_t st;
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
        st = intra_import_seg(e, r->slot, s, r->id, sg, dev, &base);
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
            return intra_cu_err(c, "cuMemcpyAsync(to/from peer GPU memory)", cr);
        ra += n;
        lp += n;
        left -= n;
    }
    CUevent ev = NULL;
    int evk = intra_ev_key(dev, own);
    CUresult cr = intra_ev_get(e, evk, &ev);
    if (cr == CUDA_SUCCESS)
        cr = cu->cuEventRecord(ev, stream);
    if (cr != CUDA_SUCCESS) {
        if (ev)
            cu->cuEventDestroy(ev);
        cu->cuStreamSynchronize(stream);
        return intra_cu_err(c, "cuEventCreate/cuEventRecord", cr);
    }
    intra_cp_t rec = {.ev = ev, .evk = evk, .req = req, .slot = intra_rq(req)->slot, .op = req->op};
    if (intra_cp_push(e, &rec) != GW_OK) {
        cu->cuEventSynchronize(ev);
        intra_ev_put(e, ev, evk);
        return GW_ERR_NOMEM;
    }
    intra_rq(req)->slot = NULL; /* the record owns the slot count now */
    e->n_cuda++;
    return GW_INPROGRESS;
}

/* Looks a peer slot up for an rkey-addressed access and counts us in. */
/* The key's parsed intra part, copied into the request when it is posted:
 * the caller may destroy the rkey while the operation waits (intra.src:
 * slot | a valid bit, intra.src2: region id the part names, intra.opid: the
 * key's id). */
#define RK_VALID (1ull << 63)
gw_status_t intra_rkey_capture(intra_ep_t *e, gw_request_t *req)
{
    gw_core_t *c = e->super.iface->core;
    const gw_rkey_t *rk = req->rkey;
    const gw_intra_rkey_t *ik = gw_intra_rkey_of(rk); /* checked at gw_rkey_unpack (intra_rkey.c) */
    if (!ik->present)
        return gw_err(c, GW_ERR_UNSUPPORTED,
                      "intra: the remote region 0x%" PRIx64 " (+%" PRIu64 ") is not reachable through the intra-host "
                      "transport (its owner could not export it: see gw_mem_query's path there)", rk->addr, rk->len);
    intra_rq(req)->src = RK_VALID | ik->slot;
    intra_rq(req)->src2 = ik->id;
    intra_rq(req)->opid = rk->id;
    return GW_OK;
}

/* Looks a peer slot up for an rkey-addressed access and counts us in. */
gw_status_t intra_slot_enter(intra_ep_t *e, const gw_request_t *req, rdesc_t *r)
{
    gw_core_t *c = e->super.iface->core;
    if (!(intra_rq(req)->src & RK_VALID))
        return gw_err(c, GW_ERR_INVALID_KEY, "intra: malformed remote key (bad intra part)");
    uint32_t si = (uint32_t)(intra_rq(req)->src & 0xffffffffu);
    uint64_t id = intra_rq(req)->src2;
    if (si >= GW_INTRA_SLOTS || id != intra_rq(req)->opid)
        return gw_err(c, GW_ERR_INVALID_KEY, "intra: malformed remote key (slot %u)", si);
    gw_intra_slot_t *s = &e->peer_table[si];
    if (!gw_intra_slot_hold(s, id))
        goto revoked;
    /* the owner's table has the last word, not the key (keys can be forged) */
    unsigned need = req->op == GW_OP_GET ? GW_ACCESS_REMOTE_READ : GW_ACCESS_REMOTE_WRITE;
    gw_status_t st = gw_region_allows(s->addr, s->len, s->access, req->raddr, req->len, need);
    if (st != GW_OK) {
        atomic_fetch_sub(&s->inflight, 1);
        if (st == GW_ERR_ACCESS)
            return gw_err(c, st, "intra: the owner registered region 0x%" PRIx64 " without remote %s access",
                          s->addr, need == GW_ACCESS_REMOTE_READ ? "read" : "write");
        return gw_err(c, st,
                      "intra: remote range [0x%" PRIx64 ", +%zu) is outside the region [0x%" PRIx64 ", +%" PRIu64
                      ") its owner registered", req->raddr, req->len, s->addr, s->len);
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

void intra_slot_leave(intra_ep_t *e, gw_request_t *req)
{
    gw_intra_slot_t *s = intra_rq(req)->slot;
    (void)e;
    if (s) {
        atomic_fetch_sub(&s->inflight, 1);
        intra_rq(req)->slot = NULL;
    }
}

/* A small put or get into a peer's shared region (gw_mem_alloc) already
 * mapped here: checked against the owner's slot and copied now, without the
 * slot's inflight count (two locked instructions on a line the owner's
 * table shares, a quarter of a 1 KiB put's time).  The count is not needed
 * for such a region: the owner's gw_mem_dereg frees it (munmap, close), and
 * its pages live on only in the peers' mappings, so a copy racing with the
 * revocation lands in (or reads) pages no one can see any more, as if it had
 * run just before.  The slot's fields are read between two loads of its id
 * (ids are never reused): the owner may rewrite them for a new region only
 * after clearing the id.  src: the key's intra part as intra_rkey_capture
 * keeps it (RK_VALID | slot), id: the region id it names, kid: the key's
 * own id.  1: copied; 0: not taken, nothing done (the general path decides,
 * with its precise errors). */
static int shm_copy_now(intra_ep_t *e, int get, void *buf, size_t len, uint64_t src, uint64_t id, uint64_t kid,
                        uint64_t raddr)
{
    if (len > INTRA_SHM_SYNC_MAX || !(src & RK_VALID))
        return 0;
    uint32_t si = (uint32_t)(src & 0xffffffffu);
    if (si >= GW_INTRA_SLOTS || id != kid || !id)
        return 0;
    gw_intra_slot_t *s = &e->peer_table[si];
    if (atomic_load_explicit(&s->id, memory_order_acquire) != id)
        return 0;
    unsigned need = get ? GW_ACCESS_REMOTE_READ : GW_ACCESS_REMOTE_WRITE;
    if (s->kind != GW_INTRA_SLOT_SHM || gw_region_allows(s->addr, s->len, s->access, raddr, len, need) != GW_OK)
        return 0;
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&s->id, memory_order_relaxed) != id)
        return 0;
    gw_intra_shm_t *m = gw_intra_shm_find(&e->shm_maps, si, id);
    if (!m || !gw_range_inside(m->addr, m->len, raddr, len))
        return 0;
    uint8_t *p = m->base + (raddr - m->addr);
    if (get)
        memcpy(buf, p, len);
    else
        memcpy(p, buf, len);
    e->n_shm++;
    return 1;
}

/* shm_copy_now for a posted request, which it completes.  1: done. */
int intra_shm_fast(intra_ep_t *e, gw_request_t *req)
{
    if (local_dev(req) >= 0 || !shm_copy_now(e, req->op == GW_OP_GET, req->buf, req->len, intra_rq(req)->src,
                                             intra_rq(req)->src2, intra_rq(req)->opid, req->raddr))
        return 0;
    intra_rq(req)->slot = NULL;
    intra_rma_done(e, req, GW_OK);
    return 1;
}

/* The rma_now op (tl.h): shm_copy_now before any request exists.  Only on a
 * connected, healthy endpoint, host memory on our side, and a key the
 * owner exported: anything else is the request path's to take (and to
 * refuse with its errors). */
gw_status_t intra_rma_now(gw_tl_ep_t *tep, int op, void *buf, size_t len, const gw_mem_t *lmem, uint64_t raddr,
                          const gw_rkey_t *rkey)
{
    intra_ep_t *e = to_ep(tep);
    if (!e->ready || e->failed || (op != GW_OP_PUT && op != GW_OP_GET) || (lmem && lmem->type == GW_MEM_CUDA))
        return GW_ERR_UNSUPPORTED;
    const gw_intra_rkey_t *ik = gw_intra_rkey_of(rkey);
    if (!ik->present || !shm_copy_now(e, op == GW_OP_GET, buf, len, RK_VALID | ik->slot, ik->id, rkey->id, raddr))
        return GW_ERR_UNSUPPORTED;
    return GW_OK;
}

/* Writes (reads) the queued small CMA copies: every request enters its
 * slot (the owner's table decides, as for a lone copy), then one
 * process_vm_writev/readv moves the lot; a copy the batch could not move is
 * redone alone for its precise error. */
void intra_cma_flush(intra_ep_t *e)
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
        gw_status_t st = intra_slot_enter(e, req, &r);
        if (st == GW_OK && r.s->kind != GW_INTRA_SLOT_HOST) { /* the slot was reused meanwhile */
            intra_rq(req)->slot = (gw_intra_slot_t *)r.s; /* its inflight is ours to drop */
            intra_slot_leave(e, req);
            st = gw_err(c, GW_ERR_INVALID_KEY, "intra: the remote region holding 0x%" PRIx64 " was deregistered by "
                        "its owner", req->raddr);
        }
        if (st != GW_OK) {
            intra_rma_done(e, req, st);
            if (e->failed)
                return;
            continue;
        }
        intra_rq(req)->slot = (gw_intra_slot_t *)r.s; /* its inflight is ours to drop */
        q[k] = req;
        loc[k] = (struct iovec){req->buf, req->len};
        rem[k] = (struct iovec){(void *)(uintptr_t)req->raddr, req->len};
        k++;
    }
    size_t off = 0;
    while (off < k) {
        int err = 0;
        size_t moved = gw_intra_cma_batch(e->peer_pid, !get, loc + off, rem + off, k - off, &err);
        e->n_cma_calls++;
        e->n_cma += moved;
        e->n_cma_batched += moved;
        for (size_t i = 0; i < moved; i++)
            intra_rma_done(e, q[off + i], GW_OK);
        off += moved;
        if (off < k) { /* alone, for its own verdict */
            gw_request_t *req = q[off++];
            e->n_cma++;
            intra_rma_done(e, req, intra_cma_copy(c, e->peer_pid, !get, req->buf, req->raddr, req->len));
        }
    }
}

/* Queues a small host-to-host copy when another went at once since the last
 * progress call (the first one keeps a lone operation's latency); the queue
 * leaves in one system call on the next progress call or when full.  1:
 * queued. */
int intra_cma_queue(intra_ep_t *e, gw_request_t *req)
{
    if (req->len > INTRA_CMA_BATCH_MAX || local_dev(req) >= 0 || !(intra_rq(req)->src & RK_VALID))
        return 0;
    uint32_t si = (uint32_t)(intra_rq(req)->src & 0xffffffffu);
    if (si >= GW_INTRA_SLOTS || e->peer_table[si].kind != GW_INTRA_SLOT_HOST)
        return 0; /* GPU, shared memory: their own paths */
    int get = req->op == GW_OP_GET;
    if (e->ncmaq && e->cmaq_get != get)
        intra_cma_flush(e);
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
        intra_cma_flush(e);
    return 1;
}
