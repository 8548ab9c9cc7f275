"""The Python recording wrapper's parts: the entry every call passes, the recorded call, pickling.

``entry`` decides whether a call is recorded; ``checked_call`` makes it under the
stream's lock, noticing a move nobody recorded first; ``Wrapper`` stands in a
namespace as the original does (called, bound, pickled); ``Through`` records a
library's own methods calling each other outside a recorded call; ``Condition``
is a declared test of a call's arguments that the C Recorder evaluates too.
"""

from __future__ import annotations

import functools
import importlib
import operator
import sys
from _thread import get_ident
from collections.abc import Callable, Iterable
from types import FrameType, FunctionType, MethodType
from typing import Any, ClassVar

from .._caller import call_as, is_stand_in
from .._kinds import DRAW, SEED
from .._paths import PACKAGE_DIR


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
    module = getattr(original, "__module__", None)
    if not module:
        import pickle  # only here: a traced child's start does not import it

        module = pickle.whichmodule(original, reduced)  # type: ignore[attr-defined]
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
        named(wrapper, original)
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

    return named(rngtrace_wrapper, original)


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


def named(wrapper: Callable, original: Callable) -> Callable:
    """Carry the original's name and docstring; ``__wrapped__`` keeps its signature."""
    try:
        functools.update_wrapper(wrapper, original)
    except (AttributeError, TypeError):  # a builtin without some attribute
        wrapper.__wrapped__ = original  # type: ignore[attr-defined]
    return wrapper
