from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

from knowledgepulse.importers import ConversionError, from_atif

from ._util import assert_round_trips, load, steps


def test_fixture_steps() -> None:
    (trace,) = from_atif(load("atif_trajectory.json"))
    assert steps(trace) == [
        {
            "step_id": 0,
            "type": "thought",
            "content": "Two independent commands: write the file, then check the directory exists.",
        },
        {"step_id": 1, "type": "thought", "content": "I'll write the file and list the directory."},
        {
            "step_id": 2,
            "type": "tool_call",
            "tool": {"name": "bash"},
            "input": {"command": "echo 'Hello, world!' > /app/hello.txt"},
        },
        {
            "step_id": 3,
            "type": "tool_call",
            "tool": {"name": "bash"},
            "input": {"command": "ls /app"},
        },
        {
            "step_id": 4,
            "type": "observation",
            "tool": {"name": "bash"},
            "is_error": True,
            "content": "bash: /app/hello.txt: No such file or directory",
        },
        {
            "step_id": 5,
            "type": "observation",
            "tool": {"name": "bash"},
            "is_error": True,
            "content": "ls: cannot access '/app': No such file or directory",
        },
        {
            "step_id": 6,
            "type": "error_recovery",
            "tool": {"name": "bash"},
            "input": {
                "command": "mkdir -p /app && echo 'Hello, world!' > /app/hello.txt "
                "&& cat /app/hello.txt"
            },
        },
        {"step_id": 7, "type": "observation", "tool": {"name": "bash"}, "content": "Hello, world!"},
        {
            "step_id": 8,
            "type": "thought",
            "content": "Created /app/hello.txt; it contains 'Hello, world!'.",
        },
    ]
    assert trace.id == "kp:trace:atif:8C1F5B7E-2D4A-4F0B-9E21-5A6C3D9B0F11"
    assert trace.task.objective.startswith("Create hello.txt containing")
    assert trace.metadata.agent_id == "terminus-2"
    assert trace.metadata.created_at == datetime(2025, 10, 20, 8, 15, tzinfo=timezone.utc)
    assert trace.to_dict()["metadata"]["kp_import"] == {
        "format": "atif",
        "source_id": "8C1F5B7E-2D4A-4F0B-9E21-5A6C3D9B0F11",
        "defaulted": ["success", "confidence", "task_domain"],
        "objective_from": "user_message",
        "model": "claude-sonnet-4-5",
    }
    assert_round_trips(trace)


def test_is_error_flag_marks_the_result_failed() -> None:
    (trace,) = from_atif(load("atif_failed_flag.json"), success=False)
    assert [s.type for s in trace.steps] == [
        "thought",
        "tool_call",
        "observation",
        "error_recovery",
    ]
    assert trace.metadata.success is False
    assert trace.outcome.confidence == 1.0


def test_malformed_source_names_the_path() -> None:
    with pytest.raises(ConversionError) as info:
        from_atif(load("atif_malformed.json"))
    assert str(info.value) == (
        "steps[2].source: expected one of 'system', 'user', 'agent' (got 'assistant')"
    )


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"arguments": "[1]"}, r"steps\[1\]\.tool_calls\[0\]\.arguments: expected a JSON object"),
        ({"arguments": 7}, r"steps\[1\]\.tool_calls\[0\]\.arguments: expected an object"),
        ({"function_name": ""}, r"steps\[1\]\.tool_calls\[0\]\.function_name: must be a non-empty"),
    ],
)
def test_malformed_tool_calls(patch: dict[str, Any], message: str) -> None:
    record = load("atif_malformed.json")
    record["steps"] = record["steps"][:2]
    record["steps"][1]["tool_calls"][0].update(patch)
    with pytest.raises(ConversionError, match=message):
        from_atif(record)


def test_missing_steps() -> None:
    with pytest.raises(ConversionError, match="steps: expected an array, got null"):
        from_atif({"schema_version": "ATIF-v1.4", "session_id": "s", "agent": {"name": "a"}})


def test_subagent_and_system_observations() -> None:
    (trace,) = from_atif(
        {
            "schema_version": "ATIF-v1.5",
            "session_id": "parent-1",
            "agent": {"name": "planner", "version": "0.3"},
            "steps": [
                {
                    "step_id": 1,
                    "source": "user",
                    "message": [{"type": "text", "text": "Plan a trip."}],
                },
                {
                    "step_id": 2,
                    "source": "agent",
                    "message": "Delegating the search.",
                    "tool_calls": [
                        {"tool_call_id": "d1", "function_name": "delegate", "arguments": {}}
                    ],
                    "observation": {
                        "results": [
                            {
                                "source_call_id": "d1",
                                "subagent_trajectory_ref": [
                                    {"session_id": "child-7", "trajectory_path": "child-7.json"}
                                ],
                            }
                        ]
                    },
                },
                {
                    "step_id": 3,
                    "source": "system",
                    "message": "context compacted",
                    "observation": {"results": [{"content": "Context summarised to 2k tokens."}]},
                },
                {"step_id": 4, "source": "agent", "message": "Trip planned."},
            ],
        }
    )
    assert [(s.type, s.content) for s in trace.steps] == [
        ("thought", "Delegating the search."),
        ("tool_call", None),
        ("observation", "subagent child-7"),
        ("observation", "Context summarised to 2k tokens."),
        ("thought", "Trip planned."),
    ]
    assert trace.task.objective == "Plan a trip."
    assert_round_trips(trace)
