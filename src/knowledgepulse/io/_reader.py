r"""Reading records from files, and writing output lines that survive any stop.

:func:`iter_records` is the only way records come into knowledgepulse: ``kp score``,
``validate``, ``import``, ``eval`` and ``report`` all read through it. Every record carries
where it came from (file, line and, for an element of a JSON list, its index), so a rejection
can say ``traces.jsonl:17: steps[2].type: ...``.

The rules, each chosen so that nothing is lost or silently merged:

- JSONL (and stdin, always) is read as bytes and split at ``\n`` only: a bare CR or a U+2028
  inside a record does not split it. A UTF-8 byte order mark at the start of any file is skipped.
- A line that is a lone ``{`` or ``[`` starts a document spread over lines (``jq .``,
  ``json.dumps(indent=...)``, OpenTelemetry's console exporter): documents one after another,
  pretty-printed or not, are records located at their first line (a list: one per element).
  A document cut short ends before the line that starts the next one, and is one rejection.
- A ``.json`` file holds one document (an object or a list: one record per element, each located
  at the line where it starts) or, failing that, is read as JSONL and documents, as above.
- A record that is not valid UTF-8, not valid JSON, nested deeper than :data:`MAX_DEPTH`, or
  holding something that cannot be written back (a lone surrogate, NaN) becomes an error record,
  and reading goes on with the next one. Whatever is read can be written.
- Read with ``parse=False``, a record keeps its bytes (``json``) instead: a consumer that
  validates from bytes parses and validates in one step, and :meth:`InputRecord.parsed` gives
  the record exactly as ``parse=True`` would have.
- A file that cannot be read, a truncated gzip stream or a file that is not gzip at all becomes
  one error record at the line where it broke; the records before it are kept.
- Directories are searched recursively, skipping hidden files and folders (``.venv``, ``.git``)
  unless they are named explicitly.

Why one reader: every rule of where records are (line splitting, documents, lists, gzip, stdin)
lives here, because the rules interact and a rule kept elsewhere would make a second reader;
one record and one JSON value read from bytes (the depth and encoding limits) are
:mod:`._input_record`'s.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import sys
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, BinaryIO

from ._binary_files import SNIFF_BYTES, binary_refusal
from ._input_record import (
    MAX_DEPTH,
    InputRecord,
    json_reason,
    json_type_name,
    parse_json_bytes,
    record_from_bytes,
)

__all__ = [
    "LOG_SUFFIXES",
    "MAX_DEPTH",
    "RECORD_SUFFIXES",
    "STDIN",
    "InputRecord",
    "expand_paths",
    "iter_records",
    "json_type_name",
    "parse_json_bytes",
    "skipped_files",
]

RECORD_SUFFIXES = (".jsonl", ".ndjson", ".json", ".jsonl.gz", ".ndjson.gz", ".json.gz")
#: Agent logs that are not named as JSON but are read from a directory too: SWE-agent
#: ``.traj`` trajectories and Inspect AI ``.eval`` archives.
LOG_SUFFIXES = (".traj", ".eval")
STDIN = "-"
STDIN_NAME = "<stdin>"
_BOM = b"\xef\xbb\xbf"
_GZIP_MAGIC = b"\x1f\x8b"


def expand_paths(paths: Iterable[str], *, suffixes: tuple[str, ...] = RECORD_SUFFIXES) -> list[str]:
    """Files named, with directories expanded recursively (sorted) to their record files
    (names ending in one of ``suffixes``, case-insensitive).

    Hidden files and folders inside a directory are skipped; a hidden path named explicitly is
    read. Raises FileNotFoundError for a path that does not exist.
    """
    files: list[str] = []
    for raw in paths:
        if raw == STDIN:
            files.append(STDIN)
            continue
        path = Path(raw)
        if path.is_dir():
            files.extend(str(p) for p in _record_files(path, suffixes))
        elif path.exists():
            files.append(str(path))
        else:
            raise FileNotFoundError(f"no such file or directory: {raw}")
    return files


def skipped_files(
    paths: Iterable[str], *, suffixes: tuple[str, ...] = RECORD_SUFFIXES
) -> dict[str, int]:
    """Files inside the named directories that :func:`expand_paths` (with the same
    ``suffixes``) leaves out because of their extension (hidden files aside), counted by
    extension (``""`` for none), most frequent first. Files named explicitly are never
    skipped."""
    counts: dict[str, int] = {}
    for raw in paths:
        if raw == STDIN or not Path(raw).is_dir():
            continue
        for folder, subfolders, names in os.walk(raw):
            subfolders[:] = sorted(name for name in subfolders if not name.startswith("."))
            for name in names:
                if name.startswith(".") or name.lower().endswith(suffixes):
                    continue
                suffix = Path(folder, name).suffix.lower()
                counts[suffix] = counts.get(suffix, 0) + 1
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def _record_files(root: Path, suffixes: tuple[str, ...] = RECORD_SUFFIXES) -> list[Path]:
    found: list[Path] = []
    for folder, subfolders, names in os.walk(root):
        subfolders[:] = sorted(name for name in subfolders if not name.startswith("."))
        found.extend(
            Path(folder, name)
            for name in names
            if not name.startswith(".") and name.lower().endswith(suffixes)
        )
    return sorted(found)


def iter_records(
    paths: Iterable[str], *, stdin: IO[bytes] | IO[str] | None = None, parse: bool = True
) -> Iterator[InputRecord]:
    """Every record of every file, in order. Blank lines are not records.

    Args:
        paths: files, directories (searched recursively) and ``-`` for standard input.
        stdin: the stream read for ``-`` (default: ``sys.stdin``'s bytes).
        parse: ``False`` leaves each record's JSON unparsed, in ``json`` (see
            :meth:`InputRecord.parsed`); problems reading a file are still error records.

    A ``.json`` file holding a list gives one record per element, each with its ``index``.
    Problems reading a record or a file are error records (``error`` set), never exceptions,
    except FileNotFoundError for a path that does not exist.
    """
    for name in expand_paths(paths):
        if name == STDIN:
            yield from _records_from_lines(_stdin_bytes(stdin), STDIN_NAME, parse)
            continue
        is_json = name.lower().endswith((".json", ".json.gz"))
        try:
            with _open_binary(name) as handle:
                refusal = _binary_refusal(handle, name)
                if refusal is not None:
                    # One rejection for the whole file, not one per line of noise.
                    yield InputRecord(name, 1, error=refusal)
                    continue
                if is_json:
                    yield from _records_from_json_file(handle, name, parse)
                else:
                    yield from _records_from_lines(handle, name, parse)
        except OSError as exc:  # the file itself cannot be opened
            yield InputRecord(name, 1, error=f"cannot read the file: {_os_reason(exc)}")


def _binary_refusal(handle: IO[bytes], name: str) -> str | None:
    """Why a file is refused as a whole (a zip archive, an image...), or ``None``."""
    peek = getattr(handle, "peek", None)
    if peek is None:
        return None
    try:
        head = peek(SNIFF_BYTES)[:SNIFF_BYTES]
    except (OSError, EOFError, zlib.error):
        return None  # reading reports it, at the line where it breaks
    return binary_refusal(name, head)


def _stdin_bytes(stdin: IO[bytes] | IO[str] | None) -> IO[bytes]:
    stream: Any = stdin if stdin is not None else sys.stdin
    if isinstance(stream, io.TextIOBase) and hasattr(stream, "buffer"):
        return stream.buffer  # type: ignore[no-any-return]
    if isinstance(stream, io.TextIOBase) or isinstance(getattr(stream, "encoding", None), str):
        # A text stream without bytes underneath (a test's StringIO): its text, as UTF-8.
        return io.BytesIO(stream.read().encode("utf-8", errors="surrogateescape"))
    return stream  # type: ignore[no-any-return]


#: Decompressed bytes a ``.gz`` reader hands over at a time.
GZIP_READ_BYTES = 1 << 17


def _open_binary(name: str) -> BinaryIO:
    handle: BinaryIO = open(name, "rb")  # noqa: SIM115 - closed by the caller's with
    if name.lower().endswith(".gz"):
        # GzipFile's reader, buffered by 128 KiB instead of 8: a 10 KiB line then costs one
        # pass through its Python code, not two (a quarter of the time of reading a .gz line).
        # One decompression per fill, as GzipFile does, so a break loses no whole line.
        reader = getattr(gzip, "_GzipReader", None)
        if reader is None:
            return gzip.GzipFile(fileobj=handle, mode="rb")  # type: ignore[return-value]
        return io.BufferedReader(reader(handle), buffer_size=GZIP_READ_BYTES)
    return handle


def _os_reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def _stream_error(exc: BaseException, last_line: int) -> str:
    """What broke while reading a stream, and after which line."""
    if isinstance(exc, EOFError):
        what = "the gzip stream is truncated"
    elif isinstance(exc, gzip.BadGzipFile) or (
        isinstance(exc, OSError) and "gzip" in str(exc).lower()
    ):
        what = f"not a valid gzip file ({exc})"
    elif isinstance(exc, zlib.error):
        what = f"the gzip stream is corrupt ({exc})"
    else:
        what = f"cannot read the file: {_os_reason(exc)}"
    where = f"after line {last_line}" if last_line else "before the first line"
    return f"{what}: reading stopped {where}"


def _numbered_lines(handle: IO[bytes], broken: list[BaseException]) -> Iterator[tuple[int, bytes]]:
    r"""``(number, line)`` for each ``\n``-terminated line, a byte order mark skipped; a stream
    that breaks (a truncated gzip) ends the lines, with the reason put in ``broken``."""
    lines = enumerate(handle, 1)
    try:
        for number, line in lines:
            yield number, line[len(_BOM) :] if line.startswith(_BOM) else line
            break
        yield from lines
    except (OSError, EOFError, zlib.error) as exc:
        broken.append(exc)


_OPENERS = (b"{", b"[")


def _records_from_lines(
    handle: IO[bytes], source: str, parse: bool = True
) -> Iterator[InputRecord]:
    r"""JSONL: one record per ``\n``-terminated line, and pretty-printed documents among them.

    A line that is a lone ``{`` or ``[`` cannot be a record: it starts a document spread over
    lines (what ``jq .``, ``json.dumps(indent=...)`` and OpenTelemetry's console exporter
    write), read as one record located at that line (a list: one record per element). Only
    one document is held at a time, so a stream of them is read in little memory.
    """
    broken: list[BaseException] = []
    lines = _numbered_lines(handle, broken)
    last = 0  # the last line read
    for number, line in lines:
        last = number
        stripped = line.strip()
        if not stripped:
            continue
        if stripped not in _OPENERS:
            yield record_from_bytes(stripped, source, number, parse=parse)
            continue
        start: tuple[int, bytes] | None = (number, line)
        while start is not None:
            number, line = start
            document, start = _document_lines(lines, number, line)
            last = start[0] if start is not None else document.last
            if broken and start is None:
                # The stream broke inside the document: the break is its rejection.
                yield InputRecord(source, number, error=_stream_error(broken[0], number - 1))
                return
            yield from _records_from_document(b"".join(document.lines), source, number, parse)
            if start is not None and start[1].strip() not in _OPENERS:
                yield record_from_bytes(start[1].strip(), source, start[0], parse=parse)
                start = None
    if broken:
        yield InputRecord(source, last + 1, error=_stream_error(broken[0], last))


@dataclass
class _Document:
    lines: list[bytes]
    last: int  # the number of its last line


#: A JSON string within one line (a string cannot hold a raw newline).
_STRING = re.compile(rb'"(?:[^"\\\n]|\\.)*"')
#: After these, a value may start; after anything else, a ``{`` or ``[`` is a syntax error.
_BEFORE_A_VALUE = (b"[", b",", b":")


def _document_lines(
    lines: Iterator[tuple[int, bytes]], number: int, first: bytes
) -> tuple[_Document, tuple[int, bytes] | None]:
    """The lines of the document that ``first`` (a lone ``{`` or ``[``, line ``number``)
    opens, and the line after it that was read and starts the next record, if any.

    It ends where its brackets close. A document cut short (its writer stopped) ends before
    the line that starts the next one: a line opening an array or object where no value may
    start, or, in a document whose lines are indented, a line opening one at the margin
    (pretty-printers indent everything inside a document).
    """
    held = [first]
    depth = 1
    last_byte = first.strip()
    indented: bool | None = None
    last = number
    for number, line in lines:
        stripped = line.strip()
        if stripped:
            if indented is None:
                indented = line[:1] in (b" ", b"\t")
            if stripped[:1] in _OPENERS and (
                last_byte not in _BEFORE_A_VALUE or (indented and line[:1] in _OPENERS)
            ):
                return _Document(held, last), (number, line)
            bare = _STRING.sub(b'""', stripped)
            depth += bare.count(b"{") + bare.count(b"[") - bare.count(b"}") - bare.count(b"]")
            last_byte = bare[-1:]
        held.append(line)
        last = number
        if depth <= 0:
            break
    return _Document(held, last), None


def _records_from_document(
    data: bytes, source: str, line: int, parse: bool
) -> Iterator[InputRecord]:
    """The records of one document starting at ``line``: itself, or a list's elements."""
    data = data.strip()
    if data.startswith(b"["):
        # Lines are counted from the start of the text: put the document at its line.
        text = "\n" * (line - 1) + data.decode("utf-8", errors="surrogateescape")
        yield from _records_from_list(text, source, line - 1, parse)
        return
    value, error = parse_json_bytes(data)
    if error is None:
        yield (
            InputRecord(source, line, data=value) if parse else InputRecord(source, line, json=data)
        )
        return
    raw = data.decode("utf-8", errors="backslashreplace")
    where = line
    if error.startswith("invalid JSON: ") and "NaN" not in error:
        # Located where it breaks, as for a broken element of a list.
        try:
            json.loads(data.decode("utf-8"))
        except json.JSONDecodeError as exc:
            where, error = line + exc.lineno - 1, f"invalid JSON: {json_reason(exc)}"
        except (ValueError, RecursionError):
            pass
    yield InputRecord(source, where, error=error, raw=raw)


def _records_from_json_file(
    handle: IO[bytes], source: str, parse: bool = True
) -> Iterator[InputRecord]:
    chunks: list[bytes] = []
    broken: BaseException | None = None
    # read1 hands over what is decompressed so far, so a break loses at most one small chunk.
    read = getattr(handle, "read1", handle.read)
    try:
        while chunk := read(1 << 16):
            chunks.append(chunk)
    except (OSError, EOFError, zlib.error) as exc:
        broken = exc
    data = b"".join(chunks)
    if data.startswith(_BOM):
        data = data[len(_BOM) :]
    if broken is None:
        yield from records_from_json_bytes(data, source, parse)
        return
    # The file broke (a truncated .gz): keep every record read whole before the break; the
    # last one, cut by the break, is reported as the break itself.
    last_whole = 0
    pending: InputRecord | None = None
    for record in records_from_json_bytes(data, source, parse):
        if pending is not None:
            yield pending
            last_whole = pending.line
        pending = record
    yield InputRecord(source, last_whole + 1, error=_stream_error(broken, last_whole))


def records_from_json_bytes(data: bytes, source: str, parse: bool = True) -> Iterator[InputRecord]:
    """A ``.json`` document: one object, a list whose elements are the records, or JSONL.

    ``parse``: as for :func:`iter_records`.
    """
    # surrogateescape keeps invalid bytes recoverable: each element is re-read from its own
    # bytes, so one bad element is rejected alone with the byte where it breaks.
    text = data.decode("utf-8", errors="surrogateescape")
    index = _skip_space(text, 0)
    if index >= len(text):
        return
    newline = text.find("\n", index)
    first_line = text[index:] if newline == -1 else text[index:newline]
    more_lines = newline != -1 and bool(text[newline:].strip())
    if more_lines and _is_record(first_line):
        # A whole value on line 1 and more after it: JSONL in a .json file.
        yield from _records_from_lines(io.BytesIO(data), source, parse)
        return
    if text[index] == "[":
        yield from _records_from_list(text, source, index, parse)
        return
    try:
        _, end = json.JSONDecoder().raw_decode(text, index)
    except RecursionError:
        end = -1
    except json.JSONDecodeError:
        end = -1  # broken, or lines that are records of their own, some broken
    if end == -1 or _skip_space(text, end) < len(text):
        # Not one document: JSONL, or documents one after another, in a .json file.
        yield from _records_from_lines(io.BytesIO(data), source, parse)
        return
    line = text.count("\n", 0, index) + 1
    yield record_from_bytes(data.strip(), source, line, parse=parse)


def _is_record(line: str) -> bool:
    return parse_json_bytes(line.encode("utf-8", errors="surrogateescape"))[1] is None


def _records_from_list(
    text: str, source: str, start: int, parse: bool = True
) -> Iterator[InputRecord]:
    decoder = json.JSONDecoder()
    index = _skip_space(text, start + 1)
    if index < len(text) and text[index] == "]":
        return
    # Lines are counted incrementally: counting from the start for each element would make a
    # large list quadratic.
    line, counted_to, position = 1, 0, 0
    while index < len(text):
        line += text.count("\n", counted_to, index)
        counted_to = index
        try:
            _, end = decoder.raw_decode(text, index)
        except RecursionError:
            # Too deep for Python's parser: find where it ends without recursing, reject it
            # alone, and go on with its neighbours.
            end = _end_of_value(text, index)
            if end < 0:
                yield InputRecord(
                    source, line, error="invalid JSON: the list is not closed", index=position
                )
                return
            yield InputRecord(
                source,
                line,
                error=f"nested deeper than {MAX_DEPTH} levels (the limit)",
                index=position,
            )
            position += 1
            index = _skip_space(text, end)
            if index < len(text) and text[index] == ",":
                index = _skip_space(text, index + 1)
                continue
            if index < len(text) and text[index] == "]":
                return
            yield InputRecord(
                source, line, error="invalid JSON: expected ',' or ']' in the list", index=position
            )
            return
        except json.JSONDecodeError as exc:
            # Past a broken element the list cannot be followed: report it and stop.
            yield InputRecord(
                source, exc.lineno, error=f"invalid JSON: {json_reason(exc)}", index=position
            )
            return
        element = text[index:end].encode("utf-8", errors="surrogateescape")
        yield record_from_bytes(element, source, line, position, parse=parse)
        position += 1
        index = _skip_space(text, end)
        if index < len(text) and text[index] == ",":
            index = _skip_space(text, index + 1)
        elif index < len(text) and text[index] == "]":
            after = _skip_space(text, index + 1)
            if after < len(text):
                yield InputRecord(
                    source,
                    line + text.count("\n", counted_to, after),
                    error="invalid JSON: more content after the list ends (a .json file holds "
                    "one document; write one record per line as .jsonl)",
                )
            return
        else:
            where = line + text.count("\n", counted_to, index)
            yield InputRecord(
                source, where, error="invalid JSON: expected ',' or ']' in the list", index=position
            )
            return
    yield InputRecord(
        source, text.count("\n") + 1, error="invalid JSON: the list is not closed", index=position
    )


def _end_of_value(text: str, index: int) -> int:
    """Where the array or object starting at ``index`` ends (-1: it does not), iteratively."""
    depth = 0
    in_string = False
    escaped = False
    for position in range(index, len(text)):
        char = text[position]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
            if depth == 0:
                return position + 1
    return -1


def _skip_space(text: str, index: int) -> int:
    while index < len(text) and text[index] in " \t\r\n":
        index += 1
    return index
