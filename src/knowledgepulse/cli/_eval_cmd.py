"""``kp eval``: grade cases with a rubric; one result line per case and the report."""

from __future__ import annotations

from typing import Any

import click

from ..runs import stderr_console
from ._app import app
from ._integrations import ResultSinks, integration_options
from ._judge_options import judge_options
from ._options import (
    from_option,
    max_errors_option,
    output_option,
    quiet_option,
    rejects_option,
)
from ._run import check_format, check_paths, print_report, refuse_overwriting_inputs


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
    from ..rubrics import JudgeNotConfiguredError, resolve_rubric
    from ..runs import GROUP_ALIASES, EvaluateSummary, evaluate_files

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
    check_format(source_format)
    group_by = GROUP_ALIASES.get(group_by, group_by) if group_by else group_by
    sinks = ResultSinks(
        junit=junit,
        group_by=group_by,
        otel_endpoint=otel_endpoint,
        suite=rubric.name,
        properties={"rubric": rubric.name, "cases": " ".join(files)},
    )
    console = stderr_console()
    try:
        report = evaluate_files(
            files,
            rubric,
            source_format=source_format,
            output=output or "-",
            report_json=report_json,
            rejects=rejects,
            tools=tools,
            fail_under=fail_under,
            min_pass_rates=pass_rates,
            allow_check_errors=allow_check_errors,
            max_errors=max_errors,
            sink=sinks,
            console=console,
            progress=not quiet,
        )
    except JudgeNotConfiguredError as exc:
        raise click.UsageError(str(exc)) from None
    print_report(console, report, quiet)
    summary = report.summary
    sink_code = sinks.finish(
        console,
        quiet,
        summary.evaluation if isinstance(summary, EvaluateSummary) else None,
        fail_under=fail_under,
        pass_rates=pass_rates,
        allow_check_errors=allow_check_errors,
    )
    raise click.exceptions.Exit(max(report.exit_code(), sink_code))


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
