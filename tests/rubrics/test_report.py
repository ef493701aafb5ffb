"""Reports over many evaluations."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console, Group

from knowledgepulse.rubrics import (
    SCHEDULING_RUBRIC,
    Case,
    Criterion,
    EvaluationReport,
    OutcomeType,
    ReportBuilder,
    Rubric,
    build_report,
    evaluate_many,
    load_cases,
)
from knowledgepulse.rubrics._report import shared_prefix

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "scheduling.jsonl"


def flag(name: str):  # type: ignore[no-untyped-def]
    def check(case: Case) -> bool:
        value = case.final_state.get(name)
        if value == "boom":
            raise RuntimeError("bad data")
        return bool(value)

    check.__name__ = name
    return check


# weights: a 0.5, b 0.3, c 0.2; success gate "g"
RUBRIC = Rubric(
    "small",
    [
        Criterion("a", 0.5, flag("a")),
        Criterion("b", 0.3, flag("b")),
        Criterion("c", 0.2, flag("c")),
    ],
    success_gate=flag("g"),
)

# Hand-computed:
#   one   a b c g   -> 1.0  successful_completion
#   two   a b       -> 0.8  graceful_failure (gate fails)
#   three a         -> 0.5  graceful_failure
#   four  c         -> 0.2  partial_failure
#   (none) b=boom   -> 0.0  hard_failure, one error; named "#5"
CASES = [
    Case(final_state={"a": 1, "b": 1, "c": 1, "g": 1}, case_id="one"),
    Case(final_state={"a": 1, "b": 1}, case_id="two"),
    Case(final_state={"a": 1}, case_id="three"),
    Case(final_state={"c": 1}, case_id="four"),
    Case(final_state={"b": "boom"}),
]


def small_report() -> EvaluationReport:
    return evaluate_many(RUBRIC, CASES)


def test_hand_computed_figures() -> None:
    report = small_report()
    assert report.rubric == "small"
    assert report.count == 5
    assert report.mean_score == 0.5  # (1.0 + 0.8 + 0.5 + 0.2 + 0.0) / 5
    assert report.outcome_counts == {
        OutcomeType.SUCCESSFUL_COMPLETION: 1,
        OutcomeType.GRACEFUL_FAILURE: 2,
        OutcomeType.PARTIAL_FAILURE: 1,
        OutcomeType.HARD_FAILURE: 1,
    }
    assert report.error_count == 1
    by_name = {stats.name: stats for stats in report.criteria}
    # a: passes one two three (3/5); b: one two (2/5); c: one four (2/5)
    assert [(s.name, s.passed, s.failed, s.pass_rate) for s in report.criteria] == [
        ("b", 2, 3, 0.4),  # ties on pass rate: the heavier criterion first
        ("c", 2, 3, 0.4),
        ("a", 3, 2, 0.6),
    ]
    assert by_name["a"].failing_cases == ["four", "#5"]
    assert by_name["b"].failing_cases == ["three", "four", "#5"]
    assert by_name["c"].failing_cases == ["two", "three", "#5"]
    assert by_name["b"].errors == 1
    assert by_name["a"].errors == 0
    assert by_name["b"].weight == 0.3
    assert report.weakest is not None and report.weakest.name == "b"


def test_outcome_counts_always_list_all_four_outcomes() -> None:
    report = evaluate_many(RUBRIC, CASES[:1])
    assert report.outcome_counts == {
        OutcomeType.SUCCESSFUL_COMPLETION: 1,
        OutcomeType.GRACEFUL_FAILURE: 0,
        OutcomeType.PARTIAL_FAILURE: 0,
        OutcomeType.HARD_FAILURE: 0,
    }
    assert report.outcome_counts["hard_failure"] == 0  # type: ignore[index]  # str enum keys


def test_empty_report() -> None:
    report = build_report([])
    assert report.count == 0
    assert report.mean_score == 0.0
    assert report.criteria == []
    assert report.weakest is None
    assert set(report.outcome_counts.values()) == {0}
    assert report.rubric is None
    assert "cases" in report.render_text()


def test_json_round_trip() -> None:
    report = small_report()
    data = json.loads(report.to_json())
    assert data["count"] == 5
    assert data["mean_score"] == 0.5
    assert data["outcome_counts"] == {
        "successful_completion": 1,
        "graceful_failure": 2,
        "partial_failure": 1,
        "hard_failure": 1,
    }
    assert data["criteria"][0] == {
        "name": "b",
        "weight": 0.3,
        "passed": 2,
        "failed": 3,
        "pass_rate": 0.4,
        "errors": 1,
        "failing_cases": ["three", "four", "#5"],
    }
    assert EvaluationReport.from_json(report.to_json()) == report
    assert json.loads(report.to_json(indent=None)) == data


def test_rendering() -> None:
    report = small_report()
    assert isinstance(report.render(), Group)
    text = report.render_text(width=100)
    for expected in (
        "Rubric 'small'",
        "mean score",
        "0.50",
        "graceful_failure",
        "2",
        "Criteria, weakest first",
        "40% (2/5)",
        "three, four, #5",
    ):
        assert expected in text
    assert text.index("│ b ") < text.index("│ a ")
    console = Console(width=100, color_system=None)
    with console.capture() as captured:
        console.print(report)  # __rich__
    assert captured.get() == text


def test_long_failing_lists_are_shortened() -> None:
    rubric = Rubric("one", [Criterion("a", 1.0, flag("a"))])
    report = evaluate_many(rubric, (Case(case_id=f"c{i}") for i in range(8)))
    assert report.criteria[0].failing_cases == [f"c{i}" for i in range(8)]
    assert "c0, c1, c2, c3, c4, … (+3)" in report.render_text(width=120)


def test_streams_a_generator_once() -> None:
    produced: list[int] = []

    def cases() -> Iterator[Case]:
        for i in range(100):
            produced.append(i)
            yield Case(final_state={"a": i % 2 == 0}, case_id=str(i))

    report = evaluate_many(RUBRIC, cases())
    assert produced == list(range(100))
    assert report.count == 100
    assert report.mean_score == 0.25
    assert {s.name: s.pass_rate for s in report.criteria}["a"] == 0.5


def test_evaluate_many_accepts_json_like_cases() -> None:
    report = evaluate_many(RUBRIC, [{"id": "x", "final_state": {"a": True}}])
    assert report.criteria[-1].name == "a"
    assert report.criteria[0].failing_cases == ["x"]


def test_builder_and_mixed_rubrics() -> None:
    other = Rubric("other", [Criterion("z", 1.0, flag("z"))])
    builder = ReportBuilder()
    builder.add(RUBRIC.evaluate(CASES[0]))
    builder.add(other.evaluate(Case(case_id="zz")))
    report = builder.build()
    assert report.rubric is None
    assert report.count == 2
    assert {s.name for s in report.criteria} == {"a", "b", "c", "z"}
    assert report.mean_score == 0.5


def test_gate_errors_are_counted() -> None:
    def gate(case: Case) -> bool:
        raise KeyError("x")

    rubric = Rubric("g", [Criterion("a", 1.0, flag("a"))], success_gate=gate)
    report = evaluate_many(rubric, [Case(final_state={"a": True})])
    assert report.error_count == 1
    assert report.outcome_counts[OutcomeType.GRACEFUL_FAILURE] == 1


def test_mean_score_has_no_float_noise() -> None:
    rubric = Rubric("tenths", [Criterion(f"c{i}", 0.1, flag(f"c{i}")) for i in range(10)])
    report = evaluate_many(rubric, [Case(final_state={"c0": 1})] * 3)
    assert report.mean_score == 0.1


def test_example_data_set_report() -> None:
    report = evaluate_many(SCHEDULING_RUBRIC, load_cases(EXAMPLES))
    assert report.rubric == "scheduling"
    assert report.count == 28
    # Scores sum to 8.55 (successes) + 2.9 (graceful) + 3.3 (partial) = 14.75.
    assert report.mean_score == round(14.75 / 28, 12)
    assert report.outcome_counts == {
        OutcomeType.SUCCESSFUL_COMPLETION: 10,
        OutcomeType.GRACEFUL_FAILURE: 5,
        OutcomeType.PARTIAL_FAILURE: 10,
        OutcomeType.HARD_FAILURE: 3,
    }
    assert report.error_count == 0
    assert [(s.name, s.passed, s.failed) for s in report.criteria] == [
        ("correct_time", 11, 17),
        ("correct_duration", 13, 15),
        ("correct_participants", 14, 14),
        ("clear_explanation", 17, 11),
        ("explored_alternatives", 19, 9),
    ]
    by_name = {s.name: s for s in report.criteria}
    assert by_name["correct_participants"].pass_rate == 0.5
    assert by_name["explored_alternatives"].failing_cases == [
        "sched-008",
        "sched-009",
        "sched-010",
        "sched-021",
        "sched-023",
        "sched-024",
        "sched-025",
        "sched-026",
        "sched-027",
    ]
    assert by_name["clear_explanation"].failing_cases == [
        "sched-005",
        "sched-010",
        "sched-012",
        "sched-014",
        "sched-020",
        "sched-022",
        "sched-023",
        "sched-024",
        "sched-025",
        "sched-026",
        "sched-027",
    ]


def test_failing_cases_are_listed_below_without_the_prefix_their_ids_share() -> None:
    rubric = Rubric("one", [Criterion("a", 1.0, flag("a"))])
    ids = [f"kp:trace:openai:tau-bench:task-{i}:trial-0" for i in range(3)]
    report = evaluate_many(rubric, (Case(case_id=case_id) for case_id in ids))
    text = report.render_text(width=80)
    assert "Failing cases (ids after kp:trace:openai:tau-bench:)" in text
    assert "│ a         │ task-0:trial-0, task-1:trial-0, task-2:trial-0" in text
    assert max(len(line) for line in text.splitlines()) <= 80


@pytest.mark.parametrize(
    ("case_ids", "prefix"),
    [
        (["kp:trace:a:x-1", "kp:trace:a:x-2"], "kp:trace:a:"),  # never cut mid-word
        (["runs/a.json", "runs/b.json"], "runs/"),
        (["kp:trace:a", "kp:trace:a"], ""),  # one distinct id: nothing to tell apart
        (["kp:trace:", "kp:trace:x"], ""),  # would leave an id empty
        (["one", "two"], ""),
        ([], ""),
    ],
)
def test_shared_prefix(case_ids: list[str], prefix: str) -> None:
    assert shared_prefix(case_ids) == prefix
