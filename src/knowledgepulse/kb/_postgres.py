"""The shared knowledge base: PostgreSQL with pgvector, for many processes on many hosts.

The tables mirror the SQLite base: ``kb_meta`` holds the format version and how the vectors
were made, ``traces`` one row per trace with its JSON, score record and ``vector(d)``.
Nearest-neighbour queries run on the server: one statement per batch, a LATERAL top-k per row.

Query-then-add is atomic across processes and hosts: each one runs in a transaction that first
takes a transaction-scoped advisory lock keyed on the ``traces`` table, so writers take turns
and each sees every row the previous one committed (two contributors of near-duplicates never
both see the other as absent). A writer killed mid-batch leaves nothing of that batch.

Which search answers (the ``index`` argument):

* ``exact`` — an exact scan (inner product on unit vectors; on equal similarity the older row
  first).
* ``ann`` — an HNSW index (``USING hnsw (embedding vector_ip_ops)``), built when the base is
  opened if missing.
* ``auto`` (the default) — exact below :data:`~knowledgepulse.kb._index.ANN_THRESHOLD`
  (50,000) traces; from there the writer whose batch crosses it builds the HNSW index
  (``CREATE INDEX CONCURRENTLY``: the other writers go on meanwhile), and queries use it once
  it is valid.

Why ~580 lines: one backend per module, so all of PostgreSQL's SQL, locking, HNSW index
management and connection errors is read in one place; it mirrors the SQLite backend method
for method.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

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
from ._index import ANN_THRESHOLD
from ._keys import AccessMixin
from ._pgconnect import connect, first_line, redact, register_vector

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresKnowledgeBase"]

_SCHEMA = """
CREATE TABLE kb_meta (key text PRIMARY KEY, value text NOT NULL);
CREATE TABLE traces (
    seq bigserial PRIMARY KEY,
    id text NOT NULL UNIQUE,
    trace json NOT NULL,
    record json,
    embedding vector NOT NULL,
    value double precision,
    domain text,
    visibility text NOT NULL DEFAULT 'network',
    owner text,
    org text,
    source text,
    added_at timestamptz NOT NULL
);
CREATE INDEX traces_domain ON traces (domain);
"""
_ANN_INDEX = "traces_embedding_hnsw"
#: Candidates the HNSW index visits per query (pgvector's ``hnsw.ef_search``; it returns at
#: most this many rows, so a larger ``k`` raises it for that query).
ANN_EF_SEARCH = 100
_COLUMNS = "id, trace, record, embedding, added_at, source, visibility, owner, org"
_NEAREST = """
SELECT q.i, t.id, t.sim FROM unnest(%(queries)b::vector[]) WITH ORDINALITY AS q(v, i)
CROSS JOIN LATERAL (
    SELECT seq, id, -(embedding <#> q.v) AS sim FROM traces
    ORDER BY embedding <#> q.v {tiebreak} LIMIT %(k)s
) AS t
ORDER BY q.i, t.sim DESC, t.seq
"""


class PostgresKnowledgeBase(AccessMixin):
    """A knowledge base in a PostgreSQL database with pgvector; a
    :class:`~knowledgepulse.NoveltyMemory` shared by every process that opens the same URL.

    Args:
        url: ``postgresql://user:password@host:port/database`` (libpq's URL: ``?host=/dir``
            for a Unix socket, ``?options=-csearch_path=kb`` for a schema of its own). The
            ``vector`` extension is created when missing (``CREATE EXTENSION vector`` needs
            a superuser or, for a trusted install, the database owner).
        identity: how the vectors to be stored are made; set on a new base, checked against
            an existing one (a mismatch raises :class:`KnowledgeBaseMismatchError`). ``None``
            opens any base for reading.
        index: ``auto`` (exact search, HNSW from 50,000 traces), ``exact`` or ``ann``.
        create: create the tables when the database (schema) is empty (else it is an error).

    A schema that holds other tables but no ``kb_meta`` is refused untouched, as is a base
    written by a newer knowledgepulse.
    """

    def __init__(
        self,
        url: str,
        identity: EmbeddingIdentity | None = None,
        *,
        index: str = "auto",
        create: bool = True,
    ) -> None:
        if index not in ("auto", "exact", "ann"):
            raise ValueError(f"index mode must be auto, exact or ann; got {index!r}")
        self.url = url
        self.location = redact(url)
        self._index_mode = index
        self._lock = threading.RLock()
        self._conn = connect(url, self.location)
        try:
            with self._server_errors():
                self.identity = self._open(identity, create)
                table = self._conn.execute("SELECT 'traces'::regclass::oid").fetchone()
                assert table is not None
                self._write_key = _advisory_key(f"write:{table[0]}")
                self._build_key = _advisory_key(f"build:{table[0]}")
                self._rows = len(self)
                self._ann_ready = self._index_state() is True
                self._ef_search = 0
            wanted = index == "ann" or (index == "auto" and self._rows >= ANN_THRESHOLD)
            if wanted and self.identity is not None and not self._ann_ready:
                self._build_ann()
        except BaseException:
            self._conn.close()
            raise

    # -- opening -----------------------------------------------------------------------------

    def _open(self, wanted: EmbeddingIdentity | None, create: bool) -> EmbeddingIdentity | None:
        """Check (or create) the tables and the identity, in one transaction that rolls back
        on refusal: a database that is not a knowledge base is left as it was."""
        conn = self._conn
        with conn.transaction():
            schema = _one(conn, "SELECT current_schema()")
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_advisory_key(f"open:{schema}"),))
            if _one(conn, "SELECT to_regclass('kb_meta')") is None:
                others = _one(
                    conn, "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()"
                )
                if others:
                    raise KnowledgeBaseError(
                        f"{self.location}: a PostgreSQL database but not a knowledge base "
                        "(no kb_meta table); nothing was changed"
                    )
                if not create:
                    raise KnowledgeBaseError(f"{self.location}: no such knowledge base")
                self._require_vector()
                conn.execute(_SCHEMA)
                with conn.cursor() as cursor:
                    cursor.executemany(
                        "INSERT INTO kb_meta (key, value) VALUES (%s, %s)",
                        [
                            ("format", FORMAT_NAME),
                            ("version", str(FORMAT_VERSION)),
                            ("created_at", utc_now()),
                        ],
                    )
            meta = self._meta()
            if meta.get("format") != FORMAT_NAME:
                raise KnowledgeBaseError(
                    f"{self.location}: not a knowledge base; nothing was changed"
                )
            version = int(meta.get("version", "0"))
            if version > FORMAT_VERSION:
                raise KnowledgeBaseError(
                    f"{self.location}: written by a newer knowledgepulse (format {version}, "
                    f"this one reads up to {FORMAT_VERSION}); upgrade knowledgepulse to open it"
                )
            self._require_vector()
            return self._check_identity(wanted, meta)

    def _require_vector(self) -> None:
        """Create the ``vector`` extension when missing, and read and write its values."""
        import psycopg

        if _one(self._conn, "SELECT count(*) FROM pg_extension WHERE extname = 'vector'") == 0:
            try:
                with self._conn.transaction():  # a savepoint: a refusal is reported, not fatal
                    self._conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            except psycopg.Error as exc:
                raise KnowledgeBaseError(
                    f"{self.location}: needs the pgvector extension, which this database lacks: "
                    f"run CREATE EXTENSION vector in it as a superuser ({first_line(exc)})"
                ) from None
        register_vector(self._conn)

    def _meta(self) -> dict[str, str]:
        return dict(self._conn.execute("SELECT key, value FROM kb_meta").fetchall())

    def _check_identity(
        self, wanted: EmbeddingIdentity | None, meta: dict[str, str]
    ) -> EmbeddingIdentity | None:
        stored = EmbeddingIdentity.from_meta(meta)
        if wanted is None:
            return stored
        if stored is None:
            self._write_meta(wanted.meta_rows())
            with self._conn.cursor() as cursor:
                # The column takes its dimensions now: an HNSW index needs them.
                cursor.execute(
                    f"ALTER TABLE traces ALTER COLUMN embedding TYPE vector({int(wanted.dimensions)})"
                )
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
        with self._conn.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO kb_meta (key, value) VALUES (%s, %s) "
                "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
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
        batch = unit_rows(vectors, self.dimensions)
        n = batch.shape[0]
        if len(ids) != n:
            raise ValueError(f"got {len(ids)} ids for {n} vectors")
        with self._write():
            stored_nearest = [hits[0] if hits else None for hits in self._nearest(batch, 1)]
            found, to_store = admit_rows(batch, ids, stored_nearest, admit)
            self._insert(to_store)
            crossed = self._count_towards_ann()
        if crossed:
            self._build_ann()
        return found

    def clear(self) -> None:
        """Remove every stored trace (the identity stays)."""
        with self._write():
            self._conn.execute("DELETE FROM traces")
            self._rows = 0

    # -- reading -----------------------------------------------------------------------------

    def __len__(self) -> int:
        with self._lock, self._server_errors():
            return int(_one(self._conn, "SELECT count(*) FROM traces"))

    def stored_records(self, ids: Iterable[str]) -> dict[str, dict[str, Any] | None]:
        """The score records of the ``ids`` already stored (id -> record)."""
        wanted = list(dict.fromkeys(ids))
        with self._lock, self._server_errors():
            rows = self._conn.execute(
                "SELECT id, record FROM traces WHERE id = ANY(%s)", (wanted,)
            ).fetchall()
        return {trace_id: record for trace_id, record in rows}

    def get(self, trace_id: str) -> StoredTrace | None:
        with self._lock, self._server_errors(), self._conn.cursor(binary=True) as cursor:
            row = cursor.execute(
                f"SELECT {_COLUMNS} FROM traces WHERE id = %s", (trace_id,)
            ).fetchone()
        return None if row is None else _stored(row)

    def iter_stored(self) -> Iterator[StoredTrace]:
        """Every stored trace, oldest first (read a page at a time)."""
        after = 0
        while True:
            with self._lock, self._server_errors(), self._conn.cursor(binary=True) as cursor:
                rows = cursor.execute(
                    f"SELECT seq, {_COLUMNS} FROM traces WHERE seq > %s ORDER BY seq LIMIT 1000",
                    (after,),
                ).fetchall()
            if not rows:
                return
            for row in rows:
                yield _stored(row[1:])
            after = rows[-1][0]

    def search(self, vector: FloatArray, k: int = 10) -> list[Hit]:
        """The ``k`` stored traces most similar to ``vector``."""
        query = unit_rows(vector, self.dimensions)
        with self._lock, self._server_errors():
            return [Hit(trace_id, sim) for trace_id, sim in self._nearest(query, k)[0]]

    def similar(self, trace_id: str, k: int = 10) -> list[Hit]:
        """The ``k`` stored traces most similar to the stored trace ``trace_id`` (not itself)."""
        stored = self.get(trace_id)
        if stored is None:
            raise KeyError(trace_id)
        return [hit for hit in self.search(stored.vector, k + 1) if hit.id != trace_id][:k]

    def stats(self) -> KnowledgeBaseStats:
        with self._lock, self._server_errors():
            meta = self._meta()
            by_domain = self._conn.execute(
                "SELECT COALESCE(domain, '(none)'), count(*) FROM traces GROUP BY domain "
                "ORDER BY count(*) DESC, domain"
            ).fetchall()
            count, mean, last = self._conn.execute(
                "SELECT count(*), avg(value), max(added_at) FROM traces"
            ).fetchone() or (0, None, None)
            self._rows = int(count)
        return KnowledgeBaseStats(
            location=self.location,
            traces=int(count),
            identity=self.identity,
            by_domain={str(k): int(v) for k, v in by_domain},
            mean_value=None if mean is None else float(mean),
            created_at=meta.get("created_at"),
            last_added_at=None if last is None else _iso(last),
            index="ann" if self._use_ann() else "exact",
        )

    def check(self) -> list[str]:
        """Problems found (empty: the base is sound): an HNSW index left invalid by an
        interrupted build, then every row's vector length and norm (PostgreSQL checks the JSON
        on the way in)."""
        problems: list[str] = []
        with self._lock, self._server_errors():
            if self._index_state() is False:
                problems.append(
                    f"postgresql: the index {_ANN_INDEX} is invalid (an interrupted build); "
                    "it is rebuilt when the base is next opened with index='ann'"
                )
            dims = self.identity.dimensions if self.identity else None
            wrong_length = "" if dims is None else f"vector_dims(embedding) <> {dims} OR "
            rows = self._conn.execute(
                "SELECT id, vector_dims(embedding), vector_norm(embedding) FROM traces "
                f"WHERE {wrong_length}vector_norm(embedding) NOT BETWEEN 0.999 AND 1.001 "
                "ORDER BY seq"
            ).fetchall()
        for trace_id, got_dims, norm in rows:
            if dims is not None and got_dims != dims:
                problems.append(f"{trace_id}: vector of {got_dims} dimensions, not {dims}")
            else:
                problems.append(f"{trace_id}: vector norm {norm:.4f}, not 1")
        return problems

    # -- the access hooks (API keys, settings, reads for a viewer) ----------------------------

    _mark = "%s"
    _like = "ILIKE"
    _objective_sql = "trace->'task'->>'objective'"
    _trace_id_sql = "COALESCE(trace->>'id', id)"

    def _select(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock, self._server_errors():
            return self._conn.execute(sql, list(params)).fetchall()

    def _write_rows(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> int:
        with self._lock, self._server_errors(), self._conn.transaction():
            changed = 0
            for sql, params in statements:
                changed = max(self._conn.execute(sql, list(params)).rowcount, 0)
            return changed

    def _text_time(self, value: Any) -> str:
        return _iso(value) if isinstance(value, datetime) else str(value)

    # -- writing -----------------------------------------------------------------------------

    def add_many(self, items: Sequence[StoredTrace]) -> int:
        """Store traces as they are (``kp kb import``); ids already stored are skipped.
        Returns how many were added."""
        with self._write():
            added = self._insert(list(items))
            crossed = self._count_towards_ann()
        if crossed:
            self._build_ann()
        return added

    def _insert(self, items: list[StoredTrace]) -> int:
        if not items:
            return 0
        # json, not jsonb: the stored text is the trace as written (key order kept, \u0000
        # allowed), so an export gives back exactly what was added.
        from psycopg.types.json import Json

        rows = [
            (
                item.id,
                Json(item.trace),
                None if item.record is None else Json(item.record),
                np.asarray(item.vector, dtype=np.float32),
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
        with self._conn.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO traces (id, trace, record, embedding, value, domain, visibility, "
                "owner, org, source, added_at) "
                "VALUES (%s, %s, %s, %b, %s, %s, %s, %s, %s, %s, %s::timestamptz) "
                "ON CONFLICT (id) DO NOTHING",
                rows,
            )
            return max(cursor.rowcount, 0)

    @contextmanager
    def _write(self) -> Iterator[None]:
        """One transaction holding the base's advisory write lock from its start."""
        with self._lock, self._server_errors(), self._conn.transaction():
            self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._write_key,))
            yield

    @contextmanager
    def _server_errors(self) -> Iterator[None]:
        """A lost connection or a server shutting down, as a one-line KnowledgeBaseError."""
        import psycopg

        try:
            yield
        except psycopg.OperationalError as exc:
            raise KnowledgeBaseError(f"{self.location}: {first_line(exc)}") from None

    # -- nearest neighbours ------------------------------------------------------------------

    def _nearest(self, queries: FloatArray, k: int) -> list[list[tuple[str, float]]]:
        """For each query row, up to ``k`` (id, cosine) pairs, most similar first: one
        statement for the whole batch."""
        found: list[list[tuple[str, float]]] = [[] for _ in range(queries.shape[0])]
        if queries.shape[0] == 0:
            return found
        ann = self._use_ann()
        if ann and k > max(self._ef_search, ANN_EF_SEARCH):
            self._set_ef_search(k)
        elif ann and self._ef_search == 0:
            self._set_ef_search(ANN_EF_SEARCH)
        # With the tie-break the planner cannot use the HNSW index: an exact scan.
        sql = _NEAREST.format(tiebreak="" if ann else ", seq")
        rows = self._conn.execute(sql, {"queries": list(queries), "k": k}).fetchall()
        for i, trace_id, sim in rows:
            found[int(i) - 1].append((trace_id, float(sim)))
        return found

    def _set_ef_search(self, value: int) -> None:
        self._conn.execute(f"SET hnsw.ef_search = {int(value)}")
        self._ef_search = value

    def _use_ann(self) -> bool:
        if self._index_mode == "exact" or not self._ann_ready:
            return False
        return self._index_mode == "ann" or self._rows >= ANN_THRESHOLD

    def _count_towards_ann(self) -> bool:
        """Under ``auto``, whether the base has just reached the size for the HNSW index
        (counted inside the write transaction while it has not)."""
        if self._index_mode != "auto" or self._ann_ready or self.identity is None:
            return False
        self._rows = int(_one(self._conn, "SELECT count(*) FROM traces"))
        return self._rows >= ANN_THRESHOLD

    def _index_state(self) -> bool | None:
        """Whether the HNSW index is valid (None: there is none)."""
        row = self._conn.execute(
            "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)", (_ANN_INDEX,)
        ).fetchone()
        return None if row is None else bool(row[0])

    def _build_ann(self) -> None:
        """Build the HNSW index without blocking the writers (one process builds it; the
        others, finding the build lock taken, go on with exact search meanwhile)."""
        conn = self._conn
        with self._lock, self._server_errors():
            if not _one(conn, "SELECT pg_try_advisory_lock(%s)", (self._build_key,)):
                return
            try:
                state = self._index_state()
                if state is False:  # left by an interrupted build
                    conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {_ANN_INDEX}")
                if state is not True:
                    # The graph is built in memory when it fits: far faster than on disk.
                    conn.execute("SET maintenance_work_mem = '512MB'")
                    conn.execute(
                        f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {_ANN_INDEX} "
                        "ON traces USING hnsw (embedding vector_ip_ops)"
                    )
                    conn.execute("RESET maintenance_work_mem")
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (self._build_key,))
            self._ann_ready = self._index_state() is True

    # -- closing -----------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> PostgresKnowledgeBase:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PostgresKnowledgeBase({self.location!r})"


def _one(conn: psycopg.Connection[Any], sql: str, params: tuple[Any, ...] = ()) -> Any:
    row = conn.execute(sql, params).fetchone()
    return None if row is None else row[0]


def _advisory_key(name: str) -> int:
    """A signed 64-bit advisory-lock key for ``name`` (stable across processes and hosts)."""
    digest = hashlib.blake2b(f"knowledgepulse.kb:{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def _iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _stored(row: Sequence[Any]) -> StoredTrace:
    trace_id, trace, record, vector, added_at, source, visibility, owner, org = row
    return StoredTrace(
        id=trace_id,
        trace=trace,
        vector=vector,
        record=record,
        added_at=_iso(added_at),
        source=source,
        visibility=visibility,
        owner=owner,
        org=org,
    )
