"""``kp score``'s run: its option groups, its usage checks, and the loop that writes units.

The scoring itself is the library's (:mod:`knowledgepulse.scoring._run`): whether the units
come from this process (:func:`~knowledgepulse.scoring._run.iter_scored_units`) or from
worker processes (:func:`~knowledgepulse.scoring._parallel.score_records_in_workers`), they are
written here by one loop, in input order: a unit's lines, its ``--accepted`` traces, the
tally, the summary and the sinks take each trace together, so a stop leaves them agreeing.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import ExitStack, closing
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..runs import Run, open_writer, signals_held, stderr_console
from ._integrations import ResultSinks
from ._options import profile_registry
from ._run import check_paths, read_conversions, refuse_overwriting_inputs
from ._score_table import print_score_table, table_row

if TYPE_CHECKING:
    from ..embedding import Embedder
    from ..importers import ImportOptions
    from ..io._writers import LineWriter
    from ..kb import KnowledgeBase
    from ..records import ScoreRecord
    from ..reporting import ScoreSummary
    from ..scoring._profiles import ProfileRegistry
    from ..scoring._run import ScoredTrace, ScoredUnit, ScoringEngine
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


class ScoreRun:
    """The outputs of one ``kp score`` run and the loop that writes scored units into them."""

    def __init__(
        self, stack: ExitStack, plan: ScorePlan, outputs: ScoreOutputs, threshold: float | None
    ) -> None:
        from ..reporting import ScoreSummary

        self.plan, self.outputs, self.threshold = plan, outputs, threshold
        self.summary: ScoreSummary = ScoreSummary(threshold)
        self.rows: list[tuple[str, ...]] = []
        self.out: LineWriter = open_writer(stack, outputs.output)
        self.accepted_out = open_writer(stack, outputs.accepted) if outputs.accepted else None
        self.run = Run(
            stack,
            label="scoring",
            quiet=outputs.quiet,
            rejects=outputs.rejects,
            max_errors=outputs.max_errors,
            console=stderr_console(),
        )

    def units(
        self,
        engine: ScoringEngine,
        reader: Callable[..., Any] | None,
        inputs: InputChoices,
        choice: EngineChoice,
    ) -> Generator[ScoredUnit, None, None]:
        """The scored units, in input order: from worker processes when the plan allows
        (:func:`~knowledgepulse.scoring._parallel.plan_workers`), else from ``engine``."""
        from ..scoring._parallel import plan_workers
        from ..scoring._run import iter_scored_units

        plan = plan_workers(
            choice.workers,
            self.plan.files,
            engine=choice.engine,
            embedding=self.plan.embedder is not None,
            source_format=inputs.source_format,
            sinks=self.plan.sinks.active,
        )
        if plan.refusal is not None:
            raise click.UsageError(plan.refusal)
        if plan.note is not None:
            stderr_console().print(plan.note, markup=False, highlight=False)
        files, options, run = self.plan.files, inputs.options(), self.run
        if plan.workers:
            from_workers = self._from_workers(plan.workers, options)
            return read_conversions(files, "trace", options, run, from_workers)
        conversions = read_conversions(files, inputs.source_format, options, run, reader)
        return iter_scored_units(
            engine,
            conversions,
            threshold=self.threshold,
            accepted_lines=self.accepted_out is not None,
        )

    def _from_workers(
        self, workers: int, options: ImportOptions
    ) -> Callable[..., Iterator[ScoredUnit]]:
        """A reader for :func:`read_conversions` that scores on ``workers`` processes."""
        from ..io._reader import iter_records
        from ..scoring._parallel import ScoringSettings, score_records_in_workers

        profiles = self.plan.profiles
        settings = ScoringSettings(
            options=options,
            profiles=tuple(profiles[name] for name in profiles),
            threshold=self.threshold,
            accepted_lines=self.accepted_out is not None,
        )

        def lost(why: str) -> None:
            self.run.console.print(
                f"a worker process ended ({why}): its records and the rest are scored in "
                "this process",
                markup=False,
                highlight=False,
            )

        def reader(files: Sequence[str], _format: str, _options: Any) -> Iterator[ScoredUnit]:
            records = iter_records(files, parse=False)
            return score_records_in_workers(records, settings, workers, on_worker_lost=lost)

        return reader

    def write(self, units: Generator[ScoredUnit, None, None]) -> None:
        """Write every unit: each trace's line, its accepted line, its count, its table row,
        its summary entry and its sinks together (a stop leaves them agreeing)."""
        tally = self.run.tally
        with closing(units):  # stops the workers now, whatever ends the loop
            for unit in units:
                if not unit.traces:
                    tally.processed += unit.counted
                    continue
                last = unit.traces[-1]
                for scored in unit.traces:
                    self._write(scored, unit, counted=scored is last and not unit.problems)

    def _write(self, scored: ScoredTrace, unit: ScoredUnit, *, counted: bool) -> None:
        from ..records import ScoreRecord

        line, record = self._labelled(scored)
        row = None
        if self.outputs.table:
            row = table_row(record or ScoreRecord.model_validate_json(line))
        with signals_held():
            self.out.write_line(line)
            if scored.passed and self.accepted_out is not None:
                assert scored.accepted is not None
                self.accepted_out.write_line(scored.accepted)
            if counted:
                self.run.tally.processed += unit.counted
            if row is not None:
                self.rows.append(row)
            self.summary.add(scored.value, scored.domain, scored.passed, novelty=scored.novelty)
            if record is not None:  # the sinks take it once it is written
                assert scored.trace is not None and scored.score is not None
                self.plan.sinks.add_score(scored.trace, scored.score, record)
        self.run.step()

    def _labelled(self, scored: ScoredTrace) -> tuple[str, ScoreRecord | None]:
        """The line as written, and its record when the sinks take it (with its group)."""
        if not self.plan.sinks.active:
            return scored.line, None
        from ..io._writers import dumps
        from ..records import ScoreRecord

        assert scored.trace is not None
        record = ScoreRecord.model_validate_json(scored.line)
        record = self.plan.sinks.label(record, scored.trace.to_dict())
        return dumps(record.to_dict()), record

    def finish(self) -> None:
        """The table, the accounting and summary, the sinks; then exit with the run's status."""
        tally = self.run.tally
        if self.outputs.table:
            print_score_table(self.rows, self.threshold, self.outputs.output)
        if not self.outputs.quiet or tally.interrupted:
            tally.print_folded()
            console = self.run.console
            if tally.interrupted:
                console.print("interrupted: the output holds every line written so far")
            console.print(tally.accounting(), highlight=False)
            if self.summary.count:
                console.print(self.summary.render())
            elapsed = tally.elapsed
            rate = self.summary.count / elapsed if elapsed > 0 else 0.0
            console.print(f"took {elapsed:.2f} s ({rate:,.0f} traces/s)", highlight=False)
        sink_code = self.plan.sinks.finish(self.run.console, self.outputs.quiet)
        raise click.exceptions.Exit(max(tally.exit_code(), sink_code))
