"""Span and run formats keep every user turn, and name the agent that ran.

Each LLM call of a span format (Langfuse generations, OTel chat spans, OpenAI Agents
generations) logs the conversation so far: a user's later answer shows up in the next call's
input and must become a user observation (as in the chat formats), once, never dropped; the
task itself, read from a trace input, must not come back as a user turn.
"""

from __future__ import annotations

import json
from typing import Any

from knowledgepulse import ReasoningTrace
from knowledgepulse.importers import from_langfuse, from_openai_agents, from_otel

from ._util import DATA, load

FIRST = [{"role": "user", "content": "Book a table."}]
SECOND = [
    *FIRST,
    {"role": "assistant", "content": "For how many?"},
    {"role": "user", "content": "Four, at eight."},
]
EXPECTED = [
    {"type": "thought", "content": "For how many?"},
    {"type": "observation", "content": "Four, at eight.", "source": "user"},
    {"type": "thought", "content": "Booked for four at 20:00."},
]


def _turns(trace: ReasoningTrace) -> list[dict[str, Any]]:
    return [
        {k: v for k, v in s.items() if k in ("type", "content", "source")}
        for s in trace.to_dict()["steps"]
    ]


def _observation(n: int, messages: list[dict[str, Any]], answer: str) -> dict[str, Any]:
    return {
        "id": f"gen-{n}",
        "type": "GENERATION",
        "name": "chat",
        "startTime": f"2025-11-03T16:20:0{n}.000Z",
        "endTime": f"2025-11-03T16:20:0{n}.500Z",
        "input": messages,
        "output": {"role": "assistant", "content": answer},
        "level": "DEFAULT",
        "parentObservationId": None,
    }


def _langfuse(trace_input: Any) -> dict[str, Any]:
    return {
        "id": "t-1",
        "timestamp": "2025-11-03T16:20:00.000Z",
        "input": trace_input,
        "observations": [
            _observation(1, FIRST, "For how many?"),
            _observation(2, SECOND, "Booked for four at 20:00."),
        ],
    }


def test_langfuse_keeps_later_user_turns() -> None:
    (trace,) = from_langfuse(_langfuse(None))
    assert trace.task.objective == "Book a table."
    assert _turns(trace) == EXPECTED


def test_langfuse_trace_input_is_not_repeated_as_a_user_turn() -> None:
    (trace,) = from_langfuse(_langfuse("Book a table."))
    assert trace.task.objective == "Book a table."
    assert trace.to_dict()["metadata"]["kp_import"]["objective_from"] == "trace_input"
    assert _turns(trace) == EXPECTED


def _chat_span(n: int, messages: list[dict[str, Any]], answer: str) -> dict[str, Any]:
    def parts(items: list[dict[str, Any]]) -> str:
        return json.dumps(
            [
                {"role": m["role"], "parts": [{"type": "text", "content": m["content"]}]}
                for m in items
            ]
        )

    attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": parts(messages),
        "gen_ai.output.messages": parts([{"role": "assistant", "content": answer}]),
    }
    return {
        "traceId": "aa",
        "spanId": str(n),
        "parentSpanId": "0",
        "name": "chat",
        "startTimeUnixNano": str(n * 1000),
        "endTimeUnixNano": str(n * 1000 + 500),
        "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()],
    }


def _agent_span(span_id: str, parent: str | None, name: str, **attrs: str) -> dict[str, Any]:
    span: dict[str, Any] = {
        "traceId": "aa",
        "spanId": span_id,
        "name": name,
        "startTimeUnixNano": "1",
        "endTimeUnixNano": "9000",
        "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()],
    }
    if parent is not None:
        span["parentSpanId"] = parent
    return span


def _otlp(*spans: dict[str, Any]) -> dict[str, Any]:
    return {"resourceSpans": [{"scopeSpans": [{"scope": {"name": "t"}, "spans": list(spans)}]}]}


def test_otel_keeps_later_user_turns() -> None:
    root = _agent_span(
        "0", None, "invoke_agent booker", **{"gen_ai.operation.name": "invoke_agent"}
    )
    (trace,) = from_otel(
        _otlp(
            root,
            _chat_span(1, FIRST, "For how many?"),
            _chat_span(2, SECOND, "Booked for four at 20:00."),
        )
    )
    assert trace.task.objective == "Book a table."
    assert _turns(trace) == EXPECTED


def test_otel_openinference_agent_is_the_one_that_ran_not_the_workflow() -> None:
    # The OpenAI Agents instrumentation of OpenInference opens a root AGENT span named after
    # the workflow ("Agent workflow") and, inside it, one AGENT span per agent that ran.
    kind = {"openinference.span.kind": "AGENT"}
    chat = _chat_span(1, FIRST, "Booked.")
    chat["parentSpanId"] = "a1"
    (trace,) = from_otel(
        _otlp(
            _agent_span("w0", None, "Agent workflow", **kind),
            _agent_span("a1", "w0", "Booking agent", **kind),
            chat,
        )
    )
    assert trace.metadata.agent_id == "Booking agent"


def _agents_span(n: int, messages: list[dict[str, Any]], answer: str) -> dict[str, Any]:
    return {
        "object": "trace.span",
        "id": f"span_{n}",
        "trace_id": "trace_1",
        "parent_id": None,
        "started_at": f"2025-01-01T00:00:0{n}+00:00",
        "ended_at": f"2025-01-01T00:00:0{n}.5+00:00",
        "span_data": {
            "type": "generation",
            "input": messages,
            "output": [{"role": "assistant", "content": answer}],
        },
    }


def test_openai_agents_keeps_later_user_turns() -> None:
    (trace,) = from_openai_agents(
        [
            _agents_span(1, FIRST, "For how many?"),
            _agents_span(2, SECOND, "Booked for four at 20:00."),
        ]
    )
    assert trace.task.objective == "Book a table."
    assert _turns(trace) == EXPECTED


def test_langfuse_openai_agents_run_names_the_agent_not_the_workflow() -> None:
    # A real download: the root AGENT observation is the workflow ("Agent workflow"), the
    # agent that ran ("Hello world") is its child and holds the generations and the tool.
    (trace,) = from_langfuse(load("langfuse/openai-agents-2025-09-30.json"))
    assert trace.metadata.agent_id == "Hello world"
    assert (DATA / "langfuse" / "openai-agents-2025-09-30.json").exists()


def test_langfuse_agent_names_from_real_downloads() -> None:
    # Microsoft Agent Framework names its span "invoke_agent <agent>" and sets
    # gen_ai.agent.name; Google ADK names it "agent_run [<agent>]"; Pydantic AI's agent runs
    # are SPAN observations with gen_ai.agent.name (the first agent that ran: joke_agent).
    expected = {
        "microsoft-agent-2025-10-14.json": "99981f6a-abd1-4d09-9fba-00e2ab172193",
        "google-adk-2025-08-28.json": "hello_agent",
        "pydantic-ai-tools-2025-12-04.json": "joke_agent",
    }
    found = {}
    for name in expected:
        (trace,) = from_langfuse(load(f"langfuse/{name}"))
        found[name] = trace.metadata.agent_id
    assert found == expected


def test_a_later_turn_that_contains_a_short_objective_is_still_a_turn() -> None:
    # The task restated (a flattened prompt around it) is recognised only before the agent
    # did anything; later, "hi" inside "Which one is high?" is an answer, kept.
    second = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Hello! Which one?"},
        {"role": "user", "content": "Which one is high?"},
    ]
    record = {
        "id": "t-2",
        "input": "hi",
        "observations": [
            _observation(
                1, [{"role": "user", "content": "system: Be brief.\nuser: hi"}], "Hello! Which one?"
            ),
            _observation(2, second, "The first."),
        ],
    }
    (trace,) = from_langfuse(record)
    assert trace.task.objective == "hi"
    assert _turns(trace) == [
        {"type": "thought", "content": "Hello! Which one?"},
        {"type": "observation", "content": "Which one is high?", "source": "user"},
        {"type": "thought", "content": "The first."},
    ]
