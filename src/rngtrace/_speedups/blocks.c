/* rngtrace._speedups, blocks.c -- mirrors rngtrace/_blocks.py: ExitSlot, Binding, claim.
 *
 * Every `with rng_trace(...)` and `with rng_isolate()` binds its manager's __exit__ through an
 * ExitSlot and claims the binding in __enter__: in Python that is three more Python calls a
 * block, a threading.local, a functools.partial and a weak reference with a callback. Here the
 * bound exit is an object of its own type (BoundExit) that calls the class's function with the
 * manager and the Binding, and whose finalizer is the weak reference's callback: a statement
 * that lets go of its exit with the work undone runs the Binding's on_lost callback.
 *
 * The Binding stays an object apart from the bound exit, as in Python: the exit function's frame
 * holds the Binding, and a traceback through that frame (a Ctrl-C at its first instruction, kept
 * by a notebook) must not keep the statement's exit alive, or the block would not end.
 *
 * The exit bound last is kept per thread in the thread state's dict (threading.local's home):
 * claim takes it from there, and only where the same instruction of the same frame bound it. */
#include "speedups.h"

typedef struct {
    PyObject_HEAD
    PyObject *payload; /* what __enter__ left for the exit (NULL reads as None) */
    PyObject *lost;    /* on_lost's callback, called as lost(lost_arg); NULL once done */
    PyObject *lost_arg;
} Binding;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *func; /* the class's exit: func(manager, binding, *exc) */
    PyObject *manager;
    Binding *binding;
    /* Where it was bound, until claimed: the frame's code and instruction, the frame's address. */
    PyObject *code;
    long lasti;
    void *frame;
} BoundExit;

typedef struct {
    PyObject_HEAD
    PyObject *bound;   /* bound(manager, binding, *exc): what a statement's exit calls */
    PyObject *unbound; /* unbound(manager, *exc): Class.__exit__, as ExitStack reads it */
} ExitSlot;

/* The key of the exit bound last in each thread's dict (PyThreadState_GetDict). */
static PyObject *made_key;

static PyTypeObject BindingType, BoundExitType, ExitSlotType;

/* -- Binding ------------------------------------------------------------------------------ */

static PyObject *
binding_on_lost(PyObject *op, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "on_lost(callback, arg) takes two arguments");
        return NULL;
    }
    Binding *self = (Binding *)op;
    PyObject *lost = self->lost, *lost_arg = self->lost_arg;
    self->lost = Py_NewRef(args[0]);
    self->lost_arg = Py_NewRef(args[1]);
    Py_XDECREF(lost);
    Py_XDECREF(lost_arg);
    Py_RETURN_NONE;
}

static PyObject *
binding_done(PyObject *op, PyObject *unused)
{
    Binding *self = (Binding *)op;
    PyObject *lost = self->lost, *lost_arg = self->lost_arg;
    self->lost = self->lost_arg = NULL;
    Py_XDECREF(lost);
    Py_XDECREF(lost_arg);
    Py_RETURN_NONE;
}

static int
binding_traverse(Binding *self, visitproc visit, void *arg)
{
    Py_VISIT(self->payload);
    Py_VISIT(self->lost);
    Py_VISIT(self->lost_arg);
    return 0;
}

static int
binding_clear(Binding *self)
{
    Py_CLEAR(self->payload);
    Py_CLEAR(self->lost);
    Py_CLEAR(self->lost_arg);
    return 0;
}

static void
binding_dealloc(Binding *self)
{
    PyObject_GC_UnTrack(self);
    binding_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef binding_methods[] = {
    {"on_lost", (PyCFunction)(void (*)(void))binding_on_lost, METH_FASTCALL,
     "on_lost(callback, arg): call callback(arg) if the statement is over before done(): its exit never finished."},
    {"done", binding_done, METH_NOARGS, "done(): the exit did its work; nothing is lost when the statement lets go of it."},
    {NULL},
};

static PyMemberDef binding_members[] = {
    {"payload", T_OBJECT, offsetof(Binding, payload), 0,
     "what __enter__ put here for the exit (None: no __enter__ claimed this binding)"},
    {NULL},
};

static PyTypeObject BindingType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "rngtrace._speedups.Binding",
    .tp_basicsize = sizeof(Binding),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "What one with statement's exit of a manager knows: the payload its __enter__ left.",
    .tp_dealloc = (destructor)binding_dealloc,
    .tp_traverse = (traverseproc)binding_traverse,
    .tp_clear = (inquiry)binding_clear,
    .tp_methods = binding_methods,
    .tp_members = binding_members,
};

/* -- BoundExit: a statement's exit -------------------------------------------------------- */

static PyObject *
bound_exit_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    BoundExit *self = (BoundExit *)op;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Py_ssize_t total = nargs + (kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames));
    PyObject *small[8], **stack = small;
    if (total + 2 > 8 && (stack = PyMem_Malloc((size_t)(total + 2) * sizeof(PyObject *))) == NULL)
        return PyErr_NoMemory();
    stack[0] = self->manager;
    stack[1] = (PyObject *)self->binding;
    if (total > 0)
        memcpy(stack + 2, args, (size_t)total * sizeof(PyObject *));
    PyObject *result = PyObject_Vectorcall(self->func, stack, (size_t)(nargs + 2), kwnames);
    if (stack != small)
        PyMem_Free(stack);
    return result;
}

static PyObject *
bound_exit_call(PyObject *self, PyObject *args, PyObject *kwargs)
{
    return PyVectorcall_Call(self, args, kwargs);
}

/* What the weak reference's callback did in Python (Binding._gone): the statement let go of its
 * exit with the work undone, so the binding's on_lost callback runs, once. */
static void
bound_exit_finalize(PyObject *op)
{
    Binding *binding = ((BoundExit *)op)->binding;
    if (binding == NULL || binding->lost == NULL)
        return;
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyObject *lost = binding->lost, *arg = binding->lost_arg;
    binding->lost = binding->lost_arg = NULL;
    PyObject *result = PyObject_CallOneArg(lost, arg);
    if (result == NULL)
        PyErr_WriteUnraisable(lost);
    Py_XDECREF(result);
    Py_DECREF(lost);
    Py_DECREF(arg);
    PyErr_Restore(type, value, traceback);
}

static int
bound_exit_traverse(BoundExit *self, visitproc visit, void *arg)
{
    Py_VISIT(self->func);
    Py_VISIT(self->manager);
    Py_VISIT(self->binding);
    Py_VISIT(self->code);
    return 0;
}

static int
bound_exit_clear(BoundExit *self)
{
    Py_CLEAR(self->func);
    Py_CLEAR(self->manager);
    Py_CLEAR(self->binding);
    Py_CLEAR(self->code);
    return 0;
}

static void
bound_exit_dealloc(BoundExit *self)
{
    /* The usual exit called done(): no finalizer call, no Python code run as the statement lets go. */
    if (self->binding != NULL && self->binding->lost != NULL &&
        PyObject_CallFinalizerFromDealloc((PyObject *)self) < 0)
        return; /* resurrected */
    PyObject_GC_UnTrack(self);
    bound_exit_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef bound_exit_members[] = {
    {"func", T_OBJECT, offsetof(BoundExit, func), READONLY, "the class's exit function it calls"},
    {"binding", T_OBJECT, offsetof(BoundExit, binding), READONLY, "the Binding it passes"},
    {NULL},
};

static PyTypeObject BoundExitType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "rngtrace._speedups.BoundExit",
    .tp_basicsize = sizeof(BoundExit),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_HAVE_FINALIZE,
    .tp_doc = "A with statement's bound exit: calls func(manager, binding, *exc); let go of with the binding's "
              "work undone, it calls the binding's on_lost callback.",
    .tp_dealloc = (destructor)bound_exit_dealloc,
    .tp_finalize = bound_exit_finalize,
    .tp_traverse = (traverseproc)bound_exit_traverse,
    .tp_clear = (inquiry)bound_exit_clear,
    .tp_call = bound_exit_call,
    .tp_vectorcall_offset = offsetof(BoundExit, vectorcall),
    .tp_members = bound_exit_members,
};

/* -- ExitSlot: the class's __exit__ ------------------------------------------------------- */

static PyObject *
exit_slot_get(PyObject *op, PyObject *manager, PyObject *owner)
{
    ExitSlot *slot = (ExitSlot *)op;
    if (manager == NULL || manager == Py_None)
        return Py_NewRef(slot->unbound);
    Binding *binding = PyObject_GC_New(Binding, &BindingType);
    if (binding == NULL)
        return NULL;
    binding->payload = binding->lost = binding->lost_arg = NULL;
    PyObject_GC_Track(binding);
    BoundExit *bound_exit = PyObject_GC_New(BoundExit, &BoundExitType);
    if (bound_exit == NULL) {
        Py_DECREF(binding);
        return NULL;
    }
    bound_exit->vectorcall = bound_exit_vectorcall;
    bound_exit->func = Py_NewRef(slot->bound);
    bound_exit->manager = Py_NewRef(manager);
    bound_exit->binding = binding;
    bound_exit->code = NULL;
    bound_exit->lasti = -1;
    bound_exit->frame = NULL;
    PyObject_GC_Track(bound_exit);
    /* Where: only the __enter__ that the same instruction of the same frame calls next claims it. */
    PyFrameObject *frame = PyEval_GetFrame(); /* borrowed: the frame reading the attribute */
    PyObject *made = PyThreadState_GetDict(); /* borrowed */
    if (frame != NULL && made != NULL) {
        bound_exit->code = (PyObject *)PyFrame_GetCode(frame);
        bound_exit->lasti = frame_lasti(frame); /* stack.c's: the same measure for the claim */
        bound_exit->frame = frame;
        if (PyDict_SetItem(made, made_key, (PyObject *)bound_exit) < 0) {
            Py_DECREF(bound_exit);
            return NULL;
        }
    }
    return (PyObject *)bound_exit;
}

static PyObject *
exit_slot_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *bound, *unbound;
    if ((kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0) || !PyArg_ParseTuple(args, "OO:ExitSlot", &bound, &unbound))
        return NULL;
    if (!PyCallable_Check(bound) || !PyCallable_Check(unbound)) {
        PyErr_SetString(PyExc_TypeError, "ExitSlot(bound, unbound): both must be callable");
        return NULL;
    }
    ExitSlot *self = (ExitSlot *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->bound = Py_NewRef(bound);
    self->unbound = Py_NewRef(unbound);
    return (PyObject *)self;
}

static PyObject *
exit_slot_doc(PyObject *op, void *unused)
{
    return PyObject_GetAttrString(((ExitSlot *)op)->unbound, "__doc__");
}

static int
exit_slot_traverse(ExitSlot *self, visitproc visit, void *arg)
{
    Py_VISIT(self->bound);
    Py_VISIT(self->unbound);
    return 0;
}

static int
exit_slot_clear(ExitSlot *self)
{
    Py_CLEAR(self->bound);
    Py_CLEAR(self->unbound);
    return 0;
}

static void
exit_slot_dealloc(ExitSlot *self)
{
    PyObject_GC_UnTrack(self);
    exit_slot_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef exit_slot_members[] = {
    {"bound", T_OBJECT, offsetof(ExitSlot, bound), READONLY, "bound(manager, binding, *exc): a statement's exit"},
    {"unbound", T_OBJECT, offsetof(ExitSlot, unbound), READONLY, "unbound(manager, *exc): Class.__exit__"},
    {NULL},
};

static PyGetSetDef exit_slot_getset[] = {
    {"__doc__", exit_slot_doc, NULL, "the unbound exit's docstring", NULL},
    {NULL},
};

static PyTypeObject ExitSlotType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "rngtrace._speedups.ExitSlot",
    .tp_basicsize = sizeof(ExitSlot),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = exit_slot_new,
    .tp_dealloc = (destructor)exit_slot_dealloc,
    .tp_traverse = (traverseproc)exit_slot_traverse,
    .tp_clear = (inquiry)exit_slot_clear,
    .tp_descr_get = exit_slot_get,
    .tp_members = exit_slot_members,
    .tp_getset = exit_slot_getset,
};

/* -- claim --------------------------------------------------------------------------------- */

/* claim(manager): the binding of the with statement entering manager, called from its __enter__
 * (whose caller is that statement's frame), or None. */
PyObject *
claim(PyObject *module, PyObject *manager)
{
    PyObject *made = PyThreadState_GetDict();
    if (made == NULL)
        Py_RETURN_NONE;
    PyObject *found = PyDict_GetItemWithError(made, made_key); /* borrowed */
    if (found == NULL) {
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_NONE;
    }
    BoundExit *bound_exit = (BoundExit *)Py_NewRef(found);
    if (PyDict_DelItem(made, made_key) < 0) {
        Py_DECREF(bound_exit);
        return NULL;
    }
    PyObject *result = Py_None;
    PyFrameObject *enter = PyEval_GetFrame(); /* borrowed: __enter__'s */
    if (bound_exit->manager == manager && bound_exit->code != NULL && enter != NULL) {
        PyFrameObject *statement = PyFrame_GetBack(enter);
        if (statement != NULL) {
            PyCodeObject *code = PyFrame_GetCode(statement);
            if ((void *)statement == bound_exit->frame && (PyObject *)code == bound_exit->code &&
                frame_lasti(statement) == bound_exit->lasti)
                result = (PyObject *)bound_exit->binding;
            Py_DECREF(code);
            Py_DECREF(statement);
        }
    }
    Py_CLEAR(bound_exit->code);
    Py_INCREF(result);
    Py_DECREF(bound_exit);
    return result;
}

int
blocks_ready(PyObject *module)
{
    if ((made_key = PyUnicode_InternFromString("rngtrace._blocks.made")) == NULL)
        return -1;
    if (PyType_Ready(&BindingType) < 0 || PyType_Ready(&BoundExitType) < 0 || PyType_Ready(&ExitSlotType) < 0)
        return -1;
    if (PyModule_AddObjectRef(module, "Binding", (PyObject *)&BindingType) < 0 ||
        PyModule_AddObjectRef(module, "BoundExit", (PyObject *)&BoundExitType) < 0 ||
        PyModule_AddObjectRef(module, "ExitSlot", (PyObject *)&ExitSlotType) < 0)
        return -1;
    return 0;
}
