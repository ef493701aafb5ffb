"""Criteria, thresholds, outcome classes and the result of one evaluation (SPEC §3)."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict

from .._errors import KnowledgePulseError
from .._schema import ReasoningTrace
from ._case import Case

__all__ = [
    "LOCATES",
    "TOLERANCE",
    "Check",
    "CheckOutcome",
    "Criterion",
    "EvaluationResult",
    "Gate",
    "OutcomeType",
    "Thresholds",
    "UndeterminedError",
    "Verdict",
    "describe",
    "describe_error",
    "determined_weight",
    "explain",
    "first_failure",
    "format_number",
    "run_check",
    "run_criterion",
    "score_of",
    "step_agent",
    "step_origin",
]

#: Tolerance for the weight sum and for threshold comparisons (SPEC §3).
TOLERANCE = 1e-9

#: What the steps of a criterion's failed verdict are, in the order the first failing step is
#: looked for: where the run's result went wrong by its ground truth, where a failure began, a
#: sign near it, where it showed.
LOCATES = ("outcome", "cause", "evidence", "symptom")


class UndeterminedError(KnowledgePulseError):
    """A check could not tell whether its criterion holds (a judge model did not answer, say).

    Raised by a check (or by ``bool()`` of an undetermined :class:`Verdict`), it makes the
    criterion *undetermined*: left out of the score, the pass rates and the means, and never
    counted as failed. The message says why.
    """


class Verdict(BaseModel):
    """What a check found, when it has more to say than ``True`` or ``False``.

    A check may return a ``Verdict`` instead of a bool; judged criteria
    (:func:`~knowledgepulse.rubrics.judge`) always do. ``passed`` is ``None`` when the
    criterion is undetermined. The other fields describe how a judge model reached it:
    ``reasoning`` (the model's reasoning for the verdict it gave), the answers asked for
    (``samples``) and how they went (``yes``, ``no``, ``undetermined``), ``pass_rate`` (yes
    among the determined answers) and ``spread`` (their standard deviation, 0 when unanimous,
    0.5 at an even split), the ``rule`` that decided, the tokens spent in this run, how many
    answers came from the cache, and ``problems``: why answers were undetermined. A check that
    asks no model (the behaviour checks of :mod:`knowledgepulse.behaviours`) gives ``samples``
    0; its ``reasoning`` is the finding's reason, and a failed one is explained as
    ``Checked NAME: no: reason`` rather than ``Judged``. ``steps`` lists the ids of the trace
    steps the verdict is about (for a failure, where it happened), in the trace's order;
    empty when it is about the run as a whole or the check names none.
    """

    model_config = ConfigDict(frozen=True)

    passed: bool | None
    reasoning: str = ""
    samples: int = 1
    yes: int = 0
    no: int = 0
    undetermined: int = 0
    pass_rate: float | None = None
    spread: float | None = None
    rule: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: int = 0
    problems: list[str] = []
    steps: list[int] = []

    def __bool__(self) -> bool:
        # A verdict used as a bool (`judged(case) and other(case)`) must not turn an
        # undetermined answer into a fail: it raises, and the criterion is undetermined.
        if self.passed is None:
            raise UndeterminedError(self.why_undetermined())
        return self.passed

    def why_undetermined(self) -> str:
        """Why the verdict is undetermined: its problems, or a generic sentence."""
        return "; ".join(self.problems) or "the check could not tell"


#: A check: one case in, pass (``True``) or fail (``False``) out; or a :class:`Verdict`.
Check = Callable[[Case], "bool | Verdict"]


class OutcomeType(str, Enum):
    """The four outcome classes. A ``str`` enum: it compares and serialises as its value."""

    SUCCESSFUL_COMPLETION = "successful_completion"
    GRACEFUL_FAILURE = "graceful_failure"
    PARTIAL_FAILURE = "partial_failure"
    HARD_FAILURE = "hard_failure"

    def __str__(self) -> str:
        return self.value


def describe(function: Callable[..., Any]) -> str:
    """A check's own description: its ``description`` attribute or its docstring's first line."""
    described = getattr(function, "description", None)
    if isinstance(described, str) and described:
        return described
    doc = (getattr(function, "__doc__", None) or "").strip()
    return doc.splitlines()[0].strip() if doc else ""


@dataclass(frozen=True)
class Criterion:
    """One yes/no criterion: a ``name``, a ``weight`` ≥ 0, a ``check`` and a one-line description.

    When ``description`` is empty it is taken from the check (its ``description`` attribute or
    the first line of its docstring). ``locates`` says what the steps of its failed verdict
    are (:data:`LOCATES`): ``"outcome"`` (where the result went wrong by the ground truth: a
    write that differs from the expected one), ``"cause"`` (where a failure began: a wrong
    call, a failed one, a stall, a write without consent), ``"evidence"`` (a sign near it: a figure stated from nowhere) or ``"symptom"``
    (where it showed: the budget running out, the final answer); the result's first failing
    step is looked for in that order.
    """

    name: str
    weight: float
    check: Check
    description: str = ""
    locates: str = "cause"

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError(f"a criterion needs a non-empty name, got {self.name!r}")
        if isinstance(self.weight, bool) or not isinstance(self.weight, (int, float)):
            raise TypeError(
                f"criterion {self.name!r}: weight must be a number, got {self.weight!r}"
            )
        if not math.isfinite(self.weight) or self.weight < 0:
            raise ValueError(
                f"criterion {self.name!r}: weight must be a finite number >= 0, got {self.weight!r}"
            )
        if not callable(self.check):
            raise TypeError(f"criterion {self.name!r}: check must be callable, got {self.check!r}")
        if self.locates not in LOCATES:
            raise ValueError(
                f"criterion {self.name!r}: locates must be one of {', '.join(LOCATES)}, "
                f"got {self.locates!r}"
            )
        if not self.description:
            object.__setattr__(self, "description", describe(self.check))


@dataclass(frozen=True)
class Thresholds:
    """Score thresholds: ``success`` (with the gate) and ``graceful``; compared with 1e-9 slack."""

    success: float = 0.75
    graceful: float = 0.50

    def __post_init__(self) -> None:
        if not 0.0 < self.graceful <= self.success <= 1.0:
            raise ValueError(
                "thresholds must satisfy 0 < graceful <= success <= 1, "
                f"got success={self.success!r}, graceful={self.graceful!r}"
            )


class EvaluationResult(BaseModel):
    """The evaluation of one case. Frozen; ``model_dump_json()`` gives its JSON.

    ``details`` maps each criterion to whether it passed, in rubric order (``None``: undetermined);
    ``weights`` gives each criterion's (effective) weight; ``errors`` maps a criterion whose check
    raised (or returned a non-bool) to the error; ``undetermined`` maps each undetermined
    criterion to why; ``verdicts`` keeps what checks that returned a :class:`Verdict` (judged
    criteria) found: reasoning, samples, tokens. ``gate_passed`` is ``None`` when the rubric has
    no success gate. ``outcome_type`` is ``None`` only when no criterion with weight was
    determined (the score is then 0.0 and means nothing). ``first_failing_step`` is the
    earliest step a failed verdict of a scored criterion names (of a criterion of weight 0
    when none does; ``None`` when no failed verdict names a step),
    ``first_failing_criterion`` the criterion whose verdict names it (the first in rubric
    order on a tie) and ``first_failing_agent`` the agent that step belongs to, in a run of
    several agents whose steps say so. ``first_failing_origin`` is where that step came from in
    the source log (its ``origin``, as the importer wrote it: ``{"message": 12}``,
    ``{"line": 40, "uuid": ...}``, ``{"span_id": ...}``), so it can be found in the user's file.
    """

    model_config = ConfigDict(frozen=True)

    rubric: str
    case_id: str | None = None
    score: float
    details: dict[str, bool | None]
    weights: dict[str, float]
    outcome_type: OutcomeType | None
    explanation: str
    errors: dict[str, str] = {}
    gate_passed: bool | None = None
    gate_error: str | None = None
    undetermined: dict[str, str] = {}
    verdicts: dict[str, Verdict] = {}
    first_failing_step: int | None = None
    first_failing_criterion: str | None = None
    first_failing_agent: str | None = None
    first_failing_origin: dict[str, Any] | None = None

    @property
    def passed(self) -> list[str]:
        """Names of the criteria that passed, in rubric order."""
        return [name for name, ok in self.details.items() if ok]

    @property
    def failed(self) -> list[str]:
        """Names of the criteria that failed, in rubric order."""
        return [name for name, ok in self.details.items() if ok is False]


def run_check(check: Callable[[Case], Any], case: Case) -> tuple[bool, str | None]:
    """Run one check: (passed, error). Anything but a bool fails rather than being guessed at.

    Nothing a check does ends the run (SPEC §3): an exception, a ``sys.exit()`` and a result
    or exception that cannot even be printed each fail the criterion with a recorded error.
    Only ``KeyboardInterrupt`` (and other non-``SystemExit`` base exceptions) go through.
    """
    try:
        value = check(case)
    except (Exception, SystemExit) as exc:
        return False, describe_error(exc)
    if isinstance(value, bool):
        return value, None
    # A NumPy bool (from a comparison of arrays) is a bool too; numpy is only looked up, not
    # imported, since a value cannot be a NumPy bool unless NumPy is already loaded.
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(value, numpy.bool_):
        return bool(value), None
    return False, f"check returned {type(value).__name__} ({_safe_repr(value)}), expected bool"


@dataclass(frozen=True)
class CheckOutcome:
    """How one criterion's check went: passed (``None``: undetermined), why, what it found."""

    passed: bool | None
    error: str | None = None
    undetermined: str | None = None
    verdict: Verdict | None = None


def run_criterion(check: Callable[[Case], Any], case: Case) -> CheckOutcome:
    """Run one criterion's check: like :func:`run_check`, and a check may also return a
    :class:`Verdict` or raise :class:`UndeterminedError` to leave its criterion undetermined.
    """
    try:
        value = check(case)
    except UndeterminedError as exc:
        return CheckOutcome(None, undetermined=_message(exc) or "the check could not tell")
    except (Exception, SystemExit) as exc:
        return CheckOutcome(False, error=describe_error(exc))
    if isinstance(value, Verdict):
        reason = value.why_undetermined() if value.passed is None else None
        return CheckOutcome(value.passed, undetermined=reason, verdict=value)
    passed, error = run_check(lambda _: value, case)
    return CheckOutcome(passed, error=error)


def describe_error(exc: BaseException) -> str:
    """``TypeName: message``, even when the exception's ``str()`` itself raises."""
    name = type(exc).__name__
    message = _message(exc)
    if message is None:
        return f"{name} (its message could not be shown)"
    return f"{name}: {message}" if message else name


def _message(exc: BaseException) -> str | None:
    try:
        return str(exc)
    except Exception:  # a broken __str__ must not turn one failed check into a crash
        return None


def _safe_repr(value: object) -> str:
    try:
        return f"{value!r:.60}"
    except Exception:  # a broken __repr__ is the check's problem, not the run's
        return f"<{type(value).__name__} object>"


def score_of(weights: Mapping[str, float], details: Mapping[str, bool | None]) -> float:
    """The sum of the weights of the criteria that passed, in [0, 1].

    When criteria are undetermined (``None``) the sum is divided by the weight of the
    determined criteria, so an unknown answer neither costs nor earns points; with nothing
    of weight determined the score is 0.0.
    """
    passed = math.fsum(weights[name] for name, ok in details.items() if ok)
    if any(ok is None for ok in details.values()):
        determined = determined_weight(weights, details)
        passed = passed / determined if determined > 0 else 0.0
    # Rounding to 12 places drops float noise: 0.25 + 0.25 + 0.25 is exactly 0.75.
    return min(1.0, max(0.0, round(passed, 12)))


def determined_weight(weights: Mapping[str, float], details: Mapping[str, bool | None]) -> float:
    """The weight of the criteria that were determined (passed or failed)."""
    return math.fsum(weights[name] for name, ok in details.items() if ok is not None)


@dataclass(frozen=True)
class Gate:
    """How the success gate went for one case: its description, result and error."""

    description: str
    passed: bool | None
    error: str | None


def explain(
    score: float,
    outcome: OutcomeType | None,
    details: Mapping[str, bool | None],
    weights: Mapping[str, float],
    errors: Mapping[str, str],
    *,
    gate: Gate,
    success_threshold: float,
    undetermined: Mapping[str, str] | None = None,
    verdicts: Mapping[str, Verdict] | None = None,
) -> str:
    """The explanation of one evaluation: score, what passed, what failed, gate and errors;
    with undetermined criteria, over which weight the score was taken and why they are; and
    what each judge model reasoned.
    """

    def listing(passed: bool | None) -> str:
        items = [f"{n} ({format_number(weights[n])})" for n, ok in details.items() if ok is passed]
        return ", ".join(items) if items else "none"

    undetermined = undetermined or {}
    if outcome is None:
        sentences = ["Undetermined: no criterion with weight could be determined."]
    elif undetermined:
        share = format_number(determined_weight(weights, details))
        sentences = [f"Score {format_number(score)} ({outcome.value}) over the determined {share}."]
    else:
        sentences = [f"Score {format_number(score)} ({outcome.value})."]
    sentences += [f"Passed: {listing(True)}.", f"Failed: {listing(False)}."]
    if undetermined:
        sentences.append(f"Undetermined (left out of the score): {listing(None)}.")
    gate_blocked = (
        outcome is not None and gate.passed is False and score >= success_threshold - TOLERANCE
    )
    subject = f"The success gate ({gate.description})"
    if gate.error is not None:
        sentences.append(f"{subject} raised {gate.error}" + ("," if gate_blocked else "."))
    elif gate_blocked:
        sentences.append(f"{subject} did not hold,")
    if gate_blocked and outcome is not None:
        sentences[-1] += (
            f" so the outcome is {outcome.value} rather than "
            f"{OutcomeType.SUCCESSFUL_COMPLETION.value}."
        )
    if errors:
        raised = "; ".join(f"{name}: {message}" for name, message in errors.items())
        sentences.append(f"Check errors (counted as failed): {raised}.")
    if undetermined:
        why = "; ".join(f"{name}: {message.rstrip('.')}" for name, message in undetermined.items())
        sentences.append(f"Why undetermined: {why}.")
    for name, verdict in (verdicts or {}).items():
        # A verdict for which no model was asked (samples 0) is a plain check's finding: only
        # a failure is worth a sentence (the result's verdicts keep every reason).
        checked = verdict.samples == 0
        if checked and verdict.passed is False and verdict.reasoning:
            sentences.append(f"Checked {name}: no: {verdict.reasoning}")
        elif not checked and verdict.passed is not None and verdict.reasoning:
            answer = "yes" if verdict.passed else "no"
            votes = (
                f" ({verdict.yes} of {verdict.yes + verdict.no} yes)" if verdict.samples > 1 else ""
            )
            sentences.append(f"Judged {name}: {answer}{votes}: {verdict.reasoning}")
    return " ".join(sentences)


def first_failure(
    verdicts: Mapping[str, Verdict],
    weights: Mapping[str, float] | None = None,
    locates: Mapping[str, str] | None = None,
) -> tuple[int, str] | None:
    """(step, criterion): the earliest step a failed verdict names, and the first criterion
    (in the mapping's order) whose failed verdict names it; ``None`` when none names a step.

    With ``locates`` (criterion → ``"outcome"``, ``"cause"``, ``"evidence"`` or ``"symptom"``;
    ``"cause"`` when not given), the criteria naming where the result went wrong by the
    ground truth are looked at first (a process breach before it, such as a write without
    consent that was the expected write, is not why the run failed), then causes, then
    evidence, then symptoms: a run cut by its budget went wrong before the step the budget ran
    out. Within
    each, with ``weights``, the criteria that weigh in the score come first: a criterion of
    weight 0 (reported, not scored) names the step only when no scored one names any."""

    def earliest(names: list[str]) -> tuple[int, str] | None:
        found: tuple[int, str] | None = None
        for name in names:
            verdict = verdicts[name]
            if verdict.passed is False and verdict.steps:
                step = min(verdict.steps)
                if found is None or step < found[0]:
                    found = (step, name)
        return found

    kinds = locates or {}
    for kind in LOCATES:
        names = [name for name in verdicts if kinds.get(name, "cause") == kind]
        if weights is None:
            found = earliest(names)
        else:
            scored = [name for name in names if weights.get(name, 0) > 0]
            found = earliest(scored) or earliest([name for name in names if name not in scored])
        if found is not None:
            return found
    return None


def step_origin(trace: ReasoningTrace | None, step_id: int) -> dict[str, Any] | None:
    """Where step ``step_id`` came from in the source (its ``origin``, written by the
    importers); ``None`` when the step has none or there is no such step."""
    if trace is None:
        return None
    for step in trace.steps:
        if step.step_id == step_id:
            origin = (step.model_extra or {}).get("origin")
            return dict(origin) if isinstance(origin, dict) and origin else None
    return None


def step_agent(trace: ReasoningTrace | None, step_id: int) -> str | None:
    """The agent step ``step_id`` belongs to (its ``agent`` field), in a run of several
    agents; ``None`` when the trace has one agent or none named, or no such step."""
    if trace is None:
        return None
    agents: set[str] = set()
    found: str | None = None
    for step in trace.steps:
        agent = (step.model_extra or {}).get("agent")
        if isinstance(agent, str) and agent:
            agents.add(agent)
            if step.step_id == step_id:
                found = agent
    return found if len(agents) > 1 else None


def format_number(value: float) -> str:
    """A weight or score for people: at least two decimals, at most four (0.7 -> '0.70')."""
    text = f"{value:.4f}".rstrip("0")
    whole, _, decimals = text.partition(".")
    return f"{whole}.{decimals.ljust(2, '0')}"
