"""Rubrics: named sets of weighted yes/no criteria, scored, classified and explained (SPEC §3)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import replace
from typing import Any, NoReturn, TypeVar, overload

from .._errors import KnowledgePulseError
from .._schema import TraceValidationError
from ._case import Case, CaseError, CaseTraceError
from ._criterion import (
    TOLERANCE,
    Criterion,
    EvaluationResult,
    Gate,
    OutcomeType,
    Thresholds,
    Verdict,
    describe,
    describe_error,
    determined_weight,
    explain,
    first_failure,
    run_check,
    run_criterion,
    score_of,
    step_agent,
    step_origin,
)

# EvaluationResult is re-exported: records written per output line derive from it here.
__all__ = ["EvaluationResult", "FrozenRubricError", "Rubric"]

CheckT = TypeVar("CheckT", bound=Callable[[Case], "bool | Verdict"])


class FrozenRubricError(KnowledgePulseError, TypeError):
    """A frozen rubric (a built-in one, say) was asked to change; change a copy instead."""


GateFn = Callable[[Case], bool]
GateT = TypeVar("GateT", bound=Callable[[Case], bool])


class Rubric:
    """A named set of weighted yes/no criteria, a success gate and thresholds.

    Two ways to define one::

        rubric = Rubric("support", [Criterion("resolved", 0.6, resolved), ...])

        rubric = Rubric("support")
        @rubric.criterion(weight=0.6, description="The customer's issue was resolved")
        def resolved(case: Case) -> bool: ...

    Weights must sum to 1.0 (±1e-9), or pass ``normalise=True`` to scale them. A rubric given
    its criteria as a list is checked at once; a decorator-built one is checked at its first
    :meth:`evaluate` (or call :meth:`validate` when it is complete).

    ``success_gate`` is a check that must hold for ``successful_completion`` (for scheduling:
    the booking was confirmed); ``gate_description`` names it in explanations (default: the
    gate's description or its function name). ``case_factory`` builds a :class:`Case` from a
    JSON case (default :meth:`Case.from_dict`).

    :meth:`freeze` makes a rubric unchangeable (the built-in rubrics are frozen, since every
    user shares them); :meth:`copy` gives a changeable copy.
    """

    def __init__(
        self,
        name: str,
        criteria: Iterable[Criterion] | None = None,
        *,
        success_gate: GateFn | None = None,
        gate_description: str | None = None,
        thresholds: Thresholds | None = None,
        normalise: bool = False,
        description: str = "",
        case_factory: Callable[[Mapping[str, Any], str | None], Case] | None = None,
    ) -> None:
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"a rubric needs a non-empty name, got {name!r}")
        self.name = name
        self.description = description
        self.thresholds = thresholds if thresholds is not None else Thresholds()
        self.normalise = normalise
        self._criteria: list[Criterion] = []
        self._effective: tuple[Criterion, ...] | None = None
        self._gate: GateFn | None = None
        self._gate_description = ""
        self._case_factory = case_factory
        self._frozen = False
        if success_gate is not None:
            self.set_gate(success_gate, description=gate_description)
        if criteria is not None:
            for criterion in criteria:
                self.add(criterion)
            self.validate()

    # -- definition ------------------------------------------------------------------------

    def __setattr__(self, name: str, value: object) -> None:
        # _effective is a cache of the validated criteria, not part of the definition.
        if name != "_effective" and getattr(self, "_frozen", False):
            self._refuse_change(f"set {name}")
        super().__setattr__(name, value)

    def _refuse_change(self, action: str) -> NoReturn:
        raise FrozenRubricError(
            f"rubric {self.name!r} is frozen (shared, like the built-in rubrics): cannot "
            f"{action}; change a copy instead: rubric.copy(name='my-{self.name}')"
        )

    @property
    def frozen(self) -> bool:
        """Whether the rubric refuses changes (see :meth:`freeze`)."""
        return self._frozen

    def freeze(self) -> Rubric:
        """Validate the rubric and make it unchangeable; return it.

        Adding a criterion, setting the gate or assigning an attribute then raises
        :class:`FrozenRubricError`.
        """
        self.validate()
        self._frozen = True
        return self

    def copy(
        self,
        name: str | None = None,
        *,
        description: str | None = None,
        thresholds: Thresholds | None = None,
    ) -> Rubric:
        """A changeable copy with the same criteria, gate, thresholds and case factory.

        Args:
            name: the copy's name (default: this rubric's name).
            description: the copy's description (default: this rubric's).
            thresholds: the copy's thresholds (default: this rubric's).
        """
        duplicate = Rubric(
            self.name if name is None else name,
            success_gate=self._gate,
            gate_description=self._gate_description or None,
            thresholds=self.thresholds if thresholds is None else thresholds,
            normalise=self.normalise,
            description=self.description if description is None else description,
            case_factory=self._case_factory,
        )
        for criterion in self._criteria:
            duplicate.add(criterion)
        return duplicate

    def add(self, criterion: Criterion) -> Criterion:
        """Add one criterion; a duplicate name raises ``ValueError``."""
        if self._frozen:
            self._refuse_change(f"add the criterion {getattr(criterion, 'name', criterion)!r}")
        if not isinstance(criterion, Criterion):
            raise TypeError(
                f"rubric {self.name!r}: expected a Criterion, got {type(criterion).__name__}"
            )
        if any(existing.name == criterion.name for existing in self._criteria):
            raise ValueError(f"rubric {self.name!r}: duplicate criterion name {criterion.name!r}")
        self._criteria.append(criterion)
        self._effective = None
        return criterion

    def criterion(
        self, *, weight: float, name: str | None = None, description: str | None = None
    ) -> Callable[[CheckT], CheckT]:
        """Decorator: add the decorated check as a criterion (named after the function).

        The function is returned unchanged, so it can still be called and tested directly.
        """
        if self._frozen:
            self._refuse_change("add a criterion")

        def register(check: CheckT) -> CheckT:
            self.add(
                Criterion(
                    name=name if name is not None else _function_name(check),
                    weight=weight,
                    check=check,
                    description=description or "",
                )
            )
            return check

        return register

    @overload
    def gate(self, function: GateT, /) -> GateT: ...

    @overload
    def gate(
        self, function: None = None, /, *, description: str | None = None
    ) -> Callable[[GateT], GateT]: ...

    def gate(self, function: GateFn | None = None, /, *, description: str | None = None) -> Any:
        """Decorator: make the decorated check this rubric's success gate.

        Use bare (``@rubric.gate``) or with a label (``@rubric.gate(description="...")``).
        """
        if self._frozen:
            self._refuse_change("change its success gate")

        def register(check: GateFn) -> GateFn:
            self.set_gate(check, description=description)
            return check

        return register(function) if function is not None else register

    def set_gate(self, gate: GateFn | None, *, description: str | None = None) -> None:
        """Set (or with ``None`` remove) the success gate."""
        if self._frozen:
            self._refuse_change("change its success gate")
        if gate is not None and not callable(gate):
            raise TypeError(f"rubric {self.name!r}: success_gate must be callable, got {gate!r}")
        self._gate = gate
        if gate is None:
            self._gate_description = ""
        else:
            named = getattr(gate, "__name__", "")
            fallback = named.replace("_", " ") if named and named != "<lambda>" else "custom gate"
            self._gate_description = description or describe(gate) or fallback

    def validate(self) -> Rubric:
        """Check the rubric is complete and its weights sum to 1.0; return it.

        Raises ``ValueError`` for an empty rubric or a weight sum off 1.0 by more than 1e-9
        (unless ``normalise=True``, which scales the weights to sum to 1.0).
        """
        if self._effective is not None:
            return self
        if not self._criteria:
            raise ValueError(f"rubric {self.name!r} has no criteria")
        total = math.fsum(criterion.weight for criterion in self._criteria)
        listing = ", ".join(f"{c.name}={c.weight!r}" for c in self._criteria)
        if self.normalise:
            if total <= 0:
                raise ValueError(
                    f"rubric {self.name!r}: cannot normalise weights that sum to {total!r} "
                    f"({listing})"
                )
            self._effective = tuple(replace(c, weight=c.weight / total) for c in self._criteria)
        elif abs(total - 1.0) > TOLERANCE:
            raise ValueError(
                f"rubric {self.name!r}: weights sum to {total!r}, not 1.0 (±1e-9): {listing}. "
                "Fix the weights or pass normalise=True."
            )
        else:
            self._effective = tuple(self._criteria)
        return self

    # -- inspection ------------------------------------------------------------------------

    @property
    def criteria(self) -> tuple[Criterion, ...]:
        """The criteria with their effective (normalised, if asked) weights."""
        return self.validate()._effective or ()

    @property
    def weights(self) -> dict[str, float]:
        """Criterion name -> effective weight."""
        return {criterion.name: criterion.weight for criterion in self.criteria}

    @property
    def success_gate(self) -> GateFn | None:
        return self._gate

    @property
    def gate_description(self) -> str:
        return self._gate_description

    def __len__(self) -> int:
        return len(self._criteria)

    def __iter__(self) -> Iterator[Criterion]:
        return iter(self.criteria)

    def __repr__(self) -> str:
        names = ", ".join(f"{c.name}={c.weight:g}" for c in self._criteria)
        return f"Rubric({self.name!r}, [{names}])"

    # -- evaluation ------------------------------------------------------------------------

    def case_from_dict(self, data: Mapping[str, Any], case_id: str | None = None) -> Case:
        """Build a :class:`Case` from a JSON case, as this rubric expects it.

        Args:
            data: the parsed JSON case.
            case_id: the name of a case whose data carries no id (e.g. its line number).

        Raises :class:`CaseError` when ``data`` cannot be a case, whatever the rubric's
        ``case_factory`` raised (a ``KeyError`` for a missing field, say), so one bad case
        rejects that case only.
        """
        if self._case_factory is None:
            return Case.from_dict(data, case_id=case_id)
        try:
            case = self._case_factory(data, case_id)
        except CaseError:
            raise
        except TraceValidationError as exc:
            raise CaseTraceError(exc.problems) from exc
        except (Exception, SystemExit) as exc:
            raise CaseError([f"the rubric's case_factory raised {describe_error(exc)}"]) from exc
        if not isinstance(case, Case):
            returned = type(case).__name__
            raise CaseError([f"the rubric's case_factory returned {returned}, not a Case"])
        return case

    def evaluate(self, case: Case | Mapping[str, Any]) -> EvaluationResult:
        """Run every check on ``case`` and score, classify and explain the result.

        A check that raises, or returns anything but a ``bool`` (or a :class:`Verdict`), fails
        and its error is recorded in ``errors``; the other checks still run. A check that
        raises :class:`UndeterminedError` or returns an undetermined verdict leaves its
        criterion undetermined: out of the score, which is then taken over the weight of the
        determined criteria.
        """
        criteria = self.criteria
        if not isinstance(case, Case):
            case = self.case_from_dict(case)
        details: dict[str, bool | None] = {}
        errors: dict[str, str] = {}
        undetermined: dict[str, str] = {}
        verdicts: dict[str, Verdict] = {}
        for criterion in criteria:
            checked = run_criterion(criterion.check, case)
            details[criterion.name] = checked.passed
            if checked.error is not None:
                errors[criterion.name] = checked.error
            if checked.undetermined is not None:
                undetermined[criterion.name] = checked.undetermined
            if checked.verdict is not None:
                verdicts[criterion.name] = checked.verdict
        weights = {criterion.name: criterion.weight for criterion in criteria}
        score = score_of(weights, details)

        gate_passed: bool | None = None
        gate_error: str | None = None
        if self._gate is not None:
            gate_passed, gate_error = run_check(self._gate, case)
        outcome: OutcomeType | None = self.classify(score, gate_passed is not False)
        if undetermined and determined_weight(weights, details) <= 0:
            outcome = None
        explanation = explain(
            score,
            outcome,
            details,
            weights,
            errors,
            gate=Gate(self._gate_description, gate_passed, gate_error),
            success_threshold=self.thresholds.success,
            undetermined=undetermined,
            verdicts=verdicts,
        )
        first = first_failure(
            verdicts, weights, {criterion.name: criterion.locates for criterion in criteria}
        )
        return EvaluationResult(
            rubric=self.name,
            case_id=case.case_id,
            score=score,
            details=details,
            weights=weights,
            outcome_type=outcome,
            explanation=explanation,
            errors=errors,
            gate_passed=gate_passed,
            gate_error=gate_error,
            undetermined=undetermined,
            verdicts=verdicts,
            first_failing_step=first[0] if first else None,
            first_failing_criterion=first[1] if first else None,
            first_failing_agent=step_agent(case.trace, first[0]) if first else None,
            first_failing_origin=step_origin(case.trace, first[0]) if first else None,
        )

    def evaluate_each(
        self, cases: Iterable[Case | Mapping[str, Any]]
    ) -> Iterator[EvaluationResult]:
        """Evaluate cases one at a time, lazily (any iterable, including a generator)."""
        for case in cases:
            yield self.evaluate(case)

    def classify(self, score: float, gate_holds: bool = True) -> OutcomeType:
        """The outcome class of ``score`` (SPEC §3): first match wins, 1e-9 tolerance."""
        if score >= self.thresholds.success - TOLERANCE and gate_holds:
            return OutcomeType.SUCCESSFUL_COMPLETION
        if score >= self.thresholds.graceful - TOLERANCE:
            return OutcomeType.GRACEFUL_FAILURE
        if score > TOLERANCE:
            return OutcomeType.PARTIAL_FAILURE
        return OutcomeType.HARD_FAILURE


def _function_name(function: Callable[..., Any]) -> str:
    name = getattr(function, "__name__", None)
    if not isinstance(name, str) or not name or name == "<lambda>":
        raise ValueError(f"cannot name the check {function!r}; give the criterion an explicit name")
    return name
