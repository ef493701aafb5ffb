"""The Python blocks of docs/rubrics.md's rubric-writing sections and the custom-rubric example run as
written, and the decorator example prints what the page shows."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "rubrics.md"
TEXT = DOC.read_text(encoding="utf-8")
FIRST = TEXT.split("\n## A first rubric\n", 1)[1].split("\n## ", 1)[0]
MORE = TEXT.split("\n## More rubrics in Python\n", 1)[1].split("\n## ", 1)[0]
BLOCKS = re.findall(r"^```python\n(.*?)^```", FIRST + MORE, re.M | re.S)


def test_the_doc_has_code_blocks() -> None:
    assert len(BLOCKS) >= 5


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_doc_block_runs(
    index: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(ROOT)
    code = compile(BLOCKS[index], f"{DOC.name}[block {index}]", "exec")
    exec(code, {"__name__": f"doc_block_{index}"})


def test_doc_shows_the_real_output_of_the_decorator_example(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(ROOT)
    exec(compile(BLOCKS[0], "block 0", "exec"), {"__name__": "doc_block_0"})
    printed = capsys.readouterr().out.strip()
    assert f"```text\n{printed}\n```" in DOC.read_text(encoding="utf-8")


def test_custom_rubric_example_runs() -> None:
    completed = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "rubrics" / "custom_rubric.py")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert "refunds / ticket-1: Score 1.00 (successful_completion)" in completed.stdout
    assert "trace_quality" in completed.stdout
