"""Reading OTLP JSON: spans and log records, as exporters and collectors write them.

Accepted documents: an OTLP export (``resourceSpans`` and/or ``resourceLogs``), a list of
them (one per line of a collector's file exporter), ``{"spans": [...]}``, or a span or log
record as the SDK's console exporter prints it (``context.trace_id``, attributes as an
object). Log records that are GenAI events are attached to their span (by ``traceId`` and
``spanId``); events whose span is not in the input are gathered in a stand-in span.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from ._otel_spans import Event, Span
from ._values import ConversionError, at, expect_dict, expect_list, parse_timestamp

__all__ = ["PlainLog", "SpanProblem", "is_js_span", "read_spans"]

_NOT_OTLP = (
    "expected an OTLP export (resourceSpans or resourceLogs) or a span with context.trace_id"
)
# Attributes of a GenAI event that say what its stand-in span is.
_STAND_IN_ATTRIBUTES = (
    "gen_ai.operation.name",
    "gen_ai.request.model",
    "gen_ai.response.model",
    "gen_ai.agent.name",
)


@dataclass(frozen=True)
class SpanProblem:
    """A span (or part of an export) that cannot be read; ``trace_id`` when it could be."""

    origin: int
    trace_id: str | None
    error: ConversionError


@dataclass(frozen=True)
class PlainLog:
    """A log record with no GenAI content (an application's own log line, Semantic Kernel's
    "Function ... invoking."): nothing to import, but a record of the input all the same. It
    joins the run of its ``trace_id`` when the input holds one, else it is reported."""

    origin: int
    trace_id: str | None
    path: str


@dataclass
class _LogEvent:
    trace_id: str | None
    span_id: str | None
    event: Event
    path: str


@dataclass
class _Reading:
    spans: list[Span]
    logs: list[_LogEvent]
    problems: list[SpanProblem]
    plain: list[PlainLog]


def read_spans(
    documents: Iterable[tuple[Any, str, int]],
) -> tuple[list[Span], list[SpanProblem], list[PlainLog]]:
    """The spans of OTLP exports, span lists and log records, each given with its path and
    origin (a number the caller chooses for the input record), and the log records that
    hold no GenAI event (:class:`PlainLog`).

    A broken span does not stop the reading: it is a :class:`SpanProblem` (of its trace,
    when its ``traceId`` can be read), and the other spans are still read. GenAI events sent
    as log records are joined to their span across all ``documents``.
    """
    reading = _Reading([], [], [], [])
    for record, path, origin in documents:
        try:
            for document, where in _documents(record, path):
                _read_document(document, where, origin, reading)
        except ConversionError as exc:
            reading.problems.append(SpanProblem(origin, None, exc))
    _attach_logs(reading)
    return reading.spans, reading.problems, reading.plain


def _documents(export: Any, path: str) -> Iterator[tuple[Any, str]]:
    if isinstance(export, Mapping):
        if not _is_export(export) and isinstance(export.get("spans"), list):
            for index, span in enumerate(export["spans"]):
                yield span, at(at(path, "spans"), index)
            return
        yield export, path
        return
    for index, item in enumerate(expect_list(export, path)):
        yield item, at(path, index)


def _is_export(document: Any) -> bool:
    return isinstance(document, Mapping) and (
        "resourceSpans" in document or "resourceLogs" in document
    )


def _read_document(document: Any, path: str, origin: int, reading: _Reading) -> None:
    try:
        if not _is_export(document):
            record = expect_dict(document, path)
            if "context" not in record and "body" in record:
                events = _flat_log(record, path, origin)
                reading.logs.extend(events)
                if not events:
                    reading.plain.append(PlainLog(origin, _id(record.get("trace_id")), path))
            elif is_js_span(record):
                reading.spans.append(_js_span(record, path, len(reading.spans), origin))
            else:
                reading.spans.append(_flat_span(record, path, len(reading.spans), origin))
            return
        for raw, item_path in _scoped(document, path, "resourceSpans", "scopeSpans", "spans"):
            try:
                reading.spans.append(_otlp_span(raw, item_path, len(reading.spans), origin))
            except ConversionError as exc:
                reading.problems.append(SpanProblem(origin, _trace_id_of(raw, "traceId"), exc))
        for raw, item_path in _scoped(document, path, "resourceLogs", "scopeLogs", "logRecords"):
            try:
                events = _otlp_log(raw, item_path, origin)
                reading.logs.extend(events)
                if not events:
                    reading.plain.append(PlainLog(origin, _id(raw.get("traceId")), item_path))
            except ConversionError as exc:
                reading.problems.append(SpanProblem(origin, _trace_id_of(raw, "traceId"), exc))
    except ConversionError as exc:
        reading.problems.append(SpanProblem(origin, _flat_trace_id(document), exc))


def _scoped(
    document: Mapping[str, Any], path: str, resources: str, scopes: str, items: str
) -> Iterator[tuple[Any, str]]:
    """Each item of ``resources[].scopes[].items[]`` with its path."""
    if resources not in document:
        return
    resources_path = at(path, resources)
    # OTLP before 1.0 called scopes "instrumentation libraries".
    legacy = "instrumentationLibrary" + scopes.removeprefix("scope")
    for r, resource in enumerate(expect_list(document[resources], resources_path)):
        r_path = at(resources_path, r)
        resource = expect_dict(resource, r_path)
        key = scopes if scopes in resource or legacy not in resource else legacy
        for s, scope in enumerate(expect_list(resource.get(key, []), at(r_path, key))):
            s_path = at(at(r_path, key), s)
            scope = expect_dict(scope, s_path)
            items_path = at(s_path, items)
            for k, raw in enumerate(expect_list(scope.get(items, []), items_path)):
                yield raw, at(items_path, k)


def _trace_id_of(raw: Any, key: str) -> str | None:
    value = raw.get(key) if isinstance(raw, Mapping) else None
    return value if isinstance(value, str) and value else None


def _flat_trace_id(document: Any) -> str | None:
    """The trace of a span or log record as the console exporter prints it, if it is one."""
    if isinstance(document, Mapping) and not _is_export(document):
        return (
            _trace_id_of(document.get("context"), "trace_id")
            or _trace_id_of(document, "trace_id")
            or _trace_id_of(document.get("spanContext"), "traceId")
            or _trace_id_of(document, "traceId")
        )
    return None


def _otlp_span(raw: Any, path: str, order: int, origin: int) -> Span:
    span = expect_dict(raw, path)
    trace_id = span.get("traceId")
    if not isinstance(trace_id, str) or not trace_id:
        raise ConversionError(at(path, "traceId"), "expected a non-empty string")
    span_id = span.get("spanId")
    status = _mapping(span.get("status"))
    events = []
    for index, raw_event in enumerate(expect_list(span.get("events", []), at(path, "events"))):
        e_path = at(at(path, "events"), index)
        event = expect_dict(raw_event, e_path)
        events.append(
            Event(
                str(event.get("name", "")),
                _attributes(event.get("attributes", []), at(e_path, "attributes")),
                origin=origin,
            )
        )
    parent = span.get("parentSpanId")
    return Span(
        trace_id=trace_id,
        span_id=str(span_id or f"#{order}"),
        parent_id=parent if isinstance(parent, str) and parent else None,
        name=str(span.get("name", "")),
        start=_nanos(span.get("startTimeUnixNano")),
        end=_nanos(span.get("endTimeUnixNano")),
        attrs=_attributes(span.get("attributes", []), at(path, "attributes")),
        events=events,
        status=_status(status.get("code")),
        status_message=_message(status.get("message")),
        path=path,
        order=order,
        origin=origin,
    )


def _flat_span(span: dict[str, Any], path: str, order: int, origin: int) -> Span:
    """A span as the SDK's console exporter prints it."""
    context = span.get("context")
    if not isinstance(context, Mapping) or not isinstance(context.get("trace_id"), str):
        raise ConversionError(path, _NOT_OTLP)
    status = _mapping(span.get("status"))
    events = [
        Event(
            str(e.get("name", "")),
            _attributes(e.get("attributes", {}), at(path, "events")),
            origin=origin,
        )
        for e in expect_list(span.get("events", []), at(path, "events"))
        if isinstance(e, Mapping)
    ]
    parent = span.get("parent_id")
    return Span(
        trace_id=context["trace_id"],
        span_id=str(context.get("span_id") or f"#{order}"),
        parent_id=parent if isinstance(parent, str) and parent else None,
        name=str(span.get("name", "")),
        start=_iso_nanos(span.get("start_time")),
        end=_iso_nanos(span.get("end_time")),
        attrs=_attributes(span.get("attributes", {}), at(path, "attributes")),
        events=events,
        status=_status(status.get("status_code")),
        status_message=_message(status.get("description")),
        path=path,
        order=order,
        origin=origin,
    )


def is_js_span(record: Mapping[str, Any]) -> bool:
    """A span of the OpenTelemetry JS SDK: a ``ReadableSpan`` as ``JSON.stringify`` writes it
    (``spanContext`` or ``_spanContext``, ``[seconds, nanos]`` times) or as its console
    exporter prints it (``traceId``, ``id``, ``timestamp`` and ``duration`` in µs)."""
    context = record.get("spanContext", record.get("_spanContext"))
    if isinstance(context, Mapping) and isinstance(context.get("traceId"), str):
        return True
    return (
        isinstance(record.get("traceId"), str)
        and isinstance(record.get("id"), str)
        and "timestamp" in record
        and "name" in record
    )


def _js_span(span: dict[str, Any], path: str, order: int, origin: int) -> Span:
    context = _mapping(span.get("spanContext", span.get("_spanContext")))
    trace_id = context.get("traceId") or span.get("traceId")
    if not isinstance(trace_id, str) or not trace_id:
        raise ConversionError(at(path, "spanContext.traceId"), "expected a non-empty string")
    span_id = context.get("spanId") or span.get("id")
    parent = span.get("parentSpanId") or span.get("parentId")
    parent_context = span.get("parentSpanContext")
    if not parent and isinstance(parent_context, Mapping):
        parent = parent_context.get("spanId")
    start = _hr_nanos(span.get("startTime", span.get("_startTime")))
    end = _hr_nanos(span.get("endTime", span.get("_endTime")))
    if start is None and _finite(span.get("timestamp")):
        start = int(span["timestamp"] * 1000)  # microseconds
        duration = span.get("duration")
        if _finite(duration):
            end = start + int(duration * 1000)
        elif _hr_nanos(duration) is not None:
            end = start + (_hr_nanos(duration) or 0)
    status = _mapping(span.get("status"))
    events = [
        Event(
            str(e.get("name", "")),
            _attributes(e.get("attributes") or {}, at(path, "events")),
            time=_hr_nanos(e.get("time")),
            origin=origin,
        )
        for e in expect_list(span.get("events", []), at(path, "events"))
        if isinstance(e, Mapping)
    ]
    return Span(
        trace_id=trace_id,
        span_id=str(span_id or f"#{order}"),
        parent_id=parent if isinstance(parent, str) and parent else None,
        name=str(span.get("name", "")),
        start=start,
        end=end,
        attrs=_attributes(span.get("attributes") or {}, at(path, "attributes")),
        events=events,
        status=_status(status.get("code")),
        status_message=_message(status.get("message")),
        path=path,
        order=order,
        origin=origin,
    )


def _message(value: Any) -> str | None:
    """A span status's message as text: a number or an object written out (some exporters
    put an error code there), nothing for an empty one."""
    if value is None or value == "" or isinstance(value, bool):
        return None
    return value if isinstance(value, str) else json.dumps(value, default=str)[:1000]


def _finite(value: Any) -> TypeGuard[int | float]:
    """Whether ``value`` is a number whose thousandfold is finite (1e308 is valid JSON)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value * 1000.0)
    except OverflowError:  # an int past a float's range
        return False


def _hr_nanos(value: Any) -> int | None:
    """A JS SDK time: ``[seconds, nanoseconds]`` (HrTime); ``None`` for anything else."""
    if (
        isinstance(value, (list, tuple))
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    ):
        return int(value[0]) * 1_000_000_000 + int(value[1])
    return None


def _otlp_log(raw: Any, path: str, origin: int) -> list[_LogEvent]:
    """A log record, if it is a GenAI event (``eventName`` or ``event.name`` ``gen_ai.*``)."""
    record = expect_dict(raw, path)
    attrs = _attributes(record.get("attributes", []), at(path, "attributes"))
    name = record.get("eventName") or attrs.get("event.name")
    if not isinstance(name, str) or not name.startswith("gen_ai."):
        return []
    body = _any_value(record.get("body"), at(path, "body"))
    time = _nanos(record.get("timeUnixNano")) or _nanos(record.get("observedTimeUnixNano"))
    event = Event(name, attrs, body=body, time=time, origin=origin)
    return [_LogEvent(_id(record.get("traceId")), _id(record.get("spanId")), event, path)]


def _flat_log(record: dict[str, Any], path: str, origin: int) -> list[_LogEvent]:
    """A log record as the SDK's console exporter prints it."""
    attrs = _attributes(record.get("attributes") or {}, at(path, "attributes"))
    name = record.get("event_name") or attrs.get("event.name")
    if not isinstance(name, str) or not name.startswith("gen_ai."):
        return []
    time = _iso_nanos(record.get("timestamp")) or _iso_nanos(record.get("observed_timestamp"))
    event = Event(name, attrs, body=record.get("body"), time=time, origin=origin)
    trace_id, span_id = _id(record.get("trace_id")), _id(record.get("span_id"))
    return [_LogEvent(trace_id, span_id, event, path)]


def _id(value: Any) -> str | None:
    """A trace or span id; the all-zero id (no trace context) is none."""
    if not isinstance(value, str) or not value.removeprefix("0x").strip("0"):
        return None
    return value


def _attach_logs(reading: _Reading) -> None:
    """Each GenAI event joins its span; events of a span not read join a stand-in span."""
    spans = {(span.trace_id, span.span_id): span for span in reading.spans}
    for log in reading.logs:
        if log.trace_id is None:
            error = ConversionError(
                log.path, "a GenAI event without a traceId cannot be joined to its trace"
            )
            reading.problems.append(SpanProblem(log.event.origin or 0, None, error))
            continue
        key = (log.trace_id, log.span_id or "")
        span = spans.get(key)
        if span is None:
            span = spans[key] = _stand_in(log, len(reading.spans))
            reading.spans.append(span)
        span.events.append(log.event)
        if span.stand_in:
            _describe_stand_in(span, log.event)


def _stand_in(log: _LogEvent, order: int) -> Span:
    return Span(
        trace_id=log.trace_id or "",
        span_id=log.span_id or f"#{order}",
        parent_id=None,
        name=log.event.name,
        start=log.event.time,
        end=None,
        attrs={},
        events=[],
        status="unset",
        status_message=None,
        path=log.path,
        order=order,
        origin=log.event.origin or 0,
        stand_in=True,
    )


def _describe_stand_in(span: Span, event: Event) -> None:
    for key in _STAND_IN_ATTRIBUTES:
        if key in event.attrs:
            span.attrs.setdefault(key, event.attrs[key])
    # Its start orders it among the spans; events give no duration.
    if event.time is not None:
        span.start = event.time if span.start is None else min(span.start, event.time)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _status(code: Any) -> str:
    if code in (2, "2", "STATUS_CODE_ERROR", "ERROR", "StatusCode.ERROR"):
        return "error"
    if code in (1, "1", "STATUS_CODE_OK", "OK", "StatusCode.OK"):
        return "ok"
    return "unset"


def _nanos(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def _iso_nanos(value: Any) -> int | None:
    moment = parse_timestamp(value)
    return int(moment.timestamp() * 1e9) if moment else None


def _attributes(raw: Any, path: str) -> dict[str, Any]:
    """OTLP attributes (``[{key, value: AnyValue}]``) or a plain object, as a dict."""
    if isinstance(raw, Mapping):
        return dict(raw)
    out: dict[str, Any] = {}
    for index, item in enumerate(expect_list(raw, path)):
        item = expect_dict(item, at(path, index))
        key = item.get("key")
        if not isinstance(key, str):
            raise ConversionError(at(at(path, index), "key"), "expected a string")
        out[key] = _any_value(item.get("value"), f"{path}[{key}].value")
    return out


def _any_value(value: Any, path: str) -> Any:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ConversionError(path, "expected an OTLP AnyValue object")
    if "stringValue" in value:
        return value["stringValue"]
    if "boolValue" in value:
        return value["boolValue"]
    if "intValue" in value:
        number = value["intValue"]
        if isinstance(number, str):
            # OTLP JSON writes 64-bit integers as strings; anything else there is not one.
            try:
                return int(number)
            except ValueError:
                raise ConversionError(
                    f"{path}.intValue", f"expected an integer, got {number[:40]!r}"
                ) from None
        return number
    if "doubleValue" in value:
        return value["doubleValue"]
    if "arrayValue" in value:
        items = (value["arrayValue"] or {}).get("values", [])
        return [_any_value(v, at(path, i)) for i, v in enumerate(items)]
    if "kvlistValue" in value:
        items = (value["kvlistValue"] or {}).get("values", [])
        return {str(kv.get("key")): _any_value(kv.get("value"), path) for kv in items}
    if "bytesValue" in value:
        return value["bytesValue"]
    if not value:
        return None
    raise ConversionError(path, f"unknown AnyValue kind {next(iter(value))!r}")
