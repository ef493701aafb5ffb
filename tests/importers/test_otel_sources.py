"""OTel inputs as collectors, exporters and SDKs write them: server tools, media parts, Azure
events, export batches, console spans, GenAI log records, Vercel AI SDK spans, source ids."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from knowledgepulse.cli import main
from knowledgepulse.importers import Conversion, from_otel, read_traces
from knowledgepulse.importers.otel import hex_id
from knowledgepulse.io._reader import iter_records

from ._util import DATA, assert_round_trips, load, steps

UNITS = DATA / "units"


def _units(path: Path, fmt: str = "auto") -> list[Conversion]:
    return list(read_traces(iter_records([str(path)]), fmt))


def _kp_import(trace: Any) -> dict[str, Any]:
    data: dict[str, Any] = trace.to_dict()["metadata"]["kp_import"]
    return data


def test_server_tool_parts_are_steps_and_media_are_placeholders() -> None:
    (trace,) = from_otel(load("otel_server_tools.json"))
    assert steps(trace) == [
        {
            "step_id": 0,
            "type": "thought",
            "content": "Read the bars, then compute the CAGR with code.",
            "latency_ms": 9095.0,
        },
        {
            "step_id": 1,
            "type": "tool_call",
            "tool": {"name": "code_interpreter"},
            "input": {
                "code": "r = (18.4 / 11.2) ** (1 / 3) - 1\nprint(round(r * 100, 2))",
                "container_id": "cntr_68f1a0",
            },
        },
        {
            "step_id": 2,
            "type": "observation",
            "content": "17.99",
            "tool": {"name": "code_interpreter"},
        },
        {
            "step_id": 3,
            "type": "tool_call",
            "tool": {"name": "web_search"},
            "input": {"action": {"type": "search", "query": "Contoso 10-K 2024 revenue"}},
        },
        {
            "step_id": 4,
            "type": "observation",
            "content": '{"status": "completed", "sources": [{"type": "url", '
            '"url": "https://investors.contoso.example/10-k-2024"}]}',
            "tool": {"name": "web_search"},
        },
        {
            "step_id": 5,
            "type": "thought",
            "content": "[image/png] https://files.contoso.example/charts/cagr.png",
        },
        {
            "step_id": 6,
            "type": "thought",
            "content": "Revenue grew from $11.2B (2021) to $18.4B (2024): a compound annual "
            "growth of about 18.0%, matching the 2024 10-K.",
        },
    ]
    # The image in the user's message is neither a step nor the objective.
    assert trace.task.objective.startswith("What is the compound growth")
    assert "base64" not in trace.to_json() and "AAECAwQF" not in trace.to_json()
    assert_round_trips(trace)


def test_blob_in_an_output_is_a_placeholder() -> None:
    export = load("otel_server_tools.json")
    attrs = export["resourceSpans"][0]["scopeSpans"][0]["spans"][1]["attributes"]
    blob = base64.b64encode(b"\x89PNG" + bytes(24 * 1024 - 4)).decode()
    output = [
        {
            "role": "assistant",
            "parts": [
                {"type": "blob", "modality": "image", "mime_type": "image/png", "content": blob}
            ],
        }
    ]
    for attr in attrs:
        if attr["key"] == "gen_ai.output.messages":
            attr["value"] = {"stringValue": json.dumps(output)}
    (trace,) = from_otel(export)
    assert [s.content for s in trace.steps] == ["[image/png, 24 KB]"]


def test_azure_tool_message_keeps_its_tool() -> None:
    (trace,) = from_otel(load("otel_azure_events.json"))
    assert steps(trace) == [
        {
            "step_id": 0,
            "type": "tool_call",
            "tool": {"name": "get_weather"},
            "input": {"city": "Seattle"},
        },
        {
            "step_id": 1,
            "type": "observation",
            "content": '{"temperature_c": 11, "conditions": "light rain"}',
            "tool": {"name": "get_weather"},
        },
        {
            "step_id": 2,
            "type": "thought",
            "content": "It's 11 °C with light rain in Seattle.",
            "latency_ms": 700.0,
        },
    ]


def test_collector_batches_group_by_trace_and_a_missing_root_is_noted() -> None:
    [unit] = _units(UNITS / "otel_collector_batches.jsonl")
    assert [r.line for r in unit.records] == [1, 2, 3]
    assert unit.problems == []
    whole, rootless = unit.traces
    assert [s.type for s in whole.steps] == ["tool_call", "observation", "thought"]
    assert whole.metadata.success is True
    assert _kp_import(whole)["otel_span_id"] == "e100000000000001"
    assert "notes" not in _kp_import(whole)
    assert rootless.task.objective == "The checkout pod is stuck in CrashLoopBackOff; restart it."
    assert _kp_import(rootless) == {
        "format": "otel",
        "source_id": "1f2e3d4c5b6a79880796a5b4c3d2e1f0",
        "defaulted": ["success", "confidence", "task_domain"],
        "objective_from": "user_message",
        "otel_trace_id": "1f2e3d4c5b6a79880796a5b4c3d2e1f0",
        "notes": ["root span missing"],
        # The id of the root that never arrived, known from its children.
        "otel_span_id": "f200000000000001",
        "model": "claude-sonnet-4-5",
    }


def test_console_exporter_one_span_per_line() -> None:
    [unit] = _units(UNITS / "otel_console_spans.jsonl")
    assert [r.line for r in unit.records] == [1, 2, 3, 4]
    (trace,) = unit.traces
    assert trace.id == "kp:trace:otel:0x7e2a1c9d4b3f48e6a5d2c1b0f9e8d7c6"
    assert trace.metadata.agent_id == "recipe-bot"
    assert [s.type for s in trace.steps] == ["tool_call", "observation", "thought"]
    assert _kp_import(trace)["otel_trace_id"] == "7e2a1c9d4b3f48e6a5d2c1b0f9e8d7c6"
    assert _kp_import(trace)["otel_span_id"] == "5a00000000000001"


def test_log_records_join_their_spans() -> None:
    [unit] = _units(UNITS / "otel_span_logs.jsonl")
    assert [r.line for r in unit.records] == [1, 2]
    (trace,) = unit.traces
    assert steps(trace) == [
        {
            "step_id": 0,
            "type": "tool_call",
            "tool": {"name": "lookup_order"},
            "input": {"order_id": "88412"},
            "latency_ms": 390.0,
        },
        {
            "step_id": 1,
            "type": "observation",
            "content": "OrderNotFound: no order 88412",
            "tool": {"name": "lookup_order"},
            "is_error": True,
        },
        {
            "step_id": 2,
            "type": "error_recovery",
            "content": "I can't find order 88412. Could you check the number on your receipt?",
            "latency_ms": 1190.0,
        },
    ]
    assert trace.task.objective == "Where is my order 88412?"
    assert trace.metadata.success is False


def test_log_only_export_becomes_a_trace() -> None:
    (trace,) = from_otel(load("otel_logs_only.json"))
    assert [(s.type, s.content, s.latency_ms) for s in trace.steps] == [
        ("thought", "Saturn, with 274 confirmed moons.", None)
    ]
    assert trace.task.objective == "Which planet has the most moons?"
    assert _kp_import(trace)["notes"] == ["no spans, only GenAI events (log records)"]
    assert _kp_import(trace)["otel_span_id"] == "5d00000000000001"
    assert _kp_import(trace)["model"] == "gemini-2.5-flash"


def test_vercel_ai_sdk_spans() -> None:
    (trace,) = from_otel(load("otel_vercel_ai.json"))
    assert steps(trace) == [
        {
            "step_id": 0,
            "type": "tool_call",
            "tool": {"name": "getForecast"},
            "input": {"city": "Amsterdam", "day": "tomorrow"},
            "latency_ms": 450.0,
        },
        {
            "step_id": 1,
            "type": "observation",
            "content": '{"rain_mm": 6.5, "chance": 0.8}',
            "tool": {"name": "getForecast"},
        },
        {
            "step_id": 2,
            "type": "thought",
            "content": "Yes: 80% chance of rain (about 6.5 mm) in Amsterdam tomorrow, "
            "so take an umbrella.",
            "latency_ms": 1370.0,
        },
    ]
    assert trace.task.objective == "Do I need an umbrella in Amsterdam tomorrow?"
    assert trace.metadata.agent_id == "travel-assistant"
    assert _kp_import(trace)["model"] == "gpt-4o-2024-08-06"
    assert _kp_import(trace)["otel_span_id"] == "1a00000000000001"


def test_source_ids_as_hex() -> None:
    assert hex_id("0x5A00000000000001") == "5a00000000000001"
    assert hex_id(base64.b64encode(bytes.fromhex("4bf92f3577b34da6a3ce929d0e0e4736")).decode()) == (
        "4bf92f3577b34da6a3ce929d0e0e4736"
    )
    assert hex_id("not-an-id") == "not-an-id"


def test_every_otel_trace_keeps_its_source_ids() -> None:
    for path in sorted(DATA.glob("otel_*.json")) + sorted(UNITS.glob("otel_*.json*")):
        for unit in _units(path):
            for trace in unit.traces:
                ids = _kp_import(trace)
                assert len(ids["otel_trace_id"]) == 32, path
                assert len(ids["otel_span_id"]) == 16, path


def test_importing_twice_gives_the_same_bytes() -> None:
    paths = [
        *sorted(DATA.glob("otel_*.json")),
        *sorted(UNITS.glob("otel_*.json*")),
        *sorted(DATA.glob("openai_agents_*.json")),
        *sorted(UNITS.glob("openai_agents_*.json*")),
        *sorted(DATA.glob("langfuse_*.json")),
    ]

    def run() -> list[str]:
        return [t.to_json() for p in paths for u in _units(p) for t in u.traces]

    first = run()
    assert first and first == run()
    assert all(
        "created_at" not in json.loads(t)["metadata"]["kp_import"]["defaulted"] for t in first
    )


def test_semantic_kernel_console_span_with_content_events() -> None:
    # Real ConsoleLogExporter and ConsoleSpanExporter output of Semantic Kernel (Python, 2024):
    # the span's operation is "chat.completions" and its messages are JSON text in the
    # attributes of its `gen_ai.content.prompt` and `gen_ai.content.completion` events.
    units = _units(DATA / "otel" / "semantic_kernel_console.jsonl")
    # The log record is not a GenAI event, but it is of the span's trace: one run, one record
    # in the accounting (lines 1 and 26 together).
    assert [([r.line for r in u.records], u.counted, u.problems, len(u.traces)) for u in units] == [
        ([1, 26], 1, [], 1)
    ]
    (trace,) = units[0].traces
    assert trace.task.objective == "Why is the sky blue in one sentence?"
    assert [(s["type"], s.get("content")) for s in steps(trace)] == [
        (
            "thought",
            "The sky appears blue because shorter blue wavelengths of sunlight are scattered "
            "in all directions by the molecules and particles in the atmosphere more "
            "effectively than other colors.",
        )
    ]
    assert _kp_import(trace)["otel_trace_id"] == "e23e2c10785ea61ffc9f28be19482a80"
    assert _kp_import(trace)["notes"] == ["root span missing"]


def test_the_semantic_kernel_console_output_is_one_record_in_the_accounting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.jsonl"
    fixture = DATA / "otel" / "semantic_kernel_console.jsonl"
    assert main(["import", str(fixture), "--from", "auto", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "records in: 1 = processed 1 + rejected 0; traces written: 1" in err


def _console_log(body: str, trace_id: str, span_id: str) -> dict[str, Any]:
    # A log record as the Python SDK's ConsoleLogExporter prints it (no GenAI event name).
    return {
        "body": body,
        "severity_text": "INFO",
        "attributes": {"code.function": "log_function_invoking"},
        "timestamp": "2024-09-13T17:55:45.504983Z",
        "trace_id": trace_id,
        "span_id": span_id,
    }


def test_a_plain_log_record_of_no_run_is_counted_and_reported(tmp_path: Path) -> None:
    # One record of the Semantic Kernel run, then two plain log records that belong to no run
    # in the file: one of another trace, one with no trace context (the all-zero id). Each is
    # a record rejected with why (the reader adds its line), not a record that became nothing.
    lines = (DATA / "otel" / "semantic_kernel_console.jsonl").read_text(encoding="utf-8")
    span = json.loads(lines[lines.index('{\n    "name"') :])
    path = tmp_path / "console.jsonl"
    records = [
        span,
        _console_log("Kernel started.", "0x" + "ab" * 16, "0x" + "cd" * 8),
        _console_log("Process started.", "0x" + "0" * 32, "0x" + "0" * 16),
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    units = _units(path)
    assert [([r.line for r in u.records], u.counted, u.problems, len(u.traces)) for u in units] == [
        ([1], 1, [], 1),
        (
            [2],
            1,
            [
                "a log record with no GenAI content, of no run in this file (trace "
                "0xabababababababababababababababab): nothing to import"
            ],
            0,
        ),
        (
            [3],
            1,
            ["a log record with no GenAI content and no trace context: nothing to import"],
            0,
        ),
    ]
