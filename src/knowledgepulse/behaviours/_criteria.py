"""The behaviour checks as rubric criteria: every check is registered in :data:`BEHAVIOURS`
with its default weight, its parameters (each with a type, a default and why that default) and
why it weighs what it does. The rubric built from them is in :mod:`._agent_rubric`. A setting
of the wrong type, an unknown criterion or parameter is a :class:`RubricSettingsError` naming
it.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..rubrics import RubricLoadError
from . import _checks, _expected_actions, _grounding, _outcome, _progress
from ._checks import (
    DEFAULT_CONSENT_PATTERN,
    DEFAULT_FINAL_TOOLS,
    DEFAULT_HANDOFF_TOOLS,
    DEFAULT_MAX_STEPS,
    DEFAULT_PAYMENT_ARGUMENTS,
    DEFAULT_PAYMENT_PATTERN,
    DEFAULT_SCRATCH_TOOLS,
    DEFAULT_WRITE_TOOLS,
    Finding,
)
from ._facts import DEFAULT_READ_ONLY_TOOLS
from ._grounding import DEFAULT_IDENTIFY_TOOLS
from ._outcome import (
    DEFAULT_BUDGET_PATTERN,
    DEFAULT_CLOSING_PATTERN,
    DEFAULT_FAILURE_PATTERN,
    DEFAULT_HANDOFF_PATTERN,
)
from ._progress import DEFAULT_STALL_PATTERN, DEFAULT_TERMINATION_PATTERN

__all__ = [
    "BEHAVIOURS",
    "Behaviour",
    "Parameter",
    "RubricSettingsError",
]


class RubricSettingsError(RubricLoadError):
    """A rubric's settings are wrong: an unknown criterion or parameter, a value of the wrong
    type. The message names the setting (``criteria.within_budget.max_steps``) and what fits."""


@dataclass(frozen=True)
class Parameter:
    """One parameter of a behaviour check: its ``name``, its ``kind`` (a whole number ≥
    ``minimum``, a list of tool-name patterns, a regular expression), its ``default`` and
    ``why`` that default."""

    name: str
    kind: Literal["count", "patterns", "regex", "flag"]
    default: Any
    why: str
    minimum: int = 1

    def read(self, value: Any, where: str) -> Any:
        """``value`` checked for this parameter; raises :class:`RubricSettingsError`."""
        if self.kind == "count":
            if isinstance(value, bool) or not isinstance(value, int) or value < self.minimum:
                raise RubricSettingsError(
                    f"{where}: expected a whole number >= {self.minimum}, got {value!r}"
                )
            return value
        if self.kind == "flag":
            if not isinstance(value, bool):
                raise RubricSettingsError(f"{where}: expected true or false, got {value!r}")
            return value
        if self.kind == "patterns":
            if (
                isinstance(value, str)
                or not isinstance(value, Sequence)
                or not all(isinstance(item, str) and item for item in value)
            ):
                raise RubricSettingsError(
                    f"{where}: expected a list of names or fnmatch patterns, got {value!r}"
                )
            return tuple(value)
        if not isinstance(value, str):
            raise RubricSettingsError(f"{where}: expected a regular expression, got {value!r}")
        try:
            re.compile(value)
        except re.error as exc:
            raise RubricSettingsError(f"{where}: not a valid regular expression: {exc}") from None
        return value


@dataclass(frozen=True)
class Behaviour:
    """A behaviour check as the ``agent`` rubric uses it: ``name``, default ``weight`` and
    ``why`` it weighs that, the ``check`` (trace and parameters to a :class:`Finding`), its
    ``parameters``, a one-line ``description`` and what its failed steps are (``locates``)."""

    name: str
    weight: float
    why: str
    check: Callable[..., Finding]
    description: str
    parameters: tuple[Parameter, ...] = ()
    #: What its failed finding's steps are: "outcome", "cause", "evidence" or "symptom" (see
    #: :class:`~knowledgepulse.rubrics.Criterion`); the first failing step is looked for in
    #: that order.
    locates: str = "cause"

    def settings(self, given: Mapping[str, Any], where: str) -> dict[str, Any]:
        """The parameters' values: the defaults, replaced by those ``given`` (checked)."""
        known = {parameter.name: parameter for parameter in self.parameters}
        values = {parameter.name: parameter.default for parameter in self.parameters}
        for key, value in given.items():
            parameter = known.get(str(key))
            if parameter is None:
                raise RubricSettingsError(
                    f"{where}.{key}: unknown parameter of {self.name!r}"
                    + known_names(str(key), ["weight", "locates", *known])
                )
            values[parameter.name] = parameter.read(value, f"{where}.{key}")
        return values


def known_names(name: str, names: Sequence[str]) -> str:
    """The hint after an unknown ``name``: the closest of ``names``, and all of them."""
    close = difflib.get_close_matches(name, names, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"{hint} (known: {', '.join(names) or 'none'})"


_READ_ONLY = Parameter(
    "read_only_tools",
    "patterns",
    DEFAULT_READ_ONLY_TOOLS,
    "tools named for reading (get_*, search_*, list_*, ...) change nothing, and tau-bench's "
    "calculate and think are scratch tools",
)

_WRITE_TOOLS = Parameter(
    "write_tools",
    "patterns",
    DEFAULT_WRITE_TOOLS,
    "the verbs that name writes (book_*, cancel_*, update_*, send_*, ...); the tools the "
    "task's expected actions name count too",
)

_MIN_NUMBER = Parameter(
    "min_number",
    "count",
    10,
    "smaller numbers are counts and list items, not facts a tool or the user must give",
    minimum=0,
)

#: The behaviour checks, in the ``agent`` rubric's order.
BEHAVIOURS: dict[str, Behaviour] = {
    behaviour.name: behaviour
    for behaviour in (
        Behaviour(
            "expected_actions",
            0.40,
            "the outcome: whether the agent changed what the task needed changed; it is also "
            "the success gate, so no process criterion can make up for a wrong outcome",
            _expected_actions.expected_actions_match,
            "The state-changing tool calls equal the task's expected actions (name and arguments)",
            (
                _READ_ONLY,
                Parameter(
                    "decline_pattern",
                    "regex",
                    _expected_actions.DEFAULT_DECLINE_PATTERN,
                    "where an expected call was never made, the first agent message turning "
                    "the user away (unable to, cannot change, I need the reservation id) is "
                    "where the run went another way",
                ),
                Parameter(
                    "unpaired_tools",
                    "patterns",
                    _expected_actions.DEFAULT_UNPAIRED_TOOLS,
                    "tools that store each list of items apart (tau-bench's exchange keeps "
                    "sorted(item_ids) and sorted(new_item_ids)), so how two lists pair "
                    "changes nothing",
                ),
            ),
            locates="outcome",
        ),
        Behaviour(
            "task_completed",
            0.10,
            "the outcome when no expected actions are given: the trace's own word (its "
            "success flag, a final answer admitting failure or handing the task off, a failed "
            "last call, a budget stop, a run cut before its end); with expected_actions only "
            "the run being cut counts, and it is part of the success gate",
            _outcome.task_completed,
            "The trace shows no sign of failure (success flag, admission, handoff, error, budget)",
            (
                Parameter(
                    "failure_pattern",
                    "regex",
                    DEFAULT_FAILURE_PATTERN,
                    "the words a final answer admits failure with (could not, unable to, failed "
                    "to, incomplete, without a recommendation); not cannot, which tells a limit",
                ),
                Parameter(
                    "handoff_pattern",
                    "regex",
                    DEFAULT_HANDOFF_PATTERN,
                    "escalated, transferred, handed over: the task left to someone else",
                ),
                Parameter(
                    "budget_pattern",
                    "regex",
                    DEFAULT_BUDGET_PATTERN,
                    "the stop reasons of a run cut by its budget (max_tokens, length, "
                    "exit_cost, max_steps, a limit or timeout)",
                ),
                Parameter(
                    "closing_pattern",
                    "regex",
                    DEFAULT_CLOSING_PATTERN,
                    "a last user turn that closes the conversation (tau-bench's ###STOP###, "
                    "goodbye, a bare thanks) needs no answer; any other left unanswered means "
                    "the run was cut",
                ),
                Parameter(
                    "handoff_tools",
                    "patterns",
                    DEFAULT_HANDOFF_TOOLS,
                    "a run ending in a call to one hands the task over",
                ),
                Parameter(
                    "write_tools",
                    "patterns",
                    DEFAULT_WRITE_TOOLS,
                    "a handoff after a write that succeeded did part of the task",
                ),
                _READ_ONLY,
                Parameter(
                    "scratch_tools",
                    "patterns",
                    DEFAULT_SCRATCH_TOOLS,
                    "a note or computation after a failed call leaves the error at the end",
                ),
                Parameter(
                    "final_tools",
                    "patterns",
                    DEFAULT_FINAL_TOOLS,
                    "a conversation may end on the output of a call delivering the result "
                    "(Terminus-2's mark_task_complete): it was not cut",
                ),
            ),
            locates="symptom",
        ),
        Behaviour(
            "no_loops",
            0.10,
            "a loop wastes the budget and is the behaviour peers most ask to catch",
            _checks.no_loops,
            "No tool called with identical arguments 3 times, no cycle of calls repeated 3 times",
            (
                Parameter(
                    "max_repeats",
                    "count",
                    3,
                    "twice can be a deliberate retry; a third identical call is a loop",
                    minimum=2,
                ),
                Parameter(
                    "longest_cycle",
                    "count",
                    3,
                    "longer cycles are usually legitimate workflows that revisit a tool",
                    minimum=2,
                ),
                Parameter(
                    "cycle_repeats", "count", 3, "as for max_repeats: a third round", minimum=2
                ),
            ),
        ),
        Behaviour(
            "errors_recovered",
            0.10,
            "an error left unanswered usually leaves the task half done",
            _checks.errors_recovered,
            "Every failed observation is followed by a later call that succeeds",
            (
                Parameter(
                    "scratch_tools",
                    "patterns",
                    DEFAULT_SCRATCH_TOOLS,
                    "tools that only note or compute succeed whatever happened: calling one "
                    "after an error recovers nothing",
                ),
            ),
        ),
        Behaviour(
            "known_tools",
            0.05,
            "rare, and an undeclared call fails on its own at run time; it mostly flags a "
            "hallucinated tool",
            _checks.known_tools,
            "Every tool called was declared",
        ),
        Behaviour(
            "valid_arguments",
            0.05,
            "as known_tools: the tool refuses bad arguments, and errors_recovered weighs what "
            "the agent did next",
            _checks.valid_arguments,
            "The arguments of each call match its tool's declared JSON Schema",
        ),
        Behaviour(
            "confirmed_before_write",
            0.10,
            "acting without consent is a policy breach even when the action was right "
            "(tau-bench's airline policy requires an explicit yes)",
            _checks.confirmed_before_write,
            "A user turn consents between the proposal and each state-changing call",
            (
                Parameter(
                    "write_tools",
                    "patterns",
                    DEFAULT_WRITE_TOOLS,
                    "the verbs that name writes (book_*, cancel_*, update_*, send_*, ...); the "
                    "tools the task's expected actions name count too",
                ),
                _READ_ONLY,
                Parameter(
                    "consent_pattern",
                    "regex",
                    DEFAULT_CONSENT_PATTERN,
                    "the words users say yes with; a turn opening with no, wait or stop is a "
                    "refusal whatever follows",
                ),
                Parameter(
                    "payment_arguments",
                    "patterns",
                    DEFAULT_PAYMENT_ARGUMENTS,
                    "the arguments that say how a write pays or refunds (payment_id, "
                    "payment_method_id); a write naming one needs a user turn before it that "
                    "names a means of payment; [] to not ask",
                ),
                Parameter(
                    "payment_pattern",
                    "regex",
                    DEFAULT_PAYMENT_PATTERN,
                    "the words that name a means of payment in a user turn (card, gift, paypal, "
                    "payment, paid, ...), besides the payment's own id and its words",
                ),
            ),
        ),
        Behaviour(
            "answered",
            0.05,
            "a run that ends without telling the user the result leaves them guessing",
            _outcome.answered,
            "The run ends with a non-empty answer to the user (or hands them over)",
            (
                Parameter(
                    "handoff_tools",
                    "patterns",
                    DEFAULT_HANDOFF_TOOLS,
                    "a run that ends by handing the user over to a person has answered: "
                    "tau-bench's transfer_to_human_agents ends the conversation",
                ),
                Parameter(
                    "final_tools",
                    "patterns",
                    DEFAULT_FINAL_TOOLS,
                    "a run that ends on a call delivering its result has answered: SWE-agent's "
                    "submit, OpenHands' finish, pydantic-ai's final_result",
                ),
            ),
            locates="symptom",
        ),
        Behaviour(
            "within_budget",
            0.05,
            "cost and latency grow with every step; the default is tau-bench's own limit",
            _outcome.within_budget,
            f"At most {DEFAULT_MAX_STEPS} agent steps",
            (
                Parameter(
                    "max_steps",
                    "count",
                    DEFAULT_MAX_STEPS,
                    "tau-bench stops a conversation after 30 agent actions (max_num_steps)",
                ),
            ),
            locates="symptom",
        ),
        # The three below are reported, not scored (weight 0): on tau-bench airline they
        # fail on runs the reward calls successful about as often as on failed ones
        # (docs/rubrics.md gives the counts), so a weight would cost agreement. They name
        # where a run went wrong, and a rubric file can weigh them.
        Behaviour(
            "identified_before_write",
            0.0,
            "reported, not scored: airline policy lets a reservation's details stand for the "
            "user's, so the default order flags correct runs as often as wrong ones",
            _grounding.identified_before_write,
            "Every state-changing call comes after the user was identified",
            (
                Parameter(
                    "identify_tools",
                    "patterns",
                    DEFAULT_IDENTIFY_TOOLS,
                    "the lookups that identify a user in the tool sets seen (get_user_details, "
                    "find_user_id_*) and the verbs authenticate, verify, identify",
                ),
                Parameter(
                    "in_order",
                    "flag",
                    False,
                    "off: any identifying call will do; on: each of identify_tools, in the "
                    "order listed (the policy's order), before the first write",
                ),
                _WRITE_TOOLS,
                _READ_ONLY,
            ),
        ),
        Behaviour(
            "grounded_answer",
            0.0,
            "reported, not scored: the policy's own figures (a 24-hour window, a $50 "
            "certificate) live in a system prompt no importer keeps as a step",
            _grounding.grounded_answer,
            "Every number and id in the final answer was given by a tool or the user",
            (_MIN_NUMBER,),
            locates="symptom",
        ),
        Behaviour(
            "grounded_arguments",
            0.0,
            "reported, not scored: as grounded_answer, amounts the policy sets are given "
            "nowhere in the trace",
            _grounding.grounded_arguments,
            "Every id, e-mail and number passed to a write was given before it",
            (_WRITE_TOOLS, _READ_ONLY, _MIN_NUMBER),
        ),
        Behaviour(
            "grounded_statements",
            0.0,
            "reported, not scored: an agent's message may rightly state what it computed; "
            "the first message stating a figure nothing before it wrote is where the run's "
            "facts left its evidence, which locates a failure more than it decides one",
            _grounding.grounded_statements,
            "Every id and number an agent message states was written before it",
            (_MIN_NUMBER,),
            locates="evidence",
        ),
        # The three below locate where a run went wrong when no tool-level ground truth
        # says so (multi-agent logs, Who&When): reported, not scored, except that a wrong
        # expected answer blocks success like a wrong expected action (the outcome gate).
        Behaviour(
            "no_failed_calls",
            0.0,
            "reported, not scored: a failed call later recovered is no failure of the run "
            "(errors_recovered weighs that); the first failed call names where it first went "
            "wrong, and the agent whose call or code it was",
            _progress.no_failed_calls,
            "No tool call, and no code an agent ran, failed (recovered or not)",
        ),
        Behaviour(
            "made_progress",
            0.0,
            "reported, not scored: the run's own report that it stopped progressing (a "
            "Magentic-One progress ledger, an agent saying it is stuck) names the step it "
            "judged, more often a symptom of a failed run than a failure in itself",
            _progress.made_progress,
            "No agent message reports that the run stopped making progress or is in a loop",
            (
                Parameter(
                    "stall_pattern",
                    "regex",
                    DEFAULT_STALL_PATTERN,
                    "Magentic-One's progress ledger (is_progress_being_made false, is_in_loop "
                    "true) and an agent saying it is stuck or not making progress",
                ),
            ),
        ),
        Behaviour(
            "expected_answer",
            0.0,
            "not scored, but a wrong answer blocks success (the outcome gate): Who&When and "
            "GAIA-style runs give the task's expected answer; when no earlier failure is found, "
            "a wrong answer names the plan the run followed to it",
            _progress.expected_answer_given,
            "The run's answer gives the task's expected answer (metadata.ground_truth.answer)",
            (
                Parameter(
                    "termination_pattern",
                    "regex",
                    DEFAULT_TERMINATION_PATTERN,
                    "a message that only ends the conversation (AG2's TERMINATE) is no answer",
                ),
            ),
            locates="symptom",
        ),
    )
}
