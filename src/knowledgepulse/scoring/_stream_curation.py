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

With a ``first_pass`` embedder (the static embedder), the vectors read are the first pass's:
the lists hold the candidate pairs (first-pass cosine ≥ ``candidate_similarity``), and the walk
asks the deciding embedder (MiniLM) only about the candidates of each leader still unassigned
(:class:`_Decider`): a candidate is a near-duplicate when its cosine to the leader is ≥
``similarity``. A trace is embedded by the decider only when the walk asks about it; its vector
goes to a second spool in the work directory, kept across stops as the first one is. The
decisions are those of ``curate(first_pass=...)``.
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
from ..memory._cache import exact_rows
from ._curation import (
    DEFAULT_SIMILARITY,
    candidate_threshold,
    check_settings,
    relation_counts,
    stored_groups,
    trace_value,
    unit_rows,
    walk,
)
from ._nearby import ANN_FROM, NearLists, near_lists, release
from ._profiles import ProfileRegistry, global_registry
from ._spool import DECIDER_DIR, SCRATCH_FILES, LineSpool, VectorSpool, copy_out

if TYPE_CHECKING:
    from ..kb import KnowledgeBase

__all__ = ["StreamingCuration", "Timings"]

#: ``(done, total, phase)``: the phase is "search" (the lists) or "decide" (the tiered walk).
Progress = Callable[[int, int, str], None]


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
        first_pass: a cheap embedder whose vectors propose candidate pairs; ``embedder`` then
            decides each candidate pair, embedding only the traces it is asked about. Not
            with ``kb``.
        candidate_similarity: the first pass's cosine from which a pair is a candidate
            (default :func:`~knowledgepulse.scoring._curation.candidate_threshold`).
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
        first_pass: Any = None,
        candidate_similarity: float | None = None,
    ) -> None:
        check_settings(similarity, candidate_similarity, first_pass is not None, kb is not None)
        if kb is not None:
            from ._scorer import check_vector_text

            check_vector_text(kb, "seed")  # whole-trace vectors are compared here
        self.work_dir = work_dir
        self.embedder = embedder
        self.first_pass = first_pass
        self.candidate_similarity: float | None = None
        if first_pass is not None:
            self.candidate_similarity = candidate_threshold(similarity, candidate_similarity)
        # The vectors made while reading: the first pass's when there is one.
        self.reading_embedder = first_pass if first_pass is not None else embedder
        self.similarity = similarity
        self.kb = kb
        self.registry = profiles if profiles is not None else global_registry().copy()
        self.batch_size = batch_size
        self.ann_from = ann_from
        self.spool = VectorSpool(
            work_dir, self.reading_embedder.name, int(self.reading_embedder.dimensions)
        )
        self.decider_spool: VectorSpool | None = None
        if first_pass is not None:
            self.decider_spool = VectorSpool(
                work_dir / DECIDER_DIR, embedder.name, int(embedder.dimensions)
            )
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
        self.embedded = 0  # texts embedded in this run (by the first pass when there is one)
        self.reused = 0  # traces whose vector an earlier run left in the spool
        self.decided_embedded = 0  # with a first pass: texts the decider embedded in this run
        self.decided_reused = 0  # ... and the decider's vectors an earlier run left
        self.candidate_pairs = 0  # with a first pass: listed candidate pairs
        self.kept: np.ndarray[Any, np.dtype[np.bool_]] = np.zeros(0, dtype=bool)
        self.groups = 0
        self.dropped = 0
        self.by_relation: dict[str, int] = {}
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
        # Each text without a vector yet is embedded once; only rows an earlier run left count
        # as reused (a text met again in this run takes the row made for it).
        started = time.perf_counter()
        rows, made, reused = self.spool.fill(
            [text for _, _, text in pending], self._embed_read, len(pending)
        )
        self.timings.embed += time.perf_counter() - started
        self.embedded += made
        self.reused += reused
        nearest: list[tuple[str, float] | None] = [None] * len(pending)
        if self.kb is not None and len(self.kb):
            for i, vector in enumerate(self.spool.rows(rows)):
                hits = self.kb.search(vector, 1)
                nearest[i] = (hits[0].id, hits[0].similarity) if hits else None
        for (index, trace, _), row, near in zip(pending, rows, nearest):
            self._rows[index] = row
            self._values[index] = trace_value(trace, near, self.registry)
            if near is not None and near[1] >= self.similarity:
                self._stored[index] = near

    def _embed_read(self, texts: list[str]) -> Any:
        return unit_rows(self.reading_embedder.embed(texts))

    def finish_reading(self) -> None:
        """Embed what waits for a batch and close the line spool."""
        self.flush()
        self.lines.finish()
        self.timings.read = time.perf_counter() - self.timings.started - self.timings.embed

    def decide(self, progress: Progress | None = None) -> None:
        """Find the near-duplicates and group them; the groups go to the work directory."""
        started, embed_before = time.perf_counter(), self.timings.embed
        n = len(self.ids)
        order = np.array(sorted(range(n), key=self.ids.__getitem__), dtype=np.int64)
        matrix = self._canonical_matrix(order)
        threshold = self.similarity
        if self.candidate_similarity is not None:
            threshold = self.candidate_similarity
        lists = near_lists(
            matrix,
            threshold,
            self.work_dir,
            progress=None if progress is None else (lambda done: progress(done, n, "search")),
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
        neighbours_of: Callable[[int], list[tuple[int, float]]] = lists.of
        decider = None
        if self.first_pass is not None:
            self.candidate_pairs = lists.pairs // 2
            decider = _Decider(self, lists, assigned, order)
            neighbours_of = decider.neighbours
        done = 0
        with (self.work_dir / "groups.jsonl").open(
            "w", encoding="utf-8", errors="surrogatepass"
        ) as out:
            for position, group in walk(ids, values, assigned, neighbours_of, self.similarity):
                self.kept[order[position]] = True
                if group is not None:
                    self._write_group(out, group)
                if decider is not None and progress is not None:
                    done += 1 + (0 if group is None else len(group.duplicates))
                    progress(done, n, "decide")
            # Stored traces' groups come last, as curate() sorts them.
            for group in by_stored:
                self._write_group(out, group)
        self.scans = lists.scans
        if decider is not None:
            decider.close()
        self.timings.search = time.perf_counter() - started - (self.timings.embed - embed_before)

    def _write_group(self, out: Any, group: Any) -> None:
        from ..io._writers import dumps

        out.write(dumps(group.to_dict()) + "\n")
        self.groups += 1
        self.dropped += len(group.duplicates)
        relation_counts(self.by_relation, group.duplicates)

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
        places = [(self._offsets[i], self._lengths[i]) for i in np.nonzero(self.kept)[0].tolist()]
        copy_out(self.work_dir, self.lines, places, kept_line, group_line)
        self.timings.write = time.perf_counter() - started

    @property
    def kept_count(self) -> int:
        return int(self.kept.sum())

    @property
    def distinct(self) -> int:
        return len(self.ids)

    @property
    def group_count(self) -> int:
        return self.groups

    @property
    def stored_vectors(self) -> int:
        """Vectors in the work directory's spools (what a stopped run leaves for the next)."""
        return self.spool.size + (0 if self.decider_spool is None else self.decider_spool.size)

    def close(self) -> None:
        self.spool.close()
        if self.decider_spool is not None:
            self.decider_spool.close()
        self.lines.finish()

    def discard_scratch(self) -> None:
        """Remove what a re-run makes again (lines, lists, groups), keeping the vectors."""
        for name in SCRATCH_FILES:
            (self.work_dir / name).unlink(missing_ok=True)


class _Decider:
    """The second tier of a tiered run: each leader's candidates still unassigned, kept when
    the deciding embedder's exact cosine to the leader is ≥ the similarity. A trace's text is
    read back from the line spool and embedded the first time the walk asks about it."""

    def __init__(
        self,
        curation: StreamingCuration,
        lists: NearLists,
        assigned: np.ndarray[Any, np.dtype[np.bool_]],
        order: np.ndarray[Any, np.dtype[np.int64]],
    ) -> None:
        assert curation.decider_spool is not None
        self.curation = curation
        self.spool = curation.decider_spool
        self.lists = lists
        self.assigned = assigned
        self.order = order
        self.rows = np.full(len(order), -1, dtype=np.int64)  # decider rows, by position
        self._lines = curation.lines.path.open("rb")

    def close(self) -> None:
        self._lines.close()

    def neighbours(self, position: int) -> list[tuple[int, float]]:
        """The unassigned candidates of ``position`` that the decider finds near it."""
        candidates = [p for p, _ in self.lists.of(position) if not self.assigned[p]]
        if not candidates:
            return []
        rows = self._rows_of([position, *candidates])
        vectors = exact_rows(self.spool.rows(rows))
        cosines = (vectors[1:] @ vectors[0]).tolist()
        similarity = self.curation.similarity
        near = [(p, float(c)) for p, c in zip(candidates, cosines) if c >= similarity]
        near.sort(key=lambda pc: (-pc[1], pc[0]))
        return near

    def _rows_of(self, positions: list[int]) -> list[int]:
        """The decider's spool rows of ``positions``, embedding the texts without one."""
        curation = self.curation
        new = [p for p in positions if self.rows[p] < 0]
        if new:
            texts = [self._text(int(self.order[p])) for p in new]
            started = time.perf_counter()
            rows, made, reused = self.spool.fill(
                texts,
                lambda batch: unit_rows(curation.embedder.embed(batch)),
                curation.batch_size,
            )
            curation.timings.embed += time.perf_counter() - started
            curation.decided_embedded += made
            curation.decided_reused += reused
            self.rows[new] = rows
        return [int(self.rows[p]) for p in positions]

    def _text(self, index: int) -> str:
        """The embedded text of the trace read ``index``-th, from its stored line."""
        self._lines.seek(self.curation._offsets[index])
        line = self._lines.read(self.curation._lengths[index])
        return ReasoningTrace.model_validate_json(line).embedding_text


def groups_from_file(path: Path) -> list[dict[str, Any]]:
    """The group lines written to ``path`` (for tests)."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
