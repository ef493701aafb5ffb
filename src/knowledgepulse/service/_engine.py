"""What the endpoints do, as plain blocking calls (the routes run them in worker threads).

A key learns nothing about the traces it may not see (docs/service.md, "Threat model"):

- scores, the contribution gate and its near-duplicate check are computed against the traces
  the key may see, so neither a similarity nor an accept/reject decision depends on a hidden
  trace;
- ids are namespaced by owner where they collide: a key contributing an id held by a trace it
  may not see is answered as if the id were free, and its trace is stored under
  ``<id>/<key id>`` (ids holding ``/`` are refused at contribute, so nobody else can take that
  row). Every answer shows the id as contributed (:func:`shown_id`); a read by id finds the
  row the key may see.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .._schema import ReasoningTrace
from ..api_models import (
    Contribution,
    ContributionStatus,
    NearestRef,
    SearchHit,
    TraceDetail,
    TraceList,
    TraceListItem,
)
from ..compare import TraceComparison, compare_traces
from ..copies import COPY_SIMILARITY, CopyFacet, CopyMatch, copy_facet
from ..kb import (
    ApiKey,
    KnowledgeBase,
    KnowledgeBaseError,
    StoredBatch,
    StoredTrace,
    TraceAccess,
    Viewer,
)
from ..kb._recall import ranked_search
from ..memory._cache import Admit, Nearest
from ..records import ScoreRecord
from ..scoring._scorer import Scorer, ValueScore

__all__ = [
    "Engine",
    "UnstorableId",
    "id_problem",
    "namespaced_id",
    "shown_id",
]

HIDDEN = "a stored trace"
#: A key id (``kb._keys.new_key``: 6 random bytes in hex) after the ``/`` of a namespaced id.
_NAMESPACE = re.compile(r"/[0-9a-f]{12}\Z")

#: Why a contribution conflicts.
_TAKEN = "another key contributed a trace with this id; give the trace a new id"


class UnstorableId(ValueError):
    """A trace id the service does not store (:func:`id_problem` says why)."""


def id_problem(trace_id: str) -> str | None:
    """Why the service may not store a trace under ``trace_id``, or None: the one id rule of
    every write path (``POST /v1/traces``, its batch, MCP ``contribute_trace``).

    ``/`` marks the rows namespaced by owner, so an id holding it could take another key's
    namespaced row (and ``GET /v1/traces/{id}`` is one path segment: it could never be read
    back); a control character or line break would let an id forge lines wherever it is
    shown (logs, the provenance line of a recalled example).
    """
    if "/" in trace_id:
        return f"a trace id may not hold '/' (got {trace_id!r})"
    if any((char.isspace() and char != " ") or _is_control(char) for char in trace_id):
        return f"a trace id may not hold a line break or control character (got {trace_id!r})"
    return None


def _is_control(char: str) -> bool:
    return unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp")


def namespaced_id(trace_id: str, key_id: str) -> str:
    """The row a key's trace is stored under when ``trace_id`` is held by a trace the key may
    not see."""
    return f"{trace_id}/{key_id}"


def shown_id(stored_id: str) -> str:
    """The id as its contributor gave it: a stored row's id without its namespace."""
    return _NAMESPACE.sub("", stored_id)


class _LookOnly:
    """Novelty against the traces ``viewer`` may see, storing nothing (``POST /v1/score``)."""

    def __init__(self, kb: KnowledgeBase, viewer: Viewer) -> None:
        self._kb = kb
        self._viewer = viewer
        self.dimensions: int = kb.dimensions

    def nearest_then_add_many(
        self, vectors: Any, ids: Sequence[str | None], admit: Admit | None = None
    ) -> list[Nearest | None]:
        found: list[Nearest | None] = []
        for i, row in enumerate(vectors):
            hits = self._kb.search_visible(row, 1, self._viewer)
            nearest = Nearest(hits[0].id, hits[0].similarity) if hits else None
            found.append(nearest)
            if admit is not None:
                admit(i, nearest)
        return found

    def clear(self) -> None:
        raise TypeError("the service's scoring memory is read-only")

    def stored_copy(self, facet: CopyFacet, similarity: float) -> CopyMatch | None:
        """The stored trace this key may see that ``facet``'s trace is a copy of (a copy it
        may not see is looked past: a key learns nothing of traces it cannot read)."""
        return self._kb.stored_copy(facet, similarity, self._readable)

    def get(self, trace_id: str) -> StoredTrace | None:
        """A stored trace this key may read (the Scorer compares how it was done with the
        nearest, which is always one the key may see), else None."""
        return self._kb.get(trace_id) if self._readable(trace_id) else None

    def _readable(self, row: str) -> bool:
        if self._viewer.sees_all:
            return True
        access = self._kb.access_of([row]).get(row)
        return access is not None and self._viewer.can_see(access)


class _Contributor:
    """The base, storing what the scorer admits as contributed by ``key``.

    Query-then-store is the base's own atomic ``nearest_then_store_many``, whose answer says
    which rows this call stored (the scorer's ``added``; a row whose id another request stored
    first is not, and is answered from the base). The nearest trace the
    scorer is given is the nearest one ``key`` may see (a hidden one is looked past, inside
    the base's write lock), so the gate decides as the key's own view of the base would. Rows
    are stored under ``rows[id]`` (the id, or its namespaced form); a stored id is looked up by
    the engine (which knows who may see it), not by the scorer.
    """

    def __init__(self, kb: KnowledgeBase, key: ApiKey, source: str, rows: dict[str, str]) -> None:
        self._kb = kb
        self._key = key
        self._viewer = key.viewer
        self._source = source
        self._rows = rows
        self.dimensions: int = kb.dimensions

    def nearest_then_add_many(
        self, vectors: Any, ids: Sequence[str | None], admit: Admit | None = None
    ) -> list[Nearest | None]:
        return self.nearest_then_store_many(vectors, ids, admit).nearest

    def nearest_then_store_many(
        self, vectors: Any, ids: Sequence[str | None], admit: Admit | None = None
    ) -> StoredBatch:
        if admit is None:
            raise TypeError("the service stores traces only through a scorer")
        rows = [None if i is None else self._rows.get(i, i) for i in ids]
        unit = np.asarray(vectors, dtype=np.float32)
        unit = unit / np.maximum(np.linalg.norm(unit, axis=1, keepdims=True), 1e-12)
        kept: list[int] = []  # rows of this call admitted so far (the key's own)
        seen: list[Nearest | None] = []

        def owned(i: int, nearest: Nearest | None) -> object | None:
            nearest = self._as_seen(i, nearest, unit, rows, kept)
            seen.append(nearest)
            item = admit(i, nearest)
            if isinstance(item, StoredTrace):
                kept.append(i)
                return replace(
                    item,
                    id=rows[i] or item.id,
                    owner=self._key.id,
                    org=self._key.org,
                    source=self._source,
                )
            return item

        answer = self._kb.nearest_then_store_many(vectors, rows, owned)
        return StoredBatch(seen, answer.stored)

    def stored_copy(self, facet: CopyFacet, similarity: float) -> CopyMatch | None:
        """The stored trace this key may see that ``facet``'s trace is a copy of (a copy it
        may not see is looked past: a key learns nothing of traces it cannot read)."""
        return self._kb.stored_copy(facet, similarity, self._readable)

    def get(self, trace_id: str) -> StoredTrace | None:
        """A stored trace this key may read (the Scorer compares how it was done with the
        nearest, which is always one the key may see), else None."""
        return self._kb.get(trace_id) if self._readable(trace_id) else None

    def _readable(self, row: str) -> bool:
        if self._viewer.sees_all:
            return True
        access = self._kb.access_of([row]).get(row)
        return access is not None and self._viewer.can_see(access)

    def _as_seen(
        self,
        i: int,
        nearest: Nearest | None,
        unit: Any,
        rows: Sequence[str | None],
        kept: Sequence[int],
    ) -> Nearest | None:
        """``nearest``, or when the key may not see it, the nearest trace it may see: among
        the stored ones and the rows of this call admitted before ``i``."""
        if nearest is None or nearest.id is None or self._viewer.sees_all:
            return nearest
        if nearest.id in {rows[j] for j in kept}:
            return nearest
        access = self._kb.access_of([nearest.id]).get(nearest.id)
        if access is not None and self._viewer.can_see(access):
            return nearest
        hits = self._kb.search_visible(unit[i], 1, self._viewer)
        best = Nearest(hits[0].id, hits[0].similarity) if hits else None
        for j in kept:
            similarity = min(1.0, float(unit[i] @ unit[j]))
            if best is None or similarity > best.similarity:
                best = Nearest(rows[j], similarity)
        return best

    def stored_records(self, ids: Iterable[str]) -> dict[str, ScoreRecord | None]:
        # The engine answers for a stored id itself (it knows who may see it), not the scorer.
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
        scorer = Scorer(self.embedder, memory=_LookOnly(self.kb, viewer), remember="none")
        scores = scorer.score_many(traces)
        records = [ScoreRecord.of(s, t) for s, t in zip(scores, traces)]
        return self._hide_unseen(records, viewer)

    def contribute(
        self, traces: Sequence[ReasoningTrace], key: ApiKey, source: str
    ) -> list[Contribution]:
        """Score each trace against the traces ``key`` may see and store those that reach the
        threshold.

        Raises :class:`UnstorableId` for an id :func:`id_problem` refuses (nothing stored).

        Idempotent by id: an id the key has stored, or may see, answers its stored result,
        also when another request stores it meanwhile. An id held by a trace the key may not
        see is answered as if it were free: the trace goes to the key's namespaced row.
        """
        for trace in traces:  # the callers check first, to answer by field; this is the rule
            problem = id_problem(trace.id)
            if problem is not None:
                raise UnstorableId(problem)
        results = self._contribute_once(traces, key, source)
        # Another key stored one of these ids between the look-up and the store: the id is
        # taken now by a trace this key may not see, so those traces go again, to this
        # key's namespaced rows (which no other key can take).
        again = [i for i, result in enumerate(results) if result.status == "conflict"]
        if again:
            retried = self._contribute_once([traces[i] for i in again], key, source)
            for i, result in zip(again, retried):
                results[i] = result
        return results

    def _rows_for(self, ids: Sequence[str], key: ApiKey) -> dict[str, str]:
        """The row each id is stored under for ``key``: the id itself when it is free or
        held by a trace the key may see, else the id namespaced by the key."""
        viewer = key.viewer
        access = self.kb.access_of(ids)
        return {
            trace_id: trace_id
            if trace_id not in access or viewer.can_see(access[trace_id])
            else namespaced_id(trace_id, key.id)
            for trace_id in ids
        }

    def _contribute_once(
        self, traces: Sequence[ReasoningTrace], key: ApiKey, source: str
    ) -> list[Contribution]:
        viewer = key.viewer
        rows = self._rows_for([trace.id for trace in traces], key)
        ids = [rows[trace.id] for trace in traces]  # the rows, by position
        before = self.kb.access_of(ids)
        fresh = [i for i, row in enumerate(ids) if row not in before]
        scores: dict[int, ValueScore] = {}  # by position in traces
        if fresh:
            scorer = Scorer(
                self.embedder,
                memory=_Contributor(self.kb, key, source, rows),
                remember="accepted",
                threshold=self.threshold,
            )
            scores = dict(zip(fresh, scorer.score_many([traces[i] for i in fresh])))
        stored = self.kb.stored_records(ids)
        access = self.kb.access_of(ids)
        results: list[Contribution] = []
        for position, (trace, row) in enumerate(zip(traces, ids)):
            score = scores.get(position)
            mine = None if score is None else ScoreRecord.of(score, trace, threshold=self.threshold)
            if mine is not None and mine.stored == "added":  # the base stored it, and said so
                results.append(self._result(mine, "accepted", viewer))
            elif row not in stored:
                if mine is None:  # stored before this request, gone now (kp kb clear)
                    raise KnowledgeBaseError(f"{trace.id} was removed meanwhile; post it again")
                results.append(self._result(mine, "rejected", viewer))
            elif viewer.can_see(access[row]):
                results.append(self._already_stored(trace.id, stored[row], viewer))
            else:  # only between two looks at the base (contribute then tries again)
                results.append(self._unscored(trace.id, "conflict", _TAKEN))
        return results

    def _already_stored(
        self, trace_id: str, previous: ScoreRecord | None, viewer: Viewer
    ) -> Contribution:
        """The answer for an id stored before: its stored record, or, for a row stored without
        one it can read (``kp kb import`` of a bare row, a hand-edited record), no value."""
        if previous is not None:
            record = previous.model_copy(update={"stored": "already_stored"})
            return self._result(record, "already_stored", viewer)
        return self._unscored(
            trace_id,
            "already_stored",
            "this id was stored before, without a score record the service can read",
        )

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

    def _unscored(
        self, trace_id: str, status: ContributionStatus, explanation: str
    ) -> Contribution:
        """An answer without a record: no value, no nearest trace."""
        return Contribution(
            id=trace_id,
            status=status,
            accepted=status == "already_stored",
            value=None,
            threshold=self.threshold,
            explanation=explanation,
            nearest=None,
            record=None,
        )

    def _hide_unseen(self, records: list[ScoreRecord], viewer: Viewer) -> list[ScoreRecord]:
        """The records with every nearest trace ``viewer`` may not see made anonymous, and
        every one it may see named by its id as contributed."""
        named = {r.nearest.id for r in records if r.nearest is not None and r.nearest.id}
        seen = self._visible(named, viewer)
        out = []
        for record in records:
            nearest = record.nearest
            if nearest is None or nearest.id is None:
                out.append(record)
                continue
            if nearest.id in seen:
                shown = shown_id(nearest.id)
                if shown != nearest.id:
                    record = record.model_copy(
                        update={
                            "nearest": Nearest(shown, nearest.similarity),
                            "explanation": record.explanation.replace(nearest.id, shown),
                        }
                    )
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
        return [self._hide_unseen_copy(record, viewer) for record in out]

    def _hide_unseen_copy(self, record: ScoreRecord, viewer: Viewer) -> ScoreRecord:
        """The record's ``copy_of`` named as contributed, or made anonymous when ``viewer``
        may not see it (as the nearest trace is)."""
        copied = record.copy_of
        if copied is None or copied.id is None:
            return record
        if self._visible([copied.id], viewer):
            shown = shown_id(copied.id)
            if shown == copied.id:
                return record
            named = CopyMatch(shown, copied.similarity, copied.relation)
            text = record.explanation.replace(copied.id, shown)
        else:
            named = CopyMatch(None, copied.similarity, copied.relation)
            text = record.explanation.replace(copied.id, HIDDEN)
        return record.model_copy(update={"copy_of": named, "explanation": text})

    def _visible(self, ids: Iterable[str], viewer: Viewer) -> set[str]:
        access = self.kb.access_of(ids)
        return {trace_id for trace_id, a in access.items() if viewer.can_see(a)}

    # -- reading -----------------------------------------------------------------------------

    def detail(self, trace_id: str, viewer: Viewer) -> TraceDetail | None:
        """The stored trace, or None when there is none *or* the viewer may not see it."""
        row = self._readable_row(trace_id, viewer)
        found = None if row is None else self.kb.get(row)
        if row is None or found is None or not viewer.can_see(_access(found)):
            return None
        near = self._copies_of(found.trace, row, viewer)
        record = None
        if found.record is not None:
            record = self._hide_unseen([found.record], viewer)[0]
        return TraceDetail(
            trace=found.trace,
            record=record,
            added_at=found.added_at,
            source=found.source,
            near_duplicates=near,
        )

    def readable_trace(self, trace_id: str, viewer: Viewer) -> ReasoningTrace | None:
        """The stored trace ``viewer`` reads as ``trace_id``, or None when there is none, the
        viewer may not see it, or the stored row is no valid trace: one answer for all three."""
        row = self._readable_row(trace_id, viewer)
        found = None if row is None else self.kb.get(row)
        if found is None or not viewer.can_see(_access(found)):
            return None
        try:
            return ReasoningTrace.model_validate(found.trace)
        except ValueError:
            return None

    def compare(self, a: str, b: str, viewer: Viewer, rubric: str | None) -> TraceComparison | str:
        """The two traces compared (``compare_traces``), or the first id ``viewer`` cannot
        read: a missing id and an unreadable one get the same answer."""
        found = []
        for trace_id in (a, b):
            trace = self.readable_trace(trace_id, viewer)
            if trace is None:
                return trace_id
            found.append(trace)
        return compare_traces(found[0], found[1], rubric=rubric)

    def _copies_of(self, trace: dict[str, Any], row: str, viewer: Viewer) -> list[NearestRef]:
        """The stored copies of a stored trace that ``viewer`` may see (the copy decision of
        kp curate and the scorer: exact first, then near copies, most similar first)."""
        try:
            facet = copy_facet(ReasoningTrace.model_validate(trace))
        except ValueError:  # a stored row that is no trace: no copies to name
            return []

        def readable(other: str) -> bool:
            return other != row and bool(self._visible([other], viewer))

        return [
            NearestRef(id=shown_id(str(match.id)), similarity=match.similarity)
            for match in self.kb.stored_copies(facet, COPY_SIMILARITY, 10, readable)
        ]

    def team_of(self, trace_id: str, viewer: Viewer) -> str | None:
        """The org of the key that contributed the trace ``viewer`` reads as ``trace_id``
        (None: none recorded, or no such trace for this viewer)."""
        row = self._readable_row(trace_id, viewer)
        access = None if row is None else self.kb.access_of([row]).get(row)
        return None if access is None else access.org

    def _readable_row(self, trace_id: str, viewer: Viewer) -> str | None:
        """The row ``viewer`` reads under ``trace_id``: the id itself, else the viewer's own
        namespaced row, else another key's namespaced row the viewer may see."""
        own = namespaced_id(trace_id, viewer.key_id)
        access = self.kb.access_of([trace_id, own])
        for row in (trace_id, own):
            if row in access and viewer.can_see(access[row]):
                return row
        others = [namespaced_id(trace_id, key.id) for key in self.kb.api_keys()]
        access = self.kb.access_of(others)
        return next((row for row in others if row in access and viewer.can_see(access[row])), None)

    def listing(self, viewer: Viewer, **query: Any) -> TraceList:
        rows, total = self.kb.list_traces(viewer, **query)
        named = {
            nearest.id
            for row in rows
            if row.record is not None and (nearest := row.record.nearest) and nearest.id
        }
        seen = self._visible(named, viewer)
        items = []
        for row in rows:
            record = row.record
            nearest = None if record is None else record.nearest
            ref = None
            if nearest is not None and nearest.id in seen:
                ref = NearestRef(id=shown_id(nearest.id), similarity=nearest.similarity)
            items.append(
                TraceListItem(
                    id=shown_id(row.id),
                    value=None if record is None else record.score,
                    complexity=None if record is None else record.complexity,
                    novelty=None if record is None else record.novelty,
                    tool_diversity=None if record is None else record.tool_diversity,
                    outcome=None if record is None else record.outcome,
                    domain=None if record is None else record.domain,
                    success=None if record is None else record.success,
                    nearest=ref,
                    added_at=row.added_at,
                    objective=row.objective,
                )
            )
        return TraceList(items=items, total=total)

    def search(
        self, text: str, k: int, viewer: Viewer, prefer: str = "relevant"
    ) -> tuple[list[SearchHit], str | None]:
        """Recall's search (the vector and full-text rankings fused, every trace ``viewer``
        may see, successful or not), and why nothing was found when nothing was.

        Raises:
            ValueError: a text over recall's limit (the message names it).
        """
        found, reason = ranked_search(
            self.kb, self.embedder, text, k=k, viewer=viewer, success_only=False, prefer=prefer
        )
        hits = [
            SearchHit(
                id=shown_id(hit.row.id),
                similarity=hit.similarity,
                value=hit.row.value,
                domain=hit.row.domain,
                objective=_objective(hit.row.trace),
                found_by=hit.found_by,
                vector_rank=hit.vector_rank,
                text_rank=hit.text_rank,
            )
            for hit in found
        ]
        return hits, reason

    def _rows_of(self, ids: list[str]) -> list[StoredTrace]:
        return [row for row in map(self.kb.get, ids) if row is not None]

    def stats(self, viewer: Viewer) -> dict[str, Any]:
        """Counts over the traces ``viewer`` may see, and how many more it may not (``hidden``:
        a reader told 6 traces should know the base holds others, not think it small)."""
        identity = self.kb.identity
        visible = self.kb.visible_stats(viewer)
        return {
            **visible,
            "hidden": max(0, len(self.kb) - int(visible["traces"])),
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
