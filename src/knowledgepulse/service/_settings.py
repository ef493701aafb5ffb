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
        rate_per_s: work a key may ask for per second, on average (0: no limit): a request
            costs 1, and each trace it scores or contributes beyond the first 1 more.
        burst: work a key may ask for at once before the rate applies (a batch larger than
            that is served from a full bucket and leaves the key owing the rest).
        request_timeout_s: scoring or storing that takes longer answers 503.
        read_timeout_s: a body still arriving after this long answers 408.
        workers: embedding and scoring run in at most this many threads at once.
        max_k: the most results a search returns.
        key_cache_s: how long a verified key is trusted before it is looked up again (a
            revoked key stops working within this time).
        header_timeout_s: a request's headers must arrive within this long from accept, or
            from the end of the previous answer on a keep-alive connection (else it closes).
        max_connections: the most connections open at once (lowered below the open-file
            limit); past it a new connection closes the one idle longest.
        key_share: the most worker threads one key's requests hold at once (0: half of
            ``workers``, at least 1).
        read_workers: threads for reads (stats, listings, a trace, /healthz), apart from
            those that embed and score.
        auth_failures_per_s: 401 and 403 answers a client address may get per second, on
            average, before it is answered 429 (0: no limit).
        auth_failure_burst: 401 and 403 answers an address may get at once.
        allowed_hosts: the Host header values ``/mcp`` takes besides loopback names
            (``name``: any port, ``name:port``): DNS-rebinding protection (docs/mcp.md).
        mcp_sessions_per_key: the most MCP sessions one key holds open; a key opening one
            more closes its least recently used one.
        mcp_streams_per_key: the most MCP GET (SSE) streams one key holds open; a key
            opening one more has its oldest one ended.
        mcp_session_idle_s: an MCP session without a request in flight for this long is
            closed (its client opens a new one).
        mcp_stream_s: an MCP GET stream is ended after this long (the client opens it again
            when it wants one), so a held stream cannot keep its session from idling out.
        loopback_hosts_only: refuse (403) every request whose ``Host`` header names anything
            but a loopback name: a page elsewhere cannot reach a server on 127.0.0.1 by
            pointing its own name there (DNS rebinding). On for ``kp view`` on loopback.
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
    header_timeout_s: float = 10.0
    max_connections: int = 1000
    key_share: int = 0
    read_workers: int = 4
    auth_failures_per_s: float = 1.0
    auth_failure_burst: int = 20

    @property
    def workers_per_key(self) -> int:
        return self.key_share or max(1, self.workers // 2)

    allowed_hosts: tuple[str, ...] = ()
    mcp_sessions_per_key: int = 16
    mcp_streams_per_key: int = 4
    mcp_session_idle_s: float = 600.0
    mcp_stream_s: float = 300.0
    loopback_hosts_only: bool = False
