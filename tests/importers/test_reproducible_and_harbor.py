"""Same input, same bytes out; tau-bench's ground truth; Harbor job directories; LangSmith
runs dumped by ``list_runs()``; ATIF 1.7 subagents and images."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from knowledgepulse.cli import main
from knowledgepulse.importers import (
    convert,
    from_atif,
    from_langsmith,
    read_traces,
    read_traces_from_paths,
)
from knowledgepulse.io._reader import iter_records

from ._util import DATA, TAU_CORPUS, TAU_SAMPLE, load, steps

HARBOR_JOB = DATA / "harbor_job"


def _import_bytes(path: Path) -> bytes:
    units = read_traces(iter_records([str(path)]), "openai")
    return b"".join(t.to_json().encode() + b"\n" for unit in units for t in unit.traces)


def test_importing_tau_bench_twice_gives_the_same_bytes() -> None:
    path = TAU_CORPUS if TAU_CORPUS.exists() else TAU_SAMPLE
    first = _import_bytes(path)
    assert first == _import_bytes(path)
    trace = json.loads(first.splitlines()[0])
    assert trace["metadata"]["created_at"] == "1970-01-01T00:00:00Z"
    assert "created_at" in trace["metadata"]["kp_import"]["defaulted"]


def test_ids_without_a_source_id_come_from_the_content() -> None:
    messages = [
        {"role": "user", "content": "Ping?"},
        {"role": "assistant", "content": "Pong."},
    ]
    first, second = convert("openai", messages), convert("openai", json.loads(json.dumps(messages)))
    assert first[0].to_json() == second[0].to_json()
    assert (
        first[0].id == "kp:trace:openai:" + first[0].to_dict()["metadata"]["kp_import"]["source_id"]
    )


def test_tau_bench_info_is_the_ground_truth() -> None:
    records = json.loads(TAU_SAMPLE.read_text(encoding="utf-8"))
    traces = convert("openai", records)
    for record, trace in zip(records, traces, strict=True):
        assert trace.to_dict()["metadata"]["ground_truth"] == record["info"]
    actions = traces[0].to_dict()["metadata"]["ground_truth"]["task"]["actions"]
    assert actions == records[0]["info"]["task"]["actions"]


# -- LangSmith ------------------------------------------------------------------------------


def test_list_runs_lines_of_one_trace_are_one_trace() -> None:
    units = list(
        read_traces(iter_records([str(DATA / "units" / "langsmith_list_runs.jsonl")]), "auto")
    )
    assert [(len(u.records), len(u.traces), u.problems) for u in units] == [(3, 1, [])]
    trace = units[0].traces[0]
    assert trace.id == "kp:trace:langsmith:1f0b9c2e-7a41-6d3e-9b58-0c4a2e7f1d90"
    # The LangGraph tuple ("user", text) is a message, not the word "user".
    assert trace.task.objective == "What is 17% of 2,340 rounded to the nearest whole number?"
    # The call is both a tool_use block and a tool_calls entry of one AIMessage: one step.
    assert [(s.type, s.tool.name if s.tool else None, s.content) for s in trace.steps] == [
        ("thought", None, "I'll compute it."),
        ("tool_call", "calculator", None),
        ("observation", "calculator", "397.8"),
        ("observation", None, "Round it, please."),
        ("thought", None, "398"),
    ]


def test_runs_without_ids_keep_their_siblings() -> None:
    runs = [
        {"id": "root", "run_type": "chain", "inputs": {"question": "Weather?"}},
        {"parent_run_id": "root", "run_type": "tool", "name": "a", "outputs": {"output": "1"}},
        {"parent_run_id": "root", "run_type": "tool", "name": "b", "outputs": {"output": "2"}},
        {
            "run_type": "llm",
            "inputs": {"input": "Other?"},
            "outputs": {"role": "assistant", "content": "X"},
        },
        {
            "run_type": "llm",
            "inputs": {"input": "Third?"},
            "outputs": {"role": "assistant", "content": "Y"},
        },
    ]
    traces = convert("langsmith", runs)
    assert [[s.tool.name for s in t.steps if s.tool] for t in traces] == [
        ["a", "a", "b", "b"],
        [],
        [],
    ]
    assert len({t.id for t in traces}) == 3
    with pytest.raises(ValueError, match="found 3 root runs"):
        from_langsmith(runs)


# -- ATIF -----------------------------------------------------------------------------------


def test_atif_17_subagents_tool_definitions_and_images() -> None:
    (trace,) = from_atif(load("atif_v17_subagents.json"))
    data = trace.to_dict()
    assert data["steps"][2]["content"] == "[image/png: images/step_2_settings.png]"
    marked = [(s["type"], s.get("source")) for s in data["steps"][5:12]]
    assert marked == [
        ("observation", None),
        ("observation", "subagent:explore-1"),
        ("thought", "subagent:explore-1"),
        ("tool_call", "subagent:explore-1"),
        ("observation", "subagent:explore-1"),
        ("thought", "subagent:explore-1"),
        ("thought", None),
    ]
    definitions = data["metadata"]["kp_import"]["tool_definitions"]
    assert [d["function"]["name"] for d in definitions] == ["Bash", "Task", "Screenshot"]
    assert data["id"] == "kp:trace:atif:run-2025-11-04-0917"


def test_atif_subagent_no_result_names_comes_last() -> None:
    record = load("atif_v17_subagents.json")
    del record["steps"][2]["observation"]
    (trace,) = from_atif(record)
    assert [s.get("source") for s in steps(trace)][-5:] == ["subagent:explore-1"] * 5


# -- Harbor job directories -----------------------------------------------------------------


def test_a_harbor_job_is_one_trace_per_trial() -> None:
    units = list(read_traces_from_paths([str(HARBOR_JOB)], "auto"))
    summary = [
        (
            [Path(r.source).relative_to(HARBOR_JOB).as_posix() for r in u.records],
            [(t.id, t.metadata.success) for t in u.traces],
            u.problems,
        )
        for u in units
    ]
    assert summary == [
        (
            ["build-cache__Qz1vN/result.json"],
            [],
            ["trial build-cache__Qz1vN: the agent left no agent/trajectory.json"],
        ),
        (
            ["fix-permissions__Lm8rT/agent/trajectory.json"],
            [("kp:trace:atif:9c2d7e11-perms", False)],
            [],
        ),
        (
            ["hello-world__Xk3pQ/agent/trajectory.json"],
            [("kp:trace:atif:4b1e0f7a-hello", True)],
            [],
        ),
    ]
    kp_import = units[2].traces[0].to_dict()["metadata"]["kp_import"]
    assert kp_import["reward"] == 1.0
    assert kp_import["trial"] == "hello-world__Xk3pQ"
    assert kp_import["task"] == "hello-world"
    assert "success" not in kp_import["defaulted"]


def test_a_trial_file_named_alone_still_gets_its_reward() -> None:
    path = HARBOR_JOB / "fix-permissions__Lm8rT" / "agent" / "trajectory.json"
    (unit,) = read_traces_from_paths([str(path)], "atif")
    assert unit.traces[0].metadata.success is False
    (plain,) = read_traces_from_paths([str(path)], "trace")
    assert plain.problems  # as a ReasoningTrace it is rejected, as before


def test_unknown_format_is_refused_before_reading() -> None:
    with pytest.raises(ValueError, match="unknown format 'nope'"):
        read_traces_from_paths([str(HARBOR_JOB)], "nope")


def test_kp_import_reads_a_harbor_job(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "traces.jsonl"
    code = main(["import", "--from", "atif", str(HARBOR_JOB), "-o", str(out)])
    _, err = capsys.readouterr()
    assert code == 1, err  # the trial without a trajectory is rejected
    traces = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(t["id"], t["metadata"]["success"]) for t in traces] == [
        ("kp:trace:atif:9c2d7e11-perms", False),
        ("kp:trace:atif:4b1e0f7a-hello", True),
    ]
    assert "records in: 3 = processed 2 + rejected 1" in err
