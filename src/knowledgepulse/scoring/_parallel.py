"""Scoring ReasoningTrace records on several cores: worker processes validate, score and
write each trace's lines; this process reads the input and takes the results in input order.

Only a run whose traces are scored independently of each other goes to workers: no
embedder (novelty is then 0.5 for every trace), no knowledge base, ReasoningTrace records:
:func:`plan_workers` decides that, and :func:`choose_workers` how many workers such a run gets.

What comes back is what the one-process path makes of the same records, byte for byte: the
workers run the same conversion (:func:`~knowledgepulse.importers.read_traces`) and build
the same lines. Every record read comes back, in order, in exactly one
:class:`ScoredUnit`: a worker that dies is not trusted again, and its batch and everything
after it are scored in this process instead.

Workers start from a fork server (never by forking this process, which may run threads),
ignore Ctrl-C (this process stops them) and are killed when the results stop being taken.
"""

from __future__ import annotations

import gc
import os
import pickle
import signal
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import TYPE_CHECKING, Any

from ._run import ScoredUnit, score_unit

if TYPE_CHECKING:
    from multiprocessing.connection import Connection
    from multiprocessing.process import BaseProcess

    from ..importers import ImportOptions
    from ..io._reader import InputRecord
    from ._profiles import DomainProfile

__all__ = [
    "AUTO_MIN_BYTES",
    "WORKERS_ENV",
    "ScoringSettings",
    "WorkerPlan",
    "choose_workers",
    "plan_workers",
    "score_records",
    "score_records_in_workers",
]

#: Sets the worker count when ``--workers`` is not given (``0``: in process).
WORKERS_ENV = "KNOWLEDGEPULSE_WORKERS"
#: Below this much JSON to read (some thousands of realistic traces), a run is scored in
#: process: starting the workers (a fork server importing the schema) and the extra CPU they
#: spend per trace (pickling, pipes) cost more than they save on a few cores.
AUTO_MIN_BYTES = 32 << 20
#: A ``.gz`` input is counted at this many times its size (JSON traces compress well).
GZIP_RATIO = 6
#: Most workers chosen automatically: past this, the reading process is the bound.
AUTO_MAX_WORKERS = 8
#: No workers chosen automatically while the load average is this many times the CPUs: the
#: workers spend more CPU in all than one process does, which only pays when cores are free.
AUTO_MAX_LOAD_PER_CPU = 1.5
#: A batch sent to a worker ends at this many records or bytes, whichever comes first:
#: large enough that the pipe round trip is small beside the work, small enough that its
#: buffers are reused rather than mapped afresh (larger batches cost more CPU per byte to
#: pack and unpack).
BATCH_RECORDS = 64
BATCH_BYTES = 768 << 10
#: Modules the fork server imports once, so that each worker starts without importing them.
_PRELOAD = [
    "knowledgepulse.scoring._parallel",
    "knowledgepulse.importers",
    "knowledgepulse.scoring._scorer",
    "knowledgepulse.records",
]


@dataclass(frozen=True)
class ScoringSettings:
    """What a worker needs to score as the calling process would (all picklable).

    Args:
        options: values written over every trace (``--task-domain`` …).
        profiles: the domain profiles in use.
        threshold: the sharing gate, or None.
        accepted_lines: also write each passing trace's line (``--accepted``).
    """

    options: ImportOptions
    profiles: tuple[DomainProfile, ...]
    threshold: float | None = None
    accepted_lines: bool = False


@dataclass(frozen=True)
class WorkerPlan:
    """Whether a ``kp score`` run goes to worker processes, and what to say about it.

    Args:
        workers: worker processes (0: in this process).
        note: said on stderr, the run going on in process (``--workers`` where an embedder
            already uses every core).
        refusal: ``--workers N`` where this run cannot use them: a usage error, its message.
    """

    workers: int
    note: str | None = None
    refusal: str | None = None


def plan_workers(
    requested: int | None,
    files: Sequence[str],
    *,
    engine: str = "local",
    embedding: bool,
    source_format: str,
    sinks: bool,
) -> WorkerPlan:
    """The worker processes for a run of ``kp score`` (see :class:`WorkerPlan`).

    Only traces scored independently of each other can be: no embedder (novelty depends on
    what came before), and so no knowledge base, ReasoningTrace records (other formats may
    group records over a file), no JUnit, OTel or grouping sink (they take the validated
    records in the reading process). How many, then: :func:`choose_workers`.

    Args:
        requested: ``--workers`` (None: not given).
        files: the input files (``-`` for standard input).
        engine: ``local``, or ``ray`` (its own workers: never processes here).
        embedding: the run embeds its traces.
        source_format: ``--from``.
        sinks: ``--junit``, ``--group-by`` or ``--otel-endpoint`` is given.
    """
    many = requested is not None and requested > 1
    if engine == "ray":
        return WorkerPlan(0)
    if embedding:
        # Novelty depends on the traces before each one, and the embedder's own threads
        # already use every core: worker processes would only compete with it. Same output.
        note = (
            f"--workers {requested}: traces are embedded in this process (the embedder "
            "uses every core itself); worker processes serve runs with --no-embed"
        )
        return WorkerPlan(0, note=note if many else None)
    why_not = None
    if source_format != "trace":
        why_not = "it reads ReasoningTrace records, not --from " + source_format
    elif sinks:
        why_not = "it cannot be used with --junit, --group-by or --otel-endpoint"
    if why_not is not None:
        refusal = f"--workers {requested} with --engine local: {why_not}"
        return WorkerPlan(0, refusal=refusal if many else None)
    return WorkerPlan(choose_workers(requested, files))


def choose_workers(requested: int | None, files: Sequence[str]) -> int:
    """How many worker processes score ``files``: 0 means in this process.

    Args:
        requested: ``--workers``; 0 or 1 means in process. None: the environment variable
            :data:`WORKERS_ENV` if set, else automatic: one worker per CPU this process may
            use (at most :data:`AUTO_MAX_WORKERS`), when there are at least two, the load
            average leaves them some room (:data:`AUTO_MAX_LOAD_PER_CPU`) and the files hold
            at least :data:`AUTO_MIN_BYTES` of JSON (standard input: never).
        files: the input files (``-`` for standard input).
    """
    if requested is None:
        forced = os.environ.get(WORKERS_ENV, "").strip()
        requested = int(forced) if forced.isdigit() else None
    if requested is not None:
        return requested if requested > 1 else 0
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if not cpus or cpus < 2 or "-" in files:
        return 0
    if hasattr(os, "getloadavg") and os.getloadavg()[0] >= AUTO_MAX_LOAD_PER_CPU * cpus:
        return 0
    return min(cpus, AUTO_MAX_WORKERS) if _json_bytes(files) >= AUTO_MIN_BYTES else 0


def _json_bytes(files: Sequence[str]) -> int:
    total = 0
    for name in files:
        try:
            size = os.path.getsize(name)
        except OSError:
            continue  # reported when it is read
        total += size * GZIP_RATIO if name.lower().endswith(".gz") else size
    return total


# -- scoring a batch (in a worker, or here when a worker is lost) ----------------------------

#: A record as sent to a worker: (source, line, index, json, error, raw).
_Packed = tuple[str, int, "int | None", "bytes | None", "str | None", "str | None"]


def score_records(records: Iterable[InputRecord], settings: ScoringSettings) -> list[ScoredUnit]:
    """Convert and score ``records`` (ReasoningTraces, read with ``parse=False``).

    One :class:`~._run.ScoredUnit` per unit :func:`~knowledgepulse.importers.read_traces`
    gives, in order, as :func:`~._run.score_unit` scores it.
    """
    from ..importers import read_traces
    from ._profiles import ProfileRegistry
    from ._scorer import Scorer

    registry = ProfileRegistry({profile.name: profile for profile in settings.profiles})
    scorer = Scorer(embedder=None, profiles=registry)
    # One unit at a time, its traces dropped once written: validating a whole batch before
    # scoring it keeps hundreds of traces alive, and costs more CPU (cold memory).
    return [
        score_unit(
            scorer,
            conversion,
            threshold=settings.threshold,
            accepted_lines=settings.accepted_lines,
            keep=False,  # the trace and its score stay here: only the lines cross the pipe
        )
        for conversion in read_traces(records, "trace", settings.options)
    ]


def _pack(record: InputRecord) -> _Packed:
    return (record.source, record.line, record.index, record.json, record.error, record.raw)


def _unpack(packed: Sequence[_Packed]) -> list[InputRecord]:
    from ..io._reader import InputRecord

    return [
        InputRecord(source, line, error=error, raw=raw, index=index, json=data)
        for source, line, index, data, error, raw in packed
    ]


def _to_wire(units: list[ScoredUnit]) -> list[tuple[Any, ...]]:
    """Units, compact: a converted unit's records are only counted, not sent back."""
    wire: list[tuple[Any, ...]] = []
    for unit in units:
        if unit.problems:
            wire.append((unit.records, unit.problems, unit.traces))
        else:
            wire.append((len(unit.records), None, unit.traces))
    return wire


_ONE_CONVERTED: tuple[Any, ...] = (None,)


def _from_wire(wire: list[tuple[Any, ...]]) -> Iterator[ScoredUnit]:
    for records, problems, traces in wire:
        if problems is None:
            count = _ONE_CONVERTED if records == 1 else (None,) * records
            yield ScoredUnit(count, traces, [], "trace")
        else:
            yield ScoredUnit(records, traces, problems, "trace")


def _serve(connection: Connection, settings: ScoringSettings) -> None:
    """A worker: score each batch received and send the units back, until EOF."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: kp stops us
    gc.freeze()
    gc.set_threshold(100_000, 10, 10)  # the batches hold no cycles (see kp's own setting)
    while True:
        try:
            message = connection.recv_bytes()
        except (EOFError, OSError):
            return
        units = score_records(_unpack(pickle.loads(message)), settings)
        connection.send_bytes(pickle.dumps(_to_wire(units), protocol=pickle.HIGHEST_PROTOCOL))


# -- the pool, seen from the reading process ---------------------------------------------------


class _Worker:
    def __init__(self, context: Any, settings: ScoringSettings) -> None:
        self.connection, theirs = context.Pipe()
        self.process: BaseProcess = context.Process(
            target=_serve, args=(theirs, settings), daemon=True, name="kp-score-worker"
        )
        self.process.start()
        theirs.close()

    def send(self, message: bytes) -> bool:
        try:
            self.connection.send_bytes(message)
        except (OSError, ValueError):
            return False
        return True

    def receive(self) -> bytes | None:
        try:
            answer: bytes = self.connection.recv_bytes()
        except (EOFError, OSError):
            return None
        return answer

    def why_lost(self) -> str:
        self.process.join(timeout=1.0)
        code = self.process.exitcode
        if code is not None and code < 0:
            return f"killed by signal {-code}"
        return f"exit status {code}" if code is not None else "stopped answering"

    def stop(self) -> None:
        self.connection.close()
        if self.process.is_alive():
            self.process.kill()
        self.process.join(timeout=5.0)


def score_records_in_workers(
    records: Iterable[InputRecord],
    settings: ScoringSettings,
    workers: int,
    *,
    on_worker_lost: Callable[[str], None] | None = None,
) -> Iterator[ScoredUnit]:
    """:func:`score_records` over ``records``, spread over ``workers`` processes, in order.

    Args:
        records: ReasoningTrace records read with ``parse=False``.
        settings: how to score them.
        workers: the number of worker processes (at least 1).
        on_worker_lost: told (``"exit status 1"``, ``"killed by signal 9"``) when a worker
            dies; its batch and the rest are then scored in this process.

    Units come in input order, as from :func:`score_records`; records are read ahead
    of the units taken by at most ``workers + 1`` batches. Closing the iterator (or an
    exception in the caller) stops the workers.
    """
    import multiprocessing

    batches = _batches(records)
    first = next(batches, None)
    second = next(batches, None) if first is not None else None
    if second is None:  # one batch: starting workers would cost more than scoring it here
        if first is not None:
            yield from score_records(_unpack(first), settings)
        return
    assert first is not None
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(_PRELOAD)
    pool: list[_Worker] = []
    try:
        pool.extend(_Worker(context, settings) for _ in range(workers))
        yield from _in_order(pool, chain([first, second], batches), settings, on_worker_lost)
    finally:
        for worker in pool:
            worker.stop()


def _in_order(
    pool: list[_Worker],
    batches: Iterator[list[_Packed]],
    settings: ScoringSettings,
    on_worker_lost: Callable[[str], None] | None,
) -> Iterator[ScoredUnit]:
    # Each worker holds at most one batch: with two, a worker blocked sending its results
    # while this process is blocked sending it the next batch would wait for ever.
    idle = deque(pool)
    pending: deque[tuple[_Worker, list[_Packed]]] = deque()
    lost = False
    ready = next(batches, None)  # read ahead: a worker that finishes gets its next at once
    while True:
        while idle and ready is not None and not lost:
            worker = idle.popleft()
            if not worker.send(pickle.dumps(ready, protocol=pickle.HIGHEST_PROTOCOL)):
                lost = _lost(worker, on_worker_lost)
                break
            pending.append((worker, ready))
            ready = next(batches, None)
        if not pending:
            break
        worker, batch = pending.popleft()
        answer = worker.receive() if not lost or worker.process.is_alive() else None
        if answer is None:
            if not lost:
                lost = _lost(worker, on_worker_lost)
            yield from score_records(_unpack(batch), settings)
            continue
        idle.append(worker)
        yield from _from_wire(pickle.loads(answer))
    # After a loss, what was not sent is scored here, in order.
    while ready is not None:
        yield from score_records(_unpack(ready), settings)
        ready = next(batches, None)


def _lost(worker: _Worker, on_worker_lost: Callable[[str], None] | None) -> bool:
    if on_worker_lost is not None:
        on_worker_lost(worker.why_lost())
    return True


def _batches(records: Iterable[InputRecord]) -> Iterator[list[_Packed]]:
    batch: list[_Packed] = []
    size = 0
    for record in records:
        batch.append(_pack(record))
        size += len(record.json) if record.json is not None else 0
        if len(batch) >= BATCH_RECORDS or size >= BATCH_BYTES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch
