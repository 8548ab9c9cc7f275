"""The README's second example: the log printed for examples/train.py is the one the program prints."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("sklearn")

ROOT = Path(__file__).resolve().parent.parent


def readme_block(first_line: str) -> str:
    """The README's code block that starts with ``first_line``, up to its closing fence."""
    text = (ROOT / "README.md").read_text()
    start = text.index(first_line)
    return text[start : text.index("```", start)].rstrip("\n")


def test_the_readme_shows_the_log_train_py_prints():
    done = subprocess.run(
        [sys.executable, "train.py"], cwd=ROOT / "examples", capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    printed = (done.stdout + done.stderr).strip("\n")
    shown = readme_block("rngtrace: 10 events — numpy: 1 draw · torch: 9 draws")
    assert printed.startswith(shown), f"README.md's train.py log differs from what it prints:\n{printed}"
