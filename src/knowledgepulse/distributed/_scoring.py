"""Scoring on Ray: embedding on an actor pool, novelty exact, scores in input order.

With the in-memory window, trace *i* is compared with the up-to-``window`` traces before it.
The stream is cut into chunks (a whole number of embedding batches, so every embedding call
holds the same texts as in a local run); each chunk is scored by its own task, which rebuilds
the window as it stood before the chunk from the vectors of the chunks before it and then
scores the chunk exactly as a local :class:`~knowledgepulse.Scorer` does. Chunks are scored in
parallel; their results are yielded in input order.

With a knowledge base the memory is shared state: chunks are embedded in parallel, and the
driver queries and adds them in input order through the base's atomic
``nearest_then_add_many`` (a local scorer over precomputed vectors).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from .._schema import parse_trace
from ..copies import copy_facets
from ..scoring._profiles import ProfileRegistry, global_registry
from ..scoring._scorer import novelty_text
from ..tasks import run_facet
from ._cluster import cluster_cpus, import_ray
from ._workers import EmbedderFactory, EmbedPool, PrecomputedEmbedder

__all__ = ["RayScorer"]

#: Traces per scoring task (rounded up to whole embedding batches; at least the window).
DEFAULT_CHUNK = 1024


class RayScorer:
    """A :class:`~knowledgepulse.Scorer` whose embedding and novelty run on Ray.

    Gives the same scores as a local scorer with the same settings (vectors, nearest ids and
    novelty), in input order.

    Args:
        embedder_factory: builds the embedder in each worker (:func:`minilm_factory`, or any
            picklable callable); None: no embedding, novelty 0.5 (nothing to distribute).
        workers: embedding actors (default: the cluster's CPUs / ``cpus_per_worker``).
        cpus_per_worker: CPUs each actor reserves (and inference threads it uses).
        profiles: domain weights (default: the registered profiles, taken now).
        batch_size: texts per embedding call, as for the local scorer.
        memory: None (the in-memory window) or a knowledge base.
        remember: with a knowledge base, which traces it keeps (as for the local scorer).
        threshold: the gate for ``remember="accepted"``.
        window: the in-memory window's size (the local cache holds 1,000).
        chunk_size: traces per scoring task.
        name: the embedder's name (as a local run shows it).
    """

    def __init__(
        self,
        embedder_factory: EmbedderFactory | None,
        *,
        workers: int | None = None,
        cpus_per_worker: float = 1.0,
        profiles: ProfileRegistry | None = None,
        batch_size: int = 64,
        memory: Any = None,
        remember: str = "all",
        threshold: float | None = None,
        window: int = 1000,
        chunk_size: int = DEFAULT_CHUNK,
        name: str = "ray",
        novelty: str = "task",
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.embedder_factory = embedder_factory
        self.workers = workers
        self.cpus_per_worker = cpus_per_worker
        self.profiles = profiles if profiles is not None else global_registry().copy()
        self.batch_size = batch_size
        self.memory = memory
        self.remember = remember
        self.threshold = threshold
        self.window = window
        # Whole embedding batches: every embed call then holds the texts a local run gives it.
        batches = -(-max(chunk_size, 1) // batch_size)
        self.chunk_size = batches * batch_size
        self.name = name
        #: ``task`` or ``seed``, as :class:`~knowledgepulse.Scorer`'s ``novelty``.
        self.novelty = novelty
        self._pool: EmbedPool | None = None

    # -- the pool ------------------------------------------------------------------------------

    @property
    def pool(self) -> EmbedPool:
        """The embedding actors (started on first use; raises a worker's load error)."""
        if self._pool is None:
            if self.embedder_factory is None:
                raise ValueError("no embedder: there is no pool to start")
            workers = self.workers or max(1, int(cluster_cpus() // self.cpus_per_worker))
            self._pool = EmbedPool(self.embedder_factory, workers, self.cpus_per_worker)
        return self._pool

    def close(self) -> None:
        """Stop the embedding actors."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def __enter__(self) -> RayScorer:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- scoring -------------------------------------------------------------------------------

    def score_many(self, traces: Iterable[Any]) -> list[Any]:
        """Scores of ``traces`` (models or mappings), in order."""
        return [
            score for _, _, score in self.iter_scores(((None, t) for t in traces), payload=True)
        ]

    def iter_scores(
        self,
        traces: Iterable[Any],
        *,
        payload: bool = False,
        where: Callable[[Any], str | None] | None = None,
    ) -> Iterator[Any]:
        """Stream scores in input order, as :meth:`knowledgepulse.Scorer.iter_scores` does.

        Args:
            traces: traces, or with ``payload=True`` ``(payload, trace)`` pairs.
            payload: yield ``(payload, trace, score)`` instead of the score.
            where: with a knowledge base, says from a payload where its trace came from.
        """
        pairs = (item if payload else (None, item) for item in traces)
        parsed = ((carried, parse_trace(trace)) for carried, trace in pairs)
        if self.embedder_factory is None:
            stream = self._local(None, parsed, where)
        elif self.memory is not None:
            stream = self._through_memory(parsed, where)
        else:
            stream = self._windowed(parsed)
        for carried, trace, score in stream:
            yield (carried, trace, score) if payload else score

    def _local(self, embedder: Any, pairs: Iterable[Any], where: Any) -> Iterator[Any]:
        from ..scoring._scorer import Scorer

        scorer = Scorer(
            embedder=embedder,
            profiles=self.profiles,
            batch_size=self.batch_size,
            memory=self.memory,
            remember=self.remember if self.memory is not None else "all",  # type: ignore[arg-type]
            threshold=self.threshold,
            novelty=self.novelty,  # type: ignore[arg-type]
        )
        return scorer.iter_scores(pairs, payload=True, where=where)

    def _embedded_chunks(self, pairs: Iterable[Any]) -> Iterator[tuple[list[Any], Any]]:
        """Chunks of pairs with the ObjectRef of their vectors, a few chunks ahead."""
        pool = self.pool
        ahead: deque[tuple[list[Any], Any]] = deque()
        for chunk in _chunks(pairs, self.chunk_size):
            texts = [novelty_text(trace, self.novelty) for _, trace in chunk]  # type: ignore[arg-type]
            batches = [
                texts[i : i + self.batch_size] for i in range(0, len(texts), self.batch_size)
            ]
            ahead.append((chunk, pool.submit(batches)))
            if len(ahead) > 2 * len(pool.actors):
                yield ahead.popleft()
        yield from ahead

    def _through_memory(self, pairs: Iterable[Any], where: Any) -> Iterator[Any]:
        ray = import_ray()
        for chunk, vectors_ref in self._embedded_chunks(pairs):
            vectors = ray.get(vectors_ref)
            texts = [novelty_text(trace, self.novelty) for _, trace in chunk]  # type: ignore[arg-type]
            embedder = PrecomputedEmbedder(texts, vectors, self.name)
            yield from self._local(embedder, chunk, where)

    def _windowed(self, pairs: Iterable[Any]) -> Iterator[Any]:
        ray = import_ray()
        score_chunk = ray.remote(num_cpus=0, max_retries=4)(_score_chunk)
        # A registry holds a lock: its profiles travel, and the task builds its own registry.
        profiles_ref = ray.put({name: self.profiles[name] for name in self.profiles})
        # The vectors, copy facets and ids of the latest chunks: enough to cover the window.
        recent: deque[tuple[Any, list[str], int, Any]] = deque()
        pending: deque[tuple[list[Any], Any]] = deque()
        in_flight = 2 * len(self.pool.actors) + 2
        for chunk, vectors_ref in self._embedded_chunks(pairs):
            traces = [trace for _, trace in chunk]
            before_ids = [i for _, ids, _, _ in recent for i in ids][-self.window :]
            # The copies are named among the window's traces too, as the local run's memory
            # does: their facets travel with their vectors.
            future = score_chunk.remote(
                traces,
                profiles_ref,
                self.window,
                self.batch_size,
                self.name,
                self.novelty,
                before_ids,
                len(recent),
                vectors_ref,
                *[ref for ref, _, _, _ in recent],
                *[facets for _, _, _, facets in recent],
            )
            pending.append((chunk, future))
            # Both facets of a trace travel: the copy facet and how the run did its task.
            facets_ref = ray.put(list(zip(copy_facets(traces), map(run_facet, traces))))
            recent.append((vectors_ref, [trace.id for trace in traces], len(traces), facets_ref))
            while sum(n for _, _, n, _ in recent) - recent[0][2] >= self.window:
                recent.popleft()
            while len(pending) > in_flight:
                yield from _finished(ray, *pending.popleft())
        while pending:
            yield from _finished(ray, *pending.popleft())


def _finished(ray: Any, chunk: list[Any], future: Any) -> Iterator[Any]:
    for (carried, trace), score in zip(chunk, ray.get(future)):
        yield carried, trace, score


def _chunks(pairs: Iterable[Any], size: int) -> Iterator[list[Any]]:
    chunk: list[Any] = []
    for pair in pairs:
        chunk.append(pair)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _score_chunk(
    traces: Sequence[Any],
    profiles: dict[str, Any],
    window: int,
    batch_size: int,
    name: str,
    novelty: str,
    before_ids: list[str],
    chunks_before: int,
    vectors: np.ndarray,
    *before_and_facets: Any,
) -> list[Any]:
    """Score one chunk against the window as it stood before it (a Ray task): the vectors
    and then the copy facets of the ``chunks_before`` chunks before it."""
    from ..memory._cache import VectorCache
    from ..scoring._scorer import Scorer

    before = before_and_facets[:chunks_before]
    facets = [f for part in before_and_facets[chunks_before:] for f in part]
    cache = VectorCache(max_elements=window, dimensions=int(vectors.shape[1]))
    if before:
        previous = np.concatenate(before)[-len(before_ids) :] if before_ids else before[0][:0]
        for row, trace_id, (facet, run) in zip(
            previous, before_ids, facets[len(facets) - len(before_ids) :]
        ):
            cache.add(row, trace_id)
            cache.copy_index.add(trace_id, facet)
            cache.run_facets.add(trace_id, run)
    texts = [novelty_text(trace, novelty) for trace in traces]  # type: ignore[arg-type]
    scorer = Scorer(
        embedder=PrecomputedEmbedder(texts, vectors, name),
        memory=cache,
        profiles=ProfileRegistry(profiles),
        batch_size=batch_size,
        novelty=novelty,  # type: ignore[arg-type]
    )
    return scorer.score_many(traces)
