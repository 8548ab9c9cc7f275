/* rngtrace._speedups: the common case of a recording wrapper, in C.
 *
 * A Recorder stands where a Python recording wrapper (sources/_wrapping.py and _recorder.py,
 * sources/_torch_wrappers.py) would: it is that wrapper's fast path. It records a draw
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
 *
 * One file per Python module it stands in for, all sharing speedups.h:
 *   module.c    the module itself: its functions' table, PyInit, the interned strings
 *   hotpath.c   _hotpath.py: configure(), the slot layouts of the hot-path types
 *   recorder.c  sources/_recorder.py's recorder(), _wrapping.py's entry() and Condition: the Recorder type,
 *               which calls it records itself and which it hands to the Python wrapper
 *   record.c    sources/_recorder.py's record_call, _wrapping.py's checked_call, _record.py's
 *               Recording.record(): one call recorded under its stream's lock
 *   stack.c     _stack.py: StackTable.capture's walk, capture_flat's key, and _codes.py's lineno_at
 *   locks.c     _record.py's stream locks (StreamLock), _hub.py's call_locked, call_if_free
 *   inplace.c   sources/_inplace.py: InPlace, a stream's state read where it lives
 *   patches.c   _patches.py: swap, and the builtins recorded in place (hook_builtins)
 *   shield.c    _catchall.py's Shielded, _processes.py's ChildWriter SIGTERM handler
 *   profile.c   _catchall_profile.py's profile function: ProfileHook, the 3.10/3.11 c_call hook in C
 *   postimport.c _postimport.py's register_many and unregister_many: watch_many
 *   lone.c      _lone.py's install_alone and uninstall_alone: lone_install, lone_uninstall
 *   blocks.c    _blocks.py: ExitSlot, Binding, claim (a with statement's own exit), and BoundExit
 * The declarations of speedups.h say which file defines what; _speedups.pyi is the
 * interface Python sees.
 */
#include "speedups.h"

PyObject *s_value, *s_add, *s_is_cpu, *s_numel, *s_watch_code, *s_acquire, *s_release,
    *s_finished, *s_overflow, *s_dropped, *s_hooks, *s_applied;
PyObject *one, *zero;
PyObject *root; /* ROOT in _stack.py: the parent of an outermost frame */

static PyMethodDef module_methods[] = {
    {"on_sigterm", on_sigterm, METH_O,
     "on_sigterm(fd): SIGTERM writes a byte to fd instead of killing at once (fd -1: the default back)."},
    {"die_of_sigterm", die_of_sigterm, METH_NOARGS, "die_of_sigterm(): the default SIGTERM back, and the process killed by it."},
    {"lineno_at", (PyCFunction)(void (*)(void))lineno_at, METH_FASTCALL,
     "lineno_at(code, lasti): the line of the instruction at byte offset lasti, or None (see _codes.lineno_at)."},
    {"configure", configure, METH_VARARGS,
     "configure(HotPath, Snapshot, Cache, ThreadState, Fingerprint): the types whose slots are read."},
    {"call_locked", call_locked, METH_VARARGS, "call_locked(lock, fn, *args): fn(*args) under the lock, taken and released in C."},
    {"flat_key", (PyCFunction)(void (*)(void))flat_key, METH_FASTCALL,
     "flat_key(frame, depth): the code pointers and f_lasti of depth frames, packed (StackTable.capture_flat)."},
    {"site_key", (PyCFunction)(void (*)(void))site_key, METH_FASTCALL,
     "site_key(frame, depth, raw_limit, state): the call-site form's frames, packed (StackTable.capture_site)."},
    {"call_if_free", call_if_free, METH_VARARGS,
     "call_if_free(lock, fn, *args): fn(*args) under the lock, or NotImplemented if another thread holds it."},
    {"forget_sites", forget_sites, METH_O,
     "forget_sites(finished_only): let go of the frames the call-site memo holds (every one, or the finished)."},
    {"walk_memo", walk_memo, METH_NOARGS, "walk_memo(): an empty memo for one StackTable's capture walk (see capture)."},
    {"capture", (PyCFunction)(void (*)(void))capture, METH_FASTCALL,
     "capture(frame, depth, known, pin, state, watch): StackTable.capture's walk (NotImplemented: use Python's)."},
    {"builtin_twin", builtin_twin, METH_O,
     "builtin_twin(fn): a new builtin object calling what the builtin fn calls when not hooked."},
    {"hooked_builtins", hooked_builtins, METH_NOARGS, "hooked_builtins(): the builtins whose calls reach a wrapper now."},
    {"hook_builtins", hook_builtins, METH_VARARGS,
     "hook_builtins(pairs, forward): make each builtin or bound method of (callable, wrapper) pairs call its wrapper, in place, or undo."},
    {"watch_many", watch_many, METH_VARARGS,
     "watch_many(hooks, finder, forward, pairs): _postimport's register_many (the imported (hook, module) pairs) or unregister_many."},
    {"lone_install", (PyCFunction)(void (*)(void))lone_install, METH_FASTCALL,
     "lone_install(register_many, process_module, INHERITED, hub, session): _lone.install_alone(hub, session)."},
    {"lone_uninstall", (PyCFunction)(void (*)(void))lone_uninstall, METH_FASTCALL,
     "lone_uninstall(unregister_many, process_module, INHERITED, hub): _lone.uninstall_alone(hub)."},
    {"claim", claim, METH_O,
     "claim(manager): the binding of the with statement entering manager (called from its __enter__), or None."},
    {"swap_parts", (PyCFunction)(void (*)(void))swap_parts, METH_FASTCALL,
     "swap_parts(parts, entries, forward, INHERITED, stamps, strays): Patches.swap_in (forward) or swap_out, in one call."},
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
    INTERN(s_add, "add");
    INTERN(s_is_cpu, "is_cpu");
    INTERN(s_numel, "numel");
    INTERN(s_watch_code, "watch_code");
    INTERN(s_acquire, "acquire");
    INTERN(s_release, "release");
    INTERN(s_finished, "finished");
    INTERN(s_overflow, "overflow");
    INTERN(s_dropped, "dropped");
    INTERN(s_hooks, "hooks");
    INTERN(s_applied, "applied");
#undef INTERN
    if ((one = PyLong_FromLong(1)) == NULL || (root = PyLong_FromLong(-1)) == NULL ||
        (zero = PyLong_FromLong(0)) == NULL)
        return NULL;
    if (PyType_Ready(&RecorderType) < 0 || PyType_Ready(&InPlaceType) < 0 || PyType_Ready(&StreamLockType) < 0 ||
        PyType_Ready(&ShieldedType) < 0 || PyType_Ready(&ProfileHookType) < 0)
        return NULL;
    if (deferred == NULL && (deferred = PyList_New(0)) == NULL)
        return NULL;
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL)
        return NULL;
    if (PyModule_AddObjectRef(module, "Recorder", (PyObject *)&RecorderType) < 0 ||
        PyModule_AddObjectRef(module, "InPlace", (PyObject *)&InPlaceType) < 0 ||
        PyModule_AddObjectRef(module, "StreamLock", (PyObject *)&StreamLockType) < 0 ||
        PyModule_AddObjectRef(module, "Shielded", (PyObject *)&ShieldedType) < 0 ||
        PyModule_AddObjectRef(module, "ProfileHook", (PyObject *)&ProfileHookType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    if (blocks_ready(module) < 0) {
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
