"""The pytest plugin: name the tests that draw from, reseed or leak global random streams.

Registered through the ``pytest11`` entry point and inert unless ``--rng-trace``
(a plain flag; ``--rng-trace-mode`` or ``--rng-trace=MODE`` picks the mode) or the
ini option ``rng_trace`` turns it on: until then it imports nothing
beyond pytest and patches nothing. Turned on, one trace records the whole run
and each test's phases are marked in it (``_pytest_record``); each test's
record travels in its teardown report, so pytest-xdist's controller sees what
its workers saw, and the terminal summary and ``--rng-trace-json`` are made
from those records (``_pytest_report``).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import Any

import pytest

MODES = ("report", "strict", "off")


def _not_rewritten() -> None:
    """Keep pytest from rewriting the asserts of rngtrace's own modules as it imports them.

    pytest rewrites every module of a package that registers a plugin, compiling each from
    its source where bytecode is not written (``PYTHONDONTWRITEBYTECODE``, common in CI
    images): about 0.1 s added to every traced run for the ~20 modules a trace imports,
    whose asserts are internal checks, not test assertions. pytest offers no public way
    out; where its hook is not what it was, nothing changes.
    """
    import sys

    for finder in sys.meta_path:
        marked = getattr(finder, "_must_rewrite", None)
        if type(finder).__name__ == "AssertionRewritingHook" and isinstance(marked, set):
            marked.discard(__name__.split(".", 1)[0])


_not_rewritten()
MARKER = (
    "rng_global(reason): this test draws from or reseeds a global random stream on purpose; "
    "rngtrace's --rng-trace-mode=strict does not fail it"
)


def _mode(value: str) -> str:
    if value not in MODES:
        raise argparse.ArgumentTypeError(f"unknown mode {value!r}; choose from {', '.join(MODES)}")
    return value


def pytest_addoption(parser: pytest.Parser) -> None:
    _not_rewritten()  # each session's own hook (pytester's in-process runs make one each)
    group = parser.getgroup("rngtrace", "rngtrace: tests that draw from, reseed or leak global random streams")
    # A plain flag: with an optional value it would take the next word (`--rng-trace tests/`) as its mode.
    group.addoption(
        "--rng-trace",
        action="store_true",
        default=False,
        dest="rng_trace",
        help="trace every test's draws and reseeds of random, NumPy and torch's global streams, "
        "and list the tests that touch them or leak state into later tests",
    )
    group.addoption(
        "--rng-trace-mode",
        type=_mode,
        default=None,
        metavar="MODE",
        dest="rng_trace_mode",
        help="'report' (the default) lists those tests; 'strict' also fails them unless marked "
        "rng_global or using the rng_trace fixture; 'off' turns the plugin off "
        "(report or strict turn it on without --rng-trace)",
    )
    # --rng-trace=MODE as well: argparse matches an option's whole string before it splits at "=",
    # so each written-out mode is an option of its own and the bare flag still takes no value.
    for mode in MODES:
        group.addoption(
            f"--rng-trace={mode}", action="store_const", const=mode, dest="rng_trace_mode", help=argparse.SUPPRESS
        )
    group.addoption(
        "--rng-trace-json",
        metavar="PATH",
        default=None,
        dest="rng_trace_json",
        help="also write every reported test's log to PATH, readable by `rngtrace show` "
        "(turns the plugin on, in report mode unless a mode is given)",
    )
    parser.addini(
        "rng_trace", "rngtrace mode for every run: report, strict or off (as --rng-trace-mode=MODE)", default=""
    )


def _ini_mode(config: pytest.Config) -> str | None:
    mode = (config.getini("rng_trace") or "").strip() or None
    if mode is not None and mode not in MODES:
        raise pytest.UsageError(f"ini option rng_trace = {mode!r} is not a mode; choose from {', '.join(MODES)}")
    return mode


def _resolve_mode(config: pytest.Config) -> str:
    """Pick the mode this run traces in: --rng-trace-mode, else the ini file's (on by --rng-trace), else off."""
    given, flag, ini = config.getoption("rng_trace_mode"), config.getoption("rng_trace"), _ini_mode(config)
    if flag:
        _refuse_a_mode_read_as_a_path(config)
    if given is not None:
        return given
    if ini is not None and (ini != "off" or not flag):
        return ini
    return "report" if flag or config.getoption("rng_trace_json") else "off"


def _refuse_a_mode_read_as_a_path(config: pytest.Config) -> None:
    # `pytest tests/ --rng-trace strict`, written for the old optional value, would collect a path "strict".
    for arg in config.args:
        if arg in MODES and not (config.invocation_params.dir / arg).exists():
            raise pytest.UsageError(
                f"--rng-trace takes no value, so {arg!r} is read as a test path; "
                f"write --rng-trace-mode={arg} (or --rng-trace={arg})"
            )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER)
    mode = _resolve_mode(config)
    if mode != "off":
        from ._pytest_tracer import Tracer  # only when on: an inert plugin loads this module alone

        config.pluginmanager.register(Tracer(config, mode), "rngtrace-tracer")


@pytest.fixture
def rng_trace() -> Iterator[Any]:
    """The running test's Trace (``assert not rng_trace.draws``); strict mode lets a test using it draw."""
    from .tracer import RngTrace  # here: an inert plugin imports no more of rngtrace than this module

    with RngTrace(print=False) as trace:
        yield trace
