"""The embedded knowledge base: one SQLite file (stdlib ``sqlite3``, WAL).

Each row holds a trace's JSON, its score record and its vector; ``kb_meta`` holds the format
version and how the vectors were made. Writers take SQLite's write lock (``BEGIN IMMEDIATE``)
for a whole query-then-add, and first read the rows other writers added, so two processes
scoring near-duplicates at the same moment never both see the other as absent. A run killed
at any point leaves the file as of its last committed batch: WAL makes each commit atomic.

Why ~470 lines: one backend per module, so all of SQLite's SQL, locking and recovery is read in
one place; the PostgreSQL backend mirrors it method for method.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import numpy as np

from ..memory._cache import Admit, Nearest
from ._base import (
    FORMAT_NAME,
    FORMAT_VERSION,
    EmbeddingIdentity,
    FloatArray,
    Hit,
    KnowledgeBaseError,
    KnowledgeBaseMismatchError,
    KnowledgeBaseStats,
    StoredTrace,
    admit_rows,
    joined_identity,
    unit_rows,
    utc_now,
)
from ._index import VectorIndex
from ._keys import AccessMixin

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


class SQLiteKnowledgeBase(AccessMixin):
    """A knowledge base in one SQLite file; a :class:`~knowledgepulse.NoveltyMemory`.

    Args:
        path: the file (created when missing, with its folder).
        identity: how the vectors to be stored are made; set on a new base, checked against
            an existing one (a mismatch raises :class:`KnowledgeBaseMismatchError`). ``None``
            opens any base for reading (stats, search by id, export).
        index: ``auto`` (exact search, ANN past 50,000 vectors), ``exact`` or ``ann``.
        create: create the file when it does not exist (else it is an error).
    """

    def __init__(
        self,
        path: str | Path,
        identity: EmbeddingIdentity | None = None,
        *,
        index: str = "auto",
        create: bool = True,
    ) -> None:
        self.path = Path(path)
        self.location = str(self.path)
        if not self.path.exists():
            if not create:
                raise KnowledgeBaseError(f"{self.location}: no such knowledge base")
            self.path.parent.mkdir(parents=True, exist_ok=True)
            _create_private(self.path)
        elif self.path.is_dir():
            raise KnowledgeBaseError(f"{self.location}: is a directory, not a knowledge base")
        self._lock = threading.RLock()
        self._conn = self._connect()
        self.identity = self._check_identity(identity)
        self._index_mode = index
        self._index: VectorIndex | None = None
        self._loaded_seq = 0

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
                    "INSERT OR IGNORE INTO kb_meta (key, value) VALUES (?, ?)",
                    [
                        ("format", FORMAT_NAME),
                        ("version", str(FORMAT_VERSION)),
                        ("created_at", utc_now()),
                    ],
                )
        meta = dict(conn.execute("SELECT key, value FROM kb_meta"))
        if meta.get("format") != FORMAT_NAME:
            conn.close()
            raise KnowledgeBaseError(f"{self.location}: not a knowledge base; nothing was changed")
        version = int(meta.get("version", "0"))
        if version > FORMAT_VERSION:
            conn.close()
            raise KnowledgeBaseError(
                f"{self.location}: written by a newer knowledgepulse (format {version}, this "
                f"one reads up to {FORMAT_VERSION}); upgrade knowledgepulse to open it"
            )
        return conn

    def _meta(self) -> dict[str, str]:
        return dict(self._conn.execute("SELECT key, value FROM kb_meta"))

    def _check_identity(self, wanted: EmbeddingIdentity | None) -> EmbeddingIdentity | None:
        stored = EmbeddingIdentity.from_meta(self._meta())
        if wanted is None:
            return stored
        if stored is None:
            self._write_meta(wanted.meta_rows())
            return wanted
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

    def _write_meta(self, rows: list[tuple[str, str]]) -> None:
        with self._write():
            self._conn.executemany(
                "INSERT OR REPLACE INTO kb_meta (key, value) VALUES (?, ?)", rows
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
        batch = unit_rows(vectors, self.dimensions)
        n = batch.shape[0]
        if len(ids) != n:
            raise ValueError(f"got {len(ids)} ids for {n} vectors")
        with self._write():
            index = self._refresh()
            stored_nearest = [
                (index.ids[hits[0][0]], hits[0][1]) if hits else None
                for hits in index.nearest(batch, 1)
            ]
            found, to_store = admit_rows(batch, ids, stored_nearest, admit)
            self._insert(to_store)
        return found

    def clear(self) -> None:
        """Remove every stored trace (the identity stays)."""
        with self._write():
            self._conn.execute("DELETE FROM traces")
            self._index = None
            self._loaded_seq = 0

    # -- reading -----------------------------------------------------------------------------

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM traces").fetchone()[0])

    def stored_records(self, ids: Iterable[str]) -> dict[str, dict[str, Any] | None]:
        """The score records of the ``ids`` already stored (id -> record)."""
        wanted = list(dict.fromkeys(ids))
        found: dict[str, dict[str, Any] | None] = {}
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            # Under the lock: the connection is shared by threads, and a read must not see
            # another thread's write transaction half done.
            with self._lock:
                rows = self._conn.execute(
                    f"SELECT id, record FROM traces WHERE id IN ({marks})", chunk
                ).fetchall()
            for trace_id, record in rows:
                found[trace_id] = json.loads(record) if record else None
        return found

    def get(self, trace_id: str) -> StoredTrace | None:
        with self._lock:
            row = self._conn.execute(
                "SELECT id, trace, record, vector, added_at, source, visibility, owner, org "
                "FROM traces WHERE id = ?",
                (trace_id,),
            ).fetchone()
        return None if row is None else self._stored(row)

    def iter_stored(self) -> Iterator[StoredTrace]:
        """Every stored trace, oldest first."""
        cursor = self._conn.execute(
            "SELECT id, trace, record, vector, added_at, source, visibility, owner, org "
            "FROM traces ORDER BY seq"
        )
        for row in cursor:
            yield self._stored(row)

    def search(self, vector: FloatArray, k: int = 10) -> list[Hit]:
        """The ``k`` stored traces most similar to ``vector``."""
        with self._lock:
            index = self._refresh()
            query = unit_rows(vector, self.dimensions)
            return [Hit(index.ids[p], sim) for p, sim in index.nearest(query, k)[0]]

    def similar(self, trace_id: str, k: int = 10) -> list[Hit]:
        """The ``k`` stored traces most similar to the stored trace ``trace_id`` (not itself)."""
        stored = self.get(trace_id)
        if stored is None:
            raise KeyError(trace_id)
        return [hit for hit in self.search(stored.vector, k + 1) if hit.id != trace_id][:k]

    def stats(self) -> KnowledgeBaseStats:
        meta = self._meta()
        by_domain = dict(
            self._conn.execute(
                "SELECT COALESCE(domain, '(none)'), COUNT(*) FROM traces GROUP BY domain "
                "ORDER BY COUNT(*) DESC, domain"
            )
        )
        count, mean, last = self._conn.execute(
            "SELECT COUNT(*), AVG(value), MAX(added_at) FROM traces"
        ).fetchone()
        index = (
            self._index.kind
            if self._index is not None
            else (
                "ann"
                if self._index_mode == "ann" or (self._index_mode == "auto" and count >= 50_000)
                else "exact"
            )
        )
        return KnowledgeBaseStats(
            location=self.location,
            traces=int(count),
            identity=self.identity,
            by_domain={str(k): int(v) for k, v in by_domain.items()},
            mean_value=None if mean is None else float(mean),
            created_at=meta.get("created_at"),
            last_added_at=last,
            index=index,
        )

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

    # -- the access hooks (API keys, settings, reads for a viewer) ----------------------------

    def _select(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._conn.execute(sql, list(params)).fetchall()

    def _write_rows(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> int:
        with self._write():
            cursor = None
            for sql, params in statements:
                cursor = self._conn.execute(sql, list(params))
            return 0 if cursor is None else max(cursor.rowcount, 0)

    def _json_value(self, value: Any) -> Any:
        return json.loads(value)

    # -- writing -----------------------------------------------------------------------------

    def add_many(self, items: Sequence[StoredTrace]) -> int:
        """Store traces as they are (``kp kb import``); ids already stored are skipped.
        Returns how many were added."""
        with self._write():
            before = self._conn.total_changes
            self._insert(list(items))
            return self._conn.total_changes - before

    def _insert(self, items: list[StoredTrace]) -> None:
        if not items:
            return
        rows = [
            (
                item.id,
                json.dumps(item.trace, ensure_ascii=False, separators=(",", ":")),
                None
                if item.record is None
                else json.dumps(item.record, ensure_ascii=False, separators=(",", ":")),
                np.asarray(item.vector, dtype="<f4").tobytes(),
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
        self._conn.executemany(
            "INSERT OR IGNORE INTO traces (id, trace, record, vector, value, domain, visibility, "
            "owner, org, source, added_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )

    @contextmanager
    def _write(self) -> Iterator[None]:
        """One write transaction holding SQLite's write lock from its start."""
        with self._lock, _transaction(self._conn, immediate=True):
            yield

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

    def close(self) -> None:
        with self._lock:
            if self._index is not None:
                self._index.save_ann()
            self._conn.close()

    def __enter__(self) -> SQLiteKnowledgeBase:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SQLiteKnowledgeBase({self.location!r})"

    def _stored(self, row: tuple[Any, ...]) -> StoredTrace:
        trace_id, trace, record, vector, added_at, source, visibility, owner, org = row
        return StoredTrace(
            id=trace_id,
            trace=json.loads(trace),
            vector=np.frombuffer(vector, dtype="<f4").copy(),
            record=json.loads(record) if record else None,
            added_at=added_at,
            source=source,
            visibility=visibility,
            owner=owner,
            org=org,
        )


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
