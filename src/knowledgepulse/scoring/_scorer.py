"""The Scorer: value scores for traces against a novelty memory, one by one or in batches.

The formulas are in :mod:`._formulas`; this module embeds traces, asks the memory for each
one's nearest remembered trace, and composes the score. :func:`evaluate_value` uses the one
process-wide scorer the seeds describe.

The Scorer keeps both its memory paths (the in-process cache and a knowledge base that stores
what it admits) beside the process-wide default scorer the seeds require.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Set
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, overload, runtime_checkable

from .._errors import KnowledgePulseError
from .._schema import ReasoningTrace, parse_trace
from ..copies import COPY_SIMILARITY, CopyFacet, CopyIndex, CopyMatch, copy_facets
from ..records import ScoreRecord
from ..tasks import (
    SAME_TASK_SIMILARITY,
    RunFacet,
    entity_similarity,
    novelty_of_similarity,
    run_facet,
    task_similarity,
    task_text,
)
from ._formulas import (
    NOVELTY_FALLBACK,
    RULE_ERROR_RECOVERY_BONUS,
    RULE_SINGLE_THOUGHT,
    RULE_SINGLE_TOOL_PENALTY,
    NearestRelation,
    NoveltyBy,
    NoveltySource,
    TraceFacts,
    ValueScore,
    compose,
)
from ._profiles import DomainProfile, ProfileRegistry, global_registry

if TYPE_CHECKING:
    from ..embedding import Embedder
    from ..kb import StoredBatch
    from ..memory._cache import Nearest, NoveltyMemory, RunFacets

__all__ = [
    "RULE_ERROR_RECOVERY_BONUS",
    "RULE_SINGLE_THOUGHT",
    "RULE_SINGLE_TOOL_PENALTY",
    "EmbedderOutputError",
    "NoveltySource",
    "Scorer",
    "ValueScore",
    "default_scorer",
    "evaluate_value",
    "evaluate_value_async",
]

#: The cache's width when no embedder is set (MiniLM's).
DEFAULT_DIMENSIONS = 384
P = TypeVar("P")
EmbedderSetting = Literal["auto"] | None
Remember = Literal["all", "accepted", "none"]
#: Run facets of stored traces a Scorer keeps at hand (a knowledge base answers the rest).
_RUN_FACETS_KEPT = 10_000


def novelty_text(trace: ReasoningTrace, novelty: NoveltyBy = "task") -> str:
    """The text a trace's novelty vector is made from: its task text (``task``) or, for the
    seed's novelty (``seed``), the objective and every step's content (SPEC §2)."""
    return task_text(trace).text if novelty == "task" else trace.embedding_text


class Scorer:
    """Scores traces against its own novelty memory.

    Args:
        embedder: ``"auto"`` (the default) uses MiniLM when the ``embed`` extra and the model
            are installed and falls back to novelty 0.5 otherwise (saying so once); ``None``
            never embeds; any :class:`~knowledgepulse.embedding.Embedder` can be passed, and is
            checked here, once. ``KNOWLEDGEPULSE_EMBEDDER=none`` turns ``"auto"`` into ``None``.
        cache: the novelty memory (default: a 1,000-vector :class:`VectorCache` sized to the
            embedder's dimensions). ``memory`` is the same argument under its newer name; a
            knowledge base (:mod:`knowledgepulse.kb`) makes novelty persistent and shared.
        remember: which scored traces the memory keeps: ``all`` (the seeds' rule), ``accepted``
            (those whose value reaches ``threshold``) or ``none``. A knowledge base stores each
            kept trace with its score record; a trace it already holds is not scored again:
            its stored score is returned (``stored == "already_stored"``).
        threshold: the gate for ``remember="accepted"``.
        profiles: domain weights; default: a copy of the built-in and registered profiles,
            taken now.
        batch_size: traces embedded per batch by :meth:`score_many` and :meth:`iter_scores`.
        novelty: ``task`` (the default) measures novelty by the task: the task text's vector,
            the values the run's tools were given, copies (:mod:`knowledgepulse.tasks`);
            ``seed`` is the seed's single vector of the objective and every step, N = 1 − cos.
            The memory holds one kind of vector: a knowledge base records which.
    """

    def __init__(
        self,
        embedder: Embedder | EmbedderSetting = "auto",
        *,
        cache: NoveltyMemory | None = None,
        profiles: ProfileRegistry | Mapping[str, DomainProfile] | None = None,
        batch_size: int = 64,
        memory: NoveltyMemory | None = None,
        remember: Remember = "all",
        threshold: float | None = None,
        novelty: NoveltyBy = "task",
    ) -> None:
        if novelty not in ("task", "seed"):
            raise ValueError(f"novelty must be task or seed; got {novelty!r}")
        self.novelty: NoveltyBy = novelty
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        if remember not in ("all", "accepted", "none"):
            raise ValueError(f"remember must be all, accepted or none; got {remember!r}")
        if remember == "accepted" and threshold is None:
            raise ValueError("remember='accepted' needs a threshold")
        if cache is not None and memory is not None:
            raise ValueError("give the memory once: memory= (cache= is its older name)")
        cache = memory if memory is not None else cache
        self.remember: Remember = remember
        self.threshold = threshold
        # A memory that stores whole traces (a knowledge base) is recognised once, here.
        self._store: TraceStore | None = _trace_store(cache)
        check_vector_text(cache, novelty)
        self._embedder_setting = embedder
        self._embedder: Embedder | None = None
        self._embedder_resolved = embedder is None
        if embedder is not None and embedder != "auto":
            # An embedder object is checked against the protocol once, here.
            self._embedder = _resolve_embedder(embedder)
            self._embedder_resolved = True
        self._resolve_lock = threading.Lock()
        self._cache = cache
        if profiles is None:
            self.profiles = global_registry().copy()
        elif isinstance(profiles, ProfileRegistry):
            self.profiles = profiles
        else:
            self.profiles = ProfileRegistry(profiles)
        self.batch_size = batch_size
        self._where: Callable[[Any], str | None] | None = None
        # The copies remembered in this process, when the memory keeps none itself.
        self._copy_index = CopyIndex()
        # The run facets of traces this Scorer has seen or looked up in a knowledge base.
        self._run_facets: RunFacets | None = None

    # -- parts -------------------------------------------------------------------------------

    @property
    def embedder(self) -> Embedder | None:
        """The embedder in use (resolved on first access; None means novelty 0.5)."""
        if not self._embedder_resolved:
            with self._resolve_lock:
                if not self._embedder_resolved:
                    self._embedder = _resolve_embedder(self._embedder_setting)
                    self._embedder_resolved = True
        return self._embedder

    @property
    def cache(self) -> NoveltyMemory:
        """The novelty memory (a 1,000 × d VectorCache unless one was given)."""
        if self._cache is None:
            with self._resolve_lock:
                if self._cache is None:
                    from ..memory._cache import VectorCache

                    embedder = self.embedder
                    dims = embedder.dimensions if embedder is not None else DEFAULT_DIMENSIONS
                    self._cache = VectorCache(max_elements=1000, dimensions=dims)
        return self._cache

    def warm_up(self) -> None:
        """Load the embedder now instead of on the first trace (for services)."""
        embedder = self.embedder
        warm = getattr(embedder, "warm_up", None)  # optional in the protocol
        if warm is not None:
            warm()

    # -- scoring -----------------------------------------------------------------------------

    def score(self, trace: ReasoningTrace | Mapping[str, Any]) -> ValueScore:
        """Score one trace (and remember it for the novelty of later ones)."""
        return self.score_many([trace])[0]

    def score_many(self, traces: Iterable[ReasoningTrace | Mapping[str, Any]]) -> list[ValueScore]:
        """Score traces in order; equal to calling :meth:`score` on each in turn."""
        return list(self.iter_scores(traces))

    @overload
    def iter_scores(
        self, traces: Iterable[ReasoningTrace | Mapping[str, Any]], *, payload: Literal[False] = ...
    ) -> Iterator[ValueScore]: ...

    @overload
    def iter_scores(
        self,
        traces: Iterable[tuple[P, ReasoningTrace]],
        *,
        payload: Literal[True],
        where: Callable[[P], str | None] | None = None,
    ) -> Iterator[tuple[P, ReasoningTrace, ValueScore]]: ...

    def iter_scores(
        self,
        traces: Iterable[Any],
        *,
        payload: bool = False,
        where: Callable[[Any], str | None] | None = None,
    ) -> Iterator[Any]:
        """Stream scores in input order, embedding ``batch_size`` traces at a time.

        Args:
            traces: traces (models or mappings); with ``payload=True``, ``(payload, trace)``
                pairs, where the payload is anything the caller wants back with the score
                (where the trace came from, say).
            payload: yield ``(payload, trace, score)`` instead of just the score.
            where: with ``payload=True``, says from a payload where its trace came from; a
                knowledge base stores it with the trace.
        """
        self._where = where
        batch: list[ReasoningTrace] = []
        payloads: list[Any] = []
        for item in traces:
            if payload:
                carried, item = item
                payloads.append(carried)
            batch.append(parse_trace(item))
            if len(batch) >= self.batch_size:
                yield from self._emit(batch, payloads, payload)
                batch, payloads = [], []
        if batch:
            yield from self._emit(batch, payloads, payload)

    def _emit(
        self, batch: list[ReasoningTrace], payloads: list[Any], with_payload: bool
    ) -> Iterator[Any]:
        sources = None
        if with_payload and self._where is not None:
            sources = [self._where(carried) for carried in payloads]
        scores = self._score_batch(batch, sources)
        if with_payload:
            yield from zip(payloads, batch, scores)
        else:
            yield from scores

    async def score_async(self, trace: ReasoningTrace | Mapping[str, Any]) -> ValueScore:
        """:meth:`score` in a worker thread, so the event loop keeps running."""
        import asyncio  # here, not at the top: importing it would slow `import knowledgepulse`

        return await asyncio.to_thread(self.score, trace)

    def _score_batch(
        self, traces: Sequence[ReasoningTrace], sources: Sequence[str | None] | None = None
    ) -> list[ValueScore]:
        embedder = self.embedder
        if embedder is None:
            return [self._compose(trace, None, embedded=False) for trace in traces]
        scores: list[ValueScore | None] = [None] * len(traces)
        store = self._store
        if store is not None:
            # A trace the base already holds is answered from it, not embedded again.
            stored = store.stored_records([trace.id for trace in traces])
            for i, trace in enumerate(traces):
                record = stored.get(trace.id)
                if record is not None:
                    scores[i] = replace(ValueScore.from_record(record), stored="already_stored")
        todo = [i for i, score in enumerate(scores) if score is None]
        if not todo:
            return [score for score in scores if score is not None]
        batch = [traces[i] for i in todo]
        vectors = embedder.embed([novelty_text(trace, self.novelty) for trace in batch])
        _check_vectors(vectors, len(batch), self.cache.dimensions, embedder)
        ids = [trace.id for trace in batch]
        facets = copy_facets(batch)
        # Copies of what the memory stored before this batch (a knowledge base answers from
        # its tables), then of the traces of this batch remembered before each one.
        stored_copy = getattr(self.cache, "stored_copy", None)
        copied: list[CopyMatch | None] = [None] * len(batch)
        # A memory that keeps copy facets (VectorCache) shares them with every Scorer using it.
        shared = getattr(self.cache, "copy_index", None)
        seen = shared if isinstance(shared, CopyIndex) else self._copy_index
        if stored_copy is not None:
            copied = [stored_copy(facet, COPY_SIMILARITY) for facet in facets]
            seen = CopyIndex()

        def copy_of(k: int) -> CopyMatch | None:
            return copied[k] or seen.find(facets[k], COPY_SIMILARITY)

        runs = [run_facet(trace) for trace in batch]
        kept = self._facet_memory()

        with _single_threaded_blas():
            if store is None and self.remember == "all":
                found = self.cache.nearest_then_add_many(vectors, ids)
                for k, (i, trace, nearest) in enumerate(zip(todo, batch, found)):
                    scores[i] = self._compose(
                        trace, nearest, copy_of=copy_of(k), run=runs[k], kept=kept
                    )
                    seen.add(trace.id, facets[k])
                    kept.add(trace.id, runs[k])
            else:

                def admit(k: int, nearest: Nearest | None) -> object | None:
                    trace = batch[k]
                    score = self._compose(
                        trace, nearest, copy_of=copy_of(k), run=runs[k], kept=kept
                    )
                    keep = self.remember == "all" or (
                        self.remember == "accepted"
                        and self.threshold is not None
                        and score.value >= self.threshold
                    )
                    if store is not None:
                        score = replace(score, stored="added" if keep else "not_added")
                    scores[todo[k]] = score
                    if not keep:
                        return None
                    seen.add(trace.id, facets[k])
                    kept.add(trace.id, runs[k])
                    if store is None:
                        return True
                    where = sources[todo[k]] if sources is not None else None
                    return _stored_trace(trace, score, vectors[k], where, facets[k])

                if store is None:
                    self.cache.nearest_then_add_many(vectors, ids, admit)
                else:
                    answer = store.nearest_then_store_many(vectors, ids, admit)
                    _answer_lost(store, ids, todo, scores, answer.stored)
        return [score for score in scores if score is not None]

    def _facet_memory(self) -> RunFacets:
        """Where the run facets of remembered traces are kept: the memory's own (a VectorCache
        shares them with every Scorer using it), else this Scorer's."""
        from ..memory._cache import RunFacets

        shared = getattr(self.cache, "run_facets", None)
        if isinstance(shared, RunFacets):
            return shared
        if self._run_facets is None:
            self._run_facets = RunFacets(capacity=_RUN_FACETS_KEPT)
        return self._run_facets

    def _run_facet_of(self, trace_id: str | None, kept: RunFacets) -> RunFacet | None:
        """The run facet of a remembered trace: kept at hand, or read from the knowledge base
        that stores it (None for a vector stored without an id or a trace that is gone)."""
        facet = kept.get(trace_id)
        if facet is not None or trace_id is None:
            return facet  # type: ignore[no-any-return]
        stored = getattr(self.cache, "get", None)  # a knowledge base, or the service's view
        found = stored(trace_id) if stored is not None else None
        if found is None:
            return None
        facet = run_facet(parse_trace(found.trace))
        kept.add(trace_id, facet)
        return facet

    def _compose(
        self,
        trace: ReasoningTrace,
        nearest: Nearest | None,
        *,
        embedded: bool = True,
        copy_of: CopyMatch | None = None,
        run: RunFacet | None = None,
        kept: RunFacets | None = None,
    ) -> ValueScore:
        novelty: float = NOVELTY_FALLBACK
        source: NoveltySource = "empty_cache" if embedded else "no_embedder"
        relation: NearestRelation | None = None
        similarity: float | None = None
        if nearest is not None:
            source = "embedding"
            if self.novelty == "seed":
                novelty = 1.0 - nearest.similarity
            else:
                theirs = self._run_facet_of(nearest.id, kept) if kept is not None else None
                mine = run if run is not None else run_facet(trace)
                entities = (
                    None if theirs is None else entity_similarity(mine.entities, theirs.entities)
                )
                similarity = task_similarity(nearest.similarity, entities)
                novelty = novelty_of_similarity(similarity)
                relation = _relation(similarity, mine, theirs)
        if copy_of is not None and self.novelty == "task" and embedded:
            # A copy is not new, however its task text reads.
            novelty, source, relation = 0.0, "embedding", "copy"
        profile = self.profiles.for_domain(trace.metadata.task_domain)
        score = compose(TraceFacts.of(trace), novelty, source, profile, trace.id, nearest, copy_of)
        return replace(
            score,
            novelty_by=self.novelty if embedded else None,
            nearest_relation=relation,
            nearest_similarity=similarity,
        )


def check_vector_text(memory: Any, novelty: NoveltyBy) -> None:
    """Raise :class:`~knowledgepulse.kb.KnowledgeBaseMismatchError` unless ``memory`` (a
    knowledge base; anything else passes) holds vectors of the text ``novelty`` compares.

    A knowledge base holds vectors of one text: task texts for the task novelty, whole
    traces for the seed's. Comparing one with the other would be silently wrong."""
    identity = getattr(memory, "identity", None)
    text = getattr(identity, "text", None)
    if text is None:
        return
    from ..kb._base import VECTOR_TEXT_TRACE, VECTOR_TEXT_WORDS, vector_text_of

    wanted = vector_text_of(novelty)
    if text != wanted:
        from ..kb import KnowledgeBaseMismatchError

        have = VECTOR_TEXT_WORDS.get(text, VECTOR_TEXT_WORDS[VECTOR_TEXT_TRACE])
        raise KnowledgeBaseMismatchError(
            f"{getattr(memory, 'location', 'the knowledge base')}: its vectors are of {have}; "
            f"the {novelty} novelty compares vectors of {VECTOR_TEXT_WORDS[wanted]} (open it "
            f"with EmbeddingIdentity.of(embedder, {novelty!r}) to migrate a base of whole traces)"
        )


def _relation(similarity: float, mine: RunFacet, theirs: RunFacet | None) -> NearestRelation:
    """What the nearest trace is to this one: an attempt at the same task done the same way
    (the same tools, as a multiset, by Jaccard 0.8 or more) or with other tools, or another
    task."""
    if similarity < SAME_TASK_SIMILARITY:
        return "other_task"
    if theirs is None:
        return "same_task"
    a, b = Counter(mine.tools), Counter(theirs.tools)
    union = sum((a | b).values())
    same_way = union == 0 or sum((a & b).values()) / union >= 0.8
    return "same_task_same_way" if same_way else "same_task_other_tools"


@runtime_checkable
class TraceStore(Protocol):
    """A novelty memory that stores whole traces with their scores (a knowledge base)."""

    dimensions: int

    def nearest_then_add_many(
        self, vectors: Any, ids: Sequence[str | None], admit: Any = None
    ) -> list[Nearest | None]: ...

    def nearest_then_store_many(
        self, vectors: Any, ids: Sequence[str | None], admit: Any = None
    ) -> StoredBatch: ...

    def stored_records(self, ids: Iterable[str]) -> dict[str, ScoreRecord | None]: ...


def _answer_lost(
    store: TraceStore, ids: Sequence[str], todo: Sequence[int], scores: list[Any], stored: Set[int]
) -> None:
    """Admitted rows the base did not store (its answer, ``stored``: another writer, or an
    earlier row, took the id first) are answered from the stored record, as a trace held
    before the batch is; ``not_added`` when the base gives none."""
    lost = [k for k, i in enumerate(todo) if k not in stored and scores[i].stored == "added"]
    held = store.stored_records([ids[k] for k in lost]) if lost else {}
    for k in lost:
        record = held.get(ids[k])
        scores[todo[k]] = (
            replace(scores[todo[k]], stored="not_added")
            if record is None
            else replace(ValueScore.from_record(record), stored="already_stored")
        )


def _trace_store(memory: Any) -> TraceStore | None:
    return memory if memory is not None and isinstance(memory, TraceStore) else None


def _stored_trace(
    trace: ReasoningTrace,
    score: ValueScore,
    vector: Any,
    where: str | None,
    facet: CopyFacet | None = None,
) -> object:
    from ..kb import StoredTrace

    return StoredTrace(
        id=trace.id,
        trace=trace.to_dict(),
        vector=vector,
        record=ScoreRecord.of(score, trace),  # the base serialises it as it stores it
        source=where,
        visibility=trace.metadata.visibility,
        copy_facet=facet,
    )


class EmbedderOutputError(KnowledgePulseError, ValueError):
    """An embedder returned vectors of the wrong number or shape."""


def _check_vectors(vectors: Any, count: int, dimensions: int, embedder: Embedder) -> None:
    shape = getattr(vectors, "shape", None)
    if shape is None or len(shape) != 2 or shape[0] != count or shape[1] != dimensions:
        got = "x".join(str(n) for n in shape) if shape is not None else type(vectors).__name__
        raise EmbedderOutputError(
            f"embedder {getattr(embedder, 'name', type(embedder).__name__)!r} returned an "
            f"array of shape {got} for {count} texts; expected {count}x{dimensions}"
        )


_blas_controller: Any = None
_blas_lock = threading.Lock()


def _single_threaded_blas() -> AbstractContextManager[Any]:
    """Run the cache's small matmuls on one BLAS thread.

    OpenBLAS worker threads spin-wait after each call and take the cores the embedder's own
    threads need next, which slows bulk scoring; a 64×1000 product is as quick on one thread.
    """
    global _blas_controller
    if _blas_controller is None:
        with _blas_lock:
            if _blas_controller is None:
                try:
                    from threadpoolctl import ThreadpoolController
                except ImportError:
                    _blas_controller = False
                else:
                    _blas_controller = ThreadpoolController()
    if _blas_controller is False:
        return nullcontext()
    return _blas_controller.limit(limits=1, user_api="blas")  # type: ignore[no-any-return]


def _resolve_embedder(setting: Any) -> Embedder | None:
    """``None``, ``"auto"`` (the ONNX embedder, loaded now, or None when not installed) or an
    object checked once to be an embedder."""
    if setting is None:
        return None
    from ..embedding import check_embedder, select_embedder

    if not (isinstance(setting, str) and setting == "auto"):
        try:
            return check_embedder(setting)
        except TypeError as exc:
            raise TypeError(
                f"embedder must be 'auto', None or an object with embed(texts): {exc}"
            ) from None
    embedder = select_embedder("auto", bulk=False)
    warm_up = getattr(embedder, "warm_up", None)
    if callable(warm_up):
        warm_up()
    return embedder


_default_scorer: Scorer | None = None
_default_lock = threading.Lock()


def default_scorer() -> Scorer:
    """The process-wide scorer behind :func:`evaluate_value` (one shared novelty cache)."""
    global _default_scorer
    if _default_scorer is None:
        with _default_lock:
            if _default_scorer is None:
                _default_scorer = Scorer()
    return _default_scorer


def reset_default_scorer() -> None:
    """Forget the process-wide scorer and its cache (the next call builds a new one)."""
    global _default_scorer
    with _default_lock:
        _default_scorer = None


def evaluate_value(trace: ReasoningTrace | Mapping[str, Any]) -> float:
    """The value of ``trace`` in [0, 1], against the process-wide novelty cache."""
    return default_scorer().score(trace).value


async def evaluate_value_async(trace: ReasoningTrace | Mapping[str, Any]) -> float:
    """:func:`evaluate_value` without blocking the event loop."""
    import asyncio

    return await asyncio.to_thread(evaluate_value, trace)
