/* rngtrace._speedups: the common case of a recording wrapper, in C.
 *
 * A Recorder stands where a Python recording wrapper (sources/_base.py,
 * sources/torch.py) would: it is that wrapper's fast path. It records a draw
 * itself unless something unusual is going on -- a strict on_draw policy, a
 * profile hook that is not the catch-all's own on this thread, a pending
 * catch-all handoff, a keyword left to Python (torch's generator=), the
 * thread's first draw -- and hands those calls, unchanged, to the Python
 * wrapper it was made from, which stays the reference for what is recorded.
 * Where the event's stack is not a cached one, or more than one trace records,
 * it gives the event to the hub's record(). The Python package works without
 * this module; RNGTRACE_PURE=1 turns it off.
 *
 * What it does per draw is what the Python wrapper does: take the stream's
 * lock, compare the stream's fingerprint with the value after the last
 * recorded call (reporting a move nobody recorded), call the original with the
 * thread marked busy, count the values, append the raw event, read the
 * fingerprint again, release the lock.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>
#include <structmember.h>

/* Offsets of the __slots__ the hot path reads (rngtrace/_hotpath.py, _threads.py), found from
 * their member descriptors by configure(): a renamed slot fails there, not silently here. */
static Py_ssize_t hp_now = -1, hp_states, hp_record, hp_unattributed, hp_raised;
static Py_ssize_t sn_active, sn_sink, sn_strict, sn_profile_hook, sn_cache, ca_ids, ca_table, ca_walk, ca_pin;
static Py_ssize_t st_busy = -1, st_pending, st_frames, st_epoch, st_key, st_hooked;
static Py_ssize_t fp_view = -1, fp_last;
static PyTypeObject *hot_path_type, *snapshot_type, *cache_type, *thread_state_type, *fingerprint_type;

static PyObject *s_value, *s_add, *s_is_cpu, *s_numel, *s_depth, *s_watch_code, *s_acquire, *s_release;
static PyObject *one, *zero;
static PyObject *root; /* ROOT in _stack.py: the parent of an outermost frame */

#define SLOT(obj, offset) (*(PyObject **)((char *)(obj) + (offset)))

/* A dict's version tag changes with every write to it (CPython 3.10-3.13; the field is gone
 * in 3.14): equal tags mean nobody wrote to the dict in between. */
#if PY_VERSION_HEX < 0x030E0000
#define HAVE_VERSION_TAG 1
#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif
static inline uint64_t
version_tag(PyObject *dict)
{
    return ((PyDictObject *)dict)->ma_version_tag;
}
#endif

static void
set_slot(PyObject *obj, Py_ssize_t offset, PyObject *value)
{
    PyObject *old = SLOT(obj, offset);
    Py_INCREF(value);
    SLOT(obj, offset) = value;
    Py_XDECREF(old);
}

static Py_ssize_t
slot_offset(PyTypeObject *type, const char *name)
{
    PyObject *descr = PyDict_GetItemString(type->tp_dict, name);
    if (descr == NULL || Py_TYPE(descr) != &PyMemberDescr_Type) {
        PyErr_Format(PyExc_TypeError, "%s.%s is not a slot", type->tp_name, name);
        return -1;
    }
    PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
    if (member->type != T_OBJECT_EX && member->type != T_OBJECT) {
        PyErr_Format(PyExc_TypeError, "%s.%s is not an object slot", type->tp_name, name);
        return -1;
    }
    return member->offset;
}

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

#define MAX_REGIONS 4

typedef struct {
    PyObject_HEAD
    int count;
    Py_ssize_t total;
    const char *address[MAX_REGIONS];
    Py_ssize_t size[MAX_REGIONS];
    PyObject *owners; /* what keeps the memory alive */
} InPlace;

static PyTypeObject InPlaceType;

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
static PyObject *
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
static int
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

static PyTypeObject InPlaceType = {
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
static PyObject *deferred;

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

static PyTypeObject ShieldedType = {
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

/* -- StreamLock: a stream's reentrant lock, taken by the Recorder without a method call -- */

/* What threading.RLock does, for the lock a recording wrapper holds around one call: reentrant
 * (a finalizer drawing on the same thread must not deadlock), waiting with the GIL released, and
 * a wait a signal handler interrupts (Ctrl-C) raises what the handler raised. The Recorder takes
 * and releases it in C; Python code uses it as an RLock. */
typedef struct {
    PyObject_HEAD
    PyThread_type_lock lock;
    unsigned long owner, count;
    PyObject *weakrefs;
} StreamLock;

static PyTypeObject StreamLockType;

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
    if ((self->lock = PyThread_allocate_lock()) == NULL) {
        Py_DECREF(self);
        PyErr_SetString(PyExc_MemoryError, "cannot allocate a lock");
        return NULL;
    }
    return (PyObject *)self;
}

static void
stream_lock_dealloc(StreamLock *self)
{
    if (self->weakrefs != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    if (self->lock != NULL) {
        if (self->count > 0)
            PyThread_release_lock(self->lock);
        PyThread_free_lock(self->lock);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* 1 when taken, 0 when not (not blocking, or timed out), -1 with an error (an interrupted wait). */
static int
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
    PyLockStatus got = PyThread_acquire_lock_timed(self->lock, 0, 0);
    while (got != PY_LOCK_ACQUIRED && blocking) {
        Py_BEGIN_ALLOW_THREADS
        got = PyThread_acquire_lock_timed(self->lock, microseconds, 1);
        Py_END_ALLOW_THREADS
        if (got == PY_LOCK_INTR) {
            if (Py_MakePendingCalls() < 0)
                return -1;
            continue; /* a timed wait starts over: signals make it longer, never shorter */
        }
        if (got == PY_LOCK_FAILURE)
            return 0;
    }
    if (got != PY_LOCK_ACQUIRED)
        return 0;
    self->owner = me;
    self->count = 1;
    return 1;
}

static int
stream_lock_give(StreamLock *self)
{
    if (self->count == 0 || self->owner != PyThread_get_thread_ident()) {
        PyErr_SetString(PyExc_RuntimeError, "cannot release un-acquired lock");
        return -1;
    }
    if (--self->count == 0) {
        self->owner = 0;
        PyThread_release_lock(self->lock);
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
    if (fresh == NULL) {
        PyErr_SetString(PyExc_MemoryError, "cannot allocate a lock");
        return NULL;
    }
    self->lock = fresh;
    self->owner = self->count = 0;
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

static PyTypeObject StreamLockType = {
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

/* -- Recorder ------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *dict;
    PyObject *weakrefs;
    PyObject *slow;         /* the Python wrapper: every case the fast path leaves */
    PyObject *original;
    PyObject *owner;        /* the singleton whose calls are recorded, or None */
    PyObject *hot;          /* the HotPath: everything read from Python, by slot */
    PyObject *fingerprint;
    PyObject *lock, *acquire, *release; /* a StreamLock is taken in C, any other lock by its methods */
    PyObject *stream, *kind, *api, *moved;
    PyObject *count_of;     /* None: one value, unless the result places itself */
    PyObject *tensor_type;  /* torch: a result of this type is placed by device */
    PyObject *place;        /* torch: result -> (stream or None, count) */
    PyObject *slow_keyword; /* a keyword that sends the call to the Python wrapper */
    PyObject *takes;        /* (args, kwargs) -> whether this call draws (dropout in training), or None */
    PyObject *condition;    /* the same, declared: _base.Condition.spec, or None */
    PyObject *after;        /* a seed: after(st, frame, args, kwargs) records it, once it returned; else None */
    PyObject *inside;       /* file prefixes (the stream's library, rngtrace): a call from there inside a
                             * recorded call is part of it; a tuple, or None to leave that to the wrapper */
    PyObject *through;      /* file prefixes whose calls outside a recorded call are the wrapper's to
                             * record (random.py's methods calling each other on the instance), or None */
    int test;               /* the condition's test (TEST_*), and where its arguments are found */
    int params;
    Py_ssize_t index[2];
    PyObject *name[2], *fallback[2];
} Recorder;

/* A capture's depth: the trace's, read only when a walk needs it (a cached chain that did not
 * reach the outermost frame), which a walk through fresh frames under a loop seldom does. */
typedef struct {
    PyObject *trace; /* borrowed: read trace.depth; NULL: ``value`` is given */
    long value;
} Depth;

/* The depth, -1 with an error set where trace.depth is not an int. */
static long
depth_of(Depth *depth)
{
    if (depth->trace != NULL) {
        PyObject *value = PyObject_GetAttr(depth->trace, s_depth);
        long read = value == NULL ? -1 : PyLong_AsLong(value);
        Py_XDECREF(value);
        if (read == -1 && PyErr_Occurred())
            return -1;
        depth->value = read;
        depth->trace = NULL;
    }
    return depth->value;
}

static PyObject *capture_walk(PyObject *frame, Depth *depth, PyObject *known, int pin, PyObject *state, PyObject *watch);
static PyObject *known_stack(PyFrameObject *frame, PyObject *known, PyObject *ids, PyObject *state);

/* The raw event, as the Python record() makes it. Untracked by the collector when it holds only
 * strings, ints and None (what a collection would find and do anyway): a long loop of draws then
 * leaves the collector nothing to traverse. */
static PyObject *
raw_event(Recorder *self, PyObject *stream, PyObject *count, PyObject *sid, PyObject *thread)
{
    PyObject *raw = PyTuple_Pack(7, stream, self->kind, self->api, count, sid, thread, Py_None);
    if (raw != NULL && PyUnicode_CheckExact(stream) && (count == Py_None || PyLong_CheckExact(count)) &&
        PyLong_CheckExact(sid) && PyLong_CheckExact(thread) && PyUnicode_CheckExact(self->kind) &&
        PyUnicode_CheckExact(self->api))
        PyObject_GC_UnTrack(raw);
    return raw;
}

/* Whether a pinned entry of a thread's cache, (lasti, node, frame), holds a frame that has
 * finished: a frame object becomes GC-tracked once it outlives its run (the Sweeper's test). */
static int
pin_finished(PyObject *entry)
{
    return PyTuple_CheckExact(entry) && PyTuple_GET_SIZE(entry) > 2 &&
           PyObject_GC_IsTracked(PyTuple_GET_ITEM(entry, 2));
}

/* The finished frames a walk took out of a thread's cache: held here (no allocation for the
 * usual one or few) until the caller drops them, once the stream's lock is given back. */
#define RELEASED_INLINE 8
typedef struct {
    PyObject *inline_entries[RELEASED_INLINE];
    int count;
    PyObject *more; /* a list, past RELEASED_INLINE */
} Released;

static void
released_drop(Released *r)
{
    for (int i = 0; i < r->count; i++)
        Py_DECREF(r->inline_entries[i]);
    r->count = 0;
    Py_CLEAR(r->more);
}

/* Take the finished frames ``known`` pins out of it, into ``r`` (which holds them still).
 *
 * A walk that pins a frame lets go of the finished ones too, so a frame a loop calls afresh
 * (a DataLoader's fetch(), a forward()) is held until the next one is pinned, not until the
 * Sweeper's next pass: its locals (a batch of tensors) are not kept alive while the next
 * batch allocates. Dropped here, a frame's locals could run a finalizer under the lock. */
static void
take_finished_pins(PyObject *known, Released *r)
{
    PyObject *key, *entry;
    Py_ssize_t pos = 0;
    PyObject *keys[RELEASED_INLINE];
    int found = 0, overflow = 0;
    /* One pass, allocating nothing (so no collection runs and changes the dict under it). */
    while (PyDict_Next(known, &pos, &key, &entry)) {
        if (!pin_finished(entry))
            continue;
        if (found == RELEASED_INLINE) {
            overflow = 1;
            break;
        }
        keys[found] = Py_NewRef(key);
        r->inline_entries[found++] = Py_NewRef(entry);
    }
    r->count = found;
    /* ``r`` holds every entry: deleting one frees no frame, so no code runs between deletions. */
    for (int i = 0; i < found; i++) {
        if (PyDict_DelItem(known, keys[i]) < 0)
            PyErr_Clear();
        Py_DECREF(keys[i]);
    }
    if (!overflow)
        return;
    /* More finished frames than the inline room (a Sweeper long stalled): the rest in a list. */
    PyObject *gone = PyList_New(0); /* may collect, and run code: the dict is read afresh below */
    if (gone == NULL) {
        PyErr_Clear();
        return;
    }
    pos = 0;
    while (PyDict_Next(known, &pos, &key, &entry)) {
        if (pin_finished(entry) && (PyList_Append(gone, key) < 0 || PyList_Append(gone, entry) < 0)) {
            PyErr_Clear();
            break;
        }
    }
    Py_ssize_t n = PyList_GET_SIZE(gone) & ~(Py_ssize_t)1;
    for (Py_ssize_t i = 0; i < n; i += 2)
        if (PyDict_DelItem(known, PyList_GET_ITEM(gone, i)) < 0)
            PyErr_Clear();
    r->more = gone;
}

/* The event's stack and its append, as Recording.record() does them while exactly one trace
 * records (``sink``), with the Snapshot ``now`` read once when the call began (its sink and stack
 * table belong together): from the thread's cache where it knows the caller's caller, else by the
 * C walk (StackTable.capture). 1 when appended, 0 when the Python record() must do it (the
 * thread's cache is not kept under this Cache, several traces record, the walk met something it
 * does not expect), -1 on error. After a walk that may have pinned a frame, ``released`` holds the
 * finished pins taken out of the cache (take_finished_pins), for the caller to drop. */
static int
fast_record(Recorder *self, PyObject *now, PyObject *st, PyFrameObject *frame, PyObject *stream, PyObject *count,
            Released *released)
{
    PyObject *sink = SLOT(now, sn_sink), *known = SLOT(st, st_frames), *cache = SLOT(now, sn_cache);
    if (sink == NULL || cache == NULL || known == NULL || Py_TYPE(cache) != cache_type)
        return 0;
    PyObject *interned = SLOT(cache, ca_ids), *walk = SLOT(cache, ca_walk), *pin = SLOT(cache, ca_pin);
    /* The thread's cache was made under this Cache (same table, same frame mode), or not at all. */
    if (interned == NULL || walk == NULL || pin == NULL || SLOT(st, st_epoch) != cache)
        return 0;
    if (!PyTuple_CheckExact(sink) || PyTuple_GET_SIZE(sink) < 4 || !PyDict_CheckExact(known) ||
        !PyDict_CheckExact(interned) || !PyTuple_CheckExact(walk) || !PyBool_Check(pin))
        return 0;
    /* Held while we work: an allocation below may run the collector, and with it any code. */
    Py_INCREF(sink);
    Py_INCREF(known);
    Py_INCREF(interned);
    Py_INCREF(cache);
    int done = -1;
    PyObject *sid = NULL, *watch = NULL, *raw = NULL;
    int contained = PySequence_Contains(PyTuple_GET_ITEM(sink, 2), stream);
    if (contained <= 0) {
        done = contained;
        goto out;
    }
    sid = known_stack(frame, known, interned, SLOT(cache, ca_walk));
    if (sid == NULL) {
        if (PyErr_Occurred())
            goto out;
        /* A caller the cache does not know (fresh frames: a helper, a forward()): walked here. */
        Depth depth = {PyTuple_GET_ITEM(sink, 3), 0}; /* ``sink`` (held) holds the trace */
        if (pin == Py_False && (watch = PyObject_GetAttr(SLOT(cache, ca_table), s_watch_code)) == NULL)
            goto walk_failed;
        sid = capture_walk((PyObject *)frame, &depth, known, pin == Py_True, SLOT(cache, ca_walk),
                           watch != NULL ? watch : Py_None);
        if (sid == NULL)
            goto walk_failed;
        if (!PyLong_CheckExact(sid)) { /* NotImplemented: the Python walk decides */
            done = 0;
            goto out;
        }
        if (pin == Py_True)
            take_finished_pins(known, released);
    }
    raw = raw_event(self, stream, count, sid, SLOT(st, st_key));
    if (raw == NULL)
        goto out;
    PyObject *events = PyTuple_GET_ITEM(sink, 0);
    Py_ssize_t limit = PyLong_AsSsize_t(PyTuple_GET_ITEM(sink, 1));
    if (limit == -1 && PyErr_Occurred())
        goto out;
    if (PyList_CheckExact(events) && PyList_GET_SIZE(events) < limit) {
        done = PyList_Append(events, raw) < 0 ? -1 : 1;
    }
    else {
        PyObject *r = PyObject_CallMethodOneArg(PyTuple_GET_ITEM(sink, 3), s_add, raw);
        done = r == NULL ? -1 : 1;
        Py_XDECREF(r);
    }
    goto out;
walk_failed:
    /* StackTable.capture falls back to its Python walk on an Exception from the C one: so does
     * the Python record() this hands the event to. Anything else (an interrupt) propagates. */
    if (PyErr_ExceptionMatches(PyExc_Exception)) {
        PyErr_Clear();
        done = 0;
    }
out:
    Py_XDECREF(raw);
    Py_XDECREF(watch);
    Py_XDECREF(sid);
    Py_DECREF(cache);
    Py_DECREF(interned);
    Py_DECREF(known);
    Py_DECREF(sink);
    return done;
}

/* fn(first, second, args as a tuple, kwargs as a dict), with ``second``, then ``first``, left out when NULL. */
static PyObject *
call_with_arguments2(PyObject *fn, PyObject *first, PyObject *second, PyObject *const *args, Py_ssize_t nargs,
                     PyObject *kwnames)
{
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *tuple = PyTuple_New(nargs), *kwargs = PyDict_New(), *r = NULL;
    if (tuple == NULL || kwargs == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < nargs; i++)
        PyTuple_SET_ITEM(tuple, i, Py_NewRef(args[i]));
    for (Py_ssize_t i = 0; i < nkw; i++)
        if (PyDict_SetItem(kwargs, PyTuple_GET_ITEM(kwnames, i), args[nargs + i]) < 0)
            goto done;
    r = second != NULL  ? PyObject_CallFunctionObjArgs(fn, first, second, tuple, kwargs, NULL)
        : first != NULL ? PyObject_CallFunctionObjArgs(fn, first, tuple, kwargs, NULL)
                        : PyObject_CallFunctionObjArgs(fn, tuple, kwargs, NULL);
done:
    Py_XDECREF(tuple);
    Py_XDECREF(kwargs);
    return r;
}

/* fn(first, args as a tuple, kwargs as a dict), with ``first`` left out when NULL. */
static PyObject *
call_with_arguments(PyObject *fn, PyObject *first, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    return call_with_arguments2(fn, first, NULL, args, nargs, kwnames);
}

/* (stream, count) of a result, as the Python wrapper finds them; stream None: nothing to record. */
static int
count_values(Recorder *self, PyObject *result, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
             PyObject **stream, PyObject **count)
{
    *stream = self->stream;
    Py_INCREF(*stream);
    if (self->tensor_type != Py_None) {
        if ((PyObject *)Py_TYPE(result) == self->tensor_type) {
            PyObject *cpu = PyObject_GetAttr(result, s_is_cpu);
            if (cpu == NULL)
                return -1;
            Py_DECREF(cpu);
            if (cpu == Py_True) {
                *count = PyObject_CallMethodNoArgs(result, s_numel);
                return *count == NULL ? -1 : 0;
            }
        }
        PyObject *placed = PyObject_CallOneArg(self->place, result);
        if (placed == NULL)
            return -1;
        if (!PyTuple_CheckExact(placed) || PyTuple_GET_SIZE(placed) != 2) {
            Py_DECREF(placed);
            PyErr_SetString(PyExc_TypeError, "place() must return (stream, count)");
            return -1;
        }
        Py_SETREF(*stream, Py_NewRef(PyTuple_GET_ITEM(placed, 0)));
        *count = Py_NewRef(PyTuple_GET_ITEM(placed, 1));
        Py_DECREF(placed);
        return 0;
    }
    if (self->count_of == Py_None || PyFloat_CheckExact(result)) {
        *count = Py_NewRef(one);
        return 0;
    }
    *count = call_with_arguments(self->count_of, result, args, nargs, kwnames);
    return *count == NULL ? -1 : 0;
}

static int
call_ignoring_result(PyObject *callable)
{
    PyObject *r = PyObject_CallNoArgs(callable);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

static int
take_lock(Recorder *self)
{
    if (Py_TYPE(self->lock) == &StreamLockType)
        return stream_lock_take((StreamLock *)self->lock, 1, -1) < 0 ? -1 : 0;
    return call_ignoring_result(self->acquire);
}

static int
give_lock(Recorder *self)
{
    if (Py_TYPE(self->lock) == &StreamLockType)
        return stream_lock_give((StreamLock *)self->lock);
    return call_ignoring_result(self->release);
}

/* The recorded call, under the stream's lock. */
static PyObject *
record_call(Recorder *self, PyObject *now, PyObject *st, PyObject *frame, PyObject *const *args, size_t nargsf,
            PyObject *kwnames)
{
    if (take_lock(self) < 0)
        return NULL;
    PyObject *result = NULL, *view = SLOT(self->fingerprint, fp_view);
    PyObject *stream = NULL, *count = NULL;
    Released released = {.count = 0, .more = NULL};
    view = Py_NewRef(view != NULL ? view : Py_None);
    int in_place = Py_TYPE(view) == &InPlaceType;
    if (view != Py_None) {
        PyObject *last = SLOT(self->fingerprint, fp_last);
        if (last != NULL && last != Py_None) {
            int moved = in_place ? inplace_differs((InPlace *)view, last) : -1;
            if (moved < 0) {
                PyObject *now = PyObject_GetAttr(view, s_value);
                if (now == NULL)
                    goto release;
                moved = PyObject_RichCompareBool(now, last, Py_NE);
                Py_DECREF(now);
            }
            if (moved < 0)
                goto release;
            if (moved) {
                PyObject *r = PyObject_CallFunctionObjArgs(SLOT(self->hot, hp_unattributed), self->stream, frame,
                                                           self->moved, NULL);
                if (r == NULL)
                    goto release;
                Py_DECREF(r);
            }
        }
    }
    /* Busy until the call is recorded: a finalizer drawing meanwhile is its own event. */
    set_slot(st, st_busy, frame != Py_None ? frame : Py_True);
    result = PyObject_Vectorcall(self->original, args, nargsf, kwnames);
    if (result == NULL) {
        /* Recorded if it moved the stream first (it drew, then failed); the state is taken as explained. */
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback);
        PyObject *r = PyObject_CallFunctionObjArgs(SLOT(self->hot, hp_raised), self->stream, self->kind, self->api,
                                                   frame, st, type != NULL ? type : Py_None, NULL);
        if (r == NULL)
            PyErr_Clear();
        Py_XDECREF(r);
        PyErr_Restore(type, value, traceback);
        goto release;
    }
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (self->after != Py_None) {
        /* A seed: the Python side records it and rebases (_base.recorder's after_seed), still under
         * the lock and busy. Called from C, so no frame of rngtrace's stands between the caller and
         * the seed: a stack the seed formats (torch's lazy CUDA seeding keeps one) shows none. */
        PyObject *r = call_with_arguments2(self->after, st, frame, args, nargs, kwnames);
        if (r == NULL)
            goto fail;
        Py_DECREF(r);
        goto release;
    }
    if (count_values(self, result, args, nargs, kwnames, &stream, &count) < 0)
        goto fail;
    if (stream != Py_None) {
        int done = frame == Py_None ? 0 : fast_record(self, now, st, (PyFrameObject *)frame, stream, count, &released);
        if (done < 0)
            goto fail;
        if (done == 0) {
            PyObject *r = PyObject_CallFunctionObjArgs(SLOT(self->hot, hp_record), stream, self->kind, self->api,
                                                       count, frame, Py_None, st, NULL);
            if (r == NULL)
                goto fail;
            Py_DECREF(r);
        }
    }
    if (view != Py_None) {
        PyObject *now = in_place ? inplace_value((InPlace *)view, NULL) : PyObject_GetAttr(view, s_value);
        if (now == NULL)
            goto fail;
        set_slot(self->fingerprint, fp_last, now);
        Py_DECREF(now);
    }
    goto release;
fail:
    Py_CLEAR(result);
release:
    set_slot(st, st_busy, Py_False);
    Py_XDECREF(stream);
    Py_XDECREF(count);
    Py_DECREF(view);
    if (result == NULL) {
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback);
        if (give_lock(self) < 0)
            PyErr_Clear();
        released_drop(&released);
        PyErr_Restore(type, value, traceback);
        return NULL;
    }
    if (give_lock(self) < 0)
        Py_CLEAR(result);
    /* The finished frames a walk let go of: freed once the call is recorded and the lock given
     * back, where a finalizer among their locals runs as it would at its frame's end. */
    if (released.count || released.more != NULL) {
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback);
        released_drop(&released);
        PyErr_Restore(type, value, traceback);
    }
    return result;
}

/* -- a declared condition: whether a call draws, from its arguments (_base.Condition) --- */
enum { TEST_NONE, TEST_DROPOUT, TEST_TRUTHY, TEST_POSITIVE, TEST_NOT_FALSE };
static const char *test_names[] = {"", "dropout", "truthy", "positive", "not_false", NULL};

/* Read the condition's spec, (test, ((position, keyword, default), ...)), into the Recorder. */
static int
condition_init(Recorder *self, PyObject *spec)
{
    self->test = TEST_NONE;
    if (spec == Py_None)
        return 0;
    PyObject *test, *params;
    if (!PyTuple_Check(spec) || !PyArg_ParseTuple(spec, "UO!:condition", &test, &PyTuple_Type, &params))
        return -1;
    for (int i = 1; test_names[i] != NULL; i++)
        if (PyUnicode_CompareWithASCIIString(test, test_names[i]) == 0)
            self->test = i;
    Py_ssize_t wanted = self->test == TEST_DROPOUT ? 2 : 1;
    if (self->test == TEST_NONE || PyTuple_GET_SIZE(params) != wanted) {
        PyErr_Format(PyExc_ValueError, "unknown condition %R", spec);
        self->test = TEST_NONE;
        return -1;
    }
    for (Py_ssize_t i = 0; i < wanted; i++) {
        PyObject *name, *fallback;
        Py_ssize_t index;
        PyObject *param = PyTuple_GET_ITEM(params, i);
        if (!PyTuple_Check(param) || !PyArg_ParseTuple(param, "nUO:condition", &index, &name, &fallback))
            return -1;
        self->index[i] = index;
        self->name[i] = Py_NewRef(name);
        self->fallback[i] = Py_NewRef(fallback);
        self->params = (int)i + 1;
    }
    return 0;
}

/* args[index] if there, else the keyword's value, else the default (borrowed). */
static PyObject *
condition_argument(Recorder *self, int i, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (self->index[i] >= 0 && nargs > self->index[i])
        return args[self->index[i]];
    Py_ssize_t nkw = kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, k);
        if (key == self->name[i] || PyUnicode_Compare(key, self->name[i]) == 0)
            return args[nargs + k];
    }
    return self->fallback[i];
}

/* bool(a OP b) as Python says it; a float against one of our int bounds (0, 1) compared here. */
static int
compare(PyObject *a, PyObject *b, int op)
{
    if (PyFloat_CheckExact(a) && (b == zero || b == one)) {
        double x = PyFloat_AS_DOUBLE(a), bound = b == one;
        return op == Py_LT ? x < bound : x > bound;
    }
    if (PyFloat_CheckExact(b) && (a == zero || a == one)) {
        double x = PyFloat_AS_DOUBLE(b), bound = a == one;
        return op == Py_LT ? bound < x : bound > x;
    }
    return PyObject_RichCompareBool(a, b, op);
}

/* 1 when the call draws, 0 when not, -1 on an interrupt. Condition.__call__ one-to-one: an
 * argument the test cannot judge (the function will reject it and say why) counts as a draw. */
static int
condition_holds(Recorder *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *first = condition_argument(self, 0, args, nargs, kwnames);
    int yes;
    switch (self->test) {
    case TEST_DROPOUT: { /* bool(training) and 0 < p < 1 */
        PyObject *p = condition_argument(self, 1, args, nargs, kwnames);
        yes = PyObject_IsTrue(first);
        if (yes > 0)
            yes = compare(zero, p, Py_LT);
        if (yes > 0)
            yes = compare(p, one, Py_LT);
        break;
    }
    case TEST_TRUTHY:
        yes = PyObject_IsTrue(first);
        break;
    case TEST_POSITIVE: /* p > 0 */
        yes = compare(first, zero, Py_GT);
        break;
    default: /* TEST_NOT_FALSE */
        yes = first != Py_False;
    }
    if (yes < 0 && PyErr_ExceptionMatches(PyExc_Exception)) {
        PyErr_Clear();
        return 1;
    }
    return yes;
}

static int
has_keyword(PyObject *kwnames, PyObject *name)
{
    if (kwnames == NULL || name == Py_None)
        return 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); i++) {
        int eq = PyObject_RichCompareBool(PyTuple_GET_ITEM(kwnames, i), name, Py_EQ);
        if (eq != 0)
            return eq;
    }
    return 0;
}

/* The last thread state found, and where: ``states`` unwritten since (its version tag) and the
 * same thread asking hold the same answer, with no int made and no lookup. Borrowed: while the
 * dict is unwritten it holds the state, and a version tag is never given to two dicts. */
static struct {
    PyObject *states, *state;
    unsigned long ident;
    uint64_t version;
} last_state;

/* HotPath.states[get_ident()], borrowed; NULL when absent (or with an error set). */
static PyObject *
thread_state(PyObject *states)
{
    unsigned long me = PyThread_get_thread_ident();
#ifdef HAVE_VERSION_TAG
    if (last_state.state != NULL && last_state.ident == me && last_state.states == states &&
        last_state.version == version_tag(states))
        return last_state.state;
#endif
    PyObject *ident = PyLong_FromUnsignedLong(me);
    if (ident == NULL)
        return NULL;
    PyObject *st = PyDict_GetItemWithError(states, ident);
    Py_DECREF(ident);
#ifdef HAVE_VERSION_TAG
    if (st != NULL) {
        last_state.state = st;
        last_state.states = states;
        last_state.ident = me;
        last_state.version = version_tag(states);
    }
#endif
    return st;
}

/* 1 when ``frame``'s file starts with one of ``prefixes`` (a tuple of str, or None: 0), -1 on error. */
static int
called_from(PyFrameObject *frame, PyObject *prefixes)
{
    if (frame == NULL || prefixes == Py_None)
        return 0;
    PyCodeObject *code = PyFrame_GetCode(frame);
    int found = 0;
    for (Py_ssize_t i = 0; !found && i < PyTuple_GET_SIZE(prefixes); i++) {
        Py_ssize_t match = PyUnicode_Tailmatch(code->co_filename, PyTuple_GET_ITEM(prefixes, i), 0, PY_SSIZE_T_MAX, -1);
        found = match < 0 ? -1 : (int)match;
    }
    Py_DECREF(code);
    return found;
}

static PyObject *
recorder_vectorcall(Recorder *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (self->owner != Py_None && (nargs < 1 || args[0] != self->owner))
        return PyObject_Vectorcall(self->original, args, nargsf, kwnames);
    PyObject *now = SLOT(self->hot, hp_now), *states = SLOT(self->hot, hp_states);
    if (now == NULL || Py_TYPE(now) != snapshot_type || states == NULL || !PyDict_CheckExact(states))
        goto slow;
    PyObject *active = SLOT(now, sn_active);
    if (active == NULL || !PyTuple_CheckExact(active))
        goto slow;
    if (PyTuple_GET_SIZE(active) == 0)
        return PyObject_Vectorcall(self->original, args, nargsf, kwnames);
    PyObject *st = thread_state(states);
    if (st == NULL) {
        if (PyErr_Occurred())
            return NULL;
        goto slow; /* the thread's first draw: the Python wrapper makes its state */
    }
    if (Py_TYPE(st) != thread_state_type || SLOT(st, st_busy) == NULL || SLOT(st, st_pending) == NULL ||
        SLOT(st, st_key) == NULL || SLOT(st, st_epoch) == NULL)
        goto slow;
    PyObject *busy = SLOT(st, st_busy);
    if (busy != Py_False) {
        /* Inside a recorded call. Made from the frame that made it (its C code calling us):
         * part of it. From any other frame (a finalizer, a signal handler): the Python
         * wrapper tells whose call it is. */
        PyFrameObject *caller = PyEval_GetFrame();
        if (busy == (PyObject *)caller)
            return PyObject_Vectorcall(self->original, args, nargsf, kwnames);
        /* The library's own code (torch.manual_seed calling torch.cuda.manual_seed_all): part of
         * it too, called with no frame of rngtrace's between (a stack torch keeps shows none). */
        int from_inside = called_from(caller, self->inside);
        if (from_inside < 0)
            return NULL;
        if (from_inside)
            return PyObject_Vectorcall(self->original, args, nargsf, kwnames);
        goto slow;
    }
    if (self->through != Py_None) {
        /* The library's own method calling this one, in a call nothing recorded (a reference
         * bound before tracing): the Python wrapper records the outer call, once. */
        int from_through = called_from(PyEval_GetFrame(), self->through);
        if (from_through < 0)
            return NULL;
        if (from_through)
            goto slow;
    }
    if (SLOT(st, st_pending) != Py_None)
        goto slow;
    PyObject *hook = SLOT(now, sn_profile_hook), *strict = SLOT(now, sn_strict);
    if (hook == NULL || strict == NULL || strict != Py_False)
        goto slow;
    if (hook != Py_None) {
#if PY_VERSION_HEX < 0x030C0000
        /* 3.10/3.11 with the catch-all's profile hook armed. A call made from C raises no
         * profile event, so there is nothing to step aside from; the hook must be this
         * thread's, so that its return events keep the thread's stack cache exact. */
        if (PyThreadState_Get()->c_profileobj != hook)
            goto slow;
        set_slot(st, st_hooked, Py_True);
#else
        goto slow;
#endif
    }
    int keyword = has_keyword(kwnames, self->slow_keyword);
    if (keyword != 0) {
        if (keyword < 0)
            return NULL;
        goto slow;
    }
    if (self->test != TEST_NONE) {
        /* A call that draws only for some arguments (dropout: in training, 0 < p < 1). */
        int yes = condition_holds(self, args, nargs, kwnames);
        if (yes < 0)
            return NULL;
        if (!yes)
            return PyObject_Vectorcall(self->original, args, nargsf, kwnames);
    }
    else if (self->takes != Py_None) {
        PyObject *taken = call_with_arguments(self->takes, NULL, args, nargs, kwnames);
        if (taken == NULL)
            return NULL;
        int yes = PyObject_IsTrue(taken);
        Py_DECREF(taken);
        if (yes < 0)
            return NULL;
        if (!yes)
            return PyObject_Vectorcall(self->original, args, nargsf, kwnames);
    }
    /* None when C code with no Python frame above it calls: recorded with no stack. */
    PyObject *frame = (PyObject *)PyEval_GetFrame();
    frame = Py_NewRef(frame != NULL ? frame : Py_None);
    /* Held: the hub may publish another Snapshot, and a thread may end, while we call. */
    Py_INCREF(st);
    Py_INCREF(now);
    PyObject *result = record_call(self, now, st, frame, args, nargsf, kwnames);
    Py_DECREF(now);
    Py_DECREF(st);
    Py_DECREF(frame);
    return result;
slow:
    return PyObject_Vectorcall(self->slow, args, nargsf, kwnames);
}

static PyObject *
recorder_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"slow", "original", "owner", "hot", "fingerprint", "lock", "stream", "kind", "api",
                            "moved", "count_of", "tensor_type", "place", "slow_keyword", "takes", "condition",
                            "after", "inside", "through", NULL};
    PyObject *slow, *original, *owner, *hot, *fingerprint, *lock, *stream, *kind, *api, *moved, *count_of;
    PyObject *tensor_type = Py_None, *place = Py_None, *slow_keyword = Py_None, *takes = Py_None;
    PyObject *condition = Py_None, *after = Py_None, *inside = Py_None, *through = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOOOOOOO|OOOOOOOO:Recorder", names, &slow, &original, &owner,
                                     &hot, &fingerprint, &lock, &stream, &kind, &api, &moved, &count_of,
                                     &tensor_type, &place, &slow_keyword, &takes, &condition, &after, &inside,
                                     &through))
        return NULL;
    PyObject *prefix_args[2] = {inside, through};
    for (int k = 0; k < 2; k++) {
        PyObject *prefixes = prefix_args[k];
        int bad = prefixes != Py_None && !PyTuple_CheckExact(prefixes);
        for (Py_ssize_t i = 0; !bad && prefixes != Py_None && i < PyTuple_GET_SIZE(prefixes); i++)
            bad = !PyUnicode_CheckExact(PyTuple_GET_ITEM(prefixes, i));
        if (bad) {
            PyErr_Format(PyExc_TypeError, "%s= is a tuple of file prefixes (str), or None", k ? "through" : "inside");
            return NULL;
        }
    }
    if (after != Py_None && (!PyCallable_Check(after) || tensor_type != Py_None || condition != Py_None)) {
        PyErr_SetString(PyExc_TypeError, "after= is a callable, for a seed's Recorder (no tensor_type, no condition)");
        return NULL;
    }
    if (fp_view < 0 || st_busy < 0 || hp_now < 0) {
        PyErr_SetString(PyExc_RuntimeError, "call configure() first");
        return NULL;
    }
    if (Py_TYPE(fingerprint) != fingerprint_type || Py_TYPE(hot) != hot_path_type) {
        PyErr_SetString(PyExc_TypeError, "hot and fingerprint must be the configured HotPath and Fingerprint types");
        return NULL;
    }
    PyObject *acquire = PyObject_GetAttrString(lock, "acquire");
    PyObject *release = PyObject_GetAttrString(lock, "release");
    if (acquire == NULL || release == NULL) {
        Py_XDECREF(acquire);
        Py_XDECREF(release);
        return NULL;
    }
    Recorder *self = (Recorder *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = (vectorcallfunc)recorder_vectorcall;
    self->slow = Py_NewRef(slow);
    self->original = Py_NewRef(original);
    self->owner = Py_NewRef(owner);
    self->hot = Py_NewRef(hot);
    self->fingerprint = Py_NewRef(fingerprint);
    self->lock = Py_NewRef(lock);
    self->acquire = acquire;
    self->release = release;
    self->stream = Py_NewRef(stream);
    self->kind = Py_NewRef(kind);
    self->api = Py_NewRef(api);
    self->moved = Py_NewRef(moved);
    self->count_of = Py_NewRef(count_of);
    self->tensor_type = Py_NewRef(tensor_type);
    self->place = Py_NewRef(place);
    self->slow_keyword = Py_NewRef(slow_keyword);
    self->takes = Py_NewRef(takes);
    self->condition = Py_NewRef(condition);
    self->after = Py_NewRef(after);
    self->inside = Py_NewRef(inside);
    self->through = Py_NewRef(through);
    if (condition_init(self, condition) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static int
recorder_traverse(Recorder *self, visitproc visit, void *arg)
{
    Py_VISIT(self->dict);
    Py_VISIT(self->slow);
    Py_VISIT(self->original);
    Py_VISIT(self->owner);
    Py_VISIT(self->hot);
    Py_VISIT(self->fingerprint);
    Py_VISIT(self->lock);
    Py_VISIT(self->acquire);
    Py_VISIT(self->release);
    Py_VISIT(self->count_of);
    Py_VISIT(self->takes);
    Py_VISIT(self->condition);
    Py_VISIT(self->after);
    Py_VISIT(self->inside);
    Py_VISIT(self->through);
    for (int i = 0; i < self->params; i++)
        Py_VISIT(self->fallback[i]);
    Py_VISIT(self->tensor_type);
    Py_VISIT(self->place);
    return 0;
}

static int
recorder_clear(Recorder *self)
{
    Py_CLEAR(self->dict);
    Py_CLEAR(self->slow);
    Py_CLEAR(self->original);
    Py_CLEAR(self->owner);
    Py_CLEAR(self->hot);
    Py_CLEAR(self->fingerprint);
    Py_CLEAR(self->lock);
    Py_CLEAR(self->acquire);
    Py_CLEAR(self->release);
    Py_CLEAR(self->stream);
    Py_CLEAR(self->kind);
    Py_CLEAR(self->api);
    Py_CLEAR(self->moved);
    Py_CLEAR(self->count_of);
    Py_CLEAR(self->takes);
    Py_CLEAR(self->condition);
    Py_CLEAR(self->after);
    Py_CLEAR(self->inside);
    Py_CLEAR(self->through);
    for (int i = 0; i < self->params; i++) {
        Py_CLEAR(self->name[i]);
        Py_CLEAR(self->fallback[i]);
    }
    self->params = 0;
    self->test = TEST_NONE;
    Py_CLEAR(self->tensor_type);
    Py_CLEAR(self->place);
    Py_CLEAR(self->slow_keyword);
    return 0;
}

static void
recorder_dealloc(Recorder *self)
{
    PyObject_GC_UnTrack(self);
    if (self->weakrefs != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    recorder_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Bound like a function: a Recorder on a class (RandomState, Tensor) is a method. */
static PyObject *
recorder_get(PyObject *self, PyObject *obj, PyObject *type)
{
    if (obj == NULL || obj == Py_None)
        return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

static PyObject *
recorder_repr(Recorder *self)
{
    return PyUnicode_FromFormat("<rngtrace recorder of %U>", self->api);
}

static PyObject *
recorder_get_slow(Recorder *self, void *closure)
{
    return Py_NewRef(self->slow);
}

/* Pickled as what it stands for: a process that unpickles it gets the original. */
static PyObject *
recorder_reduce_ex(Recorder *self, PyObject *protocol)
{
    return PyObject_CallMethod(self->original, "__reduce_ex__", "O", protocol);
}

static PyMethodDef recorder_methods[] = {
    {"__reduce_ex__", (PyCFunction)recorder_reduce_ex, METH_O, NULL},
    {NULL},
};

static PyGetSetDef recorder_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {"slow", (getter)recorder_get_slow, NULL, "the Python wrapper this one accelerates", NULL},
    {NULL},
};

static PyTypeObject RecorderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "rngtrace._speedups.Recorder",
    .tp_basicsize = sizeof(Recorder),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "A recording wrapper's fast path; everything else goes to the Python wrapper.",
    .tp_new = recorder_new,
    .tp_dealloc = (destructor)recorder_dealloc,
    .tp_traverse = (traverseproc)recorder_traverse,
    .tp_clear = (inquiry)recorder_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Recorder, vectorcall),
    .tp_descr_get = recorder_get,
    .tp_repr = (reprfunc)recorder_repr,
    .tp_getset = recorder_getset,
    .tp_methods = recorder_methods,
    .tp_dictoffset = offsetof(Recorder, dict),
    .tp_weaklistoffset = offsetof(Recorder, weakrefs),
};

static PyObject *
configure(PyObject *module, PyObject *args)
{
    PyTypeObject *hp_type, *sn_type, *ca_type, *state_type, *fp_type;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!:configure", &PyType_Type, &hp_type, &PyType_Type, &sn_type,
                          &PyType_Type, &ca_type, &PyType_Type, &state_type, &PyType_Type, &fp_type))
        return NULL;
    Py_ssize_t offsets[22] = {
        slot_offset(hp_type, "now"),          slot_offset(hp_type, "states"),  slot_offset(hp_type, "record"),
        slot_offset(hp_type, "unattributed"), slot_offset(hp_type, "raised"),  slot_offset(sn_type, "active"),
        slot_offset(sn_type, "sink"),         slot_offset(sn_type, "strict"),  slot_offset(sn_type, "profile_hook"),
        slot_offset(sn_type, "cache"),        slot_offset(ca_type, "ids"),     slot_offset(state_type, "busy"),
        slot_offset(state_type, "pending"),   slot_offset(state_type, "frames"), slot_offset(state_type, "epoch"),
        slot_offset(state_type, "key"),       slot_offset(state_type, "hooked"), slot_offset(fp_type, "view"),
        slot_offset(fp_type, "last"),         slot_offset(ca_type, "table"),   slot_offset(ca_type, "walk"),
        slot_offset(ca_type, "pin"),
    };
    if (PyErr_Occurred())
        return NULL;
    hp_now = offsets[0], hp_states = offsets[1], hp_record = offsets[2], hp_unattributed = offsets[3];
    hp_raised = offsets[4], sn_active = offsets[5], sn_sink = offsets[6], sn_strict = offsets[7];
    sn_profile_hook = offsets[8], sn_cache = offsets[9], ca_ids = offsets[10];
    st_busy = offsets[11], st_pending = offsets[12], st_frames = offsets[13], st_epoch = offsets[14];
    st_key = offsets[15], st_hooked = offsets[16], fp_view = offsets[17], fp_last = offsets[18];
    ca_table = offsets[19], ca_walk = offsets[20], ca_pin = offsets[21];
    Py_XSETREF(hot_path_type, (PyTypeObject *)Py_NewRef(hp_type));
    Py_XSETREF(snapshot_type, (PyTypeObject *)Py_NewRef(sn_type));
    Py_XSETREF(cache_type, (PyTypeObject *)Py_NewRef(ca_type));
    Py_XSETREF(thread_state_type, (PyTypeObject *)Py_NewRef(state_type));
    Py_XSETREF(fingerprint_type, (PyTypeObject *)Py_NewRef(fp_type));
    Py_RETURN_NONE;
}

/* -- swap: a patch set applied or undone in one pass -------------------------------- */

/* ``stamps`` (a dict the caller keeps per entry list, and clears to say "check everything") holds
 * one bytes object: each run of entries' namespace and that namespace's version after our last
 * pass, as (pointer, version) pairs of uint64 in entry order. Its key says which way that pass
 * went (1: wrappers put in, 0: originals put back), and only the opposite pass may trust it: an
 * install cut short before its swap leaves the versions an undo recorded, and an undo trusting
 * those would take off wrappers that were never put in. One object, not a
 * dict entry per namespace: a pass allocates nothing to check or record them. The entries hold
 * each namespace, so a pointer cannot name another dict meanwhile. */

/* 1 when every namespace in ``entries`` still has the version ``stamps`` recorded for it
 * (nobody wrote to it since our last pass), 0 when not, -1 on error. */
static int
unchanged_since(PyObject *entries, PyObject *stamps, PyObject *key)
{
#ifdef HAVE_VERSION_TAG
    if (!PyDict_CheckExact(stamps) || PyDict_GET_SIZE(stamps) != 1)
        return 0;
    PyObject *packed = PyDict_GetItemWithError(stamps, key);
    if (packed == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (!PyBytes_CheckExact(packed))
        return 0;
    const uint64_t *pairs = (const uint64_t *)PyBytes_AS_STRING(packed);
    Py_ssize_t runs = PyBytes_GET_SIZE(packed) / (Py_ssize_t)(2 * sizeof(uint64_t)), j = 0;
    Py_ssize_t n = PyList_GET_SIZE(entries);
    PyObject *last = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *ns = PyTuple_GET_ITEM(PyList_GET_ITEM(entries, i), 0);
        if (ns == last)
            continue;
        last = ns;
        if (j >= runs || pairs[2 * j] != (uint64_t)(uintptr_t)ns || pairs[2 * j + 1] != version_tag(ns))
            return 0;
        j++;
    }
    return j == runs;
#else
    return 0;
#endif
}

/* Record each namespace's version now, after a pass (``key``: its direction) whose outcome is fully known. */
static int
stamp(PyObject *entries, PyObject *stamps, PyObject *key)
{
    if (!PyDict_CheckExact(stamps))
        return 0;
    PyDict_Clear(stamps);
#ifdef HAVE_VERSION_TAG
    Py_ssize_t n = PyList_GET_SIZE(entries), runs = 0;
    PyObject *last = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *ns = PyTuple_GET_ITEM(PyList_GET_ITEM(entries, i), 0);
        if (ns != last)
            runs++;
        last = ns;
    }
    PyObject *packed = PyBytes_FromStringAndSize(NULL, runs * (Py_ssize_t)(2 * sizeof(uint64_t)));
    if (packed == NULL)
        return -1;
    uint64_t *pairs = (uint64_t *)PyBytes_AS_STRING(packed);
    Py_ssize_t j = 0;
    last = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *ns = PyTuple_GET_ITEM(PyList_GET_ITEM(entries, i), 0);
        if (ns == last)
            continue;
        last = ns;
        pairs[2 * j] = (uint64_t)(uintptr_t)ns;
        pairs[2 * j + 1] = version_tag(ns);
        j++;
    }
    int rc = PyDict_SetItem(stamps, key, packed);
    Py_DECREF(packed);
    if (rc < 0)
        return -1;
#endif
    return 0;
}

/* Entries are (namespace dict, attribute, original or INHERITED, wrapper, type or None).
 * Forward: only if every attribute still holds its original, put every wrapper in place
 * (True), else change nothing (False). Backward: put each original back where our wrapper
 * still is, leave one that holds its original already, and return the indices of the others
 * (someone patched over us: strays). ``stamps`` (a dict the caller keeps per set) holds each
 * namespace's version after our last pass the other way: where no namespace was written since,
 * every attribute is as that pass left it, and the identity checks are skipped -- half the
 * dict look-ups. A pass that leaves strays records no
 * stamps, so the next one checks every attribute.
 * Nothing here runs Python code -- every value written or dropped is also held by the
 * entries -- so no signal handler can run halfway through. */
static PyObject *
swap(PyObject *module, PyObject *args)
{
    PyObject *entries, *inherited, *stamps = Py_None;
    int forward;
    if (!PyArg_ParseTuple(args, "O!pO|O:swap", &PyList_Type, &entries, &forward, &inherited, &stamps))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(entries);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *e = PyList_GET_ITEM(entries, i);
        if (!PyTuple_CheckExact(e) || PyTuple_GET_SIZE(e) != 5 || !PyDict_CheckExact(PyTuple_GET_ITEM(e, 0)) ||
            !PyUnicode_CheckExact(PyTuple_GET_ITEM(e, 1))) {
            PyErr_SetString(PyExc_TypeError, "entries must be (dict, str, original, wrapper, type or None)");
            return NULL;
        }
    }
    /* Trusted only after a pass the other way: the state it left is the one this pass expects. */
    int trusted = unchanged_since(entries, stamps, forward ? zero : one);
    if (trusted < 0)
        return NULL;
    PyObject *strays = NULL;
    if (forward && !trusted) {
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *e = PyList_GET_ITEM(entries, i), *original = PyTuple_GET_ITEM(e, 2);
            PyObject *now = PyDict_GetItemWithError(PyTuple_GET_ITEM(e, 0), PyTuple_GET_ITEM(e, 1));
            if (now == NULL && PyErr_Occurred())
                return NULL;
            if (now != (original == inherited ? NULL : original)) {
                if (PyDict_CheckExact(stamps))
                    PyDict_Clear(stamps);
                Py_RETURN_FALSE;
            }
        }
    }
    else if (!forward && (strays = PyList_New(0)) == NULL)
        return NULL;
    PyObject *last_type = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *e = PyList_GET_ITEM(entries, i);
        PyObject *ns = PyTuple_GET_ITEM(e, 0), *attr = PyTuple_GET_ITEM(e, 1);
        PyObject *original = PyTuple_GET_ITEM(e, 2), *wrapper = PyTuple_GET_ITEM(e, 3);
        int rc;
        if (forward)
            rc = PyDict_SetItem(ns, attr, wrapper);
        else {
            PyObject *now = trusted ? wrapper : PyDict_GetItemWithError(ns, attr);
            if (now == NULL && PyErr_Occurred())
                rc = -1;
            else if (now == (original == inherited ? NULL : original))
                continue; /* already off: an install cut short before its swap put nothing in */
            else if (now != wrapper) {
                PyObject *index = PyLong_FromSsize_t(i);
                rc = index == NULL ? -1 : PyList_Append(strays, index);
                Py_XDECREF(index);
                continue;
            }
            else
                rc = original == inherited ? PyDict_DelItem(ns, attr) : PyDict_SetItem(ns, attr, original);
        }
        if (rc < 0) {
            Py_XDECREF(strays);
            if (PyDict_CheckExact(stamps))
                PyDict_Clear(stamps);
            return NULL;
        }
        PyObject *type = PyTuple_GET_ITEM(e, 4);
        if (PyType_Check(type) && type != last_type) {
            /* Drop the method caches that remember the old entry, as setattr would. */
            PyType_Modified((PyTypeObject *)type);
            last_type = type;
        }
    }
    if (forward) {
        if (stamp(entries, stamps, one) < 0)
            return NULL;
        Py_RETURN_TRUE;
    }
    if (PyList_GET_SIZE(strays) == 0 ? stamp(entries, stamps, zero) < 0 : (PyDict_CheckExact(stamps) && (PyDict_Clear(stamps), 0))) {
        Py_DECREF(strays);
        return NULL;
    }
    return strays;
}


/* -- builtins recorded in place --------------------------------------------------------
 * torch.compile guards what it compiled on the identity of every builtin it read
 * (``ID_MATCH`` on ``torch.rand``): a wrapper put in the builtin's place fails those guards,
 * so compiled code recompiles inside a trace, around a callable it cannot trace. Here the
 * builtin object itself records: while tracing, its ``vectorcall`` slot (where every call of
 * it goes first) is a trampoline of ours that calls the wrapper; the wrapper calls a twin, a
 * new builtin object with the same definition. Nothing else of the builtin changes: its
 * definition, and so its hash and equality (``hash(OpOverload)`` is its callable's; torch
 * keys tables by these), name, ``__self__`` and pickling stay its own. Only a METH_VARARGS
 * builtin is hooked, which the interpreter never calls but through its vectorcall slot, or a
 * METH_FASTCALL one (an OpOverload's callable), which a specialised plain call would reach
 * directly: its one caller, ``OpOverload.__call__``, calls it with ``*args`` (through the
 * slot), and a call that went round would move the stream unattributed, which the
 * fingerprints then report, never silently. A vectorcall slot has no
 * closure, so a fixed pool of trampolines each serves one slot. Swapping a pointer runs no
 * Python code: no signal handler and no other thread sees a half-done pass. */
#define HOOK_SLOTS 256

typedef struct {
    PyObject *fn;               /* the builtin (held: its address names the slot) */
    PyObject *wrapper;          /* what a call reaches while hooked */
    vectorcallfunc original_vc; /* its own vectorcall, put back when unhooked */
} HookSlot;

static HookSlot hook_slots[HOOK_SLOTS];
static int hook_used = 0;

static PyObject *
hook_call(int k, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PyObject *wrapper = hook_slots[k].wrapper;
    if (wrapper == NULL) { /* cannot happen: a slot's trampoline is only in place with its wrapper */
        PyErr_SetString(PyExc_SystemError, "rngtrace: a hooked builtin lost its wrapper");
        return NULL;
    }
    Py_INCREF(wrapper); /* the wrapper may be replaced while it runs */
    PyObject *result = PyObject_Vectorcall(wrapper, args, nargsf, kwnames);
    Py_DECREF(wrapper);
    return result;
}

/* Trampoline 1dd is slot (1-1)*64 + d*8 + d, 2dd slot 64 + ..., digits 0-7: the table's order below. */
#define HOOK_INDEX(L) ((((L) / 100) - 1) * 64 + (((L) / 10) % 10) * 8 + (L) % 10)
#define HOOK_TRAMPOLINE(k)                                                                                    \
    static PyObject *hook_trampoline_##k(PyObject *callable, PyObject *const *args, size_t nargsf,          \
                                         PyObject *kwnames)                                                  \
    {                                                                                                        \
        return hook_call(HOOK_INDEX(k), args, nargsf, kwnames);                                              \
    }
#define HOOK_T8(b) HOOK_TRAMPOLINE(b##0) HOOK_TRAMPOLINE(b##1) HOOK_TRAMPOLINE(b##2) HOOK_TRAMPOLINE(b##3) \
    HOOK_TRAMPOLINE(b##4) HOOK_TRAMPOLINE(b##5) HOOK_TRAMPOLINE(b##6) HOOK_TRAMPOLINE(b##7)
#define HOOK_T64(b) HOOK_T8(b##0) HOOK_T8(b##1) HOOK_T8(b##2) HOOK_T8(b##3) HOOK_T8(b##4) HOOK_T8(b##5) \
    HOOK_T8(b##6) HOOK_T8(b##7)
HOOK_T64(1) HOOK_T64(2) HOOK_T64(3) HOOK_T64(4)
#define HOOK_N8(b) hook_trampoline_##b##0, hook_trampoline_##b##1, hook_trampoline_##b##2, hook_trampoline_##b##3, \
    hook_trampoline_##b##4, hook_trampoline_##b##5, hook_trampoline_##b##6, hook_trampoline_##b##7
#define HOOK_N64(b) HOOK_N8(b##0), HOOK_N8(b##1), HOOK_N8(b##2), HOOK_N8(b##3), HOOK_N8(b##4), HOOK_N8(b##5), \
    HOOK_N8(b##6), HOOK_N8(b##7)
static const vectorcallfunc hook_trampolines[HOOK_SLOTS] = {HOOK_N64(1), HOOK_N64(2), HOOK_N64(3), HOOK_N64(4)};

/* Slot of each hooked builtin, by address: open addressing, twice the slots, so a pass over a set's
 * 175 builtins (every trace's start and end) looks each up in a probe or two, not a scan. */
#define HOOK_INDEX_SIZE (2 * HOOK_SLOTS)
static short hook_index[HOOK_INDEX_SIZE]; /* slot + 1, 0 for empty */

static size_t
hook_hash(PyObject *fn)
{
    return (size_t)(((uintptr_t)fn >> 4) * 2654435761u) % HOOK_INDEX_SIZE;
}

static HookSlot *
hook_slot_of(PyObject *fn)
{
    for (size_t h = hook_hash(fn);; h = (h + 1) % HOOK_INDEX_SIZE) {
        int k = hook_index[h];
        if (k == 0)
            return NULL;
        if (hook_slots[k - 1].fn == fn)
            return &hook_slots[k - 1];
    }
}

static HookSlot *
hook_slot_new(PyObject *fn)
{
    HookSlot *slot = &hook_slots[hook_used++];
    slot->fn = Py_NewRef(fn);
    slot->wrapper = NULL;
    size_t h = hook_hash(fn);
    while (hook_index[h] != 0) /* never full: at most HOOK_SLOTS of twice as many entries */
        h = (h + 1) % HOOK_INDEX_SIZE;
    hook_index[h] = (short)(slot - hook_slots + 1);
    return slot;
}

static int
is_hooked(PyObject *fn, HookSlot *slot)
{
    return slot != NULL && ((PyCFunctionObject *)fn)->vectorcall == hook_trampolines[slot - hook_slots];
}

static int
hookable(PyObject *fn)
{
    if (!PyCFunction_CheckExact(fn))
        return 0;
    PyCFunctionObject *f = (PyCFunctionObject *)fn;
    int flags = f->m_ml->ml_flags & ~(METH_CLASS | METH_STATIC | METH_COEXIST);
    if (flags != (METH_VARARGS | METH_KEYWORDS) && flags != METH_VARARGS && flags != (METH_FASTCALL | METH_KEYWORDS))
        return 0;
    return 1;
}

/* builtin_twin(fn): a new builtin object with ``fn``'s definition, which no hook reaches. */
static PyObject *
builtin_twin(PyObject *module, PyObject *fn)
{
    if (!hookable(fn)) {
        PyErr_SetString(PyExc_TypeError, "builtin_twin(fn): fn must be a plain builtin function (METH_VARARGS or METH_FASTCALL | METH_KEYWORDS)");
        return NULL;
    }
    PyCFunctionObject *f = (PyCFunctionObject *)fn;
    return PyCFunction_NewEx(f->m_ml, f->m_self, f->m_module);
}

/* hook_builtins(pairs, forward): with forward, make every call of each builtin of ``pairs``
 * ((builtin, wrapper), ...) reach its wrapper; else give each its own calls back. All or
 * nothing: False (nothing changed) where a builtin cannot be hooked or the slots ran out. */
static PyObject *
hook_builtins(PyObject *module, PyObject *args)
{
    PyObject *pairs;
    int forward;
    if (!PyArg_ParseTuple(args, "O!p:hook_builtins", &PyList_Type, &pairs, &forward))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(pairs);
    int fresh = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PyList_GET_ITEM(pairs, i);
        if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_TypeError, "hook_builtins: pairs must be (builtin, wrapper) tuples");
            return NULL;
        }
        if (!hookable(PyTuple_GET_ITEM(pair, 0)))
            Py_RETURN_FALSE;
        if (forward && hook_slot_of(PyTuple_GET_ITEM(pair, 0)) == NULL)
            fresh++;
    }
    if (hook_used + fresh > HOOK_SLOTS)
        Py_RETURN_FALSE;
    /* Wrappers replaced are let go only once every pointer is in place: dropping one may run Python. */
    PyObject *dropped = PyList_New(0);
    if (dropped == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PyList_GET_ITEM(pairs, i);
        PyObject *fn = PyTuple_GET_ITEM(pair, 0), *wrapper = PyTuple_GET_ITEM(pair, 1);
        HookSlot *slot = hook_slot_of(fn);
        if (!forward) {
            if (is_hooked(fn, slot))
                ((PyCFunctionObject *)fn)->vectorcall = slot->original_vc;
            continue;
        }
        if (slot == NULL)
            slot = hook_slot_new(fn);
        if (!is_hooked(fn, slot))
            slot->original_vc = ((PyCFunctionObject *)fn)->vectorcall;
        if (slot->wrapper != wrapper) {
            if (slot->wrapper != NULL && PyList_Append(dropped, slot->wrapper) == 0)
                Py_DECREF(slot->wrapper); /* the list holds it now */
            slot->wrapper = Py_NewRef(wrapper);
        }
        ((PyCFunctionObject *)fn)->vectorcall = hook_trampolines[slot - hook_slots];
    }
    Py_DECREF(dropped);
    Py_RETURN_TRUE;
}

/* hooked_builtins(): the builtins whose calls reach a wrapper now (none once every trace ended). */
static PyObject *
hooked_builtins(PyObject *module, PyObject *unused)
{
    PyObject *out = PyList_New(0);
    for (int i = 0; out != NULL && i < hook_used; i++)
        if (is_hooked(hook_slots[i].fn, &hook_slots[i]) && PyList_Append(out, hook_slots[i].fn) < 0)
            Py_CLEAR(out);
    return out;
}

static PyObject *locked_call(PyObject *lock, PyObject *args);

/* call_locked(lock, fn, *args): fn(*args) with ``lock`` taken (waiting for it), released in C. */
static PyObject *
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
static PyObject *
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

/* -- capture: StackTable.capture's walk (the known-cache path), in C ---------------------- */

/* A table's C-side memo of what its Python dicts already decided, so that a walk over interned
 * frames allocates nothing: (parent node, code pointer, f_lasti) -> node, a copy of an entry
 * of ``ids``, and code pointer -> kind, a copy of an entry of ``codes``. Entries go in only
 * once the dict holds them, and those dicts are never cleared or overwritten while the table
 * lives (tables are replaced, never cleared), so a memo entry never goes stale, and a code
 * pointer cannot name another code: ``codes`` keeps every code alive. One memo per table, in
 * the table's walk state; a failed allocation only leaves an entry out. No pointer into the
 * memo is held across anything that may run Python code. */
typedef struct {
    long parent, lasti, node; /* node -1: empty */
    void *code;
} MemoNode;

typedef struct {
    void *code; /* NULL: empty */
    long kind;
} MemoCode;

typedef struct {
    MemoNode *nodes;
    size_t node_mask, node_used;
    MemoCode *codes;
    size_t code_mask, code_used;
} WalkMemo;

#define MEMO_NAME "rngtrace._speedups.WalkMemo"

static inline size_t
memo_mix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return (size_t)h;
}

static inline size_t
memo_node_hash(long parent, void *code, long lasti)
{
    return memo_mix((uint64_t)(uintptr_t)code ^ ((uint64_t)parent * 0x9E3779B97F4A7C15ULL) ^
                    ((uint64_t)lasti << 40) ^ ((uint64_t)lasti >> 24));
}

/* The node of (parent, code, lasti), or -1 when the memo does not hold it. */
static long
memo_node_get(WalkMemo *memo, long parent, void *code, long lasti)
{
    if (memo == NULL || memo->nodes == NULL)
        return -1;
    size_t i = memo_node_hash(parent, code, lasti) & memo->node_mask;
    for (;;) {
        MemoNode *slot = &memo->nodes[i];
        if (slot->node < 0)
            return -1;
        if (slot->code == code && slot->parent == parent && slot->lasti == lasti)
            return slot->node;
        i = (i + 1) & memo->node_mask;
    }
}

static void
memo_node_put(WalkMemo *memo, long parent, void *code, long lasti, long node)
{
    if (memo == NULL || node < 0)
        return;
    if (memo->nodes == NULL || (memo->node_used + 1) * 2 > memo->node_mask + 1) {
        size_t size = memo->nodes == NULL ? 256 : (memo->node_mask + 1) * 2;
        MemoNode *grown = PyMem_RawMalloc(size * sizeof(MemoNode));
        if (grown == NULL)
            return; /* only a memo: the dicts still hold everything */
        for (size_t j = 0; j < size; j++)
            grown[j].node = -1;
        if (memo->nodes != NULL) {
            for (size_t j = 0; j <= memo->node_mask; j++) {
                MemoNode *old = &memo->nodes[j];
                if (old->node < 0)
                    continue;
                size_t k = memo_node_hash(old->parent, old->code, old->lasti) & (size - 1);
                while (grown[k].node >= 0)
                    k = (k + 1) & (size - 1);
                grown[k] = *old;
            }
            PyMem_RawFree(memo->nodes);
        }
        memo->nodes = grown;
        memo->node_mask = size - 1;
    }
    size_t i = memo_node_hash(parent, code, lasti) & memo->node_mask;
    for (;;) {
        MemoNode *slot = &memo->nodes[i];
        if (slot->node < 0) {
            *slot = (MemoNode){parent, lasti, node, code};
            memo->node_used++;
            return;
        }
        if (slot->code == code && slot->parent == parent && slot->lasti == lasti)
            return; /* already there: ids never changes an entry */
        i = (i + 1) & memo->node_mask;
    }
}

/* The kind of ``code``, or -1 when the memo does not hold it. */
static long
memo_kind_get(WalkMemo *memo, void *code)
{
    if (memo == NULL || memo->codes == NULL)
        return -1;
    size_t i = memo_mix((uint64_t)(uintptr_t)code) & memo->code_mask;
    for (;;) {
        MemoCode *slot = &memo->codes[i];
        if (slot->code == NULL)
            return -1;
        if (slot->code == code)
            return slot->kind;
        i = (i + 1) & memo->code_mask;
    }
}

static void
memo_kind_put(WalkMemo *memo, void *code, long kind)
{
    if (memo == NULL || code == NULL || kind < 0)
        return;
    if (memo->codes == NULL || (memo->code_used + 1) * 2 > memo->code_mask + 1) {
        size_t size = memo->codes == NULL ? 64 : (memo->code_mask + 1) * 2;
        MemoCode *grown = PyMem_RawCalloc(size, sizeof(MemoCode));
        if (grown == NULL)
            return;
        if (memo->codes != NULL) {
            for (size_t j = 0; j <= memo->code_mask; j++) {
                MemoCode *old = &memo->codes[j];
                if (old->code == NULL)
                    continue;
                size_t k = memo_mix((uint64_t)(uintptr_t)old->code) & (size - 1);
                while (grown[k].code != NULL)
                    k = (k + 1) & (size - 1);
                grown[k] = *old;
            }
            PyMem_RawFree(memo->codes);
        }
        memo->codes = grown;
        memo->code_mask = size - 1;
    }
    size_t i = memo_mix((uint64_t)(uintptr_t)code) & memo->code_mask;
    for (;;) {
        MemoCode *slot = &memo->codes[i];
        if (slot->code == NULL) {
            *slot = (MemoCode){code, kind};
            memo->code_used++;
            return;
        }
        if (slot->code == code)
            return;
        i = (i + 1) & memo->code_mask;
    }
}

static void
memo_free(PyObject *capsule)
{
    WalkMemo *memo = PyCapsule_GetPointer(capsule, MEMO_NAME);
    if (memo == NULL) {
        PyErr_Clear();
        return;
    }
    PyMem_RawFree(memo->nodes);
    PyMem_RawFree(memo->codes);
    PyMem_RawFree(memo);
}

/* walk_memo(): a new, empty memo for one StackTable's walk state. */
static PyObject *
walk_memo(PyObject *module, PyObject *unused)
{
    WalkMemo *memo = PyMem_RawCalloc(1, sizeof(WalkMemo));
    if (memo == NULL)
        return PyErr_NoMemory();
    PyObject *capsule = PyCapsule_New(memo, MEMO_NAME, memo_free);
    if (capsule == NULL)
        PyMem_RawFree(memo);
    return capsule;
}

/* -- the frames a capture walks ----------------------------------------------------------
 *
 * On 3.11+ a running function has a _PyInterpreterFrame; its PyFrameObject is made only when
 * someone asks (PyFrame_GetBack asks for every frame it crosses), and freed when the function
 * returns. A walk through fresh frames (a forward(), a per-sample helper) spent most of its
 * time making and freeing those objects. The internal walk reads the interpreter frames
 * themselves -- code, instruction, previous frame -- with the layout this module was compiled
 * against, proven at import on real frames (prove_internal_frames); a frame gets its object
 * only where the walk keeps it (the frame entering the thread's cache). A frame with no object
 * has no entry in ``known`` (its entries name live frame objects), so it is never looked up.
 * The public walk (PyFrame_GetBack) serves 3.10, a layout not proven, and a walk that starts at
 * a frame not running in this thread (a finished frame, a suspended generator's, another
 * thread's): it is the reference. Making the one object goes through sys._getframe, as the
 * Python wrapper's own frame lookup does (the function that makes it is not exported). */
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030E0000
#define INTERNAL_FRAMES 1
#define Py_BUILD_CORE
#include "internal/pycore_frame.h"
#undef Py_BUILD_CORE
#if PY_VERSION_HEX >= 0x030D0000
#define IFRAME_CODE(f) _PyFrame_GetCode(f)
#define THREAD_FRAME(ts) ((ts)->current_frame)
#else
#define IFRAME_CODE(f) ((f)->f_code)
#define THREAD_FRAME(ts) ((ts)->cframe->current_frame)
#endif
/* 1 once prove_internal_frames() found the layout as compiled; sys._getframe as it was then. */
static int internal_frames;
static PyObject *sys_getframe;
#endif

/* One frame of a walk. ``object`` is a strong reference in the public walk; in the internal
 * one it is borrowed, and NULL until the frame has an object. */
typedef struct {
    PyFrameObject *object;
#ifdef INTERNAL_FRAMES
    _PyInterpreterFrame *frame; /* NULL: the public walk */
#endif
} WalkFrame;

#ifdef INTERNAL_FRAMES
/* PyFrame_GetBack's step without making an object: a finished frame's f_back, else the
 * first complete frame before it (an incomplete one is still being set up: never shown). */
static _PyInterpreterFrame *
internal_back(_PyInterpreterFrame *f, PyFrameObject **object)
{
    PyFrameObject *own = f->frame_obj;
    if (own != NULL && own->f_back != NULL) {
        *object = own->f_back;
        return own->f_back->f_frame;
    }
    _PyInterpreterFrame *prev = f->previous;
    while (prev != NULL && _PyFrame_IsIncomplete(prev))
        prev = prev->previous;
    *object = prev != NULL ? prev->frame_obj : NULL;
    return prev;
}

static long
internal_lasti(_PyInterpreterFrame *f)
{
    int lasti = _PyInterpreterFrame_LASTI(f);
    return lasti < 0 ? -1 : (long)lasti * (long)sizeof(_Py_CODEUNIT);
}
#endif

#ifdef INTERNAL_FRAMES
/* 1 when ``frame`` runs in this thread, no more than a few calls out from its current frame:
 * then it and every frame outside it stay put while a walk lasts, whatever code an allocation
 * runs meanwhile (another thread's frames may return whenever the GIL is let go). */
static int
running_here(PyFrameObject *frame)
{
    if (frame->f_back != NULL || frame->f_frame->owner == FRAME_OWNED_BY_FRAME_OBJECT ||
        frame->f_frame->frame_obj != frame)
        return 0; /* finished: its object owns its data */
    _PyInterpreterFrame *f = THREAD_FRAME(PyThreadState_Get());
    for (int steps = 0; f != NULL && steps < 64; steps++, f = f->previous)
        if (f == frame->f_frame)
            return 1;
    return 0;
}
#endif

/* The walk's first frame: the internal walk from a frame running in this thread, the public one
 * from any other (a finished frame, a suspended generator's, another thread's). */
static void
walk_start(PyFrameObject *frame, WalkFrame *w)
{
#ifdef INTERNAL_FRAMES
    if (internal_frames && running_here(frame)) {
        w->frame = frame->f_frame;
        w->object = frame;
        return;
    }
    w->frame = NULL;
#endif
    w->object = (PyFrameObject *)Py_NewRef(frame);
}

/* The frame outside ``w`` into ``next``; 0 when there is none. */
static int
walk_back(const WalkFrame *w, WalkFrame *next)
{
#ifdef INTERNAL_FRAMES
    if (w->frame != NULL) {
        next->frame = internal_back(w->frame, &next->object);
        return next->frame != NULL;
    }
    next->frame = NULL;
#endif
    next->object = PyFrame_GetBack(w->object);
    return next->object != NULL;
}

static void
walk_release(WalkFrame *w)
{
#ifdef INTERNAL_FRAMES
    if (w->frame != NULL)
        return;
#endif
    Py_CLEAR(w->object);
}

/* The frame's code (new). */
static PyCodeObject *
walk_code(const WalkFrame *w)
{
#ifdef INTERNAL_FRAMES
    if (w->frame != NULL)
        return (PyCodeObject *)Py_NewRef(IFRAME_CODE(w->frame));
#endif
    return PyFrame_GetCode(w->object);
}

/* frame.f_lasti as Python reports it (bytes on 3.10 too, where the struct counts code units). */
static long
walk_lasti(const WalkFrame *w)
{
#ifdef INTERNAL_FRAMES
    if (w->frame != NULL)
        return internal_lasti(w->frame);
#endif
#if PY_VERSION_HEX >= 0x030B0000
    return PyFrame_GetLasti(w->object);
#else
    return w->object->f_lasti < 0 ? -1 : (long)w->object->f_lasti * (long)sizeof(_Py_CODEUNIT);
#endif
}

/* The frame's object if it has one, borrowed: the only frames ``known`` can name. */
static PyFrameObject *
walk_object(const WalkFrame *w)
{
#ifdef INTERNAL_FRAMES
    if (w->frame != NULL)
        return w->frame->frame_obj;
#endif
    return w->object;
}

/* The frame's object (new), made if it has none: sys._getframe(depth) makes one for a frame
 * deep in the running stack, where depth counts complete frames as it does, from the thread's
 * current frame. NULL with an error, or with *unexpected set where the frame is not found
 * there (the Python walk then decides). */
static PyFrameObject *
walk_materialize(WalkFrame *w, int *unexpected)
{
#ifdef INTERNAL_FRAMES
    if (w->frame != NULL && w->frame->frame_obj == NULL) {
        _PyInterpreterFrame *f = THREAD_FRAME(PyThreadState_Get());
        long depth = 0;
        while (f != NULL && f != w->frame && depth < 100000) {
            f = f->previous;
            if (f != NULL && !_PyFrame_IsIncomplete(f))
                depth++;
        }
        if (f == NULL || depth >= 100000) {
            *unexpected = 1;
            return NULL;
        }
        PyObject *depth_obj = PyLong_FromLong(depth);
        PyObject *made = depth_obj == NULL ? NULL : PyObject_CallOneArg(sys_getframe, depth_obj);
        Py_XDECREF(depth_obj);
        if (made == NULL)
            return NULL;
        if (!PyFrame_Check(made) || ((PyFrameObject *)made)->f_frame != w->frame || w->frame->frame_obj != (PyFrameObject *)made) {
            Py_DECREF(made);
            *unexpected = 1;
            return NULL;
        }
        w->object = (PyFrameObject *)made;
        return (PyFrameObject *)made;
    }
#endif
    (void)unexpected;
    return (PyFrameObject *)Py_NewRef(walk_object(w));
}

#ifdef INTERNAL_FRAMES
/* 1 when the internal walk reads, on the frames running now (the import's), exactly what
 * PyFrame_GetBack, PyFrame_GetCode and PyFrame_GetLasti read, frame by frame, and sys._getframe
 * is the builtin; 0 leaves every walk to the public functions. */
static int
prove_internal_frames(void)
{
    if ((Py_Version >> 16) != (PY_VERSION_HEX >> 16))
        return 0;
    PyObject *getframe = PySys_GetObject("_getframe"); /* borrowed */
    if (getframe == NULL || !PyCFunction_Check(getframe) ||
        strcmp(((PyCFunctionObject *)getframe)->m_ml->ml_name, "_getframe") != 0)
        return 0;
    PyFrameObject *f = (PyFrameObject *)Py_XNewRef(PyEval_GetFrame());
    if (f == NULL || THREAD_FRAME(PyThreadState_Get()) == NULL)
        return 0;
    _PyInterpreterFrame *i = f->f_frame;
    PyFrameObject *object = f;
    int ok = 1, walked = 0;
    while (ok && f != NULL) {
        PyCodeObject *code = PyFrame_GetCode(f);
        ok = i != NULL && i == f->f_frame && object == f && i->frame_obj == f && IFRAME_CODE(i) == code &&
             internal_lasti(i) == PyFrame_GetLasti(f);
        Py_DECREF(code);
        _PyInterpreterFrame *back = ok ? internal_back(i, &object) : NULL;
        PyFrameObject *public_back = PyFrame_GetBack(f);
        if (ok && back != NULL && object == NULL)
            object = back->frame_obj; /* PyFrame_GetBack made it just now */
        Py_DECREF(f);
        f = public_back;
        i = back;
        ok = ok && (f == NULL) == (i == NULL);
        walked++;
    }
    Py_XDECREF(f);
    if (!ok || walked < 2)
        return 0;
    sys_getframe = Py_NewRef(getframe);
    return 1;
}
#endif

/* What each walked frame needs once the walk stops. */
typedef struct {
    WalkFrame frame;
    PyCodeObject *code;
    long lasti, kind;
} Walked;

#define KIND_KEEP 0
#define KIND_END 2
#define SUSPENDABLE (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR)

/* A node's (parent, id(code), f_lasti, length, reached) from ``nodes``: borrowed, or NULL with
 * *unexpected set when it is missing or not that tuple (the Python path then decides). */
static PyObject *
node_info(PyObject *nodes, PyObject *node, int *unexpected)
{
    PyObject *info = PyDict_GetItemWithError(nodes, node);
    if (info == NULL || !PyTuple_CheckExact(info) || PyTuple_GET_SIZE(info) != 5 ||
        !PyLong_CheckExact(PyTuple_GET_ITEM(info, 3))) {
        if (!PyErr_Occurred())
            *unexpected = 1;
        return NULL;
    }
    return info;
}

/* 1 when a known entry for a frame at ``lasti`` ends the walk (its node in *node, new), 0 when
 * it does not, -1 on error or with *unexpected set. As StackTable.capture decides it. */
static int
known_hit(PyObject *nodes, PyObject *hit, long lasti, long kept, Depth *depth, PyObject **node, int *unexpected)
{
    if (!PyTuple_CheckExact(hit) || PyTuple_GET_SIZE(hit) < 2 || !PyLong_CheckExact(PyTuple_GET_ITEM(hit, 0)) ||
        !PyLong_CheckExact(PyTuple_GET_ITEM(hit, 1))) {
        *unexpected = 1;
        return -1;
    }
    long cached = PyLong_AsLong(PyTuple_GET_ITEM(hit, 0));
    if (cached == -1 && PyErr_Occurred())
        return -1;
    if (cached != lasti)
        return 0;
    PyObject *hit_node = PyTuple_GET_ITEM(hit, 1);
    long value = PyLong_AsLong(hit_node);
    if (value == -1 && PyErr_Occurred())
        return -1;
    if (value >= 0) {
        PyObject *info = node_info(nodes, hit_node, unexpected);
        if (info == NULL)
            return -1;
        int reached = PyObject_IsTrue(PyTuple_GET_ITEM(info, 4));
        if (reached < 0)
            return -1;
        long length = PyLong_AsLong(PyTuple_GET_ITEM(info, 3));
        if (length == -1 && PyErr_Occurred())
            return -1;
        if (!reached) {
            long wanted = depth_of(depth);
            if (wanted == -1 && PyErr_Occurred())
                return -1;
            if (kept + length < wanted)
                return 0;
        }
    }
    *node = Py_NewRef(hit_node);
    return 1;
}

/* StackTable._intern(parent, code_id, lasti, True): the node, new; NULL on error or unexpected. */
static PyObject *
intern_node(PyObject *ids, PyObject *nodes, PyObject *counter, PyObject *parent, PyObject *code_id, PyObject *lasti,
            int *unexpected)
{
    PyObject *key = PyTuple_Pack(3, parent, code_id, lasti);
    if (key == NULL)
        return NULL;
    PyObject *node = Py_XNewRef(PyDict_GetItemWithError(ids, key));
    if (node != NULL || PyErr_Occurred()) {
        Py_DECREF(key);
        return node;
    }
    PyObject *length = NULL, *reached = Py_True, *fresh = NULL, *info = NULL;
    long parent_value = PyLong_AsLong(parent);
    if (parent_value == -1 && PyErr_Occurred())
        goto out;
    if (parent_value >= 0) {
        PyObject *parent_info = node_info(nodes, parent, unexpected);
        if (parent_info == NULL)
            goto out;
        length = PyNumber_Add(PyTuple_GET_ITEM(parent_info, 3), one);
        reached = PyTuple_GET_ITEM(parent_info, 4);
    }
    else
        length = Py_NewRef(one);
    if (length == NULL)
        goto out;
    /* Stored before its id is published; a thread that interned the same key meanwhile wins. */
    fresh = PyIter_Next(counter);
    if (fresh == NULL) {
        if (!PyErr_Occurred())
            *unexpected = 1;
        goto out;
    }
    info = PyTuple_Pack(5, parent, code_id, lasti, length, reached);
    if (info == NULL || PyDict_SetItem(nodes, fresh, info) < 0)
        goto out;
    node = Py_XNewRef(PyDict_SetDefault(ids, key, fresh));
out:
    Py_XDECREF(info);
    Py_XDECREF(fresh);
    Py_XDECREF(length);
    Py_DECREF(key);
    return node;
}

/* The draw from a loop: the caller is new or moved, its caller is known. 1 with *node (new), 0 to walk. */
static int
capture_first_step(PyFrameObject *frame, Depth *depth, PyObject *known, PyObject *ids, PyObject *nodes, WalkMemo *memo,
                   PyObject **node, int *unexpected)
{
    int done = 0;
    WalkFrame start, back;
    walk_start(frame, &start);
    if (!walk_back(&start, &back)) {
        walk_release(&start);
        return 0;
    }
    /* A frame with no object yet is not one ``known`` names. */
    PyFrameObject *parent = walk_object(&back);
    PyCodeObject *code = NULL;
    PyObject *key = NULL, *hit = NULL, *code_id = NULL, *lasti = NULL, *lookup = NULL;
    if (parent == NULL)
        goto out;
    if ((key = PyLong_FromVoidPtr(parent)) == NULL)
        goto error;
    hit = Py_XNewRef(PyDict_GetItemWithError(known, key));
    if (hit == NULL)
        goto out;
    if (!PyTuple_CheckExact(hit) || PyTuple_GET_SIZE(hit) < 2 || !PyLong_CheckExact(PyTuple_GET_ITEM(hit, 0)) ||
        !PyLong_CheckExact(PyTuple_GET_ITEM(hit, 1))) {
        *unexpected = 1;
        goto error;
    }
    long cached = PyLong_AsLong(PyTuple_GET_ITEM(hit, 0));
    long hit_node = PyLong_AsLong(PyTuple_GET_ITEM(hit, 1));
    if (PyErr_Occurred())
        goto error;
    if (cached != walk_lasti(&back) || hit_node < 0)
        goto out;
    PyObject *info = node_info(nodes, PyTuple_GET_ITEM(hit, 1), unexpected);
    if (info == NULL)
        goto error;
    int reached = PyObject_IsTrue(PyTuple_GET_ITEM(info, 4));
    long length = PyLong_AsLong(PyTuple_GET_ITEM(info, 3));
    if (reached < 0 || (length == -1 && PyErr_Occurred()))
        goto error;
    if (!reached) {
        long wanted = depth_of(depth);
        if (wanted == -1 && PyErr_Occurred())
            goto error;
        if (length + 1 < wanted)
            goto out;
    }
    code = walk_code(&start);
    long frame_lasti = walk_lasti(&start);
    long memo_hit = memo_node_get(memo, hit_node, code, frame_lasti);
    if (memo_hit >= 0) {
        if ((*node = PyLong_FromLong(memo_hit)) == NULL)
            goto error;
        done = 1;
        goto out;
    }
    code_id = PyLong_FromVoidPtr(code);
    lasti = PyLong_FromLong(frame_lasti);
    if (code_id == NULL || lasti == NULL)
        goto error;
    if ((lookup = PyTuple_Pack(3, PyTuple_GET_ITEM(hit, 1), code_id, lasti)) == NULL)
        goto error;
    *node = Py_XNewRef(PyDict_GetItemWithError(ids, lookup));
    if (*node != NULL) {
        done = 1;
        /* Memoized only for a code ``codes`` holds: that is what keeps its pointer unique. */
        long value = PyLong_CheckExact(*node) ? PyLong_AsLong(*node) : -1;
        if (value == -1 && PyErr_Occurred())
            PyErr_Clear();
        else if (value >= 0 && memo_kind_get(memo, code) >= 0)
            memo_node_put(memo, hit_node, code, frame_lasti, value);
    }
    else if (PyErr_Occurred())
        goto error;
    goto out;
error:
    done = -1;
out:
    Py_XDECREF(lookup);
    Py_XDECREF(lasti);
    Py_XDECREF(code_id);
    Py_XDECREF((PyObject *)code);
    Py_XDECREF(hit);
    Py_XDECREF(key);
    walk_release(&back);
    walk_release(&start);
    return done;
}

/* The walk memo in a table's walk state, or NULL where it holds none. */
static WalkMemo *
memo_of(PyObject *state)
{
    PyObject *memo = PyTuple_GET_SIZE(state) == 8 ? PyTuple_GET_ITEM(state, 7) : Py_None;
    if (!PyCapsule_CheckExact(memo))
        return NULL;
    WalkMemo *found = PyCapsule_GetPointer(memo, MEMO_NAME);
    if (found == NULL)
        PyErr_Clear();
    return found;
}

/* The last entry of a thread's ``known`` found for a draw's caller's caller, and where: the same
 * dict unwritten since (its version tag) holds the same entry for the same frame. Pointers are
 * compared, never followed. */
static struct {
    PyObject *known;
    PyFrameObject *parent;
    uint64_t version;
    long lasti, node;
} last_parent;

/* Recording.record()'s first step: the caller on top of a frame the thread's cache knows (a draw
 * from a loop), at a node interned at an earlier draw. The node (new), or NULL: with an error
 * set, or without one where the cache does not know the stack. */
static PyObject *
known_stack(PyFrameObject *frame, PyObject *known, PyObject *ids, PyObject *state)
{
    WalkFrame start, back;
    walk_start(frame, &start);
    if (!walk_back(&start, &back)) {
        walk_release(&start);
        return NULL;
    }
    WalkMemo *memo = memo_of(state);
    PyCodeObject *code = NULL;
    PyObject *node = NULL, *hit = NULL, *code_id = NULL, *offset = NULL, *lookup = NULL, *key = NULL;
    long cached, parent_node;
    /* A frame with no object yet is not one ``known`` names. */
    PyFrameObject *parent = walk_object(&back);
    if (parent == NULL)
        goto out;
#ifdef HAVE_VERSION_TAG
    /* The loop's frame, asked about again with ``known`` unwritten since: the same entry. */
    if (last_parent.known == known && last_parent.parent == parent && last_parent.version == version_tag(known)) {
        cached = last_parent.lasti;
        parent_node = last_parent.node;
        goto found;
    }
#endif
    if ((key = PyLong_FromVoidPtr(parent)) == NULL)
        goto out;
    hit = Py_XNewRef(PyDict_GetItemWithError(known, key));
    if (hit == NULL || !PyTuple_CheckExact(hit) || PyTuple_GET_SIZE(hit) < 2 ||
        !PyLong_CheckExact(PyTuple_GET_ITEM(hit, 0)) || !PyLong_CheckExact(PyTuple_GET_ITEM(hit, 1)))
        goto out;
    cached = PyLong_AsLong(PyTuple_GET_ITEM(hit, 0));
    parent_node = PyLong_AsLong(PyTuple_GET_ITEM(hit, 1));
    if ((cached == -1 || parent_node == -1) && PyErr_Occurred()) {
        PyErr_Clear(); /* not what the Python path stores: it decides */
        goto out;
    }
#ifdef HAVE_VERSION_TAG
    last_parent.known = known;
    last_parent.parent = parent;
    last_parent.version = version_tag(known);
    last_parent.lasti = cached;
    last_parent.node = parent_node;
found:
#endif
    if (cached != walk_lasti(&back))
        goto out;
    code = walk_code(&start);
    long lasti = walk_lasti(&start);
    long found = memo_node_get(memo, parent_node, code, lasti);
    if (found >= 0) {
        node = PyLong_FromLong(found);
        goto out;
    }
    PyObject *parent_id = PyLong_FromLong(parent_node);
    if (parent_id == NULL || (code_id = PyLong_FromVoidPtr(code)) == NULL || (offset = PyLong_FromLong(lasti)) == NULL ||
        (lookup = PyTuple_Pack(3, parent_id, code_id, offset)) == NULL) {
        Py_XDECREF(parent_id);
        goto out;
    }
    Py_DECREF(parent_id);
    node = Py_XNewRef(PyDict_GetItemWithError(ids, lookup));
    /* Memoized only for a code the table's ``codes`` holds: that is what keeps its pointer unique. */
    if (node != NULL && PyLong_CheckExact(node) && memo_kind_get(memo, code) >= 0) {
        long value = PyLong_AsLong(node);
        if (value >= 0)
            memo_node_put(memo, parent_node, code, lasti, value);
        else if (PyErr_Occurred())
            Py_CLEAR(node);
    }
out:
    Py_XDECREF(lookup);
    Py_XDECREF(offset);
    Py_XDECREF(code_id);
    Py_XDECREF((PyObject *)code);
    Py_XDECREF(hit);
    Py_XDECREF(key);
    walk_release(&back);
    walk_release(&start);
    return node;
}

/* StackTable.capture with a ``known`` cache, state = (ids, nodes, codes, counter, watched, kind,
 * max_pinned, memo): the node (new), NotImplemented where anything read is not what the Python
 * path expects (it then runs, and is the reference), NULL on error. The same nodes, the same
 * ``known`` entries, the same calls to kind() and watch(). ``memo`` (a walk_memo() capsule, or
 * None) lets frames already interned be walked without allocating. */
static PyObject *
capture_walk(PyObject *frame_arg, Depth *depth, PyObject *known, int pin, PyObject *state, PyObject *watch)
{
    if ((frame_arg != Py_None && !PyFrame_Check(frame_arg)) || !PyDict_CheckExact(known) ||
        !PyTuple_CheckExact(state) || PyTuple_GET_SIZE(state) != 8)
        Py_RETURN_NOTIMPLEMENTED;
    PyObject *ids = PyTuple_GET_ITEM(state, 0), *nodes = PyTuple_GET_ITEM(state, 1);
    PyObject *codes = PyTuple_GET_ITEM(state, 2), *counter = PyTuple_GET_ITEM(state, 3);
    PyObject *watched = PyTuple_GET_ITEM(state, 4), *kind_of = PyTuple_GET_ITEM(state, 5);
    PyObject *memo_obj = PyTuple_GET_ITEM(state, 7);
    if (!PyDict_CheckExact(ids) || !PyDict_CheckExact(nodes) || !PyDict_CheckExact(codes) ||
        !PySet_CheckExact(watched) || !PyIter_Check(counter) || !PyLong_CheckExact(PyTuple_GET_ITEM(state, 6)))
        Py_RETURN_NOTIMPLEMENTED;
    WalkMemo *memo = NULL;
    if (memo_obj != Py_None) {
        if (!PyCapsule_CheckExact(memo_obj) || (memo = PyCapsule_GetPointer(memo_obj, MEMO_NAME)) == NULL) {
            PyErr_Clear();
            Py_RETURN_NOTIMPLEMENTED;
        }
    }
    Py_ssize_t max_pinned = PyLong_AsSsize_t(PyTuple_GET_ITEM(state, 6));
    if (max_pinned == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NOTIMPLEMENTED;
    }
    int unexpected = 0;
    PyObject *node = NULL;
    /* Held while we work: a collection during an allocation may run any code. The memo lives
     * as long as ``state`` does. */
    Py_INCREF(state);
    Py_INCREF(known);
    Py_XINCREF(watch);
    if (frame_arg != Py_None) {
        int done = capture_first_step((PyFrameObject *)frame_arg, depth, known, ids, nodes, memo, &node, &unexpected);
        if (done != 0)
            goto finish;
    }
    Walked local[32], *walked = local;
    Py_ssize_t count = 0, capacity = 32;
    long kept = 0;
    /* The node so far: its value, and its int object where one is at hand (NULL: make it when needed). */
    long node_value = -1;
    node = Py_NewRef(root);
    WalkFrame f;
    int more = frame_arg != Py_None;
    if (more)
        walk_start((PyFrameObject *)frame_arg, &f);
    while (more) {
        long lasti = walk_lasti(&f);
        PyFrameObject *object = walk_object(&f); /* NULL: no object yet, so not in ``known`` */
        if (object != NULL && PyDict_GET_SIZE(known) > 0) {
            PyObject *frame_id = PyLong_FromVoidPtr(object);
            if (frame_id == NULL)
                goto fail_frame;
            PyObject *hit = PyDict_GetItemWithError(known, frame_id);
            Py_DECREF(frame_id);
            if (hit == NULL && PyErr_Occurred())
                goto fail_frame;
            if (hit != NULL) {
                Py_INCREF(hit);
                PyObject *found = NULL;
                int ends = known_hit(nodes, hit, lasti, kept, depth, &found, &unexpected);
                Py_DECREF(hit);
                if (ends < 0)
                    goto fail_frame;
                if (ends) {
                    node_value = PyLong_AsLong(found);
                    Py_SETREF(node, found);
                    if (node_value == -1 && PyErr_Occurred())
                        goto fail_frame;
                    walk_release(&f);
                    break;
                }
            }
        }
        PyCodeObject *code = walk_code(&f);
        long kind = memo_kind_get(memo, code);
        if (kind < 0) {
            PyObject *code_id = PyLong_FromVoidPtr(code), *entry = NULL;
            if (code_id == NULL)
                goto fail_code;
            entry = Py_XNewRef(PyDict_GetItemWithError(codes, code_id));
            if (entry == NULL) {
                if (PyErr_Occurred())
                    goto fail_entry;
                PyObject *kind_obj = PyObject_CallOneArg(kind_of, (PyObject *)code);
                if (kind_obj == NULL)
                    goto fail_entry;
                entry = PyTuple_Pack(2, (PyObject *)code, kind_obj);
                Py_DECREF(kind_obj);
                if (entry == NULL || PyDict_SetItem(codes, code_id, entry) < 0)
                    goto fail_entry;
            }
            if (!PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) != 2 ||
                !PyLong_CheckExact(PyTuple_GET_ITEM(entry, 1)) || PyTuple_GET_ITEM(entry, 0) != (PyObject *)code) {
                unexpected = 1;
                goto fail_entry;
            }
            kind = PyLong_AsLong(PyTuple_GET_ITEM(entry, 1));
            if (kind == -1 && PyErr_Occurred())
                goto fail_entry;
            /* ``codes`` now holds this code (and keeps it alive): its pointer names it for this table. */
            memo_kind_put(memo, code, kind);
            Py_DECREF(entry);
            Py_DECREF(code_id);
            goto kind_known;
        fail_entry:
            Py_XDECREF(entry);
            Py_DECREF(code_id);
            goto fail_code;
        }
    kind_known:
        if (kind == KIND_END) {
            /* The launcher's frames: the stack ends as if at the outermost frame. */
            Py_DECREF((PyObject *)code);
            walk_release(&f);
            break;
        }
        if (count == capacity) {
            Py_ssize_t grown = capacity * 2;
            Walked *more = walked == local ? PyMem_Malloc(grown * sizeof(Walked))
                                           : PyMem_Realloc(walked, grown * sizeof(Walked));
            if (more == NULL) {
                PyErr_NoMemory();
                goto fail_code;
            }
            if (walked == local)
                memcpy(more, local, sizeof(local));
            walked = more;
            capacity = grown;
        }
        walked[count++] = (Walked){f, code, lasti, kind};
        if (kind == KIND_KEEP)
            kept++;
        more = walk_back(&walked[count - 1].frame, &f);
        continue;
    fail_code:
        Py_DECREF((PyObject *)code);
    fail_frame:
        walk_release(&f);
        Py_CLEAR(node);
        goto release;
    }
    if (pin && PyDict_GET_SIZE(known) > max_pinned) {
        /* The Sweeper is stalled or gone: let every pin go rather than keep frames without bound. */
        PyDict_Clear(known);
    }
    int cached = 0;
    for (Py_ssize_t i = count - 1; i >= 0; i--) {
        Walked *w = &walked[i];
        PyObject *lasti_obj = NULL, *code_id = NULL;
        int rc = 0;
        if (w->kind == KIND_KEEP) {
            long inner = memo_node_get(memo, node_value, w->code, w->lasti);
            if (inner >= 0) {
                node_value = inner;
                Py_CLEAR(node);
            }
            else {
                if (node == NULL && (node = PyLong_FromLong(node_value)) == NULL)
                    break;
                lasti_obj = PyLong_FromLong(w->lasti);
                code_id = PyLong_FromVoidPtr(w->code);
                PyObject *fresh = lasti_obj == NULL || code_id == NULL
                                      ? NULL
                                      : intern_node(ids, nodes, counter, node, code_id, lasti_obj, &unexpected);
                if (fresh == NULL || !PyLong_CheckExact(fresh)) {
                    if (fresh != NULL)
                        unexpected = 1;
                    Py_XDECREF(fresh);
                    rc = -1;
                    goto step_done;
                }
                inner = PyLong_AsLong(fresh);
                if (inner < 0) {
                    if (!PyErr_Occurred())
                        unexpected = 1;
                    Py_DECREF(fresh);
                    rc = -1;
                    goto step_done;
                }
                memo_node_put(memo, node_value, w->code, w->lasti, inner);
                node_value = inner;
                Py_SETREF(node, fresh);
            }
        }
        /* One frame per walk enters the cache, the outermost new one; never the innermost. */
        if (cached || i == 0)
            goto step_done;
        if (pin && (w->code->co_flags & SUSPENDABLE)) {
            /* A suspended generator may be resumed from elsewhere: only plain frames are pinned. */
            goto step_done;
        }
        if (node == NULL && (node = PyLong_FromLong(node_value)) == NULL) {
            rc = -1;
            goto step_done;
        }
        if (lasti_obj == NULL && (lasti_obj = PyLong_FromLong(w->lasti)) == NULL) {
            rc = -1;
            goto step_done;
        }
        /* Its object, made now if it has none (the internal walk made none). */
        PyFrameObject *object = walk_materialize(&w->frame, &unexpected);
        PyObject *frame_id = object == NULL ? NULL : PyLong_FromVoidPtr(object);
        if (frame_id == NULL) {
            Py_XDECREF(object);
            rc = -1;
            goto step_done;
        }
        PyObject *entry = pin ? PyTuple_Pack(3, lasti_obj, node, (PyObject *)object) : PyTuple_Pack(2, lasti_obj, node);
        rc = entry == NULL ? -1 : PyDict_SetItem(known, frame_id, entry);
        Py_XDECREF(entry);
        Py_DECREF(frame_id);
        Py_DECREF(object);
        if (rc == 0 && !pin && watch != Py_None) {
            if (code_id == NULL && (code_id = PyLong_FromVoidPtr(w->code)) == NULL)
                rc = -1;
            else
                rc = PySet_Contains(watched, code_id);
            if (rc == 0) {
                rc = PySet_Add(watched, code_id);
                PyObject *r = rc < 0 ? NULL : PyObject_CallOneArg(watch, (PyObject *)w->code);
                rc = r == NULL ? -1 : 0;
                Py_XDECREF(r);
            }
            else if (rc > 0)
                rc = 0;
        }
        cached = 1;
    step_done:
        Py_XDECREF(lasti_obj);
        Py_XDECREF(code_id);
        if (rc < 0) {
            Py_CLEAR(node);
            break;
        }
    }
    /* Broken off (rc < 0, or an int that could not be made): node is NULL and stays so. */
    if (node == NULL && !PyErr_Occurred() && !unexpected)
        node = PyLong_FromLong(node_value);
release:
    for (Py_ssize_t i = 0; i < count; i++) {
        Walked *w = &walked[i];
        walk_release(&w->frame);
        Py_DECREF((PyObject *)w->code);
    }
    if (walked != local)
        PyMem_Free(walked);
finish:
    Py_XDECREF(watch);
    Py_DECREF(known);
    Py_DECREF(state);
    if (node == NULL && unexpected && !PyErr_Occurred())
        Py_RETURN_NOTIMPLEMENTED;
    return node;
}

/* capture(frame, depth, known, pin, state, watch): capture_walk() for StackTable.capture. */
static PyObject *
capture(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "capture(frame, depth, known, pin, state, watch)");
        return NULL;
    }
    if (!PyLong_CheckExact(args[1]))
        Py_RETURN_NOTIMPLEMENTED;
    long depth = PyLong_AsLong(args[1]);
    int pin = PyObject_IsTrue(args[3]);
    if (pin < 0 || (depth == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        Py_RETURN_NOTIMPLEMENTED;
    }
    Depth given = {NULL, depth};
    return capture_walk(args[0], &given, args[2], pin, args[4], args[5]);
}

/* flat_key(frame, depth): StackTable._capture_flat's key, where no cache of live frames can be
 * kept (frame mode WALK): the code pointer and f_lasti of up to ``depth`` frames from ``frame``
 * outward, packed as uint64 pairs in one bytes object -- one allocation instead of a tuple of
 * 2 * depth ints. Only ever compared with keys made here. */
static PyObject *
flat_key(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || (args[0] != Py_None && !PyFrame_Check(args[0])) || !PyLong_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "flat_key(frame or None, depth)");
        return NULL;
    }
    long depth = PyLong_AsLong(args[1]);
    if (depth == -1 && PyErr_Occurred())
        return NULL;
    if (depth < 0)
        depth = 0;
    uint64_t local[2 * 32], *pairs = local;
    if (depth > 32 && (pairs = PyMem_Malloc((size_t)depth * 2 * sizeof(uint64_t))) == NULL)
        return PyErr_NoMemory();
    Py_ssize_t n = 0;
    if (args[0] != Py_None && depth > 0) {
        /* The capture walk's frames (the interpreter's own where it can): no frame object made. */
        WalkFrame w, next;
        walk_start((PyFrameObject *)args[0], &w);
        for (;;) {
            PyCodeObject *code = walk_code(&w);
            pairs[2 * n] = (uint64_t)(uintptr_t)code;
            Py_DECREF(code); /* the frame holds it */
            pairs[2 * n + 1] = (uint64_t)walk_lasti(&w);
            n++;
            int more = n < depth && walk_back(&w, &next);
            walk_release(&w);
            if (!more)
                break;
            w = next;
        }
    }
    PyObject *key = PyBytes_FromStringAndSize((const char *)pairs, n * (Py_ssize_t)(2 * sizeof(uint64_t)));
    if (pairs != local)
        PyMem_Free(pairs);
    return key;
}

/* lineno_at(code, lasti): the line of the instruction at byte offset ``lasti``, or None where it has
 * no line of its own or lies outside the code (the Python lineno_at then decides). A child's spool
 * and every rendered log resolve each stack's lines: co_lines() walked in Python cost tens of
 * microseconds a frame in a large function. */
static PyObject *
lineno_at(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyCode_Check(args[0]) || !PyLong_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "lineno_at(code, lasti)");
        return NULL;
    }
    PyCodeObject *code = (PyCodeObject *)args[0];
    long lasti = PyLong_AsLong(args[1]);
    if (lasti == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
#if PY_VERSION_HEX >= 0x030B0000
    Py_ssize_t size = Py_SIZE(code) * 2; /* code units of two bytes */
#else
    Py_ssize_t size = PyBytes_GET_SIZE(code->co_code);
#endif
    if (lasti < 0 || lasti >= size || lasti > INT_MAX)
        Py_RETURN_NONE;
    int line = PyCode_Addr2Line(code, (int)lasti);
    if (line < 0)
        Py_RETURN_NONE;
    return PyLong_FromLong(line);
}

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
static PyObject *
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
static PyObject *
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

static PyMethodDef module_methods[] = {
    {"on_sigterm", on_sigterm, METH_O,
     "on_sigterm(fd): SIGTERM writes a byte to fd instead of killing at once (fd -1: the default back)."},
    {"die_of_sigterm", die_of_sigterm, METH_NOARGS, "die_of_sigterm(): the default SIGTERM back, and the process killed by it."},
    {"lineno_at", (PyCFunction)(void (*)(void))lineno_at, METH_FASTCALL,
     "lineno_at(code, lasti): the line of the instruction at byte offset lasti, or None (see _stack.lineno_at)."},
    {"configure", configure, METH_VARARGS,
     "configure(HotPath, Snapshot, Cache, ThreadState, Fingerprint): the types whose slots are read."},
    {"call_locked", call_locked, METH_VARARGS, "call_locked(lock, fn, *args): fn(*args) under the lock, taken and released in C."},
    {"flat_key", (PyCFunction)(void (*)(void))flat_key, METH_FASTCALL,
     "flat_key(frame, depth): the code pointers and f_lasti of depth frames, packed (StackTable._capture_flat)."},
    {"call_if_free", call_if_free, METH_VARARGS,
     "call_if_free(lock, fn, *args): fn(*args) under the lock, or NotImplemented if another thread holds it."},
    {"walk_memo", walk_memo, METH_NOARGS, "walk_memo(): an empty memo for one StackTable's capture walk (see capture)."},
    {"capture", (PyCFunction)(void (*)(void))capture, METH_FASTCALL,
     "capture(frame, depth, known, pin, state, watch): StackTable.capture's walk (NotImplemented: use Python's)."},
    {"builtin_twin", builtin_twin, METH_O,
     "builtin_twin(fn): a new builtin object calling what the builtin fn calls when not hooked."},
    {"hooked_builtins", hooked_builtins, METH_NOARGS, "hooked_builtins(): the builtins whose calls reach a wrapper now."},
    {"hook_builtins", hook_builtins, METH_VARARGS,
     "hook_builtins(pairs, forward): make each builtin of (builtin, wrapper) pairs call its wrapper, in place, or undo."},
    {"swap", swap, METH_VARARGS,
     "swap(entries, forward, INHERITED, stamps={}): apply or undo a patch set in one pass."},
    {NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "rngtrace._speedups", "A recording wrapper's common case, in C.", -1, module_methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
#define INTERN(var, text)                                                                                         \
    if ((var = PyUnicode_InternFromString(text)) == NULL)                                                         \
        return NULL;
    INTERN(s_value, "value");
    INTERN(s_add, "_add");
    INTERN(s_is_cpu, "is_cpu");
    INTERN(s_numel, "numel");
    INTERN(s_depth, "depth");
    INTERN(s_watch_code, "watch_code");
    INTERN(s_acquire, "acquire");
    INTERN(s_release, "release");
#undef INTERN
    if ((one = PyLong_FromLong(1)) == NULL || (root = PyLong_FromLong(-1)) == NULL ||
        (zero = PyLong_FromLong(0)) == NULL)
        return NULL;
    if (PyType_Ready(&RecorderType) < 0 || PyType_Ready(&InPlaceType) < 0 || PyType_Ready(&StreamLockType) < 0 ||
        PyType_Ready(&ShieldedType) < 0)
        return NULL;
    if (deferred == NULL && (deferred = PyList_New(0)) == NULL)
        return NULL;
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL)
        return NULL;
    if (PyModule_AddObjectRef(module, "Recorder", (PyObject *)&RecorderType) < 0 ||
        PyModule_AddObjectRef(module, "InPlace", (PyObject *)&InPlaceType) < 0 ||
        PyModule_AddObjectRef(module, "StreamLock", (PyObject *)&StreamLockType) < 0 ||
        PyModule_AddObjectRef(module, "Shielded", (PyObject *)&ShieldedType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
#ifdef INTERNAL_FRAMES
    internal_frames = prove_internal_frames();
    if (PyErr_Occurred()) { /* a proof that could not finish proves nothing */
        PyErr_Clear();
        internal_frames = 0;
    }
    int internal = internal_frames;
#else
    int internal = 0;
#endif
    /* Whether capture walks the interpreter's own frames (3.11-3.13, layout proven at import). */
    if (PyModule_AddObjectRef(module, "internal_frames", internal ? Py_True : Py_False) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
