"""Golden files: what each fixture under tests/data/importers converts to, unit by unit.

Each fixture ``X`` has its expectation in ``tests/data/importers/expected/X.json``. After a
deliberate change to an importer, regenerate them and review the diff:

    KP_UPDATE_GOLDEN=1 PYTHONPATH=src python -m pytest tests/importers/test_golden.py
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from knowledgepulse.importers import read_traces
from knowledgepulse.io._reader import iter_records

from ._util import DATA

EXPECTED = DATA / "expected"
FIXTURES = sorted(
    p for p in [*DATA.glob("*.json"), *(DATA / "units").glob("*.json*")] if p.is_file()
)
UPDATE = os.environ.get("KP_UPDATE_GOLDEN") == "1"
# The clock's time, where a trace has no time of its own (``created_at`` is defaulted).
NOW = "<now>"


def _outcome(path: Path) -> list[dict[str, Any]]:
    units = []
    for unit in read_traces(iter_records([str(path)]), "auto"):
        traces = [trace.to_dict() for trace in unit.traces]
        for trace in traces:
            metadata = trace["metadata"]
            if "created_at" in metadata["kp_import"].get("defaulted", []):
                metadata["created_at"] = NOW
        units.append(
            {
                "records": [[r.line, r.index] for r in unit.records],
                "format": unit.format,
                "problems": unit.problems,
                "traces": traces,
            }
        )
    return units


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.name)
def test_fixture_matches_its_golden_file(fixture: Path) -> None:
    expected_file = EXPECTED / fixture.name.replace(".jsonl", ".json")
    outcome = _outcome(fixture)
    if UPDATE:
        EXPECTED.mkdir(exist_ok=True)
        text = json.dumps(outcome, indent=2, ensure_ascii=False) + "\n"
        expected_file.write_text(text, encoding="utf-8")
    assert expected_file.exists(), "no golden file; run with KP_UPDATE_GOLDEN=1 to write it"
    assert outcome == json.loads(expected_file.read_text(encoding="utf-8"))


def test_every_golden_file_has_its_fixture() -> None:
    names = {p.name.replace(".jsonl", ".json") for p in FIXTURES}
    assert {p.name for p in EXPECTED.glob("*.json")} <= names
