r"""The message parts of the OTel GenAI conventions (``gen_ai.input.messages`` and
``gen_ai.output.messages``), read into :class:`~._messages.Message`\ s.

Parts: ``text`` and ``reasoning`` → text; ``tool_call`` and ``server_tool_call`` (a built-in
tool such as code interpreter or web search) → tool call; ``tool_call_response`` and
``server_tool_call_response`` → tool result; ``blob``, ``uri`` and ``file`` → a placeholder
such as ``[image/png, 24 KB]`` (never the base64 bytes); other parts are left out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ._binary import base64_size, binary_placeholder, data_uri_placeholder, redact_binary
from ._messages import Message, Part
from ._values import ConversionError, at, expect_dict, expect_list, parse_arguments, stringify

__all__ = ["media_placeholder", "semconv_messages"]

_MEDIA_PARTS = frozenset({"blob", "uri", "file"})


def semconv_messages(raw: Any, path: str) -> list[Message]:
    """The messages of a ``gen_ai.*.messages`` value (JSON text or structured).

    Raises :class:`ConversionError` naming ``path`` for text that is not JSON or a message
    or part that is not an object.
    """
    if raw is None:
        return []
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            raise ConversionError(path, "not valid JSON") from None
    messages = []
    for index, item in enumerate(expect_list(raw, path)):
        item = expect_dict(item, at(path, index))
        role = str(item.get("role", "assistant"))
        parts_path = at(at(path, index), "parts")
        parts: list[Part] = []
        for p_index, raw_part in enumerate(expect_list(item.get("parts", []), parts_path)):
            part = _part(expect_dict(raw_part, at(parts_path, p_index)), role)
            if part is not None:
                parts.append(part)
        messages.append(Message(role, parts))
    return messages


def _part(part: Mapping[str, Any], role: str) -> Part | None:
    kind = part.get("type") if isinstance(part.get("type"), str) else None
    call_id = str(part["id"]) if part.get("id") else None
    if kind in ("text", "reasoning"):
        return Part(kind, stringify(part.get("content")))
    if kind == "tool_call":
        return Part(
            "tool_call",
            call_id=call_id,
            name=str(part.get("name") or "tool"),
            arguments=parse_arguments(redact_binary(part.get("arguments")), "", lenient=True),
        )
    if kind == "tool_call_response":
        response = part.get("response", part.get("result"))
        return Part("tool_result", text=stringify(redact_binary(response)), call_id=call_id)
    if kind == "server_tool_call":
        details = _mapping(part.get("server_tool_call"))
        name = part.get("name") or details.get("type") or "server_tool"
        arguments = {k: v for k, v in details.items() if k != "type"}
        return Part(
            "tool_call", call_id=call_id, name=str(name), arguments=redact_binary(arguments)
        )
    if kind == "server_tool_call_response":
        details = _mapping(part.get("server_tool_call_response"))
        return Part("tool_result", text=_server_result_text(details), call_id=call_id)
    # Media in a user message is not a step, and must not stand in for the task's text.
    if kind in _MEDIA_PARTS and role != "user":
        return Part("text", media_placeholder(part))
    return None


def media_placeholder(part: Mapping[str, Any]) -> str:
    """A ``blob``, ``uri`` or ``file`` part as a short placeholder."""
    mime = part.get("mime_type") or part.get("mimeType")
    mime = mime if isinstance(mime, str) and mime else part.get("modality")
    mime = mime if isinstance(mime, str) and mime else None
    kind = part.get("type") if isinstance(part.get("type"), str) else None
    if kind == "blob":
        content = part.get("content")
        size = base64_size(content) if isinstance(content, str) else None
        return binary_placeholder(mime, size)
    reference = part.get("uri") if kind == "uri" else part.get("file_id")
    if isinstance(reference, str) and reference:
        inline = data_uri_placeholder(reference)
        if inline is not None:
            return inline
        return f"{binary_placeholder(mime, None)} {reference}"
    return binary_placeholder(mime, None)


def _server_result_text(details: Mapping[str, Any]) -> str:
    """A built-in tool's result: code interpreter logs as text, anything else as JSON."""
    outputs = details.get("outputs")
    if isinstance(outputs, list):
        logs = [
            o["logs"] for o in outputs if isinstance(o, Mapping) and isinstance(o.get("logs"), str)
        ]
        if logs and len(logs) == len(outputs):
            return "\n".join(logs)
    return stringify(redact_binary({k: v for k, v in details.items() if k != "type"}))


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
