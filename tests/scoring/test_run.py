"""The score run as a library: one scored unit, one accepted trace, one rejection entry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from _helpers import make_trace
from knowledgepulse import parse_trace
from knowledgepulse.distributed._scoring import RayScorer
from knowledgepulse.importers import Conversion, ImportOptions, read_traces
from knowledgepulse.io._reader import InputRecord, iter_records
from knowledgepulse.io._writers import dumps
from knowledgepulse.records import ScoreRecord
from knowledgepulse.scoring import (
    ScoredUnit,
    Scorer,
    ScoringEngine,
    accepted_trace,
    check_scoring_engine,
    iter_scored_units,
    rejection_entry,
    remember_for,
    score_unit,
    scored_trace,
)

# make_trace(): complexity 0.425×0.25 + novelty 0.5×0.35 (no embedder) + tool diversity
# 1.0×0.15 + outcome 0.95×0.25 under the default profile (code-review has none of its own).
GOOD = 0.66875
# The same trace in finance, failed at confidence 0.4: 0.425×0.2 + 0.5×0.25 + 1.0×0.1 + 0.12×0.45.
FAILED_FINANCE = 0.364


def test_scorer_and_the_ray_scorer_are_scoring_engines() -> None:
    local: ScoringEngine = Scorer(embedder=None)  # checked by mypy too
    ray: ScoringEngine = RayScorer(None)
    assert isinstance(local, ScoringEngine) and isinstance(ray, ScoringEngine)
    assert check_scoring_engine(local) is local and check_scoring_engine(ray) is ray


def test_something_else_is_refused_once_where_it_is_chosen() -> None:
    with pytest.raises(TypeError) as raised:
        check_scoring_engine(object())
    assert str(raised.value) == (
        "object is not a scoring engine: it needs score_many, iter_scores, profiles, "
        "batch_size and threshold"
    )


@pytest.mark.parametrize(
    ("add", "threshold", "remembered"),
    [(None, None, "all"), (None, 0.6, "accepted"), ("all", 0.6, "all"), ("none", None, "none")],
)
def test_what_a_knowledge_base_remembers_by_default(
    add: str | None, threshold: float | None, remembered: str
) -> None:
    assert remember_for(add, threshold) == remembered  # type: ignore[arg-type]


def test_an_accepted_trace_is_the_trace_with_its_quality_score() -> None:
    trace = parse_trace(make_trace(trace_id="kp:trace:a"))
    score = Scorer(embedder=None).score(trace)
    stamped = accepted_trace(trace, score)
    assert trace.metadata.quality_score == 0.0  # the trace itself is untouched
    expected = trace.to_dict()
    assert expected["metadata"]["quality_score"] == 0.0  # the example's: left as it was
    expected["metadata"]["quality_score"] = GOOD
    assert stamped == expected


def test_a_rejection_entry_keeps_the_raw_text_of_a_record_that_was_not_json() -> None:
    broken = InputRecord("in.jsonl", 3, error="invalid JSON", raw="{broken", index=2)
    assert rejection_entry(broken, ["invalid JSON"]) == {
        "source": "in.jsonl",
        "line": 3,
        "index": 2,
        "errors": ["invalid JSON"],
        "record": "{broken",
    }
    parsed = InputRecord("in.jsonl", 4, data={"id": 3})
    assert rejection_entry(parsed, ("id: not a string",)) == {
        "source": "in.jsonl",
        "line": 4,
        "errors": ["id: not a string"],
        "record": {"id": 3},
    }


def _units(tmp_path: Path, lines: list[str], name: str = "in.jsonl") -> list[Conversion]:
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in lines))
    return list(read_traces(iter_records([str(path)]), "trace", ImportOptions()))


def test_a_unit_scored_gives_its_lines_and_accepted_traces(tmp_path: Path) -> None:
    good = make_trace(trace_id="kp:trace:a")
    failed = make_trace(trace_id="kp:trace:b", domain="finance", success=False, confidence=0.4)
    units = _units(tmp_path, [json.dumps([good, failed])], "in.json")  # a list of two
    assert len(units) == 2 and units[0].records[0].index == 0
    unit = score_unit(Scorer(embedder=None), units[0], threshold=0.6, accepted_lines=True)
    (scored,) = unit.traces
    assert (scored.value, scored.domain, scored.passed) == (GOOD, "code-review", True)
    line = json.loads(scored.line)
    assert (line["id"], line["score"], line["passed"], line["threshold"]) == (
        "kp:trace:a",
        GOOD,
        True,
        0.6,
    )
    assert (line["line"], line["index"]) == (1, 0)
    assert scored.accepted == dumps(accepted_trace(units[0].traces[0], scored.score))  # type: ignore[arg-type]
    assert json.loads(scored.accepted)["metadata"]["quality_score"] == GOOD
    below = score_unit(Scorer(embedder=None), units[1], threshold=0.6, accepted_lines=True)
    assert (below.traces[0].value, below.traces[0].passed, below.traces[0].accepted) == (
        FAILED_FINANCE,
        False,
        None,
    )


def test_a_score_line_is_the_score_record_of_the_trace(tmp_path: Path) -> None:
    (unit,) = _units(tmp_path, [json.dumps(make_trace(trace_id="kp:trace:a"))])
    trace = unit.traces[0]
    score = Scorer(embedder=None).score(trace)
    scored = scored_trace(unit, trace, score, threshold=None, keep=False)
    record = ScoreRecord.of(score, trace, source=str(tmp_path / "in.jsonl"), line=1)
    assert scored.line == record.to_json()
    assert (scored.passed, scored.accepted, scored.trace, scored.score) == (None, None, None, None)


def _unit(traces: list[str], line: int) -> Conversion:
    record = InputRecord("in.jsonl", line, data={})
    made = [parse_trace(make_trace(trace_id=f"kp:trace:{name}")) for name in traces]
    return Conversion([record], made, [], "trace")


@pytest.mark.parametrize(
    "engine", [Scorer(embedder=None, batch_size=2), RayScorer(None, batch_size=2)]
)
def test_units_come_out_whole_and_in_order_across_batches(engine: ScoringEngine) -> None:
    # Batches of two cut the three traces of the second unit; the third unit has none.
    units = [_unit(["a"], 1), _unit(["b", "c", "d"], 2), _unit([], 3), _unit(["e"], 4)]
    scored = list(iter_scored_units(engine, units, threshold=0.5))
    assert [u.records[0].line for u in scored] == [1, 2, 3, 4]
    assert [[json.loads(t.line)["id"] for t in u.traces] for u in scored] == [
        ["kp:trace:a"],
        ["kp:trace:b", "kp:trace:c", "kp:trace:d"],
        [],
        ["kp:trace:e"],
    ]
    assert [t.value for u in scored for t in u.traces] == [GOOD] * 5
    each = [score_unit(Scorer(embedder=None), unit, threshold=0.5) for unit in units]
    assert [[t.line for t in u.traces] for u in scored] == [
        [t.line for t in u.traces] for u in each
    ]
    assert all(isinstance(u, ScoredUnit) and u.counted == 1 for u in scored)
