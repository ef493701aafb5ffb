"""Near-duplicate lists over a memory-mapped matrix: exact in blocks, or through HNSW.

Each row's list holds the other rows at cosine ≥ ``similarity``, with the exact cosines the
rest of knowledgepulse uses (rows on the 2^-26 grid of :func:`~knowledgepulse.memory._cache.
exact_rows`, dot products in float64: exact, so a pair's cosine has the same bits whichever
path found it). Below :data:`ANN_FROM` rows the search is exact: blocks of rows against the
whole matrix, float32 products proposing (with a margin far above their rounding) and exact
products deciding. From :data:`ANN_FROM` rows an HNSW index (usearch) proposes instead; it is
built deterministically (one thread, rows added in order, fixed settings), so the same rows
give the same lists in every run, and its candidates are re-scored exactly.

A row with more than :data:`LISTED` near rows (a dense cluster) is marked instead of listed;
its list is made when asked for, by an exact scan of the whole matrix. Lists live on
disk (positions and cosines appended to two files, read memory-mapped), so memory holds one
block of products, whatever the number of rows or pairs.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ..kb._index import usearch_available
from ..memory._cache import exact_rows

__all__ = ["ANN_FROM", "NearLists", "near_lists"]

#: Rows from which an HNSW index proposes the candidates (below: exact blocks). The kb index's
#: threshold (``kb._index.ANN_THRESHOLD``), so curation finds neighbours the same way it did.
ANN_FROM = 50_000
#: Candidates the HNSW index is asked for per row; a row whose candidates are all near asks
#: again for :data:`LISTED` of them.
NEIGHBOURS = 64
#: Near rows listed at most for one row; a row with more (a dense cluster) is marked instead,
#: and its list made by an exact scan when the walk needs it (rare: one per such leader).
LISTED = 1024
#: float32 products this far below the threshold are re-scored exactly: their rounding error
#: is below 1e-6 for unit rows of a few hundred dimensions.
MARGIN = 1e-4
_BLOCK_ROWS, _BLOCK_COLUMNS, _ANN_QUERIES = 1024, 8192, 128
# HNSW settings, fixed here (not shared with the kb index, whose settings may change): a list
# must not depend on another module's tuning. Expansion 128 on search: recall of near
# duplicates is what matters, and they are the closest rows.
_CONNECTIVITY, _EXPANSION_ADD, _EXPANSION_SEARCH = 16, 64, 128

Progress = Callable[[int], None]


class NearLists:
    """Each row's near rows ``(position, exact cosine)``, most similar first (ties: lower
    position first), read from disk; a dense row's list is made by a scan when asked for."""

    def __init__(self, matrix: npt.NDArray[np.float32], similarity: float, directory: Path) -> None:
        self.matrix = matrix
        self.similarity = similarity
        self.directory = directory
        n = matrix.shape[0]
        self.offsets = np.zeros(n + 1, dtype=np.int64)
        self.dense = np.zeros(n, dtype=bool)
        self._positions = open(directory / "near.pos", "wb")  # noqa: SIM115  (closed in _done)
        self._cosines = open(directory / "near.cos", "wb")  # noqa: SIM115
        self._filled = 0
        self._pos: npt.NDArray[np.int64] | None = None
        self._cos: npt.NDArray[np.float64] | None = None
        self.scans = 0  # dense rows scanned

    def _add(self, position: int, near: list[tuple[int, float]] | None) -> None:
        """Record row ``position``'s list (rows are added in order); None: a dense row."""
        count = 0
        if near is None:
            self.dense[position] = True
        else:
            count = len(near)
            if count:
                self._positions.write(np.array([p for p, _ in near], np.int64).tobytes())
                self._cosines.write(np.array([c for _, c in near], np.float64).tobytes())
        self.offsets[position + 1] = self.offsets[position] + count
        self._filled = position + 1

    def _done(self) -> None:
        self._positions.close()
        self._cosines.close()
        total = int(self.offsets[-1])
        if total:
            self._pos = np.memmap(self.directory / "near.pos", np.int64, "r", shape=(total,))
            self._cos = np.memmap(self.directory / "near.cos", np.float64, "r", shape=(total,))

    @property
    def pairs(self) -> int:
        """Listed (row, near row) entries; dense rows not counted."""
        return int(self.offsets[-1])

    def of(self, position: int) -> list[tuple[int, float]]:
        """Row ``position``'s near rows, most similar first."""
        if self.dense[position]:
            self.scans += 1
            return scan(self.matrix, position, self.similarity)
        start, stop = int(self.offsets[position]), int(self.offsets[position + 1])
        if start == stop or self._pos is None or self._cos is None:
            return []
        return [
            (int(p), float(c))
            for p, c in zip(self._pos[start:stop].tolist(), self._cos[start:stop].tolist())
        ]


def near_lists(
    matrix: npt.NDArray[np.float32],
    similarity: float,
    directory: Path,
    *,
    progress: Progress | None = None,
    ann_from: int = ANN_FROM,
) -> NearLists:
    """Every row's near rows (cosine ≥ ``similarity``), written under ``directory``.

    Args:
        matrix: unit rows (a memory map is read a block at a time).
        similarity: the cosine from which two rows are near.
        directory: where the lists are written.
        progress: called with the number of rows done so far.
        ann_from: rows from which an HNSW index proposes candidates (when usearch is
            installed; without it, the search stays exact).
    """
    lists = NearLists(matrix, similarity, directory)
    try:
        if matrix.shape[0] >= ann_from and usearch_available():
            _fill_ann(lists, progress)
        else:
            _fill_exact(lists, progress)
    finally:
        lists._done()
    return lists


def release(matrix: Any) -> None:
    """Unmap the pages of a memory map that this process has read (they stay in the page
    cache): its resident memory then holds one block, not every row it has looked at."""
    mapped = getattr(matrix, "_mmap", None)
    if mapped is not None and hasattr(mmap, "MADV_DONTNEED"):
        mapped.madvise(mmap.MADV_DONTNEED)


def _near_of(
    position: int, candidates: npt.NDArray[Any], cosines: npt.NDArray[np.float64], similarity: float
) -> list[tuple[int, float]]:
    keep = (cosines >= similarity) & (candidates != position)
    found = sorted(
        zip(candidates[keep].tolist(), cosines[keep].tolist()), key=lambda pc: (-pc[1], pc[0])
    )
    return [(int(p), float(c)) for p, c in found]


def _fill_exact(lists: NearLists, progress: Progress | None) -> None:
    matrix, similarity = lists.matrix, lists.similarity
    n = matrix.shape[0]
    for start in range(0, n, _BLOCK_ROWS):
        block = np.array(matrix[start : start + _BLOCK_ROWS], dtype=np.float32)
        found: list[list[npt.NDArray[np.int64]]] = [[] for _ in range(block.shape[0])]
        for column in range(0, n, _BLOCK_COLUMNS):
            part = np.asarray(matrix[column : column + _BLOCK_COLUMNS], dtype=np.float32)
            rows, columns = np.nonzero(block @ part.T >= similarity - MARGIN)
            release(matrix)
            if rows.size:
                bounds = np.searchsorted(rows, np.arange(block.shape[0] + 1))
                for row in np.nonzero(np.diff(bounds))[0].tolist():
                    found[row].append(columns[bounds[row] : bounds[row + 1]] + column)
        exact_block = exact_rows(block)
        for row, parts in enumerate(found):
            position = start + row
            if not parts:
                lists._add(position, [])
                continue
            candidates = np.concatenate(parts)
            if candidates.size > LISTED + 1:  # maybe dense: a scan decides when it is needed
                lists._add(position, None)
                continue
            cosines = exact_rows(matrix[candidates]) @ exact_block[row]
            lists._add(position, _near_of(position, candidates, cosines, similarity))
        release(matrix)
        if progress is not None:
            progress(min(n, start + _BLOCK_ROWS))


def scan(
    matrix: npt.NDArray[np.float32], position: int, similarity: float
) -> list[tuple[int, float]]:
    """Row ``position``'s near rows by an exact scan of every row."""
    query = np.asarray(matrix[position], dtype=np.float32)
    exact_query = exact_rows(query)
    near: list[tuple[int, float]] = []
    for column in range(0, matrix.shape[0], _BLOCK_COLUMNS):
        part = np.asarray(matrix[column : column + _BLOCK_COLUMNS], dtype=np.float32)
        candidates = np.nonzero(part @ query >= similarity - MARGIN)[0]
        if candidates.size:
            cosines = exact_rows(part[candidates]) @ exact_query
            near.extend(_near_of(position, candidates + column, cosines, similarity))
        release(matrix)
    near.sort(key=lambda pc: (-pc[1], pc[0]))
    return near


def _fill_ann(lists: NearLists, progress: Progress | None) -> None:
    from usearch.index import Index

    matrix, similarity = lists.matrix, lists.similarity
    n, dimensions = matrix.shape
    index = Index(
        ndim=dimensions,
        metric="ip",
        dtype="f16",
        connectivity=_CONNECTIVITY,
        expansion_add=_EXPANSION_ADD,
        expansion_search=_EXPANSION_SEARCH,
    )
    # One thread, rows in order: the graph, and so every list, is the same in every run.
    for start in range(0, n, _BLOCK_COLUMNS):
        part = np.asarray(matrix[start : start + _BLOCK_COLUMNS], dtype=np.float32)
        index.add(np.arange(start, start + part.shape[0], dtype=np.uint64), part, threads=1)
        release(matrix)
        if progress is not None:
            progress(start // 2 + part.shape[0] // 2)
    wanted = min(n, NEIGHBOURS + 1)  # the row itself is usually among them
    for start in range(0, n, _ANN_QUERIES):
        queries = np.asarray(matrix[start : start + _ANN_QUERIES], dtype=np.float32)
        # Each query is answered alone: the threads change the speed, never a result.
        keys = np.asarray(index.search(queries, wanted, threads=0).keys, dtype=np.int64)
        keys = keys.reshape(queries.shape[0], -1)
        exact_queries = exact_rows(queries)
        for row in range(queries.shape[0]):
            position = start + row
            near = _ann_near(matrix, keys[row], queries[row], exact_queries[row], similarity)
            if near is None and wanted < n:  # every candidate is near: ask for more
                more = np.asarray(index.search(queries[row], min(n, LISTED + 1)).keys, np.int64)
                near = _ann_near(matrix, more, queries[row], exact_queries[row], similarity)
            lists._add(position, None if near is None else _near_of(position, *near, similarity))
        release(matrix)
        if progress is not None:
            progress(n // 2 + (start + queries.shape[0]) // 2)


def _ann_near(
    matrix: npt.NDArray[np.float32],
    keys: npt.NDArray[np.int64],
    query: npt.NDArray[np.float32],
    exact_query: npt.NDArray[np.float64],
    similarity: float,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]] | None:
    """The candidates ``keys`` with their exact cosines; None when every one is near (the
    row may have more near rows than were asked for)."""
    n = matrix.shape[0]
    candidates = np.unique(keys[(keys >= 0) & (keys < n)])
    cosines = exact_rows(matrix[candidates]) @ exact_query
    if candidates.size >= keys.size and bool((cosines >= similarity).all()):
        return None
    return candidates, cosines
