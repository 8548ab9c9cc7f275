/* postimport.c: _postimport.py's register_many and unregister_many in one C pass each (watch_many).
 * A lone trace's start and end register and unregister its import watches (a library not imported
 * yet, multiprocessing's BaseProcess.start): the same steps as _register and _unregister, with no
 * Python frame per pair. The caller holds _postimport.LOCK (call_locked). */
#include "speedups.h"

/* ``obj in list``, as Python answers it: an identical item first (no comparison runs: a hook or
 * the finder is there as itself), then list.__contains__'s own search, which compares. */
static int
list_has(PyObject *list, PyObject *obj)
{
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++)
        if (PyList_GET_ITEM(list, i) == obj)
            return 1;
    return PySequence_Contains(list, obj);
}

/* ``list.remove(obj)``: where the first item is obj itself, that one goes, as list.remove would take
 * it (it looks at the first item first); else list.remove's own search. */
static int
list_remove(PyObject *list, PyObject *obj)
{
    if (PyList_GET_SIZE(list) > 0 && PyList_GET_ITEM(list, 0) == obj)
        return PyList_SetSlice(list, 0, 1, NULL);
    PyObject *r = PyObject_CallMethod(list, "remove", "O", obj);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

/* _postimport._register: hook waits for module ``name`` unless it is imported; the module or None. */
static PyObject *
register_one(PyObject *hooks, PyObject *finder, PyObject *meta_path, PyObject *modules, PyObject *hook, PyObject *name)
{
    PyObject *module = PyDict_GetItemWithError(modules, name); /* borrowed */
    if (module == NULL && PyErr_Occurred())
        return NULL;
    if (module != NULL && module != Py_None)
        return Py_NewRef(module);
    PyObject *empty = PyList_New(0);
    if (empty == NULL)
        return NULL;
    PyObject *waiting = PyDict_SetDefault(hooks, name, empty); /* borrowed */
    Py_DECREF(empty);
    if (waiting == NULL)
        return NULL;
    if (!PyList_Check(waiting)) {
        PyErr_SetString(PyExc_TypeError, "watch_many: a hook list that is not a list");
        return NULL;
    }
    int has = list_has(waiting, hook); /* never twice: a registration cut short is made again */
    if (has < 0 || (!has && PyList_Append(waiting, hook) < 0))
        return NULL;
    int placed = list_has(meta_path, finder);
    if (placed < 0 || (!placed && PyList_Insert(meta_path, 0, finder) < 0))
        return NULL;
    Py_RETURN_NONE;
}

/* _postimport._unregister: hook no longer waits for ``name``; the finder goes with the last hook. */
static int
unregister_one(PyObject *hooks, PyObject *finder, PyObject *meta_path, PyObject *hook, PyObject *name)
{
    PyObject *waiting = PyDict_GetItemWithError(hooks, name); /* borrowed */
    if (waiting == NULL && PyErr_Occurred())
        return -1;
    if (waiting != NULL) {
        if (!PyList_Check(waiting)) {
            PyErr_SetString(PyExc_TypeError, "watch_many: a hook list that is not a list");
            return -1;
        }
        Py_INCREF(waiting);
        int size = PyObject_IsTrue(waiting);
        int has = size > 0 ? list_has(waiting, hook) : 0;
        if (size < 0 || has < 0) {
            Py_DECREF(waiting);
            return -1;
        }
        if (has && list_remove(waiting, hook) < 0) {
            Py_DECREF(waiting);
            return -1;
        }
        size = PyObject_IsTrue(waiting);
        Py_DECREF(waiting);
        if (size < 0)
            return -1;
        if (size)
            return 0;
    }
    /* Nothing waits for ``name``: its entry goes, and the finder once no hook waits at all. */
    if (PyDict_DelItem(hooks, name) < 0) {
        if (!PyErr_ExceptionMatches(PyExc_KeyError))
            return -1;
        PyErr_Clear();
    }
    if (PyDict_GET_SIZE(hooks) != 0)
        return 0;
    for (;;) {
        int placed = list_has(meta_path, finder);
        if (placed <= 0)
            return placed;
        if (list_remove(meta_path, finder) < 0)
            return -1;
    }
}

/* watch_many(hooks, finder, forward, pairs): register (forward) or unregister each (hook, name) of
 * ``pairs`` in order; registering returns the (hook, module) pairs whose module is imported already,
 * for the caller to call once the lock is let go (None when unregistering). */
PyObject *
watch_many(PyObject *module, PyObject *args)
{
    PyObject *hooks, *finder, *pairs;
    int forward;
    if (!PyArg_ParseTuple(args, "O!OpO:watch_many", &PyDict_Type, &hooks, &finder, &forward, &pairs))
        return NULL;
    PyObject *meta_path = PySys_GetObject("meta_path"); /* borrowed */
    PyObject *modules = PyImport_GetModuleDict();        /* borrowed */
    if (meta_path == NULL || !PyList_Check(meta_path) || modules == NULL || !PyDict_Check(modules)) {
        PyErr_SetString(PyExc_RuntimeError, "watch_many: sys.meta_path or sys.modules is not what Python made");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(pairs, "watch_many: pairs must be a sequence of (hook, name)");
    if (seq == NULL)
        return NULL;
    Py_INCREF(meta_path);
    Py_INCREF(modules);
    PyObject *imported = forward ? PyList_New(0) : Py_NewRef(Py_None);
    if (imported == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *pair = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_TypeError, "watch_many: pairs must be a sequence of (hook, name)");
            goto fail;
        }
        PyObject *hook = PyTuple_GET_ITEM(pair, 0), *name = PyTuple_GET_ITEM(pair, 1);
        if (!forward) {
            if (unregister_one(hooks, finder, meta_path, hook, name) < 0)
                goto fail;
            continue;
        }
        PyObject *found = register_one(hooks, finder, meta_path, modules, hook, name);
        if (found == NULL)
            goto fail;
        if (found != Py_None) {
            PyObject *entry = PyTuple_Pack(2, hook, found);
            if (entry == NULL || PyList_Append(imported, entry) < 0) {
                Py_XDECREF(entry);
                Py_DECREF(found);
                goto fail;
            }
            Py_DECREF(entry);
        }
        Py_DECREF(found);
    }
    Py_DECREF(modules);
    Py_DECREF(meta_path);
    Py_DECREF(seq);
    return imported;
fail:
    Py_XDECREF(imported);
    Py_DECREF(modules);
    Py_DECREF(meta_path);
    Py_DECREF(seq);
    return NULL;
}
