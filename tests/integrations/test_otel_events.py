"""Evaluation events over OTLP/HTTP: the OTel SDK sends, a real receiver on loopback decodes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from knowledgepulse import ReasoningTrace, Scorer
from knowledgepulse.importers import from_otel
from knowledgepulse.integrations.otel_events import (
    EVENT_NAME,
    EvaluationEvent,
    EvaluationEventExporter,
    OtelExportError,
    emit_evaluation_events,
    logs_endpoint,
)
from knowledgepulse.rubrics import Case, Rubric

from ._otlp_receiver import otlp_receiver

DATA = Path(__file__).parents[1] / "data" / "importers"
OTEL_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
OTEL_SPAN = "a000000000000001"


def _otel_trace() -> ReasoningTrace:
    return from_otel(json.loads((DATA / "otel_genai.json").read_text()))[0]


def _rubric() -> Rubric:
    rubric = Rubric("booking")

    @rubric.criterion(weight=0.6)
    def booked(case: Case) -> bool:
        """The flight was booked."""
        return case.trace is not None and "Booked" in case.trace.outcome.result_summary

    @rubric.criterion(weight=0.4)
    def cheapest(case: Case) -> bool:
        """The cheapest fare was chosen."""
        raise KeyError("fares")

    return rubric


def test_rubric_result_event_is_parented_to_the_imported_span() -> None:
    trace = _otel_trace()
    result = _rubric().evaluate(Case(trace=trace, case_id="c1"))
    with otlp_receiver() as receiver:
        sent = emit_evaluation_events([result], receiver.url, traces={"c1": trace})
    assert sent == 1
    assert receiver.paths == ["/v1/logs"]
    assert receiver.content_types == ["application/x-protobuf"]
    (event,) = receiver.events
    assert event.event_name == EVENT_NAME
    assert event.trace_id == OTEL_TRACE
    assert event.span_id == OTEL_SPAN
    assert event.service_name == "knowledgepulse"
    assert event.attributes == {
        "gen_ai.evaluation.name": "booking",
        "gen_ai.evaluation.score.value": 0.6,
        "gen_ai.evaluation.score.label": "graceful_failure",
        "gen_ai.evaluation.explanation": result.explanation,
        "error.type": "KeyError",
    }
    assert event.severity == 13  # WARN: a check raised


def test_value_score_event_has_a_pass_fail_label_and_no_parent_without_otel_ids(
    worked_example: dict[str, object],
) -> None:
    trace = ReasoningTrace.model_validate(worked_example)
    score = Scorer(embedder=None).score(trace)
    event = EvaluationEvent.of_score(score, trace, threshold=0.5)
    with otlp_receiver() as receiver, EvaluationEventExporter(receiver.url) as exporter:
        exporter.emit(event)
    (received,) = receiver.events
    assert received.trace_id == ""
    assert received.span_id == ""
    assert received.attributes == {
        "gen_ai.evaluation.name": "knowledgepulse.value",
        "gen_ai.evaluation.score.value": score.value,
        "gen_ai.evaluation.score.label": "pass" if score.value >= 0.5 else "fail",
        "gen_ai.evaluation.explanation": score.explanation,
    }
    assert received.severity == 9  # INFO


def test_response_id_is_sent_when_the_trace_knows_it(worked_example: dict[str, object]) -> None:
    data = json.loads(json.dumps(worked_example))
    data["metadata"]["kp_import"] = {"response_id": "chatcmpl-42", "otel_trace_id": "0" * 32}
    trace = ReasoningTrace.model_validate(data)
    event = EvaluationEvent.of_score(Scorer(embedder=None).score(trace), trace)
    assert event.response_id == "chatcmpl-42"
    assert event.trace_id is None  # all zeros is OTel's "no trace"
    assert "gen_ai.evaluation.score.label" not in event.attributes()


def test_a_refusing_endpoint_is_an_error() -> None:
    with otlp_receiver() as receiver:
        receiver.status = 400
        with pytest.raises(OtelExportError, match="1 of 1 evaluation events were not accepted"):
            emit_evaluation_events([EvaluationEvent(name="x", score=1.0)], receiver.url)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://localhost:4318", "http://localhost:4318/v1/logs"),
        ("http://localhost:4318/", "http://localhost:4318/v1/logs"),
        ("https://otel.example/otlp/v1/logs", "https://otel.example/otlp/v1/logs"),
    ],
)
def test_logs_endpoint(url: str, expected: str) -> None:
    assert logs_endpoint(url) == expected


def test_logs_endpoint_refuses_what_is_not_http() -> None:
    with pytest.raises(ValueError, match="expected an http"):
        logs_endpoint("localhost:4318")


def test_the_first_failing_step_is_in_the_result_its_line_and_the_event() -> None:
    # Issue 35 item 2: where a run failed was prose in a verdict's reasoning ("step 26").
    from knowledgepulse.behaviours import AGENT_RUBRIC
    from knowledgepulse.importers import convert
    from knowledgepulse.records import EvalRecord

    sample = json.loads((Path(__file__).parents[1] / "data" / "tau_bench_sample.json").read_text())
    traces = [trace for record in sample for trace in convert("openai", record)]
    wrong = next(t for t in traces if t.id.endswith("task-0:trial-0"))
    result = AGENT_RUBRIC.evaluate(Case(trace=wrong, case_id=wrong.id))
    assert result.verdicts["expected_actions"].steps == [26]
    assert result.verdicts["grounded_answer"].steps == [28]
    assert (result.first_failing_step, result.first_failing_criterion) == (26, "expected_actions")
    assert result.first_failing_agent is None  # one agent: nothing to name
    # In the user's coordinates: step 26 is the book_reservation call of traj[28].
    assert result.first_failing_origin == {"message": 28}
    record = next(r for r in sample if (r["task_id"], r["trial"]) == (0, 0))
    assert record["traj"][28]["tool_calls"][0]["function"]["name"] == "book_reservation"
    line = EvalRecord.of(result).to_dict()
    assert (line["first_failing_step"], line["first_failing_criterion"]) == (26, "expected_actions")
    assert line["first_failing_origin"] == {"message": 28}
    assert "first_failing_agent" not in line
    right = next(t for t in traces if t.id.endswith("task-12:trial-3"))
    passed = EvalRecord.of(AGENT_RUBRIC.evaluate(Case(trace=right))).to_dict()
    assert "first_failing_step" not in passed  # lines of runs without a failure read as before
    assert "first_failing_origin" not in passed
    with otlp_receiver() as receiver:
        emit_evaluation_events([result], receiver.url)
    (event,) = receiver.events
    assert event.attributes["kp.first_failing_step"] == 26
    assert event.attributes["kp.first_failing_criterion"] == "expected_actions"
    assert event.attributes["kp.first_failing_origin"] == '{"message":28}'
    assert "kp.first_failing_agent" not in event.attributes
