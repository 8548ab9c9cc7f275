"""The draw log: a finished Trace as aligned text a person reads at a glance.

Top to bottom: a header with counts per stream and kind; every event in order
(the first ``max_lines`` of a long log) with the frame that called the API and
the first frame in the user's own code; draws grouped by call site, always for
all of them; hints naming the generator to draw from instead; the trace's notes.
Only the Trace is read: nothing here knows how it was recorded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from ..trace import DRAW, SEED, UNATTRIBUTED, Event, Frame, Statistic, Trace
from ._paths import current_dir, describe, is_user_file, user_frame

Paint = Callable[[str, str], str]

_ANSI = {"bold": "1", "dim": "2", "warn": "33", "alert": "1;31", "user": "1"}
_STREAM_ORDER = ("random", "numpy", "torch")
_KIND_ORDER = (SEED, DRAW, UNATTRIBUTED)
_KIND_WORDS = {SEED: ("seed", "seeds"), DRAW: ("draw", "draws"), UNATTRIBUTED: ("unattributed",) * 2}
_TAIL = 3  # events shown from the end of a long log
_MAX_SITES = 20
_EMPTY = "—"

_GENERATORS = {
    "random": ("rng = random.Random(seed)", "rng"),
    "numpy": ("rng = np.random.default_rng(seed)", "rng"),
    "torch": ("g = torch.Generator().manual_seed(seed)", "g"),
}
# np.random.* legacy names whose Generator method is called something else.
_NUMPY_RENAMES = {
    "rand": "random",
    "random_sample": "random",
    "ranf": "random",
    "sample": "random",
    "randn": "standard_normal",
    "randint": "integers",
    "random_integers": "integers",
    "tomaxint": "integers",
}
# torch APIs with no generator= parameter: only seeding the global stream fixes them.
_NO_GENERATOR = frozenset({
    "dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout",
    "rrelu", "scaled_dot_product_attention",
})
_TORCH_DATA = "torch/utils/data/"
_UNATTRIBUTED_WHY = (
    "! unattributed: the stream moved and no recorded call explains it, usually a reference\n"
    "  bound before tracing (`from numpy.random import rand`) or C code drawing directly."
)


@dataclass
class _Row:
    """One table row: (text, style) cells and an optional line printed under it."""

    cells: list[tuple[str, str]]
    note: str = ""
    note_style: str = ""


@dataclass
class _Table:
    """Columns with titles and alignment ('<' or '>'), rows filled in later."""

    titles: list[str]
    align: str
    rows: list[_Row] = field(default_factory=list)
    note_column: int = 0  # the column a row's note is indented to


def render(trace: Trace, *, color: bool = False, max_lines: int = 60) -> str:
    """Return the draw log for ``trace``; ANSI colour only when ``color`` is true."""
    paint = _painter(color)
    if len(trace) == 0:
        watched = f" (watched: {', '.join(trace.streams)})" if trace.streams else ""
        lines = [paint(f"rngtrace: no draws or reseeds of global random streams{watched}", "bold")]
        return "\n".join(lines + _notes(trace))
    cwd = current_dir()
    sections = [
        [paint(_header(trace), "bold")] + _events(trace, paint, cwd, max(max_lines, 0)),
        _sites(trace, paint, cwd, max_lines),
        _hints(trace),
        _notes(trace),
    ]
    return "\n\n".join("\n".join(s) for s in sections if s)


def _painter(color: bool) -> Paint:
    """A function that wraps text in the ANSI code for a style, or leaves it alone."""
    if not color:
        return lambda text, style: text
    return lambda text, style: f"\x1b[{_ANSI[style]}m{text}\x1b[0m" if style and text else text


def _header(trace: Trace) -> str:
    """``rngtrace: 5 events — numpy: 1 seed, 3 draws · random: 1 draw``."""
    counts = trace.counts()
    parts = []
    for stream in sorted({s for s, _ in counts}, key=_stream_key):
        kinds = sorted((k for s, k in counts if s == stream), key=_kind_key)
        parts.append(f"{stream}: " + ", ".join(_plural(counts[stream, k], k) for k in kinds))
    return f"rngtrace: {_plural(len(trace), 'event')} — " + " · ".join(parts)


def _plural(n: int, kind: str) -> str:
    one, many = _KIND_WORDS.get(kind, (kind, kind + "s"))
    return f"{n:,} {one if n == 1 else many}"


def _stream_key(stream: str) -> tuple:
    base = _base(stream)
    rank = _STREAM_ORDER.index(base) if base in _STREAM_ORDER else len(_STREAM_ORDER)
    return (rank, base, stream != base, stream)


def _kind_key(kind: str) -> tuple:
    return (_KIND_ORDER.index(kind) if kind in _KIND_ORDER else len(_KIND_ORDER), kind)


def _base(stream: str) -> str:
    """``torch.cuda:0`` -> ``torch``: the library a stream belongs to."""
    return stream.split(".", 1)[0]


# -- the events, in order -------------------------------------------------------


def _events(trace: Trace, paint: Paint, cwd: str, max_lines: int) -> list[str]:
    """The event table, its elision line for a long log, and what was dropped."""
    events = trace.events
    tail = _TAIL if max_lines >= 4 * _TAIL and len(events) > max_lines else 0
    head = events[: max_lines - tail] if len(events) > max_lines else events
    shown = head + (events[-tail:] if tail else [])
    hidden = events[len(head) : len(events) - tail]
    lines: list[str] = []
    if shown:
        table = _event_table(shown, cwd)
        lines = _format(table, paint)
        if hidden:
            cut = 1 + sum(1 + bool(row.note) for row in table.rows[: len(head)])
            lines.insert(cut, paint(_elision(hidden), "dim"))
    elif hidden:
        lines = [paint(_elision(hidden), "dim")]
    if trace.dropped:
        lines.append(
            f"  {trace.dropped:,} more events beyond max_events={trace.max_events:,} were counted "
            "but not kept; the counts and call sites include them."
        )
    if any(kind == UNATTRIBUTED for _s, kind in trace.counts()):
        lines += [paint(line, "warn") for line in _UNATTRIBUTED_WHY.splitlines()]
    return lines


def _elision(hidden: Sequence[Event]) -> str:
    odd = sum(e.kind == UNATTRIBUTED for e in hidden)
    among = f", {odd:,} unattributed among them" if odd else ""
    return f"  … {len(hidden):,} more events not shown{among} (trace.events has them all)"


def _event_table(events: Sequence[Event], cwd: str) -> _Table:
    """Rows for ``events``; the thread column only when more than one thread drew."""
    threads = len({e.thread for e in events}) > 1
    titles = ["", "#", "stream", "kind", "api", "called at", "your code"] + (["thread"] if threads else [])
    table = _Table(titles, "<><<<<<<", note_column=2)
    for e in events:
        odd = e.kind == UNATTRIBUTED
        called = describe(e.frame, cwd)
        cells = [
            ("!" if odd else "", "alert"),
            (str(e.index), ""),
            (e.stream, ""),
            (e.kind, "warn" if odd else ""),
            (_api(e), "warn" if odd else ""),
            (called, "" if e.frame and is_user_file(e.frame.filename) else "dim"),
            (_your_code(e.stack, cwd), "user"),
        ] + ([(e.thread, "dim")] if threads else [])
        table.rows.append(_Row(cells, (e.detail or "") if odd else "", "warn"))
    return table


def _api(event: Event) -> str:
    """``numpy.random.seed(666)``, ``numpy.random.rand ×3``, or the api alone."""
    if event.kind == SEED:
        return f"{event.api}({event.detail if event.detail is not None else ''})"
    if event.count is not None and event.kind == DRAW:
        return f"{event.api} ×{event.count:,}"
    return event.api


def _your_code(stack: tuple[Frame, ...], cwd: str) -> str:
    """The first user frame, blank when it is the calling frame itself, a dash when none was recorded."""
    if not stack:
        return ""
    mine = user_frame(stack)
    if mine is stack[0]:
        return ""
    return describe(mine, cwd) if mine is not None else _EMPTY


# -- draws by call site ----------------------------------------------------------


def _sites(trace: Trace, paint: Paint, cwd: str, max_lines: int) -> list[str]:
    """Every draw, dropped ones too, grouped by the calling line and the user's line."""
    groups: dict[tuple, list[int]] = {}
    for stat in trace.statistics("traceback"):
        key = (stat.stream, stat.api, describe(stat.frame, cwd), _your_code(stat.stack, cwd))
        slot = groups.setdefault(key, [0, 0, bool(stat.frame and is_user_file(stat.frame.filename))])
        slot[0] += stat.calls
        slot[1] += stat.values
    if not groups:
        return []
    ordered = sorted(groups.items(), key=lambda kv: (-kv[1][0], -kv[1][1], kv[0]))
    limit = min(_MAX_SITES, max(max_lines, 5))
    table = _Table(["calls", "values", "stream", "api", "site", "your code"], ">><<<<")
    for (stream, api, site, mine), (calls, values, user) in ordered[:limit]:
        cells = [(f"{calls:,}", ""), (f"{values:,}" if values else _EMPTY, ""), (stream, ""),
                 (api, ""), (site, "" if user else "dim"), (mine, "user")]
        table.rows.append(_Row(cells))
    total = sum(calls for calls, _v, _u in groups.values())
    lines = [paint(f"Draws by call site ({_plural(total, DRAW)}, most calls first):", "bold")]
    lines += _format(table, paint)
    if len(ordered) > limit:
        more = len(ordered) - limit
        lines.append(paint(f"  … {more:,} more call sites (trace.statistics() has them all)", "dim"))
    return lines


# -- hints and notes --------------------------------------------------------------


def _hints(trace: Trace) -> list[str]:
    """For each library whose global stream was drawn from: the generator to use instead."""
    drawn: dict[str, list[Statistic]] = {}
    library = False
    for stat in trace.statistics("lineno"):  # most calls first
        drawn.setdefault(_base(stat.stream), []).append(stat)
        library = library or not (stat.frame and is_user_file(stat.frame.filename))
    if not drawn:
        return []
    lines = ["Hint: draw from a generator you own, seeded once, so no other code shifts your numbers:"]
    width = max(len(base) for base in drawn)
    for base in sorted(drawn, key=_stream_key):
        first, *rest = _hint(base, drawn[base])
        lines.append(f"  {base:<{width}}  {first}")
        lines.extend(f"  {'':<{width}}  {line}" for line in rest)
    if library:
        lines.append(
            "  Where a library draws: pass it your generator (random_state=, generator=) "
            "or wrap the call in rngtrace.rng_isolate()."
        )
    return lines


def _hint(base: str, stats: list[Statistic]) -> list[str]:
    """The lines of one library's hint: how to make the generator, what to call instead."""
    if base not in _GENERATORS:
        return [f"an explicit {base} generator object instead of the global stream"]
    make, name = _GENERATORS[base]
    apis = list(dict.fromkeys(stat.api for stat in stats))
    if base == "torch":
        return _torch_hint(make, name, stats, apis)
    uses = []
    for api in apis[:3]:
        called = api.rsplit(".", 1)[-1]
        method = _NUMPY_RENAMES.get(called, called) if base == "numpy" else called
        uses.append(f"{name}.{method} for {api}")
    return [f"{make}; " + ", ".join(uses) + (", …" if len(apis) > 3 else "")]


def _torch_hint(make: str, name: str, stats: list[Statistic], apis: list[str]) -> list[str]:
    cuda = {stat.stream.startswith("torch.cuda") for stat in stats}
    if cuda == {True}:
        make = make.replace("Generator()", "Generator(device='cuda')")
    elif True in cuda:
        make += " (device='cuda' for CUDA draws)"
    loader = any(stat.frame and _TORCH_DATA in stat.frame.filename.replace("\\", "/") for stat in stats)
    plain = [api for api in apis if api.rsplit(".", 1)[-1] not in _NO_GENERATOR and not (
        loader and api == "torch.Tensor.random_")]
    fixed = [api for api in apis if api.rsplit(".", 1)[-1] in _NO_GENERATOR]
    lines = [make]
    if plain:
        lines.append(f"pass generator={name} to " + ", ".join(plain[:3]) + (", …" if len(plain) > 3 else ""))
    if loader:
        lines.append(f"DataLoader(..., generator={name}) for its shuffle order and worker base seed")
    if fixed:
        lines.append(f"{', '.join(fixed)} take{'s' if len(fixed) == 1 else ''} no generator: "
                     "call torch.manual_seed(seed) once where the run starts")
    return lines


def _notes(trace: Trace) -> list[str]:
    return [f"Note: {note}" for note in trace.notes]


# -- alignment --------------------------------------------------------------------


def _format(table: _Table, paint: Paint) -> list[str]:
    """Align the table's columns, dropping columns no row fills; style after padding."""
    keep = [i for i, title in enumerate(table.titles) if any(row.cells[i][0] for row in table.rows)]
    widths = {i: max(len(table.titles[i]), *(len(row.cells[i][0]) for row in table.rows)) for i in keep}
    last = keep[-1]

    def line(cells: list[tuple[str, str]]) -> str:
        out = []
        for i in keep:
            text, style = cells[i]
            pad = " " * max(widths[i] - len(text), 0) if i != last else ""
            out.append(pad + paint(text, style) if table.align[i] == ">" else paint(text, style) + pad)
        return ("  " + "  ".join(out)).rstrip()

    lines = [line([(title, "dim") for title in table.titles])]
    indent = 2 + sum(widths[i] + 2 for i in keep if i < table.note_column)
    for row in table.rows:
        lines.append(line(row.cells))
        if row.note:
            lines.append(" " * indent + paint(row.note, row.note_style))
    return lines
