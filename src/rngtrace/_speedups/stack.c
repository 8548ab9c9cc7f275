/* rngtrace._speedups, stack.c -- mirrors rngtrace/_stack.py: StackTable.capture's walk with a
 * cache of known frames (capture, and capture_walk / known_stack for the Recorder, record.c),
 * its C-side memo (walk_memo), the frames it walks (the interpreter's own on 3.11-3.13, proven
 * at import), StackTable.capture_flat's key (flat_key), StackTable.capture_site's (site_key) and
 * lineno_at. One file, longer than the others: the walk's per-frame helpers inline into its loop
 * in a build without LTO too (setup.py), and only this file compiles against CPython's internal
 * frame layout. */
#include "speedups.h"

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
    MemoCode *slots;
    size_t mask, used;
} CodeMemo;

typedef struct {
    MemoNode *nodes;
    size_t node_mask, node_used;
    CodeMemo codes; /* code pointer -> kind (``codes``) */
    CodeMemo sites; /* code pointer -> kind and call-site bits (``_site_codes``): site_key */
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

/* What ``table`` holds for ``code``, or -1 when it holds nothing. */
static long
code_memo_get(const CodeMemo *table, void *code)
{
    if (table->slots == NULL)
        return -1;
    size_t i = memo_mix((uint64_t)(uintptr_t)code) & table->mask;
    for (;;) {
        MemoCode *slot = &table->slots[i];
        if (slot->code == NULL)
            return -1;
        if (slot->code == code)
            return slot->kind;
        i = (i + 1) & table->mask;
    }
}

static void
code_memo_put(CodeMemo *table, void *code, long kind)
{
    if (code == NULL || kind < 0)
        return;
    if (table->slots == NULL || (table->used + 1) * 2 > table->mask + 1) {
        size_t size = table->slots == NULL ? 64 : (table->mask + 1) * 2;
        MemoCode *grown = PyMem_RawCalloc(size, sizeof(MemoCode));
        if (grown == NULL)
            return;
        if (table->slots != NULL) {
            for (size_t j = 0; j <= table->mask; j++) {
                MemoCode *old = &table->slots[j];
                if (old->code == NULL)
                    continue;
                size_t k = memo_mix((uint64_t)(uintptr_t)old->code) & (size - 1);
                while (grown[k].code != NULL)
                    k = (k + 1) & (size - 1);
                grown[k] = *old;
            }
            PyMem_RawFree(table->slots);
        }
        table->slots = grown;
        table->mask = size - 1;
    }
    size_t i = memo_mix((uint64_t)(uintptr_t)code) & table->mask;
    for (;;) {
        MemoCode *slot = &table->slots[i];
        if (slot->code == NULL) {
            *slot = (MemoCode){code, kind};
            table->used++;
            return;
        }
        if (slot->code == code)
            return;
        i = (i + 1) & table->mask;
    }
}

/* The kind of ``code``, or -1 when the memo does not hold it. */
static long
memo_kind_get(WalkMemo *memo, void *code)
{
    return memo == NULL ? -1 : code_memo_get(&memo->codes, code);
}

static void
memo_kind_put(WalkMemo *memo, void *code, long kind)
{
    if (memo != NULL)
        code_memo_put(&memo->codes, code, kind);
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
    PyMem_RawFree(memo->codes.slots);
    PyMem_RawFree(memo->sites.slots);
    PyMem_RawFree(memo);
}

/* walk_memo(): a new, empty memo for one StackTable's walk state. */
PyObject *
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
#ifdef INTERNAL_FRAMES /* 3.11-3.13: speedups.h */
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
int internal_frames;
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
long
frame_lasti(PyFrameObject *frame)
{
#if PY_VERSION_HEX >= 0x030B0000
    return PyFrame_GetLasti(frame);
#else
    return frame->f_lasti < 0 ? -1 : (long)frame->f_lasti * (long)sizeof(_Py_CODEUNIT);
#endif
}

/* The walk's frame's f_lasti, as frame_lasti measures it. */
static long
walk_lasti(const WalkFrame *w)
{
#ifdef INTERNAL_FRAMES
    if (w->frame != NULL)
        return internal_lasti(w->frame);
#endif
    return frame_lasti(w->object);
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
int
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
known_hit(PyObject *nodes, PyObject *hit, long lasti, long kept, long depth, PyObject **node, int *unexpected)
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
            if (kept + length < depth)
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
capture_first_step(PyFrameObject *frame, long depth, PyObject *known, PyObject *ids, PyObject *nodes, WalkMemo *memo,
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
        if (length + 1 < depth)
            goto out;
    }
    code = walk_code(&start);
    long start_lasti = walk_lasti(&start);
    long memo_hit = memo_node_get(memo, hit_node, code, start_lasti);
    if (memo_hit >= 0) {
        if ((*node = PyLong_FromLong(memo_hit)) == NULL)
            goto error;
        done = 1;
        goto out;
    }
    code_id = PyLong_FromVoidPtr(code);
    lasti = PyLong_FromLong(start_lasti);
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
            memo_node_put(memo, hit_node, code, start_lasti, value);
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
PyObject *
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
PyObject *
capture_walk(PyObject *frame_arg, long depth, PyObject *known, int pin, PyObject *state, PyObject *watch)
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
PyObject *
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
    return capture_walk(args[0], depth, args[2], pin, args[4], args[5]);
}

/* flat_key(frame, depth): StackTable.capture_flat's key, where no cache of live frames can be
 * kept (frame mode WALK): the code pointer and f_lasti of up to ``depth`` frames from ``frame``
 * outward, packed as uint64 pairs in one bytes object -- one allocation instead of a tuple of
 * 2 * depth ints. Only ever compared with keys made here. */
PyObject *
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

/* site_key(frame, depth, raw_limit, state): StackTable.site_frames' walk, its frames packed as
 * flat_key packs them: the code pointer and f_lasti of the frames a call-site table reads (through
 * the first user frame, and an import's two; every frame where none is the user's). ``state`` is
 * the table's (site codes, walk memo): a code's kind and call-site bits are read from the memo,
 * else from the dict (then memoised); NotImplemented where a code is in neither (the Python walk
 * notes it, then asks again). Past max_events a draw is counted under this form: no node is made
 * for its whole stack. */
#define SITE_USER 4
#define SITE_MODULE 8
#define SITE_IMPORTING 16

/* The kind and call-site bits of ``code``, -1 where neither the memo nor ``codes`` has them. */
static long
site_flags(WalkMemo *memo, PyObject *codes, PyCodeObject *code)
{
    long flags = code_memo_get(&memo->sites, code);
    if (flags >= 0)
        return flags;
    PyObject *id = PyLong_FromVoidPtr(code);
    PyObject *value = id != NULL ? PyDict_GetItemWithError(codes, id) : NULL; /* borrowed */
    Py_XDECREF(id);
    flags = value != NULL && PyLong_CheckExact(value) ? PyLong_AsLong(value) : -1;
    if (flags < 0) {
        PyErr_Clear();
        return -1;
    }
    code_memo_put(&memo->sites, code, flags);
    return flags;
}

/* The call-site form's key of ``frame`` (None: no frame) under ``state``, a table's (site codes,
 * walk memo, ...): new bytes, NotImplemented where a code is not noted yet, NULL on error. */
PyObject *
site_key_of(PyObject *frame, long depth, long limit, PyObject *state)
{
    if (!PyTuple_CheckExact(state) || PyTuple_GET_SIZE(state) < 2 || !PyDict_CheckExact(PyTuple_GET_ITEM(state, 0)))
        Py_RETURN_NOTIMPLEMENTED;
    PyObject *codes = PyTuple_GET_ITEM(state, 0), *capsule = PyTuple_GET_ITEM(state, 1);
    WalkMemo *memo = PyCapsule_CheckExact(capsule) ? PyCapsule_GetPointer(capsule, MEMO_NAME) : NULL;
    if (memo == NULL) {
        PyErr_Clear();
        Py_RETURN_NOTIMPLEMENTED;
    }
    if (depth < 0)
        depth = 0;
    uint64_t local[2 * 32], *pairs = local;
    if (depth > 32 && (pairs = PyMem_Malloc((size_t)depth * 2 * sizeof(uint64_t))) == NULL)
        return PyErr_NoMemory();
    long kept = 0, user = -1, imported = -1, walked = 0, previous = 0;
    int unknown = 0;
    if (frame != Py_None && depth > 0) {
        WalkFrame w, next;
        walk_start((PyFrameObject *)frame, &w);
        for (;;) {
            int stop = limit > 0 && ++walked > limit;
            if (!stop) {
                PyCodeObject *code = walk_code(&w);
                long flags = site_flags(memo, codes, code);
                unknown = flags < 0;
                stop = unknown || (flags & 3) == KIND_END;
                if (!stop && (flags & 3) == KIND_KEEP) {
                    if (user < 0 && (flags & SITE_USER))
                        user = kept;
                    if (imported < 0 && kept > 0 && (flags & SITE_IMPORTING) && (previous & SITE_MODULE))
                        imported = kept - 1;
                    pairs[2 * kept] = (uint64_t)(uintptr_t)code;
                    pairs[2 * kept + 1] = (uint64_t)walk_lasti(&w);
                    previous = flags;
                    kept++;
                }
                Py_DECREF(code); /* the frame holds it */
            }
            int more = !stop && kept < depth && walk_back(&w, &next);
            walk_release(&w);
            if (!more)
                break;
            w = next;
        }
    }
    PyObject *key;
    if (unknown) {
        key = Py_NewRef(Py_NotImplemented);
    } else {
        long n = user < 0 ? kept : (user + 1 > imported + 2 ? user + 1 : imported + 2);
        key = PyBytes_FromStringAndSize((const char *)pairs, n * (Py_ssize_t)(2 * sizeof(uint64_t)));
    }
    if (pairs != local)
        PyMem_Free(pairs);
    return key;
}

/* site_key(frame, depth, raw_limit, state): site_key_of() for StackTable.capture_site. */
PyObject *
site_key(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4 || (args[0] != Py_None && !PyFrame_Check(args[0])) || !PyLong_CheckExact(args[1]) ||
        !PyLong_CheckExact(args[2])) {
        PyErr_SetString(PyExc_TypeError, "site_key(frame or None, depth, raw_limit, state)");
        return NULL;
    }
    long depth = PyLong_AsLong(args[1]), limit = PyLong_AsLong(args[2]);
    if ((depth == -1 || limit == -1) && PyErr_Occurred())
        return NULL;
    return site_key_of(args[0], depth, limit, args[3]);
}

/* lineno_at(code, lasti): the line of the instruction at byte offset ``lasti``, or None where it has
 * no line of its own or lies outside the code (the Python lineno_at then decides). A child's spool
 * and every rendered log resolve each stack's lines: co_lines() walked in Python cost tens of
 * microseconds a frame in a large function. */
PyObject *
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
