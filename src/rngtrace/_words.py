"""How the findings and the renderers say things alike: safe text, counts, an event's call, stream order.

A finding's message and a log's lines name things the same way:
``numpy.random.rand ×3``, ``1,000 draws``, streams in the order random, numpy,
torch, then packages'. The renderers take these through ``render.base``; a
finding whose message names an event (``divergent``) takes them from here.
"""

from __future__ import annotations

import re

from ._model import DRAW, ENTROPY, RESTORE, SEED, UNATTRIBUTED, Event
from .sources import rank as stream_rank

_KIND_WORDS = {
    SEED: ("seed", "seeds"),
    DRAW: ("draw", "draws"),
    UNATTRIBUTED: ("unattributed",) * 2,
    ENTROPY: ("generator from entropy", "generators from entropy"),
    RESTORE: ("restore", "restores"),
}

# What a log's names must not send to a terminal or a page raw: C0 and C1 controls and DEL (cursor
# moves, line erases, OSC 52 clipboard writes), line and paragraph separators, bidi marks, overrides
# and isolates (they reorder what is shown), and lone surrogates (no encoder can write them).
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_SHORT_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escaped(match: re.Match) -> str:
    char = match.group()
    code = ord(char)
    return _SHORT_ESCAPES.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def printable(text: str) -> str:
    """``text`` with control and bidi characters written as Python escapes (``\\x1b``, ``\\u202e``).

    A lone surrogate reads as the byte it stands for (``\\xe9``: a file name that was not UTF-8),
    or else as ``\\ud800``, as Trace.load writes them, so a live trace prints as its saved log does.
    """
    if not _UNPRINTABLE.search(text):
        return text
    if _SURROGATE.search(text):
        try:
            text = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        except UnicodeEncodeError:  # a surrogate that stands for no byte
            text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return _UNPRINTABLE.sub(_escaped, text)


def plural(n: int, kind: str) -> str:
    """``1 draw``, ``1,000 draws``, ``2 unattributed``: a count and its noun."""
    one, many = _KIND_WORDS.get(kind, (kind, kind + "s"))
    return f"{n:,} {one if n == 1 else many}"


def stream_base(stream: str) -> str:
    """``torch.cuda:0`` -> ``torch``: the library a stream belongs to."""
    return stream.split(".", 1)[0]


def stream_key(stream: str) -> tuple:
    """Sort key: streams in declared order (random, numpy, torch, then packages'), devices after the CPU stream."""
    base = stream_base(stream)
    return (stream_rank(base), base, stream != base, stream)


def api_label(event: Event) -> str:
    """``numpy.random.seed(666)``, ``numpy.random.rand ×3``, or the api alone."""
    if event.kind == SEED:
        return printable(f"{event.api}({event.detail if event.detail is not None else ''})")
    # Compiled code names no line of its own: say what ran it, then the op.
    api = f"torch.compile'd code: {event.api}" if event.kind == DRAW and event.compiled else event.api
    if event.count is not None and event.kind == DRAW:
        return printable(f"{api} ×{event.count:,}")
    return printable(api)
