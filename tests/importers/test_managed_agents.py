"""Anthropic Managed Agents session events: the real session (a custom tool answered by the
caller) as a JSONL file, a list and a page; each event kind; what is refused."""

from __future__ import annotations

import json
from typing import Any

import pytest

from knowledgepulse.importers import ConversionError, convert, read_traces_from_paths

from ._util import DATA, steps

FIXTURE = DATA / "anthropic_managed_agents" / "custom_tools_events.jsonl"
EVENTS = [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines()]


def _event(kind: str, ident: str, **fields: Any) -> dict[str, Any]:
    return {"id": ident, "type": kind, "processed_at": "2026-07-06T14:16:30Z", **fields}


def test_the_real_session_is_its_task_its_custom_tool_call_and_the_answer() -> None:
    (unit,) = read_traces_from_paths([str(FIXTURE)], "auto")
    assert unit.format == "anthropic-managed-agents"
    (trace,) = unit.traces
    assert trace.task.objective == "What's the weather in Prague?"
    assert steps(trace) == [
        {
            "step_id": 0,
            "type": "tool_call",
            "tool": {"name": "get_weather"},
            "input": {"location": "Prague"},
        },
        {
            "step_id": 1,
            "type": "observation",
            "content": "It's 23°C and sunny in Prague.",
            "tool": {"name": "get_weather"},
        },
        {
            "step_id": 2,
            "type": "thought",
            "content": "It's currently **23°C and sunny** in Prague — a nice, warm day overall!",
        },
    ]
    # Where each step is in the file: its line and the event's id.
    assert [(s.model_extra or {})["origin"] for s in trace.steps] == [
        {"line": 5, "event_id": "sevt_018iPB2RYrthWNKugV6ehDxH"},
        {"line": 9, "event_id": "sevt_01N6qTAumErPqiuFkK6syGod"},
        {"line": 13, "event_id": "sevt_01Q8GarQqkPv2TRV9LF6FKxd"},
    ]
    imported = (trace.metadata.model_extra or {})["kp_import"]
    assert imported["stop_reason"] == "end_turn"
    assert imported["usage"] == {
        "input_tokens": 4,
        "output_tokens": 80,
        "cache_read_input_tokens": 14472,
        "cache_creation_input_tokens": 0,
    }
    assert trace.metadata.agent_id == "Coding Assistant"
    assert trace.metadata.created_at.isoformat() == "2026-07-06T14:16:30.476746+00:00"


@pytest.mark.parametrize("shape", ["list", "page"])
def test_a_list_of_events_and_a_page_of_them_read_as_the_file_does(shape: str) -> None:
    record: Any = EVENTS if shape == "list" else {"data": EVENTS, "has_more": False}
    (trace,) = convert("auto", record)
    (from_file,) = next(iter(read_traces_from_paths([str(FIXTURE)], "auto"))).traces
    assert steps(trace) == steps(from_file)
    where = "record" if shape == "list" else "data"
    assert (trace.steps[0].model_extra or {})["origin"] == {
        where: 4,
        "event_id": "sevt_018iPB2RYrthWNKugV6ehDxH",
    }


def test_each_kind_of_event() -> None:
    events = [
        _event("user.message", "e1", content=[{"type": "text", "text": "Fix the build."}]),
        _event("agent.thinking", "e2", thinking="The build log first."),
        _event("agent.tool_use", "e3", name="bash", input={"command": "make"}),
        _event(
            "agent.tool_result",
            "e4",
            tool_use_id="e3",
            is_error=True,
            content=[{"type": "text", "text": "make: *** [all] Error 2"}],
        ),
        _event("agent.mcp_tool_use", "e5", name="search", mcp_server_name="docs", input={"q": "x"}),
        _event("agent.mcp_tool_result", "e6", mcp_tool_use_id="e5", content="found"),
        _event("agent.tool_use", "e7", name="write", input={"path": "a"}),
        _event("user.tool_confirmation", "e8", tool_use_id="e7", result="deny", deny_message="no"),
        _event("user.interrupt", "e9"),
        _event("session.error", "e10", error={"type": "overloaded", "message": "Overloaded"}),
        _event("session.status_terminated", "e11"),
    ]
    (trace,) = convert("anthropic-managed-agents", events)
    assert trace.task.objective == "Fix the build."
    assert [(s.type, s.content) for s in trace.steps] == [
        ("thought", "The build log first."),
        ("tool_call", None),
        ("observation", "make: *** [all] Error 2"),
        ("error_recovery", None),  # the first action after the failed make
        ("observation", "found"),
        ("tool_call", None),
        ("observation", "denied by the user: no"),
        ("observation", "[the user interrupted the agent]"),
        ("observation", "Overloaded"),
    ]
    data = trace.to_dict()["steps"]
    assert data[2]["is_error"] is True and data[2]["tool"] == {"name": "bash"}
    assert data[3]["tool"] == {"name": "search", "mcp_server": "docs"}
    assert data[6]["is_error"] is True and data[6]["tool"] == {"name": "write"}
    assert data[7]["source"] == "user"
    assert data[8]["source"] == "harness" and data[8]["is_error"] is True
    assert trace.metadata.success is False
    assert (trace.metadata.model_extra or {})["kp_import"]["stop_reason"] == "terminated"


def test_a_call_without_a_tool_name_is_refused_naming_the_field() -> None:
    events = [
        _event("user.message", "e1", content="Hi"),
        _event("agent.tool_use", "e2", name=["bash"], input={}),
    ]
    with pytest.raises(ConversionError, match=r"\[1\]\.name: expected the tool's name as text"):
        convert("anthropic-managed-agents", events)
