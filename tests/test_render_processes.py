"""Logs across processes: each row names its pid, the processes and findings have sections of their own,
call sites say in how many processes they drew, the HTML report has a band of lanes per process and a
findings panel, and `rngtrace diff` says when two runs ran other processes or only one has a finding."""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
import re
import shutil
import subprocess

import numpy as np
import numpy.random  # noqa: F401  (imported before any fork, so children inherit numpy's state)
import pytest
from fork_pools import two_workers_draw
from literal_traces import events_block

from rngtrace import Trace, rng_trace
from rngtrace.diff import compare
from rngtrace.render import render_diff
from rngtrace.render.html import render as render_html
from rngtrace.render.text import render

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")

CHROMIUM = shutil.which("chromium")


def _draw_three() -> None:
    np.random.rand(3)  # the line parent and child both draw at


def _parent_and_child(child_seed: int | None = None) -> tuple[Trace, int]:
    """A parent and its forked child each draw three numbers at one line; the child exits with code 3."""
    with rng_trace(print=False) as trace:
        pid = os.fork()
        if pid == 0:
            try:
                if child_seed is not None:
                    np.random.seed(child_seed)
                _draw_three()
            finally:
                os._exit(3)
        _draw_three()
        np.random.rand(2)  # a line only the parent draws at
        os.waitpid(pid, 0)
    return trace, pid


def _alone() -> Trace:
    """The parent's draws, with no child."""
    with rng_trace(print=False) as trace:
        _draw_three()
        np.random.rand(2)
    return trace


def _pool_of_two() -> Trace:
    """Two fork-pool workers that each draw once from the state they inherited."""
    return two_workers_draw()[1]


def _section(log: str, title: str) -> list[str]:
    """The lines of the section whose first line starts with ``title``, up to the next blank line."""
    blocks = [block.splitlines() for block in log.split("\n\n")]
    found = [block for block in blocks if block[0].startswith(title)]
    assert found, f"no {title!r} section in:\n{log}"
    return found[0]


def _event_rows(log: str) -> list[list[str]]:
    """The event table's rows as their whitespace-separated words (the table headed by '#')."""
    lines = events_block(log).splitlines()
    return [line.split() for line in lines if line.strip()[:1].isdigit()]


# -- the text log ------------------------------------------------------------------------


def test_each_event_row_names_the_pid_that_made_it():
    trace, child = _parent_and_child()
    log = render(trace)
    assert log.splitlines()[0].startswith("rngtrace: 3 events in 2 processes — numpy")
    titles = next(line for line in events_block(log).splitlines() if line.startswith("  #"))
    assert titles.split()[:3] == ["#", "pid", "stream"]
    rows = _event_rows(log)
    assert [(int(row[0]), int(row[1])) for row in rows] == [(e.index, e.pid) for e in trace.events]
    assert {int(row[1]) for row in rows} == {os.getpid(), child}


def test_the_pid_column_and_process_sections_appear_only_across_processes(tmp_path):
    trace, _child = _parent_and_child()
    assert "Processes (2):" in render(trace)
    for alone in (_alone(), _loaded(trace, tmp_path)):
        log = render(alone)
        assert "pid" not in log.split("\n\n")[0] and "Processes" not in log and "Findings" not in log
        assert " processes" not in log.splitlines()[0] and "in pid" not in log


def _loaded(trace: Trace, tmp_path) -> Trace:
    """``trace`` saved as a version 1 log (no processes) and loaded: it holds only the traced one."""
    data = trace.to_dict()
    data["version"] = 1
    for field in ("ppid", "processes", "pids", "origins"):
        del data[field]
    data["events"] = [row for row, raw in zip(data["events"], trace.raw) if raw[5] not in trace.pids]
    path = tmp_path / "run.json"
    path.write_text(json.dumps(data))
    return Trace.load(path)


def test_a_saved_and_loaded_log_prints_its_processes_as_the_live_trace_did(tmp_path):
    trace, _child = _parent_and_child()
    path = tmp_path / "v2.json"
    trace.save(path)
    assert render(Trace.load(path)) == render(trace)


def test_the_processes_section_says_what_each_process_was_and_how_it_started_and_ended():
    trace, child = _parent_and_child()
    lines = _section(render(trace), "Processes")
    assert lines[0] == "Processes (2):"
    assert lines[1].split() == ["pid", "role", "started", "exit", "events"]
    me = os.getpid()
    assert lines[2].split() == [str(me), "the", "traced", "process", "traced", "running", "2"]
    assert lines[3].split() == [str(child), "—", "fork", "from", str(me), "exit", "code", "3", "1"]
    assert len({line.rindex(n) + len(n) for line, n in ((lines[2], "2"), (lines[3], "1"))}) == 1  # counts aligned


def test_a_pool_workers_role_is_shown_once_in_the_processes_section():
    trace = _pool_of_two()
    log = render(trace)
    workers = [line for line in _section(log, "Processes") if "pool worker" in line]
    assert len(workers) == 2
    assert log.count("pool worker") == 2 + 2  # the section's rows, and the finding naming both


def test_findings_come_first_with_their_sentence_fix_and_events():
    trace, child = _parent_and_child()
    (finding,) = trace.findings
    log = render(trace)
    blocks = log.split("\n\n")
    at = next(i for i, block in enumerate(blocks) if block.startswith("Causes"))
    assert at == 1 and blocks[at + 1].startswith("Processes (2):") and blocks[at + 2].startswith("Events:")
    lines = blocks[at].splitlines()
    assert lines[0] == "Causes (1):" and lines[1].startswith("  ! duplicate: 2 processes drew")
    said = " ".join(" ".join(line.split()) for line in lines[1:])
    assert " ".join(finding.message.split()) in said and f"fix: {' '.join(finding.fix.split())}" in said
    assert lines[-1] == "    events " + ", ".join(f"#{i}" for i in finding.events)
    assert max(len(line) for line in lines) <= 100


def test_workers_seeded_apart_print_no_findings_section():
    trace, _child = _parent_and_child(child_seed=12345)
    log = render(trace)
    assert trace.findings == [] and "Processes (2):" in log and "Findings" not in log


def test_call_sites_group_across_processes_and_say_in_how_many_each_drew():
    trace, _child = _parent_and_child()
    lines = _section(render(trace), "Draws by call site")
    shared = [line for line in lines if "in _draw_three" in line]
    own = [line for line in lines if "in test_" in line or "in _parent_and_child" in line]
    assert len(shared) == 1 and shared[0].split()[:2] == ["2", "6"]  # one row for both processes
    assert shared[0].endswith("in 2 processes")
    assert len(own) == 1 and own[0].endswith(f"in pid {os.getpid()}")


def test_colour_marks_the_finding_and_an_exit_that_was_not_normal():
    trace, _child = _parent_and_child()
    log = render(trace, color=True)
    assert "\x1b[1;31m!\x1b[0m \x1b[1;31mduplicate\x1b[0m" in log
    assert "\x1b[33mexit code 3\x1b[0m" in log
    assert re.sub(r"\x1b\[[0-9;]*m", "", log) == render(trace)


# -- the HTML report -----------------------------------------------------------------------


def _data(page: str) -> dict:
    match = re.search(r'<script type="application/json" id="rngtrace-data">(.*?)</script>', page, re.S)
    assert match
    return json.loads(match.group(1))


def _rows(page: str, section: str) -> list[list[str]]:
    body = re.search(rf'<section class="card" id="{section}">.*?<tbody>(.*?)</tbody>', page, re.S)
    assert body, f"no table in section {section}"
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", body.group(1), re.S)
    return [
        [html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", r, re.S)]
        for r in rows
    ]


def test_the_timeline_has_a_band_of_lanes_per_process():
    trace, child = _parent_and_child(child_seed=12345)
    data = _data(render_html(trace))
    me = os.getpid()
    assert data["processes"] == [[me, f"pid {me} · the traced process"], [child, f"pid {child}"]]
    assert data["lanes"] == ["numpy", "numpy"] and data["laneProcess"] == [0, 1]
    lanes = [data["sites"][site][0] for site in data["site"]]
    assert [data["processes"][data["laneProcess"][lane]][0] for lane in lanes] == [e.pid for e in trace.events]
    single = _data(render_html(_alone()))
    assert single["laneProcess"] == [] and single["processes"] == []


def test_the_report_lists_the_processes_and_names_each_seeds_pid_and_each_sites_processes():
    trace, child = _parent_and_child(child_seed=12345)
    page = render_html(trace)
    me = str(os.getpid())
    assert _rows(page, "processes") == [
        [me, "the traced process", "traced", "running", "2"],
        [str(child), "—", f"fork from {me}", "exit code 3", "2"],
    ]
    assert f'data-pid="{child}"' in page
    (seed,) = _rows(page, "others")
    (index,) = [e.index for e in trace.events if e.kind == "seed"]
    assert seed[:3] == [str(index), str(child), "numpy"]
    sites = {row[4].split(" in ")[1]: row[5] for row in _rows(page, "sites")}
    assert sites["_draw_three"] == "in 2 processes"


def test_the_findings_panel_lights_up_each_findings_events():
    trace, _child = _parent_and_child()
    (finding,) = trace.findings
    page = render_html(trace)
    assert _data(page)["findings"] == [list(finding.events)]
    panel = re.search(r'<section class="card" id="findings">(.*?)</section>', page, re.S)
    assert panel and '<li data-finding="0">' in panel.group(1)
    text = html.unescape(re.sub(r"<[^>]+>", " ", panel.group(1)))
    assert "duplicate" in text and " ".join(finding.message.split()) in " ".join(text.split())
    assert "events " + ", ".join(f"#{i}" for i in finding.events) in text
    # The policy still names exactly the page's own style and script.
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page).group(1)
    for tag in ("style", "script"):
        (source,) = re.findall(rf"<{tag}>(.*?)</{tag}>", page, re.S)
        digest = base64.b64encode(hashlib.sha256(source.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in policy


@pytest.mark.skipif(CHROMIUM is None, reason="needs the chromium browser (Debian package chromium)")
def test_chromium_draws_every_process_lane_and_names_a_pinned_events_process(tmp_path):
    trace, child = _parent_and_child()
    page = tmp_path / "report.html"
    page.write_text(render_html(trace), encoding="utf-8")
    child_event = next(e.index for e in trace.events if e.pid == child)
    command = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--virtual-time-budget=5000",
        "--dump-dom",
        page.as_uri() + f"#event={child_event}",
    ]
    dom = subprocess.run(command, capture_output=True, text=True, timeout=60, check=True).stdout
    assert re.search(rf'<div id="chart"[^>]*data-rendered="{len(trace.events)}"', dom)
    detail = re.search(r'<aside id="detail"[^>]*>(.*?)</aside>', dom, re.S).group(1)
    assert f"<dt>process</dt><dd>pid {child}</dd>" in detail


# -- rngtrace diff ---------------------------------------------------------------------------


def test_diff_says_when_the_runs_ran_other_processes_and_lists_a_finding_only_one_has():
    duplicate, _child = _parent_and_child()
    alone = _alone()
    out = render_diff(compare(duplicate, alone))
    lines = out.splitlines()
    assert "Processes differ: A ran 2 processes (traced, fork child), B ran 1 process (traced)" in lines
    (only,) = [line for line in lines if line.startswith("Only in")]
    assert only == f"Only in A: duplicate: {duplicate.findings[0].message}"
    assert "Only in B: duplicate" in render_diff(compare(alone, duplicate))


def test_diff_of_runs_with_the_same_processes_and_findings_says_neither():
    a, _ = _parent_and_child()
    b, _ = _parent_and_child()
    apart, _ = _parent_and_child(child_seed=12345)
    out = render_diff(compare(a, b))
    assert "Processes differ" not in out and "Only in" not in out
    other = render_diff(compare(a, apart))
    assert "Processes differ" not in other and "Only in A: duplicate" in other
