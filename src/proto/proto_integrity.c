/* SPDX-License-Identifier: Apache-2.0 */
/* proto_integrity.c - the end-to-end integrity check (protocol layer;
 * proto_integrity.h says what it does and its wire format).
 *
 * Requests: the caller's request ("parent") leaves the endpoint's
 * outstanding list when its operation is posted as a request of its own
 * ("child", held here); the child stands in the list for flushes and for
 * later notifications, which must not wait for a verdict (a deferred
 * notification waits for every earlier operation: the parent waiting for
 * its child's verdict there would hold its own child back).  Each progress
 * pass looks at the children and the verdicts that came.
 *
 * The check's messages ride on the transport's tagged messages with the
 * reserved tag GW_INTEG_TAG, which the application's receives never match
 * on a checking endpoint (ep_base.c); an eager one is read straight from
 * the unexpected queue, a rendezvous one (a manifest of thousands of pages)
 * through a receive of its own.
 *
 * Requests made here point at the endpoint through req->ep like every
 * request; the endpoint object begins with its base (api/api.h), which is
 * all this file reads of it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fault.h"
#include "core/log.h"
#include "cuda/crc_kernel.h"
#include "proto/proto_integrity.h"
#include "transport/base/batch.h"

struct gw_integ_set {
    uint32_t n, cap;
    uint8_t kind, check;
    gw_status_t (*submit)(gw_tl_ep_t *, gw_request_t *);
    struct sent {
        uint32_t idx, crc;
        int ldev; /* CUDA ordinal of the source, -1 host */
        uint64_t laddr, rid, raddr, len;
    } e[];
};

/* an operation waiting for its verdict (initiator) */
typedef struct integ_op {
    gw_list_t link;
    gw_request_t *parent, *child;
    uint32_t token;
    int have_verdict;
    gw_status_t verdict;
    char *vdetail;
} integ_op_t;

/* a manifest that came (target) */
typedef struct integ_man {
    struct integ_man *next;
    uint32_t token, n;
    uint8_t counted, kind, checked;
    uint64_t value;
    gw_integ_went_t e[];
} integ_man_t;

typedef struct gw_integ {
    gw_ep_base_t *base;
    gw_tl_ep_t *tl;
    gw_core_t *core;
    uint32_t next_token;
    gw_list_t ops;           /* integ_op_t, posting order */
    integ_man_t *mans;       /* manifests not yet paired, arrival order */
    /* notifications held: token | counted << 32, arrival order (ring) */
    uint64_t *held;
    size_t hhead, hcount, hcap;
    uint64_t checked, failed; /* notifications checked here, and how many failed */
} gw_integ_t;

static const char *const kind_name[] = {"put", "entry", "page"};

/* ---- wire ---- */
gw_status_t gw_integ_decode(const uint8_t *buf, size_t len, gw_integ_msg_t *m, char *why, size_t whylen)
{
    memset(m, 0, sizeof(*m));
    if (len < 8 || gw_get_u32(buf) != GW_INTEG_MAGIC) {
        snprintf(why, whylen, "integrity message of %zu bytes without the magic", len);
        return GW_ERR_PROTOCOL;
    }
    uint16_t ver = gw_get_u16(buf + 4);
    if (ver != GW_INTEG_VERSION) {
        snprintf(why, whylen, "integrity message of version %u (this side speaks %u)", ver, GW_INTEG_VERSION);
        return GW_ERR_VERSION;
    }
    m->type = buf[6];
    m->flags = buf[7];
    if (m->type == GW_INTEG_MANIFEST) {
        if (len < GW_INTEG_HDR) {
            snprintf(why, whylen, "integrity manifest of %zu bytes (the header is %u)", len, GW_INTEG_HDR);
            return GW_ERR_PROTOCOL;
        }
        m->token = gw_get_u32(buf + 8);
        m->counted = buf[12];
        m->kind = buf[13];
        m->value = gw_get_u64(buf + 16);
        m->n = gw_get_u32(buf + 24);
        if (m->counted > 1 || m->kind > GW_INTEG_KIND_PAGE || m->n > GW_INTEG_MAX_ENTS ||
            len != GW_INTEG_HDR + (size_t)m->n * GW_INTEG_ENT) {
            snprintf(why, whylen, "integrity manifest: counted %u, kind %u, %u entries in %zu bytes", m->counted,
                     m->kind, m->n, len);
            return GW_ERR_PROTOCOL;
        }
        m->ents = buf + GW_INTEG_HDR;
        return GW_OK;
    }
    if (m->type == GW_INTEG_VERDICT) {
        if (len < 18) {
            snprintf(why, whylen, "integrity verdict of %zu bytes (at least 18)", len);
            return GW_ERR_PROTOCOL;
        }
        m->token = gw_get_u32(buf + 8);
        m->status = (int32_t)gw_get_u32(buf + 12);
        m->detail_len = gw_get_u16(buf + 16);
        if (m->detail_len > GW_INTEG_DETAIL_MAX || len != 18u + m->detail_len ||
            (m->status != GW_OK && (m->status > 0 || m->status < -99))) {
            snprintf(why, whylen, "integrity verdict: status %d, detail of %u bytes in %zu", (int)m->status,
                     m->detail_len, len);
            return GW_ERR_PROTOCOL;
        }
        m->detail = (const char *)buf + 18;
        return GW_OK;
    }
    snprintf(why, whylen, "integrity message of unknown type %u", m->type);
    return GW_ERR_PROTOCOL;
}

void gw_integ_entry(const gw_integ_msg_t *m, uint32_t i, gw_integ_went_t *e)
{
    const uint8_t *p = m->ents + (size_t)i * GW_INTEG_ENT;
    e->idx = gw_get_u32(p);
    e->crc = gw_get_u32(p + 4);
    e->rid = gw_get_u64(p + 8);
    e->raddr = gw_get_u64(p + 16);
    e->len = gw_get_u64(p + 24);
}

/* ---- sets (built by the api layer) ---- */
gw_integ_set_t *gw_proto_integ_set_new(uint32_t n, int kind, int check)
{
    gw_integ_set_t *s = malloc(sizeof(*s) + (size_t)(n ? n : 1) * sizeof(s->e[0]));
    if (!s)
        return NULL;
    s->n = 0;
    s->cap = n;
    s->kind = (uint8_t)kind;
    s->check = (uint8_t)!!check;
    s->submit = NULL;
    return s;
}

void gw_proto_integ_set_add(gw_integ_set_t *s, uint32_t idx, const void *laddr, const gw_mem_t *lmem, uint64_t rid,
                            uint64_t raddr, uint64_t len)
{
    if (!len || s->n == s->cap)
        return;
    struct sent *e = &s->e[s->n++];
    e->idx = idx;
    e->crc = 0;
    e->ldev = lmem && lmem->type == GW_MEM_CUDA ? lmem->cuda_device : -1;
    e->laddr = (uint64_t)(uintptr_t)laddr;
    e->rid = rid;
    e->raddr = raddr;
    e->len = len;
}

void gw_proto_integ_set_route(gw_integ_set_t *s, gw_status_t (*submit)(gw_tl_ep_t *, gw_request_t *))
{
    s->submit = submit;
}

void gw_proto_integ_set_free(gw_integ_set_t *s)
{
    free(s);
}

/* ---- CRCs of many entries: host ones on the CPU, GPU ones one kernel per device ---- */
typedef struct crc_job {
    uint64_t addr, len;
    int dev;
    uint32_t *out;
} crc_job_t;

static gw_status_t crc_jobs(gw_core_t *core, crc_job_t *j, uint32_t n, const char *side)
{
    uint32_t ngpu = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (j[i].dev < 0)
            *j[i].out = gw_crc32c(0, (const void *)(uintptr_t)j[i].addr, (size_t)j[i].len);
        else
            ngpu++;
    }
    if (!ngpu)
        return GW_OK;
    /* GPU entries: grouped by device, one launch for each */
    uint64_t *addr = malloc(ngpu * sizeof(uint64_t)), *len = malloc(ngpu * sizeof(uint64_t));
    uint32_t *crc = malloc(ngpu * sizeof(uint32_t)), *who = malloc(ngpu * sizeof(uint32_t));
    gw_status_t st = GW_OK;
    if (!addr || !len || !crc || !who) {
        st = gw_err(core, GW_ERR_NOMEM, "integrity: out of memory for the CRCs of %u GPU entries", ngpu);
        goto out;
    }
    uint8_t *done = calloc(n, 1);
    if (!done) {
        st = gw_err(core, GW_ERR_NOMEM, "integrity: out of memory for the CRCs of %u GPU entries", ngpu);
        goto out;
    }
    for (uint32_t i = 0; i < n && st == GW_OK; i++) {
        if (j[i].dev < 0 || done[i])
            continue;
        int dev = j[i].dev;
        uint32_t k = 0;
        for (uint32_t t = i; t < n; t++)
            if (j[t].dev == dev && !done[t]) {
                addr[k] = j[t].addr;
                len[k] = j[t].len;
                who[k++] = t;
                done[t] = 1;
            }
        char why[256];
        st = gw_cuda_crc32c(dev, addr, len, crc, k, why, sizeof(why));
        if (st != GW_OK) {
            st = gw_err(core, st, "integrity: CRC32C of %u entries in GPU memory of device %d at the %s: %s", k, dev,
                        side, why);
            break;
        }
        for (uint32_t t = 0; t < k; t++)
            *j[who[t]].out = crc[t];
    }
    free(done);
out:
    free(addr);
    free(len);
    free(crc);
    free(who);
    return st;
}

/* ---- the check's messages ---- */
static void send_fini(gw_request_t *r)
{
    free(r->buf);
    r->buf = NULL;
}

/* Sends msg (malloc'd; owned here from now on) to the peer. */
static gw_status_t integ_send(gw_integ_t *g, uint8_t *msg, size_t len)
{
    gw_request_t *r = gw_req_alloc(g->core);
    if (!r) {
        free(msg);
        return gw_err(g->core, GW_ERR_NOMEM, "integrity: out of memory for a request");
    }
    r->op = GW_OP_SEND;
    r->ep = (struct gw_ep *)(void *)g->base; /* (the endpoint begins with its base) */
    r->buf = msg;
    r->len = len;
    r->value = GW_INTEG_TAG;
    r->fini = send_fini;
    r->flags |= GW_REQF_USER; /* held while posting */
    gw_ep_op_start(g->base, r);
    gw_status_t st = g->tl->iface->ops->submit(g->tl, r);
    if (st != GW_OK) {
        gw_ep_op_unstart(g->base, r);
        if (r->status == GW_INPROGRESS) { /* (one the endpoint's failure completed freed msg already) */
            r->fini = NULL;
            r->buf = NULL;
            r->status = st;
            free(msg);
        }
        r->flags = 0;
        gw_req_release(r);
        return st;
    }
    r->flags &= (uint8_t)~GW_REQF_USER;
    if (r->status != GW_INPROGRESS)
        gw_req_release(r);
    return GW_OK;
}

static gw_status_t send_verdict(gw_integ_t *g, uint32_t token, gw_status_t st, const char *detail)
{
    size_t dl = detail ? strlen(detail) : 0;
    if (dl > GW_INTEG_DETAIL_MAX)
        dl = GW_INTEG_DETAIL_MAX;
    uint8_t *m = calloc(1, 18 + dl);
    if (!m)
        return gw_err(g->core, GW_ERR_NOMEM, "integrity: out of memory for a verdict");
    gw_put_u32(m, GW_INTEG_MAGIC);
    gw_put_u16(m + 4, GW_INTEG_VERSION);
    m[6] = GW_INTEG_VERDICT;
    gw_put_u32(m + 8, token);
    gw_put_u32(m + 12, (uint32_t)st);
    gw_put_u16(m + 16, (uint16_t)dl);
    if (dl)
        memcpy(m + 18, detail, dl);
    return integ_send(g, m, 18 + dl);
}

/* A message of the check came (whole, in buf). */
static void on_msg(gw_integ_t *g, const uint8_t *buf, size_t len)
{
    gw_integ_msg_t m;
    char why[200];
    gw_status_t st = gw_integ_decode(buf, len, &m, why, sizeof(why));
    if (st != GW_OK) {
        gw_ep_fail(g->base, st, "integrity: from %s: %s", g->base->peer, why);
        return;
    }
    if (m.type == GW_INTEG_VERDICT) {
        gw_list_t *p, *t;
        gw_list_for_each_safe(p, t, &g->ops) {
            integ_op_t *o = gw_container_of(p, integ_op_t, link);
            if (o->token == m.token && !o->have_verdict) {
                o->have_verdict = 1;
                o->verdict = m.status;
                if (m.status != GW_OK) {
                    o->vdetail = malloc((size_t)m.detail_len + 1);
                    if (o->vdetail) {
                        memcpy(o->vdetail, m.detail, m.detail_len);
                        o->vdetail[m.detail_len] = '\0';
                    }
                }
                return;
            }
        }
        return; /* (an operation that failed on its own, already completed) */
    }
    integ_man_t *man = malloc(sizeof(*man) + (size_t)m.n * sizeof(man->e[0]));
    if (!man) {
        gw_ep_fail(g->base, GW_ERR_NOMEM, "integrity: out of memory for a manifest of %u entries", m.n);
        return;
    }
    man->next = NULL;
    man->token = m.token;
    man->n = m.n;
    man->counted = m.counted;
    man->kind = m.kind;
    man->checked = (m.flags & GW_INTEG_F_CHECKED) != 0;
    man->value = m.value;
    for (uint32_t i = 0; i < m.n; i++)
        gw_integ_entry(&m, i, &man->e[i]);
    integ_man_t **t = &g->mans;
    while (*t)
        t = &(*t)->next;
    *t = man;
}

static void rx_fini(gw_request_t *r)
{
    gw_ep_base_t *b = (gw_ep_base_t *)(void *)r->ep;
    if (r->status == GW_OK && b->integ)
        on_msg(b->integ, r->buf, r->length);
    free(r->buf);
    r->buf = NULL;
}

/* Takes the check's messages out of the unexpected queue. */
static int take_msgs(gw_integ_t *g)
{
    gw_ep_base_t *b = g->base;
    int ev = 0;
    gw_list_t *p, *t;
    gw_list_for_each_safe(p, t, &b->unexpected) {
        gw_unexp_t *u = gw_container_of(p, gw_unexp_t, link);
        if (u->tag != GW_INTEG_TAG || u->filling)
            continue;
        ev++;
        gw_list_del(&u->link);
        if (u->data) {
            on_msg(g, u->data, u->len);
            gw_ep_unexp_free(b, u);
            continue;
        }
        /* a rendezvous: a receive of its own fetches it */
        gw_request_t *r = gw_req_alloc(g->core);
        void *buf = malloc(u->len ? u->len : 1);
        if (!r || !buf) {
            free(buf);
            if (r)
                gw_req_release(r);
            gw_ep_unexp_free(b, u);
            gw_ep_fail(b, GW_ERR_NOMEM, "integrity: out of memory for a message of %zu bytes", u->len);
            return ev;
        }
        r->op = GW_OP_RECV;
        r->ep = (struct gw_ep *)(void *)b;
        r->buf = buf;
        r->len = u->len;
        r->value = GW_INTEG_TAG;
        r->mask = ~0ull;
        r->fini = rx_fini;
        gw_status_t st = gw_ep_recv_unexp(b, r, u, g->tl->iface->ops->recv_matched, g->tl);
        if (st != GW_OK && r->status == GW_INPROGRESS) {
            gw_req_complete(r, st); /* (frees the buffer) */
            gw_ep_fail(b, st, "integrity: could not fetch a message of the check from %s: %s", b->peer,
                       g->core->errbuf);
            return ev;
        }
    }
    return ev;
}

/* ---- target: the gate and the check ---- */
static int gate(void *arg, uint64_t value, int counted)
{
    gw_integ_t *g = arg;
    if (g->hcount == g->hcap) {
        size_t cap = g->hcap ? g->hcap * 2 : 64;
        uint64_t *q = malloc(cap * sizeof(*q));
        if (!q)
            return -1;
        for (size_t i = 0; i < g->hcount; i++)
            q[i] = g->held[(g->hhead + i) % g->hcap];
        free(g->held);
        g->held = q;
        g->hcap = cap;
        g->hhead = 0;
    }
    g->held[(g->hhead + g->hcount) % g->hcap] = (value & 0xffffffffu) | ((uint64_t)!!counted << 32);
    g->hcount++;
    return 0;
}

static integ_man_t *man_take(gw_integ_t *g, uint32_t token)
{
    for (integ_man_t **t = &g->mans; *t; t = &(*t)->next)
        if ((*t)->token == token) {
            integ_man_t *m = *t;
            *t = m->next;
            return m;
        }
    return NULL;
}

/* Checks the entries of man where they landed: GW_OK, or an error with
 * the detail in det. */
static gw_status_t check_man(gw_integ_t *g, const integ_man_t *man, char *det, size_t detlen)
{
    gw_core_t *core = g->core;
    const char *kn = kind_name[man->kind];
    if (!man->checked || !man->n)
        return GW_OK;
    crc_job_t *j = malloc(man->n * sizeof(*j));
    uint32_t *got = malloc(man->n * sizeof(uint32_t));
    const gw_mem_t **reg = malloc(man->n * sizeof(*reg));
    gw_status_t st = GW_OK;
    if (!j || !got || !reg) {
        snprintf(det, detlen, "out of memory for the check of %u entries", man->n);
        st = GW_ERR_NOMEM;
        goto out;
    }
    for (uint32_t i = 0; i < man->n; i++) {
        const gw_integ_went_t *e = &man->e[i];
        const gw_mem_t *m = gw_hmap_get(&core->regions, e->rid);
        reg[i] = m;
        if (!m || !(m->access & GW_ACCESS_REMOTE_WRITE) ||
            !gw_range_inside((uint64_t)(uintptr_t)m->addr, m->len, e->raddr, e->len)) {
            snprintf(det, detlen, "%s %u: [0x%llx, +%llu) is %s", kn, e->idx, (unsigned long long)e->raddr,
                     (unsigned long long)e->len,
                     !m ? "in no region registered here (deregistered since?)"
                        : !(m->access & GW_ACCESS_REMOTE_WRITE) ? "in a region peers may not write"
                                                                : "outside its region");
            st = GW_ERR_PROTOCOL;
            goto out;
        }
        j[i] = (crc_job_t){e->raddr, e->len, m->type == GW_MEM_CUDA ? m->cuda_device : -1, &got[i]};
    }
    if ((st = crc_jobs(core, j, man->n, "target")) != GW_OK) {
        snprintf(det, detlen, "%.400s", core->errbuf);
        goto out;
    }
    uint32_t bad = 0, first = 0;
    for (uint32_t i = 0; i < man->n; i++)
        if (got[i] != man->e[i].crc && !bad++)
            first = i;
    if (bad) {
        const gw_integ_went_t *e = &man->e[first];
        uint64_t off = e->raddr - (uint64_t)(uintptr_t)reg[first]->addr;
        snprintf(det, detlen,
                 "integrity check failed at the target: %s %u (remote 0x%llx, offset %llu in its region of %zu "
                 "bytes, %llu bytes) differs: expected CRC32C 0x%08x (taken at the source), found 0x%08x; "
                 "%u of %u %ss differ",
                 kn, e->idx, (unsigned long long)e->raddr, (unsigned long long)off, reg[first]->len,
                 (unsigned long long)e->len, e->crc, got[first], bad, man->n, kn);
        st = GW_ERR_INTEGRITY;
    }
out:
    free(j);
    free(got);
    free(reg);
    return st;
}

/* Checks and delivers held notifications in arrival order, as far as
 * their manifests came. */
static int check_held(gw_integ_t *g)
{
    gw_ep_base_t *b = g->base;
    int ev = 0;
    while (g->hcount) {
        uint64_t h = g->held[g->hhead];
        uint32_t token = (uint32_t)h;
        int counted = (int)(h >> 32);
        integ_man_t *man = man_take(g, token);
        if (!man)
            break;
        g->hhead = (g->hhead + 1) % g->hcap;
        g->hcount--;
        ev++;
        if (man->counted != counted) {
            gw_ep_fail(b, GW_ERR_PROTOCOL, "integrity: the manifest of token %u from %s says %s, its notification "
                       "came %s", token, b->peer, man->counted ? "counted" : "ordered",
                       counted ? "counted" : "ordered");
            free(man);
            return ev;
        }
        char det[GW_INTEG_DETAIL_MAX];
        det[0] = '\0';
        gw_status_t st = check_man(g, man, det, sizeof(det));
        g->checked++;
        if (st != GW_OK) {
            g->failed++;
            gw_log(GW_LOG_WARN, "endpoint to %s: %s notification %llu: %s", b->peer,
                   man->counted ? "counted" : "ordered", (unsigned long long)man->value, det);
        }
        if (gw_ep_notify_deliver(b, man->value, man->counted, st != GW_OK ? det : NULL) != 0) {
            free(man);
            gw_ep_fail(b, GW_ERR_NOMEM, "integrity: out of memory for a notification");
            return ev;
        }
        gw_status_t sst = send_verdict(g, token, st, det);
        free(man);
        if (sst != GW_OK && !gw_ep_failed(b))
            gw_ep_fail(b, sst, "integrity: could not send a verdict to %s: %s", b->peer, g->core->errbuf);
        gw_core_signal(g->core);
    }
    return ev;
}

/* ---- initiator ---- */
static void op_finish(gw_integ_t *g, integ_op_t *o, gw_status_t st, const char *detail)
{
    gw_request_t *p = o->parent, *c = o->child;
    gw_list_del(&o->link);
    g->base->integ_waiting--;
    p->length = st == GW_OK ? c->length : 0;
    if (st != GW_OK) {
        free(p->detail);
        p->detail = detail ? strdup(detail) : NULL;
        if (p->err_sink && *p->err_sink == GW_OK)
            *p->err_sink = st;
        gw_err(g->core, st, "%s", detail ? detail : gw_status_str(st));
    }
    gw_req_complete(p, st);
    c->flags &= (uint8_t)~GW_REQF_USER;
    gw_req_release(c);
    free(o->vdetail);
    free(o);
}

static int check_ops(gw_integ_t *g)
{
    int ev = 0;
    gw_list_t *p, *t;
    gw_list_for_each_safe(p, t, &g->ops) {
        integ_op_t *o = gw_container_of(p, integ_op_t, link);
        gw_request_t *c = o->child;
        if (c->status == GW_INPROGRESS)
            continue;
        if (c->status != GW_OK)
            op_finish(g, o, c->status, c->detail);
        else if (o->have_verdict)
            op_finish(g, o, o->verdict, o->vdetail);
        else if (gw_ep_failed(g->base))
            op_finish(g, o, g->base->error, g->base->error_detail);
        else
            continue;
        ev++;
    }
    return ev;
}

/* The fault point integ.source (flip[=B]): after the CRC of an entry in
 * host memory is taken, a bit of its byte B (default 0) is flipped, as an
 * application writing into a buffer whose transfer is in flight would. */
static void source_fault(struct sent *e)
{
    gw_fault_t f;
    if (e->ldev >= 0 || !gw_fault_at("integ.source", &f) || f.act != GW_FAULT_FLIP)
        return;
    uint64_t off = f.has_arg ? (uint64_t)f.arg : 0;
    if (off >= e->len)
        off = e->len - 1;
    ((volatile uint8_t *)(uintptr_t)e->laddr)[off] ^= 0x01;
}

gw_status_t gw_proto_integ_submit(gw_tl_ep_t *tl, gw_request_t *req)
{
    gw_ep_base_t *b = tl->base;
    gw_integ_t *g = b->integ;
    gw_core_t *core = tl->iface->core;
    gw_integ_set_t *s = req->owner;
    req->owner = NULL;
    if (!g || !s || !s->submit) {
        gw_proto_integ_set_free(s);
        return gw_err(core, GW_ERR_INVALID, "integrity: the endpoint to %s does not check", b->peer);
    }
    gw_status_t st = GW_OK;
    /* 1. the CRCs of the source, before anything moves */
    if (s->check && s->n) {
        crc_job_t *j = malloc(s->n * sizeof(*j));
        if (!j) {
            uint32_t n = s->n;
            gw_proto_integ_set_free(s);
            return gw_err(core, GW_ERR_NOMEM, "integrity: out of memory for %u CRCs", n);
        }
        for (uint32_t i = 0; i < s->n; i++)
            j[i] = (crc_job_t){s->e[i].laddr, s->e[i].len, s->e[i].ldev, &s->e[i].crc};
        st = crc_jobs(core, j, s->n, "source");
        free(j);
        if (st != GW_OK) {
            gw_proto_integ_set_free(s);
            return st;
        }
        if (GW_UNLIKELY(gw_fault_on))
            for (uint32_t i = 0; i < s->n; i++)
                source_fault(&s->e[i]);
    }
    /* 2. the manifest, before posting (an out-of-memory then leaves nothing behind) */
    uint32_t token = g->next_token;
    g->next_token = g->next_token >= 0x7fffffffu ? 1 : g->next_token + 1;
    size_t mlen = GW_INTEG_HDR + (size_t)s->n * GW_INTEG_ENT;
    uint8_t *msg = calloc(1, mlen);
    integ_op_t *o = calloc(1, sizeof(*o));
    gw_request_t *c = gw_req_alloc(core);
    if (!msg || !o || !c) {
        free(msg);
        free(o);
        if (c)
            gw_req_release(c);
        uint32_t n = s->n;
        gw_proto_integ_set_free(s);
        return gw_err(core, GW_ERR_NOMEM, "integrity: out of memory for the manifest of %u entries", n);
    }
    int counted = gw_req_notify_counted(req);
    uint64_t value = req->op == GW_OP_BATCH ? req->batch->value : req->value;
    gw_put_u32(msg, GW_INTEG_MAGIC);
    gw_put_u16(msg + 4, GW_INTEG_VERSION);
    msg[6] = GW_INTEG_MANIFEST;
    msg[7] = s->check ? GW_INTEG_F_CHECKED : 0;
    gw_put_u32(msg + 8, token);
    msg[12] = (uint8_t)counted;
    msg[13] = s->kind;
    gw_put_u64(msg + 16, value);
    gw_put_u32(msg + 24, s->n);
    for (uint32_t i = 0; i < s->n; i++) {
        uint8_t *p = msg + GW_INTEG_HDR + (size_t)i * GW_INTEG_ENT;
        gw_put_u32(p, s->e[i].idx);
        gw_put_u32(p + 4, s->e[i].crc);
        gw_put_u64(p + 8, s->e[i].rid);
        gw_put_u64(p + 16, s->e[i].raddr);
        gw_put_u64(p + 24, s->e[i].len);
    }
    /* 3. the operation itself, as a request of its own, with the token */
    c->op = req->op;
    c->ep = req->ep;
    c->buf = req->buf;
    c->len = req->len;
    c->lmem = req->lmem;
    c->rkey = req->rkey;
    c->raddr = req->raddr;
    c->value = token;
    c->batch = req->batch;
    c->fini = req->fini;
    if (c->batch)
        c->batch->value = token;
    c->flags |= GW_REQF_USER; /* held here until its verdict is in */
    gw_ep_op_unstart(b, req);
    gw_ep_op_start(b, c);
    st = s->submit(tl, c);
    uint32_t nent = s->n;
    gw_proto_integ_set_free(s);
    if (st != GW_OK) {
        gw_ep_op_unstart(b, c);
        if (c->status == GW_INPROGRESS) { /* refused as it came: the batch goes back to the caller's request */
            if (c->batch)
                c->batch->value = value;
            c->status = st;
        } else { /* completed (failed) on the way: its hook let go of the batch already */
            req->batch = NULL;
            req->fini = NULL;
        }
        gw_ep_op_start(b, req); /* (the caller takes it back off as it refuses it) */
        c->batch = NULL;
        c->fini = NULL;
        c->flags = 0;
        gw_req_release(c);
        free(msg);
        free(o);
        return st;
    }
    req->batch = NULL; /* the child's now (its hook frees it) */
    req->fini = NULL;
    o->parent = req;
    o->child = c;
    o->token = token;
    gw_list_push_back(&g->ops, &o->link);
    b->integ_waiting++; /* (the peer's silence counts while a verdict is due: liveness.h) */
    /* 4. the manifest: its loss fails the endpoint (the target would hold the
     * notification for ever) */
    st = integ_send(g, msg, mlen);
    if (st != GW_OK && !gw_ep_failed(b))
        gw_ep_fail(b, st, "integrity: could not send the manifest of %u entries to %s: %s", nent, b->peer,
                   core->errbuf);
    return GW_OK;
}

/* ---- attach, detach, poll ---- */
gw_status_t gw_proto_integ_attach(gw_ep_base_t *b, gw_tl_ep_t *tl)
{
    gw_integ_t *g = calloc(1, sizeof(*g));
    if (!g)
        return gw_err(tl->iface->core, GW_ERR_NOMEM, "integrity: out of memory for the endpoint's state");
    g->base = b;
    g->tl = tl;
    g->core = tl->iface->core;
    g->next_token = 1;
    gw_list_init(&g->ops);
    b->integ = g;
    b->notify_gate = gate;
    b->notify_gate_arg = g;
    return GW_OK;
}

void gw_proto_integ_detach(gw_ep_base_t *b)
{
    gw_integ_t *g = b->integ;
    if (!g)
        return;
    gw_list_t *p, *t;
    gw_list_for_each_safe(p, t, &g->ops) {
        integ_op_t *o = gw_container_of(p, integ_op_t, link);
        gw_status_t st = gw_ep_failed(b) ? b->error : GW_ERR_CANCELED;
        op_finish(g, o, st, gw_ep_failed(b) ? b->error_detail : "integrity: the endpoint closed before the verdict came");
    }
    while (g->mans) {
        integ_man_t *m = g->mans;
        g->mans = m->next;
        free(m);
    }
    if (g->checked)
        gw_log(GW_LOG_INFO, "endpoint to %s: %llu notification(s) checked, %llu failed the check", b->peer,
               (unsigned long long)g->checked, (unsigned long long)g->failed);
    free(g->held);
    b->notify_gate = NULL;
    b->notify_gate_arg = NULL;
    b->integ = NULL;
    free(g);
}

unsigned gw_proto_integ_busy(const gw_ep_base_t *b)
{
    const gw_integ_t *g = b->integ;
    return g && !gw_list_empty(&g->ops);
}

int gw_proto_integ_poll(gw_ep_base_t *b)
{
    gw_integ_t *g = b->integ;
    if (!g)
        return 0;
    int ev = 0;
    if (!gw_list_empty(&b->unexpected))
        ev += take_msgs(g);
    if (g->hcount)
        ev += check_held(g);
    if (!gw_list_empty(&g->ops))
        ev += check_ops(g);
    return ev;
}
