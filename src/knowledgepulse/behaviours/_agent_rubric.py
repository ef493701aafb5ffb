"""The built-in ``agent`` rubric, built from the behaviours of :data:`~._criteria.BEHAVIOURS`:
:func:`behaviour_criterion` makes one :class:`~knowledgepulse.rubrics.Criterion`;
:func:`agent_rubric` the whole rubric from a settings mapping (a rubric file's content) and
:func:`load_agent_rubric` from a TOML, YAML or JSON file. A setting of the wrong type, an
unknown criterion or parameter is a :class:`~._criteria.RubricSettingsError` naming it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .._schema import ReasoningTrace
from ..io._settings import SettingsFileError, read_settings_file
from ..rubrics import LOCATES, Case, Criterion, Rubric, Thresholds, Verdict
from ._checks import (
    Finding,
)
from ._criteria import BEHAVIOURS, Behaviour, RubricSettingsError, known_names

__all__ = [
    "AGENT_RUBRIC",
    "BehaviourCheck",
    "agent_rubric",
    "behaviour_criterion",
    "load_agent_rubric",
]


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
        raise RubricSettingsError(
            f"unknown behaviour {name!r}" + known_names(name, list(BEHAVIOURS))
        )
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
    steps are (``locates``: ``outcome``, ``cause``, ``evidence`` or ``symptom``) and parameters; a criterion
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
                f"{prefix}{key}: unknown setting" + known_names(str(key), _TOP_LEVEL)
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
                f"{prefix}criteria.{key}: unknown criterion"
                + known_names(str(key), list(BEHAVIOURS))
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
                + known_names(str(key), ["success", "graceful"])
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
