"""Files for ``kp view``: traces, their score lines (with nearest links), an eval line, groups.

The score lines and groups are made by the library itself (a Scorer and curate with the
hashing embedder), so the viewer is tested on what kp score and kp curate really write.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from _helpers import HashingEmbedder, make_trace
from knowledgepulse import Scorer, parse_trace
from knowledgepulse.records import ScoreRecord
from knowledgepulse.scoring._curation import curate

ALPHA = "kp:trace:alpha"
ALPHA_AGAIN = "kp:trace:alpha-again"
BETA = "kp:trace:beta"
DELTA = "kp:trace:delta"
EPSILON = "kp:trace:epsilon"
XSS_OBJECTIVE = '<img src=x onerror="window.__xss=1">Check the <b>DPA</b> clauses'
CRITERIA = {"found_vulnerability": 0.5, "cited_file": 0.3, "proposed_fix": 0.2}


def trace_dicts() -> list[dict[str, Any]]:
    finance_steps: list[dict[str, Any]] = [
        {"type": "thought", "content": "Pull the quarterly revenue and margins"},
        {"type": "tool_call", "tool": {"name": "financial_data_api"}, "input": {"ticker": "TSM"}},
        {"type": "observation", "content": "Revenue up 14% year on year"},
    ]
    return [
        make_trace(trace_id=ALPHA, objective="Review PR #42 for SQL injection in the handler"),
        make_trace(
            trace_id=BETA,
            domain="finance",
            objective="Analyze TSMC Q4 earnings report",
            steps=finance_steps,
        ),
        make_trace(trace_id=ALPHA_AGAIN, objective="Review PR #42 for SQL injection in handler"),
        make_trace(
            trace_id=DELTA,
            domain="legal",
            objective=XSS_OBJECTIVE,
            steps=[{"type": "thought", "content": "Read the <script>alert(1)</script> annex"}],
        ),
        make_trace(
            trace_id=EPSILON,
            domain="finance",
            success=False,
            confidence=0.3,
            objective="Forecast cash flow for Q1",
            steps=finance_steps[:2],
        ),
    ]


def eval_line(case_id: str) -> dict[str, Any]:
    details = {"found_vulnerability": True, "cited_file": True, "proposed_fix": False}
    return {
        "schema": "knowledgepulse.eval/1",
        "rubric": "security-review",
        "case_id": case_id,
        "score": 0.8,
        "details": details,
        "weights": CRITERIA,
        "outcome_type": "successful_completion",
        "explanation": "Score 0.80. Failed: proposed_fix (0.20).",
        "errors": {},
        "source": "cases.jsonl",
        "line": 1,
    }


def write_jsonl(path: Path, records: list[Any], *, raw: tuple[str, ...] = ()) -> Path:
    path.write_text("".join([json.dumps(r) + "\n" for r in records] + [r + "\n" for r in raw]))
    return path


@dataclass(frozen=True)
class ViewFiles:
    traces: Path
    scores: Path
    evals: Path
    groups: Path

    @property
    def all(self) -> list[str]:
        return [str(self.scores), str(self.traces), str(self.evals), str(self.groups)]


@pytest.fixture
def view_files(tmp_path: Path) -> ViewFiles:
    return make_view_files(tmp_path)


def make_view_files(tmp_path: Path) -> ViewFiles:
    """The four files in ``tmp_path`` (the fixture's body, for module-scoped fixtures)."""
    traces = trace_dicts()
    traces_path = write_jsonl(tmp_path / "traces.jsonl", traces)
    scorer = Scorer(HashingEmbedder())
    scores = [
        ScoreRecord.of(score, parse_trace(trace), source=str(traces_path), line=line).to_dict()
        for line, (trace, score) in enumerate(zip(traces, scorer.score_many(traces)), start=1)
    ]
    result = curate(traces, embedder=HashingEmbedder(), similarity=0.8)
    return ViewFiles(
        traces=traces_path,
        scores=write_jsonl(tmp_path / "scores.jsonl", scores),
        evals=write_jsonl(tmp_path / "evals.jsonl", [eval_line(ALPHA)]),
        groups=write_jsonl(tmp_path / "groups.jsonl", [g.to_dict() for g in result.groups]),
    )
