"""What the SQL knowledge bases share: one frame, and a dialect for what SQLite and PostgreSQL
spell differently.

:class:`SQLKnowledgeBase` is the frame every backend runs in: the format and identity checks
on opening, query-then-add inside the backend's write transaction, reads, statistics, import,
and (from :class:`~._keys.AccessMixin`) API keys, settings and reads for a viewer. Both
backends keep the same two tables, ``kb_meta`` (key, value) and ``traces`` (one row per trace,
``seq`` its insertion order), so the SQL here is written once with the :class:`Dialect`'s
placeholder and codecs.

A backend supplies the connection (``_select``, ``_execute``, ``_executemany``), its
transactions (``_transaction``, and ``_write`` when writers need more than that to take turns),
nearest-neighbour search (``_nearest``), ``check`` and ``close``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, ClassVar, Protocol, TypeVar

import numpy as np

from ..memory._cache import Admit, Nearest
from ..records import ScoreRecord
from ._base import (
    FORMAT_NAME,
    FORMAT_VERSION,
    VECTOR_TEXT_TASK,
    VECTOR_TEXT_TRACE,
    EmbeddingIdentity,
    FloatArray,
    Hit,
    KnowledgeBaseError,
    KnowledgeBaseMismatchError,
    KnowledgeBaseStats,
    StoredBatch,
    StoredTrace,
    admit_rows,
    first_stored,
    joined_identity,
    logger,
    read_score_record,
    unit_rows,
    utc_now,
)
from ._copies import CopyStoreMixin
from ._dialect import Dialect
from ._fulltext import FullTextMixin
from ._keys import AccessMixin
from ._openings import OpeningMixin

__all__ = ["INDEX_MODES", "Dialect", "SQLKnowledgeBase", "new_meta_rows"]

#: How a base may answer nearest-neighbour queries (see :data:`~._index.ANN_THRESHOLD`).
INDEX_MODES = ("auto", "exact", "ann")
#: The columns of ``traces`` a :class:`StoredTrace` is read from, in ``_stored``'s order.
_STORED_COLUMNS = "id, trace, record, {vector}, added_at, source, visibility, owner, org"
#: Rows read per page by ``iter_stored``.
_PAGE = 1000
#: Ids per ``IN (...)`` list (SQLite allows at most 999 placeholders in older builds).
_CHUNK = 500

_KB = TypeVar("_KB", bound="SQLKnowledgeBase")


class _Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    def fetchall(self) -> list[Any]: ...


class _Connection(Protocol):
    """What the shared frame uses of a DB-API connection (``sqlite3``'s, psycopg's)."""

    def execute(self, sql: str, params: Sequence[Any], /) -> _Cursor: ...

    def close(self) -> None: ...


def new_meta_rows() -> list[tuple[str, str]]:
    """The ``kb_meta`` rows a new base starts with."""
    return [("format", FORMAT_NAME), ("version", str(FORMAT_VERSION)), ("created_at", utc_now())]


class SQLKnowledgeBase(AccessMixin, CopyStoreMixin, FullTextMixin, OpeningMixin):
    """A knowledge base in an SQL database; a :class:`~knowledgepulse.NoveltyMemory`.

    Subclasses set :attr:`dialect`, open their connection and call :meth:`_check_format` and
    :meth:`_check_identity` on the metadata they read.
    """

    dialect: ClassVar[Dialect]
    location: str
    identity: EmbeddingIdentity | None
    _conn: _Connection

    def __init__(self, location: str, index: str) -> None:
        if index not in INDEX_MODES:
            raise ValueError(f"index mode must be auto, exact or ann; got {index!r}")
        self.location = location
        self._index_mode = index
        self._lock = threading.RLock()

    # -- the connection ----------------------------------------------------------------------

    def _select(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        # Under the lock: the connection is shared by threads, and a read must not see
        # another thread's write transaction half done.
        with self._lock, self._errors():
            return self._conn.execute(sql, list(params)).fetchall()

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement (inside the caller's transaction); the rows it changed."""
        return max(self._conn.execute(sql, list(params)).rowcount, 0)

    # -- the backend's hooks -----------------------------------------------------------------

    def _executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> int:
        """Run one statement per row (inside the caller's transaction); the rows changed."""
        raise NotImplementedError

    def _select_stored(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """``_select`` for rows that carry a vector (the driver may read those differently)."""
        return self._select(sql, params)

    def _transaction(self) -> AbstractContextManager[None]:
        """One transaction, under this object's lock."""
        raise NotImplementedError

    def _write(self) -> AbstractContextManager[None]:
        """A transaction in which writers (of every process) take turns: what it reads no
        other writer changes before it commits."""
        return self._transaction()

    def _errors(self) -> AbstractContextManager[object]:
        """Around every use of the connection: the driver's errors as the base's own."""
        return nullcontext()

    @contextmanager
    def _reading(self) -> Iterator[None]:
        """Around reads that span several statements."""
        with self._lock, self._errors():
            yield

    def _nearest(self, queries: FloatArray, k: int) -> list[list[tuple[str, float]]]:
        """For each query row, up to ``k`` (id, cosine) pairs, most similar first (on equal
        similarity the older row first). Called under ``_reading`` or ``_write``."""
        raise NotImplementedError

    def _forget_vectors(self) -> None:
        """Every trace was just deleted: drop what is kept about their vectors."""

    def _index_due(self) -> bool:
        """Inside a write: whether the base has just grown to need its ANN index built."""
        return False

    def _build_index(self) -> None:
        """Build the ANN index (after the write that made it due has committed)."""

    def _search_kind(self, traces: int) -> str:
        """``exact`` or ``ann``: what answers queries with ``traces`` stored."""
        raise NotImplementedError

    def _first_identity(self, identity: EmbeddingIdentity) -> None:
        """An empty base has just taken ``identity`` (inside the opening's transaction)."""

    # -- opening -----------------------------------------------------------------------------

    def _meta(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in self._select("SELECT key, value FROM kb_meta")}

    def _value(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """The first column of the first row (None: no row)."""
        rows = self._select(sql, params)
        return rows[0][0] if rows else None

    def _check_format(self, meta: dict[str, str]) -> None:
        if meta.get("format") != FORMAT_NAME:
            raise KnowledgeBaseError(f"{self.location}: not a knowledge base; nothing was changed")
        version = int(meta.get("version", "0"))
        if version > FORMAT_VERSION:
            raise KnowledgeBaseError(
                f"{self.location}: written by a newer knowledgepulse (format {version}, this "
                f"one reads up to {FORMAT_VERSION}); upgrade knowledgepulse to open it"
            )

    def _check_identity(
        self, wanted: EmbeddingIdentity | None, meta: dict[str, str]
    ) -> EmbeddingIdentity | None:
        """The base's identity: ``wanted`` set on a base without one, checked against the one
        it has (the embedders ``wanted`` adds are recorded). Runs in the caller's transaction."""
        stored = EmbeddingIdentity.from_meta(meta)
        if wanted is None:
            return stored
        # Kept to make the openings of the traces stored (._openings): the model is checked
        # below, so its vectors compare with the base's.
        self._embedder = wanted.embedder
        if stored is None:
            self._write_meta(wanted.meta_rows())
            self._first_identity(wanted)
            return wanted
        if stored != wanted and self._migrates(stored, wanted):
            stored = self._migrate_to_task_text(stored, wanted)
        if stored != wanted:
            raise KnowledgeBaseMismatchError(
                f"{self.location}: its vectors were made with {stored.describe()}, not "
                f"{wanted.describe()}; use the same embedder, or another base"
            )
        joined = joined_identity(self.location, stored, wanted)
        if joined is not None:
            self._write_meta(joined.meta_rows()[-1:])
            return joined
        return stored

    def _migrates(self, stored: EmbeddingIdentity, wanted: EmbeddingIdentity) -> bool:
        """Whether a base of ``stored`` vectors becomes one of ``wanted`` vectors by
        re-embedding: whole-trace vectors of the same model, asked for task vectors by a run
        that brings the embedder."""
        return (
            stored.text == VECTOR_TEXT_TRACE
            and wanted.text == VECTOR_TEXT_TASK
            and wanted.embedder is not None
            and (stored.model, stored.dimensions) == (wanted.model, wanted.dimensions)
        )

    def _migrate_to_task_text(
        self, stored: EmbeddingIdentity, wanted: EmbeddingIdentity
    ) -> EmbeddingIdentity:
        """Re-embed every stored trace by its task text (in the opening's transaction: all or
        nothing) and record it; the log names the base and the count."""
        from .._schema import parse_trace
        from ..tasks import task_text

        d = self.dialect
        rows = self._select("SELECT id, trace FROM traces ORDER BY seq")
        embedder = wanted.embedder
        updated = 0
        for start in range(0, len(rows), _PAGE):
            page = rows[start : start + _PAGE]
            texts = [task_text(parse_trace(d.json_in(trace))).text for _, trace in page]
            vectors = unit_rows(np.asarray(embedder.embed(texts), np.float32), stored.dimensions)
            self._executemany(
                f"UPDATE traces SET {d.vector_column} = {d.mark} WHERE id = {d.mark}",
                [(d.vector_out(vector), trace_id) for (trace_id, _), vector in zip(page, vectors)],
            )
            updated += len(page)
        migrated = EmbeddingIdentity(
            stored.model,
            stored.dimensions,
            stored.windowing,
            stored.embedders,
            VECTOR_TEXT_TASK,
            embedder,
        )
        self._write_meta([("vector_text", VECTOR_TEXT_TASK)])
        self._forget_vectors()
        logger.warning(
            "%s: made before the task facet, its %d traces' vectors were of whole traces; "
            "they are now of their task texts (%s), as novelty and recall compare them",
            self.location,
            updated,
            stored.model,
        )
        return migrated

    def _write_meta(self, rows: list[tuple[str, str]]) -> None:
        m = self.dialect.mark
        self._executemany(
            f"INSERT INTO kb_meta (key, value) VALUES ({m}, {m}) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            rows,
        )

    # -- the NoveltyMemory protocol ------------------------------------------------------------

    @property
    def dimensions(self) -> int:
        if self.identity is None:
            raise KnowledgeBaseError(
                f"{self.location}: holds no vectors yet and no embedder was given"
            )
        return self.identity.dimensions

    def nearest_then_add_many(
        self, vectors: FloatArray, ids: Sequence[str | None], admit: Admit | None = None
    ) -> list[Nearest | None]:
        """Each row's nearest stored trace (as the base stood just before it), then store the
        rows ``admit`` returns a :class:`StoredTrace` for (every row's id when ``admit`` is None
        is stored with an empty trace — use a Scorer for real rows). Atomic across processes.
        """
        return self.nearest_then_store_many(vectors, ids, admit).nearest

    def nearest_then_store_many(
        self, vectors: FloatArray, ids: Sequence[str | None], admit: Admit | None = None
    ) -> StoredBatch:
        """:meth:`nearest_then_add_many`, answering also which rows this call stored (an id
        another writer stored first is skipped, and not among them)."""
        batch = unit_rows(vectors, self.dimensions)
        n = batch.shape[0]
        if len(ids) != n:
            raise ValueError(f"got {len(ids)} ids for {n} vectors")
        with self._write():
            stored_nearest = [hits[0] if hits else None for hits in self._nearest(batch, 1)]
            found, chosen, to_store = admit_rows(batch, ids, stored_nearest, admit)
            # Under the write lock: no other writer stores one of these ids before the insert.
            held = self._held_ids([item.id for item in to_store])
            self._insert(to_store)
            due = self._index_due()
        if due:
            self._build_index()
        return StoredBatch(found, first_stored(chosen, to_store, held))

    def clear(self) -> None:
        """Remove every stored trace (the identity stays)."""
        with self._write():
            self._execute("DELETE FROM traces")
            self._forget_vectors()
            self._forget_copies()
            self._forget_texts()
            self._forget_openings()

    # -- reading -----------------------------------------------------------------------------

    def __len__(self) -> int:
        return int(self._value("SELECT COUNT(*) FROM traces"))

    def stored_records(self, ids: Iterable[str]) -> dict[str, ScoreRecord | None]:
        """The score records of the ``ids`` already stored (id -> record; None: stored without
        one, or with one that does not read, see :func:`~._base.read_score_record`)."""
        wanted = list(dict.fromkeys(ids))
        found: dict[str, ScoreRecord | None] = {}
        for start in range(0, len(wanted), _CHUNK):
            chunk = wanted[start : start + _CHUNK]
            marks = ",".join([self.dialect.mark] * len(chunk))
            rows = self._select(f"SELECT id, record FROM traces WHERE id IN ({marks})", chunk)
            for trace_id, record in rows:
                data = None if record is None else self.dialect.json_in(record)
                found[trace_id] = read_score_record(data, self.location, trace_id)
        return found

    def _held_ids(self, ids: Sequence[str]) -> set[str]:
        """The ``ids`` the base holds."""
        wanted = list(dict.fromkeys(ids))
        held: set[str] = set()
        for start in range(0, len(wanted), _CHUNK):
            chunk = wanted[start : start + _CHUNK]
            marks = ",".join([self.dialect.mark] * len(chunk))
            rows = self._select(f"SELECT id FROM traces WHERE id IN ({marks})", chunk)
            held.update(str(trace_id) for (trace_id,) in rows)
        return held

    def get(self, trace_id: str) -> StoredTrace | None:
        rows = self._select_stored(
            f"SELECT {self._stored_columns()} FROM traces WHERE id = {self.dialect.mark}",
            [trace_id],
        )
        return self._stored(rows[0]) if rows else None

    def iter_stored(self) -> Iterator[StoredTrace]:
        """Every stored trace, oldest first (read a page at a time)."""
        after = 0
        while True:
            rows = self._select_stored(
                f"SELECT seq, {self._stored_columns()} FROM traces "
                f"WHERE seq > {self.dialect.mark} ORDER BY seq LIMIT {_PAGE}",
                [after],
            )
            if not rows:
                return
            for row in rows:
                yield self._stored(row[1:])
            after = rows[-1][0]

    def search(self, vector: FloatArray, k: int = 10) -> list[Hit]:
        """The ``k`` stored traces most similar to ``vector``."""
        query = unit_rows(vector, self.dimensions)
        with self._reading():
            return [Hit(trace_id, sim) for trace_id, sim in self._nearest(query, k)[0]]

    def similar(self, trace_id: str, k: int = 10) -> list[Hit]:
        """The ``k`` stored traces most similar to the stored trace ``trace_id`` (not itself)."""
        stored = self.get(trace_id)
        if stored is None:
            raise KeyError(trace_id)
        return [hit for hit in self.search(stored.vector, k + 1) if hit.id != trace_id][:k]

    def stats(self) -> KnowledgeBaseStats:
        with self._reading():
            meta = self._meta()
            by_domain = self._select(
                "SELECT COALESCE(domain, '(none)'), COUNT(*) FROM traces GROUP BY domain "
                "ORDER BY COUNT(*) DESC, domain"
            )
            count, mean, last = self._select(
                "SELECT COUNT(*), AVG(value), MAX(added_at) FROM traces"
            )[0]
            index = self._search_kind(int(count))
        return KnowledgeBaseStats(
            location=self.location,
            traces=int(count),
            identity=self.identity,
            by_domain={str(k): int(v) for k, v in by_domain},
            mean_value=None if mean is None else float(mean),
            created_at=meta.get("created_at"),
            last_added_at=None if last is None else self.dialect.time_in(last),
            index=index,
        )

    def check(self) -> list[str]:
        """Problems found (empty: the base is sound)."""
        raise NotImplementedError

    # -- writing -----------------------------------------------------------------------------

    def add_many(self, items: Sequence[StoredTrace]) -> int:
        """Store traces as they are (``kp kb import``); ids already stored are skipped.
        Returns how many were added."""
        with self._write():
            added = self._insert(list(items))
            due = self._index_due()
        if due:
            self._build_index()
        return added

    def _insert(self, items: list[StoredTrace]) -> int:
        if not items:
            return 0
        d = self.dialect
        rows = [
            (
                item.id,
                d.json_out(item.trace),
                None if item.record is None else d.json_out(item.record.to_dict()),
                d.vector_out(item.vector),
                item.value,
                item.domain,
                item.visibility,
                item.owner,
                item.org,
                item.source,
                item.added_at,
            )
            for item in items
        ]
        added = self._executemany(d.insert_trace, rows)
        self._store_new_facets([(item.id, item.trace, item.copy_facet) for item in items])
        self._store_new_texts([item.id for item in items])
        self._store_new_openings(items)
        return added

    def _write_rows(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> int:
        with self._transaction():
            changed = 0
            for sql, params in statements:
                changed = self._execute(sql, params)
            return changed

    # -- closing -----------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self: _KB) -> _KB:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.location!r})"

    # -- rows --------------------------------------------------------------------------------

    def _stored_columns(self) -> str:
        return _STORED_COLUMNS.format(vector=self.dialect.vector_column)

    def _stored(self, row: Sequence[Any]) -> StoredTrace:
        trace_id, trace, record, vector, added_at, source, visibility, owner, org = row
        d = self.dialect
        return StoredTrace(
            id=trace_id,
            trace=d.json_in(trace),
            vector=d.vector_in(vector),
            record=read_score_record(
                None if record is None else d.json_in(record), self.location, trace_id
            ),
            added_at=d.time_in(added_at),
            source=source,
            visibility=visibility,
            owner=owner,
            org=org,
        )
