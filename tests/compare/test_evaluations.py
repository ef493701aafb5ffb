"""compare_evaluations: pass rates, flips, outcome changes, the paired t interval, refusals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from knowledgepulse.compare import (
    ComparisonError,
    CriterionChange,
    EvaluationComparison,
    OutcomeChange,
    compare_evaluations,
    load_results,
    paired_t_interval,
    results_kind,
)
from knowledgepulse.compare._evaluations import t_quantile_975
from knowledgepulse.records import EvalRecord, ScoreRecord, parse_output_record

WEIGHTS = {"x": 0.5, "y": 0.5}


def line(
    case_id: str,
    score: float,
    x: bool | None,
    y: bool | None,
    outcome: str | None,
    *,
    rubric: str = "agent",
    task: str | None = None,
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "schema": "knowledgepulse.eval/1",
        "rubric": rubric,
        "case_id": case_id,
        "score": score,
        "details": {"x": x, "y": y},
        "weights": WEIGHTS,
        "outcome_type": outcome,
        "explanation": "",
    }
    if task is not None:
        data["group"] = {"metadata.kp_import.task": task}
    return data


def records(*lines: dict[str, Any]) -> list[EvalRecord]:
    return [EvalRecord.model_validate(data) for data in lines]


BEFORE = records(
    line("c1", 1.0, True, True, "successful_completion"),
    line("c2", 0.5, True, False, "graceful_failure"),
    line("c3", 0.0, False, False, "hard_failure"),
    line("c4", 1.0, True, True, "successful_completion"),
)
AFTER = records(
    line("c1", 0.5, True, False, "graceful_failure"),
    line("c2", 1.0, True, True, "successful_completion"),
    line("c3", 0.5, False, True, "graceful_failure"),
    line("c5", 0.0, False, False, "hard_failure"),
)


def test_pass_rates_flips_outcomes_and_the_interval() -> None:
    c = compare_evaluations(BEFORE, AFTER)
    assert (c.paired, c.only_a, c.only_b, c.rubric) == (3, ["c4"], ["c5"], "agent")
    assert c.criteria == [
        CriterionChange(
            name="x",
            pass_rate_a=round(2 / 3, 12),
            pass_rate_b=round(2 / 3, 12),
            compared=3,
            determined_a=3,
            determined_b=3,
            passed_to_failed=[],
            failed_to_passed=[],
            dropped=False,
        ),
        CriterionChange(
            name="y",
            pass_rate_a=round(1 / 3, 12),
            pass_rate_b=round(2 / 3, 12),
            compared=3,
            determined_a=3,
            determined_b=3,
            passed_to_failed=["c1"],
            failed_to_passed=["c2", "c3"],
            dropped=False,
        ),
    ]
    assert c.outcome_changes == [
        OutcomeChange(
            before="graceful_failure", after="successful_completion", count=1, cases=["c2"]
        ),
        OutcomeChange(before="hard_failure", after="graceful_failure", count=1, cases=["c3"]),
        OutcomeChange(
            before="successful_completion", after="graceful_failure", count=1, cases=["c1"]
        ),
    ]
    assert (c.cases_regressed, c.cases_improved) == (["c1"], ["c2"])
    assert c.score is not None
    # deltas -0.5, +0.5, +0.5: mean 1/6, sd 1/sqrt(3), se 1/3, t(0.975, 2) = 4.302653
    assert c.score.mean_delta == pytest.approx(1 / 6, abs=1e-12)
    assert c.score.low == pytest.approx(1 / 6 - 4.302653 / 3, abs=1e-12)
    assert c.score.high == pytest.approx(1 / 6 + 4.302653 / 3, abs=1e-12)
    assert (c.score.mean_a, c.score.mean_b, c.score.method) == (0.5, round(2 / 3, 12), "paired t")
    assert c.regressions == ["1 case(s) flipped pass -> fail: c1"]
    assert c.regressed
    assert (c.a.cases, c.a.mean_score, c.a.pass_rate) == (4, 0.625, 0.5)
    again = EvaluationComparison.model_validate_json(c.model_dump_json(by_alias=True))
    assert again == c
    text = c.render()
    assert max(len(row) for row in text.splitlines()) <= 80
    assert "criterion  before   after  pass>fail  fail>pass" in text
    assert "y           33.3%   66.7%          1          2" in text
    assert "regression: 1 case(s) flipped pass -> fail: c1" in text


def test_a_dropped_pass_rate_is_a_regression() -> None:
    c = compare_evaluations(AFTER[:3], BEFORE[:3])
    assert [k.name for k in c.criteria if k.dropped] == ["y"]
    assert (
        c.regressions[0] == "criterion y: pass rate 66.7% -> 33.3% (2 case(s) flipped pass -> fail)"
    )


def test_a_case_turning_undetermined_moves_no_pass_rate() -> None:
    a = records(
        line("c1", 1.0, True, True, "successful_completion"),
        line("c2", 1.0, True, True, "successful_completion"),
    )
    b = records(
        line("c1", 1.0, True, None, "successful_completion"),
        line("c2", 1.0, True, True, "successful_completion"),
    )
    c = compare_evaluations(a, b)
    y = c.criteria[1]
    assert (y.pass_rate_a, y.pass_rate_b, y.compared, y.determined_a, y.determined_b) == (
        1.0,
        1.0,
        1,
        2,
        1,
    )
    assert not c.regressed


def test_no_change_is_no_regression() -> None:
    c = compare_evaluations(BEFORE, BEFORE)
    assert not c.regressed and c.regressions == [] and c.outcome_changes == []
    assert c.score is not None and (c.score.low, c.score.high) == (0.0, 0.0)
    assert "No regression." in c.render()


def test_different_rubrics_are_refused_naming_both() -> None:
    other = records(line("c1", 1.0, True, True, "successful_completion", rubric="scheduling"))
    with pytest.raises(ComparisonError) as caught:
        compare_evaluations(BEFORE, other, names=("main.jsonl", "branch.jsonl"))
    assert str(caught.value) == (
        "main.jsonl was graded with rubric 'agent' and branch.jsonl with rubric 'scheduling': "
        "results of different rubrics are not compared"
    )


def test_other_refusals() -> None:
    score = ScoreRecord.model_validate(
        {
            "id": "c1",
            "score": 0.5,
            "complexity": 0.5,
            "novelty": 0.5,
            "tool_diversity": 0.5,
            "outcome": 0.5,
            "profile": "default",
            "weights": {
                "complexity": 0.25,
                "novelty": 0.25,
                "tool_diversity": 0.25,
                "outcome": 0.25,
            },
            "novelty_source": "no_embedder",
            "domain": "d",
            "success": True,
        }
    )
    with pytest.raises(ComparisonError, match="A holds kp eval results and B kp score results"):
        compare_evaluations(BEFORE, [score])
    with pytest.raises(ComparisonError, match="B holds no result to compare"):
        compare_evaluations(BEFORE, [])
    with pytest.raises(ComparisonError, match="case 'c1' appears twice in A"):
        compare_evaluations([*BEFORE, BEFORE[0]], AFTER)
    with pytest.raises(ComparisonError, match="the line names no task"):
        compare_evaluations(BEFORE, AFTER, by="task")
    with pytest.raises(ComparisonError, match="by: expected 'id' or 'task'"):
        compare_evaluations(BEFORE, AFTER, by="nope")  # type: ignore[arg-type]


def test_by_task_pairs_the_kth_attempt_with_the_kth() -> None:
    a = records(
        line("t1", 1.0, True, True, "successful_completion", task="7"),
        line("t2", 0.0, False, False, "hard_failure", task="7"),
    )
    b = records(
        line("u1", 0.5, True, False, "graceful_failure", task="7"),
        line("u2", 0.0, False, False, "hard_failure", task="7"),
        line("u3", 0.0, False, False, "hard_failure", task="7"),
    )
    c = compare_evaluations(a, b, by="task")
    assert (c.paired, c.only_b, c.cases_regressed) == (2, ["7#2"], ["7#0"])


def test_score_lines_compare_by_their_passed_flag() -> None:
    def score_line(trace_id: str, value: float) -> dict[str, Any]:
        return {
            "schema": "knowledgepulse.score/1",
            "id": trace_id,
            "score": value,
            "complexity": 0.5,
            "novelty": 0.5,
            "tool_diversity": 0.5,
            "outcome": 0.5,
            "profile": "default",
            "weights": {
                "complexity": 0.25,
                "novelty": 0.25,
                "tool_diversity": 0.25,
                "outcome": 0.25,
            },
            "novelty_source": "no_embedder",
            "domain": "d",
            "success": True,
            "threshold": 0.6,
            "passed": value >= 0.6,
        }

    a = [parse_output_record(score_line("t1", 0.7)), parse_output_record(score_line("t2", 0.2))]
    b = [parse_output_record(score_line("t1", 0.5)), parse_output_record(score_line("t2", 0.4))]
    c = compare_evaluations(a, b)
    assert (c.record_kind, c.rubric, c.criteria, c.outcome_changes) == ("score", None, [], [])
    assert c.cases_regressed == ["t1"]
    assert c.score is not None and c.score.mean_delta == pytest.approx(0.0, abs=1e-12)


def test_t_quantiles() -> None:
    assert t_quantile_975(1) == 12.706205
    assert t_quantile_975(30) == 2.042272
    assert t_quantile_975(40) == pytest.approx(2.021075390306273, abs=1e-8)
    assert t_quantile_975(10_000) == pytest.approx(1.9602012, abs=1e-7)
    assert paired_t_interval([0.25]) == (0.25, 0.25, 0.25)
    with pytest.raises(ValueError):
        paired_t_interval([])


def test_files_are_recognised_and_read(tmp_path: Path) -> None:
    path = tmp_path / "evals.jsonl"
    path.write_text(
        "".join(
            json.dumps(data) + "\n"
            for data in [line("c1", 1.0, True, True, "successful_completion")]
        )
    )
    assert results_kind(str(path)) == "eval"
    assert load_results(str(path)).kind == "eval"
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(line("c1", 1.0, True, True, "successful_completion")) + "\n[1]\n")
    with pytest.raises(ComparisonError, match=r"bad.jsonl:2: not a kp eval or kp score line"):
        load_results(str(bad))
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert results_kind(str(empty)) is None
    with pytest.raises(ComparisonError, match="no kp eval or kp score line"):
        load_results(str(empty))


def test_a_diagnostic_that_drops_is_reported_not_a_regression() -> None:
    """A weight-0 criterion (a diagnostic such as no_failed_calls) moves no score: its drop is
    shown among the criteria, and does not make B a regression."""

    def with_diagnostic(case_id: str, z: bool) -> EvalRecord:
        data = line(case_id, 1.0, True, True, "successful_completion")
        data["details"]["z"] = z
        data["weights"] = {**WEIGHTS, "z": 0.0}
        return EvalRecord.model_validate(data)

    c = compare_evaluations([with_diagnostic("c1", True)], [with_diagnostic("c1", False)])
    z = next(change for change in c.criteria if change.name == "z")
    assert (z.pass_rate_a, z.pass_rate_b, z.dropped, z.passed_to_failed) == (1.0, 0.0, True, ["c1"])
    assert not c.regressed and c.regressions == []
