"""``kp report``: one self-contained HTML page from kp score / kp eval outputs."""

from __future__ import annotations

import click

from ..runs import EXIT_OK, EXIT_REJECTED, MAX_REJECTIONS_SHOWN, stderr_console
from ._app import app
from ._options import quiet_option
from ._run import check_paths, refuse_overwriting_inputs


@app.command(
    "report",
    epilog=(
        "\b\nExamples:\n"
        "  kp score examples/traces.jsonl --threshold 0.6 -o scores.jsonl\n"
        "  kp eval examples/scheduling.jsonl --rubric scheduling -o evals.jsonl\n"
        "  kp report scores.jsonl evals.jsonl -o report.html"
    ),
)
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@click.option(
    "--output",
    "-o",
    default="knowledgepulse-report.html",
    show_default=True,
    metavar="FILE",
    help="The HTML file to write.",
)
@click.option(
    "--threshold",
    type=click.FloatRange(0.0, 1.0),
    metavar="T",
    help="Draw this sharing threshold (default: the one kp score used).",
)
@click.option(
    "--title",
    metavar="TITLE",
    default="knowledgepulse report",
    show_default=True,
    help="The page title.",
)
@click.option(
    "--group-by",
    metavar="FIELD",
    help="Add attempts by task: per value of FIELD (as given to kp score/eval --group-by, or a "
    "field of the records) attempts, pass@k, best and mean.",
)
@quiet_option
def report_command(
    files: tuple[str, ...],
    output: str,
    threshold: float | None,
    title: str,
    group_by: str | None,
    quiet: bool,
) -> None:
    """One self-contained HTML report (plots, no network needed) from kp score / kp eval outputs."""
    from ..reporting import NoRecordsError, write_html_report

    paths = check_paths(files)
    refuse_overwriting_inputs(paths, output=output)
    console = stderr_console()
    try:
        summary = write_html_report(
            paths, output, threshold=threshold, title=title, group_by=group_by
        )
    except NoRecordsError as exc:
        for reason in exc.skipped[:MAX_REJECTIONS_SHOWN]:
            console.print(reason, markup=False, highlight=False)
        raise click.ClickException(str(exc)) from None
    for warning in summary.warnings:
        console.print(f"warning: {warning}", markup=False, highlight=False)
    if not quiet:
        console.print(
            f"wrote {output}: {summary.n_scores} score records, {summary.n_evals} evaluation "
            f"records, {summary.skipped_lines} lines skipped",
            highlight=False,
        )
        for reason in summary.skipped[:MAX_REJECTIONS_SHOWN]:
            console.print(reason, markup=False, highlight=False)
    raise click.exceptions.Exit(EXIT_REJECTED if summary.skipped_lines else EXIT_OK)
