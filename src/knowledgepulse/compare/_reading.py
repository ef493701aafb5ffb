"""Where the traces to compare come from: a file in any ``--from`` format, or a knowledge base."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._schema import ReasoningTrace, TraceValidationError, parse_trace
from ._traces import ComparisonError

if TYPE_CHECKING:
    from ..kb import KnowledgeBase

__all__ = ["trace_from_base", "trace_from_file"]


def trace_from_file(
    path: str, *, source_format: str = "trace", trace_id: str | None = None
) -> ReasoningTrace:
    """The first trace of ``path`` (read as ``source_format``), or the one whose id is ``trace_id``.

    Raises :class:`ComparisonError` when the file holds no trace (an empty file, a trace with
    no steps: each problem named by file and line) or none with that id; ``FileNotFoundError``
    when there is no such file.
    """
    from ..importers import ImportOptions, read_traces_from_paths

    problems: list[str] = []
    seen = 0
    for conversion in read_traces_from_paths([path], source_format, ImportOptions()):
        for trace in conversion.traces:
            seen += 1
            if trace_id is None or trace.id == trace_id:
                return trace
        first = conversion.records[0] if conversion.records else None
        where = f"{first.source}:{first.line}" if first is not None else path
        problems += [f"{where}: {problem}" for problem in conversion.problems]
        if len(problems) > 3:
            break
    if trace_id is not None and seen:
        raise ComparisonError(f"{path}: no trace with id {trace_id!r} (read {seen} traces)")
    why = f": {'; '.join(problems[:3])}" if problems else ""
    raise ComparisonError(f"{path}: holds no trace to compare{why}")


def trace_from_base(kb: KnowledgeBase, trace_id: str) -> ReasoningTrace:
    """The trace stored under ``trace_id``; :class:`ComparisonError` when there is none."""
    stored = kb.get(trace_id)
    if stored is None:
        raise ComparisonError(f"{kb.location}: no trace with id {trace_id!r}")
    try:
        return parse_trace(stored.trace)
    except TraceValidationError as exc:
        raise ComparisonError(f"{kb.location}: trace {trace_id!r} is not valid: {exc}") from None
