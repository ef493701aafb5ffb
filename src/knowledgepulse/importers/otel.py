"""OpenTelemetry GenAI spans (OTLP JSON) → ReasoningTraces, one per ``traceId``.

Input: an OTLP JSON export ``{"resourceSpans": [{"scopeSpans": [{"spans": [...]}]}]}``, with
or without ``resourceLogs`` (GenAI events as log records, joined to their spans), or a list of
them (e.g. one per line of a ``.jsonl`` file), or spans as the SDK's console exporter prints
them (``context.trace_id``, ``parent_id``, ``start_time``, attributes as an object), or JS
SDK spans (``spanContext``, ``[seconds, nanos]`` times); see :mod:`._otlp`. Without captured
content (the GenAI default) the trace is its tool spans, its objective defaulted to the
agent's name, else the top agent or root span's name. Spans are grouped by ``traceId`` and ordered by start time. Vercel AI SDK spans
are routed on ``ai.operationId`` (:mod:`.vercel`). Each trace keeps ``otel_trace_id`` and
``otel_span_id`` (the top agent span, else the root) in ``metadata.kp_import``; a trace whose
root span is missing is noted there (``notes``).

Each span is routed on ``gen_ai.operation.name`` or OpenInference's ``openinference.span.kind``:

- **tool** (``execute_tool``, ``TOOL``, ``RETRIEVER``, or any span with ``gen_ai.tool.name``):
  tool_call ``gen_ai.tool.name``/``tool.name`` (else the span name after ``execute_tool``) with
  ``gen_ai.tool.call.arguments``/``gen_ai.tool.input`` (Sentry)/``input.value`` as ``input`` (JSON object; other text is kept
  as ``{"input": text}``), unless an earlier LLM output already holds that call (same
  ``gen_ai.tool.call.id``, else the same tool name); then an observation of
  ``gen_ai.tool.call.result``/``gen_ai.tool.output`` (Sentry)/``output.value``. Status ERROR marks it failed (its text is the
  status message or the ``exception`` event when there is no result). The span's duration is the
  tool call's ``latency_ms``.
- **LLM** (``chat``, ``text_completion``, ``generate_content``, ``LLM``, or a span carrying
  messages): messages from ``gen_ai.input.messages``/``gen_ai.output.messages`` (parts ``text``
  → thought, ``reasoning`` → thought, ``tool_call`` → tool_call, ``tool_call_response`` →
  observation), from the older per-message events (``gen_ai.user.message``,
  ``gen_ai.assistant.message``, ``gen_ai.tool.message``, ``gen_ai.choice``), from
  ``gen_ai.prompt``/``gen_ai.completion`` (JSON, or flattened ``gen_ai.prompt.0.role`` ...), or
  from OpenInference ``llm.input_messages.N.message.*``/``llm.output_messages.N.message.*``.
  Every span repeats the conversation so far; each item becomes a step once. Status ERROR
  adds a failed observation (the status message).
- **agent** (``invoke_agent``, ``create_agent``, ``AGENT``, ``CHAIN``): the top-most one gives
  the objective (first user message, or ``input.value``), the result summary (last assistant
  message, or ``output.value``), ``gen_ai.agent.name`` (OpenInference: the span's name) →
  ``agent_id`` (of the nearest agent span above the first LLM or tool span when that one
  names its agent: an outer workflow span is not the agent), and its status →
  success (ERROR → false, OK → true). Its messages become steps only when the trace has no LLM
  span. Other spans (HTTP, embeddings, ...) are not steps.

Success without an agent span comes from the root span's status; UNSET → defaulted.

A trace with no model, agent or tool span (embedding calls, a workflow being built, beside the
runs of a span file) is not a run: :class:`~._values.NotARun`, which the file readers count and
name (``Conversion.not_runs``) instead of rejecting.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import re
from collections.abc import Iterable, Mapping
from typing import Any

from knowledgepulse._schema import ReasoningTrace

from ._binary import redact_binary
from ._builder import TraceBuilder
from ._messages import text_from_value
from ._objective import FROM_AGENT_NAME, FROM_SPAN_NAME, FROM_TRACE_INPUT
from ._options import ImportOptions, resolve_options
from ._otel_spans import DETAILS_EVENT, MESSAGE_EVENTS, Span, span_calls, span_messages, unflatten
from ._otlp import SpanProblem, read_spans
from ._replay import Replay
from ._tool_definitions import tools_of_spans
from ._values import ConversionError, NotARun, parse_arguments, parse_timestamp, stringify
from .vercel import vercel_kind, vercel_operation, vercel_tool

__all__ = [
    "SpanProblem",
    "convert_trace",
    "from_otel",
    "group_spans",
    "read_spans",
    "trace_options",
]

_LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content", "completion"})
_AGENT_OPERATIONS = frozenset({"invoke_agent", "create_agent"})
_HEX_ID = re.compile(r"^(?:0x)?([0-9a-fA-F]+)$")
ROOT_MISSING = "root span missing"
NO_SPANS = "no spans, only GenAI events (log records)"


def from_otel(
    record: Any, options: ImportOptions | None = None, **overrides: Any
) -> list[ReasoningTrace]:
    """The traces in an OTLP JSON export (one per ``traceId``, in order of first appearance).

    ``options`` (and keyword ``overrides`` of its fields) replace source values in every
    trace; with several traces, a given ``trace_id`` gets ``:<traceId>`` appended to stay
    unique. Raises :class:`ConversionError` naming the offending field's path (listing every
    broken span in ``problems``).
    """
    options = resolve_options(options, overrides)
    # A log record without GenAI content holds nothing to import.
    spans, problems, _ = read_spans([(record, "", 0)])
    if problems:
        raise ConversionError.merged([problem.error for problem in problems])
    if not spans:
        raise ConversionError("", "no spans found (expected resourceSpans[].scopeSpans[].spans[])")
    groups = group_spans(spans)
    traces: list[ReasoningTrace] = []
    not_runs: list[NotARun] = []
    for otel_id, group in groups.items():
        try:
            traces.append(
                convert_trace(otel_id, group, trace_options(options, otel_id, len(groups)))
            )
        except NotARun as exc:
            not_runs.append(exc)
    # Traces that are not runs, beside runs, are left out; with no run at all, that is why.
    if not traces and not_runs:
        raise ConversionError.merged(not_runs)
    return traces


def group_spans(spans: Iterable[Span]) -> dict[str, list[Span]]:
    """Spans by ``traceId``, in order of first appearance."""
    groups: dict[str, list[Span]] = {}
    for span in spans:
        groups.setdefault(span.trace_id, []).append(span)
    return groups


def trace_options(options: ImportOptions, otel_id: str, count: int) -> ImportOptions:
    """The options for one of ``count`` traces: a given ``trace_id`` is made unique."""
    if options.trace_id and count > 1:
        return dataclasses.replace(options, trace_id=f"{options.trace_id}:{otel_id}")
    return options


def convert_trace(otel_id: str, spans: list[Span], options: ImportOptions) -> ReasoningTrace:
    """The trace of one ``traceId``'s spans. Raises :class:`ConversionError`; one that no
    field explains is named ``trace <traceId>``."""
    try:
        return _convert_trace(otel_id, spans, options)
    except ConversionError as exc:
        if exc.path:
            raise
        raise ConversionError(f"trace {otel_id}", exc.reason) from None


# ---------------------------------------------------------------------------------------------
# One trace


def _classify(span: Span) -> str:
    vercel = vercel_kind(span.attrs)
    if vercel is not None:
        return vercel
    operation = span.attrs.get("gen_ai.operation.name")
    operation = operation if isinstance(operation, str) else None  # a list names none
    kind = str(span.attrs.get("openinference.span.kind", "")).upper()
    if operation == "execute_tool" or kind in ("TOOL", "RETRIEVER"):
        return "tool"
    if operation in _AGENT_OPERATIONS or kind in ("AGENT", "CHAIN"):
        return "agent"
    if operation in _LLM_OPERATIONS or kind == "LLM":
        return "llm"
    if not kind:
        if operation is None and "gen_ai.tool.name" in span.attrs:
            return "tool"
        # An operation named otherwise (Semantic Kernel's "chat.completions") with messages is
        # a model call all the same.
        if _has_messages(span):
            return "llm"
    return "other"


_MESSAGE_KEYS = (
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.prompt",
    "gen_ai.completion",
    "llm.input_messages",
    "llm.output_messages",
)


def _has_messages(span: Span) -> bool:
    return any(k.startswith(_MESSAGE_KEYS) for k in span.attrs) or any(
        e.name in MESSAGE_EVENTS or e.name == DETAILS_EVENT or e.name.startswith("gen_ai.content.")
        for e in span.events
    )


def _convert_trace(otel_id: str, spans: list[Span], options: ImportOptions) -> ReasoningTrace:
    for span in spans:
        span.kind = _classify(span)
    spans.sort(key=lambda s: (s.start if s.start is not None else 0, s.order))
    if all(span.kind == "other" for span in spans):
        # Embedding calls, a workflow being built: no model, agent or tool span, no run.
        names = ", ".join(dict.fromkeys(span.name for span in spans if span.name)) or "unnamed"
        raise NotARun(
            f"trace {hex_id(otel_id)}",
            f"not a run (spans: {names}; no model, agent or tool span)",
        )
    builder = TraceBuilder("otel")
    builder.source_id = otel_id
    replay = Replay(builder)
    for span in spans:
        if span.start is not None:
            builder.note_time(parse_timestamp(span.start))

    ids = {span.span_id for span in spans if not span.stand_in}
    real = [s for s in spans if not s.stand_in]
    agents = [s for s in spans if s.kind == "agent"]
    top = agents[0] if agents else None
    root = next((s for s in real if s.parent_id is None), None)
    has_llm = any(s.kind == "llm" for s in spans)

    if top is not None:
        builder.at_origin(span_id=_span_origin(top))
        _read_top_agent(builder, top)
    ran = _agent_that_ran(spans)
    if ran is not None:
        builder.agent_id = ran
    # Without its root, no span speaks for the whole trace: success is left to the defaults.
    judge = top or root
    if judge is not None and judge.status != "unset":
        builder.success = judge.status == "ok"
    _note_source(builder, otel_id, spans, top, root, ids)

    builder.keep_tools(tools_of_spans(span.attrs for span in spans))
    for span in spans:
        builder.at_origin(span_id=_span_origin(span))
        if span.kind == "llm" or (span.kind == "agent" and not has_llm):
            _replay_model_calls(builder, replay, span)
        elif span.kind == "tool":
            _tool_span(replay, span)
        if span.kind in ("llm", "agent") and builder.objective is None:
            builder.user_message(
                text_from_value(span.attrs.get("input.value")), origin=FROM_TRACE_INPUT
            )
    # Content capture off (the GenAI instrumentations' default): no message, only names.
    builder.default_objective(builder.agent_id, FROM_AGENT_NAME)
    speaker = top or root
    if speaker is not None:
        builder.default_objective(speaker.name, FROM_SPAN_NAME)
    return builder.build({"traceId": otel_id}, options)


def _read_top_agent(builder: TraceBuilder, top: Span) -> None:
    """What the top agent span says of the whole run: its task (the user's messages or its
    input), its result (the last assistant text or its output) and the agent's name."""
    inputs, outputs = span_messages(top)
    for message in inputs:
        if message.role == "user" and message.text:
            builder.note_objective(message.text)
    builder.user_message(text_from_value(top.attrs.get("input.value")), origin=FROM_TRACE_INPUT)
    last = [m.text for m in outputs if m.role == "assistant" and m.text]
    summary = last[-1] if last else text_from_value(top.attrs.get("output.value"), output=True)
    if summary is not None:
        builder.result_summary = summary
    name = _agent_name(top)
    if name is not None:
        builder.agent_id = name


def _agent_name(span: Span) -> str | None:
    name = (
        span.attrs.get("gen_ai.agent.name")
        or span.attrs.get("gen_ai.agent.id")
        or span.attrs.get("ai.telemetry.functionId")
    )
    if isinstance(name, str) and name:
        return name
    # OpenInference names an AGENT span after its agent (and sets no attribute for it).
    if str(span.attrs.get("openinference.span.kind", "")).upper() == "AGENT" and span.name:
        return span.name
    return None


def _agent_that_ran(spans: list[Span]) -> str | None:
    """The name of the nearest agent span above the first LLM or tool span, when it has one.

    Instrumentations wrap the agent that did the work in an outer agent span for the
    workflow (OpenInference's OpenAI Agents instrumentation: a root AGENT span named after the
    workflow, "Agent workflow"); the agent is the one nearest the work.
    """
    by_id = {s.span_id: s for s in spans if not s.stand_in}
    first = next((s for s in spans if s.kind in ("llm", "tool")), None)
    parent = first.parent_id if first is not None else None
    seen: set[str] = set()
    while parent is not None and parent in by_id and parent not in seen:
        seen.add(parent)
        above = by_id[parent]
        if above.kind == "agent":
            name = _agent_name(above)
            if name is not None:
                return name
        parent = above.parent_id
    return None


def _replay_model_calls(builder: TraceBuilder, replay: Replay, span: Span) -> None:
    """The model calls a span logged (an error is the call's only for an LLM span), and the
    first model named."""
    for inputs, outputs in span_calls(span):
        replay.llm_call(
            inputs,
            outputs,
            latency_ms=span.latency_ms,
            error=span.error_text() if span.status == "error" and span.kind == "llm" else None,
        )
    model = (
        span.attrs.get("gen_ai.response.model")
        or span.attrs.get("gen_ai.request.model")
        or span.attrs.get("llm.model_name")
        or span.attrs.get("ai.response.model")
        or span.attrs.get("ai.model.id")
    )
    if isinstance(model, str) and model:
        builder.info.setdefault("model", model)


def _note_source(
    builder: TraceBuilder,
    otel_id: str,
    spans: list[Span],
    top: Span | None,
    root: Span | None,
    ids: set[str],
) -> None:
    """Keep the source's trace id and the span that stands for the whole trace (the top agent
    span, else the root span), so that later events can be parented to it."""
    builder.info["otel_trace_id"] = hex_id(otel_id)
    speaker = top or root
    anchor = speaker.span_id if speaker is not None else None
    if root is None:
        real = [s for s in spans if not s.stand_in]
        if real:
            builder.info["notes"] = [ROOT_MISSING]
            # The orphans' parent is the root that never arrived: its id is still known.
            orphan = next((s for s in real if s.parent_id not in ids), real[0])
            anchor = anchor or orphan.parent_id
        else:
            builder.info["notes"] = [NO_SPANS]
            anchor = anchor or spans[0].span_id
    if anchor is not None and not anchor.startswith("#"):
        builder.info["otel_span_id"] = hex_id(anchor)


def _span_origin(span: Span) -> str | None:
    """The span's id as a step's origin (a stand-in for log records carries theirs); none
    when the source gave no id (``#3``, the span's place, is made up)."""
    return None if span.span_id.startswith("#") else hex_id(span.span_id)


def hex_id(value: str) -> str:
    """A trace or span id as lowercase hex: OTLP/JSON's hex as is, the console exporter's
    ``0x`` prefix removed, protobuf JSON's base64 decoded; anything else unchanged."""
    match = _HEX_ID.match(value)
    if match is not None and len(match.group(1)) in (16, 32):
        return match.group(1).lower()
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return value
    return raw.hex() if len(raw) in (8, 16) else value


def _tool_span(replay: Replay, span: Span) -> None:
    attrs = span.attrs
    if vercel_operation(attrs) is not None:
        name, call_id, arguments, result = vercel_tool(attrs)
    else:
        raw_name = attrs.get("gen_ai.tool.name") or attrs.get("tool.name")
        name = raw_name if isinstance(raw_name, str) and raw_name else ""
        name = name or span.name.removeprefix("execute_tool").strip() or span.name or "tool"
        raw_id = attrs.get("gen_ai.tool.call.id") or attrs.get("tool_call.id")
        call_id = str(raw_id) if raw_id else None
        # Sentry's SDKs name them gen_ai.tool.input/gen_ai.tool.output.
        raw_args = _first_of(
            attrs, "gen_ai.tool.call.arguments", "gen_ai.tool.input", "input.value"
        )
        arguments = parse_arguments(raw_args, "", lenient=True)
        result = _first_of(attrs, "gen_ai.tool.call.result", "gen_ai.tool.output", "output.value")
        if result is None and any(k.startswith("retrieval.documents.") for k in attrs):
            result = _retrieval_documents(attrs)
    failed = span.status == "error"
    if result is not None:
        text: str | None = stringify(redact_binary(result))
    else:
        text = span.error_text() if failed else None
    replay.tool_run(
        name,
        call_id=call_id,
        arguments=arguments,
        result=text,
        failed=failed,
        latency_ms=span.latency_ms,
    )


def _first_of(attrs: Mapping[str, Any], *keys: str) -> Any:
    """The value of the first of ``keys`` present in ``attrs`` (``None`` when none is)."""
    for key in keys:
        if key in attrs:
            return attrs[key]
    return None


def _retrieval_documents(attrs: Mapping[str, Any]) -> str:
    docs = unflatten(attrs, "retrieval.documents")
    texts = []
    for doc in docs if isinstance(docs, list) else []:
        inner = doc.get("document", doc) if isinstance(doc, Mapping) else {}
        if isinstance(inner, Mapping) and isinstance(inner.get("content"), str):
            texts.append(inner["content"])
    return "\n\n".join(texts)
