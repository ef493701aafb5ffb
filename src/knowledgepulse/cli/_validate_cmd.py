"""``kp validate``: every invalid record as ``file:line: field.path: problem``."""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any

import click

from ._app import app
from ._options import PATHS_HELP, from_option, max_errors_option, paths_argument, quiet_option
from ._run import Run, check_paths, read_conversions, stderr_console


class _StdoutLines:
    """The console interface the tally needs, printing plain lines to stdout."""

    def print(self, text: str, **_: Any) -> None:
        try:
            click.echo(text)
        except BrokenPipeError:
            from .._output import OutputClosed

            raise OutputClosed from None


@app.command(
    "validate",
    epilog=PATHS_HELP
    + "\n\b\nExamples:\n  kp validate examples/traces.jsonl\n  kp validate logs/ --from openai",
)
@paths_argument
@from_option()
@max_errors_option
@quiet_option
def validate_command(
    paths: tuple[str, ...], source_format: str, max_errors: int | None, quiet: bool
) -> None:
    """Check records against the schema; list each problem as file:line: field.path: problem."""
    files = check_paths(paths)
    console = stderr_console()
    with ExitStack() as stack:
        run = Run(stack, label="validating", quiet=quiet, max_errors=max_errors, console=console)
        run.tally.console = _StdoutLines()  # problems on stdout; hints and progress on stderr
        run.tally.show_all = True
        with run:
            for conversion in read_conversions(files, source_format, None, run):
                run.tally.processed += conversion.counted
                run.step()
    tally = run.tally
    tally.print_folded()
    if not quiet or tally.interrupted:
        console.print(
            f"{tally.accounting()}: {tally.processed} valid, {tally.rejected} invalid",
            highlight=False,
        )
    raise click.exceptions.Exit(tally.exit_code())
