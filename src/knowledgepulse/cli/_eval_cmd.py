"""``kp eval``: grade cases with a rubric; one result line per case and the report."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ._app import app
from ._integrations import ResultSinks, integration_options
from ._judge_options import judge_options, judging
from ._options import (
    from_option,
    max_errors_option,
    output_option,
    quiet_option,
    rejects_option,
)
from ._run import (
    Rejection,
    Run,
    check_paths,
    open_writer,
    refuse_overwriting_inputs,
    signals_held,
)

if TYPE_CHECKING:
    from ..io._reader import InputRecord
    from ..rubrics import Case, CaseError, Rubric

# ``--group-by task``: the task an attempt belongs to, as the importers record it.
_GROUP_ALIASES = {"task": "metadata.kp_import.task"}


@app.command(
    "eval",
    epilog=(
        "\b\nCASES: JSONL (or .json / .gz / - for stdin), one case per record:\n"
        '{"id": ..., "final_state": {...}, "ground_truth": {...}, "conversation_trace": [...], "trace": {...}}\n'
        "A record that is a ReasoningTrace (kp import output) is a case whose trace is that record;\n"
        "with --from FORMAT, each trace imported from the logs is one.\n\n"
        "\b\nExit status: 1 when a case was rejected, a check raised (unless --allow-check-errors)\n"
        "or a gate failed (--fail-under, --min-pass-rate).\n\n"
        "\b\nExamples:\n"
        "  kp eval examples/scheduling.jsonl --rubric scheduling\n"
        "  kp eval results.json --from openai --rubric agent --group-by task\n"
        "  kp eval cases.jsonl --rubric my_package.rubrics:SUPPORT_RUBRIC -o results.jsonl\n"
        "  kp eval cases.jsonl --rubric rubrics.py:RUBRIC --report-json report.json --fail-under 0.8\n"
        "  kp eval results.json --from openai --rubric agent --tools tools.json"
    ),
)
@click.argument("cases", nargs=-1, required=True, metavar="CASES...")
@click.option(
    "--rubric",
    "rubric_name",
    required=True,
    metavar="NAME_OR_IMPORT_PATH",
    help="A built-in rubric (scheduling, agent), package.module:ATTRIBUTE, file.py:ATTRIBUTE, "
    "or a settings file for the agent rubric (.toml, .yaml, .json).",
)
@output_option("Write one result line per case here (default stdout).")
@click.option(
    "--report-json",
    metavar="FILE",
    help="Also write the report (outcomes, pass rates, failing cases) as JSON.",
)
@rejects_option
@click.option(
    "--fail-under",
    type=click.FloatRange(0.0, 1.0),
    metavar="SCORE",
    help="Exit 1 when the mean score is below SCORE (a gate for CI).",
)
@click.option(
    "--min-pass-rate",
    multiple=True,
    metavar="CRITERION=RATE",
    help="Exit 1 when CRITERION passes in fewer than RATE of the cases (repeatable).",
)
@click.option(
    "--allow-check-errors",
    is_flag=True,
    help="Exit 0 even when a check raised (the error still fails its criterion).",
)
@click.option(
    "--tools",
    "tools_file",
    metavar="FILE",
    help="Tool definitions for traces whose logs kept none, so known_tools and "
    "valid_arguments can decide: OpenAI's tools list (tau-bench's tools_info) or an MCP "
    "tools/list answer, as JSON.",
)
@from_option()
@judge_options
@integration_options("eval")
@max_errors_option
@quiet_option
def eval_command(
    cases: tuple[str, ...],
    rubric_name: str,
    output: str | None,
    report_json: str | None,
    rejects: str | None,
    fail_under: float | None,
    min_pass_rate: tuple[str, ...],
    allow_check_errors: bool,
    tools_file: str | None,
    source_format: str,
    junit: str | None,
    group_by: str | None,
    otel_endpoint: str | None,
    max_errors: int | None,
    quiet: bool,
) -> None:
    """Grade cases with a rubric of weighted yes/no criteria; print the report."""
    from ..behaviours import with_tools
    from ..records import EvalRecord
    from ..rubrics import CaseError, OutcomeAgreement, ReportBuilder, resolve_rubric

    files = check_paths(cases)
    refuse_overwriting_inputs(
        files, output=output, report_json=report_json, rejects=rejects, junit=junit
    )
    pass_rates = _parse_min_pass_rates(min_pass_rate)
    try:
        rubric = resolve_rubric(rubric_name).validate()
    except (ValueError, ImportError) as exc:
        raise click.BadParameter(str(exc), param_hint="--rubric") from None
    tools = _tools(tools_file)
    items = _cases(files, source_format, rubric)
    group_by = _GROUP_ALIASES.get(group_by, group_by) if group_by else group_by
    builder = ReportBuilder()
    agreement = OutcomeAgreement()
    sinks = ResultSinks(
        junit=junit,
        group_by=group_by,
        otel_endpoint=otel_endpoint,
        suite=rubric.name,
        properties={"rubric": rubric.name, "cases": " ".join(files)},
    )
    with ExitStack() as stack:
        out = open_writer(stack, output)
        run = Run(stack, label="evaluating", quiet=quiet, rejects=rejects, max_errors=max_errors)
        tally = run.tally
        with run:
            for records, case, count in judging(rubric, items):
                record = records[0]
                if isinstance(case, CaseError):
                    tally.read(len(records))
                    tally.reject(Rejection(records, case.messages))
                    sinks.reject(record.place, case.messages)
                    if tally.stopped_early:
                        break
                    continue
                tally.read(count)
                if case is None:  # a record that held no trace: nothing to grade
                    tally.processed += count
                    continue
                if tools and case.trace is not None:
                    case = dataclasses.replace(case, trace=with_tools(case.trace, tools))
                with sinks.timed():
                    result = rubric.evaluate(case)
                line = EvalRecord.of(
                    result, source=record.source, line=record.line, index=record.index
                )
                line = sinks.label(line, record.data)
                with signals_held():
                    out.write_line(line.to_json())
                    sinks.add_eval(record, case, line)  # once written: never reported alone
                    builder.add(result)
                    agreement.add(case, result)
                    tally.processed += count
                run.step()
    report = builder.build()
    if report_json:
        Path(report_json).write_text(report.to_json(), encoding="utf-8")
    console = run.console
    if not quiet or tally.interrupted:
        tally.print_folded()
        console.print(report)
        if agreement.count:
            console.print(agreement)
        console.print(tally.accounting(), highlight=False)
    code = tally.exit_code()
    if not tally.interrupted:
        gates = report.failed_gates(fail_under, pass_rates) if tally.processed else []
        if report.error_count and not allow_check_errors:
            gates.append(
                f"{report.error_count} check(s) raised an error (see 'errors' in the results; "
                "--allow-check-errors accepts them)"
            )
        for message in gates:
            console.print(f"gate failed: {message}", markup=False, highlight=False)
        if gates:
            code = max(code, 1)
    sink_code = sinks.finish(
        console,
        quiet,
        report,
        fail_under=fail_under,
        pass_rates=pass_rates,
        allow_check_errors=allow_check_errors,
    )
    raise click.exceptions.Exit(max(code, sink_code))


def _cases(
    files: list[str], source_format: str, rubric: Rubric
) -> Iterator[tuple[list[InputRecord], Case | CaseError | None, int]]:
    """(records, case, records counted) per case to grade; a rejection's case is its error.

    ``--from trace`` reads case objects and ReasoningTraces; any other format imports the logs
    and makes each trace a case, named by its id. The records of a unit count once, with its
    last trace; a unit that held no trace is ``None`` (processed, nothing graded). A trace's
    first record carries the trace as its data, so ``--group-by`` reads the trace's fields.
    """
    from ..importers import ConversionError, ImportOptions, read_traces_from_paths
    from ..io._reader import iter_records
    from ..rubrics import Case, CaseError, iter_cases

    if source_format == "trace":
        for record, case in iter_cases(iter_records(files), rubric):
            yield [record], case, 1
        return
    try:
        conversions = read_traces_from_paths(files, source_format, ImportOptions())
    except ConversionError as exc:  # an unknown format, refused before reading
        raise click.BadParameter(str(exc), param_hint="--from") from None
    for conversion in conversions:
        records = list(conversion.records)
        if conversion.problems:
            yield records, CaseError(conversion.problems), len(records)
        elif not conversion.traces:
            yield records, None, len(records)
        last = len(conversion.traces) - 1
        for position, trace in enumerate(conversion.traces):
            first = dataclasses.replace(records[0], data=trace.to_dict())
            counted = len(records) if position == last and not conversion.problems else 0
            yield [first, *records[1:]], Case(trace=trace, case_id=trace.id), counted


def _tools(path: str | None) -> list[dict[str, Any]]:
    """The tools of ``--tools FILE`` (none without it); a bad file is a usage error naming
    the file and the field."""
    if path is None:
        return []
    from ..behaviours import ToolsFileError, read_tool_definitions

    try:
        return read_tool_definitions(path)
    except ToolsFileError as exc:
        raise click.BadParameter(str(exc), param_hint="--tools") from None


def _parse_min_pass_rates(values: tuple[str, ...]) -> dict[str, float]:
    rates: dict[str, float] = {}
    for value in values:
        name, _, rate = value.partition("=")
        try:
            number = float(rate)
        except ValueError:
            number = -1.0
        if not name or not 0.0 <= number <= 1.0:
            raise click.BadParameter(
                f"expected CRITERION=RATE with RATE in [0, 1], got {value!r}",
                param_hint="--min-pass-rate",
            )
        rates[name] = number
    return rates
