/* rngtrace._speedups, record.c -- mirrors the recorded call of rngtrace/sources/_recorder.py and _wrapping.py
 * (recorder()'s record_call and checked_call) and rngtrace/_record.py's Recording.record():
 * record_call() takes the stream's lock, reports a move nobody recorded, calls the original
 * with the thread marked busy, counts the values and appends the raw event -- from the thread's
 * cache or the C walk (stack.c) where exactly one trace records, else through the hub's
 * record() -- then reads the fingerprint again and gives the lock back. The Recorder type that
 * decides which calls come here is recorder.c. */
#include "speedups.h"

/* The raw event, as the Python record() makes it. Untracked by the collector when it holds only
 * strings, ints and None (what a collection would find and do anyway): a long loop of draws then
 * leaves the collector nothing to traverse. */
static PyObject *
raw_event(Recorder *self, PyObject *stream, PyObject *count, PyObject *sid, PyObject *thread, PyObject *detail)
{
    PyObject *raw = PyTuple_Pack(7, stream, self->kind, self->api, count, sid, thread, detail);
    if (raw != NULL && PyUnicode_CheckExact(stream) && (count == Py_None || PyLong_CheckExact(count)) &&
        PyLong_CheckExact(sid) && PyLong_CheckExact(thread) && PyUnicode_CheckExact(self->kind) &&
        PyUnicode_CheckExact(self->api) && (detail == Py_None || PyUnicode_CheckExact(detail)))
        PyObject_GC_UnTrack(raw);
    return raw;
}

/* Whether two event fields are the same int (or the same object). Exact ints only: comparing them runs no code. */
static int
same_field(PyObject *a, PyObject *b)
{
    if (a == b)
        return 1;
    if (!PyLong_CheckExact(a) || !PyLong_CheckExact(b))
        return 0;
    return PyObject_RichCompareBool(a, b, Py_EQ) == 1;
}

/* The trace's last kept event, when this draw's would equal it (a loop drawing on one line): that
 * tuple is appended again. A long loop of draws then allocates no tuple per draw, and so counts
 * nothing towards the collector's next pass (each allocation of a tracked object does, untracked
 * after or not: in a program holding many objects that pass is the cost). Only an untracked last
 * event is reused: it holds only strings, ints and None (``raw_event``). NULL when there is none. */
static PyObject *
repeated_event(PyObject *sink, Recorder *self, PyObject *stream, PyObject *count, PyObject *sid, PyObject *thread,
               PyObject *detail)
{
    PyObject *events = PyTuple_GET_ITEM(sink, 0);
    if (!PyList_CheckExact(events) || PyList_GET_SIZE(events) == 0)
        return NULL;
    PyObject *last = PyList_GET_ITEM(events, PyList_GET_SIZE(events) - 1);
    if (!PyTuple_CheckExact(last) || PyTuple_GET_SIZE(last) != 7 || PyObject_GC_IsTracked(last))
        return NULL;
    if (PyTuple_GET_ITEM(last, 0) != stream || PyTuple_GET_ITEM(last, 1) != self->kind ||
        PyTuple_GET_ITEM(last, 2) != self->api || PyTuple_GET_ITEM(last, 5) != thread ||
        PyTuple_GET_ITEM(last, 6) != detail || !same_field(PyTuple_GET_ITEM(last, 3), count) ||
        !same_field(PyTuple_GET_ITEM(last, 4), sid))
        return NULL;
    return Py_NewRef(last);
}

/* Append ``raw`` where record() would: the trace's list below its limit, else trace.add() (which
 * counts it). ``sink`` is held by the caller. 1 when appended, -1 on error. */
static int
sink_append(PyObject *sink, PyObject *raw)
{
    PyObject *events = PyTuple_GET_ITEM(sink, 0);
    Py_ssize_t limit = PyLong_AsSsize_t(PyTuple_GET_ITEM(sink, 1));
    if (limit == -1 && PyErr_Occurred())
        return -1;
    if (PyList_CheckExact(events) && PyList_GET_SIZE(events) < limit)
        return PyList_Append(events, raw) < 0 ? -1 : 1;
    PyObject *r = PyObject_CallMethodOneArg(PyTuple_GET_ITEM(sink, 3), s_add, raw);
    Py_XDECREF(r);
    return r == NULL ? -1 : 1;
}

/* 1 when the trace of ``sink`` keeps no more events: record() then interns only the call-site form of
 * the event's stack (StackTable.capture_site) and counts it. */
static int
sink_full(PyObject *sink)
{
    PyObject *events = PyTuple_GET_ITEM(sink, 0), *limit = PyTuple_GET_ITEM(sink, 1);
    if (!PyList_CheckExact(events) || !PyLong_CheckExact(limit))
        return 1; /* not what the hub publishes: record() decides */
    Py_ssize_t max = PyLong_AsSsize_t(limit);
    if (max == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 1;
    }
    return PyList_GET_SIZE(events) >= max;
}

/* Whether ``sink`` is the one the hub publishes (Recording.publish): (events, max_events, streams,
 * trace, depth), the trace's depth an int, so that no draw reads it off the trace. */
static int
sink_ok(PyObject *sink)
{
    return PyTuple_CheckExact(sink) && PyTuple_GET_SIZE(sink) >= 5 && PyLong_CheckExact(PyTuple_GET_ITEM(sink, 4));
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

/* A draw's or seed's event in frame mode WALK, where no thread keeps a cache of live frames (a short
 * trace, before pinning starts): as record() makes it there -- a draw counted towards pinning (the
 * hub's walked(); a seed's walk is not: pytest-randomly's come from fresh stacks), its whole stack
 * walked by the table's capture_flat -- appended to the one recording trace. 1 when appended, 0
 * when record() must do it, -1 on error. */
static int
walk_record(Recorder *self, PyObject *st, PyFrameObject *frame, PyObject *stream, PyObject *count, PyObject *detail,
            PyObject *sink, PyObject *flat)
{
    Py_INCREF(sink); /* held while we work: walked() and capture_flat run Python code */
    Py_INCREF(flat);
    int done = -1;
    PyObject *sid = NULL, *raw = NULL;
    int contained = PySequence_Contains(PyTuple_GET_ITEM(sink, 2), stream);
    if (contained <= 0) {
        done = contained;
        goto out;
    }
    int draw = PyUnicode_CheckExact(self->kind) && PyUnicode_CompareWithASCIIString(self->kind, "draw") == 0;
    if (draw) {
        PyObject *walked = SLOT(self->hot, hp_walked);
        PyObject *r = walked != NULL ? PyObject_CallNoArgs(walked) : NULL;
        if (r == NULL) {
            if (walked == NULL)
                done = 0;
            goto out;
        }
        Py_DECREF(r);
    }
    if ((sid = PyObject_CallFunctionObjArgs(flat, (PyObject *)frame, PyTuple_GET_ITEM(sink, 4), NULL)) == NULL)
        goto out;
    raw = repeated_event(sink, self, stream, count, sid, SLOT(st, st_key), detail);
    if (raw == NULL && (raw = raw_event(self, stream, count, sid, SLOT(st, st_key), detail)) == NULL)
        goto out;
    done = sink_append(sink, raw);
out:
    Py_XDECREF(raw);
    Py_XDECREF(sid);
    Py_DECREF(flat);
    Py_DECREF(sink);
    return done;
}

/* site_count() for one recording trace, once ``stream`` is one it watches. The frames its memo
 * lets go of go into ``released``, dropped once the stream's lock is given back. */
static int
site_record(Recorder *self, PyObject *sink, PyObject *cache, PyFrameObject *frame, PyObject *stream, PyObject *count,
            int flat, Released *released)
{
    Py_INCREF(sink); /* held while we work: an allocation may run the collector, and with it any code */
    Py_INCREF(cache);
    int ngone = 0, room = RELEASED_INLINE - released->count;
    int done = PySequence_Contains(PyTuple_GET_ITEM(sink, 2), stream);
    if (done > 0)
        done = site_count(self, sink, cache, frame, stream, count, flat,
                          released->inline_entries + released->count, room, &ngone);
    released->count += ngone;
    Py_DECREF(cache);
    Py_DECREF(sink);
    return done;
}

/* The event's stack and its append, as Recording.record() does them while exactly one trace
 * records (``sink``), with the Snapshot ``now`` read once when the call began (its sink and stack
 * table belong together): from the thread's cache where it knows the caller's caller, else by the
 * C walk (StackTable.capture); in frame mode WALK, where the thread keeps no cache, by walk_record
 * above. 1 when appended, 0 when the Python record() must do it (the
 * thread's cache is not kept under this Cache, several traces record, the walk met something it
 * does not expect), -1 on error. After a walk that may have pinned a frame, ``released`` holds the
 * finished pins taken out of the cache (take_finished_pins), for the caller to drop. */
static int
fast_record(Recorder *self, PyObject *now, PyObject *st, PyFrameObject *frame, PyObject *stream, PyObject *count,
            Released *released, PyObject *detail)
{
    PyObject *sink = SLOT(now, sn_sink), *known = SLOT(st, st_frames), *cache = SLOT(now, sn_cache);
    if (sink == NULL || cache == NULL || Py_TYPE(cache) != cache_type)
        return 0;
    /* Past max_events: counted under the stack's call-site form, with or without the thread's cache. In
     * frame mode WALK record() does it (it counts the walks that start pinning). */
    if (!sink_ok(sink))
        return 0; /* not what the hub publishes: record() decides */
    if (sink_full(sink)) {
        if (SLOT(cache, ca_flat) != Py_None)
            return 0;
        /* Walked as record() would walk the whole stack: to the outermost frame with a cache of live
         * frames, else (3.10/3.11's profile mode on a thread the hook does not run on) as capture_flat. */
        int flat = 0;
#if PY_VERSION_HEX < 0x030C0000
        flat = SLOT(cache, ca_pin) != Py_True && SLOT(st, st_hooked) != Py_True;
#endif
        return site_record(self, sink, cache, frame, stream, count, flat, released);
    }
    PyObject *flat = SLOT(cache, ca_flat);
    if (flat != NULL && flat != Py_None) {
        /* Frame mode WALK: no thread keeps a cache of live frames (one left from another mode is
         * stale), and record() walks the whole stack, as walk_record does. */
        if (SLOT(st, st_key) == NULL)
            return 0;
        return walk_record(self, st, frame, stream, count, detail, sink, flat);
    }
    if (known == NULL)
        return 0;
    PyObject *interned = SLOT(cache, ca_ids), *walk = SLOT(cache, ca_walk), *pin = SLOT(cache, ca_pin);
    /* The thread's cache was made under this Cache (same table, same frame mode), or not at all. */
    if (interned == NULL || walk == NULL || pin == NULL || SLOT(st, st_epoch) != cache)
        return 0;
    if (!PyDict_CheckExact(known) ||
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
        long depth = PyLong_AsLong(PyTuple_GET_ITEM(sink, 4)); /* the trace's, in the sink (sink_ok) */
        if (depth == -1 && PyErr_Occurred())
            goto walk_failed;
        if (pin == Py_False && (watch = PyObject_GetAttr(SLOT(cache, ca_table), s_watch_code)) == NULL)
            goto walk_failed;
        sid = capture_walk((PyObject *)frame, depth, known, pin == Py_True, SLOT(cache, ca_walk),
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
    raw = repeated_event(sink, self, stream, count, sid, SLOT(st, st_key), detail);
    if (raw == NULL && (raw = raw_event(self, stream, count, sid, SLOT(st, st_key), detail)) == NULL)
        goto out;
    done = sink_append(sink, raw);
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

/* A short description of the seed argument, or None: sources/_wrapping.py's seed_detail one-to-one.
 * The value is the positional argument at ``self->seed_argument``, else the first keyword's. */
static PyObject *
seed_detail(Recorder *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *value;
    if (nargs > self->seed_argument)
        value = args[self->seed_argument];
    else if (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0)
        value = args[nargs];
    else
        Py_RETURN_NONE;
    PyObject *text;
    if (value == Py_None || PyLong_Check(value) || PyFloat_Check(value) || PyUnicode_Check(value) ||
        PyBytes_Check(value))
        text = PyObject_Repr(value);
    else {
        /* A state tuple or tensor: say what, not all of it. */
        PyObject *name = PyObject_GetAttrString((PyObject *)Py_TYPE(value), "__name__");
        if (name == NULL)
            return NULL;
        text = PyUnicode_FromFormat("<%S>", name);
        Py_DECREF(name);
    }
    if (text == NULL || PyUnicode_GET_LENGTH(text) <= 40)
        return text;
    PyObject *head = PyUnicode_Substring(text, 0, 37);
    Py_DECREF(text);
    if (head == NULL)
        return NULL;
    Py_SETREF(head, PyUnicode_FromFormat("%U...", head));
    return head;
}

/* A seed returned, still under the lock and busy: its event (in C where one trace records), then
 * hot.seeded(stream), which re-keys the stream's fingerprint and tells the hub, as the Python
 * wrapper's after_seed does. 0, or -1 on error. */
static int
record_seed(Recorder *self, PyObject *now, PyObject *st, PyObject *frame, PyObject *const *args, Py_ssize_t nargs,
            PyObject *kwnames, Released *released)
{
    PyObject *detail = seed_detail(self, args, nargs, kwnames);
    if (detail == NULL)
        return -1;
    int done = 0;
    if (frame != Py_None) {
        done = fast_record(self, now, st, (PyFrameObject *)frame, self->stream, Py_None, released, detail);
    }
    if (done == 0) {
        PyObject *r = PyObject_CallFunctionObjArgs(SLOT(self->hot, hp_record), self->stream, self->kind, self->api,
                                                   Py_None, frame, detail, st, NULL);
        done = r == NULL ? -1 : 1;
        Py_XDECREF(r);
    }
    Py_DECREF(detail);
    if (done < 0)
        return -1;
    PyObject *r = PyObject_CallOneArg(SLOT(self->hot, hp_seeded), self->stream);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
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
PyObject *
call_with_arguments(PyObject *fn, PyObject *first, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    return call_with_arguments2(fn, first, NULL, args, nargs, kwnames);
}

/* A torch CPU tensor's count, read where its TensorImpl keeps it (sources/_torch_tensor.py proved the
 * offsets for this torch, and says why each byte is read): 1 with ``*count`` set, 0 where torch must
 * be asked (not on the CPU, custom sizes or device, symbolic sizes), -1 on error. ``result`` is
 * exactly the tensor type, whose objects hold the pointer at ``impl_at``. */
static int
tensor_count_in_place(Recorder *self, PyObject *result, PyObject **count)
{
    const unsigned char *impl = *(const unsigned char *const *)((const char *)result + self->impl_at);
    if (impl == NULL || impl[self->device_at] != self->cpu || impl[self->engaged_at] != 1 ||
        (impl[self->flags_at] & self->flags_mask) != 0)
        return 0;
    int64_t n;
    memcpy(&n, impl + self->numel_at, sizeof n);
    if (n < 0)
        return 0;
    *count = PyLong_FromLongLong(n);
    return *count == NULL ? -1 : 1;
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
            int read = self->tensor_layout ? tensor_count_in_place(self, result, count) : 0;
            if (read != 0)
                return read < 0 ? -1 : 0;
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
PyObject *
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
        /* A seed: the Python side records it and rebases (_recorder.seed_recorder's after_seed), still under
         * the lock and busy. Called from C, so no frame of rngtrace's stands between the caller and
         * the seed: a stack the seed formats (torch's lazy CUDA seeding keeps one) shows none. */
        PyObject *r = call_with_arguments2(self->after, st, frame, args, nargs, kwnames);
        if (r == NULL)
            goto fail;
        Py_DECREF(r);
        goto release;
    }
    if (self->seed_argument >= 0) {
        /* A seed recorded here: no Python frame between the caller and the seed's bookkeeping. */
        if (record_seed(self, now, st, frame, args, nargs, kwnames, &released) < 0)
            goto fail;
        goto release;
    }
    if (count_values(self, result, args, nargs, kwnames, &stream, &count) < 0)
        goto fail;
    if (stream != Py_None) {
        int done = frame == Py_None ? 0
                                    : fast_record(self, now, st, (PyFrameObject *)frame, stream, count, &released, Py_None);
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
