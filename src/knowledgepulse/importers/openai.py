"""OpenAI conversations → ReasoningTrace: Chat Completions messages and Responses API items.

Chat Completions (``role`` messages):

- ``assistant`` ``reasoning_content``/``reasoning`` (text) → thought; ``content`` (text or
  text parts) → thought, ``refusal`` → thought; blank content is skipped;
- ``assistant`` ``tool_calls[].function{name, arguments}`` → tool_call (``arguments`` parsed from
  JSON into ``input``), ``custom`` tool calls → ``input = {"input": text}``, legacy
  ``function_call`` → tool_call;
- ``tool`` (matched to its call by ``tool_call_id``; ``error: true``, as tau2-bench writes it,
  marks it failed) and legacy ``function`` → observation;
- the first ``user`` message → ``task.objective``; later ``user`` messages → observation
  steps marked ``"source": "user"``; ``system``/``developer`` messages are not steps;
- a message holding an Anthropic block (``tool_use``, ``tool_result``, ``thinking``, ...)
  is refused with ``use --from anthropic``: read as OpenAI content it would vanish; a
  mini-SWE-agent trajectory (the object, or its bare message list) with ``use --from
  mini-swe-agent``: its commands are fenced in the text, not calls.

Responses API items: ``reasoning`` (summary and content text) → thought; ``message`` (assistant
``output_text``/``refusal``) → thought, a user message → objective (later ones → user
observations); ``function_call`` and
``custom_tool_call`` → tool_call; ``function_call_output``/``*_call_output`` → observation;
``mcp_call`` → tool_call (with ``mcp_server``) and its ``output``/``error`` → observation; other
built-in ``*_call`` items (``web_search_call``, ``file_search_call``, ...) → tool_call named after
the item type, plus an observation when the item carries its results. The record's ``input``
items come before its ``output`` items.

Records: a list of messages or items; ``{"messages": [...]}`` (optional ``id``, ``model``,
``created``, and ``choices`` whose first message is appended); a tau-bench record
``{task_id, trial, reward, info, traj}`` (``reward`` ≥ 1.0 → success, id
``tau-bench:task-<task_id>:trial-<trial>``, ``task_id`` and ``trial`` → ``metadata.kp_import.task``
and ``trial``, ``info`` → ``metadata.ground_truth``; ``traj: []`` is refused saying the run
crashed, quoting ``info.error``); a Responses object ``{"output": [...]}`` (optional
``id``, ``input``, ``created_at``, ``model``, ``error``; ``status: failed`` or an ``error`` →
success false).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from knowledgepulse._schema import ReasoningTrace
from knowledgepulse.io._reader import json_type_name

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
    parse_timestamp,
    stringify,
)
from .swe_agent import is_mini_swe_agent

__all__ = ["from_openai", "is_record_list", "is_responses_items"]

# Content blocks only Anthropic's Messages API writes (OpenAI parts are text, images, audio,
# files and refusals).
_ANTHROPIC_BLOCKS = frozenset(
    {
        "tool_use",
        "tool_result",
        "thinking",
        "redacted_thinking",
        "server_tool_use",
        "web_search_tool_result",
        "mcp_tool_use",
        "mcp_tool_result",
    }
)
_RESPONSES_TYPES = frozenset(
    {"reasoning", "function_call", "function_call_output", "custom_tool_call", "mcp_call"}
)


def from_openai(
    record: Any, options: ImportOptions | None = None, **overrides: Any
) -> list[ReasoningTrace]:
    """The traces of an OpenAI record: one per conversation.

    ``record`` is a conversation (a list of chat messages or Responses items, a
    ``{"messages": [...]}`` object, a tau-bench record, a Responses object) or a list of such
    records (a tau-bench results file). ``options`` (and keyword ``overrides`` of its fields)
    replace source values in every trace. Raises :class:`ConversionError` naming the offending
    field's path.
    """
    options = resolve_options(options, overrides)
    if is_record_list(record):
        traces: list[ReasoningTrace] = []
        for index, item in enumerate(record):
            traces.append(_conversation(item, at("", index), options))
        return traces
    return [_conversation(record, "", options)]


def is_record_list(value: Any) -> bool:
    """Whether a list holds whole records (tau-bench, ``messages``, Responses objects) rather
    than the messages or items of one conversation."""
    return (
        isinstance(value, (list, tuple))
        and bool(value)
        and not is_responses_items(value)
        and all(
            isinstance(item, Mapping) and any(key in item for key in ("traj", "messages", "output"))
            for item in value
        )
    )


def _conversation(record: Any, path: str, options: ImportOptions) -> ReasoningTrace:
    if is_mini_swe_agent(record):
        # Chat messages too, but its commands are fenced in the text: read as chat they would
        # be thoughts, and the run's calls lost.
        raise ConversionError(
            path,
            "a mini-SWE-agent trajectory (its commands are fenced in the assistant text, "
            "which OpenAI messages do not read as calls); it looks like mini-swe-agent: use "
            "--from mini-swe-agent",
        )
    if isinstance(record, (list, tuple)):
        if is_responses_items(record):
            builder = TraceBuilder("openai-responses")
            _read_items(builder, list(record), path)
        else:
            builder = TraceBuilder("openai")
            _read_messages(builder, list(record), path)
        return _build(builder, record, path, options)
    if not isinstance(record, Mapping):
        raise ConversionError(
            path, f"expected a list of messages or an object, got {json_type_name(record)}"
        )
    if "traj" in record:
        builder = _read_tau_bench(record, path)
    elif "messages" in record:
        builder = TraceBuilder("openai")
        _read_chat_record(builder, record, path)
    elif "output" in record:
        builder = TraceBuilder("openai-responses")
        _read_response(builder, record, path)
    else:
        raise ConversionError(
            path, "expected 'messages', 'traj' (tau-bench) or 'output' (Responses API)"
        )
    return _build(builder, record, path, options)


def _build(builder: TraceBuilder, record: Any, path: str, options: ImportOptions) -> ReasoningTrace:
    try:
        return builder.build(record, options)
    except ConversionError as exc:
        raise exc.under(path) from None


def is_responses_items(items: Any) -> bool:
    """Whether a list holds Responses API items rather than Chat Completions messages."""
    if not isinstance(items, (list, tuple)):
        return False
    for item in items:
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type")
        if not isinstance(kind, str):
            kind = None  # a list or object is no item type (and cannot be looked up in a set)
        if kind in _RESPONSES_TYPES or (kind is not None and kind.endswith("_call_output")):
            return True
        content = item.get("content")
        if kind == "message" or (
            isinstance(content, list)
            and any(
                isinstance(p, Mapping) and p.get("type") in ("input_text", "output_text")
                for p in content
            )
        ):
            return True
    return False


# ---------------------------------------------------------------------------------------------
# Chat Completions


def _read_tau_bench(record: Mapping[str, Any], path: str) -> TraceBuilder:
    builder = TraceBuilder("openai")
    traj = expect_list(record["traj"], at(path, "traj"))
    if not traj:
        raise ConversionError(at(path, "traj"), _empty_run(record.get("info")))
    _read_messages(builder, traj, at(path, "traj"))
    task_id, trial = record.get("task_id"), record.get("trial")
    if task_id is not None:
        builder.source_id = f"tau-bench:task-{task_id}" + (
            f":trial-{trial}" if trial is not None else ""
        )
        # Like a Harbor trial's: attempts of one task group on metadata.kp_import.task.
        builder.info["task"] = task_id
    if trial is not None:
        builder.info["trial"] = trial
    reward = record.get("reward")
    if reward is not None:
        if isinstance(reward, bool) or not isinstance(reward, (int, float)):
            raise ConversionError(
                at(path, "reward"), f"expected a number, got {json_type_name(reward)}"
            )
        builder.success = reward >= 1.0
        builder.info["reward"] = reward
    info = record.get("info")
    if info is not None:
        # The task, its expected actions and outputs: what a rubric grades the trace against.
        builder.ground_truth = expect_dict(info, at(path, "info"))
    return builder


def _empty_run(info: Any) -> str:
    """Why a tau-bench run has no steps: its runner writes ``traj: []`` and the exception in
    ``info.error`` when the run crashed."""
    error = info.get("error") if isinstance(info, Mapping) else None
    if error:
        text = stringify(error).strip()
        if len(text) > 300:
            text = text[:299] + "…"
        return f"empty: the run crashed before its first step: {text}"
    return "empty: the run has no steps"


def _read_chat_record(builder: TraceBuilder, record: Mapping[str, Any], path: str) -> None:
    messages = expect_list(record["messages"], at(path, "messages"))
    builder.keep_tools(declared_tools(record.get("tools")))
    choices = record.get("choices")
    if choices:
        first_path = at(at(path, "choices"), 0)
        first = expect_dict(expect_list(choices, at(path, "choices"))[0], first_path)
        choice = expect_dict(first.get("message"), at(first_path, "message"))
        _read_messages(builder, [*messages, choice], at(path, "messages"), listed=len(messages))
    else:
        _read_messages(builder, messages, at(path, "messages"))
    if isinstance(record.get("id"), str) and record["id"]:
        builder.source_id = record["id"]
    if isinstance(record.get("model"), str):
        builder.info["model"] = record["model"]
    builder.note_time(parse_timestamp(record.get("created")))


def _read_messages(
    builder: TraceBuilder, messages: list[Any], path: str, *, listed: int | None = None
) -> None:
    """The chat messages' steps, each with its message's index as its origin; those past the
    first ``listed`` are a reply's ``choices[0].message``."""
    for index, raw in enumerate(messages):
        if listed is not None and index >= listed:
            builder.at_origin(choice=index - listed)
        else:
            builder.at_origin(message=index)
        where = at(path, index)
        message = expect_dict(raw, where)
        role = expect_str(message.get("role"), at(where, "role"))
        _refuse_anthropic_blocks(message.get("content"), at(where, "content"))
        if role in ("system", "developer"):
            continue
        if role == "user":
            builder.user_message(content_text(message.get("content"), at(where, "content")))
        elif role == "assistant":
            _read_assistant(builder, message, where)
        elif role == "tool":
            call_id = message.get("tool_call_id")
            builder.observation(
                content_text(message.get("content"), at(where, "content")),
                call_id=call_id if isinstance(call_id, str) else None,
                tool=message.get("name") if isinstance(message.get("name"), str) else None,
                # tau2-bench marks a tool message that failed with ``error: true``.
                failed=message.get("error") is True,
            )
        elif role == "function":
            builder.observation(
                content_text(message.get("content"), at(where, "content")),
                tool=expect_str(message.get("name"), at(where, "name")),
            )
        else:
            raise ConversionError(
                at(where, "role"),
                "expected one of 'system', 'developer', 'user', 'assistant', 'tool', "
                f"'function' (got {role!r})",
            )


def _refuse_anthropic_blocks(content: Any, path: str) -> None:
    """Anthropic's tool and thinking blocks have no text part: read as OpenAI content they
    would vanish (the calls, their results, the recovery after a failed one), so a message
    holding one is refused, saying which format reads it."""
    if not isinstance(content, (list, tuple)):
        return
    for index, part in enumerate(content):
        kind = part.get("type") if isinstance(part, Mapping) else None
        if isinstance(kind, str) and kind in _ANTHROPIC_BLOCKS:
            raise ConversionError(
                at(at(path, index), "type"),
                f"{kind!r} is an Anthropic content block, which OpenAI messages do not hold; "
                "it looks like anthropic: use --from anthropic",
            )


def _read_assistant(builder: TraceBuilder, message: Mapping[str, Any], where: str) -> None:
    for key in ("reasoning_content", "reasoning"):
        if isinstance(message.get(key), str):
            builder.thought(message[key])
    builder.thought(content_text(message.get("content"), at(where, "content")))
    if isinstance(message.get("refusal"), str):
        builder.thought(message["refusal"])
    calls = message.get("tool_calls")
    for index, raw in enumerate(expect_list(calls, at(where, "tool_calls")) if calls else []):
        call_path = at(at(where, "tool_calls"), index)
        call = expect_dict(raw, call_path)
        call_id = call.get("id") if isinstance(call.get("id"), str) else None
        if call.get("type") == "custom" or "custom" in call:
            custom = expect_dict(call.get("custom"), at(call_path, "custom"))
            name = expect_str(custom.get("name"), at(at(call_path, "custom"), "name"))
            builder.tool_call(name, {"input": stringify(custom.get("input"))}, call_id=call_id)
            continue
        function_path = at(call_path, "function")
        function = expect_dict(call.get("function"), function_path)
        name = expect_str(function.get("name"), at(function_path, "name"))
        arguments = parse_arguments(function.get("arguments"), at(function_path, "arguments"))
        builder.tool_call(name, arguments, call_id=call_id)
    legacy = message.get("function_call")
    if legacy is not None:
        function_path = at(where, "function_call")
        function = expect_dict(legacy, function_path)
        name = expect_str(function.get("name"), at(function_path, "name"))
        builder.tool_call(
            name, parse_arguments(function.get("arguments"), at(function_path, "arguments"))
        )


# ---------------------------------------------------------------------------------------------
# Responses API


def _read_response(builder: TraceBuilder, record: Mapping[str, Any], path: str) -> None:
    builder.keep_tools(declared_tools(record.get("tools")))
    given = record.get("input")
    if isinstance(given, str):
        builder.user_message(given)
    elif given is not None:
        _read_items(builder, expect_list(given, at(path, "input")), at(path, "input"))
    _read_items(builder, expect_list(record["output"], at(path, "output")), at(path, "output"))
    if isinstance(record.get("id"), str) and record["id"]:
        builder.source_id = record["id"]
    if isinstance(record.get("model"), str):
        builder.info["model"] = record["model"]
    builder.note_time(parse_timestamp(record.get("created_at")))
    if record.get("error") or record.get("status") == "failed":
        builder.success = False


def _read_items(builder: TraceBuilder, items: list[Any], path: str) -> None:
    for index, raw in enumerate(items):
        where = at(path, index)
        # The item's place: "output[2]" in a Responses object, "[2]" in a bare item list.
        builder.at_origin(item=where)
        item = expect_dict(raw, where)
        kind = item.get("type")
        if kind is None and "role" in item:
            kind = "message"
        if not isinstance(kind, str):
            raise ConversionError(at(where, "type"), "expected a string naming the item type")
        call_id = item.get("call_id") if isinstance(item.get("call_id"), str) else None
        if kind == "message":
            role = expect_str(item.get("role"), at(where, "role"))
            text = content_text(item.get("content"), at(where, "content"))
            if role == "user":
                builder.user_message(text)
            elif role == "assistant":
                builder.thought(text)
        elif kind == "reasoning":
            texts = [
                content_text(item.get(key), at(where, key))
                for key in ("summary", "content")
                if item.get(key) is not None
            ]
            builder.thought("\n".join(t for t in texts if t))
        elif kind == "function_call":
            name = expect_str(item.get("name"), at(where, "name"))
            arguments = parse_arguments(item.get("arguments"), at(where, "arguments"))
            builder.tool_call(name, arguments, call_id=call_id)
        elif kind == "custom_tool_call":
            name = expect_str(item.get("name"), at(where, "name"))
            builder.tool_call(name, {"input": stringify(item.get("input"))}, call_id=call_id)
        elif kind.endswith("_call_output"):
            output = item.get("output")
            if isinstance(output, list):
                output = content_text(output, at(where, "output"))
            builder.observation(stringify(output), call_id=call_id)
        elif kind == "mcp_call":
            name = expect_str(item.get("name"), at(where, "name"))
            server = item.get("server_label") if isinstance(item.get("server_label"), str) else None
            step = builder.tool_call(
                name,
                parse_arguments(item.get("arguments"), at(where, "arguments")),
                call_id=item.get("id") if isinstance(item.get("id"), str) else None,
                mcp_server=server,
            )
            error = item.get("error")
            if item.get("output") is not None or error:
                builder.observation(
                    stringify(error or item.get("output")), call_id=step.call_id, failed=bool(error)
                )
        elif kind.endswith("_call"):
            _read_builtin_call(builder, item, kind, call_id)
        # Other item types (item_reference, compaction, ...) carry no step.


_RESULT_KEYS = ("output", "outputs", "results", "result")


def _read_builtin_call(
    builder: TraceBuilder, item: Mapping[str, Any], kind: str, call_id: str | None
) -> None:
    """A built-in tool item (web_search_call, file_search_call, ...): its own fields are the
    input; results it carries are the observation."""
    arguments = {
        key: value
        for key, value in item.items()
        if key not in ("id", "type", "status", "call_id", *_RESULT_KEYS)
    }
    step = builder.tool_call(
        kind.removesuffix("_call"),
        arguments,
        call_id=call_id or (item.get("id") if isinstance(item.get("id"), str) else None),
    )
    results = [item[key] for key in _RESULT_KEYS if item.get(key) is not None]
    failed = item.get("status") == "failed"
    if results or failed:
        builder.observation(
            stringify(results[0] if results else "failed"), call_id=step.call_id, failed=failed
        )
