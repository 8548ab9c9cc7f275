"""rngtrace diff compares states: the same calls from another state drew other numbers, and exit 1.

Traces are built from literal events with their origins (the digest of a stream's full state where
it started anew: at its start, after a seed), as a saved log carries them.
"""

from __future__ import annotations

import subprocess
import sys

from literal_traces import build, draw, seed

from rngtrace.diff import compare
from rngtrace.render import render_diff

STORY = "/p/story.py"


def unseeded(digest: str):
    """A run that drew twice from numpy, never seeded, from the state with ``digest``."""
    return build(
        draw("numpy.random.rand", 1, (STORY, 5, "<module>")),
        draw("numpy.random.rand", 1, (STORY, 6, "<module>")),
        origins=(("numpy", digest, "start", 0),),
    )


def entropy_seeded(digest: str):
    return build(
        seed("numpy.random.seed", None, (STORY, 4, "<module>")),
        draw("numpy.random.rand", 1, (STORY, 5, "<module>")),
        origins=(("numpy", "0" * 24, "start", 0), ("numpy", digest, "seed", 1)),
    )


def test_two_unseeded_runs_from_other_states_differ_though_their_calls_match():
    result = compare(unseeded("a" * 24), unseeded("b" * 24))
    assert result.divergences == () and result.sites == () and not result.same
    (state,) = result.states
    assert state.stream == "numpy" and state.never_seeded and state.draw_a.index == 0
    report = render_diff(result)
    assert report.splitlines()[0] == (
        "rngtrace diff: A and B made the same calls, but drew other numbers: numpy started from a different state"
    )
    assert (
        "States differ: numpy started from a different state in A and B (never seeded in either run), "
        "so the same calls drew other numbers"
    ) in report


def test_runs_from_the_same_state_are_the_same():
    result = compare(unseeded("a" * 24), unseeded("a" * 24))
    assert result.same and result.states == ()


def test_seeds_from_os_entropy_in_both_runs_are_named_as_such():
    result = compare(entropy_seeded("c" * 24), entropy_seeded("d" * 24))
    (state,) = result.states
    assert state.from_entropy and state.seed_a.index == 0
    assert "seeded from OS entropy in both runs, at /p/story.py:4 in <module>" in render_diff(result)


def test_a_state_nothing_drew_from_is_not_compared():
    # B's start state differs, but B seeded before drawing: only the seeded state was drawn from.
    def run(start: str):
        return build(
            seed("numpy.random.seed", "0", (STORY, 4, "<module>")),
            draw("numpy.random.rand", 1, (STORY, 5, "<module>")),
            origins=(("numpy", start, "start", 0), ("numpy", "e" * 24, "seed", 1)),
        )

    assert compare(run("a" * 24), run("b" * 24)).same


def test_logs_without_origins_compare_by_their_calls_alone():
    plain = build(
        draw("numpy.random.rand", 1, (STORY, 5, "<module>")), draw("numpy.random.rand", 1, (STORY, 6, "<module>"))
    )
    assert compare(plain, unseeded("a" * 24)).same


def test_rngtrace_diff_exits_1_when_only_the_states_differ(tmp_path):
    unseeded("a" * 24).save(tmp_path / "a.json")
    unseeded("b" * 24).save(tmp_path / "b.json")
    done = subprocess.run(
        [sys.executable, "-m", "rngtrace", "diff", "a.json", "b.json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stderr
    assert "numpy started from a different state in A and B (never seeded in either run)" in done.stdout
