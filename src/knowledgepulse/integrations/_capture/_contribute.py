"""Sending a captured trace to a ``kp serve`` instance: ``POST /v1/traces`` with a Bearer key.

The request goes to the server named and nowhere else, within bounds a hostile or broken
server cannot stretch:

- no redirect is followed (``http.client`` follows none): a 3xx is an error, so the bearer
  key is never sent to a host the caller did not name;
- the whole exchange (connect, send, answer) has one deadline, ``timeout``: a server that
  sends one byte now and then is cut off when it passes, not when it goes quiet;
- at most ``max_answer_bytes`` of the answer are read; a larger one is an error.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import socket
import threading
import time
import urllib.error
import urllib.parse

from ..._schema import ReasoningTrace
from ...scoring._run import accepted_trace
from ...scoring._scorer import ValueScore

__all__ = ["API_KEY_VARIABLE", "MAX_ANSWER_BYTES", "contribute", "post_json"]

#: Where the key comes from when ``api_key`` is not given.
API_KEY_VARIABLE = "KNOWLEDGEPULSE_API_KEY"
#: The largest answer read (``POST /v1/traces`` answers about 2 KB).
MAX_ANSWER_BYTES = 1024 * 1024


def contribute(
    trace: ReasoningTrace,
    score: ValueScore,
    url: str,
    api_key: str | None = None,
    *,
    timeout: float = 10.0,
) -> None:
    """POST the trace (``metadata.quality_score`` set to its value) to ``url``/v1/traces.

    Raises ``OSError`` (``urllib.error.URLError``) when the server cannot be reached, does
    not answer 2xx (a redirect included), answers more than :data:`MAX_ANSWER_BYTES` or takes
    longer than ``timeout`` seconds in all; the message carries the status and the start of
    the server's answer.
    """
    data = accepted_trace(trace, score)
    key = api_key if api_key is not None else os.environ.get(API_KEY_VARIABLE)
    post_json(url, "/v1/traces", data, key, timeout=timeout)


def post_json(
    url: str,
    path: str,
    payload: object,
    key: str | None,
    *,
    timeout: float = 10.0,
    max_answer_bytes: int = MAX_ANSWER_BYTES,
) -> bytes:
    """POST ``payload`` as JSON to ``url`` + ``path`` with ``key`` as its bearer; the answer's
    body. Raises ``urllib.error.URLError`` for anything but a 2xx within the bounds above."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise urllib.error.URLError(f"{url}: expected an http:// or https:// URL")
    connection_type = (
        http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    )
    connection = connection_type(parts.hostname, parts.port, timeout=timeout)
    headers = {"Content-Type": "application/json", "Connection": "close"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
    expired = threading.Event()

    def expire() -> None:  # a blocked read returns once its socket is shut
        expired.set()
        sock = connection.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    watchdog = threading.Timer(timeout, expire)
    watchdog.daemon = True
    started = time.monotonic()
    watchdog.start()
    try:
        connection.request("POST", parts.path.rstrip("/") + path, body, headers)
        response = connection.getresponse()
        answer = _read_bounded(response, max_answer_bytes, url)
        if expired.is_set():  # the shut socket read as the end of the answer
            raise TimeoutError
    except (OSError, http.client.HTTPException) as exc:
        if expired.is_set():
            raise urllib.error.URLError(
                f"{url} took longer than {timeout:g} s to answer (cut off after "
                f"{time.monotonic() - started:.1f} s)"
            ) from None
        if isinstance(exc, urllib.error.URLError):
            raise
        raise urllib.error.URLError(f"{url}: {exc or type(exc).__name__}") from None
    finally:
        watchdog.cancel()
        connection.close()
    if 300 <= response.status < 400:
        where = response.getheader("Location") or "nowhere"
        raise urllib.error.URLError(
            f"{url} answered {response.status} (a redirect to {where}): not followed, the key "
            "goes to the server named only"
        )
    if not 200 <= response.status < 300:
        text = answer[:200].decode("utf-8", "replace")
        raise urllib.error.URLError(f"{url} answered {response.status}: {text}")
    return answer


def _read_bounded(response: http.client.HTTPResponse, limit: int, url: str) -> bytes:
    declared = response.getheader("Content-Length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise urllib.error.URLError(
            f"{url} answered {int(declared):,} bytes; at most {limit:,} are read"
        )
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = response.read1(64 * 1024)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit:
            raise urllib.error.URLError(f"{url} answered more than {limit:,} bytes; not read on")
        chunks.append(chunk)
