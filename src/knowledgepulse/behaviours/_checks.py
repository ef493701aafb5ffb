"""The behaviour checks: each reads one trace and returns a :class:`Finding`.

A finding is a yes, a no, or *undetermined* when the trace lacks what the check needs (no
tool calls, no declared tools, no ground truth, no user turns), with a one-line reason naming
the steps involved. No check raises on a valid trace: what it cannot read it leaves
undetermined.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from .._schema import ReasoningTrace
from ..rubrics import Verdict
from ._facts import (
    DEFAULT_READ_ONLY_TOOLS,
    ToolCall,
    _observation_failed,
    expected_actions,
    failed_observations,
    is_read_only,
    is_user_turn,
    steps_text,
    tool_calls,
    tool_definitions,
    user_turns,
)
from ._schema_check import schema_problems
from ._tools_file import schema_problem

__all__ = [
    "DEFAULT_CONSENT_PATTERN",
    "DEFAULT_FINAL_TOOLS",
    "DEFAULT_HANDOFF_TOOLS",
    "DEFAULT_MAX_STEPS",
    "DEFAULT_PAYMENT_ARGUMENTS",
    "DEFAULT_PAYMENT_PATTERN",
    "DEFAULT_SCRATCH_TOOLS",
    "DEFAULT_WRITE_TOOLS",
    "Finding",
    "Loop",
    "UnrecoveredError",
    "confirmed_before_write",
    "errors_recovered",
    "find_loops",
    "known_tools",
    "no_loops",
    "state_changing_calls",
    "unchosen_payments",
    "unconfirmed_writes",
    "unrecovered_errors",
    "valid_arguments",
]

#: A user turn consents when it matches this (case-insensitive) and does not open with a
#: refusal (:data:`_REFUSAL`). The words are those tau-bench's simulated users and people in
#: support chats use to say yes.
DEFAULT_CONSENT_PATTERN = (
    r"\b(yes|yeah|yep|yup|confirm(ed|s)?|proceed|go ahead|sure|ok(ay)?|please do|do it|"
    r"correct|that'?s right|sounds good|agreed?|i agree|approved?)\b"
)
_REFUSAL = re.compile(r"^\W*(no|nope|not|don'?t|do not|wait|hold on|stop)\b", re.IGNORECASE)

#: The arguments of a write that say how it pays or refunds, as name patterns (tau-bench's
#: ``payment_id``, ``payment_method_id``, ``payment_methods``). The user chooses the means of
#: payment: tau-bench's airline and retail policies have the agent ask for it, and a yes to a
#: proposal that never said how it pays does not choose it.
DEFAULT_PAYMENT_ARGUMENTS: tuple[str, ...] = ("*payment*",)

#: A user turn matching this (case-insensitive) names a means of payment, as do the words of
#: the payment's own id ("credit card" for ``credit_card_7``) and the id itself.
DEFAULT_PAYMENT_PATTERN = (
    r"\b(pay|paid|paying|payment|payments|card|cards|paypal|gift|certificate|voucher|cash|"
    r"wallet)\b"
)

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

#: Tools an autonomous agent delivers its result with, as name patterns: SWE-agent's
#: ``submit`` (its output is the patch), OpenHands' ``finish``, pydantic-ai's
#: ``final_result`` (the structured answer), Cline's ``attempt_completion``, Terminus-2's
#: ``mark_task_complete``. A run ending on a call of one that did not fail has answered.
DEFAULT_FINAL_TOOLS: tuple[str, ...] = (
    "submit",
    "submit_*",
    "finish",
    "final_result",
    "final_answer",
    "attempt_completion",
    "complete_task",
    "*task_complete",
)

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
    tool declares one (see :func:`~._schema_check.schema_problems` for the keywords checked).
    A declared schema that is not a JSON Schema (a log's own tool list may hold one) checks
    nothing: its calls are left out, and the reason says so."""
    declared = tool_definitions(trace)
    if declared is None:
        return _undetermined("the trace declares no tools")
    called = [call for call in tool_calls(trace) if declared.get(call.name) is not None]
    if not called:
        return _undetermined("no tool called declares an argument schema")
    broken = {
        name: problem
        for name in dict.fromkeys(call.name for call in called)
        if (problem := schema_problem(declared[name], "parameters"))
    }
    checked = [call for call in called if call.name not in broken]
    unchecked = ""
    if broken:
        name, problem = next(iter(broken.items()))
        skipped = len(called) - len(checked)
        unchecked = (
            f"{skipped} call{'s' if skipped > 1 else ''} to a tool whose schema is not a JSON "
            f"Schema not checked ({name}: {problem})"
        )
    if not checked:
        return _undetermined(f"no tool called declares a valid argument schema ({name}: {problem})")
    bad: list[tuple[ToolCall, str]] = []
    for call in checked:
        problems = schema_problems(dict(call.arguments), declared[call.name])
        if problems:
            bad.append((call, " and ".join(problems[:2])))
    if not bad:
        passed = f"the arguments of {len(checked)} calls match their tools' schemas"
        return Finding(True, "; ".join(filter(None, (passed, unchecked))))
    shown = "; ".join(f"step {call.step_id} {call.name}: {problem}" for call, problem in bad[:3])
    more = f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""
    reason = "; ".join(filter(None, (shown + more, unchecked)))
    return Finding(False, reason, tuple(call.step_id for call, _ in bad))


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


def unchosen_payments(
    trace: ReasoningTrace,
    *,
    write_tools: Iterable[str] = DEFAULT_WRITE_TOOLS,
    read_only_tools: Iterable[str] = DEFAULT_READ_ONLY_TOOLS,
    payment_arguments: Iterable[str] = DEFAULT_PAYMENT_ARGUMENTS,
    payment_pattern: str = DEFAULT_PAYMENT_PATTERN,
) -> list[tuple[ToolCall, str, str]]:
    """(call, argument, value): the state-changing calls that pay or refund by a means the
    user never chose. A call's argument matching ``payment_arguments`` (name patterns) with a
    value is chosen when the task or a user turn before the call names a means of payment:
    the value itself, the words of its id ("credit card" for ``credit_card_7``) or
    ``payment_pattern`` (card, gift, paypal, payment, paid, ...)."""
    patterns = tuple(payment_arguments)
    if not patterns:
        return []
    named = re.compile(payment_pattern, re.IGNORECASE)
    writes = {
        call.step_id: call
        for call in state_changing_calls(
            trace, write_tools=write_tools, read_only_tools=read_only_tools
        )
    }
    # What the user said so far, grown turn by turn: each step is read once, so a run of 10^4
    # writes is checked in linear time.
    said = (trace.task.objective or "").lower()
    chosen = bool(named.search(said))
    found: list[tuple[ToolCall, str, str]] = []
    for step in trace.steps:
        if is_user_turn(step):
            turn = (step.content or "").lower()
            said += " " + turn
            chosen = chosen or bool(named.search(turn))
        call = writes.get(step.step_id)
        if call is None or chosen:
            continue
        for key, value in call.arguments.items():
            if not is_read_only(key, patterns):
                continue
            unnamed = next(
                (text for text in _payment_texts(value) if not _said_in(text, said)), None
            )
            if unnamed is not None:
                found.append((call, key, unnamed))
                break
    return found


def _said_in(text: str, said: str) -> bool:
    """Whether ``said`` names ``text``: the text itself, or the words of an id (``credit
    card`` for ``credit_card_7``)."""
    words = " ".join(re.findall(r"[a-z]+", text))
    return text in said or bool(words and words in said)


def _payment_texts(value: object) -> list[str]:
    """The strings an argument's value holds, lower-cased: a string itself, the strings inside
    a list or object (tau-bench's ``payment_methods: [{payment_id, amount}]``)."""
    if isinstance(value, str):
        return [value.strip().lower()] if value.strip() else []
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return [text for item in value for text in _payment_texts(item)]
    return []


def confirmed_before_write(
    trace: ReasoningTrace,
    *,
    write_tools: Iterable[str] = DEFAULT_WRITE_TOOLS,
    read_only_tools: Iterable[str] = DEFAULT_READ_ONLY_TOOLS,
    consent_pattern: str = DEFAULT_CONSENT_PATTERN,
    payment_arguments: Iterable[str] = DEFAULT_PAYMENT_ARGUMENTS,
    payment_pattern: str = DEFAULT_PAYMENT_PATTERN,
) -> Finding:
    """A user turn consenting between the proposal and each state-changing call
    (:func:`unconfirmed_writes`), and a means of payment the user chose for each call that
    pays or refunds (:func:`unchosen_payments`); undetermined without user turns or
    state-changing calls."""
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
    unpaid = unchosen_payments(
        trace,
        write_tools=write_tools,
        read_only_tools=read_only_tools,
        payment_arguments=payment_arguments,
        payment_pattern=payment_pattern,
    )
    if not left and not unpaid:
        steps = tuple(call.step_id for call in writes)
        return Finding(
            True, f"the user consented before each state-changing call ({steps_text(steps)})", steps
        )
    parts: list[str] = []
    if left:
        names = ", ".join(dict.fromkeys(call.name for call in left))
        at = steps_text(tuple(call.step_id for call in left))
        parts.append(f"{names} at {at} without the user's consent since the proposal")
    for call, key, value in unpaid:
        parts.append(
            f"{call.name} at step {call.step_id} pays with {value[:40]!r} ({key}), a means of "
            "payment no user turn named"
        )
    steps = tuple(sorted({call.step_id for call in left} | {call.step_id for call, _, _ in unpaid}))
    return Finding(False, "; ".join(parts), steps)
