from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

import pytest

from knowledgepulse.importers import ConversionError, convert, from_otel

from ._util import assert_round_trips, load, steps


def test_genai_fixture_groups_traces_and_orders_spans() -> None:
    first, second = from_otel(load("otel_genai.json"))
    assert steps(first) == [
        {
            "step_id": 0,
            "type": "thought",
            "content": "I'll search for flights.",
            "latency_ms": 1190.0,
        },
        {
            "step_id": 1,
            "type": "tool_call",
            "tool": {"name": "search_flights"},
            "input": {"from": "LIS", "to": "BER", "date": "2025-11-03"},
            "latency_ms": 640.0,
        },
        {
            "step_id": 2,
            "type": "observation",
            "tool": {"name": "search_flights"},
            "content": "HTTPError: 503 Service Unavailable",
            "is_error": True,
        },
        {
            "step_id": 3,
            "type": "error_recovery",
            "content": "The flight API is down; retry with the partner provider.",
            "latency_ms": 1140.0,
        },
        {
            "step_id": 4,
            "type": "tool_call",
            "tool": {"name": "search_flights"},
            "input": {"from": "LIS", "to": "BER", "date": "2025-11-03", "provider": "partner"},
            "latency_ms": 390.0,
        },
        {
            "step_id": 5,
            "type": "observation",
            "tool": {"name": "search_flights"},
            "content": '[{"flight": "TP578", "price_eur": 89}, {"flight": "LH1163", "price_eur": 132}]',
        },
        {
            "step_id": 6,
            "type": "tool_call",
            "tool": {"name": "book_flight"},
            "input": {"flight": "TP578"},
        },
        {
            "step_id": 7,
            "type": "observation",
            "tool": {"name": "book_flight"},
            "content": '{"confirmation": "X7K2QP", "status": "booked"}',
        },
        {
            "step_id": 8,
            "type": "thought",
            "content": "Booked TP578 (EUR 89), confirmation X7K2QP.",
            "latency_ms": 3900.0,
        },
    ]
    assert first.id == "kp:trace:otel:4bf92f3577b34da6a3ce929d0e0e4736"
    assert first.task.objective == (
        "Book me the cheapest flight from Lisbon to Berlin on 2025-11-03."
    )
    assert first.outcome.result_summary == "Booked TP578 (EUR 89), confirmation X7K2QP."
    assert first.metadata.agent_id == "travel-agent"
    # The agent span's status is OK: success is known, so confidence is 1.0.
    assert first.metadata.success is True
    assert first.outcome.confidence == 1.0
    assert first.metadata.created_at == datetime.fromtimestamp(1760000000, tz=timezone.utc)
    assert first.to_dict()["metadata"]["kp_import"] == {
        "format": "otel",
        "source_id": "4bf92f3577b34da6a3ce929d0e0e4736",
        "defaulted": ["confidence", "task_domain"],
        "objective_from": "user_message",
        "model": "gpt-4.1-2025-04-14",
        "otel_trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
        "otel_span_id": "a000000000000001",
    }

    # Older conventions: per-message events, a tool span without operation name, gen_ai.prompt.
    assert steps(second) == [
        {
            "step_id": 0,
            "type": "tool_call",
            "tool": {"name": "convert_units"},
            "input": {"value": 42, "from": "km", "to": "mi"},
            "latency_ms": 10.0,
        },
        {
            "step_id": 1,
            "type": "observation",
            "tool": {"name": "convert_units"},
            "content": "26.0976",
        },
        {
            "step_id": 2,
            "type": "thought",
            "content": "42 km is about 26.1 miles.",
            "latency_ms": 870.0,
        },
    ]
    assert second.task.objective == "How many miles is 42 km?"
    assert second.metadata.success is True
    assert "success" in second.to_dict()["metadata"]["kp_import"]["defaulted"]
    for trace in (first, second):
        assert_round_trips(trace)


def test_openinference_fixture() -> None:
    (trace,) = from_otel(load("otel_openinference.json"))
    assert steps(trace) == [
        {
            "step_id": 0,
            "type": "tool_call",
            "tool": {"name": "calculator"},
            "input": {"expression": "23 * 19"},
            "latency_ms": 5.0,
        },
        {"step_id": 1, "type": "observation", "tool": {"name": "calculator"}, "content": "437"},
        {
            "step_id": 2,
            "type": "thought",
            "content": "23 * 19 = 437, which rounds to 440.",
            "latency_ms": 1980.0,
        },
    ]
    assert trace.task.objective == "What is 23 * 19, rounded to the nearest ten?"
    assert trace.outcome.result_summary == "23 * 19 = 437, which rounds to 440."
    assert_round_trips(trace)


def test_malformed_messages_name_the_path() -> None:
    with pytest.raises(ConversionError) as info:
        from_otel(load("otel_malformed.json"))
    assert str(info.value) == (
        "resourceSpans[0].scopeSpans[0].spans[0].attributes[gen_ai.input.messages]: not valid JSON"
    )


def _export(*spans: dict[str, Any]) -> dict[str, Any]:
    return {"resourceSpans": [{"scopeSpans": [{"scope": {"name": "t"}, "spans": list(spans)}]}]}


def _attrs(**values: Any) -> list[dict[str, Any]]:
    return [{"key": k.replace("__", "."), "value": {"stringValue": v}} for k, v in values.items()]


def test_error_status_fails_the_trace_and_several_ids() -> None:
    user = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "Ping the host."}]}])
    out = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "Pinging."}]}])
    spans = []
    for trace_id in ("aa", "bb"):
        spans.append(
            {
                "traceId": trace_id,
                "spanId": "1",
                "name": "chat",
                "startTimeUnixNano": "1000",
                "endTimeUnixNano": "2000",
                "status": {"code": 2, "message": "rate limited"},
                "attributes": _attrs(
                    gen_ai__operation__name="chat",
                    gen_ai__input__messages=user,
                    gen_ai__output__messages=out,
                ),
            }
        )
    traces = from_otel(_export(*spans), trace_id="ping")
    assert [t.id for t in traces] == ["kp:trace:otel:ping:aa", "kp:trace:otel:ping:bb"]
    trace = traces[0]
    assert trace.metadata.success is False
    assert [(s.type, s.content) for s in trace.steps] == [
        ("thought", "Pinging."),
        ("observation", "rate limited"),
    ]
    assert trace.to_dict()["steps"][1]["is_error"] is True


def test_console_exporter_spans_and_flattened_prompt() -> None:
    spans: list[dict[str, Any]] = [
        {
            "name": "openai.chat",
            "context": {"trace_id": "0x5b8aa5a2d2c872e8321cf37308d69df2", "span_id": "0x1"},
            "parent_id": None,
            "start_time": "2025-02-01T10:00:00.000000Z",
            "end_time": "2025-02-01T10:00:01.500000Z",
            "status": {"status_code": "UNSET"},
            "attributes": {
                "gen_ai.system": "openai",
                "gen_ai.prompt.0.role": "user",
                "gen_ai.prompt.0.content": "Translate 'cat' to French.",
                "gen_ai.completion.0.role": "assistant",
                "gen_ai.completion.0.content": "chat",
            },
            "events": [],
        }
    ]
    (trace,) = convert("auto", spans)
    assert trace.id == "kp:trace:otel:0x5b8aa5a2d2c872e8321cf37308d69df2"
    assert [(s.type, s.content, s.latency_ms) for s in trace.steps] == [("thought", "chat", 1500.0)]
    assert trace.task.objective == "Translate 'cat' to French."
    assert trace.metadata.created_at == datetime(2025, 2, 1, 10, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("export", "message"),
    [
        ({"resourceSpans": []}, "no spans found"),
        (
            _export({"spanId": "1", "name": "x"}),
            r"resourceSpans\[0\]\.scopeSpans\[0\]\.spans\[0\]\.traceId: expected a non-empty string",
        ),
        (
            _export(
                {
                    "traceId": "t",
                    "spanId": "1",
                    "attributes": [{"key": "gen_ai.operation.name", "value": {"mapValue": 1}}],
                }
            ),
            r"spans\[0\]\.attributes\[gen_ai\.operation\.name\]\.value: unknown AnyValue kind",
        ),
        (
            _export(
                {
                    "traceId": "t",
                    "spanId": "1",
                    "attributes": _attrs(gen_ai__operation__name="chat"),
                }
            ),
            "trace t: no agent steps",
        ),
        ({"nothing": True}, "expected an OTLP export"),
    ],
)
def test_malformed_exports(export: Any, message: str) -> None:
    with pytest.raises(ConversionError, match=message):
        from_otel(export)


def test_any_value_kinds() -> None:
    span = {
        "traceId": "t1",
        "spanId": "s1",
        "name": "execute_tool lookup",
        "startTimeUnixNano": 5,
        "endTimeUnixNano": 2_000_005,
        "attributes": [
            {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
            {
                "key": "gen_ai.tool.call.arguments",
                "value": {
                    "kvlistValue": {
                        "values": [
                            {
                                "key": "ids",
                                "value": {
                                    "arrayValue": {"values": [{"intValue": "7"}, {"intValue": 8}]}
                                },
                            },
                            {"key": "exact", "value": {"boolValue": True}},
                            {"key": "boost", "value": {"doubleValue": 0.5}},
                        ]
                    }
                },
            },
            {"key": "gen_ai.tool.call.result", "value": {"stringValue": "not JSON at all"}},
        ],
    }
    (trace,) = from_otel(_export(span), objective="Look up items 7 and 8.")
    assert steps(trace) == [
        {
            "step_id": 0,
            "type": "tool_call",
            "tool": {"name": "lookup"},
            "input": {"ids": [7, 8], "exact": True, "boost": 0.5},
            "latency_ms": 2.0,
        },
        {
            "step_id": 1,
            "type": "observation",
            "tool": {"name": "lookup"},
            "content": "not JSON at all",
        },
    ]


def test_an_int_value_that_is_no_integer_names_its_path() -> None:
    # Found by fuzzing the fixtures: int("hello") escaped as a ValueError (kp's internal error).
    span = {
        "traceId": "t",
        "spanId": "1",
        "attributes": [{"key": "gen_ai.usage.input_tokens", "value": {"intValue": "hello"}}],
    }
    with pytest.raises(
        ConversionError,
        match=r"attributes\[gen_ai\.usage\.input_tokens\]\.value\.intValue: expected an integer, "
        r"got 'hello'",
    ):
        from_otel(_export(span))


@pytest.mark.parametrize("timestamp", [1e308, 10**400])
def test_a_span_time_past_any_clock_is_left_out(timestamp: float) -> None:
    # 1e308 microseconds is valid JSON; its thousandfold overflowed int() before.
    spans = [
        {
            "traceId": "t",
            "id": "s1",
            "name": "chat",
            "timestamp": timestamp,
            "duration": 1500,
            "attributes": {
                "gen_ai.operation.name": "chat",
                "gen_ai.completion.0.role": "assistant",
                "gen_ai.completion.0.content": "hi",
            },
        }
    ]
    (trace,) = convert("otel", spans)
    assert [(s.type, s.content, s.latency_ms) for s in trace.steps] == [("thought", "hi", None)]


def test_gen_ai_tool_definitions_on_a_chat_span_are_kept() -> None:
    # The GenAI conventions put the tools a model call was given in gen_ai.tool.definitions
    # (JSON text in OTLP); the flight search the agent called is declared, with its schema.
    record = load("otel_genai.json")
    spans = record["resourceSpans"][0]["scopeSpans"][0]["spans"]
    chat = next(span for span in spans if span["name"] == "chat gpt-4.1")
    definitions = [
        {
            "type": "function",
            "name": "search_flights",
            "parameters": {"type": "object", "properties": {"to": {"type": "string"}}},
        }
    ]
    chat["attributes"].append(
        {"key": "gen_ai.tool.definitions", "value": {"stringValue": json.dumps(definitions)}}
    )
    trace = next(
        t
        for t in convert("otel", record)
        if t.steps and any(s.tool and s.tool.name == "search_flights" for s in t.steps)
    )
    assert (trace.metadata.model_extra or {})["kp_import"]["tool_definitions"] == [
        {
            "name": "search_flights",
            "parameters": {"type": "object", "properties": {"to": {"type": "string"}}},
        }
    ]
