"""Anthropic Messages conversations → ReasoningTrace.

- assistant ``text`` and ``thinking`` blocks → thought (blank text skipped; ``redacted_thinking``
  has no readable text and is skipped); a plain-string assistant ``content`` → thought;
- assistant ``tool_use{id, name, input}`` and ``server_tool_use`` → tool_call; ``mcp_tool_use``
  → tool_call with ``tool.mcp_server = server_name``;
- ``tool_result{tool_use_id, content, is_error}`` (in user messages), ``mcp_tool_result`` and the
  server tools' ``*_tool_result`` blocks → observation, matched to the call by id; ``is_error``
  or a ``*_error`` result content marks it failed;
- the first user text → ``task.objective``; the text of each later user message → an
  observation step marked ``"source": "user"``; the top-level ``system`` prompt is not a step;
  images and documents are left out of messages, and read as placeholders in tool results
  (``[image/png, 24 KB]``); opaque ``encrypted_content`` becomes ``[encrypted content, N KB]``.

Records: a list of messages, or ``{"messages": [...]}`` with optional ``id``, ``model`` and a
``response`` (a Messages API reply whose ``content`` is appended as the last assistant turn).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from knowledgepulse._schema import ReasoningTrace

from ._builder import TraceBuilder
from ._options import ImportOptions, resolve_options
from ._tool_definitions import declared_tools
from ._values import (
    ConversionError,
    at,
    content_text,
    expect_dict,
    expect_list,
    expect_str,
    parse_arguments,
)

__all__ = ["from_anthropic", "is_record_list"]


def from_anthropic(
    record: Any, options: ImportOptions | None = None, **overrides: Any
) -> list[ReasoningTrace]:
    """The traces of an Anthropic record: one per conversation.

    ``record`` is a conversation (a list of messages, or ``{"messages": [...]}``) or a list of
    such objects. ``options`` (and keyword ``overrides`` of its fields) replace source values
    in every trace. Raises :class:`ConversionError` naming the offending field's path.
    """
    options = resolve_options(options, overrides)
    if is_record_list(record):
        return [_conversation(item, at("", index), options) for index, item in enumerate(record)]
    return [_conversation(record, "", options)]


def is_record_list(value: Any) -> bool:
    """Whether a list holds whole ``{"messages": [...]}`` records rather than messages."""
    return (
        isinstance(value, (list, tuple))
        and bool(value)
        and all(isinstance(item, Mapping) and "messages" in item for item in value)
    )


def _conversation(record: Any, path: str, options: ImportOptions) -> ReasoningTrace:
    builder = TraceBuilder("anthropic")
    if isinstance(record, (list, tuple)):
        _read_messages(builder, list(record), path)
    elif isinstance(record, Mapping) and "messages" in record:
        messages = expect_list(record["messages"], at(path, "messages"))
        builder.keep_tools(declared_tools(record.get("tools")))
        _read_messages(builder, messages, at(path, "messages"))
        if record.get("response") is not None:
            where = at(path, "response")
            response = expect_dict(record["response"], where)
            builder.at_origin(response="content")
            _read_assistant(builder, response.get("content"), at(where, "content"))
            if isinstance(response.get("id"), str):
                builder.source_id = response["id"]
            if isinstance(response.get("model"), str):
                builder.info["model"] = response["model"]
        if isinstance(record.get("id"), str) and record["id"]:
            builder.source_id = record["id"]
        if isinstance(record.get("model"), str):
            builder.info.setdefault("model", record["model"])
    else:
        raise ConversionError(path, "expected a list of messages or an object with 'messages'")
    try:
        return builder.build(record, options)
    except ConversionError as exc:
        raise exc.under(path) from None


def _read_messages(builder: TraceBuilder, messages: list[Any], path: str) -> None:
    for index, raw in enumerate(messages):
        builder.at_origin(message=index)
        where = at(path, index)
        message = expect_dict(raw, where)
        role = expect_str(message.get("role"), at(where, "role"))
        if role == "user":
            _read_user(builder, message.get("content"), at(where, "content"))
        elif role == "assistant":
            _read_assistant(builder, message.get("content"), at(where, "content"))
        elif role != "system":
            raise ConversionError(
                at(where, "role"), f"expected one of 'user', 'assistant' (got {role!r})"
            )


def _blocks(content: Any, path: str) -> list[tuple[str, dict[str, Any]]]:
    if isinstance(content, str):
        return [(path, {"type": "text", "text": content})]
    blocks = []
    for index, raw in enumerate(expect_list(content, path)):
        where = at(path, index)
        block = expect_dict(raw, where)
        expect_str(block.get("type"), at(where, "type"))
        blocks.append((where, block))
    return blocks


def _read_user(builder: TraceBuilder, content: Any, path: str) -> None:
    # The text blocks of one message are one user turn (after its tool results, which the API
    # requires to come first).
    texts: list[str] = []
    for where, block in _blocks(content, path):
        kind = block["type"]
        if kind == "text":
            texts.append(expect_str(block.get("text"), at(where, "text"), allow_empty=True))
        elif kind.endswith("tool_result"):
            _read_result(builder, block, where)
    builder.user_message("\n".join(t for t in texts if t.strip()))


def _read_assistant(builder: TraceBuilder, content: Any, path: str) -> None:
    for where, block in _blocks(content, path):
        kind = block["type"]
        if kind == "text":
            builder.thought(expect_str(block.get("text"), at(where, "text"), allow_empty=True))
        elif kind == "thinking":
            builder.thought(
                expect_str(block.get("thinking"), at(where, "thinking"), allow_empty=True)
            )
        elif kind in ("tool_use", "server_tool_use", "mcp_tool_use"):
            call_id = block.get("id")
            server = block.get("server_name") if kind == "mcp_tool_use" else None
            builder.tool_call(
                expect_str(block.get("name"), at(where, "name")),
                parse_arguments(block.get("input"), at(where, "input")),
                call_id=call_id if isinstance(call_id, str) else None,
                mcp_server=server if isinstance(server, str) else None,
            )
        elif kind.endswith("tool_result"):
            _read_result(builder, block, where)


def _read_result(builder: TraceBuilder, block: Mapping[str, Any], where: str) -> None:
    call_id = block.get("tool_use_id")
    content = block.get("content")
    failed = block.get("is_error") is True
    if isinstance(content, Mapping) and str(content.get("type", "")).endswith("_error"):
        failed = True
    builder.observation(
        content_text(content, at(where, "content"), result=True),
        call_id=call_id if isinstance(call_id, str) else None,
        failed=failed,
    )
