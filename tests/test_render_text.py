"""The text draw log, specified on traces built from literal dicts (and two real ones)."""

from __future__ import annotations

import os
import re
import sysconfig

import pytest
from literal_traces import build, draw, events_block, moved, seed

from rngtrace import Trace, rng_trace
from rngtrace.render import render as render_as
from rngtrace.render.text import render

ANSI = re.compile(r"\x1b\[[0-9;]*m")
SITE = sysconfig.get_paths()["purelib"]
STDLIB = sysconfig.get_paths()["stdlib"]
SKLEARN = os.path.join(SITE, "sklearn", "utils", "_indexing.py")
OTHER_LIBRARY = os.path.join(SITE, "otherlib", "core.py")  # a package with no seeding argument rngtrace knows
TORCH_LINEAR = "/opt/conda/lib/python3.11/site-packages/torch/nn/modules/linear.py"
RANDOM_PY = os.path.join(STDLIB, "random.py")


def section(log: str, title: str) -> str:
    """The paragraph of the log that starts with ``title``."""
    return next(p for p in log.split("\n\n") if p.startswith(title))


def row(log: str, needle: str) -> str:
    return next(line for line in log.splitlines() if needle in line)


# -- the header ----------------------------------------------------------------------


def test_header_counts_each_stream_and_kind(here):
    story = (here("story.py"), 7, "<module>")
    log = render(
        build(
            seed("numpy.random.seed", "666", story),
            draw("numpy.random.rand", 1, story),
            draw("random.random", 1, story),
            draw("numpy.random.rand", 2, story),
            moved("numpy", "moved", story),
        )
    )
    assert log.splitlines()[0] == "rngtrace: 5 events — random: 1 draw · numpy: 1 seed, 2 draws, 1 unattributed"


def test_header_counts_include_dropped_events(here):
    story = (here("story.py"), 3, "<module>")
    trace = build(
        draw("random.random", 1, story), overflow=((draw("random.random", 1, story), 999, 999),), max_events=1
    )
    assert render(trace).splitlines()[0] == "rngtrace: 1,000 events — random: 1,000 draws"


def test_empty_trace_says_nothing_was_drawn():
    assert render(build()) == "rngtrace: no draws or reseeds of global random streams (watched: numpy, random, torch)"


def test_notes_are_printed_even_for_an_empty_trace():
    log = render(build(notes=("another profiler is active; prebound references are not seen",)))
    assert log.splitlines()[-1] == "Note: another profiler is active; prebound references are not seen"


# -- the events ----------------------------------------------------------------------


def test_events_are_listed_in_order_with_index_stream_kind_api_and_caller(here):
    story = (here("story.py"), 7, "<module>")
    log = render(
        build(seed("numpy.random.seed", "666", story), draw("random.shuffle", 3, (here("story.py"), 8, "<module>")))
    )
    lines = log.splitlines()
    assert lines[1].split() == ["#", "stream", "kind", "api", "called", "at"]
    assert lines[2].split() == ["0", "numpy", "seed", "numpy.random.seed(666)", "story.py:7", "in", "<module>"]
    assert lines[3].split() == ["1", "random", "draw", "random.shuffle", "×3", "story.py:8", "in", "<module>"]


def test_columns_are_aligned_across_rows(here):
    log = render(
        build(
            draw("numpy.random.rand", 3, (here("a.py"), 1, "f")),
            draw("random.random", 1, (here("deeper", "module_b.py"), 120, "g")),
            draw("numpy.random.randint", 12345, (SKLEARN, 5, "resample"), (here("a.py"), 9, "main")),
        )
    )
    lines = events_block(log).splitlines()[1:]
    for title in ("stream", "api", "called at", "your code"):
        start = lines[0].index(title)
        filled = [line for line in lines[1:] if len(line) > start]
        assert filled and all(line[start - 2 : start] == "  " and line[start] != " " for line in filled), title


def test_user_code_column_names_first_frame_past_libraries_and_stdlib(here):
    stack = (
        (SKLEARN, 574, "resample"),
        (RANDOM_PY, 362, "shuffle"),
        (TORCH_LINEAR, 40, "forward"),
        (here("train.py"), 12, "main"),
        (here("run.py"), 3, "<module>"),
    )
    line = row(render(build(draw("numpy.random.shuffle", 3, *stack))), "numpy.random.shuffle ×3")
    assert line.split()[-3:] == ["train.py:12", "in", "main"]


def test_user_code_column_is_dropped_when_every_caller_is_user_code(here):
    log = render(build(draw("numpy.random.rand", 1, (here("story.py"), 4, "<module>"))))
    assert "your code" not in log.split("\n\n")[0]


def test_user_code_column_shows_dash_when_no_user_frame_was_recorded(here):
    log = render(build(draw("numpy.random.rand", 1, (SKLEARN, 9, "resample"), (RANDOM_PY, 1, "f"))))
    assert row(log, "numpy.random.rand ×1").endswith("sklearn/utils/_indexing.py:9 in resample  —")


def test_seed_shows_its_value_and_a_seed_without_argument_shows_empty_call(here):
    story = (here("s.py"), 1, "<module>")
    log = render(build(seed("numpy.random.seed", "666", story), seed("random.seed", None, story)))
    assert "numpy.random.seed(666)" in log
    assert "random.seed()" in log


def test_count_none_shows_the_api_alone(here):
    log = render(build(draw("numpy.random.rand", None, (here("s.py"), 1, "<module>"))))
    assert row(log, "numpy.random.rand").split()[:4] == ["0", "numpy", "draw", "numpy.random.rand"]
    assert "None" not in log and "×" not in log


def test_unattributed_event_is_marked_with_its_window_and_explained_once(here):
    story = (here("s.py"), 4, "<module>")
    log = render(
        build(
            draw("numpy.random.rand", 1, story),
            moved("numpy", "moved after the last recorded event; noticed when the block ended", story),
            moved("random", "moved during the block", story),
        )
    )
    assert row(log, "numpy state").lstrip().startswith("!  1  numpy   unattributed")
    assert row(log, "numpy state").split()[-3:] == ["numpy", "state", "—"]  # no line of its own
    note = row(log, "moved between #0")
    assert note.strip() == "moved between #0 s.py:4 and the end of the block at s.py:4"
    assert note.index("moved") == row(log, "numpy state").index("numpy")  # under the stream column
    assert row(log, "moved between the start").strip() == "moved between the start of the trace and the call at s.py:4"
    assert log.count("from numpy.random import rand") == 1


def test_thread_column_appears_only_when_several_threads_drew(here):
    story = (here("s.py"), 1, "<module>")
    single = render(build(draw("random.random", 1, story), draw("random.random", 1, story)))
    several = render(build(draw("random.random", 1, story), draw("random.random", 1, story, thread=2)))
    assert "thread" not in single
    assert row(several, "1  random").split()[-1] == "loader-0"


# -- draws by call site --------------------------------------------------------------


def test_draws_are_grouped_by_call_site_with_calls_and_values(here):
    init = (here("acc", "devinit.py"), 4, "init")
    log = render(
        build(
            draw("numpy.random.rand", 1, init),
            draw("numpy.random.rand", 3, init),
            draw("random.random", 1, (here("story.py"), 9, "<module>")),
            seed("numpy.random.seed", "1", init),
        )
    )
    sites = section(log, "Draws by call site").splitlines()
    assert sites[0] == "Draws by call site (3 draws, most calls first):"
    assert sites[2].split() == ["2", "4", "numpy", "numpy.random.rand", "acc/devinit.py:4", "in", "init"]
    assert sites[3].split() == ["1", "1", "random", "random.random", "story.py:9", "in", "<module>"]
    assert len(sites) == 4  # the seed is not a draw


def test_grouping_includes_dropped_events(here):
    site = (here("loop.py"), 2, "step")
    trace = build(
        draw("numpy.random.rand", 2, site), overflow=((draw("numpy.random.rand", 2, site), 4_999, 9_998),), max_events=1
    )
    assert section(render(trace), "Draws by call site").splitlines()[2].split()[:2] == ["5,000", "10,000"]


def test_one_library_line_reached_from_two_user_lines_is_two_sites(here):
    lib = (SKLEARN, 574, "resample")
    log = render(
        build(
            draw("numpy.random.shuffle", 3, lib, (here("a.py"), 1, "f")),
            draw("numpy.random.shuffle", 3, lib, (here("a.py"), 1, "f")),
            draw("numpy.random.shuffle", 3, lib, (here("b.py"), 7, "g")),
        )
    )
    sites = section(log, "Draws by call site").splitlines()
    assert sites[2].split()[:2] == ["2", "6"] and sites[2].endswith("a.py:1 in f")
    assert sites[3].split()[:2] == ["1", "3"] and sites[3].endswith("b.py:7 in g")


def test_unknown_value_counts_show_a_dash(here):
    log = render(build(draw("numpy.random.rand", None, (here("s.py"), 1, "<module>"))))
    assert section(log, "Draws by call site").splitlines()[2].split()[:2] == ["1", "—"]


def test_many_call_sites_are_cut_with_a_count_of_the_rest(here):
    trace = build(*(draw("random.random", 1, (here("s.py"), n, "<module>")) for n in range(1, 31)))
    sites = section(render(trace, max_lines=100), "Draws by call site").splitlines()
    assert len(sites) == 2 + 20 + 1
    assert sites[-1].strip() == "… 10 more call sites (trace.statistics() has them all)"


# -- long logs -----------------------------------------------------------------------


def long_trace(here, n: int, odd_at: int | None = None) -> Trace:
    site = (here("loop.py"), 2, "step")
    events = [draw("numpy.random.rand", 1, site) for _ in range(n)]
    if odd_at is not None:
        events[odd_at] = moved("numpy", "moved", site)
    return build(*events)


def test_long_log_shows_first_and_last_events_and_says_how_many_are_hidden(here):
    events = section(render(long_trace(here, 100), max_lines=20), "rngtrace:").splitlines()
    indexes = [line.split()[0] for line in events[2:] if "numpy.random.rand" in line]
    assert indexes == [str(i) for i in range(17)] + ["97", "98", "99"]
    assert events[2 + 17].strip() == "… 80 more events not shown (trace.events has them all)"


def test_elision_counts_hidden_unattributed_events(here):
    log = render(long_trace(here, 100, odd_at=50), max_lines=20)
    assert "… 80 more events not shown, 1 unattributed among them" in log


def test_truncated_log_keeps_grouped_statistics_for_all_events(here):
    log = render(long_trace(here, 1000), max_lines=10)
    assert section(log, "Draws by call site").splitlines()[2].split()[:2] == ["1,000", "1,000"]


def test_dropped_events_are_reported_below_the_events(here):
    site = (here("loop.py"), 2, "step")
    trace = build(draw("random.random", 1, site), overflow=((draw("random.random", 1, site), 41, 41),), max_events=1)
    assert "41 more events beyond max_events=1 were counted but not kept" in render(trace)


# -- colour ----------------------------------------------------------------------------


def colourful(here) -> Trace:
    return build(
        draw("numpy.random.rand", 3, (SKLEARN, 1, "f"), (here("s.py"), 2, "<module>")),
        moved("numpy", "moved", (here("s.py"), 3, "<module>")),
    )


def test_no_ansi_codes_without_color(here):
    assert "\x1b" not in render(colourful(here), color=False)


def test_color_adds_ansi_codes_and_changes_nothing_else(here):
    coloured = render(colourful(here), color=True)
    assert "\x1b[1m" in coloured and "\x1b[33m" in coloured
    assert ANSI.sub("", coloured) == render(colourful(here), color=False)


def test_log_encodes_in_windows_codepage(here):
    render(colourful(here)).encode("cp1252")  # stderr redirected to a file on Windows


# -- hints -----------------------------------------------------------------------------


def test_hints_only_for_streams_that_were_drawn_from(here):
    story = (here("s.py"), 1, "<module>")
    hint = section(render(build(seed("numpy.random.seed", "1", story), draw("random.random", 1, story))), "Hint:")
    assert "random.Random(seed)" in hint
    assert "default_rng" not in hint


def test_no_hint_when_nothing_was_drawn(here):
    assert "Hint" not in render(build(seed("numpy.random.seed", "1", (here("s.py"), 1, "<module>"))))


def test_numpy_hint_names_the_generator_method_for_each_legacy_call(here):
    story = (here("s.py"), 1, "<module>")
    hint = section(render(build(draw("numpy.random.rand", 1, story), draw("numpy.random.randint", 1, story))), "Hint:")
    assert (
        "rng = np.random.default_rng(seed); rng.random for numpy.random.rand, "
        "rng.integers for numpy.random.randint" in hint
    )


def test_cuda_streams_are_hinted_as_torch(here):
    story = (here("s.py"), 1, "<module>")
    hint = section(render(build(draw("torch.randn", 4, story, stream="torch.cuda:0"))), "Hint:")
    assert "  torch  g = torch.Generator(device='cuda').manual_seed(seed)\n" in hint
    assert "         pass generator=g to torch.randn\n" in hint + "\n"
    assert "torch.cuda:0" not in hint


def test_cpu_and_cuda_draws_share_one_torch_hint(here):
    story = (here("s.py"), 1, "<module>")
    trace = build(draw("torch.randn", 4, story, stream="torch.cuda:0"), draw("torch.rand", 1, story))
    torch_lines = [line for line in section(render(trace), "Hint:").splitlines() if "torch." in line]
    assert torch_lines == [
        "  torch  g = torch.Generator().manual_seed(seed) (device='cuda' for CUDA draws)",
        "         pass generator=g to torch.randn, torch.rand",
    ]


def test_torch_hint_sends_dataloader_draws_to_its_generator_and_dropout_to_manual_seed(here):
    story = (here("s.py"), 1, "<module>")
    loader = ("/venv/lib/python3.11/site-packages/torch/utils/data/dataloader.py", 692, "__init__")
    dropout = ("/venv/lib/python3.11/site-packages/torch/nn/modules/dropout.py", 73, "forward")
    trace = build(
        draw("torch.Tensor.random_", 1, loader, story),
        draw("torch.nn.functional.dropout", 8, dropout, story),
    )
    hint = section(render(trace), "Hint:")
    assert "DataLoader(..., generator=g)" in hint
    assert "torch.nn.functional.dropout takes no generator: call torch.manual_seed(seed)" in hint
    assert "pass generator=g" not in hint


def test_a_model_built_is_hinted_with_manual_seed_not_the_init_it_called_inside(here):
    linear = ("/venv/lib/python3.11/site-packages/torch/nn/modules/linear.py", 124, "Linear.reset_parameters")
    hint = section(
        render(build(draw("torch.nn.init.kaiming_uniform_", 128, linear, (here("s.py"), 3, "<module>")))), "Hint:"
    )
    assert "torch.manual_seed(seed) before building the model" in hint and "pass generator=g" not in hint


def test_a_library_draw_a_finding_named_is_not_hinted_again(here):
    # scikit-learn drew from the global stream: the global-generator finding gives the fix, the Hint does not repeat it.
    log = render(build(draw("numpy.random.permutation", 64, (SKLEARN, 5, "f"), (here("s.py"), 2, "m"))))
    assert "global-generator" in log and "Hint" not in log


def test_library_hint_appears_only_when_a_library_drew(here):
    mine = render(build(draw("random.random", 1, (here("s.py"), 1, "<module>"))))
    theirs = render(build(draw("random.random", 1, (OTHER_LIBRARY, 1, "f"), (here("s.py"), 1, "<module>"))))
    assert "rng_isolate" not in mine
    assert theirs.endswith(
        "Hint: where a library draws, give the call its own seed, or wrap it in `with rngtrace.rng_isolate():`."
    )


def test_a_torch_library_draw_is_hinted_with_fork_rng_not_rng_isolate(here):
    # Code that draws only from torch is isolated with torch's own block: the fixed program needs no rngtrace.
    log = render(build(draw("torch.rand", 4, (OTHER_LIBRARY, 1, "f"), (here("s.py"), 1, "<module>"))))
    assert section(log, "Hint:").splitlines()[-1] == (
        "  Where a library draws: give the call its own seed (generator=g for torch), "
        "or wrap it in `with torch.random.fork_rng():`."
    )
    assert "rng_isolate" not in log


def test_several_streams_drawn_by_a_library_name_each_ones_block_rng_isolate_last(here):
    story = (here("s.py"), 1, "<module>")
    log = render(
        build(
            draw("torch.rand", 4, (OTHER_LIBRARY, 1, "f"), story),
            draw("random.random", 1, (OTHER_LIBRARY, 2, "g"), story),
        )
    )
    assert section(log, "Hint:").splitlines()[-1] == (
        "  Where a library draws: give the call its own seed (generator=g for torch), or wrap it in "
        "`with torch.random.fork_rng():` for torch or `with rngtrace.rng_isolate():` for random."
    )


# -- end to end --------------------------------------------------------------------------


def test_real_trace_renders_seed_and_draw_at_this_file():
    np = pytest.importorskip("numpy")
    with rng_trace(print=False) as trace:
        np.random.seed(1)
        np.random.rand(3)
    log = render(trace)
    assert row(log, "numpy.random.seed(1)").split()[:4] == ["0", "numpy", "seed", "numpy.random.seed(1)"]
    assert "test_render_text.py:" in row(log, "numpy.random.rand ×3")
    assert log == render_as(trace, "text")


def test_real_library_draw_names_this_test_as_your_code():
    pytest.importorskip("sklearn")
    from sklearn.utils import shuffle

    with rng_trace(print=False, streams="numpy") as trace:
        shuffle([1, 2, 3], random_state=None)
    line = next(line for line in events_block(render(trace)).splitlines() if "sklearn/" in line)
    assert "test_render_text.py:" in line.split("sklearn/")[1]
