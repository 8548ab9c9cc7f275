/* rngtrace._speedups: what the accelerator's files share -- the includes, the slot layouts
 * configure() finds (hotpath.c), the interned strings and constants made at import (module.c),
 * the object layouts more than one file reads, and each file's functions another one calls.
 * Every file includes this first; see module.c for which Python module each file mirrors. */
#ifndef RNGTRACE_SPEEDUPS_H
#define RNGTRACE_SPEEDUPS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>
#include <structmember.h>

/* Shared between the module's files only: nothing here is exported from the shared object
 * (PyInit__speedups, declared by PyMODINIT_FUNC, is its one exported symbol). */
#if defined(__GNUC__)
#pragma GCC visibility push(hidden)
#endif

/* -- hotpath.c (_hotpath.py) ----------------------------------------------------------- */

/* Offsets of the __slots__ the hot path reads (rngtrace/_hotpath.py, _threads.py), found from
 * their member descriptors by configure(): a renamed slot fails there, not silently here. */
extern Py_ssize_t hp_now, hp_states, hp_record, hp_unattributed, hp_raised, hp_seeded, hp_walked;
extern Py_ssize_t sn_active, sn_sink, sn_strict, sn_profile_hook, sn_cache, ca_ids, ca_table, ca_walk, ca_pin, ca_flat,
    ca_sites;
extern Py_ssize_t st_busy, st_pending, st_frames, st_epoch, st_key, st_hooked;
extern Py_ssize_t fp_view, fp_last;
extern PyTypeObject *hot_path_type, *snapshot_type, *cache_type, *thread_state_type, *fingerprint_type;

PyObject *configure(PyObject *module, PyObject *args);

/* -- module.c: made once, at import --------------------------------------------------- */

extern PyObject *s_value, *s_add, *s_is_cpu, *s_numel, *s_watch_code, *s_acquire, *s_release,
    *s_finished, *s_overflow, *s_dropped, *s_hooks, *s_applied;
extern PyObject *one, *zero;
extern PyObject *root; /* ROOT in _stack.py: the parent of an outermost frame */

/* -- every file: a slot read or written by offset, a dict's version -------------------- */

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

static inline void
set_slot(PyObject *obj, Py_ssize_t offset, PyObject *value)
{
    PyObject *old = SLOT(obj, offset);
    Py_INCREF(value);
    SLOT(obj, offset) = value;
    Py_XDECREF(old);
}

/* -- inplace.c (sources/_inplace.py) --------------------------------------------------- */

#define MAX_REGIONS 4

typedef struct {
    PyObject_HEAD
    int count;
    Py_ssize_t total;
    const char *address[MAX_REGIONS];
    Py_ssize_t size[MAX_REGIONS];
    PyObject *owners; /* what keeps the memory alive */
} InPlace;

extern PyTypeObject InPlaceType;

PyObject *inplace_value(InPlace *self, void *closure);
int inplace_differs(InPlace *self, PyObject *last);

/* -- locks.c (_record.py's stream locks, _hub.py's locked calls) ------------------------ */

/* What threading.RLock does, for the lock a recording wrapper holds around one call: reentrant
 * (a finalizer drawing on the same thread must not deadlock), waiting with the GIL released, and
 * a wait a signal handler interrupts (Ctrl-C) raises what the handler raised. The Recorder takes
 * and releases it in C; Python code uses it as an RLock. */
typedef struct {
    PyObject_HEAD
    PyThread_type_lock gate; /* a waiter sleeps on it; closed (held) unless a give opened it */
    unsigned long owner, count;
    unsigned long waiters; /* threads asleep on the gate, or about to be */
    int closed;            /* the gate is held: a give with waiters opens it */
    PyObject *weakrefs;
} StreamLock;

extern PyTypeObject StreamLockType;

int stream_lock_take(StreamLock *self, int blocking, PY_TIMEOUT_T microseconds);
int stream_lock_give(StreamLock *self);
PyObject *call_locked(PyObject *module, PyObject *args);
PyObject *call_if_free(PyObject *module, PyObject *args);

/* -- recorder.c and record.c (sources/_recorder.py's recorder, _record.py's record) ---------- */

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
    int tensor_layout;      /* torch: where a CPU tensor's count is read in place (_torch_tensor.py), else 0 */
    Py_ssize_t impl_at, numel_at, device_at, engaged_at, flags_at;
    unsigned char cpu, flags_mask;
    PyObject *slow_keyword; /* a keyword that sends the call to the Python wrapper */
    PyObject *takes;        /* (args, kwargs) -> whether this call draws (dropout in training), or None */
    PyObject *condition;    /* the same, declared: _wrapping.Condition.spec, or None */
    PyObject *after;        /* a seed: after(st, frame, args, kwargs) records it, once it returned; else None */
    Py_ssize_t seed_argument; /* a seed recorded here (no ``after``): where its value is among the
                               * positional arguments (1 past the instance of a method); -1: not one */
    PyObject *inside;       /* file prefixes (the stream's library, rngtrace): a call from there inside a
                             * recorded call is part of it; a tuple, or None to leave that to the wrapper */
    PyObject *through;      /* file prefixes whose calls outside a recorded call are the wrapper's to
                             * record (random.py's methods calling each other on the instance), or None */
    int test;               /* the condition's test (TEST_*), and where its arguments are found */
    int params;
    Py_ssize_t index[2];
    PyObject *name[2], *fallback[2];
} Recorder;

extern PyTypeObject RecorderType;

PyObject *record_call(Recorder *self, PyObject *now, PyObject *st, PyObject *frame, PyObject *const *args,
                      size_t nargsf, PyObject *kwnames);
PyObject *call_with_arguments(PyObject *fn, PyObject *first, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames);

/* -- store.c (_store.py) ----------------------------------------------------------------- */

int site_count(Recorder *self, PyObject *sink, PyObject *cache, PyFrameObject *frame, PyObject *stream, PyObject *count,
               int flat, PyObject **gone, int room, int *ngone);
PyObject *forget_sites(PyObject *module, PyObject *finished_only);

/* -- stack.c (_stack.py) ----------------------------------------------------------------- */

PyObject *capture_walk(PyObject *frame, long depth, PyObject *known, int pin, PyObject *state, PyObject *watch);
PyObject *known_stack(PyFrameObject *frame, PyObject *known, PyObject *ids, PyObject *state);
PyObject *walk_memo(PyObject *module, PyObject *unused);
PyObject *capture(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *flat_key(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *site_key(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *site_key_of(PyObject *frame, long depth, long limit, PyObject *state);
PyObject *lineno_at(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
long frame_lasti(PyFrameObject *frame); /* frame.f_lasti as Python reports it (bytes, -1: not started) */

/* The capture walk reads the interpreter's own frames on 3.11-3.13 (stack.c), where
 * prove_internal_frames() finds their layout as compiled, at import. */
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030E0000
#define INTERNAL_FRAMES 1
extern int internal_frames;
int prove_internal_frames(void);
#endif

/* -- patches.c (_patches.py) ------------------------------------------------------------- */

PyObject *swap(PyObject *module, PyObject *args);
PyObject *builtin_twin(PyObject *module, PyObject *fn);
PyObject *hook_builtins(PyObject *module, PyObject *args);
PyObject *hooked_builtins(PyObject *module, PyObject *unused);
PyObject *swap_parts(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* -- postimport.c (_postimport.py) ------------------------------------------------------- */

PyObject *watch_many(PyObject *module, PyObject *args);

/* -- lone.c (_lone.py) ------------------------------------------------------------------- */

PyObject *lone_install(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *lone_uninstall(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* -- blocks.c (_blocks.py) --------------------------------------------------------------- */

PyObject *claim(PyObject *module, PyObject *manager);
int blocks_ready(PyObject *module); /* its types and key, added to the module */

/* -- shield.c (_catchall.py's Shielded, _processes.py's SIGTERM) ------------------------- */

extern PyTypeObject ShieldedType;
extern PyObject *deferred;

PyObject *on_sigterm(PyObject *module, PyObject *arg);
PyObject *die_of_sigterm(PyObject *module, PyObject *noargs);

/* -- profile.c (_catchall_profile.py's profile function) ----------------------------------- */

extern PyTypeObject ProfileHookType;

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#endif /* RNGTRACE_SPEEDUPS_H */
