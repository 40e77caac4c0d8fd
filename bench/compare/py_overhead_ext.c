/* SPDX-License-Identifier: Apache-2.0 */
/*
 * py_overhead_ext.c - a minimal CPython extension with the one call the
 * binding's hot path makes (gw_put, untracked), built by
 * bench/compare/python_overhead.sh only to compare a C extension's call cost with
 * ctypes' (how the package's choice of ctypes was measured); and
 * pages_loop(), bench/compare/python_pages.sh's reference: the paged post timed by a
 * C loop inside the Python process, on the very buffers, index arrays and
 * endpoint the package posts from, so the two differ by the binding alone.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <gpuwire.h>
#include <stdint.h>
#include <time.h>

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* pages_loop(ep, lmem, lbase, lpages, rkey, raddr, rpages, n, page, rounds, burst)
 * -> [ns of each gw_xfer_pages call]: each round posts `burst` paged puts
 * back to back (counted notification id 1, tracked), each timed alone, then
 * waits for them (outside the timing), as a prefill process posts layer
 * after layer.  lpages/rpages: addresses of uint32 arrays. */
static PyObject *ext_pages_loop(PyObject *self, PyObject *const *a, Py_ssize_t nargs)
{
    if (nargs != 11) {
        PyErr_SetString(PyExc_TypeError,
                        "pages_loop(ep, lmem, lbase, lpages, rkey, raddr, rpages, n, page, rounds, burst)");
        return NULL;
    }
    void *ep = PyLong_AsVoidPtr(a[0]), *lmem = PyLong_AsVoidPtr(a[1]), *lbase = PyLong_AsVoidPtr(a[2]);
    const uint32_t *lp = PyLong_AsVoidPtr(a[3]), *rp = PyLong_AsVoidPtr(a[6]);
    void *rkey = PyLong_AsVoidPtr(a[4]);
    unsigned long long raddr = PyLong_AsUnsignedLongLong(a[5]);
    size_t n = PyLong_AsSize_t(a[7]), page = PyLong_AsSize_t(a[8]);
    long rounds = PyLong_AsLong(a[9]), burst = PyLong_AsLong(a[10]);
    if (PyErr_Occurred())
        return NULL;
    if (burst < 1 || burst > 64)
        return PyErr_Format(PyExc_ValueError, "burst %ld: 1..64", burst);
    PyObject *out = PyList_New(0);
    gw_xfer_opts_t o = {.size = sizeof(o), .notify = GW_NOTIFY_COUNTED, .value = 1};
    gw_request_t *r[64];
    for (long k = 0; out && k < rounds; k++) {
        gw_status_t st = GW_OK;
        for (long j = 0; j < burst; j++) {
            r[j] = NULL;
            double t0 = now_ns();
            gw_status_t s = gw_xfer_pages(ep, GW_XFER_PUT, lmem, lbase, lp, rkey, raddr, rp, n, page, &o, &r[j]);
            double t1 = now_ns();
            if (s != GW_OK && st == GW_OK)
                st = s;
            PyObject *v = PyFloat_FromDouble(t1 - t0);
            PyList_Append(out, v);
            Py_XDECREF(v);
        }
        for (long j = 0; j < burst; j++) {
            if (!r[j])
                continue;
            gw_status_t s = gw_request_wait(r[j], 30000);
            if (s != GW_OK && st == GW_OK)
                st = s;
            gw_request_free(r[j]);
        }
        if (st != GW_OK) {
            Py_DECREF(out);
            return PyErr_Format(PyExc_RuntimeError, "gw_xfer_pages: %s", gw_status_name(st));
        }
    }
    return out;
}

static PyObject *ext_put(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "put(ep, addr, len, mem, raddr, rkey)");
        return NULL;
    }
    void *ep = PyLong_AsVoidPtr(args[0]);
    void *addr = PyLong_AsVoidPtr(args[1]);
    size_t len = PyLong_AsSize_t(args[2]);
    void *mem = PyLong_AsVoidPtr(args[3]);
    unsigned long long raddr = PyLong_AsUnsignedLongLong(args[4]);
    void *rkey = PyLong_AsVoidPtr(args[5]);
    if (PyErr_Occurred())
        return NULL;
    return PyLong_FromLong(gw_put(ep, addr, len, mem, raddr, rkey, NULL));
}

static PyMethodDef methods[] = {
    {"put", (PyCFunction)(void (*)(void))ext_put, METH_FASTCALL, "untracked gw_put"},
    {"pages_loop", (PyCFunction)(void (*)(void))ext_pages_loop, METH_FASTCALL, "timed gw_xfer_pages posts"},
    {NULL, NULL, 0, NULL}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_gw_overhead_ext", NULL, -1, methods};
PyMODINIT_FUNC PyInit__gw_overhead_ext(void) { return PyModule_Create(&mod); }
