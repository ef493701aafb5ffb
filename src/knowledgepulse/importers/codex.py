"""Codex CLI session rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``) → ReasoningTrace.

Each line is ``{timestamp, type, payload}``; a rollout file is one session: one trace.
Rollouts written before September 2025 open with a bare header ``{id, timestamp,
instructions, git}`` and hold bare Responses items and ``{"record_type": "state"}`` markers
(skipped): they are read the same way.

- ``session_meta``: ``payload.id`` → source id; ``cwd``, ``cli_version``, ``originator``,
  ``model_provider`` → ``kp_import``; ``instructions``/``base_instructions`` are dropped;
- ``turn_context``: the first ``model`` → ``kp_import.model``;
- ``response_item`` (Responses API items): ``reasoning`` summary text → thought (its
  ``encrypted_content`` is dropped); assistant ``message`` → thought; ``function_call`` →
  tool_call (``arguments`` parsed from JSON; ``mcp__<server>__<tool>`` → ``<tool>`` with
  ``tool.mcp_server``), ``custom_tool_call`` → tool_call with
  ``input = {"input": text}``, ``local_shell_call`` → tool_call ``shell``, other ``*_call``
  items → tool_call named after the item type; ``*_call_output`` → observation matched by
  ``call_id``;
- the objective is the first ``event_msg`` ``user_message`` (what the person typed); in older
  rollouts without those, the first user ``message`` item that is not a harness preamble
  (``# AGENTS.md instructions``, ``<environment_context>``, ``<user_instructions>``, ...),
  whose text is kept in ``kp_import.context``. Later user messages → observations marked
  ``"source": "user"``. ``developer`` messages are dropped;
- failure: an output whose ``metadata.exit_code`` (shell tool JSON), ``Process exited with
  code N`` (``exec_command``) or matching ``exec_command_end`` event reports a non-zero exit
  code; an ``event_msg`` ``error`` → ``kp_import.errors``;
- dropped: ``event_msg`` copies of items (``agent_message``, ``agent_reasoning``), token
  counts, ``compacted`` history.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from knowledgepulse._schema import ReasoningTrace

from ._builder import TraceBuilder
from ._entries import Entry, default_objective, entries_of, label_origin
from ._harness_text import exit_code_of, mapping, mcp_tool, starts_with_any
from ._objective import FROM_SOURCE_ID
from ._options import ImportOptions, resolve_options
from ._values import (
    ConversionError,
    at,
    content_text,
    expect_dict,
    expect_str,
    parse_arguments,
    parse_timestamp,
    stringify,
)

__all__ = ["codex_traces", "from_codex", "is_codex_line"]

FORMAT = "codex"
_LINE_TYPES = frozenset(
    {"session_meta", "response_item", "event_msg", "turn_context", "compacted", "message"}
)
# User message items the CLI writes itself, ahead of (or around) what the person typed.
_PREAMBLES = (
    "# AGENTS.md instructions",
    "<environment_context>",
    "<user_instructions>",
    "<permissions instructions>",
    "<user_shell_command>",
    "<turn_aborted>",
    "<recommended_plugins>",
    "<INSTRUCTIONS>",
)


def is_codex_line(record: Any) -> bool:
    """Whether a record is a line of a Codex CLI rollout file: an envelope
    ``{timestamp, type, payload}``, or (rollouts before September 2025) the header
    ``{id, timestamp, instructions}`` or a ``{"record_type": "state"}`` marker."""
    if not isinstance(record, Mapping):
        return False
    if "type" not in record and "role" not in record:
        if record.get("record_type") == "state":
            return True
        return "instructions" in record and "id" in record and "timestamp" in record
    return (
        isinstance(record.get("type"), str)
        and record["type"] in _LINE_TYPES
        and isinstance(record.get("payload"), Mapping)
        and "role" not in record
    )


def from_codex(
    record: Any, options: ImportOptions | None = None, **overrides: Any
) -> list[ReasoningTrace]:
    """The trace of a Codex rollout: a list of its lines' objects (or one line)."""
    return codex_traces(entries_of(record), resolve_options(options, overrides))


def codex_traces(entries: list[Entry], options: ImportOptions) -> list[ReasoningTrace]:
    """The trace of a rollout's lines (each with its label); a ConversionError names the line."""
    if not any(is_codex_line(data) for data, _ in entries):
        raise ConversionError(
            "", "not a Codex rollout: no line is a {timestamp, type, payload} rollout line"
        )
    builder = TraceBuilder(FORMAT)
    lines = _rollout_lines(entries)
    typed = [
        payload
        for line, _, payload in lines
        if line.get("type") == "event_msg" and payload.get("type") == "user_message"
    ]
    exit_codes = {
        payload["call_id"]: payload.get("exit_code")
        for line, _, payload in lines
        if line.get("type") == "event_msg"
        and payload.get("type") == "exec_command_end"
        and isinstance(payload.get("call_id"), str)
    }
    context: list[str] = []
    errors: list[str] = []
    for line, label, payload in lines:
        builder.at_origin(**label_origin(label))
        builder.note_time(parse_timestamp(line.get("timestamp")))
        kind = line.get("type")
        where = at(label, "payload")
        if kind == "session_meta":
            _read_meta(builder, payload)
        elif kind == "turn_context":
            if isinstance(payload.get("model"), str):
                builder.info.setdefault("model", payload["model"])
        elif kind == "event_msg":
            event = payload.get("type")
            if event == "user_message" and isinstance(payload.get("message"), str):
                builder.user_message(payload["message"])
            elif event == "error" and isinstance(payload.get("message"), str):
                errors.append(payload["message"])
        elif kind == "response_item":
            _read_item(builder, payload, where, exit_codes, use_items=not typed, context=context)
    if context:
        builder.info["context"] = context
    if errors:
        builder.info["errors"] = errors
    builder.no_steps_reason = _no_agent_turn(builder, lines, typed)
    default_objective(builder, f"Codex session {builder.source_id}", FROM_SOURCE_ID)
    return [builder.build([data for data, _ in entries], options)]


def _no_agent_turn(
    builder: TraceBuilder,
    lines: list[tuple[dict[str, Any], str, Mapping[str, Any]]],
    typed: list[Mapping[str, Any]],
) -> str:
    """Why a rollout has no step: what it does hold (a rollout cut after the user's message,
    or a session closed before the model answered)."""
    users = len(typed) or sum(
        1
        for line, _, payload in lines
        if line.get("type") == "response_item" and payload.get("role") == "user"
    )
    contexts = sum(1 for line, _, _ in lines if line.get("type") == "turn_context")
    session = f" (session {builder.source_id})" if builder.source_id else ""
    held = [f"{users} user message" + ("" if users == 1 else "s")]
    if contexts:
        held.append(f"{contexts} turn context" + ("" if contexts == 1 else "s"))
    return (
        f"a Codex rollout{session} with no agent turn: its session header, "
        f"{' and '.join(held)} only (the session ended, or the file was cut, before the "
        "model answered)"
    )


def _rollout_lines(entries: list[Entry]) -> list[tuple[dict[str, Any], str, Mapping[str, Any]]]:
    """Each line in its envelope (``{"type", "payload"}``), its label and its payload; the
    lines of rollouts written before September 2025 are put in the envelope they lacked."""
    lines = []
    for data, label in entries:
        line = expect_dict(data, label)
        if "payload" not in line and "type" not in line and "instructions" in line:
            line = {"type": "session_meta", "payload": line}  # the pre-2025-09 header
        elif "payload" not in line and isinstance(line.get("type"), str):
            # Before September 2025, items were written bare, without the envelope.
            line = {"type": "response_item", "payload": line}
        lines.append((line, label, mapping(line.get("payload"))))
    return lines


def _read_meta(builder: TraceBuilder, payload: Mapping[str, Any]) -> None:
    if isinstance(payload.get("id"), str) and payload["id"]:
        builder.source_id = payload["id"]
    builder.note_time(parse_timestamp(payload.get("timestamp")))
    for key in ("cwd", "cli_version", "originator", "model_provider"):
        if isinstance(payload.get(key), str) and payload[key]:
            builder.info[key] = payload[key]


def _read_item(
    builder: TraceBuilder,
    item: Mapping[str, Any],
    where: str,
    exit_codes: Mapping[str, Any],
    *,
    use_items: bool,
    context: list[str],
) -> None:
    kind = item.get("type")
    call_id = item.get("call_id") if isinstance(item.get("call_id"), str) else None
    if kind == "message":
        role = item.get("role")
        text = content_text(item.get("content"))
        if role == "assistant":
            builder.thought(text)
        elif role == "user" and use_items:
            if starts_with_any(text, _PREAMBLES):
                if builder.objective is None:
                    context.append(text)
            else:
                builder.user_message(text)
    elif kind == "reasoning":
        summary = item.get("summary")
        if isinstance(summary, list):
            builder.thought(content_text(summary))
        if isinstance(item.get("content"), list):
            builder.thought(content_text(item["content"]))
    elif kind == "function_call":
        name, server = mcp_tool(expect_str(item.get("name"), at(where, "name")))
        builder.tool_call(
            name,
            parse_arguments(item.get("arguments"), at(where, "arguments"), lenient=True),
            call_id=call_id,
            mcp_server=server,
        )
    elif kind == "custom_tool_call":
        raw = item.get("input")
        builder.tool_call(
            expect_str(item.get("name"), at(where, "name")),
            {"input": raw} if isinstance(raw, str) else parse_arguments(raw, "", lenient=True),
            call_id=call_id,
        )
    elif kind == "local_shell_call":
        builder.tool_call("shell", dict(mapping(item.get("action"))), call_id=call_id)
    elif isinstance(kind, str) and kind.endswith("_call_output"):
        _read_output(builder, item, call_id, exit_codes)
    elif isinstance(kind, str) and kind.endswith("_call"):
        arguments = {k: v for k, v in item.items() if k not in ("type", "id", "call_id", "status")}
        builder.tool_call(kind, arguments, call_id=call_id or _str(item.get("id")))


def _read_output(
    builder: TraceBuilder, item: Mapping[str, Any], call_id: str | None, exit_codes: Any
) -> None:
    output = item.get("output")
    failed = False
    latency: float | None = None
    if isinstance(output, str) and output.lstrip().startswith("{"):
        # The shell tool's result: {"output": ..., "metadata": {"exit_code", "duration_seconds"}}
        try:
            parsed = json.loads(output)
        except json.JSONDecodeError:
            parsed = None
        if isinstance(parsed, Mapping) and "output" in parsed:
            metadata = mapping(parsed.get("metadata"))
            code = metadata.get("exit_code")
            failed = isinstance(code, int) and code != 0
            seconds = metadata.get("duration_seconds")
            if isinstance(seconds, (int, float)) and not isinstance(seconds, bool):
                latency = float(seconds) * 1000
            output = parsed.get("output")
    text = content_text(output, result=True) if isinstance(output, list) else stringify(output)
    if isinstance(output, Mapping) and output.get("success") is False:
        failed = True
    if not failed:
        code = exit_codes.get(call_id) if call_id else None
        if not isinstance(code, int):
            code = exit_code_of(text)
        failed = isinstance(code, int) and code != 0
    builder.observation(text, call_id=call_id, failed=failed, latency_ms=latency)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
