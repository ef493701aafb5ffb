"""Lenient message reading for the span and run formats (OTel attributes, LangSmith inputs).

Those formats log messages in whichever shape the instrumented library used (OpenAI, Anthropic,
LangChain, plain text), so they are read leniently into one normal form, :class:`Message`:
odd fields are skipped rather than refused.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ._objective import preamble_kind
from ._python_repr import is_message_repr, python_literal, repr_fields
from ._values import content_text, parse_arguments, stringify

__all__ = [
    "Message",
    "Part",
    "content_parts",
    "is_chat_message",
    "is_response_object",
    "is_role_pair",
    "is_tool_definition",
    "message_from_chat",
    "message_list",
    "responses_messages",
    "text_from_value",
]

PartKind = Literal["text", "reasoning", "tool_call", "tool_result"]


@dataclass
class Part:
    """One piece of a normalised message."""

    kind: PartKind
    text: str = ""
    call_id: str | None = None
    name: str | None = None
    arguments: dict[str, Any] | None = None
    failed: bool = False


@dataclass
class Message:
    """A normalised chat message: ``role`` is user, assistant, system or tool."""

    role: str
    parts: list[Part] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "\n".join(p.text for p in self.parts if p.kind == "text" and p.text)


_ROLE_ALIASES = {
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "model": "assistant",
    "system": "system",
    "developer": "system",
    "tool": "tool",
    "function": "tool",
}
_LANGCHAIN_CLASSES = {
    "HumanMessage": "user",
    "HumanMessageChunk": "user",
    "AIMessage": "assistant",
    "AIMessageChunk": "assistant",
    "SystemMessage": "system",
    "ToolMessage": "tool",
    "ToolMessageChunk": "tool",
    "FunctionMessage": "tool",
}


def content_parts(content: Any) -> list[Part]:
    """Parts of a message ``content``: text, or a list of OpenAI/Anthropic/LangChain blocks.

    Blocks that carry no text or action (images, files) are left out.
    """
    if content is None:
        return []
    if isinstance(content, str):
        return [Part("text", content)]
    if isinstance(content, Mapping):
        content = [content]
    if not isinstance(content, (list, tuple)):
        return [Part("text", stringify(content))]
    parts: list[Part] = []
    for block in content:
        if isinstance(block, str):
            parts.append(Part("text", block))
            continue
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind in ("text", "input_text", "output_text"):
            text = block.get("text", block.get("content"))
            if isinstance(text, str):
                parts.append(Part("text", text))
        elif kind in ("thinking", "reasoning"):
            text = block.get("thinking", block.get("reasoning", block.get("content")))
            if text is None:
                text = block.get("text")
            if isinstance(text, str):
                parts.append(Part("reasoning", text))
        elif (isinstance(kind, str) and kind in _CALL_BLOCKS) or (
            kind == "function" and "function" in block
        ):
            parts.append(_call_part(block))
        elif kind in ("tool_result", "tool_call_response", "function_call_output"):
            result = block.get("content", block.get("response", block.get("output")))
            parts.append(
                Part(
                    "tool_result",
                    text=content_text(result, result=True),
                    call_id=_opt_str(
                        block.get("tool_use_id", block.get("id", block.get("call_id")))
                    ),
                    failed=block.get("is_error") is True,
                )
            )
    return parts


# Content blocks that are a tool call (Anthropic, LangChain, OTel GenAI, Responses).
_CALL_BLOCKS = frozenset({"tool_use", "tool_call", "server_tool_use", "function_call"})


def _call_part(block: Mapping[str, Any]) -> Part:
    """A call block as a part; a chat ``tool_calls`` entry written into ``content``
    (``{"function": {name, arguments}, "id", "type": "function"}``, JetBrains Koog's exports)
    included."""
    spec = block.get("function") if block.get("type") == "function" else block
    spec = spec if isinstance(spec, Mapping) else {}
    raw = spec.get("input", spec.get("args", spec.get("arguments")))
    return Part(
        "tool_call",
        call_id=_opt_str(block.get("id", block.get("call_id"))),
        name=_opt_str(spec.get("name")),
        arguments=parse_arguments(raw, "", lenient=True),
    )


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def is_role_pair(obj: Any) -> bool:
    """Whether ``obj`` is a LangChain message tuple, ``["user", "text"]`` (a role and content)."""
    return (
        isinstance(obj, (list, tuple))
        and len(obj) == 2
        and isinstance(obj[0], str)
        and obj[0].lower() in _ROLE_ALIASES
        and isinstance(obj[1], (str, list))
    )


# The fields of a message's pydantic repr that are its chat message.
_REPR_KEYS = frozenset({"role", "content", "name", "tool_call_id", "tool_calls"})


def is_chat_message(obj: Any) -> bool:
    """Whether ``obj`` is a chat message object: a ``role``, a LangChain message ``type``
    (``ai``, ``AIMessageChunk``, ...) or a serialised LangChain message."""
    return isinstance(obj, Mapping) and _chat_role(obj)[0] is not None


def message_list(value: Any) -> list[Any]:
    """The messages of a ``messages`` value: a list, or the first of a LangChain batch
    (``[[message, ...]]``); a list of role tuples (``[["user", "hi"]]``) is not a batch."""
    if not isinstance(value, (list, tuple)):
        return []
    if value and isinstance(value[0], (list, tuple)) and not is_role_pair(value[0]):
        return list(value[0])
    return list(value)


def message_from_chat(obj: Any) -> Message | None:
    """A :class:`Message` from an OpenAI chat message, a LangChain message (plain, serialised
    or a ``(role, content)`` tuple); ``None`` when ``obj`` is not a message. Lenient: odd
    fields are skipped."""
    if isinstance(obj, str):
        if is_message_repr(obj):
            # Agno logs its messages as their pydantic repr: read back as the message.
            fields = repr_fields(obj)
            return message_from_chat({k: v for k, v in fields.items() if k in _REPR_KEYS})
        return Message("user", [Part("text", obj)])
    if is_role_pair(obj):
        return Message(_ROLE_ALIASES[obj[0].lower()], content_parts(obj[1]))
    if not isinstance(obj, Mapping):
        return None
    role, data = _chat_role(obj)
    if role is None:
        return None
    parts: list[Part] = []
    for key in ("reasoning_content", "reasoning"):
        if isinstance(data.get(key), str):
            parts.append(Part("reasoning", data[key]))
    parts.extend(content_parts(data.get("content")))
    if data.get("content") is None and isinstance(data.get("parts"), list):
        # OTel GenAI messages ({"role", "parts": [{"type": "text", "content": ...}]}).
        parts.extend(_genai_text_parts(data["parts"]))
    # An AIMessage may hold a call twice: as a ``tool_use`` content block and in ``tool_calls``.
    seen_ids = {p.call_id for p in parts if p.kind == "tool_call" and p.call_id}
    parts.extend(_listed_tool_calls(data, seen_ids))
    if role == "tool" and parts and all(p.kind == "tool_call" for p in parts):
        # The assistant's calls sent back under ``role: "tool"`` (Koog): calls, not results.
        return Message("assistant", parts)
    if role == "tool":
        parts = _tool_results(data, parts)
    return Message(role, parts)


def _chat_role(obj: Mapping[str, Any]) -> tuple[str | None, Mapping[str, Any]]:
    """The role of a chat message (None: not a message) and its fields: a serialised
    LangChain message (``{"lc": 1, "id": [..., "AIMessage"], "kwargs": {...}}``) is unwrapped."""
    data = obj
    role: str | None = None
    if data.get("lc") and isinstance(data.get("kwargs"), Mapping):
        ident = data.get("id")
        if isinstance(ident, list) and ident:
            role = _LANGCHAIN_CLASSES.get(str(ident[-1]))
        data = data["kwargs"]
    raw_role = data.get("role") or data.get("type")
    if role is None and isinstance(raw_role, str):
        role = _ROLE_ALIASES.get(raw_role.lower()) or _LANGCHAIN_CLASSES.get(raw_role)
    return role, data


def _listed_tool_calls(data: Mapping[str, Any], seen_ids: set[str]) -> list[Part]:
    """The calls in ``tool_calls`` / ``function_call`` (also under LangChain's
    ``additional_kwargs``), less those whose id is in ``seen_ids``."""
    extra = data.get("additional_kwargs")
    extra = extra if isinstance(extra, Mapping) else {}
    calls = data.get("tool_calls") or extra.get("tool_calls") or []
    function_call = data.get("function_call") or extra.get("function_call")
    if isinstance(function_call, Mapping):
        calls = [*calls, {"function": function_call}]
    parts: list[Part] = []
    for call in calls if isinstance(calls, (list, tuple)) else []:
        if not isinstance(call, Mapping) or _opt_str(call.get("id")) in seen_ids:
            continue
        function = call.get("function")
        spec: Mapping[str, Any] = function if isinstance(function, Mapping) else call
        raw = spec.get("arguments", spec.get("args", spec.get("input")))
        parts.append(
            Part(
                "tool_call",
                call_id=_opt_str(call.get("id")),
                name=_opt_str(spec.get("name")),
                arguments=parse_arguments(raw, "", lenient=True),
            )
        )
    return parts


def _tool_results(data: Mapping[str, Any], parts: list[Part]) -> list[Part]:
    """A tool message's parts as results: its result parts, else one result of its text (or
    of its content as JSON), with the message's call id, tool name and error flag."""
    results = [p for p in parts if p.kind == "tool_result"]
    if not results:
        text = "\n".join(p.text for p in parts if p.kind == "text")
        if not text and data.get("content") not in (None, "", []):
            # A list of documents or records (a retriever's): kept as JSON, not lost.
            text = content_text(data.get("content"), result=True)
        results = [Part("tool_result", text=text)]
    for part in results:
        part.call_id = part.call_id or _opt_str(data.get("tool_call_id"))
        part.name = part.name or _opt_str(data.get("name"))
        part.failed = part.failed or data.get("status") == "error" or data.get("error") is True
    return results


def _genai_text_parts(parts: list[Any]) -> list[Part]:
    """The text of OTel GenAI message parts (tool calls and results are read by
    :mod:`._genai_parts` where a format logs them)."""
    out = []
    for part in parts:
        if isinstance(part, Mapping) and part.get("type") in ("text", "reasoning"):
            text = part.get("content", part.get("text"))
            if isinstance(text, str):
                out.append(Part("text" if part["type"] == "text" else "reasoning", text))
    return out


def is_tool_definition(obj: Any) -> bool:
    """Whether a ``role: "tool"`` message is a tool's definition, not its result: Langfuse's
    LangChain callback logs the tools offered to the model that way
    (``{"role": "tool", "content": {"type": "function", "function": {...}}}``)."""
    if not isinstance(obj, Mapping) or obj.get("role") != "tool" or obj.get("tool_call_id"):
        return False
    content = obj.get("content")
    if not isinstance(content, Mapping):
        return False
    if content.get("type") == "function" and isinstance(content.get("function"), Mapping):
        return True
    return isinstance(content.get("name"), str) and (
        "parameters" in content or "input_schema" in content
    )


def responses_messages(items: Any) -> list[Message]:
    """Messages from OpenAI Responses API items (a response's ``output``, or its ``input``).

    ``message`` → its role's text; ``reasoning`` → reasoning; ``function_call`` and
    ``custom_tool_call`` → a tool call (matched to its output by ``call_id``);
    ``*_call_output`` → a tool result. Other items are left out.
    """
    messages: list[Message] = []
    for item in items if isinstance(items, (list, tuple)) else []:
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type") or ("message" if "role" in item else None)
        call_id = _opt_str(item.get("call_id")) or _opt_str(item.get("id"))
        if kind == "message":
            role = _ROLE_ALIASES.get(str(item.get("role", "assistant")).lower(), "assistant")
            messages.append(Message(role, content_parts(item.get("content"))))
        elif kind == "reasoning":
            texts = [content_text(item.get(key)) for key in ("summary", "content") if item.get(key)]
            text = "\n".join(t for t in texts if t)
            if text:
                messages.append(Message("assistant", [Part("reasoning", text)]))
        elif kind in ("function_call", "custom_tool_call"):
            raw = item.get("arguments", item.get("input"))
            arguments = parse_arguments(raw, "", lenient=True)
            part = Part("tool_call", call_id=call_id, name=_opt_str(item.get("name")))
            part.arguments = arguments
            messages.append(Message("assistant", [part]))
        elif isinstance(kind, str) and kind.endswith("_call_output"):
            text = content_text(item.get("output"), result=True)
            messages.append(
                Message(
                    "tool", [Part("tool_result", text=text, call_id=_opt_str(item.get("call_id")))]
                )
            )
    return messages


def is_response_object(value: Any) -> bool:
    """Whether ``value`` is a Responses API response (``{"object": "response", "output": [...]}``)."""
    return (
        isinstance(value, Mapping)
        and isinstance(value.get("output"), list)
        and (value.get("object") == "response" or str(value.get("id", "")).startswith("resp_"))
    )


_INPUT_KEYS = ("input", "question", "query", "task", "objective", "prompt", "message", "text")
_OUTPUT_KEYS = ("output", "answer", "result", "response", "final_output", "content", "text")


def text_from_value(value: Any, *, output: bool = False) -> str | None:
    """The human-readable text in a run or span input/output value.

    Text is itself (JSON text is read first); in an object, a ``messages`` list gives its first
    user message (inputs) or its last assistant message (outputs), else the first text under a
    usual key (``input``, ``question``, ``query``, ... or ``output``, ``answer``, ``result``, ...).
    ``None`` when nothing reads as text.
    """
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in ("{", "[") and stripped[-1:] in ("}", "]"):
            try:
                parsed = json.loads(stripped)
            except json.JSONDecodeError:
                # A dict's Python repr (BeeAI's output): read as the dict it prints.
                parsed = python_literal(stripped)
                if parsed is None:
                    return value or None
            return text_from_value(parsed, output=output) or value
        return value or None
    if isinstance(value, (list, tuple)):
        messages = [m for m in map(message_from_chat, message_list(value)) if m is not None]
        role = "assistant" if output else "user"
        texts = [m.text for m in messages if m.role == role and m.text]
        if not output:
            # A harness preamble ahead of the task ("Be helpful!") is not the task.
            texts = [t for t in texts if preamble_kind(t) is None] or texts
        if texts:
            return texts[-1] if output else texts[0]
        return None
    if isinstance(value, Mapping):
        if "messages" in value:
            found = text_from_value(value["messages"], output=output)
            if found:
                return found
        for key in _OUTPUT_KEYS if output else _INPUT_KEYS:
            if key in value:
                found = text_from_value(value[key], output=output)
                if found:
                    return found
        if len(value) == 1:
            return text_from_value(next(iter(value.values())), output=output)
    return None
