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

Every dropped trace is within ``similarity`` of the trace kept in its place (a leader and
its followers: nothing is grouped through an intermediate trace, so no chain of similar
pairs joins dissimilar traces), no two kept traces of the pile are within ``similarity`` of
each other (exactly so below the kb index's ANN threshold of 50,000 traces), and the result depends only on the set of traces, never on their order:
neighbours are found in an index built in id order, and the walk's order is fixed by value
and id. Each group's similarities are to its kept trace.

With a ``first_pass`` embedder (the static embedder), step 3's neighbours are found in two
tiers: the cheap vectors propose candidate pairs (cosine ≥ ``candidate_similarity``, a lower
threshold calibrated so that MiniLM near-duplicate pairs are almost never left out), only the
traces in a candidate pair are embedded by ``embedder``, and a candidate pair is a
near-duplicate when its ``embedder`` cosine is ≥ ``similarity``. Traces without a candidate
are kept without being embedded. Without a knowledge base only: novelty against a base needs
every trace's ``embedder`` vector.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt

from .._schema import ReasoningTrace, parse_trace
from ..memory._cache import exact_rows
from ..records import GroupDuplicate, GroupRecord
from ._formulas import NEAR_DUPLICATE, NOVELTY_FALLBACK, TraceFacts, compose
from ._profiles import ProfileRegistry, global_registry

if TYPE_CHECKING:
    from ..kb import KnowledgeBase

__all__ = [
    "CurationOutcome",
    "CurationResult",
    "Duplicate",
    "DuplicateGroup",
    "curate",
    "distinct_traces",
    "relation_counts",
]

#: Cosine similarity from which two traces are near-duplicates, by default: the one threshold
#: (``NEAR_DUPLICATE``, where the measurement behind it is said).
DEFAULT_SIMILARITY = NEAR_DUPLICATE
#: How far below ``similarity`` the static first pass proposes candidates, as a share of
#: ``1 - similarity``: candidates have static cosine ≥ ``1 - 0.4 * (1 - similarity)``. On the
#: 200 tau-bench conversations the MiniLM pairs at cosine ≥ 0.95 / 0.93 / 0.90 had static
#: cosines of at least 0.9956 / 0.9801 / 0.9684; 0.4 puts the candidate threshold (0.98 /
#: 0.972 / 0.96) below each with a margin (docs/knowledge-base.md).
CANDIDATE_GAP_FACTOR = 0.4
#: Neighbours looked at per trace when grouping (more are found for dense clusters).
NEIGHBOURS = 64


@dataclass(frozen=True, slots=True)
class Duplicate:
    """A dropped trace: which one, how similar to the kept trace, and its value."""

    id: str
    similarity: float
    value: float | None = None
    #: What joined it to the kept trace: ``exact`` or ``near_copy`` (copies), ``same_task``,
    #: or None (a whole-trace cosine, ``--by embedding``).
    relation: str | None = None


@dataclass(frozen=True)
class DuplicateGroup:
    """A kept trace (or a stored one) and the traces dropped as its near-duplicates."""

    kept: str
    duplicates: list[Duplicate]
    reason: str
    kept_value: float | None = None
    stored: bool = False
    #: Members kept beside ``kept`` (``kp curate --by task --keep-per-task K``).
    also_kept: list[str] = field(default_factory=list)
    #: The group's relation: the weakest of its members' (``exact`` only when every member is
    #: an exact copy), None for whole-trace cosine groups.
    relation: str | None = None

    def record(self) -> GroupRecord:
        """The group as the line ``kp curate --groups`` writes (``knowledgepulse.groups/1``)."""
        return GroupRecord(
            kept=self.kept,
            also_kept=list(self.also_kept) or None,
            relation=self.relation,
            duplicates=[
                GroupDuplicate(
                    id=d.id, similarity=round(d.similarity, 6), value=d.value, relation=d.relation
                )
                for d in self.duplicates
            ],
            reason=self.reason,
        )

    def to_dict(self) -> dict[str, Any]:
        return self.record().to_dict()


@dataclass
class CurationResult:
    """What curation decided: the kept traces (in input order), the groups, every value."""

    kept: list[ReasoningTrace]
    groups: list[DuplicateGroup]
    values: dict[str, float] = field(default_factory=dict)
    similarity: float = DEFAULT_SIMILARITY

    #: With a first pass: candidate pairs it proposed, and traces embedded by the embedder.
    candidate_pairs: int | None = None
    embedded: int | None = None

    @property
    def dropped(self) -> int:
        return sum(len(group.duplicates) for group in self.groups)

    @property
    def distinct(self) -> int:
        """Traces curated (a repeated id once)."""
        return len(self.values)

    @property
    def kept_count(self) -> int:
        return len(self.kept)

    @property
    def group_count(self) -> int:
        return len(self.groups)

    @property
    def by_relation(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for group in self.groups:
            relation_counts(counts, group.duplicates)
        return counts


class CurationOutcome(Protocol):
    """What every curation engine tells of the pile it curated, whether it held the pile in
    memory (:class:`CurationResult`, also Ray's), or streamed it through a work directory
    (:class:`~._stream_curation.StreamingCuration`, :class:`~._copy_curation.CopyCuration`):
    the one shape :func:`knowledgepulse.curate_files` reads its summary from."""

    @property
    def distinct(self) -> int:
        """Traces curated (a repeated id once)."""
        ...

    @property
    def kept_count(self) -> int: ...

    @property
    def dropped(self) -> int: ...

    @property
    def group_count(self) -> int: ...

    @property
    def by_relation(self) -> dict[str, int]:
        """The dropped traces by what joined them to the kept one (:func:`relation_counts`)."""
        ...


def relation_counts(counts: dict[str, int], duplicates: Iterable[Duplicate]) -> None:
    """Count ``duplicates`` into ``counts`` by relation; a duplicate that names none (a
    whole-trace cosine) counts as ``near_copy``."""
    for duplicate in duplicates:
        relation = duplicate.relation or "near_copy"
        counts[relation] = counts.get(relation, 0) + 1


def candidate_threshold(similarity: float, chosen: float | None = None) -> float:
    """The static cosine from which a pair is a candidate for ``similarity`` (MiniLM):
    ``chosen`` when the user chose one, else the calibrated default."""
    if chosen is not None:
        return chosen
    return 1.0 - CANDIDATE_GAP_FACTOR * (1.0 - similarity)


def curate(
    traces: Iterable[ReasoningTrace | Mapping[str, Any]],
    *,
    embedder: Any,
    similarity: float = DEFAULT_SIMILARITY,
    kb: KnowledgeBase | None = None,
    profiles: ProfileRegistry | None = None,
    batch_size: int = 64,
    first_pass: Any = None,
    candidate_similarity: float | None = None,
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
        first_pass: a cheap embedder (:class:`~knowledgepulse.embedding.StaticEmbedder`)
            whose vectors propose candidate pairs; only traces in a candidate pair are
            embedded by ``embedder``. Not with ``kb``.
        candidate_similarity: the first pass's cosine from which a pair is a candidate
            (default :func:`candidate_threshold` of ``similarity``).

    Returns:
        The kept traces in input order, and one group per kept (or stored) trace that has
        near-duplicates, largest value first.

    Raises:
        ValueError: ``similarity`` or ``candidate_similarity`` is not in (0, 1], or
            ``first_pass`` is given with ``kb``.
    """
    check_settings(similarity, candidate_similarity, first_pass is not None, kb is not None)
    if kb is not None:
        from ._scorer import check_vector_text

        check_vector_text(kb, "seed")  # whole-trace vectors are compared here
    registry = profiles if profiles is not None else global_registry().copy()
    pile = distinct_traces(traces)
    if not pile:
        return CurationResult(kept=[], groups=[], similarity=similarity)
    # Canonical order (by id): the index, and so every neighbour list, ignores input order.
    canonical = sorted(pile, key=lambda t: t.id)
    ids = [trace.id for trace in canonical]
    tiers = None
    if first_pass is None:
        vectors = embed_traces(embedder, canonical, batch_size)
        stored_nearest = _nearest_stored(kb, vectors)
    else:
        threshold = candidate_threshold(similarity, candidate_similarity)
        tiers = _tiered_neighbours(
            first_pass, embedder, canonical, similarity, threshold, batch_size
        )
        stored_nearest = [None] * len(canonical)
    values = [
        trace_value(trace, nearest, registry) for trace, nearest in zip(canonical, stored_nearest)
    ]
    assigned = np.zeros(len(canonical), dtype=bool)
    groups = stored_groups(ids, values, stored_nearest, similarity, assigned)
    neighbours = _neighbours(vectors, similarity) if tiers is None else tiers.neighbours
    kept_ids: set[str] = set()
    for position, group in walk(ids, values, assigned, neighbours.__getitem__, similarity):
        kept_ids.add(ids[position])
        if group is not None:
            groups.append(group)
    groups.sort(key=lambda g: (g.stored, -(g.kept_value or 0.0), g.kept))
    return CurationResult(
        kept=[trace for trace in pile if trace.id in kept_ids],
        groups=groups,
        values=dict(zip(ids, values)),
        similarity=similarity,
        candidate_pairs=None if tiers is None else tiers.candidate_pairs,
        embedded=None if tiers is None else tiers.embedded,
    )


def check_settings(
    similarity: float, candidate_similarity: float | None, first_pass: bool, kb: bool
) -> None:
    """Refuse settings curation cannot run with (``ValueError``)."""
    if not 0.0 < similarity <= 1.0:
        raise ValueError(f"similarity must be in (0, 1], got {similarity!r}")
    if candidate_similarity is not None and not -1.0 <= candidate_similarity <= 1.0:
        raise ValueError(f"candidate_similarity must be in [-1, 1], got {candidate_similarity!r}")
    if first_pass and kb:
        raise ValueError(
            "a first pass does not combine with a knowledge base: novelty against the base "
            "needs every trace's embedding"
        )


def distinct_traces(traces: Iterable[ReasoningTrace | Mapping[str, Any]]) -> list[ReasoningTrace]:
    """The traces, validated, the first of each id only."""
    pile: list[ReasoningTrace] = []
    seen: set[str] = set()
    for item in traces:
        trace = parse_trace(item)
        if trace.id not in seen:
            seen.add(trace.id)
            pile.append(trace)
    return pile


def trace_value(
    trace: ReasoningTrace, nearest: tuple[str, float] | None, registry: ProfileRegistry
) -> float:
    """A trace's order-free value: novelty against the nearest stored trace, else 0.5."""
    novelty, source = NOVELTY_FALLBACK, "empty_cache"
    if nearest is not None:
        novelty, source = 1.0 - nearest[1], "embedding"
    profile = registry.for_domain(trace.metadata.task_domain)
    score = compose(TraceFacts.of(trace), novelty, source, profile, trace.id)  # type: ignore[arg-type]
    return float(score.value)


def stored_groups(
    ids: Sequence[str],
    values: Sequence[float],
    stored_nearest: Sequence[tuple[str, float] | None],
    similarity: float,
    assigned: npt.NDArray[np.bool_],
) -> list[DuplicateGroup]:
    """One group per stored trace that traces are near-duplicates of (those are marked in
    ``assigned``), by stored id."""
    by_stored: dict[str, list[Duplicate]] = {}
    for position, nearest in enumerate(stored_nearest):
        if nearest is not None and nearest[1] >= similarity:
            by_stored.setdefault(nearest[0], []).append(
                Duplicate(ids[position], nearest[1], values[position])
            )
            assigned[position] = True
    return [
        stored_group(stored_id, duplicates, similarity)
        for stored_id, duplicates in sorted(by_stored.items())
    ]


def stored_group(
    stored_id: str, duplicates: list[Duplicate], similarity: float, measure: str = "cosine"
) -> DuplicateGroup:
    """The group of the traces dropped as near-duplicates (or copies: members with a
    relation) of a stored trace."""
    duplicates.sort(key=lambda d: (-d.similarity, d.id))
    relation = group_relation(duplicates)
    if relation is None:
        what = f"trace(s) at {measure} ≥ {similarity:g} to it"
    else:
        what = f"cop(ies) of it ({_copy_rule(measure, similarity)})"
    return DuplicateGroup(
        kept=stored_id,
        duplicates=duplicates,
        reason=f"already in the knowledge base: {len(duplicates)} {what} were dropped",
        stored=True,
        relation=relation,
    )


def _copy_rule(measure: str, similarity: float) -> str:
    """What makes two traces copies, as group reasons say it."""
    return f"exact; {measure} ≥ {similarity:g}; or the same steps reworded"


def _copies_named(relation: str, measure: str, similarity: float) -> str:
    """``exact copies (…)`` or ``copies (…)``: what joined a group of copies."""
    if relation == "exact":
        return "exact copies (the same normalised text)"
    return f"copies ({_copy_rule(measure, similarity)})"


def walk(
    ids: Sequence[str] | npt.NDArray[np.object_],
    values: Sequence[float] | npt.NDArray[np.float64],
    assigned: npt.NDArray[np.bool_],
    neighbours_of: Callable[[int], Sequence[tuple[int, float] | tuple[int, float, str]]],
    similarity: float,
    measure: str = "cosine",
    first: npt.NDArray[np.int64] | None = None,
) -> Iterator[tuple[int, DuplicateGroup | None]]:
    """The leaders, highest value first (ties: smallest id), each with its group (None when it
    has no near-duplicate left): a leader takes every unassigned trace within ``similarity``
    of it. Positions are in id order; ``assigned`` marks the ones already taken.

    Groups come out in the order ``kp curate`` writes them (value, then id), so a streaming
    run writes each as it closes. A neighbour may carry its relation as a third item;
    ``measure`` names the similarity in the groups' reasons; ``first``, when given, orders
    before the value (larger first: a copy count puts a family's centre first, 1 for a
    successful run puts successful runs first).
    """
    value_array = np.asarray(values, dtype=np.float64)
    positions = np.arange(len(ids))
    # lexsort: the last key first; positions are in id order, so they break ties by id.
    keys: tuple[Any, ...] = (positions, -value_array)
    if first is not None:
        keys = (*keys, -first)
    for position in np.lexsort(keys).tolist():
        if assigned[position]:
            continue
        assigned[position] = True
        duplicates = []
        for neighbour in neighbours_of(position):
            other = neighbour[0]
            if not assigned[other]:
                assigned[other] = True
                relation = neighbour[2] if len(neighbour) > 2 else None
                duplicates.append(
                    Duplicate(ids[other], neighbour[1], float(value_array[other]), relation)
                )
        if not duplicates:
            yield position, None
            continue
        kept_value = float(value_array[position])
        yield position, _leader_group(ids[position], kept_value, duplicates, similarity, measure)


def group_relation(duplicates: Sequence[Duplicate]) -> str | None:
    """A group's relation: ``exact`` when every member is an exact copy, else the members'
    other relation (None for whole-trace cosine groups)."""
    relations = {d.relation for d in duplicates}
    if relations == {"exact"}:
        return "exact"
    relations.discard("exact")
    return relations.pop() if len(relations) == 1 else None


def _leader_group(
    kept_id: str,
    kept_value: float,
    duplicates: list[Duplicate],
    similarity: float,
    measure: str = "cosine",
) -> DuplicateGroup:
    relation = group_relation(duplicates)
    size = len(duplicates) + 1
    if relation is None:
        reason = (
            f"kept for the highest value ({kept_value:.4f}) of {size} near-duplicates "
            f"({measure} ≥ {similarity:g})"
        )
        tied = sum(1 for d in duplicates if d.value == kept_value)
        if tied:
            reason += f"; {tied} tie(s) on value broken by id"
    elif relation == "same_task":
        reason = (
            f"kept first of {size} attempts at one task ({measure} ≥ {similarity:g}): "
            f"successful first, then by value ({kept_value:.4f})"
        )
    else:
        reason = (
            f"kept as the centre of {size} {_copies_named(relation, measure, similarity)}: "
            f"the trace with the most copies, then the highest value ({kept_value:.4f}), "
            "then the smallest id"
        )
    duplicates.sort(key=lambda d: (-d.similarity, d.id))
    return DuplicateGroup(kept_id, duplicates, reason, kept_value, relation=relation)


def unit_rows(matrix: npt.ArrayLike) -> npt.NDArray[np.float32]:
    """Rows scaled to unit length (zero rows stay zero), row by row: a row's result does not
    depend on the rows embedded with it."""
    matrix = np.asarray(matrix, np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    unit: npt.NDArray[np.float32] = np.where(
        norms > 0, matrix / np.where(norms > 0, norms, 1.0), 0.0
    ).astype(np.float32)
    return unit


def embed_traces(embedder: Any, traces: Sequence[ReasoningTrace], batch_size: int) -> np.ndarray:
    """Unit rows of ``traces``' texts, ``batch_size`` texts per call (as curation embeds)."""
    rows = []
    for start in range(0, len(traces), batch_size):
        chunk = traces[start : start + batch_size]
        rows.append(np.asarray(embedder.embed([t.embedding_text for t in chunk]), np.float32))
    return unit_rows(np.concatenate(rows))


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
    from ..kb._index import VectorIndex

    n = vectors.shape[0]
    index = VectorIndex(vectors.shape[1])
    index.extend([str(i) for i in range(n)], vectors)
    result: list[list[tuple[int, float]]] = []
    k = min(n, NEIGHBOURS)
    exact = None  # the rows on the exact-similarity grid, made for the first dense cluster
    for start in range(0, n, 256):
        chunk = vectors[start : start + 256]
        for row, found in enumerate(index.nearest(chunk, k)):
            me = start + row
            near = [(p, s) for p, s in found if p != me and s >= similarity]
            if len(found) == k and found[-1][1] >= similarity and k < n:
                # A dense cluster: look at every row for this one, with the exact similarities
                # the index returns (so a pair's cosine is the same whichever path found it).
                if exact is None:
                    exact = exact_rows(vectors)
                sims = exact @ exact[me]
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


@dataclass
class _Tiers:
    neighbours: list[list[tuple[int, float]]]
    candidate_pairs: int
    embedded: int


# Rows of the candidate search compared with every row at once (rows x pile floats each).
_ROWS_AT_ONCE = 256


def _tiered_neighbours(
    first_pass: Any,
    embedder: Any,
    canonical: Sequence[ReasoningTrace],
    similarity: float,
    candidate_similarity: float,
    batch_size: int,
) -> _Tiers:
    """Each row's near-duplicates (``embedder`` cosine ≥ ``similarity``) among its candidates
    (``first_pass`` cosine ≥ ``candidate_similarity``), most similar first; only the rows in
    a candidate pair are embedded by ``embedder``.

    The candidate search is exact (blocks of rows against the whole pile): no candidate is lost
    to an approximate index, and memory stays at a block of similarities.
    """
    cheap = exact_rows(embed_traces(first_pass, canonical, batch_size))
    n = cheap.shape[0]
    in_pair, pairs = candidate_rows(cheap, candidate_similarity)
    chosen = np.nonzero(in_pair)[0]
    strong = np.zeros((n, 0), dtype=np.float32)
    if len(chosen):
        strong = embed_traces(embedder, [canonical[int(p)] for p in chosen], batch_size)
    neighbours: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    # The deciding cosines are exact, as in the one-tier run: the same pair, the same bits.
    exact = exact_rows(strong)
    for start in range(0, len(chosen), _ROWS_AT_ONCE):
        positions = chosen[start : start + _ROWS_AT_ONCE]
        candidates = cheap[positions] @ cheap[chosen].T >= candidate_similarity
        cosines = exact[start : start + len(positions)] @ exact.T
        for row, position in enumerate(positions):
            others = np.nonzero(candidates[row] & (cosines[row] >= similarity))[0]
            near = [
                (int(chosen[o]), float(cosines[row, o])) for o in others if chosen[o] != position
            ]
            near.sort(key=lambda ps: (-ps[1], ps[0]))
            neighbours[int(position)] = near
    return _Tiers(neighbours, pairs, len(chosen))


def candidate_rows(
    cheap: npt.NDArray[np.float64], candidate_similarity: float
) -> tuple[npt.NDArray[np.bool_], int]:
    """Which rows of ``cheap`` (unit rows on the exact grid: :func:`exact_rows`) are in a
    candidate pair (cosine ≥ ``candidate_similarity`` with another row), and how many pairs.

    Exact cosines decide: a pair at the threshold is a candidate or not whatever the CPU's
    float32 kernels, as in the streaming run's lists. Blocks of rows against the whole pile:
    memory stays at a block of similarities.
    """
    n = cheap.shape[0]
    in_pair = np.zeros(n, dtype=bool)
    pairs = 0
    for start in range(0, n, _ROWS_AT_ONCE):
        block = cheap[start : start + _ROWS_AT_ONCE] @ cheap.T
        rows = np.arange(block.shape[0])
        block[rows, start + rows] = -np.inf  # a trace is not its own candidate
        hits = block >= candidate_similarity
        in_pair[start : start + block.shape[0]] = hits.any(axis=1)
        pairs += int(hits.sum())
    return in_pair, pairs // 2
