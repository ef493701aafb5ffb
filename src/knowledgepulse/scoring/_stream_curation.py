"""Curation that streams: the decisions of :func:`~knowledgepulse.scoring._curation.curate`
with memory bounded whatever the size of the pile.

Each trace is reduced as it is read to what curation needs: its id, its value, the row of its
vector in a :class:`~knowledgepulse.scoring._spool.VectorSpool` and the place of its JSON line
in a :class:`~knowledgepulse.scoring._spool.LineSpool`, both files in the work directory.
Traces are embedded in batches as they arrive (an embedder gives a text the same vector in any
batch, so the order of arrival changes nothing). Once everything is read, the vectors are laid
out in id order, the near-duplicate lists are made on disk
(:func:`~knowledgepulse.scoring._nearby.near_lists`) and the same walk as ``curate`` decides,
its groups written as they close. The kept lines are then copied from the line spool in input
order. Memory holds a few numbers per trace and one block of vectors.
"""

from __future__ import annotations

import json
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .._schema import ReasoningTrace
from ._curation import (
    DEFAULT_SIMILARITY,
    check_settings,
    stored_groups,
    trace_value,
    unit_rows,
    walk,
)
from ._nearby import ANN_FROM, near_lists, release
from ._profiles import ProfileRegistry, global_registry
from ._spool import SCRATCH_FILES, LineSpool, VectorSpool, text_digest

if TYPE_CHECKING:
    from ..kb import KnowledgeBase

__all__ = ["StreamingCuration", "Timings"]

Progress = Callable[[int, int], None]  # (done, total)


@dataclass
class Timings:
    """Seconds spent in each part of a run (reading excludes embedding)."""

    read: float = 0.0
    embed: float = 0.0
    search: float = 0.0
    write: float = 0.0
    started: float = field(default_factory=time.perf_counter)


class StreamingCuration:
    """One streaming curation over ``work_dir``: :meth:`add` every trace, then :meth:`decide`
    and :meth:`write`.

    Args:
        work_dir: where vectors, lines and lists are kept (vectors survive a stop).
        embedder: the embedder (name, dimensions, embed).
        similarity: the cosine from which two traces are near-duplicates.
        kb: a knowledge base whose traces count as seen.
        profiles: domain weights (default: the registered profiles).
        batch_size: texts embedded per call.
        ann_from: traces from which an HNSW index proposes neighbours.
    """

    def __init__(
        self,
        work_dir: Path,
        *,
        embedder: Any,
        similarity: float = DEFAULT_SIMILARITY,
        kb: KnowledgeBase | None = None,
        profiles: ProfileRegistry | None = None,
        batch_size: int = 64,
        ann_from: int = ANN_FROM,
    ) -> None:
        check_settings(similarity, None, False, kb is not None)
        self.work_dir = work_dir
        self.embedder = embedder
        self.similarity = similarity
        self.kb = kb
        self.registry = profiles if profiles is not None else global_registry().copy()
        self.batch_size = batch_size
        self.ann_from = ann_from
        self.spool = VectorSpool(work_dir, embedder.name, int(embedder.dimensions))
        self.lines = LineSpool(work_dir / "traces.jsonl")
        self.timings = Timings()
        self.ids: list[str] = []
        self._seen: dict[str, int] = {}
        self._values = array("d")
        self._rows = array("q")
        self._offsets = array("q")
        self._lengths = array("q")
        self._stored: dict[int, tuple[str, float]] = {}  # near-duplicates of stored traces
        self._pending: list[tuple[int, ReasoningTrace, str]] = []
        self.repeated = 0  # traces whose id came earlier
        self.embedded = 0  # texts embedded in this run
        self.reused = 0  # traces whose vector an earlier run left in the spool
        self.kept: np.ndarray[Any, np.dtype[np.bool_]] = np.zeros(0, dtype=bool)
        self.groups = 0
        self.dropped = 0
        self.scans = 0

    def __len__(self) -> int:
        return len(self.ids)

    def add(self, trace: ReasoningTrace) -> None:
        """Take one trace: its line and value are kept, its vector made (in batches)."""
        if trace.id in self._seen:
            self.repeated += 1
            return
        index = len(self.ids)
        self._seen[trace.id] = index
        self.ids.append(trace.id)
        offset, length = self.lines.append(trace.to_json())
        self._offsets.append(offset)
        self._lengths.append(length)
        self._values.append(0.0)
        self._rows.append(-1)
        self._pending.append((index, trace, trace.embedding_text))
        if len(self._pending) >= self.batch_size:
            self.flush()

    def flush(self) -> None:
        """Embed the traces waiting for a batch (their vectors land in the spool)."""
        pending, self._pending = self._pending, []
        if not pending:
            return
        digests = [text_digest(text) for _, _, text in pending]
        # Each text without a vector yet, once: a text met again in this run (same steps, other
        # id) takes the row made for it, and only rows an earlier run left count as reused.
        missing: dict[bytes, str] = {}
        for digest, (_, _, text) in zip(digests, pending):
            row = self.spool.row_of(digest)
            if row is None:
                missing.setdefault(digest, text)
            elif row < self.spool.stored_before:
                self.reused += 1
        if missing:
            started = time.perf_counter()
            vectors = unit_rows(self.embedder.embed(list(missing.values())))
            self.timings.embed += time.perf_counter() - started
            self.spool.append(list(missing), vectors)
            self.embedded += len(missing)
        rows = [self.spool.row_of(digest) for digest in digests]
        nearest: list[tuple[str, float] | None] = [None] * len(pending)
        if self.kb is not None and len(self.kb):
            for i, vector in enumerate(self.spool.rows([int(r) for r in rows if r is not None])):
                hits = self.kb.search(vector, 1)
                nearest[i] = (hits[0].id, hits[0].similarity) if hits else None
        for (index, trace, _), row, near in zip(pending, rows, nearest):
            assert row is not None
            self._rows[index] = row
            self._values[index] = trace_value(trace, near, self.registry)
            if near is not None and near[1] >= self.similarity:
                self._stored[index] = near

    def finish_reading(self) -> None:
        """Embed what waits for a batch and close the line spool."""
        self.flush()
        self.lines.finish()
        self.timings.read = time.perf_counter() - self.timings.started - self.timings.embed

    def decide(self, progress: Progress | None = None) -> None:
        """Find the near-duplicates and group them; the groups go to the work directory."""
        started = time.perf_counter()
        n = len(self.ids)
        order = np.array(sorted(range(n), key=self.ids.__getitem__), dtype=np.int64)
        matrix = self._canonical_matrix(order)
        lists = near_lists(
            matrix,
            self.similarity,
            self.work_dir,
            progress=None if progress is None else (lambda done: progress(done, n)),
            ann_from=self.ann_from,
        )
        ids = [self.ids[i] for i in order.tolist()]
        values = np.frombuffer(self._values, dtype=np.float64)[order]
        position_of = np.empty(n, dtype=np.int64)
        position_of[order] = np.arange(n)
        stored: list[tuple[str, float] | None] = [None] * n
        for index, near in self._stored.items():
            stored[int(position_of[index])] = near
        assigned = np.zeros(n, dtype=bool)
        by_stored = stored_groups(ids, values.tolist(), stored, self.similarity, assigned)
        self.kept = np.zeros(n, dtype=bool)  # by read order
        with (self.work_dir / "groups.jsonl").open(
            "w", encoding="utf-8", errors="surrogatepass"
        ) as out:
            for position, group in walk(ids, values, assigned, lists.of, self.similarity):
                self.kept[order[position]] = True
                if group is not None:
                    self._write_group(out, group)
            # Stored traces' groups come last, as curate() sorts them.
            for group in by_stored:
                self._write_group(out, group)
        self.scans = lists.scans
        self.timings.search = time.perf_counter() - started

    def _write_group(self, out: Any, group: Any) -> None:
        from ..io._writers import dumps

        out.write(dumps(group.to_dict()) + "\n")
        self.groups += 1
        self.dropped += len(group.duplicates)

    def _canonical_matrix(self, order: np.ndarray[Any, np.dtype[np.int64]]) -> Any:
        """The vectors in id order, in a memory-mapped file of the work directory."""
        n, dimensions = len(order), self.spool.dimensions
        path = self.work_dir / "canonical.f32"
        if n == 0:
            return np.zeros((0, dimensions), dtype=np.float32)
        matrix = np.memmap(path, np.float32, "w+", shape=(n, dimensions))
        source = self.spool.matrix()
        rows = np.frombuffer(self._rows, dtype=np.int64)[order]
        for start in range(0, n, 8192):
            matrix[start : start + 8192] = source[rows[start : start + 8192]]
            matrix.flush()
            release(matrix)  # written to the file: memory holds one chunk at a time
            release(source)
        return np.memmap(path, np.float32, "r", shape=(n, dimensions))

    def write(self, kept_line: Callable[[str], None], group_line: Callable[[str], None]) -> None:
        """Copy the kept traces (in input order) and the groups to their outputs."""
        started = time.perf_counter()
        with (self.work_dir / "groups.jsonl").open(
            encoding="utf-8", errors="surrogatepass"
        ) as groups:
            for line in groups:
                group_line(line.rstrip("\n"))
        places = [(self._offsets[i], self._lengths[i]) for i in np.nonzero(self.kept)[0].tolist()]
        self.lines.copy(places, kept_line)
        self.timings.write = time.perf_counter() - started

    @property
    def kept_count(self) -> int:
        return int(self.kept.sum())

    def close(self) -> None:
        self.spool.close()
        self.lines.finish()

    def discard_scratch(self) -> None:
        """Remove what a re-run makes again (lines, lists, groups), keeping the vectors."""
        for name in SCRATCH_FILES:
            (self.work_dir / name).unlink(missing_ok=True)


def groups_from_file(path: Path) -> list[dict[str, Any]]:
    """The group lines written to ``path`` (for tests)."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
