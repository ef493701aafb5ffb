"""The one parser of calls written in message text (``importers/_text_calls.py``): each
convention on a message taken from a real file, and text that only looks like one."""

from __future__ import annotations

import json

import pytest

from knowledgepulse.importers._text_calls import TextCall, calls_in_text

from ._util import DATA


def _agent_messages(name: str) -> list[str]:
    data = json.loads((DATA / "atif" / name).read_text(encoding="utf-8"))
    return [step["message"] for step in data["steps"] if step["source"] == "agent"]


def test_openhands_function_blocks() -> None:
    first = _agent_messages("openhands_no_function_calling.trajectory.json")[0]
    reply = calls_in_text(first)
    assert reply is not None
    assert reply.items == [
        TextCall(
            "execute_bash",
            {
                "command": "cat > /app/hello.txt << 'EOF'\nHello, world!\nEOF",
                "security_risk": "LOW",
            },
        )
    ]


def test_terminus_reply() -> None:
    first = _agent_messages("terminus2_linear_history.trajectory.json")[0]
    reply = calls_in_text(first)
    assert reply is not None
    assert reply.items == [
        "Terminal is ready. Let me create a test directory first.",
        "Create test_dir to set up some context.",
        TextCall("terminal", {"keystrokes": "mkdir test_dir\n", "duration": 0.1}),
    ]


def test_tool_call_blocks_keep_the_text_around_them() -> None:
    rows = json.loads(
        (DATA / "harbor_traces" / "openhands_hello_world.traces.json").read_text(encoding="utf-8")
    )
    last = rows[-1]["conversations"][-1]["content"]
    reply = calls_in_text(last)
    assert reply is not None
    assert reply.items == [
        "All done! What's next on the agenda?",
        TextCall(
            "finish", {"message": "Task complete. Created /app/hello.txt with 'Hello, world!'"}
        ),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "Just an answer.",
        '{"analysis": "the data is skewed", "score": 5}',  # a structured answer, not Terminus
        "The Action: button is disabled.",
        "<tool_call>not json</tool_call>",
    ],
)
def test_text_that_writes_no_call_is_none(text: str) -> None:
    assert calls_in_text(text) is None
