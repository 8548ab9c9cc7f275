/* rngtrace._speedups, recorder.c -- mirrors rngtrace/sources/_recorder.py's recorder(), _wrapping.py's entry() and
 * Condition: the Recorder type, a recording wrapper's fast path. Its vectorcall decides what the
 * Python wrapper (``slow``) would: a call to pass straight through (no trace, another instance,
 * a nested call, a Condition that says it draws nothing), one to hand to the Python wrapper (the
 * thread's first draw, a strict policy, a profile hook not the catch-all's own, a pending
 * catch-all handoff, a keyword left to Python), and one it records itself (record.c). The
 * struct is in speedups.h. */
#include "speedups.h"

/* -- a declared condition: whether a call draws, from its arguments (_wrapping.Condition) --- */
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
                            "after", "inside", "through", "seed_argument", "tensor_layout", NULL};
    PyObject *slow, *original, *owner, *hot, *fingerprint, *lock, *stream, *kind, *api, *moved, *count_of;
    PyObject *tensor_type = Py_None, *place = Py_None, *slow_keyword = Py_None, *takes = Py_None;
    PyObject *condition = Py_None, *after = Py_None, *inside = Py_None, *through = Py_None;
    Py_ssize_t seed_argument = -1, layout[7] = {0};
    PyObject *tensor_layout = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOOOOOOO|OOOOOOOOnO:Recorder", names, &slow, &original, &owner,
                                     &hot, &fingerprint, &lock, &stream, &kind, &api, &moved, &count_of,
                                     &tensor_type, &place, &slow_keyword, &takes, &condition, &after, &inside,
                                     &through, &seed_argument, &tensor_layout))
        return NULL;
    if (tensor_layout != Py_None) {
        /* (impl_at, numel_at, device_at, cpu, engaged_at, flags_at, flags_mask), as _torch_tensor.tensor_layout() proved it */
        if (!PyType_Check(tensor_type) || !PyTuple_CheckExact(tensor_layout) ||
            !PyArg_ParseTuple(tensor_layout, "nnnnnnn", &layout[0], &layout[1], &layout[2], &layout[3], &layout[4],
                              &layout[5], &layout[6]) ||
            layout[0] < (Py_ssize_t)sizeof(PyObject) || layout[0] % (Py_ssize_t)sizeof(void *) != 0 || layout[1] < 0 ||
            layout[1] % 8 != 0 || layout[2] < 0 || layout[4] < 0 || layout[5] < 0 || layout[3] < 0 || layout[3] > 255 ||
            layout[6] < 0 || layout[6] > 255) {
            PyErr_Clear();
            PyErr_SetString(PyExc_TypeError, "tensor_layout= is None or _torch_tensor.tensor_layout()'s 7 offsets, "
                                             "with tensor_type");
            return NULL;
        }
        if (((PyTypeObject *)tensor_type)->tp_basicsize < layout[0] + (Py_ssize_t)sizeof(void *)) {
            PyErr_SetString(PyExc_ValueError, "tensor_layout= reads past the tensor type's object");
            return NULL;
        }
    }
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
    if (seed_argument > 1 || (seed_argument >= 0 && (after != Py_None || tensor_type != Py_None ||
                                                     condition != Py_None || takes != Py_None))) {
        PyErr_SetString(PyExc_TypeError,
                        "seed_argument= is 0 or 1, for a seed's Recorder that records it in C (no after, tensor_type, "
                        "condition or takes)");
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
    self->seed_argument = seed_argument;
    self->tensor_layout = tensor_layout != Py_None;
    self->impl_at = layout[0];
    self->numel_at = layout[1];
    self->device_at = layout[2];
    self->cpu = (unsigned char)layout[3];
    self->engaged_at = layout[4];
    self->flags_at = layout[5];
    self->flags_mask = (unsigned char)layout[6];
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

PyTypeObject RecorderType = {
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
