"""``kp validate``: every invalid record as ``file:line: field.path: problem``."""

from __future__ import annotations

from typing import Any

import click

from ..runs import stderr_console
from ._app import app
from ._options import PATHS_HELP, from_option, max_errors_option, paths_argument, quiet_option
from ._run import check_format, check_paths


class _StdoutLines:
    """The console interface the tally needs, printing plain lines to stdout."""

    def print(self, text: str, **_: Any) -> None:
        try:
            click.echo(text)
        except BrokenPipeError:
            from ..io._writers import OutputClosed

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
    from ..runs import validate_files

    files = check_paths(paths)
    check_format(source_format)
    console = stderr_console()
    problems = _StdoutLines()  # problems on stdout; hints and progress on stderr
    report = validate_files(
        files,
        source_format=source_format,
        max_errors=max_errors,
        console=console,
        problems_to=problems,
        progress=not quiet,
    )
    for note in report.notes:
        problems.print(note)
    if not quiet or report.interrupted:
        for part in report.closing():
            console.print(part, highlight=False)
    raise click.exceptions.Exit(report.exit_code())
