"""ReasoningTrace records read with ``parse=False`` are validated from their bytes in one step.

Every outcome must equal the two-step path (parse, then validate the parsed value): the same
traces, the same rejections with the same messages, the same locations.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from knowledgepulse.importers import read_traces, read_traces_from_paths
from knowledgepulse.io._reader import iter_records

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "traces.jsonl"


def example_lines() -> list[bytes]:
    return [line for line in EXAMPLES.read_bytes().splitlines() if line.strip()]


def with_field(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(trace: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target: Any = trace
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        if isinstance(target, list):
            target[int(last)] = value
        else:
            target[last] = value

    return change


MUTATIONS: list[Callable[[dict[str, Any]], None]] = [
    with_field("steps.0.step_id", 1.0),
    with_field("steps.0.step_id", "3"),
    with_field("steps.0.step_id", 10**30),
    with_field("steps.0.latency_ms", 5),
    with_field("steps.0.type", "plan"),
    with_field("steps.0.content", 5),
    with_field("steps.0.input", []),
    with_field("metadata.success", 1),
    with_field("metadata.created_at", 12),
    with_field("metadata.created_at", "12"),
    with_field("metadata.created_at", "2025-02-11"),
    with_field("metadata.created_at", "2025-02-11T14:02:51"),
    with_field("metadata.created_at", "2025-02-11T14:02:51+09:00"),
    with_field("metadata.quality_score", 1e400),
    with_field("metadata.task_domain", " "),
    with_field("outcome.confidence", "0.95"),
    with_field("id", "trace:1"),
    with_field("@context", "https://example.com"),
    with_field("extra", {"deep": [[[1.5, None, True, "é"]]]}),
    with_field("knowledge_graph_delta", {"entities": [{"name": "a", "type": "b"}]}),
    with_field("steps", []),
]


def one_step_and_two_step(lines: list[bytes], tmp_path: Path) -> tuple[list[Any], list[Any]]:
    path = tmp_path / "traces.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    outcomes = []
    for parse in (False, True):
        conversions = read_traces(iter_records([str(path)], parse=parse), "trace")
        outcomes.append(
            [
                (
                    [(r.source, r.line, r.index, r.error) for r in c.records],
                    [t.to_json() for t in c.traces],
                    c.problems,
                    c.format,
                )
                for c in conversions
            ]
        )
    return outcomes[0], outcomes[1]


@pytest.mark.parametrize("mutate", MUTATIONS)
def test_a_changed_record_has_the_same_outcome_from_bytes(
    mutate: Callable[[dict[str, Any]], None], tmp_path: Path
) -> None:
    lines = []
    for line in example_lines():
        trace = json.loads(line)
        mutate(trace)
        lines.append(json.dumps(trace).encode())
    from_bytes, parsed_first = one_step_and_two_step(lines, tmp_path)
    assert from_bytes == parsed_first


RAW_LINES = [
    b'{"a":NaN}',
    b"[1, 2]",
    b'"text"',
    b"{",
    b"\xff\xfe",
    b'{"a":"\\ud800"}',
    b'{"a":"\\udc00x"}',
    b'{"a":"\\ud83d\\ude00"}',
    b'{"a":' + b"[" * 201 + b"]" * 201 + b"}",
]


@pytest.mark.parametrize("raw", RAW_LINES)
def test_a_record_the_reader_refuses_is_refused_alike(raw: bytes, tmp_path: Path) -> None:
    from_bytes, parsed_first = one_step_and_two_step([*example_lines()[:1], raw], tmp_path)
    assert from_bytes == parsed_first
    assert len(from_bytes) == 2 and from_bytes[1][2]  # the second record is rejected


@pytest.mark.parametrize(
    "extra",
    [b',"x":NaN}', b',"x":-Infinity}', b',"x":"\\ud800"}', b',"x":"\xff"}', b',"id":"kp:trace:b"}'],
)
def test_a_valid_trace_holding_what_cannot_be_written_is_refused_alike(
    extra: bytes, tmp_path: Path
) -> None:
    line = example_lines()[0]
    from_bytes, parsed_first = one_step_and_two_step([line[:-1] + extra], tmp_path)
    assert from_bytes == parsed_first


def test_nan_inside_a_string_is_kept(tmp_path: Path) -> None:
    trace = json.loads(example_lines()[0])
    trace["task"]["objective"] = "NaN and Infinity in words"
    from_bytes, parsed_first = one_step_and_two_step([json.dumps(trace).encode()], tmp_path)
    assert from_bytes == parsed_first
    assert from_bytes[0][2] == []


def test_a_converted_record_keeps_only_where_it_was(tmp_path: Path) -> None:
    path = tmp_path / "traces.jsonl"
    path.write_bytes(b"\n".join(example_lines()[:2]) + b"\n")
    conversions = list(read_traces_from_paths([str(path)]))
    assert [(c.records[0].line, c.records[0].json, c.records[0].data) for c in conversions] == [
        (1, None, None),
        (2, None, None),
    ]


def test_records_read_unparsed_give_the_parsed_record_on_demand(tmp_path: Path) -> None:
    path = tmp_path / "mixed.json"
    path.write_bytes(b'[{"a": 1},\n {"b": NaN}]')
    unparsed = list(iter_records([str(path)], parse=False))
    assert [r.json for r in unparsed] == [b'{"a": 1}', b'{"b": NaN}']
    assert [r.parsed() for r in unparsed] == list(iter_records([str(path)]))


def test_options_are_written_over_records_read_unparsed(tmp_path: Path) -> None:
    from knowledgepulse.importers import ImportOptions

    path = tmp_path / "traces.jsonl"
    path.write_bytes(example_lines()[0] + b"\n")
    records = iter_records([str(path)], parse=False)
    [conversion] = read_traces(records, "trace", ImportOptions(task_domain="legal"))
    assert conversion.traces[0].metadata.task_domain == "legal"
