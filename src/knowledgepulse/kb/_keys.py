"""API keys and who may see which trace: what both backends share.

A key is ``kp_<id>_<secret>``: the id finds the row, and only the SHA-256 of the whole key is
stored, compared in constant time. The secret is 256 random bits, so a plain hash is enough
(no slow KDF: nobody can guess a preimage of a 256-bit random string).

A trace's ``visibility`` (``metadata.visibility``) decides which keys see it: ``network`` every
key, ``org`` the keys of the contributor's org, ``private`` the contributing key; an ``admin``
key sees every trace. :func:`visibility_clause` is the same rule as SQL, so listing, counting
and search filter in the database.

Keys, scopes and visibility filtering are here for both backends, so that the service's
access rules are written once.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal, get_args

from ..records import ScoreRecord
from ._base import Hit, KnowledgeBaseError, read_score_record, utc_now

if TYPE_CHECKING:
    from ._dialect import Dialect

__all__ = [
    "KEY_PREFIX",
    "SCOPES",
    "SORTS",
    "AccessMixin",
    "ApiKey",
    "ListedTrace",
    "Scope",
    "TraceAccess",
    "Viewer",
    "hash_key",
    "key_id_of",
    "keys_match",
    "listing_query",
    "new_key",
    "scope_allows",
    "visibility_clause",
]

Scope = Literal["read", "contribute", "admin"]
#: The scopes, weakest first: each allows what the ones before it allow.
SCOPES: Final[tuple[str, ...]] = get_args(Scope)
KEY_PREFIX: Final = "kp_"
#: How ``GET /v1/traces`` may be sorted (a leading ``-``: descending).
SORTS: Final[tuple[str, ...]] = ("value", "-value", "added_at", "-added_at")

KEYS_TABLE_SQL: Final = """
CREATE TABLE IF NOT EXISTS api_keys (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    scope TEXT NOT NULL,
    org TEXT,
    hash TEXT NOT NULL,
    created_at TEXT NOT NULL,
    revoked_at TEXT
)
"""
KEY_COLUMNS: Final = "id, name, scope, org, created_at, revoked_at"
SETTING_PREFIX: Final = "setting."
#: The most candidates a search for a viewer looks through (the nearest of the whole base).
SEARCH_WINDOW: Final = 10_000


@dataclass(frozen=True, slots=True)
class ApiKey:
    """A stored API key (never its secret)."""

    id: str
    name: str
    scope: str
    org: str | None
    created_at: str
    revoked_at: str | None = None

    def allows(self, needed: str) -> bool:
        return scope_allows(self.scope, needed)

    @property
    def viewer(self) -> Viewer:
        return Viewer(key_id=self.id, org=self.org, sees_all=self.scope == "admin")


@dataclass(frozen=True, slots=True)
class Viewer:
    """Whose eyes a read is for: the key's id (the owner of what it contributed) and org."""

    key_id: str
    org: str | None = None
    sees_all: bool = False

    def can_see(self, access: TraceAccess) -> bool:
        if self.sees_all or access.visibility == "network" or access.owner == self.key_id:
            return True
        return access.visibility == "org" and self.org is not None and access.org == self.org


@dataclass(frozen=True, slots=True)
class TraceAccess:
    """What decides who sees a stored trace."""

    visibility: str
    owner: str | None
    org: str | None


@dataclass(frozen=True, slots=True)
class ListedTrace:
    """One row of a listing: the score record and what the viewer's table shows besides it."""

    id: str
    record: ScoreRecord | None
    added_at: str
    objective: str | None


def scope_allows(scope: str, needed: str) -> bool:
    """Whether a key of ``scope`` may do what needs ``needed`` (read < contribute < admin)."""
    return scope in SCOPES and SCOPES.index(scope) >= SCOPES.index(needed)


def new_key() -> tuple[str, str]:
    """A fresh key: ``(id, key)``; the key is shown once and only its hash is kept."""
    key_id = secrets.token_hex(6)
    return key_id, f"{KEY_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"


def key_id_of(key: str) -> str | None:
    """The id part of a key as sent, or None when it is not shaped like one."""
    if not key.startswith(KEY_PREFIX):
        return None
    key_id, sep, secret = key[len(KEY_PREFIX) :].partition("_")
    return key_id if sep and key_id and secret and len(key) <= 200 else None


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def keys_match(key: str, stored_hash: str) -> bool:
    """Constant-time: the time taken says nothing about how much of the hash matched."""
    return hmac.compare_digest(hash_key(key).encode(), stored_hash.encode())


def check_new_key(name: str, scope: str) -> None:
    if not name.strip():
        raise ValueError("a key needs a name")
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {', '.join(SCOPES)}; got {scope!r}")


def api_key_of(row: tuple[Any, ...]) -> ApiKey:
    key_id, name, scope, org, created_at, revoked_at = row
    return ApiKey(str(key_id), str(name), str(scope), org, str(created_at), revoked_at)


def visibility_clause(viewer: Viewer | None, mark: str) -> tuple[str, list[Any]]:
    """``viewer``'s rule as an SQL condition on ``traces`` and its parameters (``mark`` is the
    driver's placeholder, ``?`` or ``%s``). ``None`` or an admin: every trace."""
    if viewer is None or viewer.sees_all:
        return "TRUE", []
    return (
        f"(visibility = 'network' OR owner = {mark} OR (visibility = 'org' AND org = {mark}))",
        [viewer.key_id, viewer.org],
    )


def listing_query(
    viewer: Viewer | None,
    *,
    mark: str,
    objective_sql: str,
    like: str,
    trace_id_sql: str = "id",
    sort: str,
    domain: str | None,
    text: str | None,
) -> tuple[str, str, list[Any]]:
    """The WHERE and ORDER BY of a listing, and the WHERE's parameters.

    Args:
        viewer: whose listing it is (see :func:`visibility_clause`); None: every trace.
        mark: the driver's placeholder, ``?`` or ``%s``.
        objective_sql: the backend's expression for the trace's ``task.objective``.
        trace_id_sql: the backend's expression for the trace's own ``id``: the id as
            contributed, not the row's (which the service may have namespaced).
        like: the backend's case-insensitive LIKE (``LIKE`` in SQLite, ``ILIKE`` in PostgreSQL).
        sort: one of :data:`SORTS`.
        domain: only this ``task_domain``.
        text: only traces whose id or objective contains it (any case).
    """
    if sort not in SORTS:
        raise KnowledgeBaseError(f"sort must be one of {', '.join(SORTS)}; got {sort!r}")
    where, params = visibility_clause(viewer, mark)
    if domain is not None:
        where += f" AND domain = {mark}"
        params.append(domain)
    if text:
        pattern = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        where += (
            f" AND ({trace_id_sql} {like} {mark} ESCAPE '\\'"
            f" OR {objective_sql} {like} {mark} ESCAPE '\\')"
        )
        params += [pattern, pattern]
    column = sort.lstrip("-")
    direction = "DESC" if sort.startswith("-") else "ASC"
    # Ties (and traces without a value) in the order they were added, so pages never overlap.
    order = f"{column} {direction} NULLS LAST, seq {direction}"
    return where, order, params


class AccessMixin:
    """What the service adds to a backend: API keys, settings, and reads filtered by who looks.

    A backend provides the hooks (``_select``, ``_write_rows``) and its
    :class:`~._sql.Dialect` (placeholder, ``LIKE``, the objective's expression, how JSON and
    times are read); the SQL itself is shared.
    """

    dialect: ClassVar[Dialect]
    location: str
    _keys_ready = False

    # -- hooks -------------------------------------------------------------------------------

    def _select(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def _write_rows(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> int:
        """Run the statements in one transaction; the rows the last one changed."""
        raise NotImplementedError

    def search(self, vector: Any, k: int = 10) -> list[Hit]:
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError

    # -- API keys ----------------------------------------------------------------------------

    def create_api_key(self, name: str, scope: str, org: str | None = None) -> tuple[ApiKey, str]:
        """Store a new key; returns it and its secret form (shown once, stored hashed).

        Args:
            name: unique among this base's keys.
            scope: ``read``, ``contribute`` or ``admin``.
            org: the organisation whose ``org``-visible traces the key sees.

        Raises:
            ValueError: an empty name, an unknown scope, or a name already taken.
        """
        check_new_key(name, scope)
        self._ensure_keys()
        if self._select(f"SELECT id FROM api_keys WHERE name = {self.dialect.mark}", [name]):
            raise ValueError(f"a key named {name!r} exists already")
        key_id, key = new_key()
        created = utc_now()
        m = self.dialect.mark
        self._write_rows(
            [
                (
                    f"INSERT INTO api_keys (id, name, scope, org, hash, created_at) "
                    f"VALUES ({m}, {m}, {m}, {m}, {m}, {m})",
                    [key_id, name, scope, org, hash_key(key), created],
                )
            ]
        )
        return ApiKey(key_id, name, scope, org, created), key

    def verify_api_key(self, key: str) -> ApiKey | None:
        """The live key ``key`` is, or None (unknown, malformed or revoked)."""
        key_id = key_id_of(key)
        if key_id is None:
            return None
        self._ensure_keys()
        rows = self._select(
            f"SELECT {KEY_COLUMNS}, hash FROM api_keys WHERE id = {self.dialect.mark}", [key_id]
        )
        if not rows or not keys_match(key, str(rows[0][-1])):
            return None
        found = api_key_of(rows[0][:-1])
        return None if found.revoked_at is not None else found

    def api_keys(self) -> list[ApiKey]:
        """Every key, revoked ones included, oldest first."""
        self._ensure_keys()
        return [
            api_key_of(row)
            for row in self._select(f"SELECT {KEY_COLUMNS} FROM api_keys ORDER BY created_at, id")
        ]

    def revoke_api_key(self, name: str) -> bool:
        """Revoke the key named ``name``; False when there is no live key of that name."""
        self._ensure_keys()
        m = self.dialect.mark
        changed = self._write_rows(
            [
                (
                    f"UPDATE api_keys SET revoked_at = {m} WHERE name = {m} AND revoked_at IS NULL",
                    [utc_now(), name],
                )
            ]
        )
        return changed > 0

    def _ensure_keys(self) -> None:
        if not self._keys_ready:
            self._write_rows([(KEYS_TABLE_SQL, [])])
            self._keys_ready = True

    # -- settings ----------------------------------------------------------------------------

    def setting(self, name: str) -> str | None:
        """A setting kept in the base (``kb_meta``), such as the service's threshold."""
        rows = self._select(
            f"SELECT value FROM kb_meta WHERE key = {self.dialect.mark}", [SETTING_PREFIX + name]
        )
        return None if not rows else str(rows[0][0])

    def set_setting(self, name: str, value: str) -> None:
        m = self.dialect.mark
        self._write_rows(
            [
                (
                    f"INSERT INTO kb_meta (key, value) VALUES ({m}, {m}) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    [SETTING_PREFIX + name, value],
                )
            ]
        )

    # -- reads for a viewer ------------------------------------------------------------------

    def access_of(self, ids: Iterable[str]) -> dict[str, TraceAccess]:
        """Who may see each stored trace of ``ids`` (ids not stored are left out)."""
        wanted = list(dict.fromkeys(ids))
        found: dict[str, TraceAccess] = {}
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ",".join([self.dialect.mark] * len(chunk))
            for trace_id, visibility, owner, org in self._select(
                f"SELECT id, visibility, owner, org FROM traces WHERE id IN ({marks})", chunk
            ):
                found[str(trace_id)] = TraceAccess(str(visibility), owner, org)
        return found

    def list_traces(
        self,
        viewer: Viewer | None,
        *,
        sort: str = "-added_at",
        domain: str | None = None,
        text: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> tuple[list[ListedTrace], int]:
        """A page of the traces ``viewer`` may see, and how many there are in all.

        Args:
            viewer: whose reads (None: every trace).
            sort: ``value``, ``-value``, ``added_at`` or ``-added_at`` (``-``: descending).
            domain: only traces of this ``task_domain``.
            text: only traces whose id or objective contains it, in any case.
            limit: at most this many rows.
            offset: skip this many first.
        """
        where, order, params = listing_query(
            viewer,
            mark=self.dialect.mark,
            objective_sql=self.dialect.objective_sql,
            like=self.dialect.like,
            trace_id_sql=self.dialect.trace_id_sql,
            sort=sort,
            domain=domain,
            text=text,
        )
        total = int(self._select(f"SELECT COUNT(*) FROM traces WHERE {where}", params)[0][0])
        m = self.dialect.mark
        rows = self._select(
            f"SELECT id, record, added_at, {self.dialect.objective_sql} FROM traces WHERE {where} "
            f"ORDER BY {order} LIMIT {m} OFFSET {m}",
            [*params, int(limit), int(offset)],
        )
        items = [
            ListedTrace(
                id=str(trace_id),
                record=read_score_record(
                    None if record is None else self.dialect.json_in(record),
                    self.location,
                    str(trace_id),
                ),
                added_at=self.dialect.time_in(added_at),
                objective=None if objective is None else str(objective),
            )
            for trace_id, record, added_at, objective in rows
        ]
        return items, total

    def visible_stats(self, viewer: Viewer | None) -> dict[str, Any]:
        """Counts over the traces ``viewer`` may see: total, by domain, mean value, last added."""
        where, params = visibility_clause(viewer, self.dialect.mark)
        by_domain = self._select(
            f"SELECT COALESCE(domain, '(none)'), COUNT(*) FROM traces WHERE {where} "
            "GROUP BY domain ORDER BY COUNT(*) DESC, COALESCE(domain, '(none)')",
            params,
        )
        count, mean, last = self._select(
            f"SELECT COUNT(*), AVG(value), MAX(added_at) FROM traces WHERE {where}", params
        )[0]
        return {
            "traces": int(count),
            "by_domain": {str(name): int(n) for name, n in by_domain},
            "mean_value": None if mean is None else float(mean),
            "last_added_at": None if last is None else self.dialect.time_in(last),
        }

    def search_visible(self, vector: Any, k: int, viewer: Viewer | None) -> list[Hit]:
        """The ``k`` traces most similar to ``vector`` among those ``viewer`` may see.

        Searches wider (4×, up to :data:`SEARCH_WINDOW` candidates) until ``k`` visible ones
        are found, so traces the viewer may not see take no places among the ``k``; a viewer
        who sees few traces of a large base may get fewer than ``k`` (never another's).
        """
        total = len(self)
        width = k
        while True:
            hits = self.search(vector, max(1, min(width, total, SEARCH_WINDOW)))
            if viewer is not None and not viewer.sees_all:
                access = self.access_of(hit.id for hit in hits)
                hits = [hit for hit in hits if hit.id in access and viewer.can_see(access[hit.id])]
            if len(hits) >= k or width >= min(total, SEARCH_WINDOW):
                return hits[:k]
            width *= 4
