"""Order-free curation: group near-duplicates, keep the most valuable trace of each group.

Sequential novelty depends on the order traces arrive in (each is compared with those before
it). A pile of traces wants a decision that does not, so curation:

1. embeds every trace and gives it an order-free value: the value score with novelty
   measured against a knowledge base when one is given (what is stored counts as seen), else
   the no-memory 0.5;
2. drops, as a duplicate of the stored trace, every trace whose nearest stored trace has
   cosine similarity ≥ ``similarity``;
3. walks the rest from the highest value down (ties broken by id): each trace not yet in a
   group keeps its place and takes into its group every unassigned trace within
   ``similarity`` of it.

Every dropped trace is within ``similarity`` of the trace kept in its place, and the result
depends only on the set of traces, never on their order: neighbours are found in an index
built in id order, and the walk's order is fixed by value and id.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ._formulas import NOVELTY_FALLBACK, TraceFacts, ValueScore, compose
from ._profiles import ProfileRegistry, global_registry
from ._schema import ReasoningTrace, parse_trace

if TYPE_CHECKING:
    from .kb import KnowledgeBase

__all__ = ["CurationResult", "Duplicate", "DuplicateGroup", "curate"]

#: Cosine similarity from which two traces are near-duplicates, by default.
DEFAULT_SIMILARITY = 0.9
#: Neighbours looked at per trace when grouping (more are found for dense clusters).
NEIGHBOURS = 64


@dataclass(frozen=True, slots=True)
class Duplicate:
    """A dropped trace: which one, how similar to the kept trace, and its value."""

    id: str
    similarity: float
    value: float | None = None


@dataclass(frozen=True)
class DuplicateGroup:
    """A kept trace (or a stored one) and the traces dropped as its near-duplicates."""

    kept: str
    duplicates: list[Duplicate]
    reason: str
    kept_value: float | None = None
    stored: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "kept": self.kept,
            "duplicates": [
                {"id": d.id, "similarity": round(d.similarity, 6), "value": d.value}
                for d in self.duplicates
            ],
            "reason": self.reason,
        }


@dataclass
class CurationResult:
    """What curation decided: the kept traces (in input order), the groups, every value."""

    kept: list[ReasoningTrace]
    groups: list[DuplicateGroup]
    values: dict[str, float] = field(default_factory=dict)
    similarity: float = DEFAULT_SIMILARITY

    @property
    def dropped(self) -> int:
        return sum(len(group.duplicates) for group in self.groups)


def curate(
    traces: Iterable[ReasoningTrace | Mapping[str, Any]],
    *,
    embedder: Any,
    similarity: float = DEFAULT_SIMILARITY,
    kb: KnowledgeBase | None = None,
    profiles: ProfileRegistry | None = None,
    batch_size: int = 64,
) -> CurationResult:
    """Group near-duplicates and keep the most valuable trace of each group, order-free.

    Args:
        traces: the pile (models or mappings). Repeated ids: the first one is used.
        embedder: an :class:`~knowledgepulse.Embedder` (curation compares embeddings).
        similarity: cosine similarity from which two traces are near-duplicates.
        kb: a knowledge base (:func:`~knowledgepulse.kb.open_knowledge_base`): stored traces
            count as seen, and novelty in the values is measured against it.
        profiles: domain weights (default: the registered profiles).
        batch_size: texts embedded per call.

    Returns:
        The kept traces in input order, and one group per kept (or stored) trace that has
        near-duplicates, largest value first.
    """
    if not 0.0 < similarity <= 1.0:
        raise ValueError(f"similarity must be in (0, 1], got {similarity!r}")
    registry = profiles if profiles is not None else global_registry().copy()
    pile: list[ReasoningTrace] = []
    seen: set[str] = set()
    for item in traces:
        trace = parse_trace(item)
        if trace.id not in seen:
            seen.add(trace.id)
            pile.append(trace)
    if not pile:
        return CurationResult(kept=[], groups=[], similarity=similarity)
    # Canonical order (by id): the index, and so every neighbour list, ignores input order.
    order = sorted(range(len(pile)), key=lambda i: pile[i].id)
    canonical = [pile[i] for i in order]
    vectors = _embed(embedder, canonical, batch_size)
    stored_nearest = _nearest_stored(kb, vectors)
    values: dict[str, ValueScore] = {}
    for trace, nearest in zip(canonical, stored_nearest):
        novelty, source = NOVELTY_FALLBACK, "empty_cache"
        if nearest is not None:
            novelty, source = 1.0 - nearest[1], "embedding"
        profile = registry.for_domain(trace.metadata.task_domain)
        values[trace.id] = compose(TraceFacts.of(trace), novelty, source, profile, trace.id)  # type: ignore[arg-type]

    groups: list[DuplicateGroup] = []
    assigned: set[int] = set()
    by_stored: dict[str, list[Duplicate]] = {}
    for position, nearest in enumerate(stored_nearest):
        if nearest is not None and nearest[1] >= similarity:
            trace_id = canonical[position].id
            by_stored.setdefault(nearest[0], []).append(
                Duplicate(trace_id, nearest[1], values[trace_id].value)
            )
            assigned.add(position)
    for stored_id, duplicates in sorted(by_stored.items()):
        duplicates.sort(key=lambda d: (-d.similarity, d.id))
        groups.append(
            DuplicateGroup(
                kept=stored_id,
                duplicates=duplicates,
                reason=f"already in the knowledge base: {len(duplicates)} trace(s) at cosine "
                f"≥ {similarity:g} to it were dropped",
                stored=True,
            )
        )

    neighbours = _neighbours(vectors, similarity)
    walk = sorted(
        (p for p in range(len(canonical)) if p not in assigned),
        key=lambda p: (-values[canonical[p].id].value, canonical[p].id),
    )
    kept_positions: list[int] = []
    for position in walk:
        if position in assigned:
            continue
        assigned.add(position)
        kept_positions.append(position)
        duplicates = []
        for other, cosine in neighbours[position]:
            if other not in assigned:
                assigned.add(other)
                other_id = canonical[other].id
                duplicates.append(Duplicate(other_id, cosine, values[other_id].value))
        if duplicates:
            kept_id = canonical[position].id
            kept_value = values[kept_id].value
            ties = sum(1 for d in duplicates if d.value == kept_value)
            reason = (
                f"kept for the highest value ({kept_value:.4f}) of {len(duplicates) + 1} "
                f"near-duplicates (cosine ≥ {similarity:g})"
            )
            if ties:
                reason += f"; {ties} tie(s) on value broken by id"
            duplicates.sort(key=lambda d: (-d.similarity, d.id))
            groups.append(DuplicateGroup(kept_id, duplicates, reason, kept_value))
    kept_ids = {canonical[p].id for p in kept_positions}
    groups.sort(key=lambda g: (g.stored, -(g.kept_value or 0.0), g.kept))
    return CurationResult(
        kept=[trace for trace in pile if trace.id in kept_ids],
        groups=groups,
        values={trace_id: score.value for trace_id, score in values.items()},
        similarity=similarity,
    )


def _embed(embedder: Any, traces: Sequence[ReasoningTrace], batch_size: int) -> np.ndarray:
    rows = []
    for start in range(0, len(traces), batch_size):
        chunk = traces[start : start + batch_size]
        rows.append(np.asarray(embedder.embed([t.embedding_text for t in chunk]), np.float32))
    matrix = np.concatenate(rows)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.where(norms > 0, matrix / np.where(norms > 0, norms, 1.0), 0.0).astype(np.float32)


def _nearest_stored(
    kb: KnowledgeBase | None, vectors: np.ndarray
) -> list[tuple[str, float] | None]:
    if kb is None or len(kb) == 0:
        return [None] * vectors.shape[0]
    found: list[tuple[str, float] | None] = []
    for row in vectors:
        hits = kb.search(row, 1)
        found.append((hits[0].id, hits[0].similarity) if hits else None)
    return found


def _neighbours(vectors: np.ndarray, similarity: float) -> list[list[tuple[int, float]]]:
    """Each row's other rows at cosine ≥ ``similarity``, most similar first."""
    from .kb._index import VectorIndex

    n = vectors.shape[0]
    index = VectorIndex(vectors.shape[1])
    index.extend([str(i) for i in range(n)], vectors)
    result: list[list[tuple[int, float]]] = []
    k = min(n, NEIGHBOURS)
    for start in range(0, n, 256):
        chunk = vectors[start : start + 256]
        for row, found in enumerate(index.nearest(chunk, k)):
            me = start + row
            near = [(p, s) for p, s in found if p != me and s >= similarity]
            if len(found) == k and found[-1][1] >= similarity and k < n:
                # A dense cluster: look at every row for this one.
                sims = vectors @ vectors[me]
                near = sorted(
                    (
                        (int(p), float(sims[p]))
                        for p in np.nonzero(sims >= similarity)[0]
                        if p != me
                    ),
                    key=lambda ps: (-ps[1], ps[0]),
                )
            result.append(near)
    return result
