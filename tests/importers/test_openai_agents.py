from __future__ import annotations

import pytest

from knowledgepulse._io import iter_records
from knowledgepulse.importers import ConversionError, from_openai_agents, read_traces

from ._util import DATA, assert_round_trips, load, steps


def test_batch_export() -> None:
    (trace,) = from_openai_agents(load("openai_agents_batch.json"))
    kinds = [(s.type, s.tool.name if s.tool else None) for s in trace.steps]
    assert kinds == [
        ("tool_call", "transfer_to_billing_agent"),
        ("thought", None),
        ("observation", None),
        ("thought", None),
        ("tool_call", "lookup_charges"),
        ("observation", "lookup_charges"),
        ("tool_call", "issue_refund"),
        ("observation", "issue_refund"),
        ("error_recovery", None),
        ("tool_call", "issue_refund"),
        ("observation", "issue_refund"),
        ("thought", None),
    ]
    data = steps(trace)
    assert data[1]["content"] == "Handoff from Triage agent to Billing agent"
    assert data[2]["content"] == "Guardrail pii_in_request: passed"
    assert data[7] == {
        "step_id": 7,
        "type": "observation",
        "content": "Error running tool (non-fatal): RefundError: a reason is required for "
        "refunds over 25.00",
        "tool": {"name": "issue_refund"},
        "is_error": True,
    }
    assert data[6]["latency_ms"] == 510.0
    assert trace.id == "kp:trace:openai-agents:trace_5b2e9c0d71a04f6a8e3b1c2d4f6a8b0c"
    assert trace.task.objective == (
        "I was charged twice for my March invoice. Can you refund the duplicate?"
    )
    assert trace.metadata.agent_id == "Triage agent"
    assert trace.to_dict()["metadata"]["kp_import"] == {
        "format": "openai-agents",
        "source_id": "trace_5b2e9c0d71a04f6a8e3b1c2d4f6a8b0c",
        "defaulted": ["success", "confidence", "task_domain"],
        "objective_from": "user_message",
        "workflow_name": "Customer support",
        "group_id": "conv_7f3a",
        "model": "gpt-4.1-mini",
    }
    assert_round_trips(trace)


def test_items_one_per_line_are_one_trace_and_a_tripped_guardrail_fails_it() -> None:
    [unit] = list(
        read_traces(iter_records([str(DATA / "units" / "openai_agents_items.jsonl")]), "auto")
    )
    assert unit.format == "openai-agents"
    assert [r.line for r in unit.records] == [1, 2, 3, 4]
    (trace,) = unit.traces
    assert [(s.type, s.content) for s in trace.steps] == [
        ("observation", "Guardrail homework_cheating_check: triggered"),
        ("error_recovery", "Let's work it out together: subtract 3 from both sides first."),
    ]
    assert trace.metadata.success is False


def test_metadata_gives_the_objective_of_a_responses_only_trace() -> None:
    items = [
        {"object": "trace", "id": "trace_1", "workflow_name": "w", "metadata": {"input": "Ping"}},
        {
            "object": "trace.span",
            "id": "span_1",
            "trace_id": "trace_1",
            "started_at": "2025-01-01T00:00:00Z",
            "ended_at": "2025-01-01T00:00:01Z",
            "span_data": {"type": "function", "name": "ping", "input": "{}", "output": "pong"},
        },
    ]
    (trace,) = from_openai_agents(items)
    assert trace.task.objective == "Ping"
    assert [s.type for s in trace.steps] == ["tool_call", "observation"]


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"object": "response"}, "expected an OpenAI Agents trace or span"),
        ([{"object": "trace.span", "id": "s"}], r"\[0\]\.trace_id: expected a non-empty string"),
        (
            [{"object": "trace.span", "trace_id": "t", "span_data": {}}],
            r"\[0\]\.span_data\.type: expected a string",
        ),
        ([{"object": "trace", "id": "t"}], "trace t: no agent steps"),
    ],
)
def test_malformed(record: object, message: str) -> None:
    with pytest.raises(ConversionError, match=message):
        from_openai_agents(record)
