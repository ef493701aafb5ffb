"""kp diff: two trace files, two ids of a base, two evaluation outputs; gates and bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from _helpers import TAU_BENCH, make_trace
from knowledgepulse.cli import main

from .test_evaluations import line

TASK0 = "kp:trace:openai:tau-bench:task-0:trial-"


def kp(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def write_jsonl(path: Path, rows: list[Any]) -> str:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def test_two_tau_bench_attempts(capsys: pytest.CaptureFixture[str]) -> None:
    tau = str(TAU_BENCH)
    code, out, err = kp(
        capsys, "diff", tau, tau, "--from", "openai", "--id", TASK0 + "0", "--id", TASK0 + "1"
    )
    assert (code, err) == (0, "")
    assert max(len(row) for row in out.splitlines()) <= 80
    assert "First call that differs: step 4 of A, step 4 of B: different steps." in out
    assert "  confirmed_before_write: regressed (passed on A, failed on B)" in out
    assert "    payment_methods[0].amount: 250 -> 100" in out
    code, out, _ = kp(
        capsys, "diff", tau, tau, "--from", "openai", "--id", TASK0 + "0", "--id", TASK0 + "1",
        "--json", "--fail-on-regression",
    )  # fmt: skip
    assert code == 1
    data = json.loads(out)
    assert (data["schema"], data["kind"], data["a"]["id"]) == (
        "knowledgepulse.diff/1",
        "traces",
        TASK0 + "0",
    )
    assert data["flipped"][0]["steps_b"] == [15, 19]


def test_identical_and_missing_and_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one = write_jsonl(tmp_path / "one.jsonl", [make_trace()])
    code, out, _ = kp(capsys, "diff", one, one)
    assert code == 0
    assert "Identical: the two traces are exact copies (the same copy digest)." in out
    # A copy stored under another id, in another file, is the same run.
    copy = write_jsonl(tmp_path / "copy.jsonl", [make_trace(trace_id="kp:trace:copy")])
    code, out, _ = kp(capsys, "diff", one, copy, "--no-rubric")
    assert code == 0
    assert "Identical: the two traces are exact copies (the same copy digest)." in out
    code, _, err = kp(capsys, "diff", one, one, "--id", "kp:trace:nope")
    assert code == 2
    assert err == f"kp: error: {one}: no trace with id 'kp:trace:nope' (read 1 traces)\n"
    empty = write_jsonl(tmp_path / "empty.jsonl", [])
    code, _, err = kp(capsys, "diff", one, empty)
    assert (code, err) == (2, f"kp: error: {empty}: holds no trace to compare\n")
    stepless = make_trace()
    stepless["steps"] = []
    no_steps = write_jsonl(tmp_path / "no-steps.jsonl", [stepless])
    code, _, err = kp(capsys, "diff", one, no_steps)
    assert code == 2
    assert err.startswith(f"kp: error: {no_steps}: holds no trace to compare: {no_steps}:1: ")
    assert "steps" in err
    code, _, err = kp(capsys, "diff", one, str(tmp_path / "absent.jsonl"))
    assert code == 2 and "absent.jsonl: no such file" in err
    code, _, err = kp(capsys, "diff", one, "-")
    assert code == 2 and "kp diff reads two files, not standard input" in err


def test_traces_without_tool_calls_say_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chat = make_trace([{"type": "thought", "content": "Hello"}], trace_id="kp:trace:chat")
    other = make_trace([{"type": "thought", "content": "Hi there"}], trace_id="kp:trace:chat2")
    a = write_jsonl(tmp_path / "a.jsonl", [chat])
    b = write_jsonl(tmp_path / "b.jsonl", [other])
    code, out, err = kp(capsys, "diff", a, b, "--no-rubric")
    assert (code, err) == (0, "")
    assert "Note: A (kp:trace:chat) made no tool call: aligned by its messages only" in out
    assert "Note: B (kp:trace:chat2) made no tool call: aligned by its messages only" in out
    assert "Parted at step 0 of A, step 0 of B: different steps." in out


def test_evaluation_outputs_gate_and_junit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = write_jsonl(
        tmp_path / "before.jsonl",
        [
            line("c1", 1.0, True, True, "successful_completion"),
            line("c2", 0.5, True, False, "graceful_failure"),
        ],
    )
    after = write_jsonl(
        tmp_path / "after.jsonl",
        [
            line("c1", 0.5, True, False, "graceful_failure"),
            line("c2", 0.5, True, False, "graceful_failure"),
        ],
    )
    code, out, _ = kp(capsys, "diff", before, after)
    assert code == 0
    assert "Paired by id: 2 pairs; only in A: 0, only in B: 0." in out
    junit = tmp_path / "diff.xml"
    code, out, err = kp(
        capsys, "diff", before, after, "--fail-on-regression", "--junit", str(junit)
    )
    assert code == 1
    assert (
        "gate failed: criterion y: pass rate 50.0% -> 0.0% (1 case(s) flipped pass -> fail)" in err
    )
    xml = junit.read_text()
    assert 'failures="1"' in xml and "criterion y: pass rate 50.0% -&gt; 0.0%" in xml
    code, _, _ = kp(capsys, "diff", before, before, "--fail-on-regression", "--junit", str(junit))
    assert code == 0 and 'failures="0"' in junit.read_text()
    other = write_jsonl(
        tmp_path / "other.jsonl",
        [line("c1", 1.0, True, True, "successful_completion", rubric="mine")],
    )
    code, _, err = kp(capsys, "diff", before, other)
    assert code == 2
    assert f"{before} was graded with rubric 'agent' and {other} with rubric 'mine'" in err
    traces = write_jsonl(tmp_path / "traces.jsonl", [make_trace()])
    code, _, err = kp(capsys, "diff", before, traces)
    assert code == 2 and "both be traces or both be kp eval / kp score outputs" in err


def test_usage_errors_and_schema(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = kp(capsys, "diff", "a")
    assert code == 2 and "Missing argument 'B'" in err
    code, _, err = kp(capsys, "diff", "a", "b", "--id", "1", "--id", "2", "--id", "3")
    assert code == 2 and "give at most two ids" in err
    code, out, _ = kp(capsys, "schema", "diff")
    schema = json.loads(out)
    assert code == 0
    assert set(schema["discriminator"]["mapping"]) == {"traces", "evaluations"}


def test_ids_in_a_knowledge_base(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from knowledgepulse.kb import EmbeddingIdentity, StoredTrace, open_knowledge_base

    base = str(tmp_path / "kb.sqlite")
    identity = EmbeddingIdentity(model="hashing", dimensions=4, windowing="whole")
    first = make_trace(trace_id="kp:trace:one")
    second = make_trace(trace_id="kp:trace:two", objective="Review PR #43 for security issues")
    second["steps"] = second["steps"][:2]
    with open_knowledge_base(base, identity, create=True) as kb:
        kb.add_many(
            [
                StoredTrace(id=t["id"], trace=t, vector=np.eye(4, dtype=np.float32)[i])
                for i, t in enumerate([first, second])
            ]
        )
    code, out, err = kp(capsys, "diff", "kp:trace:one", "kp:trace:two", "--kb", base, "--json")
    assert (code, err) == (0, "")
    data = json.loads(out)
    assert (data["a"]["id"], data["b"]["id"], data["b"]["steps"]) == (
        "kp:trace:one",
        "kp:trace:two",
        2,
    )
    code, _, err = kp(capsys, "diff", "kp:trace:one", "kp:trace:nope", "--kb", base)
    assert (code, err) == (2, f"kp: error: {base}: no trace with id 'kp:trace:nope'\n")
