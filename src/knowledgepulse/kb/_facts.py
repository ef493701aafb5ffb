"""What recall's filters read of each stored trace, kept in memory beside its vectors.

Recall takes its candidates among the traces a viewer may see that pass the filters (success
only, a domain, a least value). Asked of the database, each ranking cost an ``IN (...)``
query over ``traces`` with ``metadata.success`` read out of every candidate's JSON, twice a
search, and more the larger the traces (docs/performance.md, "Recall at 10^5 traces"). Stored
rows never change (a base only grows, or is cleared), so the facts are read once, a page of
new rows at a time like the vectors (:class:`~._index.VectorIndex`), and each filter is then
a dictionary look-up. The visibility rule is :meth:`~._keys.Viewer.can_see`, the one the SQL
condition (:func:`~._keys.visibility_clause`) spells.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ._keys import TraceAccess, Viewer

__all__ = ["FACT_COLUMNS", "RowFact", "RowFacts"]

#: The ``traces`` columns a :class:`RowFact` is read from (``{success}``: the dialect's
#: condition that ``metadata.success`` is true), after ``seq``.
FACT_COLUMNS = "id, value, domain, visibility, owner, org, {success}"


@dataclass(frozen=True, slots=True)
class RowFact:
    """One stored trace's facts: its value, whether it succeeded, its domain, who sees it."""

    value: float | None
    succeeded: bool
    domain: str | None
    access: TraceAccess


class RowFacts:
    """The facts of a base's stored traces, in insertion (``seq``) order; ``last_seq`` is
    the last row read, so a refresh reads only the rows added since."""

    def __init__(self) -> None:
        self.by_id: dict[str, RowFact] = {}
        self.id_of_seq: dict[int, str] = {}
        self.last_seq = 0

    def extend(self, rows: Sequence[Sequence[Any]]) -> None:
        """Add rows of (seq, *:data:`FACT_COLUMNS`), ``seq`` ascending."""
        for seq, trace_id, value, domain, visibility, owner, org, succeeded in rows:
            self.by_id[trace_id] = RowFact(
                None if value is None else float(value),
                bool(succeeded),
                domain,
                TraceAccess(visibility, owner, org),
            )
            self.id_of_seq[int(seq)] = trace_id
            self.last_seq = int(seq)

    def passing(
        self,
        ids: Sequence[str],
        viewer: Viewer | None,
        success_only: bool,
        domain: str | None,
        min_value: float | None,
    ) -> dict[str, tuple[float | None, bool]]:
        """Of ``ids``, those ``viewer`` may see that pass the filters: id -> (value, whether
        it succeeded), as :meth:`~._fulltext.FullTextMixin.passing` answers from SQL (a
        missing value or domain passes no bound on it)."""
        everyone = viewer is None or viewer.sees_all
        found: dict[str, tuple[float | None, bool]] = {}
        for trace_id in ids:
            fact = self.by_id.get(trace_id)
            if fact is None or (success_only and not fact.succeeded):
                continue
            if domain is not None and fact.domain != domain:
                continue
            if min_value is not None and (fact.value is None or fact.value < min_value):
                continue
            if not everyone and not viewer.can_see(fact.access):  # type: ignore[union-attr]
                continue
            found[trace_id] = (fact.value, fact.succeeded)
        return found
