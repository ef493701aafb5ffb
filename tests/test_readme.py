"""The README's quick start runs as written and prints what it says."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_quick_start_runs(capsys: pytest.CaptureFixture[str]) -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Quick start (Python)", 1)[1].split("\n## ", 1)[0]
    block = re.findall(r"^```python\n(.*?)^```", section, re.M | re.S)[0]
    exec(compile(block, "README quick start", "exec"), {"__name__": "readme"})
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "0.66875"
    assert printed[1].startswith("value 0.66875 with profile 'default'")


def test_rubric_quick_start_prints_what_it_says(capsys: pytest.CaptureFixture[str]) -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Quick start (Python)", 1)[1].split("\n## ", 1)[0]
    scoring, grading = re.findall(r"^```python\n(.*?)^```", section, re.M | re.S)
    namespace = {"__name__": "readme"}
    exec(compile(scoring + grading, "README quick start", "exec"), namespace)
    printed = capsys.readouterr().out.splitlines()
    shown = grading.rsplit("\n# ", 1)[1].strip()
    assert printed[-1] == shown
