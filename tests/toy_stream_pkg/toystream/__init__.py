"""A global random stream of its own: a module-level generator behind module functions.

Like ``random`` or ``np.random``'s legacy functions, ``draw()`` and ``seed()`` work on one
hidden generator (``_global``), which starts from OS entropy. It is not Python's hidden
``random`` instance: a tiny 64-bit linear congruential generator, written here.
"""

from __future__ import annotations

import os

_MULTIPLIER = 6364136223846793005
_INCREMENT = 1442695040888963407
_MASK = (1 << 64) - 1


class Generator:
    """A generator of one's own: ``Generator(seed).draw()``."""

    def __init__(self, seed: int | None = None) -> None:
        self.seed(seed)

    def seed(self, n: int | None = None) -> None:
        self.state = (int.from_bytes(os.urandom(8), "little") if n is None else int(n)) & _MASK

    def draw(self) -> float:
        self.state = (self.state * _MULTIPLIER + _INCREMENT) & _MASK
        return (self.state >> 11) / float(1 << 53)

    def getstate(self) -> int:
        return self.state

    def setstate(self, state: int) -> None:
        self.state = int(state) & _MASK


#: the hidden generator behind the module's functions: the global stream
_global = Generator()


def draw() -> float:
    """One number in [0, 1) from the global stream."""
    return _global.draw()


def draws(n: int) -> list[float]:
    """``n`` numbers, by calling ``draw()``: one call of the library's, drawing n times."""
    return [draw() for _ in range(n)]


def seed(n: int | None = None) -> None:
    """Seed the global stream with ``n``, or from OS entropy where ``n`` is None."""
    _global.seed(n)


def getstate() -> int:
    return _global.getstate()


def setstate(state: int) -> None:
    _global.setstate(state)
