"""Whether the run made the actions its ground truth expects (``metadata.ground_truth``):
each expected call made with arguments that cover the expected ones, each expected output
told to the user. Returns a :class:`~._checks.Finding`."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
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
    reward_basis,
    show_call,
    steps_text,
    tool_calls,
)

__all__ = [
    "DEFAULT_DECLINE_PATTERN",
    "DEFAULT_UNPAIRED_TOOLS",
    "expected_actions_match",
    "turned_away",
]

#: Tools that store each list of plain values they take apart, sorted, so which item of one
#: list goes with which of another changes nothing: tau-bench's and tau2's
#: ``exchange_delivered_order_items`` keeps ``sorted(item_ids)`` and ``sorted(new_item_ids)``
#: and the price difference as their sum (``modify_pending_order_items`` replaces
#: ``item_ids[i]`` by ``new_item_ids[i]``, so its pairs stay compared).
DEFAULT_UNPAIRED_TOOLS: tuple[str, ...] = ("exchange_delivered_order_items",)

#: An agent message matching this (case-insensitive) turns the user away from what they asked:
#: it says the agent is unable to, cannot look up or change something, or needs an id from the
#: user that its own tools could find. Where an expected call was never made, the first such
#: message is where the run went another way.
DEFAULT_DECLINE_PATTERN = (
    r"\b(unable to|not able to|unfortunately|(cannot|can ?not|can't|could ?n[o']?t|won't be "
    r"able to) (be )?(access|find|locat|look|search|retriev|process|modif|chang|cancel|book|"
    r"proceed|provid|help|assist|do|make|issue|offer|refund|compensat|upgrad|add|remov|send|"
    r"appl|return|exchang)\w*|(i|we)('ll| will)? need the \w+ id\b|please check your)"
)


def expected_actions_match(
    trace: ReasoningTrace,
    *,
    read_only_tools: Iterable[str] = DEFAULT_READ_ONLY_TOOLS,
    decline_pattern: str = DEFAULT_DECLINE_PATTERN,
    unpaired_tools: Iterable[str] = DEFAULT_UNPAIRED_TOOLS,
) -> Finding:
    """The state-changing calls made equal the expected ones by name and arguments, as a
    multiset (order-free), and what the task expected the agent to tell the user was told;
    undetermined without expected actions in ``metadata.ground_truth``.

    What is required follows the ground truth's ``reward_basis`` (tau2; :func:`reward_basis`),
    by default ``DB`` and ``COMMUNICATE`` as tau-bench checks: ``DB`` is the comparison of the
    writes below; ``ACTION`` requires each expected call (reads included) to have been made,
    compared on its ``compare_args`` only, other calls allowed; ``COMMUNICATE`` the outputs
    told. A basis naming none of the three is undetermined (a model's judgement decides it).

    Calls to tools matching ``read_only_tools`` are left out on both sides, and so are calls
    whose observation was an error (a refused write changed nothing). A call matches an
    expected one when its arguments are equal, or give the same arguments with objects inside
    them (a list's items) carrying keys the expected call leaves out: tau-bench's tools read the
    fields they need from such items (``update_reservation_flights`` takes each flight's
    number and date and looks up the rest), so the ground truth gives only those; and lists of
    plain values (``item_ids``) hold the same items in any order, lists of one length in a call
    kept paired row by row (``item_ids[i]`` with ``new_item_ids[i]``): tau-bench's retail tools
    store such lists sorted. A tool matching ``unpaired_tools`` stores each list apart, so only
    each list's items are compared (:data:`DEFAULT_UNPAIRED_TOOLS`). An expected
    output (tau-bench's ``outputs``, tau2's ``communicate_info``) is told when an agent message
    contains it, compared as tau-bench does: ignoring case and commas ("23,553" tells 23553).

    A pass names the writes and the messages that told the outputs; a failure names the calls
    that were not expected or differ. When every call made was expected but some expected
    ones were not made, it names where the run turned away from them (:func:`turned_away`): a
    call to a missing call's tool that the tool refused, else the first agent message matching
    ``decline_pattern`` (unable to, cannot change, I need the reservation id); none when
    neither is in the run (an output never told names no step either).
    """
    expected = expected_actions(trace)
    if expected is None:
        return Finding(None, "the trace has no expected actions in metadata.ground_truth")
    basis = reward_basis(trace)
    gated = set(_TAU_BENCH_BASIS if basis is None else basis)
    if not gated & _DECIDABLE:
        return Finding(
            None,
            f"the reward_basis ({', '.join(basis or ())}) names nothing a model-free check can "
            "decide",
        )
    writes = (
        _compare_writes(trace, expected, tuple(read_only_tools), tuple(unpaired_tools))
        if "DB" in gated
        else None
    )
    actions = _each_action_made(trace, expected) if "ACTION" in gated else None
    checked = [part for part in (writes, actions) if part is not None]
    parts = [failure for part in checked for failure in part.failures]
    steps = [step for part in checked for step in part.steps]
    outputs = expected_outputs(trace) if "COMMUNICATE" in gated else []
    untold, told_steps = _told(trace, outputs)
    for output in untold:
        parts.append(f"expected output {output[:40]!r} was never told to the user")
    if not parts:
        passed = [part.passed for part in checked]
        if outputs:
            told = f"the {len(outputs)} expected outputs were told"
            passed.append(f"{told} ({steps_text(tuple(told_steps))})" if told_steps else told)
        reason = "; ".join(passed) or (
            f"the reward_basis ({', '.join(basis or ())}) asks for no call and no output here"
        )
        made = {step for part in checked for step in part.passed_steps}
        return Finding(True, reason, tuple(sorted({*made, *told_steps})))
    # Where the run turned away from what it never made: the calls ACTION requires, else the
    # writes the database needed (named only when no wrong call was made).
    missing = actions.missing if actions is not None else writes.missing if writes else []
    if not steps and missing:
        away = turned_away(trace, missing, decline_pattern)
        if away is not None:
            steps = [away[0]]
            parts.append(f"the run turned away at step {away[0]} ({away[1]})")
    return Finding(False, "; ".join(parts), tuple(steps))


#: What tau-bench gates its reward on (and tau2 by default): the database, the outputs told.
_TAU_BENCH_BASIS = ("DB", "COMMUNICATE")
#: The reward components a trace decides without a model (tau2's NL_ASSERTION needs one, and
#: ENV_ASSERTION the environment).
_DECIDABLE = frozenset({"DB", "ACTION", "COMMUNICATE"})


@dataclass
class _Part:
    """One part of what the reward is gated on, as the run did it: the failures and the steps
    they name, else what passed and the steps it rests on; and the expected calls never made
    (by tool name), for where the run turned away."""

    failures: list[str] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    passed: str = ""
    passed_steps: list[int] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


def _compare_writes(
    trace: ReasoningTrace,
    expected: list[ExpectedAction],
    read_only: tuple[str, ...],
    unpaired: tuple[str, ...] = (),
) -> _Part:
    """The database's part: the state-changing calls made against the expected ones, as a
    multiset."""
    wanted = [action for action in expected if not is_read_only(action.name, read_only)]
    made = [
        call
        for call in tool_calls(trace)
        if not call.failed and not is_read_only(call.name, read_only)
    ]
    extra, left = _unmatched(made, wanted, unpaired)
    part = _Part(missing=[action.name for action in left])
    if not extra and not left:
        part.passed_steps = [call.step_id for call in made]
        part.passed = (
            f"the {len(wanted)} expected state-changing calls were made "
            f"({steps_text(tuple(part.passed_steps))})"
            if wanted
            else "no state-changing call expected and none made"
        )
        return part
    for call in extra:
        twin = next((action for action in left if action.name == call.name), None)
        if twin is not None:
            left.remove(twin)
            differ = _differing_keys(call.arguments, twin.arguments)
            part.failures.append(
                f"step {call.step_id} {call.name} differs from the expected call in {differ}"
            )
        else:
            part.failures.append(
                f"step {call.step_id} {show_call(call.name, call.arguments, 60)} was not expected"
            )
    for action in left:
        part.failures.append(
            f"expected {show_call(action.name, action.arguments, 60)} was not made"
        )
    part.steps = [call.step_id for call in extra]
    return part


def _each_action_made(trace: ReasoningTrace, expected: list[ExpectedAction]) -> _Part:
    """tau2's ACTION part: each expected call (reads too) matched by a call made, on its
    ``compare_args``; other calls are allowed, and a call the tool refused still counts."""
    calls = tool_calls(trace)
    part = _Part()
    for action in expected:
        match = next((call for call in calls if action.matched_by(call)), None)
        if match is None:
            compared = {
                key: value
                for key, value in action.arguments.items()
                if action.compare_args is None or key in action.compare_args
            }
            part.failures.append(
                f"expected {show_call(action.name, compared, 60)} was not made "
                "(reward_basis ACTION)"
            )
            part.missing.append(action.name)
        else:
            part.passed_steps.append(match.step_id)
    part.passed = (
        f"the {len(expected)} expected calls were made ({steps_text(tuple(part.passed_steps))}), "
        "other calls allowed (reward_basis ACTION)"
    )
    return part


def turned_away(
    trace: ReasoningTrace, missing: Iterable[str], decline_pattern: str = DEFAULT_DECLINE_PATTERN
) -> tuple[int, str] | None:
    """(step, what it was): where a run that never made the expected calls to the tools
    ``missing`` went another way. The first call to one of those tools that failed (the agent
    tried and the tool refused), else the first agent message matching ``decline_pattern``;
    ``None`` when the run has neither."""
    names = set(missing)
    for call in tool_calls(trace):
        if call.failed and call.name in names:
            return call.step_id, f"{call.name} refused"
    for step in trace.steps:
        if step.type == "observation" or not step.content:
            continue
        found = re.search(decline_pattern, step.content, re.IGNORECASE)
        if found is not None:
            return step.step_id, f"the agent declined: {found.group(0)!r}"
    return None


def _unmatched(
    made: list[ToolCall], wanted: list[ExpectedAction], unpaired: tuple[str, ...] = ()
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
                if action.name == call.name
                and _covers(
                    call.arguments,
                    action.arguments,
                    paired=not is_read_only(call.name, unpaired),
                )
            ),
            None,
        )
        if twin is not None:
            left.remove(twin)
            extra.remove(call)
    return extra, left


def _covers(made: Any, expected: Any, *, inside: bool = False, paired: bool = True) -> bool:
    """Whether a call's arguments match the expected ones: equal, except that an object inside
    them may carry keys the expected one leaves out. At the top level the keys must be the
    same: they are the tool's parameters, and one more may change what the call does."""
    if isinstance(made, Mapping) and isinstance(expected, Mapping):
        if not (made.keys() >= expected.keys() if inside else made.keys() == expected.keys()):
            return False
        unordered = () if inside else _plain_lists(made, expected)
        if unordered and not _same_rows(made, expected, unordered, paired=paired):
            return False
        return all(
            _covers(made[key], expected[key], inside=True)
            for key in expected
            if key not in unordered
        )
    if isinstance(made, list) and isinstance(expected, list):
        return len(made) == len(expected) and all(
            _covers(x, y, inside=True) for x, y in zip(made, expected)
        )
    return canonical_arguments(made) == canonical_arguments(expected)


def _plain_lists(made: Mapping[str, Any], expected: Mapping[str, Any]) -> tuple[str, ...]:
    """The top-level arguments that are lists of plain values (ids, numbers) on both sides."""
    return tuple(
        key for key in expected if _is_plain_list(made.get(key)) and _is_plain_list(expected[key])
    )


def _is_plain_list(value: Any) -> bool:
    return isinstance(value, list) and not any(isinstance(x, (list, Mapping)) for x in value)


def _same_rows(
    made: Mapping[str, Any],
    expected: Mapping[str, Any],
    keys: tuple[str, ...],
    *,
    paired: bool = True,
) -> bool:
    """Whether the lists of plain values under ``keys`` hold the same items, in any order: a
    tool takes such a list as the set of items to act on (tau-bench's retail tools store
    ``item_ids`` sorted). Lists of one length are compared as rows, so ``item_ids[i]`` stays
    paired with ``new_item_ids[i]``, unless ``paired`` is false (a tool storing each list
    apart); a list of objects (flights, passengers) keeps its order."""

    def rows(arguments: Mapping[str, Any]) -> list[tuple[str, ...]] | None:
        lengths = {len(arguments[key]) for key in keys}
        if len(lengths) != 1:
            return None
        columns = [[canonical_arguments(x) for x in arguments[key]] for key in keys]
        return sorted(zip(*columns, strict=True))

    made_rows, expected_rows = (rows(made), rows(expected)) if paired else (None, None)
    if made_rows is not None and expected_rows is not None:
        return made_rows == expected_rows
    return all(
        sorted(canonical_arguments(x) for x in made[key])
        == sorted(canonical_arguments(x) for x in expected[key])
        for key in keys
    )


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
