/* rngtrace._speedups, shield.c -- mirrors rngtrace/_catchall_common.py's shielded() (Shielded: a
 * monitoring callback that never raises into the call it reports) and rngtrace/_processes.py's
 * ChildWriter (on_sigterm, die_of_sigterm: a recording child's SIGTERM wakes its writer). */
#include "speedups.h"

/* -- Shielded: a callback that never raises into the code it watches ------------------- */

/* A sys.monitoring callback runs just before the call it reports -- a `with` statement's
 * __exit__ call included. A signal handler run inside the callback (a Ctrl-C, a timeout's
 * alarm) raises there, and that call is never made: the program's lock stays held for good.
 * Without the callback the same interrupt is raised after the call, where the `with` already
 * let go. So on the main thread (the one signal handlers run on), what the wrapped callback
 * raises is kept and raised again at the program's next safe point, from a pending call, and
 * the callback returns None. This wrapper runs no bytecode, so no handler can run in it. */
typedef struct {
    PyObject_HEAD
    PyObject *fn;
    unsigned long main_ident;
    vectorcallfunc vectorcall;
} Shielded;

/* Exceptions a shielded callback raised, oldest first: each pending call raises one. */
PyObject *deferred;

static int
raise_deferred(void *unused)
{
    if (deferred == NULL || PyList_GET_SIZE(deferred) == 0)
        return 0;
    PyObject *exc = Py_NewRef(PyList_GET_ITEM(deferred, 0));
    if (PyList_SetSlice(deferred, 0, 1, NULL) < 0) {
        Py_DECREF(exc);
        return -1;
    }
    PyErr_SetObject((PyObject *)Py_TYPE(exc), exc); /* keeps its traceback: where the handler ran */
    Py_DECREF(exc);
    return -1;
}

static PyObject *
shielded_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Shielded *self = (Shielded *)op;
    PyObject *result = PyObject_Vectorcall(self->fn, args, nargsf, kwnames);
    if (result != NULL)
        return result;
    /* The callback's own failure, on any thread: at the recursion limit it gets no frame to run
     * in (the callbacks catch these themselves once they run). Never the program's: deferred,
     * it would fire in the next callback, be deferred again there, and so on down an unwinding
     * stack, skipping each callback's work, until it reached the program's handler. */
    if (PyErr_ExceptionMatches(PyExc_RecursionError) || PyErr_ExceptionMatches(PyExc_MemoryError)) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    if (PyThread_get_thread_ident() != self->main_ident)
        return NULL;
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyErr_NormalizeException(&type, &value, &traceback);
    if (value != NULL && traceback != NULL)
        PyException_SetTraceback(value, traceback);
    Py_ssize_t queued = deferred == NULL ? -1 : PyList_GET_SIZE(deferred);
    if (value == NULL || queued < 0 || PyList_Append(deferred, value) < 0) {
        PyErr_Clear();
        PyErr_Restore(type, value, traceback); /* cannot keep it: raised here after all */
        return NULL;
    }
    if (Py_AddPendingCall(raise_deferred, NULL) < 0) { /* the queue is full */
        PyList_SetSlice(deferred, queued, queued + 1, NULL);
        PyErr_Restore(type, value, traceback);
        return NULL;
    }
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(traceback);
    Py_RETURN_NONE;
}

static PyObject *
shielded_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *fn;
    unsigned long main_ident;
    if ((kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0) || !PyArg_ParseTuple(args, "Ok:Shielded", &fn, &main_ident))
        return NULL;
    if (!PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "Shielded(fn, main_thread_ident): fn must be callable");
        return NULL;
    }
    Shielded *self = (Shielded *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->fn = Py_NewRef(fn);
    self->main_ident = main_ident;
    self->vectorcall = shielded_vectorcall;
    return (PyObject *)self;
}

static int
shielded_traverse(Shielded *self, visitproc visit, void *arg)
{
    Py_VISIT(self->fn);
    return 0;
}

static int
shielded_clear(Shielded *self)
{
    Py_CLEAR(self->fn);
    return 0;
}

static void
shielded_dealloc(Shielded *self)
{
    PyObject_GC_UnTrack(self);
    shielded_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
shielded_call(PyObject *self, PyObject *args, PyObject *kwargs)
{
    return PyVectorcall_Call(self, args, kwargs);
}

PyTypeObject ShieldedType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "rngtrace._speedups.Shielded",
    .tp_basicsize = sizeof(Shielded),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "Shielded(fn, main_thread_ident): fn, whose exceptions on the main thread are raised "
              "again at the program's next safe point instead of where it was called; its "
              "RecursionError or MemoryError is dropped on every thread.",
    .tp_new = shielded_new,
    .tp_dealloc = (destructor)shielded_dealloc,
    .tp_traverse = (traverseproc)shielded_traverse,
    .tp_clear = (inquiry)shielded_clear,
    .tp_call = shielded_call,
    .tp_vectorcall_offset = offsetof(Shielded, vectorcall),
};

/* -- a recording child's SIGTERM (_processes.ChildWriter) ---------------------------------------------
 * Pool.terminate() and a DataLoader's shutdown SIGTERM their workers. A Python handler cannot write what
 * the worker recorded: a worker asleep in a lock when the signal came (one waiting for its next task)
 * trips the handler but never wakes to run it, and never dies. This C handler only wakes the child's
 * writer thread, through a pipe; the writer writes the rest and then lets the child die of SIGTERM
 * (die_of_sigterm), as it would have untraced. In a process this handler was not set for (a child
 * forked from here), or with no pipe to write to, it dies at once. */
#include <signal.h>
#include <unistd.h>

static volatile sig_atomic_t sigterm_fd = -1;
static volatile pid_t sigterm_pid = 0;

static void
sigterm_to_writer(int signum)
{
    int saved = errno;
    char byte = (char)signum;
    if (sigterm_fd < 0 || getpid() != sigterm_pid || write(sigterm_fd, &byte, 1) != 1) {
        signal(signum, SIG_DFL);
        raise(signum);
    }
    errno = saved;
}

/* on_sigterm(fd): SIGTERM wakes fd's reader, where SIGTERM is still the default (or this handler);
 * True if set. on_sigterm(-1): the default back, where the handler is still this one. */
PyObject *
on_sigterm(PyObject *module, PyObject *arg)
{
    long fd = PyLong_AsLong(arg);
    if (fd == -1 && PyErr_Occurred())
        return NULL;
    struct sigaction now;
    if (sigaction(SIGTERM, NULL, &now) != 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    int ours = !(now.sa_flags & SA_SIGINFO) && now.sa_handler == sigterm_to_writer;
    if (fd < 0) {
        sigterm_fd = -1;
        if (ours) {
            struct sigaction dfl;
            memset(&dfl, 0, sizeof(dfl));
            dfl.sa_handler = SIG_DFL;
            sigemptyset(&dfl.sa_mask);
            sigaction(SIGTERM, &dfl, NULL);
        }
        Py_RETURN_TRUE;
    }
    if (!ours && ((now.sa_flags & SA_SIGINFO) || now.sa_handler != SIG_DFL))
        Py_RETURN_FALSE; /* a handler of someone else's (or an ignore): theirs */
    sigterm_pid = getpid();
    sigterm_fd = (sig_atomic_t)fd;
    if (!ours) {
        struct sigaction act;
        memset(&act, 0, sizeof(act));
        act.sa_handler = sigterm_to_writer;
        sigemptyset(&act.sa_mask);
        act.sa_flags = SA_RESTART; /* the program's own calls go on as if nothing came */
        if (sigaction(SIGTERM, &act, NULL) != 0) {
            sigterm_fd = -1;
            return PyErr_SetFromErrno(PyExc_OSError);
        }
    }
    Py_RETURN_TRUE;
}

/* die_of_sigterm(): the default back, then SIGTERM to this process, which kills it. */
PyObject *
die_of_sigterm(PyObject *module, PyObject *noargs)
{
    struct sigaction dfl;
    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigterm_fd = -1;
    sigaction(SIGTERM, &dfl, NULL);
    kill(getpid(), SIGTERM);
    Py_RETURN_NONE;
}
