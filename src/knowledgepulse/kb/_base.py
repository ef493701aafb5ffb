"""What every knowledge base is: stored traces, their identity checks, errors.

A knowledge base remembers traces for good: each stored trace keeps its JSON, its score
record, its vector (with the model, dimensions and windowing the vector was made with) and
when and from where it was added. It is a :class:`~knowledgepulse.NoveltyMemory`, so a
:class:`~knowledgepulse.Scorer` measures novelty against everything in it; the rows are the
source of truth, and any vector index over them is derived and rebuildable.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import numpy as np
import numpy.typing as npt
from pydantic import ValidationError

from .._errors import KnowledgePulseError
from ..copies import CopyFacet
from ..memory._cache import Admit, Nearest, _cosine, _normalise, exact_rows
from ..records import ScoreRecord

logger = logging.getLogger("knowledgepulse")

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "VECTOR_TEXT_TASK",
    "VECTOR_TEXT_TRACE",
    "VECTOR_TEXT_WORDS",
    "EmbeddingIdentity",
    "Hit",
    "KnowledgeBaseError",
    "KnowledgeBaseMismatchError",
    "KnowledgeBaseStats",
    "StoredBatch",
    "StoredTrace",
    "admit_rows",
    "first_stored",
    "read_score_record",
    "unit_rows",
    "utc_now",
    "vector_text_of",
]

FORMAT_NAME = "knowledgepulse.kb"
FORMAT_VERSION = 1

FloatArray = npt.NDArray[np.float32]

#: The texts a base's vectors are of (``kb_meta.vector_text``).
VECTOR_TEXT_TASK = "task/1"
VECTOR_TEXT_TRACE = "trace"
#: How a message names each kind of vector.
VECTOR_TEXT_WORDS = {VECTOR_TEXT_TASK: "task texts", VECTOR_TEXT_TRACE: "whole traces"}


def vector_text_of(novelty: str) -> str:
    """The text a novelty's vectors are of: ``task`` compares task texts, ``seed`` whole
    traces."""
    return VECTOR_TEXT_TASK if novelty == "task" else VECTOR_TEXT_TRACE


class KnowledgeBaseError(KnowledgePulseError, RuntimeError):
    """A knowledge base cannot be opened or used: not a knowledge base, a newer format, a
    server that is down. The message names the base (never a password)."""


class KnowledgeBaseMismatchError(KnowledgeBaseError):
    """Vectors made one way (model, dimensions, windowing) cannot be compared with a base of
    vectors made another way."""


@dataclass(frozen=True, slots=True)
class EmbeddingIdentity:
    """How a base's vectors were made: all three must match to compare a new vector."""

    model: str
    dimensions: int
    windowing: str = "first_window"
    #: The embedders (model, runtime and precision: ``all-MiniLM-L6-v2 (openvino bf16)``) whose
    #: vectors are in the base. Not part of the match: one model's vectors compare across
    #: runtimes, but a base says which made them, and a run that adds another is told.
    embedders: tuple[str, ...] = field(default=(), compare=False)
    #: What text a vector is of: ``task/1`` (the trace's task text, what the task novelty and
    #: recall compare) or ``trace`` (the objective and every step: the seed's novelty, and
    #: every base made before the task facet).
    text: str = VECTOR_TEXT_TASK
    #: The embedder itself when known (``of``): a base of whole-trace vectors opened for task
    #: vectors is migrated with it. Not part of the identity.
    embedder: Any = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, embedder: Any, novelty: str = "task") -> EmbeddingIdentity:
        """The identity of an :class:`~knowledgepulse.Embedder` (``windowing`` if it has one)
        for the vectors of a novelty: ``task`` (task texts) or ``seed`` (whole traces)."""
        # The model, not the runtime: ONNX fp32 and torch bf16 vectors of one model compare
        # (cosine ≥ 0.9999 to each other); "name (runtime)" names are cut at the runtime.
        model = getattr(embedder, "model_name", None) or str(embedder.name).split(" (")[0]
        return cls(
            model=str(model),
            dimensions=int(embedder.dimensions),
            windowing=str(getattr(embedder, "windowing", "first_window")),
            embedders=(str(embedder.name),),
            text=vector_text_of(novelty),
            embedder=embedder,
        )

    @classmethod
    def from_meta(cls, meta: dict[str, str]) -> EmbeddingIdentity | None:
        """The identity a base's metadata table holds, or None for a base with no vectors."""
        if "model" not in meta:
            return None
        embedders = tuple(json.loads(meta["embedders"])) if "embedders" in meta else ()
        # A base made before the task facet holds whole-trace vectors and says nothing.
        text = meta.get("vector_text", VECTOR_TEXT_TRACE)
        return cls(meta["model"], int(meta["dimensions"]), meta["windowing"], embedders, text)

    def meta_rows(self) -> list[tuple[str, str]]:
        """The (key, value) rows of the metadata table that record this identity."""
        return [
            ("model", self.model),
            ("dimensions", str(self.dimensions)),
            ("windowing", self.windowing),
            ("vector_text", self.text),
            # Last: a run that adds an embedder rewrites this row alone.
            ("embedders", json.dumps(list(self.embedders))),
        ]

    def describe(self) -> str:
        what = VECTOR_TEXT_WORDS.get(self.text, VECTOR_TEXT_WORDS[VECTOR_TEXT_TRACE])
        return f"{self.model} ({self.dimensions} dimensions, {self.windowing}) of {what}"


def joined_identity(
    location: str, stored: EmbeddingIdentity, wanted: EmbeddingIdentity
) -> EmbeddingIdentity | None:
    """``stored`` with ``wanted``'s embedders added, when a run brings one the base has not
    seen (None when it brings none new). Says so on the log: vectors of another runtime or
    precision (bf16 and fp32 differ by up to ~1e-4 in cosine) are never mixed silently."""
    new = [name for name in wanted.embedders if name not in stored.embedders]
    if not new:
        return None
    if stored.embedders:
        logger.warning(
            "%s: its vectors were made by %s; this run adds vectors made by %s (the same "
            "model in another runtime or precision: similarities across them differ by up to "
            "~1e-4)",
            location,
            ", ".join(stored.embedders),
            ", ".join(new),
        )
    return EmbeddingIdentity(
        stored.model, stored.dimensions, stored.windowing, (*stored.embedders, *new), stored.text
    )


@dataclass(frozen=True)
class StoredTrace:
    """One trace as a knowledge base keeps it."""

    id: str
    trace: dict[str, Any]
    vector: FloatArray
    #: Its score record (None: stored without one, or a stored one that does not read as a
    #: score record, see :func:`read_score_record`). The base serialises it as it stores it.
    record: ScoreRecord | None = None
    added_at: str = field(default_factory=lambda: utc_now())
    source: str | None = None
    #: Who may see it (``metadata.visibility``), who contributed it and their org.
    visibility: str = "network"
    owner: str | None = None
    org: str | None = None
    #: Its copy facet when the caller made it already (a Scorer has, to name copies); the
    #: base makes it from ``trace`` otherwise.
    copy_facet: CopyFacet | None = None

    @property
    def value(self) -> float | None:
        return None if self.record is None else self.record.score

    @property
    def domain(self) -> str | None:
        metadata = self.trace.get("metadata")
        domain = metadata.get("task_domain") if isinstance(metadata, dict) else None
        return domain if isinstance(domain, str) else None


def read_score_record(data: Any, location: str, trace_id: str) -> ScoreRecord | None:
    """The score record a row holds (``data``: its JSON column, parsed), or None when it holds
    none.

    A row whose record does not validate (written by an older version, or edited by hand) is
    read as holding none, and the log says which row and field, once per read: every reader
    of the base (the service, ``kp kb show``) then answers for the trace without its score
    rather than failing. The stored bytes are left as they are.
    """
    if data is None:
        return None
    try:
        return ScoreRecord.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(part) for part in first["loc"]) or "record"
        logger.warning(
            "%s: %s: its score record does not read (%s: %s); read as none",
            location,
            trace_id,
            where,
            first["msg"],
        )
        return None


@dataclass(frozen=True, slots=True)
class Hit:
    """A stored trace found by a search, with its cosine similarity to the query."""

    id: str
    similarity: float

    def __post_init__(self) -> None:
        if isinstance(self.similarity, float) and not -1.0 <= self.similarity <= 1.0:
            object.__setattr__(self, "similarity", _cosine(self.similarity))  # at most 1


@dataclass(frozen=True)
class KnowledgeBaseStats:
    """What is in a base, for ``kp kb stats`` and the service."""

    location: str
    traces: int
    identity: EmbeddingIdentity | None
    by_domain: dict[str, int]
    mean_value: float | None
    created_at: str | None
    last_added_at: str | None
    index: str

    def to_dict(self) -> dict[str, Any]:
        identity = self.identity
        return {
            "location": self.location,
            "traces": self.traces,
            "model": identity.model if identity else None,
            "dimensions": identity.dimensions if identity else None,
            "windowing": identity.windowing if identity else None,
            "embedders": list(identity.embedders) if identity else [],
            "by_domain": self.by_domain,
            "mean_value": self.mean_value,
            "created_at": self.created_at,
            "last_added_at": self.last_added_at,
            "index": self.index,
        }


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def unit_rows(vectors: Any, dimensions: int) -> FloatArray:
    """``vectors`` as float32 unit rows of ``dimensions`` (a zero row stays zero)."""
    rows = np.asarray(vectors, dtype=np.float32)
    if rows.ndim == 1:
        rows = rows[None, :]
    if rows.ndim != 2 or (rows.shape[0] and rows.shape[1] != dimensions):
        got = rows.shape[-1] if rows.ndim else 0
        raise ValueError(f"Expected {dimensions} dimensions, got {got}")
    return _normalise(rows)


@dataclass(frozen=True)
class StoredBatch:
    """What a knowledge base did with a batch (``nearest_then_store_many``): each row's
    nearest, and the rows (by position) this call stored.

    An admitted row is not among ``stored`` when its id was held already, by another writer
    that took its turn first or by an earlier row of the same batch: the base keeps the row
    stored first and leaves the other out. The caller learns it here, from the base, rather
    than by reading the row back and comparing.
    """

    nearest: list[Nearest | None]
    stored: frozenset[int]


def first_stored(
    positions: Sequence[int], items: Sequence[StoredTrace], held: Iterable[str]
) -> frozenset[int]:
    """The positions of ``items`` an insert stores, ids ``held`` being in the base already:
    each id's first item, unless the base holds it (inserts skip an id stored already)."""
    taken = set(held)
    stored: set[int] = set()
    for position, item in zip(positions, items):
        if item.id not in taken:
            taken.add(item.id)
            stored.add(position)
    return frozenset(stored)


def admit_rows(
    batch: FloatArray,
    ids: Sequence[str | None],
    stored_nearest: Sequence[tuple[str, float] | None],
    admit: Admit | None,
) -> tuple[list[Nearest | None], list[int], list[StoredTrace]]:
    """The walk every backend does inside its write lock, row by row: a row's nearest is the
    better of its nearest stored trace and the rows before it that were admitted; then
    ``admit`` decides whether it is stored (without ``admit``, every row is, bare).

    Returns each row's nearest, the positions of the rows admitted, and the traces to insert
    (one per admitted row, in order).
    """
    exact = exact_rows(batch)
    sims_new = exact @ exact.T  # exact: the same bits however the rows are batched
    chosen: list[int] = []
    found: list[Nearest | None] = []
    to_store: list[StoredTrace] = []
    for i in range(batch.shape[0]):
        best_id, best = None, -np.inf
        if stored_nearest[i] is not None:
            best_id, best = stored_nearest[i]  # type: ignore[misc]
        for j in chosen:
            if sims_new[i, j] > best:
                best, best_id = float(sims_new[i, j]), ids[j]
        nearest = None if best == -np.inf else Nearest(best_id, float(best))
        found.append(nearest)
        item: Any = admit(i, nearest) if admit is not None else _bare(ids[i], batch[i])
        if item is None:
            continue
        if not isinstance(item, StoredTrace):
            item = _bare(ids[i], batch[i])
        chosen.append(i)
        to_store.append(item)
    return found, chosen, to_store


def _bare(trace_id: str | None, vector: FloatArray) -> StoredTrace:
    """A row stored without a trace (the protocol used without a Scorer)."""
    if trace_id is None:
        raise ValueError("a knowledge base stores every vector under an id")
    return StoredTrace(id=trace_id, trace={}, vector=vector)
