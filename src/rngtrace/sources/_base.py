"""What every stream source provides, and the wrappers that record a call.

A source describes a stream: which attributes to patch, how to read and
restore the stream's state, and how to recognise one of its callables seen by
the catch-all hook. It never patches anything itself: the hub applies the
patches it lists and undoes them.
"""

from __future__ import annotations

import functools
import os
import sys
from _thread import get_ident
from abc import ABC, abstractmethod
from types import FrameType
from typing import Any, Callable, ClassVar, Iterable, Optional

from .._threads import Fingerprint, ThreadState
from ..trace import DRAW, SEED

try:
    from .. import _speedups
except ImportError:  # built without a compiler: the Python wrappers do everything
    _speedups = None
if os.environ.get("RNGTRACE_PURE"):
    _speedups = None
if _speedups is not None:
    _speedups.configure(ThreadState, Fingerprint)

# classify() returns this for a call made inside the stream's own library,
# whose public call site was (or will be) seen on its own: skip it for good.
INTERNAL = "internal"

Patch = tuple  # (parent object, attribute name, replacement callable)
Hit = tuple  # (stream, kind, api, start frame, detail)


class Source(ABC):
    """A global random stream: what to hook, how to read and restore its state."""

    name: ClassVar[str]  # the stream name users pass in ``streams=``
    module: ClassVar[str]  # the module whose import makes the stream exist
    #: the isolated replacement, named in the log's hint
    hint: ClassVar[str]
    #: whether a c_call profile hook can see this stream's callables (C builtins, not Cython)
    profile_visible: ClassVar[bool] = True

    def prepare(self) -> None:
        """Get the library ready before each install (fill caches that must not see a patch)."""

    def patches(self, hub: Any) -> Iterable[Patch]:
        """The attributes to replace while tracing, with their replacements.

        Called once per process: the hub keeps the wrappers for later installs.
        """
        return ()

    def owners(self) -> Iterable[object]:
        """Objects whose bound methods draw from this stream (the singletons)."""
        return ()

    def functions(self) -> Iterable[object]:
        """Unbound callables that draw from or seed this stream (the originals)."""
        return ()

    def keep_types(self) -> tuple[type, ...]:
        """Types whose methods may draw from this stream through another instance later."""
        return ()

    def classify(self, callee: Any, frame: FrameType, profile: bool) -> Optional[Hit | str]:
        """Describe a call the catch-all hook saw, INTERNAL, or None to ignore it."""
        return None

    @abstractmethod
    def state(self) -> dict[str, Any]:
        """The state of each sub-stream, keyed by stream name."""

    @abstractmethod
    def restore(self, states: dict[str, Any]) -> None:
        """Put back states returned by ``state()``."""

    def fingerprint(self) -> Optional[Any]:
        """A ctypes view of the stream's state whose ``.value`` changes with every draw, or None.

        The hub reads it before and after each recorded call to notice draws
        nobody recorded, between events rather than only at the end. Reading it
        must cost next to nothing: it is on the hot path.
        """
        return None

    def same(self, a: Any, b: Any) -> bool:
        """Whether two states of one sub-stream are equal."""
        return bool(a == b)

    def forget(self) -> None:
        """Drop any reference kept while tracing (called when hooks come off)."""


def recording_wrapper(
    hub: Any,
    stream: str,
    kind: str,
    api: str,
    original: Callable,
    count_of: Optional[Callable[[Any, tuple, dict], Optional[int]]] = None,
    owner: Any = None,
) -> Callable:
    """Wrap a drawing or seeding function so each outermost call is recorded.

    ``count_of(result, args, kwargs)`` counts the values a draw returned; None
    means one.

    Nested calls (``random.randint`` calling ``getrandbits``, ``torch.manual_seed``
    seeding CUDA) are part of the outer call and are not recorded again. With
    ``owner``, the wrapper replaces a method on a class and records only calls
    on that one instance (the singleton); other instances pass straight through.
    A draw wrapper gets the C accelerator in front of it where that is built: the
    Python wrapper is then the reference, and the path of every unusual call.
    """
    fingerprint = hub.fingerprint(stream)
    lock = hub.stream_lock(stream)
    acquire, release = lock.acquire, lock.release
    record = hub.record
    is_draw = kind == DRAW
    moved = moved_note(api)

    def record_call(st: Any, frame: FrameType, args: tuple, kwargs: dict) -> Any:
        if st.pending is not None and recorded_by_catchall(st, frame):
            # C code is calling one of our methods inside a call the catch-all recorded.
            return call_busy(st, original, args, kwargs)
        # The lock keeps another thread's draw from landing between the
        # fingerprint read before the call and the one after it.
        acquire()
        try:
            if is_draw and hub.strict:
                hub.check(stream, api, frame)
            result = checked_call(hub, stream, fingerprint, moved, st, frame, original, args, kwargs)
            if is_draw:
                # A float is one value whatever the function (the usual answer: no call to ask).
                count = 1 if count_of is None or type(result) is float else count_of(result, args, kwargs)
                record(stream, DRAW, api, count, frame, None, st)
                fingerprint.take()
            else:
                record(stream, SEED, api, None, frame, seed_detail(args[1:] if owner is not None else args, kwargs), st)
                hub.reseeded(stream)
        finally:
            release()
        return result

    takes = None if owner is None else (lambda args, kwargs: bool(args) and args[0] is owner)
    wrapper = entry(hub, original, record_call, takes)
    return accelerated(wrapper, hub, stream, kind, api, original, count_of, owner)


def entry(
    hub: Any,
    original: Callable,
    call: Callable[[Any, Optional[FrameType], tuple, dict], Any],
    takes: Optional[Callable[[tuple, dict], bool]] = None,
) -> Callable:
    """The Python wrapper around ``original``: each outermost call it ``takes`` goes to ``call``.

    ``call(thread state, caller's frame, args, kwargs)`` makes and records the call.
    With no trace active, inside another recorded call (the thread is busy) or
    declined by ``takes``, a call goes straight to ``original``.
    """
    states, new_state = hub.states, hub.state
    getframe = sys._getframe

    def rngtrace_wrapper(*args: Any, **kwargs: Any) -> Any:
        if not hub.active:
            return original(*args, **kwargs)
        st = states.get(get_ident()) or new_state()
        if st.busy or (takes is not None and not takes(args, kwargs)):
            return original(*args, **kwargs)
        try:
            frame: Optional[FrameType] = getframe(1)
        except ValueError:  # called by C code with no Python frame above it: no stack to show
            frame = None
        if hub.profile_hook is None:
            return call(st, frame, args, kwargs)
        return stepping_aside(hub, st, call, frame, args, kwargs)

    return _named(rngtrace_wrapper, original)


def moved_note(api: str) -> str:
    """What an unattributed event noticed before a call to ``api`` says."""
    return f"moved since the previous recorded event; noticed before this {api} call"


def checked_call(
    hub: Any, stream: str, fingerprint: Any, moved: str, st: Any, frame: Optional[FrameType],
    original: Callable, args: tuple, kwargs: dict,
) -> Any:
    """Make a recorded call, under the stream's lock: a move nobody recorded is noticed first.

    The thread is busy during the call, so what it calls inside is part of it.
    A call that raises is taken as explaining whatever it moved.
    """
    view = fingerprint.view
    if view is not None:
        previous = fingerprint.last
        if previous is not None and view.value != previous:
            hub.unattributed(stream, frame, moved)
    st.busy = True
    try:
        return original(*args, **kwargs)
    except BaseException:
        hub.rebase(stream)
        raise
    finally:
        st.busy = False


def accelerated(
    wrapper: Callable,
    hub: Any,
    stream: str,
    kind: str,
    api: str,
    original: Callable,
    count_of: Optional[Callable] = None,
    owner: Any = None,
    **placing: Any,
) -> Callable:
    """The C fast path in front of a Python draw wrapper, where the C accelerator is built.

    The Recorder records the common case (no on_draw policy, no profiler but the
    catch-all's own) itself and hands every other call to ``wrapper``, which
    stays the reference for what is recorded. ``placing`` (torch) names the tensor type,
    the function that places any other result, and the keyword that always
    takes the Python path.
    """
    if _speedups is None or kind != DRAW:
        return wrapper
    recorder = _speedups.Recorder(
        wrapper, original, owner, hub, hub.fingerprint(stream), hub.stream_lock(stream),
        stream, kind, api, moved_note(api), count_of, **placing,
    )
    return _named(recorder, original)


def stepping_aside(hub: Any, st: Any, call: Callable, frame: Optional[FrameType], args: tuple, kwargs: dict) -> Any:
    """Run ``call`` with a profile-hook catch-all (3.10/3.11) off: it has nothing to see in there."""
    hook = hub.profile_hook
    if hook is not None and sys.getprofile() is hook:
        st.hooked = True  # frame exits on this thread are seen: stacks may use the cache
        sys.setprofile(None)
        try:
            return call(st, frame, args, kwargs)
        finally:
            sys.setprofile(hook)
    st.hooked = False
    st.frames = None  # frame exits on this thread go unseen: its cache cannot be trusted
    return call(st, frame, args, kwargs)


def recorded_by_catchall(st: Any, frame: Optional[FrameType]) -> bool:
    """Whether the catch-all just recorded the call this wrapper runs inside."""
    pending = st.pending
    if pending is None:
        return False
    st.pending = None
    return pending[0] == id(frame) and pending[1] == frame.f_lasti


def call_busy(st: Any, original: Callable, args: tuple, kwargs: dict) -> Any:
    """Call ``original`` with nested calls marked as part of it."""
    st.busy = True
    try:
        return original(*args, **kwargs)
    finally:
        st.busy = False


def draw_wrapper(hub: Any, stream: str, api: str, original: Callable, count_of: Optional[Callable]) -> Callable:
    """Wrap a drawing function; ``count_of(result, args, kwargs)`` counts the values drawn (None: one)."""
    return recording_wrapper(hub, stream, DRAW, api, original, count_of)


def seed_wrapper(hub: Any, stream: str, api: str, original: Callable) -> Callable:
    """Wrap a reseeding function; the seed argument is kept as the event's detail."""
    return recording_wrapper(hub, stream, SEED, api, original)


def inplace_count(args: tuple, kwargs: dict, name: str = "x") -> Optional[int]:
    """Values drawn by an in-place shuffle: the length of the sequence it shuffled."""
    seq = args[0] if args else kwargs.get(name)
    try:
        return len(seq)
    except TypeError:
        return None


def seed_detail(args: tuple, kwargs: dict) -> str | None:
    """A short description of the seed argument, or None where there is none."""
    if args:
        value = args[0]
    elif kwargs:
        value = next(iter(kwargs.values()))
    else:
        return None
    if value is None or isinstance(value, (int, float, str, bytes)):
        text = repr(value)
    else:
        text = f"<{type(value).__name__}>"  # a state tuple or tensor: say what, not all of it
    return text if len(text) <= 40 else text[:37] + "..."


def _named(wrapper: Callable, original: Callable) -> Callable:
    """Carry the original's name and docstring; ``__wrapped__`` keeps its signature."""
    try:
        functools.update_wrapper(wrapper, original)
    except (AttributeError, TypeError):  # a builtin without some attribute
        wrapper.__wrapped__ = original  # type: ignore[attr-defined]
    return wrapper
