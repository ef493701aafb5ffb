"""The formats by name: :data:`FORMATS`, :func:`convert` for one record and :func:`detect_format`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from knowledgepulse._schema import ReasoningTrace, TraceValidationError
from knowledgepulse.io._reader import json_type_name

from ._detect import TRACE_FORMAT, detect_format, first_of
from ._harness import HARNESS_CONVERTERS, HARNESS_DESCRIPTIONS
from ._langsmith_batch import langsmith_batch_traces
from ._options import ImportOptions, override_trace_data, resolve_options
from ._values import ConversionError
from .anthropic import from_anthropic
from .atif import from_atif
from .bedrock import from_bedrock
from .gemini import from_gemini
from .langfuse import from_langfuse
from .langsmith import langsmith_traces
from .openai import from_openai, is_responses_items
from .openai_agents import from_openai_agents
from .otel import from_otel
from .who_and_when import from_who_and_when

__all__ = [
    "FORMATS",
    "TRACE_FORMAT",
    "Importer",
    "convert",
    "detect_format",
    "format_help",
    "format_names",
    "trace_from_record",
    "undetected",
]

AUTO_FORMAT = "auto"
_TRACE_DESCRIPTION = "ReasoningTrace records, validated as they are"
_AUTO_DESCRIPTION = "detected per record (a ReasoningTrace, else one of the formats below)"


@dataclass(frozen=True)
class Importer:
    """A source format: its name, a one-line description and its converter."""

    name: str
    description: str
    convert: Callable[[Any, ImportOptions | None], list[ReasoningTrace]]

    def __call__(
        self, record: Any, options: ImportOptions | None = None, **overrides: Any
    ) -> list[ReasoningTrace]:
        """The traces of one record; see :func:`convert`."""
        return self.convert(record, resolve_options(options, overrides))


_NOT_RESPONSES = (
    "not OpenAI Responses API output (expected a response object with an 'output' list, or "
    'Responses items such as {"type": "function_call", ...})'
)


def _openai_responses(record: Any, options: ImportOptions | None) -> list[ReasoningTrace]:
    """Only Responses API records: a Chat Completions record is refused with this format's
    own message (naming the format it looks like), not converted as chat."""
    if isinstance(record, list):
        fits = is_responses_items(record) or (bool(record) and all(_is_response(r) for r in record))
    else:
        fits = _is_response(record)
    if not fits:
        detected = detect_format(record)
        hint = (
            f"; it looks like {detected}: use --from {detected}"
            if detected not in (None, "openai-responses")
            else ""
        )
        raise ConversionError("", _NOT_RESPONSES + hint)
    return from_openai(record, options)


def _is_response(record: Any) -> bool:
    return isinstance(record, Mapping) and isinstance(record.get("output"), list)


FORMATS: dict[str, Importer] = {
    "openai": Importer(
        "openai",
        "OpenAI Chat Completions messages (also tau-bench records and Responses API items)",
        from_openai,
    ),
    "openai-responses": Importer(
        "openai-responses", "OpenAI Responses API output items", _openai_responses
    ),
    "anthropic": Importer("anthropic", "Anthropic Messages API conversations", from_anthropic),
    "otel": Importer(
        "otel",
        "OpenTelemetry GenAI / OpenInference / Vercel AI SDK spans and GenAI log events, "
        "OTLP JSON (one trace per traceId)",
        from_otel,
    ),
    "openai-agents": Importer(
        "openai-agents",
        "OpenAI Agents SDK trace exports (trace and trace.span items, one trace per trace id)",
        from_openai_agents,
    ),
    "langfuse": Importer(
        "langfuse", "Langfuse traces with their observations (GET /traces/{id})", from_langfuse
    ),
    "langsmith": Importer("langsmith", "LangSmith run trees or flat run lists", langsmith_traces),
    "langsmith-batch": Importer(
        "langsmith-batch",
        "LangSmith ingestion batches ({post, patch}, POST /runs/batch), merged by run id per file",
        langsmith_batch_traces,
    ),
    "atif": Importer(
        "atif", "Harbor ATIF agent trajectories (a Harbor job directory: one per trial)", from_atif
    ),
    "gemini": Importer("gemini", "Gemini generateContent requests and responses", from_gemini),
    "bedrock": Importer("bedrock", "Amazon Bedrock Converse requests and responses", from_bedrock),
    "who-and-when": Importer(
        "who-and-when",
        "multi-agent role/name/content logs as Who&When keeps them (Magentic-One, AG2)",
        from_who_and_when,
    ),
}
# Agent harnesses' own logs (Claude Code, Codex, Inspect AI, SWE-agent, OpenHands, tau2-bench).
FORMATS.update(
    (name, Importer(name, HARNESS_DESCRIPTIONS[name], converter))
    for name, converter in HARNESS_CONVERTERS.items()
)


def format_names() -> list[str]:
    """Every name :func:`convert` and :func:`~knowledgepulse.importers.read_traces` accept."""
    return [TRACE_FORMAT, AUTO_FORMAT, *FORMATS]


def format_help() -> str:
    """The formats, one per line: the name, then its description (for a command's help)."""
    rows = [
        (TRACE_FORMAT, _TRACE_DESCRIPTION),
        (AUTO_FORMAT, _AUTO_DESCRIPTION),
        *((importer.name, importer.description) for importer in FORMATS.values()),
    ]
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name.ljust(width)}  {description}" for name, description in rows)


def trace_from_record(record: Any, options: ImportOptions | None = None) -> ReasoningTrace:
    """A ReasoningTrace record, validated, with ``options`` written over it.

    Raises :class:`ConversionError` listing every problem (``steps[2].type: ...``).
    """
    if not isinstance(record, Mapping):
        raise ConversionError("", f"expected a JSON object, got {json_type_name(record)}")
    data = override_trace_data(dict(record), options or ImportOptions())
    try:
        return ReasoningTrace.model_validate(data)
    except TraceValidationError as exc:
        raise ConversionError.from_validation(exc) from None


def convert(
    format: str, record: Any, options: ImportOptions | None = None, **overrides: Any
) -> list[ReasoningTrace]:
    """One loaded JSON record (or a list of records) of ``format`` → its traces.

    ``format`` is a key of :data:`FORMATS`, ``"trace"`` or ``"auto"``. ``options`` (and
    keyword ``overrides`` of its fields, such as ``task_domain="code"``) replace source values
    in every trace. Raises :class:`ConversionError` naming the offending field's path, and
    TypeError for an unknown option.
    """
    options = resolve_options(options, overrides)
    name = format
    if name == AUTO_FORMAT:
        detected = detect_format(record)
        if detected is None:
            raise ConversionError("", undetected(record))
        name = detected
    if name == TRACE_FORMAT:
        return [trace_from_record(record, options)]
    importer = FORMATS.get(name)
    if importer is None:
        known = ", ".join(format_names())
        raise ConversionError("", f"unknown format {format!r} (expected one of {known})")
    try:
        return importer(record, options)
    except (ConversionError, TraceValidationError):
        raise
    except RecursionError:
        # JSON text inside the record (tool-call arguments, span attributes) nesting past
        # what Python's parser follows: the record's own depth was checked when it was read.
        raise ConversionError(
            "", "a value inside the record (JSON text) is nested deeper than kp reads"
        ) from None
    except _UNEXPECTED as exc:
        # A value of a type or form no reader expected (a list where an id goes, a number
        # where text goes) that slipped past the readers' own checks: the record is refused
        # with what was wrong, and the run goes on with the next one.
        raise ConversionError(
            "", f"a value of an unexpected type or form ({type(exc).__name__}: {exc})"[:300]
        ) from None


#: The errors a reader may raise on a value it did not expect, turned into a refusal.
_UNEXPECTED = (TypeError, ValueError, KeyError, IndexError, AttributeError, OverflowError)


# The fields each format's records are known by: what the refusal of an undetected record
# compares the fields it saw with, to name the nearest formats.
_SIGNATURES: dict[str, frozenset[str]] = {
    "openai": frozenset({"messages", "role", "content", "tool_calls", "traj", "choices"}),
    "openai-responses": frozenset({"output", "input", "type", "call_id", "status"}),
    "anthropic": frozenset({"messages", "system", "role", "content", "stop_reason", "model"}),
    "otel": frozenset({"resourceSpans", "traceId", "spanId", "attributes", "context", "name"}),
    "openai-agents": frozenset({"object", "trace_id", "span_data", "workflow_name"}),
    "langfuse": frozenset({"trace", "observations", "input", "output", "name"}),
    "langsmith": frozenset({"run_type", "inputs", "outputs", "child_runs", "dotted_order"}),
    "langsmith-batch": frozenset({"post", "patch"}),
    "atif": frozenset({"schema_version", "session_id", "agent", "steps"}),
    "gemini": frozenset({"contents", "candidates", "role", "parts"}),
    "bedrock": frozenset({"modelId", "messages", "output", "stopReason"}),
    "claude-code": frozenset({"sessionId", "uuid", "parentUuid", "message", "type"}),
    "codex": frozenset({"type", "payload", "timestamp"}),
    "inspect": frozenset({"eval", "samples", "version", "status"}),
    "swe-agent": frozenset({"trajectory", "history", "info", "replay_config", "environment"}),
    "mini-swe-agent": frozenset({"messages", "info", "trajectory_format", "instance_id"}),
    "openhands": frozenset({"history", "instruction", "action", "observation", "source", "id"}),
    "tau2": frozenset({"simulations", "tasks", "info", "timestamp"}),
    "harbor-traces": frozenset({"conversations", "episode", "trial_name", "run_id"}),
}
_NEAREST = 3
_KEYS_SHOWN = 8


def undetected(record: Any) -> str:
    """Why auto-detection refused ``record``: what it saw (its shape, the fields of its first
    object) and the formats whose fields are nearest, so the user knows what to name."""
    seen = _fields_seen(record)
    scores = sorted(
        ((len(seen & fields), name) for name, fields in _SIGNATURES.items() if seen & fields),
        key=lambda item: (-item[0], item[1]),
    )
    nearest = ", ".join(
        f"{name} ({', '.join(sorted(seen & _SIGNATURES[name]))})" for _, name in scores[:_NEAREST]
    )
    message = f"could not detect the format; name it with --from (saw {_shape(record)}"
    return message + (
        f"; nearest formats: {nearest})" if nearest else "; no format has these fields)"
    )


def _fields_seen(record: Any) -> set[str]:
    """The keys of ``record``'s objects: its own, and those of the first object in each of its
    lists (one level down)."""
    objects: list[Mapping[str, Any]] = []
    items = list(record) if isinstance(record, (list, tuple)) else [record]
    for item in items[:4]:
        if isinstance(item, Mapping):
            objects.append(item)
            for value in item.values():
                first = first_of(value)
                if first:
                    objects.append(first)
    return {str(key) for obj in objects for key in obj}


def _shape(value: Any) -> str:
    if isinstance(value, Mapping):
        keys = [str(k) for k in value]
        shown = ", ".join(keys[:_KEYS_SHOWN]) + (", ..." if len(keys) > _KEYS_SHOWN else "")
        return f"an object with keys {shown}" if keys else "an empty object"
    if isinstance(value, (list, tuple)):
        parts = ", ".join(_shape_short(v) for v in value[:2])
        more = ", ..." if len(value) > 2 else ""
        return f"an array of {len(value)}: {parts}{more}" if value else "an empty array"
    return _shape_short(value)


def _shape_short(value: Any) -> str:
    if isinstance(value, str):
        text = value if len(value) <= 40 else value[:39] + "…"
        return f"a string {text!r}"
    if isinstance(value, (Mapping, list, tuple)):
        return _shape(value)
    return json_type_name(value)
