/*
 * py_overhead_ext.c - a minimal CPython extension with the one call the
 * binding's hot path makes (gw_put, untracked), built by
 * bench/python_overhead.sh only to compare a C extension's call cost with
 * ctypes' (how the package's choice of ctypes was measured).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <gpuwire.h>

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
    {NULL, NULL, 0, NULL}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_gw_overhead_ext", NULL, -1, methods};
PyMODINIT_FUNC PyInit__gw_overhead_ext(void) { return PyModule_Create(&mod); }
