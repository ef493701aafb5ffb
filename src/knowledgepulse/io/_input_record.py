"""One record of an input (:class:`InputRecord`) and one JSON value read from bytes: parsed
within :data:`MAX_DEPTH`, or refused with the clearest reason (the reader's rules for a single
value; where values are in a file is :mod:`._reader`'s part)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MAX_DEPTH",
    "InputRecord",
    "json_reason",
    "json_type_name",
    "parse_json_bytes",
    "record_from_bytes",
]

#: Deepest nesting of arrays and objects a record may have. The JSON parser stops at this
#: depth, and everything read within it can be serialised again (pydantic and json both
#: handle deeper), so an accepted record is always writable.
MAX_DEPTH = 200


@dataclass(frozen=True, slots=True)
class InputRecord:
    """One record of an input: its parsed JSON, or why it could not be read.

    Read with ``parse=False``, ``json`` holds the record's bytes, not yet parsed (``data`` and
    ``error`` are then unset): :meth:`parsed` gives the record as read with ``parse=True``.
    """

    source: str
    line: int
    data: Any = None
    error: str | None = None
    raw: str | None = None  # the text of a line that failed to parse, for --rejects
    index: int | None = None  # the element's position when the record is an element of a list
    json: bytes | None = None  # the unparsed bytes of a record read with parse=False

    def parsed(self) -> InputRecord:
        """This record with its bytes parsed: ``data``, or ``error`` and ``raw``."""
        if self.json is None:
            return self
        return record_from_bytes(self.json, self.source, self.line, self.index)

    def located(self) -> InputRecord:
        """Where this record is, without its contents (what a consumer keeps once converted)."""
        return InputRecord(self.source, self.line, index=self.index)

    @property
    def where(self) -> str:
        """``file:line`` (an element of a list is located by the line where it starts)."""
        return f"{self.source}:{self.line}"

    @property
    def place(self) -> str:
        """``file:line[index]`` for an element of a JSON list (elements may share a line)."""
        where = f"{self.source}:{self.line}"
        return where if self.index is None else f"{where}[{self.index}]"


def json_type_name(value: Any) -> str:
    """How a parsed JSON value is named in messages: ``an array``, ``a string``, ``null``…"""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "an array"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__


def record_from_bytes(
    data: bytes, source: str, line: int, index: int | None = None, *, parse: bool = True
) -> InputRecord:
    if not parse:
        return InputRecord(source, line, index=index, json=data)
    value, error = parse_json_bytes(data)
    if error is None:
        return InputRecord(source, line, data=value, index=index)
    raw = data.decode("utf-8", errors="backslashreplace")
    return InputRecord(source, line, error=error, raw=raw, index=index)


def parse_json_bytes(data: bytes) -> tuple[Any, str | None]:
    """``(value, None)`` for one JSON value that can be written back, else ``(None, problem)``."""
    # Imported here: the CLI imports this module to start, and pydantic-core takes a while.
    from pydantic_core import from_json

    try:
        return from_json(data, allow_inf_nan=False), None
    except ValueError as exc:
        return None, _json_problem(data, str(exc))


def _json_problem(data: bytes, parser_message: str) -> str:
    """The clearest reason ``data`` was refused: the user's view, not the parser's."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"not valid UTF-8 at byte {exc.start}"
    try:
        json.loads(text)
    except RecursionError:
        return f"nested deeper than {MAX_DEPTH} levels (the limit)"
    except ValueError as exc:
        return f"invalid JSON: {json_reason(exc)}"
    # Python's parser takes what the strict one refused: say why it cannot be kept.
    if "recursion limit" in parser_message:
        return f"nested deeper than {MAX_DEPTH} levels (the limit)"
    if "escape" in parser_message or "surrogate" in parser_message:
        return "a string holds a lone surrogate escape (e.g. \\ud800): not writable as UTF-8"
    if _has_non_finite_constant(text):
        return "invalid JSON: NaN and Infinity are not JSON values"
    return f"invalid JSON: {parser_message}"


def _has_non_finite_constant(text: str) -> bool:
    """Whether Python's parser meets ``NaN``, ``Infinity`` or ``-Infinity`` in ``text``."""

    def refuse(_constant: str) -> Any:
        raise _NonFiniteError

    try:
        json.loads(text, parse_constant=refuse)
    except _NonFiniteError:
        return True
    except (ValueError, RecursionError):
        pass
    return False


class _NonFiniteError(Exception):
    pass


def json_reason(exc: ValueError) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} (column {exc.colno})"
    return str(exc)
