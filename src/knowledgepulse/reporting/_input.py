"""What a report reads: ``kp score`` and ``kp eval`` records, with what was skipped and why."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..io._reader import InputRecord, expand_paths, iter_records
from ..records import EvalRecord, ScoreRecord, parse_output_record
from ..rubrics import EvaluationReport, OutcomeType, ReportBuilder
from ._groups import GroupTally
from ._summary import score_bin

__all__ = ["EvalTally", "ReportInput", "ScoredTrace", "read_report_input"]

_MAX_SKIPPED_KEPT = 50
EVAL_BINS = 10


@dataclass(frozen=True)
class ScoredTrace:
    """A score record and where its trace came from (``file:line``, ``[index]`` in a list)."""

    record: ScoreRecord
    where: str


class EvalTally:
    """Eval records counted as they are read: a rubric report each, outcomes and scores.

    The records themselves are not kept.
    """

    def __init__(self) -> None:
        self.overall = ReportBuilder()
        self._by_rubric: dict[str, ReportBuilder] = {}
        self._outcome_totals = {outcome: [0, 0.0] for outcome in OutcomeType}
        self.histogram = [0] * EVAL_BINS
        self.count = 0

    def add(self, record: EvalRecord) -> None:
        result = record.to_result()
        self.count += 1
        self.overall.add(result)
        self._by_rubric.setdefault(result.rubric, ReportBuilder()).add(result)
        if result.outcome_type is None:  # nothing of weight determined: no score to show
            return
        totals = self._outcome_totals[result.outcome_type]
        totals[0] += 1
        totals[1] += result.score
        self.histogram[score_bin(result.score, EVAL_BINS)] += 1

    def outcome_means(self) -> dict[OutcomeType, float | None]:
        """The mean score of the cases of each outcome; ``None`` for an outcome with none."""
        return {
            outcome: total / count if count else None
            for outcome, (count, total) in self._outcome_totals.items()
        }

    def by_rubric(self) -> list[EvaluationReport]:
        """One report per rubric, by rubric name."""
        return [self._by_rubric[name].build() for name in sorted(self._by_rubric)]


@dataclass
class ReportInput:
    """Everything read for a report.

    ``scores`` holds one entry per trace id: when an id appears more than once (the same
    scores file given twice, or a trace scored twice), the record read last wins, and
    ``repeated_ids`` lists each such id once, in the order first repeated.
    """

    files: list[str]
    scores: dict[str, ScoredTrace] = field(default_factory=dict)
    evals: EvalTally = field(default_factory=EvalTally)
    repeated_ids: dict[str, None] = field(default_factory=dict)
    skipped_lines: int = 0
    skipped: list[str] = field(default_factory=list)
    groups: GroupTally | None = None

    def skip(self, where: str, reason: str) -> None:
        self.skipped_lines += 1
        if len(self.skipped) < _MAX_SKIPPED_KEPT:
            self.skipped.append(f"{where}: {reason}")

    def add_score(self, record: ScoreRecord, where: str) -> None:
        if record.id in self.scores:
            self.repeated_ids[record.id] = None
        self.scores[record.id] = ScoredTrace(record, where)

    def thresholds(self) -> set[float]:
        """The distinct thresholds the score records were written with."""
        return {s.record.threshold for s in self.scores.values() if s.record.threshold is not None}


def _trace_location(record: ScoreRecord, line: InputRecord) -> str:
    """Where the scored trace came from, as the score record says; else the score line's place."""
    if record.source is not None and record.line is not None:
        return InputRecord(record.source, record.line, index=record.index).place
    return line.place


def read_report_input(paths: Iterable[str | Path], group_by: str | None = None) -> ReportInput:
    """Read every record of the files at ``paths`` (``-``: stdin; directories are expanded).

    ``group_by`` (a dotted field) also tallies the attempts of each task (``groups``).

    A line that is not valid JSON, or neither a score nor an eval record, is skipped and
    counted with its reason. Raises FileNotFoundError for a path that does not exist.
    """
    files = expand_paths(str(path) for path in paths)
    data = ReportInput(files=files, groups=GroupTally(group_by) if group_by else None)
    for line in iter_records(files):
        if line.error is not None:
            data.skip(line.where, line.error)
            continue
        try:
            record = parse_output_record(line.data)
        except ValueError as exc:
            data.skip(line.where, str(exc))
            continue
        if isinstance(record, ScoreRecord):
            data.add_score(record, _trace_location(record, line))
        else:
            data.evals.add(record)
        if data.groups is not None:
            data.groups.add(record, line.data)
    return data
