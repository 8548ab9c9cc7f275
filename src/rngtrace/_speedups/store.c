/* rngtrace._speedups, store.c -- mirrors rngtrace/_store.py's RawStore.add past max_events, for the
 * Recorder's draw (record.c): the event is counted in the trace's overflow under the call-site form of
 * its stack (_stack.py's StackTable.capture_site, whose key stack.c's site_key_of makes), as
 * Recording.record() counts it -- with no raw event made and no Python call, once the form and its
 * overflow row exist. */
#include "speedups.h"

/* Past max_events, Recording.record()'s draw and RawStore.add() in C: the call-site form of the
 * stack at ``frame`` (StackTable.capture_site; ``flat``: no further than capture_flat walks),
 * counted in the trace's overflow. 1 when counted (or dropped: the trace has
 * finished), 0 when record() must do it (a form not interned yet, an overflow key not there
 * yet, a code the walk has not noted), -1 on error. */
int
site_count(Recorder *self, PyObject *sink, PyObject *cache, PyFrameObject *frame, PyObject *stream, PyObject *count,
           int flat)
{
    PyObject *trace = PyTuple_GET_ITEM(sink, 3); /* held by ``sink``, which the caller holds */
    PyObject *state = NULL, *depth = NULL, *key = NULL, *finished = NULL, *overflow = NULL, *okey = NULL;
    PyObject *dropped = NULL;
    int done = -1;
    state = Py_XNewRef(SLOT(cache, ca_sites)); /* the table's site_state, read when the Cache was made */
    if (state == NULL || (depth = PyObject_GetAttr(trace, s_depth)) == NULL) {
        done = state == NULL ? 0 : -1;
        goto out;
    }
    long d = PyLong_AsLong(depth);
    if (d == -1 && PyErr_Occurred())
        goto out;
    if (!PyTuple_CheckExact(state) || PyTuple_GET_SIZE(state) < 3 || !PyDict_CheckExact(PyTuple_GET_ITEM(state, 2))) {
        done = 0;
        goto out;
    }
    if ((key = site_key_of((PyObject *)frame, d, flat ? 2 * d : 0, state)) == NULL)
        goto out;
    PyObject *sid = key == Py_NotImplemented ? NULL : PyDict_GetItemWithError(PyTuple_GET_ITEM(state, 2), key);
    if (sid == NULL) {
        done = PyErr_Occurred() ? -1 : 0;
        goto out;
    }
    if ((finished = PyObject_GetAttr(trace, s_finished)) == NULL)
        goto out;
    if (finished == Py_True) { /* another thread's draw that overlapped the end of the block */
        done = 1;
        goto out;
    }
    if ((overflow = PyObject_GetAttr(trace, s_overflow)) == NULL ||
        (okey = PyTuple_Pack(4, stream, self->kind, self->api, sid)) == NULL)
        goto out;
    PyObject *slot = PyDict_CheckExact(overflow) ? PyDict_GetItemWithError(overflow, okey) : NULL;
    if (slot == NULL || !PyList_CheckExact(slot) || PyList_GET_SIZE(slot) != 2 || count == NULL) {
        done = PyErr_Occurred() ? -1 : 0; /* a new key: RawStore.add makes its slot */
        goto out;
    }
    static PyObject *one;
    if (one == NULL && (one = PyLong_FromLong(1)) == NULL) /* kept for the process */
        goto out;
    Py_INCREF(slot);
    PyObject *calls = PyNumber_Add(PyList_GET_ITEM(slot, 0), one);
    PyObject *values = calls == NULL ? NULL : count == Py_None ? Py_NewRef(PyList_GET_ITEM(slot, 1))
                                                               : PyNumber_Add(PyList_GET_ITEM(slot, 1), count);
    if (values != NULL && (dropped = PyObject_GetAttr(trace, s_dropped)) != NULL) {
        PyObject *more = PyNumber_Add(dropped, one);
        if (more != NULL && PyObject_SetAttr(trace, s_dropped, more) == 0) {
            PyList_SetItem(slot, 0, calls); /* steals: set only once the count above is in */
            PyList_SetItem(slot, 1, values);
            calls = values = NULL;
            done = 1;
        }
        Py_XDECREF(more);
    }
    Py_XDECREF(calls);
    Py_XDECREF(values);
    Py_DECREF(slot);
out:
    Py_XDECREF(dropped);
    Py_XDECREF(okey);
    Py_XDECREF(overflow);
    Py_XDECREF(finished);
    Py_XDECREF(key);
    Py_XDECREF(depth);
    Py_XDECREF(state);
    return done;
}

