"""Novelty memory: the protocol a scorer remembers traces through, and the in-process VectorCache.

A :class:`NoveltyMemory` answers, for each new vector in order, which remembered trace is the
most similar (:class:`Nearest`, or None when the memory was empty) and then remembers it. The
:class:`VectorCache` is the seeds' design for one agent session: at most 1,000 vectors, oldest
evicted first, optional time-to-live. A persistent knowledge base implements the same protocol.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from ..copies import CopyIndex

__all__ = ["Admit", "Nearest", "NoveltyMemory", "RunFacets", "VectorCache", "exact_rows"]

FloatArray = npt.NDArray[np.float32]
ExactArray = npt.NDArray[np.float64]

# Unit vectors are kept on a grid of 2**-26 (float64). Why: a float32 matrix product rounds
# differently with its shape (a lone query is a matrix-vector product, a batch a matrix
# product; BLAS kernels, threads and CPUs differ), so the nearest similarity of a trace moved
# with --batch-size. On the grid, every product of two components is a multiple of 2**-52 and
# every partial sum of a dot product of unit vectors stays within [-2, 2], so float64 holds each
# sum exactly: the similarity is the same bits in any order, on any BLAS, on any CPU. Components
# of magnitude >= 1/8 are already on the grid; smaller ones move by at most 7.5e-9.
_GRID = float(2**26)


def exact_rows(rows: npt.ArrayLike) -> ExactArray:
    """Unit rows (float32 or float64) on the exact-similarity grid, as float64: dot products of
    such rows are exact, whatever computes them."""
    values = np.asarray(rows, dtype=np.float64)
    gridded: ExactArray = np.round(values * _GRID) / _GRID
    return gridded


@dataclass(frozen=True, slots=True)
class Nearest:
    """The most similar trace in memory: its id (None if it was added without one) and the
    cosine similarity."""

    id: str | None
    similarity: float

    def __post_init__(self) -> None:
        # float32 dot products of unit vectors reach 1.0000001: a cosine is at most 1.
        if isinstance(self.similarity, float) and not -1.0 <= self.similarity <= 1.0:
            object.__setattr__(self, "similarity", _cosine(self.similarity))


#: Decides, row by row and inside the memory's lock, whether a row is remembered: called with
#: the row's position and its nearest entry, it returns what to store with the row (anything
#: but None; a knowledge base stores the trace and its score record), or None to leave it out.
Admit = Callable[[int, "Nearest | None"], object | None]


@runtime_checkable
class NoveltyMemory(Protocol):
    """What a scorer needs from a novelty memory (in-process cache, or a shared store)."""

    @property
    def dimensions(self) -> int:
        """The vectors' length (an attribute or a read-only property)."""

    def nearest_then_add_many(
        self, vectors: FloatArray, ids: Sequence[str | None], admit: Admit | None = None
    ) -> list[Nearest | None]:
        """For each row in order: the most similar entry of the memory as it stood just before
        that row (None when it was empty), then add the row under ``ids[i]`` — every row, or,
        with ``admit``, the rows it returns something for. Atomic: no other writer's rows
        arrive between a row's query and its addition."""
        ...

    def clear(self) -> None:
        """Forget everything."""
        ...


class RunFacets:
    """Run facets by trace id, the oldest forgotten first beyond ``capacity``."""

    def __init__(self, capacity: int | None = None) -> None:
        self.capacity = capacity
        self._facets: OrderedDict[str, Any] = OrderedDict()

    def __len__(self) -> int:
        return len(self._facets)

    def add(self, trace_id: str | None, facet: Any) -> None:
        if trace_id is None:
            return
        self._facets[trace_id] = facet
        self._facets.move_to_end(trace_id)
        if self.capacity is not None:
            while len(self._facets) > self.capacity:
                self._facets.popitem(last=False)

    def get(self, trace_id: str | None) -> Any:
        return None if trace_id is None else self._facets.get(trace_id)

    def clear(self) -> None:
        self._facets.clear()


class VectorCache:
    """Brute-force cosine similarity over at most ``max_elements`` vectors, oldest evicted first.

    Vectors are stored L2-normalised in a ring buffer, on the exact-similarity grid
    (:func:`exact_rows`), so a query is one matrix-vector product whose result does not depend
    on how queries are batched. ``ttl_seconds`` makes entries expire; ``clock`` (seconds, monotonic) is injectable
    so expiry can be tested without sleeping. All methods are thread-safe.
    """

    def __init__(
        self,
        max_elements: int = 1000,
        dimensions: int = 384,
        ttl_seconds: float | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if isinstance(max_elements, bool) or not isinstance(max_elements, int) or max_elements < 1:
            raise ValueError(f"max_elements must be a positive integer, got {max_elements!r}")
        if isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions < 1:
            raise ValueError(f"dimensions must be a positive integer, got {dimensions!r}")
        if ttl_seconds is not None and not ttl_seconds > 0:
            raise ValueError(f"ttl_seconds must be positive or None, got {ttl_seconds!r}")
        self.max_elements = max_elements
        self.dimensions = dimensions
        self.ttl_seconds = ttl_seconds
        self._clock = clock
        self._lock = threading.RLock()
        self._vectors = np.zeros((max_elements, dimensions), dtype=np.float64)
        self._added_at = np.zeros(max_elements, dtype=np.float64)
        self._ids: list[str | None] = [None] * max_elements  # parallel to the ring buffer
        self._start = 0  # ring-buffer index of the oldest entry
        self._count = 0
        #: The copy facets of the traces scored against this memory, as many as it holds
        #: vectors: a Scorer names a copy among them (every Scorer sharing this memory alike).
        self.copy_index = CopyIndex(capacity=max_elements)
        #: How each trace it holds did its task (:class:`~knowledgepulse.tasks.RunFacet`), as
        #: many as it holds vectors: the task novelty compares a trace with its nearest by them.
        self.run_facets = RunFacets(capacity=max_elements)

    # -- the SPEC's operations -------------------------------------------------------------

    def add(self, vector: Sequence[float] | npt.ArrayLike, id: str | None = None) -> None:
        """Add one vector, under ``id`` if given (evicting the oldest when full)."""
        row = self._as_row(vector)
        with self._lock:
            self._evict_expired(self._clock())
            self._append(row[None, :], self._clock(), [id])

    def max_cosine_similarity(self, query: Sequence[float] | npt.ArrayLike) -> float:
        """Highest cosine similarity between ``query`` and any live entry; 0.0 when empty."""
        row = self._as_row(query)
        with self._lock:
            self._evict_expired(self._clock())
            if self._count == 0 or not row.any():
                return 0.0
            return _cosine(float((self._live() @ row).max()))

    def max_cosine_similarities(self, queries: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """:meth:`max_cosine_similarity` for each row of ``queries`` (one matrix product)."""
        batch = self._as_matrix(queries)
        with self._lock:
            self._evict_expired(self._clock())
            if self._count == 0 or batch.shape[0] == 0:
                return np.zeros(batch.shape[0], dtype=np.float64)
            best: ExactArray = (batch @ self._live().T).max(axis=1)
        # a zero query is similar to nothing
        result: ExactArray = np.where(batch.any(axis=1), best, 0.0)
        return np.clip(result, -1.0, 1.0)

    def clear(self) -> None:
        with self._lock:
            self.copy_index.clear()
            self.run_facets.clear()
            self._start = 0
            self._count = 0

    def evict_expired(self) -> int:
        """Drop entries older than the TTL now; returns how many were dropped."""
        with self._lock:
            return self._evict_expired(self._clock())

    @property
    def size(self) -> int:
        """Number of live (not expired) vectors."""
        with self._lock:
            self._evict_expired(self._clock())
            return self._count

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return (
            f"VectorCache(size={self._count}, max_elements={self.max_elements}, "
            f"dimensions={self.dimensions}, ttl_seconds={self.ttl_seconds})"
        )

    # -- batch path --------------------------------------------------------------------------

    def query_then_add_many(self, vectors: npt.ArrayLike) -> list[float | None]:
        """:meth:`nearest_then_add_many` without ids: the similarities only."""
        batch = self._as_matrix(vectors)
        found = self.nearest_then_add_many(batch, [None] * batch.shape[0])
        return [None if match is None else match.similarity for match in found]

    def nearest_then_add_many(
        self, vectors: npt.ArrayLike, ids: Sequence[str | None], admit: Admit | None = None
    ) -> list[Nearest | None]:
        """Score a batch as if each row were queried and then added one at a time.

        Row i sees the cache as it stood just before it: the live entries not yet pushed out by
        rows 0..i-1 (capacity), plus those earlier rows themselves (at most ``max_elements``).
        Computed with two matrix products instead of a Python loop. Returns None for a row that
        met an empty cache; on equal similarity the older entry is the nearest. The whole batch
        shares one timestamp.
        """
        batch = self._as_matrix(vectors)
        n = batch.shape[0]
        if len(ids) != n:
            raise ValueError(f"got {len(ids)} ids for {n} vectors")
        if n == 0:
            return []
        if admit is not None:
            return self._nearest_then_admit(batch, ids, admit)
        capacity = self.max_elements
        with self._lock:
            now = self._clock()
            self._evict_expired(now)
            m = self._count
            positions = np.arange(n)
            best = np.full(n, -np.inf, dtype=np.float64)
            best_old = np.zeros(n, dtype=np.int64)
            if m:
                # Entry k (0 = oldest) is still present for row i while k >= m + i - capacity.
                sims_old = batch @ self._live().T  # (n, m), exact
                first_kept = np.maximum(0, m + positions - capacity)  # (n,)
                masked = np.where(np.arange(m)[None, :] >= first_kept[:, None], sims_old, -np.inf)
                best_old = np.argmax(masked, axis=1)
                best = masked[positions, best_old]
            from_batch = np.full(n, -1, dtype=np.int64)
            if n > 1:
                # Row j is visible to row i when j < i and it is among the last `capacity` added.
                sims_new = batch @ batch.T
                offset = positions[:, None] - positions[None, :]
                masked = np.where((offset >= 1) & (offset <= capacity), sims_new, -np.inf)
                best_new = np.argmax(masked, axis=1)
                value_new = masked[positions, best_new]
                newer_wins = value_new > best
                from_batch = np.where(newer_wins, best_new, -1)
                best = np.where(newer_wins, value_new, best)
            live_ids = self._live_ids()
            self._append(batch, now, ids)
        found: list[Nearest | None] = []
        for i in range(n):
            if best[i] == -np.inf:
                found.append(None)
            elif from_batch[i] >= 0:
                found.append(Nearest(ids[int(from_batch[i])], float(best[i])))
            else:
                found.append(Nearest(live_ids[int(best_old[i])], float(best[i])))
        return found

    def _nearest_then_admit(
        self, batch: ExactArray, ids: Sequence[str | None], admit: Admit
    ) -> list[Nearest | None]:
        """The batch path when each row's addition is decided by ``admit``: the similarities
        are two matrix products, the visibility is walked row by row."""
        n = batch.shape[0]
        capacity = self.max_elements
        with self._lock:
            now = self._clock()
            self._evict_expired(now)
            m = self._count
            live_ids = self._live_ids()
            sims_old = batch @ self._live().T if m else None
            sims_new = batch @ batch.T
            admitted: list[int] = []
            found: list[Nearest | None] = []
            for i in range(n):
                best, best_id = -np.inf, None
                # Old entries still present: the oldest ones are pushed out by the rows
                # admitted so far once the cache is full.
                first_kept = max(0, m + len(admitted) - capacity)
                if sims_old is not None and first_kept < m:
                    k = first_kept + int(np.argmax(sims_old[i, first_kept:]))
                    best, best_id = sims_old[i, k], live_ids[k]
                for j in admitted[-capacity:]:
                    if sims_new[i, j] > best:
                        best, best_id = sims_new[i, j], ids[j]
                nearest = None if best == -np.inf else Nearest(best_id, float(best))
                found.append(nearest)
                if admit(i, nearest) is not None:
                    admitted.append(i)
            if admitted:
                self._append(batch[admitted], now, [ids[i] for i in admitted])
        return found

    # -- internals ---------------------------------------------------------------------------

    def _checked_row(self, vector: Sequence[float] | npt.ArrayLike) -> FloatArray:
        row: FloatArray = np.asarray(vector, dtype=np.float32).reshape(-1)
        if row.shape[0] != self.dimensions:
            raise ValueError(f"Expected {self.dimensions} dimensions, got {row.shape[0]}")
        return row

    def _as_row(self, vector: Sequence[float] | npt.ArrayLike) -> ExactArray:
        row: ExactArray = exact_rows(_normalise(self._checked_row(vector)[None, :]))[0]
        return row

    def _as_matrix(self, vectors: npt.ArrayLike) -> ExactArray:
        return exact_rows(_normalise(self._checked_matrix(vectors)))

    def _checked_matrix(self, vectors: npt.ArrayLike) -> FloatArray:
        batch: FloatArray = np.asarray(vectors, dtype=np.float32)
        if batch.ndim == 1:
            batch = batch[None, :]
        if batch.ndim != 2 or (batch.shape[0] and batch.shape[1] != self.dimensions):
            got = batch.shape[-1] if batch.ndim else 0
            raise ValueError(f"Expected {self.dimensions} dimensions, got {got}")
        return batch

    def _live(self) -> ExactArray:
        """Live entries, oldest first."""
        end = self._start + self._count
        if end <= self.max_elements:
            return self._vectors[self._start : end]
        return np.concatenate(
            (self._vectors[self._start :], self._vectors[: end - self.max_elements])
        )

    def _live_ids(self) -> list[str | None]:
        """Ids of the live entries, oldest first."""
        end = self._start + self._count
        if end <= self.max_elements:
            return self._ids[self._start : end]
        return self._ids[self._start :] + self._ids[: end - self.max_elements]

    def _append(
        self, rows: ExactArray, now: float, ids: Sequence[str | None] | None = None
    ) -> None:
        capacity = self.max_elements
        labels = list(ids) if ids is not None else [None] * rows.shape[0]
        if rows.shape[0] > capacity:
            rows = rows[-capacity:]
            labels = labels[-capacity:]
        n = rows.shape[0]
        write_at = (self._start + self._count) % capacity
        first = min(n, capacity - write_at)
        self._vectors[write_at : write_at + first] = rows[:first]
        self._vectors[: n - first] = rows[first:]
        self._ids[write_at : write_at + first] = labels[:first]
        self._ids[: n - first] = labels[first:]
        self._added_at[write_at : write_at + first] = now
        self._added_at[: n - first] = now
        overflow = max(0, self._count + n - capacity)
        self._start = (self._start + overflow) % capacity
        self._count = min(capacity, self._count + n)

    def _evict_expired(self, now: float) -> int:
        if self.ttl_seconds is None or self._count == 0:
            return 0
        # Entries are in insertion order, so the expired ones are a prefix from the oldest.
        dropped = 0
        while dropped < self._count:
            index = (self._start + dropped) % self.max_elements
            if now - self._added_at[index] < self.ttl_seconds:
                break
            dropped += 1
        self._start = (self._start + dropped) % self.max_elements
        self._count -= dropped
        return dropped


def _cosine(value: float) -> float:
    """``value`` within [-1, 1], where rounding may have taken a cosine just past."""
    return min(1.0, max(-1.0, float(value)))


def _normalise(rows: FloatArray) -> FloatArray:
    # A zero vector stays zero, so its similarity with anything is 0 (SPEC §2).
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(norms > 0, rows / np.where(norms > 0, norms, 1.0), 0.0)
    result: FloatArray = np.ascontiguousarray(out, dtype=np.float32)
    return result
