"""The outcome a trace itself reports: its final answer, the signs of failure in it (words
that admit the task was not done, a handoff, a budget or stop reason), whether the task was
completed by the run's own account, whether the run ended on an answer (:func:`answered`) and
within its budget (:func:`within_budget`). Each check returns a :class:`~._checks.Finding`."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from .._schema import ReasoningTrace
from ._checks import (
    DEFAULT_FINAL_TOOLS,
    DEFAULT_HANDOFF_TOOLS,
    DEFAULT_MAX_STEPS,
    DEFAULT_SCRATCH_TOOLS,
    DEFAULT_WRITE_TOOLS,
    Finding,
    state_changing_calls,
)
from ._facts import DEFAULT_READ_ONLY_TOOLS, agent_steps, expected_actions, is_read_only, tool_calls

__all__ = [
    "DEFAULT_BUDGET_PATTERN",
    "DEFAULT_CLOSING_PATTERN",
    "DEFAULT_FAILURE_PATTERN",
    "DEFAULT_HANDOFF_PATTERN",
    "FailureSign",
    "answered",
    "failure_signs",
    "final_answer",
    "task_completed",
    "within_budget",
]

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

#: A user turn matching this (case-insensitive) closes the conversation, so a run may end on
#: it unanswered: tau-bench's user simulator ends with ``###STOP###``; people say goodbye,
#: or only thank the agent.
DEFAULT_CLOSING_PATTERN = (
    r"###STOP###|\b(bye|goodbye|that'?s all|that is all|that'?s everything|that is everything|"
    r"nothing else|have a (nice|good|great) "
    r"day|talk (to you )?soon)\b|^\W*(ok(ay)?\W+|great\W+|perfect\W+)?(thanks?|thank you)\b[^?]{0,60}$"
)

#: Stop reasons that say the conversation ended itself: tau2's ``user_stop`` (the user closed
#: it) and ``agent_stop`` (the agent did), whatever the last turn's words.
_ENDED_ITSELF = frozenset({"user_stop", "agent_stop"})

# Where a trace records why its run stopped: the importers keep it in metadata.kp_import
# (Bedrock stop_reason, Gemini finish_reason, SWE-agent exit_status, tau2 termination_reason);
# a native trace may put it in metadata directly.
_STOP_KEYS = ("stop_reason", "finish_reason", "exit_status", "termination_reason")


@dataclass(frozen=True)
class FailureSign:
    """A sign, in the trace itself, that its run failed: ``kind`` (``success_flag``,
    ``admitted_failure``, ``handoff``, ``unrecovered_error``, ``budget`` or ``unfinished``), a
    one-line ``reason`` and the ``steps`` it is about (none for the success flag or a stop
    reason)."""

    kind: Literal[
        "success_flag", "admitted_failure", "handoff", "unrecovered_error", "budget", "unfinished"
    ]
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
    closing_pattern: str = DEFAULT_CLOSING_PATTERN,
    handoff_tools: Iterable[str] = DEFAULT_HANDOFF_TOOLS,
    write_tools: Iterable[str] = DEFAULT_WRITE_TOOLS,
    read_only_tools: Iterable[str] = DEFAULT_READ_ONLY_TOOLS,
    scratch_tools: Iterable[str] = DEFAULT_SCRATCH_TOOLS,
    final_tools: Iterable[str] = DEFAULT_FINAL_TOOLS,
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
      matches ``budget_pattern``;
    - ``unfinished``: the run ends on an observation no agent step answered (:func:`unfinished`):
      a user turn that does not close the conversation (``closing_pattern``), or, in a
      conversation, the output of a call other than a handoff: the run was cut (tau-bench stops a run at its step limit
      without recording why) or the agent never reported what its last call did.
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
    signs.extend(
        _ending_signs(
            trace, budget_pattern, closing_pattern, handoff_tools, scratch, tuple(final_tools)
        )
    )
    return signs


def _ending_signs(
    trace: ReasoningTrace,
    budget_pattern: str,
    closing_pattern: str,
    handoff_tools: Iterable[str],
    scratch_tools: Iterable[str],
    final_tools: Iterable[str] = DEFAULT_FINAL_TOOLS,
) -> list[FailureSign]:
    """The signs that the run did not get to its end: a budget stop reason, an unfinished end."""
    signs: list[FailureSign] = []
    stop = _stop_reason(trace)
    if stop is not None and re.search(budget_pattern, stop, re.IGNORECASE):
        signs.append(FailureSign("budget", f"the run stopped on its budget ({stop!r})"))
    ending = unfinished(
        trace,
        closing_pattern=closing_pattern,
        handoff_tools=handoff_tools,
        scratch_tools=scratch_tools,
        final_tools=final_tools,
    )
    if ending is not None:
        signs.append(ending)
    return signs


def unfinished(
    trace: ReasoningTrace,
    *,
    closing_pattern: str = DEFAULT_CLOSING_PATTERN,
    handoff_tools: Iterable[str] = DEFAULT_HANDOFF_TOOLS,
    scratch_tools: Iterable[str] = DEFAULT_SCRATCH_TOOLS,
    final_tools: Iterable[str] = DEFAULT_FINAL_TOOLS,
) -> FailureSign | None:
    """The ``unfinished`` sign when the run ends on an observation no agent step followed, else
    ``None``: a user turn that does not match ``closing_pattern`` (a request or a yes the
    agent never answered), or, in a conversation (a trace with user turns), the output of a
    call that is neither a handoff (``handoff_tools``: the conversation goes to a person) nor
    a delivery of the result (``final_tools``: Terminus-2's ``mark_task_complete``) nor a
    failed call (``unrecovered_error`` says that one) nor a scratch tool's: the agent never
    told the user what it did. An autonomous run (no user turn) may end on its last call's
    output (a ``submit``). A run whose outcome carries an answer of its own (a
    ``result_summary`` that is no agent message's copy) has answered, whatever its last step;
    one whose recorded stop reason says the conversation ended itself (tau2's ``user_stop``,
    ``agent_stop``) was not cut."""
    if not trace.steps or trace.steps[-1].type != "observation":
        return None
    if not agent_steps(trace):
        return None
    if (_stop_reason(trace) or "").lower() in _ENDED_ITSELF:
        return None
    summary, copied = final_answer(trace)
    if summary and not copied and trace.outcome.result_summary.strip():
        return None
    last = trace.steps[-1]
    text = (last.content or last.output_summary or "").strip()
    if (last.model_extra or {}).get("source") == "user":
        if re.search(closing_pattern, text, re.IGNORECASE):
            return None
        return FailureSign(
            "unfinished",
            f"the run ends on a user turn no agent step answered (step {last.step_id}: "
            f"{text[:60]!r}): it was cut before its end",
            (last.step_id,),
        )
    if not any((step.model_extra or {}).get("source") == "user" for step in trace.steps):
        return None  # no conversation: an autonomous run may end on its last call's output
    call = next((c for c in tool_calls(trace) if c.result_step == last.step_id), None)
    if call is None or call.failed:
        return None
    if any(
        is_read_only(call.name, tuple(tools))
        for tools in (handoff_tools, scratch_tools, final_tools)
    ):
        return None
    return FailureSign(
        "unfinished",
        f"the run ends on the output of {call.name} (step {last.step_id}): no agent step "
        "reported it, so it was cut before its end",
        (last.step_id,),
    )


def task_completed(
    trace: ReasoningTrace,
    *,
    failure_pattern: str = DEFAULT_FAILURE_PATTERN,
    handoff_pattern: str = DEFAULT_HANDOFF_PATTERN,
    budget_pattern: str = DEFAULT_BUDGET_PATTERN,
    closing_pattern: str = DEFAULT_CLOSING_PATTERN,
    handoff_tools: Iterable[str] = DEFAULT_HANDOFF_TOOLS,
    write_tools: Iterable[str] = DEFAULT_WRITE_TOOLS,
    read_only_tools: Iterable[str] = DEFAULT_READ_ONLY_TOOLS,
    scratch_tools: Iterable[str] = DEFAULT_SCRATCH_TOOLS,
    final_tools: Iterable[str] = DEFAULT_FINAL_TOOLS,
) -> Finding:
    """The trace itself shows no sign that its run failed (:func:`failure_signs`): the outcome
    when no expected actions are given. When the task's expected actions are in
    ``metadata.ground_truth`` they decide what was done (``expected_actions_match``: an answer
    refusing what the policy forbids is then a success, not an admitted failure), so only the
    signs that the run did not get to its end count (``budget``, ``unfinished``): tau-bench
    rewards a run cut at its step limit 0 even when its writes were the expected ones."""
    if expected_actions(trace) is not None:
        ending = _ending_signs(
            trace,
            budget_pattern,
            closing_pattern,
            handoff_tools,
            tuple(scratch_tools),
            tuple(final_tools),
        )
        if not ending:
            return Finding(
                None,
                "the task's expected actions decide the outcome (expected_actions), and the run "
                "got to its end",
            )
        steps = tuple(dict.fromkeys(step for sign in ending for step in sign.steps))
        return Finding(False, "; ".join(sign.reason for sign in ending), steps)
    signs = failure_signs(
        trace,
        failure_pattern=failure_pattern,
        handoff_pattern=handoff_pattern,
        budget_pattern=budget_pattern,
        closing_pattern=closing_pattern,
        handoff_tools=handoff_tools,
        write_tools=write_tools,
        read_only_tools=read_only_tools,
        scratch_tools=scratch_tools,
        final_tools=final_tools,
    )
    if not signs:
        return Finding(
            True,
            "no sign of failure: no false success flag, no admission or handoff in the final "
            "answer, no failed last call, no budget stop, no end left unanswered",
        )
    steps = tuple(dict.fromkeys(step for sign in signs for step in sign.steps))
    return Finding(False, "; ".join(sign.reason for sign in signs), steps)


# -- the end -----------------------------------------------------------------------------------


def answered(
    trace: ReasoningTrace,
    *,
    handoff_tools: Iterable[str] = DEFAULT_HANDOFF_TOOLS,
    final_tools: Iterable[str] = DEFAULT_FINAL_TOOLS,
) -> Finding:
    """The run ends with a non-empty answer to the user: its last agent step is a thought with
    text, a call handing the user over to a person (``handoff_tools``, names or ``fnmatch``
    patterns) or a call delivering the result that did not fail (``final_tools``: ``submit``,
    ``finish``, ``final_result``, ...), or the outcome's ``result_summary`` is an answer of its
    own (not a copy of a thought, which importers make when the source gives no final
    answer), or the recorded exit status says the harness took the run's result
    (``Submitted``: SWE-agent and mini-SWE-agent, whose agent submits by a bash command)."""
    summary = trace.outcome.result_summary.strip()
    thoughts = {(step.content or "").strip() for step in trace.steps if step.type == "thought"}
    if summary and summary not in thoughts:
        return Finding(True, "the outcome's result_summary answers the task")
    stop = _stop_reason(trace)
    if stop is not None and stop.lower().startswith("submitted"):
        return Finding(True, f"the run's harness took its result (exit status {stop})")
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
    if last.tool is not None and is_read_only(last.tool.name, tuple(final_tools)):
        call = next((c for c in tool_calls(trace) if c.step_id == last.step_id), None)
        if call is not None and not call.failed:
            return Finding(
                True,
                f"step {last.step_id} delivers the result ({last.tool.name})",
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
