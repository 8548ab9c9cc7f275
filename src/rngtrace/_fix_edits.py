"""The edits ``rngtrace fix`` makes, as data, and how a stream's declaration spells its generator.

Analysis only, and shared by the planner (``_fix_plan``) and the face that applies the edits
(``_fix_rewrite``): an ``Edit`` names a line of the user's file and the call made there; a
``Generator`` is the one a file draws from after the fix; a ``Plan`` holds them per file. Names
in an edit's text are marked ``<numpy.random.default_rng>``: the face spells them as the file
imports them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ._model import Finding
from ._streams import Stream

#: a name an edit's text uses, marked to be spelled as the file imports it: ``<torch.Generator>``
MARK = re.compile(r"<([A-Za-z_][\w.]*)>")
_LEADING_NAME = re.compile(r"([A-Za-z_][\w.]*)(.*)", re.S)


@dataclass(frozen=True)
class Edit:
    """A change at ``line`` of a user's file, to the call of ``api`` made there."""

    line: int
    api: str
    stream: str


@dataclass(frozen=True)
class Draw(Edit):
    """A legacy call becomes its generator's method: ``np.random.rand(2, 3)`` -> ``rng.random((2, 3))``."""

    method: str = ""
    #: the shape comes as separate arguments: they become one tuple
    shape: bool = False
    #: the upper bound is inclusive: ``endpoint=True``, and a lone argument is that bound, from 1
    inclusive: bool = False


@dataclass(frozen=True)
class PassGenerator(Edit):
    """A draw takes the module's generator: ``torch.randn(3)`` -> ``torch.randn(3, generator=g)``."""


@dataclass(frozen=True)
class AddArgument(Edit):
    """A library call takes its own seed: ``train_test_split(X)`` -> ``train_test_split(X, random_state=0)``.

    ``api`` names the call (``KMeans.fit``); ``names`` are the callables it may be made through at the
    line; ``value`` may hold ``{generator}``, the module's generator of ``stream``. ``constructor``:
    where a method of an object drew, the keyword goes to the call that made the object.
    """

    names: tuple[str, ...] = ()
    keyword: str = ""
    value: str = ""
    constructor: bool = False


@dataclass(frozen=True)
class SeedBefore(Edit):
    """The statement at ``line`` gets ``statement`` right before it (a torch model: modules take no generator)."""

    statement: str = ""


@dataclass(frozen=True)
class GiveSeed(Edit):
    """A stream or generator seeded from OS entropy gets a value: ``default_rng()`` -> ``default_rng(0)``."""

    #: "": the seed is the call's first argument; else the method that takes one instead (``manual_seed``)
    method: str = ""
    seed: str = "0"


@dataclass(frozen=True)
class Seed(Edit):
    """The user's legacy seed (``np.random.seed(666)``): the module's generator replaces it where it can."""

    value: str = "0"


@dataclass(frozen=True)
class Generator:
    """The generator of one stream a file draws from after the fix: ``rng = np.random.default_rng(666)``."""

    stream: str
    name: str
    #: the call that makes it, names marked, ``{seed}`` to fill: ``<numpy.random.default_rng>({seed})``
    make: str
    seed: str
    #: made only where the file's seeds of the stream were (replacing them); else right after its imports
    #: too, and made anew at each seed (as the seed reset the legacy stream there)
    at_seeds: bool


@dataclass
class FilePlan:
    """Everything ``rngtrace fix`` changes in one file."""

    path: str
    edits: list[Edit] = field(default_factory=list)
    generators: dict[str, Generator] = field(default_factory=dict)


@dataclass
class Plan:
    """The whole change: per file, and what the findings named that is not changed, and why."""

    files: dict[str, FilePlan]
    notes: list[str]
    #: stream -> why its legacy seeds stay (a draw of the stream that no edit takes off it)
    keep_seeds: dict[str, str]
    #: the findings some edit addresses
    addressed: list[Finding]
    #: the streams whose draws move to generators of their own (their values change once)
    moved: list[str]


def legacy(info: Stream) -> bool:
    """Whether the stream's draws are calls of its module that a generator's methods replace."""
    return bool(info.make_generator) and not info.generator_argument


def canonical(dotted: str, info: Stream) -> str:
    """``numpy.random.seed`` for ``np.random.seed``: the declaration's spelling made the module's own."""
    head, dot, rest = dotted.partition(".")
    return info.import_names.get(head, head) + dot + rest


def seed_function(info: Stream) -> str:
    """The function that seeds the stream with a value (``numpy.random.seed``), from its ``seed_call``."""
    match = _LEADING_NAME.fullmatch(info.seed_call)
    return canonical(match.group(1), info) if match and info.seed_call else ""


def marked(text: str, info: Stream) -> str:
    """``<numpy.random.default_rng>({seed})`` for ``np.random.default_rng({seed})``: its leading name marked."""
    match = _LEADING_NAME.fullmatch(text.strip())
    if match is None:
        return text
    return f"<{canonical(match.group(1), info)}>{match.group(2)}"


def generator_of(info: Stream) -> tuple[str, str]:
    """(name, marked call) of the generator the stream declares: ``("rng", "<numpy.random.default_rng>({seed})")``."""
    name, _, made = info.make_generator.partition(" = ")
    return info.generator_name or name.strip(), marked(made, info)
