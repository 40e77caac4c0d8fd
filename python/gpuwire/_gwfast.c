/* SPDX-License-Identifier: Apache-2.0 */
/*
 * _gwfast.c - optional C accelerator for the gpuwire package's hot path.
 *
 * ctypes costs about 1.3 us per 7-argument call on an H100 host (argument
 * conversion), a C extension about 0.13 us (bench/compare/python_overhead.sh,
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
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h> /* (the x86-64 baseline: the index checks' vector loops) */
#endif

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
/* prepared page lists (NULL with a library older than them) */
typedef gw_status_t (*pl_create_fn)(gw_context_t *, const uint32_t *, const uint32_t *, size_t, gw_pages_t **);
typedef gw_status_t (*pl_destroy_fn)(gw_pages_t *);
typedef gw_status_t (*pl_xfer_fn)(gw_ep_t *, int, gw_mem_t *, void *, gw_rkey_t *, uint64_t, gw_pages_t *, size_t,
                                  const gw_xfer_opts_t *, gw_request_t **);
static pl_create_fn f_pl_create;
static pl_destroy_fn f_pl_destroy;
static pl_xfer_fn f_pl_xfer;
/* list batches from a prepared selection (NULL with a library older than them) */
typedef gw_status_t (*bpl_xfer_fn)(gw_ep_t *, int, gw_dlist_t *, gw_dlist_t *, gw_pages_t *, const gw_xfer_opts_t *,
                                   gw_request_t **);
static bpl_xfer_fn f_bpl_xfer;
/* the library reads gw_xfer_opts_t.index_type (init: gw_xfer_opts_size) */
static int f_wide;

/* init(put, get, put_notify, request_wait, request_test, request_free
 *      [, xfer_batch, xfer_pages [, pages_create, pages_destroy,
 *      xfer_pages_prepared [, xfer_batch_prepared]]]): addresses (the
 *      optional ones may be 0) */
static PyObject *fast_init(PyObject *self, PyObject *const *a, Py_ssize_t n)
{
    if (n != 6 && n != 8 && n != 11 && n != 12 && n != 13) {
        PyErr_SetString(PyExc_TypeError, "init takes six, eight, eleven, twelve or thirteen function addresses");
        return NULL;
    }
    f_wide = 0;
    if (n == 13) { /* gw_xfer_opts_size (0: absent): the library reads index_type */
        size_t (*opts_size)(void) = (size_t (*)(void))PyLong_AsVoidPtr(a[12]);
        if (PyErr_Occurred())
            return NULL;
        f_wide = opts_size && opts_size() >= offsetof(gw_xfer_opts_t, index_type) + sizeof(unsigned);
    }
    f_batch = NULL;
    f_pages = NULL;
    f_pl_create = NULL;
    f_pl_destroy = NULL;
    f_pl_xfer = NULL;
    f_bpl_xfer = NULL;
    if (n >= 8) {
        f_batch = (batch_fn)PyLong_AsVoidPtr(a[6]);
        f_pages = (pages_fn)PyLong_AsVoidPtr(a[7]);
        if (PyErr_Occurred())
            return NULL;
    }
    if (n >= 11) {
        f_pl_create = (pl_create_fn)PyLong_AsVoidPtr(a[8]);
        f_pl_destroy = (pl_destroy_fn)PyLong_AsVoidPtr(a[9]);
        f_pl_xfer = (pl_xfer_fn)PyLong_AsVoidPtr(a[10]);
        if (n >= 12)
            f_bpl_xfer = (bpl_xfer_fn)PyLong_AsVoidPtr(a[11]);
        if (PyErr_Occurred())
            return NULL;
        if (!f_pl_create || !f_pl_destroy || !f_pl_xfer)
            f_pl_create = NULL, f_pl_destroy = NULL, f_pl_xfer = NULL, f_bpl_xfer = NULL;
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
    uint32_t *owned;     /* a converted copy, freed by idx_release (or given back to spare[]) */
    int spare_at;        /* >= 0: owned is spare[spare_at], lent for this call */
    unsigned itype;      /* GW_INDEX_I64 / GW_INDEX_U64 / GW_INDEX_I32: p is the caller's items, given to the
                          * library as they are (it narrows and checks them in its own copy); 0: uint32 */
    Py_buffer view;
    int has_view;
    PyObject *held;      /* a NumPy array read in place (np_read), held until idx_release */
} idx_t;

/* Buffers for the uint32 copies of 8-byte index arrays, lent to one call at
 * a time (taken and given back under the GIL; a call that finds both lent,
 * as when another thread posts while this one is in the library, mallocs
 * its own).  A fresh malloc of a 64 KiB+ buffer is a page fault per 4 KiB
 * the first time it is written (and above glibc's mmap threshold every
 * time); the spares are written every call and stay mapped.  Kept up to
 * SPARE_MAX bytes each. */
#define SPARE_MAX ((size_t)16 << 20)
static struct {
    uint32_t *p;
    size_t cap; /* entries */
    int lent;
} spare[2];

static uint32_t *idx_buf(Py_ssize_t n, idx_t *x)
{
    size_t want = (size_t)(n ? n : 1);
    for (int i = 0; i < 2; i++) {
        if (spare[i].lent)
            continue;
        if (spare[i].cap < want && want * sizeof(uint32_t) <= SPARE_MAX) {
            uint32_t *q = malloc(want * sizeof(uint32_t));
            if (!q)
                break;
            free(spare[i].p);
            spare[i].p = q;
            spare[i].cap = want;
        }
        if (spare[i].cap >= want) {
            spare[i].lent = 1;
            x->spare_at = i;
            return x->owned = spare[i].p;
        }
    }
    x->spare_at = -1;
    return x->owned = malloc(want * sizeof(uint32_t));
}

static void idx_release(idx_t *x)
{
    if (x->has_view)
        PyBuffer_Release(&x->view);
    Py_XDECREF(x->held);
    if (x->owned && x->spare_at >= 0)
        spare[x->spare_at].lent = 0;
    else
        free(x->owned);
    memset(x, 0, sizeof(*x));
    x->spare_at = -1;
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

/* An item outside 0 .. 2^32-1 (neg < 0: that negative value, else big), in
 * the library's words for the same refusal (core/idx.c gw_idx_wide_bad,
 * after "fn: "): "rpages[517] = 4294967296 is above 4294967295" */
static int item_bad(const char *name, Py_ssize_t i, long long neg, unsigned long long big)
{
    if (neg < 0)
        PyErr_Format(PyExc_ValueError, "%s[%zd] = %lld is negative", name, i, neg);
    else
        PyErr_Format(PyExc_ValueError, "%s[%zd] = %llu is above 4294967295", name, i, big);
    return -1;
}

static int idx_from_seq(PyObject *o, const char *name, idx_t *x)
{
    Py_ssize_t n = PySequence_Size(o);
    if (n < 0)
        return -1;
    if (!idx_buf(n, x)) {
        PyErr_NoMemory();
        return -1;
    }
    int is_list = PyList_Check(o);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = is_list ? PyList_GetItem(o, i) : PyTuple_GetItem(o, i); /* borrowed */
        if (!it)
            return -1;
        if (!PyLong_Check(it)) {
            char tb[64];
            PyErr_Format(PyExc_ValueError, "%s[%zd] is a %s, not an int", name, i, tname(it, tb, sizeof(tb)));
            return -1;
        }
        int over = 0;
        long long v = PyLong_AsLongLongAndOverflow(it, &over);
        if (v == -1 && PyErr_Occurred())
            return -1;
        if (over || v < 0 || v > (long long)UINT32_MAX) { /* (the library's words: core/idx.c gw_idx_wide_bad) */
            PyErr_Format(PyExc_ValueError, over > 0 || v > 0 ? "%s[%zd] = %S is above 4294967295" : "%s[%zd] = %S is negative",
                         name, i, it);
            return -1;
        }
        x->owned[i] = (uint32_t)v;
    }
    x->p = x->owned;
    x->n = n;
    return 0;
}

/* Whether any of n int32 is negative: the sign bits ORed, 16 items a round
 * without an exit per item (SSE2, the x86-64 baseline), 0 or 1 */
static int any_negative32(const int32_t *s, Py_ssize_t n)
{
    uint32_t acc = 0;
    Py_ssize_t i = 0;
#ifdef __SSE2__
    __m128i a0 = _mm_setzero_si128(), a1 = a0, a2 = a0, a3 = a0;
    for (; i + 16 <= n; i += 16) {
        a0 = _mm_or_si128(a0, _mm_loadu_si128((const __m128i *)(const void *)(s + i)));
        a1 = _mm_or_si128(a1, _mm_loadu_si128((const __m128i *)(const void *)(s + i + 4)));
        a2 = _mm_or_si128(a2, _mm_loadu_si128((const __m128i *)(const void *)(s + i + 8)));
        a3 = _mm_or_si128(a3, _mm_loadu_si128((const __m128i *)(const void *)(s + i + 12)));
    }
    acc = (uint32_t)_mm_movemask_ps(_mm_castsi128_ps(_mm_or_si128(_mm_or_si128(a0, a1), _mm_or_si128(a2, a3))));
    acc = acc ? 0x80000000u : 0;
#endif
    for (; i < n; i++)
        acc |= (uint32_t)s[i];
    return acc >> 31;
}

/* n 8-byte integers at u narrowed into dst; nonzero when any lies outside
 * 0 .. 2^32-1 (its upper half not zero: a negative int64 too).  One pass
 * that stores the lower halves and ORs the upper ones, 8 items a round
 * (SSE2); a loop checking and exiting per item ran at ~1 ns an item. */
static uint32_t narrow64(uint32_t *restrict dst, const uint64_t *restrict u, Py_ssize_t n)
{
    uint32_t hi = 0;
    Py_ssize_t i = 0;
#ifdef __SSE2__
    __m128i h0 = _mm_setzero_si128(), h1 = h0;
    for (; i + 8 <= n; i += 8) {
        __m128 v0 = _mm_castsi128_ps(_mm_loadu_si128((const __m128i *)(const void *)(u + i)));
        __m128 v1 = _mm_castsi128_ps(_mm_loadu_si128((const __m128i *)(const void *)(u + i + 2)));
        __m128 v2 = _mm_castsi128_ps(_mm_loadu_si128((const __m128i *)(const void *)(u + i + 4)));
        __m128 v3 = _mm_castsi128_ps(_mm_loadu_si128((const __m128i *)(const void *)(u + i + 6)));
        /* lower halves (dwords 0 and 2 of each) to dst, upper ones (1, 3) ORed */
        _mm_storeu_si128((__m128i *)(void *)(dst + i), _mm_castps_si128(_mm_shuffle_ps(v0, v1, _MM_SHUFFLE(2, 0, 2, 0))));
        _mm_storeu_si128((__m128i *)(void *)(dst + i + 4),
                         _mm_castps_si128(_mm_shuffle_ps(v2, v3, _MM_SHUFFLE(2, 0, 2, 0))));
        h0 = _mm_or_si128(h0, _mm_castps_si128(_mm_shuffle_ps(v0, v1, _MM_SHUFFLE(3, 1, 3, 1))));
        h1 = _mm_or_si128(h1, _mm_castps_si128(_mm_shuffle_ps(v2, v3, _MM_SHUFFLE(3, 1, 3, 1))));
    }
    hi = _mm_movemask_epi8(_mm_cmpeq_epi32(_mm_or_si128(h0, h1), _mm_setzero_si128())) != 0xFFFF;
#endif
    for (; i < n; i++) {
        hi |= (uint32_t)(u[i] >> 32);
        dst[i] = (uint32_t)u[i];
    }
    return hi;
}

/* n integers of `size` (4 or 8) bytes at p as uint32 indices: in place when
 * 4 bytes wide (a pass for negatives when signed), else a checked copy; a
 * bad item is found by a second, naming pass only after the first saw one */
static int idx_narrow(const uint64_t *u, Py_ssize_t n, int is_signed, const char *name, idx_t *x);

static int idx_check(const void *p, Py_ssize_t n, int size, int is_signed, const char *name, idx_t *x, int wide_ok)
{
    x->n = n;
    if (wide_ok && f_wide && (size == 8 || is_signed)) { /* (the library narrows and checks them as it copies them) */
        x->p = p;
        x->itype = size == 4 ? GW_INDEX_I32 : is_signed ? GW_INDEX_I64 : GW_INDEX_U64;
        return 0;
    }
    if (size != 4)
        return idx_narrow(p, n, is_signed, name, x);
    {
        if (is_signed && any_negative32(p, n)) {
            const int32_t *s = p;
            for (Py_ssize_t i = 0; i < n; i++)
                if (s[i] < 0)
                    return item_bad(name, i, s[i], 0);
        }
        x->p = p;
        return 0;
    }
}

/* n 8-byte items at u narrowed into a buffer of x (x->p), checked */
static int idx_narrow(const uint64_t *u, Py_ssize_t n, int is_signed, const char *name, idx_t *x)
{
    if (!idx_buf(n, x)) {
        PyErr_NoMemory();
        return -1;
    }
    x->itype = 0;
    if (narrow64(x->owned, u, n)) {
        for (Py_ssize_t i = 0; i < n; i++) {
            if (is_signed && (int64_t)u[i] < 0)
                return item_bad(name, i, (int64_t)u[i], 0);
            if (u[i] > UINT32_MAX)
                return item_bad(name, i, 0, u[i]);
        }
    }
    x->p = x->owned;
    return 0;
}

/* A NumPy array read in place.  Exporting its buffer runs NumPy's format
 * code (a dozen pages of code and data, each cold after a wait, and a
 * malloc) for what sits in the array object: its data pointer, shape,
 * strides and the type character of its dtype.  Those fields are NumPy's C
 * ABI (PyArrayObject_fields and the head of PyArray_Descr, the same in
 * NumPy 1.x and 2.x; every compiled NumPy extension reads them through its
 * macros).  This module does not build against NumPy, so the layout is
 * checked against the buffer protocol on the first array seen (np_learn);
 * when it differs, every array goes through the buffer protocol.  Only the
 * plain case is read here (1-D, contiguous, native byte order, 4- or 8-byte
 * integers); anything else goes through the buffer protocol and its checks. */
typedef struct np_arr {
    PyObject ob_base;
    char *data;
    int nd;
    Py_ssize_t *dims, *strides;
    PyObject *base, *descr;
} np_arr_t;
typedef struct np_descr {
    PyObject ob_base;
    PyTypeObject *typeobj;
    char kind, type, byteorder;
} np_descr_t;
static PyTypeObject *np_type; /* numpy.ndarray once learned */
static int np_state;          /* 0 not yet seen, 1 learned, -1 layout differs: buffer protocol only */

/* 1 with the array's data, length, item size and signedness when o is a
 * plain index array; 0 when o is to go through the buffer protocol */
static int np_read(PyObject *o, const void **p, Py_ssize_t *n, int *size, int *is_signed)
{
    const np_arr_t *a = (const np_arr_t *)o;
    const np_descr_t *d = (const np_descr_t *)a->descr;
    if (a->nd != 1 || !d)
        return 0;
    char t = d->type;
    int sz = t == 'i' || t == 'I' ? 4 : t == 'l' || t == 'L' ? (int)sizeof(long) : t == 'q' || t == 'Q' ? 8 : 0;
    if (!sz || !(d->byteorder == '=' || d->byteorder == '|' || (d->byteorder == '<' && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__)))
        return 0;
    if (a->dims[0] > 1 && a->strides[0] != sz)
        return 0;
    *p = a->data;
    *n = a->dims[0];
    *size = sz;
    *is_signed = t == 'i' || t == 'l' || t == 'q';
    return 1;
}

/* The first numpy.ndarray seen: does np_read agree with its buffer? */
static void np_learn(PyObject *o)
{
    char tb[64];
    PyObject *mod = PyObject_GetAttrString((PyObject *)Py_TYPE(o), "__module__");
    const char *m = mod && PyUnicode_Check(mod) ? PyUnicode_AsUTF8AndSize(mod, NULL) : NULL;
    int is_nd = m && strcmp(m, "numpy") == 0 && strcmp(tname(o, tb, sizeof(tb)), "ndarray") == 0;
    Py_XDECREF(mod);
    PyErr_Clear();
    if (!is_nd)
        return;
    Py_buffer v;
    if (PyObject_GetBuffer(o, &v, PyBUF_FORMAT | PyBUF_STRIDES) != 0) {
        PyErr_Clear();
        return;
    }
    const void *p;
    Py_ssize_t n;
    int size, sgn;
    const char *f = v.format ? v.format : "B";
    if (*f == '@' || *f == '=' || *f == '<')
        f++;
    int got = np_read(o, &p, &n, &size, &sgn);
    int want = v.ndim == 1 && f[0] && !f[1] && strchr("iIlLqQ", f[0]) && (v.itemsize == 4 || v.itemsize == 8) &&
               (v.shape[0] <= 1 || v.strides[0] == v.itemsize);
    if (want && got && p == v.buf && n == v.shape[0] && size == v.itemsize && sgn == !!strchr("ilq", f[0])) {
        np_type = (PyTypeObject *)Py_NewRef((PyObject *)Py_TYPE(o));
        np_state = 1;
    } else if (want || got) {
        np_state = -1; /* read otherwise than its buffer says: the layout is not what np_read assumes */
    }
    PyBuffer_Release(&v);
}

/* torch.Tensor once seen (is_tensor): a CPU tensor is read through its
 * NumPy view (tensor.numpy(), no copy), as the package's Python path does */
static PyTypeObject *tensor_type;
static PyObject *s_numpy;

/* the last types found not to be torch.Tensor before it was seen (held):
 * the name lookup below (a string made and formatted) cost as much as the
 * rest of a device-index post for objects such as CuPy arrays */
#define NOT_TENSOR_N 4
static PyTypeObject *not_tensor[NOT_TENSOR_N];
static unsigned not_tensor_next;

static int is_tensor(PyObject *o)
{
    if (tensor_type)
        return Py_TYPE(o) == tensor_type;
    for (int i = 0; i < NOT_TENSOR_N; i++)
        if (not_tensor[i] == Py_TYPE(o))
            return 0;
    char tb[64];
    if (strcmp(tname(o, tb, sizeof(tb)), "Tensor") != 0) {
        PyTypeObject **at = &not_tensor[not_tensor_next++ % NOT_TENSOR_N];
        PyTypeObject *old = *at;
        *at = (PyTypeObject *)Py_NewRef((PyObject *)Py_TYPE(o));
        Py_XDECREF((PyObject *)old);
        return 0;
    }
    PyObject *mod = PyObject_GetAttrString((PyObject *)Py_TYPE(o), "__module__");
    const char *m = mod && PyUnicode_Check(mod) ? PyUnicode_AsUTF8AndSize(mod, NULL) : NULL;
    int yes = m && strcmp(m, "torch") == 0;
    Py_XDECREF(mod);
    PyErr_Clear();
    if (yes)
        tensor_type = (PyTypeObject *)Py_NewRef((PyObject *)Py_TYPE(o));
    return yes;
}

static int idx_get(PyObject *o, const char *name, idx_t *x, int wide_ok)
{
    memset(x, 0, sizeof(*x));
    x->spare_at = -1;
    if (o == Py_None)
        return 0;
    if (PyList_Check(o) || PyTuple_Check(o))
        return idx_from_seq(o, name, x);
    if (!PyObject_CheckBuffer(o) && is_tensor(o)) {
        PyObject *f = PyObject_GetAttr(o, s_numpy), *arr = f ? PyObject_CallNoArgs(f) : NULL;
        Py_XDECREF(f);
        if (!arr) { /* (CUDA, requires_grad, a dtype NumPy lacks: the package's Python path says which) */
            PyErr_Clear();
            return idx_bad(name, "a tensor without a NumPy view");
        }
        int r = idx_get(arr, name, x, wide_ok);
        Py_DECREF(arr); /* held by x (x->held or x->view) while needed */
        return r;
    }
    if (np_state == 0)
        np_learn(o);
    const void *np_p;
    int np_size, np_sgn;
    if (np_state == 1 && Py_TYPE(o) == np_type && np_read(o, &np_p, &x->n, &np_size, &np_sgn)) {
        x->held = Py_NewRef(o); /* (its data stays while held: NumPy refuses to resize a shared array) */
        return idx_check(np_p, x->n, np_size, np_sgn, name, x, wide_ok);
    }
    if (PyObject_GetBuffer(o, &x->view, PyBUF_FORMAT | PyBUF_STRIDES) != 0) {
        char tb[64];
        PyErr_Clear();
        return idx_bad(name, "a %s is not an index array: give a list of ints, a 1-D NumPy array or tensor of "
                       "int32/uint32/int64/uint64, or an array('I')", tname(o, tb, sizeof(tb)));
    }
    x->has_view = 1;
    Py_buffer *v = &x->view;
    const char *f = v->format ? v->format : "B";
    int swapped = (*f == '>' || *f == '!') == (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__) && strchr("<>!", *f);
    if (swapped)
        return idx_bad(name, "byte order '%c' is not this machine's: give the array in native byte order "
                       "(.astype(its dtype.newbyteorder('=')))", *f);
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
    x->n = v->shape[0];
    return idx_check(v->buf, x->n, (int)v->itemsize, k == 'i' || k == 'l' || k == 'q' || k == 'n', name, x, wide_ok);
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

/* An array left to the library (x->itype) made uint32 here: 8-byte items
 * narrowed, int32 ones checked for negatives */
static int idx_plain(idx_t *x, const char *name)
{
    if (x->itype == GW_INDEX_I32) {
        x->itype = 0;
        return idx_check(x->p, x->n, 4, 1, name, x, 0);
    }
    if (x->itype)
        return idx_narrow((const uint64_t *)(const void *)x->p, x->n, x->itype == GW_INDEX_I64, name, x);
    return 0;
}

/* Both index arrays and the count of a batch: 0, or -1 with an exception set
 * and nothing held.  wide_ok: 8-byte and int32 arrays may stay as they are
 * where the library takes them (gw_xfer_opts_t.index_type, one type for
 * both arrays): *type says which (0: uint32); arrays of two types are
 * made uint32 here. */
static int idx_both(PyObject *lo, PyObject *ro, PyObject *cnt, const char *ln, const char *rn, idx_t *li, idx_t *ri,
                    size_t *count, int wide_ok, unsigned *type)
{
    memset(ri, 0, sizeof(*ri));
    *type = 0;
    if (idx_get(lo, ln, li, wide_ok) != 0 || idx_get(ro, rn, ri, wide_ok) != 0 ||
        idx_count(li, ri, ln, rn, cnt, count) != 0)
        goto fail;
    if (li->p && ri->p && li->itype != ri->itype) /* (int64 and uint32, say) */
        if (idx_plain(li, ln) || idx_plain(ri, rn))
            goto fail;
    *type = li->p && li->itype ? li->itype : ri->p ? ri->itype : 0;
    return 0;
fail:
    idx_release(li);
    idx_release(ri);
    return -1;
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
    gw_status_t st;
    gw_request_t *req = NULL;
    unsigned type;
    if (idx_both(a[3], a[5], a[6], "lidx", "ridx", &li, &ri, &count, 1, &type) != 0)
        return NULL;
    gw_xfer_opts_t o = {.size = sizeof(o), .notify = notify, .value = value, .index_type = type};
    Py_BEGIN_ALLOW_THREADS
    st = f_batch(ep, op, ll, li.p, rl, ri.p, count, notify || type ? &o : NULL, track ? &req : NULL);
    Py_END_ALLOW_THREADS
    idx_release(&li);
    idx_release(&ri);
    return post_result(st, req); /* (a bad item of an 8-byte array: the library's message, in this module's words) */
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
    unsigned type;
    return idx_both(a[4], a[7], a[8], "lpages", "rpages", &g->li, &g->ri, &g->count, 0, &type);
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

/* pages_dev(ep, op, lmem, lbase, lpages, rkey, raddr, rpages, count,
 *           page_size, notify, value, stream, track) -> as batch(): the
 * paged post with index arrays in the local GPU's memory (addresses, 0 for
 * none; opts.index_mem GW_INDEX_DEVICE, opts.index_stream the stream they
 * are ready on, 0 for none).  The package checked the arrays (batch.py
 * _pages_dev); nothing here reads them. */
static PyObject *fast_pages_dev(PyObject *self, PyObject *const *a, Py_ssize_t n)
{
    if (n != 14) {
        PyErr_SetString(PyExc_TypeError, "pages_dev takes 14 arguments");
        return NULL;
    }
    if (!f_pages) {
        PyErr_SetString(PyExc_RuntimeError, "the loaded libgpuwire has no gw_xfer_pages");
        return NULL;
    }
    void *ep = PyLong_AsVoidPtr(a[0]), *lmem = PyLong_AsVoidPtr(a[2]), *lbase = PyLong_AsVoidPtr(a[3]);
    void *lp = PyLong_AsVoidPtr(a[4]), *rkey = PyLong_AsVoidPtr(a[5]), *rp = PyLong_AsVoidPtr(a[7]);
    int op = (int)PyLong_AsLong(a[1]), notify = (int)PyLong_AsLong(a[10]);
    unsigned long long raddr = PyLong_AsUnsignedLongLong(a[6]), value = PyLong_AsUnsignedLongLong(a[11]);
    size_t count = PyLong_AsSize_t(a[8]), page = PyLong_AsSize_t(a[9]);
    void *stream = PyLong_AsVoidPtr(a[12]);
    int track = PyObject_IsTrue(a[13]);
    if (track < 0 || PyErr_Occurred())
        return NULL;
    gw_xfer_opts_t o = {.size = sizeof(o), .notify = notify, .value = value, .index_mem = GW_INDEX_DEVICE,
                        .index_stream = stream};
    gw_request_t *req = NULL;
    gw_status_t st;
    Py_BEGIN_ALLOW_THREADS
    st = f_pages(ep, op, lmem, lbase, lp, rkey, raddr, rp, count, page, &o, track ? &req : NULL);
    Py_END_ALLOW_THREADS
    return post_result(st, req);
}

/* ---- a prepared paged transfer (Pages) or list batch (Batch) ----------------- */
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
    int list;            /* a Batch: lmem and rkey are then the local and remote descriptor lists */
    void *ep, *lmem, *lbase, *rkey;
    unsigned long long raddr;
    uint32_t *lp, *rp;   /* owned copies, NULL for 0..count-1 */
    gw_pages_t *pl;      /* the same as a prepared page list, where the library has them (else NULL) */
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
    if (p->pl) /* (freed when its last transfer completes, if any still runs) */
        f_pl_destroy(p->pl);
    p->pl = NULL;
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
    /* the arrays as a prepared page list of the endpoint's context (ctx._h):
     * each post then reads and copies no index (gw_xfer_pages_prepared);
     * where that cannot be had, posts call gw_xfer_pages as before */
    if (f_pl_create) {
        PyObject *ch = PyObject_GetAttrString(a[13], "_h");
        void *c = ch && ch != Py_None ? PyLong_AsVoidPtr(ch) : NULL;
        Py_XDECREF(ch);
        PyErr_Clear();
        if (c && f_pl_create((gw_context_t *)c, lp, rp, g.count, &p->pl) != GW_OK)
            p->pl = NULL;
    }
    return (PyObject *)p;
}

/* A Request (python/gpuwire/request.py) made without running its __init__, so
 * no bytecode runs inside a post: allocated by its type, its slots set as
 * __init__ sets them (ctx, _h, _keep, status, nbytes, tag, detail). */
static PyObject *s_zero, *s_ctx, *s_h, *s_keep, *s_status, *s_nbytes, *s_tag, *s_detail, *s_empty, *s_inprogress;

/* The class's slot descriptors, looked up once per class: setting each
 * through its own __set__ skips the attribute lookup by name (a type-cache
 * probe per name, each on its own cold page right after a wait) */
static PyObject *rq_cls, *rq_desc[7];
static descrsetfunc rq_set[7];

static int request_slots(PyObject *cls)
{
    PyObject *names[7] = {s_ctx, s_h, s_keep, s_status, s_nbytes, s_tag, s_detail};
    PyObject *d[7] = {NULL};
    for (int i = 0; i < 7; i++) {
        d[i] = PyObject_GetAttr(cls, names[i]);
        descrsetfunc f = d[i] ? (descrsetfunc)PyType_GetSlot(Py_TYPE(d[i]), Py_tp_descr_set) : NULL;
        if (!f) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "the request class has no slot %R", names[i]);
            for (int j = 0; j <= i; j++)
                Py_XDECREF(d[j]);
            return -1;
        }
        rq_set[i] = f;
    }
    for (int i = 0; i < 7; i++) {
        Py_XDECREF(rq_desc[i]);
        rq_desc[i] = d[i];
    }
    Py_XDECREF(rq_cls);
    rq_cls = Py_NewRef(cls);
    return 0;
}

static PyObject *new_request(PyObject *cls, PyObject *ctx, PyObject *h, PyObject *nbytes)
{
    PyTypeObject *tp = (PyTypeObject *)cls;
    if (cls != rq_cls && request_slots(cls) != 0)
        return NULL;
    allocfunc alloc = (allocfunc)PyType_GetSlot(tp, Py_tp_alloc);
    PyObject *r = alloc ? alloc(tp, 0) : NULL;
    if (!r)
        return NULL;
    PyObject *v[7] = {ctx, h, Py_None, s_inprogress, nbytes, s_zero, s_empty};
    for (int i = 0; i < 7; i++)
        if (rq_set[i](rq_desc[i], r, v[i]) != 0) {
            Py_DECREF(r);
            return NULL;
        }
    return r;
}

/* post(track=True) -> Request, or None untracked; a refused post calls
 * fail(status), which raises.  track by position or by keyword, as the
 * ctypes plan (batch.py _PagesPlan.post) takes it. */
static PyObject *plan_post(PyObject *o, PyObject *const *a, Py_ssize_t n, PyObject *kwnames)
{
    pages_plan_t *p = (pages_plan_t *)o;
    Py_ssize_t nkw = kwnames ? PyTuple_Size(kwnames) : 0;
    if (n + nkw > 1) {
        PyErr_Format(PyExc_TypeError, "post() takes at most one argument (track) (%zd given)", n + nkw);
        return NULL;
    }
    PyObject *t = n ? a[0] : NULL;
    if (nkw) {
        PyObject *name = PyTuple_GetItem(kwnames, 0); /* borrowed */
        if (!PyUnicode_Check(name) || PyUnicode_CompareWithASCIIString(name, "track") != 0) {
            PyErr_Format(PyExc_TypeError, "post() got an unexpected keyword argument '%S'", name);
            return NULL;
        }
        t = a[0];
    }
    int track = t ? PyObject_IsTrue(t) : 1;
    if (track < 0)
        return NULL;
    if (!p->ctx) {
        PyErr_SetString(PyExc_ValueError, p->list ? "the prepared batch is closed (or its endpoint or a list is)"
                                                  : "the prepared paged transfer is closed (or its endpoint, region or "
                                                    "key is)");
        return NULL;
    }
    gw_request_t *req = NULL;
    gw_status_t st;
    Py_BEGIN_ALLOW_THREADS
    if (p->list && p->pl)
        st = f_bpl_xfer(p->ep, p->op, p->lmem, p->rkey, p->pl, p->notify ? &p->opts : NULL, track ? &req : NULL);
    else if (p->list)
        st = f_batch(p->ep, p->op, p->lmem, p->lp, p->rkey, p->rp, p->count, p->notify ? &p->opts : NULL,
                     track ? &req : NULL);
    else if (p->pl)
        st = f_pl_xfer(p->ep, p->op, p->lmem, p->lbase, p->rkey, p->raddr, p->pl, p->page,
                       p->notify ? &p->opts : NULL, track ? &req : NULL);
    else
        st = f_pages(p->ep, p->op, p->lmem, p->lbase, p->lp, p->rkey, p->raddr, p->rp, p->count, p->page,
                     p->notify ? &p->opts : NULL, track ? &req : NULL);
    Py_END_ALLOW_THREADS
    if (st != GW_OK) {
        PyObject *s = PyLong_FromLong(st);
        PyObject *r = s ? PyObject_CallFunctionObjArgs(p->fail, s, NULL) : NULL;
        Py_XDECREF(s);
        if (r) { /* fail() is to raise; say so if it did not */
            Py_DECREF(r);
            PyErr_Format(PyExc_RuntimeError, "%s failed with status %d", p->list ? "gw_xfer_batch" : "gw_xfer_pages",
                         (int)st);
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
    if (p->list) /* (the lists' lengths are the library's) */
        Py_RETURN_NONE;
    return PyLong_FromSize_t(p->count * p->page);
}

static PyMethodDef plan_methods[] = {
    {"post", (PyCFunction)(void (*)(void))plan_post, METH_FASTCALL | METH_KEYWORDS,
     "post(track=True) -> Request (None untracked): the prepared gw_xfer_pages call"},
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

/* Batch(ep, op, ldlist, lidx, rdlist, ridx, count|None, notify, value,
 *       request_class, ctx, fail): a prepared list batch (gw_xfer_batch), the
 * index arrays checked and copied once as for Pages; with the library's
 * prepared selections they become one (gw_pages_create) and each post is
 * gw_xfer_batch_prepared (no index read or copied per post), else each
 * post calls gw_xfer_batch with the copies.  post(), close(), count and
 * closed as Pages; nbytes is None (the lists' lengths are not known here). */
static PyObject *bplan_new(PyTypeObject *tp, PyObject *args, PyObject *kw)
{
    if (kw && PyDict_Size(kw)) {
        PyErr_SetString(PyExc_TypeError, "Batch() takes positional arguments only");
        return NULL;
    }
    if (PyTuple_Size(args) != 12) {
        PyErr_SetString(PyExc_TypeError, "Batch() takes 12 arguments");
        return NULL;
    }
    if (!f_batch) {
        PyErr_SetString(PyExc_RuntimeError, "the loaded libgpuwire has no gw_xfer_batch");
        return NULL;
    }
    PyObject *a[12];
    for (int i = 0; i < 12; i++)
        a[i] = PyTuple_GetItem(args, i); /* borrowed */
    void *ep = PyLong_AsVoidPtr(a[0]);
    int op = (int)PyLong_AsLong(a[1]);
    void *ll = PyLong_AsVoidPtr(a[2]);
    void *rl = PyLong_AsVoidPtr(a[4]);
    int notify = (int)PyLong_AsLong(a[7]);
    unsigned long long value = PyLong_AsUnsignedLongLong(a[8]);
    if (PyErr_Occurred())
        return NULL;
    idx_t li, ri;
    size_t count = 0;
    unsigned type;
    if (idx_both(a[3], a[5], a[6], "lidx", "ridx", &li, &ri, &count, 0, &type) != 0)
        return NULL;
    uint32_t *lp = idx_copy(&li), *rp = idx_copy(&ri);
    int nomem = (li.p && !lp) || (ri.p && !rp);
    idx_release(&li);
    idx_release(&ri);
    pages_plan_t *p = nomem ? NULL : (pages_plan_t *)PyType_GenericAlloc(tp, 0);
    if (!p) {
        free(lp);
        free(rp);
        return nomem ? PyErr_NoMemory() : NULL;
    }
    p->list = 1;
    p->ep = ep;
    p->op = op;
    p->lmem = ll;
    p->rkey = rl;
    p->lp = lp;
    p->rp = rp;
    p->count = count;
    p->notify = notify;
    p->opts = (gw_xfer_opts_t){.size = sizeof(p->opts), .notify = notify, .value = value};
    p->nbytes = Py_NewRef(Py_None);
    p->req_cls = Py_NewRef(a[9]);
    p->ctx = Py_NewRef(a[10]);
    p->fail = Py_NewRef(a[11]);
    if (f_pl_create && f_bpl_xfer) { /* a prepared selection of the endpoint's context (ctx._h) */
        PyObject *ch = PyObject_GetAttrString(a[10], "_h");
        void *c = ch && ch != Py_None ? PyLong_AsVoidPtr(ch) : NULL;
        Py_XDECREF(ch);
        PyErr_Clear();
        if (c && f_pl_create((gw_context_t *)c, lp, rp, count, &p->pl) != GW_OK)
            p->pl = NULL;
    }
    return (PyObject *)p;
}

static PyType_Slot bplan_slots[] = {
    {Py_tp_new, bplan_new},
    {Py_tp_dealloc, plan_dealloc},
    {Py_tp_traverse, plan_traverse},
    {Py_tp_clear, plan_clear},
    {Py_tp_methods, plan_methods},
    {Py_tp_getset, plan_getset},
    {Py_tp_doc, "a prepared list batch: Endpoint.prepare_put_batch / prepare_get_batch"},
    {0, NULL}};

static PyType_Spec bplan_spec = {"gpuwire._gwfast.Batch", sizeof(pages_plan_t), 0,
                                 Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, bplan_slots};

/* ---- Endpoint.put_pages / get_pages as C methods --------------------------------- */
/* The per-call paged post with fresh index arrays: the whole method in C, so
 * a post runs no bytecode at all (after a wait that moved megabytes, every
 * cache line and branch of interpreted code is cold: the Python method's
 * checks cost more than the 4096-entry gw_xfer_pages call they guard, see
 * docs/PERFORMANCE.md).  The common case (a Memory, a RemoteKey, index
 * arrays that are None, lists, tuples or buffers, int sizes and offsets,
 * `counted` or no notification) is handled here; any other argument, any
 * argument the checks here refuse, and a refused post go to the Python
 * method (batch.py), which gives the same result or raises the exception
 * naming the problem.  bind_pages(Memory, RemoteKey, Request, put_py,
 * get_py) names the classes and the Python methods; method(Endpoint, op)
 * makes the class attribute. */
static PyObject *c_mem_cls, *c_rkey_cls, *c_req_cls, *c_slow[2];
static PyObject *s_addr, *s_lctx, *s_kw[11];

/* The fast paged and batch methods' arguments into v (nall slots, the put
 * form's order, defaults already there): the get form (op 1) has the put
 * form's but its two notification parameters (nall - 3 and nall - 2), its
 * track last; kwtab: the put form's interned keyword names.  0 done; -1
 * anything the method leaves to its Python form (too many, unknown or
 * repeated keywords, a notification on a get: Python says so). */
static int fast_args(int op, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject *const *kwtab,
                     int nall, PyObject **v)
{
    int nb = nall - 3; /* the put form's notify, counted, then track */
    if (nargs > (op ? nall - 2 : nall))
        return -1;
    for (Py_ssize_t i = 0; i < nargs; i++)
        v[op && i == nb ? nall - 1 : i] = args[i];
    Py_ssize_t nkw = kwnames ? PyTuple_Size(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *name = PyTuple_GetItem(kwnames, k); /* borrowed; interned by the caller's code */
        int at = -1;
        for (int j = 0; j < nall && at < 0; j++)
            if (name == kwtab[j])
                at = j;
        int given = op ? (at == nall - 1 ? nargs > nb : at < nargs) : at < nargs; /* also by position */
        if (at < 0 || (op && (at == nb || at == nb + 1)) || given)
            return -1;
        v[at] = args[nargs + k];
    }
    return 0;
}
/* keyword names in the order of the put form; the get form lacks notify and counted */
static const char *const kw_names[11] = {"local", "rkey", "page_size", "lpages", "rpages", "count",
                                         "local_offset", "offset", "notify", "counted", "track"};

/* What the method reads from the endpoint, region and key objects (their
 * handles, addresses, the context), kept for the last (endpoint, region,
 * key) triples: reading six attributes through their instance dicts
 * touches a dozen cold pages per post, this one line.  The pointers are
 * borrowed: each object is held by its context (regions, endpoints) or
 * endpoint (keys) until closed, and closing any of them, or the context,
 * empties this (forget(), from _common._close_plans), as rebinding does. */
typedef struct res {
    PyObject *ep, *local, *rkey, *ctx; /* borrowed; ep NULL: empty */
    void *eh, *mh, *kh;
    char *la;
    uint64_t ra;
} res_t;
#define RES_N 16
static res_t res_cache[RES_N];

/* What the C put_batch/get_batch keep the same way of an (endpoint, local
 * list, remote list) triple (a list is held by its context until closed,
 * and closing it, its endpoint or its context empties this too) */
typedef struct bres {
    PyObject *ep, *local, *remote, *ctx; /* borrowed; ep NULL: empty */
    void *eh, *lh, *rh;
    Py_ssize_t ln, rn; /* the lists' entries */
} bres_t;
static bres_t bres_cache[RES_N];

static PyObject *forget(PyObject *self, PyObject *unused)
{
    memset(res_cache, 0, sizeof(res_cache));
    memset(bres_cache, 0, sizeof(bres_cache));
    Py_RETURN_NONE;
}

static PyObject *bind_pages(PyObject *self, PyObject *const *a, Py_ssize_t n)
{
    memset(res_cache, 0, sizeof(res_cache));
    if (n != 5) {
        PyErr_SetString(PyExc_TypeError, "bind_pages(Memory, RemoteKey, Request, put_pages, get_pages)");
        return NULL;
    }
    PyObject **dst[5] = {&c_mem_cls, &c_rkey_cls, &c_req_cls, &c_slow[0], &c_slow[1]};
    for (int i = 0; i < 5; i++) {
        PyObject *old = *dst[i];
        *dst[i] = Py_NewRef(a[i]);
        Py_XDECREF(old);
    }
    Py_RETURN_NONE;
}

/* An attribute that must be an int handle/address: 0 and *out, or -1 (no
 * exception left set) when missing, None or not an exact int */
static int attr_ptr(PyObject *o, PyObject *name, void **out)
{
    PyObject *v = PyObject_GetAttr(o, name);
    if (!v || !PyLong_CheckExact(v)) {
        Py_XDECREF(v);
        PyErr_Clear();
        return -1;
    }
    *out = PyLong_AsVoidPtr(v);
    Py_DECREF(v);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    return 0;
}

/* A non-negative exact int argument, or -1 (nothing set) */
static int arg_size(PyObject *o, size_t *out)
{
    if (!PyLong_CheckExact(o))
        return -1;
    *out = PyLong_AsSize_t(o);
    if (*out == (size_t)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    return 0;
}

/* An index array in GPU memory (batch.py _device_index): a CUDA tensor of
 * int32/uint32, 1-D and contiguous (its stream: torch's current one on its
 * GPU), or an object with __cuda_array_interface__ and no buffer protocol
 * (typestr <i4/<u4, 1-D, contiguous; its "stream" where given).  1 with
 * *x filled; 0 when o is not one (None, host memory); -1 (nothing set)
 * when the Python method should judge it (it raises naming the problem). */
typedef struct dix {
    void *p;
    Py_ssize_t n;
    long gpu;     /* -1: the object does not say */
    void *stream; /* NULL: none */
} dix_t;
static PyObject *t_int32, *t_uint32, *t_rawstream;
static PyObject *s_cai, *s_cai_key[5]; /* "__cuda_array_interface__" and its typestr, shape, strides, data, stream */
static int t_state; /* 0: not looked up; 1: torch's dtypes and raw-stream getter found; -1: not */

static int torch_bits(void)
{
    if (t_state)
        return t_state > 0;
    t_state = -1;
    PyObject *torch = PyImport_ImportModule("torch");
    PyObject *c = torch ? PyObject_GetAttrString(torch, "_C") : NULL;
    t_int32 = torch ? PyObject_GetAttrString(torch, "int32") : NULL;
    t_uint32 = torch ? PyObject_GetAttrString(torch, "uint32") : NULL;
    if (!t_uint32)
        t_uint32 = t_int32 ? Py_NewRef(t_int32) : NULL;
    t_rawstream = c ? PyObject_GetAttrString(c, "_cuda_getCurrentRawStream") : NULL;
    Py_XDECREF(torch);
    Py_XDECREF(c);
    PyErr_Clear();
    if (t_int32 && t_uint32 && t_rawstream)
        t_state = 1;
    return t_state > 0;
}

/* o.name() as a C long, or -1 with nothing set on any failure */
static long call_long(PyObject *o, const char *name)
{
    PyObject *r = PyObject_CallMethod(o, name, NULL);
    long v = r && PyLong_Check(r) ? PyLong_AsLong(r) : -1;
    Py_XDECREF(r);
    PyErr_Clear();
    return v;
}

static int dev_idx(PyObject *o, dix_t *x)
{
    if (o == Py_None || PyList_CheckExact(o) || PyTuple_CheckExact(o) || PyObject_CheckBuffer(o))
        return 0;
    if (is_tensor(o)) {
        PyObject *c = PyObject_GetAttrString(o, "is_cuda");
        int cuda = c == Py_True;
        Py_XDECREF(c);
        PyErr_Clear();
        if (!cuda)
            return 0;
        if (!torch_bits())
            return -1;
        PyObject *dt = PyObject_GetAttrString(o, "dtype"), *ct = PyObject_CallMethod(o, "is_contiguous", NULL);
        int ok = dt && (dt == t_int32 || dt == t_uint32) && ct == Py_True && call_long(o, "dim") == 1;
        Py_XDECREF(dt);
        Py_XDECREF(ct);
        PyErr_Clear();
        if (!ok)
            return -1;
        PyObject *p = PyObject_CallMethod(o, "data_ptr", NULL);
        x->p = p && PyLong_Check(p) ? PyLong_AsVoidPtr(p) : NULL;
        Py_XDECREF(p);
        x->n = call_long(o, "numel");
        x->gpu = call_long(o, "get_device");
        PyObject *g = x->gpu >= 0 ? PyLong_FromLong(x->gpu) : NULL;
        PyObject *st = g ? PyObject_CallFunctionObjArgs(t_rawstream, g, NULL) : NULL;
        x->stream = st && PyLong_Check(st) ? PyLong_AsVoidPtr(st) : NULL;
        int got = st && PyLong_Check(st) && !PyErr_Occurred();
        Py_XDECREF(g);
        Py_XDECREF(st);
        PyErr_Clear();
        return x->p && x->n >= 0 && x->gpu >= 0 && got ? 1 : -1;
    }
    PyObject *cai = PyObject_GetAttr(o, s_cai);
    if (!cai) {
        PyErr_Clear();
        return 0;
    }
    int ret = -1;
    if (PyDict_Check(cai)) { /* (interned keys: no string made per lookup) */
        PyObject *ts = PyDict_GetItem(cai, s_cai_key[0]), *sh = PyDict_GetItem(cai, s_cai_key[1]);
        PyObject *sd = PyDict_GetItem(cai, s_cai_key[2]), *dt = PyDict_GetItem(cai, s_cai_key[3]);
        PyObject *st = PyDict_GetItem(cai, s_cai_key[4]); /* (borrowed, all) */
        Py_ssize_t tl = 0;
        const char *t = ts && PyUnicode_Check(ts) ? PyUnicode_AsUTF8AndSize(ts, &tl) : NULL;
        int tok = t && tl == 3 && strchr("<|=", t[0]) && strchr("iu", t[1]) && t[2] == '4';
        int shok = sh && PyTuple_Check(sh) && PyTuple_Size(sh) == 1;
        Py_ssize_t n = shok ? PyLong_AsSsize_t(PyTuple_GetItem(sh, 0)) : -1;
        int sdok = !sd || sd == Py_None ||
                   (PyTuple_Check(sd) && PyTuple_Size(sd) == 1 && (n <= 1 || PyLong_AsLong(PyTuple_GetItem(sd, 0)) == 4));
        PyObject *d0 = dt && PyTuple_Check(dt) && PyTuple_Size(dt) >= 1 ? PyTuple_GetItem(dt, 0) : NULL;
        int stok = !st || st == Py_None || PyLong_Check(st);
        if (tok && shok && n >= 0 && sdok && d0 && PyLong_Check(d0) && stok && !PyErr_Occurred()) {
            x->p = PyLong_AsVoidPtr(d0);
            x->n = n;
            x->gpu = -1;
            x->stream = st && st != Py_None ? PyLong_AsVoidPtr(st) : NULL;
            ret = PyErr_Occurred() ? -1 : 1;
        }
    }
    Py_DECREF(cai);
    PyErr_Clear();
    return ret;
}

/* An index-array argument the fast path reads as it is */
static int idx_direct(PyObject *o)
{
    return o == Py_None || PyList_CheckExact(o) || PyTuple_CheckExact(o) || PyObject_CheckBuffer(o) || is_tensor(o);
}

/* The Python method with the same arguments (the limited API of 3.11 has no
 * PyObject_Vectorcall: a tuple and a dict, on this path only) */
static PyObject *slow_fn(PyObject *fn, PyObject *ep, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    Py_ssize_t nkw = kwnames ? PyTuple_Size(kwnames) : 0;
    PyObject *t = PyTuple_New(nargs + 1), *kw = nkw ? PyDict_New() : NULL, *r = NULL;
    if (!t || (nkw && !kw))
        goto out;
    PyTuple_SetItem(t, 0, Py_NewRef(ep)); /* steals */
    for (Py_ssize_t i = 0; i < nargs; i++)
        PyTuple_SetItem(t, i + 1, Py_NewRef(args[i]));
    for (Py_ssize_t k = 0; k < nkw; k++)
        if (PyDict_SetItem(kw, PyTuple_GetItem(kwnames, k), args[nargs + k]) != 0)
            goto out;
    r = PyObject_Call(fn, t, kw);
out:
    Py_XDECREF(t);
    Py_XDECREF(kw);
    return r;
}

static PyObject *slow_call(int op, PyObject *ep, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    return slow_fn(c_slow[op], ep, args, nargs, kwnames);
}

/* The end of a paged call: a refusal raised by the Python method (naming
 * the entry at fault), else the Request (None untracked).  ka/kb (not
 * NULL: index arrays in GPU memory) stay referenced by the Request until
 * the transfer completes, since the GPU reads them. */
static PyObject *pages_result(gw_status_t st, PyObject *ep, int op, int track, gw_request_t *req, PyObject *ctx,
                              size_t nbytes, PyObject *ka, PyObject *kb)
{
    if (st != GW_OK) {
        PyObject *r = PyObject_CallMethod(ep, "_pages_failed", "ii", (int)st, op);
        if (r) {
            Py_DECREF(r);
            PyErr_Format(PyExc_RuntimeError, "gw_xfer_pages failed with status %d", (int)st);
        }
        return NULL;
    }
    if (!track)
        Py_RETURN_NONE;
    PyObject *h = PyLong_FromVoidPtr(req), *nb = h ? PyLong_FromSize_t(nbytes) : NULL;
    PyObject *r = nb ? new_request(c_req_cls, ctx, h, nb) : NULL;
    if (r && ka) {
        PyObject *keep = PyTuple_Pack(2, ka, kb);
        if (!keep || rq_set[2](rq_desc[2], r, keep) != 0)
            Py_CLEAR(r);
        Py_XDECREF(keep);
    }
    Py_XDECREF(h);
    Py_XDECREF(nb);
    if (!r)
        f_free(req);
    return r;
}

static PyObject *ep_pages(int op, PyObject *ep, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (!c_slow[op]) {
        PyErr_SetString(PyExc_RuntimeError, "_gwfast.bind_pages() was not called");
        return NULL;
    }
    /* the arguments by position of the put form (local .. track) */
    PyObject *v[11] = {NULL, NULL, NULL, Py_None, Py_None, Py_None, NULL, NULL, Py_None, Py_None, Py_True};
    if (fast_args(op, args, nargs, kwnames, s_kw, 11, v) != 0)
        return slow_call(op, ep, args, nargs, kwnames);
    PyObject *local = v[0], *rkey = v[1];
    /* index arrays in GPU memory (batch.py _pages_dev): both there, or one
     * there and the other None; anything else to the Python method */
    dix_t dl = {0}, dr = {0};
    int kl = dev_idx(v[3], &dl), kr = kl < 0 ? -1 : dev_idx(v[4], &dr), dev = kl > 0 || kr > 0;
    if (kl < 0 || kr < 0 || (dev && ((!kl && v[3] != Py_None) || (!kr && v[4] != Py_None) ||
                                     (kl && kr && (dl.n != dr.n || (dl.gpu >= 0 && dr.gpu >= 0 && dl.gpu != dr.gpu))))))
        return slow_call(op, ep, args, nargs, kwnames);
    if (!local || !rkey || !v[2] || v[8] != Py_None || (!dev && (!idx_direct(v[3]) || !idx_direct(v[4]))))
        return slow_call(op, ep, args, nargs, kwnames);
    size_t page = 0, loff = 0, roff = 0;
    unsigned long long value = 0;
    int track = PyObject_IsTrue(v[10]);
    if (track < 0)
        return NULL;
    if (arg_size(v[2], &page) || !page || (v[6] && arg_size(v[6], &loff)) || (v[7] && arg_size(v[7], &roff)))
        return slow_call(op, ep, args, nargs, kwnames);
    if (v[9] != Py_None) {
        if (!PyLong_CheckExact(v[9]))
            return slow_call(op, ep, args, nargs, kwnames);
        value = PyLong_AsUnsignedLongLong(v[9]);
        if (PyErr_Occurred()) {
            PyErr_Clear();
            return slow_call(op, ep, args, nargs, kwnames);
        }
    }
    res_t *c = &res_cache[((uintptr_t)local >> 4 ^ (uintptr_t)rkey >> 6 ^ (uintptr_t)ep >> 8) % RES_N];
    if (c->ep != ep || c->local != local || c->rkey != rkey) { /* (a hit: the very objects) */
        void *eh, *mh, *kh, *la, *ra;
        if (Py_TYPE(local) != (PyTypeObject *)c_mem_cls || Py_TYPE(rkey) != (PyTypeObject *)c_rkey_cls ||
            attr_ptr(ep, s_h, &eh) || attr_ptr(local, s_h, &mh) || attr_ptr(rkey, s_h, &kh) ||
            attr_ptr(local, s_addr, &la) || attr_ptr(rkey, s_addr, &ra) || !eh || !mh || !kh)
            return slow_call(op, ep, args, nargs, kwnames); /* closed: Python names which */
        PyObject *ctx = PyObject_GetAttr(ep, s_lctx);
        if (!ctx)
            return NULL;
        Py_DECREF(ctx); /* held by the endpoint */
        *c = (res_t){.ep = ep, .local = local, .rkey = rkey, .ctx = ctx, .eh = eh, .mh = mh, .kh = kh,
                     .la = la, .ra = (uint64_t)(uintptr_t)ra};
    }
    void *eh = c->eh, *mh = c->mh, *kh = c->kh;
    char *la = c->la;
    uint64_t ra = c->ra;
    PyObject *ctx = c->ctx;
    if (dev) {
        size_t count = (size_t)(kl ? dl.n : dr.n), want = 0;
        if (v[5] != Py_None && (arg_size(v[5], &want) || want != count))
            return slow_call(op, ep, args, nargs, kwnames); /* (Python says which count is wrong) */
        gw_xfer_opts_t o = {.size = sizeof(o), .notify = v[9] != Py_None ? 2 : 0, .value = value,
                            .index_mem = GW_INDEX_DEVICE, .index_stream = kl ? dl.stream : dr.stream};
        gw_request_t *req = NULL;
        gw_status_t st;
        Py_BEGIN_ALLOW_THREADS
        st = f_pages(eh, op, mh, la + loff, kl ? dl.p : NULL, kh, ra + roff, kr ? dr.p : NULL, count, page, &o,
                     track ? &req : NULL);
        Py_END_ALLOW_THREADS
        return pages_result(st, ep, op, track, req, ctx, count * page, v[3], v[4]);
    }
    idx_t li, ri;
    size_t count = 0;
    unsigned type;
    if (idx_both(v[3], v[4], v[5], "lpages", "rpages", &li, &ri, &count, 1, &type) != 0) {
        PyErr_Clear();  /* the Python method raises it as InvalidArgument */
        return slow_call(op, ep, args, nargs, kwnames);
    }
    int notify = v[9] != Py_None;
    gw_xfer_opts_t o = {.size = sizeof(o), .notify = notify ? 2 : 0, .value = value, .index_type = type};
    gw_request_t *req = NULL;
    gw_status_t st;
    Py_BEGIN_ALLOW_THREADS
    st = f_pages(eh, op, mh, la + loff, li.p, kh, ra + roff, ri.p, count, page,
                 notify || type ? &o : NULL, track ? &req : NULL);
    Py_END_ALLOW_THREADS
    idx_release(&li);
    idx_release(&ri);
    return pages_result(st, ep, op, track, req, ctx, count * page, NULL, NULL);
}

static PyObject *ep_put_pages(PyObject *ep, PyObject *const *a, Py_ssize_t n, PyObject *kw)
{
    return ep_pages(0, ep, a, n, kw);
}

static PyObject *ep_get_pages(PyObject *ep, PyObject *const *a, Py_ssize_t n, PyObject *kw)
{
    return ep_pages(1, ep, a, n, kw);
}

/* ---- Endpoint.put_batch / get_batch as C methods --------------------------------- */
/* The list batch with fresh index arrays (a descriptor list or table a side),
 * the whole method in C as put_pages: the common case (two open DescLists,
 * local then remote, index arrays that are None, lists, tuples, buffers or
 * CPU tensors, an int count, notify or counted) is handled here; any other
 * argument, any argument the checks here refuse, goes to the Python method
 * (batch.py _BatchOps.put_batch), which gives the same result or raises
 * naming the problem.  A post the library refuses raises through the
 * endpoint's _batch_failed (the library's message, naming the entry or
 * item at fault).  bind_batch(DescList, put_py, get_py) names the class and
 * the Python methods. */
static PyObject *c_dlist_cls, *c_bslow[2];
static PyObject *s_remote, *s_n, *s_bkw[8];
/* keyword names in the order of the put form; the get form lacks notify and counted */
static const char *const bkw_names[8] = {"local", "remote", "lidx", "ridx", "count", "notify", "counted", "track"};

static PyObject *bind_batch(PyObject *self, PyObject *const *a, Py_ssize_t n)
{
    memset(bres_cache, 0, sizeof(bres_cache));
    if (n != 3) {
        PyErr_SetString(PyExc_TypeError, "bind_batch(DescList, put_batch, get_batch)");
        return NULL;
    }
    PyObject **dst[3] = {&c_dlist_cls, &c_bslow[0], &c_bslow[1]};
    for (int i = 0; i < 3; i++) {
        PyObject *old = *dst[i];
        *dst[i] = Py_NewRef(a[i]);
        Py_XDECREF(old);
    }
    Py_RETURN_NONE;
}

/* The Python batch method with the same arguments (see slow_call) */
static PyObject *bslow_call(int op, PyObject *ep, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    return slow_fn(c_bslow[op], ep, args, nargs, kwnames);
}

/* A list's handle, entries and side: 0, or -1 (nothing set) when it is not
 * an open DescList */
static int dlist_read(PyObject *o, void **h, Py_ssize_t *n, int *remote)
{
    if (Py_TYPE(o) != (PyTypeObject *)c_dlist_cls || attr_ptr(o, s_h, h) || !*h)
        return -1;
    PyObject *r = PyObject_GetAttr(o, s_remote), *v = r ? PyObject_GetAttr(o, s_n) : NULL;
    int ok = r && (r == Py_True || r == Py_False) && v && PyLong_CheckExact(v);
    *remote = r == Py_True;
    *n = ok ? PyLong_AsSsize_t(v) : -1;
    Py_XDECREF(r);
    Py_XDECREF(v);
    if (!ok || *n < 0 || PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    return 0;
}

static PyObject *ep_batch(int op, PyObject *ep, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (!c_bslow[op] || !c_req_cls || !f_batch) {
        PyErr_SetString(PyExc_RuntimeError, "_gwfast.bind_batch() was not called");
        return NULL;
    }
    /* the arguments by position of the put form (local .. track) */
    PyObject *v[8] = {NULL, NULL, Py_None, Py_None, Py_None, Py_None, Py_None, Py_True};
    if (fast_args(op, args, nargs, kwnames, s_bkw, 8, v) != 0)
        return bslow_call(op, ep, args, nargs, kwnames);
    PyObject *local = v[0], *remote = v[1];
    if (!local || !remote || (v[5] != Py_None && v[6] != Py_None) || !idx_direct(v[2]) || !idx_direct(v[3]) ||
        (v[4] != Py_None && !PyLong_CheckExact(v[4])))
        return bslow_call(op, ep, args, nargs, kwnames);
    int notify = v[5] != Py_None ? 1 : v[6] != Py_None ? 2 : 0;
    unsigned long long value = 0;
    if (notify) {
        PyObject *nv = v[notify == 1 ? 5 : 6];
        if (!PyLong_CheckExact(nv))
            return bslow_call(op, ep, args, nargs, kwnames);
        value = PyLong_AsUnsignedLongLong(nv);
        if (PyErr_Occurred()) {
            PyErr_Clear();
            return bslow_call(op, ep, args, nargs, kwnames);
        }
    }
    int track = PyObject_IsTrue(v[7]);
    if (track < 0)
        return NULL;
    bres_t *c = &bres_cache[((uintptr_t)local >> 4 ^ (uintptr_t)remote >> 6 ^ (uintptr_t)ep >> 8) % RES_N];
    if (c->ep != ep || c->local != local || c->remote != remote) { /* (a hit: the very objects) */
        void *eh, *lh, *rh;
        Py_ssize_t ln, rn;
        int lrem, rrem;
        if (!c_dlist_cls || dlist_read(local, &lh, &ln, &lrem) || dlist_read(remote, &rh, &rn, &rrem) || lrem ||
            !rrem || attr_ptr(ep, s_h, &eh) || !eh)
            return bslow_call(op, ep, args, nargs, kwnames); /* a wrong or closed list: Python names which */
        PyObject *ctx = PyObject_GetAttr(ep, s_lctx);
        if (!ctx)
            return NULL;
        Py_DECREF(ctx); /* held by the endpoint */
        *c = (bres_t){.ep = ep, .local = local, .remote = remote, .ctx = ctx, .eh = eh, .lh = lh, .rh = rh,
                      .ln = ln, .rn = rn};
    }
    PyObject *cnt = v[4];
    if (v[2] == Py_None && v[3] == Py_None && cnt == Py_None) { /* every entry of both lists */
        if (c->ln != c->rn)
            return bslow_call(op, ep, args, nargs, kwnames);
        cnt = PyLong_FromSsize_t(c->ln);
        if (!cnt)
            return NULL;
    } else {
        Py_INCREF(cnt);
    }
    idx_t li, ri;
    size_t count = 0;
    unsigned type;
    int bad = idx_both(v[2], v[3], cnt, "lidx", "ridx", &li, &ri, &count, 1, &type);
    Py_DECREF(cnt);
    if (bad) {
        PyErr_Clear(); /* the Python method raises it as InvalidArgument */
        return bslow_call(op, ep, args, nargs, kwnames);
    }
    void *eh = c->eh, *lh = c->lh, *rh = c->rh;
    PyObject *ctx = c->ctx;
    gw_xfer_opts_t o = {.size = sizeof(o), .notify = notify, .value = value, .index_type = type};
    gw_request_t *req = NULL;
    gw_status_t st;
    Py_BEGIN_ALLOW_THREADS
    st = f_batch(eh, op, lh, li.p, rh, ri.p, count, notify || type ? &o : NULL, track ? &req : NULL);
    Py_END_ALLOW_THREADS
    idx_release(&li);
    idx_release(&ri);
    if (st != GW_OK) { /* the library's message, naming the entry or item at fault */
        PyObject *r = PyObject_CallMethod(ep, "_batch_failed", "ii", (int)st, op);
        if (r) {
            Py_DECREF(r);
            PyErr_Format(PyExc_RuntimeError, "gw_xfer_batch failed with status %d", (int)st);
        }
        return NULL;
    }
    if (!track)
        Py_RETURN_NONE;
    PyObject *h = PyLong_FromVoidPtr(req);
    PyObject *r = h ? new_request(c_req_cls, ctx, h, Py_None) : NULL;
    Py_XDECREF(h);
    if (!r)
        f_free(req);
    return r;
}

static PyObject *ep_put_batch(PyObject *ep, PyObject *const *a, Py_ssize_t n, PyObject *kw)
{
    return ep_batch(0, ep, a, n, kw);
}

static PyObject *ep_get_batch(PyObject *ep, PyObject *const *a, Py_ssize_t n, PyObject *kw)
{
    return ep_batch(1, ep, a, n, kw);
}

static PyMethodDef ep_defs[4] = {
    {"put_pages", (PyCFunction)(void (*)(void))ep_put_pages, METH_FASTCALL | METH_KEYWORDS,
     "the paged put (see Endpoint.put_pages in batch.py)"},
    {"get_pages", (PyCFunction)(void (*)(void))ep_get_pages, METH_FASTCALL | METH_KEYWORDS,
     "the paged get (see Endpoint.get_pages in batch.py)"},
    {"put_batch", (PyCFunction)(void (*)(void))ep_put_batch, METH_FASTCALL | METH_KEYWORDS,
     "the list batch's put (see Endpoint.put_batch in batch.py)"},
    {"get_batch", (PyCFunction)(void (*)(void))ep_get_batch, METH_FASTCALL | METH_KEYWORDS,
     "the list batch's get (see Endpoint.get_batch in batch.py)"}};

/* method(cls, op) -> the C method as a method descriptor of cls (op 0
 * put_pages, 1 get_pages, 2 put_batch, 3 get_batch): the class attribute that the interpreter calls
 * with the instance as self, as it calls the methods of built-in types (no
 * bound method made per call) */
static PyObject *make_method(PyObject *self, PyObject *const *a, Py_ssize_t n)
{
    if (n != 2 || !PyType_Check(a[0])) {
        PyErr_SetString(PyExc_TypeError, "method(cls, op)");
        return NULL;
    }
    long op = PyLong_AsLong(a[1]);
    if (op < 0 || op > 3)
        return PyErr_Occurred() ? NULL : (PyErr_SetString(PyExc_ValueError, "op: 0 .. 3"), NULL);
    if (op > 1 && !c_bslow[op - 2]) {
        PyErr_SetString(PyExc_RuntimeError, "_gwfast.bind_batch() was not called");
        return NULL;
    }
    return PyDescr_NewMethod((PyTypeObject *)a[0], &ep_defs[op]);
}

static PyMethodDef methods[] = {
    {"init", (PyCFunction)(void (*)(void))fast_init, METH_FASTCALL, "bind the library's functions"},
    {"rma", (PyCFunction)(void (*)(void))fast_rma, METH_FASTCALL, "put/get/put_notify"},
    {"wait_free", (PyCFunction)(void (*)(void))fast_wait_free, METH_FASTCALL,
     "wait, then free unless still in progress or failed"},
    {"batch", (PyCFunction)(void (*)(void))fast_batch, METH_FASTCALL, "gw_xfer_batch with index arrays"},
    {"pages", (PyCFunction)(void (*)(void))fast_pages, METH_FASTCALL, "gw_xfer_pages with page arrays"},
    {"pages_dev", (PyCFunction)(void (*)(void))fast_pages_dev, METH_FASTCALL,
     "gw_xfer_pages with page arrays in GPU memory"},
    {"bind_pages", (PyCFunction)(void (*)(void))bind_pages, METH_FASTCALL,
     "bind_pages(Memory, RemoteKey, Request, put_pages, get_pages): for method()"},
    {"bind_batch", (PyCFunction)(void (*)(void))bind_batch, METH_FASTCALL,
     "bind_batch(DescList, put_batch, get_batch): for method()"},
    {"method", (PyCFunction)(void (*)(void))make_method, METH_FASTCALL,
     "method(cls, op): put_pages (0), get_pages (1), put_batch (2) or get_batch (3) as a method of cls"},
    {"forget", forget, METH_NOARGS, "drop what the C put_pages/get_pages/put_batch/get_batch keep of endpoints, regions, keys and lists (on any close)"},
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
    s_addr = PyUnicode_InternFromString("addr");
    s_numpy = PyUnicode_InternFromString("numpy");
    s_lctx = s_ctx;
    s_cai = PyUnicode_InternFromString("__cuda_array_interface__");
    static const char *const cai_keys[5] = {"typestr", "shape", "strides", "data", "stream"};
    for (int i = 0; i < 5; i++)
        if (!(s_cai_key[i] = PyUnicode_InternFromString(cai_keys[i])))
            return NULL;
    if (!s_cai)
        return NULL;
    for (int i = 0; i < 11; i++)
        if (!(s_kw[i] = PyUnicode_InternFromString(kw_names[i])))
            return NULL;
    for (int i = 0; i < 8; i++)
        if (!(s_bkw[i] = PyUnicode_InternFromString(bkw_names[i])))
            return NULL;
    s_remote = PyUnicode_InternFromString("remote");
    s_n = PyUnicode_InternFromString("n");
    if (!s_remote || !s_n)
        return NULL;
    if (!s_ctx || !s_h || !s_keep || !s_status || !s_nbytes || !s_tag || !s_detail || !s_empty || !s_zero ||
        !s_inprogress || !s_addr || !s_numpy)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    PyObject *t = m ? PyType_FromSpec(&plan_spec) : NULL;
    if (!t || PyModule_AddObject(m, "Pages", t) != 0) {
        Py_XDECREF(t);
        Py_XDECREF(m);
        return NULL;
    }
    t = PyType_FromSpec(&bplan_spec);
    if (!t || PyModule_AddObject(m, "Batch", t) != 0) {
        Py_XDECREF(t);
        Py_XDECREF(m);
        return NULL;
    }
    return m;
}
