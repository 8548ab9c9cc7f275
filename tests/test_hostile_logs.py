"""Saved logs are untrusted input: `show`, `show --html` and `diff` end in a render or one line and exit 2.

Each malformed log below once ended in a traceback (RecursionError, ValueError,
OverflowError, TypeError, UnicodeEncodeError); the fuzz test at the end mutates a
valid log a few thousand ways and feeds every mutation to all three commands.
"""

from __future__ import annotations

import copy
import json
import os
import random
import re
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rngtrace import LogError, Trace, cli

VALID: dict[str, Any] = {
    "format": "rngtrace",
    "version": 2,
    "pid": 14781,
    "streams": ["numpy", "random", "torch"],
    "depth": 16,
    "max_events": 100000,
    "dropped": 1,
    "notes": ["another profiler was active"],
    "stacks": [
        [["/home/me/proj/story.py", 6, "<module>"]],
        [["/home/me/proj/acc/devinit.py", 10, "init"], ["/home/me/proj/story.py", 7, "<module>"]],
        [["/home/me/proj/story.py", 8, "<module>"]],
    ],
    "threads": {"139947943926656": "MainThread", "7": "MainThread"},
    "events": [
        ["numpy", "seed", "numpy.random.seed", None, 0, 139947943926656, "666"],
        ["numpy", "draw", "numpy.random.uniform", 1, 1, 139947943926656, None],
        ["numpy", "unattributed", "numpy state", None, 2, 139947943926656, "moved; noticed before this call"],
        ["numpy", "draw", "numpy.random.rand", 1, 2, 139947943926656, None],
        ["numpy", "draw", "numpy.random.rand", 1, 2, 7, None],
    ],
    "overflow": [["random", "draw", "random.random", 0, 1, 1]],
    # version 2: a forked child's event, its process and where both drew from
    "ppid": 14780,
    "processes": [[14790, 14781, "fork", "DataLoader worker 0", "normal", 1]],
    "pids": {"7": 14790},
    "origins": [[14781, "numpy", "5be2", "fork", 3], [14790, "numpy", "5be2", "fork", 4]],
    # read by the findings: whether the trace saw the program start, torch's flags at its end
    "from_start": True,
    "settings": {"cudnn.benchmark": True, "cuda": False},
}

#: JSON text no json.dumps writes, put in place of a marker string after dumping
RAW = {
    "@deep": "[" * 100_000 + "]" * 100_000,
    "@digits": "1" * 5000,
    "@1e400": "1e400",
    "@surrogate": '"\\ud800 name"',
}


def dumps(data: Any) -> str:
    """``json.dumps(data)`` with each RAW marker string replaced by its raw JSON text."""
    text = json.dumps(data)
    for marker, raw in RAW.items():
        text = text.replace(json.dumps(marker), raw)
    return text


def changed(change: Callable[[dict], Any]) -> dict:
    data = copy.deepcopy(VALID)
    change(data)
    return data


def run(*argv: str, capsys: pytest.CaptureFixture) -> tuple[int, str, str]:
    """``rngtrace ARGV`` in this process: (status, stdout, stderr)."""
    status = cli.main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture
def commands(tmp_path: Path) -> Callable[[str], list[list[str]]]:
    """For a log's text: the show, show --html and diff command lines that read it."""
    valid = tmp_path / "valid.json"
    valid.write_text(json.dumps(VALID), encoding="utf-8")

    def lines(text: str) -> list[list[str]]:
        path = tmp_path / "log.json"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        return [
            ["show", str(path)],
            ["show", str(path), "--html", str(tmp_path / "out.html")],
            ["diff", str(valid), str(path)],
        ]

    return lines


# -- the malformed logs the issue found ------------------------------------------------

MALFORMED = {
    "deep nesting": (lambda d: d.__setitem__("notes", "@deep"), "notes: nested too deeply to read"),
    "an integer over 4,300 digits": (
        lambda d: d.__setitem__("pid", "@digits"),
        "pid: a number with more than 4300 digits",
    ),
    "line number 1e400": (
        lambda d: d["stacks"][0][0].__setitem__(1, "@1e400"),
        "stacks[0][0] line: expected a whole number >= 0, got inf",
    ),
    "threads as a list": (
        lambda d: d.__setitem__("threads", ["MainThread"]),
        "threads: expected an object of thread id -> name, got a list",
    ),
    "a number as filename": (
        lambda d: d["stacks"][1][0].__setitem__(0, 7),
        "stacks[1][0] filename: expected a string, got 7",
    ),
    "a number as api": (lambda d: d["events"][1].__setitem__(2, 7), "events[1] api: expected a string, got 7"),
    "a number as stream": (lambda d: d["events"][3].__setitem__(0, 7), "events[3] stream: expected a string, got 7"),
    "negative dropped": (lambda d: d.__setitem__("dropped", -1), "dropped: expected a whole number >= 0, got -1"),
    "string dropped": (lambda d: d.__setitem__("dropped", "1"), "dropped: expected a whole number >= 0, got '1'"),
    "count as {}": (
        lambda d: d["events"][1].__setitem__(3, {}),
        "events[1] count: expected a whole number >= 0 or null, got an object",
    ),
    "a number in notes": (lambda d: d["notes"].append(5), "notes[1]: expected a string, got 5"),
    "a number in streams": (lambda d: d["streams"].append(5), "streams[3]: expected a string, got 5"),
    "pid as markup": (
        lambda d: d.__setitem__("pid", "<img src=x onerror=alert(1)>"),
        "pid: expected a whole number >= 0, got '<img src=x onerror=alert(1)>'",
    ),
    "depth as markup": (
        lambda d: d.__setitem__("depth", "<b>16</b>"),
        "depth: expected a whole number >= 1, got '<b>16</b>'",
    ),
    "depth 0": (lambda d: d.__setitem__("depth", 0), "depth: expected a whole number >= 1, got 0"),
    "pid true": (lambda d: d.__setitem__("pid", True), "pid: expected a whole number >= 0, got true"),
    "an unknown kind": (
        lambda d: d["events"][0].__setitem__(1, "boom"),
        "events[0] kind: expected one of draw, seed, unattributed, entropy, restore, got 'boom'",
    ),
    "a stack out of range": (
        lambda d: d["events"][0].__setitem__(4, 3),
        "events[0] stack: expected -1 or an index into the 3 stacks, got 3",
    ),
    "a thread not listed": (
        lambda d: d["events"][0].__setitem__(5, 1),
        "events[0] thread: expected a thread id listed in threads, got 1",
    ),
    "a huge pid given as a number": (
        lambda d: d.__setitem__("pid", 2**70),
        "pid: expected a whole number >= 0, got a number of about 22 digits",
    ),
    "an overflow row cut short": (
        lambda d: d["overflow"][0].pop(),
        "overflow[0]: expected [stream, kind, api, stack, calls, values], got 5 values",
    ),
}


@pytest.mark.parametrize("case", list(MALFORMED))
@pytest.mark.parametrize("command", ["show", "show --html", "diff"])
def test_a_malformed_log_is_one_line_naming_the_first_bad_field_and_exit_2(case, command, commands, capsys):
    change, said = MALFORMED[case]
    argv = {"show": 0, "show --html": 1, "diff": 2}[command]
    status, out, err = run(*commands(dumps(changed(change)))[argv], capsys=capsys)
    assert (status, out) == (2, "")
    assert err.startswith("rngtrace: error: ") and err.count("\n") == 1 and err.endswith("; record it again\n")
    assert f"truncated or damaged rngtrace log ({said})" in err


#: faults only JSON text can hold: a parsed dict has the number or the nesting already
TEXT_ONLY = ("deep nesting", "an integer over 4,300 digits", "line number 1e400")


@pytest.mark.parametrize("case", [case for case in MALFORMED if case not in TEXT_ONLY])
def test_from_dict_raises_log_error_naming_the_same_field(case):
    change, said = MALFORMED[case]
    with pytest.raises(LogError, match=re.escape(f"truncated or damaged rngtrace log ({said}); record it again")):
        Trace.from_dict(changed(change))


def test_from_dict_refuses_an_int_too_long_to_print_without_printing_it():
    with pytest.raises(LogError, match=r"max_events: expected a whole number >= 0, got a number of about 5001 digits"):
        Trace.from_dict(changed(lambda d: d.__setitem__("max_events", 10**5000)))


def test_from_dict_refuses_a_deeply_nested_value_without_recursing():
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(LogError, match=r"stacks\[0\]\[0\] filename: expected a string, got a list"):
        Trace.from_dict(changed(lambda d: d["stacks"][0][0].__setitem__(0, deep)))


def test_a_lone_surrogate_in_a_name_is_shown_as_its_escape(commands, capsys):
    text = dumps(changed(lambda d: d["stacks"][2][0].__setitem__(2, "@surrogate")))
    show, html, diff = commands(text)
    status, out, err = run(*show, capsys=capsys)
    assert (status, err) == (0, "")
    assert "\\ud800 name" in out
    status, out, err = run(*html, capsys=capsys)
    assert status == 0 and "\\ud800 name" in Path(html[3]).read_text(encoding="utf-8")
    assert run(*diff, capsys=capsys)[0] in (0, 1)


def test_a_file_name_that_was_not_utf8_reads_as_its_bytes():
    trace = Trace.from_dict(changed(lambda d: d["stacks"][0][0].__setitem__(0, "/p/caf\udce9.py")))
    assert trace.events[0].frame.filename == "/p/caf\\xe9.py"


def test_the_first_bad_field_in_the_documented_order_is_named():
    def two_faults(data: dict) -> None:
        data["events"][0][3] = "x"
        data["depth"] = -1

    with pytest.raises(LogError, match=r"\(depth: expected"):
        Trace.from_dict(changed(two_faults))


def test_extra_fields_are_ignored_for_logs_from_a_later_compatible_writer():
    trace = Trace.from_dict(changed(lambda d: d.__setitem__("comment", {"any": ["thing"]})))
    assert len(trace.events) == 5


# -- bounded loading -----------------------------------------------------------------------


def big_log(events: int, rng: random.Random) -> dict:
    data = copy.deepcopy(VALID)
    data["stacks"] = [
        [
            [f"/p/mod{rng.randrange(40)}.py", rng.randrange(1, 900), f"fn{rng.randrange(99)}"]
            for _ in range(rng.randrange(1, 6))
        ]
        for _ in range(500)
    ]
    apis = [("numpy", "numpy.random.rand"), ("random", "random.random"), ("torch", "torch.randn")]
    data["events"] = []
    for _ in range(events):
        stream, api = rng.choice(apis)
        data["events"].append([stream, "draw", api, rng.randrange(1, 99), rng.randrange(500), 139947943926656, None])
    data["max_events"], data["dropped"], data["overflow"] = events, 0, []
    return data


def test_loading_holds_little_more_than_the_kept_events(tmp_path):
    path = tmp_path / "big.json"
    path.write_text(json.dumps(big_log(30_000, random.Random(10))), encoding="utf-8")
    tracemalloc.start()
    try:
        trace = Trace.load(path)
        kept, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(trace) == 30_000
    # The file's bytes and text, and the rows parsed once as shared tuples: about 3 times the
    # file (whole-file json.loads, then tuples, then Events, peaked at 9).
    assert peak < 4 * os.path.getsize(path), (peak, kept, os.path.getsize(path))


def test_a_log_over_the_size_limit_is_refused_before_it_is_read_and_the_limit_can_be_raised(tmp_path):
    path = tmp_path / "big.json"
    path.write_text(json.dumps(big_log(2000, random.Random(11))), encoding="utf-8")
    size = os.path.getsize(path)
    with pytest.raises(LogError) as error:
        Trace.load(path, max_size=size - 1)
    assert re.fullmatch(
        r"'.*big\.json' is \d+(\.\d)? KiB, more than the \d+(\.\d)? KiB a log may have; to read it, "
        r"raise the limit: rngtrace show/diff --max-log-size 1M, or Trace.load\(path, max_size=...\)",
        str(error.value),
    )
    assert len(Trace.load(path, max_size=size)) == 2000


def test_the_size_limit_is_an_option_of_show_and_diff(tmp_path, capsys):
    path = tmp_path / "log.json"
    path.write_text(json.dumps(VALID), encoding="utf-8")
    for argv in (["show", str(path)], ["diff", str(path), str(path)]):
        status, out, err = run(*argv, "--max-log-size", "100", capsys=capsys)
        assert (status, out) == (2, "") and "more than the 100 bytes a log may have" in err
        assert run(*argv, "--max-log-size", "1M", capsys=capsys)[0] == 0
    status, _out, err = run("show", str(path), "--max-log-size", "lots", capsys=capsys)
    assert status == 2 and "expected a size such as 512M or 2G, got 'lots'" in err


# -- fuzzing ---------------------------------------------------------------------------------

#: values a field is retyped to: every JSON type, edge numbers, markup, terminal escapes
RETYPES = [
    None,
    True,
    False,
    0,
    -1,
    1.5,
    "@1e400",
    2**63,
    "@digits",
    "",
    "x",
    "<script>alert(1)</script>",
    "\x1b]52;c;aGk=\x07",
    "@surrogate",
    [],
    [1],
    {},
    {"a": 1},
    "@deep",
]


def _paths(value: Any, path: tuple = ()) -> list[tuple]:
    """Every place in a log: the path of keys and indexes that reaches it."""
    out = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, path + (key,))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            out += _paths(item, path + (i,))
    return out


def mutate(rng: random.Random) -> tuple[str, dict]:
    """One mutation of VALID: a place dropped, retyped, nested or enlarged; (what was done, the log)."""
    data = copy.deepcopy(VALID)
    path = rng.choice(_paths(data)[1:])
    *parents, last = path
    holder = data
    for key in parents:
        holder = holder[key]
    value = holder[last]
    how = rng.choice(["drop", "retype", "retype", "nest", "enlarge"])
    if how == "drop":
        del holder[last]
    elif how == "retype":
        holder[last] = rng.choice(RETYPES)
    elif how == "nest":
        holder[last] = [value] if rng.random() < 0.5 else {"x": value}
    elif isinstance(value, (list, str)):
        holder[last] = value * rng.choice([2, 50, 1000])
    elif isinstance(value, int) and not isinstance(value, bool):
        holder[last] = value * 10 ** rng.choice([3, 12, 30])
    else:
        holder[last] = [value] * 100
    return f"{how} {'/'.join(map(str, path))}", data


def test_thousands_of_mutated_logs_give_a_render_or_one_line_and_exit_2(commands, capsys):
    rng = random.Random(20241130)
    for _ in range(3000):
        what, data = mutate(rng)
        for argv in commands(dumps(data)):
            try:
                status = cli.main(argv)
            except BaseException as error:  # noqa: BLE001 - a traceback is the failure this test looks for
                pytest.fail(f"{what}: {argv[0]} raised {type(error).__name__}: {error}")
            out, err = capsys.readouterr()
            out.encode("utf-8")  # printable: no lone surrogate reached the output
            if status == 2:
                assert out == "" and err.startswith("rngtrace: error: ") and err.count("\n") == 1, (what, argv, err)
            else:
                assert status in ((0, 1) if argv[0] == "diff" else (0,)), (what, argv, status, err)
                assert err == "" or err.startswith("rngtrace: HTML report saved to "), (what, argv, err)


def test_the_fuzz_covers_every_field_and_every_kind_of_mutation():
    rng = random.Random(20241130)
    done = [mutate(rng)[0] for _ in range(3000)]
    assert {what.split()[0] for what in done} == {"drop", "retype", "nest", "enlarge"}
    fields = {what.split()[1].split("/")[0] for what in done}
    assert fields == set(VALID), set(VALID) - fields


def test_a_version_2_log_keeps_its_processes_pids_and_findings():
    trace = Trace.from_dict(VALID)
    assert [p.pid for p in trace.processes] == [14781, 14790]
    assert trace.processes[1].role == "DataLoader worker 0"
    assert [e.pid for e in trace.events] == [14781] * 4 + [14790]
    (finding,) = [f for f in trace.findings if f.kind == "duplicate"]  # both drew from the state digest "5be2"
    assert finding.kind == "duplicate" and set(finding.pids) == {14781, 14790}


def test_a_version_1_log_reads_as_one_process():
    old = {k: v for k, v in VALID.items() if k not in ("ppid", "processes", "pids", "origins")}
    old["version"] = 1
    trace = Trace.from_dict(old)
    assert [p.pid for p in trace.processes] == [14781]
    assert [f.kind for f in trace.findings] == ["interleaved"]  # the story's; no duplicate without origins


@pytest.mark.parametrize(
    "field, value, says",
    [
        ("processes", [[1, 2, "fork", None, "normal"]], r"processes\[0\]: expected \[pid, ppid"),
        ("processes", [[1, 2, 3, None, "normal", 1]], r"processes\[0\] start: expected a string"),
        ("pids", {"99": 1}, r"pids: expected thread ids listed in threads"),
        ("pids", [], r"pids: expected an object"),
        ("origins", [[1, "numpy", "d", "fork", 99]], r"origins\[0\] event index: expected at most 5"),
        ("ppid", -1, r"ppid: expected a whole number"),
        ("from_start", 1, r"from_start: expected true or false, got 1"),
        ("settings", [], r"settings: expected an object of flags"),
        ("settings", {"cuda": "yes"}, r"settings\['cuda'\]: expected true or false"),
    ],
)
def test_a_bad_version_2_field_is_one_line_naming_it(field, value, says):
    with pytest.raises(LogError, match=says):
        Trace.from_dict(changed(lambda d: d.__setitem__(field, value)))


def test_a_repeated_row_is_one_object_and_a_row_differing_only_by_type_is_still_refused(tmp_path):
    row = ["numpy", "draw", "numpy.random.rand", 1, 2, 139947943926656, None]
    log = copy.deepcopy(VALID)
    log["events"] = VALID["events"] + [list(row), list(row)]  # the same row as events[3]
    path = tmp_path / "log.json"
    path.write_text(json.dumps(log))
    raw = Trace.load(path).raw
    assert raw[3] is raw[5] is raw[6]  # a loop's rows are held once
    for odd in (True, 1.0):  # equal to 1, and so to a shared row's count, but not a whole number
        log["events"] = VALID["events"] + [[*row[:3], odd, *row[4:]]]
        path.write_text(json.dumps(log))
        with pytest.raises(LogError, match="count"):
            Trace.load(path)
