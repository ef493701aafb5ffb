"""What the ``/v1`` read routes answer from: a knowledge base (``kp serve``) or files (``kp view``).

One application answers ``/v1`` for both commands, as datasette builds one ``Datasette`` for
every command: the routes, the key check, the Host check, the security headers, the error
bodies and the limits are the same; only the :class:`TraceSource` they read from differs.

- :class:`KnowledgeBaseSource`: the service's :class:`Engine` over an open base; it also takes
  contributions (``POST /v1/score``, ``/v1/traces``) and serves ``/mcp``.
- :class:`FilesSource` (``_files.py``): the score, eval, trace and groups files ``kp view``
  read, in memory; read-only (writes answer 405), and it answers the kp view-only routes
  (``GET /v1/groups``, ``GET /v1/runs/compare``) and fields (``api_models.VIEWER_ONLY``).
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel

from ..api_models import (
    VIEWER_ONLY,
    GroupList,
    KeyInfo,
    SearchHit,
    Stats,
    TraceDetail,
    TraceList,
)
from ..compare import EvaluationComparison, TraceComparison
from ..kb import ApiKey, Viewer, is_server_url
from ._bodies import RequestProblem, problem
from ._engine import Engine

__all__ = ["BASE_SORTS", "KnowledgeBaseSource", "ListQuery", "OneKey", "TraceSource"]


@dataclass(frozen=True)
class ListQuery:
    """``GET /v1/traces``'s parameters. ``sort`` None: the source's default; ``value_min`` and
    ``value_max`` are kp view's (a knowledge base ignores them, as it always has)."""

    sort: str | None = None
    domain: str | None = None
    text: str | None = None
    limit: int = 50
    offset: int = 0
    value_min: float | None = None
    value_max: float | None = None


class TraceSource(Protocol):
    """What the ``/v1`` routes read from. Each method runs in a worker thread.

    ``engine`` is the :class:`Engine` that scores and stores contributions, or None for a
    read-only source (its write routes answer 405).
    """

    @property
    def engine(self) -> Engine | None: ...

    def left_out(self, model: type[BaseModel]) -> set[str]:
        """The fields of ``model`` this source's answers leave out."""
        ...

    def listing(self, viewer: Viewer, query: ListQuery) -> TraceList: ...

    def detail(self, trace_id: str, viewer: Viewer) -> TraceDetail | None: ...

    def compare(self, a: str, b: str, viewer: Viewer, rubric: str | None) -> TraceComparison | str:
        """The two traces compared, or the first id that cannot be read (404)."""
        ...

    def search(
        self, text: str, k: int, viewer: Viewer, prefer: str
    ) -> tuple[list[SearchHit], str | None]:
        """The hits and why there are none; ValueError for a text that cannot be searched."""
        ...

    def stats(self, key: ApiKey) -> Stats: ...

    def groups(self) -> GroupList | None:
        """The curation groups; None: this source keeps none (404)."""
        ...

    def compare_runs(
        self, a: str | None, b: str | None, by: str | None
    ) -> EvaluationComparison | str | None:
        """Two files of eval lines compared, the first one not read (404), or None: this
        source keeps no runs (404)."""
        ...

    def health(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """What ``/healthz`` says of the store and the embedder: nothing about the contents."""
        ...

    def ping(self) -> None:
        """Raises when the store does not answer."""
        ...


#: The sorts a knowledge base lists by (``-``: descending).
BASE_SORTS = ("value", "-value", "added_at", "-added_at")


class KnowledgeBaseSource:
    """The knowledge base behind ``kp serve``, through its :class:`Engine`."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    @property
    def engine(self) -> Engine:
        return self._engine

    def left_out(self, model: type[BaseModel]) -> set[str]:
        return VIEWER_ONLY.get(model, set())

    def listing(self, viewer: Viewer, query: ListQuery) -> TraceList:
        sort = query.sort or "-added_at"
        if sort not in BASE_SORTS:
            message = f"expected one of {', '.join(BASE_SORTS)}"
            raise RequestProblem(f"sort: {message}", [problem("sort", message)])
        return self._engine.listing(
            viewer,
            sort=sort,
            domain=query.domain,
            text=query.text,
            limit=query.limit,
            offset=query.offset,
        )

    def detail(self, trace_id: str, viewer: Viewer) -> TraceDetail | None:
        return self._engine.detail(trace_id, viewer)

    def compare(self, a: str, b: str, viewer: Viewer, rubric: str | None) -> TraceComparison | str:
        return self._engine.compare(a, b, viewer, rubric)

    def search(
        self, text: str, k: int, viewer: Viewer, prefer: str
    ) -> tuple[list[SearchHit], str | None]:
        return self._engine.search(text, k, viewer, prefer)

    def stats(self, key: ApiKey) -> Stats:
        counts = self._engine.stats(key.viewer)
        return Stats(**counts, key=KeyInfo(name=key.name, scope=key.scope, team=key.org))

    def groups(self) -> GroupList | None:
        return None

    def compare_runs(
        self, a: str | None, b: str | None, by: str | None
    ) -> EvaluationComparison | str | None:
        return None

    def health(self) -> tuple[dict[str, Any], dict[str, Any]]:
        engine = self._engine
        embedder = {
            "name": str(getattr(engine.embedder, "name", type(engine.embedder).__name__)),
            "dimensions": int(engine.embedder.dimensions),
        }
        identity = engine.kb.identity
        base: dict[str, Any] = {
            "backend": "postgresql" if is_server_url(engine.kb.location) else "sqlite",
            "model": None if identity is None else identity.model,
            "threshold": engine.threshold,
        }
        return base, embedder

    def ping(self) -> None:
        """One small query: the base answers (raises otherwise)."""
        self._engine.kb.setting("threshold")


class OneKey:
    """The keys of a read-only source: one secret (``kp view --api-key-file``), checked in
    constant time, or none (every request reads as :data:`OPEN`)."""

    #: The key of every request when no secret is set, and of every request with it.
    OPEN = ApiKey(id="kp-view", name="kp view", scope="read", org=None, created_at="")

    def __init__(self, secret: str | None) -> None:
        self.secret = secret

    def verify_api_key(self, token: str) -> ApiKey | None:
        if self.secret is None:
            return self.OPEN
        return self.OPEN if hmac.compare_digest(token.encode(), self.secret.encode()) else None
