/* rngtrace._speedups, lone.c -- mirrors rngtrace/_lone.py's install_alone and uninstall_alone: a lone
 * trace's install repeated, and taken off, from its Plan. The same questions and the same steps in
 * the same order, each step the same Python method or attribute but the swap, which is the C that
 * Patches.swap_in and swap_out call themselves (swap_parts); the Python functions stay the
 * reference, and run without the accelerator. Only the checks and the loops between the steps
 * run here, with no Python frame. _lone calls them on 3.10, where every trace's start and end then
 * comes through one of them; on 3.11+ the specializing interpreter runs the Python ones faster
 * than these generic attribute lookups and calls do.
 *
 * An interruption (Ctrl-C) can land only inside a step that runs Python code; it propagates from
 * that step, as it would from the Python function at the same line, and the hub finishes the job
 * (the order of the steps is what makes that possible: see _lone.py's comments). */
#include "speedups.h"

/* The attribute and method names read here, interned once. */
enum {
    N_PLAN, N_REC, N_PATCHES, N_STREAMS, N_VERSION, N_SOURCES, N_CATCHALL, N_STRAYS, N_IMPORTS, N_HOOKS,
    N_MODULES, N_WATCHES, N_PARTS, N_APPLIED, N_START, N_START_WATCH, N_RECORDING_CHILD, N_ENTRIES, N_STAMPS,
    N_NAMES, N_PREPARE, N_RESEEDED, N_HELD_IMPORT, N_HOLD_START_WATCH, N_PUT_CATCHALL,
    N_TAKE_CATCHALL, N_SET_PROCESS_HOOKS, N_START_SWAPPABLE, N_START_WATCH_FREE, N_START_WATCH_HELD,
    N_START_SWAPPED, N_PUBLISH, N_FORGET_STREAMS, N_LET_GO, N_LET_GO_START_WATCH, N_CLEAR, N_GET, N_COUNT
};
static const char *const name_text[N_COUNT] = {
    "plan", "rec", "patches", "streams", "version", "sources", "catchall", "strays", "imports", "hooks",
    "modules", "watches", "parts", "applied", "start", "start_watch", "recording_child", "entries", "stamps",
    "names", "prepare", "reseeded", "held_import", "hold_start_watch", "put_catchall",
    "take_catchall", "set_process_hooks", "start_swappable", "start_watch_free", "start_watch_held",
    "start_swapped", "publish", "forget_streams", "let_go", "let_go_start_watch", "clear", "get",
};
static PyObject *names[N_COUNT];

static int
intern_names(void)
{
    if (names[0] != NULL)
        return 0;
    for (int i = 0; i < N_COUNT; i++)
        if ((names[i] = PyUnicode_InternFromString(name_text[i])) == NULL)
            return -1;
    return 0;
}

/* obj.name(args...): a new reference, or NULL with the error set. */
static PyObject *
call_method(PyObject *obj, int name, PyObject *a, PyObject *b)
{
    PyObject *args[3] = {obj, a, b};
    size_t n = b != NULL ? 3 : a != NULL ? 2 : 1;
    return PyObject_VectorcallMethod(names[name], args, n | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

/* obj.name(args...) for its effect alone: 0, or -1 with the error set. */
static int
call_for_effect(PyObject *obj, int name, PyObject *a, PyObject *b)
{
    PyObject *r = call_method(obj, name, a, b);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

/* Whether obj.name(args...) is true: 1 or 0, -1 with the error set. */
static int
call_truth(PyObject *obj, int name, PyObject *a, PyObject *b)
{
    PyObject *r = call_method(obj, name, a, b);
    if (r == NULL)
        return -1;
    int truth = PyObject_IsTrue(r);
    Py_DECREF(r);
    return truth;
}

/* Whether obj.name is true (``truthy``) or is None (``none``): 1 or 0, -1 with the error set. */
static int
attr_truth(PyObject *obj, int name)
{
    PyObject *value = PyObject_GetAttr(obj, names[name]);
    if (value == NULL)
        return -1;
    int truth = PyObject_IsTrue(value);
    Py_DECREF(value);
    return truth;
}

static int
attr_is_none(PyObject *obj, int name)
{
    PyObject *value = PyObject_GetAttr(obj, names[name]);
    if (value == NULL)
        return -1;
    int none = value == Py_None;
    Py_DECREF(value);
    return none;
}

/* sys.modules.get(module) is None: 1 or 0, -1 with the error set. */
static int
not_imported(PyObject *modules, PyObject *module)
{
    if (PyDict_Check(modules)) {
        PyObject *found = PyDict_GetItemWithError(modules, module); /* borrowed */
        if (found == NULL && PyErr_Occurred())
            return -1;
        return found == NULL || found == Py_None;
    }
    PyObject *found = PyObject_CallMethodOneArg(modules, names[N_GET], module);
    if (found == NULL)
        return -1;
    int none = found == Py_None;
    Py_DECREF(found);
    return none;
}

/* The items of a tuple of 2-tuples, checked: 0, or -1 with a TypeError set (what unpacking would raise). */
static int
pairs_of(PyObject *seq)
{
    if (!PyTuple_Check(seq) && !PyList_Check(seq)) {
        PyErr_SetString(PyExc_TypeError, "a lone plan's pairs must be a tuple or list");
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
            PyErr_SetString(PyExc_TypeError, "a lone plan's pairs must be (name, value) tuples");
            return -1;
        }
    }
    return 0;
}

/* Append (a, b) to ``list``: 0, or -1 with the error set. */
static int
append_pair(PyObject *list, PyObject *a, PyObject *b)
{
    PyObject *pair = PyTuple_Pack(2, a, b);
    if (pair == NULL)
        return -1;
    int appended = PyList_Append(list, pair);
    Py_DECREF(pair);
    return appended;
}

#define GET(var, obj, name)                                                                                       \
    do {                                                                                                          \
        if ((var = PyObject_GetAttr((obj), names[name])) == NULL)                                                 \
            goto fail;                                                                                            \
    } while (0)
#define NO(cond)                                                                                                  \
    do {                                                                                                          \
        int _c = (cond);                                                                                          \
        if (_c < 0)                                                                                               \
            goto fail;                                                                                            \
        if (_c)                                                                                                   \
            goto no;                                                                                              \
    } while (0)
#define NO_UNLESS(cond)                                                                                           \
    do {                                                                                                          \
        int _c = (cond);                                                                                          \
        if (_c < 0)                                                                                               \
            goto fail;                                                                                            \
        if (!_c)                                                                                                  \
            goto no;                                                                                              \
    } while (0)

/* patches.swap_in(parts, entries, stamps) or swap_out: Patches' steps in one C call (swap_parts, which
 * they call themselves where the accelerator is built), with no Python frame; a new reference. */
static PyObject *
swap_parts_of(PyObject *patches, PyObject *parts, PyObject *plan, PyObject *inherited, int forward)
{
    PyObject *entries = PyObject_GetAttr(plan, names[N_ENTRIES]);
    PyObject *stamps = entries == NULL ? NULL : PyObject_GetAttr(plan, names[N_STAMPS]);
    PyObject *strays = stamps == NULL ? NULL : PyObject_GetAttr(patches, names[N_STRAYS]);
    PyObject *result = NULL;
    if (strays != NULL) {
        PyObject *argv[6] = {parts, entries, forward ? Py_True : Py_False, inherited, stamps, strays};
        result = swap_parts(NULL, argv, 6);
    }
    Py_XDECREF(entries);
    Py_XDECREF(stamps);
    Py_XDECREF(strays);
    return result;
}

/* lone_install(register_many, process_module, INHERITED, hub, session): _lone.install_alone(hub, session). */
PyObject *
lone_install(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "lone_install(register_many, process_module, INHERITED, hub, session)");
        return NULL;
    }
    if (intern_names() < 0)
        return NULL;
    PyObject *register_many = args[0], *process_module = args[1], *inherited = args[2], *hub = args[3],
             *session = args[4];
    PyObject *result = NULL, *plan = NULL, *rec = NULL, *patches = NULL, *a = NULL, *b = NULL, *modules = NULL,
             *watches = NULL, *parts = NULL, *start = NULL, *start_watch = NULL, *hooks = NULL, *installed = NULL,
             *sources = NULL, *pairs = NULL;
    GET(plan, hub, N_PLAN);
    GET(rec, hub, N_REC);
    GET(patches, hub, N_PATCHES);
    if (plan == Py_None)
        goto no;
    GET(a, plan, N_STREAMS);
    GET(b, session, N_STREAMS);
    NO(PyObject_RichCompareBool(a, b, Py_NE));
    Py_CLEAR(a);
    Py_CLEAR(b);
    GET(a, plan, N_VERSION);
    GET(b, patches, N_VERSION);
    NO(PyObject_RichCompareBool(a, b, Py_NE));
    Py_CLEAR(a);
    Py_CLEAR(b);
    NO(attr_truth(rec, N_SOURCES));
    NO_UNLESS(attr_is_none(hub, N_CATCHALL));
    NO(attr_truth(patches, N_STRAYS));
    GET(a, hub, N_IMPORTS);
    NO(attr_truth(a, N_HOOKS));
    Py_CLEAR(a);
    if ((modules = PySys_GetObject("modules")) == NULL) { /* borrowed */
        PyErr_SetString(PyExc_RuntimeError, "lone_install: no sys.modules");
        goto fail;
    }
    Py_INCREF(modules);
    GET(a, plan, N_MODULES);
    if (!PyTuple_Check(a)) {
        PyErr_SetString(PyExc_TypeError, "a lone plan's modules must be a tuple");
        goto fail;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(a); i++)
        NO(not_imported(modules, PyTuple_GET_ITEM(a, i)));
    Py_CLEAR(a);
    GET(watches, plan, N_WATCHES);
    if (pairs_of(watches) < 0)
        goto fail;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(watches); i++) {
        /* Imported since: its stream is installed the general way. */
        NO_UNLESS(not_imported(modules, PyTuple_GET_ITEM(PySequence_Fast_GET_ITEM(watches, i), 1)));
    }
    GET(parts, plan, N_PARTS);
    if (!PyList_Check(parts)) {
        PyErr_SetString(PyExc_TypeError, "a lone plan's parts must be a list");
        goto fail;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(parts); i++)
        NO(attr_truth(PyList_GET_ITEM(parts, i), N_APPLIED));
    GET(start, plan, N_START);
    GET(start_watch, plan, N_START_WATCH);
    GET(hooks, hub, N_HOOKS);
    if (start != Py_None) {
        NO_UNLESS(attr_is_none(hub, N_RECORDING_CHILD));
        NO_UNLESS(call_truth(hooks, N_START_SWAPPABLE, start, NULL));
    }
    if (start_watch != Py_None) {
        NO_UNLESS(attr_is_none(hub, N_RECORDING_CHILD));
        /* Multiprocessing imported since: BaseProcess.start is hooked the general way. */
        NO_UNLESS(not_imported(modules, process_module));
        NO_UNLESS(call_truth(hooks, N_START_WATCH_FREE, NULL, NULL));
    }
    /* The questions answered: the steps, in _lone.install_alone's order. */
    if (start != Py_None && call_for_effect(hooks, N_START_SWAPPED, Py_True, NULL) < 0)
        goto fail;
    GET(installed, rec, N_SOURCES);
    GET(sources, plan, N_SOURCES);
    if (pairs_of(sources) < 0)
        goto fail;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(sources); i++) {
        PyObject *pair = PySequence_Fast_GET_ITEM(sources, i);
        if (call_for_effect(PyTuple_GET_ITEM(pair, 1), N_PREPARE, NULL, NULL) < 0 ||
            PyObject_SetItem(installed, PyTuple_GET_ITEM(pair, 0), PyTuple_GET_ITEM(pair, 1)) < 0)
            goto fail;
    }
    PyObject *swapped = swap_parts_of(patches, parts, plan, inherited, 1); /* patches.swap_in(...) */
    if (swapped == NULL)
        goto fail;
    int in = PyObject_IsTrue(swapped);
    Py_DECREF(swapped);
    if (in < 0)
        goto fail;
    if (!in) { /* someone patched over a set: the general way finds out which */
        if (call_for_effect(installed, N_CLEAR, NULL, NULL) < 0)
            goto fail;
        goto no;
    }
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(sources); i++)
        if (call_for_effect(rec, N_RESEEDED, PyTuple_GET_ITEM(PySequence_Fast_GET_ITEM(sources, i), 0), NULL) < 0)
            goto fail;
    Py_ssize_t n_watches = PySequence_Fast_GET_SIZE(watches);
    if (n_watches || start_watch != Py_None) {
        /* Each noted first (an undo cut short finds what to take out), then all registered in one pass. */
        if ((pairs = PyList_New(0)) == NULL)
            goto fail;
        for (Py_ssize_t i = 0; i < n_watches; i++) {
            PyObject *watch = PySequence_Fast_GET_ITEM(watches, i);
            PyObject *module_name = PyTuple_GET_ITEM(watch, 1);
            PyObject *hook = call_method(hub, N_HELD_IMPORT, PyTuple_GET_ITEM(watch, 0), module_name);
            if (hook == NULL)
                goto fail;
            int appended = append_pair(pairs, hook, module_name);
            Py_DECREF(hook);
            if (appended < 0)
                goto fail;
        }
        if (start_watch != Py_None) {
            if (call_for_effect(hooks, N_HOLD_START_WATCH, start_watch, NULL) < 0)
                goto fail;
            if (append_pair(pairs, start_watch, process_module) < 0)
                goto fail;
        }
        PyObject *r = PyObject_CallOneArg(register_many, pairs);
        if (r == NULL)
            goto fail;
        Py_DECREF(r);
    }
    if (call_for_effect(hub, N_PUT_CATCHALL, NULL, NULL) < 0)
        goto fail;
    if (start == Py_None && start_watch == Py_None) {
        PyObject *only = PyTuple_Pack(1, session);
        if (only == NULL)
            goto fail;
        int done = call_for_effect(hub, N_SET_PROCESS_HOOKS, only, NULL);
        Py_DECREF(only);
        if (done < 0)
            goto fail;
    }
    result = Py_NewRef(Py_True);
    goto fail;
no:
    result = Py_NewRef(Py_False);
fail:
    Py_XDECREF(plan);
    Py_XDECREF(rec);
    Py_XDECREF(patches);
    Py_XDECREF(a);
    Py_XDECREF(b);
    Py_XDECREF(modules);
    Py_XDECREF(watches);
    Py_XDECREF(parts);
    Py_XDECREF(start);
    Py_XDECREF(start_watch);
    Py_XDECREF(hooks);
    Py_XDECREF(installed);
    Py_XDECREF(sources);
    Py_XDECREF(pairs);
    return result;
}

/* lone_uninstall(unregister_many, process_module, INHERITED, hub): _lone.uninstall_alone(hub). */
PyObject *
lone_uninstall(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "lone_uninstall(unregister_many, process_module, INHERITED, hub)");
        return NULL;
    }
    if (intern_names() < 0)
        return NULL;
    PyObject *unregister_many = args[0], *process_module = args[1], *inherited = args[2], *hub = args[3];
    PyObject *result = NULL, *plan = NULL, *rec = NULL, *patches = NULL, *a = NULL, *b = NULL, *installed = NULL,
             *sources = NULL, *imports = NULL, *watching = NULL, *watches = NULL, *parts = NULL, *start = NULL,
             *start_watch = NULL, *hooks = NULL, *pairs = NULL;
    GET(plan, hub, N_PLAN);
    GET(rec, hub, N_REC);
    GET(patches, hub, N_PATCHES);
    GET(installed, rec, N_SOURCES);
    if (plan == Py_None)
        goto no;
    GET(a, plan, N_VERSION);
    GET(b, patches, N_VERSION);
    NO(PyObject_RichCompareBool(a, b, Py_NE));
    Py_CLEAR(a);
    Py_CLEAR(b);
    GET(sources, plan, N_SOURCES);
    if (pairs_of(sources) < 0)
        goto fail;
    Py_ssize_t n_installed = PyObject_Size(installed);
    if (n_installed < 0)
        goto fail;
    if (n_installed != PySequence_Fast_GET_SIZE(sources))
        goto no;
    GET(imports, hub, N_IMPORTS);
    GET(watching, imports, N_HOOKS);
    GET(watches, plan, N_WATCHES);
    if (pairs_of(watches) < 0)
        goto fail;
    Py_ssize_t n_watching = PyObject_Size(watching), n_watches = PySequence_Fast_GET_SIZE(watches);
    if (n_watching < 0)
        goto fail;
    if (n_watching != n_watches)
        goto no;
    for (Py_ssize_t i = 0; i < n_watches; i++) {
        NO_UNLESS(PySequence_Contains(watching, PyTuple_GET_ITEM(PySequence_Fast_GET_ITEM(watches, i), 0)));
    }
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(sources); i++) {
        PyObject *pair = PySequence_Fast_GET_ITEM(sources, i);
        PyObject *found = call_method(installed, N_GET, PyTuple_GET_ITEM(pair, 0), NULL);
        if (found == NULL)
            goto fail;
        int other = found != PyTuple_GET_ITEM(pair, 1);
        Py_DECREF(found);
        if (other)
            goto no;
    }
    GET(parts, plan, N_PARTS);
    if (!PyList_Check(parts)) {
        PyErr_SetString(PyExc_TypeError, "a lone plan's parts must be a list");
        goto fail;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(parts); i++)
        NO_UNLESS(attr_truth(PyList_GET_ITEM(parts, i), N_APPLIED));
    GET(start, plan, N_START);
    GET(start_watch, plan, N_START_WATCH);
    GET(hooks, hub, N_HOOKS);
    int none;
    if (start != Py_None) {
        /* A child's hooks went on beside it (a forked child): ``set_process_hooks`` takes them off. */
        NO_UNLESS(attr_is_none(hub, N_RECORDING_CHILD));
        NO_UNLESS(call_truth(hooks, N_START_SWAPPABLE, start, Py_True));
    }
    if (start_watch != Py_None) {
        /* Multiprocessing imported meanwhile, BaseProcess.start hooked: the general way takes it off. */
        NO_UNLESS(attr_is_none(hub, N_RECORDING_CHILD));
        NO_UNLESS(call_truth(hooks, N_START_WATCH_HELD, start_watch, NULL));
    }
    /* The questions answered: the steps, in _lone.uninstall_alone's order. */
    PyObject *empty = PyTuple_New(0);
    if (empty == NULL)
        goto fail;
    int published = call_for_effect(rec, N_PUBLISH, empty, NULL); /* first: wrappers stop recording at once */
    Py_DECREF(empty);
    if (published < 0)
        goto fail;
    PyObject *r = swap_parts_of(patches, parts, plan, inherited, 0); /* patches.swap_out(...) */
    if (r == NULL)
        goto fail;
    Py_DECREF(r);
    GET(a, plan, N_NAMES);
    if (call_for_effect(hub, N_FORGET_STREAMS, a, NULL) < 0)
        goto fail;
    Py_CLEAR(a);
    if (n_watches || start_watch != Py_None) {
        if ((pairs = PyList_New(0)) == NULL)
            goto fail;
        for (Py_ssize_t i = 0; i < n_watches; i++) {
            PyObject *watch = PySequence_Fast_GET_ITEM(watches, i);
            PyObject *entry = PyObject_GetItem(watching, PyTuple_GET_ITEM(watch, 0)); /* (module, hook) */
            if (entry == NULL)
                goto fail;
            PyObject *hook = PySequence_GetItem(entry, 1);
            Py_DECREF(entry);
            if (hook == NULL)
                goto fail;
            int appended = append_pair(pairs, hook, PyTuple_GET_ITEM(watch, 1));
            Py_DECREF(hook);
            if (appended < 0)
                goto fail;
        }
        if (start_watch != Py_None) {
            if (append_pair(pairs, start_watch, process_module) < 0)
                goto fail;
        }
        if ((r = PyObject_CallOneArg(unregister_many, pairs)) == NULL)
            goto fail;
        Py_DECREF(r);
        for (Py_ssize_t i = 0; i < n_watches; i++) /* only now: an undo cut short before this is done again */
            if (call_for_effect(imports, N_LET_GO, PyTuple_GET_ITEM(PySequence_Fast_GET_ITEM(watches, i), 0), NULL) <
                0)
                goto fail;
    }
    none = attr_is_none(hub, N_CATCHALL);
    if (none < 0 || (!none && call_for_effect(hub, N_TAKE_CATCHALL, NULL, NULL) < 0))
        goto fail;
    if (start_watch != Py_None) {
        if (call_for_effect(hooks, N_LET_GO_START_WATCH, NULL, NULL) < 0)
            goto fail;
    }
    else if (start == Py_None) {
        PyObject *nothing = PyTuple_New(0);
        if (nothing == NULL)
            goto fail;
        int done = call_for_effect(hub, N_SET_PROCESS_HOOKS, nothing, NULL);
        Py_DECREF(nothing);
        if (done < 0)
            goto fail;
    }
    else if (call_for_effect(hooks, N_START_SWAPPED, Py_False, NULL) < 0) /* taken off in the swap above */
        goto fail;
    result = Py_NewRef(Py_True);
    goto fail;
no:
    result = Py_NewRef(Py_False);
fail:
    Py_XDECREF(plan);
    Py_XDECREF(rec);
    Py_XDECREF(patches);
    Py_XDECREF(a);
    Py_XDECREF(b);
    Py_XDECREF(installed);
    Py_XDECREF(sources);
    Py_XDECREF(imports);
    Py_XDECREF(watching);
    Py_XDECREF(watches);
    Py_XDECREF(parts);
    Py_XDECREF(start);
    Py_XDECREF(start_watch);
    Py_XDECREF(hooks);
    Py_XDECREF(pairs);
    return result;
}
