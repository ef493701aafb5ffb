"""Reading cases: strict fields, traces as cases, located errors, streaming past bad records."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path
from typing import Any

import pytest

from knowledgepulse import TraceValidationError
from knowledgepulse._errors import KnowledgePulseError
from knowledgepulse.io._reader import InputRecord, iter_records
from knowledgepulse.rubrics import (
    SCHEDULING_RUBRIC,
    Case,
    CaseError,
    CaseTraceError,
    Criterion,
    Rubric,
    checks,
    iter_cases,
    load_cases,
)

from .conftest import build_trace

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "scheduling.jsonl"
FIRST_CASE: dict[str, Any] = json.loads(EXAMPLES.read_text(encoding="utf-8").splitlines()[0])


# -- unknown fields ------------------------------------------------------------------------


def test_a_misspelt_field_rejects_the_case_with_the_closest_name() -> None:
    assert SCHEDULING_RUBRIC.evaluate(FIRST_CASE).score == 1.0
    typo = {("final_sate" if key == "final_state" else key): v for key, v in FIRST_CASE.items()}
    with pytest.raises(CaseError) as error:
        SCHEDULING_RUBRIC.evaluate(typo)
    assert error.value.messages == ["final_sate: unknown field; did you mean 'final_state'?"]
    assert str(error.value) == "final_sate: unknown field; did you mean 'final_state'?"
    assert isinstance(error.value, KnowledgePulseError)
    assert isinstance(error.value, ValueError)


def test_an_unknown_field_with_no_close_name_lists_the_fields() -> None:
    with pytest.raises(CaseError) as error:
        Case.from_dict({"expected": 1, "final_state": []})
    assert error.value.messages == [
        "expected: unknown field (a case has id, case_id, final_state, ground_truth, "
        "conversation_trace, trace, metadata, note); put anything else in metadata",
        "final_state must be a JSON object, got list",
    ]
    assert str(error.value).startswith("invalid case (2 problems)\n  expected: unknown field")


def test_case_id_is_an_alias_of_id() -> None:
    assert Case.from_dict({"case_id": "c-7"}, case_id="3").case_id == "c-7"
    assert Case.from_dict({"case_id": 7, "id": "7"}).case_id == "7"
    with pytest.raises(CaseError, match=r"^case_id: differs from id \(2 vs 1\); give one of them$"):
        Case.from_dict({"id": 1, "case_id": 2})
    with pytest.raises(CaseError, match=r"^id: must be a string or a number, got list$"):
        Case.from_dict({"id": [1]})


# -- a ReasoningTrace is a case ------------------------------------------------------------


def test_a_reasoning_trace_record_is_a_case_with_that_trace() -> None:
    trace = build_trace((("tool_call", "search"),), success=True)
    case = Case.from_dict(trace.to_dict(), case_id="9")
    assert case.trace == trace
    assert case.case_id == "kp:trace:test"
    assert (case.final_state, case.ground_truth, case.conversation_trace) == ({}, {}, ())
    rubric = Rubric(
        "trace",
        [
            Criterion("searched", 0.5, checks.tool_used("search")),
            Criterion("succeeded", 0.5, checks.succeeded()),
        ],
    )
    result = rubric.evaluate(trace.to_dict())
    assert (result.score, result.errors) == (1.0, {})


def test_an_invalid_reasoning_trace_record_is_located_at_its_own_fields() -> None:
    with pytest.raises(CaseTraceError) as error:
        Case.from_dict({"@type": "ReasoningTrace", "id": "kp:trace:x"})
    assert error.value.messages[0] == "@context: required field is missing"


# -- errors located inside the case --------------------------------------------------------


def test_an_invalid_trace_inside_a_case_is_reported_at_trace() -> None:
    bad = build_trace().to_dict()
    del bad["@context"]
    bad["steps"][0]["type"] = "plan"
    with pytest.raises(CaseTraceError) as error:
        Case.from_dict({"id": "c", "trace": bad})
    assert error.value.messages == [
        "trace.@context: required field is missing",
        "trace.steps[0].type: expected one of 'thought', 'tool_call', 'observation', "
        "'error_recovery' (got 'plan')",
    ]
    assert isinstance(error.value, TraceValidationError)
    assert isinstance(error.value, CaseError)
    assert str(error.value).startswith("invalid ReasoningTrace (2 problems)\n  trace.@context")


def test_case_errors_and_default_ids_carry_the_list_index() -> None:
    records = [
        InputRecord("runs.json", 3, data={"note": "no id"}, index=1),
        InputRecord("runs.json", 4, data={"id": "b", "final_sate": {}}, index=2),
    ]
    first, second = (item.case for item in iter_cases(records))
    assert isinstance(first, Case) and first.case_id == "3[1]"
    assert isinstance(second, CaseError)
    assert (second.source, second.line, second.index) == ("runs.json", 4, 2)
    assert second.where == "runs.json:4"
    assert str(second) == "runs.json:4: final_sate: unknown field; did you mean 'final_state'?"


# -- streaming: every record gives a case or its rejection ---------------------------------


def test_iter_cases_goes_on_past_bad_records(tmp_path: Path) -> None:
    path = tmp_path / "cases.jsonl"
    path.write_text(
        "\n".join(
            [
                json.dumps(FIRST_CASE),
                "{oops",
                "[1]",
                json.dumps({"final_sate": {}}),
                json.dumps({"trace": {"@type": "ReasoningTrace"}}),
                json.dumps({"ground_truth": {}}),
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    read = list(iter_cases(iter_records([str(path)]), SCHEDULING_RUBRIC))
    assert [item.record.line for item in read] == [1, 2, 3, 4, 5, 6]
    outcomes = [
        item.case.case_id if isinstance(item.case, Case) else item.case.messages[0] for item in read
    ]
    assert outcomes == [
        "sched-001",
        "invalid JSON: Expecting property name enclosed in double quotes (column 2)",
        "a case must be a JSON object, got an array",
        "final_sate: unknown field; did you mean 'final_state'?",
        "trace.@context: required field is missing",
        "6",
    ]
    assert str(read[4].case).startswith(f"{path}:5: invalid ReasoningTrace (6 problems)")


def test_a_case_factory_that_raises_rejects_only_its_case() -> None:
    def factory(data: Any, case_id: str | None) -> Case:
        return Case(final_state=data["state"], case_id=case_id)

    rubric = Rubric("f", [Criterion("a", 1.0, lambda case: True)], case_factory=factory)
    records = iter_records(["-"], stdin=io.StringIO('{"state": {}}\n{"other": 1}\n{"state": {}}\n'))
    read = list(iter_cases(records, rubric))
    assert [type(item.case).__name__ for item in read] == ["Case", "CaseError", "Case"]
    rejected = read[1].case
    assert isinstance(rejected, CaseError)
    assert str(rejected) == "<stdin>:2: the rubric's case_factory raised KeyError: 'state'"

    def not_a_factory(data: Any, case_id: str | None) -> Any:
        return data

    wrong = Rubric("g", [Criterion("a", 1.0, lambda case: True)], case_factory=not_a_factory)
    with pytest.raises(CaseError, match=r"^the rubric's case_factory returned dict, not a Case$"):
        wrong.case_from_dict({})


def test_load_cases_reads_gzip_json_lists_and_several_paths(tmp_path: Path) -> None:
    packed = tmp_path / "a.jsonl.gz"
    with gzip.open(packed, "wt", encoding="utf-8") as handle:
        handle.write(json.dumps({"id": "zipped"}) + "\n")
    listed = tmp_path / "b.json"
    listed.write_text('[{"id": "first"},\n {"id": "second", "note": "hi"}]', encoding="utf-8")
    cases = list(load_cases([packed, listed]))
    assert [case.case_id for case in cases] == ["zipped", "first", "second"]
    assert cases[2].metadata == {"note": "hi"}
    listed.write_text('[{"id": "first"},\n {"id": 1, "case_id": 2}]', encoding="utf-8")
    with pytest.raises(CaseError, match=r"b\.json:2: case_id: differs from id"):
        list(load_cases(listed))
