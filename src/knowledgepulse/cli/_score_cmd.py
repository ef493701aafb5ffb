"""``kp score``: one score line per trace, a summary on stderr, the sharing gate."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..distributed._cli import check_engine, engine_options
from ._app import app
from ._integrations import ResultSinks, integration_options
from ._options import (
    PATHS_HELP,
    from_option,
    max_errors_option,
    output_option,
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
    stderr_console,
)
from ._run import signals_held as _signals_held
from ._score_table import print_score_table
from ._score_table import table_row as _table_row

if TYPE_CHECKING:
    from ..kb import KnowledgeBase


@app.command(
    "score",
    epilog=(
        PATHS_HELP + "\n\b\nExamples:\n"
        "  kp score examples/traces.jsonl\n"
        "  kp score logs/ --threshold 0.6 --accepted keep.jsonl --rejects bad.jsonl -o scores.jsonl\n"
        "  cat traces.jsonl | kp score - --no-embed\n"
        "  kp score --from openai conversations.json --profiles examples/profiles.toml\n"
        "  kp score examples/traces.jsonl -o scores.jsonl --table"
    ),
)
@paths_argument
@output_option("Write score lines here (default stdout; .gz compresses).")
@click.option(
    "--threshold",
    type=click.FloatRange(0.0, 1.0),
    metavar="T",
    help="Sharing gate: a trace passes when its score >= T.",
)
@click.option(
    "--accepted",
    metavar="FILE",
    help="Write the full traces that pass --threshold here, metadata.quality_score set to their score.",
)
@rejects_option
@click.option("--no-embed", is_flag=True, help="Do not embed: novelty is 0.5 for every trace.")
@click.option(
    "--embedder",
    "embedder_choice",
    type=click.Choice(["auto", "onnx", "openvino", "bf16", "static"]),
    default="auto",
    show_default=True,
    help="auto: on CPUs with native bf16, openvino (bf16), else bf16 (torch, the fast "
    "extra); elsewhere onnx (fp32). static: token vectors derived from MiniLM, far faster "
    "and less accurate, for a first pass over huge piles (a --kb made with it takes only "
    "its vectors).",
)
@profiles_option
@click.option(
    "--kb",
    metavar="FILE|URL",
    help="Measure novelty against this knowledge base (an SQLite file, created if missing, or "
    "a postgresql:// URL) and store traces in it.",
)
@click.option(
    "--add",
    type=click.Choice(["all", "accepted", "none"]),
    help="Which scored traces go into --kb (default: accepted with --threshold, else all).",
)
@from_option()
@override_options
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=64,
    show_default=True,
    help="Traces embedded per batch.",
)
@max_errors_option
@engine_options
@click.option(
    "--table",
    is_flag=True,
    help="Also print a table of every trace's score and breakdown on stdout.",
)
@integration_options("score")
@quiet_option
def score_command(  # noqa: C901  (issue 21 item 2 shortens it; until then over the limit)
    paths: tuple[str, ...],
    output: str | None,
    threshold: float | None,
    accepted: str | None,
    rejects: str | None,
    no_embed: bool,
    embedder_choice: str,
    profiles: Path | None,
    kb: str | None,
    add: str | None,
    source_format: str,
    task_domain: str | None,
    success: bool | None,
    confidence: float | None,
    batch_size: int,
    max_errors: int | None,
    engine: str,
    address: str | None,
    workers: int | None,
    table: bool,
    junit: str | None,
    group_by: str | None,
    otel_endpoint: str | None,
    quiet: bool,
) -> None:
    """Score ReasoningTraces: one JSON line per trace with the score and its breakdown."""
    from ..importers import ImportOptions
    from ..records import ScoreRecord
    from ..reporting import ScoreSummary
    from ..scoring._scorer import Remember, Scorer

    if accepted and threshold is None:
        raise click.UsageError("--accepted needs --threshold")
    if table and output is None:
        raise click.UsageError("--table prints on stdout: give -o FILE for the JSON lines")
    check_engine(engine, address, workers, local_workers=True)
    files = check_paths(paths)
    refuse_overwriting_inputs(files, output=output, accepted=accepted, rejects=rejects, junit=junit)
    options = ImportOptions(task_domain=task_domain, success=success, confidence=confidence)
    console = stderr_console()
    registry = profile_registry(profiles)  # usage errors first, before the embedder talks
    if kb is not None and no_embed:
        raise click.UsageError("--kb compares embeddings: it cannot be used with --no-embed")
    if add is not None and kb is None:
        raise click.UsageError("--add says what goes into the knowledge base: give --kb")
    remember: Remember = add or ("accepted" if threshold is not None else "all")  # type: ignore[assignment]
    if kb is not None and remember == "accepted" and threshold is None:
        raise click.UsageError("--add accepted needs --threshold")
    sinks = ResultSinks(
        junit=junit,
        group_by=group_by,
        otel_endpoint=otel_endpoint,
        suite="value scores",
        properties={"paths": " ".join(files)},
        threshold=threshold,
    )
    embedder = _bulk_embedder(no_embed, embedder_choice, console, quiet)
    with ExitStack() as stack:
        memory = None
        if kb is not None:
            memory = _open_kb(stack, kb, embedder, console, quiet)
        scorer: Any = Scorer(
            embedder=embedder,
            profiles=registry,
            batch_size=batch_size,
            memory=memory,
            remember=remember if memory is not None else "all",
            threshold=threshold,
        )
        reader = None
        if engine == "ray":
            from ..distributed._cli import ray_reader, ray_scorer

            scorer = ray_scorer(stack, scorer, embedder, memory, address, workers)
            reader = ray_reader
        summary = ScoreSummary(threshold)
        rows: list[tuple[str, ...]] = []
        traces_written = 0
        added = 0
        out = open_writer(stack, output)
        accepted_out = open_writer(stack, accepted) if accepted else None
        run = Run(
            stack,
            label="scoring",
            quiet=quiet,
            rejects=rejects,
            max_errors=max_errors,
            console=console,
        )
        processes = _worker_processes(workers, files, engine, source_format, embedder, sinks)
        with run:
            if processes:
                from ._score_workers import write_scores_from_workers

                write_scores_from_workers(
                    files,
                    options,
                    run,
                    workers=processes,
                    profiles=registry,
                    threshold=threshold,
                    out=out,
                    accepted_out=accepted_out,
                    summary=summary,
                    table_rows=rows if table else None,
                    table_row=_table_row,
                )
            else:
                tally = run.tally
                for conversion, trace, score in scorer.iter_scores(
                    _traces_with_conversion(
                        read_conversions(files, source_format, options, run, reader), run
                    ),
                    payload=True,
                    where=lambda conversion: conversion.records[0].where,
                ):
                    added += score.stored == "added"
                    record = conversion.records[0] if len(conversion.records) == 1 else None
                    line = ScoreRecord.data_of(
                        score,
                        trace,
                        source=conversion.records[0].source,
                        line=conversion.records[0].line,
                        index=record.index if record is not None else None,
                        threshold=threshold,
                    )
                    labelled = None
                    if sinks.active:  # JUnit, OTel events, grouping: they take the record
                        labelled = sinks.label(ScoreRecord.model_validate(line), trace.to_dict())
                        line = labelled.to_dict()
                    passed = line.get("passed")
                    row = _table_row(ScoreRecord.model_validate(line)) if table else None
                    # The summary and the table take the line with the tally, all or none:
                    # a stop taken once the line is written leaves the three agreeing.
                    with _signals_held():
                        out.write_json(line)
                        if passed and accepted_out is not None:
                            data = trace.to_dict()
                            data["metadata"]["quality_score"] = score.value
                            accepted_out.write_json(data)
                        traces_written += 1
                        if trace is conversion.traces[-1] and not conversion.problems:
                            tally.processed += conversion.counted
                        if row is not None:
                            rows.append(row)
                        summary.add(line["score"], line["domain"], passed)
                        if labelled is not None:
                            sinks.add_score(trace, score, labelled)
                    run.step()
        out.flush()
    tally = run.tally
    if table:
        print_score_table(rows, threshold, output)
    if not quiet or tally.interrupted:
        tally.print_folded()
        _print_summary(run.console, summary, tally)
    sink_code = sinks.finish(run.console, quiet)
    raise click.exceptions.Exit(max(tally.exit_code(), sink_code))


def _print_summary(console: Any, summary: Any, tally: Any) -> None:
    if tally.interrupted:
        console.print("interrupted: the output holds every line written so far")
    console.print(tally.accounting(), highlight=False)
    if summary.count:
        console.print(summary.render())
    elapsed = tally.elapsed
    rate = summary.count / elapsed if elapsed > 0 else 0.0
    console.print(f"took {elapsed:.2f} s ({rate:,.0f} traces/s)", highlight=False)


def _worker_processes(
    requested: int | None,
    files: list[str],
    engine: str,
    source_format: str,
    embedder: Any,
    sinks: ResultSinks,
) -> int:
    """Worker processes for this run (0: in process); ``--workers`` where they cannot be used
    is a usage error.

    Only traces scored independently of each other can be: no embedder (novelty depends on
    what came before), no knowledge base (it needs the embedder), ReasoningTrace records (other
    formats may group records over a file), no JUnit, OTel or grouping sink (they take the
    validated records here).
    """
    from ..scoring._parallel import choose_workers

    if engine == "ray":
        return 0
    if embedder is not None:
        # Novelty depends on the traces before each one, and the embedder's own threads
        # already use every core: worker processes would only compete with it. Same output.
        if requested is not None and requested > 1:
            stderr_console().print(
                f"--workers {requested}: traces are embedded in this process (the embedder "
                "uses every core itself); worker processes serve runs with --no-embed",
                markup=False,
                highlight=False,
            )
        return 0
    why_not = None
    if source_format != "trace":
        why_not = "it reads ReasoningTrace records, not --from " + source_format
    elif sinks.active:
        why_not = "it cannot be used with --junit, --group-by or --otel-endpoint"
    if why_not is not None:
        if requested is not None and requested > 1:
            raise click.UsageError(f"--workers {requested} with --engine local: {why_not}")
        return 0
    return choose_workers(requested, files)


def _traces_with_conversion(conversions: Any, run: Run) -> Any:
    """(conversion, trace) for every trace; a record with no trace is processed at once."""
    for conversion in conversions:
        if not conversion.traces:
            run.tally.processed += conversion.counted
            continue
        for trace in conversion.traces:
            yield conversion, trace


def _open_kb(
    stack: ExitStack, location: str, embedder: Any, console: Any, quiet: bool
) -> KnowledgeBase:
    """The knowledge base at ``location``, checked against the embedder, closed with ``stack``."""
    from ..kb import EmbeddingIdentity, open_knowledge_base

    if embedder is None:
        raise click.UsageError("--kb needs the embedder (none is installed or it is turned off)")
    kb = open_knowledge_base(location, EmbeddingIdentity.of(embedder))
    stack.callback(kb.close)
    if not quiet:
        console.print(f"knowledge base: {kb.location} ({len(kb):,} traces)", markup=False)
    return kb


def _bulk_embedder(no_embed: bool, choice: str, console: Any, quiet: bool) -> Any:
    """The embedder for a bulk run (None: novelty 0.5), saying which one and why."""
    from ..embedding import MissingEmbedderRuntime, ModelDirectoryError, choose_embedder

    if no_embed:
        return None
    try:
        chosen = choose_embedder(choice, bulk=True)
    except ModelDirectoryError:
        raise  # a usage error naming the directory (exit 2)
    except MissingEmbedderRuntime as exc:
        raise click.UsageError(f"--embedder {choice}: {exc}") from None
    if not quiet:
        label = chosen.embedder.name if chosen.embedder is not None else "none (novelty 0.5)"
        console.print(f"embedder: {label} — {chosen.reason}", markup=False, highlight=False)
    if chosen.kind == "static":
        from ._static_cmd import say_if_building

        say_if_building(console, quiet)
    if chosen.embedder is None:
        return None
    from ..embedding._dedupe import DeduplicatingEmbedder

    # A pile often repeats itself (retries, copies): identical texts are embedded once a run.
    return DeduplicatingEmbedder(chosen.embedder)
