"""What every answer carries, and the answers the routes cannot give themselves.

- Security headers on every answer, as ``kp view`` sends them: a Content-Security-Policy
  without inline script, ``nosniff``, no framing, no referrer, and ``Cache-Control: no-store``
  (answers carry trace content and keys' views of it; no cache may keep them). The
  interactive API pages (``/docs``, ``/redoc``) load FastAPI's scripts from its CDN and start
  them with one inline script: their policy allows that CDN and that script alone, by hash.
- The body of a request answered before it was read (401, 403, 413, 429) is read and thrown
  away, up to ``DISCARD_BYTES`` and the body read timeout, before the answer is sent: a client
  that sends its whole body before reading (urllib) gets the answer, not a connection reset.
- A request cut off by the server (the ``--drain`` time ran out on SIGTERM) answers 503 with
  ``Retry-After``, not uvicorn's 500.
- A client that goes away in the middle of its body costs one log line, not a traceback.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import re
from typing import Any

import anyio
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from ._limits import DISCARD_BYTES

__all__ = ["SECURITY_HEADERS", "LoopbackHosts", "SecureAnswers", "client_went_away"]

# The server's own log (uvicorn configures its handler and level).
logger = logging.getLogger("uvicorn.error")

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
_RAW = [(name.lower().encode(), value.encode()) for name, value in SECURITY_HEADERS.items()]
_NAMES = {name for name, _ in _RAW}
_INLINE_SCRIPT = re.compile(rb"<script>(.*?)</script>", re.DOTALL)
_PAGE_SOURCES = "https://cdn.jsdelivr.net"
_PAGE_IMAGES = "https://fastapi.tiangolo.com"
DRAIN_RETRY_AFTER_S = 5


def _page_policy(body: bytes) -> str:
    hashes = " ".join(
        "'sha256-" + base64.b64encode(hashlib.sha256(script).digest()).decode() + "'"
        for script in _INLINE_SCRIPT.findall(body)
    )
    return (
        f"default-src 'none'; script-src {_PAGE_SOURCES} {hashes}; "
        f"style-src {_PAGE_SOURCES}; img-src {_PAGE_IMAGES} data:; connect-src 'self'; "
        "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    )


class SecureAnswers:
    """ASGI middleware: the security headers, and a 503 for a request the server cut off.

    Args:
        app: the application.
        pages: the paths of the API's HTML pages (``/docs``, ``/redoc``).
        discard_timeout_s: how long an unread body is read and thrown away at most.
    """

    def __init__(self, app: Any, pages: set[str], discard_timeout_s: float = 30.0) -> None:
        self.app = app
        self.pages = pages
        self.discard_timeout_s = discard_timeout_s

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False
        page = scope.get("path") in self.pages
        held: list[Any] = []
        headers = dict(scope.get("headers") or [])
        body_read = b"content-length" not in headers and b"transfer-encoding" not in headers

        async def tracked() -> Any:
            nonlocal body_read
            message = await receive()
            if message["type"] != "http.request" or not message.get("more_body", False):
                body_read = True
            return message

        async def secured(message: Any) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in _NAMES]
                closing = (b"connection", b"close") in [(k.lower(), v) for k, v in kept]
                if not body_read and not closing and not await self._discard(tracked):
                    kept.append((b"connection", b"close"))
                message = {**message, "headers": kept + _RAW}
                if page:
                    held.append(message)
                    return
            elif page and held:
                held.append(message)
                if message.get("more_body", False):
                    return
                await _send_page(send, held)
                return
            await send(message)

        try:
            await self.app(scope, tracked, secured)
        except asyncio.CancelledError:
            if started:
                raise
            # The server cancelled this request: its --drain time ran out. The client is told
            # to come back (to another replica, or this one restarted); not re-raised, since
            # the cancellation's purpose, ending this request, is done.
            await _send_drained(send)

    async def _discard(self, receive: Any) -> bool:
        """Read the rest of the body and throw it away; False when it is larger than
        :data:`DISCARD_BYTES` or slower than ``discard_timeout_s`` (the connection closes)."""
        size = 0
        with anyio.move_on_after(self.discard_timeout_s):
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    return False
                size += len(message.get("body", b""))
                if not message.get("more_body", False):
                    return True
                if size > DISCARD_BYTES:
                    return False
        return False


#: The ``Host`` names of a loopback address (``ServiceSettings.loopback_hosts_only``).
LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1"}


class LoopbackHosts:
    """ASGI middleware: 403 for a request whose ``Host`` names anything but a loopback name.

    A web page elsewhere could otherwise point its own host name at 127.0.0.1 (DNS rebinding)
    and read what a server on loopback answers.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and not _loopback_host(dict(scope.get("headers") or [])):
            body = json.dumps(
                {"detail": "this server answers localhost only", "problems": []}
            ).encode()
            headers = [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ]
            await send({"type": "http.response.start", "status": 403, "headers": headers})
            await send({"type": "http.response.body", "body": body, "more_body": False})
            return
        await self.app(scope, receive, send)


def _loopback_host(headers: dict[bytes, bytes]) -> bool:
    host = headers.get(b"host", b"").decode("latin-1")
    name = host if host.endswith("]") else host.rsplit(":", 1)[0]
    return name.strip("[]").lower() in LOOPBACK_NAMES


async def _send_page(send: Any, held: list[Any]) -> None:
    start, *bodies = held
    body = b"".join(message.get("body", b"") for message in bodies)
    headers = [
        (k, _page_policy(body).encode() if k == b"content-security-policy" else v)
        for k, v in start["headers"]
    ]
    await send({**start, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def _send_drained(send: Any) -> None:
    body = json.dumps(
        {
            "detail": "the server is shutting down and stopped this request; retry in "
            f"{DRAIN_RETRY_AFTER_S} s (a contribution is idempotent: post it again)",
            "problems": [],
        }
    ).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"retry-after", str(DRAIN_RETRY_AFTER_S).encode()),
        (b"connection", b"close"),
        *_RAW,
    ]
    try:
        await send({"type": "http.response.start", "status": 503, "headers": headers})
        await send({"type": "http.response.body", "body": body, "more_body": False})
    except Exception:  # the connection is gone too: nothing to tell
        logger.debug("could not answer a request cut off by the drain", exc_info=True)


async def client_went_away(request: Request, exc: ClientDisconnect) -> Response:
    """The exception handler for a client that disconnected while sending its body: one log
    line; the answer goes nowhere."""
    client = request.client
    who = f"{client.host}:{client.port}" if client else "a client"
    logger.warning(
        "%s disconnected while sending the body of %s %s", who, request.method, request.url.path
    )
    return Response(status_code=400)
