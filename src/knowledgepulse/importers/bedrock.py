"""Amazon Bedrock Converse logs → ReasoningTrace.

A request's ``messages`` (each ``{role, content}``, ``role`` ``user`` or ``assistant``, content
a list of blocks each holding one key) then the response's ``output.message`` as the last
assistant turn. Per block:

- ``text`` of a ``user`` message: the first one → ``task.objective``, later ones → observation
  steps marked ``"source": "user"``; of an ``assistant`` message → thought;
- ``reasoningContent.reasoningText.text`` → thought (``redactedContent`` has no readable text);
- ``toolUse{toolUseId, name, input}`` → tool_call;
- ``toolResult{toolUseId, content, status}`` → observation matched by ``toolUseId``: its
  ``text`` and ``json`` blocks (as JSON), ``image``/``document``/``video`` blocks as
  placeholders (``[image/png, 24 KB]``); ``status: error`` marks it failed;
- ``image``, ``document``, ``video``, ``guardContent``, ``cachePoint`` elsewhere: not steps.

Records: ``{"messages": [...]}`` (optional ``modelId``, ``system``, ``toolConfig``,
``inferenceConfig``) with the response's fields (``output``, ``stopReason``, ``usage``,
``metrics``) beside them or under ``response``; ``{"request", "response"}``; or a list of
messages. ``modelId`` → ``kp_import.model``; ``stopReason`` → ``kp_import.stop_reason``
(``guardrail_intervened`` or ``content_filtered`` → success false); the response's
``ResponseMetadata.RequestId`` → source id. Dropped: ``system``, ``toolConfig``, usage.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from knowledgepulse._schema import ReasoningTrace
from knowledgepulse.io._reader import json_type_name

from ._binary import base64_size, binary_placeholder, reference_placeholder
from ._builder import TraceBuilder
from ._options import ImportOptions, resolve_options
from ._tool_definitions import declared_tools
from ._values import (
    ConversionError,
    at,
    expect_dict,
    expect_list,
    expect_str,
    parse_arguments,
    stringify,
)

__all__ = ["BLOCK_KEYS", "from_bedrock", "is_bedrock_messages", "is_bedrock_record"]

# The keys of Converse content blocks (each block holds exactly one).
BLOCK_KEYS = frozenset(
    {
        "text",
        "toolUse",
        "toolResult",
        "image",
        "document",
        "video",
        "reasoningContent",
        "guardContent",
        "cachePoint",
        "citationsContent",
    }
)
_FAILED_STOPS = frozenset({"guardrail_intervened", "content_filtered"})
_MEDIA_MIME = {"image": "image", "document": "application", "video": "video"}


def from_bedrock(
    record: Any, options: ImportOptions | None = None, **overrides: Any
) -> list[ReasoningTrace]:
    """The traces of a Bedrock Converse record: one per conversation.

    ``record`` is a Converse request with its response (see the module description), a
    ``{"request", "response"}`` pair, a list of messages, or a list of records. ``options``
    (and keyword ``overrides`` of its fields) replace source values in every trace. Raises
    :class:`ConversionError` naming the offending field's path.
    """
    options = resolve_options(options, overrides)
    if isinstance(record, (list, tuple)) and record and all(map(is_bedrock_record, record)):
        return [_conversation(item, at("", n), options) for n, item in enumerate(record)]
    return [_conversation(record, "", options)]


def is_bedrock_record(value: Any) -> bool:
    """Whether ``value`` is a whole Converse record (request, response or pair) rather than
    one message: a ``modelId``, Converse messages, or an ``output.message``."""
    if not isinstance(value, Mapping):
        return False
    if isinstance(value.get("request"), Mapping):
        return is_bedrock_record(value["request"])
    output = value.get("output")
    if isinstance(output, Mapping) and isinstance(output.get("message"), Mapping):
        return True
    messages = value.get("messages")
    return isinstance(messages, list) and is_bedrock_messages(messages)


def is_bedrock_messages(messages: Any) -> bool:
    """Whether a list holds Converse messages: content blocks without a ``type``, each keyed
    by a Converse block name (``text``, ``toolUse``, ``toolResult``, ...)."""
    if not isinstance(messages, (list, tuple)) or not messages:
        return False
    seen = False
    for message in messages:
        if not isinstance(message, Mapping) or not isinstance(message.get("content"), list):
            return False
        for block in message["content"]:
            if not isinstance(block, Mapping) or "type" in block:
                return False
            if not block.keys() & BLOCK_KEYS:
                return False
            seen = True
    return seen


def _conversation(record: Any, path: str, options: ImportOptions) -> ReasoningTrace:
    builder = TraceBuilder("bedrock")
    if isinstance(record, (list, tuple)):
        _read_messages(builder, list(record), path)
    elif isinstance(record, Mapping):
        request, request_path = record, path
        response: Mapping[str, Any] = record
        response_path = path
        if isinstance(record.get("request"), Mapping):
            request, request_path = record["request"], at(path, "request")
        if record.get("response") is not None:
            response_path = at(path, "response")
            response = expect_dict(record["response"], response_path)
        messages = request.get("messages")
        if messages is not None:
            where = at(request_path, "messages")
            _read_messages(builder, expect_list(messages, where), where)
        if isinstance(request.get("modelId"), str):
            builder.info["model"] = request["modelId"]
        config = request.get("toolConfig")
        builder.keep_tools(
            declared_tools(config.get("tools") if isinstance(config, Mapping) else None)
        )
        _read_response(builder, response, response_path)
    else:
        raise ConversionError(
            path, f"expected a list of messages or an object, got {json_type_name(record)}"
        )
    try:
        return builder.build(record, options)
    except ConversionError as exc:
        raise exc.under(path) from None


def _read_messages(builder: TraceBuilder, messages: list[Any], path: str) -> None:
    for index, raw in enumerate(messages):
        builder.at_origin(message=index)
        where = at(path, index)
        message = expect_dict(raw, where)
        role = message.get("role")
        if role not in ("user", "assistant"):
            raise ConversionError(
                at(where, "role"), f"expected one of 'user', 'assistant' (got {role!r})"
            )
        _read_blocks(builder, message.get("content"), at(where, "content"), role)


def _read_blocks(builder: TraceBuilder, content: Any, path: str, role: str) -> None:
    texts: list[str] = []
    for index, raw in enumerate(expect_list(content, path)):
        where = at(path, index)
        block = expect_dict(raw, where)
        if "text" in block:
            text = expect_str(block["text"], at(where, "text"), allow_empty=True)
            if role == "assistant":
                builder.thought(text)
            else:
                texts.append(text)
        elif "reasoningContent" in block:
            reasoning = expect_dict(block["reasoningContent"], at(where, "reasoningContent"))
            inner = reasoning.get("reasoningText")
            if isinstance(inner, Mapping) and isinstance(inner.get("text"), str):
                builder.thought(inner["text"])
        elif "toolUse" in block:
            use_path = at(where, "toolUse")
            use = expect_dict(block["toolUse"], use_path)
            builder.tool_call(
                expect_str(use.get("name"), at(use_path, "name")),
                parse_arguments(use.get("input"), at(use_path, "input")),
                call_id=expect_str(use.get("toolUseId"), at(use_path, "toolUseId")),
            )
        elif "toolResult" in block:
            _read_result(builder, block["toolResult"], at(where, "toolResult"))
    # The text blocks of one user message are one turn.
    builder.user_message("\n".join(t for t in texts if t.strip()))


def _read_result(builder: TraceBuilder, raw: Any, where: str) -> None:
    result = expect_dict(raw, where)
    call_id = expect_str(result.get("toolUseId"), at(where, "toolUseId"))
    texts: list[str] = []
    content_path = at(where, "content")
    for index, item in enumerate(expect_list(result.get("content") or [], content_path)):
        block = expect_dict(item, at(content_path, index))
        if "text" in block:
            texts.append(stringify(block["text"]))
        elif "json" in block:
            texts.append(stringify(block["json"]))
        else:
            texts.extend(_media(block))
    builder.observation("\n".join(texts), call_id=call_id, failed=result.get("status") == "error")


def _media(block: Mapping[str, Any]) -> list[str]:
    for kind, family in _MEDIA_MIME.items():
        media = block.get(kind)
        if not isinstance(media, Mapping):
            continue
        fmt = media.get("format")
        mime = f"{family}/{fmt}" if isinstance(fmt, str) else kind
        source = media.get("source")
        source = source if isinstance(source, Mapping) else {}
        data = source.get("bytes")
        if isinstance(data, str):
            return [binary_placeholder(mime, base64_size(data))]
        location = source.get("s3Location")
        if isinstance(location, Mapping) and isinstance(location.get("uri"), str):
            return [reference_placeholder(mime, location["uri"])]
        name = media.get("name")
        return [reference_placeholder(mime, name) if isinstance(name, str) else f"[{mime}]"]
    return []


def _read_response(builder: TraceBuilder, response: Mapping[str, Any], path: str) -> None:
    builder.at_origin(output="message")
    output = response.get("output")
    if output is not None:
        output_path = at(path, "output")
        message_path = at(output_path, "message")
        message = expect_dict(expect_dict(output, output_path).get("message"), message_path)
        _read_blocks(builder, message.get("content"), at(message_path, "content"), "assistant")
    stop = response.get("stopReason")
    if isinstance(stop, str):
        builder.info["stop_reason"] = stop
        if stop in _FAILED_STOPS:
            builder.success = False
    metadata = response.get("ResponseMetadata")
    if isinstance(metadata, Mapping) and isinstance(metadata.get("RequestId"), str):
        builder.source_id = metadata["RequestId"]
