from __future__ import annotations

import copy
import json
import statistics
from datetime import datetime, timezone
from typing import Any

import pytest

from _helpers import load_tau_bench
from knowledgepulse.importers import ConversionError, convert, from_openai

from ._util import TAU_CORPUS, TAU_SAMPLE, assert_round_trips, load, steps


def test_chat_fixture_steps() -> None:
    (trace,) = from_openai(load("openai_chat.json"))
    assert steps(trace) == [
        {
            "step_id": 0,
            "type": "tool_call",
            "tool": {"name": "get_weather"},
            "input": {"city": "Paris"},
        },
        {
            "step_id": 1,
            "type": "tool_call",
            "tool": {"name": "get_weather"},
            "input": {"city": "Tokyo"},
        },
        {
            "step_id": 2,
            "type": "observation",
            "tool": {"name": "get_weather"},
            "content": '{"city": "Paris", "temp_c": 18, "conditions": "cloudy"}',
        },
        {
            "step_id": 3,
            "type": "observation",
            "tool": {"name": "get_weather"},
            "content": "Error: upstream weather service timed out after 10s",
            "is_error": True,
        },
        {
            "step_id": 4,
            "type": "error_recovery",
            "tool": {"name": "get_weather"},
            "input": {"city": "Tokyo", "provider": "backup"},
        },
        {
            "step_id": 5,
            "type": "observation",
            "tool": {"name": "get_weather"},
            "content": '{"city": "Tokyo", "temp_c": 24, "conditions": "sunny"}',
        },
        {
            "step_id": 6,
            "type": "observation",
            "content": "Thanks! Which one is warmer?",
            "source": "user",
        },
        {
            "step_id": 7,
            "type": "thought",
            "content": "Tokyo is warmer: 24°C and sunny, versus 18°C and cloudy in Paris.",
        },
    ]
    assert trace.id == "kp:trace:openai:chatcmpl-9xK2conv001"
    assert trace.task.objective == "What's the weather in Paris and Tokyo right now?"
    assert trace.outcome.result_summary.startswith("Tokyo is warmer")
    assert trace.metadata.created_at == datetime(2024, 6, 10, 15, 0, tzinfo=timezone.utc)
    kp_import = trace.to_dict()["metadata"]["kp_import"]
    assert kp_import == {
        "format": "openai",
        "source_id": "chatcmpl-9xK2conv001",
        "defaulted": ["success", "confidence", "task_domain"],
        "objective_from": "user_message",
        "model": "gpt-4o-2024-08-06",
    }
    assert trace.metadata.success is True
    assert trace.outcome.confidence == 0.5
    assert trace.metadata.task_domain == "default"
    assert trace.metadata.visibility == "private"
    assert trace.metadata.privacy_level == "private"
    assert_round_trips(trace)


def test_plain_message_list_and_caller_values() -> None:
    messages = load("openai_chat.json")["messages"]
    (trace,) = from_openai(
        messages,
        task_domain="customer_service",
        success=False,
        confidence=0.9,
        trace_id="weather-7",
        created_at="2025-03-01T12:00:00+02:00",
    )
    assert trace.id == "kp:trace:openai:weather-7"
    assert trace.metadata.task_domain == "customer_service"
    assert trace.metadata.success is False
    assert trace.outcome.confidence == 0.9
    assert trace.to_dict()["metadata"]["kp_import"]["defaulted"] == []
    assert len(trace.steps) == 8
    assert_round_trips(trace)


def test_responses_fixture_steps() -> None:
    (trace,) = from_openai(load("openai_responses.json"))
    assert steps(trace) == [
        {
            "step_id": 0,
            "type": "thought",
            "content": "I need Lyon's population first; I'll search for it.",
        },
        {
            "step_id": 1,
            "type": "tool_call",
            "tool": {"name": "lookup_population"},
            "input": {"city": "Lyon"},
        },
        {
            "step_id": 2,
            "type": "observation",
            "tool": {"name": "lookup_population"},
            "content": '{"city": "Lyon", "population": 522250}',
        },
        {
            "step_id": 3,
            "type": "tool_call",
            "tool": {"name": "calculator"},
            "input": {"expression": "522250*2"},
        },
        {"step_id": 4, "type": "observation", "tool": {"name": "calculator"}, "content": "1044500"},
        {
            "step_id": 5,
            "type": "tool_call",
            "tool": {"name": "web_search"},
            "input": {"action": {"type": "search", "query": "Lyon population 2024"}},
        },
        {
            "step_id": 6,
            "type": "thought",
            "content": "Lyon has about 522,250 inhabitants; doubled, that is 1,044,500.",
        },
    ]
    assert trace.id == "kp:trace:openai-responses:resp_67ccd2bed1ec8190b14f964abc054267"
    assert trace.task.objective == "Find the population of Lyon and double it."
    assert trace.metadata.created_at == datetime.fromtimestamp(1741476542, tz=timezone.utc)
    assert_round_trips(trace)
    # The same items as a bare list are detected as Responses items too.
    record = load("openai_responses.json")
    items = [*record["input"], *record["output"]]
    assert [s.type for s in from_openai(items)[0].steps] == [s.type for s in trace.steps]


def test_failed_response_is_unsuccessful() -> None:
    record = load("openai_responses.json")
    record["status"] = "failed"
    record["error"] = {"code": "server_error", "message": "The model failed."}
    (trace,) = from_openai(record)
    assert trace.metadata.success is False
    assert trace.outcome.confidence == 1.0


def test_malformed_arguments_name_the_path() -> None:
    with pytest.raises(ConversionError) as info:
        from_openai(load("openai_malformed.json"))
    assert str(info.value) == "traj[3].tool_calls[0].function.arguments: not valid JSON"
    assert info.value.path == "traj[3].tool_calls[0].function.arguments"
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("messages", "message"),
    [
        (
            [{"role": "user", "content": "hi"}, {"role": "robot", "content": "x"}],
            "[1].role: expected one of",
        ),
        ([{"role": "user", "content": "hi"}, "not a message"], "[1]: expected an object"),
        (
            [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "tool_calls": [{"id": "c", "function": {"arguments": "{}"}}]},
            ],
            "[1].tool_calls[0].function.name: expected a string, got null",
        ),
        (
            [
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "[1, 2]"}}],
                },
            ],
            "[1].tool_calls[0].function.arguments: expected a JSON object, got an array",
        ),
        (
            [{"role": "user", "content": 42}, {"role": "assistant", "content": "ok"}],
            "[0].content: expected a string or an array of parts",
        ),
        (
            [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "  "}],
            "no agent steps",
        ),
    ],
)
def test_malformed_messages(messages: list[Any], message: str) -> None:
    with pytest.raises(ConversionError, match=message.replace("[", r"\[").replace("]", r"\]")):
        from_openai(messages)


def test_a_conversation_without_a_user_message_is_imported_with_a_defaulted_objective() -> None:
    # Issue 23: only a trace without steps is refused; the objective is then defaulted.
    (trace,) = from_openai(
        [{"role": "system", "content": "be nice"}, {"role": "assistant", "content": "hello"}]
    )
    kp_import = trace.to_dict()["metadata"]["kp_import"]
    assert trace.task.objective == "openai run"
    assert kp_import["objective_from"] == "format"
    assert "objective" in kp_import["defaulted"]


def test_message_variants() -> None:
    (trace,) = from_openai(
        {
            "messages": [
                {"role": "developer", "content": "Be brief."},
                {"role": "user", "content": [{"type": "text", "text": "Add 2 and 3."}]},
                {
                    "role": "assistant",
                    "reasoning_content": "Use the adder.",
                    "content": None,
                    "function_call": {"name": "add", "arguments": '{"a": 2, "b": 3}'},
                },
                {"role": "function", "name": "add", "content": "5"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c9",
                            "type": "custom",
                            "custom": {"name": "shell", "input": "echo 5"},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "c9", "content": [{"type": "text", "text": "5"}]},
                {"role": "assistant", "content": None, "refusal": "I can't share more."},
            ],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "It is 5."}}],
        }
    )
    assert [(s.type, s.tool.name if s.tool else None, s.content, s.input) for s in trace.steps] == [
        ("thought", None, "Use the adder.", None),
        ("tool_call", "add", None, {"a": 2, "b": 3}),
        ("observation", "add", "5", None),
        ("tool_call", "shell", None, {"input": "echo 5"}),
        ("observation", "shell", "5", None),
        ("thought", None, "I can't share more.", None),
        ("thought", None, "It is 5.", None),
    ]
    assert trace.task.objective == "Add 2 and 3."


def test_ids_are_stable_hashes_without_a_source_id() -> None:
    messages = load("openai_chat.json")["messages"]
    (first,) = from_openai(copy.deepcopy(messages))
    (second,) = from_openai(copy.deepcopy(messages))
    assert first.id == second.id
    assert first.id.startswith("kp:trace:openai:")
    assert "created_at" in first.to_dict()["metadata"]["kp_import"]["defaulted"]
    messages[1]["content"] = "And in Oslo?"
    assert from_openai(messages)[0].id != first.id


# ---------------------------------------------------------------------------------------------
# tau-bench


def _tau_sample() -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = json.loads(TAU_SAMPLE.read_text(encoding="utf-8"))
    return records


def test_tau_bench_sample_file() -> None:
    records = _tau_sample()
    assert len(records) == 4
    assert sorted(r["reward"] for r in records) == [0.0, 0.0, 1.0, 1.0]
    assert TAU_SAMPLE.stat().st_size < 200_000


def _check_tau_record(record: dict[str, Any]) -> None:
    (trace,) = from_openai(record)
    traj = record["traj"]
    first_user = next(m["content"] for m in traj if m["role"] == "user")
    assert trace.task.objective == first_user
    assert trace.metadata.success is (record["reward"] == 1.0)
    assert trace.outcome.confidence == 1.0
    assert trace.id == f"kp:trace:openai:tau-bench:task-{record['task_id']}:trial-{record['trial']}"
    calls = [c for m in traj if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    tool_steps = [s for s in trace.steps if s.input is not None]
    assert [s.tool.name for s in tool_steps if s.tool] == [c["function"]["name"] for c in calls]
    assert [s.input for s in tool_steps] == [json.loads(c["function"]["arguments"]) for c in calls]
    assert all(s.type in ("tool_call", "error_recovery") for s in tool_steps)
    tool_messages = [m for m in traj if m["role"] == "tool"]
    observations = [s for s in trace.steps if s.type == "observation" and s.tool is not None]
    assert [s.content for s in observations] == [m["content"] for m in tool_messages]
    later_users = [m["content"] for m in traj if m["role"] == "user"][1:]
    turns = [s for s in trace.steps if getattr(s, "source", None) == "user"]
    assert [(s.type, s.content) for s in turns] == [("observation", t) for t in later_users]
    assert len(trace.steps) == sum(1 for s in trace.steps if s.type != "observation") + len(
        observations
    ) + len(turns)
    assert [s.tool.name for s in observations if s.tool] == [m["name"] for m in tool_messages]
    texts = [
        m["content"] for m in traj if m["role"] == "assistant" and (m["content"] or "").strip()
    ]
    assert [s.content for s in trace.steps if s.type == "thought"] == [
        t for t in texts if t not in {s.content for s in trace.steps if s.type == "error_recovery"}
    ]
    kp_import = trace.to_dict()["metadata"]["kp_import"]
    assert kp_import["reward"] == record["reward"]
    assert kp_import["defaulted"] == ["confidence", "task_domain", "created_at"]
    assert_round_trips(trace)


def test_tau_bench_sample_records() -> None:
    records = _tau_sample()
    for record in records:
        _check_tau_record(record)
    traces = convert("openai", records, created_at="2024-05-15T20:00:00Z")
    assert [t.metadata.success for t in traces] == [r["reward"] == 1.0 for r in records]
    # task 0 trial 0: the booking fails on the payment total and the agent recomputes.
    failing = next(t for t in traces if t.id.endswith("task-0:trial-0"))
    kinds = [s.type for s in failing.steps]
    index = kinds.index("error_recovery")
    failed, recovery = failing.steps[index - 1], failing.steps[index]
    assert failed.content is not None
    assert failed.content.startswith("Error: payment amount does not add up")
    assert recovery.tool is not None and recovery.tool.name == "think"


@pytest.mark.skipif(not TAU_CORPUS.exists(), reason="tau-bench corpus not present")
def test_tau_bench_corpus() -> None:
    records = load_tau_bench()
    assert len(records) == 200
    traces = convert("openai", records)
    assert len(traces) == 200
    for record in records:
        _check_tau_record(record)
    lengths = [len(t.steps) for t in traces]
    calls = sum(1 for t in traces for s in t.steps if s.input is not None)
    recovered = sum(1 for t in traces if any(s.type == "error_recovery" for s in t.steps))
    solved = sum(1 for t in traces if t.metadata.success)
    assert calls == sum(len(m.get("tool_calls") or []) for r in records for m in r["traj"]) == 1164
    assert (min(lengths), statistics.median(lengths), max(lengths)) == (4, 23.5, 64)
    assert recovered == 36
    assert (solved, 200 - solved) == (84, 116)
    assert len({t.id for t in traces}) == 200


def _deep_call(levels: int) -> dict[str, Any]:
    """A chat whose one tool call has arguments (JSON text) nesting ``levels`` lists deep:
    text a model wrote, which the record's own depth limit never saw."""
    arguments = '{"payment_methods": ' + "[" * levels + '"x"' + "]" * levels + "}"
    return {
        "messages": [
            {"role": "user", "content": "Change my order"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "modify_order", "arguments": arguments},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
            {"role": "assistant", "content": "Done."},
        ]
    }


def test_arguments_nested_past_the_limit_are_cut_with_a_placeholder() -> None:
    # Found by hostile input: 900 levels crashed scrub_value (RecursionError), 400 crashed
    # writing the trace (pydantic's serialization depth); both were kp's internal errors.
    (trace,) = convert("openai", _deep_call(900))
    assert trace.steps[0].input is not None
    value = trace.steps[0].input["payment_methods"]
    depth = 2  # the input is level 1, its list level 2; the placeholder stands at level 196
    while isinstance(value, list):
        value, depth = value[0], depth + 1
    assert (depth, value) == (196, "[nested deeper than 196 levels]")
    assert json.loads(trace.model_dump_json())["steps"][0]["tool"]["name"] == "modify_order"
    (shallow,) = convert("openai", _deep_call(190))
    assert "nested deeper" not in shallow.model_dump_json()


def test_arguments_deeper_than_python_reads_refuse_the_record() -> None:
    with pytest.raises(ConversionError, match="nested deeper than kp reads"):
        convert("openai", _deep_call(5000))
