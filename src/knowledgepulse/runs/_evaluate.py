"""``evaluate_files``: grade the cases of files with a rubric, one result line per case, and
return the run's report with the rubric's figures and the gates that failed.

``kp eval`` is this verb with options and printing. Cases are read through
:func:`~._run.read_units` (the one read -> tally loop); the judged questions of the next cases
are asked ahead while one is graded.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from ._report import EvaluateSummary, RunReport
from ._run import Run, open_writer, read_units
from ._signals import signals_held, signals_restored
from ._verbs import checked_inputs

if TYPE_CHECKING:
    from ..io._input_record import InputRecord
    from ..records import EvalRecord
    from ..rubrics import Case, Rubric

# ``group_by="task"``: the task an attempt belongs to, as the importers record it.
GROUP_ALIASES = {"task": "metadata.kp_import.task"}


class CaseSink(Protocol):
    """What else takes each result besides the output lines (kp eval's JUnit report, attempt
    groups, OpenTelemetry events): told of each rejection, times each grading, may label each
    line before it is written, and counts it in once it is."""

    def reject(self, where: str, messages: Sequence[str]) -> None: ...

    def timed(self) -> AbstractContextManager[None]: ...

    def label(self, line: EvalRecord, data: Any) -> EvalRecord: ...

    def add_eval(self, record: InputRecord, case: Case, line: EvalRecord) -> None: ...


class CaseUnit(NamedTuple):
    """The records of one case and the case to grade (None: the records held no trace, so
    nothing is graded); ``problems``: why they are refused. A tuple holding its case, so that
    the judged questions can be asked ahead (:func:`~knowledgepulse.rubrics.prefetching`)."""

    records: list[InputRecord]
    case: Case | None
    counted: int
    problems: list[str]


def evaluate_files(
    paths: Sequence[str],
    rubric: Rubric | str,
    *,
    source_format: str = "trace",
    output: str = "-",
    report_json: str | None = None,
    rejects: str | None = None,
    tools: Sequence[Mapping[str, Any]] = (),
    fail_under: float | None = None,
    min_pass_rates: Mapping[str, float] | None = None,
    allow_check_errors: bool = False,
    max_errors: int | None = None,
    sink: CaseSink | None = None,
    console: Any = None,
    progress: bool = False,
) -> RunReport:
    """Grade each case of ``paths`` with ``rubric``, writing one result line per case.

    Args:
        paths: files, directories and ``-`` for standard input.
        rubric: a :class:`~knowledgepulse.rubrics.Rubric`, or its name or import path
            (:func:`~knowledgepulse.rubrics.resolve_rubric`).
        source_format: ``trace`` reads case objects and ReasoningTraces; a log format imports
            the logs and makes each trace a case.
        output: a file for the result lines (``.gz``: compressed), or ``-``, standard output.
        report_json: also write the rubric's report here, as JSON.
        rejects: a file for the refused records (source, line, index, errors, record).
        tools: tool definitions given to traces whose logs kept none.
        fail_under: a gate: the mean score must reach it.
        min_pass_rates: gates: each criterion's pass rate must reach its value.
        allow_check_errors: a check that raised fails only its criterion, not the run.
        max_errors: stop reading after this many refused records.
        sink: takes each result besides the output lines (see :class:`CaseSink`).
        console: a rich Console for rejections and progress (None: nothing is shown).
        progress: draw a progress bar on ``console`` when it is a terminal.

    The summary is an :class:`~._report.EvaluateSummary`: the rubric's report and the
    agreement of its verdicts with the traces' own success. ``gates`` lists the failed gates
    (none after a stop). Raises FileNotFoundError, ConversionError (an unknown format),
    :class:`~._paths.OutputOverwritesInput`, ValueError or ImportError (a rubric that cannot
    be resolved) and JudgeNotConfiguredError before anything is read.
    """
    from ..behaviours import with_tools
    from ..records import EvalRecord
    from ..rubrics import OutcomeAgreement, ReportBuilder, resolve_rubric

    files = checked_inputs(
        paths, source_format, output=output, report_json=report_json, rejects=rejects
    )
    rubric = resolve_rubric(rubric).validate()
    cases = _judged_ahead(rubric, _cases(files, source_format, rubric))
    builder = ReportBuilder()
    agreement = OutcomeAgreement()
    with ExitStack() as stack:
        stack.enter_context(signals_restored())
        out = open_writer(stack, output)
        run = Run(
            stack,
            label="evaluating",
            quiet=not progress,
            rejects=rejects,
            max_errors=max_errors,
            console=console,
        )
        tally = run.tally

        def refused(unit: CaseUnit) -> None:
            if sink is not None:
                sink.reject(unit.records[0].place, unit.problems)

        with run:
            for unit in read_units(cases, run, hint=False, on_reject=refused):
                record, case = unit.records[0], unit.case
                if case is None:  # a record that held no trace: nothing to grade
                    tally.processed += unit.counted
                    continue
                if tools and case.trace is not None:
                    case = dataclasses.replace(case, trace=with_tools(case.trace, list(tools)))
                with sink.timed() if sink is not None else _untimed():
                    result = rubric.evaluate(case)
                line = EvalRecord.of(
                    result, source=record.source, line=record.line, index=record.index
                )
                if sink is not None:
                    line = sink.label(line, record.data)
                with signals_held():
                    out.write_line(line.to_json())
                    if sink is not None:
                        sink.add_eval(record, case, line)  # once written: never reported alone
                    builder.add(result)
                    agreement.add(case, result)
                    tally.processed += unit.counted
                    tally.outputs += 1
                run.step()
    evaluation = builder.build()
    if report_json:
        Path(report_json).write_text(evaluation.to_json(), encoding="utf-8")
    gates: list[str] = []
    if not tally.interrupted:
        if tally.processed:
            gates = evaluation.failed_gates(fail_under, min_pass_rates)
        if evaluation.error_count and not allow_check_errors:
            gates.append(
                f"{evaluation.error_count} check(s) raised an error (see 'errors' in the "
                "results; --allow-check-errors accepts them)"
            )
    summary = EvaluateSummary(
        rubric=rubric.name,
        evaluation=evaluation,
        agreement=agreement if agreement.count else None,
    )
    return RunReport.of_tally("evaluate", files, tally, summary, gates=gates)


class _untimed(AbstractContextManager[None]):
    def __exit__(self, *_: object) -> None:
        return None


def _judged_ahead(rubric: Rubric, units: Iterator[CaseUnit]) -> Iterator[CaseUnit]:
    """``units`` with the rubric's judged questions asked ahead, as many as its judges answer
    at once (twice their concurrency). Raises JudgeNotConfiguredError at once when the rubric
    has judged criteria and no judge model."""
    from ..rubrics import judged_checks, prefetching

    checks = judged_checks(rubric)
    models = {id(model): model for model in (check.judge_model() for check in checks)}
    window = 2 * max((m.client.settings.concurrency for m in models.values()), default=1)
    return prefetching(units, rubric, ahead=window)


def _cases(files: list[str], source_format: str, rubric: Rubric) -> Iterator[CaseUnit]:
    """One unit per case to grade; a refused record's unit carries its problems.

    ``trace`` reads case objects and ReasoningTraces; any other format imports the logs and
    makes each trace a case, named by its id. The records of a unit count once, with its
    last trace; a unit that held no trace has no case (processed, nothing graded). A trace's
    first record carries the trace as its data, so ``group_by`` reads the trace's fields.
    """
    from ..importers import ImportOptions, read_traces_from_paths
    from ..io._reader import iter_records
    from ..rubrics import Case, CaseError, iter_cases

    if source_format == "trace":
        for record, case in iter_cases(iter_records(files), rubric):
            if isinstance(case, CaseError):
                yield CaseUnit([record], None, 1, list(case.messages))
            else:
                yield CaseUnit([record], case, 1, [])
        return
    for conversion in read_traces_from_paths(files, source_format, ImportOptions()):
        records = list(conversion.records)
        if conversion.problems:
            yield CaseUnit(records, None, len(records), list(conversion.problems))
        elif not conversion.traces:
            yield CaseUnit(records, None, len(records), [])
        last = len(conversion.traces) - 1
        for position, trace in enumerate(conversion.traces):
            first = dataclasses.replace(records[0], data=trace.to_dict())
            counted = len(records) if position == last and not conversion.problems else 0
            yield CaseUnit([first, *records[1:]], Case(trace=trace, case_id=trace.id), counted, [])
