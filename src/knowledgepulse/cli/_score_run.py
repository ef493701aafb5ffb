"""``kp score``'s run: its option groups, its usage checks, the engine it opens and the
printing.

The run is the library's :func:`~knowledgepulse.runs.score_files` (``runs/_score.py``): the
scoring (:mod:`knowledgepulse.scoring._run`, or worker processes) and the one loop that writes
scored units, in input order, a unit's lines, its ``--accepted`` traces, the tally, the summary
and the sinks taking each trace together, so a stop leaves them agreeing.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..runs import stderr_console
from ._integrations import ResultSinks
from ._options import profile_registry
from ._run import check_format, check_paths, print_report, refuse_overwriting_inputs
from ._score_table import print_score_table, table_row

if TYPE_CHECKING:
    from ..embedding import Embedder
    from ..importers import ImportOptions
    from ..kb import KnowledgeBase
    from ..records import ScoreRecord
    from ..scoring._profiles import ProfileRegistry
    from ..scoring._run import ScoringEngine
    from ..scoring._scorer import Remember


# -- the option groups ---------------------------------------------------------------------


@dataclass(frozen=True)
class InputChoices:
    """What is read: the paths, ``--from`` and the values set on every trace."""

    paths: tuple[str, ...]
    source_format: str
    task_domain: str | None
    success: bool | None
    confidence: float | None

    def options(self) -> ImportOptions:
        from ..importers import ImportOptions

        return ImportOptions(
            task_domain=self.task_domain, success=self.success, confidence=self.confidence
        )


@dataclass(frozen=True)
class ScoreOutputs:
    """Where the results go, and what is said on the terminal."""

    output: str | None
    accepted: str | None
    rejects: str | None
    table: bool
    max_errors: int | None
    quiet: bool


@dataclass(frozen=True)
class ScoringChoices:
    """How traces are scored and remembered."""

    threshold: float | None
    no_embed: bool
    embedder_choice: str
    profiles: Path | None
    kb: str | None
    add: Remember | None
    batch_size: int
    novelty: str = "task"


@dataclass(frozen=True)
class EngineChoice:
    """``--engine``, ``--address``, ``--workers``."""

    engine: str
    address: str | None
    workers: int | None


@dataclass(frozen=True)
class SinkChoices:
    """``--junit``, ``--group-by``, ``--otel-endpoint``."""

    junit: str | None
    group_by: str | None
    otel_endpoint: str | None


# -- before anything is read -----------------------------------------------------------------


@dataclass(frozen=True)
class ScorePlan:
    """A run of ``kp score`` once its options are checked."""

    files: list[str]
    profiles: ProfileRegistry
    remember: Remember
    sinks: ResultSinks
    embedder: Embedder | None


def plan_score(
    inputs: InputChoices,
    outputs: ScoreOutputs,
    scoring: ScoringChoices,
    engine: EngineChoice,
    sinks: SinkChoices,
) -> ScorePlan:
    """Every usage error first, before the embedder talks; then the embedder."""
    from ..distributed._cli import check_engine
    from ..scoring._run import remember_for

    if outputs.accepted and scoring.threshold is None:
        raise click.UsageError("--accepted needs --threshold")
    if outputs.table and outputs.output is None:
        raise click.UsageError("--table prints on stdout: give -o FILE for the JSON lines")
    check_engine(engine.engine, engine.address, engine.workers, local_workers=True)
    files = check_paths(inputs.paths)
    check_format(inputs.source_format)
    refuse_overwriting_inputs(
        files,
        output=outputs.output,
        accepted=outputs.accepted,
        rejects=outputs.rejects,
        junit=sinks.junit,
    )
    registry = profile_registry(scoring.profiles)
    if scoring.kb is not None and scoring.no_embed:
        raise click.UsageError("--kb compares embeddings: it cannot be used with --no-embed")
    if scoring.add is not None and scoring.kb is None:
        raise click.UsageError("--add says what goes into the knowledge base: give --kb")
    remember = remember_for(scoring.add, scoring.threshold)
    if scoring.kb is not None and remember == "accepted" and scoring.threshold is None:
        raise click.UsageError("--add accepted needs --threshold")
    result_sinks = ResultSinks(
        junit=sinks.junit,
        group_by=sinks.group_by,
        otel_endpoint=sinks.otel_endpoint,
        suite="value scores",
        properties={"paths": " ".join(files)},
        threshold=scoring.threshold,
    )
    embedder = _bulk_embedder(scoring.no_embed, scoring.embedder_choice, outputs.quiet)
    return ScorePlan(files, registry, remember, result_sinks, embedder)


def _bulk_embedder(no_embed: bool, choice: str, quiet: bool) -> Embedder | None:
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
    console = stderr_console()
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


# -- the engine --------------------------------------------------------------------------------


def open_engine(
    stack: ExitStack, plan: ScorePlan, scoring: ScoringChoices, choice: EngineChoice, quiet: bool
) -> tuple[ScoringEngine, Callable[..., Any] | None]:
    """The scoring engine (and the reader that goes with it: None for the usual one), its
    knowledge base and Ray closed with ``stack``."""
    from ..scoring._run import check_scoring_engine
    from ..scoring._scorer import Scorer

    memory = None
    if scoring.kb is not None:
        memory = _open_kb(stack, scoring.kb, plan.embedder, quiet, scoring.novelty)
    scorer = Scorer(
        embedder=plan.embedder,
        profiles=plan.profiles,
        batch_size=scoring.batch_size,
        memory=memory,
        remember=plan.remember if memory is not None else "all",
        threshold=scoring.threshold,
        novelty="seed" if scoring.novelty == "seed" else "task",
    )
    if choice.engine != "ray":
        return check_scoring_engine(scorer), None
    from ..distributed._cli import ray_reader, ray_scorer

    ray = ray_scorer(stack, scorer, plan.embedder, memory, choice.address, choice.workers)
    return check_scoring_engine(ray), ray_reader


def _open_kb(
    stack: ExitStack, location: str, embedder: Embedder | None, quiet: bool, novelty: str
) -> KnowledgeBase:
    """The knowledge base at ``location``, checked against the embedder, closed with ``stack``."""
    from ..kb import EmbeddingIdentity, open_knowledge_base

    if embedder is None:
        raise click.UsageError("--kb needs the embedder (none is installed or it is turned off)")
    kb = open_knowledge_base(location, EmbeddingIdentity.of(embedder, novelty))
    stack.callback(kb.close)
    if not quiet:
        stderr_console().print(f"knowledge base: {kb.location} ({len(kb):,} traces)", markup=False)
    return kb


# -- the run -----------------------------------------------------------------------------------


def run_score(
    plan: ScorePlan,
    inputs: InputChoices,
    outputs: ScoreOutputs,
    scoring: ScoringChoices,
    engine_choice: EngineChoice,
) -> None:
    """Score with the library's :func:`~knowledgepulse.runs.score_files`, then print the
    table, the report and the sinks' verdict; exit with the run's status."""
    from ..records import ScoreRecord
    from ..runs import WorkersRefused, score_files

    rows: list[tuple[str, ...]] = []

    def add_row(line: str, record: ScoreRecord | None) -> None:
        rows.append(table_row(record or ScoreRecord.model_validate_json(line)))

    console = stderr_console()
    with ExitStack() as stack:
        engine, reader = open_engine(stack, plan, scoring, engine_choice, outputs.quiet)
        try:
            report = score_files(
                plan.files,
                engine,
                source_format=inputs.source_format,
                options=inputs.options(),
                output=outputs.output or "-",
                accepted=outputs.accepted,
                rejects=outputs.rejects,
                max_errors=outputs.max_errors,
                workers=engine_choice.workers,
                engine_name=engine_choice.engine,
                reader=reader,
                sink=plan.sinks,
                on_line=add_row if outputs.table else None,
                console=console,
                progress=not outputs.quiet,
                embedding=plan.embedder is not None,
            )
        except WorkersRefused as exc:
            raise click.UsageError(str(exc)) from None
    if outputs.table:
        print_score_table(rows, scoring.threshold, outputs.output)
    print_report(console, report, outputs.quiet)
    sink_code = plan.sinks.finish(console, outputs.quiet)
    raise click.exceptions.Exit(max(report.exit_code(), sink_code))
