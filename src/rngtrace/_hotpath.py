"""What a recording wrapper reads on every call: one object with fixed fields.

The C accelerator (``_speedups/``, declared in ``_speedups.pyi``) and the
Python wrappers read the same things, and only these: ``HotPath.now`` (a
``Snapshot`` of what the hub wants right now), ``HotPath.states`` (each
thread's ``ThreadState``) and the hub's callbacks. ``configure()`` hands
the slot layouts to the accelerator once; a renamed slot fails there, loudly,
instead of silently sending every draw down the slow path.

A ``Snapshot`` is never changed, only replaced: a wrapper reads ``hot.now``
once and sees the sessions, their sink and the stack table as one consistent
set, whatever another thread starts or stops meanwhile.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Callable
from types import ModuleType
from typing import Any

from ._threads import Fingerprint, ThreadState


class FrameMode(enum.Enum):
    """How a thread's cache of live frames is kept exact (see ``_stack``)."""

    WALK = "walk"  # no cache: every capture walks the whole stack
    MONITORING = "monitoring"  # 3.12+: sys.monitoring reports frame exits
    PROFILE = "profile"  # 3.10/3.11: the profile hook reports exits, per hooked thread
    PINNED = "pinned"  # frames are held, and a Sweeper drops each soon after it finishes


class Cache:
    """A stack table in one frame mode: a thread's frame cache is valid only for the Cache it was made under."""

    __slots__ = ("ids", "table", "mode", "walk", "pin", "flat", "sites")

    def __init__(self, table: Any, mode: FrameMode) -> None:
        #: the table's interning dict, (parent node, id(code), f_lasti) -> node
        self.ids: dict = table.ids
        self.table = table
        self.mode = mode
        #: what the C walk reads and writes (``StackTable.walk_state``): a draw whose stack the
        #: thread's cache does not know is walked and interned there, with no Python call
        self.walk: tuple = table.walk_state
        #: the cache holds its frames (no hook reports their exits)
        self.pin = mode is FrameMode.PINNED
        #: in frame mode WALK, the table's capture with no cache of live frames (``capture_flat``),
        #: which a draw or seed recorded in C calls; None in the other modes
        self.flat: Callable | None = table.capture_flat if mode is FrameMode.WALK else None
        #: what a draw past max_events recorded in C reads (``StackTable.site_state``): its call-site
        #: form is walked there, and counted once the table holds it
        self.sites: tuple = table.site_state


class Snapshot:
    """What the hub wants now; replaced as a whole whenever any of it changes."""

    __slots__ = ("active", "sink", "strict", "profile_hook", "cache")

    def __init__(
        self,
        active: tuple,
        sink: tuple | None,
        strict: bool,
        profile_hook: Callable | None,
        cache: Cache,
    ) -> None:
        #: the active sessions (empty: every wrapper passes calls straight through)
        self.active = active
        #: (raw list, max_events, stream names, trace, its depth) when exactly one trace records
        #: and none warns or raises: the fast path appends there
        self.sink = sink
        #: some trace asked for on_draw="warn" or "raise": every draw takes the Python path
        self.strict = strict
        #: the catch-all's profile function on 3.10/3.11, which wrappers step aside from
        self.profile_hook = profile_hook
        self.cache = cache


class HotPath:
    """The one object the wrappers read; the hub writes it."""

    __slots__ = ("now", "states", "record", "unattributed", "raised", "seeded", "walked")

    def __init__(
        self,
        now: Snapshot,
        record: Callable,
        unattributed: Callable,
        raised: Callable,
        seeded: Callable,
        walked: Callable,
    ) -> None:
        self.now = now
        #: OS thread ident -> ThreadState; one dict for the process, cleared, never replaced
        self.states: dict[int, Any] = {}
        #: hub.record(stream, kind, api, count, frame, detail, st): the general path
        self.record = record
        #: hub.unattributed(stream, frame, note): a move no wrapper recorded
        self.unattributed = unattributed
        #: hub.raised(stream, kind, api, frame, st, error): a recorded call raised
        self.raised = raised
        #: hub.seed_recorded(stream): a seed was recorded, its fingerprint is re-keyed
        self.seeded = seeded
        #: walked(): a draw's whole stack was walked (frame mode WALK), counted towards pinning
        self.walked = walked


def configure(speedups: Any) -> None:
    """Hand the slot layouts of the hot-path types to the C accelerator."""
    speedups.configure(HotPath, Snapshot, Cache, ThreadState, Fingerprint)


def _load() -> ModuleType | None:
    """The C accelerator, configured; None when it is not built or ``RNGTRACE_PURE`` turns it off."""
    if os.environ.get("RNGTRACE_PURE"):
        return None
    try:
        from . import _speedups
    except ImportError:  # built without a compiler: the Python wrappers do everything
        return None
    configure(_speedups)
    return _speedups


#: The one place the C accelerator is loaded: every other module asks here, so one switch
#: (``RNGTRACE_PURE=1``) turns every C path off together.
SPEEDUPS: ModuleType | None = _load()
