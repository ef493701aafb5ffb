"""read_traces: units of records, what each unit consumed, and where its problems are."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from _helpers import load_tau_bench
from knowledgepulse._io import InputRecord, iter_records
from knowledgepulse.importers import (
    Conversion,
    ConversionError,
    ImportOptions,
    read_traces,
)

from ._util import DATA, TAU_CORPUS, TAU_SAMPLE, load

UNITS = DATA / "units"


def _read(
    paths: Iterable[Path], fmt: str, options: ImportOptions | None = None
) -> list[Conversion]:
    """The units of the files, checking that every record is in exactly one of them."""
    records = list(iter_records([str(p) for p in paths]))
    units = list(read_traces(records, fmt, options))
    consumed = [record for unit in units for record in unit.records]
    assert sorted(consumed, key=records.index) == records
    assert len(consumed) == len(records)
    assert all(unit.records for unit in units)
    return units


def _write(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False), encoding="utf-8")
    return path


def _summary(units: list[Conversion]) -> list[tuple[list[tuple[int, int | None]], int, list[str]]]:
    return [
        ([(r.line, r.index) for r in unit.records], len(unit.traces), unit.problems)
        for unit in units
    ]


def test_tau_bench_sample_is_one_unit_per_element() -> None:
    units = _read([TAU_SAMPLE], "openai")
    assert [(len(u.records), len(u.traces), u.problems, u.format) for u in units] == [
        (1, 1, [], "openai")
    ] * 4
    assert [u.records[0].index for u in units] == [0, 1, 2, 3]


@pytest.mark.skipif(not TAU_CORPUS.exists(), reason="the shared tau-bench corpus is not here")
def test_tau_bench_element_with_empty_traj_rejects_only_itself(tmp_path: Path) -> None:
    records = load_tau_bench()
    records[57]["traj"] = []
    path = _write(tmp_path / "airline.json", records)
    units = _read([path], "openai")
    assert len(units) == 200
    assert sum(len(u.traces) for u in units) == 199
    [rejected] = [u for u in units if u.problems]
    assert rejected.traces == []
    assert rejected.problems == ["traj: empty: the run has no steps"]
    [record] = rejected.records
    assert record.index == 57
    # With indent=2, each element starts on a line of its own that reads "  {".
    starts = [n for n, line in enumerate(path.read_text().splitlines(), 1) if line == "  {"]
    assert record.line == starts[57]


def test_broken_tau_bench_element_names_its_field(tmp_path: Path) -> None:
    records = json.loads(TAU_SAMPLE.read_text(encoding="utf-8"))
    records[2]["traj"][3]["role"] = "robot"
    units = _read([_write(tmp_path / "sample.json", records)], "auto")
    assert [u.problems for u in units] == [
        [],
        [],
        [
            "traj[3].role: expected one of 'system', 'developer', 'user', 'assistant', "
            "'tool', 'function' (got 'robot')"
        ],
        [],
    ]
    assert [u.format for u in units] == ["openai"] * 4


def test_a_list_of_messages_is_one_document() -> None:
    units = _read([UNITS / "openai_messages_list.json"], "auto")
    [unit] = units
    assert (len(unit.records), len(unit.traces), unit.problems, unit.format) == (9, 1, [], "openai")
    assert unit.traces[0].task.objective == "What's the weather in Paris and Tokyo right now?"


def test_a_broken_message_rejects_the_whole_conversation_naming_its_element(
    tmp_path: Path,
) -> None:
    messages = load("units/openai_messages_list.json")
    messages[3]["content"] = 5
    units = _read([_write(tmp_path / "chat.json", messages)], "openai")
    assert _summary(units) == [
        (
            [(2, 0), (6, 1), (10, 2), (32, 3), (37, 4), (42, 5), (56, 6), (61, 7), (65, 8)],
            0,
            ["[3].content: expected a string or an array of parts, got a number"],
        )
    ]


def test_anthropic_and_responses_lists_are_documents(tmp_path: Path) -> None:
    anthropic = _write(tmp_path / "claude.json", load("anthropic_messages.json")["messages"])
    response = load("openai_responses.json")
    items = _write(tmp_path / "items.json", response["input"] + response["output"])
    units = _read([anthropic, items], "auto")
    assert [(len(u.records), len(u.traces), u.problems, u.format) for u in units] == [
        (len(load("anthropic_messages.json")["messages"]), 1, [], "anthropic"),
        (len(response["input"]) + len(response["output"]), 1, [], "openai-responses"),
    ]


def test_a_list_cut_short_is_rejected_with_its_parts(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    path.write_text(
        '[\n{"role": "user", "content": "hi"},\n{"role": "assistant", "content": "hello"},\n{"ro',
        encoding="utf-8",
    )
    [unit] = _read([path], "openai")
    assert len(unit.records) == 3 and unit.traces == []
    assert len(unit.problems) == 1 and unit.problems[0].startswith("invalid JSON")


def test_otel_batches_reject_only_the_broken_trace() -> None:
    units = _read([UNITS / "otel_batches.jsonl"], "otel")
    assert _summary(units) == [
        ([(1, None), (3, None)], 1, []),
        (
            [(2, None)],
            0,
            [
                "resourceSpans[0].scopeSpans[0].spans[1].attributes[0].key: expected a string",
            ],
        ),
    ]
    assert units[0].traces[0].id == "kp:trace:otel:4bf92f3577b34da6a3ce929d0e0e4736"
    assert units[0].format == "otel"


def test_one_otel_document_keeps_the_good_traces_of_a_rejected_record() -> None:
    export = load("otel_genai.json")
    spans = export["resourceSpans"][1]["scopeSpans"][1]["spans"]
    spans[1]["attributes"][0]["key"] = 7
    record = InputRecord("export.json", 1, data=export)
    [unit] = list(read_traces([record], "otel"))
    assert unit.records == [record]
    assert [t.id for t in unit.traces] == ["kp:trace:otel:4bf92f3577b34da6a3ce929d0e0e4736"]
    assert unit.problems == [
        "resourceSpans[1].scopeSpans[1].spans[1].attributes[0].key: expected a string"
    ]
    assert unit.rejected


def test_otel_list_elements_sharing_a_trace_are_one_unit(tmp_path: Path) -> None:
    first, second = load("otel_genai.json")["resourceSpans"]
    documents = [{"resourceSpans": [first]}, {"resourceSpans": [second]}]
    broken = copy.deepcopy(documents)
    broken[1]["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["events"] = "oops"
    ok_file, bad_file = (
        _write(tmp_path / "ok.json", documents),
        _write(tmp_path / "bad.json", broken),
    )
    ok, bad = _read([ok_file, bad_file], "auto")
    # Both elements hold spans of trace 4bf9..., so they are converted (and rejected) together.
    assert [(r.source, r.index) for r in ok.records] == [(str(ok_file), 0), (str(ok_file), 1)]
    assert [t.id for t in ok.traces] == [
        "kp:trace:otel:4bf92f3577b34da6a3ce929d0e0e4736",
        "kp:trace:otel:0af7651916cd43dd8448eb211c80319c",
    ]
    assert [(r.source, r.index) for r in bad.records] == [(str(bad_file), 0), (str(bad_file), 1)]
    assert [t.id for t in bad.traces] == ["kp:trace:otel:0af7651916cd43dd8448eb211c80319c"]
    assert bad.problems == [
        "[1].resourceSpans[0].scopeSpans[0].spans[0].events: expected an array, got a string"
    ]


def test_langsmith_run_list_rejects_only_the_broken_runs_trace(tmp_path: Path) -> None:
    runs = load("langsmith_flat.json")
    runs[4]["run_type"] = 7
    units = _read([_write(tmp_path / "runs.json", runs)], "langsmith")
    assert _summary(units) == [
        ([(2, 0), (19, 1), (44, 2)], 1, []),
        (
            [(83, 3), (98, 4), (132, 5)],
            0,
            ["[4].run_type: expected a string such as 'llm', 'tool'"],
        ),
    ]
    assert units[0].traces[0].id == "kp:trace:langsmith:9f1c2d3e-0000-4000-8000-000000000002"


def test_langsmith_runs_one_per_line() -> None:
    units = _read([UNITS / "langsmith_runs.jsonl"], "auto")
    assert _summary(units) == [
        ([(1, None), (2, None), (3, None)], 1, []),
        ([(4, None), (5, None), (6, None)], 1, []),
    ]
    assert [u.format for u in units] == ["langsmith", "langsmith"]


def test_langsmith_broken_line_is_named_by_its_line(tmp_path: Path) -> None:
    lines = (UNITS / "langsmith_runs.jsonl").read_text().splitlines()
    run = json.loads(lines[4])
    del run["run_type"]
    lines[4] = json.dumps(run)
    path = tmp_path / "runs.jsonl"
    path.write_text("\n".join(lines) + "\n")
    units = _read([path], "langsmith")
    assert [u.problems for u in units] == [
        [],
        ["line 5: run_type: expected a string such as 'llm', 'tool'"],
    ]


def test_langsmith_orphans_of_one_trace_stay_together(tmp_path: Path) -> None:
    # The root's line is lost; its two children are roots now, but still one trace's records.
    lines = (UNITS / "langsmith_runs.jsonl").read_text().splitlines()
    path = tmp_path / "runs.jsonl"
    path.write_text("\n".join([lines[0], "{oops", *lines[1:3]]) + "\n")
    units = _read([path], "langsmith")
    assert [([r.line for r in u.records], len(u.traces), bool(u.problems)) for u in units] == [
        ([2], 0, True),
        ([1, 3, 4], 1, False),
    ]


def test_langsmith_parent_cycle_loses_no_run() -> None:
    runs = [
        {
            "id": "a",
            "parent_run_id": "b",
            "run_type": "llm",
            "inputs": {"input": "q"},
            "outputs": {"role": "assistant", "content": "A"},
        },
        {"id": "b", "parent_run_id": "a", "run_type": "chain", "inputs": {"input": "q"}},
    ]
    records = [InputRecord("runs.json", 1 + n, data=run, index=n) for n, run in enumerate(runs)]
    [unit] = list(read_traces(records, "langsmith"))
    assert unit.records == records
    assert [[s.content for s in t.steps] for t in unit.traces] == [["A"]]


def _trace(trace_id: str, **metadata: Any) -> dict[str, Any]:
    return {
        "@context": "https://openknowledgepulse.org/schema/v1",
        "@type": "ReasoningTrace",
        "id": trace_id,
        "metadata": {
            "created_at": "2025-01-01T00:00:00Z",
            "task_domain": "code",
            "success": True,
            "visibility": "private",
            "privacy_level": "private",
            **metadata,
        },
        "task": {"objective": "Fix the bug."},
        "steps": [{"step_id": 0, "type": "thought", "content": "Look at the stack trace."}],
        "outcome": {"result_summary": "Fixed.", "confidence": 0.9},
    }


def test_trace_records_each_validated(tmp_path: Path) -> None:
    bad = _trace("kp:trace:b")
    bad["steps"][0]["type"] = "plan"
    del bad["outcome"]
    path = _write(tmp_path / "traces.json", [_trace("kp:trace:a"), [1], bad, "text"])
    units = _read([path], "trace")
    assert [(len(u.traces), u.problems, u.format) for u in units] == [
        (1, [], "trace"),
        (0, ["expected a JSON object, got an array"], "trace"),
        (
            0,
            [
                "steps[0].type: expected one of 'thought', 'tool_call', 'observation', "
                "'error_recovery' (got 'plan')",
                "outcome: required field is missing",
            ],
            "trace",
        ),
        (0, ["expected a JSON object, got a string"], "trace"),
    ]


def test_overrides_apply_to_trace_records_and_imports() -> None:
    options = ImportOptions(task_domain="support", success=False, confidence=0.25)
    records = [
        InputRecord("a.jsonl", 1, data=_trace("kp:trace:a")),
        InputRecord("a.jsonl", 2, data=load("openai_chat.json")),
    ]
    units = list(read_traces(records, "auto", options))
    assert [u.format for u in units] == ["trace", "openai"]
    for unit in units:
        [trace] = unit.traces
        assert (trace.metadata.task_domain, trace.metadata.success) == ("support", False)
        assert trace.outcome.confidence == 0.25
        kp_import = trace.to_dict()["metadata"]["kp_import"]
        assert kp_import["overridden"] == ["task_domain", "success", "confidence"]
    assert "defaulted" not in units[0].traces[0].to_dict()["metadata"]["kp_import"]
    assert units[1].traces[0].to_dict()["metadata"]["kp_import"]["defaulted"] == []
    # The input is not changed.
    assert records[0].data["metadata"]["task_domain"] == "code"


def test_auto_detects_per_record_and_rejects_what_it_cannot_tell(tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    path.write_text(
        "\n".join(
            [
                json.dumps(_trace("kp:trace:a")),
                json.dumps(load("anthropic_messages.json")),
                '{"foo": 1}',
                "{not json",
                json.dumps(load("atif_trajectory.json")),
            ]
        )
        + "\n"
    )
    units = _read([path], "auto")
    assert [(u.format, len(u.traces), [p[:30] for p in u.problems]) for u in units] == [
        ("trace", 1, []),
        ("anthropic", 1, []),
        ("auto", 0, ["could not detect the format; n"]),
        ("auto", 0, ["invalid JSON: Expecting proper"]),
        ("atif", 1, []),
    ]


@pytest.mark.parametrize("fmt", ["trace", "auto", "openai", "otel", "langsmith"])
def test_nothing_in_nothing_out(tmp_path: Path, fmt: str) -> None:
    assert list(read_traces([], fmt)) == []
    empty = tmp_path / "empty.json"
    empty.write_text("[]")
    blank = tmp_path / "blank.jsonl"
    blank.write_text("\n\n")
    assert _read([empty, blank], fmt) == []


def test_an_empty_conversation_is_rejected(tmp_path: Path) -> None:
    [unit] = list(read_traces([InputRecord("x.json", 1, data=[])], "openai"))
    assert unit.problems == ["no agent steps (thoughts, tool calls or tool results) found"]


def test_unknown_format_fails_before_reading() -> None:
    def never() -> Iterable[InputRecord]:
        raise AssertionError("read")
        yield  # pragma: no cover

    with pytest.raises(ConversionError, match="unknown format 'csv'"):
        read_traces(never(), "csv")


def test_grouped_units_come_when_their_file_ends(tmp_path: Path) -> None:
    runs = tmp_path / "runs.jsonl"
    runs.write_text((UNITS / "langsmith_runs.jsonl").read_text())
    chat = tmp_path / "chat.jsonl"
    chat.write_text(json.dumps(load("openai_chat.json")) + "\n")
    units = _read([runs, chat], "auto")
    assert [(Path(u.records[0].source).name, u.format) for u in units] == [
        ("runs.jsonl", "langsmith"),
        ("runs.jsonl", "langsmith"),
        ("chat.jsonl", "openai"),
    ]
