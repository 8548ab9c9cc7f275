/* rngtrace._speedups, inplace.c -- mirrors rngtrace/sources/_inplace.py: InPlace, a stream's
 * fingerprint read where the stream keeps its state (in_place() makes one where the accelerator
 * is built); the Recorder compares and reads it without a Python call (record.c). The struct
 * and MAX_REGIONS are in speedups.h. */
#include "speedups.h"

static int
PyLong_AsVoidPtr_converter(PyObject *obj, void *out)
{
    void *address = PyLong_AsVoidPtr(obj);
    if (address == NULL && PyErr_Occurred())
        return 0;
    *(void **)out = address;
    return 1;
}

/* -- InPlace: a fingerprint read where the stream keeps its state ------------------ */

static PyObject *
inplace_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *regions, *owners = Py_None;
    static char *names[] = {"regions", "owners", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:InPlace", names, &regions, &owners))
        return NULL;
    PyObject *seq = PySequence_Fast(regions, "regions must be a sequence of (address, size)");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n < 1 || n > MAX_REGIONS) {
        Py_DECREF(seq);
        return PyErr_Format(PyExc_ValueError, "1 to %d regions, not %zd", MAX_REGIONS, n);
    }
    InPlace *self = (InPlace *)type->tp_alloc(type, 0);
    if (self == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        void *address;
        Py_ssize_t size;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "O&n:region", PyLong_AsVoidPtr_converter, &address,
                              &size))
            goto fail;
        if (address == NULL || size <= 0) {
            PyErr_SetString(PyExc_ValueError, "a region needs an address and a positive size");
            goto fail;
        }
        self->address[i] = address;
        self->size[i] = size;
        self->total += size;
    }
    self->count = (int)n;
    self->owners = Py_NewRef(owners);
    Py_DECREF(seq);
    return (PyObject *)self;
fail:
    Py_DECREF(seq);
    Py_DECREF(self);
    return NULL;
}

/* The regions' bytes, one after another. */
PyObject *
inplace_value(InPlace *self, void *closure)
{
    PyObject *bytes = PyBytes_FromStringAndSize(NULL, self->total);
    if (bytes == NULL)
        return NULL;
    char *out = PyBytes_AS_STRING(bytes);
    for (int i = 0; i < self->count; i++) {
        memcpy(out, self->address[i], self->size[i]);
        out += self->size[i];
    }
    return bytes;
}

/* 1 when the memory differs from ``last`` (bytes read earlier), 0 when not, -1 if ``last`` is no such bytes. */
int
inplace_differs(InPlace *self, PyObject *last)
{
    if (!PyBytes_CheckExact(last) || PyBytes_GET_SIZE(last) != self->total)
        return -1;
    const char *was = PyBytes_AS_STRING(last);
    for (int i = 0; i < self->count; i++) {
        if (memcmp(was, self->address[i], self->size[i]) != 0)
            return 1;
        was += self->size[i];
    }
    return 0;
}

static int
inplace_traverse(InPlace *self, visitproc visit, void *arg)
{
    Py_VISIT(self->owners);
    return 0;
}

static int
inplace_clear(InPlace *self)
{
    Py_CLEAR(self->owners);
    return 0;
}

static void
inplace_dealloc(InPlace *self)
{
    PyObject_GC_UnTrack(self);
    inplace_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyGetSetDef inplace_getset[] = {
    {"value", (getter)inplace_value, NULL, "the regions' bytes, copied now", NULL},
    {NULL},
};

PyTypeObject InPlaceType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "rngtrace._speedups.InPlace",
    .tp_basicsize = sizeof(InPlace),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "InPlace(((address, size), ...), owners): a stream's state read where it lives.",
    .tp_new = inplace_new,
    .tp_dealloc = (destructor)inplace_dealloc,
    .tp_traverse = (traverseproc)inplace_traverse,
    .tp_clear = (inquiry)inplace_clear,
    .tp_getset = inplace_getset,
};
