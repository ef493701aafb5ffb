"""``kp curate``: keep the most valuable trace of each group of near-duplicates, order-free."""

from __future__ import annotations

import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from ..distributed._cli import check_engine, engine_options
from ..runs import Run, open_writer, phase_progress, signals_held, stderr_console
from ._app import app
from ._curate_run import read_into, stopped
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
from ._run import check_paths, refuse_overwriting_inputs


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
    "word shingles (default 0.5); with --by embedding the cosine (default 0.95).",
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
    metavar="T",
    help="Static cosine from which a pair is a candidate (default 1 - 0.4 x (1 - S)).",
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
    decider: str,
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
    from ..copies import COPY_SIMILARITY
    from ..embedding import choose_embedder
    from ..importers import ImportOptions
    from ..scoring._curation import DEFAULT_SIMILARITY

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
    if decider == "copies":
        chosen = None
        default_similarity = COPY_SIMILARITY
    else:
        from ..scoring._task_curation import TASK_SIMILARITY

        chosen = choose_embedder(embedder_choice, bulk=True)
        if chosen.embedder is None:
            raise click.UsageError(
                f"kp curate --by {decider} compares embeddings, and there is none: {chosen.reason}"
            )
        default_similarity = DEFAULT_SIMILARITY if decider == "embedding" else TASK_SIMILARITY
    job = _Job(
        files=files,
        source_format=source_format,
        options=ImportOptions(task_domain=task_domain, success=success, confidence=confidence),
        output=output,
        groups=groups,
        threshold=similarity if similarity is not None else default_similarity,
        kb=kb,
        chosen=chosen,
        registry=registry,
        batch_size=batch_size,
        work_dir=Path(work_dir) if work_dir is not None else default_work_dir(output),
        first_pass=first_pass,
        candidate_similarity=candidate_similarity,
        rejects=rejects,
        max_errors=max_errors,
        engine=engine,
        address=address,
        workers=workers,
        quiet=quiet,
        console=stderr_console(),
    )
    if decider == "task":
        from ._curate_copies import curate_tasks_in_memory

        raise click.exceptions.Exit(curate_tasks_in_memory(job, keep_per_task))
    if decider == "copies":
        from ._curate_copies import curate_copies_in_memory, curate_copies_streaming

        run_copies = curate_copies_in_memory if engine == "ray" else curate_copies_streaming
        raise click.exceptions.Exit(run_copies(job))
    if engine == "ray":
        raise click.exceptions.Exit(_curate_in_memory(job))
    raise click.exceptions.Exit(_curate_streaming(job))


def default_work_dir(output: str) -> Path:
    """``.NAME.kp-curate`` beside the output ``-o NAME`` (in the current directory for -)."""
    if output == "-":
        return Path(".kp-curate")
    target = Path(output)
    return target.with_name(f".{target.name}.kp-curate")


@dataclass
class _Job:
    """What ``kp curate`` was asked to do."""

    files: list[str]
    source_format: str
    options: Any
    output: str
    groups: str
    threshold: float
    kb: str | None
    chosen: Any
    registry: Any
    batch_size: int
    work_dir: Path
    first_pass: str
    candidate_similarity: float | None
    rejects: str | None
    max_errors: int | None
    engine: str
    address: str | None
    workers: int | None
    quiet: bool
    console: Any

    def run(self, stack: ExitStack, phase: str = "reading") -> Run:
        return Run(
            stack,
            label=phase,
            quiet=self.quiet,
            rejects=self.rejects,
            max_errors=self.max_errors,
            console=self.console,
        )

    def open_base(self, stack: ExitStack) -> Any:
        if self.kb is None:
            return None
        from ..kb import EmbeddingIdentity, open_knowledge_base

        # Copies need no embedder: the base is opened as it is (its identity unchanged).
        # Embedding curation compares whole-trace vectors (a base of task vectors is refused).
        identity = (
            None if self.chosen is None else EmbeddingIdentity.of(self.chosen.embedder, "seed")
        )
        base = open_knowledge_base(self.kb, identity)
        stack.callback(base.close)
        return base

    def say_embedder(self) -> None:
        if not self.quiet:
            embedder = self.chosen.embedder
            self.console.print(f"embedder: {embedder.name} — {self.chosen.reason}", markup=False)


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


def _curate_streaming(job: _Job) -> int:
    """Read once, keep a few numbers per trace in memory and the rest in the work directory."""
    from ..scoring._spool import remove_work_dir
    from ..scoring._stream_curation import StreamingCuration

    job.say_embedder()  # embedding goes on while reading
    with ExitStack() as stack:
        curation = StreamingCuration(
            job.work_dir,
            embedder=job.chosen.embedder,
            similarity=job.threshold,
            kb=job.open_base(stack),
            profiles=job.registry,
            batch_size=job.batch_size,
            first_pass=_first_pass(job),
            candidate_similarity=job.candidate_similarity,
        )
        stack.callback(curation.close)
        run = read_into(job, stack, curation.add, curation.finish_reading, phase="embedding")
        tally = run.tally
        # Until the outputs are written, every record read counts as not processed.
        read, tally.processed = tally.processed, 0
        if tally.interrupted:
            return stopped(
                job,
                tally,
                "interrupted before curating: nothing was written" + _kept_note(job, curation),
            )
        run.stop_display()
        phases = {"search": "finding near-duplicates", "decide": "deciding candidates"}
        with run, phase_progress(job.console, not job.quiet, phases) as shown:
            curation.decide(progress=shown)
        if tally.interrupted:
            return stopped(
                job,
                tally,
                "interrupted while curating: nothing was written" + _kept_note(job, curation),
            )
        kept_out = open_writer(stack, job.output)
        groups_out = open_writer(stack, job.groups)
        with signals_held():
            curation.write(kept_out.write_line, groups_out.write_line)
            tally.processed = read
    remove_work_dir(job.work_dir)
    if not job.quiet:
        tally.print_folded()
        job.console.print(tally.accounting(), highlight=False)
        _say_result(job, len(curation), curation.kept_count, curation.dropped, curation.groups)
        if curation.repeated:
            job.console.print(f"repeated ids: {curation.repeated} traces read twice counted once")
        if curation.reused:
            job.console.print(
                f"embeddings: {curation.reused:,} reused from an earlier run, "
                f"{curation.embedded:,} made",
                highlight=False,
            )
        if curation.first_pass is not None:
            _say_first_pass(job, curation)
        job.console.print(took_line(curation.timings, len(curation)), highlight=False)
    return int(tally.exit_code())


def _say_first_pass(job: _Job, curation: Any) -> None:
    decided = curation.decided_embedded + curation.decided_reused
    line = (
        f"first pass: {curation.candidate_pairs:,} candidate pairs (static cosine ≥ "
        f"{curation.candidate_similarity:g}); {curation.embedder.name} decided them, "
        f"embedding {decided:,} of {len(curation):,} traces"
    )
    if curation.decided_reused:
        line += f" ({curation.decided_reused:,} reused from an earlier run)"
    job.console.print(line, highlight=False, markup=False)


def _kept_note(job: _Job, curation: Any) -> str:
    curation.close()
    curation.discard_scratch()  # what a re-run makes again anyway: only the vectors stay
    return f"; {curation.stored_vectors:,} embeddings are kept in {job.work_dir} for the next run"


def took_line(timings: Any, traces: int) -> str:
    """``took 12.3 s (812 traces/s): read 2.0 s, embed 8.1 s, search 1.9 s, write 0.3 s``."""
    total = time.perf_counter() - timings.started
    rate = traces / total if total > 0 else 0.0
    return (
        f"took {total:.1f} s ({rate:,.0f} traces/s): read {timings.read:.1f} s, embed "
        f"{timings.embed:.1f} s, search {timings.search:.1f} s, write {timings.write:.1f} s"
    )


def _say_result(job: _Job, distinct: int, kept: int, dropped: int, groups: int) -> None:
    job.console.print(
        f"traces: {distinct}   kept {kept}   dropped {dropped} as "
        f"near-duplicates (cosine ≥ {job.threshold:g}) in {groups} groups",
        highlight=False,
    )


def _curate_in_memory(job: _Job) -> int:
    """``--engine ray``: every trace is read into memory first."""
    from ..distributed._cli import ray_curate

    pile: list[Any] = []
    console = job.console
    with ExitStack() as stack:
        base = job.open_base(stack)
        run = read_into(job, stack, pile.append)
        tally = run.tally
        if tally.interrupted:
            return stopped(job, tally, "interrupted before curating: nothing was written")
        job.say_embedder()
        read, tally.processed = tally.processed, 0
        with run:
            result = ray_curate(
                stack,
                pile,
                job.chosen.embedder,
                job.address,
                job.workers,
                similarity=job.threshold,
                kb=base,
                profiles=job.registry,
                first_pass=_first_pass(job),
                candidate_similarity=job.candidate_similarity,
            )
            tally.processed = read
        if tally.interrupted:
            return stopped(job, tally, "interrupted while curating: nothing was written")
        kept_out = open_writer(stack, job.output)
        groups_out = open_writer(stack, job.groups)
        with signals_held():
            for trace in result.kept:
                kept_out.write_line(trace.to_json())
            for group in result.groups:
                groups_out.write_json(group.to_dict())
    if not job.quiet:
        tally.print_folded()
        console.print(tally.accounting(), highlight=False)
        distinct = len(result.values)
        _say_result(job, distinct, len(result.kept), result.dropped, len(result.groups))
        if result.embedded is not None:
            console.print(
                f"first pass: {result.candidate_pairs:,} candidate pairs; "
                f"{job.chosen.embedder.name} embedded {result.embedded:,} of {distinct:,} "
                "traces on Ray",
                highlight=False,
                markup=False,
            )
        if len(pile) > distinct:
            console.print(f"repeated ids: {len(pile) - distinct} traces read twice counted once")
    return int(tally.exit_code())


def _first_pass(job: _Job) -> Any:
    if job.first_pass != "static":
        return None
    from ..embedding import choose_embedder
    from ._static_cmd import say_if_building

    cheap = choose_embedder("static").embedder
    if not job.quiet:
        job.console.print(f"first pass: {cheap.name}", markup=False)  # type: ignore[union-attr]
    say_if_building(job.console, job.quiet)
    return cheap
