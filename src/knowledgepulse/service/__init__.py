"""The knowledge base as a web service (``kp serve``): score, contribute, search and read traces.

:func:`create_app` builds the ASGI application (FastAPI) over an open knowledge base and an
embedder; :func:`create_source_app` builds the same application over a read-only
:class:`TraceSource` (``kp view``'s files). :func:`run_server` serves it on uvicorn until
SIGTERM, draining the requests in flight; :func:`server_in_thread` serves it in the background
(``kp view``, tests, benchmarks). The endpoints, the
keys and the limits are described in ``docs/service.md``. Needs the ``serve`` extra.
"""

from __future__ import annotations

from .._errors import MissingDependencyError

try:
    import fastapi  # noqa: F401
    import uvicorn  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise MissingDependencyError("kp serve", "serve", [exc.name or "fastapi"]) from None

from ._app import SOURCE_SETTINGS, create_app, create_source_app
from ._files import FilesSource
from ._server import run_server, server_in_thread
from ._settings import DEFAULT_THRESHOLD, ServiceSettings
from ._source import KnowledgeBaseSource, ListQuery, TraceSource

__all__ = [
    "DEFAULT_THRESHOLD",
    "SOURCE_SETTINGS",
    "FilesSource",
    "KnowledgeBaseSource",
    "ListQuery",
    "ServiceSettings",
    "TraceSource",
    "create_app",
    "create_source_app",
    "run_server",
    "server_in_thread",
]
