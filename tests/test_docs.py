"""The documentation's relative links resolve, and the README stays a short first read.

Checks README.md and every docs/*.md: each relative link names an existing file, and each anchor
(``page.md#heading``, ``#heading``) names a heading of that page by GitHub's rule (lowercase, punctuation
dropped, spaces to '-', a repeated heading numbered -1, -2, ...). Links inside code are not links.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE_SPAN = re.compile(r"(`+).*?\1")
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def _prose_lines(text: str) -> list[tuple[int, str]]:
    """The lines outside fenced code blocks, numbered from 1."""
    out, fence = [], None
    for number, line in enumerate(text.split("\n"), 1):
        match = _FENCE.match(line)
        if match:
            if fence is None:
                fence = match.group(1)
            elif match.group(1) == fence:
                fence = None
            continue
        if fence is None:
            out.append((number, line))
    return out


def _slug(heading: str) -> str:
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading keeps its text
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)  # punctuation dropped (backticks, colons, commas, dots...)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for _, line in _prose_lines(path.read_text(encoding="utf-8")):
        match = _HEADING.match(line)
        if not match:
            continue
        slug = _slug(match.group(2))
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def links(path: Path) -> list[tuple[int, str]]:
    out = []
    for number, line in _prose_lines(path.read_text(encoding="utf-8")):
        for match in _LINK.finditer(_CODE_SPAN.sub("", line)):
            out.append((number, match.group(1)))
    return out


def test_the_slug_rule():
    assert _slug("Ranks of a distributed job: `rngtrace ranks`") == "ranks-of-a-distributed-job-rngtrace-ranks"
    assert _slug("In a test suite: `pytest --rng-trace`") == "in-a-test-suite-pytest---rng-trace"
    assert _slug("How it works, and its limits") == "how-it-works-and-its-limits"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_and_anchors_resolve(page):
    broken = []
    for number, target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # https:, mailto: ...
            continue
        file_part, _, anchor = target.partition("#")
        dest = (page.parent / file_part).resolve() if file_part else page
        where = f"{page.relative_to(ROOT)}:{number}: {target}"
        if not dest.exists():
            broken.append(f"{where} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{where} (no heading #{anchor} in {dest.relative_to(ROOT)})")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_every_docs_page_is_linked_from_the_readme():
    linked = {(README.parent / t.partition("#")[0]).resolve() for _, t in links(README) if t.partition("#")[0]}
    unlinked = [p.name for p in PAGES[1:] if p.resolve() not in linked]
    assert not unlinked, f"docs pages the README does not link: {unlinked}"


def test_the_readme_is_a_short_first_read():
    lines = README.read_text(encoding="utf-8").split("\n")
    assert len(lines) < 300, f"README.md has {len(lines)} lines: move reference text into docs/"


_COMMANDISH = re.compile(r"^\s*(\$ |make |pip |python|rngtrace |pytest|%|with |import |from |@)")


def test_make_demo_and_make_test_come_before_anything_command_like():
    text = README.read_text(encoding="utf-8")
    lines = text.split("\n")
    first_fence = next(i for i, line in enumerate(lines) if _FENCE.match(line))
    for line in lines[:first_fence]:
        for span in re.findall(r"`([^`]+)`", line):
            assert not _COMMANDISH.match(span), f"a command-like `{span}` comes before make demo / make test"
    end = next(i for i in range(first_fence + 1, len(lines)) if _FENCE.match(lines[i]))
    block = [line.split("#")[0].strip() for line in lines[first_fence + 1 : end]]
    assert [line for line in block if line][:2] == ["make demo", "make test"]
