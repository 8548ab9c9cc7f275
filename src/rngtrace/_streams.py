"""What a global stream declares about itself: the facts every other layer reads.

A stream is declared once, by its module in ``sources/`` (or by a third-party
package through the ``rngtrace.sources`` entry-point group), as a ``Stream``.
Findings, fixes, renderers, the diff, ranks, child processes and the pytest
report read these fields and nothing else about a stream: a stream that
declares no advice gets none, never another library's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: the entry-point group through which other packages add a stream
ENTRY_POINT_GROUP = "rngtrace.sources"

#: a Stream's fields, in the order its constructor takes them
FIELDS = (
    "name",
    "module",
    "source",
    "seed_call",
    "own_generator",
    "make_generator",
    "generator_name",
    "renames",
    "generator_argument",
    "no_generator",
    "per_process_fix",
    "entropy_at_start",
    "reseeded_at_fork",
    "fork_call",
    "library_files",
    "import_names",
    "shape_arguments",
    "inclusive_high",
    "no_equivalent",
    "entropy_seeded",
    "values_change",
)
_MAPPINGS = ("renames", "import_names", "no_equivalent", "entropy_seeded")


class Stream:
    """One global random stream, as its source declares it.

    Every text field is optional but ``name``, ``module`` and ``source``: where a
    field is empty, the log gives no advice of that kind for this stream. Frozen,
    compared and printed by its fields, as a frozen dataclass is (written out: a
    dataclass costs a traced child's start the ``dataclasses`` and ``inspect`` imports).
    """

    __slots__ = FIELDS

    #: what ``streams=`` takes and the events' stream is called; a sub-stream is ``name.sub`` (``torch.cuda:0``)
    name: str
    #: the module whose import makes the stream exist (``numpy.random``); the source loads after it
    module: str
    #: ``"package.module:Class"``: the ``sources._base.Source`` that records it, imported only when traced
    source: str
    #: seeding it with a value, as a user writes it: ``np.random.seed(0)``
    seed_call: str
    #: the generator of one's own that replaces it, in a hint: ``np.random.default_rng(seed)``
    own_generator: str
    #: making that generator, as a line: ``rng = np.random.default_rng(seed)``; ``{seed}`` is filled in
    make_generator: str
    #: the name the made generator is bound to: ``rng``
    generator_name: str
    #: a legacy function's name -> the generator's method of that name (``randn`` -> ``standard_normal``)
    renames: Mapping[str, str]
    #: the draws take the generator as an argument (``generator=g``) rather than as the object called
    generator_argument: bool
    #: the draws that take no generator at all (only seeding the global stream fixes them)
    no_generator: frozenset[str]
    #: what makes each process draw its own numbers (the ``duplicate`` finding's fix)
    per_process_fix: str
    #: a new process starts it from OS entropy: a draw before any seed is unseeded
    entropy_at_start: bool
    #: a fork gives the child a freshly seeded stream (``random`` reseeds at fork)
    reseeded_at_fork: bool
    #: the library's own block that puts the stream back after it, as a user writes it: ``torch.random.fork_rng()``;
    #: a fix proposes it before ``rngtrace.rng_isolate()``, which would make rngtrace a dependency of the program
    fork_call: str
    #: its library's own random files (``numpy/random/``), never taken for the code that called
    library_files: tuple[str, ...]
    #: how the texts above spell the library's modules where not by their own name: ``{"np": "numpy"}``
    import_names: Mapping[str, str]
    #: legacy functions that take the shape as separate arguments: ``rand(d0, d1)`` is ``random((d0, d1))``
    shape_arguments: frozenset[str]
    #: legacy functions whose upper bound is inclusive (``endpoint=True``) and whose lone argument is that
    #: bound, from 1: ``random_integers(5)`` is ``integers(1, 5, endpoint=True)``
    inclusive_high: frozenset[str]
    #: legacy functions the generator has no method for -> why (``rngtrace fix`` leaves them and says so)
    no_equivalent: Mapping[str, str]
    #: generators started from OS entropy at a user's line -> how a seed is given: "" (as the call's first
    #: argument: ``default_rng()`` -> ``default_rng(0)``) or the method that takes one instead (``manual_seed``)
    entropy_seeded: Mapping[str, str]
    #: what moving the draws to ``make_generator`` does to their values, for ``rngtrace fix``'s header
    values_change: str

    def __init__(
        self,
        name: str,
        module: str,
        source: str,
        seed_call: str = "",
        own_generator: str = "",
        make_generator: str = "",
        generator_name: str = "",
        renames: Mapping[str, str] | None = None,
        generator_argument: bool = False,
        no_generator: frozenset[str] = frozenset(),
        per_process_fix: str = "",
        entropy_at_start: bool = False,
        reseeded_at_fork: bool = False,
        fork_call: str = "",
        library_files: tuple[str, ...] = (),
        import_names: Mapping[str, str] | None = None,
        shape_arguments: frozenset[str] = frozenset(),
        inclusive_high: frozenset[str] = frozenset(),
        no_equivalent: Mapping[str, str] | None = None,
        entropy_seeded: Mapping[str, str] | None = None,
        values_change: str = "",
    ) -> None:
        values = locals()
        for field in FIELDS:
            value = values[field]
            object.__setattr__(self, field, {} if value is None and field in _MAPPINGS else value)

    def _fields(self) -> tuple:
        return tuple(getattr(self, field) for field in FIELDS)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"cannot assign to field {name!r}: a Stream is frozen")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}: a Stream is frozen")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Stream) or other.__class__ is not self.__class__:
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return f"Stream({', '.join(f'{field}={getattr(self, field)!r}' for field in FIELDS)})"

    def __reduce__(self) -> tuple:
        return (Stream, self._fields())

    def own_draw(self, method: str, api: str, seed: str = "seed") -> str:
        """The user's draw ``api`` from a generator of their own, or "" where the stream declares none."""
        if not self.make_generator:
            return ""
        made = self.make_generator.replace("{seed}", seed)
        if self.generator_argument:
            return f"{made}, passed as {api}(..., generator={self.generator_name})"
        return f"{made}; {self.generator_name}.{self.renames.get(method, method)}(...)"
