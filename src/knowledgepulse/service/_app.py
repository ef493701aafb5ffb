"""The application factory: one knowledge base, one embedder, the routes and the error answers."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from functools import partial
from typing import Any, TypeVar

import anyio
import anyio.to_thread
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
from ._answers import SecureAnswers, client_went_away
from ._auth import KeyCheck
from ._bodies import RequestProblem, load_redactor
from ._engine import Engine
from ._limits import RateLimiter, retry_after
from ._settings import DEFAULT_THRESHOLD, ServiceSettings

__all__ = ["ServiceState", "Stopped", "create_app", "stop_point"]

T = TypeVar("T")

DESCRIPTION = """Score, contribute, search and read agent reasoning traces in a shared knowledge base.

Every endpoint but `/healthz` needs `Authorization: Bearer KEY` (`kp keys create`): 401 without
a valid key, 403 for a scope too low (read < contribute < admin). A key sees the traces whose
`metadata.visibility` allows it (`network`: every key, `org`: its org, `private`: the key that
contributed it; an admin key sees all); a trace it may not see answers 404, like one that does
not exist.
"""


class Stopped(Exception):
    """The request this work was for has timed out: the work stops at its next stop point."""


_STOP: ContextVar[threading.Event | None] = ContextVar("knowledgepulse_stop", default=None)


def stop_point() -> None:
    """In work run by :meth:`ServiceState.work`: raise :class:`Stopped` once its request has
    timed out (a worker thread cannot be interrupted; long work calls this between parts)."""
    stop = _STOP.get()
    if stop is not None and stop.is_set():
        raise Stopped


class ServiceState:
    """What the routes share: the engine, the key check, the limits, the worker pools.

    Two pools: ``workers`` threads embed and score, each key holding at most
    ``settings.workers_per_key`` of them at once (its further requests wait their turn, within
    the request timeout); ``read_workers`` other threads answer the cheap reads, so that a
    flood of scoring never delays ``/healthz``, stats, listings or a trace.
    """

    def __init__(self, engine: Engine, settings: ServiceSettings) -> None:
        self.engine = engine
        self.settings = settings
        self.keys = KeyCheck(
            engine.kb,
            RateLimiter(settings.rate_per_s, settings.burst),
            settings.key_cache_s,
            failures=RateLimiter(settings.auth_failures_per_s, settings.auth_failure_burst),
        )
        self.redact, self.redaction = load_redactor()
        self._workers: anyio.CapacityLimiter | None = None
        self._readers: anyio.CapacityLimiter | None = None
        self._shares: dict[str, tuple[anyio.CapacityLimiter, int]] = {}  # key -> (share, users)

    async def run(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` in the worker pool, within the request timeout (then 503)."""
        return await self._in_thread([self._worker_pool()], function, *args)

    async def read(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` in the pool for cheap reads, within the request timeout."""
        if self._readers is None:
            self._readers = anyio.CapacityLimiter(self.settings.read_workers)
        return await self._in_thread([self._readers], function, *args)

    async def work(self, key_id: str, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` in the worker pool, within ``key_id``'s share of it and the
        request timeout; it stops at its next :func:`stop_point` when the request times out
        or is cancelled, and holds its place in the share and the pool until it has."""
        share, users = self._shares.get(key_id) or (
            anyio.CapacityLimiter(self.settings.workers_per_key),
            0,
        )
        self._shares[key_id] = (share, users + 1)

        def done() -> None:
            share, users = self._shares[key_id]
            if users > 1:
                self._shares[key_id] = (share, users - 1)
            else:  # no work of this key is running or waiting
                del self._shares[key_id]

        return await self._in_thread([share, self._worker_pool()], function, *args, done=done)

    def _worker_pool(self) -> anyio.CapacityLimiter:
        if self._workers is None:
            self._workers = anyio.CapacityLimiter(self.settings.workers)
        return self._workers

    async def _in_thread(
        self,
        places: list[anyio.CapacityLimiter],
        function: Callable[..., T],
        *args: Any,
        done: Callable[[], None] | None = None,
    ) -> T:
        """``function(*args)`` in a thread holding a place of each of ``places`` until the
        thread ends.

        A request that times out (or an MCP call that is cancelled) is answered at once, but
        its thread cannot be interrupted: it stops at its next :func:`stop_point`, and keeps
        its places until then, so abandoned work never lets more threads run than a pool or
        a key's share allows (work cancelled before its thread starts never starts).
        """
        stop = threading.Event()
        token = _STOP.set(stop)  # the worker thread runs in a copy of this context
        held = _Places(places, asyncio.get_running_loop(), done)
        try:
            with anyio.fail_after(self.settings.request_timeout_s):
                await held.take()
                return await anyio.to_thread.run_sync(
                    partial(held.run, function, *args), abandon_on_cancel=True
                )
        finally:
            stop.set()
            _STOP.reset(token)
            held.give_back_unless_running()


class _Places:
    """Places in capacity limiters (a key's share, a pool) held for one piece of work: given
    back by its thread when the work ends, or by the request when no thread runs it."""

    def __init__(
        self,
        limiters: list[anyio.CapacityLimiter],
        loop: asyncio.AbstractEventLoop,
        done: Callable[[], None] | None,
    ) -> None:
        self._limiters = limiters
        self._loop = loop
        self._done = done
        self._taken: list[anyio.CapacityLimiter] = []
        self._lock = threading.Lock()
        self._running = False
        self._given_back = False

    async def take(self) -> None:
        for limiter in self._limiters:
            await limiter.acquire_on_behalf_of(self)
            self._taken.append(limiter)

    def run(self, function: Callable[..., T], *args: Any) -> T:
        """In the worker thread: the work, unless its request gave up before it started."""
        with self._lock:
            if self._given_back:
                raise Stopped
            self._running = True
        try:
            return function(*args)
        finally:
            with self._lock:
                self._running = False
                self._given_back = True
            with contextlib.suppress(RuntimeError):  # the loop is closed: nothing to give
                self._loop.call_soon_threadsafe(self._give_back)

    def give_back_unless_running(self) -> None:
        """On the event loop, when the request ends: the places back, unless a thread runs
        the work (that thread gives them back when it ends)."""
        with self._lock:
            if self._running or self._given_back:
                return
            self._given_back = True
        self._give_back()

    def _give_back(self) -> None:
        for limiter in reversed(self._taken):
            limiter.release_on_behalf_of(self)
        self._taken.clear()
        if self._done is not None:
            self._done()


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
    from ._routes import router

    embedder = check_embedder(embedder)
    if threshold is None:
        kept = kb.setting("threshold")
        threshold = float(kept) if kept is not None else DEFAULT_THRESHOLD
    elif kb.setting("threshold") != repr(float(threshold)):
        kb.set_setting("threshold", repr(float(threshold)))
    state = ServiceState(Engine(kb, embedder, float(threshold)), settings or ServiceSettings())

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        if close_kb:
            kb.close()

    app = FastAPI(
        title="knowledgepulse",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
    )
    app.state.service = state
    app.include_router(router)
    pages = {app.docs_url, app.redoc_url, app.swagger_ui_oauth2_redirect_url}
    app.add_middleware(
        SecureAnswers,
        pages={page for page in pages if page},
        discard_timeout_s=state.settings.read_timeout_s,
    )
    _mount_mcp(app, state)
    _add_error_answers(app)
    _complete_openapi(app)
    if viewer:
        _mount_viewer(app)
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
