"""LangSmith ingestion batches (``{post, patch}``): merged by run id over one file's records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from knowledgepulse.cli import main
from knowledgepulse.importers import ConversionError, convert, detect_format, read_traces
from knowledgepulse.io._reader import iter_records

from ._util import DATA, steps

FIXTURE = DATA / "langsmith_batch" / "sdk_batches.jsonl"
ROOT = "0d9b8e7a-0000-4000-8000-000000000001"
TOOL = "0d9b8e7a-0000-4000-8000-000000000002"
LOST = "0d9b8e7a-0000-4000-8000-000000000003"


def _root_post(**extra: Any) -> dict[str, Any]:
    return {
        "id": ROOT,
        "trace_id": ROOT,
        "parent_run_id": None,
        "dotted_order": f"20250101T000000000000Z{ROOT}",
        "name": "agent",
        "run_type": "chain",
        "start_time": "2025-01-01T00:00:00Z",
        "end_time": None,
        "inputs": {"question": "How many open tickets?"},
        **extra,
    }


def _tool_post(**extra: Any) -> dict[str, Any]:
    return {
        "id": TOOL,
        "trace_id": ROOT,
        "parent_run_id": ROOT,
        "dotted_order": f"20250101T000000000000Z{ROOT}.20250101T000001000000Z{TOOL}",
        "name": "count_tickets",
        "run_type": "tool",
        "start_time": "2025-01-01T00:00:01Z",
        "inputs": {"state": "open"},
        **extra,
    }


def _root_patch(**extra: Any) -> dict[str, Any]:
    return {
        "id": ROOT,
        "trace_id": ROOT,
        "end_time": "2025-01-01T00:00:03Z",
        "outputs": {"output": "There are 4 open tickets."},
        "inputs": None,
        "error": None,
        **extra,
    }


def _tool_patch() -> dict[str, Any]:
    return {
        "id": TOOL,
        "trace_id": ROOT,
        "end_time": "2025-01-01T00:00:02Z",
        "outputs": {"output": "4"},
    }


def _units(tmp_path: Path, lines: list[Any], fmt: str = "auto") -> list[Any]:
    path = tmp_path / "batches.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return list(read_traces(iter_records([str(path)]), fmt))


def test_fixture_is_one_trace_from_three_batch_records() -> None:
    (unit,) = read_traces(iter_records([str(FIXTURE)]), "auto")
    assert unit.format == "langsmith-batch"
    assert [r.line for r in unit.records] == [1, 2, 3]
    assert unit.counted == 1
    assert unit.problems == []
    (trace,) = unit.traces
    assert trace.id == "kp:trace:langsmith:1ef95a12-7c3e-4f0b-9d35-6a2f0c9e4b10"
    assert trace.task.objective == "What is the weather in Lisbon right now, in Celsius?"
    # The root run's outputs come from the patch in the last record.
    assert trace.outcome.result_summary == "It is 19 °C and partly cloudy in Lisbon right now."
    assert [s["type"] for s in steps(trace)] == ["tool_call", "observation", "thought"]
    assert steps(trace)[0]["input"] == {"city": "Lisbon", "unit": "celsius"}


def test_post_then_patch_in_two_records_is_one_run(tmp_path: Path) -> None:
    lines = [
        {"post": [_root_post(), _tool_post()]},
        {"patch": [_tool_patch(), _root_patch()]},
    ]
    (unit,) = _units(tmp_path, lines)
    assert unit.format == "langsmith-batch"
    assert [r.line for r in unit.records] == [1, 2]
    assert unit.problems == []
    (trace,) = unit.traces
    # From the post: the objective (the patch's inputs: null keeps the post's inputs).
    assert trace.task.objective == "How many open tickets?"
    # From the patch: the outputs and the end time.
    assert trace.outcome.result_summary == "There are 4 open tickets."
    assert steps(trace) == [
        {
            "step_id": 0,
            "type": "tool_call",
            "tool": {"name": "count_tickets"},
            "input": {"state": "open"},
            "latency_ms": 1000.0,
        },
        {"step_id": 1, "type": "observation", "tool": {"name": "count_tickets"}, "content": "4"},
    ]


def test_a_patch_before_its_post_is_merged_too(tmp_path: Path) -> None:
    lines = [{"patch": [_root_patch(), _tool_patch()]}, {"post": [_root_post(), _tool_post()]}]
    (unit,) = _units(tmp_path, lines, "langsmith-batch")
    assert unit.problems == []
    assert unit.traces[0].outcome.result_summary == "There are 4 open tickets."


def test_patch_fields_win_over_the_post() -> None:
    batch = {
        "post": [_root_post(outputs={"output": "draft"}), _tool_post()],
        "patch": [_root_patch(error="RateLimitError: 429")],
    }
    (trace,) = convert("langsmith-batch", batch)
    assert trace.outcome.result_summary == "There are 4 open tickets."
    assert trace.metadata.success is False


def test_a_second_post_of_a_run_is_applied_as_its_patch() -> None:
    batches = [
        {"post": [_root_post(), _tool_post()]},
        {"post": [_root_post(**_root_patch())]},
    ]
    (trace,) = convert("langsmith-batch", batches)
    assert trace.outcome.result_summary == "There are 4 open tickets."


def test_a_patch_without_its_post_is_rejected_naming_the_run(tmp_path: Path) -> None:
    lost = {**_tool_patch(), "id": LOST}
    lines = [
        {"post": [_root_post(), _tool_post()]},
        {"patch": [_root_patch(), _tool_patch(), lost]},
    ]
    units = _units(tmp_path, lines)
    (unit,) = units
    assert unit.problems == [
        f"line 2: patch[2].id: patch of run {LOST} that no post in this file created "
        "(its name, type and inputs are missing)"
    ]
    # The record holding the orphan patch is rejected with the trace it completes; that
    # trace is still converted (nothing lost).
    assert [r.line for r in unit.records] == [1, 2]
    assert len(unit.traces) == 1


def test_api_convert_names_the_orphan_patch() -> None:
    with pytest.raises(ConversionError) as caught:
        convert("langsmith-batch", {"patch": [_tool_patch()]})
    assert [str(p) for p in caught.value.problems] == [
        f"patch[0].id: patch of run {TOOL} that no post in this file created "
        "(its name, type and inputs are missing)"
    ]


def test_runs_without_id_and_bad_batches_are_named() -> None:
    with pytest.raises(ConversionError) as caught:
        convert("langsmith-batch", {"post": [{"run_type": "chain"}, 3], "patch": {}})
    assert [str(p) for p in caught.value.problems] == [
        "post[0].id: expected the run's id (a patch is matched to its post by id)",
        "post[1]: expected an object, got a number",
        "patch: expected an array, got an object",
    ]


def test_detection_tells_batches_from_runs_and_other_formats() -> None:
    assert detect_format({"post": [_root_post()]}) == "langsmith-batch"
    assert detect_format({"patch": [_root_patch()]}) == "langsmith-batch"
    assert detect_format([{"post": [_root_post()], "patch": []}]) == "langsmith-batch"
    assert detect_format(_root_post()) == "langsmith"
    # post/patch keys alone do not make a batch: the elements must be LangSmith runs.
    assert detect_format({"post": [{"id": 1, "title": "hello"}]}) is None
    assert detect_format({"post": [], "patch": []}) is None
    # A patch may hold only the run's id and what completes it.
    assert detect_format({"patch": [{"id": TOOL, "outputs": {"output": "4"}}]}) == (
        "langsmith-batch"
    )
    assert detect_format({"post": [_root_post()], "headers": {}}) is None


def test_each_format_refused_on_the_other_says_which_to_use(tmp_path: Path) -> None:
    (unit,) = _units(tmp_path, [{"post": [_root_post()]}], "langsmith")
    assert unit.problems == [
        "a LangSmith ingestion batch ({post, patch}): use --from langsmith-batch"
    ]
    (unit,) = _units(tmp_path, [_root_post()], "langsmith-batch")
    assert unit.problems == [
        'not a LangSmith ingestion batch (expected {"post": [run, ...], "patch": [run, ...]})'
        "; it looks like langsmith: use --from langsmith"
    ]


def test_kp_score_and_import_read_the_fixture(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["score", "--from", "auto", str(FIXTURE)]) in (0, 1)
    outputs = []
    for n in range(2):
        out = tmp_path / f"out{n}.jsonl"
        assert main(["import", str(FIXTURE), "--from", "langsmith-batch", "-o", str(out)]) == 0
        outputs.append(out.read_bytes())
    err = capsys.readouterr().err
    assert "records in: 1 = processed 1 + rejected 0; traces written: 1" in err
    assert outputs[0] == outputs[1]


def test_a_json_list_of_batches_is_one_stream(tmp_path: Path) -> None:
    path = tmp_path / "batches.json"
    lost = {**_tool_patch(), "id": LOST}
    batches = [{"post": [_root_post(), _tool_post()]}, {"patch": [_root_patch(), lost]}]
    path.write_text(json.dumps(batches), encoding="utf-8")
    (unit,) = read_traces(iter_records([str(path)]), "auto")
    assert unit.format == "langsmith-batch"
    assert [r.index for r in unit.records] == [0, 1]
    assert unit.problems == [
        f"[1].patch[1].id: patch of run {LOST} that no post in this file created "
        "(its name, type and inputs are missing)"
    ]
    assert unit.traces[0].outcome.result_summary == "There are 4 open tickets."
