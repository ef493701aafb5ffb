from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import knowledgepulse as kp
from _helpers import HashingEmbedder, make_trace


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def unit(i: int, dims: int = 8) -> np.ndarray:
    v = np.zeros(dims, dtype=np.float32)
    v[i] = 1.0
    return v


def test_defaults() -> None:
    cache = kp.VectorCache()
    assert (cache.max_elements, cache.dimensions, cache.ttl_seconds) == (1000, 384, None)
    assert cache.size == 0 and len(cache) == 0


def test_empty_cache_returns_zero() -> None:
    assert kp.VectorCache(dimensions=3).max_cosine_similarity([1, 2, 3]) == 0.0


def test_dimension_check_message() -> None:
    cache = kp.VectorCache()
    with pytest.raises(ValueError, match=r"^Expected 384 dimensions, got 3$"):
        cache.add([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match=r"^Expected 384 dimensions, got 5$"):
        cache.max_cosine_similarity([0.0] * 5)
    with pytest.raises(ValueError, match=r"^Expected 4 dimensions, got 3$"):
        kp.VectorCache(dimensions=4).query_then_add_many(np.ones((2, 3)))


def test_cosine_similarity_values() -> None:
    cache = kp.VectorCache(dimensions=3)
    cache.add([3.0, 0.0, 0.0])  # not normalised on input
    assert cache.max_cosine_similarity([1.0, 0.0, 0.0]) == pytest.approx(1.0)
    assert cache.max_cosine_similarity([0.0, 2.0, 0.0]) == pytest.approx(0.0)
    assert cache.max_cosine_similarity([1.0, 1.0, 0.0]) == pytest.approx(2**-0.5)
    assert cache.max_cosine_similarity([-1.0, 0.0, 0.0]) == pytest.approx(-1.0)


def test_zero_vector_has_similarity_zero() -> None:
    cache = kp.VectorCache(dimensions=3)
    cache.add([1.0, 0.0, 0.0])
    assert cache.max_cosine_similarity([0.0, 0.0, 0.0]) == 0.0
    cache.clear()
    cache.add([0.0, 0.0, 0.0])
    assert cache.max_cosine_similarity([1.0, 0.0, 0.0]) == 0.0


def test_capacity_evicts_oldest_first() -> None:
    cache = kp.VectorCache(max_elements=3, dimensions=8)
    for i in range(3):
        cache.add(unit(i))
    assert cache.size == 3
    cache.add(unit(3))  # pushes out unit(0)
    assert cache.size == 3
    assert cache.max_cosine_similarity(unit(0)) == pytest.approx(0.0)
    for i in (1, 2, 3):
        assert cache.max_cosine_similarity(unit(i)) == pytest.approx(1.0)
    for i in range(4, 8):
        cache.add(unit(i))
    assert [cache.max_cosine_similarity(unit(i)) for i in range(8)] == pytest.approx(
        [0, 0, 0, 0, 0, 1, 1, 1]
    )


def test_ttl_expires_entries_without_sleeping() -> None:
    clock = FakeClock()
    cache = kp.VectorCache(max_elements=10, dimensions=8, ttl_seconds=60, clock=clock)
    cache.add(unit(0))
    clock.now += 30
    cache.add(unit(1))
    assert cache.size == 2
    clock.now += 31  # unit(0) is 61 s old, unit(1) 31 s
    assert cache.max_cosine_similarity(unit(0)) == pytest.approx(0.0)
    assert cache.max_cosine_similarity(unit(1)) == pytest.approx(1.0)
    assert cache.size == 1
    clock.now += 100
    assert cache.evict_expired() == 1
    assert len(cache) == 0


def test_evict_expired_counts() -> None:
    clock = FakeClock()
    cache = kp.VectorCache(max_elements=4, dimensions=8, ttl_seconds=5, clock=clock)
    for i in range(6):  # wraps the ring buffer
        cache.add(unit(i))
        clock.now += 1
    assert cache.size == 4
    clock.now += 2.5  # entries 2 and 3 are now >= 5 s old
    assert cache.evict_expired() == 2
    assert cache.size == 2
    assert cache.evict_expired() == 0


def test_clear() -> None:
    cache = kp.VectorCache(dimensions=8)
    cache.add(unit(1))
    cache.clear()
    assert cache.size == 0
    assert cache.max_cosine_similarity(unit(1)) == 0.0


def test_invalid_construction() -> None:
    with pytest.raises(ValueError, match="max_elements"):
        kp.VectorCache(max_elements=0)
    with pytest.raises(ValueError, match="dimensions"):
        kp.VectorCache(dimensions=0)
    with pytest.raises(ValueError, match="ttl_seconds"):
        kp.VectorCache(ttl_seconds=0)


def test_is_a_novelty_memory() -> None:
    assert isinstance(kp.VectorCache(), kp.NoveltyMemory)


def sequential_reference(
    initial: np.ndarray, batch: np.ndarray, capacity: int
) -> list[float | None]:
    cache = kp.VectorCache(max_elements=capacity, dimensions=batch.shape[1])
    for row in initial:
        cache.add(row)
    out: list[float | None] = []
    for row in batch:
        out.append(cache.max_cosine_similarity(row) if cache.size else None)
        cache.add(row)
    return out


@settings(max_examples=150, deadline=None)
@given(
    capacity=st.integers(1, 7),
    initial=st.integers(0, 10),
    batch=st.integers(0, 20),
    seed=st.integers(0, 2**16),
    duplicates=st.booleans(),
)
def test_batch_query_equals_sequential(
    capacity: int, initial: int, batch: int, seed: int, duplicates: bool
) -> None:
    rng = np.random.default_rng(seed)
    first = rng.normal(size=(initial, 6)).astype(np.float32)
    rows = rng.normal(size=(batch, 6)).astype(np.float32)
    if duplicates and batch > 2:
        rows[batch // 2] = rows[0]
        rows[-1] = rows[1]
    cache = kp.VectorCache(max_elements=capacity, dimensions=6)
    for row in first:
        cache.add(row)
    got = cache.query_then_add_many(rows)
    want = sequential_reference(first, rows, capacity)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if w is None:
            assert g is None
        else:
            assert g == pytest.approx(w, abs=1e-6)
    assert cache.size == min(capacity, initial + batch)
    # The cache ends holding the same vectors as the sequential run.
    probe = rng.normal(size=6).astype(np.float32)
    ref = kp.VectorCache(max_elements=capacity, dimensions=6)
    for row in np.concatenate([first, rows]):
        ref.add(row)
    assert cache.max_cosine_similarity(probe) == pytest.approx(
        ref.max_cosine_similarity(probe), abs=1e-6
    )


def test_batch_respects_ttl() -> None:
    clock = FakeClock()
    cache = kp.VectorCache(max_elements=10, dimensions=8, ttl_seconds=10, clock=clock)
    cache.add(unit(0))
    clock.now += 11
    assert cache.query_then_add_many(np.stack([unit(0), unit(0)])) == [None, pytest.approx(1.0)]


class RecordingCache(kp.VectorCache):
    """Records the rows in the order they really entered the cache."""

    def __init__(self) -> None:
        super().__init__(max_elements=50, dimensions=384)
        self.order: list[np.ndarray] = []

    def _append(  # runs under the cache lock
        self, rows: np.ndarray, now: float, ids: Sequence[str | None] | None = None
    ) -> None:
        self.order.extend(rows.copy())
        super()._append(rows, now, ids)


def test_scorer_from_8_threads_matches_a_sequential_order() -> None:
    words = ["ledger", "refund", "kubectl", "pytest", "invoice", "dosage", "schema", "latency"]
    traces = [
        make_trace(
            [{"type": "thought", "content": f"{words[i % 8]} {words[(i * 3) % 8]} run{i}"}],
            objective=f"{words[(i * 5) % 8]} task",
            trace_id=f"kp:trace:{i}",
        )
        for i in range(140)
    ]
    embedder = HashingEmbedder()
    # Keep traces whose hashed vectors are distinct, so a vector names its trace.
    vectors = embedder.embed([kp.ReasoningTrace.model_validate(t).embedding_text for t in traces])
    keep = [
        i
        for i in range(len(traces))
        if not any(np.array_equal(vectors[i], vectors[j]) for j in range(i))
    ]
    traces, vectors = [traces[i] for i in keep][:120], vectors[keep][:120]
    cache = RecordingCache()
    scorer = kp.Scorer(embedder=embedder, cache=cache, novelty="seed")
    results: dict[str, kp.ValueScore] = {}
    lock = threading.Lock()

    def work(chunk: list[dict[str, Any]]) -> None:
        for trace in chunk:
            value = scorer.score(trace)
            with lock:
                results[trace["id"]] = value

    threads = [threading.Thread(target=work, args=(traces[k::8],)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 120 and len(cache.order) == 120
    # Replay in the recorded insertion order: every novelty must match.
    replay = kp.VectorCache(max_elements=50, dimensions=384)
    for row in cache.order:
        trace_id = traces[int(np.argmax(vectors @ row))]["id"]  # texts are all distinct
        sim = replay.query_then_add_many(row[None, :])[0]
        expected = 0.5 if sim is None else min(1.0, max(0.0, 1.0 - sim))
        assert results[trace_id].novelty == pytest.approx(expected, abs=1e-6)


def test_max_cosine_similarities_batched_matches_single() -> None:
    rng = np.random.default_rng(3)
    cache = kp.VectorCache(max_elements=50, dimensions=16)
    assert cache.max_cosine_similarities(rng.normal(size=(3, 16))).tolist() == [0.0, 0.0, 0.0]
    for row in rng.normal(size=(60, 16)):
        cache.add(row)
    queries = rng.normal(size=(7, 16))
    queries[2] = 0.0
    got = cache.max_cosine_similarities(queries)
    assert got == pytest.approx([cache.max_cosine_similarity(q) for q in queries], abs=1e-6)
    assert got[2] == 0.0
    assert cache.size == 50  # read-only
