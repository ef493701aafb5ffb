"""Reading cases from files (JSONL, JSON lists, gzip, stdin) for evaluation."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

from ..io._reader import InputRecord, iter_records
from ._case import Case, CaseError
from ._rubric import Rubric

__all__ = ["CaseOrRejection", "iter_cases", "load_cases"]


class CaseOrRejection(NamedTuple):
    """One input record and what it gave: a :class:`Case`, or the located :class:`CaseError`
    that rejected it (``error.messages`` lists the problems, ``error.where`` the place)."""

    record: InputRecord
    case: Case | CaseError


def iter_cases(
    records: Iterable[InputRecord], rubric: Rubric | None = None
) -> Iterator[CaseOrRejection]:
    """Per record, the case it holds or why it holds none; never stops at a bad record.

    Args:
        records: input records, e.g. from ``knowledgepulse.io._reader.iter_records(paths)``.
        rubric: builds the cases its own way (its ``case_factory``) when given.

    A record is a case object or a ReasoningTrace (see :meth:`Case.from_dict`). A case without
    an ``id`` is named after its line (``"12"``), or line and list index for an element of a
    JSON list (``"12[3]"``). A record that is not valid JSON, not an object, or not a valid
    case yields a :class:`CaseError` located at ``file:line``.
    """
    for record in records:
        yield CaseOrRejection(record, _case_of(record, rubric))


def _case_of(record: InputRecord, rubric: Rubric | None) -> Case | CaseError:
    error: CaseError
    if record.error is not None:
        error = CaseError([record.error])
    elif not isinstance(record.data, dict):
        error = CaseError([f"a case must be a JSON object, got {_json_type(record.data)}"])
    else:
        fallback_id = str(record.line) if record.index is None else f"{record.line}[{record.index}]"
        try:
            if rubric is not None:
                return rubric.case_from_dict(record.data, fallback_id)
            return Case.from_dict(record.data, case_id=fallback_id)
        except CaseError as exc:
            error = exc
    return error.located(record.source, record.line, record.index)


def _json_type(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return "null" if value is None else type(value).__name__


def load_cases(
    paths: str | Path | Iterable[str | Path], rubric: Rubric | None = None
) -> Iterator[Case]:
    """Yield the cases of one or more files, lazily, in order.

    Args:
        paths: a file, a directory (its record files, recursively) or ``-`` for stdin, or
            several of them. JSONL, a JSON list or object, and gzip (``.gz``) are read.
        rubric: builds the cases its own way (its ``case_factory``) when given.

    A convenience for files known to be good: the first bad record raises its
    :class:`CaseError` (a ``ValueError``; a :class:`CaseTraceError`, also a
    :class:`~knowledgepulse.TraceValidationError`, for a bad trace) naming the file and line.
    To go on past bad records, use :func:`iter_cases`.
    """
    named = [str(paths)] if isinstance(paths, (str, Path)) else [str(path) for path in paths]
    for _, case in iter_cases(iter_records(named), rubric):
        if isinstance(case, CaseError):
            raise case
        yield case
