"""What the routes share while the service runs: the engine, the key check, the limits, the
worker pools, and the stop point where work for a timed-out request ends."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from contextvars import ContextVar
from functools import partial
from typing import Any, TypeVar

import anyio
import anyio.to_thread
from starlette.exceptions import HTTPException

from .._schema import ReasoningTrace
from ..kb import ApiKey
from ._auth import KeyCheck, KeyStore
from ._bodies import Redactor, load_redactor
from ._engine import Engine
from ._limits import RateLimiter
from ._settings import ServiceSettings
from ._source import TraceSource

__all__ = ["ReadOnly", "ServiceState", "Stopped", "stop_point"]

T = TypeVar("T")


class Stopped(Exception):
    """The request this work was for has timed out: the work stops at its next stop point."""


_STOP: ContextVar[threading.Event | None] = ContextVar("knowledgepulse_stop", default=None)


def stop_point() -> None:
    """In work run by :meth:`ServiceState.work`: raise :class:`Stopped` once its request has
    timed out (a worker thread cannot be interrupted; long work calls this between parts)."""
    stop = _STOP.get()
    if stop is not None and stop.is_set():
        raise Stopped


def _unchanged(trace: ReasoningTrace) -> ReasoningTrace:
    return trace  # a read-only source stores nothing to redact


class ReadOnly(HTTPException):
    """A write (score, contribute) asked of a source that takes none: 405, never a 5xx."""

    def __init__(self, allow: str = "") -> None:
        super().__init__(
            405,
            "this server reads files and stores nothing (kp view): score and contribute "
            "with kp serve",
            headers={"Allow": allow},  # the methods the path takes: none, or its reads
        )


class ServiceState:
    """What the routes share: the source, the key check, the limits, the worker pools.

    Two pools: ``workers`` threads embed and score, each key holding at most
    ``settings.workers_per_key`` of them at once (its further requests wait their turn, within
    the request timeout); ``read_workers`` other threads answer the cheap reads, so that a
    flood of scoring never delays ``/healthz``, stats, listings or a trace.

    Args:
        source: what the routes read (:class:`KnowledgeBaseSource`, or kp view's files).
        settings: the limits.
        key_store: where keys are verified (default: the source's knowledge base).
        open_key: every request is this key (kp view without a key; see :class:`KeyCheck`).
    """

    def __init__(
        self,
        source: TraceSource,
        settings: ServiceSettings,
        *,
        key_store: KeyStore | None = None,
        open_key: ApiKey | None = None,
    ) -> None:
        self.source = source
        self._engine = source.engine
        self.settings = settings
        self.keys = KeyCheck(
            key_store if key_store is not None else self.engine.kb,
            RateLimiter(settings.rate_per_s, settings.burst),
            settings.key_cache_s,
            failures=RateLimiter(settings.auth_failures_per_s, settings.auth_failure_burst),
            open_key=open_key,
        )
        self.redact: Redactor
        self.redaction: str
        if self._engine is None:
            self.redact, self.redaction = _unchanged, "off: nothing is stored"
        else:
            self.redact, self.redaction = load_redactor()
        self._workers: anyio.CapacityLimiter | None = None
        self._readers: anyio.CapacityLimiter | None = None
        self._shares: dict[str, tuple[anyio.CapacityLimiter, int]] = {}  # key -> (share, users)

    @property
    def engine(self) -> Engine:
        """The engine that scores and stores; :class:`ReadOnly` (405) for a read-only source."""
        if self._engine is None:
            raise ReadOnly
        return self._engine

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
