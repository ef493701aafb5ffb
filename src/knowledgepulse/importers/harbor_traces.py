"""Harbor's ``traces`` export (``harbor traces export``: one row per episode, as JSONL) →
ReasoningTrace: one trace per row.

A row is ``{conversations: [{role, content}], agent, model, model_provider, date, task,
episode, run_id, trial_name, result, instruction?}``. An episode's conversation holds every
turn up to that agent turn, so exporting all episodes gives each trial's run several times,
each a prefix of the next: export with ``--episodes last`` for one row per trial.

- ``system`` messages are dropped; ``assistant`` messages: a ``<think>`` block → thought; the
  calls written as text (:mod:`._text_calls`: a Terminus JSON reply ``{analysis, plan,
  commands, task_complete}`` → thought (analysis and plan), then one tool_call ``terminal``
  per command (``input = {keystrokes, duration}``); OpenHands' ``<tool_call>{...}</tool_call>``
  and ``<function=...>`` blocks → tool_calls, the text around them → thought); any other
  reply → thought; a reply the harness answered with ``Previous response had parsing
  errors`` ran nothing: its thoughts only;
- ``user`` messages after the first are the harness speaking (terminal output), never user
  turns: an observation of the last command; ``Previous response had parsing errors`` → a
  failed observation marked ``"source": "harness"``;
- objective: the row's ``instruction`` when exported (``instruction``), else the task inside
  the first user message's Terminus template (``Task Description:`` up to ``Current terminal
  state:``), else that whole message; a harness preamble before it (OpenHands' system prompt,
  written as a user message) is skipped and kept in ``kp_import.objective_context``;
- ``result``: a reward (``"1.0"``) → ``kp_import.reward``, ≥ 1 → success; an exception name →
  failure (``kp_import.exception``); id ``<run_id>:<trial_name>:<episode>``; ``date`` →
  ``created_at``; ``agent`` → ``metadata.agent_id``; ``model``, ``model_provider``, ``task``,
  ``episode`` → ``kp_import``;
- dropped: ``tool_definitions``, ``verifier_output``, ``conversations_sharegpt``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from knowledgepulse._schema import ReasoningTrace

from ._builder import TraceBuilder
from ._entries import default_objective
from ._harness_text import starts_with_any
from ._objective import (
    FROM_TASK_DEFINITION,
    FROM_TASK_FIELD,
    FROM_USER_MESSAGE,
    TEMPLATE_PREFIX,
    TEMPLATE_TERMINUS_2,
    preamble_kind,
)
from ._options import ImportOptions, resolve_options
from ._text_calls import calls_in_text, emit_text_reply
from ._values import (
    ConversionError,
    at,
    content_text,
    expect_dict,
    expect_list,
    expect_str,
    parse_timestamp,
)

__all__ = ["from_harbor_traces", "is_harbor_trace_row"]

FORMAT = "harbor-traces"
SUCCESS_THRESHOLD = 1.0
_THINK = re.compile(r"^\s*<think>(.*?)</think>\s*", re.DOTALL)
_TASK = re.compile(r"Task Description:\s*\n(.*?)\n\s*Current terminal state:", re.DOTALL)
_PARSING_ERRORS = ("Previous response had parsing errors",)


def is_harbor_trace_row(record: Any) -> bool:
    """Whether a record is a row of Harbor's traces export."""
    return (
        isinstance(record, Mapping)
        and isinstance(record.get("conversations"), list)
        and "episode" in record
        and ("trial_name" in record or "run_id" in record)
    )


def from_harbor_traces(
    record: Any, options: ImportOptions | None = None, **overrides: Any
) -> list[ReasoningTrace]:
    """The traces of Harbor traces-export rows: one row, or a list of rows (one trace each)."""
    options = resolve_options(options, overrides)
    if isinstance(record, list):
        if not record:
            raise ConversionError("", "expected traces-export rows, got an empty array")
        return [_row(item, at("", index), options) for index, item in enumerate(record)]
    return [_row(record, "", options)]


def _row(raw: Any, path: str, options: ImportOptions) -> ReasoningTrace:
    row = expect_dict(raw, path)
    if "conversations" not in row:
        raise ConversionError(path, "not a Harbor traces-export row: no 'conversations'")
    builder = TraceBuilder(FORMAT)
    parts = [str(row.get(key)) for key in ("run_id", "trial_name", "episode") if row.get(key)]
    builder.source_id = ":".join(parts) or None
    for key in ("model", "model_provider", "task", "episode"):
        if isinstance(row.get(key), str) and row[key]:
            builder.info[key] = row[key]
    if isinstance(row.get("agent"), str) and row["agent"]:
        builder.agent_id = row["agent"]
    builder.note_time(parse_timestamp(row.get("date")))
    _read_result(builder, row.get("result"))
    instruction = row.get("instruction")
    if isinstance(instruction, str) and instruction.strip():
        builder.objective, builder.objective_from = instruction.strip(), FROM_TASK_FIELD
    where = at(path, "conversations")
    first_user = True
    conversation = expect_list(row.get("conversations"), where)
    for index, raw_message in enumerate(conversation):
        builder.at_origin(message=index)
        message_path = at(where, index)
        message = expect_dict(raw_message, message_path)
        role = expect_str(message.get("role"), at(message_path, "role"))
        text = content_text(message.get("content"))
        if role == "user" and first_user and builder.objective is None and preamble_kind(text):
            # OpenHands' system prompt sent as the first user message: kept, not the task.
            builder.objective_context.append(text)
        elif role == "user" and first_user:
            first_user = False
            if builder.objective is None:
                match = _TASK.search(text)
                builder.objective = match.group(1).strip() if match else text
                if match:
                    # The template around the task is kept, not lost.
                    builder.objective_context.append(text)
                builder.objective_from = (
                    TEMPLATE_PREFIX + TEMPLATE_TERMINUS_2 if match else FROM_USER_MESSAGE
                )
        elif role == "user":
            if starts_with_any(text, _PARSING_ERRORS):
                builder.observation(text, failed=True, source="harness")
            else:
                builder.observation(text, tool=_open_call(builder))
        elif role == "assistant":
            _read_reply(builder, text, refused=_parse_error_follows(conversation, index))
    default_objective(
        builder, row.get("task") if isinstance(row.get("task"), str) else None, FROM_TASK_DEFINITION
    )
    try:
        return builder.build(row, options)
    except ConversionError as exc:
        raise exc.under(path) from None


def _open_call(builder: TraceBuilder) -> str | None:
    for step in reversed(builder.steps):
        if step.type == "tool_call":
            return None if step.answered else step.tool
    return None


def _parse_error_follows(conversation: list[Any], index: int) -> bool:
    """Whether the harness answered the reply at ``index`` with a parse error."""
    after = conversation[index + 1] if index + 1 < len(conversation) else None
    if not isinstance(after, Mapping) or after.get("role") != "user":
        return False
    return starts_with_any(content_text(after.get("content")), _PARSING_ERRORS)


def _read_reply(builder: TraceBuilder, text: str, *, refused: bool = False) -> None:
    """An assistant reply: the calls it writes as text (Terminus JSON, OpenHands'
    ``<tool_call>`` blocks, ...; :mod:`._text_calls`) and its thoughts. A reply the harness
    could not parse (``refused``) ran nothing: its thoughts are kept, its commands are not
    calls."""
    reply = calls_in_text(text)
    if reply is not None and refused:
        reply.items = [item for item in reply.items if isinstance(item, str)] or [text]
    if reply is None:
        think = _THINK.match(text)
        if think:
            builder.thought(think.group(1))
            text = text[think.end() :]
        builder.thought(text)
        return
    emit_text_reply(builder, reply)


def _read_result(builder: TraceBuilder, result: Any) -> None:
    if result is None or result == "":
        return
    try:
        reward = float(result)
    except (TypeError, ValueError):
        builder.info["exception"] = str(result)
        builder.success = False
        return
    builder.info["reward"] = reward
    builder.success = reward >= SUCCESS_THRESHOLD
