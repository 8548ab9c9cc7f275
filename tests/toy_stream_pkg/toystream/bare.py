"""A second global stream whose declaration gives rngtrace no advice at all (name, module, source)."""

from __future__ import annotations

from . import Generator

_global = Generator(12345)


def draw() -> float:
    return _global.draw()


def seed(n: int | None = None) -> None:
    _global.seed(n)
