"""What the endpoints do, as plain blocking calls (the routes run them in worker threads).

Scoring measures novelty against the whole base (that is what the network is for), but a key
is never told the id of a trace it may not see: such a nearest trace is left out of the answer
and out of the explanation.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .._memory import Admit, Nearest
from .._schema import ReasoningTrace
from .._scoring import Scorer, ValueScore
from ..kb import ApiKey, KnowledgeBase, KnowledgeBaseError, StoredTrace, TraceAccess, Viewer
from ..records import ScoreRecord
from ._models import (
    Contribution,
    ContributionStatus,
    NearestRef,
    SearchHit,
    TraceDetail,
    TraceList,
    TraceListItem,
)

__all__ = ["Engine"]

#: From this similarity up, a stored trace is listed among a trace's near-duplicates.
NEAR_DUPLICATE = 0.9
HIDDEN = "a stored trace"


class _LookOnly:
    """Novelty against the base without storing anything (``POST /v1/score``)."""

    def __init__(self, kb: KnowledgeBase) -> None:
        self._kb = kb
        self.dimensions: int = kb.dimensions

    def nearest_then_add_many(
        self, vectors: Any, ids: Sequence[str | None], admit: Admit | None = None
    ) -> list[Nearest | None]:
        found: list[Nearest | None] = []
        for i, row in enumerate(vectors):
            hits = self._kb.search(row, 1)
            nearest = Nearest(hits[0].id, hits[0].similarity) if hits else None
            found.append(nearest)
            if admit is not None:
                admit(i, nearest)
        return found

    def clear(self) -> None:
        raise TypeError("the service's scoring memory is read-only")


class _Contributor:
    """The base, storing what the scorer admits as contributed by ``key``.

    Query-then-store is the base's own atomic ``nearest_then_add_many``; a stored id is looked
    up by the engine (which knows who may see it), not by the scorer.
    """

    def __init__(self, kb: KnowledgeBase, key: ApiKey, source: str) -> None:
        self._kb = kb
        self._key = key
        self._source = source
        self.dimensions: int = kb.dimensions

    def nearest_then_add_many(
        self, vectors: Any, ids: Sequence[str | None], admit: Admit | None = None
    ) -> list[Nearest | None]:
        if admit is None:
            raise TypeError("the service stores traces only through a scorer")

        def owned(i: int, nearest: Nearest | None) -> object | None:
            item = admit(i, nearest)
            if isinstance(item, StoredTrace):
                return replace(item, owner=self._key.id, org=self._key.org, source=self._source)
            return item

        found: list[Nearest | None] = self._kb.nearest_then_add_many(vectors, ids, owned)
        return found

    def stored_records(self, ids: Iterable[str]) -> dict[str, dict[str, Any] | None]:
        return {}

    def clear(self) -> None:
        raise TypeError("the service's scoring memory cannot be cleared")


@dataclass
class Engine:
    """The base, the embedder and the threshold, and what the endpoints ask of them."""

    kb: KnowledgeBase
    embedder: Any
    threshold: float

    # -- scoring -----------------------------------------------------------------------------

    def score(self, traces: Sequence[ReasoningTrace], viewer: Viewer) -> list[ScoreRecord]:
        scorer = Scorer(self.embedder, memory=_LookOnly(self.kb), remember="none")
        scores = scorer.score_many(traces)
        records = [ScoreRecord.of(s, t) for s, t in zip(scores, traces)]
        return self._hide_unseen(records, viewer)

    def contribute(
        self, traces: Sequence[ReasoningTrace], key: ApiKey, source: str
    ) -> list[Contribution]:
        """Score each trace against the base and store those that reach the threshold.

        Idempotent by id: an id already stored answers its stored result (or ``conflict``
        when the key may not see it), also when another request stores it meanwhile.
        """
        viewer = key.viewer
        ids = [trace.id for trace in traces]
        before = self.kb.access_of(ids)
        fresh = [i for i, trace in enumerate(traces) if trace.id not in before]
        scores: dict[int, ValueScore] = {}  # by position in traces
        if fresh:
            scorer = Scorer(
                self.embedder,
                memory=_Contributor(self.kb, key, source),
                remember="accepted",
                threshold=self.threshold,
            )
            scores = dict(zip(fresh, scorer.score_many([traces[i] for i in fresh])))
        stored = self.kb.stored_records(ids)
        access = self.kb.access_of(ids)
        results: list[Contribution] = []
        claimed: set[str] = set()
        for position, trace in enumerate(traces):
            score = scores.get(position)
            mine = as_stored = None
            if score is not None:
                mine = ScoreRecord.of(score, trace, threshold=self.threshold)
                as_stored = ScoreRecord.of(score, trace).to_dict()  # as the scorer stores it
            if trace.id not in stored:
                if mine is None:  # stored before this request, gone now (kp kb clear)
                    raise KnowledgeBaseError(f"{trace.id} was removed meanwhile; post it again")
                results.append(self._result(mine, "rejected", viewer))
            elif (
                mine is not None
                and mine.stored == "added"
                and trace.id not in claimed
                and stored[trace.id] == as_stored
            ):
                claimed.add(trace.id)
                results.append(self._result(mine, "accepted", viewer))
            elif viewer.can_see(access[trace.id]):
                previous = ScoreRecord.model_validate(
                    {**(stored[trace.id] or {}), "stored": "already_stored"}
                )
                results.append(self._result(previous, "already_stored", viewer))
            else:
                results.append(self._conflict(trace.id))
        return results

    def _result(
        self, record: ScoreRecord, status: ContributionStatus, viewer: Viewer
    ) -> Contribution:
        record = self._hide_unseen([record], viewer)[0]
        nearest = record.nearest
        return Contribution(
            id=record.id,
            status=status,
            accepted=status in ("accepted", "already_stored"),
            value=record.score,
            threshold=self.threshold,
            explanation=record.explanation,
            nearest=None
            if nearest is None or nearest.id is None
            else NearestRef(id=nearest.id, similarity=nearest.similarity),
            record=record,
        )

    def _conflict(self, trace_id: str) -> Contribution:
        return Contribution(
            id=trace_id,
            status="conflict",
            accepted=False,
            value=None,
            threshold=self.threshold,
            explanation="another key contributed a trace with this id; give the trace a new id",
            nearest=None,
            record=None,
        )

    def _hide_unseen(self, records: list[ScoreRecord], viewer: Viewer) -> list[ScoreRecord]:
        """The records with every nearest trace ``viewer`` may not see made anonymous."""
        named = {r.nearest.id for r in records if r.nearest is not None and r.nearest.id}
        seen = self._visible(named, viewer)
        out = []
        for record in records:
            nearest = record.nearest
            if nearest is None or nearest.id is None or nearest.id in seen:
                out.append(record)
                continue
            out.append(
                record.model_copy(
                    update={
                        "nearest": Nearest(None, nearest.similarity),
                        "explanation": record.explanation.replace(nearest.id, HIDDEN),
                    }
                )
            )
        return out

    def _visible(self, ids: Iterable[str], viewer: Viewer) -> set[str]:
        access = self.kb.access_of(ids)
        return {trace_id for trace_id, a in access.items() if viewer.can_see(a)}

    # -- reading -----------------------------------------------------------------------------

    def detail(self, trace_id: str, viewer: Viewer) -> TraceDetail | None:
        """The stored trace, or None when there is none *or* the viewer may not see it."""
        found = self.kb.get(trace_id)
        if found is None or not viewer.can_see(_access(found)):
            return None
        hits = self.kb.search_visible(found.vector, 11, viewer)
        near = [
            NearestRef(id=hit.id, similarity=hit.similarity)
            for hit in hits
            if hit.id != trace_id and hit.similarity >= NEAR_DUPLICATE
        ][:10]
        record = None
        if found.record is not None:
            record = self._hide_unseen([ScoreRecord.model_validate(found.record)], viewer)[0]
        return TraceDetail(
            trace=found.trace,
            record=record,
            added_at=found.added_at,
            source=found.source,
            near_duplicates=near,
        )

    def listing(self, viewer: Viewer, **query: Any) -> TraceList:
        rows, total = self.kb.list_traces(viewer, **query)
        named = {
            str(nearest["id"])
            for row in rows
            if isinstance(nearest := (row.record or {}).get("nearest"), dict) and nearest.get("id")
        }
        seen = self._visible(named, viewer)
        items = []
        for row in rows:
            record: dict[str, Any] = row.record or {}
            nearest = record.get("nearest")
            ref = None
            if isinstance(nearest, dict) and nearest.get("id") in seen:
                ref = NearestRef(id=nearest["id"], similarity=nearest["similarity"])
            items.append(
                TraceListItem(
                    id=row.id,
                    value=record.get("score"),
                    complexity=record.get("complexity"),
                    novelty=record.get("novelty"),
                    tool_diversity=record.get("tool_diversity"),
                    outcome=record.get("outcome"),
                    domain=record.get("domain"),
                    success=record.get("success"),
                    nearest=ref,
                    added_at=row.added_at,
                    objective=row.objective,
                )
            )
        return TraceList(items=items, total=total)

    def search(self, text: str, k: int, viewer: Viewer) -> list[SearchHit]:
        vector = self.embedder.embed([text])[0]
        hits = self.kb.search_visible(vector, k, viewer)
        rows = {row.id: row for row in self._rows_of([hit.id for hit in hits])}
        out = []
        for hit in hits:
            found = rows.get(hit.id)
            out.append(
                SearchHit(
                    id=hit.id,
                    similarity=hit.similarity,
                    value=None if found is None else found.value,
                    domain=None if found is None else found.domain,
                    objective=None if found is None else _objective(found.trace),
                )
            )
        return out

    def _rows_of(self, ids: list[str]) -> list[StoredTrace]:
        return [row for row in map(self.kb.get, ids) if row is not None]

    def stats(self, viewer: Viewer) -> dict[str, Any]:
        identity = self.kb.identity
        return {
            **self.kb.visible_stats(viewer),
            "threshold": self.threshold,
            "model": None if identity is None else identity.model,
            "dimensions": None if identity is None else identity.dimensions,
        }


def _access(found: StoredTrace) -> TraceAccess:
    return TraceAccess(found.visibility, found.owner, found.org)


def _objective(trace: dict[str, Any]) -> str | None:
    task = trace.get("task")
    objective = task.get("objective") if isinstance(task, dict) else None
    return objective if isinstance(objective, str) else None
