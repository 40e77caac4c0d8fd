/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gwnx_wire.c - the parts of the NIXL backend that need no context:
 * status mapping, notification frames, pairing, agent map, descriptor
 * translation.
 */
#include "gwnx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int gwnx_status_from_gw(gw_status_t st)
{
    switch (st) {
    case GW_OK:
        return GWNX_SUCCESS;
    case GW_INPROGRESS:
        return GWNX_IN_PROG;
    case GW_ERR_INVALID:
    case GW_ERR_OUT_OF_BOUNDS:
    case GW_ERR_CONFIG:
        return GWNX_ERR_INVALID_PARAM;
    case GW_ERR_ACCESS:
        return GWNX_ERR_NOT_ALLOWED;
    case GW_ERR_UNSUPPORTED:
    case GW_ERR_NOT_BUILT:
    case GW_ERR_UNAVAILABLE:
        return GWNX_ERR_NOT_SUPPORTED;
    case GW_ERR_NOT_FOUND:
        return GWNX_ERR_NOT_FOUND;
    case GW_ERR_CANCELED:
        return GWNX_ERR_CANCELED;
    case GW_ERR_INVALID_KEY:
        /* the peer revoked the region (deregistered, restarted): NIXL's
         * answer to stale metadata */
        return GWNX_ERR_INVALID_PARAM;
    case GW_ERR_BUSY:
        return GWNX_ERR_NOT_ALLOWED;
    default:
        if (GW_IS_ENDPOINT_ERROR(st) || st == GW_ERR_TIMEOUT)
            return GWNX_ERR_REMOTE_DISCONNECT;
        return GWNX_ERR_BACKEND;
    }
}

/* ---- frames -------------------------------------------------------------- */
/* header: magic u32 | version u16 | reserved u16 | seq u64 | name_len u32 |
 * msg_len u32, little-endian; then the name, then the message */
#define FRAME_MAGIC 0x584e5747u /* "GWNX" */
#define FRAME_VERSION 1

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}
static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)p[i] << (8 * i);
    return v;
}
static uint64_t get64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

size_t gwnx_frame_size(size_t name_len, size_t msg_len)
{
    return GWNX_FRAME_HDR + name_len + msg_len;
}

size_t gwnx_frame_encode(void *buf, size_t cap, uint64_t seq, const char *name, size_t name_len,
                         const void *msg, size_t msg_len)
{
    if (name_len > GWNX_MAX_NAME || msg_len > GWNX_MAX_MSG)
        return 0;
    size_t need = gwnx_frame_size(name_len, msg_len);
    if (!buf || cap < need)
        return 0;
    unsigned char *p = buf;
    put32(p, FRAME_MAGIC);
    p[4] = FRAME_VERSION;
    p[5] = 0;
    p[6] = p[7] = 0;
    put64(p + 8, seq);
    put32(p + 16, (uint32_t)name_len);
    put32(p + 20, (uint32_t)msg_len);
    if (name_len)
        memcpy(p + GWNX_FRAME_HDR, name, name_len);
    if (msg_len)
        memcpy(p + GWNX_FRAME_HDR + name_len, msg, msg_len);
    return need;
}

int gwnx_frame_decode(const void *buf, size_t len, gwnx_frame_view_t *out)
{
    const unsigned char *p = buf;
    if (!buf || !out || len < GWNX_FRAME_HDR)
        return -1;
    if (get32(p) != FRAME_MAGIC || p[4] != FRAME_VERSION || p[5] != 0)
        return -1;
    uint64_t nl = get32(p + 16), ml = get32(p + 20);
    if (nl > GWNX_MAX_NAME || ml > GWNX_MAX_MSG || GWNX_FRAME_HDR + nl + ml != len)
        return -1;
    out->seq = get64(p + 8);
    out->name = (const char *)p + GWNX_FRAME_HDR;
    out->name_len = (size_t)nl;
    out->msg = p + GWNX_FRAME_HDR + nl;
    out->msg_len = (size_t)ml;
    return 0;
}

/* ---- pairing ------------------------------------------------------------- */
int gwnx_pairing_add_frame(gwnx_pairing_t *p, const gwnx_frame_view_t *f)
{
    gwnx_pending_t *e = calloc(1, sizeof(*e));
    if (!e)
        return -1;
    e->name = malloc(f->name_len + 1);
    e->msg = malloc(f->msg_len ? f->msg_len : 1);
    if (!e->name || !e->msg) {
        gwnx_pending_free(e);
        return -1;
    }
    memcpy(e->name, f->name, f->name_len);
    e->name[f->name_len] = 0;
    e->name_len = f->name_len;
    if (f->msg_len)
        memcpy(e->msg, f->msg, f->msg_len);
    e->msg_len = f->msg_len;
    e->seq = f->seq;
    if (p->tail)
        p->tail->next = e;
    else
        p->head = e;
    p->tail = e;
    return 0;
}

void gwnx_pairing_landed(gwnx_pairing_t *p, uint64_t value)
{
    if (value > p->landed)
        p->landed = value;
}

gwnx_pending_t *gwnx_pairing_take(gwnx_pairing_t *p)
{
    gwnx_pending_t *e = p->head;
    if (!e || e->seq > p->landed)
        return NULL;
    p->head = e->next;
    if (!p->head)
        p->tail = NULL;
    e->next = NULL;
    return e;
}

void gwnx_pending_free(gwnx_pending_t *e)
{
    if (!e)
        return;
    free(e->name);
    free(e->msg);
    free(e);
}

void gwnx_pairing_clear(gwnx_pairing_t *p)
{
    gwnx_pending_t *e = p->head;
    while (e) {
        gwnx_pending_t *n = e->next;
        gwnx_pending_free(e);
        e = n;
    }
    p->head = p->tail = NULL;
}

/* ---- agent map ----------------------------------------------------------- */
/* A linear map: a NIXL agent talks to a handful of peers, and lookups are
 * per transfer preparation, not per descriptor. */
gwnx_agent_t *gwnx_agent_find(const gwnx_agent_map_t *m, const char *name)
{
    for (size_t i = 0; i < m->n; i++)
        if (strcmp(m->v[i]->name, name) == 0)
            return m->v[i];
    return NULL;
}

gwnx_agent_t *gwnx_agent_get(gwnx_agent_map_t *m, const char *name)
{
    gwnx_agent_t *a = gwnx_agent_find(m, name);
    if (a)
        return a;
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 8;
        gwnx_agent_t **v = realloc(m->v, cap * sizeof(*v));
        if (!v)
            return NULL;
        m->v = v;
        m->cap = cap;
    }
    a = calloc(1, sizeof(*a));
    if (!a || !(a->name = strdup(name))) {
        free(a);
        return NULL;
    }
    m->v[m->n++] = a;
    return a;
}

void gwnx_agent_remove(gwnx_agent_map_t *m, gwnx_agent_t *a)
{
    for (size_t i = 0; i < m->n; i++) {
        if (m->v[i] == a) {
            m->v[i] = m->v[--m->n];
            free(a->name);
            free(a->conn_info);
            free(a);
            return;
        }
    }
}

void gwnx_agent_map_clear(gwnx_agent_map_t *m)
{
    for (size_t i = 0; i < m->n; i++) {
        free(m->v[i]->name);
        free(m->v[i]->conn_info);
        free(m->v[i]);
    }
    free(m->v);
    m->v = NULL;
    m->n = m->cap = 0;
}

/* ---- descriptor translation ---------------------------------------------- */
static int within(const gwnx_span_t *s)
{
    return s->addr >= s->base && s->len <= s->size && s->addr - s->base <= s->size - s->len;
}

int gwnx_translate(const gwnx_span_t *local, const gwnx_span_t *remote, size_t n, uint64_t *loff,
                   uint64_t *roff, char *err, size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        if (local[i].len != remote[i].len) {
            snprintf(err, errlen, "descriptor %zu: local length %zu != remote length %zu", i,
                     local[i].len, remote[i].len);
            return -1;
        }
        if (!within(&local[i])) {
            snprintf(err, errlen,
                     "descriptor %zu: local [0x%llx, +%zu) outside its registration [0x%llx, +%zu)", i,
                     (unsigned long long)local[i].addr, local[i].len,
                     (unsigned long long)local[i].base, local[i].size);
            return -1;
        }
        if (!within(&remote[i])) {
            snprintf(err, errlen,
                     "descriptor %zu: remote [0x%llx, +%zu) outside the peer's region [0x%llx, +%zu)",
                     i, (unsigned long long)remote[i].addr, remote[i].len,
                     (unsigned long long)remote[i].base, remote[i].size);
            return -1;
        }
        loff[i] = local[i].addr - local[i].base;
        roff[i] = remote[i].addr - remote[i].base;
    }
    return 0;
}
