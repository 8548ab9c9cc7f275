"""A package adds a global stream to rngtrace with no file of rngtrace changed (issue 23).

``tests/toy_stream_pkg`` is a small installable library, ``toystream``: a module-level
generator of its own behind ``draw()``, ``seed()`` and ``setstate()``, which declares two
streams through the ``rngtrace.sources`` entry-point group: ``toy``, with every piece of
advice a stream can declare, and ``bare``, with only its name, module and source. It is
installed once, into a temporary ``site-packages`` folder (not the developer's venv), and
every check runs in a subprocess that has that folder on its path: the registry of streams
is read once per process, so the test process itself never sees the toy streams.

What the toy stream gets, as random, NumPy and torch do: events at the caller's line, seeds
with their value, its own findings with its own fix text, the text log, the HTML report, the
diff, a forked child's events and the pytest report; and a stream that declares no advice
gets none, never another library's.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
PACKAGE = Path(__file__).resolve().parent / "toy_stream_pkg"
#: a package whose entry points cannot be used: a module that does not exist, a stream named as
#: rngtrace's own, an object that is not a Stream
BROKEN = Path(__file__).resolve().parent / "toy_broken_pkg"

#: what a log that only the toy streams appear in must never say: another library's generator or advice
OTHERS = (
    "np.random",
    "numpy",
    "default_rng",
    "torch",
    "random.Random",
    "random.seed",
    "random_state",
    "scikit-learn",
    "scipy",
)

#: a library of the test's own (installed: it lives in a site-packages folder) that uses the toy streams
DEVLIB = """\
import toystream
import toystream.bare


def warm_up():
    return toystream.draw()  # @lib-draw


def setup():
    toystream.seed(1234)  # @lib-seed


def bare_warm_up():
    return toystream.bare.draw()  # @lib-bare
"""


# -- installing the package, running programs that use it ---------------------------------


def install(package: Path, target: Path) -> None:
    """Install the package laid out in ``package`` into ``target``, as pip installs a wheel.

    The package, and a ``.dist-info`` with its metadata and its entry points, read from its
    pyproject.toml. Laid out here rather than built, so the test needs no network, no build
    backend and no ``wheel`` (3.10's venv has none).
    """
    project = (package / "pyproject.toml").read_text(encoding="utf-8")
    name = re.search(r'^name = "(.+)"$', project, re.M).group(1)  # type: ignore[union-attr]
    shutil.copytree(package / name, target / name, ignore=shutil.ignore_patterns("__pycache__"))
    group = project.split('[project.entry-points."rngtrace.sources"]', 1)[1].split("\n[", 1)[0]
    points = [line.strip() for line in group.splitlines() if "=" in line]
    info = target / f"{name}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(
        "[rngtrace.sources]\n" + "".join(f"{p.replace(chr(34), '')}\n" for p in points), encoding="utf-8"
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """toystream installed into a fresh ``site-packages`` folder, with ``devlib.py`` beside it."""
    target = tmp_path_factory.mktemp("toy") / "site-packages"
    install(PACKAGE, target)
    (target / "devlib.py").write_text(DEVLIB, encoding="utf-8")
    return target


def environment(site: Path) -> dict[str, str]:
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), str(site), env.get("PYTHONPATH")]))
    return env


def python(site: Path, *args: object, cwd: Path) -> subprocess.CompletedProcess:
    """Run ``python ARGS`` in ``cwd`` with toystream and devlib importable."""
    return subprocess.run(
        [sys.executable, *map(str, args)],
        cwd=cwd,
        env=environment(site),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=False,
    )


def rngtrace(site: Path, *args: object, cwd: Path) -> subprocess.CompletedProcess:
    """``python -m rngtrace ARGS`` in ``cwd``, the toy streams installed."""
    return python(site, "-m", "rngtrace", *args, cwd=cwd)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def line(path: Path, marker: str) -> int:
    """The number of the line of ``path`` that carries the comment ``# marker``."""
    (number,) = [
        i
        for i, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if text.rstrip().endswith(f"# {marker}")
    ]
    return number


def flat(text: str) -> str:
    """``text`` with every run of whitespace one space: the log wraps long findings."""
    return " ".join(text.split())


def page_text(page: str) -> str:
    """What an HTML report shows as text: no script, no style, no markup."""
    return html.unescape(re.sub(r"<script.*?</script>|<style.*?</style>|<[^>]+>", " ", page, flags=re.S))


def no_other_library(text: str) -> list[str]:
    """What ``text`` names of another library's generator or advice (empty: nothing).

    The list of streams watched names every declared one (``watched: bare, numpy, ...``): no advice.
    """
    text = re.sub(r"watched: [^·\n)]*", "", text)
    return [word for word in OTHERS if word in text]


# The program a traced check runs: BODY inside one rng_trace block; then what the trace holds, as JSON.
TRACED = """\
import json
import os
import sys

import rngtrace
from rngtrace.render import render
import toystream
import toystream.bare
import devlib

EXTRA = {{}}
with rngtrace.rng_trace(print=False) as trace:
{body}
json.dump({{
    "pid": os.getpid(),
    "extra": EXTRA,
    "events": [[e.stream, e.kind, e.api, e.count, e.detail, e.pid,
                e.frame and [e.frame.filename, e.frame.lineno, e.frame.function]] for e in trace.events],
    "findings": [[f.kind, f.stream, list(f.pids), f.message, f.fix] for f in trace.findings],
    "text": render(trace),
    "html": render(trace, "html"),
}}, open(sys.argv[1], "w", encoding="utf-8"))
"""


def saved_findings(site: Path, log: Path) -> list[list]:
    """The findings of the saved log ``log``, read back where the toy streams are declared."""
    done = python(
        site,
        "-c",
        "import json, sys; from rngtrace import Trace; print(json.dumps("
        "[[f.kind, f.stream, list(f.pids), f.message, f.fix] for f in Trace.load(sys.argv[1]).findings]))",
        log,
        cwd=log.parent,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def traced(site: Path, folder: Path, body: str) -> tuple[dict, Path]:
    """Run ``body`` inside ``with rngtrace.rng_trace(print=False) as trace:`` in a program of its own."""
    script = write(folder / "prog.py", TRACED.format(body=textwrap.indent(textwrap.dedent(body), "    ")))
    done = python(site, script.name, "out.json", cwd=folder)
    assert done.returncode == 0, done.stderr
    return json.loads((folder / "out.json").read_text(encoding="utf-8")), script


# -- the declaration ----------------------------------------------------------------------


def test_the_packages_entry_points_add_its_streams_to_those_rngtrace_lists(site, tmp_path):
    write(
        tmp_path / "streams.py",
        """\
        import json
        from rngtrace.sources import PROBLEMS, declared, stream

        print(json.dumps([list(declared()), PROBLEMS, stream("toy").seed_call, stream("bare").seed_call]))
    """,
    )
    done = python(site, "streams.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    names, problems, toy_seed, bare_seed = json.loads(done.stdout)
    assert names[:3] == ["random", "numpy", "torch"] and {"toy", "bare"} <= set(names)
    assert (problems, toy_seed, bare_seed) == ([], "toystream.seed(0)", "")


def test_streams_takes_the_toy_stream_and_traces_only_it(site, tmp_path):
    write(tmp_path / "prog.py", "import random\nimport toystream\nrandom.random()\ntoystream.draw()\n")
    done = rngtrace(site, "run", "--streams", "toy", "prog.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("rngtrace: 1 event — toy: 1 draw — 1 cause found\n"), done.stderr


def test_a_subprocess_childs_toy_draws_are_traced_through_the_entry_points_its_parent_handed_it(site, tmp_path):
    write(tmp_path / "child.py", "import sys, toystream\ntoystream.draw()\nprint(sorted(sys.modules))\n")
    write(tmp_path / "prog.py", "import subprocess, sys\nsubprocess.run([sys.executable, 'child.py'], check=True)\n")
    done = rngtrace(site, "run", "--streams", "toy", "--json", "log.json", "prog.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    data = json.loads((tmp_path / "log.json").read_text(encoding="utf-8"))
    assert [(e[0], e[2]) for e in data["events"] if e[5] != data["pid"]] == [("toy", "toystream.draw")]
    assert "'importlib.metadata'" not in done.stdout  # the child did not scan the installed packages


# -- events --------------------------------------------------------------------------------


def test_a_toy_draw_is_an_event_on_the_toy_stream_at_the_line_that_called_it(site, tmp_path):
    data, script = traced(
        site,
        tmp_path,
        """\
        toystream.draw()  # @draw
    """,
    )
    assert data["events"] == [
        ["toy", "draw", "toystream.draw", 1, None, data["pid"], [str(script), line(script, "@draw"), "<module>"]]
    ]
    assert data["findings"] == []


def test_a_toy_seed_is_an_event_with_its_value_as_its_detail(site, tmp_path):
    data, script = traced(
        site,
        tmp_path,
        """\
        toystream.seed(7)  # @seed
        toystream.draw()
    """,
    )
    assert [e[:5] for e in data["events"]] == [
        ["toy", "seed", "toystream.seed", None, "7"],
        ["toy", "draw", "toystream.draw", 1, None],
    ]
    assert data["events"][0][6] == [str(script), line(script, "@seed"), "<module>"]
    assert "toystream.seed(7)  prog.py:" in data["text"]


def test_a_toy_seed_given_no_value_is_seeded_from_os_entropy_with_the_toys_seed_call_as_the_fix(site, tmp_path):
    data, script = traced(
        site,
        tmp_path,
        """\
        toystream.seed()  # @seed
        toystream.draw()
    """,
    )
    ((kind, stream, _pids, message, fix),) = data["findings"]
    assert (kind, stream) == ("unseeded", "toy") and "from OS entropy" in message
    assert fix == f"give it a value: toystream.seed(0) at prog.py:{line(script, '@seed')}"


def test_a_toy_library_call_that_draws_through_its_own_functions_is_one_event(site, tmp_path):
    # toystream.draws(3) calls toystream.draw() three times: its library's own calls are part of it,
    # as random.py's randint calling getrandbits is one random.randint event.
    data, script = traced(
        site,
        tmp_path,
        """\
        toystream.seed(0)
        toystream.draws(3)  # @draws
    """,
    )
    assert [e[:4] for e in data["events"]] == [
        ["toy", "seed", "toystream.seed", None],
        ["toy", "draw", "toystream.draws", 3],
    ]
    assert data["events"][1][6] == [str(script), line(script, "@draws"), "<module>"]
    assert data["findings"] == []


def test_a_toy_restore_is_recorded_only_where_it_changes_the_state(site, tmp_path):
    data, _ = traced(
        site,
        tmp_path,
        """\
        state = toystream.getstate()
        toystream.setstate(state)  # the state it holds: moves nothing
        toystream.draw()
        toystream.setstate(state)  # puts back the state before the draw
    """,
    )
    assert [e[:3] for e in data["events"]] == [["toy", "draw", "toystream.draw"], ["toy", "seed", "toystream.setstate"]]


# -- findings, each with the toy's own fix ---------------------------------------------------


@pytest.fixture(scope="module")
def interleaved(site, tmp_path_factory) -> tuple[dict, Path]:
    """The story with the toy stream: the user seeds it, a library draws from it, the user draws."""
    return traced(
        site,
        tmp_path_factory.mktemp("interleaved"),
        """\
        toystream.seed(0)  # @seed
        devlib.warm_up()  # @call
        x = toystream.draw()  # @draw
    """,
    )


def test_a_library_drawing_between_the_users_toy_seed_and_draw_is_interleaved_with_the_toys_fix(site, interleaved):
    data, script = interleaved
    ((kind, stream, pids, message, fix),) = data["findings"]
    assert (kind, stream, pids) == ("interleaved", "toy", [data["pid"]])
    # An installed package's draw is named by the call the user made into it, as train_test_split's is.
    assert message == (
        f"1 toy draw inside warm_up (prog.py:{line(script, '@call')}) comes between your seed at "
        f"prog.py:{line(script, '@seed')} and your draw at prog.py:{line(script, '@draw')}: "
        "your numbers depend on it"
    )
    assert fix == (
        f"draw your own at prog.py:{line(script, '@draw')}: gen = toystream.Generator(0); gen.draw(...), "
        f"or wrap warm_up() at prog.py:{line(script, '@call')} in `with rngtrace.rng_isolate():`"
    )


def test_a_library_seeding_the_toy_stream_after_the_user_is_reseeded_with_the_toys_words(site, tmp_path):
    data, script = traced(
        site,
        tmp_path,
        """\
        toystream.seed(0)  # @seed
        devlib.setup()  # @call
        toystream.draw()
    """,
    )
    ((kind, stream, _pids, message, fix),) = data["findings"]
    assert (kind, stream) == ("reseeded", "toy")
    call = line(script, "@call")
    assert message == (
        f"toystream.seed(1234) inside devlib.py:{line(site / 'devlib.py', '@lib-seed')} (setup, "
        f"called at prog.py:{call}) reseeds toy after your seed at prog.py:{line(script, '@seed')}: "
        "your seed no longer governs the draws after it"
    )
    assert (
        fix
        == f"move your seed below prog.py:{call}, or wrap setup() at prog.py:{call} in `with rngtrace.rng_isolate():`"
    )
    assert not no_other_library(fix)


def test_rngtrace_run_reports_a_toy_draw_before_any_seed_as_unseeded_with_the_toys_fix(site, tmp_path):
    write(tmp_path / "prog.py", "import toystream\n\nx = toystream.draw()\n")
    done = rngtrace(site, "run", "--json", "log.json", "prog.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (
        "! unseeded: toy is drawn from at prog.py:3 before it is ever seeded, so every run draws differently"
        in flat(done.stderr)
    )
    ((kind, stream, _pids, message, fix),) = saved_findings(site, tmp_path / "log.json")
    assert (kind, stream) == ("unseeded", "toy") and "before it is ever seeded" in message
    assert (
        fix == "toystream.seed(0) at the program's start, or gen = toystream.Generator(0); gen.draw(...) at prog.py:3"
    )
    assert no_other_library(done.stderr) == []


# -- the text log, the HTML report and the diff -------------------------------------------


def test_the_text_log_counts_lists_and_hints_the_toy_stream(site, tmp_path):
    write(tmp_path / "prog.py", "import toystream\n\ntoystream.seed(3)\nx = toystream.draw()\n")
    done = rngtrace(site, "run", "prog.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    log = done.stderr
    assert log.startswith("rngtrace: 2 events — toy: 1 seed, 1 draw\n"), log
    assert "toystream.seed(3)  prog.py:3 in <module>" in log
    assert "toystream.draw ×1  prog.py:4 in <module>" in log
    assert "  toy  gen = toystream.Generator(seed); gen.draw for toystream.draw" in log
    assert not no_other_library(log)


def test_a_log_the_toy_stream_alone_appears_in_names_no_other_librarys_generator_or_advice(interleaved):
    data, _ = interleaved
    said = {
        "text log": data["text"],
        "html report": page_text(data["html"]),
        "fixes": " ".join(f[4] for f in data["findings"]),
    }
    assert {where: no_other_library(text) for where, text in said.items()} == {where: [] for where in said}


def _chips(page: str) -> list[str]:
    return [html.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r'<div class="chip">(.*?)</div>', page)]


def _page_data(page: str) -> dict:
    match = re.search(r'<script type="application/json" id="rngtrace-data">(.*?)</script>', page, re.S)
    assert match, "no event data in the page"
    return json.loads(match.group(1))


def test_the_html_report_gives_the_toy_stream_its_lane_chip_colours_and_fix(site, interleaved):
    data, _ = interleaved
    page = data["html"]
    assert _chips(page) == ["toy 1 seed · 2 draws"]
    shown = _page_data(page)
    assert "toy" in shown["lanes"]
    origins = [shown["packages"][shown["sites"][s][4]][0] for s in shown["site"]]
    assert origins == ["your code", "devlib", "your code"]  # the seed, the library's draw, the user's
    assert "gen = toystream.Generator(0); gen.draw(...)" in html.unescape(page)


def test_rngtrace_show_html_of_a_saved_toy_log_is_the_report_of_the_run(site, tmp_path):
    write(tmp_path / "prog.py", "import toystream\n\ntoystream.seed(3)\nx = toystream.draw()\n")
    done = rngtrace(site, "run", "--quiet", "--json", "log.json", "--html", "run.html", "prog.py", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    shown = rngtrace(site, "show", "log.json", "--html", "again.html", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    for name in ("run.html", "again.html"):
        page = (tmp_path / name).read_text(encoding="utf-8")
        assert _chips(page) == ["toy 1 seed · 1 draw"], name
        assert "toystream.draw" in page and "toystream.seed" in page


STORY_A = """\
import toystream
import devlib

toystream.seed(666)
pass  # this run initialises no device
x = toystream.draw()  # @draw
print(f"x = {x:.6f}")
"""
STORY_B = STORY_A.replace("pass  # this run initialises no device", "devlib.warm_up()")


def test_rngtrace_diff_of_two_runs_that_differ_in_a_toy_draw_names_the_toy_stream(site, tmp_path):
    for run, story in (("a", STORY_A), ("b", STORY_B)):
        write(tmp_path / run / "prog.py", story)
        done = rngtrace(site, "run", "--quiet", "--json", f"../{run}.json", "prog.py", cwd=tmp_path / run)
        assert done.returncode == 0, done.stderr
    done = rngtrace(site, "diff", "a.json", "b.json", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    b = tmp_path / "b" / "prog.py"
    # The user's line that called into the installed package, then the package's own frame in the table.
    assert (
        f"First divergence: B has 1 extra toy draw at b/prog.py:{line(b, '@draw') - 1} in <module> "
        f"(in devlib.py:{line(site / 'devlib.py', '@lib-draw')} in warm_up), "
        f"before the draw both runs make at b/prog.py:{line(b, '@draw')} in <module>"
    ) in flat(done.stdout)
    assert f"devlib.py:{line(site / 'devlib.py', '@lib-draw')} in warm_up" in done.stdout
    assert "toystream.draw" in done.stdout and no_other_library(done.stdout) == []


def test_rngtrace_diff_of_two_unseeded_toy_runs_says_the_toy_stream_started_apart(site, tmp_path):
    write(tmp_path / "prog.py", "import toystream\n\nprint(toystream.draw())\n")
    for run in ("a", "b"):
        done = rngtrace(site, "run", "--quiet", "--json", f"{run}.json", "prog.py", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    done = rngtrace(site, "diff", "a.json", "b.json", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "toy started from a different state in A and B (never seeded in either run)" in done.stdout


def test_on_draw_raise_stops_a_toy_draw_and_names_the_toys_own_generator(site, tmp_path):
    write(tmp_path / "prog.py", "import toystream\n\ntoystream.draw()\n")
    done = rngtrace(site, "run", "--on-draw", "raise", "prog.py", cwd=tmp_path)
    assert done.returncode == 1
    traceback = done.stderr.split("rngtrace: no draws")[0].splitlines()  # raised before it drew: no event
    assert traceback[-1] == (
        f"rngtrace._errors.GlobalRNGError: toystream.draw draws from the global toy stream at {tmp_path / 'prog.py'}:3 "
        "in <module>; use an explicit generator (toystream.Generator(seed))"
    )


def test_rng_isolate_puts_the_toy_stream_back(site, tmp_path):
    write(
        tmp_path / "prog.py",
        """\
        import rngtrace
        import toystream

        toystream.seed(0)
        before = toystream.getstate()
        with rngtrace.rng_isolate():
            toystream.draw()
        with rngtrace.rng_isolate(streams="toy"):
            toystream.draws(5)
        print(toystream.getstate() == before)
    """,
    )
    done = python(site, "prog.py", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (0, "True\n"), done.stderr


# -- child processes -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def forked(site, tmp_path_factory) -> tuple[dict, Path]:
    """A forked child and its parent each draw twice from the toy stream they share."""
    if not hasattr(os, "fork"):
        pytest.skip("needs os.fork")
    return traced(
        site,
        tmp_path_factory.mktemp("forked"),
        """\
        toystream.seed(0)
        pid = os.fork()
        if pid == 0:
            toystream.draw()  # @child
            toystream.draw()
            os._exit(0)
        os.waitpid(pid, 0)
        toystream.draw()  # @parent
        toystream.draw()
        EXTRA["child"] = pid
    """,
    )


def test_a_forked_childs_toy_draws_reach_the_trace_with_the_childs_pid(forked):
    data, script = forked
    child = data["extra"]["child"]
    drawn = [(e[5], e[6][1]) for e in data["events"] if e[1] == "draw"]
    assert sorted(drawn) == sorted(
        [
            (child, line(script, "@child")),
            (child, line(script, "@child") + 1),
            (data["pid"], line(script, "@parent")),
            (data["pid"], line(script, "@parent") + 1),
        ]
    )


def test_a_child_that_draws_what_its_parent_draws_from_the_toy_stream_is_a_duplicate_with_the_toys_fix(forked):
    data, _ = forked
    duplicates = [f for f in data["findings"] if f[0] == "duplicate"]
    ((_kind, stream, pids, message, fix),) = duplicates
    assert stream == "toy" and set(pids) == {data["pid"], data["extra"]["child"]}
    assert "drew from the toy stream starting from the same state" in message
    assert fix == "seed each process with toystream.seed(base + worker_id)"


# -- the pytest report ---------------------------------------------------------------------

SUITE = """\
import toystream


def test_draws():
    toystream.draw()  # @test-draw


def test_restores():
    state = toystream.getstate()
    toystream.draw()
    toystream.setstate(state)


def test_clean():
    assert toystream.Generator(0).draw() < 1
"""


def _pytest(site: Path, folder: Path, *args: str) -> subprocess.CompletedProcess:
    write(folder / "test_toy.py", SUITE)
    return python(
        site, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider", "-q", *args, "test_toy.py", cwd=folder
    )


def _entries(output: str) -> dict[str, str]:
    """The report's entries: first line (test id) -> the entry's whole text."""
    section = output.split("rngtrace: global random streams", 1)[1]
    blocks = re.split(r"\n\s*\n", section.split("\n", 2)[2].strip("\n"))
    return {
        block.split("\n", 1)[0].split("  [", 1)[0]: block
        for block in blocks
        if block.strip() and not block.startswith(" ") and not re.match(r"=+ ", block)
    }


def test_the_pytest_report_names_the_toy_stream_the_tests_line_and_its_leak(site, tmp_path):
    done = _pytest(site, tmp_path, "--rng-trace")
    assert done.returncode == 0, done.stdout + done.stderr
    found = _entries(done.stdout)
    assert set(found) == {"test_toy.py::test_draws", "test_toy.py::test_restores"}, done.stdout
    entry = found["test_toy.py::test_draws"]
    assert "toy  1 draw in call" in entry
    assert f"test_toy.py:{line(tmp_path / 'test_toy.py', '@test-draw')} in test_draws  toystream.draw ×1" in entry
    assert "LEAKS toy" in entry
    assert "LEAKS" not in found["test_toy.py::test_restores"]  # put back with setstate


def test_strict_mode_tells_a_test_drawing_from_the_toy_stream_to_use_the_toys_generator(site, tmp_path):
    done = _pytest(site, tmp_path, "--rng-trace-mode=strict")
    assert done.returncode == 1, done.stdout + done.stderr
    failure = done.stdout.split("test_draws", 1)[1].split("short test summary", 1)[0]
    assert "rngtrace strict mode: this test drew from or reseeded a global random stream" in failure
    assert "toystream.Generator(seed)" in failure
    assert no_other_library(failure) == []


# -- a stream that declares no advice --------------------------------------------------------


def test_a_stream_that_declares_no_advice_gets_none_never_another_librarys(site, tmp_path):
    data, script = traced(
        site,
        tmp_path,
        """\
        toystream.bare.seed(0)
        devlib.bare_warm_up()  # @call
        toystream.bare.draw()
    """,
    )
    ((kind, stream, _pids, _message, fix),) = data["findings"]
    assert (kind, stream) == ("interleaved", "bare")
    assert fix == f"wrap bare_warm_up() at prog.py:{line(script, '@call')} in `with rngtrace.rng_isolate():`"
    said = {"text log": data["text"], "html report": page_text(data["html"])}
    assert {where: no_other_library(text) for where, text in said.items()} == {where: [] for where in said}
    assert "generator you own" not in data["text"]  # nothing to hint: it declared no generator of one's own


def test_a_stream_not_declared_to_start_from_entropy_is_not_unseeded_when_drawn_first(site, tmp_path):
    write(tmp_path / "prog.py", "import toystream.bare\n\ntoystream.bare.draw()\n")
    done = rngtrace(site, "run", "prog.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("rngtrace: 1 event — bare: 1 draw\n") and "Findings" not in done.stderr


# -- entry points that cannot be used ------------------------------------------------------

#: what rngtrace says of each of toybroken's entry points, one line each
PROBLEMS = [
    "entry point 'gone' of package toybroken failed to load: ModuleNotFoundError: No module named "
    "'toybroken.missing'; fix or uninstall it",
    "entry point 'stray' of package toybroken (toybroken.streams:NOT_A_STREAM) gives a str, not an rngtrace "
    "Stream; fix or uninstall it",
    "entry point 'shadow' of package toybroken declares a stream named 'random', as rngtrace's own does; it was "
    "skipped: rename its stream or uninstall it",
]


@pytest.fixture(scope="module")
def broken_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """toystream and toybroken installed side by side."""
    target = tmp_path_factory.mktemp("broken") / "site-packages"
    install(PACKAGE, target)
    install(BROKEN, target)
    return target


def test_entry_points_that_cannot_be_used_are_skipped_each_kept_in_one_line(broken_site, tmp_path):
    write(
        tmp_path / "streams.py",
        """\
        import json
        from rngtrace.sources import declared, problems

        print(json.dumps([list(declared()), declared()["random"].module, problems()]))
    """,
    )
    done = python(broken_site, "streams.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    names, random_module, problems = json.loads(done.stdout)
    assert names == ["random", "numpy", "torch", "bare", "toy"]  # toystream's still come
    assert random_module == "random"  # never toybroken's
    assert sorted(problems) == sorted(PROBLEMS)


def test_the_text_log_the_json_log_and_the_html_report_say_each_entry_point_problem(broken_site, tmp_path):
    write(tmp_path / "prog.py", "import toystream\n\ntoystream.seed(3)\nx = toystream.draw()\n")
    done = python(
        broken_site, "-m", "rngtrace", "run", "--json", "log.json", "--html", "run.html", "prog.py", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("rngtrace: 2 events — toy: 1 seed, 1 draw\n"), done.stderr  # the toy is traced
    said = [line for line in done.stderr.splitlines() if line.startswith("Note: entry point")]
    assert sorted(said) == sorted(f"Note: {problem}" for problem in PROBLEMS)
    saved = json.loads((tmp_path / "log.json").read_text(encoding="utf-8"))["notes"]
    assert sorted(note for note in saved if note.startswith("entry point")) == sorted(PROBLEMS)
    page = page_text((tmp_path / "run.html").read_text(encoding="utf-8"))
    assert all(problem in " ".join(page.split()) for problem in PROBLEMS)
    shown = python(broken_site, "-m", "rngtrace", "show", "log.json", cwd=tmp_path)
    assert all(f"Note: {problem}" in shown.stdout for problem in PROBLEMS), shown.stdout + shown.stderr


def test_a_block_with_no_events_still_says_them(broken_site, tmp_path):
    write(
        tmp_path / "prog.py",
        """\
        import rngtrace

        with rngtrace.rng_trace(print=False) as trace:
            pass
        print("\\n".join(trace.notes))
    """,
    )
    done = python(broken_site, "prog.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.splitlines()) == sorted(PROBLEMS)


def test_the_pytest_report_says_each_entry_point_problem_in_one_line(broken_site, tmp_path):
    done = _pytest(broken_site, tmp_path, "--rng-trace", "--rng-trace-json", "tests.json")
    assert done.returncode == 0, done.stdout + done.stderr
    section = done.stdout.split("rngtrace: global random streams", 1)[1]
    said = [line for line in section.splitlines() if line.startswith("Note: entry point")]
    assert sorted(said) == sorted(f"Note: {problem}" for problem in PROBLEMS)
    assert "toy  1 draw in call" in section  # the toy stream is traced beside them
    saved = json.loads((tmp_path / "tests.json").read_text(encoding="utf-8"))["notes"]
    assert sorted(saved) == sorted(PROBLEMS)
