"""``kp import``: agent logs in, ReasoningTraces out (one JSON line each)."""

from __future__ import annotations

import click

from ..runs import stderr_console
from ._app import EpilogWhenShown, app
from ._options import (
    PATHS_HELP,
    from_option,
    max_errors_option,
    output_option,
    override_options,
    paths_argument,
    quiet_option,
    rejects_option,
)
from ._run import check_format, check_paths, print_report, refuse_overwriting_inputs


def _epilog() -> str:
    from ..importers import format_help

    return (
        "\b\nFORMAT:\n"
        + "\n".join(f"  {line}" for line in format_help().splitlines())
        + "\n\n"
        + PATHS_HELP
        + "\n\b\nExamples:\n"
        "  kp import --from openai examples/tau-bench/gpt-4o-airline.json.gz -o traces.jsonl\n"
        "  kp import --from otel spans.json --domain customer_service -o traces.jsonl\n"
        "  kp import --from auto logs/ -o traces.jsonl --rejects failed.jsonl"
    )


@app.command("import", cls=EpilogWhenShown, epilog_from=_epilog)
@paths_argument
@from_option(default=None)
@output_option("Write ReasoningTraces here, one JSON line each (default stdout).")
@rejects_option
@override_options
@max_errors_option
@quiet_option
def import_command(
    paths: tuple[str, ...],
    source_format: str,
    output: str | None,
    rejects: str | None,
    task_domain: str | None,
    success: bool | None,
    confidence: float | None,
    max_errors: int | None,
    quiet: bool,
) -> None:
    """Convert agent logs (OpenAI, Anthropic, OpenTelemetry, LangSmith, ATIF…) to ReasoningTraces."""
    from ..importers import ImportOptions
    from ..runs import convert_files

    files = check_paths(paths)
    refuse_overwriting_inputs(files, output=output, rejects=rejects)
    check_format(source_format)
    console = stderr_console()
    report = convert_files(
        files,
        source_format=source_format,
        output=output or "-",
        options=ImportOptions(task_domain=task_domain, success=success, confidence=confidence),
        rejects=rejects,
        max_errors=max_errors,
        console=console,
        progress=not quiet,
    )
    print_report(console, report, quiet)
    raise click.exceptions.Exit(report.exit_code())
