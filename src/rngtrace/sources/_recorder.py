"""The one recording wrapper, ``recorder``: a call's event, in Python or through the C Recorder.

Its Python parts, made here as closures over one wrapper's settings (the hot path
in pure mode reads cells, not attributes): ``record_call`` makes and records an
outermost call, ``after_seed`` records a seed once it returned, ``record_through``
a library's own calls outside any recorded call. Where the C accelerator is built a
wrapper gets its ``Recorder`` in front, the same protocol one-to-one.
"""

from __future__ import annotations

from _thread import get_ident
from collections.abc import Callable
from types import BuiltinFunctionType, FrameType, MethodType
from typing import Any

from .._hotpath import SPEEDUPS as _speedups
from .._kinds import DRAW, RESTORE, SEED
from .._paths import PACKAGE_DIR
from ._source import library_of
from ._wrapping import (
    Condition,
    Through,
    Wrapper,
    call_busy,
    checked_call,
    entry,
    moved_note,
    named,
    recorded_by_catchall,
    reduce_as_original,
    seed_detail,
)


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
    restored: Callable[[tuple, dict], str | None] | None = None,
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
    as that outer call (see ``Through``); ``restored(args, kwargs)`` gives the detail
    of a seed that put back a state handed out earlier (recorded as a restore; None:
    a seed). Nested calls (``random.randint`` calling
    ``getrandbits``) are part of the outer call. Where the C accelerator is built a
    wrapper gets its ``Recorder`` in front, the same protocol one-to-one; this
    Python wrapper stays the reference and the path of every unusual call.
    """
    is_draw = kind == DRAW
    after_seed = seed_recorder(rec, stream, api, seeded, owner is not None or method, restored)
    record_call = call_recorder(rec, stream, kind, api, original, count_of, place, strict_check, after_seed)
    record_through = through_recorder(rec, stream, kind, api, original, through) if through is not None else None
    # A seed the caller's ``takes`` may decline, or a restore, stays with the Python wrapper; ``owner``
    # the C Recorder checks itself.
    declines = takes is not None or restored is not None
    if owner is not None:
        takes = _on_owner(owner, takes)
    library = library_of(stream)
    wrapper = entry(rec, original, record_call, takes, library, through, record_through)
    if not accelerate or _speedups is None or (not is_draw and declines):
        return Wrapper.make(wrapper, original)
    specific = _c_arguments(is_draw, place, draws_if, seeded, owner is not None or method, after_seed)
    return _c_recorder(rec, stream, kind, api, wrapper, original, owner, count_of, library, through, specific)


def _c_recorder(
    rec: Any,
    stream: str,
    kind: str,
    api: str,
    wrapper: Callable,
    original: Callable,
    owner: Any,
    count_of: Callable | None,
    library: tuple,
    through: Through | None,
    specific: dict[str, Any],
) -> Callable:
    """The C ``Recorder`` in front of the Python ``wrapper``: the same protocol, one-to-one."""
    assert _speedups is not None  # the caller's check
    # A call from these files inside a recorded call is part of it (``entry``'s rule, asked in C too).
    inside = (*library, PACKAGE_DIR)
    made = _speedups.Recorder(
        wrapper,
        original,
        owner,
        rec.hot,
        rec.fingerprint(stream),
        rec.stream_lock(stream),
        stream,
        kind,
        api,
        moved_note(api),
        count_of,
        inside=inside,
        through=None if through is None else through.files,
        **specific,
    )
    named(made, original)
    # Looked up on the instance first: the same rule as the Python wrapper's.
    made.__reduce_ex__ = MethodType(reduce_as_original, made)
    return made


def _on_owner(owner: Any, takes: Callable[[tuple, dict], bool] | None) -> Callable[[tuple, dict], bool]:
    """``takes`` narrowed to calls on ``owner`` (the singleton) as their first argument."""
    if takes is None:
        return lambda args, kwargs: bool(args) and args[0] is owner
    own = takes
    return lambda args, kwargs: bool(args) and args[0] is owner and own(args, kwargs)


def _c_arguments(
    is_draw: bool,
    place: Callable | None,
    draws_if: Callable | None,
    seeded: Callable | None,
    past_instance: bool,
    after_seed: Callable,
) -> dict[str, Any]:
    """The C Recorder's arguments that differ between a draw and a seed."""
    if is_draw:
        placing = {} if place is None else _placing(place)
        # ``draws_if``: the part of ``takes`` the C Recorder asks itself (dropout only draws in training),
        # in C where it is a declared Condition.
        declared = isinstance(draws_if, Condition)
        return {
            **placing,
            "takes": None if declared else draws_if,
            "condition": draws_if.spec if declared else None,  # type: ignore[union-attr]
        }
    if seeded is None:
        # A seed on its own stream: the C Recorder makes the call and records it (where its value is: past
        # the instance of a method), as after_seed would, with no Python frame for its bookkeeping.
        return {"seed_argument": 1 if past_instance else 0}
    return {"after": after_seed}  # a seed on a stream its arguments name: after_seed records it


def seed_recorder(
    rec: Any,
    stream: str,
    api: str,
    seeded: Callable[[tuple, dict], str] | None,
    skip_self: bool,
    restored: Callable[[tuple, dict], str | None] | None = None,
) -> Callable[[Any, FrameType | None, tuple, dict], None]:
    """What records a seed once it returned (``skip_self``: the first argument is the instance).

    ``restored(args, kwargs)``: the detail of a seed that put back a state handed out
    earlier, a restore ("": where it was saved is unknown); None: a seed.
    """
    record, seed_recorded = rec.record, rec.seed_recorded

    def after_seed(st: Any, frame: FrameType | None, args: tuple, kwargs: dict) -> None:
        """A seed returned: record it, and start the stream's fingerprint (and its digest) anew."""
        where = seeded(args, kwargs) if seeded is not None else stream
        saved = restored(args, kwargs) if restored is not None else None
        if saved is not None:
            record(where, RESTORE, api, None, frame, saved or None, st)
        else:
            detail = seed_detail(args[1:] if skip_self else args, kwargs)
            record(where, SEED, api, None, frame, detail, st)
        seed_recorded(stream, where)

    return after_seed


def call_recorder(
    rec: Any,
    stream: str,
    kind: str,
    api: str,
    original: Callable,
    count_of: Callable[[Any, tuple, dict], int | None] | None,
    place: Callable[[Any], tuple[str | None, int | None]] | None,
    strict_check: Callable[[FrameType | None, tuple, dict], None] | None,
    after_seed: Callable[[Any, FrameType | None, tuple, dict], None],
) -> Callable[[Any, FrameType | None, tuple, dict], Any]:
    """What makes and records one outermost call of ``original``: the Python wrapper's hot path."""
    hot = rec.hot
    fingerprint = rec.fingerprint(stream)
    lock = rec.stream_lock(stream)
    record = rec.record
    is_draw = kind == DRAW
    moved = moved_note(api)

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

    return record_call


def through_recorder(
    rec: Any, stream: str, kind: str, api: str, original: Callable, through: Through
) -> Callable[[Any, FrameType, tuple, dict], Any]:
    """What records a library's own call to ``original`` outside any recorded call, as its outer call."""
    fingerprint = rec.fingerprint(stream)
    lock = rec.stream_lock(stream)
    record = rec.record
    moved = moved_note(api)

    def record_through(st: Any, frame: FrameType, args: tuple, kwargs: dict) -> Any:
        """``frame``, the library's own code, calls this in a call nothing recorded: record that outer call once."""
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

    return record_through


def _placing(place: Callable) -> dict[str, Any]:
    """A torch draw's Recorder arguments: its results are placed by device, a CPU tensor's count read in place."""
    import torch  # only for torch's wrappers, whose source imported it already

    from ._torch_tensor import tensor_layout

    return {"tensor_type": torch.Tensor, "tensor_layout": tensor_layout(), "place": place, "slow_keyword": "generator"}


def draw_wrapper(rec: Any, stream: str, api: str, original: Callable, count_of: Callable | None) -> Callable:
    """Wrap a drawing function; ``count_of(result, args, kwargs)`` counts the values drawn (None: one)."""
    return recorder(rec, stream, DRAW, api, original, count_of=count_of)


def seed_wrapper(rec: Any, stream: str, api: str, original: Callable) -> Callable:
    """Wrap a reseeding function; the seed argument is kept as the event's detail."""
    return recorder(rec, stream, SEED, api, original)


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


def method_in_place(method: Any) -> bool:
    """Whether bound method ``method`` can record in place (its ``__func__`` the wrapper while hooked).

    False without the accelerator: the method is then replaced where a module holds it.
    """
    return _speedups is not None and type(method) is MethodType


def inplace_count(args: tuple, kwargs: dict, name: str = "x") -> int | None:
    """Values drawn by an in-place shuffle: the length of the sequence it shuffled."""
    seq = args[0] if args else kwargs.get(name)
    try:
        return len(seq)  # type: ignore[arg-type]
    except TypeError:
        return None
