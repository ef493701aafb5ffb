"""Request bodies to traces: JSON, then the importer of ``?from=``, then the limits.

Every problem is a :class:`RequestProblem` naming the field's path (422), never a 500.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from starlette.exceptions import HTTPException

from .._schema import ReasoningTrace, ValidationProblem, parse_trace
from ..importers import ConversionError, convert, format_names
from ..io._reader import MAX_DEPTH
from ._engine import id_problem
from ._settings import ServiceSettings

__all__ = [
    "RequestProblem",
    "load_redactor",
    "nesting_depth",
    "parse_json",
    "problem",
    "refuse_unstorable_ids",
    "traces_of",
]


def problem(path: str, message: str) -> ValidationProblem:
    """What is wrong with the field at ``path`` (``steps[2].type``; empty: the whole body)."""
    return ValidationProblem(path=path, message=message)


class RequestProblem(HTTPException):
    """A 422: the body (or a parameter) is not what the endpoint takes."""

    def __init__(self, detail: str, problems: list[ValidationProblem]) -> None:
        super().__init__(422, detail)
        self.problems = problems


def parse_json(body: bytes) -> Any:
    if not body.strip():
        raise RequestProblem("the request has no body", [problem("", "expected JSON")])
    try:
        data = json.loads(body)
    except RecursionError:
        message = "malformed JSON: nested too deeply"
        raise RequestProblem(message, [problem("", message)]) from None
    except ValueError as exc:  # UnicodeDecodeError is a ValueError too
        message = f"malformed JSON: {exc}"
        raise RequestProblem(message, [problem("", message)]) from None
    # JSON may escape half of a UTF-16 pair (\ud800): Python keeps it, but no UTF-8 text (the
    # base, the answer) can hold it. Only a body with such an escape needs the check.
    if b"\\ud" in body or b"\\uD" in body:
        try:
            json.dumps(data, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            message = "malformed JSON: a string holds a lone UTF-16 surrogate (\\ud800 to \\udfff)"
            raise RequestProblem(message, [problem("", message)]) from None
    return data


def refuse_unstorable_ids(traces: list[ReasoningTrace], *, many: bool) -> None:
    """Every trace id :func:`~._engine.id_problem` refuses, as one 422 naming each (``id``,
    or ``[i].id`` with ``many``): all refused at once, before anything is scored."""
    problems = [
        problem(f"[{i}].id" if many else "id", wrong)
        for i, trace in enumerate(traces)
        if (wrong := id_problem(trace.id)) is not None
    ]
    if problems:
        raise RequestProblem(f"invalid ReasoningTrace: {problems[0]}", problems)


def traces_of(
    data: Any, source_format: str | None, settings: ServiceSettings, *, many: bool
) -> list[ReasoningTrace]:
    """The traces in a parsed body.

    Args:
        data: the parsed JSON: a trace, or with ``many`` a list of traces; with a
            ``source_format`` a record of that format (which may hold several traces).
        source_format: a name of :func:`knowledgepulse.importers.format_names`, or None.
        settings: ``max_batch`` and ``max_steps`` (over them: 413).
        many: whether the endpoint takes several traces.
    """
    name = source_format or "trace"
    if name != "trace" or not many or not isinstance(data, list):
        _check_depth(data, "", "the trace" if name == "trace" else "the record")
    if name not in format_names():
        known = ", ".join(format_names())
        raise RequestProblem(
            f"unknown format {name!r}",
            [problem("from", f"expected one of {known} (got {name!r})")],
        )
    if name == "trace" and many:
        if not isinstance(data, list):
            raise RequestProblem(
                "expected a JSON list of traces",
                [problem("", f"expected a list, got {type(data).__name__}")],
            )
        _check_count(len(data), settings)
        for i, item in enumerate(data):
            _check_depth(item, f"[{i}]", f"[{i}]")
        traces = [_one_trace(item, f"[{i}]") for i, item in enumerate(data)]
    elif name == "trace":
        traces = [_one_trace(data, "")]
    else:
        try:
            traces = convert(name, data)
        except ConversionError as exc:
            raise RequestProblem(str(exc).split("\n")[0], exc.problems) from None
        except RecursionError:
            raise RequestProblem(
                "the record is nested too deeply", [problem("", "nested too deeply")]
            ) from None
        if not many and len(traces) != 1:
            raise RequestProblem(
                f"the record holds {len(traces)} traces; POST /v1/traces/batch takes several",
                [problem("", f"expected one trace, got {len(traces)}")],
            )
        _check_count(len(traces), settings)
    for i, trace in enumerate(traces):
        if len(trace.steps) > settings.max_steps:
            where = f"[{i}].steps" if many else "steps"
            raise HTTPException(
                413, f"{where}: {len(trace.steps)} steps; at most {settings.max_steps} are taken"
            )
    return traces


def _check_depth(data: Any, where: str, label: str) -> None:
    """A 422 for a trace (or record) nested deeper than :data:`MAX_DEPTH` levels of lists
    and objects: such a trace could be stored but never served again (pydantic stops
    serialising at 255 levels), and no real trace comes near."""
    depth = nesting_depth(data)
    if depth > MAX_DEPTH:
        message = f"nested {depth} levels deep; at most {MAX_DEPTH} are taken"
        raise RequestProblem(f"{label}: {message}", [problem(where, message)])


def nesting_depth(data: Any) -> int:
    """How many levels of lists and objects ``data`` has (a scalar: 0), without recursion."""
    deepest = 0
    pending: list[tuple[Any, int]] = [(data, 1)]
    while pending:
        value, level = pending.pop()
        if isinstance(value, dict):
            children: Any = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        deepest = max(deepest, level)
        pending.extend((child, level + 1) for child in children)
    return deepest


def _check_count(count: int, settings: ServiceSettings) -> None:
    if count > settings.max_batch:
        raise HTTPException(413, f"{count} traces; at most {settings.max_batch} per request")
    if count == 0:
        raise RequestProblem("no traces", [problem("", "expected at least one trace")])


def _one_trace(data: Any, prefix: str) -> ReasoningTrace:
    try:
        return convert("trace", data)[0]
    except ConversionError as exc:
        problems = [problem(_join(prefix, found.path), found.message) for found in exc.problems]
        raise RequestProblem(f"invalid ReasoningTrace: {problems[0]}", problems) from None


def _join(prefix: str, path: str) -> str:
    if not path:
        return prefix
    return prefix + ("" if path.startswith("[") or not prefix else ".") + path


Redactor = Callable[[ReasoningTrace], ReasoningTrace]


def load_redactor() -> tuple[Redactor, str]:
    """The redaction applied to contributed traces, and what ``/healthz`` says of it:
    :func:`knowledgepulse.redaction.redact_trace` (each trace's own ``privacy_level`` policy)
    when that module is installed, else none."""
    try:
        from knowledgepulse.redaction import redact_trace  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return (lambda trace: trace), "off: knowledgepulse.redaction is not available"

    def redact(trace: ReasoningTrace) -> ReasoningTrace:
        result: Any = redact_trace(trace)
        if isinstance(result, tuple):  # (the redacted trace, the report)
            result = result[0]
        return parse_trace(result)

    return redact, "on"
