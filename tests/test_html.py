"""The HTML report, specified on traces built from literal dicts, one real trace and a real browser."""

from __future__ import annotations

import base64
import hashlib
import html
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sysconfig
import time
from typing import Any

import pytest
from literal_traces import build, draw, ev

from rngtrace import Trace, rng_trace
from rngtrace.render import RENDERERS
from rngtrace.render import render as render_as
from rngtrace.render.html import render

SITE = sysconfig.get_paths()["purelib"]
STDLIB = sysconfig.get_paths()["stdlib"]
SKLEARN = (os.path.join(SITE, "sklearn", "utils", "_indexing.py"), 574, "resample")
SCIPY = (os.path.join(SITE, "scipy", "stats", "_distn_infrastructure.py"), 1138, "rv_generic.rvs")
NUMPY_RANDOM = (os.path.join(SITE, "numpy", "random", "_pickle.py"), 10, "__randomstate_ctor")
RANDOM_PY = (os.path.join(STDLIB, "random.py"), 362, "shuffle")
CHROMIUM = shutil.which("chromium")


@pytest.fixture
def story(here) -> Trace:
    """A seed, user draws, library draws, an unattributed move and a note."""
    main = (here("train.py"), 12, "main")
    return build(
        ev("numpy", "seed", "numpy.random.seed", None, main, detail="666"),
        draw("numpy.random.choice", 3, SKLEARN, main),
        draw("random.random", 1, main),
        draw("numpy.random.standard_normal", 5, SCIPY, main),
        draw("numpy.random.choice", 3, SKLEARN, main),
        ev("numpy", "unattributed", "numpy state", None, main, detail="moved before this numpy.random.rand call"),
        notes=("another profiler is active",),
    )


def data_of(page: str) -> dict[str, Any]:
    """The event data the page's script draws from."""
    match = re.search(r'<script type="application/json" id="rngtrace-data">(.*?)</script>', page, re.S)
    assert match, "no event data in the page"
    return json.loads(match.group(1))


def event_origins(data: dict[str, Any]) -> list[str]:
    return [data["packages"][data["sites"][site][4]][0] for site in data["site"]]


def table(page: str, section: str) -> list[list[str]]:
    """The text of each body row's cells in the table of ``<section id=section>``."""
    body = re.search(rf'<section class="card" id="{section}">.*?<tbody>(.*?)</tbody>', page, re.S)
    assert body, f"no table in section {section}"
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", body.group(1), re.S)
    return [
        [html.unescape(re.sub(r"<[^>]+>", "", cell)).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", r, re.S)]
        for r in rows
    ]


# -- the page as a whole ------------------------------------------------------------------


def test_html_is_picked_from_the_renderers_dict(story):
    assert RENDERERS["html"] is render
    assert render_as(story, "html").startswith("<!DOCTYPE html>")


def test_page_loads_nothing_from_the_network(story):
    page = render(story)
    assert not re.search(r"https?://", page)
    assert not re.search(r"<link\b|<img\b|<iframe\b|@import|url\(", page)
    assert re.findall(r"<script\b[^>]*>", page) == ['<script type="application/json" id="rngtrace-data">', "<script>"]


def test_page_lets_only_its_own_inline_script_and_style_run(story):
    page = render(story)
    policy = re.search(
        r'<head><meta charset="utf-8"><meta http-equiv="Content-Security-Policy" content="([^"]+)">', page
    )
    assert policy, "no policy, or not before the page's style and script"
    rules = dict(rule.strip().split(" ", 1) for rule in policy.group(1).split(";"))

    def digest(pattern: str) -> str:
        source = re.search(pattern, page, re.S).group(1)
        return "'sha256-" + base64.b64encode(hashlib.sha256(source.encode()).digest()).decode() + "'"

    assert rules["default-src"] == "'none'" and rules["base-uri"] == "'none'"
    assert rules["script-src"] == digest(r"<script>(.*?)</script>")
    assert rules["style-src"] == digest(r"<style>(.*?)</style>")


def test_page_has_no_inline_handlers_style_attributes_or_html_from_strings(story):
    page = render(story)
    markup = re.sub(r"<(script|style)\b[^>]*>.*?</\1>", "", page, flags=re.S)
    assert not re.search(r"\son\w+\s*=", markup), "an inline event handler: the page's policy would block it"
    assert not re.search(r"\sstyle\s*=", markup), "a style attribute: the page's policy would block it"
    script = re.search(r"<script>(.*?)</script>", page, re.S).group(1)
    assert not re.search(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function", script)


def test_header_is_the_text_logs_header_with_a_chip_per_stream(story):
    page = render(story)
    summary = re.search(r'<p class="summary">(.*?)</p>', page).group(1)
    assert html.unescape(summary) == render_as(story, "text").splitlines()[0]
    chips = [html.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r'<div class="chip">(.*?)</div>', page)]
    assert chips == ["random 1 draw", "numpy 1 seed · 3 draws · 1 unattributed"]


def test_empty_trace_says_nothing_was_drawn_and_keeps_the_watched_lanes():
    page = render(build())
    assert "no draws or reseeds of global random streams (watched: numpy, random, torch)" in page
    data = data_of(page)
    assert data["site"] == [] and data["lanes"] == ["random", "numpy", "torch"]


# -- the timeline ------------------------------------------------------------------------


def test_one_mark_per_event_in_its_streams_lane_with_its_kind(story):
    page = render(story)
    data = data_of(page)
    assert re.search(r'<div id="chart" data-events="6"', page)
    assert len(data["site"]) == len(data["count"]) == len(story.events)
    for event, site in zip(story.events, data["site"]):
        lane, kind, api = data["sites"][site][:3]
        assert (data["lanes"][lane], ["draw", "seed", "unattributed"][kind], api) == (
            event.stream,
            event.kind,
            event.api,
        )
    assert data["count"] == [e.count for e in story.events]
    assert data["detail"] == {
        "0": "666",
        "5": "moved between #4 sklearn/utils/_indexing.py:574 and the call at train.py:12",
    }


def test_a_lane_per_stream_in_the_text_logs_order_cuda_devices_after_torch(here):
    main = (here("a.py"), 1, "<module>")
    data = data_of(
        render(
            build(
                draw("torch.randn", 4, main, stream="torch.cuda:1"),
                draw("torch.randn", 4, main, stream="torch.cuda:0"),
                draw("random.random", 1, main),
            )
        )
    )
    assert data["lanes"] == ["random", "numpy", "torch", "torch.cuda:0", "torch.cuda:1"]


def test_marks_are_coloured_by_the_package_outside_the_random_library_that_drew(here):
    main = (here("train.py"), 3, "main")
    data = data_of(
        render(
            build(
                draw("numpy.random.choice", 3, SKLEARN, main),
                draw("numpy.random.rand", 1, main),
                draw("numpy.random.rand", 1, NUMPY_RANDOM, SCIPY, main),  # numpy's own frame is skipped
                draw("random.random", 1, RANDOM_PY, main),  # so is the stdlib random module
                draw("random.random", 1, ("<string>", 1, "<module>")),
            )
        )
    )
    assert event_origins(data) == ["sklearn", "your code", "scipy", "your code", "other"]
    colors = dict(data["packages"])
    assert colors["your code"] == "#e8590c"
    assert len({colors["sklearn"], colors["scipy"], colors["your code"]}) == 3


def test_legend_names_every_package_with_its_events_and_the_three_shapes(story):
    page = render(story)
    legend = re.search(r'<div class="legend">(.*?)</div>', page, re.S).group(1)
    names = [html.unescape(re.sub(r"<[^>]+>", "", b)) for b in re.findall(r'<button[^>]*>(.*?)</button>', legend)]
    assert names == ["your code 2", "sklearn 2", "scipy 1"]  # the unattributed move made by no one
    for shape in ("draw", "seed", "odd"):
        assert f'class="shape {shape}"' in legend


def test_each_event_carries_its_whole_stack_with_user_frames_flagged(here):
    stack = (SKLEARN, (here("lib", "util.py"), 7, "helper"), (here("train.py"), 3, "main"))
    data = data_of(render(build(draw("numpy.random.choice", 3, *stack))))
    frames = [data["frames"][f] for f in data["stacks"][data["sites"][data["site"][0]][3]]]
    assert [(path, line, fn, user) for path, line, fn, user, _full in frames] == [
        ("sklearn/utils/_indexing.py", 574, "resample", 0),
        (os.path.join("lib", "util.py"), 7, "helper", 1),
        ("train.py", 3, "main", 1),
    ]


def test_names_and_paths_cannot_inject_markup_or_script(here):
    evil = here('we"ird <b>dir', "x.py")
    trace = build(
        draw("numpy.random.rand", 1, (evil, 1, "<lambda>"), (here("t.py"), 2, "</script><script>alert(1)//")),
        ev("random", "seed", "random.seed", None, (evil, 3, "f"), detail="'<img src=x onerror=alert(1)>'"),
    )
    page = render(trace, title="<i>mine</i>")
    assert "<lambda>" not in page and "<b>dir" not in page and "<img" not in page and "<i>mine" not in page
    assert "&lt;lambda&gt;" in page and "&lt;i&gt;mine&lt;/i&gt;" in page
    assert len(re.findall(r"<script\b", page)) == 2 and page.count("</script>") == 2
    data = data_of(page)  # the names survive, as text
    assert {f[2] for f in data["frames"]} >= {"<lambda>", "</script><script>alert(1)//"}
    assert data["detail"]["1"] == "'<img src=x onerror=alert(1)>'"


# -- the tables -------------------------------------------------------------------------


def test_call_site_table_groups_draws_like_the_text_log_dropped_ones_included(here):
    main = (here("train.py"), 12, "main")
    trace = build(
        draw("numpy.random.choice", 3, SKLEARN, main),
        draw("random.random", 1, main),
        overflow=((draw("random.random", 1, main), 99, 99),),
        max_events=2,
    )
    rows = table(render(trace), "sites")
    assert rows == [
        ["100", "100", "random", "random.random", "train.py:12 in main", ""],
        ["1", "3", "numpy", "numpy.random.choice", "sklearn/utils/_indexing.py:574 in resample", "train.py:12 in main"],
    ]


def test_clicking_a_site_row_can_find_its_marks(story):
    page = render(story)
    data = data_of(page)
    rows = {int(r): i for i, r in enumerate(re.findall(r'<tr data-row="(\d+)">', page))}
    choice = [data["sites"][s][5] for s, e in zip(data["site"], story.events) if e.api == "numpy.random.choice"]
    assert len(set(choice)) == 1 and choice[0] in rows
    assert table(page, "sites")[choice[0]][3] == "numpy.random.choice"


def test_seeds_and_unattributed_moves_are_listed_with_value_and_window(story):
    rows = table(render(story), "others")
    assert [r[:3] for r in rows] == [["0", "numpy", "seed"], ["5", "numpy", "unattributed"]]
    assert rows[0][3] == "numpy.random.seed(666)"
    # A move is placed by its window, never at the line that noticed it.
    assert rows[1][3:5] == [
        "numpy statemoved between #4 sklearn/utils/_indexing.py:574 and the call at train.py:12",
        "—",
    ]


def test_hints_and_notes_close_the_page(story):
    page = render(story)
    hints = html.unescape(re.search(r'<section class="card" id="hints">(.*?)</section>', page, re.S).group(1))
    assert "rng.random for random.random" in hints  # the story's own draw; its numpy draws are all sklearn's, scipy's
    # Its findings gave scikit-learn's and scipy's random_state fixes: the hints do not repeat them.
    assert "random_state=0" not in hints and "np.random.default_rng" not in hints
    assert "another profiler is active" in hints


def test_dropped_events_and_clipped_marks_are_said(here):
    main = (here("a.py"), 1, "<module>")
    trace = build(
        *[draw("random.random", 1, main)] * 10, overflow=((draw("random.random", 1, main), 5, 5),), max_events=10
    )
    page = render(trace, max_marks=4)
    limits = [html.unescape(p) for p in re.findall(r'<p class="limit">(.*?)</p>', page)]
    assert limits == [
        "5 events beyond max_events=10 were counted but not kept: they have no mark, and the call-site table "
        "includes them.",
        "The timeline shows the first 4 of 10 kept events (max_marks); the tables cover them all.",
    ]
    assert len(data_of(page)["site"]) == 4


def test_a_100k_event_trace_renders_in_seconds_into_a_page_of_a_few_megabytes(here):
    sites = [(here("train.py"), i, f"step{i}") for i in range(50)]
    events = [
        draw("numpy.random.rand", i % 7 + 1, SKLEARN, sites[i % 50])
        if i % 3
        else draw("random.random", 1, sites[i % 50])
        for i in range(100_000)
    ]
    trace = build(*events)
    started = time.perf_counter()
    page = render(trace)
    elapsed = time.perf_counter() - started
    assert len(data_of(page)["site"]) == 100_000
    assert elapsed < 5, f"rendering took {elapsed:.1f}s"
    assert len(page.encode()) < 3_000_000


def test_a_real_training_trace_is_coloured_by_sklearn_torch_and_your_code(here):
    np = pytest.importorskip("numpy")
    from sklearn.model_selection import train_test_split

    X = np.arange(40.0).reshape(20, 2)
    with rng_trace(print=False) as trace:
        train_test_split(X, test_size=0.25)
        np.random.rand(2)
        if importlib.util.find_spec("torch") is not None:
            import torch

            torch.nn.Linear(2, 2)
    origins = set(event_origins(data_of(render(trace))))
    assert {"sklearn", "your code"} <= origins
    assert "torch" in origins or importlib.util.find_spec("torch") is None


# -- in a real browser -------------------------------------------------------------------


def chromium(tmp_path, url: str, *args: str) -> subprocess.CompletedProcess:
    command = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--virtual-time-budget=5000",
        *args,
        url,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=True)


@pytest.mark.skipif(CHROMIUM is None, reason="needs the chromium browser (Debian package chromium)")
def test_chromium_draws_every_mark_and_shows_a_linked_events_stack_as_text(here, tmp_path):
    user = (here("train.py"), 12, "<lambda>")
    trace = build(
        ev("numpy", "seed", "numpy.random.seed", None, user, detail="666"),
        *[draw("numpy.random.choice", 3, SKLEARN, SCIPY, NUMPY_RANDOM, user)] * 40,
        draw("torch.randn", 8, user, stream="torch.cuda:0"),
    )
    page = tmp_path / "report.html"
    page.write_text(render(trace), encoding="utf-8")
    url = page.as_uri() + "#event=1"  # a link to one event opens with its stack in the panel
    dom = chromium(tmp_path, url, "--dump-dom").stdout
    assert re.search(r'<div id="chart"[^>]*data-rendered="42"', dom), "the script did not draw every mark"
    panel = re.search(r'<aside id="detail"[^>]*>(.*?)</aside>', dom, re.S).group(1)
    assert "numpy.random.choice ×3" in panel
    assert "<lambda>" not in panel
    assert re.search(
        r'<li class="mine"[^>]*><span class="fn">&lt;lambda&gt;<span class="badge">your code</span>'
        r'</span><span class="loc">train.py:12</span>',
        panel,
    )
    assert re.search(r'<li class="fold"[^>]*>… 2 library frames</li>', panel)
    shot = tmp_path / "report.png"
    chromium(tmp_path, url, f"--screenshot={shot}", "--window-size=1400,900")
    assert shot.stat().st_size > 10_000


def with_script(page: str, source: str) -> str:
    """``page`` running ``source`` at the end of its body, allowed by adding its hash to the page's policy."""
    digest = base64.b64encode(hashlib.sha256(source.encode()).digest()).decode()
    return page.replace("script-src ", f"script-src 'sha256-{digest}' ", 1).replace(
        "</body>", f"<script>{source}</script></body>"
    )


HOVER_PROBE = """
(function () {  // move the mouse over the chart until a mark answers, then click it
  var canvas = document.querySelector("#chart canvas"), box = canvas.getBoundingClientRect(), tip = "";
  function mouse(type, x, y) {
    canvas.dispatchEvent(new MouseEvent(type,
      {clientX: box.left + x, clientY: box.top + y, bubbles: true}));
  }
  search: for (var y = 2; y < box.height; y += 4) {
    for (var x = 0; x < box.width; x += 1) {
      mouse("mousemove", x, y);
      if (!document.getElementById("tip").hidden) { tip = document.getElementById("tip").textContent; break search; }
    }
  }
  mouse("mousedown", x, y); mouse("mouseup", x, y);
  var out = document.createElement("pre"); out.id = "probe";
  var panel = document.getElementById("detail").textContent;
  out.textContent = JSON.stringify({tip: tip, hash: location.hash, panel: panel});
  document.body.appendChild(out);
})();
"""


@pytest.mark.skipif(CHROMIUM is None, reason="needs the chromium browser (Debian package chromium)")
def test_chromium_hovering_a_mark_shows_its_call_and_clicking_pins_its_stack(here, tmp_path):
    trace = build(draw("random.shuffle", 9, (here("train.py"), 7, "<lambda>")))
    page = tmp_path / "report.html"
    page.write_text(with_script(render(trace), HOVER_PROBE), encoding="utf-8")
    dom = chromium(tmp_path, page.as_uri(), "--dump-dom", "--window-size=1400,900").stdout
    probe = json.loads(html.unescape(re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S).group(1)))
    assert probe["tip"] == "#0  random.shuffle ×9train.py:7 in <lambda>"
    assert probe["hash"] == "#event=0"
    assert probe["panel"].startswith("#0 · random · drawpinned · Esc to clearrandom.shuffle ×9")


ZOOM_PROBE = """
(function () {  // say how the timeline drew, zoom in at the middle until the marks come back, say it again
  var chart = document.getElementById("chart"), canvas = chart.querySelector("canvas");
  var box = canvas.getBoundingClientRect(), seen = [[chart.dataset.mode, Number(chart.dataset.rendered)]];
  for (var k = 0; k < 60 && chart.dataset.mode === "binned"; k++) {
    canvas.dispatchEvent(new WheelEvent("wheel", {clientX: box.left + box.width * 0.6, clientY: box.top + 40,
                                                  deltaY: -100, bubbles: true, cancelable: true}));
  }
  seen.push([chart.dataset.mode, Number(chart.dataset.rendered)]);
  var out = document.createElement("pre"); out.id = "probe"; out.textContent = JSON.stringify(seen);
  document.body.appendChild(out);
})();
"""


@pytest.mark.skipif(CHROMIUM is None, reason="needs the chromium browser (Debian package chromium)")
def test_chromium_bins_thousands_of_draws_per_call_site_and_zooming_in_brings_the_marks_back(here, tmp_path):
    mine, theirs = (here("train.py"), 12, "main"), (here("train.py"), 14, "main")
    trace = build(
        ev("numpy", "seed", "numpy.random.seed", None, mine, detail="666"),
        *[draw("numpy.random.rand", 1, mine), draw("numpy.random.choice", 3, SKLEARN, theirs)] * 3000,
    )
    page = tmp_path / "report.html"
    page.write_text(with_script(render(trace), ZOOM_PROBE), encoding="utf-8")
    dom = chromium(tmp_path, page.as_uri(), "--dump-dom", "--window-size=1400,900").stdout
    (mode, bars), (zoomed, marks) = json.loads(
        html.unescape(re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S).group(1))
    )
    assert mode == "binned" and 2 < bars < 1000  # a bar per site and bin of pixels, the seed's own mark
    assert zoomed == "marks" and 0 < marks < 6001


def test_the_report_opens_with_the_findings_before_the_timeline(here):
    main = (here("train.py"), 12, "main")
    page = render(
        build(
            ev("numpy", "seed", "numpy.random.seed", None, main, detail="0"),
            draw("numpy.random.choice", 3, SKLEARN, (here("train.py"), 13, "main")),
            draw("numpy.random.rand", 1, (here("train.py"), 14, "main")),
        )
    )
    sections = re.findall(r'<section class="card" id="([a-z]+)">', page)
    assert sections[:2] == ["findings", "timeline"]
    assert "interleaved" in re.search(r'<section class="card" id="findings">(.*?)</section>', page, re.S).group(1)
    assert "<code>#event=N</code>" in page  # the timeline's help says how to link to one event
