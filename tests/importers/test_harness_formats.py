"""The agent-harness formats (Claude Code, Codex, Inspect AI, SWE-agent, mini-SWE-agent,
OpenHands, tau2-bench): golden results of real public files, detection across every fixture,
reproducibility, and the objective and failure rules on lines written for each rule.

Fixtures live in ``tests/data/importers/<format>/`` with their origin in ``SOURCE.md``; each
golden result in ``<format>/expected/<file>.json``. After a deliberate change, regenerate them
and review the diff:

    KP_UPDATE_GOLDEN=1 PYTHONPATH=src python -m pytest tests/importers/test_harness_formats.py
"""

from __future__ import annotations

import json
import os
import zipfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from knowledgepulse.cli import main
from knowledgepulse.importers import (
    ConversionError,
    convert,
    detect_format,
    from_claude_code,
    from_codex,
    from_inspect,
    from_mini_swe_agent,
    from_openhands,
    from_tau2,
    read_traces,
    read_traces_from_paths,
)
from knowledgepulse.io._reader import iter_records

from ._util import DATA, steps

UPDATE = os.environ.get("KP_UPDATE_GOLDEN") == "1"
FORMAT_DIRS = {
    "claude_code": "claude-code",
    "codex": "codex",
    "inspect": "inspect",
    "swe_agent": "swe-agent",
    "mini_swe_agent": "mini-swe-agent",
    "openhands": "openhands",
    "tau2": "tau2",
    "harbor_traces": "harbor-traces",
    "anthropic_managed_agents": "anthropic-managed-agents",
}
HARNESS_FIXTURES = sorted(
    path
    for folder in FORMAT_DIRS
    for path in (DATA / folder).iterdir()
    if path.is_file() and path.name != "SOURCE.md"
)
# The API formats' fixtures, named <format>_*.json (tests/importers/test_detection.py).
API_FIXTURES = sorted(
    p for p in [*DATA.glob("*.json"), *(DATA / "units").glob("*.json*")] if p.is_file()
)
_API_PREFIXES = sorted(
    (
        (name.replace("-", "_"), name)
        for name in (
            "openai-responses",
            "openai-agents",
            "openai",
            "anthropic",
            "otel",
            "langfuse",
            "langsmith",
            "atif",
            "gemini",
            "bedrock",
        )
    ),
    key=lambda p: -len(p[0]),
)


def _format_of(path: Path) -> str:
    if path.parent.name in FORMAT_DIRS:
        return FORMAT_DIRS[path.parent.name]
    return next(
        name
        for prefix, name in _API_PREFIXES
        if path.name.startswith(prefix) and path.name[len(prefix)] in "_."
    )


def _outcome(path: Path, fmt: str = "auto") -> list[dict[str, Any]]:
    units = []
    for unit in read_traces_from_paths([str(path)], fmt):
        units.append(
            {
                "records": [[r.line, r.index] for r in unit.records],
                "format": unit.format,
                "problems": unit.problems,
                "traces": [trace.to_dict() for trace in unit.traces],
            }
        )
    return units


@pytest.mark.parametrize("fixture", HARNESS_FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture_matches_its_golden_file(fixture: Path) -> None:
    expected_file = fixture.parent / "expected" / f"{fixture.name}.json"
    outcome = _outcome(fixture)
    if UPDATE:
        expected_file.parent.mkdir(exist_ok=True)
        text = json.dumps(outcome, indent=2, ensure_ascii=False) + "\n"
        expected_file.write_text(text, encoding="utf-8")
    assert expected_file.exists(), "no golden file; run with KP_UPDATE_GOLDEN=1 to write it"
    assert outcome == json.loads(expected_file.read_text(encoding="utf-8"))


@pytest.mark.parametrize("fixture", HARNESS_FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_each_fixture_is_whole_runs_with_no_problem(fixture: Path) -> None:
    units = _outcome(fixture)
    assert all(unit["problems"] == [] for unit in units)
    assert all(len(unit["traces"]) >= 1 for unit in units)


@pytest.mark.parametrize("fixture", HARNESS_FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_naming_the_format_gives_what_detection_gives(fixture: Path) -> None:
    assert _outcome(fixture, FORMAT_DIRS[fixture.parent.name]) == _outcome(fixture)


@pytest.mark.parametrize(
    "fixture", [*API_FIXTURES, *HARNESS_FIXTURES], ids=lambda p: f"{p.parent.name}/{p.name}"
)
def test_detection_picks_each_fixtures_own_format_only(fixture: Path) -> None:
    expected = _format_of(fixture)
    formats = {unit.format for unit in read_traces_from_paths([str(fixture)], "auto")}
    # A malformed fixture may hold records no format claims ("auto"), never another format's.
    assert formats - {"auto"} == {expected}


def test_every_harness_format_has_a_fixture_with_a_source() -> None:
    for folder, name in FORMAT_DIRS.items():
        assert (DATA / folder / "SOURCE.md").is_file(), name
        assert any(_format_of(p) == name for p in HARNESS_FIXTURES), name


@pytest.mark.parametrize("fixture", HARNESS_FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_importing_twice_gives_identical_bytes(
    fixture: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outputs = []
    for attempt in (1, 2):
        out = tmp_path / f"out{attempt}.jsonl"
        assert main(["import", str(fixture), "--from", "auto", "-o", str(out)]) == 0
        outputs.append(out.read_bytes())
    capsys.readouterr()
    assert outputs[0] == outputs[1]
    assert outputs[0].count(b"\n") >= 1


def test_kp_score_reads_every_fixture_without_an_internal_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["score", "--from", "auto", *map(str, HARNESS_FIXTURES)])
    out, err = capsys.readouterr()
    assert code in (0, 1)
    assert "Traceback" not in err and "internal error" not in err.lower()
    assert err.count("rejected 0") == 1
    ids = {json.loads(line)["id"] for line in out.splitlines()}
    assert "kp:trace:tau2:retail:task-2:trial-0" in ids
    assert "kp:trace:swe-agent:SWE-agent__test-repo-i1" in ids


# -- Claude Code ------------------------------------------------------------------------------


def _cc(kind: str, uuid: str, content: Any, **extra: Any) -> dict[str, Any]:
    return {
        "type": kind,
        "uuid": uuid,
        "parentUuid": None,
        "isSidechain": False,
        "sessionId": "s-1",
        "timestamp": f"2026-01-01T00:00:{len(uuid):02d}Z",
        "message": {"role": kind, "content": content},
        **extra,
    }


def test_claude_code_skips_harness_text_for_the_objective_and_keeps_it_as_context() -> None:
    lines = [
        _cc(
            "user",
            "u1",
            "Caveat: The messages below were generated by the user while running local commands.",
            isMeta=True,
        ),
        _cc(
            "user",
            "u22",
            "<command-name>/clear</command-name>\n<command-message>clear</command-message>",
        ),
        _cc(
            "user",
            "u333",
            "<system-reminder>Plan mode is on.</system-reminder>\nFix the failing build",
        ),
        _cc(
            "assistant",
            "a4444",
            [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "make"}}],
        ),
        _cc(
            "user",
            "u55555",
            [{"type": "tool_result", "tool_use_id": "t1", "content": "exit 2", "is_error": True}],
        ),
        _cc(
            "assistant",
            "a666666",
            [{"type": "text", "text": "The build needs a header; adding it."}],
        ),
    ]
    [trace] = from_claude_code(lines)
    data = trace.to_dict()
    assert data["task"]["objective"] == "Fix the failing build"
    kp_import = data["metadata"]["kp_import"]
    assert kp_import["objective_from"] == "user_message"
    assert kp_import["context"] == [
        "Caveat: The messages below were generated by the user while running local commands.",
        "<command-name>/clear</command-name>\n<command-message>clear</command-message>",
    ]
    assert [(s["type"], s.get("is_error", False)) for s in steps(trace)] == [
        ("tool_call", False),
        ("observation", True),
        ("error_recovery", False),
    ]


def test_claude_code_lines_are_one_unit_and_problems_name_their_line(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    lines = [
        _cc("user", "u1", "Rename the module"),
        _cc("assistant", "a22", [{"type": "text", "text": "Renaming."}]),
        _cc("assistant", "a333", 7),
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    [unit] = list(read_traces_from_paths([str(path)], "auto"))
    assert unit.format == "claude-code"
    # One run, one record (located at its first line), holding every line.
    [record] = unit.records
    assert (record.line, record.index, len(record.data)) == (1, None, 3)
    assert unit.problems == ["line 3: message.content: expected an array, got a number"]


def test_claude_code_subagent_file_is_its_own_run_with_its_own_id(tmp_path: Path) -> None:
    session = tmp_path / "s-1.jsonl"
    session.write_text(
        json.dumps(_cc("user", "u1", "Survey the repo"))
        + "\n"
        + json.dumps(_cc("assistant", "a22", [{"type": "text", "text": "Asking a subagent."}]))
        + "\n",
        encoding="utf-8",
    )
    agent = tmp_path / "s-1" / "subagents" / "agent-x1.jsonl"
    agent.parent.mkdir(parents=True)
    side = {"isSidechain": True, "agentId": "x1"}
    agent.write_text(
        json.dumps(_cc("user", "u3", "List src/", **side))
        + "\n"
        + json.dumps(_cc("assistant", "a44", [{"type": "text", "text": "src/ has a.py"}], **side))
        + "\n",
        encoding="utf-8",
    )
    units = read_traces_from_paths([str(tmp_path)], "auto")
    traces = sorted((t.to_dict() for u in units for t in u.traces), key=lambda t: t["id"])
    assert [(t["id"], t["task"]["objective"]) for t in traces] == [
        ("kp:trace:claude-code:s-1", "Survey the repo"),
        ("kp:trace:claude-code:s-1:agent-x1", "List src/"),
    ]
    assert traces[1]["metadata"]["kp_import"]["parent_session"] == "s-1"
    assert "source" not in traces[1]["steps"][0]


# -- Codex -----------------------------------------------------------------------------------


def _cx(kind: str, payload: dict[str, Any], second: int = 0) -> dict[str, Any]:
    return {"timestamp": f"2026-02-01T00:00:{second:02d}Z", "type": kind, "payload": payload}


def _user_item(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def test_codex_skips_agents_md_and_environment_context_for_the_objective() -> None:
    lines = [
        _cx("session_meta", {"id": "cx-1", "cwd": "/w"}),
        _cx("response_item", _user_item("# AGENTS.md instructions for /w\n\nUse ruff.")),
        _cx(
            "response_item",
            _user_item("<environment_context>\n  <cwd>/w</cwd>\n</environment_context>"),
        ),
        _cx("response_item", _user_item("Make the parser accept trailing commas")),
        _cx(
            "response_item",
            {
                "type": "function_call",
                "name": "shell",
                "call_id": "c1",
                "arguments": '{"command":["pytest"]}',
            },
        ),
        _cx(
            "response_item",
            {
                "type": "function_call_output",
                "call_id": "c1",
                "output": '{"output":"1 failed","metadata":{"exit_code":1,"duration_seconds":2.5}}',
            },
        ),
        _cx(
            "response_item",
            {
                "type": "message",
                "role": "assistant",
                "content": [
                    {"type": "output_text", "text": "One test fails; fixing the tokenizer."}
                ],
            },
        ),
    ]
    [trace] = from_codex(lines)
    data = trace.to_dict()
    assert data["task"]["objective"] == "Make the parser accept trailing commas"
    assert data["metadata"]["kp_import"]["objective_from"] == "user_message"
    assert len(data["metadata"]["kp_import"]["context"]) == 2
    observation = steps(trace)[1]
    assert observation["content"] == "1 failed"
    assert observation["is_error"] is True
    assert observation["latency_ms"] == 2500.0
    assert steps(trace)[2]["type"] == "error_recovery"


@pytest.mark.parametrize(
    ("output", "events", "failed"),
    [
        (
            "Chunk ID: 1\nWall time: 0.1 seconds\nProcess exited with code 2\nOutput:\nno such file",
            [],
            True,
        ),
        ("Chunk ID: 1\nProcess exited with code 0\nOutput:\nok", [], False),
        ("plain output", [{"type": "exec_command_end", "call_id": "c1", "exit_code": 1}], True),
        ("plain output", [{"type": "exec_command_end", "call_id": "c1", "exit_code": 0}], False),
    ],
)
def test_codex_marks_a_non_zero_exit_code_as_a_failure(
    output: str, events: list[dict[str, Any]], failed: bool
) -> None:
    lines = [
        _cx("event_msg", {"type": "user_message", "message": "List the files"}),
        _cx(
            "response_item",
            {
                "type": "function_call",
                "name": "exec_command",
                "call_id": "c1",
                "arguments": '{"cmd":"ls x"}',
            },
        ),
        *(_cx("event_msg", event) for event in events),
        _cx("response_item", {"type": "function_call_output", "call_id": "c1", "output": output}),
    ]
    [trace] = from_codex(lines)
    assert steps(trace)[1].get("is_error", False) is failed


def test_codex_rollout_from_before_september_2025_is_read_too(tmp_path: Path) -> None:
    # The bare format, as codex-cli wrote it until September 2025 (lines written from the
    # format's description in public rollout readers; no such file was found public).
    lines = [
        {"id": "cccc", "timestamp": "2025-09-02T17:17:41.762Z", "instructions": None},
        {"record_type": "state"},
        _user_item("<environment_context>\n  <cwd>/w</cwd>\n</environment_context>"),
        _user_item("Why is the build slow?"),
        {
            "type": "function_call",
            "name": "shell",
            "call_id": "c1",
            "arguments": '{"command":["make"]}',
        },
        {
            "type": "function_call_output",
            "call_id": "c1",
            "output": '{"output":"ok","metadata":{"exit_code":0}}',
        },
        {"record_type": "state"},
    ]
    path = tmp_path / "rollout-2025-09-02T17-17-41-cccc.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    [unit] = list(read_traces_from_paths([str(path)], "auto"))
    assert (unit.format, unit.problems) == ("codex", [])
    [trace] = unit.traces
    data = trace.to_dict()
    assert data["id"] == "kp:trace:codex:cccc"
    assert data["task"]["objective"] == "Why is the build slow?"
    assert [s["type"] for s in data["steps"]] == ["tool_call", "observation"]


# -- Inspect AI ------------------------------------------------------------------------------


def _inspect_log(sample: dict[str, Any]) -> dict[str, Any]:
    return {
        "version": 2,
        "status": "success",
        "eval": {"task": "arith", "task_id": "T1", "model": "m", "created": "2025-01-01T00:00:00Z"},
        "samples": [sample],
    }


def test_inspect_scores_target_and_tool_errors() -> None:
    sample = {
        "id": "q7",
        "epoch": 2,
        "input": "What is 6*7?",
        "target": "42",
        "messages": [
            {"role": "user", "content": "What is 6*7?", "source": "input"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "c1", "function": "python", "arguments": {"code": "6*7"}}],
            },
            {
                "role": "tool",
                "tool_call_id": "c1",
                "function": "python",
                "content": "",
                "error": {"type": "timeout", "message": "Command timed out"},
            },
            {"role": "assistant", "content": "42"},
        ],
        "scores": {"match": {"value": "I"}, "other": {"value": 1}},
    }
    [trace] = from_inspect(_inspect_log(sample))
    data = trace.to_dict()
    assert data["id"] == "kp:trace:inspect:T1:sample-q7:epoch-2"
    assert data["metadata"]["success"] is False
    assert data["metadata"]["ground_truth"] == {"target": "42"}
    assert data["metadata"]["kp_import"]["scores"] == {"match": "I", "other": 1}
    assert [(s["type"], s.get("content"), s.get("is_error", False)) for s in steps(trace)] == [
        ("tool_call", None, False),
        ("observation", "Command timed out", True),
        ("error_recovery", "42", False),
    ]


def test_inspect_input_that_only_instructs_gives_way_to_the_question_after_it() -> None:
    # The real upstream log: the sample's input tells the model how to answer ("... answer
    # any questions ... using the type of lingo that Gen Z would use"), and the task's
    # input_solver then sends the question, before the model's first answer.
    fixture = DATA / "inspect" / "2024-11-05T13-31-45-05-00_input-task_8zXjbRzCWrL9GXiXo2vus9.json"
    [unit] = list(read_traces_from_paths([str(fixture)], "auto"))
    [trace] = unit.traces
    data = trace.to_dict()
    assert data["task"]["objective"] == (
        "What is average low temperature in St. Paul, Minnesota during the month of February?"
    )
    kp_import = data["metadata"]["kp_import"]
    assert kp_import["objective_from"] == "user_message"
    assert kp_import["objective_context"] == [
        "Hey there, hipster! Please answer any questions that I answer using the type of "
        "lingo that Gen Z would use."
    ]
    # The question is the objective, not also a user turn.
    assert [s["type"] for s in data["steps"]] == ["thought"]


def test_inspect_input_that_is_a_task_stays_the_objective() -> None:
    # A solver's user message after a real task (an instruction about the answer) is a user
    # turn; the input, a task, stays the objective.
    sample = {
        "id": 3,
        "epoch": 1,
        "input": "What is 6*7?",
        "messages": [
            {"role": "user", "content": "What is 6*7?", "source": "input"},
            {"role": "user", "content": "Answer with a number only."},
            {"role": "assistant", "content": "42"},
        ],
    }
    [trace] = from_inspect(_inspect_log(sample))
    data = trace.to_dict()
    assert data["task"]["objective"] == "What is 6*7?"
    assert data["metadata"]["kp_import"]["objective_from"] == "task_field"
    assert [(s["type"], s.get("content")) for s in data["steps"]] == [
        ("observation", "Answer with a number only."),
        ("thought", "42"),
    ]
    # A question the user asks after the model answered is a later turn, not the task.
    sample["messages"] = [
        {"role": "user", "content": "Be concise and answer in lingo.", "source": "input"},
        {"role": "assistant", "content": "Sure."},
        {"role": "user", "content": "What is 6*7?"},
        {"role": "assistant", "content": "42"},
    ]
    sample["input"] = "Be concise and answer in lingo."
    [trace] = from_inspect(_inspect_log(sample))
    data = trace.to_dict()
    assert data["task"]["objective"] == "Be concise and answer in lingo."
    assert data["metadata"]["kp_import"]["objective_from"] == "task_field"


def test_inspect_sample_that_crashed_is_a_failed_run_not_a_rejection() -> None:
    sample = {
        "id": 1,
        "epoch": 1,
        "input": "Do it",
        "messages": [],
        "error": {"message": "RuntimeError: sandbox died"},
    }
    [trace] = from_inspect(_inspect_log(sample))
    data = trace.to_dict()
    assert data["metadata"]["success"] is False
    assert steps(trace) == [
        {
            "step_id": 0,
            "type": "observation",
            "content": "RuntimeError: sandbox died",
            "is_error": True,
            "source": "harness",
        }
    ]


def test_inspect_eval_archive_problems_name_the_sample_file(tmp_path: Path) -> None:
    archive = tmp_path / "run.eval"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("header.json", json.dumps({"version": 2, "eval": {"task_id": "T"}}))
        z.writestr(
            "samples/1_epoch_1.json", json.dumps({"id": 1, "input": "a", "messages": [{"role": 3}]})
        )
        z.writestr(
            "samples/2_epoch_1.json",
            json.dumps(
                {"id": 2, "input": "b", "messages": [{"role": "assistant", "content": "done"}]}
            ),
        )
    units = list(read_traces_from_paths([str(archive)], "auto"))
    assert [(u.format, u.records[0].index, u.problems, len(u.traces)) for u in units] == [
        (
            "inspect",
            0,
            ["samples/1_epoch_1.json: messages[0].role: expected a string, got a number"],
            0,
        ),
        ("inspect", 1, [], 1),
    ]


# -- mini-SWE-agent ------------------------------------------------------------------------


def test_mini_swe_agent_object_takes_the_task_out_of_its_template() -> None:
    template = "<pr_description>\nConsider the following PR description:\n{{task}}\n</pr_description>\n\n<instructions>\nFix it.\n</instructions>"
    record = {
        "trajectory_format": "mini-swe-agent-1.1",
        "info": {
            "exit_status": "LimitsExceeded",
            "config": {"agent": {"instance_template": template}},
        },
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": template.replace("{{task}}", "Dates parse as UTC")},
            {"role": "assistant", "content": "THOUGHT: look\n\n```mswea_bash_command\nls\n```"},
            {
                "role": "user",
                "content": "Please always provide EXACTLY ONE action in triple backticks.",
            },
            {
                "role": "assistant",
                "content": "THOUGHT: again\n\n```mswea_bash_command\nls src\n```",
            },
            {"role": "user", "content": "<returncode>0</returncode>\n<output>\na.py\n</output>"},
        ],
    }
    assert detect_format(record) == "mini-swe-agent"
    [trace] = from_mini_swe_agent(record)
    data = trace.to_dict()
    assert data["task"]["objective"] == "Dates parse as UTC"
    assert data["metadata"]["kp_import"]["objective_from"] == "template:instance_template"
    assert data["metadata"]["success"] is False
    assert [(s["type"], s.get("source"), s.get("is_error", False)) for s in steps(trace)] == [
        ("thought", None, False),
        ("tool_call", None, False),
        ("observation", "harness", True),
        ("error_recovery", None, False),
        ("tool_call", None, False),
        ("observation", None, False),
    ]


# -- OpenHands -------------------------------------------------------------------------------


def _oh(n: int, source: str, **fields: Any) -> dict[str, Any]:
    return {"id": n, "timestamp": f"2025-01-01T00:00:0{n}", "source": source, **fields}


def test_openhands_error_observations_and_exit_codes_are_failures() -> None:
    events = [
        _oh(
            0, "user", action="message", args={"content": "Run the tests"}, message="Run the tests"
        ),
        _oh(1, "agent", action="run", args={"command": "pytest", "thought": "Running them."}),
        _oh(
            2,
            "agent",
            observation="run",
            cause=1,
            content="1 failed",
            extras={"metadata": {"exit_code": 1}},
        ),
        _oh(
            3,
            "agent",
            action="run",
            args={"command": "pytest -x", "thought": "Again, stopping early."},
        ),
        _oh(4, "agent", observation="error", cause=3, content="", message="Command timed out"),
        _oh(5, "agent", observation="agent_state_changed", extras={"agent_state": "error"}),
    ]
    [trace] = from_openhands(events)
    data = trace.to_dict()
    assert data["metadata"]["success"] is False
    assert [
        (s["type"], (s.get("tool") or {}).get("name"), s.get("is_error", False))
        for s in steps(trace)
    ] == [
        ("thought", None, False),
        ("tool_call", "run", False),
        ("observation", "run", True),
        ("error_recovery", None, False),
        ("tool_call", "run", False),
        ("observation", "run", True),
    ]
    assert steps(trace)[5]["content"] == "Command timed out"


def test_openhands_action_with_an_unhashable_id_is_read_not_a_crash() -> None:
    """Found by the property test below: an action whose id is a list raised TypeError
    (unhashable) inside the importer, an internal error for `kp import`."""
    events = [
        _oh(0, "user", action="message", args={"content": "List files"}, message="List files"),
        {**_oh(1, "agent", action="run", args={"command": "ls"}), "id": []},
        _oh(2, "agent", observation="run", cause=1, content="a.txt"),
    ]
    [trace] = from_openhands(events)
    assert [s["type"] for s in steps(trace)][:2] == ["tool_call", "observation"]


def test_openhands_list_is_one_record_unit_with_element_locations(tmp_path: Path) -> None:
    path = tmp_path / "trajectory.json"
    events = [
        _oh(0, "user", action="message", args={"content": "Hi"}),
        "not an event",
        _oh(2, "agent", action="message", args={"content": "Hello"}),
    ]
    path.write_text(json.dumps(events), encoding="utf-8")
    [unit] = list(read_traces_from_paths([str(path)], "openhands"))
    [record] = unit.records
    assert record.data == events
    assert unit.problems == ["[1]: expected an object, got a string"]


def test_openhands_evaluation_output_lines_are_a_run_each(tmp_path: Path) -> None:
    def line(instance: str) -> dict[str, Any]:
        return {
            "instance_id": instance,
            "instruction": f"Fix {instance}",
            "history": [
                _oh(0, "user", action="message", args={"content": f"Fix {instance}"}),
                _oh(1, "agent", action="run", args={"command": "make", "thought": "Build."}),
                _oh(2, "agent", observation="run", cause=1, content="ok", extras={"exit_code": 0}),
            ],
            "test_result": {"resolved": True},
        }

    path = tmp_path / "output.jsonl"
    path.write_text("".join(json.dumps(line(i)) + "\n" for i in ("a-1", "b-2")), encoding="utf-8")
    units = list(read_traces_from_paths([str(path)], "auto"))
    assert [(u.format, len(u.records), [t.id for t in u.traces]) for u in units] == [
        ("openhands", 1, ["kp:trace:openhands:a-1"]),
        ("openhands", 1, ["kp:trace:openhands:b-2"]),
    ]
    data = units[0].traces[0].to_dict()
    assert data["task"]["objective"] == "Fix a-1"
    assert data["metadata"]["kp_import"]["objective_from"] == "task_field"
    assert [s["type"] for s in data["steps"]] == ["thought", "tool_call", "observation"]


# -- tau2-bench ------------------------------------------------------------------------------


def test_tau2_error_tool_message_reward_and_ground_truth() -> None:
    task = {
        "id": "7",
        "evaluation_criteria": {
            "actions": [{"name": "cancel_order", "arguments": {"order_id": "#1"}}]
        },
    }
    results = {
        "info": {"environment_info": {"domain_name": "airline"}},
        "tasks": [task],
        "simulations": [
            {
                "task_id": "7",
                "trial": 1,
                "reward_info": {"reward": 1.0},
                "messages": [
                    {"role": "user", "content": "Cancel order #1"},
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {"id": "t1", "name": "cancel_order", "arguments": {"order_id": "1"}}
                        ],
                    },
                    {
                        "role": "tool",
                        "id": "t1",
                        "content": "Error: order not found",
                        "error": True,
                        "requestor": "assistant",
                    },
                    {"role": "assistant", "content": "Let me use the full id."},
                    {"role": "user", "content": "Thanks ###STOP###"},
                ],
            }
        ],
    }
    assert detect_format(results) == "tau2"
    [trace] = from_tau2(results)
    data = trace.to_dict()
    assert data["id"] == "kp:trace:tau2:airline:task-7:trial-1"
    assert data["metadata"]["success"] is True
    assert data["metadata"]["ground_truth"] == {"task": task, "reward_info": {"reward": 1.0}}
    assert [(s["type"], s.get("is_error", False)) for s in steps(trace)] == [
        ("tool_call", False),
        ("observation", True),
        ("error_recovery", False),
        ("observation", False),
    ]
    assert steps(trace)[3]["content"] == "Thanks"


def test_tau2_each_simulation_is_a_record_rejected_on_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = {
        "task_id": "1",
        "messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}],
    }
    broken = {"task_id": "2", "messages": [{"role": 5}]}
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"info": {}, "tasks": [], "simulations": [good, broken]}))
    units = list(read_traces_from_paths([str(path)], "auto"))
    assert [(u.records[0].index, len(u.traces), u.problems) for u in units] == [
        (0, 1, []),
        (1, 0, ["simulations[1].messages[0].role: expected a string, got a number"]),
    ]
    out = tmp_path / "out.jsonl"
    assert main(["import", str(path), "--from", "auto", "-o", str(out)]) == 1
    assert "records in: 2 = processed 1 + rejected 1; traces written: 1" in capsys.readouterr().err


def test_tau2_broken_simulation_is_named_by_its_index() -> None:
    results = {"tasks": [], "simulations": [{"task_id": "1", "messages": [{"role": 5}]}]}
    with pytest.raises(ConversionError) as info:
        convert("tau2", results)
    assert str(info.value) == "simulations[0].messages[0].role: expected a string, got a number"


# -- binary files and directories ------------------------------------------------------------


def test_a_binary_file_is_refused_once_naming_what_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    image = tmp_path / "screenshot.json"
    image.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40 + b"\n" * 70)
    out = tmp_path / "out.jsonl"
    assert main(["import", str(image), "--from", "auto", "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.count("this is a PNG image, not JSON records") == 1
    assert "not valid UTF-8" not in err
    assert "records in: 1 = processed 0 + rejected 1" in err


def test_an_eval_archive_given_to_kp_score_as_traces_says_how_to_read_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    archive = next(p for p in HARNESS_FIXTURES if p.suffix == ".eval")
    assert main(["score", str(archive)]) == 1
    err = capsys.readouterr().err
    assert err.count("this is an Inspect AI log (.eval, a zip archive)") == 1
    assert "--from inspect" in err


@pytest.mark.parametrize("fixture", HARNESS_FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_accounting_counts_runs(fixture: Path) -> None:
    units = list(read_traces_from_paths([str(fixture)], "auto"))
    runs = sum(len(unit.traces) for unit in units)
    assert sum(len(unit.records) for unit in units) == runs


def test_a_directory_scan_reads_traj_and_eval_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    for fixture in HARNESS_FIXTURES:
        if fixture.suffix in (".traj", ".eval"):
            (folder / fixture.name).write_bytes(fixture.read_bytes())
    out = tmp_path / "out.jsonl"
    assert main(["import", str(folder), "--from", "auto", "-o", str(out)]) == 0
    capsys.readouterr()
    ids = sorted(json.loads(line)["id"] for line in out.read_text().splitlines())
    assert ids == [
        "kp:trace:inspect:8zXjbRzCWrL9GXiXo2vus9:sample-1:epoch-1",
        "kp:trace:inspect:EHs43QJtJ23ZJpyduMvxLY:sample-1:epoch-1",
        "kp:trace:inspect:FhdYWFJ77GkBBV8uKGRTuQ:sample-0:epoch-1",
        # SWE-agent 0.x trajectories name no run: their ids are hashes of the record.
        "kp:trace:swe-agent:07caf9c859938aef",
        "kp:trace:swe-agent:29948ba2f8ea1d5c",
        "kp:trace:swe-agent:628485c4aefc8892",
        "kp:trace:swe-agent:SWE-agent__test-repo-i1",
        "kp:trace:swe-agent:d938acfe4932de6a",
    ]


# -- no input makes an importer fail other than with a reported problem ---------------------

_JSON_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=3),
    st.sampled_from(["", "x", "<returncode>1</returncode>", "2026-01-01T00:00:00Z"]),
    st.just([]),
    st.just({}),
    st.just([1, "a", None]),
)


def _locations(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found.extend(_locations(item, (*path, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(_locations(item, (*path, index)))
    return found


def _replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    copy = value.copy()
    copy[path[0]] = _replaced(value[path[0]], path[1:], new)
    return copy


_JSON_FIXTURES = [p for p in HARNESS_FIXTURES if p.suffix != ".eval"]


@pytest.mark.parametrize("fixture", _JSON_FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_value_changed_anywhere_is_a_problem_or_a_trace_never_a_crash(
    fixture: Path, data: st.DataObject
) -> None:
    records = [r for r in iter_records([str(fixture)]) if r.error is None]
    position = data.draw(st.integers(0, len(records) - 1))
    target = records[position]
    path = data.draw(st.sampled_from(_locations(target.data)))
    changed = replace(target, data=_replaced(target.data, path, data.draw(_JSON_VALUES)))
    records[position] = changed
    for fmt in ("auto", FORMAT_DIRS[fixture.parent.name]):
        for unit in read_traces(records, fmt):
            assert unit.traces or unit.problems


def test_a_record_whose_type_is_not_text_is_rejected_not_an_internal_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Detection once looked a list-valued "type" up in a set: "unhashable type: 'list'".
    path = tmp_path / "odd.jsonl"
    path.write_text('{"type": [], "content": "x"}\n', encoding="utf-8")
    assert main(["import", str(path), "--from", "auto", "-o", str(tmp_path / "o.jsonl")]) == 1
    err = capsys.readouterr().err
    assert "internal error" not in err
    assert "could not detect the format" in err


@pytest.mark.parametrize("name", sorted(set(FORMAT_DIRS.values())))
def test_an_empty_list_is_a_problem_for_every_harness_format(name: str) -> None:
    with pytest.raises(ConversionError):
        convert(name, [])


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("claude-code", "not a Claude Code session"),
        ("codex", "not a Codex rollout"),
        ("inspect", "expected an Inspect AI log"),
        ("swe-agent", "not a SWE-agent trajectory"),
        ("mini-swe-agent", "expected a mini-SWE-agent trajectory"),
        ("openhands", "not an OpenHands trajectory"),
        ("tau2", "not tau2-bench results"),
        ("harbor-traces", "not a Harbor traces-export row"),
    ],
)
def test_naming_the_wrong_format_says_the_file_is_not_that_format(
    name: str, message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Not "no user message ... (pass objective=...)": the user named a format the file is not.
    chat = DATA / "openai_chat.json"
    assert main(["import", str(chat), "--from", name, "-o", str(tmp_path / "o.jsonl")]) == 1
    err = capsys.readouterr().err
    assert message in err
    assert "pass objective" not in err


def test_inspect_keeps_the_tools_its_model_calls_were_given() -> None:
    # A real Inspect run (guess_number, 5 bash calls): each model event lists the tools the
    # model was given; known_tools and valid_arguments decide on them.
    from knowledgepulse.behaviours import Finding, known_tools, valid_arguments

    (unit,) = read_traces_from_paths([str(DATA / "inspect" / "guess_number_bash.eval")], "auto")
    (trace,) = unit.traces
    tools = (trace.metadata.model_extra or {})["kp_import"]["tool_definitions"]
    assert [tool["name"] for tool in tools] == ["bash", "python"]
    assert tools[0]["parameters"]["required"] == ["cmd"]
    assert known_tools(trace) == Finding(True, "all 5 tool calls use one of the 2 declared tools")
    assert valid_arguments(trace) == Finding(
        True, "the arguments of 5 calls match their tools' schemas"
    )
