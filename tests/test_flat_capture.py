"""Stacks captured where no cache of live frames can be kept (frame mode WALK): C key and Python key agree."""

from __future__ import annotations

import sys

import pytest

from rngtrace import _stack
from rngtrace._stack import StackTable

needs_c = pytest.mark.skipif(_stack._c_flat_key is None, reason="the C accelerator is not built or is turned off")


def _nested(levels: int, table: StackTable, depth: int, out: list) -> None:
    if levels:
        _nested(levels - 1, table, depth, out)
        return
    frame = sys._getframe()
    out.append(table.resolve(table.capture_flat(frame, depth), depth))  # line A
    out.append(table.resolve(table.capture_flat(frame, depth), depth))  # line B: same frame, another line


def _both_ways(monkeypatch: pytest.MonkeyPatch, levels: int, depth: int) -> tuple[list, list]:
    results: list[list] = [[], []]
    for i, out in enumerate(results):  # from one line: the two stacks differ only if the keys do
        if i:
            monkeypatch.setattr(_stack, "_c_flat_key", None)
        _nested(levels, StackTable(), depth, out)
    return results[0], results[1]


@needs_c
@pytest.mark.parametrize("levels, depth", [(0, 1), (3, 16), (40, 16), (40, 64), (2, 200)])
def test_the_c_key_gives_the_stacks_the_python_key_gives(monkeypatch, levels, depth):
    with_c, in_python = _both_ways(monkeypatch, levels, depth)
    assert with_c == in_python
    assert len(with_c[0]) == min(depth, len(with_c[0]))
    # Two lines of one frame are two stacks: the key holds where the frame is, not only its code.
    assert with_c[0][0].lineno != with_c[1][0].lineno
    assert with_c[0][1:] == with_c[1][1:]


@needs_c
def test_a_key_is_made_once_per_place_and_reused():
    table = StackTable()
    frame = sys._getframe()
    first = [table.capture_flat(frame, 8) for _ in range(3)]
    assert len(set(first)) == 1 and len(table._flat) == 1
    assert isinstance(next(iter(table._flat)), bytes)


@needs_c
def test_bad_arguments_to_the_c_key_raise_type_error():
    with pytest.raises(TypeError):
        _stack._c_flat_key("not a frame", 4)
    with pytest.raises(TypeError):
        _stack._c_flat_key(sys._getframe(), "4")
    assert _stack._c_flat_key(None, 4) == b""
