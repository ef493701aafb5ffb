"""Which format a record looks like: :func:`detect_format`, by the fields each format's records
are known by. Below every converter, so a converter's refusal can name the format that fits."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from ._harness import detect_harness_format
from ._langsmith_runs import is_langsmith_batch
from ._otlp import is_js_span
from .bedrock import is_bedrock_messages, is_bedrock_record
from .gemini import is_gemini_contents, is_gemini_record
from .openai import is_responses_items
from .who_and_when import is_who_and_when_record

__all__ = ["TRACE_FORMAT", "detect_format", "first_of"]

#: Records that are ReasoningTraces already, validated as they are.
TRACE_FORMAT = "trace"

_ANTHROPIC_BLOCKS = frozenset(
    {"tool_use", "tool_result", "thinking", "redacted_thinking", "server_tool_use"}
)


def detect_format(record: Any) -> str | None:
    """The format name (``"trace"`` or a :data:`FORMATS` key) ``record`` looks like, or ``None``."""
    items: list[Any] = list(record) if isinstance(record, (list, tuple)) else [record]
    first = next((i for i in items if isinstance(i, Mapping)), None)
    if first is None:
        return None
    try:
        return _detect_by_fields(first, items) or _detect_chat_format(first, items)
    except (TypeError, ValueError, AttributeError):
        # A field of an unexpected type (a list where a name goes): no format is told by it,
        # and the refusal says so rather than the run stopping.
        return None


def _named(value: Any, names: Collection[str]) -> bool:
    """Whether ``value`` is one of ``names``: a list or an object never is (and is unhashable)."""
    return isinstance(value, str) and value in names


def _detect_by_fields(first: Mapping[str, Any], items: list[Any]) -> str | None:
    """A format told by a field of its own: traces, harness logs, OpenAI Agents, Langfuse,
    OTel, ATIF and LangSmith (looked for before the chat formats, which share fields)."""
    if first.get("@type") == "ReasoningTrace":
        return TRACE_FORMAT
    harness = detect_harness_format(items)
    if harness is not None:
        return harness
    wrapped = first_of(first.get("data"))
    if _named(first.get("object"), _AGENTS_OBJECTS) or _named(
        wrapped.get("object"), _AGENTS_OBJECTS
    ):
        return "openai-agents"
    if isinstance(first.get("observations"), list) or isinstance(wrapped.get("observations"), list):
        return "langfuse"
    if _looks_otel(first):
        return "otel"
    if str(first.get("schema_version", "")).startswith("ATIF") or (
        "session_id" in first and "steps" in first and "agent" in first
    ):
        return "atif"
    if is_langsmith_batch(first):
        return "langsmith-batch"
    if is_who_and_when_record(first):
        return "who-and-when"
    if "run_type" in first or "child_runs" in first or "dotted_order" in first:
        return "langsmith"
    return None


def _detect_chat_format(first: Mapping[str, Any], items: list[Any]) -> str | None:
    """A chat format: Gemini, Bedrock, OpenAI (chat, tau-bench, Responses) or Anthropic."""
    if is_gemini_record(first) or is_gemini_contents(items):
        return "gemini"
    if is_bedrock_record(first) or is_bedrock_messages(items):
        return "bedrock"
    if "traj" in first:
        return "openai"
    if "output" in first and isinstance(first.get("output"), list):
        return "openai-responses"
    if is_responses_items(items):
        return "openai-responses"
    messages: list[Any]
    if "messages" in first:
        messages = [m for r in items if isinstance(r, Mapping) for m in r.get("messages") or []]
        if isinstance(first.get("system"), (str, list)):
            return "anthropic"
    elif "role" in first:
        messages = items
    else:
        return None
    return "anthropic" if _looks_anthropic(messages) else "openai"


_AGENTS_OBJECTS = frozenset({"trace", "trace.span"})


def first_of(value: Any) -> Mapping[str, Any]:
    """The first element of a wrapped list (``{"data": [...]}``), if it is an object."""
    if isinstance(value, list) and value and isinstance(value[0], Mapping):
        return value[0]
    return {}


def _looks_otel(record: Mapping[str, Any]) -> bool:
    """An OTLP export, or a span or log record as the SDK's console exporter prints it."""
    if "resourceSpans" in record or "resourceLogs" in record:
        return True
    context = record.get("context")
    if isinstance(context, Mapping) and "trace_id" in context:
        return True
    if is_js_span(record):
        return True
    return "body" in record and ("severity_number" in record or "severity_text" in record)


def _looks_anthropic(messages: list[Any]) -> bool:
    for message in messages:
        if not isinstance(message, Mapping):
            continue
        if message.get("role") in ("tool", "system", "developer", "function") or message.get(
            "tool_calls"
        ):
            return False
        content = message.get("content")
        if isinstance(content, list) and any(
            isinstance(b, Mapping) and _named(b.get("type"), _ANTHROPIC_BLOCKS) for b in content
        ):
            return True
    return False
