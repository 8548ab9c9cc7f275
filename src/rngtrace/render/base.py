"""What every renderer shares: frames and events as words, colour, aligned tables, the hints.

The text log, the HTML report and the diff all say the same things the same
way: ``numpy.random.rand ×3``, ``story.py:9 in <module>``, ``1,000 draws``,
streams in the order random, numpy, torch (those words are ``_words``', which the
findings use too). Only finished data is read here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .._paths import package_of, short_path
from .._rows import alike, event_pids, event_rows
from .._streams import Stream

# The words a finding's message shares with the logs, handed on to the renderers from here.
from .._words import api_label as api_label
from .._words import plural as plural
from .._words import printable as printable
from .._words import stream_base as stream_base
from .._words import stream_key as stream_key
from .._yours import import_of, is_yours, user_frame
from ..sources import stream as stream_info
from ..trace import CAUSE, DRAW, RESTORE, SEED, UNATTRIBUTED, Event, Finding, Frame, Process, Statistic, Trace, Window

#: paint(text, style) -> text, wrapped in the ANSI code for the style or left alone
Paint = Callable[[str, str], str]

EMPTY = "—"  # a cell or a place with nothing to say
#: what a seed given no value did
ENTROPY = "seeded from OS entropy: every run draws differently after it"
#: what a restore did: the stream is back where a getter saw it earlier in the trace
RESTORED = "restored a state saved earlier in the trace: no reseed"

_ANSI = {"bold": "1", "dim": "2", "warn": "33", "alert": "1;31", "user": "1"}
_KIND_ORDER = (SEED, RESTORE, DRAW, UNATTRIBUTED)


def painter(color: bool) -> Paint:
    """Return a function that wraps text in the ANSI code for a style, or leaves it alone."""
    if not color:
        return lambda text, style: text
    return lambda text, style: f"\x1b[{_ANSI[style]}m{text}\x1b[0m" if style and text else text


# -- words ------------------------------------------------------------------------


def header(trace: Trace) -> str:
    """``rngtrace: 5 events — numpy: 1 seed, 3 draws · random: 1 draw``, or that there were none."""
    if len(trace) == 0:
        if trace.untraced:  # "none" would be a claim about processes the trace never saw
            n = len(trace.untraced)
            return printable(
                f"rngtrace: no draws or reseeds in the traced process; {n} child process"
                f"{'es' if n > 1 else ''} started before the trace may draw unseen (see the notes)"
            )
        watched = f" (watched: {', '.join(trace.streams)})" if trace.streams else ""
        return printable(f"rngtrace: no draws or reseeds of global random streams{watched}")
    counts = trace.counts()
    parts = []
    for stream in sorted({s for s, _ in counts}, key=stream_key):
        kinds = sorted((k for s, k in counts if s == stream), key=_kind_key)
        parts.append(f"{stream}: " + ", ".join(plural(counts[stream, k], k) for k in kinds))
    pids = process_ids(trace)
    where = f" in {len(pids):,} processes" if len(pids) > 1 else ""
    said = verdict(trace.findings)
    return printable(
        f"rngtrace: {plural(len(trace), 'event')}{where} — " + " · ".join(parts) + (f" — {said}" if said else "")
    )


def _kind_key(kind: str) -> tuple:
    return (_KIND_ORDER.index(kind) if kind in _KIND_ORDER else len(_KIND_ORDER), kind)


def describe(frame: Frame | None, cwd: str) -> str:
    """``path:line in function`` with the path shortened, or an em dash for no frame."""
    if frame is None:
        return EMPTY
    return printable(f"{short_path(frame.filename, cwd)}:{frame.lineno} in {frame.function}")


def called_at(stack: tuple[Frame, ...], cwd: str) -> str:
    """``describe`` of the calling frame; a call made as a module was imported names that module.

    ``reseedlib/legacy.py:4 at import of reseedlib.legacy``, or, a function deeper,
    ``rich/style.py:12 in Style.__init__, at import of rich.style``.
    """
    frame = stack[0] if stack else None
    imported = import_of(stack)
    if frame is None or imported is None:
        return describe(frame, cwd)
    if imported.index == 0:
        return printable(f"{short_path(frame.filename, cwd)}:{frame.lineno} at import of {imported.module}")
    return describe(frame, cwd) + printable(f", at import of {imported.module}")


def restore_note(event: Event, cwd: str) -> str:
    """``restored the state saved at seed.py:153, undoing 4 events: no reseed``, or without the place where the
    log has none."""
    saved = event.saved_at
    if saved is None:
        return RESTORED
    back, frame = saved
    undoing = f", undoing {plural(back, 'event')}" if back else ""
    return printable(f"restored the state saved at {_line(frame, cwd)}{undoing}: no reseed")


def verdict(findings: list[Finding]) -> str:
    """What the findings come to, for a log's first line: ``1 cause found``, or ``no cause found in this run``."""
    causes = sum(f.level == CAUSE for f in findings)
    if causes:
        return f"{causes:,} cause{'s' * (causes > 1)} found"
    risks = len(findings)
    return f"no cause found in this run; {risks:,} risk{'s' * (risks > 1)} below" if risks else ""


def where_moved(window: Window, cwd: str) -> str:
    """``moved between #14 model.py:49 and #16 model.py:51``: what an unattributed move did, and where."""
    return f"{'appeared' if window.appeared else 'moved'} {between(window, cwd)}"


def between(window: Window, cwd: str) -> str:
    """``between #14 model.py:49 and #16 model.py:51``: the window an unattributed move happened in.

    Never one line: the call that noticed the move did not make it.
    """
    start = "the start of the trace" if window.after is None else _mark(window.after, window.after_frame, cwd)
    noticed = window.noticed[0] if window.noticed else None
    if window.noticed_by is not None:
        end = _mark(window.noticed_by, noticed, cwd)
    elif window.at_end:
        end = "the end of the block" + (f" at {_line(noticed, cwd)}" if noticed else "")
    else:  # the noticing call made no event of its own
        end = f"the call at {_line(noticed, cwd)}" if noticed else "a call from C code"
    return printable(f"between {start} and {end}")


def _mark(index: int, frame: Frame | None, cwd: str) -> str:
    return f"#{index} {_line(frame, cwd)}" if frame is not None else f"#{index}"


def _line(frame: Frame, cwd: str) -> str:
    return f"{short_path(frame.filename, cwd)}:{frame.lineno}"


def your_code(stack: tuple[Frame, ...], cwd: str) -> str:
    """The first user frame, blank when it is the calling frame itself, a dash when none was recorded."""
    if not stack:
        return ""
    mine = user_frame(stack)
    if mine is stack[0]:
        return ""
    return describe(mine, cwd) if mine is not None else EMPTY


# -- aligned tables ---------------------------------------------------------------


@dataclass
class Row:
    """One table row: (text, style) cells and an optional line printed under it."""

    cells: list[tuple[str, str]]
    note: str = ""
    note_style: str = ""


@dataclass
class Table:
    """Columns with titles and alignment ('<' or '>'), rows filled in later."""

    titles: list[str]
    align: str
    rows: list[Row] = field(default_factory=list)
    note_column: int = 0  # the column a row's note is indented to


def format_table(table: Table, paint: Paint) -> list[str]:
    """Align the table's columns, dropping columns no row fills; escape names, then pad, then style."""
    rows = [
        Row([(printable(text), style) for text, style in row.cells], printable(row.note), row.note_style)
        for row in table.rows
    ]
    keep = [i for i, title in enumerate(table.titles) if any(row.cells[i][0] for row in rows)]
    widths = {i: max(len(table.titles[i]), *(len(row.cells[i][0]) for row in rows)) for i in keep}
    last = keep[-1]

    def line(cells: list[tuple[str, str]]) -> str:
        out = []
        for i in keep:
            text, style = cells[i]
            pad = " " * max(widths[i] - len(text), 0) if i != last or table.align[i] == ">" else ""
            out.append(pad + paint(text, style) if table.align[i] == ">" else paint(text, style) + pad)
        return ("  " + "  ".join(out)).rstrip()

    lines = [line([(title, "dim") for title in table.titles])]
    indent = 2 + sum(widths[i] + 2 for i in keep if i < table.note_column)
    for row in rows:
        lines.append(line(row.cells))
        if row.note:
            lines.append(" " * indent + paint(row.note, row.note_style))
    return lines


# -- hints: the generator to draw from instead ------------------------------------

_TORCH_DATA = "torch/utils/data/"
_TORCH_MODULES = "torch/nn/modules/"


def _takes_no_generator(api: str, info: Stream) -> bool:
    # "torch.nn.LSTM (dropout)": a recurrent module's dropout between layers takes none either.
    # "torch.ops.aten.randint.low_out": an op compiled code calls (Inductor's seeds), no call of the user's.
    return api.endswith(" (dropout)") or api.startswith("torch.ops.") or api.rsplit(".", 1)[-1] in info.no_generator


def hints(trace: Trace) -> list[str]:
    """For each library whose global stream was drawn from: the generator to use instead.

    A call site a finding's fix already named (its stream, api and calling line) is left out: the Hint
    block says what the findings did not.
    """
    said = _said_sites(trace)
    drawn: dict[str, list[Statistic]] = {}
    for stat in trace.statistics("lineno"):  # most calls first
        if (stat.stream, stat.api, stat.frame) not in said:
            drawn.setdefault(printable(stream_base(stat.stream)), []).append(stat)  # escaped before it is measured
    if not drawn:
        return []
    lines = []
    width = max(len(base) for base in drawn)
    for base in sorted(drawn, key=stream_key):
        hint = _hint(base, drawn[base])
        if not hint:
            continue  # only libraries drew from it: the line below says what they take
        first, *rest = hint
        lines.append(printable(f"  {base:<{width}}  {first}"))  # first and rest name the apis drawn
        lines.extend(printable(f"  {'':<{width}}  {line}") for line in rest)
    # Library draws the lines above do not explain (a loader, a module's init, a draw that takes no generator).
    unexplained = {
        base: [s for s in stats if not is_yours(s.frame) and not _explained(s)] for base, stats in drawn.items()
    }
    library = {base: stats for base, stats in unexplained.items() if stats}
    where = f"give the call its own seed{_library_seeds(library)}, or {_isolate_words(library)}."
    if not lines:  # no stream drawn declared a generator of one's own: only the library advice stands
        return [f"Hint: where a library draws, {where}"] if library else []
    if library:
        lines.append(f"  Where a library draws: {where}")
    return ["Hint: draw from a generator you own, seeded once, so no other code shifts your numbers:", *lines]


def _said_sites(trace: Trace) -> set[tuple[str, str, Frame | None]]:
    """(stream, api, calling line) of every draw a finding with a fix names."""
    events = event_rows(trace)
    return {
        (e.stream, e.api, e.frame)
        for f in trace.findings
        if f.fix
        for i in f.events
        if 0 <= i < len(events) and (e := events[i]).kind == DRAW
    }


def _explained(stat: Statistic) -> bool:
    """Whether a torch line of the hint says what to do about this library draw."""
    path = stat.frame.filename.replace("\\", "/") if stat.frame is not None else ""
    info = stream_info(stream_base(stat.stream))
    no_generator = info is not None and _takes_no_generator(stat.api, info)
    return _TORCH_DATA in path or _TORCH_MODULES in path or no_generator


def _isolate_words(library: dict[str, list[Statistic]]) -> str:
    """``wrap it in `with torch.random.fork_rng():``` where every library-drawn stream has a fork block of its
    own; ``rngtrace.rng_isolate()``, which makes the program depend on rngtrace, last."""
    forks = {base: info.fork_call for base in library if (info := stream_info(base)) is not None and info.fork_call}
    blocks = [f"`with {call}:`" + (f" for {base}" if len(library) > 1 else "") for base, call in forks.items()]
    rest = [base for base in library if base not in forks]
    if rest:
        blocks.append("`with rngtrace.rng_isolate():`" + (f" for {', '.join(rest)}" if forks else ""))
    return "wrap it in " + " or ".join(blocks)


def _library_seeds(drawn: dict[str, list[Statistic]]) -> str:
    """`` (random_state=0 for scikit-learn and scipy, generator=g for torch)``: what the drawing libraries take."""
    said = []
    if any(
        stat.frame is not None and package_of(stat.frame.filename) in ("sklearn", "scipy")
        for stats in drawn.values()
        for stat in stats
    ):
        said.append("random_state=0 for scikit-learn and scipy")
    for base in sorted(drawn, key=stream_key):
        info = stream_info(base)
        if info is not None and info.generator_argument and info.generator_name:
            said.append(f"generator={info.generator_name} for {base}")
    return f" ({', '.join(said)})" if said else ""


def _hint(base: str, stats: list[Statistic]) -> list[str]:
    """The lines of one library's hint: how to make the generator, what to call instead."""
    info = stream_info(base)
    if info is None or not info.make_generator:
        return []  # a stream that declared no generator of one's own gets no advice, never another's
    make, name = info.make_generator.replace("{seed}", "seed"), info.generator_name
    apis = list(dict.fromkeys(stat.api for stat in stats))
    if info.generator_argument:
        return _argument_hint(info, make, name, stats, apis)
    # Only the calls the user makes: a library's own draws take its argument (random_state=), not a method.
    apis = list(dict.fromkeys(stat.api for stat in stats if is_yours(stat.frame)))
    if not apis:
        return []
    uses = []
    for api in apis[:3]:
        called = api.rsplit(".", 1)[-1]
        method = info.renames.get(called, called)
        uses.append(f"{name}.{method} for {api}")
    return [f"{make}; " + ", ".join(uses) + (", …" if len(apis) > 3 else "")]


def _argument_hint(info: Stream, make: str, name: str, stats: list[Statistic], apis: list[str]) -> list[str]:
    """A hint for a stream whose draws take the generator as ``generator=`` (torch's)."""
    cuda = {stat.stream.startswith("torch.cuda") for stat in stats}
    if cuda == {True}:
        make = make.replace("Generator()", "Generator(device='cuda')")
    elif True in cuda:
        make += " (device='cuda' for CUDA draws)"
    loader = any(stat.frame and _TORCH_DATA in stat.frame.filename.replace("\\", "/") for stat in stats)
    # A module's own init draws (nn.Linear, nn.Conv2d): the user wrote the module, not the init call.
    built = {
        stat.api
        for stat in stats
        if stat.frame
        and _TORCH_MODULES in stat.frame.filename.replace("\\", "/")
        and not _takes_no_generator(stat.api, info)
    }
    plain = [
        api
        for api in apis
        if not _takes_no_generator(api, info) and not (loader and api == "torch.Tensor.random_") and api not in built
    ]
    fixed = [api for api in apis if _takes_no_generator(api, info)]
    lines = [make]
    if plain:
        lines.append(f"pass generator={name} to " + ", ".join(plain[:3]) + (", …" if len(plain) > 3 else ""))
    if loader:
        lines.append(f"DataLoader(..., generator={name}) for its shuffle order and worker base seed")
    if built:
        lines.append("modules draw their initial weights: torch.manual_seed(seed) before building the model")
    if fixed:
        lines.append(
            f"{', '.join(fixed)} take{'s' if len(fixed) == 1 else ''} no generator: "
            "call torch.manual_seed(seed) once where the run starts"
        )
    return lines if plain or loader else lines[1:]  # the generator's line only where a line passes it


# -- processes: which one made an event, and what each one was ----------------------


def process_ids(trace: Trace) -> set[int]:
    """Every pid the trace saw: its processes and the makers of its events."""
    return {p.pid for p in trace.processes} | event_pids(event_rows(trace))


def several_processes(trace: Trace) -> bool:
    """Whether the log must say which process made each event: more than one was seen or drew."""
    return len(process_ids(trace)) > 1


def role_of(process: Process) -> str:
    """``DataLoader worker 1``, ``the traced process``, or an em dash for a child with no known role."""
    if process.role:
        return printable(process.role)
    return "the traced process" if process.start == "traced" else EMPTY


def started(process: Process) -> str:
    """``traced`` for the process that ran the block, ``fork from 1234`` for a child."""
    if process.start == "traced":
        return "traced"
    return printable(f"{process.start} from {process.ppid}" if process.ppid else process.start)


def ended(process: Process) -> str:
    """How it ended: ``normal``, ``exit code 3``, ``killed by signal 9``; ``running`` while it runs."""
    return printable(process.exit) if process.exit is not None else "running"


def site_key(event: Event | Statistic, cwd: str) -> tuple[str, str, str, str]:
    """(stream, api, calling line, user's line): how the call-site tables group draws."""
    return (event.stream, event.api, called_at(event.stack, cwd), your_code(event.stack, cwd))


def processes_per_site(trace: Trace, cwd: str) -> dict[tuple, set[int]]:
    """site_key -> the pids whose kept draws were made there (dropped draws carry no pid)."""
    out: dict[tuple, set[int]] = {}
    lines: dict[int, tuple[str, str]] = {}  # id(stack) -> its lines: events of one site share their stack tuple
    for e in alike(event_rows(trace), (DRAW,)):  # the pids a site drew in: each distinct row once
        where = lines.get(id(e.stack))
        if where is None:
            where = lines[id(e.stack)] = (called_at(e.stack, cwd), your_code(e.stack, cwd))
        out.setdefault((e.stream, e.api, *where), set()).add(e.pid)
    return out


def in_processes(pids: set[int] | None) -> str:
    """``in 2 processes``, ``in pid 1234`` for one, blank when no kept draw says."""
    if not pids:
        return ""
    return f"in pid {next(iter(pids))}" if len(pids) == 1 else f"in {len(pids):,} processes"
