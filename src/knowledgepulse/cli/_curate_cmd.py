"""``kp curate``: keep the most valuable trace of each group of near-duplicates, order-free."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

import click

from ..distributed._cli import check_engine, engine_options
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
from ._run import (
    Run,
    check_paths,
    open_writer,
    read_conversions,
    refuse_overwriting_inputs,
    signals_held,
    stderr_console,
)


@app.command(
    "curate",
    epilog=(
        PATHS_HELP
        + "\n\b\nThe kept set does not depend on the order of the input: near-duplicates\n"
        "(cosine >= S) are grouped, and each group keeps its highest-value trace (ties: the\n"
        "smallest id). With --kb, what is already stored counts as seen.\n\n"
        "\b\nExamples:\n"
        "  kp curate traces.jsonl -o kept.jsonl --groups groups.jsonl\n"
        "  kp curate --from openai tau-bench.json --similarity 0.95 -o kept.jsonl --groups g.jsonl\n"
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
    help="Write one line per group of near-duplicates: kept, duplicates, reason.",
)
@click.option(
    "--similarity",
    type=click.FloatRange(0.0, 1.0, min_open=True),
    default=None,
    metavar="S",
    help="Cosine similarity from which two traces are near-duplicates (default 0.95).",
)
@click.option(
    "--kb", metavar="FILE|URL", help="A knowledge base whose traces count as already seen."
)
@embedder_option
@profiles_option
@batch_size_option
@click.option(
    "--first-pass",
    type=click.Choice(["none", "static"]),
    default="none",
    show_default=True,
    help="static: static vectors (derived from MiniLM) propose candidate pairs and only "
    "traces in one are embedded by MiniLM, which decides. Not with --kb or --engine ray.",
)
@click.option(
    "--candidate-similarity",
    type=click.FloatRange(-1.0, 1.0),
    default=None,
    metavar="T",
    help="Static cosine from which a pair is a candidate (default 1 - 0.4 x (1 - S)).",
)
@from_option()
@override_options
@rejects_option
@max_errors_option
@engine_options
@quiet_option
def curate_command(  # noqa: C901  (issue 25 splits it; until then over the limit)
    paths: tuple[str, ...],
    output: str,
    groups: str,
    similarity: float | None,
    kb: str | None,
    embedder_choice: str,
    profiles: Path | None,
    batch_size: int,
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
    """Drop near-duplicates: keep the most valuable trace of each group, whatever the order."""
    from ..embedding import choose_embedder
    from ..importers import ImportOptions
    from ..kb import EmbeddingIdentity, open_knowledge_base
    from ..scoring._curation import DEFAULT_SIMILARITY, curate

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
    if first_pass != "none" and engine == "ray":
        raise click.UsageError("--first-pass static runs locally only (not with --engine ray)")
    if candidate_similarity is not None and first_pass == "none":
        raise click.UsageError("--candidate-similarity applies to --first-pass static only")
    registry = profile_registry(profiles)
    files = check_paths(paths)
    refuse_overwriting_inputs(files, output=output, groups=groups, rejects=rejects)
    options = ImportOptions(task_domain=task_domain, success=success, confidence=confidence)
    console = stderr_console()
    chosen = choose_embedder(embedder_choice, bulk=True)
    if chosen.embedder is None:
        raise click.UsageError(f"kp curate compares embeddings, and there is none: {chosen.reason}")
    threshold = similarity if similarity is not None else DEFAULT_SIMILARITY
    pile = []
    with ExitStack() as stack:
        base = None
        if kb is not None:
            base = open_knowledge_base(kb, EmbeddingIdentity.of(chosen.embedder))
            stack.callback(base.close)
        run = Run(
            stack,
            label="reading",
            quiet=quiet,
            rejects=rejects,
            max_errors=max_errors,
            console=console,
        )
        with run:
            for conversion in read_conversions(files, source_format, options, run):
                pile.extend(conversion.traces)
                if not conversion.problems:
                    run.tally.processed += conversion.counted
                run.step()
        tally = run.tally
        if tally.interrupted:
            tally.print_folded()
            console.print(tally.accounting(), highlight=False)
            console.print("interrupted before curating: nothing was written")
            raise click.exceptions.Exit(tally.exit_code())
        if not quiet:
            console.print(f"embedder: {chosen.embedder.name} — {chosen.reason}", markup=False)
        # Curating is a run of its own: a stop here is reported like one while reading,
        # with every record read counted as not processed, since nothing is written.
        read = tally.processed
        tally.processed = 0
        with run:
            if engine == "ray":
                from ..distributed._cli import ray_curate

                result = ray_curate(
                    stack,
                    pile,
                    chosen.embedder,
                    address,
                    workers,
                    similarity=threshold,
                    kb=base,
                    profiles=registry,
                )
            else:
                cheap = None
                if first_pass == "static":
                    cheap = choose_embedder("static").embedder
                    if not quiet:
                        console.print(f"first pass: {cheap.name}", markup=False)  # type: ignore[union-attr]
                    from ._static_cmd import say_if_building

                    say_if_building(console, quiet)
                result = curate(
                    pile,
                    embedder=chosen.embedder,
                    similarity=threshold,
                    kb=base,
                    batch_size=batch_size,
                    profiles=registry,
                    first_pass=cheap,
                    candidate_similarity=candidate_similarity,
                )
            tally.processed = read
        if tally.interrupted:
            tally.print_folded()
            console.print(tally.accounting(), highlight=False)
            console.print("interrupted while curating: nothing was written")
            raise click.exceptions.Exit(tally.exit_code())
        kept_out = open_writer(stack, output)
        groups_out = open_writer(stack, groups)
        with signals_held():
            for trace in result.kept:
                kept_out.write_line(trace.to_json())
            for group in result.groups:
                groups_out.write_json(group.to_dict())
    if not quiet:
        tally.print_folded()
        console.print(tally.accounting(), highlight=False)
        distinct = len(result.values)
        console.print(
            f"traces: {distinct}   kept {len(result.kept)}   dropped {result.dropped} as "
            f"near-duplicates (cosine ≥ {threshold:g}) in {len(result.groups)} groups",
            highlight=False,
        )
        if result.embedded is not None:
            console.print(
                f"first pass: {result.candidate_pairs:,} candidate pairs; MiniLM embedded "
                f"{result.embedded:,} of {distinct:,} traces",
                highlight=False,
            )
        if len(pile) > distinct:
            console.print(f"repeated ids: {len(pile) - distinct} traces read twice counted once")
    raise click.exceptions.Exit(tally.exit_code())
