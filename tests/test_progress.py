"""The progress bars on a terminal: the phase, what is done, and where the total is known, the
total and the time left; ``kp curate`` names what it does while reading."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

from rich.console import Console

from knowledgepulse.runs._progress import progress_display

ROOT = Path(__file__).resolve().parents[1]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
#: The spinner's frame and the time taken depend on when the line is drawn.
SPINNER = re.compile(r"[\u2800-\u28ff]")
ELAPSED = re.compile(r"\b\d+:\d\d:\d\d\b")


def shown(total: float | None, completed: int, phase: str = "embedding") -> str:
    """One line of the bar, as a terminal 100 columns wide shows it (no colours)."""
    console = Console(file=io.StringIO(), force_terminal=True, color_system=None, width=100)
    progress = progress_display(console, True, "reading")
    task = progress.add_task(phase, total=total, rate="812 records/s")
    progress.update(task, completed=completed)
    console.print(progress.get_renderable())
    text = ANSI.sub("", console.file.getvalue())  # type: ignore[attr-defined]
    text = ELAPSED.sub("H:MM:SS", SPINNER.sub("", text))
    return " ".join(text.replace("━", "").replace("╸", "").split())


def test_a_known_total_shows_the_total_and_the_time_left() -> None:
    # No rate measured yet: rich shows the time left as -:--:-- until it has one.
    assert shown(5000, 1200) == "embedding 1,200/5,000 812 records/s H:MM:SS left -:--:--"


def test_an_unknown_total_shows_the_count_alone() -> None:
    assert shown(None, 1200, "reading") == "reading 1,200 812 records/s H:MM:SS"


def test_kp_curate_says_hashing_while_it_hashes(tmp_path: Path) -> None:
    environment = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "src"),
        "FORCE_COLOR": "1",  # a terminal to rich: the bar is drawn
        "KNOWLEDGEPULSE_EMBEDDER": "none",
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "knowledgepulse",
            "curate",
            str(ROOT / "examples" / "traces.jsonl"),
            "--by",
            "copies",
            "-o",
            str(tmp_path / "kept.jsonl"),
            "--groups",
            str(tmp_path / "groups.jsonl"),
        ],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
        check=True,
    )
    bars = ANSI.sub("", done.stderr)
    assert " hashing " in bars and " reading " not in bars
    assert "grouping copies" in bars and "30/30" in bars
