"""Connections a client without a key cannot exhaust.

uvicorn, as configured, closes nothing a client leaves open: a connection that sends no
request, or one header line now and then, stays open for ever, and so does a keep-alive
connection whose client keeps sending the body of a request answered early (401, 413). Under
the process's open-file limit such connections stop every other client, and asyncio's accept
loop then logs ``Too many open files`` as fast as it can. This module adds three guards to
uvicorn's HTTP/1.1 protocol (h11) and one to its event loop:

- a header deadline: from accept, and again from the end of each answer, the next request's
  headers must arrive within ``header_timeout_s``; more bytes (a header line, the rest of an
  early-answered body) do not extend it. Once a request has shown a valid key
  (:data:`HOLD`, called by the key check), the application's own limits apply instead (the
  body read timeout, the request timeout);
- a connection cap below the open-file limit: past it, a new connection closes the connection
  that has waited longest without a keyed request in progress, so a real client always gets
  in (an attacker must open ``max_connections`` connections faster than a client sends its
  headers); when none is waiting, the oldest long-lived stream (:data:`STREAM`, an MCP GET
  stream) is given up instead, so held streams cannot take every connection;
- accept errors (``EMFILE`` and the like) logged once per ``interval_s`` with a count.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = [
    "HOLD",
    "STREAM",
    "AcceptErrorLog",
    "ConnectionGuard",
    "connection_cap",
    "guarded_protocol",
    "hold",
    "streaming",
]

#: The ASGI scope key of a callable that lets a request's connection outlive the header
#: deadline and the eviction of idle connections (the request has a valid key).
HOLD = "knowledgepulse.hold"


#: The ASGI scope key of a callable that marks a held request's connection as a stream that
#: may last for ever (an MCP GET stream): when every connection is busy, the oldest stream is
#: given up to let a new connection in.
STREAM = "knowledgepulse.stream"


def hold(scope: Any) -> None:
    """Keep the connection of the request of ``scope`` open while it is answered."""
    keep = scope.get(HOLD)
    if keep is not None:
        keep()


def streaming(scope: Any) -> None:
    """The request of ``scope`` (held) is a long-lived stream: the first to go when full."""
    mark = scope.get(STREAM)
    if mark is not None:
        mark()


# The server's own log (uvicorn configures its handler and level).
logger = logging.getLogger("uvicorn.error")

_RESOURCE_ERRNOS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


def connection_cap(configured: int) -> int:
    """``configured``, lowered to leave a quarter of the open-file limit (at least 32 files)
    to the base, the model and the logs: connections alone never exhaust it."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not on Windows
        return configured
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return configured
    return max(8, min(configured, soft - max(32, soft // 4)))


class ConnectionGuard:
    """The open connections of one server, those without a request in progress oldest first.

    Args:
        max_connections: the most connections open at once.
        header_timeout_s: how long a connection may wait for a request's headers.
    """

    def __init__(self, max_connections: int, header_timeout_s: float) -> None:
        self.max_connections = max(1, max_connections)
        self.header_timeout_s = header_timeout_s
        self._open: set[Any] = set()
        self._waiting: OrderedDict[Any, None] = OrderedDict()  # no request in progress
        self._streams: OrderedDict[Any, None] = OrderedDict()  # long-lived answers, oldest first
        self.evicted = 0
        self.streams_given_up = 0
        self.timed_out = 0
        self._report = _Throttle(10.0)

    def opened(self, connection: Any) -> bool:
        """Count a new connection; False when it must close at once (every other one is
        answering a request and the cap is reached)."""
        self._open.add(connection)
        self._waiting[connection] = None
        while len(self._open) > self.max_connections:
            oldest = next((c for c in self._waiting if c is not connection), None)
            if oldest is None and self._streams:
                stream = next(iter(self._streams))
                self.streams_given_up += 1
                self._report(
                    "%d connections are answering requests (the cap): giving up the oldest "
                    "stream to let a new one in",
                    len(self._open) - 1,
                )
                self.closed(stream)
                stream.close_now()
                continue
            if oldest is None:
                self._report(
                    "%d connections are answering requests (the cap): a new one was closed",
                    len(self._open) - 1,
                )
                self.closed(connection)
                return False
            self.evicted += 1
            self._report(
                "%d connections open (the cap): closing the longest idle to let new ones in",
                self.max_connections,
            )
            self.closed(oldest)
            oldest.close_now()
        return True

    def busy(self, connection: Any) -> None:
        self._waiting.pop(connection, None)

    def stream(self, connection: Any) -> None:
        if connection in self._open:
            self._streams[connection] = None

    def waiting(self, connection: Any) -> None:
        self._streams.pop(connection, None)
        if connection in self._open:
            self._waiting[connection] = None
            self._waiting.move_to_end(connection)

    def closed(self, connection: Any) -> None:
        self._open.discard(connection)
        self._waiting.pop(connection, None)
        self._streams.pop(connection, None)

    def __len__(self) -> int:
        return len(self._open)


class _GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a header deadline and a place in a :class:`ConnectionGuard`."""

    guard: ConnectionGuard

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._deadline: asyncio.TimerHandle | None = None
        self._answering = False
        self._held = False
        if not self.guard.opened(self):
            self.close_now()
            return
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self.guard.closed(self)
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._follow()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow()

    def _follow(self) -> None:
        """Start or stop the deadline when a request starts or its answer ends."""
        answering = self.cycle is not None and not self.cycle.response_complete
        if answering == self._answering or self.transport.is_closing():
            return
        self._answering = answering
        if answering:
            self.scope[HOLD] = self._hold  # type: ignore[literal-required]
            self.scope[STREAM] = self._stream  # type: ignore[literal-required]
        else:
            self._held = False
            self.guard.waiting(self)
            self._arm()

    def _hold(self) -> None:
        if self._answering and not self.transport.is_closing():
            self._held = True
            self._disarm()
            self.guard.busy(self)

    def _stream(self) -> None:
        if self._held and not self.transport.is_closing():
            self.guard.stream(self)

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.guard.header_timeout_s, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if not self._held:
            self.guard.timed_out += 1
            self.close_now()

    def close_now(self) -> None:
        """Close without waiting for the client: the file is freed at once."""
        self._disarm()
        self.guard.closed(self)
        if not self.transport.is_closing():
            self.transport.abort()


def guarded_protocol(guard: ConnectionGuard) -> type[H11Protocol]:
    """uvicorn's h11 protocol class bound to ``guard`` (pass it as ``uvicorn.Config(http=)``)."""
    return type("GuardedH11Protocol", (_GuardedH11Protocol,), {"guard": guard})


class _Throttle:
    """Logs a warning at most once per ``interval_s``, saying how many were left out."""

    def __init__(self, interval_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._interval = interval_s
        self._clock = clock
        self._next = 0.0
        self._skipped = 0

    def __call__(self, message: str, *args: Any) -> bool:
        now = self._clock()
        if now < self._next:
            self._skipped += 1
            return False
        if self._skipped:
            message += f" ({self._skipped:,} more since the last report)"
        logger.warning(message, *args)
        self._skipped = 0
        self._next = now + self._interval
        return True


class AcceptErrorLog:
    """An event-loop exception handler that reports accept errors once per ``interval_s``.

    asyncio's accept loop reports ``EMFILE`` once per connection it could not accept, with a
    traceback, as often as the listening socket is readable: gigabytes of log under a flood.
    Every other error goes to the loop's default handler.
    """

    def __init__(self, interval_s: float = 10.0, clock: Callable[[], float] = time.monotonic):
        self._throttle = _Throttle(interval_s, clock)

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        message = str(context.get("message", ""))
        if message.startswith("socket.accept()") or (
            isinstance(exc, OSError) and exc.errno in _RESOURCE_ERRNOS
        ):
            self._throttle("cannot accept connections: %s", exc or message)
            return
        loop.default_exception_handler(context)
