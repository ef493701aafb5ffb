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

import asyncio
import json
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..kb import ApiKey
from ..service._connections import streaming
from ..service._limits import read_body
from ._memory import ToolProblem, TraceMemory
from ._server import build_server

__all__ = ["LOOPBACK_HOSTS", "KeySessions", "mount_mcp", "transport_security"]

PATH = "/mcp"
#: Host header values always taken (any port).
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
_KEY = "knowledgepulse.key"
_SESSION_HEADER = "mcp-session-id"


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
    settings = state.settings
    manager = StreamableHTTPSessionManager(
        app=server,
        security_settings=transport_security(tuple(settings.allowed_hosts)),
        max_request_body_size=settings.max_body_bytes,
        session_idle_timeout=settings.mcp_session_idle_s,
    )
    sessions = KeySessions(
        manager, settings.mcp_sessions_per_key, settings.mcp_streams_per_key, settings.mcp_stream_s
    )
    guard = _KeyGuard(StreamableHTTPASGIApp(manager), state, sessions)
    app.router.routes.append(Route(PATH, endpoint=guard))
    served = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(application: Any) -> AsyncIterator[Any]:
        async with manager.run(), served(application) as value:
            yield value

    app.router.lifespan_context = lifespan
    app.state.mcp_sessions = sessions


class KeySessions:
    """Each key's MCP sessions (least recently used first) and GET streams (oldest first),
    within per-key caps: one key cannot hold the SDK's every session, nor every connection
    with streams, and past its cap it gives up its own oldest, never another key's.

    The SDK keeps the sessions (``StreamableHTTPSessionManager._server_instances``: the one
    place a session's transport is found by its id, mcp 2.x); this class only counts them per
    key and ends a session (``terminate``) or a stream (``close_standalone_sse_stream``)
    through the transport's public methods.
    """

    def __init__(
        self, manager: StreamableHTTPSessionManager, per_key: int, streams: int, stream_s: float
    ) -> None:
        self._manager = manager
        self.per_key = max(1, per_key)
        self.streams_per_key = max(1, streams)
        self.stream_s = stream_s
        self._sessions: dict[str, OrderedDict[str, None]] = {}
        self._streams: dict[str, OrderedDict[object, str]] = {}
        self.sessions_given_up = 0
        self.streams_given_up = 0

    def _transport(self, session_id: str) -> Any:
        return self._manager._server_instances.get(session_id)

    def count(self, key_id: str) -> int:
        return len(self._live(key_id))

    def _live(self, key_id: str) -> OrderedDict[str, None]:
        """The key's sessions the SDK still serves (one closed, idle or deleted is dropped)."""
        held = self._sessions.get(key_id)
        if held is None:
            return OrderedDict()
        for session_id in [s for s in held if self._transport(s) is None]:
            del held[session_id]
        if not held:
            del self._sessions[key_id]
        return held

    async def trim(self, key_id: str) -> None:
        """After ``key_id`` opened a session: close its least recently used ones past the cap."""
        held = self._live(key_id)
        while len(held) > self.per_key:
            session_id, _ = held.popitem(last=False)
            transport = self._transport(session_id)
            if transport is not None:
                self.sessions_given_up += 1
                await transport.terminate()

    def opened(self, key_id: str, session_id: str) -> None:
        self._sessions.setdefault(key_id, OrderedDict())[session_id] = None

    def used(self, key_id: str, session_id: str) -> None:
        held = self._sessions.get(key_id)
        if held is not None and session_id in held:
            held.move_to_end(session_id)

    def stream_opened(self, key_id: str, session_id: str) -> object:
        """A GET stream of ``key_id`` starts: its oldest ones past the cap are ended."""
        streams = self._streams.setdefault(key_id, OrderedDict())
        while len(streams) >= self.streams_per_key:
            _, oldest = streams.popitem(last=False)
            self._end_stream(oldest)
        handle = object()
        streams[handle] = session_id
        return handle

    def stream_closed(self, key_id: str, handle: object) -> None:
        streams = self._streams.get(key_id)
        if streams is not None:
            streams.pop(handle, None)
            if not streams:
                del self._streams[key_id]

    def _end_stream(self, session_id: str) -> None:
        transport = self._transport(session_id)
        if transport is not None:
            self.streams_given_up += 1
            transport.close_standalone_sse_stream()

    def owns(self, key_id: str, session_id: str) -> bool:
        return session_id in self._sessions.get(key_id, ())

    def end_later(self, session_id: str) -> asyncio.TimerHandle:
        """End the session's GET stream after :attr:`stream_s` (cancel the handle when the
        stream ends first)."""

        def end() -> None:
            transport = self._transport(session_id)
            if transport is not None:
                transport.close_standalone_sse_stream()

        return asyncio.get_running_loop().call_later(self.stream_s, end)


class _KeyGuard:
    """The service's key check in front of the MCP transport, and each key's caps on
    sessions and streams (:class:`KeySessions`)."""

    def __init__(self, app: ASGIApp, state: Any, sessions: KeySessions) -> None:
        self._app = app
        self._require = state.keys.require("read")
        self._max_body = state.settings.max_body_bytes
        self._read_s = state.settings.read_timeout_s
        self.sessions = sessions

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            key: ApiKey = await self._require(Request(scope))
            if scope.get("method") == "POST":
                # The body within the service's limits, as /v1 reads it: a keyed client that
                # sends its body a byte now and then is answered 408 and cut off, instead of
                # holding its connection (the SDK reads bodies without a deadline).
                body = await read_body(Request(scope, receive), self._max_body, self._read_s)
                receive = _replay(body, receive)
        except HTTPException as exc:
            await _refuse(exc, send)
            return
        scope[_KEY] = key
        token = AccessToken(token="", client_id=key.id, scopes=[key.scope])
        scope["user"] = AuthenticatedUser(token)
        session_id = Headers(scope=scope).get(_SESSION_HEADER)
        method = scope.get("method")
        if session_id is None:
            if method != "POST":
                await self._app(scope, receive, send)
                return
            try:  # it may open a session: its id is noted, then the key's oldest past the cap go
                await self._app(scope, receive, self._noting_session(key, send))
            finally:
                with anyio.CancelScope(shield=True):  # a client gone still leaves no excess
                    await self.sessions.trim(key.id)
            return
        self.sessions.used(key.id, session_id)
        if method != "GET" or not self.sessions.owns(key.id, session_id):
            await self._app(scope, receive, send)  # another key's session: the SDK's 404
            return
        handle = self.sessions.stream_opened(key.id, session_id)
        streaming(scope)  # the first to go when every connection is busy
        timer = self.sessions.end_later(session_id)
        try:
            await self._app(scope, receive, send)
        finally:
            timer.cancel()
            self.sessions.stream_closed(key.id, handle)

    def _noting_session(self, key: ApiKey, send: Send) -> Send:
        async def noting(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] < 400:
                opened = Headers(raw=message.get("headers", [])).get(_SESSION_HEADER)
                if opened:
                    self.sessions.opened(key.id, opened)
            await send(message)

        return noting


async def _refuse(exc: HTTPException, send: Send) -> None:
    """``exc`` answered as the service answers it (an ErrorBody, its headers)."""
    body = json.dumps({"detail": exc.detail, "problems": []}).encode()
    headers = [(b"content-type", b"application/json")]
    headers += [(k.lower().encode(), v.encode()) for k, v in (exc.headers or {}).items()]
    await send({"type": "http.response.start", "status": exc.status_code, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives the body read already, then waits as the client's does (for
    its disconnect)."""
    given = False

    async def replayed() -> Message:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed
