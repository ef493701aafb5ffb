"""``kp redact``: traces in, the same traces with secrets and personal data replaced out."""

from __future__ import annotations

import click

from ..runs import stderr_console
from ._app import app
from ._options import (
    PATHS_HELP,
    from_option,
    max_errors_option,
    output_option,
    paths_argument,
    quiet_option,
    rejects_option,
)
from ._run import check_format, check_paths, print_report, refuse_overwriting_inputs

_LEVELS = ("federated", "aggregated", "private")


def _epilog() -> str:
    return (
        PATHS_HELP + "\n\b\nLEVEL (what is replaced; see docs/redaction.md):\n"
        "  federated   secrets (API keys, tokens, private keys, cards, passwords)\n"
        "              and direct identifiers (e-mail, phone, IBAN, SSN)\n"
        "  aggregated  the above and labelled dates of birth\n"
        "  private     the above and IP addresses\n"
        "\b\nExamples:\n"
        "  kp redact traces.jsonl -o redacted.jsonl\n"
        "  kp redact --from openai conversations.json --policy federated -o redacted.jsonl"
    )


@app.command("redact", epilog=_epilog())
@paths_argument
@output_option("Write the redacted ReasoningTraces here, one JSON line each (default stdout).")
@click.option(
    "--policy",
    type=click.Choice(_LEVELS),
    metavar="LEVEL",
    help="Redact every trace as LEVEL requires (default: each trace's metadata.privacy_level).",
)
@from_option()
@rejects_option
@max_errors_option
@quiet_option
def redact_command(
    paths: tuple[str, ...],
    output: str | None,
    policy: str | None,
    source_format: str,
    rejects: str | None,
    max_errors: int | None,
    quiet: bool,
) -> None:
    """Replace secrets and personal data in traces by typed placeholders ([EMAIL], [API_KEY:openai]…)."""
    from ..runs import redact_files

    files = check_paths(paths)
    refuse_overwriting_inputs(files, output=output, rejects=rejects)
    check_format(source_format)
    console = stderr_console()
    report = redact_files(
        files,
        output=output or "-",
        policy=policy,
        source_format=source_format,
        rejects=rejects,
        max_errors=max_errors,
        console=console,
        progress=not quiet,
    )
    print_report(console, report, quiet)
    raise click.exceptions.Exit(report.exit_code())
