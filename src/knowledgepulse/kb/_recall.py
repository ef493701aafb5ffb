"""Recall before acting: the stored traces most like a task, as worked examples for a prompt.

:func:`search_similar` is the one search every surface uses (``knowledgepulse.recall``, the
MCP tools ``search_traces`` and ``search``, ``POST /v1/search`` through :func:`ranked_search`).
Two searches run among the traces the viewer may see that pass the filters (successful runs
only, a domain, a least value), so a filtered-out trace never takes a place:

- by vector: the query embedded, the nearest stored task-text vectors; then every candidate
  of both searches ranked by the nearer of its two vectors to the query, its task text's or
  its opening's (the first user message, :mod:`._openings`; :func:`nearer_facet`);
- by words: the database's own full-text search over each stored trace's task text
  (:mod:`._fulltext`: SQLite FTS5, PostgreSQL ``tsvector``), which finds the entities a
  sentence vector blurs (a reservation code, a user id, a city).

Their rankings are fused by reciprocal rank (:data:`RRF_K`): a trace's score is the sum of
``1 / (RRF_K + rank)`` over the rankings it is in. ``prefer="successful"`` puts every
successful attempt among the candidates before those that failed, and adds a third ranking
of the candidates to the fusion, successful first and then by stored value, so of two
attempts about as relevant the one worth more goes first. Each hit says how it was
found (``vector``, ``text`` or ``both``) and its rank in each. A query with no word to search
for (only stop words or punctuation) is answered with no hit and the reason. Each hit carries
a compact rendering of its steps cut to a token budget, so a handful fits in an agent's
instructions.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args, overload

import numpy as np

from ..api_models import Preference
from ..memory._cache import exact_rows
from ._examples import (
    STEP_BUDGET_TOKENS,
    UNTRUSTED_NOTICE,
    fence_for,
    fenced_example,
    one_line,
    quoted,
    render_steps,
    untrusted_examples,
)
from ._fulltext import query_terms
from ._spans import memory_span

if TYPE_CHECKING:
    from ._base import FloatArray, StoredTrace
    from ._protocol import KnowledgeBase

__all__ = [
    "MAX_QUERY_CHARS",
    "NO_WORDS",
    "PREFERENCES",
    "RRF_K",
    "UNTRUSTED_NOTICE",
    "RankedHit",
    "Recall",
    "RecalledTrace",
    "check_query",
    "fence_for",
    "fenced_example",
    "fused_order",
    "fused_rankings",
    "nearer_facet",
    "one_line",
    "query_vector",
    "quoted",
    "ranked_search",
    "recall",
    "render_steps",
    "require_same_model",
    "search_similar",
    "untrusted_examples",
    "worked_examples",
]

#: The longest query taken (characters): a task description, not a document.
MAX_QUERY_CHARS = 8_000
#: The most hits one search returns.
MAX_LIMIT = 50
#: The most candidates looked through for hits that pass the filters.
_SEARCH_WINDOW = 10_000
#: The reciprocal-rank constant: a trace's fused score is the sum of 1 / (RRF_K + rank) over
#: the rankings it is in (60, as Cormack, Clarke and Büttcher 2009 chose it).
RRF_K = 60
#: How deep each ranking is taken before fusing (at least the hits asked for).
CANDIDATES = 50
#: ``relevant``: by the query alone; ``successful``: successful, high-value attempts first
#: among the candidates (a third ranking in the fusion).
PREFERENCES: tuple[str, ...] = get_args(Preference)
#: The answer to a query with no word to search for.
NO_WORDS = (
    "the query holds no word to search for (only stop words or punctuation); describe the "
    "task, e.g. its objective"
)


@dataclass(frozen=True)
class RecalledTrace:
    """A stored trace found for a task: how similar it is, what it was worth, what it did."""

    id: str
    similarity: float
    value: float | None
    objective: str | None
    outcome: str | None
    success: bool | None
    domain: str | None
    steps: str
    #: Who contributed it (the contributing key's org) and when it was stored.
    team: str | None = None
    added_at: str | None = None
    #: How it was found: ``vector``, ``text`` or ``both``, and its rank (1 = first) in each
    #: search (None: not among that search's candidates).
    found_by: str = "vector"
    vector_rank: int | None = None
    text_rank: int | None = None

    def provenance(self) -> list[tuple[str, str]]:
        """The provenance line's parts: id, contributor's team, added at, similarity, value."""
        parts = [
            ("id", quoted(self.id)),
            ("team", quoted(self.team)),
            ("added at", quoted(self.added_at)),
            ("similarity", f"{self.similarity:.2f}"),
        ]
        if self.value is not None:
            parts.append(("value", f"{self.value:.2f}"))
        return parts

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "similarity": round(self.similarity, 4),
            "value": None if self.value is None else round(self.value, 4),
            "objective": self.objective,
            "outcome": self.outcome,
            "success": self.success,
            "domain": self.domain,
            "steps": self.steps,
            "team": self.team,
            "added_at": self.added_at,
            "found_by": self.found_by,
            "vector_rank": self.vector_rank,
            "text_rank": self.text_rank,
        }


@dataclass(frozen=True)
class Recall(Sequence[RecalledTrace]):
    """What :func:`recall` found: a sequence of its hits (``found[0]``, ``len(found)``,
    ``for hit in found``), :attr:`prompt`, a block for instructions, and :attr:`reason`, why
    nothing was found when nothing was."""

    query: str
    hits: list[RecalledTrace] = field(default_factory=list)
    reason: str | None = None

    @property
    def prompt(self) -> str:
        """The hits as worked examples to add to an agent's instructions ("" for none)."""
        return worked_examples(self.hits)

    def __len__(self) -> int:
        return len(self.hits)

    def __iter__(self) -> Iterator[RecalledTrace]:
        return iter(self.hits)

    @overload
    def __getitem__(self, index: int) -> RecalledTrace: ...

    @overload
    def __getitem__(self, index: slice) -> list[RecalledTrace]: ...

    def __getitem__(self, index: int | slice) -> RecalledTrace | list[RecalledTrace]:
        return self.hits[index]


def check_query(query: Any) -> str:
    """``query`` as a search text, or ``ValueError`` saying what is wrong with it."""
    if not isinstance(query, str):
        raise ValueError(f"query: expected a string, got {type(query).__name__}")
    if not query.strip():
        raise ValueError("query: expected a task description, got an empty string")
    if len(query) > MAX_QUERY_CHARS:
        raise ValueError(
            f"query: {len(query):,} characters; at most {MAX_QUERY_CHARS:,} are taken "
            "(describe the task, not the whole context)"
        )
    return query


def require_same_model(kb: KnowledgeBase, embedder: Any) -> None:
    """Raise :class:`~knowledgepulse.kb.KnowledgeBaseMismatchError` when the base's vectors
    were made another way than ``embedder`` makes them (they cannot be compared)."""
    from . import EmbeddingIdentity, KnowledgeBaseMismatchError

    mine = EmbeddingIdentity.of(embedder)
    if kb.identity is not None:
        # A query is a task description: it compares with vectors of task texts or of whole
        # traces (a base not migrated yet) alike; the model is what must match.
        mine = dataclasses.replace(mine, text=kb.identity.text)
    if kb.identity is not None and kb.identity != mine:
        raise KnowledgeBaseMismatchError(
            f"{kb.location}: its vectors were made with {kb.identity.describe()}, not "
            f"{mine.describe()}"
        )


@dataclass(frozen=True)
class RankedHit:
    """A stored trace found by :func:`ranked_search`: its row, its cosine similarity to the
    query, its rank in each search (None: not among its candidates) and its fused score."""

    row: StoredTrace
    similarity: float
    vector_rank: int | None
    text_rank: int | None
    score: float

    @property
    def found_by(self) -> str:
        """``vector``, ``text`` or ``both``."""
        if self.vector_rank is not None and self.text_rank is not None:
            return "both"
        return "vector" if self.vector_rank is not None else "text"


def query_vector(kb: KnowledgeBase, embedder: Any, query: str) -> FloatArray:
    """The query as the base's vectors are made: a unit vector of ``embedder``'s. Where the
    base records a calibration of its vectors (a centring mean of the task facet), it belongs
    here: the query must be made as the stored vectors were."""
    del kb  # no calibration recorded yet
    vector = np.asarray(embedder.embed([query])[0], dtype=np.float32)
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector


def ranked_search(
    kb: KnowledgeBase,
    embedder: Any,
    query: str,
    *,
    k: int,
    viewer: Any = None,
    success_only: bool = True,
    domain: str | None = None,
    min_value: float | None = None,
    prefer: str = "relevant",
) -> tuple[list[RankedHit], str | None]:
    """The ``k`` best stored traces for ``query`` by the fused ranking (see the module), and
    why there are none when there are none (:data:`NO_WORDS` for a query with no word to
    search for). No limit on ``k`` here: the surfaces set theirs."""
    check_query(query)
    if prefer not in PREFERENCES:
        raise ValueError(f"prefer: expected one of {', '.join(PREFERENCES)}; got {prefer!r}")
    terms = query_terms(query)
    if not terms:
        return [], NO_WORDS
    filters: dict[str, Any] = {
        "success_only": success_only, "domain": domain, "min_value": min_value
    }  # fmt: skip
    depth = max(k, CANDIDATES)
    # One thread a recall: the text search runs in the caller's thread, not beside the
    # embedding in a pool. The service gives each key a share of its threads, and a pool
    # thread working for a call given up would sit outside that share (the hostile-flood
    # test caught it: 3 threads more than before a flood, where one key may add 2).
    by_text = [trace_id for trace_id, _ in kb.search_text(terms, depth, viewer, **filters)]
    vector = query_vector(kb, embedder, query)
    by_vector = _vector_ranking(kb, vector, depth, viewer, filters)
    facts: dict[str, tuple[float | None, bool]] | None = None
    if prefer == "successful":
        facts = kb.passing(list(dict.fromkeys([*(i for i, _ in by_vector), *by_text])), viewer)
    by_facet = nearer_facet(kb, embedder, vector, by_vector, by_text, depth)
    rankings = fused_rankings([trace_id for trace_id, _ in by_facet], by_text, facts)
    ordered = fused_order(rankings, facts)[:k]
    similarity = dict(by_vector)
    hits: list[RankedHit] = []
    for trace_id in ordered:
        row = kb.get(trace_id)
        if row is None:  # deleted meanwhile
            continue
        cosine = similarity.get(trace_id)
        if cosine is None:
            cosine = float(np.clip(np.dot(row.vector, vector), -1.0, 1.0))
        hits.append(
            RankedHit(
                row,
                float(cosine),
                rankings[0].get(trace_id),
                rankings[1].get(trace_id),
                -_fused(trace_id, rankings)[0],
            )
        )
    reason = None if hits else "no stored trace that passes the filters matches the query"
    return hits, reason


def nearer_facet(
    kb: KnowledgeBase,
    embedder: Any,
    vector: FloatArray,
    by_vector: Sequence[tuple[str, float]],
    by_text: Sequence[str],
    depth: int,
) -> list[tuple[str, float]]:
    """The vector ranking: the candidates of both searches (``by_vector``: (id, cosine of
    its task-text vector), ``by_text``: ids), up to ``depth``, each by the nearer of its
    vectors to the query: its task text's (measured for the vector search's candidates)
    and its opening's (:mod:`._openings`, made now where missing). Ties keep the order
    the candidates came in."""
    task = dict(by_vector)
    candidates = list(dict.fromkeys([*task, *by_text]))
    openings = kb.opening_vectors(candidates, embedder) if candidates else {}
    opened = [trace_id for trace_id in candidates if trace_id in openings]
    by_opening: dict[str, float] = {}
    if opened:
        rows = exact_rows(np.stack([openings[trace_id] for trace_id in opened]))
        cosines = np.clip(rows @ exact_rows(vector), -1.0, 1.0)
        by_opening = dict(zip(opened, (float(c) for c in cosines)))
    scored: list[tuple[str, float]] = []
    for trace_id in candidates:
        near = [d[trace_id] for d in (task, by_opening) if trace_id in d]
        if near:
            scored.append((trace_id, max(near)))
    order = sorted(range(len(scored)), key=lambda i: (-scored[i][1], i))
    return [scored[i] for i in order[:depth]]


def fused_rankings(
    by_vector: Sequence[str],
    by_text: Sequence[str],
    facts: dict[str, tuple[float | None, bool]] | None = None,
) -> list[dict[str, int]]:
    """The rankings fused (id -> rank, 1 = first): by vector, by text and, with ``facts``
    (id -> (value, succeeded), as :meth:`~knowledgepulse.kb.KnowledgeBase.passing` gives
    them), the candidates of both by worth: successful first, then by value (none recorded:
    last), then as the first two fuse."""
    rankings = [
        {trace_id: rank for rank, trace_id in enumerate(by_vector, start=1)},
        {trace_id: rank for rank, trace_id in enumerate(by_text, start=1)},
    ]
    if facts is not None:
        known = facts

        def worth(trace_id: str) -> tuple[bool, float, tuple[float, int, int, str]]:
            value, succeeded = known.get(trace_id, (None, False))
            return (not succeeded, -(-1.0 if value is None else value), _fused(trace_id, rankings))

        candidates = list(dict.fromkeys([*rankings[0], *rankings[1]]))
        best = sorted(candidates, key=worth)
        rankings.append({trace_id: rank for rank, trace_id in enumerate(best, start=1)})
    return rankings


def fused_order(
    rankings: list[dict[str, int]], facts: dict[str, tuple[float | None, bool]] | None = None
) -> list[str]:
    """Every id of the rankings, best fused score first (ties: vector rank, text rank, id);
    with ``facts``, every successful attempt before those that failed."""
    candidates = list(dict.fromkeys(trace_id for ranking in rankings for trace_id in ranking))
    ordered = sorted(candidates, key=lambda trace_id: _fused(trace_id, rankings))
    if facts is None:
        return ordered
    return sorted(ordered, key=lambda trace_id: not facts.get(trace_id, (None, False))[1])


def _fused(trace_id: str, rankings: list[dict[str, int]]) -> tuple[float, int, int, str]:
    """A sort key: the fused score (negated), then the best vector rank, text rank, id."""
    score = sum(1.0 / (RRF_K + ranking[trace_id]) for ranking in rankings if trace_id in ranking)
    never = 1 << 30
    return (-score, rankings[0].get(trace_id, never), rankings[1].get(trace_id, never), trace_id)


def _vector_ranking(
    kb: KnowledgeBase, vector: FloatArray, depth: int, viewer: Any, filters: dict[str, Any]
) -> list[tuple[str, float]]:
    """Up to ``depth`` (id, cosine) nearest to ``vector`` among the traces that ``viewer`` may
    see and that pass the filters: the search widens (from 2x, 4x at a time, up to
    :data:`_SEARCH_WINDOW` candidates) until it has them, so a filtered-out trace never takes
    a place."""
    if kb.identity is None:  # no vector stored yet
        return []
    width = 2 * depth  # filters usually leave most: one search, seldom two
    checked: set[str] = set()
    passing: set[str] = set()
    while True:
        # No count of the base first: in SQLite a COUNT(*) reads the whole table (23 ms at
        # 10^5 traces); fewer hits than asked for is the end of the base.
        asked = min(width, _SEARCH_WINDOW)
        hits = kb.search(vector, asked)
        new = [hit.id for hit in hits if hit.id not in checked]
        checked.update(new)
        passing.update(kb.passing(new, viewer, **filters))
        kept = [(hit.id, hit.similarity) for hit in hits if hit.id in passing]
        if len(kept) >= depth or len(hits) < asked or asked >= _SEARCH_WINDOW:
            return kept[:depth]
        width *= 4


def search_similar(
    kb: KnowledgeBase,
    embedder: Any,
    query: str,
    *,
    k: int = 5,
    viewer: Any = None,
    success_only: bool = True,
    domain: str | None = None,
    min_value: float | None = None,
    prefer: str = "relevant",
    budget_tokens: int = STEP_BUDGET_TOKENS,
) -> Recall:
    """The ``k`` stored traces that best match ``query`` and pass the filters.

    Args:
        kb: an open knowledge base.
        embedder: the embedder the base's vectors were made with.
        query: a task description (at most :data:`MAX_QUERY_CHARS` characters).
        k: how many hits (1 to :data:`MAX_LIMIT`).
        viewer: whose eyes (:class:`~knowledgepulse.kb.Viewer`); None sees every trace.
        success_only: only runs whose ``metadata.success`` is true.
        domain: only traces of this ``metadata.task_domain``.
        min_value: only traces whose stored value is at least this.
        prefer: ``relevant`` (by the query alone) or ``successful`` (successful,
            high-value attempts first among the candidates).
        budget_tokens: tokens of step rendering per hit.

    Returns:
        A :class:`Recall`: the hits, best first; none, with the reason, for a query of only
        stop words or punctuation.

    Raises:
        ValueError: a query, a limit or a preference out of range (the message names the
            argument).
    """
    check_query(query)
    if not 1 <= k <= MAX_LIMIT:
        raise ValueError(f"limit: expected 1 to {MAX_LIMIT}, got {k}")
    if min_value is not None and not 0.0 <= min_value <= 1.0:
        raise ValueError(f"min_value: expected a value in [0, 1], got {min_value}")
    with memory_span("search_memory", kb, top_k=k) as span:
        found, reason = ranked_search(
            kb,
            embedder,
            query,
            k=k,
            viewer=viewer,
            success_only=success_only,
            domain=domain,
            min_value=min_value,
            prefer=prefer,
        )
        hits = [_recalled(hit, budget_tokens) for hit in found]
        span.set_attribute("gen_ai.memory.record.count", len(hits))
    return Recall(query=query, hits=hits, reason=reason)


def _recalled(hit: RankedHit, budget_tokens: int) -> RecalledTrace:
    row = hit.row
    trace: dict[str, Any] = row.trace
    task = trace.get("task")
    objective = task.get("objective") if isinstance(task, dict) else None
    outcome = trace.get("outcome")
    summary = outcome.get("result_summary") if isinstance(outcome, dict) else None
    metadata = trace.get("metadata")
    success = metadata.get("success") if isinstance(metadata, dict) else None
    return RecalledTrace(
        id=row.id,
        similarity=hit.similarity,
        value=row.value,
        objective=objective if isinstance(objective, str) else None,
        outcome=summary if isinstance(summary, str) else None,
        success=success if isinstance(success, bool) else None,
        domain=row.domain,
        steps=render_steps(trace, budget_tokens),
        team=row.org,
        added_at=row.added_at,
        found_by=hit.found_by,
        vector_rank=hit.vector_rank,
        text_rank=hit.text_rank,
    )


def worked_examples(hits: Sequence[RecalledTrace]) -> str:
    """The hits as a block of recalled examples for an agent's instructions: marked as
    untrusted data, each fenced, each with its provenance (id, contributor's team, added at)."""
    return untrusted_examples(
        [
            fenced_example(
                f"Example {number} of {len(hits)}",
                hit.provenance(),
                hit.objective,
                hit.steps,
                hit.outcome,
                hit.success,
            )
            for number, hit in enumerate(hits, start=1)
        ]
    )


def recall(
    query: str,
    kb: KnowledgeBase | str | Path,
    k: int = 5,
    success_only: bool = True,
    *,
    domain: str | None = None,
    min_value: float | None = None,
    prefer: str = "relevant",
    embedder: Any = None,
    budget_tokens: int = STEP_BUDGET_TOKENS,
) -> Recall:
    r"""The ``k`` stored traces that best match ``query``, and a prompt block of them (see
    :func:`search_similar` for how they are ranked).

    ::

        found = knowledgepulse.recall("Refund a cancelled flight", kb="team.sqlite")
        instructions = base_instructions + "\n\n" + found.prompt

    Args:
        query: the task description.
        kb: an open knowledge base, or its location (a file or a ``postgresql://`` URL,
            opened for reading and closed again).
        k: how many examples (1 to 50).
        success_only: only runs that succeeded.
        domain: only this ``metadata.task_domain``.
        min_value: only traces whose stored value is at least this.
        prefer: ``relevant`` (by the query alone) or ``successful`` (successful, high-value
            attempts first among the candidates).
        embedder: the embedder the base's vectors were made with (default: the automatic
            choice, :func:`knowledgepulse.embedding.choose_embedder`).
        budget_tokens: tokens of step rendering per example.

    Raises:
        ValueError: a query or a limit out of range; no embedder is available.
        KnowledgeBaseError: the base cannot be opened.
    """
    from ..embedding import check_embedder, choose_embedder
    from . import open_knowledge_base

    if embedder is None:
        chosen = choose_embedder("auto")
        if chosen.embedder is None:
            raise ValueError(f"recall searches by embedding: no embedder ({chosen.reason})")
        embedder = chosen.embedder
    embedder = check_embedder(embedder)
    with ExitStack() as stack:
        if isinstance(kb, (str, Path)):
            kb = open_knowledge_base(kb, None, create=False)
            stack.callback(kb.close)
        require_same_model(kb, embedder)
        return search_similar(
            kb,
            embedder,
            query,
            k=k,
            success_only=success_only,
            domain=domain,
            min_value=min_value,
            prefer=prefer,
            budget_tokens=budget_tokens,
        )
