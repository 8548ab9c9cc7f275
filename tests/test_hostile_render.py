"""Logs are untrusted: whatever their fields hold, `show` prints it escaped and `show --html` runs none of it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig

import pytest
from literal_traces import build, ev

from rngtrace import Trace, cli, rng_trace
from rngtrace.diff import compare
from rngtrace.render import html, render_diff
from rngtrace.render.base import printable
from rngtrace.render.text import render

CHROMIUM = shutil.which("chromium")
SITE = sysconfig.get_paths()["purelib"]

# What a crafted name could do to a terminal if printed raw, and the escaped form a reader sees instead.
PAYLOADS = {
    "erase line": ("\x1b[2K\r", r"\x1b[2K\r"),
    "clipboard": ("\x1b]52;c;cm0gLXJmIH4=\x07", r"\x1b]52;c;cm0gLXJmIH4=\x07"),
    "bell": ("\x07", r"\x07"),
    "carriage return": ("\rall clear", r"\rall clear"),
    "fake line": ("\nNote: all clear", r"\nNote: all clear"),
    "C1 CSI": ("\x9b8m", r"\x9b8m"),
    "DEL": ("\x7f", r"\x7f"),
    "bidi override": ("\u202egnp.", r"\u202egnp."),
    "bidi isolate": ("\u2066x\u2069", r"\u2066x\u2069"),
}
# Any of these left in the output reaches the terminal raw; "\n" is the log's own line break.
RAW = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")
SGR = re.compile(r"\x1b\[[0-9;]*m")  # the log's own colour codes, when colour is on
FIELDS = ("filename", "function", "api", "stream", "thread", "seed value", "note")


def hostile_trace(here, field: str, bad: str) -> Trace:
    """A trace whose ``field`` ends in ``bad``: through Trace.from_dict, as a crafted log would come."""

    def put(name: str, value: str) -> str:
        return value + bad if field == name else value

    trace = Trace.from_dict(
        {
            "format": "rngtrace",
            "version": 1,
            "pid": 1,
            "streams": ["numpy", "random", "torch"],
            "depth": 16,
            "max_events": 100_000,
            "dropped": 0,
            "notes": [put("note", "seen")],
            "stacks": [[[here(put("filename", "train.py")), 7, put("function", "main")]]],
            "threads": {"1": "MainThread", "2": put("thread", "loader-0")},
            "events": [
                ["numpy", "seed", "numpy.random.seed", None, 0, 1, put("seed value", "666")],
                ["numpy", "draw", put("api", "numpy.random.rand"), 3, 0, 2, None],
                ["random", "draw", "random.random", 1, 0, 1, None],
            ],
            "overflow": [],
        }
    )
    return forge_stream(trace, 1, put("stream", "numpy"))


def forge_stream(trace: Trace, index: int, stream: str) -> Trace:
    """Give event ``index`` a stream Trace.load would refuse: the renderers escape it on their own."""
    trace.raw[index] = (stream, *trace.raw[index][1:])
    return trace


def lean(here) -> Trace:
    """A run that lacks the hostile trace's numpy events, so a diff shows them all."""
    return build(ev("random", "draw", "random.random", 1, (here("train.py"), 7, "main")))


def assert_safe(out: str, shown: str, *, color: bool = False) -> None:
    """No raw control character in ``out`` (bar the log's own colour), and ``shown`` visible in it."""
    bare = SGR.sub("", out) if color else out
    assert not RAW.findall(bare), f"raw control characters reach the terminal: {RAW.findall(bare)!r}"
    out.encode("utf-8")  # print() to a UTF-8 terminal must not raise
    assert shown in bare, f"{shown!r} not shown in:\n{bare}"
    assert not any(line.startswith("Note: all clear") for line in bare.splitlines()), "a name forged a line"


@pytest.mark.parametrize("payload", PAYLOADS, ids=list(PAYLOADS))
@pytest.mark.parametrize("field", FIELDS)
def test_show_prints_control_characters_in_every_name_escaped(field, payload, here):
    raw, shown = PAYLOADS[payload]
    trace = hostile_trace(here, field, raw)
    assert_safe(render(trace), shown)
    assert_safe(render(trace, color=True), shown, color=True)


@pytest.mark.parametrize("payload", PAYLOADS, ids=list(PAYLOADS))
@pytest.mark.parametrize("field", [f for f in FIELDS if f not in ("thread", "note")])  # a diff shows neither
def test_diff_prints_control_characters_in_every_name_escaped(field, payload, here):
    raw, shown = PAYLOADS[payload]
    trace = hostile_trace(here, field, raw)
    for a, b in ((trace, lean(here)), (lean(here), trace)):
        assert_safe(render_diff(compare(a, b)), shown)
        assert_safe(render_diff(compare(a, b), color=True), shown, color=True)


@pytest.mark.parametrize("payload", PAYLOADS, ids=list(PAYLOADS))
def test_diff_headline_escapes_a_seed_value_that_differs(payload, here):
    raw, shown = PAYLOADS[payload]
    out = render_diff(compare(hostile_trace(here, "seed value", ""), hostile_trace(here, "seed value", raw)))
    assert_safe(out, shown)
    assert f"A seeded 666, B 666{shown}" in out


def test_diff_escapes_the_file_names_it_was_given(here):
    out = render_diff(compare(hostile_trace(here, "api", ""), lean(here)), names=("a\x1b[2K.json", "b\u202e.json"))
    assert_safe(out.splitlines()[0], r"A = a\x1b[2K.json (3 events) and B = b\u202e.json (1 event)")


def test_show_and_diff_commands_print_a_crafted_logs_names_escaped(here, tmp_path, capsys):
    raw = "\x1b[2K\r\x1b]52;c;cm0gLXJmIH4=\x07\u202e"
    shown = r"\x1b[2K\r\x1b]52;c;cm0gLXJmIH4=\x07\u202e"
    for field in ("filename", "function", "api"):
        hostile_trace(here, field, raw).save(tmp_path / "evil.json")
        lean(here).save(tmp_path / "clean.json")
        assert cli.main(["show", str(tmp_path / "evil.json")]) == 0
        assert cli.main(["diff", str(tmp_path / "clean.json"), str(tmp_path / "evil.json")]) == 1
        out = capsys.readouterr().out
        assert_safe(out, shown)
        assert out.count(shown) >= 2, field  # in the log and in the comparison


def surrogate_trace(here) -> Trace:
    """A real trace of a draw from a file and function whose names hold lone surrogates.

    That is how a file name that is not UTF-8 reaches Python (os.fsdecode keeps its bytes as
    surrogates); a log on disk never holds one raw, as the loader escapes them.
    """
    namespace: dict = {}
    exec(compile("import random\ndef draw():\n    random.random()\n", here("caf\udce9.py"), "exec"), namespace)
    draw = namespace["draw"]
    names = {"co_name": "dr\udcffaw"} | ({"co_qualname": "dr\udcffaw"} if sys.version_info >= (3, 11) else {})
    draw.__code__ = draw.__code__.replace(**names)
    with rng_trace(print=False, streams=["random"]) as trace:
        draw()
    assert trace.events[0].frame.filename.endswith("caf\udce9.py")
    return trace


def test_lone_surrogates_are_shown_escaped_so_the_log_can_be_printed(here, tmp_path):
    trace = surrogate_trace(here)
    assert_safe(render(trace), r"caf\xe9.py:3 in dr\xffaw")
    assert_safe(render_diff(compare(trace, lean(here))), r"caf\xe9.py:3 in dr\xffaw")
    trace.save(tmp_path / "saved.json")
    assert render(Trace.load(tmp_path / "saved.json")) == render(trace)  # the live log reads as the saved one


def test_escaped_names_keep_the_columns_aligned(here):
    trace = hostile_trace(here, "api", "\x1b[2K")
    lines = render(trace).split("\n\n")[0].splitlines()[1:4]
    assert r"numpy.random.rand\x1b[2K ×3" in lines[2]
    starts = {line.index("train.py:7") for line in lines[1:]}
    assert len(starts) == 1 and lines[0].index("called at") in starts


def test_printable_writes_escapes_readably_and_leaves_ordinary_text_alone():
    assert printable("ok.py") == "ok.py"
    assert printable("naïve — 数据 <lambda> C:\\Users\\me") == "naïve — 数据 <lambda> C:\\Users\\me"
    assert printable("\x1b[2K\t\x00\x85\u202e\u2028") == r"\x1b[2K\t\x00\x85\u202e\u2028"
    # Lone surrogates as Trace.load writes them: the byte a file name that was not UTF-8 had, else the code.
    assert printable("caf\udce9\x1b.py") == r"caf\xe9\x1b.py"
    assert printable("caf\udcc3\udca9.py") == "café.py"  # two bytes that are UTF-8 after all
    assert printable("\ud800\udcff") == r"\ud800\udcff"


# -- the HTML report ------------------------------------------------------------------


def attack(label: str) -> str:
    """Markup that appends ``|label`` to the page's title if it ever runs, in every context it could break out of."""
    run = f"document.title+=/|{label}/.source"  # no quotes, so it needs none to close
    return (
        f"</script><script>{run}</script><!--<script>{run}</script>--><img src=x onerror={run}>"
        f"\"><img src=x onerror={run}>'><svg onload={run}><a href=javascript:{run}>x</a>\u2028\u2029"
    )


def hostile_log(here) -> dict:
    """A log whose every free-text field attacks the page; the format allows each of these strings."""
    mine = here(attack("dir"), "train.py")
    package = os.path.join(SITE, "<svg onload=document.title+=String.fromCharCode(124,112,107,103)>", "m.py")
    return {
        "format": "rngtrace",
        "version": 1,
        "pid": 1,
        "streams": ["numpy", "random", "torch"],
        "depth": 16,
        "max_events": 100_000,
        "dropped": 0,
        "notes": [attack("note")],
        "stacks": [[[package, 3, attack("libfn")], [mine, 7, attack("fn")]], [[mine, 9, "main"]]],
        "threads": {"1": "MainThread", "2": attack("thread")},
        "events": [
            ["numpy", "draw", attack("api"), 3, 0, 2, None],
            ["numpy", "seed", "numpy.random.seed", None, 1, 1, attack("seed")],
            ["numpy", "unattributed", "numpy state", None, 1, 1, attack("moved")],
            ["random", "draw", "random.random", 1, 1, 1, None],
        ],
        "overflow": [],
    }


def hostile_page_trace(here) -> Trace:
    """The hostile log, with the fields Trace.load checks (pid, depth, streams) forged after loading."""
    trace = Trace.from_dict(hostile_log(here))
    trace.pid, trace.depth, trace.streams = attack("pid"), attack("depth"), ("numpy", attack("watched"))
    return forge_stream(trace, 3, attack("stream"))


def test_every_field_of_a_hostile_log_reaches_the_page_as_text(here):
    page = html.render(hostile_page_trace(here))
    assert not re.search(r"<(img|svg|a)\b|<!--", page), "markup from the log reached the page"
    assert re.findall(r"<script\b[^>]*>", page) == ['<script type="application/json" id="rngtrace-data">', "<script>"]
    for label in (
        "pid",
        "depth",
        "watched",
        "stream",
        "api",
        "note",
        "dir",
        "fn",
        "libfn",
        "seed",
    ):  # "moved" is not shown
        assert f"&lt;/script&gt;&lt;script&gt;document.title+=/|{label}/" in page, label
    data = json.loads(re.search(r'id="rngtrace-data">(.*?)</script>', page, re.S).group(1))
    assert attack("thread").replace("\u2028\u2029", r"\u2028\u2029") in data["threads"]  # text, shown as text


def test_lone_surrogates_and_control_characters_are_shown_escaped_in_the_page(here):
    page = html.render(surrogate_trace(here))
    page.encode("utf-8")  # the report can be written
    assert r"caf\xe9.py:3 in dr\xffaw" in page
    trace = build(ev("numpy", "draw", "numpy.random.rand\x1b[2K", 1, (here("t.py"), 1, "f\u202e")), notes=("bell\x07",))
    page = html.render(trace)
    assert not RAW.search(page.replace("\n", ""))
    assert r"numpy.random.rand\x1b[2K" in page and r"bell\x07" in page and r"f\u202e" in page


def chromium(profile, page) -> str:
    """The page's DOM after its scripts ran, in headless Chromium."""
    command = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-sync",
        "--disable-background-networking",
        "--disable-component-update",
        f"--user-data-dir={profile}",
        "--virtual-time-budget=2000",
        "--dump-dom",
        page.as_uri(),
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=True).stdout


def ran(dom: str) -> tuple[set[str], bool]:
    """The markers that scripts added to the title, and whether the page's own script drew the timeline."""
    title = re.search(r"<title>(.*?)</title>", dom, re.S).group(1)
    assert title.startswith("rngtrace report"), title
    return set(filter(None, title[len("rngtrace report") :].split("|"))), bool(re.search(r"data-rendered=\"\d+\"", dom))


CONTROL = (
    "<script>document.title+=/|control-script/.source</script>"
    "<img src=x onerror=document.title+=/|control-img/.source></body>"
)


@pytest.mark.skipif(CHROMIUM is None, reason="needs the chromium browser (Debian package chromium)")
def test_chromium_runs_no_script_from_a_hostile_log(here, tmp_path):
    # Escaping alone: the page without its policy, plus markup planted raw as a control the detection must see.
    bare = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", html.render(hostile_page_trace(here)))
    assert bare.count("Content-Security-Policy") == 0
    page = tmp_path / "escaped.html"
    page.write_text(bare.replace("</body>", CONTROL), encoding="utf-8")
    assert ran(chromium(tmp_path / "profile", page)) == ({"control-script", "control-img"}, True)
    # The policy alone: markup planted raw in the report `rngtrace show --html` writes runs nothing either.
    log, report = tmp_path / "evil.json", tmp_path / "report.html"
    log.write_text(json.dumps(hostile_log(here)), encoding="utf-8")
    assert cli.main(["show", str(log), "--html", str(report)]) == 0
    report.write_text(report.read_text(encoding="utf-8").replace("</body>", CONTROL), encoding="utf-8")
    assert ran(chromium(tmp_path / "profile", report)) == (set(), True)


@pytest.mark.parametrize("payload", PAYLOADS, ids=list(PAYLOADS))
def test_findings_built_from_a_crafted_logs_names_print_escaped(payload, here):
    bad, shown = PAYLOADS[payload]
    library = (os.path.join(SITE, "sklearn" + bad, "m.py"), 3, "Est" + bad + ".fit")
    odd = (os.path.join(SITE, "pkg", "x.py"), 1, "<locals>")  # a function name with no name in it
    user = (here("train.py"), 7, "main")
    trace = build(
        ev("numpy", "seed", "numpy.random.seed", None, (here("train.py"), 6, "main"), detail="1"),
        ev("numpy", "draw", "numpy.random.rand", 3, library, user),
        ev("numpy", "draw", "numpy.random.rand", 3, odd, (here("train.py"), 8, "main")),
        ev("numpy", "draw", "numpy.random.rand", 1, (here("train.py"), 9, "main")),
        ev("random", "seed", "random.seed", None, library, user),
    )
    assert {f.kind for f in trace.findings} == {"interleaved", "unseeded"}
    assert_safe(render(trace), shown)
    page = html.render(trace)
    assert bad not in page and "sklearn" in page
