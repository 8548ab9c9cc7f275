/* rngtrace._speedups, hotpath.c -- mirrors rngtrace/_hotpath.py (and _threads.py's ThreadState,
 * Fingerprint): configure() reads the slot layouts of HotPath, Snapshot, Cache, ThreadState and
 * Fingerprint from their member descriptors, once, and every other file reads those slots by
 * offset (SLOT in speedups.h). */
#include "speedups.h"

/* Offsets of the __slots__ the hot path reads (rngtrace/_hotpath.py, _threads.py), found from
 * their member descriptors by configure(): a renamed slot fails there, not silently here. */
Py_ssize_t hp_now = -1, hp_states, hp_record, hp_unattributed, hp_raised, hp_seeded, hp_walked;
Py_ssize_t sn_active, sn_sink, sn_strict, sn_profile_hook, sn_cache, ca_ids, ca_table, ca_walk, ca_pin, ca_flat,
    ca_sites;
Py_ssize_t st_busy = -1, st_pending, st_frames, st_epoch, st_key, st_hooked;
Py_ssize_t fp_view = -1, fp_last;
PyTypeObject *hot_path_type, *snapshot_type, *cache_type, *thread_state_type, *fingerprint_type;

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

PyObject *
configure(PyObject *module, PyObject *args)
{
    PyTypeObject *hp_type, *sn_type, *ca_type, *state_type, *fp_type;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!:configure", &PyType_Type, &hp_type, &PyType_Type, &sn_type,
                          &PyType_Type, &ca_type, &PyType_Type, &state_type, &PyType_Type, &fp_type))
        return NULL;
    Py_ssize_t offsets[26] = {
        slot_offset(hp_type, "now"),          slot_offset(hp_type, "states"),  slot_offset(hp_type, "record"),
        slot_offset(hp_type, "unattributed"), slot_offset(hp_type, "raised"),  slot_offset(sn_type, "active"),
        slot_offset(sn_type, "sink"),         slot_offset(sn_type, "strict"),  slot_offset(sn_type, "profile_hook"),
        slot_offset(sn_type, "cache"),        slot_offset(ca_type, "ids"),     slot_offset(state_type, "busy"),
        slot_offset(state_type, "pending"),   slot_offset(state_type, "frames"), slot_offset(state_type, "epoch"),
        slot_offset(state_type, "key"),       slot_offset(state_type, "hooked"), slot_offset(fp_type, "view"),
        slot_offset(fp_type, "last"),         slot_offset(ca_type, "table"),   slot_offset(ca_type, "walk"),
        slot_offset(ca_type, "pin"),          slot_offset(hp_type, "seeded"),  slot_offset(ca_type, "flat"),
        slot_offset(ca_type, "sites"),        slot_offset(hp_type, "walked"),
    };
    if (PyErr_Occurred())
        return NULL;
    hp_now = offsets[0], hp_states = offsets[1], hp_record = offsets[2], hp_unattributed = offsets[3];
    hp_raised = offsets[4], sn_active = offsets[5], sn_sink = offsets[6], sn_strict = offsets[7];
    sn_profile_hook = offsets[8], sn_cache = offsets[9], ca_ids = offsets[10];
    st_busy = offsets[11], st_pending = offsets[12], st_frames = offsets[13], st_epoch = offsets[14];
    st_key = offsets[15], st_hooked = offsets[16], fp_view = offsets[17], fp_last = offsets[18];
    ca_table = offsets[19], ca_walk = offsets[20], ca_pin = offsets[21], hp_seeded = offsets[22];
    ca_flat = offsets[23], ca_sites = offsets[24], hp_walked = offsets[25];
    Py_XSETREF(hot_path_type, (PyTypeObject *)Py_NewRef(hp_type));
    Py_XSETREF(snapshot_type, (PyTypeObject *)Py_NewRef(sn_type));
    Py_XSETREF(cache_type, (PyTypeObject *)Py_NewRef(ca_type));
    Py_XSETREF(thread_state_type, (PyTypeObject *)Py_NewRef(state_type));
    Py_XSETREF(fingerprint_type, (PyTypeObject *)Py_NewRef(fp_type));
    Py_RETURN_NONE;
}
