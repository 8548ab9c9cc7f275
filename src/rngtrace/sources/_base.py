"""What every stream source provides, and the wrappers that record a call.

A source describes a stream: which attributes to patch, how to read and
restore the stream's state, and how to recognise one of its callables seen by
the catch-all hook. It never patches anything itself: the hub applies the
patches it lists and undoes them.
"""

from __future__ import annotations

import functools
import importlib
import operator
import os
import pickle
import sys
from _thread import get_ident
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from types import BuiltinFunctionType, FrameType, FunctionType, MethodType
from typing import Any, ClassVar

from .._caller import call_as, is_stand_in
from .._hotpath import SPEEDUPS as _speedups
from .._model import DRAW, SEED
from .._paths import PACKAGE_DIR
from .._streams import Stream

# classify() returns this for a call made inside the stream's own library,
# whose public call site was (or will be) seen on its own: skip it for good.
INTERNAL = "internal"

Patch = tuple  # (parent object, attribute name, replacement callable), or (builtin, IN_PLACE, wrapper)
#: A patch's attribute name for a builtin that records in place: the builtin object itself calls
#: the wrapper (``_speedups.hook_builtins``), so code that holds it or checks its identity
#: (torch.compile's guards) sees the same object traced or not.
IN_PLACE = "<in place>"
Hit = tuple  # (stream, kind, api, start frame, detail)


class Source(ABC):
    """A global random stream: what to hook, how to read and restore its state."""

    #: the stream's declaration (``_streams.Stream``): everything the rest of rngtrace reads about it
    stream: ClassVar[Stream]
    name: ClassVar[str]  # the stream name users pass in ``streams=`` (the declaration's)
    module: ClassVar[str]  # the module whose import makes the stream exist (the declaration's)
    #: whether a c_call profile hook can see this stream's callables (C builtins, not Cython)
    profile_visible: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        declared = cls.__dict__.get("stream")
        if declared is not None:
            cls.name, cls.module = declared.name, declared.module

    def prepare(self) -> None:  # noqa: B027 (optional: most sources have nothing to prepare)
        """Get the library ready before each install (fill caches that must not see a patch)."""

    def patches(self, hub: Any) -> Iterable[Patch]:
        """The attributes to replace while tracing, with their replacements.

        Called once per process: the hub keeps the wrappers for later installs.
        """
        return ()

    def owners(self) -> Iterable[object]:
        """Objects whose bound methods draw from this stream (the singletons)."""
        return ()

    def owners_version(self) -> int:
        """Changes whenever ``owners()`` would return other objects (cheap: read at every trace)."""
        return 0

    def functions(self) -> Iterable[object]:
        """Unbound callables that draw from or seed this stream (the originals)."""
        return ()

    def keep_types(self) -> tuple[type, ...]:
        """Types whose methods may draw from this stream through another instance later."""
        return ()

    def classify(self, callee: Any, frame: FrameType, profile: bool) -> Hit | str | None:
        """Describe a call the catch-all hook saw, INTERNAL, or None to ignore it."""
        return None

    @abstractmethod
    def state(self) -> dict[str, Any]:
        """The state of each sub-stream, keyed by stream name."""

    @abstractmethod
    def restore(self, states: dict[str, Any]) -> None:
        """Put back states returned by ``state()``."""

    def state_bytes(self, state: Any) -> bytes | None:
        """One sub-stream's ``state()`` as bytes, for its digest; None: digest its canonical form.

        Equal bytes must mean the same numbers to come: a fork's children that hold
        equal digests draw the same numbers (the ``duplicate`` finding).
        """
        return None

    def fingerprint(self) -> Any | None:
        """A ctypes view of the stream's state whose ``.value`` changes with every draw, or None.

        The hub reads it before and after each recorded call to notice draws
        nobody recorded, between events rather than only at the end. Reading it
        must cost next to nothing: it is on the hot path.
        """
        return None

    def snapshot(self) -> dict[str, Any]:
        """What the end-of-block check compares, per sub-stream: the fingerprint where it sees a whole state.

        Read at every block's start and end, so it must be cheap; ``state()`` is the
        full read, for streams whose fingerprint misses part of their state.
        """
        return self.state()

    def full(self) -> dict[str, Any]:
        """The whole state of each sub-stream, for comparing two moments (``same``), not for restoring.

        A reseed can leave the fingerprint as it found it (``random.seed(x)`` for any x resets
        the twister's index and first word alike): where a reseed must be seen, this is compared.
        ``state()`` unless a source reads it faster (in place).
        """
        return self.state()

    def same(self, a: Any, b: Any) -> bool:
        """Whether two states (or two snapshots) of one sub-stream are equal."""
        return bool(a == b)

    def forget(self) -> None:  # noqa: B027 (optional: most sources keep nothing)
        """Drop any reference kept while tracing (called when hooks come off)."""

    def starts_fixed(self) -> bool | None:
        """Whether the stream stands where the library's fixed default seed puts it (None: cannot say).

        Asked once, where a trace sees the program start: a stream that starts from a fixed
        seed draws alike in every run before any seed, one that starts from OS entropy does not.
        """
        return None

    @classmethod
    def settings(cls) -> dict[str, bool]:
        """The library's flags that decide whether its results repeat, read once when a trace ends.

        Read only where the trace has an event of this stream; the findings read them
        (``settings``). Empty for a library with none.
        """
        return {}


def same_state(source: Source, old: Any, new: Any) -> bool:
    """Whether two snapshots of one sub-stream are equal."""
    if old.__class__ is bytes and new.__class__ is bytes:  # two in-place reads: no need to ask the source
        return old == new
    return source.same(old, new)


def unmoved(source: Source, before: dict, now: dict) -> bool:
    """Whether every sub-stream of ``source`` is as ``before`` (its ``snapshot()``) saw it ``now``."""
    if now.keys() != before.keys():
        return False
    # A loop, not all() over a generator: a Ctrl-C landing in a generator being closed is
    # printed and dropped ("Exception ignored in"), and the block's exit would go on without it.
    for stream, state in now.items():
        if not same_state(source, before[stream], state):
            return False
    return True


def _dropout_test(training: Any, p: Any) -> bool:
    return bool(training) and 0 < p < 1  # p == 1 zeroes the input without drawing


class Condition:
    """Whether a call draws, from its arguments: a named test of a few parameters' values.

    Each parameter is ``(position, keyword, default)``: its value is the positional
    argument there, else the keyword argument, else the default. Declared rather than
    written as code so that the C Recorder evaluates the same test without calling
    back into Python (``spec``); calling the Condition evaluates it here. An argument
    the test cannot judge counts as a draw: the function will reject it and say why.
    """

    #: test name -> the test; _speedups/recorder.c implements each one-to-one
    TESTS: ClassVar[dict[str, Callable[..., bool]]] = {
        "dropout": _dropout_test,  # (training, p): draws in training with 0 < p < 1
        "truthy": bool,  # (training,): rrelu draws in training
        "positive": lambda p: p > 0,  # (dropout_p,): attention drops out
        "not_false": lambda train: train is not False,  # (train,): native_dropout's None means training
    }
    __slots__ = ("spec", "_test", "_params")

    def __init__(self, test: str, params: tuple[tuple[int, str, Any], ...]) -> None:
        self._test = self.TESTS[test]
        self._params = tuple(params)
        #: what the C Recorder reads: (test name, ((position, keyword, default), ...))
        self.spec = (test, self._params)

    def __call__(self, args: tuple, kwargs: dict) -> bool:
        try:
            return bool(
                self._test(
                    *[args[i] if len(args) > i else kwargs.get(name, default) for i, name, default in self._params]
                )
            )
        except Exception:  # arguments the function itself will reject: let it say so
            return True

    def __repr__(self) -> str:
        return f"Condition{self.spec!r}"


def recorder(
    rec: Any,
    stream: str,
    kind: str,
    api: str,
    original: Callable,
    *,
    count_of: Callable[[Any, tuple, dict], int | None] | None = None,
    owner: Any = None,
    takes: Callable[[tuple, dict], bool] | None = None,
    place: Callable[[Any], tuple[str | None, int | None]] | None = None,
    seeded: Callable[[tuple, dict], str] | None = None,
    strict_check: Callable[[FrameType | None, tuple, dict], None] | None = None,
    accelerate: bool = True,
    draws_if: Callable[[tuple, dict], bool] | None = None,
    method: bool = False,
    through: Through | None = None,
) -> Callable:
    """The one recording wrapper: each outermost call of ``original`` becomes an event.

    A draw's values are counted by ``count_of(result, args, kwargs)`` (None: one);
    ``place(result)`` (torch) says on which stream they landed and how many there
    were, with stream None for a result that drew nothing. A seed is recorded on
    ``stream``, or on ``seeded(args, kwargs)``. ``takes(args, kwargs)`` declines
    a call (an explicit generator); with ``owner``, only calls on that one instance
    (the singleton) are recorded; ``method`` says ``original`` is a method whose
    first argument is the instance (kept out of a seed's detail); ``through``
    records the library's own methods calling this one outside a recorded call
    as that outer call (see ``Through``). Nested calls (``random.randint`` calling
    ``getrandbits``) are part of the outer call. Where the C accelerator is built a
    wrapper gets its ``Recorder`` in front, the same protocol one-to-one; this
    Python wrapper stays the reference and the path of every unusual call.
    """
    hot = rec.hot
    fingerprint = rec.fingerprint(stream)
    lock = rec.stream_lock(stream)
    record = rec.record
    is_draw = kind == DRAW
    moved = moved_note(api)

    def after_seed(st: Any, frame: FrameType | None, args: tuple, kwargs: dict) -> None:
        """A seed returned: record it, and start the stream's fingerprint (and its digest) anew."""
        where = seeded(args, kwargs) if seeded is not None else stream
        detail = seed_detail(args[1:] if owner is not None or method else args, kwargs)
        record(where, SEED, api, None, frame, detail, st)
        rec.reseeded(stream)
        rec.seeded(where)

    def record_call(st: Any, frame: FrameType | None, args: tuple, kwargs: dict) -> Any:
        if st.pending is not None and recorded_by_catchall(st, frame):
            # C code is calling one of our methods inside a call the catch-all recorded.
            return call_busy(st, frame, original, args, kwargs)
        if is_draw and hot.now.strict:
            # Before the draw: on_draw="raise" leaves the stream as it was.
            if strict_check is not None:
                strict_check(frame, args, kwargs)
            else:
                rec.check(stream, api, frame)
        # The lock keeps another thread's draw from landing between the fingerprint read
        # before the call and the one after it. A with statement, not acquire() then try:
        # an interrupt (Ctrl-C) cannot land between taking the lock and guarding its release.
        with lock:
            # Busy until the call is recorded, not only while it runs: a finalizer drawing
            # during the bookkeeping is then its own event, not a move nobody recorded.
            was_busy = st.busy
            try:
                result = checked_call(rec, stream, fingerprint, moved, st, frame, original, args, kwargs, kind, api)
                if is_draw:
                    if place is not None:
                        where, count = place(result)
                    else:
                        # A float is one value whatever the function (the usual answer: no call to ask).
                        where, count = stream, 1
                    if where is not None:
                        if count_of is not None and type(result) is not float:
                            count = count_of(result, args, kwargs)
                        record(where, DRAW, api, count, frame, None, st)
                    fingerprint.take()
                else:
                    after_seed(st, frame, args, kwargs)
            finally:
                st.busy = was_busy
        return result

    def record_through(st: Any, frame: FrameType, args: tuple, kwargs: dict) -> Any:
        """``frame``, the library's own code, calls this in a call nothing recorded: record that outer call once."""
        assert through is not None
        top, user = through.outer(frame)
        if st.pending is not None and recorded_by_catchall(st, user):
            return call_busy(st, user, original, args, kwargs)  # the catch-all recorded the outer call
        tid = get_ident()
        with lock:
            was_busy = st.busy
            try:
                if through.last.get(tid) is top:
                    # A later call inside the outer call recorded already (sample() drawing k times).
                    result = call_busy(st, user, original, args, kwargs)
                else:
                    outer_kind, outer_api = through.describe(top, kind, api)
                    result = checked_call(
                        rec, stream, fingerprint, moved, st, user, original, args, kwargs, outer_kind, outer_api
                    )
                    through.last[tid] = top
                    record(stream, outer_kind, outer_api, None, user, None, st)
                fingerprint.take()
            finally:
                st.busy = was_busy
        return result

    # A seed the caller's ``takes`` may decline stays with the Python wrapper; ``owner`` the C Recorder
    # checks itself.
    declines = takes is not None
    if owner is not None:
        own = takes
        if own is None:
            takes = lambda args, kwargs: bool(args) and args[0] is owner  # noqa: E731
        else:
            takes = lambda args, kwargs: bool(args) and args[0] is owner and own(args, kwargs)  # noqa: E731
    library = library_of(stream)
    wrapper = entry(rec, original, record_call, takes, library, through, record_through)
    # A call from these files inside a recorded call is part of it (``entry``'s rule, asked in C too).
    inside = (*library, PACKAGE_DIR)
    if not accelerate or _speedups is None or (not is_draw and declines):
        return Wrapper.make(wrapper, original)
    if is_draw:
        placing = {} if place is None else {"tensor_type": _tensor_type(), "place": place, "slow_keyword": "generator"}
        # ``draws_if``: the part of ``takes`` the C Recorder asks itself (dropout only draws in training),
        # in C where it is a declared Condition.
        declared = isinstance(draws_if, Condition)
        specific = {
            **placing,
            "takes": None if declared else draws_if,
            "condition": draws_if.spec if declared else None,  # type: ignore[union-attr]
        }
    else:
        specific = {"after": after_seed}  # a seed: the C Recorder makes the call, after_seed records it
    recorder = _speedups.Recorder(
        wrapper,
        original,
        owner,
        hot,
        fingerprint,
        lock,
        stream,
        kind,
        api,
        moved,
        count_of,
        inside=inside,
        through=None if through is None else through.files,
        **specific,
    )
    _named(recorder, original)
    # Looked up on the instance first: the same rule as the Python wrapper's.
    recorder.__reduce_ex__ = MethodType(reduce_as_original, recorder)
    return recorder


def _tensor_type() -> Any:
    import torch  # only for torch's wrappers, whose source imported it already

    return torch.Tensor


def reduce_as_original(wrapper: Any, protocol: Any) -> Any:
    """Pickle ``wrapper`` as the function it stands for: what unpickles is the original.

    A builtin pickles by name; where that name leads to the original rather than to
    this wrapper (``F.scaled_dot_product_attention`` lives in ``torch._C._nn``),
    pickle would refuse the stand-in, so the name is looked up on unpickling instead.
    """
    original = wrapper.__wrapped__
    # A Python function (torch.manual_seed) pickles by its qualified name, as pickle saves one.
    reduced = original.__qualname__ if isinstance(original, FunctionType) else original.__reduce_ex__(protocol)
    if not isinstance(reduced, str):
        return reduced
    module = getattr(original, "__module__", None) or pickle.whichmodule(original, reduced)  # type: ignore[attr-defined]
    try:
        found: Any = sys.modules[module]
        for part in reduced.split("."):
            found = getattr(found, part)
    except (KeyError, AttributeError):
        found = None
    if found is wrapper or found is getattr(wrapper, "slow", None):
        return reduced
    return operator.attrgetter(reduced), (_Module(module),)


class _Module:
    """A module in a pickle, by name: unpickled by importing it."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __reduce__(self) -> Any:
        return importlib.import_module, (self.name,)


class Wrapper:
    """A Python recording wrapper as it stands in a namespace: called, bound and pickled like the original.

    A plain function would pickle by its name, find the original there after the
    trace (or our wrapper during it) and fail; this pickles as the function it
    stands for. Its ``__call__`` is the wrapper function itself, so no extra
    frame stands between the caller and the recording code.
    """

    __slots__ = ("__dict__", "__weakref__")
    # What ``make`` gives each wrapper (declared for the type checker; no attribute is made here).
    __call__: Callable[..., Any]
    __wrapped__: Callable[..., Any]

    @classmethod
    def make(cls, function: Callable, original: Callable) -> Wrapper:
        """A Wrapper whose calls run ``function``, named and pickled as ``original``."""
        kind = type(cls.__name__, (cls,), {"__slots__": (), "__call__": staticmethod(function)})
        wrapper: Wrapper = object.__new__(kind)
        _named(wrapper, original)
        wrapper.__dict__["__wrapped__"] = original
        return wrapper

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        # On a class (RandomState, Tensor) it is a method, as the function it replaces.
        return self if instance is None else MethodType(self, instance)

    def __reduce_ex__(self, protocol: Any) -> Any:
        return reduce_as_original(self, protocol)

    def __repr__(self) -> str:
        return f"<rngtrace wrapper of {self.__wrapped__!r}>"


class Through:
    """A library's methods calling each other on the instance, in a call nothing recorded.

    ``random._inst.randint`` bound before tracing runs random.py's ``randint``
    unseen, which calls ``self.randrange``, then ``self.getrandbits``: the class's
    wrappers. Such a call, made from ``files`` outside any recorded call, is
    recorded as the outermost call of the library's code (``randint``), at the line
    that made it, once: its later calls (``sample`` draws k times) are part of it.
    """

    def __init__(self, files: tuple[str, ...], prefix: str, seeds: Iterable[str]) -> None:
        self.files = files
        self.prefix = prefix  # api = prefix + the outer method's name
        self.seeds = frozenset(seeds)
        #: per thread, the outer frame recorded last (held: its id cannot name another frame meanwhile)
        self.last: dict[int, FrameType] = {}

    def outer(self, frame: FrameType) -> tuple[FrameType, FrameType | None]:
        """The outermost frame of the library's code calling in, and the frame that called it."""
        top: FrameType = frame
        f = frame.f_back
        while f is not None and f.f_code.co_filename.startswith(self.files):
            top, f = f, f.f_back
        return top, f

    def describe(self, top: FrameType, kind: str, api: str) -> tuple[str, str]:
        """The outer call's kind and api; the inner call's where the outer one is no public method."""
        name = top.f_code.co_name
        if name.startswith(("_", "<")):
            return kind, api
        return (SEED if name in self.seeds else DRAW), self.prefix + name

    def forget(self) -> None:
        self.last.clear()


def entry(
    rec: Any,
    original: Callable,
    call: Callable[[Any, FrameType | None, tuple, dict], Any],
    takes: Callable[[tuple, dict], bool] | None = None,
    library: tuple[str, ...] = (),
    through: Through | None = None,
    call_through: Callable[[Any, FrameType, tuple, dict], Any] | None = None,
) -> Callable:
    """The Python wrapper around ``original``: each outermost call it ``takes`` goes to ``call``.

    ``call(thread state, caller's frame, args, kwargs)`` makes and records the call.
    With no trace active or declined by ``takes``, a call goes straight to
    ``original``; so does one made, inside another recorded call, by code of the
    stream's ``library`` (file prefixes) or rngtrace's: it is part of that call.
    Any other code drawing inside a recorded call (a finalizer, a signal handler,
    a callback) makes its own event; outside one, a call from ``through``'s files
    goes to ``call_through``. Every call is made as if from its caller's
    line (``call_as``), so a warning raised inside points there, not here.
    """
    hot = rec.hot
    states, new_state = hot.states, rec.state
    getframe = sys._getframe
    inside = (*library, PACKAGE_DIR)
    through_files = through.files if through is not None else None

    def rngtrace_wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            frame: FrameType | None = getframe(1)
        except ValueError:  # called by C code with no Python frame above it: no stack to show
            frame = None
        now = hot.now
        if not now.active:
            return call_as(frame, original, args, kwargs)
        st = states.get(get_ident()) or new_state()
        if takes is not None and not takes(args, kwargs):
            return call_as(frame, original, args, kwargs)
        if st.busy and (
            frame is None
            or frame is st.busy  # C code inside the recorded call: the caller's frame is still on top
            or frame.f_code.co_filename.startswith(inside)
            or is_stand_in(frame.f_code)
        ):
            return call_as(frame, original, args, kwargs)
        make = call
        if (
            through_files is not None
            and frame is not None
            and not st.busy
            and frame.f_code.co_filename.startswith(through_files)
        ):
            make = call_through  # type: ignore[assignment]
        if now.profile_hook is None:
            return make(st, frame, args, kwargs)
        return stepping_aside(now.profile_hook, st, make, frame, args, kwargs)

    return _named(rngtrace_wrapper, original)


def library_of(stream: str) -> tuple[str, ...]:
    """Where the code of ``stream``'s library lives: its calls inside a recorded call are part of it."""
    base = stream.split(".", 1)[0]
    declared = next(
        (
            cls.stream.module
            for cls in _source_classes()
            if cls.__dict__.get("stream") is not None and cls.stream.name == base
        ),
        base,
    )
    module = sys.modules.get(declared.split(".", 1)[0])  # the library's top package (numpy, not numpy.random)
    file = getattr(module, "__file__", None)
    if not file:
        return ()
    if not os.path.basename(file).startswith("__init__."):
        return (file,)  # a module of one file (the stdlib's random), not its directory
    return (os.path.dirname(file) + os.sep,)


def _source_classes() -> list[type[Source]]:
    """Every Source subclass defined so far (a package's too), nearest first."""
    found, todo = [], list(Source.__subclasses__())
    while todo:
        cls = todo.pop(0)
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return found


def moved_note(api: str) -> str:
    """What an unattributed event noticed before a call to ``api`` says."""
    return f"moved since the previous recorded event; noticed before this {api} call"


def checked_call(
    rec: Any,
    stream: str,
    fingerprint: Any,
    moved: str,
    st: Any,
    frame: FrameType | None,
    original: Callable,
    args: tuple,
    kwargs: dict,
    kind: str = DRAW,
    api: str = "",
) -> Any:
    """Make a recorded call, under the stream's lock: a move nobody recorded is noticed first.

    The thread is busy from here on (the caller puts back what it was once the call
    is recorded), so what the call makes inside is part of it. A call that raises
    is recorded where it moved the stream first (it drew, then failed).
    """
    nested = st.busy  # a finalizer or handler inside another recorded call, which moves the stream too
    view = fingerprint.view
    if view is not None and not nested:
        previous = fingerprint.last
        if previous is not None and view.value != previous:
            rec.unattributed(stream, frame, moved)
    st.busy = frame if frame is not None else True  # the caller's frame: see entry()
    try:
        return call_as(frame, original, args, kwargs)
    except BaseException as error:
        if not nested:
            rec.raised(stream, kind, api, frame, st, error)
        raise


def stepping_aside(hook: Callable, st: Any, call: Callable, frame: FrameType | None, args: tuple, kwargs: dict) -> Any:
    """Run ``call`` with a profile-hook catch-all (3.10/3.11) off: it has nothing to see in there."""
    if sys.getprofile() is hook:
        st.hooked = True  # frame exits on this thread are seen: stacks may use the cache
        try:
            sys.setprofile(None)
            return call(st, frame, args, kwargs)
        finally:
            sys.setprofile(hook)
    st.hooked = False
    st.frames = None  # frame exits on this thread go unseen: its cache cannot be trusted
    return call(st, frame, args, kwargs)


def recorded_by_catchall(st: Any, frame: FrameType | None) -> bool:
    """Whether the catch-all just recorded the call this wrapper runs inside."""
    pending = st.pending
    if pending is None:
        return False
    st.pending = None
    return frame is not None and pending[0] == id(frame) and pending[1] == frame.f_lasti and pending[2] is frame.f_code


def call_busy(st: Any, frame: FrameType | None, original: Callable, args: tuple, kwargs: dict) -> Any:
    """Call ``original`` with nested calls marked as part of it."""
    was_busy = st.busy
    st.busy = frame if frame is not None else True
    try:
        return call_as(frame, original, args, kwargs)
    finally:
        st.busy = was_busy


def draw_wrapper(rec: Any, stream: str, api: str, original: Callable, count_of: Callable | None) -> Callable:
    """Wrap a drawing function; ``count_of(result, args, kwargs)`` counts the values drawn (None: one)."""
    return recorder(rec, stream, DRAW, api, original, count_of=count_of)


def seed_wrapper(rec: Any, stream: str, api: str, original: Callable) -> Callable:
    """Wrap a reseeding function; the seed argument is kept as the event's detail."""
    return recorder(rec, stream, SEED, api, original)


def restore_wrapper(
    rec: Any, stream: str, api: str, original: Callable, current: Callable[[Any], bool], owner: object | None = None
) -> Callable:
    """Wrap a restore (``setstate``, ``set_rng_state``): recorded only where it changes the state.

    Frameworks save and restore a stream around work of their own (torch.compile's
    Dynamo restores ``random`` and torch at every compile): a restore of the state the
    stream already holds moves nothing, and is no seed of anybody's. ``current(state)``
    says whether ``state`` is the stream's state now; where it cannot tell (raises),
    the call is recorded.
    """
    skip = 1 if owner is not None else 0  # a method of the owner's: the state follows self
    fingerprint = rec.fingerprint(stream)
    lock = rec.stream_lock(stream)

    def restore(*args: Any, **kwargs: Any) -> Any:
        # The same state put back may still rewrite what the fingerprint reads (torch's
        # set_state rewrites its head): once the call returns, take the state as explained --
        # only where it was before, so a move nobody recorded is still reported.
        with lock:
            view, last = fingerprint.view, fingerprint.last
            clean = view is not None and last is not None and view.value == last
            result = original(*args, **kwargs)
            if clean:
                fingerprint.take()
        return result

    _named(restore, original)

    def changes(args: tuple, kwargs: dict) -> bool:
        state = args[skip] if len(args) > skip else next(iter(kwargs.values()), None)
        try:
            return not current(state)
        except Exception:  # noqa: BLE001 (a state it cannot compare: the call says what it is)
            return True

    wrapper = recorder(rec, stream, SEED, api, restore, takes=changes, owner=owner)
    wrapper.__dict__["__wrapped__"] = original  # named, signed and pickled as the original, not ``restore``
    return wrapper


def twin_of(fn: Any) -> Callable | None:
    """A builtin calling what ``fn`` does, for a wrapper to call while ``fn`` records in place.

    None where it cannot (no accelerator).
    """
    if _speedups is None or type(fn) is not BuiltinFunctionType:
        return None
    try:
        return _speedups.builtin_twin(fn)
    except TypeError:  # a builtin method of a class (METH_METHOD): patched as an attribute
        return None


def inplace_count(args: tuple, kwargs: dict, name: str = "x") -> int | None:
    """Values drawn by an in-place shuffle: the length of the sequence it shuffled."""
    seq = args[0] if args else kwargs.get(name)
    try:
        return len(seq)  # type: ignore[arg-type]
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
