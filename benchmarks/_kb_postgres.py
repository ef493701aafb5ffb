"""The PostgreSQL knowledge base: query latency at 100,000 stored vectors, and concurrent writers.

Synthetic unit vectors (384 dimensions, MiniLM's; clustered, see
:func:`clustered_unit_vectors`) are bulk-loaded with ``COPY``; queries go
through the base's own ``search`` (the HNSW index under ``auto`` at that size; one exact scan
is timed beside it). The writers are processes (fork) each scoring near-duplicates of the same
shared vectors plus vectors of their own, through ``nearest_then_add_many`` with an admit rule
(store only what is not a near-duplicate): every own vector must be stored once, every shared
one exactly once.

Without a ``url``, a throwaway server is started with ``pgserver`` in a temporary folder.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import statistics
import tempfile
import time
import warnings
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from knowledgepulse.kb import EmbeddingIdentity, StoredTrace, open_knowledge_base
from knowledgepulse.kb._sql import SQLKnowledgeBase
from knowledgepulse.scoring._formulas import is_near_duplicate

DIMENSIONS = 384
IDENTITY = EmbeddingIdentity(model="synthetic", dimensions=DIMENSIONS, windowing="whole")


def unit_vectors(count: int, seed: int) -> npt.NDArray[np.float32]:
    rows = np.random.default_rng(seed).normal(size=(count, DIMENSIONS)).astype(np.float32)
    normalised: npt.NDArray[np.float32] = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return normalised


def clustered_unit_vectors(count: int, seed: int, clusters: int = 2000) -> npt.NDArray[np.float32]:
    """Vectors around ``clusters`` centres (cosine ≈ 0.85 to their centre), as sentence
    embeddings of traces on a few thousand topics are; uniform random vectors in 384
    dimensions are the worst case of an HNSW graph and unlike any embedder's output."""
    rng = np.random.default_rng(seed)
    centres = unit_vectors(clusters, seed + 1)
    rows = centres[rng.integers(0, clusters, count)] + 0.6 * unit_vectors(count, seed + 2)
    normalised: npt.NDArray[np.float32] = (
        rows / np.linalg.norm(rows, axis=1, keepdims=True)
    ).astype(np.float32)
    return normalised


@contextlib.contextmanager
def throwaway_server() -> Iterator[str]:
    """The superuser URL of a PostgreSQL server in a temporary folder, stopped afterwards."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pgserver.postgres_server import get_server
    with tempfile.TemporaryDirectory(prefix="kp-pg-") as folder:
        server = get_server(Path(folder) / "data", cleanup_mode="stop")
        try:
            yield server.get_uri()
        finally:
            server.cleanup()


def new_database(admin_url: str, name: str) -> str:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    head, _, tail = admin_url.partition("?")
    return head.rsplit("/", 1)[0] + f"/{name}" + (f"?{tail}" if tail else "")


def bulk_load(url: str, vectors: np.ndarray) -> float:
    """COPY the vectors into a new base as bare traces; the seconds it took."""
    from psycopg.types.json import Jsonb

    with open_knowledge_base(url, IDENTITY, index="exact") as kb:
        assert isinstance(kb, SQLKnowledgeBase)  # the connection is the backend's own
        conn: Any = kb._conn
        start = time.perf_counter()
        with (
            conn.cursor() as cursor,
            cursor.copy(
                "COPY traces (id, trace, embedding, added_at) FROM STDIN (FORMAT BINARY)"
            ) as copy,
        ):
            copy.set_types(["text", "jsonb", "vector", "timestamptz"])
            now = datetime(2026, 1, 1, tzinfo=timezone.utc)
            for i, row in enumerate(vectors):
                copy.write_row((f"v{i}", Jsonb({}), row, now))
        conn.execute("ANALYZE traces")
        return time.perf_counter() - start


def measure_queries(url: str, stored: int, queries: int = 200) -> dict[str, float]:
    """Load ``stored`` vectors, build the index, time single and batched queries."""
    figures: dict[str, float] = {"stored": stored}
    vectors = clustered_unit_vectors(stored, seed=0)
    figures["copy_s"] = bulk_load(url, vectors)
    # Queries near stored vectors (as a near-duplicate would be), and one of them exact.
    noise = unit_vectors(queries, seed=1) * 0.3
    probes = vectors[np.random.default_rng(2).choice(stored, queries, replace=False)] + noise
    probes /= np.linalg.norm(probes, axis=1, keepdims=True)
    start = time.perf_counter()
    with open_knowledge_base(url, IDENTITY, index="auto") as kb:
        figures["hnsw_build_s"] = time.perf_counter() - start
        assert kb.stats().index == "ann"
        kb.search(probes[0], 10)  # warm the caches
        times = []
        top = []
        for probe in probes:
            t = time.perf_counter()
            top.append(kb.search(probe, 10)[0].id)
            times.append(time.perf_counter() - t)
        figures["query_p50_ms"] = statistics.median(times) * 1e3
        figures["query_p95_ms"] = float(np.percentile(times, 95)) * 1e3
        batch = probes[:32]
        assert isinstance(kb, SQLKnowledgeBase)  # the batch search behind nearest_then_add_many
        t = time.perf_counter()
        kb._nearest(batch, 1)
        figures["batch32_ms"] = (time.perf_counter() - t) * 1e3
    with open_knowledge_base(url, IDENTITY, index="exact") as kb:
        exact_times, exact_top = [], []
        for probe in probes[:10]:
            t = time.perf_counter()
            exact_top.append(kb.search(probe, 1)[0].id)
            exact_times.append(time.perf_counter() - t)
        figures["exact_query_p50_ms"] = statistics.median(exact_times) * 1e3
    figures["ann_top1_recall"] = float(np.mean([a == b for a, b in zip(top, exact_top)]))
    return figures


def _writer(url: str, worker: int, shared: int, own: int, batch: int) -> list[str]:
    """Contribute a near-duplicate of every shared vector and ``own`` new ones."""
    base = unit_vectors(shared, seed=10)
    copies = base + unit_vectors(shared, seed=100 + worker) * 0.05  # cosine ≈ 0.999
    mine = unit_vectors(own, seed=1000 + worker)
    rows = np.concatenate([copies, mine])
    ids = [f"w{worker}-s{i}" for i in range(shared)] + [f"w{worker}-o{i}" for i in range(own)]
    order = np.random.default_rng(worker).permutation(len(ids))
    rows, ids = rows[order], [ids[i] for i in order]
    added: list[str] = []
    with open_knowledge_base(url, IDENTITY) as kb:
        for start in range(0, len(ids), batch):
            chunk_ids = ids[start : start + batch]
            chunk = rows[start : start + batch]

            def admit(i: int, nearest: Any, chunk: Any = chunk, chunk_ids: Any = chunk_ids) -> Any:
                if nearest is not None and is_near_duplicate(nearest.similarity):
                    return None
                added.append(chunk_ids[i])
                return StoredTrace(id=chunk_ids[i], trace={}, vector=chunk[i])

            kb.nearest_then_add_many(chunk, chunk_ids, admit)
    return added


def measure_writers(
    url: str, workers: int = 8, shared: int = 200, own: int = 300, batch: int = 16
) -> dict[str, float]:
    """``workers`` processes writing at once: adds/s, and lost and duplicated adds."""
    open_knowledge_base(url, IDENTITY).close()
    start = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        added = pool.starmap(_writer, [(url, w, shared, own, batch) for w in range(workers)])
    elapsed = time.perf_counter() - start
    reported = [trace_id for worker in added for trace_id in worker]
    with open_knowledge_base(url) as kb:
        stored = [trace.id for trace in kb.iter_stored()]
    shared_stored = [trace_id.split("-s")[1] for trace_id in stored if "-s" in trace_id]
    own_stored = {trace_id for trace_id in stored if "-o" in trace_id}
    return {
        "writers": workers,
        "scored": workers * (shared + own),
        "adds": len(stored),
        "adds_per_s": len(stored) / elapsed,
        "scored_per_s": workers * (shared + own) / elapsed,
        # Reported as added but not in the base, or own vectors missing.
        "lost": len(set(reported) - set(stored)) + workers * own - len(own_stored),
        # A shared vector stored more than once: two writers both accepted a near-duplicate.
        "duplicates": len(shared_stored) - len(set(shared_stored)),
        "shared_missing": shared - len(set(shared_stored)),
    }


def measure_kb_postgres(
    url: str | None = None, *, stored: int = 100_000, workers: int = 8
) -> dict[str, dict[str, float]]:
    """Both measurements on the server at ``url`` (a superuser URL: databases are created
    in it), or on a throwaway one. Bounded to well under two minutes at the defaults."""
    with contextlib.ExitStack() as stack:
        admin = url or stack.enter_context(throwaway_server())
        queries = measure_queries(new_database(admin, "kp_bench_queries"), stored)
        writers = measure_writers(new_database(admin, "kp_bench_writers"), workers)
        return {"queries": queries, "writers": writers}


if __name__ == "__main__":
    import json

    print(json.dumps(measure_kb_postgres(), indent=2))
