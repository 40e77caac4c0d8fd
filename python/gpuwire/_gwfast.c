/*
 * _gwfast.c - optional C accelerator for the gpuwire package's hot path.
 *
 * ctypes costs about 1.3 us per 7-argument call on an H100 host (argument
 * conversion), a C extension about 0.13 us (bench/python_overhead.sh,
 * docs/PERFORMANCE.md), so the operations whose overhead the package promises
 * (put, get, put_notify, waiting on their requests, and the batched and
 * paged posts with their index arrays) go through this module when it is
 * built; everything else, and every call when it is not
 * built, goes through ctypes.  It links nothing: the package hands it the
 * addresses of the libgpuwire functions ctypes already loaded, so both
 * paths always use one library instance.  Built against the stable ABI
 * (abi3, Python >= 3.11: the buffer protocol joined the limited API there),
 * so one build serves every later Python version.
 */
#define Py_LIMITED_API 0x030B0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpuwire.h"

typedef gw_status_t (*put_fn)(gw_ep_t *, const void *, size_t, gw_mem_t *, uint64_t, gw_rkey_t *,
                              gw_request_t **);
typedef gw_status_t (*putn_fn)(gw_ep_t *, const void *, size_t, gw_mem_t *, uint64_t, gw_rkey_t *,
                               uint64_t, gw_request_t **);
typedef gw_status_t (*wait_fn)(gw_request_t *, int);
typedef gw_status_t (*test_fn)(const gw_request_t *);
typedef void (*free_fn)(gw_request_t *);
typedef gw_status_t (*batch_fn)(gw_ep_t *, int, gw_dlist_t *, const uint32_t *, gw_dlist_t *, const uint32_t *,
                                size_t, const gw_xfer_opts_t *, gw_request_t **);
typedef gw_status_t (*pages_fn)(gw_ep_t *, int, gw_mem_t *, void *, const uint32_t *, gw_rkey_t *, uint64_t,
                                const uint32_t *, size_t, size_t, const gw_xfer_opts_t *, gw_request_t **);

static put_fn f_put, f_get;
static putn_fn f_put_notify;
static wait_fn f_wait;
static test_fn f_test;
static free_fn f_free;
static batch_fn f_batch;   /* NULL with a library older than the batched API */
static pages_fn f_pages;

/* init(put, get, put_notify, request_wait, request_test, request_free
 *      [, xfer_batch, xfer_pages]): addresses (the last two may be 0) */
static PyObject *fast_init(PyObject *self, PyObject *const *a, Py_ssize_t n)
{
    if (n != 6 && n != 8) {
        PyErr_SetString(PyExc_TypeError, "init takes six or eight function addresses");
        return NULL;
    }
    f_batch = NULL;
    f_pages = NULL;
    if (n == 8) {
        f_batch = (batch_fn)PyLong_AsVoidPtr(a[6]);
        f_pages = (pages_fn)PyLong_AsVoidPtr(a[7]);
        if (PyErr_Occurred())
            return NULL;
    }
    void *p[6];
    for (int i = 0; i < 6; i++) {
        p[i] = PyLong_AsVoidPtr(a[i]);
        if (!p[i])
            return PyErr_Occurred() ? NULL : (PyErr_SetString(PyExc_ValueError, "NULL address"), NULL);
    }
    f_put = (put_fn)p[0];
    f_get = (put_fn)p[1];
    f_put_notify = (putn_fn)p[2];
    f_wait = (wait_fn)p[3];
    f_test = (test_fn)p[4];
    f_free = (free_fn)p[5];
    Py_RETURN_NONE;
}

/* rma(op, ep, addr, len, mem|0, raddr, rkey, value, track) -> int:
 * op 0 put, 1 get, 2 put_notify.  Returns the request's address (track),
 * 0 (untracked), or the negative status of a refused post. */
static PyObject *fast_rma(PyObject *self, PyObject *const *a, Py_ssize_t n)
{
    if (n != 9) {
        PyErr_SetString(PyExc_TypeError, "rma takes 9 arguments");
        return NULL;
    }
    long op = PyLong_AsLong(a[0]);
    void *ep = PyLong_AsVoidPtr(a[1]);
    void *addr = PyLong_AsVoidPtr(a[2]);
    size_t len = PyLong_AsSize_t(a[3]);
    void *mem = PyLong_AsVoidPtr(a[4]);
    unsigned long long raddr = PyLong_AsUnsignedLongLong(a[5]);
    void *rkey = PyLong_AsVoidPtr(a[6]);
    unsigned long long value = PyLong_AsUnsignedLongLong(a[7]);
    int track = PyObject_IsTrue(a[8]);
    if (PyErr_Occurred())
        return NULL;
    if (!f_put) {
        PyErr_SetString(PyExc_RuntimeError, "_gwfast.init() was not called");
        return NULL;
    }
    gw_request_t *req = NULL;
    gw_request_t **rp = track ? &req : NULL;
    gw_status_t st;
    Py_BEGIN_ALLOW_THREADS
    if (op == 0)
        st = f_put(ep, addr, len, mem, raddr, rkey, rp);
    else if (op == 1)
        st = f_get(ep, addr, len, mem, raddr, rkey, rp);
    else
        st = f_put_notify(ep, addr, len, mem, raddr, rkey, value, rp);
    Py_END_ALLOW_THREADS
    if (st != GW_OK)
        return PyLong_FromLong(st);
    return PyLong_FromVoidPtr(req);
}

/* wait_free(req, timeout_ms) -> status.  1 (GW_INPROGRESS): timed out, the
 * request is still valid; GW_OK: complete, request freed; an error: the
 * request failed and is NOT freed (the caller reads its error detail with
 * gw_request_info, then frees it). */
static PyObject *fast_wait_free(PyObject *self, PyObject *const *a, Py_ssize_t n)
{
    if (n != 2) {
        PyErr_SetString(PyExc_TypeError, "wait_free takes 2 arguments");
        return NULL;
    }
    gw_request_t *req = PyLong_AsVoidPtr(a[0]);
    int ms = (int)PyLong_AsLong(a[1]);
    if (PyErr_Occurred())
        return NULL;
    gw_status_t st;
    Py_BEGIN_ALLOW_THREADS
    st = f_wait(req, ms);
    if (st == GW_ERR_TIMEOUT && f_test(req) == GW_INPROGRESS)
        st = GW_INPROGRESS;
    else if (st == GW_OK)
        f_free(req);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(st);
}

/* ---- index arrays of the batched and paged transfers ------------------------ */
/* An index array as the C API takes it: a uint32_t vector.  Taken without a
 * copy from a buffer of 4-byte unsigned integers (numpy.uint32, array('I'));
 * checked for negatives, without a copy, when the integers are signed;
 * converted (checked) when they are 8 bytes wide or given as a list or
 * tuple.  Anything else (floats, bools, 1- or 2-byte integers, another
 * ndim, not contiguous) is refused with a ValueError naming the argument. */
typedef struct idx {
    const uint32_t *p;   /* NULL: the argument was None */
    Py_ssize_t n;
    uint32_t *owned;     /* a converted copy, freed by idx_release */
    Py_buffer view;
    int has_view;
} idx_t;

static void idx_release(idx_t *x)
{
    if (x->has_view)
        PyBuffer_Release(&x->view);
    free(x->owned);
    memset(x, 0, sizeof(*x));
}

/* The name of o's type into buf (the limited API hides tp_name). */
static const char *tname(PyObject *o, char *buf, size_t len)
{
    PyObject *n = PyType_GetName(Py_TYPE(o));
    const char *u = n ? PyUnicode_AsUTF8AndSize(n, NULL) : NULL;
    snprintf(buf, len, "%s", u ? u : "?");
    Py_XDECREF(n);
    PyErr_Clear();
    return buf;
}

static int idx_bad(const char *name, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    PyOS_vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    PyErr_Format(PyExc_ValueError, "%s: %s", name, msg);
    return -1;
}

static int idx_from_seq(PyObject *o, const char *name, idx_t *x)
{
    Py_ssize_t n = PySequence_Size(o);
    if (n < 0)
        return -1;
    x->owned = malloc((size_t)(n ? n : 1) * sizeof(uint32_t));
    if (!x->owned) {
        PyErr_NoMemory();
        return -1;
    }
    int is_list = PyList_Check(o);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = is_list ? PyList_GetItem(o, i) : PyTuple_GetItem(o, i); /* borrowed */
        if (!it)
            return -1;
        if (!PyLong_Check(it))
        {
            char tb[64];
            return idx_bad(name, "item %zd is a %s, not an int", i, tname(it, tb, sizeof(tb)));
        }
        int over = 0;
        long long v = PyLong_AsLongLongAndOverflow(it, &over);
        if (v == -1 && PyErr_Occurred())
            return -1;
        if (over || v < 0 || v > (long long)UINT32_MAX)
            return idx_bad(name, "item %zd is %s: an index is 0 .. 4294967295", i,
                           over > 0 || v > 0 ? "too large" : "negative");
        x->owned[i] = (uint32_t)v;
    }
    x->p = x->owned;
    x->n = n;
    return 0;
}

static int idx_get(PyObject *o, const char *name, idx_t *x)
{
    memset(x, 0, sizeof(*x));
    if (o == Py_None)
        return 0;
    if (PyList_Check(o) || PyTuple_Check(o))
        return idx_from_seq(o, name, x);
    if (PyObject_GetBuffer(o, &x->view, PyBUF_FORMAT | PyBUF_STRIDES) != 0) {
        char tb[64];
        PyErr_Clear();
        return idx_bad(name, "a %s is not an index array: give a list of ints, a 1-D NumPy array or tensor of "
                       "int32/uint32/int64/uint64, or an array('I')", tname(o, tb, sizeof(tb)));
    }
    x->has_view = 1;
    Py_buffer *v = &x->view;
    const char *f = v->format ? v->format : "B";
    if (*f == '@' || *f == '=' || *f == '<' || *f == '!' || *f == '>')
        f++;
    char k = f[0];
    int ok_fmt = f[0] && !f[1] && strchr("iIlLqQnN", k) && (v->itemsize == 4 || v->itemsize == 8);
    if (!ok_fmt)
        return idx_bad(name, "dtype with format '%s' (%zd bytes per item): indices are int32, uint32, int64 or "
                       "uint64", v->format ? v->format : "B", v->itemsize);
    if (v->ndim != 1)
        return idx_bad(name, "%d-dimensional: give a 1-D array", v->ndim);
    if (v->strides && v->shape[0] > 1 && v->strides[0] != v->itemsize)
        return idx_bad(name, "not contiguous (stride %zd bytes, item %zd bytes): use a contiguous copy",
                       v->strides[0], v->itemsize);
    Py_ssize_t n = v->shape[0];
    int is_signed = k == 'i' || k == 'l' || k == 'q' || k == 'n';
    x->n = n;
    if (v->itemsize == 4) {
        if (is_signed) {
            const int32_t *s = v->buf;
            for (Py_ssize_t i = 0; i < n; i++)
                if (s[i] < 0)
                    return idx_bad(name, "item %zd is negative (%d)", i, (int)s[i]);
        }
        x->p = v->buf;
        return 0;
    }
    x->owned = malloc((size_t)(n ? n : 1) * sizeof(uint32_t));
    if (!x->owned) {
        PyErr_NoMemory();
        return -1;
    }
    const uint64_t *u = v->buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (is_signed && (int64_t)u[i] < 0)
            return idx_bad(name, "item %zd is negative (%lld)", i, (long long)(int64_t)u[i]);
        if (u[i] > UINT32_MAX)
            return idx_bad(name, "item %zd is %llu: an index is at most 4294967295", i, (unsigned long long)u[i]);
        x->owned[i] = (uint32_t)u[i];
    }
    x->p = x->owned;
    return 0;
}

/* The number of entries: both arrays given -> equal lengths; one -> its
 * length; none -> count (which must then be given, >= 0). */
static int idx_count(const idx_t *l, const idx_t *r, const char *ln, const char *rn, PyObject *cnt, size_t *out)
{
    long long c = -1;
    if (cnt != Py_None) {
        c = PyLong_AsLongLong(cnt);
        if (c == -1 && PyErr_Occurred())
            return -1;
        if (c < 0) {
            PyErr_Format(PyExc_ValueError, "count: %lld is negative", c);
            return -1;
        }
    }
    if (l->p && r->p && l->n != r->n) {
        PyErr_Format(PyExc_ValueError, "%s has %zd entries but %s has %zd: they pair entry by entry", ln, l->n, rn,
                     r->n);
        return -1;
    }
    Py_ssize_t have = l->p ? l->n : r->p ? r->n : -1;
    if (have >= 0 && c >= 0 && c != have) {
        PyErr_Format(PyExc_ValueError, "count %lld differs from the %zd entries of %s", c, have, l->p ? ln : rn);
        return -1;
    }
    if (have < 0 && c < 0) {
        PyErr_Format(PyExc_ValueError, "count: give it when neither %s nor %s is given", ln, rn);
        return -1;
    }
    *out = (size_t)(have >= 0 ? have : c);
    return 0;
}

/* Both index arrays and the count of a batch: 0, or -1 with an exception set
 * and nothing held. */
static int idx_both(PyObject *lo, PyObject *ro, PyObject *cnt, const char *ln, const char *rn, idx_t *li, idx_t *ri,
                    size_t *count)
{
    memset(ri, 0, sizeof(*ri));
    if (idx_get(lo, ln, li) != 0 || idx_get(ro, rn, ri) != 0 || idx_count(li, ri, ln, rn, cnt, count) != 0) {
        idx_release(li);
        idx_release(ri);
        return -1;
    }
    return 0;
}

static PyObject *post_result(gw_status_t st, gw_request_t *req)
{
    if (st != GW_OK)
        return PyLong_FromLong(st);
    return PyLong_FromVoidPtr(req);
}

/* batch(ep, op, ldlist, lidx, rdlist, ridx, count|None, notify, value, track)
 * -> request address, 0 (untracked), or the negative status of a refused post */
static PyObject *fast_batch(PyObject *self, PyObject *const *a, Py_ssize_t n)
{
    if (n != 10) {
        PyErr_SetString(PyExc_TypeError, "batch takes 10 arguments");
        return NULL;
    }
    if (!f_batch) {
        PyErr_SetString(PyExc_RuntimeError, "the loaded libgpuwire has no gw_xfer_batch");
        return NULL;
    }
    void *ep = PyLong_AsVoidPtr(a[0]);
    int op = (int)PyLong_AsLong(a[1]);
    void *ll = PyLong_AsVoidPtr(a[2]);
    void *rl = PyLong_AsVoidPtr(a[4]);
    int notify = (int)PyLong_AsLong(a[7]);
    unsigned long long value = PyLong_AsUnsignedLongLong(a[8]);
    int track = PyObject_IsTrue(a[9]);
    if (PyErr_Occurred())
        return NULL;
    idx_t li, ri;
    size_t count = 0;
    if (idx_both(a[3], a[5], a[6], "lidx", "ridx", &li, &ri, &count) != 0)
        return NULL;
    gw_xfer_opts_t o = {.size = sizeof(o), .notify = notify, .value = value};
    gw_request_t *req = NULL;
    gw_status_t st;
    Py_BEGIN_ALLOW_THREADS
    st = f_batch(ep, op, ll, li.p, rl, ri.p, count, notify ? &o : NULL, track ? &req : NULL);
    Py_END_ALLOW_THREADS
    idx_release(&li);
    idx_release(&ri);
    return post_result(st, req);
}

/* The arguments the paged post and the prepared plan share:
 * (ep, op, lmem, lbase, lpages, rkey, raddr, rpages, count|None, page_size,
 * notify, value) from a[0..11]; the index arrays held until idx_release. */
typedef struct pages_args {
    void *ep, *lmem, *lbase, *rkey;
    unsigned long long raddr;
    size_t page, count;
    int op, notify;
    gw_xfer_opts_t opts;
    idx_t li, ri;
} pages_args_t;

static int pages_parse(PyObject *const *a, pages_args_t *g)
{
    if (!f_pages) {
        PyErr_SetString(PyExc_RuntimeError, "the loaded libgpuwire has no gw_xfer_pages");
        return -1;
    }
    g->ep = PyLong_AsVoidPtr(a[0]);
    g->op = (int)PyLong_AsLong(a[1]);
    g->lmem = PyLong_AsVoidPtr(a[2]);
    g->lbase = PyLong_AsVoidPtr(a[3]);
    g->rkey = PyLong_AsVoidPtr(a[5]);
    g->raddr = PyLong_AsUnsignedLongLong(a[6]);
    g->page = PyLong_AsSize_t(a[9]);
    g->notify = (int)PyLong_AsLong(a[10]);
    unsigned long long value = PyLong_AsUnsignedLongLong(a[11]);
    if (PyErr_Occurred())
        return -1;
    g->opts = (gw_xfer_opts_t){.size = sizeof(g->opts), .notify = g->notify, .value = value};
    return idx_both(a[4], a[7], a[8], "lpages", "rpages", &g->li, &g->ri, &g->count);
}

static PyObject *new_request(PyObject *cls, PyObject *ctx, PyObject *h, PyObject *nbytes);

/* pages(ep, op, lmem, lbase, lpages, rkey, raddr, rpages, count|None,
 *       page_size, notify, value, track[, request_class, ctx]) -> as batch();
 * given request_class and ctx, a tracked post returns the Request itself,
 * made here (see new_request) */
static PyObject *fast_pages(PyObject *self, PyObject *const *a, Py_ssize_t n)
{
    if (n != 13 && n != 15) {
        PyErr_SetString(PyExc_TypeError, "pages takes 13 or 15 arguments");
        return NULL;
    }
    int track = PyObject_IsTrue(a[12]);
    pages_args_t g;
    if (track < 0 || pages_parse(a, &g) != 0)
        return NULL;
    gw_request_t *req = NULL;
    gw_status_t st;
    Py_BEGIN_ALLOW_THREADS
    st = f_pages(g.ep, g.op, g.lmem, g.lbase, g.li.p, g.rkey, g.raddr, g.ri.p, g.count, g.page,
                 g.notify ? &g.opts : NULL, track ? &req : NULL);
    Py_END_ALLOW_THREADS
    idx_release(&g.li);
    idx_release(&g.ri);
    if (n == 15 && st == GW_OK && req) {
        PyObject *h = PyLong_FromVoidPtr(req), *nb = PyLong_FromSize_t(g.count * g.page);
        PyObject *r = h && nb ? new_request(a[13], a[14], h, nb) : NULL;
        Py_XDECREF(h);
        Py_XDECREF(nb);
        if (!r)
            f_free(req);
        return r;
    }
    return post_result(st, req);
}

/* ---- a prepared paged transfer ------------------------------------------------ */
/* Pages(ep, op, lmem, lbase, lpages, rkey, raddr, rpages, count|None, page_size,
 *       notify, value, request_class, ctx, fail): everything of one gw_xfer_pages
 * call, checked and converted once (the index arrays copied into uint32
 * vectors: later changes to the given arrays do not reach the plan).  post()
 * then makes the call with no argument to convert and no buffer to export:
 * the per-post Python cost of a paged transfer is one method call and the
 * Request.  The handles are raw: the package closes the plan (close()) before
 * the endpoint, region or key it names (Endpoint/Memory/RemoteKey.close). */
typedef struct pages_plan {
    PyObject_HEAD
    void *ep, *lmem, *lbase, *rkey;
    unsigned long long raddr;
    uint32_t *lp, *rp;   /* owned copies, NULL for 0..count-1 */
    size_t count, page;
    int op, notify;
    gw_xfer_opts_t opts;
    PyObject *req_cls, *ctx, *fail, *nbytes; /* NULL once closed */
} pages_plan_t;

static uint32_t *idx_copy(const idx_t *x)
{
    if (!x->p)
        return NULL;
    uint32_t *c = malloc((size_t)(x->n ? x->n : 1) * sizeof(uint32_t));
    if (c)
        memcpy(c, x->p, (size_t)x->n * sizeof(uint32_t));
    return c;
}

static int plan_clear(PyObject *o)
{
    pages_plan_t *p = (pages_plan_t *)o;
    Py_CLEAR(p->req_cls);
    Py_CLEAR(p->ctx);
    Py_CLEAR(p->fail);
    Py_CLEAR(p->nbytes);
    free(p->lp);
    free(p->rp);
    p->lp = p->rp = NULL;
    p->ep = p->lmem = p->rkey = NULL;
    return 0;
}

static int plan_traverse(PyObject *o, visitproc visit, void *arg)
{
    pages_plan_t *p = (pages_plan_t *)o;
    Py_VISIT(p->req_cls);
    Py_VISIT(p->ctx);
    Py_VISIT(p->fail);
    Py_VISIT(Py_TYPE(o)); /* a heap type's instances reference it */
    return 0;
}

static void plan_dealloc(PyObject *o)
{
    PyTypeObject *tp = Py_TYPE(o);
    PyObject_GC_UnTrack(o);
    plan_clear(o);
    freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    f(o);
    Py_DECREF(tp);
}

static PyObject *plan_new(PyTypeObject *tp, PyObject *args, PyObject *kw)
{
    if (kw && PyDict_Size(kw)) {
        PyErr_SetString(PyExc_TypeError, "Pages() takes positional arguments only");
        return NULL;
    }
    if (PyTuple_Size(args) != 15) {
        PyErr_SetString(PyExc_TypeError, "Pages() takes 15 arguments");
        return NULL;
    }
    PyObject *a[15];
    for (int i = 0; i < 15; i++)
        a[i] = PyTuple_GetItem(args, i); /* borrowed */
    pages_args_t g;
    if (pages_parse(a, &g) != 0)
        return NULL;
    uint32_t *lp = idx_copy(&g.li), *rp = idx_copy(&g.ri);
    int nomem = (g.li.p && !lp) || (g.ri.p && !rp);
    idx_release(&g.li);
    idx_release(&g.ri);
    PyObject *nb = nomem ? NULL : PyLong_FromSize_t(g.count * g.page);
    pages_plan_t *p = nb ? (pages_plan_t *)PyType_GenericAlloc(tp, 0) : NULL;
    if (!p) {
        free(lp);
        free(rp);
        Py_XDECREF(nb);
        return nomem ? PyErr_NoMemory() : NULL;
    }
    p->ep = g.ep;
    p->op = g.op;
    p->lmem = g.lmem;
    p->lbase = g.lbase;
    p->lp = lp;
    p->rkey = g.rkey;
    p->raddr = g.raddr;
    p->rp = rp;
    p->count = g.count;
    p->page = g.page;
    p->notify = g.notify;
    p->opts = g.opts;
    p->nbytes = nb;
    p->req_cls = Py_NewRef(a[12]);
    p->ctx = Py_NewRef(a[13]);
    p->fail = Py_NewRef(a[14]);
    return (PyObject *)p;
}

/* A Request (python/gpuwire/core.py) made without running its __init__, so
 * no bytecode runs inside a post: allocated by its type, its slots set as
 * __init__ sets them (ctx, _h, _keep, status, nbytes, tag, detail). */
static PyObject *s_zero, *s_ctx, *s_h, *s_keep, *s_status, *s_nbytes, *s_tag, *s_detail, *s_empty, *s_inprogress;

static PyObject *new_request(PyObject *cls, PyObject *ctx, PyObject *h, PyObject *nbytes)
{
    PyTypeObject *tp = (PyTypeObject *)cls;
    allocfunc alloc = (allocfunc)PyType_GetSlot(tp, Py_tp_alloc);
    PyObject *r = alloc ? alloc(tp, 0) : NULL;
    if (!r)
        return NULL;
    if (PyObject_GenericSetAttr(r, s_ctx, ctx) || PyObject_GenericSetAttr(r, s_h, h) ||
        PyObject_GenericSetAttr(r, s_keep, Py_None) || PyObject_GenericSetAttr(r, s_status, s_inprogress) ||
        PyObject_GenericSetAttr(r, s_nbytes, nbytes) || PyObject_GenericSetAttr(r, s_tag, s_zero) ||
        PyObject_GenericSetAttr(r, s_detail, s_empty)) {
        Py_DECREF(r);
        return NULL;
    }
    return r;
}

/* post([track=True]) -> Request, or None untracked; a refused post calls
 * fail(status), which raises. */
static PyObject *plan_post(PyObject *o, PyObject *const *a, Py_ssize_t n)
{
    pages_plan_t *p = (pages_plan_t *)o;
    if (n > 1) {
        PyErr_SetString(PyExc_TypeError, "post() takes at most one argument (track)");
        return NULL;
    }
    int track = n ? PyObject_IsTrue(a[0]) : 1;
    if (track < 0)
        return NULL;
    if (!p->ctx) {
        PyErr_SetString(PyExc_ValueError, "the prepared paged transfer is closed (or its endpoint, region or key is)");
        return NULL;
    }
    gw_request_t *req = NULL;
    gw_status_t st;
    Py_BEGIN_ALLOW_THREADS
    st = f_pages(p->ep, p->op, p->lmem, p->lbase, p->lp, p->rkey, p->raddr, p->rp, p->count, p->page,
                 p->notify ? &p->opts : NULL, track ? &req : NULL);
    Py_END_ALLOW_THREADS
    if (st != GW_OK) {
        PyObject *s = PyLong_FromLong(st);
        PyObject *r = s ? PyObject_CallFunctionObjArgs(p->fail, s, NULL) : NULL;
        Py_XDECREF(s);
        if (r) { /* fail() is to raise; say so if it did not */
            Py_DECREF(r);
            PyErr_Format(PyExc_RuntimeError, "gw_xfer_pages failed with status %d", (int)st);
        }
        return NULL;
    }
    if (!track)
        Py_RETURN_NONE;
    PyObject *h = PyLong_FromVoidPtr(req);
    if (!h) {
        f_free(req);
        return NULL;
    }
    PyObject *r = new_request(p->req_cls, p->ctx, h, p->nbytes);
    Py_DECREF(h);
    if (!r)
        f_free(req);
    return r;
}

static PyObject *plan_close(PyObject *o, PyObject *unused)
{
    plan_clear(o);
    Py_RETURN_NONE;
}

/* _uses(handle) -> True when the plan names that endpoint, region or key */
static PyObject *plan_uses(PyObject *o, PyObject *h)
{
    pages_plan_t *p = (pages_plan_t *)o;
    void *v = PyLong_AsVoidPtr(h);
    if (PyErr_Occurred())
        return NULL;
    return PyBool_FromLong(p->ctx && v && (v == p->ep || v == p->lmem || v == p->rkey));
}

static PyObject *plan_count(PyObject *o, void *unused)
{
    return PyLong_FromSize_t(((pages_plan_t *)o)->count);
}

static PyObject *plan_closed(PyObject *o, void *unused)
{
    return PyBool_FromLong(((pages_plan_t *)o)->ctx == NULL);
}

static PyObject *plan_nbytes(PyObject *o, void *unused)
{
    pages_plan_t *p = (pages_plan_t *)o;
    return PyLong_FromSize_t(p->count * p->page);
}

static PyMethodDef plan_methods[] = {
    {"post", (PyCFunction)(void (*)(void))plan_post, METH_FASTCALL,
     "post([track=True]) -> Request (None untracked): the prepared gw_xfer_pages call"},
    {"close", plan_close, METH_NOARGS, "forget the plan (idempotent)"},
    {"_uses", plan_uses, METH_O, "whether the plan names this handle"},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef plan_getset[] = {
    {"count", plan_count, NULL, "pages per post", NULL},
    {"nbytes", plan_nbytes, NULL, "bytes per post", NULL},
    {"closed", plan_closed, NULL, "True once closed", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyType_Slot plan_slots[] = {
    {Py_tp_new, plan_new},
    {Py_tp_dealloc, plan_dealloc},
    {Py_tp_traverse, plan_traverse},
    {Py_tp_clear, plan_clear},
    {Py_tp_methods, plan_methods},
    {Py_tp_getset, plan_getset},
    {Py_tp_doc, "a prepared paged transfer: Endpoint.prepare_put_pages / prepare_get_pages"},
    {0, NULL}};

static PyType_Spec plan_spec = {"gpuwire._gwfast.Pages", sizeof(pages_plan_t), 0,
                                Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, plan_slots};

static PyMethodDef methods[] = {
    {"init", (PyCFunction)(void (*)(void))fast_init, METH_FASTCALL, "bind the library's functions"},
    {"rma", (PyCFunction)(void (*)(void))fast_rma, METH_FASTCALL, "put/get/put_notify"},
    {"wait_free", (PyCFunction)(void (*)(void))fast_wait_free, METH_FASTCALL,
     "wait, then free unless still in progress or failed"},
    {"batch", (PyCFunction)(void (*)(void))fast_batch, METH_FASTCALL, "gw_xfer_batch with index arrays"},
    {"pages", (PyCFunction)(void (*)(void))fast_pages, METH_FASTCALL, "gw_xfer_pages with page arrays"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_gwfast", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__gwfast(void)
{
    s_ctx = PyUnicode_InternFromString("ctx");
    s_h = PyUnicode_InternFromString("_h");
    s_keep = PyUnicode_InternFromString("_keep");
    s_status = PyUnicode_InternFromString("status");
    s_nbytes = PyUnicode_InternFromString("nbytes");
    s_tag = PyUnicode_InternFromString("tag");
    s_detail = PyUnicode_InternFromString("detail");
    s_empty = PyUnicode_FromString("");
    s_zero = PyLong_FromLong(0);
    s_inprogress = PyLong_FromLong(GW_INPROGRESS);
    if (!s_ctx || !s_h || !s_keep || !s_status || !s_nbytes || !s_tag || !s_detail || !s_empty || !s_zero ||
        !s_inprogress)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    PyObject *t = m ? PyType_FromSpec(&plan_spec) : NULL;
    if (!t || PyModule_AddObject(m, "Pages", t) != 0) {
        Py_XDECREF(t);
        Py_XDECREF(m);
        return NULL;
    }
    return m;
}
