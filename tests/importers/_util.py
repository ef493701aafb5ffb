"""Helpers shared by the importer tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from knowledgepulse import ReasoningTrace

DATA = Path(__file__).parents[1] / "data" / "importers"
TAU_SAMPLE = Path(__file__).parents[1] / "data" / "tau_bench_sample.json"
TAU_CORPUS = Path(__file__).parents[2] / "examples" / "tau-bench" / "gpt-4o-airline.json.gz"


def load(name: str) -> Any:
    return json.loads((DATA / name).read_text(encoding="utf-8"))


def steps(trace: ReasoningTrace) -> list[dict[str, Any]]:
    """The trace's steps as JSON data, without where each came from in the source (``origin``:
    test_origins.py checks it, format by format)."""
    data: list[dict[str, Any]] = trace.to_dict()["steps"]
    return [{key: value for key, value in step.items() if key != "origin"} for step in data]


def origins(trace: ReasoningTrace) -> list[dict[str, Any] | None]:
    """Each step's ``origin``: where it came from in the source."""
    return [(step.model_extra or {}).get("origin") for step in trace.steps]


def assert_round_trips(trace: ReasoningTrace) -> None:
    """The trace is valid and survives serialisation unchanged."""
    data = trace.to_dict()
    again = ReasoningTrace.model_validate(data)
    assert again.to_dict() == data
    assert ReasoningTrace.model_validate_json(trace.to_json()).to_dict() == data


def import_twice(fixture: Path, tmp_path: Path) -> list[bytes]:
    """``kp import --from auto`` of ``fixture`` run twice: the two outputs' bytes. Each run
    exits 0 or 1 (some fixtures hold records that are rightly refused), never 2 or worse."""
    from knowledgepulse.cli import main

    outputs = []
    for n in range(2):
        out = tmp_path / f"out{n}.jsonl"
        code = main(["import", str(fixture), "--from", "auto", "-o", str(out), "--quiet"])
        assert code in (0, 1)
        outputs.append(out.read_bytes())
    return outputs
