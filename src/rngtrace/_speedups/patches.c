/* rngtrace._speedups, patches.c -- mirrors rngtrace/_patches.py: swap(), a patch set applied or
 * undone in one pass that runs no Python code (_patches' _swap_python is its twin), and the
 * builtins recorded in place (hook_builtins, hooked_builtins; builtin_twin for
 * sources/_recorder.py's twin_of), which torch.compile's identity guards need. */
#include "speedups.h"

/* -- swap: a patch set applied or undone in one pass -------------------------------- */

/* ``stamps`` (a dict the caller keeps per entry list, and clears to say "check everything") holds
 * one bytes object: each run of entries' namespace and that namespace's version after our last
 * pass, as (pointer, version) pairs of uint64 in entry order. Its key says which way that pass
 * went (1: wrappers put in, 0: originals put back), and only the opposite pass may trust it: an
 * install cut short before its swap leaves the versions an undo recorded, and an undo trusting
 * those would take off wrappers that were never put in. One object, not a
 * dict entry per namespace: a pass allocates nothing to check or record them. The entries hold
 * each namespace, so a pointer cannot name another dict meanwhile. */

/* A pass reads its entries as columns: n namespaces, then n attributes, n originals, n wrappers
 * and n types (pointers borrowed from the entries' tuples). */
enum { C_NS, C_ATTR, C_ORIG, C_WRAP, C_TYPE, C_COLS };
#define COL(cols, n, c, i) ((cols)[(Py_ssize_t)(c) * (n) + (i)])

/* 1 when every namespace in the entries still has the version ``stamps`` recorded for it
 * (nobody wrote to it since our last pass), 0 when not, -1 on error. */
static int
unchanged_since(PyObject **cols, Py_ssize_t n, PyObject *stamps, PyObject *key)
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
    PyObject *last = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *ns = COL(cols, n, C_NS, i);
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
stamp(PyObject **cols, Py_ssize_t n, PyObject *stamps, PyObject *key)
{
    if (!PyDict_CheckExact(stamps))
        return 0;
    PyDict_Clear(stamps);
#ifdef HAVE_VERSION_TAG
    Py_ssize_t runs = 0;
    PyObject *last = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *ns = COL(cols, n, C_NS, i);
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
        PyObject *ns = COL(cols, n, C_NS, i);
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

/* Whether ``list`` holds the very objects ``copy`` (a list kept by one of the caches below) holds, in
 * order: the test by which a pass reuses what it kept of a list it met before. */
static int
same_items(PyObject *list, PyObject *copy)
{
    Py_ssize_t n = PyList_GET_SIZE(list);
    return copy != NULL && n > 0 && PyList_GET_SIZE(copy) == n &&
           memcmp(((PyListObject *)list)->ob_item, ((PyListObject *)copy)->ob_item, (size_t)n * sizeof(PyObject *)) == 0;
}

/* Entry lists passed before, as columns: every trace's start and end swaps the same joined list
 * (its 231 entries with numpy, random and torch), and reading and checking each entry's tuple was
 * a third of such a pass. Kept for a list that holds the very entries it held then, compared
 * pointer by pointer: the copy kept here holds those tuples, so no other can take one's address. */
#define SWAP_LISTS 8

typedef struct {
    PyObject *copy; /* the entries (a list of our own) */
    Py_ssize_t n;
    PyObject **cols;
} SwapList;

static SwapList swap_lists[SWAP_LISTS];
static int swap_lists_next = 0;

static SwapList *
swap_list_of(PyObject *entries)
{
    for (int i = 0; i < SWAP_LISTS; i++)
        if (same_items(entries, swap_lists[i].copy))
            return &swap_lists[i];
    return NULL;
}

/* Keep ``entries`` and their columns (``cols``, which it takes over) for the next passes. Returns
 * the list it replaces, for the caller to let go once its pass is done (NULL for none). */
static PyObject *
swap_list_keep(PyObject *entries, PyObject **cols)
{
    Py_ssize_t n = PyList_GET_SIZE(entries);
    PyObject *copy = PyList_GetSlice(entries, 0, n);
    if (copy == NULL) {
        PyErr_Clear(); /* kept nothing: the next pass goes the long way */
        PyMem_Free(cols);
        return NULL;
    }
    SwapList *known = &swap_lists[swap_lists_next];
    swap_lists_next = (swap_lists_next + 1) % SWAP_LISTS;
    PyObject *old = known->copy;
    PyMem_Free(known->cols);
    known->copy = copy;
    known->n = n;
    known->cols = cols;
    return old;
}

/* The pass itself, over the columns (see ``swap``). */
static PyObject *
swap_cols(PyObject **cols, Py_ssize_t n, int forward, PyObject *inherited, PyObject *stamps)
{
    /* Trusted only after a pass the other way: the state it left is the one this pass expects. */
    int trusted = unchanged_since(cols, n, stamps, forward ? zero : one);
    if (trusted < 0)
        return NULL;
    PyObject *strays = NULL;
    if (forward && !trusted) {
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *original = COL(cols, n, C_ORIG, i);
            PyObject *now = PyDict_GetItemWithError(COL(cols, n, C_NS, i), COL(cols, n, C_ATTR, i));
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
        PyObject *ns = COL(cols, n, C_NS, i), *attr = COL(cols, n, C_ATTR, i);
        PyObject *original = COL(cols, n, C_ORIG, i), *wrapper = COL(cols, n, C_WRAP, i);
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
        PyObject *type = COL(cols, n, C_TYPE, i);
        if (PyType_Check(type) && type != last_type) {
            /* Drop the method caches that remember the old entry, as setattr would. */
            PyType_Modified((PyTypeObject *)type);
            last_type = type;
        }
    }
    if (forward) {
        if (stamp(cols, n, stamps, one) < 0)
            return NULL;
        Py_RETURN_TRUE;
    }
    if (PyList_GET_SIZE(strays) == 0 ? stamp(cols, n, stamps, zero) < 0 : (PyDict_CheckExact(stamps) && (PyDict_Clear(stamps), 0))) {
        Py_DECREF(strays);
        return NULL;
    }
    return strays;
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
static PyObject *swap_entries(PyObject *entries, int forward, PyObject *inherited, PyObject *stamps);

PyObject *
swap(PyObject *module, PyObject *args)
{
    PyObject *entries, *inherited, *stamps = Py_None;
    int forward;
    if (!PyArg_ParseTuple(args, "O!pO|O:swap", &PyList_Type, &entries, &forward, &inherited, &stamps))
        return NULL;
    return swap_entries(entries, forward, inherited, stamps);
}

static PyObject *
swap_entries(PyObject *entries, int forward, PyObject *inherited, PyObject *stamps)
{
    SwapList *known = swap_list_of(entries);
    if (known != NULL) /* its entries were checked when it was kept */
        return swap_cols(known->cols, known->n, forward, inherited, stamps);
    Py_ssize_t n = PyList_GET_SIZE(entries);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *e = PyList_GET_ITEM(entries, i);
        if (!PyTuple_CheckExact(e) || PyTuple_GET_SIZE(e) != 5 || !PyDict_CheckExact(PyTuple_GET_ITEM(e, 0)) ||
            !PyUnicode_CheckExact(PyTuple_GET_ITEM(e, 1))) {
            PyErr_SetString(PyExc_TypeError, "entries must be (dict, str, original, wrapper, type or None)");
            return NULL;
        }
    }
    PyObject **cols = PyMem_Malloc((size_t)(n > 0 ? n : 1) * C_COLS * sizeof(PyObject *));
    if (cols == NULL)
        return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n; i++)
        for (int c = 0; c < C_COLS; c++)
            COL(cols, n, c, i) = PyTuple_GET_ITEM(PyList_GET_ITEM(entries, i), c);
    PyObject *result = swap_cols(cols, n, forward, inherited, stamps);
    if (n == 0 || result == NULL) {
        PyMem_Free(cols);
        return result;
    }
    /* Letting go of the list it replaces runs no Python: the sets hold those entries too. */
    Py_XDECREF(swap_list_keep(entries, cols));
    return result;
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
 * Python code: no signal handler and no other thread sees a half-done pass.
 *
 * A bound method (``np.random.rand`` is the hidden RandomState's ``rand``, bound at import, and
 * ``numpy.random.mtrand.rand`` the same object) records in place by its function: while hooked,
 * its ``__func__`` is the wrapper that records the instance's calls, which every call of the
 * method reaches (the interpreter reads it at each call, specialised or not). Every reference
 * to it, the two modules' and any bound before the trace, is the same object, recording; its
 * ``__self__``, hash and equality stay its own. */
#define HOOK_SLOTS 512

typedef struct {
    PyObject *fn;               /* the builtin or bound method (held: its address names the slot) */
    PyObject *wrapper;          /* what a call reaches while hooked */
    PyObject *original_func;    /* a bound method's own function (held), put back when unhooked; NULL for a builtin */
    vectorcallfunc original_vc; /* its own vectorcall, put back when unhooked */
    PyMethodDef *original_ml;   /* its own definition, put back when unhooked */
    PyMethodDef def;            /* while hooked: that definition, flagged so no specialised call takes it */
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
HOOK_T64(1) HOOK_T64(2) HOOK_T64(3) HOOK_T64(4) HOOK_T64(5) HOOK_T64(6) HOOK_T64(7) HOOK_T64(8)
#define HOOK_N8(b) hook_trampoline_##b##0, hook_trampoline_##b##1, hook_trampoline_##b##2, hook_trampoline_##b##3, \
    hook_trampoline_##b##4, hook_trampoline_##b##5, hook_trampoline_##b##6, hook_trampoline_##b##7
#define HOOK_N64(b) HOOK_N8(b##0), HOOK_N8(b##1), HOOK_N8(b##2), HOOK_N8(b##3), HOOK_N8(b##4), HOOK_N8(b##5), \
    HOOK_N8(b##6), HOOK_N8(b##7)
static const vectorcallfunc hook_trampolines[HOOK_SLOTS] = {HOOK_N64(1), HOOK_N64(2), HOOK_N64(3), HOOK_N64(4),
                                                             HOOK_N64(5), HOOK_N64(6), HOOK_N64(7), HOOK_N64(8)};

/* Slot of each hooked builtin, by address: open addressing, twice the slots, so a pass over a set's
 * 175 builtins (every trace's start and end) looks each up in a probe or two, not a scan. */
#define HOOK_INDEX_BITS 10
#define HOOK_INDEX_SIZE (1 << HOOK_INDEX_BITS) /* twice HOOK_SLOTS */
static short hook_index[HOOK_INDEX_SIZE]; /* slot + 1, 0 for empty */

static size_t
hook_hash(PyObject *fn)
{
    /* Fibonacci hashing: the product's top bits, which every bit of the address moves. (Its
     * low bits, as taken before, are the address's own: builtins 64 bytes apart in a pool fell
     * into a quarter of the buckets, and a look-up probed long runs.) */
    return (size_t)(((uint64_t)(uintptr_t)fn * UINT64_C(0x9E3779B97F4A7C15)) >> (64 - HOOK_INDEX_BITS));
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
    slot->original_func = PyMethod_Check(fn) ? Py_NewRef(PyMethod_GET_FUNCTION(fn)) : NULL;
    size_t h = hook_hash(fn);
    while (hook_index[h] != 0) /* never full: at most HOOK_SLOTS of twice as many entries */
        h = (h + 1) % HOOK_INDEX_SIZE;
    hook_index[h] = (short)(slot - hook_slots + 1);
    return slot;
}

static int
is_hooked(PyObject *fn, HookSlot *slot)
{
    if (slot == NULL)
        return 0;
    if (slot->original_func != NULL) /* a bound method: nobody else can set its function */
        return PyMethod_GET_FUNCTION(fn) != slot->original_func;
    return ((PyCFunctionObject *)fn)->vectorcall == hook_trampolines[slot - hook_slots];
}

/* ``fn``'s own definition: the one it had before any hook. */
static PyMethodDef *
original_def(PyObject *fn)
{
    HookSlot *slot = hook_slot_of(fn);
    return is_hooked(fn, slot) ? slot->original_ml : ((PyCFunctionObject *)fn)->m_ml;
}

/* A bound method, or a plain builtin (no METH_METHOD: its object has a field more) of any calling convention. */
static int
hookable(PyObject *fn)
{
    if (PyMethod_Check(fn))
        return 1;
    if (!PyCFunction_CheckExact(fn))
        return 0;
    int flags = original_def(fn)->ml_flags & ~(METH_CLASS | METH_STATIC | METH_COEXIST);
    switch (flags) {
    case METH_NOARGS:
    case METH_O:
    case METH_VARARGS:
    case METH_VARARGS | METH_KEYWORDS:
    case METH_FASTCALL:
    case METH_FASTCALL | METH_KEYWORDS:
        return 1;
    default:
        return 0;
    }
}

/* builtin_twin(fn): a new builtin object with ``fn``'s own definition, which no hook reaches. */
PyObject *
builtin_twin(PyObject *module, PyObject *fn)
{
    if (!PyCFunction_CheckExact(fn) || !hookable(fn)) {
        PyErr_SetString(PyExc_TypeError, "builtin_twin(fn): fn must be a plain builtin function (no METH_METHOD)");
        return NULL;
    }
    PyCFunctionObject *f = (PyCFunctionObject *)fn;
    return PyCFunction_NewEx(original_def(fn), f->m_self, f->m_module);
}

/* Put ``old`` in ``*dropped``, for the caller to let go once every pointer is in place. */
static void
drop_later(PyObject *old, PyObject **dropped)
{
    if (*dropped == NULL)
        *dropped = PyList_New(0);
    if (*dropped != NULL && PyList_Append(*dropped, old) == 0)
        Py_DECREF(old); /* the list holds it now */
    else
        PyErr_Clear(); /* out of memory: ``old`` is kept alive, never freed early */
}

/* Put ``fn``'s hook in place (its slot made already), calling ``wrapper``. A wrapper it replaces
 * goes to ``*dropped``, let go by the caller once every pointer is in place: dropping one may run
 * Python. */
static void
hook_one(PyObject *fn, HookSlot *slot, PyObject *wrapper, PyObject **dropped)
{
    if (slot->wrapper != wrapper) {
        if (slot->wrapper != NULL)
            drop_later(slot->wrapper, dropped);
        slot->wrapper = Py_NewRef(wrapper);
    }
    if (slot->original_func != NULL) { /* a bound method: its function is the wrapper */
        PyMethodObject *m = (PyMethodObject *)fn;
        if (m->im_func != wrapper) {
            PyObject *old = m->im_func; /* its own function (the slot holds it too) or an older wrapper */
            m->im_func = Py_NewRef(wrapper);
            drop_later(old, dropped);
        }
        return;
    }
    PyCFunctionObject *f = (PyCFunctionObject *)fn;
    if (!is_hooked(fn, slot)) {
        slot->original_vc = f->vectorcall;
        slot->original_ml = f->m_ml;
        /* The interpreter's specialised calls (3.11+: CALL_BUILTIN_O, _FAST, _FAST_WITH_KEYWORDS)
         * call the C function itself, not the object's vectorcall, once they check its flags
         * are exactly METH_O, ... A copy of the definition with METH_COEXIST added (which means
         * nothing to a function object) fails that check: such a call falls back to the
         * vectorcall. Same name, function and doc: its name, signature, hash, equality and
         * pickling stay its own. */
        slot->def = *f->m_ml;
        slot->def.ml_flags |= METH_COEXIST;
    }
    f->m_ml = &slot->def;
    f->vectorcall = hook_trampolines[slot - hook_slots];
}

static void
unhook_one(PyObject *fn, HookSlot *slot)
{
    if (slot->original_func != NULL) {
        PyMethodObject *m = (PyMethodObject *)fn;
        if (m->im_func != slot->original_func) {
            /* The wrapper (the slot holds it too): letting this reference go frees nothing. */
            PyObject *old = m->im_func;
            m->im_func = Py_NewRef(slot->original_func);
            Py_DECREF(old);
        }
        return;
    }
    if (is_hooked(fn, slot)) {
        PyCFunctionObject *f = (PyCFunctionObject *)fn;
        f->vectorcall = slot->original_vc;
        f->m_ml = slot->original_ml;
    }
}

/* A list of pairs passed before, with what a pass needs of it found once: every trace's start
 * and end passes over the same lists (torch's 176 builtins), and reading each pair's tuple and
 * looking its builtin's slot up was most of such a pass. Kept for a list that holds the very
 * pairs it held then, compared pointer by pointer: the copy kept here holds those pairs, so no
 * other tuple can take one's address meanwhile. */
#define HOOK_LISTS 4

typedef struct {
    PyObject *copy;      /* the pairs (a list of our own) */
    Py_ssize_t n;
    PyObject **fns;      /* n builtins, then n wrappers (borrowed from the pairs) */
    HookSlot **slots;    /* n slots */
} HookList;

static HookList hook_lists[HOOK_LISTS];
static int hook_lists_next = 0;

static HookList *
hook_list_of(PyObject *pairs)
{
    for (int i = 0; i < HOOK_LISTS; i++)
        if (same_items(pairs, hook_lists[i].copy))
            return &hook_lists[i];
    return NULL;
}

/* Keep ``pairs`` (every builtin of it has a slot: ``slots``) for the next passes. Returns the list
 * it replaces, for the caller to let go once its pass is done (NULL for none); on failure keeps
 * nothing, and the passes go the long way. */
static PyObject *
hook_list_keep(PyObject *pairs, HookSlot **slots)
{
    Py_ssize_t n = PyList_GET_SIZE(pairs);
    PyObject *copy = PyList_GetSlice(pairs, 0, n);
    PyObject **fns = PyMem_Malloc((size_t)n * 2 * sizeof(PyObject *));
    HookSlot **kept = PyMem_Malloc((size_t)n * sizeof(HookSlot *));
    if (copy == NULL || fns == NULL || kept == NULL) {
        Py_XDECREF(copy); /* a list of tuples held elsewhere too: runs no Python */
        PyMem_Free(fns);
        PyMem_Free(kept);
        PyErr_Clear();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PyList_GET_ITEM(copy, i);
        fns[i] = PyTuple_GET_ITEM(pair, 0);
        fns[n + i] = PyTuple_GET_ITEM(pair, 1);
        kept[i] = slots[i];
    }
    HookList *h = &hook_lists[hook_lists_next];
    hook_lists_next = (hook_lists_next + 1) % HOOK_LISTS;
    PyObject *old = h->copy;
    PyMem_Free(h->fns);
    PyMem_Free(h->slots);
    h->copy = copy;
    h->n = n;
    h->fns = fns;
    h->slots = kept;
    return old;
}

/* hook_builtins(pairs, forward): with forward, make every call of each builtin of ``pairs``
 * ((builtin, wrapper), ...) reach its wrapper; else give each its own calls back. All or
 * nothing: False (nothing changed) where a builtin cannot be hooked or the slots ran out. */
static PyObject *hook_pairs(PyObject *pairs, int forward);

PyObject *
hook_builtins(PyObject *module, PyObject *args)
{
    PyObject *pairs;
    int forward;
    if (!PyArg_ParseTuple(args, "O!p:hook_builtins", &PyList_Type, &pairs, &forward))
        return NULL;
    return hook_pairs(pairs, forward);
}

static PyObject *
hook_pairs(PyObject *pairs, int forward)
{
    PyObject *dropped = NULL;
    HookList *known = hook_list_of(pairs);
    if (known != NULL) { /* every pair checked and every slot made when it was kept */
        Py_ssize_t n = known->n;
        if (forward)
            for (Py_ssize_t i = 0; i < n; i++)
                hook_one(known->fns[i], known->slots[i], known->fns[n + i], &dropped);
        else
            for (Py_ssize_t i = 0; i < n; i++)
                unhook_one(known->fns[i], known->slots[i]);
        Py_XDECREF(dropped);
        Py_RETURN_TRUE;
    }
    Py_ssize_t n = PyList_GET_SIZE(pairs);
    int fresh = 0;
    /* Each builtin's slot, looked up once. */
    HookSlot **slots = PyMem_Malloc((size_t)(n > 0 ? n : 1) * sizeof(HookSlot *));
    if (slots == NULL)
        return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PyList_GET_ITEM(pairs, i);
        if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyMem_Free(slots);
            PyErr_SetString(PyExc_TypeError, "hook_builtins: pairs must be (builtin or bound method, wrapper) tuples");
            return NULL;
        }
        PyObject *fn = PyTuple_GET_ITEM(pair, 0);
        /* A builtin with a slot was found hookable when the slot was made, and stays so. */
        HookSlot *slot = PyCFunction_CheckExact(fn) || PyMethod_Check(fn) ? hook_slot_of(fn) : NULL;
        if (slot == NULL && !hookable(fn)) {
            PyMem_Free(slots);
            Py_RETURN_FALSE;
        }
        if (forward && slot == NULL)
            fresh++;
        slots[i] = slot;
    }
    if (hook_used + fresh > HOOK_SLOTS) {
        PyMem_Free(slots);
        Py_RETURN_FALSE;
    }
    int whole = 1; /* every builtin has a slot after this pass */
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PyList_GET_ITEM(pairs, i);
        PyObject *fn = PyTuple_GET_ITEM(pair, 0);
        if (!forward) {
            if (slots[i] == NULL)
                whole = 0;
            else
                unhook_one(fn, slots[i]);
            continue;
        }
        if (slots[i] == NULL)
            slots[i] = hook_slot_of(fn); /* the same builtin twice in one list */
        if (slots[i] == NULL)
            slots[i] = hook_slot_new(fn);
        hook_one(fn, slots[i], PyTuple_GET_ITEM(pair, 1), &dropped);
    }
    PyObject *replaced = whole && n > 0 ? hook_list_keep(pairs, slots) : NULL;
    PyMem_Free(slots);
    Py_XDECREF(dropped);
    Py_XDECREF(replaced);
    Py_RETURN_TRUE;
}

/* hooked_builtins(): the builtins whose calls reach a wrapper now (none once every trace ended). */
PyObject *
hooked_builtins(PyObject *module, PyObject *unused)
{
    PyObject *out = PyList_New(0);
    for (int i = 0; out != NULL && i < hook_used; i++)
        if (is_hooked(hook_slots[i].fn, &hook_slots[i]) && PyList_Append(out, hook_slots[i].fn) < 0)
            Py_CLEAR(out);
    return out;
}

/* -- a lone trace's parts in one call ------------------------------------------------------ */

/* Each part's in-place builtins hooked or unhooked (_patches._hook): 0, or -1 with the error set. */
static int
hook_parts(PyObject *parts, int forward)
{
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(parts); i++) {
        PyObject *hooks = PyObject_GetAttr(PyList_GET_ITEM(parts, i), s_hooks);
        if (hooks == NULL)
            return -1;
        if (!PyList_Check(hooks)) {
            Py_DECREF(hooks);
            PyErr_SetString(PyExc_TypeError, "a patch set's hooks must be a list");
            return -1;
        }
        PyObject *done = PyList_GET_SIZE(hooks) > 0 ? hook_pairs(hooks, forward) : Py_NewRef(Py_None);
        Py_DECREF(hooks);
        if (done == NULL)
            return -1;
        Py_DECREF(done);
    }
    return 0;
}

/* Each part's ``applied`` set to ``value``: 0, or -1 with the error set. */
static int
mark_parts(PyObject *parts, PyObject *value)
{
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(parts); i++)
        if (PyObject_SetAttr(PyList_GET_ITEM(parts, i), s_applied, value) < 0)
            return -1;
    return 0;
}

/* swap_parts(parts, entries, forward, INHERITED, stamps, strays): _patches.Patches.swap_in (forward:
 * each set marked applied, the one swap, each set's builtins hooked; True, or False with nothing
 * changed and the marks taken back) or swap_out (backward: each set's builtins unhooked, the swap,
 * the entries someone patched over added to ``strays``, each set marked not applied; None). The same
 * steps in the same order, with no Python frame between them. */
PyObject *
swap_parts(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6 || !PyList_Check(args[0]) || !PyList_Check(args[1]) || !PyList_Check(args[5])) {
        PyErr_SetString(PyExc_TypeError, "swap_parts(parts: list, entries: list, forward, INHERITED, stamps, strays: list)");
        return NULL;
    }
    PyObject *parts = args[0], *entries = args[1], *inherited = args[3], *stamps = args[4], *strays = args[5];
    int forward = PyObject_IsTrue(args[2]);
    if (forward < 0)
        return NULL;
    if (forward) {
        if (mark_parts(parts, Py_True) < 0) /* first: a pass cut short is undone by the next call */
            return NULL;
        PyObject *swapped = swap_entries(entries, 1, inherited, stamps);
        if (swapped == NULL)
            return NULL;
        int in = PyObject_IsTrue(swapped);
        Py_DECREF(swapped);
        if (in < 0)
            return NULL;
        if (!in) { /* the swap changed nothing */
            if (mark_parts(parts, Py_False) < 0)
                return NULL;
            Py_RETURN_FALSE;
        }
        if (hook_parts(parts, 1) < 0)
            return NULL;
        Py_RETURN_TRUE;
    }
    if (hook_parts(parts, 0) < 0)
        return NULL;
    PyObject *left = swap_entries(entries, 0, inherited, stamps);
    if (left == NULL)
        return NULL;
    for (Py_ssize_t i = 0; PyList_Check(left) && i < PyList_GET_SIZE(left); i++) {
        Py_ssize_t at = PyLong_AsSsize_t(PyList_GET_ITEM(left, i));
        if (at < 0 || at >= PyList_GET_SIZE(entries)) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_IndexError, "swap_parts: a stray's index out of range");
            Py_DECREF(left);
            return NULL;
        }
        if (PyList_Append(strays, PyList_GET_ITEM(entries, at)) < 0) {
            Py_DECREF(left);
            return NULL;
        }
    }
    Py_DECREF(left);
    if (mark_parts(parts, Py_False) < 0) /* only now: an interrupted undo is completed by the next call */
        return NULL;
    Py_RETURN_NONE;
}
