"""The embedded knowledge base: one SQLite file (stdlib ``sqlite3``, WAL).

Each row holds a trace's JSON, its score record and its vector; ``kb_meta`` holds the format
version and how the vectors were made. Writers take SQLite's write lock (``BEGIN IMMEDIATE``)
for a whole query-then-add, and first read the rows other writers added, so two processes
scoring near-duplicates at the same moment never both see the other as absent. A run killed
at any point leaves the file as of its last committed batch: WAL makes each commit atomic.

What both backends share is in :mod:`._sql`; here are SQLite's connection, its locking, the
in-memory vectors (:class:`~._index.VectorIndex`) and its checks.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from ._base import EmbeddingIdentity, FloatArray, KnowledgeBaseError
from ._dialect import Dialect
from ._facts import FACT_COLUMNS, RowFacts
from ._fulltext import FTS5, TextEngine
from ._index import ANN_THRESHOLD, VectorIndex
from ._keys import Viewer
from ._sql import SQLKnowledgeBase, new_meta_rows

__all__ = ["SQLiteKnowledgeBase"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS kb_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS traces (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    trace TEXT NOT NULL,
    record TEXT,
    vector BLOB NOT NULL,
    value REAL,
    domain TEXT,
    visibility TEXT NOT NULL DEFAULT 'network',
    owner TEXT,
    org TEXT,
    source TEXT,
    added_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS traces_domain ON traces (domain);
"""
#: How long a writer waits for another one's write lock before giving up.
BUSY_TIMEOUT_S = 60.0


def _bytes_vector(data: Any) -> FloatArray:
    return np.frombuffer(data, dtype="<f4").astype(np.float32)


SQLITE = Dialect(
    mark="?",
    like="LIKE",
    objective_sql="json_extract(trace, '$.task.objective')",
    trace_id_sql="COALESCE(json_extract(trace, '$.id'), id)",
    vector_column="vector",
    insert_trace="INSERT OR IGNORE INTO traces (id, trace, record, vector, value, domain, "
    "visibility, owner, org, source, added_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    json_out=partial(json.dumps, ensure_ascii=False, separators=(",", ":")),
    json_in=json.loads,
    vector_out=lambda vector: np.asarray(vector, dtype="<f4").tobytes(),
    vector_in=_bytes_vector,
    time_in=str,
)


class SQLiteKnowledgeBase(SQLKnowledgeBase):
    """A knowledge base in one SQLite file; a :class:`~knowledgepulse.NoveltyMemory`.

    Args:
        path: the file (created when missing, with its folder).
        identity: how the vectors to be stored are made; set on a new base, checked against
            an existing one (a mismatch raises :class:`KnowledgeBaseMismatchError`). ``None``
            opens any base for reading (stats, search by id, export).
        index: ``auto`` (exact search, ANN past 50,000 vectors), ``exact`` or ``ann``.
        create: create the file when it does not exist (else it is an error).
    """

    dialect = SQLITE
    text_engine = FTS5
    _conn: sqlite3.Connection

    def __init__(
        self,
        path: str | Path,
        identity: EmbeddingIdentity | None = None,
        *,
        index: str = "auto",
        create: bool = True,
    ) -> None:
        super().__init__(str(Path(path)), index)
        self.path = Path(path)
        if not self.path.exists():
            if not create:
                raise KnowledgeBaseError(f"{self.location}: no such knowledge base")
            self.path.parent.mkdir(parents=True, exist_ok=True)
            _create_private(self.path)
        elif self.path.is_dir():
            raise KnowledgeBaseError(f"{self.location}: is a directory, not a knowledge base")
        self._index: VectorIndex | None = None
        self._loaded_seq = 0
        self._facts: RowFacts | None = None
        self._conn = self._connect()
        try:
            meta = self._meta()
            self._check_format(meta)
            self.identity = self._check_identity(identity, meta)
        except BaseException:
            self._conn.close()
            raise

    # -- opening -----------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
            )
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
            tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        except sqlite3.DatabaseError as exc:
            raise KnowledgeBaseError(
                f"{self.location}: not a knowledge base ({exc}); nothing was changed"
            ) from None
        if tables and "kb_meta" not in tables:
            conn.close()
            raise KnowledgeBaseError(
                f"{self.location}: an SQLite file but not a knowledge base (no kb_meta table); "
                "nothing was changed"
            )
        if not tables:
            conn.executescript(_SCHEMA)
            with _transaction(conn):
                conn.executemany(
                    "INSERT OR IGNORE INTO kb_meta (key, value) VALUES (?, ?)", new_meta_rows()
                )
        return conn

    def _write_meta(self, rows: list[tuple[str, str]]) -> None:
        with self._write():
            super()._write_meta(rows)

    def _create_text_index(self, engine: TextEngine) -> str | None:
        # The stdlib's sqlite3 may be built without FTS5 (SQLITE_ENABLE_FTS5): recall is then
        # by vector alone, which the frame says once.
        try:
            return super()._create_text_index(engine)
        except sqlite3.OperationalError as exc:
            if "no such module" not in str(exc):
                raise
            return f"SQLite {sqlite3.sqlite_version} here lacks FTS5: {exc}"

    # -- the backend's hooks -----------------------------------------------------------------

    def _executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> int:
        before = self._conn.total_changes
        self._conn.executemany(sql, rows)
        return self._conn.total_changes - before

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """One write transaction holding SQLite's write lock from its start."""
        with self._lock, _transaction(self._conn, immediate=True):
            yield

    def _nearest(self, queries: FloatArray, k: int) -> list[list[tuple[str, float]]]:
        index = self._refresh()
        return [[(index.ids[p], sim) for p, sim in hits] for hits in index.nearest(queries, k)]

    def _forget_vectors(self) -> None:
        self._index = None
        self._loaded_seq = 0
        self._facts = None

    # -- recall's filters, in memory (see ._facts) -------------------------------------------

    def passing(
        self,
        ids: Sequence[str],
        viewer: Viewer | None = None,
        *,
        success_only: bool = False,
        domain: str | None = None,
        min_value: float | None = None,
    ) -> dict[str, tuple[float | None, bool]]:
        with self._reading():
            facts = self._refresh_facts()
            return facts.passing(ids, viewer, success_only, domain, min_value)

    def _text_hits(self, engine: TextEngine, match: str, width: int) -> list[tuple[Any, Any]]:
        # The index alone ranks; the rows are named from the facts (no join with traces).
        with self._reading():
            rows = self._conn.execute(engine.search_keys, (match, width)).fetchall()
            facts = self._refresh_facts()
        named = facts.id_of_seq
        return [(named[seq], rank) for seq, rank in rows if seq in named]

    def _refresh_facts(self) -> RowFacts:
        """The facts of the stored traces, extended with the rows added since the last look
        (under ``_reading``)."""
        if self._facts is None:
            self._facts = RowFacts()
        columns = FACT_COLUMNS.format(success=self.dialect.success_sql)
        cursor = self._conn.execute(
            f"SELECT seq, {columns} FROM traces WHERE seq > ? ORDER BY seq",
            (self._facts.last_seq,),
        )
        while rows := cursor.fetchmany(10_000):
            self._facts.extend(rows)
        return self._facts

    def _search_kind(self, traces: int) -> str:
        if self._index is not None:
            return self._index.kind
        mode = self._index_mode
        return "ann" if mode == "ann" or (mode == "auto" and traces >= ANN_THRESHOLD) else "exact"

    def _refresh(self) -> VectorIndex:
        """The in-memory vectors, extended with the rows added since the last look."""
        if self._index is None:
            self._index = VectorIndex(
                self.dimensions,
                mode=self._index_mode,
                ann_path=self.path.with_name(self.path.name + ".usearch"),
            )
            self._loaded_seq = 0
        cursor = self._conn.execute(
            "SELECT seq, id, vector FROM traces WHERE seq > ? ORDER BY seq", (self._loaded_seq,)
        )
        while rows := cursor.fetchmany(10_000):
            ids = [row[1] for row in rows]
            matrix = np.frombuffer(b"".join(row[2] for row in rows), dtype="<f4")
            self._index.extend(ids, matrix.reshape(len(rows), self.dimensions))
            self._loaded_seq = rows[-1][0]
        return self._index

    # -- checking and closing ----------------------------------------------------------------

    def check(self) -> list[str]:
        """Problems found (empty: the base is sound): SQLite's integrity check, then every
        row's vector length and norm and JSON."""
        problems = [
            f"sqlite: {row[0]}"
            for row in self._conn.execute("PRAGMA integrity_check")
            if row[0] != "ok"
        ]
        dims = self.identity.dimensions if self.identity else None
        for seq, trace_id, trace, vector in self._conn.execute(
            "SELECT seq, id, trace, vector FROM traces ORDER BY seq"
        ):
            if dims is not None and len(vector) != 4 * dims:
                problems.append(f"{trace_id}: vector of {len(vector) // 4} dimensions, not {dims}")
                continue
            norm = float(np.linalg.norm(np.frombuffer(vector, dtype="<f4")))
            if not 0.999 <= norm <= 1.001:
                problems.append(f"{trace_id}: vector norm {norm:.4f}, not 1")
            try:
                json.loads(trace)
            except ValueError:
                problems.append(f"{trace_id}: stored trace is not valid JSON (row {seq})")
        return problems

    def close(self) -> None:
        with self._lock:
            if self._index is not None:
                self._index.save_ann()
            super().close()


def _create_private(path: Path) -> None:
    """An empty file only its owner may read and write (0600): the base holds the traces and
    the API keys' hashes. SQLite gives its -wal and -shm files the same mode."""
    # FileExistsError: another process created it meanwhile; its mode is theirs to set.
    with suppress(FileExistsError):
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))


@contextmanager
def _transaction(conn: sqlite3.Connection, *, immediate: bool = False) -> Iterator[None]:
    conn.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
