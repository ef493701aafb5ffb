"""The application factory: one knowledge base, one embedder, the routes and the error answers."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request

from .. import __version__
from .._schema import format_path
from ..api_models import ErrorBody, GroupList, Problem, SearchRequest, trace_schemas
from ..api_models import components as model_components
from ..kb import KnowledgeBase, KnowledgeBaseError
from ._answers import LoopbackHosts, SecureAnswers, client_went_away
from ._bodies import RequestProblem
from ._engine import Engine
from ._limits import retry_after
from ._routes import router
from ._settings import DEFAULT_THRESHOLD, ServiceSettings
from ._source import KnowledgeBaseSource, OneKey, TraceSource
from ._state import ServiceState, Stopped, stop_point

__all__ = [
    "SOURCE_SETTINGS",
    "ServiceState",
    "Stopped",
    "create_app",
    "create_source_app",
    "stop_point",
]

DESCRIPTION = """Score, contribute, search and read agent reasoning traces in a shared knowledge base.

Every endpoint but `/healthz` needs `Authorization: Bearer KEY` (`kp keys create`): 401 without
a valid key, 403 for a scope too low (read < contribute < admin). A key sees the traces whose
`metadata.visibility` allows it (`network`: every key, `org`: its org, `private`: the key that
contributed it; an admin key sees all); a trace it may not see answers 404, like one that does
not exist.
"""


def create_app(
    kb: KnowledgeBase,
    embedder: Any,
    *,
    settings: ServiceSettings | None = None,
    threshold: float | None = None,
    close_kb: bool = False,
    viewer: bool = True,
) -> FastAPI:
    """The service as an ASGI application.

    Args:
        kb: an open knowledge base (:func:`knowledgepulse.kb.open_knowledge_base`, opened with
            the embedder's identity).
        embedder: the :class:`~knowledgepulse.embedding.Embedder` its vectors are made with.
        settings: the limits (default :class:`ServiceSettings`).
        threshold: the value a contribution must reach to be stored; stored in the base. None:
            the base's own, else :data:`DEFAULT_THRESHOLD`.
        close_kb: close the base when the application shuts down.
        viewer: serve the browser viewer at ``/`` (when :mod:`knowledgepulse.viewer` is
            installed).
    """
    from ..embedding import check_embedder

    embedder = check_embedder(embedder)
    if threshold is None:
        kept = kb.setting("threshold")
        threshold = float(kept) if kept is not None else DEFAULT_THRESHOLD
    elif kb.setting("threshold") != repr(float(threshold)):
        kb.set_setting("threshold", repr(float(threshold)))
    source = KnowledgeBaseSource(Engine(kb, embedder, float(threshold)))
    state = ServiceState(source, settings or ServiceSettings())
    app = _application(state, on_shutdown=kb.close if close_kb else None)
    _mount_mcp(app, state)
    _add_error_answers(app)
    _complete_openapi(app)
    if viewer:
        _mount_viewer(app)
    return app


#: A read-only source's limits: one user's browser, on loopback (the Host check on), whose
#: page asks for several answers at once (no rate limit).
SOURCE_SETTINGS = ServiceSettings(rate_per_s=0.0, loopback_hosts_only=True)


def create_source_app(
    source: TraceSource,
    *,
    api_key: str | None = None,
    settings: ServiceSettings | None = None,
    viewer: bool = True,
) -> FastAPI:
    """The same application over a read-only :class:`TraceSource` (``kp view``'s files).

    The routes, key check, Host check, security headers, error bodies and limits are those of
    :func:`create_app`; writes (``POST /v1/score``, ``/v1/traces``) answer 405 and ``/mcp`` is
    not mounted.

    Args:
        source: what ``/v1`` answers from (:class:`~knowledgepulse.service.FilesSource`).
        api_key: when set, every ``/v1`` request needs ``Authorization: Bearer <api_key>``
            (401 otherwise); None: every request reads.
        settings: the limits (default :data:`SOURCE_SETTINGS`).
        viewer: serve the browser viewer at ``/``.
    """
    keys = OneKey(api_key)
    state = ServiceState(
        source,
        settings or SOURCE_SETTINGS,
        key_store=keys,
        open_key=OneKey.OPEN if api_key is None else None,
    )
    app = _application(state, on_shutdown=None)
    _add_error_answers(app)
    _complete_openapi(app)
    if viewer:
        _mount_viewer(app)
    return app


def _application(state: ServiceState, *, on_shutdown: Callable[[], None] | None) -> FastAPI:
    """The FastAPI application over ``state``: the routes and what every answer carries."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        if on_shutdown is not None:
            on_shutdown()

    app = FastAPI(
        title="knowledgepulse",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
    )
    app.state.service = state
    app.include_router(router)
    pages = {app.docs_url, app.redoc_url, app.swagger_ui_oauth2_redirect_url}
    if state.settings.loopback_hosts_only:
        app.add_middleware(LoopbackHosts)
    app.add_middleware(
        SecureAnswers,
        pages={page for page in pages if page},
        discard_timeout_s=state.settings.read_timeout_s,
    )
    return app


def _mount_mcp(app: FastAPI, state: ServiceState) -> None:
    """The MCP server at ``/mcp`` (docs/mcp.md), when the ``mcp`` extra is installed."""
    try:
        from ..mcp_server import mount_mcp  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return
    mount_mcp(app, state)


def _mount_viewer(app: FastAPI) -> None:
    """The browser viewer at ``/`` (after the API routes: a mount there takes what they do
    not), when :mod:`knowledgepulse.viewer` is installed."""
    try:
        from ..viewer import mount_viewer  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return
    mount_viewer(app)


def _add_error_answers(app: FastAPI) -> None:
    """Every error as an :class:`ErrorBody`; a field that is wrong named by its path."""

    def answer(status: int, detail: str, problems: Any = (), headers: Any = None) -> JSONResponse:
        body = ErrorBody(
            detail=detail, problems=[Problem(path=p.path, message=p.message) for p in problems]
        )
        return JSONResponse(body.model_dump(), status_code=status, headers=headers)

    @app.exception_handler(HTTPException)
    async def http_error(_: Request, exc: HTTPException) -> JSONResponse:
        problems = exc.problems if isinstance(exc, RequestProblem) else ()
        return answer(exc.status_code, str(exc.detail), problems, exc.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [
            Problem(path=_parameter_path(error.get("loc", ())), message=str(error.get("msg", "")))
            for error in exc.errors()
        ]
        first = problems[0] if problems else Problem(path="", message="invalid request")
        return answer(422, f"{first.path}: {first.message}", problems)

    @app.exception_handler(KnowledgeBaseError)
    async def base_unavailable(_: Request, exc: KnowledgeBaseError) -> JSONResponse:
        return answer(503, f"the knowledge base is unavailable: {exc}", (), retry_after(5))

    app.add_exception_handler(ClientDisconnect, client_went_away)  # type: ignore[arg-type]

    @app.exception_handler(TimeoutError)
    async def timed_out(_: Request, exc: TimeoutError) -> JSONResponse:
        limit = app.state.service.settings.request_timeout_s
        return answer(503, f"the request took longer than {limit:g} s", (), retry_after(1))


def _parameter_path(location: Any) -> str:
    parts = list(location)
    if parts and parts[0] == "body":
        parts = parts[1:]
    return format_path(str(p) if not isinstance(p, int) else p for p in parts)


def _document_batch_limit(document: dict[str, Any], max_batch: int) -> None:
    """Every list of traces a route takes: at least one, at most ``max_batch``."""
    for path in ("/v1/score", "/v1/traces/batch"):
        body = document["paths"][path]["post"]["requestBody"]["content"]["application/json"]
        schema = body["schema"]
        for option in [schema, *schema.get("anyOf", [])]:
            if option.get("type") == "array":
                option.update(minItems=1, maxItems=max_batch)


def _complete_openapi(app: FastAPI) -> None:
    """The generated document, with the schemas of the bodies the routes read themselves and
    of kp view's ``GET /v1/groups`` answer (the service has no groups; the contract has)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
            )
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            components.update(trace_schemas())
            components["SearchRequest"] = SearchRequest.model_json_schema(
                ref_template="#/components/schemas/{model}"
            )
            components.update(model_components(GroupList))
            _document_batch_limit(schema, app.state.service.settings.max_batch)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
