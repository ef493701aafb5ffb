"""Whether the run made the actions its ground truth expects (``metadata.ground_truth``):
each expected call made with arguments that cover the expected ones, each expected output
told to the user. Returns a :class:`~._checks.Finding`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from .._schema import ReasoningTrace
from ._checks import Finding
from ._facts import (
    DEFAULT_READ_ONLY_TOOLS,
    ExpectedAction,
    ToolCall,
    canonical_arguments,
    expected_actions,
    expected_outputs,
    is_read_only,
    show_call,
    steps_text,
    tool_calls,
)

__all__ = ["expected_actions_match"]


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
        return Finding(None, "the trace has no expected actions in metadata.ground_truth")
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
