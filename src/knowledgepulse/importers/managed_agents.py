"""Anthropic Managed Agents session events → ReasoningTrace (one trace per session).

A session's events, as ``GET /v1/sessions/{id}/events`` lists them (the page
``{"data": [...]}``, or its events as a JSON list or one per line) and as
``client.beta.sessions.events.stream`` yields them. Each event is ``{id, type,
processed_at, ...}``, its ``type`` ``{domain}.{action}``:

- ``user.message`` → the objective (the first), later ones user turns; ``user.interrupt`` → a
  user turn ``[the user interrupted the agent]``;
- ``agent.message`` and ``agent.thinking`` → thoughts (their text blocks);
- ``agent.tool_use``, ``agent.mcp_tool_use`` (its ``mcp_server_name`` as the tool's MCP
  server) and ``agent.custom_tool_use`` → tool calls, the event id as the call id;
- ``agent.tool_result`` (``tool_use_id``), ``agent.mcp_tool_result`` (``mcp_tool_use_id``) and
  ``user.custom_tool_result`` (``custom_tool_use_id``, the caller's answer to a custom tool) →
  observations of that call, failed when ``is_error``; a ``user.tool_confirmation`` whose
  ``result`` is ``deny`` → a failed observation of the call it denied;
- ``session.error`` → a failed observation (``"source": "harness"``) with its message;
- the last ``session.status_idle``'s ``stop_reason.type`` (``end_turn``, ``requires_action``,
  ``retries_exhausted``) → ``kp_import.stop_reason``; ``session.status_terminated`` →
  ``terminated`` and success false; the ``agent_name`` of a thread event →
  ``metadata.agent_id``; the ``span.model_request_end`` events' ``model_usage`` summed →
  ``kp_import.usage``;
- every step's ``origin`` is its event's ``id`` with its line (or place in the list).

Left out: ``session.status_running`` and ``rescheduled``, thread status and
``agent.thread_*`` events (a multi-agent session's threads), ``span.model_request_start``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from knowledgepulse._schema import ReasoningTrace

from ._builder import TraceBuilder
from ._entries import Entry, default_objective, label_origin
from ._objective import FROM_FORMAT
from ._options import ImportOptions, resolve_options
from ._values import ConversionError, at, content_text, parse_arguments, parse_timestamp

__all__ = [
    "from_managed_agents",
    "is_managed_agents_event",
    "is_managed_agents_page",
    "managed_agents_traces",
]

FORMAT = "anthropic-managed-agents"
_EVENT_TYPE = re.compile(r"(user|agent|session|span)\.[a-z_]+")
_CALLS = frozenset({"agent.tool_use", "agent.mcp_tool_use", "agent.custom_tool_use"})
# Each result event and the field naming the call it answers.
_RESULTS = {
    "agent.tool_result": "tool_use_id",
    "agent.mcp_tool_result": "mcp_tool_use_id",
    "user.custom_tool_result": "custom_tool_use_id",
}
_USAGE_KEYS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)


def is_managed_agents_event(record: Any) -> bool:
    """Whether a record is one Managed Agents session event: ``{id, type, ...}`` with a
    ``type`` such as ``agent.tool_use`` or ``session.status_idle``."""
    return (
        isinstance(record, Mapping)
        and isinstance(record.get("type"), str)
        and _EVENT_TYPE.fullmatch(record["type"]) is not None
        and ("id" in record or "processed_at" in record)
    )


def is_managed_agents_page(record: Any) -> bool:
    """Whether a record is a page of a session's events, ``{"data": [event, ...]}``."""
    if not isinstance(record, Mapping):
        return False
    data = record.get("data")
    return (
        isinstance(data, list)
        and bool(data)
        and all(is_managed_agents_event(event) for event in data)
    )


def from_managed_agents(
    record: Any, options: ImportOptions | None = None, **overrides: Any
) -> list[ReasoningTrace]:
    """The trace of one session's events: a page ``{"data": [...]}``, a list of events, or
    one event."""
    if isinstance(record, (list, tuple)):
        entries = [(item, at("", index)) for index, item in enumerate(record)]
    else:
        entries = [(record, "")]
    return managed_agents_traces(entries, resolve_options(options, overrides))


def managed_agents_traces(entries: list[Entry], options: ImportOptions) -> list[ReasoningTrace]:
    """The trace of a session's events (each with its label); a ConversionError names the
    event."""
    events = _events(entries)
    if not events:
        raise ConversionError(
            "", "not Managed Agents session events: no {id, type: 'agent.…'} event"
        )
    builder = TraceBuilder(FORMAT)
    usage: dict[str, int] = {}
    stop: str | None = None
    for event, label in events:
        ident = event.get("id")
        builder.at_origin(**label_origin(label), event_id=ident if isinstance(ident, str) else None)
        builder.note_time(parse_timestamp(event.get("processed_at")))
        kind = event["type"]
        if kind == "session.status_idle":
            reason = event.get("stop_reason")
            if isinstance(reason, Mapping) and isinstance(reason.get("type"), str):
                stop = reason["type"]
        elif kind == "session.status_terminated":
            stop = "terminated"
            builder.success = False
        elif kind == "span.model_request_end":
            _add_usage(usage, event.get("model_usage"))
        else:
            _read_event(builder, event, kind, label)
        name = event.get("agent_name")
        if builder.agent_id is None and isinstance(name, str) and name:
            builder.agent_id = name
    if stop is not None:
        builder.info["stop_reason"] = stop
    if usage:
        builder.info["usage"] = usage
    default_objective(builder, "Managed Agents session", FROM_FORMAT)
    return [builder.build([event for event, _ in events], options)]


def _events(entries: list[Entry]) -> list[tuple[Mapping[str, Any], str]]:
    """The events of the entries, a page's ``data`` read as its events."""
    events: list[tuple[Mapping[str, Any], str]] = []
    for data, label in entries:
        if is_managed_agents_page(data):
            where = at(label, "data")
            events.extend((event, at(where, index)) for index, event in enumerate(data["data"]))
        elif is_managed_agents_event(data):
            events.append((data, label))
    return events


def _read_event(builder: TraceBuilder, event: Mapping[str, Any], kind: str, label: str) -> None:
    if kind == "user.message":
        builder.user_message(content_text(event.get("content"), at(label, "content")))
    elif kind == "user.interrupt":
        builder.user_message("[the user interrupted the agent]")
    elif kind in ("agent.message", "agent.thinking"):
        thinking = event.get("thinking")
        text = thinking if isinstance(thinking, str) else None
        builder.thought(text or content_text(event.get("content"), at(label, "content")))
    elif kind in _CALLS:
        name = event.get("name")
        if not isinstance(name, str) or not name:
            raise ConversionError(at(label, "name"), "expected the tool's name as text")
        server = event.get("mcp_server_name") if kind == "agent.mcp_tool_use" else None
        call_id = event.get("id")
        builder.tool_call(
            name,
            parse_arguments(event.get("input"), at(label, "input"), lenient=True),
            call_id=call_id if isinstance(call_id, str) else None,
            mcp_server=server if isinstance(server, str) else None,
        )
    elif kind in _RESULTS:
        call_id = event.get(_RESULTS[kind])
        builder.observation(
            content_text(event.get("content"), None, result=True),
            call_id=call_id if isinstance(call_id, str) else None,
            failed=event.get("is_error") is True,
        )
    elif kind == "user.tool_confirmation" and event.get("result") == "deny":
        call_id = event.get("tool_use_id")
        why = event.get("deny_message")
        builder.observation(
            "denied by the user" + (f": {why}" if isinstance(why, str) and why else ""),
            call_id=call_id if isinstance(call_id, str) else None,
            failed=True,
        )
    elif kind == "session.error":
        error = event.get("error")
        message = error.get("message") if isinstance(error, Mapping) else None
        text = message if isinstance(message, str) and message else content_text(error, None)
        builder.observation(text or "session error", failed=True, source="harness")


def _add_usage(total: dict[str, int], usage: Any) -> None:
    if not isinstance(usage, Mapping):
        return
    for key in _USAGE_KEYS:
        value = usage.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            total[key] = total.get(key, 0) + value
