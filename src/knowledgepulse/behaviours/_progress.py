"""Where a run went wrong when no tool-level ground truth says so: a failed call (recovered or
not), an agent's own report that the run stopped making progress, and a final answer other than
the task's expected one. Checked without a model; each returns a :class:`~._checks.Finding`
naming the steps, so the result's ``first_failing_step`` (and, in a run of several agents,
``first_failing_agent``) can point at them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._schema import ReasoningTrace, Step
from ._checks import Finding
from ._facts import _extra, failed_observations, is_user_turn, tool_calls

__all__ = [
    "DEFAULT_STALL_PATTERN",
    "DEFAULT_TERMINATION_PATTERN",
    "Stall",
    "answer_matches",
    "expected_answer_given",
    "failed_calls",
    "given_answer",
    "made_progress",
    "no_failed_calls",
    "stalls",
]

#: An agent message matching this (case-insensitive) reports that the run is not progressing:
#: Magentic-One's progress ledger (``"is_progress_being_made": {"answer": false}``,
#: ``"is_in_loop": {"answer": true}``) and the words agents write it with in prose.
DEFAULT_STALL_PATTERN = (
    r'"is_progress_being_made"\s*:\s*\{[^{}]*?"answer"\s*:\s*false|'
    r'"is_in_loop"\s*:\s*\{[^{}]*?"answer"\s*:\s*true|'
    r"\b(we are|we're|i am|i'm) (stuck|going (round |around )?in circles)\b|"
    r"\bnot making (any )?progress\b"
)

#: A message that only ends the conversation (AG2's ``TERMINATE``): not an answer.
DEFAULT_TERMINATION_PATTERN = r"^\W*(terminate|exit|done)\W*$"

_LEDGER = re.compile(r'"(\w+)"\s*:\s*\{[^{}]*?"answer"\s*:\s*(\w+)')
# Magentic-One and GAIA-style runs write their answer on a line of its own.
_FINAL_ANSWER = re.compile(r"final answer\s*:\s*(?P<answer>.+)", re.IGNORECASE)


def _agent(step: Step) -> str | None:
    agent = _extra(step, "agent")
    return agent if isinstance(agent, str) and agent else None


# -- failed calls, recovered or not ----------------------------------------------------------------


def failed_calls(trace: ReasoningTrace) -> list[tuple[int | None, int]]:
    """Each failed observation with the agent step it followed from (the call it answered, or in
    a log of messages the agent step just before it, whose code ran): ``(cause, observation)``
    step ids in order, ``cause`` ``None`` when no agent step came before. One pass: a run of
    10^4 steps is read in linear time."""
    failed = {step.step_id for step in failed_observations(trace)}
    # A tool's answer follows from its call (the right one among parallel calls).
    called = {call.result_step: call.step_id for call in tool_calls(trace)}
    found: list[tuple[int | None, int]] = []
    last_agent_step: int | None = None
    for step in trace.steps:
        if step.type != "observation":
            last_agent_step = step.step_id
        elif step.step_id in failed:
            found.append((called.get(step.step_id, last_agent_step), step.step_id))
    return found


def no_failed_calls(trace: ReasoningTrace) -> Finding:
    """No tool call, and no code an agent ran, failed. A failure later recovered still fails
    this check: ``errors_recovered`` weighs the recovery, this one names where the run first
    went wrong. Undetermined without any observation (no call was answered)."""
    observations = [s for s in trace.steps if s.type == "observation" and not is_user_turn(s)]
    if not observations:
        return Finding(None, "the trace has no tool output")
    failed = failed_calls(trace)
    if not failed:
        return Finding(True, f"none of the {len(observations)} tool outputs is an error")
    cause, first = failed[0]
    after = f" (after step {cause})" if cause is not None else ""
    more = f"; {len(failed) - 1} more failed later" if len(failed) > 1 else ""
    steps = tuple(step for pair in failed for step in pair if step is not None)
    return Finding(False, f"the call at step {first} failed{after}{more}", steps)


# -- the run's own word on its progress ------------------------------------------------------------


@dataclass(frozen=True)
class Stall:
    """An agent's report (``report``, a step id) that the run is not progressing, and the step
    it judged (``judged``): the last step before the report written by another agent, or in a
    run of one agent its previous step."""

    report: int
    judged: int
    said: str

    def describe(self) -> str:
        return f"step {self.report} reports no progress ({self.said!r}) after step {self.judged}"


def stalls(trace: ReasoningTrace, *, stall_pattern: str = DEFAULT_STALL_PATTERN) -> list[Stall]:
    """The agent messages (thoughts) reporting that the run stopped making progress
    (``stall_pattern``), each with the step it judged: the latest earlier agent step by another
    agent (without agent names, the latest earlier agent step). One pass over the steps."""
    pattern = re.compile(stall_pattern, re.IGNORECASE)
    found: list[Stall] = []
    # The latest agent step, and the latest one whose agent differs from it (None differs
    # from every name): enough to find, for any author, the latest step by another agent.
    last: tuple[int, str | None] | None = None
    before_last: int | None = None
    for step in trace.steps:
        if step.type == "observation":
            continue
        match = pattern.search(step.content or "") if step.type == "thought" else None
        if match is not None:
            author = _agent(step)
            if last is None:
                judged = None
            elif author is None or last[1] is None or last[1] != author:
                judged = last[0]
            else:
                judged = before_last
            # A ledger entry is shown as its field and answer: is_in_loop: true.
            said = " ".join(_LEDGER.sub(r"\1: \2", match.group(0)).split())[:60]
            found.append(Stall(step.step_id, judged if judged is not None else step.step_id, said))
        agent = _agent(step)
        if last is not None and (agent is None or last[1] is None or agent != last[1]):
            before_last = last[0]
        last = (step.step_id, agent)
    return found


def made_progress(trace: ReasoningTrace, *, stall_pattern: str = DEFAULT_STALL_PATTERN) -> Finding:
    """No agent message reports that the run stopped making progress (:func:`stalls`); the
    steps named are the first judged step and the reports. Undetermined without agent
    messages."""
    messages = [s for s in trace.steps if s.type == "thought" and s.content]
    if not messages:
        return Finding(None, "the trace has no agent message")
    found = stalls(trace, stall_pattern=stall_pattern)
    if not found:
        return Finding(True, f"none of the {len(messages)} agent messages reports a stall")
    first = found[0]
    more = f"; {len(found) - 1} later reports" if len(found) > 1 else ""
    steps = (first.judged, *(stall.report for stall in found))
    return Finding(False, first.describe() + more, steps)


# -- the final answer against the task's expected one ----------------------------------------------


def given_answer(
    trace: ReasoningTrace, *, termination_pattern: str = DEFAULT_TERMINATION_PATTERN
) -> tuple[str, int | None]:
    """The run's answer and its step: the text after the last ``FINAL ANSWER:`` written in an
    agent step (Magentic-One, GAIA); else the outcome's ``result_summary`` when it is an answer
    of its own (not a copy of a thought, which importers make when the source gives no answer);
    else the last agent message that is not only a termination word (``termination_pattern``:
    AG2's ``TERMINATE``). ``("", None)`` when there is none."""
    ending = re.compile(termination_pattern, re.IGNORECASE)
    agents = [step for step in trace.steps if step.type != "observation"]
    for step in reversed(agents):
        found = list(_FINAL_ANSWER.finditer(step.content or ""))
        if found:
            return found[-1].group("answer").strip(), step.step_id
    thoughts = [step for step in agents if step.type == "thought"]
    summary = trace.outcome.result_summary.strip()
    copied = any((step.content or "").strip() == summary for step in thoughts)
    if summary and not copied and not ending.match(summary):
        return summary, None
    for step in reversed(thoughts):
        text = (step.content or "").strip()
        if text and not ending.match(text):
            return text, step.step_id
    return "", None


def _expected(trace: ReasoningTrace) -> str | Finding:
    """The expected answer as text, or the undetermined finding saying why there is none."""
    truth = _extra(trace.metadata, "ground_truth")
    value: Any = truth.get("answer") if isinstance(truth, Mapping) else None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if isinstance(value, str) and value.strip():
        return value.strip()
    if value is None or isinstance(value, str):
        return Finding(None, "the trace has no expected answer in metadata.ground_truth.answer")
    kind = "true or false" if isinstance(value, bool) else type(value).__name__
    return Finding(
        None, f"metadata.ground_truth.answer is {kind}, not a text or a number to compare"
    )


def _plain(text: str) -> str:
    """Lower case, thousands separators and punctuation other than a decimal point dropped,
    spaces collapsed: ``"1,194.00 USD."`` → ``"1194.00 usd"``."""
    text = re.sub(r"(?<=\d),(?=\d{3})", "", text.lower())
    text = re.sub(r"[^\w.]+|(?<!\d)\.|\.(?!\d)", " ", text)
    return " ".join(text.split())


def _numbers(text: str) -> list[float]:
    return [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", _plain(text))]


def answer_matches(answer: str, expected: str) -> bool:
    """Whether ``answer`` gives ``expected``: when that is a number, the answer's last number
    equals it (a message working towards its result states other numbers first); else each of
    its lines appears in the answer as words (case, punctuation and thousands separators
    aside)."""
    wanted = _plain(expected)
    if re.fullmatch(r"-?\d+(?:\.\d+)?", wanted):
        numbers = _numbers(answer)
        return bool(numbers) and numbers[-1] == float(wanted)
    given = f" {_plain(answer)} "
    parts = [_plain(line) for line in expected.splitlines() if _plain(line)]
    return bool(parts) and all(f" {part} " in given for part in parts)


def expected_answer_given(
    trace: ReasoningTrace, *, termination_pattern: str = DEFAULT_TERMINATION_PATTERN
) -> Finding:
    """The run's answer (:func:`given_answer`) gives the task's expected answer
    (``metadata.ground_truth.answer``). A wrong answer names the step giving it and the plan
    the run followed to it (the first agent step), where a run with no earlier failure found
    went wrong. Undetermined without an expected answer."""
    expected = _expected(trace)
    if isinstance(expected, Finding):
        return expected
    answer, step = given_answer(trace, termination_pattern=termination_pattern)
    at = f" (step {step})" if step is not None else ""
    if answer and answer_matches(answer, expected):
        return Finding(True, f"the answer{at} gives the expected {expected[:40]!r}", _ids(step))
    if not answer:
        return Finding(False, f"the run gives no answer; expected {expected[:40]!r}")
    plan = next((s.step_id for s in trace.steps if s.type != "observation"), None)
    followed = f", following the plan of step {plan}" if plan is not None and plan != step else ""
    steps = tuple(dict.fromkeys(s for s in (plan, step) if s is not None))
    return Finding(
        False,
        f"the answer{at} {answer[:60]!r} is not the expected {expected[:40]!r}{followed}",
        steps,
    )


def _ids(step: int | None) -> tuple[int, ...]:
    return () if step is None else (step,)
