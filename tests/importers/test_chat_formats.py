"""Gemini and Bedrock conversations, and later user turns in every chat format."""

from __future__ import annotations

from typing import Any

import pytest

from knowledgepulse.importers import convert, from_bedrock, from_gemini

from ._util import assert_round_trips, load, steps


def _kinds(trace: Any) -> list[tuple[str, str | None, str | None]]:
    return [(s["type"], s.get("tool", {}).get("name"), s.get("source")) for s in steps(trace)]


def test_gemini_fixture() -> None:
    (trace,) = from_gemini(load("gemini_generate_content.json"))
    data = trace.to_dict()
    assert data["id"] == "kp:trace:gemini:pXqmaLr0Ns7i7M8Px4mW-Ak"
    assert data["task"]["objective"] == "Should I pack an umbrella for Lisbon tomorrow?"
    assert _kinds(trace) == [
        ("thought", None, None),
        ("tool_call", "get_weather", None),
        ("observation", "get_weather", None),
        ("error_recovery", "get_weather", None),
        ("observation", "get_weather", None),
        ("thought", None, None),
        ("observation", None, "user"),
        ("tool_call", "get_map", None),
        ("observation", "get_map", None),
        ("thought", None, None),
    ]
    assert data["steps"][2]["is_error"] is True
    assert data["steps"][4]["content"] == '{"forecast": "light rain", "precip_mm": 3, "temp_c": 19}'
    assert data["steps"][6]["content"] == "And show me the city centre."
    assert data["steps"][8]["content"] == "tile 12/1956/1540\n[image/png, 6 KB]"
    assert data["metadata"]["created_at"] == "2025-08-21T09:30:12.481000Z"
    assert data["metadata"]["kp_import"] == {
        "format": "gemini",
        "source_id": "pXqmaLr0Ns7i7M8Px4mW-Ak",
        "defaulted": ["success", "confidence", "task_domain"],
        "objective_from": "user_message",
        "model": "gemini-2.5-flash",
        "finish_reason": "STOP",
        # The request's functionDeclarations: known_tools and valid_arguments can decide.
        "tool_definitions": [
            {
                "name": "get_weather",
                "description": "Current weather for a city",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
            },
            {
                "name": "get_map",
                "description": "A map tile of a city centre",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        ],
    }
    assert_round_trips(trace)


def test_gemini_sdk_names_code_execution_and_a_blocked_answer() -> None:
    record = {
        "contents": [
            {"role": "user", "parts": [{"text": "Sum the first 50 primes."}]},
            {
                "role": "model",
                "parts": [
                    {"executable_code": {"language": "PYTHON", "code": "print(sum(primes(50)))"}},
                    {"code_execution_result": {"outcome": "OUTCOME_FAILED", "output": "NameError"}},
                    {"function_call": {"name": "lookup", "args": {"q": "primes"}}},
                ],
            },
            {
                "role": "function",
                "parts": [
                    {"function_response": {"name": "lookup", "response": {"result": "2, 3, 5"}}}
                ],
            },
        ],
        "response": {"candidates": [{"content": {"parts": []}, "finish_reason": "SAFETY"}]},
    }
    (trace,) = from_gemini(record)
    assert [(s.type, s.tool.name if s.tool else None, s.content) for s in trace.steps] == [
        ("tool_call", "code_execution", None),
        ("observation", "code_execution", "NameError"),
        ("error_recovery", "lookup", None),
        ("observation", "lookup", "2, 3, 5"),
    ]
    assert trace.metadata.success is False


def test_bedrock_fixture() -> None:
    (trace,) = from_bedrock(load("bedrock_converse.json"))
    data = trace.to_dict()
    assert data["id"] == "kp:trace:bedrock:5f1d9b8a-3c2e-4b7a-9e61-2d4c8f0a1b3e"
    assert data["task"]["objective"] == "How many units of SKU WH-2231 are left?"
    assert _kinds(trace) == [
        ("thought", None, None),
        ("tool_call", "lookup_sku", None),
        ("observation", "lookup_sku", None),
        ("error_recovery", None, None),
        ("tool_call", "lookup_sku", None),
        ("observation", "lookup_sku", None),
        ("thought", None, None),
        ("observation", None, "user"),
        ("tool_call", "shelf_photo", None),
        ("observation", "shelf_photo", None),
        ("thought", None, None),
    ]
    assert data["steps"][2] == {
        "step_id": 2,
        "type": "observation",
        "content": "SKU WH2231 not found",
        "tool": {"name": "lookup_sku"},
        "is_error": True,
        "origin": {"message": 2},
    }
    assert data["steps"][9]["content"] == "[image/jpeg, 6 KB]"
    assert data["outcome"]["result_summary"] == (
        "Here is aisle B7: the WH-2231 boxes are on the second shelf."
    )
    assert data["metadata"]["kp_import"]["model"] == "anthropic.claude-3-5-sonnet-20241022-v2:0"
    assert data["metadata"]["kp_import"]["stop_reason"] == "end_turn"
    assert_round_trips(trace)


def test_bedrock_request_response_pair_and_guardrail() -> None:
    record = {
        "request": {
            "modelId": "amazon.nova-pro-v1:0",
            "messages": [{"role": "user", "content": [{"text": "Summarise the memo."}]}],
        },
        "response": {
            "output": {"message": {"role": "assistant", "content": [{"text": "Blocked."}]}},
            "stopReason": "guardrail_intervened",
        },
    }
    (trace,) = convert("auto", record)
    assert trace.id.startswith("kp:trace:bedrock:")
    assert trace.metadata.success is False
    assert [s.content for s in trace.steps] == ["Blocked."]


@pytest.mark.parametrize(
    ("fmt", "record"),
    [
        (
            "openai",
            [
                {"role": "user", "content": "Book a table."},
                {"role": "assistant", "content": "For how many?"},
                {"role": "user", "content": "Four, at eight."},
                {"role": "assistant", "content": "Booked for four at 20:00."},
            ],
        ),
        (
            "openai-responses",
            [
                {"type": "message", "role": "user", "content": "Book a table."},
                {"type": "message", "role": "assistant", "content": "For how many?"},
                {"type": "message", "role": "user", "content": "Four, at eight."},
                {"type": "message", "role": "assistant", "content": "Booked for four at 20:00."},
            ],
        ),
        (
            "anthropic",
            [
                {"role": "user", "content": "Book a table."},
                {"role": "assistant", "content": [{"type": "text", "text": "For how many?"}]},
                {"role": "user", "content": [{"type": "text", "text": "Four, at eight."}]},
                {"role": "assistant", "content": "Booked for four at 20:00."},
            ],
        ),
        (
            "gemini",
            [
                {"role": "user", "parts": [{"text": "Book a table."}]},
                {"role": "model", "parts": [{"text": "For how many?"}]},
                {"role": "user", "parts": [{"text": "Four, at eight."}]},
                {"role": "model", "parts": [{"text": "Booked for four at 20:00."}]},
            ],
        ),
        (
            "bedrock",
            [
                {"role": "user", "content": [{"text": "Book a table."}]},
                {"role": "assistant", "content": [{"text": "For how many?"}]},
                {"role": "user", "content": [{"text": "Four, at eight."}]},
                {"role": "assistant", "content": [{"text": "Booked for four at 20:00."}]},
            ],
        ),
        (
            "langsmith",
            {
                "id": "run-1",
                "run_type": "llm",
                "inputs": {
                    "messages": [
                        ["user", "Book a table."],
                        ["ai", "For how many?"],
                        ["user", "Four, at eight."],
                    ]
                },
                "outputs": {"role": "assistant", "content": "Booked for four at 20:00."},
            },
        ),
    ],
)
def test_later_user_turns_are_user_observations(fmt: str, record: Any) -> None:
    (trace,) = convert(fmt, record)
    assert trace.task.objective == "Book a table."
    assert [
        {k: v for k, v in s.items() if k in ("type", "content", "source")} for s in steps(trace)
    ] == [
        {"type": "thought", "content": "For how many?"},
        {"type": "observation", "content": "Four, at eight.", "source": "user"},
        {"type": "thought", "content": "Booked for four at 20:00."},
    ]


def test_the_tools_a_request_declared_are_kept_for_the_tool_checks() -> None:
    # Issue 35 item 3: known_tools and valid_arguments were undetermined on every imported
    # run whose request declared its tools; the importers now keep them.
    from knowledgepulse.behaviours import known_tools, valid_arguments

    schema = {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}
    call = {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "t1", "name": "lookup", "input": {"sku": 7}}],
    }
    result = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "no such sku"}],
    }
    anthropic = {
        "messages": [{"role": "user", "content": "How many?"}, call, result],
        "tools": [
            {"name": "lookup", "description": "Stock", "input_schema": schema},
            {"type": "web_search_20250305", "name": "web_search", "max_uses": 2},
        ],
    }
    (trace,) = convert("anthropic", anthropic)
    assert (trace.metadata.model_extra or {})["kp_import"]["tool_definitions"] == [
        {"name": "lookup", "description": "Stock", "parameters": schema},
        {"name": "web_search"},
    ]
    assert known_tools(trace).passed is True
    assert valid_arguments(trace).passed is False  # sku 7 is no string
    openai = {
        "messages": [
            {"role": "user", "content": "How many?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "stock", "arguments": '{"sku": "A1"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "3"},
        ],
        "tools": [{"type": "function", "function": {"name": "lookup", "parameters": schema}}],
    }
    (trace,) = convert("openai", openai)
    assert known_tools(trace).passed is False  # "stock" was never declared
    gemini_upper = {
        "contents": [
            {"role": "user", "parts": [{"text": "Hi"}]},
            {"role": "model", "parts": [{"text": "Hello"}]},
        ],
        "tools": [
            {
                "functionDeclarations": [
                    {
                        "name": "f",
                        "parameters": {
                            "type": "OBJECT",
                            "properties": {"type": {"type": "STRING"}},
                        },
                    }
                ]
            }
        ],
    }
    (trace,) = convert("gemini", gemini_upper)
    assert (trace.metadata.model_extra or {})["kp_import"]["tool_definitions"] == [
        {"name": "f", "parameters": {"type": "object", "properties": {"type": {"type": "string"}}}}
    ]
    # A tool list of another shape is no declaration, and nothing is refused for it.
    (trace,) = convert("openai", {**openai, "tools": "lookup"})
    assert "tool_definitions" not in (trace.metadata.model_extra or {})["kp_import"]
