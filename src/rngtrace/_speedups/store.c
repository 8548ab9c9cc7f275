/* rngtrace._speedups, store.c -- mirrors rngtrace/_store.py's RawStore.add past max_events, for the
 * Recorder's draw (record.c): the event is counted in the trace's overflow under the call-site form of
 * its stack (_stack.py's StackTable.capture_site, whose key stack.c's site_key_of makes), as
 * Recording.record() counts it -- with no raw event made and no Python call, once the form and its
 * overflow row exist. */
#include "speedups.h"

/* The call-site form's id of a draw's stack, by the drawing frame's caller: a loop drawing past
 * max_events (networkx's generators, a training loop's later epochs) walks its whole stack in C at
 * every draw otherwise, about 20 ns a frame. A running frame that is not a generator's or a
 * coroutine's keeps the frames outside it, each at the same f_lasti, until it returns: so while the
 * caller is the same frame at the same f_lasti, the drawing frame's code and f_lasti decide the
 * stack (the drawing frame itself may be new at each draw: a helper, a lambda, a generator the loop
 * resumes). Each entry holds the caller's frame, so its address names no other frame while it is
 * here, and its code. A finished frame (a frame object is GC-tracked once it outlives its run) is
 * let go within a few misses and by the Sweeper's pass; every entry when a trace ends, when the
 * frame mode changes and in a forked child (forget_sites). */
#define SITE_MEMO 32
#define SITE_SUSPENDABLE (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR)

typedef struct {
    PyObject *parent; /* held: the drawing frame's caller */
    PyObject *code;   /* held: the drawing frame's code */
    PyObject *state;  /* held: the table's site_state the id was found under */
    PyObject *sid;    /* held */
    long parent_lasti, lasti, depth;
    int flat;
    /* The overflow row the last draw here was counted in, and what its key was made of (all held;
     * NULL until one is found): a trace's row for a key stays the same list while it records. */
    PyObject *trace, *stream, *kind, *api, *row;
} SiteEntry;

#define SITE_HELD 9 /* the references an entry holds, its parent frame first */

static SiteEntry site_memo[SITE_MEMO];
static int site_cursor; /* the next entry a miss looks at (see site_count) */
#define SITE_SWEEP 2

static SiteEntry *
site_slot(PyFrameObject *parent, PyCodeObject *code, long lasti)
{
    uint64_t h = ((uint64_t)(uintptr_t)parent ^ ((uint64_t)(uintptr_t)code << 7) ^ (uint64_t)lasti) *
                 UINT64_C(0x9E3779B97F4A7C15);
    return &site_memo[h >> 59]; /* SITE_MEMO == 32 */
}

/* Take ``e``'s references into ``out`` (SITE_HELD; the parent frame first), leaving it empty. */
static void
site_take(SiteEntry *e, PyObject **out)
{
    PyObject *held[SITE_HELD] = {e->parent, e->code, e->state, e->sid, e->trace, e->stream, e->kind, e->api, e->row};
    memcpy(out, held, sizeof(held));
    e->parent = e->code = e->state = e->sid = e->trace = e->stream = e->kind = e->api = e->row = NULL;
}

/* Forget ``e``'s overflow row (the references into ``out``, SITE_HELD - 4 of them). */
static void
site_take_row(SiteEntry *e, PyObject **out)
{
    PyObject *held[SITE_HELD - 4] = {e->trace, e->stream, e->kind, e->api, e->row};
    memcpy(out, held, sizeof(held));
    e->trace = e->stream = e->kind = e->api = e->row = NULL;
}

/* Empty ``e``: its frame into ``gone`` (the caller drops it once the stream's lock is given back:
 * its locals may run a finalizer), the rest dropped now (a code, the table's state, an id: held
 * elsewhere, or freed running no code). */
static void
site_evict(SiteEntry *e, PyObject **gone, int *ngone)
{
    PyObject *held[SITE_HELD];
    site_take(e, held);
    gone[(*ngone)++] = held[0];
    for (int i = 1; i < SITE_HELD; i++)
        Py_XDECREF(held[i]);
}

/* Whether ``e`` is the entry of a draw by ``code`` at ``lasti`` under ``parent`` at ``parent_lasti``,
 * under the table's ``state``, walked to ``depth`` (``flat``: as capture_flat walks). */
static int
site_is(const SiteEntry *e, PyFrameObject *parent, long parent_lasti, PyCodeObject *code, long lasti, PyObject *state,
        long depth, int flat)
{
    return e->parent == (PyObject *)parent && e->parent_lasti == parent_lasti && e->code == (PyObject *)code &&
           e->lasti == lasti && e->state == state && e->depth == depth && e->flat == flat;
}

static int
site_finished(SiteEntry *e)
{
    return e->parent != NULL && PyObject_GC_IsTracked(e->parent);
}

/* forget_sites(finished_only): let go of the memo's entries (every one, or only those whose
 * frame has finished). How many were let go. */
PyObject *
forget_sites(PyObject *module, PyObject *finished_only)
{
    int only = PyObject_IsTrue(finished_only);
    if (only < 0)
        return NULL;
    PyObject *held[SITE_HELD * SITE_MEMO];
    int n = 0;
    for (int i = 0; i < SITE_MEMO; i++)
        if (site_memo[i].parent != NULL && (!only || site_finished(&site_memo[i]))) {
            site_take(&site_memo[i], held + n);
            n += SITE_HELD;
        }
    /* Every entry is empty before anything goes: a finalizer a frame's locals run finds a whole memo. */
    for (int i = 0; i < n; i++)
        Py_XDECREF(held[i]);
    return PyLong_FromLong(n / SITE_HELD);
}

/* Past max_events, Recording.record()'s draw and RawStore.add() in C: the call-site form of the
 * stack at ``frame`` (StackTable.capture_site; ``flat``: no further than capture_flat walks),
 * counted in the trace's overflow. ``sink`` is the hub's, as record.c's sink_ok() checked it (the
 * trace's depth its last item). 1 when counted (or dropped: the trace has
 * finished), 0 when record() must do it (a form not interned yet, an overflow key not there
 * yet, a code the walk has not noted), -1 on error. */
int
site_count(Recorder *self, PyObject *sink, PyObject *cache, PyFrameObject *frame, PyObject *stream, PyObject *count,
           int flat, PyObject **gone, int room, int *ngone)
{
    PyObject *trace = PyTuple_GET_ITEM(sink, 3); /* held by ``sink``, which the caller holds */
    PyObject *state = NULL, *key = NULL, *finished = NULL, *overflow = NULL, *okey = NULL;
    PyObject *dropped = NULL, *slot = NULL;
    PyFrameObject *parent = NULL;
    PyCodeObject *code = NULL;
    int done = -1;
    state = Py_XNewRef(SLOT(cache, ca_sites)); /* the table's site_state, read when the Cache was made */
    if (state == NULL) {
        done = 0;
        goto out;
    }
    long d = PyLong_AsLong(PyTuple_GET_ITEM(sink, 4)); /* the trace's depth: an int (sink_ok) */
    if (d == -1 && PyErr_Occurred())
        goto out;
    if (!PyTuple_CheckExact(state) || PyTuple_GET_SIZE(state) < 3 || !PyDict_CheckExact(PyTuple_GET_ITEM(state, 2))) {
        done = 0;
        goto out;
    }
    /* The drawing frame's caller, code and f_lasti (new references), and the memo's entry for them. */
    parent = PyFrame_GetBack(frame);
    code = PyFrame_GetCode(frame);
    long lasti = frame_lasti(frame), parent_lasti = parent != NULL ? frame_lasti(parent) : -1;
    SiteEntry *e = parent != NULL ? site_slot(parent, code, lasti) : NULL;
    PyObject *sid;
    int remember = 0, known = 0;
    if (e != NULL && site_is(e, parent, parent_lasti, code, lasti, state, d, flat)) {
        known = 1;
        sid = e->sid; /* borrowed from the entry: held below before anything can run */
        key = Py_NewRef(sid);
        if (e->row != NULL && e->trace == trace && e->stream == stream && e->kind == self->kind && e->api == self->api)
            slot = Py_NewRef(e->row); /* the row this site's last draw was counted in */
    } else {
        if ((key = site_key_of((PyObject *)frame, d, flat ? 2 * d : 0, state)) == NULL)
            goto out;
        sid = key == Py_NotImplemented ? NULL : PyDict_GetItemWithError(PyTuple_GET_ITEM(state, 2), key);
        if (sid == NULL) {
            done = PyErr_Occurred() ? -1 : 0;
            goto out;
        }
        Py_INCREF(sid); /* held in ``key``'s place */
        Py_SETREF(key, sid);
        if (e != NULL && lasti >= 0 && parent_lasti >= 0 && room >= 1) {
            PyCodeObject *outer = PyFrame_GetCode(parent);
            remember = !(outer->co_flags & SITE_SUSPENDABLE);
            Py_DECREF(outer);
        }
    }
    if ((finished = PyObject_GetAttr(trace, s_finished)) == NULL)
        goto out;
    if (finished == Py_True) { /* another thread's draw that overlapped the end of the block */
        done = 1;
        goto out;
    }
    if (remember) {
        /* Only while the trace records (read just above, and nothing since let another thread run):
         * the memo is emptied when a trace ends, and an entry made after that would keep its frame
         * until the next trace's end. Two entries further on are looked at first, and let go of if
         * their frame finished: every entry is looked at within SITE_MEMO / 2 misses, and a miss
         * (each draw of a loop over distinct stacks) does not pay for looking at all of them.
         * Nothing here allocates. */
        for (int i = 0; i < SITE_SWEEP && *ngone < room - 1; i++) {
            SiteEntry *next = &site_memo[site_cursor];
            site_cursor = (site_cursor + 1) % SITE_MEMO;
            if (next != e && site_finished(next))
                site_evict(next, gone, ngone);
        }
        if (e->parent != NULL)
            site_evict(e, gone, ngone);
        e->parent = Py_NewRef(parent);
        e->code = Py_NewRef(code);
        e->state = Py_NewRef(state);
        e->sid = Py_NewRef(sid);
        e->parent_lasti = parent_lasti;
        e->lasti = lasti;
        e->depth = d;
        e->flat = flat;
        known = 1;
    }
    if (slot == NULL) {
        if ((overflow = PyObject_GetAttr(trace, s_overflow)) == NULL ||
            (okey = PyTuple_Pack(4, stream, self->kind, self->api, sid)) == NULL)
            goto out;
        slot = PyDict_CheckExact(overflow) ? Py_XNewRef(PyDict_GetItemWithError(overflow, okey)) : NULL;
        if (slot == NULL || !PyList_CheckExact(slot) || PyList_GET_SIZE(slot) != 2) {
            done = PyErr_Occurred() ? -1 : 0; /* a new key: RawStore.add makes its slot */
            goto out;
        }
        /* The entry is still this site's (the allocation above may have run code that drew
         * elsewhere): the row goes in it, for the next draw here. */
        if (known && site_is(e, parent, parent_lasti, code, lasti, state, d, flat)) {
            PyObject *old[SITE_HELD - 4];
            site_take_row(e, old);
            e->trace = Py_NewRef(trace);
            e->stream = Py_NewRef(stream);
            e->kind = Py_NewRef(self->kind);
            e->api = Py_NewRef(self->api);
            e->row = Py_NewRef(slot);
            for (int i = 0; i < SITE_HELD - 4; i++)
                Py_XDECREF(old[i]); /* a finished trace, strings, a list of two ints: no code runs */
        }
    }
    if (count == NULL) {
        done = 0;
        goto out;
    }
    static PyObject *one;
    if (one == NULL && (one = PyLong_FromLong(1)) == NULL) /* kept for the process */
        goto out;
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
out:
    Py_XDECREF(slot);
    Py_XDECREF(parent);
    Py_XDECREF(code);
    Py_XDECREF(dropped);
    Py_XDECREF(okey);
    Py_XDECREF(overflow);
    Py_XDECREF(finished);
    Py_XDECREF(key);
    Py_XDECREF(state);
    return done;
}

