"""The tally: every input record counted once, as processed or rejected (or, after a stop, not
processed), and every rejection shown with its file, line and field.

The accounting line is true however the run ends:
``records in: N = processed P + rejected R [+ not processed K (interrupted)]``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ._signals import EXIT_OK, EXIT_REJECTED, exit_status_for, signals_held

if TYPE_CHECKING:  # imported where used: every command, and kp --help, starts without them
    from ..io._input_record import InputRecord
    from ..io._writers import LineWriter

MAX_REJECTIONS_SHOWN = 20
#: The same problem is shown this many times, then folded into one "… and N more" line.
SAME_PROBLEM_SHOWN = 3
# Traces named "not a run" (embedding calls beside the runs of a span file) shown one by one.
NOT_RUNS_SHOWN = 10
#: Problems a run's report keeps one by one; past them only counted (every one is in
#: ``rejects``), so that a report of a run over millions of broken records stays small.
MAX_REJECTIONS_KEPT = 10_000

# A problem whose path starts at an element of a list: ``[17].run_type: ...``.
_ELEMENT_PATH = re.compile(r"^\[(\d+)\]")


class Lines(Protocol):
    """Where a run's messages go: anything with rich's ``print`` (a Console, or plain lines)."""

    def print(self, text: str, **options: Any) -> None: ...


@dataclass(frozen=True)
class LocatedProblem:
    """One problem of a rejected record, at the record (or list element) it is about."""

    source: str
    line: int
    index: int | None
    problem: str

    def __str__(self) -> str:
        return f"{self.source}:{self.line}: {self.problem}"


@dataclass
class Rejection:
    """Records refused together (usually one), with every problem found."""

    records: Sequence[InputRecord]
    problems: list[str]
    # How many records it counts for: one for the events of one run (each is still in
    # --rejects, with its place); None: each record.
    count: int | None = None

    def located(self) -> list[LocatedProblem]:
        """Each problem at its record: in a unit of several elements of a list, a problem
        whose path starts at an element (``[17].run_type``) is located where that element
        starts, not at the unit's first element."""
        first = self.records[0]
        by_index = {r.index: r for r in self.records if r.index is not None}
        located = []
        for problem in self.problems:
            match = _ELEMENT_PATH.match(problem)
            record = by_index.get(int(match.group(1)), first) if match else first
            located.append(LocatedProblem(record.source, record.line, record.index, problem))
        return located

    def lines(self) -> list[str]:
        """``file:line: problem`` for each problem (see :meth:`located`)."""
        return [str(problem) for problem in self.located()]

    def to_json(self, record: InputRecord) -> dict[str, Any]:
        from ..scoring._run import rejection_entry

        return rejection_entry(record, self.problems)


def accounting_line(
    records_in: int, processed: int, rejected: int, *, interrupted: bool, stopped_early: bool
) -> str:
    """``records in: N = processed P + rejected R`` and, after a stop, what was not processed
    and why."""
    line = f"records in: {records_in} = processed {processed} + rejected {rejected}"
    why = "interrupted" if interrupted else "stopped by --max-errors"
    missing = records_in - processed - rejected
    if missing:
        line += f" + not processed {missing} ({why})"
    elif interrupted or stopped_early:
        line += f" ({why}: the rest of the input was not read)"
    return line


@dataclass
class Tally:
    """Counts every input record as processed or rejected, and reports rejections.

    ``console`` receives the rejection lines as they happen (None: none are shown; they are
    still counted, kept for the report and written to ``rejects``).
    """

    console: Lines | None
    rejects: LineWriter | None = None
    max_errors: int | None = None
    show_all: bool = False  # kp validate lists every problem of every record: no folding
    records_in: int = 0
    processed: int = 0
    rejected: int = 0
    outputs: int = 0  # results written (score lines, traces, eval lines)
    interrupted: bool = False
    stop_signal: int | None = None  # the signal that stopped the run (None: Ctrl-C in-process)
    stopped_early: bool = False
    # Things read that are not runs (processed, no trace made): named, never silently nothing.
    not_runs: int = 0
    started: float = field(default_factory=time.perf_counter)
    # The problems of the rejections, located, for the run's report (the first
    # MAX_REJECTIONS_KEPT; problems_not_kept counts the rest).
    problems: list[LocatedProblem] = field(default_factory=list)
    problems_not_kept: int = 0
    _shown: int = 0
    _same: dict[str, int] = field(default_factory=dict)

    def read(self, count: int = 1) -> None:
        self.records_in += count

    def reject(self, rejection: Rejection) -> None:
        """Count and report ``rejection``; past ``--max-errors``, mark the run to stop.

        Readers check :attr:`stopped_early` and stop reading; what was read is still finished
        (scored and written), so a deliberate stop loses nothing already read.
        """
        with signals_held():
            count = rejection.count
            self.rejected += len(rejection.records) if count is None else count
            for record in rejection.records:
                if self.rejects is not None:
                    self.rejects.write_json(rejection.to_json(record))
        located = rejection.located()
        room = MAX_REJECTIONS_KEPT - len(self.problems)
        self.problems.extend(located[: max(room, 0)])
        self.problems_not_kept += max(len(located) - max(room, 0), 0)
        self._show(rejection, located)
        if self.max_errors is not None and self.rejected >= self.max_errors:
            self.stopped_early = True

    def note_not_runs(self, where: str, notes: Sequence[str]) -> None:
        """Name what a processed record held that is not a run (``where: note``); past
        :data:`NOT_RUNS_SHOWN`, only counted (:meth:`folded_lines` says how many more)."""
        for note in notes:
            if self.not_runs < NOT_RUNS_SHOWN:
                self._print(f"{where}: {note}")
            self.not_runs += 1

    def _show(self, rejection: Rejection, located: list[LocatedProblem]) -> None:
        if self.show_all:  # kp validate: its listing is the result, so nothing is folded
            for problem in located:
                self._print(str(problem))
            return
        # Records rejected for the very same problems are shown a few times, then folded.
        signature = "\n".join(rejection.problems)
        seen = self._same.get(signature, 0)
        self._same[signature] = seen + 1
        if seen >= SAME_PROBLEM_SHOWN:
            return
        for problem in located:
            if self._shown < MAX_REJECTIONS_SHOWN:
                self._print(str(problem))
            self._shown += 1

    def _print(self, text: str) -> None:
        if self.console is not None:
            self.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def folded_lines(self) -> list[str]:
        """How many rejections were not shown, and where they all are."""
        where = "; all are in --rejects" if self.rejects is not None else ""
        lines = []
        for signature, count in self._same.items():
            if count > SAME_PROBLEM_SHOWN:
                more = count - SAME_PROBLEM_SHOWN
                problems = signature.split("\n")
                like = _short(problems[0]) + (
                    f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
                )
                lines.append(f"… and {more:,} more records like these ({like}){where}")
        if self.not_runs > NOT_RUNS_SHOWN:
            lines.append(f"… and {self.not_runs - NOT_RUNS_SHOWN:,} more that are not runs")
        if self._shown > MAX_REJECTIONS_SHOWN:
            hidden = self._shown - MAX_REJECTIONS_SHOWN
            noun = "problem" if hidden == 1 else "problems"
            lines.append(f"… {hidden:,} further {noun} not shown{where}")
        return lines

    def print_folded(self) -> None:
        """Print :meth:`folded_lines` on the tally's console."""
        for line in self.folded_lines():
            self._print(line)

    @property
    def not_processed(self) -> int:
        return self.records_in - self.processed - self.rejected

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def accounting(self) -> str:
        return accounting_line(
            self.records_in,
            self.processed,
            self.rejected,
            interrupted=self.interrupted,
            stopped_early=self.stopped_early,
        )

    def exit_code(self) -> int:
        if self.interrupted:
            return exit_status_for(self.stop_signal)
        return EXIT_REJECTED if self.rejected else EXIT_OK


def _short(text: str, limit: int = 70) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
