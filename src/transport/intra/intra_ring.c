/* SPDX-License-Identifier: Apache-2.0 */
/* intra_ring.c - batched puts of small host entries that the target copies
 * into place, through a ring of shared memory (layout and states: intra.h).
 *
 * Why: into memory the target registered (not gw_mem_alloc memory), a
 * batch moves by CMA, and the kernel pins the pages of every remote iovec
 * in a round of its own: at 256 x 1 KiB that is most of the cost (0.20x
 * of one contiguous put on the 2-core VM).  Copying the entries into shared
 * memory and having the target copy them out costs two memcpys and no
 * pinning, on two cores at once (so at 16 KiB entries it beats even one
 * contiguous CMA put); it needs the target's CPU, so it is used only while
 * the target polls, and never stalls on one that stopped:
 *  - the target's progress engine writes hb on every call and asleep while
 *    it blocks in epoll_wait (ring_sleep);
 *  - the initiator offers a batch only to an ACTIVE target: one whose last
 *    offer was taken, or whose hb moved within INTRA_RING_PROBE_NS when
 *    probed; a target that did not (PASSIVE) is probed again after
 *    INTRA_RING_PASSIVE_NS, and batches meanwhile go by CMA as before;
 *  - an offer not taken within GPUWIRE_INTRA_RING_WAIT_US is taken back
 *    (POSTED -> FREE by compare-and-swap: exactly one of the two sides wins
 *    a slot) and moved by CMA, and the rest of its batch too; so a put
 *    still completes without the target's help (gpuwire.h, "A stopped
 *    peer").
 * A batch fills up to 256 KiB of slots at posting and the rest from the
 * initiator's progress as the target frees them (intra_ring_reap), so a
 * batch may be larger than the ring.
 * The target checks every entry of a slot against its own region table
 * before copying any (a slot lands whole or not at all) and answers with a
 * status and the index of the first bad entry.  The entries are copied in
 * with non-temporal stores: the target then reads them from memory rather
 * than from the initiator's cache, which on the 2-core VM ran at 7-10 GB/s
 * against 2.5-17 GB/s by plain memcpy depending on the host's mood
 * (docs/BATCH.md, "the ring"). */
#include "transport/intra/intra_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "mem/mem.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define RING_ALIGN16(x) (((x) + 15u) & ~(uint64_t)15u)

/* ---- the layout: pure functions (fuzzed: tests/fuzz/fuzz_intra_ring.c) ---- */

void gw_intra_ring_init(void *ring)
{
    gw_intra_ring_hdr_t *h = ring;
    memset(h, 0, GW_INTRA_RING_DATA_OFF);
    h->magic = GW_INTRA_RING_MAGIC;
    h->version = GW_INTRA_RING_VERSION;
    h->nslots = GW_INTRA_RING_SLOTS;
    h->slot_bytes = GW_INTRA_RING_SLOT_BYTES;
}

gw_status_t gw_intra_ring_accept(const void *ring, size_t len, char *why, size_t whylen)
{
    const gw_intra_ring_hdr_t *h = ring;
    if (len < sizeof(*h) || h->magic != GW_INTRA_RING_MAGIC) {
        snprintf(why, whylen, "the peer's ring (%zu bytes) does not start with the ring magic", len);
        return GW_ERR_PROTOCOL;
    }
    if (h->version != GW_INTRA_RING_VERSION) {
        snprintf(why, whylen, "the peer's ring is version %u, this library's %u", h->version, GW_INTRA_RING_VERSION);
        return GW_ERR_VERSION;
    }
    if (h->nslots != GW_INTRA_RING_SLOTS || h->slot_bytes != GW_INTRA_RING_SLOT_BYTES || len < gw_intra_ring_len()) {
        snprintf(why, whylen, "the peer's ring has %u slots of %u bytes in %zu bytes (expected %u of %u in %zu)",
                 h->nslots, h->slot_bytes, len, GW_INTRA_RING_SLOTS, GW_INTRA_RING_SLOT_BYTES, gw_intra_ring_len());
        return GW_ERR_PROTOCOL;
    }
    return GW_OK;
}

uint32_t gw_intra_ring_fit(const uint64_t *len, size_t stride, uint32_t n)
{
    uint64_t data = 0;
    uint32_t k = 0;
    for (; k < n; k++) {
        uint64_t l = *(const uint64_t *)(const void *)((const uint8_t *)len + (size_t)k * stride);
        if (l == 0 || l > GW_INTRA_RING_SLOT_BYTES)
            break;
        uint64_t need = data + RING_ALIGN16(l);
        if (gw_intra_ring_data_start(k + 1) + need > GW_INTRA_RING_SLOT_BYTES)
            break;
        data = need;
    }
    return k;
}

gw_status_t gw_intra_ring_check(const gw_intra_slot_t *table, const gw_intra_ring_desc_t *d, uint32_t n,
                                uint32_t bytes, uint32_t *bad, char *why, size_t whylen)
{
    *bad = 0;
    if (n == 0 || (size_t)n * sizeof(*d) > GW_INTRA_RING_SLOT_BYTES || bytes > GW_INTRA_RING_SLOT_BYTES) {
        snprintf(why, whylen, "ring slot of %" PRIu32 " entries in %" PRIu32 " bytes (slots hold %u bytes)", n, bytes,
                 GW_INTRA_RING_SLOT_BYTES);
        return GW_ERR_PROTOCOL;
    }
    uint64_t off = gw_intra_ring_data_start(n);
    for (uint32_t i = 0; i < n; i++) {
        off += RING_ALIGN16((uint64_t)d[i].len);
        if (d[i].len == 0 || off > bytes) {
            *bad = i;
            snprintf(why, whylen, "ring entry %" PRIu32 " of %" PRIu32 " bytes ends past the slot's %" PRIu32 " bytes",
                     i, d[i].len, bytes);
            return GW_ERR_PROTOCOL;
        }
    }
    if (off != bytes) {
        snprintf(why, whylen, "ring slot says %" PRIu32 " bytes, its entries take %" PRIu64, bytes, off);
        return GW_ERR_PROTOCOL;
    }
    if (!table)
        return GW_OK;
    for (uint32_t i = 0; i < n; i++) {
        *bad = i;
        if (d[i].slot >= GW_INTRA_SLOTS) {
            snprintf(why, whylen, "ring entry %" PRIu32 " names region table slot %" PRIu32 " (of %u)", i, d[i].slot,
                     GW_INTRA_SLOTS);
            return GW_ERR_PROTOCOL;
        }
        const gw_intra_slot_t *s = &table[d[i].slot];
        if (d[i].id == 0 || atomic_load(&s->id) != d[i].id) {
            snprintf(why, whylen, "ring entry %" PRIu32 ": region 0x%" PRIx64 " (slot %" PRIu32 ") was deregistered", i,
                     d[i].id, d[i].slot);
            return GW_ERR_INVALID_KEY;
        }
        if (s->kind != GW_INTRA_SLOT_HOST && s->kind != GW_INTRA_SLOT_SHM) {
            snprintf(why, whylen, "ring entry %" PRIu32 " names GPU region slot %" PRIu32, i, d[i].slot);
            return GW_ERR_PROTOCOL;
        }
        if (!(s->access & GW_ACCESS_REMOTE_WRITE)) {
            snprintf(why, whylen, "ring entry %" PRIu32 ": region [0x%" PRIx64 ", +%" PRIu64 ") has no remote write access",
                     i, s->addr, s->len);
            return GW_ERR_ACCESS;
        }
        if (!gw_range_inside(s->addr, s->len, d[i].raddr, d[i].len)) {
            snprintf(why, whylen, "ring entry %" PRIu32 " [0x%" PRIx64 ", +%" PRIu32 ") is outside region [0x%" PRIx64
                     ", +%" PRIu64 ")", i, d[i].raddr, d[i].len, s->addr, s->len);
            return GW_ERR_OUT_OF_BOUNDS;
        }
    }
    *bad = 0;
    return GW_OK;
}

void gw_intra_ring_unpack(const gw_intra_ring_desc_t *d, uint32_t n, const uint8_t *data)
{
    for (uint32_t i = 0; i < n; i++) {
        memcpy((void *)(uintptr_t)d[i].raddr, data, d[i].len);
        data += RING_ALIGN16((uint64_t)d[i].len);
    }
}

/* Copies len bytes to dst (16-byte aligned) with non-temporal stores where
 * the CPU has them; ring_fence() orders them before the slot's state. */
static inline void ring_copy_in(uint8_t *dst, const uint8_t *src, size_t len)
{
#if defined(__x86_64__)
    size_t k = len & ~(size_t)15;
    for (size_t i = 0; i < k; i += 16)
        _mm_stream_si128((__m128i *)(void *)(dst + i), _mm_loadu_si128((const __m128i *)(const void *)(src + i)));
    if (len > k)
        memcpy(dst + k, src + k, len - k);
#else
    memcpy(dst, src, len);
#endif
}

static inline void ring_fence(void)
{
#if defined(__x86_64__)
    _mm_sfence();
#endif
}

static inline void ring_relax(void)
{
#if defined(__x86_64__)
    _mm_pause();
#endif
}

static inline gw_intra_ring_hdr_t *ring_hdr(const intra_ring_t *r)
{
    return (gw_intra_ring_hdr_t *)(void *)r->base;
}

/* ---- the initiator ---- */

/* Makes our ring and offers it to the peer (once per endpoint). */
static void ring_make(intra_ep_t *e)
{
    gw_core_t *c = e->super.iface->core;
    intra_ring_t *r = calloc(1, sizeof(*r));
    void *p = NULL;
    int fd = -1;
    gw_status_t st = r ? gw_shm_alloc(c, gw_intra_ring_len(), &p, &fd) : GW_ERR_NOMEM;
    if (st != GW_OK) {
        gw_log(GW_LOG_WARN, "intra: no ring for small batched entries toward pid %d (%s): they move by CMA",
               (int)e->peer_pid, st == GW_ERR_NOMEM && !r ? "out of memory" : c->errbuf);
        free(r);
        e->rout_off = 1;
        return;
    }
    r->base = p;
    gw_intra_ring_init(p);
    gw_intra_hdr_t h = {.type = GW_INTRA_M_RING, .a = gw_intra_ring_len()};
    st = intra_out_msg_fds(e, &h, &fd, 1);
    close(fd);
    if (st != GW_OK) { /* the control socket failed: so will the endpoint */
        gw_shm_unmap(p, gw_intra_ring_len());
        free(r);
        e->rout_off = 1;
        return;
    }
    r->state = INTRA_RING_PROBE;
    e->rout = r;
}

/* Is the peer polling now (see the file's comment)? */
static int ring_target_polls(intra_ring_t *r)
{
    gw_intra_ring_hdr_t *h = ring_hdr(r);
    if (atomic_load_explicit(&h->asleep, memory_order_relaxed)) {
        if (r->state == INTRA_RING_ACTIVE)
            r->state = INTRA_RING_PROBE;
        return 0;
    }
    if (r->state == INTRA_RING_ACTIVE)
        return 1;
    uint64_t now = gw_now_ns();
    if (r->state == INTRA_RING_PASSIVE && now < r->until)
        return 0;
    /* probe: a polling target moves hb every progress call (well under a
     * microsecond when it spins); one sleeping in its own poll() on the
     * context fd, or busy elsewhere, does not */
    uint64_t hb = atomic_load_explicit(&h->hb, memory_order_relaxed), end = now + INTRA_RING_PROBE_NS;
    for (;;) {
        for (int i = 0; i < 64; i++) {
            uint64_t v = atomic_load_explicit(&h->hb, memory_order_relaxed);
            if (v != hb) {
                r->state = INTRA_RING_ACTIVE;
                return 1;
            }
            ring_relax();
        }
        now = gw_now_ns();
        if (now >= end)
            break;
    }
    r->state = INTRA_RING_PASSIVE;
    r->until = now + INTRA_RING_PASSIVE_NS;
    return 0;
}

/* Entries [first, first + n) of the batch by CMA (a slot taken back, an
 * entry no slot holds, the rest of a batch whose target stopped taking).
 * A ring batch holds no table slot (intrab_issue), so this enters the
 * slot of every key the entries name, as a CMA batch does: a region its
 * owner deregistered since fails them with GW_ERR_INVALID_KEY, and one
 * being deregistered waits for this copy. */
static gw_status_t ring_cma(intra_ep_t *e, const gw_batch_t *b, uint32_t first, uint32_t n)
{
    gw_core_t *c = e->super.iface->core;
    if (!n)
        return GW_OK;
    struct iovec *v = gw_op_state_get(c, 2 * (size_t)n * sizeof(*v) + (size_t)n * sizeof(gw_intra_slot_t *));
    if (!v)
        return gw_err(c, GW_ERR_NOMEM, "intra: out of memory for %" PRIu32 " iovecs of a batch", n);
    gw_intra_slot_t **in = (gw_intra_slot_t **)(void *)(v + 2 * (size_t)n);
    uint32_t nin = 0;
    gw_status_t st = GW_OK;
    for (uint32_t i = 0; i < n; i++) {
        const gw_batch_ent_t *en = &b->ent[first + i];
        v[i] = (struct iovec){(void *)(uintptr_t)en->laddr, (size_t)en->len};
        v[n + i] = (struct iovec){(void *)(uintptr_t)en->raddr, (size_t)en->len};
    }
    for (uint32_t i = 0; i < n && st == GW_OK; i++) {
        const gw_batch_ent_t *en = &b->ent[first + i];
        const gw_intra_rkey_t *ik = gw_intra_rkey_of(&b->rkey[en->rreg]);
        gw_intra_slot_t *s = &e->peer_table[ik->slot];
        int have = 0;
        for (uint32_t k = nin; k-- > 0 && !have;)
            have = in[k] == s;
        if (have ? atomic_load(&s->id) == ik->id : gw_intra_slot_hold(s, ik->id)) {
            if (!have)
                in[nin++] = s;
            continue;
        }
        st = gw_err(c, GW_ERR_INVALID_KEY,
                    "intra: batch entry %" PRIu32 " [0x%" PRIx64 ", +%" PRIu64 "): its region was deregistered "
                    "by its owner before the entry moved", first + i, en->raddr, en->len);
    }
    int err = 0;
    size_t done = 0;
    if (st == GW_OK) {
        done = gw_intra_cma_batch(e->peer_pid, 1, v, v + n, n, &err);
        e->n_cma++;
    }
    for (uint32_t k = 0; k < nin; k++)
        atomic_fetch_sub(&in[k]->inflight, 1);
    gw_op_state_put(c, v);
    if (st != GW_OK || !err)
        return st;
    return gw_err(c, err == ESRCH ? GW_ERR_CONN_RESET : GW_ERR_SYSTEM,
                  "intra: process_vm_writev(pid=%d) of batch entry %" PRIu32 " failed: %s", (int)e->peer_pid,
                  first + (uint32_t)done, strerror(err));
}

/* Bytes of entries first .. first+n-1. */
static uint64_t ring_bytes(const gw_batch_t *b, uint32_t first, uint32_t n)
{
    uint64_t t = 0;
    for (uint32_t i = first; i < first + n; i++)
        t += b->ent[i].len;
    return t;
}

static void ring_fail(intra_cp_t *cp, gw_status_t st)
{
    if (st != GW_OK && cp->rerr == GW_OK)
        cp->rerr = st;
}

/* Posts the batch's entries from cp->rnext into free slots until the
 * entries, the free slots or `budget` bytes run out.  An entry no slot
 * holds moves by CMA on the way. */
static void ring_pump(intra_ep_t *e, intra_cp_t *cp, size_t budget)
{
    intra_ring_t *r = e->rout;
    const gw_batch_t *b = cp->req->batch;
    const gw_batch_ent_t *ent = b->ent;
    uint32_t i = cp->rnext;
    size_t moved = 0;
    uint64_t now = 0;
    while (i < b->n && !r->owner[r->head] && moved < budget) {
        uint32_t k = gw_intra_ring_fit(&ent[i].len, sizeof(*ent), b->n - i);
        if (!k) { /* larger than a slot */
            gw_status_t cs = ring_cma(e, b, i, 1);
            if (cs == GW_OK)
                intrab_moved(cp->req, ent[i].len);
            ring_fail(cp, cs);
            moved += (size_t)ent[i].len;
            i++;
            continue;
        }
        uint32_t si = r->head;
        gw_intra_ring_slot_t *s = gw_intra_ring_slot(r->base, si);
        uint8_t *area = gw_intra_ring_data(r->base, si);
        gw_intra_ring_desc_t *d = (gw_intra_ring_desc_t *)(void *)area;
        size_t off = gw_intra_ring_data_start(k);
        for (uint32_t j = 0; j < k; j++) {
            const gw_batch_ent_t *en = &ent[i + j];
            const gw_intra_rkey_t *ik = gw_intra_rkey_of(&b->rkey[en->rreg]);
            d[j] = (gw_intra_ring_desc_t){.slot = ik->slot, .len = (uint32_t)en->len, .id = ik->id, .raddr = en->raddr};
            ring_copy_in(area + off, (const uint8_t *)(uintptr_t)en->laddr, (size_t)en->len);
            off += (size_t)RING_ALIGN16(en->len);
            moved += (size_t)en->len;
        }
        s->n = k;
        s->bytes = (uint32_t)off;
        ring_fence();
        atomic_store_explicit(&s->state, GW_INTRA_RS_POSTED, memory_order_release);
        atomic_fetch_add_explicit(&ring_hdr(r)->posted, 1, memory_order_release);
        if (!now)
            now = gw_now_ns();
        r->owner[si] = cp->req;
        r->first[si] = i;
        r->count[si] = k;
        r->t[si] = now;
        r->head = (si + 1) % GW_INTRA_RING_SLOTS;
        cp->rpend++;
        e->n_ring++;
        i += k;
    }
    cp->rnext = i;
}

int intra_ring_post(intra_ep_t *e, gw_request_t *req)
{
    const gw_batch_t *b = req->batch;
    if (!e->ifc->ring_wait_ns || e->rout_off || !(e->peer_feat & INTRA_FEAT_RING) || !b->n || b->get ||
        b->total > (uint64_t)b->n * INTRA_RING_AVG_MAX)
        return 0;
    intra_ring_t *r = e->rout;
    if (!r) {
        ring_make(e); /* this batch by CMA: the peer maps the ring in its next progress call */
        return 0;
    }
    if (!ring_target_polls(r))
        return 0;
    /* the record first: nothing is posted that no record would reap */
    intra_cp_t rec = {.req = req, .op = GW_OP_BATCH, .ring = 1};
    if (intra_cp_push(e, &rec) != GW_OK)
        return 0;
    /* at posting as much as a CMA batch moves at posting; the rest from
     * progress, as slots come free (all of it, behind other batches that
     * fill the ring: a batch sent by CMA because the ring is busy would
     * move at CMA's speed instead of the ring's) */
    ring_pump(e, &e->cps[e->ncp - 1], INTRA_CMA_SYNC_MAX);
    return 1;
}

/* The detail of a slot the target refused. */
static gw_status_t ring_refused(intra_ep_t *e, const gw_batch_t *b, uint32_t first, uint32_t count, gw_status_t st,
                                uint32_t bad)
{
    gw_core_t *c = e->super.iface->core;
    if (st >= 0 || st < -1000) /* not a failure status: the slot was garbled */
        st = GW_ERR_PROTOCOL;
    if (bad >= count)
        bad = 0;
    const gw_batch_ent_t *en = &b->ent[first + bad];
    const char *why = st == GW_ERR_INVALID_KEY     ? "its region was deregistered before the target copied it"
                      : st == GW_ERR_ACCESS        ? "its region has no remote write access"
                      : st == GW_ERR_OUT_OF_BOUNDS ? "it lies outside its region"
                                                   : "the target found the ring slot malformed";
    return gw_err(c, st, "intra: batch entry %" PRIu32 " [0x%" PRIx64 ", +%" PRIu64 "): the target refused it (%s): %s",
                  first + bad, en->raddr, en->len, gw_status_name(st), why);
}

int intra_ring_reap(intra_ep_t *e, intra_cp_t *cp, size_t *budget, gw_status_t *st)
{
    intra_ring_t *r = e->rout;
    gw_request_t *req = cp->req;
    const gw_batch_t *b = req->batch;
    uint64_t now = 0;
    for (uint32_t si = 0; si < GW_INTRA_RING_SLOTS && cp->rpend; si++) {
        if (r->owner[si] != req)
            continue;
        gw_intra_ring_slot_t *s = gw_intra_ring_slot(r->base, si);
        uint32_t state = atomic_load_explicit(&s->state, memory_order_acquire);
        gw_status_t res = GW_OK;
        if (state == GW_INTRA_RS_DONE) {
            int32_t v = s->status;
            if (v != GW_OK)
                res = ring_refused(e, b, r->first[si], r->count[si], (gw_status_t)v, s->bad);
            else
                intrab_moved(req, ring_bytes(b, r->first[si], r->count[si]));
            atomic_store_explicit(&s->state, GW_INTRA_RS_FREE, memory_order_relaxed);
        } else if (state == GW_INTRA_RS_POSTED) {
            if (!now)
                now = gw_now_ns();
            if (now - r->t[si] < e->ifc->ring_wait_ns)
                continue;
            uint32_t exp = GW_INTRA_RS_POSTED;
            if (!atomic_compare_exchange_strong(&s->state, &exp, GW_INTRA_RS_FREE))
                continue; /* the target took it just now */
            e->n_ring_back++;
            r->state = INTRA_RING_PASSIVE;
            r->until = now + INTRA_RING_PASSIVE_NS;
            cp->rback = 1; /* the rest of the batch by CMA too */
            res = ring_cma(e, b, r->first[si], r->count[si]);
            if (res == GW_OK)
                intrab_moved(req, ring_bytes(b, r->first[si], r->count[si]));
        } else {
            continue; /* CLAIMED: the target is copying it */
        }
        r->owner[si] = NULL;
        cp->rpend--;
        ring_fail(cp, res);
    }
    if (cp->rnext < b->n && !cp->rback && r->state == INTRA_RING_PASSIVE)
        cp->rback = 1; /* another batch's offer was taken back: the target stopped taking */
    if (cp->rnext < b->n && cp->rback) { /* the target stopped taking: by CMA, a budget's worth per call */
        uint32_t i = cp->rnext, j = i;
        size_t bytes = 0;
        while (j < b->n && bytes < *budget)
            bytes += (size_t)b->ent[j++].len;
        if (j > i) {
            gw_status_t cs = ring_cma(e, b, i, j - i);
            if (cs == GW_OK)
                intrab_moved(req, bytes);
            ring_fail(cp, cs);
            cp->rnext = j;
            *budget -= GW_MIN(bytes, *budget);
        }
    } else if (cp->rnext < b->n) {
        ring_pump(e, cp, SIZE_MAX);
    }
    if (cp->rpend || cp->rnext < b->n)
        return 0;
    *st = cp->rerr;
    return 1;
}

int intra_ring_cancel(intra_ep_t *e, intra_cp_t *cp)
{
    intra_ring_t *r = e->rout;
    gw_request_t *req = cp->req;
    const gw_batch_t *b = req->batch;
    int withdrawn = cp->rnext < b->n; /* entries never posted (nor moved by CMA) */
    cp->rnext = b->n;
    for (uint32_t si = 0; r && si < GW_INTRA_RING_SLOTS && cp->rpend; si++) {
        if (r->owner[si] != req)
            continue;
        gw_intra_ring_slot_t *s = gw_intra_ring_slot(r->base, si);
        uint32_t exp = GW_INTRA_RS_POSTED;
        if (!atomic_compare_exchange_strong(&s->state, &exp, GW_INTRA_RS_FREE))
            continue; /* claimed or done: the target has it (reaped as usual) */
        r->owner[si] = NULL;
        cp->rpend--;
        e->n_ring_back++;
        withdrawn = 1;
    }
    if (withdrawn)
        ring_fail(cp, GW_ERR_CANCELED);
    return withdrawn;
}

/* ---- the target ---- */

gw_status_t intra_ring_on_offer(intra_ep_t *e, int fd, uint64_t len)
{
    gw_core_t *c = e->super.iface->core;
    struct stat sb;
    if (e->rin || len != gw_intra_ring_len() || fstat(fd, &sb) != 0 || (uint64_t)sb.st_size < len) {
        close(fd);
        return gw_err(c, GW_ERR_PROTOCOL, "intra: the peer offered a%s ring of %" PRIu64 " bytes (expected %zu)",
                      e->rin ? " second" : "", len, gw_intra_ring_len());
    }
    void *p = NULL;
    gw_status_t st = gw_shm_map(c, fd, (size_t)len, &p);
    close(fd);
    intra_ring_t *r = st == GW_OK ? calloc(1, sizeof(*r)) : NULL;
    gw_intra_ring_desc_t *scratch = r ? malloc(GW_INTRA_RING_SLOT_BYTES) : NULL;
    if (!scratch) { /* (a mapping that failed: the peer's offers time out and go by CMA) */
        gw_log(GW_LOG_WARN, "intra: cannot map the ring of pid %d (%s): its small batched entries move by CMA",
               (int)e->peer_pid, st != GW_OK ? c->errbuf : "out of memory");
        if (p)
            gw_shm_unmap(p, (size_t)len);
        free(r);
        return GW_OK;
    }
    char why[200];
    st = gw_intra_ring_accept(p, (size_t)len, why, sizeof(why));
    if (st != GW_OK) {
        gw_shm_unmap(p, (size_t)len);
        free(scratch);
        free(r);
        return gw_err(c, st, "intra: %s", why);
    }
    r->base = p;
    r->scratch = scratch;
    e->rin = r;
    atomic_store_explicit(&ring_hdr(r)->hb, e->ifc->gen, memory_order_relaxed);
    return GW_OK;
}

int intra_ring_serve(intra_ep_t *e)
{
    intra_ring_t *r = e->rin;
    gw_intra_ring_hdr_t *h = ring_hdr(r);
    atomic_store_explicit(&h->hb, e->ifc->gen, memory_order_relaxed);
    uint64_t posted = atomic_load_explicit(&h->posted, memory_order_acquire);
    if (posted == r->seen)
        return 0;
    r->seen = posted; /* a slot posted after this read bumps posted again: scanned next call */
    int n = 0;
    for (uint32_t si = 0; si < GW_INTRA_RING_SLOTS; si++) {
        gw_intra_ring_slot_t *s = gw_intra_ring_slot(r->base, si);
        uint32_t exp = GW_INTRA_RS_POSTED;
        if (atomic_load_explicit(&s->state, memory_order_relaxed) != GW_INTRA_RS_POSTED ||
            !atomic_compare_exchange_strong(&s->state, &exp, GW_INTRA_RS_CLAIMED))
            continue;
        uint32_t k = s->n, bytes = s->bytes, bad = 0;
        const uint8_t *area = gw_intra_ring_data(r->base, si);
        char why[200];
        /* the descriptors are checked as copied here (the check refuses a
         * count the slot cannot hold before it reads any) */
        memcpy(r->scratch, area, GW_MIN((size_t)k * sizeof(gw_intra_ring_desc_t), (size_t)GW_INTRA_RING_SLOT_BYTES));
        gw_status_t st = gw_intra_ring_check(e->ifc->table, r->scratch, k, bytes, &bad, why, sizeof(why));
        if (st == GW_OK)
            gw_intra_ring_unpack(r->scratch, k, area + gw_intra_ring_data_start(k));
        if (st != GW_OK)
            gw_log(GW_LOG_DEBUG, "intra: refused a ring slot of pid %d: %s", (int)e->peer_pid, why);
        s->status = (int32_t)st;
        s->bad = bad;
        atomic_store_explicit(&s->state, GW_INTRA_RS_DONE, memory_order_release);
        e->n_ring_served++;
        n++;
    }
    return n;
}

/* The core's sleeper: the peers whose rings we serve see that we block. */
void intra_ring_sleep(void *arg, int asleep)
{
    intra_iface_t *ifc = arg;
    gw_list_t *p, *t;
    int pending = 0;
    gw_list_for_each_safe(p, t, &ifc->eps) {
        intra_ep_t *e = gw_container_of(p, intra_ep_t, link);
        if (!e->rin)
            continue;
        atomic_store_explicit(&ring_hdr(e->rin)->asleep, (uint32_t)asleep, memory_order_seq_cst);
        /* an offer that came before the flag: do not sleep on it */
        if (asleep && atomic_load_explicit(&ring_hdr(e->rin)->posted, memory_order_seq_cst) != e->rin->seen)
            pending = 1;
    }
    if (pending)
        gw_core_signal(ifc->super.core);
}

/* ---- teardown ---- */

void intra_ring_abort(intra_ep_t *e)
{
    if (e->rout) /* the requests are the base's now; the slots stay as they are */
        memset(e->rout->owner, 0, sizeof(e->rout->owner));
}

void intra_ring_destroy(intra_ep_t *e)
{
    intra_ring_t *rs[2] = {e->rout, e->rin};
    for (int i = 0; i < 2; i++) {
        if (!rs[i])
            continue;
        if (i == 1)
            atomic_store_explicit(&ring_hdr(rs[i])->asleep, 1, memory_order_relaxed); /* no more serving */
        gw_shm_unmap(rs[i]->base, gw_intra_ring_len());
        free(rs[i]->scratch);
        free(rs[i]);
    }
    e->rout = e->rin = NULL;
}
