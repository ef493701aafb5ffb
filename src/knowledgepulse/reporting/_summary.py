"""The distribution of value scores: one object for the terminal summary and the HTML report."""

from __future__ import annotations

import math
import statistics
from array import array
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..io._render import plain_text

if TYPE_CHECKING:
    from ..records import ScoreRecord

__all__ = ["DomainStats", "ScoreSummary", "score_bin"]

_BAR_WIDTH = 40
#: Novelty this close to 0 or 1 is at an end; when this share of traces is, it is crowded.
NOVELTY_END = 0.1
NOVELTY_CROWDED = 0.7


def score_bin(value: float, bins: int) -> int:
    """The histogram bin of ``value`` (in [0, 1]) among ``bins`` equal bins.

    Bin ``i`` holds ``[i / bins, (i + 1) / bins)``; the last bin also holds 1.0. A value on
    an edge belongs to the bin that starts there (0.7 is in 0.7–0.8).
    """
    # Rounded first: a score summed from weights is not exact (0.35 + 0.05 gives
    # 0.39999999999999997) and belongs to the bin of the edge it stands for.
    return min(bins - 1, max(0, math.floor(round(value * bins, 9))))


@dataclass(frozen=True)
class DomainStats:
    """The scores of one task domain: how many, their mean, and how many passed."""

    domain: str
    count: int
    mean: float
    passed: int


@dataclass
class _DomainTally:
    count: int = 0
    total: float = 0.0
    passed: int = 0


class ScoreSummary:
    """Min, median, mean, max, a histogram, per-domain means and the passed count of scores.

    Scores are added one at a time (:meth:`add`, :meth:`add_record`); the summary keeps one
    float per trace (for the median) and fixed-size tallies, never the traces. ``threshold``
    is the sharing threshold, if any: it decides ``passed`` when :meth:`add` is not told, and
    marks its bin in :meth:`render`. ``bins`` is the number of equal histogram bins on [0, 1].
    """

    def __init__(self, threshold: float | None = None, *, bins: int = 10) -> None:
        if bins < 1:
            raise ValueError(f"bins must be at least 1, got {bins}")
        self.threshold = threshold
        self.bins = bins
        self._values = array("d")
        self._domains: dict[str, _DomainTally] = {}
        self._histogram = [0] * bins
        self._passed_histogram = [0] * bins
        self._passed = 0
        self._judged = 0
        self._novelty = array("d")  # of the traces whose novelty an embedding measured

    def add(
        self, value: float, domain: str, passed: bool | None = None, *, novelty: float | None = None
    ) -> None:
        """Count one trace's score ``value`` under ``domain``.

        ``passed`` says whether it passed the threshold; when ``None`` and the summary has a
        threshold, it is ``value >= threshold``; otherwise the trace counts as not judged.
        ``novelty``: the novelty an embedding measured for it, if any.
        """
        if novelty is not None:
            self._novelty.append(novelty)
        if passed is None and self.threshold is not None:
            passed = value >= self.threshold
        self._values.append(value)
        tally = self._domains.setdefault(domain, _DomainTally())
        tally.count += 1
        tally.total += value
        index = score_bin(value, self.bins)
        self._histogram[index] += 1
        if passed is not None:
            self._judged += 1
        if passed:
            self._passed += 1
            tally.passed += 1
            self._passed_histogram[index] += 1

    def add_record(self, record: ScoreRecord) -> None:
        """Count a ``kp score`` record; without a summary threshold, its own ``passed`` flag."""
        novelty = record.novelty if record.novelty_source == "embedding" else None
        passed = None if self.threshold is not None else record.passed
        self.add(record.score, record.domain, passed, novelty=novelty)

    def novelty_lines(self) -> list[str]:
        """The novelty an embedding measured (min, median, max) and, when seven traces in ten
        or more sit at one end, a warning: novelty then hardly tells traces apart, and a
        threshold on value weighs the other dimensions (docs/scoring.md)."""
        values = self._novelty
        if not values:
            return []
        low = sum(1 for v in values if v <= NOVELTY_END)
        high = sum(1 for v in values if v >= 1.0 - NOVELTY_END)
        lines = [
            f"novelty (vs traces seen before, {len(values)} traces): min {min(values):.3f}  "
            f"median {statistics.median(values):.3f}  max {max(values):.3f}"
        ]
        ends = (
            (low, f"≤ {NOVELTY_END:g}", "nearly every trace repeats one seen before"),
            (high, f"≥ {1 - NOVELTY_END:g}", "nearly every trace is a task not seen before"),
        )
        for count, where, meaning in ends:
            if len(values) >= 10 and count >= NOVELTY_CROWDED * len(values):
                lines.append(
                    f"warning: novelty {where} for {count} of {len(values)} traces "
                    f"({count / len(values):.0%}): {meaning}, so novelty hardly tells them "
                    "apart and a threshold on value weighs the other dimensions "
                    "(docs/scoring.md#a-threshold-you-can-trust)"
                )
        return lines

    @property
    def count(self) -> int:
        """The number of scores added."""
        return len(self._values)

    @property
    def passed(self) -> int:
        """How many traces passed the threshold."""
        return self._passed

    @property
    def all_judged(self) -> bool:
        """Whether every trace (at least one) is known to have passed or not."""
        return 0 < self.count == self._judged

    @property
    def minimum(self) -> float:
        return min(self._nonempty())

    @property
    def maximum(self) -> float:
        return max(self._nonempty())

    @property
    def mean(self) -> float:
        return math.fsum(self._nonempty()) / self.count

    @property
    def median(self) -> float:
        return statistics.median(self._nonempty())

    def _nonempty(self) -> array[float]:
        if not self._values:
            raise ValueError("no scores have been added")
        return self._values

    def histogram(self) -> list[int]:
        """The number of scores in each of the ``bins`` bins (see :func:`score_bin`)."""
        return list(self._histogram)

    def passed_histogram(self) -> list[int]:
        """The number of passing scores in each bin."""
        return list(self._passed_histogram)

    def bin_edges(self) -> list[float]:
        """The ``bins + 1`` edges of the bins, from 0.0 to 1.0."""
        return [i / self.bins for i in range(self.bins + 1)]

    def domains(self) -> list[DomainStats]:
        """Per task domain, the most traces first (ties in the order first seen)."""
        stats = [
            DomainStats(domain, tally.count, tally.total / tally.count, tally.passed)
            for domain, tally in self._domains.items()
        ]
        return sorted(stats, key=lambda s: -s.count)

    def render(self) -> Group:
        """The summary as ``kp score`` prints it: figures, histogram, per-domain table, passed.

        Empty (nothing printed) when no score was added.
        """
        if not self._values:
            return Group()
        parts: list[Text | Table] = [
            Text(
                f"traces scored: {self.count}   score min {self.minimum:.3f}  "
                f"median {self.median:.3f}  mean {self.mean:.3f}  max {self.maximum:.3f}"
            ),
            Text(self._text_histogram()),
        ]
        table = Table(title="per domain", title_justify="left", box=None, pad_edge=False)
        table.add_column("domain")
        table.add_column("traces", justify="right")
        table.add_column("mean score", justify="right")
        for stats in self.domains():
            table.add_row(Text(stats.domain), f"{stats.count}", f"{stats.mean:.3f}")
        parts.append(table)
        if self.threshold is not None:
            parts.append(
                Text(
                    f"passed threshold {self.threshold:g}: {self.passed} of {self.count} "
                    f"({self.passed / self.count:.0%})"
                )
            )
        parts.extend(Text(line) for line in self.novelty_lines())
        return Group(*parts)

    def __rich__(self) -> Group:
        return self.render()

    def render_text(self, width: int = 100) -> str:
        """:meth:`render` as plain text (no colour)."""
        return plain_text(self.render(), width)

    def _text_histogram(self) -> str:
        peak = max(self._histogram) or 1
        marked = None if self.threshold is None else score_bin(self.threshold, self.bins)
        edges = self.bin_edges()
        # One decimal for tenths (the terminal's bins), two for finer bins such as twentieths.
        digits = 1 if 10 % self.bins == 0 else 2
        rows = []
        for i, count in enumerate(self._histogram):
            bar = "█" * round(count / peak * _BAR_WIDTH) if count else ""
            mark = " ◀ threshold" if i == marked else ""
            rows.append(f"  {edges[i]:.{digits}f}–{edges[i + 1]:.{digits}f} │{bar} {count}{mark}")
        return "\n".join(rows)
