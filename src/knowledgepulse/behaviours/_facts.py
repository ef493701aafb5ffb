"""What the behaviour checks read from a trace: tool calls and their results, user turns,
declared tools and the task's expected actions.

Everything here tolerates any valid :class:`~knowledgepulse.ReasoningTrace`: a field of an
unexpected shape (a ground truth whose ``actions`` is not a list, a tool definition without a
name) counts as absent, never as an error, so a criterion that needs it is undetermined.
"""

from __future__ import annotations

import fnmatch
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from .._schema import ReasoningTrace, Step

__all__ = [
    "DEFAULT_READ_ONLY_TOOLS",
    "USER_SOURCE",
    "ExpectedAction",
    "ToolCall",
    "agent_steps",
    "canonical_arguments",
    "expected_actions",
    "expected_outputs",
    "failed_observations",
    "is_read_only",
    "reward_basis",
    "show_call",
    "steps_text",
    "tool_calls",
    "tool_definitions",
    "user_turns",
]

#: The ``source`` the importers give an observation that is a later user message.
USER_SOURCE = "user"

#: Tools taken to change nothing, as name patterns (``fnmatch``: ``get_*``). Reads are left out
#: of ``expected_actions`` (a read in another order, or one more lookup, changes no outcome)
#: and need no consent (``confirmed_before_write``). The prefixes are the verbs that name reads
#: in the tool sets seen (tau-bench's airline and retail tools, MCP servers); ``calculate`` and
#: ``think`` are tau-bench's scratch tools; ``transfer_to_*`` hands the user over to a person:
#: it changes no data, and its free-text summary is never worded as the ground truth's is.
DEFAULT_READ_ONLY_TOOLS: tuple[str, ...] = (
    "get_*",
    "search_*",
    "list_*",
    "find_*",
    "read_*",
    "lookup_*",
    "fetch_*",
    "query_*",
    "check_*",
    "calculate",
    "think",
    "transfer_to_*",
)

# Where a trace may carry the tools it declared: ATIF's agent.tool_definitions lands in
# metadata.kp_import.tool_definitions; a native trace may put them in metadata directly.
_DEFINITION_PLACES: tuple[tuple[str, ...], ...] = (
    ("kp_import", "tool_definitions"),
    ("tool_definitions",),
    ("tools",),
)


@dataclass(frozen=True)
class ToolCall:
    """One tool call: its step, tool name and arguments, and the observation that answered it.

    ``result_step`` is the id of the observation that answered the call (``None`` when none
    came before the next agent action or the end); ``failed`` whether that observation was an
    error.
    """

    step_id: int
    name: str
    arguments: Mapping[str, Any]
    result_step: int | None = None
    failed: bool = False

    @cached_property
    def signature(self) -> tuple[str, str]:
        """(name, canonical arguments): equal for two calls of one tool with equal arguments."""
        # Cached: loops, expected actions and consent all compare calls by it.
        return self.name, canonical_arguments(self.arguments)


@dataclass(frozen=True)
class ExpectedAction:
    """An action the task expected: a tool name and its arguments (from the ground truth);
    ``compare_args``, when the ground truth names them (tau2), the arguments a call must match
    (the others are the reference run's own choices)."""

    name: str
    arguments: Mapping[str, Any]
    compare_args: tuple[str, ...] | None = None

    def matched_by(self, call: ToolCall) -> bool:
        """Whether ``call`` is this action as tau2's ``compare_with_tool_call`` decides: the
        same tool, and the same values on ``compare_args`` (on all of the call's arguments
        when it names none)."""
        if call.name != self.name:
            return False
        keys = set(call.arguments) if self.compare_args is None else set(self.compare_args)
        made = {k: v for k, v in call.arguments.items() if k in keys}
        wanted = {k: v for k, v in self.arguments.items() if k in keys}
        return canonical_arguments(made) == canonical_arguments(wanted)

    @property
    def signature(self) -> tuple[str, str]:
        return self.name, canonical_arguments(self.arguments)


def _extra(model: Any, key: str) -> Any:
    extra = getattr(model, "model_extra", None) or {}
    return extra.get(key)


def is_user_turn(step: Step) -> bool:
    """Whether the step is a later user message (an observation marked ``source: user``)."""
    return step.type == "observation" and _extra(step, "source") == USER_SOURCE


def is_failed(step: Step) -> bool:
    """Whether the step is an observation the source flagged as an error (``is_error``)."""
    return step.type == "observation" and _extra(step, "is_error") is True


def user_turns(trace: ReasoningTrace) -> list[Step]:
    """The user's messages after the task's first one (which is the objective), in order."""
    return [step for step in trace.steps if is_user_turn(step)]


def agent_steps(trace: ReasoningTrace) -> list[Step]:
    """The steps the agent authored: thoughts, tool calls and error recoveries."""
    return [step for step in trace.steps if step.type != "observation"]


def tool_calls(trace: ReasoningTrace) -> list[ToolCall]:
    """Every tool call (``tool_call`` and ``error_recovery`` steps that name a tool), in order,
    each with the observation that answered it.

    An observation answers the latest call before it that has no answer yet, when no agent
    action came in between other than further calls (parallel calls are answered in order). A
    user turn answers no call. An observation that follows an error_recovery step directly is
    not failed unless flagged: the recovery is the agent's own next action.
    """
    calls: list[dict[str, Any]] = []
    waiting: list[int] = []
    steps = trace.steps
    for index, step in enumerate(steps):
        if step.type in ("tool_call", "error_recovery") and step.tool is not None:
            calls.append(
                {
                    "step_id": step.step_id,
                    "name": step.tool.name,
                    "arguments": step.input or {},
                    "result_step": None,
                    "failed": False,
                }
            )
            waiting.append(len(calls) - 1)
        elif step.type == "observation" and not is_user_turn(step):
            if waiting:
                # An observation naming its tool answers that tool's oldest open call.
                named = step.tool.name if step.tool is not None else None
                position = next((i for i, w in enumerate(waiting) if calls[w]["name"] == named), 0)
                call = calls[waiting.pop(position)]
                call["result_step"] = step.step_id
                call["failed"] = _observation_failed(steps, index)
        else:
            # A thought or a user turn: a call still unanswered stays so for good.
            waiting.clear()
    return [ToolCall(**call) for call in calls]


def _observation_failed(steps: Sequence[Step], index: int) -> bool:
    """Flagged ``is_error``, or (in a native trace, which has no flag) followed at once by an
    ``error_recovery`` step: the agent itself says the observation was a failure."""
    if is_failed(steps[index]):
        return True
    following = steps[index + 1] if index + 1 < len(steps) else None
    return following is not None and following.type == "error_recovery"


def failed_observations(trace: ReasoningTrace) -> list[Step]:
    """The observations that were errors (see :func:`tool_calls` for how one is recognised)."""
    steps = trace.steps
    return [
        step
        for index, step in enumerate(steps)
        if step.type == "observation"
        and not is_user_turn(step)
        and _observation_failed(steps, index)
    ]


def tool_definitions(trace: ReasoningTrace) -> dict[str, Mapping[str, Any] | None] | None:
    """The tools the trace declares, by name, each with its JSON Schema for the arguments
    (``None`` when the definition gives none); ``None`` when the trace declares no tools.

    Read from ``metadata.kp_import.tool_definitions`` (ATIF), ``metadata.tool_definitions`` or
    ``metadata.tools``; a definition is OpenAI's ``{"type": "function", "function": {"name",
    "parameters"}}`` or a flat ``{"name", "parameters" | "input_schema" | "inputSchema"}``
    (Anthropic, MCP).
    """
    metadata = trace.metadata.model_extra or {}
    for place in _DEFINITION_PLACES:
        value: Any = metadata
        for key in place:
            value = value.get(key) if isinstance(value, Mapping) else None
        if isinstance(value, Sequence) and not isinstance(value, (str, bytes)) and value:
            found: dict[str, Mapping[str, Any] | None] = {}
            for definition in value:
                named = _definition(definition)
                if named is not None:
                    found[named[0]] = named[1]
            if found:
                return found
    return None


def _definition(value: Any) -> tuple[str, Mapping[str, Any] | None] | None:
    if not isinstance(value, Mapping):
        return None
    inner = value.get("function")
    body = inner if isinstance(inner, Mapping) else value
    name = body.get("name")
    if not isinstance(name, str) or not name:
        return None
    for key in ("parameters", "input_schema", "inputSchema"):
        schema = body.get(key)
        if isinstance(schema, Mapping):
            return name, schema
    return name, None


def expected_actions(trace: ReasoningTrace) -> list[ExpectedAction] | None:
    """The actions the task expected, from ``metadata.ground_truth``; ``None`` when it gives
    none (no ground truth, no list of actions, or an action without a name).

    The list is looked for at ``actions``, ``task.actions`` (tau-bench's ``info``),
    ``evaluation_criteria.actions`` and ``task.evaluation_criteria.actions`` (tau2); each action
    has a ``name`` and its arguments under ``kwargs`` (tau-bench) or ``arguments`` (tau2).
    Actions tau2 expects of the user (``requestor: "user"``) are not the agent's and are left
    out. An empty list is an answer: the task expected no action.
    """
    truth = _extra(trace.metadata, "ground_truth")
    if not isinstance(truth, Mapping):
        return None
    for path in (
        ("actions",),
        ("task", "actions"),
        ("evaluation_criteria", "actions"),
        ("task", "evaluation_criteria", "actions"),
    ):
        value: Any = truth
        for key in path:
            value = value.get(key) if isinstance(value, Mapping) else None
        if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
            return _actions(value)
    return None


def expected_outputs(trace: ReasoningTrace) -> list[str]:
    """What the task expected the agent to tell the user, from ``metadata.ground_truth``:
    ``outputs`` or ``task.outputs`` (tau-bench), ``evaluation_criteria.communicate_info`` or
    ``task.evaluation_criteria.communicate_info`` (tau2); the strings of the first list found,
    empty when there is none."""
    truth = _extra(trace.metadata, "ground_truth")
    if not isinstance(truth, Mapping):
        return []
    for path in (
        ("outputs",),
        ("task", "outputs"),
        ("evaluation_criteria", "communicate_info"),
        ("task", "evaluation_criteria", "communicate_info"),
    ):
        value: Any = truth
        for key in path:
            value = value.get(key) if isinstance(value, Mapping) else None
        if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
            return [item for item in value if isinstance(item, str) and item.strip()]
    return []


def _actions(items: Iterable[Any]) -> list[ExpectedAction] | None:
    actions: list[ExpectedAction] = []
    for item in items:
        if not isinstance(item, Mapping):
            return None
        name = item.get("name")
        if not isinstance(name, str) or not name:
            return None
        if item.get("requestor") == "user":
            continue
        arguments = item.get("kwargs", item.get("arguments"))
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, Mapping):
            return None
        compare = item.get("compare_args")
        compared = (
            tuple(str(key) for key in compare)
            if isinstance(compare, Sequence) and not isinstance(compare, (str, bytes))
            else None
        )
        actions.append(ExpectedAction(name, arguments, compared))
    return actions


def reward_basis(trace: ReasoningTrace) -> tuple[str, ...] | None:
    """What the task's reward is gated on (tau2's ``evaluation_criteria.reward_basis``:
    ``DB``, ``ACTION``, ``COMMUNICATE``, ``ENV_ASSERTION``, ``NL_ASSERTION``), upper-cased;
    ``None`` when the ground truth names none (tau-bench: the database and the outputs)."""
    truth = _extra(trace.metadata, "ground_truth")
    for path in (("evaluation_criteria",), ("task", "evaluation_criteria")):
        value: Any = truth
        for key in path:
            value = value.get(key) if isinstance(value, Mapping) else None
        basis = value.get("reward_basis") if isinstance(value, Mapping) else None
        if isinstance(basis, Sequence) and not isinstance(basis, (str, bytes)):
            return tuple(str(item).upper() for item in basis)
    return None


def is_read_only(name: str, read_only_tools: Iterable[str]) -> bool:
    """Whether ``name`` matches one of the read-only patterns (``fnmatch``, case-sensitive)."""
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in read_only_tools)


def canonical_arguments(arguments: Any) -> str:
    """Arguments as canonical JSON: keys sorted, ``2.0`` written as ``2`` (tools and ground
    truths disagree on whether an amount is an int), anything unserialisable as its repr."""
    try:
        return json.dumps(
            _normalised(arguments), sort_keys=True, separators=(",", ":"), ensure_ascii=False
        )
    except (TypeError, ValueError, RecursionError):
        return repr(arguments)


def _normalised(value: Any) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {str(key): _normalised(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normalised(item) for item in value]
    return value


def show_call(name: str, arguments: Mapping[str, Any], width: int = 80) -> str:
    """``name(key=value, ...)`` for a reason, cut to ``width`` characters."""
    parts = []
    for key, value in arguments.items():
        shown = value if isinstance(value, str) else canonical_arguments(value)
        parts.append(f"{key}={shown}")
    text = f"{name}({', '.join(parts)})"
    return text if len(text) <= width else text[: width - 1] + "…"


def steps_text(step_ids: Iterable[int]) -> str:
    """``step 4`` or ``steps 4, 9, 12`` (at most 8 listed, then the count of the rest)."""
    ids = list(dict.fromkeys(step_ids))
    if len(ids) == 1:
        return f"step {ids[0]}"
    shown = ", ".join(str(step_id) for step_id in ids[:8])
    if len(ids) > 8:
        shown += f" and {len(ids) - 8} more"
    return f"steps {shown}"
