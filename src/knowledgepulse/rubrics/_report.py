"""Reports over many evaluations: mean score, outcome counts, per-criterion pass rates."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict
from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..io._render import plain_text
from ._case import Case
from ._criterion import TOLERANCE, EvaluationResult, OutcomeType, format_number
from ._rubric import Rubric

__all__ = [
    "CriterionStats",
    "EvaluationReport",
    "ReportBuilder",
    "build_report",
    "build_reports",
    "evaluate_many",
]

_OUTCOME_STYLES = {
    OutcomeType.SUCCESSFUL_COMPLETION: "green",
    OutcomeType.GRACEFUL_FAILURE: "yellow",
    OutcomeType.PARTIAL_FAILURE: "dark_orange",
    OutcomeType.HARD_FAILURE: "red",
}
_SHOWN_CASES = 5


class CriterionStats(BaseModel):
    """One criterion over many cases. ``failing_cases`` lists the ids of the cases it failed.

    ``pass_rate`` is passed / (passed + failed): undetermined results are left out, and it is
    ``None`` when there was none but those. The token counts are what judged criteria spent.
    """

    model_config = ConfigDict(frozen=True)

    name: str
    weight: float
    passed: int
    failed: int
    pass_rate: float | None
    errors: int
    failing_cases: list[str]
    undetermined: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


class EvaluationReport(BaseModel):
    """Figures over many :class:`EvaluationResult`s.

    ``outcome_counts`` has all four outcomes (zero where none); ``criteria`` is sorted weakest
    first (lowest pass rate, then highest weight, then name). ``error_count`` counts the checks
    (and gates) that raised: a run with check errors did not measure what it meant to, which
    is why ``kp eval`` exits 1 when it is not zero. A case without an id is named ``#n`` (its
    1-based position). :meth:`failed_gates` checks the figures against minimums (for CI).

    ``undetermined_count`` counts the undetermined criterion results; ``undetermined_cases``
    the cases where no criterion with weight was determined, which are left out of
    ``mean_score`` and ``outcome_counts``. ``prompt_tokens`` and ``completion_tokens`` are what
    judged criteria spent.
    """

    model_config = ConfigDict(frozen=True)

    rubric: str | None
    count: int
    mean_score: float
    outcome_counts: dict[OutcomeType, int]
    criteria: list[CriterionStats]
    error_count: int
    undetermined_count: int = 0
    undetermined_cases: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def weakest(self) -> CriterionStats | None:
        """The criterion with the lowest pass rate, if any."""
        return self.criteria[0] if self.criteria else None

    def failed_gates(
        self,
        fail_under: float | None = None,
        min_pass_rates: Mapping[str, float] | None = None,
    ) -> list[str]:
        """The quality gates this report misses, one message each; empty when all are met.

        Args:
            fail_under: the lowest acceptable mean score (``None``: no minimum).
            min_pass_rates: criterion name -> the lowest acceptable pass rate. A criterion the
                report does not have misses its gate, since a misspelt name would otherwise
                pass unnoticed.

        Comparisons allow 1e-9, like the outcome thresholds. A report of no cases misses
        every gate asked for. Raises ``ValueError`` for a minimum outside [0, 1].
        """
        wanted = dict(min_pass_rates or {})
        for label, bound in [("fail_under", fail_under), *wanted.items()]:
            if bound is not None and not 0.0 <= bound <= 1.0:
                raise ValueError(f"{label}: a minimum must be in [0, 1], got {bound!r}")
        if fail_under is None and not wanted:
            return []
        if self.count == 0:
            return ["no cases were evaluated"]
        failures = []
        if fail_under is not None and self.count == self.undetermined_cases:
            failures.append("no case was determined, so the mean score is unknown")
        elif fail_under is not None and self.mean_score < fail_under - TOLERANCE:
            failures.append(
                f"mean score {format_number(self.mean_score)} is below the minimum "
                f"{format_number(fail_under)}"
            )
        by_name = {stats.name: stats for stats in self.criteria}
        for name, bound in wanted.items():
            stats = by_name.get(name)
            if stats is None:
                known = ", ".join(sorted(by_name)) or "none"
                failures.append(f"criterion {name!r} is not in the report (criteria: {known})")
            elif stats.pass_rate is None:
                failures.append(
                    f"criterion {name!r}: no result was determined ({stats.undetermined} undetermined)"
                )
            elif stats.pass_rate < bound - TOLERANCE:
                failures.append(
                    f"criterion {name!r}: pass rate {stats.pass_rate:.0%} "
                    f"({stats.passed}/{stats.passed + stats.failed}) is below the minimum "
                    f"{bound:.0%}"
                )
        return failures

    def to_json(self, *, indent: int | None = 2) -> str:
        """The report as JSON; the undetermined and token figures only when a criterion had any,
        so the report of a rubric without judged criteria reads as it always did.
        """
        quiet: Any = None
        if not (self.undetermined_count or self.prompt_tokens or self.completion_tokens):
            quiet = {
                "undetermined_count": True,
                "undetermined_cases": True,
                "prompt_tokens": True,
                "completion_tokens": True,
                "criteria": {"__all__": {"undetermined", "prompt_tokens", "completion_tokens"}},
            }
        return self.model_dump_json(indent=indent, exclude=quiet)

    @classmethod
    def from_json(cls, text: str | bytes) -> EvaluationReport:
        return cls.model_validate_json(text)

    def render(self) -> Group:
        """The report as rich renderables: a summary table and a per-criterion table."""
        title = f"Rubric {self.rubric!r}" if self.rubric else "Evaluation"
        summary = Table(title=title, show_header=False)
        summary.add_column("figure")
        summary.add_column("value", justify="right")
        summary.add_row("cases", str(self.count))
        summary.add_row("mean score", format_number(self.mean_score))
        for outcome in OutcomeType:
            count = str(self.outcome_counts.get(outcome, 0))
            summary.add_row(outcome.value, count, style=_OUTCOME_STYLES[outcome])
        summary.add_row("check errors", str(self.error_count))
        if self.undetermined_count:
            summary.add_row("undetermined results", str(self.undetermined_count), style="magenta")
        if self.undetermined_cases:
            summary.add_row("undetermined cases", str(self.undetermined_cases), style="magenta")
        if self.prompt_tokens or self.completion_tokens:
            tokens = f"{self.prompt_tokens:,} prompt + {self.completion_tokens:,} completion"
            summary.add_row("judge tokens", tokens)

        table = Table(title="Criteria, weakest first")
        table.add_column("criterion", no_wrap=True)
        table.add_column("weight", justify="right", no_wrap=True)
        table.add_column("pass rate", justify="right", no_wrap=True)
        table.add_column("errors", justify="right", no_wrap=True)
        if self.undetermined_count:
            table.add_column("undetermined", justify="right", no_wrap=True)
        for stats in self.criteria:
            rate = "-" if stats.pass_rate is None else f"{stats.pass_rate:.0%}"
            cells = [
                stats.name,
                format_number(stats.weight),
                f"{rate} ({stats.passed}/{stats.passed + stats.failed})",
                str(stats.errors),
            ]
            if self.undetermined_count:
                cells.append(str(stats.undetermined))
            table.add_row(*cells)
        return Group(summary, table, self._failing_cases())

    def _failing_cases(self) -> Table | Text:
        """Below the criteria (so both fit 80 columns), each criterion's failing cases; the
        prefix their ids share (``kp:trace:openai:tau-bench:``) is said once in the title and
        left out of each id, so what is shown is what tells the cases apart."""
        failing = [stats for stats in self.criteria if stats.failing_cases]
        if not failing:
            return Text()
        prefix = shared_prefix(
            [case for stats in failing for case in stats.failing_cases[:_SHOWN_CASES]]
        )
        title = f"Failing cases (ids after {prefix})" if prefix else "Failing cases"
        table = Table(title=title)
        table.add_column("criterion", no_wrap=True)
        table.add_column("failing cases", ratio=1)
        for stats in failing:
            shown = ", ".join(case[len(prefix) :] for case in stats.failing_cases[:_SHOWN_CASES])
            hidden = len(stats.failing_cases) - _SHOWN_CASES
            if hidden > 0:
                shown += f", … (+{hidden})"
            table.add_row(stats.name, shown)
        return table

    def __rich__(self) -> Group:
        return self.render()

    def render_text(self, width: int = 100) -> str:
        """The rendered tables as plain text (no colour)."""
        return plain_text(self.render(), width)


def shared_prefix(case_ids: list[str]) -> str:
    """The prefix all ``case_ids`` share, cut after its last ``:`` or ``/`` (so an id is never
    cut mid-word); empty when fewer than two distinct ids share one, or when it would leave an
    id empty."""
    distinct = sorted(set(case_ids))
    if len(distinct) < 2:
        return ""
    first, last = distinct[0], distinct[-1]
    length = 0
    while length < min(len(first), len(last)) and first[length] == last[length]:
        length += 1
    common = first[:length]
    cut = max(common.rfind(":"), common.rfind("/")) + 1
    prefix = common[:cut]
    return prefix if all(len(case) > len(prefix) for case in distinct) else ""


@dataclass
class _Tally:
    weight: float
    passed: int = 0
    failed: int = 0
    errors: int = 0
    undetermined: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failing_cases: list[str] = field(default_factory=list)


class ReportBuilder:
    """Accumulates results one at a time (for streams); :meth:`build` gives the report.

    The one place where figures over many results are computed (the terminal report,
    ``--report-json`` and the HTML report all use it). Results of several rubrics mix their
    criteria by name; :func:`build_reports` keeps each rubric apart. A criterion's weight is
    the one in the first result that has it. A result with no outcome (nothing of weight
    determined) is counted but left out of the mean score and the outcome counts.
    """

    def __init__(self) -> None:
        self._count = 0
        self._sum = 0.0
        self._compensation = 0.0
        self._outcomes = dict.fromkeys(OutcomeType, 0)
        self._tallies: dict[str, _Tally] = {}
        self._errors = 0
        self._undetermined = 0
        self._undetermined_cases = 0
        self._rubrics: set[str] = set()

    def add(self, result: EvaluationResult) -> None:
        """Count one result in."""
        self._count += 1
        if result.outcome_type is None:
            self._undetermined_cases += 1
        else:
            self._add_score(result.score)
            self._outcomes[result.outcome_type] += 1
        self._rubrics.add(result.rubric)
        self._errors += len(result.errors) + (result.gate_error is not None)
        self._undetermined += sum(passed is None for passed in result.details.values())
        case_id = result.case_id if result.case_id is not None else f"#{self._count}"
        for name, passed in result.details.items():
            tally = self._tallies.setdefault(name, _Tally(weight=result.weights.get(name, 0.0)))
            verdict = result.verdicts.get(name)
            if verdict is not None:
                tally.prompt_tokens += verdict.prompt_tokens
                tally.completion_tokens += verdict.completion_tokens
            if passed is None:
                tally.undetermined += 1
            elif passed:
                tally.passed += 1
            else:
                tally.failed += 1
                tally.failing_cases.append(case_id)
            if name in result.errors:
                tally.errors += 1

    def _add_score(self, value: float) -> None:
        # Neumaier summation: an exact-enough mean without keeping every score.
        total = self._sum + value
        if abs(self._sum) >= abs(value):
            self._compensation += (self._sum - total) + value
        else:
            self._compensation += (value - total) + self._sum
        self._sum = total

    def build(self) -> EvaluationReport:
        """The report over the results added so far (the builder can go on adding)."""
        determined = self._count - self._undetermined_cases
        mean = round((self._sum + self._compensation) / determined, 12) if determined else 0.0
        stats = [
            CriterionStats(
                name=name,
                weight=tally.weight,
                passed=tally.passed,
                failed=tally.failed,
                pass_rate=_rate(tally.passed, tally.passed + tally.failed),
                errors=tally.errors,
                failing_cases=list(tally.failing_cases),
                undetermined=tally.undetermined,
                prompt_tokens=tally.prompt_tokens,
                completion_tokens=tally.completion_tokens,
            )
            for name, tally in self._tallies.items()
        ]
        # A criterion never determined sorts last: nothing is known to be weak about it.
        stats.sort(key=lambda s: (s.pass_rate is None, s.pass_rate or 0.0, -s.weight, s.name))
        return EvaluationReport(
            rubric=next(iter(self._rubrics)) if len(self._rubrics) == 1 else None,
            count=self._count,
            mean_score=mean,
            outcome_counts=dict(self._outcomes),
            criteria=stats,
            error_count=self._errors,
            undetermined_count=self._undetermined,
            undetermined_cases=self._undetermined_cases,
            prompt_tokens=sum(tally.prompt_tokens for tally in self._tallies.values()),
            completion_tokens=sum(tally.completion_tokens for tally in self._tallies.values()),
        )


def _rate(passed: int, determined: int) -> float | None:
    return round(passed / determined, 12) if determined else None


def build_report(results: Iterable[EvaluationResult]) -> EvaluationReport:
    """A report over ``results`` (any iterable; consumed once, not kept)."""
    builder = ReportBuilder()
    for result in results:
        builder.add(result)
    return builder.build()


def build_reports(results: Iterable[EvaluationResult]) -> dict[str, EvaluationReport]:
    """One report per rubric, by rubric name (sorted), over ``results`` (consumed once).

    A case without an id is named ``#n`` by its position among its rubric's results.
    """
    builders: dict[str, ReportBuilder] = {}
    for result in results:
        builders.setdefault(result.rubric, ReportBuilder()).add(result)
    return {name: builders[name].build() for name in sorted(builders)}


def evaluate_many(rubric: Rubric, cases: Iterable[Case | Mapping[str, Any]]) -> EvaluationReport:
    """Evaluate every case with ``rubric`` (streaming) and report on them."""
    return build_report(rubric.evaluate_each(cases))
