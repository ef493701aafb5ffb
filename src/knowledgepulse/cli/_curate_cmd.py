"""``kp curate``: keep the most valuable trace of each group of near-duplicates, order-free."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..distributed._cli import check_engine, engine_options
from ..runs import stderr_console
from ._app import app
from ._options import (
    PATHS_HELP,
    batch_size_option,
    embedder_option,
    from_option,
    max_errors_option,
    override_options,
    paths_argument,
    profile_registry,
    profiles_option,
    quiet_option,
    rejects_option,
)
from ._run import check_format, check_paths, print_report, refuse_overwriting_inputs

if TYPE_CHECKING:
    from ..embedding import Embedder
    from ..runs._report import CurateBy


@app.command(
    "curate",
    epilog=(
        PATHS_HELP
        + "\n\b\nThe kept set does not depend on the order of the input: copies of one run\n"
        "(the same normalised text: exact; or an estimated Jaccard similarity of word\n"
        "shingles >= S: near_copy) are grouped around a kept trace, each group keeping its\n"
        "highest-value trace (ties: the smallest id). No embedder is used. With --kb, a copy\n"
        "of a stored trace is dropped. --by embedding groups by whole-trace MiniLM cosine\n"
        "instead (retired as the default: docs/knowledge-base.md says why).\n\n"
        "\b\nExamples:\n"
        "  kp curate traces.jsonl -o kept.jsonl --groups groups.jsonl\n"
        "  kp curate --from openai tau-bench.json --similarity 0.6 -o kept.jsonl --groups g.jsonl\n"
        "  kp curate new/ --kb team.sqlite -o kept.jsonl --groups groups.jsonl"
    ),
)
@paths_argument
@click.option(
    "--output", "-o", metavar="KEPT.jsonl", required=True, help="Write the kept traces here."
)
@click.option(
    "--groups",
    metavar="GROUPS.jsonl",
    required=True,
    help="Write one line per group of copies: kept, relation, duplicates (each with its "
    "relation and similarity), reason.",
)
@click.option(
    "--by",
    "decider",
    type=click.Choice(["copies", "task", "embedding"]),
    default="copies",
    show_default=True,
    help="copies: exact copies by digest, near copies by MinHash of word shingles (no "
    "embedder). task: attempts at one task, by the MiniLM cosine of their task texts "
    "(objective and user turns; relation same_task). embedding: whole-trace MiniLM cosine.",
)
@click.option(
    "--keep-per-task",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    metavar="K",
    help="With --by task: keep the best K attempts of each task (successful first, then by value).",
)
@click.option(
    "--similarity",
    type=click.FloatRange(0.0, 1.0, min_open=True),
    default=None,
    metavar="S",
    help="From which similarity two traces are copies: the estimated Jaccard similarity of "
    "word shingles (default 0.6); with --by embedding the cosine (default 0.95).",
)
@click.option(
    "--kb", metavar="FILE|URL", help="A knowledge base whose traces count as already seen."
)
@embedder_option
@profiles_option
@batch_size_option
@click.option(
    "--work-dir",
    metavar="DIR",
    default=None,
    help="Where vectors and lists are kept while curating (default: .OUTPUT.kp-curate "
    "beside -o). A stopped run leaves its embeddings there for the next run; a finished "
    "run removes what it wrote there.",
)
@click.option(
    "--first-pass",
    type=click.Choice(["none", "static"]),
    default="none",
    show_default=True,
    help="static: static vectors (derived from MiniLM) propose candidate pairs and only "
    "traces in one are embedded by MiniLM, which decides. Not with --kb.",
)
@click.option(
    "--candidate-similarity",
    type=click.FloatRange(-1.0, 1.0),
    default=None,
    metavar="S",
    help="Static cosine from which a pair is a candidate (default: 1 - 0.4 x (1 - the "
    "--similarity)).",
)
@from_option()
@override_options
@rejects_option
@max_errors_option
@engine_options
@quiet_option
def curate_command(
    paths: tuple[str, ...],
    output: str,
    groups: str,
    decider: CurateBy,
    keep_per_task: int,
    similarity: float | None,
    kb: str | None,
    embedder_choice: str,
    profiles: Path | None,
    batch_size: int,
    work_dir: str | None,
    first_pass: str,
    candidate_similarity: float | None,
    source_format: str,
    task_domain: str | None,
    success: bool | None,
    confidence: float | None,
    rejects: str | None,
    max_errors: int | None,
    engine: str,
    address: str | None,
    workers: int | None,
    quiet: bool,
) -> None:
    """Drop copies: keep the most valuable trace of each group of copies, whatever the order."""
    from ..importers import ImportOptions
    from ..runs import curate_files

    _check_options(
        engine, address, workers, first_pass, kb, candidate_similarity, quiet or decider == "copies"
    )
    if decider != "embedding" and (first_pass != "none" or candidate_similarity is not None):
        raise click.UsageError("--first-pass and --candidate-similarity go with --by embedding")
    if keep_per_task != 1 and decider != "task":
        raise click.UsageError("--keep-per-task goes with --by task")
    if decider == "task" and (kb is not None or engine != "local"):
        raise click.UsageError("--by task runs locally and without --kb")
    registry = profile_registry(profiles)
    files = check_paths(paths)
    refuse_overwriting_inputs(files, output=output, groups=groups, rejects=rejects)
    check_format(source_format)
    chosen = None
    if decider != "copies":
        from ..embedding import choose_embedder

        chosen = choose_embedder(embedder_choice, bulk=True)
        if chosen.embedder is None:
            raise click.UsageError(
                f"kp curate --by {decider} compares embeddings, and there is none: {chosen.reason}"
            )
    ray = None
    if engine == "ray":
        from ..distributed._cli import RayCuration

        ray = RayCuration(address, workers)
    console = stderr_console()
    report = curate_files(
        files,
        output=output,
        groups=groups,
        by=decider,
        similarity=similarity,
        embedder=None if chosen is None else chosen.embedder,
        embedder_reason=None if chosen is None else chosen.reason,
        keep_per_task=keep_per_task,
        kb=kb,
        profiles=registry,
        batch_size=batch_size,
        work_dir=work_dir,
        first_pass=_first_pass_embedder(first_pass),
        candidate_similarity=candidate_similarity,
        source_format=source_format,
        options=ImportOptions(task_domain=task_domain, success=success, confidence=confidence),
        rejects=rejects,
        max_errors=max_errors,
        workers=workers,
        ray=ray,
        console=console,
        progress=not quiet,
    )
    print_report(console, report, quiet)
    raise click.exceptions.Exit(report.exit_code())


def _first_pass_embedder(first_pass: str) -> Embedder | None:
    """The static embedder for ``--first-pass static`` (None for ``none``)."""
    if first_pass != "static":
        return None
    from ..embedding import choose_embedder

    return choose_embedder("static").embedder


def _check_options(
    engine: str,
    address: str | None,
    workers: int | None,
    first_pass: str,
    kb: str | None,
    candidate_similarity: float | None,
    quiet: bool,
) -> None:
    check_engine(engine, address, workers, local_workers=True)
    if engine == "local" and workers is not None and workers > 1 and not quiet:
        stderr_console().print(
            f"--workers {workers}: traces are embedded in this process (the embedder uses "
            "every core itself); worker processes serve --engine ray",
            markup=False,
            highlight=False,
        )
    if first_pass != "none" and kb is not None:
        raise click.UsageError(
            "--first-pass static does not combine with --kb: novelty against the base needs "
            "every trace's MiniLM vector"
        )
    if candidate_similarity is not None and first_pass == "none":
        raise click.UsageError("--candidate-similarity applies to --first-pass static only")
