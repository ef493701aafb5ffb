"""The score run, as a library: score a unit of records, stamp an accepted trace, say what a
knowledge base remembers.

``kp score`` (in process or on worker processes), :func:`~knowledgepulse.distributed.score_dataset`
and the capture integration all build their lines here, so a score line, an ``--accepted``
trace and a ``--rejects`` entry have one definition each. A *unit* is what
:func:`~knowledgepulse.importers.read_traces` gives for one or more input records (a
:class:`~knowledgepulse.importers.Conversion`): its traces, or the problems that reject it.

The engine that scores is anything that satisfies :class:`ScoringEngine`: the local
:class:`~knowledgepulse.Scorer` and the Ray scorer both do, and :func:`check_scoring_engine`
says so once, where a caller chooses one.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from typing import (
    TYPE_CHECKING,
    Any,
    Literal,
    NamedTuple,
    Protocol,
    TypeVar,
    overload,
    runtime_checkable,
)

if TYPE_CHECKING:
    from .._schema import ReasoningTrace
    from ..importers import Conversion
    from ..io._reader import InputRecord
    from ._formulas import ValueScore
    from ._profiles import ProfileRegistry
    from ._scorer import Remember

__all__ = [
    "ScoredTrace",
    "ScoredUnit",
    "ScoringEngine",
    "accepted_trace",
    "check_scoring_engine",
    "iter_scored_units",
    "rejection_entry",
    "remember_for",
    "score_unit",
    "scored_trace",
]

P = TypeVar("P")


@runtime_checkable
class ScoringEngine(Protocol):
    """What scores traces in order: :class:`~knowledgepulse.Scorer` and the Ray scorer.

    ``iter_scores`` streams scores in input order (with ``payload=True``, ``(payload, trace,
    score)`` for ``(payload, trace)`` pairs); ``score_many`` is its list form.
    """

    profiles: ProfileRegistry
    batch_size: int
    threshold: float | None

    def score_many(self, traces: Iterable[Any]) -> list[ValueScore]: ...

    @overload
    def iter_scores(
        self, traces: Iterable[Any], *, payload: Literal[False] = ...
    ) -> Iterator[ValueScore]: ...

    @overload
    def iter_scores(
        self,
        traces: Iterable[tuple[P, ReasoningTrace]],
        *,
        payload: Literal[True],
        where: Callable[[P], str | None] | None = None,
    ) -> Iterator[tuple[P, ReasoningTrace, ValueScore]]: ...


def check_scoring_engine(engine: object) -> ScoringEngine:
    """``engine``, checked once against :class:`ScoringEngine` (a ``TypeError`` if it is not one)."""
    if not isinstance(engine, ScoringEngine):
        raise TypeError(
            f"{type(engine).__name__} is not a scoring engine: it needs score_many, "
            "iter_scores, profiles, batch_size and threshold"
        )
    return engine


def remember_for(add: Remember | None, threshold: float | None) -> Remember:
    """Which scored traces a knowledge base keeps (``kp score --add``): ``add`` when given,
    else the accepted ones when there is a sharing gate, else all."""
    if add is not None:
        return add
    return "accepted" if threshold is not None else "all"


def accepted_trace(trace: ReasoningTrace, score: ValueScore) -> dict[str, Any]:
    """The trace as shared once accepted: its data with ``metadata.quality_score`` set to its
    value (``kp score --accepted``, a captured trace contributed to ``kp serve``)."""
    data = trace.to_dict()
    data["metadata"]["quality_score"] = score.value
    return data


def rejection_entry(record: InputRecord, problems: Sequence[str]) -> dict[str, Any]:
    """The ``--rejects`` entry of one refused record: where it was, why, and the record
    (its raw text when it was not even JSON)."""
    entry: dict[str, Any] = {"source": record.source, "line": record.line}
    if record.index is not None:
        entry["index"] = record.index
    entry["errors"] = list(problems)
    entry["record"] = record.raw if record.error is not None else record.data
    return entry


class ScoredTrace(NamedTuple):
    """One trace scored: its score record, and what the summary and the sinks need of it.

    In this process the record is its fields, ``data`` (``ScoreRecord.data_of``), written once,
    by the writer (:attr:`line`); a worker process sends the line it wrote (``written``), so
    the JSON is made where the record was, once, and never parsed back."""

    data: dict[str, Any] | None  #: the score record's fields (None: a worker wrote the line)
    value: float
    domain: str
    passed: bool | None  #: None without a threshold
    accepted: str | None  #: the trace's line for ``--accepted`` when it passed (if asked)
    trace: ReasoningTrace | None = None  #: kept in process (for the sinks), not sent by workers
    score: ValueScore | None = None
    #: The novelty an embedding measured (None: no embedder, or nothing seen before).
    novelty: float | None = None
    written: str | None = None  #: the line as a worker process wrote it

    @property
    def line(self) -> str:
        """The score line: the record written (each access writes it: the writer asks once)."""
        if self.written is not None:
            return self.written
        from ..io._writers import dumps

        return dumps(self.data)


class ScoredUnit(NamedTuple):
    """One unit of input records, scored: a :class:`~knowledgepulse.importers.Conversion`
    whose ``traces`` are :class:`ScoredTrace`. A converted unit that came back from a worker
    holds ``None`` for each of its records (only their count matters then)."""

    records: Sequence[Any]
    traces: list[ScoredTrace]
    problems: list[str]
    format: str
    one_run: bool = False  #: the records are the events of one run, counted once

    @property
    def counted(self) -> int:
        """How many records it counts for in a run's accounting (as the conversion's)."""
        return 1 if self.one_run else len(self.records)


def scored_trace(
    unit: Conversion,
    trace: ReasoningTrace,
    score: ValueScore,
    *,
    threshold: float | None,
    accepted_lines: bool = False,
    keep: bool = True,
) -> ScoredTrace:
    """One trace of ``unit`` with its score: the score record's fields (placed at the unit's
    first record; its list index only when the unit is one record) and, when
    ``accepted_lines`` and it passed, its accepted line. ``keep``: keep the fields, the trace
    and its score on the result (for the writer and its sinks); else the line is written
    here, for another process."""
    from ..io._writers import dumps
    from ..records import ScoreRecord

    first = unit.records[0]
    data = ScoreRecord.data_of(
        score,
        trace,
        source=first.source,
        line=first.line,
        index=first.index if len(unit.records) == 1 else None,
        threshold=threshold,
    )
    passed = data.get("passed")
    accepted = dumps(accepted_trace(trace, score)) if passed and accepted_lines else None
    novelty = score.novelty if score.novelty_source == "embedding" else None
    if not keep:  # for another process: the line, written here
        return ScoredTrace(
            None, score.value, data["domain"], passed, accepted, novelty=novelty,
            written=dumps(data),
        )  # fmt: skip
    return ScoredTrace(data, score.value, data["domain"], passed, accepted, trace, score, novelty)


def _scored(unit: Conversion, traces: list[ScoredTrace]) -> ScoredUnit:
    return ScoredUnit(unit.records, traces, unit.problems, unit.format, unit.one_run)


def score_unit(
    engine: ScoringEngine,
    unit: Conversion,
    *,
    threshold: float | None,
    accepted_lines: bool = False,
    keep: bool = True,
) -> ScoredUnit:
    """Score the traces of one unit with ``engine``, in order (see :func:`scored_trace`)."""
    scores = engine.score_many(unit.traces)
    return _scored(
        unit,
        [
            scored_trace(
                unit, trace, score, threshold=threshold, accepted_lines=accepted_lines, keep=keep
            )
            for trace, score in zip(unit.traces, scores)
        ],
    )


def _where(unit: Conversion) -> str | None:
    return unit.records[0].where


def iter_scored_units(
    engine: ScoringEngine,
    units: Iterable[Conversion],
    *,
    threshold: float | None,
    accepted_lines: bool = False,
) -> Generator[ScoredUnit, None, None]:
    """:func:`score_unit` over ``units``, in order, with the traces of consecutive units
    scored together (the engine embeds ``batch_size`` of them at a time, whatever units
    they come from). A unit is yielded once its last trace is scored; a unit with no trace
    once the units before it are."""
    waiting: deque[Conversion] = deque()  # read, not yet yielded, in input order

    def pairs() -> Iterator[tuple[Conversion, ReasoningTrace]]:
        for unit in units:
            waiting.append(unit)
            for trace in unit.traces:
                yield unit, trace

    done: list[ScoredTrace] = []
    for unit, trace, score in engine.iter_scores(pairs(), payload=True, where=_where):
        while waiting[0] is not unit:  # units before it with no trace
            yield _scored(waiting.popleft(), [])
        done.append(
            scored_trace(unit, trace, score, threshold=threshold, accepted_lines=accepted_lines)
        )
        if len(done) == len(unit.traces):
            yield _scored(waiting.popleft(), done)
            done = []
    while waiting:
        yield _scored(waiting.popleft(), [])
