"""``score_files``: score the traces of files, one score line per trace, and return the run's
report with the summary of the scores.

``kp score`` is this verb with options, the engine's setup and printing. Whether the units
come from this process (:func:`~knowledgepulse.scoring._run.iter_scored_units`) or from worker
processes (:func:`~knowledgepulse.scoring._parallel.score_records_in_workers`), they are read
through :func:`~._run.read_conversions` (the one read -> tally loop) and written by one loop,
in input order: a unit's lines, its accepted traces, the tally, the summary and the sink take
each trace together, so a stop leaves them agreeing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, closing
from typing import TYPE_CHECKING, Any, Protocol

from .._errors import KnowledgePulseError
from ._report import RunReport, ScoreRunSummary
from ._run import Run, open_writer, read_conversions
from ._signals import signals_held, signals_restored
from ._verbs import checked_inputs

if TYPE_CHECKING:
    from .._schema import ReasoningTrace
    from ..importers import ImportOptions
    from ..io._writers import LineWriter
    from ..records import ScoreRecord
    from ..reporting import ScoreSummary
    from ..scoring._run import ScoredTrace, ScoredUnit, ScoringEngine
    from ..scoring._scorer import ValueScore


class WorkersRefused(KnowledgePulseError, ValueError):
    """Worker processes were asked for a run that cannot use them (the message says why)."""


class ScoreSink(Protocol):
    """What else takes each score besides the output lines (kp score's JUnit report, attempt
    groups, OpenTelemetry events): ``active`` when it wants them at all; it may label each
    record before it is written, and counts it in once it is."""

    @property
    def active(self) -> bool: ...

    def label(self, line: ScoreRecord, data: Any) -> ScoreRecord: ...

    def add_score(self, trace: ReasoningTrace, score: ValueScore, line: ScoreRecord) -> None: ...


def score_files(
    paths: Sequence[str],
    engine: ScoringEngine | None = None,
    *,
    source_format: str = "trace",
    options: ImportOptions | None = None,
    output: str = "-",
    accepted: str | None = None,
    rejects: str | None = None,
    max_errors: int | None = None,
    workers: int | None = None,
    engine_name: str = "local",
    reader: Callable[..., Any] | None = None,
    sink: ScoreSink | None = None,
    on_line: Callable[[str, ScoreRecord | None], None] | None = None,
    console: Any = None,
    progress: bool = False,
    embedding: bool | None = None,
) -> RunReport:
    """Score every trace of ``paths`` with ``engine``, one score line each in ``output``.

    Args:
        paths: files, directories and ``-`` for standard input.
        engine: what scores (a :class:`~knowledgepulse.Scorer`, the Ray scorer); default a
            Scorer without an embedder (novelty 0.5). Its ``threshold`` decides ``passed``.
        source_format: ``trace``, ``auto`` or a log format.
        options: values set on every trace (domain, success, confidence).
        output: a file for the score lines (``.gz``: compressed), or ``-``, standard output.
        accepted: a file for the traces that passed the threshold.
        rejects: a file for the refused records (source, line, index, errors, record).
        max_errors: stop reading after this many refused records.
        workers: worker processes (None: as many as help, where the run allows them; see
            :func:`~knowledgepulse.scoring._parallel.plan_workers`).
        engine_name: ``local`` or ``ray`` (which scores on its own workers).
        reader: replaces the reader (Ray's), with the arguments of
            :func:`~knowledgepulse.importers.read_traces_from_paths`.
        sink: takes each score besides the output lines (see :class:`ScoreSink`).
        on_line: told of each line once it is written, with its record when the sink took it.
        console: a rich Console for rejections, notes and progress (None: nothing is shown).
        progress: draw a progress bar on ``console`` when it is a terminal.
        embedding: whether ``engine`` embeds (None: whether it has an embedder); a run that
            embeds is not given worker processes.

    The summary is a :class:`~._report.ScoreRunSummary`. Raises FileNotFoundError,
    ConversionError (unknown format), :class:`~._paths.OutputOverwritesInput` and
    :class:`WorkersRefused` before anything is written.
    """
    from ..reporting import ScoreSummary
    from ..scoring._parallel import plan_workers
    from ..scoring._run import iter_scored_units
    from ..scoring._scorer import Scorer

    files = checked_inputs(paths, source_format, output=output, accepted=accepted, rejects=rejects)
    engine = engine if engine is not None else Scorer()
    if accepted is not None and engine.threshold is None:
        raise ValueError("accepted traces need a threshold")
    plan = plan_workers(
        workers,
        files,
        engine=engine_name,
        embedding=(
            getattr(engine, "embedder", None) is not None if embedding is None else embedding
        ),
        source_format=source_format,
        sinks=sink is not None and sink.active,
    )
    if plan.refusal is not None:
        raise WorkersRefused(plan.refusal)
    summary = ScoreSummary(engine.threshold)
    with ExitStack() as stack:
        stack.enter_context(signals_restored())
        writer = _Writer(
            open_writer(stack, output),
            open_writer(stack, accepted) if accepted else None,
            summary,
            sink if sink is not None and sink.active else None,
            on_line,
        )
        run = Run(
            stack,
            label="scoring",
            quiet=not progress,
            rejects=rejects,
            max_errors=max_errors,
            console=console,
        )
        if plan.note is not None:
            run.console.print(plan.note, markup=False, highlight=False)
        with run:
            if plan.workers:
                from_workers = _worker_reader(
                    plan.workers, options, engine, accepted is not None, run
                )
                units = read_conversions(files, "trace", options, run, from_workers)
            else:
                conversions = read_conversions(files, source_format, options, run, reader)
                units = iter_scored_units(
                    engine,
                    conversions,
                    threshold=engine.threshold,
                    accepted_lines=accepted is not None,
                )
            writer.write(units, run)
        writer.out.flush()
    width = run.console.width if console is not None else 80
    return RunReport.of_tally("score", files, run.tally, ScoreRunSummary.of(summary, width=width))


class _Writer:
    """The one loop that writes scored units: each trace's line, its accepted line, its count,
    its summary entry and its sink together (a stop leaves them agreeing)."""

    def __init__(
        self,
        out: LineWriter,
        accepted_out: LineWriter | None,
        summary: ScoreSummary,
        sink: ScoreSink | None,
        on_line: Callable[[str, ScoreRecord | None], None] | None,
    ) -> None:
        self.out, self.accepted_out, self.summary = out, accepted_out, summary
        self.sink, self.on_line = sink, on_line

    def write(self, units: Iterator[ScoredUnit], run: Run) -> None:
        tally = run.tally
        with closing(units):  # type: ignore[type-var]  # stops the workers now, however it ends
            for unit in units:
                if not unit.traces:
                    tally.processed += unit.counted
                    continue
                last = unit.traces[-1]
                for scored in unit.traces:
                    self._write(scored, unit, run, counted=scored is last and not unit.problems)

    def _write(self, scored: ScoredTrace, unit: ScoredUnit, run: Run, *, counted: bool) -> None:
        line, record = self._labelled(scored)
        with signals_held():
            self.out.write_line(line)
            if scored.passed and self.accepted_out is not None:
                assert scored.accepted is not None
                self.accepted_out.write_line(scored.accepted)
            if counted:
                run.tally.processed += unit.counted
            run.tally.outputs += 1
            self.summary.add(scored.value, scored.domain, scored.passed, novelty=scored.novelty)
            if record is not None and self.sink is not None:  # it takes it once it is written
                assert scored.trace is not None and scored.score is not None
                self.sink.add_score(scored.trace, scored.score, record)
            if self.on_line is not None:
                self.on_line(line, record)
        run.step()

    def _labelled(self, scored: ScoredTrace) -> tuple[str, ScoreRecord | None]:
        """The line as written, and its record when the sink takes it (with its group): the
        record is made from the fields the scorer gave, labelled, then written, once."""
        if self.sink is None or scored.data is None:  # no sink, or a worker wrote the line
            return scored.line, None
        from ..io._writers import dumps
        from ..records import ScoreRecord

        assert scored.trace is not None
        record = ScoreRecord.model_validate(scored.data)
        record = self.sink.label(record, scored.trace.to_dict())
        return dumps(record.to_dict()), record


def _worker_reader(
    workers: int, options: ImportOptions | None, engine: ScoringEngine, accepted: bool, run: Run
) -> Callable[..., Iterator[ScoredUnit]]:
    """A reader for :func:`read_conversions` that scores on ``workers`` processes."""
    from ..importers import ImportOptions
    from ..io._reader import iter_records
    from ..scoring._parallel import ScoringSettings, score_records_in_workers

    profiles = engine.profiles
    settings = ScoringSettings(
        options=options or ImportOptions(),
        profiles=tuple(profiles[name] for name in profiles),
        threshold=engine.threshold,
        accepted_lines=accepted,
    )

    def lost(why: str) -> None:
        run.console.print(
            f"a worker process ended ({why}): its records and the rest are scored in this process",
            markup=False,
            highlight=False,
        )

    def reader(files: Sequence[str], _format: str, _options: Any) -> Iterator[ScoredUnit]:
        records = iter_records(files, parse=False)
        return score_records_in_workers(records, settings, workers, on_worker_lost=lost)

    return reader
