"""Who is asking: the bearer key, its scope, and its share of the rate limit."""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

import anyio.to_thread
from starlette.exceptions import HTTPException
from starlette.requests import Request

from ..kb import ApiKey, KnowledgeBase
from ..kb._keys import hash_key
from ._connections import hold
from ._limits import RateLimiter, retry_after, whole_seconds

__all__ = ["KeyCheck", "KeyStore", "Unauthorized"]

_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="knowledgepulse"'}


class Unauthorized(HTTPException):
    def __init__(self, detail: str) -> None:
        super().__init__(401, detail, headers=_CHALLENGE)


def _too_many(what: str, wait: float) -> HTTPException:
    """A 429 whose text says the wait ``Retry-After`` says."""
    seconds = whole_seconds(wait)
    return HTTPException(429, f"{what}: retry in {seconds} s", headers=retry_after(seconds))


class KeyStore(Protocol):
    """Where keys are verified: a knowledge base, or ``kp view``'s one key (``OneKey``)."""

    def verify_api_key(self, secret: str) -> ApiKey | None: ...


class KeyCheck:
    """Verifies ``Authorization: Bearer KEY`` against the base's keys.

    A verified (or refused) key is remembered for ``cache_s`` seconds, by its hash, so a busy
    client costs one lookup per period, not one per request. A client address that has had
    its share of 401 and 403 answers (``failures``, a bucket per address) is answered 429
    before its key is looked at, until the bucket refills. With ``open_key`` set (``kp view``
    without a key), every request is that key, whatever its header says.
    """

    def __init__(
        self,
        kb: KnowledgeBase | KeyStore,
        limiter: RateLimiter,
        cache_s: float,
        *,
        failures: RateLimiter | None = None,
        max_cached: int = 10_000,
        open_key: ApiKey | None = None,
    ) -> None:
        self._kb = kb
        self._open_key = open_key
        self._limiter = limiter
        self._failures = failures or RateLimiter(0, 1)
        self._cache_s = cache_s
        self._max_cached = max_cached
        self._cache: dict[str, tuple[ApiKey | None, float]] = {}
        self._lock = threading.Lock()

    def require(self, scope: str) -> Callable[[Request], Awaitable[ApiKey]]:
        """A FastAPI dependency: the request's key, which must allow ``scope``."""

        async def dependency(request: Request) -> ApiKey:
            address = request.client.host if request.client else ""
            wait = self._failures.wait(address)
            if wait > 0:
                raise _too_many("too many refused keys from this address", wait)
            try:
                key = await self.identify(request)
                if not key.allows(scope):
                    raise HTTPException(403, f"this key's scope is {key.scope}; this needs {scope}")
            except HTTPException:
                self._failures.take(address)
                raise
            hold(request.scope)  # a valid key: the connection may outlive the header deadline
            wait = self._limiter.take(key.id)
            if wait > 0:
                raise _too_many("rate limit", wait)
            return key

        return dependency

    def charge(self, key: ApiKey, cost: float) -> None:
        """Count ``cost`` more units of work against ``key``'s rate (a batch's traces)."""
        self._limiter.charge(key.id, cost)

    async def identify(self, request: Request) -> ApiKey:
        if self._open_key is not None:
            return self._open_key
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("an API key is needed: Authorization: Bearer KEY")
        key = await self._lookup(token.strip())
        if key is None:
            raise Unauthorized("this API key is not valid (unknown or revoked)")
        return key

    async def _lookup(self, token: str) -> ApiKey | None:
        digest = hash_key(token)
        now = time.monotonic()
        with self._lock:
            cached = self._cache.get(digest)
        if cached is not None and cached[1] > now:
            return cached[0]
        key: ApiKey | None = await anyio.to_thread.run_sync(self._kb.verify_api_key, token)
        with self._lock:
            if len(self._cache) >= self._max_cached:
                self._cache = {d: v for d, v in self._cache.items() if v[1] > now}
                if len(self._cache) >= self._max_cached:
                    self._cache.clear()
            self._cache[digest] = (key, now + self._cache_s)
        return key
