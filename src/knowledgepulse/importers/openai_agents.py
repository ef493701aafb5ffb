"""OpenAI Agents SDK trace exports → ReasoningTraces, one per trace id.

Input: the items a tracing processor exports: a trace ``{"object": "trace", "id",
"workflow_name", "group_id", "metadata"}`` and its spans ``{"object": "trace.span", "id",
"trace_id", "parent_id", "started_at", "ended_at", "span_data": {"type": ...}, "error"}``,
one per line, as a list, as the SDK's upload batch ``{"data": [...]}``, or as a trace with its
``spans`` inside. Items are grouped by trace id (over the whole file when read as a stream)
and spans ordered by ``started_at``.

Span data by ``type``:

- ``generation``: ``input`` and ``output`` (Chat Completions messages) → thoughts, tool calls
  and tool results, each once; ``model`` → ``kp_import.model``; an ``error`` → failed
  observation;
- ``function``: tool_call ``name`` with ``input`` (JSON text) unless a generation already
  holds the call, then an observation of ``output`` (an ``error`` → failed, its message as
  the text when there is no output); the span's duration is the call's ``latency_ms``;
- ``handoff``: a thought ``Handoff from <from_agent> to <to_agent>``;
- ``guardrail``: an observation ``Guardrail <name>: passed`` or ``triggered`` (failed);
- ``agent``: the first one's ``name`` → ``agent_id``; an ``error`` on any agent span →
  success false; ``response``, ``custom`` and other spans → a failed observation when they
  carry an ``error``, else nothing (a ``response`` span holds only the response id).

The objective is the first user message of a generation, else ``objective``, ``input``,
``task`` or ``query`` in the trace's ``metadata``; later user messages are user observations
(each once, see :class:`~._replay.Replay`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from knowledgepulse._schema import ReasoningTrace
from knowledgepulse.io._reader import json_type_name

from ._binary import redact_binary
from ._builder import TraceBuilder
from ._messages import Message, message_from_chat, text_from_value
from ._objective import FROM_TASK_FIELD, FROM_TRACE_NAME
from ._options import ImportOptions, resolve_options
from ._replay import Replay
from ._values import ConversionError, at, expect_list, parse_arguments, parse_timestamp, stringify

__all__ = ["AgentsTrace", "convert_agents_trace", "from_openai_agents", "gather_agents_traces"]

_NOT_AN_ITEM = "expected an OpenAI Agents trace or span (object: trace or trace.span)"
_OBJECTIVE_KEYS = ("objective", "input", "task", "query", "question")


@dataclass
class AgentsTrace:
    """The items of one trace id: the trace (when exported) and its spans, with origins."""

    trace_id: str
    trace: Mapping[str, Any] | None = None
    spans: list[tuple[Mapping[str, Any], str]] = field(default_factory=list)
    origins: list[int] = field(default_factory=list)


def from_openai_agents(
    record: Any, options: ImportOptions | None = None, **overrides: Any
) -> list[ReasoningTrace]:
    """The traces in an OpenAI Agents SDK export, one per trace id (in order of appearance).

    ``options`` (and keyword ``overrides`` of its fields) replace source values in every
    trace. Raises :class:`ConversionError` naming the offending item's path.
    """
    options = resolve_options(options, overrides)
    traces, problems = gather_agents_traces([(record, "", 0)])
    if problems:
        raise ConversionError.merged([error for _, error in problems])
    if not traces:
        raise ConversionError("", "no trace or span items found")
    return [convert_agents_trace(trace, options) for trace in traces]


def gather_agents_traces(
    documents: Iterable[tuple[Any, str, int]],
) -> tuple[list[AgentsTrace], list[tuple[int, ConversionError]]]:
    """The items of ``documents`` (each with its path and origin) grouped by trace id, and
    the (origin, error) of each item that cannot be read."""
    groups: dict[str, AgentsTrace] = {}
    problems: list[tuple[int, ConversionError]] = []
    for record, path, origin in documents:
        try:
            for item, where in _items(record, path):
                kind = item.get("object")
                key = "id" if kind == "trace" else "trace_id"
                trace_id = item.get(key)
                if not isinstance(trace_id, str) or not trace_id:
                    raise ConversionError(at(where, key), "expected a non-empty string")
                group = groups.setdefault(trace_id, AgentsTrace(trace_id))
                if origin not in group.origins:
                    group.origins.append(origin)
                if kind == "trace":
                    group.trace = item
                else:
                    group.spans.append((item, where))
        except ConversionError as exc:
            problems.append((origin, exc))
    return list(groups.values()), problems


def _items(record: Any, path: str) -> Iterator[tuple[Mapping[str, Any], str]]:
    if isinstance(record, Mapping) and record.get("object") not in ("trace", "trace.span"):
        if isinstance(record.get("data"), list):
            yield from _items(record["data"], at(path, "data"))
            return
        raise ConversionError(path, _NOT_AN_ITEM)
    if isinstance(record, Mapping):
        yield record, path
        if record.get("object") == "trace" and "spans" in record:
            spans_path = at(path, "spans")
            for index, span in enumerate(expect_list(record["spans"], spans_path)):
                yield from _items(span, at(spans_path, index))
        return
    for index, item in enumerate(expect_list(record, path)):
        if not isinstance(item, Mapping):
            raise ConversionError(at(path, index), f"{_NOT_AN_ITEM}, got {json_type_name(item)}")
        yield from _items(item, at(path, index))


def convert_agents_trace(trace: AgentsTrace, options: ImportOptions) -> ReasoningTrace:
    """The ReasoningTrace of one trace id's items. Raises :class:`ConversionError`; one that
    no field explains is named ``trace <id>``."""
    try:
        return _convert(trace, options)
    except ConversionError as exc:
        if exc.path:
            raise
        raise ConversionError(f"trace {trace.trace_id}", exc.reason) from None


def _convert(trace: AgentsTrace, options: ImportOptions) -> ReasoningTrace:
    builder = TraceBuilder("openai-agents")
    builder.source_id = trace.trace_id
    replay = Replay(builder)
    info = trace.trace or {}
    if isinstance(info.get("workflow_name"), str):
        builder.info["workflow_name"] = info["workflow_name"]
        builder.default_objective(info["workflow_name"], FROM_TRACE_NAME)
    if isinstance(info.get("group_id"), str):
        builder.info["group_id"] = info["group_id"]

    for span, data in _spans_in_time_order(trace, builder):
        _read_span(builder, replay, span, data)

    metadata = info.get("metadata")
    if builder.objective is None and isinstance(metadata, Mapping):
        for key in _OBJECTIVE_KEYS:
            builder.user_message(text_from_value(metadata.get(key)), origin=FROM_TASK_FIELD)
    return builder.build({"trace_id": trace.trace_id}, options)


def _spans_in_time_order(
    trace: AgentsTrace, builder: TraceBuilder
) -> list[tuple[Mapping[str, Any], Mapping[str, Any]]]:
    """Each span and its ``span_data``, by start time (spans without one first, in file
    order); every start time is noted on ``builder``."""
    spans = []
    for order, (span, path) in enumerate(trace.spans):
        data = span.get("span_data")
        if not isinstance(data, Mapping) or not isinstance(data.get("type"), str):
            raise ConversionError(at(path, "span_data.type"), "expected a string")
        start = parse_timestamp(span.get("started_at"))
        builder.note_time(start)
        spans.append((start.timestamp() if start else 0.0, order, span, data))
    spans.sort(key=lambda item: (item[0], item[1]))
    return [(span, data) for _, _, span, data in spans]


def _read_span(
    builder: TraceBuilder, replay: Replay, span: Mapping[str, Any], data: Mapping[str, Any]
) -> None:
    """The steps (or facts) of one span, by its ``span_data.type``."""
    ident = span.get("id", span.get("span_id"))
    builder.at_origin(span_id=ident if isinstance(ident, str) and ident else None)
    kind = data["type"]
    error = _error_text(span.get("error"))
    latency = _latency_ms(span)
    if kind == "agent":
        if builder.agent_id is None and isinstance(data.get("name"), str):
            builder.agent_id = data["name"]
        if error is not None:
            builder.success = False
    elif kind == "generation":
        inputs = _messages(data.get("input"))
        outputs = [_as_assistant(m) for m in _messages(data.get("output"))]
        replay.llm_call(inputs, outputs, latency_ms=latency, error=error)
        if isinstance(data.get("model"), str):
            builder.info.setdefault("model", data["model"])
    elif kind == "function":
        output = data.get("output")
        text = stringify(redact_binary(output)) if output is not None else error
        replay.tool_run(
            str(data.get("name") or "function"),
            call_id=None,
            arguments=parse_arguments(data.get("input"), "", lenient=True),
            result=text,
            failed=error is not None,
            latency_ms=latency,
        )
    elif kind == "handoff":
        source, target = data.get("from_agent"), data.get("to_agent")
        builder.thought(f"Handoff from {source or 'an agent'} to {target or 'an agent'}")
    elif kind == "guardrail":
        triggered = data.get("triggered") is True
        verdict = "triggered" if triggered else "passed"
        builder.observation(f"Guardrail {data.get('name') or ''}: {verdict}", failed=triggered)
    elif error is not None:
        builder.observation(error, failed=True)


def _messages(raw: Any) -> list[Message]:
    if isinstance(raw, str):
        raw = [{"role": "user", "content": raw}]
    if not isinstance(raw, list):
        return []
    return [m for m in (message_from_chat(redact_binary(item)) for item in raw) if m is not None]


def _as_assistant(message: Message) -> Message:
    return message if message.role != "user" else Message("assistant", message.parts)


def _error_text(error: Any) -> str | None:
    if error is None:
        return None
    if isinstance(error, Mapping):
        message = error.get("message")
        data = error.get("data")
        # The SDK's message is generic ("Error running tool"); the cause is in its data.
        cause = data.get("error") if isinstance(data, Mapping) else None
        if isinstance(message, str) and message:
            return f"{message}: {cause}" if isinstance(cause, str) and cause else message
        return stringify(error)
    return stringify(error)


def _latency_ms(span: Mapping[str, Any]) -> float | None:
    start, end = parse_timestamp(span.get("started_at")), parse_timestamp(span.get("ended_at"))
    if start is None or end is None or end < start:
        return None
    return round((end - start).total_seconds() * 1000, 3)
