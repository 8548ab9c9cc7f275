"""What ``rngtrace fix`` changes, decided from a trace's findings: the files, lines, calls and seeds.

Analysis only: nothing here parses or writes a file. Each change is data, an ``Edit``
at a line of the user's own file naming the call made there (``numpy.random.rand``)
and what it becomes; the face that rewrites source (``_fix_rewrite``, with LibCST)
finds that call and applies it. Which line is the user's is ``_yours``' question;
a stream's generator and how its legacy calls map onto it, its declaration's
(``sources/*_stream.py``). Names in the texts an edit adds are marked ``<numpy.random.default_rng>``:
the face spells them as the file imports them.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from ._fix_edits import (
    AddArgument,
    Draw,
    Edit,
    FilePlan,
    Generator,
    GiveSeed,
    PassGenerator,
    Plan,
    Seed,
    SeedBefore,
    generator_of,
    legacy,
    seed_function,
)
from ._fixes import ARGUMENT, TORCH_DATA, line_of, model_built, place_of
from ._model import DRAW, SEED, UNATTRIBUTED, Event, Finding
from ._paths import cell_label, is_user_file
from ._streams import Stream
from ._yours import Call, call_of
from .sources import rank
from .sources import stream as stream_info

#: what each library's seed argument is given: the seed (scikit-learn takes an int) or the module's own
#: NumPy generator (scipy takes a Generator); the keyword itself is ``_fixes.ARGUMENT``'s
_VALUE = {"sklearn": "{seed}", "scipy": "{generator}"}
#: libraries whose objects take the seed in their constructor when one of their methods drew
_CONSTRUCTOR = frozenset({"sklearn"})
#: findings whose fix is no change to a line, and why
_NOT_LINES = {
    "settings": "a library setting, not a draw",
    "duplicate": "each process needs a seed of its own",
    "divergent": "the ranks need to draw alike",
}


def plan(events: Sequence[Event], findings: Sequence[Finding], every_draw: bool = False) -> Plan:
    """The changes that address ``findings``, made from the ``events`` they rest on.

    ``every_draw``: every draw and seed the run made at a line of the user's, whether a finding
    names it or not (moving a seeded legacy script to generators of its own).
    """
    planner = _Planner(events)
    for finding in findings:
        planner.finding(finding)
    if every_draw:
        for e in events:
            call = call_of(e.stack)
            if call is not None and _editable(call.line.filename) and e.kind != UNATTRIBUTED:
                planner.event(e)
    return planner.finish()


def _editable(filename: str) -> bool:
    """A file of the user's own that can be rewritten: not a library's, not a cell, not generated code."""
    return is_user_file(filename) and not filename.startswith("<") and cell_label(filename) is None


def _int_seed(detail: str | None) -> str:
    return detail if detail is not None and re.fullmatch(r"\d+", detail) else "0"


def _base(stream: str) -> str:
    return stream.split(".", 1)[0]


class _Planner:
    """Turns findings into edits, file by file; ``finish`` adds the generators and the seeds' fate."""

    def __init__(self, events: Sequence[Event]) -> None:
        self.events = events
        self.files: dict[str, FilePlan] = {}
        self.notes: dict[str, None] = {}
        self.addressed: list[Finding] = []
        self.seeds: dict[tuple[str, str], list[Event]] = {}  # (file, stream) -> the user's seeds there
        for e in events:
            call = call_of(e.stack) if e.kind == SEED else None
            info = stream_info(e.stream)
            if call is not None and call.callee is None and info is not None and e.api == seed_function(info):
                self.seeds.setdefault((call.line.filename, info.name), []).append(e)

    def note(self, text: str) -> None:
        self.notes[text] = None

    def add(self, path: str, edit: Edit) -> None:
        edits = self.files.setdefault(path, FilePlan(path)).edits
        if edit not in edits:
            edits.append(edit)

    def count(self) -> int:
        return sum(len(f.edits) for f in self.files.values())

    def finding(self, finding: Finding) -> None:
        """The edits for one finding's events; a finding whose fix is no line is said in the notes."""
        if finding.kind in _NOT_LINES:
            self.note(f"{finding.kind}: {_NOT_LINES[finding.kind]}, not rewritten: {finding.fix}")
            return
        before = self.count()
        last = finding.events[-1] if finding.events else None
        for i in finding.events:
            if 0 <= i < len(self.events):
                self.event(self.events[i], model=finding.kind in ("interleaved", "unseeded") and i == last)
        if finding.kind in ("reseeded", "at-import") and finding.events:
            self.governed(self.events[finding.events[0]])
        if self.count() > before:
            self.addressed.append(finding)

    def governed(self, seed: Event) -> None:
        """The user's draws after their ``seed`` in its file: another seed came between, a generator will not."""
        home = call_of(seed.stack)
        for e in self.events[seed.index + 1 :] if home is not None else ():
            call = call_of(e.stack) if e.kind == DRAW and _base(e.stream) == _base(seed.stream) else None
            if call is not None and call.callee is None and call.line.filename == home.line.filename:  # type: ignore[union-attr]
                self.event(e)

    def event(self, e: Event, model: bool = False) -> None:
        """The edit one event calls for at the user's line it came from, or a note saying why none."""
        info = stream_info(e.stream)
        call = call_of(e.stack)
        if info is None or call is None:
            self.note(f"{e.api}: drawn where no line of yours is on the stack; nothing to rewrite")
        elif not _editable(call.line.filename):
            self.note(f"{line_of(call.line)}: not a file of yours that can be rewritten")
        elif call.callee is None and e.api in info.entropy_seeded:  # a generator started from OS entropy
            self.add(call.line.filename, GiveSeed(call.line.lineno, e.api, info.name, info.entropy_seeded[e.api]))
        elif e.kind == SEED:
            self.seed(e, call, info)
        elif e.kind == DRAW and call.callee is None:
            self.own_draw(e, call, info)
        elif e.kind == DRAW:
            self.library_draw(e, call, info, model)
        else:  # a kind this fix knows no rewrite for (a generator made from entropy it has no seeded form of)
            self.note(f"{e.api} at {line_of(call.line)} ({e.kind}): no rewrite known for it, left as it is")

    def seed(self, e: Event, call: Call, info: Stream) -> None:
        path, line = call.line.filename, call.line.lineno
        if call.callee is not None:
            self.note(f"{e.api}({e.detail}) inside {place_of(e)}: another library's seed, not rewritten")
        elif e.api == seed_function(info):
            if legacy(info):
                self.add(path, Seed(line, e.api, info.name, value=e.detail if e.detail is not None else "None"))
            elif e.from_entropy:
                self.add(path, GiveSeed(line, e.api, info.name))
        else:
            self.note(f"{e.api} at {line_of(call.line)} sets {info.name}'s state: left as it is")

    def own_draw(self, e: Event, call: Call, info: Stream) -> None:
        """A draw the user's line made itself: from the module's generator."""
        path, line, where = call.line.filename, call.line.lineno, line_of(call.line)
        function = e.api.rsplit(".", 1)[-1]
        if e.stream != info.name:
            self.note(f"{e.api} at {where} draws from {e.stream}: a generator for that device is not written for you")
        elif info.generator_argument and function in info.no_generator:
            self.note(f"{e.api} at {where} takes no generator: {info.seed_call} where the run starts seeds it")
        elif info.generator_argument:
            self.add(path, PassGenerator(line, e.api, info.name))
        elif function in info.no_equivalent:
            self.note(f"{e.api} at {where} is left as it is: {info.no_equivalent[function]}")
        elif info.make_generator:
            method = info.renames.get(function, function)
            shape, inclusive = function in info.shape_arguments, function in info.inclusive_high
            self.add(path, Draw(line, e.api, info.name, method=method, shape=shape, inclusive=inclusive))
        else:
            self.note(f"{e.api} at {where}: {info.name} declares no generator of one's own to draw from")

    def library_draw(self, e: Event, call: Call, info: Stream, model: bool) -> None:
        """A draw inside a library call the user's line made: the call takes a seed, where it has one."""
        path, line = call.line.filename, call.line.lineno
        callee = call.callee.filename.replace("\\", "/") if call.callee is not None else ""
        argument = ARGUMENT.get(call.package or "")
        if model_built(e) is not None:
            if model:
                self.add(path, SeedBefore(line, call.name, info.name, statement=f"<{seed_function(info)}>({{seed}})"))
            else:
                self.note(f"{call.name} at {line_of(call.line)} draws its initial weights: modules take no generator")
        elif argument and call.package is not None:
            names = tuple(p for p in call.name.split(".") if p)
            value = _VALUE.get(call.package, "{seed}")
            constructor = call.package in _CONSTRUCTOR
            self.add(path, AddArgument(line, call.name, info.name, names, argument, value, constructor))
        elif call.package == "torch" and TORCH_DATA in callee:
            value = "<torch.Generator>().manual_seed({seed})"
            self.add(path, AddArgument(line, "DataLoader", info.name, ("DataLoader",), "generator", value, True))
        else:
            self.note(
                f"{place_of(e)} draws from {e.stream} inside {call.package or 'another library'}, which takes no "
                "seed argument: not rewritten; wrap it in `with rngtrace.rng_isolate():`"
            )

    # -- the whole module, its generators and its seeds ------------------------------------------

    def finish(self) -> Plan:
        self.whole_modules()
        moved: list[str] = []
        for fp in self.files.values():
            self.generators(fp)
            moved += [s for s in fp.generators if s not in moved]
        keep = self.keep_seeds()
        files = {path: fp for path, fp in self.files.items() if fp.edits}
        return Plan(files, list(self.notes), keep, self.addressed, moved)

    def whole_modules(self) -> None:
        """One generator per module: every legacy draw and seed the trace saw in a file it draws in moves.

        A file that also sets the stream's state another way (``set_state``) keeps its draws on the
        global stream: the generator would not see that state.
        """
        for fp in list(self.files.values()):
            streams = {edit.stream for edit in fp.edits if isinstance(edit, Draw)}
            mine = []
            for e in self.events:
                call = call_of(e.stack) if e.stream in streams else None
                if call is not None and call.callee is None and call.line.filename == fp.path:
                    mine.append((e, call))
            blocked = {
                e.stream: (e, call)
                for e, call in mine
                if e.kind == SEED and e.api != seed_function(stream_info(e.stream))  # type: ignore[arg-type]
            }
            for e, _call in mine:
                if e.stream not in blocked:
                    self.event(e)
            for stream, (e, call) in blocked.items():
                fp.edits = [x for x in fp.edits if not (x.stream == stream and isinstance(x, (Draw, Seed)))]
                self.note(
                    f"{e.api} at {line_of(call.line)} sets {stream}'s state, so the file's {stream} draws are "
                    "left on the global stream"
                )

    def generators(self, fp: FilePlan) -> None:
        """The generators the file's edits draw from; seeds of streams it makes none for are left alone."""
        wanted = {
            e.stream
            for e in fp.edits
            if isinstance(e, (Draw, PassGenerator)) or (isinstance(e, AddArgument) and "{generator}" in e.value)
        }
        for stream in sorted(wanted, key=rank):
            info = stream_info(stream)
            if info is None or not info.make_generator:
                continue
            name, make = generator_of(info)
            seeds = self.seeds.get((fp.path, stream), [])
            value = _int_seed(seeds[0].detail) if seeds else "0"
            at_seeds = legacy(info) and bool(seeds) and self.in_scope(fp.path, stream, seeds)
            fp.generators[stream] = Generator(stream, name, make, value, at_seeds)
        settled = [self.settled(fp, e) for e in fp.edits]
        fp.edits = [e for e in settled if e is not None]

    def settled(self, fp: FilePlan, edit: Edit) -> Edit | None:
        """``edit`` with its seed filled in; a seed of a stream the file makes no generator for: None."""
        seeds = self.seeds.get((fp.path, _base(edit.stream)), [])
        value = _int_seed(seeds[0].detail) if seeds else "0"
        if isinstance(edit, Seed) and edit.stream not in fp.generators:
            return GiveSeed(edit.line, edit.api, edit.stream) if edit.value == "None" else None
        if isinstance(edit, AddArgument):
            return dataclasses.replace(edit, value=edit.value.replace("{seed}", value))
        if isinstance(edit, SeedBefore):
            return dataclasses.replace(edit, statement=edit.statement.replace("{seed}", value))
        return edit

    def in_scope(self, path: str, stream: str, seeds: list[Event]) -> bool:
        """Whether the generator can be made where the seeds were: every draw it serves sees it, made first."""
        functions = {s.frame.function for s in seeds if s.frame is not None}
        if len(functions) != 1:
            return False
        (home,) = functions
        first = min(s.index for s in seeds)
        for e in self.events:
            call = call_of(e.stack) if e.kind == DRAW and e.stream == stream else None
            if call is None or call.callee is not None or call.line.filename != path:
                continue
            inside = home == "<module>" or call.line.function == home or call.line.function.startswith(home + ".")
            if e.index < first or not inside:
                return False
        return True

    def keep_seeds(self) -> dict[str, str]:
        """stream -> why its seeds stay: a draw after the first seed that no edit takes off the global stream."""
        keep: dict[str, str] = {}
        for stream in {e.stream for fp in self.files.values() for e in fp.edits if isinstance(e, Seed)}:
            handled = {
                (fp.path, e.line)
                for fp in self.files.values()
                for e in fp.edits
                if isinstance(e, (Draw, AddArgument)) and e.stream == stream
            }
            seeds = [e for (path, s), found in self.seeds.items() if s == stream for e in found]
            first = min((e.index for e in seeds), default=0)
            for e in self.events:
                if e.kind != DRAW or _base(e.stream) != stream or e.index < first:
                    continue
                call = call_of(e.stack)
                if call is None or (call.line.filename, call.line.lineno) not in handled:
                    keep[stream] = f"{place_of(e)} still draws from {stream}'s global stream after it"
                    break
        return keep
