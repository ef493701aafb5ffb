"""``kp redact``: traces in, the same traces with secrets and personal data replaced out."""

from __future__ import annotations

from collections import Counter
from contextlib import ExitStack

import click

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
from ._run import (
    Run,
    check_paths,
    open_writer,
    read_conversions,
    refuse_overwriting_inputs,
    signals_held,
)

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
    from ..redaction import redact_trace

    files = check_paths(paths)
    refuse_overwriting_inputs(files, output=output, rejects=rejects)
    found: Counter[str] = Counter()
    traces_out = 0
    with ExitStack() as stack:
        out = open_writer(stack, output)
        run = Run(stack, label="redacting", quiet=quiet, rejects=rejects, max_errors=max_errors)
        with run:
            for conversion in read_conversions(files, source_format, None, run):
                redacted = [redact_trace(trace, policy=policy) for trace in conversion.traces]
                with signals_held():
                    for trace, report in redacted:
                        out.write_line(trace.to_json())
                        found.update(report.counts)
                    traces_out += len(redacted)
                    if not conversion.problems:
                        run.tally.processed += conversion.counted
                run.step()
    tally = run.tally
    if not quiet or tally.interrupted:
        tally.print_folded()
        run.console.print(f"{tally.accounting()}; traces written: {traces_out}", highlight=False)
        kinds = ", ".join(f"{kind} {count}" for kind, count in sorted(found.items()))
        run.console.print(f"redacted: {kinds or 'nothing'}", highlight=False, markup=False)
    raise click.exceptions.Exit(tally.exit_code())
