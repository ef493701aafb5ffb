"""The service's limits and settings, each a ``kp serve`` option."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_THRESHOLD", "ServiceSettings"]

#: The value a contributed trace must reach to be stored, when neither ``kp serve --threshold``
#: nor the base (``kb_meta``) says otherwise.
DEFAULT_THRESHOLD = 0.5


@dataclass(frozen=True)
class ServiceSettings:
    """Limits of one service process.

    Args:
        max_body_bytes: a request body larger than this is refused (413) while it is read.
        max_steps: a trace with more steps is refused (413).
        max_batch: at most this many traces per request (413).
        rate_per_s: requests a key may make per second, on average (0: no limit).
        burst: requests a key may make at once before the rate applies.
        request_timeout_s: scoring or storing that takes longer answers 503.
        read_timeout_s: a body still arriving after this long answers 408.
        workers: embedding and scoring run in at most this many threads at once.
        max_k: the most results a search returns.
        key_cache_s: how long a verified key is trusted before it is looked up again (a
            revoked key stops working within this time).
        allowed_hosts: the Host header values ``/mcp`` takes besides loopback names
            (``name``: any port, ``name:port``): DNS-rebinding protection (docs/mcp.md).
    """

    max_body_bytes: int = 1024 * 1024
    max_steps: int = 1000
    max_batch: int = 256
    rate_per_s: float = 20.0
    burst: int = 40
    request_timeout_s: float = 30.0
    read_timeout_s: float = 30.0
    workers: int = 4
    max_k: int = 100
    key_cache_s: float = 10.0
    allowed_hosts: tuple[str, ...] = ()
