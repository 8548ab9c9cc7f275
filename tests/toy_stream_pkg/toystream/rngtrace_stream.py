"""toystream's streams, as rngtrace reads them (the ``rngtrace.sources`` entry points), and their sources.

Only the declarations are read when rngtrace lists its streams; ``ToySource`` and
``BareSource`` are used once a trace wants the stream and its module is imported.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

from rngtrace.sources import Source, Stream

# No public path for these yet: a third-party source imports them from rngtrace's private module.
from rngtrace.sources._base import draw_wrapper, restore_wrapper, seed_wrapper

STREAM = Stream(
    name="toy",
    module="toystream",
    source="toystream.rngtrace_stream:ToySource",
    seed_call="toystream.seed(0)",
    own_generator="toystream.Generator(seed)",
    make_generator="gen = toystream.Generator({seed})",
    generator_name="gen",
    per_process_fix="seed each process with toystream.seed(base + worker_id)",
    entropy_at_start=True,
    reseeded_at_fork=False,
    library_files=("toystream/",),
)

#: a stream that declares nothing but where it is: it gets no advice, never another library's
BARE = Stream(name="bare", module="toystream.bare", source="toystream.rngtrace_stream:BareSource")


def _many(result: Any, args: tuple, kwargs: dict) -> int:
    return len(result)


class ToySource(Source):
    """The stream behind ``toystream.draw()``: toystream's hidden ``_global`` generator."""

    stream = STREAM

    def __init__(self) -> None:
        self._module = sys.modules["toystream"]

    def patches(self, hub: Any) -> Iterable[tuple]:
        mod = self._module
        yield mod, "draw", draw_wrapper(hub, "toy", "toystream.draw", mod.draw, None)
        yield mod, "draws", draw_wrapper(hub, "toy", "toystream.draws", mod.draws, _many)
        yield mod, "seed", seed_wrapper(hub, "toy", "toystream.seed", mod.seed)
        yield mod, "setstate", restore_wrapper(hub, "toy", "toystream.setstate", mod.setstate, self._current)

    def _current(self, state: Any) -> bool:
        return state == self._module._global.getstate()

    def owners(self) -> Iterable[object]:
        return (self._module._global,)

    def state(self) -> dict[str, Any]:
        return {"toy": self._module._global.getstate()}

    def restore(self, states: dict[str, Any]) -> None:
        if "toy" in states:
            self._module._global.setstate(states["toy"])


class BareSource(Source):
    """The stream behind ``toystream.bare.draw()``."""

    stream = BARE

    def __init__(self) -> None:
        self._module = sys.modules["toystream.bare"]

    def patches(self, hub: Any) -> Iterable[tuple]:
        mod = self._module
        yield mod, "draw", draw_wrapper(hub, "bare", "toystream.bare.draw", mod.draw, None)
        yield mod, "seed", seed_wrapper(hub, "bare", "toystream.bare.seed", mod.seed)

    def state(self) -> dict[str, Any]:
        return {"bare": self._module._global.getstate()}

    def restore(self, states: dict[str, Any]) -> None:
        if "bare" in states:
            self._module._global.setstate(states["bare"])
