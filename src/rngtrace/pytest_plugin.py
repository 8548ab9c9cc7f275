"""The pytest plugin: name the tests that draw from, reseed or leak global random streams.

Registered through the ``pytest11`` entry point and inert unless ``--rng-trace``
(or the ini option ``rng_trace``) turns it on: until then it imports nothing
beyond pytest and patches nothing. Turned on, one trace records the whole run
and each test's phases are marked in it (``_pytest_record``); each test's
record travels in its teardown report, so pytest-xdist's controller sees what
its workers saw, and the terminal summary and ``--rng-trace-json`` are made
from those records (``_pytest_report``).
"""

from __future__ import annotations

import argparse
from typing import Any, Iterator

import pytest

MODES = ("report", "strict", "off")
MARKER = ("rng_global(reason): this test draws from or reseeds a global random stream on purpose; "
          "rngtrace's --rng-trace=strict does not fail it")


def _mode(value: str) -> str:
    if value not in MODES:
        raise argparse.ArgumentTypeError(
            f"unknown mode {value!r}; choose from {', '.join(MODES)} "
            "(a bare --rng-trace takes the next word as its mode: write it after the test paths, or as --rng-trace=report)")
    return value


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("rngtrace", "rngtrace: tests that draw from, reseed or leak global random streams")
    group.addoption("--rng-trace", nargs="?", const="report", default=None, type=_mode, metavar="MODE",
                    dest="rng_trace",
                    help="trace every test's draws and reseeds of random, NumPy and torch's global streams: "
                         "'report' (the default) lists the tests that touch them or leak state into later tests; "
                         "'strict' fails those tests unless marked rng_global or using the rng_trace fixture")
    group.addoption("--rng-trace-json", metavar="PATH", default=None, dest="rng_trace_json",
                    help="also write every reported test's log to PATH, readable by `rngtrace show` "
                         "(implies --rng-trace=report unless a mode is given)")
    parser.addini("rng_trace", "rngtrace mode for every run: report, strict or off (as --rng-trace=MODE)", default="")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER)
    mode = config.getoption("rng_trace")
    if mode is None:
        mode = (config.getini("rng_trace") or "").strip() or None
        if mode is not None and mode not in MODES:
            raise pytest.UsageError(f"ini option rng_trace = {mode!r} is not a mode; choose from {', '.join(MODES)}")
    if mode is None:
        mode = "report" if config.getoption("rng_trace_json") else "off"
    if mode != "off":
        from ._pytest_tracer import Tracer  # only when on: an inert plugin loads this module alone

        config.pluginmanager.register(Tracer(config, mode), "rngtrace-tracer")


@pytest.fixture
def rng_trace() -> Iterator[Any]:
    """The running test's Trace (``assert not rng_trace.draws``); strict mode lets a test using it draw."""
    from .tracer import RngTrace  # here: an inert plugin imports no more of rngtrace than this module

    with RngTrace(print=False) as trace:
        yield trace
