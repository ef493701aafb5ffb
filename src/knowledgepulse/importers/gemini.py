"""Gemini ``generateContent`` logs → ReasoningTrace.

A request's ``contents`` (each ``{role, parts}``, ``role`` ``user``, ``model`` or ``function``)
then the response's first candidate's ``content`` as the last model turn. Per part:

- ``text`` of a ``user`` turn: the first one → ``task.objective``, later ones → observation
  steps marked ``"source": "user"``; of a ``model`` turn → thought (``thought: true`` parts,
  the thought summaries, too);
- ``functionCall{name, args, id}`` → tool_call;
- ``functionResponse{name, response, id}`` (in a ``user`` or ``function`` turn) → observation,
  matched to its call by ``id``, else by name; ``response.output``/``response.result`` is the
  text when it is the only key, else the JSON; ``response.error`` marks it failed;
- ``executableCode{language, code}`` → tool_call ``code_execution``;
  ``codeExecutionResult{outcome, output}`` → observation, failed unless ``OUTCOME_OK``;
- ``inlineData{mimeType, data}`` → a placeholder (``[image/png, 24 KB]``) in a function
  response; ``fileData{mimeType, fileUri}`` → ``[image/png: gs://…]``; not steps elsewhere.

Records: ``{"contents": [...]}`` (optional ``systemInstruction``, ``tools``, ``model`` and a
``response``), ``{"request": {...}, "response": {...}}``, or a list of contents. The Python
SDK's snake_case names (``function_call``, ``usage_metadata``, ...) are read as well. From the
response: ``responseId`` → source id, ``modelVersion`` → ``kp_import.model``, ``createTime`` →
``created_at``, ``finishReason`` → ``kp_import.finish_reason`` (a blocked or malformed answer:
``SAFETY``, ``RECITATION``, ``BLOCKLIST``, ``PROHIBITED_CONTENT``, ``SPII``,
``MALFORMED_FUNCTION_CALL``, or a ``promptFeedback.blockReason`` → success false). Dropped:
``systemInstruction``, ``tools``, ``generationConfig``, ``usageMetadata``, safety ratings.
"""

from __future__ import annotations

import re
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
    parse_timestamp,
    stringify,
)

__all__ = ["from_gemini", "is_gemini_contents", "is_gemini_record"]

_FAILED_FINISH = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "MALFORMED_FUNCTION_CALL",
        "IMAGE_SAFETY",
    }
)


def from_gemini(
    record: Any, options: ImportOptions | None = None, **overrides: Any
) -> list[ReasoningTrace]:
    """The traces of a Gemini record: one per conversation.

    ``record`` is a ``generateContent`` request (``{"contents": [...]}``, optionally with its
    ``response``), a ``{"request", "response"}`` pair, a list of contents, or a list of such
    records. ``options`` (and keyword ``overrides`` of its fields) replace source values in
    every trace. Raises :class:`ConversionError` naming the offending field's path.
    """
    options = resolve_options(options, overrides)
    if isinstance(record, (list, tuple)) and record and all(map(is_gemini_record, record)):
        return [_conversation(item, at("", n), options) for n, item in enumerate(record)]
    return [_conversation(record, "", options)]


def is_gemini_record(value: Any) -> bool:
    """Whether ``value`` is a whole Gemini record (a request, a response or a pair) rather
    than one content of a conversation."""
    if not isinstance(value, Mapping):
        return False
    request = value.get("request")
    if isinstance(request, Mapping) and "contents" in request:
        return True
    return isinstance(value.get("contents"), list) or isinstance(value.get("candidates"), list)


def is_gemini_contents(items: Any) -> bool:
    """Whether a list holds Gemini contents: ``{role, parts}`` with Gemini parts."""
    if not isinstance(items, (list, tuple)) or not items:
        return False
    for item in items:
        if not isinstance(item, Mapping) or not isinstance(item.get("parts"), list):
            return False
        if item.get("role") not in (None, "user", "model", "function"):
            return False
    return True


def _conversation(record: Any, path: str, options: ImportOptions) -> ReasoningTrace:
    builder = TraceBuilder("gemini")
    if isinstance(record, (list, tuple)):
        _read_contents(builder, list(record), path)
    elif isinstance(record, Mapping):
        request, request_path = record, path
        if isinstance(record.get("request"), Mapping):
            request, request_path = record["request"], at(path, "request")
        contents = _get(request, "contents")
        if contents is not None:
            where = at(request_path, "contents")
            _read_contents(builder, expect_list(contents, where), where)
        if isinstance(request.get("model"), str):
            builder.info["model"] = request["model"].removeprefix("models/")
        builder.keep_tools(declared_tools(request.get("tools")))
        response = record.get("response")
        if response is not None:
            _read_response(
                builder, expect_dict(response, at(path, "response")), at(path, "response")
            )
        elif "candidates" in record:
            _read_response(builder, record, path)
        elif contents is None:
            raise ConversionError(path, "expected 'contents', 'candidates' or 'request'")
    else:
        raise ConversionError(
            path, f"expected a list of contents or an object, got {json_type_name(record)}"
        )
    try:
        return builder.build(record, options)
    except ConversionError as exc:
        raise exc.under(path) from None


def _get(obj: Mapping[str, Any], camel: str) -> Any:
    """A field by its REST name (``functionCall``) or the Python SDK's (``function_call``)."""
    if camel in obj:
        return obj[camel]
    return obj.get(re.sub(r"(?<!^)([A-Z])", r"_\1", camel).lower())


def _read_contents(builder: TraceBuilder, contents: list[Any], path: str) -> None:
    for index, raw in enumerate(contents):
        builder.at_origin(content=index)
        where = at(path, index)
        content = expect_dict(raw, where)
        role = content.get("role", "user")
        if role not in ("user", "model", "function"):
            raise ConversionError(
                at(where, "role"), f"expected one of 'user', 'model', 'function' (got {role!r})"
            )
        _read_parts(builder, content.get("parts"), at(where, "parts"), role)


def _read_parts(builder: TraceBuilder, parts: Any, path: str, role: str) -> None:
    texts: list[str] = []
    for index, raw in enumerate(expect_list(parts, path)):
        where = at(path, index)
        part = expect_dict(raw, where)
        text = part.get("text")
        if text is not None:
            text = expect_str(text, at(where, "text"), allow_empty=True)
            if role == "model":
                builder.thought(text)
            else:
                texts.append(text)
        elif _get(part, "functionCall") is not None:
            _read_call(builder, _get(part, "functionCall"), at(where, "functionCall"))
        elif _get(part, "functionResponse") is not None:
            _read_function_response(
                builder, _get(part, "functionResponse"), at(where, "functionResponse")
            )
        elif _get(part, "executableCode") is not None:
            code = expect_dict(_get(part, "executableCode"), at(where, "executableCode"))
            builder.tool_call("code_execution", code)
        elif _get(part, "codeExecutionResult") is not None:
            result = expect_dict(
                _get(part, "codeExecutionResult"), at(where, "codeExecutionResult")
            )
            builder.observation(
                stringify(result.get("output")),
                tool="code_execution",
                failed=result.get("outcome") not in (None, "OUTCOME_OK"),
            )
    # The text parts of one user turn are one message.
    builder.user_message("\n".join(t for t in texts if t.strip()))


def _read_call(builder: TraceBuilder, raw: Any, where: str) -> None:
    call = expect_dict(raw, where)
    call_id = call.get("id")
    builder.tool_call(
        expect_str(call.get("name"), at(where, "name")),
        parse_arguments(call.get("args"), at(where, "args")),
        call_id=call_id if isinstance(call_id, str) and call_id else None,
    )


def _read_function_response(builder: TraceBuilder, raw: Any, where: str) -> None:
    result = expect_dict(raw, where)
    name = expect_str(result.get("name"), at(where, "name"))
    response = result.get("response")
    text = stringify(response)
    failed = False
    if isinstance(response, Mapping):
        failed = response.get("error") not in (None, "", {}, [])
        if len(response) == 1 and next(iter(response)) in ("output", "result", "content"):
            text = stringify(next(iter(response.values())))
    media = [_media(p) for p in result.get("parts") or [] if isinstance(p, Mapping)]
    text = "\n".join(t for t in [text, *media] if t)
    call_id = result.get("id")
    builder.observation(
        text,
        call_id=call_id if isinstance(call_id, str) and call_id else None,
        tool=name,
        failed=failed,
    )


def _media(part: Mapping[str, Any]) -> str:
    inline = _get(part, "inlineData")
    if isinstance(inline, Mapping):
        data = inline.get("data")
        size = base64_size(data) if isinstance(data, str) else None
        return binary_placeholder(_get(inline, "mimeType"), size)
    file = _get(part, "fileData")
    if isinstance(file, Mapping) and isinstance(_get(file, "fileUri"), str):
        return reference_placeholder(_get(file, "mimeType"), _get(file, "fileUri"))
    return ""


def _read_response(builder: TraceBuilder, response: Mapping[str, Any], path: str) -> None:
    builder.at_origin(candidate=0)
    candidates = response.get("candidates")
    if candidates:
        first_path = at(at(path, "candidates"), 0)
        first = expect_dict(expect_list(candidates, at(path, "candidates"))[0], first_path)
        content = first.get("content")
        if content is not None:
            content_path = at(first_path, "content")
            content = expect_dict(content, content_path)
            _read_parts(builder, content.get("parts") or [], at(content_path, "parts"), "model")
        finish = _get(first, "finishReason")
        if isinstance(finish, str):
            builder.info["finish_reason"] = finish
            if finish in _FAILED_FINISH:
                builder.success = False
    feedback = _get(response, "promptFeedback")
    if isinstance(feedback, Mapping) and _get(feedback, "blockReason"):
        builder.success = False
    for key, target in (("responseId", "source_id"), ("modelVersion", "model")):
        value = _get(response, key)
        if isinstance(value, str) and value:
            if target == "source_id":
                builder.source_id = value
            else:
                builder.info["model"] = value
    builder.note_time(parse_timestamp(_get(response, "createTime")))
