/*
 * _gwfast.c - optional C accelerator for the gpuwire package's hot path.
 *
 * ctypes costs about 1.3 us per 7-argument call on an H100 host (argument
 * conversion), a C extension about 0.13 us (bench/python_overhead.sh,
 * docs/PERFORMANCE.md), so the operations whose overhead the package promises
 * (put, get, put_notify, and waiting on their requests) go through this
 * module when it is built; everything else, and every call when it is not
 * built, goes through ctypes.  It links nothing: the package hands it the
 * addresses of the libgpuwire functions ctypes already loaded, so both
 * paths always use one library instance.  Built against the stable ABI
 * (abi3, Python >= 3.10), so one build serves every Python version.
 */
#define Py_LIMITED_API 0x030A0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "gpuwire.h"

typedef gw_status_t (*put_fn)(gw_ep_t *, const void *, size_t, gw_mem_t *, uint64_t, gw_rkey_t *,
                              gw_request_t **);
typedef gw_status_t (*putn_fn)(gw_ep_t *, const void *, size_t, gw_mem_t *, uint64_t, gw_rkey_t *,
                               uint64_t, gw_request_t **);
typedef gw_status_t (*wait_fn)(gw_request_t *, int);
typedef gw_status_t (*test_fn)(const gw_request_t *);
typedef void (*free_fn)(gw_request_t *);

static put_fn f_put, f_get;
static putn_fn f_put_notify;
static wait_fn f_wait;
static test_fn f_test;
static free_fn f_free;

/* init(put, get, put_notify, request_wait, request_test, request_free): addresses */
static PyObject *fast_init(PyObject *self, PyObject *const *a, Py_ssize_t n)
{
    if (n != 6) {
        PyErr_SetString(PyExc_TypeError, "init takes the six function addresses");
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
 * request is still valid; anything else: its final status, request freed. */
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
    else
        f_free(req);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(st);
}

static PyMethodDef methods[] = {
    {"init", (PyCFunction)(void (*)(void))fast_init, METH_FASTCALL, "bind the library's functions"},
    {"rma", (PyCFunction)(void (*)(void))fast_rma, METH_FASTCALL, "put/get/put_notify"},
    {"wait_free", (PyCFunction)(void (*)(void))fast_wait_free, METH_FASTCALL,
     "wait, then free unless still in progress"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_gwfast", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__gwfast(void) { return PyModule_Create(&module); }
