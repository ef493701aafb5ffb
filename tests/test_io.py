"""The one reader, :func:`knowledgepulse.io._reader.iter_records`: every record located, nothing lost.

Each test writes bytes exactly as a user's file could hold them and checks every record read:
its line, its index in a list, its data or the precise reason it was refused.
"""

from __future__ import annotations

import gzip
import io
import json
import tempfile
import zlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from knowledgepulse.io._reader import InputRecord, expand_paths, iter_records, parse_json_bytes

DEEP = "nested deeper than 200 levels (the limit)"
LONE_SURROGATE = "a string holds a lone surrogate escape (e.g. \\ud800): not writable as UTF-8"
NAN = "invalid JSON: NaN and Infinity are not JSON values"
BOM = b"\xef\xbb\xbf"


def read(path: Path) -> list[InputRecord]:
    return list(iter_records([str(path)]))


def read_stdin(data: bytes) -> list[InputRecord]:
    return list(iter_records(["-"], stdin=io.BytesIO(data)))


def summary(records: list[InputRecord]) -> list[tuple[int, int | None, Any, str | None]]:
    """(line, index, data, error) of every record: what a test compares exactly."""
    return [(r.line, r.index, r.data, r.error) for r in records]


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def nested_arrays(depth: int) -> bytes:
    return b"[" * depth + b"1" + b"]" * depth


def nested_objects(depth: int) -> bytes:
    return b'{"a":' * depth + b"1" + b"}" * depth


# -- JSONL ----------------------------------------------------------------------------------


def test_jsonl_one_record_per_line_blank_lines_skipped(tmp_path: Path) -> None:
    path = write(tmp_path / "t.jsonl", b'{"a":1}\n\n   \n\t\n{"b":2}\n[3]\n"s"\nnull\n\n')
    assert summary(read(path)) == [
        (1, None, {"a": 1}, None),
        (5, None, {"b": 2}, None),
        (6, None, [3], None),
        (7, None, "s", None),
        (8, None, None, None),
    ]
    assert {r.source for r in read(path)} == {str(path)}
    assert read(path)[1].where == f"{path}:5"


def test_last_line_without_newline_and_crlf_endings(tmp_path: Path) -> None:
    path = write(tmp_path / "t.jsonl", b'{"a":1}\r\n{"b":2}\r\n{"c":3}')
    assert summary(read(path)) == [
        (1, None, {"a": 1}, None),
        (2, None, {"b": 2}, None),
        (3, None, {"c": 3}, None),
    ]


def test_bare_cr_does_not_split_a_record(tmp_path: Path) -> None:
    # A CR between tokens is JSON whitespace; a raw CR inside a string is a control character:
    # either way it is one record, and the lines after it keep their numbers.
    path = write(tmp_path / "t.jsonl", b'{"a":1,\r"b":2}\n{"s":"x\ry"}\n{"c":3}\n')
    records = read(path)
    assert summary(records) == [
        (1, None, {"a": 1, "b": 2}, None),
        (2, None, None, "invalid JSON: Invalid control character at (column 8)"),
        (3, None, {"c": 3}, None),
    ]
    assert records[1].raw == '{"s":"x\ry"}'


def test_u2028_inside_a_string_does_not_split_a_record(tmp_path: Path) -> None:
    body = '{"s":"before\u2028after\u2029end\x85"}\n{"c":3}\n'.encode()
    for name in ("t.jsonl", "t.json"):
        path = write(tmp_path / name, body)
        assert summary(read(path)) == [
            (1, None, {"s": "before\u2028after\u2029end\x85"}, None),
            (2, None, {"c": 3}, None),
        ], name


@pytest.mark.parametrize("name", ["t.jsonl", "t.json", "t.ndjson"])
def test_bom_at_the_start_of_a_file_is_skipped(tmp_path: Path, name: str) -> None:
    path = write(tmp_path / name, BOM + b'{"a":1}\n{"b":2}\n')
    assert summary(read(path)) == [(1, None, {"a": 1}, None), (2, None, {"b": 2}, None)]


def test_bom_on_stdin_is_skipped() -> None:
    assert summary(read_stdin(BOM + b'{"a":1}\n{"b":2}\n')) == [
        (1, None, {"a": 1}, None),
        (2, None, {"b": 2}, None),
    ]


def test_bom_before_a_json_list_is_skipped(tmp_path: Path) -> None:
    path = write(tmp_path / "t.json", BOM + b'[{"a":1},\n{"b":2}]\n')
    assert summary(read(path)) == [(1, 0, {"a": 1}, None), (2, 1, {"b": 2}, None)]


def test_invalid_utf8_rejects_that_record_only(tmp_path: Path) -> None:
    path = write(tmp_path / "t.jsonl", b'{"a":1}\n{"b":"ab\xffc"}\n{"c":"\xc3"}\n{"d":4}\n')
    records = read(path)
    assert summary(records) == [
        (1, None, {"a": 1}, None),
        (2, None, None, "not valid UTF-8 at byte 8"),
        (3, None, None, "not valid UTF-8 at byte 6"),
        (4, None, {"d": 4}, None),
    ]
    assert records[1].raw == '{"b":"ab\\xffc"}'  # the bytes kept visible for --rejects


def test_deep_nesting_rejects_that_record_only(tmp_path: Path) -> None:
    path = write(
        tmp_path / "t.jsonl",
        b'{"a":1}\n'
        + b"[" * 10_000
        + b"]" * 10_000
        + b"\n"
        + nested_arrays(300)
        + b"\n"
        + nested_objects(300)
        + b'\n{"d":4}\n',
    )
    assert summary(read(path)) == [
        (1, None, {"a": 1}, None),
        (2, None, None, DEEP),
        (3, None, None, DEEP),
        (4, None, None, DEEP),
        (5, None, {"d": 4}, None),
    ]


def test_nesting_limit_is_200_levels() -> None:
    assert parse_json_bytes(nested_arrays(200))[1] is None
    assert parse_json_bytes(nested_objects(200))[1] is None
    assert parse_json_bytes(nested_arrays(201)) == (None, DEEP)
    assert parse_json_bytes(nested_objects(201)) == (None, DEEP)
    deepest: Any = 1
    for _ in range(200):
        deepest = [deepest]
    assert parse_json_bytes(nested_arrays(200))[0] == deepest


def test_lone_surrogate_rejected_valid_pair_kept(tmp_path: Path) -> None:
    path = write(
        tmp_path / "t.jsonl",
        b'{"a":"\\ud800"}\n{"a":"x\\udfffy"}\n{"a":"\\ud83d\\ude00"}\n{"a":"\\ud83d"}\n',
    )
    assert summary(read(path)) == [
        (1, None, None, LONE_SURROGATE),
        (2, None, None, LONE_SURROGATE),
        (3, None, {"a": "\U0001f600"}, None),
        (4, None, None, LONE_SURROGATE),
    ]


def test_nan_and_infinity_rejected(tmp_path: Path) -> None:
    path = write(tmp_path / "t.jsonl", b'{"a":NaN}\n{"a":Infinity}\n{"a":1.5}\n')
    assert summary(read(path)) == [
        (1, None, None, NAN),
        (2, None, None, NAN),
        (3, None, {"a": 1.5}, None),
    ]


def test_negative_infinity_rejected_like_infinity() -> None:
    assert parse_json_bytes(b'{"a":-Infinity}') == (None, NAN)


def test_invalid_json_names_the_column(tmp_path: Path) -> None:
    path = write(tmp_path / "t.jsonl", b'{"a":1 "b":2}\n{broken\n{"c":3}\n')
    records = read(path)
    assert summary(records) == [
        (1, None, None, "invalid JSON: Expecting ',' delimiter (column 8)"),
        (
            2,
            None,
            None,
            "invalid JSON: Expecting property name enclosed in double quotes (column 2)",
        ),
        (3, None, {"c": 3}, None),
    ]
    assert [r.raw for r in records] == ['{"a":1 "b":2}', "{broken", None]


# -- .json documents ------------------------------------------------------------------------


def test_json_list_one_record_per_element_located_where_it_starts(tmp_path: Path) -> None:
    elements = [{"a": 1}, {"b": [1, 2]}, {"c": {"d": None}}]
    path = write(tmp_path / "t.json", json.dumps(elements, indent=2).encode())
    # [ / { / "a": 1 / }, / { / "b": [ / 1, / 2 / ] / }, / { ...
    assert summary(read(path)) == [
        (2, 0, {"a": 1}, None),
        (5, 1, {"b": [1, 2]}, None),
        (11, 2, {"c": {"d": None}}, None),
    ]


def test_compact_json_list_on_one_line(tmp_path: Path) -> None:
    path = write(tmp_path / "t.json", b'[{"a":1},{"b":2},"x"]\n')
    assert summary(read(path)) == [
        (1, 0, {"a": 1}, None),
        (1, 1, {"b": 2}, None),
        (1, 2, "x", None),
    ]


def test_empty_json_documents_hold_no_records(tmp_path: Path) -> None:
    for name, body in [("a.json", b""), ("b.json", b"  \n\n"), ("c.json", b"[]"), ("d.jsonl", b"")]:
        assert read(write(tmp_path / name, body)) == [], name


def test_broken_element_mid_list_keeps_the_elements_before(tmp_path: Path) -> None:
    path = write(tmp_path / "t.json", b'[\n  {"a":1},\n  {"b":\n  {"c":3}\n]\n')
    assert summary(read(path)) == [
        (2, 0, {"a": 1}, None),
        (5, 1, None, "invalid JSON: Expecting ',' delimiter (column 1)"),
    ]


def test_bad_elements_of_a_list_rejected_alone(tmp_path: Path) -> None:
    body = (
        b'[\n{"a":1},\n{"b":"\\ud800"},\n{"c":"\xff"},\n{"d":NaN},\n'
        + nested_arrays(300)
        + b',\n{"e":5}\n]\n'
    )
    path = write(tmp_path / "t.json", body)
    assert summary(read(path)) == [
        (2, 0, {"a": 1}, None),
        (3, 1, None, LONE_SURROGATE),
        (4, 2, None, "not valid UTF-8 at byte 6"),
        (5, 3, None, NAN),
        (6, 4, None, DEEP),
        (7, 5, {"e": 5}, None),
    ]


def test_very_deep_element_of_a_list_keeps_its_neighbours(tmp_path: Path) -> None:
    body = b'[\n{"a":1},\n' + b"[" * 10_000 + b"]" * 10_000 + b',\n{"c":3}\n]\n'
    path = write(tmp_path / "t.json", body)
    assert summary(read(path)) == [
        (2, 0, {"a": 1}, None),
        (3, 1, None, DEEP),
        (4, 2, {"c": 3}, None),
    ]


def test_list_problems_at_the_end(tmp_path: Path) -> None:
    trailing = write(tmp_path / "a.json", b'[\n{"a":1}\n]\n{"b":2}\n')
    assert summary(read(trailing)) == [
        (2, 0, {"a": 1}, None),
        (
            4,
            None,
            None,
            "invalid JSON: more content after the list ends (a .json file holds one document; "
            "write one record per line as .jsonl)",
        ),
    ]
    unclosed = write(tmp_path / "b.json", b'[{"a":1},\n{"b":2},\n')
    assert summary(read(unclosed)) == [
        (1, 0, {"a": 1}, None),
        (2, 1, {"b": 2}, None),
        (3, 2, None, "invalid JSON: the list is not closed"),
    ]


def test_pretty_printed_single_object(tmp_path: Path) -> None:
    value = {"a": {"b": [1, 2]}, "c": "d"}
    path = write(tmp_path / "t.json", b"\n\n" + json.dumps(value, indent=2).encode() + b"\n")
    assert summary(read(path)) == [(3, None, value, None)]


def test_broken_pretty_printed_object_is_one_rejection(tmp_path: Path) -> None:
    path = write(tmp_path / "t.json", b'{\n  "a": 1,\n  "b": \n}\n')
    assert summary(read(path)) == [(4, None, None, "invalid JSON: Expecting value (column 1)")]


def test_deep_pretty_printed_object_is_one_rejection(tmp_path: Path) -> None:
    path = write(tmp_path / "t.json", b"\n".join([b'{"a":'] * 300) + b"1" + b"}" * 300)
    assert summary(read(path)) == [(1, None, None, DEEP)]


def test_json_file_holding_jsonl(tmp_path: Path) -> None:
    path = write(tmp_path / "t.json", b'{"a":1}\n{broken\n\n{"c":3}\n')
    assert summary(read(path)) == [
        (1, None, {"a": 1}, None),
        (
            2,
            None,
            None,
            "invalid JSON: Expecting property name enclosed in double quotes (column 2)",
        ),
        (4, None, {"c": 3}, None),
    ]


# -- concatenated documents -----------------------------------------------------------------

SPAN = {"name": "root", "context": {"trace_id": "0x5b", "span_id": "0x01"}, "events": [{"a": 1}]}


def spans(count: int, indent: int | None = 4) -> bytes:
    """What OpenTelemetry's ConsoleSpanExporter writes (or ``jq .`` for JSONL): documents one
    after another, each pretty-printed with its closing brace alone on its last line."""
    return b"".join(
        json.dumps({**SPAN, "name": f"s{i}"}, indent=indent).encode() + b"\n" for i in range(count)
    )


@pytest.mark.parametrize("name", ["t.jsonl", "t.json", "t.json.gz", "-"])
def test_concatenated_pretty_documents_are_records_at_their_first_line(
    tmp_path: Path, name: str
) -> None:
    data = spans(3)
    span_lines = json.dumps(SPAN, indent=4).count("\n") + 1
    if name == "-":
        records = read_stdin(data)
    else:
        records = read(write(tmp_path / name, gzip.compress(data) if name.endswith("gz") else data))
    assert summary(records) == [
        (1 + i * span_lines, None, {**SPAN, "name": f"s{i}"}, None) for i in range(3)
    ]


def test_concatenated_documents_compact_and_pretty_mixed(tmp_path: Path) -> None:
    data = b'{"a":1}\n' + json.dumps({"b": [1, 2]}, indent=2).encode() + b'\n{"c":3}\n'
    for records in (
        read(write(tmp_path / "t.jsonl", data)),
        read(write(tmp_path / "t.json", data)),
    ):
        assert summary(records) == [
            (1, None, {"a": 1}, None),
            (2, None, {"b": [1, 2]}, None),
            (8, None, {"c": 3}, None),
        ]


def test_a_malformed_document_is_one_rejection_and_reading_goes_on(tmp_path: Path) -> None:
    # The second document is cut short (its writer died); the third starts at the margin.
    cut = json.dumps(SPAN, indent=2)[:40]
    data = spans(1, indent=2) + cut.encode() + b"\n" + spans(2, indent=2)
    records = read(write(tmp_path / "t.jsonl", data))
    lines = [r.line for r in records]
    assert [r.data["name"] for r in records if r.error is None] == ["s0", "s0", "s1"]
    rejected = [r for r in records if r.error is not None]
    assert len(rejected) == 1 and str(rejected[0].error).startswith("invalid JSON: ")
    assert rejected[0].raw == cut
    assert lines == sorted(lines) and len(records) == 4


def test_a_lone_brace_then_jsonl_rejects_the_brace_alone(tmp_path: Path) -> None:
    data = b'{"a":1}\n{\n{"b":2}\n{"c":3}\n'
    assert summary(read(write(tmp_path / "t.jsonl", data))) == [
        (1, None, {"a": 1}, None),
        (
            2,
            None,
            None,
            "invalid JSON: Expecting property name enclosed in double quotes (column 2)",
        ),
        (3, None, {"b": 2}, None),
        (4, None, {"c": 3}, None),
    ]


# -- stdin ----------------------------------------------------------------------------------


def test_pretty_printed_list_on_stdin_is_one_document() -> None:
    data = json.dumps([{"a": 1}, {"b": 2}], indent=2).encode()
    assert summary(read_stdin(b"\n" + data)) == [(3, 0, {"a": 1}, None), (6, 1, {"b": 2}, None)]
    records = read_stdin(data)
    assert [r.source for r in records] == ["<stdin>", "<stdin>"]


def test_pretty_printed_object_on_stdin_is_one_document() -> None:
    assert summary(read_stdin(json.dumps({"a": [1]}, indent=2).encode())) == [
        (1, None, {"a": [1]}, None)
    ]


def test_stdin_with_a_truncated_first_line() -> None:
    assert summary(read_stdin(b'"a": 1}\n{"b":2}\n{"c":3}\n')) == [
        (1, None, None, "invalid JSON: Extra data (column 4)"),
        (2, None, {"b": 2}, None),
        (3, None, {"c": 3}, None),
    ]


def test_stdin_json_list_on_line_one_then_more_lines_is_jsonl() -> None:
    assert summary(read_stdin(b'[{"a":1},{"b":2}]\n{"c":3}\n{"d":4}\n')) == [
        (1, None, [{"a": 1}, {"b": 2}], None),
        (2, None, {"c": 3}, None),
        (3, None, {"d": 4}, None),
    ]


def test_stdin_as_a_text_stream() -> None:
    records = list(iter_records(["-"], stdin=io.StringIO('{"a":"é"}\n\n{"b":2}\n')))
    assert summary(records) == [(1, None, {"a": "é"}, None), (3, None, {"b": 2}, None)]


# -- gzip -----------------------------------------------------------------------------------


def numbered_lines(count: int) -> bytes:
    # Distinct, poorly compressible lines, so that a cut lands in the middle of the data.
    return b"".join(
        json.dumps({"i": i, "pad": f"{(i * 2654435761) % 2**64:016x}" * 2}).encode() + b"\n"
        for i in range(count)
    )


def test_truncated_gzip_keeps_the_records_before(tmp_path: Path) -> None:
    body = numbered_lines(2000)
    compressed = gzip.compress(body, mtime=0)
    cut = compressed[: len(compressed) // 2]
    whole_lines = zlib.decompressobj(wbits=31).decompress(cut).count(b"\n")
    assert 0 < whole_lines < 2000
    records = read(write(tmp_path / "t.jsonl.gz", cut))
    assert len(records) == whole_lines + 1
    assert [r.data["i"] for r in records[:-1]] == list(range(whole_lines))
    assert summary(records[-1:]) == [
        (
            whole_lines + 1,
            None,
            None,
            f"the gzip stream is truncated: reading stopped after line {whole_lines}",
        )
    ]


def test_truncated_second_gzip_member_exact_line(tmp_path: Path) -> None:
    first = gzip.compress(b'{"a":1}\n\n{"b":2}\n', mtime=0)
    second = gzip.compress(numbered_lines(50), mtime=0)[:12]
    records = read(write(tmp_path / "t.jsonl.gz", first + second))
    assert summary(records) == [
        (1, None, {"a": 1}, None),
        (3, None, {"b": 2}, None),
        (4, None, None, "the gzip stream is truncated: reading stopped after line 3"),
    ]


def test_gzip_cut_before_the_first_line(tmp_path: Path) -> None:
    cut = gzip.compress(b'{"a":1}\n', mtime=0)[:11]
    for name in ("t.jsonl.gz", "t.json.gz"):
        assert summary(read(write(tmp_path / name, cut))) == [
            (1, None, None, "the gzip stream is truncated: reading stopped before the first line")
        ], name


def test_truncated_json_gz_keeps_the_elements_before(tmp_path: Path) -> None:
    elements = [{"i": i, "pad": f"{(i * 2654435761) % 2**64:016x}"} for i in range(2000)]
    compressed = gzip.compress(json.dumps(elements, indent=1).encode(), mtime=0)
    records = read(write(tmp_path / "t.json.gz", compressed[: len(compressed) // 2]))
    kept = [r for r in records if r.error is None]
    assert kept and [r.data for r in kept] == elements[: len(kept)]
    assert records[-1].error is not None
    assert records[-1].error.startswith("the gzip stream is truncated: reading stopped after line")


@pytest.mark.parametrize("name", ["plain.jsonl.gz", "plain.json.gz"])
def test_gz_that_is_not_gzip_is_one_error_and_the_next_file_is_read(
    tmp_path: Path, name: str
) -> None:
    bad = write(tmp_path / name, b'{"a":1}\n{"b":2}\n')
    good = write(tmp_path / "next.jsonl", b'{"c":3}\n')
    records = list(iter_records([str(bad), str(good)]))
    assert len(records) == 2
    error = records[0].error
    assert (records[0].source, records[0].line, records[0].data) == (str(bad), 1, None)
    assert error is not None and error.startswith("not a valid gzip file (")
    assert error.endswith("): reading stopped before the first line")
    assert (records[1].source, records[1].line, records[1].data) == (str(good), 1, {"c": 3})


def test_gzip_json_list_and_concatenated_members(tmp_path: Path) -> None:
    listed = write(tmp_path / "l.json.gz", gzip.compress(b'[\n{"a":1},\n{"b":2}\n]\n'))
    assert summary(read(listed)) == [(2, 0, {"a": 1}, None), (3, 1, {"b": 2}, None)]
    members = gzip.compress(b'{"a":1}\n{"b":') + gzip.compress(b'2}\n{"c":3}\n')
    joined = write(tmp_path / "m.jsonl.gz", members)
    assert summary(read(joined)) == [
        (1, None, {"a": 1}, None),
        (2, None, {"b": 2}, None),
        (3, None, {"c": 3}, None),
    ]


# -- paths ----------------------------------------------------------------------------------


def test_directories_skip_hidden_files_and_folders(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    write(root / "a.jsonl", b'{"a":1}\n')
    write(root / ".hidden.jsonl", b'{"hidden":1}\n')
    write(root / ".git" / "x.jsonl", b'{"git":1}\n')
    write(root / ".venv" / "lib" / "y.json", b'{"venv":1}\n')
    write(root / "sub" / "b.json", b'{"b":1}\n')
    write(root / "sub" / "c.ndjson.gz", gzip.compress(b'{"c":1}\n'))
    write(root / "sub" / "notes.txt", b"not records")
    write(root / "sub" / "d.JSONL", b'{"d":1}\n')
    assert expand_paths([str(root)]) == [
        str(root / "a.jsonl"),
        str(root / "sub" / "b.json"),
        str(root / "sub" / "c.ndjson.gz"),
        str(root / "sub" / "d.JSONL"),
    ]
    assert [r.data for r in iter_records([str(root)])] == [{"a": 1}, {"b": 1}, {"c": 1}, {"d": 1}]


def test_hidden_paths_named_explicitly_are_read(tmp_path: Path) -> None:
    hidden_file = write(tmp_path / ".hidden.jsonl", b'{"hidden":1}\n')
    write(tmp_path / ".git" / "x.jsonl", b'{"git":1}\n')
    named = [str(hidden_file), str(tmp_path / ".git")]
    assert expand_paths(named) == [str(hidden_file), str(tmp_path / ".git" / "x.jsonl")]
    assert [r.data for r in iter_records(named)] == [{"hidden": 1}, {"git": 1}]


def test_a_file_named_explicitly_is_read_whatever_its_suffix(tmp_path: Path) -> None:
    path = write(tmp_path / "records.txt", b'{"a":1}\n')
    assert summary(read(path)) == [(1, None, {"a": 1}, None)]


def test_missing_path_raises_file_not_found(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(FileNotFoundError, match=f"no such file or directory: {missing}"):
        expand_paths([str(tmp_path), str(missing)])
    with pytest.raises(FileNotFoundError):
        list(iter_records([str(missing)]))


def test_stdin_between_files_keeps_order(tmp_path: Path) -> None:
    a = write(tmp_path / "a.jsonl", b'{"a":1}\n')
    b = write(tmp_path / "b.jsonl", b'{"b":2}\n')
    records = list(iter_records([str(a), "-", str(b)], stdin=io.BytesIO(b'{"s":0}\n')))
    assert [(r.source, r.data) for r in records] == [
        (str(a), {"a": 1}),
        ("<stdin>", {"s": 0}),
        (str(b), {"b": 2}),
    ]


# -- any records round-trip -----------------------------------------------------------------

# Text as users write it (U+2028, CR, tabs, emoji included), but never a lone surrogate.
TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=8,
)
OBJECTS = st.lists(st.dictionaries(TEXT, VALUES, max_size=4), max_size=8)


def jsonl_with_blank_lines(
    objects: list[dict[str, Any]], blanks: list[int]
) -> tuple[bytes, list[int]]:
    """JSONL with ``blanks[i]`` blank lines before record i, and the line of each record."""
    parts: list[str] = []
    lines: list[int] = []
    line = 0
    for value, blank in zip(objects, blanks):
        parts.append("\n" * blank)
        line += blank + 1
        lines.append(line)
        parts.append(json.dumps(value, ensure_ascii=False) + "\n")
    return "".join(parts).encode(), lines


def pretty_list(objects: list[dict[str, Any]]) -> tuple[bytes, list[int]]:
    """A JSON list, one indented element after another, and the line where each starts."""
    parts = ["[\n"]
    lines: list[int] = []
    line = 2
    for i, value in enumerate(objects):
        text = json.dumps(value, indent=2, ensure_ascii=False)
        lines.append(line)
        parts.append(text + (",\n" if i < len(objects) - 1 else "\n"))
        line += text.count("\n") + 1
    parts.append("]\n")
    return "".join(parts).encode(), lines


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objects=OBJECTS, blanks=st.lists(st.integers(0, 2), min_size=8, max_size=8))
def test_any_objects_round_trip_with_their_lines(
    objects: list[dict[str, Any]], blanks: list[int]
) -> None:
    jsonl, jsonl_lines = jsonl_with_blank_lines(objects, blanks)
    listed, list_lines = pretty_list(objects)
    expected_jsonl = [(line, None, value, None) for line, value in zip(jsonl_lines, objects)]
    expected_list = [
        (line, i, value, None) for i, (line, value) in enumerate(zip(list_lines, objects))
    ]
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        assert summary(read(write(root / "t.jsonl", jsonl))) == expected_jsonl
        assert summary(read(write(root / "t.jsonl.gz", gzip.compress(jsonl)))) == expected_jsonl
        assert summary(read_stdin(jsonl)) == expected_jsonl
        assert summary(read(write(root / "t.json", listed))) == expected_list
        assert summary(read(write(root / "t.json.gz", gzip.compress(listed)))) == expected_list
        if objects:  # a pretty-printed list piped in is read as a document too
            assert summary(read_stdin(listed)) == expected_list


@settings(max_examples=40, deadline=None)
@given(objects=st.lists(st.dictionaries(TEXT, VALUES, max_size=4), min_size=1, max_size=30))
def test_any_truncated_gzip_keeps_every_whole_line_before_the_cut(
    objects: list[dict[str, Any]],
) -> None:
    jsonl = "".join(json.dumps(value) + "\n" for value in objects).encode()
    compressed = gzip.compress(jsonl, mtime=0)
    with tempfile.TemporaryDirectory() as folder:
        for cut in (10, len(compressed) // 2, len(compressed) - 8, len(compressed) - 1):
            data = compressed[:cut]
            whole = zlib.decompressobj(wbits=31).decompress(data).count(b"\n")
            records = read(write(Path(folder) / "t.jsonl.gz", data))
            assert [r.data for r in records[:-1]] == objects[:whole]
            assert records[-1].line == whole + 1 and records[-1].error is not None
            assert "reading stopped" in records[-1].error


# -- any documents, one after another, some cut short ---------------------------------------

INDENTS = st.sampled_from([None, 0, 1, 2, 4])


@st.composite
def nested_objects_strategy(draw: st.DrawFn) -> dict[str, Any]:
    """An object, sometimes with a value nested up to 230 levels deep (the limit is 200)."""
    value: Any = draw(st.dictionaries(TEXT, VALUES, max_size=4))
    depth = draw(st.sampled_from([0, 0, 0, 5, 198, 230]))
    inner: Any = draw(VALUES)
    for level in range(depth):
        inner = [inner] if level % 2 else {"k": inner}
    if depth:
        value["deep"] = inner
    return value  # type: ignore[no-any-return]


DOCUMENT_LISTS = st.lists(st.tuples(nested_objects_strategy(), INDENTS), min_size=1, max_size=6)


def depth_of(value: Any) -> int:
    """Levels the parser descends (into an empty array or object it does not)."""
    children = list(value.values()) if isinstance(value, dict) else value
    if not isinstance(value, (dict, list)) or not children:
        return 0
    return 1 + max(depth_of(child) for child in children)


def concatenated(documents: list[tuple[dict[str, Any], int | None]]) -> tuple[list[str], list[int]]:
    """Each document's text (``indent`` None: one line) and the line it starts at."""
    texts = [json.dumps(value, indent=indent, ensure_ascii=False) for value, indent in documents]
    starts, line = [], 1
    for text in texts:
        starts.append(line)
        line += text.count("\n") + 1
    return texts, starts


def read_every_way(data: bytes, folder: Path) -> list[list[InputRecord]]:
    return [
        read(write(folder / "t.jsonl", data)),
        read(write(folder / "t.json", data)),
        read(write(folder / "t.jsonl.gz", gzip.compress(data))),
        read_stdin(data),
    ]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents=DOCUMENT_LISTS, cut=st.none() | st.tuples(st.integers(0, 5), st.floats(0, 1)))
def test_any_documents_one_after_another_read_without_an_internal_error(
    documents: list[tuple[dict[str, Any], int | None]], cut: tuple[int, float] | None
) -> None:
    texts, starts = concatenated(documents)
    expected = [
        (line, None, value, None) if depth_of(value) <= 200 else (line, None, None, DEEP)
        for line, (value, _) in zip(starts, documents)
    ]
    broken = None
    if cut is not None:
        broken = cut[0] % len(texts)
        text = texts[broken]
        texts[broken] = text[: max(1, int(len(text) * cut[1]))]
        if texts[broken] == text:
            broken = None
        else:  # the lines of what follows move up
            shift = text.count("\n") - texts[broken].count("\n")
            expected = expected[:broken] + [
                (line - shift, *rest) for line, *rest in expected[broken + 1 :]
            ]
    data = "".join(text + "\n" for text in texts).encode()
    with tempfile.TemporaryDirectory() as folder:
        for records in read_every_way(data, Path(folder)):
            for record in records:  # every record is read or refused, in order
                assert (record.data is None) != (record.error is None)
            assert [r.line for r in records] == sorted(r.line for r in records)
            if broken is None:
                assert summary(records) == expected
                continue
            assert summary(records[:broken]) == expected[:broken]
            assert any(r.error is not None for r in records[broken:])
            _, indent = documents[broken]
            cut_text = texts[broken].strip()
            resumes = (indent is None and cut_text not in ("{", "[")) or (
                indent and cut_text.count("\n") >= 1
            )
            if resumes and expected[broken:]:  # the documents after the cut one are read whole
                after = [
                    r for r in records[broken:] if r.line > starts[broken] + cut_text.count("\n")
                ]
                assert summary(after)[-len(expected[broken:]) :] == expected[broken:]
