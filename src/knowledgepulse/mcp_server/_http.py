"""The MCP server in ``kp serve`` at ``/mcp`` (streamable HTTP), behind the service's keys.

Every request to ``/mcp`` passes the same check as ``/v1``: a valid bearer key (401), the
key's rate limit (429); each tool then reads and writes for that key (its scope, its
visibility) through the service's engine, worker pool and request timeout, with the service's
redaction and limits. A session is bound to the key that opened it (the SDK answers 404 to
another key). The Host and Origin headers are checked against loopback names plus the
service's ``allowed_hosts`` (DNS-rebinding protection), so a server on a public address
answers only the names it is told.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ..kb import ApiKey
from ._memory import ToolProblem, TraceMemory
from ._server import build_server

__all__ = ["LOOPBACK_HOSTS", "mount_mcp", "transport_security"]

PATH = "/mcp"
#: Host header values always taken (any port).
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
_KEY = "knowledgepulse.key"


def transport_security(allowed_hosts: tuple[str, ...] = ()) -> TransportSecuritySettings:
    """Host and Origin checks: loopback names and ``allowed_hosts`` (``name`` takes any port,
    ``name:port`` that port only)."""
    hosts: list[str] = []
    origins: list[str] = []
    for host in (*LOOPBACK_HOSTS, *allowed_hosts):
        pattern = host if _has_port(host) else f"{host}:*"
        hosts.append(pattern)
        if not _has_port(host):
            hosts.append(host)  # the default port: no port in the header
        for scheme in ("http", "https"):
            origins.append(f"{scheme}://{pattern}")
            if not _has_port(host):
                origins.append(f"{scheme}://{host}")
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


def _has_port(host: str) -> bool:
    return host.rsplit("]", 1)[-1].count(":") == 1


def mount_mcp(app: Any, state: Any) -> None:
    """Serve the MCP server at ``/mcp`` of the service ``app`` (its :class:`ServiceState`
    ``state``): a route, and the session manager run in the application's lifespan."""
    memory = TraceMemory(state.engine, state.settings, state.redact)

    async def identify(ctx: Any) -> ApiKey:
        request = getattr(ctx, "request", None)
        key = None if request is None else request.scope.get(_KEY)
        if not isinstance(key, ApiKey):  # the guard lets nothing through without a key
            raise ToolProblem("an API key is needed: Authorization: Bearer KEY")
        return key

    async def work(key: ApiKey, function: Any, *args: Any) -> Any:
        # The key's share of the worker pool, as /v1 (a key's MCP calls cannot take the
        # threads another key's requests need); a cancelled call keeps its place until its
        # thread ends.
        try:
            return await state.work(key.id, function, *args)
        except TimeoutError:  # what /v1 answers 503
            limit = state.settings.request_timeout_s
            raise ToolProblem(f"the call took longer than {limit:g} s; try again") from None

    server = build_server(memory, identify, work)
    manager = StreamableHTTPSessionManager(
        app=server,
        security_settings=transport_security(tuple(state.settings.allowed_hosts)),
        max_request_body_size=state.settings.max_body_bytes,
    )
    app.router.routes.append(Route(PATH, endpoint=_KeyGuard(StreamableHTTPASGIApp(manager), state)))
    served = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(application: Any) -> AsyncIterator[Any]:
        async with manager.run(), served(application) as value:
            yield value

    app.router.lifespan_context = lifespan


class _KeyGuard:
    """The service's key check in front of the MCP transport."""

    def __init__(self, app: ASGIApp, state: Any) -> None:
        self._app = app
        self._require = state.keys.require("read")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            key: ApiKey = await self._require(Request(scope))
        except HTTPException as exc:
            body = json.dumps({"detail": exc.detail, "problems": []}).encode()
            headers = [(b"content-type", b"application/json")]
            headers += [(k.lower().encode(), v.encode()) for k, v in (exc.headers or {}).items()]
            await send(
                {"type": "http.response.start", "status": exc.status_code, "headers": headers}
            )
            await send({"type": "http.response.body", "body": body})
            return
        scope[_KEY] = key
        token = AccessToken(token="", client_id=key.id, scopes=[key.scope])
        scope["user"] = AuthenticatedUser(token)
        await self._app(scope, receive, send)
