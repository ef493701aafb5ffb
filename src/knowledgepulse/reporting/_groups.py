"""The report's "Attempts by task" section (``kp report --group-by FIELD``)."""

from __future__ import annotations

from typing import Any

from ..records import EvalRecord, ScoreRecord
from ..rubrics import OutcomeType
from ._grouping import AttemptGrouper, AttemptGroups, field_value, group_label
from ._html import card, escape, number, stat_cards, table

__all__ = ["GroupTally", "groups_section"]


class GroupTally:
    """The attempts of each task, as records are read.

    A record's group is the one ``kp score``/``kp eval --group-by FIELD`` wrote in its
    ``group``; else ``FIELD`` is looked up in the record itself (``domain``, ``rubric`` …). A
    score record passes when it passed its threshold (else when its trace succeeded), an eval
    record when its outcome is ``successful_completion``. A trace scored twice counts once,
    as read last, like the rest of the report.
    """

    def __init__(self, field: str) -> None:
        self.field = field
        self._scores: dict[str, tuple[str | None, float, bool]] = {}
        self._evals: list[tuple[str | None, float, bool]] = []

    def _key(self, record: ScoreRecord | EvalRecord, data: Any) -> str | None:
        if record.group is not None and self.field in record.group:
            return record.group[self.field]
        return group_label(field_value(data, self.field))

    def add(self, record: ScoreRecord | EvalRecord, data: Any) -> None:
        key = self._key(record, data)
        if isinstance(record, ScoreRecord):
            passed = record.passed if record.passed is not None else record.success
            self._scores[record.id] = (key, record.score, passed)
        else:
            success = record.outcome_type is OutcomeType.SUCCESSFUL_COMPLETION
            self._evals.append((key, record.score, success))

    def build(self) -> list[tuple[str, AttemptGroups]]:
        """(kind, groups) for the value scores and the evaluations that were read."""
        built = []
        for kind, attempts in (
            ("value scores", self._scores.values()),
            ("evaluations", self._evals),
        ):
            if attempts:
                grouper = AttemptGrouper(self.field)
                for key, value, passed in attempts:
                    grouper.add(key, value, passed)
                built.append((kind, grouper.build()))
        return built


def groups_section(tally: GroupTally) -> str:
    """Per kind of record: pass@k over all tasks, then one row per task."""
    parts = [f'<section id="groups"><h2>Attempts by <code>{escape(tally.field)}</code></h2>']
    for kind, groups in tally.build():
        ks = range(1, groups.max_attempts + 1)
        cards = [("tasks", escape(len(groups.tasks))), ("attempts", escape(groups.attempts))]
        cards += [
            (f"pass@{k}", number(value)) for k in ks if (value := groups.pass_at(k)) is not None
        ]
        parts.append(f"<h3>{escape(kind.capitalize())}</h3>")
        parts.append(stat_cards(cards))
        if groups.ungrouped:
            parts.append(
                card(f"{groups.ungrouped} attempts have no {escape(tally.field)}: left out.")
            )
        rows = [
            [
                f"<code>{escape(task.task)}</code>",
                escape(task.attempts),
                escape(task.passed),
                *(number(task.pass_at[k - 1]) if k <= task.attempts else "" for k in ks),
                number(task.best),
                number(task.mean),
            ]
            for task in groups.tasks
        ]
        headers = ["task", "attempts", "passed", *(f"pass@{k}" for k in ks), "best", "mean"]
        caption = (
            "pass@k: the chance that at least one of k attempts passes (unbiased estimate); "
            "best and mean: the value of the task's attempts"
        )
        parts.append(card(table(headers, rows, [False] + [True] * (len(headers) - 1), caption)))
    parts.append("</section>")
    return "".join(parts)
