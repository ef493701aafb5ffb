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

What both backends share is in :mod:`._sql`; here are PostgreSQL's connection, its locking, the
server-side search and the HNSW index.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import numpy as np

from ._base import EmbeddingIdentity, FloatArray, KnowledgeBaseError
from ._dialect import Dialect
from ._fulltext import POSTGRES_TEXT
from ._index import ANN_THRESHOLD
from ._pgconnect import connect, first_line, redact, register_vector
from ._sql import SQLKnowledgeBase, new_meta_rows

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
_NEAREST = """
SELECT q.i, t.id, t.sim FROM unnest(%(queries)b::vector[]) WITH ORDINALITY AS q(v, i)
CROSS JOIN LATERAL (
    SELECT seq, id, -(embedding <#> q.v) AS sim FROM traces
    ORDER BY embedding <#> q.v {tiebreak} LIMIT %(k)s
) AS t
ORDER BY q.i, t.sim DESC, t.seq
"""


def _time_text(value: Any) -> str:
    if not isinstance(value, datetime):
        return str(value)
    return value.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _json(value: Any) -> Any:
    # json, not jsonb: the stored text is the trace as written (key order kept, \u0000
    # allowed), so an export gives back exactly what was added.
    from psycopg.types.json import Json

    return Json(value)


def _float32(vector: Any) -> FloatArray:
    return np.asarray(vector, dtype=np.float32)


POSTGRESQL = Dialect(
    mark="%s",
    like="ILIKE",
    objective_sql="trace->'task'->>'objective'",
    trace_id_sql="COALESCE(trace->>'id', id)",
    vector_column="embedding",
    insert_trace="INSERT INTO traces (id, trace, record, embedding, value, domain, visibility, "
    "owner, org, source, added_at) "
    "VALUES (%s, %s, %s, %b, %s, %s, %s, %s, %s, %s, %s::timestamptz) "
    "ON CONFLICT (id) DO NOTHING",
    json_out=_json,
    json_in=lambda value: value,  # psycopg reads json columns as Python values
    vector_out=_float32,
    vector_in=_float32,  # read as float32 arrays already (register_vector)
    time_in=_time_text,
    blob_type="bytea",
    # The JSON text of the value: a boolean's is true, a string's is "true".
    success_sql="(trace->'metadata'->'success')::text = 'true'",
)


class PostgresKnowledgeBase(SQLKnowledgeBase):
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

    dialect = POSTGRESQL
    text_engine = POSTGRES_TEXT
    _conn: psycopg.Connection[Any]

    def __init__(
        self,
        url: str,
        identity: EmbeddingIdentity | None = None,
        *,
        index: str = "auto",
        create: bool = True,
    ) -> None:
        super().__init__(redact(url), index)
        self._conn = connect(url, self.location)
        try:
            with self._errors():
                self.identity = self._open(identity, create)
                table = self._value("SELECT 'traces'::regclass::oid")
                self._write_key = _advisory_key(f"write:{table}")
                self._build_key = _advisory_key(f"build:{table}")
                self._rows = len(self)
                self._ann_ready = self._index_state() is True
                self._ef_search = 0
            wanted = index == "ann" or (index == "auto" and self._rows >= ANN_THRESHOLD)
            if wanted and self.identity is not None and not self._ann_ready:
                self._build_index()
        except BaseException:
            self._conn.close()
            raise

    # -- opening -----------------------------------------------------------------------------

    def _open(self, wanted: EmbeddingIdentity | None, create: bool) -> EmbeddingIdentity | None:
        """Check (or create) the tables and the identity, in one transaction that rolls back
        on refusal: a database that is not a knowledge base is left as it was."""
        with self._conn.transaction():
            schema = self._value("SELECT current_schema()")
            self._execute("SELECT pg_advisory_xact_lock(%s)", [_advisory_key(f"open:{schema}")])
            if self._value("SELECT to_regclass('kb_meta')") is None:
                if self._value(
                    "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()"
                ):
                    raise KnowledgeBaseError(
                        f"{self.location}: a PostgreSQL database but not a knowledge base "
                        "(no kb_meta table); nothing was changed"
                    )
                if not create:
                    raise KnowledgeBaseError(f"{self.location}: no such knowledge base")
                self._require_vector()
                self._conn.execute(_SCHEMA)
                self._write_meta(new_meta_rows())
            meta = self._meta()
            self._check_format(meta)
            self._require_vector()
            return self._check_identity(wanted, meta)

    def _require_vector(self) -> None:
        """Create the ``vector`` extension when missing, and read and write its values."""
        import psycopg

        if self._value("SELECT count(*) FROM pg_extension WHERE extname = 'vector'") == 0:
            try:
                with self._conn.transaction():  # a savepoint: a refusal is reported, not fatal
                    self._conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            except psycopg.Error as exc:
                raise KnowledgeBaseError(
                    f"{self.location}: needs the pgvector extension, which this database lacks: "
                    f"run CREATE EXTENSION vector in it as a superuser ({first_line(exc)})"
                ) from None
        register_vector(self._conn)

    def _first_identity(self, identity: EmbeddingIdentity) -> None:
        # The column takes its dimensions now: an HNSW index needs them.
        self._execute(
            f"ALTER TABLE traces ALTER COLUMN embedding TYPE vector({int(identity.dimensions)})"
        )

    # -- the backend's hooks -----------------------------------------------------------------

    def _select_stored(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        # Binary: vectors arrive as their float32 bits, not as text.
        with self._lock, self._errors(), self._conn.cursor(binary=True) as cursor:
            return cursor.execute(sql, list(params)).fetchall()

    def _executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> int:
        with self._conn.cursor() as cursor:
            cursor.executemany(sql, rows)
            return max(cursor.rowcount, 0)

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        with self._lock, self._errors(), self._conn.transaction():
            yield

    @contextmanager
    def _write(self) -> Iterator[None]:
        """One transaction holding the base's advisory write lock from its start."""
        with self._transaction():
            self._execute("SELECT pg_advisory_xact_lock(%s)", [self._write_key])
            yield

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """A lost connection or a server shutting down, as a one-line KnowledgeBaseError."""
        import psycopg

        try:
            yield
        except psycopg.OperationalError as exc:
            raise KnowledgeBaseError(f"{self.location}: {first_line(exc)}") from None

    def _forget_vectors(self) -> None:
        self._rows = 0

    def _search_kind(self, traces: int) -> str:
        self._rows = traces
        return "ann" if self._use_ann() else "exact"

    # -- nearest neighbours ------------------------------------------------------------------

    def _nearest(self, queries: FloatArray, k: int) -> list[list[tuple[str, float]]]:
        """One statement for the whole batch."""
        found: list[list[tuple[str, float]]] = [[] for _ in range(queries.shape[0])]
        if queries.shape[0] == 0:
            return found
        ann, ef_search = self._use_ann(), max(k, ANN_EF_SEARCH)
        if ann and ef_search > self._ef_search:
            self._conn.execute(f"SET hnsw.ef_search = {int(ef_search)}")
            self._ef_search = ef_search
        # With the tie-break the planner cannot use the HNSW index: an exact scan.
        sql = _NEAREST.format(tiebreak="" if ann else ", seq")
        rows = self._conn.execute(sql, {"queries": list(queries), "k": k}).fetchall()
        for i, trace_id, sim in rows:
            found[int(i) - 1].append((trace_id, float(sim)))
        return found

    def _use_ann(self) -> bool:
        if self._index_mode == "exact" or not self._ann_ready:
            return False
        return self._index_mode == "ann" or self._rows >= ANN_THRESHOLD

    def _index_due(self) -> bool:
        """Under ``auto``, whether the base has just reached the size for the HNSW index
        (counted inside the write transaction while it has not)."""
        if self._index_mode != "auto" or self._ann_ready or self.identity is None:
            return False
        self._rows = len(self)
        return self._rows >= ANN_THRESHOLD

    def _index_state(self) -> bool | None:
        """Whether the HNSW index is valid (None: there is none)."""
        state = self._select(
            "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)", [_ANN_INDEX]
        )
        return None if not state else bool(state[0][0])

    def _build_index(self) -> None:
        """Build the HNSW index without blocking the writers (one process builds it; the
        others, finding the build lock taken, go on with exact search meanwhile)."""
        conn = self._conn
        with self._lock, self._errors():
            if not self._value("SELECT pg_try_advisory_lock(%s)", [self._build_key]):
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

    # -- checking and closing ----------------------------------------------------------------

    def check(self) -> list[str]:
        """Problems found (empty: the base is sound): an HNSW index left invalid by an
        interrupted build, then every row's vector length and norm (PostgreSQL checks the JSON
        on the way in)."""
        problems: list[str] = []
        with self._reading():
            if self._index_state() is False:
                problems.append(
                    f"postgresql: the index {_ANN_INDEX} is invalid (an interrupted build); "
                    "it is rebuilt when the base is next opened with index='ann'"
                )
            dims = self.identity.dimensions if self.identity else None
            wrong_length = "" if dims is None else f"vector_dims(embedding) <> {dims} OR "
            rows = self._select(
                "SELECT id, vector_dims(embedding), vector_norm(embedding) FROM traces "
                f"WHERE {wrong_length}vector_norm(embedding) NOT BETWEEN 0.999 AND 1.001 "
                "ORDER BY seq"
            )
        for trace_id, got_dims, norm in rows:
            if dims is not None and got_dims != dims:
                problems.append(f"{trace_id}: vector of {got_dims} dimensions, not {dims}")
            else:
                problems.append(f"{trace_id}: vector norm {norm:.4f}, not 1")
        return problems


def _advisory_key(name: str) -> int:
    """A signed 64-bit advisory-lock key for ``name`` (stable across processes and hosts)."""
    digest = hashlib.blake2b(f"knowledgepulse.kb:{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)
