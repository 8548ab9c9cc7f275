/* rngtrace._speedups, profile.c -- mirrors rngtrace/_catchall_profile.py's profile function
 * (ProfileHook: the 3.10/3.11 catch-all's c_call hook, installed as a C profile function).
 *
 * A Python profile function runs for every call and return of the program: about 6x on code
 * that calls many small functions, once the catch-all is armed. This one is a C function
 * (PyEval_SetProfile): it returns at once on every event but a C call, looks the callee up in
 * a sorted array of the addresses the catch-all's table holds (no allocation, no Python call),
 * and calls back into Python (``seen``) only for a callee of a stream's, called from outside
 * rngtrace's own files. It does not keep the stack cache exact (it sees no returns): the
 * catch-all that installs it pins frames instead. Python still costs something while any
 * profile function is set (3.11 runs its bytecode unspecialised), which is why the catch-all
 * is armed only when there is something to find. */
#include "speedups.h"

typedef struct {
    PyObject_HEAD
    PyObject *by_id;  /* id(callee) -> source or OURS: the catch-all's table (CatchAll._by_id) */
    PyObject *ours;   /* OURS: one of rngtrace's recording wrappers, which records its calls itself */
    PyObject *seen;   /* seen(source, callee, frame): record a stream's callee the hook saw */
    PyObject *prefix; /* rngtrace's package folder: calls made from its files are its own */
    PyObject *states; /* HotPath.states: a thread inside a recorded call (busy) has nothing to find */
    uintptr_t *keys;  /* by_id's keys, sorted: most C calls are nobody's, found so in C */
    Py_ssize_t nkeys;
    int on; /* 0 once taken off: a thread that still has it takes it off at its next C call */
} ProfileHook;

static int
compare_keys(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return (x > y) - (x < y);
}

/* by_id, and the sorted array of its keys. */
static int
set_table(ProfileHook *self, PyObject *by_id)
{
    if (!PyDict_Check(by_id)) {
        PyErr_SetString(PyExc_TypeError, "the table must be a dict of id -> source");
        return -1;
    }
    Py_ssize_t n = PyDict_GET_SIZE(by_id), pos = 0, i = 0;
    uintptr_t *keys = PyMem_Malloc(sizeof(uintptr_t) * (n > 0 ? n : 1));
    if (keys == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    PyObject *key, *value;
    while (PyDict_Next(by_id, &pos, &key, &value) && i < n) {
        void *address = PyLong_AsVoidPtr(key);
        if (address == NULL && PyErr_Occurred()) {
            PyMem_Free(keys);
            return -1;
        }
        keys[i++] = (uintptr_t)address;
    }
    qsort(keys, (size_t)i, sizeof(uintptr_t), compare_keys);
    PyMem_Free(self->keys);
    self->keys = keys;
    self->nkeys = i;
    Py_INCREF(by_id);
    Py_XSETREF(self->by_id, by_id);
    return 0;
}

static int
has_key(ProfileHook *self, const void *object)
{
    uintptr_t want = (uintptr_t)object;
    Py_ssize_t lo = 0, hi = self->nkeys;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        uintptr_t at = self->keys[mid];
        if (at == want)
            return 1;
        if (at < want)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

/* The table's entry for object (borrowed), or NULL: not in it (or an error is set). */
static PyObject *
entry(ProfileHook *self, PyObject *object)
{
    if (object == NULL || !has_key(self, object))
        return NULL;
    PyObject *key = PyLong_FromVoidPtr(object);
    if (key == NULL)
        return NULL;
    PyObject *found = PyDict_GetItemWithError(self->by_id, key);
    Py_DECREF(key);
    return found;
}

/* CatchAll.lookup for a c_call's callee (no arg0 on 3.10/3.11): the source, OURS, or NULL. */
static PyObject *
lookup(ProfileHook *self, PyObject *callee)
{
    PyObject *source = entry(self, callee);
    if (source != NULL || PyErr_Occurred())
        return source;
    if (PyMethod_Check(callee)) { /* a Python wrapper reached through the singleton, bound anew */
        PyObject *func = entry(self, PyMethod_GET_FUNCTION(callee));
        if (func == self->ours)
            return func;
        if (PyErr_Occurred())
            return NULL;
        return entry(self, PyMethod_GET_SELF(callee));
    }
    if (PyCFunction_Check(callee)) /* a builtin bound to a singleton: random.random is _inst.random */
        return entry(self, PyCFunction_GET_SELF(callee));
    return NULL;
}

static int
from_own_files(ProfileHook *self, PyFrameObject *frame)
{
    PyCodeObject *code = PyFrame_GetCode(frame);
    Py_ssize_t match = PyUnicode_Tailmatch(code->co_filename, self->prefix, 0, PY_SSIZE_T_MAX, -1);
    Py_DECREF(code);
    return (int)match;
}

/* Whether this thread is inside a recorded call: what that call makes is part of it. (The
 * Python hook is stepped aside from there; this one costs a dict lookup, once per stream callee.) */
static int
busy(ProfileHook *self)
{
    if (st_busy < 0)
        return 0;
    PyObject *key = PyLong_FromUnsignedLong(PyThread_get_thread_ident());
    if (key == NULL)
        return -1;
    PyObject *st = PyDict_GetItemWithError(self->states, key);
    Py_DECREF(key);
    if (st == NULL)
        return PyErr_Occurred() ? -1 : 0;
    PyObject *value = SLOT(st, st_busy);
    return value != NULL && value != Py_False;
}

/* The profile function: every event of the thread comes here; only a stream's C call goes on. */
static int
profile_event(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
    if (what != PyTrace_C_CALL)
        return 0;
    ProfileHook *self = (ProfileHook *)obj;
    if (!self->on) {
        /* A thread started during a trace outlived it: take the hook off here. */
        if (PyThreadState_Get()->c_profileobj == obj)
            PyEval_SetProfile(NULL, NULL);
        return 0;
    }
    PyObject *source = lookup(self, arg);
    if (source == NULL || source == self->ours || frame == NULL) {
        if (source == NULL && PyErr_Occurred())
            PyErr_Clear(); /* a lookup that failed finds nothing, as the Python hook's would */
        return 0;
    }
    int own = from_own_files(self, frame);
    if (own == 0)
        own = busy(self);
    if (own != 0) {
        if (own < 0)
            PyErr_Clear();
        return 0;
    }
    /* Held while Python runs: seen may take this very hook off (the trace ends, the hook is disarmed). */
    Py_INCREF(obj);
    Py_INCREF(source);
    PyObject *result = PyObject_CallFunctionObjArgs(self->seen, source, arg, (PyObject *)frame, NULL);
    Py_DECREF(source);
    if (result == NULL) {
        /* What a Python profile function that raises gets: taken off, its error raised in the program. */
        if (PyThreadState_Get()->c_profileobj == obj)
            PyEval_SetProfile(NULL, NULL);
        Py_DECREF(obj);
        return -1;
    }
    Py_DECREF(result);
    Py_DECREF(obj);
    return 0;
}

static int
hook_init(ProfileHook *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"by_id", "ours", "seen", "prefix", "states", NULL};
    PyObject *by_id, *ours, *seen, *prefix, *states;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!OOUO!:ProfileHook", kwlist, &PyDict_Type, &by_id, &ours, &seen,
                                     &prefix, &PyDict_Type, &states))
        return -1;
    if (set_table(self, by_id) < 0)
        return -1;
    Py_XSETREF(self->ours, Py_NewRef(ours));
    Py_XSETREF(self->seen, Py_NewRef(seen));
    Py_XSETREF(self->prefix, Py_NewRef(prefix));
    Py_XSETREF(self->states, Py_NewRef(states));
    self->on = 1;
    return 0;
}

static PyObject *
hook_install(ProfileHook *self, PyObject *unused)
{
    if (!self->on) /* taken off for good: a thread started as the trace ended runs without it */
        Py_RETURN_FALSE;
    PyEval_SetProfile(profile_event, (PyObject *)self);
    Py_RETURN_TRUE;
}

static PyObject *
hook_off(ProfileHook *self, PyObject *unused)
{
    self->on = 0;
    if (PyThreadState_Get()->c_profileobj == (PyObject *)self)
        PyEval_SetProfile(NULL, NULL);
    Py_RETURN_NONE;
}

static PyObject *
hook_set_table(ProfileHook *self, PyObject *by_id)
{
    if (set_table(self, by_id) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
hook_installed(ProfileHook *self, PyObject *unused)
{
    return PyBool_FromLong(PyThreadState_Get()->c_profileobj == (PyObject *)self &&
                           PyThreadState_Get()->c_profilefunc == profile_event);
}

/* Called as a Python profile function (a user's threading hook chained to it): one event. */
static PyObject *
hook_call(PyObject *obj, PyObject *args, PyObject *kwds)
{
    PyObject *frame, *event, *arg;
    if (!PyArg_ParseTuple(args, "O!UO:ProfileHook", &PyFrame_Type, &frame, &event, &arg))
        return NULL;
    if (PyUnicode_CompareWithASCIIString(event, "c_call") != 0)
        Py_RETURN_NONE;
    if (profile_event(obj, (PyFrameObject *)frame, PyTrace_C_CALL, arg) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static int
hook_traverse(ProfileHook *self, visitproc visit, void *arg)
{
    Py_VISIT(self->by_id);
    Py_VISIT(self->ours);
    Py_VISIT(self->seen);
    Py_VISIT(self->states);
    return 0;
}

static int
hook_clear(ProfileHook *self)
{
    Py_CLEAR(self->by_id);
    Py_CLEAR(self->ours);
    Py_CLEAR(self->seen);
    Py_CLEAR(self->prefix);
    Py_CLEAR(self->states);
    return 0;
}

static void
hook_dealloc(ProfileHook *self)
{
    PyObject_GC_UnTrack(self);
    hook_clear(self);
    PyMem_Free(self->keys);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef hook_methods[] = {
    {"install", (PyCFunction)hook_install, METH_NOARGS, "install(): this thread's profile function, in C; False (not installed) once taken off."},
    {"off", (PyCFunction)hook_off, METH_NOARGS,
     "off(): taken off this thread, and off every other at its next C call; never installed again."},
    {"set_table", (PyCFunction)hook_set_table, METH_O, "set_table(by_id): the catch-all's table, rebuilt."},
    {"installed", (PyCFunction)hook_installed, METH_NOARGS, "installed(): whether it is this thread's profile function."},
    {NULL},
};

PyTypeObject ProfileHookType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "rngtrace._speedups.ProfileHook",
    .tp_basicsize = sizeof(ProfileHook),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The 3.10/3.11 catch-all's c_call profile function, in C; seen(source, callee, frame) for a stream's.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)hook_init,
    .tp_call = hook_call,
    .tp_traverse = (traverseproc)hook_traverse,
    .tp_clear = (inquiry)hook_clear,
    .tp_dealloc = (destructor)hook_dealloc,
    .tp_methods = hook_methods,
};
