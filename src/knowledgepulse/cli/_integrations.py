"""``--junit``, ``--group-by`` and ``--otel-endpoint`` of ``kp score`` and ``kp eval``.

What the three options do with each result lives here, in :class:`ResultSinks`, so the
commands' loops each gain a call or two rather than three features' worth of code. A result
is labelled (its group) before its line is written and counted in only once it is: a record
whose write is interrupted is then in neither the output nor the JUnit report, events, groups.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from .._schema import ReasoningTrace
    from ..integrations._junit import JUnitReport
    from ..integrations.otel_events import EvaluationEventExporter
    from ..io._reader import InputRecord
    from ..records import EvalRecord, ScoreRecord
    from ..reporting._grouping import AttemptGrouper
    from ..rubrics import Case, EvaluationReport
    from ..scoring._scorer import ValueScore

F = TypeVar("F", bound=Callable[..., Any])
R = TypeVar("R", "EvalRecord", "ScoreRecord")


def integration_options(kind: str) -> Callable[[F], F]:
    """The three options, in one block; ``kind`` words their help for score or eval."""
    junit_help = (
        "Write JUnit XML here: one test case per case, a failure with the explanation when it "
        "did not succeed, and the quality gates as their own suite."
        if kind == "eval"
        else "Write JUnit XML here: one test case per trace, a failure when it is below --threshold."
    )
    passed = (
        "its outcome is successful_completion"
        if kind == "eval"
        else ("it reaches --threshold (else: metadata.success)")
    )

    def decorate(function: F) -> F:
        for option in reversed(
            [
                click.option("--junit", metavar="FILE", help=junit_help),
                click.option(
                    "--group-by",
                    metavar="FIELD",
                    help="Group attempts by this dotted field of each input record (e.g. "
                    "metadata.kp_import.task): per group attempts, pass@k, best and mean; an "
                    f"attempt passes when {passed}.",
                ),
                click.option(
                    "--otel-endpoint",
                    metavar="URL",
                    help="Send one gen_ai.evaluation.result event per result to this OTLP/HTTP "
                    "collector (e.g. http://localhost:4318), parented to the evaluated span "
                    "when the trace came from OpenTelemetry (the otel extra).",
                ),
            ]
        ):
            function = option(function)
        return function

    return decorate


class ResultSinks:
    """Where each result goes besides the output lines: JUnit, groups, OTel events.

    Built before any input is read, so a bad ``--otel-endpoint`` or a missing extra is a usage
    error up front.
    """

    def __init__(
        self,
        *,
        junit: str | None,
        group_by: str | None,
        otel_endpoint: str | None,
        suite: str,
        properties: Mapping[str, str],
        threshold: float | None = None,
    ) -> None:
        self._junit: JUnitReport | None = None
        self._junit_path = junit
        if junit is not None:
            from ..integrations._junit import JUnitReport

            self._junit = JUnitReport(suite, dict(properties))
        self._group_by = group_by
        self._groups: AttemptGrouper | None = None
        if group_by:
            from ..reporting._grouping import AttemptGrouper  # rich: loaded only when grouping

            self._groups = AttemptGrouper(group_by)
        self._threshold = threshold
        self._exporter: EvaluationEventExporter | None = None
        if otel_endpoint is not None:
            from ..integrations.otel_events import EvaluationEventExporter

            try:
                self._exporter = EvaluationEventExporter(otel_endpoint)
            except ValueError as exc:
                raise click.BadParameter(str(exc), param_hint="--otel-endpoint") from None
        self._seconds = 0.0

    @contextmanager
    def timed(self) -> Iterator[None]:
        """Times one evaluation, for the JUnit test case's ``time``."""
        started = time.perf_counter()
        yield
        self._seconds = time.perf_counter() - started

    def _group(self, data: Any) -> dict[str, str | None] | None:
        if self._group_by is None:
            return None
        from ..reporting._grouping import field_value, group_label

        return {self._group_by: group_label(field_value(data, self._group_by))}

    def label(self, line: R, data: Any) -> R:
        """The line as it is written: with its group when grouping (``data``: the fields
        ``--group-by`` reads). Nothing is counted in yet: see :meth:`add_eval`, :meth:`add_score`."""
        group = self._group(data)
        if group is None or self._groups is None:
            return line
        return line.model_copy(update={"group": group})

    def add_eval(self, record: InputRecord, case: Case, line: EvalRecord) -> None:
        """Count one evaluated case in, once its (labelled) line is written."""
        from ..integrations.otel_events import EvaluationEvent
        from ..rubrics import OutcomeType

        result = line.to_result()
        if self._junit is not None:
            self._junit.add(result, seconds=self._seconds, where=record.place)
        if self._exporter is not None:
            self._exporter.emit(EvaluationEvent.of_result(result, case.trace))
        self._add_to_group(
            line, result.score, result.outcome_type is OutcomeType.SUCCESSFUL_COMPLETION
        )

    @property
    def active(self) -> bool:
        """Whether any sink wants the results (else the hot path skips building records)."""
        return self._junit is not None or self._exporter is not None or self._groups is not None

    def add_score(self, trace: ReasoningTrace, score: ValueScore, line: ScoreRecord) -> None:
        """Count one scored trace in, once its (labelled) line is written."""
        from ..integrations.otel_events import EvaluationEvent

        if self._junit is not None:
            self._junit.add_score(line)
        if self._exporter is not None:
            self._exporter.emit(EvaluationEvent.of_score(score, trace, self._threshold))
        if self._groups is not None:
            passed = line.passed if line.passed is not None else trace.metadata.success
            self._add_to_group(line, line.score, passed)

    def _add_to_group(self, line: EvalRecord | ScoreRecord, value: float, passed: bool) -> None:
        if self._groups is not None and line.group is not None:
            self._groups.add(next(iter(line.group.values())), value, passed)

    def reject(self, where: str, messages: Sequence[str]) -> None:
        """A record that could not be evaluated: an error in the JUnit report."""
        if self._junit is not None:
            self._junit.reject(where, messages)

    def finish(
        self,
        console: Any,
        quiet: bool,
        report: EvaluationReport | None = None,
        *,
        fail_under: float | None = None,
        pass_rates: Mapping[str, float] | None = None,
        allow_check_errors: bool = True,
    ) -> int:
        """Print the groups, write the JUnit file, send the events; 1 when sending failed."""
        from ..integrations.otel_events import OtelExportError

        if self._groups is not None and not quiet:
            # The per-task table needs about 100 columns; a pipe would get 80.
            console.print(self._groups.build(), width=max(console.width, 100))
        if self._junit is not None and self._junit_path is not None:
            if report is not None:
                self._record_gates(report, fail_under, pass_rates or {}, allow_check_errors)
            self._junit.write(self._junit_path)
        if self._exporter is not None:
            try:
                self._exporter.close()
            except OtelExportError as exc:
                console.print(f"error: {exc}", markup=False, highlight=False)
                return 1
            if not quiet:
                console.print(
                    f"sent {self._exporter.sent} evaluation events to {self._exporter.endpoint}",
                    markup=False,
                    highlight=False,
                )
        return 0

    def _record_gates(
        self,
        report: EvaluationReport,
        fail_under: float | None,
        pass_rates: Mapping[str, float],
        allow_check_errors: bool,
    ) -> None:
        assert self._junit is not None
        if fail_under is not None:
            failed = report.failed_gates(fail_under=fail_under)
            self._junit.gate(f"mean score >= {fail_under:g}", failed[0] if failed else None)
        for name, rate in pass_rates.items():
            failed = report.failed_gates(min_pass_rates={name: rate})
            self._junit.gate(f"{name} pass rate >= {rate:g}", failed[0] if failed else None)
        if not allow_check_errors:
            raised = f"{report.error_count} check(s) raised" if report.error_count else None
            self._junit.gate("no check raised", raised)
