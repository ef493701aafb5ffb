"""``kp diff A B``: two traces (where they parted, which verdicts flipped) or two evaluation runs."""

from __future__ import annotations

import click

from ._app import app
from ._options import from_option


@app.command(
    "diff",
    epilog=(
        "\b\nA and B: two trace files (the first trace of each, or --id), two ids in a knowledge\n"
        "base (--kb), or two kp eval / kp score output files (recognised by their schema lines).\n\n"
        "\b\nExit status: 0; 1 with --fail-on-regression when a criterion's pass rate dropped or\n"
        "a case flipped pass -> fail (or, for two traces, a criterion regressed); 2 for usage\n"
        "errors, ids that do not exist, files that hold no trace or result, two rubrics.\n\n"
        "\b\nExamples:\n"
        "  kp diff before.jsonl after.jsonl\n"
        "  kp diff run.json.gz run.json.gz --from openai --id ID_A --id ID_B --json\n"
        "  kp diff kp:trace:1 kp:trace:2 --kb team.sqlite\n"
        "  kp diff evals-main.jsonl evals-branch.jsonl --fail-on-regression --junit diff.xml"
    ),
)
@click.argument("first", metavar="A")
@click.argument("second", metavar="B")
@from_option()
@click.option(
    "--id",
    "ids",
    multiple=True,
    metavar="ID",
    help="The trace to take from A's file (given twice: the first from A, the second from B).",
)
@click.option("--kb", "location", metavar="FILE|URL", help="A and B are ids in this base.")
@click.option(
    "--rubric",
    "rubric_name",
    default="agent",
    show_default=True,
    metavar="NAME_OR_IMPORT_PATH",
    help="Evaluate both traces with this rubric and list the criteria that flipped.",
)
@click.option("--no-rubric", is_flag=True, help="Compare two traces without a rubric.")
@click.option(
    "--by",
    type=click.Choice(["id", "task"]),
    default="id",
    show_default=True,
    help="Pair evaluation cases by id, or by task (the k-th attempt with the k-th).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@click.option(
    "--width",
    type=click.IntRange(40, 400),
    metavar="N",
    default=80,
    show_default=True,
    help="Columns.",
)
@click.option(
    "--fail-on-regression",
    is_flag=True,
    help="Exit 1 when B regressed (a gate for CI).",
)
@click.option("--junit", metavar="FILE", help="Write the regression gate as JUnit XML.")
def diff_command(
    first: str,
    second: str,
    source_format: str,
    ids: tuple[str, ...],
    location: str | None,
    rubric_name: str,
    no_rubric: bool,
    by: str,
    as_json: bool,
    width: int,
    fail_on_regression: bool,
    junit: str | None,
) -> None:
    """Compare two runs: where two traces parted and which criteria flipped, or two evaluations."""
    from ..compare import (
        EvaluationComparison,
        TraceComparison,
        compare_evaluations,
        compare_traces,
        load_results,
        results_kind,
        trace_from_base,
        trace_from_file,
    )

    if len(ids) > 2:
        raise click.BadParameter("give at most two ids (A's, then B's)", param_hint="--id")
    comparison: TraceComparison | EvaluationComparison
    if location is not None:
        if ids:
            raise click.BadParameter("with --kb, A and B are the ids", param_hint="--id")
        from ..kb import open_knowledge_base

        with open_knowledge_base(location) as kb:
            a, b = trace_from_base(kb, first), trace_from_base(kb, second)
        comparison = compare_traces(a, b, rubric=None if no_rubric else rubric_name)
    else:
        for path in (first, second):
            if path == "-":
                raise click.BadParameter(
                    "kp diff reads two files, not standard input", param_hint="A / B"
                )
            if not _exists(path):
                raise click.BadParameter(f"{path}: no such file", param_hint="A / B")
        kinds = {results_kind(first), results_kind(second)} if source_format == "trace" else {None}
        if kinds != {None}:
            if None in kinds:
                raise click.UsageError(
                    "A and B must both be traces or both be kp eval / kp score outputs"
                )
            comparison = compare_evaluations(
                load_results(first).records,
                load_results(second).records,
                by=by,  # type: ignore[arg-type]
                names=(first, second),
            )
        else:
            id_a = ids[0] if ids else None
            id_b = ids[1] if len(ids) > 1 else None
            a = trace_from_file(first, source_format=source_format, trace_id=id_a)
            b = trace_from_file(second, source_format=source_format, trace_id=id_b)
            comparison = compare_traces(a, b, rubric=None if no_rubric else rubric_name)
    if as_json:
        click.echo(comparison.model_dump_json(by_alias=True, indent=2))
    else:
        click.echo(comparison.render(width))
    failures = _regressions(comparison)
    if junit:
        from ..integrations import JUnitReport

        report = JUnitReport(suite="kp diff", properties={"a": first, "b": second})
        report.gate("no regression", "; ".join(failures) if failures else None)
        report.write(junit)
    if fail_on_regression and failures:
        for message in failures:
            click.echo(f"gate failed: {message}", err=True)
        raise click.exceptions.Exit(1)


def _regressions(comparison: object) -> list[str]:
    from ..compare import EvaluationComparison, TraceComparison

    if isinstance(comparison, EvaluationComparison):
        return list(comparison.regressions)
    assert isinstance(comparison, TraceComparison)
    return [
        f"criterion {flip.name} passed on A and failed on B"
        for flip in comparison.flipped
        if flip.direction == "regressed"
    ]


def _exists(path: str) -> bool:
    from pathlib import Path

    return Path(path).exists()
