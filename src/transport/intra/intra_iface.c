/* SPDX-License-Identifier: Apache-2.0 */
/* intra_iface.c - the intra iface: open/close/describe, the progress
 * hook, memory registration and export (region table), the ops table.
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

static int intra_poll(void *arg)
{
    intra_iface_t *ifc = arg;
    int n = 0, busy = 0;
    gw_list_t *p, *t;
    ifc->gen++;
    gw_list_for_each_safe(p, t, &ifc->eps) {
        intra_ep_t *e = gw_container_of(p, intra_ep_t, link);
        if (e->ncmaq && !intra_ep_dead(e)) {
            n += (int)e->ncmaq;
            intra_cma_flush(e);
        }
        if (e->rin && !intra_ep_dead(e))
            n += intra_ring_serve(e);
        if (e->ncp && !intra_ep_dead(e))
            n += intra_poll_inflight(e);
        if (e->bye == 1 && ifc->gen > e->bye_gen + 1 && !intra_ep_dead(e)) {
            e->bye = 2;
            intra_ep_fail(e, GW_ERR_CONN_RESET, "intra: %s", "the peer closed the endpoint");
            n++;
        }
        busy |= e->ncp != 0 || e->bye == 1;
    }
    uint64_t now = gw_now_ns();
    if (gw_liveness_due(&ifc->live, now)) {
        gw_list_for_each_safe(p, t, &ifc->eps) {
            intra_ep_t *e = gw_container_of(p, intra_ep_t, link);
            if (intra_ep_dead(e) || e->bye)
                continue;
            uint64_t idle;
            gw_live_t v = gw_liveness_judge(e->super.base, gw_ep_has_work(e->super.base) || e->ncp, now,
                                            &e->last_ping_ns, &idle);
            if (v == GW_LIVE_DEAD) {
                char why[160];
                snprintf(why, sizeof(why), "no message from the peer for %llu ms with work outstanding "
                         "(GPUWIRE_PEER_TIMEOUT_MS=%ld)", (unsigned long long)(idle / 1000000),
                         ifc->super.core->peer_timeout_ms);
                intra_ep_fail(e, GW_ERR_PEER_TIMEOUT, "intra: %s", why);
                n++;
            } else if (v == GW_LIVE_PING) {
                gw_intra_hdr_t ping = {.type = GW_INTRA_M_PING};
                intra_out_msg(e, &ping, NULL);
            }
        }
    }
    /* CUDA copies have no fd: the context fd stays readable while any is in
     * flight, so a waiter keeps polling (held, not written and read each pass) */
    gw_core_keep_ready(ifc->super.core, GW_KEEP_INTRA, busy);
    return n;
}

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
    long ring_us = 0;
    if ((st = gw_settings_int(&core->settings, GW_SET_INTRA_RING_WAIT_US, &ring_us, why, whylen)) != GW_OK)
        goto err_map;
    ifc->ring_wait_ns = (uint64_t)ring_us * 1000u;
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
    /* peers that offer us their rings see when we block (intra_ring.c) */
    st = gw_core_add_sleeper(core, intra_ring_sleep, ifc);
    if (st != GW_OK) {
        snprintf(why, whylen, "%s", core->errbuf);
        gw_core_del_poller(core, intra_poll, ifc);
        goto err_map;
    }
    ifc->ring_sleeper = 1;
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
    gw_core_keep_ready(iface->core, GW_KEEP_INTRA, 0);
    if (ifc->ring_sleeper)
        gw_core_del_sleeper(iface->core, intra_ring_sleep, ifc);
    if (ifc->bounce && ifc->cu)
        ifc->cu->cuMemFreeHost(ifc->bounce);
    for (int i = 0; i < INTRA_BDESC_KEEP; i++)
        if (ifc->bdesc[i] && ifc->cu)
            ifc->cu->cuMemFreeHost(ifc->bdesc[i]);
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
    uintptr_t in1 = m->within ? (uintptr_t)m->within->tl_reg[GW_TL_INTRA] : 0;
    const gw_intra_slot_t *in = in1 ? &ifc->table[in1 - 1] : NULL;
    if (gpu && in && (in->kind == GW_INTRA_SLOT_IPC || in->kind == GW_INTRA_SLOT_VMM)) {
        /* inside a registration of this context (the registration cache):
         * the same allocations, exported already; VMM fds duplicated so that
         * each slot closes its own */
        s->kind = in->kind;
        s->nseg = in->nseg;
        memcpy(s->seg, in->seg, in->nseg * sizeof(s->seg[0]));
        for (uint32_t i = 0; i < s->nseg; i++)
            if (s->kind == GW_INTRA_SLOT_VMM && in->seg[i].fd >= 0 && (s->seg[i].fd = dup(in->seg[i].fd)) < 0) {
                int e = errno;
                while (i-- > 0)
                    close(s->seg[i].fd);
                path_add(m, "unavailable (dup of the VMM export fd failed: %s)", strerror(e));
                return GW_ERR_UNSUPPORTED;
            }
        path_add(m, "%s", s->kind == GW_INTRA_SLOT_IPC ? "CUDA IPC (legacy handle, the export of the registration it lies in) + copy engine"
                                                      : "CUDA IPC (VMM fd, the export of the registration it lies in) + copy engine");
    } else if (gpu) {
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

/* batched transfers: part of this translation unit (it uses the objects
 * above); a file of its own once the transport has a private header */

/* the one operation entry (tl.h) */
static gw_status_t intra_submit(gw_tl_ep_t *tep, gw_request_t *req)
{
    /* a notification waits for every older operation but sends (intra_notify_out) */
    gw_status_t st;
    if (gw_req_notifies(req) && (st = gw_ep_notify_defer(tep->base, req)) != GW_OK)
        return st;
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
    out->batch = GW_TL_BATCH_NATIVE | GW_TL_BATCH_GPU | GW_TL_BATCH_COUNTED | GW_TL_BATCH_PAGES |
                 GW_TL_BATCH_LISTS | GW_TL_BATCH_CLISTS | GW_TL_BATCH_ICHECK;
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
    .rma_iov = intrab_batch, /* (the batch engine: process_vm_writev/readv over iovec arrays) */
    .am_send = intra_am_send,
    .rma_now = intra_rma_now,
    .send_now = gw_tl_unsupported_send_now,
    .put_direct = gw_tl_unsupported_put_direct,
    .ep_progress = gw_tl_unsupported_ep_progress,
    .recv_matched = intra_recv_matched,
    .cancel = intra_cancel,
};
