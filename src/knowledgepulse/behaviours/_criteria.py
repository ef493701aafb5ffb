"""The behaviour checks as rubric criteria, and the built-in ``agent`` rubric built from them.

Every check is registered in :data:`BEHAVIOURS` with its default weight, its parameters (each
with a type, a default and why that default) and why it weighs what it does.
:func:`behaviour_criterion` makes one :class:`~knowledgepulse.rubrics.Criterion`;
:func:`agent_rubric` the whole rubric from a settings mapping (a rubric file's content) and
:func:`load_agent_rubric` from a TOML, YAML or JSON file. A setting of the wrong type, an
unknown criterion or parameter is a :class:`RubricSettingsError` naming it.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from .._schema import ReasoningTrace
from ..io._settings import SettingsFileError, read_settings_file
from ..rubrics import LOCATES, Case, Criterion, Rubric, RubricLoadError, Thresholds, Verdict
from . import _checks, _grounding, _progress
from ._checks import (
    DEFAULT_BUDGET_PATTERN,
    DEFAULT_CONSENT_PATTERN,
    DEFAULT_FAILURE_PATTERN,
    DEFAULT_HANDOFF_PATTERN,
    DEFAULT_HANDOFF_TOOLS,
    DEFAULT_MAX_STEPS,
    DEFAULT_SCRATCH_TOOLS,
    DEFAULT_WRITE_TOOLS,
    Finding,
)
from ._facts import DEFAULT_READ_ONLY_TOOLS
from ._grounding import DEFAULT_IDENTIFY_TOOLS
from ._progress import DEFAULT_STALL_PATTERN, DEFAULT_TERMINATION_PATTERN

__all__ = [
    "AGENT_RUBRIC",
    "BEHAVIOURS",
    "Behaviour",
    "BehaviourCheck",
    "Parameter",
    "RubricSettingsError",
    "agent_rubric",
    "behaviour_criterion",
    "load_agent_rubric",
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
                    f"{where}: expected a list of tool names or patterns, got {value!r}"
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
    #: What its failed finding's steps are: "cause", "evidence" or "symptom" (see
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
                    + _known(str(key), ["weight", "locates", *known])
                )
            values[parameter.name] = parameter.read(value, f"{where}.{key}")
        return values


def _known(name: str, names: Sequence[str]) -> str:
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
            _checks.expected_actions_match,
            "The state-changing tool calls equal the task's expected actions (name and arguments)",
            (_READ_ONLY,),
        ),
        Behaviour(
            "task_completed",
            0.10,
            "the outcome when no expected actions are given: the trace's own word (its "
            "success flag, a final answer admitting failure or handing the task off, a failed "
            "last call, a budget stop); with expected_actions it is the success gate",
            _checks.task_completed,
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
            ),
        ),
        Behaviour(
            "answered",
            0.05,
            "a run that ends without telling the user the result leaves them guessing",
            _checks.answered,
            "The run ends with a non-empty answer to the user (or hands them over)",
            (
                Parameter(
                    "handoff_tools",
                    "patterns",
                    DEFAULT_HANDOFF_TOOLS,
                    "a run that ends by handing the user over to a person has answered: "
                    "tau-bench's transfer_to_human_agents ends the conversation",
                ),
            ),
            locates="symptom",
        ),
        Behaviour(
            "within_budget",
            0.05,
            "cost and latency grow with every step; the default is tau-bench's own limit",
            _checks.within_budget,
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


class BehaviourCheck:
    """A rubric check running one behaviour check on ``case.trace`` with fixed parameters; it
    returns the finding as a :class:`~knowledgepulse.rubrics.Verdict` (undetermined when the
    case has no trace)."""

    def __init__(self, behaviour: Behaviour, parameters: Mapping[str, Any]) -> None:
        self.behaviour = behaviour
        self.parameters = dict(parameters)
        self.__name__ = behaviour.name
        self.description = behaviour.description

    def find(self, trace: ReasoningTrace) -> Finding:
        """The finding on one trace."""
        return self.behaviour.check(trace, **self.parameters)

    def __call__(self, case: Case) -> Verdict:
        if case.trace is None:
            return Finding(None, "the case has no reasoning trace").verdict()
        return self.find(case.trace).verdict()

    def __repr__(self) -> str:
        settings = ", ".join(f"{k}={v!r}" for k, v in self.parameters.items())
        return f"<behaviour {self.__name__}({settings})>"


def behaviour_criterion(name: str, weight: float | None = None, **parameters: Any) -> Criterion:
    """A :class:`~knowledgepulse.rubrics.Criterion` for the behaviour check ``name`` (a key of
    :data:`BEHAVIOURS`), with its default weight unless ``weight`` is given, and its parameters
    (checked: :class:`RubricSettingsError` for an unknown name or a value of the wrong type)::

        Rubric("mine", [behaviour_criterion("no_loops", 0.5, max_repeats=4),
                        behaviour_criterion("answered", 0.5)])
    """
    behaviour = BEHAVIOURS.get(name)
    if behaviour is None:
        raise RubricSettingsError(f"unknown behaviour {name!r}" + _known(name, list(BEHAVIOURS)))
    values = behaviour.settings(parameters, name)
    return Criterion(
        name,
        behaviour.weight if weight is None else weight,
        BehaviourCheck(behaviour, values),
        behaviour.description,
        behaviour.locates,
    )


class OutcomeGate:
    """The agent rubric's success gate: no outcome criterion failed. The expected actions
    were taken (or the ground truth lists none to compare), the run's answer is the expected
    one (when the ground truth gives one), and, without expected actions, the trace shows no
    sign of failure (``task_completed``); an undetermined outcome does not block success."""

    description = (
        "the expected actions were taken, the expected answer given, and the trace shows no "
        "sign of failure"
    )

    def __init__(self, checks: Sequence[BehaviourCheck]) -> None:
        self.checks = tuple(checks)
        self.__name__ = "outcome_reached"

    def __call__(self, case: Case) -> bool:
        return all(check(case).passed is not False for check in self.checks)


#: The criteria whose failure blocks success (the outcome criteria), in the order checked.
_OUTCOME_CRITERIA = ("expected_actions", "task_completed", "expected_answer")


_TOP_LEVEL = ("rubric", "name", "description", "normalise", "gate", "thresholds", "criteria")


def agent_rubric(settings: Mapping[str, Any] | None = None, *, where: str = "") -> Rubric:
    """The ``agent`` rubric, with the defaults changed by ``settings`` (a rubric file's content)::

        {"name": "airline", "thresholds": {"success": 0.8},
         "criteria": {"within_budget": {"weight": 0.1, "max_steps": 40}}}

    Keys: ``rubric`` (``"agent"``, when given), ``name``, ``description``, ``normalise``
    (scale the weights to sum to 1), ``gate`` (``false``: no success gate), ``thresholds``
    (``success``, ``graceful``) and ``criteria``: per criterion its ``weight``, what its failed
    steps are (``locates``: ``cause``, ``evidence`` or ``symptom``) and parameters; a criterion
    left out keeps its defaults. ``where`` prefixes messages (a file name).
    Raises :class:`RubricSettingsError` naming a wrong setting.
    """
    prefix = f"{where}: " if where else ""
    settings = settings or {}
    if not isinstance(settings, Mapping):
        raise RubricSettingsError(f"{prefix}expected a table of settings, got {settings!r:.60}")
    for key in settings:
        if key not in _TOP_LEVEL:
            raise RubricSettingsError(
                f"{prefix}{key}: unknown setting" + _known(str(key), _TOP_LEVEL)
            )
    kind = settings.get("rubric", "agent")
    if kind != "agent":
        raise RubricSettingsError(f"{prefix}rubric: only 'agent' can be configured, got {kind!r}")
    name = _text(settings, "name", "agent", prefix)
    description = _text(
        settings,
        "description",
        "Agent behaviours on any ReasoningTrace, no model needed",
        prefix,
    )
    normalise = _flag(settings, "normalise", False, prefix)
    gate = _flag(settings, "gate", True, prefix)
    thresholds = _thresholds(settings.get("thresholds"), prefix)
    chosen = settings.get("criteria") or {}
    if not isinstance(chosen, Mapping):
        raise RubricSettingsError(
            f"{prefix}criteria: expected a table of criteria, got {chosen!r:.60}"
        )
    for key in chosen:
        if key not in BEHAVIOURS:
            raise RubricSettingsError(
                f"{prefix}criteria.{key}: unknown criterion" + _known(str(key), list(BEHAVIOURS))
            )
    criteria = []
    outcome_checks: list[BehaviourCheck] = []
    for behaviour in BEHAVIOURS.values():
        given = chosen.get(behaviour.name) or {}
        at = f"{prefix}criteria.{behaviour.name}"
        if not isinstance(given, Mapping):
            raise RubricSettingsError(
                f"{at}: expected a table (weight and parameters), got {given!r:.60}"
            )
        weight = given.get("weight", behaviour.weight)
        if (
            isinstance(weight, bool)
            or not isinstance(weight, (int, float))
            or not (math.isfinite(weight) and weight >= 0)
        ):
            raise RubricSettingsError(f"{at}.weight: expected a number >= 0, got {weight!r}")
        locates = given.get("locates", behaviour.locates)
        if locates not in LOCATES:
            raise RubricSettingsError(
                f"{at}.locates: expected one of {', '.join(LOCATES)}, got {locates!r}"
            )
        parameters = {
            key: value for key, value in given.items() if key not in ("weight", "locates")
        }
        values = behaviour.settings(parameters, at)
        check = BehaviourCheck(behaviour, values)
        if behaviour.name in _OUTCOME_CRITERIA:
            outcome_checks.append(check)
        criteria.append(
            Criterion(
                behaviour.name,
                float(weight),
                BehaviourCheck(behaviour, values),
                behaviour.description,
                locates,
            )
        )
    try:
        return Rubric(
            name,
            criteria,
            success_gate=OutcomeGate(outcome_checks) if gate and outcome_checks else None,
            gate_description=OutcomeGate.description if gate else None,
            thresholds=thresholds,
            normalise=normalise,
            description=description,
        )
    except ValueError as exc:
        raise RubricSettingsError(f"{prefix}{exc}") from None


def _text(settings: Mapping[str, Any], key: str, default: str, prefix: str) -> str:
    value = settings.get(key, default)
    if not isinstance(value, str) or not value.strip():
        raise RubricSettingsError(f"{prefix}{key}: expected a non-empty string, got {value!r}")
    return value


def _flag(settings: Mapping[str, Any], key: str, default: bool, prefix: str) -> bool:
    value = settings.get(key, default)
    if not isinstance(value, bool):
        raise RubricSettingsError(f"{prefix}{key}: expected true or false, got {value!r}")
    return value


def _thresholds(value: Any, prefix: str) -> Thresholds:
    if value is None:
        return Thresholds()
    if not isinstance(value, Mapping):
        raise RubricSettingsError(f"{prefix}thresholds: expected a table, got {value!r:.60}")
    numbers: dict[str, float] = {}
    for key, number in value.items():
        if key not in ("success", "graceful"):
            raise RubricSettingsError(
                f"{prefix}thresholds.{key}: unknown threshold"
                + _known(str(key), ["success", "graceful"])
            )
        if isinstance(number, bool) or not isinstance(number, (int, float)):
            raise RubricSettingsError(
                f"{prefix}thresholds.{key}: expected a number, got {number!r}"
            )
        numbers[str(key)] = float(number)
    try:
        return Thresholds(**numbers)
    except ValueError as exc:
        raise RubricSettingsError(f"{prefix}thresholds: {exc}") from None


def load_agent_rubric(path: str | Path) -> Rubric:
    """The ``agent`` rubric configured by a TOML, YAML or JSON file (see :func:`agent_rubric`);
    :class:`RubricSettingsError` for a file that cannot be read or a wrong setting."""
    path = Path(path)
    try:
        data = read_settings_file(path, "rubric")
    except SettingsFileError as exc:
        raise RubricSettingsError(str(exc)) from None
    return agent_rubric(data, where=str(path))


#: The built-in ``agent`` rubric with its defaults (frozen; ``kp eval --rubric agent``).
AGENT_RUBRIC: Rubric = agent_rubric().freeze()
