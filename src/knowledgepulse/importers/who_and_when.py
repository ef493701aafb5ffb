"""Multi-agent conversation logs as Who&When keeps them (``{question, history: [{role, content,
name?}], ...}``: Magentic-One and AG2 CaptainAgent runs) → one ReasoningTrace per record.

- ``question`` → the objective (``kp_import.objective_from`` ``task_field``);
- ``history[i]`` → one step (blank messages skipped), carrying ``message_index`` ``i`` and
  ``origin`` ``{"message": i}`` (where it is in the source) and ``agent``, the agent that wrote it: AG2's ``name``, or the role
  without its parenthesis (Magentic-One's ``Orchestrator (-> WebSurfer)`` is ``Orchestrator``);
- a message of the person (role ``human``, or ``user`` without a ``name``) → a user turn (the
  first, when no ``question`` is given, is the objective); a code executor's message
  (``Computer_terminal``, ``ComputerTerminal``) → an observation, failed when its text says so
  (``exitcode: 1 (execution failed)``); any other agent's message → a thought;
- ``is_correct`` (AG2) → success; ``question_ID`` → the id
  (``kp:trace:who-and-when:<question_ID>``); ``ground_truth`` (the expected answer) →
  ``metadata.ground_truth.answer``; ``level`` → ``kp_import.level``;
- dropped: the human labels (``mistake_agent``, ``mistake_step``, ``mistake_reason``: they are
  what a grader is measured against, never an input to it), ``system_prompt``,
  ``is_corrected``.

A message whose ``role`` is missing or not text, or whose ``content`` is not text, is refused
naming ``history[i].role`` or ``history[i].content``; an unknown role is an agent's name, not an
error.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from knowledgepulse._schema import ReasoningTrace
from knowledgepulse.io._reader import json_type_name

from ._builder import TraceBuilder
from ._objective import FROM_TASK_FIELD
from ._options import ImportOptions, resolve_options
from ._values import ConversionError, at, expect_list

__all__ = ["from_who_and_when", "is_who_and_when_record"]

FORMAT = "who-and-when"
#: The agents whose messages are a tool's output (a code executor), not an agent's words.
EXECUTORS = frozenset({"computer_terminal", "computerterminal"})
_PEOPLE = frozenset({"human", "user"})
# AG2's executor reports "exitcode: 1 (execution failed)"; 0 is "(execution succeeded)".
_EXIT_FAILED = re.compile(r"\bexitcode:\s*[1-9]\d*\b|\(execution failed\)", re.I)
_ROLE = re.compile(r"^\s*(?P<agent>[^()]*?)\s*(?:\((?P<what>.*)\))?\s*$", re.S)


def is_who_and_when_record(record: Any) -> bool:
    """Whether ``record`` is a Who&When log: a ``history`` list of ``{role, content}`` messages
    beside a ``question`` (or the labels)."""
    return (
        isinstance(record, Mapping)
        and isinstance(record.get("history"), list)
        and any(key in record for key in ("question", "mistake_agent", "question_ID"))
    )


def from_who_and_when(
    record: Any, options: ImportOptions | None = None, **overrides: Any
) -> list[ReasoningTrace]:
    """The trace of one Who&When record (a list of records gives one trace each). Raises
    :class:`ConversionError` naming the field (``history[3].role``)."""
    options = resolve_options(options, overrides)
    if isinstance(record, list):
        traces: list[ReasoningTrace] = []
        errors: list[ConversionError] = []
        for index, item in enumerate(record):
            try:
                traces.extend(from_who_and_when(item, options))
            except ConversionError as exc:
                errors.append(exc.under(f"[{index}]"))
        if errors:
            raise ConversionError.merged(errors)
        return traces
    if not isinstance(record, Mapping):
        raise ConversionError("", f"expected a JSON object, got {json_type_name(record)}")
    history = expect_list(record.get("history"), "history")
    builder = TraceBuilder(FORMAT)
    question = record.get("question")
    if isinstance(question, str) and question.strip():
        builder.set_objective(question, FROM_TASK_FIELD)
    # Which message each step came from, and its agent, in step order.
    origins: list[tuple[int, str | None]] = []
    for index, message in enumerate(history):
        builder.at_origin(message=index)
        before = len(builder.steps)
        agent = _add_message(builder, message, f"history[{index}]")
        if len(builder.steps) > before:
            origins.append((index, agent))
    _add_facts(builder, record)
    data = builder.build(record, options).to_dict()
    for step, (index, agent) in zip(data["steps"], origins, strict=True):
        step["message_index"] = index
        if agent is not None:
            step["agent"] = agent
    return [ReasoningTrace.model_validate(data)]


def _add_message(builder: TraceBuilder, message: Any, where: str) -> str | None:
    """One message as a step (none when blank); returns the agent that wrote it (``None``
    for the person)."""
    if not isinstance(message, Mapping):
        raise ConversionError(where, f"expected a message object, got {json_type_name(message)}")
    role = message.get("role")
    if not isinstance(role, str) or not role.strip():
        raise ConversionError(
            at(where, "role"), f"expected the author's role as text, got {role!r:.40}"
        )
    content = message.get("content")
    if content is None:
        content = ""
    if not isinstance(content, str):
        raise ConversionError(at(where, "content"), f"expected text, got {json_type_name(content)}")
    name = message.get("name")
    agent = name.strip() if isinstance(name, str) and name.strip() else None
    if agent is None and role.strip().lower() in _PEOPLE:
        builder.user_message(content)
        return None
    agent = agent or _agent_of(role)
    if agent.lower() in EXECUTORS:
        failed = _EXIT_FAILED.search(content) is not None
        builder.observation(content, tool=agent, failed=failed)
    else:
        builder.thought(content)
    return agent


def _add_facts(builder: TraceBuilder, record: Mapping[str, Any]) -> None:
    """Success, id, expected answer and level, as the record gives them."""
    success = record.get("is_correct")
    if isinstance(success, bool):
        builder.success = success
    source_id = record.get("question_ID")
    if isinstance(source_id, (str, int)) and str(source_id):
        builder.source_id = str(source_id)
    truth = record.get("ground_truth")
    if truth is not None:
        builder.ground_truth = {"answer": truth}
    if record.get("level") is not None:
        builder.info["level"] = str(record.get("level"))


def _agent_of(role: str) -> str:
    """The agent a Magentic-One role names: ``Orchestrator (-> WebSurfer)`` → ``Orchestrator``;
    a role without a name before its parenthesis is kept whole."""
    match = _ROLE.match(role)
    agent = match.group("agent").strip() if match else ""
    return agent or role.strip()
