"""Who&When's multi-agent logs (Magentic-One, AG2 CaptainAgent): one step per message, each
with its message index and agent; the human labels never reach the trace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from knowledgepulse.behaviours import AGENT_RUBRIC
from knowledgepulse.importers import ConversionError, convert, detect_format, from_who_and_when
from knowledgepulse.rubrics import Case

DATA = Path(__file__).resolve().parents[1] / "data" / "who_and_when"  # MIT, see SOURCE.md


def load(name: str) -> dict[str, object]:
    record: dict[str, object] = json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))
    return record


def test_an_ag2_run_becomes_one_step_per_message_with_its_agent() -> None:
    record = load("algorithm-generated-47")
    assert detect_format(record) == "who-and-when"
    (trace,) = convert("auto", record)
    assert trace.id == "kp:trace:who-and-when:0bb3b44a-ede5-4db5-a520-4e844b0079c5"
    assert trace.task.objective.startswith("Consider the following symbols: 𒐜  𒐐𒐚")
    assert trace.metadata.success is False  # is_correct: false
    extra = trace.metadata.model_extra or {}
    assert extra["ground_truth"] == {"answer": "536"}
    assert extra["kp_import"]["level"] == "2"
    assert [(s.step_id, s.type, (s.model_extra or {})["message_index"]) for s in trace.steps] == [
        (i, "thought", i) for i in range(6)
    ]
    assert {(s.model_extra or {})["agent"] for s in trace.steps} == {
        "Mesopotamian_Number_Systems_Expert"
    }
    text = json.dumps(trace.to_dict())
    for label in ("mistake_agent", "mistake_step", "mistake_reason", "system_prompt"):
        assert label not in text  # what a grader is measured against is never its input


def test_a_magentic_one_run_names_the_agent_before_the_parenthesis() -> None:
    (trace,) = from_who_and_when(load("hand-crafted-24"))
    steps = [
        (s.type, (s.model_extra or {}).get("agent"), (s.model_extra or {}).get("source"))
        for s in trace.steps
    ]
    # The person's question is the objective and its first message a user turn.
    assert steps[0] == ("observation", None, "user")
    assert steps[1:] == [("thought", "Orchestrator", None)] * 4
    assert trace.metadata.success is True  # no is_correct: defaulted
    assert "success" in (trace.metadata.model_extra or {})["kp_import"]["defaulted"]


def test_executor_output_is_an_observation_failed_when_it_says_so() -> None:
    record = {
        "question": "Count the rows.",
        "history": [
            {
                "role": "assistant",
                "name": "Data_Expert",
                "content": "```python\nprint(len(rows))\n```",
            },
            {
                "role": "user",
                "name": "Computer_terminal",
                "content": "exitcode: 1 (execution failed)\nCode output: NameError: name 'rows' is not defined",
            },
            {"role": "user", "name": "Verification_Expert", "content": "The count is 4312."},
            {"role": "Orchestrator (-> WebSurfer)", "content": "Search again."},
        ],
    }
    (trace,) = from_who_and_when(record)
    assert [(s.type, (s.model_extra or {}).get("agent")) for s in trace.steps] == [
        ("thought", "Data_Expert"),
        ("observation", "Computer_terminal"),
        ("error_recovery", "Verification_Expert"),
        ("thought", "Orchestrator"),
    ]
    assert (trace.steps[1].model_extra or {})["is_error"] is True
    result = AGENT_RUBRIC.evaluate(Case(trace=trace))
    # 4312 came from no one; before it, Data_Expert's code failed and was never fixed: the
    # first failing step is that code's, and the agent it belongs to is named.
    assert result.verdicts["grounded_statements"].steps == [2]
    assert result.verdicts["errors_recovered"].steps == [0, 1]
    assert (result.first_failing_step, result.first_failing_criterion) == (0, "errors_recovered")
    assert result.first_failing_agent == "Data_Expert"


@pytest.mark.parametrize(
    ("history", "message"),
    [
        ([{"content": "hi"}], "history[0].role: expected the author's role as text, got None"),
        (
            [{"role": 3, "content": "hi"}],
            "history[0].role: expected the author's role as text, got 3",
        ),
        (
            [{"role": "WebSurfer", "content": ["x"]}],
            "history[0].content: expected text, got an array",
        ),
        (["hello"], "history[0]: expected a message object, got a string"),
    ],
)
def test_a_broken_message_is_refused_naming_its_field(history: object, message: str) -> None:
    with pytest.raises(ConversionError) as caught:
        from_who_and_when({"question": "q", "history": history})
    assert str(caught.value) == message


def test_an_unknown_role_is_an_agent_not_an_error() -> None:
    (trace,) = from_who_and_when(
        {"question": "q", "history": [{"role": "Planner (draft)", "content": "Step one."}]}
    )
    assert (trace.steps[0].model_extra or {})["agent"] == "Planner"


def test_the_runs_the_rubric_locates_keep_what_it_reads() -> None:
    # hand-crafted-1: the orchestrator's ledger (read by made_progress) and the FINAL ANSWER
    # line (read by expected_answer) stay in the steps' text; the expected answer in metadata.
    (magentic,) = convert("auto", load("hand-crafted-1"))
    agents = [(s.model_extra or {}).get("agent") for s in magentic.steps]
    assert (len(agents), agents.count("Orchestrator"), agents.count("WebSurfer")) == (29, 21, 7)
    assert '"is_in_loop"' in (magentic.steps[13].content or "")
    assert "FINAL ANSWER: Alliance Jiu Jitsu" in (magentic.steps[28].content or "")
    assert (magentic.metadata.model_extra or {})["ground_truth"] == {
        "answer": "Renzo Gracie Jiu-Jitsu Wall Street"
    }
    # algorithm-generated-10: the executor's failed run is an error observation after the code.
    (ag2,) = convert("auto", load("algorithm-generated-10"))
    shown = [
        (s.type, (s.model_extra or {}).get("agent"), (s.model_extra or {}).get("is_error"))
        for s in ag2.steps[5:8]
    ]
    assert shown == [
        ("thought", "Validation_Expert", None),
        ("observation", "Computer_terminal", True),
        ("error_recovery", "Validation_Expert", None),
    ]
