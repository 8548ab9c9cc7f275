"""rngtrace.diff.compare on traces built from literal events: where two runs part, and how it reads."""

from __future__ import annotations

import os
import subprocess
import sys

from literal_traces import build, draw

from rngtrace import Trace
from rngtrace.diff import ONLY_A, ONLY_B, REPLACED, VALUES, compare
from rngtrace.render import render_diff

SITE_PACKAGES = "/venv/lib/python3.11/site-packages"


def trace(*events: tuple, dropped: list | None = None) -> Trace:
    """A finished Trace from (stream, kind, api, count, stack, detail) tuples.

    A stack is a list of (filename, lineno, function), innermost first; a bare
    ``"file.py:N"`` string is shorthand for a one-frame stack in ``<module>``.
    """
    stacks: list[list] = []
    rows = []
    for stream, kind, api, count, stack, detail in events:
        if isinstance(stack, str):
            filename, line = stack.rsplit(":", 1)
            stack = [(filename, int(line), "<module>")]
        frames = [list(frame) for frame in stack]
        if frames not in stacks:
            stacks.append(frames)
        rows.append([stream, kind, api, count, stacks.index(frames), 1, detail])
    overflow = []
    for stream, kind, api, stack, calls, values in dropped or []:
        stacks.append([list(frame) for frame in stack])
        overflow.append([stream, kind, api, len(stacks) - 1, calls, values])
    return Trace.from_dict(
        {
            "format": "rngtrace",
            "version": 1,
            "pid": 1,
            "streams": ["numpy", "random", "torch"],
            "depth": 16,
            "max_events": 100_000,
            "dropped": sum(row[4] for row in overflow),
            "notes": [],
            "stacks": stacks,
            "threads": {"1": "MainThread"},
            "events": rows,
            "overflow": overflow,
        }
    )


def seed(value: int, at: str = "/p/story.py:8") -> tuple:
    return ("numpy", "seed", "numpy.random.seed", None, at, str(value))


def rand(at: str = "/p/story.py:10", count: int = 1) -> tuple:
    return ("numpy", "draw", "numpy.random.rand", count, at, None)


JITTER = (
    "numpy",
    "draw",
    "numpy.random.uniform",
    1,
    [("/p/acc/devinit.py", 10, "init"), ("/p/story.py", 9, "<module>")],
    None,
)


def test_two_runs_with_the_same_calls_are_the_same():
    result = compare(trace(seed(666), rand()), trace(seed(666), rand()))
    assert result.same and result.first is None and result.sites == ()
    assert render_diff(result).startswith("rngtrace diff: A and B drew the same — 2 events each")


def test_an_extra_draw_in_b_is_the_first_divergence_before_the_draw_both_runs_make():
    a, b = trace(seed(666), rand()), trace(seed(666), JITTER, rand())
    result = compare(a, b)
    first = result.first
    assert not result.same
    assert (first.kind, first.stream, first.a, first.b) == (ONLY_B, "numpy", (), (b.events[1],))
    assert (first.next_a, first.next_b) == (a.events[1], b.events[2])
    report = render_diff(result)
    assert (
        "First divergence: B has 1 extra numpy draw at /p/acc/devinit.py:10 in init, "
        "before the draw both runs make at /p/story.py:10 in <module>"
    ) in report


def test_the_first_divergence_shows_both_runs_stacks_there():
    report = render_diff(compare(trace(seed(666), rand()), trace(seed(666), JITTER, rand())))
    block = report.split("\n\n")[1].splitlines()[1:]
    assert block == [
        "  A  #1  numpy.random.rand ×1     next in both runs",
        "         /p/story.py:10 in <module>",
        "  B  #1  numpy.random.uniform ×1  only in B",
        "         /p/acc/devinit.py:10 in init",
        "         /p/story.py:9 in <module>",
        "     #2  numpy.random.rand ×1     next in both runs",
    ]


def test_a_draw_only_a_makes_is_one_that_b_lacks():
    first = compare(trace(seed(666), JITTER, rand()), trace(seed(666), rand())).first
    assert first.kind == ONLY_A
    assert "A has 1 numpy draw at /p/acc/devinit.py:10 in init that B lacks, before the draw both runs make" in (
        render_diff(compare(trace(seed(666), JITTER, rand()), trace(seed(666), rand())))
    )


def test_the_same_call_drawing_another_number_of_values_differs():
    result = compare(trace(rand(count=3)), trace(rand(count=5)))
    assert result.first.kind == VALUES
    assert "the numpy draw at /p/story.py:10 in <module> differs: A drew 3 values, B 5" in render_diff(result)


def test_the_headline_names_the_users_line_where_a_library_drew():
    # The user changes their line (a train_test_split given a seed), not scikit-learn's.
    def split(count: int) -> tuple:
        stack = [
            (f"{SITE_PACKAGES}/sklearn/utils/_indexing.py", 600, "resample"),
            (f"{SITE_PACKAGES}/sklearn/model_selection/_split.py", 2800, "train_test_split"),
            ("/p/train.py", 14, "<module>"),
        ]
        return ("numpy", "draw", "numpy.random.RandomState.permutation", count, stack, None)

    text = render_diff(compare(trace(split(80)), trace(split(90))))
    assert (
        "the numpy draw at /p/train.py:14 in <module> (in sklearn/utils/_indexing.py:600 in resample) "
        "differs: A drew 80 values, B 90"
    ) in text


def loader_draw(user_line: int, function: str = "<module>") -> tuple:
    stack = [
        (f"{SITE_PACKAGES}/torch/utils/data/dataloader.py", 692, "_BaseDataLoaderIter.__init__"),
        ("/p/train_val.py", user_line, function),
        *([("/p/train_val.py", 40, "<module>")] if function != "<module>" else []),
    ]
    return ("torch", "draw", "torch.Tensor.random_", 1, stack, None)


def test_one_library_line_reached_from_two_of_the_users_lines_is_two_calls():
    # validate()'s loader and the training loop's draw at the same torch line: B's extra one is validate()'s.
    a = trace(loader_draw(26), loader_draw(26))
    b = trace(loader_draw(26), loader_draw(20, "validate"), loader_draw(26))
    first = compare(a, b).first
    assert first.kind == ONLY_B and first.b == (b.events[1],)
    assert (
        "B has 1 extra torch draw at /p/train_val.py:20 in validate "
        "(in torch/utils/data/dataloader.py:692 in _BaseDataLoaderIter.__init__), "
        "before the draw both runs make at /p/train_val.py:26 in <module>"
    ) in render_diff(compare(a, b))


def test_a_stack_deeper_than_the_frames_shown_is_shown_down_to_the_users_first_line():
    frames = [(f"{SITE_PACKAGES}/framework/loop.py", 100 + i, f"step{i}") for i in range(12)]
    deep = ("numpy", "draw", "numpy.random.rand", 1, [*frames, ("/p/fit.py", 21, "<module>")], None)
    report = render_diff(compare(trace(rand()), trace(deep, rand())))
    rows = report.split("only in B\n", 1)[1].splitlines()
    assert [row.strip() for row in rows[:13]] == [
        *(f"framework/loop.py:{100 + i} in step{i}" for i in range(12)),
        "/p/fit.py:21 in <module>",
    ]
    assert "more frame" not in report


def test_a_seed_to_another_value_differs():
    result = compare(trace(seed(666), rand()), trace(seed(667), rand()))
    assert result.first.kind == VALUES
    assert "the numpy seed at /p/story.py:8 in <module> differs: A seeded 666, B 667" in render_diff(result)


def test_a_draw_from_another_line_is_a_replacement():
    result = compare(trace(rand("/p/s.py:5")), trace(rand("/p/s.py:6")))
    assert result.first.kind == REPLACED
    assert (
        "A has 1 numpy draw at /p/s.py:5 in <module> where B has 1 numpy draw at /p/s.py:6 in <module>, "
        "at the end of the numpy stream"
    ) in render_diff(result)


def test_streams_are_aligned_separately_so_their_interleaving_does_not_matter():
    coin = ("random", "draw", "random.random", 1, "/p/s.py:3", None)
    assert compare(trace(rand(), coin), trace(coin, rand())).same


def test_the_first_divergence_is_the_earliest_across_streams():
    coin = ("random", "draw", "random.random", 1, "/p/s.py:3", None)
    a = trace(seed(1), rand(), coin, coin)
    b = trace(seed(1), JITTER, rand(), coin)
    result = compare(a, b)
    assert [d.stream for d in result.divergences] == ["numpy", "random"]
    assert "Then 1 more place where the runs part:\n  - A has 1 random draw at /p/s.py:3" in render_diff(result)


def test_runs_from_other_checkouts_and_virtualenvs_still_align():
    def run(root: str, venv: str) -> Trace:
        stack = [
            (f"{venv}/sklearn/model_selection/_split.py", 1951, "BaseShuffleSplit._iter_indices"),
            (f"{root}/train.py", 14, "<module>"),
        ]
        split = ("numpy", "draw", "numpy.random.permutation", 64, stack, None)
        return trace(seed(0, f"{root}/train.py:3"), split)

    laptop = run("/home/me/proj", SITE_PACKAGES)
    ci = run("/ci/build/proj", "/opt/env/lib/python3.11/site-packages")
    assert compare(laptop, ci).same


def test_the_call_sites_whose_counts_differ_are_tabulated():
    a = trace(seed(666), rand(), rand())
    b = trace(seed(666), JITTER, rand(count=4))
    result = compare(a, b)
    assert [(s.api, s.a_calls, s.b_calls, s.a_values, s.b_values) for s in result.sites] == [
        ("numpy.random.rand", 2, 1, 2, 4),
        ("numpy.random.uniform", 0, 1, 0, 1),
    ]
    table = render_diff(result).split("Call sites whose counts differ:\n")[1].splitlines()
    assert table[:3] == [
        "  calls A  calls B  values A  values B  stream  kind  api                   site",
        "        2        1         2         4  numpy   draw  numpy.random.rand     /p/story.py:10 in <module>",
        "        0        1         0         1  numpy   draw  numpy.random.uniform  /p/acc/devinit.py:10 in init",
    ]


def test_events_past_max_events_count_in_the_table_and_are_noted():
    more = ("numpy", "draw", "numpy.random.rand", [("/p/story.py", 10, "<module>")], 5, 5)
    result = compare(trace(rand()), trace(rand(), dropped=[more]))
    assert not result.divergences and not result.same
    assert [(s.a_calls, s.b_calls) for s in result.sites] == [(1, 6)]
    report = render_diff(result)
    assert report.startswith("rngtrace diff: A (1 event) and B (6 events) differ in how often they drew")
    assert "Note: B counted 5 events past max_events=100,000 without keeping them" in report


def test_the_report_names_where_a_and_b_came_from():
    report = render_diff(compare(trace(rand()), trace(rand(), rand())), names=("a.json", "b.json"))
    assert report.splitlines()[0] == "rngtrace diff: A = a.json (1 event) and B = b.json (2 events) differ in 1 place"


def test_colour_only_when_asked():
    result = compare(trace(seed(666), rand()), trace(seed(666), JITTER, rand()))
    assert "\x1b[" in render_diff(result, color=True)
    assert "\x1b[" not in render_diff(result)


def test_the_diff_reads_the_same_under_any_hash_seed(tmp_path):
    # Call sites whose counts differ by as much are listed in full order, line by line: the sites
    # came from a set, whose order follows PYTHONHASHSEED, and a tool for finding what changed
    # between runs must not change between runs itself.
    def one(n: int) -> dict:
        return draw("numpy.random.rand", 1, ("/p/sites.py", n, "<module>"))

    a = build(*[one(n) for n in range(1, 12)])
    b = build(*[one(n) for n in range(1, 12) for _ in range(2)])
    a.save(tmp_path / "a.json")
    b.save(tmp_path / "b.json")
    outputs = set()
    for hash_seed in ("1", "2", "3", "4"):
        done = subprocess.run(
            [sys.executable, "-m", "rngtrace", "diff", "a.json", "b.json"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": hash_seed},
            timeout=60,
        )
        assert done.returncode == 1
        outputs.add(done.stdout)
    assert len(outputs) == 1
