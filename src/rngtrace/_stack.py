"""Cheap stack capture and interning: the hot path.

Stacks are interned as a tree: a node is ``(parent node, id(code), f_lasti)``
and a captured stack is the id of its innermost node, so an event stores one
int. Reading ``f_lineno`` is costly on 3.11+, so line numbers are computed
from ``f_lasti`` only when a trace is finished.

Draws from a loop share every frame above the caller with the previous draw.
Where the catch-all can tell us when a frame exits (a ``return`` profile event
on 3.10/3.11, ``PY_RETURN``/``PY_YIELD``/``PY_UNWIND`` monitoring events on
3.12+), a per-thread cache maps each live frame to the node of the stack from
it outward, and capture stops at the first frame it already knows: one or two
frames walked instead of sixteen. A frame leaves the cache when it exits, so an
id in the cache always names a live frame and is never confused with a new
frame at the same address. Without such events every capture walks in full.

Frames of rngtrace, of runpy and of whatever launched a traced program are
never recorded: rngtrace's and runpy's code is skipped wherever it sits, and a
face that runs a program (``rngtrace run``, the IPython magic) marks its runner
with ``program_entry``, where every capture ends.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from types import CodeType, FrameType
from typing import TYPE_CHECKING, Any

from ._codes import END, IMPORTING, KEEP, MODULE, USER, code_kind, lineno_at, qualname
from ._hotpath import SPEEDUPS
from ._paths import IMPORT_MACHINERY, is_user_file
from ._threads import MAX_PINNED

if TYPE_CHECKING:
    from ._model import Frame

ROOT = -1  # the parent of an outermost (or depth-truncated) frame
# CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR (the same on every Python): spelled out, as importing
# inspect for them would cost a traced child's start ~3 ms.
_SUSPENDABLE = 0x20 | 0x80 | 0x200


# The capture walk in C (_speedups.capture); this module's walk stays the reference.
_c_capture = SPEEDUPS.capture if SPEEDUPS is not None else None
_c_walk_memo = SPEEDUPS.walk_memo if SPEEDUPS is not None else None
_c_flat_key = SPEEDUPS.flat_key if SPEEDUPS is not None else None
# Looked up, not assumed: an accelerator built before it existed (a checkout's stale build) walks in Python.
_c_site_key = getattr(SPEEDUPS, "site_key", None)


class StackTable:
    """Interns captured stacks; one table serves every active trace.

    A table only grows while it is in use: the hub replaces it, never clears
    it, so a thread still capturing into it when the last trace ends finishes
    consistently. Interning is atomic under the GIL (a node is stored before
    its id is published, and ``setdefault`` decides a race), so threads
    capturing under different stream locks never share a node id.
    """

    def __init__(self) -> None:
        #: (parent node, id(code), f_lasti) -> node; the hub's hot path reads it directly
        self.ids: dict[tuple[int, int, int], int] = {}
        # node -> (parent node, id(code), f_lasti, frames in the chain, reached the outermost frame)
        self._nodes: dict[int, tuple[int, int, int, int, bool]] = {}
        self._next = itertools.count()
        # id(code) -> (code, KEEP, HIDE or END); holding the code keeps its id unique
        self._codes: dict[int, tuple[CodeType, int]] = {}
        self._lines: dict[tuple[int, int], int] = {}  # (id(code), f_lasti) -> line
        # flat (id(code), f_lasti, ...) key of an uncached capture -> its node
        self._flat: dict[Any, int] = {}  # a tuple of ints, or the same packed in bytes (C)
        #: called once per code object whose frames enter a ``known`` cache (3.12+: so
        #: the catch-all can ask for that code's exit events)
        self.watch_code: Callable[[CodeType], None] | None = None
        self._watched: set[int] = set()
        # What the C walk reads and writes: these objects, never replaced while the table lives.
        # The last is the C walk's own memo of ``ids`` and of ``_codes``' kinds, one per table, so
        # that walking frames already interned allocates nothing (it holds copies of entries
        # these dicts never drop or change; ``_codes`` keeps each code, and so its id, alive).
        memo = _c_walk_memo() if _c_capture is not None else None  # type: ignore[misc]
        self.walk_state = (self.ids, self._nodes, self._codes, self._next, self._watched, code_kind, MAX_PINNED, memo)
        # Past max_events only a stack's call-site form is kept (``capture_site``): id(code) -> its
        # kind and USER/MODULE/IMPORTING bits, and each form's key -> its node.
        self._site_codes: dict[int, int] = {}
        self._sites: dict[Any, int] = {}
        #: what the C call-site walk reads (``_speedups.site_key``), and its forms (a draw past
        #: max_events recorded in C is counted under a form already interned here)
        self.site_state = (self._site_codes, memo, self._sites)
        #: the C walk, or None for this module's (tests compare the two)
        self.accelerated = _c_capture

    def forget_watched(self) -> None:
        """The exit events ``watch_code`` asked for are taken off: ask again for each code that enters a cache."""
        self._watched.clear()  # in place: the C walk holds this set (``walk_state``)

    def capture(self, frame: FrameType | None, depth: int, known: dict | None = None, pin: bool = False) -> int:
        """Intern the stack from ``frame`` (innermost) outward; hidden frames left out, ended at a program's entry.

        ``known`` is the calling thread's cache of live frames (id -> (f_lasti, node)),
        or None where it cannot be kept exact. With ``pin``, nothing reports frame
        exits: each entry also holds its frame, so its id cannot name another frame,
        and a Sweeper drops it once the frame has finished.
        """
        if known is None:
            return self.capture_flat(frame, depth)
        if self.accelerated is not None:
            # The same walk in C; NotImplemented where it met anything it does not expect. An error
            # in it never reaches the draw: the Python walk, the reference, then decides (what the
            # C walk interned meanwhile is what the Python walk would intern too).
            try:
                node = self.accelerated(frame, depth, known, pin, self.walk_state, self.watch_code)
            except Exception:
                node = NotImplemented
            if node is not NotImplemented:
                return node
        return self._capture_known(frame, depth, known, pin)

    def _capture_known(self, frame: FrameType | None, depth: int, known: dict, pin: bool) -> int:
        """The reference walk with a ``known`` cache: ``_speedups.capture`` does exactly this."""
        if frame is not None:
            node = self._next_to_known(frame, depth, known)
            if node is not None:
                return node
        codes = self._codes
        nodes = self._nodes
        walked: list[tuple[FrameType, int, int]] = []
        node, kept = ROOT, 0
        f = frame
        while f is not None:
            lasti = f.f_lasti
            hit = known.get(id(f))
            # A known frame ends the walk if its chain is long enough for this depth.
            if hit is not None and hit[0] == lasti:
                if hit[1] < 0 or nodes[hit[1]][4] or kept + nodes[hit[1]][3] >= depth:
                    node = hit[1]
                    break
            code = f.f_code
            entry = codes.get(id(code))
            if entry is None:
                entry = codes[id(code)] = (code, code_kind(code))
            if entry[1] == END:
                break  # the launcher's frames: the stack ends as if at the outermost frame
            walked.append((f, id(code), lasti))
            if not entry[1]:
                kept += 1
            f = f.f_back
        return self._enter(walked, node, known, pin)

    def _next_to_known(self, frame: FrameType, depth: int, known: dict) -> int | None:
        """The common case, a draw from a loop: the caller is new or moved, its caller is known.

        One tuple lookup, no walk; None where the walk is needed.
        """
        parent = frame.f_back
        hit = known.get(id(parent)) if parent is not None else None
        if hit is not None and hit[0] == parent.f_lasti and hit[1] >= 0:  # type: ignore[union-attr]
            info = self._nodes[hit[1]]
            if info[4] or info[3] + 1 >= depth:
                return self.ids.get((hit[1], id(frame.f_code), frame.f_lasti))
        return None

    def _enter(self, walked: list[tuple[FrameType, int, int]], node: int, known: dict, pin: bool) -> int:
        """Intern the ``walked`` frames onto ``node``, outermost first; one of them enters ``known``."""
        codes = self._codes
        watch = self.watch_code
        innermost = walked[0][0] if walked else None
        if pin and len(known) > MAX_PINNED:
            # The Sweeper is stalled or gone (a finalizer holding it up): let every pin go
            # rather than keep frames, and their locals, without bound.
            known.clear()
        cached = False
        for f, code_id, lasti in reversed(walked):
            if not codes[code_id][1]:
                node = self._intern(node, code_id, lasti, True)
            # One frame per walk enters the cache: the outermost new one, next to what the
            # cache knew. Frames a loop keeps are reached from outside in, one per draw;
            # the fresh ones below them (a forward(), a per-sample helper) would each cost
            # a pin or an exit event and be gone by the next draw. The innermost frame is
            # the one most likely to be new at the next draw: never cached.
            if cached or f is innermost:
                continue
            if pin:
                # A suspended generator keeps its frame and may be resumed from elsewhere:
                # a pinned one could hand out a stale chain. Only plain frames are pinned.
                if codes[code_id][0].co_flags & _SUSPENDABLE:
                    continue
                known[id(f)] = (lasti, node, f)
            else:
                known[id(f)] = (lasti, node)
                if watch is not None and code_id not in self._watched:
                    self._watched.add(code_id)
                    watch(codes[code_id][0])
            cached = True
        return node

    def capture_flat(self, frame: FrameType | None, depth: int) -> int:
        """Walk ``depth`` frames into a flat key; build tree nodes only for a new key."""
        # Twice as many frames as are kept: hidden ones (torch.compile's dozen between a compiled
        # call and its op) must not push the user's line out; resolve() keeps ``depth``.
        depth *= 2
        if _c_flat_key is not None:
            flat = _c_flat_key(frame, depth)  # the same key, packed in one bytes object
        else:
            key: list[int] = []
            append = key.append
            f = frame
            for _ in range(depth):
                if f is None:
                    break
                append(id(f.f_code))
                append(f.f_lasti)
                f = f.f_back
            flat = tuple(key)
        node = self._flat.get(flat)
        if node is None:
            node = self._flat.setdefault(flat, self._build(frame, depth))
        return node

    def _build(self, frame: FrameType | None, depth: int) -> int:
        codes = self._codes
        walked: list[FrameType] = []
        f = frame
        for _ in range(depth):
            if f is None:
                break
            code = f.f_code
            entry = codes.get(id(code))
            if entry is None:
                entry = codes[id(code)] = (code, code_kind(code))
            if entry[1] == END:
                f = None  # nothing outside a program's entry is the program's
                break
            walked.append(f)
            f = f.f_back
        complete = f is None
        node = ROOT
        for g in reversed(walked):
            if codes[id(g.f_code)][1] == KEEP:
                node = self._intern(node, id(g.f_code), g.f_lasti, complete)
        return node

    def capture_site(self, frame: FrameType | None, depth: int, raw_limit: int = 0) -> int:
        """Intern only the call-site form of the stack from ``frame`` (see ``site_frames``).

        What an event past ``max_events`` keeps: many distinct stacks (a helper called
        from thousands of places) share a few call-site forms, and only those are interned.
        ``raw_limit`` bounds the frames walked as ``capture_flat`` does (0: no bound).
        """
        key = _c_site_key(frame, depth, raw_limit, self.site_state) if _c_site_key is not None else NotImplemented
        if key is not NotImplemented:
            node = self._sites.get(key)
            if node is not None:
                return node
        pairs = self.site_frames(frame, depth, raw_limit)  # notes every code it meets, for the C walk
        if key is NotImplemented and _c_site_key is not None:
            key = _c_site_key(frame, depth, raw_limit, self.site_state)
        if key is NotImplemented:
            key = tuple(pairs)
        node = self._sites.get(key)
        if node is None:
            node = ROOT
            # Not marked as reaching the outermost frame: a thread's cache never stops a walk at it.
            for code_id, lasti in reversed(pairs):
                node = self._intern(node, code_id, lasti, False)
            node = self._sites.setdefault(key, node)
        return node

    def site_frames(self, frame: FrameType | None, depth: int, raw_limit: int = 0) -> list[tuple[int, int]]:
        """The (id(code), f_lasti) of the frames a call-site table reads, innermost first.

        Of the ``depth`` frames a capture records: those up to the first frame in the user's
        own code and, when a module was being imported, to its ``<module>`` frame and the
        import system's next to it; every frame where none is the user's. The calling line,
        the user's line, the import and the package a draw came from are the same as the
        whole stack's. ``_speedups.site_key`` is this walk in C.
        """
        kept: list[tuple[int, int, int]] = []
        user = imported = -1
        f, walked = frame, 0
        while f is not None and len(kept) < depth:
            walked += 1
            if raw_limit and walked > raw_limit:
                break
            code = f.f_code
            flags = self._site_codes.get(id(code))
            if flags is None:
                flags = self._note_site_code(code)
            if flags & 3 == END:
                break
            if flags & 3 == KEEP:
                if user < 0 and flags & USER:
                    user = len(kept)
                if imported < 0 and kept and flags & IMPORTING and kept[-1][2] & MODULE:
                    imported = len(kept) - 1
                kept.append((id(code), f.f_lasti, flags))
            f = f.f_back
        n = len(kept) if user < 0 else max(user + 1, imported + 2)
        return [(code_id, lasti) for code_id, lasti, _flags in kept[:n]]

    def _note_site_code(self, code: CodeType) -> int:
        entry = self._codes.get(id(code))
        if entry is None:  # held there: its id stays unique while the table lives
            entry = self._codes.setdefault(id(code), (code, code_kind(code)))
        flags = entry[1]
        if flags == KEEP:
            name = code.co_filename
            flags |= USER if is_user_file(name) else 0
            flags |= MODULE if qualname(code) == "<module>" else 0
            flags |= IMPORTING if name.startswith(IMPORT_MACHINERY) else 0
        self._site_codes[id(code)] = flags
        return flags

    def _intern(self, parent: int, code_id: int, lasti: int, complete: bool) -> int:
        key = (parent, code_id, lasti)
        node = self.ids.get(key)
        if node is None:
            length = self._nodes[parent][3] + 1 if parent >= 0 else 1
            reached = self._nodes[parent][4] if parent >= 0 else complete
            # Store the node before publishing its id; a thread that interned the same
            # key meanwhile wins the setdefault, and this id is simply never used.
            new = next(self._next)
            self._nodes[new] = (parent, code_id, lasti, length, reached)
            node = self.ids.setdefault(key, new)
        return node

    def size(self) -> int:
        """How many stacks and nodes this table holds."""
        return len(self._nodes) + len(self._flat) + len(self._sites)

    def resolve(self, sid: int, depth: int) -> tuple[Frame, ...]:
        """Turn an interned stack into Frames, innermost first, at most ``depth`` of them."""
        from ._model import Frame  # when read: a traced child's start builds no value class

        return tuple([Frame(*where) for where in self.lines(sid, depth)])

    def lines(self, sid: int, depth: int) -> list[tuple[str, int, str]]:
        """``resolve`` as plain (filename, lineno, function) tuples (a child's spool writes these)."""
        frames: list[tuple[str, int, str]] = []
        node = sid
        while node >= 0 and len(frames) < depth:
            parent, code_id, lasti, _length, _reached = self._nodes[node]
            code = self._codes[code_id][0]
            frames.append((code.co_filename, self._lineno(code_id, code, lasti), qualname(code)))
            node = parent
        return frames

    def _lineno(self, code_id: int, code: CodeType, lasti: int) -> int:
        # Keyed by identity: on 3.10 code objects that differ only in file and line table
        # (two cells, two scripts with the same statement) are equal, with one hash.
        key = (code_id, lasti)
        line = self._lines.get(key)
        if line is None:
            line = self._lines[key] = lineno_at(code, lasti)
        return line
