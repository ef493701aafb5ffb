"""Request limits: the body size while it is read, and a token bucket per key."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Any

import anyio
from starlette.exceptions import HTTPException
from starlette.requests import Request

__all__ = [
    "DISCARD_BYTES",
    "BodyTooLarge",
    "RateLimiter",
    "read_body",
    "retry_after",
    "whole_seconds",
]


#: A body over the size limit, or the body of a request answered before it was read (401,
#: 403, 429), is still read and thrown away up to this many bytes before the answer is sent
#: (``_answers.SecureAnswers``): a client that sends its whole body before it reads the
#: answer (Python's urllib, most simple clients) then gets the answer, not a connection
#: reset. A body declared larger is answered at once, and the connection closed.
DISCARD_BYTES = 64 * 1024 * 1024


class BodyTooLarge(HTTPException):
    def __init__(self, limit: int, *, close: bool = False) -> None:
        headers = {"Connection": "close"} if close else None
        super().__init__(413, f"the request body is larger than {limit:,} bytes", headers)


async def read_body(request: Request, limit: int, timeout_s: float) -> bytes:
    """The body, refused as soon as it passes ``limit`` bytes (413) or takes longer than
    ``timeout_s`` to arrive (408): a client cannot make the server buffer more than ``limit``
    bytes, nor hold a worker with a body it sends slowly."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(limit, close=int(declared) > DISCARD_BYTES)
    chunks: list[bytes] = []
    size = 0
    with anyio.move_on_after(timeout_s) as scope:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise BodyTooLarge(limit)
            chunks.append(chunk)
    if scope.cancelled_caught:
        raise HTTPException(
            408,
            f"the request body took longer than {timeout_s:g} s to arrive",
            {"Connection": "close"},
        )
    return b"".join(chunks)


class RateLimiter:
    """A token bucket per key: ``burst`` requests at once, refilled at ``rate_per_s``.

    In-process: each replica counts its own requests (behind a load balancer a key gets
    about replicas × rate).
    """

    def __init__(
        self,
        rate_per_s: float,
        burst: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_keys: int = 100_000,
    ) -> None:
        self.rate = rate_per_s
        self.burst = max(1, burst)
        self._clock = clock
        self._max_keys = max_keys
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, last refill)
        self._lock = threading.Lock()

    def take(self, key: str) -> float:
        """Spend one token of ``key``'s bucket: 0.0 when allowed, else the seconds until a
        token is there (the request is refused and nothing is spent)."""
        return self._spend(key, 1.0)

    def wait(self, key: str) -> float:
        """The seconds until ``key`` has a token (0.0: it has one now); spends nothing."""
        return self._spend(key, 0.0)

    def charge(self, key: str, cost: float) -> None:
        """Spend ``cost`` more tokens of ``key``'s bucket, into debt if need be: work found
        to be larger than one token once the request is read (a batch of traces) is paid
        for by the key's next requests."""
        if cost > 0:
            self._spend(key, cost, owe=True)

    def _spend(self, key: str, cost: float, *, owe: bool = False) -> float:
        if self.rate <= 0:
            return 0.0
        now = self._clock()
        with self._lock:
            tokens, last = self._buckets.get(key, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - last) * self.rate)
            if owe or tokens >= 1.0:
                self._remember(key, tokens - cost, now)
                return 0.0
            self._remember(key, tokens, now)
            return (1.0 - tokens) / self.rate

    def _remember(self, key: str, tokens: float, now: float) -> None:
        if len(self._buckets) >= self._max_keys and key not in self._buckets:
            # Full buckets carry no information: forgetting them changes nothing.
            self._buckets = {
                k: v
                for k, v in self._buckets.items()
                if v[0] + (now - v[1]) * self.rate < self.burst
            }
        self._buckets[key] = (tokens, now)


def whole_seconds(seconds: float) -> int:
    """A wait as ``Retry-After`` says it: whole seconds, rounded up, at least 1."""
    return max(1, math.ceil(seconds))


def retry_after(seconds: float) -> dict[str, Any]:
    """The ``Retry-After`` header for a wait of ``seconds``."""
    return {"Retry-After": str(whole_seconds(seconds))}
