"""The vectors of a knowledge base in memory, searched exactly or through an ANN index.

Rows are appended in the base's insertion order and never change, so the in-memory copy is
loaded incrementally: only the rows added since the last look are read. Exact search is one
matrix product; past :data:`ANN_THRESHOLD` vectors an HNSW index (usearch) answers instead,
its candidates re-ranked exactly. The index is derived data: saved beside the base, checked
against the rows when loaded, extended with the rows it lacks and rebuilt when it is unusable.
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ..memory._cache import exact_rows

__all__ = ["ANN_THRESHOLD", "VectorIndex", "usearch_available"]

logger = logging.getLogger("knowledgepulse")

FloatArray = npt.NDArray[np.float32]
#: From this many vectors up, queries go through the ANN index (when usearch is installed).
ANN_THRESHOLD = 50_000
#: Candidates the ANN index returns per query before the exact re-ranking: the graph can
#: return near-equal neighbours out of order, and re-ranking a few dozen exactly costs far
#: less than a wider walk (docs/performance.md, "ANN index").
ANN_CANDIDATES = 64
#: Candidates the graph search explores per query: doubling it doubles a query's time, and on
#: clustered vectors and on trace vectors it found nothing more (the sweep is in
#: docs/performance.md).
EXPANSION_SEARCH = 128

#: How the graph is built: links per node, candidates explored per insertion, the scalar kind
#: stored. More links and a wider insertion walk make a graph whose greedy search finds the
#: nearest far more often at a million vectors (where 16 links lost half of them), for a
#: slower build. Full precision: real traces come in families of near-copies whose
#: similarities differ in the fourth decimal, which half precision cannot order, so the walk
#: lost the nearest among its copies (i8 is worse still); the re-ranking only repairs the order
#: of what the walk returns. Recorded beside a saved graph: a graph built with other settings
#: is rebuilt on load.
HNSW_SETTINGS: dict[str, Any] = {"connectivity": 32, "expansion_add": 128, "dtype": "f32"}


def _new_hnsw(dimensions: int) -> Any:
    from usearch.index import Index

    return Index(
        ndim=dimensions,
        metric="ip",
        expansion_search=EXPANSION_SEARCH,
        **HNSW_SETTINGS,
    )


def _settings_path(path: Path) -> Path:
    return path.with_name(path.name + ".json")


def _saved_settings(path: Path) -> dict[str, Any] | None:
    """The build settings recorded beside a saved graph (None: none readable)."""
    try:
        found = json.loads(_settings_path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


class VectorIndex:
    """Unit vectors with their ids, in insertion order; nearest-neighbour queries over them.

    Args:
        dimensions: the vectors' length.
        mode: ``"auto"`` (exact below ``ann_threshold`` vectors, ANN above), ``"exact"`` or
            ``"ann"``.
        ann_path: where the ANN index is saved and loaded (``None``: kept in memory only).
        ann_threshold: the size from which ``"auto"`` uses the ANN index.
    """

    def __init__(
        self,
        dimensions: int,
        *,
        mode: str = "auto",
        ann_path: Path | None = None,
        ann_threshold: int = ANN_THRESHOLD,
    ) -> None:
        if mode not in ("auto", "exact", "ann"):
            raise ValueError(f"index mode must be auto, exact or ann; got {mode!r}")
        self.dimensions = dimensions
        self.mode = mode
        self.ann_path = ann_path
        self.ann_threshold = ann_threshold
        self._matrix = np.zeros((0, dimensions), dtype=np.float32)
        self._size = 0
        self.ids: list[str] = []
        self._ann: Any = None
        self._ann_rows = 0  # rows of the matrix the ANN index holds
        self._lock = threading.RLock()

    @property
    def size(self) -> int:
        return self._size

    @property
    def kind(self) -> str:
        """``exact`` or ``ann``: what answers queries at the current size."""
        return "ann" if self._use_ann() else "exact"

    def vectors(self) -> FloatArray:
        """The stored vectors, in insertion order (a view: do not modify)."""
        return self._matrix[: self._size]

    def extend(self, ids: list[str], vectors: FloatArray) -> None:
        """Append rows (already unit length) in insertion order."""
        if not ids:
            return
        rows = np.asarray(vectors, dtype=np.float32).reshape(len(ids), self.dimensions)
        with self._lock:
            needed = self._size + len(ids)
            if needed > self._matrix.shape[0]:
                grown = np.zeros(
                    (max(needed, 2 * self._matrix.shape[0], 1024), self.dimensions), np.float32
                )
                grown[: self._size] = self._matrix[: self._size]
                self._matrix = grown
            self._matrix[self._size : needed] = rows
            self._size = needed
            self.ids.extend(ids)

    def nearest(self, queries: FloatArray, k: int = 1) -> list[list[tuple[int, float]]]:
        """For each query row, up to ``k`` (position, cosine) pairs, most similar first.

        On equal similarity the older row comes first.
        """
        queries = np.asarray(queries, dtype=np.float32).reshape(-1, self.dimensions)
        with self._lock:
            if self._size == 0:
                return [[] for _ in range(queries.shape[0])]
            if self._use_ann():
                return self._nearest_ann(queries, k)
            return self._nearest_exact(queries, k)

    # -- exact -------------------------------------------------------------------------------

    def _nearest_exact(self, queries: FloatArray, k: int) -> list[list[tuple[int, float]]]:
        sims = queries @ self._matrix[: self._size].T  # (q, n), float32: to find candidates
        return [self._exact_top(row, query, k) for row, query in zip(sims, queries)]

    def _exact_top(
        self, sims: npt.NDArray[np.float32], query: FloatArray, k: int
    ) -> list[tuple[int, float]]:
        """The top ``k`` of one query: the best float32 candidates re-scored exactly
        (``exact_rows``), so the similarity returned does not depend on the batch shape."""
        wanted = min(sims.shape[0], k + _RERANK)
        if wanted < sims.shape[0]:
            candidates = np.sort(np.argpartition(-sims, wanted - 1)[:wanted])
        else:
            candidates = np.arange(sims.shape[0])
        return _exact_order(self._matrix[candidates], candidates, query, k)

    # -- ANN ---------------------------------------------------------------------------------

    def _use_ann(self) -> bool:
        if self.mode == "exact":
            return False
        if self.mode == "auto" and self._size < self.ann_threshold:
            return False
        return usearch_available()

    def _nearest_ann(self, queries: FloatArray, k: int) -> list[list[tuple[int, float]]]:
        index = self._ann_index()
        wanted = min(self._size, max(k, ANN_CANDIDATES))
        matches = index.search(queries, wanted)
        keys = np.asarray(matches.keys).reshape(queries.shape[0], -1)
        results = []
        for row, candidates in enumerate(keys):
            candidates = candidates[(candidates >= 0) & (candidates < self._size)]
            results.append(_exact_order(self._matrix[candidates], candidates, queries[row], k))
        return results

    def _ann_index(self) -> Any:
        if self._ann is None:
            self._ann = self._load_ann()
        if self._ann_rows < self._size:
            keys = np.arange(self._ann_rows, self._size, dtype=np.uint64)
            self._ann.add(keys, self._matrix[self._ann_rows : self._size], threads=0)
            self._ann_rows = self._size
        return self._ann

    def _load_ann(self) -> Any:
        index = _new_hnsw(self.dimensions)
        path = self.ann_path
        if path is not None and path.exists():
            settings = _saved_settings(path)
            if settings != HNSW_SETTINGS:
                # Built by another version: its links would keep the old recall for good.
                logger.warning(
                    "knowledgepulse: the ANN index %s was built with other settings (%s, now "
                    "%s); rebuilding it",
                    path,
                    settings,
                    HNSW_SETTINGS,
                )
            else:
                index = self._read_ann(path, index)
        # usearch keeps neither expansion in the file: this version's apply to a loaded graph
        # too (the insertion one matters for the rows added after the load).
        index.expansion_add = HNSW_SETTINGS["expansion_add"]
        index.expansion_search = EXPANSION_SEARCH
        self._ann_rows = int(index.size)
        return index

    def _read_ann(self, path: Path, index: Any) -> Any:
        """``index`` loaded from ``path``, or a fresh one where the file is unusable."""
        try:
            index.load(str(path))
        except Exception as exc:  # a damaged or foreign file: rebuild from the rows
            logger.warning("knowledgepulse: rebuilding the ANN index %s (%s)", path, exc)
            return _new_hnsw(self.dimensions)
        if index.size > self._size or index.ndim != self.dimensions:
            logger.warning("knowledgepulse: the ANN index %s is stale; rebuilding it", path)
            return _new_hnsw(self.dimensions)
        return index

    def save_ann(self) -> None:
        """Write the ANN index beside the base (if one was built), with the settings it was
        built with, so that the next open reuses it."""
        with self._lock:
            if self._ann is not None and self.ann_path is not None and self._ann_rows:
                tmp = self.ann_path.with_name(self.ann_path.name + ".tmp")
                self._ann.save(str(tmp))
                tmp.chmod(0o600)  # the base's vectors, private like the base itself
                tmp.replace(self.ann_path)
                settings = _settings_path(self.ann_path)
                tmp = settings.with_name(settings.name + ".tmp")
                tmp.write_text(json.dumps(HNSW_SETTINGS, sort_keys=True), encoding="utf-8")
                tmp.chmod(0o600)  # beside the base, with its mode
                tmp.replace(settings)


# Float32 candidates re-scored exactly beyond the k wanted: rounding moves a similarity by
# ~1e-7, so the exact best is among the first few float32 ones.
_RERANK = 8


def _exact_order(
    rows: FloatArray, positions: npt.NDArray[Any], query: FloatArray, k: int
) -> list[tuple[int, float]]:
    """Up to ``k`` (position, exact cosine) pairs of ``rows``, most similar first, the older
    (lower position) first on equal similarity."""
    exact = exact_rows(rows) @ exact_rows(query)
    order = sorted(range(len(positions)), key=lambda i: (-exact[i], int(positions[i])))
    return [(int(positions[i]), float(exact[i])) for i in order[:k]]


_usearch: bool | None = None


def usearch_available() -> bool:
    """Whether usearch is installed (asked once per process, imported only when asked)."""
    global _usearch
    if _usearch is None:
        try:
            import usearch.index  # noqa: F401
        except ImportError:
            _usearch = False
        else:
            _usearch = True
    return _usearch
