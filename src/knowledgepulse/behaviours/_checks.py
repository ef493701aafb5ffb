"""The behaviour checks: each reads one trace and returns a :class:`Finding`.

A finding is a yes, a no, or *undetermined* when the trace lacks what the check needs (no
tool calls, no declared tools, no ground truth, no user turns), with a one-line reason naming
the steps involved. No check raises on a valid trace: what it cannot read it leaves
undetermined.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .._schema import ReasoningTrace
from ..rubrics import Verdict
from ._facts import (
    DEFAULT_READ_ONLY_TOOLS,
    ExpectedAction,
    ToolCall,
    _observation_failed,
    agent_steps,
    canonical_arguments,
    expected_actions,
    expected_outputs,
    failed_observations,
    is_read_only,
    is_user_turn,
    show_call,
    steps_text,
    tool_calls,
    tool_definitions,
    user_turns,
)
from ._schema_check import schema_problems

__all__ = [
    "DEFAULT_BUDGET_PATTERN",
    "DEFAULT_CONSENT_PATTERN",
    "DEFAULT_FAILURE_PATTERN",
    "DEFAULT_HANDOFF_PATTERN",
    "DEFAULT_HANDOFF_TOOLS",
    "DEFAULT_MAX_STEPS",
    "DEFAULT_SCRATCH_TOOLS",
    "DEFAULT_WRITE_TOOLS",
    "FailureSign",
    "Finding",
    "Loop",
    "UnrecoveredError",
    "answered",
    "confirmed_before_write",
    "errors_recovered",
    "expected_actions_match",
    "failure_signs",
    "final_answer",
    "find_loops",
    "known_tools",
    "no_loops",
    "state_changing_calls",
    "task_completed",
    "unconfirmed_writes",
    "unrecovered_errors",
    "valid_arguments",
    "within_budget",
]

#: A user turn consents when it matches this (case-insensitive) and does not open with a
#: refusal (:data:`_REFUSAL`). The words are those tau-bench's simulated users and people in
#: support chats use to say yes.
DEFAULT_CONSENT_PATTERN = (
    r"\b(yes|yeah|yep|yup|confirm(ed|s)?|proceed|go ahead|sure|ok(ay)?|please do|do it|"
    r"correct|that'?s right|sounds good|agreed?|i agree|approved?)\b"
)
_REFUSAL = re.compile(r"^\W*(no|nope|not|don'?t|do not|wait|hold on|stop)\b", re.IGNORECASE)

#: Tools taken to change state, as name patterns: the verbs that name writes in the tool sets
#: seen (tau-bench's airline and retail tools: book_reservation, cancel_pending_order,
#: modify_user_address, exchange_delivered_order_items, send_certificate, ...). A tool named
#: otherwise (``screenshot``, ``web_search``) is not presumed to change anything.
DEFAULT_WRITE_TOOLS: tuple[str, ...] = (
    "add_*",
    "book_*",
    "cancel_*",
    "change_*",
    "create_*",
    "delete_*",
    "edit_*",
    "exchange_*",
    "modify_*",
    "pay_*",
    "post_*",
    "refund_*",
    "remove_*",
    "return_*",
    "send_*",
    "set_*",
    "submit_*",
    "update_*",
    "upgrade_*",
    "write_*",
)

#: Tools that end a conversation by handing the user over to a person (tau-bench's
#: ``transfer_to_human_agents``): the handoff is the run's answer.
DEFAULT_HANDOFF_TOOLS: tuple[str, ...] = ("transfer_to_*",)

#: Tools that only note or compute (tau-bench's ``think`` and ``calculate``): they succeed
#: whatever happened, so calling one after an error is no recovery.
DEFAULT_SCRATCH_TOOLS: tuple[str, ...] = ("think", "calculate")

#: Agent actions (thoughts, tool calls, error recoveries) allowed by ``within_budget``:
#: tau-bench stops a conversation after 30 agent actions (its ``max_num_steps``).
DEFAULT_MAX_STEPS = 30


@dataclass(frozen=True)
class Finding:
    """What a check found: ``passed`` (``None``: undetermined), a one-line ``reason`` naming
    the steps involved, and those ``steps``."""

    passed: bool | None
    reason: str
    steps: tuple[int, ...] = ()

    def verdict(self) -> Verdict:
        """The finding as a rubric :class:`~knowledgepulse.rubrics.Verdict`: no model was asked
        (``samples`` 0); an undetermined finding's reason is the verdict's problem; the steps
        named, in order, are the verdict's ``steps``."""
        steps = sorted(set(self.steps))
        if self.passed is None:
            return Verdict(passed=None, samples=0, problems=[self.reason], steps=steps)
        return Verdict(passed=self.passed, reasoning=self.reason, samples=0, steps=steps)


def _undetermined(reason: str) -> Finding:
    return Finding(None, reason)


# -- loops -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Loop:
    """A loop: one call repeated with identical arguments (``kind="repeat"``), or a cycle of
    calls repeated back to back (``kind="cycle"``). ``tools`` names the calls of one round,
    ``steps`` all the steps involved, ``count`` the repetitions."""

    kind: Literal["repeat", "cycle"]
    tools: tuple[str, ...]
    steps: tuple[int, ...]
    count: int

    def describe(self) -> str:
        if self.kind == "repeat":
            return (
                f"{self.tools[0]} called {self.count} times with identical arguments "
                f"({steps_text(self.steps)})"
            )
        cycle = " → ".join(self.tools)
        return f"cycle {cycle} repeated {self.count} times ({steps_text(self.steps)})"


def find_loops(
    trace: ReasoningTrace,
    *,
    max_repeats: int = 3,
    longest_cycle: int = 3,
    cycle_repeats: int = 3,
) -> list[Loop]:
    """The loops in ``trace``: each tool called with identical arguments ``max_repeats`` times
    or more (anywhere in the trace), and each cycle of 2 to ``longest_cycle`` calls repeated
    ``cycle_repeats`` times in a row (a cycle made of one repeated call is a repeat, not a
    cycle)."""
    calls = tool_calls(trace)
    loops: list[Loop] = []
    by_signature: dict[tuple[str, str], list[ToolCall]] = {}
    for call in calls:
        by_signature.setdefault(call.signature, []).append(call)
    for same in by_signature.values():
        if len(same) >= max_repeats:
            steps = tuple(call.step_id for call in same)
            loops.append(Loop("repeat", (same[0].name,), steps, len(same)))
    signatures = [call.signature for call in calls]
    covered: set[int] = set()
    for length in range(2, longest_cycle + 1):
        start = 0
        while start + length * cycle_repeats <= len(calls):
            block = signatures[start : start + length]
            rounds = 1
            while signatures[start + rounds * length : start + (rounds + 1) * length] == block:
                rounds += 1
            if rounds >= cycle_repeats and len(set(block)) > 1:
                involved = calls[start : start + rounds * length]
                steps = tuple(call.step_id for call in involved)
                if not set(steps) <= covered:
                    covered.update(steps)
                    names = tuple(call.name for call in involved[:length])
                    loops.append(Loop("cycle", names, steps, rounds))
                start += rounds * length
            else:
                start += 1
    return loops


def no_loops(
    trace: ReasoningTrace,
    *,
    max_repeats: int = 3,
    longest_cycle: int = 3,
    cycle_repeats: int = 3,
) -> Finding:
    """No tool called with identical arguments ``max_repeats`` times, no cycle of calls
    repeated ``cycle_repeats`` times (:func:`find_loops`); undetermined without tool calls."""
    calls = tool_calls(trace)
    if not calls:
        return _undetermined("the trace has no tool calls")
    loops = find_loops(
        trace, max_repeats=max_repeats, longest_cycle=longest_cycle, cycle_repeats=cycle_repeats
    )
    if not loops:
        return Finding(True, f"{len(calls)} tool calls, none repeated in a loop")
    steps = tuple(step for loop in loops for step in loop.steps)
    return Finding(False, "; ".join(loop.describe() for loop in loops), steps)


# -- errors ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class UnrecoveredError:
    """A failed observation (``step``) with the call it answered, when there was one, that no
    successful call followed."""

    step: int
    call: ToolCall | None
    #: The agent step the error followed from: the call it answered, else (a log of messages
    #: without tool calls, where an agent's code ran) the agent step just before it.
    cause: int | None = None

    def describe(self) -> str:
        what = f" ({self.call.name} at step {self.call.step_id})" if self.call else ""
        if self.call is None and self.cause is not None:
            what = f" (after step {self.cause})"
        return f"the error at step {self.step}{what}"


def unrecovered_errors(
    trace: ReasoningTrace, *, scratch_tools: Iterable[str] = DEFAULT_SCRATCH_TOOLS
) -> list[UnrecoveredError]:
    """The failed observations not followed, before the end, by a later tool call that
    succeeded (its observation came and was not an error): another call, or the same one
    retried once the cause was gone (a timeout, say). A retry that fails again recovers
    nothing, and neither does a call to one of ``scratch_tools`` (names or ``fnmatch``
    patterns: tools that only note or compute, such as tau-bench's ``think``, which succeed
    whatever happened)."""
    scratch = tuple(scratch_tools)
    calls = tool_calls(trace)
    answered_by = {call.result_step: call for call in calls if call.result_step is not None}
    # Observations that answer no call: the output of code an agent's message ran (a
    # multi-agent log's executor). A later one that did not fail is a recovery too.
    loose = [
        step
        for index, step in enumerate(trace.steps)
        if step.type == "observation"
        and not is_user_turn(step)
        and step.step_id not in answered_by
        and not _observation_failed(trace.steps, index)
    ]
    failures = {step.step_id for step in failed_observations(trace)}
    unrecovered: list[UnrecoveredError] = []
    for index, observation in enumerate(trace.steps):
        if observation.step_id not in failures:
            continue
        failed_call = answered_by.get(observation.step_id)
        recovered = any(
            call.step_id > observation.step_id
            and call.result_step is not None
            and not call.failed
            and not is_read_only(call.name, scratch)
            for call in calls
        ) or any(step.step_id > observation.step_id for step in loose)
        if not recovered:
            cause = failed_call.step_id if failed_call is not None else _agent_before(trace, index)
            unrecovered.append(UnrecoveredError(observation.step_id, failed_call, cause))
    return unrecovered


def _agent_before(trace: ReasoningTrace, index: int) -> int | None:
    """The id of the last agent step before the step at ``index`` (``None`` when none)."""
    for step in reversed(trace.steps[:index]):
        if step.type != "observation":
            return step.step_id
    return None


def errors_recovered(
    trace: ReasoningTrace, *, scratch_tools: Iterable[str] = DEFAULT_SCRATCH_TOOLS
) -> Finding:
    """Every failed observation is followed, before the end, by a later call that succeeds
    (:func:`unrecovered_errors`); undetermined without tool calls or errors."""
    failures = failed_observations(trace)
    if not failures:
        calls = tool_calls(trace)
        if not calls:
            return _undetermined("the trace has no tool calls")
        return Finding(True, f"no failed observation in {len(calls)} tool calls")
    left = unrecovered_errors(trace, scratch_tools=scratch_tools)
    if not left:
        ids = tuple(step.step_id for step in failures)
        return Finding(
            True,
            f"the errors at {steps_text(ids)} were each followed by a call that succeeded",
            ids,
        )
    reason = "; ".join(error.describe() for error in left)
    # The steps: each error and the step it followed from, where the failure began.
    steps = tuple(step for error in left for step in (error.cause, error.step) if step is not None)
    return Finding(False, f"{reason}: not followed by a call that succeeded", steps)


# -- declared tools ----------------------------------------------------------------------------


def known_tools(trace: ReasoningTrace) -> Finding:
    """Every tool called was declared; undetermined when the trace declares no tools or calls
    none."""
    declared = tool_definitions(trace)
    if declared is None:
        return _undetermined("the trace declares no tools")
    calls = tool_calls(trace)
    if not calls:
        return _undetermined("the trace has no tool calls")
    unknown = [call for call in calls if call.name not in declared]
    if not unknown:
        return Finding(
            True, f"all {len(calls)} tool calls use one of the {len(declared)} declared tools"
        )
    names = ", ".join(sorted({call.name for call in unknown}))
    steps = tuple(call.step_id for call in unknown)
    return Finding(False, f"undeclared tool {names} called at {steps_text(steps)}", steps)


def valid_arguments(trace: ReasoningTrace) -> Finding:
    """Each call's arguments match its tool's declared JSON Schema; undetermined when no called
    tool declares one (see :func:`~._schema_check.schema_problems` for the keywords checked)."""
    declared = tool_definitions(trace)
    if declared is None:
        return _undetermined("the trace declares no tools")
    checked = [call for call in tool_calls(trace) if declared.get(call.name) is not None]
    if not checked:
        return _undetermined("no tool called declares an argument schema")
    bad: list[tuple[ToolCall, str]] = []
    for call in checked:
        schema = declared[call.name]
        assert schema is not None  # filtered above
        problems = schema_problems(dict(call.arguments), schema)
        if problems:
            bad.append((call, " and ".join(problems[:2])))
    if not bad:
        return Finding(True, f"the arguments of {len(checked)} calls match their tools' schemas")
    shown = "; ".join(f"step {call.step_id} {call.name}: {problem}" for call, problem in bad[:3])
    more = f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""
    return Finding(False, shown + more, tuple(call.step_id for call, _ in bad))


# -- expected actions --------------------------------------------------------------------------


def expected_actions_match(
    trace: ReasoningTrace, *, read_only_tools: Iterable[str] = DEFAULT_READ_ONLY_TOOLS
) -> Finding:
    """The state-changing calls made equal the expected ones by name and arguments, as a
    multiset (order-free), and what the task expected the agent to tell the user was told;
    undetermined without expected actions in ``metadata.ground_truth``.

    Calls to tools matching ``read_only_tools`` are left out on both sides, and so are calls
    whose observation was an error (a refused write changed nothing). A call matches an
    expected one when its arguments are equal, or give the same arguments with objects inside
    them (a list's items) carrying keys the expected call leaves out: tau-bench's tools read the
    fields they need from such items (``update_reservation_flights`` takes each flight's
    number and date and looks up the rest), so the ground truth gives only those. An expected
    output (tau-bench's ``outputs``, tau2's ``communicate_info``) is told when an agent message
    contains it, compared as tau-bench does: ignoring case and commas ("23,553" tells 23553).

    A pass names the writes and the messages that told the outputs; a failure names the calls
    that were not expected or differ (an expected call not made, or an output never told, is
    a step that does not exist).
    """
    expected = expected_actions(trace)
    if expected is None:
        return _undetermined("the trace has no expected actions in metadata.ground_truth")
    read_only = tuple(read_only_tools)
    wanted = [action for action in expected if not is_read_only(action.name, read_only)]
    made = [
        call
        for call in tool_calls(trace)
        if not call.failed and not is_read_only(call.name, read_only)
    ]
    extra, left = _unmatched(made, wanted)
    outputs = expected_outputs(trace)
    untold, told_steps = _told(trace, outputs)
    made_steps = tuple(call.step_id for call in made)
    if not extra and not left and not untold:
        if not wanted:
            reason = "no state-changing call expected and none made"
        else:
            reason = (
                f"the {len(wanted)} expected state-changing calls were made "
                f"({steps_text(made_steps)})"
            )
        if outputs:
            reason += f"; the {len(outputs)} expected outputs were told"
            if told_steps:
                reason += f" ({steps_text(told_steps)})"
        return Finding(True, reason, tuple(sorted({*made_steps, *told_steps})))
    parts: list[str] = []
    for call in extra:
        twin = next((action for action in left if action.name == call.name), None)
        if twin is not None:
            left.remove(twin)
            differ = _differing_keys(call.arguments, twin.arguments)
            parts.append(
                f"step {call.step_id} {call.name} differs from the expected call in {differ}"
            )
        else:
            parts.append(
                f"step {call.step_id} {show_call(call.name, call.arguments, 60)} was not expected"
            )
    for action in left:
        parts.append(f"expected {show_call(action.name, action.arguments, 60)} was not made")
    for output in untold:
        parts.append(f"expected output {output[:40]!r} was never told to the user")
    return Finding(False, "; ".join(parts), tuple(call.step_id for call in extra))


def _unmatched(
    made: list[ToolCall], wanted: list[ExpectedAction]
) -> tuple[list[ToolCall], list[ExpectedAction]]:
    """The calls made that match no expected call, and the expected calls none matched: equal
    arguments first (as multisets), then arguments that cover the expected ones."""
    missing = Counter(action.signature for action in wanted)
    extra: list[ToolCall] = []
    for call in made:
        if missing[call.signature] > 0:
            missing[call.signature] -= 1
        else:
            extra.append(call)
    left: list[ExpectedAction] = []
    for action in wanted:
        if missing[action.signature] > 0:
            missing[action.signature] -= 1
            left.append(action)
    for call in list(extra):
        twin = next(
            (
                action
                for action in left
                if action.name == call.name and _covers(call.arguments, action.arguments)
            ),
            None,
        )
        if twin is not None:
            left.remove(twin)
            extra.remove(call)
    return extra, left


def _covers(made: Any, expected: Any, *, inside: bool = False) -> bool:
    """Whether a call's arguments match the expected ones: equal, except that an object inside
    them may carry keys the expected one leaves out. At the top level the keys must be the
    same: they are the tool's parameters, and one more may change what the call does."""
    if isinstance(made, Mapping) and isinstance(expected, Mapping):
        if not (made.keys() >= expected.keys() if inside else made.keys() == expected.keys()):
            return False
        return all(_covers(made[key], expected[key], inside=True) for key in expected)
    if isinstance(made, list) and isinstance(expected, list):
        return len(made) == len(expected) and all(
            _covers(x, y, inside=True) for x, y in zip(made, expected)
        )
    return canonical_arguments(made) == canonical_arguments(expected)


def _said(text: str) -> str:
    return text.lower().replace(",", "")


def _told(trace: ReasoningTrace, outputs: list[str]) -> tuple[list[str], list[int]]:
    """The outputs no agent message (nor the result summary) told, and the first message
    that told each of the others (none when only the summary did)."""
    if not outputs:
        return [], []
    said = [
        (step.step_id, _said(step.content or ""))
        for step in trace.steps
        if step.type != "observation"
    ]
    summary = _said(trace.outcome.result_summary)
    untold: list[str] = []
    steps: list[int] = []
    for output in outputs:
        wanted = _said(output)
        step = next((step_id for step_id, text in said if wanted in text), None)
        if step is not None:
            steps.append(step)
        elif wanted not in summary:
            untold.append(output)
    return untold, sorted(set(steps))


def _differing_keys(made: Mapping[str, Any], expected: Mapping[str, Any]) -> str:
    """The argument names whose values differ (or that one side lacks), at most five."""
    keys = sorted(
        (
            str(key)
            for key in {*made, *expected}
            if key not in made
            or key not in expected
            or canonical_arguments(made[key]) != canonical_arguments(expected[key])
        ),
    )
    if not keys:  # equal key by key, yet not as a whole: cannot happen with JSON arguments
        return "its arguments"
    more = f" and {len(keys) - 5} more" if len(keys) > 5 else ""
    return ", ".join(keys[:5]) + more


# -- consent -----------------------------------------------------------------------------------


def unconfirmed_writes(
    trace: ReasoningTrace,
    *,
    write_tools: Iterable[str] = DEFAULT_WRITE_TOOLS,
    read_only_tools: Iterable[str] = DEFAULT_READ_ONLY_TOOLS,
    consent_pattern: str = DEFAULT_CONSENT_PATTERN,
) -> list[ToolCall]:
    """The state-changing calls not preceded by consent: the latest user turn before the call
    must say yes (``consent_pattern``, not opening with a refusal such as "no" or "wait") and
    come after an agent message (the proposal it answers). One yes covers the calls that follow
    it until the user speaks again.

    The state-changing calls (:func:`state_changing_calls`) are those to tools matching
    ``write_tools`` (names or ``fnmatch`` patterns) and to the tools the task's expected
    actions name, unless they match ``read_only_tools``.
    """
    consent = re.compile(consent_pattern, re.IGNORECASE)
    position = {step.step_id: index for index, step in enumerate(trace.steps)}
    unconfirmed: list[ToolCall] = []
    for call in state_changing_calls(
        trace, write_tools=write_tools, read_only_tools=read_only_tools
    ):
        before = trace.steps[: position[call.step_id]]
        turn_index = next(
            (i for i in range(len(before) - 1, -1, -1) if is_user_turn(before[i])), None
        )
        if turn_index is None:
            unconfirmed.append(call)
            continue
        text = before[turn_index].content or ""
        proposed = any(step.type == "thought" for step in before[:turn_index])
        if not (proposed and consent.search(text) and not _REFUSAL.search(text)):
            unconfirmed.append(call)
    return unconfirmed


def state_changing_calls(
    trace: ReasoningTrace,
    *,
    write_tools: Iterable[str] = DEFAULT_WRITE_TOOLS,
    read_only_tools: Iterable[str] = DEFAULT_READ_ONLY_TOOLS,
) -> list[ToolCall]:
    """The calls to tools matching ``write_tools``, or named by the task's expected actions
    (``metadata.ground_truth``), that do not match ``read_only_tools``; failed ones included
    (trying to change state needs consent as much as changing it)."""
    writes = tuple(write_tools)
    read_only = tuple(read_only_tools)
    expected = {action.name for action in expected_actions(trace) or ()}
    return [
        call
        for call in tool_calls(trace)
        if (call.name in expected or is_read_only(call.name, writes))
        and not is_read_only(call.name, read_only)
    ]


def confirmed_before_write(
    trace: ReasoningTrace,
    *,
    write_tools: Iterable[str] = DEFAULT_WRITE_TOOLS,
    read_only_tools: Iterable[str] = DEFAULT_READ_ONLY_TOOLS,
    consent_pattern: str = DEFAULT_CONSENT_PATTERN,
) -> Finding:
    """A user turn consenting between the proposal and each state-changing call
    (:func:`unconfirmed_writes`); undetermined without user turns or state-changing calls."""
    if not user_turns(trace):
        return _undetermined("the trace has no user turns after the task")
    writes = state_changing_calls(trace, write_tools=write_tools, read_only_tools=read_only_tools)
    if not writes:
        return _undetermined("the trace has no state-changing call")
    left = unconfirmed_writes(
        trace,
        write_tools=write_tools,
        read_only_tools=read_only_tools,
        consent_pattern=consent_pattern,
    )
    if not left:
        steps = tuple(call.step_id for call in writes)
        return Finding(
            True, f"the user consented before each state-changing call ({steps_text(steps)})", steps
        )
    steps = tuple(call.step_id for call in left)
    names = ", ".join(dict.fromkeys(call.name for call in left))
    return Finding(
        False,
        f"{names} at {steps_text(steps)} without the user's consent since the proposal",
        steps,
    )


# -- the end -----------------------------------------------------------------------------------


def answered(
    trace: ReasoningTrace, *, handoff_tools: Iterable[str] = DEFAULT_HANDOFF_TOOLS
) -> Finding:
    """The run ends with a non-empty answer to the user: its last agent step is a thought with
    text, or a call handing the user over to a person (``handoff_tools``, names or ``fnmatch``
    patterns), or the outcome's ``result_summary`` is an answer of its own (not a copy of a
    thought, which importers make when the source gives no final answer)."""
    summary = trace.outcome.result_summary.strip()
    thoughts = {(step.content or "").strip() for step in trace.steps if step.type == "thought"}
    if summary and summary not in thoughts:
        return Finding(True, "the outcome's result_summary answers the task")
    agents = agent_steps(trace)
    if not agents:
        return Finding(False, "the agent took no step and gave no result_summary")
    last = agents[-1]
    if last.type == "thought" and (last.content or "").strip():
        return Finding(True, f"step {last.step_id} answers the user", (last.step_id,))
    if last.tool is not None and is_read_only(last.tool.name, tuple(handoff_tools)):
        return Finding(
            True,
            f"step {last.step_id} hands the user over ({last.tool.name})",
            (last.step_id,),
        )
    what = "an empty thought" if last.type == "thought" else f"a {last.type.replace('_', ' ')}"
    return Finding(
        False,
        f"the agent's last step, {last.step_id}, is {what}: no answer follows",
        (last.step_id,),
    )


def within_budget(trace: ReasoningTrace, *, max_steps: int = DEFAULT_MAX_STEPS) -> Finding:
    """At most ``max_steps`` agent actions (thoughts, tool calls, error recoveries); the
    observations, which the agent does not author, are not counted."""
    agents = agent_steps(trace)
    if len(agents) <= max_steps:
        return Finding(True, f"{len(agents)} agent steps, within the budget of {max_steps}")
    over = agents[max_steps]
    return Finding(
        False,
        f"{len(agents)} agent steps, over the budget of {max_steps} from step {over.step_id}",
        (over.step_id,),
    )


# -- the outcome the trace itself reports ------------------------------------------------------

#: A final answer matching this (case-insensitive) admits the task was not done: the words
#: agents and their logs use to report a failure ("could not retrieve", "unable to", "failed
#: to", "incomplete", "without a recommendation"). "Cannot" and "can't" are left out: an
#: answer telling the user what cannot be done (a policy's limit) has done its task.
DEFAULT_FAILURE_PATTERN = (
    r"\b(could ?n[o']?t|was ?n[o']?t able to|were ?n[o']?t able to|unable to|"
    r"failed to|did ?n[o']?t (succeed|complete|finish|work)|gave up|giving up|"
    r"incomplete|unresolved|not (been )?(completed|resolved|finished)|"
    r"without (a |an |any )?(recommendation|answer|result|resolution|solution|fix))\b"
)

#: A final answer matching this (case-insensitive) hands the task to someone else: escalated,
#: transferred, handed over or off, referred to.
DEFAULT_HANDOFF_PATTERN = (
    r"\b(escalat(e|ed|es|ing)|transferr(ed|ing)|hand(ed|ing|s)? (it |this |you |the user )?"
    r"(over|off)|referr(ed|ing) (you |the user |it |this )?to)\b"
)

#: A stop reason matching this (case-insensitive) says the run was cut by a budget: Bedrock's
#: ``max_tokens``, OpenAI's ``length``, Gemini's ``MAX_TOKENS``, SWE-agent's ``exit_cost`` and
#: ``exit_context``, tau2's ``max_steps`` and ``too_many_errors``, a step, turn or time limit.
DEFAULT_BUDGET_PATTERN = (
    r"max_?(tokens|steps|turns|iterations|rounds)|^length$|exit_(cost|context)|budget|"
    r"limit|too_many|time_?out"
)

# Where a trace records why its run stopped: the importers keep it in metadata.kp_import
# (Bedrock stop_reason, Gemini finish_reason, SWE-agent exit_status, tau2 termination_reason);
# a native trace may put it in metadata directly.
_STOP_KEYS = ("stop_reason", "finish_reason", "exit_status", "termination_reason")


@dataclass(frozen=True)
class FailureSign:
    """A sign, in the trace itself, that its run failed: ``kind`` (``success_flag``,
    ``admitted_failure``, ``handoff``, ``unrecovered_error`` or ``budget``), a one-line
    ``reason`` and the ``steps`` it is about (none for the success flag or a stop reason)."""

    kind: Literal["success_flag", "admitted_failure", "handoff", "unrecovered_error", "budget"]
    reason: str
    steps: tuple[int, ...] = ()


def final_answer(trace: ReasoningTrace) -> tuple[str, tuple[int, ...]]:
    """The run's final answer and the step holding it: the outcome's ``result_summary`` when it
    is not empty (with the thought it copies, if any), else the last agent thought's text."""
    summary = trace.outcome.result_summary.strip()
    thoughts = [step for step in trace.steps if step.type == "thought"]
    if summary:
        copied = [s.step_id for s in thoughts if (s.content or "").strip() == summary]
        return summary, tuple(copied[-1:])
    for step in reversed(thoughts):
        if (step.content or "").strip():
            return (step.content or "").strip(), (step.step_id,)
    return "", ()


def _success_flag_given(trace: ReasoningTrace) -> bool:
    """Whether ``metadata.success`` came from the source (not defaulted on import)."""
    imported = (trace.metadata.model_extra or {}).get("kp_import")
    listed = imported.get("defaulted") if isinstance(imported, Mapping) else None
    return not (isinstance(listed, (list, tuple)) and "success" in listed)


def _stop_reason(trace: ReasoningTrace) -> str | None:
    metadata = trace.metadata.model_extra or {}
    imported = metadata.get("kp_import")
    for place in (imported if isinstance(imported, Mapping) else {}, metadata):
        for key in _STOP_KEYS:
            value = place.get(key)
            if isinstance(value, str) and value.strip():
                return value.strip()
    return None


def failure_signs(
    trace: ReasoningTrace,
    *,
    failure_pattern: str = DEFAULT_FAILURE_PATTERN,
    handoff_pattern: str = DEFAULT_HANDOFF_PATTERN,
    budget_pattern: str = DEFAULT_BUDGET_PATTERN,
    handoff_tools: Iterable[str] = DEFAULT_HANDOFF_TOOLS,
    write_tools: Iterable[str] = DEFAULT_WRITE_TOOLS,
    read_only_tools: Iterable[str] = DEFAULT_READ_ONLY_TOOLS,
    scratch_tools: Iterable[str] = DEFAULT_SCRATCH_TOOLS,
) -> list[FailureSign]:
    """The signs in ``trace`` that its run failed, in this order:

    - ``success_flag``: ``metadata.success`` is false and came from the source (a success
      defaulted on import, listed in ``kp_import.defaulted``, says nothing);
    - ``admitted_failure``: the final answer (:func:`final_answer`) matches ``failure_pattern``;
    - ``handoff``: the run hands the task over (its final answer matches ``handoff_pattern``,
      or its last agent step calls one of ``handoff_tools``) without a state-changing call
      having succeeded (``write_tools``, less ``read_only_tools``);
    - ``unrecovered_error``: the run's last tool call (other than ``scratch_tools``) failed
      and nothing succeeded after it;
    - ``budget``: the recorded stop reason (``stop_reason``, ``finish_reason``,
      ``exit_status`` or ``termination_reason``, in ``metadata.kp_import`` or ``metadata``)
      matches ``budget_pattern``.
    """
    signs: list[FailureSign] = []
    if trace.metadata.success is False and _success_flag_given(trace):
        signs.append(FailureSign("success_flag", "the trace's own metadata.success is false"))
    answer, answer_steps = final_answer(trace)
    admitted = re.search(failure_pattern, answer, re.IGNORECASE) if answer else None
    if admitted:
        signs.append(
            FailureSign(
                "admitted_failure",
                f"the final answer admits failure ({admitted.group(0)!r}: {answer[:60]!r})",
                answer_steps,
            )
        )
    calls = tool_calls(trace)
    writes = {
        call.step_id
        for call in state_changing_calls(
            trace, write_tools=write_tools, read_only_tools=read_only_tools
        )
        if not call.failed and call.result_step is not None
    }
    agents = agent_steps(trace)
    last = agents[-1] if agents else None
    handed = re.search(handoff_pattern, answer, re.IGNORECASE) if answer else None
    if not writes:
        if (
            last is not None
            and last.tool is not None
            and is_read_only(last.tool.name, tuple(handoff_tools))
        ):
            signs.append(
                FailureSign(
                    "handoff",
                    f"the run ends handing the user over ({last.tool.name} at step "
                    f"{last.step_id}) without a state-changing call having succeeded",
                    (last.step_id,),
                )
            )
        elif handed:
            signs.append(
                FailureSign(
                    "handoff",
                    f"the final answer hands the task over ({handed.group(0)!r}) without a "
                    "state-changing call having succeeded",
                    answer_steps,
                )
            )
    scratch = tuple(scratch_tools)
    working = [call for call in calls if not is_read_only(call.name, scratch)]
    if working and working[-1].failed:
        # Only a call answered by an error: a log that ends on a call with no answer yet (a PR
        # opened as the last step) has not shown that call failing.
        ending = working[-1]
        signs.append(
            FailureSign(
                "unrecovered_error",
                f"the run's last tool call, {ending.name} at step {ending.step_id}, failed "
                f"(step {ending.result_step}) and nothing succeeded after it",
                (ending.result_step if ending.result_step is not None else ending.step_id,),
            )
        )
    stop = _stop_reason(trace)
    if stop is not None and re.search(budget_pattern, stop, re.IGNORECASE):
        signs.append(FailureSign("budget", f"the run stopped on its budget ({stop!r})"))
    return signs


def task_completed(
    trace: ReasoningTrace,
    *,
    failure_pattern: str = DEFAULT_FAILURE_PATTERN,
    handoff_pattern: str = DEFAULT_HANDOFF_PATTERN,
    budget_pattern: str = DEFAULT_BUDGET_PATTERN,
    handoff_tools: Iterable[str] = DEFAULT_HANDOFF_TOOLS,
    write_tools: Iterable[str] = DEFAULT_WRITE_TOOLS,
    read_only_tools: Iterable[str] = DEFAULT_READ_ONLY_TOOLS,
    scratch_tools: Iterable[str] = DEFAULT_SCRATCH_TOOLS,
) -> Finding:
    """The trace itself shows no sign that its run failed (:func:`failure_signs`): the outcome
    when no expected actions are given. Undetermined when the task's expected actions are in
    ``metadata.ground_truth``: they decide the outcome (``expected_actions_match``), and an
    answer refusing what the policy forbids is then a success, not an admitted failure."""
    if expected_actions(trace) is not None:
        return _undetermined("the task's expected actions decide the outcome (expected_actions)")
    signs = failure_signs(
        trace,
        failure_pattern=failure_pattern,
        handoff_pattern=handoff_pattern,
        budget_pattern=budget_pattern,
        handoff_tools=handoff_tools,
        write_tools=write_tools,
        read_only_tools=read_only_tools,
        scratch_tools=scratch_tools,
    )
    if not signs:
        return Finding(
            True,
            "no sign of failure: no false success flag, no admission or handoff in the final "
            "answer, no failed last call, no budget stop",
        )
    steps = tuple(dict.fromkeys(step for sign in signs for step in sign.steps))
    return Finding(False, "; ".join(sign.reason for sign in signs), steps)
