from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

from knowledgepulse.importers import (
    FORMATS,
    ConversionError,
    convert,
    detect_format,
    looks_like_error,
)
from knowledgepulse.importers._builder import RawStep, TraceBuilder, derive_step_types
from knowledgepulse.importers._options import ImportOptions
from knowledgepulse.importers._values import parse_arguments, parse_timestamp

from ._util import TAU_SAMPLE, assert_round_trips, load


@pytest.mark.parametrize(
    "text",
    [
        "Error: payment amount does not add up",
        "error - quota exceeded",
        "[ERROR] disk full",
        "**Error**: bad input",
        "Exception: boom",
        "ValueError: invalid literal for int()",
        "requests.exceptions.HTTPError: 404 Client Error",
        'Traceback (most recent call last):\n  File "x.py", line 1',
        "warning first\nTraceback (most recent call last):\n  ...",
        "Failed to connect to db:5432",
        "FATAL: password authentication failed",
        "Not found",
        "HTTP 404",
        "HTTP/1.1 500 Internal Server Error",
        "status code: 503",
        "503 Service Unavailable",
        "bash: foo: command not found",
        "cat: x.txt: No such file or directory",
        '{"error": "rate limited"}',
        '{"error": {"code": 42}}',
        '{"status": 404, "detail": "missing"}',
        '{"isError": true, "content": []}',
        # tau-bench's answer to a call of a tool it does not have; others word it alike.
        "Unknown action modify_order",
        "Unknown tool: get_weather",
        "unknown function 'lookup'",
    ],
)
def test_error_looking_results(text: str) -> None:
    assert looks_like_error(text)


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "Transfer successful",
        "[]",
        "255.0",
        "Terror attacks decreased in 2019, the report says.",
        "No errors found.",
        "The error rate is 0.1%.",
        "500 apples were delivered",
        '{"error": null, "result": 3}',
        '{"status": "failed-over", "count": 2}',
        '{"status": 200}',
        "{not json",
        "Errors: 0",
        "Unknown artist, 1967 (oil on canvas)",
    ],
)
def test_ordinary_results(text: str | None) -> None:
    assert not looks_like_error(text)


def _raw(*kinds: str) -> list[RawStep]:
    out = []
    for kind in kinds:
        failed = kind == "fail"
        out.append(
            RawStep(
                "observation" if kind in ("obs", "fail") else kind,  # type: ignore[arg-type]
                failed=failed,
            )
        )
    return out


@pytest.mark.parametrize(
    ("kinds", "expected"),
    [
        (
            ("tool_call", "fail", "tool_call", "obs"),
            ["tool_call", "observation", "error_recovery", "observation"],
        ),
        (
            ("tool_call", "fail", "thought", "tool_call"),
            ["tool_call", "observation", "error_recovery", "tool_call"],
        ),
        # parallel calls: the failure is recovered by the next action, after the other results
        (
            ("tool_call", "tool_call", "fail", "obs", "thought"),
            ["tool_call", "tool_call", "observation", "observation", "error_recovery"],
        ),
        (
            ("tool_call", "fail", "fail", "tool_call", "tool_call"),
            ["tool_call", "observation", "observation", "error_recovery", "tool_call"],
        ),
        (("thought", "tool_call", "fail"), ["thought", "tool_call", "observation"]),
        (("thought", "obs", "thought"), ["thought", "observation", "thought"]),
    ],
)
def test_error_recovery_rule(kinds: tuple[str, ...], expected: list[str]) -> None:
    assert derive_step_types(_raw(*kinds)) == expected


def test_parse_arguments() -> None:
    assert parse_arguments(None, "a") == {}
    assert parse_arguments("", "a") == {}
    assert parse_arguments('{"x": 1}', "a") == {"x": 1}
    assert parse_arguments({"x": 1}, "a") == {"x": 1}
    assert parse_arguments("plain text", "a", lenient=True) == {"input": "plain text"}
    assert parse_arguments("[1]", "a", lenient=True) == {"input": [1]}
    with pytest.raises(ConversionError, match=r"^a\.b: not valid JSON$"):
        parse_arguments("{", "a.b")
    with pytest.raises(ConversionError, match="expected a JSON object, got a string"):
        parse_arguments('"x"', "a")


def test_parse_timestamp() -> None:
    moment = datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    assert parse_timestamp("2025-01-02T03:04:05Z") == moment
    assert parse_timestamp("2025-01-02T03:04:05") == moment
    assert parse_timestamp(moment.timestamp()) == moment
    assert parse_timestamp(int(moment.timestamp() * 1e9)) == moment
    assert parse_timestamp(str(int(moment.timestamp() * 1000))) == moment
    assert parse_timestamp("yesterday") is None
    assert parse_timestamp(True) is None


def _builder() -> TraceBuilder:
    builder = TraceBuilder("test")
    builder.user_message("   ")
    builder.user_message("Do the thing.")
    builder.user_message("A later message.")
    builder.thought("")
    builder.tool_call("fetch", {"url": "https://example.org"}, call_id="c1")
    builder.observation("x" * 1500, call_id="c1")
    builder.thought("Done.")
    return builder


def test_builder_defaults_are_listed() -> None:
    trace = _builder().build({"k": 1}, ImportOptions())
    data = trace.to_dict()
    assert data["task"]["objective"] == "Do the thing."
    assert data["metadata"]["kp_import"] == {
        "format": "test",
        "source_id": data["id"].removeprefix("kp:trace:test:"),
        "defaulted": ["success", "confidence", "task_domain", "created_at"],
        "objective_from": "user_message",
    }
    assert trace.metadata.created_at == datetime(1970, 1, 1, tzinfo=timezone.utc)
    assert data["outcome"] == {"result_summary": "Done.", "confidence": 0.5}
    assert data["steps"][0] == {
        "step_id": 0,
        "type": "observation",
        "content": "A later message.",
        "source": "user",
    }
    observation = data["steps"][2]
    assert observation["content"] == "x" * 1500
    assert observation["output_summary"] == "x" * 200 + "…"
    assert observation["tool"] == {"name": "fetch"}
    assert_round_trips(trace)


def test_builder_known_success_and_caller_values() -> None:
    builder = _builder()
    builder.success = False
    builder.source_id = "run-9"
    trace = builder.build({}, ImportOptions(created_at="2025-01-01T00:00:00Z"))
    assert trace.id == "kp:trace:test:run-9"
    assert trace.metadata.success is False
    assert trace.outcome.confidence == 1.0
    assert trace.to_dict()["metadata"]["kp_import"]["defaulted"] == ["confidence", "task_domain"]
    trace = _builder().build(
        {}, ImportOptions(trace_id="kp:trace:mine", visibility="org", privacy_level="aggregated")
    )
    assert trace.id == "kp:trace:mine"
    assert (trace.metadata.visibility, trace.metadata.privacy_level) == ("org", "aggregated")


def test_builder_refuses_invalid_caller_values() -> None:
    with pytest.raises(ConversionError, match="confidence"):
        _builder().build({}, ImportOptions(confidence=1.5))
    with pytest.raises(ConversionError, match="task_domain"):
        _builder().build({}, ImportOptions(task_domain=""))


def test_stable_hash_ids() -> None:
    first = _builder().build({"b": [1, 2], "a": "x"}, ImportOptions())
    second = _builder().build({"a": "x", "b": [1, 2]}, ImportOptions())
    assert first.id == second.id
    assert _builder().build({"a": "y"}, ImportOptions()).id != first.id


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("openai_chat.json", "openai"),
        ("openai_malformed.json", "openai"),
        ("openai_responses.json", "openai-responses"),
        ("anthropic_messages.json", "anthropic"),
        ("anthropic_malformed.json", "anthropic"),
        ("otel_genai.json", "otel"),
        ("otel_openinference.json", "otel"),
        ("langsmith_run.json", "langsmith"),
        ("langsmith_flat.json", "langsmith"),
        ("atif_trajectory.json", "atif"),
    ],
)
def test_detect_format(name: str, expected: str) -> None:
    assert detect_format(load(name)) == expected


def test_detect_format_edge_cases() -> None:
    import json

    assert detect_format(json.loads(TAU_SAMPLE.read_text())) == "openai"
    assert detect_format(load("openai_chat.json")["messages"]) == "openai"
    assert detect_format([{"role": "user", "content": "hi"}]) == "openai"
    assert detect_format(load("anthropic_messages.json")["messages"]) == "anthropic"
    assert detect_format({"foo": 1}) is None
    assert detect_format("text") is None
    assert detect_format([]) is None


@pytest.mark.parametrize(
    "name",
    [
        "openai_chat.json",
        "openai_responses.json",
        "anthropic_messages.json",
        "otel_genai.json",
        "otel_openinference.json",
        "langsmith_run.json",
        "langsmith_flat.json",
        "atif_trajectory.json",
        "atif_failed_flag.json",
    ],
)
def test_every_fixture_converts_and_round_trips(name: str) -> None:
    record: Any = load(name)
    traces = convert("auto", record, task_domain="code")
    assert traces
    for trace in traces:
        assert trace.metadata.task_domain == "code"
        assert_round_trips(trace)
    assert [t.id for t in convert(detect_format(record) or "", record)] == [t.id for t in traces]


def test_convert_errors() -> None:
    with pytest.raises(ConversionError, match="unknown format 'csv'"):
        convert("csv", {})
    with pytest.raises(ConversionError, match="could not detect the format"):
        convert("auto", {"foo": 1})
    with pytest.raises(TypeError):
        convert("openai", load("openai_chat.json"), colour="blue")
    with pytest.raises(ConversionError, match="Responses API"):
        convert("openai-responses", [{"role": "user", "content": "hi"}])


def test_registry() -> None:
    assert set(FORMATS) == {
        "openai",
        "openai-responses",
        "anthropic",
        "otel",
        "openai-agents",
        "langfuse",
        "langsmith",
        "langsmith-batch",
        "atif",
        "gemini",
        "bedrock",
        "claude-code",
        "codex",
        "inspect",
        "swe-agent",
        "mini-swe-agent",
        "openhands",
        "tau2",
        "harbor-traces",
        "anthropic-managed-agents",
        "who-and-when",
    }
    for name, importer in FORMATS.items():
        assert importer.name == name
        assert importer.description
