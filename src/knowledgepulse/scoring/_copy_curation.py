"""Curation by copies: group the traces that are copies of one run, keep the best of each.

The default ``kp curate`` decider (no embedder). Each trace is reduced as it is read to its id,
its order-free value, its copy facet (:mod:`knowledgepulse.copies`: digest, MinHash signature,
steps digest, message sketch and objective digest, 16 + 256 + 16 + 16 + 8 bytes) and the place
of its JSON line in a :class:`~knowledgepulse.scoring._spool.LineSpool` in the work directory.
Once everything is read, positions are laid out in id order,
:class:`~knowledgepulse.copies.CopyGraph` finds every trace's copies (exact by digest, near by
LSH bands decided by the estimated Jaccard similarity), and the walk of
:func:`~knowledgepulse.scoring._curation.walk` decides: the trace with the most copies first
(the centre of its family, usually the run the others were copied from: leaders elsewhere leave
copies outside every group they could join), then the highest value, then the smallest id; each
leader takes every unassigned trace that is a copy *of it* (no chaining through an intermediate
trace). The decisions depend only on the set of traces, never on their order. With a knowledge
base, a trace that is a copy of a stored trace is dropped in the stored trace's favour first.

Memory is what bounds a big pile (1.5 GiB at 10^6 traces, docs/performance.md): per trace, its
id (a string) and ~350 bytes of arrays, no Python object per trace besides. Grouping lays each
array out in id order and lets its read-order original go at once, reads the signatures
through a row map rather than copying them, merges the LSH bands' pairs into the distinct ones
as they come (:func:`~knowledgepulse.copies._pairs.distinct_band_pairs`), and lets the
signatures go once the graph is made; the kept lines are copied out a block of places at a time.
"""

from __future__ import annotations

import contextlib
import time
from array import array
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from .._schema import ReasoningTrace
from ..copies import (
    COPY_SIMILARITY,
    DEFAULT_SCHEME,
    CopyFacet,
    CopyGraph,
    CopyScheme,
    copy_facets,
    facets_of_texts,
    trace_texts,
)
from ..copies._facet import MESSAGE_SLOTS
from ..copies._graph import NO_STEPS
from ._curation import (
    CurationResult,
    Duplicate,
    DuplicateGroup,
    distinct_traces,
    relation_counts,
    stored_group,
    trace_value,
    walk,
)
from ._profiles import ProfileRegistry, global_registry
from ._spool import LineSpool, copy_out

if TYPE_CHECKING:
    from ..kb import KnowledgeBase

__all__ = ["CopyCuration", "CopyTimings", "curate_copies", "curate_from_facets", "decide_copies"]

#: How the estimate is named in group reasons.
MEASURE = "estimated Jaccard"
#: Traces hashed per batch (the facets of a batch are computed in one call).
BATCH = 256


@dataclass
class CopyTimings:
    """Seconds spent in each part of a run (reading excludes hashing)."""

    read: float = 0.0
    hash: float = 0.0
    search: float = 0.0
    write: float = 0.0
    started: float = field(default_factory=time.perf_counter)


def check_similarity(similarity: float) -> None:
    if not 0.0 < similarity <= 1.0:
        raise ValueError(f"similarity must be in (0, 1], got {similarity!r}")


class CopyCuration:
    """One curation by copies: :meth:`add` every trace, then :meth:`decide` and :meth:`write`.

    Args:
        work_dir: where the trace lines and the groups wait until written.
        similarity: the estimated Jaccard similarity from which two traces are near copies.
        kb: a knowledge base whose traces count as seen (copies of them are dropped).
        profiles: domain weights for the values (default: the registered profiles).
        scheme: how copy facets are made.
        hashers: processes that make the copy facets while this one reads (0: this process
            does); the facets, and so the decisions, are the same either way.
    """

    def __init__(
        self,
        work_dir: Path,
        *,
        similarity: float = COPY_SIMILARITY,
        kb: KnowledgeBase | None = None,
        profiles: ProfileRegistry | None = None,
        scheme: CopyScheme = DEFAULT_SCHEME,
        hashers: int = 0,
    ) -> None:
        check_similarity(similarity)
        self.work_dir = work_dir
        work_dir.mkdir(parents=True, exist_ok=True)
        self.similarity = similarity
        self.kb = kb
        self.registry = profiles if profiles is not None else global_registry().copy()
        self.scheme = scheme
        self.lines = LineSpool(work_dir / "traces.jsonl")
        self.timings = CopyTimings()
        self.ids: list[str] = []
        self._seen: set[str] = set()
        self._values = array("d")
        self._offsets = array("q")
        self._lengths = array("q")
        self._digests = bytearray()
        self._steps = bytearray()  # 16 zero bytes: steps that do not identify the run
        self._messages = bytearray()  # each trace's message sketch
        self._objectives = bytearray()  # each trace's objective digest (8 bytes)
        self._sizes = array("q")  # shingles of each trace's signature
        self._signatures = array("H")
        self._words = bytearray()  # 1: the trace has words (a signature), 0: none
        self._stored: dict[int, tuple[str, float, str]] = {}  # copies of stored traces
        self._pending: list[ReasoningTrace] = []
        self._hashing = _Hashers(hashers, scheme)
        self.repeated = 0
        self.kept: npt.NDArray[np.bool_] = np.zeros(0, dtype=bool)
        self.groups = 0
        self.dropped = 0
        self.candidates = 0
        self.wordless = 0
        self.by_relation: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.ids)

    def add(self, trace: ReasoningTrace) -> None:
        """Take one trace: its line is kept, its value and copy facet made (in batches)."""
        if trace.id in self._seen:
            self.repeated += 1
            return
        self._seen.add(trace.id)
        self.ids.append(trace.id)
        offset, length = self.lines.append(trace.to_json())
        self._offsets.append(offset)
        self._lengths.append(length)
        self._values.append(trace_value(trace, None, self.registry))
        self._pending.append(trace)
        if len(self._pending) >= BATCH:
            self.flush()

    def flush(self) -> None:
        """Send the traces waiting for a batch to be hashed; take in the facets made."""
        pending, self._pending = self._pending, []
        if pending:
            started = time.perf_counter()
            self._hashing.submit([trace_texts(trace) for trace in pending])
            self.timings.hash += time.perf_counter() - started
        for facets in self._hashing.ready():
            self._take(facets)

    def _take(self, facets: list[CopyFacet]) -> None:
        """The facets of the next traces in read order."""
        started = time.perf_counter()
        empty = np.zeros(self.scheme.permutations, dtype=np.uint16)
        first = len(self._words)
        for offset, facet in enumerate(facets):
            self._digests += facet.digest
            self._steps += facet.steps or NO_STEPS
            self._messages += facet.messages
            self._objectives += facet.objective
            self._sizes.append(shingle_count(facet, self.scheme))
            signature = facet.signature if facet.signature is not None else empty
            self._signatures.frombytes(signature.tobytes())
            self._words.append(facet.signature is not None)
            if self.kb is not None and facet.signature is not None:
                found = self.kb.stored_copy(facet, self.similarity)
                if found is not None and found.id is not None:
                    self._stored[first + offset] = (found.id, found.similarity, found.relation)
        self.timings.hash += time.perf_counter() - started

    def finish_reading(self) -> None:
        """Hash what waits for a batch and close the line spool."""
        self.flush()
        for facets in self._hashing.drain():
            self._take(facets)
        self._hashing.close()
        self.lines.finish()
        self.timings.read = time.perf_counter() - self.timings.started - self.timings.hash

    def decide(self, progress: Callable[[int, int, str], None] | None = None) -> None:
        """Find the copies and group them; the groups go to the work directory."""
        started = time.perf_counter()
        n = len(self.ids)
        self._seen = set()  # read: only the ids' order is needed now
        # Memory is what bounds a big pile: each array read is laid out in id order and its
        # read-order original let go at once, and no list of n Python objects is made but
        # the ids themselves (an object array, ids distinct: any sort gives one order).
        id_array = np.array(self.ids, dtype=object)
        order = np.argsort(id_array, kind="stable").astype(np.int64)
        ids = id_array[order]
        del id_array
        values = np.frombuffer(self._values, dtype=np.float64)[order]
        digests = np.frombuffer(self._digests, dtype="V16")[order]
        steps = np.frombuffer(self._steps, dtype="V16")[order]
        messages = np.frombuffer(self._messages, dtype=np.uint8).reshape(n, MESSAGE_SLOTS)[order]
        objectives = np.frombuffer(self._objectives, dtype="V8")[order]
        sizes = np.frombuffer(self._sizes, dtype=np.int64)[order]
        has_words = np.frombuffer(self._words, dtype=np.uint8)[order].astype(bool)
        self._values, self._sizes = array("d"), array("q")
        self._digests, self._steps, self._messages, self._objectives, self._words = (
            bytearray() for _ in range(5)
        )
        # In read order, no copy: the graph takes the rows of distinct texts in id order.
        signatures = np.frombuffer(self._signatures, dtype=np.uint16).reshape(
            n, self.scheme.permutations
        )
        position_of = np.empty(n, dtype=np.int64)
        position_of[order] = np.arange(n)
        stored = {int(position_of[i]): found for i, found in self._stored.items()}
        self.kept = np.zeros(n, dtype=bool)  # by read order
        with (self.work_dir / "groups.jsonl").open(
            "w", encoding="utf-8", errors="surrogatepass"
        ) as out:
            decisions = decide_copies(
                ids,
                values,
                digests,
                signatures,
                has_words,
                stored,
                self.similarity,
                self.scheme,
                rows=order,
                steps=steps,
                sizes=sizes,
                messages=messages,
                objectives=objectives,
            )
            # The graph is made: the signatures and the arrays it was made of go.
            del signatures, digests, steps, messages, objectives, sizes, has_words
            self._signatures = array("H")
            done = 0
            for position, group in decisions:
                if position >= 0:
                    self.kept[order[position]] = True
                    done += 1
                if group is not None:
                    self._write_group(out, group)
                    done += len(group.duplicates)
                if progress is not None:
                    progress(min(done, n), n, "group")
        self.candidates = decisions.candidates
        self.wordless = decisions.wordless
        self.timings.search = time.perf_counter() - started

    def _write_group(self, out: Any, group: DuplicateGroup) -> None:
        from ..io._writers import dumps

        out.write(dumps(group.to_dict()) + "\n")
        self.groups += 1
        self.dropped += len(group.duplicates)
        relation_counts(self.by_relation, group.duplicates)

    def write(self, kept_line: Callable[[str], None], group_line: Callable[[str], None]) -> None:
        """Copy the kept traces (in input order) and the groups to their outputs."""
        started = time.perf_counter()
        copy_out(self.work_dir, self.lines, self._kept_places(), kept_line, group_line)
        self.timings.write = time.perf_counter() - started

    def _kept_places(self) -> Iterator[tuple[int, int]]:
        """(offset, length) of each kept line in input order, a block at a time (a list of
        them would be ~120 bytes per kept trace)."""
        kept = np.flatnonzero(self.kept)
        offsets = np.frombuffer(self._offsets, dtype=np.int64)
        lengths = np.frombuffer(self._lengths, dtype=np.int64)
        for start in range(0, len(kept), 65_536):
            block = kept[start : start + 65_536]
            yield from zip(offsets[block].tolist(), lengths[block].tolist())

    @property
    def kept_count(self) -> int:
        return int(self.kept.sum())

    @property
    def distinct(self) -> int:
        return len(self.ids)

    @property
    def group_count(self) -> int:
        return self.groups

    def close(self) -> None:
        self._hashing.close()
        self.lines.finish()

    def remove_files(self) -> None:
        """Remove what this run wrote in the work directory (and the directory once empty)."""
        for name in ("traces.jsonl", "groups.jsonl"):
            (self.work_dir / name).unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # something else is in it (a folder the user named)
            self.work_dir.rmdir()


def shingle_count(facet: CopyFacet, scheme: CopyScheme) -> int:
    """The shingles a facet's signature was made of (one for a text shorter than one)."""
    return max(1, facet.words - scheme.shingle + 1)


class _Hashers:
    """Copy facets made in this process (``processes`` 0) or in worker processes, handed back
    in the order the batches were sent; at most two batches per worker are in flight."""

    def __init__(self, processes: int, scheme: CopyScheme) -> None:
        self.scheme = scheme
        self._done: list[list[CopyFacet]] = []
        self._flight: deque[Any] = deque()
        self._pool: Any = None
        self._limit = 2 * processes
        if processes > 0:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(["knowledgepulse.copies"])
            self._pool = ProcessPoolExecutor(processes, mp_context=context)

    def submit(self, texts: list[Any]) -> None:
        if self._pool is None:
            self._done.append(facets_of_texts(texts, self.scheme))
            return
        self._flight.append(self._pool.submit(facets_of_texts, texts, self.scheme))
        while len(self._flight) > self._limit:  # bounded: memory holds a few batches
            self._done.append(self._flight.popleft().result())

    def ready(self) -> Iterator[list[CopyFacet]]:
        """The batches finished so far, in order (those still running wait)."""
        while self._flight and self._flight[0].done():
            self._done.append(self._flight.popleft().result())
        done, self._done = self._done, []
        yield from done

    def drain(self) -> Iterator[list[CopyFacet]]:
        """Every batch, waiting for those still running."""
        yield from self.ready()
        while self._flight:
            yield self._flight.popleft().result()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


class _Decisions:
    """The walk's decisions as an iterator of ``(position, group)`` (position -1: a group of
    copies of a stored trace, which come last), with the graph's counts."""

    def __init__(self, iterator: Iterator[tuple[int, DuplicateGroup | None]], graph: CopyGraph):
        self._iterator = iterator
        self.candidates = graph.candidates
        self.wordless = graph.wordless

    def __iter__(self) -> Iterator[tuple[int, DuplicateGroup | None]]:
        return self._iterator


def decide_copies(
    ids: Sequence[str] | npt.NDArray[np.object_],
    values: npt.NDArray[np.float64],
    digests: npt.NDArray[np.void],
    signatures: npt.NDArray[np.uint16],
    has_words: npt.NDArray[np.bool_],
    stored: Mapping[int, tuple[str, float, str]],
    similarity: float,
    scheme: CopyScheme,
    rows: npt.NDArray[np.int64] | None = None,
    steps: npt.NDArray[np.void] | None = None,
    sizes: npt.NDArray[np.int64] | None = None,
    messages: npt.NDArray[np.uint8] | None = None,
    objectives: npt.NDArray[np.void] | None = None,
) -> _Decisions:
    """The walk over positions in id order (see the module): ``stored`` maps a position to the
    stored trace it is a copy of (id, similarity, relation); position ``p``'s signature is
    ``signatures[rows[p]]`` (``rows`` None: row ``p``)."""
    graph = CopyGraph.build(
        digests, signatures, has_words, scheme, similarity, rows, steps, sizes, messages, objectives
    )
    assigned = np.zeros(len(ids), dtype=bool)
    by_stored: dict[str, list[Duplicate]] = {}
    for position, (stored_id, found, relation) in sorted(stored.items()):
        by_stored.setdefault(stored_id, []).append(
            Duplicate(ids[position], found, float(values[position]), relation)
        )
        assigned[position] = True

    def decisions() -> Iterator[tuple[int, DuplicateGroup | None]]:
        yield from walk(
            ids, values, assigned, graph.neighbours, similarity, MEASURE, first=graph.copy_counts()
        )
        for stored_id, duplicates in sorted(by_stored.items()):
            yield -1, stored_group(stored_id, duplicates, similarity, MEASURE)

    return _Decisions(decisions(), graph)


def curate_copies(
    traces: Iterable[ReasoningTrace | Mapping[str, Any]],
    *,
    similarity: float = COPY_SIMILARITY,
    kb: KnowledgeBase | None = None,
    profiles: ProfileRegistry | None = None,
    scheme: CopyScheme = DEFAULT_SCHEME,
) -> CurationResult:
    """Group the copies in a pile and keep the most valuable trace of each group, order-free.

    Args:
        traces: the pile (models or mappings). Repeated ids: the first one is used.
        similarity: the estimated Jaccard similarity of word shingles from which two traces
            are near copies (exact copies always are).
        kb: a knowledge base: a copy of a stored trace is dropped in its favour.
        profiles: domain weights (default: the registered profiles).
        scheme: how copy facets are made.

    Returns:
        The kept traces in input order, and one group per kept (or stored) trace that has
        copies, largest value first, stored traces' groups last.
    """
    check_similarity(similarity)
    registry = profiles if profiles is not None else global_registry().copy()
    pile = distinct_traces(traces)
    canonical = sorted(pile, key=lambda t: t.id)
    values = [trace_value(t, None, registry) for t in canonical]
    return curate_from_facets(
        pile, canonical, values, copy_facets(canonical, scheme), similarity, kb, scheme
    )


def curate_from_facets(
    pile: Sequence[ReasoningTrace],
    canonical: Sequence[ReasoningTrace],
    values: Sequence[float],
    facets: Sequence[CopyFacet],
    similarity: float,
    kb: KnowledgeBase | None,
    scheme: CopyScheme = DEFAULT_SCHEME,
) -> CurationResult:
    """:func:`curate_copies` from the values and facets of ``canonical`` (the pile in id
    order), wherever they were computed (here, or on Ray: the same numbers, the same result)."""
    if not pile:
        return CurationResult(kept=[], groups=[], similarity=similarity)
    ids = [trace.id for trace in canonical]
    value_array = np.asarray(values, dtype=np.float64)
    digests = np.frombuffer(b"".join(f.digest for f in facets), dtype="V16")
    steps = np.frombuffer(b"".join(f.steps or NO_STEPS for f in facets), dtype="V16")
    messages = np.frombuffer(b"".join(f.messages for f in facets), dtype=np.uint8).reshape(
        len(facets), -1
    )
    objectives = np.frombuffer(b"".join(f.objective for f in facets), dtype="V8")
    sizes = np.array([shingle_count(f, scheme) for f in facets], dtype=np.int64)
    signatures = np.zeros((len(facets), scheme.permutations), dtype=np.uint16)
    for row, facet in enumerate(facets):
        if facet.signature is not None:
            signatures[row] = facet.signature
    has_words = np.array([f.signature is not None for f in facets], dtype=bool)
    stored: dict[int, tuple[str, float, str]] = {}
    if kb is not None:
        for position, facet in enumerate(facets):
            found = kb.stored_copy(facet, similarity)
            if found is not None and found.id is not None:
                stored[position] = (found.id, found.similarity, found.relation)
    kept_ids: set[str] = set()
    groups: list[DuplicateGroup] = []
    decisions = decide_copies(
        ids,
        value_array,
        digests,
        signatures,
        has_words,
        stored,
        similarity,
        scheme,
        steps=steps,
        sizes=sizes,
        messages=messages,
        objectives=objectives,
    )
    for position, group in decisions:
        if position >= 0:
            kept_ids.add(ids[position])
        if group is not None:
            groups.append(group)
    return CurationResult(
        kept=[trace for trace in pile if trace.id in kept_ids],
        groups=groups,
        values=dict(zip(ids, value_array.tolist())),
        similarity=similarity,
        candidate_pairs=decisions.candidates,
    )
