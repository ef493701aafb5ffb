from __future__ import annotations

import json
from pathlib import Path

import pytest

from knowledgepulse.importers import ConversionError, from_langfuse

from ._util import assert_round_trips, load, steps


def test_trace_with_observations() -> None:
    (trace,) = from_langfuse(load("langfuse_trace.json"))
    assert steps(trace) == [
        {
            "step_id": 0,
            "type": "thought",
            "content": "I'll search a paper index sorted by citations.",
            "latency_ms": 1150.0,
        },
        {
            "step_id": 1,
            "type": "tool_call",
            "tool": {"name": "search_papers"},
            "input": {"query": "retrieval-augmented generation", "year": 2024, "sort": "citations"},
            "latency_ms": 2000.0,
        },
        {
            "step_id": 2,
            "type": "observation",
            "content": "TimeoutError: paper index did not answer within 2s",
            "tool": {"name": "search_papers"},
            "is_error": True,
        },
        {"step_id": 3, "type": "observation", "content": '{"attempt": 2, "backoff_s": 0.5}'},
        {
            "step_id": 4,
            "type": "error_recovery",
            "tool": {"name": "search_papers"},
            "input": {"query": "retrieval-augmented generation", "year": 2024, "sort": "citations"},
            "latency_ms": 770.0,
        },
        {
            "step_id": 5,
            "type": "observation",
            "content": '[{"title": "RAG survey 2024", "citations": 812}, {"title": "Self-RAG", '
            '"citations": 640}, {"title": "CRAG", "citations": 402}]',
            "tool": {"name": "search_papers"},
        },
        {
            "step_id": 6,
            "type": "thought",
            "content": "Top 2024 RAG papers by citations: RAG survey 2024 (812), Self-RAG (640), "
            "CRAG (402).",
            "latency_ms": 3340.0,
        },
    ]
    assert trace.id == "kp:trace:langfuse:7d3c1b2a-9e8f-4a6b-8c5d-2e1f0a9b8c7d"
    assert trace.task.objective == (
        "Find the three most-cited 2024 papers on retrieval-augmented generation."
    )
    assert trace.metadata.agent_id == "research-agent"
    assert trace.to_dict()["metadata"]["created_at"] == "2025-11-03T16:20:00Z"
    assert trace.to_dict()["metadata"]["kp_import"]["model"] == "claude-sonnet-4-5"
    assert_round_trips(trace)


def test_an_error_span_fails_once_and_fails_the_trace() -> None:
    trace = load("langfuse_trace.json")
    trace["observations"][0].update(level="ERROR", statusMessage="agent crashed")
    (converted,) = from_langfuse({"data": [trace]})
    assert converted.metadata.success is False
    assert [s.content for s in converted.steps if s.type == "observation" and s.tool is None] == [
        '{"attempt": 2, "backoff_s": 0.5}'
    ]


def test_observation_ids_only_are_refused() -> None:
    trace = load("langfuse_trace.json")
    trace["observations"] = ["obs-agent"]
    with pytest.raises(ConversionError, match=r"observations\[0\]: expected an observation object"):
        from_langfuse(trace)


def test_the_tools_a_generation_was_given_are_kept() -> None:
    # Real exports: Microsoft Agent Framework writes the GenAI conventions'
    # gen_ai.tool.definitions; Agno (through OpenInference) llm.tools.N.tool.json_schema.
    from knowledgepulse.behaviours import known_tools, valid_arguments
    from knowledgepulse.importers import convert

    folder = Path(__file__).parents[1] / "data" / "importers" / "langfuse"
    expected = {
        "microsoft-agent-2025-10-14.json": ["get_weather"],
        "agno-2025-06-11.json": ["duckduckgo_search", "duckduckgo_news"],
    }
    for name, tools in expected.items():
        (trace,) = convert("langfuse", json.loads((folder / name).read_text(encoding="utf-8")))
        declared = (trace.metadata.model_extra or {})["kp_import"]["tool_definitions"]
        assert [tool["name"] for tool in declared] == tools, name
        assert all(tool["parameters"]["type"] == "object" for tool in declared), name
        assert known_tools(trace).passed is True, name
        assert valid_arguments(trace).passed is True, name
