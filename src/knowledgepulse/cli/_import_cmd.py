"""``kp import``: agent logs in, ReasoningTraces out (one JSON line each)."""

from __future__ import annotations

from contextlib import ExitStack

import click

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
from ._run import (
    Run,
    check_paths,
    open_writer,
    read_conversions,
    refuse_overwriting_inputs,
    signals_held,
)


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

    files = check_paths(paths)
    refuse_overwriting_inputs(files, output=output, rejects=rejects)
    options = ImportOptions(task_domain=task_domain, success=success, confidence=confidence)
    traces_out = 0
    with ExitStack() as stack:
        out = open_writer(stack, output)
        run = Run(stack, label="importing", quiet=quiet, rejects=rejects, max_errors=max_errors)
        with run:
            for conversion in read_conversions(files, source_format, options, run):
                with signals_held():
                    for trace in conversion.traces:
                        out.write_line(trace.to_json())
                    traces_out += len(conversion.traces)
                    if not conversion.problems:
                        run.tally.processed += conversion.counted
                run.step()
    tally = run.tally
    if not quiet or tally.interrupted:
        tally.print_folded()
        not_runs = f"; not runs: {tally.not_runs} (named above)" if tally.not_runs else ""
        run.console.print(
            f"{tally.accounting()}; traces written: {traces_out}{not_runs}", highlight=False
        )
    raise click.exceptions.Exit(tally.exit_code())
