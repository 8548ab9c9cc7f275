"""What every stream source provides, and the wrappers that record a call: one import for sources.

The parts live apart (``_source``: the ``Source`` protocol; ``_wrapping``: the Python
wrapper's entry, checked call and pickling; ``_recorder``: the one recording wrapper
and the draw and seed wrappers made with it; ``_restoring``: the restore and state-getter wrappers); a
source imports them from here.
"""

from __future__ import annotations

from ._recorder import draw_wrapper, inplace_count, method_in_place, recorder, seed_recorder, seed_wrapper, twin_of
from ._restoring import getter_wrapper, restore_wrapper
from ._source import IN_PLACE, INTERNAL, Hit, Patch, Source, library_of, same_state, source_classes, unmoved
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
    stepping_aside,
)

__all__ = [
    "IN_PLACE",
    "INTERNAL",
    "Condition",
    "Hit",
    "Patch",
    "Source",
    "Through",
    "Wrapper",
    "call_busy",
    "checked_call",
    "draw_wrapper",
    "entry",
    "getter_wrapper",
    "inplace_count",
    "library_of",
    "method_in_place",
    "moved_note",
    "named",
    "recorded_by_catchall",
    "recorder",
    "reduce_as_original",
    "restore_wrapper",
    "same_state",
    "seed_detail",
    "seed_recorder",
    "seed_wrapper",
    "source_classes",
    "stepping_aside",
    "twin_of",
    "unmoved",
]
