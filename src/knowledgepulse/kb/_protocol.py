"""What every knowledge base is, whichever database holds it: the :class:`KnowledgeBase`
protocol, the type :func:`~knowledgepulse.kb.open_knowledge_base` returns and every caller
takes."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

from ..copies import CopyFacet, CopyMatch
from ..memory._cache import Admit, Nearest
from ..records import ScoreRecord
from ._base import (
    EmbeddingIdentity,
    FloatArray,
    Hit,
    KnowledgeBaseStats,
    StoredBatch,
    StoredTrace,
)
from ._keys import ApiKey, ListedTrace, TraceAccess, Viewer

__all__ = ["KnowledgeBase"]

_Self = TypeVar("_Self", bound="KnowledgeBase")


class KnowledgeBase(Protocol):
    """A persistent, shared :class:`~knowledgepulse.NoveltyMemory` that stores the traces
    themselves with their score records, and the API keys and settings of ``kp serve``.

    Opened by :func:`~knowledgepulse.kb.open_knowledge_base` (SQLite or PostgreSQL); closed
    by :meth:`close` or by leaving a ``with`` block.
    """

    @property
    def location(self) -> str:
        """Where the base is (a URL without its password)."""

    @property
    def identity(self) -> EmbeddingIdentity | None:
        """How its vectors are made (None: no vectors yet, and opened without an embedder)."""

    # -- the NoveltyMemory protocol ------------------------------------------------------------

    @property
    def dimensions(self) -> int:
        """The vectors' length (:class:`KnowledgeBaseError` when there is no identity)."""

    def nearest_then_add_many(
        self, vectors: FloatArray, ids: Sequence[str | None], admit: Admit | None = None
    ) -> list[Nearest | None]:
        """Each row's nearest stored trace, then store what ``admit`` returns; atomic across
        processes."""

    def nearest_then_store_many(
        self, vectors: FloatArray, ids: Sequence[str | None], admit: Admit | None = None
    ) -> StoredBatch:
        """``nearest_then_add_many``, answering also which rows this call stored (a row whose
        id the base held already is not stored again, and not among them)."""

    def clear(self) -> None:
        """Remove every stored trace (the identity stays)."""

    # -- reading and writing traces ------------------------------------------------------------

    def __len__(self) -> int: ...

    def stored_records(self, ids: Iterable[str]) -> dict[str, ScoreRecord | None]:
        """The score records of the ``ids`` already stored (id -> record; None: stored without
        one, or with one that does not read as a score record)."""

    def get(self, trace_id: str) -> StoredTrace | None: ...

    def iter_stored(self) -> Iterator[StoredTrace]:
        """Every stored trace, oldest first."""

    def search(self, vector: FloatArray, k: int = 10) -> list[Hit]:
        """The ``k`` stored traces most similar to ``vector``."""

    def similar(self, trace_id: str, k: int = 10) -> list[Hit]:
        """The ``k`` stored traces most similar to a stored one (not itself)."""

    def stats(self) -> KnowledgeBaseStats: ...

    def stored_copy(
        self,
        facet: CopyFacet,
        similarity: float,
        readable: Callable[[str], bool] | None = None,
    ) -> CopyMatch | None:
        """The stored trace ``facet``'s trace is a copy of (exact first, else the nearest
        near copy at estimated Jaccard ≥ ``similarity``), or None; ``readable`` filters the
        stored rows that count."""

    def stored_copies(
        self,
        facet: CopyFacet,
        similarity: float,
        k: int = 10,
        readable: Callable[[str], bool] | None = None,
    ) -> list[CopyMatch]:
        """Up to ``k`` stored copies: exact ones first, then near ones, most similar first."""

    def check(self) -> list[str]:
        """Problems found (empty: the base is sound)."""

    def add_many(self, items: Sequence[StoredTrace]) -> int:
        """Store traces as they are; ids already stored are skipped. How many were added."""

    # -- API keys, settings and reads for a viewer (``kp serve``) ------------------------------

    def create_api_key(self, name: str, scope: str, org: str | None = None) -> tuple[ApiKey, str]:
        """A new key and its secret form (shown once, stored hashed)."""

    def verify_api_key(self, key: str) -> ApiKey | None: ...

    def api_keys(self) -> list[ApiKey]: ...

    def revoke_api_key(self, name: str) -> bool: ...

    def setting(self, name: str) -> str | None: ...

    def set_setting(self, name: str, value: str) -> None: ...

    def access_of(self, ids: Iterable[str]) -> dict[str, TraceAccess]: ...

    def list_traces(
        self,
        viewer: Viewer | None,
        *,
        sort: str = "-added_at",
        domain: str | None = None,
        text: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> tuple[list[ListedTrace], int]: ...

    def visible_stats(self, viewer: Viewer | None) -> dict[str, Any]: ...

    def search_visible(self, vector: Any, k: int, viewer: Viewer | None) -> list[Hit]: ...

    # -- recall: full-text search and filters (``knowledgepulse.recall``) ----------------------

    @property
    def full_text(self) -> str | None:
        """The engine searching the stored tasks' words (None: the database has none)."""

    def search_text(
        self,
        terms: Sequence[str],
        k: int,
        viewer: Viewer | None = None,
        *,
        success_only: bool = False,
        domain: str | None = None,
        min_value: float | None = None,
    ) -> list[tuple[str, float]]:
        """Up to ``k`` (id, rank) of the visible, passing traces whose task holds any of
        ``terms``, best first."""

    def passing(
        self,
        ids: Sequence[str],
        viewer: Viewer | None = None,
        *,
        success_only: bool = False,
        domain: str | None = None,
        min_value: float | None = None,
    ) -> dict[str, tuple[float | None, bool]]:
        """Of ``ids``, the visible ones that pass the filters: id -> (value, succeeded)."""

    def opening_vectors(self, ids: Sequence[str], embedder: Any) -> dict[str, Any]:
        """The opening vectors of the stored traces of ``ids`` (made with ``embedder`` where
        missing, and stored)."""

    # -- closing -------------------------------------------------------------------------------

    def close(self) -> None: ...

    def __enter__(self: _Self) -> _Self: ...

    def __exit__(self, *_: object) -> None: ...
