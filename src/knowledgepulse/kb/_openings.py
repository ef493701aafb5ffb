"""Each stored trace's opening vector: its first user message embedded, for recall.

An agent that recalls before it acts has the first user message of its task, and a first
message is nearer the other attempts' first messages than their whole task texts (which add
every later turn). So recall ranks its candidates by the nearer of two vectors
(:mod:`._recall`): the trace's task-text vector (``traces``) and its opening vector
(:func:`knowledgepulse.tasks.opening_text`, the same model, unit length), kept in a table
beside ``traces`` keyed by the row's ``seq``, the same in SQLite and PostgreSQL:
``trace_openings`` (seq, vector: little-endian float32 bytes).

An opening is derived data, made with the base's own model: stored with the trace when the
base was opened with its embedder (a Scorer's run, ``kp score --kb``), else made the first
time recall meets the trace among its candidates (recall has the embedder) and stored then;
a base made before openings existed is filled that way, nothing else changes. Only
candidates are compared by opening (at most two rankings' depth), so no second index is kept.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._base import FloatArray, StoredTrace, unit_rows
from ._frame import SQLFrame

__all__ = ["OPENING_TABLE", "OpeningMixin", "opening_of"]

logger = logging.getLogger("knowledgepulse")

#: The statement creating the table; ``{blob}`` is the dialect's binary type.
OPENING_TABLE = (
    "CREATE TABLE IF NOT EXISTS trace_openings (seq BIGINT PRIMARY KEY, vector {blob} NOT NULL)"
)
#: Ids per ``IN (...)`` list.
_CHUNK = 500
#: Openings embedded per call of the embedder.
_BATCH = 256


class OpeningMixin(SQLFrame):
    """Opening vectors stored beside the traces (used by :class:`~._sql.SQLKnowledgeBase`)."""

    _openings_ready: bool = False
    #: The embedder the base was opened with (None: not given; openings are then made by
    #: recall, which has one).
    _embedder: Any = None

    def _ensure_openings(self) -> None:
        """Create the table (inside the caller's write transaction)."""
        if not self._openings_ready:
            self._execute(OPENING_TABLE.format(blob=self.dialect.blob_type))
            self._openings_ready = True

    def _store_new_openings(self, items: Sequence[StoredTrace]) -> None:
        """After an insert (inside its transaction): the openings of ``items`` just stored,
        where the base was opened with its embedder."""
        if self._embedder is None or not items:
            return
        self._ensure_openings()
        # As stored: an id stored already keeps its own trace.
        self._embed_openings(self._lacking([item.id for item in items]), self._embedder)

    def opening_vectors(self, ids: Sequence[str], embedder: Any) -> dict[str, FloatArray]:
        """The opening vectors of the stored traces of ``ids`` (id -> unit vector); those not
        made yet are made with ``embedder`` (the base's model) and stored."""
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return {}
        if not self._openings_ready:
            with self._write():
                self._ensure_openings()
        found = self._stored_openings(wanted)
        if len(found) < len(wanted):
            with self._write():
                lacking = self._lacking(wanted)
                if lacking:
                    self._embed_openings(lacking, embedder)
            found = self._stored_openings(wanted)
        return found

    def _stored_openings(self, ids: list[str]) -> dict[str, FloatArray]:
        m = self.dialect.mark
        found: dict[str, FloatArray] = {}
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start : start + _CHUNK]
            marks = ",".join([m] * len(chunk))
            rows = self._select(
                "SELECT t.id, o.vector FROM traces t JOIN trace_openings o ON o.seq = t.seq "
                f"WHERE t.id IN ({marks})",
                chunk,
            )
            for trace_id, vector in rows:
                found[str(trace_id)] = np.frombuffer(bytes(vector), dtype="<f4").astype(np.float32)
        return found

    def _lacking(self, ids: list[str]) -> list[tuple[int, str, Any]]:
        """(seq, id, trace as stored) of the stored traces of ``ids`` with no opening yet."""
        m = self.dialect.mark
        lacking: list[tuple[int, str, Any]] = []
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start : start + _CHUNK]
            marks = ",".join([m] * len(chunk))
            lacking.extend(
                self._select(
                    f"SELECT seq, id, trace FROM traces WHERE id IN ({marks}) AND seq NOT IN "
                    "(SELECT seq FROM trace_openings)",
                    chunk,
                )
            )
        return lacking

    def _embed_openings(self, rows: list[tuple[int, str, Any]], embedder: Any) -> None:
        """Embed and store the openings of ``rows`` (inside the caller's write transaction)."""
        texts = [opening_of(self.dialect.json_in(trace)) for _, _, trace in rows]
        for start in range(0, len(rows), _BATCH):
            vectors = unit_rows(
                np.asarray(embedder.embed(texts[start : start + _BATCH]), np.float32),
                self.dimensions,
            )
            self._executemany(
                f"INSERT INTO trace_openings (seq, vector) VALUES ({self.dialect.mark}, "
                f"{self.dialect.mark}) ON CONFLICT (seq) DO NOTHING",
                [
                    (seq, np.asarray(vector, dtype="<f4").tobytes())
                    for (seq, _, _), vector in zip(rows[start : start + _BATCH], vectors)
                ],
            )
        if len(rows) > _BATCH:
            logger.info("%s: made the openings of %d stored traces", self.location, len(rows))

    def _forget_openings(self) -> None:
        """Every trace was deleted (inside the caller's transaction)."""
        self._ensure_openings()  # another process may have made the table: emptied too
        self._execute("DELETE FROM trace_openings")


def opening_of(trace: Any) -> str:
    """The opening text of a stored trace (a mapping, as stored): its
    :func:`~knowledgepulse.tasks.opening_text`; a row that is no valid trace gives its
    objective, one without, the empty text."""
    from .._errors import KnowledgePulseError
    from .._schema import ReasoningTrace
    from ..tasks import opening_text

    if not isinstance(trace, dict):
        return ""
    try:
        return opening_text(ReasoningTrace.model_validate(trace)).text
    except (ValueError, KnowledgePulseError):  # pydantic's ValidationError is a ValueError
        task = trace.get("task")
        objective = task.get("objective") if isinstance(task, dict) else None
        return objective if isinstance(objective, str) else ""
