"""Fixtures from real sources, one folder per format (``tests/data/importers/<format>/``).

Each folder holds a ``SOURCE.md`` (origin and licence of every file), its fixtures and their
golden results in ``expected/``. For every fixture: the golden result, auto-detection picks the
folder's format only, importing twice gives identical bytes, and ``kp score`` exits 0 or 1.
After a deliberate change to an importer, regenerate and review the diff:

    KP_UPDATE_GOLDEN=1 PYTHONPATH=src python -m pytest tests/importers/test_fixture_folders.py
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from knowledgepulse.cli import main
from knowledgepulse.importers import read_traces, read_traces_from_paths
from knowledgepulse.io._reader import iter_records

from ._util import DATA, import_twice

UPDATE = os.environ.get("KP_UPDATE_GOLDEN") == "1"
NOW = "<now>"
# The folders of the formats read from JSON and JSONL, named after their format; the agent
# harnesses' folders (claude_code, codex, inspect, ...) are checked by test_harness_formats.py.
FOLDERS = sorted(
    DATA / name
    for name in ("atif", "langfuse", "langsmith_batch", "openai", "openai-responses", "otel")
)
# A folder whose name is not its format's (a Python-style name for a hyphenated format).
FOLDER_FORMATS = {"langsmith_batch": "langsmith-batch"}
FIXTURES = sorted(
    p
    for folder in FOLDERS
    for p in folder.iterdir()
    if p.is_file() and p.name != "SOURCE.md" and p.suffix in (".json", ".jsonl")
)


def _id(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


def _outcome(path: Path) -> list[dict[str, Any]]:
    units = []
    for unit in read_traces(iter_records([str(path)]), "auto"):
        traces = [trace.to_dict() for trace in unit.traces]
        for trace in traces:
            metadata = trace["metadata"]
            if "created_at" in metadata["kp_import"].get("defaulted", []):
                metadata["created_at"] = NOW
        entry: dict[str, Any] = {
            "records": [[r.line, r.index] for r in unit.records],
            "counted": unit.counted,
            "format": unit.format,
            "problems": unit.problems,
            "traces": traces,
        }
        if unit.not_runs:
            entry["not_runs"] = list(unit.not_runs)
        units.append(entry)
    return units


def test_every_folder_has_fixtures() -> None:
    assert {p.parent.name for p in FIXTURES} == {f.name for f in FOLDERS}
    assert {"atif", "langfuse", "openai", "openai-responses", "otel"} <= {f.name for f in FOLDERS}


@pytest.mark.parametrize("fixture", FIXTURES, ids=_id)
def test_fixture_matches_its_golden_file(fixture: Path) -> None:
    expected = fixture.parent / "expected" / fixture.name.replace(".jsonl", ".json")
    outcome = _outcome(fixture)
    if UPDATE:
        expected.parent.mkdir(exist_ok=True)
        text = json.dumps(outcome, indent=2, ensure_ascii=False) + "\n"
        expected.write_text(text, encoding="utf-8")
    assert expected.exists(), "no golden file; run with KP_UPDATE_GOLDEN=1 to write it"
    assert outcome == json.loads(expected.read_text(encoding="utf-8"))


@pytest.mark.parametrize("fixture", FIXTURES, ids=_id)
def test_auto_detection_picks_the_folders_format_only(fixture: Path) -> None:
    formats = {unit.format for unit in read_traces_from_paths([str(fixture)], "auto")}
    folder = fixture.parent.name
    assert formats == {FOLDER_FORMATS.get(folder, folder)}


@pytest.mark.parametrize("fixture", FIXTURES, ids=_id)
def test_importing_twice_gives_identical_bytes(
    fixture: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outputs = import_twice(fixture, tmp_path)
    capsys.readouterr()
    assert outputs[0] == outputs[1]
    assert outputs[0]  # every fixture holds at least one trace


@pytest.mark.parametrize("fixture", FIXTURES, ids=_id)
def test_kp_score_exits_0_or_1(fixture: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["score", str(fixture), "--from", "auto"])
    _out, err = capsys.readouterr()
    assert code in (0, 1), err
    assert "Traceback" not in err
