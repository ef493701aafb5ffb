"""Knowledge bases: novelty memory that persists, is shared, and stores the traces themselves.

:func:`open_knowledge_base` opens one by location: a file path for the embedded SQLite base,
a ``postgresql://`` URL for a PostgreSQL server with pgvector. Either is a
:class:`KnowledgeBase`, and so a :class:`~knowledgepulse.NoveltyMemory`: give it to a
:class:`~knowledgepulse.Scorer` as ``memory=`` and novelty is measured against everything
stored, and the traces that pass (``remember=``) are stored with their score records.
"""

from __future__ import annotations

from pathlib import Path

from ._base import (
    EmbeddingIdentity,
    Hit,
    KnowledgeBaseError,
    KnowledgeBaseMismatchError,
    KnowledgeBaseStats,
    StoredBatch,
    StoredTrace,
)
from ._keys import SCOPES, ApiKey, ListedTrace, TraceAccess, Viewer
from ._protocol import KnowledgeBase

__all__ = [
    "SCOPES",
    "ApiKey",
    "EmbeddingIdentity",
    "Hit",
    "KnowledgeBase",
    "KnowledgeBaseError",
    "KnowledgeBaseMismatchError",
    "KnowledgeBaseStats",
    "ListedTrace",
    "StoredBatch",
    "StoredTrace",
    "TraceAccess",
    "Viewer",
    "is_server_url",
    "open_knowledge_base",
]


def is_server_url(location: str | Path) -> bool:
    """Whether ``location`` is a PostgreSQL URL (anything else is a SQLite file)."""
    return str(location).startswith(("postgresql://", "postgres://"))


def open_knowledge_base(
    location: str | Path,
    identity: EmbeddingIdentity | None = None,
    *,
    index: str = "auto",
    create: bool = True,
) -> KnowledgeBase:
    """Open (or create) the knowledge base at ``location``.

    Args:
        location: a file path (SQLite) or a ``postgresql://user:password@host/db`` URL.
        identity: how the vectors to be stored are made (``EmbeddingIdentity.of(embedder)``):
            set on a new base, checked against an existing one. ``None`` opens for reading.
            A base made before the task facet (whole-trace vectors) opened with the identity
            of task vectors and their embedder (``EmbeddingIdentity.of(embedder)``) is
            migrated: every stored trace is embedded again by its task text, in one
            transaction, and the log says how many.
        index: vector search: ``auto`` (exact, ANN past 50,000 vectors), ``exact`` or ``ann``.
        create: create the base when it does not exist.

    Raises:
        KnowledgeBaseError: not a knowledge base, a newer format, a server that cannot be
            reached (the message names the location without its password).
        KnowledgeBaseMismatchError: the base's vectors were made another way.
    """
    if is_server_url(location):
        from ._postgres import PostgresKnowledgeBase

        return PostgresKnowledgeBase(str(location), identity, index=index, create=create)
    from ._sqlite import SQLiteKnowledgeBase

    return SQLiteKnowledgeBase(location, identity, index=index, create=create)
