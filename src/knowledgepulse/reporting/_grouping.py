"""Attempts grouped by task: per task its attempts, pass@k, best and mean value.

Benchmarks such as tau-bench run every task several times. Grouping the attempts by a field
(``--group-by metadata.kp_import.task``) tells "solved once in four tries" apart from "solved
every time", which one mean over all attempts hides.

pass@k is the unbiased estimator of Chen et al. (2021): with ``n`` attempts of which ``c``
passed, the chance that at least one of ``k`` attempts drawn without replacement passes,
``1 - C(n-c, k) / C(n, k)``. The figure over all tasks is the mean over the tasks that have at
least ``k`` attempts.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.console import Group
from rich.table import Table

__all__ = [
    "MISSING",
    "AttemptGrouper",
    "AttemptGroups",
    "TaskAttempts",
    "field_value",
    "group_label",
    "pass_at_k",
]


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


#: What :func:`field_value` returns for a path that leads nowhere (``None`` is a JSON value).
MISSING: Any = _Missing()


def field_value(data: Any, path: str) -> Any:
    """The value at a dotted ``path`` in JSON-like ``data`` (``metadata.kp_import.task``).

    A segment that is a number indexes a list (``steps.0.type``). Returns :data:`MISSING`
    when the path leads nowhere.
    """
    value = data
    for segment in path.split("."):
        if isinstance(value, Mapping) and segment in value:
            value = value[segment]
        elif isinstance(value, Sequence) and not isinstance(value, str) and segment.isdigit():
            index = int(segment)
            if index >= len(value):
                return MISSING
            value = value[index]
        else:
            return MISSING
    return value


def group_label(value: Any) -> str | None:
    """A group's name: a string as is, any other JSON value as compact JSON; ``None`` when
    the field is missing or null."""
    if value is MISSING or value is None:
        return None
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def pass_at_k(attempts: int, passed: int, k: int) -> float:
    """The unbiased pass@k estimate for ``passed`` successes in ``attempts`` tries.

    Raises ``ValueError`` unless ``0 <= passed <= attempts`` and ``1 <= k <= attempts``.
    """
    if not 0 <= passed <= attempts or not 1 <= k <= attempts:
        raise ValueError(
            f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={attempts} c={passed} k={k}"
        )
    failed = attempts - passed
    if failed < k:
        return 1.0
    # Exact integers first: the ratio of two binomials rounds once.
    return 1.0 - math.comb(failed, k) / math.comb(attempts, k)


@dataclass(frozen=True)
class TaskAttempts:
    """One task's attempts: how many, how many passed, pass@k for k = 1..attempts, and the
    best and mean value (score) over its attempts."""

    task: str
    attempts: int
    passed: int
    best: float
    mean: float
    pass_at: tuple[float, ...]


@dataclass(frozen=True)
class AttemptGroups:
    """Attempts grouped by ``field``: one :class:`TaskAttempts` per task (natural order) and
    the count of attempts that had no value for the field (``ungrouped``)."""

    field: str
    tasks: list[TaskAttempts]
    ungrouped: int = 0

    @property
    def attempts(self) -> int:
        return sum(task.attempts for task in self.tasks)

    @property
    def max_attempts(self) -> int:
        return max((task.attempts for task in self.tasks), default=0)

    def pass_at(self, k: int) -> float | None:
        """Mean pass@k over the tasks with at least ``k`` attempts (``None``: no such task)."""
        values = [task.pass_at[k - 1] for task in self.tasks if task.attempts >= k]
        return math.fsum(values) / len(values) if values else None

    def to_dict(self) -> dict[str, Any]:
        """The figures as JSON-ready data (``pass_at_k`` keyed by k as a string)."""
        ks = range(1, self.max_attempts + 1)
        return {
            "field": self.field,
            "tasks": len(self.tasks),
            "attempts": self.attempts,
            "ungrouped": self.ungrouped,
            "pass_at_k": {str(k): self.pass_at(k) for k in ks},
            "by_task": [
                {
                    "task": t.task,
                    "attempts": t.attempts,
                    "passed": t.passed,
                    "pass_at_k": {str(k): value for k, value in enumerate(t.pass_at, 1)},
                    "best": t.best,
                    "mean": t.mean,
                }
                for t in self.tasks
            ],
        }

    def summary_line(self) -> str:
        """One line: tasks, attempts and pass@k for every k."""
        figures = ", ".join(
            f"pass@{k} {value:.3f}"
            for k in range(1, self.max_attempts + 1)
            if (value := self.pass_at(k)) is not None
        )
        line = f"{len(self.tasks)} tasks by {self.field}, {self.attempts} attempts: {figures}"
        if self.ungrouped:
            line += f" ({self.ungrouped} attempts without {self.field} left out)"
        return line

    def render(self) -> Group:
        """A rich table: one row per task with attempts, passed, pass@k, best and mean."""
        ks = range(1, self.max_attempts + 1)
        table = Table(title=f"Attempts by {self.field}", title_justify="left")
        table.add_column("task", no_wrap=True)
        for name in ("attempts", "passed", *(f"pass@{k}" for k in ks), "best", "mean"):
            table.add_column(name, justify="right", no_wrap=True)
        for task in self.tasks:
            cells = [f"{task.pass_at[k - 1]:.3f}" if k <= task.attempts else "" for k in ks]
            table.add_row(
                task.task,
                str(task.attempts),
                str(task.passed),
                *cells,
                f"{task.best:.3f}",
                f"{task.mean:.3f}",
            )
        overall = [f"{value:.3f}" if (value := self.pass_at(k)) is not None else "" for k in ks]
        table.add_section()
        table.add_row("all", str(self.attempts), "", *overall, "", "", style="bold")
        return Group(table, self.summary_line())

    def __rich__(self) -> Group:
        return self.render()


@dataclass
class _Tally:
    values: list[float] = field(default_factory=list)
    passed: int = 0


class AttemptGrouper:
    """Collects attempts one at a time; :meth:`build` gives the :class:`AttemptGroups`.

    Args:
        field: the dotted path the attempts are grouped by (kept for the labels).
    """

    def __init__(self, field: str) -> None:
        self.field = field
        self._tasks: dict[str, _Tally] = {}
        self._ungrouped = 0

    def add(self, task: str | None, value: float, passed: bool) -> None:
        """Count one attempt of ``task`` (``None``: the attempt had no value for the field)."""
        if task is None:
            self._ungrouped += 1
            return
        tally = self._tasks.setdefault(task, _Tally())
        tally.values.append(value)
        tally.passed += passed

    def build(self) -> AttemptGroups:
        tasks = [
            TaskAttempts(
                task=name,
                attempts=len(tally.values),
                passed=tally.passed,
                best=max(tally.values),
                mean=math.fsum(tally.values) / len(tally.values),
                pass_at=tuple(
                    pass_at_k(len(tally.values), tally.passed, k)
                    for k in range(1, len(tally.values) + 1)
                ),
            )
            for name, tally in self._tasks.items()
        ]
        tasks.sort(key=lambda task: _natural_key(task.task))
        return AttemptGroups(self.field, tasks, self._ungrouped)


def _natural_key(name: str) -> tuple[int, float, str]:
    """Numeric task ids in numeric order (2 before 10), then the rest alphabetically."""
    try:
        return (0, float(name), name)
    except ValueError:
        return (1, 0.0, name)
