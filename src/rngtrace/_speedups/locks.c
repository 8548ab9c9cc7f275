/* rngtrace._speedups, locks.c -- mirrors the locks of rngtrace/_record.py and rngtrace/_hublock.py:
 * StreamLock, the reentrant lock Recording.stream_lock() gives each stream (the Recorder takes
 * it in C, record.c), and call_locked / call_if_free, the hub's (_hublock.call_locked, call_when_free, call_if_free)
 * (a lock taken and released in C, where no signal handler runs in between). The struct is in
 * speedups.h. */
#include "speedups.h"

/* -- StreamLock: a stream's reentrant lock, taken by the Recorder without a method call --
 *
 * Every field is read and written with the GIL held (this module declares no free-threaded
 * support, so an interpreter without a GIL turns it back on when it imports us): a free lock is
 * taken by setting its owner, with no OS call. On 3.11 and 3.12 even a non-blocking
 * PyThread_acquire_lock_timed reads the monotonic clock, once per draw. Only a thread that finds
 * the lock held sleeps, on the gate, with the GIL released; a give that leaves the lock free
 * with someone asleep opens the gate, and whoever wakes takes the lock if it is still free, or
 * sleeps again (a thread arriving meanwhile may take it first, as with any CPython lock). */

static int
gate_close(PyThread_type_lock gate)
{
    return PyThread_acquire_lock(gate, NOWAIT_LOCK) == PY_LOCK_ACQUIRED ? 0 : -1;
}

static PyObject *
stream_lock_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    if (PyTuple_GET_SIZE(args) != 0 || (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0)) {
        PyErr_SetString(PyExc_TypeError, "StreamLock() takes no arguments");
        return NULL;
    }
    StreamLock *self = (StreamLock *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    if ((self->gate = PyThread_allocate_lock()) == NULL || gate_close(self->gate) < 0) {
        Py_DECREF(self);
        PyErr_SetString(PyExc_MemoryError, "cannot allocate a lock");
        return NULL;
    }
    self->closed = 1;
    return (PyObject *)self;
}

static void
stream_lock_dealloc(StreamLock *self)
{
    if (self->weakrefs != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    if (self->gate != NULL) {
        if (self->closed)
            PyThread_release_lock(self->gate);
        PyThread_free_lock(self->gate);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* 1 when taken, 0 when not (not blocking, or timed out), -1 with an error (an interrupted wait). */
int
stream_lock_take(StreamLock *self, int blocking, PY_TIMEOUT_T microseconds)
{
    unsigned long me = PyThread_get_thread_ident();
    if (self->count > 0 && self->owner == me) {
        if (self->count == ULONG_MAX) {
            PyErr_SetString(PyExc_OverflowError, "lock taken too many times");
            return -1;
        }
        self->count++;
        return 1;
    }
    if (self->count > 0) {
        if (!blocking)
            return 0;
        self->waiters++;
        while (self->count > 0) {
            PyLockStatus got;
            Py_BEGIN_ALLOW_THREADS
            got = PyThread_acquire_lock_timed(self->gate, microseconds, 1);
            Py_END_ALLOW_THREADS
            if (got == PY_LOCK_ACQUIRED) {
                self->closed = 1; /* woken: the gate is ours, closed again */
                continue;
            }
            if (got == PY_LOCK_INTR) {
                if (Py_MakePendingCalls() < 0) {
                    self->waiters--;
                    return -1;
                }
                continue; /* a timed wait starts over: signals make it longer, never shorter */
            }
            self->waiters--; /* timed out */
            return 0;
        }
        self->waiters--;
    }
    self->owner = me;
    self->count = 1;
    return 1;
}

int
stream_lock_give(StreamLock *self)
{
    if (self->count == 0 || self->owner != PyThread_get_thread_ident()) {
        PyErr_SetString(PyExc_RuntimeError, "cannot release un-acquired lock");
        return -1;
    }
    if (--self->count == 0) {
        self->owner = 0;
        if (self->waiters > 0 && self->closed) {
            self->closed = 0;
            PyThread_release_lock(self->gate);
        }
    }
    return 0;
}

static PyObject *
stream_lock_acquire(StreamLock *self, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"blocking", "timeout", NULL};
    int blocking = 1;
    double timeout = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|pd:acquire", names, &blocking, &timeout))
        return NULL;
    if (!blocking && timeout != -1) {
        PyErr_SetString(PyExc_ValueError, "can't specify a timeout for a non-blocking call");
        return NULL;
    }
    if (timeout < 0 && timeout != -1) {
        PyErr_SetString(PyExc_ValueError, "timeout value must be a non-negative number");
        return NULL;
    }
    PY_TIMEOUT_T microseconds = -1;
    if (timeout >= 0) {
        if (timeout * 1e6 > (double)PY_TIMEOUT_MAX) {
            PyErr_SetString(PyExc_OverflowError, "timeout value is too large");
            return NULL;
        }
        microseconds = (PY_TIMEOUT_T)(timeout * 1e6);
    }
    int taken = stream_lock_take(self, blocking, microseconds);
    return taken < 0 ? NULL : PyBool_FromLong(taken);
}

static PyObject *
stream_lock_release(StreamLock *self, PyObject *unused)
{
    if (stream_lock_give(self) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
stream_lock_exit(StreamLock *self, PyObject *args)
{
    return stream_lock_release(self, NULL);
}

/* In a forked child: whoever held the lock in the parent is gone. The old lock is left as it is
 * (freeing a lock another thread held is undefined), as CPython's own _at_fork_reinit does. */
static PyObject *
stream_lock_at_fork_reinit(StreamLock *self, PyObject *unused)
{
    PyThread_type_lock fresh = PyThread_allocate_lock();
    if (fresh == NULL || gate_close(fresh) < 0) {
        if (fresh != NULL)
            PyThread_free_lock(fresh);
        PyErr_SetString(PyExc_MemoryError, "cannot allocate a lock");
        return NULL;
    }
    self->gate = fresh;
    self->closed = 1;
    self->owner = self->count = self->waiters = 0;
    Py_RETURN_NONE;
}

static PyObject *
stream_lock_is_owned(StreamLock *self, PyObject *unused)
{
    return PyBool_FromLong(self->count > 0 && self->owner == PyThread_get_thread_ident());
}

static PyObject *
stream_lock_repr(StreamLock *self)
{
    return PyUnicode_FromFormat("<rngtrace StreamLock %s count=%lu>", self->count ? "locked" : "unlocked", self->count);
}

static PyMethodDef stream_lock_methods[] = {
    {"acquire", (PyCFunction)(void (*)(void))stream_lock_acquire, METH_VARARGS | METH_KEYWORDS,
     "acquire(blocking=True, timeout=-1): take the lock (again, on the thread holding it)."},
    {"release", (PyCFunction)stream_lock_release, METH_NOARGS, "release(): give one hold back."},
    {"__enter__", (PyCFunction)(void (*)(void))stream_lock_acquire, METH_VARARGS | METH_KEYWORDS, NULL},
    {"__exit__", (PyCFunction)stream_lock_exit, METH_VARARGS, NULL},
    {"_at_fork_reinit", (PyCFunction)stream_lock_at_fork_reinit, METH_NOARGS, "In a forked child: unlocked."},
    {"_is_owned", (PyCFunction)stream_lock_is_owned, METH_NOARGS, "Whether this thread holds the lock."},
    {NULL},
};

PyTypeObject StreamLockType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "rngtrace._speedups.StreamLock",
    .tp_basicsize = sizeof(StreamLock),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A stream's reentrant lock (an RLock the Recorder takes without a method call).",
    .tp_new = stream_lock_new,
    .tp_dealloc = (destructor)stream_lock_dealloc,
    .tp_repr = (reprfunc)stream_lock_repr,
    .tp_methods = stream_lock_methods,
    .tp_weaklistoffset = offsetof(StreamLock, weakrefs),
};

static PyObject *locked_call(PyObject *lock, PyObject *args);

/* call_locked(lock, fn, *args): fn(*args) with ``lock`` taken (waiting for it), released in C. */
PyObject *
call_locked(PyObject *module, PyObject *args)
{
    if (PyTuple_GET_SIZE(args) < 2) {
        PyErr_SetString(PyExc_TypeError, "call_locked(lock, fn, *args)");
        return NULL;
    }
    PyObject *lock = PyTuple_GET_ITEM(args, 0);
    PyObject *got = PyObject_CallMethodNoArgs(lock, s_acquire);
    if (got == NULL)
        return NULL;
    Py_DECREF(got);
    return locked_call(lock, args);
}

/* call_if_free(lock, fn, *args): fn(*args) with ``lock`` taken, or NotImplemented without calling
 * it when another thread holds the lock. Taken and released here, in C, so that no signal handler
 * (Ctrl-C) can run between taking the lock and guarding its release. */
PyObject *
call_if_free(PyObject *module, PyObject *args)
{
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    if (n < 2) {
        PyErr_SetString(PyExc_TypeError, "call_if_free(lock, fn, *args)");
        return NULL;
    }
    PyObject *lock = PyTuple_GET_ITEM(args, 0);
    PyObject *got = PyObject_CallMethodOneArg(lock, s_acquire, Py_False);
    if (got == NULL)
        return NULL;
    int taken = PyObject_IsTrue(got);
    Py_DECREF(got);
    if (taken < 0)
        return NULL;
    if (!taken)
        Py_RETURN_NOTIMPLEMENTED;
    return locked_call(lock, args);
}

/* fn(*args) for args = (lock, fn, *args), the lock held: released here whatever fn does. */
static PyObject *
locked_call(PyObject *lock, PyObject *args)
{
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    PyObject *fn = PyTuple_GET_ITEM(args, 1);
    /* The tuple holds fn and its arguments while the call runs. */
    PyObject *result = PyObject_Vectorcall(fn, &PyTuple_GET_ITEM(args, 2), (size_t)(n - 2), NULL);
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyObject *released = PyObject_CallMethodNoArgs(lock, s_release);
    if (released == NULL) {
        if (type != NULL)
            PyErr_Clear(); /* the call's own error matters more */
        else
            Py_CLEAR(result);
    }
    Py_XDECREF(released);
    if (type != NULL)
        PyErr_Restore(type, value, traceback);
    return result;
}
