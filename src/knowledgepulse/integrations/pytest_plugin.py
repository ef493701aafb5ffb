"""The knowledgepulse pytest plugin: score traces and grade agents inside tests.

Installed with the package (entry point ``pytest11: knowledgepulse``), it gives every test:

- ``kp_scorer``: a :class:`~knowledgepulse.Scorer` with its own, empty novelty memory. Its
  embedder is ``none`` (novelty 0.5: the same figures on every machine) unless the
  ``--kp-embedder auto`` option or the ``kp_embedder = auto`` ini setting asks for MiniLM.
- ``kp_evaluate``: ``kp_evaluate(rubric, cases)`` grades cases (:class:`~knowledgepulse.rubrics.Case`
  objects, case dicts, ReasoningTraces, or a JSONL/JSON file of them) with a rubric (a
  :class:`~knowledgepulse.rubrics.Rubric`, a built-in name, or ``package.module:ATTRIBUTE``) and
  returns a :class:`RubricRun`: the report and every result.

and :func:`assert_rubric`, the gate: it fails the test on an aggregate (the mean score, a
criterion's pass rate), never on one case, and says which criteria missed and on which cases,
with each case's explanation. Each run's summary is also shown at the end of the session.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .._schema import ReasoningTrace
from ..rubrics import (
    Case,
    EvaluationReport,
    EvaluationResult,
    OutcomeType,
    Rubric,
    build_report,
    resolve_rubric,
)
from ..rubrics._criterion import format_number
from ..scoring._scorer import Scorer

__all__ = ["RubricRun", "assert_rubric"]

#: Cases listed in an assertion message (the rest are counted).
SHOWN_CASES = 10
_RUNS_KEY = pytest.StashKey[list[str]]()
#: What ``kp_evaluate`` accepts as one case.
CaseLike = Case | ReasoningTrace | Mapping[str, Any]


@dataclass(frozen=True)
class RubricRun:
    """One rubric over many cases: the ``report`` and every ``result`` in case order."""

    report: EvaluationReport
    results: list[EvaluationResult]

    def assert_gates(
        self, fail_under: float | None = None, min_pass_rates: Mapping[str, float] | None = None
    ) -> None:
        """:func:`assert_rubric` on this run."""
        __tracebackhide__ = True
        assert_rubric(self, fail_under=fail_under, min_pass_rates=min_pass_rates)


def assert_rubric(
    report_or_results: RubricRun | EvaluationReport | Iterable[EvaluationResult],
    fail_under: float | None = None,
    min_pass_rates: Mapping[str, float] | None = None,
) -> EvaluationReport:
    """Fail (``AssertionError``) when the results miss a gate; return the report otherwise.

    Args:
        report_or_results: a :class:`RubricRun` (``kp_evaluate``'s), the results, or a report.
            With results the message quotes each failing case's explanation; a report alone
            only knows the failing cases' ids.
        fail_under: the lowest acceptable mean score.
        min_pass_rates: criterion name -> the lowest acceptable pass rate (a name the rubric
            does not have misses its gate).

    The message lists the gates missed, then each criterion that failed somewhere (weakest
    first) with the cases it failed, then the cases that did not succeed with their
    explanations. Raises ``ValueError`` for a minimum outside [0, 1].
    """
    __tracebackhide__ = True
    results: list[EvaluationResult] = []
    if isinstance(report_or_results, RubricRun):
        report, results = report_or_results.report, report_or_results.results
    elif isinstance(report_or_results, EvaluationReport):
        report = report_or_results
    else:
        results = list(report_or_results)
        report = build_report(results)
    missed = report.failed_gates(fail_under, min_pass_rates)
    if missed:
        raise AssertionError(_message(report, results, missed))
    return report


def _message(report: EvaluationReport, results: list[EvaluationResult], missed: list[str]) -> str:
    name = f"rubric {report.rubric!r}" if report.rubric else "the rubrics"
    lines = [
        f"{name} missed {len(missed)} gate{'s' if len(missed) != 1 else ''} over "
        f"{report.count} cases (mean score {format_number(report.mean_score)}):"
    ]
    lines += [f"  - {message}" for message in missed]
    failing = [stats for stats in report.criteria if stats.failed]
    if failing:
        lines.append("criteria that failed, weakest first:")
        for stats in failing:
            cases = _listing(stats.failing_cases)
            lines.append(
                f"  {stats.name} (weight {format_number(stats.weight)}): pass rate "
                f"{stats.pass_rate:.0%} ({stats.passed}/{stats.passed + stats.failed}); "
                f"failed on {cases}"
            )
    unsuccessful = [
        (result.case_id or f"#{index}", result)
        for index, result in enumerate(results, 1)
        if result.outcome_type is not OutcomeType.SUCCESSFUL_COMPLETION or result.errors
    ]
    if unsuccessful:
        lines.append(f"cases that did not succeed ({len(unsuccessful)} of {len(results)}):")
        lines += [
            f"  {case_id}: {result.explanation}" for case_id, result in unsuccessful[:SHOWN_CASES]
        ]
        if len(unsuccessful) > SHOWN_CASES:
            lines.append(f"  … and {len(unsuccessful) - SHOWN_CASES} more")
    return "\n".join(lines)


def _listing(case_ids: list[str]) -> str:
    shown = ", ".join(case_ids[:SHOWN_CASES])
    hidden = len(case_ids) - SHOWN_CASES
    return shown + (f", … (+{hidden})" if hidden > 0 else "")


def _cases(cases: Iterable[CaseLike] | str | Path, rubric: Rubric) -> list[Case]:
    """Cases from objects or from a file of them (read as ``kp eval`` reads it)."""
    if not isinstance(cases, (str, Path)):
        return [_case(case, rubric, f"#{index}") for index, case in enumerate(cases, 1)]
    from ..io._reader import iter_records
    from ..rubrics import CaseError, iter_cases

    loaded: list[Case] = []
    for _record, case in iter_cases(iter_records([str(cases)]), rubric):
        if isinstance(case, CaseError):
            raise case
        loaded.append(case)
    return loaded


def _case(case: CaseLike, rubric: Rubric, case_id: str) -> Case:
    if isinstance(case, Case):
        return case
    if isinstance(case, ReasoningTrace):
        return Case(trace=case, case_id=case.id)
    return rubric.case_from_dict(case, case_id=case_id)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("knowledgepulse")
    group.addoption(
        "--kp-embedder",
        choices=("none", "auto"),
        default=None,
        help="kp_scorer's embedder: none (novelty 0.5, the default) or auto (MiniLM).",
    )
    parser.addini("kp_embedder", "kp_scorer's embedder: none (default) or auto", default="none")


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_RUNS_KEY] = []


@pytest.fixture
def kp_scorer(pytestconfig: pytest.Config) -> Scorer:
    """A scorer with its own empty novelty memory (embedder: ``--kp-embedder``, default none)."""
    choice = pytestconfig.getoption("kp_embedder") or pytestconfig.getini("kp_embedder")
    return Scorer(embedder=None if choice == "none" else "auto")


@pytest.fixture
def kp_evaluate(
    request: pytest.FixtureRequest,
) -> Callable[..., RubricRun]:
    """``kp_evaluate(rubric, cases)`` -> :class:`RubricRun`; see the module's documentation."""

    def evaluate(rubric: Rubric | str, cases: Iterable[CaseLike] | str | Path) -> RubricRun:
        __tracebackhide__ = True
        chosen = resolve_rubric(rubric).validate() if isinstance(rubric, str) else rubric
        results = [chosen.evaluate(case) for case in _cases(cases, chosen)]
        run = RubricRun(build_report(results), results)
        runs = request.config.stash.get(_RUNS_KEY, None)
        if runs is not None:
            report = run.report
            runs.append(
                f"{request.node.nodeid}: {report.rubric or 'rubrics'} over {report.count} cases, "
                f"mean score {format_number(report.mean_score)}, "
                f"{report.outcome_counts[OutcomeType.SUCCESSFUL_COMPLETION]} successful"
            )
        return run

    return evaluate


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    runs = config.stash.get(_RUNS_KEY, [])
    if runs:
        terminalreporter.section("knowledgepulse rubric runs")
        for line in runs:
            terminalreporter.write_line(line)
